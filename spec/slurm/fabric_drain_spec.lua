-- Run on node 1 of `tools/rxe-vm --nodes 3 --slurm` (with slurm_spec.lua):
-- fabric_check.lua telling a real Slurm 22.05 about the nodes it finds at
-- fault.  Node 3's fabric link (eth0; Slurm talks over eth1) is taken down
-- by a helper that brings it back once a marker file in the shared checkout
-- is gone.  Under srun, --drain drains node 3 alone, with the reason in
-- sinfo -R and scontrol show node; under Open MPI's mpirun inside an
-- allocation (its daemons started with srun, the ranks wired up through its
-- PMIx), the same fault: rank 2 (node3) alone at fault, exit 1 there alone,
-- node 3 drained.  As Slurm's HealthCheckProgram
-- (examples/fabric-health.sh, every 10 s on every node: the cluster was
-- booted with `tools/rxe-vm --slurm-health <this checkout>/.cache/slurm-health-check`,
-- which tools/run-tests passes), it drains node 3 while the link is down,
-- resumes it once the link is back, and leaves node 2, drained by someone
-- else, alone.  Between the two, fabric_matrix.lua --drain (rank 0 for
-- every node) drains node 3, leaves node 2's drain and resumes node 1,
-- drained as if by an earlier matrix run.  Then who may undo a drain: an
-- admin's DOWN node 2 (its fabric link down too) stays DOWN with the admin's
-- reason through a matrix run and health checks; a node fabric_matrix
-- drained is not resumed by the health check once its link is back; a node
-- the health check drained is not resumed by a matrix run it passes.  The
-- health check runs under LuaJIT's ibvlua, the srun and mpirun steps under Lua 5.4's:
-- each tool's drains are judged by the other interpreter's.  The
-- cluster is left as found: every node idle, the health check off
-- (HEALTH_ON gone: the program exits 0 at once).
local support = require "support"
local socket = require "socket"

local ROOT = support.ROOT
local CACHE = ROOT .. "/.cache"
local MARK = CACHE .. "/slurm-node3-link-down" -- node 3's eth0 stays down while this exists
local MARK2 = CACHE .. "/slurm-node2-link-down" -- node 2's, likewise
local HEALTH_ON = CACHE .. "/slurm-health-on" -- the health check runs only while this exists
local TIMES = ".cache/slurm-times.log"

local run = support.run_clean -- (no LUA_PATH: ibvlua needs none)

local function write(path, text, mode)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
  if mode then assert(support.sh("chmod " .. mode .. " " .. path)) end
end

