--- An `rdma_cm` id (`struct rdma_cm_id`), made by `cm_channel:create_id` (asynchronous: events come on the
-- channel), `ibverbs.cm.create_id` or `ibverbs.cm.create_ep` (synchronous: each call waits for its event).
--
-- Fields: `port_num`, `ps`, `qp_type`, `context` and `pd` (librdmacm's, borrowed), `qp`, `srq`,
-- `send_cq`, `recv_cq` (ordinary objects the id owns and closes with it), `event` (a synchronous
-- id's last event).
--
-- @classmod ibverbs.cm_id

local cm_id = {}

--- Binds to a local address (`rdma_bind_addr`).
-- @tparam string addr "ip:port" (port 0: any)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EADDRINUSE, EADDRNOTAVAIL, ENODEV
function cm_id:bind_addr(addr) end

--- Listens for connection requests (`rdma_listen`).
-- @tparam[opt] integer backlog
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL not bound
function cm_id:listen(backlog) end

--- Resolves the destination address (`"addr_resolved"` event) (`rdma_resolve_addr`).
-- @tparam string|nil src source address or nil
-- @tparam string dst "ip:port"
-- @tparam[opt] integer timeout_ms (default 2000)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EADDRNOTAVAIL, ENODEV, ENETUNREACH, ETIMEDOUT (synchronous ids)
function cm_id:resolve_addr(src, dst, timeout_ms) end

--- Resolves the route (`"route_resolved"`) (`rdma_resolve_route`).
-- @tparam[opt] integer timeout_ms (default 2000)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL address not resolved; ETIMEDOUT
function cm_id:resolve_route(timeout_ms) end

--- Connects (`rdma_connect`); on a "udp" id sends a SIDR request.
-- @tparam[opt] table conn_param `private_data`, `responder_resources`, `initiator_depth`, `flow_control`,
-- `retry_count`, `rnr_retry_count`, `srq`, `qp_num` (needed when the id has no QP)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL route not resolved; ECONNREFUSED, ETIMEDOUT (synchronous ids); EISCONN
function cm_id:connect(conn_param) end

--- Accepts a connection request (`rdma_accept`).
-- @tparam[opt] table conn_param as `connect`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL
function cm_id:accept(conn_param) end

--- Rejects a connection request (`rdma_reject`); the peer gets "rejected" with the private data.
-- @tparam[opt] string private_data
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL
function cm_id:reject(private_data) end

--- Disconnects (`rdma_disconnect`); a synchronous id waits for the peer's disconnect.
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL not connected; ENOTCONN
function cm_id:disconnect() end

--- Completes the connection of an id without a QP, after `"connect_response"` (`rdma_establish`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL
function cm_id:establish() end

--- Takes the next connection request of a synchronous listener (`rdma_get_request`).
-- @tparam[opt=30] number timeout seconds (`math.huge`: wait for the next client)
-- @treturn ibverbs.cm_id a new id (with a QP when the listener was made by `create_ep` with one);
-- `id.event` is the request
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT; EINVAL not a synchronous listener
function cm_id:get_request(timeout) end

--- Moves the id to another channel, or (nil) makes it synchronous (`rdma_migrate_id`).
-- @tparam ibverbs.cm_channel|nil ch
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM
function cm_id:migrate_id(ch) end

--- Sets an option (`rdma_set_option`).
-- @tparam string name "tos", `"ack_timeout"`, "reuseaddr", "afonly", `"ib_path"`
-- @param value integer, boolean, or (`ib_path)` path record bytes
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOSYS
function cm_id:set_option(name, value) end

--- The local address (`rdma_get_local_addr`).
-- @treturn string "ip:port"
function cm_id:get_local_addr() end

--- The peer's address (`rdma_get_peer_addr`).
-- @treturn string "ip:port"
function cm_id:get_peer_addr() end

--- The local port (`rdma_get_src_port`).
-- @treturn integer
function cm_id:get_src_port() end

--- The peer's port (`rdma_get_dst_port`).
-- @treturn integer
function cm_id:get_dst_port() end

--- Joins a multicast group (`"multicast_join"` event with `ud`) (`rdma_join_multicast`, or
-- `rdma_join_multicast_ex` with flags).
-- @tparam string addr
-- @tparam[opt] string flags "fullmember" (default) or `"sendonly_fullmember"`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL no QP or not bound; EADDRNOTAVAIL; ENOSYS
function cm_id:join_multicast(addr, flags) end

--- Leaves a multicast group (`rdma_leave_multicast`).
-- @tparam string addr
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EADDRNOTAVAIL not joined
function cm_id:leave_multicast(addr) end

--- Creates the id's QP (`rdma_create_qp`): on `pd` or the id's PD, with CQs librdmacm makes when none
-- are given.
-- @tparam table init_attr as `pd:create_qp` plus `pd`
-- @treturn ibverbs.qp (also `id.qp`)
-- @return[2] nil, message, errno
-- @errno EINVAL; ENOMEM; what `rdma_create_qp` returns
function cm_id:create_qp(init_attr) end

--- Creates the id's QP with `rdma_create_qp_ex` (the fields of `context:create_qp_ex`).
-- @tparam table init_attr
-- @treturn ibverbs.qp
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM, EOPNOTSUPP
function cm_id:create_qp_ex(init_attr) end

--- Destroys the id's QP (`rdma_destroy_qp`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `rdma_destroy_qp` returns
function cm_id:destroy_qp() end

--- Creates an SRQ on the id (`rdma_create_srq`); a QP made afterwards receives through it.
-- @tparam table attr `max_wr`, `max_sge`, `srq_limit`, `pd`, `srq_type`
-- @treturn ibverbs.srq (also `id.srq`)
-- @return[2] nil, message, errno
-- @errno EEXIST the id has an SRQ; EINVAL; ENOMEM
function cm_id:create_srq(attr) end

--- Creates an SRQ on the id with `rdma_create_srq_ex` (the fields of `context:create_srq_ex`).
-- @tparam table attr
-- @treturn ibverbs.srq
-- @return[2] nil, message, errno
-- @errno EEXIST, EINVAL, ENOMEM, EOPNOTSUPP
function cm_id:create_srq_ex(attr) end

--- Destroys the id's SRQ (`rdma_destroy_srq`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while the id's QP uses it
function cm_id:destroy_srq() end

--- `rdma_post_recv`: one receive into an MR (to the id's SRQ when it has one).
-- @tparam integer wr_id
-- @tparam ibverbs.mr mr
-- @tparam[opt] integer offset
-- @tparam[opt] integer length (default: the rest of the MR)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM queue full; EINVAL no QP
function cm_id:post_recv(wr_id, mr, offset, length) end

--- `rdma_post_send`.
-- @tparam integer wr_id
-- @tparam ibverbs.mr mr
-- @tparam integer offset
-- @tparam integer length
-- @param[opt] flags send flags (default "signaled")
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM, EINVAL
function cm_id:post_send(wr_id, mr, offset, length, flags) end

--- `rdma_post_read`: RDMA read of the peer's memory into the MR.
-- @tparam integer wr_id
-- @tparam ibverbs.mr mr
-- @tparam integer offset
-- @tparam integer length
-- @param flags
-- @tparam integer remote_addr
-- @tparam integer rkey
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM, EINVAL
function cm_id:post_read(wr_id, mr, offset, length, flags, remote_addr, rkey) end

--- `rdma_post_write`: RDMA write from the MR to the peer's memory.
-- @tparam integer wr_id
-- @tparam ibverbs.mr mr
-- @tparam integer offset
-- @tparam integer length
-- @param flags
-- @tparam integer remote_addr
-- @tparam integer rkey
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM, EINVAL
function cm_id:post_write(wr_id, mr, offset, length, flags, remote_addr, rkey) end

--- `rdma_post_ud_send`.
-- @tparam integer wr_id
-- @tparam ibverbs.mr mr
-- @tparam integer offset
-- @tparam integer length
-- @param flags
-- @tparam ibverbs.ah ah
-- @tparam integer remote_qpn
-- @treturn true
-- @return[2] nil, message, errno
-- @errno ENOMEM, EINVAL
function cm_id:post_ud_send(wr_id, mr, offset, length, flags, ah, remote_qpn) end

--- The next send completion (`rdma_get_send_comp`), waiting on the id's send CQ channel.
-- @tparam[opt] number timeout seconds
-- @treturn table a wc table (as `cq:poll`)
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT; EINVAL no QP
function cm_id:get_send_comp(timeout) end

--- The next receive completion (`rdma_get_recv_comp`).
-- @tparam[opt] number timeout seconds
-- @treturn table a wc table
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT; EINVAL no QP
function cm_id:get_recv_comp(timeout) end

--- `rdma_reg_msgs`: an MR for sends and receives on the id's PD (arguments as `pd:reg_mr` without access).
-- @tparam integer|ibverbs.buffer buf
-- @tparam[opt] integer offset
-- @tparam[opt] integer length
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EINVAL the id has no PD yet; ENOMEM
function cm_id:reg_msgs(buf, offset, length) end

--- `rdma_reg_read`: an MR the peer may read.
-- @tparam integer|ibverbs.buffer buf
-- @tparam[opt] integer offset
-- @tparam[opt] integer length
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM
function cm_id:reg_read(buf, offset, length) end

--- `rdma_reg_write`: an MR the peer may write.
-- @tparam integer|ibverbs.buffer buf
-- @tparam[opt] integer offset
-- @tparam[opt] integer length
-- @treturn ibverbs.mr
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM
function cm_id:reg_write(buf, offset, length) end

--- `rdma_dereg_mr`: `mr:close()`.
-- @tparam ibverbs.mr mr
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY
function cm_id:dereg_mr(mr) end

--- Destroys the id (`rdma_destroy_id`, or `rdma_destroy_ep`) after what the cm made for it (QP, SRQ, CQs).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `rdma_destroy_id` returns
function cm_id:close() end

--- Whether `close` has run.
-- @treturn boolean
function cm_id:is_closed() end

--- The attributes that take a QP the cm did not make to a state for this id's connection
-- (`rdma_init_qp_attr`): a table `qp:modify` takes as it is.
-- @tparam string qp_state "init", "rtr" or "rts"
-- @treturn table e.g. for "rtr": `qp_state`, `ah_attr`, `path_mtu`, `dest_qp_num`, `rq_psn`, ...
-- @return[2] nil, message, errno
-- @errno EINVAL the id has no route or connection yet for that state
function cm_id:init_qp_attr(qp_state) end

--- Tells the cm of an event on a QP it did not make (`rdma_notify`), e.g. "comm_est" when data
-- arrived before the connection was established.
-- @tparam string|integer event an async event type name
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL the id is not connecting
function cm_id:notify(event) end

--- The enhanced connection establishment options `connect`/`accept` offer (`rdma_set_local_ece`);
-- only on an id without a cm QP.
-- @tparam table ece `vendor_id` (not 0), `options`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL vendor_id 0, or the id has a QP
function cm_id:set_local_ece(ece) end

--- The ECE options the peer offered (`rdma_get_remote_ece`); only on an id without a cm QP.
-- @treturn table `vendor_id`, `options`
-- @return[2] nil, message, errno
-- @errno EINVAL the id has a QP
function cm_id:get_remote_ece() end

--- Rejects a connection request for unsupported ECE options (`rdma_reject_ece`: reason 35).
-- @tparam[opt] string private_data at most 255 bytes
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL not a request's id
function cm_id:reject_ece(private_data) end

--- Sends a scatter/gather list (`rdma_post_sendv`) on a connected id's QP.
-- @tparam integer wr_id
-- @tparam {table,...} sg_list SGE tables as in `qp:post_send` (`{mr =, offset =, length =}` or
-- `{addr =, length =, lkey =}`), at most 16
-- @tparam[opt] {string,...}|integer flags send flags (default "signaled"); "inline" needs MR SGEs
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `ibv_post_send` returns (ENOMEM queue full, EINVAL too many SGEs, ...)
function cm_id:post_sendv(wr_id, sg_list, flags) end

--- Posts a receive into a scatter/gather list (`rdma_post_recvv`), on the id's SRQ when it has one.
-- @tparam integer wr_id
-- @tparam {table,...} sg_list as `post_sendv`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `ibv_post_recv` returns
function cm_id:post_recvv(wr_id, sg_list) end

--- RDMA-reads remote memory into a scatter/gather list (`rdma_post_readv`).
-- @tparam integer wr_id
-- @tparam {table,...} sg_list as `post_sendv`
-- @tparam[opt] {string,...}|integer flags
-- @tparam integer remote_addr
-- @tparam integer rkey
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `ibv_post_send` returns
function cm_id:post_readv(wr_id, sg_list, flags, remote_addr, rkey) end

--- RDMA-writes a scatter/gather list to remote memory (`rdma_post_writev`).
-- @tparam integer wr_id
-- @tparam {table,...} sg_list as `post_sendv`
-- @tparam[opt] {string,...}|integer flags
-- @tparam integer remote_addr
-- @tparam integer rkey
-- @treturn true
-- @return[2] nil, message, errno
-- @errno what `ibv_post_send` returns
function cm_id:post_writev(wr_id, sg_list, flags, remote_addr, rkey) end

return cm_id
