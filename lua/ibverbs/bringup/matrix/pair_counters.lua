--- fabric_matrix.lua's port counters, the hardware's own evidence per pair.
-- Every rank reads the counters of its rails' ports (ibverbs.port_counters:
-- the InfiniBand PortCounters and the provider's hw_counters) before and
-- after each round's traffic, judges the deltas against its own thresholds
-- and sends them with the round's results, one line per rail:
--   "C rail name=delta,name=delta!threshold,...|name:why,name:!why,...|packets"
-- ("!threshold": a judged counter that rose past it; after the first "|":
-- the counters without a delta, saturated, gone backwards or unreadable, "!"
-- before a why that fails the port: a judged counter saturated, a counter
-- file that could not be read (ibverbs.port_counters' faults); "-" when no
-- counter moved; after the second "|", the packets the port sent and
-- received in the round, left out when the port does not count them or a
-- count is unknown).
-- Rank 0 attributes each rank's deltas of a round to the pairs it was an end
-- of in that round (attribute): a pair whose ends' physical or port error
-- counters rose past their thresholds gets counter_errors (judged as they
-- are), and its ends' transport counters become rates per packet
-- (counter_judge.lua: judged against the other pairs'), and diagnose.lua
-- flags it.  The port faults become verdicts of their own (findings.lua).
--
--   local pcount = require "ibverbs.bringup.matrix.pair_counters"
--   local limits = pcount.thresholds(pcount.THRESHOLDS, expected_entries, "rxe0", 1)
--   local before, lost = pcount.read(rails)               -- rail index -> counters, -> unreadable files
--   ... the round's traffic ...
--   local after, lost2 = pcount.read(rails)
--   local text = pcount.lines(before, after, function(ki) return limits end, { lost, lost2 }, lid_of)
--   local ki, deltas, unknown, exceeded, faults, packets = pcount.parse(line)  -- rank 0, from a rank's line
--   pcount.attribute(store, rail_names)                   -- rank 0, after a pass
local pc = require "ibverbs.port_counters"

local pcount = {}

--- The error counters judged per pair and round, and the largest rise
-- allowed on each end's port (fabric_matrix.lua's defaults; a transport
-- counter's rise past it is the least evidence, its rate per packet then
-- judges: counter_judge.lua): those of
-- ibverbs.port_counters (pc.THRESHOLDS) but rxe's duplicate_request, which
-- counts the packets a retransmission repeats: one RC timeout (counted once,
-- by the sender's completer_retry_err) resends up to a whole window of
-- them, 129 in one healthy round measured on the four soft-RoCE VMs.  It is
-- still read and reported; --counter-thresholds duplicate_request=n judges it.
pcount.THRESHOLDS = {}
for k, v in pairs(pc.THRESHOLDS) do
  if k ~= "duplicate_request" then pcount.THRESHOLDS[k] = v end
end

--- The thresholds of one port: base (--counter-thresholds' over the
-- defaults), with the counters of the --expect entry (entries: this host's,
-- expect.for_host's) naming device and port over them.
function pcount.thresholds(base, entries, device, port)
  for _, e in ipairs(entries or {}) do
    if e.device == device and e.port == port and e.counters then
      local t = {}
      for k, v in pairs(base) do t[k] = v end
      for k, v in pairs(e.counters) do t[k] = v end
      return t
    end
  end
  return base
end

--- The counters of every rail that takes part (not dry, no fault, its
-- device open): rail index -> name -> value; and rail index -> the counter
-- files that could not be read (name -> "path: message"), a port whose
-- counters could not be read at all as counters = why.  A port that has no
-- counters directory is left out of both (its rounds report none).
function pcount.read(rails, root)
  local out, lost = {}, {}
  for _, r in ipairs(rails) do
    if r.ctx and not r.fault and not r.dry then
      local c, bad = pc.read(r.ctx:name(), r.port, root)
      out[r.index], lost[r.index] = c, c and bad or { counters = bad }
    end
  end
  return out, lost
end

-- A name's text in a line: no separators of the format.
local function clean(name) return (tostring(name):gsub("[^%w_.-]", "_")) end

-- A why in a line: no separators of the format.
local function clean_why(why) return (tostring(why):gsub("[,|\n]", " ")) end

-- One rail's counter line (before, after: its readings; lost: the files
-- either reading could not read; limits: its thresholds; lid: for the hint).
local function rail_line(ki, before, after, lost, limits, lid, port)
  local d, unknown = pc.deltas(before, after)
  local over = {}
  for _, x in ipairs(pc.exceeded(d, limits)) do over[x.name] = x.threshold end
  local faults = {}
  for _, x in ipairs(pc.faults(before, after, limits, lost, { lid = lid, port = port })) do faults[x.name] = x.why end
  local moved, gone = {}, {}
  for name, v in pairs(d) do
    -- an exceeded counter is named as pc.exceeded named it (hw_ prefix or not)
    local bare = name:gsub("^hw_", "")
    local limit = over[name] or (name ~= bare and not d[bare] and over[bare])
    if v > 0 then moved[#moved + 1] = clean(name) .. "=" .. v .. (limit and ("!" .. limit) or "") end
  end
  for name, why in pairs(unknown) do
    if not faults[name] then gone[#gone + 1] = clean(name) .. ":" .. why end
  end
  for name, why in pairs(faults) do gone[#gone + 1] = clean(name) .. ":!" .. clean_why(why) end
  table.sort(moved)
  table.sort(gone)
  local packets = pc.packets(d)
  return string.format("C %d %s|%s%s", ki, #moved > 0 and table.concat(moved, ",") or "-", table.concat(gone, ","),
    packets and ("|" .. packets) or "")
end

--- The counter lines of one round (before, after: pcount.read's first
-- values), limits_of(rail index) giving that port's thresholds; lost: a list
-- of pcount.read's second values (the files each reading could not read);
-- rail_of(rail index): the rail ({lid =, port =}: the hint to reset a
-- saturated counter names them).  "" when no rail has counters.
function pcount.lines(before, after, limits_of, lost, rail_of)
  local out, rails = {}, {}
  for ki in pairs(before) do rails[#rails + 1] = ki end
  table.sort(rails)
  for _, ki in ipairs(rails) do
    local l = {}
    for i, x in ipairs(lost or {}) do l[i] = x[ki] end
    local r = rail_of and rail_of(ki) or {}
    if after[ki] then
      out[#out + 1] = rail_line(ki, before[ki], after[ki], l, limits_of(ki), r.lid, r.port)
    else -- read before the round, not after: the directory went away
      local last = lost and lost[#lost] and lost[#lost][ki]
      out[#out + 1] = string.format("C %d -|counters:!unreadable: %s", ki, clean_why(last and last.counters or
        "the port's counters could not be read after the round"))
    end
  end
  return table.concat(out, "\n")
end

--- One counter line read back: rail index, deltas (name -> rise, the
-- counters that moved), unknown (name -> why), exceeded (a list of {name =,
-- delta =, threshold =} sorted by name), faults (a list of {name =, why =}:
-- what fails the port, sorted by name), packets (the port's in the round, or
-- nil: unknown); nil when the line is not one.
-- A whole number as an integer where the interpreter has them (LuaJIT has only doubles).
local int = math.tointeger or function(v) return v end

function pcount.parse(line)
  local ki, moved, lost, packets = tostring(line):match("^C (%d+) (%S-)|([^|\n]*)|?(%d*)$")
  if not ki then return nil end
  local deltas, unknown, exceeded, faults = {}, {}, {}, {}
  for name, v, limit in moved:gmatch("([%w_.-]+)=(%d+)!?(%d*)") do
    deltas[name] = int(tonumber(v)) or tonumber(v)
    if limit ~= "" then
      exceeded[#exceeded + 1] = { name = name, delta = deltas[name], threshold = int(tonumber(limit)) }
    end
  end
  for name, bang, why in lost:gmatch("([%w_.-]+):(!?)([^,]+)") do
    unknown[name] = why
    if bang == "!" then faults[#faults + 1] = { name = name, why = why } end
  end
  table.sort(exceeded, function(a, b) return a.name < b.name end)
  table.sort(faults, function(a, b) return a.name < b.name end)
  return tonumber(ki), deltas, unknown, exceeded, faults, packets ~= "" and int(tonumber(packets)) or nil
end

--- Rank 0, after a pass: each pair of store (lua/ibverbs/bringup/matrix/results.lua) gets
-- what its ends' ports counted in the pair's round.  counter_errors: the
-- physical, port (and unclassed) error counters that rose past their
-- thresholds (a list of {rank =, host =, rail =, name =, delta =, threshold
-- =}; nil when none), judged as they are.  rates: each transport counter
-- that moved, per packet the port sent and received in that round (a list
-- of {rank =, host =, rail =, name =, delta =, packets =, rate =, threshold
-- =}, threshold set when the rise passed it: only then is the rate judged,
-- counter_judge.lua); counted: both ends' packets are known (the pair's
-- rates count in a reference); rates_unknown: the ends whose packets are
-- not ({rank =, host =, rail =}), whose transport counters go unjudged.  A
-- rank's deltas of a round go to every pair it was an end of in that round:
-- one in a tournament (both directions with one partner), two in a shift
-- (the rank it sent to, the rank it received from).  rail_names: rank + 1 ->
-- that rank's rail names.
function pcount.attribute(store, rail_names)
  for _, x in ipairs(store.list) do
    x.counter_errors, x.rates, x.rates_unknown, x.counted = nil, nil, nil, nil
    local known = x.round ~= nil
    for _, r in ipairs({ math.min(x.src, x.dst), math.max(x.src, x.dst) }) do -- both directions alike
      local c = x.round and store:counters_of(x.round, r, x.rail)
      local names = rail_names[r + 1]
      local at = { rank = r, host = store.hosts[r + 1] or ("rank " .. r),
        rail = names and names[x.rail] or ("rail " .. x.rail) }
      local over = {}
      for _, e in ipairs(c and c.exceeded or {}) do
        if pc.class(e.name) == "transport" then
          over[e.name] = e.threshold
        else
          x.counter_errors = x.counter_errors or {}
          table.insert(x.counter_errors, { rank = r, host = at.host, rail = at.rail, name = e.name, delta = e.delta,
            threshold = e.threshold })
        end
      end
      known = known and c ~= nil and c.packets ~= nil
      for name, v in pairs(c and c.deltas or {}) do
        if pc.class(name) == "transport" and v > 0 then
          if c.packets then
            x.rates = x.rates or {}
            table.insert(x.rates, { rank = r, host = at.host, rail = at.rail, name = name, delta = v,
              packets = c.packets, rate = v / math.max(c.packets, 1), threshold = over[name] })
          elseif not (x.rates_unknown and x.rates_unknown[#x.rates_unknown].rank == r) then
            x.rates_unknown = x.rates_unknown or {}
            table.insert(x.rates_unknown, at)
          end
        end
      end
    end
    if x.rates then
      table.sort(x.rates, function(a, b) return a.rank < b.rank or (a.rank == b.rank and a.name < b.name) end)
    end
    x.counted = known
  end
end

--- The entries of list field that every sample has (samples: records; an
-- entry is keyed by its rank, rail and name), each the one keep(a, b)
-- chooses among its samples' (a and b: two entries of one key), in the
-- first sample's order; nil when none.  As diagnose.best_of judges a pair
-- by its best figures: noise rarely rises in every sample.
function pcount.in_every(samples, field, keep_of)
  local keep, order = nil, {}
  for _, p in ipairs(samples) do
    local here = {}
    for _, e in ipairs(p[field] or {}) do
      local k = e.rank .. " " .. e.rail .. " " .. e.name
      here[k] = here[k] and keep_of(here[k], e) or e
      if not keep then order[#order + 1] = k end
    end
    if keep then
      for k, e in pairs(keep) do
        if not here[k] then keep[k] = nil else keep[k] = keep_of(e, here[k]) end
      end
    else
      keep = here
    end
  end
  local out = {}
  for _, k in ipairs(order) do
    if keep and keep[k] then out[#out + 1] = keep[k]; keep[k] = nil end
  end
  return #out > 0 and out or nil
end

--- The counter errors every sample of a pair had (samples: records with
-- counter_errors), each with its smallest rise; nil when none.
function pcount.common(samples)
  return pcount.in_every(samples, "counter_errors", function(a, b) return b.delta < a.delta and b or a end)
end

--- Entries (each with rail, host) as text, grouped by port: "rxe0:1 on
-- node2: <item(e)>, <item(e)>; rxe0:1 on node4: ...".
function pcount.grouped_text(list, item)
  local parts, at = {}, {}
  for _, e in ipairs(list) do
    local where = e.rail .. " on " .. e.host
    if not at[where] then
      at[where] = {}
      parts[#parts + 1] = where
    end
    table.insert(at[where], item(e))
  end
  for i, where in ipairs(parts) do parts[i] = where .. ": " .. table.concat(at[where], ", ") end
  return table.concat(parts, "; ")
end

--- A pair's counter errors as text: "rxe0:1 on node2: rcvd_seq_err +37
-- (threshold 10), out_of_seq_request +12 (threshold 10); rxe0:1 on node4: ...".
function pcount.text(errors)
  return pcount.grouped_text(errors, function(e)
    return string.format("%s +%d (threshold %d)", e.name, e.delta, e.threshold)
  end)
end

return pcount
