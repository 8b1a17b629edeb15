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
-- Rank 0 listens on TCP (luasocket) and every other rank connects to it,
-- proving it belongs to the run (ibverbs.fabric.door).  The
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
-- its collectives, route and init; where ranks come from is
-- ibverbs.fabric.launcher's, the rendezvous ibverbs.fabric.rendezvous's, and
-- who may join ibverbs.fabric.door's.
local socket = require "socket"
local launcher = require "ibverbs.fabric.launcher"
local wire = require "ibverbs.fabric.wire"
local hub = require "ibverbs.fabric.hub"
local ranks = require "ibverbs.fabric.ranks"
local tree = require "ibverbs.fabric.tree"
local pmix = require "ibverbs.fabric.pmix"
local door = require "ibverbs.fabric.door"
local rendezvous = require "ibverbs.fabric.rendezvous"

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

--- How the rendezvous was guarded (a line for a report: authenticated by
-- what, or not), and the strangers rank 0 or this relay dropped, one line each.
function fabric_group:door()
  return self.lock.what, door.lines(self.lock)
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
  if msg.err then return broken(self, tostring(msg.err)) end
  -- rank 0's JSON answers carry the collective's number (a raw one, route's, is known by its shape)
  if (not raw or msg.seq ~= nil) and msg.seq ~= self.seq then
    return broken(self, string.format("%s #%d: rank 0 sent what is not its answer (%s)", op, self.seq,
      msg.seq and ("one for #" .. tostring(msg.seq)) or "no collective's number"))
  end
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
        err_frame = err_frame or wire.encode({ err = err, seq = self.seq })
        frame = err_frame
      else
        local v = answer(values, r)
        if v ~= last then last_raw, last_json = nil, nil end
        last = v
        if raw and c.spoke_raw then -- a rank gets its answer framed as it asked
          last_raw = last_raw or raw.reply(v, dead)
          frame = last_raw
        else
          last_json = last_json or wire.encode({ v = v, dead = dead, seq = self.seq })
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

-- ---------------------------------------------------------------- after the rendezvous

-- After the rendezvous: the tree's members reach their relays; one collective
-- then says who could not (tolerant groups: they send to rank 0 instead).
-- (a relay's strangers ride along, for rank 0's report)
local function tree_setup(self, deadline)
  local missing = tree.connect(self, deadline)
  local mine = { m = missing, s = self.rank ~= 0 and self.lock.count > 0 and door.lines(self.lock) or nil }
  local l -- every rank's list joined once, the same answer for all (one encoding: O(N), not O(N^2))
  local orphans, err = collective(self, "tree", mine, self.init_timeout, function(values)
    if l then return l end
    l = {}
    for r = 1, self.size do
      local v = type(values[r]) == "table" and values[r] or NOTHING
      for _, x in ipairs(type(v.m) == "table" and v.m or NOTHING) do l[#l + 1] = x end
      for _, x in ipairs(r > 1 and type(v.s) == "table" and v.s or NOTHING) do -- (rank 0 reads its own lock)
        door.stranger(self.lock, { peer = "at relay " .. self:name(r - 1) }, tostring(x))
      end
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
  -- where rank 0 listens: the user's port; under PMIx one the kernel picks (put for the others); under
  -- Slurm the step's reserved ports or candidates from its ids; else the default
  local ports, perr
  if port then ports = { port }
  elseif pm then ports = {}
  else ports, perr = launcher.ports(getenv) end
  if perr then return nil, perr end
  ports = ports or { fabric.DEFAULT_PORT }
  return { root = root, explicit_root = (opts.root or getenv("IBV_FABRIC_ROOT")) ~= nil,
    port = ports[1] or 0, ports = ports, k = k, wait_every = every,
    timeout = tonumber(opts.timeout) or tonumber(getenv("IBV_FABRIC_TIMEOUT")) or fabric.DEFAULT_TIMEOUT }
end

-- The group object of rank of size, before the rendezvous.
local function new_group(opts, getenv, rank, size, launcher_name, v, pm, pm_note)
  local self = setmetatable({ rank = rank, size = size, launcher = launcher_name, root = v.root, port = v.port,
    ports = v.ports, backlog = fabric.BACKLOG, lock = v.lock,
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
  v.lock, verr = door.lock(opts, getenv, launcher.run_name(getenv))
  if not v.lock then return fail(verr) end
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
  if rank == 0 then ok, err = rendezvous.listen(self) end -- (under PMIx, the port put is the one it got)
  if ok and pm then ok, err = pmix.rendezvous(self, deadline) end -- then TCP, until the same deadline
  if ok and rank == 0 then
    self.hub = hub.new(not opts.select)
    ok, err = rendezvous.root(self, deadline)
  elseif ok then
    ok, err = rendezvous.rank(self, deadline)
  end
  if ok and self.tree then ok, err = tree_setup(self, socket.gettime() + v.timeout) end
  if not ok then
    self:close()
    return nil, "fabric: " .. err
  end
  return self
end

return fabric
