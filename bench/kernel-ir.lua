--- bench/kernel-ir.lua: the report of bench/run-kernel-ir from its callgrind
-- profiles: instructions per iteration of perftest's clients and of the
-- kernels' clients, marginal over N and 2N iterations, with and without the
-- empty polls, split by where they ran.
--
--   lua5.4 bench/kernel-ir.lua DIR N BN REPS "TESTS"
--
-- DIR holds <impl>.<test>.<n>.<rep>.out (impl c: perftest, lua: the example
-- on the kernel) and the client's output <...>.txt (a run whose client did
-- not print its result line is left out).  Per profile: the total (but
-- perftest's measurement of the CPU's clock at start-up, which calls
-- gettimeofday for a fixed time, a count that depends on timing), the self
-- cost of each object file grouped (provider: libibverbs and librxe;
-- module: ibverbs/core.so; program: perftest's executable; interpreter:
-- lua5.4 and liblua; libc; other: the dynamic loader and the rest), and P,
-- the calls of the provider's poll function (librxe's poll_cq: the librxe
-- function core.so's ibvl_kern_poll or ibvl_cq_poll calls; every
-- ibv_poll_cq, an inline function of verbs.h, calls it directly).
--
-- Empty polls: a client that waits for its peer (or, in a bandwidth run,
-- for room in its window) polls an empty CQ or spins on memory, and how
-- often depends on timing, not on the work.  Each client's counts are
-- fitted, over its 2 x REPS profiles, as Ir = c + a n + b W (least
-- squares), W the empty polls of the run:
--   perftest's latency clients poll one completion a call: W = P - p n,
--     p = 2 for send_lat (its send's and its receive's completion), 1 for
--     write_lat, which also spins on memory: W adds the executions of its
--     executable's hottest instruction (the check of the spin loop) beyond
--     one per iteration, priced alike;
--   a latency kernel: its polls that found nothing and its spins on memory
--     (counted by their calls of ibvl_sigint_pending, which only those make);
--   the bandwidth clients: W = P - p n, p the polls a post: 1/64 for both
--     send_bw clients (a chain of 64 a pass), 0 for ib_write_bw and
--     write_bw.lua (ibv.bw alone: both poll only when the window is full or
--     every message is posted).
-- When W is the same share of every run's iterations (within 0.005 a
-- iteration: no run waited more than another), the plain marginal.
-- b is then what one more empty poll costs the client, and a its
-- instructions per iteration without them ("no empty polls"); the split
-- fits each group alike (the groups add up to the total).  "fit's miss" is
-- the largest distance of a run from the fitted plane, per iteration of
-- the shorter run: how well c + a n + b W explains the runs.
-- The last table also splits each fitted figure into the sort of the samples
-- (perftest's qsort with its comparison; the kernel's sort_keys, a radix
-- sort of the ticks as it ends: the inclusive cost of their calls, a plain
-- marginal) and the rest (the loop, the other statistics).
local dir, N, BN, REPS, TESTS = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]), arg[5]

local GROUPS = { "provider", "module", "program", "interpreter", "libc", "other" }
local function group(obj)
  if obj:find("libibverbs", 1, true) or obj:find("librxe", 1, true) then return "provider" end
  if obj:find("ibverbs/core.so", 1, true) then return "module" end
  if obj:find("/ib_[%a_]+$") then return "program" end
  if obj:find("lua", 1, true) then return "interpreter" end
  if obj:find("/libc.so", 1, true) then return "libc" end
  return "other"
end

