--- A memory window (`struct ibv_mw`), made by `pd:alloc_mw`.
--
-- Fields: `rkey`, `type` (1 or 2).  A type 2 window is bound with a `bind_mw` send WR
-- (`qp:post_send{opcode = "bind_mw", mw = mw, rkey = ibv.inc_rkey(mw.rkey), bind_info = {...}}`).
--
-- @classmod ibverbs.mw

local mw = {}

--- Binds a type 1 window (`ibv_bind_mw`).
-- @tparam ibverbs.qp qp the QP that posts the bind
-- @tparam table bind `mr`, `addr`, `length`, `mw_access_flags` (flags or names)
-- @tparam[opt] table wr `wr_id`, `send_flags`
-- @treturn integer the window's new rkey
-- @return[2] nil, message, errno
-- @errno EINVAL (type 2 window, range outside the MR, MR without `mw_bind)`; ENOMEM send queue full
function mw:bind(qp, bind, wr) end

--- Deallocates the window (`ibv_dealloc_mw`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY
function mw:close() end

--- Whether `close` has run.
-- @treturn boolean
function mw:is_closed() end

return mw
