/*
 * counters.c: counters objects, attached to flows and read on demand.
 *
 *   local counters = assert(ctx:create_counters())
 *   counters:attach_point_flow{counter_desc = "packets", index = 0}         -- static
 *   counters:attach_point_flow({counter_desc = "bytes", index = 1}, flow)  -- dynamic
 *   qp:create_flow{..., specs = {..., {type = "action_count", counters = counters}}}
 *   counters:read(2 [, {"prefer_cached"}]) --> {packets, bytes}
 */
#include <string.h>

#include "verbs/verbs.h"

static int destroy_counters(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_counters(ptr);
}

const struct ibvl_class ibvl_counters_class = {"ibverbs.counters", destroy_counters,
                                               "ibv_destroy_counters", NULL, 0};

/* ctx:create_counters() */
static int l_create_counters(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_counters_class, sizeof *o, &g);
	struct ibv_counters_init_attr a = {0};
	o->ptr = ibv_create_counters(ctx->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_counters", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

static const char *const attach_fields[] = {"counter_desc", "index", NULL};

/* counters:attach_point_flow({counter_desc=, index=} [, flow]) */
static int l_attach_point_flow(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, &ibvl_counters_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", attach_fields);
	struct ibv_counter_attach_attr a = {0};
	a.counter_desc = (enum ibv_counter_description)ibvl_enum_field(
		L, 2, "counter_desc", ibvl_counter_descs, IBV_COUNTER_PACKETS);
	a.index = (uint32_t)ibvl_int_field(L, 2, "index", 0, 0, UINT32_MAX);
	struct ibvl_obj *flow = ibvl_opt(L, 3, &ibvl_flow_class);
	struct ibvl_obj *c = ibvl_check(L, 1, &ibvl_counters_class);
	ibvl_guard_end(L, &g);
	int rc = ibv_attach_counters_point_flow(c->ptr, &a, flow != NULL ? flow->ptr : NULL);
	return ibvl_result(L, "ibv_attach_counters_point_flow", rc);
}

static const struct ibvl_enum read_flags[] = {
	{"prefer_cached", IBV_READ_COUNTERS_ATTR_PREFER_CACHED}, {NULL, 0},
};

/* counters:read(n [, flags]) -> {v1, ..., vn} */
static int l_read(lua_State *L)
{
	ibvl_check(L, 1, &ibvl_counters_class);
	uint32_t n = (uint32_t)ibvl_check_range(L, 2, 1, 4096);
	uint32_t flags = (uint32_t)ibvl_opt_flags(L, 3, read_flags, 0);
	uint64_t *v = lua_newuserdatauv(L, n * sizeof *v, 0);
	memset(v, 0, n * sizeof *v);
	struct ibvl_obj *c = ibvl_check(L, 1, &ibvl_counters_class);
	int rc = ibv_read_counters(c->ptr, v, n, flags);
	if (rc != 0)
		return ibvl_fail(L, "ibv_read_counters", rc);
	lua_createtable(L, (int)n, 0);
	for (uint32_t i = 0; i < n; i++) {
		ibvl_push_u64(L, v[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

void ibvl_open_counters(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"attach_point_flow", l_attach_point_flow}, {"read", l_read}, {NULL, NULL},
	};
	static const luaL_Reg ctx_methods[] = {{"create_counters", l_create_counters}, {NULL, NULL}};
	ibvl_register(L, &ibvl_counters_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
