--- The fuzzer's generator, its lines (spec/fuzz/gen.lua requires it): one
-- call as a line of Lua, `T(slot, function() return <call> end)`; the
-- argument list and its mutation; one call of a random method on a random
-- object (G:method_call) or of a module function (G:function_call), with its
-- template's arguments (gen_templates.lua) or random ones; and the world, the
-- setup lines that make every object type in the states worth reaching
-- (G:setup).
--
--   local line = require("fuzz.gen_lines").line
--   line(3, "O[1]:alloc_pd()")  -- "T(3, function() return O[1]:alloc_pd() end)"
local values = require "fuzz.gen_values"
local templates = require "fuzz.gen_templates"
local G = values.G
local T, BLOCKING = templates.templates, templates.blocking

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
    if self.types[values.kind(recv)] or values.kind(recv) == "ibverbs.xrc_domain" then break end
    recv = nil
  end
  if recv == nil then return self:function_call() end
  local k = values.kind(recv)
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

return { line = line }
