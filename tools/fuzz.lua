--- tools/fuzz.lua: the project's adversarial fuzzer (run it next to a device:
-- inside tools/rxe-vm).
--
--   lua5.4 tools/fuzz.lua [--seeds 1-4] [--interp lua5.4,luajit,san] [--calls 3000]
--                         [--time 20] [--timeout 60] [--out .cache/fuzz] [--tail 25] [--minimize 60]
--
-- Each (interpreter, seed) runs in its own child process under a timeout, so
-- a crash is a signal or a sanitizer report and a hang is a timeout, never
-- the end of the fuzzer.  A child makes random method calls with random, often
-- bad, arguments on every object type (spec/fuzz/gen.lua and its parts
-- spec/fuzz/gen_*.lua), logging each call as a line of Lua before it runs it.
-- For each failing run the driver writes a reproducer (the crashing call, the
-- calls that made the objects it uses, and the last --tail calls before it;
-- then greedily shortened with up to --minimize reruns) to --out.  Per run it
-- prints the seed, calls made, Lua errors raised, nil returns and crashes; at
-- the end "fuzz: N runs, ..., N failed"; it exits 1 when a run failed.
--
-- --skip 'pat;pat' leaves out generated calls matching a Lua pattern (to set a
-- known crash aside and look for others).  --attacks a,b keeps only those
-- attack classes (gen.attacks, from spec/fuzz/gen_attacks.lua: finalizer_timing,
-- weak_tables, shifting_fields, replaced_gc, shared_cq, ffi_edits,
-- batch_held_lists, plain_collection; "none": only random calls and
-- scenarios); --attack-rate P makes P% of the steps attacks (default 18).
-- Interpreters: lua5.4 and luajit use build/<interp>; "ibvlua" is the scripting
-- host (build/lua5.4/ibvlua, everything built in); "san" is lua5.4 with the
-- ASan/UBSan build (make SAN=address,undefined: build/lua5.4-san) and libasan
-- preloaded.
local CHILD_USAGE = "tools/fuzz.lua --child --seed N --calls N --time S --log FILE"

local function parse_args(argv)
  local o = {}
  local i = 1
  while i <= #argv do
    local a = argv[i]
    local k = a:match("^%-%-(.+)$")
    if not k then error("fuzz: unexpected argument '" .. a .. "'") end
    if k == "child" or k == "help" then
      o[k] = true
    else
      i = i + 1
      o[k] = argv[i] or error("fuzz: --" .. k .. " needs a value")
    end
    i = i + 1
  end
  return o
end

local opts = parse_args(arg)

-- ------------------------------------------------------------------ child

