-- The examples under bad peers, as the C tools: a garbage, truncated or
-- over-long exchange message, or a port nobody listens on, ends the example
-- with one line on stderr and a non-zero exit status, promptly: never a hang,
-- never a Lua traceback.
local ibv = require "ibverbs"
local socket = require "socket"
local ex = require "ibverbs.exchange"
local util = require "faults.util"

local LIMIT = 20
local next_port = 19100 + math.random(0, 400)
local function port() next_port = next_port + 1; return next_port end

local GOOD = ex.pack_dest{ lid = 0, qpn = 0x11, psn = 0x22, gid = "::ffff:192.0.2.1" }
local BAD = {
  garbage = string.rep("zq", 26),
  truncated = GOOD:sub(1, 20),
  ["over-long"] = GOOD:sub(1, 51) .. "0123456789abcdef0123456789", -- no NUL where the message ends
}

local function finished(h)
  local t0 = ibv.now()
  local rc = h:wait(LIMIT)
  local dt = ibv.now() - t0
  local out, err = h.stdout(), h.stderr()
  h.cleanup()
  assert(rc, "the example hung: " .. out .. err)
  assert.is_not.equal(0, rc)
  assert.falsy((out .. err):find("traceback"), out .. err)
  local lines = {}
  for line in err:gmatch("[^\n]+") do lines[#lines + 1] = line end
  assert.equal(1, #lines, "stderr: " .. err)
  return lines[1], dt
end

-- A fake peer on port p: accepts one client, reads what it sends first (n
-- bytes), answers with reply and closes.
local function fake_server(p, n, reply)
  local srv = assert(socket.bind("127.0.0.1", p))
  srv:settimeout(LIMIT)
  return function()
    local c = srv:accept()
    srv:close()
    assert(c, "the example never connected")
    c:settimeout(LIMIT)
    c:receive(n)
    c:send(reply)
    c:close()
  end
end

describe("the examples against a bad peer #once", function()
  for kind, reply in pairs(BAD) do
    it("rc_pingpong client: a " .. kind .. " address message gives one line and exit 1", function()
      local p = port()
      local serve = fake_server(p, 52, reply)
      local h = util.start("examples/rc_pingpong.lua", "-g 1 -p " .. p .. " 127.0.0.1")
      serve()
      local line = finished(h)
      print("  " .. kind .. ": " .. line)
    end)
  end

  it("rc_pingpong server: a client sending garbage gives one line and exit 1", function()
    local p = port()
    local h = util.start("examples/rc_pingpong.lua", "-g 1 -p " .. p)
    local c
    for _ = 1, 200 do
      c = socket.connect("127.0.0.1", p)
      if c then break end
      util.sleep(0.05)
    end
    assert(c, "the server never listened")
    c:send(BAD.garbage)
    c:close()
    print("  server: " .. finished(h))
  end)

  it("rc_pingpong client: a port nobody listens on gives one line and exit 1", function()
    local h = util.start("examples/rc_pingpong.lua", "-g 1 -p " .. port() .. " 127.0.0.1")
    print("  no listener: " .. finished(h))
  end)

  it("send_bw client: a garbage perftest exchange gives one line and exit 1", function()
    local p = port()
    local serve = fake_server(p, 16, string.rep("\255", 7))
    local h = util.start("examples/send_bw.lua", "-x 1 -p " .. p .. " 127.0.0.1")
    serve()
    print("  send_bw: " .. finished(h))
  end)

  it("rping client: a port nobody listens on gives one line and exit 1", function()
    local h = util.start("examples/rping.lua", "-c -a 192.0.2.1 -p " .. port() .. " -C 1")
    print("  rping: " .. finished(h))
  end)
end)
