--- Where ibverbs.fabric waits.  Rank 0 (and a relay of the tree) holds one TCP
-- connection per rank and waits on all of them through a hub: libuv (lua-luv:
-- epoll on Linux), each connection's poll handle registered once when it
-- arrives, so a wake-up costs what became readable, never a scan of every
-- descriptor, and there is no FD_SETSIZE limit.  Without lua-luv (or with
-- hub.new(false)) it falls back to socket.select, which cannot wait on
-- descriptors past FD_SETSIZE: ibverbs.fabric refuses such a group at init
-- past fabric.SELECT_MAX ranks.  A member of the tree waits on its two
-- sockets with hub.first_readable; hub.collect is the wait of a collective at
-- rank 0 or a relay.  Frames are split and decoded by ibverbs.fabric.wire.
local socket = require "socket"
local wire = require "ibverbs.fabric.wire"
local ranks = require "ibverbs.fabric.ranks"
local int = require("ibverbs.fabric.launcher").int

local hub = {}
local NONE = {}

local has_uv, uv = pcall(require, "luv")
--- Whether lua-luv loaded (epoll).
hub.HAS_UV = has_uv
--- Seconds between on_wait calls when the group's wait_every is not a number above 0.
hub.WAIT_EVERY = 60

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

local function stop_handles(h)
  for c in pairs(h.conns) do
    if c.poll then pcall(c.poll.stop, c.poll); pcall(c.poll.close, c.poll); c.poll = nil end
  end
  if h.lpoll then pcall(h.lpoll.stop, h.lpoll); pcall(h.lpoll.close, h.lpoll); h.lpoll = nil end
  if h.timer then pcall(h.timer.close, h.timer); h.timer = nil end
  pcall(run_loop, "nowait") -- the closes complete in a run of the loop, while the handles' Lua sides live
end

local newproxy = rawget(_G, "newproxy") -- Lua 5.1 and LuaJIT: only userdata have finalizers

local function new_guard(h)
  local guard
  local function gc(g) if h.guard == g then stop_handles(h) end end
  if newproxy then
    guard = newproxy(true)
    getmetatable(guard).__gc = gc
  else
    guard = setmetatable({}, { __gc = gc })
  end
  h.guard = guard
end

--- A hub with no connection yet: through libuv when use_uv (and lua-luv loaded), else socket.select.
function hub.new(use_uv)
  use_uv = use_uv and has_uv
  -- held: the connections read with frames left (or closed), for the next collective
  local h = setmetatable({ conns = {}, ready = {}, held = {}, uv = use_uv }, Hub)
  if use_uv then h.timer = uv.new_timer(); new_guard(h) end
  return h
end

