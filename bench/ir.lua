--- bench/ir.lua: the work of bench/ir.c through the Lua module (bench/run-ir).
--
--   lua5.4 bench/ir.lua MODE COUNT [-t]          -- the Lua API
--   luajit bench/ir.lua MODE COUNT [-t] [ffi]    -- ffi: through ibverbs.ffi
--
-- MODE: recv, sendrecv, modify, polltab (see bench/ir.c); modprep: modify's work
-- with ibv.qp_attr sets parsed once; recvb, sendrecvb: recv's and sendrecv's
-- work with the post and poll calls of each round in one ibv.batch; sendrecvt:
-- sendrecv's work as one ibv.transfer call (the loop in C).  The loops are
-- written as a script would: method calls (qp:post_recv(list)), a prepared
-- WR list, a wc array, cq:poll's bulk check of the completions (its second
-- result, the index of the first unsuccessful one).
-- With -t: "TIME <impl> MODE seconds COUNT", and "HEAP <impl> MODE bytes/WR"
-- (collectgarbage("count") around a second run of the work, collector stopped).
local ibv = require "ibverbs"

local CHAIN, SCHAIN, MSG, WINDOW = 64, 64, 64, 256
-- warm-up units as in bench/ir.c: LuaJIT compiles each loop before the measured run
local WARM = { recv = 8192, recvb = 8192, sendrecv = 2048, sendrecvb = 2048, sendrecvt = 2048,
               modify = 384, modprep = 384, polltab = 8192 }
local mode, count = arg[1], tonumber(arg[2])
local timed, use_ffi = false, false
for i = 3, #arg do
  if arg[i] == "-t" then timed = true elseif arg[i] == "ffi" then use_ffi = true end
end
assert(count and count > 0 and count % CHAIN == 0, "usage: ir.lua MODE COUNT [-t] [ffi]")
local IMPL = (jit and "luajit" or "lua5.4") .. (use_ffi and "-ffi" or "") -- luacheck: globals jit

local ctx = assert(ibv.open("rxe0"))
local pd = assert(ctx:alloc_pd())
local mr = assert(pd:reg_mr(WINDOW * MSG, ibv.ACCESS_LOCAL_WRITE))

local ERR, RESET = { qp_state = "err" }, { qp_state = "reset" }
local INIT = { qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = ibv.ACCESS_LOCAL_WRITE }
-- the same attribute sets parsed once (ibv.qp_attr), as C and pyverbs prepare theirs
local PREPARED = ibv.qp_attr and { ERR = ibv.qp_attr(ERR), RESET = ibv.qp_attr(RESET), INIT = ibv.qp_attr(INIT) }

local function make_qp(scq, rcq, sq, rq)
  return assert(pd:create_qp{ qp_type = "rc", send_cq = scq, recv_cq = rcq,
    cap = { max_send_wr = sq, max_recv_wr = rq, max_send_sge = 1, max_recv_sge = 1 } })
end

local function rq_setup(rq)
  local r = { cq = assert(ctx:create_cq(CHAIN)), wcs = ibv.wc_array(CHAIN), rl = ibv.recv_wrs(CHAIN) }
  r.qp = make_qp(r.cq, r.cq, 1, rq)
  r.rl:fill{ sge = { mr = mr, length = MSG }, stride = MSG }
  assert(r.qp:modify(INIT))
  return r
end

local work = {}
local poll_ok -- set by pair_setup

function work.recv(r, n)
  local qp, cq, rl, wcs = r.qp, r.cq, r.rl, r.wcs
  for _ = 1, n / CHAIN do
    local ok, err = qp:post_recv(rl)
    if not ok then error(err) end
    if cq:poll(wcs) ~= 0 then error("completions on an idle QP") end
  end
end

-- recv's work, each chain's post and poll one ibv.batch call (made once)
function work.recvb(r, n)
  r.cycle = r.cycle or ibv.batch{ { "post_recv", r.qp, r.rl }, { "poll", r.cq, r.wcs } }
  local cycle = r.cycle
  for _ = 1, n / CHAIN do
    local got, bad = cycle()
    if got ~= 0 then error(got and "completions on an idle QP" or bad) end
  end
end

local function modify_loop(r, n, err, reset, init)
  local qp = r.qp
  for _ = 1, n / 3 do
    local ok1, e1 = qp:modify(err)
    local ok2, e2 = qp:modify(reset)
    local ok3, e3 = qp:modify(init)
    if not (ok1 and ok2 and ok3) then error(e1 or e2 or e3) end
  end
end

-- modify: attribute tables, read on each call; modprep: prepared attribute sets
function work.modify(r, n) modify_loop(r, n, ERR, RESET, INIT) end
function work.modprep(r, n) modify_loop(r, n, PREPARED.ERR, PREPARED.RESET, PREPARED.INIT) end

