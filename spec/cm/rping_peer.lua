-- A wire-compatible peer of rdma-core's rping, over ibverbs.cm.
--   lua spec/cm/rping_peer.lua server ADDR PORT COUNT        -- against rping -c
--   lua spec/cm/rping_peer.lua client ADDR PORT COUNT SIZE   -- against rping -s
--
-- rping's protocol: each side has a 16-byte receive buffer for an "RDMA info"
-- message {addr u64, rkey u32, size u32} in network byte order.  Per ping the
-- client advertises its source buffer; the server RDMA-reads it and sends a
-- go-ahead; the client advertises its sink buffer; the server RDMA-writes what
-- it read there and sends a go-ahead; the client compares the two buffers.
-- Prints "ready" once listening or connected, "[server ]ping data: TEXT" per
-- ping, and "done" after the disconnect.  Exits non-zero on any failure.
local cm = require "ibverbs.cm"

local role, addr, port, count = arg[1], arg[2], arg[3], tonumber(arg[4])
local size = tonumber(arg[5] or "64") -- rping's default -S
local TIMEOUT = 10
local INFO = 16
local CAP = {max_send_wr = 4, max_recv_wr = 2, max_send_sge = 1, max_recv_sge = 1}

local function say(s)
  io.stdout:write(s, "\n")
  io.stdout:flush()
end

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
  return be(mr.addr, 8) .. be(mr.rkey, 4) .. be(len or mr.length, 4)
end

local function wait_send(id)
  local wc = assert(id:get_send_comp(TIMEOUT))
  assert(wc.status == "success", "send completion: " .. wc.status)
  return wc
end

-- The next message in the receive buffer; the buffer is posted again first.
local function receive(id, rmr)
  local wc = assert(id:get_recv_comp(TIMEOUT))
  assert(wc.status == "success", "receive completion: " .. wc.status)
  assert(wc.byte_len == INFO, "rping messages are 16 bytes, got " .. wc.byte_len)
  local msg = rmr:read(0, INFO)
  assert(id:post_recv(0, rmr))
  return unbe(msg, 1, 8), unbe(msg, 9, 4), unbe(msg, 13, 4)
end

local function send(id, smr, msg)
  smr:write(0, msg)
  assert(id:post_send(1, smr, 0, INFO))
  wait_send(id)
end

local function text(mr, len)
  local s = mr:read(0, len)
  local nul = s:find("\0", 1, true)
  return nul and s:sub(1, nul - 1) or s
end

-- Both sides end alike: the disconnect of one, then the other's.
local function finish(ch, id, initiator)
  if initiator then assert(id:disconnect()) end
  assert(cm.expect(ch, "disconnected", TIMEOUT))
  if not initiator then assert(id:disconnect()) end
  say("done")
end

local function server()
  local ch = assert(cm.event_channel())
  local listen = assert(ch:create_id{ps = "tcp"})
  assert(listen:bind_addr(addr .. ":" .. port))
  assert(listen:listen(1))
  say("ready")
  local id = assert(cm.expect(ch, "connect_request", TIMEOUT)).id
  assert(id:create_qp{cap = CAP})
  local rmr, smr = assert(id:reg_msgs(INFO)), assert(id:reg_msgs(INFO))
  local buf = assert(id.pd:reg_mr(65536, {"local_write", "remote_read", "remote_write"}))
  assert(id:post_recv(0, rmr))
  assert(id:accept{responder_resources = 1, initiator_depth = 1})
  assert(cm.expect(ch, "established", TIMEOUT))
  for _ = 1, count do
    local raddr, rkey, len = receive(id, rmr) -- the client's source
    assert(len <= buf.length, "ping too large")
    assert(id:post_read(2, buf, 0, len, nil, raddr, rkey))
    wait_send(id)
    say("server ping data: " .. text(buf, len))
    send(id, smr, info(buf, len)) -- go ahead
    raddr, rkey, len = receive(id, rmr) -- the client's sink
    assert(id:post_write(3, buf, 0, len, nil, raddr, rkey))
    wait_send(id)
    send(id, smr, info(buf, len)) -- go ahead
  end
  finish(ch, id, false)
  buf:close(); rmr:close(); smr:close()
  id:close(); listen:close(); ch:close()
end

-- rping's ping text: "rdma-ping-N: " and then letters, NUL-terminated.
local function ping_text(n)
  local t = {("rdma-ping-%d: "):format(n)}
  local len = #t[1]
  for i = 0, size - len - 2 do t[#t + 1] = string.char(65 + (n + i) % 26) end
  return table.concat(t) .. "\0"
end

-- Connects with the id's QP and buffers made; rping -s may not listen yet
-- (rejected): tries again.
local function connect(ch)
  for _ = 1, 50 do
    local id = assert(ch:create_id{ps = "tcp"})
    assert(id:resolve_addr(nil, addr .. ":" .. port, 2000))
    assert(cm.expect(ch, "addr_resolved", TIMEOUT))
    assert(id:resolve_route(2000))
    assert(cm.expect(ch, "route_resolved", TIMEOUT))
    assert(id:create_qp{cap = CAP})
    local rmr = assert(id:reg_msgs(INFO))
    assert(id:post_recv(0, rmr))
    assert(id:connect{responder_resources = 1, initiator_depth = 1, retry_count = 7})
    local ev = assert(ch:get_event(TIMEOUT))
    if ev.event == "established" then return id, rmr end
    assert(ev.event == "rejected", "connect: " .. ev.event)
    rmr:close(); id:close()
    os.execute("sleep 0.2")
  end
  error("rping_peer: the server never accepted")
end

local function client()
  local ch = assert(cm.event_channel())
  local id, rmr = connect(ch)
  local smr = assert(id:reg_msgs(INFO))
  local src = assert(id.pd:reg_mr(size, {"local_write", "remote_read"}))
  local sink = assert(id.pd:reg_mr(size, {"local_write", "remote_write"}))
  say("ready")
  for n = 0, count - 1 do
    local ping = ping_text(n)
    src:write(0, ping)
    sink:write(0, string.rep("\0", size))
    send(id, smr, info(src, size))
    receive(id, rmr) -- the server has read it
    send(id, smr, info(sink, size))
    receive(id, rmr) -- the server has written it back
    assert(sink:read(0, size) == ping, "data mismatch in ping " .. n)
    say("ping data: " .. text(sink, size))
  end
  finish(ch, id, true)
  src:close(); sink:close(); rmr:close(); smr:close()
  id:close(); ch:close()
end

assert(role == "server" or role == "client", "usage: rping_peer.lua server|client ADDR PORT COUNT [SIZE]")
assert(count and count > 0, "COUNT expected")
if role == "server" then server() else client() end
