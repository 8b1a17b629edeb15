--- RDMA verbs for Lua: `require "ibverbs"` (the C module `ibverbs.core` plus its Lua layer).
--
--     local ibv = require "ibverbs"
--     for _, d in ipairs(assert(ibv.devices())) do print(d.name, d.transport) end
--     local ctx = assert(ibv.open("rxe0"))
--
-- Constants: `ibv.ACCESS_*` (MR access flags), `ibv.SEND_*` (send flags), `ibv.WC_EX_WITH_*`,
-- `ibv.QP_CREATE_*`, `ibv.QP_EX_WITH_*` (`send_ops_flags)`, `ibv.DEVICE_*` (`device_cap_flags)`,
-- `ibv.PORT_*` (`port_cap_flags)`, `ibv.O_CREAT`, `ibv.O_EXCL`; wherever a flag set is taken, an array
-- of names works too (`{"local_write", "remote_read"}`).  `ibv._VERSION` is "ibverbs.core 0.1".
--
-- @module ibverbs

local ibv = {}

--- The rdma-core this module was built against and what the node's has and lacks.
-- `built`: the release of the headers it was compiled with ("44.0"; a call those
-- headers lacked raises "qp:query_data_in_order: needs rdma-core 36 or later; built
-- against 33.2"). `missing`: the verbs newer than rdma-core 28 (the module looks them up
-- when it loads) that this node's libibverbs and librdmacm do not have, by C name
-- (`{"ibv_query_qp_data_in_order", ...}`); calling a method that needs one raises
-- "...: needs rdma-core 36 or later (ibv_query_qp_data_in_order@IBVERBS_1.14); this
-- node's libibverbs does not have it".  Everything else works on any rdma-core from 28.
-- `fallbacks`: the methods that read sysfs here for want of a verb
-- (`{"ctx:query_gid_table", "ctx:query_gid_ex"}` below rdma-core 32; empty otherwise).
-- `libibverbs`, `librdmacm`: the library files in use (resolved: the name ends in the
-- release, "libibverbs.so.1.14.44.0" is rdma-core 44.0). `versions`: the newest symbol
-- version found in each (`{"IBVERBS_1.14", "RDMACM_1.3"}`), and the releases they bound:
-- `at_least` (36) and `at_most` (58; nil when the newest version the module knows is there).
-- `aid`: the release `IBVL_RDMA_CORE` names, when set (a test aid, read once when the
-- module loads: every verb newer than that release is treated as absent, with the same
-- errors, `missing` and `fallbacks` as on a node with that release; a value that is no
-- release, or below 28, makes `require` fail). The files and versions stay the node's.
-- @table rdma_core
ibv.rdma_core = {}

--- Errno values by name and names by number: `ibv.errno.EBUSY == 16`, `ibv.errno[16] == "EBUSY"`.
-- Every name the C library defines (EAGAIN and EWOULDBLOCK, EOPNOTSUPP and ENOTSUP share a number;
-- the number maps to EAGAIN and EOPNOTSUPP).
-- @table errno
ibv.errno = {}

--- The C library's text for an errno value (`strerror`).
-- @tparam integer e
-- @treturn string "Device or resource busy"
function ibv.strerror(e) end

--- The RDMA devices (`ibv_get_device_list`).
-- @treturn {table,...} entries `name`, `guid`, `node_type`, `transport` ("ib", "iwarp", ...),
-- `dev_name`, `ibdev_path`, `index` (1-based position), `device_index` (the kernel's index,
-- `ibv_get_device_index`; -1 when unknown)
-- @return[2] nil, message, errno
-- @errno ENOSYS the kernel has no RDMA support; ENOMEM
function ibv.devices() end

--- Opens a device (`ibv_open_device`).
-- @tparam[opt] string|integer which a name ("rxe0") or a 1-based index (default 1)
-- @treturn ibverbs.context
-- @return[2] nil, message, errno
-- @errno ENODEV no such device; ENOSYS no RDMA support; what `ibv_open_device` returns (EACCES, ...)
function ibv.open(which) end

--- Page-aligned, zeroed memory to register with `pd:reg_mr`.
-- @tparam integer size bytes (0 to 2^40)
-- @treturn ibverbs.buffer
-- @return[2] nil, message, errno
-- @errno ENOMEM
function ibv.buffer(size) end

--- n prepared receive WRs, linked as a chain.
-- @tparam integer n 1 to 2^20
-- @tparam[opt] integer max_sge SGEs per WR (default 1)
-- @treturn ibverbs.recv_wrs
function ibv.recv_wrs(n, max_sge) end

--- n prepared send WRs, linked as a chain.
-- @tparam integer n 1 to 2^20
-- @tparam[opt] integer max_sge SGEs per WR (default 1)
-- @treturn ibverbs.send_wrs
function ibv.send_wrs(n, max_sge) end

--- A QP attribute set parsed once, for `qp:modify` on the data path's control calls (a QP moved
-- through ERR, RESET and INIT again and again): the table is read here, its mask computed here, and
-- `qp:modify(prepared)` only copies it.  The table holds plain values only, so nothing it names can
-- close later; edit the table and call `ibv.qp_attr` again to change it.
-- @tparam table attr as `qp:modify` takes it
-- @treturn ibverbs.qp_attr
function ibv.qp_attr(attr) end

--- A reusable array of n work completions for `cq:poll` and `cq:wait`.
-- @tparam integer n
-- @treturn ibverbs.wc_array
function ibv.wc_array(n) end

--- The send/receive/repost loop in C.  Posts `send_wrs` whole, again and again, on `send_qp`
-- (at most `window` WRs outstanding; each completion on `send_cq` counts #`send_wrs` WRs: signal the
-- last WR of the list), and reposts each consumed receive of `recv_wrs` on `recv` (a QP or an SRQ)
-- until `count` messages went each way.  Either side may be left out.  Receive `wr_ids` must be
-- their 0-based index in `recv_wrs` (what `fill` gives); the script posts `recv_wrs` once before.
-- Receives that complete in list order (an RC QP, or an SRQ with one consumer) go back as the
-- list's own ranges, one post per run of completions (two where it wraps); any other order is
-- reposted in completion order and the list's links are restored after the post.
-- The CQs may be shared with other QPs: a completion of another QP (by its `qp_num`; a cq_ex
-- reports it when made with `wc_flags` "qp_num"), a receive whose `wr_id` is no index of
-- `recv_wrs`, or a send or receive of a side the loop lacks is skipped and counted in `foreign`.
-- @tparam table t `send_qp`, `send_cq`, `send_wrs`, `recv`, `recv_cq`, `recv_wrs`, `count`,
-- `window`, `timeout` (seconds)
-- @treturn table `sent`, `received`, `send_posted`, `recv_posted`, `errors`, `foreign`, `seconds`
-- @return[2] nil, message, errno
-- @errno EIO a completion with an error status (`"wc status: <status> (wr_id n)"`); ETIMEDOUT;
-- EINTR (SIGINT); a post's errno
function ibv.transfer(t) end

--- A buffer for the samples a latency kernel takes (round trips, in seconds), read without
-- allocating, with its statistics (`stats`, `percentile`, `histogram`).  From a table: those
-- samples, for statistics on numbers a script has.
-- @tparam integer|table n the room (samples, at most 2^24), or an array of samples in seconds
-- @treturn ibverbs.samples
function ibv.samples(n) end

--- The send/recv ping-pong of perftest's `ib_send_lat`, the loop in C with busy polling.  The
-- `initiator` posts `send_wrs` (one WR, posted signaled) first; each side then waits for the peer's
-- message (a receive completion on `recv_cq`) and answers it, `iters` times.  The script posts
-- min(#`recv_wrs`, `iters`) receives before (WR ids the 0-based index, what `fill` gives); a
-- consumed one is reposted while received + #`recv_wrs` <= `iters`.  Each iteration's start is
-- stamped (the CPU's time-stamp counter, calibrated against `CLOCK_MONOTONIC` over the run):
-- `samples` gets `iters` - 1 round trips, as perftest counts them.  No Lua code runs and nothing
-- is allocated in the loop, so a finalizer cannot close an object under it.  The CQs may be shared
-- with other QPs: their completions (by `qp_num`) are skipped and counted in `foreign`.
--     local s = ibv.samples(999)
--     local f = assert(ibv.lat_send{qp = qp, send_cq = scq, recv_cq = rcq, send_wrs = sl,
--       recv_wrs = rl, iters = 1000, initiator = true, samples = s})
--     print(s:stats(2).median / 2 * 1e6, "us one way")
-- @tparam table t `qp`, `send_cq`, `send_wrs`, `recv_cq`, `recv_wrs`, `prepost` (the kernel posts
-- the receives as it starts), `iters`, `warmup` (round trips before the timed ones, unstamped; both
-- sides give the same), `initiator` (boolean), `samples` (optional), `timeout` (seconds for the whole
-- run; default 60, `math.huge`: none), `event` (sleep on the CQs' completion channels)
-- @treturn table `iters` (started), `sent`, `received`, `posted`, `foreign`, `samples` (taken),
-- `seconds`
-- @return[2] nil, message, errno, the figures so far
-- @errno EIO a completion with an error status (`"wc status: <status> (wr_id n)"`) or a receive
-- that is none of `recv_wrs`; ETIMEDOUT the time limit; a post's or poll's errno
-- @raise a bad or missing field, named; a closed object; SIGINT: "ibv.lat_send: interrupted"
function ibv.lat_send(t) end

--- The RDMA write ping-pong of perftest's `ib_write_lat`, polling on memory, the loop in C.
-- `send_wrs` holds one `rdma_write` WR whose SGE lies in `send_mr`; before each post the kernel
-- writes the iteration's number (modulo 256) into the message's last byte.  The `initiator`
-- writes first; each side then waits until the last byte of the peer's message, at `poll_offset`
-- + length - 1 in `poll_mr`, shows the number, and writes its own.  Zero that byte before the
-- peers start.  Samples, time limit and figures as `lat_send`.
-- @tparam table t `qp`, `send_cq`, `send_wrs`, `send_mr`, `poll_mr`, `poll_offset` (default 0),
-- `iters`, `warmup`, `initiator`, `samples`, `timeout`
-- @treturn table as `lat_send`'s
-- @return[2] nil, message, errno, the figures so far
-- @errno EIO a completion with an error status; ETIMEDOUT the time limit; a post's or poll's errno
-- @raise a bad or missing field, named; a closed object; SIGINT: "ibv.lat_write: interrupted"
function ibv.lat_write(t) end

--- Round trips of one side, as perftest's `ib_read_lat` and `ib_atomic_lat` time them: post
-- `send_wrs` (one WR: an `rdma_read`, an atomic, any WR) signaled, wait for its completion, `iters`
-- times, the loop in C.  Samples, time limit and figures as `lat_send`.
-- @tparam table t `qp`, `send_cq`, `send_wrs`, `iters`, `samples`, `timeout`
-- @treturn table as `lat_send`'s
-- @return[2] nil, message, errno, the figures so far
-- @errno EIO a completion with an error status; ETIMEDOUT the time limit; a post's or poll's errno
-- @raise a bad or missing field, named; a closed object; SIGINT: "ibv.lat_rtt: interrupted"
function ibv.lat_rtt(t) end

--- The bandwidth and message-rate loop of perftest's `ib_write_bw`, `ib_read_bw` and
-- `ib_send_bw`, in C with busy polling.  Each post posts `send_wrs` whole (perftest's post list)
-- while at most `window` WRs are outstanding (perftest's tx depth); one WR in `cq_mod` is
-- signaled, the last of a post, and its completion accounts for the `cq_mod` WRs before it (the
-- kernel sets and clears that flag; the list's own flags come back after the run).  The send CQ
-- is polled only when no post can go (the window full, or every WR posted), as `ib_write_bw` does.  With
-- `recv_wrs`, the receives (posted by the script before, as for `lat_send`) are counted and
-- reposted; both sides at once make a bidirectional test.  `seconds` runs from the first post (or
-- receive) to the last completion: MB/s = size * `sent` / `seconds` / 2^20.
-- @tparam table t `qp`, `send_cq`, `send_wrs`, `recv_cq`, `recv_wrs` (either side or both),
-- `recv_qp` (where the receives go when not `qp`), `prepost`, `iters` (WRs to send, a multiple of
-- #`send_wrs`; receives to wait for), `window` (128), `cq_mod` (100; a multiple of #`send_wrs`),
-- `timeout`, `event`
-- @treturn table `sent`, `received`, `posted`, `foreign`, `seconds`
-- @return[2] nil, message, errno, the figures so far
-- @errno EIO a completion with an error status; ETIMEDOUT the time limit; a post's or poll's errno
-- @raise a bad or missing field, named; a closed object; SIGINT: "ibv.bw: interrupted"
function ibv.bw(t) end

--- Several kernels at once, in one busy-polling loop in C: each table is what `lat_send`,
-- `lat_write`, `lat_rtt` or `bw` takes, with `kernel` naming which, and `after` (an index or a list
-- of indices of earlier tables): that end starts once those are over (finished or stopped), its
-- `timeout` counting from then (or, with `within`, the index of an earlier table, from that end's
-- start: ends that follow one another share one time limit), its receives posted then with
-- `prepost = true`.  Completions go to
-- their end by QP number, so the ends may share CQs (a `cq_ex` made with `wc_flags` `"qp_num"`); a
-- completion for an end that has not started waits in its counts.  A QP belongs to one end, or to
-- ends that follow one another.  An end that fails stops alone; the others run on.  Every kernel's
-- table also takes `event = true` (sleep on the CQs' completion channels while nothing is polled,
-- instead of spinning: for oversubscribed hosts; `lat_write` polls memory and refuses it); the
-- ping-pongs take `warmup` (round trips run first, unstamped: a first ping that waits for its peer
-- stays out of the samples); `bw` takes `recv_qp` (the receives go to another QP than the sends).
--     local f = ibv.kernels{
--       {kernel = "lat_send", qp = a, send_cq = cq, recv_cq = cq, send_wrs = ping, recv_wrs = arx,
--        iters = 1000, warmup = 1, initiator = true, samples = s},
--       {kernel = "lat_send", qp = b, send_cq = cq, recv_cq = cq, send_wrs = pong, recv_wrs = brx,
--        iters = 1000, warmup = 1},
--       {kernel = "bw", qp = a, send_cq = cq, send_wrs = writes, iters = 8192, after = {1, 2}},
--     }
--     print(f[1].seconds, f[3].error)
-- @tparam table list 1 to 64 kernel tables
-- @treturn table one figures table per kernel, in order, as that kernel returns them; a failed
-- one also has `error` (the message) and `errno`
-- @raise a bad or missing field, named with its kernel ("kernel 2: field 'iters': ..."); a QP in two
-- ends that do not follow one another; a shared `cq_ex` that does not report `qp_num`; a closed
-- object; SIGINT: "ibv.kernels: interrupted"
function ibv.kernels(list) end

--- Data-path steps checked once and run by one call: the script's own loop at one Lua->C call per
-- cycle.  Each step is `{"post_recv", qp_or_srq, recv_wrs [, first, count]}`,
-- `{"post_send", qp, send_wrs [, first, count]}` or `{"poll", cq, wc_array}` (1 to 8 steps, run in
-- order).  The objects are checked here and kept alive by the batch; each run checks that they are
-- still open and that the lists' WRs name open objects (as `qp:post_*` does), and posts what the
-- lists hold at that moment (edit them between runs with `set`, `wr_id`, ...).
--     local cycle = ibv.batch{ {"post_recv", qp, rl, 1, 16}, {"post_send", qp, sl}, {"poll", cq, wcs} }
--     local n, first_bad = cycle()
-- @tparam table steps
-- @treturn function the cycle: returns, for each poll step, its count and first_bad (the index of
-- the first unsuccessful completion in its wc array, or nil), as `cq:poll(wcs)`; `true` when there
-- is no poll step
-- @return[2] (from the cycle) nil, message, errno, bad_wr, step: a post failed; later steps did not run
-- @errno ENOMEM a post beyond the queue's room; EINVAL; a poll's errno
-- @raise a malformed step (named by its index); at run, a closed object or a WR naming one
function ibv.batch(steps) end

--- A monotonic clock (`CLOCK_MONOTONIC`), for timing loops.
-- @treturn number seconds
function ibv.now() end

--- Runs a program from an argument vector, never through a shell (`posix_spawnp`), and waits for
-- it within a time limit.  `argv[1]` is looked up on PATH; every argument reaches the program as
-- it is (`;`, `$(...)`, quotes and all).  The program gets this process's environment, an empty
-- signal mask, SIGPIPE at its default and no file descriptor but 0, 1 and 2 (stdin is /dev/null
-- unless `opts.stdin` is given).  Its stdout and stderr are read apart, as they come, so no size
-- of output blocks it.  At the time limit it is killed (SIGKILL) and reaped; once it has exited,
-- output its own children still write is not waited for.  SIGINT ends the wait, the program
-- killed and reaped first.
--     local r = assert(ibv.spawn({"scontrol", "show", "node", "n1"}, {timeout = 10}))
--     if r.status ~= 0 then print(r.stderr) end
-- @tparam {string,...} argv the program, then its arguments (no embedded zero byte)
-- @tparam[opt] table opts `timeout`: seconds, above 0 (default 30; `math.huge`: none);
-- `stdin`: a string written to its stdin (then closed)
-- @treturn table `status` (its exit code, or nil when a signal ended it), `signal` (the signal
-- number that ended it, or nil), `stdout`, `stderr` (strings), `timed_out` (true when it was
-- killed at the time limit)
-- @return[2] nil, message, errno: it could not be started ("spawn prog: No such file or
-- directory")
-- @errno ENOENT no such program (on PATH); EACCES not executable; ENOEXEC; EMFILE (no fd for
-- its pipes); ENOMEM
-- @raise argv not a list of strings (named: "argv[2]: string expected, got number"), empty, or
-- with an embedded zero byte; an unknown field of opts; a timeout that is not a number above 0;
-- SIGINT: "spawn: interrupted"
function ibv.spawn(argv, opts) end

--- A PMIx client (`PMIx_Init`), on the node's libpmix opened at run time (`dlopen` of
-- `libpmix.so.2`, then Debian's `pmix2/lib`; once per process, never unloaded).  Only under a
-- PMIx server: without `PMIX_NAMESPACE`, `PMIX_RANK` and a `PMIX_SERVER_URI*` in the environment
-- `PMIx_Init` is not called (PMIx 3 would make a singleton of the process).
--     local p, err = ibv.pmix()
-- @tparam[opt] table opts `lib`: the library's path (else the places above)
-- @treturn ibverbs.pmix
-- @return[2] nil, message, errno
-- @errno ENOENT no libpmix (the loader's message), or a library without a PMIx call (named);
-- ENOTSUP PMIx 1.x; ENOTCONN no server in the environment; ECONNREFUSED, EIO PMIx_Init failed
-- (PMIx's status named)
-- @raise an unknown field of opts
function ibv.pmix(opts) end

--- HMAC-SHA256 (RFC 2104 over FIPS 180-4) of a message under a key: the proof a rank of
-- `ibverbs.fabric` gives at the rendezvous.  Written in the module, so the one-file host carries
-- it (a bare node may have no libcrypto); no other digest or cipher.
--     local mac = ibv.hmac_sha256(key, "message")        -- 32 bytes
--     ibv.hmac_sha256(key, "message", true)               -- 64 hex digits
-- @tparam string key any length (one past 64 bytes is hashed first)
-- @tparam string msg any bytes
-- @tparam[opt] boolean hex the result as 64 lowercase hex digits
-- @treturn string
-- @raise key or msg not a string
function ibv.hmac_sha256(key, msg, hex) end

--- A MUNGE credential of a payload (`munge_encode`), on the node's libmunge opened at run time
-- (`libmunge.so.2`, once per process): the cluster's own authentication, which Slurm uses.  Only
-- processes of this user may decode it (the credential's UID restriction); munged's time to
-- live applies.  `ibverbs.fabric` proves its hellos so under Slurm without PMIx.
--     local cred = assert(ibv.munge_encode("payload"))
-- @tparam string payload at most 65536 bytes
-- @tparam[opt] string socket munged's socket (else its default, /run/munge/munge.socket.2)
-- @treturn string the credential ("MUNGE:...")
-- @return[2] nil, message, code: "munge: Failed to access ...: No such file or directory (Did you
-- start munged?)", 6; "munge: libmunge.so.2: cannot open shared object file ...", -1
-- @errno -1 no libmunge; 6 (EMUNGE_SOCKET) munged unreachable; other MUNGE error numbers as munge.h
-- gives them
-- @raise payload not a string or over 65536 bytes
function ibv.munge_encode(payload, socket) end

--- The payload of a MUNGE credential and who made it (`munge_decode`).  munged refuses a
-- credential decoded before on its node (17, "Replayed credential"), an expired one (15), and one
-- restricted to another user (18).
--     local payload, uid, gid, mine = ibv.munge_decode(cred)
-- @tparam string cred
-- @tparam[opt] string socket munged's socket
-- @treturn string the payload
-- @treturn integer the uid of the process that made it
-- @treturn integer its gid
-- @treturn boolean whether that uid is this process's
-- @return[2] nil, message, code
-- @errno -1 no libmunge; 6 munged unreachable; 8 not a credential; 15 expired; 17 replayed;
-- 18 not for this user
-- @raise cred not a string
function ibv.munge_decode(cred, socket) end

--- The next rkey for a type 2 memory window bind (`ibv_inc_rkey`).
-- @tparam integer rkey
-- @treturn integer
function ibv.inc_rkey(rkey) end

--- Adds Lua methods to an object type; on verbs objects each first refuses a closed object, as the C
-- methods do.
-- @tparam string typename "ibverbs.qp", ...
-- @tparam table funcs name -> function
function ibv.extend(typename, funcs) end

--- The methods table of an object type (what `extend` adds to).
-- @tparam string typename
-- @treturn table
function ibv.methods(typename) end

--- The verbs pointer of an open object, for `ibverbs.ffi`.
-- @param obj any verbs object
-- @treturn lightuserdata pointer
-- @treturn string its type name
function ibv.rawptr(obj) end

--- The memory of a buffer, MR, WR list or wc array, for `ibverbs.ffi`.
-- @param obj
-- @treturn lightuserdata base
-- @treturn integer size or count
-- @treturn string kind
function ibv.rawmem(obj) end

--- Legacy OFED XRC: `context:open_xrc_domain` with the C argument order.
-- @tparam ibverbs.context ctx
-- @param fd
-- @tparam integer oflag
-- @treturn ibverbs.xrc_domain
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOENT, EEXIST, EOPNOTSUPP
function ibv.open_xrc_domain(ctx, fd, oflag) end

--- Legacy OFED XRC: closes a domain.
-- @tparam ibverbs.xrc_domain d
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY registrations, XRC SRQs or send QPs remain
function ibv.close_xrc_domain(d) end

--- Legacy OFED XRC: `pd:create_xrc_srq(d, cq, attr)`.
-- @tparam ibverbs.pd pd
-- @tparam ibverbs.xrc_domain d
-- @tparam ibverbs.cq cq
-- @tparam table attr
-- @treturn ibverbs.srq
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP, EINVAL
function ibv.create_xrc_srq(pd, d, cq, attr) end

--- Legacy OFED XRC: creates a shared receive QP in `init_attr.xrc_domain` and registers this process
-- with it; the other fields of `ibv_qp_init_attr` are accepted and ignored.
-- @tparam table init_attr `xrc_domain`
-- @treturn integer the QP number
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP, ENOMEM
function ibv.create_xrc_rcv_qp(init_attr) end

--- Legacy OFED XRC: modifies a receive QP by number.
-- @tparam ibverbs.xrc_domain d
-- @tparam integer qpn
-- @tparam table attr as `qp:modify`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL; ENOENT no such QP
function ibv.modify_xrc_rcv_qp(d, qpn, attr) end

--- Legacy OFED XRC: queries a receive QP by number.
-- @tparam ibverbs.xrc_domain d
-- @tparam integer qpn
-- @treturn table as `qp:query`
-- @return[2] nil, message, errno
-- @errno ENOENT
function ibv.query_xrc_rcv_qp(d, qpn) end

--- Legacy OFED XRC: adds a registration of this process with a receive QP (one `ibv_open_qp` handle).
-- @tparam ibverbs.xrc_domain d
-- @tparam integer qpn
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOENT no such QP
function ibv.reg_xrc_rcv_qp(d, qpn) end

--- Legacy OFED XRC: drops a registration (the QP goes with the last one of any process).
-- @tparam ibverbs.xrc_domain d
-- @tparam integer qpn
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL not registered
function ibv.unreg_xrc_rcv_qp(d, qpn) end

--- Legacy OFED XRC: how many registrations this process holds on a domain's receive QP.
-- @tparam ibverbs.xrc_domain d
-- @tparam integer qpn
-- @treturn integer
function ibv.xrc_rcv_registrations(d, qpn) end

--- Makes registered memory safe across fork(2) (`ibv_fork_init`).  Call it first:
-- once memory is registered it fails with EINVAL (unless the kernel needs nothing).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL called too late; ENOMEM
function ibv.fork_init() end

--- The fork protection in force (`ibv_is_fork_initialized`).
-- @treturn string "disabled", "enabled" or "unneeded" (the kernel protects registered memory itself)
function ibv.is_fork_initialized() end

--- A context sharing the device objects of the context whose command fd is given
-- (`ibv_import_device`), e.g. another process's, passed over a Unix socket.  The fd is
-- duplicated first: the new context owns the duplicate, the caller keeps its own.
-- @tparam integer cmd_fd an open context's `ctx:cmd_fd()`
-- @treturn ibverbs.context
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider cannot import (rxe); EINVAL not a character device; ENODEV not an RDMA device
function ibv.import_device(cmd_fd) end

--- libibverbs' text for a completion status (`ibv_wc_status_str`).
-- @tparam string|integer status a name as completions give it ("wr_flush_err") or the C value
-- @treturn string "Work Request Flushed Error"; "unknown" for a value out of range
function ibv.wc_status_str(status) end

--- libibverbs' text for a node type (`ibv_node_type_str`).
-- @tparam string|integer node_type "ca", "switch", ... or the C value
-- @treturn string "InfiniBand channel adapter"
function ibv.node_type_str(node_type) end

--- libibverbs' text for a port state (`ibv_port_state_str`).
-- @tparam string|integer state "active", ... or the C value
-- @treturn string "active"
function ibv.port_state_str(state) end

--- libibverbs' text for an async event type (`ibv_event_type_str`).
-- @tparam string|integer event "port_active", ... or the C value
-- @treturn string "port active"
function ibv.event_type_str(event) end

--- A static rate in Mbit/s (`ibv_rate_to_mbps`).
-- @tparam string|integer rate "2_5_gbps", "10_gbps", ..., "1200_gbps", "max", or the C value
-- @treturn integer 2500 for "2_5_gbps"; -1 for "max" and unknown values
function ibv.rate_to_mbps(rate) end

--- A static rate as a multiple of 2.5 Gbit/s (`ibv_rate_to_mult`).
-- @tparam string|integer rate as `rate_to_mbps`
-- @treturn integer 4 for "10_gbps"; -1 for "max" and unknown values
function ibv.rate_to_mult(rate) end

--- The static rate of a speed in Mbit/s (`mbps_to_ibv_rate`): exact values only.
-- @tparam integer mbps 2500, 5000, 10000, 14062, 25781, ...
-- @treturn string|integer the rate's name ("2_5_gbps"), "max" when no rate matches
function ibv.mbps_to_rate(mbps) end

--- The static rate of a multiple of 2.5 Gbit/s (`mult_to_ibv_rate`).
-- @tparam integer mult 1, 2, 4, ...
-- @treturn string|integer the rate's name ("10_gbps" for 4), "max" when no rate matches
function ibv.mult_to_rate(mult) end

--- Whether a supported_qpts bit mask includes a QP type (`ibv_is_qpt_supported`).
-- @tparam integer caps e.g. `ctx:query_device_ex().tso_supported_qpts` or `rss_supported_qpts`
-- @tparam string|integer qp_type "rc", "ud", ...
-- @treturn boolean
function ibv.is_qpt_supported(caps, qp_type) end

--- The UDP source port RoCE v2 uses for a flow label (`ibv_flow_label_to_udp_sport`).
-- @tparam integer flow_label 0 to 0xfffff
-- @treturn integer port, 0xc000 to 0xffff
function ibv.flow_label_to_udp_sport(flow_label) end

--- The UDP source port of an RC QP's RoCE v2 packets, by the rule Linux's providers apply when the QP is
-- modified with an address vector (`rdma_get_udp_sport`, rxe's since Linux 5.17): the GRH's flow label when it
-- is not 0, else a label made from both QP numbers (the same from either end); then folded as
-- `flow_label_to_udp_sport`.  No device needed.
-- @tparam integer flow_label 0 to 0xfffff, as given to `qp:connect` or `to_rtr` (`flow_label`)
-- @tparam[opt] integer qpn this QP's number (needed when flow_label is 0)
-- @tparam[opt] integer dest_qpn the remote QP's number (needed when flow_label is 0)
-- @treturn integer port, 0xc000 to 0xffff
-- @treturn integer the flow label it comes from
function ibv.roce_udp_sport(flow_label, qpn, dest_qpn) end

--- The hops of one UDP 5-tuple: TTL-limited probes from `src`:`sport` to `dst`:`dport`, the ICMP answers read
-- through `IP_RECVERR` (no raw socket, no privilege).  A destination that owns `dport` (a host whose kernel
-- runs rxe owns 4791) does not answer; the silent hops after the last answer are left out.
-- @tparam table flow `src`, `dst` (IPv4 text; src an address of this host), `sport`; optional `dport` (4791),
-- `max_hops` (8, up to 64), `timeout_ms` (300, a probe's wait), `probes` (1 a hop, up to 10), `gap` (3: stop
-- after this many silent hops in a row)
-- @treturn table the hops in order: an address, or false for a hop that did not answer
-- @treturn boolean whether the destination answered
-- @return or nil, message ("bind 10.0.1.11:49153: Address already in use (...)"), errno when it cannot be probed
function ibv.trace_flow(flow) end

--- Several flows' hops at once (`trace_flow`'s fields each; up to 1024, one socket each).
-- @tparam table flows a list of flow tables
-- @treturn table per flow `{hops = {...}, reached = true|false}` or `{error = "...", errno = n}`
function ibv.trace_flows(flows) end

return ibv
