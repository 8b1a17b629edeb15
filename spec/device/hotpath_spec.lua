-- The steady-state data path allocates no Lua memory: prepared WR lists posted
-- with qp:post_recv/post_send, completions polled into an ibv.wc_array and read
-- with its accessors.  Measured with collectgarbage("count") while the
-- collector is stopped, after a warm-up.  LuaJIT's compiled traces are heap
-- objects too and may still appear in the first measured windows, so a loop
-- is measured in windows until one grows by nothing (at most 5): an
-- allocation per iteration grows every window and fails the spec.
local ibv = require "ibverbs"
local support = require "support"

--- Heap growth in bytes across f(...), with the collector stopped.
local function heap_growth(f, ...)
  collectgarbage("collect")
  collectgarbage("stop")
  local before = collectgarbage("count")
  f(...)
  local after = collectgarbage("count")
  collectgarbage("restart")
  return (after - before) * 1024
end

--- Runs f(...) in measured windows until one shows no growth; returns the last growth.
local function steady_growth(f, ...)
  local grown
  for _ = 1, 5 do
    grown = heap_growth(f, ...)
    if grown == 0 then break end
  end
  return grown
end

describe("on rxe0, the steady-state data path", function()
  local env, mra, mrb
  before_each(function()
    env = support.pair{ cqe = 8192, cap = { max_send_wr = 64, max_recv_wr = 6400, max_send_sge = 1,
                                            max_recv_sge = 1 } }
    mra = assert(env.pd:reg_mr(4096))
    mrb = assert(env.pd:reg_mr(4096, { "local_write" }))
  end)

  it("posts and polls 10,000 send/recv iterations without allocating Lua memory", function()
    local rl = ibv.recv_wrs(64)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    local sl = ibv.send_wrs(1)
    sl:fill{ opcode = "send", sge = { mr = mra, length = 64 }, send_flags = ibv.SEND_SIGNALED }
    local wcs = ibv.wc_array(4)
    local a, b, cq = env.a, env.b, env.cq
    local stats = { bytes = 0, sends = 0 }
    local function loop(iterations)
      for i = 1, iterations do
        assert(b:post_recv(rl, i % 64 + 1, 1))
        assert(a:post_send(sl))
        local got = 0
        while got < 2 do
          local n = assert(cq:poll(wcs))
          for k = 1, n do
            assert(wcs:status(k) == "success", wcs:status(k))
            if wcs:opcode(k) == "recv" then
              stats.bytes = stats.bytes + wcs:byte_len(k)
            elseif wcs:wr_id(k) == 0 then
              stats.sends = stats.sends + 1
            end
          end
          got = got + n
        end
      end
    end
    loop(1000) -- warm-up
    assert.equal(0, steady_growth(loop, 10000))
    assert.is_true(stats.sends >= 11000) -- the loop did its work
    assert.equal(stats.sends * 64, stats.bytes)
  end)

  it("posts receive chains and polls their flush completions without allocating Lua memory", function()
    local rl = ibv.recv_wrs(64)
    rl:fill{ sge = { mr = mrb, length = 64 }, stride = 64 }
    local wcs = ibv.wc_array(64)
    local qp, cq = env.b, env.cq
    local flushed = 0
    local function post(chains)
      for _ = 1, chains do assert(qp:post_recv(rl)) end
    end
    local function drain(n)
      local got = 0
      while got < n do
        local k = assert(cq:poll(wcs))
        for i = 1, k do
          if wcs:status(i) == "wr_flush_err" then flushed = flushed + 1 end
        end
        got = got + k
      end
    end
    local ERR, RESET = { qp_state = "err" }, { qp_state = "reset" }
    local INIT = { qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 0 }
    assert(qp:modify(ERR))
    assert(qp:modify(RESET))
    assert(qp:modify(INIT))
    local function cycle()
      local g = heap_growth(post, 100)
      assert(qp:modify(ERR))
      g = g + heap_growth(drain, 6400)
      assert(qp:modify(RESET))
      assert(qp:modify(INIT))
      return g
    end
    cycle() -- warm-up
    local grown, cycles
    cycles = 1
    repeat
      grown, cycles = cycle(), cycles + 1
    until grown == 0 or cycles == 6
    assert.equal(0, grown)
    assert.equal(cycles * 6400, flushed)
  end)

  it("measures for real: cq:poll(n), which returns tables, does allocate", function()
    assert(env.b:post_recv{ wr_id = 1, sge = { mr = mrb, length = 64 } })
    assert(env.a:post_send{ wr_id = 2, send_flags = { "signaled" }, sge = { mr = mra, length = 64 } })
    local got = {}
    local grown = heap_growth(function()
      while #got < 2 do
        for _, wc in ipairs(env.cq:poll(4)) do got[#got + 1] = wc end
      end
    end)
    assert.equal(2, #got)
    assert.is_true(grown > 0)
  end)
end)
