--- An InfiniBand fabric's links and routes from recorded files: the link map
-- from `ibnetdiscover` output (or ibdiagnet's .lst), the linear forwarding
-- tables from `dump_lfts.sh` / `ibroute` output (or OpenSM's "Switch 0x..."
-- dump of them); a pair's path is the one its packets take: from the source
-- port's switch, the out port each switch's table gives for the destination
-- port's LID, until the destination port.
--
--   local ib = require "ibverbs.bringup.topology.ib"
--   local fabric, err = ib.read_links(text, "fabric.topo")  -- err "fabric.topo:12: ..."
--   local ok, lerr = ib.read_lfts(fabric, text, "lfts.txt")
--   local g = ib.graph(fabric)        -- the switch graph as ibverbs.bringup.topology.graph's
--   local path, rerr = ib.route(fabric, port_a, port_b)  -- { "leaf1 -- spine2", "leaf2 -- spine2" }
--
-- Names: a switch is named by its node description, the part between "MF0;" and ":" of Mellanox's
-- "MF0;leaf1:MQM8700/U1" form, "S-<guid>" when it has none (a name two switches share gets
-- "@<guid>"); a host by the first word of its channel adapter's node description ("node1 mlx5_0":
-- node1), its rails (ports) in the order of the description's second word (the device), then port.
local graph = require "ibverbs.bringup.topology.graph"

local ib = {}

local MAX_HOPS = 64 -- the longest route followed (a loop in the tables stops there)

-- A GUID's hex digits without "0x" and leading zeros, lower case.
local function guid_of(s)
  return (s:lower():gsub("^0x", ""):gsub("^0+(%x)", "%1"))
end

