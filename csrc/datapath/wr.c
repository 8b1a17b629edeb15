/*
 * wr.c: prepared WR lists and the chains a post takes (WR tables are read by wr_parse.c).
 *
 *   qp:post_recv{wr_id = 1, sg_list = {{mr = mr, offset = 0, length = 64}}}
 *   qp:post_send{{wr_id = 2, opcode = "send", send_flags = {"signaled"},
 *                 sg_list = {{addr = a, length = n, lkey = k}}}, {...}}   -- a chain
 *   local rl = ibv.recv_wrs(64 [, max_sge])      -- 64 linked ibv_recv_wr
 *   rl:fill{sge = {mr = mr, length = 64}, stride = 64}  -- WR i: wr_id i-1, bytes at (i-1)*64
 *   qp:post_recv(rl [, first, count])            -- one C call, no allocation
 *   local sl = ibv.send_wrs(16); sl:set(1, {opcode = "rdma_write", ...})
 *   sl:wr_id(i [, v]), sl:length(i [, v]), #sl
 * Send WR fields: wr_id, opcode, send_flags, sg_list (or sge = {...} for one),
 * inline (a string sent inline), imm_data, invalidate_rkey, remote_addr, rkey,
 * compare_add, swap, ah, remote_qpn, remote_qkey, remote_srqn, mw, bind_info.
 * An SGE is {addr=, length=, lkey=} (passed as is, the device checks it) or
 * {mr=, offset=, length=} (checked against the MR here).
 */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "datapath/datapath.h"
#include "verbs/verbs.h"
#include "datapath/wr.h"


#define RECV_WRS "ibverbs.recv_wrs"
#define SEND_WRS "ibverbs.send_wrs"
#define MAX_SGE 64 /* per WR of a list */
static const char list_keys[2]; /* the metatables of recv and send lists, by address */
#define LIST_KEY(send) (&list_keys[(send) != 0])

/* The recv (send = 0) or send list at idx, or NULL. */
static struct wr_list *test_list(lua_State *L, int idx, int send);

/* ---- prepared lists ------------------------------------------------------ */
struct wr_list {
	int n, max_sge, send;
	int checked;     /* every entry checked since the last change ... */
	int exposed;     /* its memory was handed to FFI code: check every time */
	unsigned long long checked_at; /* ... and no object closed since */
	struct ibv_sge *sge;
	struct ibvl_sge_src *src;  /* per SGE: what it points into */
	struct ibvl_wr_slot *slot; /* send lists only */
	union {
		struct ibv_recv_wr *recv;
		struct ibv_send_wr *snd;
	} wr;
	/* followed by the arrays */
};

/* Pushes a list of n linked WRs with max_sge SGEs each. */
static struct wr_list *alloc_list(lua_State *L, int n, int max_sge, int send)
{
	size_t wrsz = send ? sizeof(struct ibv_send_wr) : sizeof(struct ibv_recv_wr);
	size_t slotsz = send ? sizeof(struct ibvl_wr_slot) : 0;
	size_t nsge = (size_t)n * (size_t)max_sge;
	size_t size = sizeof(struct wr_list) + (size_t)n * (wrsz + slotsz) +
		      nsge * (sizeof(struct ibv_sge) + sizeof(struct ibvl_sge_src));
	struct wr_list *l = lua_newuserdatauv(L, size, 1);
	memset(l, 0, size);
	char *p = (char *)(l + 1);
	l->n = n;
	l->max_sge = max_sge;
	l->send = send;
	l->wr.recv = (void *)p;
	p += (size_t)n * wrsz;
	l->slot = send ? (void *)p : NULL;
	p += (size_t)n * slotsz;
	l->sge = (void *)p;
	p += nsge * sizeof(struct ibv_sge);
	l->src = (void *)p;
	for (int i = 0; i < n; i++) {
		if (send) {
			l->wr.snd[i].next = i + 1 < n ? &l->wr.snd[i + 1] : NULL;
			l->wr.snd[i].sg_list = &l->sge[i * max_sge];
		} else {
			l->wr.recv[i].next = i + 1 < n ? &l->wr.recv[i + 1] : NULL;
			l->wr.recv[i].sg_list = &l->sge[i * max_sge];
		}
	}
	return l;
}

