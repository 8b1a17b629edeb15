/*
 * verbs/qp_attr.c: a QP's attributes: read from tables (the mask computed
 * from the fields given), prepared once (ibv.qp_attr), qp:modify (with the
 * likely cause of an EINVAL), qp:query, the cap asked and granted.
 *
 *   qp:modify{qp_state = "init", pkey_index = 0, port_num = 1, qp_access_flags = 0}
 *   qp:modify{qp_state = "rtr", path_mtu = 1024, dest_qp_num = n, rq_psn = 0,
 *             max_dest_rd_atomic = 1, min_rnr_timer = 12,
 *             ah_attr = {port_num = 1, grh = {dgid = "::ffff:192.0.2.1", sgid_index = 1}}}
 *   local INIT = ibv.qp_attr{qp_state = "init", pkey_index = 0, port_num = 1}
 *   qp:modify(INIT)   -- parsed once: a prepared attribute set, as in C
 *   qp:query().qp_state, qp:query().cap.max_send_wr
 */
#include <stddef.h>
#include <string.h>

#include "verbs/verbs.h"

#define T struct ibv_qp_cap
static const struct ibvl_field cap_out[] = {
	IBVL_FIELD(T, max_send_wr, IBVL_F_INT, NULL), IBVL_FIELD(T, max_recv_wr, IBVL_F_INT, NULL),
	IBVL_FIELD(T, max_send_sge, IBVL_F_INT, NULL), IBVL_FIELD(T, max_recv_sge, IBVL_F_INT, NULL),
	IBVL_FIELD(T, max_inline_data, IBVL_F_INT, NULL), IBVL_FIELDS_END,
};
#undef T

void ibvl_push_qp_cap(lua_State *L, const struct ibv_qp_cap *cap)
{
	ibvl_push_fields(L, cap, cap_out);
}

static const char *const cap_fields[] = {"max_send_wr", "max_recv_wr", "max_send_sge",
                                         "max_recv_sge", "max_inline_data", NULL};

void ibvl_parse_qp_cap(lua_State *L, int idx, struct ibv_qp_cap *cap)
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
		ibvl_parse_qp_cap(L, idx, &a->cap);
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

/* qp:modify(attr | ibv.qp_attr{...}) */
int ibvl_qp_modify(lua_State *L)
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
int ibvl_qp_query(lua_State *L)
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

/* ibv.qp_attr and the prepared sets' metatable */
void ibvl_open_qp_attr(lua_State *L)
{
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
