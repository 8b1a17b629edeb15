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
