/*
 * enums.c: the names of verbs enums and flag bits, as scripts write them
 * (the C name, lower case, without its prefix).
 *
 *   ibvl_check_enum(L, 2, ibvl_qp_types)     "rc" -> IBV_QPT_RC
 *   ibvl_push_enum(L, ibvl_qp_states, s)     IBV_QPS_RTS -> "rts"
 *   ibvl_check_flags(L, 3, ibvl_access_flags) {"local_write", "remote_read"} or 0x5
 * The tables more than one file reads are here, the rdma_cm ones included;
 * a table only one file reads stays in that file (mr.c's advices, ...).
 * A name newer than the rdma-core headers of the build is kept as absent
 * (IBVL_ENUM_ABSENT), so that using it names the release that brings it.
 */
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "base/args.h"
#include "base/enums.h"
#include "ibvl_config.h"

#define E(name, value) {name, value}
#define END {NULL, 0}
#define ABSENT(name, feature) IBVL_ENUM_ABSENT(name, IBVL_SINCE_##feature)

/* ---- names newer than rdma-core 28 (ibvl_config.h says which the headers had) */
#if IBVL_HAVE_ATOMIC_WRITE
#define WC_ATOMIC_WRITE E("atomic_write", IBV_WC_ATOMIC_WRITE)
#define WR_ATOMIC_WRITE E("atomic_write", IBV_WR_ATOMIC_WRITE)
#define QPX_ATOMIC_WRITE E("atomic_write", IBV_QP_EX_WITH_ATOMIC_WRITE)
#else
#define WC_ATOMIC_WRITE ABSENT("atomic_write", ATOMIC_WRITE)
#define WR_ATOMIC_WRITE ABSENT("atomic_write", ATOMIC_WRITE)
#define QPX_ATOMIC_WRITE ABSENT("atomic_write", ATOMIC_WRITE)
#endif
#if IBVL_HAVE_WC_DRIVER2
#define WC_DRIVER2_3 E("driver2", IBV_WC_DRIVER2), E("driver3", IBV_WC_DRIVER3)
#else
#define WC_DRIVER2_3 ABSENT("driver2", WC_DRIVER2), ABSENT("driver3", WC_DRIVER2)
#endif
#if IBVL_HAVE_GID_EX
#define GID_TYPES E("ib", IBV_GID_TYPE_IB), E("roce_v1", IBV_GID_TYPE_ROCE_V1), \
	E("roce_v2", IBV_GID_TYPE_ROCE_V2)
#else
#define GID_TYPES ABSENT("ib", GID_EX), ABSENT("roce_v1", GID_EX), ABSENT("roce_v2", GID_EX)
#endif
#if IBVL_HAVE_RATE_800
#define RATES_800_1200 E("800_gbps", IBV_RATE_800_GBPS), E("1200_gbps", IBV_RATE_1200_GBPS)
#else
#define RATES_800_1200 ABSENT("800_gbps", RATE_800), ABSENT("1200_gbps", RATE_800)
#endif
#if IBVL_HAVE_FORK_STATUS
#define FORK_STATUSES E("disabled", IBV_FORK_DISABLED), E("enabled", IBV_FORK_ENABLED), \
	E("unneeded", IBV_FORK_UNNEEDED)
#else
#define FORK_STATUSES ABSENT("disabled", FORK_STATUS), ABSENT("enabled", FORK_STATUS), \
	ABSENT("unneeded", FORK_STATUS)
#endif

const struct ibvl_enum ibvl_node_types[] = {
	E("unknown", IBV_NODE_UNKNOWN), E("ca", IBV_NODE_CA), E("switch", IBV_NODE_SWITCH),
	E("router", IBV_NODE_ROUTER), E("rnic", IBV_NODE_RNIC), E("usnic", IBV_NODE_USNIC),
	E("usnic_udp", IBV_NODE_USNIC_UDP), E("unspecified", IBV_NODE_UNSPECIFIED), END,
};

