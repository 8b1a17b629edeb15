/*
 * wait.h: bounded, interruptible waits (wait.c).  Above err.h and args.h.
 */
#ifndef IBVL_WAIT_H
#define IBVL_WAIT_H

#include <poll.h>
#include <signal.h>

#include "base/compat.h"

/* ---- bounded, interruptible waits (wait.c) ------------------------------- */
struct ibvl_sigint {
	struct sigaction old; /* the handler in place before ibvl_sigint_begin */
	int installed;
};

void ibvl_sigint_begin(struct ibvl_sigint *s);
int ibvl_sigint_pending(void);
int ibvl_sigint_end(struct ibvl_sigint *s);
int ibvl_interrupted(lua_State *L, const char *call);
void ibvl_open_wait(lua_State *L); /* ibv.now */
double ibvl_monotonic(void); /* seconds, CLOCK_MONOTONIC */
double ibvl_opt_timeout(lua_State *L, int arg, double def);
double ibvl_timeout_field(lua_State *L, int idx, const char *field, double def);
int ibvl_poll_fd(int fd, double timeout);
/* One ppoll of fds, at most left seconds, SIGINT unblocked only inside it
 * (call it between ibvl_sigint_begin and _end): ppoll's result, 0 at once
 * when SIGINT came already. */
int ibvl_ppoll(struct pollfd *fds, nfds_t n, double left);
/* Waits until fd is readable (timeout argument in seconds; nil or math.huge:
 * forever): 1 readable, 0 timed out; raises "<call>: interrupted" on SIGINT. */
int ibvl_wait_fd(lua_State *L, int fd, int timeout_arg, const char *call);

#endif
