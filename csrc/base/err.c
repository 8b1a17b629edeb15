/*
 * err.c: failures and misuse, as the module reports them (err.h).
 *
 *   return ibvl_fail(L, "ibv_create_qp", errno);  -- nil, msg, errno
 *   ibvl_error(L, "field '%s': ...", name);        -- "where: fn: path: msg"
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/err.h"

int ibvl_fail(lua_State *L, const char *call, int err)
{
	if (err < 0)
		err = -err;
	if (err == 0)
		err = EIO; /* a verbs call that failed without saying why */
	lua_pushnil(L);
	lua_pushfstring(L, "%s: %s", call, strerror(err));
	lua_pushinteger(L, err);
	return 3;
}

/* nil, "call: strerror (hint)", errno: a failure with its likely cause. */
int ibvl_fail_hint(lua_State *L, const char *call, int err, const char *hint)
{
	if (hint == NULL)
		return ibvl_fail(L, call, err);
	if (err < 0)
		err = -err;
	if (err == 0)
		err = EIO;
	lua_pushnil(L);
	lua_pushfstring(L, "%s: %s (%s)", call, strerror(err), hint);
	lua_pushinteger(L, err);
	return 3;
}

/* For calls that return 0 or an errno value (or -1 with errno set). */
int ibvl_result(lua_State *L, const char *call, int rc)
{
	if (rc == 0) {
		lua_pushboolean(L, 1);
		return 1;
	}
	return ibvl_fail(L, call, rc == -1 ? errno : rc);
}

/* ---- error messages: "where: function: path: message" ---------------------
 * The path names the part of an argument being read ("WR 2", "sg_list[1]",
 * "cap"); callers push a segment before descending and pop it after.  An
 * error raised below leaves the stack as it was; the next top-level call
 * starts afresh (ibvl_path_reset, from ibvl_guard_begin). */
#define PATH_MAX_DEPTH 8
static _Thread_local struct {
	int depth;
	const char *name[PATH_MAX_DEPTH];
	int index[PATH_MAX_DEPTH]; /* 0: name alone; else name[index] or "WR index" */
} path;

int ibvl_path_push(const char *name, int index)
{
	int saved = path.depth;
	if (path.depth < PATH_MAX_DEPTH) {
		path.name[path.depth] = name;
		path.index[path.depth] = index;
	}
	path.depth++;
	return saved;
}

void ibvl_path_pop(int saved)
{
	path.depth = saved;
}

void ibvl_path_reset(void)
{
	path.depth = 0;
}

static int in_library(const lua_Debug *ar)
{
	return strstr(ar->source, "/ibverbs.lua") != NULL || strstr(ar->source, "/ibverbs/") != NULL;
}

/* The position of the first caller outside the library's own Lua files, so
 * that an error raised through a wrapper (lua/ibverbs/xrc.lua) points at the
 * script's line. */
static void push_where(lua_State *L)
{
	lua_Debug ar;
	for (int level = 1; lua_getstack(L, level, &ar); level++) {
		if (!lua_getinfo(L, "Sl", &ar))
			break;
		if (ar.currentline <= 0 || in_library(&ar))
			continue; /* a C function (pcall), or a wrapper of the library */
		lua_pushfstring(L, "%s:%d: ", ar.short_src, ar.currentline);
		return;
	}
	lua_pushliteral(L, "");
}

/* The key under which table t holds the function at f, or NULL. */
static const char *key_of(lua_State *L, int t, int f)
{
	if (lua_type(L, t) != LUA_TTABLE)
		return NULL;
	lua_pushnil(L);
	while (lua_next(L, t)) {
		if (lua_rawequal(L, -1, f) && lua_type(L, -2) == LUA_TSTRING) {
			const char *k = lua_tostring(L, -2); /* stays alive in t */
			lua_pop(L, 2);
			return k;
		}
		lua_pop(L, 1);
	}
	return NULL;
}

