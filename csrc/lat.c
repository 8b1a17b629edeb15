/*
 * lat.c: latency kernels, the ping-pong of perftest's ib_send_lat and
 * ib_write_lat and the round trips of ib_read_lat and ib_atomic_lat, each
 * loop entirely in C with busy polling (kernel.h: the table, time limit,
 * SIGINT, figures).
 *
 *   local s = ibv.samples(999)
 *   local f = assert(ibv.lat_send{qp = qp, send_cq = scq, recv_cq = rcq,
 *     send_wrs = sl, recv_wrs = rl, iters = 1000, initiator = true, samples = s})
 *   ibv.lat_write{qp =, send_cq =, send_wrs = wl, send_mr = mr, poll_mr = mr,
 *     poll_offset = n, iters =, initiator =, samples =}
 *   ibv.lat_rtt{qp =, send_cq =, send_wrs = rl, iters =, samples =}  -- read, atomic
 *   f.iters, f.sent, f.received, f.samples, f.seconds; s:stats()
 *
 * send_wrs holds one WR, posted signaled each iteration (its own flags come
 * back after the run).  Ping-pong: the initiator posts first; each side then
 * waits for the peer's message (lat_send: a receive completion; lat_write:
 * the last byte of poll_mr at poll_offset + length - 1 turning to the
 * iteration's number modulo 256, which lat_write writes into the last byte
 * of its own message before posting it; zero that byte before the peers
 * start) and answers it.  Every iteration's start is stamped (the CPU's
 * time-stamp counter, calibrated over the run); sample i is the time from
 * iteration i's start to iteration i+1's, one round trip, so iters
 * iterations give iters - 1 samples, as perftest counts them.  Nothing is
 * allocated in the loop.
 */
#include "kernel.h"

/* The run of one kernel: parse, check, loop, figures. */
static int run(lua_State *L, struct ibvl_kern *k, int (*loop)(struct ibvl_kern *k, void *arg),
               void *arg)
{
	ibvl_kern_begin(L, k);
	for (int i = 0; i < k->nsend; i++)
		k->swr[i].send_flags |= IBV_SEND_SIGNALED;
	loop(k, arg);
	return ibvl_kern_end(L, k);
}

static void one_wr(lua_State *L, const struct ibvl_kern *k)
{
	if (k->nsend != 1)
		ibvl_error(L, "field 'send_wrs': one WR expected, got %d", k->nsend);
}

/* ---- send/recv ping-pong (ib_send_lat) ----------------------------------- */

static int send_loop(struct ibvl_kern *k, void *arg)
{
	int initiator = *(int *)arg;
	long long sent = 0, wanted = 0;
	while (sent < k->iters || k->received < k->iters) {
		if (k->received < k->iters && !(sent == 0 && initiator) &&
		    ibvl_kern_spin(k, k->rcq, &k->received, ++wanted))
			return -1;
		if (sent < k->iters) {
			ibvl_kern_stamp(k);
			if (ibvl_kern_post(k) || ibvl_kern_spin(k, k->scq, &k->completed, ++sent))
				return -1;
		}
	}
	return 0;
}

static const char *const send_fields[] = {"qp", "send_cq", "send_wrs", "recv_cq", "recv_wrs", "iters",
                                          "initiator", "samples", "timeout", NULL};

static int l_lat_send(lua_State *L)
{
	struct ibvl_kern k;
	ibvl_kern_parse(L, &k, "ibv.lat_send", send_fields, KERN_SEND | KERN_RECV | KERN_SAMPLES);
	one_wr(L, &k);
	int initiator = ibvl_bool_field(L, 1, "initiator", 0);
	return run(L, &k, send_loop, &initiator);
}

/* ---- RDMA write ping-pong polling on memory (ib_write_lat) ---------------- */

struct write_arg {
	int initiator;
	volatile char *post; /* the last byte of the message sent */
	volatile char *poll; /* the last byte of the message the peer writes */
};

