-- examples/lib/rounds.lua without a group: the times it prints, the pairs a
-- schedule's rounds hold, why an end cannot run (an unreachable peer, a local
-- fault of either end, a missing rail).  Its rounds and exchanges run in
-- fabric_matrix_spec's dry runs.
package.path = "examples/lib/?.lua;" .. package.path
local rounds = require "rounds"
local schedule = require "schedule"

local function runner(n, me, fault)
  local f = { size = n, rank = me, alive = function(_, r) return r ~= 3 end,
    name = function(_, r) return "rank " .. r end }
  return rounds.new{ f = f, rails = { { index = 1 } }, nrails = 1, block = 1, limit = 10, fault = fault or {} }
end

describe("examples/lib/rounds.lua", function()
  it("prints times in seconds, minutes or hours", function()
    assert.equal("4.2 s", rounds.fmt_time(4.2))
    assert.equal("2 min 03 s", rounds.fmt_time(123))
    assert.equal("1 h 05 min", rounds.fmt_time(3900))
  end)

  it("counts the pairs of a pattern's rounds and of a list's", function()
    assert.equal(12, runner(4, 0):total_pairs(schedule.new("tournament", 4), 3))
    assert.equal(4, runner(4, 0):total_pairs(schedule.new("tournament", 4), 1))
    assert.equal(2, runner(4, 0):total_pairs(schedule.explicit("retest", 4, { { { 0, 1 } } }), 1)) -- both ways
  end)

  it("says why an end cannot run", function()
    local r = runner(4, 0, { [1] = { "port down" }, [0] = { [2] = "no rail" } })
    assert.equal("rank 3 unreachable", r:blocked(1, 3))
    assert.equal("rank 1: port down", r:blocked(1, 1))
    assert.equal("rank 0: no rail", r:blocked(2, 2))
    assert.equal("no rail 3", r:blocked(3, 2))
    assert.is_nil(r:blocked(1, 2))
  end)
end)
