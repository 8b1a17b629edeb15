/*
 * kernels.c: the loops that run the measurement kernels (kernel.h): one
 * end (ibv.lat_send, lat_write, lat_rtt, bw, or ibv.kernels with one table)
 * in a loop of its own that calls its step and busy polls only the CQs (or
 * the memory) it waits on (a latency step polls them in place, through
 * ibvl_kern_wait, so its one call runs the whole end); several at once
 * (ibv.kernels), or one with event = true, in the general loop, each at its
 * own pace, busy polling the CQs its ends wait on (or, when every running
 * end has event = true, sleeping on their completion channels; the events
 * taken are acknowledged at once, a channel's other CQs' too); each end
 * under its own time limit, all under SIGINT.
 *
 *   local f = ibv.kernels{
 *     {kernel = "lat_send", qp = out_qp, send_cq = cq, recv_cq = cq, send_wrs = ping,
 *      recv_wrs = pong_rx, iters = 1000, initiator = true, samples = s1},
 *     {kernel = "lat_send", qp = in_qp, send_cq = cq, recv_cq = cq, send_wrs = echo,
 *      recv_wrs = ping_rx, iters = 1000, samples = s2},
 *     {kernel = "bw", qp = out_qp, send_cq = cq, send_wrs = wl, iters = 8192, after = {1, 2}},
 *   }
 *   f[1].seconds; f[2].error, f[2].errno   -- one figures table per end
 *
 * Each table is what the kernel of its kind ("lat_send", "lat_write",
 * "lat_rtt", "bw") takes, with that field added, and after: the index (or
 * a list of indices) of earlier ends that must be over (finished or
 * stopped) before this one starts; its time limit counts from its start
 * (with prepost, its receives go in then), or with within (the index of an
 * earlier end) from that end's start: ends that follow one another share one
 * time limit, and one that starts past it stops at once.  An end that fails (a completion
 * with an error, a failed post, its time limit) stops alone and its figures
 * carry error and errno; the others run on.  SIGINT stops all
 * and raises "ibv.kernels: interrupted".  Completions go to their end by QP
 * number, so ends may share a CQ that reports it (every plain CQ does); a
 * QP belongs to one end, or to ends that follow one another (after,
 * directly or through others); a samples buffer to one end only.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <string.h>

#include "measure/kernel.h"
#include "base/wait.h"

/* Adds cq to the set cqs[0..*n) unless it is there. */
static void add_cq(struct ibvl_cq **cqs, int *n, struct ibvl_cq *cq)
{
	if (cq == NULL)
		return;
	for (int i = 0; i < *n; i++)
		if (cqs[i] == cq)
			return;
	cqs[(*n)++] = cq;
}

/* Whether the ends k follows (after) are all over. */
static int ready(const struct ibvl_kern *ks, const struct ibvl_kern *k)
{
	for (uint64_t m = k->after; m != 0; m &= m - 1)
		if (!ks[__builtin_ctzll(m)].over)
			return 0;
	return 1;
}

/* End k starts now; its time limit from the start of the end it counts within. */
static void start_end(struct ibvl_kern *ks, struct ibvl_kern *k, double now)
{
	ibvl_kern_start(k, now);
	if (k->within >= 0 && ks[k->within].started && !isinf(k->timeout))
		k->deadline = ks[k->within].t0 + k->timeout;
}

/* Every live end stepped (an end whose predecessors are over started
 * first); the CQs they wait on in cqs; the ends still live. */
