--- Faults inside the fabric: from fabric_matrix's flows (each one QP's
-- traffic of a measured pair and rail, its path through the switches known
-- or not) to `fabric` verdicts naming the switch link at fault, and the
-- pairs that fault explains (no node or link verdict for them: their ends
-- exit 0 and are never drained).  Pure functions; nothing printed.
--
--   local localize = require "ibverbs.bringup.matrix.localize"
--   local res = localize.run(flows, { topology = topo_or_nil, lat_factor = 2.1, bw_fraction = 0.93, ... })
--   res.verdicts   -- {kind = "fabric", located = true, link = "leaf1 -- spine1", links = {...}, switch = name|nil,
--                  --  flows = n, bad = m, failed = k, loss = x, lat_factor = x, clean_siblings = c, pairs = {...},
--                  --  rails = {...}, why = text, ranks = {}}, or {kind = "fabric", located = false, pair = {a, b},
--                  --  hosts = {host_a, host_b}, rail = i, ...}; pairs: {{a =, b =, rail =, hosts = {h1, h2}}, ...}
--   res.explained  -- set of localize.key(a, b, rail): the pairs whose badness the fabric explains
--   res.hosts      -- the host ends the bad flows point at ({host =, rail =, flows =, bad =}): left to the
--                  -- node and link diagnosis
--   res.flows, res.bad (bad flows), res.unexplained (bad flows no verdict nor host end explains),
--   res.noise (the fabric's), res.notes (the topology's on traced paths), res.ref (the flows' reference)
--
-- A flow: { a = rank, b = rank, rail = i, host_a =, host_b =, sport =, lat_us =, samples =, stalls =,
-- write_mbs =, send_mbs =, failed = why|nil, hops = {...}|nil, path = {link keys}|nil }.  Its path: flow.path
-- when given, else opts.topology:trace_path(flow) when it has hops, else the topology's candidate paths
-- topo:paths(host_a, host_b, rail) (the ECMP hash unknown: each of k paths weighs 1/k, as 007's votes
-- do; rail: for a topology of one plane per rail, one without planes ignores it), else none.  Links are
-- undirected, keyed "sw1 -- sw2" (the two switch names sorted).
--
-- 1. Bad flows: ibverbs.bringup.matrix.flow_flags (failed; stall rate above a floor and well above
--    the fabric's and its best sibling's; latency or bandwidth against the fabric's reference or its
--    best sibling's).  A flow that stalls as a bad one would but so does a sibling is suspect.
-- 2. The elements a flow with a path crosses: its switch links, and its two host ends (host, rail):
--    a fault at a host end (a NIC, its cable, the host) is bad on every path, and is the node
--    diagnosis' to name.
-- 3. The smallest set of elements that explains the bad flows, greedily (ibverbs.bringup.matrix.fabric_cover:
--    a weighted set cover in the spirit of NetBouncer, 007 and deTector): the element whose
--    unexplained bad weight times bad share is the highest first, when that share (among its flows
--    that nothing taken explains) is at least opts.hit_fraction and opts.noise_factor x the fabric's
--    noise, it explains opts.min_bad bad flows not yet explained or more, stands opts.z standard
--    deviations above what the noise gives as many flows, and the chance that the noise gives it
--    that share (Chernoff's bound on the binomial tail), times the elements tested, is below
--    opts.alpha.  The noise: the bad share of the flows that crossed nothing taken, searched again
--    until it stays.  Ties go to host ends.
-- 4. A link taken and every link crossed by exactly the same flows are one verdict (links): no
--    measurement from the hosts tells them apart; a host end among them makes it a host end's.
--    Two verdicts or more on the links of one switch none of whose other links is cleared are one
--    verdict on the switch (switch =).
-- 5. A pair is explained when a bad or suspect flow of it crossed a verdict's link, no bad one is a
--    host end's, and one of its flows is clean or no more of its bad or suspect flows crossed no
--    verdict than crossed one.
-- 6. Pairs whose flows have no path: a pair whose flows differ (opts.pair_min_bad bad or more and
--    some clean, the bad share at least opts.hit_fraction and well above the fabric's rate of
--    isolated bad flows) is a `fabric` verdict "not located", and explained.
-- Bad flows nothing explains stay for the existing (node, link) diagnosis of their pairs.
local diagnose = require "ibverbs.bringup.matrix.diagnose"
local flow_flags = require "ibverbs.bringup.matrix.flow_flags"
local measures = require "ibverbs.bringup.matrix.measures"
local cover = require "ibverbs.bringup.matrix.fabric_cover"

local localize = {}

localize.DEFAULTS = { hit_fraction = 0.25, min_bad = 3, noise_factor = 4, z = 3, alpha = 0.01, pair_min_bad = 2 }
for k, v in pairs(flow_flags.DEFAULTS) do localize.DEFAULTS[k] = v end

local LAT_SAID = 1.2 -- a verdict's text gives its latency factor from this up
local PAIRS_SAID = 4 -- and this many of its pairs by name

--- The key of a pair in res.explained: ranks (or host names) a, b, rail (diagnose.fabric_key).
localize.key = diagnose.fabric_key

local function options(opts)
  local o = {}
  for k, v in pairs(localize.DEFAULTS) do o[k] = v end
  for k, v in pairs(opts or {}) do o[k] = v end
  return o
end

-- Flow f's candidate paths (lists of link keys), or nil: flow.path, the traced path, the topology's.
local function paths_of(st, f, topo)
  if type(f.path) == "table" then return { f.path } end
  if not topo then return nil end
  if f.hops and topo.trace_path then
    local p, note = topo:trace_path(f)
    if note then st.notes[tostring(note)] = true end
    if p then return { p } end
  end
  if topo.paths and f.host_a and f.host_b then
    local k = tostring(f.host_a) .. "\0" .. tostring(f.host_b) .. "\0" .. tostring(f.rail)
    local ps = st.cache[k]
    if ps == nil then
      ps = topo:paths(f.host_a, f.host_b, f.rail) or false
      st.cache[k] = ps
    end
    return ps or nil
  end
  return nil
end

-- The flows' elements (cover.elements' state: st.E, st.W, first/last per flow): their host ends and
-- the links of their paths, each path of k weighing 1/k (a link on several paths: their sum).
local function build(st, flows, topo)
  local el = st.el
  for i, f in ipairs(flows) do
    local ps = paths_of(st, f, topo)
    for _, p in ipairs(ps or {}) do
      for _, key in ipairs(p) do
        if type(key) ~= "string" then
          error(string.format("localize.run: flow %d (%s <-> %s): its path: link keys (strings) expected, got %s",
            i, tostring(f.host_a or f.a), tostring(f.host_b or f.b), type(key)), 0)
        end
      end
    end
    if ps and #ps > 0 then
      st.first[i] = #st.E + 1
      local rail = f.rail or 1
      st.E[#st.E + 1], st.W[#st.W + 1] = el:host_end(f.host_a or f.a, rail), 1
      st.E[#st.E + 1], st.W[#st.W + 1] = el:host_end(f.host_b or f.b, rail), 1
      if #ps == 1 then
        for _, key in ipairs(ps[1]) do st.E[#st.E + 1], st.W[#st.W + 1] = el:link(key), 1 end
      else
        local w, at = 1 / #ps, {}
        for _, p in ipairs(ps) do
          for _, key in ipairs(p) do
            local e = el:link(key)
            if at[e] then st.W[at[e]] = st.W[at[e]] + w else
              st.E[#st.E + 1], st.W[#st.W + 1] = e, w
              at[e] = #st.E
            end
          end
        end
      end
      st.last[i] = #st.E
    end
  end
end

-- A list's median (sorted in place), or nil.
local function median(l)
  if #l == 0 then return nil end
  table.sort(l)
  return measures.quantile(l, 0.5)
end

-- The names of a pair ("node1 <-> node3").
local function pair_text(p) return tostring(p.hosts[1]) .. " <-> " .. tostring(p.hosts[2]) end

-- A verdict's entry for the pair of flow f: {a =, b =, rail =, hosts = {host_a, host_b}}.
local function pair_of(f)
  return { a = f.a, b = f.b, rail = f.rail or 1, hosts = { f.host_a or f.a, f.host_b or f.b } }
end

-- The evidence in words: "16 bad (2 failed; loss 1.9 %; latency 3.1 x the fabric's), 16 clean flows of
-- the same pairs on other paths; 4 pairs: node1 <-> node3, ..." (the pairs left out when one_pair).
local function evidence_text(v, one_pair)
  local how = {}
  if v.failed > 0 then how[#how + 1] = v.failed .. " failed" end
  if v.loss and v.loss > 0 then how[#how + 1] = string.format("loss %.2g %%", 100 * v.loss) end
  if v.lat_factor and v.lat_factor >= LAT_SAID then
    how[#how + 1] = string.format("latency %.3g x the fabric's", v.lat_factor)
  end
  local text = string.format("%d bad%s, %d clean flow%s of the same pair%s on other paths", v.bad,
    #how > 0 and (" (" .. table.concat(how, "; ") .. ")") or "", v.clean_siblings, v.clean_siblings == 1 and "" or "s",
    one_pair and "" or "s")
  if one_pair then return text end
  local names = {}
  for i, p in ipairs(v.pairs) do
    if i > PAIRS_SAID then names[#names + 1] = string.format("... %d more", #v.pairs - PAIRS_SAID); break end
    names[#names + 1] = pair_text(p)
  end
  return string.format("%s; %d pair%s: %s", text, #v.pairs, #v.pairs == 1 and "" or "s", table.concat(names, ", "))
end

--- A fabric verdict in words (its why): the link (or links, or switch) and the evidence.
function localize.text(v)
  if not v.located then
    return string.format("not located: %s (%s): %d flows, %s; their paths differ, and none is known (no "
      .. "--topology, no traced hops) to name the link", pair_text(v.pairs[1]),
      type(v.rail) == "number" and ("rail " .. v.rail) or tostring(v.rail), v.flows,
      evidence_text(v, true))
  end
  local what
  if v.switch then
    what = string.format("%s (every link of it bad or named: %s)", v.switch, table.concat(v.links, ", "))
  elseif #v.links > 1 then
    what = table.concat(v.links, " or ") .. " (every flow that crossed one crossed the others: the hosts cannot tell "
      .. "them apart)"
  else
    what = v.link
  end
  return string.format("%s: %d flow%s crossed it, %s", what, v.flows, v.flows == 1 and "" or "s", evidence_text(v))
end

-- The verdicts' evidence (one pass over the flows): flows crossing, bad, failed, the loss (the crossing
-- flows' stalls over their samples), the latency factor (the bad flows' median over the fabric's reference),
-- the pairs of the bad flows it explains, the clean flows of those pairs that did not cross it.
local function evidence(st, flows, verdicts, ref)
  local of, seen, lat, stalls, samples, pairsets = {}, {}, {}, {}, {}, {}
  for vi, v in ipairs(verdicts) do
    for _, e in ipairs(v.elements) do of[e] = vi end
    v.flows, v.bad, v.failed, v.clean_siblings = 0, 0, 0, 0
    lat[vi], stalls[vi], samples[vi], pairsets[vi] = {}, 0, 0, {}
  end
  for i = 1, st.n do
    for j = st.first[i] or 1, st.last[i] or 0 do
      local vi = of[st.E[j]]
      if vi and seen[vi] ~= i then
        seen[vi] = i
        local v, f, w = verdicts[vi], flows[i], st.W[j]
        v.flows = v.flows + 1
        if type(f.stalls) == "number" and type(f.samples) == "number" and f.samples > 0 then
          stalls[vi], samples[vi] = stalls[vi] + w * f.stalls, samples[vi] + w * f.samples
        end
        if st.bad[i] then
          v.bad = v.bad + 1
          if f.failed then v.failed = v.failed + 1
          elseif type(f.lat_us) == "number" then lat[vi][#lat[vi] + 1] = f.lat_us end
          local by = st.by[i]
          if by and of[by] == vi then pairsets[vi][st.group.of[i]] = true end
        end
      end
    end
  end
  for vi, v in ipairs(verdicts) do
    v.loss = samples[vi] > 0 and stalls[vi] / samples[vi] or nil
    local m = median(lat[vi])
    v.lat_factor = m and ref.lat_us and ref.lat_us > 0 and m / ref.lat_us or nil
    v.pairs = {}
    for id in pairs(pairsets[vi]) do
      for _, i in ipairs(st.group.flows[id]) do
        local crossed = false
        for j = st.first[i] or 1, st.last[i] or 0 do
          if of[st.E[j]] == vi then crossed = true; break end
        end
        if not crossed and not st.bad[i] and not st.suspect[i] then v.clean_siblings = v.clean_siblings + 1 end
      end
      local f = flows[st.group.flows[id][1]]
      v.pairs[#v.pairs + 1] = pair_of(f)
    end
    table.sort(v.pairs, function(x, y) return localize.key(x.a, x.b, x.rail) < localize.key(y.a, y.b, y.rail) end)
    local rails, set = {}, {}
    for _, p in ipairs(v.pairs) do
      if not set[p.rail] then set[p.rail] = true; rails[#rails + 1] = p.rail end
    end
    table.sort(rails)
    v.rails = rails
  end
end

-- The pairs the fabric explains: a bad (or suspect: stalling as much as a sibling) flow of theirs
-- crossed a fabric verdict's element, no bad one is a host end's, and either one of their flows is clean
-- (the ends pass on some path) or no more of their bad or suspect flows crossed no verdict's element than
-- crossed one (a host bad on every path is not hidden; a noisy flow beside the fabric's does not count).
local function explained(st, flows, verdicts, out)
  local in_verdict, cross, n_cross, host, other, clean = {}, {}, {}, {}, {}, {}
  for _, v in ipairs(verdicts) do for _, e in ipairs(v.elements) do in_verdict[e] = true end end
  for i = 1, st.n do
    local id = st.group.of[i]
    if st.bad[i] or st.suspect[i] then
      local by = st.by[i]
      if by and not in_verdict[by] then host[id] = true end
      local crossed = false
      for j = st.first[i] or 1, st.last[i] or 0 do
        if in_verdict[st.E[j]] then crossed = true; break end
      end
      if crossed then cross[id] = i; n_cross[id] = (n_cross[id] or 0) + 1
      else other[id] = (other[id] or 0) + 1 end
    else
      clean[id] = true
    end
  end
  for id, i in pairs(cross) do
    if not host[id] and (clean[id] or (other[id] or 0) <= n_cross[id]) then
      local f = flows[i]
      out[localize.key(f.a or f.host_a, f.b or f.host_b, f.rail or 1)] = true
    end
  end
end

-- Pairs whose flows have no path: those whose flows differ make "not located" verdicts (and are explained).
local function not_located(st, flows, o, out, expl)
  local cand, isolated, counted = {}, 0, 0
  for _, id in ipairs(st.group.order) do
    local list = st.group.flows[id]
    if #list > 1 and not st.first[list[1]] then
      local m = 0
      for _, i in ipairs(list) do if st.bad[i] then m = m + 1 end end
      counted = counted + #list
      if m == 1 then isolated = isolated + 1 end
      if m >= o.pair_min_bad and m < #list and m / #list >= o.hit_fraction then cand[#cand + 1] = { id, m } end
    end
  end
  local g = counted > 0 and isolated / counted or 0
  for _, c in ipairs(cand) do
    local list, m = st.group.flows[c[1]], c[2]
    local n = #list
    if m >= n * g + o.z * math.sqrt(n * g * (1 - g)) then
      local f = flows[list[1]]
      local v = { kind = "fabric", located = false, pair = { f.a, f.b }, hosts = { f.host_a, f.host_b },
        rail = f.rail or 1, flows = n, bad = m, failed = 0, clean_siblings = n - m, ranks = {} }
      local st_, sa, lat = 0, 0, {}
      for _, i in ipairs(list) do
        local x = flows[i]
        if st.bad[i] then
          if x.failed then v.failed = v.failed + 1 elseif type(x.lat_us) == "number" then lat[#lat + 1] = x.lat_us end
          if type(x.stalls) == "number" and type(x.samples) == "number" then
            st_, sa = st_ + x.stalls, sa + x.samples
          end
        end
      end
      v.loss = sa > 0 and st_ / sa or nil
      local md = median(lat)
      v.lat_factor = md and st.ref.lat_us and st.ref.lat_us > 0 and md / st.ref.lat_us or nil
      v.pairs = { pair_of(f) }
      v.rails = { v.rail }
      v.why = localize.text(v)
      out[#out + 1] = v
      for _, i in ipairs(list) do if st.bad[i] then st.by[i] = 0 end end -- (0: explained, no element)
      expl[localize.key(f.a or f.host_a, f.b or f.host_b, v.rail)] = true
    end
  end
end

--- Localizes the faults inside the fabric from the flows (see the top of
-- this file); opts: topology (ibverbs.bringup.topology's, or nil),
-- lat_factor, bw_fraction, reference, stall_floor, stall_factor
-- (flow_flags'), hit_fraction, min_bad, noise_factor, z, alpha, pair_min_bad
-- (localize.DEFAULTS).  Returns res (see above).
function localize.run(flows, opts)
  if type(flows) ~= "table" then error("localize.run: flows: a list expected, got " .. type(flows), 2) end
  local o = options(opts)
  local st = { group = flow_flags.group(flows), notes = {}, cache = {}, E = {}, W = {}, first = {}, last = {},
    el = cover.elements(), n = #flows }
  st.bad, st.ref, st.suspect = flow_flags.flag(flows, st.group, o)
  build(st, flows, o.topology)
  local found = cover.run(st, o) -- st.by[i]: the element that explains bad flow i
  local verdicts = {}
  for _, g in ipairs(found.fabric) do
    local v = { kind = "fabric", located = true, elements = g.elements, links = g.links, link = g.links[1],
      switch = g.switch, ranks = {} }
    verdicts[#verdicts + 1] = v
  end
  evidence(st, flows, verdicts, st.ref)
  local res = { verdicts = {}, explained = {}, hosts = found.hosts, flows = #flows, noise = found.noise,
    ref = st.ref, notes = {} }
  explained(st, flows, verdicts, res.explained)
  for _, v in ipairs(verdicts) do
    v.elements = nil
    v.why = localize.text(v)
    res.verdicts[#res.verdicts + 1] = v
  end
  not_located(st, flows, o, res.verdicts, res.explained)
  local nbad, unexplained = 0, 0
  for i = 1, #flows do
    if st.bad[i] then
      nbad = nbad + 1
      if not st.by[i] then unexplained = unexplained + 1 end
    end
  end
  res.bad, res.unexplained = nbad, unexplained
  for note in pairs(st.notes) do res.notes[#res.notes + 1] = note end
  table.sort(res.notes)
  return res
end

return localize
