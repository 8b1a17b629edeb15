--- A reusable array of work completions (`struct ibv_wc[n]`), made by `ibverbs.wc_array(n)`,
-- filled by `cq:poll(wcs)` and `cq:wait`.  `#wcs` is its capacity.
--
-- The accessors take an index 1 <= i <= #wcs and allocate nothing (an index out of range raises).
--
--     local n = cq:poll(wcs)
--     for i = 1, n do if wcs:status(i) ~= "success" then error(wcs:status(i)) end end
--
-- @classmod ibverbs.wc_array

local wc_array = {}

--- The number of completions the last poll filled in.
-- @treturn integer
function wc_array:count() end

--- A whole completion as a table (the fields of `cq:poll`'s tables).
-- @tparam integer i
-- @tparam[opt] table t a table to fill (and return), its fields of an earlier completion cleared
-- @treturn table
function wc_array:get(i, t) end

--- The id of the WR that completed.
-- @tparam integer i
-- @treturn integer the WR's id
function wc_array:wr_id(i) end
--- The completion status.
-- @tparam integer i
-- @treturn string "success", `"loc_len_err"`, `"wr_flush_err"`, `"rem_access_err"`, ...
function wc_array:status(i) end
--- What completed.
-- @tparam integer i
-- @treturn string "send", `"rdma_write"`, `"rdma_read"`, `"comp_swap"`, `"fetch_add"`, `"bind_mw"`, `"local_inv"`, "recv", `"recv_rdma_with_imm"`, ...
function wc_array:opcode(i) end
--- The vendor error syndrome.
-- @tparam integer i
-- @treturn integer the vendor's error syndrome
function wc_array:vendor_err(i) end
--- The bytes received.
-- @tparam integer i
-- @treturn integer bytes received
function wc_array:byte_len(i) end
--- The immediate data.
-- @tparam integer i
-- @treturn integer|nil the immediate data (host order), nil without `IBV_WC_WITH_IMM`
function wc_array:imm_data(i) end
--- The rkey a send with invalidate invalidated.
-- @tparam integer i
-- @treturn integer the invalidated rkey (meaningful with `IBV_WC_WITH_INV)`
function wc_array:invalidated_rkey(i) end
--- The local QP number.
-- @tparam integer i
-- @treturn integer the local QP number
function wc_array:qp_num(i) end
--- The remote QP number (UD).
-- @tparam integer i
-- @treturn integer the remote QP number (UD)
function wc_array:src_qp(i) end
--- The completion flags.
-- @tparam integer i
-- @treturn integer `IBV_WC_*` flags (GRH, `WITH_IMM`, ...)
function wc_array:wc_flags(i) end
--- The `P_Key` index (GSI QPs).
-- @tparam integer i
-- @treturn integer
function wc_array:pkey_index(i) end
--- The source LID (UD).
-- @tparam integer i
-- @treturn integer
function wc_array:slid(i) end
--- The service level (UD).
-- @tparam integer i
-- @treturn integer
function wc_array:sl(i) end
--- The destination LID path bits (UD).
-- @tparam integer i
-- @treturn integer
function wc_array:dlid_path_bits(i) end

return wc_array
