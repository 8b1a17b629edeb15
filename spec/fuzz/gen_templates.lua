--- The fuzzer's generator, the templates (spec/fuzz/gen.lua and
-- gen_lines.lua require it): per method ("ibverbs.qp.post_send") and module
-- function ("ibv.transfer"), a function of the generator that returns the
-- argument expressions of one call; the measurement kernels' templates,
-- ibv.kernels' and ibv.batch's (G:batch_steps, which also writes the
-- scenario batch_run's steps); and the methods that block.
--
--   local tpl = require "fuzz.gen_templates"
--   tpl.templates["ibverbs.cq.poll"](g)  -- {"O[12]"}: the arguments after self
--   tpl.blocking.get_event               -- true: never called outside its template
--
-- G:batch_steps joins a step's arguments with G:arglist (gen_lines.lua);
-- gen.lua loads every part before a generator runs.
local values = require "fuzz.gen_values"
require "fuzz.gen_structs" -- G:qp_init, G:qp_attr, G:send_wr, ... the templates call
local G = values.G
local OPCODES, QP_TYPES = values.OPCODES, values.QP_TYPES
local ACCESS, SEND_FLAGS = values.ACCESS, values.SEND_FLAGS

-- ------------------------------------------------------------------ templates
-- Each returns the argument expressions of one call (after self).

local T = {}
local function wc(g) return g:objx("ibverbs.wc_array") end

T["ibverbs.context.query_port"] = function(g) return { g:small(2) } end
T["ibverbs.context.query_gid"] = function(g) return { g:small(2), g:small(3) } end
T["ibverbs.context.query_gid_ex"] = T["ibverbs.context.query_gid"]
T["ibverbs.context.query_pkey"] = T["ibverbs.context.query_gid"]
T["ibverbs.context.query_gid_table"] = function(g) return { g:size() } end
T["ibverbs.context.get_async_event"] = function(g) return { g:secs() } end
T["ibverbs.context.create_cq"] = function(g)
  if g.r.chance(0.4) then return { g:size() } end
  return { g:maybe_evil(g:tbl({ { "cqe", g:size() }, { "channel", g:opt(0.3, G.objx, "ibverbs.comp_channel") },
    { "comp_vector", g:opt(0.2, G.num) }, { "wc_flags", g:opt(0.4, G.flags, { "byte_len", "imm", "qp_num",
      "src_qp", "slid", "sl", "completion_timestamp", "bogus" }) }, { "flags", g:opt(0.1, G.num) } })) }
end
T["ibverbs.context.create_cq_ex"] = T["ibverbs.context.create_cq"]
T["ibverbs.context.create_qp_ex"] = function(g) return { g:qp_init(true) } end
T["ibverbs.context.create_srq_ex"] = function(g) return { g:srq_attr(true) } end
T["ibverbs.context.open_xrcd"] = function(g)
  return { g:tbl({ { "fd", g.r.pick({ "-1", "0", "io.stdout", "99999" }) }, { "oflags", g:num() } }) }
end
T["ibverbs.context.open_qp"] = function(g)
  return { g:tbl({ { "qp_num", g:num() }, { "qp_type", g:enum(QP_TYPES) }, { "xrcd", g:objx("ibverbs.xrcd") } }) }
end
T["ibverbs.context.init_ah_from_wc"] = function(g) return { g:small(2), wc(g), g:opt(0.5, G.str) } end
T["ibverbs.context.open_xrc_domain"] = function(g) return { g.r.pick({ "-1", "io.stdout", "3" }), g:num() } end
T["ibverbs.pd.reg_mr"] = function(g)
  local r = g.r
  local first = r.chance(0.5) and g:size() or g:objx("ibverbs.buffer")
  return { first, g:flags(ACCESS), g:opt(0.3, G.small, 4096), g:opt(0.3, G.small, 4096) }
end
T["ibverbs.pd.alloc_mw"] = function(g) return { g.r.pick({ "1", "2", '"type_2"', '"type_1"', "3", "0/0" }) } end
T["ibverbs.pd.create_ah"] = function(g) return { g:ah_attr() } end
T["ibverbs.pd.create_ah_from_wc"] = function(g)
  return { wc(g), g:small(2), g:opt(0.5, G.str), g:opt(0.5, G.small, 2) }
end
T["ibverbs.pd.create_qp"] = function(g) return { g:qp_init(false) } end
T["ibverbs.pd.create_srq"] = function(g) return { g:srq_attr(false) } end
T["ibverbs.pd.create_xrc_srq"] = function(g)
  return { g:objx("ibverbs.xrc_domain"), g:objx("ibverbs.cq"), g:srq_attr(false) }
end
T["ibverbs.mr.read"] = function(g) return { g:num(), g:opt(0.8, G.num) } end
T["ibverbs.mr.write"] = function(g) return { g:num(), g:str() } end
T["ibverbs.mr.u64"] = function(g) return { g:num(), g:opt(0.5, G.num) } end
T["ibverbs.mr.rereg"] = function(g)
  return { g:maybe_evil(g:tbl({ { "access", g:opt(0.6, G.flags, ACCESS) },
                                { "pd", g:opt(0.5, G.objx, "ibverbs.pd") } })) }
end
T["ibverbs.buffer.read"] = T["ibverbs.mr.read"]
T["ibverbs.buffer.write"] = T["ibverbs.mr.write"]
T["ibverbs.buffer.u64"] = T["ibverbs.mr.u64"]
T["ibverbs.mw.bind"] = function(g)
  local qp = g:objx("ibverbs.qp")
  local bi = g:tbl({ { "mr", g:objx("ibverbs.mr") }, { "addr", g:opt(0.3, G.num) },
    { "length", g:opt(0.6, G.small, 64) },
    { "mw_access_flags", g:flags(ACCESS) } })
  return { qp, g:maybe_evil(bi, qp), g:opt(0.5, function()
    return g:maybe_evil(g:tbl({ { "wr_id", g:num() }, { "send_flags", g:flags(SEND_FLAGS) } }), qp)
  end) }
end
T["ibverbs.comp_channel.get_event"] = function(g) return { g:secs() } end
T["ibverbs.cq.poll"] = function(g) return { g.r.chance(0.6) and wc(g) or g:size() } end
T["ibverbs.cq.req_notify"] = function(g) return { g:opt(0.5, G.any, 2) } end
T["ibverbs.cq.ack_events"] = function(g) return { g:opt(0.7, G.num) } end
T["ibverbs.cq.resize"] = function(g) return { g:size() } end
T["ibverbs.cq.wait"] = function(g) return { wc(g), g:small(4), g:secs() } end
for _, m in ipairs({ "byte_len", "dlid_path_bits", "imm_data", "invalidated_rkey", "opcode", "pkey_index",
                     "qp_num", "sl", "slid", "src_qp", "status", "vendor_err", "wc_flags", "wr_id" }) do
  T["ibverbs.wc_array." .. m] = function(g) return { g:small(20) } end
end
T["ibverbs.wc_array.get"] = function(g) return { g:small(20), g:opt(0.3, G.any, 2) } end
local function post_send(g) return { g:wrs(true, "ibverbs.send_wrs") } end
local function post_recv(g) return { g:wrs(false, "ibverbs.recv_wrs") } end
T["ibverbs.qp.post_send"] = post_send
T["ibverbs.qp.wr_post"] = post_send
T["ibverbs.qp.post_recv"] = post_recv
T["ibverbs.srq.post_recv"] = post_recv
T["ibverbs.qp.modify"] = function(g) return { g:qp_attr() } end
T["ibverbs.qp.query"] = function(g) return { g:opt(0.3, G.any, 2) } end
T["ibverbs.qp.connect"] = function(g)
  return { g:maybe_evil(g:tbl({ { "qpn", g:small(64) },
                                { "gid", g.r.chance(0.7) and '"::ffff:192.0.2.1"' or g:str() } })),
           g:maybe_evil(g:tbl({ { "sgid_index", g:small(2) }, { "qp_access_flags", g:opt(0.5, G.flags, ACCESS) } })) }
end
T["ibverbs.qp.to_init"] = function(g) return { g:opt(0.7, G.tbl, { { "port_num", g:small(2) },
  { "qp_access_flags", g:opt(0.5, G.flags, ACCESS) }, { "qkey", g:opt(0.2, G.num) } }) } end
T["ibverbs.qp.to_rtr"] = function(g) return { g:opt(0.7, G.tbl, { { "qpn", g:small(64) },
  { "gid", g:opt(0.7, function() return '"::ffff:192.0.2.1"' end) }, { "sgid_index", g:small(2) } }) } end
T["ibverbs.qp.to_rts"] = function(g)
  return { g:opt(0.7, G.tbl, { { "psn", g:num() }, { "timeout", g:opt(0.3, G.num) } }) }
end
T["ibverbs.srq.modify"] = function(g)
  return { g:maybe_evil(g:tbl({ { "max_wr", g:opt(0.5, G.num) }, { "srq_limit", g:opt(0.5, G.num) } })) }
end
T["ibverbs.srq.query"] = function(g) return { g:opt(0.3, G.any, 2) } end
local function list_set(g, send)
  return { g:small(5), send and g:send_wr() or g:recv_wr() }
end
local function list_fill(g, send)
  local wr = send and g:send_wr() or g:recv_wr()
  if g.r.chance(0.6) then -- with a stride
    wr = wr:gsub("}$", (wr == "{}" and "" or ", ") .. "stride = " .. g:num() .. "}", 1)
  end
  return { wr }
end
T["ibverbs.send_wrs.set"] = function(g) return list_set(g, true) end
T["ibverbs.recv_wrs.set"] = function(g) return list_set(g, false) end
T["ibverbs.send_wrs.fill"] = function(g) return list_fill(g, true) end
T["ibverbs.recv_wrs.fill"] = function(g) return list_fill(g, false) end
T["ibverbs.send_wrs.wr_id"] = function(g) return { g:small(5), g:opt(0.5, G.num) } end
T["ibverbs.recv_wrs.wr_id"] = T["ibverbs.send_wrs.wr_id"]
T["ibverbs.send_wrs.length"] = T["ibverbs.send_wrs.wr_id"]
T["ibverbs.recv_wrs.length"] = T["ibverbs.send_wrs.wr_id"]
T["ibverbs.cm_channel.get_event"] = function(g) return { g:secs() } end
T["ibverbs.cm_channel.create_id"] = function(g)
  return { g:opt(0.8, G.tbl, { { "ps", g:enum({ "tcp", "udp", "ib", "ipoib", "rc", "ud", "bogus" }) } }) }
end
T["ibverbs.cm_id.bind_addr"] = function(g) return { g:addr() } end
T["ibverbs.cm_id.resolve_addr"] = function(g)
  return { g.r.chance(0.7) and "nil" or g:addr(), g:addr(), g:millis() }
end
T["ibverbs.cm_id.resolve_route"] = function(g) return { g:millis() } end
T["ibverbs.cm_id.listen"] = function(g) return { g:opt(0.5, G.num) } end
T["ibverbs.cm_id.get_request"] = function(g) return { g:secs() } end
-- the synchronous calls wait 30 s by default: the fuzzer gives short timeouts
T["ibverbs.cm_id.connect"] = function(g) return { g:opt(0.8, G.conn_param), g:secs() } end
T["ibverbs.cm_id.accept"] = T["ibverbs.cm_id.connect"]
T["ibverbs.cm_id.disconnect"] = function(g) return { g:secs() } end
T["ibverbs.cm_id.reject"] = function(g) return { g:opt(0.5, G.str) } end
T["ibverbs.cm_id.migrate_id"] = function(g) return { g:opt(0.7, G.objx, "ibverbs.cm_channel") } end
T["ibverbs.cm_id.set_option"] = function(g)
  return { g:enum({ "tos", "reuseaddr", "afonly", "ack_timeout", "ib_path", "bogus" }), g:num() }
end
T["ibverbs.cm_id.join_multicast"] = function(g)
  return { g.r.chance(0.5) and '"239.1.1.1"' or g:str(), g:opt(0.3, G.enum, { "fullmember", "sendonly_fullmember" }),
           g:secs() }
end
T["ibverbs.cm_id.leave_multicast"] = function(g) return { g.r.chance(0.5) and '"239.1.1.1"' or g:str() } end
T["ibverbs.cm_id.create_qp"] = function(g)
  local r = g.r
  local f = {}
  if r.chance(0.3) then f[#f + 1] = { "qp_type", g:enum(QP_TYPES) } end
  if r.chance(0.3) then f[#f + 1] = { "send_cq", g:objx("ibverbs.cq") } end
  if r.chance(0.3) then f[#f + 1] = { "recv_cq", g:objx("ibverbs.cq") } end
  if r.chance(0.7) then f[#f + 1] = { "cap", g:cap() } end
  if r.chance(0.2) then f[#f + 1] = { "pd", g:objx("ibverbs.pd") } end
  if r.chance(0.1) then f[#f + 1] = { "srq", g:objx("ibverbs.srq") } end
  return { g:maybe_evil(g:tbl(f)) }
end
T["ibverbs.cm_id.create_qp_ex"] = T["ibverbs.cm_id.create_qp"]
T["ibverbs.cm_id.create_srq"] = function(g) return { g:srq_attr(false) } end
T["ibverbs.cm_id.create_srq_ex"] = function(g) return { g:srq_attr(false) } end
local function cm_post(g, n)
  local args = { g:num(), g:objx("ibverbs.mr"), g:opt(0.6, G.small, 64), g:opt(0.6, G.small, 64) }
  if n >= 5 then args[5] = g:flags(SEND_FLAGS) end
  if n >= 7 then args[6], args[7] = g:num(), g:num() end
  return args
end
T["ibverbs.cm_id.post_recv"] = function(g) return cm_post(g, 4) end
T["ibverbs.cm_id.post_send"] = function(g) return cm_post(g, 5) end
T["ibverbs.cm_id.post_read"] = function(g) return cm_post(g, 7) end
T["ibverbs.cm_id.post_write"] = function(g) return cm_post(g, 7) end
T["ibverbs.cm_id.post_ud_send"] = function(g)
  local a = cm_post(g, 5)
  a[6], a[7] = g:objx("ibverbs.ah"), g:small(0xffffff)
  return a
end
T["ibverbs.cm_id.get_send_comp"] = function(g) return { g:secs() } end
T["ibverbs.cm_id.get_recv_comp"] = function(g) return { g:secs() } end
T["ibverbs.cm_id.reg_msgs"] = function(g) return { g.r.chance(0.5) and g:size() or g:objx("ibverbs.buffer"),
  g:opt(0.3, G.small, 64), g:opt(0.3, G.small, 64) } end
T["ibverbs.cm_id.reg_read"] = T["ibverbs.cm_id.reg_msgs"]
T["ibverbs.cm_id.reg_write"] = T["ibverbs.cm_id.reg_msgs"]
T["ibverbs.cm_id.dereg_mr"] = function(g) return { g:objx("ibverbs.mr") } end
-- the verbs objects beyond the basic ones (most fail with EOPNOTSUPP on rxe)
T["ibverbs.pd.reg_mr_iova"] = function(g)
  local r = g.r
  return { g:num(), r.chance(0.5) and g:size() or g:objx("ibverbs.buffer"), g:flags(ACCESS),
           g:opt(0.3, G.num), g:opt(0.3, G.num) }
end
T["ibverbs.pd.reg_dmabuf_mr"] = function(g)
  return { g:maybe_evil(g:tbl({ { "fd", g:opt(0.8, G.num) }, { "length", g:opt(0.8, G.size) },
                                { "offset", g:opt(0.3, G.num) }, { "iova", g:opt(0.3, G.num) },
                                { "access", g:opt(0.5, G.flags, ACCESS) } })) }
end
T["ibverbs.pd.advise_mr"] = function(g)
  return { g:maybe_evil(g:tbl({ { "advice", g:opt(0.7, G.enum, { "prefetch", "prefetch_write", "bogus" }) },
    { "flags", g:opt(0.3, G.flags, { "flush", "bogus" }) },
    { "sge", g:opt(0.7, G.tbl, { { "mr", g:objx("ibverbs.mr") }, { "length", g:opt(0.5, G.num) } }) } })) }
end
T["ibverbs.pd.reg_dm_mr"] = function(g)
  return { g:objx("ibverbs.dm"), g:num(), g:size(), g:opt(0.5, G.flags, ACCESS) }
end
T["ibverbs.context.alloc_dm"] = function(g)
  return { g.r.chance(0.5) and g:size() or g:tbl({ { "length", g:size() }, { "log_align_req", g:opt(0.5, G.num) } }) }
end
T["ibverbs.dm.memcpy_to"] = function(g) return { g:num(), g:str() } end
T["ibverbs.dm.memcpy_from"] = function(g) return { g:num(), g:num() } end
T["ibverbs.context.alloc_parent_domain"] = function(g)
  return { g:maybe_evil(g:tbl({ { "pd", g:opt(0.8, G.objx, "ibverbs.pd") },
                                { "td", g:opt(0.4, G.objx, "ibverbs.td") } })) }
end
T["ibverbs.context.create_wq"] = function(g)
  return { g:maybe_evil(g:tbl({ { "pd", g:opt(0.8, G.objx, "ibverbs.pd") }, { "cq", g:opt(0.8, G.objx, "ibverbs.cq") },
    { "max_wr", g:opt(0.5, G.size) }, { "max_sge", g:opt(0.5, G.size) },
    { "create_flags", g:opt(0.3, G.flags, { "cvlan_stripping", "scatter_fcs", "bogus" }) } })) }
end
T["ibverbs.wq.modify"] = function(g)
  return { g:maybe_evil(g:tbl({ { "wq_state", g:opt(0.6, G.enum, { "reset", "rdy", "err", "bogus" }) },
                                { "flags", g:opt(0.3, G.num) } })) }
end
T["ibverbs.wq.post_recv"] = post_recv
T["ibverbs.context.create_rwq_ind_table"] = function(g)
  local wqs = { { "[1]", g:objx("ibverbs.wq") }, { "[2]", g:objx("ibverbs.wq") } }
  return { g:maybe_evil(g:tbl({ { "ind_tbl", g:opt(0.8, G.tbl, wqs) },
                                { "log_ind_tbl_size", g:opt(0.4, G.num) } })) }
end
T["ibverbs.qp.create_flow"] = function(g)
  local types = { "eth", "ipv4", "ipv6", "tcp", "udp", "action_count", "action_tag", "bogus" }
  local spec = g:tbl({ { "type", g:enum(types) },
    { "val", g:opt(0.6, G.tbl, { { "dst_mac", g:opt(0.5, G.str) }, { "dst_ip", g:opt(0.5, G.num) },
                                 { "dst_port", g:opt(0.5, G.num) } }) },
    { "counters", g:opt(0.3, G.objx, "ibverbs.counters") }, { "inner", g:opt(0.2, G.any, 2) } })
  return { g:maybe_evil(g:tbl({ { "specs", "{" .. spec .. "}" }, { "port", g:opt(0.3, G.num) },
                                { "type", g:opt(0.3, G.enum, { "normal", "sniffer", "bogus" }) } })) }
end
T["ibverbs.counters.attach_point_flow"] = function(g)
  return { g:tbl({ { "counter_desc", g:enum({ "packets", "bytes", "bogus" }) }, { "index", g:num() } }),
           g:opt(0.3, G.objx, "ibverbs.flow") }
end
T["ibverbs.counters.read"] = function(g) return { g:size(), g:opt(0.3, G.flags, { "prefer_cached" }) } end
T["ibverbs.cq.modify"] = function(g)
  return { g:maybe_evil(g:tbl({ { "cq_count", g:opt(0.7, G.num) }, { "cq_period", g:opt(0.7, G.num) } })) }
end
T["ibverbs.cq.poll_ex"] = function(g) return { g:opt(0.7, G.size) } end
T["ibverbs.qp.set_ece"] = function(g)
  return { g:maybe_evil(g:tbl({ { "vendor_id", g:opt(0.6, G.num) }, { "options", g:opt(0.6, G.num) } })) }
end
T["ibverbs.qp.modify_rate_limit"] = function(g)
  return { g:maybe_evil(g:tbl({ { "rate_limit", g:opt(0.7, G.num) }, { "typical_pkt_sz", g:opt(0.4, G.num) } })) }
end
T["ibverbs.qp.query_data_in_order"] = function(g) return { g:enum(OPCODES), g:opt(0.3, G.num) } end
T["ibverbs.srq.post_srq_ops"] = function(g)
  return { g:maybe_evil(g:tbl({ { "opcode", g:enum({ "tag_add", "tag_del", "tag_sync", "bogus" }) },
    { "sge", g:opt(0.5, G.tbl, { { "mr", g:objx("ibverbs.mr") } }) }, { "tag", g:opt(0.5, G.num) },
    { "handle", g:opt(0.3, G.num) } })) }
end
local function xrc_args(g) return { g:small(0xffffff), g:opt(0.5, G.qp_attr) } end
for _, m in ipairs({ "modify_xrc_rcv_qp", "query_xrc_rcv_qp", "reg_xrc_rcv_qp", "unreg_xrc_rcv_qp",
                     "xrc_rcv_registrations" }) do
  T["ibverbs.xrc_domain." .. m] = xrc_args
end
T["ibverbs.xrc_domain.create_xrc_rcv_qp"] = function(g) return { g:opt(0.5, G.tbl, {}) } end

-- module functions
T["ibv.buffer"] = function(g) return { g:size() } end
T["ibv.recv_wrs"] = function(g) return { g:size(), g:opt(0.5, G.size) } end
T["ibv.send_wrs"] = T["ibv.recv_wrs"]
T["ibv.wc_array"] = function(g) return { g:size() } end
T["ibv.inc_rkey"] = function(g) return { g:num() } end
T["ibv.rawptr"] = function(g) return { g:any(1) } end
T["ibv.rawmem"] = function(g) return { g:any(1) } end
T["ibv.open"] = function(g) return { g.r.pick({ '"rxe0"', "1", "0", "-1", '"nope"', "2^53", "nil" }) } end
T["ibv.now"] = function() return {} end
T["ibv.devices"] = function() return {} end
T["ibv.transfer"] = function(g)
  local r = g.r
  local f = {}
  if r.chance(0.8) then
    f[#f + 1] = { "send_qp", g:objx("ibverbs.qp") }
    f[#f + 1] = { "send_cq", g:objx("ibverbs.cq") }
    f[#f + 1] = { "send_wrs", g:objx("ibverbs.send_wrs") }
  end
  if r.chance(0.6) then
    f[#f + 1] = { "recv", r.chance(0.8) and g:objx("ibverbs.qp") or g:objx("ibverbs.srq") }
    f[#f + 1] = { "recv_cq", g:objx("ibverbs.cq") }
    f[#f + 1] = { "recv_wrs", g:objx("ibverbs.recv_wrs") }
  end
  f[#f + 1] = { "count", r.pick({ "1", "4", "100", "1e6", "-1", "0/0", "2^62" }) }
  f[#f + 1] = { "window", g:opt(0.3, G.num) }
  f[#f + 1] = { "timeout", g:secs() }
  return { g:maybe_evil(g:tbl(f, { timeout = true }), nil, 0.3) }
end
-- The measurement kernels (lat.c, bw.c, kernels.c): the objects they take, mostly of the
-- right kinds, a count, and always a short time limit.
local KERNEL_FIELDS = {
  ["ibv.lat_send"] = { "send", "recv", "samples", "initiator" },
  ["ibv.lat_write"] = { "send", "mrs", "samples", "initiator" },
  ["ibv.lat_rtt"] = { "send", "samples" },
  ["ibv.bw"] = { "send?", "recv?", "window" },
}
-- The fields of one kernel's table (g:tbl's list).
local function kernel_fields(g, name)
  local r = g.r
  local f = { { "qp", g:objx("ibverbs.qp") } }
  for _, part in ipairs(KERNEL_FIELDS[name]) do
    local side, optional = part:match("^(%a+)(%??)$")
    if optional == "" or r.chance(0.7) then
      if side == "send" then
        f[#f + 1] = { "send_cq", g:objx("ibverbs.cq") }
        f[#f + 1] = { "send_wrs", g:objx("ibverbs.send_wrs") }
      elseif side == "recv" then
        f[#f + 1] = { "recv_cq", g:objx("ibverbs.cq") }
        f[#f + 1] = { "recv_wrs", g:objx("ibverbs.recv_wrs") }
        if name == "ibv.bw" and r.chance(0.3) then f[#f + 1] = { "recv_qp", g:objx("ibverbs.qp") } end
      elseif side == "mrs" then
        f[#f + 1] = { "send_mr", g:objx("ibverbs.mr") }
        f[#f + 1] = { "poll_mr", g:objx("ibverbs.mr") }
        f[#f + 1] = { "poll_offset", g:opt(0.5, G.num) }
      elseif side == "samples" then
        f[#f + 1] = { "samples", g:opt(0.6, G.objx, "ibverbs.samples") }
      elseif side == "initiator" then
        f[#f + 1] = { "initiator", r.pick({ "true", "false", "1" }) }
      else
        f[#f + 1] = { "window", g:opt(0.5, G.num) }
        f[#f + 1] = { "cq_mod", g:opt(0.5, G.num) }
      end
    end
  end
  f[#f + 1] = { "iters", r.pick({ "1", "2", "4", "100", "0", "-1", "0/0", "2^62" }) }
  f[#f + 1] = { "timeout", g:secs() }
  return f
end
local function kernel_template(name)
  return function(g)
    return { g:maybe_evil(g:tbl(kernel_fields(g, name), { timeout = true }), nil, 0.3) }
  end
end
-- ibv.kernels: one to three kernels' tables, each naming its kind (now and
-- then a wrong one), the same objects often in two of them.
T["ibv.kernels"] = function(g)
  local r = g.r
  local names = { "ibv.lat_send", "ibv.lat_write", "ibv.lat_rtt", "ibv.bw" }
  local ends = {}
  for i = 1, r.chance(0.05) and 0 or r.int(3) do
    local name = r.pick(names)
    local f = kernel_fields(g, name)
    f[#f + 1] = { "kernel", r.chance(0.9) and ('"%s"'):format(name:sub(5)) or g:any(1) }
    ends[i] = g:maybe_evil(g:tbl(f, { timeout = true }), nil, 0.1)
  end
  return { "{" .. table.concat(ends, ", ") .. "}" }
end
for name in pairs(KERNEL_FIELDS) do T[name] = kernel_template(name) end
T["ibv.samples"] = function(g)
  return { g.r.chance(0.8) and g:size() or "{1e-6, 2e-6, 0/0}" }
end
--- ibv.batch's steps: mostly sound, sometimes a wrong kind, object, list or range.
function G:batch_steps()
  local r = self.r
  local steps = {}
  for i = 1, r.chance(0.05) and 9 or r.int(4) do
    local kind = r.pick({ "post_recv", "post_send", "poll", "poll", "post_write" })
    local obj, list
    if kind == "poll" then
      obj, list = self:objx("ibverbs.cq"), self:objx("ibverbs.wc_array")
    else
      obj = self:objx(kind == "post_recv" and r.chance(0.3) and "ibverbs.srq" or "ibverbs.qp")
      list = self:objx(kind == "post_send" and "ibverbs.send_wrs" or "ibverbs.recv_wrs")
    end
    local f = { ('"%s"'):format(kind), obj, list }
    if r.chance(0.3) then f[4] = self:small(20) end
    if r.chance(0.2) then f[5] = self:small(20) end
    steps[i] = self:maybe_evil("{" .. self:arglist(f, 5) .. "}", nil, 0.05)
  end
  return "{" .. table.concat(steps, ", ") .. "}"
end
T["ibv.batch"] = function(g) return { g:batch_steps() } end
T["ibv.open_xrc_domain"] = function(g) return { g:objx("ibverbs.context"), g:any(1), g:num() } end
T["cm.event_channel"] = function() return {} end
T["cm.create_id"] = function(g)
  if g.r.chance(0.8) then return { g:objx("ibverbs.cm_channel"), T["ibverbs.cm_channel.create_id"](g)[1] } end
  return T["ibverbs.cm_channel.create_id"](g)
end
T["cm.getaddrinfo"] = function(g)
  return { g.r.chance(0.6) and '"192.0.2.1"' or g:str(), g:opt(0.7, function() return g.r.pick({ '"7471"', '"0"',
    '"x"', "7471" }) end), g:opt(0.5, G.tbl, { { "flags", g:flags({ "passive", "numerichost", "bogus" }) },
    { "port_space", g:opt(0.5, G.enum, { "tcp", "udp", "bogus" }) }, { "qp_type", g:opt(0.4, G.enum, QP_TYPES) } }) }
end
T["cm.create_ep"] = function(g)
  return { g:objx("ibverbs.cm_addrinfo"), g:opt(0.5, G.tbl, { { "pd", g:opt(0.5, G.objx, "ibverbs.pd") },
    { "qp_init_attr", g:opt(0.7, G.qp_init, false) } }) }
end
T["cm.expect"] = function(g) return { g:objx("ibverbs.cm_channel"), g:enum(), g:secs() } end

-- methods that block: never called with arguments outside their template
local BLOCKING = { get_event = true, get_async_event = true, get_request = true, get_send_comp = true,
  get_recv_comp = true, wait = true, transfer = true, expect = true, resolve_addr = true,
  lat_send = true, lat_write = true, lat_rtt = true, bw = true, kernels = true,
  resolve_route = true, connect = true, create_ep = true }

return { templates = T, blocking = BLOCKING }
