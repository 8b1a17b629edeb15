#!/usr/bin/env lua5.4
--- write_lat.lua: the Lua counterpart of perftest's ib_write_lat (RDMA write
-- ping-pong polling on memory: the server writes first, each side waits until
-- the last byte of the peer's message in its buffer shows the iteration's
-- number, then writes its own (ibv.lat_write)), wire compatible with it:
-- perftest's TCP exchange on port 18515, the loop in C, every round trip
-- stamped, perftest's latency table printed from the samples
-- (ibverbs.tools.perftest's run).
--   server: lua5.4 examples/write_lat.lua -x 1 -s 8 -n 1000
--   client: lua5.4 examples/write_lat.lua -x 1 -s 8 -n 1000 <server>
-- `ibvlua write_lat ...` runs the same (lua/ibverbs/tools.lua).
os.exit(require("ibverbs.tools").run("write_lat", arg))
