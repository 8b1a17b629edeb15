--- fabric_check's loopback checks of one port: two QPs of the port connected
-- to each other, then RC send/recv, RDMA write, RDMA read, atomics and a UD
-- send between them, each with its data checked.  The bring-up engine's:
-- it raises nothing and prints nothing, the tool (ibverbs.tools.fabric_check)
-- reports.
--
--   local loopback = require "ibverbs.bringup.check.loopback"
--   for _, t in ipairs(loopback.TESTS) do
--     local c = loopback.run(ctx, 1, gid_index, t, 2)   -- {name = "rdma_write", pass = true, ms = 0.4}
--   end
--   local own = loopback.PACKETS                        -- what they send and receive on the port
local ibv = require "ibverbs"

local loopback = {}

local ACCESS = { "local_write", "remote_write", "remote_read", "remote_atomic" }
local QKEY = 0x11111111

local function wait(env, n)
  local got = assert(env.cq:wait(env.wcs, n, env.timeout))
  if got < n then error(string.format("%d of %d completions in %.1f s", got, n, env.timeout), 0) end
  for i = 1, n do
    if env.wcs:status(i) ~= "success" then
      error("completion " .. env.wcs:opcode(i) .. ": " .. env.wcs:status(i), 0)
    end
  end
end

local function expect(got, want, what)
  if got ~= want then error(string.format("%s: got %s, expected %s", what, tostring(got), tostring(want)), 0) end
end

-- Two QPs of qp_type on one CQ, connected to each other through the port.
local function pair(ctx, port, gid_index, qp_type, timeout)
  local env = { ctx = ctx, port = port, gid_index = gid_index, timeout = timeout }
  env.pd = assert(ctx:alloc_pd())
  env.cq = assert(ctx:create_cq(64))
  env.wcs = ibv.wc_array(8)
  env.mra = assert(env.pd:reg_mr(4096, ACCESS))
  env.mrb = assert(env.pd:reg_mr(4096, ACCESS))
  local cap = { max_send_wr = 8, max_recv_wr = 8, max_send_sge = 1, max_recv_sge = 1 }
  env.a = assert(env.pd:create_qp{ qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap })
  env.b = assert(env.pd:create_qp{ qp_type = qp_type, send_cq = env.cq, recv_cq = env.cq, cap = cap })
  env.gid = assert(ctx:query_gid(port, gid_index))
  local lid = assert(ctx:query_port(port)).lid
  for _, p in ipairs({ { env.a, env.b }, { env.b, env.a } }) do
    assert(p[1]:connect({ qpn = p[2].qp_num, psn = 0, lid = lid, gid = env.gid },
      { port_num = port, sgid_index = gid_index, qp_access_flags = ACCESS }))
  end
  return env
end

--- The checks in their order: name, qp_type, packets (sent and received on the
-- port), run(env).
local tests = {}
loopback.TESTS = tests

-- packets: what each test sends and receives on its port (a loopback packet counts both ways), for
-- ibverbs.bringup.check.counters' estimate of the check's own traffic (PACKETS)
tests[#tests + 1] = { name = "rc_send_recv", qp_type = "rc", packets = 4, run = function(env)
  env.mra:write(0, "fabric check: send")
  assert(env.b:post_recv{ wr_id = 1, sge = { mr = env.mrb, length = 64 } })
  assert(env.a:post_send{ wr_id = 2, opcode = "send", send_flags = { "signaled" },
    sge = { mr = env.mra, length = 18 } })
  wait(env, 2)
  expect(env.mrb:read(0, 18), "fabric check: send", "received data")
end }

tests[#tests + 1] = { name = "rdma_write", qp_type = "rc", packets = 4, run = function(env)
  env.mra:write(100, "fabric check: write")
  assert(env.a:post_send{ wr_id = 3, opcode = "rdma_write", send_flags = { "signaled" },
    sge = { mr = env.mra, offset = 100, length = 19 }, remote_addr = env.mrb.addr + 200, rkey = env.mrb.rkey })
  wait(env, 1)
  expect(env.mrb:read(200, 19), "fabric check: write", "written data")
end }

tests[#tests + 1] = { name = "rdma_read", qp_type = "rc", packets = 4, run = function(env)
  env.mrb:write(300, "fabric check: read")
  assert(env.a:post_send{ wr_id = 4, opcode = "rdma_read", send_flags = { "signaled" },
    sge = { mr = env.mra, offset = 400, length = 18 }, remote_addr = env.mrb.addr + 300, rkey = env.mrb.rkey })
  wait(env, 1)
  expect(env.mra:read(400, 18), "fabric check: read", "read data")
end }

tests[#tests + 1] = { name = "atomic", qp_type = "rc", packets = 8, run = function(env)
  env.mrb:u64(512, 40)
  assert(env.a:post_send{ wr_id = 5, opcode = "atomic_fetch_and_add", send_flags = { "signaled" },
    sge = { mr = env.mra, offset = 512, length = 8 }, remote_addr = env.mrb.addr + 512, rkey = env.mrb.rkey,
    compare_add = 2 })
  wait(env, 1)
  expect(env.mra:u64(512), 40, "fetch_and_add old value")
  assert(env.a:post_send{ wr_id = 6, opcode = "atomic_cmp_and_swp", send_flags = { "signaled" },
    sge = { mr = env.mra, offset = 520, length = 8 }, remote_addr = env.mrb.addr + 512, rkey = env.mrb.rkey,
    compare_add = 42, swap = 7 })
  wait(env, 1)
  expect(env.mra:u64(520), 42, "cmp_and_swp old value")
  expect(env.mrb:u64(512), 7, "swapped value")
end }

tests[#tests + 1] = { name = "ud_send", qp_type = "ud", packets = 2, run = function(env)
  local ah = assert(env.pd:create_ah{ port_num = env.port,
    grh = { dgid = env.gid, sgid_index = env.gid_index, hop_limit = 1 } })
  assert(env.b:post_recv{ wr_id = 7, sge = { mr = env.mrb, offset = 1024, length = 40 + 64 } })
  env.mra:write(1024, "fabric check: ud")
  assert(env.a:post_send{ wr_id = 8, send_flags = { "signaled" }, sge = { mr = env.mra, offset = 1024, length = 16 },
    ah = ah, remote_qpn = env.b.qp_num, remote_qkey = QKEY })
  wait(env, 2)
  expect(env.mrb:read(1024 + 40, 16), "fabric check: ud", "datagram (after the 40-byte GRH)")
end }

--- The packets all the checks send and receive on a port.
loopback.PACKETS = 0
for _, t in ipairs(tests) do loopback.PACKETS = loopback.PACKETS + t.packets end

--- One check t of TESTS on the port, its completions waited for at most
-- timeout seconds: {name =, pass =, ms =, detail = why it failed}.
function loopback.run(ctx, port, gid_index, t, timeout)
  local start = ibv.now()
  local ok, err = pcall(function()
    local env = pair(ctx, port, gid_index, t.qp_type, timeout)
    t.run(env)
    for _, k in ipairs({ "a", "b", "mra", "mrb", "cq", "pd" }) do env[k]:close() end
  end)
  collectgarbage()
  return { name = t.name, pass = ok, ms = (ibv.now() - start) * 1000, detail = not ok and tostring(err) or nil }
end

return loopback
