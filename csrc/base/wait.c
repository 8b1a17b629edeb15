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
 *   ibvl_sigint_begin(&s);                        -- several fds (spawn.c):
 *   rc = ibvl_ppoll(fds, n, left);                -- one ppoll; loop until done or
 *   if (ibvl_sigint_pending()) ...                -- SIGINT, then ibvl_sigint_end
 *
 * SIGINT: while a call waits, a handler of this module replaces the previous
 * one (restored before the call returns, also when it raises); it only sets a
 * flag.  The wait itself runs with SIGINT blocked except inside ppoll, which
 * unblocks it atomically, so a signal can never slip in between the flag
 * check and the sleep.  A SIGINT the process ignores (SIG_IGN) stays ignored,
 * and one the thread blocks stays blocked.  An interrupted call raises the Lua
 * error "<call>: interrupted" after restoring everything.
 */
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "base/args.h"
#include "base/err.h"
#include "base/wait.h"

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

double ibvl_monotonic(void)
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

/* One ppoll of fds for at most `left` seconds (an hour at most), with SIGINT
 * unblocked only inside it: between ibvl_sigint_begin and ibvl_sigint_end, a
 * SIGINT can never slip in between the flag check and the sleep.  ppoll's
 * result (errno kept); 0 at once when SIGINT came already. */
int ibvl_ppoll(struct pollfd *fds, nfds_t n, double left)
{
	sigset_t block, old;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	pthread_sigmask(SIG_BLOCK, &block, &old);
	int rc = 0;
	if (!got_sigint) {
		if (left > 3600)
			left = 3600;
		if (!(left > 0))
			left = 0;
		struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
		rc = ppoll(fds, n, &ts, &old);
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
	double deadline = isinf(timeout) ? HUGE_VAL : ibvl_monotonic() + timeout;
	int ready = 0;
	for (;;) {
		double left = isinf(deadline) ? 3600 : deadline - ibvl_monotonic();
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int rc = ibvl_ppoll(&p, 1, left > 0 ? left : 0);
		if (rc > 0) {
			ready = 1;
			break;
		}
		if (got_sigint || (rc == 0 && left <= 0))
			break;
		if (rc < 0 && errno != EINTR)
			break; /* a bad fd: let the call that follows report it */
		if (rc == 0 && !isinf(deadline) && ibvl_monotonic() >= deadline)
			break;
	}
	if (ibvl_sigint_end(&s))
		return -1;
	return ready;
}

/* Waits until fd is readable.  The timeout argument is in seconds (nil or
 * math.huge: forever; NaN or negative raise).  Returns 1 when readable, 0 on
 * timeout; raises "<call>: interrupted" on SIGINT (wait.c). */
int ibvl_wait_fd(lua_State *L, int fd, int timeout_arg, const char *call)
{
	double t = ibvl_opt_timeout(L, timeout_arg, HUGE_VAL); /* nil, math.huge: forever */
	int r = ibvl_poll_fd(fd, t);
	if (r < 0)
		ibvl_interrupted(L, call);
	return r > 0;
}

/* ibv.now(): a monotonic clock in seconds, for timing loops */
static int l_now(lua_State *L)
{
	lua_pushnumber(L, ibvl_monotonic());
	return 1;
}

void ibvl_open_wait(lua_State *L)
{
	lua_pushcfunction(L, l_now);
	lua_setfield(L, -2, "now");
}
