--- The search of ibverbs.bringup.matrix.localize: the smallest set of the
-- fabric's elements (switch links, and the host ends (host, rail) the
-- flows start and end at) that explains the bad flows, the good flows
-- clearing what they crossed; then the links no flow tells apart grouped,
-- and the links of one switch merged when none of its other links is
-- cleared.  A few passes over the flows x their path's length (the search
-- runs again as the noise settles: at most NOISE_ROUNDS times), and a heap
-- of the elements.
--
--   local cover = require "ibverbs.bringup.matrix.fabric_cover"
--   local el = cover.elements()             -- el:host_end(name, rail), el:link("leaf1 -- spine1"): element ids
--   local found = cover.run(st, opts)
--   -- st: {E, W (the flows' elements and weights, flat), first[i], last[i] (flow i's range in them, nil: no
--   --      path), bad[i] (false or why), n (the flows), el}; sets st.by[i]: the element taken for bad flow i
--   -- found.fabric: {{elements = {ids}, links = {names, sorted}, switch = name|nil}, ...}
--   -- found.hosts: {{host =, rail =, flows =, bad =}, ...}: host ends taken (left to the node diagnosis)
--   -- found.noise: the fabric's noise (the bad share of the flows the faults taken do not explain)
-- opts: hit_fraction, min_bad, noise_factor, z, alpha (localize.DEFAULTS; localize.lua says what each does).
local cover = {}

local NOISE_ROUNDS = 4 -- the noise estimated again at most this many times

local El = {}
El.__index = El

--- An empty registry of elements: ids from 1, el.name[id], el.host[id] (a host end or a link).
function cover.elements()
  return setmetatable({ id = {}, name = {}, host = {}, hname = {}, hrail = {}, ends = {} }, El)
end

--- The id of host end (host h, rail).
function El:host_end(h, rail)
  local by = self.ends[h]
  if not by then by = {}; self.ends[h] = by end
  local id = by[rail]
  if not id then
    id = #self.name + 1
    by[rail] = id
    self.name[id], self.host[id], self.hname[id], self.hrail[id] = tostring(h) .. " (rail " .. tostring(rail) .. ")",
      true, h, rail
  end
  return id
end

--- The id of the link keyed key.
function El:link(key)
  local id = self.id[key]
  if not id then
    id = #self.name + 1
    self.id[key], self.name[id], self.host[id] = id, key, false
  end
  return id
end

-- Per element: flows crossing (cnt), their weight (wn), the bad ones' weight (wb), count (bc), list (badlist).
local function tally(st, ne)
  local t = { cnt = {}, wn = {}, wb = {}, bc = {}, badlist = {} }
  local cnt, wn, wb, bc, badlist = t.cnt, t.wn, t.wb, t.bc, t.badlist
  for e = 1, ne do cnt[e], wn[e], wb[e], bc[e] = 0, 0, 0, 0 end
  local E, W = st.E, st.W
  for i = 1, st.n do
    local a = st.first[i]
    if a then
      local isbad = st.bad[i]
      for j = a, st.last[i] do
        local e, w = E[j], W[j]
        cnt[e], wn[e] = cnt[e] + 1, wn[e] + w
        if isbad then
          wb[e], bc[e] = wb[e] + w, bc[e] + 1
          local l = badlist[e]
          if not l then l = {}; badlist[e] = l end
          l[#l + 1] = i
        end
      end
    end
  end
  t.tested = 0 -- the elements with flows: every one is tested
  for e = 1, ne do if cnt[e] > 0 then t.tested = t.tested + 1 end end
  return t
end

-- The fabric's noise after the elements taken: the bad share of the flows with a path that crossed
-- none of them (the flows no fault taken explains: what is left is noise).
local function residual(st, taken)
  local is = {}
  for _, e in ipairs(taken) do is[e] = true end
  local E, n, nbad = st.E, 0, 0
  for i = 1, st.n do
    local a = st.first[i]
    if a then
      local hit = false
      for j = a, st.last[i] do
        if is[E[j]] then hit = true; break end
      end
      if not hit then
        n = n + 1
        if st.bad[i] then nbad = nbad + 1 end
      end
    end
  end
  return n > 0 and nbad / n or 0
end

-- Element e's key, or nil when it may not explain bad flows: uw, uc (the weight and the count of its
-- bad flows not explained yet) over the weight of its flows less the bad ones others explain (those
-- tell nothing of e): its bad share now, against opts.hit_fraction (of its flows' mean weight: a flow
-- that crossed it on one of k candidate paths weighs 1/k) and noise_factor x the noise g, its count
-- against min_bad, and the weight against what the noise gives as many flows, z standard deviations
-- over, and the chance of that share from the noise alone against alpha over the elements tested (the
-- z-test alone, on 200,000 elements, took 5 bad flows of 6).  The key: uw x that share (it only falls
-- as others explain its flows).
local function key(t, e, g, o, uw, uc)
  local m = t.wn[e] - t.wb[e] + uw
  if m <= 0 or uc < o.min_bad then return nil end
  local share = uw / m
  if share < o.hit_fraction * t.wn[e] / t.cnt[e] or share < o.noise_factor * g then return nil end
  if uw < m * g + o.z * math.sqrt(m * g * (1 - g)) then return nil end
  if g > 0 then -- the chance noise alone gives it that share (exp(-m KL(share || g)): Chernoff's bound on the
    -- binomial tail), times the elements tested, below opts.alpha
    local q = math.min(share, 1)
    local kl = q * math.log(q / g) + (q < 1 and (1 - q) * math.log((1 - q) / (1 - g)) or 0)
    if m * kl < math.log(t.tested / o.alpha) then return nil end
  end
  return uw * share
