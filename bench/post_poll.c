/*
 * post_poll.c: the C reference for bench/post_poll.lua, plain libibverbs.
 *
 *   gcc -O2 -o post_poll post_poll.c -libverbs
 *   ./post_poll [-d rxe0] [-g 1] [-n 1000000] [-c 8000] [-m 51200] [-w 256] [-r 5]
 *
 * recv: posts n receive WRs in chains of 64 on one RC QP.  Every c WRs the
 * receive queue is drained: the QP goes to ERR, the flush completions are
 * polled, then RESET and INIT again.  The posting alone and the whole cycle
 * are timed separately.
 * sendrecv: an RC loopback pair on the device (GID index g); m 64-byte sends
 * posted in chains of 16 (the last one signaled); a ring of w receives
 * reposted in chains of 64 as they complete (in order, as RC receives do).
 * Each measurement runs once to warm up, then r times; the output lines
 *   RESULT c <measure> <median WRs/s> <best WRs/s> [extra]
 * are what bench/run tabulates.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#define CHAIN 64     /* receive WRs per post_recv call */
#define SCHAIN 16    /* send WRs per post_send call */
#define MSG 64       /* bytes per WR */
#define MAX_REPS 32

struct opts {
	const char *dev;
	int gid, cycle, window, reps;
	long total, msgs;
};

struct env {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	char *buf;
};

static void die(const char *what, int err)
{
	fprintf(stderr, "post_poll: %s: %s\n", what, strerror(err));
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Prints the median and the best of r rates. */
static void report(const char *measure, double *rate, int r, const char *extra)
{
	qsort(rate, (size_t)r, sizeof *rate, cmp_double);
	printf("RESULT c %s %.0f %.0f %s\n", measure, rate[r / 2], rate[r - 1], extra);
	fflush(stdout);
}

/* ---- setup ---------------------------------------------------------------- */

static void open_env(struct env *e, const char *name, size_t bytes)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL)
		die("ibv_get_device_list", errno);
	for (int i = 0; i < n && e->ctx == NULL; i++)
		if (strcmp(ibv_get_device_name(list[i]), name) == 0)
			e->ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (e->ctx == NULL)
		die(name, ENODEV);
	e->pd = ibv_alloc_pd(e->ctx);
	e->buf = calloc(1, bytes);
	if (e->pd == NULL || e->buf == NULL)
		die("ibv_alloc_pd", errno);
	e->mr = ibv_reg_mr(e->pd, e->buf, bytes, IBV_ACCESS_LOCAL_WRITE);
	if (e->mr == NULL)
		die("ibv_reg_mr", errno);
}

static struct ibv_cq *make_cq(struct env *e, int cqe)
{
	struct ibv_cq *cq = ibv_create_cq(e->ctx, cqe, NULL, NULL, 0);
	if (cq == NULL)
		die("ibv_create_cq", errno);
	return cq;
}

static struct ibv_qp *make_qp(struct env *e, struct ibv_cq *scq, struct ibv_cq *rcq, int sq,
                              int rq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = (uint32_t)sq, .max_recv_wr = (uint32_t)rq,
		        .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(e->pd, &a);
	if (qp == NULL)
		die("ibv_create_qp", errno);
	return qp;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what)
{
	int rc = ibv_modify_qp(qp, a, mask);
	if (rc != 0)
		die(what, rc);
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = {.qp_state = s};
	modify(qp, &a, IBV_QP_STATE, "ibv_modify_qp");
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
	                        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
	       "to INIT");
}

/* INIT -> RTR -> RTS towards the QP numbered qpn behind gid. */
static void to_rts(struct ibv_qp *qp, uint32_t qpn, const union ibv_gid *gid, int sgid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qpn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
		            .grh = {.dgid = *gid, .sgid_index = (uint8_t)sgid, .hop_limit = 1}},
	};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "to RTR");
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
	                        .rnr_retry = 7, .max_rd_atomic = 1};
	modify(qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC, "to RTS");
}

/* n receive WRs of MSG bytes each, linked as one chain */
static void fill_recv(struct env *e, struct ibv_recv_wr *wr, struct ibv_sge *sge, int n)
{
	for (int i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){(uintptr_t)e->buf + (uint64_t)i * MSG, MSG, e->mr->lkey};
		wr[i] = (struct ibv_recv_wr){.wr_id = (uint64_t)i, .sg_list = &sge[i], .num_sge = 1,
		                             .next = i + 1 < n ? &wr[i + 1] : NULL};
	}
}

/* ---- recv: posting, drained through ERR ----------------------------------- */

