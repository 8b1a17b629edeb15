-- The rockspec builds what the Makefile builds: every C source and Lua module.
local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(cmd)
  local p = assert(io.popen(cmd))
  local out = {}
  for l in p:lines() do out[#out + 1] = l end
  p:close()
  return out
end

describe("rockspec/ibverbs-scm-1.rockspec", function()
  local spec = {}
  assert(load(read("rockspec/ibverbs-scm-1.rockspec"), "rockspec", "t", spec))()

  it("is format 3.0 with IBVERBS and RDMACM external dependencies and busted for tests", function()
    assert.equal("3.0", spec.rockspec_format)
    assert.is_table(spec.external_dependencies.IBVERBS)
    assert.is_table(spec.external_dependencies.RDMACM)
    assert.same({ "busted" }, spec.test_dependencies)
  end)

  it("compiles every csrc/*.c file into ibverbs.core", function()
    local listed = {}
    for _, s in ipairs(spec.build.modules["ibverbs.core"].sources) do listed[s] = true end
    for _, f in ipairs(lines_of("ls csrc/*.c")) do
      assert.is_true(listed[f] == true, f .. " is missing from the rockspec")
      listed[f] = nil
    end
    assert.same({}, listed)
  end)

  it("installs every Lua module under lua/", function()
    local installed = {}
    for name, src in pairs(spec.build.modules) do
      if type(src) == "string" then installed[src] = name end
    end
    for _, f in ipairs(lines_of("find lua -name '*.lua' | sort")) do
      local name = f:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/", ".")
      assert.equal(name, installed[f], f .. " is not installed as " .. name)
    end
  end)
end)