const struct ibvl_enum ibvl_transports[] = {
	E("unknown", IBV_TRANSPORT_UNKNOWN), E("ib", IBV_TRANSPORT_IB),
	E("iwarp", IBV_TRANSPORT_IWARP), E("usnic", IBV_TRANSPORT_USNIC),
	E("usnic_udp", IBV_TRANSPORT_USNIC_UDP), E("unspecified", IBV_TRANSPORT_UNSPECIFIED), END,
};

const struct ibvl_enum ibvl_port_states[] = {
	E("nop", IBV_PORT_NOP), E("down", IBV_PORT_DOWN), E("init", IBV_PORT_INIT),
	E("armed", IBV_PORT_ARMED), E("active", IBV_PORT_ACTIVE),
	E("active_defer", IBV_PORT_ACTIVE_DEFER), END,
};

/* MTUs are written as their byte count: 256 .. 4096 */
const struct ibvl_enum ibvl_mtus[] = {
	E("256", IBV_MTU_256), E("512", IBV_MTU_512), E("1024", IBV_MTU_1024),
	E("2048", IBV_MTU_2048), E("4096", IBV_MTU_4096), END,
};

const struct ibvl_enum ibvl_link_layers[] = {
	E("unspecified", IBV_LINK_LAYER_UNSPECIFIED), E("infiniband", IBV_LINK_LAYER_INFINIBAND),
	E("ethernet", IBV_LINK_LAYER_ETHERNET), END,
};

const struct ibvl_enum ibvl_event_types[] = {
	E("cq_err", IBV_EVENT_CQ_ERR), E("qp_fatal", IBV_EVENT_QP_FATAL),
	E("qp_req_err", IBV_EVENT_QP_REQ_ERR), E("qp_access_err", IBV_EVENT_QP_ACCESS_ERR),
	E("comm_est", IBV_EVENT_COMM_EST), E("sq_drained", IBV_EVENT_SQ_DRAINED),
	E("path_mig", IBV_EVENT_PATH_MIG), E("path_mig_err", IBV_EVENT_PATH_MIG_ERR),
	E("device_fatal", IBV_EVENT_DEVICE_FATAL), E("port_active", IBV_EVENT_PORT_ACTIVE),
	E("port_err", IBV_EVENT_PORT_ERR), E("lid_change", IBV_EVENT_LID_CHANGE),
	E("pkey_change", IBV_EVENT_PKEY_CHANGE), E("sm_change", IBV_EVENT_SM_CHANGE),
	E("srq_err", IBV_EVENT_SRQ_ERR), E("srq_limit_reached", IBV_EVENT_SRQ_LIMIT_REACHED),
	E("qp_last_wqe_reached", IBV_EVENT_QP_LAST_WQE_REACHED),
	E("client_reregister", IBV_EVENT_CLIENT_REREGISTER), E("gid_change", IBV_EVENT_GID_CHANGE),
	E("wq_fatal", IBV_EVENT_WQ_FATAL), END,
};

const struct ibvl_enum ibvl_access_flags[] = {
	E("local_write", IBV_ACCESS_LOCAL_WRITE), E("remote_write", IBV_ACCESS_REMOTE_WRITE),
	E("remote_read", IBV_ACCESS_REMOTE_READ), E("remote_atomic", IBV_ACCESS_REMOTE_ATOMIC),
	E("mw_bind", IBV_ACCESS_MW_BIND), E("zero_based", IBV_ACCESS_ZERO_BASED),
	E("on_demand", IBV_ACCESS_ON_DEMAND), E("hugetlb", IBV_ACCESS_HUGETLB),
	E("relaxed_ordering", IBV_ACCESS_RELAXED_ORDERING), END,
};

