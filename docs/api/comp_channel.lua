--- A completion event channel (`struct ibv_comp_channel`), made by `context:create_comp_channel`.
--
-- Field: `fd`.  A CQ created with `channel = ch` reports on it after `cq:req_notify()`.
--
--     local cq = assert(ctx:create_cq{cqe = 64, channel = ch})
--     cq:req_notify()
--     local got = assert(ch:get_event(1.0)); got:ack_events(1)
--
-- @classmod ibverbs.comp_channel

local comp_channel = {}

--- Waits for the next completion event (`ibv_get_cq_event`); interruptible by SIGINT.
-- @tparam[opt] number timeout seconds (default: for ever)
-- @treturn ibverbs.cq the CQ that has completions (acknowledge with `cq:ack_events`)
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT nothing came in time
function comp_channel:get_event(timeout) end

--- Destroys the channel (`ibv_destroy_comp_channel`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while CQs use it
function comp_channel:close() end

--- Whether `close` has run.
-- @treturn boolean
function comp_channel:is_closed() end

return comp_channel
