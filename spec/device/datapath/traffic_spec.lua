-- Loopback traffic on rxe0 with ibv_post_send / ibv_post_recv: RC, UC and UD.
local ibv = require "ibverbs"
local support = require "support"

local function by_opcode(wcs)
  local t = {}
  for _, wc in ipairs(wcs) do t[wc.opcode] = wc end
  return t
end

describe("on rxe0, an RC loopback pair", function()
  local env, mra, mrb
  before_each(function()
    env = support.pair()
    mra = assert(env.pd:reg_mr(4096, { "local_write", "remote_write", "remote_read", "remote_atomic" }))
    mrb = assert(env.pd:reg_mr(4096, { "local_write", "remote_write", "remote_read", "remote_atomic" }))
  end)

  it("moves a send into a posted receive, with the byte count and qp_num", function()
    mra:write(0, "hello, rdma")
    assert(env.b:post_recv{ wr_id = 7, sg_list = { { mr = mrb, offset = 100, length = 64 } } })
    assert(env.a:post_send{ wr_id = 8, opcode = "send", send_flags = { "signaled" },
                            sg_list = { { mr = mra, length = 11 } } })
    local wcs = by_opcode(support.completions(env.cq, 2))
    assert.equal("success", wcs.recv.status)
    assert.equal(7, wcs.recv.wr_id)
    assert.equal(11, wcs.recv.byte_len)
    assert.equal(env.b.qp_num, wcs.recv.qp_num)
    assert.equal(8, wcs.send.wr_id)
    assert.equal("hello, rdma", mrb:read(100, 11))
  end)

  it("carries immediate data with send_with_imm and rdma_write_with_imm", function()
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mrb, length = 64 } }, { wr_id = 2, sge = { mr = mrb } } })
    assert(env.a:post_send{
      { wr_id = 3, opcode = "send_with_imm", imm_data = 0xdeadbeef, inline = "imm!", send_flags = { "signaled" } },
      { wr_id = 4, opcode = "rdma_write_with_imm", imm_data = 42, sge = { mr = mra, length = 8 },
        remote_addr = mrb.addr + 512, rkey = mrb.rkey, send_flags = { "signaled" } },
    })
    local wcs = support.completions(env.cq, 4)
    local imms = {}
    for _, wc in ipairs(wcs) do
      assert.equal("success", wc.status)
      if wc.imm_data then imms[wc.opcode] = wc.imm_data end
    end
    assert.equal(0xdeadbeef, imms.recv)
    assert.equal(42, imms.recv_rdma_with_imm)
    assert.equal("imm!", mrb:read(0, 4))
  end)

  it("writes and reads remote memory, including zero-length operations", function()
    mra:write(0, "written remotely")
    assert(env.a:post_send{ wr_id = 1, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mra, length = 16 }, remote_addr = mrb.addr + 1000, rkey = mrb.rkey })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("rdma_write", wc.opcode)
    assert.equal("written remotely", mrb:read(1000, 16))
    mrb:write(2000, "read me back")
    assert(env.a:post_send{ wr_id = 2, opcode = "rdma_read", send_flags = { "signaled" },
      sge = { mr = mra, offset = 3000, length = 12 }, remote_addr = mrb.addr + 2000, rkey = mrb.rkey })
    wc = support.completions(env.cq, 1)[1]
    assert.equal("rdma_read", wc.opcode)
    assert.equal("read me back", mra:read(3000, 12))
    assert(env.a:post_send{
      { wr_id = 3, opcode = "rdma_write", send_flags = { "signaled" }, remote_addr = mrb.addr, rkey = mrb.rkey },
      { wr_id = 4, opcode = "rdma_read", send_flags = { "signaled" }, remote_addr = mrb.addr, rkey = mrb.rkey },
    })
    for _, w in ipairs(support.completions(env.cq, 2)) do assert.equal("success", w.status) end
  end)

  it("runs compare-and-swap and fetch-and-add on remote memory", function()
    mrb:u64(8, 100)
    assert(env.a:post_send{ wr_id = 1, opcode = "atomic_fetch_and_add", send_flags = { "signaled" },
      sge = { mr = mra, offset = 0, length = 8 }, remote_addr = mrb.addr + 8, rkey = mrb.rkey, compare_add = 5 })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.equal(100, mra:u64(0))
    assert.equal(105, mrb:u64(8))
    assert(env.a:post_send{ wr_id = 2, opcode = "atomic_cmp_and_swp", send_flags = { "signaled" },
      sge = { mr = mra, offset = 16, length = 8 }, remote_addr = mrb.addr + 8, rkey = mrb.rkey,
      compare_add = 105, swap = 7 })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("comp_swap", wc.opcode)
    assert.equal(105, mra:u64(16))
    assert.equal(7, mrb:u64(8))
  end)

  it("reports a remote access error as a completion status, not a Lua error", function()
    assert(env.a:post_send{ wr_id = 9, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mra, length = 8 }, remote_addr = mrb.addr, rkey = mrb.rkey + 1 })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal(9, wc.wr_id)
    assert.equal("rem_access_err", wc.status)
  end)

  it("fails a send whose SGE lies outside its MR with a local completion error", function()
    assert(env.a:post_send{ wr_id = 5, opcode = "send", send_flags = { "signaled" },
      sg_list = { { addr = mra.addr + 4000, length = 200, lkey = mra.lkey } } })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal(5, wc.wr_id)
    assert.are_not.equal("success", wc.status)
  end)

  it("posts prepared WR lists in one call and reports the failing index", function()
    local rl = ibv.recv_wrs(8)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    assert.equal(0, rl:wr_id(1))
    assert.equal(7, rl:wr_id(8))
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(4)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 32 }, stride = 32, send_flags = { "signaled" } }
    assert(env.a:post_send(sl, 2, 3))
    local wcs = support.completions(env.cq, 6)
    local recvs = 0
    for _, wc in ipairs(wcs) do
      assert.equal("success", wc.status)
      if wc.opcode == "recv" then recvs = recvs + 1; assert.equal(32, wc.byte_len) end
    end
    assert.equal(3, recvs)
    assert.has_error(function() env.a:post_send(sl, 5) end)
    assert.has_error(function() env.a:post_send(sl, 2, 4) end)
  end)

  it("refuses receives past the queue's capacity with ENOMEM and the bad WR index", function()
    local cap = env.b.cap.max_recv_wr
    assert.is_true(cap >= 64) -- at least what was asked for
    local rl = ibv.recv_wrs(4 * cap)
    rl:fill{ sge = { mr = mrb, length = 8 } }
    local ok, msg, errno, bad = env.b:post_recv(rl)
    assert.is_nil(ok)
    assert.matches("^ibv_post_recv: ", msg)
    assert.equal(12, errno)
    assert.is_true(bad > cap and bad <= 4 * cap)
    -- the WRs before bad were posted: a further post fails at once
    local _, _, errno2, bad2 = env.b:post_recv(rl, bad, 1)
    assert.equal(12, errno2)
    assert.equal(bad, bad2)
  end)

  it("runs the C transfer loop: 1000 sends, receives reposted", function()
    local rl = ibv.recv_wrs(32)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(8)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 64 } }
    sl:set(8, { opcode = "send", sge = { mr = mra, length = 64 }, send_flags = { "signaled" }, wr_id = 99 })
    local st = assert(ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl,
      recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 1000, window = 32 })
    assert.equal(1000, st.sent)
    assert.equal(1000, st.received)
  end)

  it("transfer reposts receives posted out of list order and leaves the list's links as they were", function()
    local rl = ibv.recv_wrs(32)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    for i = 1, 32, 2 do assert(env.b:post_recv(rl, i, 1)) end -- completions 0, 2, .., 1, 3, ..
    for i = 2, 32, 2 do assert(env.b:post_recv(rl, i, 1)) end
    local sl = ibv.send_wrs(8)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 64 } }
    sl:set(8, { opcode = "send", sge = { mr = mra, length = 64 }, send_flags = { "signaled" } })
    local xfer = { send_qp = env.a, send_cq = env.cq, send_wrs = sl, recv = env.b, recv_cq = env.cq,
                   recv_wrs = rl, count = 200, window = 32, timeout = 2 }
    local st = assert(ibv.transfer(xfer))
    assert.same({ 200, 200 }, { st.sent, st.received })
    assert(env.b:post_recv(rl)) -- all 32 again only if every link is back
    xfer.count = 32
    st = assert(ibv.transfer(xfer))
    assert.same({ 32, 32 }, { st.sent, st.received })
  end)
