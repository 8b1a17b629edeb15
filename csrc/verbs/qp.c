/*
 * qp.c: queue pairs: create (plain and extended), open, their fields, ECE,
 * rate limits, multicast (attributes, qp:modify and qp:query: qp_attr.c;
 * the posts: datapath/post.c).
 *
 *   local qp = assert(pd:create_qp{qp_type = "rc", send_cq = cq, recv_cq = cq,
 *                                  cap = {max_send_wr = 64, max_recv_wr = 64}})
 *   qp.qp_num, qp.qp_type, qp.state, qp.cap  -- cap: what the device granted
 *   local qpx = assert(ctx:create_qp_ex{pd = pd, qp_type = "rc", send_cq = cq,
 *                     recv_cq = cq, send_ops_flags = {"send", "rdma_write"}})
 *   local tgt = assert(ctx:open_qp{qp_num = n, qp_type = "xrc_recv", xrcd = xrcd})
 *   qp:modify{...}, qp:query(), ibv.qp_attr{...}       -- qp_attr.c
 *   qp:post_recv(wrs [, first, count]); qp:post_send(wrs ...)  -- datapath/post.c
 * open_qp computes its comp_mask from the fields given (rdma-core needs all three).
 */
#include <stddef.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "verbs/verbs.h"


static int destroy_qp(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_qp *qp = (struct ibvl_qp *)o;
	if (qp->cm_id != NULL) {
		rdma_destroy_qp(qp->cm_id);
		return 0;
	}
	return ibv_destroy_qp(ptr);
}

static int qp_field(lua_State *L, void *obj, const char *key)
{
	struct ibvl_qp *qp = obj;
	struct ibv_qp *q = qp->o.ptr;
	if (strcmp(key, "qp_num") == 0)
		lua_pushinteger(L, q->qp_num);
	else if (strcmp(key, "qp_type") == 0)
		ibvl_push_enum(L, ibvl_qp_types, q->qp_type);
	else if (strcmp(key, "state") == 0)
		ibvl_push_enum(L, ibvl_qp_states, q->state);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, q->handle);
	else if (strcmp(key, "extended") == 0)
		lua_pushboolean(L, qp->qpx != NULL);
	else if (strcmp(key, "cap") == 0) {
		struct ibv_qp_cap cap = {qp->max_send_wr, qp->max_recv_wr, qp->max_send_sge,
		                         qp->max_recv_sge, qp->max_inline_data};
		ibvl_push_qp_cap(L, &cap);
	} else
		return 0;
	return 1;
}

static const luaL_Reg qp_hot[] = {{"post_recv", ibvl_qp_post_recv}, {"post_send", ibvl_qp_post_send},
                                  {"modify", ibvl_qp_modify}, {NULL, NULL}};
const struct ibvl_class ibvl_qp_class = {"ibverbs.qp", destroy_qp, "ibv_destroy_qp", qp_field,
                                         qp_hot};

struct ibvl_qp *ibvl_check_qp(lua_State *L, int arg)
{
	return ibvl_check(L, arg, &ibvl_qp_class);
}

/* ---- creation ------------------------------------------------------------ */
static const char *const hash_fields[] = {"function", "key", "fields_mask", NULL};

static void parse_rx_hash(lua_State *L, int idx, struct ibv_rx_hash_conf *h)
{
	ibvl_getfield(L, idx, "rx_hash_conf");
	int t = lua_gettop(L);
	ibvl_check_fields(L, t, "rx_hash_conf", hash_fields);
	h->rx_hash_function = (uint8_t)ibvl_int_field(L, t, "function", IBV_RX_HASH_FUNC_TOEPLITZ,
	                                              0, 255);
	size_t len = 0;
	h->rx_hash_key = (uint8_t *)ibvl_str_field(L, t, "key", &len);
	if (len > 255)
		ibvl_error(L, "rx_hash_conf: key longer than 255 bytes");
	h->rx_hash_key_len = (uint8_t)len;
	h->rx_hash_fields_mask = ibvl_u64_field(L, t, "fields_mask", 0);
	lua_pop(L, 1);
}

static const char *const init_fields[] = {
	"qp_type", "send_cq", "recv_cq", "srq", "cap", "sq_sig_all", "pd", "xrcd",
	"create_flags", "max_tso_header", "rwq_ind_tbl", "rx_hash_conf", "source_qpn",
	"send_ops_flags", NULL,
};

