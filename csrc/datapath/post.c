/*
 * post.c: the one posting path (post.h): reading what to post under a guard,
 * the send chain's checks, the results.  The cut, the verbs call and the
 * restore are ibvl_post_run, inline in post.h.
 */
#include <string.h>

#include "verbs/verbs.h"
#include "datapath/post.h"
#include "datapath/wr.h"

const char *const ibvl_post_calls[4] = {
	[IBVL_POST_RECV] = "ibv_post_recv",
	[IBVL_POST_SEND] = "ibv_post_send",
	[IBVL_POST_SRQ] = "ibv_post_srq_recv",
	[IBVL_POST_WQ] = "ibv_post_wq_recv",
};

void *ibvl_post_prepare(lua_State *L, const struct ibvl_class *cls, int send,
                        struct ibvl_chain *c)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	void *target = ibvl_check(L, 1, cls);
	if (send)
		ibvl_send_chain(L, 2, c);
	else
		ibvl_recv_chain(L, 2, c);
	ibvl_guard_end(L, &g);
	if (send)
		ibvl_check_send_chain(L, target, c);
	return target;
}

void ibvl_check_send_chain(lua_State *L, struct ibvl_qp *qp, struct ibvl_chain *c)
{
	if (((struct ibv_qp *)qp->o.ptr)->qp_type != IBV_QPT_UD)
		return;
	for (int i = 0; i < c->count; i++)
		if (c->slot[i].ah == NULL)
			ibvl_error(L, "WR %d: field 'ah' is required on a UD QP", c->index0 + i);
}

int ibvl_post_result(lua_State *L, enum ibvl_post_kind kind, int rc, const struct ibvl_chain *c,
                     const void *bad, const char *hint)
{
	if (rc == 0) {
		lua_pushboolean(L, 1);
		return 1;
	}
	size_t wrsize = kind == IBVL_POST_SEND ? sizeof(struct ibv_send_wr)
	                                       : sizeof(struct ibv_recv_wr);
	ibvl_fail_hint(L, ibvl_post_calls[kind], rc, hint);
	if (bad != NULL)
		lua_pushinteger(L, c->index0 + ((const char *)bad - (const char *)c->base) /
		                                   (ptrdiff_t)wrsize);
	else
		lua_pushnil(L);
	return 4;
}

int ibvl_post_queue(lua_State *L, enum ibvl_post_kind kind, const struct ibvl_class *cls)
{
	struct ibvl_chain c;
	struct ibvl_obj *target = ibvl_post_prepare(L, cls, 0, &c);
	void *bad = NULL;
	int rc = ibvl_post_run(kind, target->ptr, &c, &bad);
	return ibvl_post_result(L, kind, rc, &c, bad, NULL);
}

/* ---- qp:post_recv, qp:post_send (in qp.c's method table) ----------------- */

/* A queue the QP does not have: its receives go to an SRQ (ibv_post_recv(3)
 * says to use ibv_post_srq_recv), or it is the XRC side without that queue.
 * Refused here, as providers need not check: nil, msg, EINVAL, 1. */
const char *ibvl_no_queue(const struct ibv_qp *q, int send)
{
	if (send && q->qp_type == IBV_QPT_XRC_RECV)
		return "an xrc_recv QP has no send queue";
	if (!send && q->srq != NULL)
		return "the QP receives through its SRQ: post with srq:post_recv";
	if (!send && (q->qp_type == IBV_QPT_XRC_RECV || q->qp_type == IBV_QPT_XRC_SEND))
		return "an XRC QP receives through an XRC SRQ: post with srq:post_recv";
	return NULL;
}

static int no_queue(lua_State *L, struct ibv_qp *q, int send)
{
	const char *why = ibvl_no_queue(q, send);
	if (why == NULL)
		return 0;
	lua_pushnil(L);
	lua_pushfstring(L, "%s: %s (%s)", send ? "ibv_post_send" : "ibv_post_recv",
	                strerror(EINVAL), why);
	lua_pushinteger(L, EINVAL);
	lua_pushinteger(L, 1);
	return 4;
}

