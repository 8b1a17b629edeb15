-- rdma_cm ids on rxe0, the object itself: cm.create_id and ch:create_id and
-- their fields, binding and the addresses and ports an id reports, listen,
-- the calls verbs refuses (nil, msg, errno: an address not local, a port in
-- use, a second listen, a reject or disconnect without a connection, a
-- request that never comes), the calls made out of order and bad arguments
-- (raising, named), and close.  (Connections: cm_connect_spec.lua; traffic:
-- cm_traffic_spec.lua; the calls beyond setup: cm_api_spec.lua.)
local cm = require "ibverbs.cm"
local support = require "support"

local ADDR = support.CM_ADDR
local EINVAL, EADDRINUSE, EADDRNOTAVAIL, ETIMEDOUT = 22, 98, 99, 110

local function fails(call, errno, ok, msg, e)
  assert.is_nil(ok)
  assert.equal(call, msg:match("^[%w_]+"), msg)
  assert.equal(errno, e, msg)
end

describe("on rxe0, a cm id", function()
  it("is made synchronous by cm.create_id, with its port space's QP type and no device until bound", function()
    local id = assert(cm.create_id())
    assert.equal("ibverbs.cm_id", getmetatable(id).__name)
    assert.same({ "tcp", "rc" }, { id.ps, id.qp_type })
    assert.is_nil(id.context)
    assert.is_nil(id.qp)
    assert.is_false(id:is_closed())
    local ud = assert(cm.create_id{ ps = "udp" })
    assert.same({ "udp", "ud" }, { ud.ps, ud.qp_type })
    assert.is_true(ud:close() and id:close())
  end)

  it("bound, names its device, address and port; listens; a second listen is EINVAL", function()
    local id = assert(cm.create_id{ ps = "tcp" })
    assert.is_true(id:bind_addr(ADDR .. ":7962"))
    assert.equal("ibverbs.context", getmetatable(id.context).__name)
    assert.equal(support.DEVICE, id.context:name())
    assert.equal(ADDR .. ":7962", id:get_local_addr())
    assert.equal(7962, id:get_src_port())
    assert.equal(0, id:get_dst_port())
    assert.equal("0.0.0.0:0", id:get_peer_addr())
    assert.is_true(id:listen(4))
    assert.is_true(support.wait_cm_listen(7962, 5))
    fails("rdma_listen", EINVAL, id:listen(4))
    -- a synchronous listener with no request: get_request times out
    fails("rdma_get_request", ETIMEDOUT, id:get_request(0.1))
    assert.is_true(id:close())
  end)

  it("gives nil, msg, errno where rdma_cm refuses the call", function()
    local id = assert(cm.create_id())
    fails("rdma_bind_addr", EADDRNOTAVAIL, id:bind_addr("203.0.113.9:7963"))
    assert.is_true(id:bind_addr(ADDR .. ":7963"))
    local other = assert(cm.create_id())
    fails("rdma_bind_addr", EADDRINUSE, other:bind_addr(ADDR .. ":7963"))
    fails("rdma_reject", EINVAL, other:reject("x"))
    fails("rdma_disconnect", EINVAL, other:disconnect())
    assert.is_true(other:bind_addr(ADDR .. ":0")) -- still usable: an ephemeral port
    assert.is_true(other:get_src_port() > 0)
    assert.is_true(other:close() and id:close())
  end)

  it("raises for a call made before the step it needs, saying which", function()
    local id = assert(cm.create_id())
    assert.error_matches(function() id:connect() end, "connect: the route is not resolved yet", 1, true)
    assert.error_matches(function() id:resolve_route(100) end, "resolve_route: the address is not resolved yet", 1,
      true)
    assert.error_matches(function() id:accept() end, "accept: the id has no connection request to accept", 1, true)
    assert.error_matches(function() id:create_qp{} end, "create_qp: the id is not bound to a device yet", 1, true)
    assert.is_true(id:close())
  end)

  it("raises on bad arguments, naming them", function()
    local id = assert(cm.create_id())
    assert.error_matches(function() id:bind_addr(5) end, "bad argument #1 to 'bind_addr' (string expected", 1, true)
    assert.error_matches(function() id:resolve_addr(nil, ADDR .. ":1", -1) end,
      "bad argument #3 to 'resolve_addr' (-1 out of range [1, 2147483647])", 1, true)
    assert.error_matches(function() id:listen(-1) end, "bad argument #1 to 'listen' (-1 out of range", 1, true)
    assert.error_matches(function() id:set_option("tos", "x") end, "bad argument #2 to 'set_option'", 1, true)
    assert.error_matches(function() cm.create_id{ pss = "tcp" } end, "create_id: attr: unknown field 'pss'", 1, true)
    assert.is_true(id:set_option("tos", 5))
    assert.is_true(id:close())
  end)

  it("rejects malformed addresses and unknown fields as misuse", function()
    local id = assert(cm.create_id{ps = "udp"})
    assert.equal("udp", id.ps)
    assert.equal("ud", id.qp_type)
    assert.has_error(function() id:bind_addr("not an address") end)
    assert.has_error(function() cm.create_id{ps = "nope"} end)
    assert.has_error(function() id:connect{qp_nmu = 1} end, "connect: conn_param: unknown field 'qp_nmu'")
    assert.has_error(function() id:set_option("bogus", 1) end)
    assert.is_true(id:set_option("reuseaddr", true))
    assert.is_true(id:close())
    assert.has_error(function() id:get_local_addr() end, "get_local_addr: attempt to use a closed ibverbs.cm_id")
  end)

  it("migrates between channels and to synchronous, and closes twice harmlessly", function()
    local ch = assert(cm.event_channel())
    local id = assert(cm.create_id())
    assert.is_true(id:migrate_id(ch))
    local ok, _, errno = ch:close()
    assert.same({ nil, 16 }, { ok, errno }) -- the id uses the channel now
    assert.is_true(id:close())
    assert.is_true(id:close())
    assert.is_true(id:is_closed())
    assert.matches("closed", tostring(id))
    assert.has_error(function() id:bind_addr(ADDR .. ":0") end, "bind_addr: attempt to use a closed ibverbs.cm_id")
    assert.has_error(function() id:listen(1) end, "listen: attempt to use a closed ibverbs.cm_id")
    assert.is_true(ch:close())
  end)
end)
