/*
 * object.c: the lifetime rules every ibverbs.<type> userdata follows: users
 * and parents, close and its order, the collector held, the guards, objects
 * tracked by their C pointer (the classes' metatables, registration and
 * type checks: object_class.c).
 *
 *   ibvl_register(L, &cls, methods)   metatable with close/__gc/__close
 *   o = ibvl_new(L, &cls, size, &g)   closed userdata, user value table (g: the
 *                                     caller's guard, see object.h)
 *   o->ptr = ibv_create_x(...)        C object
 *   ibvl_use(L, -1, parent_idx)       keep parent alive, count as its user
 *   obj:close()                       nil, msg, EBUSY while users remain
 *   __gc / lua_close                  closes users first, then itself
 */
#include <stdatomic.h>
#include <string.h>

#include "base/args.h"
#include "base/err.h"
#include "base/object.h"

static void guard_closed(void);
static void guard_forget(const struct ibvl_obj *o);
static int count_deps(const struct ibvl_obj *o);

static const char TRACK_KEY[] = "ibverbs.track";

static void list_init(struct ibvl_link *head)
{
	head->user = NULL;
	head->prev = head->next = head;
}

static void list_remove(struct ibvl_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->prev = l->next = l;
}

static void list_append(struct ibvl_link *head, struct ibvl_link *l)
{
	l->next = head;
	l->prev = head->prev;
	head->prev->next = l;
	head->prev = l;
}

static int count_deps(const struct ibvl_obj *o)
{
	int n = 0;
	for (const struct ibvl_link *l = o->deps.next; l != &o->deps; l = l->next)
		n++;
	return n;
}

static void drop_refs(struct ibvl_obj *o)
{
	for (int i = 0; i < o->nrefs; i++)
		list_remove(&o->links[i]);
	o->nrefs = 0;
}

/* Destroys o.  Unforced: fails with EBUSY while users remain and keeps o
 * usable when the destroy call fails.  Forced: destroys the users first and
 * always leaves o closed (a failing destroy leaks rather than risk reuse). */
static int destroy(struct ibvl_obj *o, int forced)
{
	if (o->ptr == NULL)
		return 0;
	while (o->deps.next != &o->deps) {
		if (!forced)
			return EBUSY;
		destroy(o->deps.next->user, 1);
	}
	void *p = o->ptr;
	o->ptr = NULL;
	guard_closed();
	int err = (o->detach != NULL ? o->detach : o->cls->destroy)(o, p);
	if (err != 0 && !forced) {
		o->ptr = p;
		return err;
	}
	drop_refs(o);
	return err;
}

/* A new object's links: no user yet (ibvl_new). */
void ibvl_obj_init(struct ibvl_obj *o)
{
	list_init(&o->deps);
}

/* The last call on the object before its memory goes (its __gc): whatever
 * its state (closed or not, in whatever order the collector finalizes a
 * parent and its users), no list keeps a link into it afterwards, nor the
 * guards' log. */
void ibvl_obj_release(struct ibvl_obj *o)
{
	destroy(o, 1);
	while (o->deps.next != &o->deps) /* users linked while it was closed: orphans now */
		list_remove(o->deps.next);
	drop_refs(o);
	guard_forget(o);
}

/* Closes o now, and first everything that uses it (an owner closing what it
 * created for its users, as a cm id does with its QP). */
void ibvl_close_forced(struct ibvl_obj *o)
{
	destroy(o, 1);
}

static int collect(lua_State *L)
{
	lua_gc(L, LUA_GCCOLLECT, 0);
	return 0;
}

int ibvl_close(lua_State *L, struct ibvl_obj *o)
{
	/* Users the script dropped do not count: collect them first.  Once: a
	 * close made by a finalizer that this collection runs does not collect
	 * again (LuaJIT would recurse until the C stack overflows).  Protected:
	 * LuaJIT raises a finalizer's error out of the collection, and the flag
	 * must not stay set (no close would collect again); the error goes on. */
	static _Thread_local int collecting;
	if (o->ptr != NULL && o->deps.next != &o->deps && !collecting) {
		lua_pushcfunction(L, collect);
		collecting = 1;
		int rc = lua_pcall(L, 0, 0, 0);
		collecting = 0;
		if (rc != 0)
			lua_error(L);
	}
	int n = count_deps(o);
	int err = destroy(o, 0);
	if (err == EBUSY && n > 0) {
		lua_pushnil(L);
		lua_pushfstring(L, "%s: %s (%d object%s still use%s it)", o->cls->destroy_call,
		                strerror(EBUSY), n, n == 1 ? "" : "s", n == 1 ? "s" : "");
		lua_pushinteger(L, EBUSY);
		return 3;
	}
	if (err != 0)
		return ibvl_fail(L, o->cls->destroy_call, err);
	lua_pushboolean(L, 1);
	return 1;
}

