-- rdma_cm calls beyond setup and the plain helpers, on rxe0: the device list,
-- rdma_init_qp_attr driving a QP the cm did not make, rdma_notify, ECE, the
-- vectored rdma_post_*v helpers, rdma_event_str.
local cm = require "ibverbs.cm"
local support = require "support"

local ADDR = "192.0.2.1"
local next_port = 7800
local function port()
  next_port = next_port + 1
  return next_port
end
local CAP = {max_send_wr = 8, max_recv_wr = 8, max_send_sge = 4, max_recv_sge = 4, max_inline_data = 32}

-- A client id with its address and route resolved and a listener, on ch.
local resolved = support.cm_resolved

-- A connected pair whose QPs the cm made: {ch, listen, client, server}
local function rc_pair()
  local ch = assert(cm.event_channel())
  local listen, client = resolved(ch, port())
  assert(client:create_qp{cap = CAP})
  assert.is_true(client:connect())
  local server = assert(cm.expect(ch, "connect_request", 5)).id
  assert(server:create_qp{cap = CAP})
  assert.is_true(server:accept())
  assert(cm.expect(ch, "established", 5))
  assert(cm.expect(ch, "established", 5))
  return {ch = ch, listen = listen, client = client, server = server}
end

local function close_all(env)
  env.client:close(); env.server:close(); env.listen:close(); env.ch:close()
end

