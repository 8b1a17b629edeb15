--- What the perftest counterparts (examples/send_lat.lua, write_lat.lua, ...)
-- share: the command-line options perftest's tests have in common, the
-- connection (perftest's TCP exchange: ibverbs.exchange), the QP brought up
-- to the peer, and perftest's printed tables.
--
--   local pt = require "ibverbs.perftest"
--   local env = pt.start(o, host)          -- device, port, GID; TCP; versions, MTU
--   local rem = pt.keys(env, me)           -- one key exchange (a perftest hand shake)
--   pt.connect(env, qp, rem)               -- INIT, RTR, RTS towards the peer
--   pt.header(env, "Send Latency Test"); pt.dest(env, "local", me)
--   pt.lat_report(o, samples, 2)           -- perftest's latency table, one way (RTT / 2)
--   pt.close(env, me)                      -- perftest's closing exchange
--   pt.run(arg, cli, "send_lat")           -- all of ib_send_lat (write_lat, read_lat, write_bw, read_bw)
-- Each step returns nil, msg when it fails (the device, the network, a verbs call).
local ibv = require "ibverbs"
local ex = require "ibverbs.exchange"

local pt = {}

pt.RESULT_LINE = string.rep("-", 87)

local function check(v, msg)
  if v == nil then error({ msg = msg }, 0) end
  return v
end

local function result(ok, ...)
  if ok then return ... end
  local e = ...
  if type(e) == "table" then return nil, tostring(e.msg) end
  error(e, 0) -- a bug, not a failure
end

-- f, whose check failures become nil, msg
local function steps(f)
  return function(...) return result(pcall(f, ...)) end
end

--- The device, its port and GID, the TCP connection and perftest's opening
-- exchange (versions, system data, MTU): a table env.
pt.start = steps(function(o, host)
  local env = { host = host, o = o }
  env.ctx = check(ibv.open(o.ib_dev))
  env.port = check(env.ctx:query_port(o.ib_port))
  env.gid = o.gid_index >= 0 and check(env.ctx:query_gid(o.ib_port, o.gid_index)) or "::"
  if not host then
    print("\n************************************\n* Waiting for client to connect... *")
    print("************************************")
  end
  if host then env.conn = check(ex.connect(host, o.port)) else env.conn = check(ex.listen(o.port)) end
  env.mtu, env.rem_version = ex.perftest_start(env.conn, o.mtu or env.port.active_mtu)
  check(env.mtu, env.rem_version)
  return env
end)

--- The inline size perftest's latency tests use by default on ctx's device:
-- def (236 for sends, 220 for writes) on the devices perftest knows, 0 on
-- the others (soft-RoCE among them).  Known here: Mellanox/NVIDIA's vendor
-- id; perftest's own list also has a few other vendors' parts.
function pt.default_inline(ctx, def)
  local attr = ctx:query_device()
  return attr and attr.vendor_id == 0x02c9 and def or 0
end

--- A key message for this side: lid, qpn, a random psn, rkey and vaddr given.
function pt.me(env, qp, rkey, vaddr)
  return { lid = env.port.lid, out_reads = 1, qpn = qp.qp_num, psn = math.random(0, 0xffffff), rkey = rkey or 0,
           vaddr = vaddr or 0, gid = env.gid }
end

--- One perftest hand shake: the peer's key message.
pt.keys = steps(function(env, me)
  return check(ex.hand_shake(env.conn, me))
end)

--- Brings an RC QP to RTS towards the peer's key message rem: as perftest,
-- the RDMA reads and atomics this side accepts at once are its own out_reads,
-- those it issues at once the peer's.
pt.connect = steps(function(env, qp, rem, me, access)
  local o = env.o
  local global = rem.gid_raw:sub(9, 16) ~= string.rep("\0", 8)
  check(qp:to_init{ port_num = o.ib_port, qp_access_flags = access })
  check(qp:to_rtr{ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, port_num = o.ib_port, path_mtu = env.mtu,
    gid = global and rem.gid_raw or nil, sgid_index = global and o.gid_index or nil,
    max_dest_rd_atomic = me.out_reads or 1 })
  check(qp:to_rts{ psn = me.psn, max_rd_atomic = rem.out_reads or 1 })
  return true
end)

--- perftest's test banner.
function pt.header(env, title)
  print(pt.RESULT_LINE)
  print("                    " .. title .. " (lua-ibverbs)")
  print(string.format(" Device         : %s\tConnection type : RC\tMtu : %d[B]", env.ctx:name(), env.mtu))
  print(pt.RESULT_LINE)
end

--- perftest's address line (and GID line with a GID index).
function pt.dest(env, side, d)
  print(string.format(" %s address: LID %04x QPN 0x%04x PSN 0x%x", side, d.lid, d.qpn, d.psn))
  if env.o.gid_index >= 0 then
    local raw, t = ex.gid_raw(d.gid), {}
    for i = 1, 16 do t[i] = string.format("%02d", raw:byte(i)) end
    print(" GID: " .. table.concat(t, ":"))
  end
end

--- The peer's key message, printed as perftest prints it after its own.
function pt.exchange_dests(env, me)
  pt.dest(env, "local", me)
  local rem, err = pt.keys(env, me)
  if not rem then return nil, err end
  pt.dest(env, "remote", rem)
  print(pt.RESULT_LINE)
  return rem
end

local LAT_TAIL = 2 -- perftest leaves the two largest round trips out of its figures

--- perftest's latency table from samples (round trips in seconds), each
-- divided by factor (2: one way, as ib_send_lat and ib_write_lat; 1: read,
-- atomic); o.histogram (-H) lists the sorted samples first, o.unsorted
-- (-U) as taken.
function pt.lat_report(o, s, factor)
  local us = 1e6 / factor
  local function list(get, n)
    print("#, usec")
    for i = 1, n do print(string.format("%d, %g", i, get(s, i) * us)) end
  end
  if o.unsorted then list(s.get, s:count()) end
  if o.histogram then list(s.sorted, s:count() - LAT_TAIL) end
  local st = s:stats(LAT_TAIL)
  print(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]"
    .. "   99% percentile[usec]   99.9% percentile[usec] ")
  print(string.format(" %-7d %-13d %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f",
    o.size, o.iters, st.min * us, st.max * us, st.median * us, st.average * us, st.stddev * us, st.p99 * us,
    st.p99_9 * us))
  print(pt.RESULT_LINE)
  return st
