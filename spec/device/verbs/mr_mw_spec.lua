-- Memory regions and memory windows (type 1 and 2) on rxe0 (their PD: pd_spec.lua).
local ibv = require "ibverbs"
local support = require "support"

local BIND_ACCESS = { "local_write", "remote_write", "mw_bind" }

describe("on rxe0, an mr", function()
  local ctx, pd
  before_each(function()
    ctx = support.open()
    pd = assert(ctx:alloc_pd())
  end)

  it("registers owned memory and a buffer range, with keys, address and length", function()
    local mr = assert(pd:reg_mr(4096, { "local_write", "remote_read" }))
    assert.equal(4096, mr.length)
    assert.equal(4096, #mr)
    assert.equal(0, mr.addr % 4096)
    assert.is_number(mr.lkey)
    assert.is_number(mr.rkey)
    local buf = ibv.buffer(8192)
    local mr2 = assert(pd:reg_mr(buf, ibv.ACCESS_LOCAL_WRITE + ibv.ACCESS_REMOTE_WRITE, 4096, 100))
    assert.equal(buf.addr + 4096, mr2.addr)
    assert.equal(100, mr2.length)
    mr2:write(0, "shared")
    assert.equal("shared", buf:read(4096, 6))
  end)

  it("takes every access flag combination rxe supports", function()
    for _, access in ipairs{ {}, { "local_write" }, { "remote_read" }, { "local_write", "remote_write" },
      { "local_write", "remote_atomic" }, BIND_ACCESS,
      { "local_write", "remote_write", "remote_read", "remote_atomic" } } do
      assert(pd:reg_mr(64, access)):close()
    end
  end)

  it("refuses remote write or atomic without local write (EINVAL), as verbs does", function()
    for _, access in ipairs{ { "remote_write" }, { "remote_atomic" } } do
      local mr, msg, errno = pd:reg_mr(64, access)
      assert.is_nil(mr)
      assert.matches("^ibv_reg_mr: ", msg)
      assert.equal(22, errno)
    end
  end)

  it("raises for bad flag names, negative lengths and ranges outside the buffer", function()
    assert.has_error(function() pd:reg_mr(64, { "local_wrte" }) end)
    assert.has_error(function() pd:reg_mr(64, "remote") end)
    assert.has_error(function() pd:reg_mr(-1) end)
    local buf = ibv.buffer(100)
    assert.has_error(function() pd:reg_mr(buf, 1, 101) end)
    assert.has_error(function() pd:reg_mr(buf, 1, 50, 51) end)
    assert.has_error(function() pd:reg_mr(buf, 1, -1) end)
    local mr = assert(pd:reg_mr(16))
    assert.has_error(function() mr:read(10, 7) end)
    assert.has_error(function() mr:write(15, "ab") end)
    assert.has_error(function() mr:u64(9) end)
  end)

  it("keeps its buffer alive and refuses to be used once closed", function()
    local mr = assert(pd:reg_mr(ibv.buffer(64), 1))
    collectgarbage()
    mr:write(0, "still here")
    assert.equal("still here", mr:read(0, 10))
    assert.is_true(mr:close())
    assert.has_error(function() mr:read(0, 1) end, "read: attempt to use a closed ibverbs.mr")
    assert.has_error(function() return mr.lkey end, "attempt to use a closed ibverbs.mr")
  end)

  it("cannot be re-registered on rxe: rereg fails cleanly", function()
    local mr = assert(pd:reg_mr(64))
    local ok, msg, errno = mr:rereg{ access = { "local_write", "remote_read" } }
    assert.is_nil(ok)
    assert.matches("^ibv_rereg_mr: ", msg)
    assert.is_number(errno)
    assert.has_error(function() mr:rereg{} end)
    assert.has_error(function() mr:rereg{ acess = 1 } end, "rereg: attr: unknown field 'acess'")
    assert.equal(64, mr.length)
  end)
end)

describe("on rxe0, memory windows", function()
  local env, mra, mrb
  before_each(function()
    env = support.pair{ access = { "local_write", "remote_write" } }
    mra = assert(env.pd:reg_mr(4096, BIND_ACCESS))
    mrb = assert(env.pd:reg_mr(4096, BIND_ACCESS))
    mra:write(0, "through a window")
  end)

  local function write(rkey, addr)
    assert(env.a:post_send{ wr_id = 77, opcode = "rdma_write", send_flags = { "signaled" },
      sge = { mr = mra, length = 16 }, remote_addr = addr or mrb.addr, rkey = rkey })
    return support.completions(env.cq, 1)[1].status
  end

  it("are allocated as type 1 or 2, and a wrong type raises", function()
    local mw1 = assert(env.pd:alloc_mw(1))
    assert.equal(1, mw1.type)
    local mw2 = assert(env.pd:alloc_mw("type_2"))
    assert.equal(2, mw2.type)
    assert.is_number(mw2.rkey)
    assert.has_error(function() env.pd:alloc_mw(3) end)
    assert.has_error(function() env.pd:alloc_mw("type_3") end)
    local ok, _, errno = env.pd:close()
    assert.is_nil(ok)
    assert.equal(16, errno)
    assert.is_true(mw1:close())
    assert.is_true(mw2:close())
  end)

  it("type 1: bound with ibv_bind_mw, used remotely, invalidated by a zero-length bind", function()
    local mw = assert(env.pd:alloc_mw(1))
    local rkey = assert(mw:bind(env.b, { mr = mrb, addr = mrb.addr, length = 1024,
      mw_access_flags = { "remote_write" } }, { wr_id = 5 }))
    assert.equal(rkey, mw.rkey)
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("bind_mw", wc.opcode)
    assert.equal(5, wc.wr_id)
    assert.equal("success", write(rkey))
    assert.equal("through a window", mrb:read(0, 16))
    assert(mw:bind(env.b, { mr = mrb, addr = mrb.addr, length = 0 }))
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.equal("rem_access_err", write(rkey))
  end)

  it("type 1: ibv_bind_mw refuses a type 2 window, and bad bind_info raises", function()
    local mw2 = assert(env.pd:alloc_mw(2))
    local ok, msg, errno = mw2:bind(env.b, { mr = mrb })
    assert.is_nil(ok)
    assert.matches("^ibv_bind_mw: ", msg)
    assert.equal(22, errno)
    local mw1 = assert(env.pd:alloc_mw(1))
    assert.has_error(function() mw1:bind(env.b, { mr = mrb, lenght = 1 }) end,
      "bind: bind_info: unknown field 'lenght'")
    assert.has_error(function() mw1:bind(env.b, { mr = mrb, mw_access_flags = { "remote_wirte" } }) end)
    assert.has_error(function() mw1:bind(env.pd, { mr = mrb }) end)
  end)

  it("type 2: bound with a bind_mw post_send, written, then invalidated by local_inv", function()
    local mw = assert(env.pd:alloc_mw(2))
    local rkey = ibv.inc_rkey(mw.rkey)
    assert(env.b:post_send{ wr_id = 1, opcode = "bind_mw", mw = mw, rkey = rkey, send_flags = { "signaled" },
      bind_info = { mr = mrb, addr = mrb.addr + 1024, length = 1024, mw_access_flags = { "remote_write" } } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.equal("success", write(rkey, mrb.addr + 1024))
    assert.equal("through a window", mrb:read(1024, 16))
    assert(env.b:post_send{ wr_id = 2, opcode = "local_inv", invalidate_rkey = rkey, send_flags = { "signaled" } })
    local wc = support.completions(env.cq, 1)[1]
    assert.equal("success", wc.status)
    assert.equal("local_inv", wc.opcode)
    assert.equal("rem_access_err", write(rkey, mrb.addr + 1024))
  end)

  it("type 2: invalidated remotely by send_with_inv", function()
    local mw = assert(env.pd:alloc_mw(2))
    local rkey = ibv.inc_rkey(mw.rkey)
    assert(env.b:post_send{ wr_id = 1, opcode = "bind_mw", mw = mw, rkey = rkey, send_flags = { "signaled" },
      bind_info = { mr = mrb, mw_access_flags = { "remote_write" } } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert(env.b:post_recv{ wr_id = 2, sge = { mr = mrb, offset = 2048, length = 64 } })
    assert(env.a:post_send{ wr_id = 3, opcode = "send_with_inv", invalidate_rkey = rkey, inline = "inv",
      send_flags = { "signaled" } })
    for _, wc in ipairs(support.completions(env.cq, 2)) do assert.equal("success", wc.status) end
    assert.equal("rem_access_err", write(rkey))
  end)

  it("type 2: deallocating the window invalidates it", function()
    local mw = assert(env.pd:alloc_mw(2))
    local rkey = ibv.inc_rkey(mw.rkey)
    assert(env.b:post_send{ wr_id = 1, opcode = "bind_mw", mw = mw, rkey = rkey, send_flags = { "signaled" },
      bind_info = { mr = mrb, mw_access_flags = { "remote_write" } } })
    assert.equal("success", support.completions(env.cq, 1)[1].status)
    assert.is_true(mw:close())
    assert.has_error(function() return mw.rkey end, "attempt to use a closed ibverbs.mw")
    assert.equal("rem_access_err", write(rkey))
  end)

  it("a prepared bind_mw WR whose window or MR was closed raises instead of posting", function()
    local mw = assert(env.pd:alloc_mw(2))
    local mr = assert(env.pd:reg_mr(64, BIND_ACCESS))
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = "bind_mw", mw = mw, rkey = ibv.inc_rkey(mw.rkey), bind_info = { mr = mr } })
    assert(mr:close())
    assert.has_error(function() env.b:post_send(sl) end, "post_send: WR 1: attempt to use a closed ibverbs.mr")
    assert(mw:close())
    assert.has_error(function() env.b:post_send(sl) end, "post_send: WR 1: attempt to use a closed ibverbs.mw")
  end)
end)
