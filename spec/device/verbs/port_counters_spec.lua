-- ctx:port_counters on rxe0: soft-RoCE's hw_counters as name -> integer,
-- their rise over RC traffic as deltas, a bad port refused by name.
local ibv = require "ibverbs"
local pc = require "ibverbs.port_counters"
local support = require "support"

-- Two RC QPs on one CQ connected through port 1, n signaled RDMA writes.
local function writes(ctx, n)
  local pd = assert(ctx:alloc_pd())
  local cq = assert(ctx:create_cq{ cqe = 16 })
  local src = assert(pd:reg_mr(64, { "local_write" }))
  local dst = assert(pd:reg_mr(64, { "local_write", "remote_write" }))
  local function new_qp()
    return assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
      cap = { max_send_wr = 4, max_recv_wr = 4 } })
  end
  local a, b = new_qp(), new_qp()
  local gid = assert(ctx:query_gid(1, 1))
  local opts = { sgid_index = 1, qp_access_flags = { "remote_write" } }
  assert(a:connect({ qpn = b.qp_num, gid = gid }, opts))
  assert(b:connect({ qpn = a.qp_num, gid = gid }, opts))
  local wcs = ibv.wc_array(1)
  for _ = 1, n do
    assert(a:post_send{ opcode = "rdma_write", send_flags = { "signaled" }, sge = { mr = src, length = 8 },
      remote_addr = dst.addr, rkey = dst.rkey })
    assert.equal(1, cq:wait(wcs, 1, 5))
    assert.equal("success", wcs:status(1))
  end
  for _, o in ipairs({ a, b, src, dst, cq, pd }) do o:close() end
end

describe("on rxe0, port_counters.read", function()
  it("reads soft-RoCE's hw_counters (no InfiniBand counters/ on rxe), lifespan left out", function()
    local ctx = support.open()
    local c = assert(pc.read(ctx, 1))
    for _, name in ipairs({ "sent_pkts", "rcvd_pkts", "retry_exceeded_err", "completer_retry_err",
      "out_of_seq_request", "duplicate_request", "rcvd_seq_err", "link_downed" }) do
      assert.is_number(c[name], name)
    end
    assert.is_nil(c.lifespan)
    assert.is_nil(c.symbol_error)
    assert.same(c, assert(pc.read("rxe0", 1)))
    ctx:close()
  end)

  it("rises over RC traffic: packets counted, no error counter past its threshold", function()
    local ctx = support.open()
    local before = assert(pc.read(ctx, 1))
    writes(ctx, 20)
    -- the kernel serves hw_counters from a copy at most `lifespan` ms old: read until they moved
    -- (once under LuaJIT, sent_pkts had and rcvd_pkts had not, read at once)
    local d, unknown
    local deadline = ibv.now() + 2
    repeat
      d, unknown = pc.deltas(before, assert(pc.read(ctx, 1)))
      if (d.rcvd_pkts or 0) >= 20 and (d.sent_pkts or 0) >= 20 then break end
      require("socket").sleep(0.02)
    until ibv.now() > deadline
    assert.same({}, unknown)
    assert.is_true(d.sent_pkts >= 20, "sent_pkts rose by " .. tostring(d.sent_pkts))
    assert.is_true(d.rcvd_pkts >= 20, "rcvd_pkts rose by " .. tostring(d.rcvd_pkts))
    assert.same({}, pc.exceeded(d))
    ctx:close()
  end)

  it("refuses a port that is not one; a port the device lacks has no counters", function()
    local ctx = support.open()
    assert.has_error(function() pc.read(ctx, 0) end,
      "bad argument #2 to 'read' (port 1 to 255 expected, got 0)")
    local c, err = pc.read(ctx, 2)
    assert.is_nil(c)
    assert.matches("rxe0 port 2: no counters in /sys/class/infiniband/rxe0/ports/2/", err)
    ctx:close()
  end)
end)
