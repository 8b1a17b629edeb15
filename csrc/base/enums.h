/*
 * enums.h: the name tables of verbs and rdma_cm enums and flags (enums.c),
 * and libibverbs' names of them (names.c).
 * Above args.h (struct ibvl_enum).
 */
#ifndef IBVL_ENUMS_H
#define IBVL_ENUMS_H

#include "base/args.h"

/* ---- enum and flag tables (enums.c) ------------------------------------- */
extern const struct ibvl_enum ibvl_node_types[], ibvl_transports[], ibvl_port_states[],
	ibvl_mtus[], ibvl_link_layers[], ibvl_event_types[], ibvl_access_flags[],
	ibvl_qp_types[], ibvl_qp_states[], ibvl_mig_states[], ibvl_wc_statuses[],
	ibvl_wc_opcodes[], ibvl_wc_flags[], ibvl_wr_opcodes[], ibvl_send_flags[],
	ibvl_mw_types[], ibvl_atomic_caps[], ibvl_device_caps[], ibvl_port_caps[],
	ibvl_qp_create_flags[], ibvl_send_ops_flags[],
	ibvl_srq_types[], ibvl_gid_types[], ibvl_wc_ex_flags[], ibvl_qp_attr_masks[],
	ibvl_cm_event_types[], ibvl_cm_port_spaces[], ibvl_cm_join_flags[], ibvl_cm_families[],
	ibvl_cm_rai_flags[];
extern const struct ibvl_enum ibvl_rates[], ibvl_fork_statuses[];
extern const struct ibvl_enum ibvl_wq_states[], ibvl_wq_flags[], ibvl_counter_descs[];

/* names.c: libibverbs' own names of them (ibv.wc_status_str, ...), rates */
void ibvl_open_names(lua_State *L);

#endif
