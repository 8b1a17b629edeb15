--- A port's counters from sysfs, as deltas: the hardware's own evidence of errors around a test.
--
--     local pc = require "ibverbs.port_counters"
--     local before, lost = assert(pc.read(ctx, 1))    -- a context, or a name: pc.read("mlx5_0", 1)
--     -- ... traffic ...
--     local after, lost2 = assert(pc.read(ctx, 1))
--     local d, unknown = pc.deltas(before, after)
--     for _, x in ipairs(pc.exceeded(d)) do print(x.name, x.delta, x.threshold) end
--     for _, x in ipairs(pc.faults(before, after, pc.THRESHOLDS, { lost, lost2 })) do print(x.name, x.why) end
--
-- The counters are every file of `/sys/class/infiniband/<dev>/ports/<port>/counters` (the
-- InfiniBand PortCounters: `symbol_error`, `link_error_recovery`, `link_downed`,
-- `port_rcv_errors`, `port_xmit_discards`, ..., `port_xmit_data`) and of `.../hw_counters` (the
-- provider's own: rxe's `retry_exceeded_err`, `completer_retry_err`, `out_of_seq_request`,
-- `duplicate_request`, `rcvd_seq_err`, `link_downed`, `sent_pkts`, ...; mlx5's
-- `out_of_sequence`, `local_ack_timeout_err`, ...), but `hw_counters/lifespan` (a setting).
-- soft-RoCE (rxe) has `hw_counters` only. Nothing is ever reset: a tool reads twice and compares.
-- The data and packet counters of `counters` are the 64-bit ones of PortCountersExtended when
-- the port's PMA has them (the kernel picks them), else the 32-bit ones.
-- A counter at its maximum (InfiniBand counters stop there: 4, 8, 16 or 32 bits by counter, 64
-- for the extended ones; 2^32-1 and 2^64-1 for any counter) or lower in the second reading has
-- no delta: it is unknown, never 0. A counter file that cannot be read (an open or read error,
-- empty, not a number) is returned apart, with its path and the error: never skipped.
-- `faults` says what makes a port's counters a finding of their own: a judged counter at its
-- maximum (with how to reset it) and a file that could not be read.
-- The counters are in classes (`CLASS`): physical and port errors are judged by their rise over a
-- run, transport errors (retries, sequence errors) per packet of a tool's own traffic, traffic
-- counters count that traffic (`packets`). The directories are listed through lua-luv or
-- LuaFileSystem when one is installed, else the counters of `THRESHOLDS` and the usual traffic
-- counters are read by name; no program is run.
--
-- @module ibverbs.port_counters

local pc = {}

--- The sysfs directory read (`"/sys/class/infiniband"`).
pc.ROOT = "/sys/class/infiniband"

--- The width in bits of each InfiniBand PortCounter (`link_downed = 8`, `symbol_error = 16`, ...).
pc.WIDTH = {}

