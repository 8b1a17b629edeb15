--- What the perftest counterparts among the examples (`send_lat.lua`, `write_lat.lua`,
-- `read_lat.lua`, `write_bw.lua`, `read_bw.lua`) share:
-- perftest's connection (its TCP exchange, through `ibverbs.exchange`), an RC QP brought up to the
-- peer, and perftest's printed banner, addresses and latency table.  The steps that can fail
-- return `nil, message` (the device, the network, a verbs call); none exits.
--
--     local pt = require "ibverbs.perftest"
--     local env = assert(pt.start(o, host))   -- o: ib_dev, ib_port, gid_index, port, mtu
--     local me = pt.me(env, qp, mr.rkey, mr.addr)
--     local rem = assert(pt.keys(env, me))
--     assert(pt.connect(env, qp, rem, me))
--     pt.lat_report(o, samples, 2)
--
-- A whole test with its command line (all of ib_write_bw, what `ibvlua write_bw` and
-- examples/write_bw.lua run) is a tool's: `ibverbs.tools.perftest` (`main(test, arg)`).
--
-- @module ibverbs.perftest

local pt = {}

--- `v`, or the failure of the step it is in: raised as a table that `steps` turns into `nil, msg`.
-- @param v a value, or nil
-- @tparam string msg the message when v is nil
-- @return v
function pt.check(v, msg) end

--- `f` as a step: its `check` failures returned as `nil, msg`; any other error (a bug) raised.
-- @tparam function f
-- @treturn function
function pt.steps(f) end

--- perftest's result separator line (87 dashes).
pt.RESULT_LINE = string.rep("-", 87)

--- Opens `o.ib_dev`, reads port `o.ib_port` and GID `o.gid_index` (-1: none), connects to `host`
-- (nil: listens; the server prints perftest's banner) on `o.port` and makes perftest's opening
-- exchange (versions, system data, MTU: `ex.perftest_start` with `o.mtu` or the port's).
-- @tparam table o the options
-- @tparam string|nil host
-- @treturn table env: `ctx`, `port`, `gid`, `conn`, `mtu`, `rem_version`, `host`, `o`
-- @return[2] nil, message
function pt.start(o, host) end

--- The inline size perftest's latency tests use by default on the device: `def` on the devices
-- perftest knows (here: Mellanox/NVIDIA's vendor id), 0 on the others (soft-RoCE among them).
-- @param ctx an `ibverbs.context`
-- @tparam integer def 236 for sends, 220 for writes
-- @treturn integer
function pt.default_inline(ctx, def) end

--- This side's key message: the port's LID, the QP's number, a random PSN, the rkey and address
-- the peer may write to (`out_reads` 1: set it to the device's `max_qp_rd_atom` as perftest does).
-- @param env
-- @param qp an `ibverbs.qp`
-- @tparam[opt] integer rkey
-- @tparam[opt] integer vaddr
-- @treturn table
function pt.me(env, qp, rkey, vaddr) end

--- One perftest hand shake (`ctx_hand_shake`): the peer's key message.
-- @param env
-- @tparam table me
-- @treturn table the peer's (`ex.unpack_key`)
-- @return[2] nil, message
function pt.keys(env, me) end

--- Brings an RC QP through INIT, RTR and RTS towards the peer's key message (a GRH when the peer
-- has a GID); as perftest, the RDMA reads and atomics it accepts at once are its own `out_reads`,
-- those it issues at once the peer's.
-- @param env
-- @param qp
-- @tparam table rem the peer's key message
-- @tparam table me this side's (its PSN)
-- @param[opt] access `qp_access_flags` for INIT
-- @treturn boolean true
-- @return[2] nil, message
function pt.connect(env, qp, rem, me, access) end

--- Prints perftest's test banner.
-- @param env
-- @tparam string title "Send Latency Test", ...
function pt.header(env, title) end

--- Prints an address line as perftest does (and the GID line with a GID index).
-- @param env
-- @tparam string side "local" or "remote"
-- @tparam table d a key message
function pt.dest(env, side, d) end

--- Prints this side's address, exchanges key messages, prints the peer's.
-- @param env
-- @tparam table me
-- @treturn table the peer's
-- @return[2] nil, message
function pt.exchange_dests(env, me) end

--- Prints perftest's latency table from samples (round trips, seconds) divided by factor (2: one
-- way, as `ib_send_lat` and `ib_write_lat`; 1: `ib_read_lat`), leaving out the two largest as
-- perftest does; `o.histogram` (-H) lists the sorted samples first, `o.unsorted` (-U) as taken.
-- @tparam table o `size`, `iters`, `histogram`, `unsorted`
-- @param s an `ibverbs.samples`
-- @tparam number factor
-- @treturn table the statistics (`s:stats(2)`, in seconds of round trip)
function pt.lat_report(o, s, factor) end

--- A bandwidth report from a kernel's figures (`ibv.bw`): `size`, `iters`, `bw_peak` and `bw_avg`
-- (MB/s: the same figure, the whole run's), `msg_rate` (Mpps).
-- @tparam table o `size`
-- @tparam table f the figures (`sent`, `seconds`)
-- @treturn table
function pt.bw_figures(o, f) end

--- Prints perftest's bandwidth table of a report (`pt.bw_figures`, or the peer's from
-- `ex.perftest_bw_reports`: the server of a half-duplex test prints the client's).
-- @tparam table rep
function pt.bw_report(rep) end

--- perftest's closing exchange: a hand shake, then "done"; closes the connection.
-- @param env
-- @tparam table me
-- @treturn boolean true
-- @return[2] nil, message
function pt.close(env, me) end

return pt
