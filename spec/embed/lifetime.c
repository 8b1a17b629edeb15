/*
 * spec/embed/lifetime.c: the lifetime rules of the embedding API (ibverbs.h),
 * checked on rxe0 by spec/device/tools/embed_spec.lua (built by `make embed`).
 * Prints "ok - ..." / "not ok - ..." per check; exit status 0 when all pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>
#include <rdma/rdma_cma.h>

#include "ibverbs.h"

static int failures;

static void check(int ok, const char *what)
{
	printf("%s - %s\n", ok ? "ok" : "not ok", what);
	if (!ok)
		failures++;
}

static void die(const char *what)
{
	perror(what);
	exit(2);
}

static lua_State *new_state(void)
{
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	ibvl_preload(L);
	if (luaL_dostring(L, "ibv = require 'ibverbs'") != LUA_OK)
		die(lua_tostring(L, -1));
	return L;
}

/* Runs code; returns its first result as a string ("" when none), or the
 * error message prefixed with "error: ". */
static const char *run(lua_State *L, const char *code)
{
	static char out[512];
	if (luaL_dostring(L, code) != LUA_OK)
		snprintf(out, sizeof out, "error: %s", lua_tostring(L, -1));
	else
		snprintf(out, sizeof out, "%s", lua_isnoneornil(L, -1) ? "" : luaL_checkstring(L, -1));
	lua_settop(L, 0);
	return out;
}

static int qp_alive(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	return ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) == 0;
}

