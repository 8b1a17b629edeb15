/*
 * qp_ex.c: posting through the ibv_wr_* API on a QP made with send_ops_flags.
 *
 *   local qp = assert(ctx:create_qp_ex{pd = pd, qp_type = "rc", send_cq = cq, recv_cq = cq,
 *                     send_ops_flags = {"send", "rdma_write", "atomic_fetch_and_add"}})
 *   assert(qp:wr_post{
 *     {wr_id = 1, opcode = "rdma_write", sge = {mr = mr, length = 64},
 *      remote_addr = raddr, rkey = rkey},
 *     {wr_id = 2, opcode = "send", inline = "hi", send_flags = {"signaled"}},
 *   })   -- one ibv_wr_start .. ibv_wr_complete batch
 * The WRs are what qp:post_send takes (one table, an array, or ibv.send_wrs
 * [, first, count]).  Each becomes its builder (ibv_wr_send, ibv_wr_rdma_write,
 * ibv_wr_bind_mw, ibv_wr_send_tso (hdr, mss), ibv_wr_atomic_write (its 8 bytes
 * as an 'inline' string), ...), ibv_wr_set_ud_addr on UD, ibv_wr_set_xrc_srqn on XRC,
 * and its data: an inline string, or SGEs with the "inline" send flag, via
 * ibv_wr_set_inline_data(_list); SGEs via ibv_wr_set_sge(_list).  Everything
 * is parsed and checked before ibv_wr_start, so no Lua error can happen inside
 * a batch.  Failure: nil, msg, errno (ibv_wr_complete), with the WR index when
 * one WR could not be built (the batch is aborted with ibv_wr_abort).
 */
#include <string.h>

#include "verbs/verbs.h"
#include "datapath/post.h"

enum data_kind { NO_DATA, SGE_ONLY, SGE_OR_INLINE };

struct op {
	enum ibv_wr_opcode opcode;
	uint64_t flag; /* IBV_QP_EX_WITH_* */
	enum data_kind data;
};

static const struct op ops[] = {
	{IBV_WR_SEND, IBV_QP_EX_WITH_SEND, SGE_OR_INLINE},
	{IBV_WR_SEND_WITH_IMM, IBV_QP_EX_WITH_SEND_WITH_IMM, SGE_OR_INLINE},
	{IBV_WR_SEND_WITH_INV, IBV_QP_EX_WITH_SEND_WITH_INV, SGE_OR_INLINE},
	{IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, SGE_OR_INLINE},
	{IBV_WR_RDMA_WRITE_WITH_IMM, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, SGE_OR_INLINE},
	{IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, SGE_ONLY},
	{IBV_WR_ATOMIC_CMP_AND_SWP, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, SGE_ONLY},
	{IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, SGE_ONLY},
	{IBV_WR_BIND_MW, IBV_QP_EX_WITH_BIND_MW, NO_DATA},
	{IBV_WR_LOCAL_INV, IBV_QP_EX_WITH_LOCAL_INV, NO_DATA},
	{IBV_WR_TSO, IBV_QP_EX_WITH_TSO, SGE_OR_INLINE},
#if IBVL_HAVE_ATOMIC_WRITE
	{IBV_WR_ATOMIC_WRITE, IBV_QP_EX_WITH_ATOMIC_WRITE, NO_DATA}, /* its 8 bytes: 'inline' */
#endif
};

/* atomic write came with rdma-core 44: older headers have no such opcode */
#if IBVL_HAVE_ATOMIC_WRITE
#define IS_ATOMIC_WRITE(opcode) ((opcode) == IBV_WR_ATOMIC_WRITE)
#else
#define IS_ATOMIC_WRITE(opcode) 0
#endif

static const struct op *find_op(enum ibv_wr_opcode opcode)
{
	for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
		if (ops[i].opcode == opcode)
			return &ops[i];
	return NULL;
}

