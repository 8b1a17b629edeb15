/*
 * pmix_abi.h: libpmix opened at run time, and its non-blocking calls waited
 * for (pmix_abi.c), for ibv.pmix (pmix.c).
 *
 *   why = ibvl_pmix_load(path, msg, sizeof msg);     -- NULL: ibvl_pmix.* are set
 *   struct ibvl_pmix_req *r = ibvl_pmix_req(L, n);   -- pushes its owner (a userdata)
 *   ibvl_pmix_expect(r);                             -- before each _nb call, then:
 *   ibvl_pmix_started(r, &r->slot[i], ibvl_pmix.get_nb(&p, key, NULL, 0, ibvl_pmix_on_value, &r->slot[i]));
 *   all = ibvl_pmix_wait(L, r, timeout, "PMIx_Get"); -- bounded, raises on SIGINT
 *   ibvl_pmix_drop(lua_touserdata(L, owner));        -- (or the owner's finalizer)
 *
 * Nothing includes pmix.h: the structs are the part every series from 2.0 to
 * 6.x lays out alike.  pmix_value_t keeps its type at offset 0 and its data
 * at 8, but grew from 24 to 32 bytes in 3.0 (pmix_info_t from 544 to 552):
 * one info at a time reads the same in every series, an array of two does
 * not, so no more than one is ever passed.
 */
#ifndef IBVL_PMIX_ABI_H
#define IBVL_PMIX_ABI_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/compat.h"

#define IBVL_PMIX_KEYLEN 512 /* PMIX_MAX_KEYLEN + 1 */
#define IBVL_PMIX_NSLEN 256  /* PMIX_MAX_NSLEN + 1 */
#define IBVL_PMIX_WILDCARD 0xfffffffeu /* PMIX_RANK_WILDCARD */
#define IBVL_PMIX_BOOL 1
#define IBVL_PMIX_BYTE_OBJECT 27

struct ibvl_pmix_proc {
	char nspace[IBVL_PMIX_NSLEN];
	uint32_t rank;
};

struct ibvl_pmix_value { /* type at 0, data at 8 */
	uint16_t type;
	union {
		bool flag;
		uint8_t u8;
		uint16_t u16;
		uint32_t u32;
		uint64_t u64;
		char *string;
		struct {
			char *bytes;
			size_t size;
		} bo;
		uint8_t pad[24]; /* 3.0's size: a 2.x library reads the first 16 */
	} data;
};

struct ibvl_pmix_info { /* never more than one in a call */
	char key[IBVL_PMIX_KEYLEN];
	uint32_t flags;
	struct ibvl_pmix_value value;
};

typedef void (*ibvl_pmix_op_cb)(int status, void *cbdata);
typedef void (*ibvl_pmix_value_cb)(int status, struct ibvl_pmix_value *kv, void *cbdata);

/* The library's calls, set by ibvl_pmix_load. */
extern struct ibvl_pmix_lib {
	char where[256]; /* the file it was opened as */
	const char *(*get_version)(void);
	const char *(*error_string)(int);
	int (*init)(struct ibvl_pmix_proc *, struct ibvl_pmix_info *, size_t);
	int (*finalize)(const struct ibvl_pmix_info *, size_t);
	int (*abort_)(int, const char *, struct ibvl_pmix_proc *, size_t);
	int (*put)(uint8_t, const char *, struct ibvl_pmix_value *);
	int (*commit)(void);
	int (*fence_nb)(const struct ibvl_pmix_proc *, size_t, const struct ibvl_pmix_info *, size_t,
	                ibvl_pmix_op_cb, void *);
	int (*get_nb)(const struct ibvl_pmix_proc *, const char *, const struct ibvl_pmix_info *,
	              size_t, ibvl_pmix_value_cb, void *);
} ibvl_pmix;

/* Opens path (NULL: libpmix.so.2, then Debian's pmix2/lib) once per process:
 * NULL, or why not (written to msg). */
const char *ibvl_pmix_load(const char *path, char *msg, size_t size);
/* The loaded library's version (v[0] major, -1 unknown), from PMIx_Get_version. */
int ibvl_pmix_version(int v[3]);
/* Whether the environment names a server (PMIX_NAMESPACE, PMIX_RANK, PMIX_SERVER_URI*). */
int ibvl_pmix_server_in_env(void);
/* An errno value for a PMIx status; nil, "call: PMIx's name (status)", errno. */
int ibvl_pmix_errno(int status);
int ibvl_pmix_fail(lua_State *L, const char *call, int status);

/* ---- requests: one waiter, n operations, an eventfd the callbacks signal ---- */
struct ibvl_pmix_slot {
	struct ibvl_pmix_req *r;
	int have, status; /* written once, by the callback, under r->mu */
	int type;         /* 0 none, 1 boolean, 2 integer (num), 3 bytes, -1 a type not read (num), -2 ENOMEM */
	int seen;         /* the waiter's copy of have when it stopped waiting: those slots are its own */
	int64_t num;
	char *bytes;
	size_t len;
};

struct ibvl_pmix_req {
	pthread_mutex_t mu;
	int efd;  /* the waiter's; -1 once it left */
	int refs; /* the waiter and the callbacks to come: the last one frees */
	size_t n, done;
	struct ibvl_pmix_info info; /* a fence's one info, alive until its callback */
	struct ibvl_pmix_slot slot[];
};

struct ibvl_pmix_req *ibvl_pmix_req(lua_State *L, size_t n); /* NULL: ENOMEM (the owner is pushed all the same) */
void ibvl_pmix_expect(struct ibvl_pmix_req *r);
void ibvl_pmix_started(struct ibvl_pmix_req *r, struct ibvl_pmix_slot *s, int rc);
int ibvl_pmix_wait(lua_State *L, struct ibvl_pmix_req *r, double timeout, const char *call);
void ibvl_pmix_drop(struct ibvl_pmix_req **owner);
void ibvl_pmix_on_op(int status, void *cbdata);
void ibvl_pmix_on_value(int status, struct ibvl_pmix_value *kv, void *cbdata);
void ibvl_pmix_open_req(lua_State *L); /* the owners' metatable */

#endif