/* Polls until n completions arrived or 5 s passed; returns the count. */
static long drain(struct ibv_cq *cq, long n)
{
	struct ibv_wc wc[64];
	long got = 0;
	double deadline = now() + 5;
	while (got < n) {
		int k = ibv_poll_cq(cq, 64, wc);
		if (k < 0)
			die("ibv_poll_cq", -k);
		got += k;
		if (k == 0 && now() > deadline)
			break;
	}
	return got;
}

/* One run: returns the posting seconds, *cycle_s the whole time. */
static double recv_run(const struct opts *o, struct ibv_qp *qp, struct ibv_cq *cq,
                       struct ibv_recv_wr *wr, double *cycle_s, long *flushed)
{
	double post_s = 0, start = now();
	*flushed = 0;
	for (long done = 0; done < o->total; done += o->cycle) {
		double t0 = now();
		for (int k = 0; k < o->cycle / CHAIN; k++) {
			struct ibv_recv_wr *bad;
			int rc = ibv_post_recv(qp, wr, &bad);
			if (rc != 0)
				die("ibv_post_recv", rc);
		}
		post_s += now() - t0;
		to_state(qp, IBV_QPS_ERR);
		*flushed += drain(cq, o->cycle);
		to_state(qp, IBV_QPS_RESET);
		to_init(qp);
	}
	*cycle_s = now() - start;
	return post_s;
}

static void bench_recv(const struct opts *o)
{
	struct env e = {0};
	open_env(&e, o->dev, CHAIN * MSG);
	struct ibv_cq *cq = make_cq(&e, o->cycle);
	struct ibv_qp *qp = make_qp(&e, cq, cq, 1, o->cycle);
	struct ibv_recv_wr wr[CHAIN];
	struct ibv_sge sge[CHAIN];
	fill_recv(&e, wr, sge, CHAIN);
	to_init(qp);
	double post[MAX_REPS], cycle[MAX_REPS], cs;
	long flushed = 0;
	struct opts warm = *o;
	warm.total = o->cycle;
	recv_run(&warm, qp, cq, wr, &cs, &flushed); /* warm-up, one cycle */
	for (int r = 0; r < o->reps; r++) {
		double ps = recv_run(o, qp, cq, wr, &cs, &flushed);
		post[r] = (double)o->total / ps;
		cycle[r] = (double)o->total / cs;
	}
	char extra[64];
	snprintf(extra, sizeof extra, "flushed=%ld/%ld", flushed, o->total);
	report("recv_post", post, o->reps, extra);
	report("recv_cycle", cycle, o->reps, extra);
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dereg_mr(e.mr);
	ibv_dealloc_pd(e.pd);
	ibv_close_device(e.ctx);
	free(e.buf);
}

/* ---- sendrecv: loopback message rate -------------------------------------- */

struct pair {
	struct ibv_qp *a, *b;
	struct ibv_cq *scq, *rcq;
	struct ibv_send_wr swr[SCHAIN];
	struct ibv_recv_wr *rwr;
	struct ibv_sge ssge[SCHAIN], *rsge;
	long outstanding; /* receives left posted by the last run */
};

static void make_pair(struct env *e, const struct opts *o, struct pair *p)
{
	p->scq = make_cq(e, o->window);
	p->rcq = make_cq(e, o->window);
	p->a = make_qp(e, p->scq, p->rcq, o->window, o->window);
	p->b = make_qp(e, p->scq, p->rcq, o->window, o->window);
	union ibv_gid gid;
	if (ibv_query_gid(e->ctx, 1, o->gid, &gid) != 0)
		die("ibv_query_gid", errno);
	to_init(p->a);
	to_init(p->b);
	to_rts(p->a, p->b->qp_num, &gid, o->gid);
	to_rts(p->b, p->a->qp_num, &gid, o->gid);
	p->rwr = calloc((size_t)o->window, sizeof *p->rwr);
	p->rsge = calloc((size_t)o->window, sizeof *p->rsge);
	if (p->rwr == NULL || p->rsge == NULL)
		die("calloc", ENOMEM);
	fill_recv(e, p->rwr, p->rsge, o->window);
	for (int i = 0; i < SCHAIN; i++) {
		p->ssge[i] = (struct ibv_sge){(uintptr_t)e->buf, MSG, e->mr->lkey};
		p->swr[i] = (struct ibv_send_wr){
			.wr_id = (uint64_t)i, .sg_list = &p->ssge[i], .num_sge = 1,
			.opcode = IBV_WR_SEND, .next = i + 1 < SCHAIN ? &p->swr[i + 1] : NULL,
			.send_flags = i + 1 == SCHAIN ? IBV_SEND_SIGNALED : 0};
	}
}

/* Posts receive WRs [first, first+CHAIN) of the ring as one chain. */
static void post_ring(struct pair *p, int first)
{
	struct ibv_recv_wr *last = &p->rwr[first + CHAIN - 1], *saved = last->next, *bad;
	last->next = NULL;
	int rc = ibv_post_recv(p->b, &p->rwr[first], &bad);
	last->next = saved;
	if (rc != 0)
		die("ibv_post_recv", rc);
}

