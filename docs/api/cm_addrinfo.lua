--- The result of `ibverbs.cm.getaddrinfo` (`struct rdma_addrinfo` list).  Fields of the first entry:
-- `src_addr`, `dst_addr`, `family`, `qp_type`, `port_space`, `flags`; `#ai` is the number of entries.
-- @classmod ibverbs.cm_addrinfo

local cm_addrinfo = {}

--- Every entry as a table (`flags`, `family`, `qp_type`, `port_space`, `src_addr`, `dst_addr`,
-- `src_canonname`, `dst_canonname`, ...).
-- @treturn {table,...}
function cm_addrinfo:list() end

--- Frees the list (`rdma_freeaddrinfo`).
-- @treturn true
function cm_addrinfo:close() end

--- Whether `close` has run.
-- @treturn boolean
function cm_addrinfo:is_closed() end

return cm_addrinfo
