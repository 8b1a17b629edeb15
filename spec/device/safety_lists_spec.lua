-- Safety of the WR readers, prepared lists and C loops on rxe0 against a script
-- that fights back: argument tables that hold their objects weakly, a
-- collector that steps at every allocation, completions of other QPs on a
-- shared CQ, and FFI code editing a prepared list.  Each case runs in a child
-- interpreter, so a crash fails the case instead of ending the run.
local INTERP = rawget(_G, "jit") and "luajit" or "lua5.4"

-- The child's prelude: a connected RC pair on one CQ (support.pair) and a
-- collector that runs a step at every allocation.
local PRELUDE = [[
local ibv = require "ibverbs"
local support = require "support"
local function eager_gc()
  if jit then collectgarbage("setpause", 1); collectgarbage("setstepmul", 1000)
  else collectgarbage("incremental", 1, 1000, 0) end
end
local function normal_gc()
  if jit then collectgarbage("setpause", 200); collectgarbage("setstepmul", 200)
  else collectgarbage("incremental", 200, 100, 13) end
end
]]

local function run_child(body)
  local path = os.tmpname()
  local f = assert(io.open(path, "w"))
  f:write(PRELUDE, body, "\nio.write('child done')\n")
  f:close()
  local p = assert(io.popen(INTERP .. " " .. path .. " 2>&1; echo \" exit=$?\""))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  return out
end

local function done(out)
  assert.matches("child done exit=0", out, 1, true)
end

describe("on rxe0, WR tables read once (child " .. INTERP .. ")", function()
  it("64 WRs whose SGE tables hold their only reference to the MR weakly post, or fail cleanly", function()
    done(run_child([[
      local env = support.pair{ cap = { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 1, max_recv_sge = 1 } }
      local posted = 0
      for round = 1, 12 do
        local wrs = {}
        for i = 1, 64 do
          local mr = assert(env.pd:reg_mr(4096, 1))
          wrs[i] = { wr_id = i, sg_list = { setmetatable({ mr = mr, length = 8 }, { __mode = "v" }) } }
        end
        eager_gc()
        local ok, r = pcall(env.b.post_recv, env.b, wrs)
        normal_gc()
        if ok and r then posted = posted + 1 end
        -- whatever was posted is flushed and forgotten
        assert(env.b:modify{ qp_state = "reset" })
        while env.cq:poll(env.wcs) > 0 do end
        assert(env.b:modify{ qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 1 })
        collectgarbage()
      end
      print("posted", posted)]]))
  end)

  it("a send WR's AH and a bind's MR and MW held weakly are read once: a post or a clean error", function()
    done(run_child([[
      local ud = support.pair{ qp_type = "ud" }
      for round = 1, 40 do
        local ah = assert(ud.pd:create_ah{ port_num = 1, grh = { dgid = ud.gid, sgid_index = 1 } })
        local wr = setmetatable({ ah = ah, opcode = "send", inline = "x", remote_qpn = ud.b.qp_num,
          remote_qkey = 1, wr_id = round }, { __mode = "v" })
        ah = nil
        eager_gc()
        pcall(ud.a.post_send, ud.a, wr)
        normal_gc()
        collectgarbage()
        while ud.cq:poll(ud.wcs) > 0 do end
      end]]))
  end)

  it("ibv.transfer keeps the QP and CQs it reads from a weak argument table until its loop ends", function()
    done(run_child([[
      local env = support.pair()
      local mr = assert(env.pd:reg_mr(4096, 1))
      for round = 1, 8 do
        local sl = ibv.send_wrs(1)
        sl:set(1, { opcode = "send", inline = "x", send_flags = { "signaled" } })
        local rl = ibv.recv_wrs(4)
        rl:fill{ sge = { mr = mr, length = 64 } }
        assert(env.b:post_recv(rl))
        local cq = assert(env.ctx:create_cq(16))
        local t = setmetatable({ send_qp = env.a, send_cq = cq, send_wrs = sl, recv = env.b,
          recv_cq = cq, recv_wrs = rl, count = 1, timeout = 0.2 }, { __mode = "v" })
        cq = nil
        eager_gc()
        pcall(ibv.transfer, t)
        normal_gc()
        collectgarbage()
        assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
        while env.cq:poll(env.wcs) > 0 do end
        env = support.pair()
        mr = assert(env.pd:reg_mr(4096, 1))
      end]]))
  end)
end)

