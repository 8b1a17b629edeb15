/*
 * cm_post.c: the rdma_verbs helpers on a cm id's QP (rdma_post_recv,
 * rdma_post_send, ..., rdma_get_send_comp), one SGE or vectored.
 *
 *   id:post_recv(wr_id, mr [, offset, length]); id:post_send(wr_id, mr, off, len [, flags])
 *   id:post_read(wr_id, mr, off, len, flags, remote_addr, rkey); id:post_write(...)
 *   id:post_ud_send(wr_id, mr, off, len, flags, ah, remote_qpn)
 *   local wc = id:get_send_comp([timeout_s]); id:get_recv_comp([timeout_s])
 *   id:post_sendv(wr_id, {{mr = mr, length = n}, ...} [, flags]); id:post_recvv(...)
 */
#include <string.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "cm/cm.h"
#include "verbs/cq.h"
#include "verbs/sge.h"

static struct ibv_qp *id_qp(lua_State *L, struct ibvl_cm_id *id)
{
	struct ibvl_obj *qp = ibvl_cm_owned(id, IBVL_OWN_QP);
	if (qp == NULL)
		ibvl_error(L, "the cm id has no QP (create_qp first)");
	return qp->ptr;
}

/* Reads wr_id, mr, offset, length at arg.. into sge; returns wr_id. */
static uint64_t check_sge(lua_State *L, int arg, struct ibv_sge *sge)
{
	uint64_t wr_id = ibvl_check_u64(L, arg);
	struct ibv_mr *mr = ((struct ibvl_obj *)ibvl_check(L, arg + 1, &ibvl_mr_class))->ptr;
	lua_Integer off = ibvl_opt_range(L, arg + 2, 0, 0, (lua_Integer)mr->length);
	lua_Integer len = ibvl_opt_range(L, arg + 3, (lua_Integer)mr->length - off, 0,
	                                 (lua_Integer)mr->length - off);
	sge->addr = (uintptr_t)mr->addr + (uint64_t)off;
	sge->length = (uint32_t)len;
	sge->lkey = mr->lkey;
	return wr_id;
}

/* id:post_recv(wr_id, mr [, offset, length]): on the id's SRQ when it has one */
static int cm_post_recv(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *id = ibvl_check(L, 1, &ibvl_cm_id_class);
	struct ibv_sge sge;
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
	wr.wr_id = check_sge(L, 2, &sge);
	ibvl_guard_end(L, &g);
	struct ibvl_obj *srq = ibvl_cm_owned(id, IBVL_OWN_SRQ);
	if (srq != NULL)
		return ibvl_result(L, "ibv_post_srq_recv", ibv_post_srq_recv(srq->ptr, &wr, &bad));
	return ibvl_result(L, "ibv_post_recv", ibv_post_recv(id_qp(L, id), &wr, &bad));
}

static int post_send(lua_State *L, enum ibv_wr_opcode op)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *id = ibvl_check(L, 1, &ibvl_cm_id_class);
	struct ibv_send_wr wr = {.num_sge = 1, .opcode = op}, *bad;
	wr.send_flags = (unsigned)ibvl_opt_flags(L, 6, ibvl_send_flags, IBV_SEND_SIGNALED);
	struct ibvl_obj *ah = NULL;
	if (op == IBV_WR_RDMA_READ || op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = ibvl_check_u64(L, 7);
		wr.wr.rdma.rkey = (uint32_t)ibvl_check_range(L, 8, 0, UINT32_MAX);
	} else if (!lua_isnoneornil(L, 7)) { /* post_ud_send */
		wr.wr.ud.remote_qpn = (uint32_t)ibvl_check_range(L, 8, 0, 0xffffff);
		wr.wr.ud.remote_qkey = RDMA_UDP_QKEY;
		ah = ibvl_check(L, 7, &ibvl_ah_class);
	}
	struct ibv_sge sge;
	wr.wr_id = check_sge(L, 2, &sge); /* last: nothing runs between the MR's check and use */
	wr.sg_list = &sge;
	ibvl_guard_end(L, &g);
	struct ibv_qp *qp = id_qp(L, id);
	if (qp->qp_type == IBV_QPT_UD && op != IBV_WR_SEND)
		ibvl_error(L, "RDMA read and write need a connected id (this one's QP is UD)");
	if (ah != NULL)
		wr.wr.ud.ah = ah->ptr;
	else if (qp->qp_type == IBV_QPT_UD)
		ibvl_error(L, "a UD id sends with post_ud_send(wr_id, mr, offset, length, flags, ah, "
		              "remote_qpn): the peer's address handle is required");
	return ibvl_result(L, "ibv_post_send", ibv_post_send(qp, &wr, &bad));
}

