/*
 * wq.c: receive work queues (the receive side of an RSS QP).
 *
 *   local wq = assert(ctx:create_wq{pd = pd, cq = cq, max_wr = 64, max_sge = 1
 *                                   [, wq_type = "rq", create_flags = {"cvlan_stripping"}]})
 *   wq:modify{wq_state = "rdy" [, curr_wq_state = "reset", flags = ..., flags_mask = ...]}
 *   wq:post_recv(wr | {wr, ...} | recv_wrs [, first, count])   -- ibv_post_wq_recv
 *   wq.wq_num, wq.state, wq.max_wr, wq.max_sge
 * WQs are gathered into an indirection table (rwq_ind_tbl.c) that an RSS QP
 * hashes incoming packets over.
 */
#include <string.h>

#include "verbs/verbs.h"

struct wq {
	struct ibvl_obj o; /* o.ptr: struct ibv_wq * */
	uint32_t max_wr, max_sge;
};

static int destroy_wq(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_wq(ptr);
}

static int wq_field(lua_State *L, void *obj, const char *key)
{
	struct wq *w = obj;
	struct ibv_wq *q = w->o.ptr;
	if (strcmp(key, "wq_num") == 0)
		lua_pushinteger(L, q->wq_num);
	else if (strcmp(key, "state") == 0)
		ibvl_push_enum(L, ibvl_wq_states, q->state);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, q->handle);
	else if (strcmp(key, "max_wr") == 0)
		lua_pushinteger(L, w->max_wr);
	else if (strcmp(key, "max_sge") == 0)
		lua_pushinteger(L, w->max_sge);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_wq_class = {"ibverbs.wq", destroy_wq, "ibv_destroy_wq", wq_field, 0};

static const struct ibvl_enum wq_types[] = {{"rq", IBV_WQT_RQ}, {NULL, 0}};
static const char *const wq_fields[] = {"wq_type", "max_wr", "max_sge", "pd", "cq",
                                        "create_flags", NULL};

/* ctx:create_wq{wq_type = "rq", max_wr=, max_sge=, pd=, cq=, create_flags=} */
static int l_create_wq(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "init_attr", wq_fields);
	struct ibv_wq_init_attr a;
	memset(&a, 0, sizeof a);
	a.wq_type = (enum ibv_wq_type)ibvl_enum_field(L, 2, "wq_type", wq_types, IBV_WQT_RQ);
	a.max_wr = (uint32_t)ibvl_int_field(L, 2, "max_wr", 16, 1, UINT32_MAX);
	a.max_sge = (uint32_t)ibvl_int_field(L, 2, "max_sge", 1, 1, UINT32_MAX);
	if (ibvl_has_field(L, 2, "create_flags")) {
		a.create_flags = (uint32_t)ibvl_flags_field(L, 2, "create_flags", ibvl_wq_flags, 0);
		a.comp_mask |= IBV_WQ_INIT_ATTR_FLAGS;
	}
	struct ibvl_obj *pd = ibvl_obj_field_keep(L, 2, "pd", &ibvl_pd_class);
	struct ibvl_obj *cq = ibvl_obj_field_keep(L, 2, "cq", &ibvl_cq_class);
	int used = lua_gettop(L) - 1;
	if (pd == NULL || cq == NULL)
		ibvl_error(L, "init_attr: fields 'pd' and 'cq' are required");
	struct wq *w = ibvl_new(L, &ibvl_wq_class, sizeof *w, &g);
	a.pd = pd->ptr;
	a.cq = cq->ptr;
	w->o.ptr = ibv_create_wq(ctx->ptr, &a);
	if (w->o.ptr == NULL)
		return ibvl_fail(L, "ibv_create_wq", errno);
	w->max_wr = a.max_wr; /* ibv_create_wq writes back what it granted */
	w->max_sge = a.max_sge;
	ibvl_use(L, -1, used);
	ibvl_use(L, -1, used + 1);
	ibvl_track(L, -1);
	return 1;
}

static const char *const modify_fields[] = {"wq_state", "curr_wq_state", "flags", "flags_mask",
                                            NULL};

/* wq:modify{wq_state=, curr_wq_state=, flags=, flags_mask=}: the mask from the fields */
static int wq_modify(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *w = ibvl_check(L, 1, &ibvl_wq_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", modify_fields);
	struct ibv_wq_attr a;
	memset(&a, 0, sizeof a);
	if (ibvl_has_field(L, 2, "wq_state")) {
		a.wq_state = (enum ibv_wq_state)ibvl_enum_field(L, 2, "wq_state", ibvl_wq_states, 0);
		a.attr_mask |= IBV_WQ_ATTR_STATE;
	}
	if (ibvl_has_field(L, 2, "curr_wq_state")) {
		a.curr_wq_state = (enum ibv_wq_state)ibvl_enum_field(L, 2, "curr_wq_state",
		                                                     ibvl_wq_states, 0);
		a.attr_mask |= IBV_WQ_ATTR_CURR_STATE;
	}
	if (ibvl_has_field(L, 2, "flags") || ibvl_has_field(L, 2, "flags_mask")) {
		a.flags = (uint32_t)ibvl_flags_field(L, 2, "flags", ibvl_wq_flags, 0);
		a.flags_mask = (uint32_t)ibvl_flags_field(L, 2, "flags_mask", ibvl_wq_flags,
		                                          a.flags);
		a.attr_mask |= IBV_WQ_ATTR_FLAGS;
	}
	if (a.attr_mask == 0)
		return luaL_argerror(L, 2, "attr: no attribute given");
	ibvl_guard_end(L, &g);
	return ibvl_result(L, "ibv_modify_wq", ibv_modify_wq(w->ptr, &a));
}

void ibvl_open_wq(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"modify", wq_modify}, {"post_recv", ibvl_wq_post_recv}, {NULL, NULL},
	};
	static const luaL_Reg ctx_methods[] = {{"create_wq", l_create_wq}, {NULL, NULL}};
	ibvl_register(L, &ibvl_wq_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
