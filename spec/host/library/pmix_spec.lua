-- ibv.pmix and ibverbs.fabric's wire-up through PMIx, on this host.  The C
-- binding's failures: no server in the environment, no libpmix, a library
-- that is not libpmix, PMIx 1.x, the real libpmix (Debian's 4.2) given a
-- server that is not there.  Then a stand-in libpmix (spec/fake-pmix,
-- built here) whose "server" is a directory the job's processes share: put,
-- commit, fence and get as ibv.pmix uses them, a fence a rank never joins
-- ending at its limit, the argument checks; and ibverbs.fabric over it: a
-- job of three local ranks taking rank, size and hosts from PMIx and its
-- allgather and alltoall through put/commit/fence/get, a rank killed before
-- the rendezvous fence or before an allgather named by the others within
-- the limit, and which wire-up is chosen when.  Every process is a child
-- interpreter (a library is loaded once per process).
local support = require "support"
local fs = require "fabric_support"
local socket = require "socket"

local CPATH = os.getenv("LUA_CPATH") or fs.CPATH
local PATHS = "LUA_PATH='lua/?.lua;lua/?/init.lua;spec/?.lua;;' LUA_CPATH='" .. CPATH .. "'"

local function write(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

-- vars (a table) as "K='v' ..."
local function env_of(vars)
  local keys = {}
  for k in pairs(vars or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local out = {}
  for _, k in ipairs(keys) do out[#out + 1] = k .. "='" .. tostring(vars[k]) .. "'" end
  return table.concat(out, " ")
end

-- Lua code run in a child interpreter with vars and no PMIX_* of this process; a handle (:wait()).
local function start(code, vars, limit)
  local script = os.tmpname()
  write(script, code)
  return support.spawn(string.format("env -u PMIX_NAMESPACE -u PMIX_RANK %s %s timeout %d %s %s; rc=$?; rm -f %s; "
    .. "exit $rc", PATHS, env_of(vars), limit or 60, fs.LUA, script, script))
end
local function child(code, vars, limit) return start(code, vars, limit):wait((limit or 60) + 10) end

local FAKE_DIR = os.tmpname()
os.remove(FAKE_DIR)
assert(os.execute("mkdir -p " .. FAKE_DIR))
local FAKE = FAKE_DIR .. "/libpmix.so.2"

-- The variables of rank r of a fake job of size in dir.
local function fake_env(dir, r, size, extra)
  local v = { FAKE_PMIX_DIR = dir, FAKE_PMIX_SIZE = size, PMIX_NAMESPACE = "fake.job", PMIX_RANK = r,
    PMIX_SERVER_URI41 = "fake", IBV_FABRIC_PMIX_LIB = FAKE, FAKE_PMIX_HOSTS = "h0,h1,h2,h3" }
  for k, x in pairs(extra or {}) do v[k] = x end
  return v
end

local function job_dir()
  local d = os.tmpname()
  os.remove(d)
  assert(os.execute("mkdir -p " .. d))
  return d
end

describe("ibv.pmix", function()
  setup(function()
    assert.is_true(support.sh("cc -shared -fPIC -pthread -O1 -Wall -Wextra -Werror -o " .. FAKE ..
      " spec/fake-pmix/fakepmix.c"), "cannot build spec/fake-pmix/fakepmix.c")
  end)

  local PRINT = 'local core = require "ibverbs.core"\nlocal p, m, e = core.pmix(%s)\nprint(p, m, e)\n'

  it("without a server in the environment: nil, a message naming the variables, ENOTCONN (no PMIx_Init)", function()
    local out, rc = child(PRINT:format(""))
    assert.equal(0, rc, out)
    assert.matches("^nil\tpmix: no PMIx server %(PMIX_NAMESPACE, PMIX_RANK or PMIX_SERVER_URI%* unset%)\t107\n", out)
  end)

  it("without libpmix: nil, the loader's message, ENOENT", function()
    local out, rc = child(PRINT:format('{ lib = "/nonexistent/libpmix.so.2" }'), { PMIX_NAMESPACE = "x",
      PMIX_RANK = 0, PMIX_SERVER_URI41 = "x" })
    assert.equal(0, rc, out)
    assert.matches("^nil\tpmix: /nonexistent/libpmix%.so%.2: cannot open shared object file[^\t]*\t2\n", out)
  end)

  it("a library that is not libpmix: the first call it lacks named", function()
    local out, rc = child(PRINT:format('{ lib = "libm.so.6" }'))
    assert.equal(0, rc, out)
    assert.matches("^nil\tpmix: libm%.so%.6 has no PMIx_Get_version\t2\n", out)
  end)

  it("PMIx 1.x (other PMIx_Init and PMIx_Finalize) is refused before any call", function()
    local out, rc = child(PRINT:format('{ lib = "' .. FAKE .. '" }'), fake_env(FAKE_DIR, 0, 1,
      { FAKE_PMIX_VERSION = "PMIx v1.2.5" }))
    assert.equal(0, rc, out)
    local lib = FAKE:gsub("%p", "%%%0")
    assert.matches("^nil\tpmix: " .. lib .. " %(PMIx v1%.2%.5%) is older than PMIx 2%.0[^\t]*\t95\n", out)
  end)

  it("the system's libpmix with a server the environment names but that is not there: PMIx_Init fails cleanly",
    function()
    local uri = "spec.0;tcp4://127.0.0.1:1"
    local t0 = socket.gettime()
    local out, rc = child(PRINT:format(""), { PMIX_NAMESPACE = "spec", PMIX_RANK = 0, PMIX_SERVER_URI41 = uri,
      PMIX_SERVER_URI4 = uri, PMIX_SERVER_URI3 = uri, PMIX_SERVER_URI2 = uri }, 30)
    assert.equal(0, rc, out)
    if out:find("cannot open shared object") then pending("no libpmix.so.2 on this host: " .. out) return end
    assert.matches("^nil\tPMIx_Init: [%u%-_ ]+ %(%-%d+%)\t%d+\n", out)
    assert.is_true(socket.gettime() - t0 < 20)
  end)

  it("over the fake: info, job data, put, commit, a collecting fence (its one info read as every series lays "
    .. "it out), get and get_all, close idempotent, a closed client raises", function()
    local dir = job_dir()
    local out, rc = child([[
local core = require "ibverbs.core"
local p = assert(core.pmix{ lib = os.getenv("IBV_FABRIC_PMIX_LIB") })
local i = p:info()
print(i.nspace, i.rank, i.version, i.library, i.path)
print(p:get(nil, "pmix.job.size"), p:get(0, "pmix.lrank"), p:get(0, "pmix.hname"))
assert(p:put("k1", "bytes\0with a zero"))
assert(p:commit())
print(p:fence{ collect = true, timeout = 10 }, p:fence())
print(p:get(0, "k1", 5) == "bytes\0with a zero")
local got, missing = p:get_all("k1", { 0 }, 5)
print(got[1] == "bytes\0with a zero", #missing)
print(p:get(0, "fake.double", 5))
print(p:close(), p:close())
print(pcall(p.get, p, 0, "k1"))
]], fake_env(dir, 0, 1))
    assert.equal(0, rc, out)
    assert.matches("^fake%.job\t0\t4%.2%.2\tOpenPMIx 4%.2%.2 %(fake%)\t" .. FAKE:gsub("%p", "%%%0") .. "\n", out)
    assert.matches("\n1\t0\th0\n", out)
    assert.matches("\ntrue\ttrue\ntrue\ntrue\t0\n", out)
    assert.matches("\nnil\tPMIx_Get fake%.double of rank 0: a value of PMIx type 17, which ibv%.pmix does not "
      .. "read\t22\n", out)
    assert.matches("\ntrue\ttrue\nfalse\t[^\n]*attempt to use a closed ibverbs%.pmix", out)
    assert.truthy(io.open(dir .. "/collect.0.1"), "the collecting fence's info was not read as PMIx reads it")
    assert.falsy(io.open(dir .. "/collect.0.2"), "a plain fence collected")
    os.execute("rm -rf " .. dir)
  end)

  it("a fence a rank never joins ends at its limit (ETIMEDOUT); get_all names the rank whose key never came",
    function()
    local dir = job_dir()
    local out, rc = child([[
local core, socket = require "ibverbs.core", require "socket"
local p = assert(core.pmix{ lib = os.getenv("IBV_FABRIC_PMIX_LIB") })
assert(p:put("hello", "0")); assert(p:commit())
local t0 = socket.gettime()
print(p:fence{ timeout = 1.5 })
print(string.format("%.1f", socket.gettime() - t0))
local got, missing, why = p:get_all("hello", { 0, 1 }, 1)
print(got[1], got[2], missing[1], why[1])
]], fake_env(dir, 0, 2))
    assert.equal(0, rc, out)
    assert.matches("^nil\tPMIx_Fence: not complete within 1%.5 s\t110\n", out)
    local took = tonumber(out:match("\n(%d+%.%d)\n"))
    assert.is_true(took >= 1.4 and took < 3, out)
    assert.matches("\n0\tnil\t1\tno answer within 1 s\n", out)
    os.execute("rm -rf " .. dir)
  end)

  it("argument errors name the argument", function()
    local out, rc = child([[
local core = require "ibverbs.core"
local p = assert(core.pmix{ lib = os.getenv("IBV_FABRIC_PMIX_LIB") })
local function try(code) print((select(2, pcall(load("local p = ... " .. code), p)))) end
try("p:get(-1, 'k')")
try("p:get(0, '')")
try("p:get(0, string.rep('k', 512))")
try("p:get(0, 'a\\0b')")
try("p:put('k', 5)")
try("p:put('k', 'v', 'everywhere')")
try("p:fence{ colect = true }")
try("p:fence{ timeout = -1 }")
try("p:get_all('k', { 0, 'one' })")
try("p:get_all('k', 0)")
print(pcall(core.pmix, { library = "x" }))
]], fake_env(job_dir(), 0, 1))
    assert.equal(0, rc, out)
    for _, want in ipairs({
      "bad argument #1 to 'get' %(rank: a rank from 0 to 4294967293 expected, got %-1%)",
      "bad argument #2 to 'get' %(key: 1 to 511 bytes without a zero byte expected, got 0 bytes%)",
      "bad argument #2 to 'get' %(key: 1 to 511 bytes without a zero byte expected, got 512 bytes%)",
      "bad argument #2 to 'get' %(key: 1 to 511 bytes without a zero byte expected, got 3 bytes%)",
      "bad argument #2 to 'put' %(string expected, got number%)",
      "bad argument #3 to 'put' %(invalid option 'everywhere'%)",
      "opts[^\n]*colect",
      "field 'timeout': timeout in seconds expected, got a negative number",
      "bad argument #2 to 'get_all' %(ranks%[2%]: a rank from 0 to 4294967293 expected, got string%)",
      "bad argument #2 to 'get_all' %(table expected, got number%)",
      "false\t[^\n]*library",
    }) do
      assert.matches(want, out)
    end
  end)
end)

-- A job of size local ranks over the fake: rank r runs code_of(r) (nil: not started); vars_of(r) adds
-- variables.  Returns each rank's output and exit status, and the seconds until the last ended.
local function fake_job(size, code_of, vars_of, limit)
  local dir, hs = job_dir(), {}
  local port = fs.free_port()
  local given = vars_of
  vars_of = function(r)
    local v = given and given(r) or {}
    v.IBV_FABRIC_PORT = port
    return v
  end
  local t0 = socket.gettime()
  for r = 0, size - 1 do
    local code = code_of(r)
    if code then
      hs[r] = start(code, fake_env(dir, r, size, vars_of and vars_of(r) or {}), limit)
    end
  end
  local outs, rcs = {}, {}
  for r = 0, size - 1 do
    if hs[r] then outs[r], rcs[r] = hs[r]:wait((limit or 60) + 10) end
  end
  return outs, rcs, socket.gettime() - t0, dir
end

-- a rank that dies once PMIx_Init has made it one of the job
local KILLED = 'local p = assert(require("ibverbs.core").pmix{ lib = os.getenv("IBV_FABRIC_PMIX_LIB") })\nos.exit(9)\n'

local INIT = [[
local fabric = require "ibverbs.fabric"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T") or 20), tolerant = os.getenv("TOLERANT") == "1" }
if not f then print("FAIL " .. err) os.exit(2) end
]]

describe("ibverbs.fabric over PMIx (the fake libpmix, local ranks)", function()
  setup(function()
    assert.is_true(support.sh("cc -shared -fPIC -pthread -O1 -Wall -Wextra -Werror -o " .. FAKE ..
      " spec/fake-pmix/fakepmix.c"))
  end)
  teardown(function() os.execute("rm -rf " .. FAKE_DIR) end)

  it("three ranks: rank, size and hosts from PMIx, allgather and alltoall through put/commit/fence/get, "
    .. "the rest over TCP to rank 0's address from PMIx", function()
    local outs, rcs, _, dir = fake_job(3, function() return INIT .. [[
print("wireup", f.wireup, f.rank, f.size, f.launcher, f.local_rank, table.concat(f.hosts, ","))
local all = assert(f:allgather(f.rank * 2))
print("allgather", table.concat(all, ","))
local per = {}
for r = 0, f.size - 1 do per[r + 1] = { f.rank, r } end
local got = assert(f:alltoall(per))
print("alltoall", got[1][1], got[2][1], got[3][1])
print("bcast", f:bcast("from1", 1), "barrier", f:barrier())
local inbox = assert(f:route({ { (f.rank + 1) % f.size, "m" .. f.rank } }))
print("route", inbox[1][1], inbox[1][2])
f:close()
]] end)
    for r = 0, 2 do
      local out = outs[r]
      assert.equal(0, rcs[r], out)
      assert.matches("wireup\tPMIx 4%.2%.2\t" .. r .. "\t3\tpmix\t" .. r .. "\th0,h1,h2\n", out)
      assert.matches("allgather\t0,2,4\n", out)
      assert.matches("alltoall\t0\t1\t2\n", out)
      assert.matches("bcast\tfrom1\tbarrier\ttrue\n", out)
      assert.matches("route\t" .. (r + 2) % 3 .. "\tm" .. (r + 2) % 3 .. "\n", out)
    end
    -- the hellos and both exchanges went through the fake's files; the exchanges' fences collected
    for r = 0, 2 do
      for _, k in ipairs({ "ibvl.fabric.hello", "ibvl.fabric.1", "ibvl.fabric.2" }) do
        assert.truthy(io.open(dir .. "/k." .. r .. "." .. k), k .. " of rank " .. r)
      end
      assert.falsy(io.open(dir .. "/collect." .. r .. ".1"), "the rendezvous' fence collected")
      for n = 2, 3 do -- both exchanges' fences collect
        assert.truthy(io.open(dir .. "/collect." .. r .. "." .. n), "rank " .. r .. "'s fence " .. n)
      end
      assert.truthy(io.open(dir .. "/finalized." .. r .. ".x"), "rank " .. r .. " did not finalize")
    end
    os.execute("rm -rf " .. dir)
  end)

  it("nine ranks in relay groups of 3: each member reads its relay's address from PMIx, each relay those of the "
    .. "relays below it (not rank 0's welcome); route goes through them", function()
    local outs, rcs, _, dir = fake_job(9, function() return INIT .. [[
local t = f.tree
local inbox = assert(f:route({ { (f.rank + 1) % f.size, "m" .. f.rank }, { (f.rank + 4) % f.size, "n" .. f.rank } }))
local got = {}
for _, m in ipairs(inbox) do got[#got + 1] = m[1] .. "=" .. m[2] end
table.sort(got)
local keys = {}
for g in pairs(t.addrs) do keys[#keys + 1] = g end
table.sort(keys)
print("tree", t.k, t.relay, tostring(t.from_pmix), table.concat(keys, ","), table.concat(got, " "))
f:close()
]] end, function() return { IBV_FABRIC_GROUP = 3, FAKE_PMIX_HOSTS = "h0,h1,h2,h3,h4,h5,h6,h7,h8" } end)
    -- rank 0 alone; groups 1-3 (relay 1), 4-6 (relay 4), 7-8 (relay 7)
    local relay = { [0] = 0, 1, 1, 1, 4, 4, 4, 7, 7 }
    -- the groups whose relay each rank knows: rank 0 every one's (their TCP hellos), the others what PMIx gave
    local known = { [0] = "1,2,3", "", "1", "1", "1", "2", "2", "1,2", "3" }
    for r = 0, 8 do
      assert.equal(0, rcs[r], outs[r])
      local from = { (r - 1) % 9 .. "=m" .. (r - 1) % 9, (r - 4) % 9 .. "=n" .. (r - 4) % 9 }
      table.sort(from)
      assert.matches("tree\t3\t" .. relay[r] .. "\t" .. (r == 0 and "nil" or "true") .. "\t" .. known[r] .. "\t"
        .. table.concat(from, " "):gsub("%-", "%%-") .. "\n", outs[r])
    end
    os.execute("rm -rf " .. dir)
  end)

  it("rank 2 killed after PMIx_Init, before the rendezvous fence: the fence gives up, the TCP rendezvous names "
    .. "it within the limit", function()
    local outs, rcs, took, dir = fake_job(3, function(r)
      if r == 2 then return KILLED end
      return INIT .. "print('joined')\n"
    end, function() return { T = 3 } end)
    for r = 0, 1 do
      assert.equal(2, rcs[r], outs[r])
      assert.matches("FAIL fabric: rank 2 %(h2%) did not arrive at the rendezvous %(port %d+%) within 3 s\n", outs[r])
    end
    assert.equal(9, rcs[2])
    assert.is_true(took < 3 + 6, took) -- the limit (the fence's part, then the TCP part's), slack
    os.execute("rm -rf " .. dir)
  end)

  it("the same in a tolerant group: rank 2 buried, ranks 0 and 1 go on", function()
    local outs, rcs, _, dir = fake_job(3, function(r)
      if r == 2 then return KILLED end
      return INIT .. [[
local d = f:dead_ranks()
print("dead", #d, d[1] and d[1].rank, d[1] and d[1].why)
print("barrier", f:barrier())
f:close()
]]
    end, function() return { T = 3, TOLERANT = 1 } end)
    for r = 0, 1 do
      assert.equal(0, rcs[r], outs[r])
      assert.matches("dead\t1\t2\trank 2 %(h2%) did not arrive at the rendezvous %(port %d+%) within 3 s\n", outs[r])
      assert.matches("barrier\ttrue\n", outs[r])
    end
    os.execute("rm -rf " .. dir)
  end)

  it("rank 2 gone before an allgather: the fence gives up, the allgather over TCP names it within the limit",
    function()
    local outs, _, took, dir = fake_job(3, function(r)
      return INIT .. (r == 2 and "os.exit(9)\n" or [[
local t0 = require("socket").gettime()
local all, err = f:allgather("x", 3)
print(all, err, string.format("%.0f", require("socket").gettime() - t0))
]])
    end)
    for r = 0, 1 do
      -- (its connection to rank 0 closed when it died: as without PMIx, "left"; "did not arrive" when it hangs)
      assert.matches("nil\trank 2 %(h2%) left the fabric during allgather %(connection closed%)\t%d+\n", outs[r])
    end
    assert.is_true(took < 3 + 8, took)
    os.execute("rm -rf " .. dir)
  end)

  it("rank 2 stuck before an allgather: named as not arriving within the limit", function()
    local outs, _, took, dir = fake_job(3, function(r)
      return INIT .. (r == 2 and "os.execute('sleep 5')\n" or [[
print(f:allgather("x", 3))
]])
    end)
    for r = 0, 1 do assert.matches("nil\trank 2 %(h2%) did not arrive at allgather #1 within 3 s\n", outs[r]) end
    assert.is_true(took < 5 + 4, took)
    os.execute("rm -rf " .. dir)
  end)

  it("a fence the launcher fails: that allgather completes over TCP, and the collectives stay there", function()
    local outs, rcs, _, dir = fake_job(3, function() return INIT .. [[
print("allgather", table.concat(assert(f:allgather(f.rank)), ","))
print("alltoall", table.concat(assert(f:alltoall({ 0, 1, 2 })), ","))
print("note", f.wireup, f.wireup_note)
f:close()
]] end, function() return { FAKE_PMIX_FENCE_FAIL = 2 } end)
    for r = 0, 2 do
      assert.equal(0, rcs[r], outs[r])
      assert.matches("allgather\t0,1,2\nalltoall\t" .. r .. "," .. r .. "," .. r .. "\n", outs[r])
      assert.matches("note\tPMIx 4%.2%.2\tallgather #1 through PMIx: PMIx_Fence: ERROR %(%-1%); the collectives over "
        .. "TCP from then on\n", outs[r])
      assert.falsy(io.open(dir .. "/k." .. r .. ".ibvl.fabric.2"), "the alltoall went through PMIx")
    end
    os.execute("rm -rf " .. dir)
  end)

  it("chooses: PMIx when PMIX_RANK is set and libpmix loads, else TCP saying why; IBV_FABRIC_WIREUP forces either",
    function()
    local show = [[
local fabric = require "ibverbs.fabric"
local f, err = fabric.init{ timeout = 5, rank = tonumber(os.getenv("R")), size = tonumber(os.getenv("S")) }
if not f then print("FAIL " .. err) else print(f.wireup, f.wireup_note, f.size) f:close() end
]]
    local base = fake_env(job_dir(), 0, 1)
    local function run(extra)
      local v = {}
      for k, x in pairs(base) do v[k] = x end
      for k, x in pairs(extra) do v[k] = x end
      local out = child(show, v)
      return out
    end
    assert.matches("^PMIx 4%.2%.2\tnil\t1\n", run({}))
    assert.matches("^TCP\tpmix: /nonexistent[^\t]*cannot open shared object file[^\t]*\t1\n",
      run({ IBV_FABRIC_PMIX_LIB = "/nonexistent/libpmix.so.2" }))
    assert.matches("^FAIL fabric: wireup = pmix: pmix: /nonexistent",
      run({ IBV_FABRIC_PMIX_LIB = "/nonexistent/libpmix.so.2", IBV_FABRIC_WIREUP = "pmix" }))
    assert.matches("^TCP\twireup = tcp\t1\n", run({ IBV_FABRIC_WIREUP = "tcp" }))
    assert.matches("^TCP\trank and size given\t1\n", run({ R = 0, S = 1 }))
    assert.matches("^FAIL fabric: wireup must be auto, pmix or tcp, got both\n", run({ IBV_FABRIC_WIREUP = "both" }))
    assert.matches("^TCP\tno PMIX_RANK\t1\n", child(show, {}))
  end)
end)
