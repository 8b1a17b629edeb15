/*
 * embed.c: the embedding API (ibverbs.h): a C host pushes its own verbs
 * objects as the binding's userdata, borrowed or owned, and releases them
 * before destroying them; ibvl_to_* give the C pointers back.
 *
 *   ibvl_push_qp(L, qp, IBVL_BORROWED); lua_setglobal(L, "qp");
 *   ... the script runs ...
 *   ibvl_release_qp(L, qp); ibv_destroy_qp(qp);
 *   struct ibv_qp *q = ibvl_to_qp(L, -1);  -- NULL: ibvl_to_error() says why
 *
 * A pushed object is an ordinary userdata of its class, tracked by its C
 * pointer, so the same pointer always gives the same userdata.  A borrowed one
 * has o.detach set: object.c calls it instead of the class's destroy, so
 * close, __gc and lua_close leave the C object alone.
 */
#include <stdio.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "ibverbs.h"
#include "verbs/cq.h"
#include "cm/cm.h"
#include "verbs/verbs.h"

static int detach_plain(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	(void)ptr;
	return 0;
}

/* ibv_destroy_cq waits until every event is acknowledged: the script's are */
static int detach_cq(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_cq *cq = (struct ibvl_cq *)o;
	if (cq->unacked > 0)
		ibv_ack_cq_events(ptr, cq->unacked);
	cq->unacked = 0;
	return 0;
}

/* what the cm made for a lent id through the script (id:create_qp) is Lua's */
static int detach_cm_id(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_cm_id *id = (struct ibvl_cm_id *)o;
	(void)ptr;
	for (int i = 0; i < 6; i++)
		if (id->owned[i] != NULL)
			ibvl_close_forced(id->owned[i]);
	return 0;
}

/* The metatables exist once ibverbs.core was opened in this state. */
static void need_core(lua_State *L)
{
	luaL_getmetatable(L, ibvl_qp_class.name);
	int have = lua_istable(L, -1);
	lua_pop(L, 1);
	if (have)
		return;
#if LUA_VERSION_NUM >= 502
	luaL_requiref(L, "ibverbs.core", luaopen_ibverbs_core, 0);
	lua_pop(L, 1);
#else
	lua_getglobal(L, "require");
	lua_pushliteral(L, "ibverbs.core");
	lua_call(L, 1, 0);
#endif
}

/* Pushes the tracked userdata of cptr when Lua has it open (1), or nothing (0). */
static struct ibvl_obj *find(lua_State *L, const void *cptr, const struct ibvl_class *cls)
{
	if (ibvl_push_tracked(L, cptr) && ibvl_test_class(L, -1, cls) != NULL)
		return lua_touserdata(L, -1);
	lua_pop(L, 1);
	return NULL;
}

/* A known object is pushed again (owned: it becomes Lua's); else a new
 * userdata of cls and size is pushed, given cptr, and returned as fresh. */
static struct ibvl_obj *push(lua_State *L, const struct ibvl_class *cls, size_t size,
                             void *cptr, int owned, int *fresh)
{
	need_core(L);
	struct ibvl_obj *o = find(L, cptr, cls);
	*fresh = o == NULL;
	if (o == NULL) {
		o = ibvl_new(L, cls, size, NULL); /* lent or given: no verbs call follows */
		o->ptr = cptr;
		o->detach = detach_plain;
		if (cls == &ibvl_cq_class)
			o->detach = detach_cq;
		else if (cls == &ibvl_cm_id_class)
			o->detach = detach_cm_id;
	}
	if (owned)
		o->detach = NULL;
	return o;
}

/* The new userdata at the top uses the object the push at the top pushed
 * (nothing when that pushed nil), which is popped. */
static void use_top(lua_State *L)
{
	if (!lua_isnil(L, -1))
		ibvl_use(L, -2, -1);
	lua_pop(L, 1);
}

