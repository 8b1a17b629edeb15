-- lua/ibverbs/bringup/matrix/flow_flags.lua: the flows of the pairs judged one by one, against the
-- fabric's reference and the other flows of their pair.
local flow_flags = require "ibverbs.bringup.matrix.flow_flags"

describe("the flows' flags (lua/ibverbs/bringup/matrix/flow_flags.lua)", function()
  local function flow(a, b, x)
    local f = { a = a, b = b, rail = 1, host_a = "node" .. (a + 1), host_b = "node" .. (b + 1), samples = 500,
      stalls = 0, lat_us = 3, write_mbs = 12000, send_mbs = 11900 }
    for k, v in pairs(x or {}) do f[k] = v end
    return f
  end

  it("flags a failed flow, one that stalls above the floor and its siblings, one slow against the fabric or its "
    .. "siblings", function()
    local flows = {}
    for a = 0, 3 do
      for b = a + 1, 4 do
        for _ = 1, 4 do flows[#flows + 1] = flow(a, b) end
      end
    end
    flows[1].failed = "transport retry counter exceeded"
    flows[2].stalls = 10 -- 2 %, its siblings none
    flows[3].stalls = 1 -- 0.2 %: not above the floor
    flows[5].lat_us = 7 -- 2.3 x the fabric's
    flows[9].write_mbs = 10000 -- 0.83 x
    local bad = flow_flags.flag(flows, flow_flags.group(flows), {})
    assert.equal("failed: transport retry counter exceeded", bad[1])
    assert.equal("stalls 2.00 %", bad[2])
    assert.is_false(bad[3])
    assert.equal("latency 2.33 x the fabric's", bad[5])
    assert.equal("RDMA write bandwidth 0.833 x the fabric's", bad[9])
    local n = 0
    for i = 1, #flows do if bad[i] then n = n + 1 end end
    assert.equal(4, n)
  end)

  it("does not flag a flow whose every sibling stalls as much (the pair's ends), and judges one alone against the "
    .. "fabric", function()
    local flows = {}
    for b = 1, 4 do
      for _ = 1, 4 do flows[#flows + 1] = flow(0, b, { stalls = b == 1 and 10 or 0 }) end
    end
    flows[#flows + 1] = flow(2, 3, { stalls = 10 }) -- alone: no sibling
    local bad = flow_flags.flag(flows, flow_flags.group(flows), {})
    for i = 1, 4 do assert.is_false(bad[i]) end
    assert.equal("stalls 2.00 %", bad[#flows])
    -- a pair's flows by ranks whatever their order, or by host names without ranks
    assert.equal(flow_flags.pair_id(3, 2, 1), flow_flags.pair_id(2, 3, 1))
    assert.equal(flow_flags.pair_id("b", "a", 2), flow_flags.pair_id("a", "b", 2))
    assert.are_not.equal(flow_flags.pair_id(2, 3, 1), flow_flags.pair_id(2, 3, 2))
  end)
end)
