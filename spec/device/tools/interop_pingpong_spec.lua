-- The pingpong examples against rdma-core's ibv_*_pingpong, in both roles, on rxe0.
local support = require "support"

local ITERS = 40

-- The "local address" and "remote address" lines of a pingpong's output, as
-- "LID 0x0000, QPN 0x000011, PSN 0x9b092f, GID ::ffff:192.0.2.1" strings.
local function addresses(out)
  local t = { ["local"] = {}, remote = {} }
  for side, lid, qpn, psn, gid in out:gmatch("(%a+) address:%s+LID (0x%x+), QPN (0x%x+), PSN (0x%x+)[:,] GID (%S+)") do
    table.insert(t[side], table.concat({ lid, qpn, psn, gid }, " "))
  end
  return t
end

-- Both sides finished, reported the same iterations, and each one's remote
-- addresses are the other's local ones.
local function check(r, nqp)
  assert.equal(0, r.server_rc, "server failed:\n" .. r.server)
  assert.equal(0, r.client_rc, "client failed:\n" .. r.client)
  for _, out in ipairs({ r.server, r.client }) do
    assert.matches(ITERS .. " iters in [%d.]+ seconds = [%d.]+ usec/iter", out)
    assert.matches("%d+ bytes in [%d.]+ seconds = [%d.]+ Mbit/sec", out)
  end
  local s, c = addresses(r.server), addresses(r.client)
  assert.equal(nqp, #s["local"])
  assert.same(s["local"], c.remote)
  assert.same(c["local"], s.remote)
  assert.matches("::ffff:192%.0%.2%.1$", s["local"][1])
end

local cases = {
  { name = "rc", args = "-g 1", nqp = 1 },
  { name = "rc", args = "-g 1 -e -s 64", nqp = 1, what = "with CQ events" },
  { name = "uc", args = "-g 1 -s 1024", nqp = 1 },
  { name = "ud", args = "-g 1 -s 512", nqp = 1 },
  { name = "srq", args = "-g 1 -q 4 -r 16", nqp = 4 },
}

describe("on rxe0, the pingpong examples interoperate with rdma-core's tools", function()
  local port = 18700
  for _, c in ipairs(cases) do
    local script, tool = c.name .. "_pingpong.lua", "ibv_" .. c.name .. "_pingpong"
    local args = c.args .. " -n " .. ITERS
    local what = c.what and (" " .. c.what) or ""
    it(script .. " as server, " .. tool .. " as client" .. what, function()
      port = port + 1
      local r = support.pair_run(support.example(script, args .. " -p " .. port),
        tool .. " " .. args .. " -p " .. port .. " 127.0.0.1", port)
      check(r, c.nqp)
    end)
    it(tool .. " as server, " .. script .. " as client" .. what, function()
      port = port + 1
      local r = support.pair_run(tool .. " " .. args .. " -p " .. port,
        support.example(script, args .. " -p " .. port .. " 127.0.0.1"), port)
      check(r, c.nqp)
    end)
  end
end)

describe("on rxe0, the pingpong examples", function()
  it("refuse a UD message larger than the port MTU, as ibv_ud_pingpong does", function()
    local out, rc = support.run("timeout 30 " .. support.example("ud_pingpong.lua", "-g 1 -s 2048"))
    assert.equal(1, rc)
    assert.matches("Requested size larger than port MTU %(1024%)", out)
  end)

  it("stop with a clear message when no server listens", function()
    local out, rc = support.run("timeout 30 " .. support.example("rc_pingpong.lua", "-g 1 -p 18699 127.0.0.1"))
    assert.equal(1, rc)
    assert.matches("couldn't connect to 127.0.0.1:18699", out)
  end)
end)
