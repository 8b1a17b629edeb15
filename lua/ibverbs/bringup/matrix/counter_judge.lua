--- fabric_matrix.lua's transport counters judged as the figures are: a
-- rise per packet, against the other pairs measured at the same time.
-- Pure functions of the pairs' rates (pair_counters.attribute gives each
-- pair its ends' rates: x.rates, x.counted); the specs feed them synthetic ones.
--
--   local judge = require "ibverbs.bringup.matrix.counter_judge"
--   local rref = judge.reference(pairs_list, "p75")         -- per counter, the fabric's rate
--   local out = judge.why(p, rref, opts)                    -- the rates of p that stand out, or nil
--   print(judge.text(out))
--   local notes = judge.load_notes(rref, opts, "rxe0:1, first pass")
--
-- A transport counter (ibverbs.port_counters' class "transport": retries,
-- sequence errors, RNR NAKs, error completions) measures the path and its
-- load: a lossy segment, a busy host, a congested switch raise it on every
-- pair they carry.  So its rise on a port in a round is taken per packet
-- the port sent and received in that round (its rate), and a pair's rate of
-- a counter is the higher of its two ends'.  The reference is the fabric's
-- own, as for latency (lower is better): per counter, the (100-Q)th
-- percentile of every counted pair's rate (0 for a pair whose ends did not
-- count it) for --reference pQ, the lowest for best, the median for median.
-- A rate stands out when
--   its rise passed the counter's threshold (the least rise that is evidence
--     at all: a few retries are noise however few packets ran), and
--   it is above the floor (opts.counter_floor, default 1e-3 a packet: one
--     transport error per thousand packets; a healthy lossless link loses far
--     fewer than one in a million), and
--   it is above opts.counter_factor (default 4) x the reference.
-- A reference above the floor means the whole segment shows such rates: load
-- or congestion, said as such (load_notes), never blamed on a pair.  A
-- retest is judged against the retest's controls, measured in the same
-- pass, where their rates are higher than the first pass's (merge), as the
-- figures are (diagnose.retest_reference); a retested pair's rate is its
-- lowest of its K samples (common), as its figures are its best.
local measures = require "ibverbs.bringup.matrix.measures"
local pcount = require "ibverbs.bringup.matrix.pair_counters"

local judge = {}

judge.DEFAULTS = { counter_factor = 4, counter_floor = 1e-3 }

local function opt(opts, k) return opts and opts[k] or judge.DEFAULTS[k] end

--- The quantile of a reference kind, for a lower-is-better rate: best -> 0, median -> 0.5, pQ -> 1 - Q/100;
-- and its name ("lowest", "median", "p25").
function judge.low_quantile(kind)
  kind = kind or "best"
  if kind == "best" then return 0, "lowest" end
  if kind == "median" then return 0.5, "median" end
  local q = tonumber(kind:match("^p(%d+%.?%d*)$"))
  return 1 - (q or 100) / 100, "p" .. string.format("%g", 100 - (q or 100))
end
local low_quantile = judge.low_quantile

--- A pair's rate of counter name: the higher of its ends' (0 when neither counted it).
function judge.pair_rate(p, name)
  local r = 0
  for _, e in ipairs(p.rates or {}) do
    if e.name == name and e.rate > r then r = e.rate end
  end
  return r
end

