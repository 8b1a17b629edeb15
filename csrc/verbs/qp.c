/*
 * qp.c: queue pairs: create (plain and extended), modify, query, post.
 *
 *   local qp = assert(pd:create_qp{qp_type = "rc", send_cq = cq, recv_cq = cq,
 *                                  cap = {max_send_wr = 64, max_recv_wr = 64}})
 *   qp.qp_num, qp.qp_type, qp.state, qp.cap  -- cap: what the device granted
 *   local qpx = assert(ctx:create_qp_ex{pd = pd, qp_type = "rc", send_cq = cq,
 *                     recv_cq = cq, send_ops_flags = {"send", "rdma_write"}})
 *   local tgt = assert(ctx:open_qp{qp_num = n, qp_type = "xrc_recv", xrcd = xrcd})
 *   qp:modify{qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 0}
 *   qp:modify{qp_state = "rtr", path_mtu = 1024, dest_qp_num = n, rq_psn = 0,
 *             max_dest_rd_atomic = 1, min_rnr_timer = 12,
 *             ah_attr = {port_num = 1, grh = {dgid = "::ffff:192.0.2.1", sgid_index = 1}}}
 *   local INIT = ibv.qp_attr{qp_state = "init", pkey_index = 0, port_num = 1}
 *   qp:modify(INIT)   -- parsed once: a prepared attribute set, as in C
 *   qp:query().qp_state; qp:post_recv(wrs [, first, count]); qp:post_send(wrs ...)
 * The attribute mask is computed from the fields given; open_qp computes its
 * comp_mask from the fields given (rdma-core needs all three).
 */
#include <stddef.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "verbs/verbs.h"

static const char *modify_hint(lua_State *L, const struct ibv_qp *q, const struct ibv_qp_attr *a, int mask);
static int parse_qp_attr(lua_State *L, int idx, struct ibv_qp_attr *a);
static void push_qp_cap(lua_State *L, const struct ibv_qp_cap *cap);

static int destroy_qp(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_qp *qp = (struct ibvl_qp *)o;
	if (qp->cm_id != NULL) {
		rdma_destroy_qp(qp->cm_id);
		return 0;
	}
	return ibv_destroy_qp(ptr);
}

#define T struct ibv_qp_cap
static const struct ibvl_field cap_out[] = {
	IBVL_FIELD(T, max_send_wr, IBVL_F_INT, NULL), IBVL_FIELD(T, max_recv_wr, IBVL_F_INT, NULL),
	IBVL_FIELD(T, max_send_sge, IBVL_F_INT, NULL), IBVL_FIELD(T, max_recv_sge, IBVL_F_INT, NULL),
	IBVL_FIELD(T, max_inline_data, IBVL_F_INT, NULL), IBVL_FIELDS_END,
};
#undef T

static void push_qp_cap(lua_State *L, const struct ibv_qp_cap *cap)
{
	ibvl_push_fields(L, cap, cap_out);
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
		push_qp_cap(L, &cap);
	} else
		return 0;
	return 1;
}

static int qp_modify(lua_State *L);
static const luaL_Reg qp_hot[] = {{"post_recv", ibvl_qp_post_recv}, {"post_send", ibvl_qp_post_send},
                                  {"modify", qp_modify}, {NULL, NULL}};
const struct ibvl_class ibvl_qp_class = {"ibverbs.qp", destroy_qp, "ibv_destroy_qp", qp_field,
                                         qp_hot};

struct ibvl_qp *ibvl_check_qp(lua_State *L, int arg)
{
	return ibvl_check(L, arg, &ibvl_qp_class);
}

/* ---- creation ------------------------------------------------------------ */
static const char *const cap_fields[] = {"max_send_wr", "max_recv_wr", "max_send_sge",
                                         "max_recv_sge", "max_inline_data", NULL};

