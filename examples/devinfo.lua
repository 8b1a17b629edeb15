#!/usr/bin/env lua5.4
--- devinfo.lua: the Lua counterpart of ibv_devinfo: devices, ports, states, MTU, GIDs.
--   lua5.4 examples/devinfo.lua [-d rxe0] [-i 1] [-l] [-v]
-- The tool is lua/ibverbs/tools/devinfo.lua (`ibvlua devinfo ...` runs it too).
os.exit(require("ibverbs.tools").run("devinfo", arg))
