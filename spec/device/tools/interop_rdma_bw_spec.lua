-- write_bw.lua and read_bw.lua (the loop in C: ibv.bw) against perftest's
-- ib_write_bw and ib_read_bw on rxe0, in both roles; then the example pair
-- against the C pair on the same work, rounds interleaved, the message
-- rates' ratio printed (nothing asserted about speed: tagged #ratio, which
-- make test leaves out; `make spec` runs it).
local support = require "support"

local ITERS = 2000

-- The client's report line: bytes, iterations, peak and average MB/s, Mpps.
local function report(out)
  local b, n, _, avg, rate = out:match("\n (%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)")
  return b and { bytes = tonumber(b), iters = tonumber(n), mbs = tonumber(avg), mpps = tonumber(rate) }
end

-- A pair (support.perftest_pair): run again while the client's figures are
-- not positive numbers (perftest's clock estimate failed).
local function pair(server, client, p, limit)
  return support.perftest_pair(server, client, p, limit, function(r)
    local rep = report(r.client)
    return rep ~= nil and rep.mbs > 0 and rep.mpps > 0 and rep.mpps < math.huge
  end)
end

local function check(r, size, iters)
  support.check_perftest_pair(r)
  local rep = assert(report(r.client), "no report line from the client:\n" .. r.client)
  assert.equal(size, rep.bytes)
  assert.equal(iters, rep.iters)
  assert.is_true(rep.mbs > 0 and rep.mpps > 0, r.client)
  return rep
end

for _, t in ipairs({ { "write_bw.lua", "ib_write_bw", 19110 }, { "read_bw.lua", "ib_read_bw", 19210 } }) do
  local example, tool, port = t[1], t[2], t[3]
  describe("on rxe0, " .. example .. " and perftest's " .. tool, function()
    local args = "-d rxe0 -x 1 -s 4096 -n " .. ITERS
    it("interoperate with " .. example .. " as server and " .. tool .. " as client", function()
      check(pair(function(q) return support.example(example, args .. " -p " .. q) end,
        function(q) return tool .. " -F " .. args .. " -p " .. q .. " 127.0.0.1" end, port), 4096, ITERS)
    end)

    it("interoperate with " .. tool .. " as server and " .. example .. " as client", function()
      check(pair(function(q) return tool .. " -F " .. args .. " -p " .. q end,
        function(q) return support.example(example, args .. " -p " .. q .. " 127.0.0.1") end, port + 1), 4096,
        ITERS)
    end)

    it("move as many 64-byte messages a second as the C pair, rounds interleaved #ratio", function()
      local big, ratios = "-d rxe0 -x 1 -s 64 -n 20000", {}
      for round = 1, 3 do
        local p = port + 2 + 2 * round
        local c = check(pair(function(q) return tool .. " -F " .. big .. " -p " .. q end,
          function(q) return tool .. " -F " .. big .. " -p " .. q .. " 127.0.0.1" end, p, 120), 64, 20000)
        local l = check(support.pair_run(support.example(example, big .. " -p " .. p + 1),
          support.example(example, big .. " -p " .. p + 1 .. " 127.0.0.1"), p + 1, 120), 64, 20000)
        ratios[round] = l.mpps / c.mpps
      end
      table.sort(ratios)
      print(string.format("\n64-byte %s: %s / %s message rate %.3f (median of 3)", example:match("^%a+"), example,
        tool, ratios[2]))
    end)
  end)
end
