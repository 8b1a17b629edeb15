/*
 * wait.c: bounded, interruptible waiting, shared by every call that can block.
 *
 *   double t = ibvl_opt_timeout(L, 2, HUGE_VAL);  -- nil: the default; NaN, < 0 raise
 *   int r = ibvl_poll_fd(fd, t);                  -- 1 readable, 0 timed out, -1 SIGINT
 *   if (r < 0) return ibvl_interrupted(L, "ibv_get_cq_event");
 *
 *   struct ibvl_sigint s;                         -- a C loop (no syscall to break):
 *   ibvl_sigint_begin(&s);
 *   while (...) { ...; if (ibvl_sigint_pending()) break; }
 *   if (ibvl_sigint_end(&s)) return ibvl_interrupted(L, "transfer");
 *
 * SIGINT: while a call waits, a handler of this module replaces the previous
 * one (restored before the call returns, also when it raises); it only sets a
 * flag.  The wait itself runs with SIGINT blocked except inside ppoll, which
 * unblocks it atomically, so a signal can never slip in between the flag
 * check and the sleep.  A SIGINT the process ignores (SIG_IGN) stays ignored,
 * and one the thread blocks stays blocked.  An interrupted call raises the Lua
 * error "<call>: interrupted" after restoring everything.
 *
 * A synchronous rdma_cm id (no event channel) blocks inside librdmacm, which
 * reads its private channel until the call's event comes (ucma_complete).
 * ibvl_cm_sync_prepare makes that channel non-blocking, so the call returns
 * EAGAIN once its command is written; ibvl_cm_sync_result then waits here for
 * the event and takes it as ucma_complete does (id->event, status to errno).
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>

#include "ibvl.h"

static volatile sig_atomic_t got_sigint;

static void on_sigint(int sig)
{
	(void)sig;
	got_sigint = 1;
}

void ibvl_sigint_begin(struct ibvl_sigint *s)
{
	struct sigaction sa;
	got_sigint = 0;
	s->installed = 0;
	if (sigaction(SIGINT, NULL, &s->old) != 0 || s->old.sa_handler == SIG_IGN)
		return;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_sigint; /* no SA_RESTART: a blocking syscall returns EINTR */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGINT, &sa, NULL) == 0)
		s->installed = 1;
}

int ibvl_sigint_pending(void)
{
	return got_sigint != 0;
}

int ibvl_sigint_end(struct ibvl_sigint *s)
{
	if (s->installed)
		sigaction(SIGINT, &s->old, NULL);
	s->installed = 0;
	int hit = got_sigint != 0;
	got_sigint = 0;
	return hit;
}

int ibvl_interrupted(lua_State *L, const char *call)
{
	return luaL_error(L, "%s: interrupted", call);
}

static double mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double ibvl_opt_timeout(lua_State *L, int arg, double def)
{
	if (lua_isnoneornil(L, arg))
		return def;
	lua_Number t = luaL_checknumber(L, arg);
	if (t != t)
		return luaL_argerror(L, arg, "timeout in seconds expected, got NaN");
	if (t < 0)
		return luaL_argerror(L, arg, "timeout in seconds expected, got a negative number");
	return (double)t;
}

double ibvl_timeout_field(lua_State *L, int idx, const char *field, double def)
{
	ibvl_getfield(L, idx, field);
	double t = def;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TNUMBER)
			ibvl_error(L, "field '%s': timeout in seconds expected, got %s", field,
			           luaL_typename(L, -1));
		t = (double)lua_tonumber(L, -1);
		if (t != t)
			ibvl_error(L, "field '%s': timeout in seconds expected, got NaN", field);
		if (t < 0)
			ibvl_error(L, "field '%s': timeout in seconds expected, got a negative number",
			           field);
	}
	lua_pop(L, 1);
	return t;
}

/* One ppoll of at most `left` seconds with SIGINT unblocked only inside it. */
static int poll_once(int fd, double left)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int rc = 0;
	if (!got_sigint) {
		if (left > 3600)
			left = 3600;
		struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
		rc = ppoll(&p, 1, &ts, &old);
	}
	int err = errno;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	errno = err;
	return rc;
}

int ibvl_poll_fd(int fd, double timeout)
{
	struct ibvl_sigint s;
	ibvl_sigint_begin(&s);
	double deadline = isinf(timeout) ? HUGE_VAL : mono() + timeout;
	int ready = 0;
	for (;;) {
		double left = isinf(deadline) ? 3600 : deadline - mono();
		int rc = poll_once(fd, left > 0 ? left : 0);
		if (rc > 0) {
			ready = 1;
			break;
		}
		if (got_sigint || (rc == 0 && left <= 0))
			break;
		if (rc < 0 && errno != EINTR)
			break; /* a bad fd: let the call that follows report it */
		if (rc == 0 && !isinf(deadline) && mono() >= deadline)
			break;
	}
	if (ibvl_sigint_end(&s))
		return -1;
	return ready;
}

/* ---- synchronous rdma_cm ids ---------------------------------------------- */
void ibvl_cm_sync_prepare(struct ibvl_cm_id *id)
{
	struct rdma_cm_id *cid = id->o.ptr;
	if (id->chan_slot >= 0 || cid->channel == NULL)
		return;
	int fl = fcntl(cid->channel->fd, F_GETFL);
	if (fl != -1 && !(fl & O_NONBLOCK))
		fcntl(cid->channel->fd, F_SETFL, fl | O_NONBLOCK);
}

int ibvl_cm_sync_result(lua_State *L, struct ibvl_cm_id *id, const char *call, int rc,
                        double timeout)
{
	struct rdma_cm_id *cid = id->o.ptr;
	if (rc == 0 || id->chan_slot >= 0 || errno != EAGAIN)
		return ibvl_result(L, call, rc);
	/* the command went out; its event is still to come */
	double deadline = isinf(timeout) ? HUGE_VAL : mono() + timeout;
	for (;;) {
		double left = isinf(deadline) ? HUGE_VAL : deadline - mono();
		int r = ibvl_poll_fd(cid->channel->fd, left > 0 ? left : 0);
		if (r < 0)
			return ibvl_interrupted(L, call);
		if (r == 0)
			return ibvl_fail(L, call, ETIMEDOUT);
		if (cid->event != NULL) { /* as ucma_complete: the previous one is acknowledged */
			rdma_ack_cm_event(cid->event);
			cid->event = NULL;
		}
		if (rdma_get_cm_event(cid->channel, &cid->event) == 0)
			break;
		if (errno != EAGAIN) /* EAGAIN: librdmacm consumed an event of its own */
			return ibvl_fail(L, call, errno);
	}
	int status = cid->event->status;
	if (status == 0)
		return ibvl_result(L, call, 0);
	if (cid->event->event == RDMA_CM_EVENT_REJECTED)
		return ibvl_fail(L, call, ECONNREFUSED);
	return ibvl_fail(L, call, status < 0 ? -status : status);
}
