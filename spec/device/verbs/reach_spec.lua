-- On rxe0, whatever rdma-core the node has and whatever headers the module
-- was built with: the verbs newer than rdma-core 28 are found at run time
-- exactly when the node's libibverbs has them, and a call whose verb is
-- missing (from the node, or from the build's headers) raises an error that
-- names it and the release it needs, leaving everything else usable; the GID
-- table and entries come from sysfs where the verbs are missing, the same as
-- the verbs give them.  Run by make test on Debian 12 (rdma-core 44: nothing
-- missing) and in the Debian 11 tree (rdma-core 33), with the module built
-- there from source (headers 33) and with the portable hosts (headers 44,
-- library 33); and, a child busted run of this file, under the test aid
-- IBVL_RDMA_CORE=28 (every verb newer than 28 treated as absent).
local ibv = require "ibverbs"
local support = require "support"

-- The rdma-core release this process acts as: that of the libibverbs it
-- mapped, from its file name (libibverbs.so.1.11.33.2 is rdma-core 33.2),
-- or IBVL_RDMA_CORE's when that is lower.
local function node_release()
  for line in io.lines("/proc/self/maps") do
    local v = line:match("libibverbs%.so%.1%.%d+%.(%d+)%.%d+")
    if v then return math.min(tonumber(v), ibv.rdma_core.aid or math.huge) end
  end
  error("libibverbs is not mapped in this process")
end

-- The late verbs, with the first release of each (csrc/base/late.h).
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
    return ("needs rdma-core %d or later (%s@%s); this node's %s does not have it")
      :format(since, verb, ver, verb:match("^rdma_") and "librdmacm" or "libibverbs")
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

  it("device_index, qp:query_ece, pd:reg_dmabuf_mr, id:set_local_ece answer, or name rdma-core 30, 31, 34",
    function()
    local d = assert(ibv.devices())[1]
    if node_release() < 30 or built < 30 then
      assert.equal(-1, d.device_index) -- not known without ibv_get_device_index
    else
      assert.is_true(d.device_index >= 0)
    end
    local env = support.pair()
    local calls = {
      { 31, "ibv_query_ece", "IBVERBS_1.10", "qp:query_ece", function() return env.a:query_ece() end },
      { 34, "ibv_reg_dmabuf_mr", "IBVERBS_1.12", "pd:reg_dmabuf_mr",
        function() return env.pd:reg_dmabuf_mr{ fd = -1, length = 4096 } end },
      { 31, "rdma_set_local_ece", "RDMACM_1.3", "id:set_local_ece", function()
        local id = assert(require("ibverbs.cm").create_id())
        return id:set_local_ece{ vendor_id = 0x15b3, options = 1 }
      end },
    }
    for _, c in ipairs(calls) do
      local want = expected(c[1], c[2], c[3])
      local ok, r = pcall(c[5])
      if want == "ok" then
        assert.is_true(ok, r) -- the verb ran: a result, or nil, message, errno from the provider
      else
        assert.is_false(ok)
        assert.matches(c[4] .. ": " .. want, r, 1, true)
      end
    end
  end)

  it("ctx:query_gid_ex gives rxe0's RoCE v2 GID, from the verb or, without it, from sysfs", function()
    local ctx = support.open()
    local e = assert(ctx:query_gid_ex(support.PORT, support.GID_INDEX))
    assert.same({ gid = "::ffff:192.0.2.1", gid_index = support.GID_INDEX, port_num = support.PORT,
                  gid_type = "roce_v2", ndev_ifindex = e.ndev_ifindex }, e)
    assert.is_true(e.ndev_ifindex > 0)
    local fallback = node_release() < 32 or built < 32
    assert.same(fallback and { "ctx:query_gid_table", "ctx:query_gid_ex" } or {}, ibv.rdma_core.fallbacks)
  end)

  -- What the GID calls give, as text, in a child with env before it.
  local GIDS = [[
    local ibv = require "ibverbs"
    local ctx = assert(ibv.open("rxe0"))
    local function row(e)
      return ("%d %d %s %s %d"):format(e.port_num, e.gid_index, e.gid, e.gid_type, e.ndev_ifindex)
    end
    for _, e in ipairs(assert(ctx:query_gid_table())) do
      print("table " .. row(e))
      print("entry " .. row(assert(ctx:query_gid_ex(e.port_num, e.gid_index))))
    end
    print("empty", select(3, ctx:query_gid_ex(1, 100)) == ibv.errno.ENODATA)
    print("no port", select(3, ctx:query_gid_ex(9, 0)))
    print("max 1", select(2, ctx:query_gid_table(1)))
    print("fallbacks", table.concat(ibv.rdma_core.fallbacks, " "))
  ]]
  local function gids(env)
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write(GIDS)
    f:close()
    local out, rc = support.capture(("env %s %s %s"):format(env, support.LUA, path))
    os.remove(path)
    assert.equal(0, rc, out)
    return out
  end

  it("ctx:query_gid_table and query_gid_ex: the same entries from sysfs (IBVL_RDMA_CORE=28) as from the verbs",
    function()
    local aid, node = gids("IBVL_RDMA_CORE=28"), gids("-u IBVL_RDMA_CORE")
    assert.matches("table 1 1 ::ffff:192%.0%.2%.1 roce_v2 %d+\n", aid)
    assert.matches("table 1 0 fe80::[%x:]+ roce_v2 %d+\n", aid) -- the netdev's link-local address
    assert.matches("\nempty\ttrue\n", aid)
    assert.matches("\nno port\t22\n", aid)
    assert.matches("\nmax 1\tibv_query_gid_table: Invalid argument\t22\n", aid)
    assert.matches("\nfallbacks\tctx:query_gid_table ctx:query_gid_ex\n", aid)
    -- the verbs' answers where the node has them (rdma-core 32 and later), else sysfs's again
    assert.equal(aid:gsub("fallbacks[^\n]*", ""), (node:gsub("fallbacks[^\n]*", "")))
  end)

  -- the whole of this file again, as on a node with rdma-core 28: where the node lacks none of
  -- the later verbs (the Debian 11 runs lack some already; that child skips it)
  if not ibv.rdma_core.aid and #ibv.rdma_core.missing == 0 then
    it("passes as a whole under IBVL_RDMA_CORE=28: 18 verbs missing, each error naming its release", function()
      local out, rc = support.capture(("IBVL_RDMA_CORE=28 timeout 300 %s /usr/bin/busted --run=device "
        .. "-o utfTerminal spec/device/verbs/reach_spec.lua --filter-out=cq_ex"):format(support.LUA))
      assert.equal(0, rc, out)
      assert.matches("%d+ successes / 0 failures / 0 errors / 0 pending", out)
    end)
  end

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
