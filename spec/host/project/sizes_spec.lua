-- tools/check-sizes: every C and Lua file of csrc/, host/ and lua/ within
-- 600 lines and every function within 80, so the tree stays one a reader can
-- hold; and the check itself fails on a file or function past the limits.
local support = require "support"

local sh = support.capture

local function tmpdir()
  return support.lines_of("mktemp -d /tmp/ibvl-sizes.XXXXXX")[1]
end

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

describe("tools/check-sizes", function()
  it("finds no file over 600 lines and no function over 80 in csrc/, host/ and lua/", function()
    local out, rc = sh("tools/check-sizes")
    assert.equal(0, rc, out)
    assert.matches("0 over the limits", out)
  end)

  describe("on planted files", function()
    local dir
    before_each(function() dir = tmpdir() end)
    after_each(function() os.execute("rm -rf " .. dir) end)

    it("fails on a Lua file of 601 lines, naming it", function()
      write(dir .. "/long.lua", ("x = 1\n"):rep(601))
      local out, rc = sh("tools/check-sizes " .. dir)
      assert.equal(1, rc, out)
      assert.matches("long%.lua:1: file has 601 lines %(at most 600%)", out)
    end)

    it("passes a Lua function of 80 lines and fails one of 81, named by its first line", function()
      write(dir .. "/ok.lua", "local function f()\n" .. ("  local _ = 1\n"):rep(78) .. "end\nreturn f\n")
      write(dir .. "/long.lua", "\nreturn function()\n" .. ("  local _ = 1\n"):rep(79) .. "end\n")
      local out, rc = sh("tools/check-sizes " .. dir)
      assert.equal(1, rc, out)
      assert.matches("long%.lua:2: function has 81 lines", out)
      assert.not_matches("ok%.lua", out)
    end)

    it("fails on a C function of 81 lines, naming it, and a C file of 601 lines", function()
      write(dir .. "/f.c", "static int ok(void)\n{\n" .. ("\t;\n"):rep(77) .. "}\n\n" ..
        "static int\nlong_one(int a)\n{\n" .. ("\ta++;\n"):rep(76) .. "\treturn a;\n}\n")
      write(dir .. "/big.h", ("/* */\n"):rep(601))
      local out, rc = sh("tools/check-sizes " .. dir)
      assert.equal(1, rc, out)
      assert.matches("f%.c:82: function long_one has 81 lines", out)
      assert.not_matches("function ok", out)
      assert.matches("big%.h:1: file has 601 lines", out)
    end)

    it("exits 2 naming a Lua file luac cannot read", function()
      write(dir .. "/bad.lua", "local = 1\n")
      local out, rc = sh("tools/check-sizes " .. dir .. " 2>&1")
      assert.equal(2, rc, out)
      assert.matches("bad%.lua", out)
    end)
  end)
end)
