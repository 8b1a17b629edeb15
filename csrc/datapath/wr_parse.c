/*
 * wr_parse.c: work requests from Lua tables (wr.h), for posts of WR tables
 * and for a prepared list's set and fill.
 *
 *   qp:post_recv{wr_id = 1, sg_list = {{mr = mr, offset = 0, length = 64}}}
 *   qp:post_send{{wr_id = 2, opcode = "send", send_flags = {"signaled"},
 *                 sg_list = {{addr = a, length = n, lkey = k}}}, {...}}   -- a chain
 * Send WR fields: wr_id, opcode, send_flags, sg_list (or sge = {...} for one),
 * inline (a string sent inline), imm_data, invalidate_rkey, remote_addr, rkey,
 * compare_add, swap, ah, remote_qpn, remote_qkey, remote_srqn, mw, bind_info, hdr, mss.
 * An SGE is {addr=, length=, lkey=} (passed as is, the device checks it) or
 * {mr=, offset=, length=} (checked against the MR here).
 */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "verbs/verbs.h"
#include "datapath/wr.h"

/* A tso WR's header (a string the WR table keeps alive) and MSS. */
static void parse_tso(lua_State *L, int idx, struct ibv_send_wr *wr)
{
	size_t len = 0;
	const char *hdr = ibvl_str_field(L, idx, "hdr", &len);
	if (hdr == NULL)
		ibvl_error(L, "opcode 'tso' needs field 'hdr' (the packet header, a string)");
	if (len > UINT16_MAX)
		ibvl_error(L, "field 'hdr': longer than 65535 bytes");
	wr->tso.hdr = (void *)(uintptr_t)hdr;
	wr->tso.hdr_sz = (uint16_t)len;
	wr->tso.mss = (uint16_t)ibvl_int_field(L, idx, "mss", 0, 0, UINT16_MAX);
}

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

static const char *const recv_fields[] = {"wr_id", "sg_list", "sge", NULL};

void ibvl_parse_recv_wr(lua_State *L, int idx, struct ibv_recv_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge)
{
	ibvl_check_fields(L, idx, "recv wr", recv_fields);
	wr->wr_id = ibvl_u64_field(L, idx, "wr_id", 0);
	wr->sg_list = sge;
	wr->num_sge = ibvl_parse_sges(L, idx, sge, src, max_sge);
}

static const char *const send_fields[] = {
	"wr_id", "opcode", "send_flags", "sg_list", "sge", "inline", "imm_data",
	"invalidate_rkey", "remote_addr", "rkey", "compare_add", "swap", "ah", "remote_qpn",
	"remote_qkey", "remote_srqn", "xrc_remote_srq_num", "mw", "bind_info", "hdr", "mss", NULL,
};

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

static void parse_bind(lua_State *L, int idx, struct ibv_send_wr *wr, struct ibvl_wr_slot *slot)
{
	if (!ibvl_has_field(L, idx, "mw"))
		ibvl_error(L, "opcode 'bind_mw' needs field 'mw'");
	wr->bind_mw.rkey = (uint32_t)ibvl_int_field(L, idx, "rkey", 0, 0, UINT32_MAX);
	ibvl_getfield(L, idx, "bind_info");
	slot->mr = ibvl_parse_bind_info(L, lua_gettop(L), &wr->bind_mw.bind_info);
	lua_pop(L, 1);
	slot->mw = ibvl_obj_field(L, idx, "mw", &ibvl_mw_class);
	wr->bind_mw.mw = slot->mw->ptr;
}

/* The opcode-dependent part of a send WR. */
static void parse_send_union(lua_State *L, int idx, struct ibv_send_wr *wr,
                             struct ibvl_wr_slot *slot)
{
	switch (wr->opcode) {
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		wr->wr.atomic.remote_addr = ibvl_u64_field(L, idx, "remote_addr", 0);
		wr->wr.atomic.rkey = (uint32_t)ibvl_int_field(L, idx, "rkey", 0, 0, UINT32_MAX);
		wr->wr.atomic.compare_add = ibvl_u64_field(L, idx, "compare_add", 0);
		wr->wr.atomic.swap = ibvl_u64_field(L, idx, "swap", 0);
		return;
	case IBV_WR_BIND_MW:
		parse_bind(L, idx, wr, slot);
		return;
	default:
		break;
	}
	if (ibvl_has_field(L, idx, "ah")) {
		wr->wr.ud.remote_qpn = (uint32_t)ibvl_int_field(L, idx, "remote_qpn", 0, 0, 0xffffff);
		wr->wr.ud.remote_qkey = (uint32_t)ibvl_int_field(L, idx, "remote_qkey", 0, 0, UINT32_MAX);
		slot->ah = ibvl_obj_field(L, idx, "ah", &ibvl_ah_class);
		wr->wr.ud.ah = slot->ah->ptr;
	} else {
		wr->wr.rdma.remote_addr = ibvl_u64_field(L, idx, "remote_addr", 0);
		wr->wr.rdma.rkey = (uint32_t)ibvl_int_field(L, idx, "rkey", 0, 0, UINT32_MAX);
	}
}

