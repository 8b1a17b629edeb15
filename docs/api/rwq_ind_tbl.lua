--- A receive WQ indirection table (`struct ibv_rwq_ind_table`), made by
-- `context:create_rwq_ind_table`, for RSS QPs (`create_qp_ex{rwq_ind_tbl = tbl, rx_hash_conf = ...}`).
--
-- Fields: `ind_tbl_num`, `handle`.  It keeps its WQs alive.  Not verified on hardware.
--
-- @classmod ibverbs.rwq_ind_tbl

local rwq_ind_tbl = {}

--- Destroys it (`ibv_destroy_rwq_ind_table`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY a QP still uses it
function rwq_ind_tbl:close() end

--- Whether `close` has run.
-- @treturn boolean
function rwq_ind_tbl:is_closed() end

return rwq_ind_tbl
