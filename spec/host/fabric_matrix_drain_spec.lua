-- fabric_matrix.lua --drain on this host (no RDMA driver) against the fake
-- scontrol (spec/fake-scontrol): the option refused where it cannot work, the
-- missing driver's verdicts drained with an "ibverbs:" reason; and the plan
-- from a report (examples/lib/drains.lua): which nodes are drained with
-- which reason, which are resumed.
package.path = "examples/lib/?.lua;" .. package.path
local drains = require "drains"
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
    assert.matches("\nslurm: node7 drained: ibverbs: " .. why .. "\n", out)
    assert.not_matches("node6", out) -- someone else's drain, not in the job: not looked at
    assert.equal("[show][node]\n[update][NodeName=node7][State=DRAIN][Reason=ibverbs: node rxe0: no RDMA driver "
      .. "loaded (ibv_get_device_list: Function not implemented)]\n", slurp(dir .. "/log"))
    assert.equal("maintenance: cable swap", slurp(dir .. "/node6.reason"))
    -- scontrol failing: said on stderr, the status stays the verdict's
    write(dir .. "/fail", "Unable to contact slurm controller")
    out, rc = fs.matrix_ranks(2, "-d rxe0 -t 2 --drain", env("node7"))
    assert.same({ [0] = 1, 1 }, rc, out)
    assert.matches("fabric_matrix: slurm: .*scontrol show node: exit 1: Unable to contact slurm controller", out)
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
    local bad, passed, unnamed = drains.plan(rep({}, {}), nodes)
    assert.same({}, bad)
    assert.same({ "node1", "node2", "node3", "node4" }, passed)
    assert.same({}, unnamed)
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
