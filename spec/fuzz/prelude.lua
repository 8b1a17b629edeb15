--- What the fuzzer's generated code runs against (tools/fuzz.lua): the same
-- module is the header of every crash reproducer it writes, so a logged call
-- sequence replays as is:
--
--   local F = require "fuzz.prelude"
--   local O, T, ibv, cm = F.O, F.T, F.ibv, F.cm
--   T(1, function() return F.open() end)              -- O[1] = the context
--   T(7, function() return O[2]:reg_mr(64, 7) end)    -- O[7] = the MR
--   T(0, function() return O[6]:post_send(F.evil({opcode = "send"}, O[6])) end)
--
-- T(slot, f) runs one call protected: a Lua error or a nil return is data
-- (counted), a userdata or table result is kept in O[slot].  The fixtures
-- (F.rc, F.connect, F.cm_*) build objects in useful states; F.evil and
-- F.gcbomb close objects from metamethods and finalizers in the middle of a
-- call.
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"

local F = { ibv = ibv, cm = cm, O = {} }
F.DEVICE = os.getenv("IBV_SPEC_DEVICE") or "rxe0"
F.ADDR = "192.0.2.1"
F.GID_INDEX = 1
F.ACCESS = { "local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind" }
F.stats = { calls = 0, errors = 0, nils = 0, ok = 0 }
F.last = nil -- "error", "nil" or "ok", and F.last_msg: the outcome of the last T

local unpack_ = table.unpack or rawget(_G, "unpack")
local IS_54 = _VERSION == "Lua 5.4" and not rawget(_G, "jit")

local TRACE = os.getenv("FUZZ_TRACE") -- the driver checks what each call did

local function oneline(v)
  return (tostring(v):gsub("[%c]", " "):sub(1, 160))
end

--- Runs f() protected; keeps a userdata or table result in O[slot] (slot > 0).
function F.T(slot, f)
  local st = F.stats
  st.calls = st.calls + 1
  local function done(ok, a, b, ...)
    if F.gc_tuned then F.gc_reset() end
    if not ok then
      st.errors = st.errors + 1
      F.last, F.last_msg = "error", oneline(a)
    elseif a == nil and select("#", b, ...) > 0 and b ~= nil then
      st.nils = st.nils + 1
      F.last, F.last_msg = "nil", oneline(b)
    else
      st.ok = st.ok + 1
      F.last, F.last_msg = "ok", nil
      local t = type(a)
      if slot > 0 and (t == "userdata" or t == "table") then F.O[slot] = a end
    end
  end
  done(pcall(f))
  if TRACE then
    io.stderr:write("fuzz-outcome ", F.last, "\n")
    io.stderr:flush()
  end
end

-- ------------------------------------------------------------------ evil inputs

--- Closes each object given (pcall: whatever it is), in order.
function F.kill(...)
  for i = 1, select("#", ...) do
    local v = select(i, ...)
    if v ~= nil then pcall(function() return v:close() end) end
  end
end

--- t with a metatable whose __index (a lookup of a key t lacks: every optional
-- field the C code reads) and __pairs close the victims, the first time only.
function F.evil(t, ...)
  local victims, n = { ... }, select("#", ...)
  local fired = false
  local function fire()
    if not fired then
      fired = true
      F.kill(unpack_(victims, 1, n))
    end
  end
  return setmetatable(t, {
    __index = function() fire() end,
    __pairs = function(tt)
      fire()
      return next, tt, nil
    end,
  })
end

--- Like F.evil, but the victims close at every lookup, each time (for code that
-- reads one field twice).
function F.evil_always(t, ...)
  local victims, n = { ... }, select("#", ...)
  return setmetatable(t, { __index = function() F.kill(unpack_(victims, 1, n)) end })
end

local newproxy = rawget(_G, "newproxy")

