--- One round's traffic of fabric_matrix.lua on this rank: the ends of its
-- pairs (an "out" end sends to its peer, an "in" end receives from it), their
-- RC connections, and the run that measures them: ping-pong latency on every
-- end first (the in end echoes), then, once no latency is left to measure on
-- this rank, RDMA write and send bandwidth; then a check of every byte that
-- arrived.  An end is in one state at a time (STATE); every work request
-- carries a named wr_id (WR; the send bandwidth's ring of receives uses its
-- slot numbers, 0 up).
--
--   local traffic = require "pair_traffic"
--   local tr = traffic.new{ o = o, ibv = ibv, me = rank, block = BLOCK }
--   local e = tr:new_end(rail, "out", peer); tr:connect(e, tr.parse_info(text)); tr:run({ e, ... })
local measures = require "measures"
local socket = require "socket"

local traffic = {}

traffic.CHAIN = 8 -- send WRs per post, the last one signaled
traffic.WINDOW = 4 -- chains in flight
traffic.RING = 32 -- receives posted for the send bandwidth
local CHAIN, WINDOW = traffic.CHAIN, traffic.WINDOW
local ACCESS = { "local_write", "remote_write" }

--- An end's states, in order (measures.PHASES names what each is doing).
traffic.STATE = { lat = "lat", lat_done = "lat_done", rx = "rx", write = "write", send = "send", done = "done" }
local S = traffic.STATE

--- The wr_ids of the work requests other than the ring's slots.
traffic.WR = { pong = 1001, ping = 1002, echo = 1003, ping_rx = 1004, chain = 1005 }
local WR = traffic.WR

--- The sizes the options give: messages per bandwidth kind (whole chains),
-- the ring's receives, a rail's CQ entries.
function traffic.sizes(o)
  local bw_iters = math.max(CHAIN, o.bw_iters + (CHAIN - o.bw_iters % CHAIN) % CHAIN)
  return { bw_iters = bw_iters, ring_n = math.min(traffic.RING, bw_iters),
    cqe = 8 * traffic.RING + 8 * WINDOW * CHAIN + 64 }
end

