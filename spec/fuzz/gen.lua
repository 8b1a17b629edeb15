--- The fuzzer's generator (tools/fuzz.lua): each step is one or more lines of
-- Lua, `T(slot, function() return <call> end)`, run against spec/fuzz/prelude.lua.
-- Methods are discovered from the registry's "ibverbs.*" metatables, so a new
-- method is fuzzed as soon as it exists; the templates below only make the
-- arguments of known methods plausible often enough to reach deep code, and
-- any argument may still be swapped for a bad one.
local gen = {}
local unpack = table.unpack or rawget(_G, "unpack")

-- ------------------------------------------------------------------ random numbers
-- Park-Miller: the same sequence under Lua 5.4 and LuaJIT.
local function rng(seed)
  local x = math.floor(seed) % 2147483646 + 1
  local r = {}
  function r.int(n) -- 1..n
    x = (x * 16807) % 2147483647
    return x % n + 1
  end
  function r.chance(p) return r.int(1000000) <= p * 1000000 end
  function r.pick(t) return t[r.int(#t)] end
  return r
end
gen.rng = rng

-- ------------------------------------------------------------------ value pools
local NUMS = { "0", "1", "-1", "2", "3", "7", "8", "16", "64", "255", "256", "4096", "65536", "0.5", "-0.5",
  "1.5", "0/0", "1/0", "-1/0", "0xffffffff", "0x100000000", "2^31", "-2^31", "2^31-1", "2^32-1", "2^53",
  "2^63", "-2^63", "1e308", "-1e308", "0xffffff", "0x1000000", "2^10", "-0.0", "'7'", "'0x10'" }
-- sizes of things the call allocates: no valid huge value (that would only exhaust memory)
local SIZES = { "-1", "0", "1", "2", "3", "7", "8", "64", "4096", "0.5", "1.5", "0/0", "1/0", "-1/0",
  "2^41", "2^53", "2^63", "-2^63", "'64'", "0x100000000000" }
-- timeouts in seconds and in milliseconds: none long, none forever (math.huge
-- is the documented "no limit" of the blocking calls, so it is not given)
local SECONDS = { "0", "0.001", "0.01", "-1", "0/0", "-1/0", "'0'", "-0.0", "0.02" }
local MILLIS = { "1", "5", "10", "0", "-1", "0/0", "2^31", "0xffffffff", "1.5", "1/0" }
local STRS = { '""', '"x"', '"abc"', '("A"):rep(7)', '("B"):rep(65)', '("C"):rep(4097)', '"\\0\\1\\2"',
  '"abcdefgh"', '"rc"', '"ud"', '"send"', '"rts"', '"init"', '"local_write"', '"192.0.2.1"',
  '"192.0.2.1:7471"', '"192.0.2.1:0"', '"::1"', '"[::1]:99999"', '"nonsense"', '"1"', '"-1"', '"0x10"',
  '"::ffff:192.0.2.1"', '"255.255.255.255:65536"', '"fe80::1%lo"', '"239.1.1.1"' }
local ENUMS = { "rc", "uc", "ud", "raw_packet", "xrc_send", "xrc_recv", "xrc", "driver", "reset", "init",
  "rtr", "rts", "sqd", "sqe", "err", "send", "send_with_imm", "rdma_write", "rdma_write_with_imm",
  "rdma_read", "atomic_cmp_and_swp", "atomic_fetch_and_add", "local_inv", "bind_mw", "send_with_inv",
  "tso", "driver1", "signaled", "inline", "solicited", "fence", "ip_csum", "local_write", "remote_write",
  "remote_read", "remote_atomic", "mw_bind", "zero_based", "on_demand", "tcp", "udp", "ib", "ipoib",
  "basic", "tm", "type_1", "type_2", "tos", "reuseaddr", "afonly", "ack_timeout", "ib_path",
  "fullmember", "sendonly_fullmember", "byte_len", "imm", "qp_num", "passive", "numerichost", "inet",
  "inet6", "addr_resolved", "connect_request", "established", "bogus" }
local OPCODES = { "send", "send_with_imm", "rdma_write", "rdma_write_with_imm", "rdma_read",
  "atomic_cmp_and_swp", "atomic_fetch_and_add", "local_inv", "bind_mw", "send_with_inv", "tso", "bogus" }
local QP_TYPES = { "rc", "uc", "ud", "raw_packet", "xrc_send", "xrc_recv", "xrc", "bogus" }
local STATES = { "reset", "init", "rtr", "rts", "sqd", "sqe", "err", "bogus" }
local FIELDS = { "wr_id", "opcode", "sg_list", "sge", "mr", "length", "offset", "addr", "lkey", "qp_type",
  "send_cq", "recv_cq", "cap", "max_send_wr", "qp_state", "timeout", "count", "send_qp", "recv",
  "recv_wrs", "send_wrs", "ps", "pd", "cqe", "channel", "wc_flags", "srq", "inline", "stride", "max_wr",
  "ah", "mw", "bind_info", "remote_qpn", "qp_num", "private_data", "foo", "__index", "n" }
local ACCESS = { "local_write", "remote_write", "remote_read", "remote_atomic", "mw_bind", "zero_based",
  "on_demand", "bogus" }
local SEND_FLAGS = { "signaled", "inline", "solicited", "fence", "ip_csum", "bogus" }

-- ------------------------------------------------------------------ discovery

--- {typename = {method names, sorted}} from the registry's ibverbs metatables.
function gen.discover(ibv)
  local types = {}
  for name, mt in pairs(debug.getregistry()) do
    if type(name) == "string" and name:match("^ibverbs%.") and type(mt) == "table" and mt.__index then
      local methods = mt.__index
      if type(methods) == "function" then methods = ibv.methods(name) end
      local list = {}
      if type(methods) == "table" then
        for k, v in pairs(methods) do
          if type(k) == "string" and type(v) == "function" then list[#list + 1] = k end
        end
      end
      table.sort(list)
      if #list > 0 then types[name] = list end
    end
  end
  return types
end

--- The module functions: {"ibv.buffer", "cm.create_id", ...}, sorted.
function gen.functions(ibv, cm)
  local skip = { extend = true, methods = true } -- they change or expose the method tables
  local list = {}
  for k, v in pairs(ibv) do
    if type(v) == "function" and not skip[k] then list[#list + 1] = "ibv." .. k end
  end
  for k, v in pairs(cm) do
    if type(v) == "function" then list[#list + 1] = "cm." .. k end
  end
  table.sort(list)
  return list
end

--- The type name of a value, as the generator sees it.
function gen.kind(v)
  local t = type(v)
  if t == "userdata" or t == "table" then
    local mt = getmetatable(v)
    if type(mt) == "table" and type(rawget(mt, "__name")) == "string" then return mt.__name end
  end
  return t
end

-- ------------------------------------------------------------------ the generator

local G = {}
G.__index = G

--- A generator for seed; O is the live object table it reads (F.O).
function gen.new(seed, O, types, functions, opts)
  opts = opts or {}
  local g = setmetatable({ r = rng(seed), O = O, types = types, functions = functions,
                           slots = {}, by_kind = {}, next_slot = 1, jit = opts.jit,
                           attack_rate = opts.attack_rate or 18, kept = 0,
                           cm_port_next = 41000 + (seed * 131) % 8000 }, G)
  g.attack_names = gen.attack_names(opts.attacks)
  return g
end

--- Registers what slot s holds after its line ran.
function G:note(s)
  local v = self.O[s]
  if s > 0 and v ~= nil then
    self.slots[#self.slots + 1] = s
    local k = gen.kind(v)
    self.by_kind[k] = self.by_kind[k] or {}
    local list = self.by_kind[k]
    list[#list + 1] = s
  end
end

function G:slot()
  local s = self.next_slot
  self.next_slot = s + 1
  return s
end

local function is_closed(v)
  local ok, c = pcall(function() return v:is_closed() end)
  return ok and c
end

--- An expression for an object of kind k ("ibverbs.qp"), open ones preferred;
-- nil when none exists.
function G:obj(k, open_only)
  local list = self.by_kind[k]
  if not list or #list == 0 then return nil end
  local r = self.r
  for _ = 1, 4 do
    local s = list[r.int(#list)]
    if not (open_only or r.chance(0.8)) or not is_closed(self.O[s]) then return "O[" .. s .. "]", s end
  end
  local s = list[r.int(#list)]
  return "O[" .. s .. "]", s
end

--- An object of kind k, or (rarely, or when none exists) anything.
function G:objx(k)
  if self.r.chance(0.06) then return self:any(1) end
  return (self:obj(k)) or self:any(1)
end

function G:num() return self.r.pick(NUMS) end
function G:size() return self.r.pick(SIZES) end
function G:secs() return self.r.pick(SECONDS) end
function G:millis() return self.r.pick(MILLIS) end
function G:str() return self.r.pick(STRS) end
function G:enum(pool) return '"' .. self.r.pick(pool or ENUMS) .. '"' end

--- A small integer, usually valid: an index, a port, a count.
function G:small(max)
  if self.r.chance(0.7) then return tostring(self.r.int(max or 4)) end
  return self:num()
end

--- Flags: an integer or an array of names.
function G:flags(pool)
  local r = self.r
  if r.chance(0.3) then return self:num() end
  local out = {}
  for _ = 1, r.int(3) - 1 do out[#out + 1] = self:enum(pool) end
  if r.chance(0.1) then out[#out + 1] = self:any(2) end
  return "{" .. table.concat(out, ", ") .. "}"
end

function G:any(depth)
  depth = depth or 0
  local r = self.r
  local c = r.int(depth > 1 and 8 or 13)
  if c == 1 then return "nil"
  elseif c == 2 then return r.pick({ "true", "false" })
  elseif c <= 4 then return self:num()
  elseif c == 5 then return self:str()
  elseif c <= 7 then
    if #self.slots == 0 then return "nil" end
    return "O[" .. r.pick(self.slots) .. "]"
  elseif c == 8 then return self:enum()
  elseif c == 9 then return r.pick({ "function() end", "F.alien()", "io.stdout", "coroutine.create(print)",
                                      "setmetatable({}, {__index = function() error('boom') end})" })
  elseif c == 10 then return self:sge()
  elseif c == 11 then return self:send_wr(depth + 1)
  end
  local out = {}
  for _ = 1, r.int(4) - 1 do
    if r.chance(0.3) then out[#out + 1] = self:any(depth + 1)
    else out[#out + 1] = r.pick(FIELDS) .. " = " .. self:any(depth + 1) end
  end
  return "{" .. table.concat(out, ", ") .. "}"
end

--- A table constructor from {key, value} pairs; a field may be dropped,
-- replaced with something bad, or joined by an unknown one.
function G:tbl(fields, keep)
  local r, out = self.r, {}
  for _, f in ipairs(fields) do
    local k, v = f[1], f[2]
    if v ~= nil then
      if r.chance(0.06) and not (keep and keep[k]) then -- dropped
        v = nil
      elseif r.chance(0.06) then
        v = self:any(2)
      end
      if v ~= nil then out[#out + 1] = k .. " = " .. v end
    end
  end
  if r.chance(0.04) then out[#out + 1] = r.pick(FIELDS) .. " = " .. self:any(2) end
  if r.chance(0.02) then out[#out + 1] = self:any(2) end
  return "{" .. table.concat(out, ", ") .. "}"
end

--- Optional field: v (a thunk's result) with probability p, else nil.
function G:opt(p, f, ...)
  if self.r.chance(p) then return f(self, ...) end
  return nil
end

--- Wraps the table expression e with F.evil closing some of the objects it (or extra) names.
function G:evil(e, extra)
  local refs = {}
  for s in e:gmatch("O%[(%d+)%]") do refs[#refs + 1] = "O[" .. s .. "]" end
  if extra then refs[#refs + 1] = extra end
  if #refs == 0 then return e end
  local r, victims = self.r, {}
  for _ = 1, r.int(2) do victims[#victims + 1] = r.pick(refs) end
  if r.chance(0.3) then victims = refs end
  local f = r.chance(0.2) and "F.evil_always(" or "F.evil("
  return f .. e .. ", " .. table.concat(victims, ", ") .. ")"
end

function G:maybe_evil(e, extra, p)
  if e:sub(1, 1) == "{" and self.r.chance(p or 0.15) then return self:evil(e, extra) end
  return e
end

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
-- The measurement kernels (lat.c, bw.c, together.c): the objects they take, mostly of the
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
gen.templates = T

-- methods that block: never called with arguments outside their template
local BLOCKING = { get_event = true, get_async_event = true, get_request = true, get_send_comp = true,
  get_recv_comp = true, wait = true, transfer = true, expect = true, resolve_addr = true,
  lat_send = true, lat_write = true, lat_rtt = true, bw = true, kernels = true,
  resolve_route = true, connect = true, create_ep = true }

-- ------------------------------------------------------------------ lines

local function line(slot, body, pre)
  return ("T(%d, function() %sreturn %s end)"):format(slot, pre and (pre .. " ") or "", body)
end

--- Argument list text: trailing nils dropped (an absent argument and an
-- explicit nil differ for some calls, so keep a nil sometimes).
function G:arglist(args, n)
  n = n or #args
  local out = {}
  for i = 1, n do out[i] = args[i] or "nil" end
  while #out > 0 and out[#out] == "nil" and not self.r.chance(0.2) do out[#out] = nil end
  return table.concat(out, ", ")
end

--- Swaps some arguments for bad values, drops or adds some.
function G:mutate(args, n, method)
  local r = self.r
  if BLOCKING[method] then return args, n end
  for i = 1, n do
    if r.chance(0.07) then args[i] = self:any(1) end
  end
  if r.chance(0.05) and n > 0 then n = n - 1 end
  if r.chance(0.05) then
    n = n + 1
    args[n] = self:any(1)
  end
  return args, n
end

--- One call on a random object: the line and the slot its result goes to.
function G:method_call()
  local r = self.r
  local recv, rs
  for _ = 1, 8 do
    rs = r.pick(self.slots)
    recv = self.O[rs]
    if self.types[gen.kind(recv)] or gen.kind(recv) == "ibverbs.xrc_domain" then break end
    recv = nil
  end
  if recv == nil then return self:function_call() end
  local k = gen.kind(recv)
  local methods = self.types[k]
  local m
  for _ = 1, 3 do
    m = r.pick(methods)
    if m ~= "close" or r.chance(0.15) then break end
  end
  local tpl = T[k .. "." .. m]
  local args, n
  if tpl and (BLOCKING[m] or r.chance(0.85)) then
    args = tpl(self)
    n = #args
    for i in pairs(args) do if i > n then n = i end end
  elseif BLOCKING[m] then
    return self:function_call()
  else
    args, n = {}, r.int(5) - 1
    for i = 1, n do args[i] = self:any(0) end
  end
  args, n = self:mutate(args, n, m)
  local self_expr = "O[" .. rs .. "]"
  if r.chance(0.02) then self_expr = "(" .. self:any(1) .. ")" end -- a method called on the wrong thing
  for i = 1, n do
    if args[i] and r.chance(0.08) then args[i] = self:maybe_evil(args[i], "O[" .. rs .. "]", 1) end
  end
  local body = ("%s:%s(%s)"):format(self_expr, m, self:arglist(args, n))
  if r.chance(0.01) then body = ("%s.%s(%s)"):format(self_expr, m, self:arglist(args, n)) end
  local pre
  if r.chance(0.04) then pre = "F.gcbomb(O[" .. rs .. "]" .. (r.chance(0.5) and (", " .. self:any(2)) or "") .. ")" end
  local slot = self:slot()
  return line(slot, body, pre), slot
end

--- One call of a module function (ibv.*, cm.*).
function G:function_call()
  local r = self.r
  local fname = r.pick(self.functions)
  local tpl = T[fname]
  local args, n
  if tpl and (BLOCKING[fname:match("%.(.*)")] or r.chance(0.85)) then
    args = tpl(self)
    n = #args
    for i in pairs(args) do if i > n then n = i end end
  elseif BLOCKING[fname:match("%.(.*)")] then
    fname = "ibv.now"
    args, n = {}, 0
  else
    args, n = {}, r.int(4) - 1
    for i = 1, n do args[i] = self:any(0) end
  end
  args, n = self:mutate(args, n, fname:match("%.(.*)"))
  local slot = self:slot()
  local pre
  if r.chance(0.03) and #self.slots > 0 then pre = "F.gcbomb(O[" .. r.pick(self.slots) .. "])" end
  return line(slot, ("%s(%s)"):format(fname, self:arglist(args, n)), pre), slot
end

-- ------------------------------------------------------------------ the world

--- The setup lines: every object type in the states worth reaching.  Returns
-- a list of {line, slot}; p is a port base for the cm listeners.
function G:setup(p)
  local out = {}
  local function add(body, keep)
    local s = keep == false and 0 or self:slot()
    out[#out + 1] = { line(s, body), s }
    return "O[" .. s .. "]"
  end
  local W = {}
  self.world = W
  local ctx = add("F.open()")
  local pd = add(ctx .. ":alloc_pd()")
  local cq = add(ctx .. ":create_cq(64)")
  local mr = add(pd .. ":reg_mr(4096, F.ACCESS)")
  W.ctx, W.pd, W.cq, W.mr, W.port = ctx, pd, cq, mr, p
  local buf = add("ibv.buffer(4096)")
  add(pd .. ":reg_mr(" .. buf .. ", F.ACCESS, 0, 2048)")
  local a = add("F.qp(" .. ctx .. ", " .. pd .. ", " .. cq .. ", 'rc')")
  local b = add("F.qp(" .. ctx .. ", " .. pd .. ", " .. cq .. ", 'rc')")
  add("F.connect(" .. a .. ", " .. b .. ", " .. ctx .. ")", false)
  local ops = "{'send', 'send_with_imm', 'rdma_write', 'rdma_read', 'atomic_fetch_and_add', 'bind_mw'}"
  local xa = add("F.qp(" .. ctx .. ", " .. pd .. ", " .. cq .. ", 'rc', " .. ops .. ")")
  local xb = add("F.qp(" .. ctx .. ", " .. pd .. ", " .. cq .. ", 'rc', " .. ops .. ")")
  add("F.connect(" .. xa .. ", " .. xb .. ", " .. ctx .. ")", false)
  W.a, W.b, W.xa, W.xb = a, b, xa, xb
  add("F.qp(" .. ctx .. ", " .. pd .. ", " .. cq .. ", 'uc')")
  W.ud = add("F.ud(" .. pd .. ", " .. cq .. ")")
  W.ah = add("F.ah(" .. pd .. ", " .. ctx .. ")")
  local ch = add(ctx .. ":create_comp_channel()")
  add(ctx .. ":create_cq{cqe = 16, channel = " .. ch .. "}")
  add(ctx .. ":create_cq{cqe = 16, wc_flags = {'byte_len', 'qp_num'}}")
  W.wcs = add("ibv.wc_array(16)")
  add(pd .. ":create_srq{max_wr = 16, max_sge = 2}")
  add(ctx .. ":create_srq_ex{srq_type = 'basic', pd = " .. pd .. ", max_wr = 8}")
  add(pd .. ":alloc_mw(1)")
  add(pd .. ":alloc_mw(2)")
  W.sl = add("F.send_list(" .. mr .. ")")
  W.rl = add("F.recv_list(" .. mr .. ")")
  add(ctx .. ":open_xrcd{fd = -1, oflags = ibv.O_CREAT}")
  add(ctx .. ":open_xrc_domain(-1, ibv.O_CREAT)")
  local cch = add("cm.event_channel()")
  W.cch = cch
  add(cch .. ":create_id{ps = 'tcp'}")
  add(cch .. ":create_id{ps = 'udp'}")
  add("F.cm_bound(" .. cch .. ")")
  add("F.cm_listening(" .. cch .. ", " .. p .. ")")
  add("F.cm_addr_resolved(" .. cch .. ", " .. (p + 1) .. ")")
  add("F.cm_route_resolved(" .. cch .. ", " .. (p + 2) .. ")")
  add("F.cm_with_qp(" .. cch .. ", " .. (p + 3) .. ")")
  add("F.cm_ud(" .. cch .. ")")
  add("cm.create_id{ps = 'tcp'}")
  add("cm.getaddrinfo('192.0.2.1', '" .. p .. "', {flags = {'passive'}})")
  return out
end

-- ------------------------------------------------------------------ scenarios
-- Multi-step misuse that single random calls reach too rarely: prepared lists
-- tampered after set, objects closed under a call, calls out of order.

local S = {}

S.inline_length = function(g)
  local l, qp = g:obj("ibverbs.send_wrs", true), g:obj("ibverbs.qp", true)
  if not (l and qp) then return nil end
  local i = g:small(4)
  return { ("%s:set(%s, {opcode = 'send', inline = %s, send_flags = {'signaled'}})"):format(l, i, g:str()),
           ("%s:length(%s, %s)"):format(l, i, g.r.pick({ "128", "4096", "0xffffffff", "1048576", "65" })),
           ("%s:post_send(%s)"):format(qp, l) }
end
S.fill_stride = function(g)
  local l, qp = g:obj("ibverbs.send_wrs", true), g:obj("ibverbs.qp", true)
  if not (l and qp) then return nil end
  local data = g.r.chance(0.5) and ("inline = " .. g:str()) or ("sge = " .. g:sge())
  return { ("%s:fill{opcode = 'send', %s, stride = %s}"):format(l, data,
             g.r.pick({ "1073741824", "2^31-1", "-2^31", "-4096", "4096", "0xffffff" })),
           ("%s:post_send(%s)"):format(qp, l) }
end
S.mr_closed_after_set = function(g)
  local pd, qp = g:obj("ibverbs.pd", true), g:obj("ibverbs.qp", true)
  local send = g.r.chance(0.6)
  local l = g:obj(send and "ibverbs.send_wrs" or "ibverbs.recv_wrs", true)
  if not (pd and qp and l) then return nil end
  local mr = "O[" .. g.next_slot .. "]"
  local wr = send and "{opcode = 'send', sge = {mr = %s, length = 8}, send_flags = %s}"
    or "{sge = {mr = %s, length = 8}}"
  wr = wr:format(mr, g.r.pick({ "{'signaled'}", "{'signaled', 'inline'}", "{'inline'}" }))
  local post = g.r.chance(0.8) and ("%s:%s(%s)"):format(qp, send and "post_send" or "post_recv", l)
    or ("ibv.transfer{send_qp = %s, send_cq = %s, send_wrs = %s, count = 2, timeout = 0.05}"):format(
      qp, g:obj("ibverbs.cq") or "nil", l)
  return { { pd .. ":reg_mr(64, F.ACCESS)", g:slot() },
           ("%s:set(%s, %s)"):format(l, g:small(4), wr), mr .. ":close()", post }
end
S.closed_under_call = function(g)
  local qp = g:obj("ibverbs.qp", true)
  if not qp then return nil end
  local m = g.r.pick({ "post_send", "post_recv", "modify", "wr_post" })
  local arg = m == "modify" and g:qp_attr() or (m == "post_recv" and g:recv_wr() or g:send_wr())
  if arg:sub(1, 1) ~= "{" then return nil end
  local victims = qp
  for s in arg:gmatch("O%[(%d+)%]") do
    if g.r.chance(0.5) then victims = victims .. ", O[" .. s .. "]" end
  end
  local wrap = g.r.chance(0.7) and "F.evil" or "F.evil_always"
  if g.r.chance(0.2) then
    return { { ("%s:%s(%s)"):format(qp, m, arg), 0, "F.gcbomb(" .. victims .. ")" } }
  end
  return { ("%s:%s(%s(%s, %s))"):format(qp, m, wrap, arg, victims) }
end
S.route_before_addr = function(g)
  local ch = g:obj("ibverbs.cm_channel", true)
  if not ch then return nil end
  local id = "O[" .. g.next_slot .. "]"
  return { { ch .. ":create_id{ps = " .. g:enum({ "tcp", "udp" }) .. "}", g:slot() },
           id .. ":resolve_addr(nil, '192.0.2.1:7471', 100)",
           id .. ":" .. g.r.pick({ "resolve_route(100)", "connect{qp_num = 1}", "accept{qp_num = 1}", "accept()",
             "create_qp{}", "create_srq{}", "listen()", "establish()", "disconnect(0.1)" }) }
end
S.unbound_id = function(g)
  local ch = g:obj("ibverbs.cm_channel", true)
  if not ch then return nil end
  local id = "O[" .. g.next_slot .. "]"
  return { { ch .. ":create_id{ps = " .. g:enum({ "tcp", "udp" }) .. "}", g:slot() },
           id .. ":" .. g.r.pick({ "resolve_route(100)", "connect{qp_num = 1}", "accept{qp_num = 1}", "accept()",
             "create_qp{}", "create_srq{}", "establish()", "disconnect(0.1)", "get_send_comp(0)",
             "post_recv(1, " .. (g:obj("ibverbs.mr") or "nil") .. ")" }) }
end
S.cm_ud_post = function(g)
  local ch = g:obj("ibverbs.cm_channel", true)
  if not ch then return nil end
  local id = "O[" .. g.next_slot .. "]"
  return { { "F.cm_ud(" .. ch .. ")", g:slot() },
           { id .. ":reg_msgs(64)", g:slot() },
           ("%s:post_send(1, O[%d], 0, 8)"):format(id, g.next_slot - 1) }
end
S.qp_without_cqs = function(g)
  local pd, cq, ctx = g:obj("ibverbs.pd", true), g:obj("ibverbs.cq", true), g:obj("ibverbs.context", true)
  if not (pd and cq and ctx) then return nil end
  local t = g:enum({ "rc", "uc", "ud", "xrc_send", "raw_packet" })
  return { g.r.pick({
    ("%s:create_qp{qp_type = %s, recv_cq = %s}"):format(pd, t, cq),
    ("%s:create_qp{qp_type = %s, send_cq = %s}"):format(pd, t, cq),
    ("%s:create_qp{qp_type = %s}"):format(pd, t),
    ("%s:create_qp_ex{pd = %s, qp_type = %s}"):format(ctx, pd, t),
    ("%s:create_qp{qp_type = %s, send_cq = %s, srq = %s}"):format(pd, t, cq, g:obj("ibverbs.srq") or "nil"),
  }) }
end
S.transfer_evil = function(g)
  local qp, cq = g:obj("ibverbs.qp", true), g:obj("ibverbs.cq", true)
  local sl, rl = g:obj("ibverbs.send_wrs", true), g:obj("ibverbs.recv_wrs", true)
  if not (qp and cq and sl and rl) then return nil end
  local t = ("{send_qp = %s, send_cq = %s, send_wrs = %s, recv = %s, recv_cq = %s, recv_wrs = %s, "
    .. "count = 4, timeout = %s}")
    :format(qp, cq, sl, qp, cq, rl, g:secs())
  return { ("ibv.transfer(%s)"):format(g.r.chance(0.6) and ("F.evil(" .. t .. ", " .. qp .. ", " .. cq .. ")") or t) }
end

S.batch_run = function(g)
  local b = "O[" .. g.next_slot .. "]"
  local out = { { "ibv.batch(" .. g:batch_steps() .. ")", g:slot() }, b .. "()" }
  local victim = g:obj(g.r.pick({ "ibverbs.qp", "ibverbs.cq", "ibverbs.mr", "ibverbs.srq" }))
  if victim and g.r.chance(0.5) then
    out[#out + 1] = victim .. ":close()"
    out[#out + 1] = b .. "()"
  end
  if g.r.chance(0.2) then out[#out + 1] = { b .. "()", 0, "F.gcbomb(" .. b .. ")" } end
  return out
end


-- ------------------------------------------------------------------ attacks
-- The classes of a script that fights back (docs/verification.md lists
-- them): finalizers that run inside a call, weak and shifting argument
-- tables, replaced __gc, CQs shared with other QPs, FFI edits, prepared
-- lists edited while a batch holds them, whole object graphs left to the
-- collector.  Each returns steps like a scenario's; W is the world of the
-- last setup (slots of a connected RC pair a-b and a pair xa-xb on one CQ,
-- their lists, ...).

local A = {}
local KS = { "0", "0", "1", "2", "5", "10", "50", "200" }
local AFTER = { "0", "0", "0", "1", "2", "3", "5", "8" }
local HOW = { "nil", "'collect'", "'collect'", "'step'" }
local CAPT = "{max_send_wr = 4, max_recv_wr = 4, max_send_sge = 2, max_recv_sge = 2}"

function G:cm_port()
  local p = self.cm_port_next
  self.cm_port_next = p + 1
  return p
end

function G:arm(victims)
  local r = self.r
  return ("F.arm(%s, %s%s)"):format(r.pick(KS), r.pick(AFTER), victims and victims ~= "" and (", " .. victims) or "")
end

--- Finalizers that close a constructor's parent (fresh, so it can close)
-- or a call's object at an allocation inside the call.
A.finalizer_timing = function(g)
  local r, W = g.r, g.world
  local P = g:cm_port()
  local C = {
    { "local c = F.open()", "c", "c:create_comp_channel()" },
    { "local c = F.open()", "c", "c:alloc_pd()" },
    { "local c = F.open()", "c", "c:create_cq(4)" },
    { "local c = F.open()", "c", "c:create_cq_ex{cqe = 4, wc_flags = {'byte_len', 'qp_num'}}" },
    { "local c = F.open() local ch = c:create_comp_channel()", "ch, c", "c:create_cq{cqe = 4, channel = ch}" },
    { "local c = F.open()", "c", "c:open_xrcd{fd = -1, oflags = ibv.O_CREAT}" },
    { "local c = F.open()", "c", "c:query_port(1)" },
    { "local c = F.open()", "c", "c:query_gid_table(4)" },
    { "local c = F.open() local p = c:alloc_pd()", "p, c", "p:reg_mr(64, F.ACCESS)" },
    { "local c = F.open() local p = c:alloc_pd() local b = ibv.buffer(64)", "p, c", "p:reg_mr(b, F.ACCESS)" },
    { "local c = F.open() local p = c:alloc_pd()", "p, c", "p:alloc_mw(1)" },
    { "local c = F.open() local p = c:alloc_pd()", "p, c",
      "p:create_ah{port_num = 1, grh = {dgid = F.gid(c), sgid_index = F.GID_INDEX}}" },
    { "local c = F.open() local p = c:alloc_pd()", "p, c", "p:create_srq{max_wr = 4, max_sge = 1}" },
    { "local c = F.open() local p = c:alloc_pd()", "p, c", "c:create_srq_ex{srq_type = 'basic', pd = p, max_wr = 4}" },
    { "local c = F.open() local p = c:alloc_pd() local q = c:create_cq(4)", "q, p, c",
      "p:create_qp{qp_type = 'rc', send_cq = q, recv_cq = q, cap = " .. CAPT .. "}" },
    { "local c = F.open() local p = c:alloc_pd() local q = c:create_cq(4)", "q, p, c",
      "c:create_qp_ex{pd = p, qp_type = 'rc', send_cq = q, recv_cq = q, cap = " .. CAPT
        .. ", send_ops_flags = {'send', 'rdma_write'}}" },
    { "local c = F.open() local p = c:alloc_pd() local q = c:create_cq(4) local s = p:create_srq{max_wr = 4}",
      "s, q, p, c", "p:create_qp{qp_type = 'rc', send_cq = q, recv_cq = q, srq = s, cap = " .. CAPT .. "}" },
    { "local ch = cm.event_channel()", "ch", "ch:get_event(0)" },
    { "local ch = cm.event_channel()", "ch", "ch:create_id{ps = 'tcp'}" },
    { "local ch = cm.event_channel()", "ch", "cm.create_id(ch, {ps = 'udp'})" },
    { "local ch = cm.event_channel() local id = ch:create_id{ps = 'tcp'}", "id, ch",
      "id:resolve_addr(nil, F.ADDR .. ':" .. P .. "', 100)" },
    { "local ch = cm.event_channel() local id = F.cm_bound(ch)", "id, ch",
      "id:create_qp{cap = {max_send_wr = 2, max_recv_wr = 2}}" },
    { ("local lch = cm.event_channel() local l = F.cm_listening(lch, %d) local cch = cm.event_channel() "
      .. "local cid = F.cm_with_qp(cch, %d) cid:connect(nil, 0.05) F.keep(cch, cid)"):format(P, P),
      "lch", "lch:get_event(1)" },
    { ("local lch = cm.event_channel() local l = F.cm_listening(lch, %d) local cch = cm.event_channel() "
      .. "local cid = F.cm_with_qp(cch, %d) cid:connect(nil, 0.05) F.keep(cch, cid)"):format(P, P),
      "l, lch", "cm.expect(lch, 'connect_request', 1)" },
    { "", "", "ibv.send_wrs(4, 2)" },
    { "", "", "ibv.wc_array(8)" },
  }
  if W then -- calls on the world's objects that can close (nothing depends on them)
    local world = {
      { "local q = F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")", "q",
        "ibv.batch{{'post_send', q, " .. W.sl .. "}, {'poll', " .. W.cq .. ", " .. W.wcs .. "}}" },
      { "local m = " .. W.pd .. ":reg_mr(64, F.ACCESS)", "m", "F.send_list(m)" },
      { "local m = " .. W.pd .. ":reg_mr(64, F.ACCESS)", "m", "F.recv_list(m)" },
      { "local m = " .. W.pd .. ":reg_mr(64, F.ACCESS) local l = ibv.send_wrs(4, 2)", "m",
        "l:set(1, {opcode = 'send', sg_list = {{mr = m, length = 8}, {mr = m, offset = 8, length = 8}}})" },
      { "local m = " .. W.pd .. ":reg_mr(64, F.ACCESS)", "m",
        W.a .. ":post_send{opcode = 'send', sge = {mr = m, length = 8}}" },
      { "local q = F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")", "q", "q:query()" },
      { "local q = F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")", "q", "q:post_recv(" .. W.rl .. ")" },
      { "local q = F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")", "q",
        "ibv.transfer{send_qp = q, send_cq = " .. W.cq .. ", send_wrs = " .. W.sl .. ", count = 2, timeout = 0.02}" },
      { "local c = " .. W.ctx .. ":create_cq(8)", "c", "c:poll(4)" },
      { "local c = " .. W.ctx .. ":create_cq(8)", "c", "c:poll(" .. W.wcs .. ")" },
    }
    for _, w in ipairs(world) do C[#C + 1] = w end
  end
  local c = r.pick(C)
  local victims = c[2]
  if victims ~= "" and r.chance(0.3) then victims = victims:match("[^,]+$"):gsub("^%s+", "") end -- only the root
  return { { c[3], r.chance(0.3) and g:slot() or 0, (c[1] ~= "" and (c[1] .. " ") or "") .. g:arm(victims) } }
end

--- Argument tables that hold their objects weakly, the objects made in the
-- call's expression (nothing else holds them); lookups of absent keys collect.
A.weak_tables = function(g)
  local r, W = g.r, g.world
  if not W then return nil end
  local how = r.pick(HOW)
  local function wk(t) return "F.weak(" .. t .. ", " .. how .. ")" end
  local function mr() return W.pd .. ":reg_mr(64, F.ACCESS)" end
  local function sge() return wk("{mr = " .. mr() .. ", length = 8}") end
  local pre = r.chance(0.5) and g:arm() or nil
  local c = r.int(12)
  local out
  if c == 1 then
    out = { { W.a .. ":post_send(" .. wk("{opcode = 'send', sg_list = {" .. sge() .. ", " .. sge()
      .. "}, send_flags = {'signaled'}}") .. ")", 0, pre } }
  elseif c == 2 then
    out = { { W.b .. ":post_recv(" .. wk("{sge = " .. sge() .. "}") .. ")", 0, pre } }
  elseif c == 3 then -- many WRs: an MR read early is collected while later WRs are read
    out = { { ("%s:%s(F.weak_wrs(%s, %s, %s, %s))"):format(r.chance(0.5) and W.a or W.b,
      "post_send", r.pick({ "16", "64" }), W.pd, how, "true"), 0, pre } }
    if r.chance(0.5) then out[1][1] = ("%s:post_recv(F.weak_wrs(%s, %s, %s, false))"):format(W.b,
      r.pick({ "16", "64" }), W.pd, how) end
  elseif c == 4 then
    local l = r.chance(0.5) and W.sl or W.rl
    local wr = l == W.sl and wk("{opcode = 'send', sg_list = {" .. sge() .. ", " .. sge() .. "}}")
      or wk("{sg_list = {" .. sge() .. ", " .. sge() .. "}}")
    out = { { l .. ":set(" .. r.int(4) .. ", " .. wr .. ")", 0, pre }, { "collectgarbage()", 0 },
      { l == W.sl and (W.a .. ":post_send(" .. l .. ")") or (W.b .. ":post_recv(" .. l .. ")"), 0 } }
  elseif c == 5 then
    local l = r.chance(0.5) and W.sl or W.rl
    out = { { l .. ":fill(" .. wk("{sge = " .. sge() .. ", stride = 8" .. (l == W.sl and ", opcode = 'send'" or "")
      .. "}") .. ")", 0, pre }, { "collectgarbage()", 0 },
      { l == W.sl and (W.a .. ":post_send(" .. l .. ")") or (W.b .. ":post_recv(" .. l .. ")"), 0 } }
  elseif c == 6 then
    local cq = W.ctx .. ":create_cq(4)"
    out = { { W.pd .. ":create_qp(" .. wk("{qp_type = 'rc', send_cq = " .. cq .. ", recv_cq = " .. cq
      .. ", cap = " .. CAPT .. "}") .. ")", g:slot(), pre } }
  elseif c == 7 then
    out = { { W.ctx .. ":create_srq_ex(" .. wk("{srq_type = 'basic', pd = " .. W.ctx .. ":alloc_pd(), max_wr = 4}")
      .. ")", g:slot(), pre } }
  elseif c == 8 then
    out = { { W.ctx .. ":create_cq(" .. wk("{cqe = 4, channel = " .. W.ctx .. ":create_comp_channel()}") .. ")",
      g:slot(), pre } }
  elseif c == 9 then
    local b = g:slot()
    out = { { "ibv.batch{" .. wk("{'post_send', " .. W.a .. ", F.send_list(" .. mr() .. "), 1, 2}") .. ", "
      .. wk("{'poll', " .. W.ctx .. ":create_cq(4), ibv.wc_array(4)}") .. "}", b, pre },
      { "collectgarbage()", 0 }, { "O[" .. b .. "]()", 0 } }
  elseif c == 10 then
    out = { { "ibv.transfer(" .. wk("{send_qp = " .. W.a .. ", send_cq = " .. W.cq .. ", send_wrs = F.send_list("
      .. mr() .. "), count = 2, timeout = 0.02}") .. ")", 0, pre } }
  elseif c == 11 then
    out = { { W.ud .. ":post_send(" .. wk("{opcode = 'send', inline = 'x', ah = F.ah(" .. W.pd .. ", " .. W.ctx
      .. "), remote_qpn = 1, remote_qkey = 1}") .. ")", 0, pre } }
  else
    out = { { W.pd .. ":create_qp(" .. wk("{qp_type = 'rc', send_cq = " .. W.cq .. ", recv_cq = " .. W.cq
      .. ", srq = " .. W.pd .. ":create_srq{max_wr = 4}, cap = " .. CAPT .. "}") .. ")", g:slot(), pre } }
  end
  return out
end

--- Argument tables whose absent field reads as a different object each
-- time: open, fresh (unreferenced), closed, nil, of another type.
A.shifting_fields = function(g)
  local r, W = g.r, g.world
  if not W then return nil end
  local function choices(open, fresh, closed)
    local t = { open, "F.fresh(function() return " .. fresh .. " end)", "nil", "F.closed(" .. closed .. ")",
      "F.alien()", open }
    for i = #t, 2, -1 do -- shuffled
      local j = r.int(i)
      t[i], t[j] = t[j], t[i]
    end
    return table.concat(t, ", ", 1, 2 + r.int(4))
  end
  local mrc = choices(W.mr, W.pd .. ":reg_mr(64, F.ACCESS)", W.pd .. ":reg_mr(64, F.ACCESS)")
  local cqc = choices(W.cq, W.ctx .. ":create_cq(4)", W.ctx .. ":create_cq(4)")
  local pre = r.chance(0.3) and g:arm() or nil
  local c = r.int(8)
  local out
  if c == 1 then
    out = { W.a .. ":post_send{opcode = 'send', sg_list = {F.shifty({length = 8}, 'mr', " .. mrc .. "), "
      .. "F.shifty({length = 8}, 'mr', " .. mrc .. ")}}" }
  elseif c == 2 then
    out = { W.b .. ":post_recv(F.shifty({}, 'sge', F.shifty({length = 8}, 'mr', " .. mrc .. ")))" }
  elseif c == 3 then
    local l = W.sl
    out = { l .. ":set(" .. r.int(4) .. ", {opcode = 'send', sg_list = {F.shifty({length = 8}, 'mr', " .. mrc
      .. "), F.shifty({length = 8}, 'mr', " .. mrc .. ")}})", "collectgarbage()", W.a .. ":post_send(" .. l .. ")" }
  elseif c == 4 then
    out = { W.pd .. ":create_qp(F.shifty({qp_type = 'rc', recv_cq = " .. W.cq .. ", cap = " .. CAPT
      .. "}, 'send_cq', " .. cqc .. "))" }
  elseif c == 5 then
    out = { W.ctx .. ":create_srq_ex(F.shifty({srq_type = 'basic', max_wr = 4}, 'pd', "
      .. choices(W.pd, W.ctx .. ":alloc_pd()", W.ctx .. ":alloc_pd()") .. "))" }
  elseif c == 6 then
    out = { W.ud .. ":post_send(F.shifty({opcode = 'send', inline = 'x', remote_qpn = 1, remote_qkey = 1}, 'ah', "
      .. choices(W.ah, "F.ah(" .. W.pd .. ", " .. W.ctx .. ")", "F.ah(" .. W.pd .. ", " .. W.ctx .. ")") .. "))" }
  elseif c == 7 then
    local b = "O[" .. g.next_slot .. "]"
    out = { { "ibv.batch{F.shifty({[1] = 'post_send', [3] = " .. W.sl .. "}, 2, "
      .. choices(W.a, "F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")",
        "F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")") .. "), {'poll', " .. W.cq .. ", " .. W.wcs .. "}}",
      g:slot() }, b .. "()", "collectgarbage()", b .. "()" }
  else
    out = { "ibv.transfer(F.shifty({send_cq = " .. W.cq .. ", send_wrs = " .. W.sl .. ", count = 2, timeout = 0.02}, "
      .. "'send_qp', " .. choices(W.xa, "F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")",
        "F.qp(" .. W.ctx .. ", " .. W.pd .. ", " .. W.cq .. ")") .. "))" }
  end
  if pre then
    local first = out[1]
    if type(first) == "string" then first = { first, 0 } end
    out[1] = { first[1], first[2], pre }
  end
  return out
end

--- A class metatable's __gc replaced or removed, an object dropped and
-- collected, then its parents closed.
A.replaced_gc = function(g)
  local r = g.r
  local B = {
    { "local c = F.open() local p = c:alloc_pd() local o = p:reg_mr(64, F.ACCESS)", "{p = p, c = c}", "p, c" },
    { "local c = F.open() local o = c:alloc_pd()", "{c = c}", "c" },
    { "local c = F.open() local o = c:create_cq(4)", "{c = c}", "c" },
    { "local c = F.open() local o = c:create_comp_channel()", "{c = c}", "c" },
    { "local c = F.open() local ch = c:create_comp_channel() local o = c:create_cq{cqe = 4, channel = ch}",
      "{ch = ch, c = c}", "ch, c" },
    { "local c = F.open() local p = c:alloc_pd() local q = c:create_cq(4) local o = F.qp(c, p, q)",
      "{q = q, p = p, c = c}", "q, p, c" },
    { "local c = F.open() local p = c:alloc_pd() local o = F.ah(p, c)", "{p = p, c = c}", "p, c" },
    { "local c = F.open() local p = c:alloc_pd() local o = p:alloc_mw(1)", "{p = p, c = c}", "p, c" },
    { "local c = F.open() local p = c:alloc_pd() local o = p:create_srq{max_wr = 4, max_sge = 1}",
      "{p = p, c = c}", "p, c" },
    { "local c = F.open() local o = c:open_xrcd{fd = -1, oflags = ibv.O_CREAT}", "{c = c}", "c" },
    { "local c = F.open() local p = c:alloc_pd() local m = p:reg_mr(64, F.ACCESS) local o = F.send_list(m)",
      "{m = m, p = p, c = c}", "m, p, c" },
    { "local c = F.open() local p = c:alloc_pd() local m = p:reg_mr(64, F.ACCESS) local o = F.recv_list(m)",
      "{m = m, p = p, c = c}", "m, p, c" },
    { "local c = F.open() local p = c:alloc_pd() local q = c:create_cq(4) local a = F.qp(c, p, q) "
      .. "local o = ibv.batch{{'post_recv', a, ibv.recv_wrs(2)}, {'poll', q, ibv.wc_array(2)}}",
      "{a = a, q = q, p = p, c = c}", "a, q, p, c" },
    { "local ch = cm.event_channel() local o = ch:create_id{ps = 'tcp'}", "{ch = ch}", "ch" },
    { "local ch = cm.event_channel() local o = F.cm_bound(ch)", "{ch = ch}", "ch" },
    { "local ch = cm.event_channel() local o = F.cm_ud(ch)", "{ch = ch}", "ch" },
  }
  local b = r.pick(B)
  local how = r.pick({ "'noop'", "'nil'", "'noop'", "'error'" })
  local s = g:slot()
  local o = "O[" .. s .. "]"
  local parents = b[3]:gsub("(%a+)", o .. ".%1")
  local out = { { b[2], s, b[1] .. " F.strip_gc(o, " .. how .. ") o = nil" } }
  out[#out + 1] = { r.chance(0.5) and "collectgarbage()" or ("collectgarbage('step', " .. r.pick(KS) .. ")"), 0 }
  if r.chance(0.2) then out[#out + 1] = { "collectgarbage()", 0 } end
  if r.chance(0.8) then out[#out + 1] = { "F.restore_gc()", 0 } end -- else the class stays stripped
  if r.chance(0.5) then
    out[#out + 1] = { "F.kill(" .. parents .. ")", 0 }
  else -- or dropped: their finalizers walk the children
    out[#out + 1] = { "true", 0, o .. " = nil collectgarbage()" }
  end
  return out
end

--- Loops whose CQ also carries another QP's completions (W's QPs share one CQ).
A.shared_cq = function(g)
  local r, W = g.r, g.world
  if not W then return nil end
  local out = {}
  local function add(st) out[#out + 1] = st end
  add(W.b .. ":post_recv(" .. W.rl .. ")")
  if r.chance(0.7) then add(W.xb .. ":post_recv(" .. W.rl .. ")") end
  for _ = 1, r.int(3) do add(W.a .. ":post_send(" .. W.sl .. ", 1, 1)") end
  if r.chance(0.5) then add("ibv.sleep(0.005)") end
  local cnt = r.pick({ "1", "2", "4", "8" })
  local c = r.int(5)
  if c == 1 then -- send-only: foreign receive completions
    add(("ibv.transfer{send_qp = %s, send_cq = %s, send_wrs = %s, count = %s, timeout = 0.05}"):format(W.xa, W.cq,
      r.chance(0.5) and W.sl or "ibv.send_wrs(1)", cnt))
  elseif c == 2 then -- receive-only: foreign send completions
    add(("ibv.transfer{recv = %s, recv_cq = %s, recv_wrs = %s, count = %s, timeout = 0.05}"):format(W.xb, W.cq,
      r.chance(0.5) and W.rl or "ibv.recv_wrs(1)", cnt))
  elseif c == 3 then
    add(("ibv.transfer{send_qp = %s, send_cq = %s, send_wrs = %s, recv = %s, recv_cq = %s, recv_wrs = %s, "
      .. "count = %s, window = %s, timeout = 0.05}"):format(W.xa, W.cq, W.sl, W.xb, W.cq, W.rl, cnt,
      r.pick({ "1", "2", "4" })))
  else
    local b = "O[" .. g.next_slot .. "]"
    local steps = r.chance(0.5) and ("{{'post_send', %s, %s, 1, 1}, {'poll', %s, %s}}"):format(W.xa, W.sl, W.cq, W.wcs)
      or ("{{'post_recv', %s, %s, 1, 1}, {'poll', %s, %s, 1, 2}}"):format(W.xb, W.rl, W.cq, W.wcs)
    add({ "ibv.batch" .. steps, g:slot() })
    for _ = 1, r.int(3) do add(b .. "()") end
  end
  return out
end

local FFI_EDITS = {
  { "num_sge", { "0", "1", "2", "3", "4", "255", "-1", "2^31-1" } },
  { "next", { "nil", "0", "1", "2", "3" } },
  { "opcode", { "0", "2", "4", "7", "11", "12", "255", "-1" } },
  { "addr", { "0", "1", "0xffffffff", "2^40" } },
  { "length", { "0", "1", "4096", "2^31", "0xffffffff" } },
  { "wr_id", { "0", "1", "-1" } },
}

--- LuaJIT: prepared lists changed through ibverbs.ffi, then posted (by the
-- core: a post, a batch, a transfer).
A.ffi_edits = function(g)
  local r, W = g.r, g.world
  if not (g.jit and W) then return nil end
  local out = {}
  local function add(st) out[#out + 1] = st end
  local send = r.chance(0.6)
  local l
  if r.chance(0.6) then -- an entry set with two SGEs, then one: the second's MR is collected
    l = "O[" .. g.next_slot .. "]"
    add({ send and "ibv.send_wrs(4, 2)" or "ibv.recv_wrs(4, 2)", g:slot() })
    local two = ("{%ssg_list = {{mr = %s, length = 8}, {mr = %s:reg_mr(64, F.ACCESS), length = 8}}}"):format(
      send and "opcode = 'send', send_flags = {'signaled'}, " or "", W.mr, W.pd)
    local one = ("{%ssg_list = {{mr = %s, length = 8}}}"):format(send and "opcode = 'send', send_flags = {'signaled'}, "
      or "", W.mr)
    add(l .. ":set(1, " .. two .. ")")
    add(l .. ":set(1, " .. one .. ")")
    add("collectgarbage()")
    add("F.ffi_edit(" .. l .. ", 0, 'num_sge', 2)")
  else
    l = send and W.sl or W.rl
  end
  for _ = 1, r.int(3) - 1 do
    local e = r.pick(FFI_EDITS)
    add(("F.ffi_edit(%s, %d, '%s', %s)"):format(l, r.int(4) - 1, e[1], r.pick(e[2])))
  end
  local c = r.int(4)
  if c <= 2 then
    add(send and (W.a .. ":post_send(" .. l .. ", 1, " .. r.int(4) .. ")") or (W.b .. ":post_recv(" .. l .. ")"))
  elseif c == 3 then
    local b = "O[" .. g.next_slot .. "]"
    add({ ("ibv.batch{{'%s', %s, %s}, {'poll', %s, %s}}"):format(send and "post_send" or "post_recv",
      send and W.a or W.b, l, W.cq, W.wcs), g:slot() })
    add(b .. "()")
  else
    add(send and ("ibv.transfer{send_qp = %s, send_cq = %s, send_wrs = %s, count = 2, timeout = 0.02}"):format(
      W.a, W.cq, l) or ("ibv.transfer{recv = %s, recv_cq = %s, recv_wrs = %s, count = 2, timeout = 0.02}"):format(
      W.b, W.cq, l))
  end
  return out
end

--- A prepared list edited while an ibv.batch holds it, then collected and run.
A.batch_held_lists = function(g)
  local r, W = g.r, g.world
  if not W then return nil end
  local out = {}
  local function add(st) out[#out + 1] = st end
  local send = r.chance(0.7)
  local l = "O[" .. g.next_slot .. "]"
  add({ send and ("F.send_list(" .. W.mr .. ")") or ("F.recv_list(" .. W.mr .. ")"), g:slot() })
  local b = "O[" .. g.next_slot .. "]"
  add({ ("ibv.batch{{'%s', %s, %s%s}, {'poll', %s, %s}}"):format(send and "post_send" or "post_recv",
    send and W.a or W.b, l, r.chance(0.5) and (", 1, " .. r.int(4)) or "", W.cq, W.wcs), g:slot() })
  local op = send and "opcode = 'send', send_flags = {'signaled'}, " or ""
  local fresh_mr = W.pd .. ":reg_mr(64, F.ACCESS)"
  for _ = 1, r.int(5) do
    local i = r.int(4)
    local c = r.int(7)
    if c == 1 then
      add(("%s:set(%d, {%ssg_list = {{mr = %s, length = 8}, {mr = %s, length = 8}}})"):format(l, i, op, W.mr, fresh_mr))
    elseif c == 2 then
      add(("%s:set(%d, {%ssg_list = {{mr = %s, length = 8}}})"):format(l, i, op, W.mr))
    elseif c == 3 then
      add(("%s:length(%d, %s)"):format(l, i, r.pick({ "0", "1", "8", "64" })))
    elseif c == 4 then
      add(("%s:wr_id(%d, %s)"):format(l, i, r.pick({ "0", "1", "2^53", "-1", "0xffffffff" })))
    elseif c == 5 and send then -- the AH case: set, the AH closed, the length cut, collected
      local a = "O[" .. g.next_slot .. "]"
      add({ "F.ah(" .. W.pd .. ", " .. W.ctx .. ")", g:slot() })
      add(("%s:set(%d, {ah = %s, opcode = 'send', inline = 'x', remote_qpn = 1, remote_qkey = 1})"):format(l, i, a))
      add(a .. ":close()")
      add(("%s:length(%d, 0)"):format(l, i))
    elseif c == 6 then
      add(("%s:fill{%ssge = {mr = %s, length = 8}, stride = 8}"):format(l, op, fresh_mr))
    else
      add({ "collectgarbage('step', " .. r.pick(KS) .. ")", 0 })
    end
  end
  if r.chance(0.3) then add({ "true", 0, l .. " = nil" }) end -- the batch is the list's last holder
  add({ "collectgarbage()", 0 })
  add(b .. "()")
  if r.chance(0.3) then add({ "true", 0, b .. " = nil collectgarbage()" }) end
  return out
end

--- Whole object graphs (a context, its CQ, QPs, lists, an AH, cm ids with
-- unread events) dropped and collected, or kept live to lua_close; now and
-- then the world itself is dropped and made anew.
A.plain_collection = function(g)
  local r = g.r
  local letters = {}
  for ch in ("clasmwx"):gmatch(".") do if r.chance(0.6) then letters[#letters + 1] = ch end end
  local keep = g.kept < 6 and r.chance(0.3)
  if keep then g.kept = g.kept + 1 end
  local out = { { ("F.graph('%s', %s, %d)"):format(table.concat(letters), tostring(keep), g:cm_port()), 0 } }
  if r.chance(0.5) then
    out[#out + 1] = { "collectgarbage()", 0 }
  else
    for _ = 1, r.int(4) do out[#out + 1] = { "collectgarbage('step', " .. r.pick(KS) .. ")", 0 } end
  end
  if g.world and r.chance(0.15) then -- the world dropped: every O[...] at once, then a new one
    out[#out + 1] = { "true", 0, "for k in pairs(O) do O[k] = nil end collectgarbage()" }
    local p = g:cm_port()
    g.cm_port_next = g.cm_port_next + 4
    for _, st in ipairs(g:setup(p)) do out[#out + 1] = { st[1], st[2], raw = true } end
  end
  return out
end

gen.attacks = A
local ATTACK_NAMES = {}
for k in pairs(A) do ATTACK_NAMES[#ATTACK_NAMES + 1] = k end
table.sort(ATTACK_NAMES)

--- The attack classes to use: all, or those named in a comma-separated list.
function gen.attack_names(list)
  if not list or list == "" then return ATTACK_NAMES end
  local out = {}
  for n in list:gmatch("[^,]+") do
    if n ~= "none" then
      assert(A[n], "fuzz: no attack class '" .. n .. "' (" .. table.concat(ATTACK_NAMES, ", ") .. ")")
      out[#out + 1] = n
    end
  end
  return out
end

gen.scenarios = S
local SCENARIO_NAMES = {}
for k in pairs(S) do SCENARIO_NAMES[#SCENARIO_NAMES + 1] = k end
table.sort(SCENARIO_NAMES)

local function lines_of(self, steps)
  local out = {}
  for _, st in ipairs(steps) do
    if type(st) == "string" then
      local s = self:slot()
      out[#out + 1] = { line(s, st), s }
    elseif st.raw then
      out[#out + 1] = { st[1], st[2] }
    else
      out[#out + 1] = { line(st[2], st[1], st[3]), st[2] }
    end
  end
  return out
end

--- The next step: a list of {line, slot}.
function G:step()
  local r = self.r
  if #self.attack_names > 0 and r.int(100) <= self.attack_rate then
    local steps = A[r.pick(self.attack_names)](self)
    if steps then return lines_of(self, steps) end
  end
  local c = r.int(100)
  if c <= 12 then
    local steps = S[r.pick(SCENARIO_NAMES)](self)
    if steps then return lines_of(self, steps) end
  end
  if c <= 20 then
    local l, s = self:function_call()
    return { { l, s } }
  end
  if c == 21 then return { { line(0, 'collectgarbage("collect")'), 0 } } end
  local l, s = self:method_call()
  return { { l, s } }
end

return gen
