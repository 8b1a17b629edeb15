-- On rxe0, whatever rdma-core the node has and whatever headers the module
-- was built with: the verbs newer than rdma-core 28 are found at run time
-- exactly when the node's libibverbs has them, and a call whose verb is
-- missing (from the node, or from the build's headers) raises an error that
-- names it and the release it needs, leaving everything else usable.  Run
-- by make test on Debian 12 (rdma-core 44: nothing missing) and in the
-- Debian 11 tree (rdma-core 33), with the module built there from source
-- (headers 33) and with the portable hosts (headers 44, library 33).
local ibv = require "ibverbs"
local support = require "support"

-- The rdma-core release of the libibverbs this process mapped, from its file
-- name (libibverbs.so.1.11.33.2 is rdma-core 33.2).
local function node_release()
  for line in io.lines("/proc/self/maps") do
    local v = line:match("libibverbs%.so%.1%.%d+%.(%d+)%.%d+")
    if v then return tonumber(v) end
  end
  error("libibverbs is not mapped in this process")
end

-- The late verbs, with the first release of each (csrc/late.h).
local LATE = {
  ibv_get_device_index = 30, ibv_import_device = 31, ibv_import_pd = 31, ibv_unimport_pd = 31,
  ibv_import_mr = 31, ibv_unimport_mr = 31, ibv_query_ece = 31, ibv_set_ece = 31,
  rdma_set_local_ece = 31, rdma_get_remote_ece = 31, rdma_reject_ece = 31,
  _ibv_query_gid_ex = 32, _ibv_query_gid_table = 32, ibv_reg_dmabuf_mr = 34, ibv_import_dm = 35,
  ibv_unimport_dm = 35, ibv_is_fork_initialized = 35, ibv_query_qp_data_in_order = 36,
}

local built = tonumber(ibv.rdma_core.built:match("^(%d+)"))

-- What calling a method whose verb came with release `since` (C name verb,
-- symbol version ver) must do here: "ok", or the error it must raise.
local function expected(since, verb, ver)
  if built < since then
    return ("needs rdma-core %d or later; built against %s"):format(since, ibv.rdma_core.built)
  elseif node_release() < since then
    return ("needs rdma-core %d or later (%s@%s); this node's libibverbs does not have it")
      :format(since, verb, ver)
  end
  return "ok"
end

describe("on rxe0, verbs newer than rdma-core 28", function()
  it("are missing exactly when the node's libibverbs predates them", function()
    local want = {}
    for verb, since in pairs(LATE) do
      if node_release() < since then want[#want + 1] = verb end
    end
    local got = {}
    for _, v in ipairs(ibv.rdma_core.missing) do got[#got + 1] = v end
    table.sort(want)
    table.sort(got)
    assert.same(want, got)
  end)

  it("ibv.is_fork_initialized answers, or names rdma-core 35", function()
    local want = expected(35, "ibv_is_fork_initialized", "IBVERBS_1.13")
    local ok, r = pcall(ibv.is_fork_initialized)
    if want == "ok" then
      assert.is_true(ok, r)
      assert.is_truthy(({ disabled = 1, enabled = 1, unneeded = 1 })[r], r)
    else
      assert.is_false(ok)
      assert.matches("ibv.is_fork_initialized: " .. want, r, 1, true)
    end
  end)

  it("qp:query_data_in_order answers, or names rdma-core 36, and the QP still carries traffic", function()
    local env = support.pair()
    local want = expected(36, "ibv_query_qp_data_in_order", "IBVERBS_1.14")
    local ok, r = pcall(env.a.query_data_in_order, env.a, "rdma_write")
    if want == "ok" then
      assert.is_true(ok, r)
      assert.is_number(r)
    else
      assert.is_false(ok)
      assert.matches("qp:query_data_in_order: " .. want, r, 1, true)
    end
    -- the same objects work after the error: a send and its receive
    local mr = assert(env.pd:reg_mr(64, { "local_write" }))
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mr, length = 8 } })
    assert(env.a:post_send{ wr_id = 2, opcode = "send", send_flags = { "signaled" },
      sge = { mr = mr, length = 8 } })
    local wcs = support.completions(env.cq, 2)
    assert.equal(2, #wcs)
    for _, wc in ipairs(wcs) do assert.equal("success", wc.status) end
  end)

  it("ctx:query_gid_ex gives rxe0's RoCE v2 GID, or names rdma-core 32", function()
    local ctx = support.open()
    local want = expected(32, "_ibv_query_gid_ex", "IBVERBS_1.11")
    local ok, r = pcall(ctx.query_gid_ex, ctx, support.PORT, support.GID_INDEX)
    if want == "ok" then
      assert.is_true(ok, r)
      assert.equal("roce_v2", r.gid_type)
    else
      assert.is_false(ok)
      assert.matches("ctx:query_gid_ex: " .. want, r, 1, true)
    end
  end)

  it("a name newer than the build's headers says which release brings it", function()
    local env = support.pair()
    local mr = assert(env.pd:reg_mr(64, { "local_write" }))
    local ok, r, msg = pcall(env.a.post_send, env.a, { opcode = "atomic_write", sge = { mr = mr, length = 8 } })
    if built < 44 then
      assert.is_false(ok)
      assert.matches("'atomic_write' needs rdma-core 44 or later; built against " .. ibv.rdma_core.built, r, 1, true)
    else -- a known name: posted, or refused for its own reasons (rxe has no atomic write)
      assert.not_matches("needs rdma-core", tostring(ok and msg or r), 1, true)
    end
  end)

  -- rxe of rdma-core 33 has none of these (seen in Debian 11): a clean nil, msg, EOPNOTSUPP
  it("cq_ex, qp_ex, srq_ex and memory windows work or return EOPNOTSUPP cleanly on the node's provider", function()
    local env = support.pair()
    local function works_or_eopnotsupp(what, obj, msg, errno)
      if obj then
        obj:close()
      else
        assert.equal(what .. ": Operation not supported", msg)
        assert.equal(ibv.errno.EOPNOTSUPP, errno)
      end
    end
    works_or_eopnotsupp("ibv_create_cq_ex", env.ctx:create_cq_ex{ cqe = 16 })
    works_or_eopnotsupp("ibv_create_qp_ex", env.ctx:create_qp_ex{ pd = env.pd, qp_type = "rc",
      send_cq = env.cq, recv_cq = env.cq, cap = { max_send_wr = 4, max_recv_wr = 4 } })
    works_or_eopnotsupp("ibv_create_srq_ex", env.ctx:create_srq_ex{ pd = env.pd, max_wr = 4, max_sge = 1 })
    works_or_eopnotsupp("ibv_alloc_mw", env.pd:alloc_mw(2))
    assert(env.ctx:query_port(support.PORT)) -- the context stays usable
  end)
end)
