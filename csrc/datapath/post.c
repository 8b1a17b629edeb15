/*
 * post.c: the one posting path (post.h): reading what to post under a guard,
 * the send chain's checks, the results.  The cut, the verbs call and the
 * restore are ibvl_post_run, inline in post.h.
 */
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
