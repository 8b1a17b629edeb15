/*
 * examples/embed/embed.c: a C program that hands its own verbs objects to a
 * Lua script (the embedding API of csrc/ibverbs.h).
 *
 *   make embed && tools/rxe-vm build/lua5.4/embed examples/embed/traffic.lua [rxe0]
 *
 * The program opens the device and makes a PD, a CQ, two RC QPs connected to
 * each other (GID index 1: RoCE v2 on rxe0) and two MRs over its own memory.
 * It lends them to the script (borrowed: Lua never destroys them), which
 * sends messages from one QP to the other through prepared WR lists and
 * cq:poll.  Back in C it checks the script's results and the received bytes,
 * closes the Lua state, shows the objects still work by sending once more
 * itself, and destroys them.  Exit status 0 when every check passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "ibverbs.h"

#define COUNT 64
#define SIZE 64
#define GID_INDEX 1

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

static void connect_qp(struct ibv_qp *qp, uint32_t remote_qpn, const union ibv_gid *gid)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
	                        .qp_access_flags = IBV_ACCESS_LOCAL_WRITE};
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
	                              IBV_QP_ACCESS_FLAGS))
		die("modify to INIT");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.sgid_index = GID_INDEX;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
	                              IBV_QP_MIN_RNR_TIMER))
		die("modify to RTR");
	memset(&a, 0, sizeof a);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
	                              IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify to RTS");
}

/* one send from a to b, done in C after the Lua state is gone */
static int send_once(struct ibv_qp *a, struct ibv_qp *b, struct ibv_cq *cq, struct ibv_mr *src,
                     struct ibv_mr *dst)
{
	struct ibv_sge rs = {(uintptr_t)dst->addr, SIZE, dst->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 7, .sg_list = &rs, .num_sge = 1}, *rbad;
	struct ibv_sge ss = {(uintptr_t)src->addr, SIZE, src->lkey};
	struct ibv_send_wr swr = {.wr_id = 8, .sg_list = &ss, .num_sge = 1, .opcode = IBV_WR_SEND,
	                          .send_flags = IBV_SEND_SIGNALED}, *sbad;
	strcpy(src->addr, "after lua_close, from C");
	if (ibv_post_recv(b, &rwr, &rbad) || ibv_post_send(a, &swr, &sbad))
		return 0;
	int got = 0;
	struct ibv_wc wc[2];
	for (long spin = 0; got < 2 && spin < 100000000L; spin++) {
		int n = ibv_poll_cq(cq, 2 - got, wc + got);
		if (n < 0)
			return 0;
		got += n;
	}
	return got == 2 && wc[0].status == IBV_WC_SUCCESS && wc[1].status == IBV_WC_SUCCESS &&
	       strcmp(dst->addr, "after lua_close, from C") == 0;
}

