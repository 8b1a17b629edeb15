-- The verbs objects and calls beyond the basic ones, on rxe0: what rxe does
-- (iova MRs, cq_ex polling through poll_ex, data ordering, atomic_write as a
-- builder) is run with data; what it lacks (device memory, null and dma-buf
-- MRs, ODP advice, raw packet QPs, flows, counters, CQ moderation, ECE, rate
-- limits, tag matching, TSO, cq_ex timestamps) must fail cleanly with nil,
-- msg, EOPNOTSUPP and leave the context usable.
local ibv = require "ibverbs"
local support = require "support"

local ACCESS = { "local_write", "remote_write", "remote_read", "remote_atomic" }

local unsupported, still_works = support.unsupported, support.still_works

describe("on rxe0, memory regions", function()
  local env
  before_each(function() env = support.pair() end)

  it("reg_mr_iova: an RDMA write to the remote MR's iova lands in its memory", function()
    local IOVA = 0x100000000
    local src = assert(env.pd:reg_mr(4096, ACCESS))
    local dst = assert(env.pd:reg_mr_iova(IOVA, 4096, ACCESS))
    src:write(0, "written through the iova")
    assert(env.a:post_send{ wr_id = 1, opcode = "rdma_write", sge = { mr = src, length = 24 },
                            remote_addr = IOVA + 64, rkey = dst.rkey, send_flags = { "signaled" } })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("written through the iova", dst:read(64, 24))
  end)

  it("reg_mr_iova over a buffer: a local SGE names the iova with the MR's lkey", function()
    local IOVA = 0x7000
    local buf = ibv.buffer(8192)
    local dst = assert(env.pd:reg_mr(4096, ACCESS))
    local src = assert(env.pd:reg_mr_iova(IOVA, buf, ACCESS, 4096, 4096))
    src:write(10, "from the iova side")
    assert(env.a:post_send{ wr_id = 1, opcode = "rdma_write",
                            sge = { addr = IOVA + 10, length = 18, lkey = src.lkey },
                            remote_addr = dst.addr, rkey = dst.rkey, send_flags = { "signaled" } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.equal("from the iova side", dst:read(0, 18))
    assert.equal("from the iova side", buf:read(4096 + 10, 18))
    assert.is_true(src:close())
  end)

  it("reg_mr_iova: the MR keeps its PD and buffer alive, and closes once", function()
    local pd = assert(env.ctx:alloc_pd())
    local buf = ibv.buffer(4096)
    local mr = assert(pd:reg_mr_iova(0x2000, buf, ACCESS))
    local ok, _, errno = pd:close()
    assert.same({ nil, ibv.errno.EBUSY }, { ok, errno })
    assert.is_true(mr:close())
    assert.is_true(mr:close())
    assert.is_true(pd:close())
    assert.has_error(function() pd:reg_mr_iova(0, 64) end, "reg_mr_iova: attempt to use a closed ibverbs.pd")
  end)

  it("alloc_null_mr, reg_dmabuf_mr, advise_mr: EOPNOTSUPP", function()
    local mr = assert(env.pd:reg_mr(4096))
    unsupported("ibv_alloc_null_mr", env.pd:alloc_null_mr())
    unsupported("ibv_reg_dmabuf_mr", env.pd:reg_dmabuf_mr{ fd = -1, length = 4096 })
    unsupported("ibv_advise_mr", env.pd:advise_mr{ advice = "prefetch_write", flags = { "flush" },
                                                    sg_list = { { mr = mr }, { mr = mr, offset = 8 } } })
    assert.has_error(function() env.pd:advise_mr{ advice = "prefetch" } end)
    assert.has_error(function() env.pd:reg_dmabuf_mr{ length = 1 } end)
    still_works(env)
  end)

  it("device memory: alloc_dm EOPNOTSUPP", function()
    unsupported("ibv_alloc_dm", env.ctx:alloc_dm(4096))
    unsupported("ibv_alloc_dm", env.ctx:alloc_dm{ length = 4096, log_align_req = 6 })
    assert.has_error(function() env.ctx:alloc_dm(0) end)
    assert.has_error(function() env.ctx:alloc_dm{ size = 1 } end)
    still_works(env)
  end)
end)

-- (Thread and parent domains: td_spec.lua; WQs and RSS tables: wq_spec.lua.)
describe("on rxe0, queues", function()
  local env
  before_each(function() env = support.pair() end)

  it("raw packet QPs (what RSS, flows and TSO need): EOPNOTSUPP", function()
    unsupported("ibv_create_qp_ex", env.ctx:create_qp_ex{ qp_type = "raw_packet", pd = env.pd,
                                                          send_cq = env.cq, recv_cq = env.cq })
    unsupported("ibv_create_qp_ex", env.ctx:create_qp_ex{ qp_type = "ud", pd = env.pd, send_cq = env.cq,
                                                          recv_cq = env.cq, send_ops_flags = { "send", "tso" } })
  end)

  it("modify_cq, query_ece, set_ece, modify_rate_limit: EOPNOTSUPP", function()
    unsupported("ibv_modify_cq", env.cq:modify{ cq_count = 16, cq_period = 10 })
    unsupported("ibv_query_ece", env.a:query_ece())
    unsupported("ibv_set_ece", env.a:set_ece{ vendor_id = 0x15b3, options = 1 })
    unsupported("ibv_modify_qp_rate_limit", env.a:modify_rate_limit{ rate_limit = 1000, typical_pkt_sz = 1024 })
    still_works(env)
  end)

  it("query_data_in_order: rxe does not promise in-order data (0)", function()
    for _, op in ipairs{ "rdma_write", "send", "rdma_read" } do
      assert.equal(0, env.a:query_data_in_order(op))
    end
    assert.has_error(function() env.a:query_data_in_order("nope") end)
  end)

  it("tag matching: no tm SRQ, and post_srq_ops on a basic SRQ is EOPNOTSUPP with the op index", function()
    unsupported("ibv_create_srq_ex", env.ctx:create_srq_ex{ srq_type = "tm", pd = env.pd, cq = env.cq,
                                                            tm_cap = { max_num_tags = 4, max_ops = 4 } })
    local srq = assert(env.pd:create_srq())
    local mr = assert(env.pd:reg_mr(4096))
    local index = unsupported("ibv_post_srq_ops", srq:post_srq_ops{
      { opcode = "tag_add", wr_id = 1, recv_wr_id = 2, tag = 0x1234, sge = { mr = mr }, flags = { "signaled" } },
      { opcode = "tag_sync", unexpected_cnt = 0 } })
    assert.equal(1, index)
    assert.has_error(function() srq:post_srq_ops{ opcode = "tag_move" } end)
    still_works(env)
  end)
end)

describe("on rxe0, steering and counters", function()
  local env
  before_each(function() env = support.pair() end)

  it("create_flow with every spec type: EOPNOTSUPP from verbs (the specs parse)", function()
    unsupported("ibv_create_flow", env.a:create_flow{ type = "normal", port = 1, priority = 1, flags = { "dont_trap" },
      specs = {
        { type = "eth", val = { dst_mac = "00:11:22:33:44:55", ether_type = 0x0800, vlan_tag = 5 } },
        { type = "ipv4", val = { src_ip = "192.0.2.1", dst_ip = 0xc0000202 }, mask = { dst_ip = "255.255.255.0" } },
        { type = "ipv4_ext", val = { proto = 17, tos = 1, ttl = 64, flags = 2 } },
        { type = "ipv6", val = { dst_ip = "fe80::1", flow_label = 7, next_hdr = 6, traffic_class = 0, hop_limit = 1 } },
        { type = "tcp", val = { dst_port = 80, src_port = 1024 } },
        { type = "udp", val = { dst_port = 4791 } },
        { type = "vxlan_tunnel", val = { tunnel_id = 42 } },
        { type = "gre", val = { protocol = 0x6558, key = 1, c_ks_res0_ver = 0 } },
        { type = "mpls", val = { label = 16 } },
        { type = "esp", val = { spi = 1, seq = 2 } },
        { type = "eth", inner = true, val = { src_mac = "aa:bb:cc:dd:ee:ff" } },
        { type = "action_tag", tag_id = 3 },
        { type = "action_drop" },
      } })
  end)

  it("create_flow raises on a bad spec, naming it", function()
    local qp = env.a
    assert.has_error(function() qp:create_flow{ specs = { { type = "eth", val = { dst_mac = "zz" } } } } end)
    assert.has_error(function() qp:create_flow{ specs = { { type = "ipv4", val = { port = 1 } } } } end)
    assert.has_error(function() qp:create_flow{ specs = { { val = {} } } } end)
    assert.has_error(function() qp:create_flow{ specs = { { type = "tcp", val = { dst_port = 70000 } } } } end)
    assert.has_error(function() qp:create_flow{ specs = { { type = "action_count" } } } end)
    assert.has_error(function() qp:create_flow{ specs = { { type = "action_count", counters = env.pd } } } end)
  end)

  it("create_counters: EOPNOTSUPP", function()
    unsupported("ibv_create_counters", env.ctx:create_counters())
    still_works(env)
  end)
end)

describe("on rxe0, the qp_ex builders and cq_ex fields", function()
  it("atomic_write through wr_post: an 8-byte inline string, completed with loc_qp_op_err (rxe 6.1)", function()
    local env = support.pair{ create_ex = { send_ops_flags = { "send", "rdma_write", "atomic_write" } } }
    local mr = assert(env.pd:reg_mr(4096, ACCESS))
    assert.has_error(function()
      env.a:wr_post{ opcode = "atomic_write", inline = "1234", remote_addr = mr.addr, rkey = mr.rkey }
    end, "bad argument #1 to 'wr_post' (WR 1: opcode 'atomic_write' takes its 8 bytes as an 8-byte 'inline' string)")
    assert.has_error(function()
      env.a:wr_post{ opcode = "atomic_write", sge = { mr = mr, length = 8 }, remote_addr = mr.addr, rkey = mr.rkey }
    end)
    -- Linux 6.1's rxe has no atomic write: the WR is built and posted, and the
    -- device completes it with loc_qp_op_err; the target memory is untouched.
    assert(env.a:wr_post{ wr_id = 5, opcode = "atomic_write", inline = "ABCDEFGH",
                          remote_addr = mr.addr, rkey = mr.rkey, send_flags = { "signaled" } })
    local wc = support.completions(env.cq, 1, 5)[1]
    assert.same({ 5, "loc_qp_op_err" }, { wc.wr_id, wc.status })
    assert.equal(("\0"):rep(8), mr:read(0, 8))
  end)

  it("atomic_write through post_send: the same clean loc_qp_op_err completion", function()
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(4096, ACCESS))
    mr:write(100, "12345678")
    assert(env.a:post_send{ wr_id = 6, opcode = "atomic_write", sge = { mr = mr, offset = 100, length = 8 },
                            remote_addr = mr.addr, rkey = mr.rkey, send_flags = { "signaled" } })
    local wc = support.completions(env.cq, 1, 5)[1]
    assert.same({ 6, "loc_qp_op_err" }, { wc.wr_id, wc.status })
    assert.equal(("\0"):rep(8), mr:read(0, 8))
  end)

  it("tso and atomic_write are refused by wr_post on a QP without them in send_ops_flags", function()
    local env = support.pair{ create_ex = { send_ops_flags = { "send" } } }
    assert.has_error(function() env.a:wr_post{ opcode = "tso", hdr = "h", mss = 64, inline = "x" } end,
      "bad argument #1 to 'wr_post' (WR 1: opcode 'tso' is not in the QP's send_ops_flags)")
    assert.has_error(function() env.a:post_send{ opcode = "tso", inline = "x" } end)
  end)

  it("poll_ex returns the completions of a cq_ex with their fields", function()
    local env = support.pair{ cq_attr = { cqe = 64, wc_flags = { "byte_len", "qp_num", "src_qp" } } }
    local mr = assert(env.pd:reg_mr(4096, ACCESS))
    assert(env.b:post_recv{ wr_id = 3, sge = { mr = mr, length = 64 } })
    assert(env.a:post_send{ wr_id = 4, inline = "poll_ex", send_flags = { "signaled" } })
    local got = {}
    for _ = 1, 200 do
      for _, wc in ipairs(env.cq:poll_ex(4)) do got[wc.wr_id] = wc end
      if got[3] and got[4] then break end
      require("socket").sleep(0.01)
    end
    assert.equal("success", got[3].status)
    assert.equal(7, got[3].byte_len)
    assert.equal(env.b.qp_num, got[3].qp_num)
    assert.equal("send", got[4].opcode)
    assert.is_nil(got[3].completion_ts)
    assert.has_error(function() assert(env.ctx:create_cq(4)):poll_ex() end)
  end)

  it("cq_ex with timestamps, cvlan or flow_tag: EOPNOTSUPP", function()
    local ctx = support.open()
    unsupported("ibv_create_cq_ex", ctx:create_cq{ cqe = 4, wc_flags = { "byte_len", "completion_timestamp" } })
    unsupported("ibv_create_cq_ex", ctx:create_cq{ cqe = 4, wc_flags = { "cvlan", "flow_tag", "tm_info" } })
    unsupported("ibv_create_cq_ex", ctx:create_cq{ cqe = 4, wc_flags = { "completion_timestamp_wallclock" } })
  end)
end)
