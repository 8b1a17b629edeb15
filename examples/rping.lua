#!/usr/bin/env lua5.4
--- rping.lua: the Lua counterpart of rping (rdmacm-utils), wire compatible with it.
--   server: lua5.4 examples/rping.lua -s -a 192.0.2.1 -v
--   client: lua5.4 examples/rping.lua -c -a 192.0.2.1 -v -V -C 10
-- The tool is lua/ibverbs/tools/rping.lua (`ibvlua rping ...` runs it too).
os.exit(require("ibverbs.tools").run("rping", arg))