end

-- A max-heap of elements by key; ties: host ends first, then by name.
local function heap(el)
  local items, keys = {}, {}
  local function above(x, kx, y, ky)
    if kx ~= ky then return kx > ky end
    if el.host[x] ~= el.host[y] then return el.host[x] end
    return el.name[x] < el.name[y]
  end
  local h = { size = 0 }
  function h.push(e, k)
    h.size = h.size + 1
    local i = h.size
    items[i], keys[i] = e, k
    while i > 1 do
      local p = math.floor(i / 2)
      if not above(items[i], keys[i], items[p], keys[p]) then break end
      items[i], items[p], keys[i], keys[p] = items[p], items[i], keys[p], keys[i]
      i = p
    end
  end
  function h.pop()
    local e, k = items[1], keys[1]
    items[1], keys[1] = items[h.size], keys[h.size]
    items[h.size], keys[h.size] = nil, nil
    h.size = h.size - 1
    local i = 1
    while true do
      local l, r, m = 2 * i, 2 * i + 1, i
      if l <= h.size and above(items[l], keys[l], items[m], keys[m]) then m = l end
      if r <= h.size and above(items[r], keys[r], items[m], keys[m]) then m = r end
      if m == i then break end
      items[i], items[m], keys[i], keys[m] = items[m], items[i], keys[m], keys[i]
      i = m
    end
    return e, k
  end
  return h
end

