/*
 * compat.h: the Lua C API as ibverbs.core uses it, on Lua 5.4, Lua 5.3 and
 * LuaJIT 2.1 (Lua 5.1's API).  The module keeps one user value per userdata
 * (index 1), which 5.3's single user value and LuaJIT's environment table
 * both hold.  The bottom layer: it depends on nothing of the module.
 */
#ifndef IBVL_COMPAT_H
#define IBVL_COMPAT_H

#include <lauxlib.h>
#include <lua.h>

#if LUA_VERSION_NUM < 502 && !defined(LUA_LJDIR) /* LUA_LJDIR: LuaJIT's luaconf.h */
#error "ibverbs.core needs Lua 5.3 or 5.4, or LuaJIT 2.1: plain Lua 5.1 lacks luaL_setfuncs, luaL_testudata, ..."
#endif
#if LUA_VERSION_NUM == 502
#error "ibverbs.core needs Lua 5.3 or 5.4, or LuaJIT 2.1: Lua 5.2's user values are tables only and it lacks lua_isinteger"
#endif

/* ---- Lua 5.3: one user value, set and read without an index -------------- */
#if LUA_VERSION_NUM == 503
#define lua_newuserdatauv(L, sz, nuv) lua_newuserdata(L, (sz))
#define lua_getiuservalue(L, i, n) lua_getuservalue(L, (i))
static inline int ibvl_setuservalue53(lua_State *L, int idx)
{
	lua_setuservalue(L, idx);
	return 1;
}
#define lua_setiuservalue(L, i, n) ibvl_setuservalue53(L, (i))
#endif

/* ---- Lua 5.1 (LuaJIT 2.1) compatibility ---------------------------------- */
#if LUA_VERSION_NUM < 502
#define lua_rawlen(L, i) lua_objlen(L, (i))
#define lua_newuserdatauv(L, sz, nuv) lua_newuserdata(L, (sz))
#define lua_setiuservalue(L, i, n) lua_setfenv(L, (i))
static inline int lua_getiuservalue(lua_State *L, int idx, int n)
{
	(void)n;
	lua_getfenv(L, idx);
	return LUA_TTABLE;
}
#define lua_absindex(L, i) \
	((i) > 0 || (i) <= LUA_REGISTRYINDEX ? (i) : lua_gettop(L) + (i) + 1)
static inline void ibvl_rawsetp(lua_State *L, int idx, const void *p)
{
	idx = lua_absindex(L, idx);
	lua_pushlightuserdata(L, (void *)p);
	lua_insert(L, -2);
	lua_rawset(L, idx);
}
#define lua_rawsetp(L, i, p) ibvl_rawsetp(L, (i), (p))
static inline int ibvl_isinteger(lua_State *L, int idx)
{
	if (lua_type(L, idx) != LUA_TNUMBER)
		return 0;
	lua_Number n = lua_tonumber(L, idx);
	return n == (lua_Number)(lua_Integer)n;
}
#define lua_isinteger(L, i) ibvl_isinteger(L, (i))
#endif

/* Pushes the registry's value under the light userdata key p (nil when
 * none) and returns its type: lua_rawgetp where the API has it. */
static inline int ibvl_rawgetp(lua_State *L, const void *p)
{
#if LUA_VERSION_NUM >= 503
	return lua_rawgetp(L, LUA_REGISTRYINDEX, p);
#else
	lua_pushlightuserdata(L, (void *)p);
	lua_rawget(L, LUA_REGISTRYINDEX);
	return lua_type(L, -1);
#endif
}

#endif
