-- ibv.batch on rxe0: post and poll steps prepared once and run by one call,
-- checked like the calls they stand for (objects closed meanwhile, lists whose
-- MRs were closed, a post the provider refuses), and the hot methods' own
-- closures when they are called on another object than their own.
local ibv = require "ibverbs"
local support = require "support"

local E = ibv.errno

describe("on rxe0, ibv.batch", function()
  local env, mr, rl, sl, wcs
  before_each(function()
    env = support.pair{ cqe = 1024, cap = { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 1,
                                            max_recv_sge = 1 } }
    mr = assert(env.pd:reg_mr(64 * 64, { "local_write" }))
    rl = ibv.recv_wrs(16)
    rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
    sl = ibv.send_wrs(4)
    sl:fill{ opcode = "send", sge = { mr = mr, length = 64 }, send_flags = ibv.SEND_SIGNALED }
    wcs = ibv.wc_array(64)
  end)

  --- Polls with a poll-only batch until `want` completions came (5 s at most), all
  -- successful; returns how many came.
  local function drain(poller, want, got)
    got = got or 0
    local deadline = ibv.now() + 5
    while got < want and ibv.now() < deadline do
      local n, bad = poller()
      if bad then error("completion " .. bad .. ": " .. wcs:status(bad)) end
      got = got + n
    end
    return got
  end

  it("runs post_recv, post_send and poll steps as the separate calls would", function()
    local cycle = ibv.batch{
      { "post_recv", env.b, rl, 1, 4 },
      { "post_send", env.a, sl },
      { "poll", env.cq, wcs },
    }
    assert.equal("function", type(cycle))
    local n, bad = cycle()
    assert.is_nil(bad)
    local by = { send = 0, recv = 0 }
    local function count(k)
      for i = 1, k do by[wcs:opcode(i)] = by[wcs:opcode(i)] + 1 end
    end
    count(n)
    local poller = ibv.batch{ { "poll", env.cq, wcs } }
    local got = n
    local deadline = ibv.now() + 5
    while got < 8 and ibv.now() < deadline do
      n = poller()
      count(n)
      got = got + n
    end
    assert.same({ send = 4, recv = 4 }, by)
  end)

  it("returns a count and first_bad per poll step", function()
    local cq2 = assert(env.ctx:create_cq(16))
    local w2 = ibv.wc_array(4)
    assert(env.b:post_recv(rl, 1, 1))
    assert(env.a:post_send(sl, 1, 1))
    local cycle = ibv.batch{ { "poll", env.cq, wcs }, { "poll", cq2, w2 } }
    local got, deadline = 0, ibv.now() + 5
    while got < 2 and ibv.now() < deadline do
      local n1, bad1, n2, bad2 = cycle()
      assert.is_nil(bad1)
      assert.equal(0, n2) -- nothing goes to cq2
      assert.is_nil(bad2)
      got = got + n1
    end
    assert.equal(2, got)
  end)

  it("reports the first unsuccessful completion as cq:poll does", function()
    assert(env.b:post_recv(rl, 1, 3))
    assert(env.b:modify{ qp_state = "err" })
    local cycle = ibv.batch{ { "poll", env.cq, wcs } }
    local got, deadline = 0, ibv.now() + 5
    while got < 3 and ibv.now() < deadline do
      local n, bad = cycle()
      if n > 0 then
        assert.equal(1, bad)
        assert.equal("wr_flush_err", wcs:status(1))
      end
      got = got + n
    end
    assert.equal(3, got)
  end)

  it("posts what the lists hold at each run, not what they held when it was made", function()
    local cycle = ibv.batch{ { "post_recv", env.b, rl, 1, 1 }, { "post_send", env.a, sl, 1, 1 } }
    for round = 1, 3 do
      rl:wr_id(1, 100 + round)
      assert.is_true(cycle()) -- no poll step: true
      local seen = {}
      for _, wc in ipairs(support.completions(env.cq, 2)) do seen[wc.opcode] = wc.wr_id end
      assert.equal(100 + round, seen.recv)
    end
  end)

  it("posts into an SRQ", function()
    local srq = assert(env.pd:create_srq{ max_wr = 32, max_sge = 1 })
    local cycle = ibv.batch{ { "post_recv", srq, rl } }
    local runs, ok, msg, errno, bad, step = 0, true, nil, nil, nil, nil
    while ok and runs < 100 do
      ok, msg, errno, bad, step = cycle()
      runs = runs + 1
    end
    assert.is_true(runs >= 3) -- 32 WRs at least fitted
    assert.is_nil(ok)
    assert.matches("ibv_post_srq_recv", msg)
    assert.equal(E.ENOMEM, errno)
    assert.is_true(bad >= 1 and bad <= 16)
    assert.equal(1, step)
  end)

  it("stops at a post the provider refuses: nil, msg, errno, bad_wr, step, and later steps do not run", function()
    local room = env.b:query().cap.max_recv_wr -- what the provider granted
    local big = ibv.recv_wrs(room)
    big:fill{ sge = { mr = mr, length = 64 }, stride = 0 }
    assert(env.b:post_recv(big, 1, room - 4)) -- 4 left
    assert(env.a:post_send(sl, 1, 1))
    local cycle = ibv.batch{ { "poll", env.cq, wcs }, { "post_recv", env.b, rl }, { "post_send", env.a, sl } }
    local ok, msg, errno, bad, step = cycle()
    assert.is_nil(ok)
    assert.matches("ibv_post_recv", msg)
    assert.equal(E.ENOMEM, errno)
    assert.is_true(bad >= 5 and bad <= 16, tostring(bad))
    assert.equal(2, step)
    -- the post_send step did not run: only the one send from before completes
    local sends = 0
    local function count(n)
      for i = 1, n do
        if wcs:opcode(i) == "send" then sends = sends + 1 end
      end
    end
    count(wcs:count()) -- the batch's own poll
    local deadline = ibv.now() + 0.3
    while ibv.now() < deadline do count(env.cq:poll(wcs)) end
    assert.equal(1, sends)
  end)

  it("keeps its objects alive when the script drops them", function()
    local cycle = ibv.batch{ { "post_recv", env.b, ibv.recv_wrs(1) }, { "poll", env.cq, ibv.wc_array(2) } }
    local b = env.b
    env.b = nil
    collectgarbage()
    collectgarbage()
    assert.equal("number", type(cycle())) -- the list's one WR, without SGEs, posted; the poll's count
    assert(b:modify{ qp_state = "err" })
  end)

  it("refuses to run when one of its objects was closed, naming the step", function()
    local cycle = ibv.batch{ { "post_recv", env.b, rl, 1, 1 }, { "poll", env.cq, wcs } }
    assert(cycle())
    assert(env.b:close())
    local ok, err = pcall(cycle)
    assert.is_false(ok)
    assert.matches("step 1: attempt to use a closed ibverbs.qp", err)
    assert(env.a:close())
    assert(env.cq:close())
    ok, err = pcall(cycle)
    assert.is_false(ok)
    assert.matches("closed ibverbs", err)
  end)

  --- A new MR and a one-WR receive list naming it.
  local function list_on_new_mr()
    local mr2 = assert(env.pd:reg_mr(64, { "local_write" }))
    local one = ibv.recv_wrs(1)
    one:fill{ sge = { mr = mr2, length = 64 } }
    return mr2, one
  end

  it("checks a list again at each run: a WR naming a closed MR is refused", function()
    local mr2, one = list_on_new_mr()
    local cycle = ibv.batch{ { "post_recv", env.b, one } }
    assert.is_true(cycle())
    assert(mr2:close())
    local ok, err = pcall(cycle)
    assert.is_false(ok)
    assert.matches("closed ibverbs.mr", err)
  end)

  it("checks every step before it runs one: a later step's closed MR stops the earlier posts too", function()
    local mr2, one = list_on_new_mr()
    assert(env.b:post_recv(rl, 1, 4))
    local cycle = ibv.batch{ { "post_send", env.a, sl }, { "post_recv", env.b, one } }
    assert(mr2:close())
    local ok, err = pcall(cycle)
    assert.is_false(ok)
    assert.matches("closed ibverbs.mr", err)
    local deadline, seen = ibv.now() + 0.3, 0
    while ibv.now() < deadline do seen = seen + env.cq:poll(wcs) end
    assert.equal(0, seen) -- the sends of step 1 were not posted
  end)

  it("names the argument and the step for every malformed step", function()
    local cases = {
      { nil, "table expected" },
      { {}, "1 to 8 steps" },
      { { {}, {}, {}, {}, {}, {}, {}, {}, {} }, "1 to 8 steps" },
      { { 42 }, "step 1: table expected, got number" },
      { { { "post_write", env.a, sl } }, "step 1: its first entry must be post_recv, post_send or poll" },
      { { { "poll", env.cq, wcs }, { "post_recv", env.cq, rl } }, "step 2: ibverbs.qp expected" },
      { { { "post_recv", env.b, sl } }, "step 1: ibverbs.recv_wrs expected" },
      { { { "post_send", env.a, rl } }, "step 1: ibverbs.send_wrs expected" },
      { { { "post_send", env.a, "wr" } }, "step 1: ibverbs.send_wrs expected, got string" },
      { { { "post_recv", env.b, rl, 0 } }, "step 1: first WR must be an index into the list of 16" },
      { { { "post_recv", env.b, rl, 17 } }, "step 1: first WR must be an index" },
      { { { "post_recv", env.b, rl, 10, 8 } }, "step 1: count must be 1 to 7" },
      { { { "post_recv", env.b, rl, 1, 0 } }, "step 1: count must be 1 to 16" },
      { { { "post_recv", env.b, rl, 1.5 } }, "step 1: first WR must be" },
      { { { "poll", env.a, wcs } }, "step 1: ibverbs.cq expected" },
      { { { "poll", env.cq, rl } }, "step 1: ibverbs.wc_array expected" },
      { { { "poll", env.cq, wcs, 4 } }, "step 1: poll takes a cq and a wc array only" },
    }
    for _, c in ipairs(cases) do
      local ok, err = pcall(ibv.batch, c[1])
      assert.is_false(ok)
      assert.matches(c[2], err, 1, true)
    end
  end)

  it("refuses a receive step on a QP that receives through an SRQ, and a closed object", function()
    local srq = assert(env.pd:create_srq{ max_wr = 16, max_sge = 1 })
    local q = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, srq = srq,
                                       cap = { max_send_wr = 4 } })
    local ok, err = pcall(ibv.batch, { { "post_recv", q, rl } })
    assert.is_false(ok)
    assert.matches("step 1: .*SRQ", err)
    assert(q:close())
    ok, err = pcall(ibv.batch, { { "post_send", q, sl } })
    assert.is_false(ok)
    assert.matches("closed ibverbs.qp", err)
  end)

  it("reads its step tables raw: metamethods on them do not run", function()
    local step = setmetatable({}, { __index = function() error("ran") end, __len = function() error("ran") end })
    local ok, err = pcall(ibv.batch, { step })
    assert.is_false(ok)
    assert.matches("step 1: its first entry", err)
    local steps = setmetatable({ { "poll", env.cq, wcs } }, { __len = function() error("ran") end })
    assert.equal("function", type(ibv.batch(steps)))
  end)

  it("allocates no Lua memory per run", function()
    local cycle = ibv.batch{ { "post_recv", env.b, rl, 1, 4 }, { "post_send", env.a, sl }, { "poll", env.cq, wcs } }
    local poller = ibv.batch{ { "poll", env.cq, wcs } }
    local function loop(rounds)
      for _ = 1, rounds do
        local n, bad = cycle()
        if bad then error("completion " .. bad .. ": " .. wcs:status(bad)) end
        if drain(poller, 8, n) ~= 8 then error("completions missing") end
      end
    end
    loop(20)
    local grown
    for _ = 1, 5 do
      collectgarbage("collect")
      collectgarbage("stop")
      local before = collectgarbage("count")
      loop(200)
      grown = collectgarbage("count") - before
      collectgarbage("restart")
      if grown == 0 then break end
    end
    assert.equal(0, grown)
  end)