/* Objects an init attr names, in the order the new QP uses them. */
static const char *const used_fields[] = {"pd", "send_cq", "recv_cq", "srq", "xrcd",
                                          "rwq_ind_tbl", NULL};

/* Reads an ibv_qp_init_attr_ex; comp_mask gets a bit for each extended field
 * given.  Pushes the IBVL_QP_USED objects it names (nil where absent), which
 * keep them alive and are what ibvl_qp_adopt makes the QP use; returns the
 * index of the first.  The objects are read last and logged for the
 * caller's guard. */
int ibvl_parse_qp_init_attr(lua_State *L, int idx, struct ibv_qp_init_attr_ex *a)
{
	idx = lua_absindex(L, idx);
	if (lua_type(L, idx) != LUA_TTABLE)
		ibvl_error(L, "init_attr: table expected, got %s", luaL_typename(L, idx));
	ibvl_check_fields(L, idx, "init_attr", init_fields);
	a->qp_type = (enum ibv_qp_type)ibvl_enum_field(L, idx, "qp_type", ibvl_qp_types, -1);
	if ((int)a->qp_type == -1)
		ibvl_error(L, "init_attr: field 'qp_type' is required");
	a->sq_sig_all = ibvl_bool_field(L, idx, "sq_sig_all", 0);
	ibvl_parse_qp_cap(L, idx, &a->cap);
	if (ibvl_has_field(L, idx, "create_flags")) {
		a->create_flags = (uint32_t)ibvl_flags_field(L, idx, "create_flags",
		                                             ibvl_qp_create_flags, 0);
		a->comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	}
	if (ibvl_has_field(L, idx, "max_tso_header")) {
		a->max_tso_header = (uint16_t)ibvl_int_field(L, idx, "max_tso_header", 0, 0, UINT16_MAX);
		a->comp_mask |= IBV_QP_INIT_ATTR_MAX_TSO_HEADER;
	}
	if (ibvl_has_field(L, idx, "rx_hash_conf")) {
		parse_rx_hash(L, idx, &a->rx_hash_conf);
		a->comp_mask |= IBV_QP_INIT_ATTR_RX_HASH;
	}
	if (ibvl_has_field(L, idx, "source_qpn")) {
		a->source_qpn = (uint32_t)ibvl_int_field(L, idx, "source_qpn", 0, 0, 0xffffff);
		a->create_flags |= IBV_QP_CREATE_SOURCE_QPN;
		a->comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	}
	if (ibvl_has_field(L, idx, "send_ops_flags")) {
		a->send_ops_flags = (uint64_t)ibvl_flags_field(L, idx, "send_ops_flags",
		                                               ibvl_send_ops_flags, 0);
		a->comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	}
	const struct ibvl_class *classes[] = {&ibvl_pd_class, &ibvl_cq_class, &ibvl_cq_class,
	                                      &ibvl_srq_class, &ibvl_xrcd_class,
	                                      &ibvl_rwq_ind_tbl_class};
	void **ptrs[] = {(void **)&a->pd, (void **)&a->send_cq, (void **)&a->recv_cq,
	                 (void **)&a->srq, (void **)&a->xrcd, (void **)&a->rwq_ind_tbl};
	int first = lua_gettop(L) + 1;
	for (int i = 0; used_fields[i] != NULL; i++) {
		struct ibvl_obj *o = ibvl_obj_field_keep(L, idx, used_fields[i], classes[i]);
		*ptrs[i] = o ? o->ptr : NULL;
	}
	if (a->pd)
		a->comp_mask |= IBV_QP_INIT_ATTR_PD;
	if (a->xrcd)
		a->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	if (a->rwq_ind_tbl)
		a->comp_mask |= IBV_QP_INIT_ATTR_IND_TABLE;
	return first;
}

/* Raises when the objects a QP of this type needs are missing: verbs
 * dereferences them without checking. */
