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

describe("on rxe0, the hot path's shortcuts", function()
  local env, mr
  before_each(function()
    env = support.pair{ cqe = 1024, cap = { max_send_wr = 64, max_recv_wr = 256, max_send_sge = 1,
                                            max_recv_sge = 1 } }
    mr = assert(env.pd:reg_mr(64 * 64, { "local_write" }))
  end)

  --- The index of the first completion of wcs[1..n] whose status is not success, or nil.
  local function first_bad(wcs, n)
    for i = 1, n do
      if wcs:status(i) ~= "success" then return i end
    end
  end

  it("cq:poll's second result is the index of the first unsuccessful completion, or nil", function()
    local rl = ibv.recv_wrs(8)
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    assert(env.a:post_send{ wr_id = 9, send_flags = { "signaled" }, sge = { mr = mr, length = 64 } })
    assert(env.b:modify{ qp_state = "err" }) -- the 7 receives not used are flushed
    local wcs, bads, got = ibv.wc_array(4), 0, 0
    local deadline = ibv.now() + 5
    while got < 9 and ibv.now() < deadline do
      local n, bad = env.cq:poll(wcs)
      assert.equal(first_bad(wcs, n), bad)
      if bad then bads = bads + 1 end
      got = got + n
    end
    assert.equal(9, got) -- a send, a receive, 7 flushed receives
    assert.is_true(bads >= 1)
  end)

  it("cq:poll(n) returns the first unsuccessful completion's index after its tables", function()
    local rl = ibv.recv_wrs(3)
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl))
    assert(env.b:modify{ qp_state = "err" })
    local all, deadline = {}, ibv.now() + 5
    while #all < 3 and ibv.now() < deadline do
      local t, bad = env.cq:poll(8)
      assert.equal(#t > 0 and 1 or nil, bad) -- flushed: all of them unsuccessful
      for _, wc in ipairs(t) do all[#all + 1] = wc end
    end
    assert.equal(3, #all)
    assert.equal("wr_flush_err", all[1].status)
  end)

  it("wc arrays and WR lists find their methods in plain tables (no C __index)", function()
    for _, v in ipairs({ ibv.wc_array(1), ibv.recv_wrs(1), ibv.send_wrs(1) }) do
      assert.equal("table", type(getmetatable(v).__index))
    end
  end)

  it("a QP knows the list it posted last, yet still refuses a list of the other kind", function()
    local sl = ibv.send_wrs(1)
    sl:fill{ opcode = "send", sge = { mr = mr, length = 64 } }
    local rl = ibv.recv_wrs(1)
    rl:fill{ sge = { mr = mr, length = 64 } }
    assert(env.b:post_recv(rl))
    assert(env.a:post_send(sl))
    assert.has_error(function() env.a:post_recv(sl) end)
    assert.has_error(function() env.b:post_send(rl) end)
    -- another list after it: checked afresh, and the first one is not lost
    local rl2 = ibv.recv_wrs(2)
    rl2:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    assert(env.b:post_recv(rl2))
    rl = nil -- luacheck: ignore (the QP keeps the list it posted last alive; this one is not)
    collectgarbage()
    assert(env.b:post_recv(rl2, 2, 1))
  end)

  it("a list the QP knows is checked again after one of its MRs is closed", function()
    local mr2 = assert(env.pd:reg_mr(64, { "local_write" }))
    local rl = ibv.recv_wrs(1)
    rl:fill{ sge = { mr = mr2, length = 64 } }
    assert(env.b:post_recv(rl))
    rl:wr_id(1, 2)
    assert(mr2:close())
    local ok, err = pcall(env.b.post_recv, env.b, rl)
    assert.is_false(ok)
    assert.matches("closed ibverbs.mr", err)
  end)

  it("a CQ knows the wc array it polled into last, yet checks another one", function()
    local w1, w2 = ibv.wc_array(2), ibv.wc_array(1)
    assert.equal(0, env.cq:poll(w1))
    assert.equal(0, env.cq:poll(w2))
    assert.equal(0, env.cq:poll(w1))
    assert.has_error(function() env.cq:poll(ibv.recv_wrs(1)) end)
  end)

  --- A ring of 64 receives, 16 sends (the last one signaled) and a wc array for them.
  local function round_lists()
    local rl = ibv.recv_wrs(64)
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    local sl = ibv.send_wrs(16)
    sl:fill{ opcode = "send", sge = { mr = mr, length = 64 } }
    sl:set(16, { opcode = "send", sge = { mr = mr, length = 64 }, send_flags = ibv.SEND_SIGNALED })
    return rl, sl, ibv.wc_array(64)
  end

  it("a loop that checks completions in bulk allocates nothing", function()
    local rl, sl, wcs = round_lists()
    local a, b, cq = env.a, env.b, env.cq
    local function loop(rounds)
      for _ = 1, rounds do
        assert(b:post_recv(rl, 1, 16))
        assert(a:post_send(sl))
        local got = 0
        while got < 17 do
          local n, bad = cq:poll(wcs)
          if bad then error("completion " .. bad .. ": " .. wcs:status(bad)) end
          got = got + n
        end
      end
    end
    loop(100) -- warm-up
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    loop(200)
    local grown = collectgarbage("count") - before
    collectgarbage("restart")
    if grown ~= 0 then -- LuaJIT: a trace finished in this window; the next one is steady
      collectgarbage("collect")
      collectgarbage("stop")
      before = collectgarbage("count")
      loop(200)
      grown = collectgarbage("count") - before
      collectgarbage("restart")
    end
    assert.equal(0, grown)
  end)

  it("an ibv.batch cycle allocates nothing, and what ibv.transfer allocates does not grow with its count",
  function()
    local rl, sl, wcs = round_lists()
    local a, b, cq = env.a, env.b, env.cq
    local cycle = ibv.batch{ { "post_recv", b, rl, 1, 16 }, { "post_send", a, sl }, { "poll", cq, wcs } }
    local poll = ibv.batch{ { "poll", cq, wcs } }
    local done = 0
    local function loop(rounds)
      for _ = 1, rounds do
        local got, bad = cycle()
        while true do
          if bad then error("completion " .. bad .. ": " .. wcs:status(bad)) end
          done = done + got
          if done % 17 == 0 then break end
          got, bad = poll()
        end
      end
    end
    loop(100) -- warm-up
    assert.equal(0, steady_growth(loop, 200))
    assert.is_true(done >= 300 * 17) -- every round's 17 completions came

    local t = { send_qp = a, send_cq = cq, send_wrs = sl, recv = b, recv_cq = cq, recv_wrs = rl, window = 64 }
    local function transfer(count)
      assert(b:post_recv(rl)) -- transfer stops reposting at count: each call starts with the ring posted
      t.count = count
      local st = assert(ibv.transfer(t))
      assert.equal(count, st.received)
    end
    transfer(640) -- warm-up
    -- the least of three windows each: under LuaJIT a window can also hold a
    -- trace the JIT compiled then (its objects live in the same heap), once
    local function least(count)
      local m = math.huge
      for _ = 1, 3 do m = math.min(m, heap_growth(transfer, count)) end
      return m
    end
    local small, large = least(640), least(6400)
    assert.equal(small, large) -- its result table, once a call
  end)
end)
