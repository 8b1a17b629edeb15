-- A synchronous rdma_cm server for the device specs: create_ep (passive) with
-- a QP template, get_request, accept, one receive, disconnect.  Prints
-- "ready", then the message and the private data of the request, then the
-- event its disconnect ended with.
--   lua spec/cm/ep_server.lua ADDR PORT
local cm = require "ibverbs.cm"

local addr, port = arg[1], arg[2]
local ai = assert(cm.getaddrinfo(addr, port, {flags = {"passive"}, port_space = "tcp"}))
local cap = {max_send_wr = 4, max_recv_wr = 4, max_send_sge = 1, max_recv_sge = 1}
local listen = assert(cm.create_ep(ai, {qp_init_attr = {cap = cap}}))
assert(listen:listen(2))
print("ready")
io.stdout:flush()
local id = assert(listen:get_request(60))
local request_data = id.event.private_data:sub(1, 2)
local mr = assert(id:reg_msgs(64))
assert(id:post_recv(7, mr))
assert(id:accept())
local wc = assert(id:get_recv_comp(60))
assert(wc.status == "success", wc.status)
print("got " .. mr:read(0, wc.byte_len) .. " " .. request_data)
io.stdout:flush()
assert(id:disconnect()) -- synchronous: returns once the peer's disconnect completes it
print("disconnect " .. id.event.event)
io.stdout:flush()
assert(id:dereg_mr(mr))
id:close()
listen:close()