-- Reads what the connection has (non-blocking) and splits it into frames;
-- the hub (h) holds it while it has frames or closed.
local function drain(h, c)
  local sock = c.sock
  while true do
    local data, err, partial = sock:receive(65536)
    local got = data or partial
    if got and #got > 0 then c.buf = c.buf .. got end
    if err == "closed" then c.closed = "connection closed"; break end
    if err and err ~= "timeout" then c.closed = err; break end
    -- a connection not yet let in (ibverbs.fabric.door) holds one bounded frame at most
    if c.cap and #c.buf > c.cap then c.closed = "sent more than a hello holds"; c.buf = ""; break end
    if not data then break end
  end
  local bodies, rest, serr = wire.split(c.buf, c.max)
  c.buf = rest
  for _, body in ipairs(bodies) do
    local msg, derr = wire.decode(body)
    if not msg then serr = derr; c.buf = ""; break end
    c.frames[#c.frames + 1] = msg
  end
  if serr then c.closed = c.closed or serr end
  if c.closed and c.poll then c.poll:stop() end
  if c.frames[1] or c.closed then h.held[c] = true end
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

--- Accepts on the listening socket l while waiting: on_accept(c) for each new connection.
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
  self.conns[c], self.held[c] = nil, nil
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

local function wait_uv(self, left, visit)
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
    if self.conns[c] and not c.seen then c.seen = true; drain(self, c); visit(c) end
  end
  for _, c in ipairs(ready) do c.seen = nil end
end

local function wait_select(self, left, visit)
  local socks, by = {}, {}
  if self.listener then socks[1] = self.listener end
  for c in pairs(self.conns) do
    if not c.closed then socks[#socks + 1] = c.sock; by[c.sock] = c end
  end
  local readable = socket.select(socks, nil, left)
  for _, s in ipairs(readable) do
    if s == self.listener then accept_all(self) else local c = by[s]; drain(self, c); visit(c) end
  end
end

--- Waits until something is readable or deadline; calls visit(c) for every
-- connection that has frames or closed, in arrival order.  False when the
-- deadline had passed.
function Hub:wait(deadline, visit)
  local left = deadline - socket.gettime()
  if left <= 0 then return false end
  if self.uv then wait_uv(self, left, visit) else wait_select(self, left, visit) end
  return true
end

--- The hub's sockets (what a finalizer may close: the handles are stop_handles').
function Hub:close_sockets()
  if self.listener then self.listener:close(); self.listener = nil end
  for c in pairs(self.conns) do c.sock:close() end
  self.conns = {}
end

function Hub:close()
  if self.uv then stop_handles(self) end
  self:close_sockets()
end

--- A connection to "host[,host...]:port" (rank 0's or a relay's address:
-- one host, or the addresses it put in PMIx), each host tried in turn (3 s
-- at most each) until one answers or deadline: the socket (blocking, no
-- delay), or nil, the last error.  A host refusing is tried again after
-- pause to 3 x pause seconds (default 0.05; random: a job's ranks spread
-- their retries): its listener may not be up yet, or a SYN was dropped
-- under a storm of them.
function hub.connect(addr, deadline, pause)
  local hosts, port = tostring(addr):match("^(.*):(%d+)$")
  if not hosts then return nil, "no address" end
  local err
  repeat
    for host in hosts:gmatch("[^,]+") do
      local left = deadline - socket.gettime()
      if left <= 0 then break end
      local sock = socket.tcp()
      sock:settimeout(math.min(left, 3))
      local ok, cerr = sock:connect(host, tonumber(port))
      if ok then
        sock:settimeout(nil)
        sock:setoption("tcp-nodelay", true)
        return sock
      end
      err = host .. ": " .. tostring(cerr)
      sock:close()
    end
    pause = pause or 0.05
    socket.sleep(pause + math.random() * 2 * pause)
  until socket.gettime() >= deadline
  return nil, err or "no time left"
end

--- The first of a few blocking sockets that has something to read before
-- deadline (one with buffered data first, then in the order given), or nil, "timeout".
function hub.first_readable(socks, deadline)
  while true do
    for _, s in ipairs(socks) do
      if s:dirty() then return s end
    end
    local left = deadline - socket.gettime()
    if left <= 0 then return nil, "timeout" end
    local ready = socket.select(socks, nil, left)
    for _, s in ipairs(socks) do
      if ready[s] then return s end
    end
  end
end

-- ---------------------------------------------------------------- a collective's wait

-- One wait of rank 0 (or a relay) for a message from every rank of w.ranks.
local Collect = {}
Collect.__index = Collect

function Collect:add(r)
  local f = self.f
  if not self.expect[r] and not f.dead[r] then self.expect[r] = true; self.want = self.want + 1 end
end

function Collect:lose(r, why)
  local f = self.f
  if not f.tolerant then self.err = why; return end
  ranks.bury(f, r, why)
  self.want = self.want - 1
  if self.w.lost then self.w.lost(r) end
end

-- A stray frame (from a rank outside the wait): true when it is taken as this call's.
function Collect:take_stray(c, r)
  local how = self.w.stray and c.frames[1] and self.w.stray(r, c.frames[1])
  if not how then return false end
  self:add(r)
  if how == "drop" then
    table.remove(c.frames, 1)
    if not c.frames[1] and not c.closed then return false end
  end
  return true
end

function Collect:visit(c)
  local f, r = self.f, c.rank
  if not r or self.got[r] or self.err then return end
  if not self.expect[r] and not self:take_stray(c, r) then return end
  local msg = table.remove(c.frames, 1)
  if not msg then
    if c.closed then
      self:lose(r, string.format("%s left the fabric during %s (%s)", ranks.name(f, r), self.op, c.closed))
    end
    return
  end
  if msg.op ~= self.op or msg.seq ~= f.seq then
    self.err = string.format("%s called %s #%s where rank 0 called %s #%d", ranks.name(f, r), tostring(msg.op),
      tostring(msg.seq), self.op, f.seq)
    return
  end
  self.values[r + 1] = msg.v
  c.spoke_raw = msg.raw
  self.got[r] = true
  self.want = self.want - 1
end

-- The ranks still awaited, sorted; the relays (w.late) too only when all is true.
function Collect:missing(all)
  local f, late, out = self.f, self.w.late, {}
  for r in pairs(self.expect) do
    if not self.got[r] and not f.dead[r] and (all or not (late and late[r])) then out[#out + 1] = r end
  end
  table.sort(out)
  return out
end

-- What on_wait is told: who is awaited (a relay as itself waiting for its members), and the ranks.
function Collect:awaited()
  local f, late = self.f, self.w.late
  local missing = self:missing(true)
  local who = {}
  for i, r in ipairs(missing) do
    who[i] = ranks.name(f, r)
    if late and late[r] and f.tree then
      who[i] = string.format("%s, relay of ranks %d-%d", who[i], r,
        ranks.last_of(f.tree.k, ranks.group_of(f.tree.k, r), f.size))
    end
  end
  return table.concat(who, "; "), missing
end

-- f.on_wait(who, seconds, ranks), at most once every f.wait_every seconds of waiting.
function Collect:report()
  local f = self.f
  local who, missing = self:awaited()
  local ok, cerr = pcall(f.on_wait, who, socket.gettime() - self.started, missing)
  if not ok then -- the script's callback: said once, never again, the collective goes on
    io.stderr:write("ibverbs.fabric: on_wait failed, not called again: ", tostring(cerr), "\n")
    f.on_wait = nil
  end
  self.next_report = socket.gettime() + self.every -- from the callback's end: a slow one never starves the wait
end

-- Waits until every awaited rank spoke, an error, or until_t.
function Collect:pump(until_t)
  local f = self.f
  while self.want > 0 and not self.err do
    local stop = f.on_wait and math.min(until_t, self.next_report) or until_t
    if not f.hub:wait(stop, self.visitor) then
      if stop >= until_t then return end
      self:report()
    end
  end
end

-- The limit passed: the ranks missing fail the call, or (tolerant) are lost.
function Collect:judge(missing)
  local f = self.f
  local what = string.format("at %s #%d within %g s", self.op, f.seq, f.last_timeout)
  if #missing > 0 and not f.tolerant then
    self.err = string.format("%s did not arrive %s", ranks.names(f, missing), what)
  end
  for _, r in ipairs(missing) do
    if self.err then break end
    self:lose(r, string.format("%s did not arrive %s", ranks.name(f, r), what))
  end
end

--- Rank 0 (and a relay of the tree): waits for a message from every rank of
-- w.ranks (default: every other live rank) whose op and seq match this call.
-- The cost is one visit per message: O(ranks) per collective.  Returns the
-- values (indexed rank + 1; value is rank 0's own) and the error, if any.
-- The tree's hooks (w): late (ranks given until w.late_deadline: relays, which
-- wait for their own members first), stray(r, msg) for a frame from a rank
-- outside the wait ("take" it as this call's, "drop" it and wait for r's next
-- one, or nil to leave it), lost(r) when a rank is buried (it may add ranks
-- with w.add, set here, and move w.extend later).
function hub.collect(f, op, value, deadline, w)
  w = w or {}
  local every = f.wait_every
  -- (f.wait_every set by hand after init: a bad value gives the default)
  if type(every) ~= "number" or every ~= every or every <= 0 then every = hub.WAIT_EVERY end
  local self = setmetatable({ f = f, op = op, w = w, values = { [1] = value }, expect = {}, got = {}, want = 0,
    started = socket.gettime(), every = every }, Collect)
  self.next_report = self.started + every
  self.visitor = function(c) self:visit(c) end
  w.add = function(r) self:add(r) end
  for _, r in ipairs(w.ranks or {}) do self:add(r) end
  if not w.ranks then
    for r = 1, f.size - 1 do self:add(r) end
  end
  local held = f.hub and f.hub.held or NONE -- frames that came before this call (an earlier wake-up read them)
  for c in pairs(held) do
    if c.frames[1] or c.closed then self:visit(c) end
    if not (c.frames[1] or c.closed) then held[c] = nil end
  end
  local last, limit = math.max(deadline, w.late_deadline or deadline), deadline
  while not self.err do
    self:pump(limit)
    if self.err or self.want == 0 then break end
    last = math.max(last, w.extend or last)
    local final = socket.gettime() >= last
    self:judge(self:missing(final))
    last = math.max(last, w.extend or last)
    if self.want == 0 or (final and socket.gettime() >= last) then break end
    limit = last
  end
  return self.values, self.err
end

return hub
