-- rdma_cm on rxe0 (192.0.2.1) with QPs: RDMA read/write and sends through the
-- rdma_verbs helpers, SRQs made on an id, UD (udp port space) with address
-- handles from the cm, multicast, a synchronous listener.
local cm = require "ibverbs.cm"

local ADDR = "192.0.2.1"
local GRH = 40 -- a UD receive starts with the global routing header
local next_port = 7700
local function port()
  next_port = next_port + 1
  return next_port
end

local CAP = {max_send_wr = 8, max_recv_wr = 8, max_send_sge = 1, max_recv_sge = 1}

-- A listener and a client with its QP on ch, the client's address and route
-- resolved and its connect sent; returns listen, client, the request event.
local function request(ch, ps, p)
  local listen = assert(ch:create_id{ps = ps})
  assert(listen:bind_addr(ADDR .. ":" .. p))
  assert(listen:listen(4))
  local client = assert(ch:create_id{ps = ps})
  assert(client:resolve_addr(nil, ADDR .. ":" .. p, 2000))
  assert(cm.expect(ch, "addr_resolved", 5))
  assert(client:resolve_route(2000))
  assert(cm.expect(ch, "route_resolved", 5))
  assert(client:create_qp{cap = CAP})
  assert.is_true(client:connect{private_data = "c"})
  local req = assert(cm.expect(ch, "connect_request", 5))
  assert.equal(listen, req.listen_id)
  return listen, client, req
end

-- A connected RC pair in one process; setup(server_id) runs on the request's
-- id before its QP is made (an SRQ, receives).
local function rc_pair(setup)
  local ch = assert(cm.event_channel())
  local listen, client, req = request(ch, "tcp", port())
  local server = req.id
  if setup then setup(server) end
  if not server.qp then assert(server:create_qp{cap = CAP}) end
  assert.is_true(server:accept())
  assert.equal(client, assert(cm.expect(ch, "established", 5)).id)
  assert.equal(server, assert(cm.expect(ch, "established", 5)).id)
  return {ch = ch, listen = listen, client = client, server = server}
end

local function teardown(env)
  assert.is_true(env.client:disconnect())
  assert.equal(env.server, assert(cm.expect(env.ch, "disconnected", 5)).id)
  assert.is_true(env.server:disconnect())
  assert.equal(env.client, assert(cm.expect(env.ch, "disconnected", 5)).id)
  assert.is_true(env.server:close())
  assert.is_true(env.client:close())
  assert.is_true(env.listen:close())
  assert.is_true(env.ch:close())
end

