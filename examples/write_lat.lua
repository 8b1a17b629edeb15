#!/usr/bin/env lua5.4
--- write_lat.lua: the Lua counterpart of perftest's ib_write_lat (RDMA write
-- ping-pong polling on memory), wire compatible with it: perftest's TCP
-- exchange on port 18515 (ibverbs.perftest), then the ping-pong runs in C
-- (ibv.lat_write: the server writes first; each side waits until the last
-- byte of the peer's message in its buffer shows the iteration's number,
-- then writes its own), every round trip stamped, and perftest's latency
-- table printed from the samples.
--   server: lua5.4 examples/write_lat.lua -x 1 -s 8 -n 1000
--   client: lua5.4 examples/write_lat.lua -x 1 -s 8 -n 1000 <server>
local ibv = require "ibverbs"
local pt = require "ibverbs.perftest"
package.path = arg[0]:gsub("[^/]*$", "") .. "lib/?.lua;" .. package.path -- examples/lib
local cli = require "cli"

local o, args = cli.run(arg, {
  name = "write_lat.lua", usage = { "           start a server and wait for connection",
                                   "<host>    connect to server at <host>" },
  { "p", "port", arg = "port", type = "int", default = 18515, min = 1, max = 65535,
    help = "listen on/connect to port <port> (default 18515)" },
  cli.ib_dev(),
  cli.ib_port(),
  { "s", "size", arg = "size", type = "int", default = 2, min = 1, help = "size of message (default 2)" },
  { "n", "iters", arg = "iters", type = "int", default = 1000, min = 5, help = "number of exchanges (default 1000)" },
  { "m", "mtu", arg = "mtu", type = "int", help = "MTU size: 256 - 4096 (default port mtu)" },
  { "I", "inline_size", arg = "size", type = "int", min = 0,
    help = "max size of message to be sent inline (default 220 on the devices perftest knows, else 0)" },
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
o.inline_size = o.inline_size or pt.default_inline(ctx, 220)
local pd = check(ctx:alloc_pd())
-- [0, size): the message this side writes; [size, 2 size): where the peer's lands
local mr = check(pd:reg_mr(2 * o.size, { "local_write", "remote_write" }))
local cq = check(ctx:create_cq(16))
local qp = check(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
  cap = { max_send_wr = 1, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1, max_inline_data = o.inline_size } })
local me = pt.me(env, qp, mr.rkey, mr.addr + o.size)
check(pt.keys(env, me))
local rem = check(pt.keys(env, me))
check(pt.connect(env, qp, rem, me, { "local_write", "remote_write" }))
pt.header(env, "RDMA_Write Latency Test")
check(pt.exchange_dests(env, me))

local sl = ibv.send_wrs(1)
sl:set(1, { opcode = "rdma_write", sge = { mr = mr, length = o.size }, remote_addr = rem.vaddr, rkey = rem.rkey,
            send_flags = o.size <= o.inline_size and { "inline" } or nil })
local samples = ibv.samples(o.iters)
check(pt.keys(env, me)) -- both QPs are ready: the server may write

check(ibv.lat_write{ qp = qp, send_cq = cq, send_wrs = sl, send_mr = mr, poll_mr = mr, poll_offset = o.size,
  iters = o.iters, initiator = host == nil, samples = samples, timeout = o.time_limit })
pt.lat_report(o, samples, 2)
env.conn:close()
