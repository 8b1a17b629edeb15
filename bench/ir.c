/*
 * bench/ir.c: the C reference of `make bench-ir` (bench/run-ir), plain libibverbs.
 *
 *   gcc -O2 -o ir bench/ir.c -libverbs
 *   ./ir MODE COUNT [-t]
 *
 * MODE is the work bench/ir.lua and bench/ir.py do the same way:
 *   recv      COUNT receive WRs in chains of 64 on an RC QP in INIT, the CQ
 *             polled (64 entries, nothing there) after each chain
 *   sendrecv  COUNT 64-byte sends over an RC loopback pair, posted in chains
 *             of 64 (the last one signaled), every completion checked, a ring
 *             of 256 receives reposted in chains of 64 as they complete
 *   modify    COUNT/3 rounds of ERR, RESET, INIT (COUNT calls of ibv_modify_qp)
 *   polltab   COUNT receive WRs in chains of 64, each chain flushed (ERR), its
 *             64 completions polled, then RESET and INIT (the Lua side polls
 *             them into tables: cq:poll(64))
 * Setup and a warm-up are the same whatever COUNT is, so the difference of
 * two runs (COUNT and 2*COUNT) under callgrind is the cost of COUNT units.
 * With -t the work is timed: "TIME c MODE seconds COUNT".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define CHAIN 64
#define SCHAIN 64
#define MSG 64
#define WINDOW 256
/* warm-up units, the same in every implementation: enough iterations of
 * each loop for LuaJIT to compile it before the measured run */
#define WARM_RECV 8192
#define WARM_SEND 2048
#define WARM_MODIFY 384
#define WARM_POLLTAB 8192

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_mr *mr;
static char buf[WINDOW * MSG];

static void die(const char *what, int err)
{
	fprintf(stderr, "ir: %s: %s\n", what, strerror(err));
	exit(1);
}

static double now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void open_env(void)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list != NULL && i < n && ctx == NULL; i++)
		if (strcmp(ibv_get_device_name(list[i]), "rxe0") == 0)
			ctx = ibv_open_device(list[i]);
	if (ctx == NULL)
		die("rxe0", ENODEV);
	ibv_free_device_list(list);
	if ((pd = ibv_alloc_pd(ctx)) == NULL)
		die("ibv_alloc_pd", errno);
	if ((mr = ibv_reg_mr(pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE)) == NULL)
		die("ibv_reg_mr", errno);
}

static struct ibv_qp *make_qp(struct ibv_cq *scq, struct ibv_cq *rcq, int sq, int rq)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq, .recv_cq = rcq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = (uint32_t)sq, .max_recv_wr = (uint32_t)rq,
		        .max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (qp == NULL)
		die("ibv_create_qp", errno);
	return qp;
}

static void modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	int rc = ibv_modify_qp(qp, a, mask);
	if (rc != 0)
		die("ibv_modify_qp", rc);
}

static void to_state(struct ibv_qp *qp, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = {.qp_state = s};
	modify(qp, &a, IBV_QP_STATE);
}

static void to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
	                        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

