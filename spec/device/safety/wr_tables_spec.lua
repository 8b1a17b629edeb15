-- Safety of the WR readers, prepared lists and C loops on rxe0 against a script
-- that fights back: argument tables that hold their objects weakly, a
-- collector that steps at every allocation, completions of other QPs on a
-- shared CQ, and FFI code editing a prepared list.  Each case runs in a child
-- interpreter, so a crash fails the case instead of ending the run.
local support = require "support"
local INTERP = support.LUA

-- The child's prelude: the module and the specs' helpers (support.pair).
local PRELUDE = [[
local ibv = require "ibverbs"
local support = require "support"
]]

local function done(out)
  assert.matches("child done exit=0", out, 1, true)
end

local function run_child(body)
  return (support.run_child(PRELUDE, body))
end

describe("on rxe0, WR tables read once (child " .. INTERP .. ")", function()
  -- The collector advanced a little before each call, so that its atomic
  -- phase (which clears weak tables) falls in the middle of the reading.
  it("64 WRs whose SGE tables hold their only reference to the MR weakly post, or fail cleanly", function()
    done(run_child([[
      local env = support.pair{ cap = { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 1, max_recv_sge = 1 } }
      local wrs = {}
      for i = 1, 64 do
        local mr = assert(env.pd:reg_mr(4096, 1))
        wrs[i] = { wr_id = i, sg_list = { setmetatable({ mr = mr, length = 8 }, { __mode = "v" }) } }
      end
      for _ = 1, 20 do
        collectgarbage("step", 0)
        pcall(env.b.post_recv, env.b, wrs)
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

-- FFI code is what can raise a prepared entry's num_sge: LuaJIT only.
if INTERP == "luajit" then
  describe("on rxe0, prepared lists forget what an entry no longer uses (child luajit)", function()
    it("an entry set with two SGEs, then one, drops the second's MR and clears its C SGE: "
      .. "num_sge raised back through the FFI is refused by name", function()
      done(run_child([[
        local xffi = require "ibverbs.ffi"
        local env = support.pair()
        local rl = ibv.recv_wrs(1, 2)
        do
          local m1, m2 = assert(env.pd:reg_mr(4096, 1)), assert(env.pd:reg_mr(4096, 1))
          rl:set(1, { sg_list = { { mr = m1, length = 8 }, { mr = m2, length = 8 } } })
          rl:set(1, { sge = { mr = m1, length = 8 } })
        end
        collectgarbage(); collectgarbage() -- the second MR is held no longer: it is gone
        assert(env.b:post_recv(rl))
        local rw, sges = xffi.recv_wrs(rl), xffi.sges(rl)
        assert(sges.p[1].length == 0 and sges.p[1].lkey == 0 and sges.p[1].addr == 0, "stale C SGE kept")
        rw.p[0].num_sge = 2 -- FFI code raises num_sge back
        local ok, err = pcall(env.b.post_recv, env.b, rl)
        assert(not ok and err:find("WR 1: SGE 2: not set by set or fill", 1, true), tostring(err))
        rw.p[0].num_sge = 1
        assert(env.b:post_recv(rl))]]))
    end)
  end)
end