end)

describe("on rxe0, a hot method called on another object than its own", function()
  local env, mr
  before_each(function()
    env = support.pair{ cqe = 256 }
    mr = assert(env.pd:reg_mr(4096, { "local_write" }))
  end)

  it("posts to the QP it is called on", function()
    assert(env.a.post_recv(env.b, { wr_id = 7, sge = { mr = mr, length = 64 } }))
    assert(env.a:post_send{ wr_id = 8, send_flags = { "signaled" }, sge = { mr = mr, length = 64 } })
    local by = {}
    for _, wc in ipairs(support.completions(env.cq, 2)) do by[wc.wr_id] = wc end
    assert.equal(env.b.qp_num, by[7].qp_num)
    assert.equal("success", by[7].status)
  end)

  it("checks that object's type and state", function()
    local rl = ibv.recv_wrs(1)
    rl:fill{ sge = { mr = mr, length = 64 } }
    for _, f in ipairs({
      function() env.a.post_recv(env.cq, rl) end,
      function() env.a.post_send(mr, ibv.send_wrs(1)) end,
      function() env.a.modify(env.pd, ibv.qp_attr{ qp_state = "err" }) end,
      function() env.cq.poll(env.a, ibv.wc_array(1)) end,
      function() env.cq.poll(nil, ibv.wc_array(1)) end,
      function() env.a.post_recv(newproxy and newproxy() or io.stdout, rl) end,
    }) do
      local ok, err = pcall(f)
      assert.is_false(ok)
      assert.matches("expected", err)
    end
    local closed = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
    assert(closed:close())
    local ok, err = pcall(env.a.post_recv, closed, rl)
    assert.is_false(ok)
    assert.matches("closed ibverbs.qp", err)
    ok, err = pcall(closed.post_recv, closed, rl) -- its own closure, the object closed
    assert.is_false(ok)
    assert.matches("closed ibverbs.qp", err)
  end)

  it("takes prepared attribute sets it took before and new ones alike, more than it remembers", function()
    local INIT = { qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = { "local_write" } }
    local cycle = {}
    for _ = 1, 3 do -- 9 sets: more than a QP keeps known
      for _, t in ipairs({ { qp_state = "err" }, { qp_state = "reset" }, INIT }) do
        cycle[#cycle + 1] = ibv.qp_attr(t)
      end
    end
    local qp = env.a
    for round = 1, 3 do
      for _, set in ipairs(cycle) do assert(qp:modify(set)) end
      assert.equal("init", qp:query().qp_state)
      collectgarbage()
      if round == 2 then cycle = { cycle[1], cycle[2], cycle[3] } end -- the others may go now
    end
    assert.has_error(function() qp:modify(ibv.wc_array(1)) end)
    assert(qp:close())
    local ok, err = pcall(qp.modify, qp, cycle[1])
    assert.is_false(ok)
    assert.matches("closed ibverbs.qp", err)
  end)

  it("leaves a hot method a script replaced with ibv.extend to the script, on QPs made after", function()
    local methods = ibv.methods("ibverbs.qp")
    local original, calls = methods.post_recv, 0
    ibv.extend("ibverbs.qp", { post_recv = function(qp, ...)
      calls = calls + 1
      return original(qp, ...)
    end })
    local ok, err = pcall(function()
      local q = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq })
      assert(q:modify{ qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = { "local_write" } })
      assert(q:post_recv{ wr_id = 1, sge = { mr = mr, length = 64 } })
    end)
    methods.post_recv = original
    assert(ok, err)
    assert.equal(1, calls)
  end)

  it("modifies and polls the object it is called on", function()
    local err = ibv.qp_attr{ qp_state = "err" }
    assert(env.a.modify(env.b, err))
    assert.equal("err", env.b:query().qp_state)
    assert.equal("rts", env.a:query().qp_state)
    local cq2 = assert(env.ctx:create_cq(4))
    local w = ibv.wc_array(4)
    assert.equal(0, env.cq.poll(cq2, w))
  end)
end)
