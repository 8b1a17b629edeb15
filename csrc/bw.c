/*
 * bw.c: the bandwidth and message-rate kernel of perftest's ib_write_bw,
 * ib_read_bw and ib_send_bw, the loop entirely in C with busy polling
 * (kernel.h: the table, time limit, SIGINT, figures).
 *
 *   local f = assert(ibv.bw{qp = qp, send_cq = cq, send_wrs = sl, iters = 100000,
 *                           window = 128, cq_mod = 100})          -- a sender
 *   ibv.bw{qp = qp, recv_cq = cq, recv_wrs = rl, iters = 100000}  -- a send receiver
 *   ibv.bw{... both sides ...}                                     -- bidirectional
 *   f.sent, f.received, f.seconds  -- MB/s: size * f.sent / f.seconds / 2^20
 *
 * Each post posts send_wrs whole (perftest's post list), while at most
 * window WRs (default 128, perftest's tx depth) are outstanding; one WR in
 * cq_mod (default 100, a multiple of #send_wrs) is signaled: the last of a
 * post, whose completion accounts for the cq_mod WRs before it (the kernel
 * sets and clears that flag; the list's own flags come back after the run).
 * iters counts the WRs to send (a multiple of #send_wrs) and the receives to
 * wait for.  seconds runs from the first post (or receive) to the last
 * completion.  Nothing is allocated in the loop.
 */
#include "kernel.h"

static const char *const bw_fields[] = {"qp", "send_cq", "send_wrs", "recv_cq", "recv_wrs", "iters",
                                        "window", "cq_mod", "timeout", NULL};

static int bw_loop(struct ibvl_kern *k, long long window)
{
	struct ibv_send_wr *last = k->swr != NULL ? &k->swr[k->nsend - 1] : NULL;
	unsigned int sig = last != NULL ? last->send_flags | IBV_SEND_SIGNALED : 0;
	unsigned int unsig = sig & ~(unsigned int)IBV_SEND_SIGNALED;
	struct ibvl_cq *other = k->rcq != k->scq ? k->rcq : NULL; /* a second CQ to poll */
	while ((last != NULL && k->completed < k->iters) ||
	       (k->rwr != NULL && k->received < k->recv_iters)) {
		if (last != NULL && k->posted < k->iters && k->posted - k->completed + k->nsend <= window) {
			long long after = k->posted + k->nsend;
			last->send_flags = after % k->cover == 0 || after >= k->iters ? sig : unsig;
			if (k->first == 0)
				k->first = ibvl_ticks();
			if (ibvl_kern_post(k))
				return -1;
		}
		int n = k->scq != NULL ? ibvl_kern_poll(k, k->scq) : 0;
		int m = n >= 0 && other != NULL ? ibvl_kern_poll(k, other) : 0;
		if (n < 0 || m < 0)
			return -1;
		if (n + m > 0) {
			k->last = ibvl_ticks();
			if (k->first == 0) /* a receiver's first */
				k->first = k->last;
		}
		if (ibvl_kern_tick(k))
			return -1;
	}
	return 0;
}

static int l_bw(lua_State *L)
{
	struct ibvl_kern k;
	ibvl_kern_parse(L, &k, "ibv.bw", bw_fields, KERN_SEND | KERN_RECV | KERN_EITHER);
	long long window = ibvl_int_field(L, 1, "window", 128, 1, INT32_MAX);
	k.cover = ibvl_int_field(L, 1, "cq_mod", 100, 1, INT32_MAX);
	if (k.swr != NULL) {
		if (k.cover % k.nsend != 0)
			ibvl_error(L, "field 'cq_mod': %d is no multiple of send_wrs' %d WRs", (int)k.cover,
			           k.nsend);
		if (k.iters % k.nsend != 0)
			ibvl_error(L, "field 'iters': %d is no multiple of send_wrs' %d WRs", (int)k.iters,
			           k.nsend);
		if (window < k.nsend)
			ibvl_error(L, "field 'window': %d is smaller than send_wrs (%d WRs)", (int)window,
			           k.nsend);
	}
	ibvl_kern_begin(L, &k);
	for (int i = 0; i + 1 < k.nsend; i++)
		k.swr[i].send_flags &= ~(unsigned int)IBV_SEND_SIGNALED;
	bw_loop(&k, window);
	return ibvl_kern_end(L, &k);
}

void ibvl_open_bw(lua_State *L)
{
	lua_pushcfunction(L, l_bw);
	lua_setfield(L, -2, "bw");
}
