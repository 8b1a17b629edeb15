/*
 * lat.c: latency kernels, the ping-pong of perftest's ib_send_lat and
 * ib_write_lat and the round trips of ib_read_lat and ib_atomic_lat, each
 * loop entirely in C with busy polling (kernel.h: the table, time limit,
 * SIGINT, figures; kernels.c: the loop, alone or several in ibv.kernels).
 *
 *   local s = ibv.samples(999)
 *   local f = assert(ibv.lat_send{qp = qp, send_cq = scq, recv_cq = rcq,
 *     send_wrs = sl, recv_wrs = rl, iters = 1000, warmup = 1, initiator = true, samples = s})
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
 * iterations give iters - 1 samples, as perftest counts them.  warmup (0)
 * round trips run first, unstamped (both sides give the same; sent and
 * received count them too): a first ping that waits for its peer to arrive
 * stays out of the samples.  Nothing is allocated in the loop.
 */
#include "measure/kernel.h"

/* where a ping-pong step waits (k->phase; P_TOP: it starts an iteration) */
enum { P_TOP, P_WAIT_PEER, P_WAIT_SENT };

/* Every send WR signaled (the list's own flags come back after the run). */
static void signal_all(struct ibvl_kern *k)
{
	for (int i = 0; i < k->nsend; i++)
		k->swr[i].send_flags |= IBV_SEND_SIGNALED;
}

static void one_wr(lua_State *L, const struct ibvl_kern *k)
{
	if (k->nsend != 1)
		ibvl_error(L, "field 'send_wrs': one WR expected, got %d", k->nsend);
}

/* Posts the next message, stamped unless a warmup one (lat_write: its
 * number modulo 256 into the last byte of the message first): 0, or -1
 * (stop set). */
static int post_next(struct ibvl_kern *k)
{
	if (k->sent >= k->warmup)
		ibvl_kern_stamp(k);
	k->sent++;
	if (k->post_byte != NULL)
		*k->post_byte = (char)k->sent;
	return ibvl_kern_post(k);
}

/* The peer's message k->wanted arrived: lat_send, a receive completion
 * (ibvl_kern_wait on the receive CQ); lat_write, the last byte of poll_mr
 * turning to its number. */
static int peer_came(struct ibvl_kern *k)
{
	int r = KERN_READY;
	if (k->poll_byte == NULL)
		return k->received < k->wanted ? ibvl_kern_wait(k, k->rcq, &k->received, k->wanted) : r;
	if (*k->poll_byte != (char)k->wanted)
		r = ibvl_kern_wait_byte(k, k->poll_byte, (char)k->wanted);
	if (r == KERN_READY)
		k->received = k->wanted;
	return r;
}

/* ---- ping-pong: send/recv (ib_send_lat), RDMA write polling memory (ib_write_lat) */

/* Each iteration: wait for the peer's message (not before the initiator's
 * first send), then send one and wait for its completion.  A call that
 * returned from a wait (several ends) resumes there: the switch jumps back
 * into the loop. */
static int pingpong_step(struct ibvl_kern *k)
{
	int r;
	switch (k->phase) {
	case P_WAIT_PEER:
		goto wait_peer;
	case P_WAIT_SENT:
		goto wait_sent;
	default:
		break;
	}
	for (;;) {
		if (k->sent >= k->iters && k->received >= k->iters)
			return KERN_DONE;
		if (k->received < k->iters && !(k->sent == 0 && k->initiator)) {
			k->wanted++; /* lat_send: received may be ahead (an end that follows another on its QP) */
			k->phase = P_WAIT_PEER;
		wait_peer:
			if ((r = peer_came(k)) != KERN_READY)
				return r;
		}
		if (k->sent < k->iters) {
			if (post_next(k) < 0)
				return KERN_STOPPED;
			k->phase = P_WAIT_SENT;
		wait_sent:
			if (k->completed < k->sent &&
			    (r = ibvl_kern_wait(k, k->scq, &k->completed, k->sent)) != KERN_READY)
				return r;
		}
	}
}

