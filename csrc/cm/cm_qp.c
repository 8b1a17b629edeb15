/*
 * cm_qp.c: queue pairs and SRQs on cm ids, rdma_create_ep, rdma_get_request
 * (the rdma_verbs helpers that post on them: cm_post.c).
 *
 *   local qp = assert(id:create_qp{cap = {max_send_wr = 16, max_recv_wr = 16}})
 *   id.qp, id.send_cq, id.recv_cq   -- ibverbs.qp / ibverbs.cq: the core's methods work
 *   id:create_qp_ex{...}; id:destroy_qp()
 *   local srq = assert(id:create_srq{max_wr = 64}); id:destroy_srq()  -- QPs made later use it
 *   id:post_send(wr_id, mr, off, len [, flags]); id:get_send_comp()  -- cm_post.c
 *   local ep = assert(cm.create_ep(ai [, {pd = pd, qp_init_attr = {...}}]))
 *   local cid = assert(sid:get_request(5.0))  -- synchronous listener: with its QP
 * With no pd the QP is on the id's default PD; with no CQs librdmacm makes
 * them, each with a completion channel.  These are adopted as ordinary
 * userdata and detached from the C id (only id->qp and id->srq stay: the QP
 * and SRQ userdata free them with rdma_destroy_qp/rdma_destroy_srq), so
 * rdma_destroy_ep never frees them a second time; the id keeps them and
 * closes them when it closes.
 */
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "verbs/cq.h"
#include "cm/cm.h"

static void adopt_owned(lua_State *L, int idx, int pd_from_idx);
static void need_device(lua_State *L, const struct rdma_cm_id *cid);
static void use_pd(lua_State *L, int idx, int pd_idx);

static const char *const own_keys[] = {"qp", "srq", "send_cq", "recv_cq", "send_channel",
                                       "recv_channel"};

static struct ibvl_cm_id *check_cm_id(lua_State *L)
{
	return ibvl_check(L, 1, &ibvl_cm_id_class);
}


/* The object at the top becomes the id's (at idx) which-th owned object:
 * the id names it once its user value keeps it (storing may raise, a memory
 * error: the id must not name an object nothing keeps). */
static void set_owned(lua_State *L, int idx, int which)
{
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	lua_getiuservalue(L, idx, 1);
	lua_pushvalue(L, -2);
	lua_setfield(L, -2, own_keys[which]);
	lua_pop(L, 1);
	id->owned[which] = lua_touserdata(L, -1);
	ibvl_keep(L, -1, idx); /* it keeps the id (and so its device) alive */
}

static void adopt_channel(lua_State *L, int idx, int ctx_idx, struct ibv_comp_channel **ch,
                          int which)
{
	if (*ch == NULL)
		return;
	struct ibvl_obj *o = ibvl_new(L, &ibvl_comp_channel_class, sizeof *o, NULL); /* gc held */
	o->ptr = *ch;
	*ch = NULL;
	ibvl_use(L, -1, ctx_idx);
	set_owned(L, idx, which);
	lua_pop(L, 1);
}

static void adopt_cq(lua_State *L, int idx, int ctx_idx, struct ibv_cq **cq, int which,
                     int ch_which)
{
	if (*cq == NULL)
		return;
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	struct ibvl_cq *c = ibvl_new(L, &ibvl_cq_class, sizeof *c, NULL); /* gc held */
	c->o.ptr = *cq;
	*cq = NULL;
	ibvl_use(L, -1, ctx_idx);
	if (ibvl_cm_owned(id, ch_which) != NULL) {
		lua_getiuservalue(L, idx, 1);
		lua_getfield(L, -1, own_keys[ch_which]);
		ibvl_use(L, -3, -1);
		lua_pop(L, 2);
	}
	ibvl_track(L, -1);
	set_owned(L, idx, which);
	lua_pop(L, 1);
}

/* Adopts the CQs and channels librdmacm made for the id at idx. */
static void adopt_cqs(lua_State *L, int idx)
{
	struct rdma_cm_id *cid = ((struct ibvl_obj *)lua_touserdata(L, idx))->ptr;
	ibvl_cm_push_context(L, cid->verbs);
	int ctx = lua_gettop(L);
	if (cid->send_cq_channel == cid->recv_cq_channel)
		cid->send_cq_channel = NULL;
	adopt_channel(L, idx, ctx, &cid->send_cq_channel, IBVL_OWN_SEND_CH);
	adopt_channel(L, idx, ctx, &cid->recv_cq_channel, IBVL_OWN_RECV_CH);
	if (cid->send_cq == cid->recv_cq)
		cid->send_cq = NULL;
	adopt_cq(L, idx, ctx, &cid->send_cq, IBVL_OWN_SEND_CQ, IBVL_OWN_SEND_CH);
	adopt_cq(L, idx, ctx, &cid->recv_cq, IBVL_OWN_RECV_CQ, IBVL_OWN_RECV_CH);
	lua_pop(L, 1);
}