--- The default thresholds: error counter name -> the largest rise over one run that is not a
-- finding. InfiniBand (infiniband-diags' `error_thresholds`): `symbol_error`,
-- `link_error_recovery`, `port_rcv_errors`, `local_link_integrity_errors`,
-- `excessive_buffer_overrun_errors` 10; `port_rcv_remote_physical_errors`,
-- `port_rcv_switch_relay_errors`, `port_xmit_discards`, `port_xmit_constraint_errors`,
-- `port_rcv_constraint_errors`, `VL15_dropped` 100; `link_downed` 0. rxe: `retry_exceeded_err`,
-- `retry_rnr_exceeded_err`, `send_err` 0; `completer_retry_err`, `out_of_seq_request`,
-- `duplicate_request`, `rcvd_seq_err` 10. mlx5: `req_cqe_error`, `resp_cqe_error`,
-- `req_remote_access_errors`, `resp_local_length_error` 0; `out_of_sequence`, `packet_seq_err`,
-- `implied_nak_seq_err`, `local_ack_timeout_err`, `rnr_nak_retry_err`, `rx_icrc_encapsulated` 10.
pc.THRESHOLDS = {}

--- The class of each counter: `"physical"` (the link's own errors: `symbol_error`,
-- `link_error_recovery`, `link_downed`, `port_rcv_errors`, `local_link_integrity_errors`,
-- `excessive_buffer_overrun_errors`, `port_rcv_remote_physical_errors`; mlx5's
-- `rx_icrc_encapsulated`), `"port"` (the other PortCounters errors: discards, constraint, switch
-- relay, `VL15_dropped`), `"transport"` (retries, sequence errors, RNR NAKs, error completions,
-- congestion notifications: rxe's and mlx5's) or `"traffic"` (data and packet counters).
pc.CLASS = {}

--- A port's counters (the files of its `counters` and `hw_counters` directories).
-- A name in both keeps `counters/`'s value; `hw_counters/`'s is then `"hw_" .. name`.
-- @tparam ibverbs.context|string device an opened context, or a device's name (`"rxe0"`)
-- @tparam integer port 1 to 255
-- @tparam[opt] string root another directory than `ROOT` (a copy of the tree, for tests)
-- @treturn table name -> integer (a float past 2^63)
-- @treturn table|nil the files that could not be read, name -> `"path: message"` (an open or
-- read error such as EINVAL or EIO, `"empty"`, `"not a number: '...'"`); nil when all were read
-- @return[2] nil, message: the port has neither directory
function pc.read(device, port, root) end

--- The directory a counter of a reading came from.
-- @tparam table reading from `read`
-- @tparam string name
-- @treturn string|nil `"counters"` or `"hw_counters"`
function pc.dir(reading, name) end

--- A counter's class (`CLASS`; `hw_<name>` has its name's).
-- @tparam string name
-- @treturn string|nil `"physical"`, `"port"`, `"transport"`, `"traffic"`, or nil (reported only)
function pc.class(name) end

--- Whether a counter's value is at its maximum (its delta is then unknown).
-- @tparam string name
-- @tparam number value
-- @treturn boolean
function pc.saturated(name, value) end

--- The rise of each counter between two readings of one port.
-- @tparam table before a reading (`read`, `context:port_counters`)
-- @tparam table after a later reading
-- @treturn table deltas: name -> integer
-- @treturn table unknown: name -> `"saturated"`, `"went backwards"`, `"missing before"` or `"missing after"`
function pc.deltas(before, after) end

--- What makes a port's counters a finding of their own: every counter file either reading could
-- not read, and a judged counter at its maximum in either reading (a data or packet counter at
-- its maximum is none: only the port's rate is then unknown).
-- @tparam table before a reading
-- @tparam table after a later reading
-- @tparam table limits name -> threshold: the counters judged
-- @tparam[opt] table lost a list of `read`'s second values
-- @tparam[opt] table how `{lid =, port =}` for the reset hint
-- @treturn {table,...} `{name =, why =}` sorted by name: `"unreadable: path: message"`,
-- `"saturated at 255 (8 bits): its rise cannot be seen; reset it: perfquery -R 3 1"`
function pc.faults(before, after, limits, lost, how) end

--- How a saturated counter is reset: InfiniBand's PortCounters with `perfquery -R <lid> <port>`
-- (`-x -R` for the 64-bit data and packet counters); a provider's `hw_counters` only by
-- reloading the driver.
-- @tparam string name
-- @tparam[opt] string dir `"counters"` or `"hw_counters"` (default: by the name)
-- @tparam[opt] integer lid the port's LID (0 or nil: not known, or RoCE)
-- @tparam[opt] integer port
-- @treturn string
function pc.reset_hint(name, dir, lid, port) end

--- The packets a port sent and received between two readings.
-- @tparam table deltas from `deltas`
-- @treturn integer|nil `port_xmit_packets + port_rcv_packets`, else rxe's `sent_pkts + rcvd_pkts`;
-- nil when a count is missing or unknown
function pc.packets(deltas) end

--- The error counters whose delta rose past their threshold (a delta in `hw_<name>` counts for `name`).
-- @tparam table deltas from `deltas`
-- @tparam[opt] table thresholds name -> the largest rise allowed (default `THRESHOLDS`)
-- @treturn {table,...} `{name =, delta =, threshold =}`, sorted by name
function pc.exceeded(deltas, thresholds) end

--- Thresholds from an option's text, over a base.
-- @tparam string text `"name=n,name=n"`; `all=n` sets every counter of the base
-- @tparam[opt] table base default `THRESHOLDS`
-- @treturn table a new table of thresholds
-- @return[2] nil, message naming the item that is not `name=count`
function pc.parse_thresholds(text, base) end

return pc
