/*
 * process/process.h: the process support's entry points, which core.c
 * opens: other programs, the launcher and the rendezvous' proofs, for the
 * tools.
 *
 *   ibv.spawn({"scontrol", "show", "node", "n1"}, {timeout = 10})  -- spawn.c
 *   ibv.pmix()                                                     -- pmix.c
 *   ibv.hmac_sha256(key, msg)                                      -- hmac.c
 *   ibv.munge_encode(payload), ibv.munge_decode(cred)              -- munge.c
 */
#ifndef IBVL_PROCESS_H
#define IBVL_PROCESS_H

#include "base/compat.h"

void ibvl_open_spawn(lua_State *L);
void ibvl_open_pmix(lua_State *L);
void ibvl_open_hmac(lua_State *L);
void ibvl_open_munge(lua_State *L);

#endif
