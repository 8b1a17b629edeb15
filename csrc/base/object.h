/*
 * object.h: what every ibverbs.<type> userdata shares: lifetimes, type
 * checks, guards, registration of metatables.
 *
 *   struct my { struct ibvl_obj o; ... };             -- header first
 *   static const struct ibvl_class my_class = { "ibverbs.my", my_destroy };
 *   struct ibvl_guard g; ibvl_guard_begin(&g);        -- then check, parse
 *   struct my *m = ibvl_new(L, &my_class, sizeof *m, &g); -- closed userdata,
 *                                                     -- the guard's end
 *   m->o.ptr = ibv_create_my(parent->ptr, ...);       -- then the C call
 *   ibvl_use(L, -1, 1);                               -- m uses arg 1 (its parent)
 *   struct my *m = ibvl_check(L, 1, &my_class);       -- raises when closed
 *
 * Lifetimes: an object keeps every object it uses alive (user value table)
 * and sits on their dependents lists.  Explicit close of an object that still
 * has dependents returns EBUSY; a forced close (__gc, lua_close) closes the
 * dependents first.  See object.c.  Above err.h and args.h.
 */
#ifndef IBVL_OBJECT_H
#define IBVL_OBJECT_H

#include <stdatomic.h>
#include <stddef.h>

#include "base/compat.h"

/* ---- objects (object.c) ------------------------------------------------- */
#define IBVL_MAXREFS 7

struct ibvl_obj;

/* Destroys the C object; returns 0 or an errno value. */
typedef int (*ibvl_destroy_fn)(struct ibvl_obj *o, void *ptr);

struct ibvl_class {
	const char *name;        /* metatable name, "ibverbs.qp" */
	ibvl_destroy_fn destroy; /* called with o->ptr already NULL */
	const char *destroy_call; /* for messages: "ibv_destroy_qp" */
	/* optional: pushes the value of a read-only field (mr.lkey), or returns 0 */
	int (*field)(lua_State *L, void *obj, const char *key);
	/* hot types (qp, cq): non-NULL when each object gets its own metatable
	 * whose __index is a plain table of the methods (a method call runs no C
	 * __index); the methods listed here are the object's own closures, the
	 * object as upvalue 1 (ibvl_self), so a call on it needs no type check
	 * (unless a script replaced one in the type's methods: its version stays) */
	const luaL_Reg *per_object;
};

struct ibvl_link {
	struct ibvl_obj *user; /* the object that uses (depends on) the owner */
	struct ibvl_link *prev, *next;
};

struct ibvl_obj {
	void *ptr; /* the C object; NULL when closed */
	const struct ibvl_class *cls;
	struct ibvl_link deps; /* sentinel: the objects that use this one */
	int nrefs;
	struct ibvl_obj *refs[IBVL_MAXREFS];  /* the objects this one uses */
	struct ibvl_link links[IBVL_MAXREFS]; /* our node on their deps lists */
	ibvl_destroy_fn detach; /* set when the host lent the object (embed.c): called
	                           instead of cls->destroy, it leaves the C object alone */
};

void ibvl_register(lua_State *L, const struct ibvl_class *cls, const luaL_Reg *methods);
void ibvl_add_methods(lua_State *L, const char *tname, const luaL_Reg *methods);
void ibvl_register_plain(lua_State *L, const char *tname, const luaL_Reg *methods,
                         lua_CFunction len);
void ibvl_use(lua_State *L, int objidx, int usedidx);
/* Runs body(L, ud) with the collector held (no finalizer runs), from before
 * its first allocation to its return, and returns what it returns; an error
 * it raises restarts the collector and goes on.  body sees the caller's stack
 * at the same indices and leaves what it pushes on it (object.c). */
int ibvl_gc_held(lua_State *L, int (*body)(lua_State *L, void *ud), void *ud);
void ibvl_keep(lua_State *L, int objidx, int validx);
/* Keeps the value at validx alive as long as the object at objidx, under key
 * (one value per key): a full userdata kept so is known by its address. */
void ibvl_anchor(lua_State *L, int objidx, const void *key, int validx);
int ibvl_push_ref(lua_State *L, int objidx, int n);
void ibvl_swap_use(lua_State *L, int objidx, int slot, int newidx);
void ibvl_unuse(lua_State *L, int objidx, int slot);
void *ibvl_check(lua_State *L, int idx, const struct ibvl_class *cls);
/* The object a hot method (ibvl_class.per_object) was called on, when argument 1 is
 * the very userdata its closure holds: the closure keeps that object alive, so
 * its address names it and no metatable needs a look.  NULL otherwise (the
 * method called on another object, or through the class's table): check it. */
static inline void *ibvl_self(lua_State *L)
{
	void *self = lua_touserdata(L, lua_upvalueindex(1));
	return self != NULL && lua_touserdata(L, 1) == self && lua_type(L, 1) == LUA_TUSERDATA
	       ? self : NULL;
}
void *ibvl_test_class(lua_State *L, int idx, const struct ibvl_class *cls); /* open or not */
/* Type checks by pointer: ibvl_register keeps each metatable in the registry
 * under its class's address too, and ibvl_type_key under any key for the
 * plain types (wc arrays, WR lists); a check compares tables, no name hashed. */
void ibvl_type_key(lua_State *L, const char *tname, const void *key);
void *ibvl_test_key(lua_State *L, int idx, const void *key);

/* Brackets a call's reading of its arguments: the end raises when an object
 * checked since the begin was closed meanwhile (object.c). */
struct ibvl_guard {
	unsigned long long closes, start, floor;
};
void ibvl_guard_begin(struct ibvl_guard *g);
/* A new, closed object of cls at the top of the stack; ends g (object_class.c). */
void *ibvl_new(lua_State *L, const struct ibvl_class *cls, size_t size, struct ibvl_guard *g);
void ibvl_guard_end(lua_State *L, struct ibvl_guard *g);
/* Objects closed so far, counted across every Lua state and thread: a value
 * that has not moved since a check says nothing checked then was closed. */
extern _Atomic unsigned long long ibvl_closes;
static inline unsigned long long ibvl_guard_closes(void)
{
	return atomic_load_explicit(&ibvl_closes, memory_order_relaxed);
}
void *ibvl_test(lua_State *L, int idx, const struct ibvl_class *cls);
void *ibvl_opt(lua_State *L, int idx, const struct ibvl_class *cls);
int ibvl_close(lua_State *L, struct ibvl_obj *o);
void ibvl_close_forced(struct ibvl_obj *o);
void ibvl_track(lua_State *L, int idx);
int ibvl_push_tracked(lua_State *L, const void *cptr);

/* Objects in argument tables: ibvl_obj_field_keep leaves the value pushed
 * (it keeps the object for the caller); ibvl_obj_field pops it, and so reads
 * only private copies (ibvl_copy_arg), which hold what they name.  A copy
 * reads every value of the table at idx once, raw, tables depth levels down
 * copied too; it is pushed, and its index returned. */
void *ibvl_obj_field(lua_State *L, int idx, const char *field, const struct ibvl_class *cls);
void *ibvl_obj_field_keep(lua_State *L, int idx, const char *field,
                          const struct ibvl_class *cls); /* the value stays pushed */

/* Between object.c (lifetimes) and object_class.c (classes), for them alone */
void ibvl_obj_init(struct ibvl_obj *o);    /* a new object's links */
void ibvl_obj_release(struct ibvl_obj *o); /* __gc */
void ibvl_guard_log(struct ibvl_obj *o);   /* checked under the running guard */
void ibvl_keep_run_held(lua_State *L);     /* ibvl_gc_held's function, once per state */

#endif
