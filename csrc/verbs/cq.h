/*
 * cq.h: completion queues (cq.c) and wc arrays (wc_array.c), with the CQ's inline
 * poll.  Above object.h.
 */
#ifndef IBVL_CQ_H
#define IBVL_CQ_H

#include <stdint.h>

#include <infiniband/verbs.h>

#include "base/object.h"

/* ---- completion queues (cq.c) and wc arrays (wc_array.c) ---------------------- */
struct ibvl_cq {
	struct ibvl_obj o;       /* o.ptr: struct ibv_cq * */
	struct ibv_cq_ex *cqx;   /* non-NULL when made by ibv_create_cq_ex */
	unsigned int unacked;    /* completion events not yet acknowledged */
	uint64_t wc_flags;
	void *last_wcs;          /* the wc array polled into last, anchored (ibvl_anchor) */
};

struct ibvl_wc_array {
	int n;     /* capacity */
	int count; /* filled by the last poll */
	struct ibv_wc wc[];
};

#define IBVL_WC_ARRAY "ibverbs.wc_array"
int ibvl_cq_poll_ex(struct ibvl_cq *cq, int n, struct ibv_wc *wc);

/* Polls up to n completions into wc (a cq_ex too); the count or -errno. */
static inline int ibvl_cq_poll(struct ibvl_cq *cq, int n, struct ibv_wc *wc)
{
	return cq->cqx == NULL ? ibv_poll_cq(cq->o.ptr, n, wc) : ibvl_cq_poll_ex(cq, n, wc);
}

/* Pushes the 1-based index of the first unsuccessful completion of wc[0..n),
 * or nil: a loop checks a whole poll at once. */
static inline void ibvl_push_first_bad(lua_State *L, const struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			lua_pushinteger(L, i + 1);
			return;
		}
	}
	lua_pushnil(L);
}
void ibvl_push_wc(lua_State *L, const struct ibv_wc *wc);
struct ibvl_wc_array *ibvl_check_wcs(lua_State *L, int arg);

#endif
