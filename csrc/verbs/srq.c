/*
 * srq.c: shared receive queues: basic, XRC and tag-matching SRQs.
 *
 *   local srq = assert(pd:create_srq{max_wr = 256, max_sge = 1 [, srq_limit = 0]})
 *   local xsrq = assert(ctx:create_srq_ex{srq_type = "xrc", pd = pd, xrcd = xrcd, cq = cq,
 *                                         max_wr = 256, max_sge = 1})
 *   srq.max_wr, srq.max_sge        -- what the device granted (updated by a resize)
 *   srq.srq_type, srq.srq_num      -- "basic" | "xrc" | "tm"; the XRC SRQ number
 *   srq:modify{max_wr = 512}       -- resize; srq:modify{srq_limit = 8} arms the limit event
 *   srq:query().srq_limit; srq:get_srq_num()
 *   srq:post_recv(wr | {wr, ...} | recv_wrs [, first, count])   -- ibv_post_srq_recv
 *   pd:create_qp{qp_type = "rc", srq = srq, ...}
 * The sizes may be given flat or in an attr table ({attr = {max_wr = 256}}), as
 * in struct ibv_srq_init_attr.  The comp_mask of create_srq_ex comes from the
 * fields given.
 */
#include <stddef.h>
#include <string.h>

#include <rdma/rdma_verbs.h>

#include "verbs/verbs.h"
#include "verbs/sge.h"

static int destroy_srq(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_srq *s = (struct ibvl_srq *)o;
	if (s->cm_id != NULL) {
		rdma_destroy_srq(s->cm_id);
		return 0;
	}
	return ibv_destroy_srq(ptr);
}

static int srq_field(lua_State *L, void *obj, const char *key)
{
	struct ibvl_srq *s = obj;
	if (strcmp(key, "max_wr") == 0)
		lua_pushinteger(L, s->max_wr);
	else if (strcmp(key, "max_sge") == 0)
		lua_pushinteger(L, s->max_sge);
	else if (strcmp(key, "srq_type") == 0)
		ibvl_push_enum(L, ibvl_srq_types, s->srq_type);
	else if (strcmp(key, "srq_num") == 0 || strcmp(key, "xrc_srq_num") == 0) {
		if (s->srq_type != IBV_SRQT_XRC)
			return 0;
		lua_pushinteger(L, s->srq_num);
	} else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, ((struct ibv_srq *)s->o.ptr)->handle);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_srq_class = {"ibverbs.srq", destroy_srq, "ibv_destroy_srq",
                                          srq_field, 0};

void ibvl_srq_adopt(lua_State *L, const struct ibv_srq_attr *granted, int srq_type)
{
	struct ibvl_srq *s = lua_touserdata(L, -1);
	s->max_wr = granted->max_wr;
	s->max_sge = granted->max_sge;
	s->srq_type = srq_type;
	if (srq_type == IBV_SRQT_XRC && ibv_get_srq_num(s->o.ptr, &s->srq_num) != 0)
		s->srq_num = 0;
	ibvl_track(L, -1);
}

/* ---- creation ------------------------------------------------------------ */
static const char *const size_fields[] = {"max_wr", "max_sge", "srq_limit", NULL};

/* The sizes, flat in the table at idx or in its attr sub-table. */
static void parse_sizes(lua_State *L, int idx, struct ibv_srq_attr *a)
{
	int t = idx;
	if (ibvl_getfield(L, idx, "attr") != LUA_TNIL) {
		for (int i = 0; size_fields[i] != NULL; i++)
			if (ibvl_has_field(L, idx, size_fields[i]))
				ibvl_error(L, "init_attr: field '%s' given both flat and in 'attr'",
				           size_fields[i]);
		t = lua_gettop(L);
		ibvl_check_fields(L, t, "attr", size_fields);
	}
	a->max_wr = (uint32_t)ibvl_int_field(L, t, "max_wr", 16, 0, UINT32_MAX);
	a->max_sge = (uint32_t)ibvl_int_field(L, t, "max_sge", 1, 0, UINT32_MAX);
	a->srq_limit = (uint32_t)ibvl_int_field(L, t, "srq_limit", 0, 0, UINT32_MAX);
	lua_pop(L, 1);
}

static const char *const srq_fields[] = {"max_wr", "max_sge", "srq_limit", "attr", NULL};

