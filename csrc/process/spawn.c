/*
 * spawn.c: ibv.spawn, a program run from an argument vector, never a shell.
 *
 *   local r = assert(ibv.spawn({"scontrol", "show", "node", "n1"}, {timeout = 10}))
 *   r.status, r.signal       -- its exit code, or the signal that ended it (the other nil)
 *   r.stdout, r.stderr       -- what it wrote on each, apart
 *   r.timed_out              -- true: killed (SIGKILL) at the time limit
 *   ibv.spawn({"gnuplot"}, {stdin = script})  -- stdin written to it (else /dev/null)
 *   --> nil, "spawn gnuplot: No such file or directory", 2  -- it could not start
 *
 * argv[1] is looked up on PATH (posix_spawnp); the program gets this
 * process's environment, an empty signal mask, SIGPIPE at its default (a Lua
 * library may have ignored it), and no fd but 0, 1 and 2: the pipes are
 * O_CLOEXEC and every other fd open without FD_CLOEXEC is closed in the child
 * (listed from /proc/self/fd; glibc 2.28 has no closefrom action).  stdout
 * and stderr are read as they come, stdin written alongside (one poll on
 * all), so no size of output deadlocks.  The wait is bounded (opts.timeout,
 * 30 s by default, math.huge none): at the limit the child gets SIGKILL and
 * is reaped.  It ends on SIGINT (wait.h) with the error "spawn: interrupted"
 * once the child is killed and reaped.  Only this child is reaped (waitpid on
 * its pid); once it has exited, output its own children still write is not
 * waited for.  A Lua error in between (out of memory) leaves the child to the
 * collector: its finalizer kills and reaps it, closes and frees the rest.
 */
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/args.h"
#include "base/err.h"
#include "base/wait.h"
#include "process/process.h"

#define CHUNK 65536          /* bytes read or written at once */
#define DRAIN_READS 256      /* reads of a pipe after the child exited: 16 MiB */
#define TICK 0.1             /* seconds between looks at the child while its pipes are open */
#define DEFAULT_TIMEOUT 30.0

struct out {
	char *p;
	size_t n, cap;
};

/* A started child and the parent's ends of its pipes: a userdata whose
 * finalizer releases whatever is left. */
struct child {
	pid_t pid;         /* > 0 until reaped */
	int status;        /* waitpid's, when reaped */
	int reaped;        /* status is known (not when someone else reaped it) */
	int fd[3];         /* stdin (written), stdout, stderr (read); -1 closed */
	struct out out[2]; /* stdout, stderr */
	const char *in;    /* opts.stdin, kept alive on the caller's stack */
	size_t in_len, in_off;
};

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* waitpid on the child alone, EINTR-safe: 1 when reaped (or gone: ECHILD,
 * someone else reaped it), 0 when still running (WNOHANG). */
static int reap(struct child *c, int flags)
{
	while (c->pid > 0) {
		pid_t r = waitpid(c->pid, &c->status, flags);
		if (r == c->pid) {
			c->reaped = 1;
		} else if (r == 0) {
			return 0;
		} else if (errno == EINTR) {
			continue;
		}
		c->pid = -1;
	}
	return 1;
}

static void release(struct child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		reap(c, 0);
	}
	for (int i = 0; i < 3; i++)
		close_fd(&c->fd[i]);
	for (int i = 0; i < 2; i++) {
		free(c->out[i].p);
		c->out[i].p = NULL;
		c->out[i].n = c->out[i].cap = 0;
	}
}

static int child_gc(lua_State *L)
{
	release(lua_touserdata(L, 1));
	return 0;
}

/* ---- starting it ---------------------------------------------------------- */

/* pipe2 with O_CLOEXEC, both ends moved above 2: an end that is 0, 1 or 2
 * (this process had them closed) would be dup2'd onto itself, which keeps
 * its FD_CLOEXEC before glibc 2.29, or onto another end. */
static int make_pipe(int p[2])
{
	if (pipe2(p, O_CLOEXEC) != 0)
		return errno;
	for (int i = 0; i < 2; i++) {
		if (p[i] > 2)
			continue;
		int moved = fcntl(p[i], F_DUPFD_CLOEXEC, 3);
		int err = errno;
		close(p[i]);
		p[i] = moved;
		if (moved < 0) {
			close_fd(&p[1 - i]);
			return err;
		}
	}
	return 0;
}

