-- qp:wr_post: the ibv_wr_* posting API on QPs made by ctx:create_qp_ex with
-- send_ops_flags, over loopback RC, UC and UD pairs on rxe0.
local ibv = require "ibverbs"
local support = require "support"

local ALL_OPS = { "send", "send_with_imm", "rdma_write", "rdma_write_with_imm", "rdma_read",
                  "atomic_cmp_and_swp", "atomic_fetch_and_add", "bind_mw", "local_inv", "send_with_inv" }
local ACCESS = { "local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind" }

local function ex_pair(qp_type, ops)
  return support.pair{ qp_type = qp_type, create_ex = { send_ops_flags = ops or ALL_OPS },
                       access = qp_type == "uc" and { "local_write", "remote_write" } or nil }
end

local function by_opcode(wcs)
  local t = {}
  for _, wc in ipairs(wcs) do t[wc.opcode] = wc end
  return t
end

local function all_success(wcs)
  for _, wc in ipairs(wcs) do assert.equal("success", wc.status) end
  return wcs
end

describe("on rxe0, wr_post on an RC pair", function()
  local env, mra, mrb
  before_each(function()
    env = ex_pair("rc")
    mra = assert(env.pd:reg_mr(4096, ACCESS))
    mrb = assert(env.pd:reg_mr(4096, ACCESS))
  end)

  it("is available on a QP made with send_ops_flags, and reports it extended", function()
    assert.is_true(env.a.extended)
    assert.is_function(env.a.wr_post)
  end)

  it("sends with ibv_wr_send + ibv_wr_set_sge and with inline data", function()
    mra:write(0, "through wr_send")
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mrb, length = 64 } },
                            { wr_id = 2, sge = { mr = mrb, offset = 64, length = 64 } } })
    assert(env.a:wr_post{
      { wr_id = 10, opcode = "send", sge = { mr = mra, length = 15 }, send_flags = { "signaled" } },
      { wr_id = 11, opcode = "send", inline = "inline!", send_flags = { "signaled" } },
    })
    local wcs = all_success(support.completions(env.cq, 4))
    local lens = {}
    for _, wc in ipairs(wcs) do lens[wc.wr_id] = wc.byte_len end
    assert.equal(15, lens[1])
    assert.equal(7, lens[2])
    assert.equal("through wr_send", mrb:read(0, 15))
    assert.equal("inline!", mrb:read(64, 7))
  end)

  it("carries immediate data with send_imm and rdma_write_imm", function()
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mrb, length = 64 } }, { wr_id = 2, sge = { mr = mrb } } })
    mra:write(0, "12345678")
    assert(env.a:wr_post{
      { wr_id = 3, opcode = "send_with_imm", imm_data = 0x01020304, inline = "imm", send_flags = { "signaled" } },
      { wr_id = 4, opcode = "rdma_write_with_imm", imm_data = 77, sge = { mr = mra, length = 8 },
        remote_addr = mrb.addr + 512, rkey = mrb.rkey, send_flags = { "signaled" } },
    })
    local imms = {}
    for _, wc in ipairs(all_success(support.completions(env.cq, 4))) do
      if wc.imm_data then imms[wc.opcode] = wc.imm_data end
    end
    assert.equal(0x01020304, imms.recv)
    assert.equal(77, imms.recv_rdma_with_imm)
    assert.equal("12345678", mrb:read(512, 8))
  end)

  it("writes and reads remote memory, zero-length operations included", function()
    mra:write(0, "remote write")
    mrb:write(2048, "remote read")
    assert(env.a:wr_post{
      { wr_id = 1, opcode = "rdma_write", sge = { mr = mra, length = 12 }, remote_addr = mrb.addr + 100,
        rkey = mrb.rkey, send_flags = { "signaled" } },
      { wr_id = 2, opcode = "rdma_read", sge = { mr = mra, offset = 1024, length = 11 },
        remote_addr = mrb.addr + 2048, rkey = mrb.rkey, send_flags = { "signaled" } },
      { wr_id = 3, opcode = "rdma_write", remote_addr = mrb.addr, rkey = mrb.rkey, send_flags = { "signaled" } },
      { wr_id = 4, opcode = "rdma_read", sge = { mr = mra, length = 0 }, remote_addr = mrb.addr,
        rkey = mrb.rkey, send_flags = { "signaled" } },
    })
    local wcs = all_success(support.completions(env.cq, 4))
    assert.equal(4, #wcs)
    assert.equal("remote write", mrb:read(100, 12))
    assert.equal("remote read", mra:read(1024, 11))
  end)

  it("runs atomic_cmp_swp and atomic_fetch_add", function()
    mrb:u64(0, 40)
    assert(env.a:wr_post{
      { wr_id = 1, opcode = "atomic_fetch_and_add", sge = { mr = mra, offset = 0, length = 8 },
        remote_addr = mrb.addr, rkey = mrb.rkey, compare_add = 2, send_flags = { "signaled" } },
      { wr_id = 2, opcode = "atomic_cmp_and_swp", sge = { mr = mra, offset = 8, length = 8 },
        remote_addr = mrb.addr, rkey = mrb.rkey, compare_add = 42, swap = 1000, send_flags = { "signaled" } },
    })
    local wcs = by_opcode(all_success(support.completions(env.cq, 2)))
    assert.is_table(wcs.fetch_add)
    assert.is_table(wcs.comp_swap)
    assert.equal(40, mra:u64(0))
    assert.equal(42, mra:u64(8))
    assert.equal(1000, mrb:u64(0))
  end)

  it("binds a type 2 memory window, which local_inv then invalidates", function()
    local mw = assert(env.pd:alloc_mw(2))
    local rkey = ibv.inc_rkey(mw.rkey)
    assert(env.b:wr_post{ wr_id = 1, opcode = "bind_mw", mw = mw, rkey = rkey, send_flags = { "signaled" },
      bind_info = { mr = mrb, addr = mrb.addr, length = 1024, mw_access_flags = { "remote_write" } } })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("bind_mw", wc.opcode)
    mra:write(0, "via the window")
    assert(env.a:wr_post{ wr_id = 2, opcode = "rdma_write", sge = { mr = mra, length = 14 },
      remote_addr = mrb.addr + 16, rkey = rkey, send_flags = { "signaled" } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.equal("via the window", mrb:read(16, 14))
    assert(env.b:wr_post{ wr_id = 3, opcode = "local_inv", invalidate_rkey = rkey, send_flags = { "signaled" } })
    wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("local_inv", wc.opcode)
    assert(env.a:wr_post{ wr_id = 4, opcode = "rdma_write", sge = { mr = mra, length = 14 },
      remote_addr = mrb.addr + 16, rkey = rkey, send_flags = { "signaled" } })
    assert.equal("rem_access_err", support.completions(env.cq, 1)[1].status)
    assert.is_true(mw:close())
  end)

  it("invalidates the remote window with send_inv", function()
    local mw = assert(env.pd:alloc_mw(2))
    local rkey = ibv.inc_rkey(mw.rkey)
    assert(env.b:wr_post{ wr_id = 1, opcode = "bind_mw", mw = mw, rkey = rkey, send_flags = { "signaled" },
      bind_info = { mr = mrb, mw_access_flags = { "remote_write" } } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert(env.b:post_recv{ wr_id = 2, sge = { mr = mrb, offset = 2048, length = 64 } })
    assert(env.a:wr_post{ wr_id = 3, opcode = "send_with_inv", invalidate_rkey = rkey, inline = "bye",
      send_flags = { "signaled" } })
    local wcs = by_opcode(all_success(support.completions(env.cq, 2)))
    assert.equal(3, wcs.recv.byte_len)
    assert.equal("bye", mrb:read(2048, 3))
    -- (rxe passes the kernel's IB_WC_WITH_INVALIDATE bit through unchanged, where
    -- IBV_WC_IP_CSUM_OK sits in verbs.h, so the wc cannot show with_inv here)
    assert(env.a:wr_post{ wr_id = 4, opcode = "rdma_write", inline = "x", remote_addr = mrb.addr,
      rkey = rkey, send_flags = { "signaled" } })
    assert.equal("rem_access_err", support.completions(env.cq, 1)[1].status)
  end)

  it("posts a prepared send_wrs list, or a range of it, in one batch", function()
    local rl = ibv.recv_wrs(8)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(4)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 16 }, stride = 16, send_flags = { "signaled" } }
    assert(env.a:wr_post(sl))
    assert(env.a:wr_post(sl, 2, 2))
    local recvs = 0
    for _, wc in ipairs(all_success(support.completions(env.cq, 12))) do
      if wc.opcode == "recv" then recvs = recvs + 1; assert.equal(16, wc.byte_len) end
    end
    assert.equal(6, recvs)
  end)

  it("on rxe, ibv_wr_set_sge_list sends num_sge times the first SGE's length (rdma-core 44 bug)", function()
    mra:write(0, "abcdefgh")
    local sgl = { { mr = mra, offset = 0, length = 3 }, { mr = mra, offset = 3, length = 5 } }
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 64 } })
    assert(env.a:post_send{ wr_id = 2, opcode = "send", send_flags = { "signaled" }, sg_list = sgl })
    local wcs = by_opcode(all_success(support.completions(env.cq, 2)))
    assert.equal(8, wcs.recv.byte_len) -- ibv_post_send: right
    assert(env.b:post_recv{ wr_id = 3, sge = { mr = mrb, offset = 100, length = 64 } })
    assert(env.a:wr_post{ wr_id = 4, opcode = "send", send_flags = { "signaled" }, sg_list = sgl })
    wcs = by_opcode(all_success(support.completions(env.cq, 2)))
    assert.equal(2 * 3, wcs.recv.byte_len) -- ibv_wr_set_sge_list on rxe: 2 SGEs x 3 bytes
    assert.equal("abcdef", mrb:read(100, 6))
  end)

  it("on rxe, ibv_wr_set_inline_data_list sends 0 bytes (rdma-core 44 provider bug)", function()
    local buf = ibv.buffer(16)
    buf:write(0, "12345678")
    local m = assert(env.pd:reg_mr(buf, { "local_write" }))
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 64 } })
    assert(env.a:wr_post{ wr_id = 2, opcode = "send", send_flags = { "signaled", "inline" },
      sg_list = { { mr = m, offset = 0, length = 4 }, { mr = m, offset = 4, length = 4 } } })
    local wcs = by_opcode(support.completions(env.cq, 2))
    assert.equal("success", wcs.send.status)
    assert.equal("success", wcs.recv.status)
    assert.equal(0, wcs.recv.byte_len)
  end)