static int new_list(lua_State *L, int send)
{
	int n = (int)ibvl_check_range(L, 1, 1, 1 << 20);
	int max_sge = (int)ibvl_opt_range(L, 2, 1, 0, MAX_SGE);
	alloc_list(L, n, max_sge, send);
	lua_createtable(L, 0, 0); /* WR index -> the Lua values it points into */
	lua_setiuservalue(L, -2, 1);
	luaL_setmetatable(L, send ? SEND_WRS : RECV_WRS);
	return 1;
}

static int l_recv_wrs(lua_State *L)
{
	return new_list(L, 0);
}

static int l_send_wrs(lua_State *L)
{
	return new_list(L, 1);
}

static struct wr_list *test_list(lua_State *L, int idx, int send)
{
	return ibvl_test_key(L, idx, LIST_KEY(send));
}

static struct wr_list *check_list(lua_State *L, int arg)
{
	struct wr_list *l = test_list(L, arg, 0);
	if (l == NULL && (l = test_list(L, arg, 1)) == NULL)
		l = luaL_checkudata(L, arg, SEND_WRS); /* raises */
	return l;
}

static int check_wr_index(lua_State *L, struct wr_list *l, int arg)
{
	lua_Integer i;
	if (!ibvl_tointeger(L, arg, &i))
		luaL_argerror(L, arg, lua_pushfstring(L, "WR index expected, got %s",
		                                      luaL_typename(L, arg)));
	if (i < 1 || i > l->n)
		luaL_argerror(L, arg, lua_pushfstring(L, "WR index %d outside the list of %d",
		                                      (int)(i < INT32_MIN ? INT32_MIN : i > INT32_MAX
		                                                ? INT32_MAX : i), l->n));
	return (int)i - 1;
}

/* Parses the WR table at idx into entry i, keeping its links; a WR that does
 * not parse raises and leaves the entry as it was. */
static void parse_entry(lua_State *L, struct wr_list *l, int i, int idx)
{
	struct ibv_sge sge[MAX_SGE], *dst = &l->sge[i * l->max_sge];
	struct ibvl_sge_src src[MAX_SGE];
	int nsge;
	int saved = ibvl_path_push("#WR", i + 1);
	if (l->send) {
		struct ibv_send_wr wr;
		struct ibvl_wr_slot slot;
		ibvl_parse_send_wr(L, idx, &wr, sge, src, l->max_sge, &slot);
		wr.next = l->wr.snd[i].next;
		wr.sg_list = dst;
		nsge = wr.num_sge;
		l->wr.snd[i] = wr;
		l->slot[i] = slot;
	} else {
		struct ibv_recv_wr wr = l->wr.recv[i];
		ibvl_parse_recv_wr(L, idx, &wr, sge, src, l->max_sge);
		wr.sg_list = dst;
		nsge = wr.num_sge;
		l->wr.recv[i] = wr;
	}
	ibvl_path_pop(saved);
	/* the entry holds its nsge SGEs and nothing else: SGEs an earlier set
	 * gave it beyond those are cleared, their sources forgotten (the MR they
	 * name may go with the entry's old copy), so a num_sge raised through
	 * the FFI finds SGEs not set (sge_sound), never a stale source */
	struct ibvl_sge_src *held = &l->src[i * l->max_sge];
	for (int j = 0; j < nsge; j++)
		src[j].held = 1;
	memcpy(dst, sge, (size_t)nsge * sizeof *sge);
	memcpy(held, src, (size_t)nsge * sizeof *src);
	memset(dst + nsge, 0, (size_t)(l->max_sge - nsge) * sizeof *sge);
	memset(held + nsge, 0, (size_t)(l->max_sge - nsge) * sizeof *src);
	l->checked = 0;
}

