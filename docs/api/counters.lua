--- A counters object (`struct ibv_counters`), made by `context:create_counters`.
--
--     local c = assert(ctx:create_counters())
--     assert(c:attach_point_flow{counter_desc = "packets", index = 0})
--     assert(c:attach_point_flow{counter_desc = "bytes", index = 1})
--     local flow = assert(qp:create_flow{specs = {..., {type = "action_count", counters = c}}})
--     local v = assert(c:read(2))   -- {packets, bytes}
--
-- Not verified on hardware (rxe has no counters).
--
-- @classmod ibverbs.counters

local counters = {}

--- Attaches a counting point (`ibv_attach_counters_point_flow`): statically (no flow: it counts
-- once a flow names the counters) or to a flow.
-- @tparam table attr `counter_desc` (`"packets"`, `"bytes"`), `index`
-- @tparam[opt] ibverbs.flow flow
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP; EINVAL; EBUSY already bound
function counters:attach_point_flow(attr, flow) end

--- Reads the counters (`ibv_read_counters`).
-- @tparam integer n how many values (from index 0)
-- @tparam[opt] integer|{string,...} flags `"prefer_cached"`
-- @treturn {integer,...}
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP; EINVAL more values than attached
function counters:read(n, flags) end

--- Destroys it (`ibv_destroy_counters`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY a flow still uses it
function counters:close() end

--- Whether `close` has run.
-- @treturn boolean
function counters:is_closed() end

return counters
