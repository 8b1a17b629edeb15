--- The engine of the pingpong examples, wire compatible with rdma-core's
-- ibv_rc_pingpong, ibv_uc_pingpong, ibv_ud_pingpong and ibv_srq_pingpong.
-- A tool, not a library module: it prints and exits as the C tools do.
--
--   require("ibverbs.tools.pingpong").main("rc", arg)    -- or "uc", "ud", "srq"
--
-- The client connects over TCP (port 18515), both sides swap
-- "lid:qpn:psn:gid" messages (ibverbs.exchange), connect their QPs, then
-- bounce one message back and forth: a side sends again once its previous
-- send and a receive have completed.  Receives are reposted as one WR chain
-- when the queue runs low.  Both sides print their addresses and the rate.
local ibv = require "ibverbs"
local cli = require "ibverbs.tools.cli"
local ex = require "ibverbs.exchange"

local pp = {}

local QKEY = 0x11111111
local GRH = 40
local MAX_QP = 256 -- srq_pingpong always sends this many address messages

pp.variants = {
  rc = { tool = "ibv_rc_pingpong", qp_type = "rc", size = 4096, mtu = true },
  uc = { tool = "ibv_uc_pingpong", qp_type = "uc", size = 4096, mtu = true },
  ud = { tool = "ibv_ud_pingpong", qp_type = "ud", size = 2048, grh = GRH },
  srq = { tool = "ibv_srq_pingpong", qp_type = "rc", size = 4096, mtu = true, srq = true },
}

