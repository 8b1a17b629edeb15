--- make soak: the fault loops of spec/faults for minutes, on rxe0 in the VM.
--   tools/soak.lua [seconds = 300]
-- Each round: N receive and send WRs flushed by a QP error (exactly-once
-- check by wr_id), ibv.transfer across a link flap (counts that add up),
-- and every fifth round a peer process killed with kill -9 mid-transfer.
-- Prints a line per round and the totals: WRs posted, completions seen,
-- duplicates, missing, RSS at start and end, kernel object counts.
package.path = "lua/?.lua;lua/?/init.lua;spec/?.lua;" .. package.path
local ibv = require "ibverbs"
local support = require "support"
local util = require "faults.util"

local seconds = tonumber(arg[1]) or 300
local GID = "::ffff:192.0.2.1"
local total = { posted = 0, seen = 0, dup = 0, missing = 0, unknown = 0, rounds = 0, kills = 0, flaps = 0 }

local function pair(n, to)
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(2 * n + 64))
  local cap = { max_send_wr = n, max_recv_wr = n, max_send_sge = 1, max_recv_sge = 1 }
  env.a = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
  env.b = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
  local conn = { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" }, timeout = 12, retry_cnt = 2 }
  assert(env.a:connect({ qpn = to or env.b.qp_num, gid = GID }, conn))
  assert(env.b:connect({ qpn = env.a.qp_num, gid = GID }, conn))
  env.mr = assert(env.pd:reg_mr(64 * 64, { "local_write" }))
  env.wcs = ibv.wc_array(256)
  return env
end

local function close(env)
  for _, k in ipairs{ "a", "b", "cq", "mr", "pd", "ctx" } do if env[k] then assert(env[k]:close()) end end
end

-- N receives on b and N sends to nobody on a, both QPs to error: each wr_id once.
local function flush_round(n)
  local env = pair(n, 0xfffff0)
  local rl, sl = ibv.recv_wrs(n), ibv.send_wrs(n)
  rl:fill{ wr_id = 1, sge = { mr = env.mr, length = 64 } }
  sl:fill{ wr_id = n + 1, opcode = "send", send_flags = { "signaled" }, sge = { mr = env.mr, length = 64 } }
  assert(env.b:post_recv(rl)); assert(env.a:post_send(sl))
  local posted = {}
  for i = 1, 2 * n do posted[i] = true end
  assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
  local t = util.tally()
  util.drain(env.cq, env.wcs, t, 0.2, 20)
  local missing, dup, unknown = t:check(posted)
  close(env)
  return 2 * n, t.total, missing, dup, unknown
end

-- ibv.transfer while d0 goes down; then flush and count.
local function flap_round()
  local env = pair(64)
  local rl = ibv.recv_wrs(64)
  rl:fill{ sge = { mr = env.mr, length = 64 }, stride = 64 }
  assert(env.b:post_recv(rl))
  local sl = ibv.send_wrs(1)
  sl:set(1, { wr_id = 7, opcode = "send", send_flags = { "signaled" }, inline = "x" })
  local down = util.later(0.2 + math.random() * 0.5, "ip link set d0 down")
  local st, _, _, c = ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl, recv = env.b,
    recv_cq = env.cq, recv_wrs = rl, count = 1000000000, window = 16, timeout = 2 }
  assert(not st, "transfer did not stop")
  down()
  assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
  local t = util.tally()
  util.drain(env.cq, env.wcs, t, 0.2, 10)
  close(env)
  assert(util.sh("ip link set d0 up"))
  local ctx = support.open()
  assert(util.port_back(ctx, 10), "rxe0 did not come back")
  ctx:close()
  local posted, seen = c.send_posted + c.recv_posted, c.sent + c.received + c.errors + t.total
  return posted, seen, math.max(0, posted - seen), math.max(0, seen - posted), 0
end

-- A peer process receiving through ibv.transfer, killed mid-transfer.
local function kill_round()
  local dir = os.tmpname()
  os.remove(dir)
  assert(util.sh("mkdir -p " .. dir))
  local peer = util.start("spec/faults/peer.lua", "verbs " .. dir)
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(256))
  env.a = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq,
                                   cap = { max_send_wr = 64, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1 } })
  local f = assert(io.open(dir .. "/survivor.tmp", "w")); f:write(env.a.qp_num); f:close()
  os.rename(dir .. "/survivor.tmp", dir .. "/survivor")
  local remote
  for _ = 1, 1000 do remote = util.slurp(dir .. "/peer"); if remote then break end; util.sleep(0.02) end
  assert(env.a:connect({ qpn = tonumber(remote), gid = GID },
    { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" }, timeout = 12, retry_cnt = 2 }))
  assert(peer:expect("ready\n", 30))
  local sl = ibv.send_wrs(1)
  sl:set(1, { wr_id = 9, opcode = "send", send_flags = { "signaled" }, inline = "x" })
  util.later(0.3 + math.random() * 0.5, "kill -9 " .. peer.pid)
  local st, _, _, c = ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl, count = 1000000000,
    window = 16, timeout = 5 }
  assert(not st, "transfer did not stop")
  assert(env.a:modify{ qp_state = "err" })
  local t = util.tally()
  util.drain(env.cq, ibv.wc_array(64), t, 0.2, 10)
  close(env)
  peer.cleanup()
  os.execute("rm -rf " .. dir)
  local posted, seen = c.send_posted, c.sent + c.errors + t.total
  return posted, seen, math.max(0, posted - seen), math.max(0, seen - posted), 0
end

local function add(kind, posted, seen, missing, dup, unknown)
  total.posted, total.seen = total.posted + posted, total.seen + seen
  total.missing, total.dup, total.unknown = total.missing + missing, total.dup + dup, total.unknown + unknown
  print(string.format("round %d %-6s posted %7d seen %7d missing %d dup %d unknown %d  rss %d kB",
    total.rounds, kind, posted, seen, missing, dup, unknown, util.rss()))
  io.stdout:flush()
end

local base = util.baseline()
local rss0 = util.rss()
local sizes = { 1, 64, 1024, 4096 }
local t_end = ibv.now() + seconds
print(string.format("soak for %d s on %s; kernel objects at start: %s", seconds, support.DEVICE,
  util.format_resources(base)))
while ibv.now() < t_end do
  total.rounds = total.rounds + 1
  add("flush", flush_round(sizes[(total.rounds - 1) % #sizes + 1]))
  add("flap", flap_round()); total.flaps = total.flaps + 1
  if total.rounds % 5 == 0 then add("kill", kill_round()); total.kills = total.kills + 1 end
  collectgarbage()
end
collectgarbage(); collectgarbage()
local same, now = util.back_to(base, 10)
local rss1 = util.rss()
print(string.format("\nrounds %d (link flaps %d, peers killed %d)", total.rounds, total.flaps, total.kills))
print(string.format("WRs posted %d, completions seen %d, duplicates %d, missing %d, unknown %d",
  total.posted, total.seen, total.dup, total.missing, total.unknown))
print(string.format("RSS at start %d kB, at end %d kB", rss0, rss1))
print("kernel objects at end: " .. util.format_resources(now or base) .. (same and " (back to the start)" or " (LEAK)"))
os.exit((total.dup == 0 and total.missing == 0 and total.unknown == 0 and same) and 0 or 1)
