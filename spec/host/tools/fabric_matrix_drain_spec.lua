-- fabric_matrix.lua --drain on this host (no RDMA driver) against the fake
-- scontrol (spec/fake-scontrol): the option refused where it cannot work, the
-- missing driver's verdicts drained with an "ibverbs fabric_matrix [<rails>]:"
-- reason, a node held by an admin (DOWN) or drained by fabric_check left
-- alone; and the plan from a report (lua/ibverbs/bringup/matrix/drains.lua): which nodes
-- are drained with which reason and scope, which are resumed (only
-- fabric_matrix's own drains, once the node measured every rail of the
-- scope: each case named after the false RESUME it rules out).
local drains = require "ibverbs.bringup.matrix.drains"
local fs = require "fabric_support"

local slurp, write = fs.slurp, fs.write

describe("examples/fabric_matrix.lua --drain", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    write(dir .. "/nodes", "node6\nnode7\n")
  end)
  after_each(function() os.execute("rm -rf " .. dir) end)
  local function env(node) -- every rank's environment: its node, the fake scontrol
    return "SLURMD_NODENAME='" .. node .. "' FAKE_SCONTROL_DIR=" .. dir .. " IBVL_SCONTROL=spec/fake-scontrol"
  end

  it("is refused before the rendezvous with --dry-run and with a node name Slurm has not (exit 2)", function()
    for _, c in ipairs({
      { "node7", "--dry-run --drain", "option '%-%-drain': does not go with %-%-dry%-run %(nothing is measured%)" },
      { "node7;reboot", "--drain", "option '%-%-drain': bad Slurm node name \"node7;reboot\"" },
    }) do
      local out, rc = fs.matrix_ranks(1, "--size 2 --root 127.0.0.1:1 " .. c[2], env(c[1]))
      assert.equal(2, rc[0], out)
      assert.matches(c[3], out)
    end
    assert.is_nil(slurp(dir .. "/log")) -- scontrol never ran
  end)

  it("drains the node of every verdict once (no driver on either rank), the status the verdict's", function()
    write(dir .. "/node6.state", "IDLE+DRAIN\n")
    write(dir .. "/node6.reason", "maintenance: cable swap")
    local out, rc = fs.matrix_ranks(2, "-d rxe0 -t 2 --drain", env("node7"))
    assert.same({ [0] = 1, 1 }, rc, out)
    local why = "node rxe0: no RDMA driver loaded %(ibv_get_device_list: Function not implemented%)"
    assert.matches("\nslurm: node7 drained: ibverbs fabric_matrix %[rxe0%]: " .. why .. "\n", out)
    assert.not_matches("node6", out) -- someone else's drain, not in the job: not looked at
    assert.equal("[show][node]\n[update][NodeName=node7][State=DRAIN][Reason=ibverbs fabric_matrix [rxe0]: node rxe0: "
      .. "no RDMA driver loaded (ibv_get_device_list: Function not implemented)]\n", slurp(dir .. "/log"))
    assert.equal("maintenance: cable swap", slurp(dir .. "/node6.reason"))
    -- scontrol failing: said on stderr, the status stays the verdict's
    write(dir .. "/fail", "Unable to contact slurm controller")
    out, rc = fs.matrix_ranks(2, "-d rxe0 -t 2 --drain", env("node7"))
    assert.same({ [0] = 1, 1 }, rc, out)
    assert.matches("fabric_matrix: slurm: .*scontrol show node: exit 1: Unable to contact slurm controller", out)
  end)

  it("no false DRAIN: leaves a node an admin set DOWN, or fabric_check drained, as it is, and says so", function()
    for _, x in ipairs({ { "DOWN", "admin: psu", "DOWN %(Reason=admin: psu%)" },
      { "IDLE+DRAIN", "ibverbs fabric_check [rxe0:1]: port_state: port is down", "drained by fabric_check, which "
        .. "alone resumes it %(Reason=ibverbs fabric_check %[rxe0:1%]: port_state: port is down%)" } }) do
      write(dir .. "/node7.state", x[1] .. "\n")
      write(dir .. "/node7.reason", x[2])
      os.remove(dir .. "/log")
      local out, rc = fs.matrix_ranks(2, "-d rxe0 -t 2 --drain", env("node7"))
      assert.same({ [0] = 1, 1 }, rc, out)
      assert.matches("\nslurm: node7 left alone: " .. x[3] .. "\n", out)
      assert.equal("[show][node]\n", slurp(dir .. "/log"))
      assert.equal(x[1] .. "\n", slurp(dir .. "/node7.state"))
      assert.equal(x[2], slurp(dir .. "/node7.reason"))
    end
  end)