/* Pushes a private copy of the WR table at idx (ibvl_copy_arg), its tables
 * (bind_info, sge, sg_list and the SGEs in it) copied too: every field is
 * read once, and what a list entry points to (ah, mw, MRs, the inline
 * string) stays alive in the copy whatever the script does to its own
 * tables (a weak table, a field changed) during the call or later. */
static int copy_wr(lua_State *L, int idx)
{
	if (lua_type(L, idx) != LUA_TTABLE)
		luaL_argerror(L, idx, lua_pushfstring(L, "WR table expected, got %s",
		                                      luaL_typename(L, idx)));
	return ibvl_copy_arg(L, idx, 2);
}

/* Parses the private WR table at idx (from copy_wr) into entry i, and keeps it. */
static void set_entry(lua_State *L, struct wr_list *l, int i, int idx)
{
	parse_entry(L, l, i, idx);
	lua_getiuservalue(L, 1, 1);
	lua_pushvalue(L, idx); /* the copy keeps its ah, mw, mr and inline string alive */
	lua_rawseti(L, -2, i + 1);
	lua_pop(L, 1);
}

/* list:set(i, wr) */
static int l_set(lua_State *L)
{
	struct wr_list *l = check_list(L, 1);
	int i = check_wr_index(L, l, 2);
	ibvl_path_reset();
	set_entry(L, l, i, copy_wr(L, 3));
	return 0;
}

/* list:fill(wr): every entry from one template; entry i gets wr_id + i - 1
 * and, with stride = s, its SGE addresses moved by (i-1)*s. */
static int l_fill(lua_State *L)
{
	struct wr_list *l = check_list(L, 1);
	int tmpl = copy_wr(L, 2); /* the template without 'stride' */
	ibvl_path_reset();
	lua_Integer stride = ibvl_int_field(L, tmpl, "stride", 0, INT32_MIN, INT32_MAX);
	lua_pushliteral(L, "stride");
	lua_pushnil(L);
	lua_rawset(L, tmpl);
	for (int i = 0; i < l->n; i++) {
		set_entry(L, l, i, tmpl);
		uint64_t id0 = l->send ? l->wr.snd[i].wr_id : l->wr.recv[i].wr_id;
		int nsge = l->send ? l->wr.snd[i].num_sge : l->wr.recv[i].num_sge;
		if (l->send)
			l->wr.snd[i].wr_id = id0 + (uint64_t)i;
		else
			l->wr.recv[i].wr_id = id0 + (uint64_t)i;
		for (int j = 0; j < nsge; j++)
			l->sge[i * l->max_sge + j].addr += (uint64_t)(stride * i);
	}
	return 0;
}

static int l_wr_id(lua_State *L)
{
	struct wr_list *l = check_list(L, 1);
	int i = check_wr_index(L, l, 2);
	uint64_t *id = l->send ? &l->wr.snd[i].wr_id : &l->wr.recv[i].wr_id;
	if (lua_isnoneornil(L, 3)) {
		ibvl_push_u64(L, *id);
		return 1;
	}
	*id = ibvl_check_u64(L, 3);
	return 0;
}

/* list:length(i [, bytes]): the length of entry i's first SGE; checked
 * against what the SGE points into when the list is posted */
static int l_length(lua_State *L)
{
	struct wr_list *l = check_list(L, 1);
	int i = check_wr_index(L, l, 2);
	if (l->max_sge == 0)
		return luaL_argerror(L, 1, "list has no SGEs");
	struct ibv_sge *sge = &l->sge[i * l->max_sge];
	if (lua_isnoneornil(L, 3)) {
		lua_pushinteger(L, sge->length);
		return 1;
	}
	sge->length = (uint32_t)ibvl_check_range(L, 3, 0, UINT32_MAX);
	l->checked = 0;
	return 0;
}

