-- Queue pairs on rxe0: creation (pd:create_qp and ctx:create_qp_ex, with and
-- without attributes), query, modify, and posting bad flows.
local ibv = require "ibverbs"
local support = require "support"

describe("on rxe0, creating a qp", function()
  local ctx, pd, cq
  before_each(function()
    ctx = support.open()
    pd = assert(ctx:alloc_pd())
    cq = assert(ctx:create_cq(64))
  end)

  for _, t in ipairs{ "rc", "uc", "ud" } do
    it(t .. " with only the required attributes, in the reset state", function()
      local qp = assert(pd:create_qp{ qp_type = t, send_cq = cq, recv_cq = cq })
      assert.equal(t, qp.qp_type)
      assert.equal("reset", qp.state)
      assert.is_true(qp.qp_num > 1)
      assert.is_false(qp.extended)
      assert.is_true(qp.cap.max_send_wr >= 1)
      assert.is_true(qp:close())
    end)

    it(t .. " with every capability given, granted at least as asked", function()
      local qp = assert(pd:create_qp{ qp_type = t, send_cq = cq, recv_cq = cq, sq_sig_all = true,
        cap = { max_send_wr = 32, max_recv_wr = 48, max_send_sge = 3, max_recv_sge = 2, max_inline_data = 32 } })
      local cap = qp.cap
      assert.is_true(cap.max_send_wr >= 32)
      assert.is_true(cap.max_recv_wr >= 48)
      assert.is_true(cap.max_send_sge >= 3)
      assert.is_true(cap.max_recv_sge >= 2)
      assert.is_true(cap.max_inline_data >= 32)
      local q = qp:query()
      assert.is_true(q.sq_sig_all)
      assert.is_true(q.cap.max_recv_wr >= 48)
    end)

    it(t .. " with ctx:create_qp_ex, with and without send_ops_flags", function()
      local qp = assert(ctx:create_qp_ex{ pd = pd, qp_type = t, send_cq = cq, recv_cq = cq })
      assert.equal(t, qp.qp_type)
      assert.is_false(qp.extended)
      local ops = t == "rc" and { "send", "rdma_write", "rdma_read", "atomic_fetch_and_add" } or { "send" }
      local qpx = assert(ctx:create_qp_ex{ pd = pd, qp_type = t, send_cq = cq, recv_cq = cq,
        cap = { max_send_wr = 8, max_recv_wr = 8 }, send_ops_flags = ops })
      assert.is_true(qpx.extended)
      assert.is_true(qpx.cap.max_send_wr >= 8)
    end)
  end

  it("raw_packet is refused by rxe with a clean error", function()
    local qp, msg, errno = pd:create_qp{ qp_type = "raw_packet", send_cq = cq, recv_cq = cq }
    assert.is_nil(qp)
    assert.matches("^ibv_create_qp: ", msg)
    assert.is_number(errno)
  end)

  it("past the device's limits fails with EINVAL", function()
    local dev = ctx:query_device()
    for _, cap in ipairs{ { max_send_wr = dev.max_qp_wr + 1 }, { max_recv_wr = dev.max_qp_wr + 1 },
                          { max_send_sge = dev.max_sge + 1 }, { max_recv_sge = dev.max_sge + 1 } } do
      local qp, msg, errno = pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, cap = cap }
      assert.is_nil(qp)
      assert.matches("^ibv_create_qp: ", msg)
      assert.equal(22, errno)
    end
  end)

  it("raises for a bad qp_type, unknown fields, wrong object types and negative caps", function()
    assert.has_error(function() pd:create_qp{ qp_type = "rcc", send_cq = cq, recv_cq = cq } end)
    assert.has_error(function() pd:create_qp{ send_cq = cq, recv_cq = cq } end,
      "create_qp: init_attr: field 'qp_type' is required")
    assert.has_error(function() pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, sendcq = cq } end,
      "create_qp: init_attr: unknown field 'sendcq'")
    assert.has_error(function() pd:create_qp{ qp_type = "rc", send_cq = pd, recv_cq = cq } end)
    local function rc(cap) return pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, cap = cap } end
    assert.has_error(function() rc{ max_send_wr = -1 } end)
    local ok, err = pcall(rc, { max_sendwr = 1 }) -- named create_qp, or rc (LuaJIT keeps tail calls)
    assert.is_false(ok)
    assert.matches(": cap: unknown field 'max_sendwr'", err, 1, true)
    assert.has_error(function() ctx:create_qp_ex{ pd = pd, qp_type = "rc", send_cq = cq, recv_cq = cq,
      send_ops_flags = { "sendd" } } end)
  end)

  it("keeps its pd and cqs busy until it is closed", function()
    local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq })
    assert.equal(16, select(3, pd:close()))
    assert.equal(16, select(3, cq:close()))
    assert.is_true(qp:close())
    assert.is_true(cq:close())
    assert.is_true(pd:close())
  end)
