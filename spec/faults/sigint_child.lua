-- A child for spec/faults/sigint_spec.lua: for each MODE in turn, sets it
-- up, prints "ready MODE", blocks in one call until SIGINT, catches the
-- error ("caught MODE ..."), checks that the objects still work and that the
-- previous SIGINT handler is back, closes everything; exits 0 at the end.
--   lua spec/faults/sigint_child.lua MODE...
-- MODE: transfer_idle, transfer_busy, cq_wait, comp_event, async_event,
--       cm_event, cm_connect, cm_get_request, lat_send, lat_write, bw
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"

local pid = io.open("/proc/self/stat"):read("l"):match("^(%d+)")
local port = 7400 + tonumber(pid) % 500 * 2
if rawget(_G, "jit") then jit.off() end -- the interpreter's SIGINT hook never fires in traces

local function run(mode)
local function ready()
  print("ready " .. mode)
  io.stdout:flush()
end

local env, objs = {}, {}
local block, after

if mode:match("^transfer") or mode == "cq_wait" or mode == "comp_event" or mode == "async_event"
  or mode:match("^lat_") or mode == "bw" then
  env = support.pair()
  env.mr = assert(env.pd:reg_mr(64 * 64, { "local_write" }))
  local rl = ibv.recv_wrs(64)
  rl:fill{ sge = { mr = env.mr, length = 64 }, stride = 64 }
  assert(env.b:post_recv(rl))
  local sl = ibv.send_wrs(1)
  sl:set(1, { wr_id = 1, opcode = "send", send_flags = { "signaled" }, sge = { mr = env.mr, length = 8 } })
  if mode == "transfer_idle" then -- a receiver whose sender never comes
    block = function()
      return ibv.transfer{ recv = env.b, recv_cq = env.cq, recv_wrs = rl, count = 10, timeout = math.huge }
    end
  elseif mode == "transfer_busy" then
    block = function()
      return ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl, recv = env.b, recv_cq = env.cq,
                           recv_wrs = rl, count = 1000000000, window = 16, timeout = math.huge }
    end
  elseif mode == "lat_send" then -- a responder whose peer never sends
    block = function()
      return ibv.lat_send{ qp = env.b, send_cq = env.cq, recv_cq = env.cq, send_wrs = sl, recv_wrs = rl,
                           iters = 10, samples = ibv.samples(10), timeout = math.huge }
    end
  elseif mode == "lat_write" then -- a responder polling memory the peer never writes
    local w = ibv.send_wrs(1)
    w:set(1, { opcode = "rdma_write", sge = { mr = env.mr, length = 8 }, remote_addr = env.mr.addr,
               rkey = env.mr.rkey })
    block = function()
      return ibv.lat_write{ qp = env.b, send_cq = env.cq, send_wrs = w, send_mr = env.mr, poll_mr = env.mr,
                            poll_offset = 64, iters = 10, timeout = math.huge }
    end
  elseif mode == "bw" then -- sending and receiving as long as it takes
    block = function()
      return ibv.bw{ qp = env.a, send_cq = env.cq, send_wrs = sl, iters = 1000000000, window = 16, cq_mod = 1,
                     timeout = math.huge }
    end
  elseif mode == "cq_wait" then
    block = function() return env.cq:wait(env.wcs, 1, math.huge) end
  elseif mode == "comp_event" then
    env.ch = assert(env.ctx:create_comp_channel())
    env.ecq = assert(env.ctx:create_cq{ cqe = 4, channel = env.ch })
    assert(env.ecq:req_notify())
    block = function() return env.ch:get_event() end
  else
    block = function() return env.ctx:get_async_event() end
  end
  after = function()
    -- usable: flush what is posted and poll it back
    assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
    local n = env.cq:wait(ibv.wc_array(64), 1, 5)
    assert(n >= 1, "no completion after the interruption")
  end
else
  local ch = assert(cm.event_channel())
  objs.ch = ch
  local listen = assert(ch:create_id{ ps = "tcp" })
  objs.listen = listen
  assert(listen:bind_addr("192.0.2.1:" .. port))
  assert(listen:listen(4))
  if mode == "cm_event" then
    block = function() return ch:get_event() end
  elseif mode == "cm_connect" then -- a listener that never accepts: the request waits unread
    local ai = assert(cm.getaddrinfo("192.0.2.1", tostring(port), { port_space = "tcp" }))
    local ep = assert(cm.create_ep(ai, { qp_init_attr = { cap = { max_send_wr = 1, max_recv_wr = 1 } } }))
    objs.ep = ep
    block = function() return ep:connect(nil, math.huge) end
  elseif mode == "cm_get_request" then
    local ai = assert(cm.getaddrinfo("192.0.2.1", tostring(port + 1), { flags = { "passive" }, port_space = "tcp" }))
    local sl = assert(cm.create_ep(ai))
    assert(sl:listen(1))
    objs.sl = sl
    block = function() return sl:get_request() end
  end
  after = function() assert(listen:get_local_addr()) end -- usable
end

assert(block, "unknown mode " .. tostring(mode))
ready()
local t0 = ibv.now()
local ok, err = pcall(block)
local t1 = ibv.now() -- CLOCK_MONOTONIC: the parent compares it with its own
print(string.format("caught %s at %.6f after %.3f s: %s %s", mode, t1, t1 - t0, tostring(ok), tostring(err)))
io.stdout:flush()
assert(not ok and tostring(err):find("interrupted"), "expected the interrupted error")
after()
for _, k in ipairs{ "ep", "sl", "listen", "ch" } do if objs[k] then assert(objs[k]:close()) end end
for _, k in ipairs{ "ecq", "ch", "a", "b", "cq", "mr", "pd", "ctx" } do if env[k] then assert(env[k]:close()) end end
print("closed " .. mode)
io.stdout:flush()
end

for _, mode in ipairs(arg) do run(mode) end
-- the previous handler (the interpreter's own) is back: a second SIGINT is
-- its "interrupted!" (it then resets SIGINT to the default: so only once, at the end)
local ok2, err2 = pcall(function()
  io.popen("kill -INT " .. pid):close() -- (os.execute: system() ignores SIGINT while it waits)
  local x = 0
  for i = 1, 1e7 do x = x + i end
  return x
end)
print("second SIGINT: " .. tostring(ok2) .. " " .. tostring(err2))
assert(not ok2 and tostring(err2):find("interrupted"), "the interpreter's handler is not back")
os.exit(0)