local function child()
  local seed = tonumber(opts.seed) or error(CHILD_USAGE)
  local calls = tonumber(opts.calls or 2000)
  local budget = tonumber(opts.time or 20)
  local log = assert(io.open(opts.log or error(CHILD_USAGE), "w"))
  local F = require "fuzz.prelude"
  local gen = require "fuzz.gen"
  local ibv, cm = F.ibv, F.cm
  local env = setmetatable({ T = F.T, O = F.O, F = F, ibv = ibv, cm = cm }, { __index = _G })
  local setfenv = rawget(_G, "setfenv")
  local function compile(src)
    if setfenv then
      local f, err = loadstring(src, "=fuzz") -- luacheck: ignore
      if f then setfenv(f, env) end
      return f, err
    end
    return load(src, "=fuzz", "t", env)
  end
  local g = gen.new(seed, F.O, gen.discover(ibv), gen.functions(ibv, cm),
    { jit = rawget(_G, "jit") ~= nil, attacks = opts.attacks, attack_rate = tonumber(opts["attack-rate"]) })
  local start = ibv.now()
  local n = 0
  local port = 20000 + (seed * 97) % 20000
  local skip = {}
  for p in (opts.skip or ""):gmatch("[^;]+") do skip[#skip + 1] = p end
  local function skipped(src)
    for _, p in ipairs(skip) do if src:find(p) then return true end end
    return false
  end
  local function run(lines)
    for _, l in ipairs(lines) do
      local src, slot = l[1], l[2]
      if skipped(src) then break end -- a known crash being set aside: the rest of the step too
      log:write(src, "\n")
      log:flush()
      local f, err = compile(src)
      if not f then
        io.stderr:write("fuzz: the generator wrote bad Lua: ", err, "\n", src, "\n")
        os.exit(3)
      end
      f()
      log:write("--= ", F.last, F.last_msg and (": " .. F.last_msg) or "", "\n")
      g:note(slot)
      n = n + 1
    end
  end
  run(g:setup(port))
  local next_setup = 400
  while n < calls and ibv.now() - start < budget do
    if n >= next_setup then -- fresh objects when the old ones are mostly closed
      port = port + 10
      run(g:setup(port))
      next_setup = n + 400
    end
    run(g:step())
  end
  log:write("--= end\n")
  log:close()
  local st = F.stats
  print(("fuzz-child: calls=%d errors=%d nils=%d ok=%d"):format(st.calls, st.errors, st.nils, st.ok))
end

if opts.child then
  child()
  return
end

-- ------------------------------------------------------------------ driver

if opts.help then
  print((io.open(arg[0]):read("*a") or ""):match("^(.-)\nlocal"))
  os.exit(0)
end

local function sh_quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return nil end
  local s = f:read("*a")
  f:close()
  return s
end

local function spit(path, s)
  local f = assert(io.open(path, "wb"))
  f:write(s)
  f:close()
end

local function shell(cmd) -- exit status of sh -c cmd
  local rcfile = os.tmpname()
  os.execute(cmd .. "; echo $? > " .. rcfile)
  local rc = tonumber((slurp(rcfile) or ""):match("%d+")) or -1
  os.remove(rcfile)
  return rc
end

local function capture(cmd)
  local p = io.popen(cmd)
  local s = p:read("*a")
  p:close()
  return (s:gsub("%s+$", ""))
end

local SAN_EXIT, UBSAN_EXIT = 66, 67
local ROOT = capture("cd \"$(dirname " .. sh_quote(arg[0]) .. ")/..\" && pwd")
local out = opts.out or (ROOT .. "/.cache/fuzz")
local calls = tonumber(opts.calls or 3000)
local budget = tonumber(opts.time or 20)
local limit = tonumber(opts.timeout or (budget + 30))
local tail = tonumber(opts.tail or 25)
local min_tries = tonumber(opts.minimize or 0)
local interps = {}
for i in (opts.interp or "lua5.4,luajit"):gmatch("[^,]+") do interps[#interps + 1] = i end
local seeds = {}
for spec in (opts.seeds or opts.seed or "1-3"):gmatch("[^,]+") do
  local a, b = spec:match("^(%d+)%-(%d+)$")
  if a then
    for s = tonumber(a), tonumber(b) do seeds[#seeds + 1] = s end
  else
    seeds[#seeds + 1] = tonumber(spec) or error("fuzz: bad seed '" .. spec .. "'")
  end
end
os.execute("mkdir -p " .. sh_quote(out))

--- The command prefix that runs a Lua script under interpreter name i.
local function interp_cmd(i)
  local path = "LUA_PATH='lua/?.lua;spec/?.lua;;'"
  if i == "san" then
    local lib = capture("gcc -print-file-name=libasan.so")
    return table.concat({ "env", path, "LUA_CPATH='build/lua5.4-san/?.so;;'",
      "LD_PRELOAD=" .. sh_quote(lib),
      "ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:exitcode=" .. SAN_EXIT,
      "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=" .. UBSAN_EXIT, "lua5.4" }, " "), "build/lua5.4-san"
  end
  if i == "ibvlua" then -- the scripting host: the module and lua/ built in, no LUA_CPATH
    return "env LUA_PATH='spec/?.lua;;' LUA_CPATH='' build/lua5.4/ibvlua", "build/lua5.4"
  end
  return table.concat({ "env", path, "LUA_CPATH='build/" .. i .. "/?.so;;'", i }, " "),
    "build/" .. i
end

local SIGNALS = { [4] = "SIGILL", [6] = "SIGABRT", [7] = "SIGBUS", [8] = "SIGFPE", [9] = "SIGKILL",
  [11] = "SIGSEGV", [13] = "SIGPIPE", [15] = "SIGTERM" }

--- What an exit status means: nil for success, else a short class name.
local function classify(rc, stderr)
  if rc == 0 then return nil end
  local asan = stderr:match("ERROR: AddressSanitizer: ([%w%-]+)")
  if asan then return "ASan " .. asan end -- also when killed while it symbolized its report
  if rc == 124 or rc == 137 then return "hang (timeout)" end
  if rc == SAN_EXIT then
    local what = stderr:match("ERROR: AddressSanitizer: ([%w%-]+)") or "report"
    return "ASan " .. what
  end
  if rc == UBSAN_EXIT or stderr:match("runtime error:") then return "UBSan runtime error" end
  if rc > 128 then return SIGNALS[rc - 128] or ("signal " .. (rc - 128)) end
  if stderr:match("PANIC") then return "Lua panic" end
  return "exit " .. rc
end

--- The log as a list of {code =, outcome =}; the outcome is nil for the call
-- that never returned.
local function parse_log(text)
  local lines, ended = {}, false
  for l in (text or ""):gmatch("[^\n]+") do
    if l:sub(1, 4) == "--= " then
      if l == "--= end" then ended = true
      elseif #lines > 0 then lines[#lines].outcome = l:sub(5) end
    else
      lines[#lines + 1] = { code = l }
    end
  end
  return lines, ended
end

local function refs(code)
  local t = {}
  for s in code:gsub("^T%(%d+,", ""):gmatch("O%[(%d+)%]") do t[tonumber(s)] = true end
  return t
end

local function defines(code) return tonumber(code:match("^T%((%d+),")) end

--- The calls a crash needs: the last one, the `tail` ones before it, the ones
-- that made what those use (transitively), and setup calls on kept objects.
local function slice(lines, last)
  local keep, need = {}, {}
  local first = math.max(1, last - tail)
  for i = first, last do keep[i] = true end
  local changed = true
  while changed do
    changed = false
    for i = 1, last do
      if keep[i] then
        for s in pairs(refs(lines[i].code)) do
          if not need[s] then
            need[s], changed = true, true
          end
        end
      end
    end
    for i = 1, last do
      local d = defines(lines[i].code)
      if not keep[i] and (d and need[d] and d > 0) then keep[i], changed = true, true end
      if not keep[i] and d == 0 and lines[i].code:match("F%.connect") then -- state changes on kept objects
        local all = true
        for s in pairs(refs(lines[i].code)) do all = all and need[s] end
        if all then keep[i], changed = true, true end
      end
    end
  end
  local kept = {}
  for i = 1, last do if keep[i] then kept[#kept + 1] = lines[i] end end
  return kept
end

local function repro_text(lines, header)
  local t = { "-- " .. header:gsub("\n", "\n-- "),
    'local F = require "fuzz.prelude"',
    "local O, T, ibv, cm = F.O, F.T, F.ibv, F.cm -- luacheck: ignore", "" }
  for _, l in ipairs(lines) do
    t[#t + 1] = l.code .. (l.outcome and ("  -- " .. l.outcome) or "  -- <- the crash")
  end
  t[#t + 1] = 'print("fuzz reproducer: no crash")'
  return table.concat(t, "\n") .. "\n"
end

--- Runs a reproducer file; returns its failure class (nil: it did not fail)
-- and the outcomes of its calls ({"ok", "error", ...}).
local function run_repro(interp, path)
  local cmd = interp_cmd(interp)
  local errf = os.tmpname()
  local rc = shell(("cd %s && FUZZ_TRACE=1 timeout -k 2 %d %s %s >/dev/null 2>%s"):format(sh_quote(ROOT),
    math.min(limit, 20), cmd, sh_quote(path), errf))
  local stderr = slurp(errf) or ""
  os.remove(errf)
  local outcomes = {}
  for o in stderr:gmatch("fuzz%-outcome (%a+)") do outcomes[#outcomes + 1] = o end
  return classify(rc, stderr), outcomes
end

--- Whether the calls before the crash did what they did in the run.
local function same_outcomes(lines, outcomes)
  for i = 1, #lines - 1 do
    if (lines[i].outcome or ""):match("^(%a+)") ~= outcomes[i] then return false end
  end
  return true
end

--- Shortens a reproducer (delta debugging over chunks of calls; the crashing
-- call stays): a shorter list is kept when it fails the same way and every
-- call before the crash does what it did in the run.
local function minimize(interp, path, lines, class, header)
  local body, last = {}, lines[#lines]
  for i = 1, #lines - 1 do body[i] = lines[i] end
  local tries, n = 0, 2
  local function test(cand)
    local all = {}
    for i, l in ipairs(cand) do all[i] = l end
    all[#all + 1] = last
    spit(path, repro_text(all, header))
    tries = tries + 1
    local c, outcomes = run_repro(interp, path)
    return c == class and same_outcomes(all, outcomes)
  end
  while #body > 0 and tries < min_tries do
    local size = math.ceil(#body / n)
    local reduced = false
    for start = 1, #body, size do
      if tries >= min_tries then break end
      local cand = {}
      for i, l in ipairs(body) do
        if i < start or i >= start + size then cand[#cand + 1] = l end
      end
      if test(cand) then
        body, reduced = cand, true
        n = math.max(n - 1, 2)
        break
      end
    end
    if not reduced then
      if n >= #body then break end
      n = math.min(#body, n * 2)
    end
  end
  os.remove(path)
  body[#body + 1] = last
  return body
end

--- The first frame of a sanitizer report in the module, or the method the crashing call made.
local function signature(class, stderr, code)
  stderr = stderr:match("(ERROR:.-)\n%s*\n") or stderr:match("(runtime error:.*)") or "" -- the first stack only
  local frame = stderr:match("#%d+ 0x%x+ in ([%w_]+) [^\n]*core%.so") or
    stderr:match("#%d+ 0x%x+ in (ibvl_[%w_]+)") or stderr:match("#%d+ 0x%x+ in (l_[%w_]+)")
  local call = code and (code:match("return [^:]*:([%w_]+)[%({]") or code:match("return ([%w_.]+)[%({]")) or "?"
  return class .. " in " .. (frame or ("call " .. call))
end

local totals = { runs = 0, calls = 0, errors = 0, nils = 0, failed = 0 }
local classes = {}
local t_start = os.time()

for _, interp in ipairs(interps) do
  local cmd, build = interp_cmd(interp)
  if not io.open(ROOT .. "/" .. build .. "/ibverbs/core.so") then
    print(("fuzz %s: no %s/ibverbs/core.so (build it first)"):format(interp, build))
    totals.runs, totals.failed = totals.runs + 1, totals.failed + 1
  else
    for _, seed in ipairs(seeds) do
      local base = ("%s/%s-%d"):format(out, interp, seed)
      local logf = os.tmpname()
      local t0 = os.time()
      local rc = shell(("cd %s && timeout -k 3 %d %s tools/fuzz.lua --child --seed %d --calls %d --time %s "
        .. "--log %s%s > %s.out 2> %s.err")
        :format(sh_quote(ROOT), limit, cmd, seed, calls, budget, logf,
          (opts.skip and (" --skip " .. sh_quote(opts.skip)) or "")
          .. (opts.attacks and (" --attacks " .. sh_quote(opts.attacks)) or "")
          .. (opts["attack-rate"] and (" --attack-rate " .. sh_quote(opts["attack-rate"])) or ""), base, base))
      local stderr = slurp(base .. ".err") or ""
      local lines, ended = parse_log(slurp(logf))
      local st = { calls = #lines, errors = 0, nils = 0 }
      for _, l in ipairs(lines) do
        if l.outcome and l.outcome:match("^error") then st.errors = st.errors + 1 end
        if l.outcome and l.outcome:match("^nil") then st.nils = st.nils + 1 end
      end
      local class = classify(rc, stderr)
      totals.runs = totals.runs + 1
      totals.calls = totals.calls + st.calls
      totals.errors, totals.nils = totals.errors + st.errors, totals.nils + st.nils
      local msg = ("fuzz %-6s seed %-4d %6d calls %6d errors %5d nil-returns  %d crashes  (%d s)"):format(
        interp, seed, st.calls, st.errors, st.nils, class and 1 or 0, os.time() - t0)
      print(msg)
      if class then
        totals.failed = totals.failed + 1
        local last = #lines
        if ended or (last > 0 and lines[last].outcome) then last = #lines end -- died after the last call (exit, gc)
        local sliced = slice(lines, last)
        local header = ("fuzz reproducer: %s seed %d: %s\nrun in the VM: tools/rxe-vm %s %s"):format(
          interp, seed, class, cmd, (base:gsub("^" .. ROOT:gsub("%p", "%%%0") .. "/", "")) .. ".lua")
        spit(base .. ".full.lua", repro_text(lines, header .. "\n(the whole run)"))
        spit(base .. ".lua", repro_text(sliced, header))
        local hang = class:match("^hang")
        local reproduced = hang and class or run_repro(interp, base .. ".lua") -- a hang is not rerun: slow
        if not reproduced then
          sliced = lines
          spit(base .. ".lua", repro_text(sliced, header .. "\n(the slice did not reproduce: the whole run)"))
          reproduced = run_repro(interp, base .. ".lua")
        end
        if reproduced and min_tries > 0 and not hang then
          sliced = minimize(interp, base .. ".try.lua", sliced, reproduced, header)
          spit(base .. ".lua", repro_text(sliced, header))
        end
        local crash_line = lines[last] and lines[last].code or "(none)"
        local sig = signature(class, stderr, crash_line)
        classes[sig] = classes[sig] or { count = 0, file = base .. ".lua", lines = #sliced }
        classes[sig].count = classes[sig].count + 1
        print(("  CRASH %s at call %d: %s"):format(class, last, crash_line))
        print(("  reproducer (%d calls%s): %s"):format(#sliced, reproduced and "" or ", did NOT reproduce alone",
          base .. ".lua"))
        local report = stderr:match("(==%d+==ERROR.-)\n\n") or stderr:match("([^\n]*runtime error:[^\n]*)")
        if report then print("  " .. report:sub(1, 600):gsub("\n", "\n  ")) end
      end
      os.remove(logf)
    end
  end
end

if next(classes) then
  print("crash classes:")
  local sigs = {}
  for s in pairs(classes) do sigs[#sigs + 1] = s end
  table.sort(sigs)
  for _, s in ipairs(sigs) do
    print(("  %-60s %d run(s), e.g. %s (%d calls)"):format(s, classes[s].count, classes[s].file, classes[s].lines))
  end
end
print(("fuzz: %d runs, %d calls, %d errors, %d nil-returns, %d passed, %d failed (%d s)"):format(totals.runs,
  totals.calls, totals.errors, totals.nils, totals.runs - totals.failed, totals.failed, os.time() - t_start))
os.exit(totals.failed == 0 and 0 or 1)
