-- Protection domains on rxe0: ctx:alloc_pd and its results, the PD's own
-- methods, a failing call of the PD (nil, msg, errno), the clean errors of bad
-- input, and close: twice harmless, EBUSY while children use it (an MW's:
-- mr_mw_spec), and every method refused once closed.  (What is made on a PD:
-- mr_mw_spec, qp_spec, srq_spec, ah_spec; a parent domain: td_spec.)
local ibv = require "ibverbs"
local support = require "support"

local EBUSY, EINVAL = ibv.errno.EBUSY, ibv.errno.EINVAL

describe("on rxe0, a pd", function()
  it("is allocated many times, closed twice harmlessly, and refuses methods once closed", function()
    local ctx = support.open()
    local pds = {}
    for i = 1, 8 do pds[i] = assert(ctx:alloc_pd()) end
    assert.is_number(pds[1].handle)
    for i = 1, 8 do assert.is_true(pds[i]:close()) end
    assert.is_true(pds[1]:close())
    assert.has_error(function() pds[1]:reg_mr(64) end, "reg_mr: attempt to use a closed ibverbs.pd")
    assert.has_error(function() pds[1]:alloc_mw(1) end, "alloc_mw: attempt to use a closed ibverbs.pd")
  end)

  it("with an MR is refused with EBUSY, and both stay usable", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local mr = assert(pd:reg_mr(64))
    local ok, msg, errno = pd:close()
    assert.is_nil(ok)
    assert.matches("^ibv_dealloc_pd: Device or resource busy %(1 object still uses it%)", msg)
    assert.equal(16, errno)
    assert.equal(3, mr:write(0, "abc"))
    assert.is_truthy(pd:reg_mr(8))
    assert.is_true(mr:close())
    collectgarbage()
    assert.is_true(pd:close())
  end)
end)

describe("on rxe0, ctx:alloc_pd", function()
  it("gives an ibverbs.pd with a kernel handle, distinct per PD, that knows its context", function()
    local ctx = support.open()
    local a, b = assert(ctx:alloc_pd()), assert(ctx:alloc_pd())
    assert.equal("ibverbs.pd", getmetatable(a).__name)
    assert.equal(0, a.handle % 1)
    assert.is_true(a.handle >= 0)
    assert.are_not.equal(a.handle, b.handle)
    assert.equal(ctx, a:context())
    assert.is_false(a:is_closed())
    assert.matches("^ibverbs.pd", tostring(a))
    assert.is_nil(a.no_such_field)
    assert.is_true(a:close()); assert.is_true(b:close())
    assert.is_true(a:is_closed())
  end)

  it("raises on a closed context or a receiver that is not a context, naming it", function()
    local ctx = support.open()
    assert.error_matches(function() ctx.alloc_pd(nil) end,
      "bad argument #1 to 'alloc_pd' (ibverbs.context expected, got nil)", 1, true)
    local pd = assert(ctx:alloc_pd())
    assert.error_matches(function() ctx.alloc_pd(pd) end,
      "bad argument #1 to 'alloc_pd' (ibverbs.context expected, got ", 1, true)
    assert.is_true(pd:close())
    assert.is_true(ctx:close())
    assert.has_error(function() ctx:alloc_pd() end, "alloc_pd: attempt to use a closed ibverbs.context")
  end)

  it("keeps its context open: the context's close is EBUSY while the PD lives", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local ok, msg, errno = ctx:close()
    assert.is_nil(ok)
    assert.matches("^ibv_close_device: Device or resource busy %(1 object still uses it%)", msg)
    assert.equal(EBUSY, errno)
    assert.equal(ctx, pd:context())
    assert.is_true(pd:close())
    assert.is_true(ctx:close())
  end)
end)

describe("on rxe0, a pd's calls", function()
  it("fail with nil, msg, errno where verbs refuses: reg_mr remote write without local write (EINVAL)", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local mr, msg, errno = pd:reg_mr(4096, { "remote_write" })
    assert.is_nil(mr)
    assert.equal("ibv_reg_mr: Invalid argument ('remote_write' and 'remote_atomic' need 'local_write' too)", msg)
    assert.equal(EINVAL, errno)
    assert.is_true(pd:close()) -- the failed call left no child behind
  end)

  it("raise on bad input, naming the argument or field", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    assert.error_matches(function() pd:reg_mr("big") end, "bad argument #1 to 'reg_mr'", 1, true)
    assert.error_matches(function() pd:reg_mr(64, { "no_such_access" }) end, "no_such_access", 1, true)
    assert.error_matches(function() pd:alloc_mw(3) end, "alloc_mw: bad argument #2: unknown value 3", 1, true)
    assert.error_matches(function() pd:create_qp{ qp_type = "rc", bogus = 1 } end,
      "create_qp: init_attr: unknown field 'bogus'", 1, true)
    assert.error_matches(function() pd:create_srq{ max_wr = -1 } end, "field 'max_wr'", 1, true)
    assert.error_matches(function() pd:create_ah{ sl = 16 } end, "create_ah: field 'sl': 16 out of range [0, 15]",
      1, true)
    assert.is_true(pd:close())
  end)

  it("close with an MR, a QP, an SRQ and an AH is EBUSY and counts them; each closed child lets it go", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local cq = assert(ctx:create_cq(4))
    local kids = {
      assert(pd:reg_mr(64)),
      assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq }),
      assert(pd:create_srq{ max_wr = 4 }),
      assert(pd:create_ah{ port_num = 1, grh = { dgid = ctx:query_gid(1, support.GID_INDEX),
                                                sgid_index = support.GID_INDEX } }),
    }
    for n = #kids, 1, -1 do
      local ok, msg, errno = pd:close()
      assert.is_nil(ok)
      local what = n == 1 and "1 object still uses it" or n .. " objects still use it"
      assert.equal("ibv_dealloc_pd: Device or resource busy (" .. what .. ")", msg)
      assert.equal(EBUSY, errno)
      assert.is_false(pd:is_closed())
      assert.is_true(kids[n]:close())
    end
    assert.is_true(pd:close())
    assert.is_true(cq:close())
  end)

  it("closed, every method and field raises 'attempt to use a closed ibverbs.pd'", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    assert.is_true(pd:close())
    local checked = 0
    for name, m in pairs(ibv.methods("ibverbs.pd")) do
      if name ~= "close" and name ~= "is_closed" then
        assert.is_function(m)
        local call = assert(load("local pd = ... pd:" .. name .. "()")) -- not a tail call: LuaJIT names it
        assert.has_error(function() call(pd) end, name .. ": attempt to use a closed ibverbs.pd")
        checked = checked + 1
      end
    end
    assert.is_true(checked >= 12, "only " .. checked .. " methods")
    assert.error_matches(function() return pd.handle end, "attempt to use a closed ibverbs.pd", 1, true)
    assert.matches("closed", tostring(pd))
  end)
end)
