-- Completion queues on rxe0: create, resize, completion channels and events
-- (req_notify, solicited only), and the extended cq_ex polled through cq:poll.
local ibv = require "ibverbs"
local support = require "support"

describe("on rxe0, a cq", function()
  local ctx
  before_each(function() ctx = support.open() end)

  it("is created from a size or an attribute table, with at least that many entries", function()
    local cq = assert(ctx:create_cq(100))
    assert.is_true(cq.cqe >= 100)
    assert.is_false(cq.extended)
    local cq2 = assert(ctx:create_cq{ cqe = 10, comp_vector = 0 })
    assert.is_true(cq2.cqe >= 10)
    assert.is_true(cq:close())
    assert.is_true(cq2:close())
  end)

  it("refuses bad sizes: negative raises, 0 and past the device's max_cqe reach the provider", function()
    local cq0, msg0 = ctx:create_cq(0) -- a legal int: the provider's answer, whatever it is
    assert(cq0 or msg0)
    if cq0 then cq0:close() end
    assert.has_error(function() ctx:create_cq(-5) end)
    assert.has_error(function() ctx:create_cq{ cqe = 4, bogus = 1 } end, "create_cq: attr: unknown field 'bogus'")
    local max = ctx:query_device().max_cqe
    local cq, msg, errno = ctx:create_cq(max + 1)
    assert.is_nil(cq)
    assert.matches("^ibv_create_cq: ", msg)
    assert.equal(22, errno)
  end)

  it("resizes, keeping what is queued", function()
    local env = support.pair{ cqe = 16 }
    local mr = assert(env.pd:reg_mr(64))
    assert(env.a:post_send{ wr_id = 5, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mr, length = 0 }, remote_addr = mr.addr, rkey = mr.rkey })
    assert.equal(1, env.cq:wait(env.wcs, 1, 2))
    assert(env.a:post_send{ wr_id = 6, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mr, length = 0 }, remote_addr = mr.addr, rkey = mr.rkey })
    local cqe = assert(env.cq:resize(300))
    assert.is_true(cqe >= 300)
    assert.equal(cqe, env.cq.cqe)
    local wc = support.completions(env.cq, 1)[1]
    assert.equal(6, wc.wr_id)
    assert.has_error(function() env.cq:resize(0) end)
    local ok, _, errno = env.cq:resize(ctx:query_device().max_cqe + 1)
    assert.is_nil(ok)
    assert.equal(22, errno)
  end)

  it("cannot close while a QP uses it, and closes once the QPs are gone", function()
    local env = support.pair()
    local ok, msg, errno = env.cq:close()
    assert.is_nil(ok)
    assert.matches("^ibv_destroy_cq: Device or resource busy", msg)
    assert.equal(16, errno)
    assert.is_true(env.a:close())
    assert.is_true(env.b:close())
    assert.is_true(env.cq:close())
  end)
end)

