--- A rank's ledger of fabric_matrix's first pass: the result lines of the
-- pairs it was an end of, kept on the rank until the pass's reference is
-- known (ibverbs.bringup.matrix.reduction), so that rank 0 never reads them all.
-- After each round a rank sends each partner its lines about that partner
-- and its port counters (rounds.lua: a "k@" message with the round's
-- exchange), so both ends of a pair hold the whole pair: its out end's
-- figures, its in end's data check, both ends' counters of the round.  A
-- pair is its sender's (its src's), or its receiver's when the sender is
-- gone: the one rank that counts it in the summary and reports it.  Memory:
-- the lines of the rank's own pairs, O(N) a rail.
--
--   local ledger = require "ibverbs.bringup.matrix.ledger"
--   local l = ledger.new{ f = f, nrails = n, rail_names = names, sched = s, rounds = R1, jl = file }
--   l:keep(k, rank, text)                       -- round k's lines of this rank or of a partner
--   l:stream(k)                                 -- round k's own pairs as JSON lines (--json-lines)
--   local s = l:summary()                       -- pass_summary of the pairs it owns
--   local text = l:failing(refs, opts, full)    -- the lines of its failing pairs (all its lines when full)
local results = require "ibverbs.bringup.matrix.results"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local findings = require "ibverbs.bringup.matrix.findings"
local summary = require "ibverbs.bringup.matrix.pass_summary"
local flows = require "ibverbs.bringup.matrix.flows"

local ledger = {}

local L = {}
L.__index = L

--- A ledger: cfg.f (the group), cfg.nrails, cfg.rail_names (rank + 1 -> names),
-- cfg.sched (the first pass's schedule), cfg.rounds (how many of its rounds
-- run), cfg.jl (this rank's --json-lines file, or nil).
function ledger.new(cfg)
  local l = setmetatable({ held = {}, streamed = {} }, L)
  for k, v in pairs(cfg) do l[k] = v end
  l.me, l.n = cfg.f.rank, cfg.f.size
  return l
end

--- Keeps round k's lines of rank (this rank's own, or a partner's about this one).
function L:keep(k, rank, text)
  local h = self.held[k]
  if not h then h = {}; self.held[k] = h end
  h[rank] = h[rank] and (h[rank] .. "\n" .. text) or text
end

--- Whether this rank reports pair record x: its sender's, the receiver's when the sender is gone.
function L:owns(x)
  local f = self.f
  if f:alive(x.src) then return x.src == self.me end
  return x.dst == self.me
end

--- Round k's pairs of this rank as a store (results.lua): its lines and its
-- partners', the pairs it owns made whole (findings.complete_pair), the
-- counters attributed (pair_counters.attribute); nil when it sat the round out.
function L:round_store(k)
  local f, me = self.f, self.me
  local dst, src = self.sched:partners(me, k)
  if not dst and not src then return nil end
  local store = results.store(self.nrails, self.n, f.hosts)
  local name = function(r) return f:name(r) end
  for rank, text in pairs(self.held[k] or {}) do store:absorb(rank, text, k, "first", name) end
  for ki = 1, self.nrails do
    if dst then findings.complete_pair(store, ki, me, dst, k, f) end
    if src and not f:alive(src) then findings.complete_pair(store, ki, src, me, k, f) end
  end
  for _, x in ipairs(store.list) do findings.complete_ends(x, f) end
  pcount.attribute(store, self.rail_names)
  return store
end

--- Round k's pairs this rank owns, and its own counters, as JSON lines into
-- its --json-lines file (once each round).
function L:stream(k)
  if not self.jl or self.streamed[k] then return end
  self.streamed[k] = true
  local store = self:round_store(k)
  if not store then return end
  results.write_lines(self.jl, store, self.rail_names, function(x) return self:owns(x) end,
    function(c) return c.rank == self.me end)
  self.jl:flush()
end

--- Every round's store, in order: fn(k, store).
function L:each_round(fn)
  for k = 0, self.rounds - 1 do
    local store = self:round_store(k)
    if store then fn(k, store) end
  end
end

--- The summary (pass_summary) of the pairs this rank owns.
function L:summary()
  local s = summary.new()
  self:each_round(function(_, store)
    for _, x in ipairs(store.list) do
      if self:owns(x) then s:add(x) end
    end
  end)
  return s
end

-- The lines of text that fn(line) keeps.
local function pick(text, fn)
  local out = {}
  for line in (text or ""):gmatch("[^\n]+") do
    if fn(line) then out[#out + 1] = line end
  end
  return out
end

-- The lines of pair x of round k: its sender's end (and its flows), its receiver's, both ends' counters of its rail.
local function pair_lines(held, k, x)
  local chunks = {}
  for _, side in ipairs({ { x.src, "^[OUDL] " .. x.rail .. " " .. x.dst .. "[ |]" },
    { x.dst, "^I " .. x.rail .. " " .. x.src .. "[ |]" } }) do
    local l = pick(held[side[1]], function(line)
      return line:find(side[2]) or line:find("^C " .. x.rail .. " ") ~= nil
    end)
    if #l > 0 then chunks[#chunks + 1] = "=" .. side[1] .. "\n@" .. k .. "\n" .. table.concat(l, "\n") end
  end
  return chunks
end

--- What this rank sends rank 0 once the pass's reference is known: the
-- lines ("=rank", "@k", then that rank's lines) of every pair it owns that
-- fails against refs (rail -> diagnose.reference's) with opts or whose flows
-- stand out (a flow failed or stalled: ibverbs.bringup.matrix.flows), its own
-- flaps and its own counter lines that fail their port ('!'), and per rail
-- "W rank rail n" (the partners it measured a pair with on that rail) when
-- one of its pairs failed or it measured none.  full: every line of its own instead, and those of
-- a dead partner about it (every pair then reaches rank 0: the report's
-- matrices).
function L:failing(refs, opts, full)
  local out, partners, flagged = {}, {}, false
  self:each_round(function(k, store)
    local own = self.held[k] and self.held[k][self.me]
    if full then -- its own lines, and a dead partner's about it (the pairs it owns now)
      for rank, text in pairs(self.held[k] or {}) do
        if rank == self.me or not self.f:alive(rank) then out[#out + 1] = "=" .. rank .. "\n" .. text end
      end
      return
    end
    local mine = pick(own, function(line) return line:find("^F ") or line:find("^C %d+ [^|]*|[^|]*!") end)
    if #mine > 0 then out[#out + 1] = "=" .. self.me .. "\n@" .. k .. "\n" .. table.concat(mine, "\n") end
    for ki = 1, self.nrails do
      diagnose.flag(store:of_rail(ki), opts, refs[ki] or diagnose.reference({}, opts.reference))
    end
    for _, x in ipairs(store.list) do
      partners[x.rail] = partners[x.rail] or {}
      if not x.unmeasured then partners[x.rail][x.src == self.me and x.dst or x.src] = true end
      if x.flagged then flagged = true end
      -- a pair whose flows stand out goes up too, its figures good or not: the diagnosis weighs its flows
      if (x.flagged or flows.stand_out(x)) and self:owns(x) then
        for _, c in ipairs(pair_lines(self.held[k], k, x)) do out[#out + 1] = c end
      end
    end
  end)
  for ki = 1, full and 0 or self.nrails do
    local n = 0
    for _ in pairs(partners[ki] or {}) do n = n + 1 end
    if flagged or n == 0 then table.insert(out, 1, string.format("W %d %d %d", self.me, ki, n)) end
  end
  return table.concat(out, "\n")
end

return ledger
