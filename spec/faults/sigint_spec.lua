-- SIGINT ends every blocking call promptly: a child blocks in one call after
-- the other, gets SIGINT in each, and must catch the "interrupted" error
-- within 1 s, find its objects usable and the interpreter's own handler back,
-- close all, and exit 0 at the end.
local ibv = require "ibverbs"
local util = require "faults.util"

local LIMIT = 1.0
local MODES = { "transfer_idle", "transfer_busy", "cq_wait", "comp_event", "async_event", "cm_event",
                "cm_connect", "cm_get_request", "lat_send", "lat_write", "bw" }

describe("SIGINT", function()
  it("ends each blocking call within 1 s with a catchable error; the objects stay usable", function()
    local h = util.start("spec/faults/sigint_child.lua", table.concat(MODES, " "))
    local ok, err = pcall(function()
      for _, mode in ipairs(MODES) do
        assert(h:expect("ready " .. mode .. "\n", 30))
        util.sleep(0.3) -- well inside the call
        local t0 = ibv.now()
        h:kill("INT")
        local msg = h:expect("caught " .. mode .. " after [%d.]+ s: false ([^\n]*)\n", LIMIT + 5)
        local dt = ibv.now() - t0
        assert(msg, mode .. ": not interrupted: " .. h.output())
        assert(msg:find("interrupted"), msg)
        assert(dt < LIMIT, string.format("%s: the call ended %.3f s after SIGINT", mode, dt))
        assert(h:expect("closed " .. mode .. "\n", 10))
        print(string.format("  %s: %.0f ms after SIGINT (%s)", mode, dt * 1000, msg))
      end
      assert.equal(0, h:wait(10), h.output())
    end)
    local out = h.output()
    h.cleanup()
    assert(ok, tostring(err) .. "\n" .. out)
    assert.falsy(out:find("traceback"), out)
  end)
end)
