-- fabric_check.lua on rxe0: passes with the port up (also on rdma-core 28's
-- verbs alone: IBVL_RDMA_CORE=28), fails clearly with it down;
-- a second device on a netdev that is down is listed as idle and fails only
-- when named or when no active port is left.  A link that goes down and
-- comes back during a check (ip link set d0 down; up) gets a "flapped"
-- verdict, alone and between two ranks; healthy runs get none.  The flap and
-- drain cases (#once) run under lua5.4 only: they judge the tool's logic,
-- where the interpreter plays no part.
local support = require "support"
local util = require "faults.util"

local function run(args)
  return support.run("timeout 60 " .. support.example("fabric_check.lua", args))
end

local sh, wait_port = support.sh, support.wait_port

describe("on rxe0, fabric_check.lua #once", function()
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

  -- (IBVL_RDMA_CORE, a test aid: every verb newer than 28 absent, as on Ubuntu 20.04's rdma-core 28)
  it("passes on rdma-core 28's verbs (IBVL_RDMA_CORE=28): GIDs, their types and --expect's from sysfs", function()
    local host = require("ibverbs.fabric").hostname()
    local good = os.tmpname()
    local fh = assert(io.open(good, "w"))
    fh:write('{"hosts": {"' .. host .. '": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024, '
      .. '"link_layer": "Ethernet", "gid_type": "roce_v2"}]}}}')
    fh:close()
    local out, rc = support.run("IBVL_RDMA_CORE=28 timeout 60 "
      .. support.example("fabric_check.lua", "-d rxe0 --expect " .. good))
    os.remove(good)
    assert.equal(0, rc, out)
    assert.matches("GID%[1%] ::ffff:192%.0%.2%.1 %(roce_v2%) %*", out)
    assert.matches("expect%s+PASS", out)
    assert.matches("7 checks, 0 failed: PASS", out)
    assert.not_matches("needs rdma%-core", out)
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

-- A file of body, named for the tests.
local function expect_file(body)
  local path = os.tmpname()
  local fh = assert(io.open(path, "w"))
  fh:write(body)
  fh:close()
  return path
end
local RXE0 = '{"ports": [{"device": "rxe0", "port": 1, "active_mtu": 1024}]}'

describe("on rxe0, fabric_check.lua never passes a node where nothing was checked #once", function()
  after_each(function()
    sh("ip link set d0 up")
    assert.equal("active", wait_port("active"))
  end)

  it("every port down: exit 1, each port's state failing with the reason; nothing checked: exit 1", function()
    assert.is_true(sh("ip link set d0 down"))
    assert.equal("down", wait_port("down"))
    local out, rc = run("")
    assert.equal(1, rc, out)
    assert.matches("port_state%s+FAIL%s+[%d.]+ ms  port is down; no active port on this node", out)
    assert.matches("FAIL\n$", out)
    out, rc = run("-i 1") -- a port named with -i is needed
    assert.equal(1, rc, out)
    assert.matches("port_state%s+FAIL%s+[%d.]+ ms  port is down", out)
    -- the file names the down port: it must be active
    local down = expect_file('{"hosts": {"*": ' .. RXE0 .. '}}')
    out, rc = run("--expect " .. down)
    assert.equal(1, rc, out)
    assert.matches("expect%s+FAIL%s+[%d.]+ ms  rxe0 port 1 %(.-%): state: expected active, found down", out)
    os.remove(down)
    -- -d names rxe0, the file names a port of another device only: no port is checked, and that is a failure
    local other = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe7", "port": 1}]}}}')
    out, rc = run("-d rxe0 --expect " .. other)
    assert.equal(1, rc, out)
    assert.matches("%(node%): FAIL nothing was checked: no port is active or needed %(%-%-expect names no port of "
      .. "%-d/%-i's%)", out)
    assert.matches("0 checks, 1 failed: FAIL\n$", out)
    os.remove(other)
  end)
end)

describe("on rxe0, fabric_check.lua --expect and this host's name #once", function()
  it("passes rxe0 active and as the file names it, this host named by its own name", function()
    local host = require("ibverbs.fabric").hostname()
    local g = expect_file('{"hosts": {"' .. host .. '": ' .. RXE0 .. '}}')
    local out, rc = run("--expect " .. g)
    assert.equal(0, rc, out)
    assert.matches("expect%s+PASS", out)
    assert.matches("PASS\n$", out)
    os.remove(g)
  end)

  it("exits 2 with one line when no host list names this host, touching no device", function()
    local host = require("ibverbs.fabric").hostname()
    local g = expect_file('{"hosts": {"nosuchhost[1-2]": ' .. RXE0 .. '}}')
    local out, rc = run("--expect " .. g)
    assert.equal(2, rc, out)
    assert.equal("fabric_check.lua: --expect " .. g .. ": host " .. host .. " is in no host list (nosuchhost[1-2])\n",
      out)
    os.remove(g)
  end)

  it("matches the host's full name to a short one in the file and the short name to a full one", function()
    for _, case in ipairs({ { "node5.cluster.local", "node5" }, { "node5", "node5.cluster.local" },
      { "node5", "node[4-6], node9" } }) do
      local g = expect_file('{"hosts": {"' .. case[2] .. '": ' .. RXE0 .. '}}')
      local out, rc = support.run("env SLURMD_NODENAME=" .. case[1] .. " timeout 60 "
        .. support.example("fabric_check.lua", "--expect " .. g))
      assert.equal(0, rc, case[1] .. " / " .. case[2] .. ": " .. out)
      assert.matches("expect%s+PASS", out)
      os.remove(g)
    end
  end)

  it("fails rxe0 naming a counter its entry asks for that the port has not; passes one it has", function()
    local g = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "counters": '
      .. '{"out_of_sequence": 10, "sent_pkts": 1000000}}]}}}') -- out_of_sequence: mlx5's, not rxe's
    local out, rc = run("--expect " .. g)
    assert.equal(1, rc, out)
    assert.matches("expect%s+FAIL%s+[%d.]+ ms  rxe0 port 1 %(" .. g:gsub("%p", "%%%0") .. "%): counters: "
      .. "out_of_sequence not on this port\n", out)
    g = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "counters": {"sent_pkts": 1000000}}]}}}')
    out, rc = run("--expect " .. g)
    assert.equal(0, rc, out)
    assert.matches("expect%s+PASS", out)
    os.remove(g)
  end)
