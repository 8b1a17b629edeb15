--- The summary of a pass's pairs, per rail: what a rank adds up over the
-- pairs it holds, a relay merges over its group and rank 0 over the relays
-- (fabric_matrix's reduction, ibverbs.bringup.matrix.reduction).  From it rank 0
-- takes each rail's reference (diagnose.reference's and
-- counter_judge.reference's, through mergeable sketches: ibverbs.bringup.matrix.sketch)
-- and the report's counts and spread, without reading the pairs.
--
--   local summary = require "ibverbs.bringup.matrix.pass_summary"
--   local s = summary.new(); s:add(rec)                 -- a pair's record (results.lua, attributed)
--   local text = summary.merge_texts({ a:encode(), b:encode() })
--   local ref = summary.decode(text):reference(1, "p75") -- rail 1's, as diagnose.reference gives it
--
-- Per rail: the pairs measured, their bytes verified, the unmeasured ones
-- by reason; per metric a sketch of the figures of the pairs that completed
-- (no error: the reference's); per transport counter a sketch of the rates
-- of the counted pairs that had it (the others count 0: counter_judge's
-- reference), with how many were counted; the latency's spread (a sketch of
-- every pair's latency that has percentiles, the pair with the worst p99
-- and the one with the worst max, ties to the lower ranks); the ranks whose
-- transport counters could not be judged.  Merging adds counts and keeps
-- the worst, so any tree shape gives the same summary.
local sketch = require "ibverbs.bringup.matrix.sketch"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local judge = require "ibverbs.bringup.matrix.counter_judge"

local summary = {}

local Sum = {}
Sum.__index = Sum

--- An empty summary.
function summary.new() return setmetatable({ rails = {} }, Sum) end

--- Rail k's part (made when new).
function Sum:rail(k)
  local r = self.rails[k]
  if not r then
    r = { measured = 0, bytes = 0, counted = 0, unmeasured = {}, metrics = {}, rates = {}, lat = sketch.new(),
      unknown = {} }
    self.rails[k] = r
  end
  return r
end

-- Whether a (value, src, dst) beats the worst so far: higher, then the lower ranks.
local function worse(v, src, dst, w)
  if not w then return true end
  if v ~= w.v then return v > w.v end
  if src ~= w.src then return src < w.src end
  return dst < w.dst
end

local function num(v) return type(v) == "number" and v == v end

-- The latency's spread: the typical pair and the worst p99 and max, of every pair with percentiles.
local function add_spread(r, p)
  if not num(p.lat_p99_us) then return end
  if num(p.lat_us) then r.lat:add(p.lat_us) end
  if worse(p.lat_p99_us, p.src, p.dst, r.worst_p99) then
    r.worst_p99 = { v = p.lat_p99_us, src = p.src, dst = p.dst, p999 = num(p.lat_p999_us) and p.lat_p999_us or 0 }
  end
  if num(p.lat_max_us) and worse(p.lat_max_us, p.src, p.dst, r.worst_max) then
    r.worst_max = { v = p.lat_max_us, src = p.src, dst = p.dst }
  end
end

--- Counts one pair's record (rec.rail, its figures, counters attributed: pair_counters.attribute).
function Sum:add(p)
  local r = self:rail(p.rail)
  for _, e in ipairs(p.rates_unknown or {}) do r.unknown[e.rank] = true end
  if p.unmeasured then
    r.unmeasured[p.unmeasured] = (r.unmeasured[p.unmeasured] or 0) + 1
    return self
  end
  r.measured = r.measured + 1
  r.bytes = r.bytes + (p.verified_bytes or 0)
  add_spread(r, p)
  if p.error then return self end
  for _, m in ipairs(diagnose.METRICS) do
    if num(p[m.key]) then
      r.metrics[m.key] = r.metrics[m.key] or sketch.new()
      r.metrics[m.key]:add(p[m.key])
    end
  end
  if p.counted then
    r.counted = r.counted + 1
    local seen = {}
    for _, e in ipairs(p.rates or {}) do
      if not seen[e.name] then
        seen[e.name] = true
        r.rates[e.name] = r.rates[e.name] or sketch.new()
        r.rates[e.name]:add(judge.pair_rate(p, e.name))
      end
    end
  end
  return self
end

local function merge_sketches(into, from)
  for k, s in pairs(from) do
    if into[k] then into[k]:merge(s) else into[k] = sketch.decode(s:encode()) end
  end
end

--- Adds other's counts to this summary; returns self.
function Sum:merge(other)
  for k, o in pairs(other.rails) do
    local r = self:rail(k)
    r.measured, r.bytes, r.counted = r.measured + o.measured, r.bytes + o.bytes, r.counted + o.counted
    for why, c in pairs(o.unmeasured) do r.unmeasured[why] = (r.unmeasured[why] or 0) + c end
    merge_sketches(r.metrics, o.metrics)
    merge_sketches(r.rates, o.rates)
    r.lat:merge(o.lat)
    for _, w in ipairs({ "worst_p99", "worst_max" }) do
      local x = o[w]
      if x and worse(x.v, x.src, x.dst, r[w]) then r[w] = x end
    end
    for rank in pairs(o.unknown) do r.unknown[rank] = true end
  end
  return self
end

--- Rail k's reference of kind ("best", "median", "pQ"), shaped as
-- diagnose.reference's: per metric the quantile of the completed pairs'
-- figures, and rates (counter_judge.reference's: per counter the low
-- quantile of every counted pair's rate, 0 where it had none).
function Sum:reference(k, kind)
  local how = assert(diagnose.parse_reference(kind))
  local ref = { kind = kind or "best", hi = how.hi, lo = how.lo }
  local r = self.rails[k] or summary.new():rail(k)
  for _, m in ipairs(diagnose.METRICS) do
    local s = r.metrics[m.key]
    if s and s.n > 0 then ref[m.key] = s:quantile(m.higher and how.q or 1 - how.q) end
  end
  local q, lo = judge.low_quantile(kind)
  ref.rates = { values = {}, lo = lo, pairs = r.counted, names = {} }
  for name, s in pairs(r.rates) do
    local all = sketch.decode(s:encode()):add_zeros(r.counted - s.n)
    ref.rates.values[name] = all:quantile(q)
  end
  return ref
end

local function fnum(v) return string.format("%.17g", v) end

--- The summary as text: per rail "R k measured bytes counted", then its
-- parts (U unmeasured, M metric, Q counter rate, L latency spread, W worst
-- p99, X worst max, K ranks with unknown rates), one a line.
function Sum:encode()
  local out, ks = {}, {}
  for k in pairs(self.rails) do ks[#ks + 1] = k end
  table.sort(ks)
  for _, k in ipairs(ks) do
    local r = self.rails[k]
    out[#out + 1] = string.format("R %d %d %d %d", k, r.measured, r.bytes, r.counted)
    local l = {}
    for why, c in pairs(r.unmeasured) do l[#l + 1] = string.format("U %d %s", c, why) end
    for key, s in pairs(r.metrics) do l[#l + 1] = "M " .. key .. " " .. s:encode() end
    for name, s in pairs(r.rates) do l[#l + 1] = "Q " .. name .. " " .. s:encode() end
    table.sort(l)
    for _, x in ipairs(l) do out[#out + 1] = x end
    out[#out + 1] = "L " .. r.lat:encode()
    local w, x = r.worst_p99, r.worst_max
    if w then out[#out + 1] = string.format("W %s %d %d %s", fnum(w.v), w.src, w.dst, fnum(w.p999)) end
    if x then out[#out + 1] = string.format("X %s %d %d", fnum(x.v), x.src, x.dst) end
    local u = {}
    for rank in pairs(r.unknown) do u[#u + 1] = rank end
    table.sort(u)
    if #u > 0 then out[#out + 1] = "K " .. table.concat(u, ",") end
  end
  return table.concat(out, "\n")
end

-- One line of encode's text into rail r.
local function decode_line(r, line)
  local tag, rest = line:match("^(%u) (.*)$")
  if tag == "U" then
    local c, why = rest:match("^(%d+) (.*)$")
    r.unmeasured[why] = (r.unmeasured[why] or 0) + tonumber(c)
  elseif tag == "M" or tag == "Q" then
    local key, s = rest:match("^(%S+) (%S+)$")
    ;(tag == "M" and r.metrics or r.rates)[key] = assert(sketch.decode(s), "bad sketch")
  elseif tag == "L" then
    r.lat = assert(sketch.decode(rest), "bad sketch")
  elseif tag == "W" then
    local v, src, dst, p999 = rest:match("^(%S+) (%d+) (%d+) (%S+)$")
    r.worst_p99 = { v = tonumber(v), src = tonumber(src), dst = tonumber(dst), p999 = tonumber(p999) }
  elseif tag == "X" then
    local v, src, dst = rest:match("^(%S+) (%d+) (%d+)$")
    r.worst_max = { v = tonumber(v), src = tonumber(src), dst = tonumber(dst) }
  elseif tag == "K" then
    for rank in rest:gmatch("%d+") do r.unknown[tonumber(rank)] = true end
  end
end

--- A summary read back from encode's text (error on a malformed one).
function summary.decode(text)
  local s, r = summary.new(), nil
  for line in tostring(text):gmatch("[^\n]+") do
    local k, measured, bytes, counted = line:match("^R (%d+) (%d+) (%d+) (%d+)$")
    if k then
      r = s:rail(tonumber(k))
      r.measured, r.bytes, r.counted = tonumber(measured), tonumber(bytes), tonumber(counted)
    else
      decode_line(assert(r, "summary: a part before its rail"), line)
    end
  end
  return s
end

--- The texts of several summaries merged into one text (a relay's reduce).
function summary.merge_texts(texts)
  local s = summary.new()
  for _, t in ipairs(texts) do
    if t ~= "" then s:merge(summary.decode(t)) end
  end
  return s:encode()
end

return summary
