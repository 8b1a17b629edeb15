-- Thread domains and parent domains on rxe0 (Linux 6.1 rdma_rxe, rdma-core
-- 44): rxe has neither, so ctx:alloc_td and ctx:alloc_parent_domain must fail
-- with nil, msg, EOPNOTSUPP after reading their arguments strictly (a bad
-- one raises, naming it), and leave the context usable.  What rxe does with
-- a cq_ex's parent_domain (it takes any PD) is checked as it is.
local ibv = require "ibverbs"
local support = require "support"


local unsupported, still_works = support.unsupported, support.still_works

describe("on rxe0, thread and parent domains", function()
  local env
  before_each(function() env = support.pair() end)

  it("alloc_td and alloc_parent_domain: EOPNOTSUPP", function()
    unsupported("ibv_alloc_td", env.ctx:alloc_td())
    unsupported("ibv_alloc_parent_domain", env.ctx:alloc_parent_domain{ pd = env.pd })
    assert.has_error(function() env.ctx:alloc_parent_domain{} end, "alloc_parent_domain: attr: field 'pd' is required")
    assert.has_error(function() env.ctx:create_cq{ cqe = 4, parent_domain = env.cq } end)
    -- rxe takes any PD as a cq_ex's parent_domain (it does not look at it); the CQ keeps it alive
    local pd = assert(env.ctx:alloc_pd())
    local cq = assert(env.ctx:create_cq{ cqe = 4, parent_domain = pd })
    assert.is_true(cq.extended)
    assert.equal(ibv.errno.EBUSY, select(3, pd:close()))
    assert.is_true(cq:close())
    assert.is_true(pd:close())
    still_works(env)
  end)

  it("alloc_td reads its attributes strictly before verbs: EOPNOTSUPP with or without them", function()
    unsupported("ibv_alloc_td", env.ctx:alloc_td{})
    unsupported("ibv_alloc_td", env.ctx:alloc_td{ comp_mask = 1 })
    assert.error_matches(function() env.ctx:alloc_td{ bogus = 1 } end, "alloc_td: attr: unknown field 'bogus'", 1, true)
    assert.error_matches(function() env.ctx:alloc_td{ comp_mask = -1 } end,
      "alloc_td: field 'comp_mask': -1 out of range [0, 4294967295]", 1, true)
    assert.error_matches(function() env.ctx.alloc_td(env.pd) end, "ibverbs.context expected", 1, true)
    still_works(env)
  end)

  it("alloc_parent_domain raises on a bad attribute table, naming the field", function()
    local ctx = env.ctx
    assert.error_matches(function() ctx:alloc_parent_domain() end,
      "bad argument #1 to 'alloc_parent_domain' (table expected, got no value)", 1, true)
    assert.error_matches(function() ctx:alloc_parent_domain{ pd = env.pd, x = 1 } end,
      "alloc_parent_domain: attr: unknown field 'x'", 1, true)
    assert.error_matches(function() ctx:alloc_parent_domain{ pd = env.pd, td = env.pd } end,
      "alloc_parent_domain: field 'td': ibverbs.td expected", 1, true)
    assert.error_matches(function() ctx:alloc_parent_domain{ pd = env.cq } end,
      "alloc_parent_domain: field 'pd': ibverbs.pd expected", 1, true)
    -- a failed call leaves the PD it named free
    unsupported("ibv_alloc_parent_domain", ctx:alloc_parent_domain{ pd = env.pd, td = nil })
    local pd = assert(ctx:alloc_pd())
    unsupported("ibv_alloc_parent_domain", ctx:alloc_parent_domain{ pd = pd })
    assert.is_true(pd:close())
  end)

  it("on a closed context: both raise 'attempt to use a closed ibverbs.context'", function()
    local ctx = support.open()
    local pd = assert(ctx:alloc_pd())
    assert.is_true(pd:close())
    assert.is_true(ctx:close())
    assert.has_error(function() ctx:alloc_td() end, "alloc_td: attempt to use a closed ibverbs.context")
    assert.has_error(function() ctx:alloc_parent_domain{ pd = pd } end,
      "alloc_parent_domain: attempt to use a closed ibverbs.context")
  end)
end)