static void to_rts(struct ibv_qp *qp, uint32_t qpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024, .dest_qp_num = qpn,
		.max_dest_rd_atomic = 1, .min_rnr_timer = 12,
		.ah_attr = {.is_global = 1, .port_num = 1,
		            .grh = {.dgid = *gid, .sgid_index = 1, .hop_limit = 1}},
	};
	modify(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	struct ibv_qp_attr r = {.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
	                        .rnr_retry = 7, .max_rd_atomic = 1};
	modify(qp, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void fill_recv(struct ibv_recv_wr *wr, struct ibv_sge *sge, int n)
{
	for (int i = 0; i < n; i++) {
		sge[i] = (struct ibv_sge){(uintptr_t)buf + (uint64_t)i * MSG, MSG, mr->lkey};
		wr[i] = (struct ibv_recv_wr){.wr_id = (uint64_t)i, .sg_list = &sge[i], .num_sge = 1,
		                             .next = i + 1 < n ? &wr[i + 1] : NULL};
	}
}

static void post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr)
{
	struct ibv_recv_wr *bad;
	int rc = ibv_post_recv(qp, wr, &bad);
	if (rc != 0)
		die("ibv_post_recv", rc);
}

/* Polls cq once into wc; every completion must be successful. */
static int poll_ok(struct ibv_cq *cq, struct ibv_wc *wc)
{
	int n = ibv_poll_cq(cq, CHAIN, wc);
	if (n < 0)
		die("ibv_poll_cq", -n);
	for (int i = 0; i < n; i++)
		if (wc[i].status != IBV_WC_SUCCESS)
			die(ibv_wc_status_str(wc[i].status), EIO);
	return n;
}

struct rq {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_recv_wr wr[CHAIN];
	struct ibv_sge sge[CHAIN];
	struct ibv_wc wc[CHAIN];
};

static void rq_setup(struct rq *r, int rq)
{
	r->cq = ibv_create_cq(ctx, CHAIN, NULL, NULL, 0);
	if (r->cq == NULL)
		die("ibv_create_cq", errno);
	r->qp = make_qp(r->cq, r->cq, 1, rq);
	fill_recv(r->wr, r->sge, CHAIN);
	to_init(r->qp);
}

static void recv_work(struct rq *r, long count)
{
	for (long i = 0; i < count; i += CHAIN) {
		post_recv(r->qp, r->wr);
		if (ibv_poll_cq(r->cq, CHAIN, r->wc) != 0)
			die("ibv_poll_cq: completions on an idle QP", EIO);
	}
}

static void modify_work(struct rq *r, long count)
{
	for (long i = 0; i < count; i += 3) {
		to_state(r->qp, IBV_QPS_ERR);
		to_state(r->qp, IBV_QPS_RESET);
		to_init(r->qp);
	}
}

static void polltab_work(struct rq *r, long count)
{
	for (long i = 0; i < count; i += CHAIN) {
		post_recv(r->qp, r->wr);
		to_state(r->qp, IBV_QPS_ERR);
		int got = 0;
		while (got < CHAIN) {
			int n = ibv_poll_cq(r->cq, CHAIN, r->wc);
			if (n < 0)
				die("ibv_poll_cq", -n);
			got += n;
		}
		to_state(r->qp, IBV_QPS_RESET);
		to_init(r->qp);
	}
}

struct pair {
	struct ibv_qp *a, *b;
	struct ibv_cq *scq, *rcq;
	struct ibv_send_wr swr[SCHAIN];
	struct ibv_sge ssge[SCHAIN];
	struct ibv_recv_wr rwr[WINDOW];
	struct ibv_sge rsge[WINDOW];
	struct ibv_wc wc[CHAIN];
};

static void pair_setup(struct pair *p)
{
	p->scq = ibv_create_cq(ctx, WINDOW, NULL, NULL, 0);
	p->rcq = ibv_create_cq(ctx, WINDOW, NULL, NULL, 0);
	if (p->scq == NULL || p->rcq == NULL)
		die("ibv_create_cq", errno);
	p->a = make_qp(p->scq, p->rcq, WINDOW, WINDOW);
	p->b = make_qp(p->scq, p->rcq, WINDOW, WINDOW);
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, 1, &gid) != 0)
		die("ibv_query_gid", errno);
	to_init(p->a);
	to_init(p->b);
	to_rts(p->a, p->b->qp_num, &gid);
	to_rts(p->b, p->a->qp_num, &gid);
	fill_recv(p->rwr, p->rsge, WINDOW);
	for (int i = 0; i < SCHAIN; i++) {
		p->ssge[i] = (struct ibv_sge){(uintptr_t)buf, MSG, mr->lkey};
		p->swr[i] = (struct ibv_send_wr){
			.wr_id = (uint64_t)i, .sg_list = &p->ssge[i], .num_sge = 1,
			.opcode = IBV_WR_SEND, .next = i + 1 < SCHAIN ? &p->swr[i + 1] : NULL,
			.send_flags = i + 1 == SCHAIN ? IBV_SEND_SIGNALED : 0};
	}
}

