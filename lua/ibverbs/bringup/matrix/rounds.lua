--- fabric_matrix.lua's rounds: a schedule's rounds run in blocks of `block`
-- rounds, one exchange through the fabric group (f:route) per block.  The QPs
-- of block b+1 are connected during block b, before the exchange that ends it,
-- so the exchange is the only barrier: one per block (per round when block is
-- 1).  It carries this rank's results of block b (lua/ibverbs/bringup/matrix/results.lua)
-- and its QP numbers for block b+2 to their peers, each message tagged with
-- its round ("k#...").  Within a block a pair starts when both ends reach it:
-- the echo side posts its first receive then, and the first ping waits for it
-- (RNR, retried without limit).  With cfg.limits_of, every rank reads its
-- rails' port counters just before and just after each round's traffic and
-- reports the deltas, the packets and what cannot be judged (a saturated or
-- unreadable counter) with the round's results (lua/ibverbs/bringup/matrix/pair_counters.lua).
-- With cfg.watch_flaps, every rank also checks its rails' ports after each
-- round (lua/ibverbs/bringup/flaps.lua: state, link_downed, port events since the
-- last check) and reports a port that went down or came back.
-- Rank 0 stores what the ranks report, streams it (--json-lines) and says how
-- far the run is.  A reduced pass (a ledger given: the first) sends nothing
-- of its results to rank 0 but how many pairs finished, summed by the
-- relays: each rank keeps its lines, and sends each partner its lines about
-- it and its counters ("k@..." with the block's exchange: ibverbs.bringup.matrix.ledger).
--
--   local rounds = require "ibverbs.bringup.matrix.rounds"
--   local runner = rounds.new{ f = f, rails = rails, traffic = tr, nrails = n, block = b, limit = s, ... }
--   runner:run(sched, R, "first", store)
local socket = require "socket"
local results = require "ibverbs.bringup.matrix.results"
local traffic = require "ibverbs.bringup.matrix.pair_traffic"
local pcount = require "ibverbs.bringup.matrix.pair_counters"
local flaps = require "ibverbs.bringup.flaps"

local rounds = {}

--- "1 h 05 min", "2 min 03 s", "4.2 s".
function rounds.fmt_time(s)
  if s >= 3600 then return string.format("%d h %02d min", math.floor(s / 3600), math.floor(s % 3600 / 60)) end
  if s >= 60 then return string.format("%d min %02d s", math.floor(s / 60), math.floor(s % 60)) end
  return string.format("%.1f s", s)
end
local fmt_time = rounds.fmt_time

local R = {}
R.__index = R

--- A runner: cfg.f (the group), cfg.rails, cfg.traffic (pair_traffic), cfg.nrails,
-- cfg.block, cfg.limit (an exchange's time limit), cfg.fault ([rank][rail] = why),
-- cfg.rail_names ([rank + 1] = names), cfg.jl (the --json-lines file, rank 0),
-- cfg.say (a progress line), cfg.fatal (an exchange that failed), cfg.limits_of
-- (rail index -> its counter thresholds; nil: no counters read), cfg.watch_flaps
-- (check the rails' ports for flaps after every round, from now on).
function rounds.new(cfg)
  local r = setmetatable({}, R)
  for k, v in pairs(cfg) do r[k] = v end
  if cfg.watch_flaps then r.flap_watch = flaps.rails_watch(cfg.rails) end
  r.n, r.me = cfg.f.size, cfg.f.rank
  -- this rank's time in the round exchanges (and, all_cpu, in the rounds as a whole)
  r.ctl = { seconds = 0, cpu = 0, rounds = 0, exchanges = 0, max = 0, all_cpu = 0 }
  return r
end

-- The ups of a reduced pass's exchange: the pairs finished, summed.
local function sum(list)
  local n = 0
  for _, s in ipairs(list) do n = n + (tonumber(s) or 0) end
  return tostring(n)
end

-- One exchange: msgs to their ranks, up to rank 0 (reduced on the way with
-- reduce); what came, and (rank 0) every up or their reduction.
function R:exchange(msgs, up, reduce)
  local ctl = self.ctl
  local t0, c0 = socket.gettime(), os.clock()
  local got, ups = self.f:route(msgs, up, self.limit, reduce)
  local dt = socket.gettime() - t0
  ctl.seconds, ctl.cpu, ctl.exchanges = ctl.seconds + dt, ctl.cpu + os.clock() - c0, ctl.exchanges + 1
  ctl.max = math.max(ctl.max, dt)
  if not got then self.fatal(ups) end
  return got, ups
end

-- Why this rank cannot measure with peer on rail k (or nil).
function R:blocked(k, peer)
  local f, fault = self.f, self.fault
  if not f:alive(peer) then return f:name(peer) .. " unreachable" end
  local pf = fault[peer] and fault[peer][k]
  if pf then return f:name(peer) .. ": " .. pf end
  local mf = fault[self.me] and fault[self.me][k]
  if mf then return f:name(self.me) .. ": " .. mf end
  if not self.rails[k] then return "no rail " .. k end
  return nil
end

-- One end of round k with peer on rail ki: its QP, or why it is skipped.
function R:new_end(ki, kind, peer)
  local rail = self.rails[ki]
  local why = self:blocked(ki, peer)
  if why then return { rail = rail or { index = ki }, kind = kind, peer = peer, skip = why } end
  if rail.dry then return { rail = rail, kind = kind, peer = peer, dry = true } end
  local e = self.traffic:new_end(rail, kind, peer)
  if e.err then e.skip = self.f:name(self.me) .. ": " .. e.err; traffic.close_end(e) end
  return e
end

-- Round k's ends on this rank, and the messages that give the peers their QPs.
function R:make(s, k)
  local dst, src = s:partners(self.me, k)
  local ends, msgs, to = {}, {}, {}
  for ki = 1, self.nrails do
    for _, side in ipairs({ { "out", dst }, { "in", src } }) do
      local kind, peer = side[1], side[2]
      if peer then
        local e = self:new_end(ki, kind, peer)
        ends[#ends + 1] = e
        local info = not e.skip and traffic.info(self.rails[ki], e) or "-"
        to[peer] = to[peer] or {}
        to[peer][#to[peer] + 1] = kind .. " " .. ki .. " " .. info
      end
    end
  end
  for peer, l in pairs(to) do msgs[#msgs + 1] = { peer, table.concat(l, ";") } end
  self.live[k] = { ends = ends, msgs = msgs }
end

-- The peers' QPs for the rounds of one block, and (a reduced pass) the
-- partners' lines of the block's rounds ("k@": into the ledger).
function R:learn(got)
  for _, m in ipairs(got) do
    local k, body = tostring(m[2]):match("^(%d+)#(.*)$")
    if not k and self.ledger then
      local rk, lines = tostring(m[2]):match("^(%d+)@(.*)$")
      if rk then self.ledger:keep(tonumber(rk), m[1], lines) end
    end
    local rd = k and self.live[tonumber(k)]
    if rd then
      rd.remote = rd.remote or {}
      for item in body:gmatch("[^;]+") do
        local kind, ki, info = item:match("^(%a+) (%d+) (.*)$")
        if kind then rd.remote[m[1] .. " " .. kind .. " " .. ki] = info end
      end
    end
  end
end

-- Round k's ends connected to their peers' (or skipped, saying why).
function R:connect(k)
  local rd = self.live[k]
  if not rd then return end
  local f = self.f
  for _, e in ipairs(rd.ends) do
    if not e.skip then
      -- my out end meets the peer's in end, and the other way round
      local key = e.peer .. " " .. (e.kind == "out" and "in" or "out") .. " " .. e.rail.index
      local theirs = rd.remote and rd.remote[key]
      local rem = theirs and theirs ~= "-" and traffic.parse_info(theirs)
      if not f:alive(e.peer) then
        e.skip = f:name(e.peer) .. " unreachable"
      elseif not rem then
        e.skip = theirs == "-" and (f:name(e.peer) .. ": cannot take part") or (f:name(e.peer) .. " sent no QP")
      elseif e.dry then
        e.connected = true
      else
        self.traffic:connect(e, rem)
        if e.err then e.res = { error = e.err } end
      end
    end
  end
end

-- Round k's traffic; its result lines.
function R:measure(k)
  local f, rd = self.f, self.live[k]
  local live = {}
  for _, e in ipairs(rd.ends) do
    if not e.skip and not f:alive(e.peer) then e.skip = f:name(e.peer) .. " unreachable" end
    if not e.skip and not e.dry then live[#live + 1] = e end
  end
  local before, lost = nil, nil
  if self.limits_of then before, lost = pcount.read(self.rails) end
  self.traffic:run(live)
  local text = "@" .. k .. "\n" .. results.lines(rd.ends)
  local counters = ""
  if before then
    local after, lost_after = pcount.read(self.rails)
    counters = pcount.lines(before, after, self.limits_of, { lost, lost_after }, function(ki) return self.rails[ki] end)
  end
  if counters ~= "" then text = text .. "\n" .. counters end
  if self.ledger then self:to_partners(k, counters) end
  if self.flap_watch then -- a port that went down (or came back) since the last round's end
    local at = os.date("!%Y-%m-%dT%H:%M:%SZ")
    for _, x in ipairs(flaps.rails_check(self.flap_watch)) do
      text = text .. "\n" .. results.flap_line(x.index, at, x.words)
    end
  end
  return text
end

-- A reduced pass: round k's lines about each partner, and this rank's
-- counters, for that partner (sent with the block's exchange: "k@lines").
function R:to_partners(k, counters)
  local rd, by, order = self.live[k], {}, {}
  for _, e in ipairs(rd.ends) do
    if not by[e.peer] then by[e.peer] = {}; order[#order + 1] = e.peer end
    table.insert(by[e.peer], e)
  end
  rd.partner_msgs = {}
  for _, peer in ipairs(order) do
    local lines = results.lines(by[peer])
    local text = "@" .. k .. (lines ~= "" and ("\n" .. lines) or "") .. (counters ~= "" and ("\n" .. counters) or "")
    rd.partner_msgs[#rd.partner_msgs + 1] = { peer, k .. "@" .. text }
  end
end

-- Rank 0: every rank's lines of a block into the store (and the streamed lines).
function R:absorb(ups, first_round, pass, store)
  local touched = self.jl and {}
  local done = 0
  for r = 0, self.n - 1 do
    if ups[r + 1] then
      done = done + store:absorb(r, ups[r + 1], first_round, pass, function(x) return self.f:name(x) end, touched)
    end
  end
  for rec in pairs(touched or {}) do self.jl:write(results.json_line(rec, self.rail_names), "\n") end
  if self.jl then self.jl:flush() end
  return done
end

-- Rank 0: how many pairs the run measures (a pattern's rounds all have as many
-- pairs as its first; a list's, a pairs file or a retest, vary).
function R:total_pairs(s, nrounds)
  local total = 0
  for k = 0, s.list and nrounds - 1 or math.min(nrounds, 1) - 1 do
    for r = 0, self.n - 1 do if s:partners(r, k) then total = total + self.nrails end end
  end
  return s.list and total or total * nrounds
end

--- Runs rounds 0 .. nrounds-1 of schedule s (pass: "first" or "retest");
-- rank 0 keeps the results in store.  With led (a ledger: the first pass
-- reduced), the results stay on the ranks instead: each rank keeps its
-- lines and its partners' in led, and rank 0 learns only how many pairs
-- finished (ibverbs.bringup.matrix.reduction takes the pass up afterwards).
function R:run(s, nrounds, pass, store, led)
  self.ledger = led
  if nrounds == 0 then return end
  local t_start, cpu_start = socket.gettime(), os.clock()
  local total = self.me == 0 and self:total_pairs(s, nrounds) or 0
  local done, last_print, block = 0, 0, self.block
  local nblocks = math.ceil(nrounds / block)
  self.live = {} -- k -> {ends = {...}, msgs = {...}, remote = {...}}
  local function each(b, fn)
    for k = b * block, math.min((b + 1) * block, nrounds) - 1 do fn(k) end
  end
  local function msgs_of(b)
    local l = {}
    if b < nblocks then
      each(b, function(k)
        for _, m in ipairs(self.live[k].msgs) do l[#l + 1] = { m[1], k .. "#" .. m[2] } end
      end)
    end
    return l
  end
  local function make(k) self:make(s, k) end
  local function connect(k) self:connect(k) end
  each(0, make)
  self:learn(self:exchange(msgs_of(0), nil))
  each(0, connect)
  if nblocks > 1 then each(1, make) end
  self:learn(self:exchange(msgs_of(1), nil))
  for b = 0, nblocks - 1 do
    local lines, finished = {}, 0
    each(b, function(k)
      lines[#lines + 1] = self:measure(k)
      for _, e in ipairs(self.live[k].ends) do if e.kind == "out" then finished = finished + 1 end end
    end)
    if b + 1 < nblocks then each(b + 1, connect) end
    if b + 2 < nblocks then each(b + 2, make) end
    local msgs = msgs_of(b + 2)
    each(b, function(k)
      for _, m in ipairs(self.live[k].partner_msgs or {}) do msgs[#msgs + 1] = m end
    end)
    local got, ups
    if self.ledger then -- the lines stay here (the ledger); rank 0 gets the pairs finished, summed on the way up
      each(b, function(k) self.ledger:keep(k, self.me, lines[k - b * block + 1]) end)
      got, ups = self:exchange(msgs, tostring(finished), sum)
    else
      got, ups = self:exchange(msgs, table.concat(lines, "\n"))
    end
    self:learn(got)
    each(b, function(k)
      for _, e in ipairs(self.live[k].ends) do traffic.close_end(e) end
      self.live[k] = nil
      if self.ledger then self.ledger:stream(k) end
    end)
    local last = math.min((b + 1) * block, nrounds) - 1
    self.ctl.rounds = self.ctl.rounds + last - b * block + 1
    if self.me == 0 then
      done = done + (self.ledger and (tonumber(ups) or 0) or self:absorb(ups, b * block, pass, store))
      local t = socket.gettime()
      if t - last_print >= 1 or last == nrounds - 1 then
        last_print = t
        local el = t - t_start
        self.say("fabric_matrix: %s round %d/%d, %d/%d pairs, %s, about %s left", pass, last + 1, nrounds, done,
          total, fmt_time(el), fmt_time(el / (last + 1) * (nrounds - last - 1)))
      end
    end
  end
  if store then store.done = store.done + done end
  self.ctl.all_cpu = self.ctl.all_cpu + os.clock() - cpu_start
end

return rounds
