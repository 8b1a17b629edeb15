-- Device list, context and queries on rxe0.
local ibv = require "ibverbs"
local support = require "support"

describe("on rxe0, the device list", function()
  it("names rxe0 with its GUID and transport", function()
    local found
    for _, d in ipairs(assert(ibv.devices())) do
      if d.name == support.DEVICE then found = d end
    end
    assert.is_table(found)
    assert.matches("^%x%x%x%x:%x%x%x%x:%x%x%x%x:%x%x%x%x$", found.guid)
    assert.equal("ib", found.transport)
    assert.equal("ca", found.node_type)
  end)

  it("opens by name and by index, and reports an unknown name", function()
    local ctx = support.open()
    assert.equal(support.DEVICE, ctx:name())
    local ctx2 = assert(ibv.open(1))
    assert.is_string(ctx2:name())
    local none, msg, errno = ibv.open("no-such-device")
    assert.is_nil(none)
    assert.matches("no RDMA device named 'no%-such%-device'", msg)
    assert.equal(19, errno) -- ENODEV
    assert.is_true(ctx:close())
    assert.is_true(ctx2:close())
  end)
end)

describe("on rxe0, a context", function()
  local ctx
  before_each(function() ctx = support.open() end)
  after_each(function() ctx:close() end)

  it("reports device attributes, filling a given table", function()
    local a = ctx:query_device()
    assert.is_true(a.max_qp > 0)
    assert.is_true(a.max_srq > 0)
    assert.equal(1, a.phys_port_cnt)
    local t = {}
    assert.equal(t, ctx:query_device(t))
    assert.equal(a.max_cqe, t.max_cqe)
    local ex = ctx:query_device_ex()
    assert.equal(a.max_qp, ex.max_qp)
    assert.is_number(ex.device_cap_flags_ex)
  end)

  it("reports port 1 active on Ethernet with a 1024 byte MTU", function()
    local p = ctx:query_port(1)
    assert.equal("active", p.state)
    assert.equal(1024, p.active_mtu)
    assert.equal("ethernet", p.link_layer)
    assert.is_true(p.gid_tbl_len > 1)
  end)

  it("rejects a port out of range and a port the device lacks", function()
    assert.has_error(function() ctx:query_port(0) end)
    local r, msg, errno = ctx:query_port(2)
    assert.is_nil(r)
    assert.matches("^ibv_query_port: ", msg)
    assert.equal(22, errno)
  end)

  it("reads GID 1 as the IPv4-mapped address of the netdev", function()
    assert.equal("::ffff:192.0.2.1", ctx:query_gid(1, 1))
    local e = ctx:query_gid_ex(1, 1)
    assert.equal("::ffff:192.0.2.1", e.gid)
    assert.equal("roce_v2", e.gid_type)
    assert.equal(1, e.gid_index)
    local tbl = ctx:query_gid_table()
    assert.is_true(#tbl >= 2)
    local seen = false
    for _, g in ipairs(tbl) do seen = seen or (g.gid == "::ffff:192.0.2.1" and g.gid_type == "roce_v2") end
    assert.is_true(seen)
  end)

  it("reads the default pkey", function()
    assert.equal(0xffff, ctx:query_pkey(1, 0))
  end)

  it("times out waiting for an async event when none comes", function()
    local ev, msg, errno = ctx:get_async_event(0.05)
    assert.is_nil(ev)
    assert.matches("timed out", msg)
    assert.equal(110, errno)
    assert.is_number(ctx:async_fd())
  end)
end)

describe("on rxe0, closing", function()
  it("a context with a live PD is refused with EBUSY and leaves both usable", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local ok, msg, errno = ctx:close()
    assert.is_nil(ok)
    assert.matches("^ibv_close_device: Device or resource busy %(1 object still uses it%)", msg)
    assert.equal(16, errno)
    assert.equal("active", ctx:query_port(1).state)
    assert.equal(ctx, pd:context())
    assert.is_true(pd:close())
    assert.is_true(ctx:close())
    assert.has_error(function() ctx:query_port(1) end, "query_port: attempt to use a closed ibverbs.context")
    assert.has_error(function() pd:context() end, "context: attempt to use a closed ibverbs.pd")
  end)

  it("a context whose PD the script dropped succeeds after collection", function()
    local ctx = support.open()
    ctx:alloc_pd()
    assert.is_true(ctx:close())
  end)

  it("whole unreachable object graphs are collected in any order", function()
    for _ = 1, 20 do
      local ctx = support.open()
      local pd = ctx:alloc_pd()
      pd:reg_mr(4096)
      pd:reg_mr(ibv.buffer(100), ibv.ACCESS_LOCAL_WRITE)
    end
    collectgarbage()
    collectgarbage()
  end)
end)