/* NULL when the WR (index i, 1-based) can be built on qp, else the message. */
static const char *check_wr(lua_State *L, struct ibvl_qp *qp, const struct ibv_send_wr *wr,
                            int i)
{
	const char *name = ibvl_enum_name(ibvl_wr_opcodes, wr->opcode);
	const struct op *op = find_op(wr->opcode);
	if (op == NULL)
		return lua_pushfstring(L, "WR %d: opcode '%s' is not available through wr_post", i, name);
	if (!(qp->send_ops_flags & op->flag))
		return lua_pushfstring(L, "WR %d: opcode '%s' is not in the QP's send_ops_flags", i, name);
	int is_inline = (wr->send_flags & IBV_SEND_INLINE) != 0;
	if (IS_ATOMIC_WRITE(wr->opcode))
		return is_inline && wr->num_sge == 1 && wr->sg_list[0].length == 8 ? NULL
		       : lua_pushfstring(L, "WR %d: opcode 'atomic_write' takes its 8 bytes "
		                            "as an 8-byte 'inline' string", i);
	if (op->data == NO_DATA && wr->num_sge > 0)
		return lua_pushfstring(L, "WR %d: opcode '%s' carries no data (no sge, sg_list or inline)", i, name);
	if (op->data == SGE_ONLY && is_inline)
		return lua_pushfstring(L, "WR %d: opcode '%s' cannot carry inline data", i, name);
	if (is_inline) {
		uint64_t total = 0;
		for (int k = 0; k < wr->num_sge; k++)
			total += wr->sg_list[k].length;
		if (total > qp->max_inline_data)
			return lua_pushfstring(L, "WR %d: %d bytes of inline data, the QP takes at "
			                       "most %d", i, (int)total, (int)qp->max_inline_data);
	} else if ((uint32_t)wr->num_sge > qp->max_send_sge) {
		return lua_pushfstring(L, "WR %d: %d SGEs, the QP takes at most %d", i, wr->num_sge,
		                       (int)qp->max_send_sge);
	}
	return NULL;
}

/* Whether the provider has the builder and setters the WR needs. */
static int provided(const struct ibv_qp_ex *x, enum ibv_qp_type type,
                    const struct ibv_send_wr *wr)
{
	void (*builder)(void) = NULL;
	switch (wr->opcode) {
	case IBV_WR_SEND: builder = (void (*)(void))x->wr_send; break;
	case IBV_WR_SEND_WITH_IMM: builder = (void (*)(void))x->wr_send_imm; break;
	case IBV_WR_SEND_WITH_INV: builder = (void (*)(void))x->wr_send_inv; break;
	case IBV_WR_RDMA_WRITE: builder = (void (*)(void))x->wr_rdma_write; break;
	case IBV_WR_RDMA_WRITE_WITH_IMM: builder = (void (*)(void))x->wr_rdma_write_imm; break;
	case IBV_WR_RDMA_READ: builder = (void (*)(void))x->wr_rdma_read; break;
	case IBV_WR_ATOMIC_CMP_AND_SWP: builder = (void (*)(void))x->wr_atomic_cmp_swp; break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD: builder = (void (*)(void))x->wr_atomic_fetch_add; break;
	case IBV_WR_BIND_MW: builder = (void (*)(void))x->wr_bind_mw; break;
	case IBV_WR_TSO: builder = (void (*)(void))x->wr_send_tso; break;
#if IBVL_HAVE_ATOMIC_WRITE
	case IBV_WR_ATOMIC_WRITE: builder = (void (*)(void))x->wr_atomic_write; break;
#endif
	default: builder = (void (*)(void))x->wr_local_inv; break;
	}
	if (builder == NULL)
		return 0;
	if ((type == IBV_QPT_UD && x->wr_set_ud_addr == NULL) ||
	    (type == IBV_QPT_XRC_SEND && x->wr_set_xrc_srqn == NULL))
		return 0;
	if (find_op(wr->opcode)->data == NO_DATA)
		return 1;
	if (wr->send_flags & IBV_SEND_INLINE)
		return wr->num_sge == 1 ? x->wr_set_inline_data != NULL
		                        : x->wr_set_inline_data_list != NULL;
	return wr->num_sge == 1 ? x->wr_set_sge != NULL : x->wr_set_sge_list != NULL;
}

static void build_op(struct ibv_qp_ex *x, const struct ibv_send_wr *wr)
{
	switch (wr->opcode) {
	case IBV_WR_SEND: ibv_wr_send(x); break;
	case IBV_WR_SEND_WITH_IMM: ibv_wr_send_imm(x, wr->imm_data); break;
	case IBV_WR_SEND_WITH_INV: ibv_wr_send_inv(x, wr->invalidate_rkey); break;
	case IBV_WR_RDMA_WRITE: ibv_wr_rdma_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr); break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr, wr->imm_data);
		break;
	case IBV_WR_RDMA_READ: ibv_wr_rdma_read(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr); break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		ibv_wr_atomic_cmp_swp(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
		                      wr->wr.atomic.compare_add, wr->wr.atomic.swap);
		break;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		ibv_wr_atomic_fetch_add(x, wr->wr.atomic.rkey, wr->wr.atomic.remote_addr,
		                        wr->wr.atomic.compare_add);
		break;
	case IBV_WR_BIND_MW:
		ibv_wr_bind_mw(x, wr->bind_mw.mw, wr->bind_mw.rkey, &wr->bind_mw.bind_info);
		break;
	case IBV_WR_TSO: ibv_wr_send_tso(x, wr->tso.hdr, wr->tso.hdr_sz, wr->tso.mss); break;
