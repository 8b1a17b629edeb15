-- examples/lib/findings.lua: rank 0's first pass made whole (a record for
-- every scheduled pair, a dead rank's pairs unmeasured), the retest's rounds,
-- the verdicts with the ranks out of the run and the nodes' local faults, the
-- unscheduled pairs, the control plane's figures.
package.path = "examples/lib/?.lua;" .. package.path
local findings = require "findings"
local results = require "results"
local schedule = require "schedule"
local fs = require "fabric_support"

-- A group of n ranks as findings reads it; dead: rank -> why.
local function group(n, dead)
  dead = dead or {}
  local hosts = {}
  for r = 0, n - 1 do hosts[r + 1] = "h" .. r end
  return { size = n, hosts = hosts, alive = function(_, r) return not dead[r] end,
    name = function(_, r) return "rank " .. r end,
    dead_ranks = function()
      local l = {}
      for r, why in pairs(dead) do l[#l + 1] = { rank = r, why = why } end
      return l
    end }
end

local function store_of(n, list)
  local s = results.store(1, n, group(n).hosts)
  for _, p in ipairs(list) do
    local r = s:rec(1, p.src, p.dst)
    for k, v in pairs(p) do r[k] = v end
  end
  return s
end

describe("examples/lib/findings.lua", function()
  it("gives every scheduled pair a record: not reported, or its dead rank unreachable", function()
    local f = group(4, { [3] = "gone" })
    local sched = schedule.explicit("first", 4, { { { 0, 1 }, { 2, 3 } } }) -- both directions of each
    local store = store_of(4, { { src = 0, dst = 1, lat_us = 2 }, { src = 2, dst = 3, error = "x" } })
    findings.complete(store, sched, 1, f)
    assert.equal(4, #store.list)
    assert.equal("rank 3 unreachable (x)", store:find(1, 2, 3).unmeasured)
    assert.equal("rank 3 unreachable", store:find(1, 3, 2).unmeasured)
    assert.equal("not reported", store:find(1, 1, 0).unmeasured)
    assert.is_nil(store:find(1, 0, 1).unmeasured)
  end)

  it("retests the flagged pairs in rounds of disjoint pairs, once per sample", function()
    local f = group(4)
    local store = store_of(4, fs.fabric_of(4, function(p) if p.src == 2 then p.send_mbs = 3 end end))
    local rt = findings.retest(store, f, {}, { lat_factor = 2.1, bw_fraction = 0.93, retests = 2 }, 1)
    assert.is_true(rt.per_sample > 0)
    assert.equal(2 * rt.per_sample, rt.rounds)
    assert.equal(rt.rounds, rt.sched.rounds)
    local v, transient, bad = findings.verdicts(f, {}, {}, store, nil, nil, fs.OPTS)
    assert.same({}, v)
    assert.same({}, transient)
    assert.same({ 0, 1, 2, 3 }, bad) -- flagged and not retested: rank 2's pairs, both ends
  end)

  it("names the ranks out of the run and the nodes' local faults, by host and rail", function()
    local f = group(3, { [2] = "did not arrive" })
    local store = store_of(3, {})
    local v, _, bad = findings.verdicts(f, { [1] = { "no RDMA driver" } }, { {}, { "mlx5_0:1" } }, store, nil,
      nil, { dry_run = true })
    assert.same({ { kind = "unreachable", ranks = { 2 }, hosts = { "h2" }, why = "did not arrive" },
      { kind = "node", ranks = { 1 }, hosts = { "h1" }, rail = "mlx5_0:1", why = "no RDMA driver" } }, v)
    assert.same({ 1, 2 }, bad) -- rank 0: no verdict
  end)

  it("makes a port that differs from --expect a node verdict naming its rail and why", function()
    local v, _, bad = findings.verdicts(group(2), {}, {}, store_of(2, {}), nil, nil, { dry_run = true },
      { { 1, "rxe0:1", "expect: rxe0 port 1 (g.json): active_mtu: expected 1024, found 512" } })
    assert.same({ { kind = "node", ranks = { 1 }, hosts = { "h1" }, rail = "rxe0:1",
      why = "expect: rxe0 port 1 (g.json): active_mtu: expected 1024, found 512" } }, v)
    assert.same({ 1 }, bad)
  end)

  it("makes the flaps the ranks reported (their F lines) one flap verdict a port, in the order seen, the run judged on",
    function()
      local f = group(3)
      local first, retest = store_of(3, {}), results.store(1, 3, f.hosts, 1)
      first:absorb(1, "@2\n" .. results.flap_line(1, "2026-11-27T15:40:02Z", "link_downed +1; state active -> down"),
        nil, "first", tostring)
      first:absorb(1, "@3\n" .. results.flap_line(1, "2026-11-27T15:40:09Z", "state down -> active"), nil, "first",
        tostring)
      retest:absorb(2, "@0\n" .. results.flap_line(1, "2026-11-27T15:41:00Z", "events port_err|x\ny"), nil, "retest",
        tostring)
      local v, _, bad = findings.verdicts(f, {}, { {}, { "rxe0:1" }, { "mlx5_0:1" } }, first, retest, nil,
        { dry_run = true })
      assert.same({ { kind = "flap", ranks = { 1 }, hosts = { "h1" }, rail = "rxe0:1",
        why = "rxe0:1: link_downed +1; state active -> down (after round 2 of the first pass, 2026-11-27T15:40:02Z); "
          .. "then state down -> active (after round 3 of the first pass, 2026-11-27T15:40:09Z)" },
        { kind = "flap", ranks = { 2 }, hosts = { "h2" }, rail = "mlx5_0:1",
        why = "mlx5_0:1: events port_err x y (after round 0 of the retest pass, 2026-11-27T15:41:00Z)" } }, v)
      assert.same({ 1, 2 }, bad)
    end)

  it("lists the pairs never scheduled, and the control plane's figures per round", function()
    local store = store_of(3, { { src = 0, dst = 1 } })
    assert.equal(5, findings.unscheduled(store, "not scheduled (--quick)"))
    assert.equal("not scheduled (--quick)", store:find(1, 2, 0).unmeasured)
    local c = findings.control({ { 0.2, 0.1, 10, 0.05, 12 }, nil, { 0.4, 0.3, 10, 0.1, 12 } }, 3, 0.5, 1, 0)
    assert.equal(20, c.rank0_ms_per_round)
    assert.equal(2, c.slowest_rank)
    assert.near(40, c.slowest_ms_per_round, 1e-9)
    assert.equal(50, c.rank0_all_cpu_ms_per_round)
    assert.equal(12, c.exchanges)
  end)
end)
