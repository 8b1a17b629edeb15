-- ibverbs.node_report (what `ibvlua --version` prints) on this machine, which
-- has no RDMA driver: the report's lines in their order, the release of the
-- node's rdma-core and how it is known, no device said cleanly with why, the
-- tools' libraries (from the system path, built into ibvlua, missing), and
-- IBVL_RDMA_CORE: the verbs it drops, the fallbacks, a value that is no
-- release.  (On rxe0: spec/device/verbs/reach_spec.lua.)
local support = require "support"
local FLAVOUR, IBVLUA = support.LUA, support.IBVLUA

local report = require "ibverbs.node_report"
local ibv = require "ibverbs"

local PATHS = "LUA_PATH='lua/?.lua;lua/?/init.lua;;' LUA_CPATH='" .. support.BUILD .. "/?.so;;'"

-- The report as a fresh interpreter prints it, with env (assignments) before it.
local function printed(env)
  return support.capture(("env %s %s %s -e 'require(\"ibverbs.node_report\").print()'")
    :format(PATHS, env or "", FLAVOUR == "luajit" and "luajit" or FLAVOUR))
end

local function line_of(out, prefix)
  for l in out:gmatch("[^\n]+") do
    if l:sub(1, #prefix) == prefix then return l end
  end
end

local NO_RDMA = io.open("/sys/class/infiniband") == nil

describe("ibverbs.node_report (" .. FLAVOUR .. ")", function()
  it("prints lua, module, node, rdma-core, missing verbs, devices, libraries, lacks: in that order", function()
    local out, rc = printed()
    assert.equal(0, rc, out)
    local order = { "lua: ", "module: ibverbs.core 0.1 (", "node: ", "rdma-core: ", "  /",
                    "verbs newer than rdma-core 28 this node lacks: ", "devices: ", "the tools' libraries: ",
                    "lacks: " }
    local at = 0
    for _, p in ipairs(order) do
      local i = out:find("\n" .. p, at, true) or (at == 0 and out:sub(1, #p) == p and 0)
      assert.is_truthy(i, "no line '" .. p .. "' after position " .. at .. " in\n" .. out)
      at = i + 1
    end
    assert.matches("module: ibverbs%.core 0%.1 %([^\n]*core%.so%), built against rdma%-core [%d.]+\n", out)
    for l in out:gmatch("[^\n]+") do assert.is_true(#l <= 140, l) end
  end)

  it("names the release from the library's file, bounded by its symbol versions", function()
    local rc = ibv.rdma_core
    local file_rel = report.file_release(rc.libibverbs)
    assert.matches("libibverbs%.so%.1%.%d+%.%d+%.%d+$", rc.libibverbs) -- this machine's rdma-core names it so
    assert.matches("librdmacm%.so%.1%.%d+%.%d+%.%d+$", rc.librdmacm)
    assert.is_string(file_rel)
    local r = tonumber(file_rel:match("^%d+"))
    assert.is_true(r >= rc.at_least and r <= (rc.at_most or math.huge), file_rel)
    assert.matches("^IBVERBS_1%.%d+$", rc.versions[1])
    assert.matches("^RDMACM_1%.%d+$", rc.versions[2])
    if r >= 36 and r <= 58 then -- Debian 12's 44: IBVERBS_1.14 since 36, RDMACM_1.3 since 31, 1.15 at 59
      assert.same({ "IBVERBS_1.14", "RDMACM_1.3" }, rc.versions)
      assert.equal(36, rc.at_least)
      assert.equal(58, rc.at_most)
    end
    local out = printed()
    local want = ("rdma-core: %s (the file name %s; its symbol versions %s, %s say %s)\n"):format(file_rel,
      rc.libibverbs:match("[^/]+$"), rc.versions[1], rc.versions[2],
      rc.at_most and (rc.at_least .. " to " .. rc.at_most) or (rc.at_least .. " or later"))
    assert.is_truthy(out:find(want, 1, true), want .. " not in\n" .. out)
    assert.equal("44.0", report.file_release("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.14.44.0"))
    assert.equal("28.0", report.file_release("/usr/lib/x86_64-linux-gnu/libibverbs.so.1.8.28.0"))
    assert.is_nil(report.file_release("/opt/lib/libibverbs.so.1"))
  end)

  it("says cleanly that there is no RDMA device, and why", function()
    local f = report.facts()
    if NO_RDMA then -- this machine
      assert.same({}, f.devices)
      assert.matches("^this kernel has no RDMA driver loaded %(no /sys/class/infiniband", f.no_devices)
      local out, rc = printed()
      assert.equal(0, rc, out)
      assert.matches("\ndevices: none: this kernel has no RDMA driver loaded %(no /sys/class/infiniband; "
        .. "ibv_get_device_list: Function not implemented%)\n", out)
      assert.matches("\nlacks: an RDMA device: this kernel has no RDMA driver loaded", out)
      assert.not_matches("traceback", out)
    else
      assert.is_true(#f.devices > 0 or f.no_devices ~= nil)
    end
  end)

  it("says where argparse, dkjson and LuaSocket come from, and what a missing one is needed by", function()
    local out = printed()
    local libs = line_of(out, "the tools' libraries: ")
    assert.matches("argparse [%d.]+ from /[^;]*argparse%.lua", out)
    assert.matches("dkjson [%d.]+ from /[^;]*dkjson%.lua", out)
    assert.matches("socket LuaSocket %S+ from /[^\n]*socket%.lua", out)
    assert.is_string(libs)
    -- the system's paths gone: all three missing, each named with what needs it
    out = support.capture(("env LUA_PATH='lua/?.lua;lua/?/init.lua' LUA_CPATH='%s/?.so' %s -e "
      .. "'require(\"ibverbs.node_report\").print()'"):format(support.BUILD, FLAVOUR))
    assert.matches("argparse missing; dkjson missing;%s+socket missing", out)
    assert.matches("lacks: argparse %(every tool's command line%);", out)
    assert.matches("socket %(fabric_matrix, ibverbs%.fabric, ibverbs%.exchange%)", out)
    -- built into ibvlua, with no search path at all
    out = support.capture("cd /tmp && env -i LUA_PATH=/nonexistent/?.lua LUA_CPATH=/nonexistent/?.so "
      .. IBVLUA .. " --version")
    assert.matches("argparse [%d.]+ built in; dkjson [%d.]+ built in", out)
  end)

  it("under IBVL_RDMA_CORE=28 lists the 18 later verbs by release, the sysfs fallbacks and the aid", function()
    local out, rc = printed("IBVL_RDMA_CORE=28")
    assert.equal(0, rc, out)
    assert.matches("; IBVL_RDMA_CORE=28 %(a test aid%): treated as rdma%-core 28\n", out)
    assert.matches("verbs newer than rdma%-core 28 this node lacks: 18, by the release that brought them: "
      .. "%(30%) ibv_get_device_index;", out)
    assert.matches("%(32%) _ibv_query_gid_ex, _ibv_query_gid_table;", out)
    assert.matches("%(36%) ibv_query_qp_data_in_order\n", out)
    assert.matches("\n  read from sysfs instead: ctx:query_gid_table, ctx:query_gid_ex\n", out)
    -- 31 and 32 as well: what each drops
    out = printed("IBVL_RDMA_CORE=31")
    assert.matches("lacks: 7, by the release that brought them: %(32%) _ibv_query_gid_ex", out)
    out = printed("IBVL_RDMA_CORE=32.0")
    assert.matches("lacks: 5, by the release that brought them: %(34%) ibv_reg_dmabuf_mr;", out)
    assert.not_matches("read from sysfs", out)
  end)

  it("reports a value of IBVL_RDMA_CORE that is no release as the module's error, and goes on", function()
    for _, v in ipairs({ "abc", "27", "28x" }) do
      local out, rc = printed("IBVL_RDMA_CORE=" .. v)
      assert.equal(0, rc, out)
      local why = v == "27" and "the module needs rdma%-core 28 or later" or "expected an rdma%-core release such as 28"
      assert.matches("module: cannot load ibverbs: IBVL_RDMA_CORE=" .. v .. ": " .. why .. "\n", out)
      assert.matches("\nlacks: the ibverbs module %(IBVL_RDMA_CORE=" .. v, out)
      assert.matches("the tools' libraries: ", out)
    end
    local out, rc = support.capture(("env %s IBVL_RDMA_CORE=abc %s -e 'require \"ibverbs\"'"):format(PATHS, FLAVOUR))
    assert.not_equal(0, rc)
    assert.matches("IBVL_RDMA_CORE=abc: expected an rdma%-core release such as 28", out)
  end)

  it("gives the facts as data", function()
    local f = report.facts()
    assert.is_string(f.lua)
    assert.is_string(f.module.version)
    assert.is_string(f.node.kernel)
    assert.is_table(f.rdma_core.missing)
    assert.is_table(f.rdma_core.fallbacks)
    assert.equal(32, f.rdma_core.since._ibv_query_gid_table)
    assert.equal(3, #f.dependencies)
    for _, d in ipairs(f.dependencies) do
      assert.is_truthy(d.where == "built in" or d.where == "missing" or d.where:match("^from /"), d.where)
      assert.is_string(d.needed_by)
    end
    assert.is_table(f.lacks)
    local lines, f2 = report.lines({ host = "host 1", lua = "Lua X" })
    assert.equal("host 1", lines[1])
    assert.equal("lua: Lua X", lines[2])
    assert.is_table(f2.devices)
  end)
end)