static int step_all(struct ibvl_kern *ks, int n, struct ibvl_cq **cqs, int *ncq)
{
	int live = 0;
	*ncq = 0;
	for (int i = 0; i < n; i++) {
		struct ibvl_kern *k = &ks[i];
		if (k->over)
			continue;
		if (!k->started) {
			if (!ready(ks, k)) {
				live++;
				continue;
			}
			start_end(ks, k, ibvl_monotonic());
			if (ibvl_monotonic() > k->deadline)
				ibvl_kern_fail(k, KERN_TIME, ETIMEDOUT);
		}
		if ((k->stop != KERN_OK ? KERN_STOPPED : k->type->step(k)) != KERN_MORE) {
			k->over = 1;
			continue;
		}
		live++;
		add_cq(cqs, ncq, k->wait[0]);
		add_cq(cqs, ncq, k->wait[1]);
	}
	return live;
}

/* The live ends on cq (any cq: NULL) stopped for why. */
static void stop_ends(struct ibvl_kern *ks, int n, const struct ibvl_cq *cq, int why, int err)
{
	for (int i = 0; i < n; i++)
		if (!ks[i].over && ks[i].stop == KERN_OK && (ks[i].started || cq == NULL) &&
		    (cq == NULL || ks[i].scq == cq || ks[i].rcq == cq))
			ibvl_kern_fail(&ks[i], why, err);
}

/* One poll of cq, the completions handed to their ends (a CQ that fails
 * stops its ends); the count polled. */
static inline int poll_cq(struct ibvl_kern *ks, int n, struct ibvl_cq *cq)
{
	int m = n == 1 ? ibvl_kern_poll1(ks, cq) : ibvl_kern_poll(ks, n, cq);
	if (m >= 0)
		return m;
	stop_ends(ks, n, cq, KERN_POLL, -m);
	return 0;
}

/* One poll of each of cqs (poll_cq); the count polled. */
static int poll_cqs(struct ibvl_kern *ks, int n, struct ibvl_cq **cqs, int ncq)
{
	int got = 0;
	for (int c = 0; c < ncq; c++)
		got += poll_cq(ks, n, cqs[c]);
	return got;
}

/* Whether every running end sleeps on events (event) and waits on a CQ. */
static int all_sleep(const struct ibvl_kern *ks, int n)
{
	for (int i = 0; i < n; i++)
		if (ks[i].started && !ks[i].over &&
		    (!ks[i].event || (ks[i].wait[0] == NULL && ks[i].wait[1] == NULL)))
			return 0;
	return 1;
}

/* Sleeps until a completion comes to one of cqs (at most 50 ms: SIGINT and
 * the time limits are looked at between sleeps): every CQ armed, polled
 * once more (a completion may have come before the arming), then poll(2) on
 * their channels; the events taken are acknowledged at once.  The count of
 * completions that second poll found. */
static int sleep_events(struct ibvl_kern *ks, int n, struct ibvl_cq **cqs, int ncq)
{
	struct pollfd fds[2 * KERN_MAX_ENDS];
	struct ibv_comp_channel *chs[2 * KERN_MAX_ENDS];
	int nfd = 0;
	for (int c = 0; c < ncq; c++)
		ibv_req_notify_cq(cqs[c]->o.ptr, 0);
	int got = poll_cqs(ks, n, cqs, ncq);
	if (got > 0)
		return got;
	for (int c = 0; c < ncq; c++) {
		struct ibv_comp_channel *ch = ((struct ibv_cq *)cqs[c]->o.ptr)->channel;
		int seen = 0;
		for (int j = 0; j < nfd; j++)
			seen |= chs[j] == ch;
		if (!seen) {
			chs[nfd] = ch;
			fds[nfd].fd = ch->fd;
			fds[nfd++].events = POLLIN;
		}
	}
	if (poll(fds, (nfds_t)nfd, 50) <= 0)
		return 0;
	for (int j = 0; j < nfd; j++) {
		struct ibv_cq *cq;
		void *ctx;
		if ((fds[j].revents & POLLIN) && ibv_get_cq_event(chs[j], &cq, &ctx) == 0)
			ibv_ack_cq_events(cq, 1);
	}
	return 0;
}

