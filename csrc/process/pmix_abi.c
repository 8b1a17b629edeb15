/*
 * pmix_abi.c: libpmix opened at run time, and the waits of its non-blocking
 * calls (pmix_abi.h).
 *
 *   ibvl_pmix_load(NULL, msg, sizeof msg)   -- libpmix.so.2, then <multiarch>/pmix2/lib
 *   r = ibvl_pmix_req(L, n); ...; ibvl_pmix_wait(L, r, 60, "PMIx_Fence")
 *
 * The library is loaded once per process (RTLD_GLOBAL: its plugins take their
 * symbols from it) and never unloaded: its progress thread may still call
 * back.  A request is shared by its waiter and the callbacks still to come;
 * each callback copies what PMIx hands it (PMIx owns the value), marks its
 * slot under the request's lock and writes the eventfd; the waiter sleeps in
 * ppoll on that eventfd (wait.h: bounded, SIGINT ends it).  A wait that gave
 * up leaves the request to the callbacks: the last of them frees it, and one
 * that never comes (a dead rank's data) leaks it.
 */
#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "base/err.h"
#include "process/pmix_abi.h"
#include "base/wait.h"

#define OPERATION_SUCCEEDED (-157) /* 4.x: done at once, no callback */
enum { T_BOOL = 1, T_BYTE = 2, T_STRING = 3, T_SIZE = 4, T_PID = 5, T_INT = 6, T_INT8 = 7,
       T_INT16 = 8, T_INT32 = 9, T_INT64 = 10, T_UINT = 11, T_UINT8 = 12, T_UINT16 = 13,
       T_UINT32 = 14, T_UINT64 = 15, T_BYTE_OBJECT = 27, T_PROC_RANK = 40 };

struct ibvl_pmix_lib ibvl_pmix;
static int loaded;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;

#ifdef __x86_64__
#define MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define MULTIARCH "aarch64-linux-gnu"
#elif defined(__powerpc64__)
#define MULTIARCH "powerpc64le-linux-gnu"
#else
#define MULTIARCH "unknown"
#endif
static const char *const lib_paths[] = {"libpmix.so.2", "/usr/lib/" MULTIARCH "/pmix2/lib/libpmix.so.2",
                                        NULL};

static const char *load(const char *path, char *msg, size_t size)
{
	const char *const one[] = {path, NULL};
	void *h = NULL;
	msg[0] = '\0';
	for (const char *const *p = path != NULL ? one : lib_paths; *p != NULL && h == NULL; p++) {
		h = dlopen(*p, RTLD_NOW | RTLD_GLOBAL);
		if (h != NULL)
			snprintf(ibvl_pmix.where, sizeof ibvl_pmix.where, "%s", *p);
		else if (msg[0] == '\0')
			snprintf(msg, size, "%s", dlerror());
	}
	if (h == NULL)
		return msg;
	struct {
		const char *name;
		void **slot;
	} syms[] = {
		{"PMIx_Get_version", (void **)&ibvl_pmix.get_version},
		{"PMIx_Error_string", (void **)&ibvl_pmix.error_string},
		{"PMIx_Init", (void **)&ibvl_pmix.init},
		{"PMIx_Finalize", (void **)&ibvl_pmix.finalize},
		{"PMIx_Abort", (void **)&ibvl_pmix.abort_},
		{"PMIx_Put", (void **)&ibvl_pmix.put},
		{"PMIx_Commit", (void **)&ibvl_pmix.commit},
		{"PMIx_Fence_nb", (void **)&ibvl_pmix.fence_nb},
		{"PMIx_Get_nb", (void **)&ibvl_pmix.get_nb},
	};
	for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
		*syms[i].slot = dlsym(h, syms[i].name);
		if (*syms[i].slot == NULL) {
			snprintf(msg, size, "%s has no %s", ibvl_pmix.where, syms[i].name);
			return msg; /* left loaded: unloading a library half looked at gains nothing */
		}
	}
	loaded = 1;
	return NULL;
}

const char *ibvl_pmix_load(const char *path, char *msg, size_t size)
{
	pthread_mutex_lock(&load_lock);
	const char *why = loaded ? NULL : load(path, msg, size);
	pthread_mutex_unlock(&load_lock);
	return why;
}

