--- The relay tree of ibverbs.fabric's route.  Past fabric.TREE_MIN ranks (or
-- with opts.group / IBV_FABRIC_GROUP = k), route runs over a two-level tree:
-- rank 0 is group 0 alone, the other ranks form groups of k (about
-- sqrt(size)) in rank order, the first rank of each its relay
-- (ibverbs.fabric.ranks.group_of), and a group's other ranks (its members)
-- send their route frames to their relay, which sorts their messages by the
-- group they go to: its own group's it keeps, another relay's group's it
-- sends that relay directly (the relays' mesh: ibverbs.fabric.mesh), and it
-- sends rank 0 one bundle: the messages for rank 0 (and for a group whose
-- relay is gone) and the ups, reduced into one when route is given a reduce.
-- Rank 0 relays no group: it takes one bundle per relay (and the frames of
-- the ranks it adopted) and sends each relay one frame (rank 0's messages,
-- the dead); a relay splits what it got among its members.  Rank 0's cost
-- per route is then O(size / k) frames and the bytes of its own messages, a
-- relay's O(size / k + k).  The other collectives
-- stay on the star.  A relay that dies or misses its limit (tolerant groups) is buried
-- alone: rank 0 tells its members on their own connections and they send to
-- rank 0 from then on (adopted); a member that finds its relay gone does the
-- same.  The frames are ibverbs.fabric.wire's; every wait is the hub's.
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local hub = require "ibverbs.fabric.hub"
local mesh = require "ibverbs.fabric.mesh"
local ranks = require "ibverbs.fabric.ranks"
local door = require "ibverbs.fabric.door"
local int = require("ibverbs.fabric.launcher").int

local tree = {}
local NOTHING = wire.NOTHING
local name, bury, broken = ranks.name, ranks.bury, ranks.broken
local relay_of = ranks.relay_of

--- The group size: given (opts.group or IBV_FABRIC_GROUP; 0: no tree), else
-- about sqrt(size) from tree_min ranks; 0 for no tree, or nil, msg.
function tree.group_size(given, size, tree_min)
  local k = int(given)
  if given ~= nil and (not k or k < 0) then
    return nil, "fabric: group must be 0 (no tree) or a group size, got " .. tostring(given)
  end
  if k == nil and size >= tree_min then k = math.ceil(math.sqrt(size - 1)) end
  if not k or k < 2 or k >= size then return 0 end
  return k
end

local function group_of(t, r) return ranks.group_of(t.k, r) end
local function relay(t, g) return relay_of(t.k, g) end

-- The members of group g (its ranks but the relay; group 0 has none).
local function members(t, g)
  local l = {}
  if g == 0 then return l end
  for r = relay(t, g) + 1, ranks.last_of(t.k, g, t.size) do l[#l + 1] = r end
  return l
end

-- Where a route waits past its own limit: a relay waits for its members first.
local function margin(timeout) return 5 + timeout / 10 end

--- The tree's state on this rank (groups of k), or nil, msg: a relay listens
-- (backlog) for its members.  Written later: addrs (relay addresses, by the
-- rendezvous), sock (a member's connection to its relay), adopted and told
-- (ranks sent to rank 0 directly; the buried members a relay reported),
-- margin (per route) and last (rank 0: what it sent each group last time).
function tree.new(rank, size, k, timeout, backlog)
  local t = { k = k, size = size, ngroups = ranks.ngroups(k, size), adopted = {}, told = {}, addrs = {},
    margin = margin(timeout) }
  local g = group_of(t, rank)
  t.relay, t.members = g == 0 and 0 or relay(t, g), members(t, g)
  if rank ~= 0 and rank == t.relay then -- a relay: its members connect here
    local l, err = socket.bind("*", 0, backlog)
    if not l then return nil, "fabric: relay rank " .. rank .. " cannot listen: " .. tostring(err) end
    t.listener = l
  end
  return t
end

--- What a rank says of the tree at the rendezvous: its group size and, a relay, its port.
function tree.hello(t) return t.k, t.listener and select(2, t.listener:getsockname()) end

-- ---------------------------------------------------------------- setting up

-- A relay: its members connect and say who they are; the missing ones, as {rank, why}.
local function accept_members(self, deadline)
  local t = self.tree
  local g = group_of(t, self.rank)
  local lower = mesh.connect_lower(self, deadline) -- the relays below: their listeners take it before they accept
  self.hub, self.peers = hub.new(true), {}
  mesh.adopt_links(self, lower)
  local want = mesh.expected(self)
  for _, r in ipairs(t.members) do if not self.dead[r] then want = want + 1 end end
  local d = door.open(self.lock, self.hub, t.listener)
  t.listener = nil
  d:run(deadline, function() return want <= 0 end, function(c, hello)
    local r, ok, why = int(hello.member), false, "not a hello of a member or a relay"
    if hello.relay then
      ok, why = mesh.accept(self, c, hello)
    elseif r then
      ok, why = door.check(c, self.lock, hello, "member", tostring(hello.member))
      if ok and not (group_of(t, r) == g and r ~= self.rank and not self.peers[r] and not self.dead[r]) then
        ok, why = false, "not a member of this relay's group, or one already here: rank " .. r
      end
      if ok then door.admit(c); c.rank, self.peers[r] = r, c end
    end
    if not ok then return why end
    want = want - 1
  end)
  for c in pairs(d.pending) do self.hub:drop(c) end
  local missing = {}
  for _, r in ipairs(t.members) do
    if not self.peers[r] and not self.dead[r] then
      missing[#missing + 1] = { r, string.format("%s did not reach its relay %s", name(self, r),
        name(self, self.rank)) }
    end
  end
  return missing
end

-- A member: it connects to its relay and says its rank; {} or {{rank, why}}.
local function reach_relay(self, deadline)
  local t = self.tree
  local addr = t.addrs[tostring(group_of(t, self.rank))]
  local sock, err
  if addr then sock, err = hub.connect(addr, deadline) else err = "its address did not arrive" end
  if sock then
    local ok, mine
    mine, err = door.answer(sock, self.lock, deadline, "member", tostring(self.rank))
    if mine then ok, err = wire.send(sock, { member = self.rank, proof = mine.proof }, deadline) end
    if ok then t.sock = sock; return {} end
    sock:close()
  end
  return { { self.rank, string.format("%s cannot reach its relay %s: %s", name(self, self.rank),
    name(self, t.relay), tostring(err)) } }
end

--- After the rendezvous: members connect to their relay.  Returns the ranks
-- that could not, as {rank, why} (the group then gathers them: tree.adopt).
function tree.connect(self, deadline)
  local t = self.tree
  if self.rank ~= 0 and t.relay == self.rank then return accept_members(self, deadline) end
  if t.relay ~= 0 then return reach_relay(self, deadline) end
  return {}
end

--- The ranks that could not reach their relay, every rank's list joined: they
-- send to rank 0 from now on (tolerant groups), or nil, msg.
function tree.adopt(self, orphans)
  local t = self.tree
  if #orphans > 0 and not self.tolerant then return nil, orphans[1][2] end
  for _, o in ipairs(orphans) do
    local r = o[1]
    t.adopted[r] = true
    if r == self.rank and t.sock then t.sock:close(); t.sock = nil end
    if self.hub and self.peers[r] and self.rank ~= 0 then self.hub:drop(self.peers[r]); self.peers[r] = nil end
  end
  if self.rank ~= 0 and t.relay == self.rank then
    local l = {}
    for _, r in ipairs(t.members) do if not t.adopted[r] then l[#l + 1] = r end end
    t.members = l
  end
  return true
end

-- ---------------------------------------------------------------- a member's route

-- Its frame to the relay and the relay's answer; rank 0 may say first that the
-- relay is gone.  The answer, or nil, msg (the relay unreachable).
local function via_relay(self, mine, deadline)
  local t = self.tree
  local until_t = deadline + 3 * t.margin
  local ok, err = wire.send_raw(t.sock, mine, deadline)
  local watch = { t.sock, self.up }
  while ok do
    local ready
    ready, err = hub.first_readable(watch, until_t)
    if not ready then break end
    if ready == t.sock then
      local msg
      msg, err = wire.read(t.sock, until_t)
      if msg then return msg end
      break
    end
    local word = wire.read(self.up, until_t)
    if word and not word.orphan then return word end
    if word then err = "rank 0 says the relay is gone"; break end
    watch[2] = nil -- rank 0 closed (it may finish first): the relay still answers
  end
  return nil, string.format("route #%d: relay %s: %s", self.seq, name(self, t.relay), wire.said(err))
end

-- A member: the answer from its relay, or from rank 0 when the relay is gone
-- (tolerant groups; rank 0 says so, or the relay's connection breaks).
local function member_route(self, mine, deadline)
  local t = self.tree
  if t.sock then
    local msg, why = via_relay(self, mine, deadline)
    if msg then return msg end
    if not self.tolerant then return nil, why end
    t.sock:close()
    t.sock = nil
  end
  local ok, err = wire.send_raw(self.up, mine, deadline)
  local msg
  while ok do -- a notice that came after this rank found its relay gone is skipped
    msg, err = wire.read(self.up, deadline + 4 * t.margin)
    if not (msg and msg.orphan) then break end
  end
  if not msg then
    return nil, string.format("route #%d: no answer from rank 0 (%s)", self.seq, wire.said(err))
  end
  return msg
end

-- ---------------------------------------------------------------- a relay's route

--- The string ups of all (a table indexed rank + 1) as a list in rank
-- order, for a reduce: those present, not every rank's slot (rank 0 has a
-- few: its own, one a relay, and the adopted ranks').
function tree.reduce_ups(all)
  local ks, l = {}, {}
  for r, v in pairs(all) do if type(v) == "string" then ks[#ks + 1] = r end end
  table.sort(ks)
  for i, r in ipairs(ks) do l[i] = all[r] end
  return l
end

-- The bundle of a relay's group: its own and its members' messages by
-- destination group, and their ups (reduced into one, with reduce), for
-- rank 0; the messages for linked relays sent them (the mesh); and the
-- messages within its group, returned.
local function bundle(self, own, values, reduce)
  local t = self.tree
  local parts, srcs = {}, {}
  local function add(g, s)
    parts[g] = parts[g] or {}
    parts[g][#parts[g] + 1] = s
  end
  local ups = {}
  for i = 0, #t.members do
    local r = i == 0 and self.rank or t.members[i]
    local v = i == 0 and own or values[r + 1]
    if type(v) == "table" then
      srcs[#srcs + 1] = r
      for _, m in ipairs(v.m) do
        if m[1] >= 0 and m[1] < self.size then add(group_of(t, m[1]), wire.item(r, m[1], m[2])) end
      end
      if v.u and reduce then ups[#ups + 1] = wire.untag(v.u)
      elseif v.u then add(-1, wire.item(r, -1, v.u)) end
    end
  end
  if #ups > 0 then add(-1, wire.item(self.rank, -1, wire.tag(reduce(ups)))) end
  local mine = {} -- the members this relay buried, each told once
  for _, d in ipairs(self.dead_list) do
    if not t.told[d[1]] and group_of(t, d[1]) == group_of(t, self.rank) then
      t.told[d[1]] = true
      mine[#mine + 1] = d
    end
  end
  local kept = mesh.send_parts(self, parts) -- to the linked relays; its own group's kept
  return wire.bundle_encode(self.seq, mine, srcs, parts), kept
end

-- A relay: its members' frames, one bundle to rank 0, rank 0's answer split among them.
local function relay_route(self, own, deadline, reduce)
  local t = self.tree
  local values, err = hub.collect(self, "route", own, deadline, { ranks = t.members })
  local frame, kept
  if err then frame = wire.encode({ op = "route", seq = self.seq, v = { err = err } })
  else frame, kept = bundle(self, own, values, reduce) end
  local ok, serr = wire.send_raw(self.up, frame, deadline + t.margin)
  local msg
  if ok then msg, serr = wire.read(self.up, deadline + 3 * t.margin) end
  if not msg then
    err = err or string.format("route #%d: no answer from rank 0 (%s)", self.seq, wire.said(serr))
  elseif msg.err then
    err = msg.err
  end
  local inbox
  if not err and (type(msg.blob) ~= "string" or not wire.items(msg.blob, function() end)) then
    err = string.format("route #%d: rank 0 sent what is not its answer to a relay", self.seq)
  end
  if not err then
    ranks.learn_dead(self, msg.dead)
    if msg.resend then mesh.resend(self, msg.resend, deadline + 3 * t.margin) end
    local blobs = mesh.collect(self, deadline + 3 * t.margin)
    if blobs.bad then
      err = string.format("route #%d: %s", self.seq, blobs.bad)
    else
      inbox, err = wire.inbox_of(msg.blob .. table.concat(blobs) .. table.concat(kept or {}))
    end
  end
  if err then
    local e = wire.encode({ err = err })
    for _, r in ipairs(t.members) do
      local c = self.peers[r]
      if c then wire.send_raw(c.sock, e, socket.gettime() + 5) end
    end
    return broken(self, err)
  end
  local dead = ranks.dead_said(self)
  for _, r in ipairs(t.members) do
    local c = self.peers[r]
    if c then
      local sent, e2 = wire.send_raw(c.sock, wire.route_reply(inbox[r] or NOTHING, dead), socket.gettime() + 5)
      if not sent then bury(self, r, string.format("%s left the fabric during route (%s)", name(self, r), e2)) end
      c.sock:settimeout(0)
    end
  end
  return wire.untag_list(inbox[self.rank] or {})
end

-- ---------------------------------------------------------------- rank 0's route

-- Rank 0: the items for rank r in what it sent to r's group last time (a
-- member that found its relay gone after rank 0 answered).
local function answer_late(self, r)
  local t = self.tree
  local list = {}
  for _, g in ipairs({ group_of(t, r), 0 }) do
    for _, m in ipairs((wire.inbox_of(table.concat(t.last[g] or {})) or {})[r] or {}) do list[#list + 1] = m end
  end
  local c = self.peers[r]
  if c then wire.send_raw(c.sock, wire.route_reply(list, ranks.dead_said(self)), socket.gettime() + 5) end
end

-- Rank 0: group g's relay is gone; its live members send to rank 0 from now on.
local function adopt_group(self, g, w)
  local t = self.tree
  t.buried_now = t.buried_now or {}
  t.buried_now[#t.buried_now + 1] = relay(t, g) -- what the other relays sent it by the mesh: to be resent
  local notice = wire.encode({ orphan = true })
  for _, m in ipairs(members(t, g)) do
    if not self.dead[m] and not t.adopted[m] then
      t.adopted[m] = true
      local c = self.peers[m]
      if c then wire.send_raw(c.sock, notice, socket.gettime() + 5); c.sock:settimeout(0) end
      if w then w.add(m) end
    end
  end
  if w then w.extend = socket.gettime() + t.margin end
end

-- Rank 0's wait: its own group's frames (and the adopted ranks') and one bundle per relay.
local function root_collect(self, own, deadline)
  local t = self.tree
  local want, late = {}, {}
  for _, r in ipairs(t.members) do want[#want + 1] = r end
  for r in pairs(t.adopted) do want[#want + 1] = r end
  for g = 1, t.ngroups - 1 do
    want[#want + 1] = relay(t, g)
    late[relay(t, g)] = true
  end
  local w = { ranks = want, late = late, late_deadline = deadline + t.margin }
  w.lost = function(r) if late[r] then adopt_group(self, group_of(t, r), w) end end
  w.stray = function(r, msg) -- a member whose relay broke: this call's frame, or the last one's
    if msg.op ~= "route" or self.dead[r] then return nil end
    if msg.seq == self.seq then t.adopted[r] = true; return "take" end
    if msg.seq == self.seq - 1 and t.last then answer_late(self, r); t.adopted[r] = true; return "drop" end
  end
  return hub.collect(self, "route", own, deadline, w)
end

-- What rank 0 sends on: out[g] the items for group g (group 0: rank 0's own
-- and the adopted ranks'), all[r + 1] every rank's up; the ranks it answers directly.
local function sort_out(self, own, values)
  local t = self.tree
  local out, all, bundled = {}, {}, {}
  local function put(g, s)
    if g ~= 0 and self.dead[relay(t, g)] then g = 0 end
    out[g] = out[g] or {}
    out[g][#out[g] + 1] = s
  end
  for g = 1, next(t.adopted) and t.ngroups - 1 or 0 do -- (only an adopted rank may come both ways)
    local v = values[relay(t, g) + 1]
    for _, r in ipairs(type(v) == "table" and v.srcs_text and wire.bundle_srcs(v) or NOTHING) do bundled[r] = true end
  end
  local direct = { 0 } -- its group's members and the adopted ranks (some since this call began)
  for _, r in ipairs(t.members) do direct[#direct + 1] = r end
  for r in pairs(t.adopted) do direct[#direct + 1] = r end
  for _, r in ipairs(direct) do
    local v = r == 0 and own or values[r + 1]
    if type(v) == "table" and not (r ~= 0 and bundled[r]) then
      for _, m in ipairs(type(v.m) == "table" and v.m or NOTHING) do
        local to = int(m[1])
        if to and to >= 0 and to < self.size and type(m[2]) == "string" then
          put(t.adopted[to] and 0 or group_of(t, to), wire.item(r, to, m[2]))
        end
      end
      if type(v.u) == "string" then all[r + 1] = wire.untag(v.u) end
    end
  end
  for g = 1, t.ngroups - 1 do
    local v = values[relay(t, g) + 1]
    for h, blob in pairs(type(v) == "table" and v.parts or NOTHING) do
      if h == -1 then wire.items(blob, function(from, _, up) all[from + 1] = wire.untag(up) end) else put(h, blob) end
    end
  end
  return out, all, direct
end

-- Rank 0: the relays' errors and the ranks they buried, taken in; the first error.
local function take_bundles(self, values, err)
  local t = self.tree
  for g = 1, t.ngroups - 1 do
    local v = values[relay(t, g) + 1]
    if type(v) == "table" then
      err = err or v.err
      for _, d in ipairs(v.dead or NOTHING) do
        if not t.adopted[d[1]] then bury(self, d[1], d[2]) end
      end
    end
  end
  return err
end

-- Rank 0: what the live relays resend for the relays buried during this route
-- (ibverbs.fabric.mesh), into out[0]: the buried relays' members are adopted.
local function take_resent(self, out, deadline)
  local t = self.tree
  local relays = {}
  for g = 1, t.ngroups - 1 do
    local r = relay(t, g)
    if not self.dead[r] and self.peers[r] then relays[#relays + 1] = r end
  end
  local values = hub.collect(self, "late", nil, deadline, { ranks = relays })
  out[0] = out[0] or {}
  for _, r in ipairs(relays) do
    if type(values[r + 1]) == "string" then out[0][#out[0] + 1] = values[r + 1] end
  end
end

-- Rank 0: one frame to each relay, then the answers of the ranks it serves directly.
local function root_send(self, out, direct, err)
  local t = self.tree
  local dead = ranks.dead_said(self)
  local e = err and wire.encode({ err = err })
  local resend = t.buried_now
  for g = 1, t.ngroups - 1 do
    local r = relay(t, g)
    local c = not self.dead[r] and self.peers[r]
    if c then
      local ok, serr = wire.send_raw(c.sock, e or wire.bundle_reply(dead, out[g], resend), socket.gettime() + 5)
      if not ok and self.tolerant and not err then
        bury(self, r, string.format("%s left the fabric during route (%s)", name(self, r), tostring(serr)))
        adopt_group(self, g)
      end
      c.sock:settimeout(0)
    end
  end
  if resend and not err then take_resent(self, out, socket.gettime() + t.margin) end -- (the route's deadline passed)
  local inbox = wire.inbox_of(table.concat(out[0] or {})) or {}
  dead = ranks.dead_said(self)
  for i = 2, #direct do
    local r = direct[i]
    local c = not self.dead[r] and self.peers[r]
    if c then
      wire.send_raw(c.sock, e or wire.route_reply(inbox[r] or NOTHING, dead), socket.gettime() + 5)
      c.sock:settimeout(0)
    end
  end
  return inbox
end

-- Rank 0: each group's parts joined, unread, into one frame for its relay.
local function root_route(self, own, deadline, reduce)
  self.tree.buried_now = nil
  local values, err = root_collect(self, own, deadline)
  err = take_bundles(self, values, err)
  local out, all, direct = sort_out(self, own, values)
  self.tree.last = out
  local inbox = root_send(self, out, direct, err)
  if err then return broken(self, err) end
  if reduce then all = reduce(tree.reduce_ups(all)) end
  return wire.untag_list(inbox[0] or {}), all
end

--- fabric_group:route over the tree (the collective begun: its deadline and
-- limit; reduce: see fabric_group:route).
function tree.route(self, msgs, up, deadline, timeout, reduce)
  local t = self.tree
  t.margin = margin(timeout)
  local m = {}
  for _, x in ipairs(msgs) do
    local to = int(type(x) == "table" and x[1])
    if to and to >= 0 and to < self.size then m[#m + 1] = { to, wire.tag(x[2]) } end
  end
  local own = { m = m, u = up ~= nil and wire.tag(up) or nil }
  if self.rank == 0 then return root_route(self, own, deadline, reduce) end
  if t.relay == self.rank then return relay_route(self, own, deadline, reduce) end
  local msg, err = member_route(self, wire.route_encode(self.seq, own), deadline)
  if not msg then return broken(self, err) end
  if msg.err then return broken(self, tostring(msg.err)) end
  ranks.learn_dead(self, msg.dead)
  local list = wire.untag_list(msg.v or {})
  if not list then
    return broken(self, string.format("route #%d: %s sent what is not its answer", self.seq, name(self, t.relay)))
  end
  return list
end

return tree