--- The fabric's rate of each transport counter among the counted pairs of
-- list that completed (p.counted, no error), at the quantile of kind
-- ("best", "median" or "pQ", as diagnose.parse_reference): {values = name ->
-- rate, lo = the quantile's name ("p25"), pairs = how many were counted}.
function judge.reference(list, kind)
  local q, lo = low_quantile(kind)
  local counted, names = {}, {}
  for _, p in ipairs(list) do
    if p.counted and not p.error and not p.unmeasured then
      counted[#counted + 1] = p
      for _, e in ipairs(p.rates or {}) do names[e.name] = true end
    end
  end
  local ref = { values = {}, lo = lo, pairs = #counted, names = {} }
  for name in pairs(names) do
    local l = {}
    for i, p in ipairs(counted) do l[i] = judge.pair_rate(p, name) end
    table.sort(l)
    ref.values[name] = measures.quantile(l, q)
  end
  return ref
end

--- The retest's reference: per counter, the first pass's (first) or the
-- controls' (controls: judge.reference over the controls' best records),
-- whichever is the higher (the less demanding); a counter taken from the
-- controls is named "the retest's controls' <lo>" (ref.names).
function judge.merge(first, controls)
  local out = { values = {}, lo = first.lo, pairs = first.pairs, names = {} }
  for name, v in pairs(first.values) do out.values[name] = v end
  for name, v in pairs(controls and controls.values or {}) do
    if v > (out.values[name] or 0) then
      out.values[name] = v
      out.names[name] = "the retest's controls' " .. controls.lo
    end
  end
  return out
end

--- The rates of pair p that stand out against rref (judge.reference's; nil:
-- 0 for every counter): a list of its rates (p.rates' entries) each with
-- limit (the rate it passed) and against ("floor 0.001", "4 x p25
-- 0.0031"); nil when none.
function judge.why(p, rref, opts)
  local factor, floor = opt(opts, "counter_factor"), opt(opts, "counter_floor")
  local out
  for _, e in ipairs(p.rates or {}) do
    if e.threshold then
      local r = rref and rref.values[e.name] or 0
      local limit, against = floor, string.format("floor %g", floor)
      if factor * r > floor then
        limit = factor * r
        against = string.format("%g x %s %.3g", factor, rref.names and rref.names[e.name] or rref.lo, r)
      end
      if e.rate > limit then
        out = out or {}
        out[#out + 1] = { rank = e.rank, host = e.host, rail = e.rail, name = e.name, delta = e.delta,
          packets = e.packets, rate = e.rate, threshold = e.threshold, limit = limit, against = against }
      end
    end
  end
  return out
end

--- The rates every sample of a pair had (samples: records with rates), each
-- at its lowest rate (its threshold kept when every sample's rise passed
-- it), as diagnose.best_of keeps a pair's best figures: noise rarely rises
-- in every sample.  Returns them (nil when none) and whether every sample
-- was counted.
function judge.common(samples)
  local counted = #samples > 0
  for _, p in ipairs(samples) do counted = counted and p.counted or false end
  return pcount.in_every(samples, "rates", function(e, h)
    local low = h.rate < e.rate and h or e
    return { rank = low.rank, host = low.host, rail = low.rail, name = low.name, delta = low.delta,
      packets = low.packets, rate = low.rate, threshold = (e.threshold and h.threshold) and low.threshold }
  end), counted
end

--- Rates that stand out as text: "rxe0:1 on node2: completer_retry_err +44 in
-- 310 packets (0.142 a packet > 4 x p25 0.0031); rxe0:1 on node4: ...".
function judge.text(list)
  return pcount.grouped_text(list, function(e)
    return string.format("%s +%d in %d packets (%.3g a packet > %s)", e.name, e.delta, e.packets, e.rate,
      e.against or ("floor " .. judge.DEFAULTS.counter_floor))
  end)
end

--- The report's words for a reference whose judged counters' rates are
-- above the floor on most pairs (judged: name -> threshold, the counters
-- judged; where: "rxe0:1, first pass"): "counters: transport rates high on
-- every pair (rxe0:1, first pass: completer_retry_err p25 0.0061 a packet,
-- above the floor 0.001): load or congestion, not blamed on a pair"; nil
-- when none is.
function judge.load_note(rref, opts, judged, where)
  local floor = opt(opts, "counter_floor")
  local high = {}
  for name, v in pairs(rref and rref.values or {}) do
    if v > floor and (not judged or judged[name]) then
      high[#high + 1] = string.format("%s %s %.3g a packet", name, rref.names and rref.names[name] or rref.lo, v)
    end
  end
  if #high == 0 then return nil end
  table.sort(high)
  return string.format("counters: transport rates high on every pair (%s: %s, above the floor %g): load or "
    .. "congestion, not blamed on a pair", where, table.concat(high, ", "), floor)
end

return judge
