--- An open RDMA device (`struct ibv_context`), made by `ibverbs.open`.
--
--     local ctx <close> = assert(ibv.open("rxe0"))
--     print(ctx:name(), ctx:query_port(1).state)
--
-- @classmod ibverbs.context

local context = {}

--- The device's name (`ibv_get_device_name`).
-- @treturn string "rxe0"
function context:name() end

--- The user-space provider serving the device: the library libibverbs loaded for it (the
-- file its `poll_cq` comes from, `dladdr`) and its short name, the file's less `lib` and
-- `-rdmav<N>` or `.so` (`"rxe"` for `librxe-rdmav34.so`, `"mlx5"` for `libmlx5.so.1`).
-- @treturn string name "rxe"
-- @treturn string the library as loaded, "/usr/lib/x86_64-linux-gnu/libibverbs/librxe-rdmav34.so"
-- @return[2] nil, message, errno
-- @errno ENOENT the function is in no loaded library
function context:provider() end

--- The file descriptor of the async event queue (`ctx->async_fd`), for poll(2).
-- @treturn integer fd
function context:async_fd() end

--- Device attributes (`ibv_query_device`).
-- @tparam[opt] table t a table to fill instead of a new one
-- @treturn table `fw_ver`, `node_guid`, `sys_image_guid`, `max_mr_size`, `page_size_cap`,
-- `vendor_id`, `vendor_part_id`, `hw_ver`, `max_qp`, `max_qp_wr`, `device_cap_flags`,
-- `max_sge`, `max_cq`, `max_cqe`, `max_mr`, `max_pd`, `max_srq`, `max_srq_wr`,
-- `atomic_cap` ("none", "hca", "glob"), `phys_port_cnt`, ... (every field of `struct ibv_device_attr`)
-- @return[2] nil, message, errno
-- @errno what `ibv_query_device` returns (EIO, ...)
function context:query_device(t) end

--- Extended device attributes (`ibv_query_device_ex`): `query_device`'s fields and
-- `device_cap_flags_ex`, `odp_*_caps`, `completion_timestamp_mask`, `hca_core_clock`,
-- `max_tso`, `tso_supported_qpts`, `rss_supported_qpts`, `max_cq_count`, `max_cq_period`,
-- `max_dm_size`, `phys_port_cnt_ex`, ...
-- @tparam[opt] table t a table to fill
-- @treturn table attributes
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP when the provider lacks it
function context:query_device_ex(t) end

--- Port attributes (`ibv_query_port`).
-- @tparam integer port 1 to 255
-- @tparam[opt] table t a table to fill
-- @treturn table `state` ("down", "init", "armed", "active", ...), `max_mtu` and `active_mtu` in bytes,
-- `lid`, `sm_lid`, `lmc`, `gid_tbl_len`, `pkey_tbl_len`, `port_cap_flags`, `port_caps` (names),
-- `link_layer` ("infiniband", "ethernet"), `active_width`, `active_speed`, `phys_state`, ...
-- @return[2] nil, message, errno
-- @errno EINVAL no such port
function context:query_port(port, t) end

--- A GID as text (`ibv_query_gid`).
-- @tparam integer port
-- @tparam integer index GID table index
-- @treturn string "::ffff:192.0.2.1"
-- @return[2] nil, message, errno
-- @errno EINVAL index or port out of range
function context:query_gid(port, index) end

--- A GID table entry (`ibv_query_gid_ex`).  Where the verb is absent (rdma-core 28 to 31, or
-- `IBVL_RDMA_CORE` below 32) the same table comes from `ibv_query_gid` and sysfs, as rdma-core's
-- own fallback reads it: `gid_type` from `<ibdev_path>/ports/<port>/gid_attrs/types/<index>`
-- ("IB/RoCE v1" is "ib" on an InfiniBand port, "roce_v1" on Ethernet), `ndev_ifindex` from the
-- netdev named in `gid_attrs/ndevs/<index>` (0 when there is none, or it is in another network
-- namespace); `ibv.rdma_core.fallbacks` then names this method.
-- @tparam integer port
-- @tparam integer index
-- @treturn table `gid`, `gid_index`, `port_num`, `gid_type` ("ib", `"roce_v1"`, `"roce_v2"`), `ndev_ifindex`
-- @return[2] nil, message, errno
-- @errno ENODATA empty entry; EINVAL out of range; EPROTO (sysfs) a GID type this module does not know
function context:query_gid_ex(port, index) end

--- Every valid GID of every port (`ibv_query_gid_table`), port by port, by index.  Without the
-- verb (rdma-core 28 to 31, or `IBVL_RDMA_CORE` below 32) the same entries come from
-- `ibv_query_gid` and sysfs, as `query_gid_ex` says: every tool works on rdma-core 28.
-- @tparam[opt=1024] integer max_entries
-- @treturn {table,...} entries as `query_gid_ex` gives them
-- @return[2] nil, message, errno
-- @errno EINVAL more valid entries than `max_entries`; EOPNOTSUPP, ENOMEM; EPROTO (sysfs) a
-- GID type this module does not know
function context:query_gid_table(max_entries) end

