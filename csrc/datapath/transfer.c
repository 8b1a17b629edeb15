/*
 * transfer.c: the transfer loop, entirely in C (cq:wait is in cq.c).
 *
 *   local st = assert(ibv.transfer{
 *     send_qp = qp, send_cq = scq, send_wrs = sl,     -- post sl whole, again and again
 *     recv = rqp_or_srq, recv_cq = rcq, recv_wrs = rl, -- repost each consumed receive
 *     count = 1000000, window = 128 [, timeout = 10]})
 *   st.sent, st.received, st.seconds
 * Either side may be left out: a client only sends, a server only receives.
 * The script posts recv_wrs once before; the loop reposts a consumed receive
 * while fewer than count are posted.  Receive WR ids must be their 0-based
 * index in recv_wrs (what fill does);
 * only the last send WR of the list needs to be signaled: each completion on
 * send_cq counts #send_wrs WRs.  A completion with an error stops the loop:
 * nil, "wc status: <status> (wr_id n)", EIO.  A CQ may be shared with other
 * QPs: a completion that is not of send_qp or recv (by its qp_num; a
 * cq_ex reports it when made with wc_flags "qp_num"), a receive whose wr_id
 * is no index of recv_wrs, a send or receive of a side the loop lacks, is
 * skipped and counted in st.foreign, never taken for one of the loop's.
 */
#include <stddef.h>
#include <string.h>
#include <time.h>

#include "verbs/cq.h"
#include "datapath/datapath.h"
#include "verbs/verbs.h"
#include "datapath/wr.h"
#include "datapath/post.h"

static int wc_error(lua_State *L, const struct ibv_wc *wc)
{
	lua_pushnil(L);
	lua_pushfstring(L, "wc status: %s (wr_id %d)", ibv_wc_status_str(wc->status),
	                (int)wc->wr_id);
	lua_pushinteger(L, EIO);
	return 3;
}

struct xfer {
	struct ibv_qp *sqp;
	struct ibvl_cq *scq, *rcq;
	struct ibv_send_wr *swr;
	int nsend;
	struct ibvl_chain schain; /* the whole send list */
	struct ibv_qp *rqp;
	struct ibv_srq *rsrq;
	enum ibvl_post_kind rkind; /* IBVL_POST_RECV (rqp) or IBVL_POST_SRQ (rsrq) */
	void *rtarget;             /* rqp or rsrq */
	struct ibv_recv_wr *rwr;
	int nrecv;
	long long count, window;
	double timeout;
	int sidx, ridx; /* the lists, kept on the stack */
	uint32_t sqpn, rqpn; /* the QPs' numbers, what a completion names */
	int any_rqp;         /* receives of any QP are the loop's (an SRQ's) */
	int qpn[2];          /* send_cq, recv_cq report qp_num */
	uint32_t sqpn_at[2]; /* per CQ: the qp_num of the loop's sends (UINT32_MAX: none) */
	int sany_at[2];      /* per CQ: every send is the loop's (no qp_num to tell) */
};

/* The object in field, kept on the stack (a weak argument table may hold
 * the only reference) until the loop ends. */
static void *field_obj(lua_State *L, const char *field, const struct ibvl_class *cls)
{
	return ibvl_obj_field_keep(L, 1, field, cls);
}

static int reports_qpn(const struct ibvl_cq *cq)
{
	return cq != NULL && (cq->cqx == NULL || (cq->wc_flags & IBV_WC_EX_WITH_QP_NUM));
}

static const char *const xfer_fields[] = {"send_qp", "send_cq", "send_wrs", "recv", "recv_cq",
                                          "recv_wrs", "count", "window", "timeout", NULL};

