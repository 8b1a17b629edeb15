-- ibverbs.fabric without a device: what each launcher's environment gives,
-- collectives among real processes on loopback TCP (values exact, 64-bit
-- addresses included), a rank that never arrives or leaves named in every
-- rank's error within the time limit, a tolerant fabric going on without it,
-- rank 0 with more ranks than select() can wait on.  fabric_matrix.lua's parts
-- (examples/lib): the schedules, the pairs file, the diagnosis on synthetic
-- figures, the report; the script itself on bad input and on this host, which
-- has no RDMA driver.
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"

local LUA = rawget(_G, "jit") and "luajit" or "lua5.4"
local CPATH = "build/" .. LUA .. "/?.so;;"

-- A TCP port for a job of ranks: below the kernel's ephemeral ports (32768 up), where a port some connection
-- of this busy host took as its local end cannot be listened on ("address already in use", even with
-- SO_REUSEADDR); lua5.4 and luajit draw from halves of their own, so make test can run both at once
-- (LuaJIT's math.random starts from the same seed in every process: seeded here from the clock and a
-- fresh table's address)
math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)") or "0", 16) % 100000)
local function free_port()
  return (LUA == "luajit" and 26000 or 20000) + math.random(0, 5999)
end

local function env(t) return function(k) return t[k] end end

describe("ibverbs.fabric.detect", function()
  it("reads IBV_FABRIC_*, Open MPI, PMI, Slurm and rxe-vm in that order of precedence", function()
    assert.same({ 3, 8, "slurm", "node01" }, { fabric.detect(env{ SLURM_PROCID = "3", SLURM_NTASKS = "8",
      SLURM_STEP_NODELIST = "node[01-04,07],login" }) })
    assert.same({ 1, 4, "openmpi", "127.0.0.1" }, { fabric.detect(env{ OMPI_COMM_WORLD_RANK = "1",
      OMPI_COMM_WORLD_SIZE = "4", OMPI_COMM_WORLD_LOCAL_SIZE = "4" }) })
    assert.same({ 1, 4, "openmpi" }, { fabric.detect(env{ OMPI_COMM_WORLD_RANK = "1", OMPI_COMM_WORLD_SIZE = "4",
      OMPI_COMM_WORLD_LOCAL_SIZE = "1" }) })
    assert.same({ 2, 3, "pmi" }, { fabric.detect(env{ PMI_RANK = "2", PMI_SIZE = "3" }) })
    assert.same({ 1, 2, "rxe-vm", "198.51.100.1" }, { fabric.detect(env{ RXE_VM_NODE = "2", RXE_VM_NODES = "2",
      RXE_VM_MGMT_ADDRS = "198.51.100.1 198.51.100.2" }) })
    assert.same({ 5, 6, "env" }, { fabric.detect(env{ IBV_FABRIC_RANK = "5", IBV_FABRIC_SIZE = "6",
      SLURM_PROCID = "0", SLURM_NTASKS = "2" }) })
    assert.same({ 0, 1, "none" }, { fabric.detect(env{}) })
    assert.equal("gpu7", fabric.first_host("gpu7,gpu8"))
    assert.equal("n001", fabric.first_host("n[001-128]"))
  end)

  -- the values below are what Slurm 22.05 set (tools/rxe-vm --nodes 3 --slurm) or printed
  it("expands Slurm host lists as scontrol show hostnames does", function()
    local scontrol = { -- list -> `scontrol show hostnames` output
      ["node[1-3]"] = { "node1", "node2", "node3" },
      ["node[009-011]"] = { "node009", "node010", "node011" },
      ["gpu[01-02,05],cpu[7-8]"] = { "gpu01", "gpu02", "gpu05", "cpu7", "cpu8" },
      ["x[1-2],y,z[10-11]"] = { "x1", "x2", "y", "z10", "z11" },
      ["a1,b[3-4]"] = { "a1", "b3", "b4" },
      ["rack[1-2]-n[01-02]"] = { "rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02" },
      ["cpu7,gpu[01-02],cpu8,gpu05"] = { "cpu7", "gpu01", "gpu02", "cpu8", "gpu05" }, -- scontrol show hostlist
      ["n1-ib,n2-ib,login"] = { "n1-ib", "n2-ib", "login" },
    }
    for list, hosts in pairs(scontrol) do
      assert.same(hosts, fabric.hostlist(list), list)
      assert.equal(hosts[1], fabric.first_host(list))
    end
    assert.equal("rack1-n01", fabric.first_host("rack[1-2]-n[01-02]"))
    for _, bad in ipairs({ "node[1-3", "node1-3]", "node[[1]]", "node[a-b]", "node[3-1]" }) do
      local hosts, err = fabric.hostlist(bad)
      assert.is_nil(hosts, bad)
      assert.matches("host list", err)
    end
    assert.has_error(function() fabric.hostlist(nil) end, "bad argument #1 to 'hostlist' (string expected, got nil)")
  end)

  it("takes rank, size and rank 0's node from a real srun step", function()
    assert.same({ 2, 3, "slurm", "node1" }, { fabric.detect(env{ SLURM_PROCID = "2", SLURM_NTASKS = "3",
      SLURM_NPROCS = "3", SLURM_NODEID = "2", SLURM_STEP_NODELIST = "node[1-3]", SLURM_JOB_NODELIST = "node[1-3]",
      SLURM_NODELIST = "node[1-3]", SLURM_STEP_TASKS_PER_NODE = "1(x3)", SLURM_LAUNCH_NODE_IPADDR = "198.51.100.1" }) })
  end)

  it("knows each rank's node in a Slurm step (a rank that never arrives is named by node)", function()
    assert.same({ "node1", "node2", "node3" }, fabric.slurm_hosts(env{ SLURM_STEP_NODELIST = "node[1-3]",
      SLURM_STEP_TASKS_PER_NODE = "1(x3)" }))
    assert.same({ "gpu01", "gpu01", "gpu02", "gpu02", "cpu7" }, fabric.slurm_hosts(env{
      SLURM_STEP_NODELIST = "gpu[01-02],cpu7", SLURM_STEP_TASKS_PER_NODE = "2(x2),1" }))
    assert.is_nil(fabric.slurm_hosts(env{ SLURM_STEP_NODELIST = "node[1-2]", SLURM_STEP_TASKS_PER_NODE = "2(x2)",
      SLURM_DISTRIBUTION = "cyclic" }))
    assert.is_nil(fabric.slurm_hosts(env{ SLURM_STEP_NODELIST = "node[1-3]", SLURM_STEP_TASKS_PER_NODE = "1(x3)",
      SLURM_HET_SIZE = "2" }))
    local f, err = fabric.init{ timeout = 0.5, getenv = env{ SLURM_PROCID = "0", SLURM_NTASKS = "3",
      SLURM_STEP_NODELIST = "node[1-3]", SLURM_STEP_TASKS_PER_NODE = "1(x3)",
      IBV_FABRIC_PORT = tostring(free_port()) } }
    assert.is_nil(f)
    assert.matches("rank 1 %(node2%) and rank 2 %(node3%) did not arrive at the rendezvous", err)
  end)

  it("takes rank 0's node of a heterogeneous step from component 0 (srun -w node3 ... : -w node[1-2] ...)", function()
    assert.same({ 1, 3, "slurm", "node3" }, { fabric.detect(env{ SLURM_PROCID = "1", SLURM_NTASKS = "3",
      SLURM_HET_SIZE = "2", SLURM_STEP_NODELIST = "node[1-3]", SLURM_JOB_NODELIST = "node[1-3]",
      SLURM_JOB_NODELIST_PACK_GROUP_0 = "node3", SLURM_JOB_NODELIST_PACK_GROUP_1 = "node[1-2]" }) })
  end)

  it("takes mpirun's world, not the srun step of its daemons, under mpirun inside an allocation", function()
    -- node3's process of `salloc -N 3 mpirun --map-by ppr:1:node ...`: orted ran as task 1 of 2 of an srun step
    assert.same({ 2, 3, "openmpi" }, { fabric.detect(env{ OMPI_COMM_WORLD_RANK = "2", OMPI_COMM_WORLD_SIZE = "3",
      OMPI_COMM_WORLD_LOCAL_SIZE = "1", PMIX_RANK = "2", SLURM_PROCID = "1", SLURM_NTASKS = "2",
      SLURM_STEP_NODELIST = "node[2-3]", SLURM_JOB_NODELIST = "node[1-3]" }) })
    -- srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE as well: Slurm's node list still gives rank 0's node
    assert.same({ 1, 3, "pmi", "node1" }, { fabric.detect(env{ PMI_RANK = "1", PMI_SIZE = "3", SLURM_PROCID = "1",
      SLURM_NTASKS = "3", SLURM_STEP_NODELIST = "node[1-3]" }) })
  end)

  it("refuses a rank outside the size, and a rank without rank 0's address", function()
    local f, err = fabric.init{ rank = 4, size = 4, getenv = env{} }
    assert.is_nil(f)
    assert.matches("rank 4 of size 4 is not a rank", err)
    f, err = fabric.init{ rank = 1, size = 2, getenv = env{} }
    assert.is_nil(f)
    assert.matches("IBV_FABRIC_ROOT", err)
  end)

  it("is a group of one without a launcher: collectives return at once", function()
    local f = assert(fabric.init{ getenv = env{}, host = "solo" })
    assert.equal(0, f.rank); assert.equal(1, f.size)
    assert.is_true(f:barrier())
    assert.same({ { a = 1 } }, f:allgather({ a = 1 }))
    assert.same({ "x" }, f:alltoall({ "x" }))
    assert.equal("rank 0 (solo)", f:name(0))
    f:close()
  end)
end)

