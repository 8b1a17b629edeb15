--- An XRC domain (`struct ibv_xrcd`), made by `context:open_xrcd`.
-- @classmod ibverbs.xrcd

local xrcd = {}

--- Closes the domain (`ibv_close_xrcd`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while XRC QPs or SRQs use it
function xrcd:close() end

--- Whether `close` has run.
-- @treturn boolean
function xrcd:is_closed() end

return xrcd
