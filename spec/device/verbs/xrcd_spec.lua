-- XRC on rxe0: rxe has no XRC, so every XRC call, modern or legacy, must fail
-- cleanly with nil, msg, EOPNOTSUPP and leave the context fully usable.  The
-- legacy layer's own logic is specced without a device (spec/host/xrc_legacy_spec.lua).
local ibv = require "ibverbs"
local support = require "support"

local EOPNOTSUPP, EINVAL = ibv.errno.EOPNOTSUPP, ibv.errno.EINVAL

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

describe("on rxe0 (no XRC), the legacy OFED XRC calls", function()
  local ctx, pd, cq
  before_each(function()
    ctx = support.open()
    pd = assert(ctx:alloc_pd())
    cq = assert(ctx:create_cq(16))
  end)

  it("ibv_open_xrc_domain: EOPNOTSUPP for fd -1 and for a file", function()
    unsupported("ibv_open_xrc_domain", ctx:open_xrc_domain(-1, ibv.O_CREAT))
    unsupported("ibv_open_xrc_domain", ibv.open_xrc_domain(ctx, -1, ibv.O_CREAT))
    local f = io.tmpfile()
    unsupported("ibv_open_xrc_domain", ctx:open_xrc_domain(f, ibv.O_CREAT))
    unsupported("ibv_open_xrc_domain", ctx:open_xrc_domain(f, ibv.O_CREAT + ibv.O_EXCL))
    f:close()
  end)

  it("ibv_open_xrc_domain: its argument rules come first (EINVAL, no verbs call)", function()
    local d, msg, errno = ctx:open_xrc_domain(-1, 0)
    assert.is_nil(d)
    assert.equal(EINVAL, errno)
    assert.matches("only valid oflag is O_CREAT", msg, 1, true)
    assert.has_error(function() ctx:open_xrc_domain("x", ibv.O_CREAT) end)
  end)

  it("the calls that take a domain raise without one", function()
    assert.has_error(function() pd:create_xrc_srq(nil, cq, { attr = { max_wr = 8 } }) end)
    assert.has_error(function() ibv.create_xrc_rcv_qp{ qp_type = "rc" } end)
    assert.has_error(function() ibv.reg_xrc_rcv_qp(nil, 5) end)
    assert.has_error(function() pd:create_qp{ qp_type = "xrc", send_cq = cq, recv_cq = cq } end,
      "init_attr: field 'xrc_domain' is required for an XRC QP")
  end)

  it("leave pd:create_qp working for the other QP types", function()
    unsupported("ibv_open_xrc_domain", ctx:open_xrc_domain(-1, ibv.O_CREAT))
    local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq })
    assert.equal("rc", qp.qp_type)
    assert.has_error(function() pd:create_qp{ qp_type = "nope", send_cq = cq, recv_cq = cq } end)
  end)
end)
