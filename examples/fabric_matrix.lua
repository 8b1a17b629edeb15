#!/usr/bin/env lua5.4
--- fabric_matrix.lua: the all-pairs test to run after racking a cluster, one
-- process per host.
--   srun -N 64 --ntasks-per-node=1 lua5.4 examples/fabric_matrix.lua -d all --json m.json --json-lines m.jsonl
--   tools/rxe-vm --nodes 4 lua5.4 examples/fabric_matrix.lua --pattern shift
--   lua5.4 examples/fabric_matrix.lua --dry-run ...   # the control plane alone: no device, no traffic
-- The tool is lua/ibverbs/tools/fabric_matrix.lua (`ibvlua fabric_matrix ...` runs it too).
os.exit(require("ibverbs.tools").run("fabric_matrix", arg))
