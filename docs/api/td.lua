--- A thread domain (`struct ibv_td`), made by `context:alloc_td`, given to
-- `context:alloc_parent_domain`.  Not verified on hardware (rxe has none).
--
-- @classmod ibverbs.td

local td = {}

--- Deallocates it (`ibv_dealloc_td`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY a parent domain still uses it
function td:close() end

--- Whether `close` has run.
-- @treturn boolean
function td:is_closed() end

return td
