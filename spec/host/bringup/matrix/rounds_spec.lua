-- lua/ibverbs/bringup/matrix/rounds.lua without a group: the times it prints, the pairs a
-- schedule's rounds hold, why an end cannot run (an unreachable peer, a local
-- fault of either end, a missing rail), the port counters read around a
-- round's traffic.  Its rounds and exchanges run in
-- fabric_matrix_spec's dry runs.
local rounds = require "ibverbs.bringup.matrix.rounds"
local schedule = require "ibverbs.bringup.matrix.schedule"

local function runner(n, me, fault)
  local f = { size = n, rank = me, alive = function(_, r) return r ~= 3 end,
    name = function(_, r) return "rank " .. r end }
  return rounds.new{ f = f, rails = { { index = 1 } }, nrails = 1, block = 1, limit = 10, fault = fault or {} }
end

describe("lua/ibverbs/bringup/matrix/rounds.lua", function()
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

  it("reads its rails' port counters just before and just after a round's traffic, their line with the results",
    function()
    local pc = require "ibverbs.port_counters"
    local root = os.tmpname()
    os.remove(root)
    local file = root .. "/rxe0/ports/1/hw_counters/rcvd_seq_err"
    assert(os.execute("mkdir -p " .. root .. "/rxe0/ports/1/hw_counters"))
    local function put(v) local fh = assert(io.open(file, "w")); fh:write(v, "\n"); fh:close() end
    put(3)
    local r = runner(4, 0)
    r.rails = { { index = 1, name = "rxe0:1", port = 1, ctx = { name = function() return "rxe0" end } } }
    r.traffic = { run = function() put(40) end } -- the round's traffic: 37 NAKs
    r.live = { [2] = { ends = {} }, [3] = { ends = {} } }
    local saved = pc.ROOT
    pc.ROOT = root
    local plain = r:measure(2) -- no limits_of: no counters read
    r.limits_of = function() return { rcvd_seq_err = 10 } end
    put(3)
    local ok, text = pcall(r.measure, r, 3)
    pc.ROOT = saved
    os.execute("rm -r " .. root)
    assert(ok, text)
    assert.equal("@2\n", plain)
    assert.equal("@3\n\nC 1 rcvd_seq_err=37!10|", text) -- (no packet counters here: no packet count)
  end)

  it("sends a counter file it cannot read around a round with '!', the path and the error: it fails the port",
    function()
    local pc = require "ibverbs.port_counters"
    local root = os.tmpname()
    os.remove(root)
    local dir = root .. "/rxe0/ports/1/hw_counters"
    assert(os.execute("mkdir -p " .. dir .. "/link_downed")) -- a directory where the file should be: EISDIR
    local fh = assert(io.open(dir .. "/sent_pkts", "w"))
    fh:write("5\n")
    fh:close()
    local r = runner(4, 0)
    r.rails = { { index = 1, name = "rxe0:1", port = 1, lid = 0, ctx = { name = function() return "rxe0" end } } }
    r.traffic = { run = function() end }
    r.live = { [0] = { ends = {} } }
    r.limits_of = function() return { link_downed = 0 } end
    local saved = pc.ROOT
    pc.ROOT = root
    local ok, text = pcall(r.measure, r, 0)
    pc.ROOT = saved
    os.execute("rm -r " .. root)
    assert(ok, text)
    assert.equal("@0\n\nC 1 -|link_downed:!unreadable: " .. dir .. "/link_downed: Is a directory", text)
  end)
end)
