/*
 * pd.c: protection domains.
 *
 *   local pd <close> = assert(ctx:alloc_pd())
 *   pd:close()   -- nil, "ibv_dealloc_pd: Device or resource busy ...", EBUSY while used
 *   local pd2 = assert(ctx2:import_pd(pd.handle))  -- ctx2 from ibv.import_device
 *   pd2:close()  -- ibv_unimport_pd: the PD itself stays with its owner
 */
#include <string.h>

#include "verbs/verbs.h"

static int destroy_pd(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_dealloc_pd(ptr);
}

static int pd_field(lua_State *L, void *obj, const char *key)
{
	struct ibv_pd *pd = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "handle") != 0)
		return 0;
	lua_pushinteger(L, pd->handle);
	return 1;
}

const struct ibvl_class ibvl_pd_class = {"ibverbs.pd", destroy_pd, "ibv_dealloc_pd", pd_field, 0};

static int l_alloc_pd(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_pd_class, sizeof *o, &g);
	o->ptr = ibv_alloc_pd(ctx->ptr);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_pd", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

static int l_context(lua_State *L)
{
	ibvl_check(L, 1, &ibvl_pd_class);
	return ibvl_push_ref(L, 1, 1);
}

/* ---- imported PDs: ctx:import_pd(handle), closed with ibv_unimport_pd ----- */
#if IBVL_HAVE_IMPORT
static int unimport_pd(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	ibv_unimport_pd(ptr);
	return 0;
}

static const struct ibvl_class imported_pd = {"ibverbs.pd", unimport_pd, "ibv_unimport_pd",
                                              pd_field, 0};
#endif

/* ctx:import_pd(pd_handle): the PD pd.handle names, on a context imported
 * (ibv.import_device) from the one that made it */
static int l_import_pd(lua_State *L)
{
#if IBVL_HAVE_IMPORT
	ibvl_late_need(L, IBVL_LATE_ibv_import_pd, "ctx:import_pd");
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	uint32_t handle = (uint32_t)ibvl_check_range(L, 2, 0, UINT32_MAX);
	struct ibvl_obj *o = ibvl_new(L, &imported_pd, sizeof *o, &g);
	o->ptr = ibv_import_pd(ctx->ptr, handle);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_import_pd", errno);
	ibvl_use(L, -1, 1);
	return 1;
#else
	return ibvl_absent(L, "ctx:import_pd", IBVL_SINCE_IMPORT);
#endif
}

void ibvl_open_pd(lua_State *L)
{
	static const luaL_Reg methods[] = {{"context", l_context}, {NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {
		{"alloc_pd", l_alloc_pd}, {"import_pd", l_import_pd}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_pd_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
