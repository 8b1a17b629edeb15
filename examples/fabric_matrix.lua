#!/usr/bin/env lua5.4
--- fabric_matrix.lua: the all-pairs test to run after racking a cluster.  One
-- process per host, started by the launcher the cluster already has (srun,
-- mpirun, tools/rxe-vm --nodes) or with --rank/--size; rank 0 collects.
-- Every ordered pair of ranks gets an RC connection of its own: ping-pong
-- latency (--lat-size bytes), RDMA write and send bandwidth (--bw-size bytes)
-- and a check of every byte that arrived.
--
-- The pairs run in rounds in which every rank works (--pattern):
--   tournament  N/2 disjoint pairs a round, both directions at once: N-1 rounds (N for odd N); the default
--   shift       round d: every rank sends to rank+d and receives from rank-d (mpiGraph): N-1 rounds
--   serial      one ordered pair at a time: N(N-1) rounds, the baseline
--   --pairs F   lines "round rankA rankB" (ranks or host names); --quick: the tournament's first round
-- Flagged pairs (latency above --lat-factor x the lowest, bandwidth below
-- --bw-fraction x the highest, or against a percentile: --reference; failed,
-- bad data) are measured again (--retests times, judged by their best
-- figures), each end against a partner that passed; the report gives a
-- verdict per fault: a node, a link, an unreachable rank.  A healthy fabric
-- gives none, and exit 0.
--   srun -N 64 --ntasks-per-node=1 lua5.4 examples/fabric_matrix.lua -d all --json m.json --json-lines m.jsonl
--   tools/rxe-vm --nodes 4 lua5.4 examples/fabric_matrix.lua --pattern shift
--   lua5.4 examples/fabric_matrix.lua --dry-run ...   # the control plane alone: no device, no traffic
package.path = arg[0]:gsub("[^/]*$", "") .. "lib/?.lua;" .. package.path -- examples/lib
local fabric = require "ibverbs.fabric"
local socket = require "socket"
local dkjson = require "dkjson"
local cli = require "cli"
local schedule = require "schedule"
local diagnose = require "diagnose"
local matrix = require "matrix"

local o = cli.run(arg, {
  name = "fabric_matrix.lua", usage = { "            one process per rank; the launcher gives rank and size" },
  cli.ib_dev{ help = "device(s): <dev>, <dev>,<dev>..., or all (every device and port: one rail each); "
    .. "default the first device" },
  cli.ib_port(),
  cli.gid_idx{ default = false, min = 0,
               help = "GID index (default: the first RoCE v2 IPv4 GID, else 0)" },
  { "s", "lat-size", arg = "bytes", type = "int", default = 8, min = 1, max = 4096,
    help = "ping-pong message size (default 8)" },
  { "n", "lat-iters", arg = "n", type = "int", default = 500, min = 1, max = 1e7,
    help = "ping-pong round trips (default 500)" },
  { "S", "bw-size", arg = "bytes", type = "int", default = 65536, min = 1, max = 1073741824,
    help = "bandwidth message size (default 65536)" },
  { "N", "bw-iters", arg = "n", type = "int", default = 1000, min = 1, max = 1e8,
    help = "bandwidth messages per direction and kind (default 1000)" },
  { nil, "pattern", arg = "name", help = "tournament (default), shift or serial" },
  { nil, "pairs", arg = "file", help = "the rounds from <file>: lines 'round rankA rankB' (ranks or host names)" },
  { nil, "quick", help = "one round of the tournament: every rank against one partner" },
  { nil, "max-rounds", arg = "n", type = "int", min = 1, help = "stop after <n> rounds (the rest: unmeasured)" },
  { nil, "block", arg = "b", type = "int", min = 1, max = 64,
    help = "rounds per exchange through rank 0 (default 1 below 64 ranks, else ranks/64 up to 16): within a block "
      .. "a pair starts when both ends reach it (its first ping waits for the partner's receive)" },
  { nil, "lat-factor", arg = "x", type = "number", default = 2.1, min = 1,
    help = "flag a latency above <x> times the reference latency (default 2.1; the lowest: see --reference)" },
  { nil, "bw-fraction", arg = "f", type = "number", default = 0.93, min = 0, max = 1,
    help = "flag a bandwidth below <f> times the reference bandwidth (default 0.93; the highest: see --reference)" },
  { nil, "reference", arg = "kind", default = "best",
    help = "what the factors apply to: best (the lowest latency, the highest bandwidth; default), median, or pQ "
      .. "(Q from 50 to 100): bandwidth against its Qth percentile, latency against its (100-Q)th (p75: robust to "
      .. "one bad node owning many pairs)" },
  { nil, "retests", arg = "k", type = "int", default = 1, min = 1, max = 100,
    help = "measure each retest pair <k> times (in <k> passes) and judge it by its best figures: a fault is bad "
      .. "every time, noise rarely <k> times (default 1)" },
  { nil, "wait", arg = "how", default = "spin",
    help = "how a rank waits for completions: spin (busy polling, as perftest; default) or event (sleeps on a "
      .. "completion channel: for oversubscribed hosts and VMs)" },
  { nil, "retest-width", arg = "n", type = "int", min = 1,
    help = "pairs measured at once in a retest round (default: a quarter of the ranks, at least 1)" },
  { nil, "qp-timeout", arg = "n", type = "int", default = 14, min = 1, max = 31,
    help = "the RC QPs' ack timeout exponent: 4.096 us x 2^n (default 14: 67 ms); raise it on links that queue long" },
  { nil, "no-retest", help = "report the flagged pairs without measuring them again" },
  { "t", "timeout", arg = "seconds", type = "number", default = 30, min = 1,
    help = "limit of every wait for a completion (default 30); a round's traffic stops at twice it, rank 0 "
      .. "waits for a rank at a round's end four times it plus 30 s" },
  { nil, "json", arg = "file", help = "write the results as JSON to <file> (rank 0)" },
  { nil, "json-lines", arg = "file", help = "stream each round's pairs as JSON lines to <file> (rank 0)" },
  { nil, "plot", arg = "file", help = "draw heatmaps into <file>.png or .svg with gnuplot (rank 0)" },
  { nil, "dry-run", help = "the whole schedule and every exchange, no device opened, no traffic" },
  { nil, "rank", arg = "rank", type = "int", min = 0, help = "this process's rank (default: from the launcher)" },
  { nil, "size", arg = "n", type = "int", min = 1, help = "the number of ranks (default: from the launcher)" },
  { nil, "root", arg = "host[:port]", help = "rank 0's address (default: IBV_FABRIC_ROOT or the launcher's)" },
  { nil, "fabric-port", arg = "port", type = "int", min = 1, max = 65535,
    help = "rendezvous TCP port (default 18600)" },
})

