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
 * Their SGEs and bind_info are read by verbs/sge.c.
 */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "datapath/wr.h"
#include "verbs/sge.h"
#include "verbs/verbs.h"

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

