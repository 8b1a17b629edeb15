/*
 * pmix.c: ibv.pmix, a PMIx client on the node's libpmix, opened at run time.
 *
 *   local p, err = ibv.pmix()          -- PMIx_Init, under srun --mpi=pmix, mpirun, prterun
 *   --> nil, "pmix: no PMIx server (PMIX_NAMESPACE, PMIX_RANK or PMIX_SERVER_URI* unset)", ENOTCONN
 *   --> nil, "pmix: libpmix.so.2: cannot open shared object file: ...", ENOENT
 *   p:info()                            -- {nspace=, rank=, version="4.2.2", library=, path=}
 *   p:get(nil, "pmix.job.size")         -- the job's value (rank wildcard); p:get(3, "pmix.hname"): rank 3's
 *   assert(p:put("ibvl.hello", bytes))  -- a byte object, scope "global" ("local", "remote")
 *   assert(p:commit())
 *   assert(p:fence{collect = true, timeout = 60})  -- nil, "PMIx_Fence: not complete within 60 s", ETIMEDOUT
 *   local got, missing, why = p:get_all("ibvl.hello", {0, 1, 2}, 10)
 *                                       -- got[i]: ranks[i]'s value; missing: the ranks without; why[rank]
 *   p:abort(1, "why")                   -- PMIx_Abort of the namespace: the launcher ends the job
 *   p:close()                           -- PMIx_Finalize (idempotent; also __gc, __close)
 *
 * The library is opts.lib, else libpmix.so.2, else Debian's pmix2/lib
 * (pmix_abi.c: loaded once per process).  Every release from 1.2.5 to 6.x
 * installs as libpmix.so.2; PMIx_Get_version tells them apart, and 1.x
 * (whose PMIx_Init and PMIx_Finalize take no info) is refused before any
 * call.  The environment is checked before PMIx_Init: without a server 2.x
 * fails, 3.x becomes a singleton, 4.x and 5.x fail with UNREACH.  Fence, get
 * and get_all run as PMIx_Fence_nb and PMIx_Get_nb and wait bounded
 * (timeout, 60 s by default) and interruptible: a fence a dead rank never
 * completes ends at the limit whatever the series and whatever the
 * launcher's own limit (Slurm's PMIxTimeout, 300 s; PMIX_TIMEOUT, which
 * would need a second info beside PMIX_COLLECT_DATA, is not passed).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/args.h"
#include "base/err.h"
#include "base/wait.h"
#include "process/pmix_abi.h"
#include "process/process.h"

struct client {
	int open;
	struct ibvl_pmix_proc me;
	int version[3];
};

static const char *const CLIENT_MT = "ibverbs.pmix";

static struct client *check_client(lua_State *L)
{
	struct client *c = luaL_checkudata(L, 1, CLIENT_MT);
	if (!c->open)
		luaL_error(L, "attempt to use a closed ibverbs.pmix");
	return c;
}

static const char *check_key(lua_State *L, int arg)
{
	size_t len;
	const char *key = ibvl_check_lstring(L, arg, &len);
	if (len == 0 || len >= IBVL_PMIX_KEYLEN || strlen(key) != len)
		ibvl_argerror(L, arg, "key", "1 to %d bytes without a zero byte expected, got %d bytes",
		              IBVL_PMIX_KEYLEN - 1, (int)len);
	return key;
}

/* The rank at idx (argument arg; what names it in the error, e.g. "rank" or "ranks[3]"). */
static uint32_t check_rank(lua_State *L, int idx, int arg, const char *what)
{
	lua_Integer r;
	if (!ibvl_tointeger(L, idx, &r) || r < 0 || r >= (lua_Integer)IBVL_PMIX_WILDCARD)
		ibvl_argerror(L, arg, what, "a rank from 0 to 4294967293 expected, got %s",
		              lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
	return (uint32_t)r;
}

/* "what within 1.5 s" (%g: the same under every interpreter) */
static void push_within(lua_State *L, const char *what, double timeout)
{
	char secs[32];
	snprintf(secs, sizeof secs, "%g", timeout);
	lua_pushfstring(L, "%s within %s s", what, secs);
}

/* A slot's value pushed (boolean, integer, string). */
static void push_slot(lua_State *L, const struct ibvl_pmix_slot *s)
{
	if (s->type == 1)
		lua_pushboolean(L, s->num != 0);
	else if (s->type == 2)
		lua_pushinteger(L, (lua_Integer)s->num);
	else
		lua_pushlstring(L, s->bytes != NULL ? s->bytes : "", s->len);
}

/* Why a slot has no value, pushed. */
static void push_why(lua_State *L, const struct ibvl_pmix_slot *s, double timeout)
{
	if (!s->seen)
		push_within(L, "no answer", timeout);
	else if (s->status != 0)
		lua_pushfstring(L, "%s (%d)", ibvl_pmix.error_string(s->status), s->status);
	else if (s->type == -1)
		lua_pushfstring(L, "a value of PMIx type %d, which ibv.pmix does not read", (int)s->num);
	else if (s->type == -2)
		lua_pushliteral(L, "out of memory");
	else
		lua_pushliteral(L, "no value");
}

/* Get_nb of key for n ranks (ranks at index t, or the wildcard), waited for. */
static struct ibvl_pmix_req *get_many(lua_State *L, struct client *c, const char *key, int t, size_t n,
                            double timeout, const char *call)
{
	struct ibvl_pmix_req *r = ibvl_pmix_req(L, n);
	if (r == NULL)
		return NULL;
	int box = lua_gettop(L);
	for (size_t i = 0; i < n; i++) {
		struct ibvl_pmix_proc p;
		memcpy(p.nspace, c->me.nspace, IBVL_PMIX_NSLEN);
		p.rank = IBVL_PMIX_WILDCARD;
		if (t != 0) {
			lua_rawgeti(L, t, (lua_Integer)i + 1);
			p.rank = (uint32_t)lua_tointeger(L, -1);
			lua_pop(L, 1);
		}
		ibvl_pmix_expect(r);
		ibvl_pmix_started(r, &r->slot[i], ibvl_pmix.get_nb(&p, key, NULL, 0, ibvl_pmix_on_value, &r->slot[i]));
	}
	ibvl_pmix_wait(L, r, timeout, call);
	lua_settop(L, box); /* the box on top */
	return r;
}


/* p:get(rank|nil, key [, timeout]) -> value | nil, msg, errno */
static int l_get(lua_State *L)
{
	struct client *c = check_client(L);
	uint32_t rank = lua_isnil(L, 2) ? IBVL_PMIX_WILDCARD : check_rank(L, 2, 2, "rank");
	const char *key = check_key(L, 3);
	double timeout = ibvl_opt_timeout(L, 4, 60);
	lua_settop(L, 4);
	lua_createtable(L, 1, 0);
	lua_pushinteger(L, rank);
	lua_rawseti(L, 5, 1);
	struct ibvl_pmix_req *r = get_many(L, c, key, rank != IBVL_PMIX_WILDCARD ? 5 : 0, 1, timeout, "PMIx_Get");
	if (r == NULL)
		return ibvl_fail(L, "PMIx_Get", ENOMEM);
	int box = lua_gettop(L), nret = 1;
	const struct ibvl_pmix_slot *s = &r->slot[0];
	if (s->seen && s->status == 0 && s->type > 0) {
		push_slot(L, s);
	} else {
		lua_pushnil(L);
		if (rank == IBVL_PMIX_WILDCARD)
			lua_pushfstring(L, "PMIx_Get %s: ", key);
		else
			lua_pushfstring(L, "PMIx_Get %s of rank %d: ", key, (int)rank);
		push_why(L, s, timeout);
		lua_concat(L, 2);
		lua_pushinteger(L, !s->seen ? ETIMEDOUT : s->status != 0 ? ibvl_pmix_errno(s->status) : EINVAL);
		nret = 3;
	}
	ibvl_pmix_drop(lua_touserdata(L, box));
	return nret;
}

/* p:get_all(key, ranks [, timeout]) -> got, missing, why: got[i] is ranks[i]'s
 * value (nil when it has none), missing the list of ranks without one, why[rank]
 * the reason.  Every Get_nb is issued at once; the wait is for all of them. */
static int l_get_all(lua_State *L)
{
	struct client *c = check_client(L);
	const char *key = check_key(L, 2);
	luaL_checktype(L, 3, LUA_TTABLE);
	double timeout = ibvl_opt_timeout(L, 4, 60);
	lua_settop(L, 4);
	size_t n = lua_rawlen(L, 3);
	lua_createtable(L, (int)n, 0); /* 5: the ranks, checked */
	for (size_t i = 1; i <= n; i++) {
		lua_rawgeti(L, 3, (lua_Integer)i);
		int at = lua_gettop(L);
		uint32_t r = check_rank(L, at, 3, lua_pushfstring(L, "ranks[%d]", (int)i));
		lua_pop(L, 2);
		lua_pushinteger(L, r);
		lua_rawseti(L, 5, (lua_Integer)i);
	}
	struct ibvl_pmix_req *r = get_many(L, c, key, 5, n, timeout, "PMIx_Get");
	if (r == NULL)
		return ibvl_fail(L, "PMIx_Get", ENOMEM);
	int box = lua_gettop(L);
	lua_createtable(L, (int)n, 0);
	lua_newtable(L);
	lua_newtable(L);
	lua_Integer nmissing = 0;
	for (size_t i = 0; i < n; i++) {
		const struct ibvl_pmix_slot *s = &r->slot[i];
		if (s->seen && s->status == 0 && s->type > 0) {
			push_slot(L, s);
			lua_rawseti(L, box + 1, (lua_Integer)i + 1);
			continue;
		}
		lua_rawgeti(L, 5, (lua_Integer)i + 1);
		lua_pushvalue(L, -1);
		lua_rawseti(L, box + 2, ++nmissing);
		push_why(L, s, timeout);
		lua_rawset(L, box + 3);
	}
	ibvl_pmix_drop(lua_touserdata(L, box));
	return 3;
}

static const char *const scopes[] = {"local", "remote", "global", NULL}; /* PMIx's 1, 2, 3 */

/* p:put(key, bytes [, scope]) -> true | nil, msg, errno */
static int l_put(lua_State *L)
{
	check_client(L);
	const char *key = check_key(L, 2);
	size_t len;
	const char *bytes = ibvl_check_lstring(L, 3, &len);
	int scope = luaL_checkoption(L, 4, "global", scopes) + 1;
	struct ibvl_pmix_value v;
	memset(&v, 0, sizeof v);
	v.type = IBVL_PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)bytes; /* PMIx_Put copies it */
	v.data.bo.size = len;
	int rc = ibvl_pmix.put((uint8_t)scope, key, &v);
	if (rc != 0)
		return ibvl_pmix_fail(L, "PMIx_Put", rc);
	lua_pushboolean(L, 1);
	return 1;
}