--- A `P_Key` (`ibv_query_pkey`).
-- @tparam integer port
-- @tparam integer index
-- @treturn integer pkey
-- @return[2] nil, message, errno
-- @errno EINVAL out of range
function context:query_pkey(port, index) end

--- The next async event (`ibv_get_async_event`, acknowledged before it returns).
-- @tparam[opt] number timeout seconds (default: wait for ever; interruptible)
-- @treturn table `type` (`"port_active"`, `"port_err"`, `"cq_err"`, `"qp_fatal"`, `"srq_limit_reached"`, ...)
-- and the object it names: `port_num`, `qp`, `cq` or `srq` (the script's own userdata)
-- @return[2] nil, message, errno
-- @errno ETIMEDOUT nothing came in time
function context:get_async_event(timeout) end

--- Allocates a protection domain (`ibv_alloc_pd`).
-- @treturn ibverbs.pd
-- @return[2] nil, message, errno
-- @errno ENOMEM
function context:alloc_pd() end

--- Creates a completion event channel (`ibv_create_comp_channel`).
-- @treturn ibverbs.comp_channel
-- @return[2] nil, message, errno
-- @errno ENOMEM, EMFILE
function context:create_comp_channel() end

--- Creates a completion queue (`ibv_create_cq`; with `wc_flags` or `flags`, `ibv_create_cq_ex`).
-- @tparam table attr `cqe` (minimum size), `channel` (an `ibverbs.comp_channel`), `comp_vector`,
-- `wc_flags` (names or `ibv.WC_EX_WITH_*`: an extended CQ), `flags`, `parent_domain` (a parent domain
-- from `alloc_parent_domain`: an extended CQ on it; not verified on hardware)
-- @treturn ibverbs.cq
-- @return[2] nil, message, errno
-- @errno EINVAL cqe above the device's `max_cqe`; ENOMEM; EOPNOTSUPP `wc_flags` the device lacks
function context:create_cq(attr) end

--- Creates an extended completion queue (`ibv_create_cq_ex`); same fields as `create_cq`.
-- @tparam table attr
-- @treturn ibverbs.cq
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM, EOPNOTSUPP
function context:create_cq_ex(attr) end

--- Creates a QP with `ibv_create_qp_ex`: as `pd:create_qp` plus `pd`, `xrcd`, `create_flags`,
-- `max_tso_header`, `rx_hash_conf`, `source_qpn` and `send_ops_flags` (the `ibv_wr_*` API, see `qp:wr_post`).
-- The `comp_mask` comes from the fields given.
-- @tparam table init_attr
-- @treturn ibverbs.qp
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM, EOPNOTSUPP (XRC on a device without XRC, `send_ops_flags` it lacks)
function context:create_qp_ex(init_attr) end

--- Creates an SRQ with `ibv_create_srq_ex`.
-- @tparam table attr `srq_type` ("basic", "xrc", "tm"), `pd`, `xrcd`, `cq`, `tm_cap` = {`max_num_tags`,
-- `max_ops`}, `max_wr`, `max_sge`, `srq_limit` (or these three in `attr`)
-- @treturn ibverbs.srq
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOMEM, EOPNOTSUPP (XRC without XRC, tag matching)
function context:create_srq_ex(attr) end

--- Opens an XRC domain (`ibv_open_xrcd`).
-- @tparam table attr `fd` (-1, an integer fd or an io file), `oflags` (`ibv.O_CREAT`, `ibv.O_EXCL`)
-- @treturn ibverbs.xrcd
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP device without XRC; EINVAL, ENOENT, EEXIST as open(2)
function context:open_xrcd(attr) end

--- Opens a handle on an existing shareable QP (`ibv_open_qp`), an XRC receive QP.
-- @tparam table attr `qp_num`, `qp_type` (`"xrc_recv"`), `xrcd`
-- @treturn ibverbs.qp
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP device without XRC; EINVAL; ENOENT no such QP
function context:open_qp(attr) end

--- Address attributes from a received completion (`ibv_init_ah_from_wc`), for `pd:create_ah`.
-- @tparam integer port
-- @tparam table|ibverbs.wc_array wc a wc table, or a wc array and index (`wcs, i`)
-- @tparam string grh the 40 bytes the UD receive buffer starts with
-- @treturn table `ah_attr`
-- @return[2] nil, message, errno
-- @errno EINVAL, ENOENT (no matching GID)
function context:init_ah_from_wc(port, wc, grh) end

--- Legacy OFED XRC: opens an XRC domain (over `ibv_open_xrcd`).
-- @tparam integer|file fd -1 (only with `O_CREAT`), an fd or an io file
-- @tparam integer oflag 0, `ibv.O_CREAT` or `ibv.O_CREAT | ibv.O_EXCL`
-- @treturn ibverbs.xrc_domain
-- @return[2] nil, message, errno
-- @errno EINVAL bad fd/oflag pair; ENOENT no domain without `O_CREAT`; EEXIST with `O_EXCL`; EOPNOTSUPP
function context:open_xrc_domain(fd, oflag) end

--- Legacy OFED XRC: closes a domain (`d:close()`).
-- @tparam ibverbs.xrc_domain d
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY registrations, XRC SRQs or send QPs remain
function context:close_xrc_domain(d) end

--- Closes the device (`ibv_close_device`).
-- @treturn true
-- @return[2] nil, message, errno
-- @errno EBUSY while PDs, CQs, channels or XRC domains made on it are open
function context:close() end

--- Whether `close` has run.
-- @treturn boolean
function context:is_closed() end

--- Allocates device memory (`ibv_alloc_dm`).
-- @tparam integer|table attr the length, or {`length`, `log_align_req`}
-- @treturn ibverbs.dm
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware); ENOMEM
function context:alloc_dm(attr) end

