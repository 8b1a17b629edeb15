--- bench/sim_loop.lua: many ranks of ibverbs.fabric in one process, each a
-- coroutine, over real loopback TCP sockets (bench/fabric_sim.lua).
--
--   local loop = require "sim_loop"     -- before ibverbs.fabric: installs the socket and luv below
--   loop.spawn(fn, {rank = r, env = {SLURMD_NODENAME = "node5"}})
--   loop.run()                          -- until every task ended
--
-- The fabric's modules do blocking I/O with luasocket and wait through
-- libuv (ibverbs.fabric.hub).  Here package.loaded.socket is a socket
-- module whose sockets are the real luasocket sockets, non-blocking, with a
-- would-block turned into a yield of the calling task until the real libuv
-- loop (lua-luv, epoll) sees its descriptor ready or its time limit passes;
-- and package.loaded.luv a libuv for the hub whose poll handles are per
-- task: a task's hub waits (in the timer's start, where the hub's wait
-- begins) until one of its own handles is ready.  Every wait is the
-- socket's own; no descriptor is scanned.  Each task counts its CPU time
-- (os.clock is the task's own while it runs) and the bytes on the sockets
-- it made or accepted.  os.getenv reads the task's env first.
local uv = require "luv"
local real = require "socket"

local loop = { tasks = {}, alive = 0 }
local real_clock, real_getenv = os.clock, os.getenv

-- ---------------------------------------------------------------- tasks

local function resume(task, ...)
  loop.resumes = (loop.resumes or 0) + 1
  loop.current = task
  task.resumed_at = real_clock()
  local ok, err = coroutine.resume(task.co, ...)
  task.cpu = task.cpu + real_clock() - task.resumed_at
  loop.current = nil
  if not ok then task.err = err; io.stderr:write("sim: rank ", tostring(task.rank), ": ", tostring(err), "\n") end
  if coroutine.status(task.co) == "dead" then
    task.done = true
    loop.alive = loop.alive - 1
    if task.on_exit then task.on_exit(task) end
  end
end

--- A task running fn(task): attrs (rank, env, on_exit) copied into it.
function loop.spawn(fn, attrs)
  local task = { cpu = 0, bytes_in = 0, bytes_out = 0, wait_id = 0 }
  for k, v in pairs(attrs or {}) do task[k] = v end
  task.co = coroutine.create(function() return fn(task) end)
  if loop.profile then debug.sethook(task.co, loop.profile, "", tonumber(os.getenv("SIM_PROFILE")) or 10000) end
  task.timer = uv.new_timer()
  loop.tasks[#loop.tasks + 1] = task
  loop.alive = loop.alive + 1
  local idle = uv.new_idle() -- started from the loop, not from here
  idle:start(function() idle:stop(); idle:close(); resume(task) end)
  return task
end

-- The current task waits: woken with a reason by wake(task, id, reason), or "timeout" at deadline (nil: none).
local function suspend(deadline)
  local task = assert(loop.current, "sim: a wait outside any task")
  task.wait_id = task.wait_id + 1
  local id = task.wait_id
  task.waiting = id
  if deadline then
    task.timer:start(math.max(0, math.ceil((deadline - real.gettime()) * 1000)), 0, function()
      if task.waiting == id then task.waiting = nil; resume(task, "timeout") end
    end)
  end
  local why = coroutine.yield()
  task.timer:stop()
  task.waiting = nil
  return why
end

local function wake(task, reason)
  if task.waiting then task.waiting = nil; resume(task, reason) end
end

-- SIM_PROFILE=1: where the tasks spend their time, sampled every 10000 instructions (printed by SIM_DEBUG).
if os.getenv("SIM_PROFILE") then
  loop.samples = {}
  loop.profile = function()
    local where = {}
    for level = 2, 6 do
      local info = debug.getinfo(level, "Sl")
      if not info then break end
      where[#where + 1] = info.short_src:match("[^/]*$") .. ":" .. (info.currentline or 0)
    end
    local key = table.concat(where, " < ")
    loop.samples[key] = (loop.samples[key] or 0) + 1
  end
end

-- SIM_DEBUG=s: every s seconds, on stderr, the resumes since and where a few tasks wait.
local function debug_every(s)
  local t = uv.new_timer()
  t:start(s * 1000, s * 1000, function()
    local heap = collectgarbage("count")
    collectgarbage()
    io.stderr:write(string.format("sim: %d tasks alive, %d resumes, heap %.0f MB, %.0f MB live\n", loop.alive,
      loop.resumes or 0, heap / 1024, collectgarbage("count") / 1024))
    if loop.samples then
      local l = {}
      for k, v in pairs(loop.samples) do l[#l + 1] = { k, v } end
      table.sort(l, function(a, b) return a[2] > b[2] end)
      for i = 1, math.min(12, #l) do io.stderr:write(string.format("sim: %6d %s\n", l[i][2], l[i][1])) end
      loop.samples = {}
    end
    loop.resumes = 0
    for i = 1, #loop.tasks, math.max(1, #loop.tasks // 3) do
      local task = loop.tasks[i]
      if not task.done then io.stderr:write(debug.traceback(task.co, "rank " .. tostring(task.rank)), "\n") end
    end
  end)
  t:unref()
end

--- The loop, until every task ended.
function loop.run()
  if os.getenv("SIM_DEBUG") then debug_every(tonumber(os.getenv("SIM_DEBUG"))) end
  while loop.alive > 0 do uv.run("once") end
end

-- ---------------------------------------------------------------- descriptors

-- One libuv poll per descriptor: readers and writers (tasks waiting), the fake polls of a task's hub.
local watch = {}

local function update(w)
  local r = next(w.readers) or (w.fake and w.fake.active and not w.fake.pending)
  local mask = (r and "r" or "") .. (next(w.writers) and "w" or "")
  if mask == w.mask then return end
  w.mask = mask
  if mask == "" then w.poll:stop() return end
  w.poll:start(mask, function(err, events)
    events = events or ""
    if err then events = "rw" end
    local woken = {} -- (a task woken may wait on this descriptor again: the sets change)
    if events:find("r") then
      for task in pairs(w.readers) do woken[#woken + 1] = task end
      w.readers = {}
      local fp = w.fake
      if fp and fp.active and not fp.pending then
        fp.pending = true
        fp.task.ready = fp.task.ready or {}
        fp.task.ready[#fp.task.ready + 1] = fp
        if fp.task.hub_waiting then woken[#woken + 1] = fp.task end
      end
    end
    if events:find("w") then
      for task in pairs(w.writers) do woken[#woken + 1] = task end
      w.writers = {}
    end
    if watch[w.fd] == w then update(w) end
    for _, task in ipairs(woken) do wake(task, w.fd) end
  end)
end

local function watcher(fd)
  local w = watch[fd]
  if not w then
    w = { fd = fd, poll = uv.new_poll(fd), readers = {}, writers = {}, mask = "" }
    watch[fd] = w
  end
  return w
end

-- A socket closed: its poll handle closed first, the descriptor only once libuv is done with it (a
-- descriptor closed under a closing handle is reused by the next socket, and the handle's close then
-- takes the new socket out of epoll: its wake-ups lost).
local function close_socket(s, fd)
  local w = watch[fd]
  if not w then return s:close() end
  watch[fd] = nil
  w.poll:stop()
  w.poll:close(function() s:close() end)
  return 1
end

-- The current task waits until one of fds is ready for mode ("r" or "w"), or deadline: the fd, or "timeout".
local function wait_fds(fds, mode, deadline)
  local task = loop.current
  for _, fd in ipairs(fds) do
    local w = watcher(fd)
    ;(mode == "r" and w.readers or w.writers)[task] = true
    update(w)
  end
  local why = suspend(deadline)
  for _, fd in ipairs(fds) do
    local w = watch[fd]
    if w then (mode == "r" and w.readers or w.writers)[task] = nil; update(w) end
  end
  return why
end

-- ---------------------------------------------------------------- sockets

local Sock = {}
Sock.__index = function(s, k)
  local m = Sock[k]
  if m then return m end
  local f = s.s[k] -- getsockname, getpeername, setoption, dirty, ...: the real socket's
  if type(f) == "function" then return function(self, ...) return f(self.s, ...) end end
  return nil
end

local function wrap(s, task)
  s:settimeout(0)
  return setmetatable({ s = s, fd = s:getfd(), task = task or loop.current }, Sock)
end

function Sock:settimeout(t) self.timeout = t; return 1 end

function Sock:getfd() return self.fd end

function Sock:deadline()
  if self.timeout == nil or self.timeout < 0 then return nil end
  return real.gettime() + self.timeout
end

-- (the pieces of a long frame joined once: a megabyte in 64 KiB reads would copy 8 MB)
function Sock:receive(n)
  local parts, have, deadline = {}, 0, self:deadline()
  while true do
    local data, err, partial = self.s:receive(type(n) == "number" and n - have or n)
    local got = data or partial or ""
    self.task.bytes_in = self.task.bytes_in + #got
    parts[#parts + 1] = got
    have = have + #got
    if data then return table.concat(parts) end
    if err ~= "timeout" then return nil, err, table.concat(parts) end
    if self.timeout == 0 or wait_fds({ self.fd }, "r", deadline) == "timeout" then
      return nil, "timeout", table.concat(parts)
    end
  end
end

function Sock:send(data, i)
  i = i or 1
  local deadline = self:deadline()
  while true do
    local last, err, sent = self.s:send(data, i)
    local upto = last or sent or i - 1
    self.task.bytes_out = self.task.bytes_out + upto - i + 1
    if last then return last end
    if err ~= "timeout" then return nil, err, upto end
    i = upto + 1
    if self.timeout == 0 or wait_fds({ self.fd }, "w", deadline) == "timeout" then return nil, "timeout", upto end
  end
end

function Sock:accept()
  while true do
    local c, err = self.s:accept()
    if c then return wrap(c, self.task) end
    if err ~= "timeout" or self.timeout == 0 then return nil, err end
    if wait_fds({ self.fd }, "r", self:deadline()) == "timeout" then return nil, "timeout" end
  end
end

function Sock:close()
  if self.closed then return 1 end
  self.closed = true
  return close_socket(self.s, self.fd)
end

local shim = setmetatable({ _SIM = true }, { __index = real })

function shim.bind(host, port, backlog)
  local s, err = real.bind(host, port, backlog)
  if not s then return nil, err end
  return wrap(s)
end

-- A connect that yields while the handshake is under way, within the socket's timeout (30 s when none).
-- (A socket of socket.tcp() has its descriptor only once connect has made it for the address's family.)
function Sock:connect(host, port)
  local ok, err = self.s:connect(host, port)
  self.fd = self.s:getfd()
  if not ok and err == "timeout" then
    if wait_fds({ self.fd }, "w", self:deadline() or real.gettime() + 30) ~= "timeout" then
      ok, err = self.s:connect(host, port)
    end
    if err == "already connected" then ok = 1 end
  end
  if not ok then return nil, err end
  return ok -- (its descriptor's watcher, if the wait made one, goes on serving it)
end

function shim.tcp()
  local t, err = real.tcp()
  if not t then return nil, err end
  return wrap(t)
end

function shim.connect(host, port)
  local s = shim.tcp()
  local ok, err = s:connect(host, port)
  if not ok then s:close(); return nil, err end
  return s
end

function shim.sleep(s) suspend(real.gettime() + s) end

-- select(recvt, nil, timeout) on a few sockets (a member waits on its relay and rank 0): a task's wait.
function shim.select(recvt, _, timeout)
  local fds, by = {}, {}
  for _, s in ipairs(recvt) do
    if s:dirty() then return { s, [s] = s } end
    fds[#fds + 1] = s:getfd()
    by[s:getfd()] = s
  end
  local fd = wait_fds(fds, "r", timeout and timeout >= 0 and real.gettime() + timeout or nil)
  local s = by[fd]
  if not s then return {}, nil, "timeout" end
  return { s, [s] = s }
end

-- ---------------------------------------------------------------- the hub's libuv

local fake = {}

local Poll = {}
Poll.__index = Poll

function fake.new_poll(fd)
  return setmetatable({ fd = fd, task = loop.current, active = false, pending = false }, Poll)
end

function Poll:start(_, cb)
  self.cb, self.active = cb, true
  local w = watcher(self.fd)
  w.fake = self
  update(w)
end

function Poll:stop()
  self.active = false
  local w = watch[self.fd]
  if w and w.fake == self then update(w) end
end

function Poll:close() self:stop() end

local Timer = {}
Timer.__index = Timer

function fake.new_timer() return setmetatable({ task = loop.current }, Timer) end

-- The hub's wait (hub.lua's wait_uv starts its timer, then runs the loop
-- once): here the task waits until one of its polls is ready or ms pass,
-- then the ready polls' callbacks run; the loop's run is then a no-op.
function Timer:start(ms)
  local task = self.task
  task.ready = task.ready or {}
  if #task.ready == 0 then
    task.hub_waiting = true
    suspend(real.gettime() + ms / 1000)
    task.hub_waiting = false
  end
  local ready = task.ready
  task.ready = {}
  for _, fp in ipairs(ready) do
    fp.pending = false
    local w = watch[fp.fd]
    if w then update(w) end
    if fp.active then fp.cb() end
  end
end

function Timer.stop() end
function Timer.close() end
function fake.run() end
function fake.stop() end
function fake.update_time() end

-- ---------------------------------------------------------------- installed

package.loaded.socket = shim
package.loaded.luv = fake
-- luasocket's own modules that load "socket.core" keep the real one
os.clock = function() -- luacheck: ignore 122
  local t = loop.current
  if t then return t.cpu + real_clock() - t.resumed_at end
  return real_clock()
end
os.getenv = function(k) -- luacheck: ignore 122
  local t = loop.current
  local v = t and t.env and t.env[k]
  if v ~= nil then return v end
  return real_getenv(k)
end
loop.real_clock = real_clock

return loop
