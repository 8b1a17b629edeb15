--- The legacy OFED 1.x XRC calls, over the modern verbs (rdma-core has only those).
--
--   local d = assert(ctx:open_xrc_domain(fd_or_file, ibv.O_CREAT))  -- fd -1: a private domain
--   local srq = assert(pd:create_xrc_srq(d, cq, {attr = {max_wr = 64, max_sge = 1}}))
--   srq.xrc_srq_num                                 -- what the sender puts in its WRs
--   local qpn = assert(d:create_xrc_rcv_qp{xrc_domain = d})   -- the receive QP number
--   assert(d:modify_xrc_rcv_qp(qpn, {qp_state = "init", port_num = 1, ...}))
--   d:query_xrc_rcv_qp(qpn).qp_state
--   assert(d:reg_xrc_rcv_qp(qpn)); assert(d:unreg_xrc_rcv_qp(qpn))
--   local sqp = assert(pd:create_qp{qp_type = "xrc", xrc_domain = d, send_cq = cq, recv_cq = cq})
--   sqp:post_send{opcode = "send", xrc_remote_srq_num = srq.xrc_srq_num, ...}
--   assert(d:close())                               -- ibv.close_xrc_domain(d) also
-- The C-style functions are there too: ibv.open_xrc_domain(ctx, fd, oflag),
-- ibv.create_xrc_rcv_qp(init_attr), ibv.reg_xrc_rcv_qp(d, qpn), ...
--
-- How the legacy semantics map onto rdma-core:
-- * a domain is an XRCD (ibv_open_xrcd).  fd -1 is valid only with oflag O_CREAT
--   alone; without O_CREAT a domain must exist for the file's inode (else
--   ENOENT); O_CREAT|O_EXCL fails with EEXIST when one exists.
-- * a receive QP is an xrc_recv QP (ibv_create_qp_ex); each registration of this
--   process is one more handle on it (ibv_open_qp), the creator holding the
--   first.  Unregistering closes one handle; the kernel destroys the QP with the
--   last handle of any process.
-- * closing a domain fails with EBUSY while this process holds registrations,
--   or XRC SRQs or send QPs made with it are open.
-- The backend (the modern calls) can be replaced, to test this logic without a device.
local xrc = {}

local core = require "ibverbs.core"
local E = core.errno
local EAGAIN, EINVAL, EEXIST, ENOENT, EBUSY = E.EAGAIN, E.EINVAL, E.EEXIST, E.ENOENT, E.EBUSY
local O_CREAT, O_EXCL = 64, 128 -- Linux; replaced by the module's values in install

local function fail(call, errno, why)
  local msg = call .. ": " .. core.strerror(errno)
  if why then msg = msg .. " (" .. why .. ")" end
  return nil, msg, errno
end

local function is_integer(v)
  return type(v) == "number" and v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53
end

local function argerror(n, fname, msg)
  error(("bad argument #%d to '%s' (%s)"):format(n, fname, msg), 3)
end

local Domain = { __name = "ibverbs.xrc_domain" }
Domain.__index = Domain

function Domain.__tostring(d)
  return "ibverbs.xrc_domain (" .. (d.xrcd and tostring(d.xrcd) or "closed") .. ")"
end

local function check_domain(d, n, fname)
  if getmetatable(d) ~= Domain then
    argerror(n, fname, "ibverbs.xrc_domain expected, got " .. type(d))
  end
  if d.xrcd == nil then error("attempt to use a closed ibverbs.xrc_domain", 3) end
  return d
end

local function check_qpn(qpn, n, fname)
  if not is_integer(qpn) or qpn < 0 or qpn > 0xffffff then
    argerror(n, fname, "QP number (0 to 0xffffff) expected, got " .. tostring(qpn))
  end
  return qpn
end

local function count_open(set)
  local n = 0
  for obj in pairs(set) do
    if not obj:is_closed() then n = n + 1 end
  end
  return n
end

-- The legacy calls, each a method of a Calls object over its backend (self.backend)
-- whose api (self.api) is the table of plain functions xrc.new returns.
local Calls = {}

