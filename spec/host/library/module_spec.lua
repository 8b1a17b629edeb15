-- Specs that need no RDMA device: the module loads, checks its arguments and
-- refuses closed objects, on any machine.
local ibv = require "ibverbs"

describe("the ibverbs module", function()
  it("loads and exposes flag constants", function()
    assert.is_string(ibv._VERSION)
    assert.equal(1, ibv.ACCESS_LOCAL_WRITE)
    assert.equal(4, ibv.ACCESS_REMOTE_READ)
    assert.equal(2, ibv.SEND_SIGNALED)
  end)

  it("exports the errno values by name, their names by number, and strerror's texts", function()
    assert.equal(16, ibv.errno.EBUSY)
    assert.equal(110, ibv.errno.ETIMEDOUT)
    assert.equal("EBUSY", ibv.errno[16])
    assert.equal("EAGAIN", ibv.errno[ibv.errno.EWOULDBLOCK])
    assert.equal("EOPNOTSUPP", ibv.errno[95])
    assert.equal("Device or resource busy", ibv.strerror(ibv.errno.EBUSY))
    assert.equal("Operation not supported", ibv.strerror(95))
    assert.has_error(function() ibv.strerror(-1) end)
  end)

  it("rejects a bad device argument by naming it", function()
    assert.has_error(function() ibv.open(0) end, "bad argument #1 to 'open' (0 out of range [1, 2147483647])")
    assert.has_error(function() ibv.open({}) end)
  end)

  it("extends a type's methods from Lua", function()
    ibv.extend("ibverbs.buffer", { twice = function(b) return 2 * #b end })
    assert.equal(20, ibv.buffer(10):twice())
    assert.has_error(function() ibv.extend("ibverbs.nope", {}) end)
  end)
end)

describe("the installed Lua modules", function()
  -- the tools' own code (ibverbs.tools and lua/ibverbs/tools/: a tool's main,
  -- its command line) ends the process as a command does; no library, control
  -- plane or bring-up engine module requires it
  it("never call os.exit: a library module returns nil, msg (ibverbs.exchange included)", function()
    local p = assert(io.popen("find lua -name '*.lua' | sort"))
    local n = 0
    for path in p:lines() do
      local f = assert(io.open(path, "rb"))
      local text = f:read("*a")
      f:close()
      if not path:find("^lua/ibverbs/tools[/.]") then
        n = n + 1
        assert.is_nil(text:find("os%.exit"), path .. " calls os.exit")
        assert.is_nil(text:find("require%s*%(?%s*[\"']ibverbs%.tools"), path .. " requires a tool's module")
      end
    end
    p:close()
    assert.is_true(n >= 6, "only " .. n .. " modules found")
  end)

  -- the layers: library, control plane (ibverbs.fabric), bring-up engine
  -- (ibverbs.bringup), tools (ibverbs.tools); the engine is below the tools
  it("the bring-up engine (lua/ibverbs/bringup/) never requires a tool's module", function()
    local p = assert(io.popen("find lua/ibverbs/bringup -name '*.lua' | sort"))
    local n = 0
    for path in p:lines() do
      n = n + 1
      local f = assert(io.open(path, "rb"))
      local text = f:read("*a")
      f:close()
      assert.is_nil(text:find("require%s*%(?%s*[\"']ibverbs%.tools"), path .. " requires a tool's module")
      assert.is_nil(text:find("pcall%(%s*require%s*,%s*[\"']ibverbs%.tools"), path .. " requires a tool's module")
    end
    p:close()
    assert.is_true(n >= 20, "only " .. n .. " engine modules found")
  end)
end)

describe("ibv.buffer", function()
  it("is zeroed, page aligned and bounds checked", function()
    local b = ibv.buffer(100)
    assert.equal(100, #b)
    assert.equal(0, b.addr % 4096)
    assert.equal(string.rep("\0", 100), b:read(0, 100))
    assert.equal(3, b:write(97, "xyz"))
    assert.equal("xyz", b:read(97, 3))
    assert.has_error(function() b:read(98, 3) end,
      "bad argument #1 to 'read' (offset 98 + length 3 outside the 100 bytes)")
    assert.has_error(function() b:write(-1, "a") end)
    assert.has_error(function() b:read(0, -1) end)
  end)

  it("reads and writes 64-bit words", function()
    local b = ibv.buffer(16)
    b:u64(8, 0x1122334455667788)
    assert.equal(0x1122334455667788, b:u64(8))
    assert.has_error(function() b:u64(9) end)
  end)

  it("refuses every method once closed, and closes twice harmlessly", function()
    local b = ibv.buffer(8)
    assert.is_true(b:close())
    assert.is_true(b:close())
    assert.is_true(b:is_closed())
    assert.has_error(function() b:read(0, 1) end, "read: attempt to use a closed ibverbs.buffer")
    assert.matches("closed", tostring(b))
  end)

  it("works as a Lua 5.4 to-be-closed variable", function()
    if not _VERSION:match("5%.4") then return end -- syntax LuaJIT cannot parse
    local keep = assert(load([[
      local ibv, keep = ...
      do
        local b <close> = ibv.buffer(8)
        keep = b
      end
      return keep]]))(ibv)
    assert.is_true(keep:is_closed())
  end)
end)