--- Garbage with finalizers that close the victims, and a collector tuned to
-- run them at the very next allocations (inside the C call that follows).
function F.gcbomb(...)
  local victims, n = { ... }, select("#", ...)
  local mt = { __gc = function() F.kill(unpack_(victims, 1, n)) end }
  for _ = 1, 8 do
    if newproxy then
      local p = newproxy(true)
      getmetatable(p).__gc = mt.__gc
    else
      setmetatable({}, mt)
    end
  end
  for _ = 1, 64 do local _ = { {}, {} } end -- more garbage: the collector keeps stepping
  if IS_54 then
    collectgarbage("incremental", 1, 1000, 0)
  else
    collectgarbage("setpause", 1)
    collectgarbage("setstepmul", 1000)
  end
  F.gc_tuned = true
end

function F.gc_reset()
  F.gc_tuned = false
  if IS_54 then
    collectgarbage("incremental", 200, 100, 13)
  else
    collectgarbage("setpause", 200)
    collectgarbage("setstepmul", 200)
  end
end

-- ------------------------------------------------------------------ attacks (docs/verification.md)

local function aggressive()
  if IS_54 then
    collectgarbage("incremental", 1, 1000, 0)
  else
    collectgarbage("setpause", 1)
    collectgarbage("setstepmul", 1000)
  end
  F.gc_tuned = true
end

local function finalizable(fn)
  if newproxy then
    local p = newproxy(true)
    getmetatable(p).__gc = fn
  else
    setmetatable({}, { __gc = fn })
  end
end

--- Finalizer timing: garbage whose finalizers close the victims at the
-- after-th finalizer run (each run before that leaves new finalizable
-- garbage behind, so one runs in nearly every cycle), a collector that
-- steps at every allocation, then collectgarbage("step", k):
-- the victims close at some allocation inside the call that follows.
function F.arm(k, after, ...)
  local victims, n = { ... }, select("#", ...)
  local left = after or 0
  local function fin()
    if left <= 0 then
      if left == 0 then F.kill(unpack_(victims, 1, n)) end
      left = -1
      return
    end
    left = left - 1
    finalizable(fin)
  end
  for _ = 1, 3 do finalizable(fin) end
  aggressive() -- first: the step leaves the collector due at the very next allocation
  collectgarbage("step", k)
end

--- A table whose values are weak (an object only it holds may be collected
-- while the C code reads it); how: nil, "collect" or "step": a lookup of a
-- key the table lacks (every optional field) runs the collector.
function F.weak(t, how)
  local mt = { __mode = "v" }
  if how == "collect" then
    mt.__index = function() collectgarbage() end
  elseif how == "step" then
    mt.__index = function() collectgarbage("step", 1) end
  end
  return setmetatable(t, mt)
end

--- n WRs (send or receive), each a weak table with a weak SGE on an MR of
-- pd that nothing else holds.
function F.weak_wrs(n, pd, how, send)
  local t = {}
  for i = 1, n do
    local sge = F.weak({ mr = pd:reg_mr(64, F.ACCESS), length = 8 }, how)
    t[i] = F.weak(send and { opcode = "send", sge = sge } or { sge = sge }, how)
  end
  return t
end

--- obj, closed.
function F.closed(obj)
  pcall(function() return obj:close() end)
  return obj
end

--- A value an F.shifty table computes at each read (a fresh object each time).
function F.fresh(f) return { [F] = f } end

--- t whose (absent) field key reads as the next of the choices at each read:
-- different objects, closed ones, nil, F.fresh(...) made anew at each read.
function F.shifty(t, key, ...)
  local choices, n, i = { ... }, select("#", ...), 0
  return setmetatable(t, { __index = function(_, k)
    if k ~= key or n == 0 then return nil end
    i = i + 1
    local v = choices[(i - 1) % n + 1]
    if type(v) == "table" and rawget(v, F) then v = v[F]() end
    return v
  end })
end

F.stripped = {}

