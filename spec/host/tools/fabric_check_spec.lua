-- examples/fabric_check.lua on this host, which has no RDMA driver: alone, and
-- as a job of local ranks (the exit status each rank gives); --drain through
-- a fake scontrol (spec/fake-scontrol); --drain and --undrain-ok over the
-- stand-in verbs of spec/fake-verbs (ports up or down at will), each case
-- named after the false RESUME or DRAIN it rules out.
local fs = require "fabric_support"
local LUA, CPATH = fs.LUA, fs.CPATH

local function alone_env(env, args)
  local p = io.popen(env .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. CPATH .. "' " .. LUA ..
    " examples/fabric_check.lua " .. args .. " 2>&1; echo rc=$?")
  local out = p:read("a")
  p:close()
  return out
end
local function alone(args) return alone_env("", args) end

describe("examples/fabric_check.lua on this host (no RDMA driver)", function()
  it("reports the missing driver as this node's fault and exits 1, without a traceback", function()
    local out = alone("")
    assert.matches("%(none%): FAIL no RDMA driver loaded %(ibv_get_device_list: Function not implemented%)", out)
    assert.matches("rc=1", out)
    assert.not_matches("traceback", out)
  end)

  it("exits 2 for a bad option", function()
    local out = alone("--ud-loss 2")
    assert.matches("option '%-%-ud%-loss': at most 0%.99 expected, got 2", out)
    assert.matches("rc=2\n$", out)
  end)

  it("exits 1 on each rank whose own node is at fault, and names them", function()
    local text, rcs = fs.job("examples/fabric_check.lua", 2, "")
    assert.same({ [0] = 1, [1] = 1 }, rcs)
    assert.matches("nodes at fault %(exit 1%): rank 0 %(%S+%), rank 1 %(%S+%)", text)
  end)

  it("exits 2 on every rank when the ranks run other options, naming what each runs", function()
    local _, rcs, texts = fs.job("examples/fabric_check.lua", 3, function(r) return r == 2 and "--ud-count 3" or "" end)
    assert.same({ [0] = 2, [1] = 2, [2] = 2 }, rcs)
    for r = 0, 2 do
      assert.matches("the ranks do not run the same script version and options: rank 0 %(%S+%) and rank 1 %(%S+%): "
        .. "'fabric_check%.lua 2 .-ud_count=10 .-'; rank 2 %(%S+%): 'fabric_check%.lua 2 .-ud_count=3 .-'", texts[r])
    end
  end)

  it("--drain: drains this node (no driver: at fault) through IBVL_SCONTROL, the reason naming the fault", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    local env = "SLURMD_NODENAME=node7 FAKE_SCONTROL_DIR=" .. dir .. " IBVL_SCONTROL=spec/fake-scontrol "
    local out = alone_env(env, "--drain")
    -- nothing was checked: an empty scope, which any run that checks a port and passes covers
    assert.matches("slurm: node7 drained: ibverbs fabric_check %[%]: %(none%): no RDMA driver loaded", out)
    assert.matches("rc=1\n$", out)
    local f = assert(io.open(dir .. "/log"))
    local log = f:read("a")
    f:close()
    assert.matches("^%[show%]%[node%]%[node7%]\n%[update%]%[NodeName=node7%]%[State=DRAIN%]%[Reason=ibverbs "
      .. "fabric_check %[%]: %(none%): no RDMA driver loaded [^\n]*%]\n$", log)
    -- -d rxe0: the device named is the scope
    os.remove(dir .. "/node7.state")
    os.remove(dir .. "/node7.reason")
    out = alone_env(env, "--drain -d rxe0")
    assert.matches("slurm: node7 drained: ibverbs fabric_check %[rxe0%]: rxe0: no RDMA driver loaded", out)
    -- someone else's drain is left alone, and said so; the status stays the check's
    os.remove(dir .. "/log")
    f = assert(io.open(dir .. "/node7.reason", "w"))
    f:write("bad PSU")
    f:close()
    f = assert(io.open(dir .. "/node7.state", "w"))
    f:write("IDLE+DRAIN")
    f:close()
    out = alone_env(env, "--drain --slurm-health")
    assert.matches("slurm: node7 left alone: drained by someone else %(Reason=bad PSU%)", out)
    assert.matches("slurm%-health node7: FAIL in %d+ ms; %(none%): no RDMA driver loaded", out)
    assert.matches("rc=1\n$", out)
    -- scontrol failing: said on stderr, the status stays 1
    f = assert(io.open(dir .. "/fail", "w"))
    f:write("Unable to contact slurm controller")
    f:close()
    out = alone_env(env, "--drain")
    assert.matches("fabric_check.lua: slurm: spec/fake%-scontrol show node node7: exit 1: Unable to contact", out)
    assert.matches("rc=1\n$", out)
    os.execute("rm -rf " .. dir)
  end)

  it("--drain: exits 2 for a node name that is not one, and with --exit-any, before running anything", function()
    local out = alone_env("SLURMD_NODENAME='n;reboot' IBVL_SCONTROL=/nonexistent ", "--drain")
    assert.matches("fabric_check.lua: option '%-%-drain'/'%-%-undrain%-ok': bad Slurm node name \"n;reboot\"", out)
    assert.matches("rc=2\n$", out)
    out = alone_env("SLURMD_NODENAME=node7 IBVL_SCONTROL=/nonexistent ", "--undrain-ok --exit-any")
    assert.matches("option '%-%-drain'/'%-%-undrain%-ok': does not go with '%-%-exit%-any'", out)
    assert.matches("rc=2\n$", out)
  end)

  describe("bad --expect or --counter-thresholds input: exit 2, one line, no scontrol call", function()
    local dir
    before_each(function()
      dir = os.tmpname()
      os.remove(dir)
      assert(os.execute("mkdir " .. dir))
    end)
    after_each(function() os.execute("rm -rf " .. dir) end)

    local function write(name, body)
      local fh = assert(io.open(dir .. "/" .. name, "w"))
      fh:write(body)
      fh:close()
      return dir .. "/" .. name
    end
    -- fabric_check.lua --drain --undrain-ok as node (SLURMD_NODENAME) with args: its output, and the
    -- fake scontrol's log (every call it got)
    local function refused(node, args)
      local out = alone_env("SLURMD_NODENAME=" .. node .. " FAKE_SCONTROL_DIR=" .. dir
        .. " IBVL_SCONTROL=spec/fake-scontrol ", "--drain --undrain-ok " .. args)
      local fh = io.open(dir .. "/log")
      local log = fh and fh:read("a") or ""
      if fh then fh:close() end
      return out, log
    end
    local PORTS = '{"ports": [{"device": "rxe0", "port": 1}]}'

    it("a host that no host list names, drained, resumed or passed never", function()
      local g = write("golden.json", '{"hosts": {"node[1-4]": ' .. PORTS .. ', "gpu[01-16]": ' .. PORTS .. '}}')
      local out, log = refused("node9.cluster.local", "--expect " .. g)
      assert.equal("fabric_check.lua: --expect " .. g .. ": host node9.cluster.local is in no host list "
        .. "(gpu[01-16], node[1-4])\nrc=2\n", out)
      assert.equal("", log)
    end)

    it("a file of pairs alone names no host for fabric_check.lua", function()
      local g = write("pairs.json", '{"pairs": {"max_lat_us": 3}}')
      local out, log = refused("node1", "--expect " .. g)
      assert.equal("fabric_check.lua: --expect " .. g .. ": host node1 is in no host list (the file has pairs "
        .. "only)\nrc=2\n", out)
      assert.equal("", log)
    end)

    it("ports as an object, an empty list", function()
      for _, ports in ipairs({ '{"a": {"device": "rxe0", "port": 1}}', "[]" }) do
        local g = write("g.json", '{"hosts": {"node[1-4]": {"ports": ' .. ports .. '}}}')
        local out, log = refused("node1", "--expect " .. g)
        assert.equal("fabric_check.lua: --expect " .. g .. ': hosts["node[1-4]"].ports: a non-empty list of port '
          .. "entries expected\nrc=2\n", out)
        assert.equal("", log)
      end
    end)

    it("a Lua file without a return", function()
      local g = write("g.lua", 'hosts = { ["*"] = ' .. PORTS:gsub('"(%w+)":', "%1 ="):gsub("%[", "{"):gsub("%]", "}")
        .. " }\n")
      local out, log = refused("node1", "--expect " .. g)
      assert.equal("fabric_check.lua: --expect " .. g .. ": a Lua expect file must return a table, got nil\nrc=2\n",
        out)
      assert.equal("", log)
    end)

    it("an unknown counter in the file's counters", function()
      local g = write("g.json", '{"hosts": {"*": {"ports": [{"device": "rxe0", "port": 1, "counters": '
        .. '{"symbol_errors": 0}}]}}}')
      local out, log = refused("node1", "--expect " .. g)
      assert.equal("fabric_check.lua: --expect " .. g .. ': hosts["*"].ports[1].counters: unknown counter '
        .. "'symbol_errors' (nearest: symbol_error, port_rcv_errors, req_cqe_error)\nrc=2\n", out)
      assert.equal("", log)
    end)

    it("an unknown counter in --counter-thresholds (all=n stays)", function()
      local out, log = refused("node1", "--counter-thresholds link_downed=1,symbol_errors=3")
      assert.equal("fabric_check.lua: option '--counter-thresholds': unknown counter 'symbol_errors' (nearest: "
        .. "symbol_error, port_rcv_errors, req_cqe_error)\nrc=2\n", out)
      assert.equal("", log)
      out = alone("--counter-thresholds all=3,hw_link_downed=0")
      assert.matches("rc=1\n$", out) -- (no driver: at fault, but the option was taken)
    end)
  end)

  it("--expect: a host named in short form or in full, or after a blank in a host list, is checked", function()
    local path = os.tmpname()
    for _, case in ipairs({ { "node3.cluster.local", "node[1-4]" }, { "node3", "node3.cluster.local" },
      { "node7", "node[1-4], node7" } }) do
      local fh = assert(io.open(path, "w"))
      fh:write('{"hosts": {"' .. case[2] .. '": {"ports": [{"device": "rxe0", "port": 1}]}}}')
      fh:close()
      local out = alone_env("SLURMD_NODENAME=" .. case[1] .. " ", "--expect " .. path)
      assert.not_matches("no host list", out, case[1])
      assert.matches("expect%s+FAIL%s+[%d.]+ ms  rxe0 port 1 %(.-%): not present on this host", out, case[1])
      assert.matches("rc=1\n$", out, case[1]) -- (no driver here)
    end
    os.remove(path)
  end)

  it("--expect: a rank whose host no host list names stops every rank with exit 2, without waiting", function()
    local path = os.tmpname()
    local fh = assert(io.open(path, "w"))
    fh:write('{"hosts": {"node[1-2]": {"ports": [{"device": "rxe0", "port": 1}]}}}')
    fh:close()
    local started = os.time()
    local _, rcs, texts = fs.job("examples/fabric_check.lua", 2, "--expect " .. path .. " --fabric-timeout 30",
      function(r) return "SLURMD_NODENAME=" .. (r == 1 and "node9" or "node1") .. " " end)
    assert.same({ [0] = 2, [1] = 2 }, rcs)
    assert.is_true(os.time() - started < 20) -- not rank 0's rendezvous timeout
    assert.matches("^fabric_check%.lua: %-%-expect " .. path:gsub("%p", "%%%0") .. ": host node9 is in no host list "
      .. "%(node%[1%-2%]%)\n", texts[1])
    assert.matches("the ranks do not run the same script version and options: rank 0 %(node1%): '[^']- "
      .. "host_named=true'; rank 1 %(node9%): '[^']- host_named=false'", texts[0])
    os.remove(path)
  end)

  it("--flap-state: exits 2 for a file that is not a flap state, naming it", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write('{"time": 1, "ports": {"rxe0": 3}}')
    f:close()
    local out = alone("--flap-state " .. path)
    assert.matches("option '%-%-flap%-state': " .. path:gsub("%p", "%%%0") .. ": not a fabric_check flap state "
      .. "%('ports' entry \"rxe0\" is not \"device:port\": integer%)", out)
    assert.matches("rc=2\n$", out)
    f = assert(io.open(path, "w"))
    f:write("{")
    f:close()
    assert.matches("not a fabric_check flap state", alone("--flap-state " .. path))
    os.remove(path)
    -- a file not there yet is the first run's: made at the end
    out = alone("--flap-state " .. path)
    assert.matches("rc=1\n$", out) -- (no driver)
    local saved = require("dkjson").decode(io.open(path):read("a"))
    assert.is_number(saved.time)
    assert.same({}, saved.ports)
    os.remove(path)
  end)
end)

