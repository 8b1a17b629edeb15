-- lua/ibverbs/bringup/rails.lua: the GID fabric_matrix.lua and fabric_check.lua
-- both pick, and a dry run's rails (no device opened).
local rails = require "ibverbs.bringup.rails"

local function ctx(gids) return { query_gid_table = function() return gids end } end

describe("lua/ibverbs/bringup/rails.lua", function()
  it("picks the given GID, 0 off Ethernet, else the port's first RoCE v2 IPv4 GID, else 0", function()
    local gids = {
      { port_num = 1, gid_index = 0, gid_type = "ib", gid = "fe80::1" },
      { port_num = 2, gid_index = 3, gid_type = "roce_v2", gid = "::ffff:10.0.0.2" },
      { port_num = 1, gid_index = 1, gid_type = "roce_v2", gid = "fe80::2" },
      { port_num = 1, gid_index = 2, gid_type = "roce_v2", gid = "::ffff:10.0.0.1" },
    }
    assert.equal(5, rails.pick_gid(ctx(gids), 1, "ethernet", 5))
    assert.equal(0, rails.pick_gid(ctx(gids), 1, "infiniband"))
    assert.equal(2, rails.pick_gid(ctx(gids), 1, "ethernet"))
    assert.equal(3, rails.pick_gid(ctx(gids), 2, "ethernet"))
    assert.equal(0, rails.pick_gid(ctx({}), 1, "ethernet"))
  end)

  it("gives a dry run one rail per device named, indexed, and no ibverbs", function()
    local list, ibv = rails.open({ dry_run = true, ib_dev = "a,b" }, {})
    assert.same({ { name = "a", dry = true, index = 1 }, { name = "b", dry = true, index = 2 } }, list)
    assert.is_nil(ibv)
    assert.same({ { name = "dry", dry = true, index = 1 } }, (rails.open({ dry_run = true }, {})))
  end)
end)
