-- Argument checking that needs no device: wrong types, unknown fields,
-- out-of-range numbers and bad enum names raise errors naming what is wrong.
local ibv = require "ibverbs"

local function err_of(f, ...)
  local ok, e = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(e)
end

describe("argument checks", function()
  it("buffers: sizes, offsets and lengths out of range", function()
    assert.has_error(function() ibv.buffer(-1) end)
    assert.has_error(function() ibv.buffer("x") end)
    assert.has_error(function() ibv.buffer(1.5) end)
    local b = ibv.buffer(16)
    assert.matches("outside the 16 bytes", err_of(b.read, b, 10, 7))
    assert.has_error(function() b:write(17, "") end)
    assert.has_error(function() b:write(0, {}) end)
    assert.has_error(function() b:u64(-8) end)
  end)

  it("wc arrays: capacity and indexes", function()
    assert.has_error(function() ibv.wc_array(0) end)
    local w = ibv.wc_array(2)
    assert.equal(2, #w)
    assert.matches("index 3 outside the 2 completions", err_of(w.status, w, 3))
    assert.has_error(function() w:wr_id(0) end)
    assert.equal("success", w:status(1))
    assert.has_error(function() w.status(ibv.buffer(1), 1) end)
  end)

  it("recv WR lists: unknown fields, negative lengths, too many SGEs, bad indexes", function()
    assert.has_error(function() ibv.recv_wrs(0) end)
    assert.has_error(function() ibv.recv_wrs(4, 65) end)
    local rl = ibv.recv_wrs(4, 2)
    assert.matches("recv wr: unknown field 'wrid'", err_of(rl.set, rl, 1, { wrid = 1 }))
    assert.matches("field 'length': %-1 out of range",
      err_of(rl.set, rl, 1, { sge = { addr = 0, length = -1, lkey = 0 } }))
    assert.matches("sge: unknown field 'len'", err_of(rl.set, rl, 1, { sge = { addr = 0, len = 1 } }))
    assert.matches("field 'sg_list': 3 SGEs, at most 2", err_of(rl.set, rl, 1, { sg_list = { {}, {}, {} } }))
    assert.matches("give either 'sge' or 'sg_list'", err_of(rl.set, rl, 1, { sge = {}, sg_list = {} }))
    assert.matches("WR index 5 outside the list of 4", err_of(rl.set, rl, 5, {}))
    assert.has_error(function() rl:set(1, "wr") end)
    assert.has_error(function() rl:wr_id(1, -0.5) end)
    assert.has_error(function() rl:length(1, -1) end)
    rl:set(2, { wr_id = 9, sge = { addr = 4096, length = 64, lkey = 1 } })
    assert.equal(9, rl:wr_id(2))
    assert.equal(64, rl:length(2))
  end)

  it("send WR lists: bad opcodes, flags, field types and conflicting data", function()
    local sl = ibv.send_wrs(2)
    assert.matches("field 'opcode': invalid value 'snd'", err_of(sl.set, sl, 1, { opcode = "snd" }))
    assert.matches("field 'send_flags': invalid value 'signalled'",
      err_of(sl.set, sl, 1, { send_flags = { "signalled" } }))
    assert.matches("field 'imm_data': 4294967296 out of range", err_of(sl.set, sl, 1, { imm_data = 0x100000000 }))
    assert.matches("field 'rkey': integer expected", err_of(sl.set, sl, 1, { rkey = "1" }))
    assert.matches("field 'inline': string expected", err_of(sl.set, sl, 1, { inline = 5 }))
    assert.matches("give the data either inline or in SGEs",
      err_of(sl.set, sl, 1, { inline = "x", sge = { addr = 0, length = 1, lkey = 0 } }))
    assert.matches("field 'ah': ibverbs.ah expected", err_of(sl.set, sl, 1, { ah = {} }))
    assert.matches("opcode 'bind_mw' needs field 'mw'", err_of(sl.set, sl, 1, { opcode = "bind_mw" }))
    assert.matches("field 'rkey': %-1 out of range",
      err_of(sl.set, sl, 1, { opcode = "atomic_fetch_and_add", rkey = -1 }))
    assert.has_error(function() sl:set(1, { [1] = "x" }) end)
    sl:set(1, { opcode = "rdma_write", inline = "abc", remote_addr = 2 ^ 40, rkey = 5 })
    assert.equal(3, sl:length(1))
  end)

  it("enums given as integers: only the values the header defines (providers index tables with them)", function()
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = ibv.WR_RDMA_WRITE or 0, inline = "abc", remote_addr = 8, rkey = 5 })
    assert.matches("field 'opcode': unknown value 16777216 %(expected one of 'rdma_write'",
      err_of(sl.set, sl, 1, { opcode = 0x1000000, inline = "x" }))
    assert.matches("field 'opcode': unknown value %-1", err_of(sl.set, sl, 1, { opcode = -1 }))
    assert.matches("qp_attr: field 'qp_state': unknown value 99",
      err_of(ibv.qp_attr, { qp_state = 99 }))
    -- the naming helpers hand nothing to a provider: any integer has a name
    assert.equal("unknown", ibv.wc_status_str(1000))
    -- a flags mask is any combination of bits
    sl:set(1, { send_flags = 0x7fffffff })
  end)

  it("flags given as names or integers, and ibv.inc_rkey's range", function()
    local sl = ibv.send_wrs(1)
    sl:set(1, { send_flags = ibv.SEND_SIGNALED + ibv.SEND_SOLICITED })
    sl:set(1, { send_flags = { "signaled", "fence" } })
    assert.equal(0x101, ibv.inc_rkey(0x100))
    assert.has_error(function() ibv.inc_rkey(-1) end)
    assert.has_error(function() ibv.inc_rkey(2 ^ 32) end)
  end)

  it("objects of the wrong type are refused by name", function()
    local b = ibv.buffer(8)
    local pd_methods = ibv.methods("ibverbs.pd")
    assert.matches("ibverbs.pd expected", err_of(pd_methods.reg_mr, b, 8))
    assert.matches("ibverbs.context expected", err_of(ibv.methods("ibverbs.context").alloc_pd, {}))
    assert.matches("ibverbs.qp expected", err_of(ibv.methods("ibverbs.qp").wr_post, b, {}))
    assert.matches("ibverbs.cq expected", err_of(ibv.methods("ibverbs.cq").poll, nil))
  end)
end)
