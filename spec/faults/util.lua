--- Shared helpers of the fault specs (spec/faults, run in the soft-RoCE VM)
-- and of tools/soak.lua: child processes with their pid, kernel resource
-- counts, completion tallies.
local ibv = require "ibverbs"
local socket = require "socket"
local support = require "support"

local util = {}

util.LUA = support.LUA
util.ENV = "LUA_PATH='lua/?.lua;lua/?/init.lua;spec/?.lua;;' LUA_CPATH='build/" ..
  (os.getenv("IBVL_BUILD") or util.LUA) .. "/?.so;;'"

function util.sleep(s) socket.sleep(s) end

util.sh = support.sh -- true when the command exits 0

function util.read(cmd)
  local p = io.popen(cmd .. " 2>&1")
  local s = p:read("a")
  p:close()
  return s
end

local slurp = support.slurp
util.slurp = slurp

--- The kernel's object counts on the device ("pd 1 cq 1 qp 1 ..."), as
-- `rdma resource show` prints them: a table name -> count.
function util.resources(dev)
  local s = util.read("rdma resource show")
  local line = s:match("[^\n]*" .. (dev or "rxe0") .. ":([^\n]*)") or ""
  local t = {}
  for k, v in line:gmatch("(%a[%w_]*) (%d+)") do t[k] = tonumber(v) end
  return t
end

