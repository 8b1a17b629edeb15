/*
 * object.c: the lifetime rules every ibverbs.<type> userdata follows.
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
static void guard_log(struct ibvl_obj *o);
static void guard_forget(const struct ibvl_obj *o);
static void keep_run_held(lua_State *L);
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

/* ---- type checks by pointer ------------------------------------------------
 * A userdata is of a type when its metatable is the one the registry keeps
 * under the type's key (its class's address; ibvl_type_key for plain types).
 * That registry lookup is a hash lookup, so a small per-thread cache keeps
 * the metatables found, by key, compared by address.  An entry holds while
 * no state that loaded the module has closed since: a closed state's tables
 * are freed and their addresses may come back as other tables, so a
 * finalizer each state runs at lua_close moves the generation on. */
#define TYPE_CACHE 64
static atomic_ulong type_gen = 1;
static _Thread_local struct type_entry {
	const void *key, *mt;
	unsigned long gen;
} type_cache[TYPE_CACHE];
static const char sentinel_key;

static int bump_type_gen(lua_State *L)
{
	(void)L;
	atomic_fetch_add(&type_gen, 1);
	return 0;
}

/* Pushes the metatable kept under key, or nil. */
static int push_keyed(lua_State *L, const void *key)
{
#if LUA_VERSION_NUM >= 503
	return lua_rawgetp(L, LUA_REGISTRYINDEX, key);
#else
	lua_pushlightuserdata(L, (void *)key);
	lua_rawget(L, LUA_REGISTRYINDEX);
	return lua_type(L, -1);
#endif
}

/* Once per state: the userdata whose finalizer ends the cache's entries. */
static void keep_sentinel(lua_State *L)
{
	if (push_keyed(L, &sentinel_key) == LUA_TNIL) {
		lua_newuserdatauv(L, 1, 0);
		lua_createtable(L, 0, 1);
		lua_pushcfunction(L, bump_type_gen);
		lua_setfield(L, -2, "__gc");
		lua_setmetatable(L, -2);
		lua_rawsetp(L, LUA_REGISTRYINDEX, &sentinel_key);
	}
	lua_pop(L, 1);
}

/* Keeps the metatable at the top of the stack under key. */
static void set_key(lua_State *L, const void *key)
{
	keep_sentinel(L);
	lua_pushvalue(L, -1);
	lua_rawsetp(L, LUA_REGISTRYINDEX, key);
}

void ibvl_type_key(lua_State *L, const char *tname, const void *key)
{
	luaL_getmetatable(L, tname);
	set_key(L, key);
	lua_pop(L, 1);
}

/* Whether the metatable at the top of the stack is the one kept under key
 * (or, with tname, the one registered under that name when no metatable is
 * kept under key).  Runs no Lua code. */
static int is_keyed(lua_State *L, const void *key, const char *tname)
{
	const void *mt = lua_topointer(L, -1);
	struct type_entry *e = &type_cache[((uintptr_t)key >> 3) % TYPE_CACHE];
	unsigned long gen = atomic_load_explicit(&type_gen, memory_order_acquire);
	if (e->key == key && e->mt == mt && e->gen == gen)
		return 1;
	if (push_keyed(L, key) == LUA_TNIL && tname != NULL) {
		lua_pop(L, 1);
		luaL_getmetatable(L, tname);
	}
	const void *want = lua_istable(L, -1) ? lua_topointer(L, -1) : NULL;
	lua_pop(L, 1);
	if (want == NULL || want != mt)
		return 0;
	*e = (struct type_entry){key, mt, gen};
	return 1;
}

/* The full userdata at idx when its metatable is the one kept under key
 * (see is_keyed); NULL otherwise.  Runs no Lua code. */
static void *test_mt(lua_State *L, int idx, const void *key, const char *tname)
{
	if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
		return NULL;
	int ok = is_keyed(L, key, tname);
	lua_pop(L, 1);
	return ok ? lua_touserdata(L, idx) : NULL;
}

static void *test_own_mt(lua_State *L, int idx, const struct ibvl_class *cls);

static struct ibvl_obj *upvalue_obj(lua_State *L)
{
	const struct ibvl_class *cls = lua_touserdata(L, lua_upvalueindex(1));
	struct ibvl_obj *o = ibvl_test_class(L, 1, cls);
	return o != NULL ? o : luaL_checkudata(L, 1, cls->name); /* raises */
}

static int m_close(lua_State *L)
{
	struct ibvl_obj *o = upvalue_obj(L);
	int n = ibvl_close(L, o);
	if (o->ptr == NULL) { /* closed: what it kept alive may go now */
		lua_createtable(L, 0, 0);
		lua_setiuservalue(L, 1, 1);
	}
	return n;
}

