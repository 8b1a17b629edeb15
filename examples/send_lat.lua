#!/usr/bin/env lua5.4
--- send_lat.lua: the Lua counterpart of perftest's ib_send_lat (RC send/recv
-- ping-pong), wire compatible with it: perftest's TCP exchange on port 18515
-- (ibverbs.perftest), then the ping-pong runs in C (ibv.lat_send: the
-- client sends first, each side answers each message it receives), every
-- round trip stamped, and perftest's latency table printed from the samples.
--   server: lua5.4 examples/send_lat.lua -x 1 -s 8 -n 1000
--   client: lua5.4 examples/send_lat.lua -x 1 -s 8 -n 1000 <server>
local ibv = require "ibverbs"
local pt = require "ibverbs.perftest"
package.path = arg[0]:gsub("[^/]*$", "") .. "lib/?.lua;" .. package.path -- examples/lib
local cli = require "cli"

local o, args = cli.run(arg, {
  name = "send_lat.lua", usage = { "           start a server and wait for connection",
                                   "<host>    connect to server at <host>" },
  { "p", "port", arg = "port", type = "int", default = 18515, min = 1, max = 65535,
    help = "listen on/connect to port <port> (default 18515)" },
  cli.ib_dev(),
  cli.ib_port(),
  { "s", "size", arg = "size", type = "int", default = 2, min = 1, help = "size of message (default 2)" },
  { "n", "iters", arg = "iters", type = "int", default = 1000, min = 5, help = "number of exchanges (default 1000)" },
  { "r", "rx-depth", arg = "dep", type = "int", default = 512, min = 1, help = "rx queue size (default 512)" },
  { "m", "mtu", arg = "mtu", type = "int", help = "MTU size: 256 - 4096 (default port mtu)" },
  { "I", "inline_size", arg = "size", type = "int", min = 0,
    help = "max size of message to be sent inline (default 236 on the devices perftest knows, else 0)" },
  cli.gid_idx{ "x", "gid-index", arg = "index", help = "test uses GID with GID index" }, -- perftest's letter
  { "H", "report-histogram", help = "print out all results (default: the summary only)" },
  { "U", "report-unsorted", help = "print out unsorted results (default sorted)" },
  { "F", "CPU-freq", help = "accepted for perftest's command lines (the clock is calibrated each run)" },
  { nil, "time-limit", arg = "seconds", type = "number", default = 60, min = 0,
    help = "stop the test after <seconds> (default 60)" },
})
o.histogram, o.unsorted = o.report_histogram, o.report_unsorted

local function check(v, msg)
  if v == nil then
    io.stderr:write(tostring(msg), "\n")
    os.exit(1)
  end
  return v
end

local host = args[1]
local env = check(pt.start(o, host))
local ctx = env.ctx
o.inline_size = o.inline_size or pt.default_inline(ctx, 236)
local pd = check(ctx:alloc_pd())
local mr = check(pd:reg_mr(o.size, { "local_write" }))
local rx = math.min(o.rx_depth, o.iters)
local scq, rcq = check(ctx:create_cq(16)), check(ctx:create_cq(rx))
local qp = check(pd:create_qp{ qp_type = "rc", send_cq = scq, recv_cq = rcq,
  cap = { max_send_wr = 1, max_recv_wr = rx, max_send_sge = 1, max_recv_sge = 1, max_inline_data = o.inline_size } })
local me = pt.me(env, qp, mr.rkey, mr.addr)
local rem = check(pt.keys(env, me))
check(pt.connect(env, qp, rem, me))
check(pt.keys(env, me))
pt.header(env, "Send Latency Test")
check(pt.exchange_dests(env, me))

local rl = ibv.recv_wrs(rx)
rl:fill{ sge = { mr = mr, length = o.size } }
check(qp:post_recv(rl))
local sl = ibv.send_wrs(1)
sl:set(1, { opcode = "send", sge = { mr = mr, length = o.size },
            send_flags = o.size <= o.inline_size and { "inline" } or nil })
local samples = ibv.samples(o.iters)
check(pt.keys(env, me)) -- the peer's receives are posted too

check(ibv.lat_send{ qp = qp, send_cq = scq, recv_cq = rcq, send_wrs = sl, recv_wrs = rl, iters = o.iters,
  initiator = host ~= nil, samples = samples, timeout = o.time_limit })
pt.lat_report(o, samples, 2)
check(pt.close(env, me))