const struct ibvl_enum ibvl_qp_types[] = {
	E("rc", IBV_QPT_RC), E("uc", IBV_QPT_UC), E("ud", IBV_QPT_UD),
	E("raw_packet", IBV_QPT_RAW_PACKET), E("xrc_send", IBV_QPT_XRC_SEND),
	E("xrc_recv", IBV_QPT_XRC_RECV), E("driver", IBV_QPT_DRIVER), END,
};

const struct ibvl_enum ibvl_qp_states[] = {
	E("reset", IBV_QPS_RESET), E("init", IBV_QPS_INIT), E("rtr", IBV_QPS_RTR),
	E("rts", IBV_QPS_RTS), E("sqd", IBV_QPS_SQD), E("sqe", IBV_QPS_SQE),
	E("err", IBV_QPS_ERR), E("unknown", IBV_QPS_UNKNOWN), END,
};

const struct ibvl_enum ibvl_mig_states[] = {
	E("migrated", IBV_MIG_MIGRATED), E("rearm", IBV_MIG_REARM), E("armed", IBV_MIG_ARMED), END,
};

const struct ibvl_enum ibvl_wc_statuses[] = {
	E("success", IBV_WC_SUCCESS), E("loc_len_err", IBV_WC_LOC_LEN_ERR),
	E("loc_qp_op_err", IBV_WC_LOC_QP_OP_ERR), E("loc_eec_op_err", IBV_WC_LOC_EEC_OP_ERR),
	E("loc_prot_err", IBV_WC_LOC_PROT_ERR), E("wr_flush_err", IBV_WC_WR_FLUSH_ERR),
	E("mw_bind_err", IBV_WC_MW_BIND_ERR), E("bad_resp_err", IBV_WC_BAD_RESP_ERR),
	E("loc_access_err", IBV_WC_LOC_ACCESS_ERR), E("rem_inv_req_err", IBV_WC_REM_INV_REQ_ERR),
	E("rem_access_err", IBV_WC_REM_ACCESS_ERR), E("rem_op_err", IBV_WC_REM_OP_ERR),
	E("retry_exc_err", IBV_WC_RETRY_EXC_ERR), E("rnr_retry_exc_err", IBV_WC_RNR_RETRY_EXC_ERR),
	E("loc_rdd_viol_err", IBV_WC_LOC_RDD_VIOL_ERR),
	E("rem_inv_rd_req_err", IBV_WC_REM_INV_RD_REQ_ERR), E("rem_abort_err", IBV_WC_REM_ABORT_ERR),
	E("inv_eecn_err", IBV_WC_INV_EECN_ERR), E("inv_eec_state_err", IBV_WC_INV_EEC_STATE_ERR),
	E("fatal_err", IBV_WC_FATAL_ERR), E("resp_timeout_err", IBV_WC_RESP_TIMEOUT_ERR),
	E("general_err", IBV_WC_GENERAL_ERR), E("tm_err", IBV_WC_TM_ERR),
	E("tm_rndv_incomplete", IBV_WC_TM_RNDV_INCOMPLETE), END,
};

const struct ibvl_enum ibvl_wc_opcodes[] = {
	E("send", IBV_WC_SEND), E("rdma_write", IBV_WC_RDMA_WRITE), E("rdma_read", IBV_WC_RDMA_READ),
	E("comp_swap", IBV_WC_COMP_SWAP), E("fetch_add", IBV_WC_FETCH_ADD),
	E("bind_mw", IBV_WC_BIND_MW), E("local_inv", IBV_WC_LOCAL_INV), E("tso", IBV_WC_TSO),
	WC_ATOMIC_WRITE, E("recv", IBV_WC_RECV),
	E("recv_rdma_with_imm", IBV_WC_RECV_RDMA_WITH_IMM), E("tm_add", IBV_WC_TM_ADD),
	E("tm_del", IBV_WC_TM_DEL), E("tm_sync", IBV_WC_TM_SYNC), E("tm_recv", IBV_WC_TM_RECV),
	E("tm_no_tag", IBV_WC_TM_NO_TAG), E("driver1", IBV_WC_DRIVER1),
	WC_DRIVER2_3, END,
};

