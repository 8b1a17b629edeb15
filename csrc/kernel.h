/*
 * kernel.h: what the measurement kernels (lat.c, bw.c) share: their
 * argument table read into C (check after parse), the completion handling
 * of a busy-polling loop with its time limit and SIGINT, the result.
 *
 *   struct ibvl_kern k;
 *   ibvl_kern_parse(L, &k, "ibv.lat_send", fields, KERN_SEND | KERN_RECV);
 *   ibvl_kern_begin(L, &k);                 -- objects checked again, SIGINT, clock
 *   ... ibvl_kern_post(&k), ibvl_kern_spin(&k, cq, &k.completed, n) ...
 *   return ibvl_kern_end(L, &k);            -- figures, or nil, msg, errno, figures
 *
 * No Lua code runs between ibvl_kern_begin and ibvl_kern_end: nothing there
 * allocates or raises, so no finalizer can close an object under the loop;
 * the objects stay on the stack (kept) until the call returns.
 */
#ifndef IBVL_KERNEL_H
#define IBVL_KERNEL_H

#include <stdint.h>

#include "cq.h"
#include "ibvl.h"
#include "post.h"
#include "stats.h"
#include "wr.h"

/* what a kernel reads from its table */
enum {
	KERN_SEND = 1,    /* qp, send_cq, send_wrs */
	KERN_RECV = 2,    /* recv_cq, recv_wrs (reposted as consumed) */
	KERN_SAMPLES = 4, /* samples (optional) */
	KERN_EITHER = 8,  /* the send side, the receive side or both */
};

/* why a run stopped early */
enum { KERN_OK, KERN_WC, KERN_POST, KERN_POLL, KERN_TIME, KERN_SIGINT, KERN_FOREIGN };

#define KERN_MAX_SEND 64 /* WRs a kernel's send list may hold */

struct ibvl_kern {
	const char *name; /* "ibv.lat_send", for messages */
	struct ibvl_qp *lqp;
	struct ibv_qp *qp;        /* sends; receives of KERN_RECV go to rqp */
	struct ibv_qp *rqp;
	uint32_t qpn;             /* qp's number: what its completions carry */
	struct ibvl_cq *scq, *rcq;
	struct ibv_send_wr *swr;  /* the send list, posted whole */
	int nsend, sidx;
	struct ibvl_chain schain;
	struct ibv_recv_wr *rwr;
	int nrecv, ridx;
	struct ibvl_samples *samples;
	long long iters;          /* iterations (latency) or WRs to send (bandwidth) */
	long long recv_iters;     /* receives to wait for (bandwidth) */
	long long cover;          /* send WRs one send completion accounts for */
	double timeout;           /* seconds for the whole run (math.huge: none) */
	unsigned int saved_flags[KERN_MAX_SEND]; /* the send list's flags, restored at the end */
	/* progress */
	long long posted, completed, received, stamps, foreign;
	uint64_t prev;            /* the last stamp, in ticks */
	uint64_t first, last;     /* ticks of the first post and of the last completion */
	unsigned int spins;
	double deadline;
	int stop;                 /* KERN_* */
	int err;                  /* errno of a failed post or poll */
	struct ibv_wc bad;        /* the completion that stopped the run */
	struct ibvl_sigint sig;
	struct ibvl_clock clock;
	struct ibvl_guard guard;  /* the reading of the table */
};

/* Reads the table at 1 (its allowed fields: fields) as the parts says;
 * the kernel reads its own fields after this, then calls ibvl_kern_begin. */
void ibvl_kern_parse(lua_State *L, struct ibvl_kern *k, const char *name,
                     const char *const *fields, int parts);
/* The lists checked again after the reading; SIGINT caught; the clock. */
void ibvl_kern_begin(lua_State *L, struct ibvl_kern *k);
/* Pushes the figures (or the failure and the figures); raises
 * "<name>: interrupted" on SIGINT, after restoring the send list. */
int ibvl_kern_end(lua_State *L, struct ibvl_kern *k);

int ibvl_kern_late(struct ibvl_kern *k); /* the time limit passed: sets stop */

/* Whether the loop must stop: SIGINT, the time limit (read every 256 calls). */
static inline int ibvl_kern_tick(struct ibvl_kern *k)
{
	if (ibvl_sigint_pending()) {
		k->stop = KERN_SIGINT;
		return 1;
	}
	return (++k->spins & 255) == 0 && ibvl_kern_late(k);
}

/* One poll of cq: successful receives counted (and reposted while
 * received + #recv_wrs <= recv_iters, as perftest does), send completions
 * counted as cover WRs each.  The count polled, or -1 (stop set). */
int ibvl_kern_poll(struct ibvl_kern *k, struct ibvl_cq *cq);

/* Polls cq until *counter reaches want; 0, or -1 when the run stops. */
static inline int ibvl_kern_spin(struct ibvl_kern *k, struct ibvl_cq *cq, long long *counter,
                                 long long want)
{
	while (*counter < want) {
		int n = ibvl_kern_poll(k, cq);
		if (n < 0 || (n == 0 && ibvl_kern_tick(k)))
			return -1;
	}
	return 0;
}

/* Records iteration i's start: sample i-1 is the time since iteration i-1's. */
static inline void ibvl_kern_stamp(struct ibvl_kern *k)
{
	uint64_t now = ibvl_ticks();
	if (k->stamps > 0 && k->samples != NULL)
		k->samples->v[k->stamps - 1].ticks = now - k->prev;
	k->prev = now;
	k->stamps++;
}

/* Posts the send list: 0, or -1 (stop set). */
static inline int ibvl_kern_post(struct ibvl_kern *k)
{
	void *bad;
	int rc = ibvl_post_run(IBVL_POST_SEND, k->qp, &k->schain, &bad);
	if (rc != 0) {
		k->stop = KERN_POST;
		k->err = rc;
		return -1;
	}
	k->posted += k->nsend;
	return 0;
}

#endif
