--- fabric_matrix.lua's diagnosis: from the measured pairs to verdicts.  Pure
-- functions of the figures (the specs feed them synthetic ones).
--
--   local diagnose = require "ibverbs.bringup.matrix.diagnose"
--   local ref = diagnose.flag(pairs_list, {lat_factor = 2.1, bw_fraction = 0.93, reference = "best"})
--   local plan = diagnose.retest_plan(pairs_list, n)   -- plan.pairs: unordered {a, b} to measure again
--   local v, transient = diagnose.verdicts(retested, ref, plan, opts)
--
-- A pair (one direction) is flagged when it failed, its data check failed,
-- its latency is above lat_factor x the fabric's reference latency, a
-- bandwidth is below bw_fraction x the reference bandwidth, a physical or
-- port error counter on one of its ends' ports rose past its threshold
-- during its round (p.counter_errors: lua/ibverbs/bringup/matrix/pair_counters.lua), or a
-- transport counter's rise per packet stands out from the fabric's rate of
-- it (p.rates, ref.rates: lua/ibverbs/bringup/matrix/counter_judge.lua), whatever its figures.
-- The reference (opts.reference) is the fabric's own figures: "best" (the lowest latency,
-- the highest bandwidth: ClusterKit's rule, with 2.1 and 0.93, the defaults),
-- "median", or "pQ" (Q from 50 to 100): bandwidth against its Qth
-- percentile, latency against its (100-Q)th.  best is p100, median p50.  A
-- high quantile stays among the healthy figures when one bad node owns many
-- pairs (2 of every N ranks' pairs: half of them with 4 ranks, which moves
-- the median) and when a few pairs are noisy (which moves the best).
--
-- Flags are symptoms: every flagged pair is measured again, and every rank of
-- a flagged pair against a partner whose pair with it was not flagged (the
-- one with fewest flagged pairs); but of a rank all of whose pairs were
-- flagged (a node at fault is bad with everyone), NODE_RETEST_PAIRS (two) of
-- them alone, with the partners likeliest to pass: its other pairs, each a
-- round at the slow node's pace K times, are not measured again
-- (plan.unretested; a node verdict covers them, else they are transient when
-- it passed with another partner, or link verdicts from the first pass).  Each retest pair is measured opts.retests
-- times (K, default 1) in K passes, and judged by its best figures (the
-- lowest latency, the highest bandwidths of the K): a bad node or link is bad
-- every time, a noisy sample (a lost packet waiting out the RC ack timeout, a
-- host stalled) is rarely bad K times.  A failure or bad data in any of the K
-- counts: RC does not fail for noise.  Then:
--   a rank is cleared when none of its first-pass pairs was flagged, or one of
--     its retested pairs passed;
--   node: it is not cleared and a retested pair with a cleared rank is still bad;
--   link: both ends are cleared and their pair is still bad (or neither end
--     could be cleared: no partner to tell a node from the link);
--   a flagged pair that passes its retest was transient (no verdict).
-- The retest is judged against the first pass's reference, or against the
-- retest's own controls where they did worse: the retested pairs not
-- flagged in the first pass (each suspect with its partner), measured in the
-- same pass, at the same time.  Their reference (opts.reference over their
-- best figures, and their transport counters' rates) stands in for a metric
-- when it is the less demanding, so a load that comes with the retest slows
-- the controls too and names nothing; a fault stays bad against them.  The
-- controls can only excuse: with none, or when they did better, the first
-- pass's reference judges.
local measures = require "ibverbs.bringup.matrix.measures"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local judge = require "ibverbs.bringup.matrix.counter_judge"

local diagnose = {}

diagnose.DEFAULTS = { lat_factor = 2.1, bw_fraction = 0.93, reference = "best", retests = 1 }

diagnose.METRICS = measures.METRICS

local function measured(p) return not p.unmeasured end

--- The reference named by kind ("best", "median" or "pQ", Q from 50 to 100):
-- {q = the bandwidth's quantile (latency's is 1 - q), hi = its name for
-- bandwidth, lo = for latency}; or nil and what was expected.
function diagnose.parse_reference(kind)
  kind = kind or "best"
  if kind == "best" then return { q = 1, hi = "max", lo = "min" } end
  if kind == "median" then return { q = 0.5, hi = "median", lo = "median" } end
  local q = kind:match("^p(%d+)$") or kind:match("^p(%d+%.%d+)$")
  q = tonumber(q)
  if q and q >= 50 and q <= 100 then
    return { q = q / 100, hi = "p" .. string.format("%g", q), lo = "p" .. string.format("%g", 100 - q) }
  end
  return nil, "best, median or pQ (a percentile, Q from 50 to 100: p75, p90) expected, got '" .. kind .. "'"
