--- lua-ibverbs: RDMA verbs for Lua.
--
--   local ibv = require "ibverbs"
--   local ctx = assert(ibv.open("rxe0"))
--   ...
--   qp:to_init{port_num = 1, qp_access_flags = {"remote_write"}}
--   qp:to_rtr{qpn = remote.qpn, psn = remote.psn, lid = remote.lid, gid = remote.gid,
--             sgid_index = 1}
--   qp:to_rts{psn = my_psn}
--   qp:connect(remote, opts)   -- the three steps at once
--
-- The C module ibverbs.core does the work; this file adds what reads better
-- in Lua.
local core = require "ibverbs.core"

local ibv = core

-- Its arguments, returned: a call that is not a tail call.
local function pass(...) return ... end

--- Extends the methods of a userdata type ("ibverbs.qp") with a table of
-- functions.  On verbs objects each one first refuses a closed object, as the
-- C methods do.
function ibv.extend(typename, funcs)
  local methods = core.methods(typename)
  local is_closed = methods.is_closed
  for k, f in pairs(funcs) do
    if is_closed then
      methods[k] = function(self, ...)
        if type(self) == "userdata" and is_closed(self) then
          error(k .. ": attempt to use a closed " .. typename, 2)
        end
        -- not a tail call: an error the core raises inside f is named after
        -- this method as the script called it
        return pass(f(self, ...))
      end
    else
      methods[k] = f
    end
  end
end

local function check_opts(opts, allowed, what)
  opts = opts or {}
  for k in pairs(opts) do
    if not allowed[k] then error(what .. ": unknown option '" .. tostring(k) .. "'", 3) end
  end
  return opts
end

local init_opts = { port_num = true, pkey_index = true, qp_access_flags = true, qkey = true }
local rtr_opts = {
  qpn = true, psn = true, lid = true, gid = true, sgid_index = true, port_num = true, path_mtu = true,
  sl = true, max_dest_rd_atomic = true, min_rnr_timer = true, hop_limit = true, traffic_class = true,
  flow_label = true,
}
local rts_opts = { psn = true, timeout = true, retry_cnt = true, rnr_retry = true, max_rd_atomic = true }

local DEFAULT_QKEY = 0x11111111

--- RESET -> INIT.  Defaults: port 1, pkey index 0, no remote access (RC/UC), qkey 0x11111111 (UD).
local function to_init(qp, opts)
  opts = check_opts(opts, init_opts, "to_init")
  local attr = { qp_state = "init", pkey_index = opts.pkey_index or 0, port_num = opts.port_num or 1 }
  if qp.qp_type == "ud" or qp.qp_type == "raw_packet" then
    if qp.qp_type == "ud" then attr.qkey = opts.qkey or DEFAULT_QKEY end
    if qp.qp_type == "raw_packet" then attr.pkey_index = nil end
  else
    attr.qp_access_flags = opts.qp_access_flags or 0
  end
  return qp:modify(attr)
end

--- INIT -> RTR, given the remote side (qpn, psn, lid and/or gid).
local function to_rtr(qp, opts)
  opts = check_opts(opts, rtr_opts, "to_rtr")
  local attr = { qp_state = "rtr" }
  if qp.qp_type ~= "ud" and qp.qp_type ~= "raw_packet" then
    assert(opts.qpn, "to_rtr: the remote 'qpn' is required")
    attr.path_mtu = opts.path_mtu or 1024
    attr.dest_qp_num = opts.qpn
    attr.rq_psn = opts.psn or 0
    local ah = { dlid = opts.lid or 0, sl = opts.sl or 0, port_num = opts.port_num or 1 }
    if opts.gid and opts.gid ~= "::" then
      ah.grh = { dgid = opts.gid, sgid_index = opts.sgid_index or 0, hop_limit = opts.hop_limit or 1,
                 traffic_class = opts.traffic_class, flow_label = opts.flow_label }
    end
    attr.ah_attr = ah
    if qp.qp_type == "rc" or qp.qp_type == "xrc_send" or qp.qp_type == "xrc_recv" then
      attr.max_dest_rd_atomic = opts.max_dest_rd_atomic or 1
      attr.min_rnr_timer = opts.min_rnr_timer or 12
    end
  end
  return qp:modify(attr)
end

--- RTR -> RTS.  Defaults: sq_psn 0; RC: timeout 14, retry 7, rnr_retry 7, max_rd_atomic 1.
local function to_rts(qp, opts)
  opts = check_opts(opts, rts_opts, "to_rts")
  local attr = { qp_state = "rts", sq_psn = opts.psn or 0 }
  if qp.qp_type == "rc" or qp.qp_type == "xrc_send" then
    attr.timeout = opts.timeout or 14
    attr.retry_cnt = opts.retry_cnt or 7
    attr.rnr_retry = opts.rnr_retry or 7
    attr.max_rd_atomic = opts.max_rd_atomic or 1
  end
  return qp:modify(attr)
end

--- RESET -> INIT -> RTR -> RTS.  remote: {qpn=, psn=, lid=, gid=}; opts: the
-- options of the three steps (port_num, qp_access_flags, sgid_index, psn = own psn, ...).
local function connect(qp, remote, opts)
  opts = opts or {}
  local init, rtr, rts = {}, {}, {}
  for k, v in pairs(opts) do
    if init_opts[k] then init[k] = v end
    if rtr_opts[k] and k ~= "psn" then rtr[k] = v end
    if rts_opts[k] then rts[k] = v end
    if not (init_opts[k] or rtr_opts[k] or rts_opts[k]) then
      error("connect: unknown option '" .. tostring(k) .. "'", 2)
    end
  end
  for k, v in pairs(remote or {}) do rtr[k] = v end
  local ok, msg, errno = to_init(qp, init)
  if not ok then return nil, msg, errno end
  ok, msg, errno = to_rtr(qp, rtr)
  if not ok then return nil, msg, errno end
  return to_rts(qp, rts)
end

ibv.extend("ibverbs.qp", { to_init = to_init, to_rtr = to_rtr, to_rts = to_rts, connect = connect })

require("ibverbs.xrc").install(ibv) -- the legacy OFED 1.x XRC calls

return ibv
