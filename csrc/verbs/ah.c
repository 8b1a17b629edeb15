/*
 * ah.c: address handles for UD.
 *
 *   local ah = assert(pd:create_ah{port_num = 1, grh = {dgid = gid, sgid_index = 1}})
 *   local ah2 = assert(pd:create_ah_from_wc(wc_table_or_wcs, i, grh_bytes, port_num))
 *   ctx:init_ah_from_wc(port_num, wc, grh_bytes) -> ah_attr table
 *   ibvl_parse_ah_attr / ibvl_push_ah_attr: ah_attr tables for qp.c and the cm
 *   qp:post_send{ah = ah, remote_qpn = n, remote_qkey = k, sg_list = {...}}
 */
#include <stddef.h>
#include <string.h>

#include "verbs/cq.h"
#include "verbs/verbs.h"

static int destroy_ah(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_ah(ptr);
}

const struct ibvl_class ibvl_ah_class = {"ibverbs.ah", destroy_ah, "ibv_destroy_ah", NULL, 0};

static int l_create_ah(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof a);
	ibvl_parse_ah_attr(L, 2, &a);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_ah_class, sizeof *o, &g);
	o->ptr = ibv_create_ah(pd->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_ah", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

static const char *const ah_fields[] = {"dlid", "sl", "src_path_bits", "static_rate",
                                        "is_global", "port_num", "grh", NULL};
static const char *const grh_fields[] = {"dgid", "flow_label", "sgid_index", "hop_limit",
                                         "traffic_class", NULL};

/* ah_attr tables (also qp:modify's ah_attr and alt_ah_attr, cm UD events):
 * a grh table makes the address global. */
void ibvl_parse_ah_attr(lua_State *L, int idx, struct ibv_ah_attr *ah)
{
	ibvl_check_fields(L, idx, "ah_attr", ah_fields);
	ah->dlid = (uint16_t)ibvl_int_field(L, idx, "dlid", 0, 0, UINT16_MAX);
	ah->sl = (uint8_t)ibvl_int_field(L, idx, "sl", 0, 0, 15);
	ah->src_path_bits = (uint8_t)ibvl_int_field(L, idx, "src_path_bits", 0, 0, 127);
	ah->static_rate = (uint8_t)ibvl_int_field(L, idx, "static_rate", 0, 0, 255);
	ah->port_num = (uint8_t)ibvl_int_field(L, idx, "port_num", 1, 1, 255);
	ibvl_getfield(L, idx, "grh");
	int g = lua_gettop(L);
	ah->is_global = (uint8_t)ibvl_bool_field(L, idx, "is_global", !lua_isnil(L, g));
	if (!lua_isnil(L, g)) {
		ibvl_check_fields(L, g, "grh", grh_fields);
		ibvl_gid_field(L, g, "dgid", &ah->grh.dgid);
		ah->grh.flow_label = (uint32_t)ibvl_int_field(L, g, "flow_label", 0, 0, 0xfffff);
		ah->grh.sgid_index = (uint8_t)ibvl_int_field(L, g, "sgid_index", 0, 0, 255);
		ah->grh.hop_limit = (uint8_t)ibvl_int_field(L, g, "hop_limit", 1, 0, 255);
		ah->grh.traffic_class = (uint8_t)ibvl_int_field(L, g, "traffic_class", 0, 0, 255);
	}
	lua_pop(L, 1);
}

#define T struct ibv_ah_attr
static const struct ibvl_field ah_out[] = {
	IBVL_FIELD(T, dlid, IBVL_F_INT, NULL), IBVL_FIELD(T, sl, IBVL_F_INT, NULL),
	IBVL_FIELD(T, src_path_bits, IBVL_F_INT, NULL), IBVL_FIELD(T, static_rate, IBVL_F_INT, NULL),
	IBVL_FIELD(T, is_global, IBVL_F_BOOL, NULL), IBVL_FIELD(T, port_num, IBVL_F_INT, NULL),
	IBVL_FIELDS_END,
};
#undef T
#define T struct ibv_global_route
static const struct ibvl_field grh_out[] = {
	IBVL_FIELD(T, dgid, IBVL_F_GID, NULL), IBVL_FIELD(T, flow_label, IBVL_F_INT, NULL),
	IBVL_FIELD(T, sgid_index, IBVL_F_INT, NULL), IBVL_FIELD(T, hop_limit, IBVL_F_INT, NULL),
	IBVL_FIELD(T, traffic_class, IBVL_F_INT, NULL), IBVL_FIELDS_END,
};
#undef T

/* An ah_attr table; grh only when the address is global. */
void ibvl_push_ah_attr(lua_State *L, const struct ibv_ah_attr *ah)
{
	lua_createtable(L, 0, 7);
	ibvl_set_fields(L, ah, ah_out);
	if (ah->is_global) {
		ibvl_push_fields(L, &ah->grh, grh_out);
		lua_setfield(L, -2, "grh");
	}
}

/* The same, as an IBVL_F_PUSH field (qp:query, cm UD events). */
void ibvl_push_ah_attr_at(lua_State *L, const void *ah)
{
	ibvl_push_ah_attr(L, ah);
}

/* A completion from a wc_array (wcs, i) or a wc table's fields (arg, arg+1). */
static void check_wc(lua_State *L, int arg, struct ibv_wc *wc, int *next)
{
	memset(wc, 0, sizeof *wc);
	if (lua_isuserdata(L, arg)) {
		struct ibvl_wc_array *w = ibvl_check_wcs(L, arg);
		int i = (int)ibvl_check_range(L, arg + 1, 1, w->n);
		*wc = w->wc[i - 1];
		*next = arg + 2;
		return;
	}
	if (lua_type(L, arg) != LUA_TTABLE)
		luaL_argerror(L, arg, lua_pushfstring(L, "wc table or wc_array expected, got %s",
		                                      luaL_typename(L, arg)));
	wc->src_qp = (uint32_t)ibvl_int_field(L, arg, "src_qp", 0, 0, 0xffffff);
	wc->slid = (uint16_t)ibvl_int_field(L, arg, "slid", 0, 0, UINT16_MAX);
	wc->sl = (uint8_t)ibvl_int_field(L, arg, "sl", 0, 0, 15);
	wc->dlid_path_bits = (uint8_t)ibvl_int_field(L, arg, "dlid_path_bits", 0, 0, 127);
	wc->pkey_index = (uint16_t)ibvl_int_field(L, arg, "pkey_index", 0, 0, UINT16_MAX);
	ibvl_getfield(L, arg, "wc_flags");
	if (!lua_isnil(L, -1))
		wc->wc_flags = (unsigned int)ibvl_check_flags(L, lua_gettop(L), ibvl_wc_flags);
	lua_pop(L, 1);
	*next = arg + 1;
}

/* The 40-byte GRH that a UD receive wrote at the start of its buffer. */
static const struct ibv_grh *check_grh(lua_State *L, int arg)
{
	size_t len;
	const char *g = ibvl_check_lstring(L, arg, &len);
	if (len < sizeof(struct ibv_grh))
		luaL_argerror(L, arg, "the 40 GRH bytes expected");
	return (const struct ibv_grh *)g;
}

/* pd:create_ah_from_wc(wc, grh, port_num) */
static int l_create_ah_from_wc(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibv_wc wc;
	int next;
	check_wc(L, 2, &wc, &next);
	const struct ibv_grh *grh = check_grh(L, next);
	uint8_t port = (uint8_t)ibvl_check_range(L, next + 1, 1, 255);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_ah_class, sizeof *o, &g);
	o->ptr = ibv_create_ah_from_wc(pd->ptr, &wc, (struct ibv_grh *)grh, port);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_ah_from_wc", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

/* ctx:init_ah_from_wc(port_num, wc, grh) -> ah_attr table */
static int l_init_ah_from_wc(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	uint8_t port = (uint8_t)ibvl_check_range(L, 2, 1, 255);
	struct ibv_wc wc;
	int next;
	check_wc(L, 3, &wc, &next);
	const struct ibv_grh *grh = check_grh(L, next);
	ibvl_guard_end(L, &g);
	struct ibv_ah_attr a;
	memset(&a, 0, sizeof a);
	int rc = ibv_init_ah_from_wc(ctx->ptr, port, &wc, (struct ibv_grh *)grh, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_init_ah_from_wc", rc < 0 ? errno : rc);
	ibvl_push_ah_attr(L, &a);
	return 1;
}

void ibvl_open_ah(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	static const luaL_Reg pd_methods[] = {
		{"create_ah", l_create_ah}, {"create_ah_from_wc", l_create_ah_from_wc}, {NULL, NULL},
	};
	static const luaL_Reg ctx_methods[] = {{"init_ah_from_wc", l_init_ah_from_wc}, {NULL, NULL}};
	ibvl_register(L, &ibvl_ah_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
