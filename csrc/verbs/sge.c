/*
 * verbs/sge.c: scatter/gather entries and memory window binds read from Lua
 * tables: the memory an MR names, for a WR (datapath/wr_parse.c), a bind
 * (mw:bind), an advice (pd:advise_mr), SRQ tag-matching ops and rdma_cm's
 * posts.
 *
 *   qp:post_recv{wr_id = 1, sg_list = {{mr = mr, offset = 0, length = 64}}}
 *   qp:post_send{sge = {addr = a, length = n, lkey = k}, ...}  -- one SGE
 *   mw:bind(qp, {mr = mr, addr = a, length = n, mw_access_flags = {"remote_read"}})
 * An SGE is {addr=, length=, lkey=} (passed as is, the device checks it) or
 * {mr=, offset=, length=} (checked against the MR here).
 */
#include <stdio.h>
#include <string.h>

#include "verbs/sge.h"
#include "verbs/verbs.h"

static const char *const sge_fields[] = {"addr", "length", "lkey", "mr", "offset", NULL};

/* Parses the SGE table at idx.  An mr= SGE is checked against its MR here,
 * and its MR recorded in src so a prepared list can check it again when it
 * is posted; every field is read before the MR is looked at, so nothing runs
 * between its check and the use of its pointer. */
static void parse_sge(lua_State *L, int idx, struct ibv_sge *sge, struct ibvl_sge_src *src)
{
	ibvl_check_fields(L, idx, "sge", sge_fields);
	memset(src, 0, sizeof *src);
	int has_mr = ibvl_has_field(L, idx, "mr");
	if (!has_mr) {
		if (ibvl_has_field(L, idx, "offset"))
			ibvl_error(L, "field 'offset' needs field 'mr' (or give addr, length, lkey)");
		sge->addr = ibvl_u64_field(L, idx, "addr", 0);
		sge->length = (uint32_t)ibvl_int_field(L, idx, "length", 0, 0, UINT32_MAX);
		sge->lkey = (uint32_t)ibvl_int_field(L, idx, "lkey", 0, 0, UINT32_MAX);
		return;
	}
	if (ibvl_has_field(L, idx, "addr") || ibvl_has_field(L, idx, "lkey"))
		ibvl_error(L, "give either mr (with offset, length) or addr, length, lkey");
	int has_len = ibvl_has_field(L, idx, "length");
	lua_Integer off = ibvl_int_field(L, idx, "offset", 0, 0, INT64_MAX);
	lua_Integer len = ibvl_int_field(L, idx, "length", 0, 0, UINT32_MAX);
	struct ibvl_obj *mro = ibvl_obj_field(L, idx, "mr", &ibvl_mr_class);
	/* from here on no Lua code runs until the SGE is filled */
	struct ibv_mr *mr = mro->ptr;
	lua_Integer size = (lua_Integer)mr->length;
	if (!has_len)
		len = off <= size ? size - off : 0;
	if (off > size || len > size - off) {
		char why[96];
		snprintf(why, sizeof why, "offset %lld + length %lld lie outside the MR's %lld bytes",
		         (long long)off, (long long)len, (long long)size);
		ibvl_error(L, "%s", why);
	}
	sge->addr = (uintptr_t)mr->addr + (uint64_t)off;
	sge->length = (uint32_t)len;
	sge->lkey = mr->lkey;
	src->mr = mro;
}

/* Reads sg_list (an array of SGE tables) or sge (one SGE table) of the WR
 * table at idx into sge[0..max_sge) and src; returns the count. */
int ibvl_parse_sges(lua_State *L, int idx, struct ibv_sge *sge, struct ibvl_sge_src *src,
                    int max_sge)
{
	int n = 0;
	if (ibvl_getfield(L, idx, "sge") != LUA_TNIL) {
		if (max_sge < 1)
			ibvl_error(L, "field 'sge': this list has no room for SGEs");
		int saved = ibvl_path_push("sge", 0);
		parse_sge(L, lua_gettop(L), &sge[0], &src[0]);
		ibvl_path_pop(saved);
		n = 1;
	}
	lua_pop(L, 1);
	int t = ibvl_getfield(L, idx, "sg_list");
	if (t != LUA_TNIL) {
		if (n > 0)
			ibvl_error(L, "give either 'sge' or 'sg_list', not both");
		if (t != LUA_TTABLE)
			ibvl_error(L, "field 'sg_list': array of SGE tables expected, got %s",
			           luaL_typename(L, -1));
		n = (int)lua_rawlen(L, -1);
		lua_pushnil(L);
		int has_keys = lua_next(L, -2);
		lua_pop(L, has_keys ? 2 : 0);
		if (n == 0 && has_keys)
			ibvl_error(L, "field 'sg_list': array of SGE tables expected, got a table "
			              "without elements (one SGE: sg_list = {{...}} or sge = {...})");
		if (n > max_sge)
			ibvl_error(L, "field 'sg_list': %d SGEs, at most %d here", n, max_sge);
		for (int j = 0; j < n; j++) {
			int saved = ibvl_path_push("sg_list", j + 1);
			if (lua_rawgeti(L, -1, j + 1), lua_type(L, -1) != LUA_TTABLE)
				ibvl_error(L, "SGE table expected, got %s", luaL_typename(L, -1));
			parse_sge(L, lua_gettop(L), &sge[j], &src[j]);
			lua_pop(L, 1);
			ibvl_path_pop(saved);
		}
	}
	lua_pop(L, 1);
	return n;
}

static const char *const bind_fields[] = {"mr", "addr", "length", "mw_access_flags", NULL};

/* Reads a bind_info table (mw:bind, a bind_mw WR): the MR last, and its
 * address and length as defaults, with nothing run in between. */
struct ibvl_obj *ibvl_parse_bind_info(lua_State *L, int b, struct ibv_mw_bind_info *bi)
{
	if (lua_type(L, b) != LUA_TTABLE)
		ibvl_error(L, "bind_info: table expected, got %s", luaL_typename(L, b));
	ibvl_check_fields(L, b, "bind_info", bind_fields);
	int has_addr = ibvl_has_field(L, b, "addr"), has_len = ibvl_has_field(L, b, "length");
	bi->addr = ibvl_u64_field(L, b, "addr", 0);
	bi->length = ibvl_u64_field(L, b, "length", 0);
	bi->mw_access_flags =
		(unsigned int)ibvl_flags_field(L, b, "mw_access_flags", ibvl_access_flags, 0);
	struct ibvl_obj *mr = ibvl_obj_field(L, b, "mr", &ibvl_mr_class);
	if (mr == NULL) /* providers (rxe) read the MR's lkey even to unbind */
		ibvl_error(L, "bind_info: field 'mr' is required (length 0 unbinds)");
	bi->mr = mr->ptr;
	if (!has_addr)
		bi->addr = (uintptr_t)bi->mr->addr;
	if (!has_len)
		bi->length = bi->mr->length;
	return mr;
}
