-- ibv.spawn (csrc/process/spawn.c): a program run from an argument vector, never a
-- shell: its exit status or signal, stdout and stderr apart, outputs of many
-- MiB and a big stdin at once without deadlock, the time limit, a program that
-- cannot start (nil, msg, errno), bad arguments named, arguments passed as
-- they are, no fd of this process in the child and none left behind here,
-- and SIGINT during the wait (in a child interpreter).
local ibv = require "ibverbs"
local support = require "support"

-- this process's open fds, by number (the shell's parent is this process),
-- and what they are; the pipe of the listing itself left out (popen closes
-- its other end here after the shell started: it may be listed or not)
local function my_fds()
  local lines = support.lines_of("ls -l /proc/$PPID/fd; readlink /proc/$$/fd/1")
  local own = table.remove(lines)
  local fds, what = {}, {}
  for _, line in ipairs(lines) do
    local fd, target = line:match(" (%d+) %-> (.*)$")
    if fd and target ~= own then fds[#fds + 1], what[#what + 1] = tonumber(fd), fd .. " -> " .. target end
  end
  table.sort(fds)
  return fds, table.concat(what, "\n")
end

local function sh(script, opts) return ibv.spawn({ "sh", "-c", script }, opts) end

describe("ibv.spawn", function()
  it("gives the exit status, stdout and stderr apart, timed_out false", function()
    local r = assert(sh("echo out; echo err >&2; echo more; exit 7"))
    assert.same({ status = 7, stdout = "out\nmore\n", stderr = "err\n", timed_out = false }, r)
    r = assert(ibv.spawn({ "true" }))
    assert.same({ status = 0, stdout = "", stderr = "", timed_out = false }, r)
  end)

  it("gives the signal that ended the program (status nil)", function()
    local r = assert(sh("echo before; kill -TERM $$; echo after"))
    assert.same({ signal = 15, stdout = "before\n", stderr = "", timed_out = false }, r)
    r = assert(sh("kill -KILL $$"))
    assert.equal(9, r.signal)
    assert.is_nil(r.status)
  end)

  it("reads many MiB on both pipes at once, and writes a big stdin alongside, without deadlock", function()
    -- stderr filled while stdout is full, and the other way round: a reader of one pipe at a time hangs
    local r = assert(sh("head -c 3000000 /dev/zero | tr '\\0' o; head -c 4000000 /dev/zero | tr '\\0' e >&2; "
      .. "head -c 2000000 /dev/zero | tr '\\0' O", { timeout = 60 }))
    assert.equal(0, r.status)
    assert.equal(string.rep("o", 3000000) .. string.rep("O", 2000000), r.stdout)
    assert.equal(string.rep("e", 4000000), r.stderr)
    -- cat writes back what it reads: 8 MiB in while 8 MiB come out
    local input = {}
    for i = 1, 8 * 1024 do input[i] = string.format("%07d", i) .. string.rep("x", 1017) end
    input = table.concat(input)
    r = assert(ibv.spawn({ "cat" }, { stdin = input, timeout = 60 }))
    assert.equal(0, r.status)
    assert.equal(#input, #r.stdout)
    assert.is_true(input == r.stdout)
  end)

  it("feeds stdin (zero bytes and all), else gives /dev/null", function()
    local r = assert(ibv.spawn({ "cat" }, { stdin = "a\0b\nline 2" }))
    assert.equal("a\0b\nline 2", r.stdout)
    r = assert(ibv.spawn({ "cat" }, { stdin = "" }))
    assert.same({ status = 0, stdout = "", stderr = "", timed_out = false }, r)
    r = assert(sh("readlink /proc/self/fd/0; cat"))
    assert.equal("/dev/null\n", r.stdout)
    -- a program that reads none of a big stdin: no SIGPIPE here, its own status there
    r = assert(ibv.spawn({ "true" }, { stdin = string.rep("y", 4 * 1024 * 1024) }))
    assert.equal(0, r.status)
    r = assert(sh("exec 0<&-; sleep 0.2; exit 3", { stdin = string.rep("y", 1024 * 1024) }))
    assert.equal(3, r.status)
  end)

  it("kills (SIGKILL) and reaps a program at the time limit, and says so", function()
    local t0 = ibv.now()
    local r = assert(ibv.spawn({ "sleep", "100" }, { timeout = 0.5 }))
    local took = ibv.now() - t0
    assert.is_true(r.timed_out)
    assert.equal(9, r.signal)
    assert.is_nil(r.status)
    assert.is_true(took >= 0.5 and took < 3, took .. " s")
    -- what it wrote before the limit is kept
    r = assert(sh("echo partial; echo e >&2; exec sleep 100", { timeout = 0.5 }))
    assert.is_true(r.timed_out)
    assert.equal("partial\n", r.stdout)
    assert.equal("e\n", r.stderr)
  end)

  it("does not wait for output the program's own children keep open after it exited", function()
    local t0 = ibv.now()
    local r = assert(sh("sleep 5 & echo started", { timeout = 10 }))
    assert.same({ status = 0, stdout = "started\n", stderr = "", timed_out = false }, r)
    assert.is_true(ibv.now() - t0 < 3)
  end)

  it("returns nil, message, errno for a program that cannot start", function()
    local r, msg, errno = ibv.spawn({ "/nonexistent/prog", "x" })
    assert.is_nil(r)
    assert.equal("spawn /nonexistent/prog: No such file or directory", msg)
    assert.equal(ibv.errno.ENOENT, errno)
    r, msg, errno = ibv.spawn({ "no-such-program-ibverbs-spec" })
    assert.is_nil(r)
    assert.equal("spawn no-such-program-ibverbs-spec: No such file or directory", msg)
    assert.equal(ibv.errno.ENOENT, errno)
    local path = os.tmpname() -- a file without the execute bit
    r, msg, errno = ibv.spawn({ path })
    os.remove(path)
    assert.is_nil(r)
    assert.equal("spawn " .. path .. ": Permission denied", msg)
    assert.equal(ibv.errno.EACCES, errno)
  end)

  it("raises for bad arguments, naming the argument or field", function()
    local cases = {
      { { nil }, "argv: list of strings expected, got nil" },
      { { "ls" }, "argv: list of strings expected, got string" },
      { { {} }, "argv: empty list" },
      { { { "ls", 1 } }, "argv[2]: string expected, got number" },
      { { { "ls", {} } }, "argv[2]: string expected, got table" },
      { { { "ls", "a\0b" } }, "argv[2]: string with an embedded zero byte" },
      { { { "ls", x = "y" } }, "argv: list of strings expected, got key 'x'" },
      { { { [1] = "ls", [3] = "x" } }, "argv: list of strings expected, got" },
      { { { "ls" }, 5 }, "opts: table expected, got number" },
      { { { "ls" }, { timout = 1 } }, "opts: unknown field 'timout'" },
      { { { "ls" }, { timeout = 0 } }, "field 'timeout': a time limit above 0 s expected, got 0" },
      { { { "ls" }, { timeout = -1 } }, "field 'timeout': timeout in seconds expected, got a negative number" },
      { { { "ls" }, { timeout = 0 / 0 } }, "field 'timeout': timeout in seconds expected, got NaN" },
      { { { "ls" }, { timeout = "1" } }, "field 'timeout': timeout in seconds expected, got string" },
      { { { "ls" }, { stdin = 1 } }, "field 'stdin': string expected, got number" },
    }
    for _, c in ipairs(cases) do
      local args = c[1]
      local ok, err = pcall(ibv.spawn, args[1], args[2])
      assert.is_false(ok, c[2])
      assert.is_truthy(tostring(err):find(c[2], 1, true), "want '" .. c[2] .. "', got: " .. tostring(err))
    end
  end)

  it("passes every argument as it is: no shell between", function()
    local args = { "a;b", "$(touch /tmp/ibverbs-spawn-pwned)", "`id`", "'single'", '"double"', "*", "$HOME",
      "with space", "", "back\\slash", "new\nline", "|", ">/tmp/x" }
    local unpack = table.unpack or unpack -- luacheck: ignore (LuaJIT)
    local r = assert(ibv.spawn({ "printf", "[%s]\\n", unpack(args) }))
    local want = {}
    for i, a in ipairs(args) do want[i] = "[" .. a .. "]\n" end
    assert.equal(table.concat(want), r.stdout)
    assert.is_nil(io.open("/tmp/ibverbs-spawn-pwned"))
  end)

  it("gives the program fds 0, 1 and 2 only: no pipe of its own, no fd of this process", function()
    local f = assert(io.open(os.tmpname(), "w")) -- an fd without FD_CLOEXEC
    local r = assert(ibv.spawn({ "ls", "-l", "/proc/self/fd" }))
    f:close()
    local fds = {}
    for fd, target in r.stdout:gmatch(" (%d+) %-> ([^\n]*)") do fds[tonumber(fd)] = target end
    assert.equal("/dev/null", fds[0])
    assert.matches("^pipe:", fds[1])
    assert.matches("^pipe:", fds[2])
    assert.is_true(fds[1] ~= fds[2])
    for fd, target in pairs(fds) do -- fd 3: ls's own reading of /proc/self/fd
      assert.is_true(fd <= 2 or target:match("^/proc/%d+/fd$") ~= nil, r.stdout)
    end
  end)

  it("leaves no fd open here after it returns, whatever happened", function()
    collectgarbage()
    local before, listing = my_fds()
    for _ = 1, 3 do
      assert(sh("echo x; echo y >&2"))
      assert(ibv.spawn({ "cat" }, { stdin = "z" }))
      assert(ibv.spawn({ "sleep", "10" }, { timeout = 0.1 }))
      assert.is_nil(ibv.spawn({ "/nonexistent/prog" }))
      pcall(ibv.spawn, { "ls" }, { bogus = 1 })
      assert(ibv.spawn({ "true" }, { stdin = string.rep("y", 1024 * 1024) }))
    end
    collectgarbage()
    local after, now = my_fds()
    assert.same(before, after, "before:\n" .. listing .. "\nafter:\n" .. now)
  end)

  it("ends on SIGINT with a catchable error once the program is killed and reaped", function()
    local pidfile = os.tmpname()
    local script = os.tmpname()
    local f = assert(io.open(script, "w"))
    f:write(string.format([[
      local ibv = require "ibverbs"
      local t0 = ibv.now()
      local ok, e = pcall(ibv.spawn, { "sh", "-c", "echo $$ > %s; exec sleep 100" }, { timeout = 60 })
      local took = ibv.now() - t0
      local pid = io.open(%q):read("*l")
      local gone = io.open("/proc/" .. pid .. "/stat") == nil -- killed and reaped: no zombie left
      local again = ibv.spawn({ "true" })
      print(string.format("caught %%s %%s after %%.2f s, child gone %%s, again %%s", ok, e, took, gone,
        again and again.status))
    ]], pidfile, pidfile))
    f:close()
    local out, rc = support.capture(string.format("%s %s & pid=$!; sleep 1; kill -INT $pid; wait $pid",
      support.LUA, script))
    os.remove(script); os.remove(pidfile)
    assert.equal(0, rc, out)
    local took = tonumber(out:match("after ([%d.]+) s"))
    assert.matches("caught false [^\n]*spawn: interrupted after [%d.]+ s, child gone true, again 0", out)
    assert.is_true(took < 3, out)
  end)
end)
