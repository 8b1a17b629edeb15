-- Address handles on rxe0: pd:create_ah and pd:create_ah_from_wc make AHs a
-- UD send goes through; ctx:init_ah_from_wc gives the attributes; bad input
-- raises naming the field or argument; verbs' refusals come as nil, msg,
-- errno; a closed AH is refused by the post that names it.
local ibv = require "ibverbs"
local support = require "support"

local QKEY = 0x11111111
local EINVAL, ENODATA, EPROTONOSUPPORT = ibv.errno.EINVAL, 61, 93

local function fails(call, errno, ok, msg, e)
  assert.is_nil(ok)
  assert.equal(call, msg:match("^[%w_]+"))
  assert.equal(errno, e, msg)
end

-- Sends text from env.a to env.b through ah; returns b's receive completion and the bytes after the GRH.
local function send_through(env, ah, text, mr)
  assert(env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 40 + 64 } })
  assert(env.a:post_send{ wr_id = 2, inline = text, send_flags = { "signaled" }, ah = ah,
                          remote_qpn = env.b.qp_num, remote_qkey = QKEY })
  local recv
  for _, wc in ipairs(support.completions(env.cq, 2)) do
    assert.equal("success", wc.status)
    if wc.opcode == "recv" then recv = wc end
  end
  return recv, mr:read(40, #text)
end

describe("on rxe0, pd:create_ah", function()
  local env, mr
  before_each(function()
    env = support.pair{ qp_type = "ud" }
    mr = assert(env.pd:reg_mr(4096))
  end)

  it("makes an ibverbs.ah that a UD send goes through, and that keeps its PD busy", function()
    local ah = assert(env.pd:create_ah{ port_num = 1, sl = 0, static_rate = 0,
      grh = { dgid = env.gid, sgid_index = support.GID_INDEX, hop_limit = 64, traffic_class = 0, flow_label = 0 } })
    assert.equal("ibverbs.ah", getmetatable(ah).__name)
    assert.is_false(ah:is_closed())
    local wc, got = send_through(env, ah, "through an ah", mr)
    assert.equal("through an ah", got)
    assert.equal(env.a.qp_num, wc.src_qp)
    assert.same({ "grh" }, wc.wc_flags)
    mr:close()
    local ok, msg, errno = env.pd:close()
    assert.is_nil(ok)
    assert.matches("^ibv_dealloc_pd: Device or resource busy", msg)
    assert.equal(ibv.errno.EBUSY, errno)
    assert.is_true(ah:close())
    assert.is_true(ah:close()) -- twice is harmless
    assert.is_true(ah:is_closed())
  end)

  it("takes the GID in its text form (rxe0's RoCE v2 GID, ::ffff:192.0.2.1)", function()
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = "::ffff:192.0.2.1", sgid_index = 1 } })
    assert.equal("text gid", select(2, send_through(env, ah, "text gid", mr)))
    ah:close()
  end)

  it("raises on bad attributes, naming the field", function()
    local pd = env.pd
    assert.error_matches(function() pd:create_ah() end, "create_ah: ah_attr: table expected, got no value", 1, true)
    assert.error_matches(function() pd:create_ah{ port = 1 } end, "create_ah: ah_attr: unknown field 'port'", 1, true)
    assert.error_matches(function() pd:create_ah{ sl = 16 } end, "create_ah: field 'sl': 16 out of range [0, 15]",
      1, true)
    assert.error_matches(function() pd:create_ah{ port_num = 0 } end, "field 'port_num': 0 out of range", 1, true)
    assert.error_matches(function() pd:create_ah{ grh = { dgid = "zz" } } end,
      "create_ah: field 'dgid': GID expected (\"fe80::1\" form or 16 raw bytes), got 'zz'", 1, true)
    assert.error_matches(function() pd:create_ah{ grh = { dgid = env.gid, sgid = 1 } } end,
      "create_ah: grh: unknown field 'sgid'", 1, true)
    assert.error_matches(function() pd:create_ah{ grh = { dgid = env.gid, flow_label = 0x100000 } } end,
      "field 'flow_label'", 1, true)
  end)

  it("fails with nil, msg, errno where rxe refuses the address", function()
    -- RoCE needs a GRH: a LID-only address is EINVAL
    fails("ibv_create_ah", EINVAL, env.pd:create_ah{ port_num = 1, dlid = 1 })
    -- a source GID index past what rxe0 has: ENODATA
    fails("ibv_create_ah", ENODATA, env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 200 } })
    -- rxe0 has one port
    fails("ibv_create_ah", EINVAL, env.pd:create_ah{ port_num = 2, grh = { dgid = env.gid, sgid_index = 1 } })
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
    assert.equal("still", select(2, send_through(env, ah, "still", mr)))
  end)
end)

