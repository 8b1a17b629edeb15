-- Synthetic leaf-spine fabrics and their flows, for the specs of the
-- fabric's localization (lua/ibverbs/bringup/matrix/localize.lua and what
-- reads its verdicts): a topology object with the methods of
-- ibverbs.bringup.topology's (leaf, switch_at, links, paths, trace_path)
-- over real data, and flows drawn over it with planted faults, from a
-- random generator of their own (the same draws under lua5.4 and luajit).
--
--   local clos = require "clos_support"
--   local topo = clos.topology{ leaves = 2, spines = 2, hosts = 4 }      -- node1..node4, leaf1.., spine1..
--   local flows = clos.flows(topo, { per_pair = 8, seed = 7, gray = { ["leaf1 -- spine1"] = 0.01 } })
local clos = {}

--- A link's key: its two ends sorted, " -- " between them.
function clos.key(x, y)
  if y < x then x, y = y, x end
  return x .. " -- " .. y
end

--- A random generator (Park-Miller: exact in doubles and in integers): r() in [0, 1).
function clos.random(seed)
  local x = (seed or 1) % 2147483646 + 1
  return function()
    x = x * 16807 % 2147483647
    return (x - 1) / 2147483646
  end
end

-- A Poisson draw of mean lambda (Knuth's: lambda up to a few tens).
local function poisson(r, lambda)
  if lambda <= 0 then return 0 end
  local l, k, p = math.exp(-lambda), 0, 1
  repeat
    k = k + 1
    p = p * r()
  until p <= l
  return k - 1
end
clos.poisson = poisson

--- A leaf-spine fabric: opts.hosts hosts (node1, ...) spread over opts.leaves
-- leaves in order (leaf1, ...), each leaf linked to every spine (spine1, ...);
-- opts.planes > 1: a rail-optimized fabric, one such plane per rail (switches
-- "p<rail>-leaf1", ...), a host's rail r on plane r's leaf.
function clos.topology(opts)
  local t = { hosts = {}, leaf_of = {}, spines = opts.spines, leaves = opts.leaves, planes = opts.planes or 1 }
  local per = math.ceil(opts.hosts / opts.leaves)
  for i = 1, opts.hosts do
    local h = "node" .. i
    t.hosts[i] = h
    t.leaf_of[h] = math.ceil(i / per)
  end
  local function name(kind, i, rail)
    if t.planes > 1 then return string.format("p%d-%s%d", rail or 1, kind, i) end
    return kind .. i
  end
  t.name = name
  function t.leaf(_, h, rail) return t.leaf_of[h] and name("leaf", t.leaf_of[h], rail) end
  function t.switch_at(_, ip) return ip end -- (the stub's hops are switch names)
  function t.links()
    local l = {}
    for p = 1, t.planes do
      for a = 1, t.leaves do
        for s = 1, t.spines do l[#l + 1] = clos.key(name("leaf", a, p), name("spine", s, p)) end
      end
    end
    return l
  end
  --- The candidate paths between hosts a and b (rail: the plane): one a spine, or one empty path on one leaf.
  function t.paths(_, a, b, rail)
    local la, lb = t.leaf_of[a], t.leaf_of[b]
    if la == lb then return { {} } end
    local out = {}
    for s = 1, t.spines do
      local sp = name("spine", s, rail)
      out[s] = { clos.key(name("leaf", la, rail), sp), clos.key(name("leaf", lb, rail), sp) }
    end
    return out
  end
  --- The path of a flow's hops (switch names here): the links between them in order.
  function t.trace_path(_, flow)
    local p = {}
    for i = 2, #flow.hops do
      if flow.hops[i - 1] and flow.hops[i] then p[#p + 1] = clos.key(flow.hops[i - 1], flow.hops[i]) end
    end
    return p
  end
  return t
end

-- One flow of hosts ha, hb (ranks a, b) on rail: its spine drawn (ECMP), its figures drawn from the faults.
local function draw(t, r, o, a, b, rail)
  local ha, hb = t.hosts[a + 1], t.hosts[b + 1]
  local la, lb = t.leaf_of[ha], t.leaf_of[hb]
  local f = { a = a, b = b, rail = rail, host_a = ha, host_b = hb, sport = 49152 + math.floor(r() * 16384),
    dport = 4791, samples = o.samples or 500 }
  local spine = 1 + math.floor(r() * t.spines)
  local path, hops = {}, { t.name("leaf", la, rail) }
  if la ~= lb then
    local sp = t.name("spine", spine, rail)
    path = { clos.key(t.name("leaf", la, rail), sp), clos.key(t.name("leaf", lb, rail), sp) }
    hops = { hops[1], sp, t.name("leaf", lb, rail) }
  end
  f.true_path, f.hops = path, hops
  local loss, slow, dead = o.base_loss or 0.0001, 1, false
  for _, key in ipairs(path) do
    loss = loss + ((o.gray or {})[key] or 0)
    slow = slow * ((o.slow or {})[key] or 1)
    if (o.dead or {})[key] then dead = true end
  end
  for _, h in ipairs({ ha, hb }) do
    loss = loss + ((o.host_loss or {})[h] or 0)
    if (o.host_dead or {})[h] then dead = true end
  end
  f.stalls = poisson(r, f.samples * loss)
  f.lat_us = (3 + 0.3 * r()) * slow
  f.write_mbs = 12000 - 200 * r()
  f.send_mbs = 11900 - 200 * r()
  if dead then f.failed, f.stalls, f.lat_us, f.write_mbs, f.send_mbs = "transport retry counter exceeded", nil, nil,
    nil, nil end
  return f
end

--- The flows of every pair of hosts (ranks 0 .. hosts-1, a < b) on every
-- rail: opts.per_pair flows each (8), opts.samples ping-pongs (500), each
-- flow's spine drawn at random (ECMP); its stalls a Poisson draw of samples x
-- its loss: opts.base_loss (0.0001) plus opts.gray[link] of each link on its
-- path and opts.host_loss[host] of its two hosts; its latency x opts.slow[link];
-- failed through opts.dead[link] or from opts.host_dead[host].  f.true_path and f.hops (switch names) say
-- where it went; opts.known: f.path set to it.  opts.noise: that many flows
-- picked at random made bad (stalls at 5 %).
function clos.flows(t, opts)
  local r = clos.random(opts.seed or 1)
  local out = {}
  for rail = 1, opts.rails or 1 do
    for a = 0, #t.hosts - 2 do
      for b = a + 1, #t.hosts - 1 do
        for _ = 1, opts.per_pair or 8 do
          local f = draw(t, r, opts, a, b, rail)
          if opts.known then f.path = f.true_path end
          out[#out + 1] = f
        end
      end
    end
  end
  for _ = 1, opts.noise or 0 do
    local f = out[1 + math.floor(r() * #out)]
    if not f.failed then f.stalls = math.floor(0.05 * f.samples) end
  end
  return out
end

--- The links of a located verdict (its links), or {} for one not located.
function clos.named(res)
  local l = {}
  for _, v in ipairs(res.verdicts) do
    if v.located then for _, k in ipairs(v.links) do l[#l + 1] = k end end
  end
  table.sort(l)
  return l
end

return clos
