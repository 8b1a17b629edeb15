--- Ranks, rendezvous and collectives for scripts that run on many hosts at once.
--
--   local fabric = require "ibverbs.fabric"
--   local f = assert(fabric.init())          -- rank and size from IBV_FABRIC_*, Open MPI, PMI, Slurm or rxe-vm
--   print(f.rank, f.size, f.hosts[1])        -- ranks are 0-based; lists are indexed rank + 1
--   local all = assert(f:allgather({qpn = qp.qp_num, gid = gid}))   -- all[r + 1] is rank r's value
--   local mine = assert(f:alltoall(per_peer))  -- per_peer[r + 1] goes to rank r; mine[r + 1] came from r
--   assert(f:barrier())
--   f:close()
--
-- Rank 0 listens on TCP (luasocket) and every other rank connects to it.  The
-- collectives go through rank 0 (the star); route, past fabric.TREE_MIN ranks,
-- through relays (ibverbs.fabric.tree).  Rank 0 waits on its connections
-- through the hub (ibverbs.fabric.hub: libuv's epoll when lua-luv is there,
-- else socket.select up to fabric.SELECT_MAX ranks): O(size) work per
-- collective.  Values travel as JSON (dkjson), route's strings in frames made
-- by hand (ibverbs.fabric.wire).  Every call has a time limit: a rank that
-- does not arrive in time is named in the error ("rank 2 (node3) did not
-- arrive ..."), and the ranks that did arrive get the same error instead of
-- waiting forever.  Every call returns nil, msg on failure; after one, the
-- group is broken and says so (a tolerant group buries the rank instead).
-- This module keeps the group object (ibverbs.fabric_group in the reference),
-- its collectives, route, the rendezvous and init; where ranks come from is
-- ibverbs.fabric.launcher's.
local socket = require "socket"
local launcher = require "ibverbs.fabric.launcher"
local wire = require "ibverbs.fabric.wire"
local hub = require "ibverbs.fabric.hub"
local ranks = require "ibverbs.fabric.ranks"
local tree = require "ibverbs.fabric.tree"
local pmix = require "ibverbs.fabric.pmix"

local fabric = {}
local int, NOTHING = launcher.int, wire.NOTHING
local broken = ranks.broken

fabric.DEFAULT_PORT = 18600
fabric.DEFAULT_TIMEOUT = 60
fabric.SELECT_MAX = 1000 -- ranks rank 0 may wait on without lua-luv (socket.select: FD_SETSIZE)
fabric.BACKLOG = 4096 -- the kernel caps it at net.core.somaxconn
fabric.TREE_MIN = 64 -- route runs over the relay tree from this size
--- How often rank 0 (or a relay) calls f.on_wait(who, seconds, ranks) while a
-- collective waits, when the script set f.on_wait (f.wait_every for another period).
fabric.WAIT_EVERY = hub.WAIT_EVERY

fabric.detect = launcher.detect
fabric.hostlist = launcher.hostlist
fabric.hostname = launcher.hostname
fabric.first_host = launcher.first_host
fabric.slurm_hosts = launcher.slurm_hosts

-- ---------------------------------------------------------------- the group object

local fabric_group = { __name = "ibverbs.fabric_group" }
fabric_group.__index = fabric_group

--- "rank 2 (node3)" when the host is known, else "rank 2".
fabric_group.name = ranks.name

--- The ranks out of the run (tolerant groups): a list of {rank =, host =, why =}, by rank.
function fabric_group:dead_ranks()
  local out = {}
  for r, why in pairs(self.dead) do out[#out + 1] = { rank = r, host = self.hosts[r + 1], why = why } end
  table.sort(out, function(a, b) return a.rank < b.rank end)
  return out
end

--- Whether rank r takes part (always true on a group that is not tolerant).
function fabric_group:alive(r) return not self.dead[r] end

-- The start of every collective: its number, time limit and deadline, or nil, msg.
local function begin(self, timeout)
  if self.err then return nil, self.err end
  if self.closed then return nil, "the fabric is closed" end
  timeout = timeout or self.timeout
  self.last_timeout = timeout
  self.seq = self.seq + 1
  return socket.gettime() + timeout, timeout
end

-- A rank but 0: its value to rank 0 (framed by hand with raw.send when raw), rank 0's answer.
local function ask_root(self, op, value, deadline, raw)
  local ok, err
  if raw then
    ok, err = wire.send_raw(self.up, raw.send(self.seq, value), deadline)
  else
    ok, err = wire.send(self.up, { op = op, seq = self.seq, v = value }, deadline)
  end
  if not ok then return broken(self, string.format("%s: cannot reach rank 0: %s", op, err)) end
  -- rank 0 names a missing rank when its own limit passes: wait a little longer than that
  local msg
  msg, err = wire.read(self.up, deadline + 10)
  if not msg then
    return broken(self, string.format("%s #%d: no answer from rank 0 (%s)", op, self.seq, wire.said(err)))
  end
  if msg.err then return broken(self, msg.err) end
  ranks.learn_dead(self, msg.dead)
  return msg.v
end

-- Rank 0: each rank's answer (or the error); a reply that is the same value
-- for several ranks in a row is encoded once.
local function answer_all(self, op, values, err, answer, raw)
  local dead = ranks.dead_said(self)
  local last, last_raw, last_json, err_frame
  for r = 1, self.size - 1 do
    local c = self.peers[r]
    if c then
      local frame
      if err then
        err_frame = err_frame or wire.encode({ err = err })
        frame = err_frame
      else
        local v = answer(values, r)
        if v ~= last then last_raw, last_json = nil, nil end
        last = v
        if raw and c.spoke_raw then -- a rank gets its answer framed as it asked
          last_raw = last_raw or raw.reply(v, dead)
          frame = last_raw
        else
          last_json = last_json or wire.encode({ v = v, dead = dead })
          frame = last_json
        end
      end
      local ok, serr = wire.send_raw(c.sock, frame, socket.gettime() + 5)
      if not ok and self.tolerant then
        ranks.bury(self, r, string.format("%s left the fabric during %s (%s)", self:name(r), op, tostring(serr)))
      end
      c.sock:settimeout(0)
    end
  end
end

-- One collective: every rank gives value; rank 0 computes each rank's answer with
-- answer(values, rank) (values indexed rank + 1) and sends it back.
local function collective(self, op, value, timeout, answer, raw)
  local deadline, berr = begin(self, timeout)
  if not deadline then return nil, berr end
  if self.size == 1 then return answer({ value }, 0) end
  if self.pm_exchange and (op == "allgather" or op == "alltoall") then -- put, commit, fence, get
    local values, perr = pmix.exchange(self, op, value, deadline, berr)
    if values then return answer(values, self.rank) end
    -- the same collective over TCP in what is left of the limit: it names whoever is missing
    self.pm_exchange, self.wireup_note = nil, perr .. "; the collectives over TCP from then on"
  end
  if self.rank ~= 0 then return ask_root(self, op, value, deadline, raw) end
  local values, err = hub.collect(self, op, value, deadline)
  answer_all(self, op, values, err, answer, raw)
  if err then return broken(self, err) end
  return answer(values, 0)
end

--- Waits until every rank has called barrier.
function fabric_group:barrier(timeout)
  local ok, err = collective(self, "barrier", true, timeout, function() return true end)
  if ok == nil then return nil, err end
  return true
end

--- Every rank's value, as a list indexed rank + 1, on every rank.
function fabric_group:allgather(value, timeout)
  return collective(self, "allgather", value, timeout, function(values) return values end)
end

--- Every rank's value at root (a list indexed rank + 1); true on the other ranks.
function fabric_group:gather(value, root, timeout)
  root = root or 0
  return collective(self, "gather", value, timeout, function(values, r)
    if r == root then return values end
    return true
  end)
end

--- root's value on every rank.
function fabric_group:bcast(value, root, timeout)
  root = root or 0
  return collective(self, "bcast", value, timeout, function(values) return values[root + 1] end)
end

--- root's list, one item per rank: rank r gets list[r + 1] (root passes the
-- list, the others anything).  Rank 0's cost is one reply per rank.
function fabric_group:scatter(list, root, timeout)
  root = root or 0
  if self.rank == root and type(list) ~= "table" then
    error("bad argument #1 to 'scatter' (table expected at the root, got " .. type(list) .. ")", 2)
  end
  return collective(self, "scatter", self.rank == root and list or true, timeout, function(values, r)
    local l = values[root + 1]
    return type(l) == "table" and l[r + 1] or nil
  end)
end

--- Personalised exchange: list[r + 1] goes to rank r; returns what each rank sent to this one
-- (indexed by the sender's rank + 1).  The QP-info exchange of an all-pairs setup.
function fabric_group:alltoall(list, timeout)
  if type(list) ~= "table" then error("bad argument #1 to 'alltoall' (table expected, got " .. type(list) .. ")", 2) end
  return collective(self, "alltoall", list, timeout, function(values, r)
    local out = {}
    for src = 1, self.size do out[src] = values[src] and values[src][r + 1] end
    return out
  end)
end

-- The per-round exchange is framed by hand when its payloads are strings:
-- rank 0 then parses and writes each frame with a few string.find / concat
-- calls instead of dkjson (a tenth of the time).
local RAW = { send = wire.route_encode, reply = wire.route_reply }

-- Rank 0 on the star: every rank's messages sorted by destination, and every rank's up.
local function sort_route(self, values)
  local inbox, all = {}, {}
  for src = 1, self.size do
    local v = values[src]
    if type(v) == "table" then
      all[src] = v.u
      for _, m in ipairs(type(v.m) == "table" and v.m or NOTHING) do
        local to = int(type(m) == "table" and m[1])
        if to and to >= 0 and to < self.size then
          local l = inbox[to]
          if not l then l = {}; inbox[to] = l end
          l[#l + 1] = { src - 1, m[2] }
        end
      end
    end
  end
  return inbox, all
end

--- Point to point through rank 0: msgs is a list of {rank, value} this rank
-- sends, up a value for rank 0 alone.  Returns the list of {from, value} sent
-- to this rank; at rank 0 also every rank's up (a list indexed rank + 1).
-- Rank 0's cost is O(size + messages): the per-round exchange of a schedule.
-- When every value is a string (up a string or nil), the frames are made by
-- hand rather than by dkjson.  With reduce (a function of a list of ups,
-- strings, giving one string; every rank passes the same), the ups are
-- reduced on the way up: each relay of the tree sends rank 0 its group's
-- ups reduced, and rank 0 returns, in place of the list, the reduction of
-- those and of the ups it got directly (so reduce must not care how the
-- ups are grouped: a merge of summaries, a sum, a concatenation).
function fabric_group:route(msgs, up, timeout, reduce)
  if type(msgs) ~= "table" then error("bad argument #1 to 'route' (table expected, got " .. type(msgs) .. ")", 2) end
  if self.tree then
    local deadline, limit = begin(self, timeout)
    if not deadline then return nil, limit end
    return tree.route(self, msgs, up, deadline, limit, reduce)
  end
  local raw = up == nil or type(up) == "string"
  for _, m in ipairs(msgs) do
    if type(m) ~= "table" or type(m[2]) ~= "string" or not int(m[1]) then raw = false; break end
  end
  local inbox, all
  local res, err = collective(self, "route", { m = msgs, u = up }, timeout, function(values, r)
    if not inbox then inbox, all = sort_route(self, values) end
    return inbox[r] or NOTHING
  end, raw and RAW or nil)
  if res == nil then return nil, err end
  if reduce and self.rank == 0 then return res, reduce(tree.reduce_ups(all or { up })) end
  return res, all
end

-- The sockets only: what the collector may do (libuv's handles are luv's own
-- userdata, which at exit may be collected before this object: touching them
-- then crashes; close() stops them, and so does the hub's guard, finalized first).
local function close_sockets(self)
  self.closed = true
  if self.up then self.up:close() end
  local t = self.tree
  if t and t.sock then t.sock:close(); t.sock = nil end
  if t and t.listener then t.listener:close(); t.listener = nil end
end

--- Closes the connections (idempotent).
function fabric_group:close()
  if self.closed then return end
  close_sockets(self)
  if self.hub then self.hub:close() end
  if self.pm then self.pm.client:close() end
end
fabric_group.__close = fabric_group.close
fabric_group.__gc = function(self)
  if self.closed then return end
  close_sockets(self)
  if self.hub then self.hub:close_sockets() end
end

-- ---------------------------------------------------------------- rendezvous

-- Rank 0: why a hello cannot be taken (a fabric of another shape, a rank
-- twice), or nil.
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
-- the ranks that did not read them from PMIx) or the failure, to every rank.
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
        wire.send_raw(c.sock, welcome(not c.relays_known and self.tree and self.tree.addrs or nil),
          socket.gettime() + 5)
        c.sock:settimeout(0)
      end
    end
  end
end

-- Rank 0: every rank connects and says hello; the accepts and hellos are
-- handled as they come (a rank slow to speak holds nobody up).
local function root_rendezvous(self, deadline)
  local l, err = socket.bind("*", self.port, fabric.BACKLOG)
  if not l then
    return nil, string.format("rank 0 cannot listen on port %d: %s", self.port, tostring(err))
  end
  local h, k = self.hub, self.tree and self.tree.k or 0
  local newcomers, arrived, fail = {}, 1, nil
  h:listen(l, function(c) newcomers[c] = true end)
  local function visit(c)
    if c.rank or fail then return end
    local hello = table.remove(c.frames, 1)
    if not hello then
      if c.closed then newcomers[c] = nil; h:drop(c) end
      return
    end
    newcomers[c] = nil
    if hello.hello ~= "ibverbs.fabric" then h:drop(c); return end -- not one of ours (a scan, a stale run)
    local r = int(hello.rank)
    fail = refuse(self, hello, r, k)
    if fail then h:drop(c); return end
    c.rank, self.peers[r], self.hosts[r + 1] = r, c, tostring(hello.host)
    self.agreed[r] = hello.agree
    c.relays_known = hello.relays_known
    local g = k > 0 and ranks.group_of(k, r)
    if g and ranks.relay_of(k, g) == r then -- a relay: where its members find it (keys are strings in JSON)
      self.tree.addrs[tostring(g)] = (c.sock:getpeername()) .. ":" .. int(hello.relay_port)
    end
    arrived = arrived + 1
  end
  while arrived < self.size and not fail do
    if not h:wait(deadline, visit) then break end
  end
  h:unlisten()
  for c in pairs(newcomers) do h:drop(c) end
  fail = fail or judge_agreement(self) or judge_arrivals(self)
  answer_arrivals(self, fail)
  if fail then return nil, fail end
  return true
end

-- A rank but 0: it connects to rank 0, says hello and waits for the welcome.
local function rank_rendezvous(self, deadline)
  -- (rank 0 may not listen yet; under PMIx self.root is its addresses, each tried in turn)
  local sock, err = hub.connect(self.root .. ":" .. self.port, deadline, 0.1)
  if not sock then
    return nil, string.format("rank %d: rank 0 at %s:%d did not answer within %g s (%s)", self.rank, self.root,
      self.port, self.init_timeout, tostring(err))
  end
  self.up = sock
  local ok
  local t = self.tree
  local group, relay_port
  if t then group, relay_port = tree.hello(t) end
  ok, err = wire.send(sock, { hello = "ibverbs.fabric", rank = self.rank, size = self.size, host = self.host,
    group = group, relay_port = relay_port, agree = self.agree, relays_known = t and t.from_pmix or nil }, deadline)
  if not ok then return nil, "rank " .. self.rank .. ": cannot greet rank 0: " .. tostring(err) end
  -- rank 0 answers when everybody arrived, or at its own time limit
  local msg
  msg, err = wire.read(sock, deadline + 10)
  if not msg then
    return nil, string.format("rank %d: no word from rank 0 at %s:%d (%s)", self.rank, self.root, self.port,
      wire.said(err))
  end
  if msg.err then return nil, msg.err end
  for i = 1, self.size do self.hosts[i] = msg.hosts[i] end
  if t and not t.from_pmix then t.addrs = msg.relays or {} end -- (through PMIx: pmix.relays)
  ranks.learn_dead(self, msg.dead)
  return true
end

-- After the rendezvous: the tree's members reach their relays; one collective
-- then says who could not (tolerant groups: they send to rank 0 instead).
local function tree_setup(self, deadline)
  local missing = tree.connect(self, deadline)
  local l -- every rank's list joined once, the same answer for all (one encoding: O(N), not O(N^2))
  local orphans, err = collective(self, "tree", missing, self.init_timeout, function(values)
    if l then return l end
    l = {}
    for r = 1, self.size do
      for _, x in ipairs(type(values[r]) == "table" and values[r] or NOTHING) do l[#l + 1] = x end
    end
    return l
  end)
  if not orphans then return nil, err end
  return tree.adopt(self, orphans)
end

-- ---------------------------------------------------------------- init

-- The options that do not depend on the launcher: a table of them, or nil, msg.
local function read_options(opts, getenv, rank, size, launcher_name, launcher_root, pm)
  local root = opts.root or getenv("IBV_FABRIC_ROOT") or (not pm and launcher_root) or nil
  local root_port
  if root and root:find("^[^:]+:%d+$") then root, root_port = root:match("^(.*):(%d+)$") end
  local port = int(opts.port) or int(root_port) or int(getenv("IBV_FABRIC_PORT"))
  if size > 1 and rank ~= 0 and not root and not pm then
    return nil, "fabric: where is rank 0? set IBV_FABRIC_ROOT=host[:port] or pass root = ... (launcher: " ..
      launcher_name .. ")"
  end
  local k, kerr = tree.group_size(opts.group or getenv("IBV_FABRIC_GROUP"), size, fabric.TREE_MIN)
  if not k then return nil, kerr end
  local every_given = opts.wait_every or getenv("IBV_FABRIC_WAIT_EVERY")
  local every = tonumber(every_given)
  if every_given ~= nil and not (every and every > 0 and every < math.huge) then
    return nil, "fabric: wait_every must be a number of seconds above 0, got " .. tostring(every_given)
  end
  return { root = root, explicit_root = (opts.root or getenv("IBV_FABRIC_ROOT")) ~= nil,
    port = port or fabric.DEFAULT_PORT, k = k, wait_every = every,
    timeout = tonumber(opts.timeout) or tonumber(getenv("IBV_FABRIC_TIMEOUT")) or fabric.DEFAULT_TIMEOUT }
end

-- The group object of rank of size, before the rendezvous.
local function new_group(opts, getenv, rank, size, launcher_name, v, pm, pm_note)
  local self = setmetatable({ rank = rank, size = size, launcher = launcher_name, root = v.root, port = v.port,
    explicit_root = v.explicit_root, pm = pm or nil, pm_exchange = pm and not opts.tolerant or nil,
    wireup = pm and "PMIx " .. pm.version or "TCP", wireup_note = not pm and pm_note or nil,
    local_rank = pm and pm.local_rank, local_size = pm and pm.local_size, node_id = pm and pm.node_id,
    timeout = v.timeout, init_timeout = v.timeout, last_timeout = v.timeout, seq = 0,
    host = opts.host or pm and pm.host or launcher.hostname(getenv), hosts = {}, peers = {},
    tolerant = opts.tolerant and true or false, dead = {}, dead_list = {}, wait_every = v.wait_every,
    agree = opts.agree, agreed = {} }, fabric_group)
  -- where the launcher put each rank, until the rendezvous says (names a rank that never arrives)
  if launcher_name == "slurm" then
    local where = launcher.slurm_hosts(getenv)
    if where and #where == size then
      for r = 1, size do self.hosts[r] = where[r] end
    end
  end
  if pm and size > 1 then pmix.hosts(self) end
  self.hosts[rank + 1] = self.host
  return self
end

--- Joins the fabric: rank and size from opts or the launcher, rendezvous at rank 0.
-- opts: rank, size, root ("host" or "host:port"), port, timeout (seconds, for the
-- rendezvous and the default of every collective), host (this rank's name),
-- tolerant (a rank that does not arrive, leaves or misses a time limit is
-- buried, named in f:dead_ranks() on every rank, and the others go on without
-- it; otherwise it breaks the group for everyone), group (relay groups, see
-- route), wait_every (IBV_FABRIC_WAIT_EVERY: seconds between f.on_wait calls),
-- select (rank 0 waits with socket.select even when lua-luv is there), agree (a
-- string every rank must give alike, such as the script's version and
-- options: rank 0 refuses the rendezvous naming the ranks that differ).
function fabric.init(opts)
  opts = opts or {}
  local getenv = opts.getenv or os.getenv
  local pm, pm_note = pmix.open(opts, getenv) -- the wire-up: PMIx (a client), or false: TCP
  if pm == nil then return nil, pm_note end
  local function fail(msg)
    if pm then pm.client:close() end
    return nil, msg
  end
  local rank, size, launcher_name, root = launcher.detect(opts.getenv)
  if pm then
    rank, size, launcher_name = pm.rank, pm.size, launcher_name == "none" and "pmix" or launcher_name
  elseif opts.rank or opts.size then
    rank, size, launcher_name = int(opts.rank) or rank, int(opts.size) or size, "options"
  end
  if not rank or not size or size < 1 or rank < 0 or rank >= size then
    return fail(string.format("fabric: rank %s of size %s is not a rank", tostring(rank), tostring(size)))
  end
  local v, verr = read_options(opts, getenv, rank, size, launcher_name, root, pm)
  if not v then return fail(verr) end
  if size > 1 and rank == 0 and not hub.HAS_UV and size > fabric.SELECT_MAX then
    return fail(string.format("fabric: rank 0 waits on %d ranks: that needs lua-luv (epoll; Debian package "
      .. "lua-luv), socket.select stops at FD_SETSIZE", size - 1))
  end
  local self = new_group(opts, getenv, rank, size, launcher_name, v, pm, pm_note)
  if size == 1 then return self end
  local err
  if v.k > 0 then
    self.tree, err = tree.new(rank, size, v.k, v.timeout, fabric.BACKLOG)
    if not self.tree then return fail(err) end
  end
  local ok, deadline = true, socket.gettime() + v.timeout
  if pm then ok, err = pmix.rendezvous(self, deadline) end -- then TCP, until the same deadline
  if ok and rank == 0 then
    self.hub = hub.new(not opts.select)
    ok, err = root_rendezvous(self, deadline)
  elseif ok then
    ok, err = rank_rendezvous(self, deadline)
  end
  if ok and self.tree then ok, err = tree_setup(self, socket.gettime() + v.timeout) end
  if not ok then
    self:close()
    return nil, "fabric: " .. err
  end
  return self
end

return fabric
