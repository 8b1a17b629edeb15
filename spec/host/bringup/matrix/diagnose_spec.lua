-- lua/ibverbs/bringup/matrix/diagnose.lua, fabric_matrix.lua's diagnosis on synthetic
-- figures: flags against the references, the retest plan, the verdicts.
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local dkjson = require "dkjson"
local fs = require "fabric_support"

local fabric_of = fs.fabric_of

-- The retest: the same figures again for the pairs of the plan (both
-- directions), k samples of each (k passes), spoiled by change(p, sample).
local function retest(plan, change, k)
  local l = {}
  for sample = 1, k or 1 do
    for _, pr in ipairs(plan.pairs) do
      for _, x in ipairs({ { pr[1], pr[2] }, { pr[2], pr[1] } }) do
        local p = { src = x[1], dst = x[2], rail = 1, lat_us = 2.0, write_mbs = 12000, send_mbs = 11900, data_ok = true,
          sample = sample }
        if change then change(p, sample) end
        l[#l + 1] = p
      end
    end
  end
  return l
end

local OPTS = fs.OPTS

local function diagnosis(n, first_change, again_change, opts)
  opts = opts or OPTS
  local l = fabric_of(n, first_change)
  local ref = diagnose.flag(l, opts)
  local plan = diagnose.retest_plan(l, n)
  local v, transient = diagnose.verdicts(retest(plan, again_change, opts.retests), ref, plan, opts)
  return v, transient, plan, l
end

-- A measured first pass: matrices {[src + 1] = {[dst + 1] = value}} of latency, write and send.
local function measured_fabric(lat, write, send)
  local l = {}
  for s = 0, #lat - 1 do
    for d = 0, #lat - 1 do
      if s ~= d then
        l[#l + 1] = { src = s, dst = d, rail = 1, lat_us = lat[s + 1][d + 1], write_mbs = write[s + 1][d + 1],
          send_mbs = send[s + 1][d + 1], data_ok = true }
      end
    end
  end
  return l
end

local function flagged_pairs(l)
  local f = {}
  for _, p in ipairs(l) do if p.flagged then f[#f + 1] = p.src .. ">" .. p.dst end end
  return f
end

describe("fabric_matrix.lua's diagnosis (lua/ibverbs/bringup/matrix/diagnose.lua)", function()
  it("gives no verdict on a healthy fabric and retests nothing", function()
    local v, transient, plan = diagnosis(8)
    assert.same({}, v)
    assert.same({}, transient)
    assert.same({}, plan.pairs)
  end)

  it("names a slow node (its sends at half rate), not its partners", function()
    local slow = function(p) if p.src == 5 then p.write_mbs, p.send_mbs = 6000, 5900 end end
    local v, _, plan = diagnosis(8, slow, slow)
    assert.equal(1, #v)
    assert.equal("node", v[1].kind)
    assert.same({ 5 }, v[1].ranks)
    assert.matches("still bad against rank %d, which passed with rank %d: rank 5 %-> rank %d: RDMA write bandwidth "
      .. "6000%.00 MB/s < 0%.93 x max 1199%d%.00", v[1].why)
    assert.matches("7 of its pairs flagged", v[1].why)
    -- every pair of rank 5 is retested as a flagged pair: it needs no partner of its own; the others get one
    -- (every rank has a flagged pair with 5, so none is clean: the partners are those with fewest flagged)
    assert.is_nil(plan.partner[5])
    for r = 0, 7 do
      if r ~= 5 then assert.is_true(plan.partner[r] ~= nil and plan.partner[r] ~= 5 and plan.partner[r] ~= r) end
    end
  end)

  it("names a bad link whose two ends are fine with everyone else, and neither node", function()
    local link = function(p)
      if (p.src == 1 and p.dst == 6) or (p.src == 6 and p.dst == 1) then p.lat_us = 9.5 end
    end
    local v, _, plan = diagnosis(8, link, link)
    assert.equal(1, #v, require("dkjson").encode(v))
    assert.equal("link", v[1].kind)
    assert.same({ 1, 6 }, v[1].ranks)
    assert.matches("both pass with other partners; between them still bad: rank 1 %-> rank 6: latency 9%.5 us > "
      .. "2%.1 x min 2%.0", v[1].why)
    assert.same({ { 1, 6 }, { 0, 1 }, { 2, 6 } }, plan.pairs) -- the pair, each end with a good partner
  end)

  it("flags a pair past an absolute limit (--expect's pairs) that the relative thresholds pass; the retest "
    .. "judges its best p99", function()
    local limits = { { key = "lat_p99_us", max = true, name = "latency p99", value = 10 },
                     { key = "send_mbs", max = false, name = "send bandwidth", value = 11000 } }
    local opts = { lat_factor = 2.1, bw_fraction = 0.5, reference = "best", retests = 1, limits = limits }
    -- every pair's p99 at 5 us, rank 3's sends at 10,000 MB/s: within 0.5 x best, below the floor
    local first = function(p)
      p.lat_p99_us = 5
      if p.src == 3 then p.send_mbs = 10000 end
    end
    local v, _, _, l = diagnosis(6, first, first, opts)
    local flagged = 0
    for _, p in ipairs(l) do
      if p.flagged then
        flagged = flagged + 1
        assert.equal(3, p.src)
        assert.matches("send bandwidth 10000%.00 < expected 11000", p.why)
      end
    end
    assert.equal(5, flagged)
    assert.equal(1, #v)
    assert.same({ 3 }, v[1].ranks)
    -- a p99 above its ceiling in every sample of the retest stays bad; below it in one, it passes
    local best = diagnose.best_of({ { src = 0, dst = 1, lat_us = 2, lat_p99_us = 30 },
                                    { src = 0, dst = 1, lat_us = 2, lat_p99_us = 8 } })
    assert.equal(8, best.lat_p99_us)
    assert.is_nil((diagnose.why(best, {}, opts)))
    best.lat_p99_us = 12
    assert.matches("latency p99 12%.00 > expected 10", table.concat(diagnose.why(best, {}, opts), "; "))
  end)

  it("calls a pair that passes its retest transient (no verdict); a failed pair or bad data is flagged", function()
    local once = function(p) if p.src == 2 and p.dst == 3 then p.send_mbs = 100 end end
    local v, transient = diagnosis(6, once, nil)
    assert.same({}, v)
    assert.same({ { 2, 3 } }, transient)
    local l = fabric_of(4, function(p)
      if p.src == 0 and p.dst == 1 then p.error = "RC connect: timeout" end
      if p.src == 2 and p.dst == 3 then p.data_ok = false end
    end)
    diagnose.flag(l, OPTS)
    local flagged = {}
    for _, p in ipairs(l) do if p.flagged then flagged[#flagged + 1] = p.src .. "->" .. p.dst .. ": " .. p.why end end
    assert.same({ "0->1: RC connect: timeout", "2->3: data check failed" }, flagged)
  end)

  it("takes its thresholds against the best figures (ClusterKit's 2.1x, 93 %) or the medians, as asked", function()
    local l = fabric_of(4, function(p) if p.src == 0 then p.send_mbs = 11000 end end) -- 92 % of the best
    diagnose.flag(l, OPTS)
    local n = 0
    for _, p in ipairs(l) do if p.flagged then n = n + 1 end end
    assert.equal(3, n)
    diagnose.flag(l, { lat_factor = 2.1, bw_fraction = 0.9 })
    n = 0
    for _, p in ipairs(l) do if p.flagged then n = n + 1 end end
    assert.equal(0, n)
    local ref = diagnose.reference(fabric_of(3, function(p) p.lat_us = p.src + 1 end), "median")
    assert.equal(2, ref.lat_us)
  end)

  it("takes a percentile as the reference: bandwidth against pQ, latency against p(100-Q); best is p100", function()
    assert.same({ q = 0.75, hi = "p75", lo = "p25" }, diagnose.parse_reference("p75"))
    assert.same({ q = 0.9, hi = "p90", lo = "p10" }, diagnose.parse_reference("p90"))
    assert.same({ q = 0.875, hi = "p87.5", lo = "p12.5" }, diagnose.parse_reference("p87.5"))
    assert.same({ q = 1, hi = "max", lo = "min" }, diagnose.parse_reference("best"))
    assert.same({ q = 0.5, hi = "median", lo = "median" }, diagnose.parse_reference("median"))
    for _, bad in ipairs({ "p30", "p101", "p", "75", "q75", "p75x", "mean" }) do
      local ok, err = diagnose.parse_reference(bad)
      assert.is_nil(ok, bad)
      assert.matches("best, median or pQ %(a percentile, Q from 50 to 100: p75, p90%) expected, got '"
        .. bad:gsub("%p", "%%%0") .. "'", err)
    end
    -- 12 values 1 .. 12: p75 interpolates between the 9th and the 10th (9.25), p25 between the 3rd and 4th
    local l = fabric_of(4)
    local v = 0
    for _, p in ipairs(l) do v = v + 1; p.lat_us, p.write_mbs, p.send_mbs = v, v, 13 - v end
    local ref = diagnose.reference(l, "p75")
    assert.same({ 3.75, 9.25, 9.25, "p75", "p25" }, { ref.lat_us, ref.write_mbs, ref.send_mbs, ref.hi, ref.lo })
    ref = diagnose.reference(l, "p100")
    assert.same({ 1, 12, 12, "p100", "p0" }, { ref.lat_us, ref.write_mbs, ref.send_mbs, ref.hi, ref.lo })
    ref = diagnose.reference(l, "median")
    assert.same({ 6.5, 6.5 }, { ref.lat_us, ref.write_mbs })
  end)

  -- Four soft-RoCE VMs, node 3 (rank 2) behind tbf rate 400kbit: the first pass of a run that passed
  -- (spec/nodes4, --reference median --bw-fraction 0.05).  Rank 2 owns 6 of the 12 pairs.
  local SLOW_LAT = { { 0, 9756.8, 7117.8, 9876.1 }, { 9320.6, 0, 13678.0, 7441.9 }, { 7257.4, 14841.6, 0, 11083.6 },
    { 8955.1, 7705.2, 12157.1, 0 } }
  local SLOW_WRITE = { { 0, 0.73, 0.05, 1.49 }, { 1.09, 0, 0.07, 3.32 }, { 0.05, 0.05, 0, 0.05 },
    { 1.61, 1.79, 1.42, 0 } }
  local SLOW_SEND = { { 0, 2.02, 0.05, 1.96 }, { 1.30, 0, 0.16, 2.71 }, { 0.05, 0.05, 0, 0.05 },
    { 1.60, 5.52, 0.05, 0 } }

  it("flags the six pairs of one slow node of four against p75, which the median missed", function()
    local l = measured_fabric(SLOW_LAT, SLOW_WRITE, SLOW_SEND)
    -- half the bandwidths are rank 2's: the median (0.91 MB/s write) is pulled down to the edge of them,
    -- 0.05 x it below them all
    local ref = diagnose.flag(l, { lat_factor = 3, bw_fraction = 0.05, reference = "median" })
    assert.same({}, flagged_pairs(l))
    assert.near(0.91, ref.write_mbs, 1e-9)
    local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 2 }
    ref = diagnose.flag(l, opts)
    assert.same({ "0>2", "1>2", "2>0", "2>1", "2>3", "3>2" }, flagged_pairs(l))
    assert.near(1.52, ref.write_mbs, 1e-9)
    assert.matches("RDMA write bandwidth 0%.05 MB/s < 0%.2 x p75 1%.52", l[2].why)
    -- the retest: rank 2 still at 0.05 MB/s both ways, every other pair at its first-pass figures
    local plan = diagnose.retest_plan(l, 4)
    local again = retest(plan, function(p)
      p.lat_us, p.write_mbs, p.send_mbs = 6000, 4, 4
      if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 0.05, 0.05 end
    end, 2)
    local v, transient = diagnose.verdicts(again, ref, plan, opts)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 2 } }, { v[1].kind, v[1].ranks })
    assert.matches("^still bad against rank %d, which passed with rank %d: rank %d %-> rank %d: RDMA write bandwidth "
      .. "0%.05 MB/s < 0%.2 x p75 1%.52; send bandwidth 0%.05 MB/s < 0%.2 x p75 1%.98 %(best of 2%)", v[1].why)
    assert.matches("%(3 of its pairs flagged in the first pass%)$", v[1].why)
    assert.same({}, transient)
  end)

  it("names the slow node alone when noise flagged two more pairs of the first pass (none clean, all retested)",
    function()
      -- rank 2 slow; 0 -> 1 and 3 -> 1 lost a packet each (an RC ack timeout: 64 KiB in 2.1 s)
      local l = fabric_of(4, function(p)
        if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 60, 59 end
        if p.src == 0 and p.dst == 1 then p.write_mbs = 30 end
        if p.src == 3 and p.dst == 1 then p.send_mbs = 30 end
      end)
      local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 2 }
      local ref = diagnose.flag(l, opts)
      local plan = diagnose.retest_plan(l, 4)
      assert.same({}, plan.good) -- every rank has a flagged pair: no rank passed all of its pairs
      assert.same({ 3, nil, nil, 0 }, { plan.partner[0], plan.partner[1], plan.partner[2], plan.partner[3] })
      local v, transient = diagnose.verdicts(retest(plan, function(p)
        if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 60, 59 end
      end, 2), ref, plan, opts)
      assert.equal(1, #v, dkjson.encode(v))
      assert.same({ "node", { 2 } }, { v[1].kind, v[1].ranks })
      assert.same({ { 0, 1 }, { 1, 3 } }, transient)
    end)

  -- The same VMs, node2 -> node4 (ranks 1 -> 3) delayed 300 ms: the first pass of the run that named
  -- node2 a bad node, its retest of rank 1 against rank 0 having measured 0 -> 1 at 0.03 MB/s once
  local LINK_LAT = { { 0, 11866.9, 4269.4, 8036.3 }, { 11606.7, 0, 10656.0, 157411.0 },
    { 4404.8, 10596.2, 0, 10810.6 }, { 8565.1, 155466.0, 10841.8, 0 } }
  local LINK_WRITE = { { 0, 1.48, 4.52, 3.21 }, { 2.28, 0, 1.83, 0.20 }, { 2.41, 1.63, 0, 1.35 },
    { 2.74, 0.21, 1.31, 0 } }
  local LINK_SEND = { { 0, 2.79, 4.82, 3.64 }, { 1.48, 0, 2.98, 0.20 }, { 9.48, 3.57, 0, 1.27 },
    { 3.80, 0.20, 1.49, 0 } }

  it("judges a retested pair by its best of --retests samples: one noisy sample names no node", function()
    local function run(k)
      local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = k }
      local l = measured_fabric(LINK_LAT, LINK_WRITE, LINK_SEND)
      local ref = diagnose.flag(l, opts)
      assert.same({ "1>3", "3>1" }, flagged_pairs(l))
      local plan = diagnose.retest_plan(l, 4)
      assert.same({ { 1, 3 }, { 0, 1 }, { 2, 3 } }, plan.pairs)
      return diagnose.verdicts(retest(plan, function(p, sample)
        p.lat_us, p.write_mbs, p.send_mbs = 6000, 4, 4
        if (p.src == 1 and p.dst == 3) or (p.src == 3 and p.dst == 1) then p.lat_us, p.write_mbs = 156000, 0.2 end
        if p.src == 0 and p.dst == 1 and sample == 1 then p.write_mbs = 0.03 end -- the lost packet
      end, k), ref, plan, opts)
    end
    local v = run(1) -- one sample: the noise decides, as it did
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 1 } }, { v[1].kind, v[1].ranks })
    assert.matches(": rank 0 %-> rank 1: RDMA write bandwidth 0%.03 MB/s < 0%.2 x p75 2%.49 %(1 of its pairs", v[1].why)
    v = run(2) -- two: 0 -> 1 passes on its best sample, the link is named
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 3 } }, { v[1].kind, v[1].ranks })
    assert.matches("^both pass with other partners; between them still bad: rank 1 %-> rank 3: latency 156000%.0 us "
      .. "> 4 x p25 8432%.9; RDMA write bandwidth 0%.20 MB/s < 0%.2 x p75 2%.49 %(best of 2%)", v[1].why)
  end)

  it("counts a failure or bad data in any retest sample, and the best figure of each metric otherwise", function()
    local b = diagnose.best_of({
      { src = 1, dst = 2, rail = 1, lat_us = 9, write_mbs = 1, send_mbs = 8, data_ok = true },
      { src = 1, dst = 2, rail = 1, lat_us = 3, write_mbs = 7, send_mbs = 2, data_ok = true },
    })
    assert.same({ 3, 7, 8, true, 2 }, { b.lat_us, b.write_mbs, b.send_mbs, b.data_ok, b.samples })
    b = diagnose.best_of({
      { src = 1, dst = 2, lat_us = 3, write_mbs = 7, send_mbs = 8, data_ok = true },
      { src = 1, dst = 2, lat_us = 3, write_mbs = 7, send_mbs = 8, data_ok = false },
      { src = 1, dst = 2, error = "send bandwidth: completion retry exceeded" },
    })
    assert.is_false(b.data_ok)
    assert.equal("send bandwidth: completion retry exceeded", b.error)
    -- a link that corrupts one sample in two is still bad, whatever its best figures
    local v = diagnosis(6, function(p) if p.src == 1 and p.dst == 4 then p.data_ok = false end end,
      function(p, sample) if p.src == 1 and p.dst == 4 and sample == 2 then p.data_ok = false end end,
      { lat_factor = 2.1, bw_fraction = 0.93, retests = 3 })
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 4 } }, { v[1].kind, v[1].ranks })
    assert.matches("rank 1 %-> rank 4: data check failed %(best of 3%)", v[1].why)
  end)

  it("judges the retest against its own controls: a load that comes with the retest names nothing", function()
    -- the first pass: 1 <-> 3 at half speed (a burst of load); the retest: the whole machine at 0.4 x,
    -- its controls (each suspect with a partner that passed) as slow as the flagged pair
    local opts = { lat_factor = 2.1, bw_fraction = 0.93, reference = "best", retests = 1 }
    local slow = function(p) p.lat_us, p.write_mbs, p.send_mbs = 5.0, 4800, 4760 end
    local function run(again)
      local l = fabric_of(6, function(p)
        if (p.src == 1 and p.dst == 3) or (p.src == 3 and p.dst == 1) then p.write_mbs, p.send_mbs = 6000, 5950 end
      end)
      local ref = diagnose.flag(l, opts)
      local plan = diagnose.retest_plan(l, 6)
      return diagnose.verdicts(retest(plan, again), ref, plan, opts)
    end
    local v, transient, ref = run(slow)
    assert.same({}, v)
    assert.same({ { 1, 3 } }, transient)
    assert.equal(4800, ref.write_mbs)
    assert.equal("the retest's controls' max", ref.names.write_mbs)
    -- the first pass's reference alone would have named the link (what the controls excuse)
    local l = { { src = 1, dst = 3, lat_us = 5.0, write_mbs = 4800, send_mbs = 4760, data_ok = true } }
    assert.is_truthy(diagnose.why(l[1], diagnose.reference(fabric_of(6)), opts))
    -- a fault stays bad against the loaded controls, and the why says what judged it
    v = run(function(p)
      slow(p)
      if (p.src == 1 and p.dst == 3) or (p.src == 3 and p.dst == 1) then p.write_mbs, p.send_mbs = 480, 476 end
    end)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 3 } }, { v[1].kind, v[1].ranks })
    assert.matches("RDMA write bandwidth 480%.00 MB/s < 0%.93 x the retest's controls' max 4800%.00", v[1].why)
    -- controls that did better than the first pass never make the bar stricter
    local _, _, same = run(function(p) p.write_mbs, p.send_mbs = 99000, 99000 end)
    assert.equal(11999, same.write_mbs)
    assert.is_nil(same.names.write_mbs)
  end)
  -- Transport counters per packet (counter_judge.lua): every direction of a pair shares its round, so its
  -- ends' rates; rates(a, b) gives a pair's ends' {name, delta, packets} lists.
  local function with_rates(p, rates)
    p.counted = true
    p.rates = {}
    for _, rank in ipairs({ math.min(p.src, p.dst), math.max(p.src, p.dst) }) do
      for _, e in ipairs(rates(p.src, p.dst)[rank] or {}) do
        table.insert(p.rates, { rank = rank, host = "node" .. (rank + 1), rail = "rxe0:1", name = e[1], delta = e[2],
          packets = e[3], rate = e[2] / e[3], threshold = e[2] > 10 and 10 or nil })
      end
    end
    return p
  end
  local RATE_OPTS = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 3 }

  -- A first pass and its retest (k samples) on n ranks, the figures healthy, the counters from rates(a, b, sample).
  local function counted_diagnosis(n, rates, opts)
    local l = fabric_of(n, function(p) with_rates(p, function(a, b) return rates(a, b, 0) end) end)
    local ref = diagnose.flag(l, opts)
    local plan = diagnose.retest_plan(l, n)
    local again = retest(plan, function(p, sample)
      with_rates(p, function(a, b) return rates(a, b, sample) end)
    end, opts.retests)
    local v, transient, rref = diagnose.verdicts(again, ref, plan, opts)
    return v, transient, plan, l, ref, rref
  end

  it("names nothing on a lossy segment whose every pair retries alike (the issue's +11 to +21 on each end)",
    function()
    -- four healthy soft-RoCE VMs, -n 200 -N 50: about 3400 packets a port a round, 11 to 21 retries each
    local v, transient, plan, l, ref = counted_diagnosis(4, function(a, b, sample)
      local n = 11 + (a * 3 + b * 5 + sample * 7) % 11
      return { [a] = { { "completer_retry_err", n, 3400 } }, [b] = { { "completer_retry_err", 32 - n, 3400 } } }
    end, RATE_OPTS)
    assert.same({}, flagged_pairs(l))
    assert.same({}, plan.pairs)
    assert.same({}, v)
    assert.same({}, transient)
    -- what the fixed threshold of 10 flagged: every pair rose past it
    for _, p in ipairs(l) do assert.is_truthy(p.rates[1].threshold) end
    -- the segment's rate itself is above the floor: said as load, not blamed
    assert.matches("^counters: transport rates high on every pair %(x: completer_retry_err p25 0%.00", require(
      "ibverbs.bringup.matrix.counter_judge").load_note(ref.rates, RATE_OPTS, nil, "x"))
  end)

  it("names exactly one link when one link's pair stands out per packet in every sample, the figures passing",
    function()
    local v, transient, plan, l = counted_diagnosis(4, function(a, b)
      if a + b == 4 and a ~= b then -- 1 <-> 3: 20 % loss one way (the sender NAKed, the receiver out of sequence)
        return { [1] = { { "rcvd_seq_err", 28, 300 }, { "completer_retry_err", 40, 300 } },
          [3] = { { "out_of_seq_request", 25, 300 } } }
      end
      return { [a] = { { "completer_retry_err", 3, 300 } } } -- a retry now and then, within its threshold
    end, RATE_OPTS)
    assert.same({ "1>3", "3>1" }, flagged_pairs(l))
    local why
    for _, p in ipairs(l) do if p.src == 1 and p.dst == 3 then why = p.why end end
    -- the fabric's p25 retry rate is the healthy pairs' 3 in 300 (rises within the threshold count in the
    -- reference); the sequence errors, which no other pair counted, are judged by the floor
    assert.equal("transport counters stand out: rxe0:1 on node2: rcvd_seq_err +28 in 300 packets (0.0933 a packet > "
      .. "floor 0.001), completer_retry_err +40 in 300 packets (0.133 a packet > 4 x p25 0.01); rxe0:1 on node4: "
      .. "out_of_seq_request +25 in 300 packets (0.0833 a packet > floor 0.001)", why)
    assert.same({ { 1, 3 } }, plan.flagged)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 3 } }, { v[1].kind, v[1].ranks })
    assert.matches("^both pass with other partners; between them still bad: rank 1 %-> rank 3: transport counters "
      .. "stand out: .- %(best of 3%); rank 3 %-> rank 1: the same transport counters %(best of 3%)$", v[1].why)
    assert.same({}, transient)
  end)

  it("judges a retest's rates against its controls': a rise that comes with the retest everywhere names nothing",
    function()
    local v, transient, _, _, _, rref = counted_diagnosis(4, function(a, b, sample)
      if sample == 0 then -- the first pass: 1 <-> 3 alone retried
        return (a + b == 4 and a ~= b) and { [1] = { { "completer_retry_err", 40, 300 } } } or {}
      end
      return { [a] = { { "completer_retry_err", 36 + sample, 300 } } } -- the retest: every pair alike
    end, RATE_OPTS)
    assert.same({}, v)
    assert.same({ { 1, 3 } }, transient)
    assert.equal("the retest's controls' p25", rref.rates.names.completer_retry_err)
  end)

  it("names only the node whose every pair shows high rates, and retests two of its pairs, not all", function()
    local v, transient, plan, _, _, rref = counted_diagnosis(4, function(a, b)
      if a == 2 or b == 2 then
        local other = a == 2 and b or a
        return { [2] = { { "completer_retry_err", 45, 300 } }, [other] = { { "out_of_seq_request", 30, 300 } } }
      end
      return { [a] = { { "completer_retry_err", 12, 3000 } }, [b] = { { "completer_retry_err", 14, 3000 } } }
    end, RATE_OPTS)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 2 } }, { v[1].kind, v[1].ranks })
    assert.matches("transport counters stand out", v[1].why)
    assert.matches("%(3 of its pairs flagged in the first pass%)$", v[1].why)
    assert.same({}, transient)
    local with2 = 0
    for _, pr in ipairs(plan.pairs) do if pr[1] == 2 or pr[2] == 2 then with2 = with2 + 1 end end
    assert.equal(2, with2)
    assert.is_truthy(rref.rates)
  end)

  it("names nothing when the whole segment's rates rise together: load or congestion", function()
    local v, _, plan, l, ref = counted_diagnosis(4, function(a, b)
      return { [a] = { { "completer_retry_err", 15 + a, 300 } }, [b] = { { "rcvd_seq_err", 14 + b, 300 } } }
    end, { lat_factor = 4, bw_fraction = 0.2, reference = "best", retests = 1 })
    assert.same({}, flagged_pairs(l))
    assert.same({}, plan.pairs)
    assert.same({}, v)
    local judge = require "ibverbs.bringup.matrix.counter_judge"
    assert.is_truthy(judge.load_note(ref.rates, nil, nil, "rxe0:1, first pass"))
  end)

  it("retests a rank all of whose pairs were flagged with two partners, not N-1: a node verdict all the same",
    function()
    local slow = function(p) if p.src == 5 or p.dst == 5 then p.write_mbs, p.send_mbs = 6000, 5900 end end
    local l = fabric_of(8, slow)
    local ref = diagnose.flag(l, fs.OPTS)
    local plan = diagnose.retest_plan(l, 8)
    local kept, left = {}, 0
    for _, pr in ipairs(plan.pairs) do
      if pr[1] == 5 or pr[2] == 5 then kept[#kept + 1] = pr[1] == 5 and pr[2] or pr[1] end
    end
    for _, r in pairs(plan.unretested) do assert.equal(5, r); left = left + 1 end
    assert.equal(diagnose.NODE_RETEST_PAIRS, #kept)
    assert.equal(7 - diagnose.NODE_RETEST_PAIRS, left)
    -- the retest's rounds with rank 5: 2 a sample (was 7); 3 samples: 6 rounds of the slow node's pace, not 21
    local rounds = require("ibverbs.bringup.matrix.schedule").disjoint_rounds(plan.pairs, 2)
    local with5 = 0
    for _, rd in ipairs(rounds) do
      for _, pr in ipairs(rd) do if pr[1] == 5 or pr[2] == 5 then with5 = with5 + 1 end end
    end
    assert.equal(2, with5)
    local v, transient = diagnose.verdicts(retest(plan, slow), ref, plan, fs.OPTS)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 5 } }, { v[1].kind, v[1].ranks })
    assert.same({}, transient) -- the pairs not retested are the node's: its verdict covers them
    -- rank 5 slow in the first pass alone (a stall): its two retested pairs pass, the others are said not retested
    v, transient = diagnose.verdicts(retest(plan, nil), ref, plan, fs.OPTS)
    assert.same({}, v)
    local notes = 0
    for _, t in ipairs(transient) do
      if t.note then
        notes = notes + 1
        assert.matches("^not retested: rank 5 passed with rank %d, after every pair of it was flagged in the first "
          .. "pass$", t.note)
      end
    end
    assert.equal(5, notes)
  end)

  it("gives a link verdict to an unretested pair far worse than the bounded rank's retested ones, though the rank "
    .. "passed (no broken link called transient)", function()
    -- rank 5 slow with everyone in the first pass; its link to rank 7 also 100 times slower than its others
    local slow = function(p)
      if p.src == 5 or p.dst == 5 then p.write_mbs, p.send_mbs = 6000, 5900 end
      if (p.src == 5 and p.dst == 7) or (p.src == 7 and p.dst == 5) then p.lat_us = p.lat_us * 100 end
    end
    local l = fabric_of(8, slow)
    local ref = diagnose.flag(l, fs.OPTS)
    local plan = diagnose.retest_plan(l, 8)
    assert.equal(5, plan.unretested["5-7"]) -- left out: the partners likeliest to pass are kept
    local v, transient = diagnose.verdicts(retest(plan, nil), ref, plan, fs.OPTS) -- the retested pairs pass
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 5, 7 } }, { v[1].kind, v[1].ranks })
    assert.matches("^not retested %(every pair of rank 5 was flagged: 2 of them retested, and rank 5 passed with "
      .. "rank %d%), but in the first pass far worse than those: latency [%d.]+ us > 2%.1 x [%d.]+$", v[1].why)
    local notes = 0
    for _, t in ipairs(transient) do if t.note then notes = notes + 1 end end
    assert.equal(4, notes) -- the other pairs left out: as slow as the retested ones, the stall
  end)

  it("flags no pair the fabric explains (opts.explained) for its figures, which then name no node nor link; its "
    .. "ends' error counters and a failed data check still flag it", function()
    -- ranks 0-3: the pairs 0-2 and 1-3 cross a gray fabric link: slow both ways
    local through = { ["0-2"] = true, ["1-3"] = true }
    local gray = function(p)
      if through[math.min(p.src, p.dst) .. "-" .. math.max(p.src, p.dst)] then p.send_mbs = 3000 end
    end
    local opts = { lat_factor = 2.1, bw_fraction = 0.93,
      explained = { [diagnose.fabric_key(2, 0, 1)] = true, [diagnose.fabric_key(1, 3, 1)] = true } }
    assert.equal("0-2:1", diagnose.fabric_key(2, 0, 1))
    local l = fabric_of(4, gray)
    diagnose.flag(l, fs.OPTS) -- (without: four directions flagged)
    assert.equal(4, #flagged_pairs(l))
    local ref = diagnose.flag(l, opts)
    assert.same({}, flagged_pairs(l))
    for _, p in ipairs(l) do
      if p.send_mbs == 3000 then assert.matches("^send bandwidth 3000%.00 MB/s < 0%.93 x max", p.explained) end
    end
    local plan = diagnose.retest_plan(l, 4)
    assert.same({}, plan.pairs)
    assert.same({}, (diagnose.verdicts({}, ref, plan, opts)))
    -- what the fabric does not explain: a pair's ends' error counters, its data
    l = fabric_of(4, function(p)
      gray(p)
      if p.src == 0 and p.dst == 2 then
        p.counter_errors = { { rank = 0, host = "n1", rail = "rxe0:1", name = "symbol_error", delta = 9,
          threshold = 0 } }
      end
      if p.src == 3 and p.dst == 1 then p.data_ok = false end
    end)
    diagnose.flag(l, opts)
    assert.same({ "0>2", "3>1" }, flagged_pairs(l))
  end)
end)
