#!/usr/bin/env lua5.4
--- srq_pingpong.lua: the Lua counterpart of ibv_srq_pingpong, wire compatible with it.
--   server: lua5.4 examples/srq_pingpong.lua -g 1
--   client: lua5.4 examples/srq_pingpong.lua -g 1 <server>
--   --help lists the options (the C tool's letters and defaults).
-- `ibvlua srq_pingpong ...` runs the same (lua/ibverbs/tools.lua).
os.exit(require("ibverbs.tools").run("srq_pingpong", arg))
