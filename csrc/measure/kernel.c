/*
 * kernel.c: one end of a measurement kernel (kernel.h): reading its table,
 * the completions handed to it, its figures.
 *
 * Every kernel's table has: qp, send_cq, send_wrs (a prepared list posted
 * whole each time), recv_cq and recv_wrs (posted by the script before:
 * min(#recv_wrs, count) of them, or by the kernel as it starts when prepost
 * is true; a consumed receive is reposted while received + #recv_wrs <=
 * count, as perftest does; WR ids are the 0-based index in the list, what
 * fill gives), recv_qp (where the receives go when not qp: ibv.bw), iters,
 * timeout (seconds from the end's start; 60 when nil, math.huge: none),
 * event (true: sleep on the CQs' completion channels while nothing is
 * polled, instead of busy polling) and what the kernel adds.  The figures:
 *   {iters =, sent =, received =, posted =, foreign =, samples =, seconds =}
 * A completion with an error, a failed post or poll, the time limit: nil,
 * msg, errno and the figures so far (in ibv.kernels: the figures with error
 * and errno).  A CQ may be shared with other QPs: their completions (told by
 * qp_num; a cq_ex reports it when made with wc_flags "qp_num") are skipped
 * and counted in foreign.
 */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "measure/kernel.h"

/* The object in field (required) of the table at idx, kept on the stack
 * until the call ends. */
static void *required(lua_State *L, int idx, const char *field, const struct ibvl_class *cls)
{
	void *o = ibvl_obj_field_keep(L, idx, field, cls);
	if (o == NULL)
		ibvl_error(L, "field '%s': %s expected, got nil", field, cls->name);
	return o;
}

/* The prepared list in field, kept on the stack; its index, or 0 when absent
 * and optional. */
static int list_field(lua_State *L, int idx, const char *field, int send, int optional, int *n)
{
	ibvl_getfield(L, idx, field);
	if (lua_isnil(L, -1) && optional) {
		lua_pop(L, 1);
		*n = 0;
		return 0;
	}
	if (ibvl_test_list(L, -1, send, n) == NULL)
		ibvl_error(L, "field '%s': ibverbs.%s expected, got %s", field,
		           send ? "send_wrs" : "recv_wrs", luaL_typename(L, -1));
	return lua_gettop(L);
}

/* The table's fields checked: the type's, and "kernel" in ibv.kernels. */
static void check_fields(lua_State *L, int idx, const struct ibvl_kern_type *t, int multi)
{
	const char *f[25];
	int n = 0;
	while (t->fields[n] != NULL && n < 20) {
		f[n] = t->fields[n];
		n++;
	}
	f[n++] = "event";
	if (multi) {
		f[n++] = "kernel";
		f[n++] = "after";
		f[n++] = "within";
	}
	f[n] = NULL;
	ibvl_check_fields(L, idx, t->name, f);
}

static void parse_send(lua_State *L, struct ibvl_kern *k, int idx, int optional)
{
	k->sidx = list_field(L, idx, "send_wrs", 1, optional, &k->nsend);
	if (k->sidx == 0)
		return;
	k->swr = ibvl_send_chain(L, k->sidx, &k->schain); /* the whole list is the chain */
	ibvl_check_send_chain(L, k->lqp, &k->schain); /* on a UD QP, every WR needs its AH */
	if (k->nsend > KERN_MAX_SEND)
		ibvl_error(L, "field 'send_wrs': at most %d WRs, got %d", KERN_MAX_SEND, k->nsend);
	k->scq = required(L, idx, "send_cq", &ibvl_cq_class);
}

static void parse_recv(lua_State *L, struct ibvl_kern *k, int idx, int optional)
{
	k->ridx = list_field(L, idx, "recv_wrs", 0, optional, &k->nrecv);
	if (k->ridx == 0)
		return;
	k->rcq = required(L, idx, "recv_cq", &ibvl_cq_class);
	k->rwr = ibvl_wr_list(L, k->ridx, 0, &k->nrecv);
	k->prepost = ibvl_bool_field(L, idx, "prepost", 0);
	struct ibvl_qp *r = ibvl_obj_field_keep(L, idx, "recv_qp", &ibvl_qp_class);
	if (r != NULL) {
		k->rqp = r->o.ptr;
		k->rqpn = k->rqp->qp_num;
	}
}

/* event: every CQ of the end has a completion channel to sleep on. */
static void check_channels(lua_State *L, const struct ibvl_kern *k)
{
	const struct ibvl_cq *cq[2] = {k->scq, k->rcq};
	const char *name[2] = {"send_cq", "recv_cq"};
	for (int i = 0; i < 2; i++)
		if (cq[i] != NULL && ((struct ibv_cq *)cq[i]->o.ptr)->channel == NULL)
			ibvl_error(L, "field 'event': %s has no completion channel "
			              "(ctx:create_cq{channel = ...})", name[i]);
}