static void check_needed(lua_State *L, const struct ibv_qp_init_attr_ex *a)
{
	const char *type = ibvl_enum_name(ibvl_qp_types, a->qp_type);
	int xrc_recv = a->qp_type == IBV_QPT_XRC_RECV, xrc_send = a->qp_type == IBV_QPT_XRC_SEND;
	int rss = a->rwq_ind_tbl != NULL; /* receives through its WQs, sends nothing */
	if (type == NULL)
		ibvl_error(L, "init_attr: field 'qp_type': unknown QP type %d", (int)a->qp_type);
	if (xrc_recv && a->xrcd == NULL)
		ibvl_error(L, "init_attr: field 'xrcd' is required for an xrc_recv QP");
	if (!xrc_recv && a->pd == NULL)
		ibvl_error(L, "init_attr: field 'pd' is required for a%s %s QP",
		           type[0] == 'u' || type[0] == 'x' ? "" : "n", type);
	if (!xrc_recv && !rss && a->send_cq == NULL)
		ibvl_error(L, "init_attr: field 'send_cq' is required for a%s %s QP",
		           type[0] == 'u' || type[0] == 'x' ? "" : "n", type);
	if (!xrc_recv && !xrc_send && !rss && a->recv_cq == NULL)
		ibvl_error(L, "init_attr: field 'recv_cq' is required for a%s %s QP%s",
		           type[0] == 'u' || type[0] == 'x' ? "" : "n", type,
		           a->srq != NULL ? " (with an SRQ too: its completions go there)" : "");
}

/* Wraps a created QP (the userdata at the top): it uses pd_idx (when not 0)
 * and the objects ibvl_parse_qp_init_attr pushed at used_idx (when not 0),
 * and records the granted caps. */
void ibvl_qp_adopt(lua_State *L, int used_idx, int pd_idx, const struct ibv_qp_init_attr_ex *a)
{
	struct ibvl_qp *qp = lua_touserdata(L, -1);
	int self = lua_gettop(L);
	qp->max_send_wr = a->cap.max_send_wr;
	qp->max_recv_wr = a->cap.max_recv_wr;
	qp->max_send_sge = a->cap.max_send_sge;
	qp->max_recv_sge = a->cap.max_recv_sge;
	qp->max_inline_data = a->cap.max_inline_data;
	if (pd_idx != 0)
		ibvl_use(L, self, pd_idx);
	for (int i = pd_idx != 0; used_idx != 0 && i < IBVL_QP_USED; i++)
		if (!lua_isnil(L, used_idx + i))
			ibvl_use(L, self, used_idx + i);
	if (a->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		qp->qpx = ibv_qp_to_qp_ex(qp->o.ptr);
		qp->send_ops_flags = a->send_ops_flags;
	}
	ibvl_track(L, self);
}

static int create(lua_State *L, int pd_idx, int ctx_idx)
{
	struct ibv_qp_init_attr_ex a;
	memset(&a, 0, sizeof a);
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, pd_idx ? &ibvl_pd_class : &ibvl_context_class);
	if (pd_idx && lua_type(L, 2) == LUA_TTABLE && ibvl_has_field(L, 2, "pd"))
		ibvl_error(L, "init_attr: field 'pd': the QP is created on this PD already");
	int used = ibvl_parse_qp_init_attr(L, 2, &a);
	struct ibvl_qp *qp = ibvl_new(L, &ibvl_qp_class, sizeof *qp, &g); /* no Lua code runs from here to the verbs call */
	if (pd_idx) {
		a.pd = ((struct ibvl_obj *)lua_touserdata(L, pd_idx))->ptr;
		a.comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	struct ibv_context *ctx = ctx_idx ? ((struct ibvl_obj *)lua_touserdata(L, ctx_idx))->ptr
	                                  : a.pd->context;
	if ((a.qp_type == IBV_QPT_XRC_SEND || a.qp_type == IBV_QPT_XRC_RECV) &&
	    ibvl_xrc_errno(ctx, EINVAL) == EOPNOTSUPP)
		return ibvl_fail(L, "ibv_create_qp_ex", EOPNOTSUPP); /* before asking for an xrcd */
	check_needed(L, &a);
	const char *call = "ibv_create_qp_ex";
	if (pd_idx && a.comp_mask == IBV_QP_INIT_ATTR_PD) {
		call = "ibv_create_qp";
		qp->o.ptr = ibv_create_qp(a.pd, (struct ibv_qp_init_attr *)&a);
	} else {
		qp->o.ptr = ibv_create_qp_ex(ctx, &a);
	}
	if (qp->o.ptr == NULL) {
		int err = errno;
		if (a.qp_type == IBV_QPT_XRC_SEND || a.qp_type == IBV_QPT_XRC_RECV)
			err = ibvl_xrc_errno(ctx, err);
		return ibvl_fail(L, call, err);
	}
	if (ctx_idx && a.pd == NULL && a.xrcd == NULL)
		ibvl_use(L, -1, ctx_idx); /* a QP with neither pd nor xrcd */
	ibvl_qp_adopt(L, used, pd_idx, &a);
	return 1;
}

