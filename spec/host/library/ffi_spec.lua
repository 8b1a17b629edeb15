-- ibverbs.ffi without a device: it loads only under LuaJIT, its spans check
-- their bounds and its flat C calls refuse handles of the wrong type.
local ibv = require "ibverbs"

if not jit then
  describe("ibverbs.ffi under " .. _VERSION, function()
    it("raises a clear error instead of loading", function()
      local ok, err = pcall(require, "ibverbs.ffi")
      assert.is_false(ok)
      assert.matches("ibverbs.ffi needs LuaJIT", err)
      assert.is_nil(package.loaded["ibverbs.ffi"])
    end)
  end)
  return
end

local ffi = require "ffi"
local xffi = require "ibverbs.ffi"

describe("ibverbs.ffi under LuaJIT", function()
  it("loads the flat C calls from the core module", function()
    assert.equal(package.searchpath("ibverbs.core", package.cpath), xffi.path)
    for _, name in ipairs { "post_recv", "post_send", "post_srq_recv", "poll_cq", "req_notify_cq" } do
      assert.equal("cdata", type(xffi.C["ibvl_ffi_" .. name]), name)
    end
    assert.equal(128, xffi.C.IBV_WC_RECV)
    assert.equal(ibv.SEND_SIGNALED, xffi.C.IBV_SEND_SIGNALED)
  end)

  it("declares the verbs structs with the sizes of the C headers", function()
    -- the full check is the generated C test (make check-ffi)
    assert.equal(16, ffi.sizeof("struct ibv_sge"))
    assert.equal(32, ffi.sizeof("struct ibv_recv_wr"))
    assert.equal(128, ffi.sizeof("struct ibv_send_wr"))
    assert.equal(48, ffi.sizeof("struct ibv_wc"))
    assert.equal(40, ffi.offsetof("struct ibv_send_wr", "wr"))
  end)

  it("maps a buffer's memory both ways", function()
    local buf = ibv.buffer(64)
    local mem = xffi.mem(buf)
    assert.equal(64, #mem)
    assert.equal(buf.addr, tonumber(ffi.cast("uintptr_t", mem.p)))
    mem:at(3)
    mem.p[3] = 0x41
    ffi.copy(mem.p + 4, "BC", 2)
    assert.equal("ABC", buf:read(3, 3))
    buf:write(0, "z")
    assert.equal(string.byte("z"), mem:at(0))
  end)

  it("maps prepared WR lists and wc arrays onto the same memory", function()
    local rl, sl, wcs = ibv.recv_wrs(4, 2), ibv.send_wrs(2), ibv.wc_array(3)
    local rw, sw, wc = xffi.recv_wrs(rl), xffi.send_wrs(sl), xffi.wc_array(wcs)
    assert.equal(4, #rw)
    assert.equal(2, #sw)
    assert.equal(3, #wc)
    rl:wr_id(2, 77)
    assert.equal(77, tonumber(rw:at(1).wr_id))
    sw:at(1).wr_id = 5
    assert.equal(5, sl:wr_id(2))
    rl:length(4, 99)
    assert.equal(99, rw:at(3).sg_list[0].length)
    assert.equal(8, #xffi.sges(rl))
    wc:at(2).wr_id = 42
    assert.equal(42, wcs:wr_id(3))
  end)

  it("links a WR array made by ffi.new into one chain", function()
    local sw = xffi.link(xffi.span("struct ibv_send_wr", ffi.new("struct ibv_send_wr[3]"), 3))
    assert.is_true(sw.p[0].next == sw.p + 1)
    assert.is_true(sw.p[1].next == sw.p + 2)
    assert.is_true(sw.p[2].next == nil)
  end)

  it("refuses memory of the wrong kind", function()
    local buf = ibv.buffer(64)
    assert.has_error(function() xffi.wc_array(buf) end,
      "bad argument #1 to 'wc_array' (ibverbs.wc_array expected, got ibverbs.buffer)")
    assert.has_error(function() xffi.recv_wrs(ibv.send_wrs(1)) end,
      "bad argument #1 to 'recv_wrs' (ibverbs.recv_wrs expected, got ibverbs.send_wrs)")
    assert.has_error(function() xffi.mem(ibv.wc_array(1)) end)
    assert.has_error(function() xffi.sges(buf) end)
    assert.has_error(function() xffi.mem(nil) end)
  end)

  it("rejects an index past either end of a span", function()
    local mem = xffi.mem(ibv.buffer(16))
    assert.has_error(function() return mem:at(16) end, "index 16 outside the span of 16 uint8_t")
    assert.has_error(function() return mem:at(-1) end, "index -1 outside the span of 16 uint8_t")
    local wcs = xffi.span("struct ibv_wc", ffi.new("struct ibv_wc[4]"), 4)
    assert.has_error(function() return wcs:at(4) end, "index 4 outside the span of 4 struct ibv_wc")
  end)

  it("keeps the object a span came from alive", function()
    local mem = xffi.mem(ibv.buffer(4096))
    collectgarbage()
    collectgarbage()
    mem.p[4095] = 7
    assert.equal(7, mem:at(4095))
  end)

  it("refuses closed objects, other types and non-objects", function()
    local buf = ibv.buffer(8)
    assert.has_error(function() xffi.qp(buf) end,
      "bad argument #1 to 'qp' (ibverbs.qp expected, got ibverbs.buffer)")
    assert.has_error(function() xffi.cq({}) end)
    assert.has_error(function() xffi.mem(io.stdout) end)
    buf:close()
    assert.has_error(function() xffi.mem(buf) end, "mem: attempt to use a closed ibverbs.buffer")
  end)

  it("makes the flat calls fail cleanly on a handle of the wrong object", function()
    local buf = ibv.buffer(64)
    local forged = ffi.cast("struct ibvl_ffi_qp *", buf) -- a buffer, not a QP
    local wrs = xffi.span("struct ibv_recv_wr", ffi.new("struct ibv_recv_wr[2]"), 2)
    local ok, msg, err, bad = xffi.post_recv(forged, wrs)
    assert.is_nil(ok)
    assert.equal("ibv_post_recv: Invalid argument", msg)
    assert.equal(22, err)
    assert.equal(0, bad)
    assert.equal(22, xffi.C.ibvl_ffi_post_recv(nil, wrs.p, ffi.new("struct ibv_recv_wr *[1]")))
    local wcs = xffi.span("struct ibv_wc", ffi.new("struct ibv_wc[2]"), 2)
    assert.same({ nil, "ibv_poll_cq: Invalid argument", 22 },
      { xffi.poll_cq(ffi.cast("struct ibvl_ffi_cq *", buf), wcs) })
  end)

  it("rejects a pointer of the wrong type before any C call", function()
    local sends = ffi.new("struct ibv_send_wr[1]")
    local bad = ffi.new("struct ibv_recv_wr *[1]")
    assert.has_error(function() xffi.C.ibvl_ffi_post_recv(nil, sends, bad) end)
    local cq = ffi.cast("struct ibvl_ffi_cq *", nil)
    assert.has_error(function() xffi.C.ibvl_ffi_post_recv(cq, nil, bad) end)
    assert.has_error(function() xffi.poll_cq(nil, xffi.span("uint8_t", sends, 16)) end)
  end)

  it("checks the WR range it is asked to post", function()
    local wrs = xffi.span("struct ibv_recv_wr", ffi.new("struct ibv_recv_wr[4]"), 4)
    local q = ffi.cast("struct ibvl_ffi_qp *", nil)
    assert.has_error(function() xffi.post_recv(q, wrs, 2, 3) end, "WRs 2..4 outside the span of 4")
    assert.has_error(function() xffi.post_recv(q, wrs, -1, 1) end)
    assert.has_error(function() xffi.post_recv(q, wrs, 0, 0) end)
    local wcs = xffi.span("struct ibv_wc", ffi.new("struct ibv_wc[2]"), 2)
    assert.has_error(function() xffi.poll_cq(nil, wcs, 3) end, "max 3 outside the span of 2")
  end)
end)
