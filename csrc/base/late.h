/*
 * late.h: the verbs newer than rdma-core 28, found when the module opens.
 *
 *   const char *bad = ibvl_late_open();                -- once, in luaopen (NULL: fine)
 *   #if IBVL_HAVE_QP_DATA_IN_ORDER                     -- the headers had it
 *   ibvl_late_need(L, IBVL_LATE_ibv_query_qp_data_in_order, "qp:query_data_in_order");
 *   r = ibv_query_qp_data_in_order(qp, op, flags);     -- through the pointer found
 *   #else
 *   return ibvl_absent(L, "qp:query_data_in_order", IBVL_SINCE_QP_DATA_IN_ORDER);
 *   #endif
 *
 * The module links directly only against IBVERBS_1.8 and RDMACM_1.2 (rdma-core
 * 28): the loader refuses a library needing a symbol version the node's
 * rdma-core lacks, called or not.  Each verb of a later version is looked up
 * with dlvsym by name and version instead, and every call below is redirected
 * through that pointer by a macro of the verb's own name.  What the headers
 * provide comes from the generated ibvl_config.h (tools/configure).
 * IBVL_RDMA_CORE=28 in the environment (a test aid, read once) makes every
 * verb newer than that release absent, as on a node that has it.
 * The bottom layer with err.h: it depends on nothing else of the module.
 */
#ifndef IBVL_LATE_H
#define IBVL_LATE_H

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "base/compat.h"
#include "ibvl_config.h"

/* X(verb, symbol version, first rdma-core release) */
#define IBVL_LATE_VERBS(X) \
	X(ibv_get_device_index, "IBVERBS_1.9", 30) \
	X(ibv_import_device, "IBVERBS_1.10", 31) \
	X(ibv_import_pd, "IBVERBS_1.10", 31) \
	X(ibv_unimport_pd, "IBVERBS_1.10", 31) \
	X(ibv_import_mr, "IBVERBS_1.10", 31) \
	X(ibv_unimport_mr, "IBVERBS_1.10", 31) \
	X(ibv_query_ece, "IBVERBS_1.10", 31) \
	X(ibv_set_ece, "IBVERBS_1.10", 31) \
	X(rdma_set_local_ece, "RDMACM_1.3", 31) \
	X(rdma_get_remote_ece, "RDMACM_1.3", 31) \
	X(rdma_reject_ece, "RDMACM_1.3", 31) \
	X(_ibv_query_gid_ex, "IBVERBS_1.11", 32) \
	X(_ibv_query_gid_table, "IBVERBS_1.11", 32) \
	X(ibv_reg_dmabuf_mr, "IBVERBS_1.12", 34) \
	X(ibv_import_dm, "IBVERBS_1.13", 35) \
	X(ibv_unimport_dm, "IBVERBS_1.13", 35) \
	X(ibv_is_fork_initialized, "IBVERBS_1.13", 35) \
	X(ibv_query_qp_data_in_order, "IBVERBS_1.14", 36)

#define IBVL_LATE_ID(verb, version, since) IBVL_LATE_##verb,
enum ibvl_late_id { IBVL_LATE_VERBS(IBVL_LATE_ID) IBVL_LATE_COUNT };
#undef IBVL_LATE_ID

extern void *ibvl_late_fn[IBVL_LATE_COUNT];

/* NULL, or what is wrong with IBVL_RDMA_CORE (luaopen raises it). */
const char *ibvl_late_open(void);
/* Raises "what: needs rdma-core N or later (verb@VERSION); this node's
 * library does not have it" unless the verb was found. */
void ibvl_late_need(lua_State *L, enum ibvl_late_id id, const char *what);
/* Raises "what: needs rdma-core N or later; built against B": the headers
 * the module was compiled with lacked it. */
int ibvl_absent(lua_State *L, const char *what, int since);
/* The names of the late verbs this node lacks, as a list; pushed. */
void ibvl_late_push_missing(lua_State *L);
/* Sets what the node's libraries say into the table on top: aid, since (each
 * late verb's release), libibverbs, librdmacm, versions, at_least, at_most,
 * fallbacks. */
void ibvl_late_set_found(lua_State *L);

#define IBVL_LATE(verb) ((__typeof__(&verb))ibvl_late_fn[IBVL_LATE_##verb])

#if IBVL_HAVE_DEVICE_INDEX
#define ibv_get_device_index(...) IBVL_LATE(ibv_get_device_index)(__VA_ARGS__)
#endif
#if IBVL_HAVE_IMPORT
#define ibv_import_device(...) IBVL_LATE(ibv_import_device)(__VA_ARGS__)
#define ibv_import_pd(...) IBVL_LATE(ibv_import_pd)(__VA_ARGS__)
#define ibv_unimport_pd(...) IBVL_LATE(ibv_unimport_pd)(__VA_ARGS__)
#define ibv_import_mr(...) IBVL_LATE(ibv_import_mr)(__VA_ARGS__)
#define ibv_unimport_mr(...) IBVL_LATE(ibv_unimport_mr)(__VA_ARGS__)
#endif
#if IBVL_HAVE_ECE
#define ibv_query_ece(...) IBVL_LATE(ibv_query_ece)(__VA_ARGS__)
#define ibv_set_ece(...) IBVL_LATE(ibv_set_ece)(__VA_ARGS__)
#endif
#if IBVL_HAVE_CM_ECE
#define rdma_set_local_ece(...) IBVL_LATE(rdma_set_local_ece)(__VA_ARGS__)
#define rdma_get_remote_ece(...) IBVL_LATE(rdma_get_remote_ece)(__VA_ARGS__)
#define rdma_reject_ece(...) IBVL_LATE(rdma_reject_ece)(__VA_ARGS__)
#endif
#if IBVL_HAVE_GID_EX /* called directly: verbs.h's inline wrappers name the symbols */
#define _ibv_query_gid_ex(...) IBVL_LATE(_ibv_query_gid_ex)(__VA_ARGS__)
#define _ibv_query_gid_table(...) IBVL_LATE(_ibv_query_gid_table)(__VA_ARGS__)
#endif
#if IBVL_HAVE_DMABUF_MR
#define ibv_reg_dmabuf_mr(...) IBVL_LATE(ibv_reg_dmabuf_mr)(__VA_ARGS__)
#endif
#if IBVL_HAVE_IMPORT_DM
#define ibv_import_dm(...) IBVL_LATE(ibv_import_dm)(__VA_ARGS__)
#define ibv_unimport_dm(...) IBVL_LATE(ibv_unimport_dm)(__VA_ARGS__)
#endif
#if IBVL_HAVE_FORK_STATUS
#define ibv_is_fork_initialized(...) IBVL_LATE(ibv_is_fork_initialized)(__VA_ARGS__)
#endif
#if IBVL_HAVE_QP_DATA_IN_ORDER
#define ibv_query_qp_data_in_order(...) IBVL_LATE(ibv_query_qp_data_in_order)(__VA_ARGS__)
#endif

#endif
