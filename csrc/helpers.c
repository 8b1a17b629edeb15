/*
 * helpers.c: argument checks, strict table-field readers, error returns and
 * enum/flag conversions shared by every object file.
 *
 *   ibvl_check_fields(L, 2, "attr", allowed);   -- unknown key raises
 *   n = ibvl_int_field(L, 2, "max_wr", 16, 1, INT32_MAX);
 *   t = ibvl_enum_field(L, 2, "qp_type", ibvl_qp_types, -1);
 *   return ibvl_fail(L, "ibv_create_qp", errno);  -- nil, msg, errno
 */
#include <arpa/inet.h>
#include <endian.h>
#include <math.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ibvl.h"

#if LUA_VERSION_NUM < 502
int ibvl_isinteger(lua_State *L, int idx)
{
	if (lua_type(L, idx) != LUA_TNUMBER)
		return 0;
	lua_Number n = lua_tonumber(L, idx);
	return n == (lua_Number)(lua_Integer)n;
}
#endif

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

static const char *value_desc(lua_State *L, int idx)
{
	if (lua_type(L, idx) == LUA_TSTRING)
		return lua_pushfstring(L, "'%s'", lua_tostring(L, idx));
	if (lua_type(L, idx) == LUA_TNUMBER)
		return lua_pushfstring(L, "%f", lua_tonumber(L, idx));
	return luaL_typename(L, idx);
}

/* Raises for any key of the table at idx that is not in allowed. */
void ibvl_check_fields(lua_State *L, int idx, const char *argname, const char *const *allowed)
{
	idx = lua_absindex(L, idx);
	if (lua_type(L, idx) != LUA_TTABLE)
		ibvl_error(L, "%s: table expected, got %s", argname, luaL_typename(L, idx));
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			ibvl_error(L, "%s: unexpected %s key (field names are strings)", argname,
			           luaL_typename(L, -1));
		const char *k = lua_tostring(L, -1);
		const char *const *a = allowed;
		while (*a != NULL && strcmp(*a, k) != 0)
			a++;
		if (*a == NULL)
			ibvl_error(L, "%s: unknown field '%s'", argname, k);
	}
}

/* Pushes t[field] without metamethods: an argument table's __index never runs
 * while a call reads it. */
int ibvl_getfield(lua_State *L, int idx, const char *field)
{
	idx = lua_absindex(L, idx);
	lua_pushstring(L, field);
	lua_rawget(L, idx);
	return lua_type(L, -1);
}

int ibvl_has_field(lua_State *L, int idx, const char *field)
{
	ibvl_getfield(L, idx, field);
	int has = !lua_isnil(L, -1);
	lua_pop(L, 1);
	return has;
}

static const char *range_msg(lua_State *L, lua_Integer v, lua_Integer min, lua_Integer max)
{
	char buf[96];
	snprintf(buf, sizeof buf, "%lld out of range [%lld, %lld]", (long long)v, (long long)min,
	         (long long)max);
	lua_pushstring(L, buf);
	return lua_tostring(L, -1);
}

/* An integer, or a float with an exact integer value (2^10), alike under
 * Lua 5.4 and LuaJIT; never a string. */
int ibvl_tointeger(lua_State *L, int idx, lua_Integer *v)
{
	if (lua_type(L, idx) != LUA_TNUMBER)
		return 0;
#if LUA_VERSION_NUM >= 503
	int isint;
	*v = lua_tointegerx(L, idx, &isint);
	return isint;
#else
	lua_Number n = lua_tonumber(L, idx);
	if (!(n >= -9223372036854775808.0 && n < 9223372036854775808.0) || n != (lua_Number)(lua_Integer)n)
		return 0;
	*v = (lua_Integer)n;
	return 1;
#endif
}

static lua_Integer check_int_value(lua_State *L, int idx, const char *field, lua_Integer min,
                                   lua_Integer max)
{
	lua_Integer v;
	if (!ibvl_tointeger(L, idx, &v))
		ibvl_error(L, "field '%s': integer expected, got %s", field, value_desc(L, idx));
	if (v < min || v > max)
		ibvl_error(L, "field '%s': %s", field, range_msg(L, v, min, max));
	return v;
}

lua_Integer ibvl_int_field(lua_State *L, int idx, const char *field, lua_Integer def,
                           lua_Integer min, lua_Integer max)
{
	ibvl_getfield(L, idx, field);
	lua_Integer v = lua_isnil(L, -1) ? def : check_int_value(L, -1, field, min, max);
	lua_pop(L, 1);
	return v;
}

