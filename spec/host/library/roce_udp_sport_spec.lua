-- ibv.roce_udp_sport (no device): the RoCE v2 UDP source port the Linux
-- kernel's rule gives an RC QP (include/rdma/ib_verbs.h's rdma_get_udp_sport,
-- rxe's since Linux 5.17): a flow label's fold, or with label 0 the fold of
-- a label made from both QP numbers, the same from either end; the expected
-- values worked out by hand from the rule (64-bit products: written here as
-- constants, so LuaJIT checks them too), and the argument checks.  That rxe
-- puts these ports on the wire is spec/nodes/flow_sport_spec.lua's.
local ibv = require "ibverbs"

describe("ibv.roce_udp_sport", function()
  it("folds a flow label's 20 bits into 14 over 0xc000, as ibv_flow_label_to_udp_sport", function()
    -- 0x12345: low 14 bits 0x2345, high 6 bits 0x4: 0x2345 ~ 0x4 = 0x2341
    assert.same({ 0xe341, 0x12345 }, { ibv.roce_udp_sport(0x12345) })
    assert.same({ 0xc001, 1 }, { ibv.roce_udp_sport(1) })
    assert.same({ 0xc001, 0x4000 }, { ibv.roce_udp_sport(0x4000) }) -- high bits 1, low 0
    assert.same({ 0xffc0, 0xfffff }, { ibv.roce_udp_sport(0xfffff) })
    -- a label below 0x4000 is its own port's low bits: the labels fabric_matrix chooses
    assert.equal(0xc000 + 1234, (ibv.roce_udp_sport(1234)))
    -- the QP numbers play no part when a label is set
    assert.equal(0xe341, (ibv.roce_udp_sport(0x12345, 7, 9)))
  end)

  it("with label 0 takes the label from both QP numbers, the same from either end", function()
    -- 17 * 18 = 306, nothing to fold
    assert.same({ 0xc000 + 306, 306 }, { ibv.roce_udp_sport(0, 17, 18) })
    assert.same({ 0xc000 + 306, 306 }, { ibv.roce_udp_sport(0, 18, 17) })
    -- 0x123456 * 0xabcdef = 0xc379a59ba4a (44 bits): folded by 20 and by 40 to 0xac3e3
    assert.same({ 50120, 0xac3e3 }, { ibv.roce_udp_sport(0, 0x123456, 0xabcdef) })
    assert.same({ 50120, 0xac3e3 }, { ibv.roce_udp_sport(0, 0xabcdef, 0x123456) })
    assert.same({ 65313, 0xfff1e }, { ibv.roce_udp_sport(0, 0xffffff, 0xffffff) })
  end)

  it("names the bad argument", function()
    assert.error_matches(function() ibv.roce_udp_sport(0x100000) end, "out of range")
    assert.error_matches(function() ibv.roce_udp_sport(-1) end, "out of range")
    assert.error_matches(function() ibv.roce_udp_sport(0, 5) end, "dest_qpn: a QP number expected", 1, true)
    assert.error_matches(function() ibv.roce_udp_sport(0) end, "qpn: a QP number expected", 1, true)
    assert.error_matches(function() ibv.roce_udp_sport(0, 0x1000000, 1) end, "#2.*out of range")
    assert.error_matches(function() ibv.roce_udp_sport(5, 1, 0x1000000) end, "#3.*out of range")
    assert.error_matches(function() ibv.roce_udp_sport("x") end, "#1")
  end)
end)
