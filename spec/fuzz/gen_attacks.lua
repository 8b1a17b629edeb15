--- The fuzzer's generator, its multi-step steps (spec/fuzz/gen.lua requires
-- it): the scenarios (misuse single random calls reach too rarely) and the
-- attack classes (a script that fights back).  Each is a function of the
-- generator that returns a list of steps, or nil when what it needs is
-- missing (objects, the world, LuaJIT); a step is a string (a call whose
-- result goes to a new slot), {call, slot, pre} or, raw, {line, slot}
-- (gen.lua's G:step makes them lines).
--
--   local multistep = require "fuzz.gen_attacks"
--   multistep.scenarios.batch_run(g), multistep.attacks.shared_cq(g)
--
-- They build on every part: G's values (gen_values.lua), structures
-- (gen_structs.lua), G:batch_steps (gen_templates.lua) and G:setup
-- (gen_lines.lua), which gen.lua loads before a generator runs.
local values = require "fuzz.gen_values"
local G = values.G

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

return { scenarios = S, attacks = A }