/* Reads the ibv.transfer table; WR lists come as raw chains from wr.c. */
static void parse_xfer(lua_State *L, struct xfer *x)
{
	ibvl_check_fields(L, 1, "transfer", xfer_fields);
	memset(x, 0, sizeof *x);
	struct ibvl_qp *sqp = field_obj(L, "send_qp", &ibvl_qp_class);
	x->scq = field_obj(L, "send_cq", &ibvl_cq_class);
	x->rcq = field_obj(L, "recv_cq", &ibvl_cq_class);
	x->count = ibvl_int_field(L, 1, "count", 0, 1, INT64_MAX / 2);
	x->window = ibvl_int_field(L, 1, "window", 128, 1, INT32_MAX);
	x->timeout = ibvl_timeout_field(L, 1, "timeout", 10.0);
	if (sqp != NULL) {
		if (x->scq == NULL)
			ibvl_error(L, "send_qp needs send_cq");
		x->sqp = sqp->o.ptr;
		ibvl_getfield(L, 1, "send_wrs");
		x->sidx = lua_gettop(L);
		x->swr = ibvl_wr_list(L, x->sidx, 1, &x->nsend);
		ibvl_send_chain(L, x->sidx, &x->schain); /* the whole list */
		ibvl_check_send_chain(L, sqp, &x->schain); /* on a UD QP, every WR needs its AH */
		if (x->nsend > x->window)
			ibvl_error(L, "window %d is smaller than send_wrs (%d WRs)",
			           (int)x->window, x->nsend);
	}
	ibvl_getfield(L, 1, "recv");
	if (!lua_isnil(L, -1)) {
		struct ibvl_obj *r = ibvl_test(L, -1, &ibvl_qp_class);
		struct ibvl_obj *s = r ? NULL : ibvl_test(L, -1, &ibvl_srq_class);
		if (r == NULL && s == NULL)
			ibvl_error(L, "field 'recv': ibverbs.qp or ibverbs.srq expected");
		x->rqp = r ? r->ptr : NULL;
		x->rsrq = s ? s->ptr : NULL;
		x->rkind = r ? IBVL_POST_RECV : IBVL_POST_SRQ;
		x->rtarget = r ? r->ptr : s->ptr;
		if (x->rcq == NULL)
			ibvl_error(L, "recv needs recv_cq");
		ibvl_getfield(L, 1, "recv_wrs");
		x->ridx = lua_gettop(L);
		x->rwr = ibvl_wr_list(L, x->ridx, 0, &x->nrecv);
	}
	if (x->sqp == NULL && x->rwr == NULL)
		ibvl_error(L, "give a send side, a receive side or both");
	x->sqpn = x->sqp ? x->sqp->qp_num : 0;
	x->rqpn = x->rqp ? x->rqp->qp_num : 0;
	x->any_rqp = x->rqp == NULL;
	x->qpn[0] = reports_qpn(x->scq);
	x->qpn[1] = reports_qpn(x->rcq);
	for (int c = 0; c < 2; c++) { /* qp_num is 24 bits: no completion names UINT32_MAX */
		x->sqpn_at[c] = x->sqp != NULL && x->qpn[c] ? x->sqpn : UINT32_MAX;
		x->sany_at[c] = x->sqp != NULL && !x->qpn[c];
	}
}

/* Posts the list's WRs [first, first+n) as they are linked (post.h). */
static int post_range(struct xfer *x, int first, int n)
{
	struct ibvl_chain c;
	void *bad;
	ibvl_chain_recv_range(&c, x->rwr, first, n);
	return ibvl_post_run(x->rkind, x->rtarget, &c, &bad);
}

/* The receives a poll consumed: how many, the runs of consecutive list
 * indexes they make, the first index of the first two runs and the length
 * of the first; the list index of each (idx[i0..n): those after the
 * in-order prefix of i0, which starts at first0). */
struct consumed {
	int n, runs, first, len, second;
	int i0, first0;
	int idx[64];
};

enum { FOREIGN, OURS_SEND, OURS_RECV, OURS_ERROR };

/* Whose is the completion w, polled from a CQ that reports qp_num when
 * byqpn?  Nothing in it is trusted before this says it is the loop's: a
 * receive's wr_id is then an index into recv_wrs. */
static int owner(const struct xfer *x, const struct ibv_wc *w, int byqpn)
{
	if (w->status != IBV_WC_SUCCESS) /* its opcode is undefined: by qp_num alone */
		return !byqpn || (x->sqp && w->qp_num == x->sqpn) ||
		       (x->rwr && (x->any_rqp || w->qp_num == x->rqpn)) ? OURS_ERROR : FOREIGN;
	if (w->opcode & IBV_WC_RECV)
		return x->rwr && w->wr_id < (uint64_t)x->nrecv &&
		       (!byqpn || x->any_rqp || w->qp_num == x->rqpn) ? OURS_RECV : FOREIGN;
	return x->sqp && (!byqpn || w->qp_num == x->sqpn) ? OURS_SEND : FOREIGN;
}

/* Whether w is a successful receive: status IBV_WC_SUCCESS (0) and an opcode
 * with IBV_WC_RECV set, read as the one 64-bit word the two adjacent fields
 * make (one load and one compare a completion in the loop below). */
static inline int ok_recv(const struct ibv_wc *w)
{
	_Static_assert(offsetof(struct ibv_wc, opcode) == offsetof(struct ibv_wc, status) + 4 &&
	               sizeof(w->status) == 4 && sizeof(w->opcode) == 4, "status, opcode adjacent");
	uint64_t v;
	memcpy(&v, &w->status, sizeof v);
	uint64_t mask = 0xffffffffu | (uint64_t)IBV_WC_RECV << 32, want = (uint64_t)IBV_WC_RECV << 32;
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
	mask = (uint64_t)0xffffffffu << 32 | IBV_WC_RECV, want = IBV_WC_RECV;
#endif
	return (v & mask) == want;
}

