-- XRC domains on rxe0: rxe has no XRC, so ctx:open_xrcd and every call that
-- takes an XRC domain (XRC SRQs and QPs, ibv_open_qp, get_srq_num) must fail
-- cleanly with nil, msg, EOPNOTSUPP after reading their arguments strictly,
-- and leave the context fully usable.  The legacy OFED calls: xrc_domain_spec.lua.
local ibv = require "ibverbs"
local support = require "support"

local EOPNOTSUPP = ibv.errno.EOPNOTSUPP

local function unsupported(call, ok, msg, errno)
  assert.is_nil(ok)
  assert.equal(call .. ": Operation not supported", msg)
  assert.equal(EOPNOTSUPP, errno)
end

describe("on rxe0 (no XRC), the modern XRC calls", function()
  local ctx, pd, cq
  before_each(function()
    ctx = support.open()
    pd = assert(ctx:alloc_pd())
    cq = assert(ctx:create_cq(16))
    for _, cap in ipairs(ctx:query_device().device_caps) do assert.are_not.equal("xrc", cap) end
  end)

  it("ibv_open_xrcd: EOPNOTSUPP for fd -1 and for a file, with every oflags", function()
    unsupported("ibv_open_xrcd", ctx:open_xrcd())
    unsupported("ibv_open_xrcd", ctx:open_xrcd{ fd = -1, oflags = ibv.O_CREAT })
    local f = io.tmpfile()
    unsupported("ibv_open_xrcd", ctx:open_xrcd{ fd = f, oflags = ibv.O_CREAT + ibv.O_EXCL })
    unsupported("ibv_open_xrcd", ctx:open_xrcd{ fd = f, oflags = 0 })
    f:close()
    assert.has_error(function() ctx:open_xrcd{ fd = f } end, "open_xrcd: field 'fd': attempt to use a closed file")
    assert.has_error(function() ctx:open_xrcd{ fd = -2 } end)
    assert.has_error(function() ctx:open_xrcd{ fds = 1 } end)
  end)

  it("ibv_create_srq_ex with srq_type xrc: EOPNOTSUPP", function()
    unsupported("ibv_create_srq_ex", ctx:create_srq_ex{ srq_type = "xrc", pd = pd, cq = cq, max_wr = 8 })
  end)

  it("ibv_create_qp_ex for xrc_send and xrc_recv: EOPNOTSUPP", function()
    unsupported("ibv_create_qp_ex", ctx:create_qp_ex{ qp_type = "xrc_send", pd = pd, send_cq = cq, recv_cq = cq })
    unsupported("ibv_create_qp_ex", ctx:create_qp_ex{ qp_type = "xrc_recv" })
  end)

  it("ibv_open_qp: EOPNOTSUPP", function()
    unsupported("ibv_open_qp", ctx:open_qp{ qp_num = 5, qp_type = "xrc_recv" })
    assert.has_error(function() ctx:open_qp{ qp_num = 5, xrcd = pd } end)
    assert.has_error(function() ctx:open_qp{ qpn = 5 } end)
  end)

  it("ibv_get_srq_num: EOPNOTSUPP", function()
    unsupported("ibv_get_srq_num", assert(pd:create_srq()):get_srq_num())
  end)

  it("leave the context usable: RC traffic, with remote_srqn and xrc_remote_srq_num parsed", function()
    unsupported("ibv_open_xrcd", ctx:open_xrcd())
    unsupported("ibv_create_srq_ex", ctx:create_srq_ex{ srq_type = "xrc", pd = pd, cq = cq })
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mr, length = 64 } },
                            { wr_id = 2, sge = { mr = mr, length = 64 } } })
    assert(env.a:post_send{
      { wr_id = 3, opcode = "send", inline = "one", remote_srqn = 5, send_flags = { "signaled" } },
      { wr_id = 4, opcode = "send", inline = "two", xrc_remote_srq_num = 6, send_flags = { "signaled" } },
    })
    for _, wc in ipairs(support.completions(env.cq, 4)) do assert.equal("success", wc.status) end
    assert.has_error(function() env.a:post_send{ opcode = "send", remote_srqn = 0x1000000 } end)
  end)
end)

describe("on rxe0 (no XRC), ctx:open_xrcd's arguments", function()
  it("raise naming the field, before verbs; a closed context raises", function()
    local ctx = support.open()
    assert.error_matches(function() ctx:open_xrcd{ fd = -1, oflags = "x" } end,
      "open_xrcd: field 'oflags': integer expected, got 'x'", 1, true)
    assert.error_matches(function() ctx:open_xrcd{ fd = "x" } end, "open_xrcd: field 'fd'", 1, true)
    assert.error_matches(function() ctx:open_xrcd(5) end, "open_xrcd", 1, true)
    unsupported("ibv_open_xrcd", ctx:open_xrcd{})
    assert.is_true(ctx:close()) -- the failed calls left nothing on it
    assert.has_error(function() ctx:open_xrcd() end, "open_xrcd: attempt to use a closed ibverbs.context")
  end)
end)