/* Polls cq once; returns the completions, all of which must be successful. */
static int poll_ok(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n = ibv_poll_cq(cq, 64, wc);
	if (n < 0)
		die("ibv_poll_cq", -n);
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS) {
			fprintf(stderr, "post_poll: wc status %s\n", ibv_wc_status_str(wc[i].status));
			exit(1);
		}
	return n;
}

/* One run of o->msgs messages; returns the seconds. */
static double sendrecv_run(const struct opts *o, struct pair *p)
{
	int nchunks = o->window / CHAIN;
	for (int c = 0; c < nchunks; c++)
		post_ring(p, c * CHAIN);
	long sent = 0, scomp = 0, recvd = 0, reposted = 0, rposted = o->window;
	struct ibv_wc wc[64];
	double start = now(), deadline = start + 60;
	while (recvd < o->msgs) {
		if (sent < o->msgs && sent - scomp + SCHAIN <= o->window && sent + SCHAIN <= rposted) {
			struct ibv_send_wr *bad;
			int rc = ibv_post_send(p->a, p->swr, &bad);
			if (rc != 0)
				die("ibv_post_send", rc);
			sent += SCHAIN;
		}
		scomp += (long)poll_ok(p->scq, wc) * SCHAIN;
		recvd += poll_ok(p->rcq, wc);
		while (recvd - reposted >= CHAIN) {
			post_ring(p, (int)(reposted / CHAIN % nchunks) * CHAIN);
			reposted += CHAIN;
			rposted += CHAIN;
		}
		if (now() > deadline)
			die("sendrecv", ETIMEDOUT);
	}
	double s = now() - start;
	while (scomp < sent) /* the last send completions, before the QPs are reset */
		scomp += (long)poll_ok(p->scq, wc) * SCHAIN;
	p->outstanding = rposted - recvd; /* flushed on reconnect */
	return s;
}

/* Back to a fresh connection with no receives posted: the ring starts over. */
static void reconnect(struct env *e, const struct opts *o, struct pair *p)
{
	union ibv_gid gid;
	if (ibv_query_gid(e->ctx, 1, o->gid, &gid) != 0)
		die("ibv_query_gid", errno);
	struct ibv_qp *q[2] = {p->a, p->b};
	for (int i = 0; i < 2; i++) {
		to_state(q[i], IBV_QPS_ERR);
		to_state(q[i], IBV_QPS_RESET);
	}
	drain(p->rcq, p->outstanding); /* the flushed ring */
	for (int i = 0; i < 2; i++)
		to_init(q[i]);
	to_rts(p->a, p->b->qp_num, &gid, o->gid);
	to_rts(p->b, p->a->qp_num, &gid, o->gid);
}

static void bench_sendrecv(const struct opts *o)
{
	struct env e = {0};
	open_env(&e, o->dev, (size_t)o->window * MSG);
	struct pair p;
	make_pair(&e, o, &p);
	double rate[MAX_REPS];
	struct opts warm = *o;
	warm.msgs = 4 * o->window;
	sendrecv_run(&warm, &p); /* warm-up */
	for (int r = 0; r < o->reps; r++) {
		reconnect(&e, o, &p);
		rate[r] = (double)o->msgs / sendrecv_run(o, &p);
	}
	report("sendrecv", rate, o->reps, "");
}

int main(int argc, char **argv)
{
	struct opts o = {"rxe0", 1, 8000, 256, 5, 1000000, 51200};
	int c;
	while ((c = getopt(argc, argv, "d:g:n:c:m:w:r:")) != -1) {
		switch (c) {
		case 'd': o.dev = optarg; break;
		case 'g': o.gid = atoi(optarg); break;
		case 'n': o.total = atol(optarg); break;
		case 'c': o.cycle = atoi(optarg); break;
		case 'm': o.msgs = atol(optarg); break;
		case 'w': o.window = atoi(optarg); break;
		case 'r': o.reps = atoi(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-d dev] [-g gid] [-n recvs] [-c cycle] "
			        "[-m msgs] [-w window] [-r reps]\n", argv[0]);
			return 2;
		}
	}
	if (o.cycle % CHAIN || o.total % o.cycle || o.window % CHAIN || o.window < CHAIN ||
	    o.msgs % CHAIN || o.reps < 1 || o.reps > MAX_REPS) {
		fprintf(stderr, "post_poll: -c, -w and -m must be multiples of %d, -n of -c, "
		        "1 <= -r <= %d\n", CHAIN, MAX_REPS);
		return 2;
	}
	bench_recv(&o);
	bench_sendrecv(&o);
	return 0;
}