end

--- A bandwidth report from a kernel's figures (ibv.bw): size, iters, bw_peak
-- and bw_avg (MB/s; the same: the kernel gives the whole run's figure), msg_rate (Mpps).
function pt.bw_figures(o, f)
  local bw = o.size * f.sent / f.seconds / 2 ^ 20
  return { size = o.size, iters = f.sent, bw_peak = bw, bw_avg = bw, msg_rate = f.sent / f.seconds / 1e6 }
end

--- perftest's bandwidth table of a report (pt.bw_figures, or the peer's).
function pt.bw_report(rep)
  print(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
  print(string.format(" %-7d    %-10d       %-7.2f            %-7.2f\t\t   %-7.6f", rep.size, rep.iters,
    rep.bw_peak, rep.bw_avg, rep.msg_rate))
  print(pt.RESULT_LINE)
end

-- ---------------------------------------------------------------- the tests

-- What each test does its own way.  before: perftest's hand shakes before
-- the QP is connected (the peer's keys come from the last), after: those
-- after it; bw: a bandwidth test (the server waits for the client's end);
-- close: perftest's closing exchange at the end.
local TESTS = {
  send_lat = { verb = "send", tool = "ib_send_lat", title = "Send Latency Test", inline = 236, factor = 2,
               before = 1, after = 1, close = true },
  write_lat = { verb = "write", tool = "ib_write_lat", title = "RDMA_Write Latency Test", inline = 220,
                factor = 2, before = 2, after = 0, close = false },
  read_lat = { verb = "read", tool = "ib_read_lat", title = "RDMA_Read Latency Test", factor = 1,
               before = 2, after = 0, close = true },
  write_bw = { verb = "write", tool = "ib_write_bw", title = "RDMA_Write BW Test", bw = true, before = 1,
               after = 0, close = true },
  read_bw = { verb = "read", tool = "ib_read_bw", title = "RDMA_Read BW Test", bw = true, before = 1,
              after = 0, close = true },
}

--- The command line of a test ("send_lat", "write_lat", "read_lat",
-- "write_bw", "read_bw"): perftest's options, on the examples' cli module
-- (lua/ibverbs/tools/cli.lua).
function pt.options(cli, name)
  local t = TESTS[name]
  local spec = {
    name = name .. ".lua", usage = { "           start a server and wait for connection",
                                     "<host>    connect to server at <host>" },
    { "p", "port", arg = "port", type = "int", default = 18515, min = 1, max = 65535,
      help = "listen on/connect to port <port> (default 18515)" },
    cli.ib_dev(),
    cli.ib_port(),
    { "m", "mtu", arg = "mtu", type = "int", help = "MTU size: 256 - 4096 (default port mtu)" },
    cli.gid_idx{ "x", "gid-index", arg = "index", help = "test uses GID with GID index" }, -- perftest's letter
    { "F", "CPU-freq", help = "accepted for perftest's command lines (the clock is calibrated each run)" },
    { nil, "time-limit", arg = "seconds", type = "number", default = 60, min = 0,
      help = "stop the test after <seconds> (default 60)" },
  }
  local function add(o) spec[#spec + 1] = o end
  local size, iters = t.bw and 65536 or 2, t.bw and 5000 or 1000
  add{ "s", "size", arg = "size", type = "int", default = size, min = 1,
       help = "size of message (default " .. size .. ")" }
  add{ "n", "iters", arg = "iters", type = "int", default = iters, min = 5,
       help = "number of exchanges (default " .. iters .. ")" }
  if t.bw then
    add{ "t", "tx-depth", arg = "dep", type = "int", default = 128, min = 1, help = "size of tx queue (default 128)" }
    add{ "Q", "cq-mod", arg = "n", type = "int", default = 100, min = 1,
         help = "one completion per <n> WRs (default 100, at most the tx depth)" }
    add{ "l", "post_list", arg = "list size", type = "int", default = 1, min = 1,
         help = "post a list of <list size> WQEs per call (default 1)" }
  else
    add{ "H", "report-histogram", help = "print out all results (default: the summary only)" }
    add{ "U", "report-unsorted", help = "print out unsorted results (default sorted)" }
  end
  if t.inline then
    add{ "I", "inline_size", arg = "size", type = "int", min = 0,
         help = "max size of message to be sent inline (default " .. t.inline
           .. " on the devices perftest knows, else 0)" }
  end
  if t.verb == "send" then
    add{ "r", "rx-depth", arg = "dep", type = "int", default = 512, min = 1, help = "rx queue size (default 512)" }
  end
  return spec
end

-- The objects of one side: pd, mr, cqs, qp, this side's key message.
local function objects(env, t, o)
  local ctx = env.ctx
  local r = { pd = check(ctx:alloc_pd()) }
  local size = o.size
  if t.verb == "send" then
    r.mr = check(r.pd:reg_mr(size, { "local_write" }))
    r.rx = math.min(o.rx_depth, o.iters)
  else -- [0, size): read into or written from; [size, 2 size): the peer reads or writes there
    r.mr = check(r.pd:reg_mr(2 * size, { "local_write", "remote_write", "remote_read" }))
    r.rx = 1
  end
  local depth = t.bw and o.tx_depth or 1
  r.scq, r.rcq = check(ctx:create_cq(depth)), check(ctx:create_cq(r.rx))
  r.qp = check(r.pd:create_qp{ qp_type = "rc", send_cq = r.scq, recv_cq = r.rcq,
    cap = { max_send_wr = depth, max_recv_wr = r.rx, max_send_sge = 1, max_recv_sge = 1,
            max_inline_data = o.inline_size } })
  r.me = pt.me(env, r.qp, r.mr.rkey, r.mr.addr + (t.verb == "send" and 0 or size))
  local dev = ctx:query_device()
  r.me.out_reads = dev and dev.max_qp_rd_atom or 1 -- perftest's: the device's limit
  return r
end

-- The kernel and its table for this side, the WRs prepared; nil: this side only waits.
local function kernel_args(t, o, r, rem, server)
  local sge = { mr = r.mr, length = o.size }
  local flags = o.size <= (o.inline_size or 0) and { "inline" } or nil
  local remote = t.verb ~= "send" and { remote_addr = rem.vaddr, rkey = rem.rkey } or {}
  local k = { qp = r.qp, send_cq = r.scq, iters = o.iters, timeout = o.time_limit }
  k.send_wrs = ibv.send_wrs(t.bw and o.post_list or 1)
  k.send_wrs:fill{ opcode = t.verb == "send" and "send" or ("rdma_" .. t.verb), sge = sge, send_flags = flags,
                   remote_addr = remote.remote_addr, rkey = remote.rkey }
  if t.bw then
    k.window, k.cq_mod = o.tx_depth, math.min(o.cq_mod, o.tx_depth)
    if k.cq_mod % o.post_list ~= 0 then k.cq_mod = o.post_list end -- perftest's default with a post list
    return not server and ibv.bw or nil, k -- the client writes or reads, the server waits
  end
  k.samples = ibv.samples(o.iters)
  if t.verb == "send" then
    k.recv_wrs = ibv.recv_wrs(r.rx)
    k.recv_wrs:fill{ sge = sge }
    check(r.qp:post_recv(k.recv_wrs))
    k.recv_cq, k.initiator = r.rcq, not server -- ib_send_lat: the client sends first
    return ibv.lat_send, k
  elseif t.verb == "write" then
    k.send_mr, k.poll_mr, k.poll_offset, k.initiator = r.mr, r.mr, o.size, server -- ib_write_lat: the server
    return ibv.lat_write, k
  end
  return not server and ibv.lat_rtt or nil, k -- ib_read_lat: the client reads, the server waits
end

--- A whole test as perftest's tool runs it (name: "send_lat", "write_lat",
-- "read_lat", "write_bw", "read_bw"), wire compatible with it, the loop in C
-- (ibv.lat_send, lat_write, lat_rtt, bw), its table printed; argv the command
-- line, cli the examples' cli module.  true, or nil, msg.
pt.run = steps(function(argv, cli, name)
  local t = TESTS[name]
  local o, args = cli.run(argv, pt.options(cli, name))
  o.histogram, o.unsorted = o.report_histogram, o.report_unsorted
  local host = args[1]
  local env = check(pt.start(o, host))
  o.inline_size = t.inline and (o.inline_size or pt.default_inline(env.ctx, t.inline)) or 0
  local r = objects(env, t, o)
  local rem
  for _ = 1, t.before do rem = check(pt.keys(env, r.me)) end
  check(pt.connect(env, r.qp, rem, r.me, { "local_write", "remote_write", "remote_read" }))
  for _ = 1, t.after do check(pt.keys(env, r.me)) end
  pt.header(env, t.title)
  check(pt.exchange_dests(env, r.me))
  local kernel, k = kernel_args(t, o, r, rem, host == nil)
  check(pt.keys(env, r.me)) -- the peer is ready: its receives posted, its QP at RTS
  local rep = {}
  if kernel then
    local f = check(kernel(k))
    if t.bw then
      rep = pt.bw_figures(o, f)
      pt.bw_report(rep)
    else
      pt.lat_report(o, k.samples, t.factor)
    end
  end
  if t.bw then -- the server waits for the client's end, then prints the client's report
    check(pt.keys(env, r.me))
    local peer = check(ex.perftest_bw_reports(env.conn, rep, env.rem_version))
    if not kernel then pt.bw_report(peer) end
  end
  if t.close then return pt.close(env, r.me) end
  env.conn:close()
  return true
end)

--- perftest's closing exchange: a hand shake, then "done".
pt.close = steps(function(env, me)
  check(ex.hand_shake(env.conn, me))
  check(env.conn:write("done\0"))
  env.conn:close()
  return true
end)

return pt
