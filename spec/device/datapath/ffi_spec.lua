-- ibverbs.ffi on rxe0: traffic whose WRs are filled, posted and completed
-- entirely through LuaJIT's FFI, and misuse that must fail without a crash.
-- LuaJIT only: under Lua 5.4 the module refuses to load (spec/host/library/ffi_spec.lua).
if not jit then return end

local ffi = require "ffi"
local ibv = require "ibverbs"
local xffi = require "ibverbs.ffi"
local support = require "support"

local C = xffi.C
local ACCESS = { "local_write", "remote_write", "remote_read" }

-- Polls through the FFI until n completions are in wc[0..n-1] (2 s at most).
local function poll_n(c, wc, n)
  local got, deadline = 0, ibv.now() + 2
  while got < n and ibv.now() < deadline do
    local k = assert(xffi.poll_cq(c, xffi.span("struct ibv_wc", wc.p + got, wc.n - got)))
    got = got + k
  end
  assert.equal(n, got, "completions")
  return got
end

-- Fills entry i of a recv or send span with one SGE over mem[off, off+len).
local function set_sge(wr, mem, mr, off, len)
  local sge = wr.sg_list[0]
  sge.addr = ffi.cast("uintptr_t", mem.p + off)
  sge.length = len
  sge.lkey = mr.lkey
  wr.num_sge = 1
end