/* p:commit() -> true | nil, msg, errno */
static int l_commit(lua_State *L)
{
	check_client(L);
	int rc = ibvl_pmix.commit();
	if (rc != 0)
		return ibvl_pmix_fail(L, "PMIx_Commit", rc);
	lua_pushboolean(L, 1);
	return 1;
}

static const char *const fence_opts[] = {"collect", "timeout", NULL};

/* p:fence([{collect =, timeout =}]) -> true | nil, msg, errno: every process of
 * the namespace, PMIX_COLLECT_DATA when collect (the one info passed). */
static int l_fence(lua_State *L)
{
	check_client(L);
	int collect = 0;
	double timeout = 60;
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "opts", fence_opts);
		collect = ibvl_bool_field(L, 2, "collect", 0);
		timeout = ibvl_timeout_field(L, 2, "timeout", 60);
	}
	lua_settop(L, 2);
	struct ibvl_pmix_req *r = ibvl_pmix_req(L, 1);
	if (r == NULL)
		return ibvl_fail(L, "PMIx_Fence", ENOMEM);
	int box = lua_gettop(L);
	if (collect) {
		snprintf(r->info.key, sizeof r->info.key, "pmix.collect");
		r->info.value.type = IBVL_PMIX_BOOL;
		r->info.value.data.flag = true;
	}
	ibvl_pmix_expect(r);
	ibvl_pmix_started(r, &r->slot[0], ibvl_pmix.fence_nb(NULL, 0, collect ? &r->info : NULL, collect ? 1 : 0, ibvl_pmix_on_op,
	                                     &r->slot[0]));
	int all = ibvl_pmix_wait(L, r, timeout, "PMIx_Fence");
	int status = all ? r->slot[0].status : 0; /* in, so written for good */
	int nret = 1;
	if (!all) {
		lua_pushnil(L);
		push_within(L, "PMIx_Fence: not complete", timeout);
		lua_pushinteger(L, ETIMEDOUT);
		nret = 3;
	} else if (status != 0) {
		nret = ibvl_pmix_fail(L, "PMIx_Fence", status);
	} else {
		lua_pushboolean(L, 1);
	}
	ibvl_pmix_drop(lua_touserdata(L, box));
	return nret;
}