const struct ibvl_enum ibvl_wc_flags[] = {
	E("grh", IBV_WC_GRH), E("with_imm", IBV_WC_WITH_IMM), E("ip_csum_ok", IBV_WC_IP_CSUM_OK),
	E("with_inv", IBV_WC_WITH_INV), E("tm_sync_req", IBV_WC_TM_SYNC_REQ),
	E("tm_match", IBV_WC_TM_MATCH), E("tm_data_valid", IBV_WC_TM_DATA_VALID), END,
};

const struct ibvl_enum ibvl_wc_ex_flags[] = {
	E("byte_len", IBV_WC_EX_WITH_BYTE_LEN), E("imm", IBV_WC_EX_WITH_IMM),
	E("qp_num", IBV_WC_EX_WITH_QP_NUM), E("src_qp", IBV_WC_EX_WITH_SRC_QP),
	E("slid", IBV_WC_EX_WITH_SLID), E("sl", IBV_WC_EX_WITH_SL),
	E("dlid_path_bits", IBV_WC_EX_WITH_DLID_PATH_BITS),
	E("completion_timestamp", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP),
	E("cvlan", IBV_WC_EX_WITH_CVLAN), E("flow_tag", IBV_WC_EX_WITH_FLOW_TAG),
	E("tm_info", IBV_WC_EX_WITH_TM_INFO),
	E("completion_timestamp_wallclock", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK),
	E("standard", IBV_WC_STANDARD_FLAGS), END,
};

const struct ibvl_enum ibvl_wr_opcodes[] = {
	E("rdma_write", IBV_WR_RDMA_WRITE), E("rdma_write_with_imm", IBV_WR_RDMA_WRITE_WITH_IMM),
	E("send", IBV_WR_SEND), E("send_with_imm", IBV_WR_SEND_WITH_IMM),
	E("rdma_read", IBV_WR_RDMA_READ), E("atomic_cmp_and_swp", IBV_WR_ATOMIC_CMP_AND_SWP),
	E("atomic_fetch_and_add", IBV_WR_ATOMIC_FETCH_AND_ADD), E("local_inv", IBV_WR_LOCAL_INV),
	E("bind_mw", IBV_WR_BIND_MW), E("send_with_inv", IBV_WR_SEND_WITH_INV),
	E("tso", IBV_WR_TSO), E("driver1", IBV_WR_DRIVER1), WR_ATOMIC_WRITE,
	END,
};

const struct ibvl_enum ibvl_send_flags[] = {
	E("fence", IBV_SEND_FENCE), E("signaled", IBV_SEND_SIGNALED),
	E("solicited", IBV_SEND_SOLICITED), E("inline", IBV_SEND_INLINE),
	E("ip_csum", IBV_SEND_IP_CSUM), END,
};

const struct ibvl_enum ibvl_mw_types[] = {
	E("1", IBV_MW_TYPE_1), E("2", IBV_MW_TYPE_2), E("type_1", IBV_MW_TYPE_1),
	E("type_2", IBV_MW_TYPE_2), END,
};

const struct ibvl_enum ibvl_atomic_caps[] = {
	E("none", IBV_ATOMIC_NONE), E("hca", IBV_ATOMIC_HCA), E("glob", IBV_ATOMIC_GLOB), END,
};

