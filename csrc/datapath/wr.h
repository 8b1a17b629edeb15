/*
 * wr.h: work requests: read from Lua tables (wr_parse.c), prepared lists and
 * the chains a post takes from them or from tables (wr.c).  Above object.h.
 */
#ifndef IBVL_WR_H
#define IBVL_WR_H

#include <stddef.h>

#include <infiniband/verbs.h>

#include "base/compat.h"
#include "base/object.h"
#include "verbs/sge.h"

struct ibvl_wr_slot {
	struct ibvl_obj *ah; /* objects a prepared WR points to, checked at post time */
	struct ibvl_obj *mw;
	struct ibvl_obj *mr; /* a bind_mw WR's bind_info.mr */
	const void *hdr;     /* a tso WR's header, hdr_sz bytes */
	int opcode;          /* the WR's opcode, as set: what its union holds */
	int hdr_sz;
};

/* wr_parse.c: WRs from Lua tables */
void ibvl_parse_recv_wr(lua_State *L, int idx, struct ibv_recv_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge);
void ibvl_parse_send_wr(lua_State *L, int idx, struct ibv_send_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge, struct ibvl_wr_slot *slot);
/* Does the prepared send WR still hold the pointers its slot recorded?  0 and
 * the reason in why when not. */
int ibvl_send_entry_sound(const struct ibv_send_wr *wr, const struct ibvl_wr_slot *s, int i,
                          char *why, size_t n);

/* wr.c: prepared lists (ibv.recv_wrs, ibv.send_wrs) and the chains posted */
/* A chain about to be posted: the list is cut after its last WR and
 * restored after the verbs call (ibvl_post_run). */
struct ibvl_chain {
	void *base;       /* the WR that index0 names */
	void **next_slot; /* the next pointer of the last WR */
	void *saved;      /* its value before the cut */
	int index0;
	int count;                  /* WRs in the chain */
	struct ibvl_wr_slot *slot;  /* their slots (send chains) */
	void *list;                 /* the prepared list posted, or NULL (WR tables) */
};
struct ibv_recv_wr *ibvl_recv_chain(lua_State *L, int arg, struct ibvl_chain *c);
struct ibv_send_wr *ibvl_send_chain(lua_State *L, int arg, struct ibvl_chain *c);
void *ibvl_list_chain(lua_State *L, void *list, int arg, struct ibvl_chain *c); /* known list */
void *ibvl_range_chain(lua_State *L, void *list, int first, int count, struct ibvl_chain *c);
void ibvl_chain_check(lua_State *L, const struct ibvl_chain *c); /* its list still sound */
void *ibvl_test_list(lua_State *L, int idx, int send, int *n);

void *ibvl_wr_list(lua_State *L, int idx, int send, int *n);
void *ibvl_wr_list_mem(lua_State *L, int idx, int *send, int *n, struct ibv_sge **sge,
                       int *nsge);

#endif