static int wr_len(lua_State *L)
{
	lua_pushinteger(L, check_list(L, 1)->n);
	return 1;
}

/* ---- checks when posting -------------------------------------------------- */

/* Does [addr, addr+len) lie within [base, base+size)? */
static int within(uint64_t addr, uint64_t len, uintptr_t base, uint64_t size)
{
	return addr >= base && len <= size && addr - base <= size - len;
}

/* Is SGE j of entry i within what it was made from?  Not when its MR was
 * closed, when it reaches beyond the MR or the inline string (list:length, a
 * fill stride), or, for data the CPU copies (inline), when it is memory the
 * binding cannot vouch for.  Pure C: writes the reason into why. */
static int sge_sound(const struct wr_list *l, int i, int j, int cpu_reads, char *why, size_t n)
{
	const struct ibv_sge *sge = &l->sge[i * l->max_sge + j];
	const struct ibvl_sge_src *src = &l->src[i * l->max_sge + j];
	if (!src->held) /* beyond what set/fill gave the entry: its source is none of ours */
		return snprintf(why, n, "WR %d: SGE %d: not set by set or fill (num_sge was changed "
		                "through the FFI)", i + 1, j + 1), 0;
	if (src->mr != NULL) {
		if (src->mr->ptr == NULL)
			return snprintf(why, n, "WR %d: SGE %d: attempt to use a closed ibverbs.mr",
			                i + 1, j + 1), 0;
		const struct ibv_mr *mr = src->mr->ptr;
		if (!within(sge->addr, sge->length, (uintptr_t)mr->addr, mr->length))
			return snprintf(why, n, "WR %d: SGE %d: %u bytes at offset %lld lie outside "
			                "its MR (%zu bytes)", i + 1, j + 1, sge->length,
			                (long long)(sge->addr - (uintptr_t)mr->addr), mr->length), 0;
	} else if (src->data != NULL) {
		if (!within(sge->addr, sge->length, (uintptr_t)src->data, src->size))
			return snprintf(why, n, "WR %d: %u inline bytes at offset %lld, the 'inline' "
			                "string has %zu", i + 1, sge->length,
			                (long long)(sge->addr - (uintptr_t)src->data), src->size), 0;
	} else if (cpu_reads && sge->length > 0) {
		return snprintf(why, n, "WR %d: SGE %d: inline data must come from field 'inline' "
		                "or an SGE with 'mr'", i + 1, j + 1), 0;
	}
	return 1;
}

/* Does entry i still hold what set/fill put there: its SGEs (sge_sound) and,
 * for sends, the AH, MW and bind MR it names open? */
static int entry_sound(const struct wr_list *l, int i, char *why, size_t n)
{
	int nsge, cpu_reads = 0, last = i + 1 == l->n;
	const void *sg_list, *next, *link;
	if (l->send) {
		const struct ibv_send_wr *wr = &l->wr.snd[i];
		nsge = wr->num_sge;
		sg_list = wr->sg_list;
		next = wr->next;
		link = last ? NULL : wr + 1;
		cpu_reads = (wr->send_flags & IBV_SEND_INLINE) != 0;
		if (!ibvl_send_entry_sound(wr, &l->slot[i], i, why, n))
			return 0;
	} else {
		nsge = l->wr.recv[i].num_sge;
		sg_list = l->wr.recv[i].sg_list;
		next = l->wr.recv[i].next;
		link = last ? NULL : &l->wr.recv[i + 1];
	}
	if (next != link) /* a post follows it */
		return snprintf(why, n, "WR %d: its next was changed (through the FFI)", i + 1), 0;
	if (nsge < 0 || nsge > l->max_sge || sg_list != &l->sge[i * l->max_sge])
		return snprintf(why, n, "WR %d: its sg_list or num_sge was changed (through the FFI)",
		                i + 1), 0;
	for (int j = 0; j < nsge; j++)
		if (!sge_sound(l, i, j, cpu_reads, why, n))
			return 0;
	return 1;
}