/* pd:create_srq{max_wr=, max_sge=, srq_limit=} */
static int l_create_srq(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	if (!lua_isnoneornil(L, 2)) {
		ibvl_check_fields(L, 2, "init_attr", srq_fields);
		parse_sizes(L, 2, &a.attr);
	} else {
		a.attr.max_wr = 16;
		a.attr.max_sge = 1;
	}
	struct ibvl_srq *s = ibvl_new(L, &ibvl_srq_class, sizeof *s, &g);
	s->o.ptr = ibv_create_srq(pd->ptr, &a);
	if (s->o.ptr == NULL)
		return ibvl_fail(L, "ibv_create_srq", errno);
	ibvl_use(L, -1, 1);
	ibvl_srq_adopt(L, &a.attr, IBV_SRQT_BASIC);
	return 1;
}

static const char *const srq_ex_fields[] = {"srq_type", "pd", "xrcd", "cq", "tm_cap",
                                            "max_wr", "max_sge", "srq_limit", "attr", NULL};
static const char *const tm_fields[] = {"max_num_tags", "max_ops", NULL};

/* Objects an init attr ex names, in the order the new SRQ uses them. */
static const char *const srq_used[] = {"pd", "xrcd", "cq", NULL};

/* Reads an init attr ex; pushes the objects it names (srq_used order, nil
 * where absent) and returns the index of the first. */
static int parse_init_attr_ex(lua_State *L, int idx, struct ibv_srq_init_attr_ex *a)
{
	ibvl_check_fields(L, idx, "init_attr", srq_ex_fields);
	if (ibvl_has_field(L, idx, "srq_type")) {
		a->srq_type = (enum ibv_srq_type)ibvl_enum_field(L, idx, "srq_type", ibvl_srq_types,
		                                                 IBV_SRQT_BASIC);
		a->comp_mask |= IBV_SRQ_INIT_ATTR_TYPE;
	}
	if (ibvl_getfield(L, idx, "tm_cap") != LUA_TNIL) {
		int t = lua_gettop(L);
		ibvl_check_fields(L, t, "tm_cap", tm_fields);
		a->tm_cap.max_num_tags = (uint32_t)ibvl_int_field(L, t, "max_num_tags", 0, 0,
		                                                  UINT32_MAX);
		a->tm_cap.max_ops = (uint32_t)ibvl_int_field(L, t, "max_ops", 0, 0, UINT32_MAX);
		a->comp_mask |= IBV_SRQ_INIT_ATTR_TM;
	}
	lua_pop(L, 1);
	parse_sizes(L, idx, &a->attr);
	const struct ibvl_class *classes[] = {&ibvl_pd_class, &ibvl_xrcd_class, &ibvl_cq_class};
	const uint32_t masks[] = {IBV_SRQ_INIT_ATTR_PD, IBV_SRQ_INIT_ATTR_XRCD,
	                          IBV_SRQ_INIT_ATTR_CQ};
	void **ptrs[] = {(void **)&a->pd, (void **)&a->xrcd, (void **)&a->cq};
	int first = lua_gettop(L) + 1;
	for (int i = 0; srq_used[i] != NULL; i++) {
		struct ibvl_obj *o = ibvl_obj_field_keep(L, idx, srq_used[i], classes[i]);
		*ptrs[i] = o ? o->ptr : NULL;
		a->comp_mask |= o ? masks[i] : 0;
	}
	return first;
}

/* Raises when an object the SRQ type needs is missing: verbs dereferences it. */
static void check_needed(lua_State *L, const struct ibv_srq_init_attr_ex *a)
{
	int type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? (int)a->srq_type : IBV_SRQT_BASIC;
	const char *name = ibvl_enum_name(ibvl_srq_types, type);
	if (name == NULL)
		ibvl_error(L, "init_attr: field 'srq_type': unknown SRQ type %d", type);
	if (a->pd == NULL)
		ibvl_error(L, "init_attr: field 'pd' is required");
	if (type == IBV_SRQT_XRC && a->xrcd == NULL)
		ibvl_error(L, "init_attr: field 'xrcd' is required for an xrc SRQ");
	if (type != IBV_SRQT_BASIC && a->cq == NULL)
		ibvl_error(L, "init_attr: field 'cq' is required for a%s %s SRQ",
		           type == IBV_SRQT_XRC ? "n" : "", name);
}

