-- `luarocks make rockspec/ibverbs-0.1-1.rockspec` from a checkout builds and
-- installs this version; the version here is ibverbs.core's _VERSION
-- ("ibverbs.core 0.1"): packaging_spec checks that they agree.
-- Lua 5.4, Lua 5.3 and LuaJIT 2.1 (`luarocks --lua-version 5.1 ...
-- LUA_INCDIR=/usr/include/luajit-2.1`); plain Lua 5.1 and 5.2 stop at an
-- #error in csrc/base/compat.h.  The rockspec keeps to format 1.0 (no
-- rockspec_format line, no 3.0 fields), so the LuaRocks 2.4 of Debian 11
-- installs it as LuaRocks 3 does.
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
  license = "MIT",
}
dependencies = {
  "lua >= 5.1, < 5.5", -- 5.1 means LuaJIT 2.1 here: plain 5.1 and 5.2 are refused by the C build
  "luasocket >= 3.0", -- ibverbs.exchange: the TCP exchange of QP addresses
  "argparse >= 0.7", -- the tools' command lines (ibverbs.tools.cli; examples/ is installed with the rock)
  "dkjson >= 2.5", -- ibverbs.fabric (collectives), examples/fabric_check.lua --json
}
external_dependencies = {
  IBVERBS = { header = "infiniband/verbs.h", library = "ibverbs" },
  RDMACM = { header = "rdma/rdma_cma.h", library = "rdmacm" },
}
build = {
  -- the Makefile's rock target: tools/configure probes the rdma-core headers
  -- LuaRocks found, then ibverbs.core is compiled from every .c file under csrc/
  type = "make",
  build_target = "rock",
  build_variables = {
    CC = "$(CC)",
    CFLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
    IBVERBS_INCDIR = "$(IBVERBS_INCDIR)",
    IBVERBS_LIBDIR = "$(IBVERBS_LIBDIR)",
    RDMACM_INCDIR = "$(RDMACM_INCDIR)",
    RDMACM_LIBDIR = "$(RDMACM_LIBDIR)",
  },
  install_target = "rock-install",
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
  },
  copy_directories = { "examples", "docs" }, -- docs: the API reference sources (docs/api) and guides
}