--- open_xrc_domain(ctx, fd, oflag): fd an integer (-1: a domain of this
-- process only) or an open Lua file; oflag 0 or O_CREAT [| O_EXCL].
function Calls:open_xrc_domain(ctx, fd, oflag)
  local call = "ibv_open_xrc_domain"
  if io.type(fd) == "closed file" then argerror(2, "open_xrc_domain", "fd: closed file") end
  if not (io.type(fd) == "file" or is_integer(fd) and fd >= -1 and fd < 2 ^ 31) then
    argerror(2, "open_xrc_domain", "fd: integer or file expected, got " .. tostring(fd))
  end
  if not is_integer(oflag) then
    argerror(3, "open_xrc_domain", "oflag: integer expected, got " .. tostring(oflag))
  end
  if oflag ~= 0 and oflag ~= O_CREAT and oflag ~= O_CREAT + O_EXCL then
    return fail(call, EINVAL, "oflag must be 0, O_CREAT or O_CREAT|O_EXCL")
  end
  if fd == -1 and oflag ~= O_CREAT then
    return fail(call, EINVAL, "with fd -1 the only valid oflag is O_CREAT")
  end
  local xrcd, msg, errno = self.backend.open_xrcd(ctx, { fd = fd, oflags = oflag })
  if not xrcd then
    -- the kernel's answers for the two inode cases, as open(2) gives them
    if errno == EAGAIN and oflag == 0 then return fail(call, ENOENT, "no domain for this file") end
    if errno == EINVAL and oflag == O_CREAT + O_EXCL then
      return fail(call, EEXIST, "a domain exists for this file")
    end
    return nil, msg:gsub("^ibv_open_xrcd", call), errno
  end
  return setmetatable({ context = ctx, xrcd = xrcd, api = self.api, rcv = {},
                        users = setmetatable({}, { __mode = "k" }) }, Domain)
end

--- close_xrc_domain(d): EBUSY while registrations, XRC SRQs or send QPs remain.
function Calls.close_xrc_domain(_, d)
  check_domain(d, 1, "close_xrc_domain")
  local call = "ibv_close_xrc_domain"
  local nreg = 0
  for _, handles in pairs(d.rcv) do nreg = nreg + #handles end
  if nreg > 0 then
    return fail(call, EBUSY, ("still registered with %d XRC receive QP%s"):format(nreg, nreg == 1 and "" or "s"))
  end
  if count_open(d.users) > 0 then collectgarbage() end -- users the script dropped do not count
  local nusers = count_open(d.users)
  if nusers > 0 then
    return fail(call, EBUSY, ("%d SRQ%s or QPs still use it"):format(nusers, nusers == 1 and "" or "s"))
  end
  local ok, msg, errno = d.xrcd:close()
  if not ok then return nil, msg:gsub("^ibv_close_xrcd", call), errno end
  d.xrcd = nil
  return true
end

--- create_xrc_srq(pd, d, cq, attr): attr {attr = {max_wr=, max_sge=, srq_limit=}}
-- as struct ibv_srq_init_attr (srq_context accepted and ignored), or the sizes flat.
function Calls:create_xrc_srq(pd, d, cq, attr)
  check_domain(d, 2, "create_xrc_srq")
  if attr ~= nil and type(attr) ~= "table" then
    argerror(4, "create_xrc_srq", "table expected, got " .. type(attr))
  end
  local a = { srq_type = "xrc", pd = pd, xrcd = d.xrcd, cq = cq }
  for k, v in pairs(attr or {}) do
    if k ~= "srq_context" then a[k] = v end
  end
  local srq, msg, errno = self.backend.create_srq_ex(d.context, a)
  if not srq then return nil, msg:gsub("^ibv_create_srq_ex", "ibv_create_xrc_srq"), errno end
  d.users[srq] = true
  return srq
end

local ignored = { qp_context = true, send_cq = true, recv_cq = true, srq = true, cap = true,
                  qp_type = true, sq_sig_all = true, xrc_domain = true }

