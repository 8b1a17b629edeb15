-- Async events on rxe0: ctx:get_async_event for events the VM can provoke.
local support = require "support"

local sh = support.sh

local function events(ctx, timeout)
  local out = {}
  while true do
    local ev = ctx:get_async_event(timeout or 0.3)
    if not ev then return out end
    out[#out + 1] = ev
  end
end

describe("on rxe0, ctx:get_async_event", function()
  it("reports a completion queue overrun as cq_err naming the cq object", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    local cq = assert(ctx:create_cq(1))
    local qp = assert(pd:create_qp{ qp_type = "ud", send_cq = cq, recv_cq = cq, cap = { max_send_wr = 16 } })
    assert(qp:to_init{}); assert(qp:to_rtr{}); assert(qp:to_rts{})
    local ah = assert(pd:create_ah{ port_num = 1, grh = { dgid = ctx:query_gid(1, 1), sgid_index = 1 } })
    for i = 1, 8 do
      assert(qp:post_send{ wr_id = i, inline = "x", send_flags = { "signaled" }, ah = ah, remote_qpn = 1,
                           remote_qkey = 1 })
    end
    local evs = events(ctx, 1)
    assert.is_true(#evs >= 1)
    assert.equal("cq_err", evs[1].type)
    assert.equal(cq, evs[1].cq)
  end)

  it("reports port_err and port_active when the netdev under rxe0 goes down and up", function()
    local ctx = support.open()
    events(ctx, 0.05)
    local ok, status = pcall(function()
      assert.is_true(sh("ip link set d0 down"))
      local down = events(ctx)
      assert.equal("port_err", down[1] and down[1].type)
      assert.equal(1, down[1].port_num)
      assert.equal("down", ctx:query_port(1).state)
    end)
    assert.is_true(sh("ip link set d0 up"))
    assert(ok, status)
    local up = events(ctx)
    assert.equal("port_active", up[1] and up[1].type)
    assert.equal(1, up[1].port_num)
    assert.equal("active", ctx:query_port(1).state)
    assert.equal("::ffff:192.0.2.1", ctx:query_gid(1, 1))
  end)
end)
