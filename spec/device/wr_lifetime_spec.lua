-- Prepared WR lists on rxe0: what an entry points to stays alive and valid
-- whatever the script does to its tables afterwards, a WR that fails to parse
-- leaves its entry as it was, and ibv.transfer refuses a UD send list without AHs.
local ibv = require "ibverbs"
local support = require "support"

describe("prepared WR lists", function()
  it("leave an entry as it was when its new WR does not parse", function()
    local env = support.pair()
    local rl = ibv.recv_wrs(3)
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(3)
    sl:fill{ inline = "abc", send_flags = { "signaled" } }
    assert.error_matches(function()
      sl:set(2, { inline = "zz", send_flags = { "signaled" }, imm_data = -1 })
    end, "imm_data")
    assert(env.a:post_send(sl))
    local wcs = support.completions(env.cq, 6)
    assert.equal(6, #wcs)
    assert.equal("abc", mr:read(64, 3))
  end)
end)