describe("on rxe0, rdma_cm", function()
  it("lists its devices as contexts that work and that closing does not destroy", function()
    local devs = assert(cm.get_devices())
    local names = {}
    for _, ctx in ipairs(devs) do names[ctx:name()] = ctx end
    local ctx = assert(names[support.DEVICE])
    assert.equal("active", ctx:query_port(1).state)
    local pd = assert(ctx:alloc_pd())
    assert.is_true(pd:close())
    assert.is_true(ctx:close())
    devs = nil -- luacheck: ignore
    collectgarbage()
    collectgarbage()
    local again = assert(cm.get_devices())
    assert.is_true(#again >= 1)
    assert.equal("active", again[1]:query_port(1).state)
  end)

  it("names event types as librdmacm does", function()
    assert.equal("RDMA_CM_EVENT_ESTABLISHED", cm.event_str("established"))
    assert.equal("RDMA_CM_EVENT_ADDR_RESOLVED", cm.event_str(0))
    assert.equal("UNKNOWN EVENT", cm.event_str(1000))
    assert.has_error(function() cm.event_str("no_such_event") end)
  end)

  it("connects a QP made with verbs through init_qp_attr's attributes and qp_num", function()
    local ch = assert(cm.event_channel())
    local listen, client = resolved(ch, port())
    local ctx = client.context
    local pd = assert(ctx:alloc_pd())
    local cq = assert(ctx:create_cq(16))
    local qp = assert(pd:create_qp{qp_type = "rc", send_cq = cq, recv_cq = cq, cap = CAP})
    local init = assert(client:init_qp_attr("init"))
    assert.equal("init", init.qp_state)
    assert.is_number(init.port_num)
    assert.is_number(init.pkey_index)
    assert.is_true(qp:modify(init))
    -- ECE: a vendor's options offered with the connection (no cm QP on this id)
    assert.is_true(client:set_local_ece{vendor_id = 0x15b3, options = 0x5})
    assert.is_true(client:connect{qp_num = qp.qp_num})
    local req = assert(cm.expect(ch, "connect_request", 5))
    local server = req.id
    local ece = assert(server:get_remote_ece())
    assert.is_number(ece.vendor_id)
    assert.is_number(ece.options)
    assert(server:create_qp{cap = CAP})
    assert.is_true(server:accept())
    local resp = assert(cm.expect(ch, "connect_response", 5))
    assert.equal(client, resp.id)
    local rtr = assert(client:init_qp_attr("rtr"))
    assert.equal("rtr", rtr.qp_state)
    assert.equal(server.qp.qp_num, rtr.dest_qp_num)
    assert.is_table(rtr.ah_attr)
    assert.is_true(qp:modify(rtr))
    local rts = assert(client:init_qp_attr("rts"))
    assert.is_true(qp:modify(rts))
    assert.equal("rts", qp:query().qp_state)
    assert.is_true(client:establish())
    assert(cm.expect(ch, "established", 5))
    -- traffic over the verbs QP to the cm QP
    local mr = assert(pd:reg_mr(64))
    mr:write(0, "verbs qp")
    local smr = assert(server:reg_msgs(64))
    assert.is_true(server:post_recv(1, smr))
    assert(qp:post_send{wr_id = 2, send_flags = {"signaled"}, sge = {mr = mr, length = 8}})
    assert.equal("success", support.completions(cq, 1)[1].status)
    assert.equal("success", assert(server:get_recv_comp(5)).status)
    assert.equal("verbs qp", smr:read(0, 8))
    -- notify: the cm accepts an event for a QP it did not make
    local ok, msg = client:notify("comm_est")
    assert(ok or msg:match("^rdma_notify: "), msg)
    assert.has_error(function() client:notify("no_such_event") end)
    assert.has_error(function() client:init_qp_attr("nonsense") end)
    mr:close(); smr:close()
    server:close(); client:close(); qp:close(); cq:close(); pd:close(); listen:close(); ch:close()
  end)

  it("refuses ECE on an id with a cm QP, and rejects with the ECE reason", function()
    local ch = assert(cm.event_channel())
    local listen, client = resolved(ch, port())
    assert(client:create_qp{cap = CAP})
    local ok, msg, errno = client:set_local_ece{vendor_id = 1, options = 0}
    assert.is_nil(ok)
    assert.matches("^rdma_set_local_ece: ", msg)
    assert.equal(22, errno) -- EINVAL: the id has a QP
    ok, msg, errno = client:get_remote_ece()
    assert.matches("^rdma_get_remote_ece: ", msg)
    assert.is_nil(ok)
    assert.equal(22, errno)
    assert.has_error(function() client:set_local_ece{vendor = 1} end)
    assert.is_true(client:connect())
    local server = assert(cm.expect(ch, "connect_request", 5)).id
    assert.is_true(server:reject_ece("no"))
    local ev = assert(ch:get_event(5))
    assert.equal("rejected", ev.event)
    assert.equal(35, ev.status) -- the IBTA reason: vendor option not supported
    server:close(); client:close(); listen:close(); ch:close()
  end)

  it("posts scatter/gather lists with the vectored helpers", function()
    local env = rc_pair()
    local c, s = env.client, env.server
    local cmr = assert(c:reg_msgs(256))
    local smr = assert(s.pd:reg_mr(256, {"local_write", "remote_write", "remote_read"}))
    assert.is_true(s:post_recvv(1, {{mr = smr, offset = 0, length = 4}, {mr = smr, offset = 100, length = 8}}))
    cmr:write(0, "abcd"); cmr:write(50, "efghijkl")
    assert.is_true(c:post_sendv(2, {{mr = cmr, offset = 0, length = 4}, {mr = cmr, offset = 50, length = 8}}))
    assert.equal("success", assert(c:get_send_comp(5)).status)
    local wc = assert(s:get_recv_comp(5))
    assert.equal(1, wc.wr_id)
    assert.equal(12, wc.byte_len)
    assert.equal("abcd", smr:read(0, 4))
    assert.equal("efghijkl", smr:read(100, 8))
    -- writev: two pieces into one remote range; readv: back into two pieces
    cmr:write(128, "12"); cmr:write(140, "345")
    assert.is_true(c:post_writev(3, {{mr = cmr, offset = 128, length = 2}, {mr = cmr, offset = 140, length = 3}},
      nil, smr.addr + 200, smr.rkey))
    assert.equal("success", assert(c:get_send_comp(5)).status)
    assert.equal("12345", smr:read(200, 5))
    assert.is_true(c:post_readv(4, {{mr = cmr, offset = 10, length = 3}, {mr = cmr, offset = 20, length = 2}},
      nil, smr.addr + 200, smr.rkey))
    assert.equal("success", assert(c:get_send_comp(5)).status)
    assert.equal("123", cmr:read(10, 3))
    assert.equal("45", cmr:read(20, 2))
    -- inline: only from MRs, and within the QP's inline size
    assert.is_true(s:post_recvv(7, {{mr = smr, offset = 64, length = 16}}))
    assert.is_true(c:post_sendv(5, {{mr = cmr, offset = 0, length = 4}}, {"inline", "signaled"}))
    assert.equal("success", assert(c:get_send_comp(5)).status)
    assert.equal(7, assert(s:get_recv_comp(5)).wr_id)
    assert.equal("abcd", smr:read(64, 4))
    assert.has_error(function() c:post_sendv(6, {{addr = 4096, length = 4, lkey = 0}}, {"inline"}) end)
    assert.has_error(function() c:post_sendv(6, {{mr = cmr, length = 200}}, {"inline"}) end)
    assert.has_error(function() c:post_sendv(6, {{mr = cmr, offset = 300}}) end)
    cmr:close(); smr:close()
    close_all(env)
  end)

  it("refuses the vectored helpers on an id without a QP and sends on a UD id", function()
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id{ps = "udp"})
    assert(id:bind_addr(ADDR .. ":0"))
    local pd = id.pd
    local mr = assert(pd:reg_mr(64))
    assert.has_error(function() id:post_sendv(1, {{mr = mr}}) end, nil)
    assert(id:create_qp{cap = CAP})
    assert.has_error(function() id:post_sendv(1, {{mr = mr}}) end)
    assert.is_true(id:post_recvv(1, {{mr = mr}}))
    mr:close(); id:close(); ch:close()
  end)
end)
