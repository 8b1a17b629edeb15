/*
 * mw.c: memory windows, type 1 and 2.
 *
 *   local mw = assert(pd:alloc_mw(1))            -- or 2, "type_2"
 *   local rkey = assert(mw:bind(qp, {mr = mr, addr = a, length = n,
 *                      mw_access_flags = {"remote_write"}}, {wr_id = 1, send_flags = {"signaled"}}))
 *   -- type 2: qp:post_send{opcode = "bind_mw", mw = mw, rkey = ibv.inc_rkey(mw.rkey), bind_info = {...}}
 *   mw.rkey, mw.type
 */
#include <string.h>

#include "verbs/verbs.h"
#include "verbs/sge.h"

static int destroy_mw(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_dealloc_mw(ptr);
}

static int mw_field(lua_State *L, void *obj, const char *key)
{
	struct ibv_mw *mw = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "rkey") == 0)
		lua_pushinteger(L, mw->rkey);
	else if (strcmp(key, "type") == 0)
		lua_pushinteger(L, mw->type == IBV_MW_TYPE_1 ? 1 : 2);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, mw->handle);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_mw_class = {"ibverbs.mw", destroy_mw, "ibv_dealloc_mw", mw_field, 0};

static int l_alloc_mw(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	enum ibv_mw_type type = (enum ibv_mw_type)ibvl_opt_enum(L, 2, ibvl_mw_types, IBV_MW_TYPE_1);
	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)
		return luaL_argerror(L, 2, "memory window type 1 or 2 expected");
	struct ibvl_obj *o = ibvl_new(L, &ibvl_mw_class, sizeof *o, &g);
	o->ptr = ibv_alloc_mw(pd->ptr, type);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_mw", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

static const char *const wr_fields[] = {"wr_id", "send_flags", NULL};

/* mw:bind(qp, bind_info [, {wr_id=, send_flags=}]) -> the new rkey (ibv_bind_mw, type 1) */
static int l_bind(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *mw = ibvl_check(L, 1, &ibvl_mw_class);
	struct ibvl_qp *qp = ibvl_check_qp(L, 2);
	struct ibv_mw_bind b;
	memset(&b, 0, sizeof b);
	b.send_flags = IBV_SEND_SIGNALED;
	if (lua_istable(L, 4)) {
		ibvl_check_fields(L, 4, "wr", wr_fields);
		b.wr_id = ibvl_u64_field(L, 4, "wr_id", 0);
		b.send_flags = (unsigned int)ibvl_flags_field(L, 4, "send_flags", ibvl_send_flags,
		                                              IBV_SEND_SIGNALED);
	}
	if (lua_type(L, 3) == LUA_TTABLE) { /* read once; the copy keeps the MR until the call */
		ibvl_copy_arg(L, 3, 1);
		lua_replace(L, 3);
	}
	ibvl_parse_bind_info(L, 3, &b.bind_info);
	ibvl_guard_end(L, &g);
	int rc = ibv_bind_mw(qp->o.ptr, mw->ptr, &b);
	if (rc != 0)
		return ibvl_fail(L, "ibv_bind_mw", rc);
	lua_pushinteger(L, ((struct ibv_mw *)mw->ptr)->rkey);
	return 1;
}

/* ibv.inc_rkey(rkey): the next rkey for a type 2 bind (ibv_inc_rkey) */
static int l_inc_rkey(lua_State *L)
{
	lua_pushinteger(L, ibv_inc_rkey((uint32_t)ibvl_check_range(L, 1, 0, UINT32_MAX)));
	return 1;
}

void ibvl_open_mw(lua_State *L)
{
	static const luaL_Reg methods[] = {{"bind", l_bind}, {NULL, NULL}};
	static const luaL_Reg pd_methods[] = {{"alloc_mw", l_alloc_mw}, {NULL, NULL}};
	ibvl_register(L, &ibvl_mw_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
	lua_pushcfunction(L, l_inc_rkey);
	lua_setfield(L, -2, "inc_rkey");
}
