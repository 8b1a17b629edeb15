#!/usr/bin/env lua5.4
--- write_bw.lua: the Lua counterpart of perftest's ib_write_bw (RDMA write
-- bandwidth: the client writes into the server's buffer with a window of
-- outstanding WRs and one signaled completion per -Q WRs, the server waits
-- (ibv.bw)), wire compatible with it: perftest's TCP exchange on port 18515,
-- the loop in C, perftest's bandwidth table printed (ibverbs.tools.perftest's run).
--   server: lua5.4 examples/write_bw.lua -x 1 -s 65536 -n 5000
--   client: lua5.4 examples/write_bw.lua -x 1 -s 65536 -n 5000 <server>
-- `ibvlua write_bw ...` runs the same (lua/ibverbs/tools.lua).
os.exit(require("ibverbs.tools").run("write_bw", arg))
