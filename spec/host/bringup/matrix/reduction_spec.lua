-- The first pass reduced on the way up (ibverbs.bringup.matrix.ledger, pass_summary,
-- reduction) against the unreduced diagnosis rank 0 ran on every pair: on a
-- synthetic 40-rank tournament with planted faults, the ranks' summaries
-- merged in any tree give one fabric summary, its references are the
-- exact ones (best) or within the sketch's bound (p75), the failing pairs
-- that reach rank 0 are exactly those rank 0 flagged from every pair, and
-- the retest plan is the same; a pair whose flows stand out (one stalled)
-- reaches rank 0 with its flows although its figures pass, as the failing
-- pairs do with theirs.
local results = require "ibverbs.bringup.matrix.results"
local schedule = require "ibverbs.bringup.matrix.schedule"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local findings = require "ibverbs.bringup.matrix.findings"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local ledger = require "ibverbs.bringup.matrix.ledger"
local summary = require "ibverbs.bringup.matrix.pass_summary"
local reduction = require "ibverbs.bringup.matrix.reduction"
local sketch = require "ibverbs.bringup.matrix.sketch"

local N, NRAILS = 40, 2
local SCHED = schedule.new("tournament", N)
local R = SCHED.rounds
local HOSTS, NAMES = {}, {}
for r = 0, N - 1 do HOSTS[r + 1] = "node" .. (r + 1); NAMES[r + 1] = { "mlx5_0:1", "mlx5_1:1" } end
local SLOW = 7
local SLOW_LINK = { 12, SCHED:partners(12, 4), 2 } -- src, dst, rail: latency x 5
local LOSSY = { 20, SCHED:partners(20, 6), 1 } -- both ends' transport counters
local FAILED = { 30, SCHED:partners(30, 3), 1 } -- an error on the sender
local BAD_DATA = { SCHED:partners(25, 8), 25, 1 } -- the receiver's check failed
local STALLED = { 5, SCHED:partners(5, 2), 1 } -- one of its two flows stalled, its figures good

local function group(r)
  return { rank = r, size = N, hosts = HOSTS, alive = function() return true end,
    name = function(_, x) return "rank " .. x .. " (" .. HOSTS[x + 1] .. ")" end,
    dead_ranks = function() return {} end }
end

local function is(x, src, dst, ki) return x[1] == src and x[2] == dst and x[3] == ki end

