-- The fault campaign of fabric_check.lua on one node (docs/bringup.md, "The
-- fault campaign"): one case per fault, each run as the Slurm health check
-- runs it (--drain --undrain-ok, through spec/fake-scontrol), and each
-- naming the false PASS or false RESUME it rules out.  Every case checks
-- the exit status, the line that says why, and what Slurm shows after.
-- Counters are faked by a bind mount over rxe0's sysfs counter file: a file
-- (a saturated or unreadable value; rxe's hw_counters are 64-bit, and rxe
-- has no InfiniBand PortCounters), or rxe0's own sent_pkts (a counter that
-- rises with the check's traffic).
-- Runs under lua5.4 in the soft-RoCE VM (#once: its verdicts come from C loops
-- and sysfs; the check's Lua runs under LuaJIT in the host specs).
local support = require "support"
local util = require "faults.util"

local sh, wait_port = support.sh, support.wait_port
local HW = "/sys/class/infiniband/rxe0/ports/1/hw_counters/"
local HOST = require("ibverbs.fabric").hostname()
local SHORT = HOST:match("^[^.]*")

local dir -- the fake scontrol's directory: node9's state, its reason, the calls' log
local mounts, undo = {}, {}

-- A file of text bind-mounted over rxe0's hw counter name; returns the file.
local function bind(name, text)
  local path = os.tmpname()
  local fh = assert(io.open(path, "w"))
  fh:write(text)
  fh:close()
  assert.is_true(sh("mount --bind " .. path .. " " .. HW .. name), "mount over " .. name)
  mounts[#mounts + 1] = HW .. name
  return path
end

-- rxe0's own hw counter source, bind-mounted over its counter name: name
-- then reads source's value, which rises with every packet rxe0 sends (the
-- check's own, +11 a run), in step with the check, not with a clock.
local function bind_to(name, source)
  assert.is_true(sh("mount --bind " .. HW .. source .. " " .. HW .. name), "mount " .. source .. " over " .. name)
  mounts[#mounts + 1] = HW .. name
end

-- An expect file of body; returns its path.
local function expect_file(body, ext)
  local path = os.tmpname() .. (ext or ".json")
  local fh = assert(io.open(path, "w"))
  fh:write(body)
  fh:close()
  undo[#undo + 1] = function() os.remove(path) end
  return path
end

local function run(args, env)
  local cmd = "env " .. (env or ("SLURMD_NODENAME=" .. SHORT)) .. " FAKE_SCONTROL_DIR=" .. dir
    .. " IBVL_SCONTROL=spec/fake-scontrol timeout 60 "
    .. support.example("fabric_check.lua", "--drain --undrain-ok " .. args)
  return support.run(cmd)
end

-- What Slurm shows of this node after the run: "untouched" (no scontrol call),
-- "idle" or "drained" (with its reason).
local function slurm_after()
  local log = support.slurp(dir .. "/log")
  if not log or log == "" then return "untouched" end
  local state = (support.slurp(dir .. "/" .. SHORT .. ".state") or "IDLE\n"):gsub("%s+$", "")
  if state:find("DRAIN") then return "drained", support.slurp(dir .. "/" .. SHORT .. ".reason") end
  return "idle"
end

local ROWS = {}
local function row(t) ROWS[#ROWS + 1] = t end

row{ fault = "every port down (d0 down: rxe0 the only device)", rules_out = "a node with no active port passing",
  setup = function()
    assert.is_true(sh("ip link set d0 down"))
    assert.equal("down", wait_port("down"))
  end,
  args = "", rc = 1, says = { "port_state%s+FAIL.*port is down" }, slurm = "drained" }

row{ fault = "one port down (rxe9 on a netdev that is down) beside an active rxe0, without --expect",
  rules_out = "a healthy node drained for a port nobody asked for (the other way: see the next row)",
  setup = function()
    assert.is_true(sh("ip link add d9 type dummy && rdma link add rxe9 type rxe netdev d9"))
    undo[#undo + 1] = function() sh("rdma link delete rxe9; ip link delete d9") end
  end,
  args = "", rc = 0, says = { "idle: not checked, not needed", "0 failed: PASS" }, slurm = "idle" }

row{ fault = "one port down (rxe9) that the --expect file names",
  rules_out = "a node passing while a port its golden file requires is down",
  setup = function(t)
    assert.is_true(sh("ip link add d9 type dummy && rdma link add rxe9 type rxe netdev d9"))
    undo[#undo + 1] = function() sh("rdma link delete rxe9; ip link delete d9") end
    t.file = expect_file('{"hosts": {"' .. SHORT .. '": {"ports": [{"device": "rxe0", "port": 1}, '
      .. '{"device": "rxe9", "port": 1}]}}}')
  end,
  args = function(t) return "--expect " .. t.file end, rc = 1,
  says = { "rxe9 port 1 %(.-%): state: expected active, found down" }, slurm = "drained" }

row{ fault = "this host missing from the --expect file",
  rules_out = "a node the golden file does not name passing with 0 checks (and being resumed)",
  setup = function(t)
    t.file = expect_file('{"hosts": {"gpu[01-16]": {"ports": [{"device": "rxe0", "port": 1}]}}}')
  end,
  args = function(t) return "--expect " .. t.file end, rc = 2,
  says = { "is in no host list %(gpu%[01%-16%]%)" }, slurm = "untouched" }

row{ fault = "a full domain name (the host named " .. SHORT .. ".cluster.example, the file naming " .. SHORT .. ")",
  rules_out = "a node missed (and so passed or refused) for the form of its name",
  setup = function(t)
    assert.is_true(sh("hostname " .. SHORT .. ".cluster.example"))
    undo[#undo + 1] = function() sh("hostname " .. HOST) end
    t.file = expect_file('{"hosts": {"' .. SHORT .. '": {"ports": [{"device": "rxe0", "port": 1, '
      .. '"active_mtu": 4096}]}}}')
  end,
  env = "-u SLURMD_NODENAME", -- the Slurm node: the host name up to its first dot
  args = function(t) return "--expect " .. t.file end, rc = 1,
  says = { "active_mtu: expected 4096, found 1024" }, slurm = "drained" }

row{ fault = "MTU wrong (the file expects 4096; rxe0 runs 1024)", rules_out = "a uniformly mis-set MTU passing",
  setup = function(t)
    t.file = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "active_mtu": 4096}]}}}')
  end,
  args = function(t) return "--expect " .. t.file end, rc = 1,
  says = { "active_mtu: expected 4096, found 1024" }, slurm = "drained" }

row{ fault = "GID type wrong (the file expects roce_v1; rxe0's traffic runs on a RoCE v2 GID)",
  rules_out = "a node on the wrong RoCE version passing",
  setup = function(t)
    t.file = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "gid_type": "roce_v1"}]}}}')
  end,
  args = function(t) return "--expect " .. t.file end, rc = 1,
  says = { "gid_type: expected roce_v1, found roce_v2" }, slurm = "drained" }