-- One profile: {total =, self = {group = Ir}, calls = {["obj fn"] = count}, calls_from = {["fn>obj fn"] = count},
-- incl = {[fn] = Ir of its calls, its callees' included}, hot = {[obj] = the highest count of one
-- instruction (what is left out aside)}, left_out = Ir}
local function profile(path)
  local f = io.open(path)
  if not f then return nil end
  local names = { ob = {}, fn = {} }
  local p = { total = 0, self = {}, calls = {}, calls_from = {}, hot = {}, incl = {} }
  for _, g in ipairs(GROUPS) do p.self[g] = 0 end
  local ob, fn, cob, cfn, pending = "?", "?", nil, nil, nil
  local addr = 0
  local function name(kind, id, rest)
    if rest ~= "" then names[kind][id] = rest end
    return names[kind][id] or "?"
  end
  local counts, selfs = {}, {}
  for line in f:lines() do
    local c = line:byte(1)
    if c and (c >= 48 and c <= 57 or c == 43 or c == 45 or c == 42) then -- a cost line
      local pos, ir = line:match("^(%S+)%s+%S+%s+(%d+)")
      if pos then
        if pos:sub(1, 2) == "0x" then addr = tonumber(pos:sub(3), 16)
        elseif pos:sub(1, 1) == "+" or pos:sub(1, 1) == "-" then addr = addr + tonumber(pos) end
        ir = tonumber(ir)
        if pending then
          local callee = (cob or ob) .. " " .. (cfn or "?")
          p.calls[callee] = (p.calls[callee] or 0) + pending
          p.incl[cfn or "?"] = (p.incl[cfn or "?"] or 0) + ir -- a call's line: its inclusive cost
          local key = fn .. ">" .. callee
          p.calls_from[key] = (p.calls_from[key] or 0) + pending
          pending, cob = nil, nil
        else
          local key = ob .. " " .. fn
          selfs[key] = (selfs[key] or 0) + ir
          local at = counts[key] or {}
          counts[key] = at
          at[addr] = (at[addr] or 0) + ir
        end
      end
    else
      local kind, id, rest = line:match("^(c?[of][bn])=%((%d+)%)%s*(.*)$")
      if kind == "ob" then ob = name("ob", id, rest); cob = nil
      elseif kind == "fn" then fn = name("fn", id, rest); cob = nil
      elseif kind == "cob" then cob = name("ob", id, rest)
      elseif kind == "cfn" then cfn = name("fn", id, rest)
      elseif line:sub(1, 6) == "calls=" then pending = tonumber(line:match("^calls=(%d+)"))
      end
    end
  end
  f:close()
  -- perftest measures the CPU's clock at start-up by calling gettimeofday for a while: that function of
  -- its executable (the one calling __gettimeofday_syscall most) and gettimeofday itself are left out
  local clock, most = nil, 0
  for key, v in pairs(p.calls_from) do
    local caller = key:match("^(.-)>.*gettimeofday")
    if caller and v > most then clock, most = caller, v end
  end
  p.left_out = 0
  for key, ir in pairs(selfs) do
    local obj, fname = key:match("^(.*) (%S+)$")
    if (clock and most > 1000 and fname == clock and group(obj) == "program") or fname:find("gettimeofday") then
      p.left_out = p.left_out + ir
    else
      p.total = p.total + ir
      local g = group(obj)
      p.self[g] = p.self[g] + ir
      for _, v in pairs(counts[key] or {}) do
        if v > (p.hot[obj] or 0) then p.hot[obj] = v end
      end
    end
  end
  return p
end


-- Least squares y = c + a x + b w over the points; a, b, c (nil when the points do not determine them).
local function fit(xs, ws, ys)
  local m = #xs
  local S = { { 0, 0, 0 }, { 0, 0, 0 }, { 0, 0, 0 } }
  local r = { 0, 0, 0 }
  for i = 1, m do
    local v = { 1, xs[i], ws[i] }
    for j = 1, 3 do
      r[j] = r[j] + v[j] * ys[i]
      for k = 1, 3 do S[j][k] = S[j][k] + v[j] * v[k] end
    end
  end
  -- Gaussian elimination with partial pivoting
  for col = 1, 3 do
    local piv = col
    for row = col + 1, 3 do if math.abs(S[row][col]) > math.abs(S[piv][col]) then piv = row end end
    S[col], S[piv], r[col], r[piv] = S[piv], S[col], r[piv], r[col]
    if math.abs(S[col][col]) < 1e-9 * (math.abs(S[1][1]) + 1) then return nil end
    for row = col + 1, 3 do
      local f = S[row][col] / S[col][col]
      for k = col, 3 do S[row][k] = S[row][k] - f * S[col][k] end
      r[row] = r[row] - f * r[col]
    end
  end
  local x = {}
  for row = 3, 1, -1 do
    local acc = r[row]
    for k = row + 1, 3 do acc = acc - S[row][k] * x[k] end
    x[row] = acc / S[row][row]
  end
  return x[2], x[3], x[1]
