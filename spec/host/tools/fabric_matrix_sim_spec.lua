-- The simulation of bench/fabric at small sizes (bench/sim_worker.lua: every
-- rank a coroutine running fabric_matrix (ibverbs.tools.fabric_matrix) over loopback TCP,
-- its measurement drawn with planted faults): the faults found and none
-- invented, and rank 0's bytes a round growing with the relay tree's
-- fanout (about sqrt(N)), not with N, now that results are reduced and
-- messages go relay to relay; rank 0, which relays no group, moving fewer
-- bytes than a relay.
local dkjson = require "dkjson"
local support = require "support"
local fs = require "fabric_support"

local LUA = os.getenv("LUA") or "lua5.4"

-- One simulated run of n ranks (rank 0 alone, the first relay alone, the rest together): its figures.  Its
-- port is one below the kernel's ephemeral ports (fs.free_port); one another process holds is drawn again
-- (rank 0 then stops at once, and the others at their time limit: each process has 300 s at most).
local function simulate(n, rounds, rails)
  local dir = os.tmpname()
  os.remove(dir)
  for _ = 1, 3 do
    assert(os.execute("rm -rf " .. dir .. "; mkdir -p " .. dir))
    local run = string.format("timeout 300 %s bench/sim_worker.lua %d %%s %d %d %d %s 2>>%s/err", LUA, n,
      fs.free_port(), rails, rounds, dir, dir)
    local cmd = string.format("%s & %s & %s & wait", run:format("0"), run:format("1"), -- rank 1: the first relay
      run:format(string.format("2-%d", n - 1)))
    assert(support.capture("ulimit -n 20000 2>/dev/null; " .. cmd))
    if not (support.slurp(dir .. "/err") or ""):find("address already in use", 1, true) then break end
  end
  local block = math.min(16, math.ceil(n / 64))
  local out = support.capture(string.format("FABRIC_SIM_JSON=1 %s bench/fabric_sim.lua %s %d %d %d %d 3 0", LUA, dir,
    n, rails, rounds, block))
  os.execute("rm -rf " .. dir)
  return assert(dkjson.decode(out), out)
end

describe("the simulation of fabric_matrix.lua (bench/sim_worker.lua)", function()
  it("finds the planted faults and names nothing else; rank 0's bytes a round grow with the fanout, not with N",
    function()
      local small = simulate(64, 10, 5) -- groups of 8, one round a block
      local big = simulate(196, 12, 5) -- groups of 14, blocks of 4
      for _, s in ipairs({ small, big }) do
        assert.equal(s.expected, s.found)
        assert.same({}, s.invented)
      end
      io.stderr:write(string.format("fabric_sim_spec: bytes a round, rank 0 and the first relay: %.0f and %.0f at "
        .. "64 ranks, %.0f and %.0f at 196\n", small.rank0_bytes, small.relay_bytes, big.rank0_bytes, big.relay_bytes))
      -- 3.1 times the ranks: the fanout 1.75 times, rank 0's bytes a round well under 3.1 times
      assert.is_true(big.rank0_bytes < 2.3 * small.rank0_bytes, dkjson.encode({ small, big }))
      -- rank 0 takes a bundle from each relay, a relay its members' frames (their QP numbers, their lines)
      for _, s in ipairs({ small, big }) do assert.is_true(s.rank0_bytes < s.relay_bytes, dkjson.encode(s)) end
    end)
end)
