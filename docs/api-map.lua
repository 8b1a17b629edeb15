--- Every public function of <infiniband/verbs.h>, <rdma/rdma_cma.h> and
-- <rdma/rdma_verbs.h> (rdma-core 44), and where the Lua API has it.
--
-- bound: C name -> the Lua function or method that makes the call:
--   "ibv.f"          a function of require "ibverbs"
--   "cm.f"           a function of require "ibverbs.cm"
--   "ibverbs.T:m"    a method of the userdata type ibverbs.T
-- not_bound: C name -> why a script has no call of its own (the README's
--   table "What is not bound" is made from it: lua5.4 tools/api-map.lua --readme).
-- verbs_map: the functions docs/api-map-verbs.txt maps (device memory, WQs,
--   flows, counters, ...): "C name<TAB>Lua path" or "C name<TAB>NOT BOUND: reason".
--   Until that file is in the tree these are listed here, and
--   spec/host/project/api_coverage_spec.lua reports them as owed by it.
-- since: the release that brought each function newer than rdma-core 28.
-- spec/host/project/api_coverage_spec.lua checks the three against the installed headers
-- and the loaded module.
return {
  bound = {
    -- libibverbs: devices and contexts
    ibv_get_device_list = "ibv.devices",
    ibv_get_device_name = "ibverbs.context:name", -- and ibv.devices()[i].name
    ibv_get_device_guid = "ibv.devices", -- .guid
    ibv_get_device_index = "ibv.devices", -- .device_index
    ibv_open_device = "ibv.open",
    ibv_close_device = "ibverbs.context:close",
    ibv_import_device = "ibv.import_device",
    ibv_fork_init = "ibv.fork_init",
    ibv_is_fork_initialized = "ibv.is_fork_initialized",
    ibv_query_device = "ibverbs.context:query_device",
    ibv_query_device_ex = "ibverbs.context:query_device_ex",
    ibv_query_port = "ibverbs.context:query_port",
    ibv_query_gid = "ibverbs.context:query_gid",
    ibv_query_gid_ex = "ibverbs.context:query_gid_ex",
    ibv_query_gid_table = "ibverbs.context:query_gid_table",
    ibv_query_pkey = "ibverbs.context:query_pkey",
    ibv_get_pkey_index = "ibverbs.context:get_pkey_index",
    ibv_query_rt_values_ex = "ibverbs.context:query_rt_values_ex",
    ibv_resolve_eth_l2_from_gid = "ibverbs.context:resolve_eth_l2_from_gid",
    ibv_get_async_event = "ibverbs.context:get_async_event",
    -- names and numbers
    ibv_wc_status_str = "ibv.wc_status_str",
    ibv_node_type_str = "ibv.node_type_str",
    ibv_port_state_str = "ibv.port_state_str",
    ibv_event_type_str = "ibv.event_type_str",
    ibv_rate_to_mbps = "ibv.rate_to_mbps",
    ibv_rate_to_mult = "ibv.rate_to_mult",
    mbps_to_ibv_rate = "ibv.mbps_to_rate",
    mult_to_ibv_rate = "ibv.mult_to_rate",
    ibv_is_qpt_supported = "ibv.is_qpt_supported",
    ibv_flow_label_to_udp_sport = "ibv.flow_label_to_udp_sport",
    ibv_inc_rkey = "ibv.inc_rkey",
    -- PDs and MRs
    ibv_alloc_pd = "ibverbs.context:alloc_pd",
    ibv_dealloc_pd = "ibverbs.pd:close",
    ibv_import_pd = "ibverbs.context:import_pd",
    ibv_unimport_pd = "ibverbs.pd:close", -- of an imported PD
    ibv_reg_mr = "ibverbs.pd:reg_mr",
    ibv_rereg_mr = "ibverbs.mr:rereg",
    ibv_dereg_mr = "ibverbs.mr:close",
    ibv_import_mr = "ibverbs.pd:import_mr",
    ibv_unimport_mr = "ibverbs.mr:close", -- of an imported MR
    ibv_alloc_mw = "ibverbs.pd:alloc_mw",
    ibv_dealloc_mw = "ibverbs.mw:close",
    ibv_bind_mw = "ibverbs.mw:bind",
    -- completion channels and CQs
    ibv_create_comp_channel = "ibverbs.context:create_comp_channel",
    ibv_destroy_comp_channel = "ibverbs.comp_channel:close",
    ibv_get_cq_event = "ibverbs.comp_channel:get_event",
    ibv_ack_cq_events = "ibverbs.cq:ack_events",
    ibv_create_cq = "ibverbs.context:create_cq",
    ibv_create_cq_ex = "ibverbs.context:create_cq_ex",
    ibv_resize_cq = "ibverbs.cq:resize",
    ibv_destroy_cq = "ibverbs.cq:close",
    ibv_req_notify_cq = "ibverbs.cq:req_notify",
    ibv_poll_cq = "ibverbs.cq:poll",
    ibv_start_poll = "ibverbs.cq:poll", -- of a CQ made with wc_flags (cq_ex)
    ibv_end_poll = "ibverbs.cq:poll",
    ibv_wc_read_opcode = "ibverbs.cq:poll",
    ibv_wc_read_vendor_err = "ibverbs.cq:poll",
    ibv_wc_read_byte_len = "ibverbs.cq:poll",
    ibv_wc_read_imm_data = "ibverbs.cq:poll",
    ibv_wc_read_invalidated_rkey = "ibverbs.cq:poll",
    ibv_wc_read_qp_num = "ibverbs.cq:poll",
    ibv_wc_read_src_qp = "ibverbs.cq:poll",
    ibv_wc_read_wc_flags = "ibverbs.cq:poll",
    ibv_wc_read_slid = "ibverbs.cq:poll",
    ibv_wc_read_sl = "ibverbs.cq:poll",
    ibv_wc_read_dlid_path_bits = "ibverbs.cq:poll",
    -- QPs
    ibv_create_qp = "ibverbs.pd:create_qp",
    ibv_create_qp_ex = "ibverbs.context:create_qp_ex",
    ibv_open_qp = "ibverbs.context:open_qp",
    ibv_modify_qp = "ibverbs.qp:modify",
    ibv_query_qp = "ibverbs.qp:query",
    ibv_destroy_qp = "ibverbs.qp:close",
    ibv_post_send = "ibverbs.qp:post_send",
    ibv_post_recv = "ibverbs.qp:post_recv",
    ibv_attach_mcast = "ibverbs.qp:attach_mcast",
    ibv_detach_mcast = "ibverbs.qp:detach_mcast",
    ibv_wr_start = "ibverbs.qp:wr_post",
    ibv_wr_complete = "ibverbs.qp:wr_post",
    ibv_wr_abort = "ibverbs.qp:wr_post",
    ibv_wr_send = "ibverbs.qp:wr_post",
    ibv_wr_send_imm = "ibverbs.qp:wr_post",
    ibv_wr_send_inv = "ibverbs.qp:wr_post",
    ibv_wr_rdma_write = "ibverbs.qp:wr_post",
    ibv_wr_rdma_write_imm = "ibverbs.qp:wr_post",
    ibv_wr_rdma_read = "ibverbs.qp:wr_post",
    ibv_wr_atomic_cmp_swp = "ibverbs.qp:wr_post",
    ibv_wr_atomic_fetch_add = "ibverbs.qp:wr_post",
    ibv_wr_bind_mw = "ibverbs.qp:wr_post",
    ibv_wr_local_inv = "ibverbs.qp:wr_post",
    ibv_wr_set_sge = "ibverbs.qp:wr_post",
    ibv_wr_set_sge_list = "ibverbs.qp:wr_post",
    ibv_wr_set_inline_data = "ibverbs.qp:wr_post",
    ibv_wr_set_inline_data_list = "ibverbs.qp:wr_post",
    ibv_wr_set_ud_addr = "ibverbs.qp:wr_post",
    ibv_wr_set_xrc_srqn = "ibverbs.qp:wr_post",
    -- SRQs, XRC, AHs
    ibv_create_srq = "ibverbs.pd:create_srq",
    ibv_create_srq_ex = "ibverbs.context:create_srq_ex",
    ibv_modify_srq = "ibverbs.srq:modify",
    ibv_query_srq = "ibverbs.srq:query",
    ibv_destroy_srq = "ibverbs.srq:close",
    ibv_post_srq_recv = "ibverbs.srq:post_recv",
    ibv_get_srq_num = "ibverbs.srq:get_srq_num",
    ibv_open_xrcd = "ibverbs.context:open_xrcd",
    ibv_close_xrcd = "ibverbs.xrcd:close",
    ibv_create_ah = "ibverbs.pd:create_ah",
    ibv_create_ah_from_wc = "ibverbs.pd:create_ah_from_wc",
    ibv_init_ah_from_wc = "ibverbs.context:init_ah_from_wc",
    ibv_destroy_ah = "ibverbs.ah:close",

    -- librdmacm: rdma_cma.h
    rdma_create_event_channel = "cm.event_channel",
    rdma_destroy_event_channel = "ibverbs.cm_channel:close",
    rdma_get_cm_event = "ibverbs.cm_channel:get_event",
    rdma_event_str = "cm.event_str",
    rdma_get_devices = "cm.get_devices",
    rdma_getaddrinfo = "cm.getaddrinfo",
    rdma_freeaddrinfo = "ibverbs.cm_addrinfo:close",
    rdma_create_id = "cm.create_id", -- and ibverbs.cm_channel:create_id
    rdma_destroy_id = "ibverbs.cm_id:close",
    rdma_create_ep = "cm.create_ep",
    rdma_destroy_ep = "ibverbs.cm_id:close", -- of an id create_ep made
    rdma_migrate_id = "ibverbs.cm_id:migrate_id",
    rdma_set_option = "ibverbs.cm_id:set_option",
    rdma_bind_addr = "ibverbs.cm_id:bind_addr",
    rdma_resolve_addr = "ibverbs.cm_id:resolve_addr",
    rdma_resolve_route = "ibverbs.cm_id:resolve_route",
    rdma_get_local_addr = "ibverbs.cm_id:get_local_addr",
    rdma_get_peer_addr = "ibverbs.cm_id:get_peer_addr",
    rdma_get_src_port = "ibverbs.cm_id:get_src_port",
    rdma_get_dst_port = "ibverbs.cm_id:get_dst_port",
    rdma_listen = "ibverbs.cm_id:listen",
    rdma_get_request = "ibverbs.cm_id:get_request",
    rdma_connect = "ibverbs.cm_id:connect",
    rdma_accept = "ibverbs.cm_id:accept",
    rdma_reject = "ibverbs.cm_id:reject",
    rdma_reject_ece = "ibverbs.cm_id:reject_ece",
    rdma_set_local_ece = "ibverbs.cm_id:set_local_ece",
    rdma_get_remote_ece = "ibverbs.cm_id:get_remote_ece",
    rdma_establish = "ibverbs.cm_id:establish",
    rdma_notify = "ibverbs.cm_id:notify",
    rdma_disconnect = "ibverbs.cm_id:disconnect",
    rdma_init_qp_attr = "ibverbs.cm_id:init_qp_attr",
    rdma_join_multicast = "ibverbs.cm_id:join_multicast",
    rdma_join_multicast_ex = "ibverbs.cm_id:join_multicast", -- with join flags
    rdma_leave_multicast = "ibverbs.cm_id:leave_multicast",
    rdma_create_qp = "ibverbs.cm_id:create_qp",
    rdma_create_qp_ex = "ibverbs.cm_id:create_qp_ex",
    rdma_destroy_qp = "ibverbs.cm_id:destroy_qp",
    -- librdmacm: rdma_verbs.h
    rdma_create_srq = "ibverbs.cm_id:create_srq",
    rdma_create_srq_ex = "ibverbs.cm_id:create_srq_ex",
    rdma_destroy_srq = "ibverbs.cm_id:destroy_srq",
    rdma_reg_msgs = "ibverbs.cm_id:reg_msgs",
    rdma_reg_read = "ibverbs.cm_id:reg_read",
    rdma_reg_write = "ibverbs.cm_id:reg_write",
    rdma_dereg_mr = "ibverbs.cm_id:dereg_mr",
    rdma_post_recv = "ibverbs.cm_id:post_recv",
    rdma_post_recvv = "ibverbs.cm_id:post_recvv",
    rdma_post_send = "ibverbs.cm_id:post_send",
    rdma_post_sendv = "ibverbs.cm_id:post_sendv",
    rdma_post_ud_send = "ibverbs.cm_id:post_ud_send",
    rdma_post_read = "ibverbs.cm_id:post_read",
    rdma_post_readv = "ibverbs.cm_id:post_readv",
    rdma_post_write = "ibverbs.cm_id:post_write",
    rdma_post_writev = "ibverbs.cm_id:post_writev",
    rdma_get_send_comp = "ibverbs.cm_id:get_send_comp",
    rdma_get_recv_comp = "ibverbs.cm_id:get_recv_comp",
  },

  not_bound = {
    ibv_free_device_list = "C only: ibv.devices and ibv.open free the list they read before returning",
    ibv_ack_async_event = "done inside: ctx:get_async_event acknowledges the event before it returns a copy",
    rdma_ack_cm_event = "done inside: ch:get_event acknowledges the event before it returns a copy",
    rdma_free_devices = "done inside: cm.get_devices frees its list once its last context is collected",
    rdma_seterrno = "C only: an rdma_verbs.h helper setting errno; the binding returns nil, msg, errno",
  },

  -- owed by docs/api-map-verbs.txt
  verbs_map = {
    "ibv_reg_mr_iova", "ibv_reg_mr_iova2", "ibv_reg_dmabuf_mr", "ibv_alloc_null_mr", "ibv_advise_mr",
    "ibv_alloc_dm", "ibv_free_dm", "ibv_memcpy_to_dm", "ibv_memcpy_from_dm", "ibv_reg_dm_mr",
    "ibv_import_dm", "ibv_unimport_dm",
    "ibv_create_wq", "ibv_modify_wq", "ibv_destroy_wq", "ibv_post_wq_recv",
    "ibv_create_rwq_ind_table", "ibv_destroy_rwq_ind_table",
    "ibv_modify_cq", "ibv_modify_qp_rate_limit", "ibv_query_qp_data_in_order", "ibv_post_srq_ops",
    "ibv_alloc_td", "ibv_dealloc_td", "ibv_alloc_parent_domain",
    "ibv_query_ece", "ibv_set_ece",
    "ibv_wr_atomic_write", "ibv_wr_send_tso",
    "ibv_wc_read_completion_ts", "ibv_wc_read_completion_wallclock_ns", "ibv_wc_read_cvlan",
    "ibv_wc_read_flow_tag", "ibv_wc_read_tm_info",
    "ibv_create_flow", "ibv_destroy_flow", "ibv_create_flow_action_esp",
    "ibv_modify_flow_action_esp", "ibv_destroy_flow_action",
    "ibv_create_counters", "ibv_destroy_counters", "ibv_attach_counters_point_flow", "ibv_read_counters",
  },  -- since: the first rdma-core release with each function newer than 28 (the
  -- oldest the module builds on).  A build against older headers has the
  -- method all the same, raising "needs rdma-core N or later; built against
  -- B" (tools/configure, csrc/base/late.h), and the coverage check accepts the
  -- function's absence from those headers.
  since = {
    ibv_flow_label_to_udp_sport = 29, ibv_get_device_index = 30,
    ibv_import_device = 31, ibv_import_pd = 31, ibv_unimport_pd = 31, ibv_import_mr = 31,
    ibv_unimport_mr = 31, ibv_query_ece = 31, ibv_set_ece = 31, rdma_set_local_ece = 31,
    rdma_get_remote_ece = 31, rdma_reject_ece = 31, ibv_query_gid_ex = 32, ibv_query_gid_table = 32,
    ibv_reg_dmabuf_mr = 34, ibv_import_dm = 35, ibv_unimport_dm = 35, ibv_is_fork_initialized = 35,
    ibv_query_qp_data_in_order = 36, ibv_wr_atomic_write = 44,
  },
}
