-- rdma_cm on rxe0: a PD given to id:create_qp stays the id's (librdmacm keeps
-- it as id->pd after the QP is gone), so it cannot be freed under the id.
local cm = require "ibverbs.cm"

describe("a cm id's QP on a PD of the script's", function()
  it("keeps the PD busy while the id lives, even after destroy_qp", function()
    local id = assert(cm.create_id())
    assert(id:resolve_addr(nil, "192.0.2.1:1", 2000))
    local pd = assert(id.context:alloc_pd())
    assert(id:create_qp{ pd = pd, qp_type = "rc", cap = { max_send_wr = 2, max_recv_wr = 2 } })
    assert.is_true(id:destroy_qp())
    local ok, msg, errno = pd:close()
    assert.is_nil(ok, "the PD was freed while the id still names it")
    assert.matches("busy", msg)
    assert.equal(16, errno)
    assert.equal(pd, id.pd)
    local mr = assert(id.pd:reg_mr(64))
    assert.is_true(mr:close())
    assert.is_true(id:close())
    assert.is_true(pd:close())
  end)
end)