static void use_owned(lua_State *L, int idx, int which)
{
	if (ibvl_cm_owned(lua_touserdata(L, idx), which) == NULL)
		return;
	lua_getiuservalue(L, idx, 1);
	lua_getfield(L, -1, own_keys[which]);
	ibvl_use(L, -3, -1);
	lua_pop(L, 2);
}

/* The id at idx uses the PD at pd_idx from now on, in place of the one it
 * used (id.pd names it; librdmacm keeps it as id->pd): one slot, however many
 * PDs the id's QPs are made on in turn. */
static void use_pd(lua_State *L, int idx, int pd_idx)
{
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	struct ibvl_obj *pd = lua_touserdata(L, pd_idx);
	if (id->pd_slot >= 0 && id->o.refs[id->pd_slot] != pd) {
		ibvl_swap_use(L, idx, id->pd_slot, pd_idx);
	} else if (id->pd_slot < 0) {
		ibvl_use(L, idx, pd_idx);
		id->pd_slot = id->o.nrefs - 1;
	}
	lua_getiuservalue(L, idx, 1);
	lua_pushvalue(L, pd_idx);
	lua_setfield(L, -2, "pd");
	lua_pop(L, 1);
}

/* (adopt_channel, adopt_cq, adopt_qp: their callers hold the collector from
 * the cm call to the last link, ibvl_gc_held.)
 * Wraps the id's new QP: it uses the objects ibvl_parse_qp_init_attr pushed
 * at used (pd, cqs, srq: nil where not given), and the CQs and SRQ the cm
 * made. Pushes it. */
static void adopt_qp(lua_State *L, int idx, int used, struct ibv_qp_init_attr_ex *a)
{
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	struct rdma_cm_id *cid = id->o.ptr;
	adopt_cqs(L, idx);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr init;
	if (ibv_query_qp(cid->qp, &qa, IBV_QP_CAP, &init) == 0)
		a->cap = init.cap;
	struct ibvl_qp *qp = ibvl_new(L, &ibvl_qp_class, sizeof *qp, NULL); /* gc held */
	qp->o.ptr = cid->qp;
	qp->cm_id = cid;
	ibvl_qp_adopt(L, used, 0, a);
	if (lua_isnil(L, used + 1))
		use_owned(L, idx, IBVL_OWN_SEND_CQ);
	if (lua_isnil(L, used + 2))
		use_owned(L, idx, IBVL_OWN_RECV_CQ);
	if (lua_isnil(L, used + 3) && a->srq != NULL)
		use_owned(L, idx, IBVL_OWN_SRQ);
	if (!lua_isnil(L, used))
		use_pd(L, idx, used);
	set_owned(L, idx, IBVL_OWN_QP);
}

/* For rdma_get_request: the new id at idx got a QP from its listener's
 * init attr, on the listener's (at pd_from_idx) PD. */
static void adopt_owned(lua_State *L, int idx, int pd_from_idx)
{
	struct rdma_cm_id *cid = ((struct ibvl_obj *)lua_touserdata(L, idx))->ptr;
	if (cid->qp == NULL)
		return;
	int top = lua_gettop(L);
	lua_getiuservalue(L, pd_from_idx, 1);
	lua_getfield(L, -1, "pd");
	lua_remove(L, -2);
	for (int i = 1; i < IBVL_QP_USED; i++)
		lua_pushnil(L);
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	adopt_qp(L, idx, top + 1, &a);
	lua_settop(L, top);
}

/* The init attr table at arg, with qp_type defaulting to the id's. */
static int init_attr_table(lua_State *L, int arg, enum ibv_qp_type type)
{
	if (lua_type(L, arg) != LUA_TTABLE)
		ibvl_error(L, "init_attr: table expected, got %s", luaL_typename(L, arg));
	if (ibvl_has_field(L, arg, "qp_type"))
		return arg;
	lua_newtable(L);
	lua_pushnil(L);
	while (lua_next(L, arg)) {
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, -4);
	}
	ibvl_push_enum(L, ibvl_qp_types, type);
	lua_setfield(L, -2, "qp_type");
	return lua_gettop(L);
}

