-- Adversarial use on rxe0: ordinary mistakes and hostile scripts get a clear
-- error naming the function and the field (or nil, msg, errno), never a
-- crash, an out-of-bounds read or a silently wrong post.  Each case is a
-- reproducer of a crash the binding once had.
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "expected an error matching " .. pattern)
  assert.matches(pattern, tostring(err))
  return err
end

-- A table whose reading runs fn the first time (an __index that closes things).
local function evil(t, fn)
  local fired = false
  return setmetatable(t, { __index = function(_, k)
    if not fired then fired = true; fn(k) end
  end })
end

describe("on rxe0, adversarial scripts", function()
  local env
  before_each(function() env = support.pair() end)

  it("create_qp without send_cq, without CQs, and create_qp_ex without pd raise naming the field", function()
    raises("create_qp: init_attr: field 'send_cq' is required for an rc QP", env.pd.create_qp, env.pd,
      { qp_type = "rc", recv_cq = env.cq })
    raises("field 'send_cq' is required", env.pd.create_qp, env.pd, { qp_type = "rc" })
    raises("create_qp_ex: init_attr: field 'pd' is required for an rc QP", env.ctx.create_qp_ex, env.ctx,
      { qp_type = "rc" })
    local srq = assert(env.pd:create_srq{ max_wr = 4 })
    raises("field 'recv_cq' is required for an rc QP %(with an SRQ", env.pd.create_qp, env.pd,
      { qp_type = "rc", send_cq = env.cq, srq = srq })
  end)

  it("cm ids not bound to a device raise instead of crashing librdmacm", function()
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id{ ps = "tcp" })
    assert(id:resolve_addr(nil, "192.0.2.1:7471", 2000))
    raises("resolve_route: the address is not resolved yet", id.resolve_route, id, 2000)
    local id2 = assert(ch:create_id{ ps = "tcp" })
    raises("connect: the route is not resolved yet", id2.connect, id2, { qp_num = 1 })
    raises("accept: the id has no connection request", id2.accept, id2, { qp_num = 1 })
    raises("create_qp: the id is not bound to a device", id2.create_qp, id2, {})
    raises("create_srq: the id is not bound to a device", id2.create_srq, id2, {})
    local ud = assert(ch:create_id{ ps = "udp" })
    raises("accept: the id has no connection request", ud.accept, ud)
    id:close(); id2:close(); ud:close(); ch:close()
  end)

  it("a cm QP that would lack a CQ (no recv_cq, max_recv_wr 0: the cm makes none) raises", function()
    local id = assert(cm.create_id{ ps = "tcp" })
    assert(id:bind_addr("192.0.2.1:0"))
    raises("create_qp: init_attr: give recv_cq, or cap.max_recv_wr > 0", id.create_qp, id,
      { cap = { max_send_wr = 2, max_recv_wr = 0 } })
    id:close()
  end)

  it("a UD cm id's post_send without an address handle raises", function()
    local id = assert(cm.create_id{ ps = "udp" })
    assert(id:bind_addr("192.0.2.1:0"))
    assert(id:create_qp{ cap = { max_send_wr = 2, max_recv_wr = 2 } })
    local mr = assert(id.pd:reg_mr(64, { "local_write" }))
    raises("post_send: a UD id sends with post_ud_send", id.post_send, id, 1, mr, 0, 8)
    mr:close(); id:close()
  end)

  it("a cm id whose QPs are made on many PDs in turn stays usable", function()
    local id = assert(cm.create_id{ ps = "tcp" })
    assert(id:bind_addr("192.0.2.1:0"))
    for _ = 1, 9 do
      local pd = assert(id.context:alloc_pd())
      assert(id:create_qp{ pd = pd, cap = { max_send_wr = 2, max_recv_wr = 2 } })
      assert(id:destroy_qp())
    end
    assert(id:close())
  end)

  it("a prepared inline WR whose length outgrows its string is refused when posted", function()
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = "send", inline = "abc" })
    sl:length(1, 128)
    raises("WR 1: 128 inline bytes at offset 0, the 'inline' string has 3", env.a.post_send, env.a, sl)
    sl:length(1, 3)
    assert(env.b:post_recv{ sge = { mr = assert(env.pd:reg_mr(64)), length = 64 } })
    assert(env.a:post_send(sl))
  end)

  it("fill with a huge stride on inline data, or an inline SGE whose MR closed, is refused", function()
    local sl = ibv.send_wrs(2)
    sl:fill{ opcode = "send", inline = "abcdefgh", stride = 1073741824 }
    raises("WR 2: 8 inline bytes at offset 1073741824", env.a.post_send, env.a, sl)
    local mr = assert(env.pd:reg_mr(64))
    local sl2 = ibv.send_wrs(1)
    sl2:set(1, { opcode = "send", send_flags = { "inline" }, sg_list = { { mr = mr, length = 8 } } })
    mr:close()
    raises("WR 1: SGE 1: attempt to use a closed ibverbs.mr", env.a.post_send, env.a, sl2)
    raises("must come from field 'inline' or from SGEs with 'mr'", env.a.post_send, env.a,
      { opcode = "send", send_flags = { "inline" }, sg_list = { { addr = 4096, length = 8, lkey = 1 } } })
  end)

  it("an __index that closes the QP or an MR while a call reads its table raises cleanly", function()
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    local victims = {
      function() return env.a:post_send(evil({ opcode = "send", sge = { mr = mr, length = 8 } },
        function() env.a:close() end)) end,
      function() return env.b:post_recv(evil({ sge = { mr = mr, length = 8 } },
        function() mr:close() end)) end,
      function() return env.b:modify(evil({ qp_state = "err" }, function() env.b:close() end)) end,
    }
    for _, f in ipairs(victims) do
      local ok, err = pcall(f)
      -- metamethods are not consulted (tables are read raw): the call works
      -- on the fields present or raises because the object is closed
      assert(ok or tostring(err):match("closed"), tostring(err))
    end
  end)

  it("a QP or CQ type whose shared metatable a script edited still makes working objects", function()
    for field, make in pairs({
      cqe = function() return assert(env.ctx:create_cq(4)) end,
      qp_num = function() return assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq }) end,
    }) do
      local mt = getmetatable(make())
      local index = mt.__index
      for _, edit in ipairs({
        function() mt.__index = {} end,
        function() mt.__index = 42 end,
        function() mt.__index = nil; setmetatable(mt, { __index = function() error("boom") end }) end,
      }) do
        edit()
        local o = make()
        assert.is_number(o[field])             -- fields still read through the object's own table
        assert.is_true(o:close())
        assert.equal(mt, getmetatable(o))      -- scripts see the shared table, never the object's
        setmetatable(mt, nil)
        mt.__index = index
      end
    end
  end)

  it("a finalizer that closes the QP while a WR table is parsed makes the post raise", function()
    local mr = assert(env.pd:reg_mr(4096, { "local_write" }))
    local victim = env.a
    local wrs = {}
    for i = 1, 200 do wrs[i] = { wr_id = i, opcode = "send", sge = { mr = mr, offset = i, length = 8 } } end
    local closed = false
    local function closer() if not closed then closed = true; victim:close() end end
    for _ = 1, 50 do -- garbage whose finalizer closes the QP, collected mid-parse
      if rawget(_G, "newproxy") then
        getmetatable(newproxy(true)).__gc = closer -- LuaJIT: finalizers on userdata only
      else
        setmetatable({}, { __gc = closer })
      end
    end
    local pause = collectgarbage("setpause", 0)
    local ok, err = pcall(victim.post_send, victim, wrs)
    collectgarbage("setpause", pause)
    if closed then assert(not ok and tostring(err):match("closed"), tostring(err)) end
  end)

  it("finalizers that close objects at lua_close (the module unloads last) exit cleanly", function()
    local path = os.tmpname()
    local f = assert(io.open(path, "w"))
    f:write([[
local support = require "support"
local env = support.pair()
keep = {}
local victims = { env.a, env.b, env.cq, env.pd, env.ctx }
for i = 1, 20 do
  local victim = victims[i % #victims + 1]
  local function closer() victim:close() end
  if rawget(_G, "newproxy") then
    local p = newproxy(true)
    getmetatable(p).__gc = closer
    keep[i] = p
  else
    keep[i] = setmetatable({}, { __gc = closer })
  end
end
io.write("child done")
]])
    f:close()
    local p = assert(io.popen(support.LUA .. " " .. path .. " 2>&1; echo \" exit=$?\""))
    local out = p:read("*a")
    p:close()
    os.remove(path)
    assert.matches("child done exit=0", out, 1, true)
  end)

  it("transfer refuses a NaN or negative timeout", function()
    local rl = ibv.recv_wrs(1)
    raises("timeout", ibv.transfer, { recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 1, timeout = 0 / 0 })
    raises("timeout", ibv.transfer, { recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 1, timeout = -1 })
  end)

  it("one SGE not wrapped in an array is an error, not zero SGEs", function()
    local mr = assert(env.pd:reg_mr(64))
    raises("post_send: WR 1: field 'sg_list': array of SGE tables expected", env.a.post_send, env.a,
      { opcode = "send", sg_list = { mr = mr, length = 5 } })
    raises("post_send: WR 1: field 'sg_list': array of SGE tables expected, got string", env.a.post_send,
      env.a, { { opcode = "send", sg_list = "x" } })
  end)

  it("unsigned fields take every value of their C type and floats with integer values", function()
    local qp, msg, errno = env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
      cap = { max_send_wr = 0xffffffff } }
    assert.is_nil(qp)
    assert.is_string(msg)
    assert.is_number(errno)
    local cq = assert(env.ctx:create_cq{ cqe = 2 ^ 10 })
    assert.is_true(cq:close())
  end)

  it("provider EINVALs for common mistakes carry their likely cause", function()
    local qp = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
    local _, msg = qp:modify{ qp_state = "rtr" }
    assert.matches("'reset'", msg)
    assert(qp:modify{ qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 0 })
    _, msg = qp:modify{ qp_state = "rtr" }
    assert.matches("also needs ah_attr path_mtu dest_qp_num rq_psn", msg)
    local _, m2 = env.pd:reg_mr(64, { "remote_write" })
    assert.matches("need 'local_write'", m2)
  end)
end)
