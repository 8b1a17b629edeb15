--- Both ends of a ping-pong for spec/device/measure/kernels_spec.lua: a QP on the
-- spec device whose address goes to the other end over TCP (perftest's key
-- message, ibverbs.exchange), the kernel's objects, and the run.
--   lua spec/kernel_peer.lua MODE PORT ITERS   -- the responder, in a child process
--   local peer = require "kernel_peer"; local e = peer.open(mode); ...  -- the initiator
-- MODE: send (ibv.lat_send) or write (ibv.lat_write).
local ibv = require "ibverbs"
local ex = require "ibverbs.exchange"
local support = require "support"

local peer = {}

peer.SIZE = 64

--- The objects of one end: ctx, pd, mr (two halves: sent from, written to),
-- scq, rcq, qp, send list sl, receive list rl, samples s.
function peer.open(mode, iters)
  local e = { mode = mode, iters = iters }
  e.ctx = support.open()
  e.pd = assert(e.ctx:alloc_pd())
  e.mr = assert(e.pd:reg_mr(2 * peer.SIZE, { "local_write", "remote_write" }))
  e.scq, e.rcq = assert(e.ctx:create_cq(16)), assert(e.ctx:create_cq(64))
  e.qp = assert(e.pd:create_qp{ qp_type = "rc", send_cq = e.scq, recv_cq = e.rcq,
    cap = { max_send_wr = 4, max_recv_wr = 64, max_send_sge = 1, max_recv_sge = 1 } })
  e.s = ibv.samples(iters)
  return e
end

--- Connects e to the other end over conn; the receives posted before the
-- last hand shake, as perftest does.
function peer.connect(e, conn)
  local gid = e.ctx:query_gid(support.PORT, support.GID_INDEX)
  local me = { qpn = e.qp.qp_num, psn = 0, gid = gid, rkey = e.mr.rkey, vaddr = e.mr.addr + peer.SIZE }
  local rem = assert(ex.hand_shake(conn, me))
  assert(e.qp:connect({ qpn = rem.qpn, psn = 0, gid = rem.gid },
    { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write", "remote_write" } }))
  e.sl = ibv.send_wrs(1)
  if e.mode == "send" then
    e.sl:set(1, { opcode = "send", sge = { mr = e.mr, length = peer.SIZE } })
    e.rl = ibv.recv_wrs(64)
    e.rl:fill{ sge = { mr = e.mr, offset = peer.SIZE, length = peer.SIZE } }
    assert(e.qp:post_recv(e.rl, 1, math.min(64, e.iters)))
  else
    e.sl:set(1, { opcode = "rdma_write", sge = { mr = e.mr, length = peer.SIZE }, remote_addr = rem.vaddr,
                  rkey = rem.rkey })
  end
  assert(ex.hand_shake(conn, me))
  e.me = me
end

--- The kernel's table for e (initiator or not), with extra fields.
function peer.args(e, initiator, extra)
  local t = { qp = e.qp, send_cq = e.scq, send_wrs = e.sl, iters = e.iters, initiator = initiator,
              samples = e.s, timeout = 60 }
  if e.mode == "send" then
    t.recv_cq, t.recv_wrs = e.rcq, e.rl
  else
    t.send_mr, t.poll_mr, t.poll_offset = e.mr, e.mr, peer.SIZE
  end
  for k, v in pairs(extra or {}) do t[k] = v end
  return t
end

function peer.run(e, initiator, extra)
  local kernel = e.mode == "send" and ibv.lat_send or ibv.lat_write
  return kernel(peer.args(e, initiator, extra))
end

if arg and arg[0] and arg[0]:match("kernel_peer%.lua$") then
  local mode, port, iters = arg[1], tonumber(arg[2]), tonumber(arg[3])
  local e = peer.open(mode, iters)
  local conn = assert(ex.listen(port, 30))
  peer.connect(e, conn)
  local f, err = peer.run(e, false)
  print(string.format("peer %s: %s iters %s samples %s", mode, f and "ok" or tostring(err),
    f and f.iters or "-", f and f.samples or "-"))
  assert(ex.hand_shake(conn, e.me))
  conn:close()
  os.exit(f and 0 or 1)
end

return peer