static void parse_cap(lua_State *L, int idx, struct ibv_qp_cap *cap)
{
	ibvl_getfield(L, idx, "cap");
	int c = lua_gettop(L);
	if (!lua_isnil(L, c)) {
		ibvl_check_fields(L, c, "cap", cap_fields);
		cap->max_send_wr = (uint32_t)ibvl_int_field(L, c, "max_send_wr", 16, 0, UINT32_MAX);
		cap->max_recv_wr = (uint32_t)ibvl_int_field(L, c, "max_recv_wr", 16, 0, UINT32_MAX);
		cap->max_send_sge = (uint32_t)ibvl_int_field(L, c, "max_send_sge", 1, 0, UINT32_MAX);
		cap->max_recv_sge = (uint32_t)ibvl_int_field(L, c, "max_recv_sge", 1, 0, UINT32_MAX);
		cap->max_inline_data = (uint32_t)ibvl_int_field(L, c, "max_inline_data", 0, 0,
		                                                UINT32_MAX);
	} else {
		*cap = (struct ibv_qp_cap){16, 16, 1, 1, 0};
	}
	lua_pop(L, 1);
}

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
	parse_cap(L, idx, &a->cap);
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

/* ---- attributes ---------------------------------------------------------- */
struct attr_int {
	const char *name;
	size_t off;
	int size; /* bytes */
	int mask;
	lua_Integer min, max;
};

#define A(f, m, lo, hi) {#f, offsetof(struct ibv_qp_attr, f), \
	(int)sizeof(((struct ibv_qp_attr *)0)->f), m, lo, hi}
static const struct attr_int attr_ints[] = {
	A(qkey, IBV_QP_QKEY, 0, UINT32_MAX),
	A(rq_psn, IBV_QP_RQ_PSN, 0, 0xffffff),
	A(sq_psn, IBV_QP_SQ_PSN, 0, 0xffffff),
	A(dest_qp_num, IBV_QP_DEST_QPN, 0, 0xffffff),
	A(pkey_index, IBV_QP_PKEY_INDEX, 0, UINT16_MAX),
	A(alt_pkey_index, IBV_QP_ALT_PATH, 0, UINT16_MAX),
	A(en_sqd_async_notify, IBV_QP_EN_SQD_ASYNC_NOTIFY, 0, 1),
	A(max_rd_atomic, IBV_QP_MAX_QP_RD_ATOMIC, 0, 255),
	A(max_dest_rd_atomic, IBV_QP_MAX_DEST_RD_ATOMIC, 0, 255),
	A(min_rnr_timer, IBV_QP_MIN_RNR_TIMER, 0, 31),
	A(port_num, IBV_QP_PORT, 1, 255),
	A(timeout, IBV_QP_TIMEOUT, 0, 31),
	A(retry_cnt, IBV_QP_RETRY_CNT, 0, 7),
	A(rnr_retry, IBV_QP_RNR_RETRY, 0, 7),
	A(alt_port_num, IBV_QP_ALT_PATH, 1, 255),
	A(alt_timeout, IBV_QP_ALT_PATH, 0, 31),
	A(rate_limit, IBV_QP_RATE_LIMIT, 0, UINT32_MAX),
	{NULL, 0, 0, 0, 0, 0},
};
#undef A

/* path_mtu in bytes, the value at v */
static lua_Integer mtu_value(lua_State *L, int v)
{
	lua_Integer bytes = ibvl_int_value(L, v, "path_mtu", 0, 4096);
	for (int m = IBV_MTU_256; m <= IBV_MTU_4096; m++)
		if (bytes == (128 << m))
			return m;
	return ibvl_error(L, "field 'path_mtu': 256, 512, 1024, 2048 or 4096 expected");
}

static void set_attr_int(struct ibv_qp_attr *a, const struct attr_int *f, lua_Integer v)
{
	char *p = (char *)a + f->off;
	switch (f->size) {
	case 1: *(uint8_t *)p = (uint8_t)v; break;
	case 2: *(uint16_t *)p = (uint16_t)v; break;
	default: *(uint32_t *)p = (uint32_t)v; break;
	}
}

