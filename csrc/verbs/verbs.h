/*
 * verbs/verbs.h: what the verbs object files (verbs/) share above the base
 * layers: their classes, their entry points (core.c opens them), queue
 * pairs, SRQs, address handles, the memory of buffers and MRs.  The files
 * above (datapath/, cm/, measure/, embed.c) read the objects through it.
 * rdma_cm's internals are cm/cm.h's; each folder's entry points are in its
 * own header.
 */
#ifndef IBVL_VERBS_H
#define IBVL_VERBS_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "base/args.h"
#include "base/compat.h"
#include "base/enums.h"
#include "base/err.h"
#include "base/fields.h"
#include "base/late.h"
#include "base/object.h"
#include "base/wait.h"

struct rdma_cm_id;

/* ---- the verbs object files: each registers its metatable and its
 * constructors (on the module or on its parent's methods) ---------------- */
void ibvl_open_device(lua_State *L);
void ibvl_open_context(lua_State *L);
void ibvl_open_pd(lua_State *L);
void ibvl_open_mr(lua_State *L);
void ibvl_open_buffer(lua_State *L);
void ibvl_open_comp_channel(lua_State *L);
void ibvl_open_cq(lua_State *L);
void ibvl_open_qp(lua_State *L);
void ibvl_open_qp_attr(lua_State *L);
void ibvl_open_ah(lua_State *L);
void ibvl_open_mw(lua_State *L);
void ibvl_open_srq(lua_State *L);
void ibvl_open_xrcd(lua_State *L);
void ibvl_open_dm(lua_State *L);
void ibvl_open_td(lua_State *L);
void ibvl_open_wq(lua_State *L);
void ibvl_open_rwq_ind_tbl(lua_State *L);
void ibvl_open_flow(lua_State *L);
void ibvl_open_counters(lua_State *L);

/* ---- memory of buffers and MRs (buffer.c) ------------------------------- */
int ibvl_mem_read(lua_State *L, const char *base, size_t size, int arg);
int ibvl_mem_write(lua_State *L, char *base, size_t size, int arg);
int ibvl_mem_u64(lua_State *L, char *base, size_t size, int arg);
void *ibvl_alloc_pages(size_t size);
size_t ibvl_buffer_size(const struct ibvl_obj *buffer);

extern const struct ibvl_class ibvl_context_class, ibvl_pd_class, ibvl_mr_class,
	ibvl_buffer_class, ibvl_comp_channel_class, ibvl_cq_class, ibvl_qp_class, ibvl_srq_class,
	ibvl_ah_class, ibvl_mw_class, ibvl_xrcd_class;

/* ---- queue pairs (qp.c) ------------------------------------------------- */
struct ibvl_qp {
	struct ibvl_obj o;           /* o.ptr: struct ibv_qp * */
	struct ibv_qp_ex *qpx;       /* non-NULL when created with send_ops_flags */
	struct rdma_cm_id *cm_id;    /* set when rdma_create_qp made it: rdma_destroy_qp */
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
	uint64_t send_ops_flags;     /* what qp:wr_post may build (qp_ex.c) */
	void *last_list[2];          /* the prepared recv/send lists posted last, anchored */
#define IBVL_KNOWN_ATTRS 4
	const void *known_attr[IBVL_KNOWN_ATTRS]; /* ibv.qp_attr sets qp:modify took, anchored */
	unsigned next_attr;          /* the known_attr slot the next new one takes */
};

struct ibvl_qp *ibvl_check_qp(lua_State *L, int arg);
/* QP methods made in other files, in qp.c's method table (the posts are the
 * data path's: datapath/post.c, datapath/qp_ex.c) */
int ibvl_qp_post_recv(lua_State *L);   /* post.c: qp:post_recv */
int ibvl_qp_post_send(lua_State *L);   /* post.c: qp:post_send */
int ibvl_qp_wr_post(lua_State *L);     /* qp_ex.c: qp:wr_post */
int ibvl_qp_create_flow(lua_State *L); /* flow.c: qp:create_flow */
void ibvl_qp_adopt(lua_State *L, int used_idx, int pd_idx, const struct ibv_qp_init_attr_ex *a);
#define IBVL_QP_USED 6 /* pd, send_cq, recv_cq, srq, xrcd, rwq_ind_tbl */
int ibvl_parse_qp_init_attr(lua_State *L, int idx, struct ibv_qp_init_attr_ex *a);
/* qp_attr.c: attributes; qp:modify and qp:query, in qp.c's method table */
void ibvl_parse_qp_cap(lua_State *L, int idx, struct ibv_qp_cap *cap);
void ibvl_push_qp_cap(lua_State *L, const struct ibv_qp_cap *cap);
void ibvl_push_qp_attr_mask(lua_State *L, const struct ibv_qp_attr *a, int mask);
int ibvl_qp_modify(lua_State *L);
int ibvl_qp_query(lua_State *L);

/* ---- address handles (ah.c) ------------------------------------------- */
void ibvl_parse_ah_attr(lua_State *L, int idx, struct ibv_ah_attr *ah);
void ibvl_push_ah_attr(lua_State *L, const struct ibv_ah_attr *ah);
void ibvl_push_ah_attr_at(lua_State *L, const void *ah); /* an IBVL_F_PUSH */

/* ---- shared receive queues (srq.c) -------------------------------------- */
struct ibvl_srq {
	struct ibvl_obj o;        /* o.ptr: struct ibv_srq * */
	struct rdma_cm_id *cm_id; /* set when rdma_create_srq made it: rdma_destroy_srq */
	uint32_t max_wr, max_sge; /* granted */
	int srq_type;             /* enum ibv_srq_type */
	uint32_t srq_num;         /* XRC SRQs */
};

/* Finishes the SRQ userdata at the top of the stack (made with ibvl_new and
 * given its ptr, and cm_id where rdma_create_srq made it, and its ibvl_use of
 * the objects it uses): records the granted sizes and tracks it for events. */
void ibvl_srq_adopt(lua_State *L, const struct ibv_srq_attr *granted, int srq_type);
int ibvl_srq_post_recv(lua_State *L); /* post.c: srq:post_recv, in srq.c's table */
int ibvl_wq_post_recv(lua_State *L);  /* post.c: wq:post_recv, in wq.c's table */

/* ---- XRC domains (xrcd.c) ----------------------------------------------- */
int ibvl_xrc_errno(struct ibv_context *ctx, int err);

/* ---- the embedding API (embed.c; its public header is ibverbs.h) ---------- */
extern const size_t ibvl_mr_size; /* mr.c: an MR userdata's size */

/* ---- the rest of the verbs objects (dm.c, td.c, wq.c, rwq_ind_tbl.c,
 * flow.c, counters.c) and what they add to older types ---------------------- */
extern const struct ibvl_class ibvl_dev_mr_class, ibvl_dm_class, ibvl_td_class,
	ibvl_wq_class, ibvl_rwq_ind_tbl_class, ibvl_flow_class, ibvl_counters_class;
void *ibvl_dev_mr_new(lua_State *L, struct ibvl_guard *g); /* mr.c: an ibverbs.dev_mr, closed */

#endif