/* pd:create_qp(init_attr) */
static int l_create_qp(lua_State *L)
{
	return create(L, 1, 0);
}

/* ctx:create_qp_ex(init_attr_ex) */
static int l_create_qp_ex(lua_State *L)
{
	return create(L, 0, 1);
}

static const char *const open_qp_fields[] = {"qp_num", "qp_type", "xrcd", NULL};

/* ctx:open_qp{qp_num = n, qp_type = "xrc_recv", xrcd = xrcd}: another handle on
 * a shared (XRC target) QP; closing it destroys the QP with its last handle. */
static int l_open_qp(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_qp_open_attr a;
	memset(&a, 0, sizeof a);
	ibvl_check_fields(L, 2, "attr", open_qp_fields);
	if (ibvl_has_field(L, 2, "qp_num")) {
		a.qp_num = (uint32_t)ibvl_int_field(L, 2, "qp_num", 0, 0, 0xffffff);
		a.comp_mask |= IBV_QP_OPEN_ATTR_NUM;
	}
	if (ibvl_has_field(L, 2, "qp_type")) {
		a.qp_type = (enum ibv_qp_type)ibvl_enum_field(L, 2, "qp_type", ibvl_qp_types, 0);
		a.comp_mask |= IBV_QP_OPEN_ATTR_TYPE;
	}
	struct ibvl_obj *x = ibvl_obj_field_keep(L, 2, "xrcd", &ibvl_xrcd_class);
	int xi = lua_gettop(L);
	if (x != NULL) {
		a.xrcd = x->ptr;
		a.comp_mask |= IBV_QP_OPEN_ATTR_XRCD;
	}
	struct ibvl_qp *qp = ibvl_new(L, &ibvl_qp_class, sizeof *qp, &g);
	struct ibv_context *ctx = ((struct ibvl_obj *)lua_touserdata(L, 1))->ptr;
	qp->o.ptr = ibv_open_qp(ctx, &a);
	if (qp->o.ptr == NULL)
		return ibvl_fail(L, "ibv_open_qp", ibvl_xrc_errno(ctx, errno));
	struct ibv_qp_init_attr_ex none;
	memset(&none, 0, sizeof none);
	ibvl_use(L, -1, x != NULL ? xi : 1); /* the xrcd, or the context */
	ibvl_qp_adopt(L, 0, 0, &none);
	return 1;
}

/* ---- ECE, rate limit, data ordering -------------------------------------
 *   qp:query_ece() --> {vendor_id =, options =, comp_mask =}; qp:set_ece{...}
 *   qp:modify_rate_limit{rate_limit = kbps, max_burst_sz =, typical_pkt_sz =}
 *   qp:query_data_in_order("rdma_write" [, flags]) --> 1 in order, 0 not */
static int l_query_ece(lua_State *L)
{
#if IBVL_HAVE_ECE
	ibvl_late_need(L, IBVL_LATE_ibv_query_ece, "qp:query_ece");
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	struct ibv_ece ece;
	memset(&ece, 0, sizeof ece);
	int rc = ibv_query_ece(qp->o.ptr, &ece);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_ece", rc);
	ibvl_out_table(L, 2, 3);
	ibvl_set_int(L, "vendor_id", ece.vendor_id);
	ibvl_set_int(L, "options", ece.options);
	ibvl_set_int(L, "comp_mask", ece.comp_mask);
	return 1;
#else
	return ibvl_absent(L, "qp:query_ece", IBVL_SINCE_ECE);
#endif
}

