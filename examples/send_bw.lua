#!/usr/bin/env lua5.4
--- send_bw.lua: the Lua counterpart of perftest's ib_send_bw (RC sends), wire
-- compatible with it.
--   server: lua5.4 examples/send_bw.lua -x 1 -s 64 -n 20000
--   client: lua5.4 examples/send_bw.lua -x 1 -s 64 -n 20000 <server>
-- The tool is lua/ibverbs/tools/send_bw.lua (`ibvlua send_bw ...` runs it too).
os.exit(require("ibverbs.tools").run("send_bw", arg))