/* Parses the send WR table at idx.  An 'inline' string becomes the single
 * SGE with IBV_SEND_INLINE; the caller keeps the string alive. */
void ibvl_parse_send_wr(lua_State *L, int idx, struct ibv_send_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge, struct ibvl_wr_slot *slot)
{
	ibvl_check_fields(L, idx, "send wr", send_fields);
	memset(wr, 0, sizeof *wr);
	memset(slot, 0, sizeof *slot);
	wr->wr_id = ibvl_u64_field(L, idx, "wr_id", 0);
	wr->opcode = (enum ibv_wr_opcode)ibvl_enum_field(L, idx, "opcode", ibvl_wr_opcodes,
	                                                 IBV_WR_SEND);
	wr->send_flags = (unsigned int)ibvl_flags_field(L, idx, "send_flags", ibvl_send_flags, 0);
	wr->sg_list = sge;
	size_t len;
	const char *data = ibvl_str_field(L, idx, "inline", &len);
	if (data != NULL) {
		if (max_sge < 1 || ibvl_has_field(L, idx, "sg_list") || ibvl_has_field(L, idx, "sge"))
			ibvl_error(L, "field 'inline': give the data either inline or in SGEs");
		if (len > UINT32_MAX)
			ibvl_error(L, "field 'inline': more than 4 GiB");
		sge->addr = (uintptr_t)data;
		sge->length = (uint32_t)len;
		sge->lkey = 0;
		memset(src, 0, sizeof *src);
		src->data = data;
		src->size = len;
		wr->num_sge = 1;
		wr->send_flags |= IBV_SEND_INLINE;
	} else {
		wr->num_sge = ibvl_parse_sges(L, idx, sge, src, max_sge);
		if (wr->send_flags & IBV_SEND_INLINE)
			for (int j = 0; j < wr->num_sge; j++)
				if (src[j].mr == NULL)
					ibvl_error(L, "send flag 'inline': the CPU copies the data, so it "
					              "must come from field 'inline' or from SGEs with 'mr' "
					              "(SGE %d has a raw addr)", j + 1);
	}
	if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
		wr->invalidate_rkey = (uint32_t)ibvl_int_field(L, idx, "invalidate_rkey", 0, 0,
		                                               UINT32_MAX);
	else
		wr->imm_data = htobe32((uint32_t)ibvl_int_field(L, idx, "imm_data", 0, 0, UINT32_MAX));
	/* remote_srqn; xrc_remote_srq_num is its OFED 1.x name */
	wr->qp_type.xrc.remote_srqn = (uint32_t)ibvl_int_field(L, idx, "remote_srqn", 0, 0,
	                                                       0xffffff);
	if (ibvl_has_field(L, idx, "xrc_remote_srq_num"))
		wr->qp_type.xrc.remote_srqn = (uint32_t)ibvl_int_field(L, idx, "xrc_remote_srq_num",
		                                                       0, 0, 0xffffff);
	parse_send_union(L, idx, wr, slot);
	if (wr->opcode == IBV_WR_TSO)
		parse_tso(L, idx, wr);
	slot->opcode = wr->opcode;
	slot->hdr = wr->tso.hdr;
	slot->hdr_sz = wr->tso.hdr_sz;
}

/* Does the prepared send WR still hold the pointers set put there (what a
 * provider follows: the AH of a UD WR, a bind's MW and MR, a TSO header),
 * under the opcode that says which?  Those it names are checked open. */
int ibvl_send_entry_sound(const struct ibv_send_wr *wr, const struct ibvl_wr_slot *s, int i,
                          char *why, size_t n)
{
	const struct ibvl_obj *objs[] = {s->ah, s->mw, s->mr};
	for (int k = 0; k < 3; k++)
		if (objs[k] != NULL && objs[k]->ptr == NULL)
			return snprintf(why, n, "WR %d: attempt to use a closed %s", i + 1,
			                objs[k]->cls->name), 0;
	const char *what = NULL;
	if ((int)wr->opcode != s->opcode)
		what = "opcode";
	else if (s->ah != NULL && wr->wr.ud.ah != s->ah->ptr)
		what = "wr.ud.ah";
	else if (s->mw != NULL && (wr->bind_mw.mw != s->mw->ptr || wr->bind_mw.bind_info.mr != s->mr->ptr))
		what = "bind_mw";
	else if (s->opcode == IBV_WR_TSO && (wr->tso.hdr != s->hdr || wr->tso.hdr_sz != s->hdr_sz))
		what = "tso header";
	if (what != NULL)
		return snprintf(why, n, "WR %d: its %s was changed (through the FFI)", i + 1, what), 0;
	return 1;
}

