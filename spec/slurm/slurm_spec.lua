-- Run on node 1 of `tools/rxe-vm --nodes 3 --slurm` (tools/run-tests): a real
-- Slurm 22.05 cluster of three soft-RoCE VMs (nodes node1..node3).  The
-- cluster recipes are read from docs/bringup.md and run as written; then
-- what a launcher does to a job: a heterogeneous step, ranks that start
-- seconds apart, scancel of a running matrix, node 3's slurmd stopped mid-job.
-- Each spec's time goes to .cache/slurm-times.log.
local support = require "support"
local dkjson = require "dkjson"
local socket = require "socket"

local HOSTS = { "node1", "node2", "node3" }
local TIMES = ".cache/slurm-times.log"

local RECIPES = "docs/bringup.md"

--- The ```sh block after "<!-- recipe: NAME -->" in docs/bringup.md.
local function recipe(name)
  local text = assert(support.slurp(RECIPES), RECIPES .. " not found (run from the checkout)")
  local block = text:match("<!%-%- recipe: " .. name:gsub("%-", "%%-") .. " %-%->\n```sh\n(.-)\n```")
  return assert(block, RECIPES .. " has no recipe " .. name)
end

local run = support.run_clean -- (no LUA_PATH: ibvlua needs none)

-- Nothing a run left on any node: no verbs context, MR or user QP (QP 1, the
-- kernel's own, is always there).
local function assert_nothing_left(out)
  local seen = {}
  for host, line in out:gmatch("(node%d) (%d+: rxe0: [^\n]*)") do
    seen[#seen + 1] = host
    assert.matches("ctx 0 ", line, host .. ": " .. line)
    assert.matches("mr 0 ", line, host .. ": " .. line)
    assert.matches("qp 1 ", line, host .. ": " .. line)
  end
  table.sort(seen)
  assert.same(HOSTS, seen, out)
end
local RDMA_LEFT = "srun -N 3 --ntasks-per-node=1 sh -c 'rdma resource show | sed \"s/^/$(hostname) /\"'"

local function assert_matrix(report, text)
  assert.is_true(report.pass, text)
  assert.equal(3, report.size)
  assert.same(HOSTS, report.hosts) -- the Slurm node names
  local first = {} -- (a pair noise flagged is measured again: its retest records follow, pass "retest")
  for _, p in ipairs(report.pairs) do if p.pass == "first" then first[#first + 1] = p end end
  assert.equal(6, #first)
  local seen = {}
  for _, p in ipairs(first) do
    assert.is_nil(p.error, dkjson.encode(p))
    assert.is_true(p.lat_us > 0 and p.write_mbs > 0 and p.send_mbs > 0, dkjson.encode(p))
    assert.is_true(p.data_ok)
    assert.equal(HOSTS[p.src + 1], p.src_host)
    assert.equal(HOSTS[p.dst + 1], p.dst_host)
    seen[p.src .. "-" .. p.dst] = true
  end
  for s = 0, 2 do for d = 0, 2 do if s ~= d then assert.is_true(seen[s .. "-" .. d], s .. "-" .. d) end end end
end

local function assert_check(out, root)
  assert.matches("fabric: 3 ranks %(slurm launcher%)", out)
  assert.matches("rank 0 %(" .. (root or "node1") .. "%)%s+rxe0 port 1: active", out)
  local n = 0
  for kind, counts in out:gmatch("\n  (%u%u) rank %d %(node%d%)%s+<%-> rank %d %(node%d%)%s+PASS([^\n]*)") do
    n = n + 1
    if kind == "UD" then assert.matches("^  10/10, 10/10", counts) end -- every datagram counted, none lost
  end
  assert.equal(6, n, out) -- 3 pairs x RC, UD
  assert.matches("UD: 60 of 60 datagrams arrived", out)
  assert.matches("fabric: 3 pairs x RC, UD; PASS", out)
end

local it = support.timed(it, TIMES) -- each case's time in TIMES

describe("a Slurm cluster of three soft-RoCE VMs", function()

  it("has node1 to node3 idle in one partition, the names resolving to the management addresses", function()
    local out, rc = run("sinfo -h -N -o '%N %t %P' && srun -N 3 --ntasks-per-node=1 sh -c " ..
      "'echo $(hostname) $SLURM_PROCID $(getent hosts node3)'", 60)
    assert.equal(0, rc, out)
    for k = 1, 3 do
      assert.matches("node" .. k .. " idle main%*", out)
      assert.matches("node" .. k .. " " .. (k - 1) .. " 198%.51%.100%.3%s+node3", out)
    end
  end)

  it("recipe srun-matrix: every ordered pair measured, the JSON's hosts are the node names", function()
    os.remove("/tmp/fabric.json")
    local out, rc = run(recipe("srun-matrix"), 240)
    assert.equal(0, rc, out)
    support.assert_matrix_pass(out, 6)
    local text = assert(support.slurp("/tmp/fabric.json"), "no /tmp/fabric.json on node 1: " .. out)
    local report = assert(dkjson.decode(text))
    assert_matrix(report, text)
    assert.equal("slurm", report.options.launcher)
  end)

  it("recipe srun-check: ports, MTU, RC and UD between every pair, with the datagram counts", function()
    local out, rc = run(recipe("srun-check"), 180)
    assert.equal(0, rc, out)
    assert_check(out)
    assert.matches("fabric: 3 ranks %(slurm launcher%); wire%-up: TCP\n", out) -- MpiDefault=none: no PMIx
  end)

  it("hosts named right with PATH=/usr/sbin:/sbin and no SLURMD_NODENAME: gethostname(2), no program", function()
    -- ibvlua by its absolute path; neither uname nor hostname on PATH, the node name from the kernel
    local out, rc = run("srun -N 3 --ntasks-per-node=1 /usr/bin/env -u SLURMD_NODENAME PATH=/usr/sbin:/sbin " ..
      support.ROOT .. "/build/lua5.4/ibvlua -e 'assert(not os.execute(\"uname -n\"), \"uname on PATH\")' " ..
      "examples/fabric_check.lua", 180)
    assert.equal(0, rc, out)
    assert_check(out)
    assert.not_matches("%(%?%)", out)
  end)

  it("recipe srun-pmix: the same under Slurm's PMIx plugin, wired up through PMIx (Debian's libpmix 4.2)", function()
    local out, rc = run(recipe("srun-pmix"), 180)
    assert.equal(0, rc, out)
    assert_check(out)
    assert.matches("fabric: 3 ranks %(slurm launcher%); wire%-up: PMIx 4%.2%.%d+\n", out)
  end)

  -- rank 2 dies after the rendezvous, before an allgather: Slurm goes on with the step (no KillOnBadExit), and its
  -- PMIx plugin would fail the allgather's collecting fence only at PMIxTimeout (300 s); the fence gives up 5 s
  -- before the allgather's limit and the same allgather over TCP names rank 2 (its connection to rank 0 closed)
  it("srun --mpi=pmix, rank 2 killed before an allgather's fence: ranks 0 and 1 end within its limit, naming "
    .. "rank 2 (node3)", function()
    local out, rc, took = run("srun --mpi=pmix -N 3 --ntasks-per-node=1 build/lua5.4/ibvlua -e \"" ..
      "local f = assert(require([[ibverbs.fabric]]).init{ timeout = 10 }) if f.rank == 2 then os.exit(9) end " ..
      "local t0 = require([[socket]]).gettime() local all, err = f:allgather(f.rank) " ..
      "print(f.rank, f.wireup, all, err, require([[socket]]).gettime() - t0)\"", 120)
    assert.is_true(rc ~= 0 and rc ~= 124, out)
    assert.matches("node3: task 2: Exited with exit code 9", out)
    if out:find("CANCELLED", 1, true) then -- Slurm ended the step itself as rank 2 died (1 run in 8 here)
      assert.matches("node1: task 0: Killed", out)
    else
      for r = 0, 1 do
        local line = out:match("\n?(" .. r .. "\tPMIx 4%.2%.%d+\tnil\t[^\n]*)") or ""
        assert.matches("\trank 2 %(node3%) left the fabric during allgather %(connection closed%)\t", line, out)
        assert.is_true(tonumber(line:match("\t([%d.]+)$")) < 10 + 2, out) -- the allgather's limit
      end
    end
    assert.is_true(took < 10 + 20, took)
  end)

  it("recipe mpirun: mpirun inside an allocation, ranks and rank 0's address from mpirun's PMIx, not from its "
    .. "daemons' srun step", function()
    local out, rc = run("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; " .. recipe("mpirun"), 240)
    assert.equal(0, rc, out)
    support.assert_matrix_pass(out, 6)
    -- mpirun serves PMIx: rank 0's address came from it (the recipe names no IBV_FABRIC_ROOT)
    assert.matches("fabric_matrix: 3 ranks, [^\n]*; wire%-up: PMIx 4%.2%.%d+\n", out)
  end)

  it("recipe sbatch: sbcast the one file ibvlua to /tmp, run its tools on nodes with no Lua of any kind", function()
    assert.equal(support.slurp("examples/fabric.sbatch"),
      assert(support.slurp(RECIPES):match("<!%-%- file: examples/fabric%.sbatch %-%->\n```sh\n(.-\n)```")),
      RECIPES .. "'s copy of examples/fabric.sbatch differs from the file")
    -- /dev/null over the interpreters: not executable, so not on PATH (lua -> lua5.4 too); an
    -- empty tmpfs over the system's Lua modules (luasocket, argparse, dkjson, lua-luv: the
    -- host's default paths search them).  This node's busted has loaded what it needs.
    local LUA_DIRS = "/usr/share/lua /usr/lib/x86_64-linux-gnu/lua"
    local hide = "srun -N 3 --ntasks-per-node=1 sh -c 'mount --bind /dev/null /usr/bin/lua5.4 && " ..
      "mount --bind /dev/null /usr/bin/luajit && for d in " .. LUA_DIRS .. "; do mount -t tmpfs none $d; done && " ..
      "! command -v lua5.4 lua luajit && ! test -e /usr/share/lua/5.4/socket.lua && " ..
      "! test -e /usr/lib/x86_64-linux-gnu/lua/5.4/socket/core.so'"
    local unhide = "srun -N 3 --ntasks-per-node=1 umount /usr/bin/lua5.4 /usr/bin/luajit " .. LUA_DIRS
    local out, rc = run(hide, 60)
    local ok, err = pcall(function()
      assert.equal(0, rc, "hiding Lua: " .. out)
      os.execute("rm -f /tmp/fabric-*.out")
      out, rc = run(recipe("sbatch"), 300)
      assert.equal(0, rc, out .. (support.slurp(out:match("Submitted batch job (%d+)") and
        "/tmp/fabric-" .. out:match("Submitted batch job (%d+)") .. ".out" or "/nonexistent") or ""))
      local job = assert(out:match("Submitted batch job (%d+)"), out)
      local log = assert(support.slurp("/tmp/fabric-" .. job .. ".out"), "no job output")
      assert.matches("rank 0 %(node1%)", log, log)
      assert_check(log)
      support.assert_matrix_pass(log, 6)
      assert.not_matches("lua5%.4", log)
    end)
    run(unhide, 60)
    assert(ok, err)
  end)

  it("a heterogeneous step whose component 0 is on node3 meets at node3", function()
    local ibvlua = "build/lua5.4/ibvlua examples/fabric_check.lua"
    local out, rc = run("srun -w node3 -N 1 -n 1 " .. ibvlua .. " : -w node[1-2] -N 2 -n 2 " .. ibvlua, 180)
    assert.equal(0, rc, out)
    assert.matches("fabric: 3 ranks %(slurm launcher%)", out)
    assert.matches("rank 0 %(node3%)%s+rxe0 port 1: active", out)
    assert.matches("fabric: 3 pairs x RC, UD; PASS", out)
  end)

  it("ranks that start 0, 4 and 8 s apart still meet and pass", function()
    local out, rc, took = run("srun -N 3 --ntasks-per-node=1 sh -c 'sleep $((SLURM_PROCID * 4)); " ..
      "exec build/lua5.4/ibvlua examples/fabric_check.lua'", 180)
    assert.equal(0, rc, out)
    assert.is_true(took >= 8, took)
    assert_check(out)
  end)

  it("a rank later than the rendezvous limit: every rank ends in time, naming rank 2 and node3", function()
    local out, rc, took = run("srun -N 3 --ntasks-per-node=1 sh -c 'sleep $((SLURM_PROCID / 2 * 12)); " ..
      "exec build/lua5.4/ibvlua examples/fabric_check.lua --fabric-timeout 5'", 120)
    assert.equal(2, rc, out) -- no rendezvous: the run could not be made, on every rank
    assert.is_true(took < 60, took)
    assert.matches("rank 2 %(node3%) did not arrive at the rendezvous", out)
    local out2, rc2 = run(RDMA_LEFT, 60)
    assert.equal(0, rc2, out2)
    assert_nothing_left(out2)
  end)

  it("scancel of a running fabric_matrix ends every rank within KillWait, nothing left on the devices", function()
    local h = support.spawn("env -u LUA_PATH -u LUA_CPATH srun -N 3 --ntasks-per-node=1 -J cancelme " ..
      "build/lua5.4/ibvlua examples/fabric_matrix.lua -n 100000")
    local deadline, running = socket.gettime() + 60
    repeat -- the ranks are measuring a few seconds after the job started
      socket.sleep(1)
      local p = io.popen("squeue -h -n cancelme -t R -o %M")
      local m, sec = (p:read("l") or ""):match("^(%d+):(%d+)$")
      p:close()
      running = m and 60 * m + sec or 0
    until running >= 6 or socket.gettime() > deadline
    assert.is_true(running >= 6, "the job did not run")
    local cancelled = socket.gettime()
    assert.is_true(support.sh("scancel -n cancelme"))
    local out, rc = h:wait(60)
    local took = socket.gettime() - cancelled
    assert.is_not_nil(rc, "srun still running 60 s after scancel: " .. out)
    assert.is_true(rc ~= 0, out)
    assert.is_true(took < 20, took)
    assert.matches("CANCELLED", out)
    local out2, rc2 = run(RDMA_LEFT, 60)
    assert.equal(0, rc2, out2)
    assert_nothing_left(out2)
  end)

  -- last: node 3 stays without slurmd.  Slurm declares the node failed after
  -- SlurmdTimeout (30 s) and cancels the step; the rank on node3, which Slurm
  -- can no longer reach, ends by itself once its peers are gone.  It writes
  -- its output into the (shared) checkout.  -t 10 bounds what that rank waits
  -- for once its partner is gone (a ping-pong: 10 s; with the default 30 s it
  -- ended 42 s after srun); --retests 3 keeps the matrix running past Slurm's
  -- cancel (every ping-pong of -n 100000 runs into -t under emulation, so
  -- each pair is retested 3 times).
  it("node3's slurmd stopped mid-matrix: the step ends naming node3, every rank ends, nothing left", function()
    local log = ".cache/slurm-stopped-node3.log"
    os.remove(log)
    local out, rc, took = run("srun -N 3 --ntasks-per-node=1 sh -c '" ..
      "if [ $SLURM_PROCID = 2 ]; then (sleep 4; kill $(cat /run/slurm/slurmd.pid)) & exec >" .. log .. " 2>&1; fi; " ..
      "build/lua5.4/ibvlua examples/fabric_matrix.lua -n 100000 -t 10 --retests 3; echo \"exit $?\"; " ..
      "rdma resource show | sed \"s/^/$(hostname) /\"'", 180)
    assert.is_true(rc ~= 0 and rc ~= 124, out)
    assert.is_true(took < 120, took)
    assert.matches("Node failure on node3", out)
    assert.matches("CANCELLED .* DUE TO NODE FAILURE", out)
    local t_log, deadline, text = socket.gettime(), socket.gettime() + 90
    repeat
      socket.sleep(1)
      text = support.slurp(log) or ""
    until text:find("rxe0: ") or socket.gettime() > deadline
    t_log = socket.gettime() - t_log
    assert.matches("fabric_matrix %(rank 2 %(node3%)%): .*rank 0", text)
    assert.matches("exit 1", text)
    local left, lrc, t_left = run("srun -N 2 -w node[1-2] --ntasks-per-node=1 sh -c 'rdma resource show | " ..
      "sed \"s/^/$(hostname) /\"'", 60)
    print(string.format("slurmd stopped: srun %.1f s, node3's log %.1f s after, the last srun %.1f s", took, t_log,
      t_left))
    assert.equal(0, lrc, left)
    assert_nothing_left(left .. (text:match("node3 %d+: rxe0: [^\n]*") or ""))
  end)
end)
