-- Receive work queues and RSS indirection tables on rxe0 (Linux 6.1
-- rdma_rxe, rdma-core 44): rxe has no WQs, so ctx:create_wq must fail with
-- nil, msg, EOPNOTSUPP after reading its attributes strictly (a bad one
-- raises, naming it); an indirection table, which needs WQs, and an RSS QP
-- are refused by name before verbs; the context stays usable.
local support = require "support"

local unsupported, still_works = support.unsupported, support.still_works

describe("on rxe0, receive work queues", function()
  local env
  before_each(function() env = support.pair() end)

  it("create_wq: EOPNOTSUPP; an RSS QP and an indirection table are refused before verbs", function()
    unsupported("ibv_create_wq", env.ctx:create_wq{ pd = env.pd, cq = env.cq, max_wr = 8 })
    assert.has_error(function() env.ctx:create_wq{ cq = env.cq } end)
    assert.has_error(function() env.ctx:create_rwq_ind_table{ ind_tbl = { env.cq } } end)
    assert.has_error(function() env.ctx:create_rwq_ind_table{ ind_tbl = {} } end)
    assert.has_error(function() env.ctx:create_qp_ex{ qp_type = "raw_packet", pd = env.pd, rwq_ind_tbl = env.pd } end)
    still_works(env)
  end)

  it("create_wq reads every attribute before verbs: bad ones raise naming the field, good ones EOPNOTSUPP", function()
    local ctx, pd, cq = env.ctx, env.pd, env.cq
    assert.error_matches(function() ctx:create_wq{ cq = cq } end,
      "create_wq: init_attr: fields 'pd' and 'cq' are required", 1, true)
    assert.error_matches(function() ctx:create_wq{ pd = pd, cq = cq, wq_type = "sq" } end,
      "create_wq: field 'wq_type': invalid value 'sq' (expected one of 'rq')", 1, true)
    assert.error_matches(function() ctx:create_wq{ pd = pd, cq = cq, max_wr = 0 } end,
      "create_wq: field 'max_wr': 0 out of range [1, 4294967295]", 1, true)
    assert.error_matches(function() ctx:create_wq{ pd = pd, cq = cq, bogus = 0 } end,
      "create_wq: init_attr: unknown field 'bogus'", 1, true)
    assert.error_matches(function() ctx:create_wq{ pd = pd, cq = cq, create_flags = { "nope" } } end,
      "create_wq: field 'create_flags': invalid value 'nope'", 1, true)
    assert.error_matches(function() ctx:create_wq{ pd = cq, cq = cq } end, "field 'pd'", 1, true)
    unsupported("ibv_create_wq", ctx:create_wq{ pd = pd, cq = cq, wq_type = "rq", max_wr = 4, max_sge = 2,
                                               create_flags = { "cvlan_stripping" } })
    -- the failed calls hold nothing: the PD and the CQ close
    local pd2, cq2 = assert(ctx:alloc_pd()), assert(ctx:create_cq(4))
    unsupported("ibv_create_wq", ctx:create_wq{ pd = pd2, cq = cq2 })
    assert.is_true(pd2:close())
    assert.is_true(cq2:close())
    still_works(env)
  end)

  it("create_rwq_ind_table: its table of WQs is checked by name (no WQ can exist on rxe)", function()
    local ctx = env.ctx
    assert.error_matches(function() ctx:create_rwq_ind_table{} end,
      "create_rwq_ind_table: init_attr: field 'ind_tbl': array of WQs expected, got nil", 1, true)
    assert.error_matches(function() ctx:create_rwq_ind_table{ ind_tbl = {} } end,
      "create_rwq_ind_table: init_attr: field 'ind_tbl': 0 WQs, log_ind_tbl_size 0 needs 1", 1, true)
    assert.error_matches(function() ctx:create_rwq_ind_table{ ind_tbl = { env.cq }, log_ind_tbl_size = 3 } end,
      "create_rwq_ind_table: init_attr: field 'ind_tbl': 1 WQs, log_ind_tbl_size 3 needs 8", 1, true)
    assert.error_matches(function() ctx:create_rwq_ind_table{ ind_tbl = { env.cq } } end,
      "create_rwq_ind_table: ind_tbl[1]: ibverbs.wq expected, got userdata", 1, true)
    assert.error_matches(function() ctx:create_rwq_ind_table{ ind_tbl = {}, bogus = 1 } end,
      "create_rwq_ind_table: init_attr: unknown field 'bogus'", 1, true)
    assert.error_matches(function()
      ctx:create_qp_ex{ qp_type = "raw_packet", pd = env.pd, rwq_ind_tbl = env.pd }
    end, "create_qp_ex: field 'rwq_ind_tbl': ibverbs.rwq_ind_tbl expected", 1, true)
  end)

  it("on a closed context: create_wq and create_rwq_ind_table raise 'attempt to use a closed ibverbs.context'",
    function()
      local ctx = support.open()
      assert.is_true(ctx:close())
      assert.has_error(function() ctx:create_wq{ pd = env.pd, cq = env.cq } end,
        "create_wq: attempt to use a closed ibverbs.context")
      assert.has_error(function() ctx:create_rwq_ind_table{ ind_tbl = {} } end,
        "create_rwq_ind_table: attempt to use a closed ibverbs.context")
    end)
end)
