/*
 * ffi.c: what LuaJIT's FFI needs from the core module (see lua/ibverbs/ffi.lua).
 *
 *   ibvl_ffi_post_recv(qp_handle, wr, &bad)   exported flat C calls on raw pointers:
 *   ibvl_ffi_post_send, ibvl_ffi_post_srq_recv, ibvl_ffi_poll_cq, ibvl_ffi_req_notify_cq
 *   local p, typename = core.rawptr(obj)      the verbs pointer (lightuserdata)
 *   local base, n, kind [, sge, nsge] = core.rawmem(obj)  a buffer, MR, WR list, wc array
 * The data-path verbs are static inline in verbs.h, so FFI code cannot call
 * them; these wrappers can.  A handle is the address of the object's
 * userdata (struct ibvl_obj): a closed object gives EBADF, an object of
 * another type EINVAL, instead of a crash.
 */
#include <string.h>

#include "verbs/cq.h"
#include "datapath/datapath.h"
#include "verbs/verbs.h"
#include "datapath/wr.h"

/* The exported ABI, declared here for -Wmissing-prototypes and nowhere else. */
int ibvl_ffi_post_recv(struct ibvl_obj *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
int ibvl_ffi_post_send(struct ibvl_obj *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int ibvl_ffi_post_srq_recv(struct ibvl_obj *srq, struct ibv_recv_wr *wr,
                           struct ibv_recv_wr **bad);
int ibvl_ffi_poll_cq(struct ibvl_obj *cq, int n, struct ibv_wc *wc);
int ibvl_ffi_req_notify_cq(struct ibvl_obj *cq, int solicited_only);

/* 0 when o is an open object of class cls, else the errno to return */
static inline int handle_error(const struct ibvl_obj *o, const struct ibvl_class *cls)
{
	if (o == NULL || o->cls != cls)
		return EINVAL;
	return o->ptr == NULL ? EBADF : 0;
}

/* Some providers return -errno from the post calls; the ABI gives errno. */
static inline int errno_of(int rc)
{
	return rc < 0 ? -rc : rc;
}

int ibvl_ffi_post_recv(struct ibvl_obj *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	int err = handle_error(qp, &ibvl_qp_class);
	if (err != 0) {
		*bad = wr;
		return err;
	}
	return errno_of(ibv_post_recv(qp->ptr, wr, bad));
}

int ibvl_ffi_post_send(struct ibvl_obj *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	int err = handle_error(qp, &ibvl_qp_class);
	if (err != 0) {
		*bad = wr;
		return err;
	}
	return errno_of(ibv_post_send(qp->ptr, wr, bad));
}

int ibvl_ffi_post_srq_recv(struct ibvl_obj *srq, struct ibv_recv_wr *wr,
                           struct ibv_recv_wr **bad)
{
	int err = handle_error(srq, &ibvl_srq_class);
	if (err != 0) {
		*bad = wr;
		return err;
	}
	return errno_of(ibv_post_srq_recv(srq->ptr, wr, bad));
}

/* count of completions, or a negative errno */
int ibvl_ffi_poll_cq(struct ibvl_obj *cq, int n, struct ibv_wc *wc)
{
	int err = handle_error(cq, &ibvl_cq_class);
	if (err != 0)
		return -err;
	return ibvl_cq_poll((struct ibvl_cq *)cq, n, wc); /* plain or extended CQ */
}

int ibvl_ffi_req_notify_cq(struct ibvl_obj *cq, int solicited_only)
{
	int err = handle_error(cq, &ibvl_cq_class);
	return err != 0 ? err : ibv_req_notify_cq(cq->ptr, solicited_only);
}

/* The types whose userdata start with struct ibvl_obj and that FFI code may
 * want the verbs pointer of. */
static const struct ibvl_class *const classes[] = {
	&ibvl_context_class, &ibvl_pd_class, &ibvl_mr_class, &ibvl_buffer_class,
	&ibvl_comp_channel_class, &ibvl_cq_class, &ibvl_qp_class, &ibvl_srq_class,
	&ibvl_ah_class, &ibvl_mw_class, &ibvl_xrcd_class, NULL,
};

/* The open object at idx, if it is one of those; NULL otherwise. */
static struct ibvl_obj *test_obj(lua_State *L, int idx)
{
	for (const struct ibvl_class *const *c = classes; *c != NULL; c++)
		if (ibvl_test_class(L, idx, *c) != NULL)
			return ibvl_check(L, idx, *c);
	return NULL;
}

/* core.rawptr(obj) -> lightuserdata of the verbs object, type name */
static int l_rawptr(lua_State *L)
{
	struct ibvl_obj *o = test_obj(L, 1);
	if (o == NULL)
		return luaL_argerror(L, 1, "ibverbs object expected");
	lua_pushlightuserdata(L, o->ptr);
	lua_pushstring(L, o->cls->name);
	return 2;
}

static int push_mem(lua_State *L, void *base, lua_Integer n, const char *kind)
{
	lua_pushlightuserdata(L, base);
	lua_pushinteger(L, n);
	lua_pushstring(L, kind);
	return 3;
}

/* core.rawmem(obj) -> base (lightuserdata), count, kind [, sge base, sge count]
 * kind: "buffer", "mr" (bytes), "wc_array", "recv_wrs", "send_wrs" (entries) */
static int l_rawmem(lua_State *L)
{
	struct ibvl_obj *o = test_obj(L, 1);
	if (o != NULL && o->cls == &ibvl_buffer_class)
		return push_mem(L, o->ptr, (lua_Integer)ibvl_buffer_size(o), "buffer");
	if (o != NULL && o->cls == &ibvl_mr_class) {
		struct ibv_mr *mr = o->ptr;
		return push_mem(L, mr->addr, (lua_Integer)mr->length, "mr");
	}
	struct ibvl_wc_array *w = luaL_testudata(L, 1, IBVL_WC_ARRAY);
	if (w != NULL)
		return push_mem(L, w->wc, w->n, "wc_array");
	int send, n, nsge;
	struct ibv_sge *sge;
	void *wr = ibvl_wr_list_mem(L, 1, &send, &n, &sge, &nsge);
	if (wr == NULL)
		return luaL_argerror(L, 1, "ibverbs buffer, mr, wc_array, recv_wrs or send_wrs expected");
	push_mem(L, wr, n, send ? "send_wrs" : "recv_wrs");
	lua_pushlightuserdata(L, sge);
	lua_pushinteger(L, nsge);
	return 5;
}

void ibvl_open_ffi(lua_State *L)
{
	static const luaL_Reg funcs[] = {{"rawptr", l_rawptr}, {"rawmem", l_rawmem}, {NULL, NULL}};
	luaL_setfuncs(L, funcs, 0);
}