const struct ibvl_enum ibvl_device_caps[] = {
	E("resize_max_wr", IBV_DEVICE_RESIZE_MAX_WR), E("bad_pkey_cntr", IBV_DEVICE_BAD_PKEY_CNTR),
	E("bad_qkey_cntr", IBV_DEVICE_BAD_QKEY_CNTR), E("raw_multi", IBV_DEVICE_RAW_MULTI),
	E("auto_path_mig", IBV_DEVICE_AUTO_PATH_MIG),
	E("change_phy_port", IBV_DEVICE_CHANGE_PHY_PORT),
	E("ud_av_port_enforce", IBV_DEVICE_UD_AV_PORT_ENFORCE),
	E("curr_qp_state_mod", IBV_DEVICE_CURR_QP_STATE_MOD),
	E("shutdown_port", IBV_DEVICE_SHUTDOWN_PORT), E("init_type", IBV_DEVICE_INIT_TYPE),
	E("port_active_event", IBV_DEVICE_PORT_ACTIVE_EVENT),
	E("sys_image_guid", IBV_DEVICE_SYS_IMAGE_GUID),
	E("rc_rnr_nak_gen", IBV_DEVICE_RC_RNR_NAK_GEN), E("srq_resize", IBV_DEVICE_SRQ_RESIZE),
	E("n_notify_cq", IBV_DEVICE_N_NOTIFY_CQ), E("mem_window", IBV_DEVICE_MEM_WINDOW),
	E("ud_ip_csum", IBV_DEVICE_UD_IP_CSUM), E("xrc", IBV_DEVICE_XRC),
	E("mem_mgt_extensions", IBV_DEVICE_MEM_MGT_EXTENSIONS),
	E("mem_window_type_2a", IBV_DEVICE_MEM_WINDOW_TYPE_2A),
	E("mem_window_type_2b", IBV_DEVICE_MEM_WINDOW_TYPE_2B),
	E("rc_ip_csum", IBV_DEVICE_RC_IP_CSUM), E("raw_ip_csum", IBV_DEVICE_RAW_IP_CSUM),
	E("managed_flow_steering", IBV_DEVICE_MANAGED_FLOW_STEERING), END,
};

const struct ibvl_enum ibvl_port_caps[] = {
	E("sm", IBV_PORT_SM), E("notice_sup", IBV_PORT_NOTICE_SUP), E("trap_sup", IBV_PORT_TRAP_SUP),
	E("opt_ipd_sup", IBV_PORT_OPT_IPD_SUP), E("auto_migr_sup", IBV_PORT_AUTO_MIGR_SUP),
	E("sl_map_sup", IBV_PORT_SL_MAP_SUP), E("mkey_nvram", IBV_PORT_MKEY_NVRAM),
	E("pkey_nvram", IBV_PORT_PKEY_NVRAM), E("led_info_sup", IBV_PORT_LED_INFO_SUP),
	E("sys_image_guid_sup", IBV_PORT_SYS_IMAGE_GUID_SUP),
	E("pkey_sw_ext_port_trap_sup", IBV_PORT_PKEY_SW_EXT_PORT_TRAP_SUP),
	E("extended_speeds_sup", IBV_PORT_EXTENDED_SPEEDS_SUP),
	E("cap_mask2_sup", IBV_PORT_CAP_MASK2_SUP), E("cm_sup", IBV_PORT_CM_SUP),
	E("snmp_tunnel_sup", IBV_PORT_SNMP_TUNNEL_SUP), E("reinit_sup", IBV_PORT_REINIT_SUP),
	E("device_mgmt_sup", IBV_PORT_DEVICE_MGMT_SUP),
	E("vendor_class_sup", IBV_PORT_VENDOR_CLASS_SUP),
	E("dr_notice_sup", IBV_PORT_DR_NOTICE_SUP),
	E("cap_mask_notice_sup", IBV_PORT_CAP_MASK_NOTICE_SUP),
	E("boot_mgmt_sup", IBV_PORT_BOOT_MGMT_SUP),
	E("link_latency_sup", IBV_PORT_LINK_LATENCY_SUP),
	E("client_reg_sup", IBV_PORT_CLIENT_REG_SUP), E("ip_based_gids", IBV_PORT_IP_BASED_GIDS),
	END,
};

