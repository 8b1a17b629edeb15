--- The data path for LuaJIT scripts through the FFI: `require "ibverbs.ffi"` (under Lua 5.4 it raises
-- "ibverbs.ffi needs LuaJIT").  WRs and completions are read and written as C structs; posting and
-- polling are single FFI calls into the module's flat C ABI (`ibvl_ffi_*`), because the verbs data-path
-- calls are `static inline` in verbs.h.
--
--     local xffi = require "ibverbs.ffi"
--     local q, c = xffi.qp(qp), xffi.cq(cq)
--     local rw, wc = xffi.recv_wrs(rl), xffi.wc_array(wcs)
--     assert(xffi.post_recv(q, rw))
--     local n = assert(xffi.poll_cq(c, wc))
--
-- A span (`s.p` the raw pointer, `s.n` the element count, `s:at(i)` a checked 0-based element) keeps
-- the object it comes from alive.  A handle of a closed object makes the calls fail with EBADF.
--
-- @module ibverbs.ffi

local M = {}

--- The C declarations of the verbs structs this module uses (checked by `make check-ffi`).
M.cdef = ""
--- The declarations of the flat C calls.
M.cdef_calls = ""
--- The core module loaded as an FFI library (`C.ibvl_ffi_*`, and the enums: `C.IBV_WC_SUCCESS`, ...);
-- under `ibvlua`, where the core is built in, `ffi.C` (the program exports the calls).
M.C = nil
--- The file `C` was loaded from (nil under `ibvlua`).
M.path = ""

--- A handle of a QP for the post calls.
-- @tparam ibverbs.qp qp
-- @return handle
function M.qp(qp) end

--- A handle of a CQ for `poll_cq` and `req_notify_cq`.
-- @tparam ibverbs.cq cq
-- @return handle
function M.cq(cq) end

--- A handle of an SRQ for `post_srq_recv`.
-- @tparam ibverbs.srq srq
-- @return handle
function M.srq(srq) end

--- The verbs pointer of an open object, cast to a C type.
-- @param obj
-- @tparam string ctype `"struct ibv_qp *"`, ...
-- @return cdata
function M.ptr(obj, ctype) end

--- A checked view of n elements at ptr.
-- @tparam string elem element C type
-- @param ptr
-- @tparam integer n
-- @param[opt] owner kept alive by the span
-- @return span
function M.span(elem, ptr, n, owner) end

--- The bytes of an MR or a buffer (`uint8_t` span).
-- @tparam ibverbs.mr|ibverbs.buffer obj
-- @return span
function M.mem(obj) end

--- The WRs of a receive list (`struct ibv_recv_wr` span).
-- @tparam ibverbs.recv_wrs list
-- @return span
function M.recv_wrs(list) end

--- The WRs of a send list (`struct ibv_send_wr` span).
-- @tparam ibverbs.send_wrs list
-- @return span
function M.send_wrs(list) end

--- The completions of a wc array (`struct ibv_wc` span).
-- @tparam ibverbs.wc_array wcs
-- @return span
function M.wc_array(wcs) end

--- The SGEs of a WR list in one array (`max_sge` per WR).
-- @param list
-- @return span
function M.sges(list) end

--- Chains every WR of a span to the next one, as prepared lists are.
-- @param span
-- @return span
function M.link(span) end

--- Posts receive WRs of a span (0-based first).
-- @param q handle
-- @param span
-- @tparam[opt] integer first
-- @tparam[opt] integer count
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno EBADF closed QP; ENOMEM queue full; EINVAL
function M.post_recv(q, span, first, count) end

--- Posts send WRs of a span.
-- @param q handle
-- @param span
-- @tparam[opt] integer first
-- @tparam[opt] integer count
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno EBADF, ENOMEM, EINVAL
function M.post_send(q, span, first, count) end

--- Posts receive WRs to an SRQ.
-- @param s handle
-- @param span
-- @tparam[opt] integer first
-- @tparam[opt] integer count
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno EBADF, ENOMEM, EINVAL
function M.post_srq_recv(s, span, first, count) end

--- Polls into a wc span.
-- @param c handle
-- @param span
-- @tparam[opt] integer max (default: the span's size)
-- @treturn integer completions filled
-- @return[2] nil, message, errno
-- @errno EBADF closed CQ
function M.poll_cq(c, span, max) end

--- Asks for a completion event.
-- @param c handle
-- @tparam[opt] boolean solicited_only
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBADF, EINVAL
function M.req_notify_cq(c, solicited_only) end

return M
