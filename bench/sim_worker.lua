--- bench/sim_worker.lua: one process of the simulation (bench/fabric_sim.lua):
-- some ranks of an n-rank fabric, each a coroutine running fabric_matrix
-- itself (ibverbs.tools.fabric_matrix; bench/sim_loop.lua: its sockets real,
-- on loopback; bench/sim_world.lua: its measurement drawn, with planted faults).
--   lua5.4 bench/sim_worker.lua <n> <ranks: a-b,c-d> <port> <rails> <rounds> <outdir> [fabric_matrix options...]
-- Rank 0 writes its report (<outdir>/report.txt, report.json; its progress on
-- the process's stderr); rank 0, the
-- first relay and one of its members write what they spent, exchange by
-- exchange (<outdir>/rank<r>.json: per route their CPU, bytes in and out,
-- and rank 0's heap and resident memory).
package.path = "bench/?.lua;" .. package.path
local loop = require "sim_loop"
local dkjson = require "dkjson"
local world = require "sim_world"

local n, ranges, port, nrails, rounds, outdir = tonumber(arg[1]), arg[2], tonumber(arg[3]), tonumber(arg[4]),
  tonumber(arg[5]), arg[6]
local extra = {}
for i = 7, #arg do extra[#extra + 1] = arg[i] end
local ours = {} -- the ranks of this process: "a-b,c-d" or "a"
for a, b in ranges:gmatch("(%d+)%-?(%d*)") do
  for r = tonumber(a), tonumber(b ~= "" and b or a) do ours[#ours + 1] = r end
end
local alone, first = #ours == 1, ours[1]
-- many ranks: a cycle when the heap is half again what lived (not twice: each rank receives its own
-- copy of the O(N) frames every rank gets; a pause of 100 collects without end)
if not alone then collectgarbage("incremental", 150, 200) end
math.randomseed(1000 + first)
world.install(n, nrails, world.faults(n, rounds))

local fabric = require "ibverbs.fabric"
-- A JSON frame every rank gets alike (the rendezvous's host list, the plan's rail names: O(N) each) is
-- decoded once per process and its table shared: a real rank decodes it once in a run, in parallel
-- with the others; here N ranks would do it one after the other (bench/fabric_sim.lua measures it apart).
local wire = require "ibverbs.fabric.wire"
local decode, decoded = wire.decode, {}
wire.decode = function(body)
  if #body < 4096 or body:byte(1) ~= 123 then return decode(body) end
  local m = decoded[body]
  if not m then m = { decode(body) }; decoded[body] = m end
  return m[1], m[2]
end
local tree = fabric.TREE_MIN <= n or nil -- the first relay is rank 1 (rank 0 relays no group), rank 2 its member
local WATCH = { [0] = true, [1] = tree, [2] = tree }

-- the peak resident memory of this process, kB
local function rss()
  local f = io.open("/proc/self/status")
  local t = f and f:read("a") or ""
  if f then f:close() end
  return tonumber(t:match("VmHWM:%s*(%d+)")) or 0
end

-- each route a watched rank calls: what it spent so far
-- (a rank alone in its process: the process's CPU, the loop's waits included; else the task's own)
local function cpu_now() return alone and loop.real_clock() or os.clock() end
-- rcpu: the CPU spent inside the routes so far (the exchanges: the control plane, without its own pairs' work)
-- (and alone: the process's kernel time so far, /proc/self/stat's stime, in seconds; loopback TCP's
-- work for both ends of a socket falls on the sender)
local function kernel()
  if not alone then return nil end
  local f = io.open("/proc/self/stat")
  local st = f and f:read("a") or ""
  if f then f:close() end
  local fields = {}
  for x in st:gsub("^.*%) ", ""):gmatch("%S+") do fields[#fields + 1] = x end
  return tonumber(fields[13]) and tonumber(fields[13]) / 100 or nil
end
local function snap(task)
  task.rcpu = (task.rcpu or 0) + cpu_now() - task.entered
  task.snaps[#task.snaps + 1] = { t = require("socket").gettime(), cpu = cpu_now(), rcpu = task.rcpu,
    sys = kernel(), bin = task.bytes_in, bout = task.bytes_out, heap = first == 0 and collectgarbage("count") or nil }
end
local init = fabric.init
local hosts -- one host list per process, the same every rank's (each real rank holds its own: O(N))
fabric.init = function(o)
  local f, err = init(o)
  if f then
    hosts = hosts or f.hosts
    f.hosts = hosts
    local mt = getmetatable(f)
    if not mt.sim_route then
      mt.sim_route = mt.route
      mt.route = function(self, ...)
        local t0 = loop.current
        if t0 and t0.snaps then t0.entered = cpu_now() end
        local a, b = mt.sim_route(self, ...)
        local t = loop.current
        if t and t.snaps then snap(t) end
        return a, b
      end
    end
  end
  return f, err
end

-- the tool (ibverbs.tools.fabric_matrix, what examples/fabric_matrix.lua runs) in every task: its exit
-- ends the task, not the process; its print is the task's (rank 0: its report); its stderr the process's
local tool = require "ibverbs.tools.fabric_matrix"
local exit = os.exit
os.exit = function(code) error({ exit = code }, 0) end -- luacheck: ignore 122
print = function(...) -- luacheck: ignore 121
  local t = loop.current
  if t and t.print then t.print(...) end
end

for _, r in ipairs(ours) do
  local out = r == 0 and assert(io.open(outdir .. "/report.txt", "w")) or nil
  local a = { [0] = "examples/fabric_matrix.lua", "--rank", tostring(r), "--size", tostring(n), "--root",
    "127.0.0.1:" .. port, "--max-rounds", tostring(rounds), "-t", "3000", "--reference", "p75" }
  if r == 0 then a[#a + 1] = "--json"; a[#a + 1] = outdir .. "/report.json" end
  for _, x in ipairs(extra) do a[#a + 1] = x end
  loop.spawn(function(task)
    local ok, e = pcall(tool.main, a)
    task.status = ok and (tonumber(e) or 0) or (type(e) == "table" and e.exit) or e
    if type(task.status) ~= "number" then io.stderr:write("sim: rank ", r, ": ", tostring(task.status), "\n") end
    if out then out:close() end
  end, { rank = r, snaps = WATCH[r] and {} or nil, env = { SLURMD_NODENAME = "node" .. (r + 1) },
    print = out and function(...) out:write(table.concat({ ... }, "\t"), "\n") end,
    on_exit = function(task)
      if task.snaps then
        local f = assert(io.open(outdir .. "/rank" .. r .. ".json", "w"))
        f:write(dkjson.encode({ rank = r, status = task.status, snaps = task.snaps, cpu = task.cpu,
          process_cpu = first == 0 and loop.real_clock() or nil, rss_kb = first == 0 and rss() or nil }), "\n")
        f:close()
      end
    end })
end
loop.run()
local bad = 0
for _, t in ipairs(loop.tasks) do if t.status ~= 0 and t.status ~= 1 then bad = bad + 1 end end
exit(bad == 0 and 0 or 3)