local function say(...) io.stderr:write(string.format(...), "\n") end
local function fmt_time(s)
  if s >= 3600 then return string.format("%d h %02d min", math.floor(s / 3600), math.floor(s % 3600 / 60)) end
  if s >= 60 then return string.format("%d min %02d s", math.floor(s / 60), math.floor(s % 60)) end
  return string.format("%.1f s", s)
end

local function usage_error(msg)
  say("fabric_matrix.lua: %s", msg)
  os.exit(1)
end

-- options that depend on each other: checked on every rank, before the rendezvous
if o.pairs and (o.pattern or o.quick) then usage_error("--pairs and --pattern/--quick exclude each other") end
if o.pattern and not (o.pattern == "tournament" or o.pattern == "shift" or o.pattern == "serial") then
  usage_error("option '--pattern': tournament, shift or serial expected, got '" .. o.pattern .. "'")
end
if o.quick and o.pattern and o.pattern ~= "tournament" then
  usage_error("--quick is the tournament's first round: it does not go with --pattern " .. o.pattern)
end
do
  local ok, err = diagnose.parse_reference(o.reference)
  if not ok then usage_error("option '--reference': " .. err) end
end
if o.wait ~= "spin" and o.wait ~= "event" then
  usage_error("option '--wait': spin or event expected, got '" .. o.wait .. "'")
end
if o.bw_fraction <= 0 then usage_error("option '--bw-fraction': above 0 expected, got " .. o.bw_fraction) end
if o.ib_dev and not o.ib_dev:find("^[%w_.:,-]+$") then
  usage_error("option '--ib-dev': bad device list '" .. o.ib_dev .. "'")
end
local PATTERN = o.pairs and "pairs" or o.quick and "quick" or o.pattern or "tournament"

local ROUND_LIMIT = 2 * o.timeout -- a round's traffic, then its ends fail
local CHAIN = 8 -- send WRs per post, the last one signaled
local WINDOW = 4 -- chains in flight
local RING = 32 -- receives posted for the send bandwidth
local ACCESS = { "local_write", "remote_write" }
local BW_ITERS = math.max(CHAIN, o.bw_iters + (CHAIN - o.bw_iters % CHAIN) % CHAIN)
local RING_N = math.min(RING, BW_ITERS)

local f, ferr = fabric.init{ rank = o.rank, size = o.size, root = o.root, port = o.fabric_port,
  timeout = o.timeout + 15, tolerant = true }
if not f then
  say("fabric_matrix: %s", ferr)
  os.exit(1)
end
local N, ME = f.size, f.rank
-- Rounds per exchange: one (a barrier per round) on small fabrics; past 64
-- ranks, rank 0's share of a round is cut by running several rounds between
-- exchanges, each pair starting when both of its ends reach it.
local BLOCK = o.block or (N < 64 and 1 or math.min(16, math.ceil(N / 64)))
-- rank 0 waits this long for a rank at a block's end: its traffic, its QPs of the next rounds, slack
local EXCHANGE_LIMIT = BLOCK * ROUND_LIMIT + 2 * o.timeout + 30
-- every collective after the rendezvous follows a block: it waits as long as an exchange
f.timeout = EXCHANGE_LIMIT
-- rank 0 names whom a collective still waits for, every minute of waiting (IBV_FABRIC_WAIT_EVERY): a
-- rank that hangs inside a block is buried at the exchange's limit only
if ME == 0 then
  f.on_wait = function(who, waited)
    say("fabric_matrix: waiting %s for %s (the limit: %s)", fmt_time(waited), who, fmt_time(EXCHANGE_LIMIT))
  end
end
local function fatal(err)
  say("fabric_matrix (%s): %s", f:name(ME), tostring(err))
  f:close()
  os.exit(1)
end
local function must(v, err)
  if v == nil then fatal(err) end
  return v
end

-- ------------------------------------------------------------------ rails

local ibv
local function now() return ibv and ibv.now() or socket.gettime() end

local function pick_gid(ctx, port, link_layer)
  if o.gid_idx then return o.gid_idx end
  if link_layer ~= "ethernet" then return 0 end
  for _, g in ipairs(ctx:query_gid_table() or {}) do
    if g.port_num == port and g.gid_type == "roce_v2" and g.gid:find("^::ffff:%d") then return g.gid_index end
  end
  return 0
end

