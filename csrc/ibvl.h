/*
 * ibvl.h: what the verbs object files share above the base layers: the
 * classes, the files' entry points, queue pairs, work requests, rdma_cm.
 * The base layers are included here (compat.h, err.h, late.h, args.h,
 * object.h, enums.h, fields.h, wait.h); a base file includes only its own
 * layers.
 */
#ifndef IBVL_H
#define IBVL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "args.h"
#include "compat.h"
#include "enums.h"
#include "err.h"
#include "fields.h"
#include "late.h"
#include "object.h"
#include "wait.h"

/* ---- memory of buffers and MRs (buffer.c) ------------------------------- */
int ibvl_mem_read(lua_State *L, const char *base, size_t size, int arg);
int ibvl_mem_write(lua_State *L, char *base, size_t size, int arg);
int ibvl_mem_u64(lua_State *L, char *base, size_t size, int arg);
void *ibvl_alloc_pages(size_t size);
size_t ibvl_buffer_size(const struct ibvl_obj *buffer);

/* ---- object files: each registers its metatable and its constructors ---- */
void ibvl_open_device(lua_State *L);
void ibvl_open_context(lua_State *L);
void ibvl_open_pd(lua_State *L);
void ibvl_open_mr(lua_State *L);
void ibvl_open_buffer(lua_State *L);
void ibvl_open_errno(lua_State *L); /* errno.c: ibv.errno, ibv.strerror */
void ibvl_open_ffi(lua_State *L); /* last: core.rawptr, core.rawmem */

void ibvl_open_channel(lua_State *L);
void ibvl_open_cq(lua_State *L);
void ibvl_open_wc(lua_State *L);
void ibvl_open_qp(lua_State *L);
void ibvl_open_wr(lua_State *L);
void ibvl_open_ah(lua_State *L);
void ibvl_open_mw(lua_State *L);
void ibvl_open_srq(lua_State *L);
void ibvl_open_xrcd(lua_State *L);
void ibvl_open_loop(lua_State *L);
void ibvl_open_stats(lua_State *L); /* stats.c: ibv.samples */
void ibvl_open_lat(lua_State *L);   /* lat.c: ibv.lat_send, lat_write, lat_rtt */
void ibvl_open_bw(lua_State *L);    /* bw.c: ibv.bw */
void ibvl_open_kernels(lua_State *L); /* together.c: ibv.kernels */
void ibvl_open_batch(lua_State *L);
void ibvl_open_names(lua_State *L);        /* names.c: the *_str helpers, rates */
void ibvl_open_spawn(lua_State *L);        /* spawn.c: ibv.spawn */
void ibvl_open_pmix(lua_State *L);         /* pmix.c: ibv.pmix */
void ibvl_open_hmac(lua_State *L);         /* hmac.c: ibv.hmac_sha256 */
void ibvl_push_qp_attr_mask(lua_State *L, const struct ibv_qp_attr *a, int mask);

extern const struct ibvl_class ibvl_context_class, ibvl_pd_class, ibvl_mr_class,
	ibvl_buffer_class, ibvl_channel_class, ibvl_cq_class, ibvl_qp_class, ibvl_srq_class,
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
const char *ibvl_no_queue(const struct ibv_qp *q, int send); /* qp.c: why q cannot post, or NULL */
/* QP methods made in other files, in qp.c's method table */
int ibvl_qp_wr_post(lua_State *L);     /* qp_ex.c: qp:wr_post */
int ibvl_qp_create_flow(lua_State *L); /* flow.c: qp:create_flow */
void ibvl_qp_adopt(lua_State *L, int used_idx, int pd_idx, const struct ibv_qp_init_attr_ex *a);
#define IBVL_QP_USED 6 /* pd, send_cq, recv_cq, srq, xrcd, rwq_ind_tbl */
int ibvl_parse_qp_init_attr(lua_State *L, int idx, struct ibv_qp_init_attr_ex *a);

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

/* ---- XRC domains (xrcd.c) ----------------------------------------------- */
int ibvl_xrc_errno(struct ibv_context *ctx, int err);

/* ---- rdma_cm (cm_base.c, cm_addr.c, cm_id.c, cm_channel.c, cm_qp.c) ------- */
struct rdma_cm_id;
struct rdma_cm_event;
struct sockaddr;
struct sockaddr_storage;