static uint64_t to_u64(lua_State *L, int idx, int *ok)
{
	*ok = 1;
#if LUA_VERSION_NUM >= 503
	if (lua_isinteger(L, idx))
		return (uint64_t)lua_tointeger(L, idx);
#endif
	if (lua_type(L, idx) == LUA_TNUMBER) {
		lua_Number n = lua_tonumber(L, idx);
		if (n >= 0 && n < 18446744073709551616.0 && n == (lua_Number)(uint64_t)n)
			return (uint64_t)n;
	}
	*ok = 0;
	return 0;
}

uint64_t ibvl_u64_field(lua_State *L, int idx, const char *field, uint64_t def)
{
	ibvl_getfield(L, idx, field);
	uint64_t v = def;
	if (!lua_isnil(L, -1)) {
		int ok;
		v = to_u64(L, -1, &ok);
		if (!ok)
			ibvl_error(L, "field '%s': 64-bit integer expected, got %s", field,
			           value_desc(L, -1));
	}
	lua_pop(L, 1);
	return v;
}

int ibvl_bool_field(lua_State *L, int idx, const char *field, int def)
{
	ibvl_getfield(L, idx, field);
	int v = def;
	if (!lua_isnil(L, -1)) {
		if (!lua_isboolean(L, -1))
			ibvl_error(L, "field '%s': boolean expected, got %s", field, luaL_typename(L, -1));
		v = lua_toboolean(L, -1);
	}
	lua_pop(L, 1);
	return v;
}

static const char *enum_names(lua_State *L, const struct ibvl_enum *e)
{
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	for (; e->name != NULL; e++) {
		luaL_addchar(&b, '\'');
		luaL_addstring(&b, e->name);
		luaL_addstring(&b, e[1].name != NULL ? "', " : "'");
	}
	luaL_pushresult(&b);
	return lua_tostring(L, -1);
}

/* What an enum or flag value is, for messages: "field 'x'" or "bad argument #n".
 * Made only when raising: reading a valid value allocates nothing, so no
 * finalizer can run between a caller's object check and its use. */
static const char *what_str(lua_State *L, const char *field, int arg)
{
	return field != NULL ? lua_pushfstring(L, "field '%s'", field)
	                     : lua_pushfstring(L, "bad argument #%d", arg);
}

/* Looks the value at idx up in e; raises "<what>: invalid value 'x' (one of ...)". */
/* A name of e, or an integer: any integer with any_int (a flags mask), else
 * only one of e's values (a provider may index a table with it). */
static lua_Integer lookup_value(lua_State *L, int idx, const struct ibvl_enum *e,
                                const char *field, int arg, int any_int)
{
	lua_Integer v;
	if (ibvl_tointeger(L, idx, &v)) {
		if (any_int)
			return v;
		for (const struct ibvl_enum *p = e; p->name != NULL; p++)
			if (p->value == v)
				return v;
		char num[24];
		snprintf(num, sizeof num, "%lld", (long long)v);
		const char *what = what_str(L, field, arg);
		return ibvl_error(L, "%s: unknown value %s (expected one of %s)", what, num,
		                  enum_names(L, e));
	}
	if (lua_type(L, idx) != LUA_TSTRING)
		return ibvl_error(L, "%s: name or integer expected, got %s", what_str(L, field, arg),
		                  luaL_typename(L, idx));
	const char *s = lua_tostring(L, idx);
	for (const struct ibvl_enum *p = e; p->name != NULL; p++)
		if (strcmp(p->name, s) == 0)
			return p->value;
	const char *what = what_str(L, field, arg);
	return ibvl_error(L, "%s: invalid value '%s' (expected one of %s)", what, s,
	                  enum_names(L, e));
}

static lua_Integer lookup_enum(lua_State *L, int idx, const struct ibvl_enum *e,
                               const char *field, int arg)
{
	return lookup_value(L, idx, e, field, arg, 0);
}

static lua_Integer lookup_flags(lua_State *L, int idx, const struct ibvl_enum *e,
                                const char *field, int arg)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		return lookup_value(L, idx, e, field, arg, 1);
	lua_Integer v = 0;
	int n = (int)lua_rawlen(L, idx);
	for (int i = 1; i <= n; i++) {
		lua_rawgeti(L, idx, i);
		v |= lookup_value(L, lua_gettop(L), e, field, arg, 1);
		lua_pop(L, 1);
	}
	return v;
}