end)

describe("on rxe0, wr_post on a UD pair", function()
  it("sends datagrams with ibv_wr_set_ud_addr, zero-size and with immediate data", function()
    local env = ex_pair("ud", { "send", "send_with_imm" })
    local mra = assert(env.pd:reg_mr(4096))
    local mrb = assert(env.pd:reg_mr(4096))
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mrb, length = 40 + 64 } },
                            { wr_id = 2, sge = { mr = mrb, offset = 512, length = 40 + 64 } },
                            { wr_id = 3, sge = { mr = mrb, offset = 1024, length = 40 + 64 } } })
    mra:write(0, "ud via wr")
    local dest = { ah = ah, remote_qpn = env.b.qp_num, remote_qkey = 0x11111111, send_flags = { "signaled" } }
    local function wr(t) for k, v in pairs(dest) do t[k] = v end return t end
    assert(env.a:wr_post{
      wr{ wr_id = 10, opcode = "send", sge = { mr = mra, length = 9 } },
      wr{ wr_id = 11, opcode = "send", sge = { mr = mra, length = 0 } },
      wr{ wr_id = 12, opcode = "send_with_imm", imm_data = 5, inline = "imm" },
    })
    local got = {}
    for _, wc in ipairs(all_success(support.completions(env.cq, 6))) do got[wc.wr_id] = wc end
    assert.equal(40 + 9, got[1].byte_len)
    assert.equal(env.a.qp_num, got[1].src_qp)
    assert.equal("ud via wr", mrb:read(40, 9))
    assert.equal(40, got[2].byte_len)
    assert.equal(5, got[3].imm_data)
    assert.equal("imm", mrb:read(1024 + 40, 3))
  end)

  it("raises for a WR without an address handle, before anything is posted", function()
    local env = ex_pair("ud", { "send" })
    assert.has_error(function() env.a:wr_post{ opcode = "send", inline = "x" } end,
      "wr_post: WR 1: field 'ah' is required on a UD QP")
    assert.has_error(function() env.a:post_send{ opcode = "send", inline = "x" } end,
      "post_send: WR 1: field 'ah' is required on a UD QP")
  end)
