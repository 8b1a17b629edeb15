#!/usr/bin/env lua5.4
--- send_lat.lua: the Lua counterpart of perftest's ib_send_lat (RC send/recv
-- ping-pong: the client sends first, each side answers each message it
-- receives (ibv.lat_send)), wire compatible with it: perftest's TCP exchange
-- on port 18515, the loop in C, every round trip stamped, perftest's latency
-- table printed from the samples (ibverbs.tools.perftest's run).
--   server: lua5.4 examples/send_lat.lua -x 1 -s 8 -n 1000
--   client: lua5.4 examples/send_lat.lua -x 1 -s 8 -n 1000 <server>
-- `ibvlua send_lat ...` runs the same (lua/ibverbs/tools.lua).
os.exit(require("ibverbs.tools").run("send_lat", arg))