void ibvl_kern_parse(lua_State *L, struct ibvl_kern *k, int idx, const struct ibvl_kern_type *t,
                     int multi)
{
	memset(k, 0, sizeof *k);
	k->within = -1;
	luaL_checkstack(L, 16, "kernel arguments");
	check_fields(L, idx, t, multi);
	k->type = t;
	k->name = t->name;
	k->cover = 1;
	ibvl_getfield(L, idx, "iters");
	int absent = lua_isnil(L, -1);
	lua_pop(L, 1);
	if (absent)
		ibvl_error(L, "field 'iters': a count expected, got nil");
	k->iters = ibvl_int_field(L, idx, "iters", 1, 1, INT64_MAX / 4);
	k->recv_iters = k->iters;
	k->timeout = ibvl_timeout_field(L, idx, "timeout", 60.0);
	k->lqp = required(L, idx, "qp", &ibvl_qp_class);
	k->qp = k->rqp = k->lqp->o.ptr;
	k->qpn = k->rqpn = k->qp->qp_num;
	int optional = (t->parts & KERN_EITHER) != 0;
	if (t->parts & KERN_SEND)
		parse_send(L, k, idx, optional);
	if (t->parts & KERN_RECV)
		parse_recv(L, k, idx, optional);
	if (optional && k->swr == NULL && k->rwr == NULL)
		ibvl_error(L, "give send_wrs, recv_wrs or both");
	if (t->parts & KERN_SAMPLES) {
		ibvl_getfield(L, idx, "samples"); /* kept on the stack */
		if (!lua_isnil(L, -1) && (k->samples = ibvl_test_samples(L, -1)) == NULL)
			ibvl_error(L, "field 'samples': %s expected, got %s", IBVL_SAMPLES,
			           luaL_typename(L, -1));
		if (k->samples != NULL && k->samples->n < k->iters - 1)
			ibvl_error(L, "field 'samples': room for %d samples, iters %d need %d",
			           (int)k->samples->n, (int)k->iters, (int)(k->iters - 1));
	}
	k->event = ibvl_bool_field(L, idx, "event", 0);
	if (k->event)
		check_channels(L, k);
	if (t->read != NULL)
		t->read(L, k, idx);
}

void ibvl_kern_recheck(lua_State *L, struct ibvl_kern *k)
{
	int n; /* what the lists point to, checked again after the reading */
	if (k->swr != NULL)
		ibvl_wr_list(L, k->sidx, 1, &n);
	if (k->rwr != NULL)
		ibvl_wr_list(L, k->ridx, 0, &n);
	for (int i = 0; i < k->nsend; i++)
		k->saved_flags[i] = k->swr[i].send_flags;
}

void ibvl_kern_start(struct ibvl_kern *k, double now)
{
	k->started = 1;
	k->t0 = now;
	k->deadline = isinf(k->timeout) ? HUGE_VAL : now + k->timeout;
	if (!k->prepost || k->rwr == NULL)
		return;
	struct ibvl_chain c;
	void *bad;
	long long m = k->recv_iters < k->nrecv ? k->recv_iters : k->nrecv;
	ibvl_chain_recv_range(&c, k->rwr, 0, (int)m);
	int rc = ibvl_post_run(IBVL_POST_RECV, k->rqp, &c, &bad);
	if (rc != 0)
		ibvl_kern_fail(k, KERN_POST, -rc); /* a receive's: negative */
}

/* One successful or failed completion of k's. */
static void on_wc(struct ibvl_kern *k, const struct ibv_wc *w, uint64_t now)
{
	k->last = now;
	if (k->first == 0) /* a receiver's first */
		k->first = now;
	if (w->status != IBV_WC_SUCCESS) {
		k->bad = *w;
		ibvl_kern_fail(k, KERN_WC, EIO);
		return;
	}
	if (!(w->opcode & IBV_WC_RECV)) {
		k->completed = k->completed + k->cover < k->posted ? k->completed + k->cover : k->posted;
		return;
	}
	if (w->wr_id >= (uint64_t)k->nrecv) { /* not one of recv_wrs */
		k->bad = *w;
		ibvl_kern_fail(k, KERN_FOREIGN, EIO);
		return;
	}
	k->received++;
	if (k->received + k->nrecv <= k->recv_iters) {
		struct ibvl_chain c;
		void *bad;
		ibvl_chain_recv_range(&c, k->rwr, (int)w->wr_id, 1);
		int rc = ibvl_post_run(IBVL_POST_RECV, k->rqp, &c, &bad);
		if (rc != 0)
			ibvl_kern_fail(k, KERN_POST, -rc); /* a receive's: negative */
	}
}

