-- A wire-compatible peer of rdma-core's rdma_server / rdma_client (synchronous
-- librdmacm calls: one 16-byte send each way on a create_ep endpoint).
--   lua spec/cm/rdma_peer.lua server ADDR PORT   -- against rdma_client
--   lua spec/cm/rdma_peer.lua client ADDR PORT   -- against rdma_server
-- The client sends first, the server answers; both then disconnect.  Prints
-- "ready" once listening, "got <16 bytes as hex>" and then "done <last event>".
-- Exits non-zero on any failure.
local cm = require "ibverbs.cm"
local E = require("ibverbs").errno

local role, addr, port = arg[1], arg[2], arg[3]
local TIMEOUT = 10
local MSG = 16
local QP = {cap = {max_send_wr = 1, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1,
                   max_inline_data = MSG}, sq_sig_all = true}

local function say(s)
  io.stdout:write(s, "\n")
  io.stdout:flush()
end

local function ok_comp(wc)
  assert(wc, "no completion")
  assert(wc.status == "success", "completion: " .. wc.status)
  return wc
end

local function exchange(id, first_send, payload)
  local rmr, smr = assert(id:reg_msgs(MSG)), assert(id:reg_msgs(MSG))
  smr:write(0, payload)
  assert(id:post_recv(1, rmr))
  return rmr, smr, function()
    local function send()
      assert(id:post_send(2, smr, 0, MSG, {"signaled", "inline"}))
      ok_comp(id:get_send_comp(TIMEOUT))
    end
    if first_send then send() end
    local wc = ok_comp(id:get_recv_comp(TIMEOUT))
    assert(wc.byte_len == MSG, "16-byte message expected, got " .. wc.byte_len)
    say("got " .. rmr:read(0, MSG):gsub(".", function(c) return ("%02x"):format(c:byte()) end))
    if not first_send then send() end
  end
end

local function finish(id, rmr, smr)
  assert(id:disconnect())
  say("done " .. id.event.event)
  rmr:close(); smr:close()
  assert(id:close())
end

local function server()
  local ai = assert(cm.getaddrinfo(addr, port, {flags = {"passive"}, port_space = "tcp"}))
  local listen = assert(cm.create_ep(ai, {qp_init_attr = QP}))
  assert(listen:listen(0))
  say("ready")
  local id = assert(listen:get_request(TIMEOUT))
  local rmr, smr, run = exchange(id, false, "lua rdma_server\0")
  assert(id:accept())
  run()
  finish(id, rmr, smr)
  assert(listen:close())
end

-- rdma_client connects at once; the server may not listen yet: retry.
local function connect()
  local ai = assert(cm.getaddrinfo(addr, port, {port_space = "tcp"}))
  for _ = 1, 50 do
    local id = assert(cm.create_ep(ai, {qp_init_attr = QP}))
    local rmr, smr, run = exchange(id, true, "lua rdma_client\0")
    local ok, msg, errno = id:connect()
    if ok then return id, rmr, smr, run end
    assert(errno == E.ECONNREFUSED or errno == E.ETIMEDOUT, msg) -- nobody listens yet
    rmr:close(); smr:close(); id:close()
    os.execute("sleep 0.2")
  end
  error("rdma_peer: the server never accepted")
end

local function client()
  local id, rmr, smr, run = connect()
  run()
  finish(id, rmr, smr)
end

assert(role == "server" or role == "client", "usage: rdma_peer.lua server|client ADDR PORT")
if role == "server" then server() else client() end