end)

describe("on rxe0, a UC loopback pair", function()
  it("carries sends and RDMA writes", function()
    local env = support.pair{ qp_type = "uc", access = { "local_write", "remote_write" } }
    local mra = assert(env.pd:reg_mr(4096))
    local mrb = assert(env.pd:reg_mr(4096, { "local_write", "remote_write" }))
    mra:write(0, "unreliable but connected")
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 100 } })
    assert(env.a:post_send{ wr_id = 2, send_flags = { "signaled" }, sge = { mr = mra, length = 24 } })
    assert(env.a:post_send{ wr_id = 3, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mra, length = 24 }, remote_addr = mrb.addr + 200, rkey = mrb.rkey })
    local wcs = by_opcode(support.completions(env.cq, 3))
    assert.equal(24, wcs.recv.byte_len)
    assert.equal("unreliable but connected", mrb:read(0, 24))
    assert.equal("unreliable but connected", mrb:read(200, 24))
  end)
end)

describe("on rxe0, a UD pair", function()
  it("delivers a datagram behind the 40-byte GRH and answers via an AH from the wc", function()
    local env = support.pair{ qp_type = "ud" }
    local mra = assert(env.pd:reg_mr(4096))
    local mrb = assert(env.pd:reg_mr(4096))
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 40 + 64 } })
    mra:write(0, "datagram")
    assert(env.a:post_send{ wr_id = 2, send_flags = { "signaled" }, sge = { mr = mra, length = 8 },
      ah = ah, remote_qpn = env.b.qp_num, remote_qkey = 0x11111111 })
    local wcs = by_opcode(support.completions(env.cq, 2))
    assert.equal(48, wcs.recv.byte_len)
    assert.equal(env.a.qp_num, wcs.recv.src_qp)
    assert.same({ "grh" }, wcs.recv.wc_flags)
    assert.equal("datagram", mrb:read(40, 8))
    local back = assert(env.pd:create_ah_from_wc(wcs.recv, mrb:read(0, 40), 1))
    assert(env.a:post_recv{ wr_id = 3, sge = { mr = mra, offset = 1024, length = 40 + 64 } })
    assert(env.b:post_send{ wr_id = 4, send_flags = { "signaled" }, inline = "reply",
      ah = back, remote_qpn = env.a.qp_num, remote_qkey = 0x11111111 })
    wcs = by_opcode(support.completions(env.cq, 2))
    assert.equal("success", wcs.recv.status)
    assert.equal("reply", mra:read(1024 + 40, 5))
    local attr = env.ctx:init_ah_from_wc(1, wcs.recv, mra:read(1024, 40))
    assert.is_true(attr.is_global)
  end)
end)
