/*
 * verbs/sge.h: SGEs and bind_info read from Lua tables (sge.c), with what
 * each SGE was made from, for a prepared list to check again at post time.
 */
#ifndef IBVL_SGE_H
#define IBVL_SGE_H

#include <stddef.h>

#include <infiniband/verbs.h>

#include "base/compat.h"
#include "base/object.h"

/* What an SGE of a WR was made from, checked again when it is posted. */
struct ibvl_sge_src {
	struct ibvl_obj *mr; /* an SGE given with mr= */
	const char *data;    /* the 'inline' string (kept alive by the list) */
	size_t size;
	int held;            /* a prepared list's SGE set by set/fill (wr.c) */
};

/* Reads sg_list (an array of SGE tables) or sge (one SGE table) of the
 * table at idx into sge[0..max_sge) and src; returns the count. */
int ibvl_parse_sges(lua_State *L, int idx, struct ibv_sge *sge, struct ibvl_sge_src *src,
                    int max_sge);
struct ibvl_obj *ibvl_parse_bind_info(lua_State *L, int idx, struct ibv_mw_bind_info *bi);

#endif