--- The option table of a variant (the C tool's letters and defaults).
function pp.options(name)
  local v = pp.variants[name]
  local spec = {
    name = name .. "_pingpong.lua",
    usage = { "           start a server and wait for connection",
              "<host>    connect to server at <host>" },
    { "p", "port", arg = "port", type = "int", default = 18515, min = 1, max = 65535,
      help = "listen on/connect to port <port> (default 18515)" },
    cli.ib_dev(),
    cli.ib_port(),
    { "s", "size", arg = "size", type = "int", default = v.size, min = 1,
      help = "size of message to exchange (default " .. v.size .. ")" },
  }
  local function add(o) spec[#spec + 1] = o end
  if v.mtu then
    add{ "m", "mtu", arg = "size", type = "int", default = 1024, help = "path MTU (default 1024)" }
  end
  if v.srq then
    add{ "q", "num-qp", arg = "num", type = "int", default = 16, min = 1, max = MAX_QP,
         help = "number of QPs to use (default 16)" }
  end
  add{ "r", "rx-depth", arg = "dep", type = "int", default = 500, min = 1,
       help = "number of receives to post at a time (default 500)" }
  add{ "n", "iters", arg = "iters", type = "int", default = 1000, min = 1,
       help = "number of exchanges (default 1000)" }
  add{ "l", "sl", arg = "sl", type = "int", default = 0, min = 0, max = 15, help = "service level value" }
  add{ "e", "events", help = "sleep on CQ events (default poll)" }
  add(cli.gid_idx())
  add{ "c", "chk", help = "validate received buffer" }
  return spec
end

local function fail(msg)
  io.stderr:write(msg, "\n")
  os.exit(1)
end

local function check(v, msg, ...)
  if v == nil then fail(msg) end
  return v, msg, ...
end

local function interface_id_set(raw)
  return raw:sub(9, 16) ~= string.rep("\0", 8)
end

-- Device, port and memory: everything but the QPs.
local function open_resources(v, o)
  local r = { v = v, o = o }
  r.ctx = check(ibv.open(o.ib_dev))
  r.port = check(r.ctx:query_port(o.ib_port))
  if r.port.link_layer ~= "ethernet" and r.port.lid == 0 then fail("Couldn't get local LID") end
  if v.grh and o.size > r.port.active_mtu then
    fail(string.format("Requested size larger than port MTU (%d)", r.port.active_mtu))
  end
  r.gid = o.gid_idx >= 0 and check(r.ctx:query_gid(o.ib_port, o.gid_idx)) or "::"
  r.pd = check(r.ctx:alloc_pd())
  r.buf_len = o.size + (v.grh or 0)
  r.mr = check(r.pd:reg_mr(r.buf_len, { "local_write" }))
  local nqp = v.srq and o.num_qp or 1
  if v.srq and nqp > o.rx_depth then
    fail(string.format("rx_depth %d is too small for %d qps -- must have at least one receive per QP.",
      o.rx_depth, nqp))
  end
  if o.events then r.channel = check(r.ctx:create_comp_channel()) end
  r.cq = check(r.ctx:create_cq{ cqe = o.rx_depth + nqp, channel = r.channel })
  if v.srq then r.srq = check(r.pd:create_srq{ max_wr = o.rx_depth, max_sge = 1 }) end
  r.nqp = nqp
  return r
end

local function create_qps(r)
  local o = r.o
  r.qps, r.by_num, r.mine = {}, {}, {}
  for i = 1, r.nqp do
    local qp = check(r.pd:create_qp{ qp_type = r.v.qp_type, send_cq = r.cq, recv_cq = r.cq, srq = r.srq,
      cap = { max_send_wr = 1, max_recv_wr = r.srq and 1 or o.rx_depth, max_send_sge = 1, max_recv_sge = 1 } })
    check(qp:to_init{ port_num = o.ib_port })
    r.qps[i], r.by_num[qp.qp_num] = qp, i
    r.mine[i] = { lid = r.port.lid, qpn = qp.qp_num, psn = math.random(0, 0xffffff), gid = r.gid }
  end
  r.inline = r.qps[1].cap.max_inline_data >= r.o.size
end

-- Moves QP i to RTS against the remote address rem (and makes the UD AH).
local function connect_qp(r, i, rem)
  local o, qp = r.o, r.qps[i]
  local global = interface_id_set(rem.gid_raw)
  local grh = global and { dgid = rem.gid_raw, sgid_index = o.gid_idx, hop_limit = 1 } or nil
  if r.v.qp_type == "ud" then
    local ok, msg = qp:to_rtr()
    if not ok then return nil, "Failed to modify QP to RTR: " .. msg end
    r.ah, msg = r.pd:create_ah{ dlid = rem.lid, sl = o.sl, port_num = o.ib_port, grh = grh }
    if not r.ah then return nil, "Failed to create AH: " .. msg end
  else
    local ok, msg = qp:to_rtr{ qpn = rem.qpn, psn = rem.psn, lid = rem.lid, sl = o.sl, port_num = o.ib_port,
      path_mtu = o.mtu, gid = global and rem.gid_raw or nil, sgid_index = global and o.gid_idx or nil }
    if not ok then return nil, "Failed to modify QP to RTR: " .. msg end
  end
  local ok, msg = qp:to_rts{ psn = r.mine[i].psn }
  if not ok then return nil, "Failed to modify QP to RTS: " .. msg end
  return true
end

local function connect_all(r, remote)
  for i = 1, r.nqp do
    local ok, msg = connect_qp(r, i, remote[i])
    if not ok then return nil, msg end
  end
  return r.mine
end

-- Prepared WR lists: one send per QP (after the exchange: UD needs the AH).
local function prepare_sends(r)
  local o = r.o
  r.sends = {}
  for i = 1, r.nqp do
    local sl = ibv.send_wrs(1)
    sl:set(1, { wr_id = i, opcode = "send", send_flags = r.inline and { "signaled", "inline" } or { "signaled" },
      sge = { mr = r.mr, offset = r.v.grh or 0, length = o.size },
      ah = r.ah, remote_qpn = r.ah and r.remote[i].qpn or nil, remote_qkey = r.ah and QKEY or nil })
    r.sends[i] = sl
  end
end

local function post_recvs(r, n)
  if not r.rl then
    r.rl = ibv.recv_wrs(r.o.rx_depth)
    r.rl:fill{ sge = { mr = r.mr, length = r.buf_len } }
  end
  if n <= 0 then return 0 end
  local target = r.srq or r.qps[1]
  local ok, msg = target:post_recv(r.rl, 1, n)
  if not ok then fail("Couldn't post receive: " .. msg) end
  return n
end

local function print_address(side, d, sep)
  print(string.format("  %s address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s", side, d.lid, d.qpn, d.psn,
    sep, d.gid))
end

-- Client: exchange addresses first, connect after. Server: connect, then answer.
local function exchange(r, host)
  local o, slots = r.o, r.v.srq and MAX_QP or 1
  local conn, remote, msg
  if host then
    conn = check(ex.connect(host, o.port))
    remote, msg = ex.client_exchange(conn, r.mine, slots)
    if not remote then fail("Couldn't read remote address: " .. msg) end
    check(connect_all(r, remote))
  else
    conn = check(ex.listen(o.port))
    remote, msg = ex.server_exchange(conn, slots, function(rem) return connect_all(r, rem) end)
    if not remote then fail("Couldn't exchange addresses: " .. msg) end
  end
  conn:close()
  r.remote = remote
end

local function wait_completion(r, wcs)
  if r.channel then
    local n = r.cq:poll(wcs)
    if n > 0 then return n end
    local cq, msg = r.channel:get_event(60)
    if not cq then fail("Failed to get cq_event: " .. msg) end
    cq:ack_events(1)
    check(r.cq:req_notify())
    return r.cq:poll(wcs)
  end
  local n = r.cq:wait(wcs, 1, 60)
  if n == 0 then fail("no completion in 60 s: the peer is gone") end
  return n
end


local function post_send(r, i)
  local ok, msg = r.qps[i]:post_send(r.sends[i])
  if not ok then fail("Couldn't post send: " .. msg) end
end

-- The pingpong loop (receives posted before); returns the seconds it took.
local function run(r, client, routs)
  local o, wcs = r.o, ibv.wc_array(2 * r.nqp)
  local want_send, want_recv = {}, {}
  if r.channel then check(r.cq:req_notify()) end
  local start = ibv.now()
  for i = 1, r.nqp do
    want_recv[i], want_send[i] = true, client
    if client then post_send(r, i) end
  end
  local scnt, rcnt, low = 0, 0, r.srq and r.nqp or 1
  while rcnt < o.iters or scnt < o.iters do
    for k = 1, wait_completion(r, wcs) do
      local status = wcs:status(k)
      if status ~= "success" then
        fail(string.format("Failed status %s for wr_id %d", status, wcs:wr_id(k)))
      end
      local i = r.by_num[wcs:qp_num(k)]
      if wcs:opcode(k) == "recv" then
        rcnt, routs, want_recv[i] = rcnt + 1, routs - 1, false
        if routs <= low then routs = routs + post_recvs(r, o.rx_depth - routs) end
      else
        scnt, want_send[i] = scnt + 1, false
      end
      if scnt < o.iters and not want_send[i] and not want_recv[i] then
        post_send(r, i)
        want_send[i], want_recv[i] = true, true
      end
    end
  end
  return ibv.now() - start
end

-- -c: the client marks every page, the server checks the marks at the end.
local PAGE = 4096
local function mark_pages(r)
  for off = r.v.grh or 0, r.buf_len - 1, PAGE do r.mr:write(off, "\0") end
end

local function check_pages(r)
  local base = r.v.grh or 0
  for off = base, r.buf_len - 1, PAGE do
    if r.mr:read(off, 1) ~= "\0" then
      print(string.format("invalid data in page %d", math.floor((off - base) / PAGE)))
    end
  end
end

--- Runs the tool; argv is the script's arg table.
function pp.main(name, argv)
  local v = assert(pp.variants[name], "unknown pingpong variant")
  local o, args = cli.run(argv, pp.options(name))
  if #args > 1 then fail("usage: give at most one server name (see --help)") end
  local host = args[1]
  math.randomseed(os.time() + math.floor(ibv.now() * 1e6) % 1000003)
  local r = open_resources(v, o)
  create_qps(r)
  for i = 1, r.nqp do print_address("local", r.mine[i], v.grh and ":" or ",") end
  if host and o.chk then mark_pages(r) end
  local routs = post_recvs(r, o.rx_depth)
  exchange(r, host)
  for i = 1, r.nqp do print_address("remote", r.remote[i], ",") end
  prepare_sends(r)
  local secs = run(r, host ~= nil, routs)
  local usec = secs * 1e6
  local bytes = o.size * o.iters * 2
  print(string.format("%d bytes in %.2f seconds = %.2f Mbit/sec", bytes, secs, bytes * 8 / usec))
  print(string.format("%d iters in %.2f seconds = %.2f usec/iter", o.iters, secs, usec / o.iters))
  if not host and o.chk then check_pages(r) end
  return 0
end

return pp
