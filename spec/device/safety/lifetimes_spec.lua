-- Lifetimes on rxe0: any order of close() and garbage collection, lua_close at
-- exit with a whole object graph alive, EBUSY for parents with children, and
-- a clear error from every method of a closed object.
local ibv = require "ibverbs"
local support = require "support"

-- Builds every kind of object, connected and busy: WRs posted, completions
-- unpolled, a completion event unacknowledged.  Returns them in a table.
local GRAPH = [[
local ibv = require "ibverbs"
local support = require "support"
local function graph()
  local g = support.pair()
  g.ch = assert(g.ctx:create_comp_channel())
  g.ecq = assert(g.ctx:create_cq{ cqe = 16, channel = g.ch })
  g.xcq = assert(g.ctx:create_cq{ cqe = 16, wc_flags = { "byte_len" } })
  g.mr = assert(g.pd:reg_mr(4096, { "local_write", "remote_write", "mw_bind" }))
  g.bmr = assert(g.pd:reg_mr(ibv.buffer(4096), 1))
  g.mw1 = assert(g.pd:alloc_mw(1))
  g.mw2 = assert(g.pd:alloc_mw(2))
  g.ah = assert(g.pd:create_ah{ port_num = 1, grh = { dgid = g.gid, sgid_index = 1 } })
  g.srq = assert(g.pd:create_srq{ max_wr = 8 })
  g.ud = assert(g.pd:create_qp{ qp_type = "ud", send_cq = g.ecq, recv_cq = g.xcq })
  g.qx = assert(g.ctx:create_qp_ex{ pd = g.pd, qp_type = "rc", send_cq = g.cq, recv_cq = g.cq, srq = g.srq,
    send_ops_flags = { "send" } })
  g.sl = ibv.send_wrs(2)
  g.sl:set(1, { opcode = "send", inline = "x", ah = g.ah, remote_qpn = g.ud.qp_num, remote_qkey = 1 })
  g.rl = ibv.recv_wrs(4)
  g.rl:fill{ sge = { mr = g.mr, length = 64 } }
  assert(g.b:post_recv(g.rl))
  assert(g.srq:post_recv{ wr_id = 1, sge = { mr = g.mr, length = 8 } })
  assert(g.a:post_send{ inline = "unpolled", send_flags = { "signaled" } })
  assert(g.ud:to_init{}); assert(g.ud:to_rtr{}); assert(g.ud:to_rts{})
  assert(g.ecq:req_notify())
  assert(g.ud:post_send(g.sl, 1, 1))
  assert(g.ud:post_send{ inline = "y", ah = g.ah, remote_qpn = g.ud.qp_num, remote_qkey = 1,
    send_flags = { "signaled" } })
  assert(g.ch:get_event(2)) -- left unacknowledged
  return g
end
]]

local function run_child(body)
  return (support.run_child(GRAPH, body))
end

describe("on rxe0, lifetimes", function()
  it("lua_close at exit with a whole busy graph alive exits cleanly (child " .. support.LUA .. ")", function()
    local out = run_child("KEEP = graph()")
    assert.matches("child done exit=0", out, 1, true)
  end)

  it("lua_close at exit with half the graph closed by hand exits cleanly", function()
    local out = run_child([[
      local g = graph()
      g.mw1:close(); g.sl = nil; g.a:close(); g.ah:close()
      assert(g.pd:close() == nil)
      KEEP = g]])
    assert.matches("child done exit=0", out, 1, true)
  end)

  it("whole unreachable busy graphs are collected in one cycle, in any order", function()
    local out = run_child([[
      for _ = 1, 5 do graph() end
      collectgarbage(); collectgarbage()
      local g = graph()
      g = nil
      collectgarbage("step", 1)
      collectgarbage()]])
    assert.matches("child done exit=0", out, 1, true)
    -- and in this process too
    local f = assert(load(GRAPH .. " return graph"))()
    for _ = 1, 3 do f() end
    collectgarbage()
    collectgarbage()
  end)

  it("closing in any order: a parent with children gets EBUSY and both stay usable", function()
    local g = assert(load(GRAPH .. " return graph()"))()
    for _, parent in ipairs{ g.ctx, g.pd, g.cq, g.ch, g.srq, g.ecq } do
      local ok, msg, errno = parent:close()
      assert.is_nil(ok)
      assert.matches("Device or resource busy %(%d+ objects? still uses? it%)", msg)
      assert.equal(16, errno)
      assert.is_false(parent:is_closed())
    end
    assert.equal("active", g.ctx:query_port(1).state)
    assert.equal(3, g.mr:write(0, "abc"))
    -- children first, in a scrambled order, then parents
    local order = { "sl", "mw2", "qx", "a", "mw1", "ud", "b", "ah", "srq", "bmr", "mr", "ecq", "xcq", "ch", "cq",
                    "pd", "ctx" }
    for _, k in ipairs(order) do
      if g[k].close then
        local ok, msg = g[k]:close()
        assert(ok, k .. ": " .. tostring(msg))
        assert.is_true(g[k]:close()) -- twice is harmless
      end
    end
  end)

  it("every method of every closed object raises 'attempt to use a closed ...'", function()
    local g = assert(load(GRAPH .. " return graph()"))()
    local objs = { context = g.ctx, pd = g.pd, mr = g.mr, mw = g.mw1, comp_channel = g.ch, cq = g.ecq,
                   qp = g.a, ah = g.ah, srq = g.srq }
    local order = { "mw", "ah", "qp", "srq", "mr", "cq", "comp_channel", "pd", "context" }
    for _, k in ipairs{ "a", "b", "qx", "ud", "mw2", "bmr", "xcq", "cq" } do g[k]:close() end
    local checked = 0
    for _, name in ipairs(order) do
      local o = objs[name]
      assert(o:close())
      for mname, m in pairs(ibv.methods("ibverbs." .. name)) do
        if mname ~= "close" and mname ~= "is_closed" then
          local ok, err = pcall(m, o)
          assert.is_false(ok, name .. ":" .. mname)
          assert.matches("attempt to use a closed ibverbs%." .. name, tostring(err), nil, false)
          checked = checked + 1
        end
      end
      assert.is_true(o:is_closed())
      assert.matches("closed", tostring(o))
    end
    assert.is_true(checked > 30)
  end)
end)
