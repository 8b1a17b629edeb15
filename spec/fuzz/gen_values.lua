--- The fuzzer's generator, its values (spec/fuzz/gen.lua requires it, as do
-- gen_structs.lua, gen_templates.lua, gen_lines.lua and gen_attacks.lua):
--
--   local values = require "fuzz.gen_values"
--   local G = values.G            -- the generator class every gen_*.lua adds methods to
--   local r = values.rng(seed)    -- r.int(n), r.chance(p), r.pick(t)
--
-- Holds the random numbers, the pools of literal values (values.OPCODES,
-- QP_TYPES, STATES, ACCESS, SEND_FLAGS for the other parts), the discovery of
-- methods and module functions (gen.discover, gen.functions, gen.kind re-export
-- them), and G's value helpers: an object of a kind, numbers, sizes, strings,
-- enums, flags, any value, a table with fields dropped or made bad, F.evil
-- wrappers.  G:any also makes SGEs and send WRs (G:sge, G:send_wr of
-- gen_structs.lua: gen.lua loads every part before a generator runs).
local values = {}

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
values.rng = rng

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
values.OPCODES, values.QP_TYPES, values.STATES = OPCODES, QP_TYPES, STATES
values.ACCESS, values.SEND_FLAGS = ACCESS, SEND_FLAGS

-- ------------------------------------------------------------------ discovery

--- {typename = {method names, sorted}} from the registry's ibverbs metatables.
function values.discover(ibv)
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
function values.functions(ibv, cm)
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
function values.kind(v)
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
values.G = G

--- Registers what slot s holds after its line ran.
function G:note(s)
  local v = self.O[s]
  if s > 0 and v ~= nil then
    self.slots[#self.slots + 1] = s
    local k = values.kind(v)
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

return values
