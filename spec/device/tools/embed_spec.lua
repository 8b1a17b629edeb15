-- The embedding API on rxe0 (csrc/ibverbs.h): examples/embed/embed.c drives
-- traffic through a script on its own QPs, spec/embed/lifetime.c checks the
-- borrowed/owned/release rules; both built by `make embed`, also under
-- ASan/UBSan and valgrind, and the kernel's object counts come back.
local support = require "support"
local FLAVOUR = support.LUA

local run = support.capture

local function resources()
  return (run("rdma resource show"))
end

local SAN_ENV = "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 "

describe("on rxe0, the embedding API (" .. FLAVOUR .. ")", function()
  local baseline
  setup(function() baseline = resources() end)

  it("examples/embed: a C host's QPs driven by a Lua script, checked in C", function()
    local out, rc = run("timeout 120 build/" .. FLAVOUR .. "/embed examples/embed/traffic.lua rxe0")
    assert.equal(0, rc, out)
    assert.matches("all checks passed", out)
    assert.not_matches("not ok", out)
    assert.equal(baseline, resources())
  end)

  it("lifetimes: borrowed objects survive close, GC and lua_close; release; owned ones", function()
    local out, rc = run("timeout 120 build/" .. FLAVOUR .. "/embed-lifetime rxe0")
    assert.equal(0, rc, out)
    assert.matches("all checks passed", out)
    assert.equal(baseline, resources())
  end)

  if FLAVOUR == "lua5.4" then
    it("both are clean under ASan and UBSan", function()
      for _, cmd in ipairs({ "build/lua5.4-san/embed examples/embed/traffic.lua rxe0",
                             "build/lua5.4-san/embed-lifetime rxe0" }) do
        local out, rc = run("timeout 300 env " .. SAN_ENV .. cmd)
        assert.equal(0, rc, out)
        assert.matches("all checks passed", out)
        assert.not_matches("runtime error", out)
        assert.not_matches("AddressSanitizer", out)
      end
      assert.equal(baseline, resources())
    end)

    it("the example is clean under valgrind (no invalid access, no definite leak)", function()
      local out, rc = run("timeout 600 valgrind -q --error-exitcode=99 --leak-check=full " ..
        "--show-leak-kinds=definite --errors-for-leak-kinds=definite " ..
        "build/lua5.4/embed examples/embed/traffic.lua rxe0")
      assert.equal(0, rc, out)
      assert.matches("all checks passed", out)
      assert.equal(baseline, resources())
    end)
  end
end)
