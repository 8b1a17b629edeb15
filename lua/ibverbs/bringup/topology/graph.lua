--- A fabric's switch graph from topology.conf's statements
-- (ibverbs.bringup.topology.conf), checked as a whole: every switch defined
-- once, every child switch defined, no loop, every host under one leaf (per
-- rail), every address given to one switch, every measured host placed; and
-- the paths a flow can take between two leaves (all the shortest up-down
-- ones: its ECMP choices).  Errors are "FILE:LINE: what, naming the name".
--
--   local graph = require "ibverbs.bringup.topology.graph"
--   local g, err = graph.build(stmts, "topology.conf")
--   err = graph.check_hosts(g, {"node01", ...}, "topology.conf", nrails)   -- nil when every host is placed
--   graph.leaf(g, "node01", 2)      -- its leaf on rail 2 (a Rail=2 leaf, else its leaf for every rail)
--   graph.paths(g, "leaf1", "leaf3") -- { {"leaf1 -- spine1", "leaf3 -- spine1"}, ... }
--   graph.key("spine1", "leaf1")     -- "leaf1 -- spine1"
--
-- g.switches[name] = { name, line, file, hosts = {...} or nil (a leaf), rail, children = {...},
-- parents = {...}, addresses = {...}, speed }; g.order (names in the file's order);
-- g.addr[ip] = { name =, file =, line = }; g.leaf_of[rail or 0][host] = name; g.adj[a][b] = true and
-- g.keys[a][b] = its key for every switch-switch link.
local launcher = require "ibverbs.fabric.launcher"

local graph = {}

--- The key of the link between switches a and b: their names sorted, joined with " -- ".
function graph.key(a, b)
  if a > b then a, b = b, a end
  return a .. " -- " .. b
end

-- t[i..j] as a new list (j: default #t).
local function slice(t, i, j)
  local out = {}
  for k = i, j or #t do out[#out + 1] = t[k] end
  return out
end

local function at(file, line, fmt, ...) return string.format("%s:%d: " .. fmt, file, line, ...) end

-- The names of a host list value, or nil, msg naming the key.
local function names(value, key, file, line)
  local list, err = launcher.hostlist(value)
  if not list then return nil, at(file, line, "%s=%s: %s", key, value, err) end
  return list
end

-- A switch's record from its defining statement s, or nil, msg.
local function define(s, file)
  local name = s.SwitchName
  if name == "" then return nil, at(file, s.line, "SwitchName= is empty") end
  if name:find("[%[%],%s]") then
    return nil, at(file, s.line, "SwitchName=%s: one switch's name expected (a line defines one switch)", name)
  end
  if s.Nodes and s.Switches then
    return nil, at(file, s.line, "switch %s has both Nodes= and Switches= (a leaf has hosts, a switch above has "
      .. "switches)", name)
  end
  local sw = { name = name, line = s.line, file = file, children = {}, parents = {}, addresses = {}, ext = s.ext }
  if s.LinkSpeed then
    sw.speed = s.LinkSpeed:match("^%d+$") and tonumber(s.LinkSpeed)
    if not sw.speed then
      return nil, at(file, s.line, "LinkSpeed=%s of %s: a whole number expected", s.LinkSpeed, name)
    end
  end
  if s.Rail then
    sw.rail = s.Rail:match("^%d+$") and tonumber(s.Rail)
    if not sw.rail or sw.rail < 1 then
      return nil, at(file, s.line, "Rail=%s of %s: a rail from 1 expected", s.Rail, name)
    end
    if not s.Nodes then
      return nil, at(file, s.line, "Rail= of %s goes with Nodes= (a leaf's hosts on that rail)", name)
    end
  end
  if s.Switches then
    local list, err = names(s.Switches, "Switches", file, s.line)
    if not list then return nil, err end
    sw.child_names = list
  else
    local list, err = names(s.Nodes or "", "Nodes", file, s.line)
    if not list then return nil, err end
    sw.hosts = list
  end
  return sw
end

-- Whether statement s defines its switch (an "#ibverbs" line with SwitchName= and Addresses= alone
-- only gives addresses).
local function defines(s)
  return not s.ext or s.Nodes ~= nil or s.Switches ~= nil or s.LinkSpeed ~= nil or s.Rail ~= nil or not s.Addresses
end

-- Every switch defined once (g.switches, g.order), or nil, msg.
local function define_all(g, stmts, file)
  for _, s in ipairs(stmts) do
    if defines(s) then
      local sw, err = define(s, file)
      if not sw then return nil, err end
      local before = g.switches[sw.name]
      if before then
        return nil, at(file, s.line, "switch %s defined twice (first at line %d)", sw.name, before.line)
      end
      g.switches[sw.name] = sw
      g.order[#g.order + 1] = sw.name
      sw.index = #g.order
    end
  end
  if #g.order == 0 then return nil, string.format("%s: no switch defined (no SwitchName= line)", file) end
  return true
end

-- The switch links (children, parents, g.adj), or nil, msg: a child no statement defines, a switch
-- its own child or a child twice.
local function link_all(g, file)
  for _, name in ipairs(g.order) do
    local sw, named = g.switches[name], {}
    for _, c in ipairs(sw.child_names or {}) do
      local child = g.switches[c]
      if not child then
        return nil, at(file, sw.line, "Switches= of %s names %s, a switch no SwitchName= line defines", name, c)
      end
      if c == name then return nil, at(file, sw.line, "Switches= of %s names %s itself", name, c) end
      if child.ext and not sw.ext then
        return nil, at(file, sw.line, "Switches= of %s names %s, which only an '#ibverbs' line defines (Slurm would "
          .. "not find it)", name, c)
      end
      if named[c] then return nil, at(file, sw.line, "Switches= of %s names %s twice", name, c) end
      named[c] = true
      sw.children[#sw.children + 1] = c
      child.parents[#child.parents + 1] = name
      g.adj[name][c], g.adj[c][name] = true, true
      g.keys[name][c] = graph.key(name, c)
      g.keys[c][name] = g.keys[name][c]
    end
  end
  return true
end

-- nil when the switches form no loop (a child above its parent), else msg naming the loop.
local function find_loop(g, file)
  local colour, stack = {}, {}
  local function visit(name)
    colour[name] = "grey"
    stack[#stack + 1] = name
    for _, c in ipairs(g.switches[name].children) do
      if colour[c] == "grey" then
        local from
        for i, s in ipairs(stack) do if s == c then from = i end end
        local circle = slice(stack, from)
        circle[#circle + 1] = c
        return at(file, g.switches[c].line, "the switches make a loop: %s", table.concat(circle, " -> "))
      elseif not colour[c] then
        local err = visit(c)
        if err then return err end
      end
    end
    colour[name] = "black"
    stack[#stack] = nil
  end
  for _, name in ipairs(g.order) do
    if not colour[name] then
      local err = visit(name)
      if err then return err end
    end
  end
end

-- Every leaf's hosts into g.leaf_of[rail or 0], or nil, msg: a host under two leaves of one rail.
local function place_hosts(g, file)
  for _, name in ipairs(g.order) do
    local sw = g.switches[name]
    local map = g.leaf_of[sw.rail or 0] or {}
    g.leaf_of[sw.rail or 0] = map
    for _, h in ipairs(sw.hosts or {}) do
      local before = map[h]
      if before == name then
        return nil, at(file, sw.line, "host %s named twice under %s", h, name)
      elseif before then
        return nil, at(file, sw.line, "host %s under two leaves%s: %s and %s (line %d)", h,
          sw.rail and " of rail " .. sw.rail or "", name, before, g.switches[before].line)
      end
      map[h] = name
    end
  end
  return true
end

-- The four numbers of a dotted IPv4 address, or nil.
local function ipv4(s)
  local a, b, c, d = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  for _, x in ipairs({ a, b, c, d }) do
    if #x > 3 or tonumber(x) > 255 then return nil end
  end
  return string.format("%d.%d.%d.%d", a, b, c, d)
end
graph.ipv4 = ipv4

--- Statements' Addresses= given to their switches (g.addr, each switch's addresses); file names the
-- statements' file.  true, or nil, msg: a switch no statement defines, an address not IPv4 or given twice.
function graph.add_addresses(g, stmts, file)
  for _, s in ipairs(stmts) do
    if s.Addresses then
      local sw = g.switches[s.SwitchName]
      if not sw then
        return nil, at(file, s.line, "Addresses= for %s, a switch no SwitchName= line defines", s.SwitchName)
      end
      local list, err = names(s.Addresses, "Addresses", file, s.line)
      if not list then return nil, err end
      for _, text in ipairs(list) do
        local ip = ipv4(text)
        if not ip then return nil, at(file, s.line, "Addresses= of %s: '%s' is no IPv4 address", s.SwitchName, text) end
        local before = g.addr[ip]
        if before then
          return nil, at(file, s.line, "address %s given to %s and %s (%s:%d)", ip, s.SwitchName, before.name,
            before.file, before.line)
        end
        g.addr[ip] = { name = s.SwitchName, file = file, line = s.line }
        sw.addresses[#sw.addresses + 1] = ip
      end
    end
  end
  return true
end

--- The graph of a file's statements (file names it in messages), or nil, "FILE:LINE: msg".
function graph.build(stmts, file)
  local g = { file = file, switches = {}, order = {}, adj = {}, keys = {}, addr = {}, leaf_of = { [0] = {} },
    cache = {} }
  local ok, err = define_all(g, stmts, file)
  if not ok then return nil, err end
  for _, name in ipairs(g.order) do g.adj[name], g.keys[name] = {}, {} end
  ok, err = link_all(g, file)
  if not ok then return nil, err end
  err = find_loop(g, file)
  if err then return nil, err end
  ok, err = place_hosts(g, file)
  if not ok then return nil, err end
  ok, err = graph.add_addresses(g, stmts, file)
  if not ok then return nil, err end
  return g
end

--- The leaf of host on rail (a Rail= leaf of it, else its leaf for every rail), or nil; a host
-- named with its domain ("node01.cluster") is found under its first label too.
function graph.leaf(g, host, rail)
  if type(host) ~= "string" then return nil end
  local own = rail and g.leaf_of[rail]
  local leaf = own and own[host] or g.leaf_of[0][host]
  if leaf then return leaf end
  local short = host:match("^([^.]+)%.")
  if short and not host:match("^[%d.]+$") then return graph.leaf(g, short, rail) end
  return nil
end

--- nil when every host of hosts has a leaf (on every rail from 1 to nrails, when given), else
-- "FILE: ..." naming the hosts the file leaves out.
function graph.check_hosts(g, hosts, file, nrails)
  local missing, seen = {}, {}
  for _, h in ipairs(hosts or {}) do
    if not seen[h] then
      seen[h] = true
      for r = 1, math.max(1, nrails or 1) do
        if not graph.leaf(g, h, nrails and r or nil) then
          missing[#missing + 1] = nrails and nrails > 1 and string.format("%s (rail %d)", h, r) or h
          break
        end
      end
    end
  end
  if #missing == 0 then return nil end
  local shown = slice(missing, 1, math.min(#missing, 5))
  return string.format("%s: measured host%s %s under no leaf of the file%s", file, #missing > 1 and "s" or "",
    table.concat(shown, ", "), #missing > 5 and string.format(" (and %d more)", #missing - 5) or "")
end

-- The distances up from leaf (leaf 0, its parents 1, ...: upward = parents only), and for each switch
-- so reached the switches one step below it on a shortest way up from leaf.
local function up_distances(g, leaf)
  local dist, below, queue, i = { [leaf] = 0 }, { [leaf] = {} }, { leaf }, 1
  while queue[i] do
    local s = queue[i]
    for _, p in ipairs(g.switches[s].parents) do
      if not dist[p] then
        dist[p], below[p] = dist[s] + 1, {}
        queue[#queue + 1] = p
      end
      if dist[p] == dist[s] + 1 then below[p][#below[p] + 1] = s end
    end
    i = i + 1
  end
  return dist, below
end

-- Every shortest upward walk from the leaf of below to top, each a list of switches from the leaf up.
local function up_walks(below, top)
  if #below[top] == 0 then return { { top } } end
  local out = {}
  for _, c in ipairs(below[top]) do
    for _, w in ipairs(up_walks(below, c)) do
      w[#w + 1] = top
      out[#out + 1] = w
    end
  end
  return out
end

graph.CACHE = 1024 -- pairs of leaves whose paths are kept (then the cache starts again: bounded memory)

--- Every shortest up-down path between leaves la and lb (up to a switch above both, then down): a list
-- of paths, each the list of its links' keys from la to lb; { {} } when la is lb, {} when no switch is
-- above both.  Cached per pair of leaves (graph.CACHE of them; the caller does not change them).
function graph.paths(g, la, lb)
  local ck = la .. "\0" .. lb
  if g.cache[ck] then return g.cache[ck] end
  g.cached = (g.cached or 0) + 1
  if g.cached > graph.CACHE then g.cache, g.cached = {}, 1 end
  local out = {}
  if la == lb then
    out[1] = {}
  else
    local da, ba = up_distances(g, la)
    local db, bb = up_distances(g, lb)
    local best
    for s, x in pairs(da) do
      if db[s] and (not best or x + db[s] < best) then best = x + db[s] end
    end
    local tops = {}
    for s, x in pairs(da) do
      if db[s] and x + db[s] == best then tops[#tops + 1] = s end
    end
    table.sort(tops, function(x, y) return g.switches[x].index < g.switches[y].index end) -- (the file's order)
    for _, top in ipairs(tops) do
      for _, wa in ipairs(up_walks(ba, top)) do
        for _, wb in ipairs(up_walks(bb, top)) do
          local path, keys = {}, g.keys
          for i = 1, #wa - 1 do path[#path + 1] = keys[wa[i]][wa[i + 1]] end
          for i = #wb, 2, -1 do path[#path + 1] = keys[wb[i]][wb[i - 1]] end
          out[#out + 1] = path
        end
      end
    end
  end
  g.cache[ck] = out
  return out
end

--- Every walk of exactly n links from switch x to switch y that visits no switch twice, as lists of
-- switches from x to y; at most limit + 1 of them (enough to tell one from several).
function graph.walks(g, x, y, n, limit)
  local out, seen, walk = {}, { [x] = true }, { x }
  local function step(s, left)
    if #out > (limit or 1) then return end
    if left == 0 then
      if s == y then out[#out + 1] = slice(walk, 1) end
      return
    end
    local next_ = {}
    for o in pairs(g.adj[s]) do next_[#next_ + 1] = o end
    table.sort(next_)
    for _, o in ipairs(next_) do
      if not seen[o] and (left > 1 or o == y) then
        seen[o], walk[#walk + 1] = true, o
        step(o, left - 1)
        seen[o], walk[#walk] = nil, nil
      end
    end
  end
  step(x, n)
  return out
end

return graph