end)

describe("on rxe0, qp:query and qp:modify", function()
  it("show an RC pair's connection attributes after connect", function()
    local env = support.pair()
    local q = env.a:query()
    assert.equal("rts", q.qp_state)
    assert.equal("rts", env.a.state)
    assert.equal(env.b.qp_num, q.dest_qp_num)
    assert.equal(1024, q.path_mtu)
    assert.equal(1, q.port_num)
    assert.equal(14, q.timeout)
    assert.equal(7, q.retry_cnt)
    assert.equal(ibv.ACCESS_LOCAL_WRITE + ibv.ACCESS_REMOTE_WRITE + ibv.ACCESS_REMOTE_READ
      + ibv.ACCESS_REMOTE_ATOMIC, q.qp_access_flags)
    assert.is_true(q.ah_attr.is_global)
    assert.equal(env.gid, q.ah_attr.grh.dgid)
    assert.equal(support.GID_INDEX, q.ah_attr.grh.sgid_index)
    local t = {}
    assert.equal(t, env.b:query(t))
    assert.equal(env.a.qp_num, t.dest_qp_num)
  end)

  it("show a UC pair in rts and a UD qp's qkey, which modify changes", function()
    local uc = support.pair{ qp_type = "uc", access = { "local_write", "remote_write" } }
    assert.equal("rts", uc.a:query().qp_state)
    local ud = support.pair{ qp_type = "ud" }
    assert.equal(0x11111111, ud.a:query().qkey)
    assert(ud.a:modify{ qkey = 0x1234 })
    assert.equal(0x1234, ud.a:query().qkey)
  end)

  it("takes a prepared ibv.qp_attr: the same transitions, errors and hints as its table", function()
    local env = support.pair()
    local qp = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
    local INIT = ibv.qp_attr{ qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 0 }
    local ERR, RESET = ibv.qp_attr{ qp_state = "err" }, ibv.qp_attr{ qp_state = "reset" }
    for _ = 1, 3 do
      assert(qp:modify(INIT)); assert.equal("init", qp.state)
      assert(qp:modify(ERR)); assert.equal("err", qp.state)
      assert(qp:modify(RESET)); assert.equal("reset", qp.state)
    end
    local ok, msg, errno = qp:modify(ibv.qp_attr{ qp_state = "rts" })
    assert.is_nil(ok)
    assert.matches("^ibv_modify_qp: .*'reset'.*'rts'", msg)
    assert.equal(22, errno)
    assert.error_matches(function() ibv.qp_attr{} end, "no attribute given", 1, true)
    assert.error_matches(function() ibv.qp_attr{ qp_sate = "init" } end, "unknown field 'qp_sate'", 1, true)
    assert.error_matches(function() qp:modify(ibv.wc_array(1)) end,
      "attr table expected, got ", 1, true)
    qp:close()
    assert.error_matches(function() qp:modify(INIT) end, "closed", 1, true)
  end)

  it("refuses an invalid transition with EINVAL, and raises on bad attributes", function()
    local env = support.pair()
    local qp = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
    local ok, msg, errno = qp:modify{ qp_state = "rts" }
    assert.is_nil(ok)
    assert.matches("^ibv_modify_qp: ", msg)
    assert.equal(22, errno)
    assert.has_error(function() qp:modify{} end)
    assert.has_error(function() qp:modify{ qp_state = "ready" } end)
    assert.has_error(function() qp:modify{ path_mtu = 1000 } end)
    assert.has_error(function() qp:modify{ port_num = 0 } end)
    assert.has_error(function() qp:modify{ qkey = -1 } end)
    assert.has_error(function() qp:modify{ qp_sate = "init" } end, "modify: attr: unknown field 'qp_sate'")
    assert.has_error(function() qp:to_init{ prot_num = 1 } end)
    assert.equal("reset", qp.state)
  end)
end)

