-- Faults in the middle of traffic on rxe0: the link going down (during a Lua
-- loop and during ibv.transfer) and the peer process killed (verbs and
-- rdma_cm).  Each time the call returns within a bound, the fault shows up
-- (port_err, error completions, disconnected), every posted WR is accounted
-- for, and the kernel's object counts return to where they were.
local ibv = require "ibverbs"
local cm = require "ibverbs.cm"
local support = require "support"
local util = require "faults.util"

local GID = "::ffff:192.0.2.1"
local BOUND = 5 -- seconds a loop may take to notice a fault

local function pair(cap)
  local env = support.pair{ cap = cap or { max_send_wr = 64, max_recv_wr = 64, max_send_sge = 1, max_recv_sge = 1 } }
  env.mr = assert(env.pd:reg_mr(64 * 64, { "local_write" }))
  env.rl = ibv.recv_wrs(64)
  env.rl:fill{ sge = { mr = env.mr, length = 64 }, stride = 64 }
  return env
end

local function close(env)
  for _, k in ipairs{ "a", "b", "cq", "mr", "pd", "ctx" } do if env[k] then assert(env[k]:close()) end end
end

-- The async events that come within t seconds.
local function events(ctx, t)
  local out = {}
  repeat
    local ev = ctx:get_async_event(t)
    if ev then out[#out + 1] = ev.type end
  until not ev
  return table.concat(out, " ")
end

local function link(state)
  assert(util.sh("ip link set d0 " .. state))
end

-- After link up: the port active, its GID back, and a fresh pair moving data.
local function fresh_pair_works()
  local ctx = support.open()
  local t0 = ibv.now()
  assert(util.port_back(ctx, 10), "rxe0 did not come back")
  print(string.format("  port active with its GID %.2f s after link up", ibv.now() - t0))
  ctx:close()
  local env = pair()
  assert(env.b:post_recv(env.rl, 1, 1))
  assert(env.a:post_send{ wr_id = 1, opcode = "send", send_flags = { "signaled" }, inline = "again" })
  local wcs = ibv.wc_array(2)
  assert.equal(2, env.cq:wait(wcs, 2, 5))
  assert.same({ "success", "success" }, { wcs:status(1), wcs:status(2) })
  close(env)
end

describe("on rxe0, a fault in the middle of traffic #once", function()
  local base
  before_each(function()
    -- librdmacm keeps the device open once an id used it: open it before the count
    local ch = assert(cm.event_channel())
    local id = assert(ch:create_id{ ps = "tcp" })
    assert(id:bind_addr("192.0.2.1:0"))
    id:close(); ch:close()
    base = util.baseline()
  end)
  after_each(function()
    link("up")
    local ok, now = util.back_to(base)
    assert(ok, "kernel objects left: " .. util.format_resources(now or {}) .. " (was " ..
      util.format_resources(base) .. ")")
  end)

  it("link down during a Lua post/poll loop: it ends within the bound, port_err comes, every WR once", function()
    local env = pair()
    local posted, t = {}, util.tally()
    assert(env.b:post_recv(env.rl))
    for i = 0, 63 do posted[i] = true end -- the receives: wr_id 0..63
    local next_id, inflight = 1000, 0
    local down_at = util.later(0.5, "ip link set d0 down")
    local t0, failed = ibv.now(), nil
    local quiet_since = ibv.now() -- the last completion (rxe may lose a WR in flight: then none comes)
    while ibv.now() - t0 < BOUND + 1 and not failed do
      while inflight < 16 do
        local ok = env.a:post_send{ wr_id = next_id, opcode = "send", send_flags = { "signaled" }, inline = "x" }
        if not ok then failed = "post"; break end
        posted[next_id], next_id, inflight = true, next_id + 1, inflight + 1
      end
      local n = env.cq:poll(env.wcs)
      t:add(env.wcs, n)
      if n > 0 then
        quiet_since = ibv.now()
      elseif ibv.now() - quiet_since > 2 and down_at(0) then
        failed = "stalled" -- nothing completes since the link went down: flushed below
      end
      for i = 1, n do
        local st = env.wcs:status(i)
        if st ~= "success" then failed = failed or st end
        if env.wcs:wr_id(i) >= 1000 then inflight = inflight - 1
        elseif st == "success" then -- repost the receive with a fresh id
          local rid = next_id; next_id = next_id + 1
          assert(env.b:post_recv{ wr_id = rid, sge = { mr = env.mr, length = 64 } })
          posted[rid] = true
        end
      end
    end
    local t_end = ibv.now()
    assert(failed, "the loop saw no error in " .. BOUND .. " s")
    local dt = t_end - assert(down_at(), "the link did not go down")
    assert(dt < BOUND, string.format("the loop ended %.2f s after the link went down", dt))
    assert.truthy(events(env.ctx, 1):find("port_err"))
    assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
    util.drain(env.cq, env.wcs, t, 0.3, 10)
    local missing, dup, unknown = t:check(posted)
    assert.same({ 0, 0, 0 }, { missing, dup, unknown })
    print(string.format("  Lua loop: error '%s' %.2f s after the link went down; %d WRs, each once",
      failed, dt, t.total))
    close(env)
    link("up")
    fresh_pair_works()
  end)

  it("link down during ibv.transfer: it returns within the bound with counts that add up", function()
    local env = pair()
    assert(env.b:post_recv(env.rl))
    local sl = ibv.send_wrs(1)
    sl:set(1, { wr_id = 7, opcode = "send", send_flags = { "signaled" }, inline = "x" })
    local down_at = util.later(0.5, "ip link set d0 down")
    local st, msg, errno, counts = ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl, recv = env.b,
      recv_cq = env.cq, recv_wrs = env.rl, count = 1000000000, window = 16, timeout = 2 }
    local t_end = ibv.now()
    assert.is_nil(st)
    local dt = t_end - assert(down_at(), "the link did not go down")
    -- an error completion, or (when rxe lost the WR in flight) the idle timeout
    assert(dt < BOUND, string.format("transfer returned %.2f s after the link went down", dt))
    assert.truthy(msg:find("wc status") or errno == 110, msg)
    assert.truthy(events(env.ctx, 1):find("port_err"))
    assert(env.a:modify{ qp_state = "err" }); assert(env.b:modify{ qp_state = "err" })
    local t = util.tally()
    util.drain(env.cq, env.wcs, t, 0.3, 10)
    -- posted = completed in the loop (success or error) + flushed after it
    local posted = counts.send_posted + counts.recv_posted
    local seen = counts.sent + counts.received + counts.errors + t.total
    assert.equal(posted, seen)
    print(string.format("  transfer: '%s' %.2f s after the link went down; %d sends, %d receives posted, " ..
      "%d + %d completions", msg, dt, counts.send_posted, counts.recv_posted,
      counts.sent + counts.received + counts.errors, t.total))
    close(env)
    link("up")
    fresh_pair_works()
  end)

  it("peer killed (kill -9) during ibv.transfer: retry-exceeded within the QP's retry budget", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(util.sh("mkdir -p " .. dir))
    local peer = util.start("spec/faults/peer.lua", "verbs " .. dir)
    local ok, err = pcall(function()
      local env = { ctx = support.open() }
      env.pd = assert(env.ctx:alloc_pd())
      env.cq = assert(env.ctx:create_cq(256))
      local cap = { max_send_wr = 64, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1 }
      env.a = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
      local f = assert(io.open(dir .. "/survivor.tmp", "w")); f:write(env.a.qp_num); f:close()
      os.rename(dir .. "/survivor.tmp", dir .. "/survivor")
      local remote
      for _ = 1, 500 do
        remote = util.slurp(dir .. "/peer")
        if remote then break end
        util.sleep(0.02)
      end
      -- a short retry budget: 4.096 us * 2^12 = 17 ms per try, 2 retries
      assert(env.a:connect({ qpn = tonumber(remote), gid = GID },
        { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" }, timeout = 12, retry_cnt = 2 }))
      assert(peer:expect("ready\n", 20))
      env.mr = assert(env.pd:reg_mr(64, { "local_write" }))
      local sl = ibv.send_wrs(1)
      sl:set(1, { wr_id = 9, opcode = "send", send_flags = { "signaled" }, inline = "x" })
      local killed_at = util.later(0.5, "kill -9 " .. peer.pid)
      local st, msg, _, counts = ibv.transfer{ send_qp = env.a, send_cq = env.cq, send_wrs = sl,
        count = 1000000000, window = 16, timeout = BOUND }
      local t_end = ibv.now()
      assert.is_nil(st)
      assert.truthy(msg:find("wc status"), msg) -- retry exceeded, or a NAK of the dying QP
      local dt = t_end - assert(killed_at(), "the peer was not killed")
      assert(dt < 2, string.format("transfer returned %.2f s after the kill", dt))
      assert(env.a:modify{ qp_state = "err" })
      local t = util.tally()
      util.drain(env.cq, ibv.wc_array(64), t, 0.3, 10)
      assert.equal(counts.send_posted, counts.sent + counts.errors + t.total)
      print(string.format("  peer killed: '%s' %.2f s after; %d sends, each accounted for", msg, dt,
        counts.send_posted))
      close(env)
    end)
    peer.cleanup()
    os.execute("rm -rf " .. dir)
    assert(ok, err)
  end)

  it("peer killed (kill -9) after an rdma_cm connect: the survivor sees disconnected", function()
    local port = 7900 + math.random(0, 99)
    local peer = util.start("spec/faults/peer.lua", "cm " .. port)
    local ok, err = pcall(function()
      assert(peer:expect("ready\n", 20))
      local ch = assert(cm.event_channel())
      local id = assert(ch:create_id{ ps = "tcp" })
      assert(id:resolve_addr(nil, "192.0.2.1:" .. port, 2000))
      assert(cm.expect(ch, "addr_resolved", 5))
      assert(id:resolve_route(2000))
      assert(cm.expect(ch, "route_resolved", 5))
      assert(id:connect{ qp_num = 0x1234 })
      assert(cm.expect(ch, "connect_response", 10))
      assert(id:establish())
      assert(peer:expect("established\n", 10))
      local t0 = ibv.now()
      peer:kill("KILL")
      local ev, msg = ch:get_event(BOUND)
      local dt = ibv.now() - t0
      assert(ev, msg)
      assert.equal("disconnected", ev.event)
      print(string.format("  rdma_cm: '%s' %.2f s after kill -9", ev.event, dt))
      assert(id:close()); assert(ch:close())
    end)
    peer.cleanup()
    assert(ok, err)
  end)
end)