-- A rank's script: joins, runs the collectives, prints one JSON line of what it saw.
local RANK = [[
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. os.getenv("IBV_FABRIC_RANK"),
  tolerant = os.getenv("TOLERANT") == "1", group = os.getenv("IBV_FABRIC_RANK") == "1" and os.getenv("GROUP1") or nil }
if not f then print(dkjson.encode{ init_err = err }) os.exit(2) end
local out = { rank = f.rank, hosts = f.hosts }
local big = 0x7fffabcd1234 + f.rank -- an MR address
out.all = assert(f:allgather({ rank = f.rank, addr = big, s = "x\0y", f = 0.1 }))
out.exact = true -- checked here: this script's own dkjson.encode keeps 14 digits under LuaJIT
for i, v in ipairs(out.all) do
  out.exact = out.exact and v.addr == 0x7fffabcd1234 + i - 1
  v.addr = nil
end
local l = {}
for r = 0, f.size - 1 do l[r + 1] = f.rank * 100 + r end
out.a2a = assert(f:alltoall(l))
out.gather = assert(f:gather(f.rank * 2, 1))
out.bcast = assert(f:bcast(f.rank == 0 and "from 0" or "not me"))
out.scatter = assert(f:scatter(f.rank == 0 and { "a", "b", "c" } or nil, 0))
local got, ups = assert(f:route({ { (f.rank + 1) % f.size, "to " .. (f.rank + 1) % f.size } }, f.rank * 10))
out.route, out.ups = got, f.rank == 0 and ups or nil
got, ups = assert(f:route({ { (f.rank + 1) % f.size, "s 1\n" .. f.rank } }, "u\n" .. f.rank)) -- framed by hand
out.route_s, out.ups_s = got, f.rank == 0 and ups or nil
assert(f:barrier())
if tonumber(os.getenv("LEAVE") or -1) == f.rank then print(dkjson.encode{ left = true }) os.exit(0) end
local t0 = os.time()
out.ok, out.err = f:barrier(tonumber(os.getenv("T")))
out.waited = os.time() - t0
out.after = select(2, f:barrier())
out.dead = f:dead_ranks()
print(dkjson.encode(out))
]]

local function ranks(size, which, vars)
  local script = os.tmpname()
  local fh = assert(io.open(script, "w"))
  fh:write(RANK)
  fh:close()
  local port = free_port()
  local files = {}
  for _, r in ipairs(which) do
    files[r] = os.tmpname()
    os.execute(string.format("IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d IBV_FABRIC_ROOT=127.0.0.1:%d %s "
      .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 60 %s %s > %s 2>&1 &", r, size, port, vars, CPATH, LUA,
      script, files[r]))
  end
  local out, deadline = {}, os.time() + 60
  for _, r in ipairs(which) do
    repeat
      local h = io.open(files[r])
      local text = h and h:read("a") or ""
      if h then h:close() end
      local line = text:match("^({.*})\n")
      if line then out[r] = assert(dkjson.decode(line)) end
      if not line then os.execute("sleep 0.2") end
    until line or os.time() > deadline
    os.remove(files[r])
  end
  os.remove(script)
  return out
end

