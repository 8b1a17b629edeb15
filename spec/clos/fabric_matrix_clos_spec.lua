-- Run on every node of `tools/rxe-vm --clos` (tools/run-tests): the fault
-- campaign's rows inside the fabric.  The four nodes run these steps in the
-- same order, one rank each (rank K-1 on node K), so every step is one
-- four-rank run of fabric_matrix.lua with several flows a pair (--flows: one
-- RC QP each, its RoCEv2 UDP source port known), each flow's hops traced
-- (--trace) and mapped to the switches of spec/clos/topology.conf.  Node 1
-- (rank 0) sets the fault on the router before its run (the other ranks'
-- traffic waits for its rendezvous) and clears it after, and checks the
-- report; every node checks its own exit status.
--
-- The faults, through the router's control channel (tools/rxe-vm-router):
--   a gray leaf1 -- spine1: netem loss 10 % on both its ends (leaf1 toward
--     spine1, spine1 toward leaf1): the flows ECMP hashes onto it lose
--     frames, each costing an RC ack timeout; the others are clean (a
--     flow's 8 messages of 4 frames lose one with probability 1 - 0.9^32 =
--     97 % a direction; at 20 % flows ran into -t and ranks out of time)
--   spine1 down: its four ports down; the leaves route around it
--   node3's access link: netem loss on leaf2's port toward node3
local support = require "support"
local dkjson = require "dkjson"
local socket = require "socket"
local vm = require "clos.fabric_vm"

local NODE = vm.NODE
local TOPOLOGY = "spec/clos/topology.conf"

-- Small figures: five TCG VMs on two cores.  Four flows a pair, each with
-- the least fabric_matrix gives a flow (8 round trips, 8 messages: -n 32
-- -N 32): a pair between the leaves has two paths, so its four flows miss
-- one with probability 1/8, and the eight ordered pairs across the leaves
-- cover both spines many times over.  The ack timeout is 537 ms
-- (--qp-timeout 17): a round trip through the router VM takes 10 ms, its
-- 99.9th percentile 130 to 190 ms at a load average of 5 to 10 (ib_send_lat),
-- so a stall (a sample over half the timeout) means a lost frame.
-- The figures are judged as on four VMs (spec/nodes4: against the fabric's
-- p75 bandwidth and p25 latency, a pair flagged retested three times).
local ARGS = "-d rxe0 -S 4096 --wait event --reference p75 --lat-factor 4 --bw-fraction 0.2 --retests 3 "
  .. "-n 32 -N 32 --qp-timeout 17 -t 10 --flows 4 --trace --topology " .. TOPOLOGY

local function matrix(args, limit)
  local t0 = socket.gettime()
  local out, rc = support.spawn("timeout " .. limit .. " " .. support.example("fabric_matrix.lua",
    ARGS .. " " .. args)):wait(limit + 10)
  if NODE == 1 then
    io.stderr:write(string.format("clos: fabric_matrix %s: exit %s in %.1f s\n", args, rc,
      socket.gettime() - t0))
  end
  return out, rc
end

local function load(file)
  local f = assert(io.open(file))
  local m = assert(dkjson.decode(f:read("a")))
  f:close()
  return m
end

