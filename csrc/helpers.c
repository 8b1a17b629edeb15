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

/* For calls that return 0 or an errno value (or -1 with errno set). */
int ibvl_result(lua_State *L, const char *call, int rc)
{
	if (rc == 0) {
		lua_pushboolean(L, 1);
		return 1;
	}
	return ibvl_fail(L, call, rc == -1 ? errno : rc);
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
	luaL_checktype(L, idx, LUA_TTABLE);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "%s: unexpected %s key (field names are strings)", argname,
			           luaL_typename(L, -1));
		const char *k = lua_tostring(L, -1);
		const char *const *a = allowed;
		while (*a != NULL && strcmp(*a, k) != 0)
			a++;
		if (*a == NULL)
			luaL_error(L, "%s: unknown field '%s'", argname, k);
	}
}

int ibvl_has_field(lua_State *L, int idx, const char *field)
{
	lua_getfield(L, idx, field);
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

static lua_Integer check_int_value(lua_State *L, int idx, const char *field, lua_Integer min,
                                   lua_Integer max)
{
	if (!lua_isinteger(L, idx))
		luaL_error(L, "field '%s': integer expected, got %s", field, value_desc(L, idx));
	lua_Integer v = lua_tointeger(L, idx);
	if (v < min || v > max)
		luaL_error(L, "field '%s': %s", field, range_msg(L, v, min, max));
	return v;
}

lua_Integer ibvl_int_field(lua_State *L, int idx, const char *field, lua_Integer def,
                           lua_Integer min, lua_Integer max)
{
	lua_getfield(L, idx, field);
	lua_Integer v = lua_isnil(L, -1) ? def : check_int_value(L, -1, field, min, max);
	lua_pop(L, 1);
	return v;
}

static uint64_t to_u64(lua_State *L, int idx, int *ok)
{
	*ok = 1;
	if (lua_isinteger(L, idx))
		return (uint64_t)lua_tointeger(L, idx);
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
	lua_getfield(L, idx, field);
	uint64_t v = def;
	if (!lua_isnil(L, -1)) {
		int ok;
		v = to_u64(L, -1, &ok);
		if (!ok)
			luaL_error(L, "field '%s': 64-bit integer expected, got %s", field,
			           value_desc(L, -1));
	}
	lua_pop(L, 1);
	return v;
}

int ibvl_bool_field(lua_State *L, int idx, const char *field, int def)
{
	lua_getfield(L, idx, field);
	int v = def;
	if (!lua_isnil(L, -1)) {
		if (!lua_isboolean(L, -1))
			luaL_error(L, "field '%s': boolean expected, got %s", field, luaL_typename(L, -1));
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

/* Looks the string at idx up in e; raises "<what>: invalid value 'x' (one of ...)". */
static lua_Integer lookup_enum(lua_State *L, int idx, const struct ibvl_enum *e, const char *what)
{
	if (lua_isinteger(L, idx))
		return lua_tointeger(L, idx);
	if (lua_type(L, idx) != LUA_TSTRING)
		return luaL_error(L, "%s: name or integer expected, got %s", what, luaL_typename(L, idx));
	const char *s = lua_tostring(L, idx);
	for (const struct ibvl_enum *p = e; p->name != NULL; p++)
		if (strcmp(p->name, s) == 0)
			return p->value;
	return luaL_error(L, "%s: invalid value '%s' (expected one of %s)", what, s,
	                  enum_names(L, e));
}

static lua_Integer lookup_flags(lua_State *L, int idx, const struct ibvl_enum *e, const char *what)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		return lookup_enum(L, idx, e, what);
	lua_Integer v = 0;
	int n = (int)lua_rawlen(L, idx);
	for (int i = 1; i <= n; i++) {
		lua_rawgeti(L, idx, i);
		v |= lookup_enum(L, lua_gettop(L), e, what);
		lua_pop(L, 1);
	}
	return v;
}

typedef lua_Integer (*lookup_fn)(lua_State *L, int idx, const struct ibvl_enum *e,
                                 const char *what);

static lua_Integer lookup_field(lua_State *L, int idx, const char *field,
                                const struct ibvl_enum *e, lua_Integer def, lookup_fn lookup)
{
	lua_getfield(L, idx, field);
	int top = lua_gettop(L);
	lua_Integer v = def;
	if (!lua_isnil(L, top))
		v = lookup(L, top, e, lua_pushfstring(L, "field '%s'", field));
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

const char *ibvl_str_field(lua_State *L, int idx, const char *field, size_t *len)
{
	lua_getfield(L, idx, field);
	const char *s = NULL;
	if (!lua_isnil(L, -1)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			luaL_error(L, "field '%s': string expected, got %s", field, luaL_typename(L, -1));
		s = lua_tolstring(L, -1, len);
	}
	lua_pop(L, 1); /* the string stays alive in the table */
	return s;
}

/* Returns the object in field (or NULL when absent) and leaves nothing on the stack. */
void *ibvl_obj_field(lua_State *L, int idx, const char *field, const struct ibvl_class *cls)
{
	lua_getfield(L, idx, field);
	void *o = NULL;
	if (!lua_isnil(L, -1)) {
		o = luaL_testudata(L, -1, cls->name);
		if (o == NULL)
			luaL_error(L, "field '%s': %s expected, got %s", field, cls->name,
			           luaL_typename(L, -1));
		if (((struct ibvl_obj *)o)->ptr == NULL)
			luaL_error(L, "field '%s': attempt to use a closed %s", field, cls->name);
	}
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
	lua_getfield(L, idx, field);
	if (!lua_isnil(L, -1) && !parse_gid(L, -1, gid))
		luaL_error(L, "field '%s': GID expected (\"fe80::1\" form or 16 raw bytes), got %s",
		           field, value_desc(L, -1));
	lua_pop(L, 1);
}

lua_Integer ibvl_check_range(lua_State *L, int arg, lua_Integer min, lua_Integer max)
{
	lua_Integer v = luaL_checkinteger(L, arg);
	if (!lua_isinteger(L, arg))
		luaL_argerror(L, arg, "integer expected");
	if (v < min || v > max)
		luaL_argerror(L, arg, range_msg(L, v, min, max));
	return v;
}

lua_Integer ibvl_opt_range(lua_State *L, int arg, lua_Integer def, lua_Integer min,
                           lua_Integer max)
{
	return lua_isnoneornil(L, arg) ? def : ibvl_check_range(L, arg, min, max);
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
	int top = lua_gettop(L);
	lua_Integer v = lookup_enum(L, arg, e, lua_pushfstring(L, "bad argument #%d", arg));
	lua_settop(L, top);
	return v;
}

lua_Integer ibvl_opt_enum(lua_State *L, int arg, const struct ibvl_enum *e, lua_Integer def)
{
	return lua_isnoneornil(L, arg) ? def : ibvl_check_enum(L, arg, e);
}

lua_Integer ibvl_check_flags(lua_State *L, int arg, const struct ibvl_enum *e)
{
	int top = lua_gettop(L);
	lua_Integer v = lookup_flags(L, arg, e, lua_pushfstring(L, "bad argument #%d", arg));
	lua_settop(L, top);
	return v;
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
