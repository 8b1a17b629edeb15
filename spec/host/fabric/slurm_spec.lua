-- ibverbs.fabric.slurm against a fake scontrol (spec/fake-scontrol, which
-- logs each call's arguments and keeps one node's state in a directory):
-- the arguments as Slurm gets them (one argument a word, no shell between),
-- a drain by someone else, by the other tool or by an earlier version left
-- alone, a node DOWN, FAIL, MAINT, ... never touched, resume only of a
-- tool's own drains whose scope the run checked again (each case named
-- after the false RESUME it rules out), the scope kept through a cut reason,
-- bad node names refused, scontrol's failures returned as messages, its
-- time limit; through ibv.spawn, the only way it runs.
local slurm = require "ibverbs.fabric.slurm"

local FAKE = io.popen("pwd"):read("l") .. "/spec/fake-scontrol"

local slurp, write = require("fabric_support").slurp, require("fabric_support").write

-- Each case gets a fresh state directory and the fake as scontrol; FAKE_SCONTROL_DIR
-- reaches the fake through the environment (set for this process with a wrapper script).
local dir, saved
local function fresh()
  dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local wrapper = dir .. "/scontrol"
  write(wrapper, "#!/bin/sh\nFAKE_SCONTROL_DIR='" .. dir .. "' exec '" .. FAKE .. "' \"$@\"\n")
  assert(os.execute("chmod +x " .. wrapper))
  saved = slurm.SCONTROL
  slurm.SCONTROL = wrapper
end
local function log() return slurp(dir .. "/log") or "" end

-- The scope of the cases' drains: what fabric_check checked (CHECK); a run of tool that checked checked.
local CHECK = { tool = "fabric_check", ports = { "rxe0:1" } }
local function run(tool, checked, multi_rank) return { tool = tool, checked = checked, multi_rank = multi_rank } end
local R_CHECK = "ibverbs fabric_check [rxe0:1]: "