struct ibvl_cm_id {
	struct ibvl_obj o;  /* o.ptr: struct rdma_cm_id * */
	int ep;             /* made by rdma_create_ep: destroyed with rdma_destroy_ep */
	int chan_slot;      /* which used object is its event channel; -1 in sync mode */
	int pd_slot;        /* which used object is the PD its QPs were made on; -1: none */
	size_t connect_len; /* private data rdma_create_ep prepends to rdma_connect's */
	/* what the cm made for the id, adopted as ordinary userdata the id keeps
	 * (user value) and closes with it; librdmacm's pointers to all but the QP
	 * and SRQ are cleared, so rdma_destroy_qp/srq/ep never free them twice */
	struct ibvl_obj *owned[6]; /* qp, srq, send_cq, recv_cq, send/recv channels */
	/* a copy of the connection request that made it (rdma_get_request), for
	 * id.event: the request itself is acknowledged at once, for until it is,
	 * rdma_destroy_id of the listener waits (a finalizer must never block) */
	struct ibvl_cm_request *request;
};
struct ibvl_cm_request; /* cm_base.c */
struct ibvl_cm_request *ibvl_cm_take_request(struct rdma_cm_event *e);
void ibvl_cm_push_request(lua_State *L, const struct ibvl_cm_request *r);

/* cm_base.c: what the cm files share */
void ibvl_cm_sync_prepare(struct ibvl_cm_id *id);
int ibvl_cm_sync_result(lua_State *L, struct ibvl_cm_id *id, const char *call, int rc,
                        double timeout);
#define IBVL_CM_SYNC_TIMEOUT 30.0 /* seconds: default of the synchronous rdma_cm calls */

#define IBVL_CM_DATA_MAX 256 /* private data an event carries, at most */
void ibvl_cm_functions(lua_State *L, const luaL_Reg *fns);
int ibvl_cm_wait(lua_State *L, int fd, int timeout_arg, const char *call);
int ibvl_cm_copy_event(struct rdma_cm_event *c, uint8_t *data, const struct rdma_cm_event *e);
void ibvl_cm_push_copy(lua_State *L, const struct rdma_cm_event *c, int kind, int new_id_idx);

/* the other cm files: their entry points, ids (cm_id.c), addresses (cm_addr.c) */
void ibvl_open_cm_channel(lua_State *L);
void ibvl_open_cm_id(lua_State *L);
void ibvl_open_cm_addr(lua_State *L);
struct ibvl_cm_id *ibvl_cm_new_id(lua_State *L, struct ibvl_guard *g);
void ibvl_cm_adopt_id(lua_State *L, int idx, struct rdma_cm_id *cid, int chan_idx);
void ibvl_cm_push_context(lua_State *L, struct ibv_context *ctx);
void ibvl_open_cm_qp(lua_State *L);
void ibvl_check_sockaddr(lua_State *L, int arg, struct sockaddr_storage *ss);
void ibvl_push_sockaddr(lua_State *L, const struct sockaddr *sa);

/* ---- the embedding API (embed.c; its public header is ibverbs.h) ---------- */
extern const size_t ibvl_mr_size; /* mr.c: an MR userdata's size */

extern const struct ibvl_class ibvl_cm_channel_class, ibvl_cm_id_class, ibvl_cm_addrinfo_class;

/* ---- the rest of the verbs objects (dm.c, td.c, wq.c, rwq_ind_tbl.c,
 * flow.c, counters.c) and what they add to older types ---------------------- */
extern const struct ibvl_class ibvl_dev_mr_class, ibvl_dm_class, ibvl_td_class,
	ibvl_wq_class, ibvl_rwq_ind_tbl_class, ibvl_flow_class, ibvl_counters_class;
void *ibvl_dev_mr_new(lua_State *L, struct ibvl_guard *g); /* mr.c: an ibverbs.dev_mr, closed */
void ibvl_open_dm(lua_State *L);
void ibvl_open_td(lua_State *L);
void ibvl_open_wq(lua_State *L);
void ibvl_open_rwq_ind_tbl(lua_State *L);
void ibvl_open_flow(lua_State *L);
void ibvl_open_counters(lua_State *L);

#endif
