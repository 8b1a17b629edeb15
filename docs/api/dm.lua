--- Device memory (`struct ibv_dm`), made by `context:alloc_dm`: memory on the adapter.
--
--     local dm = assert(ctx:alloc_dm(4096))
--     dm:memcpy_to(0, "data"); dm:memcpy_from(0, 4)
--     local mr = assert(pd:reg_dm_mr(dm, 0, 4096))
--
-- Fields: `length`, `handle`.  Not verified on hardware (rxe has no device memory).
--
-- @classmod ibverbs.dm

local dm = {}

--- Copies a string into the device memory (`ibv_memcpy_to_dm`).
-- @tparam integer offset
-- @tparam string data
-- @treturn true
-- @return[2] nil, message, errno
-- @errno raises when the range lies outside the DM
function dm:memcpy_to(offset, data) end

--- Copies device memory out (`ibv_memcpy_from_dm`).
-- @tparam integer offset
-- @tparam integer length
-- @treturn string
-- @return[2] nil, message, errno
-- @errno raises when the range lies outside the DM; EIO as the provider reports
function dm:memcpy_from(offset, length) end

--- Frees the device memory (`ibv_free_dm`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY an MR still registered on it
function dm:close() end

--- Whether `close` has run.
-- @treturn boolean
function dm:is_closed() end

return dm
