--- bench/fabric_sim.lua: one row of the simulation's table (bench/fabric runs
-- the processes: bench/sim_worker.lua), from what its watched ranks wrote.
--   lua5.4 bench/fabric_sim.lua <outdir> <n> <rails> <rounds> <block> <workers> <wall seconds>
-- Per round of the first pass (its blocks after the first, whose exchanges
-- carry no set-up: (route[nblocks + 2] - route[3]) / rounds): rank 0's CPU,
-- the first relay's, the bytes on their sockets (in + out); once per pass,
-- the reduction (the summary up, the references down, the failing pairs
-- up) at rank 0; rank 0's heap and resident memory; the planted faults
-- found and the verdicts that name none (bench/sim_world.lua).
--   lua5.4 bench/fabric_sim.lua slices <n> <k> <w>   the other ranks in w processes: "a-b,c-d" each
--   lua5.4 bench/fabric_sim.lua docs <doc.md> <table.md>  the table between the doc's markers replaced
package.path = "bench/?.lua;" .. package.path
local dkjson = require "dkjson"
local world = require "sim_world"

if arg[1] == "slices" then -- ranks 1 .. n-1 but k, in w slices of consecutive ranges
  local n, k, w = tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4])
  local l = {}
  for r = 1, n - 1 do if r ~= k then l[#l + 1] = r end end
  local per, out = math.ceil(#l / w), {}
  for i = 1, #l, per do
    local ranges, lo = {}, l[i]
    local last = math.min(i + per - 1, #l)
    for j = i + 1, last + 1 do
      if j > last or l[j] ~= l[j - 1] + 1 then ranges[#ranges + 1] = lo .. "-" .. l[j - 1]; lo = l[j] end
    end
    out[#out + 1] = table.concat(ranges, ",")
  end
  print(table.concat(out, " "))
  os.exit(0)
elseif arg[1] == "docs" then -- the rows into the doc, between its markers
  local f = assert(io.open(arg[2]))
  local doc = f:read("a")
  f:close()
  local rows = assert(io.open(arg[3])):read("a"):gsub("%s+$", "")
  local a, b = "<!-- bench-fabric: the simulation's table -->", "<!-- bench-fabric: end -->"
  local i, j = doc:find(a, 1, true), doc:find(b, 1, true)
  assert(i and j, "no markers in " .. arg[2])
  f = assert(io.open(arg[2], "w"))
  f:write(doc:sub(1, i + #a), rows, "\n", doc:sub(j))
  f:close()
  os.exit(0)
end

local dir, n, nrails, rounds, block, workers, wall = arg[1], tonumber(arg[2]), tonumber(arg[3]), tonumber(arg[4]),
  tonumber(arg[5]), tonumber(arg[6]), tonumber(arg[7])

local function load(file)
  local f = io.open(file)
  if not f then return nil end
  local v = dkjson.decode(f:read("a"))
  f:close()
  return v
end

local r0, relay = load(dir .. "/rank0.json"), load(dir .. "/rank1.json") -- the first relay
local rep = load(dir .. "/report.json")
if not (r0 and relay and rep) then
  print(string.format("| %d x %d | failed: see %s | | | | | | | |", n, nrails, dir))
  os.exit(1)
end
local nblocks = math.ceil(rounds / block)
assert(nblocks >= 2, "the per-round figures need two blocks or more")
local steady = rounds - block -- the rounds of the blocks after the first

local function per_round(snaps, key)
  if not snaps[3][key] then return 0 / 0 end -- (a run before that figure was kept)
  return (snaps[nblocks + 2][key] - snaps[3][key]) / steady
end
local function bytes(snaps) return per_round(snaps, "bin") + per_round(snaps, "bout") end
local function once(snaps, key) return snaps[nblocks + 4][key] - snaps[nblocks + 2][key] end

-- the verdicts against the planted faults
local want = {}
for _, v in ipairs(world.expected(world.faults(n, rounds), nrails, world.rail_name)) do want[v] = true end
local found, invented = 0, {}
for _, v in ipairs(rep.verdicts) do
  local ranks = {}
  for i, r in ipairs(v.ranks) do ranks[i] = r end
  table.sort(ranks)
  local key = string.format("%s %s %s", v.kind, table.concat(ranks, ","), v.rail)
  if want[key] then found = found + 1 else invented[#invented + 1] = key end
end
local nwant = 0
for _ in pairs(want) do nwant = nwant + 1 end
local heap = 0
for _, s in ipairs(r0.snaps) do heap = math.max(heap, s.heap or 0) end

if os.getenv("FABRIC_SIM_JSON") then -- the figures themselves (spec/host/tools/fabric_matrix_sim_spec.lua)
  print(dkjson.encode({ rank0_cpu = per_round(r0.snaps, "cpu"), relay_cpu = per_round(relay.snaps, "cpu"),
    rank0_route_cpu = per_round(r0.snaps, "rcpu"), relay_route_cpu = per_round(relay.snaps, "rcpu"),
    rank0_bytes = bytes(r0.snaps), relay_bytes = bytes(relay.snaps), found = found, expected = nwant,
    invented = invented }))
  os.exit(0)
end

local function kb(b) return b >= 1e6 and string.format("%.1f MB", b / 1e6) or string.format("%.0f kB", b / 1e3) end
local function ms(snaps)
  return string.format("%.2f ms (%.2f in the exchanges)", 1000 * per_round(snaps, "cpu"),
    1000 * per_round(snaps, "rcpu"))
end
print(string.format("| %d x %d | %d (blocks of %d), %d processes | %s | %s | %s | %s | %.0f ms, %s in, "
  .. "%s out | %.0f MB heap, %.0f MB resident | %d of %d | %s | %.0f s |", n, nrails, rounds, block, workers + 1,
  ms(r0.snaps), ms(relay.snaps), kb(bytes(r0.snaps)),
  kb(bytes(relay.snaps)), 1000 * once(r0.snaps, "cpu"), kb(once(r0.snaps, "bin")), kb(once(r0.snaps, "bout")),
  heap / 1024, r0.rss_kb / 1024, found, nwant, #invented == 0 and "none" or table.concat(invented, "; "), wall))
