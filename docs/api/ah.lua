--- An address handle (`struct ibv_ah`) for UD sends, made by `pd:create_ah` or `pd:create_ah_from_wc`.
-- A send WR names it: `{ah = ah, remote_qpn = n, remote_qkey = k, ...}`.
-- @classmod ibverbs.ah

local ah = {}

--- Destroys the AH (`ibv_destroy_ah`).  A prepared send WR list that names it does not hold it:
-- posting that list afterwards raises "WR 1: attempt to use a closed ibverbs.ah".
-- @treturn true
-- @return[2] nil, message, errno
-- @errno as the provider's destroy gives it (EINVAL, EIO)
function ah:close() end

--- Whether `close` has run.
-- @treturn boolean
function ah:is_closed() end

return ah
