/*
 * xrcd.c: XRC domains.
 *
 *   local xrcd, msg, errno = ctx:open_xrcd{fd = -1, oflags = ibv.O_CREAT}
 *   -- on rxe: nil, "ibv_open_xrcd: Operation not supported", 95
 *   local f = io.open("/tmp/domain", "w")
 *   local xrcd = assert(ctx:open_xrcd{fd = f, oflags = ibv.O_CREAT})  -- fd: integer or file
 *   xrcd:close()            -- ibv_close_xrcd; nil, msg, EBUSY while QPs or SRQs use it
 * ctx:open_qp (another handle on an XRC target QP) is in qp.c.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "verbs/verbs.h"

static int destroy_xrcd(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_close_xrcd(ptr);
}

const struct ibvl_class ibvl_xrcd_class = {"ibverbs.xrcd", destroy_xrcd, "ibv_close_xrcd", NULL, 0};

/* The fd field: an integer (-1: no inode) or an open Lua file.  Both Lua 5.4's
 * luaL_Stream and LuaJIT's file userdata start with the FILE pointer. */
static int fd_field(lua_State *L, int idx)
{
	ibvl_getfield(L, idx, "fd");
	int fd = -1;
	if (luaL_testudata(L, -1, "FILE*") != NULL) {
		FILE *f = *(FILE **)lua_touserdata(L, -1);
#if LUA_VERSION_NUM >= 502
		if (((luaL_Stream *)lua_touserdata(L, -1))->closef == NULL)
			f = NULL;
#endif
		if (f == NULL)
			ibvl_error(L, "field 'fd': attempt to use a closed file");
		fd = fileno(f);
	} else if (!lua_isnil(L, -1)) {
		fd = (int)ibvl_int_field(L, idx, "fd", -1, -1, INT32_MAX);
	}
	lua_pop(L, 1);
	return fd;
}

/* The errno to report for a failed XRC call: EOPNOTSUPP on a device without
 * XRC (where the call cannot succeed whatever its arguments), else err. */
int ibvl_xrc_errno(struct ibv_context *ctx, int err)
{
	struct ibv_device_attr a;
	if (ibv_query_device(ctx, &a) == 0 && !(a.device_cap_flags & IBV_DEVICE_XRC))
		return EOPNOTSUPP;
	return err;
}

static const char *const xrcd_fields[] = {"fd", "oflags", NULL};

/* ctx:open_xrcd{fd = -1 | fd | file, oflags = O_CREAT | O_EXCL ...} */
static int l_open_xrcd(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_xrcd_init_attr a;
	memset(&a, 0, sizeof a);
	a.fd = -1;
	a.oflags = O_CREAT;
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "attr", xrcd_fields);
		a.fd = fd_field(L, 2);
		a.oflags = (int)ibvl_int_field(L, 2, "oflags", O_CREAT, 0, INT32_MAX);
	}
	a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	struct ibvl_obj *o = ibvl_new(L, &ibvl_xrcd_class, sizeof *o, &g);
	o->ptr = ibv_open_xrcd(ctx->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_open_xrcd", ibvl_xrc_errno(ctx->ptr, errno));
	ibvl_use(L, -1, 1);
	return 1;
}

void ibvl_open_xrcd(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {
		{"open_xrcd", l_open_xrcd}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_xrcd_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
	lua_pushinteger(L, O_CREAT);
	lua_setfield(L, -2, "O_CREAT");
	lua_pushinteger(L, O_EXCL);
	lua_setfield(L, -2, "O_EXCL");
}
