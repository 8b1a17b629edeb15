/*
 * cm/cm.h: rdma_cm's internals, what the cm files share (cm_base.c,
 * cm_addr.c, cm_id.c, cm_channel.c, cm_qp.c, and embed.c's lent ids): ids
 * and their events, the synchronous calls, addresses; their classes and
 * entry points.  Above the verbs objects (verbs/verbs.h).
 */
#ifndef IBVL_CM_H
#define IBVL_CM_H

#include <stddef.h>
#include <stdint.h>

#include "verbs/verbs.h"

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
/* what the id owns, by slot (cm_qp.c adopts them); an owned object closed
 * since reads as none */
enum { IBVL_OWN_QP, IBVL_OWN_SRQ, IBVL_OWN_SEND_CQ, IBVL_OWN_RECV_CQ, IBVL_OWN_SEND_CH,
       IBVL_OWN_RECV_CH };
static inline struct ibvl_obj *ibvl_cm_owned(struct ibvl_cm_id *id, int which)
{
	struct ibvl_obj *o = id->owned[which];
	return o != NULL && o->ptr != NULL ? o : NULL;
}

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
void ibvl_open_cm_post(lua_State *L);
void ibvl_check_sockaddr(lua_State *L, int arg, struct sockaddr_storage *ss);
void ibvl_push_sockaddr(lua_State *L, const struct sockaddr *sa);

extern const struct ibvl_class ibvl_cm_channel_class, ibvl_cm_id_class, ibvl_cm_addrinfo_class;

#endif
