/*
 * err.h: failures and misuse, as the module reports them.
 *
 *   return ibvl_fail(L, "ibv_create_qp", errno);   -- nil, "ibv_create_qp: msg", errno
 *   ibvl_error(L, "field '%s': ...", name);         -- raises "where: fn: path: msg"
 *   int saved = ibvl_path_push("#WR", 2); ... ibvl_path_pop(saved);  -- "WR 2: ..."
 *
 * The bottom layer with compat.h: it depends on nothing else of the module.
 */
#ifndef IBVL_ERR_H
#define IBVL_ERR_H

#include "base/compat.h"

int ibvl_fail(lua_State *L, const char *call, int err);
int ibvl_result(lua_State *L, const char *call, int rc);
int ibvl_fail_hint(lua_State *L, const char *call, int err, const char *hint);
int ibvl_argerror(lua_State *L, int arg, const char *argname, const char *fmt, ...);
int ibvl_error(lua_State *L, const char *fmt, ...); /* "where: fn: path: msg" */
int ibvl_path_push(const char *name, int index);    /* "#WR", 2 reads "WR 2" */
void ibvl_path_pop(int saved);
void ibvl_path_reset(void);

void ibvl_open_errno(lua_State *L); /* errno.c: ibv.errno, ibv.strerror */

#endif