static lua_Integer get_attr_int(const struct ibv_qp_attr *a, const struct attr_int *f)
{
	const char *p = (const char *)a + f->off;
	return f->size == 1 ? *(const uint8_t *)p : f->size == 2 ? *(const uint16_t *)p
	                                                        : *(const uint32_t *)p;
}

static const struct attr_enum {
	const char *name;
	const struct ibvl_enum *e;
	int mask;
	size_t off;
} attr_enums[] = {
	{"qp_state", ibvl_qp_states, IBV_QP_STATE, offsetof(struct ibv_qp_attr, qp_state)},
	{"cur_qp_state", ibvl_qp_states, IBV_QP_CUR_STATE,
	 offsetof(struct ibv_qp_attr, cur_qp_state)},
	{"path_mig_state", ibvl_mig_states, IBV_QP_PATH_MIG_STATE,
	 offsetof(struct ibv_qp_attr, path_mig_state)},
	{NULL, NULL, 0, 0},
};

/* Reads field k of the attr table at idx, its value at v (absolute), into
 * a; returns its mask bit(s).  Raises for a field ibv_qp_attr does not have
 * or that cannot be set. */
static int parse_attr_field(lua_State *L, int idx, const char *k, int v, struct ibv_qp_attr *a)
{
	for (const struct attr_enum *f = attr_enums; f->name != NULL; f++) {
		if (f->name[0] == k[0] && strcmp(f->name, k) == 0) {
			*(int *)((char *)a + f->off) = (int)ibvl_enum_value(L, v, k, f->e);
			return f->mask;
		}
	}
	for (const struct attr_int *f = attr_ints; f->name != NULL; f++) {
		if (f->name[0] == k[0] && strcmp(f->name, k) == 0) {
			set_attr_int(a, f, ibvl_int_value(L, v, k, f->min, f->max));
			return f->mask;
		}
	}
	if (strcmp(k, "qp_access_flags") == 0) {
		a->qp_access_flags = (unsigned int)ibvl_flags_value(L, v, k, ibvl_access_flags);
		return IBV_QP_ACCESS_FLAGS;
	}
	if (strcmp(k, "path_mtu") == 0) {
		a->path_mtu = (enum ibv_mtu)mtu_value(L, v);
		return IBV_QP_PATH_MTU;
	}
	if (strcmp(k, "cap") == 0) {
		parse_cap(L, idx, &a->cap);
		return IBV_QP_CAP;
	}
	int alt = strcmp(k, "alt_ah_attr") == 0;
	if (alt || strcmp(k, "ah_attr") == 0) {
		ibvl_parse_ah_attr(L, v, alt ? &a->alt_ah_attr : &a->ah_attr);
		return alt ? IBV_QP_ALT_PATH : IBV_QP_AV;
	}
	if (strcmp(k, "sq_draining") == 0)
		return ibvl_error(L, "attr: field 'sq_draining' is read-only");
	return ibvl_error(L, "attr: unknown field '%s'", k);
}

/* Reads an ibv_qp_attr table in one pass over the fields given; returns
 * their attribute mask. */
static int parse_qp_attr(lua_State *L, int idx, struct ibv_qp_attr *a)
{
	idx = lua_absindex(L, idx);
	if (lua_type(L, idx) != LUA_TTABLE)
		ibvl_error(L, "attr: table expected, got %s", luaL_typename(L, idx));
	int mask = 0, v = lua_gettop(L) + 2;
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		if (lua_type(L, -2) != LUA_TSTRING)
			ibvl_error(L, "attr: unexpected %s key (field names are strings)",
			           luaL_typename(L, -2));
		mask |= parse_attr_field(L, idx, lua_tostring(L, -2), v, a);
		lua_pop(L, 1);
	}
	return mask;
}

