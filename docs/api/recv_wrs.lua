--- n prepared, linked receive WRs (`struct ibv_recv_wr[n]` with their SGEs), made by
-- `ibverbs.recv_wrs(n [, max_sge])`; posted by `qp:post_recv(list [, first, count])` and
-- `srq:post_recv` in one C call without allocating.  `#list` is n; indexes are 1-based.
--
--     local rl = ibv.recv_wrs(64)
--     rl:fill{sge = {mr = mr, length = 64}, stride = 64}   -- WR i: wr_id i-1, bytes at (i-1)*64
--
-- @classmod ibverbs.recv_wrs

local recv_wrs = {}

--- Sets WR i from a table (`wr_id`, `sg_list` or `sge`); a WR that fails to parse is left as it was.
-- @tparam integer i
-- @tparam table wr
function recv_wrs:set(i, wr) end

--- Fills every WR from one template: WR i gets the template's `wr_id` (default 0) plus i-1, and its SGEs
-- moved by (i-1)*stride bytes.
-- @tparam table template a WR table plus `stride` (bytes; default 0: every WR on the same bytes)
function recv_wrs:fill(template) end

--- Reads or sets WR i's `wr_id`.
-- @tparam integer i
-- @tparam[opt] integer v
-- @treturn integer the `wr_id` (when reading)
function recv_wrs:wr_id(i, v) end

--- Reads or sets the length of WR i's first SGE.
-- @tparam integer i
-- @tparam[opt] integer v
-- @treturn integer the length (when reading)
function recv_wrs:length(i, v) end

return recv_wrs