end)

-- How many verbs contexts process pid has open (/dev/infiniband/uverbsN among its descriptors).
local function contexts(pid)
  local uv = require "luv"
  local req, n = uv.fs_scandir("/proc/" .. pid .. "/fd"), 0
  while req do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    local target = uv.fs_readlink("/proc/" .. pid .. "/fd/" .. name)
    if target and target:find("^/dev/infiniband/uverbs") then n = n + 1 end
  end
  return n
end

-- d0 down until rxe0's port is down, then up until it is active with its GID back.
local function flap()
  assert.is_true(sh("ip link set d0 down"))
  assert.equal("down", wait_port("down"))
  assert.is_true(sh("ip link set d0 up"))
  local ctx = support.open()
  local back = util.port_back(ctx, 10)
  ctx:close()
  assert(back, "rxe0 did not come back")
end

describe("on rxe0, fabric_check.lua and a link that flaps during the check #once", function()
  after_each(function()
    sh("ip link set d0 up")
    assert.equal("active", wait_port("active"))
  end)

  it("gives no flap verdict in healthy runs (five in a row) #once", function()
    for _ = 1, 5 do
      local out, rc = run("-d rxe0")
      assert.equal(0, rc, out)
      assert.not_matches("flapped", out)
      assert.matches("6 checks, 0 failed: PASS", out)
    end
  end)

  it("alone: the link down and up while the check runs (stopped with SIGSTOP): flapped, exit 1 #once", function()
    -- caught once the script has rxe0 open twice (its watch, whose port events are queued from then on, and
    -- the checks' context); a run that ends before that is a healthy run, and is tried again
    local caught, out, rc
    for _ = 1, 10 do
      local h = util.start("examples/fabric_check.lua", "-d rxe0 -t 5")
      while not h.done() and contexts(h.pid) < 2 do util.sleep(0.002) end
      if not h.done() and h:kill("STOP") then
        caught = true
        local ok, err = pcall(flap)
        h:kill("CONT")
        assert(ok, err)
      end
      rc = h:wait(60)
      out = h.output()
      h.cleanup()
      if caught then break end
      assert.equal(0, rc, out) -- not caught: healthy
      assert.not_matches("flapped", out)
    end
    assert.is_true(caught, "the check always ended before it had rxe0 open")
    assert.equal(1, rc, out)
    local host = require("ibverbs.fabric").hostname()
    assert.matches("flapped%s+FAIL%s+[%d.]+ ms  " .. host:gsub("%p", "%%%0") .. " rxe0 port 1: [^\n]*"
      .. "events port_err, port_active", out)
    assert.matches("FAIL\n$", out)
  end)

  it("two ranks: rxe0 flaps while rank 0 waits for rank 1; rank 0's report names it, exit 1 there only #once",
    function()
    local port = 21000 + math.random(0, 4999)
    local args = "-d rxe0 --size 2 --root 127.0.0.1:" .. port .. " --rank "
    local r0 = support.spawn("timeout 120 " .. support.example("fabric_check.lua", args .. "0"))
    assert.is_true(support.wait_listen(port, 30), "rank 0 is not listening")
    local counter = "/sys/class/infiniband/rxe0/ports/1/hw_counters/link_downed"
    local downs = tonumber(support.slurp(counter))
    flap()
    assert.equal(downs + 1, tonumber(support.slurp(counter)))
    local out1, rc1 = support.run("timeout 120 " .. support.example("fabric_check.lua", args .. "1"))
    local out0, rc0 = r0:wait(60)
    assert.equal(1, rc0, out0)
    assert.equal(0, rc1, out1) -- rank 1 started after the flap: its own counters did not move
    local host = require("ibverbs.fabric").hostname():gsub("%p", "%%%0")
    assert.matches("FAULT rank 0 %(" .. host .. "%): [^\n]*flapped: " .. host .. " rxe0 port 1: link_downed %+1; "
      .. "events port_err, port_active", out0)
    assert.matches("nodes at fault %(exit 1%): rank 0 %(" .. host .. "%)\n", out0)
    assert.not_matches("flapped", out1)
  end)
end)

describe("on rxe0, fabric_check.lua --slurm-health --flap-state #once", function()
  after_each(function()
    sh("ip link set d0 up")
    assert.equal("active", wait_port("active"))
  end)

  it("names a flap between two runs once, from the link_downed the first run saved #once", function()
    local state = os.tmpname()
    os.remove(state)
    local function check()
      return support.run("timeout 60 " .. support.example("fabric_check.lua", "--slurm-health --flap-state " .. state))
    end
    local out, rc = check()
    assert.equal(0, rc, out)
    local saved = assert(require("dkjson").decode(assert(support.slurp(state))))
    assert.is_number(saved.ports["rxe0:1"])
    flap()
    out, rc = check()
    assert.equal(1, rc, out)
    local host = require("ibverbs.fabric").hostname():gsub("%p", "%%%0")
    assert.matches("flapped%s+FAIL%s+[%d.]+ ms  " .. host .. " rxe0 port 1: link_downed %+1 between the last check "
      .. "%(%d+%-%d+%-%d+T%d+:%d+:%d+Z%) and this one\n", out)
    assert.matches("slurm%-health " .. host .. ": FAIL in %d+ ms; flapped: ", out)
    out, rc = check() -- the flap was told once: the next run starts from there
    assert.equal(0, rc, out)
    assert.not_matches("flapped", out)
    os.remove(state)
  end)
end)

describe("on rxe0, fabric_check.lua --drain and --undrain-ok (a fake scontrol: spec/fake-scontrol) #once", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert.is_true(sh("mkdir " .. dir))
  end)
  after_each(function()
    sh("ip link set d0 up; rm -rf " .. dir)
    assert.equal("active", wait_port("active"))
  end)

  it("drains the node while rxe0's link is down, resumes it once the check passes again #once", function()
    local env = "env SLURMD_NODENAME=node9 FAKE_SCONTROL_DIR=" .. dir .. " IBVL_SCONTROL=spec/fake-scontrol "
    local out, rc = support.run(env .. "timeout 60 " .. support.example("fabric_check.lua", "--drain --undrain-ok"))
    assert.equal(0, rc, out)
    assert.not_matches("slurm:", out) -- passing, not drained: asked, nothing done
    assert.equal("[show][node][node9]\n", support.slurp(dir .. "/log"))
    assert.is_true(sh("ip link set d0 down"))
    assert.equal("down", wait_port("down"))
    out, rc = support.run(env .. "timeout 60 " .. support.example("fabric_check.lua", "--drain --undrain-ok"))
    assert.equal(1, rc, out)
    assert.matches("slurm: node9 drained: ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down; no active "
      .. "port on this node\n", out)
    assert.equal("IDLE+DRAIN\n", support.slurp(dir .. "/node9.state"))
    assert.is_true(sh("ip link set d0 up"))
    local ctx = support.open()
    assert(util.port_back(ctx, 10), "rxe0 did not come back")
    ctx:close()
    out, rc = support.run(env .. "timeout 60 " .. support.example("fabric_check.lua", "--drain --undrain-ok"))
    assert.equal(0, rc, out)
    assert.matches("slurm: node9 resumed %(was: ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down; no "
      .. "active port on this node%)\n", out)
    assert.equal("IDLE\n", support.slurp(dir .. "/node9.state"))
    assert.matches("%[update%]%[NodeName=node9%]%[State=RESUME%]\n$", support.slurp(dir .. "/log"))
  end)
end)