describe("on rxe0, ibv.transfer and completions of other QPs (child " .. INTERP .. ")", function()
  it("a send-only transfer whose CQ carries another QP's receive skips it and counts it foreign", function()
    done(run_child([[
      local env = support.pair()
      local mr = assert(env.pd:reg_mr(4096, 1))
      local rl = ibv.recv_wrs(4)
      rl:fill{ sge = { mr = mr, length = 64 } }
      assert(env.a:post_recv(rl))  -- a's receives complete on the shared CQ
      local sl = ibv.send_wrs(1)
      sl:set(1, { opcode = "send", inline = "x", send_flags = { "signaled" } })
      local st = assert(ibv.transfer{ send_qp = env.b, send_cq = env.cq, send_wrs = sl, count = 4, timeout = 2 })
      assert(st.sent == 4, "sent " .. tostring(st.sent))
      assert(st.received == 0, "received " .. tostring(st.received))
      assert(st.foreign == 4, "foreign " .. tostring(st.foreign))]]))
  end)

  it("a receive-only transfer skips the sends and receives of other QPs on its CQ", function()
    done(run_child([[
      local env = support.pair()
      local mr = assert(env.pd:reg_mr(4096, 1))
      local rl = ibv.recv_wrs(4)
      rl:fill{ sge = { mr = mr, length = 64 } }
      assert(env.b:post_recv(rl))
      -- a's sends complete on the CQ b's receives use
      local sl = ibv.send_wrs(1)
      sl:set(1, { opcode = "send", inline = "y", send_flags = { "signaled" }, wr_id = 1000 })
      for _ = 1, 3 do assert(env.a:post_send(sl)) end
      local t0 = ibv.now()
      while ibv.now() < t0 + 0.5 do end -- all six completions are on the CQ
      local st = assert(ibv.transfer{ recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 3, timeout = 2 })
      assert(st.received == 3, "received " .. tostring(st.received))
      assert(st.foreign == 3, "foreign " .. tostring(st.foreign))]]))
  end)
end)

describe("on rxe0, prepared lists forget what an entry no longer uses (child " .. INTERP .. ")", function()
  it("an entry set with two SGEs, then one, drops the second's MR and its C SGE", function()
    done(run_child([[
      local env = support.pair()
      local rl = ibv.recv_wrs(1, 2)
      do
        local m1, m2 = assert(env.pd:reg_mr(4096, 1)), assert(env.pd:reg_mr(4096, 1))
        rl:set(1, { sg_list = { { mr = m1, length = 8 }, { mr = m2, length = 8 } } })
        rl:set(1, { sge = { mr = m1, length = 8 } })
      end
      collectgarbage(); collectgarbage() -- the second MR is no longer held: it is gone
      local ok, err = pcall(env.b.post_recv, env.b, rl)
      assert(ok, err)
      if jit then
        local xffi = require "ibverbs.ffi"
        local ffi = require "ffi"
        local rw, sges = xffi.recv_wrs(rl), xffi.sges(rl)
        assert(sges.p[1].length == 0 and sges.p[1].lkey == 0 and sges.p[1].addr == 0, "stale C SGE kept")
        rw.p[0].num_sge = 2 -- FFI code raises num_sge back
        local ok2, err2 = pcall(env.b.post_recv, env.b, rl)
        assert(not ok2 and err2:find("WR 1: SGE 2: not set by set or fill", 1, true), tostring(err2))
        rw.p[0].num_sge = 1
        assert(env.b:post_recv(rl))
        local _ = ffi
      end]]))
  end)

  it("an inline send entry with an AH, the AH closed and collected, collects and posts cleanly", function()
    done(run_child([[
      local ud = support.pair{ qp_type = "ud" }
      local list = ibv.send_wrs(2)
      do
        local ah = assert(ud.pd:create_ah{ port_num = 1, grh = { dgid = ud.gid, sgid_index = 1 } })
        list:set(1, { ah = ah, opcode = "send", inline = "x", remote_qpn = ud.b.qp_num, remote_qkey = 1 })
        assert(ah:close())
      end
      pcall(list.length, list, 0)
      list:length(1, 0)
      collectgarbage(); collectgarbage()
      local ok, err = pcall(ud.a.post_send, ud.a, list, 1, 1)
      assert(not ok and err:find("WR 1: attempt to use a closed ibverbs.ah", 1, true), tostring(err))
      list:set(1, { opcode = "send", inline = "x", ah = assert(ud.pd:create_ah{ port_num = 1,
        grh = { dgid = ud.gid, sgid_index = 1 } }), remote_qpn = ud.b.qp_num, remote_qkey = 1 })
      collectgarbage(); collectgarbage()
      assert(ud.a:post_send(list, 1, 1))]]))
  end)

  it("a batch's list edited with wr_id, then everything dropped and collected in any order", function()
    done(run_child([[
      for round = 1, 6 do
        local env = support.pair()
        local mr = assert(env.pd:reg_mr(4096, 1))
        local rl = ibv.recv_wrs(4)
        rl:fill{ sge = { mr = mr, length = 64 } }
        local cycle = ibv.batch{ { "post_recv", env.b, rl }, { "poll", env.cq, env.wcs } }
        assert(cycle())
        for i = 1, 4 do rl:wr_id(i, i * round) end
        collectgarbage()
        if round % 2 == 0 then env.ctx = nil end
        if round % 3 == 0 then rl = nil end
        env, mr, cycle = nil, nil, nil
        collectgarbage(); collectgarbage()
      end]]))
  end)
end)
