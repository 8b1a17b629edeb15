/*
 * ibverbs.h: the embedding API of lua-ibverbs (installed; the rest of csrc/ is
 * private).  A C program hands its own verbs objects to Lua scripts as the very
 * userdata the binding makes (same methods, same fast paths), and takes the C
 * pointers of objects scripts made.
 *
 *   lua_State *L = luaL_newstate(); luaL_openlibs(L);
 *   ibvl_preload(L);                         -- libibverbs-lua.a: require "ibverbs" works
 *   ibvl_push_qp(L, qp, IBVL_BORROWED);      -- its PD, CQs, SRQ and context come along
 *   lua_setglobal(L, "qp");                  -- a script runs qp:post_send(...), cq:poll(wcs)
 *   ...
 *   ibvl_release_qp(L, qp);                  -- Lua lets go: later use is a Lua error
 *   ibv_destroy_qp(qp);                      -- the host destroys what it lent
 *
 * Borrowed (IBVL_BORROWED): Lua never destroys the object.  obj:close(), the
 * garbage collector and lua_close only detach the userdata from it (a CQ's
 * unacknowledged events are acknowledged).  Before destroying a lent object
 * the host calls ibvl_release_<type>: the userdata is closed, so any later use
 * by a script raises "attempt to use a closed ibverbs.<type>", and what scripts
 * made on it (an MR on a lent PD, a QP on a lent CQ) is destroyed first.
 *
 * Owned (IBVL_OWNED): ownership moves to Lua, which destroys the object when
 * the script closes it or the userdata is collected; the host must not.
 * ibvl_release_<type> hands it back (detached; the host destroys it).
 *
 * The objects an object uses (a PD's context, a QP's PD, CQs and SRQ, an MR's
 * PD) are pushed along as borrowed objects unless Lua has them already, so
 * the lifetime rules hold as for the script's own objects: a child keeps its
 * parent alive, and a script cannot close a parent under a live child
 * (nil, msg, EBUSY).  Pushing a pointer Lua already holds pushes the same
 * userdata (IBVL_OWNED then moves ownership to Lua).
 *
 * ibvl_to_<type>(L, idx) returns the C pointer of the object at idx, or NULL
 * for another type or a closed object; ibvl_to_error() then says why
 * ("ibverbs.qp expected, got ibverbs.cq", "attempt to use a closed ibverbs.qp").
 *
 * All functions run on the Lua stack like the Lua C API (they may raise a Lua
 * memory error); none may be called after lua_close.
 */
#ifndef IBVERBS_LUA_H
#define IBVERBS_LUA_H

#include <infiniband/verbs.h>
#include <lua.h>

#ifdef __cplusplus
extern "C" {
#endif

struct rdma_cm_id;

#define IBVL_BORROWED 0
#define IBVL_OWNED 1

/* The C module (require "ibverbs.core"); ibvl_push_* load it when needed. */
int luaopen_ibverbs_core(lua_State *L);

/* In the static library libibverbs-lua.a only: registers ibverbs.core and every
 * Lua module of lua-ibverbs (ibverbs, ibverbs.cm, ...) in package.preload, so
 * require finds them without LUA_PATH or LUA_CPATH. */
void ibvl_preload(lua_State *L);

/* Push the userdata of a C object; return 1, or 0 with nil pushed for NULL. */
int ibvl_push_context(lua_State *L, struct ibv_context *ctx, int owned);
int ibvl_push_pd(lua_State *L, struct ibv_pd *pd, int owned);
int ibvl_push_cq(lua_State *L, struct ibv_cq *cq, int owned);
int ibvl_push_srq(lua_State *L, struct ibv_srq *srq, int owned);
int ibvl_push_qp(lua_State *L, struct ibv_qp *qp, int owned);
int ibvl_push_mr(lua_State *L, struct ibv_mr *mr, int owned);
int ibvl_push_cm_id(lua_State *L, struct rdma_cm_id *id, int owned);

/* Lua lets go of a C object before the host destroys it; 1 when Lua held it. */
int ibvl_release_context(lua_State *L, struct ibv_context *ctx);
int ibvl_release_pd(lua_State *L, struct ibv_pd *pd);
int ibvl_release_cq(lua_State *L, struct ibv_cq *cq);
int ibvl_release_srq(lua_State *L, struct ibv_srq *srq);
int ibvl_release_qp(lua_State *L, struct ibv_qp *qp);
int ibvl_release_mr(lua_State *L, struct ibv_mr *mr);
int ibvl_release_cm_id(lua_State *L, struct rdma_cm_id *id);

/* The C object behind the value at idx, or NULL (see ibvl_to_error). */
struct ibv_context *ibvl_to_context(lua_State *L, int idx);
struct ibv_pd *ibvl_to_pd(lua_State *L, int idx);
struct ibv_cq *ibvl_to_cq(lua_State *L, int idx);
struct ibv_srq *ibvl_to_srq(lua_State *L, int idx);
struct ibv_qp *ibvl_to_qp(lua_State *L, int idx);
struct ibv_mr *ibvl_to_mr(lua_State *L, int idx);
struct rdma_cm_id *ibvl_to_cm_id(lua_State *L, int idx);
const char *ibvl_to_error(void); /* why the last ibvl_to_* of this thread gave NULL */

#ifdef __cplusplus
}
#endif

#endif