local function cases(label)
  before_each(fresh)
  after_each(function()
    slurm.SCONTROL = saved
    os.execute("rm -rf " .. dir)
  end)
  local function drained(node, state, reason)
    write(dir .. "/" .. node .. ".state", state .. "\n")
    if reason then write(dir .. "/" .. node .. ".reason", reason) end
  end

  it(label .. ": drains a healthy node with the reason as one argument, shell characters and all", function()
    local why = [[port_state: port is down; it's $(touch /tmp/pwned) `id` "x" \ ; done]]
    local r = assert(slurm.drain("node2", why, CHECK))
    assert.equal("drained", r.action)
    assert.equal("[show][node][node2]\n[update][NodeName=node2][State=DRAIN][Reason=" .. R_CHECK .. why .. "]\n",
      log())
    assert.is_nil(slurp("/tmp/pwned"))
    local st = assert(slurm.node_state("node2"))
    assert.same({ state = "IDLE+DRAIN", drain = true, hold = false, reason = R_CHECK .. why,
      owner = { tool = "fabric_check", scope = { ports = { "rxe0:1" }, wide = false }, text = why } }, st)
    assert.equal("node2 drained: " .. R_CHECK .. why, r.detail)
  end)

  it(label .. ": leaves a node someone else drained alone, and says so", function()
    drained("node2", "IDLE+DRAIN", "bad DIMM, ticket 42")
    local r = assert(slurm.drain("node2", "flapped", CHECK))
    assert.equal("kept", r.action)
    assert.equal("node2 left alone: drained by someone else (Reason=bad DIMM, ticket 42)", r.detail)
    r = assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" })))
    assert.equal("kept", r.action)
    assert.equal("[show][node][node2]\n[show][node][node2]\n", log()) -- no update at all
    assert.equal("bad DIMM, ticket 42", slurp(dir .. "/node2.reason"))
  end)

  it(label .. ": resumes a node it drained once the same scope passed again; a node not drained is left as it is",
    function()
      assert.equal("none", assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }))).action)
      assert(slurm.drain("node2", "counters: link_downed +1", CHECK))
      local r = assert(slurm.resume("node2", run("fabric_check", { "rxe0:1", "rxe1:1" })))
      assert.equal("resumed", r.action)
      assert.equal("node2 resumed (was: " .. R_CHECK .. "counters: link_downed +1)", r.detail)
      assert.matches("%[update%]%[NodeName=node2%]%[State=RESUME%]\n$", log())
      assert.equal("IDLE\n", slurp(dir .. "/node2.state"))
      -- a whole device in the scope (it failed to open): any port of it checked again
      assert(slurm.drain("node2", "mlx5_0: cannot open", { tool = "fabric_check", ports = { "mlx5_0" } }))
      assert.equal("resumed", assert(slurm.resume("node2", run("fabric_check", { "mlx5_0:2" }))).action)
    end)

  it(label .. ": no false RESUME: fabric_check neither resumes nor re-drains a fabric_matrix drain", function()
    local reason = "ibverbs fabric_matrix [rxe0:1]: link node2 <-> node3 rxe0:1: both pass with other partners"
    drained("node2", "IDLE+DRAIN", reason)
    local r = assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, true)))
    assert.equal("kept", r.action)
    assert.equal("node2 left alone: drained by fabric_matrix, which alone resumes it (Reason=" .. reason .. ")",
      r.detail)
    assert.equal("kept", assert(slurm.drain("node2", "port_state: port is down", CHECK)).action)
    assert.equal(reason, slurp(dir .. "/node2.reason"))
    assert.not_matches("%[update%]", log())
  end)

  it(label .. ": no false RESUME: fabric_matrix (settle) does not resume a fabric_check drain", function()
    write(dir .. "/nodes", "node1\n")
    drained("node1", "IDLE+DRAIN", R_CHECK .. "port_state: port is down")
    local lines, errs = slurm.settle("fabric_matrix", {}, { node1 = { "rxe0:1" } })
    assert.same({}, errs)
    assert.same({ "slurm: node1 left alone: drained by fabric_check, which alone resumes it (Reason=" .. R_CHECK
      .. "port_state: port is down)" }, lines)
    assert.equal("[show][node]\n", log())
  end)

  it(label .. ": no false RESUME: fabric_check alone (--slurm-health) does not resume its own wide drain", function()
    assert(slurm.drain("node2", "named at fault in rank 0's report (a broken pair)",
      { tool = "fabric_check", ports = { "rxe0:1" }, wide = true }))
    local reason = "ibverbs fabric_check [rxe0:1 wide]: named at fault in rank 0's report (a broken pair)"
    assert.equal(reason, slurp(dir .. "/node2.reason"))
    local r = assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, false)))
    assert.equal("kept", r.action)
    assert.equal("node2 stays drained: found by a run across nodes, which alone resumes it (Reason=" .. reason .. ")",
      r.detail)
    assert.equal(reason, slurp(dir .. "/node2.reason"))
    -- a run across nodes that checked rxe0:1 does
    assert.equal("resumed", assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, true))).action)
  end)

  it(label .. ": no false RESUME: a drain for rxe0:1 is not resumed by a run that checked mlx5_0:1 alone (-d mlx5_0)",
    function()
      assert(slurm.drain("node2", "port_state: port is down", CHECK))
      for _, checked in ipairs({ { "mlx5_0:1" }, { "rxe0:2" }, {} }) do
        local r = assert(slurm.resume("node2", run("fabric_check", checked, true)))
        assert.equal("kept", r.action)
        assert.equal("node2 stays drained: this run did not check rxe0:1 (Reason=" .. R_CHECK
          .. "port_state: port is down)", r.detail)
      end
      assert.equal("IDLE+DRAIN\n", slurp(dir .. "/node2.state"))
      assert.matches("State=DRAIN", log())
      assert.not_matches("RESUME", log())
    end)

  it(label .. ": no false RESUME: drains again with the earlier scope kept, owed until checked", function()
    assert(slurm.drain("node2", "first", CHECK))
    local r = assert(slurm.drain("node2", "second", { tool = "fabric_check", ports = { "mlx5_0:1" }, wide = true }))
    assert.equal("drained", r.action)
    assert.equal("ibverbs fabric_check [mlx5_0:1,rxe0:1 wide]: second", slurp(dir .. "/node2.reason"))
    assert.equal("kept", assert(slurm.resume("node2", run("fabric_check", { "mlx5_0:1" }, true))).action)
    assert.equal("resumed", assert(slurm.resume("node2", run("fabric_check", { "mlx5_0:1", "rxe0:1" }, true))).action)
  end)

  it(label .. ": no false DRAIN nor RESUME: DOWN with an admin's reason is never touched, and said so", function()
    drained("node2", "DOWN", "admin: psu")
    local r = assert(slurm.drain("node2", "port_state: port is down", CHECK))
    assert.equal("kept", r.action)
    assert.equal("node2 left alone: DOWN (Reason=admin: psu)", r.detail)
    r = assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, true)))
    assert.equal("node2 left alone: DOWN (Reason=admin: psu)", r.detail)
    assert.equal("slurm: node2 left alone: DOWN (Reason=admin: psu)",
      slurm.act("node2", true, "x", { drain = true, tool = "fabric_check", ports = { "rxe0:1" } }))
    assert.equal("slurm: node2 left alone: DOWN (Reason=admin: psu)",
      slurm.act("node2", false, nil, { undrain = true, tool = "fabric_check", ports = { "rxe0:1" } }))
    assert.not_matches("%[update%]", log())
    assert.equal("DOWN\n", slurp(dir .. "/node2.state"))
    assert.equal("admin: psu", slurp(dir .. "/node2.reason"))
  end)

  it(label .. ": no false DRAIN nor RESUME: FAIL, MAINT, DOWN*, REBOOT, POWER*, FUTURE, not responding, a drain "
    .. "with a foreign reason (22.05's and older releases' states)", function()
      local held = {
        { "FAIL", "admin: bad fan" }, { "IDLE+FAIL", "admin: bad fan" }, { "FAILING", "admin: fan" },
        { "ALLOCATED+FAIL", "admin: fan" }, { "MAINT" }, { "IDLE+MAINTENANCE+RESERVED" }, { "IDLE+MAINT+RESERVED" },
        { "DOWN*", "Not responding" }, { "DOWN+NOT_RESPONDING", "Not responding" }, { "IDLE*" },
        { "IDLE+NOT_RESPONDING" }, { "IDLE+DRAIN+NOT_RESPONDING", R_CHECK .. "x" }, { "DRAINED*", R_CHECK .. "x" },
        { "DOWN+DRAIN", R_CHECK .. "x" }, { "REBOOT" }, { "IDLE+REBOOT_REQUESTED" }, { "MIXED+REBOOT_ISSUED" },
        { "IDLE@" }, { "POWERED_DOWN" }, { "IDLE+POWERED_DOWN" }, { "IDLE+CLOUD+POWERING_UP" }, { "IDLE~" },
        { "IDLE#" }, { "POWERING_DOWN" }, { "IDLE+POWER_DOWN" }, { "FUTURE" }, { "UNKNOWN" }, { "IDLE$" },
        { "IDLE+SOMETHING_NEW" },
      }
      for _, h in ipairs(held) do
        os.execute("rm -f " .. dir .. "/node2.*")
        drained("node2", h[1], h[2])
        local want = "node2 left alone: " .. h[1] .. (h[2] and (" (Reason=" .. h[2] .. ")") or "")
        assert.same({ action = "kept", detail = want }, assert(slurm.drain("node2", "y", CHECK)), h[1])
        assert.same({ action = "kept", detail = want }, assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" },
          true))), h[1])
      end
      for _, foreign in ipairs({ "IDLE+DRAIN", "MIXED+DRAIN", "DRAINED", "DRAINING", "IDLE+DRAIN+RESERVED" }) do
        drained("node2", foreign, "maintenance: cable swap")
        assert.equal("node2 left alone: drained by someone else (Reason=maintenance: cable swap)",
          assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, true))).detail)
      end
      assert.not_matches("%[update%]", log())
      -- free states: drained (the flag added as Slurm does), resumed
      for _, free in ipairs({ "IDLE", "MIXED", "ALLOCATED", "IDLE+RESERVED", "IDLE+CLOUD", "MIXED-", "COMPLETING" }) do
        os.execute("rm -f " .. dir .. "/node2.*")
        drained("node2", free)
        assert.equal("drained", assert(slurm.drain("node2", "y", CHECK)).action, free)
        assert.equal(free .. "+DRAIN\n", slurp(dir .. "/node2.state"))
        assert.equal("resumed", assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }))).action, free)
      end
    end)

  it(label .. ": no false RESUME: an earlier version's 'ibverbs:' drain is left alone, to be resumed by hand",
    function()
      drained("node2", "IDLE+DRAIN", "ibverbs: rxe0:1 port_state: port is down")
      local want = "node2 left alone: drained by an earlier version of lua-ibverbs ('ibverbs:', no tool, no scope): "
        .. "resume it by hand (Reason=ibverbs: rxe0:1 port_state: port is down)"
      assert.same({ action = "kept", detail = want }, assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" },
        true))))
      assert.same({ action = "kept", detail = want }, assert(slurm.drain("node2", "y", CHECK)))
      write(dir .. "/nodes", "node2\n")
      assert.same({ "slurm: " .. want }, (slurm.settle("fabric_matrix", {}, { node2 = { "rxe0:1" } })))
      assert.not_matches("%[update%]", log())
    end)

  it(label .. ": no false RESUME: a drain of its own whose scope cannot be read is left alone", function()
    for _, reason in ipairs({ "ibverbs fabric_check [*]: too many ports", "ibverbs fabric_check [rxe0:1 fast]: x",
      "ibverbs fabric_check [rxe0:1,rx", "ibverbs fabric_check rxe0:1: x", "ibverbs fabric_check [rxe0:1;id]: x" }) do
      drained("node2", "IDLE+DRAIN", reason)
      assert.equal("node2 left alone: its drain's scope cannot be read: resume it by hand (Reason=" .. reason .. ")",
        assert(slurm.resume("node2", run("fabric_check", { "rxe0:1" }, true))).detail)
      assert.equal("kept", assert(slurm.drain("node2", "y", CHECK)).action)
    end
    assert.not_matches("%[update%]", log())
  end)

  it(label .. ": returns scontrol's failure as a message naming the command", function()
    write(dir .. "/fail", "slurm_load_node error: Unable to contact slurm controller")
    local r, err = slurm.drain("node2", "x", CHECK)
    assert.is_nil(r)
    assert.matches("scontrol show node node2: exit 1: slurm_load_node error: Unable to contact slurm controller",
      err, 1, true)
  end)

  it(label .. ": settle: drains the bad nodes, resumes only its own drains whose scope was measured, one show",
    function()
      write(dir .. "/nodes", "node1\nnode2\nnode3\nnode4\nnode5\nnode6\nnode7\nnode8\n")
      for node, x in pairs({ node2 = { "IDLE+DRAIN", "ibverbs fabric_matrix [rxe0:1]: node rxe0:1: old verdict" },
        node4 = { "IDLE+DRAIN", "maintenance: cable swap" },
        node5 = { "MIXED+DRAIN", "ibverbs fabric_matrix [mlx5_0:1,rxe0:1]: link node5 <-> node1 rxe0:1: old" },
        node6 = { "IDLE+DRAIN", "ibverbs fabric_matrix [mlx5_0:1,rxe0:1]: node mlx5_0:1: old" },
        node7 = { "DOWN", "admin: psu" }, node8 = { "IDLE+DRAIN", "ibverbs fabric_matrix [rxe0:1]: node rxe0:1: old" },
      }) do
        drained(node, x[1], x[2])
      end
      local lines, errs = slurm.settle("fabric_matrix", {
        node3 = { why = "link node3 <-> node4 rxe0:1: $(id) `x`", ports = { "rxe0:1" } },
        node4 = { why = "node rxe0:1: y", ports = { "rxe0:1" } },
        node7 = { why = "node rxe0:1: z", ports = { "rxe0:1" } },
        node8 = { why = "node mlx5_0:1: new", ports = { "mlx5_0:1" } },
      }, { node1 = { "rxe0:1" }, node2 = { "rxe0:1" }, node5 = { "mlx5_0:1", "rxe0:1" }, node6 = { "rxe0:1" } })
      assert.same({}, errs)
      assert.same({
        "slurm: node3 drained: ibverbs fabric_matrix [rxe0:1]: link node3 <-> node4 rxe0:1: $(id) `x`",
        "slurm: node4 left alone: drained by someone else (Reason=maintenance: cable swap)",
        "slurm: node7 left alone: DOWN (Reason=admin: psu)",
        "slurm: node8 drained: ibverbs fabric_matrix [mlx5_0:1,rxe0:1]: node mlx5_0:1: new",
        "slurm: node6 stays drained: this run did not check mlx5_0:1 (Reason=ibverbs fabric_matrix [mlx5_0:1,rxe0:1]: "
          .. "node mlx5_0:1: old)",
        "slurm: node2 resumed (was: ibverbs fabric_matrix [rxe0:1]: node rxe0:1: old verdict)",
        "slurm: node5 resumed (was: ibverbs fabric_matrix [mlx5_0:1,rxe0:1]: link node5 <-> node1 rxe0:1: old)",
      }, lines)
      assert.equal("[show][node]\n[update][NodeName=node3][State=DRAIN][Reason=ibverbs fabric_matrix [rxe0:1]: "
        .. "link node3 <-> node4 rxe0:1: $(id) `x`]\n[update][NodeName=node8][State=DRAIN][Reason=ibverbs "
        .. "fabric_matrix [mlx5_0:1,rxe0:1]: node mlx5_0:1: new]\n[update][NodeName=node2,node5][State=RESUME]\n",
        log())
      assert.equal("maintenance: cable swap", slurp(dir .. "/node4.reason"))
      assert.equal("MIXED\n", slurp(dir .. "/node5.state"))
      assert.equal("DOWN\n", slurp(dir .. "/node7.state"))
      -- nothing left to do: one show, no update
      os.remove(dir .. "/log")
      lines, errs = slurm.settle("fabric_matrix", {}, { node1 = { "rxe0:1" }, node2 = { "rxe0:1" } })
      assert.same({}, lines)
      assert.same({}, errs)
      assert.equal("[show][node]\n", log())
      -- a node the cluster does not list, and scontrol failing: said, nothing else done
      lines, errs = slurm.settle("fabric_matrix", { node9 = { why = "x", ports = {} } }, {})
      assert.same({}, lines)
      assert.same({ "slurm: node9: not a node of this cluster (scontrol show node does not list it)" }, errs)
      write(dir .. "/fail", "Unable to contact slurm controller")
      lines, errs = slurm.settle("fabric_matrix", { node3 = { why = "x", ports = {} } }, { node1 = { "rxe0:1" } })
      assert.same({}, lines)
      assert.matches("^slurm: .*scontrol show node: exit 1: Unable to contact slurm controller", errs[1])
      assert.has_error(function() slurm.settle("fabric_matrix", { ["node1;reboot"] = { why = "x" } }, {}) end)
      assert.has_error(function() slurm.settle("fabric matrix", {}, {}) end)
    end)

  it(label .. ": act: drains a bad node, resumes a passing one, nothing to do or say otherwise", function()
    local opts = { tool = "fabric_check", ports = { "rxe0:1" } }
    local function with(t)
      for k, v in pairs(opts) do t[k] = v end
      return t
    end
    assert.is_false(slurm.act("node2", true, "x", with({})))
    assert.is_false(slurm.act("node2", false, nil, with({ undrain = true }))) -- not drained: nothing to say
    assert.equal("slurm: node2 drained: " .. R_CHECK .. "flapped: node2 rxe0 port 1: link_downed +1",
      slurm.act("node2", true, "flapped: node2 rxe0 port 1: link_downed +1", with({ drain = true })))
    assert.is_false(slurm.act("node2", false, nil, with({ drain = true })))
    assert.equal("slurm: node2 resumed (was: " .. R_CHECK .. "flapped: node2 rxe0 port 1: link_downed +1)",
      slurm.act("node2", false, nil, with({ drain = true, undrain = true })))
    write(dir .. "/fail", "down")
    local ok, err = slurm.act("node2", true, "x", with({ drain = true }))
    assert.is_nil(ok)
    assert.matches("^slurm: .*scontrol show node node2: exit 1: down", err)
  end)
