/*
 * dm.c: device memory: memory on the adapter, copied to and from, and
 * registered as an MR.
 *
 *   local dm = assert(ctx:alloc_dm{length = 4096 [, log_align_req = 6]})
 *   dm:memcpy_to(0, "data")            -- ibv_memcpy_to_dm
 *   dm:memcpy_from(0, 4) --> "data"    -- ibv_memcpy_from_dm
 *   local mr = assert(pd:reg_dm_mr(dm, 0, 4096, {"local_write", "zero_based"}))
 *   dm.length                          -- what was allocated
 *   local dm2 = assert(ctx2:import_dm(dm.handle, dm.length))  -- ctx2 imported;
 *                                      -- dm2:close() unimports (ibv_unimport_dm)
 * The MR is an ibverbs.dev_mr: SGEs name it with addr (the offset in the
 * DM, zero based), length and lkey.
 */
#include <string.h>

#include "verbs/verbs.h"

struct dm {
	struct ibvl_obj o; /* o.ptr: struct ibv_dm * */
	size_t length;
};

static int destroy_dm(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_free_dm(ptr);
}

static int dm_field(lua_State *L, void *obj, const char *key)
{
	struct dm *d = obj;
	if (strcmp(key, "length") == 0)
		lua_pushinteger(L, (lua_Integer)d->length);
	else if (strcmp(key, "handle") == 0) {
#if IBVL_HAVE_IMPORT_DM /* the field came with the import verbs: a library without them lacks it */
		ibvl_late_need(L, IBVL_LATE_ibv_import_dm, "dm.handle");
		lua_pushinteger(L, ((struct ibv_dm *)d->o.ptr)->handle);
#else
		ibvl_absent(L, "dm.handle", IBVL_SINCE_IMPORT_DM);
#endif
	} else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_dm_class = {"ibverbs.dm", destroy_dm, "ibv_free_dm", dm_field, 0};

static const char *const dm_fields[] = {"length", "log_align_req", NULL};

/* ctx:alloc_dm(length | {length=, log_align_req=}) */
static int l_alloc_dm(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_alloc_dm_attr a = {0};
	if (lua_istable(L, 2)) {
		ibvl_check_fields(L, 2, "attr", dm_fields);
		a.length = (size_t)ibvl_int_field(L, 2, "length", 0, 1, (lua_Integer)1 << 40);
		a.log_align_req = (uint32_t)ibvl_int_field(L, 2, "log_align_req", 0, 0, 63);
	} else {
		a.length = (size_t)ibvl_check_range(L, 2, 1, (lua_Integer)1 << 40);
	}
	struct dm *d = ibvl_new(L, &ibvl_dm_class, sizeof *d, &g);
	d->o.ptr = ibv_alloc_dm(ctx->ptr, &a);
	if (d->o.ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_dm", errno);
	d->length = a.length;
	ibvl_use(L, -1, 1);
	return 1;
}

/* ---- imported DMs: ctx:import_dm(handle, length), closed with ibv_unimport_dm */
#if IBVL_HAVE_IMPORT_DM
static int unimport_dm(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	ibv_unimport_dm(ptr);
	return 0;
}

static const struct ibvl_class imported_dm = {"ibverbs.dm", unimport_dm, "ibv_unimport_dm",
                                              dm_field, 0};
#endif

/* ctx:import_dm(dm_handle, length): the DM dm.handle names, on a context
 * imported (ibv.import_device) from the one that made it.  The kernel does
 * not say how long it is; length (the exporter's dm.length) bounds the
 * copies. */
static int l_import_dm(lua_State *L)
{
#if IBVL_HAVE_IMPORT_DM
	ibvl_late_need(L, IBVL_LATE_ibv_import_dm, "ctx:import_dm");
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	uint32_t handle = (uint32_t)ibvl_check_range(L, 2, 0, UINT32_MAX);
	size_t length = (size_t)ibvl_check_range(L, 3, 1, (lua_Integer)1 << 40);
	struct dm *d = ibvl_new(L, &imported_dm, sizeof *d, &g);
	d->o.ptr = ibv_import_dm(ctx->ptr, handle);
	if (d->o.ptr == NULL)
		return ibvl_fail(L, "ibv_import_dm", errno);
	d->length = length;
	ibvl_use(L, -1, 1);
	return 1;
#else
	return ibvl_absent(L, "ctx:import_dm", IBVL_SINCE_IMPORT_DM);
#endif
}

/* The DM at idx, raising when closed or when offset + length lie outside it. */
static struct dm *check_range(lua_State *L, int idx, size_t off, size_t len)
{
	struct dm *d = ibvl_check(L, idx, &ibvl_dm_class);
	if (off > d->length || len > d->length - off)
		luaL_error(L, "offset %d + length %d lie outside the DM's %d bytes", (int)off,
		           (int)len, (int)d->length);
	return d;
}

/* dm:memcpy_to(offset, data) */
static int l_memcpy_to(lua_State *L)
{
	ibvl_check(L, 1, &ibvl_dm_class);
	size_t off = (size_t)ibvl_check_range(L, 2, 0, (lua_Integer)1 << 40), len;
	const char *data = ibvl_check_lstring(L, 3, &len);
	struct dm *d = check_range(L, 1, off, len);
	return ibvl_result(L, "ibv_memcpy_to_dm", ibv_memcpy_to_dm(d->o.ptr, off, data, len));
}

/* dm:memcpy_from(offset, length) -> string */
static int l_memcpy_from(lua_State *L)
{
	ibvl_check(L, 1, &ibvl_dm_class);
	size_t off = (size_t)ibvl_check_range(L, 2, 0, (lua_Integer)1 << 40);
	size_t len = (size_t)ibvl_check_range(L, 3, 0, (lua_Integer)1 << 30);
	check_range(L, 1, off, len);
	char *p = lua_newuserdatauv(L, len > 0 ? len : 1, 0);
	struct dm *d = check_range(L, 1, off, len); /* the buffer may have run a finalizer */
	int rc = ibv_memcpy_from_dm(p, d->o.ptr, off, len);
	if (rc != 0)
		return ibvl_fail(L, "ibv_memcpy_from_dm", rc);
	lua_pushlstring(L, p, len);
	return 1;
}

/* pd:reg_dm_mr(dm, offset, length [, access]) */
static int l_reg_dm_mr(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	size_t off = (size_t)ibvl_check_range(L, 3, 0, (lua_Integer)1 << 40);
	size_t len = (size_t)ibvl_check_range(L, 4, 0, (lua_Integer)1 << 40);
	unsigned int access = (unsigned int)ibvl_opt_flags(L, 5, ibvl_access_flags,
	                                                   IBV_ACCESS_LOCAL_WRITE |
	                                                   IBV_ACCESS_ZERO_BASED);
	struct dm *d = check_range(L, 2, off, len);
	struct ibvl_obj *m = ibvl_dev_mr_new(L, &g);
	m->ptr = ibv_reg_dm_mr(pd->ptr, d->o.ptr, off, len, access);
	if (m->ptr == NULL)
		return ibvl_fail(L, "ibv_reg_dm_mr", errno);
	ibvl_use(L, -1, 1);
	ibvl_use(L, -1, 2);
	return 1;
}

void ibvl_open_dm(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"memcpy_to", l_memcpy_to}, {"memcpy_from", l_memcpy_from}, {NULL, NULL},
	};
	static const luaL_Reg ctx_methods[] = {{"alloc_dm", l_alloc_dm},
	                                           {"import_dm", l_import_dm}, {NULL, NULL}};
	static const luaL_Reg pd_methods[] = {{"reg_dm_mr", l_reg_dm_mr}, {NULL, NULL}};
	ibvl_register(L, &ibvl_dm_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
}
