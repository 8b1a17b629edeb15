--- An `rdma_cm` event channel (`struct rdma_event_channel`), made by `ibverbs.cm.event_channel`.
-- @classmod ibverbs.cm_channel

local cm_channel = {}

--- Creates an id whose events come on this channel (`rdma_create_id`).
-- @tparam[opt] table attr `ps` ("tcp", "udp", "ib", "ipoib")
-- @treturn ibverbs.cm_id
-- @return[2] nil, message, errno
-- @errno ENOMEM, ENODEV
function cm_channel:create_id(attr) end

--- The next event (`rdma_get_cm_event`), acknowledged before it returns (the table is a copy);
-- interruptible by SIGINT.
-- @tparam[opt] number timeout seconds (default: for ever)
-- @treturn table `event` (`"addr_resolved"`, `"route_resolved"`, `"connect_request"`, `"connect_response"`,
-- "established", "rejected", "disconnected", "unreachable", `"multicast_join"`, ...), `status`, `id`
-- (for `"connect_request"`: a new id on this channel), `listen_id`, `private_data`, `conn`
-- ({`responder_resources`, `initiator_depth`, `qp_num`, ...}) or `ud` ({`ah_attr`, `qp_num`, `qkey`})
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT nothing came in time
function cm_channel:get_event(timeout) end

--- The channel's file descriptor, for poll(2).
-- @treturn integer
function cm_channel:fd() end

--- Destroys the channel (`rdma_destroy_event_channel`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while ids use it
function cm_channel:close() end

--- Whether `close` has run.
-- @treturn boolean
function cm_channel:is_closed() end

return cm_channel
