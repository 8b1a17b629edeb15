--- The tools, by name: what `ibvlua <tool> [args]` runs, and what the thin
-- scripts of examples/ run (`lua5.4 examples/fabric_check.lua [args]`).
--
--   ibvlua fabric_check -d mlx5_0           -- the host: a name that is no file
--   os.exit(require("ibverbs.tools").run("fabric_check", arg))   -- examples/fabric_check.lua
--   for _, t in ipairs(require("ibverbs.tools").list) do print(t.name, t.what) end
--
-- A tool's code is a module of lua/ibverbs/tools/ (built into ibvlua with
-- the rest of lua/), on the library (ibverbs, ibverbs.exchange, ...), the
-- control plane (ibverbs.fabric) and the bring-up engine (ibverbs.bringup);
-- its main takes the command line as a script's arg (arg[1]
-- the first option) and returns the exit status or ends the process itself.
local tools = {}

local function pingpong(kind)
  return function(arg) return require("ibverbs.tools.pingpong").main(kind, arg) end
end

local function perftest(test)
  return function(arg) return require("ibverbs.tools.perftest").main(test, arg) end
end

--- Each tool: name, one line saying what it is, main(arg).
tools.list = {
  { name = "devinfo", what = "devices, ports and GIDs (ibv_devinfo)",
    main = function(arg) return require("ibverbs.tools.devinfo").main(arg) end },
  { name = "fabric_check", what = "this node's ports with traffic, then the fabric across ranks (docs/bringup.md)",
    main = function(arg) return require("ibverbs.tools.fabric_check").main(arg) end },
  { name = "fabric_matrix", what = "every pair of ranks in rounds: latency, bandwidth, counters, verdicts",
    main = function(arg) return require("ibverbs.tools.fabric_matrix").main(arg) end },
  { name = "rc_pingpong", what = "ibv_rc_pingpong's peer", main = pingpong("rc") },
  { name = "uc_pingpong", what = "ibv_uc_pingpong's peer", main = pingpong("uc") },
  { name = "ud_pingpong", what = "ibv_ud_pingpong's peer", main = pingpong("ud") },
  { name = "srq_pingpong", what = "ibv_srq_pingpong's peer", main = pingpong("srq") },
  { name = "xsrq_pingpong", what = "ibv_xsrq_pingpong's peer (XRC)",
    main = function(arg) return require("ibverbs.tools.xsrq_pingpong").main(arg) end },
  { name = "send_bw", what = "perftest's ib_send_bw peer",
    main = function(arg) return require("ibverbs.tools.send_bw").main(arg) end },
  { name = "send_lat", what = "perftest's ib_send_lat peer", main = perftest("send_lat") },
  { name = "write_bw", what = "perftest's ib_write_bw peer", main = perftest("write_bw") },
  { name = "write_lat", what = "perftest's ib_write_lat peer", main = perftest("write_lat") },
  { name = "read_bw", what = "perftest's ib_read_bw peer", main = perftest("read_bw") },
  { name = "read_lat", what = "perftest's ib_read_lat peer", main = perftest("read_lat") },
  { name = "rping", what = "rping's peer (rdma_cm, rdmacm-utils)",
    main = function(arg) return require("ibverbs.tools.rping").main(arg) end },
}

--- The tool of that name, or nil.
function tools.find(name)
  for _, t in ipairs(tools.list) do
    if t.name == name then return t end
  end
end

-- a main's result as an exit status: a number as it is, false 1, else 0
local function status(v)
  if type(v) == "number" then return v end
  return v == false and 1 or 0
end

--- Runs a tool with arg (a script's arg table) and returns its exit status;
-- program, when given, is the name its usage shows ("ibvlua fabric_check").
-- An unknown name raises.
function tools.run(name, arg, program)
  local t = tools.find(name)
  if not t then error("no tool named " .. tostring(name), 2) end
  if program then require("ibverbs.tools.cli").program = program end
  return status(t.main(arg))
end

--- What ibvlua calls for `ibvlua <name> [args]` when no file has that name:
-- the tool's exit status, or nil and the message for a name that is no tool.
function tools.host(name, arg, program)
  if not tools.find(name) then
    local names = {}
    for i, t in ipairs(tools.list) do names[i] = t.name end
    return nil, ("cannot open %s: no such file, and no tool of that name (tools: %s)"):format(name,
      table.concat(names, ", "))
  end
  return tools.run(name, arg, program)
end

return tools