static int l_set_ece(lua_State *L)
{
#if IBVL_HAVE_ECE
	static const char *const ece_fields[] = {"vendor_id", "options", "comp_mask", NULL};
	ibvl_late_need(L, IBVL_LATE_ibv_set_ece, "qp:set_ece");
	ibvl_check_qp(L, 1);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "ece", ece_fields);
	struct ibv_ece ece;
	ece.vendor_id = (uint32_t)ibvl_int_field(L, 2, "vendor_id", 0, 0, UINT32_MAX);
	ece.options = (uint32_t)ibvl_int_field(L, 2, "options", 0, 0, UINT32_MAX);
	ece.comp_mask = (uint32_t)ibvl_int_field(L, 2, "comp_mask", 0, 0, UINT32_MAX);
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	return ibvl_result(L, "ibv_set_ece", ibv_set_ece(qp->o.ptr, &ece));
#else
	return ibvl_absent(L, "qp:set_ece", IBVL_SINCE_ECE);
#endif
}

static const char *const rate_fields[] = {"rate_limit", "max_burst_sz", "typical_pkt_sz", NULL};

static int l_modify_rate_limit(lua_State *L)
{
	ibvl_check_qp(L, 1);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", rate_fields);
	struct ibv_qp_rate_limit_attr a;
	memset(&a, 0, sizeof a);
	a.rate_limit = (uint32_t)ibvl_int_field(L, 2, "rate_limit", 0, 0, UINT32_MAX);
	a.max_burst_sz = (uint32_t)ibvl_int_field(L, 2, "max_burst_sz", 0, 0, UINT32_MAX);
	a.typical_pkt_sz = (uint16_t)ibvl_int_field(L, 2, "typical_pkt_sz", 0, 0, UINT16_MAX);
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	return ibvl_result(L, "ibv_modify_qp_rate_limit", ibv_modify_qp_rate_limit(qp->o.ptr, &a));
}

static int l_query_data_in_order(lua_State *L)
{
#if IBVL_HAVE_QP_DATA_IN_ORDER
	ibvl_late_need(L, IBVL_LATE_ibv_query_qp_data_in_order, "qp:query_data_in_order");
	ibvl_check_qp(L, 1);
	enum ibv_wr_opcode op = (enum ibv_wr_opcode)ibvl_check_enum(L, 2, ibvl_wr_opcodes);
	uint32_t flags = (uint32_t)ibvl_opt_range(L, 3, 0, 0, UINT32_MAX);
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	lua_pushinteger(L, ibv_query_qp_data_in_order(qp->o.ptr, op, flags));
	return 1;
#else
	return ibvl_absent(L, "qp:query_data_in_order", IBVL_SINCE_QP_DATA_IN_ORDER);
#endif
}

/* ---- multicast: qp:attach_mcast(gid, lid), qp:detach_mcast(gid, lid) ------
 * A UD QP joins a group by its GID (and LID on InfiniBand; 0 on RoCE).  On
 * soft-RoCE the group's packets reach the QP only when the netdev is a member
 * of the IP group as well (rdma_cm's join does that; see the guide). */
static int mcast(lua_State *L, int attach)
{
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	union ibv_gid gid; /* the arguments after self are strings and numbers: no Lua runs */
	ibvl_check_gid(L, 2, &gid);
	uint16_t lid = (uint16_t)ibvl_opt_range(L, 3, 0, 0, UINT16_MAX);
	if (attach)
		return ibvl_result(L, "ibv_attach_mcast", ibv_attach_mcast(qp->o.ptr, &gid, lid));
	return ibvl_result(L, "ibv_detach_mcast", ibv_detach_mcast(qp->o.ptr, &gid, lid));
}

static int l_attach_mcast(lua_State *L)
{
	return mcast(L, 1);
}

static int l_detach_mcast(lua_State *L)
{
	return mcast(L, 0);
}

void ibvl_open_qp(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"modify", ibvl_qp_modify}, {"query", ibvl_qp_query}, {"post_recv", ibvl_qp_post_recv},
		{"post_send", ibvl_qp_post_send}, {"query_ece", l_query_ece}, {"set_ece", l_set_ece},
		{"modify_rate_limit", l_modify_rate_limit},
		{"query_data_in_order", l_query_data_in_order}, {"attach_mcast", l_attach_mcast},
		{"detach_mcast", l_detach_mcast}, {"wr_post", ibvl_qp_wr_post},
		{"create_flow", ibvl_qp_create_flow}, {NULL, NULL},
	};
	static const luaL_Reg pd_methods[] = {{"create_qp", l_create_qp}, {NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {
		{"create_qp_ex", l_create_qp_ex}, {"open_qp", l_open_qp}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_qp_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