-- The verdicts of a kind
local function of_kind(m, kind)
  local l = {}
  for _, v in ipairs(m.verdicts) do if v.kind == kind then l[#l + 1] = v end end
  return l
end

-- A run under a fault the router holds: set by node 1 before the run, cleared after, whatever the run did.
local function under(requests, fn)
  if NODE == 1 then for _, r in ipairs(requests) do vm.must(r) end end
  local ok, err = pcall(fn)
  if NODE == 1 then vm.must("clear") end
  assert(ok, err)
end

-- The first pass's flows of a report (each pair's, in the JSON)
local function flows_of(m)
  local l = {}
  for _, p in ipairs(m.pairs) do
    if p.pass == "first" then
      for _, f in ipairs(p.flows or {}) do l[#l + 1] = f end
    end
  end
  return l
end

-- The spines a report's traced flows between the leaves crossed: a set, and the number of such flows.
local function spines_crossed(m)
  local seen, n = {}, 0
  local spine_at = { ["10.0.9.2"] = "spine1", ["10.0.9.10"] = "spine1", ["10.0.9.6"] = "spine2",
    ["10.0.9.14"] = "spine2" }
  for _, f in ipairs(flows_of(m)) do
    if f.hops and f.src and f.dst and f.src:match("^10%.0%.(%d)") ~= f.dst:match("^10%.0%.(%d)") then
      n = n + 1
      for _, h in ipairs(f.hops) do
        if spine_at[h] then seen[spine_at[h]] = true end
      end
    end
  end
  return seen, n
end

describe("the routed Clos's fault campaign: fabric_matrix.lua --flows --trace --topology", function()
  it("healthy: every flow measured and traced, both spines crossed, no verdict, exit 0 on every node", function()
    local json = ".cache/clos-healthy.json"
    if NODE == 1 then os.remove(json) end
    local out, rc = matrix("--json " .. json, 120)
    assert.equal(0, rc, out)
    if NODE ~= 1 then return end
    assert.matches("PASS", out)
    local m = load(json)
    assert.same({}, m.verdicts)
    assert.same({ "node1", "node2", "node3", "node4" }, m.hosts)
    local flows = flows_of(m)
    assert.equal(12 * 4, #flows)
    for _, f in ipairs(flows) do
      assert.is_nil(f.failed, dkjson.encode(f))
      assert.is_true(f.sport >= 0xc000 and f.dport == 4791, dkjson.encode(f))
      -- traced: its leaf's host port first, then (to the other leaf) a spine and that leaf; the destination silent
      local leaf, other = f.src:match("^10%.0%.(%d)%."), f.dst:match("^10%.0%.(%d)%.")
      assert.equal("10.0." .. leaf .. ".1", f.hops and f.hops[1], dkjson.encode(f))
      assert.equal(leaf == other and 1 or 3, #f.hops, dkjson.encode(f))
    end
    local seen, n = spines_crossed(m)
    assert.is_true(n >= 8 * 4, "traced flows between the leaves: " .. n)
    assert.is_true(seen.spine1 and seen.spine2, dkjson.encode(seen))
  end)

  it("a gray leaf1 -- spine1 (netem loss on both its ends): that link named, no node blamed, every node exits 0 "
    .. "but rank 0's report status", function()
    local json = ".cache/clos-gray.json"
    if NODE == 1 then os.remove(json) end
    under({ "netem leaf1 spine1 loss 10%", "netem spine1 leaf1 loss 10%" }, function()
      local out, rc = matrix("--json " .. json, 150)
      -- rank 0 exits 3 (ibverbs.bringup.status.FABRIC): the fabric's verdicts are all there is
      assert.equal(NODE == 1 and 3 or 0, rc, out)
      if NODE ~= 1 then return end
      local m = load(json)
      assert.same({}, m.at_fault)
      local fabric = of_kind(m, "fabric")
      assert.equal(#m.verdicts, #fabric, out) -- no node, link, flap or counters verdict
      assert.equal(1, #fabric, out)
      assert.is_true(fabric[1].located, out)
      assert.equal("leaf1 -- spine1", fabric[1].link, out)
      assert.is_true(fabric[1].bad >= 1 and fabric[1].clean_siblings >= 1, dkjson.encode(fabric[1]))
      assert.matches("\nFABRIC leaf1 %-%- spine1", out)
      assert.not_matches("VERDICT", out)
    end)
  end)

  it("spine1 down (its ports down): traffic fails over to spine2, every traced flow crosses it, no node verdict",
    function()
    local json = ".cache/clos-spine-down.json"
    if NODE == 1 then os.remove(json) end
    under({ "down spine1" }, function()
      local out, rc = matrix("--json " .. json, 120)
      if NODE ~= 1 then
        assert.equal(0, rc, out)
        return
      end
      local m = load(json)
      assert.same({}, m.at_fault)
      assert.equal(#m.verdicts, #of_kind(m, "fabric"), out)
      -- a verdict here may only name the dead spine's links (flows that crossed them before the failover)
      for _, v in ipairs(m.verdicts) do
        assert.matches("spine1", v.switch or v.link or "", dkjson.encode(v))
      end
      assert.equal(#m.verdicts > 0 and 3 or 0, rc, out)
      local seen, n = spines_crossed(m)
      assert.is_true(n >= 8 * 4, "traced flows between the leaves: " .. n)
      assert.same({ spine2 = true }, seen) -- the failover, as the hops show it
    end)
  end)

  it("node3's access link lossy (netem on leaf2's port toward it): a node verdict on node3, exit 1 there alone, "
    .. "no fabric verdict", function()
    local json = ".cache/clos-host-link.json"
    if NODE == 1 then os.remove(json) end
    under({ "netem leaf2 node3 loss 10%" }, function()
      local out, rc = matrix("--json " .. json, 150)
      assert.equal(NODE == 3 and 1 or 0, rc, out)
      if NODE ~= 1 then return end
      local m = load(json)
      assert.same({ 2 }, m.at_fault)
      assert.same({}, of_kind(m, "fabric"))
      assert.equal(1, #m.verdicts, out)
      assert.equal("node", m.verdicts[1].kind, out)
      assert.same({ "node3" }, m.verdicts[1].hosts)
      assert.matches("VERDICT node: rank 2 %(node3%)", out)
    end)
  end)
end)
