#!/usr/bin/env lua5.4
--- xsrq_pingpong.lua: the Lua counterpart of ibv_xsrq_pingpong, wire compatible with it.
--   server: lua5.4 examples/xsrq_pingpong.lua -g 1 [-c <clients>]
--   client: lua5.4 examples/xsrq_pingpong.lua -g 1 <server>
-- The tool is lua/ibverbs/tools/xsrq_pingpong.lua (`ibvlua xsrq_pingpong ...` runs it too).
os.exit(require("ibverbs.tools").run("xsrq_pingpong", arg))
