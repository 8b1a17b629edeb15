/*
 * munge.c: ibv.munge_encode and ibv.munge_decode, credentials of the
 * cluster's own authentication service (MUNGE, as Slurm uses it), on the
 * node's libmunge opened at run time.
 *
 *   local cred = assert(ibv.munge_encode("payload"))   -- only this user's processes may decode it
 *   local payload, uid, gid, mine = ibv.munge_decode(cred)  -- mine: made by this process's user
 *   --> nil, "munge: Failed to connect to ...: No such file or directory", 6   -- the error's number
 *   ibv.munge_encode(s, "/run/other/munge.socket")    -- another munged (tests)
 *   --> nil, "munge: libmunge.so.2: cannot open shared object file ...", -1
 *
 * A credential binds its payload to the uid and gid of the process that
 * made it, for the daemon's time to live; munged refuses to decode one
 * twice on a node (17, "Replayed credential").  Used by ibverbs.fabric's
 * door under Slurm without PMIx.  libmunge is looked up once per process;
 * the prototypes and option numbers are those of munge.h since 0.5.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/compat.h"
#include "process/process.h"

#define OPT_SOCKET 8          /* MUNGE_OPT_SOCKET: the daemon's socket (a string) */
#define OPT_UID_RESTRICTION 9 /* MUNGE_OPT_UID_RESTRICTION: who may decode (a uid_t) */

struct munge_lib {
	void *(*ctx_create)(void);
	void (*ctx_destroy)(void *ctx);
	int (*ctx_set)(void *ctx, int opt, ...);
	const char *(*ctx_strerror)(void *ctx);
	int (*encode)(char **cred, void *ctx, const void *buf, int len);
	int (*decode)(const char *cred, void *ctx, void **buf, int *len, uid_t *uid, gid_t *gid);
	const char *(*strerror)(int e);
};

/* libmunge's calls, or NULL with why in msg (a process looks once) */
static const struct munge_lib *library(char *msg, size_t size)
{
	static struct munge_lib lib;
	static int state; /* 0 not tried, 1 loaded, -1 failed */
	static char why[256];
	if (state == 0) {
		void *h = dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
		state = -1;
		if (h == NULL) {
			snprintf(why, sizeof why, "%s", dlerror());
		} else {
			*(void **)&lib.ctx_create = dlsym(h, "munge_ctx_create");
			*(void **)&lib.ctx_destroy = dlsym(h, "munge_ctx_destroy");
			*(void **)&lib.ctx_set = dlsym(h, "munge_ctx_set");
			*(void **)&lib.ctx_strerror = dlsym(h, "munge_ctx_strerror");
			*(void **)&lib.encode = dlsym(h, "munge_encode");
			*(void **)&lib.decode = dlsym(h, "munge_decode");
			*(void **)&lib.strerror = dlsym(h, "munge_strerror");
			if (lib.ctx_create && lib.ctx_destroy && lib.ctx_set && lib.ctx_strerror && lib.encode &&
			    lib.decode && lib.strerror)
				state = 1;
			else
				snprintf(why, sizeof why, "libmunge.so.2 lacks the munge_* calls");
		}
	}
	if (state < 0) {
		snprintf(msg, size, "%s", why);
		return NULL;
	}
	return &lib;
}

/* nil, "munge: <text>", code: the context's text when it has one */
static int fail(lua_State *L, const struct munge_lib *lib, void *ctx, int code, const char *text)
{
	const char *detail = lib != NULL && ctx != NULL ? lib->ctx_strerror(ctx) : NULL;
	if (detail == NULL)
		detail = lib != NULL ? lib->strerror(code) : text;
	lua_pushnil(L);
	lua_pushfstring(L, "munge: %s", detail);
	lua_pushinteger(L, code);
	if (ctx != NULL)
		lib->ctx_destroy(ctx);
	return 3;
}

/* A context on the socket given as argument 2 (none: the daemon's default)
 * and its library in *lib; or NULL with the failure pushed (nil, msg, code). */
static void *begin(lua_State *L, const struct munge_lib **lib)
{
	luaL_optstring(L, 2, NULL);
	char msg[256];
	*lib = library(msg, sizeof msg);
	if (*lib == NULL) {
		fail(L, NULL, NULL, -1, msg);
		return NULL;
	}
	void *ctx = (*lib)->ctx_create();
	if (ctx == NULL) {
		fail(L, *lib, NULL, 5, NULL); /* EMUNGE_NO_MEMORY */
		return NULL;
	}
	int err = lua_isnoneornil(L, 2) ? 0 : (*lib)->ctx_set(ctx, OPT_SOCKET, lua_tostring(L, 2));
	if (err != 0) {
		fail(L, *lib, ctx, err, NULL);
		return NULL;
	}
	return ctx;
}

/* ibv.munge_encode(payload [, socket]) -> cred | nil, msg, code */
static int l_munge_encode(lua_State *L)
{
	size_t n;
	const char *payload = luaL_checklstring(L, 1, &n);
	luaL_argcheck(L, n <= 65536, 1, "a payload of at most 65536 bytes");
	const struct munge_lib *lib;
	void *ctx = begin(L, &lib);
	if (ctx == NULL)
		return 3;
	char *cred = NULL;
	int err = lib->ctx_set(ctx, OPT_UID_RESTRICTION, getuid());
	if (err == 0)
		err = lib->encode(&cred, ctx, payload, (int)n);
	if (err != 0)
		return fail(L, lib, ctx, err, NULL);
	lib->ctx_destroy(ctx);
	lua_pushstring(L, cred);
	free(cred);
	return 1;
}

/* ibv.munge_decode(cred [, socket]) -> payload, uid, gid, mine | nil, msg, code */
static int l_munge_decode(lua_State *L)
{
	const char *cred = luaL_checkstring(L, 1);
	const struct munge_lib *lib;
	void *ctx = begin(L, &lib);
	if (ctx == NULL)
		return 3;
	void *buf = NULL;
	int len = 0;
	uid_t uid = (uid_t)-1;
	gid_t gid = (gid_t)-1;
	int err = lib->decode(cred, ctx, &buf, &len, &uid, &gid);
	if (err != 0) {
		free(buf); /* (a replayed or expired credential still has its payload) */
		return fail(L, lib, ctx, err, NULL);
	}
	lib->ctx_destroy(ctx);
	lua_pushlstring(L, buf != NULL ? buf : "", buf != NULL ? (size_t)len : 0);
	free(buf);
	lua_pushinteger(L, (lua_Integer)uid);
	lua_pushinteger(L, (lua_Integer)gid);
	lua_pushboolean(L, uid == getuid());
	return 4;
}

void ibvl_open_munge(lua_State *L)
{
	lua_pushcfunction(L, l_munge_encode);
	lua_setfield(L, -2, "munge_encode");
	lua_pushcfunction(L, l_munge_decode);
	lua_setfield(L, -2, "munge_decode");
}
