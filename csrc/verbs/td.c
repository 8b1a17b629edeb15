/*
 * td.c: thread domains, and parent domains (a PD with a thread domain).
 *
 *   local td = assert(ctx:alloc_td())                  -- ibv_alloc_td
 *   local ppd = assert(ctx:alloc_parent_domain{pd = pd, td = td})
 *   ctx:create_qp_ex{pd = ppd, ...}; ctx:create_cq_ex{..., parent_domain = ppd}
 * A parent domain is an ibverbs.pd (verbs takes it wherever it takes a PD,
 * and ibv_dealloc_pd frees it); it keeps its pd and td alive.  The custom
 * allocator callbacks and pd_context of ibv_parent_domain_init_attr are not
 * offered: a Lua allocator would run inside the provider.
 */
#include <string.h>

#include "verbs/verbs.h"

static int destroy_td(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_dealloc_td(ptr);
}

const struct ibvl_class ibvl_td_class = {"ibverbs.td", destroy_td, "ibv_dealloc_td", NULL, 0};

static const char *const td_fields[] = {"comp_mask", NULL};

/* ctx:alloc_td([{comp_mask = 0}]) */
static int l_alloc_td(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_td_init_attr a = {0};
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "attr", td_fields);
		a.comp_mask = (uint32_t)ibvl_int_field(L, 2, "comp_mask", 0, 0, UINT32_MAX);
	}
	struct ibvl_obj *td = ibvl_new(L, &ibvl_td_class, sizeof *td, &g);
	td->ptr = ibv_alloc_td(ctx->ptr, &a);
	if (td->ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_td", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

static const char *const pad_fields[] = {"pd", "td", NULL};

/* ctx:alloc_parent_domain{pd = pd [, td = td]} -> an ibverbs.pd */
static int l_alloc_parent_domain(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", pad_fields);
	struct ibvl_obj *pd = ibvl_obj_field_keep(L, 2, "pd", &ibvl_pd_class);
	int pdi = lua_gettop(L);
	struct ibvl_obj *td = ibvl_obj_field_keep(L, 2, "td", &ibvl_td_class);
	int tdi = lua_gettop(L);
	if (pd == NULL)
		ibvl_error(L, "attr: field 'pd' is required");
	struct ibvl_obj *o = ibvl_new(L, &ibvl_pd_class, sizeof *o, &g);
	struct ibv_parent_domain_init_attr a;
	memset(&a, 0, sizeof a);
	a.pd = pd->ptr;
	a.td = td != NULL ? td->ptr : NULL;
	o->ptr = ibv_alloc_parent_domain(ctx->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_parent_domain", errno);
	ibvl_use(L, -1, 1);
	ibvl_use(L, -1, pdi);
	if (td != NULL)
		ibvl_use(L, -1, tdi);
	return 1;
}

void ibvl_open_td(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {
		{"alloc_td", l_alloc_td}, {"alloc_parent_domain", l_alloc_parent_domain},
		{NULL, NULL},
	};
	ibvl_register(L, &ibvl_td_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
