-- Shared receive queues on rxe0: creation and sizes, resize, the limit event,
-- receives of many RC QPs landing in one SRQ, bad flows, and lifetimes.
local ibv = require "ibverbs"
local support = require "support"

local E = ibv.errno
local EINVAL, ENOMEM, EBUSY, EOPNOTSUPP = E.EINVAL, E.ENOMEM, E.EBUSY, E.EOPNOTSUPP
local ACCESS = { "local_write", "remote_write" }

-- ctx, pd, cq, an SRQ, and n RC pairs: senders[i] -> receivers[i], the
-- receivers taking their receives from the SRQ (as ibv_srq_pingpong does).
local function shared(n, srq_attr)
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(1024))
  env.srq = assert(env.pd:create_srq(srq_attr or { max_wr = 256, max_sge = 1 }))
  env.senders, env.receivers = {}, {}
  local gid = env.ctx:query_gid(support.PORT, support.GID_INDEX)
  local cap = { max_send_wr = 16, max_recv_wr = 16 }
  for i = 1, n do
    env.senders[i] = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
    env.receivers[i] = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
                                                srq = env.srq, cap = cap })
    local s, r = env.senders[i], env.receivers[i]
    assert(s:connect({ qpn = r.qp_num, gid = gid }, { sgid_index = support.GID_INDEX, qp_access_flags = ACCESS }))
    assert(r:connect({ qpn = s.qp_num, gid = gid }, { sgid_index = support.GID_INDEX, qp_access_flags = ACCESS }))
  end
  env.mr = assert(env.pd:reg_mr(65536, ACCESS))
  return env
end

