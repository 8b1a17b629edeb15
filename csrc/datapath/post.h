/*
 * post.h: the one posting path.  Every post of the module (qp:post_recv,
 * qp:post_send, srq:post_recv, wq:post_recv, a batch's post steps, the
 * transfer loop's posts) goes through it, so the rules that make a post safe
 * live here once:
 *
 *   1. guard: the target and the WRs are read under an ibvl_guard, the target
 *      checked again inside it (ibvl_post_prepare), the chain checked sound
 *      (what its WRs name still open: wr.c);
 *   2. cut: the chain is cut after its last WR right before the verbs call,
 *      and restored right after it, so a list is never left cut
 *      (ibvl_post_run: no Lua code runs, nothing raises in between);
 *   3. result: true, or nil, msg, errno, bad_wr (ibvl_post_result).
 *
 *   struct ibvl_chain c;
 *   struct ibvl_obj *o = ibvl_post_prepare(L, &ibvl_srq_class, 0, &c);
 *   void *bad = NULL;
 *   int rc = ibvl_post_run(IBVL_POST_SRQ, o->ptr, &c, &bad);
 *   return ibvl_post_result(L, IBVL_POST_SRQ, rc, &c, bad, NULL);
 */
#ifndef IBVL_POST_H
#define IBVL_POST_H

#include <stddef.h>

#include <infiniband/verbs.h>
#include <lua.h>

#include "verbs/verbs.h"
#include "datapath/wr.h"

/* What a post goes to: the verbs object is a struct ibv_qp * (send, recv),
 * a struct ibv_srq * or a struct ibv_wq *. */
enum ibvl_post_kind { IBVL_POST_RECV, IBVL_POST_SEND, IBVL_POST_SRQ, IBVL_POST_WQ };


/* The verbs call of a kind, for messages. */
extern const char *const ibvl_post_calls[4];

/* Reads the target at arg 1 (of class cls) and the WRs at arg 2 (a WR table,
 * an array of them, or a prepared list with optional first, count) as the
 * chain c, under a guard (the target checked again inside it); a send chain
 * is also checked against the QP (ibvl_check_send_chain).  Returns the
 * target, open. */
void *ibvl_post_prepare(lua_State *L, const struct ibvl_class *cls, int send,
                        struct ibvl_chain *c);

/* Raises when a send chain cannot go to qp: a WR on a UD QP needs an address
 * handle, which verbs would dereference. */
void ibvl_check_send_chain(lua_State *L, struct ibvl_qp *qp, struct ibvl_chain *c);

/* The chain of the WRs [first, first+count) of an array of recv WRs linked
 * in order (a prepared list's, known sound), for the transfer loop. */
static inline void ibvl_chain_recv_range(struct ibvl_chain *c, struct ibv_recv_wr *wrs,
                                         int first, int count)
{
	c->base = &wrs[first];
	c->next_slot = (void **)&wrs[first + count - 1].next;
	c->index0 = first + 1;
	c->count = count;
	c->slot = NULL;
	c->list = NULL;
}

/* Posts the chain c to obj (kind says what it is): cut, verbs call, restore.
 * Runs no Lua code and never raises; the verbs result, *bad set on failure. */
static inline int ibvl_post_run(enum ibvl_post_kind kind, void *obj, struct ibvl_chain *c,
                                void **bad)
{
	int rc;
	c->saved = *c->next_slot;
	*c->next_slot = NULL;
	switch (kind) {
	case IBVL_POST_SEND:
		rc = ibv_post_send(obj, c->base, (struct ibv_send_wr **)bad);
		break;
	case IBVL_POST_RECV:
		rc = ibv_post_recv(obj, c->base, (struct ibv_recv_wr **)bad);
		break;
	case IBVL_POST_SRQ:
		rc = ibv_post_srq_recv(obj, c->base, (struct ibv_recv_wr **)bad);
		break;
	default:
		rc = ibv_post_wq_recv(obj, c->base, (struct ibv_recv_wr **)bad);
		break;
	}
	*c->next_slot = c->saved;
	return rc;
}

/* true; or nil, msg, errno, bad_index (1-based, in the list or table given);
 * hint, when not NULL, is the likely cause added to the message. */
int ibvl_post_result(lua_State *L, enum ibvl_post_kind kind, int rc, const struct ibvl_chain *c,
                     const void *bad, const char *hint);

/* The whole post of a receive queue without a fast path (srq, wq): prepare
 * from arg 1 (class cls) and arg 2, run, result. */
/* Why q cannot post on that queue (no receive queue of its own, an
 * xrc_recv QP's sends), or NULL. */
const char *ibvl_no_queue(const struct ibv_qp *q, int send);

int ibvl_post_queue(lua_State *L, enum ibvl_post_kind kind, const struct ibvl_class *cls);

#endif
