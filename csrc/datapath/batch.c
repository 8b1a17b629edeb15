/*
 * batch.c: data-path steps prepared once and run by one call.
 *
 *   local cycle = ibv.batch{
 *     {"post_recv", qp, recv_wrs},          -- qp:post_recv(recv_wrs) (or an srq)
 *     {"post_send", qp, send_wrs, 1, 16},   -- qp:post_send(send_wrs, 1, 16)
 *     {"poll", cq, wcs},                    -- cq:poll(wcs)
 *   }
 *   local n, bad = cycle()   -- per poll step: its count and first_bad, as cq:poll
 *   -- a post that fails: nil, msg, errno, bad_wr, step (nothing after it ran)
 *
 * A loop that calls qp:post_recv and cq:poll pays for two calls from Lua
 * into C and their argument checks each time round; a batch checks its
 * objects once, when it is made (and keeps them alive), and each run costs
 * one call: it checks that every object is still open and every prepared
 * list still sound (what its WRs name still open, as qp:post_* does), and
 * only then runs the steps in order (a check that fails raises before any
 * step ran).  At most 8 steps; the lists' WRs and ranges, the
 * CQs and wc arrays are fixed; what the lists hold may change between runs.
 */
#include <string.h>

#include "verbs/cq.h"
#include "datapath/datapath.h"
#include "verbs/verbs.h"
#include "datapath/wr.h"
#include "datapath/post.h"

#define BATCH_MAX 8

/* a post step's kind is its enum ibvl_post_kind */
enum step_kind { POST_RECV = IBVL_POST_RECV, POST_SEND = IBVL_POST_SEND,
                 POST_SRQ_RECV = IBVL_POST_SRQ, POLL = IBVL_POST_WQ + 1 };

struct step {
	enum step_kind kind;
	int ud;               /* a post_send to a UD QP: each WR needs its AH */
	struct ibvl_obj *obj; /* the qp, srq or cq */
	struct ibvl_chain chain;   /* posts: the range of the prepared list */
	struct ibvl_wc_array *wcs; /* polls */
};

struct batch {
	int n, polls;
	struct step step[BATCH_MAX];
};

static const char *const kinds[] = {"post_recv", "post_send", "poll", NULL};
static const enum step_kind kind_of[] = {POST_RECV, POST_SEND, POLL}; /* of kinds[] */

/* The object of class cls at idx, for step i (raises naming the step). */
static void *step_obj(lua_State *L, int idx, const struct ibvl_class *cls, int i)
{
	void *o = ibvl_test(L, idx, cls); /* raises when closed */
	if (o == NULL)
		ibvl_error(L, "step %d: %s expected, got %s", i, cls->name, luaL_typename(L, idx));
	return o;
}

/* The chain of the range entries 4 and 5 of step i name in list (n WRs). */
static void step_range(lua_State *L, int idx, void *list, int n, struct step *st, int i)
{
	lua_Integer first = 1, count;
	if (!lua_isnil(L, idx) && (!ibvl_tointeger(L, idx, &first) || first < 1 || first > n))
		ibvl_error(L, "step %d: first WR must be an index into the list of %d", i, n);
	count = n - first + 1;
	if (!lua_isnil(L, idx + 1) &&
	    (!ibvl_tointeger(L, idx + 1, &count) || count < 1 || count > n - first + 1))
		ibvl_error(L, "step %d: count must be 1 to %d", i, (int)(n - first + 1));
	ibvl_range_chain(L, list, (int)first - 1, (int)count, &st->chain);
}

static void parse_post(lua_State *L, int base, struct step *st, int send, int i)
{
	struct ibvl_obj *o = send ? NULL : ibvl_test(L, base + 2, &ibvl_srq_class);
	st->kind = o != NULL ? POST_SRQ_RECV : send ? POST_SEND : POST_RECV;
	if (o == NULL) {
		o = step_obj(L, base + 2, &ibvl_qp_class, i);
		const char *why = ibvl_no_queue(o->ptr, send);
		if (why != NULL)
			ibvl_error(L, "step %d: %s", i, why);
	}
	st->obj = o;
	st->ud = send && ((struct ibv_qp *)o->ptr)->qp_type == IBV_QPT_UD;
	int n;
	void *list = ibvl_test_list(L, base + 3, send, &n);
	if (list == NULL)
		ibvl_error(L, "step %d: %s expected, got %s", i,
		           send ? "ibverbs.send_wrs" : "ibverbs.recv_wrs", luaL_typename(L, base + 3));
	step_range(L, base + 4, list, n, st, i);
}