const struct ibvl_enum ibvl_qp_create_flags[] = {
	E("block_self_mcast_lb", IBV_QP_CREATE_BLOCK_SELF_MCAST_LB),
	E("scatter_fcs", IBV_QP_CREATE_SCATTER_FCS), E("cvlan_stripping", IBV_QP_CREATE_CVLAN_STRIPPING),
	E("source_qpn", IBV_QP_CREATE_SOURCE_QPN), E("pci_write_end_padding", IBV_QP_CREATE_PCI_WRITE_END_PADDING),
	END,
};

const struct ibvl_enum ibvl_send_ops_flags[] = {
	E("rdma_write", IBV_QP_EX_WITH_RDMA_WRITE),
	E("rdma_write_with_imm", IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM),
	E("send", IBV_QP_EX_WITH_SEND), E("send_with_imm", IBV_QP_EX_WITH_SEND_WITH_IMM),
	E("rdma_read", IBV_QP_EX_WITH_RDMA_READ),
	E("atomic_cmp_and_swp", IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP),
	E("atomic_fetch_and_add", IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD),
	E("local_inv", IBV_QP_EX_WITH_LOCAL_INV), E("bind_mw", IBV_QP_EX_WITH_BIND_MW),
	E("send_with_inv", IBV_QP_EX_WITH_SEND_WITH_INV), E("tso", IBV_QP_EX_WITH_TSO),
	QPX_ATOMIC_WRITE, END,
};

const struct ibvl_enum ibvl_srq_types[] = {
	E("basic", IBV_SRQT_BASIC), E("xrc", IBV_SRQT_XRC), E("tm", IBV_SRQT_TM), END,
};

const struct ibvl_enum ibvl_gid_types[] = {
	GID_TYPES, END,
};

/* qp:modify attribute mask bits, named as the attr fields that set them */
const struct ibvl_enum ibvl_qp_attr_masks[] = {
	E("pkey_index", IBV_QP_PKEY_INDEX), E("port_num", IBV_QP_PORT),
	E("qp_access_flags", IBV_QP_ACCESS_FLAGS), E("qkey", IBV_QP_QKEY), E("ah_attr", IBV_QP_AV),
	E("path_mtu", IBV_QP_PATH_MTU), E("dest_qp_num", IBV_QP_DEST_QPN), E("rq_psn", IBV_QP_RQ_PSN),
	E("max_dest_rd_atomic", IBV_QP_MAX_DEST_RD_ATOMIC), E("min_rnr_timer", IBV_QP_MIN_RNR_TIMER),
	E("sq_psn", IBV_QP_SQ_PSN), E("timeout", IBV_QP_TIMEOUT), E("retry_cnt", IBV_QP_RETRY_CNT),
	E("rnr_retry", IBV_QP_RNR_RETRY), E("max_rd_atomic", IBV_QP_MAX_QP_RD_ATOMIC), END,
};

/* ---- rdma_cm --------------------------------------------------------------- */
const struct ibvl_enum ibvl_cm_event_types[] = {
	E("addr_resolved", RDMA_CM_EVENT_ADDR_RESOLVED), E("addr_error", RDMA_CM_EVENT_ADDR_ERROR),
	E("route_resolved", RDMA_CM_EVENT_ROUTE_RESOLVED),
	E("route_error", RDMA_CM_EVENT_ROUTE_ERROR),
	E("connect_request", RDMA_CM_EVENT_CONNECT_REQUEST),
	E("connect_response", RDMA_CM_EVENT_CONNECT_RESPONSE),
	E("connect_error", RDMA_CM_EVENT_CONNECT_ERROR), E("unreachable", RDMA_CM_EVENT_UNREACHABLE),
	E("rejected", RDMA_CM_EVENT_REJECTED), E("established", RDMA_CM_EVENT_ESTABLISHED),
	E("disconnected", RDMA_CM_EVENT_DISCONNECTED),
	E("device_removal", RDMA_CM_EVENT_DEVICE_REMOVAL),
	E("multicast_join", RDMA_CM_EVENT_MULTICAST_JOIN),
	E("multicast_error", RDMA_CM_EVENT_MULTICAST_ERROR),
	E("addr_change", RDMA_CM_EVENT_ADDR_CHANGE), E("timewait_exit", RDMA_CM_EVENT_TIMEWAIT_EXIT),
	END,
};