row{ fault = "a counter the --expect file asks for that rxe0 lacks (symbol_error: rxe has no PortCounters)",
  rules_out = "a threshold silently unenforced because the counter is not there",
  setup = function(t)
    t.file = expect_file('{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, '
      .. '"counters": {"symbol_error": 0}}]}}}')
  end,
  args = function(t) return "--expect " .. t.file end, rc = 1, says = { "symbol_error" }, slurm = "drained" }

row{ fault = "a saturated counter (completer_retry_err at 2^64-1, bind-mounted over rxe0's file)",
  rules_out = "a counter stuck at its maximum read as 'none moved'",
  setup = function() bind("completer_retry_err", "18446744073709551615\n") end,
  args = "-d rxe0", rc = 1, says = { "completer_retry_err.-saturated" }, slurm = "drained" }

row{ fault = "an unreadable counter (rcvd_seq_err reads 'garbage')",
  rules_out = "a counter that cannot be read skipped like a healthy one",
  setup = function() bind("rcvd_seq_err", "garbage\n") end,
  args = "-d rxe0", rc = 1, says = { HW:gsub("%p", "%%%0") .. "rcvd_seq_err" }, slurm = "drained" }

row{ fault = "a physical counter rising during the check (link_downed: sent_pkts bind-mounted over it)",
  rules_out = "a physical-layer error passing because the node is busy or the rise is small",
  setup = function() bind_to("link_downed", "sent_pkts") end,
  args = "-d rxe0", rc = 1, says = { "link_downed %+%d+" }, slurm = "drained" }

