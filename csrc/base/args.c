/*
 * args.c: argument checks, strict table-field readers, private copies of
 * argument tables, enum/flag conversions and output tables (args.h).
 *
 *   ibvl_check_fields(L, 2, "attr", allowed);   -- unknown key raises
 *   n = ibvl_int_field(L, 2, "max_wr", 16, 1, INT32_MAX);
 *   t = ibvl_enum_field(L, 2, "qp_type", ibvl_qp_types, -1);
 */
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "base/args.h"
#include "base/err.h"
#include "ibvl_config.h"

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
	lua_Integer v = 0;
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
	const char *sep = "";
	for (; e->name != NULL; e++) {
		if (ibvl_enum_absent(e))
			continue;
		luaL_addstring(&b, sep);
		luaL_addchar(&b, '\'');
		luaL_addstring(&b, e->name);
		luaL_addchar(&b, '\'');
		sep = ", ";
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

/* The value at idx looked up in e: a name of e, or an integer: any integer
 * with any_int (a flags mask), else only one of e's values (a provider may
 * index a table with it); raises "<what>: invalid value 'x' (one of ...)". */
static lua_Integer lookup_value(lua_State *L, int idx, const struct ibvl_enum *e,
                                const char *field, int arg, int any_int)
{
	lua_Integer v;
	if (ibvl_tointeger(L, idx, &v)) {
		if (any_int)
			return v;
		for (const struct ibvl_enum *p = e; p->name != NULL; p++)
			if (p->value == v && !ibvl_enum_absent(p))
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
		if (strcmp(p->name, s) == 0) {
			if (ibvl_enum_absent(p))
				return ibvl_error(L, "%s: '%s' needs rdma-core %d or later; built against %s",
				                  what_str(L, field, arg), s,
				                  (int)(p->value - IBVL_ABSENT_BASE), IBVL_RDMA_CORE_BUILT);
			return p->value;
		}
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
	lua_Integer v = 0;
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
		if (e->value != 0 && !ibvl_enum_absent(e) && (value & e->value) == e->value) {
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

void ibvl_set_enum(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v)
{
	ibvl_push_enum(L, e, v);
	lua_setfield(L, -2, field);
}