-- The flagged pairs of rail ki's list, as "ki src>dst", into out.flagged.
local function note_flagged(out, ki, list)
  for _, x in ipairs(list) do
    if x.flagged then out.flagged[#out.flagged + 1] = ki .. " " .. x.src .. ">" .. x.dst end
  end
end

-- Rank r's lines of round k (as rounds.lua makes them), and the ends they came from.
local function round_lines(r, k)
  local p = SCHED:partners(r, k)
  if not p then return nil end
  local ends, counters = {}, {}
  for ki = 1, NRAILS do
    local slow = (r == SLOW or p == SLOW) and 0.4 or 1
    local lat = 2 * (1 + 0.02 * math.sin(r * 7 + p * 3 + k + ki)) * (is(SLOW_LINK, r, p, ki) and 5 or 1)
    ends[#ends + 1] = { kind = "out", rail = { index = ki }, peer = p, res = { lat_us = lat, lat_p99_us = lat * 1.2,
      lat_p999_us = lat * 1.5, lat_max_us = lat * 2, write_mbs = 11500 * slow * (1 + 0.004 * math.cos(r + k * ki)),
      send_mbs = 11400 * slow * (1 + 0.004 * math.sin(p + k)), error = is(FAILED, r, p, ki) and "RDMA write: boom" },
      flow_figs = { { label = 1, sport = 49153, src = "10.0.0." .. r, dst = "10.0.0." .. p, lat_us = lat, samples = 30,
        stalls = is(STALLED, r, p, ki) and 2 or 0 }, { label = 2, sport = 49154, lat_us = lat, samples = 30 } } }
    ends[#ends + 1] = { kind = "in", rail = { index = ki }, peer = p,
      res = { data_ok = not is(BAD_DATA, p, r, ki), verified = 1000 } }
    local lossy = ki == LOSSY[3] and ((r == LOSSY[1] and p == LOSSY[2]) or (r == LOSSY[2] and p == LOSSY[1]))
    counters[#counters + 1] = string.format("C %d port_rcv_packets=34000,port_xmit_packets=34000%s||68000", ki,
      lossy and ",out_of_sequence=300!10" or "")
  end
  local lines = results.lines(ends)
  local c = table.concat(counters, "\n")
  return "@" .. k .. "\n" .. lines .. "\n" .. c, "@" .. k .. "\n" .. lines .. "\n" .. c -- (its one partner's: all)
end

-- Rank 0 before the reduction: every rank's lines, every pair flagged against the exact reference.
local function unreduced(opts)
  local f = group(0)
  local store = results.store(NRAILS, N, HOSTS)
  for k = 0, R - 1 do
    for r = 0, N - 1 do store:absorb(r, round_lines(r, k), k, "first", function(x) return f:name(x) end) end
  end
  pcount.attribute(store, NAMES)
  findings.complete(store, SCHED, R, f)
  local out = { refs = {}, plans = {}, flagged = {} }
  for ki = 1, NRAILS do
    local l = store:of_rail(ki)
    out.refs[ki] = diagnose.flag(l, opts)
    out.plans[ki] = diagnose.retest_plan(l, N, {})
    note_flagged(out, ki, l)
  end
  table.sort(out.flagged)
  return out, #store.list
end

-- Every rank's ledger after the pass: its lines, and its partner's about it.
local function ledgers()
  local l = {}
  for r = 0, N - 1 do
    l[r] = ledger.new{ f = group(r), nrails = NRAILS, rail_names = NAMES, sched = SCHED, rounds = R }
    for k = 0, R - 1 do
      local own = round_lines(r, k)
      if own then
        l[r]:keep(k, r, own)
        local p = SCHED:partners(r, k)
        l[r]:keep(k, p, select(2, round_lines(p, k)))
      end
    end
  end
  return l
end

-- The summaries' texts merged as relays would: groups of random sizes, then the groups' texts.
local function merge_as_tree(texts)
  local groups, i = {}, 1
  while i <= #texts do
    local size = math.random(1, 9)
    local g = {}
    for j = i, math.min(i + size - 1, #texts) do g[#g + 1] = texts[j] end
    groups[#groups + 1] = summary.merge_texts(g)
    i = i + size
  end
  return summary.merge_texts(groups)
end

-- Rank 0 after the reduction: the fabric's summary, its references, the failing pairs' lines.
local function reduced(opts, l)
  local texts = {}
  for r = 0, N - 1 do texts[#texts + 1] = l[r]:summary():encode() end
  local fabric = summary.decode(merge_as_tree(texts))
  local refs = {}
  for ki = 1, NRAILS do refs[ki] = fabric:reference(ki, opts.reference) end
  local up = {}
  for r = 0, N - 1 do up[#up + 1] = l[r]:failing(refs, opts, false) end
  local store = results.store(NRAILS, N, HOSTS)
  local counts = reduction.absorb(store, table.concat(up, "\n"), group(0))
  pcount.attribute(store, NAMES)
  local out = { refs = refs, plans = {}, flagged = {}, texts = texts, store = store }
  for ki = 1, NRAILS do
    local list = store:of_rail(ki)
    diagnose.flag(list, opts, refs[ki])
    out.plans[ki] = diagnose.retest_plan(list, N, {}, counts[ki] or {})
    note_flagged(out, ki, list)
  end
  table.sort(out.flagged)
  return out, #store.list
end

local function same_plan(a, b)
  assert.same(a.pairs, b.pairs)
  assert.same(a.partner, b.partner)
  assert.same(a.suspects, b.suspects)
  assert.same(a.unretested, b.unretested)
  assert.same(a.flagged, b.flagged)
end

describe("the first pass reduced on the way up (ledger, pass_summary, reduction)", function()
  local l = ledgers()

  it("merges the ranks' summaries into one fabric summary whatever the tree", function()
    math.randomseed(3)
    local texts = {}
    for r = 0, N - 1 do texts[#texts + 1] = l[r]:summary():encode() end
    local flat = summary.merge_texts(texts)
    for _ = 1, 4 do assert.equal(flat, merge_as_tree(texts)) end
    local reversed = {}
    for i = #texts, 1, -1 do reversed[#reversed + 1] = texts[i] end
    assert.equal(flat, summary.merge_texts(reversed))
    -- every pair counted once: by its sender
    local s = summary.decode(flat)
    for ki = 1, NRAILS do assert.equal(N * (N - 1), s.rails[ki].measured) end
  end)

  it("flags the same pairs as the diagnosis of every pair, and plans the same retest (best: exact)", function()
    local opts = { lat_factor = 2.1, bw_fraction = 0.93, reference = "best", counter_factor = 4,
      counter_floor = 0.001 }
    local a, all = unreduced(opts)
    local b, got = reduced(opts, l)
    for ki = 1, NRAILS do
      for _, key in ipairs({ "lat_us", "write_mbs", "send_mbs" }) do
        assert.equal(a.refs[ki][key], b.refs[ki][key])
      end
      assert.same(a.refs[ki].rates.values, b.refs[ki].rates.values)
      same_plan(a.plans[ki], b.plans[ki])
    end
    assert.same(a.flagged, b.flagged)
    assert.is_true(#a.flagged > 4 * N) -- the slow node's, the link's, the lossy link's, a failure, bad data
    assert.is_true(got < all / 10, got .. " records at rank 0 against " .. all)
  end)

  it("flags the same pairs against p75, its references within the sketch's bound", function()
    local opts = { lat_factor = 2.1, bw_fraction = 0.93, reference = "p75", counter_factor = 4,
      counter_floor = 0.001 }
    local a = unreduced(opts)
    local b = reduced(opts, l)
    for ki = 1, NRAILS do
      for _, key in ipairs({ "lat_us", "write_mbs", "send_mbs" }) do
        assert.is_true(math.abs(a.refs[ki][key] - b.refs[ki][key]) <= sketch.ALPHA * a.refs[ki][key])
      end
      same_plan(a.plans[ki], b.plans[ki])
    end
    assert.same(a.flagged, b.flagged)
  end)

  it("brings a pair whose flows stand out up with its flows, its figures good, and the failing pairs with theirs",
    function()
      local opts = { lat_factor = 2.1, bw_fraction = 0.93, reference = "best", counter_factor = 4,
        counter_floor = 0.001 }
      local store = reduced(opts, l).store
      local x = assert(store:find(1, STALLED[1], STALLED[2]))
      assert.is_falsy(x.flagged)
      assert.equal(2, #x.flows)
      assert.same({ 2, 0 }, { x.flows[1].stalls, x.flows[2].stalls })
      assert.same({ STALLED[1], STALLED[2], "10.0.0." .. STALLED[1] }, { x.flows[1].a, x.flows[1].b, x.flows[1].src })
      local failed = assert(store:find(1, FAILED[1], FAILED[2]))
      assert.is_true(failed.flagged)
      assert.equal(2, #failed.flows)
      -- a clean pair of the same round stays on its ranks
      assert.is_nil(store:find(1, 0, SCHED:partners(0, 2)))
    end)

  it("keeps every line up to ALL_PAIRS_MAX ranks: the report's matrices", function()
    local text = l[3]:failing({}, {}, true)
    local n = 0
    for _ in text:gmatch("\n=3\n") do n = n + 1 end
    assert.equal(R - 1, n) -- every round but the first ("=3" opens the text), none sat out (N even)
  end)
end)