end)

describe("on rxe0, wr_post on a UC pair", function()
  it("sends and writes", function()
    local env = ex_pair("uc", { "send", "rdma_write" })
    local mra = assert(env.pd:reg_mr(4096))
    local mrb = assert(env.pd:reg_mr(4096, { "local_write", "remote_write" }))
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 64 } })
    mra:write(0, "uc ex")
    assert(env.a:wr_post{
      { wr_id = 2, opcode = "send", sge = { mr = mra, length = 5 }, send_flags = { "signaled" } },
      { wr_id = 3, opcode = "rdma_write", sge = { mr = mra, length = 5 }, remote_addr = mrb.addr + 100,
        rkey = mrb.rkey, send_flags = { "signaled" } },
    })
    local wcs = by_opcode(all_success(support.completions(env.cq, 3)))
    assert.equal(5, wcs.recv.byte_len)
    assert.equal("uc ex", mrb:read(0, 5))
    assert.equal("uc ex", mrb:read(100, 5))
  end)
end)

describe("on rxe0, wr_post misuse", function()
  local env, mr
  before_each(function()
    env = ex_pair("rc", { "send", "rdma_write" })
    mr = assert(env.pd:reg_mr(4096))
  end)

  it("raises on a QP created without send_ops_flags", function()
    local plain = support.pair()
    assert.is_false(plain.a.extended)
    assert.has_error(function() plain.a:wr_post{ opcode = "send", inline = "x" } end)
  end)

  it("raises for an opcode outside send_ops_flags or outside the API, and unknown fields", function()
    local ok, err = pcall(env.a.wr_post, env.a, { opcode = "rdma_read", sge = { mr = mr } })
    assert.is_false(ok)
    assert.matches("WR 1: opcode 'rdma_read' is not in the QP's send_ops_flags", err, 1, true)
    assert.has_error(function() env.a:wr_post{ opcode = "tso" } end)
    assert.has_error(function() env.a:wr_post{ opcode = "send", inline = "x", bogus = 1 } end,
      "wr_post: WR 1: send wr: unknown field 'bogus'")
    assert.has_error(function() env.a:wr_post{ opcode = "sned" } end)
  end)

  it("raises for more WRs, SGEs or inline bytes than the QP holds, naming the WR", function()
    local cap = env.a.cap
    local many = {}
    for i = 1, cap.max_send_wr + 1 do many[i] = { opcode = "send", inline = "x" } end
    assert.has_error(function() env.a:wr_post(many) end)
    local sgl = {}
    for i = 1, cap.max_send_sge + 1 do sgl[i] = { mr = mr, offset = i, length = 1 } end
    local ok, err = pcall(env.a.wr_post, env.a,
      { { opcode = "send", inline = "a" }, { opcode = "send", sg_list = sgl } })
    assert.is_false(ok)
    assert.matches("WR 2: %d+ SGEs, the QP takes at most", err)
    ok, err = pcall(env.a.wr_post, env.a, { opcode = "send", inline = string.rep("x", cap.max_inline_data + 1) })
    assert.is_false(ok)
    assert.matches("WR 1: %d+ bytes of inline data", err)
    ok, err = pcall(env.a.wr_post, env.a, { opcode = "rdma_write", sge = { mr = mr, offset = 4000, length = 200 } })
    assert.is_false(ok)
    assert.matches("sge: offset 4000 + length 200 lie outside the MR's 4096 bytes", err, 1, true)
  end)

  it("leaves no batch open after an error: the next wr_post goes through", function()
    for _ = 1, 3 do
      assert.has_error(function()
        env.a:wr_post{ { opcode = "send", inline = "ok" }, { opcode = "send", lkey = 1 } }
      end)
    end
    local sl = ibv.send_wrs(2)
    sl:set(1, { opcode = "send", inline = "a" })
    sl:set(2, { opcode = "rdma_read", sge = { mr = mr } })
    assert.has_error(function() env.a:wr_post(sl) end)
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 8 } })
    assert(env.a:wr_post(sl, 1, 1)) -- the list was restored whole after the error
    local wcs = all_success(support.completions(env.cq, 1))
    assert.equal("recv", wcs[1].opcode)
    assert.equal("a", mr:read(0, 1))
  end)

  it("fails with EINVAL (nil, msg, errno) on a QP in the reset state", function()
    assert(env.a:modify{ qp_state = "reset" })
    local ok, msg, errno = env.a:wr_post{ opcode = "send", inline = "x", send_flags = { "signaled" } }
    assert.is_nil(ok)
    assert.matches("^ibv_wr_complete: ", msg)
    assert.equal(22, errno)
  end)
end)
