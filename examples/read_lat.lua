#!/usr/bin/env lua5.4
--- read_lat.lua: the Lua counterpart of perftest's ib_read_lat (RDMA read round
-- trips: the client reads the server's buffer, the server waits
-- (ibv.lat_rtt)), wire compatible with it: perftest's TCP exchange on port
-- 18515, the loop in C, every round trip stamped, perftest's latency table
-- printed from the samples (ibverbs.tools.perftest's run).
--   server: lua5.4 examples/read_lat.lua -x 1 -s 8 -n 1000
--   client: lua5.4 examples/read_lat.lua -x 1 -s 8 -n 1000 <server>
-- `ibvlua read_lat ...` runs the same (lua/ibverbs/tools.lua).
os.exit(require("ibverbs.tools").run("read_lat", arg))