describe("on rxe0, posting bad flows", function()
  local env, mr
  before_each(function()
    env = support.pair{ qp_type = "ud", cap = { max_send_wr = 8, max_recv_wr = 8, max_send_sge = 1, max_recv_sge = 1 } }
    mr = assert(env.pd:reg_mr(4096))
  end)

  it("post_recv on a qp in the reset state fails with EINVAL", function()
    assert(env.b:modify{ qp_state = "reset" })
    local ok, msg, errno = env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 64 } }
    assert.is_nil(ok)
    assert.matches("^ibv_post_recv: ", msg)
    assert.equal(22, errno)
  end)

  it("post_send on a qp in the reset state fails with EINVAL", function()
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
    assert(env.a:modify{ qp_state = "reset" })
    local ok, msg, errno, bad = env.a:post_send{ wr_id = 1, sge = { mr = mr, length = 8 }, ah = ah,
      remote_qpn = env.b.qp_num, remote_qkey = 0x11111111 }
    assert.is_nil(ok)
    assert.matches("^ibv_post_send: ", msg)
    assert.equal(22, errno)
    assert.is_true(bad == nil or bad == 1) -- rxe does not set bad_wr here
  end)

  it("a full receive queue refuses one more WR with ENOMEM", function()
    local cap = env.b.cap.max_recv_wr -- rxe may round the queue up: fill until it refuses
    local posted, ok, msg, errno, bad = 0, true, nil, nil, nil
    while ok and posted <= 4 * cap + 64 do
      ok, msg, errno, bad = env.b:post_recv{ wr_id = posted, sge = { mr = mr, length = 64 } }
      if ok then posted = posted + 1 end
    end
    assert.is_true(posted >= cap)
    assert.is_nil(ok)
    assert.matches("^ibv_post_recv: ", msg)
    assert.equal(12, errno)
    assert.equal(1, bad)
  end)

  it("a receive with more SGEs than the qp takes fails with EINVAL", function()
    local n = env.b.cap.max_recv_sge + 1
    local sgl = {}
    for i = 1, n do sgl[i] = { mr = mr, offset = (i - 1) * 64, length = 64 } end
    local ok, msg, errno = env.b:post_recv{ wr_id = 1, sg_list = sgl }
    assert.is_nil(ok)
    assert.matches("^ibv_post_recv: ", msg)
    assert.equal(22, errno)
  end)

  it("raises for a WR table with unknown fields, bad opcodes and SGEs outside their MR", function()
    assert.has_error(function() env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 4097 } } end)
    assert.has_error(function() env.b:post_recv{ wr_id = 1, sge = { mr = mr, offset = -1 } } end)
    assert.has_error(function() env.b:post_recv{ wr_id = 1, sge = { mr = mr, offset = 4097 } } end)
    assert.has_error(function() env.b:post_recv{ wrid = 1 } end, "post_recv: WR 1: recv wr: unknown field 'wrid'")
    assert.has_error(function() env.a:post_send{ opcode = "snd" } end)
    assert.has_error(function() env.a:post_send{ send_flags = { "signalled" } } end)
    assert.has_error(function() env.a:post_send{ wr_id = -1.5 } end)
    assert.has_error(function() env.b:post_recv(42) end)
    assert.has_error(function() env.b:post_recv{ wr_id = 1, sge = { mr = mr, addr = 1 } } end)
  end)
end)