/* The last call on the object before its memory goes: whatever its state
 * (closed or not, in whatever order the collector finalizes a parent and its
 * users), no list keeps a link into it afterwards, nor the guards' log. */
static int m_gc(lua_State *L)
{
	struct ibvl_obj *o = upvalue_obj(L);
	destroy(o, 1);
	while (o->deps.next != &o->deps) /* users linked while it was closed: orphans now */
		list_remove(o->deps.next);
	drop_refs(o);
	guard_forget(o);
	return 0;
}

static int m_tostring(lua_State *L)
{
	struct ibvl_obj *o = upvalue_obj(L);
	if (o->ptr == NULL)
		lua_pushfstring(L, "%s (closed)", o->cls->name);
	else
		lua_pushfstring(L, "%s (%p)", o->cls->name, o->ptr);
	return 1;
}

static int m_is_closed(lua_State *L)
{
	lua_pushboolean(L, upvalue_obj(L)->ptr == NULL);
	return 1;
}

/* __index: the methods (upvalue 2) first, then cls->field (cls: upvalue 1)
 * of the object at obj. */
static int method_or_field(lua_State *L, int obj)
{
	lua_pushvalue(L, 2);
	lua_rawget(L, lua_upvalueindex(2));
	if (!lua_isnil(L, -1) || lua_type(L, 2) != LUA_TSTRING)
		return 1;
	const struct ibvl_class *cls = lua_touserdata(L, lua_upvalueindex(1));
	struct ibvl_obj *o = ibvl_check(L, obj, cls);
	if (cls->field == NULL || !cls->field(L, o, lua_tostring(L, 2)))
		lua_pushnil(L);
	return 1;
}

/* __index of the class metatable (classes with fields) */
static int m_index(lua_State *L)
{
	return method_or_field(L, 1);
}

/* ---- per-object metatables (the hot types: qp, cq) -------------------------
 * Each object gets a copy of its class's metatable whose __index is a plain
 * table holding the class's methods, copied at creation: a method call is
 * two table reads, no C __index.  That table's own __index (fields_index)
 * finds what the copy lacks (a method added to the class later) and the
 * fields, through the object it keeps under &object_key.  The copy keeps
 * the class's __metatable (see protect), so scripts never reach the copy
 * nor the class's metatable, and the copy's own metatable is the
 * class's tag table, kept in the registry only: a userdata is of the class
 * when the metatable of its metatable is that tag, which no script can set. */
static const char object_key;

static const void *fields_key(const struct ibvl_class *cls)
{
	return &cls->per_object; /* the registry key of its fields_index table */
}

static const void *tag_key(const struct ibvl_class *cls)
{
	return &cls->destroy_call; /* the registry key of its tag table */
}

/* The full userdata at idx when it has a per-object metatable made for cls;
 * NULL otherwise.  Runs no Lua code. */
static void *test_own_mt(lua_State *L, int idx, const struct ibvl_class *cls)
{
	if (lua_type(L, idx) != LUA_TUSERDATA || !lua_getmetatable(L, idx))
		return NULL;
	int top = lua_gettop(L) - 1; /* below the metatable */
	int ok = lua_getmetatable(L, -1) && is_keyed(L, tag_key(cls), NULL);
	lua_settop(L, top);
	return ok ? lua_touserdata(L, idx) : NULL;
}

/* __index of an object's method table (arg 1), which keeps the object. */
static int fields_index(lua_State *L)
{
	lua_settop(L, 2);
	lua_pushlightuserdata(L, (void *)&object_key);
	lua_rawget(L, 1);
	return method_or_field(L, 3);
}

/* Pushes a copy of the table at idx, without its entry named skip. */
static void copy_table(lua_State *L, int idx, const char *skip)
{
	idx = lua_absindex(L, idx);
	lua_createtable(L, 0, 32);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		if (skip != NULL && lua_type(L, -2) == LUA_TSTRING &&
		    strcmp(lua_tostring(L, -2), skip) == 0) {
			lua_pop(L, 1);
			continue;
		}
		lua_pushvalue(L, -2);
		lua_insert(L, -2);
		lua_rawset(L, -4);
	}
}

/* Gives the new object at the top of the stack its own metatable.  The
 * methods come from the registry's fields_index closure, which no script
 * reaches (the class's metatable is a script's to edit, its __index too). */