function work.polltab(r, n)
  local qp, cq, rl = r.qp, r.cq, r.rl
  for _ = 1, n / CHAIN do
    assert(qp:post_recv(rl))
    assert(qp:modify(ERR))
    local got = 0
    while got < CHAIN do got = got + #assert(cq:poll(CHAIN)) end
    assert(qp:modify(RESET))
    assert(qp:modify(INIT))
  end
end

-- Polls cq once into wcs: the count, every completion checked in one go
-- (cq:poll's second result); a module without that check (before it had
-- one) is measured with wcs:status(i) for each completion instead.
local function bulk_poll_ok(cq, wcs)
  local n, bad = cq:poll(wcs)
  if bad then
    if not n then error(bad) end
    error("wc status " .. wcs:status(bad))
  end
  return n
end

local function each_poll_ok(cq, wcs)
  local n, err = cq:poll(wcs)
  if not n then error(err) end
  for i = 1, n do
    if wcs:status(i) ~= "success" then error("wc status " .. wcs:status(i)) end
  end
  return n
end

local function pair_setup()
  local p = { scq = assert(ctx:create_cq(WINDOW)), rcq = assert(ctx:create_cq(WINDOW)) }
  p.a = make_qp(p.scq, p.rcq, WINDOW, WINDOW)
  p.b = make_qp(p.scq, p.rcq, WINDOW, WINDOW)
  local gid = ctx:query_gid(1, 1)
  local opts = { sgid_index = 1, qp_access_flags = ibv.ACCESS_LOCAL_WRITE }
  assert(p.a:connect({ qpn = p.b.qp_num, psn = 0, gid = gid }, opts))
  assert(p.b:connect({ qpn = p.a.qp_num, psn = 0, gid = gid }, opts))
  p.rl = ibv.recv_wrs(WINDOW)
  p.rl:fill{ sge = { mr = mr, length = MSG }, stride = MSG }
  p.sl = ibv.send_wrs(SCHAIN)
  p.sl:fill{ opcode = "send", sge = { mr = mr, length = MSG } }
  p.sl:set(SCHAIN, { wr_id = SCHAIN - 1, opcode = "send", sge = { mr = mr, length = MSG },
    send_flags = ibv.SEND_SIGNALED })
  p.wcs = ibv.wc_array(CHAIN)
  for c = 0, WINDOW / CHAIN - 1 do assert(p.b:post_recv(p.rl, c * CHAIN + 1, CHAIN)) end
  poll_ok = select("#", p.scq:poll(p.wcs)) >= 2 and bulk_poll_ok or each_poll_ok
  return p
end

-- reposts the consumed receives in CHAIN-WR ranges of the window
local function repost(b, rl, recvd, reposted, rposted)
  while recvd - reposted >= CHAIN do
    local ok, err = b:post_recv(rl, reposted % WINDOW + 1, CHAIN)
    if not ok then error(err) end
    reposted, rposted = reposted + CHAIN, rposted + CHAIN
  end
  return reposted, rposted
end

function work.sendrecv(p, n)
  local a, b, scq, rcq, sl, rl, wcs = p.a, p.b, p.scq, p.rcq, p.sl, p.rl, p.wcs
  local sent, scomp, recvd, reposted, rposted = 0, 0, 0, 0, WINDOW
  local deadline = ibv.now() + 600
  while recvd < n do
    if sent < n and sent - scomp + SCHAIN <= WINDOW and sent + SCHAIN <= rposted then
      local ok, err = a:post_send(sl)
      if not ok then error(err) end
      sent = sent + SCHAIN
    end
    scomp = scomp + poll_ok(scq, wcs) * SCHAIN
    recvd = recvd + poll_ok(rcq, wcs)
    reposted, rposted = repost(b, rl, recvd, reposted, rposted)
    if recvd < n and ibv.now() > deadline then error("sendrecv: timed out") end
  end
  while scomp < sent do scomp = scomp + poll_ok(scq, wcs) * SCHAIN end
end

-- sendrecv's work, each round's post_send and polls one ibv.batch call (made once)
function work.sendrecvb(p, n)
  local b, rl, wcs = p.b, p.rl, p.wcs
  p.batches = p.batches or {
    ibv.batch{ { "post_send", p.a, p.sl }, { "poll", p.scq, wcs }, { "poll", p.rcq, wcs } },
    ibv.batch{ { "poll", p.scq, wcs }, { "poll", p.rcq, wcs } } }
  local send_poll, poll = p.batches[1], p.batches[2]
  local sent, scomp, recvd, reposted, rposted = 0, 0, 0, 0, WINDOW
  local deadline = ibv.now() + 600
  while recvd < n do
    local sn, sbad, rn, rbad
    if sent < n and sent - scomp + SCHAIN <= WINDOW and sent + SCHAIN <= rposted then
      sn, sbad, rn, rbad = send_poll()
      if not sn then error(sbad) end
      sent = sent + SCHAIN
    else
      sn, sbad, rn, rbad = poll()
    end
    if sbad or rbad then error("wc status " .. wcs:status(rbad or sbad)) end
    scomp, recvd = scomp + sn * SCHAIN, recvd + rn
    reposted, rposted = repost(b, rl, recvd, reposted, rposted)
    if recvd < n and ibv.now() > deadline then error("sendrecv: timed out") end
  end
  while scomp < sent do scomp = scomp + poll_ok(p.scq, wcs) * SCHAIN end