end

-- p, the polls per iteration the work needs (the header says why).
local P_MIN = { c = { send_lat = 2, write_lat = 1, send_bw = 1 / 64 },
                lua = { write_bw = 0, send_bw = 1 / 64 } }

local profiles = {}
local poll_fn -- "obj fn" of the provider's poll function
-- A run counts when its client printed its result line (bytes, then the iterations).
local function finished(impl, test, n, rep)
  local f = io.open(("%s/%s.%s.%d.%d.txt"):format(dir, impl, test, n, rep))
  if not f then return false end
  local s = f:read("a")
  f:close()
  return s:find("\n%s*%d+%s+" .. n .. "%s") ~= nil
end

local function load(impl, test, n, rep)
  if not finished(impl, test, n, rep) then
    io.stderr:write(("kernel-ir: %s %s -n %d (run %d) did not finish: left out\n"):format(impl, test, n, rep))
    return nil
  end
  local p = profile(("%s/%s.%s.%d.%d.out"):format(dir, impl, test, n, rep))
  if p then profiles[#profiles + 1] = p end
  return p
end

local rows = {}
for test in TESTS:gmatch("%S+") do
  local n1 = test:find("_bw$") and BN or N
  for _, impl in ipairs({ "c", "lua" }) do
    local runs = {}
    for rep = 1, REPS do
      for k = 1, 2 do
        local p = load(impl, test, k * n1, rep)
        if p then runs[#runs + 1] = { n = k * n1, p = p, test = test, impl = impl, rep = rep } end
      end
    end
    rows[#rows + 1] = { test = test, impl = impl, n1 = n1, runs = runs }
  end
end
for _, p in ipairs(profiles) do
  for key, v in pairs(p.calls_from) do
    local callee = key:match("^ibvl_kern_poll>(.*librxe.*)$") or key:match("^ibvl_cq_poll>(.*librxe.*)$")
    if callee and v > 0 then poll_fn = callee end
  end
end

if not poll_fn then -- no kernel profile: the provider's function called most
  local most = 0
  for _, p in ipairs(profiles) do
    for callee, v in pairs(p.calls) do
      if callee:find("librxe", 1, true) and v > most then poll_fn, most = callee, v end
    end
  end
end

-- W, the empty polls of one run (the header says which); run.polls gets P.
local function waits(run)
  local p = run.p
  local polls = poll_fn and p.calls[poll_fn] or 0
  run.polls = polls
  if run.impl == "lua" and run.test:find("_lat$") then
    local empty = 0
    for key, v in pairs(p.calls_from) do if key:find(">.*ibvl_sigint_pending$") then empty = empty + v end end
    return empty
  end
  local w = polls - (P_MIN[run.impl][run.test] or 0) * run.n
  if run.impl == "c" and run.test == "write_lat" then
    local hot = 0
    for ob, v in pairs(p.hot) do if group(ob) == "program" then hot = math.max(hot, v) end end
    w = w + math.max(0, hot - run.n) -- the memory check runs once an iteration, and once more a spin
  end
  return w
end

local function fmt(v, d) return v and string.format("%." .. (d or 1) .. "f", v) or "-" end

print(string.format("Instructions per iteration under callgrind (client only, marginal over N and 2N; " ..
  "N = %d round trips, %d messages; %d runs of each)", N, BN, REPS))
print("provider's poll function: " .. tostring(poll_fn))
print("")
print("| work | client | Ir/iter (raw) | polls/iter | waits/iter | Ir per wait | Ir/iter, no empty polls | " ..
  "fit's miss | provider | module | program | interpreter | libc | other |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
local excl, sort_of = {}, {}
-- The sort of the samples in a profile: perftest's qsort (libc's, with perftest's comparison), the
-- kernel's sort_keys (radix on the ticks, as the kernel ends), each with all it calls.
local function sort_ir(p) return (p.incl["qsort"] or 0) + (p.incl["sort_keys"] or 0) end
for _, row in ipairs(rows) do
  local runs = row.runs
  local xs, ws, ys, gys = {}, {}, {}, {}
  local raw, rawp, raww, pairs_n = 0, 0, 0, 0
  for _, g in ipairs(GROUPS) do gys[g] = {} end
  for _, r in ipairs(runs) do
    r.w = waits(r)
    xs[#xs + 1], ws[#ws + 1], ys[#ys + 1] = r.n, r.w, r.p.total
    for _, g in ipairs(GROUPS) do gys[g][#gys[g] + 1] = r.p.self[g] end
  end
  for i = 1, #runs - 1 do
    local a, b = runs[i], runs[i + 1]
    if a.rep == b.rep and b.n == 2 * a.n then
      raw = raw + (b.p.total - a.p.total) / row.n1
      rawp = rawp + (b.polls - a.polls) / row.n1
      raww = raww + (b.w - a.w) / row.n1
      pairs_n = pairs_n + 1
    end
  end
  if pairs_n > 0 then
    raw, rawp, raww = raw / pairs_n, rawp / pairs_n, raww / pairs_n
    local a, b, c = fit(xs, ws, ys)
    -- the empty polls the same share of every run's iterations: they are part of the work (no run waited
    -- more than another), the plain marginal; otherwise a fit the runs cannot determine gives nothing
    local wmin, wmax = math.huge, -math.huge
    for i, w in ipairs(ws) do wmin, wmax = math.min(wmin, w / xs[i]), math.max(wmax, w / xs[i]) end
    local flat = #ws > 0 and wmax - wmin < 0.005
    if flat then a, b, c = nil, nil, nil end
    local miss = nil -- the fit's worst miss over the runs, per iteration of the shorter run
    if a and #xs > 3 then
      miss = 0
      for i = 1, #xs do miss = math.max(miss, math.abs(ys[i] - c - a * xs[i] - b * ws[i]) / row.n1) end
    end
    local split = {}
    for _, g in ipairs(GROUPS) do
      local ag = fit(xs, ws, gys[g])
      if flat then
        ag = 0
        for i = 1, #runs - 1 do
          if runs[i].rep == runs[i + 1].rep and runs[i + 1].n == 2 * runs[i].n then
            ag = ag + (gys[g][i + 1] - gys[g][i]) / row.n1 / pairs_n
          end
        end
      end
      split[#split + 1] = fmt(ag)
    end
    local e = a
    if flat then e = raw end
    excl[row.test .. "." .. row.impl] = e
    local sorts = 0 -- the sort of the samples: no empty polls in it, the plain marginal
    for i = 1, #runs - 1 do
      local a1, b1 = runs[i], runs[i + 1]
      if a1.rep == b1.rep and b1.n == 2 * a1.n then
        sorts = sorts + (sort_ir(b1.p) - sort_ir(a1.p)) / row.n1 / pairs_n
      end
    end
    sort_of[row.test .. "." .. row.impl] = sorts
    print(string.format("| %s | %s | %s | %s | %s | %s | %s | %s | %s |", row.test,
      row.impl == "c" and "perftest" or "kernel", fmt(raw), fmt(rawp, 2), fmt(raww, 2), fmt(b), fmt(e),
      fmt(miss), table.concat(split, " | ")))
  end
end
print("")
print("| work | perftest Ir/iter | kernel Ir/iter | kernel / perftest | perftest: sort / the rest | " ..
  "kernel: sort / the rest | the rest: kernel / perftest |")
print("|---|---|---|---|---|---|---|")
for test in TESTS:gmatch("%S+") do
  local c, l = excl[test .. ".c"], excl[test .. ".lua"]
  local cs, ls = sort_of[test .. ".c"], sort_of[test .. ".lua"]
  local cr, lr = c and cs and c - cs, l and ls and l - ls
  print(string.format("| %s | %s | %s | %s | %s / %s | %s / %s | %s |", test, fmt(c), fmt(l),
    c and l and fmt(l / c, 3) or "-", fmt(cs), fmt(cr), fmt(ls), fmt(lr), cr and lr and fmt(lr / cr, 3) or "-"))
end