--- Replaces (how "noop", "error") or removes (how "nil") the __gc of obj's
-- metatable (the class's, or a per-object copy); F.restore_gc puts them back.
function F.strip_gc(obj, how)
  local mt = getmetatable(obj)
  if type(mt) ~= "table" then return nil, "no metatable" end
  F.stripped[#F.stripped + 1] = { mt, rawget(mt, "__gc") }
  if how == "nil" then
    mt.__gc = nil
  elseif how == "error" then
    mt.__gc = function() error("replaced __gc") end
  else
    mt.__gc = function() end
  end
  return true
end

function F.restore_gc()
  for i = #F.stripped, 1, -1 do
    local e = F.stripped[i]
    e[1].__gc = e[2]
    F.stripped[i] = nil
  end
  return true
end

--- Objects kept to the end of the script: lua_close collects them all at once.
F.live = {}
function F.keep(...)
  for i = 1, select("#", ...) do F.live[#F.live + 1] = (select(i, ...)) end
  return true
end

--- A whole object graph on a new context (and a cm channel with ids whose
-- events nobody takes), dropped (or kept to the end when keep): what a
-- script leaves to the collector.  which: a string of letters choosing the
-- parts (c: CQ and QPs, l: lists, a: AH, s: SRQ, m: cm, w: wc array, x: close some first).
function F.graph(which, keep, p)
  local g = {}
  local function has(ch) return which:find(ch, 1, true) ~= nil end
  g.ctx = assert(ibv.open(F.DEVICE))
  g.pd = assert(g.ctx:alloc_pd())
  g.mr = assert(g.pd:reg_mr(256, F.ACCESS))
  if has("c") then
    g.cq = assert(g.ctx:create_cq(16))
    g.qa = F.qp(g.ctx, g.pd, g.cq, "rc")
    g.qb = F.qp(g.ctx, g.pd, g.cq, "rc")
    pcall(F.connect, g.qa, g.qb, g.ctx)
  end
  if has("l") then
    g.sl = F.send_list(g.mr)
    g.rl = F.recv_list(g.mr)
    if g.qb then pcall(g.qb.post_recv, g.qb, g.rl) end
    if g.qa then pcall(g.qa.post_send, g.qa, g.sl, 1, 2) end
  end
  if has("a") then
    g.ah = F.ah(g.pd, g.ctx)
    g.ul = ibv.send_wrs(2)
    g.ul:set(1, { ah = g.ah, opcode = "send", inline = "x", remote_qpn = 1, remote_qkey = 1 })
  end
  if has("s") then g.srq = assert(g.pd:create_srq{ max_wr = 8, max_sge = 1 }) end
  if has("w") then g.wcs = ibv.wc_array(8) end
  if has("m") then
    g.ch = assert(cm.event_channel())
    g.lid = g.ch:create_id{ ps = "tcp" }
    if p then pcall(function() assert(g.lid:bind_addr(F.ADDR .. ":" .. p)); assert(g.lid:listen(4)) end) end
    g.cid = g.ch:create_id{ ps = "tcp" }
    pcall(g.cid.resolve_addr, g.cid, nil, F.ADDR .. ":" .. (p or 7471), 1000) -- its event stays unread
    g.uid = g.ch:create_id{ ps = "udp" }
  end
  if has("x") then F.kill(g.ah, g.mr, g.cq) end
  if keep then
    for _, v in pairs(g) do F.keep(v) end
  end
  return true
end

--- LuaJIT: an FFI write into entry i (0-based) of a prepared list: field
-- "num_sge", "next" (v: nil, or the index of an entry), "opcode", "addr",
-- "length", "lkey" (of the first SGE), "sg_list" (v: nil, or an entry index
-- whose SGEs to point at), "wr_id".
function F.ffi_edit(list, i, what, v)
  local x = require "ibverbs.ffi"
  local send, s = pcall(x.send_wrs, list)
  if not send then s = x.recv_wrs(list) end
  local w = s:at(i)
  if what == "num_sge" then w.num_sge = v
  elseif what == "next" then w.next = v and (s.p + v % s.n) or nil
  elseif what == "opcode" then
    if send then w.opcode = v end
  elseif what == "sg_list" then w.sg_list = v and s.p[v % s.n].sg_list or nil
  elseif what == "wr_id" then w.wr_id = v
  elseif w.sg_list ~= nil then w.sg_list[0][what] = v
  end
  return true
end

--- A userdata of no ibverbs type.
function F.alien()
  return newproxy and newproxy(false) or io.stdout
end

-- ------------------------------------------------------------------ fixtures

function F.open() return assert(ibv.open(F.DEVICE)) end

function F.gid(ctx) return ctx:query_gid(1, F.GID_INDEX) end

local CAP = { max_send_wr = 16, max_recv_wr = 16, max_send_sge = 2, max_recv_sge = 2, max_inline_data = 64 }

--- A QP of type t (RESET); send_ops: create it with ctx:create_qp_ex.
function F.qp(ctx, pd, cq, t, send_ops)
  if send_ops then
    return assert(ctx:create_qp_ex{ pd = pd, qp_type = t or "rc", send_cq = cq, recv_cq = cq, cap = CAP,
                                    send_ops_flags = send_ops })
  end
  return assert(pd:create_qp{ qp_type = t or "rc", send_cq = cq, recv_cq = cq, cap = CAP })
end

--- Connects two RC/UC QPs to each other on GID index 1.
function F.connect(a, b, ctx)
  local gid = F.gid(ctx)
  local acc = { "local_write", "remote_write", "remote_read", "remote_atomic" }
  assert(a:connect({ qpn = b.qp_num, gid = gid }, { sgid_index = F.GID_INDEX, qp_access_flags = acc }))
  assert(b:connect({ qpn = a.qp_num, gid = gid }, { sgid_index = F.GID_INDEX, qp_access_flags = acc }))
  return true
end

--- A UD QP brought to RTS.
function F.ud(pd, cq)
  local q = assert(pd:create_qp{ qp_type = "ud", send_cq = cq, recv_cq = cq, cap = CAP })
  assert(q:to_init{})
  assert(q:to_rtr{})
  assert(q:to_rts{})
  return q
end

function F.ah(pd, ctx)
  return assert(pd:create_ah{ port_num = 1, grh = { dgid = F.gid(ctx), sgid_index = F.GID_INDEX } })
end

local function port(p) return F.ADDR .. ":" .. p end

--- cm ids in each state, on channel ch.
function F.cm_bound(ch, ps)
  local id = assert(ch:create_id{ ps = ps or "tcp" })
  assert(id:bind_addr(port(0)))
  return id
end

function F.cm_listening(ch, p)
  local id = assert(ch:create_id{ ps = "tcp" })
  assert(id:bind_addr(port(p)))
  assert(id:listen(4))
  return id
end

function F.cm_addr_resolved(ch, p)
  local id = assert(ch:create_id{ ps = "tcp" })
  assert(id:resolve_addr(nil, port(p), 1000))
  assert(cm.expect(ch, "addr_resolved", 3))
  return id
end

function F.cm_route_resolved(ch, p)
  local id = F.cm_addr_resolved(ch, p)
  assert(id:resolve_route(1000))
  assert(cm.expect(ch, "route_resolved", 3))
  return id
end

--- A route-resolved id with a QP (cm-made CQs).
function F.cm_with_qp(ch, p)
  local id = F.cm_route_resolved(ch, p)
  assert(id:create_qp{ cap = { max_send_wr = 4, max_recv_wr = 4, max_send_sge = 1, max_recv_sge = 1 } })
  return id
end

--- A bound UD id with a QP.
function F.cm_ud(ch)
  local id = F.cm_bound(ch, "udp")
  assert(id:create_qp{ cap = { max_send_wr = 4, max_recv_wr = 4 } })
  return id
end

--- A prepared send list with an inline entry and an SGE entry on mr.
function F.send_list(mr)
  local l = ibv.send_wrs(4, 2)
  l:set(1, { opcode = "send", inline = "abc", send_flags = { "signaled" } })
  l:set(2, { opcode = "send", sg_list = { { mr = mr, length = 8 } }, send_flags = { "signaled" } })
  return l
end

function F.recv_list(mr)
  local l = ibv.recv_wrs(4, 2)
  l:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
  return l
end

return F
