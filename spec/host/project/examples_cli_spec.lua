-- What the rping and xsrq_pingpong examples do before they touch a device:
-- their options (the C tools' letters and defaults) and refusals, and the
-- ibv_xsrq_pingpong wire messages of ibverbs.exchange, over real loopback TCP.
local ex = require "ibverbs.exchange"

local support = require "support"
local LUA = support.LUA

-- Runs an example; returns its output (stdout and stderr) and exit status.
local function run(script, args)
  local p = assert(io.popen(LUA .. " examples/" .. script .. " " .. args .. " 2>&1; echo rc=$?"))
  local out = p:read("a")
  p:close()
  local rc = tonumber(out:match("rc=(%d+)%s*$"))
  return out:gsub("rc=%d+%s*$", ""), rc
end

describe("examples/ and ibverbs.tools", function()
  it("every tool has its script in examples/, which runs it and nothing else", function()
    local tools = require "ibverbs.tools"
    local scripts = {}
    for path in io.popen("ls examples/*.lua"):lines() do
      local name = path:match("^examples/(.+)%.lua$")
      if name ~= "demo" then scripts[name] = support.slurp(path) end
    end
    for _, t in ipairs(tools.list) do
      local text = scripts[t.name]
      assert.is_string(text, "no examples/" .. t.name .. ".lua")
      local code = text:gsub("^#![^\n]*\n", ""):gsub("%-%-[^\n]*\n", "")
      assert.equal(('os.exit(require("ibverbs.tools").run("%s", arg))\n'):format(t.name), code)
      assert.is_function(t.main)
      assert.is_string(t.what)
      scripts[t.name] = nil
    end
    assert.same({}, scripts) -- a script of examples/ that is no tool
  end)

  it("runs a tool as its script does: arg[1] its first option, the status its main's", function()
    local tools = require "ibverbs.tools"
    assert.has_error(function() tools.run("nope", {}) end, "no tool named nope")
    local out, rc = run("fabric_matrix.lua", "--dry-run --rank 0 --size 1")
    assert.equal(0, rc, out)
    assert.matches("\nPASS\n$", out)
    out, rc = run("send_lat.lua", "--iters 1")
    assert.equal(1, rc, out)
    assert.matches("Usage:\n  send_lat%.lua ", out)
  end)
end)

describe("examples/xsrq_pingpong.lua options", function()
  it("--help lists ibv_xsrq_pingpong's options with its defaults and exits 0", function()
    local out, rc = run("xsrq_pingpong.lua", "--help")
    assert.equal(0, rc)
    -- argparse's layout: "-p <port>,  help" over "--port <port>", flags as "-e, --events"
    for _, l in ipairs({ "p", "d", "i", "s", "m", "c", "n", "l", "e", "g" }) do
      assert.matches("\n%s+%-" .. l .. "[ ,]", out)
    end
    assert.matches("%-p <port>,%s+listen on/connect to port <port> %(default 18515%)\n%s+%-%-port <port>\n", out)
    assert.matches("%-s <size>,%s+size of message to exchange %(default 4096%)\n%s+%-%-size <size>\n", out)
    assert.matches("%-m <size>,%s+path MTU %(default 1024%)", out)
    assert.matches("%-c <n>,%s+number of clients %(on server only, default 1%)\n%s+%-%-clients <n>\n", out)
    assert.matches("%-n <n>,%s+number of tests per client %(default 5%)\n%s+%-%-num_tests <n>\n", out)
    assert.matches("%-e, %-%-events%s+sleep on CQ events", out)
  end)

  it("refuses an unknown option, a path MTU that is not a power of two from 256 to 4096, and two hosts", function()
    for _, args in ipairs({ "-x", "-m 1000", "-c", "host1 host2", "-o" }) do
      local out, rc = run("xsrq_pingpong.lua", args)
      assert.equal(1, rc, args)
      assert.matches("Usage:", out, 1, true)
      assert.not_matches("traceback", out)
    end
  end)
end)

describe("examples/rping.lua options", function()
  it("--help lists rping's options and exits 0", function()
    local out, rc = run("rping.lua", "--help")
    assert.equal(0, rc)
    for _, l in ipairs({ "s", "c", "a", "I", "p", "C", "S", "v", "V", "d" }) do
      assert.matches("\n%s+%-" .. l .. "[ ,]", out)
    end
    assert.matches("port %(default 7174%)", out)
    assert.matches("ping data size %(default 64%)", out)
  end)

  it("refuses a size outside rping's range with rping's message", function()
    for _, size in ipairs({ "25", "65536" }) do
      local out, rc = run("rping.lua", "-c -a 127.0.0.1 -S " .. size)
      assert.equal(1, rc)
      assert.equal("Invalid size " .. size .. " (valid range is 26 to 65536)\n", out)
    end
  end)

  it("needs exactly one of -s and -c", function()
    for _, args in ipairs({ "", "-s -c", "-v" }) do
      local out, rc = run("rping.lua", args)
      assert.equal(1, rc, args)
      assert.matches("^Usage:", out)
    end
  end)
end)


describe("ibverbs.exchange: ibv_xsrq_pingpong's messages", function()
  local dest = { lid = 0x12, recv_qpn = 0x11, send_qpn = 0x12ab, psn = 0xabcdef, srqn = 0x13,
                 gid = "::ffff:192.0.2.1" }
  -- what the C tool's "%04x:%06x:%06x:%06x:%06x:%32s" writes for dest, and its NUL
  local wire = "0012:000011:0012ab:abcdef:000013:00000000000000000000ffffc0000201\0"

  it("packs the 66-byte message the C tool writes", function()
    assert.equal(66, ex.XSRQ_DEST_SIZE)
    assert.equal(wire, ex.pack_xsrq_dest(dest))
  end)

  it("unpacks it with the GID as text and raw bytes", function()
    local d = assert(ex.unpack_xsrq_dest(wire))
    for k, v in pairs(dest) do assert.equal(v, d[k], k) end
    assert.equal("\0\0\0\0\0\0\0\0\0\0\255\255\192\0\2\1", d.gid_raw)
  end)

  it("rejects a malformed message", function()
    local d, msg = ex.unpack_xsrq_dest(("x"):rep(66))
    assert.is_nil(d)
    assert.matches("malformed XRC address message", msg)
    assert.is_nil(ex.unpack_xsrq_dest("0012:000011:0012ab:abcdef:000013:00ff\0"))
  end)

  it("connects to a numeric address without the resolver; names the address when none listens", function()
    local socket = require "socket"
    local toip = socket.dns.toip
    socket.dns.toip = function() error("the resolver was asked") end
    local l = assert(ex.listener(0, 1))
    local _, port = l.sock:getsockname()
    local ok, c = pcall(ex.connect, "127.0.0.1", tonumber(port))
    socket.dns.toip = toip
    assert(ok, c)
    assert(c, "no connection")
    c:close()
    l:close()
    local none, msg = ex.connect("127.0.0.1", tonumber(port)) -- closed now
    assert.is_nil(none)
    assert.matches("couldn't connect to 127%.0%.0%.1:" .. port .. ": connection refused", msg)
  end)

  it("swaps addresses and the END handshake over loopback TCP, as a client and the server do", function()
    local l = assert(ex.listener(0, 2))
    local _, port = l.sock:getsockname()
    local client = assert(ex.connect("127.0.0.1", tonumber(port)))
    local server = assert(l:accept(5))
    l:close()
    local theirs = { lid = 0, recv_qpn = 0x20, send_qpn = 0x21, psn = 7, srqn = 0x22, gid = "::" }
    assert(ex.send_xsrq_dest(client, dest))
    local got = assert(ex.recv_xsrq_dest(server))
    assert.equal(0xabcdef, got.psn)
    assert.equal(0x13, got.srqn)
    assert(ex.send_xsrq_dest(server, theirs))
    got = assert(ex.recv_xsrq_dest(client))
    assert.same({ 0x20, 0x21, 0x22, "::" }, { got.recv_qpn, got.send_qpn, got.srqn, got.gid })
    assert(ex.send_end(client))
    assert.is_true(ex.recv_end(server))
    assert(ex.send_end(server))
    assert.is_true(ex.recv_end(client))
    -- a wrong termination message, then a peer that is gone
    assert(client:write("BYE\0"))
    local ok, msg = ex.recv_end(server)
    assert.is_nil(ok)
    assert.equal("Invalid termination ack was accepted", msg)
    client:close()
    ok, msg = ex.recv_end(server)
    assert.is_nil(ok)
    assert.matches("Couldn't read remote termination ack: reading 4 bytes from the peer: closed", msg)
    server:close()
  end)
end)

describe("examples/fabric_check.lua --json", function()
  -- a stand-in ibverbs: one device whose port is down (no other port: it fails), reports a NaN MTU, has
  -- no GIDs
  local FAKE = [[
    local ibv = {}
    function ibv.now() return os.clock() end
    function ibv.devices() return { { name = "fake0" } } end
    function ibv.open()
      return {
        query_device = function() return { phys_port_cnt = 1 } end,
        query_port = function()
          return { state = "down", active_mtu = 0 / 0, max_mtu = 1 / 0, link_layer = "ethernet", lid = 0 }
        end,
        query_gid_table = function() return {} end,
        get_async_event = function() return nil, "ibv_get_async_event: Connection timed out", 110 end,
        close = function() return true end,
      }
    end
    return ibv
  ]]

  it("writes valid JSON: [] for an empty list, null for NaN and infinity", function()
    local dir = io.popen("mktemp -d /tmp/fabric-json.XXXXXX"):read("*l")
    local f = assert(io.open(dir .. "/ibverbs.lua", "w"))
    f:write(FAKE)
    f:close()
    -- the stand-in first; the rest of lua/ (ibverbs.port_counters, ibverbs.fabric.launcher) behind it
    local cmd = "LUA_PATH='" .. dir .. "/?.lua;lua/?.lua;;' " .. LUA ..
      " examples/fabric_check.lua --json 2>&1; echo rc=$?"
    local p = assert(io.popen(cmd))
    local out = p:read("*a")
    p:close()
    os.execute("rm -rf " .. dir)
    assert.matches("rc=1%s*$", out) -- the port is down: FAIL
    local text = out:gsub("rc=%d+%s*$", "")
    assert.matches('"gids":%[%]', text)
    assert.matches('"active_mtu":null', text)
    assert.matches('"max_mtu":null', text)
    local doc, _, err = require("dkjson").decode(text)
    assert.is_table(doc, err)
    assert.equal("fake0", doc.devices[1].name)
    assert.equal(6, doc.checks) -- port_state and five traffic checks, all FAIL
    assert.equal(6, doc.failed)
    assert.equal(false, doc.pass)
  end)
end)