/* How many of wc[0..n) are successful receives of the loop's QP (any QP for
 * an SRQ, or a CQ without qp_num) of consecutive list entries from wc[0]'s
 * on, without wrapping: the common case, read in one pass. */
static int in_order(const struct xfer *x, const struct ibv_wc *wc, int n, int byqpn)
{
	uint64_t id = n > 0 ? wc[0].wr_id : UINT64_MAX;
	if (id >= (uint64_t)x->nrecv)
		return 0;
	uint64_t left = (uint64_t)x->nrecv - id; /* entries from id's to the list's end */
	const struct ibv_wc *w = wc, *end = wc + ((uint64_t)n < left ? n : (int)left);
	if (!byqpn || x->any_rqp) {
		while (w < end && ok_recv(w) && w->wr_id == id)
			w++, id++;
	} else {
		uint32_t qpn = x->rqpn;
		while (w < end && ok_recv(w) && w->wr_id == id && w->qp_num == qpn)
			w++, id++;
	}
	return (int)(w - wc);
}

/* Reposts the first n receives of c, consumed by the completions wc[0..nwc).
 * A receive queue completes in order, so they are mostly one run of the
 * list, or two where it wraps: posted as the list's own ranges.  Otherwise
 * (an SRQ that other QPs consume too) as one chain linked for the call. */
static int repost(struct xfer *x, struct consumed *c, int n)
{
	if (c->runs <= 2) {
		int len = c->len < n ? c->len : n;
		int rc = post_range(x, c->first, len);
		return rc != 0 || len == n ? rc : post_range(x, c->second, n - len);
	}
	struct ibv_recv_wr *saved[64];
	for (int k = 0; k < c->i0; k++)
		c->idx[k] = c->first0 + k;
	for (int k = 0; k < n - 1; k++) { /* linked for the call; the last is cut by the post */
		struct ibv_recv_wr *w = &x->rwr[c->idx[k]];
		saved[k] = w->next;
		w->next = &x->rwr[c->idx[k + 1]];
	}
	struct ibvl_chain chain = {.base = &x->rwr[c->idx[0]], .index0 = 1, .count = n,
	                           .next_slot = (void **)&x->rwr[c->idx[n - 1]].next};
	void *bad;
	int rc = ibvl_post_run(x->rkind, x->rtarget, &chain, &bad);
	for (int k = n - 2; k >= 0; k--) /* restore the list's own links */
		x->rwr[c->idx[k]].next = saved[k];
	return rc;
}

struct progress {
	long long sent, completed, received, posted, errors, foreign;
	struct ibv_wc first_error;
};

/* Counts a batch of completions from either CQ (they may be one CQ) and
 * reposts the consumed receives; returns 0, or pushes an error and returns
 * its result count.  Every completion of the batch is counted, also after an
 * error (the batch is gone from the CQ): p->errors, p->first_error. */
static int consume(lua_State *L, struct xfer *x, struct progress *p, struct ibv_wc *wc, int n,
                   int cq)
{
	int byqpn = x->qpn[cq];
	struct consumed c;
	int i0 = in_order(x, wc, n, byqpn);
	c.n = i0, c.runs = i0 > 0, c.first = i0 > 0 ? (int)wc[0].wr_id : 0, c.len = c.second = 0;
	c.i0 = i0, c.first0 = c.first;
	int prev = i0 > 0 ? c.first + i0 - 1 : -2;
	uint32_t sqpn = x->sqpn_at[cq]; /* the common case first: a successful send of send_qp */
	int sany = x->sany_at[cq];
	for (int i = i0; i < n; i++) {
		const struct ibv_wc *w = &wc[i];
		if (w->status == IBV_WC_SUCCESS && !(w->opcode & IBV_WC_RECV) &&
		    (w->qp_num == sqpn || sany)) {
			p->completed += x->nsend;
			continue;
		}
		int whose = owner(x, w, byqpn);
		if (whose == FOREIGN) {
			p->foreign++;
		} else if (whose == OURS_ERROR) {
			if (p->errors++ == 0)
				p->first_error = wc[i];
		} else if (whose == OURS_RECV) {
			int k = (int)wc[i].wr_id; /* an index of the list (owner) */
			c.idx[c.n] = k;
			if (k != prev + 1) {
				if (++c.runs == 1)
					c.first = k;
				else if (c.runs == 2)
					c.len = c.n, c.second = k;
			}
			prev = k;
			c.n++;
		} else {
			p->completed += x->nsend;
		}
	}
	if (c.runs == 1)
		c.len = c.n;
	int nr = c.n;
	p->received += nr;
	if (p->errors > 0)
		return wc_error(L, &p->first_error);
	int k = p->posted + nr <= x->count ? nr : (int)(x->count - p->posted);
	if (k > 0) {
		int rc = repost(x, &c, k);
		if (rc != 0)
			return ibvl_fail(L, "ibv_post_recv", rc);
		p->posted += k;
	}
	return 0;
}