static void read_send(lua_State *L, struct ibvl_kern *k, int idx)
{
	one_wr(L, k);
	k->initiator = ibvl_bool_field(L, idx, "initiator", 0);
	k->warmup = ibvl_int_field(L, idx, "warmup", 0, 0, INT32_MAX);
	k->iters += k->warmup; /* both sides run them; no stamp, no sample */
	k->recv_iters = k->iters;
}

static const char *const send_fields[] = {"qp", "send_cq", "send_wrs", "recv_cq", "recv_wrs", "prepost",
                                          "iters", "warmup", "initiator", "samples", "timeout", NULL};

const struct ibvl_kern_type ibvl_kern_lat_send = {
	"ibv.lat_send", "lat_send", send_fields, KERN_SEND | KERN_RECV | KERN_SAMPLES,
	read_send, signal_all, pingpong_step,
};

/* ---- lat_write's fields ---------------------------------------------------- */

/* The MR object in field (required), open. */
static struct ibv_mr *mr_field(lua_State *L, int idx, const char *field)
{
	struct ibvl_obj *o = ibvl_obj_field_keep(L, idx, field, &ibvl_mr_class);
	if (o == NULL)
		ibvl_error(L, "field '%s': ibverbs.mr expected, got nil", field);
	return o->ptr;
}

static void read_write(lua_State *L, struct ibvl_kern *k, int idx)
{
	read_send(L, k, idx);
	if (k->event)
		ibvl_error(L, "field 'event': lat_write polls memory, it has no event to sleep on");
	struct ibv_mr *smr = mr_field(L, idx, "send_mr"), *pmr = mr_field(L, idx, "poll_mr");
	lua_Integer off = ibvl_int_field(L, idx, "poll_offset", 0, 0, INT64_MAX);
	const struct ibv_send_wr *wr = &k->swr[0];
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
	k->post_byte = (volatile char *)(uintptr_t)(addr + len - 1);
	k->poll_byte = (volatile char *)pmr->addr + off + len - 1;
}

static const char *const write_fields[] = {"qp", "send_cq", "send_wrs", "send_mr", "poll_mr",
                                           "poll_offset", "iters", "warmup", "initiator",
                                           "samples", "timeout", NULL};

const struct ibvl_kern_type ibvl_kern_lat_write = {
	"ibv.lat_write", "lat_write", write_fields, KERN_SEND | KERN_SAMPLES,
	read_write, signal_all, pingpong_step,
};

/* ---- round trips of one side (ib_read_lat, ib_atomic_lat) ----------------- */

/* Each iteration: post, wait for the completion. */
static int rtt_step(struct ibvl_kern *k)
{
	int r;
	for (;;) {
		if (k->completed < k->sent &&
		    (r = ibvl_kern_wait(k, k->scq, &k->completed, k->sent)) != KERN_READY)
			return r;
		if (k->sent >= k->iters)
			return KERN_DONE;
		if (post_next(k) < 0)
			return KERN_STOPPED;
	}
}

static const char *const rtt_fields[] = {"qp", "send_cq", "send_wrs", "iters", "samples",
                                         "timeout", NULL};

static void read_rtt(lua_State *L, struct ibvl_kern *k, int idx)
{
	(void)idx;
	one_wr(L, k);
}

const struct ibvl_kern_type ibvl_kern_lat_rtt = {
	"ibv.lat_rtt", "lat_rtt", rtt_fields, KERN_SEND | KERN_SAMPLES, read_rtt, signal_all, rtt_step,
};

static int l_lat_send(lua_State *L) { return ibvl_kern_run1(L, &ibvl_kern_lat_send); }
static int l_lat_write(lua_State *L) { return ibvl_kern_run1(L, &ibvl_kern_lat_write); }
static int l_lat_rtt(lua_State *L) { return ibvl_kern_run1(L, &ibvl_kern_lat_rtt); }

void ibvl_open_lat(lua_State *L)
{
	static const luaL_Reg fns[] = {
		{"lat_send", l_lat_send}, {"lat_write", l_lat_write}, {"lat_rtt", l_lat_rtt}, {NULL, NULL},
	};
	luaL_setfuncs(L, fns, 0);
}