describe("on rxe0, an SRQ", function()
  local ctx, pd
  before_each(function()
    ctx = support.open()
    pd = assert(ctx:alloc_pd())
  end)

  it("is created with pd:create_srq and reports the granted sizes and its type", function()
    local srq = assert(pd:create_srq{ max_wr = 10, max_sge = 2 })
    assert.is_true(srq.max_wr >= 10)
    assert.is_true(srq.max_sge >= 2)
    assert.equal("basic", srq.srq_type)
    assert.is_nil(srq.srq_num)
    local q = srq:query()
    assert.is_true(q.max_wr >= 10)
    assert.equal(0, q.srq_limit)
    local t = {}
    assert.equal(t, srq:query(t))
  end)

  it("is created with ctx:create_srq_ex, flat sizes or an attr table", function()
    local a = assert(ctx:create_srq_ex{ pd = pd, max_wr = 8, max_sge = 1 })
    local b = assert(ctx:create_srq_ex{ srq_type = "basic", pd = pd,
                                        attr = { max_wr = 8, max_sge = 1, srq_limit = 0 } })
    local cq = assert(ctx:create_cq(16))
    local c = assert(ctx:create_srq_ex{ srq_type = "basic", pd = pd, cq = cq, max_wr = 8 })
    for _, s in ipairs({ a, b, c }) do
      assert.equal("basic", s.srq_type)
      assert.is_true(s.max_wr >= 8)
    end
    local ok, _, errno = cq:close()
    assert.is_nil(ok)
    assert.equal(EBUSY, errno) -- the SRQ uses its cq
  end)

  it("resizes with modify{max_wr}, and then holds that many receives", function()
    local srq = assert(pd:create_srq{ max_wr = 16 })
    assert(srq:modify{ max_wr = 200 })
    assert.is_true(srq.max_wr >= 200)
    assert.is_true(srq:query().max_wr >= 200)
    local mr = assert(pd:reg_mr(4096, ACCESS))
    local rl = ibv.recv_wrs(200)
    rl:fill{ sge = { mr = mr, length = 16 }, stride = 16 }
    assert(srq:post_recv(rl))
  end)

  it("posts chains of receive WRs with scatter lists, tables or prepared lists", function()
    local srq = assert(pd:create_srq{ max_wr = 64, max_sge = 2 })
    local mr = assert(pd:reg_mr(4096, ACCESS))
    assert(srq:post_recv{ wr_id = 1, sg_list = { { mr = mr, length = 8 }, { mr = mr, offset = 8, length = 8 } } })
    assert(srq:post_recv{ { wr_id = 2, sge = { mr = mr } }, { wr_id = 3, sg_list = {} } })
    local rl = ibv.recv_wrs(8, 2)
    rl:fill{ sge = { mr = mr, length = 32 }, stride = 32 }
    assert(srq:post_recv(rl, 3, 4))
  end)

  it("reports the failing WR's index when a chain overflows it", function()
    local srq = assert(pd:create_srq{ max_wr = 8 })
    local room = srq:query().max_wr
    local wrs = {}
    for i = 1, room + 3 do wrs[i] = { wr_id = i } end
    local ok, msg, errno, bad = srq:post_recv(wrs)
    assert.is_nil(ok)
    assert.equal(ENOMEM, errno)
    assert.matches("^ibv_post_srq_recv: ", msg)
    assert.equal(room + 1, bad)
  end)

  it("refuses sizes beyond the device limits and limits beyond its size", function()
    local d = ctx:query_device()
    local srq, msg, errno = pd:create_srq{ max_wr = d.max_srq_wr + 1 }
    assert.is_nil(srq)
    assert.equal(EINVAL, errno)
    assert.matches("^ibv_create_srq: Invalid argument", msg)
    srq, msg, errno = pd:create_srq{ max_sge = d.max_srq_sge + 1 }
    assert.is_nil(srq)
    assert.equal(EINVAL, errno)
    assert.matches("^ibv_create_srq: ", msg)
    srq = assert(pd:create_srq{ max_wr = 16 })
    local ok
    ok, msg, errno = srq:modify{ srq_limit = 100000 }
    assert.is_nil(ok)
    assert.equal(EINVAL, errno)
    assert.matches("^ibv_modify_srq: ", msg)
    assert.equal(0, srq:query().srq_limit) -- nothing modified
  end)

  it("raises on misuse, naming the field or argument", function()
    local srq = assert(pd:create_srq())
    assert.has_error(function() pd:create_srq{ max_wrs = 4 } end)
    local s0, msg0 = pd:create_srq{ max_wr = 0 } -- a legal uint32_t: the provider's answer
    assert(s0 or msg0)
    if s0 then s0:close() end
    assert.has_error(function() pd:create_srq{ max_wr = 4, attr = { max_wr = 4 } } end,
      "create_srq: init_attr: field 'max_wr' given both flat and in 'attr'")
    assert.has_error(function() ctx:create_srq_ex{ srq_type = "nope", pd = pd } end)
    assert.has_error(function() ctx:create_srq_ex{ pd = ctx } end)
    assert.has_error(function() srq:modify{} end)
    assert.has_error(function() srq:modify{ max_sge = 2 } end)
    assert.has_error(function() srq:post_recv{ wr_id = 1, sg_list = { { mr = srq } } } end)
  end)

  it("has no SRQ number and no tag matching on rxe: EOPNOTSUPP", function()
    local srq = assert(pd:create_srq())
    local n, msg, errno = srq:get_srq_num()
    assert.is_nil(n)
    assert.equal(EOPNOTSUPP, errno)
    assert.equal("ibv_get_srq_num: Operation not supported", msg)
    local cq = assert(ctx:create_cq(16))
    local tm
    tm, msg, errno = ctx:create_srq_ex{ srq_type = "tm", pd = pd, cq = cq, tm_cap = { max_num_tags = 4, max_ops = 4 } }
    assert.is_nil(tm)
    assert.equal(EOPNOTSUPP, errno)
    assert.equal("ibv_create_srq_ex: Operation not supported", msg)
  end)

  it("cannot be destroyed while a QP uses it (EBUSY), and can after", function()
    local cq = assert(ctx:create_cq(16))
    local srq = assert(pd:create_srq())
    local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, srq = srq })
    local ok, msg, errno = srq:close()
    assert.is_nil(ok)
    assert.equal(EBUSY, errno)
    assert.matches("^ibv_destroy_srq: Device or resource busy", msg)
    assert(srq:query()) -- still usable
    assert(qp:close())
    assert(srq:close())
    assert.is_true(srq:is_closed())
    assert.has_error(function() srq:query() end, "query: attempt to use a closed ibverbs.srq")
  end)

  it("makes posting to the receive queue of a QP attached to it an error (EINVAL, WR 1)", function()
    local cq = assert(ctx:create_cq(16))
    local srq = assert(pd:create_srq())
    local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, srq = srq })
    local ok, msg, errno, bad = qp:post_recv{ wr_id = 1 }
    assert.is_nil(ok)
    assert.equal(EINVAL, errno)
    assert.equal(1, bad)
    assert.matches("post with srq:post_recv", msg, 1, true)
  end)
