-- examples/fabric_check.lua on this host, which has no RDMA driver: alone, and
-- as a job of local ranks (the exit status each rank gives).
local fs = require "fabric_support"
local LUA, CPATH = fs.LUA, fs.CPATH

local function alone(args)
  local p = io.popen("LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. CPATH .. "' " .. LUA ..
    " examples/fabric_check.lua " .. args .. " 2>&1; echo rc=$?")
  local out = p:read("a")
  p:close()
  return out
end

describe("examples/fabric_check.lua on this host (no RDMA driver)", function()
  it("reports the missing driver as this node's fault and exits 1, without a traceback", function()
    local out = alone("")
    assert.matches("%(none%): FAIL no RDMA driver loaded %(ibv_get_device_list: Function not implemented%)", out)
    assert.matches("rc=1", out)
    assert.not_matches("traceback", out)
  end)

  it("exits 2 for a bad option", function()
    local out = alone("--ud-loss 2")
    assert.matches("option '%-%-ud%-loss': at most 0%.99 expected, got 2", out)
    assert.matches("rc=2\n$", out)
  end)

  it("exits 1 on each rank whose own node is at fault, and names them", function()
    local text, rcs = fs.job("examples/fabric_check.lua", 2, "")
    assert.same({ [0] = 1, [1] = 1 }, rcs)
    assert.matches("nodes at fault %(exit 1%): rank 0 %(%S+%), rank 1 %(%S+%)", text)
  end)

  it("exits 2 on every rank when the ranks run other options, naming what each runs", function()
    local _, rcs, texts = fs.job("examples/fabric_check.lua", 3, function(r) return r == 2 and "--ud-count 3" or "" end)
    assert.same({ [0] = 2, [1] = 2, [2] = 2 }, rcs)
    for r = 0, 2 do
      assert.matches("the ranks do not run the same script version and options: rank 0 %(%S+%) and rank 1 %(%S+%): "
        .. "'fabric_check%.lua 2 .-ud_count=10 .-'; rank 2 %(%S+%): 'fabric_check%.lua 2 .-ud_count=3 .-'", texts[r])
    end
  end)
end)