--- Allocates a thread domain (`ibv_alloc_td`).
-- @tparam[opt] table attr `comp_mask` (0)
-- @treturn ibverbs.td
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function context:alloc_td(attr) end

--- Allocates a parent domain (`ibv_alloc_parent_domain`): a PD with a thread domain, usable
-- wherever a PD is (`create_qp_ex{pd = ...}`, `pd:create_qp`, ...) and freed by `close`.  The
-- custom allocator callbacks are not offered.
-- @tparam table attr `pd` (required), `td`
-- @treturn ibverbs.pd (keeps its pd and td alive)
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function context:alloc_parent_domain(attr) end

--- Creates a receive work queue (`ibv_create_wq`).
-- @tparam table init_attr `pd`, `cq` (required), `wq_type` (`"rq"`), `max_wr`, `max_sge`,
-- `create_flags` (`"cvlan_stripping"`, `"scatter_fcs"`, `"delay_drop"`, `"pci_write_end_padding"`)
-- @treturn ibverbs.wq
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function context:create_wq(init_attr) end

--- Creates a receive WQ indirection table (`ibv_create_rwq_ind_table`) for an RSS QP
-- (`create_qp_ex{qp_type = "raw_packet", rwq_ind_tbl = tbl, rx_hash_conf = {...}}`).
-- @tparam table init_attr `ind_tbl` (an array of 2^n WQs), `log_ind_tbl_size` (default: n)
-- @treturn ibverbs.rwq_ind_tbl
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (not verified on hardware: rxe has no WQs)
function context:create_rwq_ind_table(init_attr) end

--- Creates a counters object (`ibv_create_counters`), for `action_count` flow specs.
-- @treturn ibverbs.counters
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP (rxe; not verified on hardware)
function context:create_counters() end
--- The command file descriptor (`ctx->cmd_fd`), for `ibverbs.import_device` in this or another process.
-- @treturn integer fd
function context:cmd_fd() end

--- How many completion vectors the device has (`ctx->num_comp_vectors`): the range of a CQ's `comp_vector`.
-- @treturn integer at least 1
function context:num_comp_vectors() end

--- The index of a P_Key in a port's table (`ibv_get_pkey_index`).
-- @tparam integer port 1 to 255
-- @tparam integer pkey 0 to 0xffff, e.g. 0xffff (the default full-membership key)
-- @treturn integer index
-- @return[2] nil, message, errno
-- @errno what `ibv_query_pkey` returns past the table (EINVAL, ...): the key is not there
function context:get_pkey_index(port, pkey) end

--- The device's raw clock (`ibv_query_rt_values_ex`).
-- @treturn table `raw_clock` = {`tv_sec`, `tv_nsec`} (the device's free-running counter)
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider lacks it (rxe)
function context:query_rt_values_ex() end

--- The Ethernet address and VLAN of an address handle's destination GID (`ibv_resolve_eth_l2_from_gid`).
-- An unknown neighbour is resolved over netlink: the call may wait up to 3 s (libibverbs' own limit).
-- @tparam table ah_attr as `pd:create_ah` takes it, with `grh`
-- @treturn string MAC "aa:bb:cc:dd:ee:ff"
-- @treturn integer VLAN id (0xffff: none)
-- @return[2] nil, message, errno
-- @errno EINVAL no GRH; EHOSTUNREACH, ... the neighbour could not be resolved
function context:resolve_eth_l2_from_gid(ah_attr) end

--- A PD made through another context that shares this one's device objects (`ibv_import_pd`):
-- `self` comes from `ibverbs.import_device`.  Closing it calls `ibv_unimport_pd` (the PD stays with its owner).
-- @tparam integer pd_handle the PD's `handle`
-- @treturn ibverbs.pd
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider cannot import (rxe)
function context:import_pd(pd_handle) end

--- Device memory made through another context that shares this one's device objects (`ibv_import_dm`):
-- `self` comes from `ibverbs.import_device`.  The kernel does not say how long the DM is: `length`
-- (the exporter's `dm.length`) bounds `memcpy_to`/`memcpy_from`.  Closing it calls `ibv_unimport_dm`.
-- @tparam integer dm_handle the DM's `handle`
-- @tparam integer length its length in bytes
-- @treturn ibverbs.dm
-- @return[2] nil, message, errno
-- @errno EOPNOTSUPP the provider cannot import (rxe)
function context:import_dm(dm_handle, length) end

return context
