-- The measurement kernels on rxe0 (lat.c, bw.c, kernel.c, kernels.c):
-- ping-pong against a peer process, round trips and bandwidth on a loopback
-- pair, several ends at once in one loop (ibv.kernels); the
-- figures and sample counts, the time limit, the collector and a finalizer
-- that closes the objects, no Lua (hook, collector, finalizer) while the
-- loop runs, allocation per iteration, named argument errors.
-- (SIGINT: spec/faults/sigint_spec.lua, modes lat_send, lat_write, bw.)
local ibv = require "ibverbs"
local ex = require "ibverbs.exchange"
local support = require "support"
local peer = require "kernel_peer"

local function plausible(f, s, iters)
  assert.equal(iters, f.iters)
  assert.equal(iters - 1, f.samples)
  assert.equal(iters - 1, s:count())
  -- the sorted copy the kernel made as it ended (its ticks, by radix) is the samples in order
  local want = {}
  for i = 1, s:count() do want[i] = s:get(i) end
  table.sort(want)
  for i = 1, #want do assert.equal(want[i], s:sorted(i), "sorted " .. i) end
  local st = s:stats()
  assert.is_true(st.min > 0 and st.min <= st.median and st.median <= st.max, "ordered")
  assert.is_true(st.max < 1, "a round trip below 1 s")
  -- the samples cover the run: their sum is the time between the first and the last start
  local sum = st.average * st.count
  assert.is_true(sum <= f.seconds * 1.001, string.format("samples %.6f s, run %.6f s", sum, f.seconds))
  assert.is_true(sum >= f.seconds * 0.5, string.format("samples %.6f s, run %.6f s", sum, f.seconds))
  return st
end

describe("on rxe0, the latency kernels", function()
  for i, mode in ipairs({ "send", "write" }) do
    it("run a " .. mode .. " ping-pong against a peer process: every iteration, one sample per round trip",
      function()
        local port, iters = 18950 + i, 300
        local child = support.spawn(string.format("%s spec/kernel_peer.lua %s %d %d", support.LUA, mode, port,
          iters))
        assert(support.wait_listen(port, 30), "the peer never listened")
        local e = peer.open(mode, iters)
        local conn = assert(ex.connect("127.0.0.1", port))
        peer.connect(e, conn)
        local f, err = peer.run(e, true)
        assert(f, err)
        assert.equal(iters, f.sent)
        assert.equal(iters, f.received)
        local st = plausible(f, e.s, iters)
        assert(ex.hand_shake(conn, e.me))
        conn:close()
        local out, rc = child:wait(60)
        assert.equal(0, rc, out)
        assert.matches("peer " .. mode .. ": ok iters " .. iters .. " samples " .. iters - 1, out)
        print(string.format("\n%s ping-pong: median round trip %.1f us, p99 %.1f us", mode, st.median * 1e6,
          st.p99 * 1e6))
      end)
  end
end)

