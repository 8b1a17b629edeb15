-- ibvlua on rxe0: the examples, a busted device spec and the prompt, each run
-- with the verbs modules from inside the binary (empty environment, a
-- directory outside the checkout).  (No device: spec/host/project/ibvlua_spec.lua.)
local support = require "support"
local FLAVOUR, ROOT, IBVLUA = support.LUA, support.ROOT, support.IBVLUA

local run = support.capture

-- no environment but search paths that lead nowhere (not even the system's):
-- ibverbs and the examples' argparse and dkjson come from inside the binary
local function ibvlua(args, env)
  return run(("cd /tmp && timeout 120 env -i %s LUA_PATH=/nonexistent/?.lua LUA_CPATH=/nonexistent/?.so %s %s")
    :format(env or "", IBVLUA, args))
end

describe("on rxe0, ibvlua (" .. FLAVOUR .. ")", function()
  it("--version: the node report names rxe0, its provider (rxe), its netdev, its port and rdma-core's release",
    function()
    local ibv = require "ibverbs"
    local rel = require("ibverbs.node_report").file_release(ibv.rdma_core.libibverbs)
    for _, aid in ipairs({ "", "IBVL_RDMA_CORE=28" }) do
      local out, rc = ibvlua("--version", aid)
      assert.equal(0, rc, out)
      assert.matches("\nrdma%-core: " .. rel:gsub("%.", "%%.") .. " %(the file name libibverbs%.so%.1%.", out)
      assert.matches("\ndevices: 1\n  rxe0: ca, node guid %x+:%x+:%x+:%x+[^\n]*\n", out)
      assert.matches("\n    provider rxe %(/[^\n]*/librxe%-rdmav%d+%.so%); kernel: no device: "
        .. "a software device on netdev d0\n", out)
      assert.matches("\n    port 1: active, mtu 1024, ethernet, %d+ GIDs, "
        .. "RoCE v2 IPv4 at index 1 %(::ffff:192%.0%.2%.1%)\n", out)
      -- argparse and dkjson are built in; LuaSocket is a C module from the system path, none here
      assert.matches("\nthe tools' libraries: argparse [%d.]+ built in; dkjson [%d.]+ built in;", out)
      local lacks = out:match("\nlacks: ([^\n]*)\n$")
      assert.is_truthy(lacks == "nothing the tools need"
        or lacks == "socket (fabric_matrix, ibverbs.fabric, ibverbs.exchange)", out)
      if aid ~= "" then
        assert.matches("; IBVL_RDMA_CORE=28 %(a test aid%): treated as rdma%-core 28\n", out)
        assert.matches("\n  read from sysfs instead: ctx:query_gid_table, ctx:query_gid_ex\n", out)
      elseif tonumber(rel:match("^%d+")) >= 36 then
        assert.matches("\nverbs newer than rdma%-core 28 this node lacks: none\n", out)
      end
    end
  end)

  it("runs examples/devinfo.lua with an empty environment and no search path", function()
    local out, rc = ibvlua(ROOT .. "/examples/devinfo.lua -d rxe0")
    assert.equal(0, rc, out)
    assert.matches("hca_id:\trxe0", out)
    assert.matches("PORT_ACTIVE", out)
  end)

  it("runs examples/fabric_check.lua with an empty environment and no search path: all PASS", function()
    local out, rc = ibvlua(ROOT .. "/examples/fabric_check.lua -d rxe0 -g 1")
    assert.equal(0, rc, out)
    assert.matches("6 checks, 0 failed: PASS", out)
    out, rc = ibvlua(ROOT .. "/examples/fabric_check.lua -d rxe0 -g 1 --json")
    assert.equal(0, rc, out)
    assert.matches('^{"checks":6,"devices":%[{', out)
    assert.matches('"pass":true}\n$', out)
  end)

  it("runs busted (/usr/bin/busted) on a device spec, the verbs modules from the binary", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute(("mkdir -p %s && cp spec/device/verbs/context_spec.lua spec/support.lua %s/"):format(dir, dir)))
    local f = assert(io.open(dir .. "/builtin_spec.lua", "w"))
    f:write([[
      it("takes ibverbs from inside ibvlua", function()
        assert.is_function(package.preload["ibverbs"])
        assert.is_function(package.preload["ibverbs.core"])
        assert.is_nil(package.searchpath("ibverbs", package.path))
      end)
    ]])
    f:close()
    local out, rc = run(("cd %s && timeout 300 env -i PATH=/usr/bin:/bin LUA_PATH='./?.lua;;' %s /usr/bin/busted " ..
      "-o utfTerminal builtin_spec.lua context_spec.lua"):format(dir, IBVLUA))
    os.execute("rm -rf " .. dir)
    assert.equal(0, rc, out)
    assert.matches("%d+ successes / 0 failures / 0 errors / 0 pending", out)
  end)

  it("-i on a terminal: opens rxe0, prints a port attribute, exits 0", function()
    local out, rc = run(("cd /tmp && timeout 120 %s/tools/pty-drive 'ctx = assert(ibv.open(\"rxe0\"))' " ..
      "'print(\"state:\", ctx:query_port(1).state)' '=ctx:query_port(1).active_mtu' 'os.exit(0)' -- " ..
      "env -i %s -i"):format(ROOT, IBVLUA))
    assert.equal(0, rc, out)
    assert.matches("state:\tactive", out)
    assert.matches("\n1024", out)
  end)
end)