/* ctx:create_srq_ex{srq_type=, pd=, xrcd=, cq=, tm_cap=, max_wr=, max_sge=, srq_limit=} */
static int l_create_srq_ex(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_srq_init_attr_ex a;
	memset(&a, 0, sizeof a);
	int used = parse_init_attr_ex(L, 2, &a);
	struct ibvl_srq *s = ibvl_new(L, &ibvl_srq_class, sizeof *s, &g);
	int self = lua_gettop(L);
	if ((a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a.srq_type == IBV_SRQT_XRC &&
	    ibvl_xrc_errno(ctx->ptr, EINVAL) == EOPNOTSUPP)
		return ibvl_fail(L, "ibv_create_srq_ex", EOPNOTSUPP); /* before asking for an xrcd */
	check_needed(L, &a);
	s->o.ptr = ibv_create_srq_ex(ctx->ptr, &a);
	if (s->o.ptr == NULL) {
		int xrc = (a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE) && a.srq_type == IBV_SRQT_XRC;
		return ibvl_fail(L, "ibv_create_srq_ex", xrc ? ibvl_xrc_errno(ctx->ptr, errno) : errno);
	}
	if (a.pd == NULL)
		ibvl_use(L, self, 1);
	for (int i = 0; srq_used[i] != NULL; i++)
		if (!lua_isnil(L, used + i))
			ibvl_use(L, self, used + i);
	ibvl_srq_adopt(L, &a.attr, a.comp_mask & IBV_SRQ_INIT_ATTR_TYPE ? a.srq_type
	                                                                  : IBV_SRQT_BASIC);
	return 1;
}

/* ---- attributes ---------------------------------------------------------- */
static const char *const modify_fields[] = {"max_wr", "srq_limit", NULL};

/* srq:modify{max_wr=, srq_limit=}: the mask comes from the fields given */
static int srq_modify(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_srq *s = ibvl_check(L, 1, &ibvl_srq_class);
	struct ibv_srq_attr a;
	memset(&a, 0, sizeof a);
	ibvl_check_fields(L, 2, "attr", modify_fields);
	int mask = 0;
	if (ibvl_has_field(L, 2, "max_wr")) {
		a.max_wr = (uint32_t)ibvl_int_field(L, 2, "max_wr", 0, 0, UINT32_MAX);
		mask |= IBV_SRQ_MAX_WR;
	}
	if (ibvl_has_field(L, 2, "srq_limit")) {
		a.srq_limit = (uint32_t)ibvl_int_field(L, 2, "srq_limit", 0, 0, UINT32_MAX);
		mask |= IBV_SRQ_LIMIT;
	}
	if (mask == 0)
		return luaL_argerror(L, 2, "attr: no attribute given");
	ibvl_guard_end(L, &g);
	int rc = ibv_modify_srq(s->o.ptr, &a, mask);
	if (rc == 0 && (mask & IBV_SRQ_MAX_WR) && ibv_query_srq(s->o.ptr, &a) == 0)
		s->max_wr = a.max_wr;
	return ibvl_result(L, "ibv_modify_srq", rc);
}

#define T struct ibv_srq_attr
static const struct ibvl_field srq_attr_out[] = {
	IBVL_FIELD(T, max_wr, IBVL_F_INT, NULL), IBVL_FIELD(T, max_sge, IBVL_F_INT, NULL),
	IBVL_FIELD(T, srq_limit, IBVL_F_INT, NULL), IBVL_FIELDS_END,
};
#undef T

/* srq:query([t]) -> {max_wr=, max_sge=, srq_limit=} */
static int srq_query(lua_State *L)
{
	struct ibvl_srq *s = ibvl_check(L, 1, &ibvl_srq_class);
	struct ibv_srq_attr a;
	memset(&a, 0, sizeof a);
	int rc = ibv_query_srq(s->o.ptr, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_srq", rc);
	ibvl_out_table(L, 2, 3);
	ibvl_set_fields(L, &a, srq_attr_out);
	return 1;
}

static int l_get_srq_num(lua_State *L)
{
	struct ibvl_srq *s = ibvl_check(L, 1, &ibvl_srq_class);
	uint32_t num = 0;
	int rc = ibv_get_srq_num(s->o.ptr, &num);
	if (rc != 0)
		return ibvl_fail(L, "ibv_get_srq_num", rc);
	lua_pushinteger(L, num);
	return 1;
}

/* ---- tag matching operations (ibv_post_srq_ops) ---------------------------
 *   local handles = assert(srq:post_srq_ops{
 *     {opcode = "tag_add", wr_id = 1, recv_wr_id = 7, tag = 0x1234, mask = -1,
 *      sge = {mr = mr, length = 4096}, flags = {"signaled"}},
 *     {opcode = "tag_del", handle = h}, {opcode = "tag_sync", unexpected_cnt = n}})
 * returns the handle of each op (a tag_add's new handle); on failure nil,
 * msg, errno and the index of the failing op. */
#define MAX_OPS 16
#define OPS_SGE 16

static const struct ibvl_enum ops_opcodes[] = {
	{"tag_add", IBV_WR_TAG_ADD}, {"tag_del", IBV_WR_TAG_DEL}, {"tag_sync", IBV_WR_TAG_SYNC},
	{NULL, 0},
};
static const struct ibvl_enum ops_flags[] = {
	{"signaled", IBV_OPS_SIGNALED}, {"tm_sync", IBV_OPS_TM_SYNC}, {NULL, 0},
};
static const char *const op_fields[] = {"wr_id", "opcode", "flags", "unexpected_cnt", "handle",
                                        "recv_wr_id", "sge", "sg_list", "tag", "mask", NULL};

static void parse_op(lua_State *L, int idx, struct ibv_ops_wr *op, struct ibv_sge *sge,
                     struct ibvl_sge_src *src)
{
	ibvl_check_fields(L, idx, "op", op_fields);
	memset(op, 0, sizeof *op);
	op->wr_id = ibvl_u64_field(L, idx, "wr_id", 0);
	op->opcode = (enum ibv_ops_wr_opcode)ibvl_enum_field(L, idx, "opcode", ops_opcodes,
	                                                     IBV_WR_TAG_ADD);
	op->flags = (int)ibvl_flags_field(L, idx, "flags", ops_flags, 0);
	op->tm.unexpected_cnt = (uint32_t)ibvl_int_field(L, idx, "unexpected_cnt", 0, 0,
	                                                 UINT32_MAX);
	op->tm.handle = (uint32_t)ibvl_int_field(L, idx, "handle", 0, 0, UINT32_MAX);
	op->tm.add.recv_wr_id = ibvl_u64_field(L, idx, "recv_wr_id", 0);
	op->tm.add.tag = ibvl_u64_field(L, idx, "tag", 0);
	op->tm.add.mask = ibvl_u64_field(L, idx, "mask", UINT64_MAX);
	op->tm.add.sg_list = sge;
	op->tm.add.num_sge = ibvl_parse_sges(L, idx, sge, src, OPS_SGE);
}

static int l_post_srq_ops(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, &ibvl_srq_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	lua_rawgeti(L, 2, 1);
	int single = !lua_istable(L, -1);
	lua_pop(L, 1);
	int n = single ? 1 : (int)lua_rawlen(L, 2);
	if (n > MAX_OPS)
		return luaL_argerror(L, 2, "at most 16 ops a call");
	/* the ops read once, from a private copy that keeps their MRs until the call */
	int t = ibvl_copy_arg(L, 2, single ? 2 : 3);
	struct ibv_ops_wr ops[MAX_OPS];
	struct ibv_sge sge[MAX_OPS][OPS_SGE];
	struct ibvl_sge_src src[MAX_OPS][OPS_SGE];
	for (int i = 0; i < n; i++) {
		int saved = ibvl_path_push("#op", i + 1);
		if (!single && (lua_rawgeti(L, t, i + 1), lua_type(L, -1)) != LUA_TTABLE)
			ibvl_error(L, "op table expected, got %s", luaL_typename(L, -1));
		parse_op(L, single ? t : lua_gettop(L), &ops[i], sge[i], src[i]);
		if (!single)
			lua_pop(L, 1);
		ops[i].next = i + 1 < n ? &ops[i + 1] : NULL;
		ibvl_path_pop(saved);
	}
	lua_createtable(L, n, 0);
	struct ibvl_srq *s = ibvl_check(L, 1, &ibvl_srq_class);
	ibvl_guard_end(L, &g);
	struct ibv_ops_wr *bad = NULL;
	int rc = ibv_post_srq_ops(s->o.ptr, ops, &bad);
	if (rc != 0) {
		ibvl_fail(L, "ibv_post_srq_ops", rc);
		/* a provider that refuses every op may leave bad unset: the first failed */
		lua_pushinteger(L, bad != NULL && bad >= ops && bad < ops + n ? bad - ops + 1 : 1);
		return 4;
	}
	for (int i = 0; i < n; i++) {
		lua_pushinteger(L, ops[i].tm.handle);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

void ibvl_open_srq(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"post_recv", ibvl_srq_post_recv}, {"modify", srq_modify}, {"query", srq_query},
		{"get_srq_num", l_get_srq_num}, {"post_srq_ops", l_post_srq_ops}, {NULL, NULL},
	};
	static const luaL_Reg pd_methods[] = {{"create_srq", l_create_srq}, {NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {{"create_srq_ex", l_create_srq_ex}, {NULL, NULL}};
	ibvl_register(L, &ibvl_srq_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