static void set_own_mt(lua_State *L, const struct ibvl_class *cls)
{
	int ud = lua_gettop(L);
	push_keyed(L, fields_key(cls));          /* ud+1: the methods table's metatable */
	lua_pushliteral(L, "__index");
	lua_rawget(L, ud + 1);                   /* ud+2: fields_index */
	lua_getupvalue(L, ud + 2, 2);            /* ud+3: the class's methods */
	copy_table(L, ud + 3, NULL);             /* ud+4: the object's methods */
	lua_pushvalue(L, ud);
	lua_rawsetp(L, ud + 4, &object_key);
	for (const luaL_Reg *r = cls->per_object; r->name != NULL; r++) {
		lua_pushstring(L, r->name);
		lua_rawget(L, ud + 4);
		int replaced = lua_tocfunction(L, -1) != r->func;
		lua_pop(L, 1);
		if (replaced) /* a script's own version (ibv.extend) stays */
			continue;
		lua_pushstring(L, r->name);
		lua_pushvalue(L, ud);
		lua_pushcclosure(L, r->func, 1); /* ibvl_self */
		lua_rawset(L, ud + 4);
	}
	lua_pushvalue(L, ud + 1);
	lua_setmetatable(L, ud + 4);
	luaL_getmetatable(L, cls->name);         /* ud+5: the class's metatable */
	copy_table(L, ud + 5, "__index");        /* ud+6: the object's metatable */
	lua_pushliteral(L, "__index");
	lua_pushvalue(L, ud + 4);
	lua_rawset(L, ud + 6);
	push_keyed(L, tag_key(cls));
	lua_setmetatable(L, ud + 6);
	lua_pushvalue(L, ud + 6);
	lua_setmetatable(L, ud);
	lua_settop(L, ud);
}

/* The class's fields_index table (new methods table) and its tag table,
 * kept in the registry.  The tag is made once per state: the module opened
 * again (busted's insulation does) keeps the objects made before it. */
static void keep_own_tables(lua_State *L, const struct ibvl_class *cls, int methods)
{
	methods = lua_absindex(L, methods);
	lua_createtable(L, 0, 1);
	lua_pushlightuserdata(L, (void *)cls);
	lua_pushvalue(L, methods);
	lua_pushcclosure(L, fields_index, 2);
	lua_setfield(L, -2, "__index");
	lua_rawsetp(L, LUA_REGISTRYINDEX, fields_key(cls));
	if (push_keyed(L, tag_key(cls)) == LUA_TNIL) {
		lua_newtable(L);
		set_key(L, tag_key(cls));
		lua_pop(L, 1);
	}
	lua_pop(L, 1);
}

/* The metatable at the top of the stack gets a __metatable: what
 * getmetatable(obj) gives scripts is a copy of it (the same __name, __index
 * and methods), never the table itself.  Lifetimes rest on its __gc (and on
 * per-object metatables copied from it): a script that removed or replaced
 * it would have objects freed without being unlinked from their parents.
 * Methods are added and replaced through the methods table (ibv.extend),
 * which the copy shares. */
static void protect(lua_State *L)
{
	copy_table(L, -1, NULL);
	lua_setfield(L, -2, "__metatable");
}

void ibvl_register(lua_State *L, const struct ibvl_class *cls, const luaL_Reg *methods)
{
	static const luaL_Reg generic[] = {
		{"close", m_close}, {"__gc", m_gc}, {"__close", m_close},
		{"__tostring", m_tostring}, {"is_closed", m_is_closed}, {NULL, NULL},
	};
	keep_run_held(L);
	luaL_newmetatable(L, cls->name);
	set_key(L, cls);
	lua_newtable(L); /* __index */
	for (const luaL_Reg *r = methods; r->name != NULL; r++) {
		lua_pushcfunction(L, r->func); /* "__len" and such go to the metatable */
		lua_setfield(L, r->name[0] == '_' && r->name[1] == '_' ? -3 : -2, r->name);
	}
	for (const luaL_Reg *r = generic; r->name != NULL; r++) {
		lua_pushlightuserdata(L, (void *)cls);
		lua_pushcclosure(L, r->func, 1);
		if (r->name[0] == '_' && r->name[1] == '_')
			lua_setfield(L, -3, r->name);
		else
			lua_setfield(L, -2, r->name);
	}
	if (cls->per_object)
		keep_own_tables(L, cls, -1);
	if (cls->field != NULL || cls->per_object) {
		lua_pushlightuserdata(L, (void *)cls);
		lua_insert(L, -2);
		lua_pushcclosure(L, m_index, 2);
	}
	lua_setfield(L, -2, "__index");
	lua_pushstring(L, cls->name);
	lua_setfield(L, -2, "__name");
	protect(L);
	lua_pop(L, 1);
}

/* A metatable for plain userdata (wc arrays, WR lists): methods, and __len.
 * Leaves the methods table on the stack for more entries. */
void ibvl_register_plain(lua_State *L, const char *tname, const luaL_Reg *methods,
                         lua_CFunction len)
{
	luaL_newmetatable(L, tname);
	lua_pushcfunction(L, len);
	lua_setfield(L, -2, "__len");
	lua_newtable(L);
	luaL_setfuncs(L, methods, 0);
	lua_pushvalue(L, -1);
	lua_setfield(L, -3, "__index");
	lua_pushvalue(L, -2); /* a script may not give these userdata a __gc either */
	protect(L);
	lua_pop(L, 1);
	lua_remove(L, -2);
}

