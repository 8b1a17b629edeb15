-- What the fabric specs share (spec/host/fabric/*_spec.lua and the examples'
-- bring-up specs): the interpreter under test, ports for a job of local ranks,
-- a job of ranks running a script, fabric_matrix.lua run as a job, the
-- synthetic figures of a fabric for the diagnosis and the report, files read
-- and written whole, and a fake sysfs tree of port counters.
local dkjson = require "dkjson"

local fs = {}

fs.LUA = rawget(_G, "jit") and "luajit" or "lua5.4"
fs.CPATH = "build/" .. fs.LUA .. "/?.so;;"

-- A TCP port for a job of ranks: below the kernel's ephemeral ports (32768 up), where a port some connection
-- of this busy host took as its local end cannot be listened on ("address already in use", even with
-- SO_REUSEADDR); lua5.4 and luajit draw from halves of their own, so make test can run both at once
-- (LuaJIT's math.random starts from the same seed in every process: seeded here from the clock and a
-- fresh table's address)
math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
function fs.free_port()
  return (fs.LUA == "luajit" and 26000 or 20000) + math.random(0, 5999)
end

--- A getenv over the table t.
function fs.env(t) return function(k) return t[k] end end

--- The ranks `which` of a job of size running script (Lua source that prints one
-- JSON line), each with IBV_FABRIC_* and vars; their decoded lines by rank.
function fs.ranks(script_text, size, which, vars)
  local script = os.tmpname()
  local fh = assert(io.open(script, "w"))
  fh:write(script_text)
  fh:close()
  local port = fs.free_port()
  local files = {}
  for _, r in ipairs(which) do
    files[r] = os.tmpname()
    os.execute(string.format("IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d IBV_FABRIC_ROOT=127.0.0.1:%d %s "
      .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 60 %s %s > %s 2>&1 &", r, size, port, vars, fs.CPATH, fs.LUA,
      script, files[r]))
  end
  local out, deadline = {}, os.time() + 60
  for _, r in ipairs(which) do
    repeat
      local h = io.open(files[r])
      local text = h and h:read("a") or ""
      if h then h:close() end
      -- (lua-luv prints "EBADF: bad file descriptor" on stderr when a poll sees POLLERR: a peer that died
      -- with data unread resets its connections; the rank goes on)
      local line = text:match("^({[^\n]*})\n") or text:match("\n({[^\n]*})\n")
      if line then out[r] = assert(dkjson.decode(line)) end
      if not line then os.execute("sleep 0.2") end
    until line or os.time() > deadline
    os.remove(files[r])
  end
  os.remove(script)
  return out
end

--- A bring-up script (examples/...) on this host as a job of n local ranks
-- (IBV_FABRIC_*); args for all, or a function of the rank giving each its
-- own; vars, variables for all (or a function of the rank giving each its
-- own).  Returns rank 0's output, every rank's exit status and every rank's
-- output (indexed by rank).
function fs.job(script, n, args, vars)
  local port = fs.free_port()
  local outs = {}
  for r = n - 1, 0, -1 do
    outs[r] = os.tmpname()
    os.execute(string.format("(%s IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d IBV_FABRIC_ROOT=127.0.0.1:%d "
      .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 60 %s %s %s > %s 2>&1; "
      .. "echo $? > %s.rc) &", type(vars) == "function" and vars(r) or vars or "", r, n, port, fs.CPATH,
      fs.LUA, script, type(args) == "function" and args(r) or args, outs[r], outs[r]))
  end
  local texts, rcs, deadline = {}, {}, os.time() + 70
  for r = 0, n - 1 do
    local rc
    repeat
      local h = io.open(outs[r] .. ".rc")
      rc = h and tonumber(h:read("a"))
      if h then h:close() end
      if not rc then os.execute("sleep 0.1") end
    until rc or os.time() > deadline
    rcs[r] = rc
    local h = io.open(outs[r])
    texts[r] = h and h:read("a")
    if h then h:close() end
    os.remove(outs[r]); os.remove(outs[r] .. ".rc")
  end
  return texts[0], rcs, texts
end

--- fabric_matrix.lua itself on this host: n local ranks (IBV_FABRIC_*), args
-- for all; returns rank 0's output and every rank's exit status.
function fs.matrix_ranks(n, args, vars)
  local text, rcs = fs.job("examples/fabric_matrix.lua", n, args, vars)
  return text, rcs
end

--- Synthetic figures: every ordered pair of n ranks with lat, write, send;
-- change(p) may spoil some.
function fs.fabric_of(n, change)
  local l = {}
  for s = 0, n - 1 do
    for d = 0, n - 1 do
      if s ~= d then
        local p = { src = s, dst = d, rail = 1, lat_us = 2.0 + 0.01 * (s + d), write_mbs = 12000 - s - d,
          send_mbs = 11900 - s - d, data_ok = true, verified_bytes = 100 }
        if change then change(p) end
        l[#l + 1] = p
      end
    end
  end
  return l
end

--- The thresholds of fabric_matrix's defaults.
fs.OPTS = { lat_factor = 2.1, bw_fraction = 0.93 }

--- A file's contents, or nil when it cannot be read.
function fs.slurp(path)
  local f = io.open(path)
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end

--- Writes text to path (the file replaced).
function fs.write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

--- A fake /sys/class/infiniband holding files (path under it -> text); its root.
function fs.sysfs_tree(files)
  local root = os.tmpname()
  os.remove(root)
  for path, text in pairs(files) do
    local full = root .. "/" .. path
    assert(os.execute("mkdir -p '" .. full:match("^(.*)/[^/]*$") .. "'"))
    fs.write(full, text)
  end
  return root
end

return fs
