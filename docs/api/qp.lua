--- A queue pair (`struct ibv_qp`), made by `pd:create_qp`, `context:create_qp_ex`, `context:open_qp`
-- or a cm id.
--
-- Fields: `qp_num`, `qp_type` ("rc", "uc", "ud", `"raw_packet"`, `"xrc_send"`, `"xrc_recv"`), `state`,
-- `cap` (what the device granted: `max_send_wr`, `max_recv_wr`, `max_send_sge`, `max_recv_sge`,
-- `max_inline_data`).
--
--     assert(qp:connect({qpn = remote.qpn, psn = remote.psn, gid = remote.gid}, {sgid_index = 1}))
--     assert(qp:post_recv(rl)); assert(qp:post_send{opcode = "send", sge = {mr = mr, length = 64}})
--
-- A post returns `nil, message, errno, index` on failure, index being the 1-based position of the
-- first WR that was not posted.
--
-- @classmod ibverbs.qp

local qp = {}

--- Modifies the QP (`ibv_modify_qp`); the attribute mask is computed from the fields given.
-- @tparam table attr `qp_state` ("reset", "init", "rtr", "rts", "sqd", "sqe", "err"), `cur_qp_state`,
-- `path_mtu` (bytes), `path_mig_state`, `qkey`, `rq_psn`, `sq_psn`, `dest_qp_num`, `qp_access_flags`,
-- `cap`, `ah_attr` (as `pd:create_ah`), `alt_ah_attr`, `pkey_index`, `alt_pkey_index`,
-- `en_sqd_async_notify`, `max_rd_atomic`, `max_dest_rd_atomic`, `min_rnr_timer`, `port_num`,
-- `timeout`, `retry_cnt`, `rnr_retry`, `alt_port_num`, `alt_timeout`, `rate_limit`;
-- or an `ibverbs.qp_attr` made from such a table by `ibv.qp_attr` (parsed once)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL a transition or attribute the state machine refuses; ENOENT/ETIMEDOUT
-- the destination GID does not resolve (RoCE)
function qp:modify(attr) end

--- Queries the QP (`ibv_query_qp`, every attribute).
-- @tparam[opt] table t a table to fill
-- @treturn table the fields `modify` takes, plus `qp_state`, `sq_draining`, `cap`
-- @return[2] nil, message, errno
-- @errno EINVAL
function qp:query(t) end

--- Posts receive WRs (`ibv_post_recv`).
-- @tparam table|{table,...}|ibverbs.recv_wrs wrs one WR `{wr_id =, sg_list = {{mr =, offset =, length =},
-- ...}}` (or `sge = {...}` for one SGE; an SGE may also be `{addr =, length =, lkey =}`), an array of
-- them, or a prepared list
-- @tparam[opt] integer first with a list: the first WR to post (default 1)
-- @tparam[opt] integer count with a list: how many (default: to the end)
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno ENOMEM receive queue full; EINVAL the QP receives through an SRQ (or has no receive queue),
-- too many SGEs, wrong state
function qp:post_recv(wrs, first, count) end

--- Posts send WRs (`ibv_post_send`).
-- @tparam table|{table,...}|ibverbs.send_wrs wrs one WR, an array of them, or a prepared list.
-- WR fields: `wr_id`, `opcode` ("send", `"send_with_imm"`, `"rdma_write"`, `"rdma_write_with_imm"`,
-- `"rdma_read"`, `"atomic_cmp_and_swp"`, `"atomic_fetch_and_add"`, `"local_inv"`, `"bind_mw"`,
-- `"send_with_inv"`, ...), `send_flags` ("signaled", "solicited", "inline", "fence", `"ip_csum"`),
-- `sg_list` or `sge`, `inline` (a string sent inline), `imm_data`, `invalidate_rkey`,
-- `remote_addr`, `rkey`, `compare_add`, `swap`, `ah`, `remote_qpn`, `remote_qkey` (UD),
-- `remote_srqn` (XRC; legacy `xrc_remote_srq_num`), `mw`, `bind_info`, `hdr` and `mss` (opcode `"tso"`:
-- the packet header as a string, and the segment size)
-- @tparam[opt] integer first with a list
-- @tparam[opt] integer count with a list
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno ENOMEM send queue full; EINVAL wrong state, inline data above `max_inline_data`, a UD WR without ah
function qp:post_send(wrs, first, count) end

--- Posts through the `ibv_wr_*` API (a QP made by `create_qp_ex` with `send_ops_flags`):
-- one `ibv_wr_start` ... `ibv_wr_complete` batch.  Every WR is checked before the batch starts.
-- Every opcode of `ibv_wr_opcode` but `driver1` has its builder: `"tso"` (`ibv_wr_send_tso`, with
-- `hdr`, `mss` and the payload in SGEs or `inline`) and `"atomic_write"` (`ibv_wr_atomic_write`:
-- `remote_addr`, `rkey`, and its 8 bytes as an 8-byte `inline` string) among them.
-- @tparam table|{table,...}|ibverbs.send_wrs wrs as `post_send`
-- @tparam[opt] integer first
-- @tparam[opt] integer count
-- @treturn true
-- @return[2] nil, message, errno, index
-- @errno EINVAL a QP without `send_ops_flags`, an opcode they do not allow; EOPNOTSUPP a builder the
-- provider lacks (the batch is aborted); ENOMEM queue full
function qp:wr_post(wrs, first, count) end

