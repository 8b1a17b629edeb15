/*
 * bw.c: the bandwidth and message-rate kernel of perftest's ib_write_bw,
 * ib_read_bw and ib_send_bw, the loop entirely in C with busy polling
 * (kernel.h: the table, time limit, SIGINT, figures; kernels.c: the loop,
 * alone or several in ibv.kernels).
 *
 *   local f = assert(ibv.bw{qp = qp, send_cq = cq, send_wrs = sl, iters = 100000,
 *                           window = 128, cq_mod = 100})          -- a sender
 *   ibv.bw{qp = qp, recv_cq = cq, recv_wrs = rl, iters = 100000}  -- a send receiver
 *   ibv.bw{... both sides ...}                                     -- bidirectional
 *   ibv.bw{qp = a, send_cq =, send_wrs =, recv_qp = b, recv_cq =, recv_wrs =, iters =}
 *   f.sent, f.received, f.seconds  -- MB/s: size * f.sent / f.seconds / 2^20
 *
 * Each post posts send_wrs whole (perftest's post list), while at most
 * window WRs (default 128, perftest's tx depth) are outstanding; one WR in
 * cq_mod (default 100, a multiple of #send_wrs) is signaled: the last of a
 * post, whose completion accounts for the cq_mod WRs before it (the kernel
 * sets and clears that flag; the list's own flags come back after the run).
 * The send CQ is polled only when no post can go (the window full, or every
 * WR posted), as ib_write_bw polls it.
 * iters counts the WRs to send (a multiple of #send_wrs) and the receives to
 * wait for; the receives go to recv_qp when given (one QP sends, another
 * receives: the two ends of a pair of RC connections), else to qp.  seconds
 * runs from the first post (or receive) to the last completion.  Nothing is
 * allocated in the loop.
 */
#include "measure/kernel.h"

static const char *const bw_fields[] = {"qp", "send_cq", "send_wrs", "recv_qp", "recv_cq",
                                        "recv_wrs", "prepost", "iters", "window", "cq_mod",
                                        "timeout", NULL};

/* Whether a post list can go now: WRs are left to post and the window has room. */
static int room(const struct ibvl_kern *k)
{
	return k->posted < k->iters && k->posted - k->completed + k->nsend <= k->window;
}

/* One post list when the window has room (the last WR signaled once in
 * cq_mod WRs and at the end); the CQs of what is left to wait for: the
 * send CQ only when no post can follow (the window full, or every WR
 * posted), as ib_write_bw polls it, since only a completion lets it on. */
static int bw_step(struct ibvl_kern *k)
{
	int sending = k->swr != NULL && k->completed < k->iters;
	int receiving = k->rwr != NULL && k->received < k->recv_iters;
	if (!sending && !receiving)
		return KERN_DONE;
	if (sending && room(k)) {
		struct ibv_send_wr *last = &k->swr[k->nsend - 1];
		unsigned int sig = k->saved_flags[k->nsend - 1] | IBV_SEND_SIGNALED;
		long long after = k->posted + k->nsend;
		last->send_flags = after % k->cover == 0 || after >= k->iters
		                   ? sig : sig & ~(unsigned int)IBV_SEND_SIGNALED;
		if (k->first == 0)
			k->first = ibvl_ticks();
		if (ibvl_kern_post(k))
			return KERN_STOPPED;
	}
	k->wait[0] = sending && !room(k) ? k->scq : NULL;
	k->wait[1] = receiving && k->rcq != k->wait[0] ? k->rcq : NULL;
	return KERN_MORE;
}

static void read_bw(lua_State *L, struct ibvl_kern *k, int idx)
{
	k->window = ibvl_int_field(L, idx, "window", 128, 1, INT32_MAX);
	k->cover = ibvl_int_field(L, idx, "cq_mod", 100, 1, INT32_MAX);
	if (k->swr == NULL)
		return;
	if (k->cover % k->nsend != 0)
		ibvl_error(L, "field 'cq_mod': %d is no multiple of send_wrs' %d WRs", (int)k->cover,
		           k->nsend);
	if (k->iters % k->nsend != 0)
		ibvl_error(L, "field 'iters': %d is no multiple of send_wrs' %d WRs", (int)k->iters,
		           k->nsend);
	if (k->window < k->nsend)
		ibvl_error(L, "field 'window': %d is smaller than send_wrs (%d WRs)", (int)k->window,
		           k->nsend);
}

/* Only the last WR of a post may be signaled (bw_step sets it). */
static void bw_start(struct ibvl_kern *k)
{
	for (int i = 0; i + 1 < k->nsend; i++)
		k->swr[i].send_flags &= ~(unsigned int)IBV_SEND_SIGNALED;
}

const struct ibvl_kern_type ibvl_kern_bw = {
	"ibv.bw", "bw", bw_fields, KERN_SEND | KERN_RECV | KERN_EITHER, read_bw, bw_start, bw_step,
};

static int l_bw(lua_State *L)
{
	return ibvl_kern_run1(L, &ibvl_kern_bw);
}

void ibvl_open_bw(lua_State *L)
{
	lua_pushcfunction(L, l_bw);
	lua_setfield(L, -2, "bw");
}
