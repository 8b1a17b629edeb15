-- The legacy OFED 1.x XRC layer (lua/ibverbs/xrc.lua) over a fake modern
-- backend that behaves as the kernel does: domains per inode (here: per fd),
-- shared receive QPs destroyed with their last handle.  No device needed.
local xrc = require "ibverbs.xrc"
local ibv = require "ibverbs"

local O_CREAT, O_EXCL = ibv.O_CREAT, ibv.O_EXCL
local EINVAL, EEXIST, ENOENT, EBUSY = ibv.errno.EINVAL, ibv.errno.EEXIST, ibv.errno.ENOENT, ibv.errno.EBUSY

-- A fake kernel: the calls it saw, its domains by fd, its receive QPs by number.
local function fake()
  local k = { calls = {}, by_fd = {}, qps = {}, next_qpn = 0x100, open_handles = 0 }
  local function obj(fields)
    fields.closed = false
    function fields.is_closed(o) return o.closed end
    return fields
  end
  local function log(name, a) k.calls[#k.calls + 1] = { name = name, attr = a } end
  function k.count(name)
    local n = 0
    for _, c in ipairs(k.calls) do if c.name == name then n = n + 1 end end
    return n
  end
  local function new_handle(real, xrcd)
    k.open_handles = k.open_handles + 1
    real.handles = real.handles + 1
    xrcd.users = xrcd.users + 1
    return obj{
      qp_num = real.qpn,
      close = function(h)
        if h.closed then return true end
        h.closed = true
        k.open_handles = k.open_handles - 1
        xrcd.users = xrcd.users - 1
        real.handles = real.handles - 1
        if real.handles == 0 then k.qps[real.qpn] = nil end -- the last handle destroys it
        return true
      end,
      modify = function(_, attr) real.state = attr.qp_state or real.state; return true end,
      query = function() return { qp_state = real.state } end,
    }
  end
  k.backend = {
    open_xrcd = function(ctx, a)
      log("open_xrcd", a)
      assert.equal("ctx", ctx)
      local d = a.fd ~= -1 and k.by_fd[a.fd] or nil
      if a.fd ~= -1 and not d and math.floor(a.oflags / O_CREAT) % 2 == 0 then
        return nil, "ibv_open_xrcd: Resource temporarily unavailable", 11
      end
      if d and math.floor(a.oflags / O_EXCL) % 2 == 1 then return nil, "ibv_open_xrcd: Invalid argument", EINVAL end
      d = d or { users = 0, fd = a.fd }
      if a.fd ~= -1 then k.by_fd[a.fd] = d end
      return obj{ domain = d, users = 0, close = function(x)
        if x.users > 0 then return nil, "ibv_close_xrcd: Device or resource busy", EBUSY end
        x.closed = true
        return true
      end }
    end,
    create_qp_ex = function(_, a)
      log("create_qp_ex", a)
      if a.qp_type == "xrc_send" then return obj{ close = function(q) q.closed = true return true end } end
      local real = { qpn = k.next_qpn, handles = 0, state = "reset", xrcd = a.xrcd.domain }
      k.next_qpn = k.next_qpn + 1
      k.qps[real.qpn] = real
      return new_handle(real, a.xrcd)
    end,
    open_qp = function(_, a)
      log("open_qp", a)
      local real = k.qps[a.qp_num]
      if not real or real.xrcd ~= a.xrcd.domain then return nil, "ibv_open_qp: Invalid argument", EINVAL end
      return new_handle(real, a.xrcd)
    end,
    create_srq_ex = function(_, a)
      log("create_srq_ex", a)
      return obj{ xrc_srq_num = 7, close = function(s) s.closed = true return true end }
    end,
  }
  -- a receive QP that another process created in domain d
  function k.foreign_qp(d)
    local real = { qpn = k.next_qpn, handles = 1, state = "init", xrcd = d.xrcd.domain }
    k.next_qpn = k.next_qpn + 1
    k.qps[real.qpn] = real
    return real.qpn
  end
  return k
end

describe("legacy open_xrc_domain", function()
  local k, api
  before_each(function()
    k = fake()
    api = xrc.new(k.backend)
  end)

  it("opens a private domain with fd -1 and O_CREAT", function()
    local d = assert(api.open_xrc_domain("ctx", -1, O_CREAT))
    assert.equal("ibverbs.xrc_domain", getmetatable(d).__name)
    assert.same({ fd = -1, oflags = O_CREAT }, k.calls[1].attr)
    assert.is_false(d:is_closed())
  end)

  it("refuses fd -1 with any oflag but O_CREAT, before any verbs call", function()
    for _, oflag in ipairs({ 0, O_CREAT + O_EXCL }) do
      local d, msg, errno = api.open_xrc_domain("ctx", -1, oflag)
      assert.is_nil(d)
      assert.equal(EINVAL, errno)
      assert.matches("^ibv_open_xrc_domain: Invalid argument %(with fd %-1", msg)
    end
    assert.equal(0, #k.calls)
  end)

  it("refuses oflag bits other than O_CREAT and O_EXCL, and O_EXCL alone", function()
    for _, oflag in ipairs({ O_EXCL, O_CREAT + 2, 1 }) do
      local d, _, errno = api.open_xrc_domain("ctx", 3, oflag)
      assert.is_nil(d)
      assert.equal(EINVAL, errno)
    end
    assert.equal(0, #k.calls)
  end)

  it("without O_CREAT fails with ENOENT when the file has no domain, and opens one that exists", function()
    local d, msg, errno = api.open_xrc_domain("ctx", 5, 0)
    assert.is_nil(d)
    assert.equal(ENOENT, errno)
    assert.matches("^ibv_open_xrc_domain: No such file or directory", msg)
    local first = assert(api.open_xrc_domain("ctx", 5, O_CREAT))
    local second = assert(api.open_xrc_domain("ctx", 5, 0))
    assert.equal(first.xrcd.domain, second.xrcd.domain)
  end)

  it("with O_CREAT opens or creates the domain of the file's inode", function()
    local a = assert(api.open_xrc_domain("ctx", 5, O_CREAT))
    local b = assert(api.open_xrc_domain("ctx", 5, O_CREAT))
    local c = assert(api.open_xrc_domain("ctx", 6, O_CREAT))
    assert.equal(a.xrcd.domain, b.xrcd.domain)
    assert.are_not.equal(a.xrcd.domain, c.xrcd.domain)
  end)

  it("with O_CREAT|O_EXCL fails with EEXIST when the file has a domain", function()
    assert(api.open_xrc_domain("ctx", 5, O_CREAT + O_EXCL))
    local d, msg, errno = api.open_xrc_domain("ctx", 5, O_CREAT + O_EXCL)
    assert.is_nil(d)
    assert.equal(EEXIST, errno)
    assert.matches("^ibv_open_xrc_domain: File exists", msg)
  end)

  it("passes other failures through under its own name", function()
    k.backend.open_xrcd = function() return nil, "ibv_open_xrcd: Operation not supported", 95 end
    local d, msg, errno = api.open_xrc_domain("ctx", -1, O_CREAT)
    assert.is_nil(d)
    assert.equal(95, errno)
    assert.equal("ibv_open_xrc_domain: Operation not supported", msg)
  end)

  it("takes an open Lua file as fd, and raises on bad fd and oflag arguments", function()
    local f = io.tmpfile()
    assert(api.open_xrc_domain("ctx", f, O_CREAT))
    assert.equal(f, k.calls[1].attr.fd)
    f:close()
    assert.has_error(function() api.open_xrc_domain("ctx", f, O_CREAT) end,
      "bad argument #2 to 'open_xrc_domain' (fd: closed file)")
    assert.has_error(function() api.open_xrc_domain("ctx", "3", O_CREAT) end)
    assert.has_error(function() api.open_xrc_domain("ctx", -2, O_CREAT) end)
    assert.has_error(function() api.open_xrc_domain("ctx", 1.5, O_CREAT) end)
    assert.has_error(function() api.open_xrc_domain("ctx", -1) end,
      "bad argument #3 to 'open_xrc_domain' (oflag: integer expected, got nil)")
  end)
end)

-- A fake backend, the API over it and a private domain opened through it.
local function domain()
  local k = fake()
  local api = xrc.new(k.backend)
  return k, api, assert(api.open_xrc_domain("ctx", -1, O_CREAT))
end

describe("legacy XRC receive QPs", function()
  local k, api, d
  before_each(function() k, api, d = domain() end)

  it("creates an xrc_recv QP in the init_attr's domain and returns its number", function()
    local qpn = assert(api.create_xrc_rcv_qp{ xrc_domain = d })
    assert.equal(0x100, qpn)
    assert.same({ qp_type = "xrc_recv", xrcd = d.xrcd }, k.calls[2].attr)
    assert.equal(1, d:xrc_rcv_registrations(qpn))
  end)

  it("accepts and ignores the init_attr fields the page says are ignored", function()
    local qpn = assert(d:create_xrc_rcv_qp{ qp_context = 1, send_cq = "cq", recv_cq = "cq", srq = "srq",
      cap = { max_send_wr = 9 }, qp_type = "rc", sq_sig_all = 1, xrc_domain = d })
    assert.same({ qp_type = "xrc_recv", xrcd = d.xrcd }, k.calls[2].attr)
    assert.equal(1, d:xrc_rcv_registrations(qpn))
  end)

  it("raises on unknown fields, a missing domain or a domain other than the one called", function()
    local other = assert(api.open_xrc_domain("ctx", -1, O_CREAT))
    assert.has_error(function() d:create_xrc_rcv_qp{ xrc_domian = d } end, "init_attr: unknown field 'xrc_domian'")
    assert.has_error(function() api.create_xrc_rcv_qp{} end, "init_attr: field 'xrc_domain' is required")
    assert.has_error(function() d:create_xrc_rcv_qp{ xrc_domain = other } end)
    assert.has_error(function() api.create_xrc_rcv_qp("x") end)
  end)

  it("keeps the QP until the last registration is dropped, the creator counting as one", function()
    local qpn = assert(d:create_xrc_rcv_qp())
    assert(d:reg_xrc_rcv_qp(qpn))
    assert(d:reg_xrc_rcv_qp(qpn))
    assert.equal(3, d:xrc_rcv_registrations(qpn))
    assert.equal(2, k.count("open_qp"))
    assert.same({ qp_num = qpn, qp_type = "xrc_recv", xrcd = d.xrcd }, k.calls[3].attr)
    assert(d:unreg_xrc_rcv_qp(qpn))
    assert(d:unreg_xrc_rcv_qp(qpn))
    assert.is_not_nil(k.qps[qpn])
    assert(d:unreg_xrc_rcv_qp(qpn))
    assert.is_nil(k.qps[qpn])
    assert.equal(0, d:xrc_rcv_registrations(qpn))
    assert.equal(0, k.open_handles)
  end)

  it("fails to unregister a QP this process is not registered with", function()
    local ok, msg, errno = d:unreg_xrc_rcv_qp(0x123)
    assert.is_nil(ok)
    assert.equal(EINVAL, errno)
    assert.matches("^ibv_unreg_xrc_rcv_qp: Invalid argument", msg)
  end)

  it("registers with a QP another process created, and fails for an unknown one", function()
    local qpn = k.foreign_qp(d)
    assert(d:reg_xrc_rcv_qp(qpn))
    assert.equal(2, k.qps[qpn].handles)
    local ok, msg, errno = d:reg_xrc_rcv_qp(0x999)
    assert.is_nil(ok)
    assert.equal(EINVAL, errno)
    assert.equal("ibv_reg_xrc_rcv_qp: Invalid argument", msg)
  end)

  it("modifies and queries through a registration, or through a handle opened for the call", function()
    local qpn = assert(d:create_xrc_rcv_qp())
    assert(d:modify_xrc_rcv_qp(qpn, { qp_state = "init" }))
    assert.equal("init", d:query_xrc_rcv_qp(qpn).qp_state)
    assert.equal(0, k.count("open_qp"))
    local foreign = k.foreign_qp(d)
    assert(d:modify_xrc_rcv_qp(foreign, { qp_state = "rtr" }))
    assert.equal("rtr", d:query_xrc_rcv_qp(foreign).qp_state)
    assert.equal(2, k.count("open_qp"))
    assert.equal(1, k.qps[foreign].handles) -- the temporary handles are closed again
    local r, msg = d:query_xrc_rcv_qp(0x999)
    assert.is_nil(r)
    assert.equal("ibv_query_xrc_rcv_qp: Invalid argument", msg)
  end)

  it("raises on bad QP numbers and attr tables", function()
    assert.has_error(function() d:reg_xrc_rcv_qp(-1) end)
    assert.has_error(function() d:unreg_xrc_rcv_qp(0x1000000) end)
    assert.has_error(function() d:modify_xrc_rcv_qp(5) end)
    assert.has_error(function() d:query_xrc_rcv_qp("5") end)
  end)
end)

describe("legacy close_xrc_domain", function()
  local k, api, d
  before_each(function() k, api, d = domain() end)

  it("fails with EBUSY while this process is registered with a receive QP", function()
    local qpn = assert(d:create_xrc_rcv_qp())
    local ok, msg, errno = d:close()
    assert.is_nil(ok)
    assert.equal(EBUSY, errno)
    assert.matches("^ibv_close_xrc_domain: Device or resource busy %(still registered", msg)
    assert(d:unreg_xrc_rcv_qp(qpn))
    assert(api.close_xrc_domain(d))
    assert.is_true(d:is_closed())
  end)

  it("fails with EBUSY while an XRC SRQ or send QP made with it is open", function()
    local srq = assert(api.create_xrc_srq("pd", d, "cq", { attr = { max_wr = 8, max_sge = 1 }, srq_context = 1 }))
    assert.same({ srq_type = "xrc", pd = "pd", xrcd = d.xrcd, cq = "cq", attr = { max_wr = 8, max_sge = 1 } },
      k.calls[2].attr)
    local qp = assert(api.create_xrc_send_qp("pd", { qp_type = "xrc", xrc_domain = d, send_cq = "cq",
      recv_cq = "cq", cap = { max_send_wr = 4, max_recv_wr = 4 } }))
    assert.same({ qp_type = "xrc_send", pd = "pd", send_cq = "cq",
                  cap = { max_send_wr = 4, max_recv_wr = 0, max_recv_sge = 0 } }, k.calls[3].attr)
    local _, _, errno = d:close()
    assert.equal(EBUSY, errno)
    srq:close()
    _, _, errno = d:close()
    assert.equal(EBUSY, errno)
    qp:close()
    assert(d:close())
  end)

  it("does not count users the script dropped", function()
    local function make() assert(api.create_xrc_srq("pd", d, "cq", { max_wr = 8 })) end
    make()
    assert(d:close())
  end)

  it("makes the domain unusable once closed", function()
    assert(d:close())
    assert.has_error(function() d:reg_xrc_rcv_qp(1) end, "attempt to use a closed ibverbs.xrc_domain")
    assert.has_error(function() d:close() end, "attempt to use a closed ibverbs.xrc_domain")
    assert.has_error(function() api.create_xrc_srq("pd", d, "cq", {}) end)
  end)

  it("raises when given something else than a domain", function()
    assert.has_error(function() api.close_xrc_domain({}) end,
      "bad argument #1 to 'close_xrc_domain' (ibverbs.xrc_domain expected, got table)")
  end)
end)

describe("the legacy XRC names in the module", function()
  it("are functions with the C argument order and methods of contexts, PDs and domains", function()
    for _, name in ipairs({ "open_xrc_domain", "close_xrc_domain", "create_xrc_srq", "create_xrc_rcv_qp",
                            "modify_xrc_rcv_qp", "query_xrc_rcv_qp", "reg_xrc_rcv_qp", "unreg_xrc_rcv_qp" }) do
      assert.is_function(ibv[name], name)
    end
    assert.is_function(ibv.methods("ibverbs.context").open_xrc_domain)
    assert.is_function(ibv.methods("ibverbs.pd").create_xrc_srq)
  end)
end)
