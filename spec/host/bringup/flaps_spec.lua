-- lua/ibverbs/bringup/flaps.lua on fake contexts and a fake sysfs tree: fabric_matrix's
-- watch on its rails, round by round (what changed since the last check, each
-- port with its own events, the readings moving on), and the flap state file
-- of fabric_check --flap-state.  (fabric_check's flaps on rxe0 itself:
-- spec/device/tools/fabric_check_spec.lua.)
local flaps = require "ibverbs.bringup.flaps"

local ROOT = os.tmpname()
os.remove(ROOT)

local function set_downs(dev, port, n)
  local dir = string.format("%s/%s/ports/%d/hw_counters", ROOT, dev, port)
  assert(os.execute("mkdir -p '" .. dir .. "'"))
  local fh = assert(io.open(dir .. "/link_downed", "w"))
  fh:write(n, "\n")
  fh:close()
end

-- A context as flaps reads it: its name, each port's state, and queued async events.
local function fake_ctx(name, ports)
  local ctx = { events = {} }
  function ctx.name() return name end
  function ctx.query_port(_, port) return ports[port] and { state = ports[port], phys_state = 5 } end
  function ctx.get_async_event()
    return table.remove(ctx.events, 1)
  end
  return ctx
end

describe("lua/ibverbs/bringup/flaps.lua", function()
  it("rails_check: nothing changed, nothing reported; a port down then back, each time since the last check",
    function()
      set_downs("rxe0", 1, 4)
      local ports = { "active" }
      local ctx = fake_ctx("rxe0", ports)
      local w = flaps.rails_watch({ { index = 1, ctx = ctx, port = 1 } }, ROOT)
      assert.same({}, flaps.rails_check(w))
      -- round 2: the link went down
      ports[1] = "down"
      set_downs("rxe0", 1, 5)
      ctx.events = { { type = "port_err", port_num = 1 }, { type = "qp_fatal" } }
      assert.same({ { index = 1, words = "link_downed +1; state active -> down; events port_err" } },
        flaps.rails_check(w))
      -- round 3: it came back; only what happened since round 2 is reported
      ports[1] = "active"
      ctx.events = { { type = "port_active", port_num = 1 } }
      assert.same({ { index = 1, words = "state down -> active; events port_active" } }, flaps.rails_check(w))
      assert.same({}, flaps.rails_check(w))
    end)

  it("rails_watch leaves out the rails with a fault; two ports of one context get their own events", function()
    set_downs("mlx5_0", 1, 0)
    set_downs("mlx5_0", 2, 0)
    local ctx = fake_ctx("mlx5_0", { "active", "active" })
    local w = flaps.rails_watch({ { index = 1, ctx = ctx, port = 1 }, { index = 2, ctx = ctx, port = 2 },
      { index = 3, fault = "mlx5_1 port 1 is down" } }, ROOT)
    assert.equal(2, #w)
    ctx.events = { { type = "port_err", port_num = 2 }, { type = "port_active", port_num = 2 } }
    set_downs("mlx5_0", 2, 1)
    assert.same({ { index = 2, words = "link_downed +1; events port_err, port_active" } }, flaps.rails_check(w))
  end)

  it("a link_downed that went backwards (a reset) is no flap", function()
    set_downs("rxe1", 1, 9)
    local w = flaps.rails_watch({ { index = 1, ctx = fake_ctx("rxe1", { "active" }), port = 1 } }, ROOT)
    set_downs("rxe1", 1, 0)
    assert.same({}, flaps.rails_check(w))
  end)

  it("sees a flap by the port's state and events when link_downed is saturated (255: its rise cannot show)",
    function()
      set_downs("rxe2", 1, 255)
      local ports = { "active" }
      local ctx = fake_ctx("rxe2", ports)
      local w = flaps.rails_watch({ { index = 1, ctx = ctx, port = 1 } }, ROOT)
      ports[1] = "down"
      ctx.events = { { type = "port_err", port_num = 1 } }
      assert.same({ { index = 1, words = "state active -> down; events port_err" } }, flaps.rails_check(w))
      -- fabric_check's judge: the same without a delta of link_downed (saturated: unknown)
      local results = { { name = "rxe2", ports = { { port = 1, checks = {}, link_downed = 255,
        counters = { deltas = {}, unknown = { link_downed = "saturated" } } } } } }
      -- the last run saved 255 too: no flap between the runs is made up, none seen (the check fails the port
      -- on its own: pc.faults)
      local found = flaps.judge({ rxe2 = { ctx = ctx, ports = { { state = "down", phys_state = 5 } } } }, results,
        "node9", { time = 0, ports = { ["rxe2:1"] = 255 } })
      assert.same({}, found)
      ctx.events = { { type = "port_active", port_num = 1 } }
      ports[1] = "active"
      found = flaps.judge({ rxe2 = { ctx = ctx, ports = { { state = "down", phys_state = 5 } } } }, results, "node9")
      assert.same({ "flapped: node9 rxe2 port 1: state down -> active; events port_active" }, found)
    end)

  it("load: no file is an empty state; a broken one is named with what is wrong", function()
    assert.same({ time = 0, ports = {} }, flaps.load(ROOT .. "/none.json"))
    local path = ROOT .. "/state.json"
    local fh = assert(io.open(path, "w"))
    fh:write('{"time": 5, "ports": {"rxe0": 1}}')
    fh:close()
    local ok, err = flaps.load(path)
    assert.is_nil(ok)
    assert.matches("state%.json: not a fabric_check flap state %('ports' entry \"rxe0\"", err)
    assert(flaps.save(path, { { name = "rxe0", ports = { { port = 1, link_downed = 3 } } } }, 42))
    assert.same({ time = 42, ports = { ["rxe0:1"] = 3 } }, flaps.load(path))
  end)
end)
