/*
 * xrcd.c: XRC domains.
 *
 *   local xrcd, msg, errno = ctx:open_xrcd{fd = -1, oflags = ibv.O_CREAT}
 *   -- on rxe: nil, "ibv_open_xrcd: Operation not supported", 95
 */
#include <fcntl.h>
#include <string.h>

#include "ibvl.h"

static int destroy_xrcd(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_close_xrcd(ptr);
}

const struct ibvl_class ibvl_xrcd_class = {"ibverbs.xrcd", destroy_xrcd, "ibv_close_xrcd", NULL};

static const char *const xrcd_fields[] = {"fd", "oflags", NULL};

/* ctx:open_xrcd{fd = -1 | fd, oflags = O_CREAT | O_EXCL ...} */
static int l_open_xrcd(lua_State *L)
{
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_xrcd_init_attr a;
	memset(&a, 0, sizeof a);
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		ibvl_check_fields(L, 2, "attr", xrcd_fields);
	}
	int has = lua_istable(L, 2);
	a.fd = has ? (int)ibvl_int_field(L, 2, "fd", -1, -1, INT32_MAX) : -1;
	a.oflags = has ? (int)ibvl_int_field(L, 2, "oflags", O_CREAT, 0, INT32_MAX) : O_CREAT;
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct ibvl_obj *o = ibvl_new(L, &ibvl_xrcd_class, sizeof *o);
	o->ptr = ibv_open_xrcd(ctx->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_open_xrcd", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

void ibvl_open_xrcd(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {{"open_xrcd", l_open_xrcd}, {NULL, NULL}};
	ibvl_register(L, &ibvl_xrcd_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
	lua_pushinteger(L, O_CREAT);
	lua_setfield(L, -2, "O_CREAT");
	lua_pushinteger(L, O_EXCL);
	lua_setfield(L, -2, "O_EXCL");
}
