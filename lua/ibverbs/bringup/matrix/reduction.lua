--- fabric_matrix's first pass reduced on the way up: rank 0 learns the
-- pass's reference and the failing pairs without reading every pair.
--
--   local reduction = require "ibverbs.bringup.matrix.reduction"
--   local red = reduction.first_pass(f, ledger, opts, limit)   -- every rank, after the pass's rounds
--   -- rank 0: red.summary (pass_summary), red.refs (rail -> reference), red.text (the lines it gets)
--   reduction.at_root(store, red, ctx)                           -- rank 0: the lines into its store
--
-- Every rank holds its own pairs (ibverbs.bringup.matrix.ledger).  Once the pass's
-- rounds are over, three collectives:
--   1. each rank's summary of the pairs it owns (pass_summary: sketches of
--      the figures and of the transport counters' rates, counts) goes up the
--      relay tree, each relay merging its group's into one (route's reduce),
--      rank 0 merging the relays': from the fabric's summary it takes each
--      rail's reference (--reference, to the sketch's precision: best
--      exact, a quantile within 0.5 %, exact up to 256 pairs a rail);
--   2. rank 0 sends the references down (bcast);
--   3. each rank flags its pairs against them (diagnose.flag, the same code
--      rank 0 runs) and sends up the lines of those it owns that fail, with
--      its flaps and its counter lines that fail their port; the relays
--      join them.  Up to ALL_PAIRS_MAX ranks every rank sends all of its
--      lines instead: the report's matrices show every pair.
-- Rank 0 then holds the failing pairs (and the retest's), not N(N-1):
-- its work and memory are O(fanout + failing pairs), a relay's O(fanout) a
-- round.  A rank that dies before step 1 takes no pair with it that its
-- partner holds: the partner reports it.
local summary = require "ibverbs.bringup.matrix.pass_summary"
local sketch = require "ibverbs.bringup.matrix.sketch"
local results = require "ibverbs.bringup.matrix.results"
local findings = require "ibverbs.bringup.matrix.findings"
local pcount = require "ibverbs.bringup.matrix.pair_counters"

local reduction = {}

reduction.ALL_PAIRS_MAX = 16 -- up to this many ranks, every pair reaches rank 0 (the report's matrices)

local function concat(list)
  local l = {}
  for _, s in ipairs(list) do if s ~= "" then l[#l + 1] = s end end
  return table.concat(l, "\n")
end

--- Every rank, after the first pass's rounds: the three collectives
-- (limit: each one's time limit).  At rank 0 a table {summary =, refs =,
-- text =, full =}; elsewhere {refs =}; nil, msg when a collective failed.
function reduction.first_pass(f, led, opts, limit)
  local full = f.size <= reduction.ALL_PAIRS_MAX
  local ok, merged = f:route({}, led:summary():encode(), limit, summary.merge_texts)
  if not ok then return nil, merged end
  local refs, fabric_summary
  if f.rank == 0 then
    fabric_summary, refs = summary.decode(merged), {}
    for ki = 1, led.nrails do refs[ki] = fabric_summary:reference(ki, opts.reference) end
  end
  local err
  refs, err = f:bcast(refs, 0, limit)
  if refs == nil then return nil, err end
  local text
  ok, text = f:route({}, led:failing(refs, opts, full), limit, concat)
  if not ok then return nil, text end
  return { summary = fabric_summary, refs = refs, text = text, full = full }
end

--- Rank 0: the lines the ranks sent (first_pass's text) into store (results.lua), in
-- round order, then rank order.  Returns the partners each rank measured a pair
-- with, per rail (rail -> rank -> n), as the ranks with a failing pair said it.
function reduction.absorb(store, text, f)
  local counts, chunks = {}, {}
  local cur
  for line in (text or ""):gmatch("[^\n]+") do
    local r, ki, n = line:match("^W (%d+) (%d+) (%d+)$")
    local who = line:match("^=(%d+)$")
    if r then
      ki = tonumber(ki)
      counts[ki] = counts[ki] or {}
      counts[ki][tonumber(r)] = tonumber(n)
    elseif who then
      cur = { rank = tonumber(who), lines = {}, at = #chunks }
      chunks[#chunks + 1] = cur
    elseif cur then
      if not cur.round then cur.round = tonumber(line:match("^@(%d+)$")) end
      cur.lines[#cur.lines + 1] = line
    end
  end
  table.sort(chunks, function(a, b)
    if (a.round or -1) ~= (b.round or -1) then return (a.round or -1) < (b.round or -1) end
    if a.rank ~= b.rank then return a.rank < b.rank end
    return a.at < b.at
  end)
  local name = function(r) return f:name(r) end
  for _, c in ipairs(chunks) do store:absorb(c.rank, table.concat(c.lines, "\n"), c.round, "first", name) end
  return counts
end

--- Rank 0, after first_pass (red): its store given the lines that came up,
-- the summary's references and, reduced, the ranks' counts of partners; the
-- pairs between dead ranks counted; the counters attributed; every
-- scheduled pair a record when every pair came (full); and its
-- --json-lines file (ctx.jl) what reached it that it did not hold.  ctx:
-- sched, rounds (how many ran), f, names (rank + 1 -> rail names), jl, ledger (its own).
function reduction.at_root(store, red, ctx)
  local counts = reduction.absorb(store, red.text, ctx.f)
  store.refs, store.summary, store.counts = red.refs, red.summary, not red.full and counts or nil
  reduction.dead_pairs(red.summary, ctx.sched, ctx.rounds, ctx.f, store.nrails)
  pcount.attribute(store, ctx.names) -- each pair's ends' counters of its round
  if red.full then findings.complete(store, ctx.sched, ctx.rounds, ctx.f) end
  if not ctx.jl then return end
  results.write_lines(ctx.jl, store, ctx.names, function(x) return not ctx.ledger:owns(x) end,
    function(c) return c.rank ~= 0 end)
end

--- Rank 0: the pairs of the first nrounds rounds of sched between two dead
-- ranks, whose lines no rank holds, counted unmeasured in the fabric's
-- summary s (the dead sender named, as findings.complete names it).
function reduction.dead_pairs(s, sched, nrounds, f, nrails)
  for _, d in ipairs(f:dead_ranks()) do
    for k = 0, nrounds - 1 do
      local dst = sched:partners(d.rank, k)
      if dst and not f:alive(dst) then
        local why = f:name(d.rank) .. " unreachable"
        for ki = 1, nrails do
          local r = s:rail(ki)
          r.unmeasured[why] = (r.unmeasured[why] or 0) + 1
        end
      end
    end
  end
end

--- The pairs a summary counts, measured or not, every rail.
function reduction.scheduled(s)
  local n = 0
  for _, r in pairs(s.rails) do
    n = n + r.measured
    for _, c in pairs(r.unmeasured) do n = n + c end
  end
  return n
end

--- The report's summary of a reduced pass (report.lua's text and JSON):
-- per rail, its name (rail_names[rail]), the pairs measured, their bytes
-- verified, the unmeasured ones by reason, the reference that judged them
-- (refs[rail]) and per metric its count, lowest, median and highest; the
-- latency's spread over every rail (typical: the median; the worst p99 and
-- max with their pairs); and the sketches' precision.
function reduction.report_summary(s, refs, rail_names)
  local out = { rails = {}, precision = string.format("quantiles exact up to %d pairs a rail, within %g %% past "
    .. "them; the highest and lowest exact", sketch.EXACT, sketch.ALPHA * 100) }
  local lat, worst_p99, worst_max = sketch.new(), nil, nil
  local ks = {}
  for k in pairs(s.rails) do ks[#ks + 1] = k end
  table.sort(ks)
  for _, k in ipairs(ks) do
    local r = s.rails[k]
    local ref = refs and refs[k] or {}
    local rail = { rail = rail_names and rail_names[k] or k, pairs = r.measured, bytes_verified = r.bytes,
      unmeasured = next(r.unmeasured) and r.unmeasured or nil, metrics = {},
      reference = { kind = ref.kind, lat_us = ref.lat_us, write_mbs = ref.write_mbs, send_mbs = ref.send_mbs } }
    for key, sk in pairs(r.metrics) do
      rail.metrics[key] = { n = sk.n, min = sk.min, median = sk:quantile(0.5), max = sk.max }
    end
    out.rails[#out.rails + 1] = rail
    lat:merge(r.lat)
    if r.worst_p99 and (not worst_p99 or r.worst_p99.v > worst_p99.v) then worst_p99 = r.worst_p99 end
    if r.worst_max and (not worst_max or r.worst_max.v > worst_max.v) then worst_max = r.worst_max end
  end
  if lat.n > 0 then -- the median as the report takes it: the lower middle pair's, not interpolated
    local h = math.floor((lat.n + 1) / 2)
    out.latency = { pairs = lat.n, typical = lat:quantile(lat.n > 1 and (h - 1) / (lat.n - 1) or 0),
      worst_p99 = worst_p99, worst_max = worst_max }
  end
  return out
end

return reduction
