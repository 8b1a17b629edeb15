/*
 * object_class.c: the classes of ibverbs.<type> userdata: their metatables
 * (shared, or one per object for the hot types), registration, the generic
 * methods (close, __gc, __close, __tostring, is_closed), type checks by
 * pointer, objects read from argument tables.  Lifetimes: object.c.
 *
 *   ibvl_register(L, &ibvl_cq_class, methods)      -- ibverbs.cq: cq:close(), cq:is_closed()
 *   ibvl_add_methods(L, "ibverbs.context", ctx_methods)  -- ctx:create_cq{...}
 *   local cq = ctx:create_cq{cqe = 64}; tostring(cq)  --> "ibverbs.cq: 0x..." (or "(closed)")
 *   struct ibvl_obj *cq = ibvl_check(L, 1, &ibvl_cq_class);  -- raises on a closed one
 */
#include <stdatomic.h>
#include <string.h>

#include "base/args.h"
#include "base/err.h"
#include "base/object.h"

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

/* Once per state: the userdata whose finalizer ends the cache's entries. */
static void keep_sentinel(lua_State *L)
{
	if (ibvl_rawgetp(L, &sentinel_key) == LUA_TNIL) {
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
	if (ibvl_rawgetp(L, key) == LUA_TNIL && tname != NULL) {
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

/* __gc: ibvl_obj_release (object.c) */
static int m_gc(lua_State *L)
{
	ibvl_obj_release(upvalue_obj(L));
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
	ibvl_rawgetp(L, fields_key(cls));          /* ud+1: the methods table's metatable */
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
	ibvl_rawgetp(L, tag_key(cls));
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
	if (ibvl_rawgetp(L, tag_key(cls)) == LUA_TNIL) {
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
	ibvl_keep_run_held(L);
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
	ibvl_obj_init(o);
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
		ibvl_guard_log(o);
	return o;
}

void *ibvl_check(lua_State *L, int idx, const struct ibvl_class *cls)
{
	struct ibvl_obj *o = ibvl_test_class(L, idx, cls);
	if (o == NULL)
		o = luaL_checkudata(L, idx, cls->name); /* raises the usual message */
	if (o->ptr == NULL)
		ibvl_error(L, "attempt to use a closed %s", cls->name);
	ibvl_guard_log(o);
	return o;
}

void *ibvl_opt(lua_State *L, int idx, const struct ibvl_class *cls)
{
	return lua_isnoneornil(L, idx) ? NULL : ibvl_check(L, idx, cls);
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
		ibvl_guard_log(o);
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