describe("on rxe0, AHs from a received completion", function()
  it("create_ah_from_wc (from a wc table and from a wc_array) answers the sender; init_ah_from_wc gives its attributes",
    function()
      local env = support.pair{ qp_type = "ud" }
      local mra, mrb = assert(env.pd:reg_mr(4096)), assert(env.pd:reg_mr(4096))
      local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
      assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 40 + 64 } })
      assert(env.a:post_send{ wr_id = 2, inline = "ask", ah = ah, remote_qpn = env.b.qp_num, remote_qkey = QKEY,
                              send_flags = { "signaled" } })
      local wcs = ibv.wc_array(4)
      assert.equal(2, assert(env.cq:wait(wcs, 2, 2)))
      local i = wcs:opcode(1) == "recv" and 1 or 2
      local grh = mrb:read(0, 40)
      local from_table = assert(env.pd:create_ah_from_wc(wcs:get(i), grh, 1))
      local from_array = assert(env.pd:create_ah_from_wc(wcs, i, grh, 1))
      for n, back in ipairs{ from_table, from_array } do
        assert(env.a:post_recv{ wr_id = 10 + n, sge = { mr = mra, length = 40 + 64 } })
        assert(env.b:post_send{ wr_id = 20 + n, inline = "reply " .. n, ah = back, remote_qpn = env.a.qp_num,
                                remote_qkey = QKEY, send_flags = { "signaled" } })
        for _, wc in ipairs(support.completions(env.cq, 2)) do assert.equal("success", wc.status) end
        assert.equal("reply " .. n, mra:read(40, 7))
      end
      local attr = assert(env.ctx:init_ah_from_wc(1, wcs, i, grh))
      assert.is_true(attr.is_global)
      assert.equal(1, attr.port_num)
      assert.equal(env.gid, attr.grh.dgid)
      assert.is_true(from_table:close() and from_array:close() and ah:close())
    end)

  it("raise on a bad completion, GRH or port, naming the argument", function()
    local env = support.pair{ qp_type = "ud" }
    local pd, grh = env.pd, ("\0"):rep(40)
    assert.error_matches(function() pd:create_ah_from_wc(5, grh, 1) end,
      "bad argument #1 to 'create_ah_from_wc' (wc table or wc_array expected, got number)", 1, true)
    assert.error_matches(function() pd:create_ah_from_wc({ src_qp = 1 }, "x", 1) end,
      "bad argument #2 to 'create_ah_from_wc' (the 40 GRH bytes expected)", 1, true)
    assert.error_matches(function() pd:create_ah_from_wc(ibv.wc_array(2), 3, grh, 1) end,
      "bad argument #2 to 'create_ah_from_wc' (3 out of range [1, 2])", 1, true)
    assert.error_matches(function() pd:create_ah_from_wc({ src_qp = 1 }, grh, 0) end,
      "bad argument #3 to 'create_ah_from_wc'", 1, true)
    assert.error_matches(function() pd:create_ah_from_wc({ sl = 16 }, grh, 1) end, "field 'sl'", 1, true)
    assert.error_matches(function() env.ctx:init_ah_from_wc(0, { src_qp = 1 }, grh) end,
      "bad argument #1 to 'init_ah_from_wc'", 1, true)
  end)

  it("fail with nil, msg, errno for a GRH that is not RoCE's or a completion without one", function()
    local env = support.pair{ qp_type = "ud" }
    local zeros = ("\0"):rep(40)
    fails("ibv_create_ah_from_wc", EPROTONOSUPPORT,
      env.pd:create_ah_from_wc({ src_qp = 1, wc_flags = { "grh" } }, zeros, 1))
    fails("ibv_create_ah_from_wc", EINVAL, env.pd:create_ah_from_wc({ src_qp = 1 }, zeros, 1))
    fails("ibv_init_ah_from_wc", EPROTONOSUPPORT,
      env.ctx:init_ah_from_wc(1, { src_qp = 1, wc_flags = { "grh" } }, zeros))
  end)
end)

describe("on rxe0, a closed AH", function()
  it("is refused by name when a prepared send list that holds it is posted", function()
    local env = support.pair{ qp_type = "ud" }
    local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = "send", inline = "x", ah = ah, remote_qpn = env.b.qp_num, remote_qkey = QKEY })
    assert.is_true(ah:close()) -- the list keeps the userdata, not the AH
    assert.error_matches(function() env.a:post_send(sl) end, "post_send: WR 1: attempt to use a closed ibverbs.ah",
      1, true)
    assert.error_matches(function()
      env.a:post_send{ inline = "y", ah = ah, remote_qpn = env.b.qp_num, remote_qkey = QKEY }
    end, "attempt to use a closed ibverbs.ah", 1, true)
    assert.matches("closed", tostring(ah))
  end)
end)