int ibvl_push_context(lua_State *L, struct ibv_context *ctx, int owned)
{
	int fresh;
	if (ctx == NULL)
		return lua_pushnil(L), 0;
	push(L, &ibvl_context_class, sizeof(struct ibvl_obj), ctx, owned, &fresh);
	if (fresh)
		ibvl_track(L, -1);
	return 1;
}

int ibvl_push_pd(lua_State *L, struct ibv_pd *pd, int owned)
{
	int fresh;
	if (pd == NULL)
		return lua_pushnil(L), 0;
	push(L, &ibvl_pd_class, sizeof(struct ibvl_obj), pd, owned, &fresh);
	if (fresh) {
		ibvl_push_context(L, pd->context, IBVL_BORROWED); /* pd:context() */
		use_top(L);
		ibvl_track(L, -1);
	}
	return 1;
}

int ibvl_push_cq(lua_State *L, struct ibv_cq *cq, int owned)
{
	int fresh;
	if (cq == NULL)
		return lua_pushnil(L), 0;
	push(L, &ibvl_cq_class, sizeof(struct ibvl_cq), cq, owned, &fresh);
	if (fresh) {
		ibvl_push_context(L, cq->context, IBVL_BORROWED);
		use_top(L);
		ibvl_track(L, -1);
	}
	return 1;
}

int ibvl_push_srq(lua_State *L, struct ibv_srq *srq, int owned)
{
	int fresh;
	if (srq == NULL)
		return lua_pushnil(L), 0;
	push(L, &ibvl_srq_class, sizeof(struct ibvl_srq), srq, owned, &fresh);
	if (fresh) {
		ibvl_push_pd(L, srq->pd, IBVL_BORROWED);
		use_top(L);
		struct ibv_srq_attr a = {0};
		uint32_t num;
		ibv_query_srq(srq, &a); /* the sizes only feed messages: 0 when unknown */
		ibvl_srq_adopt(L, &a, ibv_get_srq_num(srq, &num) == 0 && num != 0
		                          ? IBV_SRQT_XRC : IBV_SRQT_BASIC);
	}
	return 1;
}

int ibvl_push_qp(lua_State *L, struct ibv_qp *qp, int owned)
{
	int fresh;
	if (qp == NULL)
		return lua_pushnil(L), 0;
	struct ibvl_qp *q = (struct ibvl_qp *)push(L, &ibvl_qp_class, sizeof(struct ibvl_qp), qp,
	                                           owned, &fresh);
	if (!fresh)
		return 1;
	/* used objects in the order qp.c keeps them: pd, send_cq, recv_cq, srq */
	if (qp->pd != NULL)
		ibvl_push_pd(L, qp->pd, IBVL_BORROWED);
	else
		ibvl_push_context(L, qp->context, IBVL_BORROWED);
	use_top(L);
	ibvl_push_cq(L, qp->send_cq, IBVL_BORROWED);
	use_top(L);
	if (qp->recv_cq != NULL && qp->recv_cq != qp->send_cq) {
		ibvl_push_cq(L, qp->recv_cq, IBVL_BORROWED);
		use_top(L);
	}
	ibvl_push_srq(L, qp->srq, IBVL_BORROWED);
	use_top(L);
	struct ibv_qp_attr attr;
	struct ibv_qp_init_attr init;
	memset(&init, 0, sizeof init);
	if (ibv_query_qp(qp, &attr, IBV_QP_CAP, &init) == 0) {
		q->max_send_wr = init.cap.max_send_wr;
		q->max_recv_wr = init.cap.max_recv_wr;
		q->max_send_sge = init.cap.max_send_sge;
		q->max_recv_sge = init.cap.max_recv_sge;
		q->max_inline_data = init.cap.max_inline_data;
	}
	ibvl_track(L, -1);
	return 1;
}

int ibvl_push_mr(lua_State *L, struct ibv_mr *mr, int owned)
{
	int fresh;
	if (mr == NULL)
		return lua_pushnil(L), 0;
	push(L, &ibvl_mr_class, ibvl_mr_size, mr, owned, &fresh);
	if (fresh) {
		ibvl_push_pd(L, mr->pd, IBVL_BORROWED);
		use_top(L);
		ibvl_track(L, -1);
	}
	return 1;
}

