--- One round's traffic of fabric_matrix.lua on this rank: the ends of its
-- pairs (an "out" end sends to its peer, an "in" end receives from it), their
-- RC connections, and the run that measures them, all in C (ibv.kernels, one
-- call a round): ping-pong latency on every end first, one at a time in the
-- fabric's order (the in end echoes; every round trip a sample), then, once
-- no latency is left to measure on this rank, RDMA write and then send
-- bandwidth on each out end while each in end receives the sends; then a
-- check of every byte that arrived.  An end's kernels go by the phases of
-- measures.PHASES.
--
--   local traffic = require "ibverbs.bringup.matrix.pair_traffic"
--   local tr = traffic.new{ o = o, ibv = ibv, me = rank, block = BLOCK }
--   local e = tr:new_end(rail, "out", peer); tr:connect(e, tr.parse_info(text)); tr:run({ e, ... })
local measures = require "ibverbs.bringup.matrix.measures"
local socket = require "socket"

local traffic = {}

traffic.CHAIN = 8 -- send WRs per post, the last one signaled
traffic.WINDOW = 4 -- chains in flight
traffic.RING = 32 -- receives posted for the send bandwidth
local CHAIN, WINDOW = traffic.CHAIN, traffic.WINDOW
local ACCESS = { "local_write", "remote_write" }

--- The phases of an end, in order (measures.PHASES names what each is doing).
traffic.PHASE = { lat = "lat", rx = "rx", write = "write", send = "send" }
local P = traffic.PHASE

--- The time limit of each bandwidth phase of an out end (its writes, then
-- its sends): half of --timeout, so that both fit in the round's share.
function traffic.bw_phase_limit(o) return o.timeout / 2 end

--- The RC ack timeout of --qp-timeout n, in seconds (4.096 us x 2^n): what a
-- lost frame costs its pair.
function traffic.ack_seconds(n) return 4.096e-6 * 2 ^ n end

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
    ring_n = sizes.ring_n, event = cfg.o.wait == "event" }, T)
end

function T:now() return self.ibv and self.ibv.now() or socket.gettime() end

--- The end of a pair on this rank: kind "out" (this rank sends to peer) or "in".
function T:new_end(rail, kind, peer)
  local e = { rail = rail, kind = kind, peer = peer, me = self.me, psn = math.random(0, 0xffffff) }
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
  local pok, perr = e.qp:post_recv{ wr_id = 0, sge = { mr = e.rail.in_lat, length = self.o.lat_size } }
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

-- A list of one WR (its wr_id 0, what the kernels read).
local function one(make, wr)
  local l = make(1)
  l:set(1, wr)
  return l
end

-- CHAIN WRs of opcode from the rail's out buffer (to the peer's in buffer: remote).
local function chain(ibv, opcode, rail, size, e, remote)
  local w = ibv.send_wrs(CHAIN)
  local wr = { opcode = opcode, sge = { mr = rail.out_buf, length = size } }
  if remote then wr.remote_addr, wr.rkey = e.raddr, e.rkey end
  w:fill(wr)
  return w
end