/* Whether end k takes completions on cq with number qpn (any, !byqpn). */
static int takes(const struct ibvl_kern *k, const struct ibvl_cq *cq, int byqpn, uint32_t qpn)
{
	return byqpn ? (k->qpn == qpn && k->scq == cq) || (k->rqpn == qpn && k->rcq == cq)
	             : k->scq == cq || k->rcq == cq;
}

/* The end among ks[0..n) a completion on cq belongs to (by QP number, or
 * the one end using cq when cq does not report it): the running one, else
 * the first that has not started (its QP's completions wait in its counts
 * until it starts); NULL: none. */
static struct ibvl_kern *owner(struct ibvl_kern *ks, int n, const struct ibvl_cq *cq, int byqpn,
                               uint32_t qpn)
{
	struct ibvl_kern *next = NULL;
	for (int i = 0; i < n; i++) {
		struct ibvl_kern *k = &ks[i];
		if (k->over || !takes(k, cq, byqpn, qpn))
			continue;
		if (k->started)
			return k;
		if (next == NULL)
			next = k;
	}
	return next;
}

/* ibvl_kern_poll's body: inlined with n = 1 (ibvl_kern_poll1), the search
 * for the owner folds away. */
static inline int poll_ends(struct ibvl_kern *ks, int n, struct ibvl_cq *cq)
{
	struct ibv_wc wc[16];
	int got = ibvl_cq_poll(cq, 16, wc);
	if (got <= 0)
		return got;
	uint64_t now = ibvl_ticks();
	int byqpn = cq->cqx == NULL || (cq->wc_flags & IBV_WC_EX_WITH_QP_NUM);
	for (int i = 0; i < got; i++) {
		struct ibvl_kern *k = owner(ks, n, cq, byqpn, wc[i].qp_num);
		if (k == NULL || k->stop != KERN_OK) { /* another QP's, on a shared CQ */
			if (k != NULL || (k = owner(ks, n, cq, 0, 0)) != NULL)
				k->foreign++;
			continue;
		}
		on_wc(k, &wc[i], now);
	}
	return got;
}

int ibvl_kern_poll(struct ibvl_kern *ks, int n, struct ibvl_cq *cq)
{
	return poll_ends(ks, n, cq);
}

int ibvl_kern_poll1(struct ibvl_kern *k, struct ibvl_cq *cq)
{
	return poll_ends(k, 1, cq);
}

/* nil, msg, errno for why the run stopped; the count pushed. */
static int push_failure(lua_State *L, const struct ibvl_kern *k)
{
	switch (k->stop) {
	case KERN_WC:
	case KERN_FOREIGN:
		lua_pushnil(L);
		lua_pushfstring(L, k->stop == KERN_WC ? "wc status: %s (wr_id %d)"
		                                      : "%s (wr_id %d): no receive of recv_wrs",
		                k->stop == KERN_WC ? ibv_wc_status_str(k->bad.status) : k->name,
		                (int)k->bad.wr_id);
		lua_pushinteger(L, EIO);
		return 3;
	case KERN_POST:
		return k->err < 0 ? ibvl_fail(L, "ibv_post_recv", -k->err)
		                  : ibvl_fail(L, "ibv_post_send", k->err);
	case KERN_POLL:
		return ibvl_fail(L, "ibv_poll_cq", k->err);
	default:
		return ibvl_fail(L, k->name, ETIMEDOUT);
	}
}

void ibvl_kern_restore(struct ibvl_kern *k)
{
	for (int i = 0; i < k->nsend; i++)
		k->swr[i].send_flags = k->saved_flags[i];
}

int ibvl_kern_push(lua_State *L, struct ibvl_kern *k, double scale, double run_seconds, int multi)
{
	ibvl_kern_restore(k);
	long long taken = k->stamps > 0 ? k->stamps - 1 : 0;
	if (k->samples != NULL)
		ibvl_samples_seconds(k->samples, taken, scale);
	int nret = k->stop != KERN_OK ? push_failure(L, k) : 0;
	double seconds = k->last > k->first ? (double)(k->last - k->first) * scale : run_seconds;
	lua_createtable(L, 0, 9);
	ibvl_set_int(L, "iters", (lua_Integer)k->stamps);
	ibvl_set_int(L, "sent", (lua_Integer)k->completed);
	ibvl_set_int(L, "posted", (lua_Integer)k->posted);
	ibvl_set_int(L, "received", (lua_Integer)k->received);
	ibvl_set_int(L, "foreign", (lua_Integer)k->foreign);
	ibvl_set_int(L, "samples", (lua_Integer)(k->samples != NULL ? taken : 0));
	lua_pushnumber(L, seconds);
	lua_setfield(L, -2, "seconds");
	if (!multi || nret == 0)
		return nret + 1;
	lua_replace(L, -4); /* the figures where nil was: msg, errno into them */
	lua_setfield(L, -3, "errno");
	lua_setfield(L, -2, "error");
	return 1;
}
