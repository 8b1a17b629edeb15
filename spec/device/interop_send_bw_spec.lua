-- send_bw.lua against perftest's ib_send_bw on rxe0, in both roles, and the
-- message rates of both back to back with 64-byte messages.
local support = require "support"

local ITERS = 2000

-- The report line: bytes, iterations, peak and average MB/s, Mpps.
local function report(out)
  local b, n, _, _, rate = out:match("\n (%d+)%s+(%d+)%s+([%d.]+)%s+([%d.]+)%s+([%d.]+)")
  return b and { bytes = tonumber(b), iters = tonumber(n), mpps = tonumber(rate) }
end

local function addresses(out)
  local t = {}
  for side, qpn, psn in out:gmatch(" (%a+) address: LID %x+ QPN 0x(%x+) PSN 0x(%x+)") do
    t[side] = tonumber(qpn, 16) .. ":" .. tonumber(psn, 16)
  end
  return t
end

local function check(r)
  assert.equal(0, r.server_rc, "server failed:\n" .. r.server)
  assert.equal(0, r.client_rc, "client failed:\n" .. r.client)
  local s, c = addresses(r.server), addresses(r.client)
  assert.equal(s["local"], c.remote)
  assert.equal(c["local"], s.remote)
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

  it("reach a message rate of at least half of C's, back to back (target 0.95)", function()
    local big = "-d rxe0 -x 1 -s 64 -n 20000"
    local c = support.pair_run("ib_send_bw -F " .. big .. " -p 18803", "ib_send_bw -F " .. big .. " -p 18803 127.0.0.1",
      18803, 120)
    local l = support.pair_run(support.example("send_bw.lua", big .. " -p 18804"),
      support.example("send_bw.lua", big .. " -p 18804 127.0.0.1"), 18804, 120)
    assert.equal(0, c.client_rc, c.client)
    assert.equal(0, l.client_rc, l.client)
    local cr, lr = assert(report(c.client)), assert(report(l.client))
    print(string.format("\n64-byte sends: ib_send_bw %.6f Mpps, send_bw.lua %.6f Mpps, ratio %.2f",
      cr.mpps, lr.mpps, lr.mpps / cr.mpps))
    assert.is_true(lr.mpps / cr.mpps >= 0.5)
  end)
end)