end)

describe("drains.plan: what --drain asks of Slurm for a report", function()
  -- 5 ranks; ranks 3 and 4 share node4
  local nodes = { "node1", "node2", "node3", "node4", "node4" }
  local function rep(verdicts, at_fault, unmeasured)
    local pairs_list = {}
    for s = 0, 4 do
      for d = 0, 4 do
        if s ~= d then
          pairs_list[#pairs_list + 1] = (unmeasured or {})[s] and { src = s, dst = d, unmeasured = "x" } or
            { src = s, dst = d, lat_us = 2 }
        end
      end
    end
    return { size = 5, hosts = nodes, verdicts = verdicts, at_fault = at_fault, pairs = pairs_list }
  end

  it("a healthy run: every node measured is passed, none bad", function()
    local bad, passed, unnamed, scopes = drains.plan(rep({}, {}), nodes)
    assert.same({}, bad)
    assert.same({ "node1", "node2", "node3", "node4" }, passed)
    assert.same({}, unnamed)
    assert.same({ node1 = {}, node2 = {}, node3 = {}, node4 = {} }, scopes) -- no rail names given
  end)

  it("scopes: a bad node's every rail in the run, a passed node's rails on which it measured a pair", function()
    -- two rails; rank 4 (node4) names its second rail otherwise; node1 measured nothing on rail 2
    local r = rep({ { kind = "link", ranks = { 2 }, hosts = { "node3" }, rail = "mlx5_1:1", why = "x" } }, { 2 })
    local extra = {}
    for _, p in ipairs(r.pairs) do
      if p.src ~= 0 and p.dst ~= 0 then extra[#extra + 1] = { src = p.src, dst = p.dst, rail = 2, lat_us = 2 } end
    end
    for _, p in ipairs(extra) do r.pairs[#r.pairs + 1] = p end
    local rails = { { "mlx5_0:1", "mlx5_1:1" }, { "mlx5_0:1", "mlx5_1:1" }, { "mlx5_0:1", "mlx5_1:1" },
      { "mlx5_0:1", "mlx5_1:1" }, { "mlx5_0:1", "mlx5_3:1" } }
    local bad, passed, _, scopes = drains.plan(r, nodes, rails)
    assert.same({ node3 = "link mlx5_1:1: x" }, bad)
    assert.same({ "node1", "node2", "node4" }, passed)
    assert.same({ node1 = { "mlx5_0:1" }, node2 = { "mlx5_0:1", "mlx5_1:1" }, node3 = { "mlx5_0:1", "mlx5_1:1" },
      node4 = { "mlx5_0:1", "mlx5_1:1", "mlx5_3:1" } }, scopes)
  end)

  it("a link's two ends, a node, an unreachable rank: each drained with its verdict; the rest passed", function()
    local bad, passed = drains.plan(rep({
      { kind = "link", ranks = { 0, 1 }, hosts = { "node1", "node2" }, rail = "rxe0:1", why = "still bad: 3 MB/s" },
      { kind = "node", ranks = { 3 }, hosts = { "node4" }, rail = "rxe0:1", why = "still bad against rank 0" },
      { kind = "unreachable", ranks = { 2 }, hosts = { "node3" }, why = "lost at round 1" },
    }, { 0, 1, 2, 3 }), nodes)
    assert.same({ node1 = "link node1 <-> node2 rxe0:1: still bad: 3 MB/s",
      node2 = "link node1 <-> node2 rxe0:1: still bad: 3 MB/s", node3 = "unreachable: lost at round 1",
      node4 = "node rxe0:1: still bad against rank 0" }, bad)
    assert.same({}, passed) -- node4's rank 4 passed, its rank 3 did not: the node is not resumed
  end)

  it("a flagged pair left unjudged, several verdicts on a node, a node that measured nothing", function()
    local bad, passed = drains.plan(rep({
      { kind = "flap", ranks = { 2 }, hosts = { "node3" }, rail = "rxe0:1", why = "link_downed +1" },
      { kind = "node", ranks = { 2 }, hosts = { "node3" }, rail = "rxe0:1", why = "expect: mtu 1024, found 512" },
    }, { 0, 1, 2 }, { [3] = true, [4] = true }), nodes)
    assert.same({ node1 = "an end of a flagged pair left unjudged (not retested)",
      node2 = "an end of a flagged pair left unjudged (not retested)",
      node3 = "flap rxe0:1: link_downed +1; node rxe0:1: expect: mtu 1024, found 512" }, bad)
    -- node4's ranks measured pairs only as the partners of ranks 0-2: measured, passed
    assert.same({ "node4" }, passed)
  end)

  it("no false DRAIN: a fabric verdict (a switch link, a pair whose paths differ) drains no node, its pairs' ends "
    .. "pass", function()
    local bad, passed, unnamed = drains.plan(rep({
      { kind = "fabric", located = true, link = "leaf1 -- spine1", links = { "leaf1 -- spine1" }, ranks = {},
        hosts = {}, why = "leaf1 -- spine1: 16 flows crossed it, 15 bad" },
      { kind = "fabric", located = false, pair = { 0, 2 }, ranks = {}, hosts = { "node1", "node3" }, rail = "rxe0:1",
        why = "not located: node1 <-> node3" },
    }, {}), nodes)
    assert.same({}, bad)
    assert.same({ "node1", "node2", "node3", "node4" }, passed)
    assert.same({}, unnamed)
  end)

  it("a rank without a node name is listed, not drained; nodes come from the ranks, else the host names", function()
    local bad, _, unnamed = drains.plan(rep({
      { kind = "node", ranks = { 1 }, hosts = { "?" }, why = "x" } }, { 1 }), { "node1", nil, "node3", "node4",
      "node4" })
    assert.same({}, bad)
    assert.same({ 1 }, unnamed)
    assert.same({ "n1", "node2", nil, "c" }, drains.nodes({ { node = "n1" }, false, nil, false },
      { "node1.cluster", "node2.cluster", "bad name", "c.d.e" }))
  end)
end)

describe("drains.apply: fabric_matrix's word to Slurm (the fake scontrol)", function()
  local slurm = require "ibverbs.fabric.slurm"
  local dir, saved
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir " .. dir))
    write(dir .. "/scontrol", "#!/bin/sh\nFAKE_SCONTROL_DIR='" .. dir .. "' exec spec/fake-scontrol \"$@\"\n")
    assert(os.execute("chmod +x " .. dir .. "/scontrol"))
    saved, slurm.SCONTROL = slurm.SCONTROL, dir .. "/scontrol"
    write(dir .. "/nodes", "node1\nnode2\nnode3\n")
  end)
  after_each(function()
    slurm.SCONTROL = saved
    os.execute("rm -rf " .. dir)
  end)
  local function drained(node, state, reason)
    write(dir .. "/" .. node .. ".state", state .. "\n")
    write(dir .. "/" .. node .. ".reason", reason)
  end
  -- 3 ranks on node1..node3, two rails; every pair measured on rail 1, on rail 2 when want2(src, dst)
  local function apply(verdicts, want2)
    local list = {}
    for src = 0, 2 do
      for dst = 0, 2 do
        if src ~= dst then
          list[#list + 1] = { src = src, dst = dst, rail = 1, lat_us = 2 }
          if want2 and want2(src, dst) then list[#list + 1] = { src = src, dst = dst, rail = 2, lat_us = 2 } end
        end
      end
    end
    local bad = {}
    for _, v in ipairs(verdicts) do for _, r in ipairs(v.ranks) do bad[#bad + 1] = r end end
    local r = { size = 3, hosts = { "node1", "node2", "node3" }, verdicts = verdicts, at_fault = bad, pairs = list }
    local lines, errs = {}, {}
    local rails = { { "rxe0:1", "rxe1:1" }, { "rxe0:1", "rxe1:1" }, { "rxe0:1", "rxe1:1" } }
    drains.apply(r, { "node1", "node2", "node3" }, function(l) lines[#lines + 1] = l end,
      function(l) errs[#errs + 1] = l end, rails)
    assert.same({}, errs)
    return lines
  end

  it("drains a node with the rails of the run as its scope", function()
    assert.same({ "slurm: node3 drained: ibverbs fabric_matrix [rxe0:1,rxe1:1]: node rxe1:1: slow" },
      apply({ { kind = "node", ranks = { 2 }, hosts = { "node3" }, rail = "rxe1:1", why = "slow" } }))
  end)

  it("no false RESUME: does not resume a fabric_check drain, whatever the matrix measured", function()
    drained("node2", "IDLE+DRAIN", "ibverbs fabric_check [rxe0:1]: port_state: port is down")
    assert.same({ "slurm: node2 left alone: drained by fabric_check, which alone resumes it (Reason=ibverbs "
      .. "fabric_check [rxe0:1]: port_state: port is down)" }, apply({}, function() return true end))
    assert.equal("IDLE+DRAIN\n", slurp(dir .. "/node2.state"))
  end)

  it("no false RESUME: a node drained for rails 1 and 2 that measured rail 1 alone stays drained", function()
    drained("node2", "IDLE+DRAIN", "ibverbs fabric_matrix [rxe0:1,rxe1:1]: node rxe1:1: slow")
    assert.same({ "slurm: node2 stays drained: this run did not check rxe1:1 (Reason=ibverbs fabric_matrix "
      .. "[rxe0:1,rxe1:1]: node rxe1:1: slow)" }, apply({}, function(src, dst) return src ~= 1 and dst ~= 1 end))
    assert.equal("IDLE+DRAIN\n", slurp(dir .. "/node2.state"))
  end)

  it("resumes a node of its own once it measured every rail of the scope again", function()
    drained("node2", "IDLE+DRAIN", "ibverbs fabric_matrix [rxe0:1,rxe1:1]: node rxe1:1: slow")
    assert.same({ "slurm: node2 resumed (was: ibverbs fabric_matrix [rxe0:1,rxe1:1]: node rxe1:1: slow)" },
      apply({}, function(src, dst) return src == 1 or dst == 1 end))
    assert.equal("IDLE\n", slurp(dir .. "/node2.state"))
  end)

  it("no false DRAIN nor RESUME: a node DOWN, FAIL, MAINT or not responding is left alone, and said so", function()
    for _, st in ipairs({ "DOWN", "IDLE+FAIL", "IDLE+MAINTENANCE+RESERVED", "DOWN*", "IDLE+DRAIN+NOT_RESPONDING" }) do
      drained("node2", st, "admin: psu")
      drained("node3", st, "ibverbs fabric_matrix [rxe0:1]: node rxe0:1: old")
      assert.same({ "slurm: node3 left alone: " .. st .. " (Reason=ibverbs fabric_matrix [rxe0:1]: node rxe0:1: old)",
        "slurm: node2 left alone: " .. st .. " (Reason=admin: psu)" },
        apply({ { kind = "node", ranks = { 2 }, hosts = { "node3" }, rail = "rxe0:1", why = "down" } }))
    end
    assert.not_matches("%[update%]", slurp(dir .. "/log"))
  end)

  it("no false DRAIN: a fabric verdict drains no node and says so; a node drained earlier that passed is resumed",
    function()
    drained("node2", "IDLE+DRAIN", "ibverbs fabric_matrix [rxe0:1]: link node2 <-> node3 rxe0:1: still bad")
    assert.same({ "slurm: 1 fabric verdict drains no node (Slurm cannot drain a switch or its links)",
      "slurm: node2 resumed (was: ibverbs fabric_matrix [rxe0:1]: link node2 <-> node3 rxe0:1: still bad)" },
      apply({ { kind = "fabric", located = true, link = "leaf1 -- spine1", links = { "leaf1 -- spine1" }, ranks = {},
        hosts = {}, why = "leaf1 -- spine1: 16 flows crossed it, 15 bad" } }))
    assert.equal("IDLE\n", slurp(dir .. "/node2.state"))
    assert.not_matches("State=DRAIN", slurp(dir .. "/log"))
  end)

  it("no false RESUME: an earlier version's 'ibverbs:' drain is left alone, to be resumed by hand", function()
    drained("node1", "IDLE+DRAIN", "ibverbs: node rxe0:1: an earlier run")
    assert.same({ "slurm: node1 left alone: drained by an earlier version of lua-ibverbs ('ibverbs:', no tool, no "
      .. "scope): resume it by hand (Reason=ibverbs: node rxe0:1: an earlier run)" }, apply({}))
    assert.equal("IDLE+DRAIN\n", slurp(dir .. "/node1.state"))
  end)
end)
