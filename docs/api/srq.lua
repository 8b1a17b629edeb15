--- A shared receive queue (`struct ibv_srq`): basic, XRC or tag matching.  Made by `pd:create_srq`,
-- `context:create_srq_ex`, `pd:create_xrc_srq` or `cm_id:create_srq`.
--
-- Fields: `max_wr`, `max_sge` (granted; updated by a resize), `srq_type` ("basic", "xrc", "tm"),
-- `srq_num` (XRC; legacy `xrc_srq_num`).
--
-- @classmod ibverbs.srq

local srq = {}

--- Resizes or arms the limit event (`ibv_modify_srq`; the mask comes from the fields given).
-- @tparam table attr `max_wr` (resize), `srq_limit` (arm: `"srq_limit_reached"` async event)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL limit above `max_wr`, a size the device refuses; EOPNOTSUPP resize without `DEVICE_SRQ_RESIZE`
function srq:modify(attr) end

--- Queries the SRQ (`ibv_query_srq`).
-- @tparam[opt] table t a table to fill
-- @treturn table `max_wr`, `max_sge`, `srq_limit`
-- @return[2] nil, message, errno
-- @errno EINVAL
function srq:query(t) end

--- The XRC SRQ number (`ibv_get_srq_num`).
-- @treturn integer
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP not an XRC SRQ, or the provider lacks it
function srq:get_srq_num() end

--- Posts receive WRs (`ibv_post_srq_recv`).
-- @tparam table|{table,...}|ibverbs.recv_wrs wrs as `qp:post_recv`
-- @tparam[opt] integer first
-- @tparam[opt] integer count
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno ENOMEM queue full; EINVAL too many SGEs
function srq:post_recv(wrs, first, count) end

--- Destroys the SRQ (`ibv_destroy_srq`; `rdma_destroy_srq` for a cm id's).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while QPs use it
function srq:close() end

--- Whether `close` has run.
-- @treturn boolean
function srq:is_closed() end

--- Posts tag-matching operations on a tag-matching SRQ (`ibv_post_srq_ops`).
-- @tparam table|{table,...} ops each `opcode` (`"tag_add"`, `"tag_del"`, `"tag_sync"`), `wr_id`,
-- `flags` (`"signaled"`, `"tm_sync"`), `unexpected_cnt`, `handle` (tag_del), and for tag_add
-- `recv_wr_id`, `tag`, `mask` (default all ones), `sge` or `sg_list`; at most 16 ops
-- @treturn {integer,...} each op's handle (a tag_add's new one)
-- @return[2] nil, message, errno, index of the failing op
-- @errno EOPNOTSUPP (rxe has no tag matching; not verified on hardware)
function srq:post_srq_ops(ops) end

return srq
