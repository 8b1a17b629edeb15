/*
 * datapath/datapath.h: the data path's entry points, which core.c opens:
 * the files of datapath/ that register a function or a type of their own.
 *
 *   ibv.recv_wrs(64), ibv.send_wrs(16)        -- wr.c: prepared WR lists
 *   ibv.batch{...}                            -- batch.c
 *   ibv.transfer{...}                         -- transfer.c
 *   ibv.wc_array(64)                          -- wc_array.c
 *   core.rawptr(obj), core.rawmem(obj)        -- ffi.c (opened last)
 */
#ifndef IBVL_DATAPATH_H
#define IBVL_DATAPATH_H

#include "base/compat.h"

void ibvl_open_wr(lua_State *L);
void ibvl_open_batch(lua_State *L);
void ibvl_open_transfer(lua_State *L);
void ibvl_open_wc_array(lua_State *L);
void ibvl_open_ffi(lua_State *L);

#endif