int main(int argc, char **argv)
{
	const char *script = argc > 1 ? argv[1] : "examples/embed/traffic.lua";
	const char *devname = argc > 2 ? argv[2] : "rxe0";

	/* ---- the host's own objects ---- */
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
	struct ibv_cq *cq = pd ? ibv_create_cq(ctx, 4 * COUNT, NULL, NULL, 0) : NULL;
	if (cq == NULL)
		die("alloc_pd/create_cq");
	struct ibv_qp_init_attr ia = {.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
	                              .cap = {.max_send_wr = COUNT, .max_recv_wr = COUNT,
	                                      .max_send_sge = 1, .max_recv_sge = 1}};
	struct ibv_qp *a = ibv_create_qp(pd, &ia), *b = ibv_create_qp(pd, &ia);
	if (a == NULL || b == NULL)
		die("create_qp");
	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, GID_INDEX, &gid))
		die("query_gid");
	connect_qp(a, b->qp_num, &gid);
	connect_qp(b, a->qp_num, &gid);
	char *src_buf = calloc(1, COUNT * SIZE), *dst_buf = calloc(1, COUNT * SIZE);
	struct ibv_mr *src = ibv_reg_mr(pd, src_buf, COUNT * SIZE, IBV_ACCESS_LOCAL_WRITE);
	struct ibv_mr *dst = ibv_reg_mr(pd, dst_buf, COUNT * SIZE, IBV_ACCESS_LOCAL_WRITE);
	if (src == NULL || dst == NULL)
		die("reg_mr");

	/* ---- the script, on them ---- */
	lua_State *L = luaL_newstate();
	luaL_openlibs(L);
	ibvl_preload(L); /* require "ibverbs" from inside the program */
	if (luaL_loadfile(L, script) != LUA_OK) {
		fprintf(stderr, "%s\n", lua_tostring(L, -1));
		return 2;
	}
	lua_createtable(L, 0, 9);
	ibvl_push_context(L, ctx, IBVL_BORROWED); /* lent: Lua never destroys them */
	lua_setfield(L, -2, "ctx");
	ibvl_push_pd(L, pd, IBVL_BORROWED);
	lua_setfield(L, -2, "pd");
	ibvl_push_cq(L, cq, IBVL_BORROWED);
	lua_setfield(L, -2, "cq");
	ibvl_push_qp(L, a, IBVL_BORROWED);
	lua_setfield(L, -2, "a");
	ibvl_push_qp(L, b, IBVL_BORROWED);
	lua_setfield(L, -2, "b");
	ibvl_push_mr(L, src, IBVL_BORROWED);
	lua_setfield(L, -2, "src");
	ibvl_push_mr(L, dst, IBVL_BORROWED);
	lua_setfield(L, -2, "dst");
	lua_pushinteger(L, COUNT);
	lua_setfield(L, -2, "count");
	lua_pushinteger(L, SIZE);
	lua_setfield(L, -2, "size");
	if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
		fprintf(stderr, "script: %s\n", lua_tostring(L, -1));
		return 1;
	}

	/* ---- its results, checked in C ---- */
	lua_getfield(L, -1, "sends");
	lua_getfield(L, -2, "recvs");
	lua_getfield(L, -3, "bytes");
	check(lua_tointeger(L, -3) == COUNT, "the script saw every send complete");
	check(lua_tointeger(L, -2) == COUNT, "the script saw every receive complete");
	check(lua_tointeger(L, -1) == COUNT * SIZE, "byte counts add up");
	lua_pop(L, 3);
	int same = 1;
	for (int i = 0; i < COUNT; i++) {
		char want[SIZE + 1];
		int len = snprintf(want, sizeof want, "message %05d from Lua", i + 1);
		memset(want + len, '.', SIZE - len);
		same = same && memcmp(dst_buf + i * SIZE, want, SIZE) == 0;
	}
	check(same, "every message arrived in its slot of the host's buffer");
	lua_getfield(L, -1, "qp");
	check(ibvl_to_qp(L, -1) == a, "ibvl_to_qp gives the host's QP back");
	check(ibvl_to_mr(L, -1) == NULL && strstr(ibvl_to_error(), "ibverbs.mr expected") != NULL,
	      "ibvl_to_mr on a QP: NULL and a clear error");
	lua_pop(L, 2);

	/* ---- Lua goes away; the host's objects stay ---- */
	lua_close(L);
	check(send_once(a, b, cq, src, dst), "the QPs still work after lua_close");
	int rc = ibv_dereg_mr(src) | ibv_dereg_mr(dst) | ibv_destroy_qp(a) | ibv_destroy_qp(b) |
	         ibv_destroy_cq(cq) | ibv_dealloc_pd(pd) | ibv_close_device(ctx);
	check(rc == 0, "the host destroys everything itself, once");
	free(src_buf);
	free(dst_buf);
	printf("%s\n", failures ? "FAILED" : "all checks passed");
	return failures ? 1 : 0;
}
