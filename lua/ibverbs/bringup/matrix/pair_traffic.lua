--- One round's traffic of fabric_matrix.lua on this rank: the ends of its
-- pairs (an "out" end sends to its peer, an "in" end receives from it), their
-- RC connections, and the run that measures them, all in C (ibv.kernels, one
-- call a round): ping-pong latency on every end first, one at a time in the
-- fabric's order (the in end echoes; every round trip a sample), then, once
-- no latency is left to measure on this rank, RDMA write and then send
-- bandwidth on each out end while each in end receives the sends; then a
-- check of every byte that arrived.  An end's kernels go by the phases of
-- measures.PHASES.  With --flows N (ibverbs.bringup.matrix.flows) an end is
-- N RC QPs, each connected with a flow label of its own: the ping-pong's
-- round trips are split among them (one flow after the other), so are the
-- bandwidth messages (the flows' writes at once, then their sends at once),
-- and each flow has its own figures (e.flow_figs) besides the end's own,
-- which are its flows' together; with --trace the out end's flows are
-- traced once (ibverbs.bringup.matrix.flow_trace).  The kernels of a round go
-- to ibv.kernels a group of rails at a time (64 kernels a call at most).
--
--   local traffic = require "ibverbs.bringup.matrix.pair_traffic"
--   local tr = traffic.new{ o = o, ibv = ibv, me = rank, block = BLOCK }
--   local e = tr:new_end(rail, "out", peer); tr:connect(e, tr.parse_info(text)); tr:run({ e, ... })
local measures = require "ibverbs.bringup.matrix.measures"
local flows = require "ibverbs.bringup.matrix.flows"
local socket = require "socket"

local traffic = {}

traffic.CHAIN = 8 -- send WRs per post, the last one signaled
traffic.WINDOW = 4 -- chains in flight
traffic.RING = 32 -- receives posted for the send bandwidth
traffic.KERNELS = 64 -- kernels one ibv.kernels call runs at most
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
-- the ring's receives (its slots: the bytes a pair checks), a rail's CQ
-- entries; with flows (o.flows), each flow's messages (flow_bw_iters: whole
-- chains, the end's split among them) and receives posted at once (ring_wrs).
function traffic.sizes(o)
  local n = o.flows or 1
  local bw_iters = math.max(CHAIN, o.bw_iters + (CHAIN - o.bw_iters % CHAIN) % CHAIN)
  local flow_iters = n == 1 and bw_iters or math.max(CHAIN, math.ceil(bw_iters / n / CHAIN) * CHAIN)
  return { bw_iters = bw_iters, ring_n = math.min(traffic.RING, bw_iters), flows = n, flow_bw_iters = flow_iters,
    ring_wrs = math.min(traffic.RING, flow_iters), cqe = n * (8 * traffic.RING + 8 * WINDOW * CHAIN) + 64 }
end

--- The ping-pong round trips of flow j of n (lat_iters split among them, at
-- least two a flow when n > 1: a warm-up and a sample).
function traffic.lat_iters(lat_iters, n, j)
  if n == 1 then return lat_iters end
  return math.max(2, math.floor(lat_iters / n) + (j <= lat_iters % n and 1 or 0))
end

--- The rails whose kernels one ibv.kernels call runs (each rail of a round:
-- 2 n ping-pong kernels, 3 n bandwidth ones), and whether a call takes a
-- rail's ping-pongs and bandwidth apart (past 64 together: 13 flows and more).
function traffic.rails_per_call(n)
  return math.max(1, math.floor(traffic.KERNELS / (5 * n))), 5 * n > traffic.KERNELS
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
    ring_n = sizes.ring_n, n = sizes.flows, flow_bw_iters = sizes.flow_bw_iters, ring_wrs = sizes.ring_wrs,
    event = cfg.o.wait == "event", traced = {} }, T)
end

function T:now() return self.ibv and self.ibv.now() or socket.gettime() end

--- The end of a pair on this rank: kind "out" (this rank sends to peer) or "in".
function T:new_end(rail, kind, peer)
  local e = { rail = rail, kind = kind, peer = peer, me = self.me, psn = math.random(0, 0xffffff), qps = {} }
  for j = 1, self.n do
    local qp, err = rail.pd:create_qp{ qp_type = "rc", send_cq = rail.cq, recv_cq = rail.cq,
      cap = { max_send_wr = WINDOW * CHAIN + 8, max_recv_wr = math.max(self.ring_n, self.ring_wrs) + 4,
        max_send_sge = 1, max_recv_sge = 1 } }
    if not qp then e.err = "create_qp: " .. tostring(err); return e end
    e.qps[j] = qp
  end
  e.qp = e.qps[1]
  return e
