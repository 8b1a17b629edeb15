#!/usr/bin/env lua5.4
--- fabric_check.lua: a bring-up checker: every device and port of this node with
-- loopback traffic, then the fabric across ranks under a launcher.
--   lua5.4 examples/fabric_check.lua [-d rxe0] [-i 1] [-g 1] [--json]
-- The tool is lua/ibverbs/tools/fabric_check.lua (`ibvlua fabric_check ...` runs it too).
os.exit(require("ibverbs.tools").run("fabric_check", arg))
