--- A flow steering rule (`struct ibv_flow`), made by `qp:create_flow`.  Not verified on hardware
-- (rxe has no flow steering).
--
-- @classmod ibverbs.flow

local flow = {}

--- Destroys the rule (`ibv_destroy_flow`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL as the provider reports
function flow:close() end

--- Whether `close` has run.
-- @treturn boolean
function flow:is_closed() end

return flow
