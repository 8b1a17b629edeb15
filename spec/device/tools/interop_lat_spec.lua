-- send_lat.lua, write_lat.lua and read_lat.lua against perftest's
-- ib_send_lat, ib_write_lat and ib_read_lat on rxe0, in both roles; then each
-- example pair against the C pair on the same work, rounds interleaved, the
-- typical latencies' ratio printed (nothing asserted about speed, which
-- depends on the machine's load: tagged #ratio, which make test leaves to
-- bench/run-lat; `make spec` runs it).
local support = require "support"

local ITERS = 500

-- perftest's report line: bytes, iterations, t_min, t_max, t_typical, t_avg
local function report(out)
  local b, n, mn, mx, typ, avg =
    out:match("\n (%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)")
  return b and { bytes = tonumber(b), iters = tonumber(n), min = tonumber(mn), max = tonumber(mx),
                 typical = tonumber(typ), avg = tonumber(avg) }
end

-- A pair (support.perftest_pair): run again when perftest printed inf.
local function pair(server, client, p, limit)
  return support.perftest_pair(server, client, p, limit, function(r)
    return not (r.client:find("\n 8%s+%d+%s+inf") or r.server:find("\n 8%s+%d+%s+inf"))
  end)
end

-- Both sides ran (support.check_perftest_pair); each printed its table (a
-- server of ib_read_lat only reads: it prints none); the client's report.
local function check(r, iters, reader)
  support.check_perftest_pair(r)
  for _, out in ipairs(reader and { r.client } or { r.server, r.client }) do
    local rep = assert(report(out), "no report line:\n" .. out)
    assert.equal(8, rep.bytes)
    assert.equal(iters, rep.iters)
    assert.is_true(rep.min > 0 and rep.min <= rep.typical and rep.typical <= rep.max, out)
  end
  return report(r.client)
end

for _, t in ipairs({ { "send_lat.lua", "ib_send_lat", 18810 }, { "write_lat.lua", "ib_write_lat", 18910 },
                     { "read_lat.lua", "ib_read_lat", 19010, true } }) do
  local example, tool, port, reader = t[1], t[2], t[3], t[4]
  describe("on rxe0, " .. example .. " and perftest's " .. tool, function()
    local args = "-d rxe0 -x 1 -s 8 -n " .. ITERS
    it("interoperate with " .. example .. " as server and " .. tool .. " as client", function()
      check(pair(function(q) return support.example(example, args .. " -p " .. q) end,
        function(q) return tool .. " -F " .. args .. " -p " .. q .. " 127.0.0.1" end, port), ITERS, reader)
    end)

    it("interoperate with " .. tool .. " as server and " .. example .. " as client", function()
      check(pair(function(q) return tool .. " -F " .. args .. " -p " .. q end,
        function(q) return support.example(example, args .. " -p " .. q .. " 127.0.0.1") end, port + 1), ITERS,
        reader)
    end)

    it("measure the typical latency of the example pair against the C pair, rounds interleaved #ratio", function()
      local big, ratios, c_typ, l_typ = "-d rxe0 -x 1 -s 8 -n 2000", {}, {}, {}
      for round = 1, 3 do
        local p = port + 2 + 2 * round
        local c = check(pair(function(q) return tool .. " -F " .. big .. " -p " .. q end,
          function(q) return tool .. " -F " .. big .. " -p " .. q .. " 127.0.0.1" end, p, 120), 2000, reader)
        local l = check(support.pair_run(support.example(example, big .. " -p " .. p + 1),
          support.example(example, big .. " -p " .. p + 1 .. " 127.0.0.1"), p + 1, 120), 2000, reader)
        ratios[round], c_typ[round], l_typ[round] = l.typical / c.typical, c.typical, l.typical
      end
      table.sort(ratios)
      print(string.format("\n8-byte %s typical latency (%s): %s %s us, %s %s us; ratio %.3f (median of 3)",
        example:match("^%a+"), reader and "round trip" or "one way", tool, table.concat(c_typ, "/"), example,
        table.concat(l_typ, "/"), ratios[2]))
    end)
  end)
end

describe("on rxe0, a latency example's client with no server", function()
  it("exits 1 naming the address it could not reach (it never turns server)", function()
    local out, rc = support.run("timeout 60 " .. support.example("send_lat.lua",
      "-d rxe0 -x 1 -s 8 -n 10 -p 18799 127.0.0.1") .. " 2>&1")
    assert.equal(1, rc, out)
    assert.matches("couldn't connect to 127%.0%.0%.1:18799", out)
    assert.not_matches("Waiting for client", out)
  end)
end)