/* Step i (1-based) from the table at idx, its objects kept by the batch (bi). */
static void parse_step(lua_State *L, int idx, int bi, struct step *st, int i)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		ibvl_error(L, "step %d: table expected, got %s", i, luaL_typename(L, idx));
	int base = lua_gettop(L);
	for (int k = 1; k <= 5; k++)
		lua_rawgeti(L, idx, k); /* base+1 .. base+5: kind, object, list or wcs, first, count */
	const char *name = lua_type(L, base + 1) == LUA_TSTRING ? lua_tostring(L, base + 1) : "";
	int kind = 0;
	while (kinds[kind] != NULL && strcmp(kinds[kind], name) != 0)
		kind++;
	if (kinds[kind] == NULL)
		ibvl_error(L, "step %d: its first entry must be post_recv, post_send or poll", i);
	if (kind_of[kind] == POLL) {
		st->kind = POLL;
		st->obj = step_obj(L, base + 2, &ibvl_cq_class, i);
		st->wcs = luaL_testudata(L, base + 3, IBVL_WC_ARRAY);
		if (st->wcs == NULL)
			ibvl_error(L, "step %d: %s expected, got %s", i, IBVL_WC_ARRAY,
			           luaL_typename(L, base + 3));
		if (!lua_isnil(L, base + 4))
			ibvl_error(L, "step %d: poll takes a cq and a wc array only", i);
	} else {
		parse_post(L, base, st, kind_of[kind] == POST_SEND, i);
	}
	for (int k = 2; k <= 3; k++) { /* the batch keeps them alive */
		lua_pushvalue(L, base + k);
		lua_rawseti(L, bi, (lua_Integer)lua_rawlen(L, bi) + 1);
	}
	lua_settop(L, base);
}

/* Posts step i's chain (checked by run); 0, or the failure's 5 results. */
static int step_post(lua_State *L, struct step *st, int i)
{
	void *bad = NULL;
	enum ibvl_post_kind kind = (enum ibvl_post_kind)st->kind;
	int rc = ibvl_post_run(kind, st->obj->ptr, &st->chain, &bad);
	if (rc == 0)
		return 0;
	lua_settop(L, 0); /* what earlier polls pushed */
	ibvl_post_result(L, kind, rc, &st->chain, bad, NULL);
	lua_pushinteger(L, i);
	return 5;
}

/* Polls step st's CQ into its wc array, pushing the count and the first
 * unsuccessful one; a failure's results (1: the count of them), or 0. */
static int step_poll(lua_State *L, struct step *st)
{
	int got = ibvl_cq_poll((struct ibvl_cq *)st->obj, st->wcs->n, st->wcs->wc);
	if (got < 0) {
		lua_settop(L, 0);
		return ibvl_fail(L, "ibv_poll_cq", -got);
	}
	st->wcs->count = got;
	lua_pushinteger(L, got);
	ibvl_push_first_bad(L, st->wcs->wc, got);
	return 0;
}

/* The batch's closure: checks every step, then runs them. */
static int run(lua_State *L)
{
	struct batch *b = lua_touserdata(L, lua_upvalueindex(1));
	struct step *end = b->step + b->n;
	for (struct step *st = b->step; st < end; st++) { /* a step that cannot run stops them all */
		if (st->obj->ptr == NULL)
			return ibvl_error(L, "step %d: attempt to use a closed %s", (int)(st - b->step) + 1,
			                  st->obj->cls->name);
		if (st->kind != POLL)
			ibvl_chain_check(L, &st->chain);
		if (st->ud)
			ibvl_check_send_chain(L, (struct ibvl_qp *)st->obj, &st->chain);
	}
	/* nothing from here on runs Lua code or raises */
	for (struct step *st = b->step; st < end; st++) {
		int r = st->kind == POLL ? step_poll(L, st) : step_post(L, st, (int)(st - b->step) + 1);
		if (r != 0)
			return r;
	}
	int pushed = 2 * b->polls;
	if (pushed == 0)
		lua_pushboolean(L, 1), pushed = 1;
	return pushed;
}

/* ibv.batch(steps) -> function running them (see the top of this file) */
static int l_batch(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	int n = (int)lua_rawlen(L, 1);
	if (n < 1 || n > BATCH_MAX)
		ibvl_argerror(L, 1, "steps", "1 to %d steps expected, got %d", BATCH_MAX, n);
	struct batch *b = lua_newuserdatauv(L, sizeof *b, 1); /* 2 */
	memset(b, 0, sizeof *b);
	lua_createtable(L, 2 * n, 0); /* 3: what the steps use */
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	for (int i = 0; i < n; i++) {
		lua_rawgeti(L, 1, i + 1);
		parse_step(L, 4, 3, &b->step[i], i + 1);
		lua_pop(L, 1);
		b->polls += b->step[i].kind == POLL;
	}
	ibvl_guard_end(L, &g);
	b->n = n;
	lua_setiuservalue(L, 2, 1);
	lua_pushcclosure(L, run, 1);
	return 1;
}

void ibvl_open_batch(lua_State *L)
{
	lua_pushcfunction(L, l_batch);
	lua_setfield(L, -2, "batch");
}