/* Adds a close action for every fd above 2 that exec would not close. */
static int close_inherited(posix_spawn_file_actions_t *fa)
{
	DIR *d = opendir("/proc/self/fd"); /* O_CLOEXEC itself */
	if (d == NULL)
		return 0; /* no /proc: the pipes are O_CLOEXEC all the same */
	int rc = 0;
	struct dirent *e;
	while (rc == 0 && (e = readdir(d)) != NULL) {
		char *end;
		long fd = strtol(e->d_name, &end, 10);
		if (*end != '\0' || end == e->d_name || fd <= 2 || fd == dirfd(d) || fd > INT32_MAX)
			continue;
		int flags = fcntl((int)fd, F_GETFD);
		if (flags >= 0 && !(flags & FD_CLOEXEC))
			rc = posix_spawn_file_actions_addclose(fa, (int)fd);
		if (rc == EBADF)
			rc = 0; /* above RLIMIT_NOFILE lowered since: glibc refuses to name it */
	}
	closedir(d);
	return rc;
}

/* The child's fds and signals, then posix_spawnp: 0 or an errno value. */
static int spawn_child(struct child *c, const char *const *argv, int ends[3])
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	int rc = posix_spawn_file_actions_init(&fa);
	if (rc != 0)
		return rc;
	rc = posix_spawnattr_init(&attr);
	if (rc != 0) {
		posix_spawn_file_actions_destroy(&fa);
		return rc;
	}
	sigset_t none, pipe_sig;
	sigemptyset(&none);
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	if (ends[0] >= 0)
		rc = posix_spawn_file_actions_adddup2(&fa, ends[0], 0);
	else
		rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&fa, ends[1], 1);
	if (rc == 0)
		rc = posix_spawn_file_actions_adddup2(&fa, ends[2], 2);
	if (rc == 0)
		rc = close_inherited(&fa);
	if (rc == 0)
		rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	if (rc == 0)
		rc = posix_spawnattr_setsigmask(&attr, &none);
	if (rc == 0)
		rc = posix_spawnattr_setsigdefault(&attr, &pipe_sig);
	if (rc == 0)
		rc = posix_spawnp(&c->pid, argv[0], &fa, &attr, (char *const *)argv, environ);
	if (rc != 0)
		c->pid = -1;
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

/* The pipes, the child, the parent's ends non-blocking: 0 or an errno value. */
static int start(struct child *c, const char *const *argv)
{
	int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
	int rc = c->in != NULL ? make_pipe(in) : 0;
	if (rc == 0)
		rc = make_pipe(out);
	if (rc == 0)
		rc = make_pipe(err);
	if (rc == 0) {
		int ends[3] = {in[0], out[1], err[1]};
		rc = spawn_child(c, argv, ends);
	}
	close_fd(&in[0]);
	close_fd(&out[1]);
	close_fd(&err[1]);
	c->fd[0] = in[1];
	c->fd[1] = out[0];
	c->fd[2] = err[0];
	for (int i = 0; i < 3; i++)
		if (c->fd[i] >= 0)
			fcntl(c->fd[i], F_SETFL, fcntl(c->fd[i], F_GETFL) | O_NONBLOCK);
	if (c->fd[0] >= 0 && c->in_len == 0)
		close_fd(&c->fd[0]); /* nothing to write: EOF at once */
	return rc;
}

/* ---- the wait --------------------------------------------------------------- */

/* One read of stream i (1 stdout, 2 stderr) into its buffer: 0, or ENOMEM.
 * EOF or a failing read closes the pipe. */
static int read_some(struct child *c, int i)
{
	struct out *o = &c->out[i - 1];
	if (o->cap - o->n < CHUNK) {
		size_t cap = o->cap * 2 > o->n + CHUNK ? o->cap * 2 : o->n + CHUNK;
		char *p = realloc(o->p, cap);
		if (p == NULL)
			return ENOMEM;
		o->p = p;
		o->cap = cap;
	}
	ssize_t r = read(c->fd[i], o->p + o->n, o->cap - o->n);
	if (r > 0)
		o->n += (size_t)r;
	else if (r == 0 || (errno != EAGAIN && errno != EINTR))
		close_fd(&c->fd[i]);
	return 0;
}

/* One write of the rest of stdin.  SIGPIPE is blocked around it, and the one
 * it raises on a child that closed its stdin is taken back (unless one was
 * pending already): the write's EPIPE says it. */