int ibvl_push_cm_id(lua_State *L, struct rdma_cm_id *id, int owned)
{
	int fresh;
	if (id == NULL)
		return lua_pushnil(L), 0;
	struct ibvl_cm_id *c = (struct ibvl_cm_id *)push(L, &ibvl_cm_id_class,
	                                                 sizeof(struct ibvl_cm_id), id, owned,
	                                                 &fresh);
	if (fresh) {
		c->chan_slot = -1; /* its events stay on the host's channel */
		c->pd_slot = -1;
		ibvl_track(L, -1);
	}
	return 1;
}

/* ---- release -------------------------------------------------------------- */
static int release(lua_State *L, const void *cptr, const struct ibvl_class *cls)
{
	if (cptr == NULL)
		return 0;
	struct ibvl_obj *o = find(L, cptr, cls);
	if (o == NULL)
		return 0;
	if (o->detach == NULL) /* owned: back to the host */
		o->detach = cls == &ibvl_cq_class       ? detach_cq
		            : cls == &ibvl_cm_id_class ? detach_cm_id
		                                       : detach_plain;
	ibvl_close_forced(o); /* what the script made on it first */
	lua_pop(L, 1);
	return 1;
}

int ibvl_release_context(lua_State *L, struct ibv_context *ctx)
{
	return release(L, ctx, &ibvl_context_class);
}

int ibvl_release_pd(lua_State *L, struct ibv_pd *pd)
{
	return release(L, pd, &ibvl_pd_class);
}

int ibvl_release_cq(lua_State *L, struct ibv_cq *cq)
{
	return release(L, cq, &ibvl_cq_class);
}

int ibvl_release_srq(lua_State *L, struct ibv_srq *srq)
{
	return release(L, srq, &ibvl_srq_class);
}

int ibvl_release_qp(lua_State *L, struct ibv_qp *qp)
{
	return release(L, qp, &ibvl_qp_class);
}

int ibvl_release_mr(lua_State *L, struct ibv_mr *mr)
{
	return release(L, mr, &ibvl_mr_class);
}

int ibvl_release_cm_id(lua_State *L, struct rdma_cm_id *id)
{
	return release(L, id, &ibvl_cm_id_class);
}

/* ---- C pointers of Lua objects -------------------------------------------- */
static _Thread_local char to_error[160];

const char *ibvl_to_error(void)
{
	return to_error;
}

static void *to(lua_State *L, int idx, const struct ibvl_class *cls)
{
	struct ibvl_obj *o = ibvl_test_class(L, idx, cls);
	if (o == NULL) {
		const char *got = luaL_typename(L, idx);
		if (luaL_getmetafield(L, idx, "__name") != 0) {
			if (lua_type(L, -1) == LUA_TSTRING)
				got = lua_tostring(L, -1);
			snprintf(to_error, sizeof to_error, "%s expected, got %s", cls->name, got);
			lua_pop(L, 1);
		} else {
			snprintf(to_error, sizeof to_error, "%s expected, got %s", cls->name, got);
		}
		return NULL;
	}
	if (o->ptr == NULL) {
		snprintf(to_error, sizeof to_error, "attempt to use a closed %s", cls->name);
		return NULL;
	}
	to_error[0] = '\0';
	return o->ptr;
}

struct ibv_context *ibvl_to_context(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_context_class);
}

struct ibv_pd *ibvl_to_pd(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_pd_class);
}

struct ibv_cq *ibvl_to_cq(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_cq_class);
}

struct ibv_srq *ibvl_to_srq(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_srq_class);
}

struct ibv_qp *ibvl_to_qp(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_qp_class);
}

struct ibv_mr *ibvl_to_mr(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_mr_class);
}

struct rdma_cm_id *ibvl_to_cm_id(lua_State *L, int idx)
{
	return to(L, idx, &ibvl_cm_id_class);
}
