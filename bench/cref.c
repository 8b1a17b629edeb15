/*
 * bench/cref.c: the C reference loop of bench/ffi_post_poll.lua, built by
 * bench/run for each interpreter (a Lua module, so both can call it).
 *
 *   local cref = require "cref"
 *   local polled = cref.post_poll(qp, cq, wr, wc, batches, batch)
 * qp, cq, wr and wc are raw pointers (core.rawptr, core.rawmem): the loop
 * posts the recv chain wr `batches` times and polls cq once after each post,
 * exactly what the Lua and FFI variants do.
 */
#include <infiniband/verbs.h>
#include <lauxlib.h>
#include <lua.h>

int luaopen_cref(lua_State *L);

static int l_post_poll(lua_State *L)
{
	struct ibv_qp *qp = lua_touserdata(L, 1);
	struct ibv_cq *cq = lua_touserdata(L, 2);
	struct ibv_recv_wr *wr = lua_touserdata(L, 3), *bad;
	struct ibv_wc *wc = lua_touserdata(L, 4);
	int batches = (int)luaL_checkinteger(L, 5), batch = (int)luaL_checkinteger(L, 6);
	if (qp == NULL || cq == NULL || wr == NULL || wc == NULL)
		return luaL_error(L, "cref.post_poll: raw pointers expected");
	lua_Integer polled = 0;
	for (int i = 0; i < batches; i++) {
		int rc = ibv_post_recv(qp, wr, &bad);
		if (rc != 0)
			return luaL_error(L, "ibv_post_recv: %d (batch %d)", rc, i);
		int n = ibv_poll_cq(cq, batch, wc);
		if (n < 0)
			return luaL_error(L, "ibv_poll_cq failed");
		polled += n;
	}
	lua_pushinteger(L, polled);
	return 1;
}

int luaopen_cref(lua_State *L)
{
	static const luaL_Reg funcs[] = {{"post_poll", l_post_poll}, {NULL, NULL}};
	lua_createtable(L, 0, 1);
	luaL_setfuncs(L, funcs, 0);
	return 1;
}
