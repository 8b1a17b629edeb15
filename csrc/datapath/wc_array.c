/*
 * wc_array.c: reusable arrays of work completions for allocation-free polling.
 *
 *   local wcs = ibv.wc_array(64)
 *   local n = cq:poll(wcs)
 *   for i = 1, n do
 *     if wcs:status(i) ~= "success" then error(wcs:status(i)) end
 *     handle(wcs:wr_id(i), wcs:byte_len(i), wcs:opcode(i))
 *   end
 *   wcs:get(i [, t]) -> the whole completion as a table; #wcs, wcs:count()
 * Accessors take 1 <= i <= #wcs and allocate nothing.
 */
#include <endian.h>
#include <stddef.h>
#include <string.h>

#include "verbs/cq.h"
#include "datapath/datapath.h"
#include "verbs/verbs.h"

static const char wcs_key; /* its metatable, by address (ibvl_type_key) */

struct ibvl_wc_array *ibvl_check_wcs(lua_State *L, int arg)
{
	struct ibvl_wc_array *w = ibvl_test_key(L, arg, &wcs_key);
	return w != NULL ? w : luaL_checkudata(L, arg, IBVL_WC_ARRAY); /* raises */
}

/* The wc_array and the 1-based index at arg 2, bounds checked. */
static struct ibv_wc *check_index(lua_State *L)
{
	struct ibvl_wc_array *w = ibvl_check_wcs(L, 1);
	lua_Integer i = luaL_checkinteger(L, 2);
	if (i < 1 || i > w->n)
		luaL_argerror(L, 2, lua_pushfstring(L, "index %d outside the %d completions",
		                                    (int)i, w->n));
	return &w->wc[i - 1];
}

static int l_wc_array(lua_State *L)
{
	int n = (int)ibvl_check_range(L, 1, 1, 1 << 20);
	struct ibvl_wc_array *w =
		lua_newuserdatauv(L, sizeof *w + (size_t)n * sizeof(struct ibv_wc), 0);
	memset(w, 0, sizeof *w + (size_t)n * sizeof(struct ibv_wc));
	w->n = n;
	luaL_setmetatable(L, IBVL_WC_ARRAY);
	return 1;
}

#define T struct ibv_wc
static const struct ibvl_field wc_out[] = { /* imm_data, invalidated_rkey: by wc_flags */
	IBVL_FIELD(T, wr_id, IBVL_F_U64, NULL), IBVL_FIELD(T, status, IBVL_F_ENUM, ibvl_wc_statuses),
	IBVL_FIELD(T, opcode, IBVL_F_ENUM, ibvl_wc_opcodes), IBVL_FIELD(T, vendor_err, IBVL_F_INT, NULL),
	IBVL_FIELD(T, byte_len, IBVL_F_INT, NULL), IBVL_FIELD(T, qp_num, IBVL_F_INT, NULL),
	IBVL_FIELD(T, src_qp, IBVL_F_INT, NULL), IBVL_FIELD(T, wc_flags, IBVL_F_FLAGS, ibvl_wc_flags),
	IBVL_FIELD(T, pkey_index, IBVL_F_INT, NULL), IBVL_FIELD(T, slid, IBVL_F_INT, NULL),
	IBVL_FIELD(T, sl, IBVL_F_INT, NULL), IBVL_FIELD(T, dlid_path_bits, IBVL_F_INT, NULL),
	IBVL_FIELDS_END,
};
#undef T

/* A completion as a table (wcs:get, cq:poll(n)): not the accessors' path. */
void ibvl_push_wc(lua_State *L, const struct ibv_wc *wc)
{
	lua_createtable(L, 0, 14);
	ibvl_set_fields(L, wc, wc_out);
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		ibvl_set_int(L, "imm_data", be32toh(wc->imm_data));
	if (wc->wc_flags & IBV_WC_WITH_INV)
		ibvl_set_int(L, "invalidated_rkey", wc->invalidated_rkey);
}

static int l_get(lua_State *L)
{
	const struct ibv_wc *wc = check_index(L);
	ibvl_push_wc(L, wc);
	return 1;
}

static int l_wr_id(lua_State *L)
{
	ibvl_push_u64(L, check_index(L)->wr_id);
	return 1;
}

/* The name of a value from the upvalue table (value -> interned name), so
 * the accessor never creates a string; unknown values come as integers. */
static int push_name(lua_State *L, lua_Integer value)
{
	lua_rawgeti(L, lua_upvalueindex(1), value);
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_pushinteger(L, value);
	}
	return 1;
}

static int l_status(lua_State *L)
{
	return push_name(L, check_index(L)->status);
}

static int l_opcode(lua_State *L)
{
	return push_name(L, check_index(L)->opcode);
}

static void add_named(lua_State *L, const char *name, lua_CFunction f, const struct ibvl_enum *e)
{
	lua_newtable(L);
	for (; e->name != NULL; e++) {
		lua_pushstring(L, e->name);
		lua_rawseti(L, -2, e->value);
	}
	lua_pushcclosure(L, f, 1);
	lua_setfield(L, -2, name);
}

/* imm_data in host order, or nil when the completion carries none */
static int l_imm_data(lua_State *L)
{
	const struct ibv_wc *wc = check_index(L);
	if (wc->wc_flags & IBV_WC_WITH_IMM)
		lua_pushinteger(L, be32toh(wc->imm_data));
	else
		lua_pushnil(L);
	return 1;
}

#define WC_INT_ACCESSOR(field)                                  \
	static int l_##field(lua_State *L)                      \
	{                                                       \
		lua_pushinteger(L, check_index(L)->field);      \
		return 1;                                       \
	}
WC_INT_ACCESSOR(byte_len)
WC_INT_ACCESSOR(qp_num)
WC_INT_ACCESSOR(src_qp)
WC_INT_ACCESSOR(vendor_err)
WC_INT_ACCESSOR(wc_flags)
WC_INT_ACCESSOR(pkey_index)
WC_INT_ACCESSOR(slid)
WC_INT_ACCESSOR(sl)
WC_INT_ACCESSOR(dlid_path_bits)
WC_INT_ACCESSOR(invalidated_rkey)

static int wc_len(lua_State *L)
{
	lua_pushinteger(L, ibvl_check_wcs(L, 1)->n);
	return 1;
}

static int l_count(lua_State *L)
{
	lua_pushinteger(L, ibvl_check_wcs(L, 1)->count);
	return 1;
}

void ibvl_open_wc_array(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"get", l_get}, {"wr_id", l_wr_id}, {"imm_data", l_imm_data}, {"byte_len", l_byte_len}, {"qp_num", l_qp_num},
		{"src_qp", l_src_qp}, {"vendor_err", l_vendor_err}, {"wc_flags", l_wc_flags},
		{"pkey_index", l_pkey_index}, {"slid", l_slid}, {"sl", l_sl},
		{"dlid_path_bits", l_dlid_path_bits}, {"invalidated_rkey", l_invalidated_rkey},
		{"count", l_count}, {NULL, NULL},
	};
	ibvl_register_plain(L, IBVL_WC_ARRAY, methods, wc_len);
	add_named(L, "status", l_status, ibvl_wc_statuses);
	add_named(L, "opcode", l_opcode, ibvl_wc_opcodes);
	lua_pop(L, 1);
	ibvl_type_key(L, IBVL_WC_ARRAY, &wcs_key);
	lua_pushcfunction(L, l_wc_array);
	lua_setfield(L, -2, "wc_array");
}