end

describe("ibverbs.fabric.slurm", function()
  describe("through ibv.spawn", function()
    cases("spawn")

    it("spawn: passes a control character as it is (no shell to refuse it for)", function()
      assert(slurm.scontrol({ "show", "node", "a\nb" }))
      assert.equal("[show][node][a\nb]\n", log())
    end)

    it("spawn: says when scontrol gives no answer within slurm.TIMEOUT, and kills it then", function()
      local slow = dir .. "/scontrol"
      write(slow, "#!/bin/sh\nsleep 100\n")
      local old_limit = slurm.TIMEOUT
      slurm.TIMEOUT = 0.5
      local t0 = require("ibverbs").now()
      local out, err = slurm.scontrol({ "show", "node", "n1" })
      local took = require("ibverbs").now() - t0
      slurm.TIMEOUT = old_limit
      assert.is_nil(out)
      assert.equal(slow .. " show node n1: no answer within 0.5 s", err)
      assert.is_true(took < 5, took .. " s")
    end)

    it("spawn: names a signal that ended scontrol, with what it printed", function()
      write(dir .. "/scontrol", "#!/bin/sh\necho dying >&2\nkill -TERM $$\n")
      local out, err = slurm.scontrol({ "show", "node" })
      assert.is_nil(out)
      assert.equal(dir .. "/scontrol show node: signal 15: dying", err)
    end)

    it("spawn: gives stdout, then stderr, as the output", function()
      write(dir .. "/scontrol", "#!/bin/sh\necho err >&2\necho out\n")
      assert.equal("out\nerr\n", slurm.scontrol({ "x" }))
    end)
  end)

  it("refuses a node name that is not one, before running anything", function()
    for _, bad in ipairs({ "node1;reboot", "node[1-3]", "-x", "", "a b", "n$(id)" }) do
      assert.has_error(function() slurm.drain(bad, "x", CHECK) end,
        "bad argument #1 to 'drain' (bad Slurm node name " .. string.format("%q", bad)
        .. " (letters, digits, '.', '_', '-'))")
    end
    assert.has_error(function() slurm.resume(nil, run("fabric_check", {})) end)
    assert.has_error(function() slurm.resume("node1", { checked = {} }) end) -- no tool: whose drain?
    assert.is_true(slurm.check_node("node-01.cluster_a"))
  end)

  it("names a missing scontrol", function()
    local saved_path = slurm.SCONTROL
    slurm.SCONTROL = "/nonexistent/scontrol"
    local r, err = slurm.node_state("node1")
    slurm.SCONTROL = saved_path
    assert.is_nil(r)
    assert.matches("/nonexistent/scontrol", err, 1, true)
  end)

  it("node_name: SLURMD_NODENAME, else the host name up to its first dot", function()
    assert.equal("node7", slurm.node_name(function(k) return k == "SLURMD_NODENAME" and "node7" or nil end))
    local name = slurm.node_name(function() return nil end)
    assert.is_string(name)
    assert.not_matches("%.", name)
  end)

  it("reason: the tool and its scope first, one line, cut at REASON_MAX with its scope kept", function()
    assert.equal("ibverbs fabric_check [rxe0:1]: a b c", slurm.reason("fabric_check", CHECK, "a\nb\t\tc\n"))
    assert.equal("ibverbs fabric_check [mlx5_0:1,rxe0:1 wide]: x", slurm.reason("fabric_check",
      { ports = { "rxe0:1", "mlx5_0:1", "rxe0:1", "(none)", "a b" }, wide = true }, "x"))
    assert.equal("ibverbs fabric_check []: (none): no RDMA driver loaded",
      slurm.reason("fabric_check", { ports = { "(none)" } }, "(none): no RDMA driver loaded"))
    assert.equal("ibverbs fabric_matrix [ wide]: x", slurm.reason("fabric_matrix", { wide = true }, "x"))
    local ports = { "mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1" }
    local long = slurm.reason("fabric_matrix", { ports = ports }, string.rep("x", 500))
    assert.equal(slurm.REASON_MAX, #long)
    assert.matches("^ibverbs fabric_matrix %[mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1%]: xxx.*%.%.%.$", long)
    assert.same({ tool = "fabric_matrix", scope = { ports = ports, wide = false },
      text = string.rep("x", slurm.REASON_MAX - 3 - #"ibverbs fabric_matrix [mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1]: ")
        .. "..." }, slurm.parse_reason(long))
    -- a scope too long to leave room for the text: "[*]", which no run matches (resumed by hand)
    local many = {}
    for i = 1, 30 do many[i] = "mlx5_" .. i .. ":1" end
    local r = slurm.reason("fabric_check", { ports = many }, "x")
    assert.equal("ibverbs fabric_check [*]: x", r)
    assert.same({ tool = "fabric_check", text = "x" }, slurm.parse_reason(r))
  end)

  it("parse_reason: a tool's reason read back; an earlier version's; anyone else's", function()
    assert.same({ tool = "fabric_check", scope = { ports = { "rxe0:1", "mlx5_0" }, wide = true }, text = "x: y" },
      slurm.parse_reason("ibverbs fabric_check [rxe0:1,mlx5_0 wide]: x: y"))
    assert.same({ tool = "fabric_check", scope = { ports = {}, wide = false }, text = "z" },
      slurm.parse_reason("ibverbs fabric_check []: z"))
    assert.same({ tool = "fabric_check", scope = { ports = { "wide" }, wide = false }, text = "z" },
      slurm.parse_reason("ibverbs fabric_check [wide]: z")) -- a device named "wide"; the flag follows a blank
    assert.same({ legacy = true }, slurm.parse_reason("ibverbs: rxe0:1 port_state: port is down"))
    for _, other in ipairs({ "bad DIMM", "ibverbs-ish", " ibverbs fabric_check [rxe0:1]: x", "fabric_check: x" }) do
      assert.is_nil(slurm.parse_reason(other), other)
    end
    assert.is_nil(slurm.parse_reason(nil))
  end)

  it("takes IBVL_SCONTROL from the environment", function()
    local lua = rawget(_G, "jit") and "luajit" or "lua5.4"
    local p = io.popen("IBVL_SCONTROL=/opt/x/scontrol " .. lua .. " -e 'package.path=\"lua/?.lua;\"..package.path; " ..
      "print(require(\"ibverbs.fabric.slurm\").SCONTROL)'")
    local out = p:read("a")
    p:close()
    assert.equal("/opt/x/scontrol\n", out)
  end)
end)

describe("ibverbs.fabric.slurm.busy", function()
  it("says a node runs work (ALLOCATED, MIXED, COMPLETING, drained or not), so its transport counters are not "
    .. "judged", function()
    for _, s in ipairs({ "ALLOCATED", "MIXED", "MIXED+DRAIN", "ALLOCATED+COMPLETING", "COMPLETING", "ALLOC", "MIX",
      "MIXED*" }) do
      assert.is_true(slurm.busy({ state = s }), s)
    end
    for _, s in ipairs({ "IDLE", "IDLE+DRAIN", "DOWN", "DOWN+DRAIN", "IDLE+MAINT+RESERVED", "FUTURE" }) do
      assert.is_false(slurm.busy({ state = s }), s)
    end
  end)
end)
