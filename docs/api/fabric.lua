--- Ranks, rendezvous and collectives for scripts that run on many hosts at once (one process per
-- host or device), started by the launcher the cluster already has.
--
--     local fabric = require "ibverbs.fabric"
--     local f = assert(fabric.init())                 -- srun, mpirun, tools/rxe-vm --nodes, or options
--     local info = assert(f:alltoall(per_peer))       -- per_peer[r + 1] goes to rank r
--     assert(f:barrier())
--
-- Rank and size come from, in this order: `rank`/`size` options; `IBV_FABRIC_RANK`/`IBV_FABRIC_SIZE`;
-- Open MPI (`OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE`); PMI (`PMI_RANK`, `PMI_SIZE`: MPICH, Intel
-- MPI, `srun --mpi=pmi2`); Slurm (`SLURM_PROCID`, `SLURM_NTASKS`); `tools/rxe-vm --nodes`
-- (`RXE_VM_NODE`, `RXE_VM_NODES`); else one rank.  mpirun's variables come before Slurm's because
-- mpirun inside an allocation starts its daemons with srun, whose step variables its processes see
-- too.  Rank 0 listens on TCP port `port` when the user gives one (`IBV_FABRIC_PORT`, or `root` as
-- "host:port"); else under PMIx on a port the kernel picks, put through PMIx; else under Slurm on the
-- step's reserved ports (`SLURM_STEP_RESV_PORTS`) or on 8 candidates every rank derives from the
-- job and step ids (the first free one; ranks try each until the one whose challenge names their
-- run); else on 18600.  The others connect to
-- `root` (`IBV_FABRIC_ROOT`, "host" or "host:port"), which defaults to the first node of the Slurm
-- step (`SLURM_STEP_NODELIST`; in a heterogeneous step, the first node of component 0), to
-- 127.0.0.1 when Open MPI or PMI put every rank on one host, and to node 1's management address
-- under rxe-vm.  Under Slurm a rank is named by the node the step put it on before it arrives.
--
-- Every collective goes through rank 0 (route past `fabric.TREE_MIN` ranks through relays, below)
-- and carries Lua values (nil, booleans, numbers, strings, tables of them) serialised with dkjson
-- (numbers exact, under LuaJIT too; route's strings in frames made by hand).  Ranks are 0-based; the
-- lists the collectives return are indexed rank + 1.  Every call has a time limit (`timeout`,
-- `IBV_FABRIC_TIMEOUT`, default 60 s): a rank that does not arrive in time is named in the error
-- ("rank 2 (node3) did not arrive at barrier #4 within 60 s"), the ranks that did arrive get the same
-- error, and nobody waits forever.  Failures return `nil, message`; after one the group is broken and
-- every later call returns the same message; a tolerant group (`tolerant = true`) instead buries a
-- rank that leaves or misses a limit, names it in `dead_ranks()` on every rank and goes on without it.
--
-- Every listener (rank 0's, each relay's) challenges a connection with a fresh nonce; its hello
-- proves it belongs to the run: an HMAC-SHA256 under a key the user gives every rank
-- (`IBV_FABRIC_KEY_FILE`, `IBV_FABRIC_KEY`, opts `key`; at least 16 bytes), else under a secret rank 0
-- puts through PMIx, else (Slurm without PMIx) a munge credential binding the user, the job and
-- step, the rank and the nonce; rank 0 proves itself back to each rank the same way.  Where none of
-- these is there the rendezvous is not authenticated, and `fabric_group:door` says so.  A
-- connection that is not a rank of this run (no frame, a frame over 16 KiB before its hello, another
-- fabric's hello, no or a wrong proof, a rank out of range or taken, silence past 5 s) is dropped
-- and named, never the rendezvous' failure.
--
-- Rank 0 waits on its connections through libuv's epoll (lua-luv), each registered once: no
-- FD_SETSIZE limit, one visit per rank and collective; it listens with a backlog of 4096 and needs a
-- descriptor per rank (`ulimit -n`).  Without lua-luv it falls back to `socket.select`, and refuses
-- a group of more than 1000 ranks at init.
--
-- Past `fabric.TREE_MIN` (64) ranks, or with `group = k` (`IBV_FABRIC_GROUP`; 0: the star),
-- `fabric_group:route` runs over a relay tree: rank 0 alone, the other ranks in groups of k (default
-- about sqrt(size)), the first of each its relay; members send to their relay, a relay sends the
-- messages for another group to that group's relay (the relays' mesh) and rank 0 one bundle (rank
-- 0's messages and the ups, reduced with route's reduce).  Rank 0 relays no group: it handles about
-- sqrt(size) frames each way per route instead of size.  In a
-- tolerant group a relay that dies or misses its limit is buried alone: its members send to rank 0
-- from then on.  The other collectives stay on the star.
--
-- Under a PMIx server (`srun --mpi=pmix`, Open MPI's `mpirun`) the wire-up goes through PMIx
-- (`ibverbs.pmix`, libpmix opened at run time): rank, size, local rank and host names come from
-- the job's data, rank 0's address from its put, the rendezvous is a fence, and `allgather` and
-- `alltoall` of a group that is not tolerant are put, commit, a collecting fence and get.  A fence
-- gives up 5 s (at most half the limit) before the call's limit; the TCP rendezvous, or the same
-- collective over TCP, then names the ranks that did not arrive (the group stays on TCP after).
-- The other collectives and `route` stay on the TCP connections to rank 0.  Chosen by
-- `wireup` (`IBV_FABRIC_WIREUP`): "auto" (PMIx when `PMIX_RANK` is set, no rank or size was given
-- and libpmix loads and initialises; else TCP, `fabric_group.wireup_note` saying why), "pmix"
-- (fail without it) or "tcp".
--
-- @module ibverbs.fabric

local fabric = {}

--- The rendezvous port when neither the user, PMIx nor Slurm gives one (18600).
fabric.DEFAULT_PORT = 18600
--- The default time limit in seconds (60).
fabric.DEFAULT_TIMEOUT = 60
--- The size from which route runs over the relay tree (64).
fabric.TREE_MIN = 64
--- Seconds between a group's `on_wait` calls while a collective waits (60).
fabric.WAIT_EVERY = 60

--- Joins the group: rank and size from opts or the launcher, then the rendezvous at rank 0.
-- @tparam[opt] table opts `rank`, `size`, `root` ("host" or "host:port"), `port`, `timeout` (seconds,
-- for the rendezvous and the default of every collective), `host` (this rank's name; default `fabric.hostname`),
-- `getenv` (a function like `os.getenv`), `tolerant` (go on without a rank that leaves or misses a
-- limit, see `fabric_group:dead_ranks`), `group` (the relay tree's group size; 0: no tree; default
-- `IBV_FABRIC_GROUP`, else about sqrt(size) from `fabric.TREE_MIN` ranks), `wait_every` (seconds
-- between `on_wait` calls, see `ibverbs.fabric_group`; default `IBV_FABRIC_WAIT_EVERY`, else 60),
-- `wireup` ("auto", "pmix" or "tcp"; default `IBV_FABRIC_WIREUP`, else "auto"), `pmix_lib` (the
-- libpmix to open; default `IBV_FABRIC_PMIX_LIB`, else `libpmix.so.2`, then Debian's `pmix2/lib`),
-- `key` (the run's key, as `IBV_FABRIC_KEY`)
-- @treturn ibverbs.fabric_group
-- @return[2] nil, message (a rank that did not arrive, with the connections dropped; rank 0 not
-- answering or not proving it belongs to the run; no root address; a key too short or unreadable)
function fabric.init(opts) end

--- What the launcher says, without joining.
-- @tparam[opt] function getenv like `os.getenv`
-- @treturn integer rank (0-based)
-- @treturn integer size
-- @treturn string launcher: "env", "slurm", "openmpi", "pmi", "rxe-vm" or "none"
-- @treturn string|nil the rendezvous host the launcher implies
function fabric.detect(getenv) end

--- This host's name, without running a program: `SLURMD_NODENAME`, else gethostname(2)
-- (luasocket's `socket.dns.gethostname`), else `/proc/sys/kernel/hostname`, else "?".
-- @tparam[opt] function getenv like `os.getenv`
-- @tparam[opt] function gethostname replaces gethostname(2) (for tests)
-- @tparam[opt] string hostname_file replaces `/proc/sys/kernel/hostname` (for tests)
-- @treturn string "node07"
function fabric.hostname(getenv, gethostname, hostname_file) end

--- The first host of a Slurm host list.
-- @tparam string list "node[01-04,07],login"
-- @treturn string|nil "node01"
function fabric.first_host(list) end

--- A Slurm host list expanded as `scontrol show hostnames` does: ranges with their padding,
-- several prefixes, several ranges in one name.
-- @tparam string list "node[01-02,07],login" or "rack[1-2]-n[01-02]"
-- @treturn table { "node01", "node02", "node07", "login" }
-- @return[2] nil, message (an unmatched or nested bracket, a bad range)
function fabric.hostlist(list) end

--- Each rank's node in a Slurm step, from `SLURM_STEP_NODELIST` and `SLURM_STEP_TASKS_PER_NODE`
-- (block distribution, or one task per node); nil when the variables do not say it (another
-- distribution, a heterogeneous step).
-- @tparam[opt] function getenv like `os.getenv`
-- @treturn table|nil hosts indexed rank + 1
function fabric.slurm_hosts(getenv) end

return fabric