/* Raises unless the id is bound to a device: librdmacm dereferences it. */
static void need_device(lua_State *L, const struct rdma_cm_id *cid)
{
	if (cid->verbs == NULL)
		ibvl_error(L, "the id is not bound to a device yet (bind_addr to a local RDMA "
		              "address, or resolve_addr and wait for 'addr_resolved')");
}

/* Raises when librdmacm would make a QP without a CQ it needs: it makes a
 * CQ only for a queue of at least one WR, and verbs dereferences a missing
 * one. */
static void check_cm_cqs(lua_State *L, const struct ibv_qp_init_attr_ex *a)
{
	if (a->qp_type == IBV_QPT_XRC_RECV)
		return;
	if (a->send_cq == NULL && a->cap.max_send_wr == 0)
		ibvl_error(L, "init_attr: give send_cq, or cap.max_send_wr > 0 for the cm to make one");
	if (a->qp_type != IBV_QPT_XRC_SEND && a->recv_cq == NULL && a->cap.max_recv_wr == 0)
		ibvl_error(L, "init_attr: give recv_cq, or cap.max_recv_wr > 0 for the cm to make one");
}

struct create_qp_call {
	struct rdma_cm_id *cid;
	struct ibv_qp_init_attr_ex *a;
	int ex, used, err;
};

/* Under ibvl_gc_held: the cm makes the QP (and the CQs it lacks), the id at 1
 * adopts them.  0, or the cm call's failure (its errno in err). */
static int create_qp_held(lua_State *L, void *ud)
{
	struct create_qp_call *c = ud;
	int rc;
	if (c->ex) {
		rc = rdma_create_qp_ex(c->cid, c->a);
	} else {
		struct ibv_qp_init_attr b;
		memcpy(&b, c->a, sizeof b);
		rc = rdma_create_qp(c->cid, c->a->pd, &b);
		c->a->cap = b.cap;
	}
	c->err = errno;
	if (rc == 0)
		adopt_qp(L, 1, c->used, c->a);
	return rc;
}

/* id:create_qp(init_attr) and id:create_qp_ex(init_attr_ex) */
static int create_qp(lua_State *L, int ex)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *id = check_cm_id(L);
	struct rdma_cm_id *cid = id->o.ptr;
	int attr = init_attr_table(L, 2, cid->qp_type);
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	int used = ibvl_parse_qp_init_attr(L, attr, &a);
	ibvl_guard_end(L, &g);
	need_device(L, cid);
	check_cm_cqs(L, &a);
	struct ibvl_obj *srq = ibvl_cm_owned(id, IBVL_OWN_SRQ);
	if (a.srq == NULL && srq != NULL) /* as librdmacm does with id->srq */
		a.srq = srq->ptr;
	if (!ex && (a.comp_mask & ~(unsigned)IBV_QP_INIT_ATTR_PD))
		return luaL_argerror(L, 2, "extended fields given: use create_qp_ex");
	struct create_qp_call c = {cid, &a, ex, used, 0};
	if (ibvl_gc_held(L, create_qp_held, &c) != 0)
		return ibvl_fail(L, ex ? "rdma_create_qp_ex" : "rdma_create_qp", c.err);
	return 1;
}

static int l_create_qp(lua_State *L)
{
	return create_qp(L, 0);
}

static int l_create_qp_ex(lua_State *L)
{
	return create_qp(L, 1);
}

static int close_owned(lua_State *L, int which)
{
	struct ibvl_obj *o = ibvl_cm_owned(check_cm_id(L), which);
	if (o == NULL) {
		lua_pushboolean(L, 1);
		return 1;
	}
	return ibvl_close(L, o);
}

/* id:destroy_qp(): closes the QP (and with it nothing else: the CQs stay the
 * id's until it closes) */
static int l_destroy_qp(lua_State *L)
{
	return close_owned(L, IBVL_OWN_QP);
}

static int l_destroy_srq(lua_State *L)
{
	return close_owned(L, IBVL_OWN_SRQ);
}

static const char *const srq_fields[] = {"max_wr", "max_sge", "srq_limit", "pd", "srq_type",
                                         NULL};

struct create_srq_call {
	struct rdma_cm_id *cid;
	struct ibv_srq_init_attr_ex *a;
	int ex, pdi, err; /* pdi: the PD's index, 0 for none */
};

/* Under ibvl_gc_held: the cm makes the SRQ (an XRC one with its CQ), the
 * userdata at the top wraps it and the id at 1 adopts them. */
