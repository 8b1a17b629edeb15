-- ibverbs.fabric without a device: what each launcher's environment gives,
-- collectives among real processes on loopback TCP (values exact, 64-bit
-- addresses included), a rank that never arrives or leaves named in every
-- rank's error within the time limit; and the all-pairs report of
-- fabric_matrix.lua (examples/lib/matrix.lua): medians, flags, JSON, gnuplot.
local fabric = require "ibverbs.fabric"
local dkjson = require "dkjson"

local LUA = rawget(_G, "jit") and "luajit" or "lua5.4"
local CPATH = "build/" .. LUA .. "/?.so;;"

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
      SLURM_STEP_NODELIST = "node[1-3]", SLURM_STEP_TASKS_PER_NODE = "1(x3)", IBV_FABRIC_PORT = "18631" } }
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
local f, err = fabric.init{ timeout = tonumber(os.getenv("T")), host = "h" .. os.getenv("IBV_FABRIC_RANK") }
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
assert(f:barrier())
if tonumber(os.getenv("LEAVE") or -1) == f.rank then print(dkjson.encode{ left = true }) os.exit(0) end
local t0 = os.time()
out.ok, out.err = f:barrier(tonumber(os.getenv("T")))
out.waited = os.time() - t0
out.after = select(2, f:barrier())
print(dkjson.encode(out))
]]

local function ranks(size, which, vars)
  local script = os.tmpname()
  local fh = assert(io.open(script, "w"))
  fh:write(RANK)
  fh:close()
  local port = 20000 + math.random(0, 20000)
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

  it("names a rank that never arrives at the rendezvous, on every rank that did", function()
    local out = ranks(3, { 0, 1 }, "T=3")
    for _, r in ipairs({ 0, 1 }) do
      assert.matches("rank 2 did not arrive at the rendezvous %(port %d+%) within 3 s", out[r].init_err)
    end
    out = ranks(2, { 1 }, "T=2")
    assert.matches("rank 1: rank 0 at 127%.0%.0%.1:%d+ did not answer within 2 s", out[1].init_err)
  end)
end)

describe("fabric_matrix.lua's report (examples/lib/matrix.lua)", function()
  package.path = "examples/lib/?.lua;" .. package.path
  local matrix = require "matrix"
  local function sample()
    local l = {}
    for s = 0, 3 do
      for d = 0, 3 do
        if s ~= d then
          l[#l + 1] = { src = s, dst = d, lat_us = 300 + s + d, write_mbs = 14, send_mbs = d == 2 and 3 or 12,
            verified_bytes = 100, data_ok = true }
        end
      end
    end
    return l
  end

  it("flags the pairs below the threshold of the median, failed pairs and bad data", function()
    local l = sample()
    l[1].error = "RC connect: timeout"
    l[2].data_ok = false
    local r = matrix.analyse(l, 4, 0.5)
    assert.is_false(r.pass)
    assert.equal(12, r.medians.send_mbs)
    local flagged = {}
    for _, p in ipairs(r.flagged) do flagged[#flagged + 1] = p.src .. "->" .. p.dst end
    assert.same({ "0->1", "0->2", "1->2", "3->2" }, flagged)
    assert.matches("send bandwidth 3%.00 MB/s < 0%.5 x median 12%.00", r.flagged[3].why)
    local text = matrix.text(r)
    assert.matches("FLAGGED 1 %-> 2: send bandwidth", text)
    assert.matches("\nFAIL$", text)
    assert.is_true(matrix.analyse(sample(), 4, 0.2).pass) -- 3 MB/s is not below 0.2 x 12
  end)

  it("passes a uniform matrix and writes JSON with every pair", function()
    local l = sample()
    for _, p in ipairs(l) do p.send_mbs = 12 end
    local r = matrix.analyse(l, 4, 0.5)
    assert.is_true(r.pass)
    local j = dkjson.decode(matrix.json(r))
    assert.equal(12, #j.pairs)
    assert.same({}, j.flagged)
    assert.is_true(j.pass)
  end)

  it("draws the heatmaps with gnuplot (png and svg)", function()
    local r = matrix.analyse(sample(), 4, 0.5)
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