describe("on rxe0, one side's kernels on a loopback pair", function()
  local env, mr, rmr
  before_each(function()
    env = support.pair{ cap = { max_send_wr = 128, max_recv_wr = 1024, max_send_sge = 1, max_recv_sge = 1 },
                        cqe = 2048 }
    mr = assert(env.pd:reg_mr(4096, { "local_write", "remote_write", "remote_read", "remote_atomic" }))
    rmr = assert(env.pd:reg_mr(4096, { "local_write", "remote_write", "remote_read", "remote_atomic" }))
  end)

  local function rtt_list(opcode)
    local l = ibv.send_wrs(1)
    if opcode == "rdma_read" then
      l:set(1, { opcode = "rdma_read", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    else
      l:set(1, { opcode = "atomic_fetch_and_add", sge = { mr = mr, length = 8 }, remote_addr = rmr.addr,
                 rkey = rmr.rkey, compare_add = 1 })
    end
    return l
  end

  it("time RDMA read and atomic round trips (lat_rtt): iters - 1 samples, the work done", function()
    local s = ibv.samples(200)
    local f = assert(ibv.lat_rtt{ qp = env.a, send_cq = env.cq, send_wrs = rtt_list("rdma_read"), iters = 200,
      samples = s })
    plausible(f, s, 200)
    assert.equal(200, f.sent)
    rmr:u64(0, 0)
    f = assert(ibv.lat_rtt{ qp = env.a, send_cq = env.cq, send_wrs = rtt_list("atomic"), iters = 150, samples = s })
    plausible(f, s, 150)
    assert.equal(150, rmr:u64(0)) -- each round trip added 1
    assert.equal(149, mr:u64(0))  -- the last fetched the value before it
  end)

  it("sends, writes and reads with a window and CQ moderation (bw): every WR, the receiver's count", function()
    local sl = ibv.send_wrs(4)
    sl:fill{ opcode = "rdma_write", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey }
    local f = assert(ibv.bw{ qp = env.a, send_cq = env.cq, send_wrs = sl, iters = 4000, window = 64, cq_mod = 16 })
    assert.equal(4000, f.sent)
    assert.equal(4000, f.posted)
    assert.is_true(f.seconds > 0)
    print(string.format("\nRDMA write, 64 bytes: %.0f WRs/s", f.sent / f.seconds))
    local rl = ibv.send_wrs(1)
    rl:set(1, { opcode = "rdma_read", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    f = assert(ibv.bw{ qp = env.a, send_cq = env.cq, send_wrs = rl, iters = 999, window = 16, cq_mod = 10 })
    assert.equal(999, f.sent) -- the last completion accounts for the 9 after the last tenth
    -- sends: b's receives posted up front, a sends, then b's side counts what arrived
    local rcq = assert(env.ctx:create_cq(1024))
    local b = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = rcq,
      cap = { max_send_wr = 1, max_recv_wr = 1024, max_send_sge = 1, max_recv_sge = 1 } })
    local a = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
      cap = { max_send_wr = 128, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1 } })
    for _, p in ipairs({ { a, b }, { b, a } }) do
      assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, gid = env.gid }, { sgid_index = support.GID_INDEX }))
    end
    local recv = ibv.recv_wrs(1000)
    recv:fill{ sge = { mr = rmr, length = 64 } }
    assert(b:post_recv(recv))
    local send = ibv.send_wrs(1)
    send:set(1, { opcode = "send", sge = { mr = mr, length = 64 } })
    f = assert(ibv.bw{ qp = a, send_cq = env.cq, send_wrs = send, iters = 1000, window = 128, cq_mod = 100 })
    assert.equal(1000, f.sent)
    f = assert(ibv.bw{ qp = b, recv_cq = rcq, recv_wrs = recv, iters = 1000, timeout = 10 })
    assert.equal(1000, f.received)
    assert.equal(0, f.sent)
  end)

  it("honour the time limit: nil, message, ETIMEDOUT and the figures so far", function()
    local rl = ibv.recv_wrs(4)
    rl:fill{ sge = { mr = mr, length = 64 } }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = "send", sge = { mr = mr, length = 64 } })
    local t0 = ibv.now()
    local f, msg, errno, got = ibv.lat_send{ qp = env.b, send_cq = env.cq, recv_cq = env.cq, send_wrs = sl,
      recv_wrs = rl, iters = 10, timeout = 0.3 }
    local dt = ibv.now() - t0
    assert.is_nil(f)
    assert.matches("timed out", msg)
    assert.equal(ibv.errno.ETIMEDOUT, errno)
    assert.equal(0, got.received)
    assert.is_true(dt >= 0.3 and dt < 1.5, dt .. " s")
    local mw = ibv.send_wrs(1)
    mw:set(1, { opcode = "rdma_write", sge = { mr = mr, length = 8 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    t0 = ibv.now()
    f, msg = ibv.lat_write{ qp = env.b, send_cq = env.cq, send_wrs = mw, send_mr = mr, poll_mr = rmr, iters = 5,
      timeout = 0.2 }
    assert.is_nil(f)
    assert.matches("timed out", msg)
    assert.is_true(ibv.now() - t0 < 1.5)
  end)

  it("run to the end while a hook forces the collector and a finalizer closes their objects", function()
    local s = ibv.samples(500)
    local l = rtt_list("rdma_read")
    local ran = 0
    local function close_a() ran = ran + 1; env.a:close() end
    if rawget(_G, "newproxy") then -- LuaJIT: tables have no finalizers
      getmetatable(newproxy(true)).__gc = close_a
    else
      setmetatable({}, { __gc = close_a }) -- garbage already
    end
    debug.sethook(function() collectgarbage() end, "", 1) -- after every Lua instruction
    local ok, f = pcall(ibv.lat_rtt, { qp = env.a, send_cq = env.cq, send_wrs = l, iters = 500, samples = s })
    debug.sethook()
    collectgarbage()
    assert.equal(1, ran)
    -- the kernel ran whole, or the finalizer ran first and it refused the closed QP
    if ok then
      assert.equal(500, f.iters)
      assert.equal(499, s:count())
    else
      assert.matches("closed ibverbs.qp", f)
    end
    assert.error_matches(function()
      ibv.lat_rtt{ qp = env.a, send_cq = env.cq, send_wrs = l, iters = 5 }
    end, "closed ibverbs.qp")
  end)

  it("allocate nothing per iteration (the figures table once per call)", function()
    local s = ibv.samples(4000)
    local l = rtt_list("rdma_read")
    local args = { qp = env.a, send_cq = env.cq, send_wrs = l, iters = 100, samples = s }
    local function growth(n)
      args.iters = n
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      assert(ibv.lat_rtt(args))
      local after = collectgarbage("count")
      collectgarbage("restart")
      return (after - before) * 1024
    end
    growth(100) -- warm-up
    -- 1000 iterations more must not add a byte each; the figures table may differ by a
    -- field or two between calls (a stray completion counted in foreign under load)
    local g1, g2 = growth(1000), growth(2000)
    assert.is_true(math.abs(g2 - g1) < 512, g1 .. " then " .. g2 .. " bytes a call")
    assert.is_true(g1 < 1024, g1 .. " bytes a call")
  end)

  it("raise errors naming the bad argument, before any work", function()
    local l = rtt_list("rdma_read")
    local two = ibv.send_wrs(2)
    two:fill{ opcode = "rdma_read", sge = { mr = mr, length = 8 }, remote_addr = rmr.addr, rkey = rmr.rkey }
    local base = { qp = env.a, send_cq = env.cq, send_wrs = l, iters = 10 }
    local function with(changes)
      local t = {}
      for k, v in pairs(base) do t[k] = v end
      for k, v in pairs(changes) do t[k] = v end
      return t
    end
    local cases = {
      { ibv.lat_rtt, with{ iters = false }, "field 'iters'" },
      { ibv.lat_rtt, with{ iters = 0 }, "iters" },
      { ibv.lat_rtt, with{ qp = env.cq }, "field 'qp': ibverbs.qp expected" },
      { ibv.lat_rtt, with{ send_cq = false }, "field 'send_cq'" },
      { ibv.lat_rtt, with{ send_wrs = ibv.recv_wrs(1) }, "field 'send_wrs': ibverbs.send_wrs expected" },
      { ibv.lat_rtt, with{ send_wrs = two }, "field 'send_wrs': one WR expected, got 2" },
      { ibv.lat_rtt, with{ samples = ibv.samples(5) }, "field 'samples': room for 5 samples, iters 10 need 9" },
      { ibv.lat_rtt, with{ samples = {} }, "field 'samples': ibverbs.samples expected" },
      { ibv.lat_rtt, with{ timeout = -1 }, "field 'timeout'" },
      { ibv.lat_rtt, with{ bogus = 1 }, "bogus" },
      { ibv.lat_send, with{}, "field 'recv_wrs': ibverbs.recv_wrs expected, got nil" },
      { ibv.lat_write, with{ send_mr = mr, poll_mr = rmr }, "an rdma_write WR expected" },
      { ibv.bw, with{ send_wrs = two, cq_mod = 3 }, "field 'cq_mod': 3 is no multiple of send_wrs' 2 WRs" },
      { ibv.bw, with{ send_wrs = two, iters = 9, cq_mod = 2 }, "field 'iters': 9 is no multiple" },
      { ibv.bw, with{ send_wrs = two, window = 1, cq_mod = 2 }, "field 'window': 1 is smaller" },
      { ibv.bw, { qp = env.a, iters = 5 }, "give send_wrs, recv_wrs or both" },
    }
    for _, c in ipairs(cases) do
      local t = c[2]
      if t.iters == false then t.iters = nil end
      if t.send_cq == false then t.send_cq = nil end
      assert.error_matches(function() c[1](t) end, c[3], nil, true)
    end
    local w = ibv.send_wrs(1)
    w:set(1, { opcode = "rdma_write", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    assert.error_matches(function()
      ibv.lat_write{ qp = env.a, send_cq = env.cq, send_wrs = w, send_mr = rmr, poll_mr = rmr, iters = 2 }
    end, "field 'send_mr': the WR's SGE is not within it", nil, true)
    assert.error_matches(function()
      ibv.lat_write{ qp = env.a, send_cq = env.cq, send_wrs = w, send_mr = mr, poll_mr = rmr, poll_offset = 4090,
        iters = 2 }
    end, "field 'poll_offset': 4090 + 64 bytes outside poll_mr", nil, true)
    local c = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
      cap = { max_send_wr = 1, max_recv_wr = 1 } })
    assert(c:close())
    assert.error_matches(function() ibv.lat_rtt(with{ qp = c }) end, "closed ibverbs.qp", nil, true)
  end)
end)

describe("on rxe0, kernels that run together (ibv.kernels)", function()
  local env, mr, rmr
  before_each(function()
    env = support.pair{ cap = { max_send_wr = 128, max_recv_wr = 1024, max_send_sge = 1, max_recv_sge = 1 },
                        cqe = 2048 }
    mr = assert(env.pd:reg_mr(65536, { "local_write", "remote_write", "remote_read" }))
    rmr = assert(env.pd:reg_mr(65536, { "local_write", "remote_write", "remote_read" }))
  end)

  -- A third and fourth QP on env's CQ, connected to each other.
  local function second_pair()
    local function make()
      return assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
        cap = { max_send_wr = 128, max_recv_wr = 1024, max_send_sge = 1, max_recv_sge = 1 } })
    end
    local c, d = make(), make()
    for _, p in ipairs({ { c, d }, { d, c } }) do
      assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, gid = env.gid },
        { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write", "remote_write", "remote_read" } }))
    end
    return c, d
  end

  -- One end of a send ping-pong on qp: its message from mr at slot*64, its
  -- receive into rmr at slot*64 (posted now).
  local function pingpong_end(qp, slot, iters, initiator, s)
    local sl, rl = ibv.send_wrs(1), ibv.recv_wrs(1)
    sl:set(1, { opcode = "send", sge = { mr = mr, offset = slot * 64, length = 8 } })
    rl:set(1, { sge = { mr = rmr, offset = slot * 64, length = 64 } })
    assert(qp:post_recv(rl))
    return { kernel = "lat_send", qp = qp, send_cq = env.cq, recv_cq = env.cq, send_wrs = sl, recv_wrs = rl,
             iters = iters, initiator = initiator, samples = s, timeout = 20 }
  end

  it("run both ends of two ping-pongs in one loop, on one CQ: every iteration of each, its own samples", function()
    local c, d = second_pair()
    local s1, s3 = ibv.samples(400), ibv.samples(250)
    local f = ibv.kernels{ pingpong_end(env.a, 0, 400, true, s1), pingpong_end(env.b, 1, 400, false),
                           pingpong_end(c, 2, 250, true, s3), pingpong_end(d, 3, 250, false) }
    assert.equal(4, #f)
    for i, want in ipairs({ 400, 400, 250, 250 }) do
      assert.is_nil(f[i].error, f[i].error)
      assert.equal(want, f[i].sent)
      assert.equal(want, f[i].received)
      assert.equal(0, f[i].foreign) -- each completion went to its own end
    end
    plausible(f[1], s1, 400)
    plausible(f[3], s3, 250)
    assert.equal(0, f[2].samples)
  end)

  it("send from one QP while another receives (recv_qp), with an RDMA write flow at the same time", function()
    local c, d = second_pair()
    local recv = ibv.recv_wrs(64)
    recv:fill{ sge = { mr = rmr, length = 256 }, stride = 256 }
    assert(env.b:post_recv(recv))
    local send = ibv.send_wrs(4)
    send:fill{ opcode = "send", sge = { mr = mr, length = 256 } }
    local write = ibv.send_wrs(1)
    write:set(1, { opcode = "rdma_write", sge = { mr = mr, offset = 32768, length = 4096 },
                   remote_addr = rmr.addr + 32768, rkey = rmr.rkey })
    mr:write(32768, string.rep("w", 4096))
    local f = ibv.kernels{
      { kernel = "bw", qp = env.a, send_cq = env.cq, send_wrs = send, recv_qp = env.b, recv_cq = env.cq,
        recv_wrs = recv, iters = 2000, window = 32, cq_mod = 16 },
      { kernel = "bw", qp = c, send_cq = env.cq, send_wrs = write, iters = 500, window = 16, cq_mod = 10 },
    }
    assert.is_nil(f[1].error, f[1].error)
    assert.is_nil(f[2].error, f[2].error)
    assert.equal(2000, f[1].sent)
    assert.equal(2000, f[1].received)
    assert.equal(500, f[2].sent)
    assert.equal(0, f[2].received)
    assert.equal(string.rep("w", 4096), rmr:read(32768, 4096))
    assert.is_true(f[1].seconds > 0 and f[2].seconds > 0)
    d:close()
  end)

  it("start an end once those it follows are over (after); prepost puts its receives in then", function()
    -- b's bandwidth receives go into the ring only after the ping-pong on the
    -- same QPs: posted before, they would have taken the pings
    local ring = ibv.recv_wrs(32)
    ring:fill{ sge = { mr = rmr, offset = 4096, length = 256 }, stride = 256 }
    local send = ibv.send_wrs(4)
    send:fill{ opcode = "send", sge = { mr = mr, offset = 4096, length = 256 } }
    local write = ibv.send_wrs(1)
    write:set(1, { opcode = "rdma_write", sge = { mr = mr, offset = 16384, length = 512 },
                   remote_addr = rmr.addr + 16384, rkey = rmr.rkey })
    mr:write(16384, string.rep("v", 512))
    local s = ibv.samples(300)
    local f = ibv.kernels{
      pingpong_end(env.a, 0, 300, true, s), pingpong_end(env.b, 1, 300, false),
      { kernel = "bw", qp = env.b, recv_cq = env.cq, recv_wrs = ring, prepost = true, iters = 1000, after = { 1, 2 } },
      { kernel = "bw", qp = env.a, send_cq = env.cq, send_wrs = send, iters = 1000, window = 32, cq_mod = 8,
        after = { 1, 2 } },
      { kernel = "bw", qp = env.a, send_cq = env.cq, send_wrs = write, iters = 100, window = 8, cq_mod = 4,
        after = 4 }, -- a's QP passes from kernel 1 to 4 to 5
    }
    for i = 1, 5 do assert.is_nil(f[i].error, f[i].error) end
    assert.equal(100, f[5].sent)
    assert.equal(string.rep("v", 512), rmr:read(16384, 512))
    assert.equal(300, f[1].received)
    assert.equal(300, f[2].received)
    plausible(f[1], s, 300)
    assert.equal(1000, f[3].received)
    assert.equal(1000, f[4].sent)
    assert.equal(0, f[3].foreign + f[4].foreign)
  end)

  it("answer a ping that came before the end started (its completion waited in the end's counts)", function()
    -- a and b ping-pong (1, 2), then b pings a again (4) as soon as 1 and 2
    -- are over, while a's answering end (5) waits for a long RDMA write flow
    -- (3): b's first ping is counted for 5 before 5 starts
    local c = second_pair()
    local write = ibv.send_wrs(1)
    write:set(1, { opcode = "rdma_write", sge = { mr = mr, offset = 32768, length = 64 },
                   remote_addr = rmr.addr + 32768, rkey = rmr.rkey })
    -- (that first round trip waits for the flow: warmup keeps it out of the samples)
    local s = ibv.samples(100)
    local ks = { pingpong_end(env.a, 0, 100, true), pingpong_end(env.b, 1, 100, false),
                 { kernel = "bw", qp = c, send_cq = env.cq, send_wrs = write, iters = 20000, window = 16,
                   cq_mod = 8 },
                 pingpong_end(env.b, 2, 100, true, s), pingpong_end(env.a, 3, 100, false) }
    ks[4].after, ks[5].after = { 1, 2 }, { 1, 3 }
    ks[4].warmup, ks[5].warmup = 1, 1
    local f = ibv.kernels(ks)
    for i = 1, 5 do assert.is_nil(f[i].error, i .. ": " .. tostring(f[i].error)) end
    for i, want in pairs({ [1] = 100, [2] = 100, [4] = 101, [5] = 101 }) do
      assert.equal(want, f[i].sent, i)
      assert.equal(want, f[i].received, i)
    end
    assert.equal(20000, f[3].sent)
    assert.equal(100, f[4].iters)
    assert.equal(99, s:count())
  end)

  it("sleep on the completion channels with event = true: every iteration, and no CPU while nothing comes",
    function()
      local ch = assert(env.ctx:create_comp_channel())
      local cq = assert(env.ctx:create_cq{ cqe = 64, channel = ch })
      local function make()
        return assert(env.pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
          cap = { max_send_wr = 8, max_recv_wr = 8, max_send_sge = 1, max_recv_sge = 1 } })
      end
      local c, d = make(), make()
      for _, p in ipairs({ { c, d }, { d, c } }) do
        assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, gid = env.gid }, { sgid_index = support.GID_INDEX }))
      end
      local ends = { pingpong_end(c, 0, 200, true), pingpong_end(d, 1, 200, false) }
      for _, k in ipairs(ends) do k.send_cq, k.recv_cq, k.event = cq, cq, true end
      local f = ibv.kernels(ends)
      assert.is_nil(f[1].error, f[1].error)
      assert.is_nil(f[2].error, f[2].error)
      assert.equal(200, f[1].received)
      assert.equal(200, f[2].received)
      -- nobody pings: half a second asleep, not spinning
      local idle = pingpong_end(d, 2, 5, false)
      idle.kernel, idle.send_cq, idle.recv_cq, idle.event, idle.timeout = nil, cq, cq, true, 0.5
      local t0, c0 = ibv.now(), os.clock()
      local g, msg = ibv.lat_send(idle)
      local wall, cpu = ibv.now() - t0, os.clock() - c0
      assert.is_nil(g)
      assert.matches("timed out", msg)
      assert.is_true(wall >= 0.5, wall .. " s")
      assert.is_true(cpu < 0.15, string.format("%.3f s of CPU in %.3f s", cpu, wall))
      assert.error_matches(function()
        ibv.lat_send{ qp = env.a, send_cq = env.cq, recv_cq = env.cq, send_wrs = ibv.send_wrs(1),
          recv_wrs = ibv.recv_wrs(1), iters = 1, event = true }
      end, "field 'event': send_cq has no completion channel", nil, true)
      local w = ibv.send_wrs(1)
      w:set(1, { opcode = "rdma_write", sge = { mr = mr, length = 8 }, remote_addr = rmr.addr, rkey = rmr.rkey })
      assert.error_matches(function()
        ibv.lat_write{ qp = c, send_cq = cq, send_wrs = w, send_mr = mr, poll_mr = rmr, iters = 2, event = true }
      end, "field 'event': lat_write polls memory", nil, true)
    end)

  it("keep a ping that waits for its late peer out of the samples with warmup (and show it without)", function()
    local c, d = second_pair()
    local function run(warmup, slot)
      local s = ibv.samples(100)
      local late = pingpong_end(c, slot, 1, false) -- nobody pings c: it times out after 0.3 s
      late.timeout = 0.3
      local ping, pong = pingpong_end(env.a, slot + 1, 100, true, s), pingpong_end(env.b, slot + 2, 100, false)
      ping.warmup, pong.warmup, pong.after = warmup, warmup, 1 -- b answers once c's wait is over
      local f = ibv.kernels{ late, ping, pong }
      assert.matches("timed out", f[1].error)
      assert.is_nil(f[2].error, f[2].error)
      assert.is_nil(f[3].error, f[3].error)
      assert.equal(100, f[2].iters)
      assert.equal(99, f[2].samples)
      assert.equal(100 + warmup, f[2].sent)
      assert.equal(100 + warmup, f[3].received)
      return s:stats().max
    end
    local with, without = run(1, 10), run(0, 20)
    assert.is_true(without >= 0.25, string.format("without warmup the wait shows: max %.3f s", without))
    assert.is_true(with < 0.2, string.format("with warmup it stays out: max %.3f s", with))
    d:close()
  end)


  it("share one time limit among ends that follow one another (within): one that starts past it stops at once",
    function()
      local c, d = second_pair()
      local function run(within, slot)
        -- nobody pings c nor d: each waits out its time limit
        local first, second = pingpong_end(c, slot, 1, false), pingpong_end(d, slot + 1, 1, false)
        first.timeout, second.timeout, second.after, second.within = 0.4, 0.4, 1, within
        local t0 = ibv.now()
        local f = ibv.kernels{ first, second }
        assert.matches("timed out", f[1].error)
        assert.matches("timed out", f[2].error)
        return ibv.now() - t0
      end
      local shared, own = run(1, 30), run(nil, 40)
      assert.is_true(shared >= 0.4 and shared < 0.7, string.format("one limit for both: %.3f s", shared))
      assert.is_true(own >= 0.8, string.format("a limit each: %.3f s", own))
      c:close()
      d:close()
    end)

  it("run no Lua while they loop: a collector forced by a hook, with finalizers due, stays out of the samples",
    function()
      local now, cap = ibv.now, 100000
      local stamps, n, fin = {}, 0, 0
      for i = 1, cap do stamps[i] = 0 end -- made before: a stamp allocates nothing
      local function stamp()
        if n < cap then n = n + 1; stamps[n] = now() end
      end
      local function finalizer() fin = fin + 1; stamp() end
      -- another coroutine makes garbage with finalizers, so that finalizers are due while the kernels run
      local maker = coroutine.wrap(function()
        for _ = 1, 200 do
          for _ = 1, 50 do
            if rawget(_G, "newproxy") then -- LuaJIT: tables have no finalizers
              getmetatable(newproxy(true)).__gc = finalizer
            else
              setmetatable({}, { __gc = finalizer })
            end
          end
          coroutine.yield()
        end
      end)
      for _ = 1, 200 do maker() end
      local s = ibv.samples(300)
      local ends = { pingpong_end(env.a, 0, 300, true, s), pingpong_end(env.b, 1, 300, false) }
      local fin0 = fin
      -- every 10 Lua instructions: a stamp and a step of the collector (which runs finalizers that are due)
      debug.sethook(function() stamp(); collectgarbage("step") end, "", 10)
      stamp()
      local f = ibv.kernels(ends)
      stamp()
      debug.sethook()
      collectgarbage()
      assert.is_nil(f[1].error, f[1].error)
      plausible(f[1], s, 300)
      assert.is_true(fin > fin0, "finalizers ran meanwhile")
      assert.is_true(n < cap, "every stamp kept")
      -- the loop ran within the call and lasted f[1].seconds: had a finalizer or the hook run during it, its
      -- stamp would cut every stretch between two stamps shorter than the loop (by more than the microseconds
      -- the call spends before and after it)
      local longest = 0
      for i = 2, n do longest = math.max(longest, stamps[i] - stamps[i - 1]) end
      assert.is_true(longest >= f[1].seconds * 0.999, string.format("the longest stretch without Lua %.6f s, " ..
        "the loop %.6f s (%d stamps, %d finalizers)", longest, f[1].seconds, n, fin - fin0))
    end)
  it("stop a failing end alone: its figures carry error and errno, the others finish", function()
    local rl = ibv.recv_wrs(1)
    rl:fill{ sge = { mr = rmr, length = 64 } }
    assert(env.b:post_recv(rl))
    local sl = ibv.send_wrs(1)
    sl:set(1, { opcode = "send", sge = { mr = mr, length = 8 } })
    local rd = ibv.send_wrs(1)
    rd:set(1, { opcode = "rdma_read", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    local t0 = ibv.now()
    local f = ibv.kernels{
      { kernel = "lat_send", qp = env.b, send_cq = env.cq, recv_cq = env.cq, send_wrs = sl, recv_wrs = rl,
        iters = 10, timeout = 0.3 }, -- nobody pings b
      { kernel = "lat_rtt", qp = env.a, send_cq = env.cq, send_wrs = rd, iters = 300 },
    }
    local dt = ibv.now() - t0
    assert.matches("timed out", f[1].error)
    assert.equal(ibv.errno.ETIMEDOUT, f[1].errno)
    assert.equal(0, f[1].received)
    assert.is_nil(f[2].error)
    assert.equal(300, f[2].sent)
    assert.is_true(dt >= 0.3 and dt < 1.5, dt .. " s")
  end)

  it("allocate nothing per iteration (one figures table per end, once per call)", function()
    local l1, l2 = ibv.send_wrs(1), ibv.send_wrs(1)
    l1:set(1, { opcode = "rdma_read", sge = { mr = mr, length = 64 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    l2:set(1, { opcode = "rdma_read", sge = { mr = rmr, length = 64 }, remote_addr = mr.addr, rkey = mr.rkey })
    local ends = { { kernel = "lat_rtt", qp = env.a, send_cq = env.cq, send_wrs = l1, iters = 100 },
                   { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l2, iters = 100 } }
    local function growth(n)
      ends[1].iters, ends[2].iters = n, n
      collectgarbage()
      collectgarbage("stop")
      local before = collectgarbage("count")
      local f = ibv.kernels(ends)
      local after = collectgarbage("count")
      collectgarbage("restart")
      assert.equal(n, f[1].sent)
      assert.equal(n, f[2].sent)
      return (after - before) * 1024
    end
    growth(100)
    local g1, g2 = growth(1000), growth(2000)
    assert.equal(g1, g2)
    assert.is_true(g1 < 4096, g1 .. " bytes a call")
  end)

  it("raise errors naming the kernel and its bad field, before any work", function()
    local l = ibv.send_wrs(1)
    l:set(1, { opcode = "rdma_read", sge = { mr = mr, length = 8 }, remote_addr = rmr.addr, rkey = rmr.rkey })
    local ok_end = { kernel = "lat_rtt", qp = env.a, send_cq = env.cq, send_wrs = l, iters = 5 }
    local s = ibv.samples(10)
    local sampled = { kernel = "lat_rtt", qp = env.a, send_cq = env.cq, send_wrs = l, iters = 5, samples = s }
    local cases = {
      { {}, "1 to 64 kernel tables expected, got 0" },
      { { 5 }, "kernel 1: table expected, got number" },
      { { ok_end, { kernel = "nope", qp = env.b } }, "kernel 2: field 'kernel': lat_send, lat_write, lat_rtt or bw " ..
        "expected, got nope" },
      { { ok_end, { qp = env.b } }, "kernel 2: field 'kernel': lat_send, lat_write, lat_rtt or bw expected, got nil" },
      { { ok_end, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l } }, "kernel 2: field 'iters'" },
      { { ok_end, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, window = 3 } },
        "kernel 2: ibv.lat_rtt: unknown field 'window'" },
      { { ok_end, ok_end }, "kernel 2: a QP of kernel 1's too" },
      { { ok_end, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, after = 2 } },
        "kernel 2: field 'after': the index of a kernel before this one (1 to 1) expected, got 2" },
      { { ok_end, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, after = { 1, "x" } } },
        "kernel 2: field 'after': the index of a kernel before this one (1 to 1) expected, got string" },
      { { { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, after = 1 } },
        "kernel 1: field 'after': the first kernel has none before it" },
      { { ok_end, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, within = 2 } },
        "kernel 2: field 'within': the index of a kernel before this one (1 to 1) expected, got 2" },
      { { { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, within = 1 } },
        "kernel 1: field 'within': the first kernel has none before it" },
      { { ok_end, { kernel = "bw", qp = env.b, recv_qp = env.a, recv_cq = env.cq, recv_wrs = ibv.recv_wrs(1),
          iters = 1 } }, "kernel 2: a QP of kernel 1's too" },
      -- one buffer for two ends, even one after the other: both would write it, and turn it to seconds twice
      { { sampled, { kernel = "lat_rtt", qp = env.b, send_cq = env.cq, send_wrs = l, iters = 5, samples = s,
          after = 1 } }, "kernel 2: field 'samples': kernel 1's too (each end needs its own)" },
    }
    for _, c in ipairs(cases) do
      assert.error_matches(function() ibv.kernels(c[1]) end, c[2], nil, true)
    end
    assert.equal(0, env.cq:poll(ibv.wc_array(4))) -- nothing was posted
  end)
end)
