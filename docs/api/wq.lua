--- A receive work queue (`struct ibv_wq`), made by `context:create_wq`.
--
--     local wq = assert(ctx:create_wq{pd = pd, cq = cq, max_wr = 64})
--     assert(wq:modify{wq_state = "rdy"})
--     assert(wq:post_recv{wr_id = 1, sge = {mr = mr, length = 2048}})
--
-- Fields: `wq_num`, `state` (`"reset"`, `"rdy"`, `"err"`), `max_wr`, `max_sge` (granted), `handle`.
-- A `wq_fatal` async event names it.  Not verified on hardware (rxe has no WQs).
--
-- @classmod ibverbs.wq

local wq = {}

--- Modifies the WQ (`ibv_modify_wq`); the mask comes from the fields given.
-- @tparam table attr `wq_state`, `curr_wq_state`, `flags`, `flags_mask` (default `flags`)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL a state change the WQ cannot make
function wq:modify(attr) end

--- Posts receives (`ibv_post_wq_recv`), as `qp:post_recv`.
-- @tparam table|{table,...}|ibverbs.recv_wrs wrs
-- @tparam[opt] integer first with a list
-- @tparam[opt] integer count with a list
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno ENOMEM the WQ is full; EINVAL more SGEs than `max_sge`
function wq:post_recv(wrs, first, count) end

--- Destroys the WQ (`ibv_destroy_wq`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY an indirection table still uses it
function wq:close() end

--- Whether `close` has run.
-- @treturn boolean
function wq:is_closed() end

return wq
