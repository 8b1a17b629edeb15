--- The relays' mesh of ibverbs.fabric's relay tree: each relay (groups 1 and
-- up) holds a connection to every other, so that a route's messages from
-- one group to another go from relay to relay, never through rank 0.  Rank
-- 0 (a group of its own) then handles the relays' bundles (their ups and
-- the messages for rank 0) and its answers: O(groups) frames and the bytes
-- of its own messages, where it joined every group's messages, O(N) bytes a
-- route.
--
-- Setting up: a relay connects to every relay below it, saying hello
-- {relay = its rank}, and accepts those above it with its members.  A
-- relay with no link to another (it did not connect, or the link closed),
-- or one the group buried, sends that group's messages to rank 0 in its
-- bundle, as every relay did before the mesh; rank 0 passes them on.
--
-- A route, at a relay: its members' frames collected, it sends each linked
-- relay its messages for that group ("M<seq> <items>", empty ones too), its
-- group's own stay, then its bundle to rank 0; it reads rank 0's answer,
-- then one mesh frame from each linked relay rank 0 did not name dead.  A
-- relay rank 0 buries during the route has lost what the others sent it:
-- rank 0's answer then asks every relay to resend (its "resend" list), and
-- each sends rank 0 one "L<seq> <items>" frame with what it had sent the
-- buried relays, which rank 0 gives their members (adopted: they speak to
-- rank 0 from then on).  A relay that dies after rank 0 answered takes the
-- messages the other relays sent it: its members, asking rank 0, get only
-- what rank 0 passed (their pairs of that block: "sent no QP").
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local ranks = require "ibverbs.fabric.ranks"
local hub = require "ibverbs.fabric.hub"
local door = require "ibverbs.fabric.door"

local mesh = {}

local function group_of(t, r) return ranks.group_of(t.k, r) end

--- A relay, before accepting its members: its links to the relays below it
-- (sockets, hello said), by group, each tried until deadline as a member
-- tries its relay (a relay below counts on it: a SYN dropped under a storm
-- of connections is tried again); those it cannot reach are left out.
function mesh.connect_lower(self, deadline)
  local t = self.tree
  local g, out = group_of(t, self.rank), {}
  for h = 1, g - 1 do
    local sock = t.addrs[tostring(h)] and hub.connect(t.addrs[tostring(h)], deadline)
    local mine = sock and door.answer(sock, self.lock, deadline, "relay", tostring(self.rank))
    if mine and wire.send(sock, { relay = self.rank, proof = mine.proof }, deadline) then
      out[h] = sock
    elseif sock then
      sock:close()
    end
  end
  return out
end

--- A relay: its links (lower: connect_lower's) into its hub; t.mesh[group] = connection.
function mesh.adopt_links(self, lower)
  local t = self.tree
  t.mesh = t.mesh or {}
  for h, sock in pairs(lower) do
    local c = self.hub:add(sock)
    c.mesh = h
    t.mesh[h] = c
  end
end

--- A relay's hello from a relay above it (hello.relay): true when taken as
-- a link; else false, why (its sender is a stranger).
function mesh.accept(self, c, hello)
  local t = self.tree
  local r = tonumber(hello.relay)
  local ok, why = door.check(c, self.lock, hello, "relay", tostring(hello.relay))
  if not ok then return false, why end
  if not r or r <= self.rank or r >= self.size or ranks.relay_of(t.k, group_of(t, r)) ~= r or t.mesh and
    t.mesh[group_of(t, r)] then
    return false, "not a relay above this one: " .. tostring(hello.relay)
  end
  door.admit(c)
  t.mesh = t.mesh or {}
  c.mesh = group_of(t, r)
  t.mesh[c.mesh] = c
  return true
end

--- How many relays above this one will connect.
function mesh.expected(self)
  local t = self.tree
  return math.max(0, t.ngroups - 1 - group_of(t, self.rank))
end

-- Whether the link to group h's relay carries this route.
local function linked(self, h)
  local t = self.tree
  local c = t.mesh and t.mesh[h]
  return c and not c.closed and not self.dead[ranks.relay_of(t.k, h)] and c
end

--- A relay's parts (group -> list of items) split: those for linked relays
-- sent now, its own group's kept (returned as a list of items), the rest
-- left in parts for the bundle to rank 0.  Keeps what it sent for a resend.
function mesh.send_parts(self, parts)
  local t = self.tree
  local g = group_of(t, self.rank)
  local own = parts[g] or {}
  parts[g] = nil
  t.sent = {}
  for h = 1, t.ngroups - 1 do
    local c = h ~= g and linked(self, h)
    if c then
      local blob = table.concat(parts[h] or {})
      parts[h] = nil
      t.sent[h] = blob
      local ok = wire.send_raw(c.sock, wire.frame("M" .. self.seq .. " " .. blob), socket.gettime() + 5)
      c.sock:settimeout(0)
      if not ok then c.closed = c.closed or "send failed"; parts[h] = { blob }; t.sent[h] = nil end
    end
  end
  return own
end

--- A relay, after rank 0's answer (msg: its dead list learnt): one mesh
-- frame from each linked relay, before deadline; their items' blobs (and
-- blobs.bad naming a relay whose frame was no list of items).
function mesh.collect(self, deadline)
  local t = self.tree
  local g = group_of(t, self.rank)
  local want, n, blobs = {}, 0, {}
  for h = 1, t.ngroups - 1 do
    if h ~= g and linked(self, h) then want[h] = true; n = n + 1 end
  end
  local function visit(c)
    local h = c.mesh
    if not (h and want[h]) then return end
    local m = c.frames[1]
    while m and m.op == "mesh" and m.seq < self.seq do table.remove(c.frames, 1); m = c.frames[1] end
    if m and m.op == "mesh" and m.seq == self.seq then
      table.remove(c.frames, 1)
      if wire.items(m.blob, function() end) then
        blobs[#blobs + 1] = m.blob
      else -- (what a relay sent that is no list of items: named, its part of the route lost)
        blobs.bad = blobs.bad or string.format("relay rank %d sent a malformed mesh frame", ranks.relay_of(t.k, h))
      end
      want[h], n = nil, n - 1
    elseif not m and c.closed then
      want[h], n = nil, n - 1
    end
  end
  for h in pairs(want) do visit(t.mesh[h]) end
  while n > 0 and self.hub:wait(deadline, visit) do end
  return blobs
end

--- A relay asked to resend (the relays rank 0 buried this route): one "L"
-- frame to rank 0 with what it had sent them.
function mesh.resend(self, groups, deadline)
  local t = self.tree
  local l = {}
  for _, r in ipairs(groups) do
    local h = group_of(t, r)
    if t.sent and t.sent[h] then l[#l + 1] = t.sent[h] end
  end
  return wire.send_raw(self.up, wire.frame("L" .. self.seq .. " " .. table.concat(l)), deadline)
end

return mesh
