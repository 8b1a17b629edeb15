-- Bad flows on rxe0 that pyverbs checks too: GID queries out of range, and
-- atomics that verbs must fail with a completion error.
local support = require "support"

describe("on rxe0, GID queries out of range", function()
  it("query_gid_ex past the table fails with nil, msg, errno", function()
    local ctx = support.open()
    local len = ctx:query_port(1).gid_tbl_len
    local e, msg, errno = ctx:query_gid_ex(1, len + 10)
    assert.is_nil(e)
    assert.matches("^ibv_query_gid_ex: ", msg)
    assert.is_number(errno)
    assert.has_error(function() ctx:query_gid_ex(0, 0) end)
    assert.has_error(function() ctx:query_gid(1, -1) end)
  end)

  it("query_gid_table with room for fewer entries than valid GIDs fails with EINVAL", function()
    local ctx = support.open()
    local n = #ctx:query_gid_table()
    assert.is_true(n >= 2)
    local t, msg, errno = ctx:query_gid_table(n - 1)
    assert.is_nil(t)
    assert.matches("^ibv_query_gid_table: ", msg)
    assert.equal(22, errno)
    assert.has_error(function() ctx:query_gid_table(0) end)
  end)
end)

describe("on rxe0, atomics that must fail", function()
  local ALL = { "local_write", "remote_write", "remote_read", "remote_atomic" }

  local function atomic(env, src, dst, over)
    local wr = { wr_id = 1, opcode = "atomic_fetch_and_add", send_flags = { "signaled" },
                 sge = { mr = src, length = 8 }, remote_addr = dst.addr, rkey = dst.rkey, compare_add = 1 }
    for k, v in pairs(over or {}) do wr[k] = v end
    assert(env.a:post_send(wr))
    return support.completions(env.cq, 1)[1].status
  end

  it("succeed with every right in place (the control case)", function()
    local env = support.pair()
    local src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, ALL))
    assert.equal("success", atomic(env, src, dst))
    assert.equal(1, dst:u64(0))
  end)

  it("fail when the remote QP does not allow atomics", function()
    local env = support.pair{ access = { "local_write", "remote_write" } }
    local src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, ALL))
    assert.are_not.equal("success", atomic(env, src, dst))
  end)

  it("fail when the remote MR does not allow atomics", function()
    local env = support.pair()
    local src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, { "local_write" }))
    assert.equal("rem_access_err", atomic(env, src, dst))
  end)

  it("on an address that is not 8-byte aligned are refused by post_send with EINVAL", function()
    local env = support.pair()
    local src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, ALL))
    local ok, msg, errno, bad = env.a:post_send{ opcode = "atomic_fetch_and_add", sge = { mr = src, length = 8 },
      remote_addr = dst.addr + 3, rkey = dst.rkey, compare_add = 1 }
    assert.is_nil(ok)
    assert.matches("^ibv_post_send: ", msg)
    assert.equal(22, errno)
    assert.equal(1, bad)
  end)

  it("fail with a bad lkey or rkey", function()
    local env = support.pair()
    local src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, ALL))
    assert.equal("loc_prot_err", atomic(env, src, dst,
      { sge = { addr = src.addr, length = 8, lkey = src.lkey + 7 } }))
    env = support.pair()
    src, dst = assert(env.pd:reg_mr(64, ALL)), assert(env.pd:reg_mr(64, ALL))
    assert.equal("rem_access_err", atomic(env, src, dst, { rkey = dst.rkey + 7 }))
  end)
end)