/* Raises when an entry in [first, first+count) no longer holds what set/fill
 * put there.  The whole list is checked once after each change: a list found
 * sound since its last change, with no object closed since, is not checked
 * again (check_range), so posting a prepared list costs nothing per WR here.
 * Runs no Lua code unless it raises. */
static void check_entries(lua_State *L, struct wr_list *l, int first, int count)
{
	unsigned long long closes = ibvl_guard_closes();
	char why[160];
	int sound = 1;
	for (int i = 0; i < l->n && sound; i++)
		sound = entry_sound(l, i, why, sizeof why);
	if (sound) {
		l->checked = 1;
		l->checked_at = closes;
		return;
	}
	for (int i = first; i < first + count; i++)
		if (!entry_sound(l, i, why, sizeof why))
			ibvl_error(L, "%s", why);
}

/* check_entries unless the list was found sound since the last close (the
 * FFI may have written an exposed one): the posting path's case, inline. */
static inline void check_range(lua_State *L, struct wr_list *l, int first, int count)
{
	if (!(l->checked && !l->exposed && l->checked_at == ibvl_guard_closes()))
		check_entries(L, l, first, count);
}

/* The WR array of the prepared list at idx (send or recv), checked, and its length. */
void *ibvl_wr_list(lua_State *L, int idx, int send, int *n)
{
	struct wr_list *l = test_list(L, idx, send);
	if (l == NULL)
		l = luaL_checkudata(L, idx, send ? SEND_WRS : RECV_WRS); /* raises */
	check_range(L, l, 0, l->n);
	*n = l->n;
	return l->wr.recv;
}

/* For FFI code: the memory of the prepared list at idx, or NULL when idx is
 * not one.  Its WRs (*n of them), and its SGEs (*nsge, max_sge per WR).  The
 * list is checked in full whenever it is posted through the core from now on. */
void *ibvl_wr_list_mem(lua_State *L, int idx, int *send, int *n, struct ibv_sge **sge,
                       int *nsge)
{
	struct wr_list *l = test_list(L, idx, 0);
	if (l == NULL && (l = test_list(L, idx, 1)) == NULL)
		return NULL;
	l->exposed = 1;
	*send = l->send;
	*n = l->n;
	*sge = l->sge;
	*nsge = l->n * l->max_sge;
	return l->wr.recv;
}

/* ---- the chain to post --------------------------------------------------- */

/* Posting helpers used by qp.c and srq.c: the WRs at arg (a prepared list with
 * optional first, count; one WR table; or an array of WR tables) as a chain.
 * *base is the entry that index 1 refers to, for the bad_wr index. */
static void list_range(lua_State *L, struct wr_list *l, int arg, int *first, int *count)
{
	*first = lua_isnoneornil(L, arg + 1) ? 0 : check_wr_index(L, l, arg + 1);
	lua_Integer c = ibvl_opt_range(L, arg + 2, l->n - *first, 1, l->n - *first);
	*count = (int)c;
}

static int table_count(lua_State *L, int arg)
{
	if (lua_type(L, arg) != LUA_TTABLE)
		luaL_argerror(L, arg, lua_pushfstring(L, "WR table, array of WR tables or prepared "
		                                         "list expected, got %s", luaL_typename(L, arg)));
	lua_rawgeti(L, arg, 1);
	int array = lua_istable(L, -1);
	lua_pop(L, 1);
	return array ? (int)lua_rawlen(L, arg) : 0; /* 0: a single WR table */
}

static void *entry(struct wr_list *l, int i)
{
	return l->send ? (void *)&l->wr.snd[i] : (void *)&l->wr.recv[i];
}

static void **next_of(struct wr_list *l, int i)
{
	return l->send ? (void **)&l->wr.snd[i].next : (void **)&l->wr.recv[i].next;
}