describe("on rxe0, a completion channel", function()
  it("times out with ETIMEDOUT when no event comes, and reports its fd", function()
    local ctx = support.open()
    local ch = assert(ctx:create_comp_channel())
    assert.is_true(ch.fd >= 0)
    local cq = assert(ctx:create_cq{ cqe = 8, channel = ch })
    assert(cq:req_notify())
    local got, msg, errno = ch:get_event(0.05)
    assert.is_nil(got)
    assert.matches("^ibv_get_cq_event: ", msg)
    assert.equal(110, errno)
    local busy = { ch:close() }
    assert.is_nil(busy[1])
    assert.equal(16, busy[3])
    assert.is_true(cq:close())
    assert.is_true(ch:close())
  end)

  -- qa sends to qb, whose receive completions go to a cq on a channel
  local function channel_pair()
    local env = support.pair()
    local ch = assert(env.ctx:create_comp_channel())
    local rcq = assert(env.ctx:create_cq{ cqe = 16, channel = ch })
    local qa = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
    local qb = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = rcq })
    local opts = { sgid_index = support.GID_INDEX }
    assert(qa:connect({ qpn = qb.qp_num, gid = env.gid }, opts))
    assert(qb:connect({ qpn = qa.qp_num, gid = env.gid }, opts))
    return env, ch, rcq, qa, qb, assert(env.pd:reg_mr(4096))
  end

  it("delivers an event for the cq after req_notify, to acknowledge with ack_events", function()
    local _, ch, rcq, qa, qb, mr = channel_pair()
    assert(rcq:req_notify())
    assert(qb:post_recv{ wr_id = 1, sge = { mr = mr, length = 64 } })
    assert(qa:post_send{ wr_id = 2, inline = "wake up" })
    local cq = assert(ch:get_event(2))
    assert.equal(rcq, cq)
    assert.equal(1, #support.completions(rcq, 1))
    assert.has_error(function() cq:ack_events(2) end)
    cq:ack_events(1)
    -- no new req_notify: no new event
    assert(qb:post_recv{ wr_id = 3, sge = { mr = mr, length = 64 } })
    assert(qa:post_send{ wr_id = 4, inline = "again" })
    assert.equal(1, #support.completions(rcq, 1))
    assert.is_nil(ch:get_event(0.1))
  end)

  it("with solicited_only, wakes for a solicited receive and not for the others", function()
    local _, ch, rcq, qa, qb, mr = channel_pair()
    assert(qb:post_recv{ { wr_id = 1, sge = { mr = mr, length = 64 } }, { wr_id = 2, sge = { mr = mr, length = 64 } } })
    assert(rcq:req_notify(true))
    assert(qa:post_send{ wr_id = 3, inline = "plain" })
    assert.equal(1, #support.completions(rcq, 1))
    assert.is_nil(ch:get_event(0.1))
    assert(qa:post_send{ wr_id = 4, inline = "urgent", send_flags = { "solicited" } })
    assert.equal(rcq, ch:get_event(2))
    local wc = support.completions(rcq, 1)[1]
    assert.equal(2, wc.wr_id)
    rcq:ack_events()
    -- closing with an unacknowledged event is fine too: close acknowledges
    assert(rcq:req_notify())
    assert(qb:post_recv{ wr_id = 5, sge = { mr = mr, length = 64 } })
    assert(qa:post_send{ wr_id = 6, inline = "last" })
    assert.equal(rcq, ch:get_event(2))
    assert.is_true(qb:close())
    assert.is_true(rcq:close())
    assert.is_true(ch:close())
  end)
end)

describe("on rxe0, a cq_ex", function()
  it("is created with wc_flags and polled through cq:poll, cq:wait and wc tables", function()
    local env = support.pair{ cq_attr = { cqe = 64, wc_flags = { "byte_len", "imm", "qp_num", "src_qp", "sl" } } }
    assert.is_true(env.cq.extended)
    local mr = assert(env.pd:reg_mr(4096))
    assert(env.b:post_recv{ { wr_id = 1, sge = { mr = mr, length = 64 } },
                            { wr_id = 2, sge = { mr = mr, length = 64 } } })
    assert(env.a:post_send{
      { wr_id = 3, opcode = "send_with_imm", imm_data = 99, inline = "cq_ex!", send_flags = { "signaled" } },
      { wr_id = 4, inline = "two", send_flags = { "signaled" } },
    })
    local wcs = ibv.wc_array(8)
    local n = assert(env.cq:wait(wcs, 4, 2))
    assert.equal(4, n)
    local seen = {}
    for i = 1, n do
      assert.equal("success", wcs:status(i))
      seen[wcs:wr_id(i)] = i
    end
    assert.equal(6, wcs:byte_len(seen[1]))
    assert.equal(99, wcs:imm_data(seen[1]))
    assert.equal(env.b.qp_num, wcs:qp_num(seen[1]))
    assert.equal("recv", wcs:opcode(seen[1]))
    assert.is_nil(wcs:imm_data(seen[2]))
    assert.equal(3, wcs:byte_len(seen[2]))
    assert.equal("send", wcs:opcode(seen[3]))
    -- the table form
    assert(env.b:post_recv{ wr_id = 5, sge = { mr = mr, length = 64 } })
    assert(env.a:post_send{ wr_id = 6, inline = "t", send_flags = { "signaled" } })
    local all = {}
    local t0 = ibv.now()
    while #all < 2 and ibv.now() - t0 < 2 do
      for _, wc in ipairs(env.cq:poll(4)) do all[#all + 1] = wc end
    end
    assert.equal(2, #all)
    assert.equal(0, env.cq:poll(wcs))
  end)

  it("is made by ctx:create_cq_ex even with the standard flags", function()
    local ctx = support.open()
    local cq = assert(ctx:create_cq_ex{ cqe = 8 })
    assert.is_true(cq.extended)
    assert.equal(0, cq:poll(ibv.wc_array(1)))
    assert.has_error(function() ctx:create_cq_ex{ cqe = 8, wc_flags = { "byte_len", "bogus" } } end)
  end)

  it("fails cleanly for wc_flags rxe lacks (completion timestamps)", function()
    local ctx = support.open()
    local cq, msg, errno = ctx:create_cq{ cqe = 8, wc_flags = { "byte_len", "completion_timestamp" } }
    assert.is_nil(cq)
    assert.matches("^ibv_create_cq_ex: ", msg)
    assert.is_number(errno)
  end)
end)
