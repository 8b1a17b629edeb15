-- fabric_check.lua on rxe0: passes with the port up, fails clearly with it down;
-- a second device on a netdev that is down is listed as idle and fails only
-- when named or when no active port is left.
local support = require "support"

local function run(args)
  return support.run("timeout 60 " .. support.example("fabric_check.lua", args))
end

local sh, wait_port = support.sh, support.wait_port

describe("on rxe0, fabric_check.lua", function()
  it("passes every check: port, RC send/recv, RDMA write and read, atomics, UD send", function()
    local out, rc = run("-d rxe0")
    assert.equal(0, rc, out)
    for _, name in ipairs({ "port_state", "rc_send_recv", "rdma_write", "rdma_read", "atomic", "ud_send" }) do
      assert.matches(name .. "%s+PASS%s+[%d.]+ ms", out)
    end
    assert.matches("port 1: active, MTU 1024", out)
    assert.matches("GID%[1%] ::ffff:192%.0%.2%.1 %(roce_v2%) %*", out)
    assert.matches("6 checks, 0 failed: PASS", out)
  end)

  it("writes one JSON object with --json", function()
    local out, rc = run("-d rxe0 --json")
    assert.equal(0, rc, out)
    assert.matches('^{"checks":6,"devices":%[{', out)
    assert.matches('"name":"ud_send","pass":true', out)
    assert.matches('"pass":true}\n$', out)
  end)

  it("fails with a non-zero exit when the link is down (ip link set d0 down)", function()
    local ok, err = pcall(function()
      assert.is_true(sh("ip link set d0 down"))
      assert.equal("down", wait_port("down"))
      local out, rc = run("-d rxe0")
      assert.equal(1, rc, out)
      assert.matches("port_state%s+FAIL.*port is down", out)
      assert.matches("rc_send_recv%s+FAIL.*not run: port is down", out)
      assert.matches("6 checks, 6 failed: FAIL", out)
      local js, jrc = run("-d rxe0 --json")
      assert.equal(1, jrc)
      assert.matches('"pass":false}\n$', js)
    end)
    sh("ip link set d0 up")
    assert.equal("active", wait_port("active"))
    assert(ok, err)
  end)

  it("fails for a device that does not exist", function()
    local out, rc = run("-d nosuch0")
    assert.equal(1, rc)
    assert.matches("nosuch0: FAIL no such RDMA device", out)
  end)

  it("lists an idle second device (rxe1 on a netdev that is down) and passes; fails it when named", function()
    local ok, err = pcall(function()
      assert.is_true(sh("ip link add d9 type dummy && rdma link add rxe9 type rxe netdev d9"))
      local out, rc = run("")
      assert.equal(0, rc, out)
      assert.matches("rxe9\n  port 1: down, MTU %d+ %(max %d+%), link ethernet, LID 0 "
        .. "%(idle: not checked, not needed%)", out)
      assert.matches("6 checks, 0 failed: PASS", out)
      out, rc = run("-d rxe9")
      assert.equal(1, rc, out)
      assert.matches("port_state%s+FAIL.*port is down", out)
      assert.matches("6 checks, 6 failed: FAIL", out)
      -- no active port left: the idle ones are needed after all
      assert.is_true(sh("ip link set d0 down"))
      assert.equal("down", wait_port("down"))
      out, rc = run("")
      assert.equal(1, rc, out)
      assert.matches("12 checks, 12 failed: FAIL", out)
    end)
    sh("rdma link delete rxe9; ip link delete d9; ip link set d0 up")
    assert.equal("active", wait_port("active"))
    assert(ok, err)
  end)

  it("exits 2 for a bad option, before touching a device", function()
    local out, rc = run("--ud-count x")
    assert.equal(2, rc, out)
    assert.matches("option '%-%-ud%-count': an integer expected, got 'x'", out)
  end)

  it("reads rxe0's counters around its traffic: deltas in the text and --json, no error counter risen", function()
    local out, rc = run("-d rxe0")
    assert.equal(0, rc, out)
    assert.matches("    counters: .-rcvd_pkts %+%d+.-sent_pkts %+%d+", out)
    local js = run("-d rxe0 --json")
    local t = assert(require("dkjson").decode(js))
    local c = t.devices[1].ports[1].counters
    assert.is_true(c.deltas.sent_pkts > 0, js)
    assert.equal(0, c.deltas.retry_exceeded_err)
    assert.same({}, c.exceeded)
  end)

  it("fails the node naming a counter that rose past its threshold (--counter-thresholds)", function()
    local out, rc = run("-d rxe0 --counter-thresholds sent_pkts=0,rcvd_pkts=1")
    assert.equal(1, rc, out)
    assert.matches("counters%s+FAIL%s+[%d.]+ ms  rxe0 port 1: rcvd_pkts %+%d+ %(threshold 1%), sent_pkts %+%d+ "
      .. "%(threshold 0%)", out)
    out, rc = run("--counter-thresholds sent_pkts=x")
    assert.equal(2, rc, out)
    assert.matches("option '%-%-counter%-thresholds': 'sent_pkts=x' is not name=count", out)
  end)

  it("--expect: passes rxe0 as it is, fails it naming expected and found, refuses a bad file with exit 2", function()
    local host = require("ibverbs.fabric").hostname()
    local function file(body)
      local path = os.tmpname()
      local fh = assert(io.open(path, "w"))
      fh:write(body)
      fh:close()
      return path
    end
    local good = file('{"hosts": {"' .. host .. '": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024, '
      .. '"link_layer": "Ethernet", "rate": 2.5, "gid_type": "roce_v2"}]}}}')
    local out, rc = run("--expect " .. good)
    assert.equal(0, rc, out)
    assert.matches("expect%s+PASS", out)
    local wrong = file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 4096, "rate": 100}]}}}')
    out, rc = run("--expect " .. wrong)
    assert.equal(1, rc, out)
    assert.matches("expect%s+FAIL%s+[%d.]+ ms  rxe0 port 1 %(" .. wrong:gsub("%p", "%%%0")
      .. "%): active_mtu: expected 4096, found 1024; rate: expected 100, found 2%.5", out)
    local missing = file('{"hosts": {"*": {"ports": [{"device": "rxe7", "port": 1}]}}}')
    out, rc = run("--expect " .. missing)
    assert.equal(1, rc, out)
    assert.matches("rxe7 port 1 %(.-%): not present on this host", out)
    out, rc = run("--expect " .. file('{"hosts": {"*": {"ports": [{"device": "rxe0"}]}}}'))
    assert.equal(2, rc, out)
    assert.matches("'port' missing", out)
    for _, f in ipairs({ good, wrong, missing }) do os.remove(f) end
  end)
end)
