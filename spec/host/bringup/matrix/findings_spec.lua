-- lua/ibverbs/bringup/matrix/findings.lua: rank 0's first pass made whole (a record for
-- every scheduled pair, a dead rank's pairs unmeasured), the retest's rounds,
-- the verdicts with the ranks out of the run and the nodes' local faults, the
-- unscheduled pairs, the control plane's figures.
local findings = require "ibverbs.bringup.matrix.findings"
local results = require "ibverbs.bringup.matrix.results"
local schedule = require "ibverbs.bringup.matrix.schedule"
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

describe("lua/ibverbs/bringup/matrix/findings.lua", function()
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

  it("makes a port whose counters cannot be judged (saturated, unreadable: '!' in its C lines) a 'counters' verdict "
    .. "on its rank, which exits 1 and is drained with it", function()
    local f = group(3)
    local first = store_of(3, {})
    local sat = "link_downed:!saturated at 255 (8 bits): its rise cannot be seen; reset it: perfquery -R 3 1"
    first:absorb(1, "@0\nC 1 sent_pkts=9|" .. sat .. "|18\n@1\nC 1 -|" .. sat .. ",port_rcv_errors:!unreadable: "
      .. "/sys/p/port_rcv_errors: Input/output error|0", nil, "first", tostring)
    first:absorb(2, "@0\nC 1 sent_pkts=9|x:went backwards|18", nil, "first", tostring) -- no fault: no verdict
    local v, _, bad = findings.verdicts(f, {}, { {}, { "mlx5_0:1" }, { "mlx5_0:1" } }, first, nil, nil,
      { dry_run = true })
    assert.same({ { kind = "counters", ranks = { 1 }, hosts = { "h1" }, rail = "mlx5_0:1",
      why = "mlx5_0:1: the port's counters cannot be judged: link_downed: saturated at 255 (8 bits): its rise cannot "
        .. "be seen; reset it: perfquery -R 3 1; port_rcv_errors: unreadable: /sys/p/port_rcv_errors: Input/output "
        .. "error (2 rounds)" } }, v)
    assert.same({ 1 }, bad)
    local drains = require "ibverbs.bringup.matrix.drains"
    local drained = drains.plan({ verdicts = v, at_fault = bad, size = 3, pairs = {} }, { "h0", "h1", "h2" })
    assert.matches("^counters mlx5_0:1: mlx5_0:1: the port's counters cannot be judged: link_downed: saturated",
      drained.h1)
    assert.is_nil(drained.h2)
  end)

  it("notes transport rates high on every pair as load, and the ends whose packets were unknown", function()
    local f = group(4)
    local texts = {}
    local sched = schedule.explicit("first", 4,
      { { { 0, 1 }, { 2, 3 } }, { { 0, 2 }, { 1, 3 } }, { { 0, 3 }, { 1, 2 } } })
    for r = 0, 3 do
      local t = {}
      for k = 0, 2 do
        local dst = sched:partners(r, k)
        t[#t + 1] = "@" .. k .. "\n" .. results.lines({ { kind = "out", rail = { index = 1 }, peer = dst,
          res = { lat_us = 10, write_mbs = 100, send_mbs = 100 } } }) .. "\n" .. (r == 3 and k == 2 and
          "C 1 completer_retry_err=20!10|rcvd_pkts:saturated" or "C 1 completer_retry_err=20!10||2000")
      end
      texts[r] = table.concat(t, "\n")
    end
    local first = results.store(1, 4, f.hosts)
    for r = 0, 3 do first:absorb(r, texts[r], 0, "first", tostring) end
    require("ibverbs.bringup.matrix.pair_counters").attribute(first,
      { { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" } })
    local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 1,
      judged = { completer_retry_err = 10 } }
    local rt = findings.retest(first, f, {}, opts, 1)
    assert.equal(0, rt.rounds) -- 0.01 a packet on every pair: nothing stands out
    local v, transient, bad, notes = findings.verdicts(f, {}, { { "rxe0:1" } }, first, nil, rt, opts)
    assert.same({}, v)
    assert.same({}, transient)
    assert.same({}, bad)
    assert.same({ "counters: transport rates high on every pair (rxe0:1, first pass: completer_retry_err p25 0.01 a "
      .. "packet, above the floor 0.001): load or congestion, not blamed on a pair",
      "counters: transport not judged on rank 3 (rxe0:1): the port's packet counts are unknown (saturated, or not "
      .. "counted), so no rate" }, notes)
  end)

  it("notes the retest's rates as load when its controls raised them (a load that came with the retest), naming "
    .. "nothing", function()
    local f = group(4)
    local names = { { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" }, { "rxe0:1" } }
    local function lines_of(sched, rounds, counter)
      local texts = {}
      for r = 0, 3 do
        local t = {}
        for k = 0, rounds - 1 do
          local dst = sched:partners(r, k)
          if dst then
            t[#t + 1] = "@" .. k .. "\n" .. results.lines({ { kind = "out", rail = { index = 1 }, peer = dst,
              res = { lat_us = 10, write_mbs = 100, send_mbs = 100 } } }) .. "\n" .. counter(r, dst, k)
          end
        end
        texts[r] = table.concat(t, "\n")
      end
      return texts
    end
    local sched = schedule.explicit("first", 4,
      { { { 0, 1 }, { 2, 3 } }, { { 0, 2 }, { 1, 3 } }, { { 0, 3 }, { 1, 2 } } })
    local first = results.store(1, 4, f.hosts)
    for r, t in pairs(lines_of(sched, 3, function(r, dst)
      return (r + dst == 4 and r ~= dst) and "C 1 completer_retry_err=40!10||300" or "C 1 -||300"
    end)) do first:absorb(r, t, 0, "first", tostring) end
    local pcount = require "ibverbs.bringup.matrix.pair_counters"
    pcount.attribute(first, names)
    local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 1,
      judged = { completer_retry_err = 10 } }
    local rt = findings.retest(first, f, {}, opts, 1)
    assert.is_true(rt.rounds > 1)
    local retested = results.store(1, 4, f.hosts, rt.per_sample)
    for r, t in pairs(lines_of(rt.sched, rt.rounds, function() return "C 1 completer_retry_err=38!10||300" end)) do
      retested:absorb(r, t, 0, "retest", tostring)
    end
    pcount.attribute(retested, names)
    local v, transient, bad, notes = findings.verdicts(f, {}, names, first, retested, rt, opts)
    assert.same({}, v)
    assert.same({}, bad)
    assert.same({ { 1, 3, 1 } }, transient)
    assert.same({ "counters: transport rates high on every pair (rxe0:1, retest: completer_retry_err the retest's "
      .. "controls' p25 0.127 a packet, above the floor 0.001): load or congestion, not blamed on a pair" }, notes)
  end)

  it("localizes a gray link from the first pass's flows first: the pairs it explains neither retested nor blamed, "
    .. "its fabric verdict last, no rank at fault", function()
    local clos = require "clos_support"
    local t = clos.topology{ leaves = 3, spines = 2, hosts = 6 }
    local flows = clos.flows(t, { seed = 3, known = true, gray = { ["leaf1 -- spine1"] = 0.01 } })
    local crossed = {} -- the pairs some flow of which crossed the gray link: their figures suffer
    for _, x in ipairs(flows) do
      if x.true_path[1] == "leaf1 -- spine1" then crossed[x.a .. "-" .. x.b] = true end
    end
    local function pairs_of()
      return store_of(6, fs.fabric_of(6, function(p)
        if crossed[math.min(p.src, p.dst) .. "-" .. math.max(p.src, p.dst)] then p.send_mbs = 3000 end
      end))
    end
    local f, opts = group(6), { lat_factor = 2.1, bw_fraction = 0.93, retests = 1 }
    -- the pairs alone: the pairs through the gray link are flagged and retested
    local rt = findings.retest(pairs_of(), f, {}, opts, 3)
    assert.is_true(#rt.plans[1].pairs >= 8)
    -- with the flows: none is flagged, nothing retested, the fabric verdict alone, every node passes
    local store = pairs_of()
    store.flows = flows
    rt = findings.retest(store, f, {}, opts, 3)
    assert.equal(0, rt.rounds)
    local v, transient, bad = findings.verdicts(f, {}, { { "rxe0:1" } }, store, nil, rt, opts)
    assert.equal(1, #v)
    assert.equal("fabric", v[1].kind)
    assert.same({ "leaf1 -- spine1" }, v[1].links)
    assert.same({}, v[1].ranks)
    assert.same({}, v[1].hosts)
    assert.same({}, transient)
    assert.same({}, bad)
    for _, p in ipairs(store.list) do
      assert.is_false(p.flagged)
      if p.send_mbs == 3000 then assert.matches("send bandwidth 3000%.00", p.explained) end
    end
    -- the same flows without a path nor a topology: the pairs whose flows differ, not located
    for _, x in ipairs(flows) do x.path = nil end
    store = pairs_of()
    store.flows = flows
    local names = {}
    for r = 1, 6 do names[r] = { "rxe0:1" } end
    v, transient, bad = findings.verdicts(f, {}, names, store, nil, findings.retest(store, f, {}, opts, 3), opts)
    assert.same({}, transient)
    assert.is_true(#v >= 1)
    for _, x in ipairs(v) do
      assert.equal("fabric", x.kind)
      assert.is_false(x.located)
      assert.equal("rxe0:1", x.rail)
      assert.matches("^not located: node%d <%-> node%d %(rxe0:1%): 8 flows, ", x.why)
    end
    assert.same({}, bad)
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
