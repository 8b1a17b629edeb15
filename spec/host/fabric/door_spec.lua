-- ibverbs.fabric.door: a run that no stranger can join, break or fake.
-- Real ranks on loopback TCP and strangers beside them: bytes that are no
-- frame, a frame that claims 4 GiB, a hello without a proof or with one made
-- for another nonce (a replay), a hello of another fabric, a silent
-- connection; the run passes and rank 0 names each.  A rank with the wrong
-- key is dropped; rank 0 proves itself to every rank; two runs on the same
-- candidate ports both pass; the key's and the ports' bad input.
local socket = require "socket"
local dkjson = require "dkjson"
local door = require "ibverbs.fabric.door"
local launcher = require "ibverbs.fabric.launcher"
local wire = require "ibverbs.fabric.wire"
local fs = require "fabric_support"

local KEY = "0123456789abcdef-spec-key"

-- A rank: joins, one allgather, prints a JSON line (rank 0: the door's report and its heap).
local RANK = [[
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T") or 20), host = "h" .. os.getenv("IBV_FABRIC_RANK") }
if not f then print(dkjson.encode{ init_err = err }) os.exit(2) end
local all, aerr = f:allgather(f.rank)
if not all then print(dkjson.encode{ err = aerr }) os.exit(1) end
local what, strangers = f:door()
collectgarbage()
print(dkjson.encode{ rank = f.rank, n = #all, port = f.port, what = what, strangers = strangers,
  kb = collectgarbage("count") })
f:close()
]]

local function write(path, text)
  local fh = assert(io.open(path, "w"))
  fh:write(text)
  fh:close()
end

-- Starts the ranks of a run (which: their numbers; env: a function of the
-- rank giving its variables); returns a function that waits for their lines.
-- prefix: a command the rank runs under (another user's).
local function start(size, which, env, prefix)
  local script = os.tmpname()
  write(script, RANK)
  os.execute("chmod 644 " .. script)
  local files = {}
  for _, r in ipairs(which) do
    files[r] = os.tmpname()
    os.execute(string.format("IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d %s %s env LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' "
      .. "timeout 60 %s %s > %s 2>&1 &", r, size, env(r), prefix or "", fs.CPATH, fs.LUA, script, files[r]))
  end
  return function()
    local out, deadline = {}, os.time() + 60
    for _, r in ipairs(which) do
      repeat
        local fh = io.open(files[r])
        local text = fh and fh:read("a") or ""
        if fh then fh:close() end
        local line = text:match("^({[^\n]*})\n") or text:match("\n({[^\n]*})\n")
        if line then out[r] = assert(dkjson.decode(line)) else socket.sleep(0.2) end
      until line or os.time() > deadline
      assert(out[r], "rank " .. r .. " printed nothing")
      os.remove(files[r])
    end
    os.remove(script)
    return out
  end
end

-- A connection to port, retried while rank 0 is not listening yet.
local function connect(port)
  for _ = 1, 100 do
    local c = socket.connect("127.0.0.1", port)
    if c then c:settimeout(10) return c end
    socket.sleep(0.1)
  end
  error("nobody listens on " .. port)
end

local function frame(t) return assert(wire.encode(t)) end

-- The strangers: each connects while the run's real ranks gather.
local STRANGERS = {
  garbage = function(c) c:send("GET / HTTP/1.0\r\n\r\n") end,
  huge = function(c) c:send("ffffffff" .. ("x"):rep(100000)) end,
  no_proof = function(c)
    assert(wire.read(c, socket.gettime() + 10).challenge)
    c:send(frame{ hello = "ibverbs.fabric", rank = 1, size = 3, host = "rogue" })
  end,
  replay = function(c) -- a hello proven for another connection's nonce, as a recorded one would be
    assert(wire.read(c, socket.gettime() + 10).challenge)
    local old = { nonce = "00112233445566778899aabbccddeeff" }
    local proof = require("ibverbs").hmac_sha256(KEY, table.concat({ "ibverbs.fabric", "hello", "", old.nonce, "1/3" },
      "\n"), true)
    c:send(frame{ hello = "ibverbs.fabric", rank = 1, size = 3, host = "replayer", proof = proof, nonce = old.nonce })
  end,
  other_fabric = function(c)
    assert(wire.read(c, socket.gettime() + 10).challenge)
    c:send(frame{ hello = "another.tool", rank = 2 })
  end,
  silent = function() end,
}

-- A munged of this spec's own (a key, a socket in a directory every user can reach), or nil, why.
local function start_munged()
  local dir = io.popen("mktemp -d /tmp/ibvl-munge.XXXXXX"):read("l")
  os.execute("chmod 755 " .. dir .. "; head -c 1024 /dev/urandom > " .. dir .. "/key; chmod 600 " .. dir .. "/key")
  local ok = os.execute(string.format("/usr/sbin/munged --force -S %s/sock --key-file=%s/key --log-file=%s/log "
    .. "--pid-file=%s/pid --seed-file=%s/seed 2>%s/err", dir, dir, dir, dir, dir, dir))
  if not ok then return nil, io.open(dir .. "/err"):read("a") end
  os.execute("chmod 755 " .. dir)
  return dir
end

local function stop_munged(dir)
  os.execute(string.format("kill $(cat %s/pid) 2>/dev/null; sleep 0.2; rm -rf %s", dir, dir))
end

describe("ibverbs.fabric's door", function()
  it("lets a keyed run pass with six strangers beside it, naming each, its heap unmoved by them", function()
    local port = fs.free_port()
    local env = function() return string.format("IBV_FABRIC_ROOT=127.0.0.1:%d IBV_FABRIC_KEY=%s", port, KEY) end
    local quiet = start(3, { 0, 1, 2 }, env)()
    for r = 0, 2 do assert.equal(3, quiet[r].n, dkjson.encode(quiet[r])) end
    assert.same({}, quiet[0].strangers)
    port = fs.free_port()
    -- rank 1 starts late: the strangers come first, one of them claiming its place
    local wait = start(3, { 0, 2 }, env)
    local socks = {}
    for name, act in pairs(STRANGERS) do
      local c = connect(port)
      act(c)
      socks[name] = c
    end
    local late = start(3, { 1 }, env)
    local out, out1 = wait(), late()
    out[1] = out1[1]
    for r = 0, 2 do assert.equal(3, out[r].n, dkjson.encode(out[r])) end
    assert.matches("^authenticated: a key the user gave %(IBV_FABRIC_KEY%)", out[0].what)
    local said = table.concat(out[0].strangers, "\n")
    assert.equal(6, #out[0].strangers, said)
    assert.matches("127%.0%.0%.1:%d+: closed before its hello %(malformed frame %(no length%)%)", said)
    -- (4 GiB claimed: refused at the length, or at the bytes past a hello's bound if they came first)
    assert.is_truthy(said:find("closed before its hello (a frame of 4294967295 bytes (at most 16384))", 1, true) or
      said:find("closed before its hello (sent more than a hello holds)", 1, true), said)
    assert.matches("no proof of the run's key %(it claims rank 1%)", said)
    assert.matches("a wrong proof %(it claims rank 1%)", said)
    assert.matches("not a hello of ibverbs.fabric", said)
    assert.matches("had said nothing when the rendezvous ended", said)
    -- a few MiB at most beside the quiet run's heap (the strangers sent 100 kB and more)
    assert.is_true(out[0].kb - quiet[0].kb < 2048, out[0].kb .. " KiB against " .. quiet[0].kb)
    for _, c in pairs(socks) do c:close() end
  end)

  it("drops a rank whose key is not the run's: named, and the rendezvous says who is missing", function()
    local port = fs.free_port()
    local out = start(2, { 0, 1 }, function(r)
      return string.format("T=8 IBV_FABRIC_ROOT=127.0.0.1:%d IBV_FABRIC_KEY=%s", port, r == 1 and KEY .. "x" or KEY)
    end)()
    assert.matches("rank 1 did not arrive at the rendezvous %(port %d+%) within 8 s; 1 connection dropped: "
      .. "127%.0%.0%.1:%d+: a wrong proof %(it claims rank 1%)", out[0].init_err)
  end)

  it("has every rank check rank 0's proof: a listener without the key is not this run's rank 0", function()
    local port = fs.free_port()
    local out = start(2, { 0, 1 }, function(r)
      return string.format("T=8 IBV_FABRIC_ROOT=127.0.0.1:%d %s", port, r == 1 and "IBV_FABRIC_KEY=" .. KEY or "")
    end)()
    assert.matches("rank 1: the rank 0 at 127%.0%.0%.1:%d+ did not prove it belongs to this run", out[1].init_err)
    assert.matches("rank 1 %(h1%) left the fabric", out[0].err)
  end)

  it("runs two Slurm steps whose rank 0s share a node and their candidate ports: both pass", function()
    local base = fs.free_port()
    local function env(step)
      return function()
        return string.format("SLURM_JOB_ID=77 SLURM_STEP_ID=%d SLURM_STEP_RESV_PORTS=%d-%d IBV_FABRIC_ROOT=127.0.0.1 "
          .. "IBV_FABRIC_KEY=%s", step, base, base + 3, KEY)
      end
    end
    -- step 0's rank 0 holds the first port until its rank 2 comes, after step 1 ran on the next
    local a = start(3, { 0, 1 }, env(0))
    socket.sleep(1)
    local ob = start(3, { 0, 1, 2 }, env(1))()
    local late = start(3, { 2 }, env(0))
    local oa = a()
    oa[2] = late()[2]
    for r = 0, 2 do
      assert.equal(3, oa[r].n, dkjson.encode(oa[r]))
      assert.equal(3, ob[r].n, dkjson.encode(ob[r]))
    end
    assert.equal(base, oa[0].port)
    assert.equal(base + 1, ob[0].port)
    assert.is_true(oa[0].port >= base and oa[0].port <= base + 3 and ob[0].port >= base and ob[0].port <= base + 3)
  end)

  it("under Slurm without PMIx proves hellos with munge: another user's rank and a replayed credential dropped",
    function()
      local dir = assert(start_munged())
      local port = fs.free_port()
      local function env()
        return string.format("SLURM_JOB_ID=41 SLURM_STEP_ID=3 SLURM_STEP_RESV_PORTS=%d IBV_FABRIC_ROOT=127.0.0.1 "
          .. "IBV_FABRIC_MUNGE_SOCKET=%s/sock T=10", port, dir)
      end
      local wait = start(3, { 0, 2 }, env)
      -- a stranger replays a credential it holds (made for another claim), and another user claims rank 1
      local c = connect(port)
      assert(wire.read(c, socket.gettime() + 10).challenge)
      local cred = assert(require("ibverbs").munge_encode("ibverbs.fabric\nhello\nslurm 41.3\nold\n1/3",
        dir .. "/sock"))
      c:send(frame{ hello = "ibverbs.fabric", rank = 1, size = 3, proof = cred, nonce = "00" })
      local nobody = start(3, { 1 }, env, "setpriv --reuid=65534 --regid=65534 --clear-groups")
      socket.sleep(1.5)
      local late = start(3, { 1 }, env)
      local out = wait()
      out[1] = late()[1]
      local other = nobody()
      stop_munged(dir)
      for r = 0, 2 do assert.equal(3, out[r].n, dkjson.encode(out[r])) end
      assert.matches("^authenticated: munge credentials", out[0].what)
      local said = table.concat(out[0].strangers, "\n")
      assert.matches("a munge credential for another claim %(it claims rank 1%)", said)
      -- (a credential is made for its user's own processes alone: another user's cannot even be read)
      assert.matches("its munge credential: munge: Unauthorized credential for client UID=0 GID=0 %(it claims rank 1%)",
        said)
      assert.matches("rank 1: ", other[1].init_err) -- (dropped: it saw no welcome)
      c:close()
    end)

  it("says where a key comes from and refuses one too short or unreadable, naming it", function()
    local function env(t) return function(k) return t[k] end end
    local lock = assert(door.lock({}, env{}, ""))
    assert.equal("none", lock.method)
    assert.matches("^NOT authenticated", lock.what)
    local file = os.tmpname()
    write(file, KEY .. "\n")
    lock = assert(door.lock({}, env{ IBV_FABRIC_KEY_FILE = file }, "slurm 1.0"))
    assert.equal(KEY, lock.key)
    assert.matches("IBV_FABRIC_KEY_FILE=" .. file:gsub("%p", "%%%0"), lock.what)
    os.remove(file)
    local l, err = door.lock({}, env{ IBV_FABRIC_KEY_FILE = file }, "")
    assert.is_nil(l)
    assert.matches("IBV_FABRIC_KEY_FILE: cannot read " .. file:gsub("%p", "%%%0"), err)
    l, err = door.lock({}, env{ IBV_FABRIC_KEY = "short" }, "")
    assert.is_nil(l)
    assert.matches("the key from IBV_FABRIC_KEY has 5 bytes: at least 16", err)
  end)

  it("gives every rank of a Slurm step the same candidate ports and names a bad reservation", function()
    local function env(t) return function(k) return t[k] end end
    local a = launcher.ports(env{ SLURM_JOB_ID = "1234", SLURM_STEP_ID = "0" })
    assert.equal(launcher.PORT_TRIES, #a)
    assert.same(a, launcher.ports(env{ SLURM_JOB_ID = "1234", SLURM_STEP_ID = "0" }))
    assert.are_not.same(a, launcher.ports(env{ SLURM_JOB_ID = "1234", SLURM_STEP_ID = "1" }))
    for _, p in ipairs(a) do assert.is_true(p >= launcher.PORT_LOW and p < 32768) end
    assert.same({ 12000, 12001, 12002, 12005 }, launcher.ports(env{ SLURM_STEP_RESV_PORTS = "12000-12002,12005" }))
    local l, err = launcher.ports(env{ SLURM_STEP_RESV_PORTS = "12000-x" })
    assert.is_nil(l)
    assert.matches("SLURM_STEP_RESV_PORTS is not a port range: '12000%-x'", err)
    assert.is_nil(launcher.ports(env{}))
    assert.equal("slurm 1234.0", launcher.run_name(env{ SLURM_JOB_ID = "1234", SLURM_STEP_ID = "0" }))
    -- under PMIx its namespace, whatever Slurm says (mpirun's own node has no step, its daemons' nodes have one)
    assert.equal("pmix prterun-node1-77@1", launcher.run_name(env{ SLURM_JOB_ID = "1234", SLURM_STEP_ID = "0",
      PMIX_NAMESPACE = "prterun-node1-77@1" }))
    assert.equal("pmix prterun-node1-77@1", launcher.run_name(env{ SLURM_JOB_ID = "1234",
      PMIX_NAMESPACE = "prterun-node1-77@1" }))
  end)

  it("computes HMAC-SHA256 as RFC 4231 gives it", function()
    local ibv = require "ibverbs"
    assert.equal("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
      ibv.hmac_sha256(("\11"):rep(20), "Hi There", true))
    assert.equal("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
      ibv.hmac_sha256("Jefe", "what do ya want for nothing?", true))
    assert.equal("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
      ibv.hmac_sha256(("\170"):rep(131), "Test Using Larger Than Block-Size Key - Hash Key First", true))
    assert.equal(32, #ibv.hmac_sha256("k", ""))
    assert.has_error(function() ibv.hmac_sha256(nil, "m") end)
  end)
end)
