--- send_bw (`ibvlua send_bw`, examples/send_bw.lua): the Lua counterpart of
-- perftest's ib_send_bw (RC sends), wire
-- compatible with it: perftest's TCP exchange on port 18515, then the server
-- counts received messages while the client sends them through the batched
-- C loop (ibv.transfer): chains of WRs, one signaled completion per chain.
--   server: ibvlua send_bw -x 1 -s 64 -n 20000
--   client: ibvlua send_bw -x 1 -s 64 -n 20000 <server>
local ibv = require "ibverbs"
local cli = require "ibverbs.tools.cli"
local ex = require "ibverbs.exchange"

local send_bw = {}

local RESULT_LINE = string.rep("-", 87)

-- The command line: the options and the server's host (none: this side listens).
local function options(arg)
  return cli.run(arg, {
    name = "send_bw.lua", usage = { "           start a server and wait for connection",
                                    "<host>    connect to server at <host>" },
    { "p", "port", arg = "port", type = "int", default = 18515,
      help = "listen on/connect to port <port> (default 18515)" },
    cli.ib_dev(),
    cli.ib_port(),
    { "s", "size", arg = "size", type = "int", default = 65536, min = 1, help = "size of message (default 65536)" },
    { "n", "iters", arg = "iters", type = "int", default = 1000, min = 5, help = "number of exchanges (default 1000)" },
    { "t", "tx-depth", arg = "dep", type = "int", default = 128, min = 2, help = "size of tx queue (default 128)" },
    { "r", "rx-depth", arg = "dep", type = "int", default = 512, min = 1, help = "rx queue size (default 512)" },
    { "m", "mtu", arg = "mtu", type = "int", help = "MTU size: 256 - 4096 (default port mtu)" },
    cli.gid_idx{ "x", "gid-index", arg = "index", help = "test uses GID with GID index" }, -- perftest's letter
    { "l", "post_list", arg = "list size", type = "int", default = 1, min = 1,
      help = "post a list of <list size> WQEs per call (default: the --cq-mod chain)" },
    { "Q", "cq-mod", arg = "n", type = "int", default = 100, min = 1,
      help = "one completion per <n> sends (default 100, at most half the tx depth)" },
  })
end

local function fail(msg)
  io.stderr:write(msg, "\n")
  os.exit(1)
end
local function check(v, msg) if v == nil then fail(msg) end return v end

-- The device, its port and GID, the TCP connection and perftest's opening
-- exchange (versions, system data, MTU): a table env.
local function start(o, host)
  local env = { o = o, host = host }
  env.ctx = check(ibv.open(o.ib_dev))
  env.port = check(env.ctx:query_port(o.ib_port))
  local mtu = o.mtu or env.port.active_mtu
  env.gid = o.gid_index >= 0 and check(env.ctx:query_gid(o.ib_port, o.gid_index)) or "::"
  if not host then
    print("\n************************************\n* Waiting for client to connect... *")
    print("************************************")
  end
  if host then env.conn = check(ex.connect(host, o.port)) else env.conn = check(ex.listen(o.port)) end
  env.mtu = check(ex.perftest_start(env.conn, mtu)) -- versions, system data and MTU, as perftest exchanges them
  return env
end

-- The PD, MR, CQ and RC QP (env.pd, mr, cq, qp), brought to RTS towards the
-- peer's key message; this side's key message (env.me).
local function connect(env)
  local o, host, conn = env.o, env.host, env.conn
  env.pd = check(env.ctx:alloc_pd())
  env.mr = check(env.pd:reg_mr(o.size, { "local_write" }))
  env.cq = check(env.ctx:create_cq(host and o.tx_depth or o.rx_depth))
  local qp = check(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
    cap = { max_send_wr = host and o.tx_depth or 1, max_recv_wr = host and 1 or o.rx_depth,
            max_send_sge = 1, max_recv_sge = 1 } })
  env.qp = qp
  check(qp:to_init{ port_num = o.ib_port })
  local me = { lid = env.port.lid, out_reads = 1, qpn = qp.qp_num, psn = math.random(0, 0xffffff),
               rkey = env.mr.rkey, vaddr = env.mr.addr, gid = env.gid }
  env.me = me
  local rem = check(ex.hand_shake(conn, me))
  local global = rem.gid_raw:sub(9, 16) ~= string.rep("\0", 8)
  check(qp:to_rtr{ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, port_num = o.ib_port, path_mtu = env.mtu,
    gid = global and rem.gid_raw or nil, sgid_index = global and o.gid_index or nil })
  check(qp:to_rts{ psn = me.psn })
  check(ex.hand_shake(conn, me))
