--- bench/ffi_post_poll.lua: receive posting and polling, the FFI path against
-- the C reference loop and against the batched Lua API, in one process.
--
--   bench/run ffi_post_poll      -- both interpreters, one boot of the soft-RoCE VM
--
-- One QP in INIT and its CQ on rxe0.  A round posts a prepared list of BATCH
-- receive WRs ROUND/BATCH times and polls the CQ (BATCH entries) after each
-- post; then the QP goes to RESET and back to INIT, untimed, to empty its
-- receive queue.  Every variant posts the same list memory and polls into
-- the same wc array:
--   C        bench/cref.c: ibv_post_recv + ibv_poll_cq in a C loop (one call per round)
--   lua-api  qp:post_recv(list); cq:poll(wcs)
--   ffi      xffi.post_recv(q, span); xffi.poll_cq(c, wcspan)     (LuaJIT only)
--   ffi-raw  the ibvl_ffi_* calls on the chain as it is          (LuaJIT only)
-- rxe posts and polls in user space (no system call), so these rates show
-- what each path costs on top of the provider.  Under qemu TCG the absolute
-- numbers mean little; the ratios, taken in the same run, are the result.
local ibv = require "ibverbs"
local cref = require "cref"
local core = require "ibverbs.core"

local DEVICE = os.getenv("IBV_BENCH_DEVICE") or "rxe0"
local BATCH = tonumber(os.getenv("BATCH")) or 32
local ROUND = tonumber(os.getenv("ROUND")) or 4096
local REPS = tonumber(os.getenv("REPS")) or 7

local ctx = assert(ibv.open(DEVICE))
local pd = assert(ctx:alloc_pd())
local cq = assert(ctx:create_cq{ cqe = BATCH })
local qp = assert(pd:create_qp{ qp_type = "rc", send_cq = cq, recv_cq = cq,
                                cap = { max_send_wr = 1, max_recv_wr = ROUND, max_recv_sge = 1 } })
assert(qp.cap.max_recv_wr >= ROUND, "the device granted fewer receive WRs than ROUND")
local mr = assert(pd:reg_mr(BATCH * 64, ibv.ACCESS_LOCAL_WRITE))
local list = ibv.recv_wrs(BATCH)
list:fill{ sg_list = { { mr = mr, offset = 0, length = 64 } }, stride = 64 }
local wcs = ibv.wc_array(BATCH)
local batches = math.floor(ROUND / BATCH)

local function empty_rq()
  assert(qp:modify{ qp_state = "reset" })
  assert(qp:to_init())
end

local variants, order = {}, {}
local function variant(name, round)
  variants[name] = { round = round, rates = {} }
  order[#order + 1] = name
end

local qp_ptr, cq_ptr = core.rawptr(qp), core.rawptr(cq)
local wr_ptr, wc_ptr = core.rawmem(list), core.rawmem(wcs)
variant("C", function()
  return cref.post_poll(qp_ptr, cq_ptr, wr_ptr, wc_ptr, batches, BATCH)
end)

variant("lua-api", function()
  local polled = 0
  for _ = 1, batches do
    local ok, msg = qp:post_recv(list)
    if not ok then error(msg) end
    polled = polled + cq:poll(wcs)
  end
  return polled
end)

if jit then
  local xffi = require "ibverbs.ffi"
  local ffi = require "ffi"
  local q, c = xffi.qp(qp), xffi.cq(cq)
  local rw, wc = xffi.recv_wrs(list), xffi.wc_array(wcs)
  local post_recv, poll_cq = xffi.post_recv, xffi.poll_cq
  variant("ffi", function()
    local polled = 0
    for _ = 1, batches do
      local ok, msg = post_recv(q, rw)
      if not ok then error(msg) end
      polled = polled + poll_cq(c, wc)
    end
    return polled
  end)
  local C, bad, wrp, wcp = xffi.C, ffi.new("struct ibv_recv_wr *[1]"), rw.p, wc.p
  variant("ffi-raw", function()
    local polled = 0
    for _ = 1, batches do
      local rc = C.ibvl_ffi_post_recv(q, wrp, bad)
      if rc ~= 0 then error("ibvl_ffi_post_recv: " .. rc) end
      polled = polled + C.ibvl_ffi_poll_cq(c, BATCH, wcp)
    end
    return polled
  end)
end

empty_rq()
for rep = 0, REPS do -- rep 0 warms up (and lets LuaJIT compile the loops)
  for _, name in ipairs(order) do
    local v = variants[name]
    local t0 = ibv.now()
    local polled = v.round()
    local dt = ibv.now() - t0
    assert(polled == 0, "completions on an idle QP")
    empty_rq()
    if rep > 0 then v.rates[#v.rates + 1] = ROUND / dt end
  end
end

local function median(t)
  table.sort(t)
  return t[math.floor((#t + 1) / 2)]
end

local interp = jit and jit.version or _VERSION
print(("%s: %d receive WRs per round in batches of %d, poll after each batch, median of %d rounds"):format(
  interp, ROUND, BATCH, REPS))
local c_rate = median(variants.C.rates)
for _, name in ipairs(order) do
  local rate = median(variants[name].rates)
  print(("  %-8s %10.0f WR/s   %.3f of C"):format(name, rate, rate / c_rate))
  -- a line bench/run gathers across interpreters
  print(("RESULT %s %s %.0f %.4f"):format(jit and "luajit" or "lua5.4", name, rate, rate / c_rate))
end