/* "4.2.2" out of "OpenPMIx 4.2.2 (license ...)" or "PMIx v2.2.5 ...". */
int ibvl_pmix_version(int v[3])
{
	v[0] = -1;
	for (const char *s = ibvl_pmix.get_version(); s != NULL && *s != '\0'; s++) {
		if (*s >= '0' && *s <= '9' && sscanf(s, "%d.%d.%d", &v[0], &v[1], &v[2]) == 3)
			return v[0];
	}
	return v[0] = -1;
}

int ibvl_pmix_server_in_env(void)
{
	if (getenv("PMIX_NAMESPACE") == NULL || getenv("PMIX_RANK") == NULL)
		return 0;
	for (char **e = environ; *e != NULL; e++)
		if (strncmp(*e, "PMIX_SERVER_URI", 15) == 0)
			return 1;
	return 0;
}

int ibvl_pmix_errno(int status)
{
	switch (status) {
	case -24: /* PMIX_ERR_TIMEOUT */
		return ETIMEDOUT;
	case -25: /* PMIX_ERR_UNREACH */
		return ECONNREFUSED;
	case -46: /* PMIX_ERR_NOT_FOUND */
		return ENOENT;
	default:
		return EIO;
	}
}

int ibvl_pmix_fail(lua_State *L, const char *call, int status)
{
	lua_pushnil(L);
	lua_pushfstring(L, "%s: %s (%d)", call, ibvl_pmix.error_string(status), status);
	lua_pushinteger(L, ibvl_pmix_errno(status));
	return 3;
}

/* ---- requests ------------------------------------------------------------------ */
static const char *const REQ_MT = "ibverbs.pmix.request";

static void free_req(struct ibvl_pmix_req *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->slot[i].bytes);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* A slot's result is in (r->mu held, released here): the waiter woken, the last reference frees. */
static void complete(struct ibvl_pmix_req *r, struct ibvl_pmix_slot *s, int status)
{
	s->status = status;
	s->have = 1;
	r->done++;
	if (r->efd >= 0) {
		uint64_t one = 1;
		ssize_t w = write(r->efd, &one, sizeof one);
		(void)w; /* a full counter wakes the waiter all the same */
	}
	int last = --r->refs == 0;
	pthread_mutex_unlock(&r->mu);
	if (last)
		free_req(r);
}

void ibvl_pmix_on_op(int status, void *cbdata)
{
	struct ibvl_pmix_slot *s = cbdata;
	pthread_mutex_lock(&s->r->mu);
	complete(s->r, s, status);
}

/* Reads v into s's fields (not yet published): type, num, bytes, len. */
static void copy_value(struct ibvl_pmix_slot *s, const struct ibvl_pmix_value *v)
{
	const char *src = NULL;
	s->type = 2;
	switch (v->type) {
	case T_BOOL: s->type = 1; s->num = v->data.flag; break;
	case T_BYTE: case T_UINT8: s->num = v->data.u8; break;
	case T_INT8: s->num = (int8_t)v->data.u8; break;
	case T_UINT16: s->num = v->data.u16; break;
	case T_INT16: s->num = (int16_t)v->data.u16; break;
	case T_UINT32: case T_UINT: case T_PROC_RANK: s->num = v->data.u32; break;
	case T_INT32: case T_INT: case T_PID: s->num = (int32_t)v->data.u32; break;
	case T_INT64: case T_UINT64: case T_SIZE: s->num = (int64_t)v->data.u64; break;
	case T_STRING:
		s->type = 3;
		src = v->data.string;
		s->len = src != NULL ? strlen(src) : 0;
		break;
	case T_BYTE_OBJECT:
		s->type = 3;
		src = v->data.bo.bytes;
		s->len = src != NULL ? v->data.bo.size : 0;
		break;
	default: s->type = -1; s->num = v->type; break;
	}
	if (s->type == 3 && (s->bytes = malloc(s->len + 1)) == NULL)
		s->type = -2;
	else if (s->type == 3 && s->len > 0)
		memcpy(s->bytes, src, s->len);
}