typedef lua_Integer (*lookup_fn)(lua_State *L, int idx, const struct ibvl_enum *e,
                                 const char *field, int arg);

static lua_Integer lookup_field(lua_State *L, int idx, const char *field,
                                const struct ibvl_enum *e, lua_Integer def, lookup_fn lookup)
{
	ibvl_getfield(L, idx, field);
	int top = lua_gettop(L);
	lua_Integer v = def;
	if (!lua_isnil(L, top))
		v = lookup(L, top, e, field, 0);
	lua_settop(L, top - 1);
	return v;
}

lua_Integer ibvl_enum_field(lua_State *L, int idx, const char *field,
                            const struct ibvl_enum *e, lua_Integer def)
{
	return lookup_field(L, idx, field, e, def, lookup_enum);
}

lua_Integer ibvl_flags_field(lua_State *L, int idx, const char *field,
                             const struct ibvl_enum *e, lua_Integer def)
{
	return lookup_field(L, idx, field, e, def, lookup_flags);
}

/* The value at idx (an absolute index) of the field named field, read
 * already (a parser going over a table once with lua_next): checked as
 * ibvl_int_field, ibvl_enum_field and ibvl_flags_field check theirs. */
lua_Integer ibvl_int_value(lua_State *L, int idx, const char *field, lua_Integer min,
                           lua_Integer max)
{
	return check_int_value(L, idx, field, min, max);
}

lua_Integer ibvl_enum_value(lua_State *L, int idx, const char *field, const struct ibvl_enum *e)
{
	return lookup_enum(L, idx, e, field, 0);
}

lua_Integer ibvl_flags_value(lua_State *L, int idx, const char *field, const struct ibvl_enum *e)
{
	return lookup_flags(L, idx, e, field, 0);
}

const char *ibvl_str_field(lua_State *L, int idx, const char *field, size_t *len)
{
	ibvl_getfield(L, idx, field);
	const char *s = NULL;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			ibvl_error(L, "field '%s': string expected, got %s", field, luaL_typename(L, -1));
		s = lua_tolstring(L, -1, len);
	}
	lua_pop(L, 1); /* the string stays alive in the table */
	return s;
}

/* Returns the object in field (or NULL when absent) and leaves the field's
 * value on the stack, where it keeps the object alive for the caller. */
void *ibvl_obj_field_keep(lua_State *L, int idx, const char *field,
                          const struct ibvl_class *cls)
{
	ibvl_getfield(L, idx, field);
	void *o = NULL;
	if (!lua_isnil(L, -1)) {
		o = ibvl_test_class(L, -1, cls);
		if (o == NULL)
			ibvl_error(L, "field '%s': %s expected, got %s", field, cls->name,
			           luaL_typename(L, -1));
		if (((struct ibvl_obj *)o)->ptr == NULL)
			ibvl_error(L, "field '%s': attempt to use a closed %s", field, cls->name);
		ibvl_guard_log(o);
	}
	return o;
}

/* ---- private copies of argument tables --------------------------------------
 * A table a script passes may hold its objects weakly (__mode = "v"), so an
 * object read from it and popped may be collected by the next allocation;
 * and a field read twice may change in between.  A call that reads objects
 * from argument tables and pops them first copies each table once
 * (ibvl_copy_arg: every value read once, raw), parses the copy, and keeps the
 * copy on its stack (or in a user value) until the verbs call: the copy, a
 * plain table no script can reach, holds every object the call uses.  The
 * copies carry a private metatable, so ibvl_obj_field can tell one. */
static const char private_key; /* the registry key of the copies' metatable */

static void push_private_mt(lua_State *L)
{
	lua_pushlightuserdata(L, (void *)&private_key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_createtable(L, 0, 1);
		lua_pushliteral(L, "ibverbs.private");
		lua_setfield(L, -2, "__metatable");
		lua_pushlightuserdata(L, (void *)&private_key);
		lua_pushvalue(L, -2);
		lua_rawset(L, LUA_REGISTRYINDEX);
	}
}

static int copy_level(lua_State *L, int idx, int depth, int mt)
{
	idx = lua_absindex(L, idx);
	luaL_checkstack(L, 6, "argument tables nested too deeply");
	lua_newtable(L);
	int t = lua_gettop(L);
	lua_pushnil(L);
	while (lua_next(L, idx)) { /* key and value stay on the stack until stored */
		if (depth > 0 && lua_type(L, -1) == LUA_TTABLE) {
			copy_level(L, -1, depth - 1, mt);
			lua_remove(L, -2);
		}
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, t);
	}
	lua_pushvalue(L, mt);
	lua_setmetatable(L, t);
	return t;
}

