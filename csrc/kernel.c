/*
 * kernel.c: what the measurement kernels (lat.c, bw.c) share (kernel.h):
 * reading their table, the completion handling, the time limit, the result.
 *
 * Every kernel takes one table: qp, send_cq, send_wrs (a prepared list
 * posted whole each time), recv_cq and recv_wrs (posted by the script
 * before: min(#recv_wrs, count) of them; a consumed receive is reposted while
 * received + #recv_wrs <= count, as perftest does; WR ids are the 0-based
 * index in the list, what fill gives), iters, timeout (seconds for the whole
 * run; 60 when nil, math.huge: none) and what the kernel adds.  The figures:
 *   {iters =, sent =, received =, posted =, foreign =, samples =, seconds =}
 * A completion with an error, a failed post or poll, the time limit: nil,
 * msg, errno and the figures so far.  SIGINT raises "<kernel>: interrupted".
 * A CQ may be shared with other QPs: their completions (told by qp_num; a
 * cq_ex reports it when made with wc_flags "qp_num") are skipped and counted
 * in foreign.
 */
#include <math.h>
#include <string.h>

#include "kernel.h"

/* The object in field (required), kept on the stack until the call ends. */
static void *required(lua_State *L, const char *field, const struct ibvl_class *cls)
{
	void *o = ibvl_obj_field_keep(L, 1, field, cls);
	if (o == NULL)
		ibvl_error(L, "field '%s': %s expected, got nil", field, cls->name);
	return o;
}

/* The prepared list in field, kept on the stack; its index, or 0 when absent
 * and optional. */
