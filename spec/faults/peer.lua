-- The far end of spec/faults/link_spec.lua's kill -9 cases, in its own process.
--   lua spec/faults/peer.lua verbs DIR   -- an RC QP receiving forever; address through files in DIR
--   lua spec/faults/peer.lua cm PORT     -- an rdma_cm server that accepts one client and waits
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"

local mode, where = arg[1], arg[2]

local function put(path, s)
  local f = assert(io.open(path .. ".tmp", "w")); f:write(s); f:close()
  assert(os.rename(path .. ".tmp", path))
end

local function get(path)
  for _ = 1, 600 do
    local f = io.open(path)
    if f then local s = f:read("a"); f:close(); return s end
    require("socket").sleep(0.02)
  end
  error("no " .. path)
end

if mode == "verbs" then
  local ctx = support.open()
  local pd = assert(ctx:alloc_pd())
  local cq = assert(ctx:create_cq(256))
  local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
                                  cap = { max_send_wr = 1, max_recv_wr = 128, max_send_sge = 1, max_recv_sge = 1 } })
  put(where .. "/peer", tostring(qp.qp_num))
  local remote = tonumber(get(where .. "/survivor"))
  assert(qp:connect({ qpn = remote, gid = ctx:query_gid(1, 1) },
                    { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" } }))
  local mr = assert(pd:reg_mr(128 * 64, { "local_write" }))
  local rl = ibv.recv_wrs(128)
  rl:fill{ sge = { mr = mr, length = 64 }, stride = 64 }
  assert(qp:post_recv(rl))
  print("ready"); io.stdout:flush()
  ibv.transfer{ recv = qp, recv_cq = cq, recv_wrs = rl, count = 1000000000, timeout = math.huge }
elseif mode == "cm" then
  local ch = assert(cm.event_channel())
  local listen = assert(ch:create_id{ ps = "tcp" })
  assert(listen:bind_addr("192.0.2.1:" .. where))
  assert(listen:listen(1))
  print("ready"); io.stdout:flush()
  local req = assert(cm.expect(ch, "connect_request", 30))
  assert(req.id:accept{ qp_num = 0x4321 }) -- ids without QPs: the handshake alone
  assert(cm.expect(ch, "established", 30))
  print("established"); io.stdout:flush()
  while true do ch:get_event() end
end
