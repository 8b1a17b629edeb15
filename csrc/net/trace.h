/*
 * trace.h: the path of one UDP 5-tuple, hop by hop (trace.c): ibv.trace_flow,
 * ibv.trace_flows.  Above base/ only: it touches no verbs object.
 */
#ifndef IBVL_TRACE_H
#define IBVL_TRACE_H

#include "base/compat.h"

void ibvl_open_trace(lua_State *L);

#endif