static int list_field(lua_State *L, const char *field, int send, int optional, int *n)
{
	ibvl_getfield(L, 1, field);
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

void ibvl_kern_parse(lua_State *L, struct ibvl_kern *k, const char *name,
                     const char *const *fields, int parts)
{
	memset(k, 0, sizeof *k);
	luaL_checktype(L, 1, LUA_TTABLE);
	ibvl_guard_begin(&k->guard);
	ibvl_check_fields(L, 1, name, fields);
	k->name = name;
	k->cover = 1;
	ibvl_getfield(L, 1, "iters");
	int absent = lua_isnil(L, -1);
	lua_pop(L, 1);
	if (absent)
		ibvl_error(L, "field 'iters': a count expected, got nil");
	k->iters = ibvl_int_field(L, 1, "iters", 1, 1, INT64_MAX / 4);
	k->recv_iters = k->iters;
	k->timeout = ibvl_timeout_field(L, 1, "timeout", 60.0);
	k->lqp = required(L, "qp", &ibvl_qp_class);
	k->qp = k->rqp = k->lqp->o.ptr;
	k->qpn = k->qp->qp_num;
	int optional = (parts & KERN_EITHER) != 0;
	if (parts & KERN_SEND) {
		k->sidx = list_field(L, "send_wrs", 1, optional, &k->nsend);
		if (k->sidx != 0) { /* the list at the top: the whole list is the chain */
			k->swr = ibvl_send_chain(L, k->sidx, &k->schain);
			ibvl_check_send_chain(L, k->lqp, &k->schain); /* on a UD QP, every WR needs its AH */
			if (k->nsend > KERN_MAX_SEND)
				ibvl_error(L, "field 'send_wrs': at most %d WRs, got %d", KERN_MAX_SEND, k->nsend);
			k->scq = required(L, "send_cq", &ibvl_cq_class);
		}
	}
	if (parts & KERN_RECV) {
		k->ridx = list_field(L, "recv_wrs", 0, optional, &k->nrecv);
		if (k->ridx != 0) {
			k->rcq = required(L, "recv_cq", &ibvl_cq_class);
			k->rwr = ibvl_wr_list(L, k->ridx, 0, &k->nrecv);
		}
	}
	if (optional && k->swr == NULL && k->rwr == NULL)
		ibvl_error(L, "give send_wrs, recv_wrs or both");
	if (parts & KERN_SAMPLES) {
		ibvl_getfield(L, 1, "samples"); /* kept on the stack */
		if (!lua_isnil(L, -1) && (k->samples = ibvl_test_samples(L, -1)) == NULL)
			ibvl_error(L, "field 'samples': %s expected, got %s", IBVL_SAMPLES,
			           luaL_typename(L, -1));
		if (k->samples != NULL && k->samples->n < k->iters - 1)
			ibvl_error(L, "field 'samples': room for %d samples, iters %d need %d",
			           (int)k->samples->n, (int)k->iters, (int)(k->iters - 1));
	}
}

void ibvl_kern_begin(lua_State *L, struct ibvl_kern *k)
{
	ibvl_guard_end(L, &k->guard); /* raises when an object read was closed meanwhile */
	int n; /* what the lists point to, checked again after the reading */
	if (k->swr != NULL)
		ibvl_wr_list(L, k->sidx, 1, &n);
	if (k->rwr != NULL)
		ibvl_wr_list(L, k->ridx, 0, &n);
	for (int i = 0; i < k->nsend; i++)
		k->saved_flags[i] = k->swr[i].send_flags;
	ibvl_sigint_begin(&k->sig);
	ibvl_clock_start(&k->clock);
	k->deadline = isinf(k->timeout) ? HUGE_VAL : k->clock.s0 + k->timeout;
}

int ibvl_kern_late(struct ibvl_kern *k)
{
	if (ibvl_monotonic() <= k->deadline)
		return 0;
	k->stop = KERN_TIME;
	return 1;
}

int ibvl_kern_poll(struct ibvl_kern *k, struct ibvl_cq *cq)
{
	struct ibv_wc wc[16];
	int n = ibvl_cq_poll(cq, 16, wc);
	if (n < 0) {
		k->stop = KERN_POLL;
		k->err = -n;
		return -1;
	}
	int byqpn = cq->cqx == NULL || (cq->wc_flags & IBV_WC_EX_WITH_QP_NUM);
	for (int i = 0; i < n; i++) {
		const struct ibv_wc *w = &wc[i];
		if (byqpn && w->qp_num != k->qpn) { /* another QP's, on a shared CQ */
			k->foreign++;
			continue;
		}
		if (w->status != IBV_WC_SUCCESS) {
			k->stop = KERN_WC;
			k->bad = *w;
			return -1;
		}
		if (!(w->opcode & IBV_WC_RECV)) {
			k->completed = k->completed + k->cover < k->posted ? k->completed + k->cover
			                                                    : k->posted;
			continue;
		}
		if (w->wr_id >= (uint64_t)k->nrecv) { /* not one of recv_wrs */
			k->stop = KERN_FOREIGN;
			k->bad = *w;
			return -1;
		}
		k->received++;
		if (k->received + k->nrecv <= k->recv_iters) {
			struct ibvl_chain c;
			void *bad;
			ibvl_chain_recv_range(&c, k->rwr, (int)w->wr_id, 1);
			int rc = ibvl_post_run(IBVL_POST_RECV, k->rqp, &c, &bad);
			if (rc != 0) {
				k->stop = KERN_POST;
				k->err = -rc; /* a receive's: negative */
				return -1;
			}
		}
	}
	return n;
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

int ibvl_kern_end(lua_State *L, struct ibvl_kern *k)
{
	double scale = ibvl_clock_scale(&k->clock);
	for (int i = 0; i < k->nsend; i++)
		k->swr[i].send_flags = k->saved_flags[i];
	long long taken = k->stamps > 0 ? k->stamps - 1 : 0;
	if (k->samples != NULL)
		ibvl_samples_seconds(k->samples, taken, scale);
	if (ibvl_sigint_end(&k->sig))
		return ibvl_interrupted(L, k->name);
	int nret = k->stop != KERN_OK ? push_failure(L, k) : 0;
	double seconds = k->last > k->first ? (double)(k->last - k->first) * scale
	                                    : k->clock.s1 - k->clock.s0;
	lua_createtable(L, 0, 6);
	ibvl_set_int(L, "iters", (lua_Integer)k->stamps);
	ibvl_set_int(L, "sent", (lua_Integer)k->completed);
	ibvl_set_int(L, "posted", (lua_Integer)k->posted);
	ibvl_set_int(L, "received", (lua_Integer)k->received);
	ibvl_set_int(L, "foreign", (lua_Integer)k->foreign);
	ibvl_set_int(L, "samples", (lua_Integer)(k->samples != NULL ? taken : 0));
	lua_pushnumber(L, seconds);
	lua_setfield(L, -2, "seconds");
	return nret + 1;
}
