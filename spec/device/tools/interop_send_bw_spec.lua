-- send_bw.lua against perftest's ib_send_bw on rxe0, in both roles, and the
-- message rates of both with matched options (64 WRs per post, 64-byte messages).
local support = require "support"

local ITERS = 2000

-- The report line: bytes, iterations, peak and average MB/s, Mpps.
local function report(out)
  local b, n, _, _, rate = out:match("\n (%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)")
  return b and { bytes = tonumber(b), iters = tonumber(n), mpps = tonumber(rate) }
end

local function check(r)
  support.check_perftest_pair(r)
  local rep = assert(report(r.client), "no report line from the client:\n" .. r.client)
  assert.equal(64, rep.bytes)
  assert.equal(ITERS, rep.iters)
  assert.is_true(rep.mpps > 0)
  return rep
end

describe("on rxe0, send_bw.lua and perftest's ib_send_bw", function()
  local args = "-d rxe0 -x 1 -s 64 -n " .. ITERS
  it("interoperate with send_bw.lua as server and ib_send_bw as client", function()
    check(support.pair_run(support.example("send_bw.lua", args .. " -p 18801"),
      "ib_send_bw -F " .. args .. " -p 18801 127.0.0.1", 18801))
  end)

  it("interoperate with ib_send_bw as server and send_bw.lua as client", function()
    check(support.pair_run("ib_send_bw -F " .. args .. " -p 18802",
      support.example("send_bw.lua", args .. " -p 18802 127.0.0.1"), 18802))
  end)

  -- The same work on both sides: 64 WRs per ibv_post_send (-l 64; perftest
  -- then signals one completion per post list, as send_bw.lua does), 12,800
  -- 64-byte messages, perftest without its CPU-frequency check (-F: it fails
  -- under emulation on a loaded machine).  Rounds interleaved, the median
  -- ratio printed; nothing is asserted about the rate, which depends on the
  -- load of the machine, only that every run completed its messages.
  it("send as many messages as ib_send_bw with matched options, rounds interleaved", function()
    local big = "-d rxe0 -x 1 -s 64 -l 64 -n 12800" -- perftest: a multiple of the post list
    local ratios = {}
    for round = 1, 3 do
      local p = 18803 + 2 * round
      local c = support.pair_run("ib_send_bw -F " .. big .. " -p " .. p,
        "ib_send_bw -F " .. big .. " -p " .. p .. " 127.0.0.1", p, 120)
      local l = support.pair_run(support.example("send_bw.lua", big .. " -p " .. p + 1),
        support.example("send_bw.lua", big .. " -p " .. p + 1 .. " 127.0.0.1"), p + 1, 120)
      assert.equal(0, c.client_rc, c.client)
      assert.equal(0, l.client_rc, l.client)
      local cr, lr = assert(report(c.client)), assert(report(l.client))
      assert.equal(12800, cr.iters)
      assert.equal(12800, lr.iters)
      ratios[round] = lr.mpps / cr.mpps
    end
    table.sort(ratios)
    print(string.format("\n64-byte sends, 64 per post: send_bw.lua / ib_send_bw %.2f (median of 3 rounds)",
      ratios[2]))
  end)
end)
