-- Exactly-once completions when a QP goes to the error state: every posted
-- WR comes back once, the unfinished ones as wr_flush_err; an SRQ keeps its
-- receives through the error of a QP using it (last_wqe_reached) and hands
-- each out once.
local ibv = require "ibverbs"
local support = require "support"
local util = require "faults.util"

local GID = "::ffff:192.0.2.1"

-- ctx, pd, a CQ of cqe entries, QPs a and b (b receiving), connected;
-- a's peer is qp number `to` when given (nobody: its sends never finish).
local function setup(n, opts)
  opts = opts or {}
  local env = { ctx = support.open() }
  env.pd = assert(env.ctx:alloc_pd())
  env.cq = assert(env.ctx:create_cq(n + 64))
  local cap = { max_send_wr = n, max_recv_wr = n, max_send_sge = 1, max_recv_sge = 1 }
  env.srq = opts.srq and assert(env.pd:create_srq{ max_wr = n, max_sge = 1 }) or nil
  env.a = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
  env.b = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap, srq = env.srq })
  local conn = { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" }, timeout = 14, retry_cnt = 7 }
  assert(env.a:connect({ qpn = opts.to or env.b.qp_num, gid = GID }, conn))
  assert(env.b:connect({ qpn = env.a.qp_num, gid = GID }, conn))
  env.mr = assert(env.pd:reg_mr(64, { "local_write" }))
  env.wcs = ibv.wc_array(256)
  return env
end

local function close(env)
  for _, k in ipairs{ "a", "b", "a2", "b2", "srq", "cq", "mr", "pd", "ctx" } do
    if env[k] then assert(env[k]:close()) end
  end
end

local function max_wr(ctx)
  local d = ctx:query_device()
  return math.min(d.max_qp_wr, d.max_srq_wr or d.max_qp_wr, 16384)
end

-- Posts n WRs with wr_id base+1 .. base+n through a prepared list; returns the id set.
local function post(target, kind, env, n, base)
  local list = kind == "recv" and ibv.recv_wrs(n) or ibv.send_wrs(n)
  local wr = { wr_id = base + 1, sge = { mr = env.mr, length = 64 } }
  if kind == "send" then wr.opcode, wr.send_flags = "send", { "signaled" } end
  list:fill(wr)
  local posted = {}
  for i = 1, n do posted[base + i] = true end
  local ok, msg = target["post_" .. kind](target, list)
  assert(ok, msg)
  return posted
end

-- Posts k send WRs of sl from first on qp and waits for their 2k completions
-- (the sends and the peer's receives), each a success; the receives go into t.
local function send_counted(env, qp, sl, first, k, t)
  assert(qp:post_send(sl, first, k))
  local got = 0
  while got < 2 * k do
    local c = assert(env.cq:wait(env.wcs, math.min(2 * k - got, 256), 10))
    assert(c > 0, "no completion")
    for i = 1, c do
      assert.equal("success", env.wcs:status(i))
      if env.wcs:opcode(i) == "recv" then
        local id = env.wcs:wr_id(i)
        t.seen[id] = (t.seen[id] or 0) + 1
        t.total = t.total + 1
      end
    end
    got = got + c
  end
end

describe("on rxe0, a QP moved to the error state #once", function()
  local base, last_wqe_missing
  before_each(function() base = util.baseline() end)
  after_each(function()
    local ok, now = util.back_to(base)
    assert(ok, "kernel objects left: " .. util.format_resources(now or {}) .. " (was " ..
      util.format_resources(base) .. ")")
  end)

  local function sizes()
    local ctx = support.open()
    local m = max_wr(ctx)
    ctx:close()
    return { 1, 64, m }
  end

  for _, kind in ipairs{ "recv", "send" } do
    it("returns every posted " .. kind .. " WR exactly once (N = 1, 64, queue max), unfinished as wr_flush_err",
      function()
        for _, n in ipairs(sizes()) do
          -- sends go to a QP number nobody has: none can finish before the flush
          local env = setup(n, { to = kind == "send" and 0xfffff0 or nil })
          local target = kind == "recv" and env.b or env.a
          local posted = post(target, kind, env, n, 1000)
          assert(target:modify{ qp_state = "err" })
          local t = util.tally()
          util.drain(env.cq, env.wcs, t, 0.3, 20)
          local missing, dup, unknown = t:check(posted)
          assert.same({ n, 0, 0, 0 }, { t.total, missing, dup, unknown })
          assert.equal(n, (t.status.wr_flush_err or 0) + (t.status.retry_exc_err or 0))
          if kind == "recv" then assert.equal(n, t.status.wr_flush_err) end
          close(env)
        end
      end)
  end

  it("on an SRQ: the QP's error leaves the SRQ's receives to others, each used once (last_wqe_reached)", function()
    for _, n in ipairs{ 1, 64, 1024 } do
      local env = setup(n, { srq = true })
      local posted = post(env.srq, "recv", env, n, 5000)
      local half = math.max(1, math.floor(n / 2))
      local sl = ibv.send_wrs(half)
      for i = 1, half do sl:set(i, { wr_id = i, opcode = "send", send_flags = { "signaled" }, inline = "x" }) end
      -- send WRs go in chunks the send queue holds
      local t = util.tally()
      local sent = 0
      while sent < half do
        local k = math.min(64, half - sent)
        send_counted(env, env.a, sl, sent + 1, k, t)
        sent = sent + k
      end
      assert(env.b:modify{ qp_state = "err" })
      -- the event a QP on an SRQ owes when it goes to error; rxe in Linux 6.1 does
      -- not send it (checked: none within 1 s), a device that does must name the QP
      local ev = env.ctx:get_async_event(1)
      while ev and ev.type ~= "qp_last_wqe_reached" do ev = env.ctx:get_async_event(1) end
      if ev then assert.equal(env.b, ev.qp) else last_wqe_missing = true end
      -- nothing of the SRQ is flushed by the QP's error
      local extra = util.tally()
      util.drain(env.cq, env.wcs, extra, 0.3, 5)
      assert.equal(0, extra.total)
      -- a fresh pair on the same SRQ gets the rest, each once
      local rest = n - half
      if rest > 0 then
        local cap = { max_send_wr = 64, max_recv_wr = 1, max_send_sge = 1, max_recv_sge = 1 }
        env.a2 = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap })
        env.b2 = assert(env.pd:create_qp{ qp_type = "rc", send_cq = env.cq, recv_cq = env.cq, cap = cap,
                                          srq = env.srq })
        local conn = { sgid_index = support.GID_INDEX, qp_access_flags = { "local_write" } }
        assert(env.a2:connect({ qpn = env.b2.qp_num, gid = GID }, conn))
        assert(env.b2:connect({ qpn = env.a2.qp_num, gid = GID }, conn))
        local done = 0
        while done < rest do
          local k = math.min(64, rest - done)
          send_counted(env, env.a2, sl, 1, k, t)
          done = done + k
        end
      end
      local missing, dup, unknown = t:check(posted)
      assert.same({ n, 0, 0, 0 }, { t.total, missing, dup, unknown })
      close(env)
    end
    if last_wqe_missing then print("  (rxe0 sent no qp_last_wqe_reached: Linux 6.1 rxe does not generate it)") end
  end)
end)
