-- SIGINT ends every blocking call promptly: a child blocks in one call after
-- the other, gets SIGINT in each, and must catch the "interrupted" error
-- within 1 s, find its objects usable and the interpreter's own handler back,
-- close all, and exit 0 at the end.  The 1 s runs from the moment `kill`
-- has sent the signal to the moment the child's pcall returned (its
-- CLOCK_MONOTONIC reading, the same clock here): neither the shell that runs
-- `kill` nor this process's polling of the child's output counts, which
-- under a loaded emulator took more than the call itself.
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
        h:kill("INT")
        local sent = ibv.now() -- `kill` has returned: the signal is out
        local line = h:expect("caught " .. mode .. " at [^\n]*\n", LIMIT + 5)
        assert(line, mode .. ": not interrupted: " .. h.output())
        local at, msg = line:match("at ([%d.]+) after [%d.]+ s: (false [^\n]*)")
        assert(at, line)
        local dt = tonumber(at) - sent
        assert(msg:find("interrupted"), msg)
        assert(dt < LIMIT, string.format("%s: the call ended %.3f s after SIGINT", mode, dt))
        assert(h:expect("closed " .. mode .. "\n", 10))
        print(string.format("  %s: %.0f ms after SIGINT (%s)", mode, math.max(dt, 0) * 1000, msg))
      end
      assert.equal(0, h:wait(10), h.output())
    end)
    local out = h.output()
    h.cleanup()
    assert(ok, tostring(err) .. "\n" .. out)
    assert.falsy(out:find("traceback"), out)
  end)
end)
