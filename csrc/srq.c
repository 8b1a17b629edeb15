/*
 * srq.c: shared receive queues.
 *
 *   local srq = assert(pd:create_srq{max_wr = 256, max_sge = 1 [, srq_limit = 0]})
 *   srq.max_wr, srq.max_sge  -- what the device granted
 *   srq:post_recv(wr | {wr, ...} | recv_wrs [, first, count])   -- ibv_post_srq_recv
 *   pd:create_qp{qp_type = "rc", srq = srq, ...}
 */
#include <string.h>

#include "ibvl.h"

struct srq {
	struct ibvl_obj o;
	uint32_t max_wr, max_sge;
};

static int destroy_srq(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_srq(ptr);
}

static int srq_field(lua_State *L, void *obj, const char *key)
{
	struct srq *s = obj;
	if (strcmp(key, "max_wr") == 0)
		lua_pushinteger(L, s->max_wr);
	else if (strcmp(key, "max_sge") == 0)
		lua_pushinteger(L, s->max_sge);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, ((struct ibv_srq *)s->o.ptr)->handle);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_srq_class = {"ibverbs.srq", destroy_srq, "ibv_destroy_srq",
                                          srq_field};

static const char *const srq_fields[] = {"max_wr", "max_sge", "srq_limit", NULL};

/* pd:create_srq{max_wr=, max_sge=, srq_limit=} */
/* A closed SRQ userdata that will hold an SRQ with the given caps (for
 * SRQs that rdma_create_srq makes). */
struct ibvl_obj *ibvl_srq_new(lua_State *L, uint32_t max_wr, uint32_t max_sge)
{
	struct srq *s = ibvl_new(L, &ibvl_srq_class, sizeof *s);
	s->max_wr = max_wr;
	s->max_sge = max_sge;
	return &s->o;
}

static int l_create_srq(lua_State *L)
{
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", srq_fields);
	a.attr.max_wr = (uint32_t)ibvl_int_field(L, 2, "max_wr", 16, 1, INT32_MAX);
	a.attr.max_sge = (uint32_t)ibvl_int_field(L, 2, "max_sge", 1, 1, INT32_MAX);
	a.attr.srq_limit = (uint32_t)ibvl_int_field(L, 2, "srq_limit", 0, 0, INT32_MAX);
	struct srq *s = ibvl_new(L, &ibvl_srq_class, sizeof *s);
	s->o.ptr = ibv_create_srq(pd->ptr, &a);
	if (s->o.ptr == NULL)
		return ibvl_fail(L, "ibv_create_srq", errno);
	s->max_wr = a.attr.max_wr;
	s->max_sge = a.attr.max_sge;
	ibvl_use(L, -1, 1);
	ibvl_track(L, -1);
	return 1;
}

static int l_post_recv(lua_State *L)
{
	struct srq *s = ibvl_check(L, 1, &ibvl_srq_class);
	struct ibvl_chain c;
	struct ibv_recv_wr *wr = ibvl_recv_chain(L, 2, &c), *bad = NULL;
	int rc = ibv_post_srq_recv(s->o.ptr, wr, &bad);
	ibvl_chain_done(&c, 0);
	return ibvl_post_result(L, "ibv_post_srq_recv", rc, &c, bad, sizeof *wr);
}

void ibvl_open_srq(lua_State *L)
{
	static const luaL_Reg methods[] = {{"post_recv", l_post_recv}, {NULL, NULL}};
	static const luaL_Reg pd_methods[] = {{"create_srq", l_create_srq}, {NULL, NULL}};
	ibvl_register(L, &ibvl_srq_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
}