static int cm_post_send(lua_State *L)
{
	return post_send(L, IBV_WR_SEND);
}

static int l_post_ud_send(lua_State *L)
{
	ibvl_check(L, 7, &ibvl_ah_class);
	return post_send(L, IBV_WR_SEND);
}

static int l_post_read(lua_State *L)
{
	return post_send(L, IBV_WR_RDMA_READ);
}

static int l_post_write(lua_State *L)
{
	return post_send(L, IBV_WR_RDMA_WRITE);
}

/* rdma_get_send_comp / rdma_get_recv_comp, with a timeout (seconds) */
static int get_comp(lua_State *L, int cq_which, int ch_which, const char *call)
{
	struct ibvl_cm_id *id = ibvl_check(L, 1, &ibvl_cm_id_class);
	struct ibvl_cq *cq = (struct ibvl_cq *)ibvl_cm_owned(id, cq_which);
	struct ibvl_obj *ch = ibvl_cm_owned(id, ch_which);
	if (cq == NULL || ch == NULL)
		return ibvl_error(L, "%s: the id's QP has no CQ the cm made (poll the CQ given)", call);
	struct ibv_comp_channel *chan = ch->ptr;
	struct ibv_wc wc;
	for (;;) {
		int n = ibvl_cq_poll(cq, 1, &wc);
		if (n == 0 && ibv_req_notify_cq(cq->o.ptr, 0) == 0)
			n = ibvl_cq_poll(cq, 1, &wc);
		if (n < 0)
			return ibvl_fail(L, call, -n);
		if (n > 0)
			break;
		int fail = ibvl_cm_wait(L, chan->fd, 2, call);
		if (fail != 0)
			return fail;
		struct ibv_cq *ev_cq;
		void *ev_ctx;
		if (ibv_get_cq_event(chan, &ev_cq, &ev_ctx) == 0)
			ibv_ack_cq_events(ev_cq, 1);
	}
	ibvl_push_wc(L, &wc);
	return 1;
}

static int l_get_send_comp(lua_State *L)
{
	return get_comp(L, IBVL_OWN_SEND_CQ, IBVL_OWN_SEND_CH, "rdma_get_send_comp");
}

static int l_get_recv_comp(lua_State *L)
{
	return get_comp(L, IBVL_OWN_RECV_CQ, IBVL_OWN_RECV_CH, "rdma_get_recv_comp");
}

/* ---- the vectored rdma_verbs helpers ---------------------------------------
 * id:post_sendv(wr_id, sg_list [, flags]), id:post_recvv(wr_id, sg_list),
 * id:post_readv(wr_id, sg_list, flags, remote_addr, rkey), id:post_writev(...):
 * sg_list is an array of SGE tables, as in qp:post_send ({mr =, offset =,
 * length =} or {addr =, length =, lkey =}). */
#define CM_MAX_SGE 16

struct vpost {
	struct ibv_sge sge[CM_MAX_SGE];
	struct ibvl_sge_src src[CM_MAX_SGE];
	int nsge, flags;
	uint64_t wr_id, remote_addr;
	uint32_t rkey;
};

