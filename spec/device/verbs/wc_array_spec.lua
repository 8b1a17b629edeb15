-- WC arrays on rxe0: ibv.wc_array(n) filled by cq:poll and cq:wait with real
-- completions (receives with and without immediate data, sends, and an error
-- completion), read through every accessor and as tables; bad sizes and
-- indexes raise naming the argument.
local ibv = require "ibverbs"
local support = require "support"

describe("on rxe0, ibv.wc_array", function()
  it("is an empty array of n completions until a poll fills it", function()
    local wcs = ibv.wc_array(3)
    assert.equal(3, #wcs)
    assert.equal(0, wcs:count())
    assert.equal(0, wcs:wr_id(3))
    local cq = assert(support.open():create_cq(4))
    assert.equal(0, cq:poll(wcs))
    assert.equal(0, wcs:count())
  end)

  it("raises on a bad size, a bad index or another object, naming the argument", function()
    assert.error_matches(function() ibv.wc_array(0) end,
      "bad argument #1 to 'wc_array' (0 out of range [1, 1048576])", 1, true)
    assert.error_matches(function() ibv.wc_array(2 ^ 21) end,
      "bad argument #1 to 'wc_array' (2097152 out of range [1, 1048576])", 1, true)
    assert.error_matches(function() ibv.wc_array("x") end, "bad argument #1 to 'wc_array'", 1, true)
    local wcs = ibv.wc_array(3)
    assert.error_matches(function() wcs:status(4) end,
      "bad argument #1 to 'status' (index 4 outside the 3 completions)", 1, true)
    assert.error_matches(function() wcs:wr_id(0) end,
      "bad argument #1 to 'wr_id' (index 0 outside the 3 completions)", 1, true)
    assert.error_matches(function() wcs:byte_len("a") end, "bad argument #1 to 'byte_len' (number expected", 1, true)
    local pd = assert(support.open():alloc_pd())
    assert.error_matches(function() wcs.status(pd, 1) end,
      "bad argument #1 to 'status' (ibverbs.wc_array expected, got ", 1, true)
    assert.error_matches(function() support.open():create_cq(4):poll(pd) end, "poll", 1, true)
  end)

  it("gives each field of real completions through its accessor, as get's table does", function()
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(4096))
    assert(env.b:post_recv{ { wr_id = 11, sge = { mr = mr, length = 64 } },
                            { wr_id = 12, sge = { mr = mr, offset = 64, length = 64 } } })
    assert(env.a:post_send{
      { wr_id = 21, opcode = "send_with_imm", imm_data = 0x01020304, inline = "with imm", send_flags = { "signaled" } },
      { wr_id = 22, inline = "plain", send_flags = { "signaled" } },
    })
    local wcs = ibv.wc_array(8)
    assert.equal(4, assert(env.cq:wait(wcs, 4, 2)))
    assert.equal(4, wcs:count())
    local at = {}
    for i = 1, 4 do
      assert.equal("success", wcs:status(i))
      assert.equal(0, wcs:vendor_err(i))
      at[wcs:wr_id(i)] = i
    end
    local r1, r2, s1 = at[11], at[12], at[21]
    assert.equal("recv", wcs:opcode(r1))
    assert.equal(8, wcs:byte_len(r1))
    assert.equal(0x01020304, wcs:imm_data(r1))
    assert.equal(env.b.qp_num, wcs:qp_num(r1))
    assert.equal(1, math.floor(wcs:wc_flags(r1) / 2) % 2) -- IBV_WC_WITH_IMM
    assert.is_nil(wcs:imm_data(r2))
    assert.equal(5, wcs:byte_len(r2))
    assert.equal("send", wcs:opcode(s1))
    assert.equal(env.a.qp_num, wcs:qp_num(s1))
    for _, f in ipairs{ "pkey_index", "slid", "sl", "dlid_path_bits", "invalidated_rkey" } do
      assert.equal(0, wcs[f](wcs, r1) % 1, f)
    end
    -- get: the same completion as a table
    local t = wcs:get(r1)
    assert.same({ 11, "success", "recv", 8, 0x01020304, env.b.qp_num },
      { t.wr_id, t.status, t.opcode, t.byte_len, t.imm_data, t.qp_num })
    local t2 = wcs:get(r2)
    assert.same({ 12, 5 }, { t2.wr_id, t2.byte_len })
    assert.is_nil(t2.imm_data)
    -- get into a table of the caller's: the same table back, filled, no field of the last completion left
    local mine = { keep = true }
    assert.equal(mine, wcs:get(r1, mine))
    assert.same({ 11, 0x01020304, true }, { mine.wr_id, mine.imm_data, mine.keep })
    assert.equal(mine, wcs:get(r2, mine))
    assert.same({ 12, 5 }, { mine.wr_id, mine.byte_len })
    assert.is_nil(mine.imm_data)
    assert.error_matches(function() wcs:get(r2, "nope") end, "to 'get' %(table expected, got string%)")
  end)

  it("carries an error completion's status and vendor error", function()
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    assert(env.a:post_send{ wr_id = 31, opcode = "rdma_write", sge = { mr = mr, length = 8 },
                            remote_addr = mr.addr, rkey = mr.rkey + 1, send_flags = { "signaled" } })
    local wcs = ibv.wc_array(2)
    assert.equal(1, assert(env.cq:wait(wcs, 1, 2)))
    assert.equal(31, wcs:wr_id(1))
    assert.equal("rem_access_err", wcs:status(1))
    assert.equal("rem_access_err", wcs:get(1).status)
    assert.is_number(wcs:vendor_err(1))
  end)
end)