end

--- What the peer needs of an end: "qpn psn lid mtu gid addr rkey", its
-- flows' QP numbers joined by "," (a dry rail's stands in).
function traffic.info(rail, e)
  if rail.dry then return "1 0 0 1024 :: 0 0" end
  if not e or not e.qp then return nil end
  local mr = e.kind == "in" and rail.in_buf or rail.out_buf
  local qpns = {}
  for j, qp in ipairs(e.qps or { e.qp }) do qpns[j] = string.format("%d", qp.qp_num) end
  return string.format("%s %d %d %d %s %.0f %d", table.concat(qpns, ","), e.psn, rail.lid or 0, rail.mtu or 1024,
    rail.gid or "::", mr.addr, mr.rkey)
end

--- An end's address as its peer sent it: qpn (its first flow's), and qpns (every flow's) when it has flows.
function traffic.parse_info(s)
  local qpn, psn, lid, mtu, gid, addr, rkey = s:match("^([%d,]+) (%d+) (%d+) (%d+) (%S+) (%d+) (%d+)$")
  if not qpn then return nil end
  local qpns = {}
  for x in qpn:gmatch("%d+") do qpns[#qpns + 1] = tonumber(x) end
  return { qpn = qpns[1], qpns = #qpns > 1 and qpns or nil, psn = tonumber(psn), lid = tonumber(lid),
    mtu = tonumber(mtu), gid = gid, addr = tonumber(addr), rkey = tonumber(rkey) }
end

function T:post_first_rx(e)
  for _, qp in ipairs(e.qps) do
    local pok, perr = qp:post_recv{ wr_id = 0, sge = { mr = e.rail.in_lat, length = self.o.lat_size } }
    if not pok then e.err = "post_recv: " .. tostring(perr) end
  end
  e.first_rx = true
end

-- Flow j's label, UDP source port and IPv4 ends (src: this end's sender's; nil on InfiniBand).
function T:flow_info(e, rem, j, label)
  local mine, theirs = flows.ipv4(e.rail.gid), flows.ipv4(rem.gid)
  local fi = { label = label }
  if mine and theirs then
    local qpn, rqpn = e.qps[j].qp_num, (rem.qpns or { rem.qpn })[j]
    fi.sport = self.ibv and self.ibv.roce_udp_sport and self.ibv.roce_udp_sport(label, qpn, rqpn)
    fi.src, fi.dst = mine, theirs
    if e.kind == "in" then fi.src, fi.dst = theirs, mine end
  end
  return fi
end

-- Connects flow j of an end to its peer's QP rqpn with flow label label (0:
-- none, the provider's own port); the error, or nil.  The packets' hop
-- limit (RoCE v2: their IP TTL) is 64, so that they cross routers.
function T:connect_qp(e, rem, qp, rqpn, label)
  local o, rail = self.o, e.rail
  local ok, err, errno
  local until_t = self:now() + o.timeout
  for _ = 1, 3 do -- RoCE resolves the peer's MAC in the RTR step: a first ARP may time out (ETIMEDOUT)
    ok, err, errno = qp:connect({ qpn = rqpn, psn = rem.psn, lid = rem.lid, gid = rem.gid },
      { port_num = rail.port, sgid_index = rail.gid_index, qp_access_flags = ACCESS,
        path_mtu = math.min(rail.mtu, rem.mtu), psn = e.psn, timeout = o.qp_timeout, hop_limit = 64,
        flow_label = label ~= 0 and label or nil })
    if ok or errno ~= 110 or self:now() > until_t then break end
    qp:modify{ qp_state = "reset" }
  end
  if not ok then return "RC connect: " .. tostring(err) end
end

--- Connects an end to its peer's (rem: parse_info's), each flow its QP to
-- the peer's flow of that number; e.err on failure, e.connected on success.
function T:connect(e, rem)
  local rqpns = rem.qpns or { rem.qpn }
  if #rqpns ~= #e.qps then
    e.err = string.format("RC connect: the peer has %d flows, this end %d", #rqpns, #e.qps)
    return
  end
  local src, dst = self.me, e.peer
  if e.kind == "in" then src, dst = e.peer, self.me end
  local labels = flows.labels(src, dst, e.rail.index, #e.qps)
  e.flow_info = {}
  for j, qp in ipairs(e.qps) do
    e.err = self:connect_qp(e, rem, qp, rqpns[j], labels[j])
    if e.err then return end
    e.flow_info[j] = self:flow_info(e, rem, j, labels[j])
  end
  e.raddr, e.rkey = rem.addr, rem.rkey
  -- the first ping's receive, before the round's barrier; in blocks of rounds,
  -- when the round starts (the buffers are the rail's: an early partner waits)
  if e.kind == "in" and self.block == 1 then self:post_first_rx(e) end
  e.connected = not e.err
end

function traffic.close_end(e)
  if e and e.qps then
    for _, qp in ipairs(e.qps) do qp:close() end
    e.qps = {}
  elseif e and e.qp then
    e.qp:close()
  end
  if e then e.qp = nil end
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

-- The samples buffer of flow j's ping-pong on rail (made once: a rail has one out end a round).
function T:samples(rail, j)
  if self.n == 1 then
    rail.samples = rail.samples or self.ibv.samples(math.max(1, self.o.lat_iters - 1))
    return rail.samples
  end
  rail.flow_samples = rail.flow_samples or {}
  rail.flow_samples[j] = rail.flow_samples[j] or
    self.ibv.samples(math.max(1, traffic.lat_iters(self.o.lat_iters, self.n, j) - 1))
  return rail.flow_samples[j]
end

-- The ping-pong of flow j of an end: the out end pings (its samples: every
-- round trip), the in end echoes.  Its receive is posted now (the out end's)
-- or was at connect (the in end's, when blocks are of one round), else the
-- kernel posts it as it starts.
function T:lat_kernel(e, j)
  local ibv, rail, o = self.ibv, e.rail, self.o
  local qp = e.qps[j]
  local k = { kernel = "lat_send", qp = qp, send_cq = rail.cq, recv_cq = rail.cq,
    iters = traffic.lat_iters(o.lat_iters, self.n, j), warmup = 1, timeout = o.timeout,
    event = self.event } -- warmup: a first ping that waits for its peer
  if e.kind == "out" then
    rail.out_lat:write(0, pattern_bytes(self.me, e.peer, o.lat_size))
    k.send_wrs = one(ibv.send_wrs, { opcode = "send", sge = { mr = rail.out_lat, length = o.lat_size } })
    k.recv_wrs = one(ibv.recv_wrs, { sge = { mr = rail.out_lat, offset = o.lat_size, length = o.lat_size } })
    k.initiator, k.samples = true, self:samples(rail, j)
    local ok, err = qp:post_recv(k.recv_wrs)
    if not ok then e.res.error = "ping-pong post: " .. tostring(err); return nil end
  else
    k.send_wrs = one(ibv.send_wrs, { opcode = "send", sge = { mr = rail.in_lat, length = o.lat_size } })
    k.recv_wrs = one(ibv.recv_wrs, { sge = { mr = rail.in_lat, length = o.lat_size } })
    k.prepost = not e.first_rx
  end
  return k
end

-- The in end's receives of flow j's sends: the whole ring in order (one
-- flow), else ring_wrs receives over the flow's share of the ring's slots
-- onwards, so that the flows together fill every slot (the bytes checked).
function T:rx_list(e, j)
  local o, rail = self.o, e.rail
  if self.n == 1 then
    local rl = self.ibv.recv_wrs(self.ring_n)
    rl:fill{ sge = { mr = rail.ring, length = o.bw_size }, stride = o.bw_size }
    return rl
  end
  local rl = self.ibv.recv_wrs(self.ring_wrs)
  local first = math.floor((j - 1) * self.ring_n / self.n)
  for w = 1, self.ring_wrs do
    rl:set(w, { wr_id = w - 1, sge = { mr = rail.ring, offset = ((first + w - 1) % self.ring_n) * o.bw_size,
      length = o.bw_size } })
  end
  return rl
end

-- A kernel of end e's flow j in phase into call; its index there.
local function add(call, k, e, j, phase)
  call.ks[#call.ks + 1] = k
  call.who[#call.ks] = { e, j, phase }
  return #call.ks
end

-- An end's bandwidth kernels into call (after: the ping-pongs' kernels, nil
-- when they ran in a call before): the in end's receives, a flow each; the
-- out end's writes (each within half the time limit), then its sends (the
-- same) once every write is over.
function T:add_bw(call, e, after)
  local o, rail = self.o, e.rail
  local iters = self.n == 1 and self.bw_iters or self.flow_bw_iters
  if e.kind == "in" then
    for j, qp in ipairs(e.qps) do
      add(call, { kernel = "bw", qp = qp, recv_cq = rail.cq, recv_wrs = self:rx_list(e, j), prepost = true,
        iters = iters, timeout = o.timeout, after = after, event = self.event }, e, j, P.rx)
    end
    return
  end
  rail.out_buf:write(0, pattern_bytes(self.me, e.peer, o.bw_size))
  local function bw(qp, opcode, remote, follows)
    return { kernel = "bw", qp = qp, send_cq = rail.cq, send_wrs = chain(self.ibv, opcode, rail, o.bw_size, e, remote),
      iters = iters, window = WINDOW * CHAIN, cq_mod = CHAIN, timeout = traffic.bw_phase_limit(o), after = follows,
      event = self.event }
  end
  local writes = {}
  for j, qp in ipairs(e.qps) do writes[j] = add(call, bw(qp, "rdma_write", true, after), e, j, P.write) end
  for j, qp in ipairs(e.qps) do add(call, bw(qp, "send", false, #writes == 1 and writes[1] or writes), e, j, P.send) end
end

-- One ibv.kernels call: each kernel's figures to its end (e.figs[flow][phase]).
function T:call(call)
  if #call.ks == 0 then return end
  local figs = self.ibv.kernels(call.ks)
  for i, w in ipairs(call.who) do
    local e, j, ph = w[1], w[2], w[3]
    e.figs[j] = e.figs[j] or {}
    e.figs[j][ph] = figs[i]
  end
end

-- The ends of a group of rails (traffic.before's order) through ibv.kernels:
-- every flow's ping-pong one after the other (an end's flows within one
-- --timeout), then the bandwidth, the in ends' receives first (they go in
-- before the peers' sends can come).
-- split: the ping-pongs in a call of their own.  An end whose ping-pong
-- could not be posted runs nothing (e.ready false).
function T:run_group(ends, split)
  local call, lat = { ks = {}, who = {} }, {}
  for _, e in ipairs(ends) do
    local made = {}
    for j = 1, self.n do
      made[j] = self:lat_kernel(e, j)
      if not made[j] then made = nil; break end
    end
    e.figs, e.ready = {}, made ~= nil
    for j, k in ipairs(made or {}) do
      -- one ping-pong at a time, in the fabric's order; an end's flows within one --timeout from its first's
      -- start, as its one ping-pong was without flows (a dead peer costs one, not one a flow)
      k.after, k.within = lat[#lat], j > 1 and lat[#lat - j + 2] or nil
      lat[#lat + 1] = add(call, k, e, j, P.lat)
    end
  end
  if #call.ks == 0 then return end
  if split then
    self:call(call)
    call, lat = { ks = {}, who = {} }, nil
  end
  for pass = 1, 2 do
    for _, e in ipairs(ends) do
      if e.ready and (e.kind == "in") == (pass == 1) then self:add_bw(call, e, lat) end
    end
  end
  self:call(call)
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
-- data_ok, verified, error; with flows or --trace, an out end's e.flow_figs)
-- in ibv.kernels calls, a group of rails each (traffic.rails_per_call): the
-- ping-pongs one at a time (traffic.before, flow after flow; each within
-- --timeout from its start), then the bandwidth (the writes and the sends
-- half of --timeout each, the receives all of it).  Completions go to their
-- end by QP number (a QP of an earlier round that failed may still flush into
-- the rail's CQ).  An end that fails stops alone; one of its kernels that
-- fails keeps the ones after it from running long (their QP is in the error
-- state).  With --trace, the out ends' flows are traced (once a run each).
function T:run(ends)
  local live = {}
  for _, e in ipairs(ends) do
    e.res = e.res or {}
    if e.connected then live[#live + 1] = e end
  end
  table.sort(live, traffic.before)
  local per, split = traffic.rails_per_call(self.n)
  local group, g = {}, nil
  for _, e in ipairs(live) do
    local eg = math.floor((e.rail.index - 1) / per)
    if eg ~= g and #group > 0 then self:run_group(group, split); group = {} end
    g, group[#group + 1] = eg, e
  end
  if #group > 0 then self:run_group(group, split) end
  for _, e in ipairs(live) do
    if e.ready then self:figures(e) end
  end
  self:verify(live)
  if self.o.trace then require("ibverbs.bringup.matrix.flow_trace").run(self.ibv, live, self.traced) end
end

-- An end's figures from its flows' kernels: the first failure, by phase
-- (then flow), is its error; an out end's latency over all its flows'
-- samples, its bandwidths its flows' bytes over the slowest flow's time.
function T:figures(e)
  local o, r = self.o, e.res
  for _, ph in ipairs({ P.lat, P.rx, P.write, P.send }) do
    for j = 1, self.n do
      local f = e.figs[j] and e.figs[j][ph]
      if f and f.error and not r.error then
        r.error = string.format("%s%s: %s", self.n > 1 and ("flow " .. j .. ": ") or "", measures.phase(ph), f.error)
      end
    end
  end
  if e.kind ~= "out" then return end
  self:latency(e)
  local bytes = o.bw_size * (self.n == 1 and self.bw_iters or self.flow_bw_iters * self.n)
  for ph, key in pairs({ [P.write] = "write_mbs", [P.send] = "send_mbs" }) do
    local slowest = 0
    for j = 1, self.n do
      local f = e.figs[j] and e.figs[j][ph]
      slowest = (f and not f.error and f.seconds > 0 and slowest) and math.max(slowest, f.seconds) or nil
    end
    if slowest then r[key] = bytes / slowest / 1e6 end
  end
  if self.n > 1 or o.trace then self:flow_figures(e) end
end

-- An out end's latency and its percentiles: its flows' samples together.
function T:latency(e)
  local r, half = e.res, 1e6 / 2 -- one way: half the round trip, as perftest reports
  local s
  if self.n == 1 then
    local lf = e.figs[1] and e.figs[1][P.lat]
    if not lf or lf.error or lf.samples == 0 then return end
    s = e.rail.samples
  else
    local all = {}
    for j = 1, self.n do
      local f = e.figs[j] and e.figs[j][P.lat]
      if f and not f.error and f.samples > 0 then
        local sj = e.rail.flow_samples[j]
        for i = 1, sj:count() do all[#all + 1] = sj:get(i) end
      end
    end
    if #all == 0 then return end
    s = self.ibv.samples(all)
  end
  local st = s:stats()
  r.lat_us, r.lat_p99_us, r.lat_p999_us, r.lat_max_us = st.median * half, st.p99 * half, st.p99_9 * half,
    st.max * half
end

-- An out end's flows' own figures (e.flow_figs[j]: flows.line's fig): label,
-- port and addresses, the median latency, samples and stalls
-- (flows.stalls), the bandwidths, the first failure.
function T:flow_figures(e)
  local o = self.o
  local bytes = o.bw_size * (self.n == 1 and self.bw_iters or self.flow_bw_iters)
  local ack = traffic.ack_seconds(o.qp_timeout)
  e.flow_figs = {}
  for j = 1, self.n do
    local info, figs = e.flow_info and e.flow_info[j] or {}, e.figs[j] or {}
    local fig = { label = info.label, sport = info.sport, src = info.src, dst = info.dst, samples = 0, stalls = 0 }
    for _, ph in ipairs({ P.lat, P.write, P.send }) do
      local f = figs[ph]
      if f and f.error and not fig.error then fig.error = measures.phase(ph) .. ": " .. f.error end
    end
    local lf = figs[P.lat]
    if lf and not lf.error and lf.samples > 0 then
      local s = self:samples(e.rail, j)
      local median = s:stats().median
      fig.lat_us, fig.samples, fig.stalls = median * 1e6 / 2, s:count(), flows.stalls(s, median, ack)
    end
    for ph, key in pairs({ [P.write] = "write_mbs", [P.send] = "send_mbs" }) do
      local f = figs[ph]
      if f and not f.error and f.seconds > 0 then fig[key] = bytes / f.seconds / 1e6 end
    end
    e.flow_figs[j] = fig
  end
end

-- The bytes that arrived at the receiving ends: the last ping, the RDMA writes, the sends.
function T:verify(ends)
  local o = self.o
  for _, e in ipairs(ends) do
    if e.kind == "in" and e.ready and not e.res.error then
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
