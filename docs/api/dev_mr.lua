--- A memory region over memory the CPU cannot reach through it (`struct ibv_mr`), made by
-- `pd:reg_dm_mr` (device memory), `pd:reg_dmabuf_mr` or `pd:alloc_null_mr`.
--
-- Fields: `lkey`, `rkey`, `addr`, `length`, `handle`.  It has no `read`/`write` and is not taken
-- as `mr =` in an SGE: SGEs name it with `addr`, `length`, `lkey`.
--
-- @classmod ibverbs.dev_mr

local dev_mr = {}

--- Deregisters it (`ibv_dereg_mr`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY a memory window still bound to it
function dev_mr:close() end

--- Whether `close` has run.
-- @treturn boolean
function dev_mr:is_closed() end

return dev_mr