/* ---- holding the collector -----------------------------------------------
 * From a verbs call that made several C objects to the last of their links,
 * a finalizer closing one of them (or their parent) would leave the others
 * dangling: the cm's QPs, CQs and channels of an id.  ibvl_gc_held runs that
 * stretch with the collector stopped (when it ran), under lua_pcall: an error
 * raised inside (a memory error) restarts it and goes on, where a plain
 * stop and restart left it stopped for good.  The protected function, kept
 * in the registry, is pushed without allocating (LuaJIT allocates a C
 * function pushed afresh, and the allocation may run finalizers). */
static const char held_key; /* the registry key of run_held */

struct held {
	int (*body)(lua_State *L, void *ud);
	void *ud;
	int result;
};

/* Its arguments: the caller's stack, then the struct held. */
static int run_held(lua_State *L)
{
	struct held *h = lua_touserdata(L, -1);
	lua_pop(L, 1);
	int top = lua_gettop(L);
	h->result = h->body(L, h->ud);
	return lua_gettop(L) - top;
}

void ibvl_keep_run_held(lua_State *L)
{
	if (ibvl_rawgetp(L, &held_key) == LUA_TNIL) {
		lua_pushcfunction(L, run_held);
		lua_rawsetp(L, LUA_REGISTRYINDEX, &held_key);
	}
	lua_pop(L, 1);
}

int ibvl_gc_held(lua_State *L, int (*body)(lua_State *L, void *ud), void *ud)
{
	int top = lua_gettop(L);
	luaL_checkstack(L, top + 2, "ibverbs: stack overflow"); /* before the hold: it may raise */
	struct held h = {body, ud, 0};
	int held = lua_gc(L, LUA_GCISRUNNING, 0);
	if (held)
		lua_gc(L, LUA_GCSTOP, 0);
	ibvl_rawgetp(L, &held_key);
	for (int i = 1; i <= top; i++)
		lua_pushvalue(L, i);
	lua_pushlightuserdata(L, &h);
	int rc = lua_pcall(L, top + 1, LUA_MULTRET, 0);
	if (held)
		lua_gc(L, LUA_GCRESTART, 0);
	if (rc != 0)
		lua_error(L);
	return h.result;
}

/* Stores the value at validx in the user value table of the object at objidx. */
void ibvl_keep(lua_State *L, int objidx, int validx)
{
	objidx = lua_absindex(L, objidx);
	validx = lua_absindex(L, validx);
	lua_getiuservalue(L, objidx, 1);
	lua_pushvalue(L, validx);
	lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
	lua_pop(L, 1);
}

void ibvl_anchor(lua_State *L, int objidx, const void *key, int validx)
{
	objidx = lua_absindex(L, objidx);
	validx = lua_absindex(L, validx);
	lua_getiuservalue(L, objidx, 1);
	lua_pushvalue(L, validx);
	lua_rawsetp(L, -2, key);
	lua_pop(L, 1);
}

/* Pushes the n-th value kept by the object at objidx (1: its parent). */
int ibvl_push_ref(lua_State *L, int objidx, int n)
{
	lua_getiuservalue(L, objidx, 1);
	lua_rawgeti(L, -1, n);
	lua_remove(L, -2);
	return 1;
}

void ibvl_use(lua_State *L, int objidx, int usedidx)
{
	struct ibvl_obj *o = lua_touserdata(L, objidx);
	struct ibvl_obj *u = lua_touserdata(L, usedidx);
	if (o->nrefs == IBVL_MAXREFS)
		luaL_error(L, "ibverbs: internal error: %s uses too many objects", o->cls->name);
	ibvl_keep(L, objidx, usedidx);
	struct ibvl_link *l = &o->links[o->nrefs];
	o->refs[o->nrefs++] = u;
	l->user = o;
	list_append(&u->deps, l);
}

/* The object at objidx stops using its slot-th used object and uses the one
 * at newidx instead (ibv_rereg_mr moving an MR to another PD). */