--- create_xrc_rcv_qp(init_attr [, d]): only init_attr.xrc_domain is used
-- (or d, which it must then equal); returns the receive QP number.
function Calls:create_xrc_rcv_qp(init_attr, d)
  if type(init_attr) ~= "table" then
    argerror(1, "create_xrc_rcv_qp", "init_attr table expected, got " .. type(init_attr))
  end
  for k in pairs(init_attr) do
    if not ignored[k] then error("init_attr: unknown field '" .. tostring(k) .. "'", 2) end
  end
  if d ~= nil and init_attr.xrc_domain ~= nil and init_attr.xrc_domain ~= d then
    error("init_attr: field 'xrc_domain' is another domain than the one called", 2)
  end
  d = d or init_attr.xrc_domain
  if d == nil then error("init_attr: field 'xrc_domain' is required", 2) end
  check_domain(d, 1, "create_xrc_rcv_qp")
  local qp, msg, errno = self.backend.create_qp_ex(d.context, { qp_type = "xrc_recv", xrcd = d.xrcd })
  if not qp then return nil, msg:gsub("^ibv_create_qp_ex", "ibv_create_xrc_rcv_qp"), errno end
  local qpn = qp.qp_num
  local handles = d.rcv[qpn] or {}
  handles[#handles + 1] = qp
  d.rcv[qpn] = handles
  return qpn
end

function Calls:open_handle(d, qpn)
  return self.backend.open_qp(d.context, { qp_num = qpn, qp_type = "xrc_recv", xrcd = d.xrcd })
end

--- Runs f(qp) on a handle of the receive QP qpn: one this process holds, or a
-- handle opened for the call and closed after it.
function Calls:with_handle(d, qpn, call, f)
  local handles = d.rcv[qpn]
  if handles then return f(handles[#handles]) end
  local qp, msg, errno = self:open_handle(d, qpn)
  if not qp then return nil, msg:gsub("^ibv_open_qp", call), errno end
  local r, m, e = f(qp)
  qp:close()
  return r, m, e
end

function Calls:modify_xrc_rcv_qp(d, qpn, attr)
  check_domain(d, 1, "modify_xrc_rcv_qp")
  check_qpn(qpn, 2, "modify_xrc_rcv_qp")
  if type(attr) ~= "table" then argerror(3, "modify_xrc_rcv_qp", "attr table expected, got " .. type(attr)) end
  return self:with_handle(d, qpn, "ibv_modify_xrc_rcv_qp", function(qp)
    local ok, msg, errno = qp:modify(attr)
    if not ok then return nil, msg:gsub("^ibv_modify_qp", "ibv_modify_xrc_rcv_qp"), errno end
    return true
  end)
end

function Calls:query_xrc_rcv_qp(d, qpn, t)
  check_domain(d, 1, "query_xrc_rcv_qp")
  check_qpn(qpn, 2, "query_xrc_rcv_qp")
  return self:with_handle(d, qpn, "ibv_query_xrc_rcv_qp", function(qp)
    local r, msg, errno = qp:query(t)
    if not r then return nil, msg:gsub("^ibv_query_qp", "ibv_query_xrc_rcv_qp"), errno end
    return r
  end)
end

--- reg_xrc_rcv_qp(d, qpn): one more registration of this process (a handle).
function Calls:reg_xrc_rcv_qp(d, qpn)
  check_domain(d, 1, "reg_xrc_rcv_qp")
  check_qpn(qpn, 2, "reg_xrc_rcv_qp")
  local qp, msg, errno = self:open_handle(d, qpn)
  if not qp then return nil, msg:gsub("^ibv_open_qp", "ibv_reg_xrc_rcv_qp"), errno end
  local handles = d.rcv[qpn] or {}
  handles[#handles + 1] = qp
  d.rcv[qpn] = handles
  return true
end

--- unreg_xrc_rcv_qp(d, qpn): drops one registration; the last one of all
-- processes destroys the QP.
function Calls.unreg_xrc_rcv_qp(_, d, qpn)
  check_domain(d, 1, "unreg_xrc_rcv_qp")
  check_qpn(qpn, 2, "unreg_xrc_rcv_qp")
  local handles = d.rcv[qpn]
  if not handles then
    return fail("ibv_unreg_xrc_rcv_qp", EINVAL, ("this process is not registered with QP %d"):format(qpn))
  end
  local ok, msg, errno = handles[#handles]:close()
  if not ok then return nil, msg:gsub("^ibv_destroy_qp", "ibv_unreg_xrc_rcv_qp"), errno end
  handles[#handles] = nil
  if #handles == 0 then d.rcv[qpn] = nil end
  return true
end

--- The registrations this process holds for qpn (0 when none).
function Calls.xrc_rcv_registrations(_, d, qpn)
  check_domain(d, 1, "xrc_rcv_registrations")
  local handles = d.rcv[check_qpn(qpn, 2, "xrc_rcv_registrations")]
  return handles and #handles or 0
end

local send_fields = { qp_type = true, xrc_domain = true, send_cq = true, recv_cq = true, srq = true,
                      cap = true, sq_sig_all = true, qp_context = true }

--- The XRC send QP of OFED: {qp_type = "xrc", xrc_domain = d, send_cq =, cap =, sq_sig_all =}
-- as an xrc_send QP on pd; it has no receive side, so recv_cq, srq and the
-- receive sizes are not used.
function Calls:create_xrc_send_qp(pd, init_attr)
  local d = init_attr.xrc_domain
  if d == nil then error("init_attr: field 'xrc_domain' is required for an XRC QP", 2) end
  check_domain(d, 1, "create_qp")
  for k in pairs(init_attr) do
    if not send_fields[k] then error("init_attr: unknown field '" .. tostring(k) .. "'", 2) end
  end
  local cap
  if init_attr.cap then
    cap = {}
    for k, v in pairs(init_attr.cap) do cap[k] = v end
    cap.max_recv_wr, cap.max_recv_sge = 0, 0
  end
  local qp, msg, errno = self.backend.create_qp_ex(d.context, { qp_type = "xrc_send", pd = pd,
    send_cq = init_attr.send_cq, cap = cap, sq_sig_all = init_attr.sq_sig_all })
  if not qp then return nil, msg, errno end
  d.users[qp] = true
  return qp
end


-- Helpers of the calls, not calls themselves.
local HELPERS = { open_handle = true, with_handle = true }

--- The legacy calls over a backend: a table of the modern constructors
-- open_xrcd(ctx, attr), create_srq_ex(ctx, attr), create_qp_ex(ctx, attr) and
-- open_qp(ctx, attr); the objects they return have close(), is_closed(),
-- modify(attr), query() and qp_num as the ibverbs objects do.  Returns the
-- calls as plain functions (open_xrc_domain(ctx, fd, oflag), ...).
function xrc.new(backend)
  local api = {}
  local calls = setmetatable({ backend = backend, api = api }, { __index = Calls })
  for name, fn in pairs(Calls) do
    -- a tail call: a Lua error's level still names the caller of the api function
    if not HELPERS[name] then api[name] = function(...) return fn(calls, ...) end end
  end
  return api
end

local real_backend = {
  open_xrcd = function(ctx, a) return ctx:open_xrcd(a) end,
  create_srq_ex = function(ctx, a) return ctx:create_srq_ex(a) end,
  create_qp_ex = function(ctx, a) return ctx:create_qp_ex(a) end,
  open_qp = function(ctx, a) return ctx:open_qp(a) end,
}

--- Adds the legacy calls to the module: functions with the C argument order,
-- and methods on contexts, PDs and domains.
function xrc.install(ibv)
  O_CREAT, O_EXCL = ibv.O_CREAT, ibv.O_EXCL
  local api = xrc.new(real_backend)
  for k, f in pairs(api) do
    if k ~= "create_xrc_send_qp" then ibv[k] = f end
  end
  ibv.extend("ibverbs.context", {
    open_xrc_domain = api.open_xrc_domain,
    close_xrc_domain = function(_, d) return api.close_xrc_domain(d) end,
  })
  local create_qp = ibv.methods("ibverbs.pd").create_qp
  ibv.extend("ibverbs.pd", {
    create_xrc_srq = api.create_xrc_srq,
    create_qp = function(pd, init_attr)
      if type(init_attr) == "table" and (init_attr.qp_type == "xrc" or init_attr.xrc_domain ~= nil) then
        if init_attr.qp_type ~= "xrc" then error("init_attr: field 'xrc_domain' needs qp_type 'xrc'", 2) end
        return api.create_xrc_send_qp(pd, init_attr)
      end
      return create_qp(pd, init_attr)
    end,
  })
end

-- Domain methods: the calls of the api that opened the domain.
for _, name in ipairs({ "close_xrc_domain", "modify_xrc_rcv_qp", "query_xrc_rcv_qp", "reg_xrc_rcv_qp",
                        "unreg_xrc_rcv_qp", "xrc_rcv_registrations" }) do
  Domain[name] = function(d, ...)
    check_domain(d, 1, name)
    return d.api[name](d, ...)
  end
end
Domain.close = Domain.close_xrc_domain
function Domain.create_xrc_rcv_qp(d, init_attr)
  check_domain(d, 1, "create_xrc_rcv_qp")
  return d.api.create_xrc_rcv_qp(init_attr or {}, d)
end
function Domain.is_closed(d) return d.xrcd == nil end

return xrc
