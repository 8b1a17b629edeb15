-- ibverbs.fabric.slurm against a fake scontrol (spec/fake-scontrol, which
-- logs each call's arguments and keeps one node's state in a directory):
-- the arguments as Slurm gets them (one argument a word, no shell between),
-- a drain by someone else left alone, resume only of its own drains, bad node
-- names refused, scontrol's failures returned as messages, its time limit;
-- through ibv.spawn, the only way it runs.
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

local function cases(label)
  before_each(fresh)
  after_each(function()
    slurm.SCONTROL = saved
    os.execute("rm -rf " .. dir)
  end)

  it(label .. ": drains a healthy node with the reason as one argument, shell characters and all", function()
    local why = [[port_state: port is down; it's $(touch /tmp/pwned) `id` "x" \ ; done]]
    local r = assert(slurm.drain("node2", why))
    assert.equal("drained", r.action)
    assert.equal("[show][node][node2]\n[update][NodeName=node2][State=DRAIN][Reason=ibverbs: " .. why .. "]\n",
      log())
    assert.is_nil(slurp("/tmp/pwned"))
    local st = assert(slurm.node_state("node2"))
    assert.same({ state = "IDLE+DRAIN", drain = true, ours = true, reason = "ibverbs: " .. why }, st)
    assert.equal("node2 drained: ibverbs: " .. why, r.detail)
  end)

  it(label .. ": leaves a node someone else drained alone, and says so", function()
    write(dir .. "/node2.state", "IDLE+DRAIN\n")
    write(dir .. "/node2.reason", "bad DIMM, ticket 42")
    local r = assert(slurm.drain("node2", "flapped"))
    assert.equal("kept", r.action)
    assert.equal("node2 left alone: drained by someone else (Reason=bad DIMM, ticket 42)", r.detail)
    r = assert(slurm.resume("node2"))
    assert.equal("kept", r.action)
    assert.equal("[show][node][node2]\n[show][node][node2]\n", log()) -- no update at all
    assert.equal("bad DIMM, ticket 42", slurp(dir .. "/node2.reason"))
  end)

  it(label .. ": resumes a node it drained itself; a node not drained is left as it is", function()
    assert.equal("none", assert(slurm.resume("node2")).action)
    assert(slurm.drain("node2", "counters: link_downed +1"))
    local r = assert(slurm.resume("node2"))
    assert.equal("resumed", r.action)
    assert.equal("node2 resumed (was: ibverbs: counters: link_downed +1)", r.detail)
    assert.matches("%[update%]%[NodeName=node2%]%[State=RESUME%]\n$", log())
    assert.equal("IDLE\n", slurp(dir .. "/node2.state"))
  end)

  it(label .. ": owns only reasons starting with 'ibverbs:' (not 'ibverbs' alone, nor another tool's)", function()
    for _, other in ipairs({ "fabric_check: rxe0:1 port_state: port is down", "ibverbs-ish", " ibverbs: x" }) do
      write(dir .. "/node2.state", "IDLE+DRAIN\n")
      write(dir .. "/node2.reason", other)
      assert.equal("kept", assert(slurm.resume("node2")).action)
      assert.equal("kept", assert(slurm.drain("node2", "y")).action)
      assert.equal(other, slurp(dir .. "/node2.reason"))
    end
    assert.not_matches("%[update%]", log())
  end)

  it(label .. ": drains again with the new reason a node it drained before", function()
    assert(slurm.drain("node2", "first"))
    local r = assert(slurm.drain("node2", "second"))
    assert.equal("drained", r.action)
    assert.equal("ibverbs: second", slurp(dir .. "/node2.reason"))
  end)

  it(label .. ": returns scontrol's failure as a message naming the command", function()
    write(dir .. "/fail", "slurm_load_node error: Unable to contact slurm controller")
    local r, err = slurm.drain("node2", "x")
    assert.is_nil(r)
    assert.matches("scontrol show node node2: exit 1: slurm_load_node error: Unable to contact slurm controller",
      err, 1, true)
  end)

  it(label .. ": settle: drains the bad nodes, resumes only its own drains among the passing, one show for all",
    function()
      write(dir .. "/nodes", "node1\nnode2\nnode3\nnode4\nnode5\n")
      for node, reason in pairs({ node2 = "ibverbs: node rxe0:1: old verdict", node4 = "maintenance: cable swap",
        node5 = "ibverbs: link node5 <-> node1 rxe0:1: old" }) do
        write(dir .. "/" .. node .. ".state", "IDLE+DRAIN\n")
        write(dir .. "/" .. node .. ".reason", reason)
      end
      local lines, errs = slurm.settle({ node3 = "link node3 <-> node4 rxe0:1: $(id) `x`", node4 = "node rxe0:1: y" },
        { "node1", "node2", "node5", "node1" })
      assert.same({}, errs)
      assert.same({
        "slurm: node3 drained: ibverbs: link node3 <-> node4 rxe0:1: $(id) `x`",
        "slurm: node4 left alone: drained by someone else (Reason=maintenance: cable swap)",
        "slurm: node2 resumed (was: ibverbs: node rxe0:1: old verdict)",
        "slurm: node5 resumed (was: ibverbs: link node5 <-> node1 rxe0:1: old)",
      }, lines)
      assert.equal("[show][node]\n[update][NodeName=node3][State=DRAIN][Reason=ibverbs: link node3 <-> node4 rxe0:1: "
        .. "$(id) `x`]\n[update][NodeName=node2,node5][State=RESUME]\n", log())
      assert.equal("maintenance: cable swap", slurp(dir .. "/node4.reason"))
      assert.equal("IDLE\n", slurp(dir .. "/node5.state"))
      -- nothing left to do: one show, no update
      os.remove(dir .. "/log")
      lines, errs = slurm.settle({}, { "node1", "node2" })
      assert.same({}, lines)
      assert.same({}, errs)
      assert.equal("[show][node]\n", log())
      -- a node the cluster does not list, and scontrol failing: said, nothing else done
      lines, errs = slurm.settle({ node9 = "x" }, {})
      assert.same({}, lines)
      assert.same({ "slurm: node9: not a node of this cluster (scontrol show node does not list it)" }, errs)
      write(dir .. "/fail", "Unable to contact slurm controller")
      lines, errs = slurm.settle({ node3 = "x" }, { "node1" })
      assert.same({}, lines)
      assert.matches("^slurm: .*scontrol show node: exit 1: Unable to contact slurm controller", errs[1])
      assert.has_error(function() slurm.settle({ ["node1;reboot"] = "x" }, {}) end)
    end)

  it(label .. ": act: drains a bad node, resumes a passing one, nothing to do or say otherwise", function()
    assert.is_false(slurm.act("node2", true, "x", {}))
    assert.is_false(slurm.act("node2", false, nil, { undrain = true })) -- not drained: nothing to say
    assert.equal("slurm: node2 drained: ibverbs: flapped: node2 rxe0 port 1: link_downed +1",
      slurm.act("node2", true, "flapped: node2 rxe0 port 1: link_downed +1", { drain = true }))
    assert.is_false(slurm.act("node2", false, nil, { drain = true }))
    assert.equal("slurm: node2 resumed (was: ibverbs: flapped: node2 rxe0 port 1: link_downed +1)",
      slurm.act("node2", false, nil, { drain = true, undrain = true }))
    write(dir .. "/fail", "down")
    local ok, err = slurm.act("node2", true, "x", { drain = true })
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
      assert.has_error(function() slurm.drain(bad, "x") end,
        "bad argument #1 to 'drain' (bad Slurm node name " .. string.format("%q", bad)
        .. " (letters, digits, '.', '_', '-'))")
    end
    assert.has_error(function() slurm.resume(nil) end)
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

  it("reason: the prefix, one line, cut at REASON_MAX", function()
    assert.equal("ibverbs: a b c", slurm.reason("a\nb\t\tc\n"))
    local long = slurm.reason(string.rep("x", 500))
    assert.equal(slurm.REASON_MAX, #long)
    assert.matches("%.%.%.$", long)
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