static int write_loop(struct ibvl_kern *k, void *arg)
{
	struct write_arg *w = arg;
	long long sent = 0, seen = 0;
	while (sent < k->iters || k->completed < k->iters || seen < k->iters) {
		if (seen < k->iters && !(sent == 0 && w->initiator)) {
			seen++;
			while (*w->poll != (char)seen)
				if (ibvl_kern_tick(k))
					return -1;
			k->received = seen;
		}
		if (sent < k->iters) {
			ibvl_kern_stamp(k);
			*w->post = (char)++sent;
			if (ibvl_kern_post(k))
				return -1;
		}
		if (k->completed < k->iters && ibvl_kern_spin(k, k->scq, &k->completed, sent))
			return -1;
	}
	return 0;
}

/* The MR object in field (required), open. */
static struct ibv_mr *mr_field(lua_State *L, const char *field)
{
	struct ibvl_obj *o = ibvl_obj_field_keep(L, 1, field, &ibvl_mr_class);
	if (o == NULL)
		ibvl_error(L, "field '%s': ibverbs.mr expected, got nil", field);
	return o->ptr;
}

static const char *const write_fields[] = {"qp", "send_cq", "send_wrs", "send_mr", "poll_mr",
                                           "poll_offset", "iters", "initiator", "samples",
                                           "timeout", NULL};

static int l_lat_write(lua_State *L)
{
	struct ibvl_kern k;
	struct write_arg w;
	ibvl_kern_parse(L, &k, "ibv.lat_write", write_fields, KERN_SEND | KERN_SAMPLES);
	one_wr(L, &k);
	w.initiator = ibvl_bool_field(L, 1, "initiator", 0);
	struct ibv_mr *smr = mr_field(L, "send_mr"), *pmr = mr_field(L, "poll_mr");
	lua_Integer off = ibvl_int_field(L, 1, "poll_offset", 0, 0, INT64_MAX);
	const struct ibv_send_wr *wr = &k.swr[0];
	if (wr->opcode != IBV_WR_RDMA_WRITE)
		ibvl_error(L, "field 'send_wrs': an rdma_write WR expected");
	if (wr->num_sge < 1 || wr->sg_list[0].length < 1)
		ibvl_error(L, "field 'send_wrs': the WR needs an SGE of 1 byte or more");
	uint64_t addr = wr->sg_list[0].addr, len = wr->sg_list[0].length;
	uintptr_t base = (uintptr_t)smr->addr;
	if (addr < base || addr - base > smr->length || len > smr->length - (addr - base))
		ibvl_error(L, "field 'send_mr': the WR's SGE is not within it");
	if ((uint64_t)off > pmr->length || len > pmr->length - (uint64_t)off)
		ibvl_error(L, "field 'poll_offset': %d + %d bytes outside poll_mr (%d bytes)", (int)off,
		           (int)len, (int)pmr->length);
	w.post = (volatile char *)(uintptr_t)(addr + len - 1);
	w.poll = (volatile char *)pmr->addr + off + len - 1;
	return run(L, &k, write_loop, &w);
}

/* ---- round trips of one side (ib_read_lat, ib_atomic_lat) ----------------- */

static int rtt_loop(struct ibvl_kern *k, void *arg)
{
	(void)arg;
	for (long long sent = 0; sent < k->iters;) {
		ibvl_kern_stamp(k);
		if (ibvl_kern_post(k) || ibvl_kern_spin(k, k->scq, &k->completed, ++sent))
			return -1;
	}
	return 0;
}

static const char *const rtt_fields[] = {"qp", "send_cq", "send_wrs", "iters", "samples",
                                         "timeout", NULL};

static int l_lat_rtt(lua_State *L)
{
	struct ibvl_kern k;
	ibvl_kern_parse(L, &k, "ibv.lat_rtt", rtt_fields, KERN_SEND | KERN_SAMPLES);
	one_wr(L, &k);
	return run(L, &k, rtt_loop, NULL);
}

void ibvl_open_lat(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"lat_send", l_lat_send}, {"lat_write", l_lat_write}, {"lat_rtt", l_lat_rtt}, {NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