/* p:abort([status [, msg]]) -> true | nil, msg, errno: PMIx_Abort of the whole namespace */
static int l_abort(lua_State *L)
{
	check_client(L);
	int status = (int)ibvl_opt_range(L, 2, 1, INT32_MIN, INT32_MAX);
	const char *msg = luaL_optstring(L, 3, "aborted");
	int rc = ibvl_pmix.abort_(status, msg, NULL, 0);
	if (rc != 0)
		return ibvl_pmix_fail(L, "PMIx_Abort", rc);
	lua_pushboolean(L, 1);
	return 1;
}

/* p:info() -> {nspace =, rank =, version = "4.2.2", library = PMIx_Get_version(), path =} */
static int l_info(lua_State *L)
{
	struct client *c = check_client(L);
	lua_createtable(L, 0, 5);
	ibvl_set_str(L, "nspace", c->me.nspace);
	ibvl_set_int(L, "rank", c->me.rank);
	lua_pushfstring(L, "%d.%d.%d", c->version[0], c->version[1], c->version[2]);
	lua_setfield(L, -2, "version");
	ibvl_set_str(L, "library", ibvl_pmix.get_version());
	ibvl_set_str(L, "path", ibvl_pmix.where);
	return 1;
}

/* p:close(): PMIx_Finalize once; true, or nil, msg, errno when it failed */
static int l_close(lua_State *L)
{
	struct client *c = luaL_checkudata(L, 1, CLIENT_MT);
	if (!c->open) {
		lua_pushboolean(L, 1);
		return 1;
	}
	c->open = 0;
	int rc = ibvl_pmix.finalize(NULL, 0);
	if (rc != 0)
		return ibvl_pmix_fail(L, "PMIx_Finalize", rc);
	lua_pushboolean(L, 1);
	return 1;
}

