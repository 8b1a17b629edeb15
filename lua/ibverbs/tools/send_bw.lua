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

--- The tool: `ibvlua send_bw ...`, `lua5.4 examples/send_bw.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.
function send_bw.main(arg)
  local o, args = cli.run(arg, {
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

  local RESULT_LINE = string.rep("-", 87)

  local function fail(msg)
    io.stderr:write(msg, "\n")
    os.exit(1)
  end
  local function check(v, msg) if v == nil then fail(msg) end return v end

  local host = args[1]
  local ctx = check(ibv.open(o.ib_dev))
  local port = check(ctx:query_port(o.ib_port))
  local mtu = o.mtu or port.active_mtu
  local gid = o.gid_index >= 0 and check(ctx:query_gid(o.ib_port, o.gid_index)) or "::"

  if not host then
    print("\n************************************\n* Waiting for client to connect... *")
    print("************************************")
  end
  local conn
  if host then conn = check(ex.connect(host, o.port)) else conn = check(ex.listen(o.port)) end

  mtu = check(ex.perftest_start(conn, mtu)) -- versions, system data and MTU, as perftest exchanges them

  local pd = check(ctx:alloc_pd())
  local mr = check(pd:reg_mr(o.size, { "local_write" }))
  local cq = check(ctx:create_cq(host and o.tx_depth or o.rx_depth))
  local qp = check(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
    cap = { max_send_wr = host and o.tx_depth or 1, max_recv_wr = host and 1 or o.rx_depth,
            max_send_sge = 1, max_recv_sge = 1 } })
  check(qp:to_init{ port_num = o.ib_port })
  local me = { lid = port.lid, out_reads = 1, qpn = qp.qp_num, psn = math.random(0, 0xffffff), rkey = mr.rkey,
               vaddr = mr.addr, gid = gid }
  local rem = check(ex.hand_shake(conn, me))
  local global = rem.gid_raw:sub(9, 16) ~= string.rep("\0", 8)
  check(qp:to_rtr{ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, port_num = o.ib_port, path_mtu = mtu,
    gid = global and rem.gid_raw or nil, sgid_index = global and o.gid_index or nil })
  check(qp:to_rts{ psn = me.psn })
  check(ex.hand_shake(conn, me))

  local function print_dest(side, d)
    print(string.format(" %s address: LID %04x QPN 0x%04x PSN 0x%x", side, d.lid, d.qpn, d.psn))
    if o.gid_index >= 0 then
      local raw, t = ex.gid_raw(d.gid), {}
      for i = 1, 16 do t[i] = string.format("%02d", raw:byte(i)) end
      print(" GID: " .. table.concat(t, ":"))
    end
  end
  print(RESULT_LINE)
  print("                    Send BW Test (lua-ibverbs)")
  print(string.format(" Device         : %s\tConnection type : RC\tMtu : %d[B]", ctx:name(), mtu))
  print(RESULT_LINE)
  print_dest("local", me)
  print_dest("remote", check(ex.hand_shake(conn, me)))
  print(RESULT_LINE)

  -- the data path
  local chain = o.post_list > 1 and o.post_list or math.min(o.cq_mod, math.floor(o.tx_depth / 2))
  if chain > o.tx_depth then fail("post_list larger than the tx depth") end
  local rl
  if not host then
    rl = ibv.recv_wrs(o.rx_depth)
    rl:fill{ sge = { mr = mr, length = o.size } }
    check(qp:post_recv(rl, 1, math.min(o.rx_depth, o.iters)))
  end
  check(ex.hand_shake(conn, me))

  local function send_list(n)
    local sl = ibv.send_wrs(n)
    sl:fill{ opcode = "send", sge = { mr = mr, length = o.size } }
    sl:set(n, { wr_id = n, opcode = "send", sge = { mr = mr, length = o.size }, send_flags = { "signaled" } })
    return sl
  end

  local limit = 60 + o.iters / 1000
  local seconds
  if host then
    local main = o.iters - o.iters % chain
    seconds = 0
    for _, n in ipairs({ chain, o.iters % chain }) do
      local count = n == chain and main or n
      if n > 0 and count > 0 then
        local st = check(ibv.transfer{ send_qp = qp, send_cq = cq, send_wrs = send_list(n), count = count,
          window = n == chain and math.max(n, o.tx_depth - o.tx_depth % n) or n, timeout = limit })
        seconds = seconds + st.seconds
      end
    end
  else
    local st = check(ibv.transfer{ recv = qp, recv_cq = cq, recv_wrs = rl, count = o.iters, timeout = limit })
    seconds = st.seconds
  end

  local bw = o.size * o.iters / seconds / 2 ^ 20
  print(" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]")
  print(string.format(" %-10d %-14d %-18.2f %-20.2f %.6f", o.size, o.iters, bw, bw, o.iters / seconds / 1e6))
  print(RESULT_LINE)
  check(ex.hand_shake(conn, me))
  check(conn:write("done\0"))
  conn:close()
end

return send_bw
