-- The rockspec builds through the Makefile (tools/configure, then every .c
-- file under csrc/), every version string agrees, and `luarocks make` installs a rock
-- whose every module loads from the tree it was installed to (Lua 5.4 and
-- 5.3: --lua-version 5.4 / 5.3; LuaJIT: --lua-version 5.1 with LuaJIT's
-- headers), with this machine's LuaRocks 3 and with Debian 11's LuaRocks 2.4
-- (in tools/bullseye's tree).  Plain Lua 5.1 is refused with a clear #error.
local support = require "support"
local ROCKSPEC = "rockspec/ibverbs-0.1-1.rockspec"
local JIT = rawget(_G, "jit") ~= nil
local LUA = JIT and "luajit" or "lua5.4"

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

local lines_of = support.lines_of

-- Runs a shell command; returns its output (stdout and stderr) and exit status.
local sh = support.capture

local function load_rockspec()
  local spec = {}
  local chunk
  if setfenv then -- LuaJIT
    chunk = assert(loadstring(read(ROCKSPEC), "rockspec"))
    setfenv(chunk, spec)
  else
    chunk = assert(load(read(ROCKSPEC), "rockspec", "t", spec))
  end
  chunk()
  return spec
end

describe(ROCKSPEC, function()
  local spec = load_rockspec()

  it("is the only rockspec, format 1.0 (LuaRocks 2.4 takes it), built by the Makefile's rock target", function()
    assert.same({ ROCKSPEC }, lines_of("ls rockspec/*.rockspec"))
    assert.is_nil(spec.rockspec_format)
    assert.is_nil(spec.test_dependencies) -- a 3.0 field: LuaRocks 2.4 refuses it
    assert.is_nil(spec.test)
    assert.is_table(spec.external_dependencies.IBVERBS)
    assert.is_table(spec.external_dependencies.RDMACM)
    assert.equal("make", spec.build.type)
    assert.equal("rock", spec.build.build_target)
    assert.equal("rock-install", spec.build.install_target)
  end)

  it("has ibverbs.core's version, a git+https source, a homepage and the LICENSE's licence", function()
    local core = require "ibverbs.core"
    local v = spec.version:match("^(.-)%-%d+$")
    assert.equal("ibverbs.core " .. v, core._VERSION)
    assert.equal("rockspec/" .. spec.package .. "-" .. spec.version .. ".rockspec", ROCKSPEC)
    assert.matches("^git%+https://github%.com/[%w-]+/[%w-]+%.git$", spec.source.url)
    assert.equal("v" .. v, spec.source.tag)
    assert.matches("^https://", spec.description.homepage)
    assert.equal("MIT", spec.description.license)
    assert.matches("^MIT License", read("LICENSE"))
  end)

  it("declares the Lua versions and the libraries the shipped modules and examples require", function()
    local deps = {}
    for _, d in ipairs(spec.dependencies) do deps[d:match("^%S+")] = d end
    assert.equal("lua >= 5.1, < 5.5", deps.lua)
    assert.is_string(deps.luasocket) -- ibverbs.exchange
    assert.is_string(deps.argparse) -- the tools (ibverbs.tools.cli)
    assert.is_string(deps.dkjson) -- ibverbs.fabric, examples/fabric_check.lua
    for _, f in ipairs(lines_of("find lua -name '*.lua' | sort")) do
      for m in read(f):gmatch('require%s*%(?%s*"([%w_.]+)"') do
        local top = m:match("^[^.]+")
        assert.is_true(top == "ibverbs" or top == "ffi" or (top == "socket" and deps.luasocket ~= nil)
          or (top == "dkjson" and deps.dkjson ~= nil) -- ibverbs.fabric
          or (top == "argparse" and deps.argparse ~= nil), -- ibverbs.tools.cli
          f .. " requires " .. m .. ", which is not a declared dependency")
      end
    end
  end)

  it("has the rock target compile every .c file under csrc/ into ibverbs.core, after tools/configure", function()
    local out, rc = sh("make -n rock LUA_INCDIR=/usr/include/lua5.4 IBVERBS_INCDIR=/usr/include " ..
      "RDMACM_INCDIR=/usr/include IBVERBS_LIBDIR=/usr/lib RDMACM_LIBDIR=/usr/lib " ..
      "| sed 's/make -C[^;]*;//' && make -n -C . BUILD=build/rock-dry LUA=lua5.4 build/rock-dry/ibverbs/core.so")
    assert.equal(0, rc, out)
    assert.matches("tools/configure", out, 1, true)
    for _, f in ipairs(lines_of("find csrc -name '*.c' | sort")) do
      assert.matches(" " .. f .. " ", out, 1, true)
    end
  end)

  describe("luarocks make into a temporary tree", function()
    local tmp
    before_each(function()
      tmp = lines_of("mktemp -d /tmp/ibverbs-rock.XXXXXX")[1]
      -- a copy of the sources: luarocks compiles next to them
      local out, rc = sh("cp -r csrc lua rockspec examples docs tools LICENSE Makefile " .. tmp .. "/")
      assert.equal(0, rc, out)
    end)
    after_each(function()
      if tmp then os.execute("rm -rf " .. tmp) end
    end)

    -- luarocks for this interpreter; the dependencies are Debian's packages
    -- (lua-socket, lua-argparse, lua-dkjson), which luarocks does not see.
    local function luarocks(lua_version, extra)
      return "cd " .. tmp .. " && luarocks --lua-version " .. lua_version .. " --tree " .. tmp .. "/tree make" ..
        " --deps-mode=none " .. ROCKSPEC .. " CFLAGS='-O2 -fPIC -Wall -Werror'" .. (extra or "")
    end

    -- every module under lua/, by its require name
    local function lua_modules()
      local modules = {}
      for _, f in ipairs(lines_of("find lua -name '*.lua' | sort")) do
        modules[#modules + 1] = (f:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", "."))
      end
      modules[#modules + 1] = "ibverbs.core"
      return modules
    end

    -- builds the rock for the interpreter, then loads every module from the tree alone
    local function build_and_load(lua, lv, extra)
      local out, rc = sh(luarocks(lv, extra))
      assert.equal(0, rc, out)
      local modules = lua_modules()
      -- the tree first, then the system's directories (luasocket); never the checkout
      local script = [[
        package.path = "TREE/share/lua/LV/?.lua;TREE/share/lua/LV/?/init.lua;/usr/share/lua/LV/?.lua"
        package.cpath = "TREE/lib/lua/LV/?.so;/usr/lib/x86_64-linux-gnu/lua/LV/?.so"
        for _, m in ipairs({MODULES}) do
          local ok, err = pcall(require, m)
          if m == "ibverbs.ffi" and not jit then
            assert(not ok and err:find("needs LuaJIT"), err)
          else
            assert(ok, err)
            local from = package.searchpath and package.searchpath(m, package.path .. ";" .. package.cpath) or ""
            assert(not from:find("^lua/"), m .. " came from the checkout")
          end
        end
        assert(require("ibverbs").errno.EBUSY == 16)
        print("loaded " .. #{MODULES} .. " modules, " .. require("ibverbs.core")._VERSION)
      ]]
      script = script:gsub("TREE", tmp .. "/tree"):gsub("LV", lv)
        :gsub("{MODULES}", '{"' .. table.concat(modules, '","') .. '"}')
      local f = assert(io.open(tmp .. "/check.lua", "w"))
      f:write(script)
      f:close()
      out, rc = sh("cd / && env -u LUA_PATH -u LUA_CPATH " .. lua .. " " .. tmp .. "/check.lua")
      assert.equal(0, rc, out)
      assert.matches("loaded " .. #modules .. " modules, ibverbs.core ", out)
    end

    it("builds with -Wall -Werror and every module loads from the tree alone (" .. LUA .. ")", function()
      build_and_load(LUA, JIT and "5.1" or "5.4", JIT and " LUA_INCDIR=/usr/include/luajit-2.1" or "")
    end)

    if not JIT then -- once: the interpreter running the spec plays no part
      it("builds and loads under Lua 5.3 too", function()
        build_and_load("lua5.3", "5.3", "")
      end)

      it("installs with Debian 11's LuaRocks 2.4 against its rdma-core 33 (tools/bullseye's tree)", function()
        assert.is_true(io.open(".cache/bullseye/.packages.ok") ~= nil, "no bullseye tree: make deps makes it")
        -- a copy inside the project: the tree sees the project, not this machine's /tmp
        local dir = lines_of("pwd")[1] .. "/build/rock-bullseye"
        local out, rc = sh("rm -rf " .. dir .. " && mkdir -p " .. dir .. " && cp -r " .. tmp .. "/. " .. dir .. "/")
        assert.equal(0, rc, out)
        out, rc = sh("tools/bullseye run sh -c 'luarocks --version | head -1 && cd " .. dir ..
          " && luarocks --tree " .. dir .. "/tree make --deps-mode=none " .. ROCKSPEC .. " && " ..
          "LUA_CPATH=" .. dir .. "/tree/lib/lua/5.3/?.so lua5.3 -e \"print(require([[ibverbs.core]])._VERSION)\"'")
        os.execute("rm -rf " .. dir)
        assert.equal(0, rc, out)
        assert.matches("luarocks 2.4", out, 1, true)
        assert.matches("ibverbs.core 0.1", out, 1, true)
      end)
    end

    it("refuses plain Lua 5.1 with the #error of csrc/base/compat.h", function()
      if not io.open("/usr/include/lua5.1/lua.h") then error("liblua5.1-0-dev is needed (make deps)") end
      local out, rc = sh(luarocks("5.1", " LUA_INCDIR=/usr/include/lua5.1"))
      assert.not_equal(0, rc)
      assert.matches("#error \"ibverbs.core needs Lua 5.3 or 5.4", out, 1, true)
    end)
  end)
end)
