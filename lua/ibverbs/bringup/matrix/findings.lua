--- Rank 0's side of fabric_matrix.lua's diagnosis, between the stored pairs
-- (lua/ibverbs/bringup/matrix/results.lua) and the judgement (lua/ibverbs/bringup/matrix/diagnose.lua):
-- the first pass made whole (a record for every scheduled pair), the retest's
-- rounds, and the verdicts of every rail with the ranks out of the run, the
-- nodes that could not take part and the ports whose counters cannot be
-- judged (a kind of its own, "counters"), and the report's notes on the
-- transport counters (load or congestion on every pair, rates unknown).
--
--   local findings = require "ibverbs.bringup.matrix.findings"
--   findings.complete(store, sched, R1, f)
--   local rt = findings.retest(store, f, fault, opts, width)     -- rt.rounds, rt.per_sample
--   local verdicts, transient, bad, notes = findings.verdicts(f, fault, rail_names, first, retested, rt, opts,
--     mismatch)
--   local res = findings.fabric(store, opts)  -- the fabric's localization of the first pass's flows, or nil
--
-- The first pass's flows (one QP's traffic of a pair and rail each, with its
-- path when known: ibverbs.bringup.matrix.localize's records) are store.flows,
-- else opts.flows; with none, the pairs alone are judged, as before.  With
-- them, the faults inside the fabric are localized first (opts.topology:
-- ibverbs.bringup.topology's, or nil): the pairs they explain are not
-- flagged (diagnose.flag's opts.explained), so neither retested nor blamed,
-- and their `fabric` verdicts come last, naming no rank.
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local localize = require "ibverbs.bringup.matrix.localize"
local schedule = require "ibverbs.bringup.matrix.schedule"
local judge = require "ibverbs.bringup.matrix.counter_judge"

local findings = {}

--- Every scheduled pair of rounds 0 .. nrounds-1 gets a record: those nobody
-- reported belong to a rank that is gone.  A pair a rank that died did not
-- finish is unmeasured, whatever the survivor saw (what it finished stays).
function findings.complete(store, sched, nrounds, f)
  for k = 0, nrounds - 1 do
    for r = 0, f.size - 1 do
      local dst = sched:partners(r, k)
      for ki = 1, dst and store.nrails or 0 do findings.complete_pair(store, ki, r, dst, k, f) end
    end
  end
  for _, x in ipairs(store.list) do findings.complete_ends(x, f) end
end

--- The record of the pair src -> dst scheduled in round k on rail ki, made
-- when no end reported it: unmeasured, its dead end named ("not reported" when both live).
function findings.complete_pair(store, ki, src, dst, k, f)
  local x = store:rec(ki, src, dst)
  x.round = x.round or k
  x.pass = x.pass or "first"
  if x.lat_us == nil and x.unmeasured == nil and x.error == nil and not x.dry then
    x.unmeasured = not f:alive(src) and (f:name(src) .. " unreachable") or
      not f:alive(dst) and (f:name(dst) .. " unreachable") or "not reported"
  end
  return x
end

--- A record with a dead end that failed or has no figures: unmeasured, the dead end named.
function findings.complete_ends(x, f)
  for _, r in ipairs({ x.src, x.dst }) do
    if not x.unmeasured and not f:alive(r) and (x.error or x.lat_us == nil) then
      x.unmeasured = f:name(r) .. " unreachable" .. (x.error and (" (" .. x.error .. ")") or "")
    end
  end
end

--- The fabric's localization of store's flows (store.flows, else
-- opts.flows: see above), made once and kept as store.fabric; nil when
-- there are no flows (or on a dry run).
function findings.fabric(store, opts)
  if store.fabric ~= nil then return store.fabric or nil end
  local flows = store.flows or opts.flows
  if opts.dry_run or not flows or #flows == 0 then
    store.fabric = false
    return nil
  end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.explained, o.flows = nil, nil
  store.fabric = localize.run(flows, o)
  return store.fabric
end

-- opts with the pairs the fabric explains (diagnose.flag's opts.explained), or opts itself.
local function judged(store, opts)
  local res = findings.fabric(store, opts)
  if not res then return opts end
  local o = {}
  for k, v in pairs(opts) do o[k] = v end
  o.explained = res.explained
  return o
end

--- The retest of the flagged pairs of store (the first pass): per rail the
-- reference (store.refs[rail]: the summary's, ibverbs.bringup.matrix.reduction; else
-- from its pairs) and the plan (refs, plans; store.counts: the ranks' counts
-- of partners, when only the failing pairs reached rank 0), the union of their pairs in rounds of
-- at most width disjoint pairs, opts.retests times over (per_sample rounds
-- each, so a pair's samples lie apart in time), as a schedule.
function findings.retest(store, f, fault, opts, width)
  opts = judged(store, opts)
  local n = f.size
  local union, seen, refs, plans = {}, {}, {}, {}
  for ki = 1, store.nrails do
    local l = store:of_rail(ki)
    refs[ki] = diagnose.flag(l, opts, store.refs and store.refs[ki])
    local ex = {}
    for r = 0, n - 1 do
      if not f:alive(r) or (fault[r] and fault[r][ki]) then ex[r] = true end
    end
    plans[ki] = diagnose.retest_plan(l, n, ex, store.counts and (store.counts[ki] or {}))
    for _, p in ipairs(plans[ki].pairs) do
      local key = p[1] .. "-" .. p[2]
      if not seen[key] then seen[key] = true; union[#union + 1] = p end
    end
  end
  local rounds = schedule.disjoint_rounds(union, width)
  local per_sample = #rounds
  for _ = 2, opts.retests do
    for i = 1, per_sample do rounds[#rounds + 1] = rounds[i] end
  end
  return { refs = refs, plans = plans, per_sample = per_sample, sched = schedule.explicit("retest", n, rounds),
    rounds = #rounds }
end

local function rail_name(rail_names, r, ki) return rail_names[r + 1] and rail_names[r + 1][ki] or ("rail " .. ki) end

local function hosts_of(f, ranks)
  local h = {}
  for i, r in ipairs(ranks) do h[i] = f.hosts[r + 1] or ("rank " .. r) end
  return h
end

-- The ranks at fault, sorted: every rank a verdict names, and both ends of a
-- flagged pair left unjudged (flagged: {a, b}) neither of whose ends a verdict names.
local function at_fault(verdicts, flagged)
  local named, bad = {}, {}
  for _, v in ipairs(verdicts) do
    for _, r in ipairs(v.ranks) do named[r] = true end
  end
  for _, p in ipairs(flagged) do
    if not named[p[1]] and not named[p[2]] then bad[p[1]], bad[p[2]] = true, true end
  end
  for r in pairs(named) do bad[r] = true end
  local list = {}
  for r in pairs(bad) do list[#list + 1] = r end
  table.sort(list)
  return list
end

--- The flap verdicts of the stores' flaps (each store's .flaps, results.lua):
-- one a rank and rail, naming its port, what changed and when, in the order
-- seen ("rxe0:1: state active -> down; link_downed +1 (after round 2 of the
-- first pass, 2026-11-27T15:40:02Z); then ...").
function findings.flap_verdicts(f, rail_names, stores)
  local out, of = {}, {}
  for _, store in ipairs(stores) do -- (first, then the retest's when there was one)
    for _, x in ipairs(store.flaps or {}) do
      local key = x.rank .. ":" .. x.rail
      local name = rail_name(rail_names, x.rank, x.rail)
      local seen = string.format("%s (after round %d of the %s pass, %s)", x.what, x.round or -1, x.pass, x.at)
      if of[key] then
        of[key].why = of[key].why .. "; then " .. seen
      else
        of[key] = { kind = "flap", ranks = { x.rank }, hosts = hosts_of(f, { x.rank }), rail = name,
          why = name .. ": " .. seen }
        out[#out + 1] = of[key]
      end
    end
  end
  return out
end

--- The counter verdicts of the stores' counters (each store's .counters,
-- results.lua): one a rank and rail whose port's counters could not be
-- judged: a judged counter saturated, a counter file that could not be read
-- (pair_counters' faults, sent with "!"); each named once with its why, in
-- the order seen, and how many rounds showed them ("rxe0:1: the port's
-- counters cannot be judged: symbol_error: saturated at 65535 (16 bits): its
-- rise cannot be seen; reset it: perfquery -R 3 1 (3 rounds)").  The kind is "counters": the rank's node exits 1 and is
-- drained as for a node verdict.
function findings.counter_verdicts(f, rail_names, stores)
  local out, of = {}, {}
  for _, store in ipairs(stores) do
    for _, c in ipairs(store.counters or {}) do
      for _, x in ipairs(c.faults or {}) do
        local k = c.rank .. ":" .. c.rail
        local v = of[k]
        if not v then
          v = { kind = "counters", ranks = { c.rank }, hosts = hosts_of(f, { c.rank }),
            rail = rail_name(rail_names, c.rank, c.rail), seen = {}, order = {}, rounds = {} }
          of[k] = v
          out[#out + 1] = v
        end
        if not v.seen[x.name] then
          v.seen[x.name] = x.why
          v.order[#v.order + 1] = x.name
        end
        v.rounds[c.pass .. " " .. c.round] = true
      end
    end
  end
  for _, v in ipairs(out) do
    local words, n = {}, 0
    for _, name in ipairs(v.order) do words[#words + 1] = name .. ": " .. v.seen[name] end
    for _ in pairs(v.rounds) do n = n + 1 end
    v.why = string.format("%s: the port's counters cannot be judged: %s (%d round%s)", v.rail,
      table.concat(words, "; "), n, n == 1 and "" or "s")
    v.seen, v.order, v.rounds = nil, nil, nil
  end
  return out
end

-- The report's notes on the transport counters of one rail: a reference
-- whose rates are high on every pair (load or congestion: counter_judge's
-- load_note), for the first pass (ref) and the retest (rref), and the ends
-- whose packets were unknown (their transport counters not judged).
local function counter_notes(notes, f, name, l, ref, rref, opts)
  local retest -- the retest's rates that its controls set (the others are the first pass's, said already)
  if rref and rref.rates then
    retest = { values = {}, lo = rref.rates.lo, names = rref.rates.names }
    for k in pairs(rref.rates.names or {}) do retest.values[k] = rref.rates.values[k] end
  end
  for _, x in ipairs({ { ref and ref.rates, "first pass" }, { retest, "retest" } }) do
    local line = x[1] and judge.load_note(x[1], opts, opts.judged, name .. ", " .. x[2])
    if line then notes[#notes + 1] = line end
  end
  local unknown, seen = {}, {}
  for _, p in ipairs(l) do
    for _, e in ipairs(p.rates_unknown or {}) do
      if not seen[e.rank] then seen[e.rank] = true; unknown[#unknown + 1] = f:name(e.rank) end
    end
  end
  if #unknown > 0 then
    notes[#notes + 1] = string.format("counters: transport not judged on %s (%s): the port's packet counts are "
      .. "unknown (saturated, or not counted), so no rate", table.concat(unknown, ", "), name)
  end
end

--- The verdicts: the ranks out of the run, the nodes with a local fault, the
-- nodes that differ from --expect (mismatch: a list of {rank, rail name,
-- why}, or nil), the ports that flapped (findings.flap_verdicts), the ports
-- whose counters cannot be judged (findings.counter_verdicts), then each
-- rail's from its retest (rt: findings.retest's, nil when there was none:
-- then a flagged pair fails the run and none is judged), then the fabric's
-- (findings.fabric's: kind "fabric", naming no rank).  Returns the
-- verdicts, the transient pairs ({a, b, rail, note =}: note when it was not
-- retested), the ranks at fault (their nodes exit 1): those the verdicts
-- name, and the ends of a flagged pair not judged when neither end is named;
-- and the report's notes on the counters and the topology (a list of text).
function findings.verdicts(f, fault, rail_names, first, retested, rt, opts, mismatch)
  opts = judged(first, opts)
  local verdicts, transient, flagged = setmetatable({}, { __jsontype = "array" }), {}, {}
  for _, d in ipairs(f:dead_ranks()) do
    verdicts[#verdicts + 1] = { kind = "unreachable", ranks = { d.rank }, hosts = hosts_of(f, { d.rank }), why = d.why }
  end
  for r = 0, f.size - 1 do
    for ki = 1, first.nrails do
      if fault[r] and fault[r][ki] and f:alive(r) then
        verdicts[#verdicts + 1] = { kind = "node", ranks = { r }, hosts = hosts_of(f, { r }),
          rail = rail_name(rail_names, r, ki), why = fault[r][ki] }
      end
    end
  end
  for _, x in ipairs(mismatch or {}) do
    verdicts[#verdicts + 1] = { kind = "node", ranks = { x[1] }, hosts = hosts_of(f, { x[1] }), rail = x[2],
      why = x[3] }
  end
  for _, v in ipairs(findings.flap_verdicts(f, rail_names, { first, retested })) do verdicts[#verdicts + 1] = v end
  for _, v in ipairs(findings.counter_verdicts(f, rail_names, { first, retested })) do verdicts[#verdicts + 1] = v end
  local notes = {}
  for ki = 1, opts.dry_run and 0 or first.nrails do
    local l = first:of_rail(ki)
    local ref = rt and rt.refs[ki] or diagnose.flag(l, opts, first.refs and first.refs[ki])
    local plan = rt and rt.plans[ki]
    local rref
    if not plan then
      for _, x in ipairs(l) do
        if x.flagged then flagged[#flagged + 1] = { x.src, x.dst } end
      end
    else
      local v, tr
      v, tr, rref = diagnose.verdicts(retested and retested:of_rail(ki) or {}, ref, plan, opts,
        function(r) return f:name(r) end)
      for _, x in ipairs(v) do
        x.hosts = hosts_of(f, x.ranks)
        x.rail = rail_name(rail_names, x.ranks[1], ki)
        verdicts[#verdicts + 1] = x
      end
      for _, t in ipairs(tr) do transient[#transient + 1] = { t[1], t[2], ki, note = t.note } end
      if #plan.pairs == 0 then rref = nil end
    end
    counter_notes(notes, f, rail_name(rail_names, 0, ki), l, ref, rref, opts)
  end
  local res = findings.fabric(first, opts)
  for _, v in ipairs(res and res.verdicts or {}) do
    if v.located then v.hosts = {} elseif type(v.rail) == "number" then
      v.rail = rail_name(rail_names, v.pair[1], v.rail)
      v.why = localize.text(v)
    end
    verdicts[#verdicts + 1] = v
  end
  for _, note in ipairs(res and res.notes or {}) do notes[#notes + 1] = "topology: " .. note end
  return verdicts, transient, at_fault(verdicts, flagged), notes
end

--- Rank 0's figures of the control plane: from every rank's {seconds, cpu,
-- rounds, max, exchanges} in the exchanges (ctl_all, indexed rank + 1) and
-- rank 0's cpu in the rounds as a whole (all_cpu); n ranks.
function findings.control(ctl_all, n, all_cpu, block, relay_group)
  local worst, worst_rank, busiest, busiest_rank = 0, 0, 0, 0
  for r = 0, n - 1 do
    local c = ctl_all[r + 1]
    if c and c[3] > 0 and c[1] / c[3] > worst then worst, worst_rank = c[1] / c[3], r end
    if c and c[3] > 0 and c[2] / c[3] > busiest then busiest, busiest_rank = c[2] / c[3], r end
  end
  local c0 = ctl_all[1]
  local per = c0[3] > 0 and 1000 / c0[3] or 0
  return { rank0_ms_per_round = c0[1] * per, rank0_cpu_ms_per_round = c0[2] * per,
    slowest_ms_per_round = worst * 1000, slowest_rank = worst_rank, exchanges = c0[5], block = block,
    rank0_all_cpu_ms_per_round = all_cpu * per, busiest_cpu_ms_per_round = busiest * 1000,
    busiest_rank = busiest_rank, relay_group = relay_group }
end

--- The pairs never scheduled (--quick, --max-rounds, a pairs file) as
-- unmeasured records of store, why_not saying why; how many.
function findings.unscheduled(store, why_not)
  local listed = 0
  for ki = 1, store.nrails do
    for s = 0, store.n - 1 do
      for d = 0, store.n - 1 do
        if s ~= d and not store:find(ki, s, d) then
          store:rec(ki, s, d).unmeasured = why_not
          listed = listed + 1
        end
      end
    end
  end
  return listed
end

return findings