static void write_some(struct child *c)
{
	sigset_t pipe_sig, old, pending;
	sigemptyset(&pipe_sig);
	sigaddset(&pipe_sig, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe_sig, &old);
	sigpending(&pending);
	int was_pending = sigismember(&pending, SIGPIPE);
	size_t n = c->in_len - c->in_off < CHUNK ? c->in_len - c->in_off : CHUNK;
	ssize_t w = write(c->fd[0], c->in + c->in_off, n);
	int err = errno;
	if (w < 0 && err == EPIPE && !was_pending) {
		struct timespec zero = {0, 0};
		sigtimedwait(&pipe_sig, NULL, &zero);
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (w > 0)
		c->in_off += (size_t)w;
	else if (w < 0 && err != EAGAIN && err != EINTR)
		close_fd(&c->fd[0]); /* EPIPE: it reads no more */
	if (c->in_off == c->in_len)
		close_fd(&c->fd[0]);
}

/* What is left in the pipes once the child has exited (its own children may
 * hold them open: no EOF is waited for), then closed: 0 or ENOMEM. */
static int drain(struct child *c)
{
	close_fd(&c->fd[0]);
	for (int i = 1; i <= 2; i++) {
		for (int k = 0; k < DRAIN_READS && c->fd[i] >= 0; k++) {
			size_t before = c->out[i - 1].n;
			if (read_some(c, i) != 0)
				return ENOMEM;
			if (c->out[i - 1].n == before)
				break; /* EAGAIN, EINTR or EOF */
		}
		close_fd(&c->fd[i]);
	}
	return 0;
}

enum { RUN_DONE, RUN_SIGINT, RUN_NOMEM };

/* Feeds, reads and waits until the child is reaped, the time limit passed
 * (then killed and reaped: *timed_out) or SIGINT came (the child left
 * running: the caller releases it).  Between ibvl_sigint_begin and _end. */
static int run(struct child *c, double timeout, int *timed_out)
{
	double deadline = isinf(timeout) ? HUGE_VAL : ibvl_monotonic() + timeout;
	double nap = 0.001; /* while no pipe is open: the child is about to exit */
	for (;;) {
		if (reap(c, WNOHANG))
			return drain(c) == 0 ? RUN_DONE : RUN_NOMEM;
		if (ibvl_sigint_pending())
			return RUN_SIGINT;
		double left = deadline - ibvl_monotonic();
		if (left <= 0) {
			*timed_out = 1;
			kill(c->pid, SIGKILL);
			reap(c, 0);
			return drain(c) == 0 ? RUN_DONE : RUN_NOMEM;
		}
		struct pollfd p[3];
		int which[3];
		nfds_t n = 0;
		for (int i = 0; i < 3; i++) {
			if (c->fd[i] < 0)
				continue;
			p[n] = (struct pollfd){.fd = c->fd[i], .events = i == 0 ? POLLOUT : POLLIN};
			which[n++] = i;
		}
		double slice = n > 0 ? TICK : nap;
		if (n == 0 && nap < TICK)
			nap *= 2;
		int rc = ibvl_ppoll(n > 0 ? p : NULL, n, left < slice ? left : slice);
		for (nfds_t k = 0; rc > 0 && k < n; k++) {
			if (p[k].revents == 0)
				continue;
			if (which[k] == 0) {
				if (p[k].revents & POLLOUT)
					write_some(c);
				else
					close_fd(&c->fd[0]); /* POLLERR: the child closed its stdin */
			} else if (read_some(c, which[k]) != 0) {
				kill(c->pid, SIGKILL);
				reap(c, 0);
				return RUN_NOMEM;
			}
		}
	}
}

/* ---- ibv.spawn -------------------------------------------------------------- */

/* argv (argument 1, a list of strings) as a NULL-terminated array in a
 * userdata, pointing into a private copy of the list; both stay pushed. */
static const char *const *check_argv(lua_State *L)
{
	if (lua_type(L, 1) != LUA_TTABLE)
		ibvl_argerror(L, 1, "argv", "list of strings expected, got %s", luaL_typename(L, 1));
	int t = ibvl_copy_arg(L, 1, 0);
	size_t n = lua_rawlen(L, t);
	if (n == 0)
		ibvl_argerror(L, 1, "argv", "empty list (the program, then its arguments)");
	if (n > 1000000)
		ibvl_argerror(L, 1, "argv", "more than 1000000 arguments");
	const char **argv = lua_newuserdatauv(L, (n + 1) * sizeof *argv, 0);
	size_t count = 0;
	lua_pushnil(L);
	while (lua_next(L, t)) {
		int integer = lua_isinteger(L, -2);
		lua_Integer i = integer ? lua_tointeger(L, -2) : 0;
		if (i < 1 || (size_t)i > n)
			ibvl_argerror(L, 1, "argv", "list of strings expected, got key %s",
			              lua_type(L, -2) == LUA_TSTRING
			                  ? lua_pushfstring(L, "'%s'", lua_tostring(L, -2))
			              : integer ? lua_pushfstring(L, "%d", (int)i)
			                        : luaL_typename(L, -2));
		if (lua_type(L, -1) != LUA_TSTRING)
			ibvl_argerror(L, 1, NULL, "argv[%d]: string expected, got %s", (int)i,
			              luaL_typename(L, -1));
		size_t len;
		const char *s = lua_tolstring(L, -1, &len); /* stays alive in the copy */
		if (strlen(s) != len)
			ibvl_argerror(L, 1, NULL, "argv[%d]: string with an embedded zero byte", (int)i);
		argv[i - 1] = s;
		count++;
		lua_pop(L, 1);
	}
	if (count != n)
		ibvl_argerror(L, 1, "argv", "list of strings expected, got holes");
	argv[n] = NULL;
	return argv;
}

static const char *const spawn_opts[] = {"timeout", "stdin", NULL};

/* ibv.spawn(argv [, opts]) -> {status, signal, stdout, stderr, timed_out}
 * or nil, "spawn <prog>: msg", errno */
static int l_spawn(lua_State *L)
{
	double timeout = DEFAULT_TIMEOUT;
	const char *in = NULL;
	size_t in_len = 0;
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "opts", spawn_opts);
		int o = ibvl_copy_arg(L, 2, 0); /* keeps opts.stdin alive */
		timeout = ibvl_timeout_field(L, o, "timeout", DEFAULT_TIMEOUT);
		if (!(timeout > 0))
			ibvl_error(L, "field 'timeout': a time limit above 0 s expected, got 0");
		in = ibvl_str_field(L, o, "stdin", &in_len);
	}
	const char *const *argv = check_argv(L);
	struct child *c = lua_newuserdatauv(L, sizeof *c, 0);
	memset(c, 0, sizeof *c);
	c->pid = -1;
	c->fd[0] = c->fd[1] = c->fd[2] = -1;
	c->in = in;
	c->in_len = in_len;
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, -2);

	struct ibvl_sigint s;
	ibvl_sigint_begin(&s);
	int rc = start(c, argv), timed_out = 0;
	int r = rc == 0 ? run(c, timeout, &timed_out) : RUN_DONE;
	if (r != RUN_DONE || rc != 0)
		release(c); /* killed and reaped before SIGINT has its handler back */
	if (ibvl_sigint_end(&s)) { /* RUN_SIGINT, or SIGINT as it ended */
		release(c);
		return ibvl_interrupted(L, "spawn");
	}
	if (rc != 0 || r == RUN_NOMEM) {
		const char *name = lua_pushfstring(L, "spawn %s", argv[0]);
		return ibvl_fail(L, name, rc != 0 ? rc : ENOMEM);
	}
	lua_createtable(L, 0, 5);
	if (c->reaped && WIFEXITED(c->status))
		ibvl_set_int(L, "status", WEXITSTATUS(c->status));
	if (c->reaped && WIFSIGNALED(c->status))
		ibvl_set_int(L, "signal", WTERMSIG(c->status));
	const char *names[2] = {"stdout", "stderr"};
	for (int i = 0; i < 2; i++) {
		lua_pushlstring(L, c->out[i].p != NULL ? c->out[i].p : "", c->out[i].n);
		lua_setfield(L, -2, names[i]);
	}
	lua_pushboolean(L, timed_out);
	lua_setfield(L, -2, "timed_out");
	release(c);
	return 1;
}

void ibvl_open_spawn(lua_State *L)
{
	lua_createtable(L, 0, 1); /* the children's metatable, the closure's upvalue */
	lua_pushcfunction(L, child_gc);
	lua_setfield(L, -2, "__gc");
	lua_pushliteral(L, "ibverbs.spawn");
	lua_setfield(L, -2, "__metatable");
	lua_pushcclosure(L, l_spawn, 1);
	lua_setfield(L, -2, "spawn");
}