/* Describes entries [first, first+count) of l as the chain c; returns its first WR. */
static void *fill_chain(struct wr_list *l, int first, int count, struct ibvl_chain *c)
{
	c->base = entry(l, first);
	c->next_slot = next_of(l, first + count - 1);
	c->saved = *c->next_slot;
	c->index0 = first + 1;
	c->count = count;
	c->slot = l->send ? &l->slot[first] : NULL;
	c->list = NULL;
	return c->base;
}

/* Entries [first, first+count) of the prepared list (0-based, in range) as
 * the chain c, its entries checked (what they name still open, lengths in
 * bounds); returns its first WR.  Runs no Lua code. */
void *ibvl_range_chain(lua_State *L, void *list, int first, int count, struct ibvl_chain *c)
{
	struct wr_list *l = list;
	check_range(L, l, first, count);
	fill_chain(l, first, count, c);
	c->list = l;
	return c->base;
}

/* Raises unless the prepared list of the chain c (made by ibvl_range_chain)
 * is still sound where c lies: what a later post of the same chain checks. */
void ibvl_chain_check(lua_State *L, const struct ibvl_chain *c)
{
	check_range(L, c->list, c->index0 - 1, c->count);
}

/* The chain of the prepared list at arg (with optional first, count after
 * it), which the caller knows to be one: list is its address. */
void *ibvl_list_chain(lua_State *L, void *list, int arg, struct ibvl_chain *c)
{
	int first, count;
	list_range(L, list, arg, &first, &count);
	return ibvl_range_chain(L, list, first, count, c);
}

/* The prepared list at idx when it is one (send or recv as send says), and
 * its length; NULL otherwise. */
void *ibvl_test_list(lua_State *L, int idx, int send, int *n)
{
	struct wr_list *l = test_list(L, idx, send);
	if (l != NULL)
		*n = l->n;
	return l;
}

/* A prepared list's range, or a temporary list made from WR tables (their
 * private copies, left on the stack, keep what they name alive during the
 * call). */
static void *chain(lua_State *L, int arg, struct ibvl_chain *c, int send)
{
	struct wr_list *l = test_list(L, arg, send);
	if (l != NULL)
		return ibvl_list_chain(L, l, arg, c);
	int n = table_count(L, arg), single = n == 0, count = n + single;
	l = alloc_list(L, count, 16, send);
	lua_createtable(L, count, 0); /* the WRs' private copies: they keep what the WRs name */
	int copies = lua_gettop(L);
	for (int i = 0; i < count; i++) {
		if (!single && (lua_rawgeti(L, arg, i + 1), lua_type(L, -1) != LUA_TTABLE))
			ibvl_error(L, "WR %d: WR table expected, got %s", i + 1, luaL_typename(L, -1));
		int w = ibvl_copy_arg(L, single ? arg : -1, 2);
		parse_entry(L, l, i, w);
		lua_rawseti(L, copies, i + 1);
		if (!single)
			lua_pop(L, 1);
	}
	check_range(L, l, 0, count); /* last: parsing may have closed an MR */
	return fill_chain(l, 0, count, c);
}

struct ibv_recv_wr *ibvl_recv_chain(lua_State *L, int arg, struct ibvl_chain *c)
{
	return chain(L, arg, c, 0);
}

struct ibv_send_wr *ibvl_send_chain(lua_State *L, int arg, struct ibvl_chain *c)
{
	return chain(L, arg, c, 1);
}

void ibvl_open_wr(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"set", l_set}, {"fill", l_fill}, {"wr_id", l_wr_id}, {"length", l_length},
		{NULL, NULL},
	};
	const char *names[] = {RECV_WRS, SEND_WRS};
	for (int k = 0; k < 2; k++) {
		ibvl_register_plain(L, names[k], methods, wr_len);
		lua_pop(L, 1);
		ibvl_type_key(L, names[k], LIST_KEY(k));
	}
	lua_pushcfunction(L, l_recv_wrs);
	lua_setfield(L, -2, "recv_wrs");
	lua_pushcfunction(L, l_send_wrs);
	lua_setfield(L, -2, "send_wrs");
}
