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
end)