static int create_srq_held(lua_State *L, void *ud)
{
	struct create_srq_call *c = ud;
	int rc = c->ex ? rdma_create_srq_ex(c->cid, c->a)
	               : rdma_create_srq(c->cid, c->a->pd, (struct ibv_srq_init_attr *)c->a);
	if (rc != 0) {
		c->err = errno;
		return rc;
	}
	struct ibvl_srq *s = lua_touserdata(L, -1);
	s->o.ptr = c->cid->srq; /* cid->srq stays: rdma_destroy_srq frees it */
	s->cm_id = c->cid;
	if (c->pdi != 0)
		ibvl_use(L, -1, c->pdi);
	ibvl_srq_adopt(L, &c->a->attr, c->a->srq_type);
	set_owned(L, 1, IBVL_OWN_SRQ);
	adopt_cqs(L, 1); /* an XRC SRQ's CQ */
	return 0;
}

/* id:create_srq{max_wr=, max_sge=, srq_limit=, pd=}, id:create_srq_ex{..., srq_type=} */
static int create_srq(lua_State *L, int ex)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *id = check_cm_id(L);
	struct rdma_cm_id *cid = id->o.ptr;
	ibvl_check_fields(L, 2, "attr", srq_fields);
	struct ibv_srq_init_attr_ex a;
	memset(&a, 0, sizeof a);
	a.attr.max_wr = (uint32_t)ibvl_int_field(L, 2, "max_wr", 16, 0, UINT32_MAX);
	a.attr.max_sge = (uint32_t)ibvl_int_field(L, 2, "max_sge", 1, 0, UINT32_MAX);
	a.attr.srq_limit = (uint32_t)ibvl_int_field(L, 2, "srq_limit", 0, 0, UINT32_MAX);
	a.srq_type = (enum ibv_srq_type)ibvl_enum_field(L, 2, "srq_type", ibvl_srq_types,
	                                                IBV_SRQT_BASIC);
	if (!ex && ibvl_has_field(L, 2, "srq_type"))
		return luaL_argerror(L, 2, "attr: field 'srq_type' needs create_srq_ex");
	struct ibvl_obj *pd = ibvl_obj_field_keep(L, 2, "pd", &ibvl_pd_class);
	int pdi = lua_gettop(L);
	a.pd = pd ? pd->ptr : NULL;
	a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	ibvl_new(L, &ibvl_srq_class, sizeof(struct ibvl_srq), &g);
	need_device(L, cid);
	if (ibvl_cm_owned(id, IBVL_OWN_SRQ) != NULL)
		return ibvl_fail(L, ex ? "rdma_create_srq_ex" : "rdma_create_srq", EEXIST);
	struct create_srq_call c = {cid, &a, ex, pd != NULL ? pdi : 0, 0};
	if (ibvl_gc_held(L, create_srq_held, &c) != 0)
		return ibvl_fail(L, ex ? "rdma_create_srq_ex" : "rdma_create_srq", c.err);
	return 1;
}

static int l_create_srq(lua_State *L)
{
	return create_srq(L, 0);
}

static int l_create_srq_ex(lua_State *L)
{
	return create_srq(L, 1);
}

/* ---- rdma_create_ep ------------------------------------------------------ */
static const char *const ep_fields[] = {"pd", "qp_init_attr", NULL};

struct create_ep_call {
	struct rdma_addrinfo *ai;
	struct ibv_pd *pd;
	struct ibv_qp_init_attr *attr; /* NULL: no QP */
	int idx, pdi;                  /* the new id's index; the PD's, 0 for none */
	int err;
};

/* Under ibvl_gc_held: the cm makes the id (and its QP), the userdata at idx
 * adopts them.  0, 1 when SIGINT came (nothing made), or -1 for the cm
 * call's failure (its errno in err). */
static int create_ep_held(lua_State *L, void *ud)
{
	struct create_ep_call *c = ud;
	size_t connect_len = c->ai->ai_connect_len;
	struct rdma_cm_id *cid;
	/* it resolves inside librdmacm (2 s limits each); SIGINT makes its read EINTR */
	struct ibvl_sigint s;
	ibvl_sigint_begin(&s);
	int rc = rdma_create_ep(&cid, c->ai, c->pd, c->attr);
	c->err = errno;
	if (ibvl_sigint_end(&s)) {
		if (rc == 0)
			rdma_destroy_ep(cid);
		return 1;
	}
	if (rc != 0)
		return -1;
	struct ibvl_cm_id *id = lua_touserdata(L, c->idx);
	id->ep = 1; /* before the first link: a failing one closes it whole */
	id->connect_len = connect_len;
	ibvl_cm_adopt_id(L, c->idx, cid, 0);
	if (c->pdi != 0) /* the id (and QPs get_request makes) use it */
		use_pd(L, c->idx, c->pdi);
	if (cid->qp != NULL)
		adopt_owned(L, c->idx, c->idx);
	return 0;
}