/* Adds constructors to another type's methods: ctx:alloc_pd() lives in pd.c. */
void ibvl_add_methods(lua_State *L, const char *tname, const luaL_Reg *methods)
{
	luaL_getmetatable(L, tname);
	lua_getfield(L, -1, "__index");
	if (lua_iscfunction(L, -1)) { /* m_index: the methods are its upvalue 2 */
		lua_getupvalue(L, -1, 2);
		lua_remove(L, -2);
	}
	luaL_setfuncs(L, methods, 0);
	lua_pop(L, 2);
}

/* Makes the new object's userdata (closed), then ends the caller's guard g:
 * every allocation here may run a finalizer, and a finalizer may close the
 * objects the caller checked (its parent, a channel), so the guard's end,
 * after the last allocation, raises when one was closed.  From here to the
 * verbs call and its ibvl_use links, the caller allocates nothing (no Lua
 * value pushed, no error message built unless it returns at once), and it
 * takes the C pointers of what it uses only now or after a check made under
 * g.  g is NULL only for an object that uses no other. */
void *ibvl_new(lua_State *L, const struct ibvl_class *cls, size_t size, struct ibvl_guard *g)
{
	struct ibvl_obj *o = lua_newuserdatauv(L, size, 1);
	memset(o, 0, size);
	o->cls = cls;
	list_init(&o->deps);
	lua_createtable(L, IBVL_MAXREFS + 2, 0); /* ibvl_use's slots: it allocates nothing */
	lua_setiuservalue(L, -2, 1);
	if (cls->per_object)
		set_own_mt(L, cls);
	else
		luaL_setmetatable(L, cls->name);
	if (g != NULL)
		ibvl_guard_end(L, g);
	return o;
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

static void keep_run_held(lua_State *L)
{
	if (push_keyed(L, &held_key) == LUA_TNIL) {
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
	push_keyed(L, &held_key);
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

static void guard_log(struct ibvl_obj *o)
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

void *ibvl_test_key(lua_State *L, int idx, const void *key)
{
	return test_mt(L, idx, key, NULL);
}

void *ibvl_test_class(lua_State *L, int idx, const struct ibvl_class *cls)
{
	return cls->per_object ? test_own_mt(L, idx, cls) : test_mt(L, idx, cls, cls->name);
}

void *ibvl_test(lua_State *L, int idx, const struct ibvl_class *cls)
{
	struct ibvl_obj *o = ibvl_test_class(L, idx, cls);
	if (o != NULL && o->ptr == NULL)
		ibvl_error(L, "attempt to use a closed %s", cls->name);
	if (o != NULL)
		guard_log(o);
	return o;
}

void *ibvl_check(lua_State *L, int idx, const struct ibvl_class *cls)
{
	struct ibvl_obj *o = ibvl_test_class(L, idx, cls);
	if (o == NULL)
		o = luaL_checkudata(L, idx, cls->name); /* raises the usual message */
	if (o->ptr == NULL)
		ibvl_error(L, "attempt to use a closed %s", cls->name);
	guard_log(o);
	return o;
}

void *ibvl_opt(lua_State *L, int idx, const struct ibvl_class *cls)
{
	return lua_isnoneornil(L, idx) ? NULL : ibvl_check(L, idx, cls);
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

/* ---- objects in argument tables ------------------------------------------- */

/* Returns the object in field (or NULL when absent) and leaves the field's
 * value on the stack, where it keeps the object alive for the caller. */
void *ibvl_obj_field_keep(lua_State *L, int idx, const char *field,
                          const struct ibvl_class *cls)
{
	ibvl_getfield(L, idx, field);
	void *o = NULL;
	if (!lua_isnil(L, -1)) {
		o = ibvl_test_class(L, -1, cls);
		if (o == NULL)
			ibvl_error(L, "field '%s': %s expected, got %s", field, cls->name,
			           luaL_typename(L, -1));
		if (((struct ibvl_obj *)o)->ptr == NULL)
			ibvl_error(L, "field '%s': attempt to use a closed %s", field, cls->name);
		guard_log(o);
	}
	return o;
}

/* Returns the object in field (or NULL when absent) and leaves nothing on the
 * stack: only for a private copy (ibvl_copy_arg), which keeps the object. */
void *ibvl_obj_field(lua_State *L, int idx, const char *field, const struct ibvl_class *cls)
{
	if (!ibvl_is_copy(L, idx))
		luaL_error(L, "ibverbs: internal error: field '%s' read from a table the call "
		              "does not own", field);
	void *o = ibvl_obj_field_keep(L, idx, field, cls);
	lua_pop(L, 1);
	return o;
}