describe("on rxe0, connected rdma_cm ids with QPs", function()
  it("RDMA-read and RDMA-write the peer's MRs through post_read/post_write, then disconnect", function()
    local env = rc_pair()
    local src = assert(env.server:reg_read(64))
    src:write(0, "read me, client")
    local dst = assert(env.server:reg_write(64))
    local mine = assert(env.client:reg_msgs(64))

    assert.is_true(env.client:post_read(11, mine, 0, 15, nil, src.addr, src.rkey))
    local wc = assert(env.client:get_send_comp(5))
    assert.equal("success", wc.status)
    assert.equal("rdma_read", wc.opcode)
    assert.equal(11, wc.wr_id)
    assert.equal("read me, client", mine:read(0, 15))

    mine:write(16, "written by the client")
    assert.is_true(env.client:post_write(12, mine, 16, 21, {"signaled"}, dst.addr + 8, dst.rkey))
    wc = assert(env.client:get_send_comp(5))
    assert.equal("success", wc.status)
    assert.equal("rdma_write", wc.opcode)
    assert.equal(12, wc.wr_id)
    assert.equal("written by the client", dst:read(8, 21))

    -- a wrong rkey is a completion error, not a Lua error
    assert.is_true(env.client:post_write(13, mine, 0, 4, nil, dst.addr, dst.rkey + 1))
    wc = assert(env.client:get_send_comp(5))
    assert.equal(13, wc.wr_id)
    assert.equal("rem_access_err", wc.status)
    src:close(); dst:close(); mine:close()
    teardown(env)
  end)

  it("sends both ways with post_send/post_recv and get_send_comp/get_recv_comp", function()
    local smr
    local env = rc_pair(function(server)
      assert(server:create_qp{cap = CAP})
      smr = assert(server:reg_msgs(64))
      assert.is_true(server:post_recv(21, smr))
    end)
    local cmr = assert(env.client:reg_msgs(64))
    assert.is_true(env.client:post_recv(22, cmr, 32, 32))
    cmr:write(0, "ping")
    assert.is_true(env.client:post_send(23, cmr, 0, 4))
    assert.equal("success", assert(env.client:get_send_comp(5)).status)
    local wc = assert(env.server:get_recv_comp(5))
    assert.equal(21, wc.wr_id)
    assert.equal(4, wc.byte_len)
    assert.equal("ping", smr:read(0, 4))
    smr:write(8, "pong!")
    assert.is_true(env.server:post_send(24, smr, 8, 5))
    assert.equal(24, assert(env.server:get_send_comp(5)).wr_id)
    wc = assert(env.client:get_recv_comp(5))
    assert.equal(22, wc.wr_id)
    assert.equal("pong!", cmr:read(32, 5))
    -- no completion comes: nil, msg, ETIMEDOUT after the timeout
    local none, msg, errno = env.client:get_recv_comp(0.1)
    assert.is_nil(none)
    assert.matches("timed out", msg)
    assert.equal(110, errno)
    smr:close(); cmr:close()
    teardown(env)
  end)

  it("receives through an SRQ made on the id with create_srq, which the id's QP then uses", function()
    local smr, srq
    local env = rc_pair(function(server)
      srq = assert(server:create_srq{max_wr = 16})
      assert.equal("ibverbs.srq", getmetatable(srq).__name)
      assert.equal(srq, server.srq)
      assert.is_true(srq.max_wr >= 16)
      local again, _, errno = server:create_srq{max_wr = 4}
      assert.is_nil(again)
      assert.equal(17, errno) -- EEXIST: one SRQ per id
      smr = assert(server:reg_msgs(256))
      for i = 0, 3 do assert.is_true(server:post_recv(100 + i, smr, i * 64, 64)) end
    end)
    assert.equal(srq.srq_type, "basic")
    local cmr = assert(env.client:reg_msgs(64))
    for i = 0, 3 do
      cmr:write(0, "msg" .. i)
      assert.is_true(env.client:post_send(i, cmr, 0, 4))
      assert.equal("success", assert(env.client:get_send_comp(5)).status)
      local wc = assert(env.server:get_recv_comp(5))
      assert.equal(100 + i, wc.wr_id)
      assert.equal("msg" .. i, smr:read(i * 64, 4))
    end
    -- the QP uses the SRQ: destroying it first is refused, after the QP it works
    local ok, _, errno = env.server:destroy_srq()
    assert.is_nil(ok)
    assert.equal(16, errno)
    smr:close(); cmr:close()
    assert.is_true(env.client:disconnect())
    assert(cm.expect(env.ch, "disconnected", 5))
    assert.is_true(env.server:destroy_qp())
    assert.is_true(env.server:destroy_srq())
    assert.is_true(srq:is_closed())
    assert.is_nil(env.server.srq)
    env.server:close(); env.client:close(); env.listen:close(); env.ch:close()
  end)

  it("closes an id with its QP, SRQ and CQs while the script still holds them", function()
    local env = rc_pair(function(server) assert(server:create_srq{max_wr = 4}) end)
    local qp, srq, cq = env.server.qp, env.server.srq, env.server.recv_cq
    assert.is_true(env.server:close())
    assert.is_true(qp:is_closed())
    assert.is_true(srq:is_closed())
    assert.is_true(cq:is_closed())
    assert.has_error(function() qp:query() end, "query: attempt to use a closed ibverbs.qp")
    env.client:close(); env.listen:close(); env.ch:close()
  end)
end)