/* cm.create_ep(ai [, {pd =, qp_init_attr = {...}}]): a synchronous id, bound
 * (passive ai) or with its address and route resolved, and its QP. */
static int l_create_ep(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *aio = ibvl_check(L, 1, &ibvl_cm_addrinfo_class);
	struct ibvl_obj *pd = NULL;
	int attr = 0, pdi = 0;
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "attr", ep_fields);
		if (ibvl_getfield(L, 2, "qp_init_attr") != LUA_TNIL) {
			int qp_type = ((struct rdma_addrinfo *)aio->ptr)->ai_qp_type;
			attr = init_attr_table(L, lua_gettop(L), (enum ibv_qp_type)qp_type);
			ibvl_parse_qp_init_attr(L, attr, &a);
			check_cm_cqs(L, &a);
			if (a.pd != NULL)
				ibvl_error(L, "attr: field 'qp_init_attr': give the PD as attr.pd");
		}
		pd = ibvl_obj_field_keep(L, 2, "pd", &ibvl_pd_class);
		pdi = lua_gettop(L);
	}
	ibvl_cm_new_id(L, &g);
	int idx = lua_gettop(L);
	struct ibv_qp_init_attr b;
	memcpy(&b, &a, sizeof b);
	struct create_ep_call c = {aio->ptr, pd ? pd->ptr : NULL, attr ? &b : NULL, idx,
	                           pd ? pdi : 0, 0};
	int rc = ibvl_gc_held(L, create_ep_held, &c); /* to the last link of what the cm made */
	if (rc > 0)
		return ibvl_interrupted(L, "rdma_create_ep");
	if (rc < 0)
		return ibvl_fail(L, "rdma_create_ep", c.err);
	lua_settop(L, idx);
	return 1;
}

/* ---- rdma_get_request: a synchronous listener's ids, with their QPs ------ */
struct adopt_request_call {
	struct rdma_cm_id *nid;
	int idx;
};

/* Under ibvl_gc_held: the userdata at idx adopts the new id and its QP (on
 * the PD of the listener at 1). */
static int adopt_request_held(lua_State *L, void *ud)
{
	struct adopt_request_call *c = ud;
	ibvl_cm_adopt_id(L, c->idx, c->nid, 0);
	adopt_owned(L, c->idx, 1);
	return 0;
}

/* sid:get_request([timeout_s]): the next connection request of a synchronous
 * listener, as a new id (with its QP when the listener came from create_ep). */
static int l_get_request(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *lid = check_cm_id(L);
	ibvl_opt_timeout(L, 2, 0); /* checked before anything is pushed */
	lua_settop(L, 2); /* the timeout stays argument 2 */
	if (lua_isnil(L, 2)) { /* a synchronous call: finite by default, as connect's */
		lua_pushnumber(L, IBVL_CM_SYNC_TIMEOUT);
		lua_replace(L, 2);
	}
	ibvl_cm_new_id(L, &g); /* the listener is open: the guard ended after it */
	int idx = lua_gettop(L);
	struct rdma_cm_id *cid = lid->o.ptr;
	ibvl_cm_sync_prepare(lid);
	struct rdma_cm_id *nid;
	for (;;) {
		int n = ibvl_cm_wait(L, cid->channel->fd, 2, "rdma_get_request");
		if (n != 0)
			return n;
		if (rdma_get_request(cid, &nid) == 0)
			break;
		if (errno != EAGAIN) /* EAGAIN: librdmacm consumed an event of its own */
			return ibvl_fail(L, "rdma_get_request", errno);
	}
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	if (nid->event != NULL) { /* the request: acknowledged now, id.event reads a copy */
		id->request = ibvl_cm_take_request(nid->event);
		nid->event = NULL;
	}
	struct adopt_request_call c = {nid, idx};
	ibvl_gc_held(L, adopt_request_held, &c); /* to the last link of the id and its QP */
	return 1;
}

void ibvl_open_cm_qp(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"create_qp", l_create_qp}, {"create_qp_ex", l_create_qp_ex},
		{"destroy_qp", l_destroy_qp}, {"create_srq", l_create_srq},
		{"create_srq_ex", l_create_srq_ex}, {"destroy_srq", l_destroy_srq},
		{"get_request", l_get_request}, {NULL, NULL},
	};
	static const luaL_Reg fns[] = {{"create_ep", l_create_ep}, {NULL, NULL}};
	ibvl_add_methods(L, ibvl_cm_id_class.name, methods);
	ibvl_cm_functions(L, fns);
}