-- The ping-pong of an end: the out end pings (its samples: every round
-- trip), the in end echoes.  Its receive is posted now (the out end's) or was
-- at connect (the in end's, when blocks are of one round), else the kernel
-- posts it as it starts.
function T:lat_kernel(e)
  local ibv, rail, o = self.ibv, e.rail, self.o
  local k = { kernel = "lat_send", qp = e.qp, send_cq = rail.cq, recv_cq = rail.cq, iters = o.lat_iters,
    warmup = 1, timeout = o.timeout, event = self.event } -- warmup: a first ping that waits for its peer
  if e.kind == "out" then
    rail.out_lat:write(0, pattern_bytes(self.me, e.peer, o.lat_size))
    rail.samples = rail.samples or ibv.samples(math.max(1, o.lat_iters - 1))
    k.send_wrs = one(ibv.send_wrs, { opcode = "send", sge = { mr = rail.out_lat, length = o.lat_size } })
    k.recv_wrs = one(ibv.recv_wrs, { sge = { mr = rail.out_lat, offset = o.lat_size, length = o.lat_size } })
    k.initiator, k.samples = true, rail.samples
    local ok, err = e.qp:post_recv(k.recv_wrs)
    if not ok then e.res.error = "ping-pong post: " .. tostring(err); return nil end
  else
    k.send_wrs = one(ibv.send_wrs, { opcode = "send", sge = { mr = rail.in_lat, length = o.lat_size } })
    k.recv_wrs = one(ibv.recv_wrs, { sge = { mr = rail.in_lat, length = o.lat_size } })
    k.prepost = not e.first_rx
  end
  return k
end

-- The bandwidth kernels of an end, each with its phase: the in end's
-- receives of the sends; the out end's writes then sends (each within half
-- the time limit; the sends follow the writes, kernel number at).
function T:bw_kernels(e, after, at)
  local ibv, rail, o = self.ibv, e.rail, self.o
  if e.kind == "in" then
    local rl = ibv.recv_wrs(self.ring_n)
    rl:fill{ sge = { mr = rail.ring, length = o.bw_size }, stride = o.bw_size }
    return { { kernel = "bw", qp = e.qp, recv_cq = rail.cq, recv_wrs = rl, prepost = true, iters = self.bw_iters,
      timeout = o.timeout, after = after, event = self.event, phase = P.rx } }
  end
  rail.out_buf:write(0, pattern_bytes(self.me, e.peer, o.bw_size))
  local function bw(phase, opcode, remote, follows)
    return { kernel = "bw", qp = e.qp, send_cq = rail.cq, send_wrs = chain(ibv, opcode, rail, o.bw_size, e, remote),
      iters = self.bw_iters, window = WINDOW * CHAIN, cq_mod = CHAIN, timeout = traffic.bw_phase_limit(o),
      after = follows, event = self.event, phase = phase }
  end
  return { bw(P.write, "rdma_write", true, after), bw(P.send, "send", false, at) }
end

--- The fabric's order of ping-pongs: by rail, then by the pair's ranks (the
-- lower first), then by the sender.  Every rank runs its ends' ping-pongs one
-- at a time in this order, so the first unfinished one of the whole fabric
-- always has both its ends running: no rank waits on another for ever, and a
-- link's latency is measured with its other direction idle.
function traffic.before(a, b)
  local function key(e)
    local src, dst = e.peer, e.me
    if e.kind == "out" then src, dst = e.me, e.peer end
    return { e.rail.index, math.min(src, dst), math.max(src, dst), src }
  end
  local x, y = key(a), key(b)
  for i = 1, 4 do
    if x[i] ~= y[i] then return x[i] < y[i] end
  end
  return false
end

--- Runs the round's ends to completion (each e.res: lat_us and its
-- percentiles lat_p99_us, lat_p999_us, lat_max_us, write_mbs, send_mbs,
-- data_ok, verified, error) in one ibv.kernels call: the ping-pongs one at a
-- time (traffic.before; each within --timeout from its start), then the
-- bandwidth (the writes and the sends half of --timeout each, the receives
-- all of it).  Completions go to their end by QP number (a QP of an earlier
-- round that failed may still flush into the rail's CQ).  An end that fails
-- stops alone; one of its kernels that fails keeps the ones after it from
-- running long (their QP is in the error state).
function T:run(ends)
  local ks, lat, live = {}, {}, {}
  for _, e in ipairs(ends) do
    e.res = e.res or {}
    if e.connected then live[#live + 1] = e end
  end
  table.sort(live, traffic.before)
  for _, e in ipairs(live) do
    local k = self:lat_kernel(e)
    if k then
      ks[#ks + 1], k.phase, k.after = k, P.lat, lat[#lat] -- one ping-pong at a time, in the fabric's order
      lat[#lat + 1], e.k = #ks, { [P.lat] = #ks }
    else
      e.k = {}
    end
  end
  if #ks == 0 then return end
  -- the receiving ends first: their receives go in before the peers' sends can come
  for pass = 1, 2 do
    for _, e in ipairs(live) do
      if e.k[P.lat] and (e.kind == "in") == (pass == 1) then
        for _, k in ipairs(self:bw_kernels(e, lat, #ks + 1)) do
          ks[#ks + 1] = k
          e.k[k.phase] = #ks
        end
      end
    end
  end
  local phases = {}
  for i, k in ipairs(ks) do phases[i], k.phase = k.phase, nil end
  local figs = self.ibv.kernels(ks)
  for _, e in ipairs(live) do
    if e.k[P.lat] then self:figures(e, figs, phases) end
  end
  self:verify(live)
end

-- An end's figures from its kernels' (the first failure, by phase, is its error).
function T:figures(e, figs, phases)
  local o, r = self.o, e.res
  for _, ph in ipairs({ P.lat, P.rx, P.write, P.send }) do
    local i = e.k[ph]
    local f = i and figs[i]
    if f and f.error and not r.error then
      r.error = string.format("%s: %s", measures.phase(phases[i]), f.error)
    end
  end
  local lf = figs[e.k[P.lat]]
  if e.kind == "out" and not lf.error and lf.samples > 0 then
    local st = e.rail.samples:stats()
    local half = 1e6 / 2 -- one way: half the round trip, as perftest reports
    r.lat_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us = st.median * half, st.p99 * half, st.p99_9 * half,
      st.max * half
  end
  local bytes = o.bw_size * self.bw_iters
  for ph, key in pairs({ [P.write] = "write_mbs", [P.send] = "send_mbs" }) do
    local f = e.k[ph] and figs[e.k[ph]]
    if f and not f.error and f.seconds > 0 then r[key] = bytes / f.seconds / 1e6 end
  end
end

-- The bytes that arrived at the receiving ends: the last ping, the RDMA writes, the sends.
function T:verify(ends)
  local o = self.o
  for _, e in ipairs(ends) do
    if e.kind == "in" and not e.res.error then
      local rail = e.rail
      local want = pattern_bytes(e.peer, self.me, o.bw_size)
      local ping_ok = rail.in_lat:read(0, o.lat_size) == pattern_bytes(e.peer, self.me, o.lat_size)
      local ok_write = rail.in_buf:read(0, o.bw_size) == want
      local ok_send = true
      for j = 0, self.ring_n - 1 do ok_send = ok_send and rail.ring:read(j * o.bw_size, o.bw_size) == want end
      e.res.verified = o.lat_size + o.bw_size + self.ring_n * o.bw_size
      e.res.data_ok = ping_ok and ok_write and ok_send
      if not e.res.data_ok then
        e.res.error = "data check failed:" .. (ping_ok and "" or " ping") .. (ok_write and "" or " rdma_write") ..
          (ok_send and "" or " send")
      end
    end
  end
end

return traffic