row{ fault = "a transport counter rising with other traffic on the port (retry_exceeded_err: sent_pkts "
    .. "bind-mounted over it; ib_write_bw running beside the check)",
  rules_out = "a healthy node drained for its job's traffic",
  setup = function()
    bind_to("retry_exceeded_err", "sent_pkts")
    -- a job's traffic: perftest's writes of 64 bytes for a minute, at least
    -- 5000 packets a second before the check starts (a pingpong's few
    -- hundred a second under load stayed under the check's margin: judged)
    local bw = "ib_write_bw -d rxe0 -x 1 -s 64 -D 60 -F -p 18556"
    local srv = support.spawn("timeout 70 " .. bw)
    -- the client once the server listens (a client before it fails at once: no traffic, seen under load)
    local function listening()
      for _, f in ipairs({ "/proc/net/tcp", "/proc/net/tcp6" }) do
        if (support.slurp(f) or ""):find(":487C [0-9A-F:]+ 0A ") then return true end -- port 18556, LISTEN
      end
    end
    local until_t = os.time() + 20
    while not listening() and os.time() < until_t do require("socket").sleep(0.1) end
    local cli = support.spawn("timeout 70 " .. bw .. " 127.0.0.1")
    undo[#undo + 1] = function()
      sh("pkill -f '" .. bw .. "' 2>/dev/null")
      srv:wait(5); cli:wait(5)
    end
    local function sent() return tonumber(support.slurp(HW .. "sent_pkts")) end
    local rate, deadline = 0, os.time() + 20
    while rate < 5000 and os.time() < deadline do
      local a, t0 = sent(), require("ibverbs").now()
      require("socket").sleep(0.5)
      rate = (sent() - a) / (require("ibverbs").now() - t0)
    end
    assert(rate >= 5000, string.format("the job's traffic: %.0f packets a second, 5000 wanted", rate))
  end,
  args = "-d rxe0", rc = 0, says = { "transport not judged" }, slurm = "idle" }

row{ fault = "the same transport counter rising on a node said to run a job (--busy)",
  rules_out = "a healthy allocated node drained for its job's congestion",
  setup = function() bind_to("retry_exceeded_err", "sent_pkts") end,
  args = "-d rxe0 --busy", rc = 0, says = { "transport not judged" }, slurm = "idle" }

row{ fault = "the same transport counter rising on an idle node (nothing else on the port)",
  rules_out = "a transport fault hidden by the rule that excuses busy nodes",
  setup = function() bind_to("retry_exceeded_err", "sent_pkts") end,
  args = "-d rxe0", rc = 1, says = { "retry_exceeded_err %+%d+ %(threshold 0%)" }, slurm = "drained" }

describe("fabric_check.lua's fault campaign on rxe0, as the Slurm health check (--drain --undrain-ok) #once", function()
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert.is_true(sh("mkdir " .. dir))
  end)
  after_each(function()
    for i = #undo, 1, -1 do undo[i]() end
    for i = #mounts, 1, -1 do sh("umount " .. mounts[i]) end
    mounts, undo = {}, {}
    sh("ip link set d0 up; rm -rf " .. dir)
    assert.equal("active", wait_port("active"))
    local ctx = support.open()
    assert(util.port_back(ctx, 10), "rxe0 did not come back")
    ctx:close()
  end)

  sh("mkdir -p .cache/campaign")
  for i, r in ipairs(ROWS) do
    it(r.fault .. ": exit " .. r.rc .. ", the node " .. r.slurm .. " (rules out " .. r.rules_out .. ")", function()
      local t = {}
      r.setup(t)
      local args = type(r.args) == "function" and r.args(t) or r.args
      local out, rc = run(args, r.env)
      assert.equal(r.rc, rc, out)
      for _, pat in ipairs(r.says) do assert.matches(pat, out) end
      local state, reason = slurm_after()
      -- (each row's output and what Slurm shows, for docs/bringup.md's campaign table)
      local keep = io.open(string.format(".cache/campaign/%s-%02d.txt", support.LUA, i), "w")
      if keep then
        keep:write(r.fault, "\n", out, "exit ", tostring(rc), "\nslurm: ", state, " ", tostring(reason), "\n")
        keep:close()
      end
      assert.equal(r.slurm, state, out .. "\nscontrol log: " .. tostring(support.slurp(dir .. "/log")))
      if state == "drained" then assert.matches("^ibverbs fabric_check", reason) end
    end)
  end
end)