end

local quantile = measures.quantile
diagnose.quantile = quantile

--- The fabric's own reference among the pairs that completed: per metric,
-- the quantile named by kind (see parse_reference; "best" when nil).
function diagnose.reference(list, kind)
  local how = assert(diagnose.parse_reference(kind))
  local ref, values = { kind = kind or "best", hi = how.hi, lo = how.lo }, {}
  for _, p in ipairs(list) do
    if measured(p) and not p.error then
      for _, m in ipairs(diagnose.METRICS) do
        local v = p[m.key]
        if type(v) == "number" and v == v then
          values[m.key] = values[m.key] or {}
          table.insert(values[m.key], v)
        end
      end
    end
  end
  for _, m in ipairs(diagnose.METRICS) do
    local l = values[m.key]
    if l then
      table.sort(l)
      ref[m.key] = quantile(l, m.higher and how.q or 1 - how.q)
    end
  end
  ref.rates = judge.reference(list, kind) -- the transport counters' rates, a packet
  return ref
end

--- Why pair p is bad against ref, or nil (a list of reasons); and the metrics at fault (key -> true).
function diagnose.why(p, ref, opts)
  local why, bad = {}, {}
  local hi, lo = ref.hi or "max", ref.lo or "min"
  if p.error then why[#why + 1] = p.error end
  if p.data_ok == false then why[#why + 1] = "data check failed" end
  if not p.error then
    for _, lim in ipairs(opts.limits or {}) do -- the absolute limits (--expect's pairs)
      local v = p[lim.key]
      if type(v) == "number" and v == v and ((lim.max and v > lim.value) or (not lim.max and v < lim.value)) then
        bad[lim.key] = true
        why[#why + 1] = string.format("%s %.2f %s expected %s", lim.name, v, lim.max and ">" or "<",
          tostring(lim.value))
      end
    end
    for _, m in ipairs(diagnose.METRICS) do
      local v, r = p[m.key], ref[m.key]
      if type(v) ~= "number" or v ~= v then
        if r then why[#why + 1] = m.name .. " missing" end
      elseif r and m.higher and v < opts.bw_fraction * r then
        bad[m.key] = true
        why[#why + 1] = string.format("%s %.2f %s < %g x %s %.2f", m.name, v, m.unit, opts.bw_fraction,
          ref.names and ref.names[m.key] or hi, r)
      elseif r and not m.higher and v > opts.lat_factor * r then
        bad[m.key] = true
        why[#why + 1] = string.format("%s %.1f %s > %g x %s %.1f", m.name, v, m.unit, opts.lat_factor,
          ref.names and ref.names[m.key] or lo, r)
      end
    end
  end
  if p.counter_errors and #p.counter_errors > 0 then -- its ends' error counters (pair_counters.lua)
    bad.counters = true
    why[#why + 1] = "error counters rose: " .. pcount.text(p.counter_errors)
  end
  local stand = judge.why(p, ref.rates, opts) -- its ends' transport counters, a packet (counter_judge.lua)
  if stand then
    bad.transport = true
    why[#why + 1] = "transport counters stand out: " .. judge.text(stand)
  end
  if #why == 0 then return nil, bad end
  return why, bad
end

--- The key of the pair of ranks a and b on rail (either order) in a set of
-- pairs the fabric explains (ibverbs.bringup.matrix.localize's res.explained): "lo-hi:rail".
function diagnose.fabric_key(a, b, rail)
  if type(a) == "number" and type(b) == "number" and b < a then a, b = b, a end
  if type(a) ~= "number" and tostring(b) < tostring(a) then a, b = b, a end
  return string.format("%s-%s:%s", tostring(a), tostring(b), tostring(rail or 1))
end

--- Flags the measured pairs (p.flagged, p.why); returns the reference used.
-- A pair of opts.explained (a set of diagnose.fabric_key's: the pairs a
-- fault inside the fabric explains) is not flagged for its figures or its
-- transport counters (p.explained: why it would have been); its ends' error
-- counters and its data check still flag it.
function diagnose.flag(list, opts, ref)
  ref = ref or diagnose.reference(list, opts.reference)
  local explained = opts.explained
  for _, p in ipairs(list) do
    if measured(p) then
      local why, bad = diagnose.why(p, ref, opts)
      p.explained = nil
      if why and explained and explained[diagnose.fabric_key(p.src, p.dst, p.rail)] and not bad.counters
        and p.data_ok ~= false then
        p.explained, why, bad = table.concat(why, "; "), nil, {}
      end
      p.flagged, p.bad = why ~= nil, bad
      p.why = why and table.concat(why, "; ") or nil
    end
  end
  return ref
end

-- The figures the best of a pair's samples keeps: the metrics and the latency's p99
-- (an absolute limit may judge it).
local BEST = { { key = "lat_p99_us", higher = false } }
for _, m in ipairs(diagnose.METRICS) do BEST[#BEST + 1] = m end

--- One record of the samples of one direction of a pair (the retests): the
-- best of each figure (lowest latency, highest bandwidths), an error or bad
-- data if any sample had one, unmeasured if any was, samples = their number,
-- the error counters that rose past their thresholds in every sample, and
-- the transport counters' rates every sample had, each at its lowest.
function diagnose.best_of(samples)
  local b = { src = samples[1].src, dst = samples[1].dst, rail = samples[1].rail, samples = #samples }
  for _, p in ipairs(samples) do
    if p.unmeasured then b.unmeasured = b.unmeasured or p.unmeasured end
    if p.error then b.error = b.error or p.error end
    if p.data_ok == false then b.data_ok = false elseif p.data_ok and b.data_ok == nil then b.data_ok = true end
    for _, m in ipairs(BEST) do
      local v = p[m.key]
      if type(v) == "number" and v == v then
        local was = b[m.key]
        if was == nil or (m.higher and v > was) or (not m.higher and v < was) then b[m.key] = v end
      end
    end
  end
  b.counter_errors = pcount.common(samples)
  b.rates, b.counted = judge.common(samples)
  return b
end

local function key(a, b) return math.min(a, b) .. "-" .. math.max(a, b) end

--- The most flagged pairs of one rank retested when every one of its
-- first-pass pairs was flagged: a node at fault is bad with every partner,
-- so two partners that pass elsewhere tell it from its links (one could be
-- at fault itself), and its other pairs (N-1 of them, each a round of the
-- slow node's pace, K times) are not measured again.
diagnose.NODE_RETEST_PAIRS = 2

-- The flagged pairs to leave out of the retest (key -> the rank whose
-- retests are bounded): of every suspect all of whose pairs were flagged and
-- that has more than NODE_RETEST_PAIRS of them, all but those with the
-- partners likeliest to pass (the fewest flagged pairs, then the lowest rank).
local function bounded(bad_pairs, score, excluded)
  local of = {}
  for _, p in ipairs(bad_pairs) do
    for i = 1, 2 do
      local r = p[i]
      of[r] = of[r] or {}
      table.insert(of[r], p[3 - i])
    end
  end
  local drop = {}
  for r, partners in pairs(of) do
    if score[r] == 1 and #partners > diagnose.NODE_RETEST_PAIRS and not excluded[r] then
      table.sort(partners, function(a, b)
        local sa, sb = score[a] or 1, score[b] or 1
        return sa < sb or (sa == sb and a < b)
      end)
      for i = diagnose.NODE_RETEST_PAIRS + 1, #partners do drop[key(r, partners[i])] = r end
    end
  end
  return drop
end

-- Each suspect's partner: among the candidates (ranks in order) whose pair
-- with it was not flagged, one with the fewest flagged pairs (the lowest
-- score), the turn-th of those equals (modulo their number: the retests
-- spread).  Returns pick(x, turn) -> the partner or nil.  The candidates
-- are grouped by score once, so a pick costs the suspect's flagged partners
-- per group it looks in, not every candidate.
local function partner_picker(candidates, score, bad_pairs)
  local scores, group, pos = {}, {}, {}
  for _, y in ipairs(candidates) do
    local sc = score[y]
    if not group[sc] then group[sc] = {}; scores[#scores + 1] = sc end
    local g = group[sc]
    g[#g + 1] = y
    pos[y] = #g
  end
  table.sort(scores)
  local flagged = {} -- rank -> its partners in flagged pairs
  for _, p in ipairs(bad_pairs) do
    for i = 1, 2 do
      flagged[p[i]] = flagged[p[i]] or {}
      table.insert(flagged[p[i]], p[3 - i])
    end
  end
  return function(x, turn)
    for _, sc in ipairs(scores) do
      local g, skip = group[sc], {}
      if pos[x] and score[x] == sc then skip[1] = pos[x] end
      for _, y in ipairs(flagged[x] or {}) do
        if pos[y] and score[y] == sc then skip[#skip + 1] = pos[y] end
      end
      if #g > #skip then
        table.sort(skip)
        local i = turn % (#g - #skip) + 1
        for _, at in ipairs(skip) do if at <= i then i = i + 1 end end
        return g[i]
      end
    end
  end
end

--- What to measure again: plan.pairs (unordered {a, b}), plan.good (rank ->
-- true: none of its pairs flagged), plan.partner (suspect rank -> the rank it
-- is retested with), plan.suspects (sorted ranks with a flagged pair),
-- plan.flagged (the flagged pairs, unordered), plan.score (rank -> the share
-- of its pairs flagged), plan.unretested ("a-b" -> the rank whose retests
-- were bounded: a flagged pair left out because every pair of that rank was
-- flagged and NODE_RETEST_PAIRS of them tell a node from a link), plan.why
-- ("a-b" -> {src, dst, why}: the first pass's why of one of its directions), plan.worst ("a-b" -> the
-- flagged pair's worst latency and bandwidths of the first pass, either direction).  excluded: ranks not to use
-- (dead, faulty).  counts (rank -> the partners it measured a pair with), when list holds only the
-- failing pairs (a reduced pass: ibverbs.bringup.matrix.reduction): the share of a rank's pairs flagged is taken
-- over its count, and a rank without one measured some pairs, none flagged.
function diagnose.retest_plan(list, n, excluded, counts)
  excluded = excluded or {}
  local bad_pairs, seen, with, flagged_with, whys, worst = {}, {}, {}, {}, {}, {}
  for _, p in ipairs(list) do
    if measured(p) then
      local k = key(p.src, p.dst)
      if p.flagged then -- the pair's worst figures, either direction
        local w = worst[k] or {}
        worst[k] = w
        if p.lat_us then w.lat_us = math.max(w.lat_us or 0, p.lat_us) end
        if p.write_mbs then w.write_mbs = math.min(w.write_mbs or math.huge, p.write_mbs) end
        if p.send_mbs then w.send_mbs = math.min(w.send_mbs or math.huge, p.send_mbs) end
      end
      for _, r in ipairs({ p.src, p.dst }) do
        with[r] = with[r] or {}
        with[r][k] = true
      end
      if p.flagged and not seen[k] then
        seen[k] = true
        whys[k] = { p.src, p.dst, p.why }
        bad_pairs[#bad_pairs + 1] = { math.min(p.src, p.dst), math.max(p.src, p.dst) }
        for _, r in ipairs({ p.src, p.dst }) do
          flagged_with[r] = flagged_with[r] or {}
          flagged_with[r][k] = true
        end
      end
    end
  end
  local plan = { pairs = {}, good = {}, partner = {}, suspects = {}, flagged = bad_pairs, score = {}, why = whys,
    unretested = {}, worst = worst }
  local function count(t) local c = 0; for _ in pairs(t or {}) do c = c + 1 end; return c end
  local candidates = {}
  for r = 0, n - 1 do
    local total = with[r] and count(with[r]) or 0
    if counts then total = counts[r] or math.max(total, 1) end
    if not excluded[r] and total > 0 then
      plan.score[r] = count(flagged_with[r]) / total
      candidates[#candidates + 1] = r
      if plan.score[r] == 0 then plan.good[r] = true end
    end
  end
  if #bad_pairs == 0 then return plan end
  local added = {}
  local function add(a, b)
    local k = key(a, b)
    if added[k] then return end
    added[k] = true
    plan.pairs[#plan.pairs + 1] = { math.min(a, b), math.max(a, b) }
  end
  plan.unretested = {} -- key -> the rank whose retests were bounded (diagnose.NODE_RETEST_PAIRS)
  for k, r in pairs(bounded(bad_pairs, plan.score, excluded)) do plan.unretested[k] = r end
  for _, p in ipairs(bad_pairs) do
    if not plan.unretested[key(p[1], p[2])] then add(p[1], p[2]) end
  end
  local suspects = {}
  for r in pairs(flagged_with) do suspects[#suspects + 1] = r end
  table.sort(suspects)
  plan.suspects = suspects
  local pick = partner_picker(candidates, plan.score, bad_pairs)
  local turn = 0
  for _, x in ipairs(suspects) do
    if not excluded[x] then
      local g = pick(x, turn)
      if g then
        turn = turn + 1
        plan.partner[x] = g
        add(x, g)
      end
    end
  end
  return plan
end

-- The retest records by direction: "src>dst" -> its samples, and the directions in order.
local function by_direction(retested)
  local samples, order = {}, {}
  for _, p in ipairs(retested or {}) do
    local d = p.src .. ">" .. p.dst
    if not samples[d] then samples[d] = {}; order[#order + 1] = d end
    table.insert(samples[d], p)
  end
  return samples, order
end

--- The reference a retest is judged by: per metric, the first pass's (ref)
-- or the controls' (the retested pairs not flagged in the first pass, each
-- direction by its best figures, opts.reference over them), whichever is the
-- less demanding (the lower bandwidth, the higher latency, the higher
-- transport counter rate: counter_judge.merge).  A metric taken
-- from the controls is named "the retest's controls' <kind>" (ref.names).
-- Returns the reference and the number of control directions.
function diagnose.retest_reference(retested, ref, plan, opts)
  local flagged = {}
  for _, pr in ipairs(plan.flagged) do flagged[key(pr[1], pr[2])] = true end
  local samples, order = by_direction(retested)
  local controls = {}
  for _, d in ipairs(order) do
    local b = diagnose.best_of(samples[d])
    if not flagged[key(b.src, b.dst)] and not b.unmeasured and not b.error then controls[#controls + 1] = b end
  end
  if #controls == 0 then return ref, 0 end
  local c = diagnose.reference(controls, opts.reference)
  local out = { kind = ref.kind, hi = ref.hi, lo = ref.lo, names = {},
    rates = ref.rates and judge.merge(ref.rates, c.rates) }
  for _, m in ipairs(diagnose.METRICS) do
    local r, cr = ref[m.key], c[m.key]
    out[m.key] = r
    if r and cr and ((m.higher and cr < r) or (not m.higher and cr > r)) then
      out[m.key] = cr
      out.names[m.key] = "the retest's controls' " .. (m.higher and c.hi or c.lo)
    end
  end
  return out, #controls
end

-- The retested pairs judged: "a-b" -> the best-of records of that pair (both
-- directions), each with its why (nil when it passed).
local function judge_again(retested, ref, opts)
  for _, p in ipairs(retested or {}) do
    local why = measured(p) and diagnose.why(p, ref, opts)
    p.flagged = why and true or false
    p.why = why and table.concat(why, "; ") or nil
  end
  local samples, order = by_direction(retested)
  local again = {}
  for _, d in ipairs(order) do
    local b = diagnose.best_of(samples[d])
    local why = not b.unmeasured and diagnose.why(b, ref, opts)
    b.why = why and table.concat(why, "; ") or nil
    local k = key(b.src, b.dst)
    again[k] = again[k] or {}
    table.insert(again[k], b)
  end
  return again
end

-- The node verdicts: a suspect not cleared whose retest with a cleared rank is still bad.
local function node_verdicts(plan, cleared_by, still_bad, names, verdicts)
  local bad_node = {}
  for _, x in ipairs(plan.suspects) do
    if not cleared_by[x] then
      local nflag = 0
      for _, pr in ipairs(plan.flagged) do if pr[1] == x or pr[2] == x then nflag = nflag + 1 end end
      -- the partner first, then the other retested pairs of x
      local tries = { plan.partner[x] }
      for _, pr in ipairs(plan.pairs) do
        if pr[1] == x then tries[#tries + 1] = pr[2] elseif pr[2] == x then tries[#tries + 1] = pr[1] end
      end
      for _, g in ipairs(tries) do
        local bad = cleared_by[g] and still_bad(x, g)
        if bad then
          bad_node[x] = true
          local by = cleared_by[g]
          local passed = by == "first" and "all its pairs in the first pass" or "with " .. names(by)
          verdicts[#verdicts + 1] = { kind = "node", ranks = { x },
            why = string.format("still bad against %s, which passed %s: %s (%d of its pairs flagged in the first "
              .. "pass)", names(g), passed, bad, nflag) }
          break
        end
      end
    end
  end
  return bad_node
end

-- Whether the unretested pair k of rank x was, in the first pass, worse by
-- the thresholds than every flagged pair of x that was retested (what
-- passed then was not what made k bad): its text, or nil.
local function worse_than_retested(plan, k, x, opts)
  local w = plan.worst and plan.worst[k]
  if not w then return nil end
  local lat, write, send -- the retested pairs' worst: the highest latency, the lowest bandwidths
  for _, pr in ipairs(plan.pairs) do
    local o = (pr[1] == x or pr[2] == x) and plan.worst[key(pr[1], pr[2])]
    if o then
      lat = o.lat_us and math.max(lat or 0, o.lat_us) or lat
      write = o.write_mbs and math.min(write or math.huge, o.write_mbs) or write
      send = o.send_mbs and math.min(send or math.huge, o.send_mbs) or send
    end
  end
  if w.lat_us and lat and w.lat_us > opts.lat_factor * lat then
    return string.format("latency %.1f us > %g x %.1f", w.lat_us, opts.lat_factor, lat)
  end
  for _, m in ipairs({ { "write_mbs", write, "RDMA write" }, { "send_mbs", send, "send" } }) do
    if w[m[1]] and m[2] and w[m[1]] < opts.bw_fraction * m[2] then
      return string.format("%s bandwidth %.2f MB/s < %g x %.2f", m[3], w[m[1]], opts.bw_fraction, m[2])
    end
  end
  return nil
end

-- A flagged pair left out of the retest (plan.unretested) whose bounded
-- rank x has no node verdict: transient when x passed with another partner
-- (its first pass was slow with everyone: a stall) and the pair was no
-- worse than x's retested ones; a link verdict when it was far worse than
-- those (the stall does not explain it), or when nothing passed to tell a
-- node from the link (from the first pass alone).
local function unretested(plan, a, b, cleared_by, names, verdicts, transient, opts)
  local k = key(a, b)
  local x = plan.unretested[k]
  local y = x == a and b or a
  local worse = cleared_by[x] and worse_than_retested(plan, k, x, opts)
  if worse then
    verdicts[#verdicts + 1] = { kind = "link", ranks = { a, b },
      why = string.format("not retested (every pair of %s was flagged: %d of them retested, and %s passed with %s), "
        .. "but in the first pass far worse than those: %s", names(x), diagnose.NODE_RETEST_PAIRS, names(x),
        names(cleared_by[x] == "first" and y or cleared_by[x]), worse) }
    return
  end
  if cleared_by[x] then
    transient[#transient + 1] = { a, b, note = string.format("not retested: %s passed with %s, after every pair of "
      .. "it was flagged in the first pass", names(x), names(cleared_by[x] == "first" and y or cleared_by[x])) }
    return
  end
  local w = plan.why and plan.why[k]
  verdicts[#verdicts + 1] = { kind = "link", ranks = { a, b },
    why = string.format("not retested (every pair of %s was flagged: %d of them retested), and no partner that "
      .. "passed to tell a node from the link: first pass: %s%s", names(x), diagnose.NODE_RETEST_PAIRS,
      w and (names(w[1]) .. " -> " .. names(w[2]) .. ": ") or "", w and tostring(w[3]) or "flagged") }
end

--- The verdicts from the retest pass (retested: pair records like the first
-- pass's, opts.retests of each direction of each retested pair, any order)
-- and the plan made from the first; judged by diagnose.retest_reference.
-- names(r) gives "rank 3 (node4)".  Returns verdicts ({kind =, ranks =,
-- why =}), the transient pairs and the reference the retest was judged by.
function diagnose.verdicts(retested, ref, plan, opts, names)
  names = names or function(r) return "rank " .. r end
  ref = diagnose.retest_reference(retested, ref, plan, opts)
  local again = judge_again(retested, ref, opts)
  -- nil: not retested or not measured; false: passed; else why it is still bad
  -- (both directions of a pair share their rounds, so their ends' counters: said once)
  local function still_bad(a, b)
    local recs = again[key(a, b)]
    if not recs then return nil end
    local why, said = {}, {}
    for _, p in ipairs(recs) do
      if p.unmeasured then return nil end
      if p.why then
        local w = p.why
        local stand = judge.why(p, ref.rates, opts)
        for _, x in ipairs({ { p.counter_errors and "error counters rose: " .. pcount.text(p.counter_errors),
          "the same error counters" }, { stand and "transport counters stand out: " .. judge.text(stand),
          "the same transport counters" } }) do
          local at = x[1] and w:find(x[1], 1, true)
          if at and said[x[1]] then
            w = w:sub(1, at - 1) .. x[2] .. w:sub(at + #x[1])
          elseif at then
            said[x[1]] = true
          end
        end
        why[#why + 1] = string.format("%s -> %s: %s%s", names(p.src), names(p.dst), w,
          p.samples > 1 and string.format(" (best of %d)", p.samples) or "")
      end
    end
    return #why > 0 and table.concat(why, "; ") or false
  end
  -- what clears a rank: no flagged pair in the first pass, or a retested pair that passed
  local cleared_by = {}
  for r in pairs(plan.good) do cleared_by[r] = "first" end
  for _, pr in ipairs(plan.pairs) do
    if still_bad(pr[1], pr[2]) == false then
      for i = 1, 2 do cleared_by[pr[i]] = cleared_by[pr[i]] or pr[3 - i] end
    end
  end
  local verdicts, transient = {}, {}
  local bad_node = node_verdicts(plan, cleared_by, still_bad, names, verdicts)
  for _, pr in ipairs(plan.flagged) do
    local a, b = pr[1], pr[2]
    if not bad_node[a] and not bad_node[b] then
      local bad = still_bad(a, b)
      if plan.unretested and plan.unretested[key(a, b)] then
        unretested(plan, a, b, cleared_by, names, verdicts, transient, opts)
      elseif bad and cleared_by[a] and cleared_by[b] then
        verdicts[#verdicts + 1] = { kind = "link", ranks = { a, b },
          why = string.format("both pass with other partners; between them still bad: %s", bad) }
      elseif bad then
        verdicts[#verdicts + 1] = { kind = "link", ranks = { a, b },
          why = string.format("still bad, and no partner that passed to tell a node from the link: %s", bad) }
      elseif bad == false then
        transient[#transient + 1] = { a, b }
      end
    end
  end
  return verdicts, transient, ref
end

return diagnose
