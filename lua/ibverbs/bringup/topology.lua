--- Where a fabric's paths go: the switches and switch links of a Slurm
-- topology.conf (topology/tree plugin) or of an InfiniBand fabric's recorded
-- link map and forwarding tables, the leaf of each host, the paths a pair's
-- flows can take (their ECMP choices), and a flow's traced hops turned into
-- the links it crossed.  Read once, before any traffic: a bad file is one
-- error naming the file, line and name (fabric_matrix --topology: exit 2).
--
--   local topology = require "ibverbs.bringup.topology"
--   local topo, err = topology.read("topology.conf", { hosts = {"node01", ...} })  -- err "FILE:LINE: ..."
--   topo:leaf("node01")                 -- "leaf1" (topo:leaf(host, rail): a rail's own leaf, see below)
--   topo:check_hosts(hosts)             -- nil, or "FILE: measured host node9 under no leaf of the file"
--   topo:links()                        -- every switch-switch link key, sorted: {"leaf1 -- spine1", ...}
--   topo:paths("node01", "node07")      -- { {"leaf1 -- spine1", "leaf2 -- spine1"}, {... spine2 ...} }
--   topo:switch_at("10.0.1.1")          -- "spine1" (or a hop that names the switch: "spine1", "spine1.mgmt")
--   local path, note = topo:trace_path(flow)  -- the links of flow.hops, note: ibverbs.bringup.topology.trace
--   local ib_topo = assert(topology.read_ib("fabric.topo", "lfts.txt"))   -- ibnetdiscover or .lst, dump_lfts.sh
--   ib_topo:paths("node1", "node3")     -- { the routed path }
--   topology.dot(topo, verdicts)        -- Graphviz text, bad links red (ibverbs.bringup.topology.dot)
--   topology.plot(topo, verdicts, "m.png")  -- m.topology.dot, and m.topology.svg when dot is on PATH
--   local topo2, oerr = topology.from_options(o)  -- a tool's --topology, --lfts, --topology-addresses
--
-- The file (Slurm's): "SwitchName=leaf1 Nodes=node[01-16]" (a leaf and its hosts), "SwitchName=spine1
-- Switches=leaf[1-4]" (a switch above others: one link to each; a switch may sit under several, as a leaf
-- under every spine), LinkSpeed=n (read, unused), # comments, host lists.  This project's lines, which
-- Slurm takes for comments: "#ibverbs SwitchName=spine1 Addresses=10.0.1.1,10.0.[2-4].1" (the addresses
-- a traced hop of that switch answers from), "#ibverbs SwitchName=r2-leaf1 Nodes=node[01-16] Rail=2" (a
-- leaf of rail 2's own plane: those hosts' rail 2 is under it; a switch Slurm does not see may be
-- defined so, with Switches= too).  opts.addresses: a second file of "SwitchName=x Addresses=..."
-- lines.  docs/bringup.md, "Topology".
local conf = require "ibverbs.bringup.topology.conf"
local graph = require "ibverbs.bringup.topology.graph"
local trace = require "ibverbs.bringup.topology.trace"
local ib = require "ibverbs.bringup.topology.ib"
local dot = require "ibverbs.bringup.topology.dot"

local topology = {}

local Topo = {}
Topo.__index = Topo

-- The contents of path, or nil, "PATH: why".
local function slurp(path)
  local fh, err = io.open(path, "rb")
  if not fh then return nil, tostring(err) end
  local text = fh:read("a")
  fh:close()
  if not text then return nil, path .. ": cannot read it" end
  return text
end

--- The topology of a topology.conf's text (file names it in messages); opts as topology.read's, with
-- opts.addresses_text (the second file's text) instead of its path.  topo, or nil, "FILE:LINE: msg".
function topology.parse(text, file, opts)
  opts = opts or {}
  local stmts, err = conf.parse(text, file)
  if not stmts then return nil, err end
  local g, gerr = graph.build(stmts, file)
  if not g then return nil, gerr end
  if opts.addresses_text then
    local afile = opts.addresses or "addresses"
    local more, aerr = conf.parse(opts.addresses_text, afile, { all_ext = true })
    if not more then return nil, aerr end
    for _, s in ipairs(more) do
      if s.Nodes or s.Switches or s.LinkSpeed or s.Rail or not s.Addresses then
        return nil, string.format("%s:%d: an addresses file takes 'SwitchName=x Addresses=...' lines only", afile,
          s.line)
      end
    end
    local ok, aerr2 = graph.add_addresses(g, more, afile)
    if not ok then return nil, aerr2 end
  end
  local topo = setmetatable({ g = g, file = file, kind = "slurm" }, Topo)
  local herr = topo:check_hosts(opts.hosts, opts.rails)
  if herr then return nil, herr end
  return topo
end

--- The topology of the Slurm topology.conf at path: opts.hosts (the measured hosts: each must be under
-- a leaf, on each rail from 1 to opts.rails when given), opts.addresses (a second file of addresses).
-- topo, or nil, "FILE:LINE: what, naming the name" ("FILE: ..." for a host the file leaves out).
function topology.read(path, opts)
  opts = opts or {}
  local text, err = slurp(path)
  if not text then return nil, err end
  local o = { hosts = opts.hosts, rails = opts.rails, addresses = opts.addresses }
  if opts.addresses then
    o.addresses_text, err = slurp(opts.addresses)
    if not o.addresses_text then return nil, err end
  end
  return topology.parse(text, path, o)
end

--- The leaf switch of host (on rail: a Rail= leaf of it, else its leaf; on InfiniBand, the switch of
-- its rail-th port), or nil.
function Topo:leaf(host, rail)
  return graph.leaf(self.g, host, rail)
end

--- nil when every host of hosts is under a leaf (on every rail from 1 to nrails, when given), else
-- "FILE: measured host(s) ... under no leaf of the file".
function Topo:check_hosts(hosts, nrails)
  return graph.check_hosts(self.g, hosts, self.file, nrails)
end

--- Every switch-switch link's key ("leaf1 -- spine1"), sorted.
function Topo:links()
  if not self.link_list then
    local l = {}
    for a, outs in pairs(self.g.adj) do
      for b in pairs(outs) do
        if a < b then l[#l + 1] = graph.key(a, b) end
      end
    end
    table.sort(l)
    self.link_list = l
  end
  return self.link_list
end

--- The switches, in the file's order (InfiniBand: sorted by name).
function Topo:switches()
  return self.g.order
end

--- The paths between host a and host b on rail (default: their leaf for every rail): every shortest
-- up-down path between their leaves, each a list of link keys from a's leaf; { {} } for hosts on one
-- leaf.  nil, msg for a host under no leaf.
function Topo:paths(a, b, rail)
  local la, lb = self:leaf(a, rail), self:leaf(b, rail)
  if not la or not lb then
    return nil, string.format("%s: host %s is under no leaf", self.file, la and b or a)
  end
  return graph.paths(self.g, la, lb)
end

--- The switch whose address ip is, or whose name a hop gives ("spine1", "spine1.mgmt.example"); nil.
function Topo:switch_at(ip)
  if type(ip) ~= "string" then return nil end
  local a = self.g.addr[ip]
  if a then return a.name end
  if self.g.switches[ip] then return ip end
  if graph.ipv4(ip) then return nil end
  local first = ip:match("^([^.]+)%.")
  return first and self.g.switches[first] and first or nil
end

--- The links flow crossed, from its traced hops (flow.hops), and a note or nil:
-- ibverbs.bringup.topology.trace.path.
function Topo:trace_path(flow)
  return trace.path(self.g, flow, function(hop) return self:switch_at(hop) end)
end

-- ------------------------------------------------------------------ InfiniBand

local IbTopo = setmetatable({}, { __index = Topo })
IbTopo.__index = IbTopo

-- The rail record of host's rail (a number from 1, or a device name "mlx5_0" / "mlx5_0:1"), or nil.
local function ib_rail(fabric, host, rail)
  local list = fabric.rails[host]
  if not list then return nil end
  if type(rail) == "string" then
    local dev, port = rail:match("^([^:]+):?(%d*)$")
    for _, r in ipairs(list) do
      if r.dev == dev and (port == "" or r.port == tonumber(port)) then return r end
    end
    return nil
  end
  return list[rail or 1]
end

--- The routed path between host a and host b on rail (a number from 1, or a device name): { path }, one
-- path, as the forwarding tables send it; nil, msg.
function IbTopo:paths(a, b, rail)
  local ck = a .. "\0" .. b .. "\0" .. tostring(rail or 1)
  local hit = self.routes[ck]
  if hit then return hit[1], hit[2] end
  local ra, rb = ib_rail(self.fabric, a, rail), ib_rail(self.fabric, b, rail)
  local res
  if not ra or not rb then
    res = { nil, string.format("%s: host %s has no port%s in it", self.file, ra and b or a,
      rail and " for rail " .. tostring(rail) or "") }
  else
    local path, err = ib.route(self.fabric, ra, rb)
    res = path and { { path } } or { nil, string.format("%s: %s", self.lft_file, err) }
  end
  self.routes[ck] = res
  return res[1], res[2]
end

--- The routed path of flow (InfiniBand flows have no traced hops: the tables say where they go).
function IbTopo:trace_path(flow)
  local paths, err = self:paths(flow.host_a, flow.host_b, flow.rail)
  if not paths then return nil, { untraced = true, why = err } end
  return paths[1]
end

--- The topology of an InfiniBand fabric: the link map from ibnetdiscover's output or ibdiagnet's .lst
-- (links_path), the routes from dump_lfts.sh / ibroute output (lfts_path).  opts.hosts: every measured
-- host must have a port.  topo (paths: the routed path), or nil, "FILE:LINE: msg".
function topology.read_ib(links_path, lfts_path, opts)
  local text, err = slurp(links_path)
  if not text then return nil, err end
  local fabric, ferr = ib.read_links(text, links_path)
  if not fabric then return nil, ferr end
  local lfts, lerr = slurp(lfts_path)
  if not lfts then return nil, lerr end
  local ok, lferr = ib.read_lfts(fabric, lfts, lfts_path)
  if not ok then return nil, lferr end
  local g = ib.graph(fabric)
  local herr = graph.check_hosts(g, opts and opts.hosts, links_path)
  if herr then return nil, herr end
  return setmetatable({ g = g, fabric = fabric, file = links_path, lft_file = lfts_path, kind = "infiniband",
    routes = {} }, IbTopo)
end

-- ------------------------------------------------------------------ a tool's options

--- The topology a tool's options name (o.topology, o.lfts: InfiniBand, o.topology_addresses), read
-- without the measured hosts (checked once they are known: topo:check_hosts): topo, nil when no
-- o.topology, or nil, msg naming the option and the file's line.
function topology.from_options(o)
  if not o.topology then
    if o.lfts or o.topology_addresses then return nil, "--lfts and --topology-addresses go with --topology" end
    return nil
  end
  if o.lfts and o.topology_addresses then return nil, "--topology-addresses does not go with --lfts (InfiniBand)" end
  local topo, err
  if o.lfts then
    topo, err = topology.read_ib(o.topology, o.lfts)
  else
    topo, err = topology.read(o.topology, { addresses = o.topology_addresses })
  end
  if not topo then return nil, "--topology " .. err end
  return topo
end

-- ------------------------------------------------------------------ drawing

topology.dot = dot.text
topology.plot = dot.plot

return topology