end

local function print_dest(o, side, d)
  print(string.format(" %s address: LID %04x QPN 0x%04x PSN 0x%x", side, d.lid, d.qpn, d.psn))
  if o.gid_index >= 0 then
    local raw, t = ex.gid_raw(d.gid), {}
    for i = 1, 16 do t[i] = string.format("%02d", raw:byte(i)) end
    print(" GID: " .. table.concat(t, ":"))
  end
end

-- perftest's banner and both sides' addresses.
local function header(env)
  print(RESULT_LINE)
  print("                    Send BW Test (lua-ibverbs)")
  print(string.format(" Device         : %s\tConnection type : RC\tMtu : %d[B]", env.ctx:name(), env.mtu))
  print(RESULT_LINE)
  print_dest(env.o, "local", env.me)
  print_dest(env.o, "remote", check(ex.hand_shake(env.conn, env.me)))
  print(RESULT_LINE)
end

local function send_list(o, mr, n)
  local sl = ibv.send_wrs(n)
  sl:fill{ opcode = "send", sge = { mr = mr, length = o.size } }
  sl:set(n, { wr_id = n, opcode = "send", sge = { mr = mr, length = o.size }, send_flags = { "signaled" } })
  return sl
end

-- The data path: the client sends in chains, the server counts what it
-- receives; the seconds it took.
local function transfer(env)
  local o, host, qp, cq, mr = env.o, env.host, env.qp, env.cq, env.mr
  local chain = o.post_list > 1 and o.post_list or math.min(o.cq_mod, math.floor(o.tx_depth / 2))
  if chain > o.tx_depth then fail("post_list larger than the tx depth") end
  local rl
  if not host then
    rl = ibv.recv_wrs(o.rx_depth)
    rl:fill{ sge = { mr = mr, length = o.size } }
    check(qp:post_recv(rl, 1, math.min(o.rx_depth, o.iters)))
  end
  check(ex.hand_shake(env.conn, env.me))
  local limit = 60 + o.iters / 1000
  if not host then
    return check(ibv.transfer{ recv = qp, recv_cq = cq, recv_wrs = rl, count = o.iters, timeout = limit }).seconds
  end
  local main = o.iters - o.iters % chain
  local seconds = 0
  for _, n in ipairs({ chain, o.iters % chain }) do
    local count = n == chain and main or n
    if n > 0 and count > 0 then
      local st = check(ibv.transfer{ send_qp = qp, send_cq = cq, send_wrs = send_list(o, mr, n), count = count,
        window = n == chain and math.max(n, o.tx_depth - o.tx_depth % n) or n, timeout = limit })
      seconds = seconds + st.seconds
    end
  end
  return seconds
end

--- The tool: `ibvlua send_bw ...`, `lua5.4 examples/send_bw.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.
function send_bw.main(arg)
  local o, args = options(arg)
  local env = start(o, args[1])
  connect(env)
  header(env)
  local seconds = transfer(env)
  local bw = o.size * o.iters / seconds / 2 ^ 20
  print(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
  print(string.format(" %-10d %-14d %-18.2f %-20.2f %.6f", o.size, o.iters, bw, bw, o.iters / seconds / 1e6))
  print(RESULT_LINE)
  check(ex.hand_shake(env.conn, env.me))
  check(env.conn:write("done\0"))
  env.conn:close()
end

return send_bw
