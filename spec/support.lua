--- Shared helpers for the device specs (run inside tools/rxe-vm on rxe0).
local ibv = require "ibverbs"

local support = {}

support.DEVICE = os.getenv("IBV_SPEC_DEVICE") or "rxe0"
support.PORT = 1
support.GID_INDEX = 1 -- ::ffff:192.0.2.1 (RoCE v2) on rxe0

--- Opens the spec device; fails the spec (never skips) when it is missing.
function support.open()
  local ctx, err = ibv.open(support.DEVICE)
  assert(ctx, "the device specs need " .. support.DEVICE .. " (run them with tools/rxe-vm): " .. tostring(err))
  return ctx
end

--- A loopback setup on the spec device: ctx, pd, one cq, and two QPs of
-- qp_type connected to each other (RC/UC via GID index 1; UD ready to send).
-- opts: qp_type ("rc"), cap, access (qp_access_flags), cqe, create_ex (init attr extras
-- for ctx:create_qp_ex, e.g. {send_ops_flags = {...}}).
function support.pair(opts)
  opts = opts or {}
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(opts.cqe or 256))
  local qp_type = opts.qp_type or "rc"
  local cap = opts.cap or { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 4, max_recv_sge = 4,
                            max_inline_data = 64 }
  local function make()
    if opts.create_ex then
      local attr = { pd = env.pd, qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap }
      for k, v in pairs(opts.create_ex) do attr[k] = v end
      return assert(env.ctx:create_qp_ex(attr))
    end
    return assert(env.pd:create_qp{ qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap })
  end
  env.a, env.b = make(), make()
  local gid = env.ctx:query_gid(support.PORT, support.GID_INDEX)
  local access = opts.access or { "local_write", "remote_write", "remote_read", "remote_atomic" }
  for _, p in ipairs({ { env.a, env.b }, { env.b, env.a } }) do
    assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, gid = gid },
      { sgid_index = support.GID_INDEX, qp_access_flags = access }))
  end
  env.gid = gid
  env.wcs = ibv.wc_array(64)
  return env
end

--- Polls env.cq until n completions arrive (2 s at most); returns them as tables.
function support.completions(cq, n, timeout)
  local wcs = ibv.wc_array(math.max(n, 1))
  local got = assert(cq:wait(wcs, n, timeout or 2))
  local out = {}
  for i = 1, got do out[i] = wcs:get(i) end
  return out
end

return support