describe("on rxe0, UD rdma_cm ids (udp port space)", function()
  it("resolve the peer's QP through SIDR and send with an address handle from the event", function()
    local ch = assert(cm.event_channel())
    local listen, client, req = request(ch, "udp", port())
    assert.equal("ud", client.qp.qp_type)
    local server = req.id
    assert.equal("ud", server.qp_type)
    assert(server:create_qp{cap = CAP})
    local smr = assert(server:reg_msgs(GRH + 64))
    assert.is_true(server:post_recv(1, smr))
    assert.is_true(server:accept())
    local ev = assert(cm.expect(ch, "established", 5))
    assert.equal(client, ev.id)
    assert.equal(server.qp.qp_num, ev.ud.qp_num)
    assert.equal(0x01234567, ev.ud.qkey) -- RDMA_UDP_QKEY
    assert.is_table(ev.ud.ah_attr.grh)
    local ah = assert(client.pd:create_ah(ev.ud.ah_attr))
    local cmr = assert(client:reg_msgs(64))
    cmr:write(0, "datagram")
    assert.is_true(client:post_ud_send(5, cmr, 0, 8, nil, ah, ev.ud.qp_num))
    assert.equal("success", assert(client:get_send_comp(5)).status)
    local wc = assert(server:get_recv_comp(5))
    assert.equal("success", wc.status)
    assert.equal(GRH + 8, wc.byte_len)
    assert.equal(client.qp.qp_num, wc.src_qp)
    assert.equal("datagram", smr:read(GRH, 8))
    assert.has_error(function() client:post_ud_send(5, cmr, 0, 8, nil, nil, 1) end)
    ah:close(); smr:close(); cmr:close()
    assert.is_true(server:close())
    assert.is_true(client:close())
    assert.is_true(listen:close())
    assert.is_true(ch:close())
  end)

  it("join a multicast group (attaching the QP), get its address handle, and leave", function()
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id{ps = "udp"})
    assert(id:bind_addr(ADDR .. ":0"))
    assert(id:create_qp{cap = CAP})
    assert.is_true(id:join_multicast("239.1.2.3"))
    local ev = assert(cm.expect(ch, "multicast_join", 5))
    assert.equal(id, ev.id)
    assert.equal(0xffffff, ev.ud.qp_num)
    assert.equal(0x01234567, ev.ud.qkey)
    assert.equal("::ffff:239.1.2.3", ev.ud.ah_attr.grh.dgid)
    local ah = assert(id.pd:create_ah(ev.ud.ah_attr))
    local mr = assert(id:reg_msgs(64))
    -- the send completes (spec/device/verbs/multicast_spec.lua checks a member receives it)
    assert.is_true(id:post_ud_send(1, mr, 0, 8, nil, ah, 0xffffff))
    assert.equal("success", assert(id:get_send_comp(5)).status)
    assert.is_true(id:leave_multicast("239.1.2.3"))
    local ok, msg, errno = id:leave_multicast("239.1.2.3")
    assert.is_nil(ok)
    assert.matches("^rdma_leave_multicast: ", msg)
    assert.equal(99, errno) -- EADDRNOTAVAIL: not joined
    ah:close(); mr:close()
    assert.is_true(id:close())
    assert.is_true(ch:close())
  end)
end)

describe("on rxe0, a synchronous listener in the same process", function()
  it("returns the request from get_request; the request id migrates to a channel to accept", function()
    local p = port()
    local ch = assert(cm.event_channel())
    local listen = assert(cm.create_id{ps = "tcp"})
    assert(listen:bind_addr(ADDR .. ":" .. p))
    assert(listen:listen(1))
    local none, _, errno = listen:get_request(0.05)
    assert.is_nil(none)
    assert.equal(110, errno)
    local client = assert(ch:create_id{ps = "tcp"})
    assert(client:resolve_addr(nil, ADDR .. ":" .. p, 2000))
    assert(cm.expect(ch, "addr_resolved", 5))
    assert(client:resolve_route(2000))
    assert(cm.expect(ch, "route_resolved", 5))
    assert(client:create_qp{cap = CAP})
    assert.is_true(client:connect{private_data = "sync"})
    local server = assert(listen:get_request(5))
    assert.equal("connect_request", server.event.event)
    assert.equal("sync", server.event.private_data:sub(1, 4))
    assert.is_nil(server.qp) -- the listener has no QP template (create_ep gives one)
    -- a synchronous accept would wait for the client's RTU, which this
    -- single thread sends only from get_event: accept on a channel instead
    assert.is_true(server:migrate_id(ch))
    assert(server:create_qp{cap = CAP})
    assert.is_true(server:accept())
    assert.equal(client, assert(cm.expect(ch, "established", 5)).id)
    assert.equal(server, assert(cm.expect(ch, "established", 5)).id)
    teardown({ch = ch, listen = listen, client = client, server = server})
  end)
end)