/* The attributes ibv_modify_qp(3) requires for a transition, by QP type. */
static int required_mask(enum ibv_qp_type type, enum ibv_qp_state from, enum ibv_qp_state to)
{
	int connected = type == IBV_QPT_RC || type == IBV_QPT_UC || type == IBV_QPT_XRC_SEND ||
	                type == IBV_QPT_XRC_RECV;
	int reliable = type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV;
	if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
		if (type == IBV_QPT_RAW_PACKET)
			return IBV_QP_STATE | IBV_QP_PORT;
		return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		       (connected ? IBV_QP_ACCESS_FLAGS : IBV_QP_QKEY);
	}
	if (from == IBV_QPS_INIT && to == IBV_QPS_RTR && connected)
		return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       (reliable ? IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER : 0);
	if (from == IBV_QPS_RTR && to == IBV_QPS_RTS)
		return IBV_QP_STATE | IBV_QP_SQ_PSN |
		       (reliable ? IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		                   IBV_QP_MAX_QP_RD_ATOMIC : 0);
	return IBV_QP_STATE;
}

/* The likely cause of an EINVAL from ibv_modify_qp: a transition the state
 * machine does not have, or attributes the transition requires missing.
 * Pushes the text (a string on the stack) or returns NULL. */
static const char *modify_hint(lua_State *L, const struct ibv_qp *q, const struct ibv_qp_attr *a, int mask)
{
	if (!(mask & IBV_QP_STATE))
		return NULL;
	enum ibv_qp_state from = (mask & IBV_QP_CUR_STATE) ? a->cur_qp_state : q->state;
	enum ibv_qp_state to = a->qp_state;
	const char *fs = ibvl_enum_name(ibvl_qp_states, from), *ts = ibvl_enum_name(ibvl_qp_states, to);
	static const enum ibv_qp_state next[] = {
		[IBV_QPS_RESET] = IBV_QPS_INIT, [IBV_QPS_INIT] = IBV_QPS_RTR,
		[IBV_QPS_RTR] = IBV_QPS_RTS, [IBV_QPS_RTS] = IBV_QPS_SQD, [IBV_QPS_SQD] = IBV_QPS_RTS,
		[IBV_QPS_SQE] = IBV_QPS_RTS, [IBV_QPS_ERR] = IBV_QPS_RESET,
	};
	if (fs == NULL || ts == NULL || from > IBV_QPS_ERR)
		return NULL;
	int ok = to == IBV_QPS_RESET || to == IBV_QPS_ERR || to == next[from] || to == from;
	if (!ok)
		return lua_pushfstring(L, "a QP in state '%s' moves to '%s', 'reset' or 'err', not "
		                          "'%s'", fs, ibvl_enum_name(ibvl_qp_states, next[from]), ts);
	int missing = required_mask(q->qp_type, from, to) & ~mask;
	if (missing == 0)
		return NULL;
	luaL_Buffer b;
	luaL_buffinit(L, &b);
	lua_pushfstring(L, "'%s' to '%s' on a%s %s QP also needs", fs, ts,
	                q->qp_type == IBV_QPT_UD || q->qp_type == IBV_QPT_UC ||
	                q->qp_type == IBV_QPT_XRC_SEND || q->qp_type == IBV_QPT_XRC_RECV ? "" : "n",
	                ibvl_enum_name(ibvl_qp_types, q->qp_type));
	luaL_addvalue(&b);
	for (const struct ibvl_enum *e = ibvl_qp_attr_masks; e->name != NULL; e++) {
		if (missing & e->value) {
			luaL_addstring(&b, " ");
			luaL_addstring(&b, e->name);
		}
	}
	luaL_pushresult(&b);
	return lua_tostring(L, -1);
}

/* ibv.qp_attr{...}: an attribute table parsed once (its mask with it) */
struct prepared_attr {
	struct ibv_qp_attr a;
	int mask;
};

static const char prepared_key; /* its metatable, by address (ibvl_type_key) */
#define QP_ATTR "ibverbs.qp_attr"

/* Parses the attribute table at idx into a and returns its mask; raises
 * (naming argument arg) when it is not a table or gives no attribute. */
