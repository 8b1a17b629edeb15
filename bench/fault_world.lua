--- bench/fault_world.lua: a rail-optimized leaf-spine fabric and the flows
-- fabric_matrix --flows measures over it, drawn with planted faults, for the
-- simulation of the fabric's localization at scale (bench/fault_sim.lua).
--
--   local fw = require "fault_world"
--   local w = fw.new{ nodes = 12500, rails = 8, leaf = 32, spines = 32, seed = 1 }
--   local links = w:random_links(k)     -- k distinct leaf-spine links at random: {plane, leaf, spine, key}
--   w:plant{ gray = { {plane, leaf, spine, key, loss}, ... }, one_way = true|nil, dead_spine = {plane, s},
--            down_spine = {plane, s}, host_loss = { {rank, rail, loss}, ... }, slow = { rank, ... } }
--   local st = { records = 0, flows = 0, view_records = 0, view_flows = 0 }
--   w:round(k, { view = "standout"|"all", mode = "known"|"traced"|"candidates" }, flows, st)  -- appends to flows
--   w.topology_text                     -- the fabric as Slurm's topology.conf, with #ibverbs planes
--
-- The fabric: nodes hosts ("node00001", ...: rank r is host r + 1), in order
-- under leaves of `leaf` hosts; one plane per rail (rail k of every host
-- under plane k's leaf: "p<k>-leaf<i>"), each leaf linked to each of the
-- plane's `spines` spines ("p<k>-spine<j>"); a link's key is its two switch
-- names sorted, " -- " between ("p1-leaf7 -- p1-spine3").  Host (rank r,
-- rail k) has the address 10.k.hi.lo (hi.lo: r as two bytes).
--
-- ECMP: a leaf sends a packet up to the spine a hash of its 5-tuple picks
-- (source and destination addresses, UDP source port, 4791), a hash of that
-- leaf's own seed; a spine has one link down to each leaf.  A flow's ping
-- goes a -> b on one path, its pong b -> a on the path b's leaf picks for
-- the reversed tuple (the same source port: both ends set the flow label).
-- A spine down (down_spine) is out of its plane's hashes (failed over).
--
-- A flow of the measured pair a -> b on rail k (fabric_matrix --flows F: F
-- RC QPs, F labels, fabric_matrix's rule; -n split among them: samples 62 or
-- 63 of 500): its ping-pong samples each stall when the ping or the pong is
-- lost (a lost frame costs an RC ack timeout): stalls ~ Binomial(samples,
-- 1 - (1 - l_ping)(1 - l_pong)), l the loss along that direction's links
-- (a gray link loses `loss` of the frames each way; one_way: up to the spine
-- only), both host links (host_loss: each way) and p_stall (the background:
-- a host hiccup past 100 x the median).  noise_bad of the flows, at random,
-- stall at 5 % of their samples (a host busy for a while).  A flow through a
-- dead spine (links up, frames dropped) fails.  Latency 1.9 us one way and
-- both bandwidths (46,000 and 45,500 MB/s a pair, a flow its share) with
-- 2 % and 0.5 % noise; a slow node's flows at 45 % bandwidth.  A loss costs
-- the bandwidth one frame (the NIC resends it alone): no bandwidth signal.
--
-- What reaches rank 0 (view): "standout", as fabric_matrix past 16 ranks:
-- the flows of a pair record (one direction) when one of them stalled or
-- failed, or when the pair fails on its figures (here a slow node's pairs:
-- a pair's bandwidth, flows x its slowest flow's, is the healthy one's but
-- for them); "all": every flow, as up to 16 ranks.  The path a flow carries (mode): "known", every link its ping
-- and pong crossed (flow.path); "traced", its ping's hops (flow.hops: switch
-- names, then flow.dst), as --trace finds them; "candidates", none (the
-- localization takes the topology's candidate paths).  flow.crossed (not
-- the tool's): the planted fabric faults it crossed, for the scoring.
local schedule = require "ibverbs.bringup.matrix.schedule"

local world = {}

world.DEFAULTS = { nodes = 12500, rails = 8, leaf = 32, spines = 32, flows = 8, lat_iters = 500, seed = 1,
  p_stall = 1e-5, noise_bad = 1e-4, lat_us = 1.9, write_mbs = 46000, send_mbs = 45500, slow_bw = 0.45 }

local M = 2147483647 -- Park-Miller: exact in doubles, the same draws under lua5.4 and luajit
local LABELS = 0x3fff
local DPORT = 4791

--- A random generator: r() in [0, 1), from seed.
function world.random(seed)
  local x = (seed or 1) % (M - 1) + 1
  return function()
    x = x * 16807 % M
    return (x - 1) / (M - 1)
  end
end

--- The key of the link between switches x and y.
function world.key(x, y)
  if y < x then x, y = y, x end
  return x .. " -- " .. y
end

--- The ECMP choice of a switch of seed among k: a hash of the 5-tuple (addresses as integers).
function world.hash(seed, src, dst, sport, k)
  local h = seed
  h = (h * 31 + src) % M * 16807 % M
  h = (h * 31 + dst) % M * 16807 % M
  h = (h * 31 + sport) % M * 16807 % M
  h = (h * 31 + DPORT) % M * 16807 % M
  h = h * 16807 % M
  return h % k
end

--- The UDP source port of flow j of F of src -> dst on rail (fabric_matrix's labels: 0xc000 + label).
function world.sport(src, dst, rail, n, j)
  if n == 1 then return 0xc000 + (src * 7 + dst * 13 + rail) % LABELS end -- (one flow: from the QP numbers)
  local base = (src * 7919 + dst * 104729 + rail * 1299709) % LABELS
  return 0xc000 + 1 + (base + (j - 1) * math.floor(LABELS / n)) % LABELS
end

local W = {}
W.__index = W

-- The fabric as topology.conf text: plane 1 in Slurm's lines, the others in #ibverbs lines with Rail=.
local function conf_text(w)
  local lines = {}
  for p = 1, w.rails do
    local mark, rail = p == 1 and "" or "#ibverbs ", p == 1 and "" or (" Rail=" .. p)
    for l = 1, w.nleaves do
      lines[#lines + 1] = string.format("%sSwitchName=p%d-leaf%d Nodes=node[%05d-%05d]%s", mark, p, l,
        (l - 1) * w.leaf + 1, math.min(w.nodes, l * w.leaf), rail)
    end
    for s = 1, w.spines do
      lines[#lines + 1] = string.format("%sSwitchName=p%d-spine%d Switches=p%d-leaf[1-%d]", mark, p, s, p, w.nleaves)
    end
  end
  return table.concat(lines, "\n") .. "\n"
end

--- A fabric of opts (world.DEFAULTS), no fault planted.
function world.new(opts)
  local w = setmetatable({}, W)
  for k, v in pairs(world.DEFAULTS) do w[k] = v end
  for k, v in pairs(opts or {}) do w[k] = v end
  local function whole(k, lo, hi)
    local v = w[k]
    if type(v) ~= "number" or v ~= math.floor(v) or v < lo or v > hi then
      error(string.format("fault_world: %s: a whole number from %d to %d expected, got %s", k, lo, hi, tostring(v)), 3)
    end
  end
  whole("nodes", 4, 65535) -- (an address holds the rank in two bytes)
  whole("rails", 1, 63)
  whole("leaf", 1, 65535)
  whole("spines", 1, 65535)
  whole("flows", 1, 16)
  whole("lat_iters", 2, 1e9)
  w.r = world.random(w.seed)
  w.nleaves = math.ceil(w.nodes / w.leaf)
  w.names, w.leaf_of = {}, {}
  for r = 0, w.nodes - 1 do
    w.names[r] = string.format("node%05d", r + 1)
    w.leaf_of[r] = math.floor(r / w.leaf) + 1
  end
  w.leaf_name, w.spine_name, w.keys, w.seeds = {}, {}, {}, {}
  for p = 1, w.rails do
    w.leaf_name[p], w.spine_name[p], w.keys[p], w.seeds[p] = {}, {}, {}, {}
    for s = 1, w.spines do w.spine_name[p][s] = string.format("p%d-spine%d", p, s) end
    for l = 1, w.nleaves do
      w.leaf_name[p][l] = string.format("p%d-leaf%d", p, l)
      w.seeds[p][l] = 1 + math.floor(w.r() * (M - 2))
      w.keys[p][l] = {}
      for s = 1, w.spines do w.keys[p][l][s] = world.key(w.leaf_name[p][l], w.spine_name[p][s]) end
    end
  end
  w.samples = {}
  for j = 1, w.flows do -- pair_traffic's split of -n among the flows
    w.samples[j] = w.flows == 1 and w.lat_iters or math.max(2, math.floor(w.lat_iters / w.flows)
      + (j <= w.lat_iters % w.flows and 1 or 0))
  end
  w.topology_text = conf_text(w)
  w:plant({})
  return w
end

--- The address of rank r's rail as an integer (10.rail.hi.lo) and as text.
function world.addr(r, rail) return 167772160 + rail * 65536 + r end
function world.addr_text(r, rail) return string.format("10.%d.%d.%d", rail, math.floor(r / 256), r % 256) end

--- k distinct leaf-spine links at random: {plane, leaf, spine, key} each.
function W:random_links(k)
  local out, seen = {}, {}
  while #out < k do
    local p, l, s = 1 + math.floor(self.r() * self.rails), 1 + math.floor(self.r() * self.nleaves),
      1 + math.floor(self.r() * self.spines)
    local key = self.keys[p][l][s]
    if not seen[key] then seen[key] = true; out[#out + 1] = { p, l, s, key } end
  end
  return out
end

--- Plants faults (replacing any): f.gray {{plane, leaf, spine, key, loss}, ...}, f.one_way (gray loss up
-- to the spine only), f.dead_spine {plane, s} (frames dropped), f.down_spine {plane, s} (failed over),
-- f.host_loss {{rank, rail, loss}, ...}, f.slow {rank, ...}.
function W:plant(f)
  self.faults = f
  self.up, self.down = {}, {} -- per plane, leaf * spines index: the loss of a gray link each way
  self.dead, self.live = {}, {}
  for p = 1, self.rails do
    self.up[p], self.down[p], self.live[p] = {}, {}, {}
    for s = 1, self.spines do
      local down = f.down_spine and f.down_spine[1] == p and f.down_spine[2] == s
      if not down then self.live[p][#self.live[p] + 1] = s end
    end
  end
  for _, g in ipairs(f.gray or {}) do
    local i = (g[2] - 1) * self.spines + g[3]
    self.up[g[1]][i] = g[5]
    if not f.one_way then self.down[g[1]][i] = g[5] end
  end
  if f.dead_spine then self.dead[f.dead_spine[1]] = f.dead_spine[2] end
  self.host_loss = {}
  for _, h in ipairs(f.host_loss or {}) do
    self.host_loss[h[1]] = self.host_loss[h[1]] or {}
    self.host_loss[h[1]][h[2]] = h[3]
  end
  self.slow = {}
  for _, r in ipairs(f.slow or {}) do self.slow[r] = true end
  self.q0 = {} -- P(no stall) of a flow of s samples on a clean path
  for _, s in ipairs(self.samples) do self.q0[s] = (1 - self.p_stall) ^ s end
end

-- A Binomial(n, p) draw by inversion of u (uniform in [0, 1)); n p small.
local function binomial(u, n, p)
  if p <= 0 then return 0 end
  if p >= 1 then return n end
  local k, pk = 0, (1 - p) ^ n
  local cdf, odds = pk, p / (1 - p)
  while u > cdf and k < n do
    pk = pk * (n - k) / (k + 1) * odds
    k = k + 1
    cdf = cdf + pk
  end
  return k
end
world.binomial = binomial

-- About a normal draw (three uniforms: mean 0, sd 1).
local function gauss(r) return (r() + r() + r() - 1.5) * 2 end

local FAILED = "transport retry counter exceeded"

-- The links flow j's ping and pong crossed (each once), for the "known" mode.
local function both_ways(keys, la, lb, sf, sr)
  if la == lb then return {} end
  if sf == sr then return { keys[la][sf], keys[lb][sf] } end
  return { keys[la][sf], keys[lb][sf], keys[lb][sr], keys[la][sr] }
end

-- Draws the F flows of record src -> dst on plane p into the scratch arrays (self.buf): their spines each
-- way, stalls, failure, planted faults crossed.  Whether one stalled or failed.
function W:draw(src, dst, p)
  local b, F, S, r = self.buf, self.flows, self.spines, self.r
  local la, lb = self.leaf_of[src], self.leaf_of[dst]
  local ia, ib = world.addr(src, p), world.addr(dst, p)
  local live, seeds, up, down, dead = self.live[p], self.seeds[p], self.up[p], self.down[p], self.dead[p]
  local nl = #live
  local hl = self.host_loss
  local ha, hb = hl[src] and hl[src][p] or 0, hl[dst] and hl[dst][p] or 0
  local any = false
  for j = 1, F do
    local sport = world.sport(src, dst, p, F, j)
    local s = self.samples[j]
    local sf, sr, qping, qpong, crossed, failed = 0, 0, (1 - ha) * (1 - hb), (1 - ha) * (1 - hb), false, false
    if la ~= lb then
      sf = live[world.hash(seeds[la], ia, ib, sport, nl) + 1]
      sr = live[world.hash(seeds[lb], ib, ia, sport, nl) + 1]
      local g1, g2 = up[(la - 1) * S + sf], down[(lb - 1) * S + sf] -- the ping: up from a's leaf, down to b's
      local g3, g4 = up[(lb - 1) * S + sr], down[(la - 1) * S + sr] -- the pong: up from b's leaf, down to a's
      if g1 or g2 or g3 or g4 then
        crossed = true
        qping = qping * (1 - (g1 or 0)) * (1 - (g2 or 0))
        qpong = qpong * (1 - (g3 or 0)) * (1 - (g4 or 0))
      end
      if dead and (sf == dead or sr == dead) then crossed, failed = true, true end
    end
    local u, st = r(), 0
    if qping == 1 and qpong == 1 then
      if u >= self.q0[s] then st = binomial(u, s, self.p_stall) end
    else
      st = binomial(u, s, 1 - qping * qpong * (1 - self.p_stall))
    end
    if r() < self.noise_bad then st = math.max(st, math.ceil(0.05 * s)) end
    b.sport[j], b.sf[j], b.sr[j], b.st[j], b.failed[j], b.crossed[j] = sport, sf, sr, st, failed, crossed
    any = any or failed or st > 0
  end
  return any
end

-- Record src -> dst on plane p (drawn: self.buf) as flow records, appended to out.
function W:records(src, dst, p, mode, out)
  local b, F, keys = self.buf, self.flows, self.keys[p]
  local la, lb = self.leaf_of[src], self.leaf_of[dst]
  local bw = (self.slow[src] or self.slow[dst]) and self.slow_bw or 1
  local r = self.r
  local dtext = mode == "traced" and world.addr_text(dst, p) or nil
  for j = 1, F do
    local f = { a = src, b = dst, rail = p, host_a = self.names[src], host_b = self.names[dst], sport = b.sport[j],
      dport = DPORT, samples = self.samples[j], crossed = b.crossed[j] or nil }
    if b.failed[j] then f.failed = FAILED else
      f.stalls = b.st[j]
      f.lat_us = self.lat_us * (1 + 0.02 * gauss(r))
      f.write_mbs = self.write_mbs / F * (1 + 0.005 * gauss(r)) * bw
      f.send_mbs = self.send_mbs / F * (1 + 0.005 * gauss(r)) * bw
    end
    if mode == "known" then f.path = both_ways(keys, la, lb, b.sf[j], b.sr[j])
    elseif mode == "traced" then
      f.dst = dtext
      local ln = self.leaf_name[p]
      f.hops = la == lb and { ln[la], dtext } or { ln[la], self.spine_name[p][b.sf[j]], ln[lb], dtext }
    end
    out[#out + 1] = f
  end
end

--- The flows of round k of the tournament that reach rank 0 (o.view: "standout" or "all"; o.mode: "known",
-- "traced", "candidates"), appended to out; stats (counts added): records, flows, view_records, view_flows.
function W:round(k, o, out, stats)
  self.sched = self.sched or schedule.new("tournament", self.nodes)
  self.buf = self.buf or { sport = {}, sf = {}, sr = {}, st = {}, failed = {}, crossed = {} }
  local all = o.view == "all"
  for src = 0, self.nodes - 1 do
    local dst = self.sched:partners(src, k)
    if dst then -- (each pair both ways: the record src -> dst here, dst -> src at dst's turn)
      for p = 1, self.rails do
        local stands = self:draw(src, dst, p)
        stats.records, stats.flows = stats.records + 1, stats.flows + self.flows
        if all or stands or self.slow[src] or self.slow[dst] then
          stats.view_records, stats.view_flows = stats.view_records + 1, stats.view_flows + self.flows
          self:records(src, dst, p, o.mode or "known", out)
        end
      end
    end
  end
  return out, stats
end

return world
