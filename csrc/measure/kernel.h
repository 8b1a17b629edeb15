/*
 * kernel.h: what the measurement kernels (lat.c, bw.c) share: a kernel is a
 * type (its table's fields, what it reads, its step), one run of it is an
 * end (struct ibvl_kern); kernels.c runs one end (ibv.lat_send, ibv.bw,
 * ...) in a loop of its own, or several at once (ibv.kernels) in one
 * busy-polling loop, with their time limits and SIGINT; kernel.c reads an
 * end's table, hands each completion to its end and pushes the figures.
 *
 *   static const struct ibvl_kern_type send_type = {"ibv.lat_send", "lat_send",
 *     send_fields, KERN_SEND | KERN_RECV | KERN_SAMPLES, read_send, NULL, send_step};
 *   static int l_lat_send(lua_State *L) { return ibvl_kern_run1(L, &send_type); }
 *
 * A step advances its end as far as it can without waiting and returns
 * KERN_MORE (k->wait: the CQs whose completions it needs, NULL when it
 * waits on memory or can go on at once), KERN_DONE or KERN_STOPPED
 * (k->stop says why).  A step that waits through ibvl_kern_wait (a count
 * its CQ's completions raise) or ibvl_kern_wait_byte (memory) waits there
 * when its end runs alone (k->alone: polling in place, as perftest's loop
 * does, so one call runs the whole end), and returns KERN_MORE from there
 * among several ends; it resumes where it waited at its next call (k->phase).
 * No Lua code runs in the loop: nothing there
 * allocates or raises, so no finalizer can close an object under it; the
 * objects stay on the stack (kept) until the call returns.
 */
#ifndef IBVL_KERNEL_H
#define IBVL_KERNEL_H

#include <stdint.h>

#include "verbs/cq.h"
#include "verbs/verbs.h"
#include "datapath/post.h"
#include "measure/samples.h"
#include "datapath/wr.h"

/* what a kernel reads from its table */
enum {
	KERN_SEND = 1,    /* qp, send_cq, send_wrs */
	KERN_RECV = 2,    /* recv_cq, recv_wrs (reposted as consumed), recv_qp */
	KERN_SAMPLES = 4, /* samples (optional) */
	KERN_EITHER = 8,  /* the send side, the receive side or both */
};

/* why a run stopped early */
enum { KERN_OK, KERN_WC, KERN_POST, KERN_POLL, KERN_TIME, KERN_SIGINT, KERN_FOREIGN };

/* what a step returns (KERN_READY: what ibvl_kern_wait returns when the
 * wait is over and the step goes on) */
enum { KERN_MORE, KERN_DONE, KERN_STOPPED, KERN_READY };

#define KERN_MAX_SEND 64 /* WRs a kernel's send list may hold */
#define KERN_MAX_ENDS 64 /* ends ibv.kernels runs at once */

struct ibvl_kern;

struct ibvl_kern_type {
	const char *name;          /* "ibv.lat_send", for messages */
	const char *kind;          /* "lat_send": its name in ibv.kernels' tables */
	const char *const *fields; /* its table's fields */
	int parts;                 /* KERN_* */
	void (*read)(lua_State *L, struct ibvl_kern *k, int idx); /* its own fields */
	void (*start)(struct ibvl_kern *k); /* the send list's flags, before the loop */
	int (*step)(struct ibvl_kern *k);
};

struct ibvl_kern {
	const struct ibvl_kern_type *type;
	const char *name;
	struct ibvl_qp *lqp;
	struct ibv_qp *qp;        /* sends; receives of KERN_RECV go to rqp (recv_qp or qp) */
	struct ibv_qp *rqp;
	uint32_t qpn, rqpn;       /* what their completions carry */
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
	/* what the kernel's own fields give */
	int initiator;            /* ping-pong: this end posts first */
	long long warmup;         /* ping-pong: round trips before the timed ones (in iters) */
	long long window;         /* bandwidth: WRs outstanding at most */
	volatile char *post_byte; /* lat_write: the last byte of the message sent */
	volatile char *poll_byte; /* lat_write: the last byte the peer writes */
	int prepost;              /* post min(#recv_wrs, recv_iters) receives at the start */
	int event;                /* sleep on the CQs' completion channels when idle */
	int alone;                /* the only end of its call, busy polling: its step waits in place */
	uint64_t after;           /* ibv.kernels: the ends (bit i: end i) that must be over first */
	int within;               /* ibv.kernels: the end whose start the time limit counts from (-1: its own) */
	/* progress */
	int phase;                /* where the step is (the kernel's own) */
	int started;              /* the end is running (or ran) */
	int over;                 /* the end finished or stopped */
	struct ibvl_cq *wait[2];  /* the CQs the step waits on (NULL: none, memory) */
	long long posted, completed, received, stamps, foreign;
	long long sent, wanted;   /* ping-pong: messages sent, peer messages waited for */
	uint64_t prev;            /* the last stamp, in ticks */
	uint64_t first, last;     /* ticks of the first post and of the last completion */
	double t0;                /* when it started (ibvl_monotonic) */
	double deadline;
	int stop;                 /* KERN_* */
	int err;                  /* errno of a failed post or poll */
	struct ibv_wc bad;        /* the completion that stopped the run */
};

