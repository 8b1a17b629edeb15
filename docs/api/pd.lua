--- A protection domain (`struct ibv_pd`), made by `context:alloc_pd`.
--
--     local pd <close> = assert(ctx:alloc_pd())
--     local mr = assert(pd:reg_mr(4096, {"local_write"}))
--
-- @classmod ibverbs.pd

local pd = {}

--- The context the PD was allocated on.
-- @treturn ibverbs.context
function pd:context() end

--- Registers memory (`ibv_reg_mr`): new zeroed memory the MR owns, or part of an `ibverbs.buffer`
-- (kept alive by the MR).
-- @tparam integer|ibverbs.buffer size_or_buffer bytes to allocate, or a buffer
-- @tparam integer|{string,...} access `ibv.ACCESS_*` bits or names (`"local_write"`, `"remote_write"`,
-- `"remote_read"`, `"remote_atomic"`, `"mw_bind"`, `"zero_based"`, `"on_demand"`, ...)
-- @tparam[opt] integer offset into the buffer (default 0)
-- @tparam[opt] integer length (default: the rest of the buffer)
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EINVAL bad access flags (remote write without local write); ENOMEM; EOPNOTSUPP (`on_demand` without ODP)
function pd:reg_mr(size_or_buffer, access, offset, length) end

--- Allocates a memory window (`ibv_alloc_mw`).
-- @tparam integer|string type 1, 2, `"type_1"` or `"type_2"`
-- @treturn ibverbs.mw
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP, ENOMEM
function pd:alloc_mw(type) end

--- Creates a queue pair (`ibv_create_qp`).
-- @tparam table init_attr `qp_type` ("rc", "uc", "ud", `"raw_packet"`; "xrc" with `xrc_domain`: the legacy
-- XRC send QP), `send_cq`, `recv_cq`, `srq`, `cap` = {`max_send_wr`, `max_recv_wr`, `max_send_sge`,
-- `max_recv_sge`, `max_inline_data`}, `sq_sig_all`
-- @treturn ibverbs.qp (its `cap` is what the device granted)
-- @return[2] nil, message, errno
-- @errno EINVAL caps above the device's limits; ENOMEM; EOPNOTSUPP `qp_type` the device lacks
function pd:create_qp(init_attr) end

--- Creates a shared receive queue (`ibv_create_srq`).
-- @tparam table attr `max_wr`, `max_sge`, `srq_limit` (flat or in `attr = {...}`)
-- @treturn ibverbs.srq (`max_wr`, `max_sge`: what the device granted)
-- @return[2] nil, message, errno
-- @errno EINVAL sizes above the device's limits; ENOMEM; EOPNOTSUPP
function pd:create_srq(attr) end

--- Legacy OFED XRC: an XRC SRQ on a domain (over `ibv_create_srq_ex`).
-- @tparam ibverbs.xrc_domain d
-- @tparam ibverbs.cq cq
-- @tparam table attr `{attr = {max_wr =, max_sge =}}`
-- @treturn ibverbs.srq (`xrc_srq_num`)
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP device without XRC; EINVAL
function pd:create_xrc_srq(d, cq, attr) end

--- Creates an address handle (`ibv_create_ah`) for UD sends.
-- @tparam table ah_attr `dlid`, `sl`, `src_path_bits`, `static_rate`, `port_num`, `is_global`,
-- `grh` = {`dgid` (text or 16 bytes), `sgid_index`, `hop_limit`, `traffic_class`, `flow_label`}
-- @treturn ibverbs.ah
-- @return[2] nil, message, errno
-- @errno EINVAL; ENOENT no route to the GID; ETIMEDOUT neighbour resolution (RoCE)
function pd:create_ah(ah_attr) end

--- Creates an address handle that answers a received UD completion (`ibv_create_ah_from_wc`).
-- @tparam table|ibverbs.wc_array wc a wc table, or a wc array followed by its index
-- @tparam string grh the 40-byte GRH the receive buffer starts with
-- @tparam integer port
-- @treturn ibverbs.ah
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOENT
function pd:create_ah_from_wc(wc, grh, port) end

--- Deallocates the PD (`ibv_dealloc_pd`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while MRs, MWs, QPs, SRQs or AHs use it (the message says how many)
function pd:close() end

--- Whether `close` has run.
-- @treturn boolean
function pd:is_closed() end

--- Registers memory the device addresses at `iova` (`ibv_reg_mr_iova2`): as `reg_mr`, the iova first.
-- SGEs and remote addresses name the memory by iova; `mr.addr` stays the host address (so an
-- `mr =` SGE, which computes host addresses, does not fit it: give `addr`, `length`, `lkey`).
-- @tparam integer iova the address the device sees
-- @tparam integer|ibverbs.buffer size_or_buffer
-- @tparam integer|{string,...} access
-- @tparam[opt] integer offset into the buffer
-- @tparam[opt] integer length
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EINVAL; ENOMEM
function pd:reg_mr_iova(iova, size_or_buffer, access, offset, length) end

--- Allocates the null MR (`ibv_alloc_null_mr`): writes to it are dropped, reads give zeros.
-- @treturn ibverbs.dev_mr
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function pd:alloc_null_mr() end

--- Registers a dma-buf (`ibv_reg_dmabuf_mr`).
-- @tparam table attr `fd` (the dma-buf), `length`, `offset` (0), `iova` (default `offset`), `access`
-- @treturn ibverbs.dev_mr
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware); EBADF
function pd:reg_dmabuf_mr(attr) end

--- Advises the device about ranges of on-demand-paging MRs (`ibv_advise_mr`).
-- @tparam table attr `advice` (`"prefetch"`, `"prefetch_write"`, `"prefetch_no_fault"`), `flags`
-- (`"flush"`), and the ranges as `sge` or `sg_list` (at most 16)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware); EINVAL an MR without ODP
function pd:advise_mr(attr) end

--- Registers part of a device memory allocation (`ibv_reg_dm_mr`).
-- @tparam ibverbs.dm dm
-- @tparam integer offset in the DM
-- @tparam integer length
-- @tparam[opt] integer|{string,...} access (default `{"local_write", "zero_based"}`)
-- @treturn ibverbs.dev_mr (keeps the PD and the DM alive)
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP; EINVAL
function pd:reg_dm_mr(dm, offset, length, access) end
--- An MR made on the PD this one was imported from (`ibv_import_mr`).  Closing it calls
-- `ibv_unimport_mr`.  Its memory is the exporting process's: `read`, `write` and `u64` refuse it.
-- @tparam integer mr_handle the MR's `handle`
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider cannot import (rxe)
function pd:import_mr(mr_handle) end

return pd