/* The CQs end k's last step waits on into cqs (at most two); their count. */
static int waits_of(const struct ibvl_kern *k, struct ibvl_cq **cqs)
{
	int ncq = 0;
	add_cq(cqs, &ncq, k->wait[0]);
	add_cq(cqs, &ncq, k->wait[1]);
	return ncq;
}

/* SIGINT pending: every end stopped (1: the loop ends). */
static int interrupted(struct ibvl_kern *ks, int n)
{
	if (!ibvl_sigint_pending())
		return 0;
	stop_ends(ks, n, NULL, KERN_SIGINT, EINTR);
	return 1;
}

/* The running ends past their time limit stopped. */
static void expire(struct ibvl_kern *ks, int n)
{
	double now = ibvl_monotonic();
	for (int i = 0; i < n; i++)
		if (ks[i].started && !ks[i].over && ks[i].stop == KERN_OK && now > ks[i].deadline)
			ibvl_kern_fail(&ks[i], KERN_TIME, ETIMEDOUT);
}

/* Several ends (or one that sleeps on events): every pass steps them all. */
static void loop(struct ibvl_kern *ks, int n)
{
	struct ibvl_cq *cqs[2 * KERN_MAX_ENDS];
	unsigned int spins = 0;
	int ncq;
	while (step_all(ks, n, cqs, &ncq) > 0) {
		if (poll_cqs(ks, n, cqs, ncq) > 0)
			continue;
		if (interrupted(ks, n))
			return;
		int sleeps = ncq > 0 && all_sleep(ks, n);
		if (sleeps && sleep_events(ks, n, cqs, ncq) > 0)
			continue;
		if (!sleeps && (++spins & 255) != 0)
			continue;
		expire(ks, n);
	}
}

/* An empty poll of an end alone: SIGINT and (once in 256) the time limit
 * looked at; whether it stopped. */
static int idle1(struct ibvl_kern *k, unsigned int *spins)
{
	if (interrupted(k, 1))
		return 1;
	if ((++*spins & 255) == 0)
		expire(k, 1);
	return k->stop != KERN_OK;
}

int ibvl_kern_wait(struct ibvl_kern *k, struct ibvl_cq *cq, const long long *count, long long want)
{
	unsigned int spins = 0;
	if (!k->alone) {
		k->wait[0] = cq;
		k->wait[1] = NULL;
		return KERN_MORE;
	}
	while (*count < want) {
		if (k->stop != KERN_OK || (poll_cq(k, 1, cq) == 0 && idle1(k, &spins)))
			return KERN_STOPPED;
	}
	return k->stop == KERN_OK ? KERN_READY : KERN_STOPPED;
}

int ibvl_kern_wait_byte(struct ibvl_kern *k, const volatile char *b, char want)
{
	unsigned int spins = 0;
	if (!k->alone) {
		k->wait[0] = k->wait[1] = NULL;
		return KERN_MORE;
	}
	while (*b != want)
		if (idle1(k, &spins))
			return KERN_STOPPED;
	return KERN_READY;
}

/* One end alone, busy polling (ibv.lat_send & co., ibv.kernels with one
 * table): its step called directly (a latency step waits in place,
 * ibvl_kern_wait), then only the CQs it waits on polled until something
 * comes (a step that waits on memory, or on nothing, is called again at
 * once); SIGINT and the time limit as loop() has them. */
static void loop1(struct ibvl_kern *k)
{
	struct ibvl_cq *cqs[2];
	unsigned int spins = 0;
	while (k->stop == KERN_OK && k->type->step(k) == KERN_MORE) {
		int ncq = waits_of(k, cqs);
		while (k->stop == KERN_OK &&
		       (ncq == 1 ? poll_cq(k, 1, cqs[0]) : poll_cqs(k, 1, cqs, ncq)) == 0)
			if (idle1(k, &spins) || ncq == 0)
				break;
	}
	k->over = 1;
}

