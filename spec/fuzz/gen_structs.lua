--- The fuzzer's generator, the verbs structures (spec/fuzz/gen.lua requires
-- it, as does gen_templates.lua): G methods that write the expression of an
-- SGE, an SG list, a send or receive WR, the lists post_send / post_recv
-- take, QP caps, a QP init table, AH and QP attributes, cm connection
-- parameters, SRQ attributes and an address, mostly well formed, each table
-- field now and then dropped or made bad (G:tbl of gen_values.lua).
--
--   require "fuzz.gen_structs"    -- returns G (gen_values.lua's), these methods added
local values = require "fuzz.gen_values"
local G = values.G
local unpack = table.unpack or rawget(_G, "unpack")
local OPCODES, QP_TYPES, STATES = values.OPCODES, values.QP_TYPES, values.STATES
local ACCESS, SEND_FLAGS = values.ACCESS, values.SEND_FLAGS

-- ------------------------------------------------------------------ verbs structures

function G:sge()
  local r = self.r
  local mr = self:obj("ibverbs.mr")
  local c = r.int(6)
  local e
  if c <= 3 and mr then
    e = self:tbl({ { "mr", mr }, { "offset", self:opt(0.4, G.small, 64) }, { "length", self:opt(0.7, G.small, 64) } })
  elseif c == 4 then
    e = self:tbl({ { "addr", self:num() }, { "length", self:num() }, { "lkey", self:num() } })
  elseif c == 5 and mr then
    e = self:tbl({ { "mr", mr }, { "addr", self:num() }, { "length", self:num() } })
  else
    e = self:tbl({ { "mr", self:objx("ibverbs.mr") }, { "length", self:num() } })
  end
  return self:maybe_evil(e, nil, 0.1)
end

function G:sg_list()
  local r = self.r
  if r.chance(0.1) then return self:sge() end -- one SGE not wrapped in an array
  if r.chance(0.05) then return self:any(2) end
  local out = {}
  for _ = 1, r.int(4) - 1 do out[#out + 1] = self:sge() end
  return "{" .. table.concat(out, ", ") .. "}"
end

function G:data_fields(fields)
  local r = self.r
  local c = r.int(5)
  if c == 1 then fields[#fields + 1] = { "sge", self:sge() }
  elseif c <= 3 then fields[#fields + 1] = { "sg_list", self:sg_list() }
  elseif c == 4 then fields[#fields + 1] = { "inline", self:str() }
  end
  return fields
end

function G:send_wr(depth)
  local r = self.r
  if (depth or 0) > 3 then return "{}" end
  local op = r.chance(0.9) and self:enum(OPCODES) or self:any(3)
  local f = {
    { "wr_id", self:opt(0.5, G.num) }, { "opcode", op },
    { "send_flags", self:opt(0.5, G.flags, SEND_FLAGS) },
  }
  self:data_fields(f)
  if r.chance(0.3) then f[#f + 1] = { "imm_data", self:num() } end
  if r.chance(0.4) then
    f[#f + 1] = { "remote_addr", self:num() }
    f[#f + 1] = { "rkey", self:num() }
  end
  if r.chance(0.3) then
    f[#f + 1] = { "ah", self:objx("ibverbs.ah") }
    f[#f + 1] = { "remote_qpn", self:small(0xffffff) }
    f[#f + 1] = { "remote_qkey", self:opt(0.5, G.num) }
  end
  if r.chance(0.1) then
    f[#f + 1] = { "compare_add", self:num() }
    f[#f + 1] = { "swap", self:num() }
  end
  if r.chance(0.15) then
    f[#f + 1] = { "mw", self:objx("ibverbs.mw") }
    f[#f + 1] = { "bind_info", self:tbl({ { "mr", self:objx("ibverbs.mr") }, { "addr", self:opt(0.3, G.num) },
      { "length", self:opt(0.5, G.num) }, { "mw_access_flags", self:opt(0.6, G.flags, ACCESS) } }) }
  end
  if r.chance(0.05) then f[#f + 1] = { "remote_srqn", self:num() } end
  if r.chance(0.05) then f[#f + 1] = { "invalidate_rkey", self:num() } end
  return self:maybe_evil(self:tbl(f), nil, 0.1)
end

function G:recv_wr()
  return self:maybe_evil(self:tbl(self:data_fields({ { "wr_id", self:opt(0.5, G.num) } })), nil, 0.1)
end

--- What post_send / post_recv / srq:post_recv / wr_post take.
function G:wrs(send, list_kind)
  local r = self.r
  local c = r.int(10)
  if c <= 3 then
    local l = self:obj(list_kind)
    if l then
      local out = { l }
      if r.chance(0.4) then out[2] = self:small(8) end
      if r.chance(0.3) then out[#out + 1] = self:small(8) end
      return unpack(out)
    end
  end
  local one = send and G.send_wr or G.recv_wr
  if c <= 7 then return one(self) end
  local out = {}
  for _ = 1, r.int(3) do out[#out + 1] = one(self) end
  return "{" .. table.concat(out, ", ") .. "}"
end

function G:cap()
  return self:tbl({ { "max_send_wr", self:small(16) }, { "max_recv_wr", self:small(16) },
    { "max_send_sge", self:opt(0.5, G.small, 4) }, { "max_recv_sge", self:opt(0.5, G.small, 4) },
    { "max_inline_data", self:opt(0.4, G.small, 64) } })
end

function G:qp_init(with_pd)
  local r = self.r
  local f = { { "qp_type", self:enum(QP_TYPES) } }
  if r.chance(0.85) then f[#f + 1] = { "send_cq", self:objx("ibverbs.cq") } end
  if r.chance(0.85) then f[#f + 1] = { "recv_cq", self:objx("ibverbs.cq") } end
  if r.chance(0.15) then f[#f + 1] = { "srq", self:objx("ibverbs.srq") } end
  if r.chance(0.7) then f[#f + 1] = { "cap", self:cap() } end
  if r.chance(0.2) then f[#f + 1] = { "sq_sig_all", r.pick({ "true", "false", "1" }) } end
  if with_pd or r.chance(0.05) then f[#f + 1] = { "pd", self:objx("ibverbs.pd") } end
  if with_pd and r.chance(0.5) then f[#f + 1] = { "send_ops_flags", self:flags(OPCODES) } end
  if r.chance(0.05) then f[#f + 1] = { "xrcd", self:objx("ibverbs.xrcd") } end
  if r.chance(0.05) then f[#f + 1] = { "create_flags", self:num() } end
  if r.chance(0.03) then f[#f + 1] = { "source_qpn", self:num() } end
  return self:maybe_evil(self:tbl(f))
end

function G:ah_attr()
  local grh = self:tbl({ { "dgid", self.r.chance(0.7) and '"::ffff:192.0.2.1"' or self:str() },
    { "sgid_index", self:small(2) }, { "hop_limit", self:opt(0.3, G.num) },
    { "flow_label", self:opt(0.2, G.num) }, { "traffic_class", self:opt(0.2, G.num) } })
  return self:maybe_evil(self:tbl({ { "port_num", self:small(2) }, { "dlid", self:opt(0.3, G.num) },
    { "sl", self:opt(0.2, G.num) }, { "is_global", self:opt(0.1, G.any, 2) },
    { "static_rate", self:opt(0.1, G.num) }, { "grh", self.r.chance(0.8) and grh or nil } }))
end

function G:qp_attr()
  local r = self.r
  local f = { { "qp_state", self:enum(STATES) } }
  local opts = {
    { "cur_qp_state", G.enum, STATES }, { "path_mtu", G.small, 4096 }, { "dest_qp_num", G.num },
    { "rq_psn", G.num }, { "sq_psn", G.num }, { "qkey", G.num }, { "qp_access_flags", G.flags, ACCESS },
    { "pkey_index", G.small, 2 }, { "port_num", G.small, 2 }, { "ah_attr", G.ah_attr },
    { "alt_ah_attr", G.ah_attr }, { "timeout", G.num }, { "retry_cnt", G.small, 7 },
    { "rnr_retry", G.small, 7 }, { "max_rd_atomic", G.small, 4 }, { "max_dest_rd_atomic", G.small, 4 },
    { "min_rnr_timer", G.small, 31 }, { "cap", G.cap }, { "path_mig_state", G.enum },
    { "en_sqd_async_notify", G.any, 2 },
  }
  for _, o in ipairs(opts) do
    if r.chance(0.2) then f[#f + 1] = { o[1], o[2](self, o[3]) } end
  end
  return self:maybe_evil(self:tbl(f))
end

function G:conn_param()
  return self:maybe_evil(self:tbl({ { "private_data", self:opt(0.3, G.str) },
    { "responder_resources", self:opt(0.2, G.num) }, { "initiator_depth", self:opt(0.2, G.num) },
    { "retry_count", self:opt(0.2, G.small, 7) }, { "rnr_retry_count", self:opt(0.2, G.small, 7) },
    { "qp_num", self:opt(0.5, G.num) }, { "srq", self:opt(0.1, G.any, 2) },
    { "flow_control", self:opt(0.1, G.any, 2) } }))
end

function G:srq_attr(ex)
  local f = { { "max_wr", self:small(16) }, { "max_sge", self:opt(0.5, G.small, 4) },
    { "srq_limit", self:opt(0.2, G.small, 8) } }
  if ex then
    table.insert(f, 1, { "srq_type", self:enum({ "basic", "xrc", "tm", "bogus" }) })
    f[#f + 1] = { "pd", self:objx("ibverbs.pd") }
    if self.r.chance(0.4) then f[#f + 1] = { "cq", self:objx("ibverbs.cq") } end
    if self.r.chance(0.2) then f[#f + 1] = { "xrcd", self:objx("ibverbs.xrcd") } end
    if self.r.chance(0.1) then
      f[#f + 1] = { "tm_cap", self:tbl({ { "max_num_tags", self:num() }, { "max_ops", self:num() } }) }
    end
  end
  if self.r.chance(0.1) then f = { { "attr", self:tbl(f) } } end
  return self:maybe_evil(self:tbl(f))
end

function G:addr()
  local r = self.r
  if r.chance(0.6) then return '"192.0.2.1:' .. r.pick({ "0", "7471", "1", "65535" }) .. '"' end
  return self:str()
end

return G
