--- post_poll.lua: the work of bench/post_poll.c through the Lua module.
--
--   lua5.4 bench/post_poll.lua [-d rxe0] [-g 1] [-n 1000000] [-c 8000] [-m 51200] [-w 256] [-r 5]
--   (luajit too; bench/run runs both next to the C reference in one VM boot)
--
-- recv: a prepared ibv.recv_wrs(64) posted again and again with qp:post_recv(list);
-- every c WRs the QP goes to ERR, the flush completions are polled with
-- cq:poll(wcs) into an ibv.wc_array, then RESET and INIT (prepared attribute
-- tables).  sendrecv: an RC loopback pair, 64-byte sends posted as a prepared
-- ibv.send_wrs(16) (the last one signaled), a ring of w receives reposted in
-- chains of 64 as they complete; once as a Lua loop ("sendrecv") and once
-- with the module's C loop ibv.transfer ("transfer").
-- The hot loops call methods kept in locals (qp.post_recv and such): objects
-- with fields (qp.qp_num, cq.cqe) find their methods through a C __index,
-- one more C call per qp:method(...).
-- Each measurement runs once to warm up, then r times.
-- Output lines: RESULT <lua> <measure> <median WRs/s> <best WRs/s> [extra], where
-- extra gives the Lua heap (collectgarbage("count"), GC stopped) before and
-- after the last run and the bytes allocated per WR.
local ibv = require "ibverbs"

local CHAIN, SCHAIN, MSG = 64, 16, 64
local now = ibv.now
local IMPL = jit and "luajit" or "lua5.4" -- luacheck: globals jit

local function options(argv)
  local o = { d = "rxe0", g = 1, n = 1000000, c = 8000, m = 51200, w = 256, r = 5 }
  local i = 1
  while i <= #argv do
    local k = argv[i]:match("^%-(%a)$")
    if not k or o[k] == nil or argv[i + 1] == nil then
      io.stderr:write("usage: post_poll.lua [-d dev] [-g gid] [-n recvs] [-c cycle] [-m msgs] [-w window] [-r reps]\n")
      os.exit(2)
    end
    local v = k == "d" and argv[i + 1] or tonumber(argv[i + 1])
    assert(k == "d" or (v and v == math.floor(v)), "-" .. k .. ": integer expected")
    o[k] = v
    i = i + 2
  end
  assert(o.c % CHAIN == 0 and o.n % o.c == 0 and o.w % CHAIN == 0 and o.m % CHAIN == 0 and o.r >= 1,
    "-c, -w and -m must be multiples of 64, -n of -c")
  return o
end