int ibvl_copy_arg(lua_State *L, int idx, int depth)
{
	idx = lua_absindex(L, idx);
	push_private_mt(L);
	int mt = lua_gettop(L);
	copy_level(L, idx, depth, mt);
	lua_remove(L, mt);
	return lua_gettop(L);
}

int ibvl_is_copy(lua_State *L, int idx)
{
	if (!lua_getmetatable(L, idx))
		return 0;
	push_private_mt(L);
	int is = lua_rawequal(L, -1, -2);
	lua_pop(L, 2);
	return is;
}

/* Returns the object in field (or NULL when absent) and leaves nothing on the
 * stack: only for a private copy (ibvl_copy_arg), which keeps the object. */
void *ibvl_obj_field(lua_State *L, int idx, const char *field, const struct ibvl_class *cls)
{
	if (!ibvl_is_copy(L, idx))
		luaL_error(L, "ibverbs: internal error: field '%s' read from a table the call "
		              "does not own", field);
	void *o = ibvl_obj_field_keep(L, idx, field, cls);
	lua_pop(L, 1);
	return o;
}

static int parse_gid(lua_State *L, int idx, union ibv_gid *gid)
{
	size_t len;
	const char *s = lua_tolstring(L, idx, &len);
	if (lua_type(L, idx) != LUA_TSTRING)
		return 0;
	if (inet_pton(AF_INET6, s, gid->raw) == 1)
		return 1;
	if (len == 16) { /* raw bytes ("::ffff:192.0.2.1" is 16 characters too) */
		memcpy(gid->raw, s, 16);
		return 1;
	}
	return 0;
}

void ibvl_gid_field(lua_State *L, int idx, const char *field, union ibv_gid *gid)
{
	ibvl_getfield(L, idx, field);
	if (!lua_isnil(L, -1) && !parse_gid(L, -1, gid))
		ibvl_error(L, "field '%s': GID expected (\"fe80::1\" form or 16 raw bytes), got %s",
		           field, value_desc(L, -1));
	lua_pop(L, 1);
}

lua_Integer ibvl_check_range(lua_State *L, int arg, lua_Integer min, lua_Integer max)
{
	lua_Integer v;
	if (!ibvl_tointeger(L, arg, &v))
		luaL_argerror(L, arg, lua_pushfstring(L, "integer expected, got %s",
		                                      value_desc(L, arg)));
	if (v < min || v > max)
		luaL_argerror(L, arg, range_msg(L, v, min, max));
	return v;
}

lua_Integer ibvl_opt_range(lua_State *L, int arg, lua_Integer def, lua_Integer min,
                           lua_Integer max)
{
	return lua_isnoneornil(L, arg) ? def : ibvl_check_range(L, arg, min, max);
}

/* A string argument as it is: numbers are not converted (a conversion would
 * allocate, and so could run finalizers after the caller's object checks). */
const char *ibvl_check_lstring(lua_State *L, int arg, size_t *len)
{
	if (lua_type(L, arg) != LUA_TSTRING)
		luaL_argerror(L, arg, lua_pushfstring(L, "string expected, got %s",
		                                      luaL_typename(L, arg)));
	return lua_tolstring(L, arg, len);
}

const char *ibvl_opt_lstring(lua_State *L, int arg, size_t *len)
{
	if (lua_isnoneornil(L, arg)) {
		if (len != NULL)
			*len = 0;
		return NULL;
	}
	return ibvl_check_lstring(L, arg, len);
}

uint64_t ibvl_check_u64(lua_State *L, int arg)
{
	int ok;
	uint64_t v = to_u64(L, arg, &ok);
	if (!ok)
		luaL_argerror(L, arg, "64-bit integer expected");
	return v;
}

lua_Integer ibvl_check_enum(lua_State *L, int arg, const struct ibvl_enum *e)
{
	return lookup_enum(L, arg, e, NULL, arg);
}

/* A name of e or any integer: for calls that name values (ibv.wc_status_str(1000) is
 * "unknown") and never hand them to a provider. */
lua_Integer ibvl_check_enum_or_int(lua_State *L, int arg, const struct ibvl_enum *e)
{
	return lookup_value(L, arg, e, NULL, arg, 1);
}