end)

describe("on rxe0, one SRQ shared by 16 RC QPs", function()
  it("takes the receives of all of them, each completion naming its QP", function()
    local env = shared(16)
    local per = 4
    local n = 16 * per
    local rl = ibv.recv_wrs(n)
    rl:fill{ sge = { mr = env.mr, length = 64 }, stride = 64 }
    assert(env.srq:post_recv(rl))
    local sends = ibv.send_wrs(per)
    for i, s in ipairs(env.senders) do
      for j = 1, per do
        sends:set(j, { wr_id = i * 100 + j, opcode = "send", send_flags = { "signaled" },
                       inline = ("msg %02d.%d"):format(i, j) })
      end
      assert(s:post_send(sends))
    end
    local wcs = support.completions(env.cq, 2 * n, 10)
    assert.equal(2 * n, #wcs)
    local by_qp, texts = {}, {}
    for _, wc in ipairs(wcs) do
      assert.equal("success", wc.status)
      if wc.opcode == "recv" then
        by_qp[wc.qp_num] = (by_qp[wc.qp_num] or 0) + 1
        assert.equal(8, wc.byte_len)
        texts[env.mr:read(wc.wr_id * 64, 8)] = true
      end
    end
    for i, r in ipairs(env.receivers) do
      assert.equal(per, by_qp[r.qp_num], "receiver " .. i)
      for j = 1, per do assert.is_true(texts[("msg %02d.%d"):format(i, j)]) end
    end
  end)
end)

describe("on rxe0, the SRQ limit", function()
  it("is armed by modify{srq_limit} and fires srq_limit_reached with the SRQ, once", function()
    local env = shared(1, { max_wr = 32 })
    local rl = ibv.recv_wrs(8)
    rl:fill{ sge = { mr = env.mr, length = 64 }, stride = 64 }
    assert(env.srq:post_recv(rl))
    assert(env.srq:modify{ srq_limit = 4 })
    assert.equal(4, env.srq:query().srq_limit)
    local none, _, errno = env.ctx:get_async_event(0)
    assert.is_nil(none)
    assert.equal(E.ETIMEDOUT, errno) -- nothing yet
    for i = 1, 5 do
      assert(env.senders[1]:post_send{ wr_id = i, opcode = "send", send_flags = { "signaled" }, inline = "x" })
    end
    assert.equal(10, #support.completions(env.cq, 10))
    local ev = assert(env.ctx:get_async_event(2))
    assert.equal("srq_limit_reached", ev.type)
    assert.equal(env.srq, ev.srq)
    assert.equal(0, env.srq:query().srq_limit) -- disarmed by the event
  end)
end)

describe("on rxe0, SRQ lifetimes under collectgarbage", function()
  it("survives QPs and SRQs dropped in any order while attached", function()
    for round = 1, 3 do
      local env = shared(4)
      local srq = env.srq
      if round == 1 then
        env.srq = nil -- the QPs keep it alive
        collectgarbage()
        collectgarbage()
        assert.is_false(srq:is_closed())
        assert.equal("rts", env.receivers[1].state)
      elseif round == 2 then
        env.receivers = nil
        assert(srq:close()) -- the dropped QPs do not count
      end
      srq, env = nil, nil -- luacheck: ignore
      collectgarbage()
      collectgarbage()
    end
  end)

  it("closes a whole tree with QPs still attached when the state closes", function()
    local interp = support.LUA
    local script = [[
      local ibv = require "ibverbs"
      local ctx = assert(ibv.open("]] .. support.DEVICE .. [["))
      local pd = assert(ctx:alloc_pd())
      local cq = assert(ctx:create_cq(64))
      local srq = assert(pd:create_srq{ max_wr = 64 })
      KEEP = { ctx, pd, cq, srq }
      for _ = 1, 8 do
        KEEP[#KEEP + 1] = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq, srq = srq })
      end
      assert(srq:post_recv{ wr_id = 1 })
      print("built")
    ]]
    local p = assert(io.popen(interp .. " -e '" .. script:gsub("'", "'\\''") .. "' 2>&1; echo rc=$?"))
    local out = p:read("*a")
    p:close()
    assert.matches("built\nrc=0\n$", out)
  end)
end)