-- This rank's rails: one per device and port asked for, each with its
-- resources or the local fault that stops it ({name =, fault =}).
local function open_rails()
  if o.dry_run then
    local rails = {}
    for name in (o.ib_dev or "dry"):gmatch("[^,]+") do rails[#rails + 1] = { name = name, dry = true } end
    return rails
  end
  local ok, mod = pcall(require, "ibverbs")
  if not ok then return { { name = o.ib_dev or "?", fault = "cannot load ibverbs: " .. tostring(mod) } } end
  ibv = mod
  local devs, err, errno = ibv.devices()
  if not devs then
    local cause = (errno == 38) and "no RDMA driver loaded (" .. tostring(err) .. ")" or tostring(err)
    return { { name = o.ib_dev or "(any)", fault = cause } }
  end
  local present, list = {}, {}
  for _, d in ipairs(devs) do present[d.name] = true; list[#list + 1] = d.name end
  local wanted = {}
  if not o.ib_dev then
    if not devs[1] then return { { name = "(any)", fault = "no RDMA device" } } end
    wanted[1] = devs[1].name
  elseif o.ib_dev == "all" then
    if not devs[1] then return { { name = "all", fault = "no RDMA device" } } end
    wanted = list
  else
    for name in o.ib_dev:gmatch("[^,]+") do wanted[#wanted + 1] = name end
  end
  local rails = {}
  for _, name in ipairs(wanted) do
    if not present[name] then
      rails[#rails + 1] = { name = name .. ":" .. o.ib_port,
        fault = string.format("no RDMA device %s (this host has: %s)", name, #list > 0 and table.concat(list, ", ") or
          "none") }
    else
      local ctx, cerr = ibv.open(name)
      if not ctx then
        rails[#rails + 1] = { name = name .. ":" .. o.ib_port,
          fault = "cannot open " .. name .. ": " .. tostring(cerr) }
      else
        local ports = { o.ib_port }
        if o.ib_dev == "all" then
          ports = {}
          local a = ctx:query_device()
          for p = 1, a and a.phys_port_cnt or 1 do ports[#ports + 1] = p end
        end
        for _, port in ipairs(ports) do
          local rail = { name = name .. ":" .. port, ctx = ctx, port = port }
          local attr, perr = ctx:query_port(port)
          if not attr then
            rail.fault = string.format("%s port %d: %s", name, port, tostring(perr))
          elseif attr.state ~= "active" then
            rail.fault = string.format("%s port %d is %s", name, port, attr.state)
          else
            local set, serr = pcall(function()
              rail.gid_index = pick_gid(ctx, port, attr.link_layer)
              rail.gid = assert(ctx:query_gid(port, rail.gid_index))
              rail.lid, rail.mtu = attr.lid, attr.active_mtu
              rail.pd = assert(ctx:alloc_pd())
              local cqe = 8 * RING + 8 * WINDOW * CHAIN + 64
              if o.wait == "event" then
                rail.channel = assert(ctx:create_comp_channel())
                rail.cq = assert(ctx:create_cq{ cqe = cqe, channel = rail.channel })
                local fd = rail.channel.fd
                rail.waiter = { getfd = function() return fd end }
              else
                rail.cq = assert(ctx:create_cq(cqe))
              end
              rail.wcs = ibv.wc_array(64)
              rail.out_lat = assert(rail.pd:reg_mr(2 * o.lat_size, ACCESS))
              rail.out_buf = assert(rail.pd:reg_mr(o.bw_size, ACCESS))
              rail.in_lat = assert(rail.pd:reg_mr(o.lat_size, ACCESS))
              rail.in_buf = assert(rail.pd:reg_mr(o.bw_size, ACCESS))
              rail.ring = assert(rail.pd:reg_mr(RING_N * o.bw_size, ACCESS))
            end)
            if not set then rail.fault = string.format("%s port %d: cannot set up: %s", name, port, tostring(serr)) end
          end
          rails[#rails + 1] = rail
        end
      end
    end
  end
  return rails
end

local rails = open_rails()

-- ------------------------------------------------------------------ what rank 0 learns and decides

local mine = { rails = {}, faults = {} }
for i, r in ipairs(rails) do
  mine.rails[i] = r.name
  if r.fault then mine.faults[#mine.faults + 1] = { i, r.fault } end
end
local all_local = must(f:gather(mine, 0))

local plan -- rank 0: {nrails=, rails = {names by rank}, faults = {[rank] = {[rail] = why}}, rounds=, ...}
local pairs_sched
if ME == 0 then
  local nrails = 0
  for r = 0, N - 1 do
    local l = all_local[r + 1]
    if l then nrails = math.max(nrails, #l.rails) end
  end
  local faults, names = {}, {}
  for r = 0, N - 1 do
    local l = all_local[r + 1]
    if l then
      names[r + 1] = l.rails
      for _, x in ipairs(l.faults or {}) do
        faults[r] = faults[r] or {}
        faults[r][x[1]] = x[2]
      end
      for k = #l.rails + 1, nrails do
        faults[r] = faults[r] or {}
        faults[r][k] = string.format("no rail %d (%d asked for, this host has %d)", k, nrails, #l.rails)
      end
    end
  end
  plan = { nrails = nrails, names = names, faults = {} }
  for r, t in pairs(faults) do
    for k, why in pairs(t) do plan.faults[#plan.faults + 1] = { r, k, why } end
  end
  if PATTERN == "pairs" then
    local fh, oerr = io.open(o.pairs)
    local text = fh and fh:read("a")
    if fh then fh:close() end
    if not text then
      plan.err = "cannot read the pairs file: " .. tostring(oerr)
    else
      local s, perr = schedule.from_pairs(text, N, f.hosts, o.pairs)
      if not s then plan.err = perr else pairs_sched = s; plan.rounds = s.rounds end
    end
  end
end
plan = must(f:bcast(plan))
if plan.err then
  if ME == 0 then say("fabric_matrix: %s", plan.err) end
  f:close()
  os.exit(1)
end
local NRAILS = plan.nrails
local FAULT = {} -- FAULT[rank][rail] = why
for _, x in ipairs(plan.faults) do
  FAULT[x[1]] = FAULT[x[1]] or {}
  FAULT[x[1]][x[2]] = x[3]
end

local sched
if PATTERN == "pairs" then
  local lists
  if ME == 0 then
    lists = {}
    for r = 0, N - 1 do lists[r + 1] = pairs_sched:rank_plan(r) end
  end
  local mine_plan = must(f:scatter(lists, 0))
  -- JSON object keys are strings: "round" -> partner
  sched = schedule.from_plan("pairs", N, plan.rounds, mine_plan, ME)
  if ME == 0 then sched = pairs_sched end
else
  sched = schedule.new(PATTERN, N)
end

-- ------------------------------------------------------------------ one round's traffic

local function pattern_bytes(src, dst, n)
  local t = {}
  for i = 0, 255 do t[#t + 1] = string.char((i * 7 + src * 31 + dst * 17 + 1) % 256) end
  return (string.rep(table.concat(t), math.ceil(n / 256))):sub(1, n)
end

-- The end of a pair on this rank: "out" (this rank sends to peer) or "in" (it receives from peer).
local function new_end(rail, kind, peer)
  local e = { rail = rail, kind = kind, peer = peer, psn = math.random(0, 0xffffff) }
  local qp, err = rail.pd:create_qp{ qp_type = "rc", send_cq = rail.cq, recv_cq = rail.cq,
    cap = { max_send_wr = WINDOW * CHAIN + 8, max_recv_wr = RING_N + 4, max_send_sge = 1, max_recv_sge = 1 } }
  if not qp then e.err = "create_qp: " .. tostring(err); return e end
  e.qp = qp
  return e
end

local function end_info(rail, e)
  if rail.dry then return "1 0 0 1024 :: 0 0" end
  if not e or not e.qp then return nil end
  local mr = e.kind == "in" and rail.in_buf or rail.out_buf
  return string.format("%d %d %d %d %s %.0f %d", e.qp.qp_num, e.psn, rail.lid or 0, rail.mtu or 1024,
    rail.gid or "::", mr.addr, mr.rkey)
end

local function parse_info(s)
  local qpn, psn, lid, mtu, gid, addr, rkey = s:match("^(%d+) (%d+) (%d+) (%d+) (%S+) (%d+) (%d+)$")
  if not qpn then return nil end
  return { qpn = tonumber(qpn), psn = tonumber(psn), lid = tonumber(lid), mtu = tonumber(mtu), gid = gid,
    addr = tonumber(addr), rkey = tonumber(rkey) }
end

-- wr_id: ring slots 0 .. RING_N - 1, the others above
local W_PONG, W_PING, W_ECHO, W_PINGRX, W_CHAIN = 1001, 1002, 1003, 1004, 1005

local function post_first_rx(e)
  local pok, perr = e.qp:post_recv{ wr_id = W_PINGRX, sge = { mr = e.rail.in_lat, length = o.lat_size } }
  if not pok then e.err = "post_recv: " .. tostring(perr) end
  e.first_rx = true
end

local function connect_end(e, rem)
  local rail = e.rail
  local ok, err, errno
  local until_t = now() + o.timeout
  for _ = 1, 3 do -- RoCE resolves the peer's MAC in the RTR step: a first ARP may time out (ETIMEDOUT)
    ok, err, errno = e.qp:connect({ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, gid = rem.gid },
      { port_num = rail.port, sgid_index = rail.gid_index, qp_access_flags = ACCESS,
        path_mtu = math.min(rail.mtu, rem.mtu), psn = e.psn, timeout = o.qp_timeout })
    if ok or errno ~= 110 or now() > until_t then break end
    e.qp:modify{ qp_state = "reset" }
  end
  if not ok then e.err = "RC connect: " .. tostring(err); return end
  e.raddr, e.rkey = rem.addr, rem.rkey
  -- the first ping's receive, before the round's barrier; in blocks of rounds,
  -- when the round starts (the buffers are the rail's: an early partner waits)
  if e.kind == "in" and BLOCK == 1 then post_first_rx(e) end
  e.connected = not e.err
end

local function close_end(e)
  if e and e.qp then e.qp:close(); e.qp = nil end
end

-- Runs the round's ends to completion: latency first on every end (the echo
-- side answers), then, once no latency is left to measure on this rank, RDMA
-- writes and sends.  Completions go to their end by QP number (a QP of an
-- earlier round that failed may still flush into the rail's CQ).  An end that
-- fails, or sees no completion for --timeout seconds, stops alone.
local function run_ends(ends)
  local by_qpn, cqs = {}, {}
  local live, lat_left = 0, 0
  for _, e in ipairs(ends) do
    e.res = e.res or {}
    if e.connected then
      by_qpn[e.qp.qp_num] = e
      cqs[e.rail.index] = e.rail
      e.state = "lat"
      live, lat_left = live + 1, lat_left + 1
    end
  end
  if live == 0 then return end
  local bw_started = false
  local function leave_lat(e)
    if e.in_lat then e.in_lat = false; lat_left = lat_left - 1 end
  end
  local function fail(e, msg)
    if e.state == "done" then return end
    leave_lat(e)
    e.state = "done"
    e.res.error = e.res.error or msg
    live = live - 1
  end
  local function post_chain(e)
    local ok, err = e.qp:post_send(e[e.op])
    if not ok then fail(e, e.op .. " post: " .. tostring(err)); return end
    e.inflight = e.inflight + 1
    e.posted = e.posted + CHAIN
  end
  local function start_bw(e, op)
    e.state, e.op, e.inflight, e.posted, e.acked = op, op, 0, 0, 0
    e.t0, e.last = now(), now()
    while e.inflight < WINDOW and e.posted < BW_ITERS and e.state == op do post_chain(e) end
  end
  local t_start = now()
  for _, e in ipairs(ends) do
    if e.state == "lat" then
      local rail = e.rail
      e.in_lat, e.last, e.i = true, t_start, 0
      if e.kind == "out" then
        e.ping_rx = { wr_id = W_PONG, sge = { mr = rail.out_lat, offset = o.lat_size, length = o.lat_size } }
        e.ping_tx = { wr_id = W_PING, opcode = "send", send_flags = { "signaled" },
          sge = { mr = rail.out_lat, length = o.lat_size } }
        rail.out_lat:write(0, pattern_bytes(ME, e.peer, o.lat_size))
        rail.out_buf:write(0, pattern_bytes(ME, e.peer, o.bw_size))
        local w = ibv.send_wrs(CHAIN)
        w:fill{ opcode = "rdma_write", sge = { mr = rail.out_buf, length = o.bw_size }, remote_addr = e.raddr,
          rkey = e.rkey }
        w:set(CHAIN, { wr_id = W_CHAIN, opcode = "rdma_write", send_flags = { "signaled" },
          sge = { mr = rail.out_buf, length = o.bw_size }, remote_addr = e.raddr, rkey = e.rkey })
        e.write = w
        local sl = ibv.send_wrs(CHAIN)
        sl:fill{ opcode = "send", sge = { mr = rail.out_buf, length = o.bw_size } }
        sl:set(CHAIN, { wr_id = W_CHAIN, opcode = "send", send_flags = { "signaled" },
          sge = { mr = rail.out_buf, length = o.bw_size } })
        e.send = sl
        e.got = 0
        e.rtts = {}
        e.t0 = now()
        e.ti = e.t0
        local ok, err = e.qp:post_recv(e.ping_rx)
        if ok then ok, err = e.qp:post_send(e.ping_tx) end
        if not ok then fail(e, "ping-pong post: " .. tostring(err)) end
      else
        e.echoed, e.received = 0, 0
        e.echo_tx = { wr_id = W_ECHO, opcode = "send", send_flags = { "signaled" },
          sge = { mr = rail.in_lat, length = o.lat_size } }
        e.ping_rx = { wr_id = W_PINGRX, sge = { mr = rail.in_lat, length = o.lat_size } }
        if not e.first_rx then
          post_first_rx(e)
          if e.err then fail(e, e.err) end
        end
      end
    end
  end
  local function on_wc(e, id, st, t)
    e.last = t
    local rail = e.rail
    if st ~= "success" then
      local what = e.state == "lat" and "ping-pong" or e.state == "rx" and "send bandwidth" or
        e.state == "write" and "RDMA write bandwidth" or e.state == "send" and "send bandwidth" or tostring(e.state)
      fail(e, string.format("%s: completion %s", what, st))
    elseif id == W_PONG or id == W_PING then
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
        e.state = "lat_done"
        leave_lat(e)
        if bw_started then start_bw(e, "write") end
      else
        local ok, err = e.qp:post_recv(e.ping_rx)
        if ok then ok, err = e.qp:post_send(e.ping_tx) end
        if not ok then fail(e, "ping-pong post: " .. tostring(err)) end
      end
    elseif id == W_PINGRX then
      e.i = e.i + 1
      local ok, err
      if e.i < o.lat_iters then
        ok, err = e.qp:post_recv(e.ping_rx)
      else -- the last ping: the receives for the send bandwidth go in before its echo
        e.ping_ok = rail.in_lat:read(0, o.lat_size) == pattern_bytes(e.peer, ME, o.lat_size)
        local rl = ibv.recv_wrs(RING_N)
        rl:fill{ sge = { mr = rail.ring, length = o.bw_size }, stride = o.bw_size }
        ok, err = e.qp:post_recv(rl)
        e.posted_rx = RING_N
      end
      if ok then ok, err = e.qp:post_send(e.echo_tx) end
      if not ok then fail(e, "echo post: " .. tostring(err)) end
    elseif id == W_ECHO then
      e.echoed = e.echoed + 1
      if e.echoed == o.lat_iters then e.state = "rx"; leave_lat(e) end
    elseif id == W_CHAIN then
      e.inflight = e.inflight - 1
      e.acked = e.acked + CHAIN
      if e.acked >= BW_ITERS then
        local mbs = o.bw_size * BW_ITERS / (t - e.t0) / 1e6
        if e.op == "write" then
          e.res.write_mbs = mbs
          start_bw(e, "send")
        else
          e.res.send_mbs = mbs
          e.state = "done"
          live = live - 1
        end
      elseif e.posted < BW_ITERS then
        post_chain(e)
      end
    else -- a ring slot (wr_id = its index, from 0): one send arrived
      e.received = e.received + 1
      if e.received == BW_ITERS then
        e.state = "done"
        live = live - 1
      elseif e.posted_rx < BW_ITERS then
        local ok, err = e.qp:post_recv{ wr_id = id, sge = { mr = rail.ring, offset = id * o.bw_size,
          length = o.bw_size } }
        if not ok then fail(e, "post_recv: " .. tostring(err)) end
        e.posted_rx = e.posted_rx + 1
      end
    end
  end
  local checked = t_start
  local deadline = t_start + ROUND_LIMIT
  local armed = false
  local function poll_all(t)
    local any = false
    for _, rail in pairs(cqs) do
      local n = rail.cq:poll(rail.wcs)
      for i = 1, n or 0 do
        any = true
        local e = by_qpn[rail.wcs:qp_num(i)]
        if e and e.state ~= "done" then on_wc(e, rail.wcs:wr_id(i), rail.wcs:status(i), t) end
      end
    end
    return any
  end
  while live > 0 do
    if lat_left == 0 and not bw_started then
      bw_started = true
      for _, e in ipairs(ends) do
        if e.state == "lat_done" then start_bw(e, "write") end
      end
    end
    local t = now()
    local any = poll_all(t)
    if not any and o.wait == "event" then
      -- arm every CQ, look once more (a completion may have come in between), then sleep on the channels
      if not armed then
        for _, rail in pairs(cqs) do rail.cq:req_notify() end
        armed = true
        any = poll_all(t)
      end
      if not any then
        local fds = {}
        for _, rail in pairs(cqs) do fds[#fds + 1] = rail.waiter end
        local ready = socket.select(fds, nil, 0.5)
        if #ready > 0 then
          for _, rail in pairs(cqs) do
            local cq = rail.channel:get_event(0)
            if cq then cq:ack_events(1) end
          end
          armed = false
        end
      end
    end
    if t - checked > 0.5 then -- ends that stalled, or the round past its limit
      checked = t
      for _, e in ipairs(ends) do
        if e.state and e.state ~= "done" and t > deadline then
          fail(e, string.format("round time limit (%g s) reached in %s", ROUND_LIMIT, e.state == "lat_done" and
            "waiting for the other ends' latency" or e.state == "lat" and "ping-pong" or
            e.state == "rx" and "send bandwidth (receiving)" or e.state == "write" and "RDMA write bandwidth" or
            "send bandwidth"))
        end
        if e.state and e.state ~= "done" and e.state ~= "lat_done" and t - e.last > o.timeout then
          local what = e.state == "lat" and "ping-pong" or e.state == "rx" and "send bandwidth (receiving)" or
            e.state == "write" and "RDMA write bandwidth" or "send bandwidth"
          fail(e, string.format("%s: no completion in %g s", what, o.timeout))
        end
      end
    end
  end
  -- the bytes that arrived: the last ping, the RDMA writes, the sends
  for _, e in ipairs(ends) do
    if e.kind == "in" and e.connected and not e.res.error then
      local rail = e.rail
      local want = pattern_bytes(e.peer, ME, o.bw_size)
      local ok_write = rail.in_buf:read(0, o.bw_size) == want
      local ok_send = true
      for j = 0, RING_N - 1 do ok_send = ok_send and rail.ring:read(j * o.bw_size, o.bw_size) == want end
      e.res.verified = o.lat_size + o.bw_size + RING_N * o.bw_size
      e.res.data_ok = e.ping_ok and ok_write and ok_send
      if not e.res.data_ok then
        e.res.error = "data check failed:" .. (e.ping_ok and "" or " ping") .. (ok_write and "" or " rdma_write") ..
          (ok_send and "" or " send")
      end
    end
  end
end

-- ------------------------------------------------------------------ rounds

-- The results of one round on this rank, one line per end:
--   "O rail peer lat write send|error"  (this rank sent to peer)
--   "I rail peer ok bytes|error"        (this rank received from peer)
--   "U rail peer|why"                   (this rank was to send to peer: unmeasured)
local function num(v) return v and string.format("%.6g", v) or "-" end
local function clean(s) return (tostring(s):gsub("[\n|]", " ")) end

local function round_lines(ends)
  local out = {}
  for _, e in ipairs(ends) do
    local r = e.res or {}
    if e.skip then
      if e.kind == "out" then out[#out + 1] = string.format("U %d %d|%s", e.rail.index, e.peer, clean(e.skip)) end
    elseif e.dry then -- both ends report, as in a real run: rank 0 reads as much as it would
      out[#out + 1] = string.format(e.kind == "out" and "D %d %d|" or "I %d %d - 0|", e.rail.index, e.peer)
    elseif e.kind == "out" then
      out[#out + 1] = string.format("O %d %d %s %s %s|%s", e.rail.index, e.peer, num(r.lat_us), num(r.write_mbs),
        num(r.send_mbs), r.error and clean(r.error) or "")
    else
      out[#out + 1] = string.format("I %d %d %s %d|%s", e.rail.index, e.peer, r.data_ok == nil and "-" or
        (r.data_ok and "1" or "0"), r.verified or 0, r.error and clean(r.error) or "")
    end
  end
  return table.concat(out, "\n")
end

for i, r in ipairs(rails) do r.index = i end

-- Why this rank cannot measure with peer on rail k (or nil).
local function blocked(k, peer)
  if not f:alive(peer) then return f:name(peer) .. " unreachable" end
  local pf = FAULT[peer] and FAULT[peer][k]
  if pf then return f:name(peer) .. ": " .. pf end
  local mf = FAULT[ME] and FAULT[ME][k]
  if mf then return f:name(ME) .. ": " .. mf end
  if not rails[k] then return "no rail " .. k end
  return nil
end

-- Rank 0's store of the pairs: key (sample, rail, src, dst) -> record, which
-- names its hosts for the streamed lines and the report alike.  The retest
-- pass runs its rounds --retests times: round k is sample
-- floor(k / store.per_sample) + 1 (the first pass: one sample).
local store = { recs = {}, list = {}, done = 0 }
local function rec(k, src, dst, sample)
  local key = (((sample or 1) - 1) * NRAILS + k - 1) * N * N + src * N + dst
  local r = store.recs[key]
  if not r then
    r = { rail = k, src = src, dst = dst, sample = sample, src_host = f.hosts[src + 1], dst_host = f.hosts[dst + 1] }
    store.recs[key] = r
    store.list[#store.list + 1] = r
  end
  return r
end

local jl -- --json-lines file
if ME == 0 and o.json_lines then
  jl = io.open(o.json_lines, "w")
  if not jl then say("fabric_matrix: cannot write %s", o.json_lines) end
end

-- Rank 0 reads a rank's result lines: "@k" (the round of the lines that
-- follow: a block carries several), then "<kind> <rail> <peer> <figures>|<why>"
-- read with one match each, no line strings or word tables (rank 0 reads 2N
-- of these a round).  Returns how many pairs the lines finish (their "out"
-- ends); touched (for --json-lines) collects the records.
local RESULT = "^(%u) (%d+) (%d+) ?([^%s|]*) ?([^%s|]*) ?([^%s|]*)|([^\n]*)\n?()"
local function absorb(src, text, round, pass, touched)
  local p, n, done = 1, #text, 0
  while p <= n do
    local c = text:byte(p)
    if c == 10 then -- an empty line: a round this rank sat out
      p = p + 1
    elseif c == 64 then
      local e = text:find("\n", p, true) or n + 1
      round = tonumber(text:sub(p + 1, e - 1))
      p = e + 1
    else
      local kind, k, peer, a, b, z, why, q = text:match(RESULT, p)
      if not kind then break end
      p = q
      k, peer = tonumber(k), tonumber(peer)
      local r
      local sample = store.per_sample and math.floor(round / store.per_sample) + 1
      if kind == "I" then r = rec(k, peer, src, sample) else r = rec(k, src, peer, sample); done = done + 1 end
      r.round, r.pass = round, pass
      if kind == "O" then
        r.lat_us, r.write_mbs, r.send_mbs = tonumber(a), tonumber(b), tonumber(z)
        if why ~= "" then r.error = (r.error and r.error .. "; " or "") .. f:name(src) .. ": " .. why end
      elseif kind == "I" then
        if a ~= "-" then r.data_ok = a == "1" end
        r.verified_bytes = tonumber(b)
        if why ~= "" then r.error = (r.error and r.error .. "; " or "") .. f:name(src) .. ": " .. why end
      elseif kind == "D" then
        r.dry = true
      else
        r.unmeasured = why
      end
      if touched then touched[r] = true end
    end
  end
  return done
end

-- this rank's time in the round exchanges (and, all_cpu, in the rounds as a whole)
local ctl = { seconds = 0, cpu = 0, rounds = 0, exchanges = 0, max = 0, all_cpu = 0 }

local function exchange(msgs, up)
  local t0, c0 = socket.gettime(), os.clock()
  local got, ups = f:route(msgs, up, EXCHANGE_LIMIT)
  local dt = socket.gettime() - t0
  ctl.seconds, ctl.cpu, ctl.exchanges = ctl.seconds + dt, ctl.cpu + os.clock() - c0, ctl.exchanges + 1
  ctl.max = math.max(ctl.max, dt)
  if not got then fatal(ups) end
  return got, ups
end

-- Runs rounds 0 .. R-1 of sched in blocks of BLOCK rounds.  The QPs of block
-- b+1 are connected during block b, before the exchange that ends it, so the
-- exchange is the only barrier: one per block (per round when BLOCK is 1).
-- It carries this rank's results of block b and its QP numbers for block b+2
-- to their peers, each message tagged with its round ("k#...").  Within a
-- block a pair starts when both ends reach it: the echo side posts its first
-- receive then, and the first ping waits for it (RNR, retried without limit).
local function run_schedule(s, R, pass)
  local t_start, cpu_start = socket.gettime(), os.clock()
  local total_pairs = 0
  if ME == 0 then -- a pattern's rounds all have as many pairs as its first; a list's (pairs file, retest) vary
    for k = 0, s.list and R - 1 or math.min(R, 1) - 1 do
      for r = 0, N - 1 do if s:partners(r, k) then total_pairs = total_pairs + NRAILS end end
    end
    if not s.list then total_pairs = total_pairs * R end
  end
  local pairs_done, last_print = 0, 0
  local rounds = {} -- k -> {ends = {...}, remote = {...}}
  local function make(k)
    local dst, src = s:partners(ME, k)
    local ends, msgs = {}, {}
    local to = {}
    for ki = 1, NRAILS do
      local rail = rails[ki]
      for _, side in ipairs({ { "out", dst }, { "in", src } }) do
        local kind, peer = side[1], side[2]
        if peer then
          local why = blocked(ki, peer)
          local e
          if why then
            e = { rail = rail or { index = ki }, kind = kind, peer = peer, skip = why }
          elseif rail.dry then
            e = { rail = rail, kind = kind, peer = peer, dry = true }
          else
            e = new_end(rail, kind, peer)
            if e.err then e.skip = f:name(ME) .. ": " .. e.err; close_end(e) end
          end
          ends[#ends + 1] = e
          local info = not e.skip and end_info(rail, e) or "-"
          to[peer] = to[peer] or {}
          to[peer][#to[peer] + 1] = kind .. " " .. ki .. " " .. info
        end
      end
    end
    for peer, l in pairs(to) do msgs[#msgs + 1] = { peer, table.concat(l, ";") } end
    rounds[k] = { ends = ends, msgs = msgs }
  end
  local function learn(got) -- the peers' QPs for the rounds of one block
    for _, m in ipairs(got) do
      local k, body = tostring(m[2]):match("^(%d+)#(.*)$")
      local rd = k and rounds[tonumber(k)]
      if rd then
        rd.remote = rd.remote or {}
        for item in body:gmatch("[^;]+") do
          local kind, ki, info = item:match("^(%a+) (%d+) (.*)$")
          if kind then rd.remote[m[1] .. " " .. kind .. " " .. ki] = info end
        end
      end
    end
  end
  local function connect(k)
    local rd = rounds[k]
    if not rd then return end
    for _, e in ipairs(rd.ends) do
      if not e.skip then
        -- my out end meets the peer's in end, and the other way round
        local key = e.peer .. " " .. (e.kind == "out" and "in" or "out") .. " " .. e.rail.index
        local theirs = rd.remote and rd.remote[key]
        local rem = theirs and theirs ~= "-" and parse_info(theirs)
        if not f:alive(e.peer) then
          e.skip = f:name(e.peer) .. " unreachable"
        elseif not rem then
          e.skip = theirs == "-" and (f:name(e.peer) .. ": cannot take part") or (f:name(e.peer) .. " sent no QP")
        elseif e.dry then
          e.connected = true
        else
          connect_end(e, rem)
          if e.err then e.res = { error = e.err } end
        end
      end
    end
  end
  if R == 0 then return end
  local nblocks = math.ceil(R / BLOCK)
  local function each(b, fn)
    for k = b * BLOCK, math.min((b + 1) * BLOCK, R) - 1 do fn(k) end
  end
  local function msgs_of(b)
    local l = {}
    if b < nblocks then
      each(b, function(k)
        for _, m in ipairs(rounds[k].msgs) do l[#l + 1] = { m[1], k .. "#" .. m[2] } end
      end)
    end
    return l
  end
  each(0, make)
  learn(exchange(msgs_of(0), nil))
  each(0, connect)
  if nblocks > 1 then each(1, make) end
  learn(exchange(msgs_of(1), nil))
  for b = 0, nblocks - 1 do
    local lines = {}
    each(b, function(k)
      local rd = rounds[k]
      for _, e in ipairs(rd.ends) do
        if not e.skip and not f:alive(e.peer) then e.skip = f:name(e.peer) .. " unreachable" end
      end
      local live = {}
      for _, e in ipairs(rd.ends) do if not e.skip and not e.dry then live[#live + 1] = e end end
      run_ends(live)
      lines[#lines + 1] = "@" .. k
      lines[#lines + 1] = round_lines(rd.ends)
    end)
    if b + 1 < nblocks then each(b + 1, connect) end
    if b + 2 < nblocks then each(b + 2, make) end
    local got, ups = exchange(msgs_of(b + 2), table.concat(lines, "\n"))
    learn(got)
    each(b, function(k)
      for _, e in ipairs(rounds[k].ends) do close_end(e) end
      rounds[k] = nil
    end)
    local last = math.min((b + 1) * BLOCK, R) - 1
    ctl.rounds = ctl.rounds + last - b * BLOCK + 1
    if ME == 0 then
      local touched = jl and {}
      for r = 0, N - 1 do
        if ups[r + 1] then pairs_done = pairs_done + absorb(r, ups[r + 1], b * BLOCK, pass, touched) end
      end
      for r in pairs(touched or {}) do
        jl:write(dkjson.encode({ pass = pass, round = r.round, sample = r.sample, rail = plan.names[r.src + 1] and
          plan.names[r.src + 1][r.rail] or r.rail, src = r.src, dst = r.dst, src_host = r.src_host,
          dst_host = r.dst_host, lat_us = r.lat_us, write_mbs = r.write_mbs, send_mbs = r.send_mbs,
          data_ok = r.data_ok, verified_bytes = r.verified_bytes, error = r.error, unmeasured = r.unmeasured }), "\n")
      end
      if jl then jl:flush() end
      local t = socket.gettime()
      if t - last_print >= 1 or last == R - 1 then
        last_print = t
        local el = t - t_start
        say("fabric_matrix: %s round %d/%d, %d/%d pairs, %s, about %s left", pass, last + 1, R, pairs_done,
          total_pairs, fmt_time(el), fmt_time(el / (last + 1) * (R - last - 1)))
      end
    end
  end
  store.done = store.done + pairs_done
  ctl.all_cpu = ctl.all_cpu + os.clock() - cpu_start
end

-- ------------------------------------------------------------------ the first pass

local R1 = sched.rounds
local limited = o.max_rounds and o.max_rounds < R1
if limited then R1 = o.max_rounds end
local t_run = socket.gettime()
run_schedule(sched, R1, "first")
local first_seconds = socket.gettime() - t_run

-- ------------------------------------------------------------------ diagnosis

local opts = { lat_factor = o.lat_factor, bw_fraction = o.bw_fraction, reference = o.reference, retests = o.retests }
local retest_plan -- rank 0
local first_list
if ME == 0 then
  -- every scheduled pair has a record: those nobody reported belong to a rank that is gone
  for k = 0, R1 - 1 do
    for r = 0, N - 1 do
      local dst = sched:partners(r, k)
      if dst then
        for ki = 1, NRAILS do
          local x = rec(ki, r, dst)
          x.round = x.round or k
          x.pass = x.pass or "first"
          if x.lat_us == nil and x.unmeasured == nil and x.error == nil and not x.dry then
            x.unmeasured = not f:alive(r) and (f:name(r) .. " unreachable") or
              not f:alive(dst) and (f:name(dst) .. " unreachable") or "not reported"
          end
        end
      end
    end
  end
  -- a pair a rank that died did not finish is unmeasured, whatever the survivor saw (what it finished stays)
  for _, x in ipairs(store.list) do
    for _, r in ipairs({ x.src, x.dst }) do
      if not x.unmeasured and not f:alive(r) and (x.error or x.lat_us == nil) then
        x.unmeasured = f:name(r) .. " unreachable" .. (x.error and (" (" .. x.error .. ")") or "")
      end
    end
  end
  first_list = {}
  for _, x in ipairs(store.list) do first_list[#first_list + 1] = x end
end

local R2 = 0
local per_sample -- rank 0: the rounds of one retest sample
local refs, plans_by_rail = {}, {}
local retest_sched
if not o.dry_run and not o.no_retest then
  local lists
  if ME == 0 then
    local union, seen = {}, {}
    local excluded = {}
    for r = 0, N - 1 do if not f:alive(r) then excluded[r] = true end end
    for ki = 1, NRAILS do
      local l = {}
      for _, x in ipairs(first_list) do if x.rail == ki then l[#l + 1] = x end end
      refs[ki] = diagnose.flag(l, opts)
      local ex = {}
      for r in pairs(excluded) do ex[r] = true end
      for r = 0, N - 1 do if FAULT[r] and FAULT[r][ki] then ex[r] = true end end
      plans_by_rail[ki] = diagnose.retest_plan(l, N, ex)
      for _, p in ipairs(plans_by_rail[ki].pairs) do
        local key = p[1] .. "-" .. p[2]
        if not seen[key] then seen[key] = true; union[#union + 1] = p end
      end
    end
    local rounds = schedule.disjoint_rounds(union, o.retest_width or math.max(1, math.floor(N / 4)))
    per_sample = #rounds
    -- --retests K: the same rounds K times over, so a pair's samples lie apart in time
    for _ = 2, o.retests do
      for i = 1, per_sample do rounds[#rounds + 1] = rounds[i] end
    end
    retest_plan = schedule.explicit("retest", N, rounds)
    lists = {}
    for r = 0, N - 1 do lists[r + 1] = { rounds = #rounds, plan = retest_plan:rank_plan(r) } end
  end
  local m = must(f:scatter(lists, 0))
  R2 = m.rounds
  retest_sched = ME == 0 and retest_plan or schedule.from_plan("retest", N, R2, m.plan, ME)
end

local retested = {}
if R2 > 0 then
  -- the retest records go to a store of their own
  local saved = store
  store = { recs = {}, list = {}, done = 0, per_sample = per_sample }
  run_schedule(retest_sched, R2, "retest")
  if ME == 0 then retested = store.list end
  store = saved
end

-- ------------------------------------------------------------------ report

-- this rank's time in the exchanges, for the control plane's figures
local ctl_all = must(f:gather({ ctl.seconds, ctl.cpu, ctl.rounds, ctl.max, ctl.exchanges }, 0))
local status = 0
if ME == 0 then
  local verdicts = setmetatable({}, { __jsontype = "array" })
  local function hosts_of(ranks)
    local h = {}
    for i, r in ipairs(ranks) do h[i] = f.hosts[r + 1] or ("rank " .. r) end
    return h
  end
  for _, d in ipairs(f:dead_ranks()) do
    verdicts[#verdicts + 1] = { kind = "unreachable", ranks = { d.rank }, hosts = hosts_of({ d.rank }), why = d.why }
  end
  for r = 0, N - 1 do
    if FAULT[r] and f:alive(r) then
      for ki = 1, NRAILS do
        if FAULT[r][ki] then
          verdicts[#verdicts + 1] = { kind = "node", ranks = { r }, hosts = hosts_of({ r }),
            rail = plan.names[r + 1] and plan.names[r + 1][ki] or ("rail " .. ki), why = FAULT[r][ki] }
        end
      end
    end
  end
  local transient_all = {}
  if not o.dry_run then
    for ki = 1, NRAILS do
      local l, again = {}, {}
      for _, x in ipairs(first_list) do if x.rail == ki then l[#l + 1] = x end end
      for _, x in ipairs(retested) do if x.rail == ki then again[#again + 1] = x end end
      refs[ki] = refs[ki] or diagnose.flag(l, opts)
      local p = plans_by_rail[ki]
      if o.no_retest or not p then
        -- no second pass: the flagged pairs are reported (and fail the run), none is judged
        for _, x in ipairs(l) do
          if x.flagged then status = 1 end
        end
      else
        local v, transient = diagnose.verdicts(again, refs[ki], p, opts, function(r) return f:name(r) end)
        for _, x in ipairs(v) do
          x.hosts = hosts_of(x.ranks)
          x.rail = plan.names[x.ranks[1] + 1] and plan.names[x.ranks[1] + 1][ki] or ("rail " .. ki)
          verdicts[#verdicts + 1] = x
        end
        for _, t in ipairs(transient) do transient_all[#transient_all + 1] = { t[1], t[2], ki } end
      end
    end
  end
  -- the figures of the control plane
  local worst, worst_rank, busiest, busiest_rank = 0, 0, 0, 0
  for r = 0, N - 1 do
    local c = ctl_all[r + 1]
    if c and c[3] > 0 and c[1] / c[3] > worst then worst, worst_rank = c[1] / c[3], r end
    if c and c[3] > 0 and c[2] / c[3] > busiest then busiest, busiest_rank = c[2] / c[3], r end
  end
  local c0 = ctl_all[1]
  local control = { rank0_ms_per_round = c0[3] > 0 and c0[1] / c0[3] * 1000 or 0,
    rank0_cpu_ms_per_round = c0[3] > 0 and c0[2] / c0[3] * 1000 or 0, slowest_ms_per_round = worst * 1000,
    slowest_rank = worst_rank, exchanges = c0[5], block = BLOCK,
    rank0_all_cpu_ms_per_round = c0[3] > 0 and ctl.all_cpu / c0[3] * 1000 or 0,
    busiest_cpu_ms_per_round = busiest * 1000,
    busiest_rank = busiest_rank, relay_group = f.tree and f.tree.k or 0 }
  -- the pairs never scheduled (--quick, --max-rounds, a pairs file)
  local scheduled = #first_list
  local want = NRAILS * N * (N - 1)
  local why_not = PATTERN == "quick" and "not scheduled (--quick)" or PATTERN == "pairs" and
    "not in the pairs file" or "not scheduled (--max-rounds " .. tostring(o.max_rounds) .. ")"
  local list = first_list
  local listed = 0
  if scheduled < want and (o.json or N <= 16) then
    for ki = 1, NRAILS do
      for s = 0, N - 1 do
        for d = 0, N - 1 do
          if s ~= d and not store.recs[((ki - 1) * N + s) * N + d] then
            local x = rec(ki, s, d)
            x.unmeasured = why_not
            list[#list + 1] = x
            listed = listed + 1
          end
        end
      end
    end
  end
  for _, x in ipairs(retested) do list[#list + 1] = x end -- the retest samples (pass "retest", sample k)
  local report = { size = N, hosts = f.hosts, pattern = PATTERN, rounds = R1, retest_rounds = R2,
    rails = plan.names[1], pairs = list, verdicts = verdicts, transient = transient_all, control = control,
    seconds = first_seconds, unscheduled = want - scheduled, listed_unscheduled = listed,
    options = { lat_size = o.lat_size, lat_iters = o.lat_iters, bw_size = o.bw_size, bw_iters = BW_ITERS,
      lat_factor = o.lat_factor, bw_fraction = o.bw_fraction, reference = o.reference, retests = o.retests,
      dry_run = o.dry_run or nil,
      launcher = f.launcher,
      max_rounds = o.max_rounds } }
  print(matrix.text(report))
  if o.json then
    local fh = io.open(o.json, "w")
    if not fh then say("fabric_matrix: cannot write %s", o.json); status = 1 else
      fh:write(matrix.json(report), "\n")
      fh:close()
    end
  end
  if o.plot then
    local ok, err = matrix.plot(report, o.plot)
    if not ok then say("fabric_matrix: %s", err); status = 1 end
  end
  if jl then
    jl:write(dkjson.encode({ verdicts = verdicts }), "\n")
    jl:close()
  end
  if #verdicts > 0 then status = 1 end
end
status = f:bcast(status) or 1
f:close()
os.exit(status)
