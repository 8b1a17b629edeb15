--- The rendezvous of ibverbs.fabric: every rank reaches rank 0 over TCP,
-- proves it belongs to the run (ibverbs.fabric.door) and says hello; rank 0
-- answers with the welcome (every host, the dead, the relays' addresses)
-- once all arrived, or the failure.
--
--   local ok, err = rendezvous.root(f, deadline)    -- rank 0
--   local ok, err = rendezvous.rank(f, deadline)    -- any other rank
--
-- Where rank 0 listens: f.ports, tried in turn.  One port when it is the
-- user's (--fabric-port, IBV_FABRIC_PORT, root = "host:port") or PMIx's (the
-- port the kernel gave rank 0, put through PMIx); under Slurm without PMIx
-- the step's reserved ports or candidates every rank derives from the job
-- and step ids (ibverbs.fabric.launcher.ports): rank 0 takes the first free
-- one, a rank tries each until the one whose challenge names its run.
-- A connection that is not a rank of this run is a stranger: dropped and
-- named (f:strangers()), never the rendezvous' failure.
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local hub = require "ibverbs.fabric.hub"
local ranks = require "ibverbs.fabric.ranks"
local tree = require "ibverbs.fabric.tree"
local door = require "ibverbs.fabric.door"
local int = require("ibverbs.fabric.launcher").int

local rendezvous = {}

--- What a rank claims in its hello, as its proof binds it.
function rendezvous.who(rank, size) return tostring(rank) .. "/" .. tostring(size) end

-- Rank 0: why a proven hello cannot be taken (a fabric of another shape, a
-- rank out of range or twice), or nil.  Its sender is dropped as a stranger.
local function refuse(self, hello, r, k)
  local who = string.format("rank %s (%s)", tostring(hello.rank), tostring(hello.host))
  if hello.size ~= self.size then
    return string.format("%s says the fabric has %s ranks, rank 0 says %d", who, tostring(hello.size), self.size)
  elseif (hello.group or 0) ~= k then
    return string.format("%s says the relay groups have %s ranks, rank 0 says %d (IBV_FABRIC_GROUP)", who,
      tostring(hello.group or 0), k)
  elseif k > 0 and r and r > 0 and ranks.relay_of(k, ranks.group_of(k, r)) == r and not int(hello.relay_port) then
    return string.format("rank %d (%s) is a relay and listens nowhere", r, tostring(hello.host))
  elseif not r or r < 1 or r >= self.size then
    return string.format("a rank %s (%s) arrived: ranks are 0 to %d", tostring(hello.rank), tostring(hello.host),
      self.size - 1)
  elseif self.peers[r] then
    return string.format("rank %d arrived twice (%s and %s)", r, self.hosts[r + 1], tostring(hello.host))
  end
end

-- Rank 0: the ranks that did not arrive are buried (tolerant) or fail the rendezvous.
local function judge_arrivals(self)
  local missing = {}
  for r = 1, self.size - 1 do
    if not self.peers[r] then missing[#missing + 1] = r end
  end
  if #missing == 0 then return nil end
  local what = string.format("did not arrive at the rendezvous (port %d) within %g s", self.port, self.init_timeout)
  if self.lock.count > 0 then -- a rank of this run may be among them (another size, another key)
    local lines = door.lines(self.lock)
    what = what .. string.format("; %d connection%s dropped: %s", self.lock.count, self.lock.count > 1 and "s" or "",
      table.concat(lines, "; ", 1, math.min(#lines, 3)))
  end
  if not self.tolerant then return ranks.names(self, missing) .. " " .. what end
  for _, r in ipairs(missing) do ranks.bury(self, r, self:name(r) .. " " .. what) end
end

-- Rank 0: the ranks whose agree string (the script, its version and options)
-- is not rank 0's, named with what each runs, or nil.
local function judge_agreement(self)
  if self.agree == nil then return nil end
  local by, order = {}, {}
  for r = 0, self.size - 1 do
    local a = r == 0 and self.agree or self.agreed[r]
    if self.peers[r] or r == 0 then
      a = tostring(a)
      if not by[a] then by[a] = {}; order[#order + 1] = a end
      table.insert(by[a], r)
    end
  end
  if #order < 2 then return nil end
  local parts = {}
  for _, a in ipairs(order) do parts[#parts + 1] = ranks.names(self, by[a]) .. ": '" .. a .. "'" end
  return "the ranks do not run the same script version and options: " .. table.concat(parts, "; ")
end

-- Rank 0: the welcome (every host, the dead, and the relays' addresses to
-- the ranks that did not read them from PMIx) or the failure, to every rank;
-- before the welcome, rank 0's proof over the rank's own nonce.
local function answer_arrivals(self, fail)
  local frames = {} -- each welcome encoded once, when a rank needs it (the host list is O(N))
  local function welcome(relays)
    local key = relays and "full" or "lean"
    frames[key] = frames[key] or wire.encode({ welcome = true, hosts = self.hosts, dead = self.dead_list,
      relays = relays })
    return frames[key]
  end
  for r = 1, self.size - 1 do
    local c = self.peers[r]
    if c then
      if fail then
        wire.send(c.sock, { err = fail }, socket.gettime() + 5)
        self.hub:drop(c); self.peers[r] = nil
      else
        wire.send(c.sock, { vouch = door.vouch(self.lock, c.hello, rendezvous.who(r, self.size)) or "" },
          socket.gettime() + 5)
        wire.send_raw(c.sock, welcome(not c.relays_known and self.tree and self.tree.addrs or nil),
          socket.gettime() + 5)
        c.sock:settimeout(0)
        c.hello = nil
      end
    end
  end
end

--- Rank 0's listener: on self.port when it is set (the user's, or a fixed
-- default), else the first of self.ports that is free, else one the kernel
-- picks (PMIx: its port is put for the others).  True, or nil, msg.
function rendezvous.listen(self)
  if self.listener then return true end
  local err
  for _, port in ipairs(self.ports) do
    self.listener, err = socket.bind("*", port, self.backlog)
    if self.listener then self.port = port; return true end
  end
  if #self.ports == 0 then
    self.listener, err = socket.bind("*", 0, self.backlog)
    if self.listener then self.port = select(2, self.listener:getsockname()); return true end
  end
  local which = #self.ports == 1 and ("port " .. self.ports[1])
    or (#self.ports == 0 and "a port the kernel picks" or ("any of ports " .. table.concat(self.ports, ", ")))
  return nil, string.format("rank 0 cannot listen on %s: %s", which, tostring(err))
end

-- Rank 0: a hello taken (nil), or why its sender is dropped as a stranger,
-- or nil, why it fails the run: a hello proven with the key of a named run
-- (a job's step) comes from a rank of this run, whatever else it says.
-- Rank 0: why hello does not prove it comes from this run (with the rank it claims), or nil.
local function unproven(self, c, hello)
  if type(hello) ~= "table" or hello.hello ~= "ibverbs.fabric" then return "not a hello of ibverbs.fabric" end
  local ok, why = door.check(c, self.lock, hello, "hello", rendezvous.who(hello.rank, hello.size))
  if not ok then return string.format("%s (it claims rank %s)", why, tostring(hello.rank)) end
end

local function take_hello(self, c, hello, k)
  local why = unproven(self, c, hello)
  if why then return why end
  local r = int(hello.rank)
  local bad = refuse(self, hello, r, k)
  if bad and self.lock.method ~= "none" and self.lock.run ~= "" then return nil, bad end
  if bad then return bad end
  door.admit(c)
  c.rank, c.hello, self.peers[r], self.hosts[r + 1] = r, hello, c, tostring(hello.host)
  self.agreed[r] = hello.agree
  c.relays_known = hello.relays_known
  local g = k > 0 and ranks.group_of(k, r)
  if g and ranks.relay_of(k, g) == r then -- a relay: where its members find it (keys are strings in JSON)
    self.tree.addrs[tostring(g)] = (c.sock:getpeername()) .. ":" .. int(hello.relay_port)
  end
end

--- Rank 0: every rank connects, is challenged and says hello; the accepts
-- and hellos are handled as they come (a rank slow to speak holds nobody
-- up, a stranger costs nobody anything).  True, or nil, msg.
function rendezvous.root(self, deadline)
  local ok, err = rendezvous.listen(self)
  if not ok then return nil, err end
  local k = self.tree and self.tree.k or 0
  local d, arrived, fail = door.open(self.lock, self.hub, self.listener), 1, nil
  self.listener = nil
  d:run(deadline, function() return arrived >= self.size or fail end, function(c, hello)
    local why, bad = take_hello(self, c, hello, k)
    if bad then fail = bad end
    if why or bad then return why or bad end
    arrived = arrived + 1
  end)
  for c in pairs(d.pending) do -- (one whose hello came with the last rank's: what it was)
    local hello = c.frames[1]
    d:turn_away(c, hello and ("came as the rendezvous ended: " .. (unproven(self, c, hello) or
      "every rank had arrived (it claims rank " .. tostring(hello.rank) .. ")"))
      or "had said nothing when the rendezvous ended")
  end
  fail = fail or judge_agreement(self) or judge_arrivals(self)
  answer_arrivals(self, fail)
  if fail then return nil, fail end
  return true
end

-- A rank: a connection to its run's rank 0 and this rank's proof, trying
-- each of self.ports in turn until deadline; or nil, msg.
local function reach_root(self, deadline)
  local who, err = rendezvous.who(self.rank, self.size), nil
  local quick = #self.ports > 1 -- several candidates: none may hold the rank past a second or two
  repeat
    for _, port in ipairs(self.ports) do
      local now = socket.gettime()
      local sock, cerr = hub.connect(self.root .. ":" .. port, quick and math.min(deadline, now + 0.5) or deadline, 0.1)
      if sock then
        local mine, aerr = door.answer(sock, self.lock, quick and math.min(deadline, now + 3) or deadline, "hello", who)
        if mine then self.port = port; return sock, mine end
        sock:close()
        err = string.format("port %d: %s", port, aerr)
        if not quick then socket.sleep(0.2 + math.random() * 0.3) end -- (another run there: not a storm at it)
      else
        err = string.format("port %d: %s", port, tostring(cerr))
      end
    end
    if quick then socket.sleep(0.1 + math.random() * 0.2) end
  until socket.gettime() >= deadline
  return nil, err
end

--- A rank but 0: it reaches rank 0, proves itself, says hello and waits for
-- rank 0's proof and the welcome.  True, or nil, msg.
function rendezvous.rank(self, deadline)
  -- (rank 0 may not listen yet; under PMIx self.root is its addresses, each tried in turn)
  local sock, mine = reach_root(self, deadline)
  if not sock then
    return nil, string.format("rank %d: rank 0 at %s%s did not answer within %g s (%s)", self.rank, self.root,
      #self.ports == 1 and ":" .. self.ports[1] or "", self.init_timeout, tostring(mine))
  end
  self.up = sock
  local t = self.tree
  local group, relay_port
  if t then group, relay_port = tree.hello(t) end
  local ok, err = wire.send(sock, { hello = "ibverbs.fabric", rank = self.rank, size = self.size, host = self.host,
    group = group, relay_port = relay_port, agree = self.agree, relays_known = t and t.from_pmix or nil,
    proof = mine.proof, nonce = mine.nonce }, deadline)
  if not ok then return nil, "rank " .. self.rank .. ": cannot greet rank 0: " .. tostring(err) end
  -- rank 0 answers when everybody arrived, or at its own time limit
  local msg
  msg, err = wire.read(sock, deadline + 10)
  if msg and not msg.err then
    if type(msg.vouch) ~= "string" or
      not door.trusts(self.lock, { proof = msg.vouch }, mine, rendezvous.who(self.rank, self.size)) then
      return nil, string.format("rank %d: the rank 0 at %s:%d did not prove it belongs to this run", self.rank,
        self.root, self.port)
    end
    msg, err = wire.read(sock, deadline + 10)
  end
  if not msg then
    return nil, string.format("rank %d: no word from rank 0 at %s:%d (%s)", self.rank, self.root, self.port,
      wire.said(err))
  end
  if msg.err then return nil, tostring(msg.err) end
  if msg.welcome ~= true or type(msg.hosts) ~= "table" or (msg.relays ~= nil and type(msg.relays) ~= "table") then
    return nil, string.format("rank %d: rank 0 at %s:%d sent no welcome", self.rank, self.root, self.port)
  end
  for i = 1, self.size do self.hosts[i] = type(msg.hosts[i]) == "string" and msg.hosts[i] or self.hosts[i] end
  if t and not t.from_pmix then t.addrs = msg.relays or {} end -- (through PMIx: pmix.relays)
  ranks.learn_dead(self, msg.dead)
  return true
end

return rendezvous