/* Reads the end's table at idx (its fields: the type's, and "kernel" when
 * multi) into k, the objects kept on the stack. */
void ibvl_kern_parse(lua_State *L, struct ibvl_kern *k, int idx, const struct ibvl_kern_type *t,
                     int multi);
/* The lists checked again after every table was read; the send list's flags saved. */
void ibvl_kern_recheck(lua_State *L, struct ibvl_kern *k);
/* The end starts: its receives preposted (prepost), its time limit from now. */
void ibvl_kern_start(struct ibvl_kern *k, double now);
/* The send list's flags as they were before the run. */
void ibvl_kern_restore(struct ibvl_kern *k);
/* The send list's flags restored; the figures pushed (seconds: from the
 * first post or completion to the last completion, else run_seconds):
 * multi, one table with error and errno on failure; else the table, or nil,
 * msg, errno, table. */
int ibvl_kern_push(lua_State *L, struct ibvl_kern *k, double scale, double run_seconds,
                   int multi);

/* kernels.c: one end of type t from the table at 1, all of ibv.lat_send & co. */
int ibvl_kern_run1(lua_State *L, const struct ibvl_kern_type *t);

/* the kernels ibv.kernels knows by their kind (lat.c, bw.c) */
extern const struct ibvl_kern_type ibvl_kern_lat_send, ibvl_kern_lat_write, ibvl_kern_lat_rtt,
	ibvl_kern_bw;

/* kernels.c: the step of k needs *count (which cq's completions raise)
 * to reach want: alone, polls cq until it does (KERN_READY) or k stops
 * (KERN_STOPPED: a completion with an error, the time limit, SIGINT); among
 * several ends, k->wait set to cq: KERN_MORE, for the step to return. */
int ibvl_kern_wait(struct ibvl_kern *k, struct ibvl_cq *cq, const long long *count, long long want);
/* The same for the byte at b turning to want (k->wait: none). */
int ibvl_kern_wait_byte(struct ibvl_kern *k, const volatile char *b, char want);

/* Polls cq and hands each completion to its end among ks[0..n) (by QP
 * number): receives counted and reposted (while received + #recv_wrs <=
 * recv_iters, as perftest does), send completions counted as cover WRs each,
 * an error completion stops its end.  The count polled, or -errno. */
int ibvl_kern_poll(struct ibvl_kern *ks, int n, struct ibvl_cq *cq);
/* The same for one end (n = 1: no owner to search for). */
int ibvl_kern_poll1(struct ibvl_kern *k, struct ibvl_cq *cq);

static inline int ibvl_kern_fail(struct ibvl_kern *k, int why, int err)
{
	k->stop = why;
	k->err = err;
	return KERN_STOPPED;
}

/* Records iteration i's start: sample i-1 is the time since iteration i-1's. */
static inline void ibvl_kern_stamp(struct ibvl_kern *k)
{
	uint64_t now = ibvl_ticks();
	if (k->first == 0)
		k->first = now;
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
		ibvl_kern_fail(k, KERN_POST, rc);
		return -1;
	}
	k->posted += k->nsend;
	return 0;
}

/* the kernels' entry points */
void ibvl_open_lat(lua_State *L);     /* lat.c: ibv.lat_send, lat_write, lat_rtt */
void ibvl_open_bw(lua_State *L);      /* bw.c: ibv.bw */
void ibvl_open_kernels(lua_State *L); /* kernels.c: ibv.kernels */

#endif
