-- examples/fabric_check.lua on this host, which has no RDMA driver.
local fs = require "fabric_support"
local LUA, CPATH = fs.LUA, fs.CPATH

describe("examples/fabric_check.lua on this host (no RDMA driver)", function()
  it("reports the missing driver as this node's fault and exits 1, without a traceback", function()
    local p = io.popen("LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. CPATH .. "' " .. LUA ..
      " examples/fabric_check.lua 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    assert.matches("%(none%): FAIL no RDMA driver loaded %(ibv_get_device_list: Function not implemented%)", out)
    assert.matches("rc=1", out)
    assert.not_matches("traceback", out)
  end)
end)
