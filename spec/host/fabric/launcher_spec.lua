-- ibverbs.fabric.launcher (re-exported as fabric.detect, hostlist, first_host,
-- slurm_hosts): what each launcher's environment gives, Slurm host lists, and
-- init's refusal of a rank that is not one.
local fabric = require "ibverbs.fabric"
local fs = require "fabric_support"
local env, free_port = fs.env, fs.free_port

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

  it("takes blanks around the commas of a host list, outside and inside brackets, and none inside a name", function()
    assert.same({ "node1", "node2", "node3", "node4", "node7" }, fabric.hostlist("node[1-4], node7"))
    assert.same({ "node1", "node3", "gpu2" }, fabric.hostlist(" node[1, 3] ,\tgpu2 "))
    local hosts, err = fabric.hostlist("node1, node 7")
    assert.is_nil(hosts)
    assert.equal("a blank inside 'node 7' in the host list 'node1, node 7'", err)
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

end)

describe("ibverbs.fabric.hostname", function()
  it("takes Slurm's node name, else gethostname(2), else /proc/sys/kernel/hostname, never a program", function()
    assert.equal("node7", fabric.hostname(env{ SLURMD_NODENAME = "node7", PATH = "" }, function() return "x" end))
    assert.equal("gh", fabric.hostname(env{ PATH = "" }, function() return "gh" end))
    local file = os.tmpname()
    local fh = assert(io.open(file, "w"))
    fh:write("fromproc\n")
    fh:close()
    assert.equal("fromproc", fabric.hostname(env{}, function() return nil end, file))
    os.remove(file)
    assert.equal("?", fabric.hostname(env{}, function() return "" end, "/nonexistent/hostname"))
    -- this host, through luasocket's gethostname: what the kernel says
    local proc = assert(io.open("/proc/sys/kernel/hostname")):read("l")
    assert.equal(proc, fabric.hostname(env{}))
  end)

  it("names the host with an empty PATH: fabric.init spawns nothing", function()
    local p = io.popen("PATH= LUA_PATH='lua/?.lua;;' /usr/bin/" .. fs.LUA .. " -e 'print(require(\"ibverbs.fabric\")"
      .. ".init{ rank = 0, size = 1 }.host)' 2>&1")
    local out = p:read("a")
    p:close()
    assert.equal(assert(io.open("/proc/sys/kernel/hostname")):read("l") .. "\n", out)
  end)

  it("is never asked of a program: lua/ and examples/ run none through a shell, and none to name the host", function()
    local p = io.popen("grep -rnE 'io\\.popen|os\\.execute|uname|hostname -' lua examples --include='*.lua'")
    local found = {}
    for line in p:lines() do
      local file, text = line:match("^([^:]+):%d+:(.*)$")
      if not text:find("^%s*%-%-") then found[#found + 1] = file .. ": " .. text:gsub("^%s+", "") end
    end
    p:close()
    table.sort(found)
    assert.same({}, found) -- scontrol and gnuplot run through ibv.spawn (spec/host/project/no_shell_spec.lua)
  end)
end)
