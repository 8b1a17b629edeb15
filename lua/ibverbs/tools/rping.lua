--- rping (`ibvlua rping`, examples/rping.lua): the Lua counterpart of rping
-- (rdmacm-utils), wire compatible with it.
--   server: ibvlua rping -s -a 192.0.2.1 -v
--   client: ibvlua rping -c -a 192.0.2.1 -v -V -C 10
--   --help lists the options (rping's letters and defaults: port 7174, 64 bytes).
--
-- The connection is made with rdma_cm (ibverbs.cm).  Each side has a 16-byte
-- receive buffer for rping's "RDMA info" message {addr u64, rkey u32, size u32},
-- big-endian.  Per ping the client advertises its source buffer; the server
-- RDMA-reads it and sends a go-ahead; the client advertises its sink buffer;
-- the server RDMA-writes what it read there and sends a go-ahead; the client
-- compares the two buffers (-V).  The client stops after -C pings (0: never)
-- and disconnects; the server serves one client until it disconnects.
-- As in rping, -v prints "server ping data: ..." on the server and "ping
-- data: ..." on the client, and each side reports the disconnect on stderr.
-- Unlike rping, -V on the server also checks each ping against the text rping's
-- client writes ("rdma-ping-N: " and a rotating run of the characters A to z).
-- rping's -P (persistent server) and -q (QP made and moved by the program) are
-- not offered.
local cm = require "ibverbs.cm"
local cli = require "ibverbs.tools.cli"

local rping = {}

local BUFSIZE = 64 * 1024 -- RPING_BUFSIZE
local MIN_SIZE = 26 -- RPING_MIN_BUFSIZE: sizeof "2147483647" + sizeof "rdma-ping-%d: "
local INFO = 16
local CAP = { max_send_wr = 16, max_recv_wr = 2, max_send_sge = 1, max_recv_sge = 1 }
local CONN = { responder_resources = 1, initiator_depth = 1, retry_count = 7, rnr_retry_count = 7 }
local ETIMEDOUT = require("ibverbs").errno.ETIMEDOUT
local POLL = 0.05 -- seconds between looks at the cm channel while waiting for a completion

-- The command line: rping's letters and defaults (a new table each run).
local function options_spec()
  return {
    name = "rping.lua",
    usage = { "-s [-vVd] [-S size] [-C count] [-a addr] [-p port]",
              "-c [-vVd] [-S size] [-C count] [-I addr] -a addr [-p port]" },
    { "s", "server", help = "server side.  To bind to any address with IPv6 use -a ::0" },
    { "c", "client", help = "client side" },
    { "a", "addr", arg = "addr", default = "0.0.0.0", help = "address" },
    { "I", "bind", arg = "addr", help = "source address to bind to for client" },
    { "p", "port", arg = "port", type = "int", default = 7174, min = 0, max = 65535, help = "port (default 7174)" },
    { "C", "count", arg = "count", type = "int", default = 0, min = 0, help = "ping count times (default 0: forever)" },
    { "S", "size", arg = "size", type = "int", default = 64, help = "ping data size (default 64)" },
    { "t", "tos", arg = "tos", type = "int", min = 0, max = 255, help = "type of service of the connection" },
    { "v", "verbose", help = "display ping data to stdout" },
    { "V", "validate", help = "validate ping data" },
    { "d", "debug", help = "debug printfs" },
  }
end

-- The options of this run: set once by rping.main, read by every step (-d, -v, -V, ...).
local o

local function say(s)
  io.stdout:write(s, "\n")
  io.stdout:flush()
end

local function debug(fmt, ...)
  if o.debug then say(fmt:format(...)) end
end

local function fail(msg)
  io.stdout:flush()
  io.stderr:write(msg, "\n")
  os.exit(1)
end

local function check(v, what, msg, ...)
  if v == nil then fail(what .. ": " .. tostring(msg)) end
  return v, msg, ...
end

-- ---------------------------------------------------------------- messages

-- Big-endian fields without string.pack (LuaJIT has none); values < 2^53.
local toint = math.tointeger or function(x) return x end

local function be(n, bytes)
  local t = {}
  for i = bytes - 1, 0, -1 do t[#t + 1] = string.char(math.floor(n / 256 ^ i) % 256) end
  return table.concat(t)
end

local function unbe(s, from, bytes)
  local n = 0
  for i = from, from + bytes - 1 do n = n * 256 + s:byte(i) end
  return toint(n)
end

local function info(mr, len)
  debug("RDMA addr %x rkey %x len %d", mr.addr, mr.rkey, len)
  return be(mr.addr, 8) .. be(mr.rkey, 4) .. be(len, 4)
end

-- The text of mr up to its first NUL (at most len bytes).
local function text(mr, len)
  local s = mr:read(0, len)
  local nul = s:find("\0", 1, true)
  return nul and s:sub(1, nul - 1) or s
end

-- rping's ping n of len bytes: "rdma-ping-N: ", then characters 65..122 from
-- 65 + n mod 58 on, wrapping; the last byte NUL.
local function ping_text(n, len)
  local head = ("rdma-ping-%d: "):format(n)
  local t, c = { head }, n % 58
  for _ = #head + 1, len - 1 do
    t[#t + 1] = string.char(65 + c)
    c = (c + 1) % 58
  end
  return (table.concat(t) .. "\0"):sub(1, len)
end

-- ---------------------------------------------------------------- cm events

local function event_str(name)
  return "RDMA_CM_EVENT_" .. name:upper()
end

-- Handles an event that came while waiting for something else; true when it
-- was the peer's disconnect.
local function other_event(s, ev)
  debug("cma_event type %s cma_id %s (%s)", event_str(ev.event), tostring(ev.id),
    ev.id == s.listen and "parent" or "child")
  if ev.event == "disconnected" then
    io.stderr:write(s.role, " DISCONNECT EVENT...\n")
    s.disconnected = true
    return true
  end
  if ev.event == "device_removal" then fail("cma detected device removal!!!!") end
  io.stderr:write("unhandled event: ", event_str(ev.event), ", ignoring\n")
  return false
end

-- The next event, which must be `name` (else rping's message and exit 1).
local function expect(s, name, timeout)
  local ev, msg = s.ch:get_event(timeout)
  if not ev then fail("rdma_get_cm_event: " .. msg) end
  debug("cma_event type %s cma_id %s (%s)", event_str(ev.event), tostring(ev.id),
    ev.id == s.listen and "parent" or "child")
  if ev.event ~= name then
    if ev.event == "disconnected" then io.stderr:write(s.role, " DISCONNECT EVENT...\n") end
    fail(("cma event %s, error %d"):format(event_str(ev.event), ev.status))
  end
  return ev
end

-- ---------------------------------------------------------------- completions

-- The next completion of the id's send or receive CQ ("send" / "recv"),
-- watching the cm channel meanwhile: nil when the peer disconnected first.
local function wait(s, which)
  local get = which == "recv" and s.id.get_recv_comp or s.id.get_send_comp
  while not s.disconnected do
    local wc, msg, errno = get(s.id, POLL)
    if wc then
      if wc.status == "success" then
        debug("%s completion", wc.opcode == "recv" and "recv" or (wc.opcode:gsub("_", " ")))
        return wc
      end
      if wc.status ~= "wr_flush_err" then fail("cq completion failed status " .. wc.status) end
    elseif errno ~= ETIMEDOUT then
      fail(msg)
    end
    local ev = s.ch:get_event(0)
    if ev then other_event(s, ev) end
  end
  return nil
end

local function send(s, msg)
  s.smr:write(0, msg)
  check(s.id:post_send(1, s.smr, 0, INFO), "post send error")
  return wait(s, "send")
end

-- The next RDMA info message (the receive is posted again first), or nil.
local function receive(s)
  local wc = wait(s, "recv")
  if not wc then return nil end
  if wc.byte_len ~= INFO then fail("Received bogus data, size " .. wc.byte_len) end
  local msg = s.rmr:read(0, INFO)
  check(s.id:post_recv(0, s.rmr), "post recv error")
  local addr, rkey, len = unbe(msg, 1, 8), unbe(msg, 9, 4), unbe(msg, 13, 4)
  debug("Received rkey %x addr %x len %d from peer", rkey, addr, len)
  return addr, rkey, len
end

-- ---------------------------------------------------------------- setup

local function cm_addr(host, port)
  return (host:find(":", 1, true) and ("[" .. host .. "]") or host) .. ":" .. port
end

-- The QP on s.id and the two message buffers, a receive posted.
local function setup_qp(s)
  check(s.id:create_qp{ cap = CAP }, "rdma_create_qp")
  debug("created qp %s", tostring(s.id.qp))
  s.rmr = check(s.id:reg_msgs(INFO), "recv_buf reg_mr failed")
  s.smr = check(s.id:reg_msgs(INFO), "send_buf reg_mr failed")
  check(s.id:post_recv(0, s.rmr), "ibv_post_recv failed")
end

local function close_all(s)
  for _, k in ipairs({ "buf", "src", "sink", "rmr", "smr", "id", "listen", "ch" }) do
    if s[k] then s[k]:close() end
  end
end

-- ---------------------------------------------------------------- server

local function check_ping(n, got)
  local want = ping_text(n, #got)
  if got ~= want then fail(("data mismatch in ping %d!"):format(n)) end
end

local function serve(s)
  local n = 0
  while true do
    local raddr, rkey, len = receive(s) -- the client's source
    if not raddr then return end
    if len > BUFSIZE then fail(("ping of %d bytes is larger than %d"):format(len, BUFSIZE)) end
    check(s.id:post_read(2, s.buf, 0, len, nil, raddr, rkey), "post send error")
    debug("server posted rdma read req")
    if not wait(s, "send") then return end
    if o.validate then check_ping(n, s.buf:read(0, len)) end
    local ping = text(s.buf, len)
    if o.verbose then say("server ping data: " .. ping) end
    if not send(s, info(s.buf, len)) then return end -- go ahead
    debug("server posted go ahead")
    raddr, rkey, len = receive(s) -- the client's sink
    if not raddr then return end
    len = math.min(#ping + 1, len)
    debug("rdma write from lkey %x laddr %x len %d", s.buf.lkey, s.buf.addr, len)
    check(s.id:post_write(3, s.buf, 0, len, nil, raddr, rkey), "post send error")
    if not wait(s, "send") then return end
    debug("server rdma write complete")
    if not send(s, info(s.buf, len)) then return end -- go ahead
    debug("server posted go ahead")
    n = n + 1
  end
end

local function server(s)
  s.listen = check(s.ch:create_id{ ps = "tcp" }, "rdma_create_id")
  check(s.listen:bind_addr(cm_addr(o.addr, o.port)), "rdma_bind_addr")
  debug("rdma_bind_addr successful")
  debug("rdma_listen")
  check(s.listen:listen(3), "rdma_listen")
  s.id = expect(s, "connect_request").id
  debug("child cma %s", tostring(s.id))
  if o.tos then check(s.id:set_option("tos", o.tos), "rdma_set_option") end
  setup_qp(s)
  s.buf = check(s.id.pd:reg_mr(BUFSIZE, { "local_write", "remote_read", "remote_write" }),
    "rdma_buf reg_mr failed")
  debug("accepting client connection request")
  check(s.id:accept(CONN), "rdma_accept")
  expect(s, "established", 10)
  serve(s)
  check(s.id:disconnect(), "rdma_disconnect")
end

-- ---------------------------------------------------------------- client

local function resolve(s)
  s.id = check(s.ch:create_id{ ps = "tcp" }, "rdma_create_id")
  if o.tos then check(s.id:set_option("tos", o.tos), "rdma_set_option") end
  local src = o.bind and cm_addr(o.bind, 0) or nil
  check(s.id:resolve_addr(src, cm_addr(o.addr, o.port), 2000), "rdma_resolve_addr")
  expect(s, "addr_resolved")
  check(s.id:resolve_route(2000), "rdma_resolve_route")
  expect(s, "route_resolved")
  debug("rdma_resolve_addr - rdma_resolve_route successful")
end

-- One ping; false when the server disconnected.
local function ping(s, n)
  local data = ping_text(n, o.size)
  s.src:write(0, data)
  s.sink:write(0, string.rep("\0", o.size))
  if not send(s, info(s.src, o.size)) then return false end
  if not receive(s) then return false end -- the server has read it
  if not send(s, info(s.sink, o.size)) then return false end
  if not receive(s) then return false end -- the server has written it back
  if o.validate and s.sink:read(0, o.size) ~= data then fail("data mismatch!") end
  if o.verbose then say("ping data: " .. text(s.sink, o.size)) end
  return true
end

local function client(s)
  resolve(s)
  setup_qp(s)
  local access = { "local_write", "remote_read", "remote_write" }
  s.src = check(s.id.pd:reg_mr(o.size, access), "start_buf reg_mr failed")
  s.sink = check(s.id.pd:reg_mr(o.size, access), "rdma_buf reg_mr failed")
  check(s.id:connect(CONN), "rdma_connect")
  expect(s, "established")
  debug("rdma_connect successful")
  local n = 0
  while (o.count == 0 or n < o.count) and ping(s, n) do n = n + 1 end
  if not s.disconnected then
    check(s.id:disconnect(), "rdma_disconnect")
    expect(s, "disconnected", 10)
    io.stderr:write("client DISCONNECT EVENT...\n")
  end
end

-- ---------------------------------------------------------------- main

--- The tool: `ibvlua rping ...`, `lua5.4 examples/rping.lua ...`; arg is the command line
-- (arg[1] the first option), as a script's.  Ends the process with the exit status.
function rping.main(arg)
  local spec = options_spec()
  local args
  o, args = cli.run(arg, spec)
  if o.server == o.client or #args > 0 then
    io.stderr:write(cli.usage(spec), "\n")
    os.exit(1)
  end
  if o.size < MIN_SIZE or o.size > BUFSIZE - 1 then
    fail(("Invalid size %d (valid range is %d to %d)"):format(o.size, MIN_SIZE, BUFSIZE))
  end
  debug(o.server and "server" or "client")
  local s = { role = o.server and "server" or "client" }
  s.ch = check(cm.event_channel(), "rdma_create_event_channel")
  if o.server then server(s) else client(s) end
  close_all(s)
  os.exit(0)
end

return rping