static void post_ring(struct pair *p, int first)
{
	struct ibv_recv_wr *last = &p->rwr[first + CHAIN - 1], *saved = last->next;
	last->next = NULL;
	post_recv(p->b, &p->rwr[first]);
	last->next = saved;
}

/* count messages; the ring of receives is full before and after */
static void sendrecv_work(struct pair *p, long count)
{
	long sent = 0, scomp = 0, recvd = 0, reposted = 0, rposted = WINDOW;
	double deadline = now() + 600;
	while (recvd < count) {
		if (sent < count && sent - scomp + SCHAIN <= WINDOW && sent + SCHAIN <= rposted) {
			struct ibv_send_wr *bad;
			int rc = ibv_post_send(p->a, p->swr, &bad);
			if (rc != 0)
				die("ibv_post_send", rc);
			sent += SCHAIN;
		}
		scomp += (long)poll_ok(p->scq, p->wc) * SCHAIN;
		recvd += poll_ok(p->rcq, p->wc);
		while (recvd - reposted >= CHAIN) {
			post_ring(p, (int)(reposted / CHAIN % (WINDOW / CHAIN)) * CHAIN);
			reposted += CHAIN;
			rposted += CHAIN;
		}
		if (recvd < count && now() > deadline)
			die("sendrecv", ETIMEDOUT);
	}
	while (scomp < sent)
		scomp += (long)poll_ok(p->scq, p->wc) * SCHAIN;
}

void ir_measured(void (*fn)(void *), void *arg); /* bench/measure.c */

/* The measured run: COUNT units of one mode's work. */
struct job {
	void (*rq_work)(struct rq *, long);
	struct rq *r;
	struct pair *p;
	long count;
};

static void run_job(void *arg)
{
	struct job *j = arg;
	if (j->rq_work != NULL)
		j->rq_work(j->r, j->count);
	else
		sendrecv_work(j->p, j->count);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ir recv|sendrecv|modify|polltab COUNT [-t]\n");
		return 2;
	}
	const char *mode = argv[1];
	long count = atol(argv[2]);
	int timed = argc > 3 && strcmp(argv[3], "-t") == 0;
	if (count <= 0 || count % CHAIN != 0)
		die("COUNT: a positive multiple of 64 expected", EINVAL);
	open_env();
	static struct rq r;
	static struct pair p;
	double t0 = 0, t1 = 0;
	if (strcmp(mode, "sendrecv") == 0) {
		pair_setup(&p);
		for (int c = 0; c < WINDOW / CHAIN; c++)
			post_ring(&p, c * CHAIN);
		sendrecv_work(&p, WARM_SEND);
		struct job j = {NULL, NULL, &p, count};
		t0 = now();
		ir_measured(run_job, &j);
		t1 = now();
	} else {
		int rq = strcmp(mode, "recv") == 0 ? (int)count + WARM_RECV : CHAIN;
		rq_setup(&r, rq);
		void (*work)(struct rq *, long) = strcmp(mode, "recv") == 0 ? recv_work
		                                : strcmp(mode, "modify") == 0 ? modify_work
		                                : strcmp(mode, "polltab") == 0 ? polltab_work : NULL;
		if (work == NULL)
			die(mode, EINVAL);
		work(&r, work == recv_work ? WARM_RECV : work == modify_work ? WARM_MODIFY
		                                                      : WARM_POLLTAB);
		struct job j = {work, &r, NULL, count};
		t0 = now();
		ir_measured(run_job, &j);
		t1 = now();
	}
	if (timed)
		printf("TIME c %s %.6f %ld\n", mode, t1 - t0, count);
	return 0;
}
