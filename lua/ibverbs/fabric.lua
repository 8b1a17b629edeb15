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
-- Rank 0 listens on TCP (luasocket) and every other rank connects to it; every
-- collective goes through rank 0, which waits on the connections through
-- libuv's epoll (lua-luv): no FD_SETSIZE limit, O(size) work per collective.
-- Values are serialised with dkjson.  Every
-- call has a time limit: a rank that does not arrive in time is named in the
-- error ("rank 2 (node3) did not arrive ..."), and the ranks that did arrive
-- get the same error instead of waiting forever.  Every call returns nil, msg
-- on failure; after one, the fabric object is broken and says so.
local socket = require "socket"
local dkjson = require "dkjson"

local fabric = {}

fabric.DEFAULT_PORT = 18600
fabric.DEFAULT_TIMEOUT = 60

-- ---------------------------------------------------------------- launchers

local function int(v)
  local n = tonumber(v)
  if n and n == math.floor(n) then return math.floor(n) end
  return nil
end

-- A Slurm host list expanded into its names, in order, as `scontrol show
-- hostnames` does: "node[01-03,07],login" -> node01 node02 node03 node07 login,
-- "rack[1-2]-n[01-02]" -> rack1-n01 rack1-n02 rack2-n01 rack2-n02 (a range keeps
-- the width of its low bound).  nil, msg for a list that is not one.
function fabric.hostlist(list)
  if type(list) ~= "string" then
    error("bad argument #1 to 'hostlist' (string expected, got " .. type(list) .. ")", 2)
  end
  local items, depth, from = {}, 0, 1
  for i = 1, #list do
    local c = list:sub(i, i)
    if c == "[" then
      depth = depth + 1
      if depth > 1 then return nil, "nested '[' in the host list '" .. list .. "'" end
    elseif c == "]" then
      depth = depth - 1
      if depth < 0 then return nil, "unmatched ']' in the host list '" .. list .. "'" end
    elseif c == "," and depth == 0 then
      items[#items + 1] = list:sub(from, i - 1)
      from = i + 1
    end
  end
  if depth ~= 0 then return nil, "unmatched '[' in the host list '" .. list .. "'" end
  items[#items + 1] = list:sub(from)
  local out = {}
  for _, item in ipairs(items) do
    local names, pos = { "" }, 1
    while pos <= #item do
      local lb = item:find("[", pos, true)
      local text = item:sub(pos, (lb or #item + 1) - 1)
      for k = 1, #names do names[k] = names[k] .. text end
      if not lb then break end
      local rb = item:find("]", lb, true)
      local values = {}
      for part in item:sub(lb + 1, rb - 1):gmatch("[^,]+") do
        local a, b = part:match("^(%d+)%-(%d+)$")
        if a and tonumber(b) >= tonumber(a) then
          for v = tonumber(a), tonumber(b) do values[#values + 1] = string.format("%0" .. #a .. "d", v) end
        elseif part:match("^%d+$") then
          values[#values + 1] = part
        else
          return nil, "bad range '" .. part .. "' in the host list '" .. list .. "'"
        end
      end
      if #values == 0 then return nil, "empty range in the host list '" .. list .. "'" end
      local grown = {}
      for _, n in ipairs(names) do
        for _, v in ipairs(values) do grown[#grown + 1] = n .. v end
      end
      names, pos = grown, rb + 1
    end
    for _, n in ipairs(names) do
      if n ~= "" then out[#out + 1] = n end
    end
  end
  return out
end

-- The first host of a Slurm host list: "node[01-04,07],login" -> "node01" (nil for none).
function fabric.first_host(list)
  if not list or list == "" then return nil end
  local hosts = fabric.hostlist(list)
  return hosts and hosts[1]
end

-- Where Slurm put rank 0: the first node of the step (block and cyclic
-- distributions start there).  In a heterogeneous step the step's node list is
-- every component's, sorted; rank 0 is the first task of component 0, on the
-- first node of that component's list.
local function slurm_root(getenv)
  if int(getenv("SLURM_HET_SIZE")) then
    local first = getenv("SLURM_JOB_NODELIST_HET_GROUP_0") or getenv("SLURM_JOB_NODELIST_PACK_GROUP_0")
    if first then return fabric.first_host(first) end
  end
  return fabric.first_host(getenv("SLURM_STEP_NODELIST") or getenv("SLURM_JOB_NODELIST"))
end

-- Each rank's node in a Slurm step, when the variables say it: the step's node
-- list and tasks per node ("2(x3),1"), block distribution (Slurm's default, or
-- one task per node, where every distribution gives the same).  nil otherwise.
function fabric.slurm_hosts(getenv)
  getenv = getenv or os.getenv
  if int(getenv("SLURM_HET_SIZE")) then return nil end
  local nodes = fabric.hostlist(getenv("SLURM_STEP_NODELIST") or "")
  local per = getenv("SLURM_STEP_TASKS_PER_NODE")
  if not nodes or #nodes == 0 or not per then return nil end
  local counts, single = {}, true
  for item in per:gmatch("[^,]+") do
    local n, times = item:match("^(%d+)%(x(%d+)%)$")
    n, times = tonumber(n or item:match("^(%d+)$")), tonumber(times or 1)
    if not n then return nil end
    for _ = 1, times do counts[#counts + 1] = n end
    if n ~= 1 then single = false end
  end
  if #counts ~= #nodes then return nil end
  local dist = getenv("SLURM_DISTRIBUTION")
  if not single and dist and not dist:find("^block") then return nil end
  local hosts = {}
  for i, n in ipairs(counts) do
    for _ = 1, n do hosts[#hosts + 1] = nodes[i] end
  end
  return hosts
end

-- What the launcher says: rank, size, launcher name, the rendezvous host it implies (or nil).
-- getenv: a function like os.getenv (for the specs).  mpirun's variables come
-- before Slurm's: mpirun started inside an allocation launches its daemons
-- with srun, so its processes also see that step's SLURM_PROCID and
-- SLURM_NTASKS (rank 0 of 2 on the second node of three); the same holds for
-- a PMI launcher's proxies.
function fabric.detect(getenv)
  getenv = getenv or os.getenv
  local function pair(r, s) return int(getenv(r)), int(getenv(s)) end
  local rank, size = pair("IBV_FABRIC_RANK", "IBV_FABRIC_SIZE")
  if rank and size then return rank, size, "env", nil end
  rank, size = pair("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
  if rank and size then
    -- all ranks on this host: rank 0 is here too
    local host = int(getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) == size and "127.0.0.1" or nil
    return rank, size, "openmpi", host
  end
  rank, size = pair("PMI_RANK", "PMI_SIZE")
  if rank and size then
    local host = int(getenv("MPI_LOCALNRANKS")) == size and "127.0.0.1" or nil
    -- srun --mpi=pmi2: the same rank and size in Slurm's variables
    if not host and int(getenv("SLURM_PROCID")) == rank and int(getenv("SLURM_NTASKS")) == size then
      host = slurm_root(getenv)
    end
    return rank, size, "pmi", host
  end
  rank, size = pair("SLURM_PROCID", "SLURM_NTASKS")
  if not size then size = int(getenv("SLURM_NPROCS")) end
  if rank and size then return rank, size, "slurm", slurm_root(getenv) end
  local node, nodes = pair("RXE_VM_NODE", "RXE_VM_NODES")
  if node and nodes then
    -- tools/rxe-vm --nodes: rank K-1 on node K, rank 0 on node 1's management address
    return node - 1, nodes, "rxe-vm", (getenv("RXE_VM_MGMT_ADDRS") or ""):match("^(%S+)")
  end
  return 0, 1, "none", nil
end

-- ---------------------------------------------------------------- framing

-- LuaJIT's tostring keeps 14 digits, so dkjson would round 64-bit addresses:
-- such numbers are written with every digit (dkjson's __tojson).
local function exact(v)
  if type(v) == "number" then
    if v == v and v ~= math.huge and v ~= -math.huge and tonumber(tostring(v)) ~= v then
      local text = v == math.floor(v) and string.format("%.0f", v) or string.format("%.17g", v)
      return setmetatable({}, { __tojson = function() return text end })
    end
    return v
  end
  if type(v) ~= "table" then return v end
  local out = {}
  for k, x in pairs(v) do out[k] = exact(x) end
  return setmetatable(out, getmetatable(v))
end

local function encode(msg)
  local ok, s = pcall(dkjson.encode, exact(msg))
  if not ok or type(s) ~= "string" then return nil, "cannot serialise the value: " .. tostring(s) end
  return string.format("%08x", #s) .. s
end

-- One frame from sock before deadline (ibv-less clock: socket.gettime).
local function read_frame(sock, deadline)
  local left = deadline - socket.gettime()
  if left <= 0 then return nil, "timeout" end
  sock:settimeout(left)
  local head, err = sock:receive(8)
  if not head then return nil, err end
  local n = tonumber(head, 16)
  if not n then return nil, "malformed frame" end
  left = math.max(deadline - socket.gettime(), 0.5)
  sock:settimeout(left)
  local body
  body, err = sock:receive(n)
  if not body then return nil, err end
  if body:byte(1) == 114 then return fabric.route_reply_decode(body) end -- "r"
  if body:byte(1) == 98 then return fabric.bundle_reply_decode(body) end -- "b": rank 0 to a relay
  local msg, _, derr = dkjson.decode(body)
  if type(msg) ~= "table" then return nil, "malformed frame: " .. tostring(derr) end
  return msg
end

-- Sends a frame already encoded.
local function send_raw(sock, s, deadline)
  sock:settimeout(math.max((deadline or socket.gettime() + 10) - socket.gettime(), 1))
  local ok, err = sock:send(s)
  if not ok then return nil, err end
  return true
end

local function send_frame(sock, msg, deadline)
  local s, err = encode(msg)
  if not s then return nil, err end
  return send_raw(sock, s, deadline)
end

-- ---------------------------------------------------------------- rank 0's waiting

-- Rank 0 holds one TCP connection per rank.  It waits on all of them through
-- libuv (lua-luv: epoll on Linux), each connection's poll handle registered
-- once when it arrives, so a wake-up costs what became readable, never a scan
-- of every descriptor, and there is no FD_SETSIZE limit.  Without lua-luv it
-- falls back to socket.select, which cannot wait on descriptors past
-- FD_SETSIZE: such a fabric is refused at init past SELECT_MAX ranks.
local has_uv, uv = pcall(require, "luv")
fabric.SELECT_MAX = 1000
fabric.BACKLOG = 4096 -- the kernel caps it at net.core.somaxconn

local Hub = {}
Hub.__index = Hub

-- libuv's handles must be stopped before luv's own finalizers run: at exit luv closes the handles
-- still active and runs the loop, and a poll whose Lua side was already collected then crashed the
-- process (SIGSEGV in a script that ended without f:close()).  Finalizers run newest first, so the
-- hub keeps a guard made after its newest handle; the current guard's finalizer stops and closes
-- the handles (an older guard, replaced, does nothing).
-- One run of libuv's loop at a time: a finalizer (a guard below) may run inside a run's callbacks,
-- and uv_run is not reentrant; the run under way completes the closes then.
local running = false
local function run_loop(mode)
  if running then return end
  running = true
  local ok, err = pcall(uv.run, mode)
  running = false
  if not ok then error(err, 0) end
end

local function stop_handles(hub)
  for c in pairs(hub.conns) do
    if c.poll then pcall(c.poll.stop, c.poll); pcall(c.poll.close, c.poll); c.poll = nil end
  end
  if hub.lpoll then pcall(hub.lpoll.stop, hub.lpoll); pcall(hub.lpoll.close, hub.lpoll); hub.lpoll = nil end
  if hub.timer then pcall(hub.timer.close, hub.timer); hub.timer = nil end
  pcall(run_loop, "nowait") -- the closes complete in a run of the loop, while the handles' Lua sides live
end

local newproxy = rawget(_G, "newproxy") -- Lua 5.1 and LuaJIT: only userdata have finalizers

local function new_guard(hub)
  local guard
  local function gc(g) if hub.guard == g then stop_handles(hub) end end
  if newproxy then
    guard = newproxy(true)
    getmetatable(guard).__gc = gc
  else
    guard = setmetatable({}, { __gc = gc })
  end
  hub.guard = guard
end

local function new_hub(use_uv)
  local hub = setmetatable({ conns = {}, ready = {}, uv = use_uv }, Hub)
  if use_uv then hub.timer = uv.new_timer(); new_guard(hub) end
  return hub
end

-- Reads what the connection has (non-blocking) and splits it into frames.
local function drain(c)
  local sock = c.sock
  while true do
    local data, err, partial = sock:receive(65536)
    local got = data or partial
    if got and #got > 0 then c.buf = c.buf .. got end
    if err == "closed" then c.closed = "connection closed"; break end
    if err and err ~= "timeout" then c.closed = err; break end
    if not data then break end
  end
  while #c.buf >= 8 do
    local n = tonumber(c.buf:sub(1, 8), 16)
    if not n then c.closed = "malformed frame"; c.buf = ""; break end
    if #c.buf < 8 + n then break end
    local body = c.buf:sub(9, 8 + n)
    c.buf = c.buf:sub(9 + n)
    local msg, derr
    if body:byte(1) == 82 then -- "R": a route frame, no JSON to parse
      msg, derr = fabric.route_decode(body)
    elseif body:byte(1) == 66 then -- "B": a relay's bundle
      msg, derr = fabric.bundle_decode(body)
    else
      local _
      msg, _, derr = dkjson.decode(body)
    end
    if type(msg) ~= "table" then c.closed = "malformed frame: " .. tostring(derr); c.buf = ""; break end
    c.frames[#c.frames + 1] = msg
  end
  if c.closed and c.poll then c.poll:stop() end
end

--- Watches a connected socket; returns its connection record.
function Hub:add(sock, id)
  sock:settimeout(0)
  local c = { sock = sock, buf = "", frames = {}, id = id }
  self.conns[c] = true
  if self.uv then
    c.poll = uv.new_poll(int(sock:getfd()))
    c.poll:start("r", function() self.ready[#self.ready + 1] = c end)
    new_guard(self)
  end
  return c
end

function Hub:listen(l, on_accept)
  l:settimeout(0)
  self.listener, self.on_accept = l, on_accept
  if self.uv then
    self.lpoll = uv.new_poll(int(l:getfd()))
    self.lpoll:start("r", function() self.accept_ready = true end)
    new_guard(self)
  end
end

function Hub:unlisten()
  if self.lpoll then self.lpoll:stop(); self.lpoll:close(); self.lpoll = nil end
  if self.listener then self.listener:close(); self.listener = nil end
end

function Hub:drop(c)
  if not self.conns[c] then return end
  self.conns[c] = nil
  if c.poll then c.poll:stop(); c.poll:close(); c.poll = nil end
  c.sock:close()
end

local function accept_all(self)
  while self.listener do
    local s = self.listener:accept()
    if not s then break end
    s:setoption("tcp-nodelay", true)
    self.on_accept(self:add(s))
  end
end

--- Waits until something is readable or deadline; calls visit(c) for every
-- connection that has frames or closed, in arrival order.
function Hub:wait(deadline, visit)
  local left = deadline - socket.gettime()
  if left <= 0 then return false end
  if self.uv then
    -- the timer stops the run: when it is due as the run starts (the loop's clock counts whole
    -- milliseconds, cached from its last run), it fires before the poll, and a run "once" would then
    -- block on the sockets with no timer left, past the deadline, until a frame came
    uv.update_time()
    self.timer:start(math.max(1, math.ceil(left * 1000)), 0, uv.stop)
    run_loop("once")
    self.timer:stop()
    if self.accept_ready then self.accept_ready = false; accept_all(self) end
    local ready = self.ready
    self.ready = {}
    for _, c in ipairs(ready) do
      if self.conns[c] and not c.seen then c.seen = true; drain(c); visit(c) end
    end
    for _, c in ipairs(ready) do c.seen = nil end
  else
    local socks, by = {}, {}
    if self.listener then socks[1] = self.listener end
    for c in pairs(self.conns) do
      if not c.closed then socks[#socks + 1] = c.sock; by[c.sock] = c end
    end
    local readable = socket.select(socks, nil, left)
    for _, s in ipairs(readable) do
      if s == self.listener then accept_all(self) else local c = by[s]; drain(c); visit(c) end
    end
  end
  return true
end

-- The hub's sockets (what a finalizer may close: the handles are stop_handles').
local function close_hub_sockets(hub)
  if hub.listener then hub.listener:close(); hub.listener = nil end
  for c in pairs(hub.conns) do c.sock:close() end
  hub.conns = {}
end

function Hub:close()
  if self.uv then stop_handles(self) end
  close_hub_sockets(self)
end

-- ---------------------------------------------------------------- the object

local Fabric = {}
Fabric.__index = Fabric

--- How often rank 0 (or a relay) calls f.on_wait(who, seconds, ranks) while a
-- collective waits, when the script set f.on_wait (f.wait_every for another period).
fabric.WAIT_EVERY = 60

--- "rank 2 (node3)" when the host is known, else "rank 2".
function Fabric:name(rank)
  local host = self.hosts and self.hosts[rank + 1]
  if not host and self.launcher == "rxe-vm" then host = "node" .. (rank + 1) end
  return host and string.format("rank %d (%s)", rank, host) or ("rank " .. rank)
end

local function names(self, ranks)
  local t = {}
  for i, r in ipairs(ranks) do t[i] = self:name(r) end
  if #t == 1 then return t[1] end
  return table.concat(t, ", ", 1, #t - 1) .. " and " .. t[#t]
end

local function broken(self, msg)
  self.err = self.err or msg
  return nil, self.err
end

-- Tolerant fabrics only: rank r is out of the run from now on (why: text).
local function bury(self, r, why)
  if self.dead[r] then return end
  self.dead[r] = why
  self.ndead = self.ndead + 1
  self.dead_list[#self.dead_list + 1] = { r, why }
  local c = self.peers[r]
  if c then self.hub:drop(c); self.peers[r] = nil end
end

-- The ranks rank 0 says are out ({rank, why} pairs), taken in.
local function learn_dead(self, list)
  for _, d in ipairs(list or {}) do
    if not self.dead[d[1]] then
      self.dead[d[1]] = d[2]
      self.ndead = self.ndead + 1
      self.dead_list[#self.dead_list + 1] = d
    end
  end
end

-- What a reply says of the ranks out: the list, or nothing when there are none.
local function dead_said(self) return #self.dead_list > 0 and self.dead_list or nil end

-- A socket error as an error message says it.
local function said(err) return err == "closed" and "connection closed" or tostring(err) end

-- The start of every collective: its number, time limit and deadline, or nil, msg.
local function begin(self, timeout)
  if self.err then return nil, self.err end
  if self.closed then return nil, "the fabric is closed" end
  timeout = timeout or self.timeout
  self.last_timeout = timeout
  self.seq = self.seq + 1
  return socket.gettime() + timeout, timeout
end

--- The ranks out of the run (tolerant fabrics): a list of {rank =, host =, why =}, by rank.
function Fabric:dead_ranks()
  local out = {}
  for r, why in pairs(self.dead) do out[#out + 1] = { rank = r, host = self.hosts[r + 1], why = why } end
  table.sort(out, function(a, b) return a.rank < b.rank end)
  return out
end

--- Whether rank r takes part (always true on a fabric that is not tolerant).
function Fabric:alive(r) return not self.dead[r] end

-- Rank 0 (and a relay of the tree): wait for a message from every rank of w.ranks
-- (default: every other live rank); op and seq must match.  The cost is one
-- visit per message: O(ranks) per collective.  The tree's hooks (w): late
-- (ranks given until w.late_deadline: relays, which wait for their own
-- members first), stray(r, msg) for a frame from a rank outside the wait
-- ("take" it as this call's, "drop" it and wait for r's next one, or nil to
-- leave it), lost(r) when a rank is buried (it may add ranks to the wait
-- with w.add, set by this function, and move w.extend later).
local function hub_collect(self, op, local_value, deadline, w)
  w = w or {}
  local values = { [1] = local_value }
  local expect, want = {}, 0
  local function add(r) if not expect[r] and not self.dead[r] then expect[r] = true; want = want + 1 end end
  if w.ranks then
    for _, r in ipairs(w.ranks) do add(r) end
  else
    for r = 1, self.size - 1 do add(r) end
  end
  w.add = add
  local got = {}
  local err
  local function lose(r, why)
    if not self.tolerant then err = why; return end
    bury(self, r, why)
    want = want - 1
    if w.lost then w.lost(r) end
  end
  local function visit(c)
    local r = c.rank
    if not r or got[r] or err then return end
    if not expect[r] then
      local how = w.stray and c.frames[1] and w.stray(r, c.frames[1])
      if not how then return end
      add(r)
      if how == "drop" then
        table.remove(c.frames, 1)
        if not c.frames[1] and not c.closed then return end
      end
    end
    local msg = table.remove(c.frames, 1)
    if not msg then
      if c.closed then lose(r, string.format("%s left the fabric during %s (%s)", self:name(r), op, c.closed)) end
      return
    end
    if msg.op ~= op or msg.seq ~= self.seq then
      err = string.format("%s called %s #%s where rank 0 called %s #%d", self:name(r), tostring(msg.op),
        tostring(msg.seq), op, self.seq)
      return
    end
    values[r + 1] = msg.v
    c.spoke_raw = msg.raw
    got[r] = true
    want = want - 1
  end
  -- frames that came before this call (read with an earlier wake-up)
  for r = 1, self.size - 1 do
    local c = self.peers[r]
    if c and (c.frames[1] or c.closed) then visit(c) end
  end
  local last = math.max(deadline, w.late_deadline or deadline)
  local limit = deadline
  -- self.on_wait(who, seconds, ranks) every self.wait_every seconds of waiting: who is still awaited
  local started, every = socket.gettime(), self.wait_every
  -- (f.wait_every set by hand after init: a bad value gives the default)
  if type(every) ~= "number" or every ~= every or every <= 0 then every = fabric.WAIT_EVERY end
  local report = started + every
  -- the ranks still awaited, sorted; the relays (w.late) too only when all is true
  local function missing_ranks(all)
    local missing = {}
    for r in pairs(expect) do
      if not got[r] and not self.dead[r] and (all or not (w.late and w.late[r])) then missing[#missing + 1] = r end
    end
    table.sort(missing)
    return missing
  end
  local function awaited()
    local missing = missing_ranks(true)
    local who = {}
    for i, r in ipairs(missing) do
      who[i] = self:name(r)
      if w.late and w.late[r] and self.tree then -- a relay, itself waiting for its members
        who[i] = string.format("%s, relay of ranks %d-%d", who[i], r, math.min(r + self.tree.k, self.size) - 1)
      end
    end
    return table.concat(who, "; "), missing
  end
  local function pump(until_t)
    while want > 0 and not err do
      local stop = self.on_wait and math.min(until_t, report) or until_t
      if not self.hub:wait(stop, visit) then
        if stop >= until_t then return end
        local who, missing = awaited()
        local ok, cerr = pcall(self.on_wait, who, socket.gettime() - started, missing)
        if not ok then -- the script's callback: said once, never again, the collective goes on
          io.stderr:write("ibverbs.fabric: on_wait failed, not called again: ", tostring(cerr), "\n")
          self.on_wait = nil
        end
        report = socket.gettime() + every -- from the callback's end: a slow one never starves the wait
      end
    end
  end
  while not err do
    pump(limit)
    if err or want == 0 then break end
    last = math.max(last, w.extend or last)
    local final = socket.gettime() >= last
    local missing = missing_ranks(final)
    if #missing > 0 and not self.tolerant then
      err = string.format("%s did not arrive at %s #%d within %g s", names(self, missing), op, self.seq,
        self.last_timeout)
    end
    for _, r in ipairs(missing) do
      if err then break end
      lose(r, string.format("%s did not arrive at %s #%d within %g s", self:name(r), op, self.seq,
        self.last_timeout))
    end
    last = math.max(last, w.extend or last)
    if want == 0 or (final and socket.gettime() >= last) then break end
    limit = last
  end
  return values, err
end

-- One collective: every rank gives value; rank 0 computes each rank's answer with
-- answer(values, rank) (values indexed rank + 1) and sends it back.  A reply
-- that is the same value for several ranks is encoded once.
local function collective(self, op, value, timeout, answer, raw)
  local deadline, berr = begin(self, timeout)
  if not deadline then return nil, berr end
  if self.size == 1 then return answer({ value }, 0) end
  if self.rank ~= 0 then
    local ok, err
    if raw then
      ok, err = send_raw(self.up, raw.send(self.seq, value), deadline)
    else
      ok, err = send_frame(self.up, { op = op, seq = self.seq, v = value }, deadline)
    end
    if not ok then return broken(self, string.format("%s: cannot reach rank 0: %s", op, err)) end
    -- rank 0 names a missing rank when its own limit passes: wait a little longer than that
    local msg
    msg, err = read_frame(self.up, deadline + 10)
    if not msg then
      return broken(self, string.format("%s #%d: no answer from rank 0 (%s)", op, self.seq, said(err)))
    end
    if msg.err then return broken(self, msg.err) end
    learn_dead(self, msg.dead)
    return msg.v
  end
  local values, err = hub_collect(self, op, value, deadline)
  local dead = dead_said(self)
  local last, last_raw, last_json, err_frame
  for r = 1, self.size - 1 do
    local c = self.peers[r]
    if c then
      local frame
      if err then
        err_frame = err_frame or encode({ err = err })
        frame = err_frame
      else
        local v = answer(values, r)
        if v ~= last then last_raw, last_json = nil, nil end
        last = v
        if raw and c.spoke_raw then -- a rank gets its answer framed as it asked
          last_raw = last_raw or raw.reply(v, dead)
          frame = last_raw
        else
          last_json = last_json or encode({ v = v, dead = dead })
          frame = last_json
        end
      end
      local ok, serr = send_raw(c.sock, frame, socket.gettime() + 5)
      if not ok and self.tolerant then
        bury(self, r, string.format("%s left the fabric during %s (%s)", self:name(r), op, tostring(serr)))
      end
      c.sock:settimeout(0)
    end
  end
  if err then return broken(self, err) end
  return answer(values, 0)
end

--- Waits until every rank has called barrier.
function Fabric:barrier(timeout)
  local ok, err = collective(self, "barrier", true, timeout, function() return true end)
  if ok == nil then return nil, err end
  return true
end

--- Every rank's value, as a list indexed rank + 1, on every rank.
function Fabric:allgather(value, timeout)
  return collective(self, "allgather", value, timeout, function(values) return values end)
end

--- Every rank's value at root (a list indexed rank + 1); true on the other ranks.
function Fabric:gather(value, root, timeout)
  root = root or 0
  return collective(self, "gather", value, timeout, function(values, r)
    if r == root then return values end
    return true
  end)
end

--- root's value on every rank.
function Fabric:bcast(value, root, timeout)
  root = root or 0
  return collective(self, "bcast", value, timeout, function(values) return values[root + 1] end)
end

--- root's list, one item per rank: rank r gets list[r + 1] (root passes the
-- list, the others anything).  Rank 0's cost is one reply per rank.
function Fabric:scatter(list, root, timeout)
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
function Fabric:alltoall(list, timeout)
  if type(list) ~= "table" then error("bad argument #1 to 'alltoall' (table expected, got " .. type(list) .. ")", 2) end
  return collective(self, "alltoall", list, timeout, function(values, r)
    local out = {}
    for src = 1, self.size do out[src] = values[src] and values[src][r + 1] end
    return out
  end)
end

local NOTHING = setmetatable({}, { __jsontype = "array" })

-- The per-round exchange is framed by hand when its payloads are strings:
-- rank 0 then parses and writes each frame with a few string.find / concat
-- calls instead of dkjson (a tenth of the time).  Frames: "R<seq> <len(up)|-1>
-- <up>" then "<to> <len> <payload>" per message; the reply "r<len> <dead as
-- JSON>" then "<from> <len> <payload>" per message.
-- A frame: the header parts, then "<rank> <len> <payload>" per message of list,
-- after the 8-hex-digit length every frame has.
local function frame(parts, list)
  for _, m in ipairs(list) do
    parts[#parts + 1] = m[1] .. " " .. #m[2] .. " "
    parts[#parts + 1] = m[2]
  end
  local body = table.concat(parts)
  return string.format("%08x", #body) .. body
end

function fabric.route_encode(seq, v)
  return frame({ "R", seq, " ", v.u and #v.u or -1, " ", v.u or "" }, v.m)
end

function fabric.route_decode(body)
  local seq, ulen, p = body:match("^R(%d+) (%-?%d+) ()")
  if not seq then return nil, "malformed route frame" end
  ulen = tonumber(ulen)
  local v = { m = {} }
  if ulen >= 0 then v.u = body:sub(p, p + ulen - 1); p = p + ulen end
  while p <= #body do
    local to, len, q = body:match("^(%d+) (%d+) ()", p)
    if not to then return nil, "malformed route frame" end
    v.m[#v.m + 1] = { tonumber(to), body:sub(q, q + tonumber(len) - 1) }
    p = q + tonumber(len)
  end
  if p ~= #body + 1 then return nil, "malformed route frame (short)" end
  return { op = "route", seq = tonumber(seq), v = v, raw = true }
end

local function route_reply(list, dead)
  for _, m in ipairs(list) do
    if type(m[2]) ~= "string" then return encode({ v = list, dead = dead }) end -- sent by a rank that used JSON
  end
  local d = dead and dkjson.encode(dead) or ""
  return frame({ "r", #d, " ", d }, list)
end

function fabric.route_reply_decode(body)
  local dlen, p = body:match("^r(%d+) ()")
  if not dlen then return nil, "malformed route reply" end
  dlen = tonumber(dlen)
  local msg = { v = {} }
  if dlen > 0 then msg.dead = dkjson.decode(body:sub(p, p + dlen - 1)) end
  p = p + dlen
  while p <= #body do
    local from, len, q = body:match("^(%d+) (%d+) ()", p)
    if not from then return nil, "malformed route reply" end
    msg.v[#msg.v + 1] = { tonumber(from), body:sub(q, q + tonumber(len) - 1) }
    p = q + tonumber(len)
  end
  if p ~= #body + 1 then return nil, "malformed route reply (short)" end
  return msg
end

local RAW = { send = function(seq, v) return fabric.route_encode(seq, v) end, reply = route_reply }

-- ---------------------------------------------------------------- the relay tree

-- Past fabric.TREE_MIN ranks (or with opts.group / IBV_FABRIC_GROUP = k), route
-- runs over a two-level tree: the ranks form groups of k (about sqrt(size)),
-- rank g*k is group g's relay, and a group's other ranks (its members) send
-- their route frames to their relay, which bundles them: the messages sorted
-- by the group they go to, each group's part one opaque string, and the ups.
-- Rank 0 (group 0's relay) takes its own group's frames and one bundle per
-- relay, joins the parts for each group without reading them, and sends each
-- relay one frame; a relay splits it among its members.  Rank 0's cost per
-- route is then O(size / k) frames plus O(size) string joins, a relay's O(k).
-- The other collectives stay on the star (a few per run).
-- A relay that dies or misses its limit (tolerant fabrics) is buried alone:
-- rank 0 tells its members on their own connections and they send to rank 0
-- from then on (adopted); a member that finds its relay gone does the same.
fabric.TREE_MIN = 64

local function tree_k(opts, getenv, size)
  local given = opts.group or getenv("IBV_FABRIC_GROUP")
  local k = int(given)
  if given ~= nil and (not k or k < 0) then return nil, "fabric: group must be 0 (no tree) or a group size, got " ..
    tostring(given) end
  if k == nil and size >= fabric.TREE_MIN then k = math.ceil(math.sqrt(size)) end
  if not k or k < 2 or k >= size then return 0 end
  return k
end

local function group_of(self, r) return math.floor(r / self.tree.k) end

-- The members of group g (its ranks but the relay).
local function members(self, g)
  local l = {}
  for r = g * self.tree.k + 1, math.min((g + 1) * self.tree.k, self.size) - 1 do l[#l + 1] = r end
  return l
end

-- Payloads travel tagged: "s" and a string, or "j" and JSON.
local function tag(v)
  if type(v) == "string" then return "s" .. v end
  local s, err = encode(v)
  if not s then error(err, 0) end
  return "j" .. s:sub(9)
end

local function untag(s)
  if s:byte(1) == 115 then return s:sub(2) end
  return (dkjson.decode(s, 2))
end

-- Items "<from> <to> <len> <payload>" joined in a string; fn(from, to, payload) for each.
local function items(blob, fn)
  local p = 1
  while p <= #blob do
    local from, to, len, q = blob:match("^(%d+) (%-?%d+) (%d+) ()", p)
    if not from then return nil, "malformed tree frame" end
    len = tonumber(len)
    fn(tonumber(from), tonumber(to), blob:sub(q, q + len - 1))
    p = q + len
  end
  return true
end

local function item(from, to, payload) return from .. " " .. to .. " " .. #payload .. " " .. payload end

-- The items of a blob as each destination's list of {from, payload}, or nil, msg.
local function inbox_of(blob)
  local inbox = {}
  local ok, err = items(blob, function(from, to, payload)
    local l = inbox[to]
    if not l then l = {}; inbox[to] = l end
    l[#l + 1] = { from, payload }
  end)
  if not ok then return nil, err end
  return inbox
end

-- A relay's bundle: "B<seq> <len> <dead as JSON><len> <sources>" then
-- "<group> <len> <part>" per group that has messages (group -1: the ups).
function fabric.bundle_encode(seq, dead, srcs, parts)
  local d = #dead > 0 and dkjson.encode(dead) or ""
  local s = table.concat(srcs, ",")
  local out = { "B", seq, " ", #d, " ", d, #s, " ", s }
  for g, l in pairs(parts) do
    local blob = table.concat(l)
    out[#out + 1] = g .. " " .. #blob .. " "
    out[#out + 1] = blob
  end
  local body = table.concat(out)
  return string.format("%08x", #body) .. body
end

function fabric.bundle_decode(body)
  local seq, dlen, p = body:match("^B(%d+) (%d+) ()")
  if not seq then return nil, "malformed bundle" end
  dlen = tonumber(dlen)
  local v = { parts = {}, srcs = {} }
  if dlen > 0 then v.dead = dkjson.decode(body:sub(p, p + dlen - 1)) end
  p = p + dlen
  local slen, q = body:match("^(%d+) ()", p)
  if not slen then return nil, "malformed bundle" end
  for r in body:sub(q, q + tonumber(slen) - 1):gmatch("%d+") do v.srcs[#v.srcs + 1] = tonumber(r) end
  p = q + tonumber(slen)
  while p <= #body do
    local g, len, b = body:match("^(%-?%d+) (%d+) ()", p)
    if not g then return nil, "malformed bundle" end
    v.parts[tonumber(g)] = body:sub(b, b + tonumber(len) - 1)
    p = b + tonumber(len)
  end
  return { op = "route", seq = tonumber(seq), v = v }
end

-- Rank 0's answer to a relay: "b<len> <dead as JSON>" and the items for its group.
local function bundle_reply(dead, parts)
  local d = dead and dkjson.encode(dead) or ""
  local body = "b" .. #d .. " " .. d .. table.concat(parts or {})
  return string.format("%08x", #body) .. body
end

function fabric.bundle_reply_decode(body)
  local dlen, p = body:match("^b(%d+) ()")
  if not dlen then return nil, "malformed bundle reply" end
  dlen = tonumber(dlen)
  local msg = { blob = body:sub(p + dlen) }
  if dlen > 0 then msg.dead = dkjson.decode(body:sub(p, p + dlen - 1)) end
  return msg
end

local function untag_list(list)
  for _, m in ipairs(list) do m[2] = untag(m[2]) end
  return list
end

-- A member: its frame to the relay, the answer from the relay, or from rank 0
-- when the relay is gone (tolerant fabrics; rank 0 says so, or the relay's
-- connection breaks).
local function member_route(self, mine, deadline)
  local t = self.tree
  local msg, err
  if t.sock then
    local ok
    ok, err = send_raw(t.sock, mine, deadline)
    local watch = { t.sock, self.up }
    while ok do
      local left = deadline + 3 * t.margin - socket.gettime()
      if left <= 0 then err = "timeout"; break end
      local ready = {}
      if t.sock:dirty() then ready[t.sock] = true elseif watch[2] and self.up:dirty() then ready[self.up] = true
      else ready = socket.select(watch, nil, left) end
      if ready[t.sock] then
        msg, err = read_frame(t.sock, deadline + 3 * t.margin)
        break
      elseif ready[self.up] then
        local word = read_frame(self.up, deadline + 3 * t.margin)
        if word and not word.orphan then return word end
        if word then err = "rank 0 says the relay is gone"; break end
        watch[2] = nil -- rank 0 closed (it may finish first): the relay still answers
      end
    end
    if msg then return msg end
    local why = string.format("route #%d: relay %s: %s", self.seq, self:name(t.relay), said(err))
    if not self.tolerant then return nil, why end
    t.sock:close()
    t.sock = nil
  end
  local ok
  ok, err = send_raw(self.up, mine, deadline)
  while ok do -- a notice that came after this rank found its relay gone is skipped
    msg, err = read_frame(self.up, deadline + 4 * t.margin)
    if not (msg and msg.orphan) then break end
  end
  if not msg then
    return nil, string.format("route #%d: no answer from rank 0 (%s)", self.seq, said(err))
  end
  return msg
end

-- A relay: its members' frames, one bundle to rank 0, rank 0's answer split among them.
local function relay_route(self, own, deadline)
  local t = self.tree
  local values, err = hub_collect(self, "route", own, deadline, { ranks = t.members })
  local bundle
  if err then
    bundle = encode({ op = "route", seq = self.seq, v = { err = err } })
  else
    local parts, srcs = {}, {}
    for i = 0, #t.members do
      local r = i == 0 and self.rank or t.members[i]
      local v = i == 0 and own or values[r + 1]
      if type(v) == "table" then
        srcs[#srcs + 1] = r
        for _, m in ipairs(v.m) do
          local to = m[1]
          if to >= 0 and to < self.size then
            local g = group_of(self, to)
            parts[g] = parts[g] or {}
            parts[g][#parts[g] + 1] = item(r, to, m[2])
          end
        end
        if v.u then parts[-1] = parts[-1] or {}; parts[-1][#parts[-1] + 1] = item(r, -1, v.u) end
      end
    end
    local mine = {} -- the members this relay buried, each told once
    for _, d in ipairs(self.dead_list) do
      if not t.told[d[1]] and group_of(self, d[1]) == group_of(self, self.rank) then
        t.told[d[1]] = true
        mine[#mine + 1] = d
      end
    end
    bundle = fabric.bundle_encode(self.seq, mine, srcs, parts)
  end
  local ok, serr = send_raw(self.up, bundle, deadline + t.margin)
  local msg
  if ok then msg, serr = read_frame(self.up, deadline + 3 * t.margin) end
  if not msg then
    err = err or string.format("route #%d: no answer from rank 0 (%s)", self.seq, said(serr))
  elseif msg.err then
    err = msg.err
  end
  if err then
    local e = encode({ err = err })
    for _, r in ipairs(t.members) do
      local c = self.peers[r]
      if c then send_raw(c.sock, e, socket.gettime() + 5) end
    end
    return broken(self, err)
  end
  learn_dead(self, msg.dead)
  local inbox, berr = inbox_of(msg.blob)
  if not inbox then return broken(self, berr) end
  local dead = dead_said(self)
  for _, r in ipairs(t.members) do
    local c = self.peers[r]
    if c then
      local sent, e2 = send_raw(c.sock, route_reply(inbox[r] or NOTHING, dead), socket.gettime() + 5)
      if not sent then bury(self, r, string.format("%s left the fabric during route (%s)", self:name(r), e2)) end
      c.sock:settimeout(0)
    end
  end
  return untag_list(inbox[self.rank] or {})
end

-- Rank 0: the items for rank r in what it sent to r's group last time (a
-- member that found its relay gone after rank 0 answered).
local function answer_late(self, r)
  local t = self.tree
  local list = {}
  for _, g in ipairs({ group_of(self, r), 0 }) do
    for _, m in ipairs((inbox_of(table.concat(t.last[g] or {})) or {})[r] or {}) do list[#list + 1] = m end
  end
  local c = self.peers[r]
  if c then send_raw(c.sock, route_reply(list, dead_said(self)), socket.gettime() + 5) end
end

-- Rank 0: group g's relay is gone; its live members send to rank 0 from now on.
local function adopt_group(self, g, w)
  local t = self.tree
  local notice = encode({ orphan = true })
  for _, m in ipairs(members(self, g)) do
    if not self.dead[m] and not t.adopted[m] then
      t.adopted[m] = true
      local c = self.peers[m]
      if c then send_raw(c.sock, notice, socket.gettime() + 5); c.sock:settimeout(0) end
      if w then w.add(m) end
    end
  end
  if w then w.extend = socket.gettime() + t.margin end
end

-- Rank 0: its own group's frames (and the adopted ranks') and one bundle per
-- relay; each group's parts joined, unread, into one frame for its relay.
local function root_route(self, own, deadline)
  local t = self.tree
  local ranks, late = {}, {}
  for _, r in ipairs(t.members) do ranks[#ranks + 1] = r end
  for r in pairs(t.adopted) do ranks[#ranks + 1] = r end
  for g = 1, t.ngroups - 1 do
    local r = g * t.k
    ranks[#ranks + 1] = r
    late[r] = true
  end
  local w = { ranks = ranks, late = late, late_deadline = deadline + t.margin }
  w.lost = function(r) if late[r] then adopt_group(self, group_of(self, r), w) end end
  w.stray = function(r, msg) -- a member whose relay broke: this call's frame, or the last one's
    if msg.op ~= "route" or self.dead[r] then return nil end
    if msg.seq == self.seq then t.adopted[r] = true; return "take" end
    if msg.seq == self.seq - 1 and t.last then answer_late(self, r); t.adopted[r] = true; return "drop" end
  end
  local values, err = hub_collect(self, "route", own, deadline, w)
  local bundled = {}
  for g = 1, t.ngroups - 1 do
    local v = values[g * t.k + 1]
    if type(v) == "table" then
      err = err or v.err
      for _, d in ipairs(v.dead or NOTHING) do
        if not t.adopted[d[1]] then bury(self, d[1], d[2]) end
      end
      for _, r in ipairs(v.srcs or NOTHING) do bundled[r] = true end
    end
  end
  local out, all = {}, {}
  local function put(g, s)
    if g ~= 0 and self.dead[g * t.k] then g = 0 end
    local l = out[g]
    if not l then l = {}; out[g] = l end
    l[#l + 1] = s
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
          put(t.adopted[to] and 0 or group_of(self, to), item(r, to, m[2]))
        end
      end
      if type(v.u) == "string" then all[r + 1] = untag(v.u) end
    end
  end
  for g = 1, t.ngroups - 1 do
    local v = values[g * t.k + 1]
    if type(v) == "table" and v.parts then
      for h, blob in pairs(v.parts) do
        if h == -1 then
          items(blob, function(from, _, up) all[from + 1] = untag(up) end)
        else
          put(h, blob)
        end
      end
    end
  end
  t.last = out
  local dead = dead_said(self)
  local e = err and encode({ err = err })
  for g = 1, t.ngroups - 1 do
    local r = g * t.k
    local c = not self.dead[r] and self.peers[r]
    if c then
      local ok, serr = send_raw(c.sock, e or bundle_reply(dead, out[g]), socket.gettime() + 5)
      if not ok and self.tolerant and not err then
        bury(self, r, string.format("%s left the fabric during route (%s)", self:name(r), tostring(serr)))
        adopt_group(self, g)
      end
      c.sock:settimeout(0)
    end
  end
  local inbox = inbox_of(table.concat(out[0] or {})) or {}
  dead = dead_said(self)
  for i = 2, #direct do
    local r = direct[i]
    local c = not self.dead[r] and self.peers[r]
    if c then
      send_raw(c.sock, e or route_reply(inbox[r] or NOTHING, dead), socket.gettime() + 5)
      c.sock:settimeout(0)
    end
  end
  if err then return broken(self, err) end
  return untag_list(inbox[0] or {}), all
end

local function tree_route(self, msgs, up, timeout)
  local deadline
  deadline, timeout = begin(self, timeout)
  if not deadline then return nil, timeout end
  local t = self.tree
  t.margin = 5 + timeout / 10
  local m = {}
  for _, x in ipairs(msgs) do
    local to = int(type(x) == "table" and x[1])
    if to and to >= 0 and to < self.size then m[#m + 1] = { to, tag(x[2]) } end
  end
  local own = { m = m, u = up ~= nil and tag(up) or nil }
  if self.rank == 0 then return root_route(self, own, deadline) end
  if t.relay == self.rank then return relay_route(self, own, deadline) end
  local msg, err = member_route(self, fabric.route_encode(self.seq, own), deadline)
  if not msg then return broken(self, err) end
  if msg.err then return broken(self, msg.err) end
  learn_dead(self, msg.dead)
  return untag_list(msg.v or {})
end

-- After the rendezvous: members connect to their relay; one collective then
-- says who could not (tolerant fabrics: they send to rank 0 instead).
local function tree_setup(self, deadline)
  local t = self.tree
  t.ngroups = math.ceil(self.size / t.k)
  local g = group_of(self, self.rank)
  t.relay = g * t.k
  t.members = members(self, g)
  local missing = {}
  if self.rank ~= 0 and t.relay == self.rank then
    self.hub, self.peers = new_hub(has_uv), {}
    local pending, want = {}, 0
    for _, r in ipairs(t.members) do if not self.dead[r] then want = want + 1 end end
    self.hub:listen(t.listener, function(c) pending[c] = true end)
    t.listener = nil
    local function visit(c)
      local hello = table.remove(c.frames, 1)
      if not hello then if c.closed then pending[c] = nil; self.hub:drop(c) end; return end
      pending[c] = nil
      local r = int(hello.member)
      if r and group_of(self, r) == g and r ~= self.rank and not self.peers[r] and not self.dead[r] then
        c.rank, self.peers[r] = r, c
        want = want - 1
      else
        self.hub:drop(c)
      end
    end
    while want > 0 and self.hub:wait(deadline, visit) do end
    self.hub:unlisten()
    for c in pairs(pending) do self.hub:drop(c) end
    for _, r in ipairs(t.members) do
      if not self.peers[r] and not self.dead[r] then
        missing[#missing + 1] = { r, string.format("%s did not reach its relay %s", self:name(r),
          self:name(self.rank)) }
      end
    end
  elseif g > 0 then
    local addr = t.addrs and t.addrs[tostring(g)]
    local sock, err
    if addr then
      local host, port = addr:match("^(.*):(%d+)$")
      repeat
        sock, err = socket.connect(host, tonumber(port))
        if not sock then socket.sleep(0.05 + math.random() * 0.1) end
      until sock or socket.gettime() >= deadline
    else
      err = "it did not arrive"
    end
    if sock then
      sock:setoption("tcp-nodelay", true)
      local ok
      ok, err = send_frame(sock, { member = self.rank }, deadline)
      if ok then t.sock = sock else sock:close(); sock = nil end
    end
    if not sock then
      missing[1] = { self.rank, string.format("%s cannot reach its relay %s: %s", self:name(self.rank),
        self:name(t.relay), tostring(err)) }
    end
  end
  local orphans, err = collective(self, "tree", missing, self.init_timeout, function(values)
    local l = {}
    for r = 1, self.size do
      for _, x in ipairs(type(values[r]) == "table" and values[r] or NOTHING) do l[#l + 1] = x end
    end
    return l
  end)
  if not orphans then return nil, err end
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

--- Point to point through rank 0: msgs is a list of {rank, value} this rank
-- sends, up a value for rank 0 alone.  Returns the list of {from, value} sent
-- to this rank; at rank 0 also every rank's up (a list indexed rank + 1).
-- Rank 0's cost is O(size + messages): the per-round exchange of a schedule.
-- When every value is a string (up a string or nil), the frames are made by
-- hand rather than by dkjson.
function Fabric:route(msgs, up, timeout)
  if type(msgs) ~= "table" then error("bad argument #1 to 'route' (table expected, got " .. type(msgs) .. ")", 2) end
  if self.tree then return tree_route(self, msgs, up, timeout) end
  local raw = up == nil or type(up) == "string"
  for _, m in ipairs(msgs) do
    if type(m) ~= "table" or type(m[2]) ~= "string" or not int(m[1]) then raw = false; break end
  end
  local inbox, all
  local res, err = collective(self, "route", { m = msgs, u = up }, timeout, function(values, r)
    if not inbox then
      inbox, all = {}, {}
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
    end
    return inbox[r] or NOTHING
  end, raw and RAW or nil)
  if res == nil then return nil, err end
  return res, all
end

--- Closes the connections (idempotent).
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

function Fabric:close()
  if self.closed then return end
  close_sockets(self)
  if self.hub then self.hub:close() end
end
Fabric.__close = Fabric.close
Fabric.__gc = function(self)
  if self.closed then return end
  close_sockets(self)
  if self.hub then close_hub_sockets(self.hub) end
end

-- ---------------------------------------------------------------- rendezvous

local function hostname()
  local p = io.popen("uname -n 2>/dev/null")
  local h = p and p:read("l")
  if p then p:close() end
  return h or "?"
end

-- Rank 0: every rank connects and says hello; the accepts and hellos are
-- handled as they come (a rank slow to speak holds nobody up).
local function hub_rendezvous(self, deadline)
  local l, err = socket.bind("*", self.port, fabric.BACKLOG)
  if not l then
    return nil, string.format("rank 0 cannot listen on port %d: %s", self.port, tostring(err))
  end
  local hub = self.hub
  local newcomers = {}
  hub:listen(l, function(c) newcomers[c] = true end)
  local arrived = 1
  local fail
  local function visit(c)
    if c.rank or fail then return end
    local hello = table.remove(c.frames, 1)
    if not hello then
      if c.closed then newcomers[c] = nil; hub:drop(c) end
      return
    end
    newcomers[c] = nil
    if hello.hello ~= "ibverbs.fabric" then hub:drop(c); return end -- not one of ours (a scan, a stale run)
    local r = int(hello.rank)
    local k = self.tree and self.tree.k or 0
    if hello.size ~= self.size then
      fail = string.format("rank %s (%s) says the fabric has %s ranks, rank 0 says %d", tostring(hello.rank),
        tostring(hello.host), tostring(hello.size), self.size)
    elseif (hello.group or 0) ~= k then
      fail = string.format("rank %s (%s) says the relay groups have %s ranks, rank 0 says %d (IBV_FABRIC_GROUP)",
        tostring(hello.rank), tostring(hello.host), tostring(hello.group or 0), k)
    elseif k > 0 and r and r % k == 0 and not int(hello.relay_port) then
      fail = string.format("rank %d (%s) is a relay and listens nowhere", r, tostring(hello.host))
    elseif not r or r < 1 or r >= self.size then
      fail = string.format("a rank %s (%s) arrived: ranks are 0 to %d", tostring(hello.rank),
        tostring(hello.host), self.size - 1)
    elseif self.peers[r] then
      fail = string.format("rank %d arrived twice (%s and %s)", r, self.hosts[r + 1], tostring(hello.host))
    else
      c.rank = r
      self.peers[r] = c
      self.hosts[r + 1] = tostring(hello.host)
      if k > 0 and r % k == 0 then -- a relay: where its members find it (keys are strings in JSON)
        self.tree.addrs[tostring(math.floor(r / k))] = (c.sock:getpeername()) .. ":" .. int(hello.relay_port)
      end
      arrived = arrived + 1
      return
    end
    hub:drop(c)
  end
  while arrived < self.size and not fail do
    if not hub:wait(deadline, visit) then break end
  end
  hub:unlisten()
  for c in pairs(newcomers) do hub:drop(c) end
  if not fail and arrived < self.size then
    local missing = {}
    for r = 1, self.size - 1 do
      if not self.peers[r] then missing[#missing + 1] = r end
    end
    if self.tolerant then
      for _, r in ipairs(missing) do
        bury(self, r, string.format("%s did not arrive at the rendezvous (port %d) within %g s", self:name(r),
          self.port, self.init_timeout))
      end
    else
      fail = string.format("%s did not arrive at the rendezvous (port %d) within %g s", names(self, missing),
        self.port, self.init_timeout)
    end
  end
  local welcome = not fail and encode({ welcome = true, hosts = self.hosts, dead = self.dead_list,
    relays = self.tree and self.tree.addrs })
  for r = 1, self.size - 1 do
    local c = self.peers[r]
    if c then
      if fail then
        send_frame(c.sock, { err = fail }, socket.gettime() + 5)
        hub:drop(c); self.peers[r] = nil
      else
        send_raw(c.sock, welcome, socket.gettime() + 5)
        c.sock:settimeout(0)
      end
    end
  end
  if fail then return nil, fail end
  return true
end

local function rank_rendezvous(self, deadline)
  local sock, err
  repeat -- rank 0 may not listen yet
    sock, err = socket.connect(self.root, self.port)
    if not sock then socket.sleep(0.1 + math.random() * 0.2) end -- spread a job's retries
  until sock or socket.gettime() >= deadline
  if not sock then
    return nil, string.format("rank %d: rank 0 at %s:%d did not answer within %g s (%s)", self.rank, self.root,
      self.port, self.init_timeout, tostring(err))
  end
  sock:setoption("tcp-nodelay", true)
  self.up = sock
  local ok
  local t = self.tree
  ok, err = send_frame(sock, { hello = "ibverbs.fabric", rank = self.rank, size = self.size, host = self.host,
    group = t and t.k, relay_port = t and t.listener and select(2, t.listener:getsockname()) }, deadline)
  if not ok then return nil, "rank " .. self.rank .. ": cannot greet rank 0: " .. tostring(err) end
  -- rank 0 answers when everybody arrived, or at its own time limit
  local msg
  msg, err = read_frame(sock, deadline + 10)
  if not msg then
    return nil, string.format("rank %d: no word from rank 0 at %s:%d (%s)", self.rank, self.root, self.port,
      said(err))
  end
  if msg.err then return nil, msg.err end
  for i = 1, self.size do self.hosts[i] = msg.hosts[i] end
  if t then t.addrs = msg.relays or {} end
  learn_dead(self, msg.dead)
  return true
end

--- Joins the fabric: rank and size from opts or the launcher, rendezvous at rank 0.
-- opts: rank, size, root ("host" or "host:port"), port, timeout (seconds, for the
-- rendezvous and the default of every collective), host (this rank's name),
-- tolerant (a rank that does not arrive, leaves or misses a time limit is
-- buried, named in f:dead_ranks() on every rank, and the others go on without
-- it; otherwise it breaks the fabric for everyone), group (relay groups, see
-- route), wait_every (IBV_FABRIC_WAIT_EVERY: seconds between f.on_wait calls).
function fabric.init(opts)
  opts = opts or {}
  local rank, size, launcher, root = fabric.detect(opts.getenv)
  if opts.rank or opts.size then
    rank, size, launcher = int(opts.rank) or rank, int(opts.size) or size, "options"
  end
  if not rank or not size or size < 1 or rank < 0 or rank >= size then
    return nil, string.format("fabric: rank %s of size %s is not a rank", tostring(rank), tostring(size))
  end
  local getenv = opts.getenv or os.getenv
  root = opts.root or getenv("IBV_FABRIC_ROOT") or root
  local root_port
  if root and root:find("^[^:]+:%d+$") then root, root_port = root:match("^(.*):(%d+)$") end
  local port = int(opts.port) or int(root_port) or int(getenv("IBV_FABRIC_PORT"))
  if size > 1 and rank ~= 0 and not root then
    return nil, "fabric: where is rank 0? set IBV_FABRIC_ROOT=host[:port] or pass root = ... (launcher: " ..
      launcher .. ")"
  end
  if size > 1 and rank == 0 and not has_uv and size > fabric.SELECT_MAX then
    return nil, string.format("fabric: rank 0 waits on %d ranks: that needs lua-luv (epoll; Debian package "
      .. "lua-luv), socket.select stops at FD_SETSIZE", size - 1)
  end
  local timeout = tonumber(opts.timeout) or tonumber(getenv("IBV_FABRIC_TIMEOUT")) or fabric.DEFAULT_TIMEOUT
  local k, kerr = tree_k(opts, getenv, size)
  if not k then return nil, kerr end
  local every_given = opts.wait_every or getenv("IBV_FABRIC_WAIT_EVERY")
  local every = tonumber(every_given)
  if every_given ~= nil and not (every and every > 0 and every < math.huge) then
    return nil, "fabric: wait_every must be a number of seconds above 0, got " .. tostring(every_given)
  end
  local self = setmetatable({ rank = rank, size = size, launcher = launcher, root = root,
    port = port or fabric.DEFAULT_PORT, timeout = timeout, init_timeout = timeout, last_timeout = timeout,
    seq = 0, host = opts.host or hostname(), hosts = {}, peers = {}, tolerant = opts.tolerant and true or false,
    dead = {}, ndead = 0, dead_list = {},
    wait_every = every }, Fabric)
  -- where the launcher put each rank, until the rendezvous says (names a rank that never arrives)
  if launcher == "slurm" then
    local where = fabric.slurm_hosts(getenv)
    if where and #where == size then
      for r = 1, size do self.hosts[r] = where[r] end
    end
  end
  self.hosts[rank + 1] = self.host
  if size == 1 then return self end
  if k > 0 then
    self.tree = { k = k, adopted = {}, told = {}, addrs = {}, margin = 5 + timeout / 10 }
    if rank ~= 0 and rank % k == 0 then -- a relay: its members connect here
      local l, lerr = socket.bind("*", 0, fabric.BACKLOG)
      if not l then return nil, "fabric: relay rank " .. rank .. " cannot listen: " .. tostring(lerr) end
      self.tree.listener = l
    end
  end
  local deadline = socket.gettime() + timeout
  local ok, err
  if rank == 0 then
    self.hub = new_hub(has_uv and not opts.select)
    ok, err = hub_rendezvous(self, deadline)
  else
    ok, err = rank_rendezvous(self, deadline)
  end
  if ok and self.tree then ok, err = tree_setup(self, socket.gettime() + timeout) end
  if not ok then
    self:close()
    return nil, "fabric: " .. err
  end
  return self
end

return fabric
