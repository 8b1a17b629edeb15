/*
 * rwq_ind_tbl.c: receive WQ indirection tables, for RSS QPs.
 *
 *   local tbl = assert(ctx:create_rwq_ind_table{log_ind_tbl_size = 1, ind_tbl = {wq1, wq2}})
 *   local qp = assert(ctx:create_qp_ex{qp_type = "raw_packet", pd = pd, rwq_ind_tbl = tbl,
 *                     rx_hash_conf = {function = 0, key = key40, fields_mask = ...}})
 *   tbl.ind_tbl_num
 * ind_tbl holds 2^log_ind_tbl_size WQs (log_ind_tbl_size defaults to the
 * log2 of the array's length).  The table keeps its WQs alive; the first
 * few (IBVL_MAXREFS - 1) also refuse to close while the table is open, the
 * others are refused by the kernel (EBUSY).
 */
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs.h"

static int destroy_tbl(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_rwq_ind_table(ptr);
}

static int tbl_field(lua_State *L, void *obj, const char *key)
{
	struct ibv_rwq_ind_table *t = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "ind_tbl_num") == 0)
		lua_pushinteger(L, t->ind_tbl_num);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, t->ind_tbl_handle);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_rwq_ind_tbl_class = {"ibverbs.rwq_ind_tbl", destroy_tbl,
                                                  "ibv_destroy_rwq_ind_table", tbl_field, 0};

#define MAX_LOG 16 /* 65536 WQs: beyond any device */

static const char *const tbl_fields[] = {"log_ind_tbl_size", "ind_tbl", NULL};

/* The size of the ind_tbl array at idx: 2^log entries, log given or derived. */
static uint32_t table_log(lua_State *L, int idx, int t)
{
	int n = (int)lua_rawlen(L, t);
	uint32_t log = 0;
	while (log < MAX_LOG && (1 << log) < n)
		log++;
	log = (uint32_t)ibvl_int_field(L, idx, "log_ind_tbl_size", log, 0, MAX_LOG);
	if (n != 1 << log)
		ibvl_error(L, "init_attr: field 'ind_tbl': %d WQs, log_ind_tbl_size %d needs %d",
		           n, (int)log, 1 << log);
	return log;
}

/* ctx:create_rwq_ind_table{log_ind_tbl_size=, ind_tbl = {wq, ...}} */
static int l_create(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, &ibvl_context_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "init_attr", tbl_fields);
	if (ibvl_getfield(L, 2, "ind_tbl") != LUA_TTABLE)
		ibvl_error(L, "init_attr: field 'ind_tbl': array of WQs expected, got %s",
		           luaL_typename(L, -1));
	int t = lua_gettop(L);
	uint32_t log = table_log(L, 2, t);
	int n = 1 << log;
	luaL_checkstack(L, n + 4, "too many WQs");
	struct ibv_wq **wqs = lua_newuserdatauv(L, (size_t)n * sizeof *wqs, 0);
	int first = lua_gettop(L) + 1;
	for (int i = 0; i < n; i++) {
		int saved = ibvl_path_push("ind_tbl", i + 1);
		lua_rawgeti(L, t, i + 1);
		wqs[i] = ((struct ibvl_obj *)ibvl_check(L, -1, &ibvl_wq_class))->ptr;
		ibvl_path_pop(saved);
	}
	struct ibvl_obj *o = ibvl_new(L, &ibvl_rwq_ind_tbl_class, sizeof *o, &g);
	int self = lua_gettop(L);
	struct ibvl_obj *ctx = lua_touserdata(L, 1);
	struct ibv_rwq_ind_table_init_attr a = {log, wqs, 0};
	o->ptr = ibv_create_rwq_ind_table(ctx->ptr, &a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_rwq_ind_table", errno);
	ibvl_use(L, self, 1);
	for (int i = 0; i < n; i++) {
		int seen = 0;
		for (int j = 0; j < i && !seen; j++)
			seen = wqs[j] == wqs[i];
		if (seen)
			continue;
		if (o->nrefs < IBVL_MAXREFS)
			ibvl_use(L, self, first + i);
		else
			ibvl_keep(L, self, first + i);
	}
	return 1;
}

void ibvl_open_rwq_ind_tbl(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {{"create_rwq_ind_table", l_create}, {NULL, NULL}};
	ibvl_register(L, &ibvl_rwq_ind_tbl_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