const struct ibvl_enum ibvl_cm_port_spaces[] = {
	E("tcp", RDMA_PS_TCP), E("udp", RDMA_PS_UDP), E("ib", RDMA_PS_IB), E("ipoib", RDMA_PS_IPOIB),
	E("rc", RDMA_PS_TCP), E("ud", RDMA_PS_UDP), END,
};

const struct ibvl_enum ibvl_cm_join_flags[] = {
	E("fullmember", RDMA_MC_JOIN_FLAG_FULLMEMBER),
	E("sendonly_fullmember", RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER), END,
};

const struct ibvl_enum ibvl_cm_families[] = {
	E("unspec", AF_UNSPEC), E("inet", AF_INET), E("inet6", AF_INET6), E("ib", AF_IB), END,
};

const struct ibvl_enum ibvl_cm_rai_flags[] = {
	E("passive", RAI_PASSIVE), E("numerichost", RAI_NUMERICHOST), E("noroute", RAI_NOROUTE),
	E("family", RAI_FAMILY), END,
};

const struct ibvl_enum ibvl_wq_states[] = {
	E("reset", IBV_WQS_RESET), E("rdy", IBV_WQS_RDY), E("err", IBV_WQS_ERR),
	E("unknown", IBV_WQS_UNKNOWN), END,
};

const struct ibvl_enum ibvl_wq_flags[] = {
	E("cvlan_stripping", IBV_WQ_FLAGS_CVLAN_STRIPPING),
	E("scatter_fcs", IBV_WQ_FLAGS_SCATTER_FCS), E("delay_drop", IBV_WQ_FLAGS_DELAY_DROP),
	E("pci_write_end_padding", IBV_WQ_FLAGS_PCI_WRITE_END_PADDING), END,
};

const struct ibvl_enum ibvl_counter_descs[] = {
	E("packets", IBV_COUNTER_PACKETS), E("bytes", IBV_COUNTER_BYTES), END,
};

const struct ibvl_enum ibvl_rates[] = {
	E("max", IBV_RATE_MAX), E("2_5_gbps", IBV_RATE_2_5_GBPS), E("5_gbps", IBV_RATE_5_GBPS),
	E("10_gbps", IBV_RATE_10_GBPS), E("14_gbps", IBV_RATE_14_GBPS),
	E("20_gbps", IBV_RATE_20_GBPS), E("25_gbps", IBV_RATE_25_GBPS),
	E("28_gbps", IBV_RATE_28_GBPS), E("30_gbps", IBV_RATE_30_GBPS),
	E("40_gbps", IBV_RATE_40_GBPS), E("50_gbps", IBV_RATE_50_GBPS),
	E("56_gbps", IBV_RATE_56_GBPS), E("60_gbps", IBV_RATE_60_GBPS),
	E("80_gbps", IBV_RATE_80_GBPS), E("100_gbps", IBV_RATE_100_GBPS),
	E("112_gbps", IBV_RATE_112_GBPS), E("120_gbps", IBV_RATE_120_GBPS),
	E("168_gbps", IBV_RATE_168_GBPS), E("200_gbps", IBV_RATE_200_GBPS),
	E("300_gbps", IBV_RATE_300_GBPS), E("400_gbps", IBV_RATE_400_GBPS),
	E("600_gbps", IBV_RATE_600_GBPS), RATES_800_1200, END,
};

const struct ibvl_enum ibvl_fork_statuses[] = {
	FORK_STATUSES, END,
};
