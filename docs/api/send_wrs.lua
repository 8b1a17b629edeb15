--- n prepared, linked send WRs (`struct ibv_send_wr[n]` with their SGEs), made by
-- `ibverbs.send_wrs(n [, max_sge])`; posted by `qp:post_send(list [, first, count])`, `qp:wr_post` and
-- `ibverbs.transfer`.  The list keeps what its WRs name (MRs, AHs, MWs, inline strings) alive, and
-- checks they are still open when posted.
--
--     local sl = ibv.send_wrs(16)
--     sl:fill{opcode = "send", sge = {mr = mr, length = 64}, send_flags = {"signaled"}}
--
-- @classmod ibverbs.send_wrs

local send_wrs = {}

--- Sets WR i from a table (the fields of `qp:post_send`).
-- @tparam integer i
-- @tparam table wr
function send_wrs:set(i, wr) end

--- Fills every WR from one template: WR i gets the template's `wr_id` (default 0) plus i-1, and its SGEs
-- moved by (i-1)*stride bytes.
-- @tparam table template a WR table plus `stride` (bytes; default 0)
function send_wrs:fill(template) end

--- Reads or sets WR i's `wr_id`.
-- @tparam integer i
-- @tparam[opt] integer v
-- @treturn integer the `wr_id` (when reading)
function send_wrs:wr_id(i, v) end

--- Reads or sets the length of WR i's first SGE.
-- @tparam integer i
-- @tparam[opt] integer v
-- @treturn integer the length (when reading)
function send_wrs:length(i, v) end

return send_wrs
