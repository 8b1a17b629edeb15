--- A port's counters from sysfs, as deltas: the hardware's own evidence of errors around a test.
--
--     local pc = require "ibverbs.port_counters"
--     local before = assert(pc.read(ctx, 1))          -- a context, or a name: pc.read("mlx5_0", 1)
--     -- ... traffic ...
--     local d, unknown = pc.deltas(before, assert(pc.read(ctx, 1)))
--     for _, x in ipairs(pc.exceeded(d)) do print(x.name, x.delta, x.threshold) end
--
-- The counters are every file of `/sys/class/infiniband/<dev>/ports/<port>/counters` (the
-- InfiniBand PortCounters: `symbol_error`, `link_error_recovery`, `link_downed`,
-- `port_rcv_errors`, `port_xmit_discards`, ..., `port_xmit_data`) and of `.../hw_counters` (the
-- provider's own: rxe's `retry_exceeded_err`, `completer_retry_err`, `out_of_seq_request`,
-- `duplicate_request`, `rcvd_seq_err`, `link_downed`, `sent_pkts`, ...; mlx5's
-- `out_of_sequence`, `local_ack_timeout_err`, ...), but `hw_counters/lifespan` (a setting).
-- soft-RoCE (rxe) has `hw_counters` only. Nothing is ever reset: a tool reads twice and compares.
-- A counter at its maximum (InfiniBand counters stop there: 4, 8, 16 or 32 bits by counter, 64
-- for the extended ones; 2^32-1 and 2^64-1 for any counter) or lower in the second reading has
-- no delta: it is unknown, never 0. The directories are listed through lua-luv or
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
-- `implied_nak_seq_err`, `local_ack_timeout_err`, `rnr_nak_retry_err` 10.
pc.THRESHOLDS = {}

--- A port's counters (the files of its `counters` and `hw_counters` directories).
-- A name in both keeps `counters/`'s value; `hw_counters/`'s is then `"hw_" .. name`.
-- @tparam ibverbs.context|string device an opened context, or a device's name (`"rxe0"`)
-- @tparam integer port 1 to 255
-- @tparam[opt] string root another directory than `ROOT` (a copy of the tree, for tests)
-- @treturn table name -> integer (a float past 2^63)
-- @return[2] nil, message: the port has neither directory
function pc.read(device, port, root) end

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
