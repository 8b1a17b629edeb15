--- The flows of fabric_matrix's pairs judged one by one (the first step of
-- the fabric's localization, ibverbs.bringup.matrix.localize): which flows
-- are bad, against the fabric's reference and against their siblings (the
-- other flows of the same pair: the same two ranks on the same rail, other
-- paths through the fabric).  Pure functions of the flows.
--
--   local flow_flags = require "ibverbs.bringup.matrix.flow_flags"
--   local group = flow_flags.group(flows)       -- group.of[i]: flow i's pair; group.flows[pair]: its flows
--   local bad, ref, suspect = flow_flags.flag(flows, group, opts)
--   -- bad[i]: false, or why flow i is bad ("failed: ...", "stalls 2.10 %", "latency 3.2 x the fabric's", ...)
--   -- ref: the fabric's reference: lat_us, write_mbs, send_mbs (opts.reference), stall_rate (the median)
--   -- suspect[i]: flow i stalls as a bad flow does, but so does one of its siblings (not bad, not clean)
--
-- A flow (the records of ibverbs.bringup.matrix.localize) is bad when:
--   it failed (flow.failed);
--   its stall rate (stalls / samples: a lost frame costs an RC ack timeout,
--     so the rate estimates the loss on its path) is above opts.stall_floor,
--     above opts.stall_factor x the fabric's (the median flow's) and above
--     opts.stall_factor x its best sibling's (the lowest rate of its pair's
--     other flows, when it has some): a pair whose every flow stalls is the
--     pair's ends' fault, not its paths';
--   its latency is above opts.lat_factor x the fabric's reference latency or
--     x its best sibling's (the lowest), or a bandwidth below
--     opts.bw_fraction x the fabric's reference or x its best sibling's (the
--     highest): diagnose.lua's thresholds, the reference of the kind
--     opts.reference names ("best", "median", "pQ": diagnose.parse_reference).
-- The references are taken through quantile sketches (ibverbs.bringup.matrix.sketch):
-- linear in the flows, exact up to sketch.EXACT values and within 0.5 % past them.
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local sketch = require "ibverbs.bringup.matrix.sketch"

local flow_flags = {}

flow_flags.DEFAULTS = { lat_factor = 2.1, bw_fraction = 0.93, reference = "median", stall_floor = 0.002,
  stall_factor = 4 }

local function num(v) return type(v) == "number" and v == v end

--- The pair id of ranks (or host names) a and b on rail: a number when
-- both are ranks, else a string; the same whichever end comes first.
function flow_flags.pair_id(a, b, rail)
  if type(a) == "number" and type(b) == "number" then
    local lo, hi = math.min(a, b), math.max(a, b)
    return (lo * 1048576 + hi) * 64 + (rail or 0) -- (ranks below 2^20, rails below 64: exact in a double)
  end
  a, b = tostring(a), tostring(b)
  if b < a then a, b = b, a end
  return a .. "\0" .. b .. "\0" .. tostring(rail or 0)
end

