--- A completion queue (`struct ibv_cq`, or `ibv_cq_ex` when made with `wc_flags`).
--
-- Field: `cqe` (the size granted).
--
--     local wcs = ibv.wc_array(32)
--     local n, bad = cq:poll(wcs)          -- allocates nothing
--     if bad then error(wcs:status(bad)) end  -- every completion checked at once
--     for _, wc in ipairs(cq:poll(8)) do print(wc.wr_id, wc.status) end
--
-- @classmod ibverbs.cq

local cq = {}

--- Polls completions (`ibv_poll_cq`; on a `cq_ex` `ibv_start_poll`/`ibv_next_poll`/`ibv_end_poll`).
-- @tparam[opt] ibverbs.wc_array|integer wcs a wc array to fill, or the most completions to return as
-- tables (default 1)
-- @treturn integer|{table,...} with a wc array, the count filled; else an array of wc tables
-- (`wr_id`, `status` ("success", `"wr_flush_err"`, ...), `opcode`, `vendor_err`, `byte_len`, `imm_data`,
-- `qp_num`, `src_qp`, `wc_flags`, `pkey_index`, `slid`, `sl`, `dlid_path_bits`)
-- @treturn integer|nil the index of the first completion whose status is not success, or nil when
-- all of them succeeded: a loop checks a whole poll without an accessor call per completion
-- @return[2] nil, message, errno
-- @errno what the provider's poll returns (EINVAL, ...)
function cq:poll(wcs) end

--- Polls until n completions have arrived or the timeout passed (a C loop).
-- @tparam ibverbs.wc_array wcs
-- @tparam integer n 1 to #wcs
-- @tparam[opt] number timeout seconds
-- @treturn integer the completions in wcs (less than n after a timeout)
-- @return[2] nil, message, errno
-- @errno as `poll`
function cq:wait(wcs, n, timeout) end

--- Asks for a completion event on the CQ's channel (`ibv_req_notify_cq`).
-- @tparam[opt] boolean solicited_only
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL
function cq:req_notify(solicited_only) end

--- Acknowledges events taken from the channel (`ibv_ack_cq_events`); closing the CQ acknowledges the rest.
-- @tparam integer n
function cq:ack_events(n) end

--- Resizes the CQ (`ibv_resize_cq`); `cq.cqe` is updated.
-- @tparam integer cqe
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL smaller than its outstanding completions or above `max_cqe`; EOPNOTSUPP
function cq:resize(cqe) end

--- Destroys the CQ (`ibv_destroy_cq`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while QPs or SRQs use it
function cq:close() end

--- Whether `close` has run.
-- @treturn boolean
function cq:is_closed() end

--- Sets completion moderation (`ibv_modify_cq`): an event after `cq_count` completions or
-- `cq_period` microseconds.
-- @tparam table attr `cq_count`, `cq_period`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function cq:modify(attr) end

--- Polls a cq_ex (made with `wc_flags`) into tables: the fields of `poll(n)` plus every
-- `ibv_wc_read_*` field its `wc_flags` enabled: `completion_ts`, `completion_wallclock_ns`, `cvlan`,
-- `flow_tag`, `tm_info` = {`tag`, `priv`}.
-- @tparam[opt] integer n at most this many (16)
-- @treturn {table,...} the completions (maybe none)
-- @return[2] nil, message, errno
-- @errno raises on a CQ made without `wc_flags`
function cq:poll_ex(n) end

return cq
