--- What this node has and lacks for lua-ibverbs and its tools, in one screen.
-- `ibvlua --version` prints it, and so does any interpreter with the module on its path.
--
--     require("ibverbs.node_report").print()   -- lua5.4 -e 'require"ibverbs.node_report".print()'
--     local f = require("ibverbs.node_report").facts()
--     for _, d in ipairs(f.devices) do print(d.name, d.provider, d.kernel) end
--
-- It says: the Lua and the module (and the rdma-core headers it was built with); the node (host
-- name, `/etc/os-release`'s PRETTY_NAME, the kernel); the rdma-core release in use and how it
-- is known: rdma-core names its library `libibverbs.so.1.<ABI>.<release>` (exact, unless the
-- file was renamed), and the newest symbol versions libibverbs and librdmacm export bound it
-- (`IBVERBS_1.14` came with rdma-core 36 and is still the newest in 58: `ibv.rdma_core`'s
-- `at_least` and `at_most`); the verbs newer than rdma-core 28 the node lacks, by the release
-- that brought them, and the methods that read sysfs instead (`IBVL_RDMA_CORE` is shown when
-- set); each device with its node type, node GUID, firmware, vendor, user-space provider
-- (`ctx:provider`), kernel driver and PCI slot (`<ibdev_path>/device/uevent`; a software device
-- names its netdev), and each port's state, MTU, link layer, LID (InfiniBand), GID count and
-- first RoCE v2 IPv4 GID; without a device, why (no RDMA driver loaded, no `ib_uverbs`, devices
-- the kernel has that no provider serves); where the tools' Lua libraries come from (argparse,
-- dkjson, LuaSocket: "built in", "from <path>", or "missing"); and last what the node lacks
-- for the tools: a library, the module, a device, an active port. It runs no program.
--
-- @module ibverbs.node_report

local report = {}

--- The Lua libraries the tools need: `{name = "argparse", needed_by = "every tool's command line"}`, ...
-- (argparse, dkjson, socket).
report.DEPENDENCIES = {}

--- The rdma-core release in a libibverbs file's name.
-- @tparam string path "/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"
-- @treturn string "44.0", or nil when the name does not end in one (`libibverbs.so.1`)
function report.file_release(path) end

--- What the report says, as data.
-- @treturn table `lua`, `module` (`version`, `built_in`, `file` when loaded from the path;
-- `error` when ibverbs cannot be loaded), `node` (`hostname`, `os`, `kernel`), `rdma_core`
-- (`ibv.rdma_core`'s fields and `release`, from the library's file name), `devices` (each
-- `name`, `guid`, `node_type`, `provider`, `provider_file`, `kernel`, `fw_ver`, `vendor_id`,
-- `vendor_part_id`, `error`, `ports`: each `port`, `state`, `mtu`, `link_layer`, `lid`, `gids`,
-- `roce_v2` = `{index =, gid =}`), `no_devices` (why none is listed), `dependencies` (each
-- `name`, `where`: "built in", "from <path>" or "missing", `version`, `needed_by`, `error`)
-- and `lacks` (what the tools need that is not here, as text; empty when nothing is missing)
function report.facts() end

--- The report as lines of text (long lists wrap at 100 columns).
-- @tparam[opt] table opts `host`: a first line (ibvlua passes "ibvlua 0.1"); `lua`: the text of
-- the Lua line (default `_VERSION`, or `jit.version` under LuaJIT)
-- @treturn {string,...} lines
-- @treturn table the facts they were made from (`facts`)
function report.lines(opts) end

--- Prints the report to standard output.
-- @tparam[opt] table opts as `lines` takes them
-- @treturn boolean true when the node lacks nothing the tools need
function report.print(opts) end

return report