-- The record of node guid (type "S" switch, "H" channel adapter, "R" router), made on first sight.
local function node(f, guid, t)
  local n = f.nodes[guid]
  if not n then
    n = { guid = guid, type = t, ports = {} }
    f.nodes[guid] = n
    f.order[#f.order + 1] = guid
  end
  return n
end

-- The link between port pa of node a and port pb of node b, both ways.
local function connect(a, pa, b, pb)
  a.ports[pa] = a.ports[pa] or {}
  a.ports[pa].peer, a.ports[pa].peer_port = b.guid, pb
  b.ports[pb] = b.ports[pb] or {}
  b.ports[pb].peer, b.ports[pb].peer_port = a.guid, pa
end

-- One line of ibnetdiscover's output into f (cur: the node whose ports follow); the node now current,
-- or nil, msg for a port line that cannot be read.
local function ibnd_line(f, line, cur)
  local kind, t, guid, rest = line:match('^(%a+)%s+%d+%s+"([SHR])%-(%x+)"(.*)$')
  if kind == "Switch" or kind == "Ca" or kind == "Rt" then
    local n = node(f, guid_of(guid), t)
    n.desc = rest:match('#%s*"(.-)"') or ""
    n.lid = tonumber(rest:match("port 0 lid (%d+)") or "")
    return n
  end
  local p, tail = line:match("^%[(%d+)%](.*)$")
  if not p or not cur then return cur end
  local rt, rguid, rport, after = tail:match('"([SHR])%-(%x+)"%[(%d+)%](.*)$')
  if not rt then return nil, "cannot read this port line (\"<type>-<guid>\"[<port>] expected)" end
  local remote = node(f, guid_of(rguid), rt)
  connect(cur, tonumber(p), remote, tonumber(rport))
  if cur.type ~= "S" then
    cur.ports[tonumber(p)].lid = tonumber(tail:match("#%s*lid (%d+)") or "")
  else
    local rlid = tonumber(after:match('#%s*".-"%s+lid (%d+)') or "")
    if rt ~= "S" then
      remote.ports[tonumber(rport)].lid = remote.ports[tonumber(rport)].lid or rlid
    end
  end
  return cur
end

-- One end of a .lst line, "{ SW Ports:.. SystemGUID:.. NodeGUID:.. PortGUID:.. ... {desc} LID:.. PN:.. }":
-- type, node GUID, description, LID, port number; or nil.
local function lst_end(block)
  local inner = block:sub(2, -2)
  local desc = inner:match("%b{}")
  local plain = desc and inner:gsub("%b{}", " ", 1) or inner
  local t, guid = plain:match("^%s*(%u%u)%s"), plain:match("NodeGUID:(%x+)")
  local lid, pn = plain:match("LID:(%x+)"), plain:match("PN:(%x+)")
  if not (t and guid and lid and pn) then return nil end
  return t == "SW" and "S" or "H", guid_of(guid), desc and desc:sub(2, -2) or "", tonumber(lid, 16), tonumber(pn, 16)
end

-- One line of a .lst file into f; true, or nil, msg.
local function lst_line(f, line)
  local ends = {}
  for b in line:gmatch("%b{}") do ends[#ends + 1] = b end
  if #ends ~= 2 then return nil, "two '{ ... }' port ends expected" end
  local n, p = {}, {}
  for i, b in ipairs(ends) do
    local t, guid, desc, lid, pn = lst_end(b)
    if not t then return nil, "cannot read the port end '" .. b .. "'" end
    n[i], p[i] = node(f, guid, t), pn
    n[i].desc = n[i].desc or desc
    if t == "S" then n[i].lid = n[i].lid or lid end
    n[i].ports[pn] = n[i].ports[pn] or {}
    if t ~= "S" then n[i].ports[pn].lid = lid end
  end
  connect(n[1], p[1], n[2], p[2])
  return true
end

-- The switch's name from its description (see the usage block).
local function switch_name(desc, guid)
  local name = desc and (desc:match("^MF0;([^:]+):") or desc)
  if not name or name == "" then return "S-" .. guid end
  return name
end

-- Names for every node: switches (f.name_of[guid], f.guid_of[name]), hosts and their rails (f.rails[host]).
local function name_all(f)
  local count = {}
  for _, guid in ipairs(f.order) do
    local n = f.nodes[guid]
    if n.type == "S" then
      n.name = switch_name(n.desc, guid)
      count[n.name] = (count[n.name] or 0) + 1
    end
  end
  for _, guid in ipairs(f.order) do
    local n = f.nodes[guid]
    if n.type == "S" then
      if count[n.name] > 1 then n.name = n.name .. "@" .. guid end
      f.guid_of[n.name] = guid
    elseif n.desc and n.desc ~= "" then
      local host, dev = n.desc:match("^(%S+)%s*(%S*)")
      for pn, port in pairs(n.ports) do
        if port.peer and f.nodes[port.peer].type == "S" then
          f.rails[host] = f.rails[host] or {}
          local list = f.rails[host]
          list[#list + 1] = { host = host, dev = dev, guid = guid, port = pn, lid = port.lid }
        end
      end
    end
  end
  for _, list in pairs(f.rails) do
    table.sort(list, function(x, y)
      if x.dev ~= y.dev then return x.dev < y.dev end
      if x.guid ~= y.guid then return x.guid < y.guid end
      return x.port < y.port
    end)
  end
end

--- The link map of an ibnetdiscover output or an ibdiagnet .lst file (text; file names it in
-- messages): { nodes, order, rails[host] = { {dev, guid, port, lid}, ... }, name_of, guid_of, lft }, or
-- nil, "FILE:LINE: msg".
function ib.read_links(text, file)
  local f = { file = file, nodes = {}, order = {}, rails = {}, guid_of = {}, lft = {} }
  local n, cur, lst = 0, nil, nil
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    line = line:gsub("\r$", "")
    if lst == nil and line:find("%S") and not line:find("^%s*#") then lst = line:find("^%s*{") ~= nil end
    if lst and line:find("%S") then
      local ok, err = lst_line(f, line)
      if not ok then return nil, string.format("%s:%d: %s", file, n, err) end
    elseif lst == false then
      local err
      cur, err = ibnd_line(f, line, cur)
      if err then return nil, string.format("%s:%d: %s", file, n, err) end
    end
  end
  local switches = 0
  for _, g in ipairs(f.order) do if f.nodes[g].type == "S" then switches = switches + 1 end end
  if switches == 0 then
    return nil, string.format("%s: no switch in it (ibnetdiscover output or an ibdiagnet .lst expected)", file)
  end
  name_all(f)
  return f
end

--- The forwarding tables of dump_lfts.sh / ibroute output (text; file names it) into fabric.lft[guid][lid]
-- = out port; true, or nil, "FILE:LINE: msg" (a table of a switch the link map lacks, a route before
-- any switch's header).
function ib.read_lfts(fabric, text, file)
  local n, cur, seen = 0, nil, false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    n = n + 1
    local guid = line:match("^Unicast lids %b[] of switch .- guid 0x(%x+)")
      or line:match("^%s*Switch 0x(%x+)") or line:match("dump_ucast_routes: Switch 0x(%x+)")
    if guid then
      guid = guid_of(guid)
      if not (fabric.nodes[guid] and fabric.nodes[guid].type == "S") then
        return nil, string.format("%s:%d: switch 0x%s is not in the link map %s", file, n, guid, fabric.file)
      end
      cur, seen = guid, true
      fabric.lft[guid] = fabric.lft[guid] or {}
    elseif line:find("^Multicast mlids") then
      cur, seen = nil, true
    else
      local lid, port = line:match("^0x(%x+)%s+:?%s*(%d+)")
      if lid and cur then
        fabric.lft[cur][tonumber(lid, 16)] = tonumber(port)
      elseif lid and not seen then
        return nil, string.format("%s:%d: a route before any switch's header ('Unicast lids ... guid 0x...')",
          file, n)
      end
    end
  end
  if not next(fabric.lft) then return nil, string.format("%s: no switch's forwarding table in it", file) end
  return true
end

--- The switch graph of the link map, as ibverbs.bringup.topology.graph builds from a file: switches
-- (g.order sorted by name; leaves with their hosts), links, the leaf of each host per rail
-- (leaf_of[rail]; leaf_of[0]: rail 1).
function ib.graph(fabric)
  local g = { file = fabric.file, switches = {}, order = {}, adj = {}, keys = {}, addr = {}, leaf_of = { [0] = {} },
    cache = {} }
  for _, guid in ipairs(fabric.order) do
    local n = fabric.nodes[guid]
    if n.type == "S" then
      g.switches[n.name] = { name = n.name, guid = guid, lid = n.lid, children = {}, parents = {}, addresses = {} }
      g.order[#g.order + 1] = n.name
      g.adj[n.name], g.keys[n.name] = {}, {}
    end
  end
  table.sort(g.order)
  for i, name in ipairs(g.order) do g.switches[name].index = i end
  for _, guid in ipairs(fabric.order) do
    local n = fabric.nodes[guid]
    for _, port in pairs(n.ports) do
      local peer = port.peer and fabric.nodes[port.peer]
      if n.type == "S" and peer and peer.type == "S" then
        g.adj[n.name][peer.name] = true
        g.keys[n.name][peer.name] = graph.key(n.name, peer.name)
      end
    end
  end
  for host, list in pairs(fabric.rails) do
    for r, rail in ipairs(list) do
      local sw = fabric.nodes[fabric.nodes[rail.guid].ports[rail.port].peer]
      local rec = g.switches[sw.name]
      rec.hosts = rec.hosts or {}
      rec.hosts[#rec.hosts + 1] = host
      g.leaf_of[r] = g.leaf_of[r] or {}
      g.leaf_of[r][host] = sw.name
      if r == 1 then g.leaf_of[0][host] = sw.name end
    end
  end
  for _, sw in pairs(g.switches) do if sw.hosts then table.sort(sw.hosts) end end
  return g
end

--- The route from rail port a to rail port b ({guid, port, lid} of fabric.rails): the keys of the
-- switch links it crosses, or nil, msg.
function ib.route(fabric, a, b)
  if not b.lid then return nil, string.format("%s's port has no LID in %s", b.host, fabric.file) end
  local first = fabric.nodes[a.guid].ports[a.port]
  local sw = fabric.nodes[first.peer]
  local path = {}
  for _ = 1, MAX_HOPS do
    local lft = fabric.lft[sw.guid]
    local out = lft and lft[b.lid]
    if not out then return nil, string.format("switch %s has no route to LID %d (%s)", sw.name, b.lid, b.host) end
    local port = sw.ports[out]
    if out == 0 or not (port and port.peer) then
      return nil, string.format("switch %s routes LID %d (%s) to port %d, which goes nowhere", sw.name, b.lid,
        b.host, out)
    end
    local peer = fabric.nodes[port.peer]
    if peer.guid == b.guid and port.peer_port == b.port then return path end
    if peer.type ~= "S" then
      return nil, string.format("switch %s routes LID %d (%s) to port %d, another node's", sw.name, b.lid, b.host, out)
    end
    path[#path + 1] = graph.key(sw.name, peer.name)
    sw = peer
  end
  return nil, string.format("the route to LID %d (%s) loops (more than %d switches)", b.lid, b.host, MAX_HOPS)
end

return ib