--- The bytes src sends dst (n of them): what the receiver checks.
function traffic.pattern_bytes(src, dst, n)
  local t = {}
  for i = 0, 255 do t[#t + 1] = string.char((i * 7 + src * 31 + dst * 17 + 1) % 256) end
  return (string.rep(table.concat(t), math.ceil(n / 256))):sub(1, n)
end
local pattern_bytes = traffic.pattern_bytes

local T = {}
T.__index = T

--- The traffic of this rank: cfg.o (the options), cfg.ibv, cfg.me (its
-- rank), cfg.block (rounds per exchange).
function traffic.new(cfg)
  local sizes = traffic.sizes(cfg.o)
  return setmetatable({ o = cfg.o, ibv = cfg.ibv, me = cfg.me, block = cfg.block, bw_iters = sizes.bw_iters,
    ring_n = sizes.ring_n, round_limit = 2 * cfg.o.timeout }, T)
end

function T:now() return self.ibv and self.ibv.now() or socket.gettime() end

--- The end of a pair on this rank: kind "out" (this rank sends to peer) or "in".
function T:new_end(rail, kind, peer)
  local e = { rail = rail, kind = kind, peer = peer, psn = math.random(0, 0xffffff) }
  local qp, err = rail.pd:create_qp{ qp_type = "rc", send_cq = rail.cq, recv_cq = rail.cq,
    cap = { max_send_wr = WINDOW * CHAIN + 8, max_recv_wr = self.ring_n + 4, max_send_sge = 1, max_recv_sge = 1 } }
  if not qp then e.err = "create_qp: " .. tostring(err); return e end
  e.qp = qp
  return e
end

--- What the peer needs of an end: "qpn psn lid mtu gid addr rkey" (a dry rail's stands in).
function traffic.info(rail, e)
  if rail.dry then return "1 0 0 1024 :: 0 0" end
  if not e or not e.qp then return nil end
  local mr = e.kind == "in" and rail.in_buf or rail.out_buf
  return string.format("%d %d %d %d %s %.0f %d", e.qp.qp_num, e.psn, rail.lid or 0, rail.mtu or 1024,
    rail.gid or "::", mr.addr, mr.rkey)
end

function traffic.parse_info(s)
  local qpn, psn, lid, mtu, gid, addr, rkey = s:match("^(%d+) (%d+) (%d+) (%d+) (%S+) (%d+) (%d+)$")
  if not qpn then return nil end
  return { qpn = tonumber(qpn), psn = tonumber(psn), lid = tonumber(lid), mtu = tonumber(mtu), gid = gid,
    addr = tonumber(addr), rkey = tonumber(rkey) }
end

function T:post_first_rx(e)
  local pok, perr = e.qp:post_recv{ wr_id = WR.ping_rx, sge = { mr = e.rail.in_lat, length = self.o.lat_size } }
  if not pok then e.err = "post_recv: " .. tostring(perr) end
  e.first_rx = true
end

--- Connects an end to its peer's (rem: parse_info's); e.err on failure, e.connected on success.
function T:connect(e, rem)
  local o, rail = self.o, e.rail
  local ok, err, errno
  local until_t = self:now() + o.timeout
  for _ = 1, 3 do -- RoCE resolves the peer's MAC in the RTR step: a first ARP may time out (ETIMEDOUT)
    ok, err, errno = e.qp:connect({ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, gid = rem.gid },
      { port_num = rail.port, sgid_index = rail.gid_index, qp_access_flags = ACCESS,
        path_mtu = math.min(rail.mtu, rem.mtu), psn = e.psn, timeout = o.qp_timeout })
    if ok or errno ~= 110 or self:now() > until_t then break end
    e.qp:modify{ qp_state = "reset" }
  end
  if not ok then e.err = "RC connect: " .. tostring(err); return end
  e.raddr, e.rkey = rem.addr, rem.rkey
  -- the first ping's receive, before the round's barrier; in blocks of rounds,
  -- when the round starts (the buffers are the rail's: an early partner waits)
  if e.kind == "in" and self.block == 1 then self:post_first_rx(e) end
  e.connected = not e.err
end

function traffic.close_end(e)
  if e and e.qp then e.qp:close(); e.qp = nil end
end

-- ---------------------------------------------------------------- one run

local Run = {}
Run.__index = Run

function Run:leave_lat(e)
  if e.in_lat then e.in_lat = false; self.lat_left = self.lat_left - 1 end
end

function Run:finish(e)
  e.state = S.done
  self.live = self.live - 1
end

function Run:fail(e, msg)
  if e.state == S.done then return end
  self:leave_lat(e)
  e.res.error = e.res.error or msg
  self:finish(e)
end

function Run:post_chain(e)
  local ok, err = e.qp:post_send(e[e.state])
  if not ok then self:fail(e, e.state .. " post: " .. tostring(err)); return end
  e.inflight = e.inflight + 1
  e.posted = e.posted + CHAIN
end

function Run:start_bw(e, state)
  local now = self.tr:now()
  e.state, e.inflight, e.posted, e.acked, e.t0, e.last = state, 0, 0, 0, now, now
  while e.inflight < WINDOW and e.posted < self.tr.bw_iters and e.state == state do self:post_chain(e) end
end

-- A chain of CHAIN WRs of opcode, the last one signaled.
local function chain(ibv, opcode, rail, size, e, remote)
  local w = ibv.send_wrs(CHAIN)
  local wr = { opcode = opcode, sge = { mr = rail.out_buf, length = size } }
  if remote then wr.remote_addr, wr.rkey = e.raddr, e.rkey end
  w:fill(wr)
  wr.wr_id, wr.send_flags = WR.chain, { "signaled" }
  w:set(CHAIN, wr)
  return w
end

-- The sending end: its ping-pong starts, its bandwidth chains are made.
function Run:start_out(e)
  local tr, rail, o = self.tr, e.rail, self.tr.o
  e.ping_rx = { wr_id = WR.pong, sge = { mr = rail.out_lat, offset = o.lat_size, length = o.lat_size } }
  e.ping_tx = { wr_id = WR.ping, opcode = "send", send_flags = { "signaled" },
    sge = { mr = rail.out_lat, length = o.lat_size } }
  rail.out_lat:write(0, pattern_bytes(tr.me, e.peer, o.lat_size))
  rail.out_buf:write(0, pattern_bytes(tr.me, e.peer, o.bw_size))
  e[S.write] = chain(tr.ibv, "rdma_write", rail, o.bw_size, e, true)
  e[S.send] = chain(tr.ibv, "send", rail, o.bw_size, e, false)
  e.got, e.rtts = 0, {}
  e.t0 = tr:now()
  e.ti = e.t0
  local ok, err = e.qp:post_recv(e.ping_rx)
  if ok then ok, err = e.qp:post_send(e.ping_tx) end
  if not ok then self:fail(e, "ping-pong post: " .. tostring(err)) end
end

-- The receiving end: it echoes every ping.
function Run:start_in(e)
  local rail, o = e.rail, self.tr.o
  e.echoed, e.received = 0, 0
  e.echo_tx = { wr_id = WR.echo, opcode = "send", send_flags = { "signaled" },
    sge = { mr = rail.in_lat, length = o.lat_size } }
  e.ping_rx = { wr_id = WR.ping_rx, sge = { mr = rail.in_lat, length = o.lat_size } }
  if not e.first_rx then
    self.tr:post_first_rx(e)
    if e.err then self:fail(e, e.err) end
  end
end

-- A ping's send or its pong arrived; both: one round trip.
function Run:on_ping(e, t)
  local o = self.tr.o
  e.got = e.got + 1
  if e.got < 2 then return end
  e.i, e.got = e.i + 1, 0
  e.rtts[e.i] = t - e.ti
  e.ti = t
  if e.i == o.lat_iters then
    -- the typical round trip (median), halved: a host that stalls now and then does not move it
    table.sort(e.rtts)
    local m = (#e.rtts + 1) / 2
    e.res.lat_us = (e.rtts[math.floor(m)] + e.rtts[math.ceil(m)]) / 4 * 1e6
    e.state = S.lat_done
    self:leave_lat(e)
    if self.bw_started then self:start_bw(e, S.write) end
  else
    local ok, err = e.qp:post_recv(e.ping_rx)
    if ok then ok, err = e.qp:post_send(e.ping_tx) end
    if not ok then self:fail(e, "ping-pong post: " .. tostring(err)) end
  end
end

-- A ping arrived at the receiving end: its echo goes out.
function Run:on_ping_rx(e)
  local tr, rail, o = self.tr, e.rail, self.tr.o
  e.i = e.i + 1
  local ok, err
  if e.i < o.lat_iters then
    ok, err = e.qp:post_recv(e.ping_rx)
  else -- the last ping: the receives for the send bandwidth go in before its echo
    e.ping_ok = rail.in_lat:read(0, o.lat_size) == pattern_bytes(e.peer, tr.me, o.lat_size)
    local rl = tr.ibv.recv_wrs(tr.ring_n)
    rl:fill{ sge = { mr = rail.ring, length = o.bw_size }, stride = o.bw_size }
    ok, err = e.qp:post_recv(rl)
    e.posted_rx = tr.ring_n
  end
  if ok then ok, err = e.qp:post_send(e.echo_tx) end
  if not ok then self:fail(e, "echo post: " .. tostring(err)) end
end

function Run:on_echo(e)
  e.echoed = e.echoed + 1
  if e.echoed == self.tr.o.lat_iters then e.state = S.rx; self:leave_lat(e) end
end

-- A chain of writes or sends completed.
function Run:on_chain(e, t)
  local tr = self.tr
  e.inflight = e.inflight - 1
  e.acked = e.acked + CHAIN
  if e.acked >= tr.bw_iters then
    local mbs = tr.o.bw_size * tr.bw_iters / (t - e.t0) / 1e6
    if e.state == S.write then
      e.res.write_mbs = mbs
      self:start_bw(e, S.send)
    else
      e.res.send_mbs = mbs
      self:finish(e)
    end
  elseif e.posted < tr.bw_iters then
    self:post_chain(e)
  end
end

-- A ring slot (wr_id = its index, from 0): one send arrived.
function Run:on_slot(e, slot)
  local tr, o = self.tr, self.tr.o
  e.received = e.received + 1
  if e.received == tr.bw_iters then
    self:finish(e)
  elseif e.posted_rx < tr.bw_iters then
    local ok, err = e.qp:post_recv{ wr_id = slot, sge = { mr = e.rail.ring, offset = slot * o.bw_size,
      length = o.bw_size } }
    if not ok then self:fail(e, "post_recv: " .. tostring(err)) end
    e.posted_rx = e.posted_rx + 1
  end
end

function Run:on_wc(e, id, st, t)
  e.last = t
  if st ~= "success" then
    self:fail(e, string.format("%s: completion %s", measures.phase(e.state), st))
  elseif id == WR.pong or id == WR.ping then
    self:on_ping(e, t)
  elseif id == WR.ping_rx then
    self:on_ping_rx(e)
  elseif id == WR.echo then
    self:on_echo(e)
  elseif id == WR.chain then
    self:on_chain(e, t)
  else
    self:on_slot(e, id)
  end
end

function Run:poll_all(t)
  local any = false
  for _, rail in pairs(self.cqs) do
    local n = rail.cq:poll(rail.wcs)
    for i = 1, n or 0 do
      any = true
      local e = self.by_qpn[rail.wcs:qp_num(i)]
      if e and e.state ~= S.done then self:on_wc(e, rail.wcs:wr_id(i), rail.wcs:status(i), t) end
    end
  end
  return any
end

-- --wait event: arm every CQ, look once more (a completion may have come in
-- between), then sleep on the channels.
function Run:sleep(t)
  if not self.armed then
    for _, rail in pairs(self.cqs) do rail.cq:req_notify() end
    self.armed = true
    if self:poll_all(t) then return end
  end
  local fds = {}
  for _, rail in pairs(self.cqs) do fds[#fds + 1] = rail.waiter end
  local ready = socket.select(fds, nil, 0.5)
  if #ready > 0 then
    for _, rail in pairs(self.cqs) do
      local cq = rail.channel:get_event(0)
      if cq then cq:ack_events(1) end
    end
    self.armed = false
  end
end

-- Ends that stalled (no completion for --timeout s), or the round past its limit.
function Run:check(t)
  local tr = self.tr
  for _, e in ipairs(self.ends) do
    if e.state and e.state ~= S.done and t > self.deadline then
      self:fail(e, string.format("round time limit (%g s) reached in %s", tr.round_limit, measures.phase(e.state)))
    end
    if e.state and e.state ~= S.done and e.state ~= S.lat_done and t - e.last > tr.o.timeout then
      self:fail(e, string.format("%s: no completion in %g s", measures.phase(e.state), tr.o.timeout))
    end
  end
end

-- The bytes that arrived at the receiving ends: the last ping, the RDMA writes, the sends.
function Run:verify()
  local tr, o = self.tr, self.tr.o
  for _, e in ipairs(self.ends) do
    if e.kind == "in" and e.connected and not e.res.error then
      local rail = e.rail
      local want = pattern_bytes(e.peer, tr.me, o.bw_size)
      local ok_write = rail.in_buf:read(0, o.bw_size) == want
      local ok_send = true
      for j = 0, tr.ring_n - 1 do ok_send = ok_send and rail.ring:read(j * o.bw_size, o.bw_size) == want end
      e.res.verified = o.lat_size + o.bw_size + tr.ring_n * o.bw_size
      e.res.data_ok = e.ping_ok and ok_write and ok_send
      if not e.res.data_ok then
        e.res.error = "data check failed:" .. (e.ping_ok and "" or " ping") .. (ok_write and "" or " rdma_write") ..
          (ok_send and "" or " send")
      end
    end
  end
end

--- Runs the round's ends to completion (each e.res: lat_us, write_mbs,
-- send_mbs, data_ok, verified, error).  Completions go to their end by QP
-- number (a QP of an earlier round that failed may still flush into the
-- rail's CQ).  An end that fails, or sees no completion for --timeout
-- seconds, stops alone.
function T:run(ends)
  local run = setmetatable({ tr = self, ends = ends, by_qpn = {}, cqs = {}, live = 0, lat_left = 0 }, Run)
  for _, e in ipairs(ends) do
    e.res = e.res or {}
    if e.connected then
      run.by_qpn[e.qp.qp_num] = e
      run.cqs[e.rail.index] = e.rail
      e.state, e.in_lat, e.i = S.lat, true, 0
      run.live, run.lat_left = run.live + 1, run.lat_left + 1
    end
  end
  if run.live == 0 then return end
  local t_start = self:now()
  for _, e in ipairs(ends) do
    if e.state == S.lat then
      e.last = t_start
      if e.kind == "out" then run:start_out(e) else run:start_in(e) end
    end
  end
  local checked = t_start
  run.deadline = t_start + self.round_limit
  while run.live > 0 do
    if run.lat_left == 0 and not run.bw_started then
      run.bw_started = true
      for _, e in ipairs(ends) do
        if e.state == S.lat_done then run:start_bw(e, S.write) end
      end
    end
    local t = self:now()
    if not run:poll_all(t) and self.o.wait == "event" then run:sleep(t) end
    if t - checked > 0.5 then checked = t; run:check(t) end
  end
  run:verify()
end

return traffic