-- Node 3's eth0 down now and up again once MARK is gone (within 1 s; after 10 min at
-- most), from a process outside the job step (setsid: the step's end does not kill it),
-- which looks once a second: each look is a fork and exec, dear under the emulator.
local LINK_DOWN = CACHE .. "/slurm-link-down.sh"
write(LINK_DOWN, [[#!/bin/sh
mark=$1
ip link set eth0 down
setsid sh -c "n=0; while [ -e '$mark' ] && [ \$n -lt 600 ]; do sleep 1; n=\$((n + 1)); done; ip link set eth0 up" \
  </dev/null >/dev/null 2>&1 &
for i in $(seq 100); do grep -q DOWN /sys/class/infiniband/rxe0/ports/1/state && exit 0; sleep 0.1; done
echo "rxe0 port 1 did not go down: $(cat /sys/class/infiniband/rxe0/ports/1/state)"
exit 1
]], "755")

-- fabric_matrix.lua --drain in an allocation of the three nodes (a drained node takes no new job, but its
-- allocation's steps run): node2 drained by hand, node1 drained as an earlier matrix run leaves a node,
-- then the matrix (node3's link still down); its exit status printed.
local MATRIX_DRAIN = CACHE .. "/slurm-matrix-drain.sh"
write(MATRIX_DRAIN, [[#!/bin/sh
scontrol update NodeName=node2 State=DRAIN Reason='maintenance: cable swap' &&
  scontrol update NodeName=node1 State=DRAIN Reason='ibverbs fabric_matrix [rxe0:1]: node rxe0:1: an earlier run' ||
  exit 3
srun --ntasks-per-node=1 build/lua5.4/ibvlua examples/fabric_matrix.lua -n 20 -N 8 -S 4096 --reference median \
  --lat-factor 20 --bw-fraction 0.05 -t 5 --drain
echo "matrix: exit $?"
]], "755")

-- The HealthCheckProgram (tools/rxe-vm --slurm-health names it; it may be missing until written here):
-- examples/fabric-health.sh with this checkout's ibvlua (its built-in fabric_check), while HEALTH_ON exists;
-- each run's output, exit status and time go to .cache/slurm-health-<node>.log, with the time of one more
-- `scontrol show node` (the part of a run that is Slurm's).
local HEALTH = CACHE .. "/slurm-health-check"
write(HEALTH, string.format([[#!/bin/sh
[ -e %s ] || exit 0
PATH=/usr/sbin:/usr/bin:/sbin:/bin
log=%s/slurm-health-${SLURMD_NODENAME:-unknown}.log
start=$(date +%%s%%N)
IBVLUA=%s/build/luajit/ibvlua %s/examples/fabric-health.sh >>"$log" 2>&1
rc=$?
echo "health rc=$rc ms=$(( ($(date +%%s%%N) - start) / 1000000 )) SLURMD_NODENAME=$SLURMD_NODENAME" >>"$log"
start=$(date +%%s%%N)
scontrol show node "$SLURMD_NODENAME" >/dev/null 2>&1
echo "scontrol show node ms=$(( ($(date +%%s%%N) - start) / 1000000 ))" >>"$log"
exit $rc
]], HEALTH_ON, CACHE, ROOT, ROOT), "755")

local function node_line(node)
  local out = run("scontrol show node " .. node, 30)
  return out:match("State=(%S+)"), out:match("\n%s*Reason=([^\n]*)")
end

-- Waits up to limit s until pred(state, reason) of node holds; returns the state and reason.
local function wait_node(node, pred, limit)
  local deadline, state, reason = socket.gettime() + (limit or 60)
  repeat
    state, reason = node_line(node)
    if pred(state or "", reason) then return state, reason end
    socket.sleep(0.5)
  until socket.gettime() > deadline
  return state, reason
end

-- The health checks' run times on every node, printed (for docs/bringup.md); none may reach slurmd's
-- limit of 60 s (22.05 kills a health check then).
local function print_times()
  for k = 1, 3 do
    local times = {}
    local log = support.slurp(CACHE .. "/slurm-health-node" .. k .. ".log") or ""
    for ms in log:gmatch("health rc=%d+ ms=(%d+)") do times[#times + 1] = tonumber(ms) end
    table.sort(times)
    assert.is_true(#times > 0, "no health check ran on node" .. k)
    local sc = {}
    for ms in log:gmatch("scontrol show node ms=(%d+)") do sc[#sc + 1] = tonumber(ms) end
    table.sort(sc)
    print(string.format("node%d: %d health checks, %d to %d ms (median %d); scontrol show node %d to %d ms", k,
      #times, times[1], times[#times], times[math.floor((#times + 1) / 2)], sc[1] or -1, sc[#sc] or -1))
    assert.is_true(times[#times] < 60000, "a health check took " .. times[#times] .. " ms")
  end
end

-- Waits up to limit s until node's health log matches pat (the wrapper writes its line once the
-- check has ended, after Slurm already shows what the check did); returns the log.
local function wait_log(node, pat, limit)
  local deadline, log = socket.gettime() + (limit or 60)
  repeat
    log = support.slurp(CACHE .. "/slurm-health-" .. node .. ".log") or ""
    if log:find(pat) then return log end
    socket.sleep(0.5)
  until socket.gettime() > deadline
  return log
end

local it = support.timed(it, TIMES) -- each case's time in TIMES

describe("fabric_check.lua and Slurm on three soft-RoCE VMs", function()
  setup(function()
    os.remove(MARK)
    os.remove(HEALTH_ON)
    for k = 1, 3 do os.remove(CACHE .. "/slurm-health-node" .. k .. ".log") end
  end)

  teardown(function()
    os.remove(HEALTH_ON)
    os.remove(MARK)
    os.remove(MARK2)
    for _, node in ipairs({ "node1", "node2", "node3" }) do
      run("scontrol update NodeName=" .. node .. " State=RESUME", 30)
    end
    wait_node("node3", function(s) return s == "IDLE" end, 60)
  end)

  it("srun --mpi=pmix ... --drain: node3's fabric link down: the rank on node3 drains node3 alone, with its reason",
    function()
    write(MARK, "")
    local out, rc = run("srun -w node3 -N 1 " .. LINK_DOWN .. " " .. MARK, 60)
    assert.equal(0, rc, out)
    -- under Slurm's PMIx plugin: the ports' summaries and QP numbers go through PMIx (put, commit, fence, get)
    out, rc = run("srun --mpi=pmix -N 3 --ntasks-per-node=1 build/lua5.4/ibvlua examples/fabric_check.lua --drain", 180)
    assert.equal(1, rc, out) -- srun: the worst rank's
    assert.matches("; wire%-up: PMIx 4%.2%.%d+\n", out)
    assert.matches("FAULT rank 2 %(node3%): port_state: port is down", out)
    assert.matches("nodes at fault %(exit 1%): rank 2 %(node3%)\n", out)
    assert.matches("slurm: node3 drained: ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]*\n",
      out)
    assert.not_matches("slurm: node[12]", out)
    local sinfo = run("sinfo -R -h -o '%N|%E'", 30)
    assert.matches("node3|ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]*\n", sinfo)
    assert.not_matches("node[12]|", sinfo)
    local state, reason = node_line("node3")
    assert.matches("DRAIN", state)
    assert.matches("^ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]* %[", reason)
    for _, node in ipairs({ "node1", "node2" }) do assert.equal("IDLE", (node_line(node))) end
  end)

  -- The same fault found by Open MPI's mpirun inside an allocation (it starts its daemons with srun and serves
  -- PMIx to its ranks).  Each rank's exit status printed: mpirun's own would be the first non-zero one, and by
  -- default (orte_abort_on_non_zero_status, Open MPI 4.1) it ends the other ranks when one exits non-zero.
  -- --drain leaves node3 as the case above did (drained by fabric_check, its link still down) for the next case.
  it("salloc mpirun ... --drain: node3's fabric link down: found through mpirun's PMIx, rank 2 (node3) alone at "
    .. "fault and drained", function()
    -- node3's link is still down, and node3 drained, from the case above: resumed, so that salloc may have it
    local out, rc = run("scontrol update NodeName=node3 State=RESUME", 30)
    assert.equal(0, rc, out)
    out, rc = run("export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; salloc -N 3 mpirun --map-by "
      .. "ppr:1:node --mca orte_abort_on_non_zero_status 0 sh -c 'build/lua5.4/ibvlua examples/fabric_check.lua "
      .. "--drain; echo \"rank $OMPI_COMM_WORLD_RANK exit $?\"'", 120)
    assert.equal(0, rc, out)
    assert.matches("fabric: 3 ranks %(openmpi launcher%); wire%-up: PMIx 4%.2%.%d+\n", out)
    assert.matches("FAULT rank 2 %(node3%): port_state: port is down", out)
    assert.matches("nodes at fault %(exit 1%): rank 2 %(node3%)\n", out)
    for r = 0, 2 do assert.matches("rank " .. r .. " exit " .. (r == 2 and 1 or 0) .. "\n", out) end
    assert.matches("slurm: node3 drained: ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]*\n",
      out)
    assert.not_matches("slurm: node[12]", out)
    local state, reason = node_line("node3")
    assert.matches("DRAIN", state)
    assert.matches("^ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]* %[", reason)
    for _, node in ipairs({ "node1", "node2" }) do -- (COMPLETING for a moment once salloc ended)
      assert.equal("IDLE", (wait_node(node, function(st) return st == "IDLE" end, 30)), node)
    end
  end)

  it("fabric_matrix --drain: drains node3 (link down), leaves node2 (drained by hand), resumes node1 (its own, rxe0:1 "
    .. "measured)", function()
    -- node3's link is still down, and node3 drained, from the case above: resumed, so that salloc may have it
    local out, rc = run("scontrol update NodeName=node3 State=RESUME", 30)
    assert.equal(0, rc, out)
    out, rc = run("salloc -N 3 " .. MATRIX_DRAIN, 120)
    assert.equal(0, rc, out)
    assert.matches("VERDICT node: rank 2 %(node3%) rxe0:1: rxe0 port 1 is down\n", out)
    assert.matches("\nslurm: node3 drained: ibverbs fabric_matrix %[rxe0:1%]: node rxe0:1: rxe0 port 1 is down\n", out)
    assert.matches("\nslurm: node2 left alone: drained by someone else %(Reason=maintenance: cable swap%)\n", out)
    assert.matches("\nslurm: node1 resumed %(was: ibverbs fabric_matrix %[rxe0:1%]: node rxe0:1: an earlier run%)\n",
      out)
    assert.matches("matrix: exit 1\n", out) -- srun: the worst rank's (node3's)
    local sinfo = run("sinfo -R -h -o '%N|%E'", 30)
    assert.matches("node3|ibverbs fabric_matrix %[rxe0:1%]: node rxe0:1: rxe0 port 1 is down\n", sinfo)
    assert.matches("node2|maintenance: cable swap\n", sinfo)
    assert.not_matches("node1|", sinfo)
  end)

  it("HealthCheckProgram: drains node3 while its link is down, resumes it once back; node2's drain stays", function()
    -- node3 is still drained by the matrix above: resume it by hand, so that the health check is what drains it
    local out, rc = run("scontrol update NodeName=node3 State=RESUME && " ..
      "scontrol update NodeName=node2 State=DRAIN Reason='maintenance: cable swap'", 30)
    assert.equal(0, rc, out)
    -- (IDLE+NOT_RESPONDING for a while when slurmd on node3 is slow to answer: a loaded host)
    assert.equal("IDLE", (wait_node("node3", function(st) return st == "IDLE" end, 60)))
    -- the health check is tools/rxe-vm --slurm-health's, in slurm.conf since the boot
    local conf = run("scontrol show config", 30)
    assert.matches("\nHealthCheckProgram%s*=%s*" .. HEALTH:gsub("%p", "%%%0") .. "\n", conf,
      "slurm.conf has not this health check: boot with tools/rxe-vm --slurm-health " .. HEALTH)
    assert.matches("\nHealthCheckInterval%s*=%s*10 sec", conf)
    assert.matches("\nHealthCheckNodeState%s*=%s*ANY", conf)
    write(HEALTH_ON, "")
    local state, reason = wait_node("node3", function(s) return s:find("DRAIN") end, 60)
    assert.matches("DRAIN", state, "node3 not drained by the health check")
    assert.matches("^ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]* %[", reason)
    local log3 = wait_log("node3", "health rc=1 ")
    assert.matches("slurm%-health node3: FAIL in %d+ ms; rxe0:1 port_state: port is down[^\n]*\n", log3)
    assert.matches("slurm: node3 drained: ibverbs fabric_check %[rxe0:1%]: rxe0:1 port_state: port is down[^\n]*\n",
      log3)
    assert.matches("health rc=1 ms=%d+ SLURMD_NODENAME=node3", log3)
    -- the link back: the next health check on node3 passes and resumes it
    os.remove(MARK)
    state = wait_node("node3", function(s) return s == "IDLE" end, 90)
    assert.equal("IDLE", state, support.slurp(CACHE .. "/slurm-health-node3.log"))
    log3 = wait_log("node3", "resumed.-health rc=0 ")
    -- (a check that ran while the link came back also saw it flap, and drained node3 again with both)
    assert.matches("slurm: node3 resumed %(was: ibverbs fabric_check %[rxe0:1%]: [^\n]-rxe0:1 port_state: port is "
      .. "down[^\n]*%)\n", log3)
    assert.matches("health rc=0 ms=%d+ SLURMD_NODENAME=node3", log3)
    -- node2 passed every health check meanwhile, and stays drained with someone else's reason
    local log2 = support.slurp(CACHE .. "/slurm-health-node2.log") or ""
    assert.matches("health rc=0 ms=%d+ SLURMD_NODENAME=node2", log2)
    assert.matches("slurm: node2 left alone: drained by someone else %(Reason=maintenance: cable swap%)", log2)
    state, reason = node_line("node2")
    assert.matches("DRAIN", state)
    assert.matches("^maintenance: cable swap", reason)
    os.remove(HEALTH_ON)
    print_times()
  end)

  -- The cases below: written for the three VMs, not yet run there.

  -- Every link up, the health check off (and the checks under way over), every node resumed: a case's start.
  local function reset()
    os.remove(HEALTH_ON)
    os.remove(MARK)
    os.remove(MARK2)
    socket.sleep(10) -- a health check already running ends (3 to 8.5 s), the links come back (1 s)
    for _, node in ipairs({ "node1", "node2", "node3" }) do
      run("scontrol update NodeName=" .. node .. " State=RESUME", 30) -- (an error for a node not drained)
      assert.equal("IDLE", (wait_node(node, function(st) return st == "IDLE" end, 60)), node)
    end
  end
  local MATRIX = "srun --ntasks-per-node=1 build/lua5.4/ibvlua examples/fabric_matrix.lua -n 20 -N 8 -S 4096 "
    .. "--reference median --lat-factor 20 --bw-fraction 0.05 -t 5 --drain"

  it("no false DRAIN: node2 set DOWN by an admin, its link down, stays DOWN with the admin's reason", function()
    reset()
    write(MARK, "")
    write(MARK2, "")
    for node, mark in pairs({ node2 = MARK2, node3 = MARK }) do
      local out, rc = run("srun -w " .. node .. " -N 1 " .. LINK_DOWN .. " " .. mark, 60)
      assert.equal(0, rc, out)
    end
    local out, rc = run("scontrol update NodeName=node2 State=DOWN Reason='admin: psu'", 30)
    assert.equal(0, rc, out)
    -- the matrix beside it (node2 DOWN takes no job: node1 and node3), then the health checks
    out = run("salloc -w node1,node3 -N 2 " .. MATRIX, 120)
    assert.matches("\nslurm: node3 drained: ibverbs fabric_matrix %[rxe0:1%]: node rxe0:1: ", out)
    assert.not_matches("node2", out)
    os.remove(CACHE .. "/slurm-health-node2.log")
    write(HEALTH_ON, "") -- (HealthCheckNodeState=ANY: slurmd on node2 runs it though node2 is DOWN)
    -- (the test cluster runs ReturnToService=1: a node an admin set DOWN stays DOWN when its slurmd registers)
    local log2 = wait_log("node2", "health rc=1 ")
    assert.matches("slurm%-health node2: FAIL in %d+ ms; rxe0:1 port_state: port is down[^\n]*\n", log2)
    assert.matches("\nslurm: node2 left alone: DOWN %(Reason=admin: psu%)\n", log2)
    assert.not_matches("slurm: node2 drained", log2)
    local state, reason = node_line("node2")
    assert.equal("DOWN", state)
    assert.matches("^admin: psu %[", reason)
    os.remove(HEALTH_ON)
  end)

  it("no false RESUME: the health check does not resume node3, drained by fabric_matrix, once its link is back",
    function()
      reset()
      write(MARK, "")
      local out, rc = run("srun -w node3 -N 1 " .. LINK_DOWN .. " " .. MARK, 60)
      assert.equal(0, rc, out)
      out = run("salloc -N 3 " .. MATRIX, 120)
      local drained = "ibverbs fabric_matrix %[rxe0:1%]: node rxe0:1: rxe0 port 1 is down"
      assert.matches("\nslurm: node3 drained: " .. drained .. "\n", out)
      os.remove(MARK) -- node3 healthy again: its loopback passes
      os.remove(CACHE .. "/slurm-health-node3.log")
      write(HEALTH_ON, "")
      local log3 = wait_log("node3", "health rc=0 ")
      assert.matches("\nslurm: node3 left alone: drained by fabric_matrix, which alone resumes it %(Reason="
        .. drained .. "%)\n", log3)
      assert.not_matches("resumed", log3)
      local state, reason = node_line("node3")
      assert.matches("DRAIN", state)
      assert.matches("^" .. drained .. " %[", reason)
      os.remove(HEALTH_ON)
    end)

  it("no false RESUME: fabric_matrix does not resume node3, drained by the health check, though it measured rxe0:1",
    function()
      reset()
      -- node3 drained as the health check drains it for rxe0:1 (the case above shows that reason), inside the
      -- allocation (a drained node takes no new job); every link up: node3 passes the matrix
      local why = "ibverbs fabric_check [rxe0:1]: rxe0:1 port_state: port is down; no active port on this node"
      local out = run("salloc -N 3 sh -c \"scontrol update NodeName=node3 State=DRAIN Reason='" .. why .. "' && "
        .. MATRIX .. "; echo matrix: exit \\$?\"", 120)
      assert.matches("matrix: exit 0\n", out)
      assert.matches("\nslurm: node3 left alone: drained by fabric_check, which alone resumes it %(Reason="
        .. why:gsub("%p", "%%%0") .. "%)\n", out)
      assert.not_matches("resumed", out)
      local state, reason = node_line("node3")
      assert.matches("DRAIN", state)
      assert.matches("^" .. why:gsub("%p", "%%%0") .. " %[", reason)
    end)
end)