static int parse_attr_arg(lua_State *L, int idx, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof *a);
	if (lua_type(L, idx) != LUA_TTABLE) {
		const char *got = luaL_typename(L, idx);
		if (luaL_getmetafield(L, idx, "__name") && lua_type(L, -1) == LUA_TSTRING)
			got = lua_tostring(L, -1);
		return luaL_argerror(L, idx, lua_pushfstring(L, "attr table expected, got %s", got));
	}
	int mask = parse_qp_attr(L, idx, a);
	if (mask == 0)
		return luaL_argerror(L, idx, "attr: no attribute given");
	return mask;
}

static int l_qp_attr(lua_State *L)
{
	struct ibv_qp_attr a;
	int mask = parse_attr_arg(L, 1, &a);
	struct prepared_attr *p = lua_newuserdatauv(L, sizeof *p, 0);
	p->a = a;
	p->mask = mask;
	luaL_setmetatable(L, QP_ATTR);
	return 1;
}

/* The prepared attribute set at idx when qp has taken it before: the QP keeps
 * the last few alive (anchored), so their addresses name them. */
static const struct prepared_attr *known_attr(lua_State *L, struct ibvl_qp *qp, int idx)
{
	const void *p = lua_touserdata(L, idx);
	if (qp == NULL || qp->o.ptr == NULL || p == NULL || lua_type(L, idx) != LUA_TUSERDATA)
		return NULL;
	for (int i = 0; i < IBVL_KNOWN_ATTRS; i++)
		if (qp->known_attr[i] == p)
			return p;
	return NULL;
}

/* The prepared attribute set at idx (checked by its metatable), remembered by qp. */
static const struct prepared_attr *learn_attr(lua_State *L, struct ibvl_qp *qp, int idx)
{
	const struct prepared_attr *p = ibvl_test_key(L, idx, &prepared_key);
	if (p != NULL && qp != NULL && qp->o.ptr != NULL) {
		unsigned slot = qp->next_attr++ % IBVL_KNOWN_ATTRS;
		ibvl_anchor(L, 1, &qp->known_attr[slot], idx);
		qp->known_attr[slot] = p;
	}
	return p;
}

static int qp_modify(lua_State *L)
{
	struct ibvl_qp *qp = ibvl_self(L);
	struct ibv_qp_attr a;
	int mask;
	const struct prepared_attr *p = known_attr(L, qp, 2);
	if (p == NULL)
		p = learn_attr(L, qp, 2);
	if (p != NULL) { /* nothing to read: no Lua code runs before the call */
		if (qp == NULL || qp->o.ptr == NULL)
			qp = ibvl_check_qp(L, 1);
		a = p->a;
		mask = p->mask;
	} else {
		struct ibvl_guard g;
		ibvl_guard_begin(&g);
		qp = ibvl_check_qp(L, 1);
		mask = parse_attr_arg(L, 2, &a);
		ibvl_guard_end(L, &g);
	}
	int rc = ibv_modify_qp(qp->o.ptr, &a, mask);
	if (rc == 0) {
		lua_pushboolean(L, 1);
		return 1;
	}
	const char *hint = rc == EINVAL ? modify_hint(L, qp->o.ptr, &a, mask) : NULL;
	return ibvl_fail_hint(L, "ibv_modify_qp", rc == -1 ? errno : rc, hint);
}