/* Reads the arguments of a vectored post; returns the id's QP (checked last). */
static struct ibvl_qp *vpost_args(lua_State *L, struct vpost *v, int send, int rdma)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_cm_id *id = ibvl_check(L, 1, &ibvl_cm_id_class);
	v->wr_id = ibvl_check_u64(L, 2);
	luaL_checktype(L, 3, LUA_TTABLE);
	v->flags = send ? (int)ibvl_opt_flags(L, 4, ibvl_send_flags, IBV_SEND_SIGNALED) : 0;
	if (rdma) {
		v->remote_addr = ibvl_check_u64(L, 5);
		v->rkey = (uint32_t)ibvl_check_range(L, 6, 0, UINT32_MAX);
	}
	lua_createtable(L, 0, 1); /* {sg_list = a private copy of arg 3}, as a WR table */
	ibvl_copy_arg(L, 3, 1);  /* it keeps the MRs until the post */
	lua_setfield(L, -2, "sg_list");
	v->nsge = ibvl_parse_sges(L, lua_gettop(L), v->sge, v->src, CM_MAX_SGE);
	ibvl_guard_end(L, &g);
	struct ibvl_qp *qp = (struct ibvl_qp *)ibvl_cm_owned(id, IBVL_OWN_QP);
	if (qp == NULL)
		ibvl_error(L, "the cm id has no QP (create_qp first)");
	if (send && ((struct ibv_qp *)qp->o.ptr)->qp_type == IBV_QPT_UD)
		ibvl_error(L, "a UD id sends with post_ud_send (the vectored helpers carry no address "
		              "handle)");
	size_t total = 0;
	for (int j = 0; j < v->nsge; j++) {
		if ((v->flags & IBV_SEND_INLINE) && v->src[j].mr == NULL)
			ibvl_error(L, "send flag 'inline': the CPU copies the data, so SGE %d needs 'mr'",
			           j + 1);
		total += v->sge[j].length;
	}
	if ((v->flags & IBV_SEND_INLINE) && total > qp->max_inline_data)
		ibvl_error(L, "send flag 'inline': %d bytes, the QP takes at most %d inline",
		           (int)total, (int)qp->max_inline_data);
	return qp;
}

enum { VSEND, VRECV, VREAD, VWRITE };

static int vpost(lua_State *L, int op)
{
	struct vpost v;
	vpost_args(L, &v, op != VRECV, op == VREAD || op == VWRITE); /* checks the id first */
	struct rdma_cm_id *cid = ((struct ibvl_obj *)lua_touserdata(L, 1))->ptr;
	void *ctx = (void *)(uintptr_t)v.wr_id;
	switch (op) {
	case VSEND:
		return ibvl_result(L, "rdma_post_sendv",
		                   rdma_post_sendv(cid, ctx, v.sge, v.nsge, v.flags));
	case VRECV:
		return ibvl_result(L, "rdma_post_recvv", rdma_post_recvv(cid, ctx, v.sge, v.nsge));
	case VREAD:
		return ibvl_result(L, "rdma_post_readv", rdma_post_readv(cid, ctx, v.sge, v.nsge,
		                                                         v.flags, v.remote_addr, v.rkey));
	default:
		return ibvl_result(L, "rdma_post_writev", rdma_post_writev(cid, ctx, v.sge, v.nsge,
		                                                           v.flags, v.remote_addr,
		                                                           v.rkey));
	}
}

static int l_post_sendv(lua_State *L)
{
	return vpost(L, VSEND);
}

static int l_post_recvv(lua_State *L)
{
	return vpost(L, VRECV);
}

static int l_post_readv(lua_State *L)
{
	return vpost(L, VREAD);
}

static int l_post_writev(lua_State *L)
{
	return vpost(L, VWRITE);
}

void ibvl_open_cm_post(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"post_recv", cm_post_recv}, {"post_send", cm_post_send}, {"post_read", l_post_read},
		{"post_write", l_post_write}, {"post_ud_send", l_post_ud_send},
		{"get_send_comp", l_get_send_comp}, {"get_recv_comp", l_get_recv_comp},
		{"post_sendv", l_post_sendv}, {"post_recvv", l_post_recvv},
		{"post_readv", l_post_readv}, {"post_writev", l_post_writev}, {NULL, NULL},
	};
	ibvl_add_methods(L, ibvl_cm_id_class.name, methods);
}