--- The flows grouped by pair: of[i] (flow i's pair id: ranks a, b, or
-- host_a, host_b when a flow has no ranks; its rail), flows[id] (the
-- indices of the pair's flows, in order), order (the pair ids, in the
-- order first seen).
function flow_flags.group(flows)
  local of, members, order = {}, {}, {}
  for i, f in ipairs(flows) do
    local a, b = f.a, f.b
    if a == nil or b == nil then a, b = f.host_a, f.host_b end
    local id = flow_flags.pair_id(a, b, f.rail)
    of[i] = id
    local m = members[id]
    if not m then m = {}; members[id] = m; order[#order + 1] = id end
    m[#m + 1] = i
  end
  return { of = of, flows = members, order = order }
end

-- A flow's stall rate, or nil (no samples).
local function rate(f)
  if num(f.stalls) and num(f.samples) and f.samples > 0 then return f.stalls / f.samples end
  return nil
end
flow_flags.rate = rate

-- The figures a flow is judged by: key, whether higher is better, its value in flow f.
local FIGURES = { { key = "lat_us", higher = false, name = "latency" },
  { key = "write_mbs", higher = true, name = "RDMA write bandwidth" },
  { key = "send_mbs", higher = true, name = "send bandwidth" },
  { key = "stall_rate", higher = false, name = "stalls", get = rate } }
for _, m in ipairs(FIGURES) do
  if not m.get then
    local key = m.key
    m.get = function(f) local v = f[key]; return num(v) and v or nil end
  end
end

--- The fabric's reference over the flows that did not fail: per figure
-- the quantile opts.reference names (latency at the low end, bandwidth at
-- the high end), and stall_rate, the median flow's stall rate.
function flow_flags.reference(flows, opts)
  local how = assert(diagnose.parse_reference(opts.reference or flow_flags.DEFAULTS.reference))
  local s = {}
  for _, m in ipairs(FIGURES) do s[m.key] = sketch.new() end
  for _, f in ipairs(flows) do
    if not f.failed then
      for _, m in ipairs(FIGURES) do
        local v = m.get(f)
        if v then s[m.key]:add(v) end
      end
    end
  end
  local ref = { kind = opts.reference or flow_flags.DEFAULTS.reference }
  for _, m in ipairs(FIGURES) do
    if m.key == "stall_rate" then ref[m.key] = s[m.key]:quantile(0.5)
    else ref[m.key] = s[m.key]:quantile(m.higher and how.q or 1 - how.q) end
  end
  return ref
end

-- Each flow's best sibling per figure: the best value among the other
-- flows of its pair that did not fail (nil when there is none).  From the
-- best and the second best of each pair: linear in the flows.
local function siblings(flows, group)
  local best = {}
  for _, m in ipairs(FIGURES) do best[m.key] = {} end
  for _, id in ipairs(group.order) do
    local list = group.flows[id]
    if #list > 1 then
      for _, m in ipairs(FIGURES) do
        local b1, b2, at -- the best value, the second best, the flow with the best
        for _, i in ipairs(list) do
          local f = flows[i]
          local v = not f.failed and m.get(f)
          if v then
            local better = b1 == nil or (m.higher and v > b1) or (not m.higher and v < b1)
            if better then b1, b2, at = v, b1, i
            elseif b2 == nil or (m.higher and v > b2) or (not m.higher and v < b2) then b2 = v end
          end
        end
        local out = best[m.key]
        for _, i in ipairs(list) do
          if i == at then out[i] = b2 else out[i] = b1 end
        end
      end
    end
  end
  return best
end

-- Why value v of figure m stands out against r0 (the fabric's or its best sibling's, named by whose), or nil.
local function off(m, v, r0, o, whose)
  if not r0 then return nil end
  if (m.higher and v < o.bw_fraction * r0) or (not m.higher and v > o.lat_factor * r0) then
    return string.format("%s %.3g x %s", m.name, v / r0, whose)
  end
  return nil
end

-- Why flow f is bad, or false; and whether it stalls as a bad one would but so do its siblings.
local function judge(f, i, ref, sib, o)
  if f.failed then return "failed: " .. tostring(f.failed) end
  local r = rate(f)
  local suspect = false
  if r and r > o.stall_floor and r > o.stall_factor * (ref.stall_rate or 0) then
    local s = sib.stall_rate[i]
    if s == nil or r > o.stall_factor * s then return string.format("stalls %.2f %%", 100 * r) end
    suspect = true
  end
  for _, m in ipairs(FIGURES) do
    local v = m.key ~= "stall_rate" and m.get(f)
    if v then
      local why = off(m, v, ref[m.key], o, "the fabric's") or off(m, v, sib[m.key][i], o, "its best sibling's")
      if why then return why end
    end
  end
  return false, suspect
end

--- The flows judged: bad[i] (false, or why flow i is bad), the fabric's
-- reference (flow_flags.reference) and suspect[i] (true: flow i stalls as a
-- bad one would, but so does a sibling: not bad, not clean either).  group:
-- flow_flags.group(flows); opts: lat_factor, bw_fraction, reference,
-- stall_floor, stall_factor (defaults: flow_flags.DEFAULTS).
function flow_flags.flag(flows, group, opts)
  local o = {}
  for k, v in pairs(flow_flags.DEFAULTS) do o[k] = opts[k] == nil and v or opts[k] end
  local ref = flow_flags.reference(flows, o)
  local sib = siblings(flows, group)
  local bad, suspect = {}, {}
  for i, f in ipairs(flows) do bad[i], suspect[i] = judge(f, i, ref, sib, o) end
  return bad, ref, suspect
end

return flow_flags