function util.format_resources(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. " " .. t[k] end
  return table.concat(out, ", ")
end

--- Collects garbage, then the device's counts (a baseline for back_to).
function util.baseline()
  collectgarbage(); collectgarbage()
  return util.resources()
end

--- Waits (up to timeout s) until the device's counts are back to base; returns
-- true, or false and the last counts.
function util.back_to(base, timeout)
  local deadline = ibv.now() + (timeout or 5)
  local now
  repeat
    collectgarbage(); collectgarbage()
    now = util.resources()
    local same = true -- (fewer: objects of earlier specs the collector freed meanwhile)
    for k, v in pairs(base) do if (now[k] or 0) > v then same = false end end
    if same then return true end
    util.sleep(0.05)
  until ibv.now() > deadline
  return false, now
end

--- Starts a Lua script (path relative to the project) in the background with
-- this interpreter; returns a handle with .pid, :output() (stdout, then
-- stderr), :stdout(), :stderr(), :done() (exit
-- status or nil), :wait(timeout) -> status or nil, :kill(sig).
function util.start(script, args)
  local base = os.tmpname()
  os.remove(base .. ".rc")
  local f = assert(io.open(base .. ".sh", "w")) -- $$ of this sh is the pid exec keeps
  f:write(string.format("echo $$ > %s.pid\nexec env %s %s %s %s\n", base, util.ENV, util.LUA, script, args or ""))
  f:close()
  local inner = string.format("sh %s.sh > %s 2> %s.err; echo $? > %s.rc.tmp; mv %s.rc.tmp %s.rc", base, base,
    base, base, base, base)
  os.execute("sh -c '" .. inner:gsub("'", "'\\''") .. "' &")
  local h = { base = base }
  local deadline = ibv.now() + 10
  while not h.pid and ibv.now() < deadline do
    local p = slurp(base .. ".pid")
    h.pid = p and tonumber(p:match("%d+"))
    if not h.pid then util.sleep(0.01) end
  end
  assert(h.pid, "the child did not start")
  function h.output() return (slurp(base) or "") .. (slurp(base .. ".err") or "") end
  function h.stdout() return slurp(base) or "" end
  function h.stderr() return slurp(base .. ".err") or "" end
  function h.done()
    local rc = slurp(base .. ".rc")
    return rc and tonumber(rc:match("%d+"))
  end
  function h.wait(_, timeout)
    local dl = ibv.now() + (timeout or 30)
    repeat
      local rc = h.done()
      if rc then return rc end
      util.sleep(0.01)
    until ibv.now() > dl
    return nil
  end
  --- Waits until the child's output has a line matching pat.
  function h.expect(_, pat, timeout)
    local dl = ibv.now() + (timeout or 30)
    repeat
      local s = h.output()
      local m = s:match(pat)
      if m then return m end
      if h.done() then return nil, "the child exited: " .. s end
      util.sleep(0.02)
    until ibv.now() > dl
    return nil, "timed out waiting for '" .. pat .. "': " .. h.output()
  end
  function h.kill(_, sig) return util.sh(string.format("kill -%s %d 2>/dev/null", sig or "KILL", h.pid)) end
  function h.cleanup()
    if not h.done() then h:kill("KILL"); h:wait(5) end
    for _, suffix in ipairs{ "", ".err", ".pid", ".rc", ".sh" } do os.remove(base .. suffix) end
  end
  return h
end

--- A tally of completions by wr_id: add(wcs, n) counts them; check(ids)
-- compares with the set of posted ids: returns missing, duplicates, unknown
-- (counts) and the count by status.
function util.tally()
  local t = { seen = {}, status = {}, total = 0 }
  function t.add(_, wcs, n)
    for i = 1, n do
      local id = wcs:wr_id(i)
      t.seen[id] = (t.seen[id] or 0) + 1
      local st = wcs:status(i)
      t.status[st] = (t.status[st] or 0) + 1
    end
    t.total = t.total + n
  end
  function t.check(_, posted)
    local missing, dup, unknown = 0, 0, 0
    for id in pairs(posted) do
      local c = t.seen[id] or 0
      if c == 0 then missing = missing + 1 elseif c > 1 then dup = dup + c - 1 end
    end
    for id in pairs(t.seen) do if not posted[id] then unknown = unknown + 1 end end
    return missing, dup, unknown
  end
  return t
end

--- Polls cq into wcs until nothing more comes for quiet seconds (or limit
-- seconds pass), feeding the tally; returns the count.
function util.drain(cq, wcs, tally, quiet, limit)
  local got, last = 0, ibv.now()
  local deadline = last + (limit or 10)
  while ibv.now() < deadline do
    local n = cq:poll(wcs)
    if n > 0 then
      tally:add(wcs, n); got = got + n; last = ibv.now()
    elseif ibv.now() - last > (quiet or 0.3) then
      break
    end
  end
  return got
end

--- Runs cmd in the background after delay seconds; returns a function that
-- gives the ibv.now() time at which cmd started (once it finished; waiting up to 5 s).
function util.later(delay, cmd)
  local path = os.tmpname()
  os.remove(path)
  -- the time is taken just before cmd starts: a bound measured from it is an upper bound
  util.sh(string.format("(sleep %g; cat /proc/uptime > %s.tmp; %s; mv %s.tmp %s) &", delay, path, cmd, path, path))
  -- /proc/uptime and CLOCK_MONOTONIC advance together in the VM (no suspend)
  local offset = ibv.now() - tonumber(util.slurp("/proc/uptime"):match("^[%d.]+"))
  local at
  return function(wait)
    local deadline = ibv.now() + (wait or 5)
    repeat
      local s = at == nil and util.slurp(path)
      if s and s:match("^[%d.]+") then
        os.remove(path)
        at = tonumber(s:match("^[%d.]+")) + offset
      end
      if at then return at end
      util.sleep(0.01)
    until ibv.now() > deadline
    return nil
  end
end

--- This process's resident set size in kB.
function util.rss()
  local s = slurp("/proc/self/status") or ""
  return tonumber(s:match("VmRSS:%s*(%d+)")) or 0
end

--- Waits for rxe0's port to be active with its GID back (after a link flap).
function util.port_back(ctx, timeout)
  local deadline = ibv.now() + (timeout or 10)
  repeat
    local p = ctx:query_port(1)
    local gid = ctx:query_gid(1, 1)
    if p and p.state == "active" and gid == "::ffff:192.0.2.1" then return true end
    util.sleep(0.05)
  until ibv.now() > deadline
  return false
end

return util
