-- ibverbs.fabric.ranks: a rank's name with its host, a list of them, the
-- ranks out of the run as rank 0 tells them, and a group broken once.
local ranks = require "ibverbs.fabric.ranks"

local function group(t)
  t.dead, t.dead_list, t.peers = t.dead or {}, t.dead_list or {}, t.peers or {}
  return t
end

describe("ibverbs.fabric.ranks", function()
  it("names a rank by its host when known (rxe-vm: node<rank + 1>), and lists names", function()
    local g = group{ hosts = { "a", nil, "c" } }
    assert.equal("rank 0 (a)", ranks.name(g, 0))
    assert.equal("rank 1", ranks.name(g, 1))
    assert.equal("rank 0 (a), rank 1 and rank 2 (c)", ranks.names(g, { 0, 1, 2 }))
    assert.equal("rank 1", ranks.names(g, { 1 }))
    assert.equal("rank 4 (node5)", ranks.name(group{ hosts = {}, launcher = "rxe-vm" }, 4))
  end)

  it("buries a rank once, drops its connection, and takes in what rank 0 says, once each", function()
    local dropped = {}
    local g = group{ size = 4, hosts = {}, peers = { [2] = "c2" },
      hub = { drop = function(_, c) dropped[#dropped + 1] = c end } }
    ranks.bury(g, 2, "gone")
    ranks.bury(g, 2, "again")
    assert.same({ "c2" }, dropped)
    assert.is_nil(g.peers[2])
    ranks.learn_dead(g, { { 2, "other" }, { 3, "late" } })
    assert.same({ { 2, "gone" }, { 3, "late" } }, ranks.dead_said(g))
    -- what is no {rank, why} pair of this group (a frame that lies) is left out
    ranks.learn_dead(g, { "x", { 99, "out" }, { 1.5, "half" }, 7, { -1 } })
    ranks.learn_dead(g, "not a list")
    assert.same({ { 2, "gone" }, { 3, "late" } }, ranks.dead_said(g))
    assert.is_nil(ranks.dead_said(group{}))
  end)

  it("keeps the first error of a broken group", function()
    local g = group{}
    assert.same({ nil, "first" }, { ranks.broken(g, "first") })
    assert.same({ nil, "first" }, { ranks.broken(g, "second") })
  end)
end)