end

-- sendrecv's work in one ibv.transfer call: its loop, in C, reposts each
-- poll's consumed receives as one chain and stops reposting at n, so each
-- call begins with the ring posted again
function work.sendrecvt(p, n)
  if p.drained then
    for c = 0, WINDOW / CHAIN - 1 do assert(p.b:post_recv(p.rl, c * CHAIN + 1, CHAIN)) end
  end
  p.drained = true
  p.transfer = p.transfer or { send_qp = p.a, send_cq = p.scq, send_wrs = p.sl, recv = p.b,
    recv_cq = p.rcq, recv_wrs = p.rl, window = WINDOW }
  p.transfer.count = n
  local st, err = ibv.transfer(p.transfer) -- its result: one table a call
  if not st then error(err) end
end

-- The same loops through ibverbs.ffi (LuaJIT).
local function ffi_work(w)
  local xffi = require "ibverbs.ffi"
  local post_recv, post_send, poll_cq = xffi.post_recv, xffi.post_send, xffi.poll_cq
  local function check(span, k)
    for i = 0, k - 1 do
      if span.p[i].status ~= 0 then error("wc status " .. span.p[i].status) end
    end
    return k
  end
  function w.recv(r, n)
    r.h = r.h or { xffi.qp(r.qp), xffi.cq(r.cq), xffi.recv_wrs(r.rl), xffi.wc_array(r.wcs) }
    local q, c, rw, wc = r.h[1], r.h[2], r.h[3], r.h[4]
    for _ = 1, n / CHAIN do
      local ok, err = post_recv(q, rw)
      if not ok then error(err) end
      if poll_cq(c, wc) ~= 0 then error("completions on an idle QP") end
    end
  end
  function w.sendrecv(p, n)
    p.h = p.h or { xffi.qp(p.a), xffi.qp(p.b), xffi.cq(p.scq), xffi.cq(p.rcq),
                   xffi.send_wrs(p.sl), xffi.recv_wrs(p.rl), xffi.wc_array(p.wcs) }
    local qa, qb, scq, rcq, sw, rw, wc = unpack(p.h) -- luacheck: globals unpack
    local sent, scomp, recvd, reposted, rposted = 0, 0, 0, 0, WINDOW
    while recvd < n do
      if sent < n and sent - scomp + SCHAIN <= WINDOW and sent + SCHAIN <= rposted then
        local ok, err = post_send(qa, sw)
        if not ok then error(err) end
        sent = sent + SCHAIN
      end
      scomp = scomp + check(wc, assert(poll_cq(scq, wc))) * SCHAIN
      recvd = recvd + check(wc, assert(poll_cq(rcq, wc)))
      while recvd - reposted >= CHAIN do
        local ok, err = post_recv(qb, rw, reposted % WINDOW, CHAIN)
        if not ok then error(err) end
        reposted, rposted = reposted + CHAIN, rposted + CHAIN
      end
    end
    while scomp < sent do scomp = scomp + check(wc, assert(poll_cq(scq, wc))) * SCHAIN end
  end
end

if use_ffi then ffi_work(work) end
local f = assert(work[mode], "MODE: recv, sendrecv, modify, modprep or polltab")
local runs = timed and 2 or 1 -- with -t, a second run measures the heap
local env
if mode:match("^sendrecv") then
  env = pair_setup()
elseif mode == "recv" or mode == "recvb" then
  env = rq_setup(runs * count + WARM.recv) -- the receives stay posted: room for every run
else
  env = rq_setup(CHAIN)
end
f(env, WARM[mode])
-- under bench/run-ir's callgrind runs, only what runs inside measure.run counts
local have_measure, measure = pcall(require, "measure")
local t0 = ibv.now()
if have_measure then measure.run(f, env, count) else f(env, count) end
local s = ibv.now() - t0
if timed then
  -- the steady state's heap growth: a run after the measured one (LuaJIT's
  -- traces are made, every table the loop keeps is grown), collector stopped
  collectgarbage("collect")
  collectgarbage("stop")
  local kib = collectgarbage("count")
  f(env, count)
  local grown = (collectgarbage("count") - kib) * 1024
  collectgarbage("restart")
  print(("TIME %s %s %.6f %d"):format(IMPL, mode, s, count))
  print(("HEAP %s %s %.4f"):format(IMPL, mode, grown / count))
end
