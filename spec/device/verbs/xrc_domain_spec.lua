-- The legacy OFED 1.x XRC calls on rxe0 (ibv_open_xrc_domain, create_xrc_srq,
-- the XRC receive QPs), made over the xrcd calls: rxe has no XRC, so they must
-- fail cleanly with nil, msg, EOPNOTSUPP (or raise without a domain) and leave
-- the context usable.  The legacy layer's own logic is specced without a
-- device (spec/host/library/xrc_legacy_spec.lua).
local ibv = require "ibverbs"
local support = require "support"

local EOPNOTSUPP, EINVAL = ibv.errno.EOPNOTSUPP, ibv.errno.EINVAL

local function unsupported(call, ok, msg, errno)
  assert.is_nil(ok)
  assert.equal(call .. ": Operation not supported", msg)
  assert.equal(EOPNOTSUPP, errno)
end

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