int main(int argc, char **argv)
{
	const char *devname = argc > 1 ? argv[1] : "rxe0";
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	for (int i = 0; list != NULL && list[i] != NULL && ctx == NULL; i++)
		if (strcmp(ibv_get_device_name(list[i]), devname) == 0)
			ctx = ibv_open_device(list[i]);
	if (list != NULL)
		ibv_free_device_list(list);
	if (ctx == NULL)
		die(devname);
	struct ibv_pd *pd = ibv_alloc_pd(ctx);
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 16, NULL, NULL, 0) : NULL;
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
	                              .cap = {.max_send_wr = 4, .max_recv_wr = 4,
	                                      .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *qp = cq ? ibv_create_qp(pd, &ia) : NULL;
	if (qp == NULL)
		die("alloc_pd/create_cq/create_qp");

	/* ---- borrowed objects survive close, full GC cycles and lua_close ---- */
	lua_State *L = new_state();
	ibvl_push_qp(L, qp, IBVL_BORROWED);
	ibvl_push_qp(L, qp, IBVL_BORROWED);
	check(lua_rawequal(L, -1, -2), "the same pointer pushes the same userdata");
	lua_setglobal(L, "qp");
	lua_pop(L, 1);
	check(strcmp(run(L, "return qp.qp_type .. ' ' .. qp.state .. ' ' .. "
	                    "tostring(qp.cap.max_send_wr >= 4)"), "rc reset true") == 0,
	      "a lent QP reads as the binding's own");
	ibvl_push_pd(L, pd, IBVL_BORROWED);
	lua_setglobal(L, "pd");
	check(strcmp(run(L, "local ok, msg, e = pd:close() return tostring(ok) .. ' ' .. "
	                    "tostring(e == ibv.errno.EBUSY)"), "nil true") == 0,
	      "a lent PD under a QP: close gives EBUSY");
	check(strcmp(run(L, "return tostring(qp:close())"), "true") == 0 && qp_alive(qp),
	      "qp:close() on a lent QP detaches: the QP lives on");
	check(strstr(run(L, "local ok, e = pcall(function() return qp:query() end) return e"),
	                 "closed ibverbs.qp") != NULL,
	      "a detached QP is closed for the script");
	ibvl_push_qp(L, qp, IBVL_BORROWED); /* pushed again: a fresh userdata */
	lua_setglobal(L, "qp");
	run(L, "qp, pd = nil, nil collectgarbage() collectgarbage()");
	check(qp_alive(qp), "lent objects the script dropped survive full GC cycles");
	ibvl_push_qp(L, qp, IBVL_BORROWED);
	lua_setglobal(L, "qp");
	lua_close(L);
	check(qp_alive(qp), "lent objects survive lua_close");

	/* ---- release: later use is a clean Lua error ---- */
	L = new_state();
	ibvl_push_qp(L, qp, IBVL_BORROWED);
	lua_setglobal(L, "qp");
	ibvl_push_pd(L, pd, IBVL_BORROWED);
	lua_setglobal(L, "pd");
	run(L, "mr = assert(pd:reg_mr(4096, {'local_write'}))");
	check(ibvl_release_qp(L, qp) == 1, "ibvl_release_qp: Lua held it");
	check(ibvl_release_qp(L, qp) == 0, "ibvl_release_qp again: nothing to do");
	check(strstr(run(L, "return qp:query()"), "error: ") != NULL &&
	          strstr(run(L, "return qp:query()"), "attempt to use a closed ibverbs.qp") != NULL,
	      "a released QP: the script gets 'attempt to use a closed ibverbs.qp'");
	lua_getglobal(L, "qp");
	check(ibvl_to_qp(L, -1) == NULL && strstr(ibvl_to_error(), "closed ibverbs.qp") != NULL,
	      "ibvl_to_qp on a released QP: NULL, closed");
	lua_pop(L, 1);
	check(qp_alive(qp) && ibv_destroy_qp(qp) == 0, "the host destroys the released QP");
	check(ibvl_release_pd(L, pd) == 1, "ibvl_release_pd");
	check(strcmp(run(L, "return tostring(mr:is_closed())"), "true") == 0,
	      "releasing a PD closes the MR the script made on it");
	check(strstr(run(L, "return pd:reg_mr(64)"), "attempt to use a closed ibverbs.pd") != NULL,
	      "a released PD: a clean Lua error");
	lua_close(L);

	/* ---- owned objects: Lua destroys them; a lent parent stays busy under them ---- */
	L = new_state();
	struct ibv_cq *cq2 = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	ia.send_cq = ia.recv_cq = cq2;
	struct ibv_qp *qp2 = cq2 ? ibv_create_qp(pd, &ia) : NULL;
	char *buf = calloc(1, 4096);
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
	if (qp2 == NULL || mr == NULL)
		die("create_qp/reg_mr");
	ibvl_push_qp(L, qp2, IBVL_OWNED); /* its PD and CQ come along, lent */
	lua_setglobal(L, "qp2");
	ibvl_push_mr(L, mr, IBVL_OWNED);
	lua_setglobal(L, "mr");
	ibvl_push_cq(L, cq2, IBVL_BORROWED);
	lua_setglobal(L, "cq2");
	check(strcmp(run(L, "local ok, _, e = cq2:close() return tostring(ok) .. ' ' .. "
	                    "tostring(e == ibv.errno.EBUSY)"), "nil true") == 0,
	      "a script cannot close a lent CQ under an owned QP (EBUSY)");
	ibvl_push_pd(L, pd, IBVL_BORROWED);
	lua_setglobal(L, "pd");
	check(strcmp(run(L, "local ok, _, e = pd:close() return tostring(ok) .. ' ' .. "
	                    "tostring(e == ibv.errno.EBUSY)"), "nil true") == 0,
	      "a script cannot close a lent PD under an owned QP (EBUSY)");
	run(L, "qp2 = nil collectgarbage() collectgarbage()");
	check(ibvl_release_cq(L, cq2) == 1 && ibv_destroy_cq(cq2) == 0,
	      "the owned QP was destroyed by the GC: its lent CQ is free again");
	lua_getglobal(L, "mr");
	check(ibvl_to_mr(L, -1) == mr, "ibvl_to_mr on an owned MR");
	check(ibvl_to_qp(L, -1) == NULL && strcmp(ibvl_to_error(),
	                                          "ibverbs.qp expected, got ibverbs.mr") == 0,
	      "ibvl_to_qp on an MR: 'ibverbs.qp expected, got ibverbs.mr'");
	lua_pushinteger(L, 3);
	check(ibvl_to_cq(L, -1) == NULL && strcmp(ibvl_to_error(),
	                                          "ibverbs.cq expected, got number") == 0,
	      "ibvl_to_cq on a number: 'ibverbs.cq expected, got number'");
	lua_settop(L, 0);
	lua_close(L); /* destroys the owned MR */
	free(buf);

	/* ---- a cm id ---- */
	struct rdma_cm_id *id;
	if (rdma_create_id(NULL, &id, NULL, RDMA_PS_TCP) != 0)
		die("rdma_create_id");
	L = new_state();
	ibvl_push_cm_id(L, id, IBVL_BORROWED);
	lua_setglobal(L, "id");
	check(strcmp(run(L, "return id.ps"), "tcp") == 0, "a lent cm id reads as the binding's own");
	check(ibvl_release_cm_id(L, id) == 1 &&
	          strstr(run(L, "return id.ps"), "closed ibverbs.cm_id") != NULL,
	      "a released cm id: a clean Lua error");
	lua_close(L);
	check(rdma_destroy_id(id) == 0, "the host destroys its cm id");

	/* the PD is free: every MR and QP on it is gone (else EBUSY) */
	int rc = ibv_dealloc_pd(pd);
	check(rc == 0, "the PD deallocates: the owned MR went at lua_close, nothing leaked");
	check(ibv_destroy_cq(cq) == 0 && ibv_close_device(ctx) == 0, "the host closes the rest");
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
