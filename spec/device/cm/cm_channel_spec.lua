-- rdma_cm event channels on rxe0: cm.event_channel and its results, the ids
-- made on it and their events, get_event's timeout (nil, msg, ETIMEDOUT),
-- bad arguments (raising, named), and close: EBUSY while ids use it, twice
-- harmless, every method refused once closed.
local cm = require "ibverbs.cm"
local support = require "support"

local ADDR = support.CM_ADDR

describe("on rxe0, cm.event_channel", function()
  it("gives an ibverbs.cm_channel with a pollable fd; an id made on it gets its events there", function()
    local ch = assert(cm.event_channel())
    assert.equal("ibverbs.cm_channel", getmetatable(ch).__name)
    assert.matches("^ibverbs.cm_channel", tostring(ch))
    local fd = ch:fd()
    assert.equal(0, fd % 1)
    assert.is_true(fd > 2)
    local id = assert(ch:create_id{ ps = "tcp" })
    assert.equal("ibverbs.cm_id", getmetatable(id).__name)
    assert.same({ "tcp", "rc" }, { id.ps, id.qp_type })
    assert.is_true(id:resolve_addr(nil, ADDR .. ":7961", 2000))
    local ev = assert(ch:get_event(5))
    assert.same({ "addr_resolved", 0 }, { ev.event, ev.status })
    assert.equal(id, ev.id)
    local udp = assert(ch:create_id{ ps = "udp" })
    assert.same({ "udp", "ud" }, { udp.ps, udp.qp_type })
    assert.is_true(udp:close() and id:close() and ch:close())
  end)

  it("refuses to close a channel its ids use, and migrates an id between channels", function()
    local ch1, ch2 = assert(cm.event_channel()), assert(cm.event_channel())
    local id = assert(ch1:create_id())
    local ok, msg, errno = ch1:close()
    assert.is_nil(ok)
    assert.matches("busy", msg)
    assert.equal(16, errno)
    assert.is_true(id:migrate_id(ch2))
    assert.is_true(ch1:close())
    assert(id:resolve_addr(nil, ADDR .. ":1", 2000))
    assert(cm.expect(ch2, "addr_resolved", 5))
    assert.is_true(id:migrate_id(nil)) -- synchronous from now on
    assert.is_true(ch2:close())
    assert.is_true(id:resolve_route(2000))
    assert.equal("route_resolved", id.event.event)
    assert.is_true(id:close())
  end)

  it("times out waiting for an event that never comes", function()
    local ch = assert(cm.event_channel())
    local ev, msg, errno = ch:get_event(0.05)
    assert.is_nil(ev)
    assert.matches("timed out", msg)
    assert.equal(110, errno)
    assert.is_number(ch:fd())
  end)

  it("raises on bad arguments, naming them", function()
    local ch = assert(cm.event_channel())
    assert.error_matches(function() ch:get_event("x") end,
      "bad argument #1 to 'get_event' (number expected, got string)", 1, true)
    assert.error_matches(function() ch:get_event(-1) end,
      "bad argument #1 to 'get_event' (timeout in seconds expected, got a negative number)", 1, true)
    assert.error_matches(function() ch:create_id{ ps = "nope" } end,
      "create_id: field 'ps': invalid value 'nope'", 1, true)
    assert.error_matches(function() ch:create_id{ pss = "tcp" } end, "create_id: attr: unknown field 'pss'", 1, true)
    assert.error_matches(function() ch.get_event(assert(cm.create_id()), 0) end, "ibverbs.cm_channel expected", 1,
      true)
    assert.is_true(ch:close())
  end)

  it("closed (twice harmlessly), every method raises 'attempt to use a closed ibverbs.cm_channel'", function()
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id())
    local ok, msg, errno = ch:close()
    assert.same({ nil, "rdma_destroy_event_channel: Device or resource busy (1 object still uses it)", 16 },
      { ok, msg, errno })
    assert.is_false(ch:is_closed())
    assert.is_true(id:close())
    assert.is_true(ch:close())
    assert.is_true(ch:close())
    assert.is_true(ch:is_closed())
    assert.has_error(function() ch:get_event(0) end, "get_event: attempt to use a closed ibverbs.cm_channel")
    assert.has_error(function() ch:fd() end, "fd: attempt to use a closed ibverbs.cm_channel")
    assert.has_error(function() ch:create_id() end, "create_id: attempt to use a closed ibverbs.cm_channel")
  end)
end)
