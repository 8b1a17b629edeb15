--- fabric_matrix.lua's diagnosis: from the measured pairs to verdicts.  Pure
-- functions of the figures (the specs feed them synthetic ones).
--
--   local diagnose = require "diagnose"
--   local ref = diagnose.flag(pairs_list, {lat_factor = 2.1, bw_fraction = 0.93})
--   local plan = diagnose.retest_plan(pairs_list, n)   -- plan.pairs: unordered {a, b} to measure again
--   local v = diagnose.verdicts(pairs_list, retested, ref, plan, opts)
--
-- A pair (one direction) is flagged when it failed, its data check failed,
-- its latency is above lat_factor x the fabric's lowest, or a bandwidth is
-- below bw_fraction x the fabric's highest (ClusterKit's rule: 2.1 and 0.93
-- by default).  Flags are symptoms: every rank of a flagged pair is measured
-- again against a partner that passed ("good": no flagged pair in the first
-- pass), and the flagged pair itself again, alone in its round.  Then:
--   node: its pairs against good partners are still bad;
--   link: both ends are fine with good partners and their pair is still bad;
--   a flagged pair that passes its retest was transient (no verdict).
local diagnose = {}

diagnose.DEFAULTS = { lat_factor = 2.1, bw_fraction = 0.93 }

diagnose.METRICS = {
  { key = "lat_us", title = "latency", unit = "us", higher = false },
  { key = "write_mbs", title = "RDMA write bandwidth", unit = "MB/s", higher = true },
  { key = "send_mbs", title = "send bandwidth", unit = "MB/s", higher = true },
}

local function measured(p) return not p.unmeasured end