--- RESET to INIT (a `modify` with defaults: port 1, pkey index 0, no remote access; UD qkey 0x11111111).
-- @tparam[opt] table opts `port_num`, `pkey_index`, `qp_access_flags`, `qkey`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno as `modify`
function qp:to_init(opts) end

--- INIT to RTR towards the remote QP.
-- @tparam table opts `qpn`, `psn`, `lid`, `gid`, `sgid_index`, `port_num`, `path_mtu` (default 1024),
-- `sl`, `max_dest_rd_atomic`, `min_rnr_timer`, `hop_limit`, `traffic_class`, `flow_label`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno as `modify`
function qp:to_rtr(opts) end

--- RTR to RTS (RC defaults: timeout 14, retry 7, `rnr_retry` 7, `max_rd_atomic` 1).
-- @tparam[opt] table opts `psn` (own send PSN), `timeout`, `retry_cnt`, `rnr_retry`, `max_rd_atomic`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno as `modify`
function qp:to_rts(opts) end

--- RESET to INIT to RTR to RTS in one call.
-- @tparam table remote `qpn`, `psn`, `lid`, `gid`
-- @tparam[opt] table opts the options of the three steps (`psn` is the own send PSN)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno as `modify`
function qp:connect(remote, opts) end

--- Destroys the QP (`ibv_destroy_qp`; `rdma_destroy_qp` for a cm id's QP).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while memory windows are bound through it
function qp:close() end

--- Whether `close` has run.
-- @treturn boolean
function qp:is_closed() end

--- Reads the QP's enhanced connection establishment options (`ibv_query_ece`).
-- @tparam[opt] table t filled instead of a new table
-- @treturn table `vendor_id`, `options`, `comp_mask`
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function qp:query_ece(t) end

--- Sets the options the QP will negotiate (`ibv_set_ece`), before it leaves INIT.
-- @tparam table ece `vendor_id`, `options`, `comp_mask`
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware); EINVAL
function qp:set_ece(ece) end

--- Sets a packet pacing rate limit on a send queue (`ibv_modify_qp_rate_limit`).
-- @tparam table attr `rate_limit` (kbps, 0: none), `max_burst_sz` (bytes), `typical_pkt_sz` (bytes)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware); EINVAL rate outside the device's range
function qp:modify_rate_limit(attr) end

--- Whether data of an opcode is written in order at the target (`ibv_query_qp_data_in_order`).
-- @tparam string opcode a send opcode (`"rdma_write"`, `"send"`, ...)
-- @tparam[opt] integer flags 0 (later rdma-core: the caps flag)
-- @treturn integer 1 in order, 0 not guaranteed (rxe: 0)
function qp:query_data_in_order(opcode, flags) end

--- Creates a flow steering rule that delivers matching packets to this QP (`ibv_create_flow`).
-- @tparam table attr `type` (`"normal"`, `"all_default"`, `"mc_default"`, `"sniffer"`), `priority`,
-- `port` (1), `flags` (`"dont_trap"`, `"egress"`), `specs`: an array of spec tables, each with `type`
-- and, for a header, `val` and `mask` (default: every field `val` gives, exactly), `inner`:
-- `"eth"` (`dst_mac`, `src_mac` as `"aa:bb:cc:dd:ee:ff"`, `ether_type`, `vlan_tag`),
-- `"ipv4"` (`src_ip`, `dst_ip`: text or a host-order integer), `"ipv4_ext"` (those, `proto`, `tos`,
-- `ttl`, `flags`), `"ipv6"` (`src_ip`, `dst_ip`, `flow_label`, `next_hdr`, `traffic_class`,
-- `hop_limit`), `"tcp"`/`"udp"` (`dst_port`, `src_port`), `"vxlan_tunnel"` (`tunnel_id`),
-- `"gre"` (`c_ks_res0_ver`, `protocol`, `key`), `"mpls"` (`label`), `"esp"` (`spi`, `seq`);
-- actions `"action_tag"` (`tag_id`), `"action_drop"`, `"action_count"` (`counters`).
-- Numbers are host order; they are stored in network order.
-- @treturn ibverbs.flow (keeps the QP and its counters alive)
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe: no flow steering; not verified on hardware); EINVAL
function qp:create_flow(attr) end
--- Attaches a UD QP to a multicast group (`ibv_attach_mcast`).  On soft-RoCE the group's
-- datagrams reach the QP only while the netdev is also a member of the IP group (a socket's
-- IP_ADD_MEMBERSHIP, or an rdma_cm join): rxe adds just the group's MAC address.
-- @tparam string gid the group's GID ("::ffff:239.1.2.3" for IPv4 on RoCE v2)
-- @tparam[opt=0] integer lid the group's LID (InfiniBand; 0 on RoCE)
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL not a multicast GID or not a UD QP; ENOMEM
function qp:attach_mcast(gid, lid) end

--- Detaches a UD QP from a multicast group (`ibv_detach_mcast`).
-- @tparam string gid
-- @tparam[opt=0] integer lid
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOENT the QP is not attached
function qp:detach_mcast(gid, lid) end

return qp