/* Get_nb's callback, on PMIx's progress thread. */
void ibvl_pmix_on_value(int status, struct ibvl_pmix_value *kv, void *cbdata)
{
	struct ibvl_pmix_slot *s = cbdata, got;
	memset(&got, 0, sizeof got);
	if (status == 0 && kv != NULL)
		copy_value(&got, kv); /* outside the lock: the waiter does not read it yet */
	pthread_mutex_lock(&s->r->mu);
	s->type = got.type;
	s->num = got.num;
	s->bytes = got.bytes;
	s->len = got.len;
	complete(s->r, s, status);
}

struct ibvl_pmix_req *ibvl_pmix_req(lua_State *L, size_t n)
{
	struct ibvl_pmix_req **owner = lua_newuserdatauv(L, sizeof *owner, 0);
	*owner = NULL;
	luaL_setmetatable(L, REQ_MT);
	struct ibvl_pmix_req *r = calloc(1, sizeof *r + n * sizeof r->slot[0]);
	if (r == NULL)
		return NULL;
	r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (r->efd < 0) {
		free(r);
		return NULL;
	}
	pthread_mutex_init(&r->mu, NULL);
	r->n = n;
	r->refs = 1;
	for (size_t i = 0; i < n; i++)
		r->slot[i].r = r;
	*owner = r;
	return r;
}

/* Before an _nb call: its callback holds a reference (taken first, for it may
 * run before the call returns). */
void ibvl_pmix_expect(struct ibvl_pmix_req *r)
{
	pthread_mutex_lock(&r->mu);
	r->refs++;
	pthread_mutex_unlock(&r->mu);
}

/* After it, with its return code: one that did not start has no callback to come. */
void ibvl_pmix_started(struct ibvl_pmix_req *r, struct ibvl_pmix_slot *s, int rc)
{
	if (rc == 0)
		return;
	pthread_mutex_lock(&r->mu);
	complete(r, s, rc == OPERATION_SUCCEEDED ? 0 : rc);
}

/* Until every slot is in or timeout seconds passed: 1 all in, 0 not; raises
 * "<call>: interrupted" on SIGINT (the owner's finalizer drops the request).
 * Then the slots that are in are marked seen: no callback writes them again. */
int ibvl_pmix_wait(lua_State *L, struct ibvl_pmix_req *r, double timeout, const char *call)
{
	double deadline = isinf(timeout) ? HUGE_VAL : ibvl_monotonic() + timeout;
	struct ibvl_sigint sig;
	ibvl_sigint_begin(&sig);
	int all;
	for (;;) {
		pthread_mutex_lock(&r->mu);
		all = r->done == r->n;
		pthread_mutex_unlock(&r->mu);
		double left = deadline - ibvl_monotonic();
		if (all || left <= 0 || ibvl_sigint_pending())
			break;
		struct pollfd p = {.fd = r->efd, .events = POLLIN};
		if (ibvl_ppoll(&p, 1, left) > 0) {
			uint64_t v;
			ssize_t rd = read(r->efd, &v, sizeof v);
			(void)rd;
		}
	}
	if (ibvl_sigint_end(&sig))
		ibvl_interrupted(L, call);
	pthread_mutex_lock(&r->mu);
	for (size_t i = 0; i < r->n; i++)
		r->slot[i].seen = r->slot[i].have;
	pthread_mutex_unlock(&r->mu);
	return all;
}

void ibvl_pmix_drop(struct ibvl_pmix_req **owner)
{
	struct ibvl_pmix_req *r = *owner;
	*owner = NULL;
	if (r == NULL)
		return;
	pthread_mutex_lock(&r->mu);
	close(r->efd);
	r->efd = -1;
	int last = --r->refs == 0;
	pthread_mutex_unlock(&r->mu);
	if (last)
		free_req(r);
}

static int req_gc(lua_State *L)
{
	ibvl_pmix_drop(luaL_checkudata(L, 1, REQ_MT));
	return 0;
}

void ibvl_pmix_open_req(lua_State *L)
{
	luaL_newmetatable(L, REQ_MT);
	lua_pushcfunction(L, req_gc);
	lua_setfield(L, -2, "__gc");
	lua_pushliteral(L, "ibverbs.pmix.request");
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);
}