--- The fabric's own reference among the pairs that completed: the lowest
-- latency and the highest bandwidths (kind "best", ClusterKit's), or the
-- medians (kind "median": for fabrics whose healthy pairs vary a lot).
function diagnose.reference(list, kind)
  local ref, values = { kind = kind or "best" }, {}
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
      if ref.kind == "median" then
        ref[m.key] = (l[math.floor((#l + 1) / 2)] + l[math.ceil((#l + 1) / 2)]) / 2
      else
        ref[m.key] = m.higher and l[#l] or l[1]
      end
    end
  end
  return ref
end

--- Why pair p is bad against ref, or nil (a list of reasons); and the metrics at fault (key -> true).
function diagnose.why(p, ref, opts)
  local why, bad = {}, {}
  local hi, lo = ref.kind == "median" and "median" or "max", ref.kind == "median" and "median" or "min"
  if p.error then why[#why + 1] = p.error end
  if p.data_ok == false then why[#why + 1] = "data check failed" end
  if not p.error then
    for _, m in ipairs(diagnose.METRICS) do
      local v, r = p[m.key], ref[m.key]
      if type(v) ~= "number" or v ~= v then
        if r then why[#why + 1] = m.title .. " missing" end
      elseif r and m.higher and v < opts.bw_fraction * r then
        bad[m.key] = true
        why[#why + 1] = string.format("%s %.2f %s < %g x %s %.2f", m.title, v, m.unit, opts.bw_fraction, hi, r)
      elseif r and not m.higher and v > opts.lat_factor * r then
        bad[m.key] = true
        why[#why + 1] = string.format("%s %.1f %s > %g x %s %.1f", m.title, v, m.unit, opts.lat_factor, lo, r)
      end
    end
  end
  if #why == 0 then return nil, bad end
  return why, bad
end

--- Flags the measured pairs (p.flagged, p.why); returns the reference used.
function diagnose.flag(list, opts, ref)
  ref = ref or diagnose.reference(list, opts.reference)
  for _, p in ipairs(list) do
    if measured(p) then
      local why, bad = diagnose.why(p, ref, opts)
      p.flagged, p.bad = why ~= nil, bad
      p.why = why and table.concat(why, "; ") or nil
    end
  end
  return ref
end

local function key(a, b) return math.min(a, b) .. "-" .. math.max(a, b) end

--- What to measure again: plan.pairs (unordered {a, b}), plan.good (rank ->
-- true), plan.partner (suspect rank -> the good rank it is retested with),
-- plan.suspects (sorted ranks).  excluded: ranks not to use (dead, faulty).
function diagnose.retest_plan(list, n, excluded)
  excluded = excluded or {}
  local bad_pairs, seen, with, flagged_with = {}, {}, {}, {}
  for _, p in ipairs(list) do
    if measured(p) then
      local k = key(p.src, p.dst)
      for _, r in ipairs({ p.src, p.dst }) do
        with[r] = with[r] or {}
        with[r][k] = true
      end
      if p.flagged and not seen[k] then
        seen[k] = true
        bad_pairs[#bad_pairs + 1] = { math.min(p.src, p.dst), math.max(p.src, p.dst) }
        for _, r in ipairs({ p.src, p.dst }) do
          flagged_with[r] = flagged_with[r] or {}
          flagged_with[r][k] = true
        end
      end
    end
  end
  local plan = { pairs = {}, good = {}, partner = {}, suspects = {}, flagged = bad_pairs, score = {} }
  if #bad_pairs == 0 then return plan end
  local function count(t) local c = 0; for _ in pairs(t or {}) do c = c + 1 end; return c end
  local candidates = {}
  for r = 0, n - 1 do
    if not excluded[r] and with[r] then
      plan.score[r] = count(flagged_with[r]) / count(with[r])
      candidates[#candidates + 1] = r
      if plan.score[r] == 0 then plan.good[r] = true end
    end
  end
  if next(plan.good) == nil then -- nobody clean: those with most of their pairs good are the reference
    for _, r in ipairs(candidates) do
      if plan.score[r] < 0.5 then plan.good[r] = true end
    end
  end
  local good = {}
  for r = 0, n - 1 do if plan.good[r] then good[#good + 1] = r end end
  local added = {}
  local function add(a, b)
    local k = key(a, b)
    if added[k] then return end
    added[k] = true
    plan.pairs[#plan.pairs + 1] = { math.min(a, b), math.max(a, b) }
  end
  for _, p in ipairs(bad_pairs) do add(p[1], p[2]) end
  local suspects = {}
  for r in pairs(flagged_with) do suspects[#suspects + 1] = r end
  table.sort(suspects)
  plan.suspects = suspects
  local turn = 0
  for _, x in ipairs(suspects) do
    if not plan.good[x] or #good > 1 then
      for i = 1, #good do -- the next good rank that is not x (turns, to spread the retests)
        local g = good[(turn + i - 1) % #good + 1]
        if g ~= x then
          plan.partner[x] = g
          turn = turn + i
          add(x, g)
          break
        end
      end
    end
  end
  return plan
end

--- The verdicts from the retest pass (retested: pair records like the first
-- pass's) and the plan made from the first.  names(r) gives "rank 3 (node4)".
-- Returns verdicts ({kind =, ranks =, why =}) and the transient pairs.
function diagnose.verdicts(retested, ref, plan, opts, names)
  names = names or function(r) return "rank " .. r end
  local again = {} -- "a-b" -> the retest records of that pair (both directions)
  for _, p in ipairs(retested or {}) do
    local k = key(p.src, p.dst)
    again[k] = again[k] or {}
    table.insert(again[k], p)
    local why = measured(p) and diagnose.why(p, ref, opts)
    p.flagged = why and true or false
    p.why = why and table.concat(why, "; ") or nil
  end
  local function still_bad(a, b)
    local recs = again[key(a, b)]
    if not recs then return nil end
    local why = {}
    for _, p in ipairs(recs) do
      if p.unmeasured then return nil end
      if p.flagged then
        why[#why + 1] = string.format("%s -> %s: %s", names(p.src), names(p.dst), p.why)
      end
    end
    return #why > 0 and table.concat(why, "; ") or false
  end
  local verdicts, transient, bad_node = {}, {}, {}
  for _, x in ipairs(plan.suspects) do
    local g = plan.partner[x]
    local nflag = 0
    for _, pr in ipairs(plan.flagged) do if pr[1] == x or pr[2] == x then nflag = nflag + 1 end end
    local share = string.format("%d of its pairs flagged in the first pass", nflag)
    if g then
      local bad = still_bad(x, g)
      if bad then
        bad_node[x] = true
        verdicts[#verdicts + 1] = { kind = "node", ranks = { x },
          why = string.format("still bad against %s, which passed: %s (%s)", names(g), bad, share) }
      end
    elseif (plan.score[x] or 0) > 0.5 then
      bad_node[x] = true
      verdicts[#verdicts + 1] = { kind = "node", ranks = { x },
        why = string.format("%s, and no partner that passed to retest it against", share) }
    end
  end
  for _, pr in ipairs(plan.flagged) do
    local a, b = pr[1], pr[2]
    if not bad_node[a] and not bad_node[b] then
      local bad = still_bad(a, b)
      local cleared = function(x) return plan.partner[x] ~= nil or plan.good[x] end
      if bad and cleared(a) and cleared(b) then
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
  return verdicts, transient
end

return diagnose
