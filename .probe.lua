local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"
local function show(label, ...) print(label, select("#", ...), ...) end
local function perr(label, f) local ok, e, m, n = pcall(f) print(label, ok, e, m, n) end
local ch = assert(cm.event_channel())
local id = assert(ch:create_id{ ps = "tcp" })
assert(id:bind_addr("192.0.2.1:7990"))
local id2 = assert(cm.create_id{})
perr("listen unbound", function() return assert(cm.create_id{}):listen(1) end)
perr("listen bad", function() return id:listen(-1) end)
show("listen", id:listen(4))
show("listen twice", id:listen(4))
show("reject not req", id2:reject("x"))
show("disconnect unconnected", id2:disconnect())
show("set_option", id2:set_option("tos", 5))
perr("set_option bad", function() return id2:set_option("tos", "x") end)
show("migrate", id2:migrate_id(ch))
show("get_request nonlisten", id2:get_request(0.1))
show("sync id listen get_request timeout", (function() local l = assert(cm.create_id{}); assert(l:bind_addr("192.0.2.1:7991")); assert(l:listen(1)); return l:get_request(0.1) end)())
perr("create_qp no dev", function() return assert(cm.create_id{}):create_qp{} end)
perr("connect bad field", function() return id2:connect{ bogus = 1 } end)
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"
local function show(label, ...) print(label, select("#", ...), ...) end
local function perr(label, f) local ok, e = pcall(f) print(label, ok, e) end
local env = support.pair{ qp_type = "ud" }
local ah = assert(env.pd:create_ah{ port_num = 1, grh = { dgid = env.gid, sgid_index = 1 } })
local sl = ibv.send_wrs(1)
local wcs = ibv.wc_array(3)
print("#wcs", #wcs, wcs:count())
local ch = assert(cm.event_channel())
local id = assert(ch:create_id{ ps = "tcp" })
local id2 = assert(cm.create_id{})
perr("connect unresolved", function() return id2:connect() end)
perr("accept nope", function() return id2:accept() end)
perr("resolve_route unresolved", function() return id2:resolve_route(100) end)
perr("bind bad", function() return id2:bind_addr(5) end)
perr("resolve_addr bad timeout", function() return id2:resolve_addr(nil, "192.0.2.1:1", -1) end)
show("close ch busy", ch:close())
show("id close", id:close(), id:close())
show("ch close", ch:close(), ch:close())
perr("ch closed get_event", function() return ch:get_event(0) end)
perr("ch closed fd", function() return ch:fd() end)
perr("ch closed create_id", function() return ch:create_id() end)
local ai = cm.getaddrinfo("192.0.2.1", "7471", { port_space = "tcp" })
print("ai", tostring(ai), #ai, ai.dst_addr, ai.src_addr, ai.family, ai.qp_type, ai.port_space, ai.flags)
for i, e in ipairs(ai:list()) do for k, v in pairs(e) do print("ai", i, k, v) end end
local pai = cm.getaddrinfo("192.0.2.1", "7471", { flags = { "passive" }, port_space = "tcp" })
print("pai", #pai, pai.src_addr, pai.dst_addr, pai.flags)
show("ai fail", cm.getaddrinfo("no.such.host.invalid", "1"))
show("ai fail2", cm.getaddrinfo("203.0.113.9", "1", { flags = { "numeric_host" } }))
show("ai fail3", cm.getaddrinfo(nil, nil))
perr("ai hints", function() return cm.getaddrinfo("192.0.2.1", "1", { bogus = 1 }) end)
perr("ai hints ps", function() return cm.getaddrinfo("192.0.2.1", "1", { port_space = "nope" }) end)
perr("ai hints addr", function() return cm.getaddrinfo(nil, nil, { src_addr = 5 }) end)
perr("ai node", function() return cm.getaddrinfo({}, "1") end)
show("ai close", ai:close(), ai:close(), ai:is_closed())
perr("ai closed list", function() return ai:list() end)
perr("ai closed len", function() return #ai end)
perr("ai closed field", function() return ai.dst_addr end)
perr("create_ep closed ai", function() return cm.create_ep(ai) end)