/* The counts as a table at the top of the stack. */
static void push_stats(lua_State *L, const struct progress *p, double seconds)
{
	lua_createtable(L, 0, 7);
	lua_pushinteger(L, (lua_Integer)p->completed);
	lua_setfield(L, -2, "sent");
	lua_pushinteger(L, (lua_Integer)p->received);
	lua_setfield(L, -2, "received");
	lua_pushinteger(L, (lua_Integer)p->sent);
	lua_setfield(L, -2, "send_posted");
	lua_pushinteger(L, (lua_Integer)p->posted);
	lua_setfield(L, -2, "recv_posted");
	lua_pushinteger(L, (lua_Integer)p->errors);
	lua_setfield(L, -2, "errors");
	lua_pushinteger(L, (lua_Integer)p->foreign);
	lua_setfield(L, -2, "foreign");
	lua_pushnumber(L, seconds);
	lua_setfield(L, -2, "seconds");
}

/* One pass of the loop: post what the window allows, poll both CQs.
 * Returns 1 when something happened, 0 when idle, or -(result count) after
 * pushing a failure. */
static int step(lua_State *L, struct xfer *x, struct progress *p, struct ibv_wc *wc)
{
	int busy = 0;
	if (x->sqp && p->sent < x->count && p->sent - p->completed + x->nsend <= x->window) {
		void *bad;
		int rc = ibvl_post_run(IBVL_POST_SEND, x->sqp, &x->schain, &bad);
		if (rc != 0)
			return -ibvl_fail(L, "ibv_post_send", rc);
		p->sent += x->nsend;
		busy = 1;
	}
	struct ibvl_cq *cqs[2] = {x->scq, x->rcq != x->scq ? x->rcq : NULL};
	for (int c = 0; c < 2; c++) {
		int n = cqs[c] ? ibvl_cq_poll(cqs[c], 64, wc) : 0;
		if (n < 0)
			return -ibvl_fail(L, "ibv_poll_cq", -n);
		int err = consume(L, x, p, wc, n, c);
		if (err)
			return -err;
		busy |= n > 0;
	}
	return busy;
}

/* ibv.transfer{...}: the timeout (seconds, default 10, math.huge: none) bounds
 * the time without any completion; SIGINT raises "ibv.transfer: interrupted".
 * Failures return nil, msg, errno and the counts table as a 4th value. */
static int l_transfer(lua_State *L)
{
	struct xfer x;
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	parse_xfer(L, &x);
	ibvl_guard_end(L, &g); /* no Lua code runs in the loop */
	int nwr; /* what the lists point to, checked again after the reading */
	if (x.swr != NULL)
		ibvl_wr_list(L, x.sidx, 1, &nwr);
	if (x.rwr != NULL)
		ibvl_wr_list(L, x.ridx, 0, &nwr);
	struct ibv_wc wc[64];
	struct progress p = {0, 0, 0, x.nrecv, 0, 0, {0}};
	double start = ibvl_monotonic(), deadline = start + x.timeout;
	int progressed = 0, fail = 0;
	struct ibvl_sigint s;
	ibvl_sigint_begin(&s);
	while ((x.sqp && p.completed < x.count) || (x.rwr && p.received < x.count)) {
		if (ibvl_sigint_pending())
			break;
		int r = step(L, &x, &p, wc);
		if (r < 0) {
			fail = -r;
			break;
		}
		if (r > 0) {
			progressed = 1;
			continue;
		}
		double t = ibvl_monotonic();
		if (progressed) { /* the idle time counts from the last progress */
			deadline = t + x.timeout;
			progressed = 0;
		} else if (t > deadline) {
			fail = ibvl_fail(L, "transfer", ETIMEDOUT);
			break;
		}
	}
	if (ibvl_sigint_end(&s))
		return ibvl_interrupted(L, "ibv.transfer");
	push_stats(L, &p, ibvl_monotonic() - start);
	return fail ? fail + 1 : 1;
}

void ibvl_open_transfer(lua_State *L)
{
	lua_pushcfunction(L, l_transfer);
	lua_setfield(L, -2, "transfer");
}
