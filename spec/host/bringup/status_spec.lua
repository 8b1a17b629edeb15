-- ibverbs.bringup.status: the exit status both bring-up tools give each rank.
describe("lua/ibverbs/bringup/status.lua: a rank's exit status from rank 0's verdict", function()
  local status = dofile("lua/ibverbs/bringup/status.lua")
  it("is 1 on the ranks at fault, 0 elsewhere, 1 everywhere with exit_any when any, 2 when none arrived", function()
    local v = { bad = { 1, 3 }, any = true }
    assert.same({ 0, 1, 0, 1 }, { status.own(0, false, v), status.own(1, false, v),
      status.own(2, false, v), status.own(3, false, v) })
    assert.equal(1, status.own(0, true, v))
    assert.equal(0, status.own(0, true, { bad = {}, any = false }))
    assert.equal(2, status.own(0, false, nil))
  end)

  it("is 3 on rank 0 alone when the fabric's verdicts are all there is (its node has none), 1 when its node has one",
    function()
    local v = { bad = {}, any = false, fabric = 2 }
    assert.same({ 3, 0, 0 }, { status.own(0, false, v), status.own(1, false, v), status.own(2, false, v) })
    assert.equal(3, status.own(0, true, v))
    assert.equal(0, status.own(1, true, v))
    v = { bad = { 0, 2 }, any = true, fabric = 1 }
    assert.same({ 1, 0, 1 }, { status.own(0, false, v), status.own(1, false, v), status.own(2, false, v) })
    assert.equal(0, status.own(0, false, { bad = {}, any = false, fabric = 0 }))
  end)
end)