/* The ends read (ks[0..n)): checked again, run, their figures pushed. */
static int run(lua_State *L, struct ibvl_kern *ks, int n, int multi, const char *name)
{
	struct ibvl_sigint sig;
	struct ibvl_clock clock;
	for (int i = 0; i < n; i++) {
		ibvl_kern_recheck(L, &ks[i]);
		if (ks[i].type->start != NULL)
			ks[i].type->start(&ks[i]);
	}
	ibvl_sigint_begin(&sig);
	ibvl_clock_start(&clock);
	for (int i = 0; i < n; i++)
		if (ks[i].after == 0)
			start_end(ks, &ks[i], clock.s0);
	ks[0].alone = n == 1 && !ks[0].event;
	if (ks[0].alone)
		loop1(&ks[0]);
	else
		loop(ks, n);
	double scale = ibvl_clock_scale(&clock);
	if (ibvl_sigint_end(&sig)) {
		for (int i = 0; i < n; i++)
			ibvl_kern_restore(&ks[i]);
		return ibvl_interrupted(L, name);
	}
	if (!multi)
		return ibvl_kern_push(L, &ks[0], scale, clock.s1 - clock.s0, 0);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		ibvl_kern_push(L, &ks[i], scale, clock.s1 - clock.s0, 1);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

int ibvl_kern_run1(lua_State *L, const struct ibvl_kern_type *t)
{
	struct ibvl_kern k;
	struct ibvl_guard g;
	luaL_checktype(L, 1, LUA_TTABLE);
	ibvl_guard_begin(&g);
	ibvl_kern_parse(L, &k, 1, t, 0);
	ibvl_guard_end(L, &g); /* raises when an object read was closed meanwhile */
	return run(L, &k, 1, 0, t->name);
}

static const struct ibvl_kern_type *const types[] = {&ibvl_kern_lat_send, &ibvl_kern_lat_write,
                                                     &ibvl_kern_lat_rtt, &ibvl_kern_bw, NULL};

/* The kernel type the table at idx names in its field kernel. */
static const struct ibvl_kern_type *kind(lua_State *L, int idx)
{
	ibvl_getfield(L, idx, "kernel");
	const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
	for (int i = 0; s != NULL && types[i] != NULL; i++)
		if (strcmp(types[i]->kind, s) == 0) {
			lua_pop(L, 1);
			return types[i];
		}
	ibvl_error(L, "field 'kernel': lat_send, lat_write, lat_rtt or bw expected, got %s",
	           s != NULL ? s : luaL_typename(L, -1));
	return NULL;
}

/* No QP in two ends, unless one follows the other (after, directly or
 * through others); no samples buffer in two ends; a CQ that does not report
 * qp_num serves one end only. */
static void check_shared(lua_State *L, const struct ibvl_kern *ks, int n)
{
	uint64_t follows[KERN_MAX_ENDS]; /* bit j of follows[i]: end i starts after end j is over */
	for (int i = 0; i < n; i++) {
		follows[i] = ks[i].after;
		for (uint64_t m = ks[i].after; m != 0; m &= m - 1)
			follows[i] |= follows[__builtin_ctzll(m)];
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < i; j++) {
			const struct ibvl_kern *a = &ks[i], *b = &ks[j];
			if ((a->qpn == b->qpn || a->qpn == b->rqpn || a->rqpn == b->qpn ||
			     a->rqpn == b->rqpn) && !(follows[i] & (UINT64_C(1) << j)))
				ibvl_error(L, "kernel %d: a QP of kernel %d's too (each QP belongs to one)",
				           i + 1, j + 1);
			if (a->samples != NULL && a->samples == b->samples) /* each turns its own to seconds */
				ibvl_error(L, "kernel %d: field 'samples': kernel %d's too (each end needs its own)",
				           i + 1, j + 1);
			const struct ibvl_cq *cq[4] = {a->scq, a->rcq, b->scq, b->rcq};
			for (int x = 0; x < 2; x++)
				for (int y = 2; y < 4; y++)
					if (cq[x] != NULL && cq[x] == cq[y] && cq[x]->cqx != NULL &&
					    !(cq[x]->wc_flags & IBV_WC_EX_WITH_QP_NUM))
						ibvl_error(L, "kernel %d: shares a CQ with kernel %d, a cq_ex "
						              "made without wc_flags 'qp_num'", i + 1, j + 1);
		}
}

/* One index of field after for end i (0-based): an end before it. */
static uint64_t after_bit(lua_State *L, int vidx, int i)
{
	lua_Integer j = lua_isinteger(L, vidx) ? lua_tointeger(L, vidx) : 0;
	if (i == 0)
		ibvl_error(L, "field 'after': the first kernel has none before it");
	if (j < 1 || j > i)
		ibvl_error(L, "field 'after': the index of a kernel before this one (1 to %d) expected, "
		              "got %s", i, lua_type(L, vidx) == LUA_TNUMBER ? lua_tostring(L, vidx)
		                                                            : luaL_typename(L, vidx));
	return UINT64_C(1) << (j - 1);
}

/* Field within: the index of an earlier end (0-based), or -1 when absent. */
static int within_field(lua_State *L, int idx, int i)
{
	ibvl_getfield(L, idx, "within");
	int w = -1;
	if (!lua_isnil(L, -1)) {
		lua_Integer j = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
		if (i == 0)
			ibvl_error(L, "field 'within': the first kernel has none before it");
		if (j < 1 || j > i)
			ibvl_error(L, "field 'within': the index of a kernel before this one (1 to %d) expected, "
			              "got %s", i, lua_type(L, -1) == LUA_TNUMBER ? lua_tostring(L, -1)
			                                                          : luaL_typename(L, -1));
		w = (int)j - 1;
	}
	lua_pop(L, 1);
	return w;
}

/* Field after: an index or a list of indices of earlier ends; their bits. */
static uint64_t after_field(lua_State *L, int idx, int i)
{
	uint64_t mask = 0;
	ibvl_getfield(L, idx, "after");
	int v = lua_gettop(L);
	if (lua_istable(L, v)) {
		for (int x = 1;; x++) {
			lua_rawgeti(L, v, x);
			if (lua_isnil(L, -1))
				break;
			mask |= after_bit(L, lua_gettop(L), i);
			lua_pop(L, 1);
		}
		lua_pop(L, 1); /* the nil */
	} else if (!lua_isnil(L, v)) {
		mask = after_bit(L, v, i);
	}
	lua_pop(L, 1);
	return mask;
}

static int l_kernels(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
	if (n < 1 || n > KERN_MAX_ENDS)
		return ibvl_argerror(L, 1, "kernels", "1 to %d kernel tables expected, got %d",
		                     KERN_MAX_ENDS, (int)n);
	/* allocated before the reading: no collection inside the guard's window */
	struct ibvl_kern *ks = lua_newuserdata(L, (size_t)n * sizeof *ks);
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	for (int i = 0; i < (int)n; i++) {
		int saved = ibvl_path_push("#kernel", i + 1);
		lua_rawgeti(L, 1, i + 1); /* kept on the stack */
		int idx = lua_gettop(L);
		if (!lua_istable(L, idx))
			ibvl_error(L, "table expected, got %s", luaL_typename(L, idx));
		ibvl_kern_parse(L, &ks[i], idx, kind(L, idx), 1);
		ks[i].after = after_field(L, idx, i);
		ks[i].within = within_field(L, idx, i);
		ibvl_path_pop(saved);
	}
	ibvl_guard_end(L, &g);
	check_shared(L, ks, (int)n);
	return run(L, ks, (int)n, 1, "ibv.kernels");
}

void ibvl_open_kernels(lua_State *L)
{
	lua_pushcfunction(L, l_kernels);
	lua_setfield(L, -2, "kernels");
}
