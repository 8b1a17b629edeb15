-- rdma_cm on rxe0 (192.0.2.1): connection setup, rejects, disconnects, errors.
local cm = require "ibverbs.cm"
local support = require "support"

local ADDR = "192.0.2.1"
local next_port = 7600
local function port()
  next_port = next_port + 1
  return next_port
end

-- An async listener and a client id on one channel, up to the connect request.
local request = support.cm_resolved

describe("on rxe0, an rdma_cm event channel", function()
  it("connects two ids without QPs, carrying private data both ways, then disconnects", function()
    local ch = assert(cm.event_channel())
    local p = port()
    local listen, client = request(ch, p)
    assert.equal(ADDR .. ":" .. p, listen:get_local_addr())
    assert.is_true(client:connect{private_data = "hello", qp_num = 0x1234, srq = false})
    local req = assert(cm.expect(ch, "connect_request", 5))
    assert.equal(listen, req.listen_id)
    assert.equal("ibverbs.cm_id", getmetatable(req.id).__name)
    assert.equal("hello", req.private_data:sub(1, 5))
    assert.equal(0x1234, req.conn.qp_num)
    assert.equal(ADDR .. ":" .. client:get_src_port(), req.id:get_peer_addr())
    assert.is_true(req.id:accept{private_data = "welcome", qp_num = 0x4321})
    local resp = assert(cm.expect(ch, "connect_response", 5))
    assert.equal(client, resp.id)
    assert.equal("welcome", resp.private_data:sub(1, 7))
    assert.equal(0x4321, resp.conn.qp_num)
    assert.is_true(client:establish())
    assert.equal(req.id, assert(cm.expect(ch, "established", 5)).id)
    -- the DREQ reaches the passive side; its own disconnect sends the DREP
    -- that completes the active side's
    assert.is_true(client:disconnect())
    assert.equal(req.id, assert(cm.expect(ch, "disconnected", 5)).id)
    assert.is_true(req.id:disconnect())
    assert.equal(client, assert(cm.expect(ch, "disconnected", 5)).id)
    assert.is_true(req.id:close())
    assert.is_true(client:close())
    assert.is_true(listen:close())
    assert.is_true(ch:close())
  end)

  it("delivers a reject with its private data and reason", function()
    local ch = assert(cm.event_channel())
    local listen, client = request(ch, port())
    assert(client:connect{qp_num = 1})
    local req = assert(cm.expect(ch, "connect_request", 5))
    assert.is_true(req.id:reject("go away"))
    local ev = assert(cm.expect(ch, "rejected", 5))
    assert.equal(client, ev.id)
    assert.equal("go away", ev.private_data:sub(1, 7))
    assert.equal(28, ev.status) -- IB_CM_REJ_CONSUMER_DEFINED
    req.id:close(); client:close(); listen:close(); ch:close()
  end)

  it("reports an address without a route as a clean error, without hanging", function()
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id())
    local t0 = os.time()
    local ok, msg = id:resolve_addr(nil, "203.0.113.9:7471", 500)
    if ok then
      local ev = assert(ch:get_event(10))
      assert.equal("addr_error", ev.event)
      assert.is_true(ev.status < 0)
    else
      assert.matches("^rdma_resolve_addr: ", msg)
    end
    local sid = assert(cm.create_id())
    local r, smsg, serr = sid:resolve_addr(nil, "203.0.113.9:7471", 500)
    assert.is_nil(r)
    assert.matches("^rdma_resolve_addr: ", smsg)
    assert.is_number(serr)
    assert.is_true(os.time() - t0 < 10)
    id:close(); sid:close(); ch:close()
  end)
end)

describe("on rxe0, synchronous rdma_cm ids", function()
  it("connect with getaddrinfo/create_ep and get_request in two processes, send, and disconnect", function()
    local p = port()
    local lua = jit and "luajit" or "lua5.4"
    local server = assert(io.popen("timeout 120 " .. lua .. " spec/cm/ep_server.lua " .. ADDR .. " " .. p))
    assert.equal("ready", server:read("l"))
    local ai = assert(cm.getaddrinfo(ADDR, tostring(p), {port_space = "tcp"}))
    assert.equal(ADDR .. ":" .. p, ai.dst_addr)
    local cap = {max_send_wr = 4, max_recv_wr = 4, max_send_sge = 1, max_recv_sge = 1}
    local client = assert(cm.create_ep(ai, {qp_init_attr = {cap = cap}}))
    assert.equal("ibverbs.qp", getmetatable(client.qp).__name)
    assert.equal("ibverbs.cq", getmetatable(client.send_cq).__name)
    assert.is_true(client:connect{private_data = "ep"})
    assert.equal("established", client.event.event)
    local mr = assert(client:reg_msgs(64))
    mr:write(0, "ping")
    assert(client:post_send(9, mr, 0, 4))
    local wc = assert(client:get_send_comp(60)) -- the peer and this side share a loaded VM (20 s ran out once)
    assert.equal("success", wc.status)
    assert.equal(9, wc.wr_id)
    assert.equal("got ping ep", server:read("l"))
    assert.is_true(client:disconnect())
    assert.equal("disconnected", client.event.event)
    assert.equal("disconnect disconnected", server:read("l"))
    server:close()
    assert(client:dereg_mr(mr))
    assert.is_true(client:close()) -- the closed MR, still held here, no longer counts
    assert.is_true(mr:is_closed())
  end)

  it("frees ids, QPs and CQs in any order under the GC", function()
    for i = 1, 6 do
      local ch = cm.event_channel()
      local id = ch:create_id()
      id:resolve_addr(nil, ADDR .. ":1", 2000)
      ch:get_event(5)
      local qp = id:create_qp{cap = {max_send_wr = 2, max_recv_wr = 2}}
      assert.equal("ibverbs.qp", getmetatable(qp).__name)
      if i % 2 == 0 then id:reg_msgs(128) end
      if i % 3 == 0 then qp:close() end
    end
    collectgarbage(); collectgarbage()
  end)
end)