describe("examples/fabric_check.lua --drain, --undrain-ok over stand-in verbs (spec/fake-verbs)", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
  end)
  after_each(function() os.execute("rm -rf " .. dir) end)
  -- fabric_check on node7 with the ports verbs gives ("rxe0:1=active,..."), node7 in state with reason
  local function run(verbs, args, state, reason)
    if state then fs.write(dir .. "/node7.state", state .. "\n") end
    if reason then fs.write(dir .. "/node7.reason", reason) end
    os.remove(dir .. "/log")
    local p = io.popen("SLURMD_NODENAME=node7 FAKE_SCONTROL_DIR=" .. dir .. " IBVL_SCONTROL=spec/fake-scontrol "
      .. "FAKE_VERBS='" .. verbs .. "' LUA_PATH='spec/fake-verbs/?.lua;lua/?.lua;;' " .. LUA
      .. " examples/fabric_check.lua " .. args .. " 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    return out, fs.slurp(dir .. "/node7.state"), fs.slurp(dir .. "/node7.reason"), fs.slurp(dir .. "/log") or ""
  end
  local OWN = "ibverbs fabric_check [rxe0:1]: rxe0:1 port_state: port is down; no active port on this node"

  it("drains for the ports it checked, and resumes once the same port passed again", function()
    local out, state, reason = run("rxe0:1=down", "--slurm-health --drain --undrain-ok")
    assert.matches("\nslurm: node7 drained: " .. OWN:gsub("%p", "%%%0") .. "\nrc=1\n$", out)
    assert.equal("IDLE+DRAIN\n", state)
    assert.equal(OWN, reason)
    out, state, reason = run("rxe0:1=active,rxe1:1=active", "--slurm-health --drain --undrain-ok")
    assert.matches("\nslurm: node7 resumed %(was: " .. OWN:gsub("%p", "%%%0") .. "%)\nrc=0\n$", out)
    assert.equal("IDLE\n", state)
    assert.is_nil(reason)
    -- -d rxe0 -i 1 checks rxe0:1: resumes too
    run("rxe0:1=active", "--drain --undrain-ok", "IDLE+DRAIN", OWN)
    out = run("rxe0:1=active,rxe0:2=active", "-d rxe0 -i 1 --undrain-ok", "IDLE+DRAIN", OWN)
    assert.matches("slurm: node7 resumed", out)
  end)

  it("no false RESUME: a drain for rxe0:1 is not resumed by a run with -d mlx5_0, nor with rxe0:1 idle", function()
    for _, c in ipairs({ { "rxe0:1=active,mlx5_0:1=active", "-d mlx5_0" }, { "rxe0:1=down,mlx5_0:1=active", "" },
      { "rxe0:1=active,rxe0:2=active", "-i 2" } }) do
      local out, state, reason = run(c[1], c[2] .. " --drain --undrain-ok", "IDLE+DRAIN", OWN)
      assert.matches("\nslurm: node7 stays drained: this run did not check rxe0:1 %(Reason=" .. OWN:gsub("%p", "%%%0")
        .. "%)\nrc=0\n$", out)
      assert.equal("IDLE+DRAIN\n", state)
      assert.equal(OWN, reason)
    end
  end)

  it("no false RESUME: a failing run with -d mlx5_0 drains again with rxe0:1 still in the scope", function()
    local _, _, reason = run("rxe0:1=active,mlx5_0:1=down", "-d mlx5_0 --drain --undrain-ok", "IDLE+DRAIN", OWN)
    assert.equal("ibverbs fabric_check [mlx5_0:1,rxe0:1]: mlx5_0:1 port_state: port is down", reason)
    local out = run("rxe0:1=active,mlx5_0:1=active", "-d mlx5_0 --drain --undrain-ok")
    assert.matches("slurm: node7 stays drained: this run did not check rxe0:1", out)
  end)

  it("no false RESUME: --slurm-health does not resume its own wide drain (only a run across nodes does)", function()
    local wide = "ibverbs fabric_check [rxe0:1 wide]: named at fault in rank 0's report (a broken pair)"
    local out, state = run("rxe0:1=active", "--slurm-health --drain --undrain-ok", "IDLE+DRAIN", wide)
    assert.matches("\nslurm: node7 stays drained: found by a run across nodes, which alone resumes it %(Reason="
      .. wide:gsub("%p", "%%%0") .. "%)\n", out)
    assert.equal("IDLE+DRAIN\n", state)
  end)

  it("no false RESUME: does not resume (nor drain again) a node fabric_matrix drained", function()
    local matrix = "ibverbs fabric_matrix [rxe0:1]: link node7 <-> node8 rxe0:1: both pass with other partners"
    for _, verbs in ipairs({ "rxe0:1=active", "rxe0:1=down" }) do
      local out, state, reason, log = run(verbs, "--slurm-health --drain --undrain-ok", "IDLE+DRAIN", matrix)
      assert.matches("\nslurm: node7 left alone: drained by fabric_matrix, which alone resumes it %(Reason="
        .. matrix:gsub("%p", "%%%0") .. "%)\n", out)
      assert.equal("IDLE+DRAIN\n", state)
      assert.equal(matrix, reason)
      assert.not_matches("update", log)
    end
  end)

  it("no false DRAIN nor RESUME: DOWN with an admin's reason, FAIL, MAINT, DOWN*: left alone, said", function()
    for _, st in ipairs({ "DOWN", "IDLE+FAIL", "IDLE+MAINTENANCE+RESERVED", "DOWN*", "IDLE+DRAIN+NOT_RESPONDING" }) do
      for _, verbs in ipairs({ "rxe0:1=active", "rxe0:1=down" }) do
        local out, state, reason, log = run(verbs, "--slurm-health --drain --undrain-ok", st, "admin: psu")
        assert.matches("\nslurm: node7 left alone: " .. st:gsub("%p", "%%%0") .. " %(Reason=admin: psu%)\n", out)
        assert.equal(st .. "\n", state)
        assert.equal("admin: psu", reason)
        assert.not_matches("update", log)
      end
    end
  end)

  it("no false RESUME: an earlier version's 'ibverbs:' drain is left alone, to be resumed by hand", function()
    local old = "ibverbs: rxe0:1 port_state: port is down"
    local out, state = run("rxe0:1=active", "--slurm-health --drain --undrain-ok", "IDLE+DRAIN", old)
    assert.matches("\nslurm: node7 left alone: drained by an earlier version of lua%-ibverbs %('ibverbs:', no tool, "
      .. "no scope%): resume it by hand %(Reason=" .. old:gsub("%p", "%%%0") .. "%)\n", out)
    assert.equal("IDLE+DRAIN\n", state)
  end)
end)
