-- ibvlua, the scripting host, without a device: what it links, its command
-- line, its modules from inside the binary, system C modules, SIGINT, the
-- prompt on a pty, make install.  (The device side: spec/device/tools/ibvlua_spec.lua.)
local support = require "support"
local FLAVOUR, ROOT, IBVLUA = support.LUA, support.ROOT, support.IBVLUA

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local run = support.capture

-- ibvlua with an empty environment, from a directory outside the checkout
local function ibvlua(args, opts)
  opts = opts or {}
  return run(("cd /tmp && env -i %s %s %s%s"):format(opts.env or "", IBVLUA, args,
    opts.stdin and (" < " .. opts.stdin) or ""))
end

-- a fresh directory holding one file (name, text)
local function dir_with(name, text)
  local dir = os.tmpname()
  os.remove(dir)
  assert(os.execute("mkdir -p " .. dir))
  local f = assert(io.open(dir .. "/" .. name, "w"))
  f:write(text)
  f:close()
  return dir
end

local function lua_modules()
  local names = {}
  for path in io.popen("find lua -name '*.lua' | sort"):lines() do
    names[#names + 1] = path:gsub("^lua/", ""):gsub("%.lua$", ""):gsub("/init$", ""):gsub("/", ".")
  end
  return names
end

describe("ibvlua (" .. FLAVOUR .. ")", function()
  it("links no Lua library: only rdma-core and the C library", function()
    local out, rc = run("ldd " .. IBVLUA)
    assert.equal(0, rc, out)
    assert.not_matches("liblua", out)
    assert.not_matches("libluajit", out)
    local needed = run("readelf -d " .. IBVLUA .. " | sed -n 's/.*NEEDED.*\\[\\(.*\\)\\]/\\1/p'")
    for lib in needed:gmatch("[^\n]+") do
      assert.truthy(({ ["libibverbs.so.1"] = true, ["librdmacm.so.1"] = true, ["libm.so.6"] = true,
                       ["libc.so.6"] = true, ["libdl.so.2"] = true,
                       ["ld-linux-x86-64.so.2"] = true })[lib], "unexpected library " .. lib)
    end
  end)

  it("has every module of lua/ built in, found with an empty environment", function()
    local code = {}
    for _, m in ipairs(lua_modules()) do
      if m ~= "ibverbs.ffi" or FLAVOUR == "luajit" then
        code[#code + 1] = ("assert(package.preload[%q]) require(%q)"):format(m, m)
      end
    end
    code[#code + 1] = "assert(package.preload['ibverbs.core']) print(require('ibverbs')._VERSION)"
    -- ";;": the system's default path (luasocket for ibverbs.exchange), never the checkout
    local out, rc = ibvlua("-e " .. sh_quote(table.concat(code, " ")),
      { env = "LUA_PATH='/nonexistent/?.lua;;' LUA_CPATH='/nonexistent/?.so;;'" })
    assert.equal(0, rc, out)
    assert.matches("ibverbs.core 0.1", out)
  end)

  it("loads C modules from the system path (it exports the Lua API)", function()
    local out, rc = ibvlua("-e " .. sh_quote("print(require('socket')._VERSION, require('lfs')._VERSION)"))
    assert.equal(0, rc, out)
    assert.matches("LuaSocket", out)
    assert.matches("LuaFileSystem", out)
  end)

  it("takes the lua command line: script and arg, -e, -l, -, --", function()
    local dir = dir_with("s.lua", "print(arg[0], arg[1], arg[2], #arg, ...)\n")
    local out, rc = ibvlua(dir .. "/s.lua a b")
    assert.equal(0, rc, out)
    assert.equal(dir .. "/s.lua\ta\tb\t2\ta\tb\n", out)
    out, rc = ibvlua("-l ibv=ibverbs -e 'x = 2' -e 'print(x * 21, type(ibv.open))'")
    assert.equal("42\tfunction\n", out)
    assert.equal(0, rc)
    out = ibvlua("- a", { stdin = dir .. "/s.lua" })
    assert.equal("-\ta\tnil\t1\ta\n", out)
    out = ibvlua("-e 'print(1)' -- " .. dir .. "/s.lua -e")
    assert.equal("1\n" .. dir .. "/s.lua\t-e\tnil\t1\t-e\n", out)
    os.execute("rm -rf " .. dir)
  end)

  it("runs a built-in tool when its first argument names one and no file has that name", function()
    local out, rc = ibvlua("devinfo --help")
    assert.equal(0, rc, out)
    assert.matches("^Usage:\n  ibvlua devinfo +print the ca attributes\n", out)
    out, rc = ibvlua("fabric_matrix --dry-run --rank 0 --size 1")
    assert.equal(0, rc, out)
    assert.matches("\nPASS\n$", out)
    -- a tool's own exit status: fabric_check's for a bad option is 2
    out, rc = ibvlua("fabric_check --no-such-option 2>&1")
    assert.equal(2, rc, out)
    assert.matches("Usage:\n  ibvlua fabric_check ", out)
    assert.matches("unknown option '%-%-no%-such%-option'", out)
    -- neither a file nor a tool: the tools are listed
    out, rc = ibvlua("fabric_chek 2>&1")
    assert.equal(1, rc, out)
    assert.matches("cannot open fabric_chek: no such file, and no tool of that name " ..
      "%(tools: devinfo, fabric_check, fabric_matrix, rc_pingpong,", out)
    -- a file of that name is a script, as in lua
    local dir = dir_with("devinfo", "print('the script', arg[0], arg[1])\n")
    out, rc = run(("cd %s && env -i %s devinfo -l"):format(dir, IBVLUA))
    os.execute("rm -rf " .. dir)
    assert.equal(0, rc, out)
    assert.equal("the script\tdevinfo\t-l\n", out)
  end)

  it("exits 1 with a traceback on a script error, and on a bad option", function()
    local out, rc = ibvlua("-e 'local function f() error(\"boom\") end f()'")
    assert.equal(1, rc)
    assert.matches("boom", out)
    assert.matches("stack traceback", out)
    out, rc = ibvlua("-z")
    assert.equal(1, rc)
    assert.matches("unrecognized option '%-z'", out)
    assert.matches("usage:", out)
    out, rc = ibvlua("-e 'os.exit(3)'")
    assert.equal(3, rc, out)
  end)

  it("-v and --version: the host's and Lua's versions, then the node report (ibverbs.node_report)", function()
    local out, rc = ibvlua("-v")
    assert.equal(0, rc, out)
    assert.matches("^ibvlua 0%.1", out)
    out, rc = ibvlua("--version")
    assert.equal(0, rc, out)
    assert.matches("^ibvlua 0%.1\n", out)
    assert.matches(({ luajit = "\nlua: LuaJIT 2%.1", ["lua5.3"] = "\nlua: Lua 5%.3" })[FLAVOUR]
      or "\nlua: Lua 5%.4%.%d+ %(linked in%)\n", out)
    assert.matches("\nmodule: ibverbs%.core 0%.1 %(built in, with the Lua modules of lua%-ibverbs%), "
      .. "built against rdma%-core [%d.]+\n", out)
    assert.matches("\nrdma%-core: [%d.]+ %(the file name libibverbs%.so%.1%.[%d.]+; "
      .. "its symbol versions IBVERBS_1%.%d+", out)
    assert.matches("verbs newer than rdma%-core 28 this node lacks: none\n", out) -- rdma-core 44 here
    assert.matches("\ndevices: ", out)
    assert.matches("\nlacks: ", out)
    assert.is_true(select(2, out:gsub("\n", "")) <= 24, out) -- one screen
  end)

  -- (under LuaJIT only a loop the JIT has not compiled: hooks run in the interpreter, as in luajit)
  local LOOP = FLAVOUR == "luajit" and "jit.off() while true do end" or "while true do end"

  it("ends a running chunk on the first SIGINT with a catchable error", function()
    local out, rc = ibvlua("-e " .. sh_quote([[
      local ok, e = pcall(function() ]] .. LOOP .. [[ end)
      print("caught", e)]]) .. " & pid=$!; sleep 1; kill -INT $pid; wait $pid")
    assert.equal(0, rc, out)
    assert.matches("caught\t[^\n]*interrupted!", out)
  end)

  if FLAVOUR == "luajit" then
    it("gives ibverbs.ffi the flat calls from the program itself", function()
      local out, rc = ibvlua("-e " .. sh_quote([[
        local x = require "ibverbs.ffi"
        print(x.C == require("ffi").C, x.path, x.C.ibvl_ffi_poll_cq ~= nil)]]))
      assert.equal(0, rc, out)
      assert.equal("true\tnil\ttrue\n", out)
    end)
  end

  for _, mode in ipairs({ "readline", "plain" }) do
    it("-i on a terminal (" .. mode .. "): ibv loaded, multi-line input, Ctrl-C back to the prompt", function()
      local out, rc = run(("cd /tmp && %s/tools/pty-drive 'x = 6 * 7' '=x' " ..
        "'for i = 1, 2 do' 'print(\"i\", i)' 'end' " ..
        "'^C' 'print(\"after\", type(ibv.devices))' '%s' '@^C' 'print(\"back\")' '^D' -- " ..
        "env -i %s %s -i"):format(ROOT, LOOP, mode == "plain" and "IBVLUA_READLINE=0" or "", IBVLUA))
      assert.equal(0, rc, out)
      assert.matches("\n42", out)
      assert.matches("i\t1[\r\n]+i\t2", out)
      assert.matches("after\tfunction", out)
      assert.matches("interrupted!", out)
      assert.matches("back", out)
    end)
  end

  it("is installed by make install (PREFIX, DESTDIR) with the header and the library", function()
    local dest = os.tmpname()
    os.remove(dest)
    local out, rc = run(("make -s install LUA=%s DESTDIR=%s PREFIX=/opt/ibv"):format(FLAVOUR, dest))
    assert.equal(0, rc, out)
    local name = ({ luajit = "ibvluajit", ["lua5.3"] = "ibvlua5.3" })[FLAVOUR] or "ibvlua"
    local v = ({ luajit = "5.1", ["lua5.3"] = "5.3" })[FLAVOUR] or "5.4"
    for _, f in ipairs({ "bin/" .. name, "include/lua-ibverbs/ibverbs.h", "lib/lua/" .. v .. "/ibverbs/core.so",
                         "share/lua/" .. v .. "/ibverbs.lua", "share/lua/" .. v .. "/ibverbs/cm.lua" }) do
      assert.truthy(io.open(dest .. "/opt/ibv/" .. f), f .. " not installed")
    end
    out, rc = run("cd /tmp && env -i " .. dest .. "/opt/ibv/bin/" .. name .. " -e 'print(require\"ibverbs\"._VERSION)'")
    assert.equal(0, rc, out)
    assert.equal("ibverbs.core 0.1\n", out)
    os.execute("rm -rf " .. dest)
  end)
end)