/* p:is_closed() */
static int l_is_closed(lua_State *L)
{
	lua_pushboolean(L, !((struct client *)luaL_checkudata(L, 1, CLIENT_MT))->open);
	return 1;
}

static const char *const pmix_opts[] = {"lib", NULL};

/* ibv.pmix([{lib = path}]) -> client | nil, msg, errno */
static int l_pmix(lua_State *L)
{
	const char *path = NULL;
	if (!lua_isnoneornil(L, 1)) {
		ibvl_check_fields(L, 1, "opts", pmix_opts);
		path = ibvl_str_field(L, 1, "lib", NULL);
	}
	char msg[512];
	const char *why = ibvl_pmix_load(path, msg, sizeof msg);
	if (why != NULL) {
		lua_pushnil(L);
		lua_pushfstring(L, "pmix: %s", why);
		lua_pushinteger(L, ENOENT);
		return 3;
	}
	int v[3] = {0, 0, 0};
	if (ibvl_pmix_version(v) < 2) {
		lua_pushnil(L);
		lua_pushfstring(L, "pmix: %s (%s) is older than PMIx 2.0, whose client calls differ",
		                ibvl_pmix.where, ibvl_pmix.get_version());
		lua_pushinteger(L, ENOTSUP);
		return 3;
	}
	if (!ibvl_pmix_server_in_env()) {
		lua_pushnil(L);
		lua_pushliteral(L, "pmix: no PMIx server (PMIX_NAMESPACE, PMIX_RANK or PMIX_SERVER_URI* unset)");
		lua_pushinteger(L, ENOTCONN);
		return 3;
	}
	struct client *c = lua_newuserdatauv(L, sizeof *c, 0);
	memset(c, 0, sizeof *c);
	luaL_setmetatable(L, CLIENT_MT);
	memcpy(c->version, v, sizeof v);
	int rc = ibvl_pmix.init(&c->me, NULL, 0);
	if (rc != 0)
		return ibvl_pmix_fail(L, "PMIx_Init", rc);
	c->me.nspace[IBVL_PMIX_NSLEN - 1] = '\0';
	c->open = 1;
	return 1;
}

void ibvl_open_pmix(lua_State *L)
{
	ibvl_pmix_open_req(L);
	static const luaL_Reg methods[] = {
		{"get", l_get}, {"get_all", l_get_all}, {"put", l_put}, {"commit", l_commit},
		{"fence", l_fence}, {"abort", l_abort}, {"info", l_info}, {"close", l_close},
		{"is_closed", l_is_closed}, {NULL, NULL},
	};
	luaL_newmetatable(L, CLIENT_MT);
	lua_newtable(L);
	luaL_setfuncs(L, methods, 0);
	lua_setfield(L, -2, "__index");
	lua_pushcfunction(L, l_close);
	lua_setfield(L, -2, "__gc");
	lua_pushcfunction(L, l_close);
	lua_setfield(L, -2, "__close");
	lua_pop(L, 1);
	lua_pushcfunction(L, l_pmix);
	lua_setfield(L, -2, "pmix");
}