lua_Integer ibvl_opt_enum(lua_State *L, int arg, const struct ibvl_enum *e, lua_Integer def)
{
	return lua_isnoneornil(L, arg) ? def : ibvl_check_enum(L, arg, e);
}

lua_Integer ibvl_check_flags(lua_State *L, int arg, const struct ibvl_enum *e)
{
	return lookup_flags(L, arg, e, NULL, arg);
}

lua_Integer ibvl_opt_flags(lua_State *L, int arg, const struct ibvl_enum *e, lua_Integer def)
{
	return lua_isnoneornil(L, arg) ? def : ibvl_check_flags(L, arg, e);
}

void ibvl_check_gid(lua_State *L, int arg, union ibv_gid *gid)
{
	if (!parse_gid(L, arg, gid))
		luaL_argerror(L, arg, "GID expected (\"fe80::1\" form or 16 raw bytes)");
}

const char *ibvl_enum_name(const struct ibvl_enum *e, lua_Integer value)
{
	for (; e->name != NULL; e++)
		if (e->value == value)
			return e->name;
	return NULL;
}

void ibvl_push_enum(lua_State *L, const struct ibvl_enum *e, lua_Integer value)
{
	const char *name = ibvl_enum_name(e, value);
	if (name != NULL)
		lua_pushstring(L, name);
	else
		lua_pushinteger(L, value);
}

/* A set of flags as an array of names; unknown bits come last as an integer. */
void ibvl_push_flags(lua_State *L, const struct ibvl_enum *e, lua_Integer value)
{
	lua_newtable(L);
	int n = 0;
	for (; e->name != NULL; e++) {
		if (e->value != 0 && (value & e->value) == e->value) {
			lua_pushstring(L, e->name);
			lua_rawseti(L, -2, ++n);
			value &= ~e->value;
		}
	}
	if (value != 0) {
		lua_pushinteger(L, value);
		lua_rawseti(L, -2, ++n);
	}
}

void ibvl_push_gid(lua_State *L, const union ibv_gid *gid)
{
	char buf[INET6_ADDRSTRLEN];
	inet_ntop(AF_INET6, gid->raw, buf, sizeof buf);
	lua_pushstring(L, buf);
}

void ibvl_push_guid(lua_State *L, __be64 guid)
{
	uint64_t g = be64toh(guid);
	char buf[24];
	snprintf(buf, sizeof buf, "%04x:%04x:%04x:%04x", (unsigned)(g >> 48) & 0xffff,
	         (unsigned)(g >> 32) & 0xffff, (unsigned)(g >> 16) & 0xffff, (unsigned)g & 0xffff);
	lua_pushstring(L, buf);
}

/* 64-bit values: exact Lua integers (wrapping above 2^63) on Lua 5.3+, numbers
 * on LuaJIT. */
void ibvl_push_u64(lua_State *L, uint64_t v)
{
#if LUA_VERSION_NUM >= 503
	lua_pushinteger(L, (lua_Integer)v);
#else
	lua_pushnumber(L, (lua_Number)v);
#endif
}

/* Pushes the table given as argument arg (filled in place) or a new one. */
int ibvl_out_table(lua_State *L, int arg, int nrec)
{
	if (lua_istable(L, arg))
		lua_pushvalue(L, arg);
	else if (lua_isnoneornil(L, arg))
		lua_createtable(L, 0, nrec);
	else
		luaL_argerror(L, arg, "table to fill (or nil) expected");
	return 1;
}

void ibvl_set_int(lua_State *L, const char *field, lua_Integer v)
{
	lua_pushinteger(L, v);
	lua_setfield(L, -2, field);
}

void ibvl_set_u64(lua_State *L, const char *field, uint64_t v)
{
	ibvl_push_u64(L, v);
	lua_setfield(L, -2, field);
}

void ibvl_set_str(lua_State *L, const char *field, const char *v)
{
	lua_pushstring(L, v);
	lua_setfield(L, -2, field);
}

void ibvl_set_bool(lua_State *L, const char *field, int v)
{
	lua_pushboolean(L, v);
	lua_setfield(L, -2, field);
}

void ibvl_set_enum(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v)
{
	ibvl_push_enum(L, e, v);
	lua_setfield(L, -2, field);
}

void ibvl_set_flags(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v)
{
	ibvl_push_flags(L, e, v);
	lua_setfield(L, -2, field);
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