void ibvl_swap_use(lua_State *L, int objidx, int slot, int newidx)
{
	struct ibvl_obj *o = lua_touserdata(L, objidx);
	struct ibvl_obj *u = lua_touserdata(L, newidx);
	struct ibvl_link *l = &o->links[slot];
	lua_getiuservalue(L, objidx, 1);
	for (int i = 1; i <= (int)lua_rawlen(L, -1); i++) {
		lua_rawgeti(L, -1, i);
		if (lua_touserdata(L, -1) == o->refs[slot]) {
			lua_pushvalue(L, newidx);
			lua_rawseti(L, -3, i);
		}
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
	list_remove(l);
	o->refs[slot] = u;
	list_append(&u->deps, l);
}

/* The object at objidx stops using its slot-th used object (a cm id leaving
 * its event channel for synchronous operation); later slots move down. */
void ibvl_unuse(lua_State *L, int objidx, int slot)
{
	objidx = lua_absindex(L, objidx);
	struct ibvl_obj *o = lua_touserdata(L, objidx);
	struct ibvl_obj *u = o->refs[slot];
	list_remove(&o->links[slot]);
	for (int i = slot + 1; i < o->nrefs; i++) {
		list_remove(&o->links[i]);
		o->refs[i - 1] = o->refs[i];
		o->links[i - 1].user = o;
		list_append(&o->refs[i - 1]->deps, &o->links[i - 1]);
	}
	o->nrefs--;
	lua_getiuservalue(L, objidx, 1); /* drop the reference, shifting the rest down */
	int t = lua_gettop(L), n = (int)lua_rawlen(L, t), at = 0;
	for (int i = 1; i <= n && at == 0; i++) {
		lua_rawgeti(L, t, i);
		if (lua_touserdata(L, -1) == (void *)u)
			at = i;
		lua_pop(L, 1);
	}
	for (int i = at; at > 0 && i < n; i++) {
		lua_rawgeti(L, t, i + 1);
		lua_rawseti(L, t, i);
	}
	if (at > 0) {
		lua_pushnil(L);
		lua_rawseti(L, t, n);
	}
	lua_pop(L, 1);
}

/* ---- guards: nothing a call checked is closed before it is used ----------
 * Reading an argument table allocates, and an allocation may run finalizers,
 * which may close objects.  Every object check is logged in a ring; a call
 * that reads tables brackets its reading with ibvl_guard_begin/end, and the
 * end raises when an object checked in between was closed since (only when
 * some object was closed at all: a counter says).  After ibvl_guard_end the
 * caller runs no Lua code before the verbs call. */
#define GUARD_RING 512
_Atomic unsigned long long ibvl_closes; /* objects closed so far, by any state or thread */

static _Thread_local struct {
	unsigned long long n;      /* checks logged so far */
	unsigned long long floor;  /* where the innermost guard's log starts */
	struct ibvl_obj *ring[GUARD_RING];
} seen;

static void guard_closed(void)
{
	atomic_fetch_add_explicit(&ibvl_closes, 1, memory_order_relaxed);
}

void ibvl_guard_log(struct ibvl_obj *o)
{
	if (seen.n > seen.floor && seen.ring[(seen.n - 1) % GUARD_RING] == o)
		return; /* the same object twice in a row (every SGE's MR) */
	seen.ring[seen.n++ % GUARD_RING] = o;
}

/* A collected object leaves the log.  A guard's window holds the checks of
 * the calls nested in it too (a finalizer's): those of a call that raised
 * before its guard's end, those of a call with no guard.  Such an object may
 * be collected and freed before the window ends, where the end would read it;
 * the guarded call's own objects are on its stack and never collected.  (The
 * log is the thread's: a state runs on one thread at a time, so its objects
 * logged on another thread lie in no window still open there.) */
static void guard_forget(const struct ibvl_obj *o)
{
	for (int i = 0; i < GUARD_RING; i++)
		if (seen.ring[i] == o)
			seen.ring[i] = NULL;
}

void ibvl_guard_begin(struct ibvl_guard *g)
{
	ibvl_path_reset();
	g->closes = ibvl_guard_closes();
	g->start = seen.n;
	g->floor = seen.floor;
	seen.floor = seen.n;
}

void ibvl_guard_end(lua_State *L, struct ibvl_guard *g)
{
	if (ibvl_guard_closes() != g->closes) {
		if (seen.n - g->start > GUARD_RING)
			ibvl_error(L, "an object was closed while the arguments were read "
			              "(by a finalizer); nothing was done");
		for (unsigned long long i = g->start; i < seen.n; i++) {
			struct ibvl_obj *o = seen.ring[i % GUARD_RING];
			if (o != NULL && o->ptr == NULL) /* NULL: collected (guard_forget) */
				ibvl_error(L, "attempt to use a closed %s (closed while the arguments "
				              "were read)", o->cls->name);
		}
	}
	seen.n = g->start; /* a call nested in this one (a finalizer's) is done too */
	seen.floor = g->floor;
	g->closes = ibvl_guard_closes();
}

/* A weak table from C object addresses to their userdata, for events and
 * completions that name a verbs object by its C pointer. */
static void push_track_table(lua_State *L)
{
	if (luaL_newmetatable(L, TRACK_KEY)) { /* first use: make it weak */
		lua_newtable(L);
		lua_pushstring(L, "v");
		lua_setfield(L, -2, "__mode");
		lua_setmetatable(L, -2);
	}
}

void ibvl_track(lua_State *L, int idx)
{
	struct ibvl_obj *o = lua_touserdata(L, idx);
	idx = lua_absindex(L, idx);
	push_track_table(L);
	lua_pushlightuserdata(L, o->ptr);
	lua_pushvalue(L, idx);
	lua_rawset(L, -3);
	lua_pop(L, 1);
}

int ibvl_push_tracked(lua_State *L, const void *cptr)
{
	push_track_table(L);
	lua_pushlightuserdata(L, (void *)cptr);
	lua_rawget(L, -2);
	lua_remove(L, -2);
	struct ibvl_obj *o = lua_touserdata(L, -1);
	if (o != NULL && o->ptr == cptr)
		return 1;
	lua_pop(L, 1);
	lua_pushnil(L);
	return 0;
}

