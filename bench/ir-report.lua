--- bench/ir-report.lua: the table of bench/run-ir.
--
--   RN=16384 N=2048 SN=1024 MN=384 IMPLS="c lua5.4 ..." lua5.4 bench/ir-report.lua split.txt time.txt
--
-- split.txt: bench/ir-split.lua's lines for .cache/ir/<impl>.<mode>.<1|2>.out
-- (COUNT = n and 2n); time.txt: the "TIME impl mode seconds count" and
-- "HEAP impl mode bytes/WR" lines of the wall-clock rounds.
local GROUPS = { "provider", "binding", "interpreter", "other" }
local MODES = { "recv", "recvb", "sendrecv", "sendrecvb", "sendrecvt", "modify", "modprep", "polltab" }
-- modprep (the Lua API with ibv.qp_attr sets parsed once) does C's and pyverbs' modify work
-- (and recvb, sendrecvb: recv's and sendrecv's, each round in one ibv.batch call;
-- sendrecvt: sendrecv's whole loop in one ibv.transfer call)
local SAME_WORK = { modprep = "modify", recvb = "recv", sendrecvb = "sendrecv", sendrecvt = "sendrecv" }
local counts = { recv = tonumber(os.getenv("RN")), polltab = tonumber(os.getenv("N")),
                 recvb = tonumber(os.getenv("RN")), sendrecvb = tonumber(os.getenv("SN")),
                 sendrecvt = tonumber(os.getenv("SN")),
                 sendrecv = tonumber(os.getenv("SN")), modify = tonumber(os.getenv("MN")),
                 modprep = tonumber(os.getenv("MN")) }
local impls = {}
for w in (os.getenv("IMPLS") or "c lua5.4 luajit luajit-ffi pyverbs"):gmatch("%S+") do
  impls[#impls + 1] = w
end

local runs = {} -- runs[impl][mode][k] = {total=, provider=, ...}
for line in io.lines(arg[1]) do
  local impl, mode, k = line:match("SPLIT %S*/([^/]-)%.(%a+)%.(%d)%.out ")
  if impl then
    local r = {}
    for key, v in line:gmatch("(%a+)=(%d+)") do r[key] = tonumber(v) end
    runs[impl] = runs[impl] or {}
    runs[impl][mode] = runs[impl][mode] or {}
    runs[impl][mode][tonumber(k)] = r
  end
end

local times, heap = {}, {}
local f = io.open(arg[2] or "")
if f then
  for line in f:lines() do
    local impl, mode, s, n = line:match("^TIME (%S+) (%S+) (%S+) (%d+)")
    if impl then
      local key = impl .. " " .. mode
      times[key] = times[key] or {}
      table.insert(times[key], tonumber(n) / tonumber(s))
    end
    local himpl, hmode, b = line:match("^HEAP (%S+) (%S+) (%S+)")
    if himpl then heap[himpl .. " " .. hmode] = math.max(heap[himpl .. " " .. hmode] or 0, tonumber(b)) end
  end
  f:close()
end

local function median(t)
  if not t or #t == 0 then return nil end
  table.sort(t)
  local m = #t // 2
  return #t % 2 == 1 and t[m + 1] or (t[m] + t[m + 1]) / 2
end

-- marginal instructions per unit, by group
local function marginal(impl, mode)
  local r = runs[impl] and runs[impl][mode]
  if not (r and r[1] and r[2]) then return nil end
  local n, m = counts[mode], { }
  m.total = (r[2].total - r[1].total) / n
  for _, g in ipairs(GROUPS) do m[g] = (r[2][g] - r[1][g]) / n end
  return m
end

print("Instructions per unit under callgrind (user space, marginal: runs of N and 2N units)")
print(("N: %d WRs (recv), %d WRs (polltab), %d messages (sendrecv), %d calls (modify)"):format(
  counts.recv, counts.polltab, counts.sendrecv, counts.modify))
print()
local hdr = "%-9s %-11s %9s %9s %9s %9s %9s  %-8s %-9s %-8s %s"
print(hdr:format("mode", "impl", "Ir/unit", "provider", "binding", "interp", "other",
  "C/impl", "over C", "wall C/x", "heap B/unit"))
for _, mode in ipairs(MODES) do
  local c = marginal("c", SAME_WORK[mode] or mode)
  local cw = median(times["c " .. (SAME_WORK[mode] or mode)])
  for _, impl in ipairs(impls) do
    local m = marginal(impl, mode)
    if m then
      local w = median(times[impl .. " " .. mode])
      local h = heap[impl .. " " .. mode]
      print(("%-9s %-11s %9.1f %9.1f %9.1f %9.1f %9.1f  %-8s %-9s %-8s %s"):format(mode, impl,
        m.total, m.provider, m.binding, m.interpreter, m.other,
        c and ("%.3f"):format(c.total / m.total) or "-",
        c and ("%+.1f"):format(m.total - c.total) or "-",
        (cw and w) and ("%.3f"):format(w / cw) or "-",
        h and ("%.2f"):format(h) or "-"))
    end
  end
end
print()
print("Lua against pyverbs (pyverbs instructions / Lua instructions, per unit):")
for _, mode in ipairs(MODES) do
  local p = marginal("pyverbs", SAME_WORK[mode] or mode)
  local parts = {}
  for _, impl in ipairs({ "lua5.4", "luajit", "luajit-ffi" }) do
    local m = marginal(impl, mode)
    if p and m then parts[#parts + 1] = ("%s %.1fx"):format(impl, p.total / m.total) end
  end
  if #parts > 0 then print(("  %-9s %s"):format(mode, table.concat(parts, ", "))) end
end
print()
print("unit: " .. table.concat({ "recv = receive WR (post in chains of 64, poll after each)",
  "sendrecv = 64-byte message",
  "modify = one qp:modify (with a table; modprep: with an ibv.qp_attr)",
  "polltab = flushed WR polled into tables" }, "; "))
print("C/impl: C's instructions over the implementation's (1.0 = C speed); over C: instructions")
print("added per unit; wall C/x: the implementation's rate over C's, medians of the wall-clock rounds")
