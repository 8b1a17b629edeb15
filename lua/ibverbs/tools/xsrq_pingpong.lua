--- xsrq_pingpong (`ibvlua xsrq_pingpong`, examples/xsrq_pingpong.lua): the Lua
-- counterpart of ibv_xsrq_pingpong, wire compatible with it,
-- written on the legacy OFED XRC calls (lua/ibverbs/xrc.lua).
--   server: ibvlua xsrq_pingpong -g 1 [-c <clients>]
--   client: ibvlua xsrq_pingpong -g 1 <server>
--   --help lists the options (the C tool's letters and defaults).
--
-- Each side opens the XRC domain of /tmp/xrc_domain (processes of one host
-- share it), makes an XRC SRQ and, per client, an XRC receive QP and an XRC
-- send QP.  Over TCP each client and the server swap
-- "lid:recv_qpn:send_qpn:psn:srqn:gid" messages (ibverbs.exchange); each side's
-- receive QP is connected to the peer's send QP and the other way round.  The
-- server sends first; every receive on the SRQ is answered with a send to that
-- peer's SRQ, until -n messages went each way per client.  The send QP used
-- rotates over the clients (an XRC send may reach any SRQ of the peer's
-- domain); only the last send to each peer is signaled.  Both sides end with an
-- "END" handshake and print "success".
-- The default path MTU is 1024 as in the C tool (its usage text says 2048).
-- Not offered: -o (on-demand paging).
local ibv = require "ibverbs"
local cli = require "ibverbs.tools.cli"
local ex = require "ibverbs.exchange"

local xsrq_pingpong = {}

local DOMAIN_FILE = "/tmp/xrc_domain"
local TIMEOUT = 60 -- seconds without a completion before giving up on the peer

-- The command line: the C tool's letters and defaults (a new table each run).
local function options_spec()
  return {
    name = "xsrq_pingpong.lua",
    usage = { "           start a server and wait for connection",
              "<host>    connect to server at <host>" },
    { "p", "port", arg = "port", type = "int", default = 18515, min = 0, max = 65535,
      help = "listen on/connect to port <port> (default 18515)" },
    cli.ib_dev(),
    cli.ib_port(),
    { "s", "size", arg = "size", type = "int", default = 4096, min = 1,
      help = "size of message to exchange (default 4096)" },
    { "m", "mtu", arg = "size", type = "int", default = 1024, help = "path MTU (default 1024)" },
    { "c", "clients", arg = "n", type = "int", default = 1, min = 1,
      help = "number of clients (on server only, default 1)" },
    { "n", "num_tests", arg = "n", type = "int", default = 5, min = 1,
      help = "number of tests per client (default 5)" },
    { "l", "sl", arg = "sl", type = "int", default = 0, min = 0, max = 15, help = "service level value" },
    { "e", "events", help = "sleep on CQ events (default poll)" },
    cli.gid_idx(),
  }
end

local function fail(msg)
  io.stdout:flush()
  io.stderr:write(msg, "\n")
  os.exit(1)
end

-- v, or the message what (with the reason of a failing call) and exit 1.
local function check(v, what, msg)
  if v == nil then fail(msg and (what .. ": " .. tostring(msg):gsub("^[%w_]+: ", "")) or what) end
  return v
end

local MTUS = { [256] = true, [512] = true, [1024] = true, [2048] = true, [4096] = true }

-- ---------------------------------------------------------------- resources

-- The file whose inode names the XRC domain (the C tool opens it O_RDONLY|O_CREAT);
-- -1 (a domain of this process only) when it cannot be made.
local function domain_file()
  local f = io.open(DOMAIN_FILE, "r")
  if not f then
    local w = io.open(DOMAIN_FILE, "a")
    if w then
      w:close()
      f = io.open(DOMAIN_FILE, "r")
    end
  end
  if not f then
    io.stderr:write("Couldn't create the file for the XRC Domain but not stopping\n")
    return -1
  end
  return f
end

local function create_qps(c)
  local o = c.o
  c.recv_qpn, c.send_qp, c.by_recv_qpn = {}, {}, {}
  for i = 1, o.clients do
    local qpn, msg, errno = c.domain:create_xrc_rcv_qp{ xrc_domain = c.domain }
    if not qpn then fail(("Couldn't create recv QP[%d] errno %d (%s)"):format(i - 1, errno, msg)) end
    check(c.domain:modify_xrc_rcv_qp(qpn, { qp_state = "init", pkey_index = 0, port_num = o.ib_port,
      qp_access_flags = { "remote_write", "remote_read" } }), ("Failed to modify recv QP[%d] to INIT"):format(i - 1))
    c.recv_qpn[i], c.by_recv_qpn[qpn] = qpn, i
    local qp
    qp, msg, errno = c.pd:create_qp{ qp_type = "xrc", xrc_domain = c.domain, send_cq = c.send_cq,
      cap = { max_send_wr = o.clients * o.num_tests, max_send_sge = 1 } }
    if not qp then fail(("Couldn't create send QP[%d] errno %d (%s)"):format(i - 1, errno, msg)) end
    check(qp:modify{ qp_state = "init", pkey_index = 0, port_num = o.ib_port, qp_access_flags = 0 },
      ("Failed to modify send QP[%d] to INIT"):format(i - 1))
    c.send_qp[i] = qp
  end
end

-- Everything up to the QPs in INIT, as the C tool's pp_init_ctx.
local function init_ctx(o)
  local c = { o = o }
  local msg
  c.ctx, msg = ibv.open(o.ib_dev)
  if not c.ctx then fail(tostring(msg) .. "\nFailed to open device") end
  local port = check(c.ctx:query_port(o.ib_port), "Failed to get port info")
  c.lid = port.lid
  if port.link_layer ~= "ethernet" and c.lid == 0 then fail("Couldn't get local LID") end
  c.gid = o.gid_idx >= 0 and check(c.ctx:query_gid(o.ib_port, o.gid_idx), "can't read sgid of index " .. o.gid_idx)
    or "::"
  if o.events then c.channel = check(c.ctx:create_comp_channel(), "Couldn't create completion channel") end
  c.pd = check(c.ctx:alloc_pd(), "Couldn't allocate PD")
  c.mr = check(c.pd:reg_mr(o.size, { "local_write" }), "Couldn't register MR")
  c.file = domain_file()
  local d, why = c.ctx:open_xrc_domain(c.file, ibv.O_CREAT)
  c.domain = check(d, "Couldn't Open the XRC Domain", why)
  c.recv_cq = check(c.ctx:create_cq{ cqe = o.clients, channel = c.channel }, "Couldn't create recv CQ")
  if o.events then check(c.recv_cq:req_notify(), "Couldn't request CQ notification") end
  c.send_cq = check(c.ctx:create_cq{ cqe = o.clients }, "Couldn't create send CQ")
  c.srq = check(c.pd:create_xrc_srq(c.domain, c.recv_cq, { attr = { max_wr = o.clients, max_sge = 1 } }),
    "Couldn't create SRQ")
  create_qps(c)
  return c
end

-- ---------------------------------------------------------------- connection

local function print_dest(side, d)
  print(string.format("%8s: LID %04x, QPN RECV %06x SEND %06x, PSN %06x, SRQN %06x, GID %s", side, d.lid,
    d.recv_qpn, d.send_qpn, d.psn, d.srqn, d.gid))
end

local function send_local_dest(c, conn, i)
  local d = { lid = c.lid, recv_qpn = c.recv_qpn[i], send_qpn = c.send_qp[i].qp_num,
              psn = math.random(0, 0xffffff), srqn = c.srq.xrc_srq_num, gid = c.gid }
  c.mine[i] = d
  print_dest("local", d)
  check(ex.send_xsrq_dest(conn, d), "Couldn't send local address")
end

local function recv_remote_dest(c, conn, i)
  local d, msg = ex.recv_xsrq_dest(conn)
  if not d then fail(("Couldn't read remote address [%d]: %s"):format(i - 1, msg)) end
  print_dest("remote", d)
  c.rem[i], c.conns[i] = d, conn
end

local function ah_attr(c, rem)
  local o = c.o
  local ah = { dlid = rem.lid, sl = o.sl, port_num = o.ib_port }
  if rem.gid_raw:sub(9, 16) ~= string.rep("\0", 8) then
    ah.grh = { hop_limit = 5, dgid = rem.gid_raw, sgid_index = math.max(o.gid_idx, 0) }
  end
  return ah
end

-- Receive QP i to the peer's send QP, send QP i to the peer's receive QP.
local function connect_qps(c, i)
  local o, rem, mine = c.o, c.rem[i], c.mine[i]
  local n = i - 1
  check(c.domain:modify_xrc_rcv_qp(c.recv_qpn[i], { qp_state = "rtr", dest_qp_num = rem.send_qpn,
    path_mtu = o.mtu, rq_psn = rem.psn, max_dest_rd_atomic = 0, min_rnr_timer = 12, ah_attr = ah_attr(c, rem) }),
    ("Failed to modify recv QP[%d] to RTR"):format(n))
  check(c.domain:modify_xrc_rcv_qp(c.recv_qpn[i], { qp_state = "rts", timeout = 14, sq_psn = mine.psn }),
    ("Failed to modify recv QP[%d] to RTS"):format(n))
  local qp = c.send_qp[i]
  check(qp:modify{ qp_state = "rtr", dest_qp_num = rem.recv_qpn, path_mtu = o.mtu, rq_psn = rem.psn,
    ah_attr = ah_attr(c, rem) }, ("Failed to modify send QP[%d] to RTR"):format(n))
  check(qp:modify{ qp_state = "rts", timeout = 14, retry_cnt = 7, rnr_retry = 7, sq_psn = mine.psn,
    max_rd_atomic = 0 }, ("Failed to modify send QP[%d] to RTS"):format(n))
end

local function client_connect(c, host)
  local conn = check(ex.connect(host, c.o.port), ("Couldn't connect to %s:%d"):format(host, c.o.port))
  send_local_dest(c, conn, 1)
  recv_remote_dest(c, conn, 1)
  connect_qps(c, 1)
end

local function server_connect(c)
  local listener = check(ex.listener(c.o.port, c.o.clients), ("Couldn't listen to port %d"):format(c.o.port))
  for i = 1, c.o.clients do
    local conn = check(listener:accept(), ("accept() failed for client %d"):format(i - 1))
    recv_remote_dest(c, conn, i)
    send_local_dest(c, conn, i)
    connect_qps(c, i)
  end
  listener:close()
end

-- ---------------------------------------------------------------- ping loop

local function post_recv(c, n)
  for _ = 1, n do
    check(c.srq:post_recv{ wr_id = 0, sge = { mr = c.mr, length = c.o.size } }, "Failed to post receive to SRQ")
  end
end

-- A send to peer i's SRQ, on the send QPs in turn; the last one to i signaled.
local function post_send(c, i)
  local o = c.o
  local qpi = (i - 1 + c.pp_cnt[i]) % o.clients + 1
  c.pp_cnt[i] = c.pp_cnt[i] + 1
  check(c.send_qp[qpi]:post_send{ wr_id = i, opcode = "send",
    send_flags = c.pp_cnt[i] >= o.num_tests and { "signaled" } or nil,
    sge = { mr = c.mr, length = o.size }, xrc_remote_srq_num = c.rem[i].srqn }, "Couldn't post send")
end

-- The next completion of cq (in wcs), sleeping on the channel with -e.
local function next_completion(c, cq, wcs)
  if c.channel and cq == c.recv_cq then
    while cq:poll(wcs) == 0 do
      local got = check(c.channel:get_event(TIMEOUT), "Failed to get cq_event")
      if got ~= c.recv_cq then fail("CQ event for unknown CQ") end
      got:ack_events(1)
      check(c.recv_cq:req_notify(), "Couldn't request CQ notification")
    end
    return
  end
  if cq:wait(wcs, 1, TIMEOUT) == 0 then fail(("no completion in %d s: the peer is gone"):format(TIMEOUT)) end
end

local function run(c)
  local o, wcs = c.o, ibv.wc_array(1)
  local total = o.clients * o.num_tests
  for cnt = 1, total do
    next_completion(c, c.recv_cq, wcs)
    if wcs:status(1) ~= "success" then fail("Work completion error " .. wcs:status(1)) end
    post_recv(c, 1)
    local i = o.clients == 1 and 1 or c.by_recv_qpn[wcs:qp_num(1)]
    if not i then
      io.stderr:write(("Unable to find qp %x\n"):format(wcs:qp_num(1)))
      i = 1
    end
    if c.pp_cnt[i] < o.num_tests then post_send(c, i) end
    c.received = cnt
  end
  for _ = 1, o.clients do
    next_completion(c, c.send_cq, wcs)
    if wcs:status(1) ~= "success" then fail("Work completion error " .. wcs:status(1)) end
  end
end

-- The END handshake: a client sends and then reads; the server reads from every
-- client first, then answers each.
local function terminate(c, client)
  if client then
    check(ex.send_end(c.conns[1]), "Couldn't send termination ack")
    check(ex.recv_end(c.conns[1]), "Couldn't read remote termination ack")
    return
  end
  for i = 1, c.o.clients do check(ex.recv_end(c.conns[i]), "Couldn't read remote termination ack") end
  for i = 1, c.o.clients do check(ex.send_end(c.conns[i]), "Couldn't send termination ack") end
end

local function close_ctx(c)
  for i = 1, c.o.clients do
    check(c.send_qp[i]:close(), ("Couldn't destroy INI QP[%d]"):format(i - 1))
    check(c.domain:unreg_xrc_rcv_qp(c.recv_qpn[i]), ("Couldn't destroy TGT QP[%d]"):format(i - 1))
    if c.conns[i] then c.conns[i]:close() end
  end
  check(c.srq:close(), "Couldn't destroy SRQ")
  check(c.domain:close(), "Couldn't close the XRC Domain")
  if io.type(c.file) == "file" then c.file:close() end
  check(c.send_cq:close(), "Couldn't destroy send CQ")
  check(c.recv_cq:close(), "Couldn't destroy recv CQ")
  check(c.mr:close(), "Couldn't deregister MR")
  check(c.pd:close(), "Couldn't deallocate PD")
  if c.channel then check(c.channel:close(), "Couldn't destroy completion channel") end
  check(c.ctx:close(), "Couldn't release context")
end

-- ---------------------------------------------------------------- main

--- The tool: `ibvlua xsrq_pingpong ...`, `lua5.4 examples/xsrq_pingpong.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.  Ends the process with the exit status.
function xsrq_pingpong.main(arg)
  local spec = options_spec()
  local o, args = cli.run(arg, spec)
  if #args > 1 then
    io.stderr:write(cli.usage(spec), "\n")
    os.exit(1)
  end
  if not MTUS[o.mtu] then
    io.stderr:write(cli.usage(spec), "\n")
    os.exit(1)
  end
  local host = args[1]
  if host then o.clients = 1 end
  math.randomseed(os.time() + math.floor(ibv.now() * 1e6) % 1000003)

  local c = init_ctx(o)
  c.mine, c.rem, c.conns, c.pp_cnt = {}, {}, {}, {}
  for i = 1, o.clients do c.pp_cnt[i] = 0 end
  post_recv(c, o.clients)
  if host then
    client_connect(c, host)
  else
    server_connect(c)
    for i = 1, o.clients do post_send(c, i) end
  end
  run(c)
  terminate(c, host ~= nil)
  close_ctx(c)
  print("success")
  os.exit(0)
end

return xsrq_pingpong
