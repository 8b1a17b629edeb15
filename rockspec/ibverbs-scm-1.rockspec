rockspec_format = "3.0"
package = "ibverbs"
version = "scm-1"
source = {
  url = "git+file:///dev/null", -- replace with the project's repository
}
description = {
  summary = "RDMA verbs (libibverbs and librdmacm) for Lua",
  detailed = [[
    The whole of rdma-core's verbs API as safe userdata with GC finalizers,
    and a batched C data path: prepared work-request lists, allocation-free
    polling, C loops for the common post/poll patterns.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.1, < 5.5",
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
        "csrc/ah.c", "csrc/buffer.c", "csrc/channel.c", "csrc/cm_addr.c", "csrc/cm_channel.c",
        "csrc/cm_id.c", "csrc/cm_qp.c", "csrc/context.c", "csrc/core.c",
        "csrc/cq.c", "csrc/device.c", "csrc/enums.c", "csrc/ffi.c", "csrc/helpers.c", "csrc/loop.c",
        "csrc/mr.c", "csrc/mw.c", "csrc/object.c", "csrc/pd.c", "csrc/qp.c", "csrc/qp_ex.c", "csrc/srq.c", "csrc/wait.c",
        "csrc/wc.c", "csrc/wr.c", "csrc/xrcd.c",
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
    ["ibverbs.getopt"] = "lua/ibverbs/getopt.lua",
    ["ibverbs.exchange"] = "lua/ibverbs/exchange.lua",
    ["ibverbs.pingpong"] = "lua/ibverbs/pingpong.lua",
  },
}
test = {
  type = "busted",
  flags = { "--run=host" },
}