/* A method's or module function's name when the call site gives none
 * (pcall(qp.post_send, qp, ...)): looked up in the first argument's methods
 * and in ibverbs.core.  Only on the way to an error. */
static const char *name_by_value(lua_State *L, lua_Debug *ar)
{
	int top = lua_gettop(L);
	lua_getinfo(L, "f", ar);
	int f = lua_gettop(L);
	const char *name = NULL;
	if (top >= 1 && lua_getmetatable(L, 1)) {
		lua_getfield(L, -1, "__index");
		if (lua_iscfunction(L, -1)) { /* m_index: the methods are its upvalue 2 */
			lua_getupvalue(L, -1, 2);
		}
		name = key_of(L, lua_gettop(L), f);
	}
	if (name == NULL) {
		lua_getfield(L, LUA_REGISTRYINDEX, "_LOADED");
		lua_getfield(L, -1, "ibverbs.core");
		name = key_of(L, lua_gettop(L), f);
	}
	lua_settop(L, top); /* the names are fields of long-lived tables */
	return name;
}

/* The name the running C function was called by ("post_send"), or NULL when
 * a wrapper of the library called it (its name means nothing to the script). */
static const char *function_name(lua_State *L)
{
	lua_Debug ar, caller;
	if (!lua_getstack(L, 0, &ar) || !lua_getinfo(L, "n", &ar))
		return NULL;
	if (ar.namewhat != NULL && strcmp(ar.namewhat, "metamethod") == 0)
		return NULL; /* obj.field on a closed object: the message says enough */
	/* called by a wrapper of the library: the name the script called the
	 * wrapper by (the frame below the first one outside the library) */
	for (int level = 1; lua_getstack(L, level, &caller) && lua_getinfo(L, "S", &caller) &&
	                    in_library(&caller); level++) {
		lua_Debug outer;
		if (lua_getstack(L, level + 1, &outer) && lua_getinfo(L, "S", &outer) &&
		    !in_library(&outer) && outer.currentline != 0) {
			lua_getstack(L, level, &caller);
			lua_getinfo(L, "n", &caller);
			return caller.name != NULL ? caller.name : name_by_value(L, &caller);
		}
	}
	return ar.name != NULL ? ar.name : name_by_value(L, &ar);
}

static int raise_v(lua_State *L, const char *fmt, va_list ap)
{
	luaL_Buffer b;
	int depth = path.depth < PATH_MAX_DEPTH ? path.depth : PATH_MAX_DEPTH;
	path.depth = 0;
	const char *fn = function_name(L);
	lua_pushvfstring(L, fmt, ap);
	int msg = lua_gettop(L);
	push_where(L);
	int where = lua_gettop(L);
	luaL_buffinit(L, &b);
	lua_pushvalue(L, where);
	luaL_addvalue(&b);
	if (fn != NULL) {
		luaL_addstring(&b, fn);
		luaL_addstring(&b, ": ");
	}
	for (int i = 0; i < depth; i++) {
		if (path.index[i] > 0 && path.name[i][0] == '#')
			lua_pushfstring(L, "%s %d: ", path.name[i] + 1, path.index[i]);
		else if (path.index[i] > 0)
			lua_pushfstring(L, "%s[%d]: ", path.name[i], path.index[i]);
		else
			lua_pushfstring(L, "%s: ", path.name[i]);
		luaL_addvalue(&b);
	}
	lua_pushvalue(L, msg);
	luaL_addvalue(&b);
	luaL_pushresult(&b);
	return lua_error(L);
}

/* Raises "script.lua:12: post_send: WR 1: sg_list[2]: <message>". */
int ibvl_error(lua_State *L, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	raise_v(L, fmt, ap);
	va_end(ap);
	return 0;
}

int ibvl_argerror(lua_State *L, int arg, const char *argname, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	const char *msg = lua_pushvfstring(L, fmt, ap);
	va_end(ap);
	if (argname != NULL)
		msg = lua_pushfstring(L, "%s: %s", argname, msg);
	return luaL_argerror(L, arg, msg);
}