#if IBVL_HAVE_ATOMIC_WRITE
	case IBV_WR_ATOMIC_WRITE: /* check_wr made its one SGE the 8-byte inline string */
		ibv_wr_atomic_write(x, wr->wr.rdma.rkey, wr->wr.rdma.remote_addr,
		                    (const void *)(uintptr_t)wr->sg_list[0].addr);
		break;
#endif
	default: /* IBV_WR_LOCAL_INV: check_wr let nothing else through */
		ibv_wr_local_inv(x, wr->invalidate_rkey);
		break;
	}
}

static void set_data(struct ibv_qp_ex *x, const struct ibv_send_wr *wr)
{
	const struct ibv_sge *sge = wr->sg_list;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (wr->num_sge == 1) {
			ibv_wr_set_inline_data(x, (void *)(uintptr_t)sge->addr, sge->length);
			return;
		}
		struct ibv_data_buf buf[64]; /* prepared lists hold at most 64 SGEs per WR */
		int n = wr->num_sge < 64 ? wr->num_sge : 64;
		for (int k = 0; k < n; k++)
			buf[k] = (struct ibv_data_buf){(void *)(uintptr_t)sge[k].addr, sge[k].length};
		ibv_wr_set_inline_data_list(x, (size_t)n, buf);
	} else if (wr->num_sge == 1) {
		ibv_wr_set_sge(x, sge->lkey, sge->addr, sge->length);
	} else {
		ibv_wr_set_sge_list(x, (size_t)wr->num_sge, sge);
	}
}

/* Builds one WR inside the batch (no Lua calls here); 0 when the provider
 * lacks a function it needs. */
static int build(struct ibv_qp_ex *x, enum ibv_qp_type type, const struct ibv_send_wr *wr)
{
	if (!provided(x, type, wr))
		return 0;
	x->wr_id = wr->wr_id;
	x->wr_flags = wr->send_flags; /* rxe needs IBV_SEND_INLINE here too */
	if (IS_ATOMIC_WRITE(wr->opcode))
		x->wr_flags &= ~(unsigned int)IBV_SEND_INLINE; /* the builder takes the value */
	build_op(x, wr);
	if (type == IBV_QPT_UD)
		ibv_wr_set_ud_addr(x, wr->wr.ud.ah, wr->wr.ud.remote_qpn, wr->wr.ud.remote_qkey);
	else if (type == IBV_QPT_XRC_SEND)
		ibv_wr_set_xrc_srqn(x, wr->qp_type.xrc.remote_srqn);
	if (find_op(wr->opcode)->data != NO_DATA)
		set_data(x, wr);
	return 1;
}

/* qp:wr_post(wr | {wr, ...} | send_wrs [, first, count]) */
int ibvl_qp_wr_post(lua_State *L)
{
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	if (qp->qpx == NULL)
		return luaL_argerror(L, 1, "QP made without send_ops_flags (use ctx:create_qp_ex)");
	struct ibvl_chain c;
	qp = ibvl_post_prepare(L, &ibvl_qp_class, 1, &c); /* checked again under its guard */
	const struct ibv_send_wr *first = c.base, *wr = first;
	for (int i = 0; i < c.count; i++, wr = wr->next) {
		const char *msg = (uint32_t)i >= qp->max_send_wr
			? lua_pushfstring(L, "WR %d: more than the %d WRs the send queue holds",
			                  c.index0 + i, (int)qp->max_send_wr)
			: check_wr(L, qp, wr, c.index0 + i);
		if (msg != NULL)
			return luaL_argerror(L, 2, msg);
	}
	/* check_wr pushed nothing (it pushes only a message): no Lua code ran */
	enum ibv_qp_type type = ((struct ibv_qp *)qp->o.ptr)->qp_type;
	ibv_wr_start(qp->qpx);
	wr = first;
	for (int i = 0; i < c.count; i++, wr = wr->next) {
		if (!build(qp->qpx, type, wr)) {
			ibv_wr_abort(qp->qpx);
			ibvl_fail(L, "ibv_wr_start", EOPNOTSUPP);
			lua_pushinteger(L, c.index0 + i);
			return 4;
		}
	}
	return ibvl_result(L, "ibv_wr_complete", ibv_wr_complete(qp->qpx));
}
