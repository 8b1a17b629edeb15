--- The perftest counterparts as tools (`ibvlua send_lat`, examples/send_lat.lua;
-- write_lat, read_lat, write_bw, read_bw): each test's command line and its
-- whole run, wire compatible with perftest's tool of that name, on the
-- steps of the library module ibverbs.perftest.
--
--   os.exit(require("ibverbs.tools.perftest").main("write_bw", arg))   -- all of ib_write_bw
--   local ok, err = require("ibverbs.tools.perftest").run(arg, "send_lat")  -- true, or nil, msg
local ibv = require "ibverbs"
local ex = require "ibverbs.exchange"
local pt = require "ibverbs.perftest"
local cli = require "ibverbs.tools.cli"

local perftest = {}

local check, steps = pt.check, pt.steps

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
-- "write_bw", "read_bw"): perftest's options, as ibverbs.tools.cli takes them.
function perftest.options(name)
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
-- line.  true, or nil, msg.
perftest.run = steps(function(argv, name)
  local t = TESTS[name]
  local o, args = cli.run(argv, perftest.options(name))
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

--- The tool: runs test (as perftest.run) with arg, a script's command line;
-- the exit status (a failure's message on stderr: 1).
function perftest.main(test, arg)
  local ok, err = perftest.run(arg, test)
  if not ok then io.stderr:write(tostring(err), "\n") return 1 end
  return 0
end

return perftest