describe("ibverbs.fabric among processes on loopback TCP", function()
  it("gives every rank every value: allgather (exact 64-bit numbers), alltoall, gather, bcast, barrier", function()
    local out = ranks(3, { 0, 1, 2 }, "T=10")
    for r = 0, 2 do
      local o = out[r]
      assert.is_table(o, "rank " .. r)
      assert.same({ "h0", "h1", "h2" }, o.hosts)
      assert.is_true(o.exact)
      for i = 1, 3 do
        assert.equal(i - 1, o.all[i].rank)
        assert.equal("x\0y", o.all[i].s)
        assert.equal(0.1, o.all[i].f)
        assert.equal((i - 1) * 100 + r, o.a2a[i])
      end
      if r == 1 then assert.same({ 0, 2, 4 }, o.gather) else assert.is_true(o.gather) end
      assert.equal("from 0", o.bcast)
      assert.equal(({ "a", "b", "c" })[r + 1], o.scatter)
      assert.same({ { (r + 2) % 3, "to " .. r } }, o.route)
      assert.same({ { (r + 2) % 3, "s 1\n" .. (r + 2) % 3 } }, o.route_s)
      assert.is_true(o.ok)
    end
  end)

  it("names a rank that leaves in every other rank's error, within the time limit", function()
    local out = ranks(3, { 0, 1, 2 }, "T=5 LEAVE=2")
    for _, r in ipairs({ 0, 1 }) do
      assert.is_nil(out[r].ok)
      assert.matches("rank 2 %(h2%) left the fabric during barrier", out[r].err)
      assert.is_true(out[r].waited <= 16)
      assert.equal(out[r].err, out[r].after) -- broken for good, same message
    end
  end)

  it("routes point to point through rank 0 (route) and hands rank 0 every rank's value", function()
    local out = ranks(3, { 0, 1, 2 }, "T=10")
    assert.same({ 0, 10, 20 }, out[0].ups)
    assert.same({ "u\n0", "u\n1", "u\n2" }, out[0].ups_s)
    -- the hand-made frames: any bytes in the strings, no up, no messages
    local body = fabric.route_encode(7, { m = { { 3, "a b\n\0c" }, { 12, "" } }, u = "x y" }):sub(9)
    assert.same({ op = "route", seq = 7, raw = true, v = { u = "x y", m = { { 3, "a b\n\0c" }, { 12, "" } } } },
      fabric.route_decode(body))
    assert.same({ op = "route", seq = 1, raw = true, v = { m = {} } }, fabric.route_decode(fabric.route_encode(1,
      { m = {} }):sub(9)))
    assert.is_nil(fabric.route_decode("R1 5 ab"))
  end)

  it("goes on without a rank that leaves when tolerant: every rank names it, the collectives still work", function()
    local out = ranks(3, { 0, 1, 2 }, "T=5 LEAVE=2 TOLERANT=1")
    for _, r in ipairs({ 0, 1 }) do
      assert.is_true(out[r].ok, tostring(out[r].err))
      assert.is_nil(out[r].after)
      assert.equal(1, #out[r].dead)
      assert.equal(2, out[r].dead[1].rank)
      assert.matches("rank 2 %(h2%) left the fabric during barrier", out[r].dead[1].why)
    end
  end)

  it("names a rank that never arrives at the rendezvous, on every rank that did", function()
    local out = ranks(3, { 0, 1 }, "T=3")
    for _, r in ipairs({ 0, 1 }) do
      assert.matches("rank 2 did not arrive at the rendezvous %(port %d+%) within 3 s", out[r].init_err)
    end
    out = ranks(2, { 1 }, "T=2")
    assert.matches("rank 1: rank 0 at 127%.0%.0%.1:%d+ did not answer within 2 s", out[1].init_err)
  end)
end)


-- The relay tree: rounds of route (each rank to rank+k and rank-k), one JSON
-- line per rank; rank LEAVE exits after round 1 (or stops: STOP=1, a hung rank).
local TREE = [[
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"
local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. os.getenv("IBV_FABRIC_RANK"),
  tolerant = os.getenv("TOLERANT") == "1" }
if not f then print(dkjson.encode{ init_err = err }) os.exit(2) end
local out = { rank = f.rank, got = {}, ups = {}, waits = {} }
if f.rank == 0 and f.wait_every then f.on_wait = function(who) out.waits[#out.waits + 1] = who end end
local errf = os.getenv("WAIT_FAIL") and os.tmpname()
if errf and f.rank == 0 then -- a callback that raises: said on stderr (kept here), the collectives go on
  local on_wait = f.on_wait
  f.on_wait = function(who) on_wait(who) error("boom") end
  io.stderr = assert(io.open(errf, "w"))
end
if os.getenv("SLOW_WAIT") and f.rank == 0 then -- a callback slower than wait_every
  local on_wait = f.on_wait
  f.on_wait = function(who) on_wait(who) os.execute("sleep 0.5") end
end
if tonumber(os.getenv("LATE") or -1) == f.rank then os.execute("sleep " .. (os.getenv("LATE_S") or 1.5)) end
for k = 1, 3 do
  local got, ups = f:route({ { (f.rank + k) % f.size, "from " .. f.rank }, { (f.rank - k) % f.size, { r = f.rank } } },
    "up " .. f.rank)
  if not got then out.err = ups break end
  local seen = {}
  for _, m in ipairs(got) do seen[#seen + 1] = m[1] .. "=" .. (type(m[2]) == "table" and m[2].r or m[2]) end
  table.sort(seen)
  out.got[k] = table.concat(seen, ",")
  if f.rank == 0 then out.ups[k] = ups end
  if k == 1 and tonumber(os.getenv("LEAVE") or -1) == f.rank then
    print(dkjson.encode{ left = true }) io.stdout:flush()
    if os.getenv("STOP") then os.execute("sleep " .. (os.getenv("STOP_S") or 14)) end -- alive, connected, silent
    os.exit(0)
  end
end
out.dead = f:dead_ranks()
if errf and f.rank == 0 then io.stderr:close() out.stderr = io.open(errf):read("a") os.remove(errf) end
print(dkjson.encode(out))
]]

local function tree_ranks(size, vars, skip)
  local saved = RANK
  RANK = TREE
  local which = {}
  for r = 0, size - 1 do if r ~= skip then which[#which + 1] = r end end
  local out = ranks(size, which, vars)
  RANK = saved
  return out
end

-- What rank r must get in round k of TREE from the live ranks.
local function tree_expect(size, r, k, dead)
  local l = {}
  local a, b = (r - k) % size, (r + k) % size
  if not dead[a] then l[#l + 1] = a .. "=from " .. a end
  if not dead[b] then l[#l + 1] = b .. "=" .. b end
  table.sort(l)
  return table.concat(l, ",")
end

describe("ibverbs.fabric's relay tree (route through relays of groups of k)", function()
  it("routes every message to its rank and gives rank 0 every up, as the star does", function()
    local out = tree_ranks(9, "T=10 IBV_FABRIC_GROUP=3")
    for r = 0, 8 do
      assert.is_table(out[r], "rank " .. r)
      assert.is_nil(out[r].err)
      for k = 1, 3 do assert.equal(tree_expect(9, r, k, {}), out[r].got[k]) end
    end
    for k = 1, 3 do for r = 0, 8 do assert.equal("up " .. r, out[0].ups[k][r + 1]) end end
  end)

  it("is on by itself past fabric.TREE_MIN ranks: 100 ranks in groups of 10", function()
    local out = tree_ranks(100, "T=30")
    for r = 0, 99 do
      assert.is_table(out[r], "rank " .. r)
      for k = 1, 3 do assert.equal(tree_expect(100, r, k, {}), out[r].got[k], "rank " .. r) end
    end
  end)

  local function relay_lost(vars)
    local out = tree_ranks(9, "T=4 IBV_FABRIC_GROUP=3 TOLERANT=1 LEAVE=3 " .. vars)
    for r = 0, 8 do
      if r ~= 3 then
        assert.is_table(out[r], "rank " .. r)
        assert.is_nil(out[r].err)
        assert.equal(1, #out[r].dead)
        assert.equal(3, out[r].dead[1].rank)
        for k = 2, 3 do assert.equal(tree_expect(9, r, k, { [3] = true }), out[r].got[k], "rank " .. r) end
      end
    end
    return out
  end

  it("buries a relay that leaves (tolerant) and no other rank: its members go on through rank 0", function()
    local out = relay_lost("")
    assert.matches("rank 3 %(h3%) left the fabric during route", out[0].dead[1].why)
  end)

  it("buries a relay that hangs (tolerant) at its limit, and no other rank; rank 0 names it while it waits",
    function()
      local out = relay_lost("STOP=1 IBV_FABRIC_WAIT_EVERY=1")
      assert.matches("rank 3 %(h3%) did not arrive at route #3 within 4 s", out[0].dead[1].why)
      local named = 0 -- a busy host may make another rank late for a moment too
      for _, who in ipairs(out[0].waits) do if who == "rank 3 (h3), relay of ranks 3-5" then named = named + 1 end end
      assert.is_true(named >= 2, table.concat(out[0].waits, " | "))
    end)

  it("has rank 0 name the rank a star collective waits for, every wait_every seconds, until the limit", function()
    local out = tree_ranks(4, "T=2 IBV_FABRIC_GROUP=0 TOLERANT=1 LEAVE=2 STOP=1 STOP_S=4 IBV_FABRIC_WAIT_EVERY=0.4")
    local named = 0 -- a busy host may make another rank late for a moment too
    for _, who in ipairs(out[0].waits) do if who:find("rank 2 (h2)", 1, true) then named = named + 1 end end
    assert.is_true(named >= 2 and named <= 6, table.concat(out[0].waits, " | "))
    assert.equal(2, out[0].dead[1].rank)
    assert.same({}, out[1].waits) -- only rank 0 was asked to
  end)

  it("still reads the ranks while an on_wait callback is slower than wait_every: a late rank is not buried",
    function()
      local out = tree_ranks(3, "T=4 IBV_FABRIC_GROUP=0 TOLERANT=1 LATE=2 SLOW_WAIT=1 IBV_FABRIC_WAIT_EVERY=0.2")
      assert.is_true(#out[0].waits >= 1 and #out[0].waits <= 4, table.concat(out[0].waits, " | "))
      for r = 0, 2 do
        assert.same({}, out[r].dead, "rank " .. r)
        for k = 1, 3 do assert.equal(tree_expect(3, r, k, {}), out[r].got[k], "rank " .. r) end
      end
    end)

  it("keeps a collective's limit while rank 0 wakes every millisecond (the loop's timer stops its run)", function()
    -- before: a timer due as libuv's run began fired before the poll, which then slept until a frame came
    local out = tree_ranks(2, "T=1 IBV_FABRIC_GROUP=0 LATE=1 LATE_S=3 IBV_FABRIC_WAIT_EVERY=0.001")
    assert.matches("^rank 1 %(h1%) did not arrive at route #%d+ within 1 s$", out[0].err)
    assert.is_true(#out[0].waits > 50, #out[0].waits)
  end)

  it("refuses a wait_every that is not a number of seconds above 0", function()
    for _, v in ipairs({ 0, -1, "soon", 1 / 0 }) do
      local f, err = fabric.init{ rank = 0, size = 2, wait_every = v, getenv = function() return nil end }
      assert.is_nil(f)
      assert.equal("fabric: wait_every must be a number of seconds above 0, got " .. tostring(v), err)
    end
    local f, err = fabric.init{ rank = 0, size = 2, getenv = env{ IBV_FABRIC_WAIT_EVERY = "0" } }
    assert.is_nil(f)
    assert.matches("wait_every must be a number of seconds above 0, got 0", err)
  end)

  it("says once on stderr that an on_wait callback raised, drops it, and goes on with the collective", function()
    local out = tree_ranks(4, "T=2 IBV_FABRIC_GROUP=0 TOLERANT=1 LEAVE=2 STOP=1 STOP_S=4 IBV_FABRIC_WAIT_EVERY=0.4 "
      .. "WAIT_FAIL=1")
    assert.equal(1, #out[0].waits)
    assert.matches("^ibverbs%.fabric: on_wait failed, not called again: .*boom\n$", out[0].stderr)
    assert.equal(2, out[0].dead[1].rank)
    for _, r in ipairs({ 0, 1, 3 }) do assert.equal(tree_expect(4, r, 3, { [2] = true }), out[r].got[3]) end
  end)

  it("fails every rank with the relay's name when a relay leaves a fabric that is not tolerant", function()
    local out = tree_ranks(9, "T=4 IBV_FABRIC_GROUP=3 LEAVE=3")
    for r = 0, 8 do
      if r ~= 3 then assert.matches("rank 3 %(h3%)", out[r].err, "rank " .. r) end
    end
  end)

  it("ends a script that never called close without a crash (rank 0 and the relays hold libuv handles)", function()
    -- after a route, and right after the rendezvous (rank 0's newest poll never waited on: SIGSEGV before)
    for _, body in ipairs({ 'assert(f:route({}, "x"))', "" }) do
      local script = os.tmpname()
      local fh = assert(io.open(script, "w"))
      fh:write('local f = assert(require("ibverbs.fabric").init{ timeout = 10 }) ' .. body .. ' print("ok")')
      fh:close()
      local port = free_port()
      local p = io.popen(string.format("for r in 0 1 2 3; do (IBV_FABRIC_RANK=$r IBV_FABRIC_SIZE=4 IBV_FABRIC_GROUP=2 "
        .. "IBV_FABRIC_ROOT=127.0.0.1:%d LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 30 %s %s; "
        .. "echo \"rank $r: $?\") & done; wait", port, CPATH, LUA, script))
      local out = p:read("a")
      p:close()
      os.remove(script)
      for r = 0, 3 do assert.matches("rank " .. r .. ": 0\n", out, body) end
    end
  end)

  it("refuses ranks that disagree on the group size, and a group size that is not one", function()
    local out = ranks(3, { 0, 1, 2 }, "T=5 IBV_FABRIC_GROUP=2 GROUP1=0")
    assert.matches("rank 1 %(h1%) says the relay groups have 0 ranks, rank 0 says 2", out[0].init_err)
    local f, err = fabric.init{ rank = 0, size = 4, group = -1, getenv = function() return nil end }
    assert.is_nil(f)
    assert.matches("group must be 0 %(no tree%) or a group size, got %-1", err)
  end)

  it("frames a bundle and its answer by hand: any bytes, the sources, the dead", function()
    local parts = { [2] = { "3 7 2 s\0" }, [-1] = { "5 -1 3 sup" } }
    local body = fabric.bundle_encode(5, { { 4, "gone" } }, { 3, 5 }, parts)
    local m = assert(fabric.bundle_decode(body:sub(9)))
    assert.same({ op = "route", seq = 5, v = { dead = { { 4, "gone" } }, srcs = { 3, 5 },
      parts = { [2] = "3 7 2 s\0", [-1] = "5 -1 3 sup" } } }, m)
    assert.is_nil(fabric.bundle_decode("B1 0 x"))
    assert.same({ blob = "1 2 1 x" }, fabric.bundle_reply_decode("b0 1 2 1 x"))
  end)
end)

-- Ranks 1 .. n-1 played by one process (the wire protocol by hand: an 8-digit
-- hex length, then dkjson), so that rank 0 meets more ranks than select() can
-- wait on without starting a thousand interpreters.
local MANY = [[
local socket = require "socket"
local dkjson = require "dkjson"
local n, port = tonumber(arg[1]), tonumber(arg[2])
local function frame(t) local s = dkjson.encode(t) return string.format("%08x", #s) .. s end
local function read(c)
  local head = assert(c:receive(8))
  return assert(dkjson.decode(assert(c:receive(tonumber(head, 16)))))
end
local socks = {}
for r = 1, n - 1 do
  local c
  for _ = 1, 200 do c = socket.connect("127.0.0.1", port) if c then break end socket.sleep(0.05) end
  assert(c, "rank " .. r .. " cannot connect")
  c:settimeout(60)
  assert(c:send(frame{ hello = "ibverbs.fabric", rank = r, size = n, host = "m" .. r }))
  socks[r] = c
end
for r = 1, n - 1 do assert(read(socks[r]).welcome) end
for r = 1, n - 1 do assert(socks[r]:send(frame{ op = "allgather", seq = 1, v = r })) end
local ok = true
for r = 1, n - 1 do
  local m = read(socks[r])
  ok = ok and #m.v == n and m.v[r + 1] == r
end
for r = 1, n - 1 do assert(socks[r]:send(frame{ op = "route", seq = 2, v = { m = { { 0, r } } } })) end
for r = 1, n - 1 do ok = ok and #read(socks[r]).v == 0 end
print(ok and "ranks ok" or "ranks wrong")
]]

describe("ibverbs.fabric at rank 0 with more ranks than FD_SETSIZE", function()
  it("meets 1100 ranks and runs allgather and route among them (epoll through lua-luv, backlog 4096)", function()
    local n, port = 1100, free_port()
    local helper = os.tmpname()
    local fh = assert(io.open(helper, "w")); fh:write(MANY); fh:close()
    local root = os.tmpname()
    fh = assert(io.open(root, "w"))
    fh:write(string.format([[
      local fabric = require "ibverbs.fabric"
      local f = assert(fabric.init{ rank = 0, size = %d, port = %d, timeout = 60, host = "r0", group = 0 })
      local all = assert(f:allgather(0))
      local got, ups = assert(f:route({}, "zero"))
      print("root ok", #all, f.hosts[%d], #got, ups[1])
    ]], n, port, n))
    fh:close()
    local p = io.popen(string.format("ulimit -n 4096; LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 120 %s %s 2>&1 & "
      .. "LUA_PATH='lua/?.lua;;' timeout 120 %s %s %d %d 2>&1; wait", CPATH, LUA, root, LUA, helper, n, port))
    local out = p:read("a")
    p:close()
    os.remove(helper); os.remove(root)
    assert.matches("ranks ok", out)
    assert.matches("root ok\t1100\tm1099\t1099\tzero", out)
  end)

  it("refuses such a fabric without lua-luv rather than fail in select()", function()
    -- a rank 0 whose luv is missing: package.preload makes require fail
    local out = io.popen("LUA_PATH='lua/?.lua;;' " .. LUA .. [[ -e 'package.preload.luv = function() error("none") end
      local fabric = require "ibverbs.fabric"
      print(select(2, fabric.init{ rank = 0, size = 2000, port = 1, timeout = 1 }))' 2>&1]]):read("a")
    assert.matches("rank 0 waits on 1999 ranks: that needs lua%-luv", out)
  end)
end)

package.path = "examples/lib/?.lua;" .. package.path
local schedule = require "schedule"
local diagnose = require "diagnose"
local matrix = require "matrix"

-- Every ordered pair of s exactly once; returns the number of rounds that used each rank twice.
local function check_schedule(s, n, want_pairs)
  local seen, count = {}, 0
  for k = 0, s.rounds - 1 do
    local sends, recvs = {}, {}
    for r = 0, n - 1 do
      local dst, src = s:partners(r, k)
      if dst then
        assert.is_nil(sends[r]); sends[r] = dst
        local key = r .. "-" .. dst
        assert.is_nil(seen[key], "pair measured twice: " .. key .. " in round " .. k)
        seen[key] = k
        count = count + 1
        -- the receiver agrees
        local _, back = s:partners(dst, k)
        assert.equal(r, back)
      end
      if src then assert.is_nil(recvs[r]); recvs[r] = src end
    end
  end
  assert.equal(want_pairs, count)
  return seen
end

describe("fabric_matrix.lua's schedules (examples/lib/schedule.lua)", function()
  it("tournament: every ordered pair once, rounds of disjoint pairs, N-1 rounds for even N, N for odd", function()
    for n = 2, 33 do
      local s = schedule.new("tournament", n)
      assert.equal(n % 2 == 0 and n - 1 or n, s.rounds)
      check_schedule(s, n, n * (n - 1))
      for k = 0, s.rounds - 1 do
        local idle = 0
        for r = 0, n - 1 do
          local dst, src = s:partners(r, k)
          assert.equal(dst, src) -- one partner, both directions
          if dst then assert.equal(r, (s:partners(dst, k))) else idle = idle + 1 end
        end
        assert.equal(n % 2, idle) -- odd N: one rank rests each round
      end
    end
  end)

  it("shift: round d-1 sends to rank+d and receives from rank-d; serial: one pair a round; quick: one round", function()
    for _, n in ipairs({ 2, 3, 7, 16 }) do
      local s = schedule.new("shift", n)
      assert.equal(n - 1, s.rounds)
      check_schedule(s, n, n * (n - 1))
      assert.same({ 2 % n, (0 - 2) % n }, { s:partners(0, 1) })
      local serial = schedule.new("serial", n)
      assert.equal(n * (n - 1), serial.rounds)
      check_schedule(serial, n, n * (n - 1))
      for k = 0, serial.rounds - 1 do assert.equal(1, #serial:round_pairs(k)) end
      local q = schedule.new("quick", n)
      assert.equal(1, q.rounds)
      check_schedule(q, n, 2 * math.floor(n / 2))
    end
  end)

  it("reads a pairs file of ranks or host names, rounds in increasing order", function()
    local s = assert(schedule.from_pairs("# round a b\n5 0 1\n5 h2 3\n\n2 0 h2  # by name\n", 4,
      { "h0", "h1", "h2", "h3" }))
    assert.equal(2, s.rounds)
    assert.same({ 2, 2 }, { s:partners(0, 0) }) -- round 2 first
    assert.same({ 1, 1 }, { s:partners(0, 1) })
    assert.same({ 3, 3 }, { s:partners(2, 1) })
    assert.is_nil((s:partners(1, 0)))
    assert.equal(6, s:pair_count())
    local plan = s:rank_plan(2)
    local again = schedule.from_plan("pairs", 4, 2, plan, 2)
    assert.same({ 0, 0 }, { again:partners(2, 0) })
  end)

  it("refuses a bad pairs file, naming the line: unknown rank or host, a rank twice in a round, empty", function()
    local hosts = { "a", "b", "c", "c" }
    local cases = {
      { "1 0 4\n", "f:1: rank 4 is not a rank %(0 to 3%)" },
      { "1 0 1\n1 zz 2\n", "f:2: unknown host or rank 'zz'" },
      { "1 0 1\n1 1 2\n", "f:2: rank 1 is twice in round 1 %(line 1 too%)" },
      { "", "f: no pairs %(empty file%)" },
      { "# only a comment\n\n", "f: no pairs %(empty file%)" },
      { "1 0 0\n", "f:1: rank 0 paired with itself" },
      { "1 0 1\n2 1 0\n", "f:2: ranks 1 and 0 are paired twice %(line 1 too%)" },
      { "1 0\n", "f:1: expected 'round rankA rankB', got '1 0'" },
      { "x 0 1\n", "f:1: round 'x' is not a number >= 0" },
      { "1 a c\n", "f:1: host c runs several ranks: name the rank" },
    }
    for _, c in ipairs(cases) do
      local s, err = schedule.from_pairs(c[1], 4, hosts, "f")
      assert.is_nil(s)
      assert.matches(c[2], err)
    end
  end)

  it("splits a retest list into rounds of disjoint pairs, at most width a round", function()
    local r = schedule.disjoint_rounds({ { 0, 1 }, { 1, 2 }, { 2, 3 }, { 0, 3 } })
    assert.same({ { { 0, 1 }, { 2, 3 } }, { { 1, 2 }, { 0, 3 } } }, r)
    assert.equal(4, #schedule.disjoint_rounds({ { 0, 1 }, { 1, 2 }, { 2, 3 }, { 0, 3 } }, 1))
  end)
end)

-- Synthetic figures: every ordered pair of n ranks with lat, write, send;
-- change(p) may spoil some.
local function fabric_of(n, change)
  local l = {}
  for s = 0, n - 1 do
    for d = 0, n - 1 do
      if s ~= d then
        local p = { src = s, dst = d, rail = 1, lat_us = 2.0 + 0.01 * (s + d), write_mbs = 12000 - s - d,
          send_mbs = 11900 - s - d, data_ok = true, verified_bytes = 100 }
        if change then change(p) end
        l[#l + 1] = p
      end
    end
  end
  return l
end

-- The retest: the same figures again for the pairs of the plan (both
-- directions), k samples of each (k passes), spoiled by change(p, sample).
local function retest(plan, change, k)
  local l = {}
  for sample = 1, k or 1 do
    for _, pr in ipairs(plan.pairs) do
      for _, x in ipairs({ { pr[1], pr[2] }, { pr[2], pr[1] } }) do
        local p = { src = x[1], dst = x[2], rail = 1, lat_us = 2.0, write_mbs = 12000, send_mbs = 11900, data_ok = true,
          sample = sample }
        if change then change(p, sample) end
        l[#l + 1] = p
      end
    end
  end
  return l
end

local OPTS = { lat_factor = 2.1, bw_fraction = 0.93 }

local function diagnosis(n, first_change, again_change, opts)
  opts = opts or OPTS
  local l = fabric_of(n, first_change)
  local ref = diagnose.flag(l, opts)
  local plan = diagnose.retest_plan(l, n)
  local v, transient = diagnose.verdicts(retest(plan, again_change, opts.retests), ref, plan, opts)
  return v, transient, plan, l
end

-- A measured first pass: matrices {[src + 1] = {[dst + 1] = value}} of latency, write and send.
local function measured_fabric(lat, write, send)
  local l = {}
  for s = 0, #lat - 1 do
    for d = 0, #lat - 1 do
      if s ~= d then
        l[#l + 1] = { src = s, dst = d, rail = 1, lat_us = lat[s + 1][d + 1], write_mbs = write[s + 1][d + 1],
          send_mbs = send[s + 1][d + 1], data_ok = true }
      end
    end
  end
  return l
end

local function flagged_pairs(l)
  local f = {}
  for _, p in ipairs(l) do if p.flagged then f[#f + 1] = p.src .. ">" .. p.dst end end
  return f
end

describe("fabric_matrix.lua's diagnosis (examples/lib/diagnose.lua)", function()
  it("gives no verdict on a healthy fabric and retests nothing", function()
    local v, transient, plan = diagnosis(8)
    assert.same({}, v)
    assert.same({}, transient)
    assert.same({}, plan.pairs)
  end)

  it("names a slow node (its sends at half rate), not its partners", function()
    local slow = function(p) if p.src == 5 then p.write_mbs, p.send_mbs = 6000, 5900 end end
    local v, _, plan = diagnosis(8, slow, slow)
    assert.equal(1, #v)
    assert.equal("node", v[1].kind)
    assert.same({ 5 }, v[1].ranks)
    assert.matches("still bad against rank %d, which passed with rank %d: rank 5 %-> rank %d: RDMA write bandwidth "
      .. "6000%.00 MB/s < 0%.93 x max 1199%d%.00", v[1].why)
    assert.matches("7 of its pairs flagged", v[1].why)
    -- every pair of rank 5 is retested as a flagged pair: it needs no partner of its own; the others get one
    -- (every rank has a flagged pair with 5, so none is clean: the partners are those with fewest flagged)
    assert.is_nil(plan.partner[5])
    for r = 0, 7 do
      if r ~= 5 then assert.is_true(plan.partner[r] ~= nil and plan.partner[r] ~= 5 and plan.partner[r] ~= r) end
    end
  end)

  it("names a bad link whose two ends are fine with everyone else, and neither node", function()
    local link = function(p)
      if (p.src == 1 and p.dst == 6) or (p.src == 6 and p.dst == 1) then p.lat_us = 9.5 end
    end
    local v, _, plan = diagnosis(8, link, link)
    assert.equal(1, #v, require("dkjson").encode(v))
    assert.equal("link", v[1].kind)
    assert.same({ 1, 6 }, v[1].ranks)
    assert.matches("both pass with other partners; between them still bad: rank 1 %-> rank 6: latency 9%.5 us > "
      .. "2%.1 x min 2%.0", v[1].why)
    assert.same({ { 1, 6 }, { 0, 1 }, { 2, 6 } }, plan.pairs) -- the pair, each end with a good partner
  end)

  it("calls a pair that passes its retest transient (no verdict); a failed pair or bad data is flagged", function()
    local once = function(p) if p.src == 2 and p.dst == 3 then p.send_mbs = 100 end end
    local v, transient = diagnosis(6, once, nil)
    assert.same({}, v)
    assert.same({ { 2, 3 } }, transient)
    local l = fabric_of(4, function(p)
      if p.src == 0 and p.dst == 1 then p.error = "RC connect: timeout" end
      if p.src == 2 and p.dst == 3 then p.data_ok = false end
    end)
    diagnose.flag(l, OPTS)
    local flagged = {}
    for _, p in ipairs(l) do if p.flagged then flagged[#flagged + 1] = p.src .. "->" .. p.dst .. ": " .. p.why end end
    assert.same({ "0->1: RC connect: timeout", "2->3: data check failed" }, flagged)
  end)

  it("takes its thresholds against the best figures (ClusterKit's 2.1x, 93 %) or the medians, as asked", function()
    local l = fabric_of(4, function(p) if p.src == 0 then p.send_mbs = 11000 end end) -- 92 % of the best
    diagnose.flag(l, OPTS)
    local n = 0
    for _, p in ipairs(l) do if p.flagged then n = n + 1 end end
    assert.equal(3, n)
    diagnose.flag(l, { lat_factor = 2.1, bw_fraction = 0.9 })
    n = 0
    for _, p in ipairs(l) do if p.flagged then n = n + 1 end end
    assert.equal(0, n)
    local ref = diagnose.reference(fabric_of(3, function(p) p.lat_us = p.src + 1 end), "median")
    assert.equal(2, ref.lat_us)
  end)

  it("takes a percentile as the reference: bandwidth against pQ, latency against p(100-Q); best is p100", function()
    assert.same({ q = 0.75, hi = "p75", lo = "p25" }, diagnose.parse_reference("p75"))
    assert.same({ q = 0.9, hi = "p90", lo = "p10" }, diagnose.parse_reference("p90"))
    assert.same({ q = 0.875, hi = "p87.5", lo = "p12.5" }, diagnose.parse_reference("p87.5"))
    assert.same({ q = 1, hi = "max", lo = "min" }, diagnose.parse_reference("best"))
    assert.same({ q = 0.5, hi = "median", lo = "median" }, diagnose.parse_reference("median"))
    for _, bad in ipairs({ "p30", "p101", "p", "75", "q75", "p75x", "mean" }) do
      local ok, err = diagnose.parse_reference(bad)
      assert.is_nil(ok, bad)
      assert.matches("best, median or pQ %(a percentile, Q from 50 to 100: p75, p90%) expected, got '"
        .. bad:gsub("%p", "%%%0") .. "'", err)
    end
    -- 12 values 1 .. 12: p75 interpolates between the 9th and the 10th (9.25), p25 between the 3rd and 4th
    local l = fabric_of(4)
    local v = 0
    for _, p in ipairs(l) do v = v + 1; p.lat_us, p.write_mbs, p.send_mbs = v, v, 13 - v end
    local ref = diagnose.reference(l, "p75")
    assert.same({ 3.75, 9.25, 9.25, "p75", "p25" }, { ref.lat_us, ref.write_mbs, ref.send_mbs, ref.hi, ref.lo })
    ref = diagnose.reference(l, "p100")
    assert.same({ 1, 12, 12, "p100", "p0" }, { ref.lat_us, ref.write_mbs, ref.send_mbs, ref.hi, ref.lo })
    ref = diagnose.reference(l, "median")
    assert.same({ 6.5, 6.5 }, { ref.lat_us, ref.write_mbs })
  end)

  -- Four soft-RoCE VMs, node 3 (rank 2) behind tbf rate 400kbit: the first pass of a run that passed
  -- (spec/nodes4, --reference median --bw-fraction 0.05).  Rank 2 owns 6 of the 12 pairs.
  local SLOW_LAT = { { 0, 9756.8, 7117.8, 9876.1 }, { 9320.6, 0, 13678.0, 7441.9 }, { 7257.4, 14841.6, 0, 11083.6 },
    { 8955.1, 7705.2, 12157.1, 0 } }
  local SLOW_WRITE = { { 0, 0.73, 0.05, 1.49 }, { 1.09, 0, 0.07, 3.32 }, { 0.05, 0.05, 0, 0.05 },
    { 1.61, 1.79, 1.42, 0 } }
  local SLOW_SEND = { { 0, 2.02, 0.05, 1.96 }, { 1.30, 0, 0.16, 2.71 }, { 0.05, 0.05, 0, 0.05 },
    { 1.60, 5.52, 0.05, 0 } }

  it("flags the six pairs of one slow node of four against p75, which the median missed", function()
    local l = measured_fabric(SLOW_LAT, SLOW_WRITE, SLOW_SEND)
    -- half the bandwidths are rank 2's: the median (0.91 MB/s write) is pulled down to the edge of them,
    -- 0.05 x it below them all
    local ref = diagnose.flag(l, { lat_factor = 3, bw_fraction = 0.05, reference = "median" })
    assert.same({}, flagged_pairs(l))
    assert.near(0.91, ref.write_mbs, 1e-9)
    local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 2 }
    ref = diagnose.flag(l, opts)
    assert.same({ "0>2", "1>2", "2>0", "2>1", "2>3", "3>2" }, flagged_pairs(l))
    assert.near(1.52, ref.write_mbs, 1e-9)
    assert.matches("RDMA write bandwidth 0%.05 MB/s < 0%.2 x p75 1%.52", l[2].why)
    -- the retest: rank 2 still at 0.05 MB/s both ways, every other pair at its first-pass figures
    local plan = diagnose.retest_plan(l, 4)
    local again = retest(plan, function(p)
      p.lat_us, p.write_mbs, p.send_mbs = 6000, 4, 4
      if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 0.05, 0.05 end
    end, 2)
    local v, transient = diagnose.verdicts(again, ref, plan, opts)
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 2 } }, { v[1].kind, v[1].ranks })
    assert.matches("^still bad against rank %d, which passed with rank %d: rank %d %-> rank %d: RDMA write bandwidth "
      .. "0%.05 MB/s < 0%.2 x p75 1%.52; send bandwidth 0%.05 MB/s < 0%.2 x p75 1%.98 %(best of 2%)", v[1].why)
    assert.matches("%(3 of its pairs flagged in the first pass%)$", v[1].why)
    assert.same({}, transient)
  end)

  it("names the slow node alone when noise flagged two more pairs of the first pass (none clean, all retested)",
    function()
      -- rank 2 slow; 0 -> 1 and 3 -> 1 lost a packet each (an RC ack timeout: 64 KiB in 2.1 s)
      local l = fabric_of(4, function(p)
        if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 60, 59 end
        if p.src == 0 and p.dst == 1 then p.write_mbs = 30 end
        if p.src == 3 and p.dst == 1 then p.send_mbs = 30 end
      end)
      local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = 2 }
      local ref = diagnose.flag(l, opts)
      local plan = diagnose.retest_plan(l, 4)
      assert.same({}, plan.good) -- every rank has a flagged pair: no rank passed all of its pairs
      assert.same({ 3, nil, nil, 0 }, { plan.partner[0], plan.partner[1], plan.partner[2], plan.partner[3] })
      local v, transient = diagnose.verdicts(retest(plan, function(p)
        if p.src == 2 or p.dst == 2 then p.write_mbs, p.send_mbs = 60, 59 end
      end, 2), ref, plan, opts)
      assert.equal(1, #v, dkjson.encode(v))
      assert.same({ "node", { 2 } }, { v[1].kind, v[1].ranks })
      assert.same({ { 0, 1 }, { 1, 3 } }, transient)
    end)

  -- The same VMs, node2 -> node4 (ranks 1 -> 3) delayed 300 ms: the first pass of the run that named
  -- node2 a bad node, its retest of rank 1 against rank 0 having measured 0 -> 1 at 0.03 MB/s once
  local LINK_LAT = { { 0, 11866.9, 4269.4, 8036.3 }, { 11606.7, 0, 10656.0, 157411.0 },
    { 4404.8, 10596.2, 0, 10810.6 }, { 8565.1, 155466.0, 10841.8, 0 } }
  local LINK_WRITE = { { 0, 1.48, 4.52, 3.21 }, { 2.28, 0, 1.83, 0.20 }, { 2.41, 1.63, 0, 1.35 },
    { 2.74, 0.21, 1.31, 0 } }
  local LINK_SEND = { { 0, 2.79, 4.82, 3.64 }, { 1.48, 0, 2.98, 0.20 }, { 9.48, 3.57, 0, 1.27 },
    { 3.80, 0.20, 1.49, 0 } }

  it("judges a retested pair by its best of --retests samples: one noisy sample names no node", function()
    local function run(k)
      local opts = { lat_factor = 4, bw_fraction = 0.2, reference = "p75", retests = k }
      local l = measured_fabric(LINK_LAT, LINK_WRITE, LINK_SEND)
      local ref = diagnose.flag(l, opts)
      assert.same({ "1>3", "3>1" }, flagged_pairs(l))
      local plan = diagnose.retest_plan(l, 4)
      assert.same({ { 1, 3 }, { 0, 1 }, { 2, 3 } }, plan.pairs)
      return diagnose.verdicts(retest(plan, function(p, sample)
        p.lat_us, p.write_mbs, p.send_mbs = 6000, 4, 4
        if (p.src == 1 and p.dst == 3) or (p.src == 3 and p.dst == 1) then p.lat_us, p.write_mbs = 156000, 0.2 end
        if p.src == 0 and p.dst == 1 and sample == 1 then p.write_mbs = 0.03 end -- the lost packet
      end, k), ref, plan, opts)
    end
    local v = run(1) -- one sample: the noise decides, as it did
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "node", { 1 } }, { v[1].kind, v[1].ranks })
    assert.matches(": rank 0 %-> rank 1: RDMA write bandwidth 0%.03 MB/s < 0%.2 x p75 2%.49 %(1 of its pairs", v[1].why)
    v = run(2) -- two: 0 -> 1 passes on its best sample, the link is named
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 3 } }, { v[1].kind, v[1].ranks })
    assert.matches("^both pass with other partners; between them still bad: rank 1 %-> rank 3: latency 156000%.0 us "
      .. "> 4 x p25 8432%.9; RDMA write bandwidth 0%.20 MB/s < 0%.2 x p75 2%.49 %(best of 2%)", v[1].why)
  end)

  it("counts a failure or bad data in any retest sample, and the best figure of each metric otherwise", function()
    local b = diagnose.best_of({
      { src = 1, dst = 2, rail = 1, lat_us = 9, write_mbs = 1, send_mbs = 8, data_ok = true },
      { src = 1, dst = 2, rail = 1, lat_us = 3, write_mbs = 7, send_mbs = 2, data_ok = true },
    })
    assert.same({ 3, 7, 8, true, 2 }, { b.lat_us, b.write_mbs, b.send_mbs, b.data_ok, b.samples })
    b = diagnose.best_of({
      { src = 1, dst = 2, lat_us = 3, write_mbs = 7, send_mbs = 8, data_ok = true },
      { src = 1, dst = 2, lat_us = 3, write_mbs = 7, send_mbs = 8, data_ok = false },
      { src = 1, dst = 2, error = "send bandwidth: completion retry exceeded" },
    })
    assert.is_false(b.data_ok)
    assert.equal("send bandwidth: completion retry exceeded", b.error)
    -- a link that corrupts one sample in two is still bad, whatever its best figures
    local v = diagnosis(6, function(p) if p.src == 1 and p.dst == 4 then p.data_ok = false end end,
      function(p, sample) if p.src == 1 and p.dst == 4 and sample == 2 then p.data_ok = false end end,
      { lat_factor = 2.1, bw_fraction = 0.93, retests = 3 })
    assert.equal(1, #v, dkjson.encode(v))
    assert.same({ "link", { 1, 4 } }, { v[1].kind, v[1].ranks })
    assert.matches("rank 1 %-> rank 4: data check failed %(best of 3%)", v[1].why)
  end)
end)

describe("fabric_matrix.lua's report (examples/lib/matrix.lua)", function()
  local function report()
    local l = fabric_of(4, function(p) if p.src == 2 then p.send_mbs = 3 end end)
    diagnose.flag(l, OPTS)
    for _, p in ipairs(l) do p.pass, p.round = "first", 0 end
    return { size = 4, hosts = { "n1", "n2", "n3", "n4" }, pattern = "tournament", rounds = 3, rails = { "mlx5_0:1" },
      pairs = l, verdicts = { { kind = "node", ranks = { 2 }, hosts = { "n3" }, rail = "mlx5_0:1", why = "slow" } },
      options = { lat_factor = 2.1, bw_fraction = 0.93 }, control = { exchanges = 5, rank0_ms_per_round = 1,
        rank0_cpu_ms_per_round = 0.5, slowest_ms_per_round = 2, slowest_rank = 3 } }
  end

  it("prints the matrices, the flagged pairs and the verdicts", function()
    local text = matrix.text(report())
    assert.matches("fabric_matrix: 4 ranks, pattern tournament, 3 rounds, rails: mlx5_0:1", text)
    assert.matches("12 pairs, 1200 bytes verified, 3 flagged %(latency > 2%.1x min, bandwidth < 0%.93 x max%)", text)
    assert.matches("FLAGGED 2 n3 %-> 0 n1: send bandwidth 3%.00 MB/s < 0%.93 x max", text)
    assert.matches("VERDICT node: rank 2 %(n3%) mlx5_0:1: slow", text)
    assert.matches("\nFAIL$", text)
  end)

  it("writes JSON with the round of every pair, the pattern, the rounds and the verdicts", function()
    local j = dkjson.decode(matrix.json(report()))
    assert.equal("tournament", j.pattern)
    assert.equal(3, j.rounds)
    assert.equal(12, #j.pairs)
    assert.equal(0, j.pairs[1].round)
    assert.same({ kind = "node", ranks = { 2 }, hosts = { "n3" }, rail = "mlx5_0:1", why = "slow" }, j.verdicts[1])
    assert.is_false(j.pass)
    local r = report()
    r.verdicts = {}
    assert.matches('"verdicts":%[%]', matrix.json(r))
  end)

  it("draws the heatmaps with gnuplot (png and svg)", function()
    local r = report()
    for _, ext in ipairs({ "png", "svg" }) do
      local file = os.tmpname() .. "." .. ext
      assert(matrix.plot(r, file))
      local h = assert(io.open(file, "rb"))
      local head = h:read(8)
      h:close()
      os.remove(file)
      if ext == "png" then assert.equal("\137PNG\r\n\26\n", head) else assert.matches("^<%?xml", head) end
    end
    assert.matches("png or %.svg", select(2, matrix.plot(r, "/tmp/x.jpg")))
  end)
end)

-- fabric_matrix.lua itself on this host: n local ranks (IBV_FABRIC_*), args
-- for all; returns rank 0's output and every rank's exit status.
local function matrix_ranks(n, args, vars)
  local port = free_port()
  local outs = {}
  for r = n - 1, 0, -1 do
    outs[r] = os.tmpname()
    os.execute(string.format("(%s IBV_FABRIC_RANK=%d IBV_FABRIC_SIZE=%d IBV_FABRIC_ROOT=127.0.0.1:%d "
      .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s' timeout 60 %s examples/fabric_matrix.lua %s > %s 2>&1; "
      .. "echo $? > %s.rc) &", vars or "", r, n, port, CPATH,
      LUA, args, outs[r], outs[r]))
  end
  local text, rcs, deadline = nil, {}, os.time() + 70
  for r = 0, n - 1 do
    local rc
    repeat
      local h = io.open(outs[r] .. ".rc")
      rc = h and tonumber(h:read("a"))
      if h then h:close() end
      if not rc then os.execute("sleep 0.1") end
    until rc or os.time() > deadline
    rcs[r] = rc
    local h = io.open(outs[r])
    if r == 0 then text = h and h:read("a") end
    if h then h:close() end
    os.remove(outs[r]); os.remove(outs[r] .. ".rc")
  end
  return text, rcs
end

describe("examples/fabric_matrix.lua on this host (no RDMA driver)", function()
  it("refuses out-of-range and contradictory options at once, before the rendezvous", function()
    for _, c in ipairs({
      { "--bw-fraction 1.5", "option '%-%-bw%-fraction': at most 1 expected, got 1%.5" },
      { "--lat-factor 0.5", "option '%-%-lat%-factor': at least 1 expected, got 0%.5" },
      { "--pattern ring", "option '%-%-pattern': tournament, shift or serial expected, got 'ring'" },
      { "--pairs x --pattern shift", "%-%-pairs and %-%-pattern/%-%-quick exclude each other" },
      { "--quick --pattern serial", "%-%-quick is the tournament's first round" },
      { "--max-rounds 0", "option '%-%-max%-rounds': at least 1 expected, got 0" },
      { "--block 0", "option '%-%-block': at least 1 expected, got 0" },
      { "--reference p30", "option '%-%-reference': best, median or pQ %(a percentile, Q from 50 to 100: p75, p90%) "
        .. "expected, got 'p30'" },
      { "--reference average", "option '%-%-reference': best, median or pQ .* got 'average'" },
      { "--retests 0", "option '%-%-retests': at least 1 expected, got 0" },
      { "--retests 2.5", "option '%-%-retests': an integer expected, got '2%.5'" },
    }) do
      local t0 = os.time()
      local out, rc = matrix_ranks(1, "--size 2 --root 127.0.0.1:1 " .. c[1]) -- rank 1 of 2: would wait for rank 0
      assert.equal(1, rc[0], out)
      assert.matches(c[2], out)
      assert.is_true(os.time() - t0 < 5)
    end
  end)

  it("refuses a bad pairs file on every rank before any traffic, naming the line", function()
    local file = os.tmpname()
    local fh = assert(io.open(file, "w")); fh:write("0 0 1\n0 1 2\n"); fh:close()
    local out, rc = matrix_ranks(3, "--dry-run --pairs " .. file)
    os.remove(file)
    assert.matches(file:gsub("%p", "%%%0") .. ":2: rank 1 is twice in round 0 %(line 1 too%)", out)
    assert.same({ [0] = 1, 1, 1 }, rc)
  end)

  it("makes a missing RDMA driver a verdict naming each node and the cause, without a traceback", function()
    local out, rc = matrix_ranks(2, "-d rxe0 -t 2")
    assert.same({ [0] = 1, 1 }, rc)
    assert.matches("VERDICT node: rank 0 %([^)]+%) rxe0: no RDMA driver loaded %(ibv_get_device_list: Function not "
      .. "implemented%)", out)
    assert.matches("VERDICT node: rank 1 %([^)]+%) rxe0: no RDMA driver loaded", out)
    assert.matches("2 pairs unmeasured", out)
    assert.not_matches("traceback", out)
  end)

  it("names a rank that hangs after the rendezvous while it waits, then buries it at the limit (exit 1)",
    function()
      -- rank 2 stops itself (SIGSTOP) right after fabric.init: alive, connected, silent
      local port, out, script = free_port(), os.tmpname(), os.tmpname()
      local fh = assert(io.open(script, "w"))
      fh:write([[local fb = require "ibverbs.fabric" local init = fb.init
fb.init = function(o) local f, e = init(o) os.execute("kill -STOP $PPID") return f, e end
arg = { [0] = "examples/fabric_matrix.lua", "--dry-run", "--pattern", "serial", "-t", "1" }
dofile("examples/fabric_matrix.lua")]])
      fh:close()
      local vars = string.format("IBV_FABRIC_WAIT_EVERY=5 IBV_FABRIC_SIZE=3 IBV_FABRIC_ROOT=127.0.0.1:%d "
        .. "LUA_PATH='lua/?.lua;;' LUA_CPATH='%s'", port, CPATH)
      local args = "examples/fabric_matrix.lua --dry-run --pattern serial -t 1"
      local t0 = os.time()
      os.execute(string.format("(env %s IBV_FABRIC_RANK=2 timeout -s KILL 60 %s %s >/dev/null 2>&1 &); "
        .. "(env %s IBV_FABRIC_RANK=1 timeout 60 %s %s >/dev/null 2>&1 &); "
        .. "env %s IBV_FABRIC_RANK=0 timeout 60 %s %s > %s 2>&1; echo \"rc $?\" >> %s",
        vars, LUA, script, vars, LUA, args, vars, LUA, args, out, out))
      os.execute("pkill -KILL -f '" .. script .. "'")
      os.remove(script)
      fh = assert(io.open(out))
      local text = fh:read("a")
      fh:close()
      os.remove(out)
      local waits = select(2, text:gsub("fabric_matrix: waiting [%d.]+ s for rank 2 %([^)]*%) %(the limit: 34%.0 s%)",
        ""))
      assert.is_true(waits >= 4 and waits <= 7, text)
      assert.matches("VERDICT unreachable: rank 2 %([^)]*%): rank 2 %([^)]*%) did not arrive at %a+ #%d+ within 34 s",
        text)
      assert.matches("rc 1\n$", text)
      assert.is_true(os.time() - t0 < 50, os.time() - t0)
    end)

  it("dry-runs the whole schedule with no device: every ordered pair in its round, no verdict", function()
    local json = os.tmpname()
    local out, rc = matrix_ranks(5, "--dry-run --pattern shift --json " .. json)
    assert.same({ [0] = 0, 0, 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    os.remove(json)
    assert.equal("shift", j.pattern)
    assert.equal(4, j.rounds)
    assert.equal(20, #j.pairs)
    for _, p in ipairs(j.pairs) do assert.equal((p.dst - p.src) % 5 - 1, p.round) end
    assert.same({}, j.verdicts)
    assert.matches("control plane: 6 exchanges", out)
  end)
end)

describe("examples/fabric_matrix.lua in blocks of rounds over the relay tree", function()
  it("measures every ordered pair once, in its round, with one exchange per block (9 ranks, groups of 3)", function()
    local json, lines = os.tmpname(), os.tmpname()
    local out, rc = matrix_ranks(9, "--dry-run --block 4 --json " .. json .. " --json-lines " .. lines,
      "IBV_FABRIC_GROUP=3")
    assert.same({ [0] = 0, 0, 0, 0, 0, 0, 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    local streamed = 0
    for line in io.lines(lines) do
      local p = dkjson.decode(line)
      if p.src then -- a pair (the last line holds the verdicts)
        assert.is_true(p.round >= 0 and p.round < 9, line)
        streamed = streamed + 1
      end
    end
    os.remove(json); os.remove(lines)
    assert.equal(72, streamed)
    assert.equal(9, j.rounds)
    assert.equal(72, #j.pairs)
    local s, seen = schedule.new("tournament", 9), {}
    for _, p in ipairs(j.pairs) do
      local key = p.src .. "-" .. p.dst
      assert.is_nil(seen[key], key)
      seen[key] = true
      local dst, src = s:partners(p.src, p.round)
      assert.is_true(dst == p.dst or src == p.dst, key .. " in round " .. p.round)
    end
    -- two exchanges before the first block, then one after each block: rounds 0-3, 4-7, 8
    assert.matches("control plane: 5 exchanges;.*%(4 rounds per exchange%)", out)
  end)
end)

describe("examples/fabric_matrix.lua --dry-run with two rails", function()
  it("runs every ordered pair on each rail, named in the JSON", function()
    local json = os.tmpname()
    local out, rc = matrix_ranks(3, "--dry-run -d mlx5_0,mlx5_1 --json " .. json)
    assert.same({ [0] = 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    os.remove(json)
    assert.same({ "mlx5_0", "mlx5_1" }, j.rails)
    assert.equal(3, j.rounds) -- odd N: N rounds
    local seen = {}
    for _, p in ipairs(j.pairs) do
      local key = p.rail .. " " .. p.src .. "-" .. p.dst
      assert.is_nil(seen[key], key)
      seen[key] = true
    end
    assert.equal(12, #j.pairs) -- 6 ordered pairs on each rail
  end)

  it("names each pair's hosts in the report and in the streamed lines alike", function()
    local json, lines = os.tmpname(), os.tmpname()
    local out, rc = matrix_ranks(3, "--dry-run -d mlx5_0,mlx5_1 --json " .. json .. " --json-lines " .. lines)
    assert.same({ [0] = 0, 0, 0 }, rc, out)
    local fh = assert(io.open(json))
    local j = dkjson.decode(fh:read("a"))
    fh:close()
    local streamed = {}
    for l in io.lines(lines) do -- the pairs, then the verdicts
      local rec = dkjson.decode(l)
      if rec.src then streamed[#streamed + 1] = rec end
    end
    os.remove(json); os.remove(lines)
    assert.equal(12, #streamed)
    for _, list in ipairs({ j.pairs, streamed }) do
      for _, p in ipairs(list) do
        assert.equal(j.hosts[p.src + 1], p.src_host)
        assert.equal(j.hosts[p.dst + 1], p.dst_host)
      end
    end
  end)
end)

describe("examples/fabric_check.lua on this host (no RDMA driver)", function()
  it("reports the missing driver as this node's fault and exits 1, without a traceback", function()
    local p = io.popen("LUA_PATH='lua/?.lua;;' LUA_CPATH='" .. CPATH .. "' " .. LUA ..
      " examples/fabric_check.lua 2>&1; echo rc=$?")
    local out = p:read("a")
    p:close()
    assert.matches("%(none%): FAIL no RDMA driver loaded %(ibv_get_device_list: Function not implemented%)", out)
    assert.matches("rc=1", out)
    assert.not_matches("traceback", out)
  end)
end)