local function report(measure, rates, extra)
  table.sort(rates)
  print(string.format("RESULT %s %s %.0f %.0f %s", IMPL, measure, rates[math.floor(#rates / 2) + 1],
    rates[#rates], extra or ""))
  io.stdout:flush()
end

--- Runs f() with the collector stopped; returns its results and the heap growth in KiB.
local function measured(f)
  collectgarbage("collect")
  collectgarbage("stop")
  local before = collectgarbage("count")
  local a, b = f()
  local after = collectgarbage("count")
  collectgarbage("restart")
  return a, b, before, after
end

local function alloc_note(before, after, wrs)
  return string.format("heap %.3f -> %.3f KiB, %.4f bytes/WR", before, after, (after - before) * 1024 / wrs)
end

local function open_env(o, bytes)
  local e = { ctx = assert(ibv.open(o.d)) }
  e.pd = assert(e.ctx:alloc_pd())
  e.mr = assert(e.pd:reg_mr(bytes, ibv.ACCESS_LOCAL_WRITE))
  return e
end

local function make_qp(e, scq, rcq, sq, rq)
  return assert(e.pd:create_qp{ qp_type = "rc", send_cq = scq, recv_cq = rcq,
    cap = { max_send_wr = sq, max_recv_wr = rq, max_send_sge = 1, max_recv_sge = 1 } })
end

--- Polls until n completions arrived or 5 s passed; returns the count.
local function drain(cq, wcs, n)
  local got, deadline, poll = 0, now() + 5, cq.poll
  while got < n do
    local k = assert(poll(cq, wcs))
    got = got + k
    if k == 0 and now() > deadline then break end
  end
  return got
end

-- ---- recv: posting, drained through ERR -----------------------------------

local ERR, RESET = { qp_state = "err" }, { qp_state = "reset" }
local INIT = { qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = ibv.ACCESS_LOCAL_WRITE }

--- One run: posting seconds, whole seconds; st.flushed counts the flush
-- completions, st.post_kib the heap growth while posting.
local function recv_run(o, qp, cq, rl, wcs, st)
  local post_s, start, count = 0, now(), collectgarbage
  st.flushed, st.post_kib = 0, 0
  local chains, post_recv = o.c / CHAIN, qp.post_recv
  for _ = 1, o.n / o.c do
    local kib = count("count")
    local t0 = now()
    for _ = 1, chains do
      local ok, err = post_recv(qp, rl)
      if not ok then error(err) end
    end
    post_s = post_s + (now() - t0)
    st.post_kib = st.post_kib + (count("count") - kib)
    assert(qp:modify(ERR))
    st.flushed = st.flushed + drain(cq, wcs, o.c)
    assert(qp:modify(RESET))
    assert(qp:modify(INIT))
  end
  return post_s, now() - start
end

local function bench_recv(o)
  local e = open_env(o, CHAIN * MSG)
  local cq = assert(e.ctx:create_cq(o.c))
  local qp = make_qp(e, cq, cq, 1, o.c)
  local rl = ibv.recv_wrs(CHAIN)
  rl:fill{ sge = { mr = e.mr, length = MSG }, stride = MSG }
  local wcs = ibv.wc_array(64)
  assert(qp:modify(INIT))
  local post, cycle, st, before, after = {}, {}, {}, 0, 0
  recv_run({ n = o.c, c = o.c }, qp, cq, rl, wcs, st) -- warm-up, one cycle
  for r = 1, o.r do
    local ps, cs
    ps, cs, before, after = measured(function() return recv_run(o, qp, cq, rl, wcs, st) end)
    post[r], cycle[r] = o.n / ps, o.n / cs
  end
  local flushed = string.format("flushed=%d/%d; ", st.flushed, o.n)
  report("recv_post", post, flushed .. string.format("heap +%.3f KiB while posting, %.4f bytes/WR",
    st.post_kib, st.post_kib * 1024 / o.n))
  report("recv_cycle", cycle, flushed .. alloc_note(before, after, o.n) ..
    " (three qp:modify calls per cycle; posting itself: see recv_post)")
  qp:close(); cq:close(); e.mr:close(); e.pd:close(); e.ctx:close()
end

-- ---- sendrecv: loopback message rate ---------------------------------------

local poll, status -- cq.poll and wcs.status, set by make_pair

local function connect(o, p)
  local gid = p.ctx:query_gid(1, o.g)
  for _, q in ipairs({ { p.a, p.b }, { p.b, p.a } }) do
    assert(q[1]:connect({ qpn = q[2].qp_num, psn = 0, gid = gid },
      { sgid_index = o.g, qp_access_flags = ibv.ACCESS_LOCAL_WRITE }))
  end
end

local function make_pair(o)
  local p = open_env(o, o.w * MSG)
  p.scq = assert(p.ctx:create_cq(o.w))
  p.rcq = assert(p.ctx:create_cq(o.w))
  p.a = make_qp(p, p.scq, p.rcq, o.w, o.w)
  p.b = make_qp(p, p.scq, p.rcq, o.w, o.w)
  connect(o, p)
  p.rl = ibv.recv_wrs(o.w)
  p.rl:fill{ sge = { mr = p.mr, length = MSG }, stride = MSG }
  p.sl = ibv.send_wrs(SCHAIN)
  p.sl:fill{ opcode = "send", sge = { mr = p.mr, length = MSG } }
  p.sl:set(SCHAIN, { wr_id = SCHAIN - 1, opcode = "send", sge = { mr = p.mr, length = MSG },
    send_flags = ibv.SEND_SIGNALED })
  p.wcs = ibv.wc_array(64)
  poll, status = p.scq.poll, p.wcs.status
  return p
end

--- Polls cq once into wcs; every completion must be successful.
local function poll_ok(cq, wcs)
  local n, err = poll(cq, wcs)
  if not n then error(err) end
  for i = 1, n do
    if status(wcs, i) ~= "success" then error("wc status " .. status(wcs, i)) end
  end
  return n
end

--- One run of o.m messages as a Lua loop; returns the seconds.
local function sendrecv_run(o, p)
  local a, b, scq, rcq, sl, rl, wcs = p.a, p.b, p.scq, p.rcq, p.sl, p.rl, p.wcs
  local nchunks, msgs, window = o.w / CHAIN, o.m, o.w
  local post_send, post_recv = a.post_send, b.post_recv
  for c = 0, nchunks - 1 do assert(post_recv(b, rl, c * CHAIN + 1, CHAIN)) end
  local sent, scomp, recvd, reposted, rposted, chunk = 0, 0, 0, 0, window, 0
  local start = now()
  local deadline = start + 60
  while recvd < msgs do
    if sent < msgs and sent - scomp + SCHAIN <= window and sent + SCHAIN <= rposted then
      local ok, err = post_send(a, sl)
      if not ok then error(err) end
      sent = sent + SCHAIN
    end
    scomp = scomp + poll_ok(scq, wcs) * SCHAIN
    recvd = recvd + poll_ok(rcq, wcs)
    while recvd - reposted >= CHAIN do
      local ok, err = post_recv(b, rl, chunk * CHAIN + 1, CHAIN)
      if not ok then error(err) end
      chunk = chunk + 1
      if chunk == nchunks then chunk = 0 end
      reposted, rposted = reposted + CHAIN, rposted + CHAIN
    end
    if now() > deadline then error("sendrecv: timed out") end
  end
  local s = now() - start
  while scomp < sent do scomp = scomp + poll_ok(scq, wcs) * SCHAIN end
  p.outstanding = rposted - recvd -- flushed on reconnect
  return s
end

--- The same messages through the module's C loop.
local function transfer_run(o, p)
  assert(p.b:post_recv(p.rl))
  local st = assert(ibv.transfer{ send_qp = p.a, send_cq = p.scq, send_wrs = p.sl,
    recv = p.b, recv_cq = p.rcq, recv_wrs = p.rl, count = o.m, window = o.w, timeout = 60 })
  assert(st.received == o.m)
  p.outstanding = 0 -- the loop reposts no more than count receives
  return st.seconds
end

--- Back to a fresh connection with no receives posted.
local function reconnect(o, p)
  for _, q in ipairs({ p.a, p.b }) do
    assert(q:modify(ERR))
    assert(q:modify(RESET))
  end
  drain(p.rcq, p.wcs, p.outstanding)
  connect(o, p)
end

local function bench_sendrecv(o, measure, run)
  local p = make_pair(o)
  local rates, before, after = {}, 0, 0
  run({ m = 4 * o.w, w = o.w }, p) -- warm-up
  for r = 1, o.r do
    reconnect(o, p)
    local s, _
    s, _, before, after = measured(function() return run(o, p) end)
    rates[r] = o.m / s
  end
  report(measure, rates, alloc_note(before, after, o.m))
  for _, k in ipairs({ "a", "b", "scq", "rcq", "mr", "pd", "ctx" }) do p[k]:close() end
end

local o = options(arg)
bench_recv(o)
bench_sendrecv(o, "sendrecv", sendrecv_run)
bench_sendrecv(o, "transfer", transfer_run)
