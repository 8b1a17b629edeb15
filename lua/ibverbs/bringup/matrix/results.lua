--- fabric_matrix.lua's results: the lines a rank sends rank 0 after each
-- round, and rank 0's store of the pairs they describe.  One end a line:
--   "O rail peer lat write send p99 p999 max|error"  (this rank sent to peer;
--                                       latency: one way, us; p99 p999 max: its percentiles)
--   "I rail peer ok bytes|error"        (this rank received from peer)
--   "U rail peer|why"                   (this rank was to send to peer: unmeasured)
--   "D rail peer|"                      (a dry run's end)
--   "L rail peer j ...|error"           (flow j of this rank's out end to peer: ibverbs.bringup.matrix.flows)
--   "C rail deltas|unknown|packets"     (this rank's port counters over the round: pair_counters.lua)
--   "F rail time|what"                  (its port went down or came back since the last round: ibverbs.bringup.flaps)
-- and "@k" before the lines of round k (an exchange carries a block of rounds).
-- A store keeps one record per (sample, rail, src, dst), which names its hosts
-- for the streamed lines and the report alike (and, with flows, its flow
-- records: record.flows, flows.parse's, by flow), each rank's counters of
-- each round and rail (store.counters, store:counters_of) and the flaps its
-- ranks saw (store.flaps: {pass =, round =, rank =, host =, rail =, at =, what =}).
--
--   local results = require "ibverbs.bringup.matrix.results"
--   local text = results.lines(ends)                               -- a rank, after a round
--   local store = results.store(nrails, n, f.hosts)                -- rank 0
--   store:absorb(src, text, round, "first", name)                  -- what rank src sent
local dkjson = require "dkjson"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local flows = require "ibverbs.bringup.matrix.flows"

local results = {}

local function num(v) return v and string.format("%.6g", v) or "-" end
local function clean(s) return (tostring(s):gsub("[\n|]", " ")) end

--- The line of a flap this rank saw on rail k after a round (at: when, UTC; what: flaps.rails_check's words).
function results.flap_line(k, at, what)
  return string.format("F %d %s|%s", k, clean(at), clean(what))
end

--- The result lines of one round's ends on this rank.
function results.lines(ends)
  local out = {}
  for _, e in ipairs(ends) do
    local r = e.res or {}
    if e.skip then
      if e.kind == "out" then out[#out + 1] = string.format("U %d %d|%s", e.rail.index, e.peer, clean(e.skip)) end
    elseif e.dry then -- both ends report, as in a real run: rank 0 reads as much as it would
      out[#out + 1] = string.format(e.kind == "out" and "D %d %d|" or "I %d %d - 0|", e.rail.index, e.peer)
    elseif e.kind == "out" then
      out[#out + 1] = string.format("O %d %d %s %s %s %s %s %s|%s", e.rail.index, e.peer, num(r.lat_us),
        num(r.write_mbs), num(r.send_mbs), num(r.lat_p99_us), num(r.lat_p999_us), num(r.lat_max_us),
        r.error and clean(r.error) or "")
      for j, fig in ipairs(e.flow_figs or {}) do out[#out + 1] = flows.line(e.rail.index, e.peer, j, fig) end
    else
      out[#out + 1] = string.format("I %d %d %s %d|%s", e.rail.index, e.peer, r.data_ok == nil and "-" or
        (r.data_ok and "1" or "0"), r.verified or 0, r.error and clean(r.error) or "")
    end
  end
  return table.concat(out, "\n")
end

local Store = {}
Store.__index = Store

--- A store of the pairs of n ranks on nrails rails (hosts: by rank + 1).  With
-- per_sample, the retest's: round k is sample floor(k / per_sample) + 1 (the
-- first pass: one sample).
function results.store(nrails, n, hosts, per_sample)
  return setmetatable({ nrails = nrails, n = n, hosts = hosts, per_sample = per_sample, recs = {}, list = {},
    done = 0, counters = {}, counter_at = {}, flaps = {} }, Store)
end

--- The one key of a pair's record.
function Store:key(k, src, dst, sample)
  local n = self.n
  return (((sample or 1) - 1) * self.nrails + k - 1) * n * n + src * n + dst
end

--- The record of (rail k, src -> dst, sample), or nil.
function Store:find(k, src, dst, sample) return self.recs[self:key(k, src, dst, sample)] end

--- The record of (rail k, src -> dst, sample), made when new.
function Store:rec(k, src, dst, sample)
  local key = self:key(k, src, dst, sample)
  local r = self.recs[key]
  if not r then
    r = { rail = k, src = src, dst = dst, sample = sample, src_host = self.hosts[src + 1],
      dst_host = self.hosts[dst + 1] }
    self.recs[key] = r
    self.list[#self.list + 1] = r
  end
  return r
end

--- Rank src's counters of rail k in round (an entry of store.counters: {pass =,
-- round =, sample =, rank =, host =, rail =, deltas =, unknown =, exceeded =,
-- faults =, packets =}: pair_counters.parse's), or nil.
function Store:counters_of(round, src, k)
  local at = self.counter_at[round]
  return at and at[src * self.nrails + k - 1]
end

-- A counter line of rank src in round: its entry, or nil when the line is not one.
-- A line given twice (both ends of a pair carry both ends' counters up) is kept once: its first entry.
function Store:counter_line(src, line, round, pass)
  local k, deltas, unknown, exceeded, faults, packets = pcount.parse(line)
  if not k or not round then return nil end
  local had = self:counters_of(round, src, k)
  if had then return nil end
  local c = { pass = pass, round = round, sample = self.per_sample and math.floor(round / self.per_sample) + 1,
    rank = src, host = self.hosts[src + 1], rail = k, deltas = deltas, unknown = unknown, exceeded = exceeded,
    faults = faults, packets = packets }
  self.counters[#self.counters + 1] = c
  self.counter_at[round] = self.counter_at[round] or {}
  self.counter_at[round][src * self.nrails + k - 1] = c
  return c
end

local function add_error(r, who, why)
  if why ~= "" then r.error = (r.error and r.error .. "; " or "") .. who .. ": " .. why end
end

-- Rank 0 reads 2N lines a round: one match each, no line strings or word tables.
local F = " ?([^%s|]*)"
local RESULT = "^(%u) (%d+) (%d+)" .. F:rep(6) .. "|([^\n]*)\n?()"

--- Takes in rank src's result lines (round: the first round of its block;
-- name(rank): how an error names its rank).  Returns how many pairs the lines
-- finish (their "out" ends); touched (for the streamed lines) collects the records.
function Store:absorb(src, text, round, pass, name, touched)
  local p, n, done = 1, #text, 0
  while p <= n do
    local c = text:byte(p)
    if c == 10 then -- an empty line: a round this rank sat out
      p = p + 1
    elseif c == 64 then -- "@k"
      local e = text:find("\n", p, true) or n + 1
      round = tonumber(text:sub(p + 1, e - 1))
      p = e + 1
    elseif c == 70 then -- "F rail time|what": a flap
      local e = text:find("\n", p, true) or n + 1
      local k, at, what = text:sub(p, e - 1):match("^F (%d+) ([^|]*)|(.*)$")
      if k then
        self.flaps[#self.flaps + 1] = { pass = pass, round = round, rank = src, host = self.hosts[src + 1],
          rail = tonumber(k), at = at, what = what }
      end
      p = e + 1
    elseif c == 76 then -- "L ...": a flow of the pair this rank sent on
      local e = text:find("\n", p, true) or n + 1
      local fl = flows.parse(text:sub(p, e - 1), src, self.hosts)
      if fl then
        local r = self:rec(fl.rail, src, fl.b, self.per_sample and math.floor(round / self.per_sample) + 1)
        r.flows = r.flows or {}
        r.flows[fl.flow] = fl
        if touched then touched[r] = true end
      end
      p = e + 1
    elseif c == 67 then -- "C ...": the counters of a rail
      local e = text:find("\n", p, true) or n + 1
      local entry = self:counter_line(src, text:sub(p, e - 1), round, pass)
      if touched and entry then touched[entry] = true end
      p = e + 1
    else
      local kind, k, peer, a, b, z, p99, p999, max, why, q = text:match(RESULT, p)
      if not kind then break end
      p = q
      k, peer = tonumber(k), tonumber(peer)
      local sample = self.per_sample and math.floor(round / self.per_sample) + 1
      local r
      if kind == "I" then r = self:rec(k, peer, src, sample)
      else r = self:rec(k, src, peer, sample); done = done + 1 end
      r.round, r.pass = round, pass
      if kind == "O" then
        r.lat_us, r.write_mbs, r.send_mbs = tonumber(a), tonumber(b), tonumber(z)
        r.lat_p99_us, r.lat_p999_us, r.lat_max_us = tonumber(p99), tonumber(p999), tonumber(max)
        add_error(r, name(src), why)
      elseif kind == "I" then
        if a ~= "-" then r.data_ok = a == "1" end
        r.verified_bytes = tonumber(b)
        add_error(r, name(src), why)
      elseif kind == "D" then
        r.dry = true
      else
        r.unmeasured = why
      end
      if touched then touched[r] = true end
    end
  end
  return done
end

--- The records of rail k.
function Store:of_rail(k)
  local l = {}
  for _, x in ipairs(self.list) do if x.rail == k then l[#l + 1] = x end end
  return l
end

-- A counter entry (Store:counter_line's) as a JSON object; rail_names as json_line's.
function results.counter_json(c, rail_names)
  local names = rail_names[c.rank + 1]
  local exceeded = setmetatable({}, { __jsontype = "array" })
  for i, x in ipairs(c.exceeded) do exceeded[i] = { name = x.name, delta = x.delta, threshold = x.threshold } end
  local faults = {}
  for _, x in ipairs(c.faults or {}) do faults[x.name] = x.why end
  return { pass = c.pass, round = c.round, sample = c.sample, rank = c.rank, host = c.host,
    rail = names and names[c.rail] or c.rail, deltas = setmetatable(c.deltas, { __jsontype = "object" }),
    unknown = next(c.unknown) and c.unknown or nil, exceeded = #exceeded > 0 and exceeded or nil,
    faults = next(faults) and faults or nil, packets = c.packets }
end

--- A record as one streamed JSON line (--json-lines): a pair, or a rank's
-- counters of a round and rail (an object with "deltas"); rail_names: rank +
-- 1 -> the rank's rail names.
function results.json_line(r, rail_names)
  if r.deltas then return dkjson.encode(results.counter_json(r, rail_names)) end
  local names = rail_names[r.src + 1]
  return dkjson.encode({ pass = r.pass, round = r.round, sample = r.sample, rail = names and names[r.rail] or r.rail,
    src = r.src, dst = r.dst, src_host = r.src_host, dst_host = r.dst_host, lat_us = r.lat_us,
    lat_p99_us = r.lat_p99_us, lat_p999_us = r.lat_p999_us, lat_max_us = r.lat_max_us, write_mbs = r.write_mbs,
    send_mbs = r.send_mbs, data_ok = r.data_ok, verified_bytes = r.verified_bytes, error = r.error,
    unmeasured = r.unmeasured, flows = r.flows })
end

--- The pairs of store for which pair_ok(x) and the counter records for which
-- counter_ok(c), as JSON lines (json_line) into the --json-lines file jl.
function results.write_lines(jl, store, rail_names, pair_ok, counter_ok)
  for _, x in ipairs(store.list) do
    if pair_ok(x) then jl:write(results.json_line(x, rail_names), "\n") end
  end
  for _, c in ipairs(store.counters) do
    if counter_ok(c) then jl:write(results.json_line(c, rail_names), "\n") end
  end
end

return results
