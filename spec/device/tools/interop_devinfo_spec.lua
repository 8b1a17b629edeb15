-- devinfo.lua against rdma-core's ibv_devinfo on rxe0.
local support = require "support"

local function lines(s)
  local t = {}
  for l in s:gmatch("[^\n]+") do t[#t + 1] = l end
  return t
end

local function has_line(out, line)
  for _, l in ipairs(lines(out)) do
    if l == line then return true end
  end
  return false
end

describe("on rxe0, devinfo.lua", function()
  it("prints exactly what ibv_devinfo prints for the device and its ports", function()
    local c, crc = support.run("timeout 30 ibv_devinfo -d rxe0")
    local l, lrc = support.run("timeout 30 " .. support.example("devinfo.lua", "-d rxe0"))
    assert.equal(0, crc)
    assert.equal(0, lrc, l)
    assert.same(lines(c), lines(l))
    assert.matches("PORT_ACTIVE %(4%)", l)
  end)

  it("with -v adds ibv_devinfo -v's limits, capability flags and GID table", function()
    local c = support.run("timeout 30 ibv_devinfo -v -d rxe0")
    local l, lrc = support.run("timeout 30 " .. support.example("devinfo.lua", "-v -d rxe0"))
    assert.equal(0, lrc, l)
    local checked = 0
    for _, line in ipairs(lines(c)) do
      local flag = line:find("^\t\t\t\t\t%u") and not line:find("NO SUPPORT")
      if flag or line:find("GID%[") or line:find("^\tmax_") or line:find("port_cap_flags")
        or line:find("gid_tbl_len") or line:find("atomic_cap") then
        assert.is_true(has_line(l, line), "missing from devinfo.lua -v: " .. line)
        checked = checked + 1
      end
    end
    assert.is_true(checked > 30)
  end)

  it("lists the devices with -l and refuses an unknown device", function()
    local l = support.run("timeout 30 " .. support.example("devinfo.lua", "-l"))
    assert.matches("1 HCA found:\n\trxe0\n", l)
    local out, rc = support.run("timeout 30 " .. support.example("devinfo.lua", "-d nosuch0"))
    assert.equal(1, rc)
    assert.matches("IB device 'nosuch0' wasn't found", out)
  end)
end)
