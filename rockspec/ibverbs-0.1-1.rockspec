-- `luarocks make rockspec/ibverbs-0.1-1.rockspec` from a checkout builds and
-- installs this version; the version here is ibverbs.core's _VERSION
-- ("ibverbs.core 0.1"): packaging_spec checks that they agree.
-- Lua 5.4 and LuaJIT 2.1 (`luarocks --lua-version 5.1 ... LUA_INCDIR=/usr/include/luajit-2.1`);
-- plain Lua 5.1 stops at an #error in csrc/compat.h.
rockspec_format = "3.0"
package = "ibverbs"
version = "0.1-1"
source = {
  url = "git+https://github.com/lua-ibverbs/lua-ibverbs.git",
  tag = "v0.1",
}
description = {
  summary = "RDMA verbs (libibverbs and librdmacm) for Lua",
  detailed = [[
    The whole of rdma-core's verbs API as safe userdata with GC finalizers,
    and a batched C data path: prepared work-request lists, allocation-free
    polling, C loops for the common post/poll patterns; rdma_cm as
    ibverbs.cm and a LuaJIT FFI data path as ibverbs.ffi.
  ]],
  homepage = "https://github.com/lua-ibverbs/lua-ibverbs",
  issues_url = "https://github.com/lua-ibverbs/lua-ibverbs/issues",
  license = "MIT",
  labels = { "rdma", "infiniband", "roce", "networking" },
}
dependencies = {
  "lua >= 5.1, < 5.5", -- 5.1 means LuaJIT 2.1 here: plain Lua 5.1 is refused by the C build
  "luasocket >= 3.0", -- ibverbs.exchange: the TCP exchange of QP addresses
  "argparse >= 0.7", -- the examples' command lines (examples/ is installed with the rock)
  "dkjson >= 2.5", -- ibverbs.fabric (collectives), examples/fabric_check.lua --json
}
test_dependencies = {
  "busted",
}
external_dependencies = {
  IBVERBS = { header = "infiniband/verbs.h", library = "ibverbs" },
  RDMACM = { header = "rdma/rdma_cma.h", library = "rdmacm" },
}
build = {
  type = "builtin",
  modules = {
    ["ibverbs.core"] = {
      sources = {
        "csrc/ah.c", "csrc/args.c", "csrc/batch.c", "csrc/buffer.c", "csrc/bw.c", "csrc/channel.c",
        "csrc/cm_addr.c", "csrc/cm_base.c", "csrc/cm_channel.c", "csrc/cm_id.c", "csrc/cm_qp.c",
        "csrc/context.c", "csrc/core.c", "csrc/counters.c", "csrc/cq.c", "csrc/device.c",
        "csrc/dm.c", "csrc/embed.c", "csrc/enums.c", "csrc/err.c", "csrc/errno.c", "csrc/ffi.c",
        "csrc/fields.c", "csrc/flow.c", "csrc/kernel.c", "csrc/lat.c", "csrc/loop.c", "csrc/mr.c", "csrc/mw.c", "csrc/names.c",
        "csrc/object.c", "csrc/pd.c", "csrc/post.c", "csrc/qp.c", "csrc/qp_ex.c",
        "csrc/rwq_ind_tbl.c", "csrc/srq.c", "csrc/stats.c", "csrc/td.c", "csrc/wait.c", "csrc/wc.c", "csrc/wq.c",
        "csrc/wr.c", "csrc/wr_parse.c", "csrc/xrcd.c",
      },
      defines = { "_GNU_SOURCE" },
      libraries = { "ibverbs", "rdmacm" },
      incdirs = { "$(IBVERBS_INCDIR)", "$(RDMACM_INCDIR)" },
      libdirs = { "$(IBVERBS_LIBDIR)", "$(RDMACM_LIBDIR)" },
    },
    ["ibverbs"] = "lua/ibverbs.lua",
    ["ibverbs.xrc"] = "lua/ibverbs/xrc.lua",
    ["ibverbs.ffi"] = "lua/ibverbs/ffi.lua",
    ["ibverbs.cm"] = "lua/ibverbs/cm.lua",
    ["ibverbs.exchange"] = "lua/ibverbs/exchange.lua",
    ["ibverbs.fabric"] = "lua/ibverbs/fabric.lua",
    ["ibverbs.perftest"] = "lua/ibverbs/perftest.lua",
  },
  copy_directories = { "examples", "docs" }, -- docs: the API reference sources (docs/api) and guides
}
test = {
  type = "busted",
  flags = { "--run=host" },
}