/* What qp:query adds to attr_ints: of the attr, and of the init attr */
#define T struct ibv_qp_attr
static const struct ibvl_field query_out[] = {
	IBVL_FIELD(T, qp_state, IBVL_F_ENUM, ibvl_qp_states),
	IBVL_FIELD(T, cur_qp_state, IBVL_F_ENUM, ibvl_qp_states),
	IBVL_FIELD(T, path_mig_state, IBVL_F_ENUM, ibvl_mig_states),
	IBVL_FIELD(T, path_mtu, IBVL_F_MTU, NULL), IBVL_FIELD(T, qp_access_flags, IBVL_F_INT, NULL),
	IBVL_FIELD(T, sq_draining, IBVL_F_INT, NULL),
	IBVL_FIELD(T, ah_attr, IBVL_F_PUSH, ibvl_push_ah_attr_at),
	IBVL_FIELD(T, alt_ah_attr, IBVL_F_PUSH, ibvl_push_ah_attr_at), IBVL_FIELDS_END,
};
#undef T
#define T struct ibv_qp_init_attr
static const struct ibvl_field query_init_out[] = {
	IBVL_FIELD(T, cap, IBVL_F_TABLE, cap_out), IBVL_FIELD(T, sq_sig_all, IBVL_F_BOOL, NULL),
	IBVL_FIELDS_END,
};
#undef T

/* qp:query([t]) -> every attribute, and init_attr's cap as cap */
static int qp_query(lua_State *L)
{
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr init;
	int mask = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY |
		   IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY | IBV_QP_AV |
		   IBV_QP_PATH_MTU | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
		   IBV_QP_RQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_ALT_PATH | IBV_QP_MIN_RNR_TIMER |
		   IBV_QP_SQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_PATH_MIG_STATE | IBV_QP_CAP |
		   IBV_QP_DEST_QPN;
	memset(&a, 0, sizeof a);
	memset(&init, 0, sizeof init);
	int rc = ibv_query_qp(qp->o.ptr, &a, mask, &init);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_qp", rc);
	ibvl_out_table(L, 2, 32);
	for (const struct attr_int *f = attr_ints; f->name != NULL; f++)
		ibvl_set_int(L, f->name, get_attr_int(&a, f));
	ibvl_set_fields(L, &a, query_out);
	ibvl_set_fields(L, &init, query_init_out);
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

/* The attributes of a with mask's bits set, as qp:modify reads them
 * (rdma_init_qp_attr's result, cm_id.c). */
void ibvl_push_qp_attr_mask(lua_State *L, const struct ibv_qp_attr *a, int mask)
{
	lua_createtable(L, 0, 12);
	for (const struct attr_int *f = attr_ints; f->name != NULL; f++)
		if (mask & f->mask)
			ibvl_set_int(L, f->name, get_attr_int(a, f));
	if (mask & IBV_QP_STATE)
		ibvl_set_enum(L, "qp_state", ibvl_qp_states, a->qp_state);
	if (mask & IBV_QP_CUR_STATE)
		ibvl_set_enum(L, "cur_qp_state", ibvl_qp_states, a->cur_qp_state);
	if (mask & IBV_QP_PATH_MIG_STATE)
		ibvl_set_enum(L, "path_mig_state", ibvl_mig_states, a->path_mig_state);
	if (mask & IBV_QP_PATH_MTU)
		ibvl_set_int(L, "path_mtu", 128 << a->path_mtu);
	if (mask & IBV_QP_ACCESS_FLAGS)
		ibvl_set_int(L, "qp_access_flags", a->qp_access_flags);
	if (mask & IBV_QP_AV) {
		ibvl_push_ah_attr(L, &a->ah_attr);
		lua_setfield(L, -2, "ah_attr");
	}
	if (mask & IBV_QP_ALT_PATH) {
		ibvl_push_ah_attr(L, &a->alt_ah_attr);
		lua_setfield(L, -2, "alt_ah_attr");
	}
}

void ibvl_open_qp(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"modify", qp_modify}, {"query", qp_query}, {"post_recv", ibvl_qp_post_recv},
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
	luaL_newmetatable(L, QP_ATTR);
	lua_createtable(L, 0, 1); /* what scripts get instead: none gives these a __gc */
	lua_pushliteral(L, QP_ATTR);
	lua_setfield(L, -2, "__name");
	lua_setfield(L, -2, "__metatable");
	lua_pop(L, 1);
	ibvl_type_key(L, QP_ATTR, &prepared_key);
	lua_pushcfunction(L, l_qp_attr);
	lua_setfield(L, -2, "qp_attr");
}