-- The greedy cover (lazy: an element's key only falls as others explain its bad flows): the elements
-- taken, in order; st.by[i] = the element that explains bad flow i.
local function greedy(st, t, g, o)
  local el, E, W = st.el, st.E, st.W
  local uw, uc = {}, {}
  local h = heap(el)
  for e = 1, #el.name do
    uw[e], uc[e] = t.wb[e], t.bc[e]
    local k = key(t, e, g, o, uw[e], uc[e])
    if k then h.push(e, k) end
  end
  st.by = {}
  local taken = {}
  while h.size > 0 do
    local e, k = h.pop()
    local now = key(t, e, g, o, uw[e], uc[e])
    if now and now < k - 1e-9 * k then
      h.push(e, now)
    elseif now then
      taken[#taken + 1] = e
      for _, i in ipairs(t.badlist[e]) do
        if not st.by[i] then
          st.by[i] = e
          for j = st.first[i], st.last[i] do
            uw[E[j]], uc[E[j]] = uw[E[j]] - W[j], uc[E[j]] - 1
          end
        end
      end
    end
  end
  return taken
end

-- For each taken link: the elements crossed by exactly the flows that crossed it (other than itself).
local function twins(st, t, taken)
  local el, E = st.el, st.E
  local is, co = {}, {}
  for _, e in ipairs(taken) do
    if not el.host[e] then is[e] = true; co[e] = {} end
  end
  for i = 1, st.n do
    local a = st.first[i]
    if a then
      for j = a, st.last[i] do
        local c = is[E[j]] and co[E[j]]
        if c then
          for j2 = a, st.last[i] do
            local m = E[j2]
            if m ~= E[j] then c[m] = (c[m] or 0) + 1 end
          end
        end
      end
    end
  end
  local out = {}
  for e, c in pairs(co) do
    local list = {}
    for m, n in pairs(c) do
      if n == t.cnt[e] and t.cnt[m] == n then list[#list + 1] = m end
    end
    out[e] = list
  end
  return out
end

local function ends(name) return name:match("^(.-) %-%- (.+)$") end

local function names_of(el, ids)
  local l, seen = {}, {}
  for _, e in ipairs(ids) do
    if not el.host[e] and not seen[e] then seen[e] = true; l[#l + 1] = el.name[e] end
  end
  table.sort(l)
  return l
end

-- Per link of probe (a set of ids): the flows that crossed it and no element of taken (a set), and
-- the bad ones among them: what clears a link the taken ones do not explain.
local function independent(st, probe, taken)
  local n, b, E = {}, {}, st.E
  for i = 1, st.n do
    local a = st.first[i]
    if a then
      local other, any = false, false
      for j = a, st.last[i] do
        local e = E[j]
        if taken[e] then other = true; break end
        if probe[e] then any = true end
      end
      if any and not other then
        for j = a, st.last[i] do
          local e = E[j]
          if probe[e] then
            n[e] = (n[e] or 0) + 1
            if st.bad[i] then b[e] = (b[e] or 0) + 1 end
          end
        end
      end
    end
  end
  return n, b
end

-- The links of each switch (name -> ids of the links with flows).
local function switch_links(el, t)
  local of = {}
  for e = 1, #el.name do
    if not el.host[e] and t.cnt[e] > 0 then
      for _, s in ipairs({ ends(el.name[e]) }) do
        of[s] = of[s] or {}
        table.insert(of[s], e)
      end
    end
  end
  return of
end

-- Two or more groups on the links of one switch none of whose other links is cleared (the flows that
-- crossed it and nothing taken are mostly good): one group on the switch.  A dead switch's last link
-- carries only flows the others explain, so nothing clears it; two gray links of one switch leave its
-- other links cleared.
local function merge_switches(st, t, o, groups, taken)
  local el = st.el
  local of_switch, member, is_taken = switch_links(el, t), {}, {}
  for gi, gr in ipairs(groups) do for _, e in ipairs(gr.elements) do member[e] = gi end end
  for _, e in ipairs(taken) do is_taken[e] = true end
  local switches, probe, any = {}, {}, false
  for s, links in pairs(of_switch) do
    local gs = {}
    for _, e in ipairs(links) do if member[e] then gs[member[e]] = true end end
    if next(gs, next(gs)) then -- (two groups or more)
      switches[#switches + 1] = s
      for _, e in ipairs(links) do
        if not member[e] and t.cnt[e] >= o.min_bad then probe[e], any = true, true end
      end
    end
  end
  table.sort(switches)
  local n, b = {}, {}
  if any then n, b = independent(st, probe, is_taken) end
  local merged, out = {}, {}
  for _, s in ipairs(switches) do
    local gs, ok, seen = {}, true, {}
    for _, e in ipairs(of_switch[s]) do
      local gi = member[e]
      if gi and not merged[gi] and not seen[gi] then seen[gi] = true; gs[#gs + 1] = gi end
      if probe[e] and (n[e] or 0) >= o.min_bad and (b[e] or 0) / n[e] < o.hit_fraction then ok = false end
    end
    if ok and #gs >= 2 then
      local elements = {}
      for _, gi in ipairs(gs) do
        merged[gi] = true
        for _, e in ipairs(groups[gi].elements) do elements[#elements + 1] = e end
      end
      for _, e in ipairs(of_switch[s]) do if not member[e] then elements[#elements + 1] = e end end
      out[#out + 1] = { elements = elements, links = names_of(el, elements), switch = s }
    end
  end
  for gi, gr in ipairs(groups) do
    if not merged[gi] then out[#out + 1] = gr end
  end
  table.sort(out, function(x, y) return (x.switch or x.links[1]) < (y.switch or y.links[1]) end)
  return out
end

--- The search (see the top of this file): found.fabric, found.hosts, found.noise; st.by set.
function cover.run(st, o)
  local el = st.el
  local t = tally(st, #el.name)
  -- the noise and the faults taken, each from the other: none at first, then the share of bad flows
  -- among those the faults taken do not explain, until it stays (noise alone then takes nothing)
  local g, taken = 0, nil
  for round = 1, NOISE_ROUNDS do
    taken = greedy(st, t, g, o)
    local g2 = residual(st, taken)
    if math.abs(g2 - g) <= 1e-12 or round == NOISE_ROUNDS then break end
    g = g2
  end
  local tw = twins(st, t, taken)
  local groups, hosts = {}, {}
  for _, e in ipairs(taken) do
    local host = el.host[e] and e
    for _, m in ipairs(tw[e] or {}) do
      if el.host[m] then host = host or m end
    end
    if host then
      hosts[#hosts + 1] = { host = el.hname[host], rail = el.hrail[host], flows = t.cnt[host], bad = t.bc[host] }
    else
      local elements = { e }
      for _, m in ipairs(tw[e]) do elements[#elements + 1] = m end
      groups[#groups + 1] = { elements = elements, links = names_of(el, elements) }
    end
  end
  table.sort(hosts, function(a, b)
    if a.host ~= b.host then return tostring(a.host) < tostring(b.host) end
    return a.rail < b.rail
  end)
  return { fabric = merge_switches(st, t, o, groups, taken), hosts = hosts, noise = g, taken = taken }
end

return cover