describe("ibverbs.ffi on " .. support.DEVICE, function()
  local env, mra, mrb, mema, memb, qa, qb, c

  before_each(function()
    env = support.pair{ access = ACCESS }
    mra = assert(env.pd:reg_mr(4096, ACCESS))
    mrb = assert(env.pd:reg_mr(4096, ACCESS))
    mema, memb = xffi.mem(mra), xffi.mem(mrb)
    qa, qb, c = xffi.qp(env.a), xffi.qp(env.b), xffi.cq(env.cq)
  end)

  it("sends and receives on an RC pair with WRs and completions in FFI memory", function()
    local rw = xffi.recv_wrs(ibv.recv_wrs(4))
    local sw = xffi.send_wrs(ibv.send_wrs(4))
    local wc = xffi.wc_array(ibv.wc_array(8))
    for i = 0, 3 do
      local r = rw:at(i)
      r.wr_id = 100 + i
      set_sge(r, memb, mrb, i * 64, 64)
      local s = sw:at(i)
      local msg = "message " .. i
      ffi.copy(mema.p + 1024 + i * 64, msg)
      s.wr_id = 200 + i
      s.opcode = C.IBV_WR_SEND
      s.send_flags = C.IBV_SEND_SIGNALED
      set_sge(s, mema, mra, 1024 + i * 64, #msg)
    end
    assert.is_true(xffi.post_recv(qb, rw))
    assert.is_true(xffi.post_send(qa, sw))
    poll_n(c, wc, 8)
    local recvs, sends = {}, {}
    for i = 0, 7 do
      local w = wc:at(i)
      assert.equal(C.IBV_WC_SUCCESS, w.status)
      local id = tonumber(w.wr_id)
      if w.opcode == C.IBV_WC_RECV then
        assert.equal(env.b.qp_num, w.qp_num)
        recvs[id] = ffi.string(memb.p + (id - 100) * 64, w.byte_len)
      else
        assert.equal(C.IBV_WC_SEND, w.opcode)
        sends[id] = true
      end
    end
    assert.same({ [100] = "message 0", [101] = "message 1", [102] = "message 2", [103] = "message 3" },
      recvs)
    assert.same({ [200] = true, [201] = true, [202] = true, [203] = true }, sends)
  end)

  it("writes with RDMA and with immediate data through WRs made by ffi.new", function()
    local sw = xffi.link(xffi.span("struct ibv_send_wr", ffi.new("struct ibv_send_wr[2]"), 2))
    local sges = ffi.new("struct ibv_sge[2]")
    local rw = xffi.span("struct ibv_recv_wr", ffi.new("struct ibv_recv_wr[1]"), 1)
    rw:at(0).wr_id = 9 -- a write with immediate consumes a receive, its SGE list may be empty
    ffi.copy(mema.p, "written by RDMA")
    for i = 0, 1 do
      local s = sw:at(i)
      s.sg_list = sges + i
      set_sge(s, mema, mra, 0, 15)
      s.wr_id = 300 + i
      s.wr.rdma.remote_addr = ffi.cast("uintptr_t", memb.p + 512 * (i + 1))
      s.wr.rdma.rkey = mrb.rkey
    end
    sw:at(0).opcode = C.IBV_WR_RDMA_WRITE
    sw:at(0).send_flags = C.IBV_SEND_SIGNALED
    sw:at(1).opcode = C.IBV_WR_RDMA_WRITE_WITH_IMM
    sw:at(1).imm_data = 0x01020304 -- network order on the wire: read back as written
    assert.is_true(xffi.post_recv(qb, rw))
    assert.is_true(xffi.post_send(qa, sw))
    local wc = xffi.span("struct ibv_wc", ffi.new("struct ibv_wc[4]"), 4)
    poll_n(c, wc, 2) -- the unsignaled write completes nothing on its own side
    local seen = {}
    for i = 0, 1 do
      local w = wc:at(i)
      assert.equal(C.IBV_WC_SUCCESS, w.status)
      seen[tonumber(w.opcode)] = w
    end
    assert.equal(300, tonumber(seen[C.IBV_WC_RDMA_WRITE].wr_id))
    local imm = seen[C.IBV_WC_RECV_RDMA_WITH_IMM]
    assert.equal(9, tonumber(imm.wr_id))
    assert.equal(15, imm.byte_len)
    assert.equal(0x01020304, imm.imm_data)
    assert.are_not.equal(0, bit.band(imm.wc_flags, C.IBV_WC_WITH_IMM))
    assert.equal("written by RDMA", mrb:read(512, 15))
    assert.equal("written by RDMA", ffi.string(memb.p + 1024, 15))
  end)

  it("gives the 0-based index of the first WR the queue cannot take", function()
    local cap = env.b.cap.max_recv_wr -- granted; rxe may round its queue up
    local rl = ibv.recv_wrs(8 * cap)
    rl:fill{ sg_list = { { mr = mrb, offset = 0, length = 16 } } }
    local rw = xffi.recv_wrs(rl)
    local ok, msg, err, bad = xffi.post_recv(qb, rw, 1, 8 * cap - 1)
    assert.is_nil(ok)
    assert.equal("ibv_post_recv: Cannot allocate memory", msg)
    assert.equal(12, err)
    assert.is_true(bad >= 1 + cap and bad < 8 * cap, "bad index " .. tostring(bad))
    -- the queue is full: the WR it names fails again on its own
    assert.same({ nil, msg, 12, bad }, { xffi.post_recv(qb, rw, bad, 1) })
    assert.equal(ffi.cast("void *", rw.p + 1), ffi.cast("void *", rw.p[0].next),
      "the list stays chained around the posted range")
    assert.equal(ffi.cast("void *", rw.p + 8 * cap - 1), ffi.cast("void *", rw.p[8 * cap - 2].next))
    assert.is_true(rw.p[8 * cap - 1].next == nil)
  end)

  it("fails the flat calls cleanly once the object is closed", function()
    local rw = xffi.span("struct ibv_recv_wr", ffi.new("struct ibv_recv_wr[1]"), 1)
    local wc = xffi.span("struct ibv_wc", ffi.new("struct ibv_wc[1]"), 1)
    assert.is_true(env.a:close())
    assert.same({ nil, "ibv_post_recv: Bad file descriptor", 9, 0 }, { xffi.post_recv(qa, rw) })
    assert.same({ nil, "ibv_post_send: Bad file descriptor", 9, 0 },
      { xffi.post_send(qa, xffi.span("struct ibv_send_wr", ffi.new("struct ibv_send_wr[1]"), 1)) })
    assert.is_true(env.b:close())
    assert.is_true(env.cq:close())
    assert.same({ nil, "ibv_poll_cq: Bad file descriptor", 9 }, { xffi.poll_cq(c, wc) })
    assert.same({ nil, "ibv_req_notify_cq: Bad file descriptor", 9 }, { xffi.req_notify_cq(c) })
    assert.has_error(function() xffi.qp(env.a) end, "qp: attempt to use a closed ibverbs.qp")
  end)

  it("rejects handles and spans of the wrong type", function()
    local rw = xffi.recv_wrs(ibv.recv_wrs(2))
    local sw = xffi.send_wrs(ibv.send_wrs(2))
    assert.has_error(function() xffi.post_recv(c, rw) end)           -- a CQ handle for a QP
    assert.has_error(function() xffi.post_send(qa, rw) end)          -- recv WRs to post_send
    assert.has_error(function() xffi.poll_cq(c, sw) end)             -- send WRs as completions
    assert.has_error(function() xffi.cq(env.a) end, "bad argument #1 to 'cq' (ibverbs.cq expected, got ibverbs.qp)")
    local forged = ffi.cast("struct ibvl_ffi_qp *", env.cq)          -- a CQ cast as a QP
    assert.same({ nil, "ibv_post_recv: Invalid argument", 22, 0 }, { xffi.post_recv(forged, rw) })
    assert.has_error(function() return rw:at(2) end, "index 2 outside the span of 2 struct ibv_recv_wr")
    assert.has_error(function() xffi.post_recv(qb, rw, 1, 2) end, "WRs 1..2 outside the span of 2")
  end)

  it("refuses through the core a prepared list whose links, opcode or AH FFI code changed", function()
    local rl = ibv.recv_wrs(4)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    local rw = xffi.recv_wrs(rl)
    rw.p[1].next = rw.p + 3 -- the provider would follow it
    assert.has_error(function() env.b:post_recv(rl) end, "post_recv: WR 2: its next was changed (through the FFI)")
    local ok, err = pcall(ibv.transfer, { recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 4 })
    assert.is_false(ok) -- its reposts would follow the list's links
    assert.matches("WR 2: its next was changed (through the FFI)", err, 1, true)
    rw.p[1].next = rw.p + 2
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(2)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 8 } }
    local cycle = ibv.batch{ { "post_send", env.a, sl } }
    local sw = xffi.send_wrs(sl)
    sw.p[0].opcode = C.IBV_WR_BIND_MW -- its bind_mw.mw is no MW the binding set
    assert.has_error(function() env.a:post_send(sl) end, "post_send: WR 1: its opcode was changed (through the FFI)")
    assert.has_error(cycle, "WR 1: its opcode was changed (through the FFI)")
    sw.p[0].opcode = C.IBV_WR_SEND
    assert.is_true(cycle())
    local ud = support.pair{ qp_type = "ud" }
    local ah = assert(ud.pd:create_ah{ port_num = 1, grh = { dgid = ud.gid, sgid_index = support.GID_INDEX } })
    local ul = ibv.send_wrs(1)
    ul:set(1, { opcode = "send", inline = "x", ah = ah, remote_qpn = ud.b.qp_num, remote_qkey = 1 })
    xffi.send_wrs(ul).p[0].wr.ud.ah = ffi.cast("struct ibv_ah *", sw.p) -- not an AH
    assert.has_error(function() ud.a:post_send(ul) end, "post_send: WR 1: its wr.ud.ah was changed (through the FFI)")
  end)

  it("arms the CQ for an event", function()
    assert.is_true(xffi.req_notify_cq(c))
    assert.is_true(xffi.req_notify_cq(c, true))
  end)

  it("maps the SGEs of a prepared list", function()
    local rl = ibv.recv_wrs(3, 2)
    local sges = xffi.sges(rl)
    assert.equal(6, #sges)
    local rw = xffi.recv_wrs(rl)
    assert.equal(ffi.cast("void *", sges.p + 2), ffi.cast("void *", rw:at(1).sg_list))
  end)
end)