/* The likely cause of a post failing: the QP's state. */
static const char *post_hint(const struct ibv_qp *q, int send)
{
	if (send && q->state != IBV_QPS_RTS && q->state != IBV_QPS_SQD)
		return q->state == IBV_QPS_RESET ? "the QP is in state 'reset': sends need 'rts'"
		     : q->state == IBV_QPS_INIT  ? "the QP is in state 'init': sends need 'rts'"
		     : q->state == IBV_QPS_RTR   ? "the QP is in state 'rtr': sends need 'rts'"
		                                 : "the QP is in an error state";
	if (!send && q->state == IBV_QPS_RESET)
		return "the QP is in state 'reset': receives need 'init' or later";
	return NULL;
}

/* The WRs at arg 2 as a chain, the QP at arg 1 checked.  The prepared list
 * the QP posted last is known by its address (the QP keeps it alive): it
 * needs no type check, and as no table is read, no guard either.  Anything
 * else is read under a guard, the QP checked again inside it (ibvl_post_prepare). */
static void qp_post_chain(lua_State *L, struct ibvl_qp **qp, int send, struct ibvl_chain *c)
{
	void *ud = lua_type(L, 2) == LUA_TUSERDATA ? lua_touserdata(L, 2) : NULL;
	if (ud != NULL && ud == (*qp)->last_list[send]) {
		ibvl_list_chain(L, ud, 2, c); /* runs no Lua code */
		if (send)
			ibvl_check_send_chain(L, *qp, c);
		return;
	}
	*qp = ibvl_post_prepare(L, &ibvl_qp_class, send, c);
}

/* After the verbs call (it may allocate): the QP remembers the list it posted. */
static void remember_list(lua_State *L, struct ibvl_qp *qp, int send, const struct ibvl_chain *c)
{
	if (c->list == NULL || c->list == qp->last_list[send])
		return;
	ibvl_anchor(L, 1, &qp->last_list[send], 2);
	qp->last_list[send] = c->list;
}

/* qp:post_recv(wr | {wr, ...} | recv_wrs [, first, count]),
 * qp:post_send(wr | {wr, ...} | send_wrs [, first, count]) */
static int qp_post(lua_State *L, int send)
{
	struct ibvl_qp *qp = ibvl_self(L);
	if (qp == NULL || qp->o.ptr == NULL)
		qp = ibvl_check_qp(L, 1);
	if (no_queue(L, qp->o.ptr, send))
		return 4;
	struct ibvl_chain c;
	qp_post_chain(L, &qp, send, &c);
	struct ibv_qp *q = qp->o.ptr;
	void *bad = NULL;
	enum ibvl_post_kind kind = send ? IBVL_POST_SEND : IBVL_POST_RECV;
	int rc = ibvl_post_run(kind, q, &c, &bad);
	const char *hint = rc ? post_hint(q, send) : NULL; /* before anything allocates */
	remember_list(L, qp, send, &c);
	return ibvl_post_result(L, kind, rc, &c, bad, hint);
}

int ibvl_qp_post_recv(lua_State *L)
{
	return qp_post(L, 0);
}

int ibvl_qp_post_send(lua_State *L)
{
	return qp_post(L, 1);
}

/* ---- srq:post_recv, wq:post_recv (in srq.c's and wq.c's tables) --------- */
/* srq:post_recv(wr | {wr, ...} | recv_wrs [, first, count]) */
int ibvl_srq_post_recv(lua_State *L)
{
	return ibvl_post_queue(L, IBVL_POST_SRQ, &ibvl_srq_class);
}

/* wq:post_recv(wr | {wr, ...} | recv_wrs [, first, count]) */
int ibvl_wq_post_recv(lua_State *L)
{
	return ibvl_post_queue(L, IBVL_POST_WQ, &ibvl_wq_class);
}
