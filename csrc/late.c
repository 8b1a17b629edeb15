/*
 * late.c: looking up the verbs newer than rdma-core 28 (late.h).
 *
 *   ibvl_late_open();                 -- luaopen: dlvsym each verb by name and version
 *   ibvl_late_need(L, IBVL_LATE_ibv_import_dm, "ctx:import_dm");  -- raises when absent
 *   ibvl_late_push_missing(L);        -- {"ibv_import_dm", ...}: what this node lacks
 *
 * The libraries are the ones the module was loaded with (libibverbs.so.1,
 * librdmacm.so.1, already mapped: RTLD_NOLOAD), so a verb is looked up where
 * the module's other verbs come from, whatever the interpreter's dlopen flags.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "late.h"

void *ibvl_late_fn[IBVL_LATE_COUNT];

struct late_verb {
	const char *name, *version;
	int since;
};

#define IBVL_LATE_ROW(verb, version, since) {#verb, version, since},
static const struct late_verb late_verbs[IBVL_LATE_COUNT] = {IBVL_LATE_VERBS(IBVL_LATE_ROW)};
#undef IBVL_LATE_ROW

static void *library(const char *soname)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
	return h != NULL ? h : RTLD_DEFAULT;
}

void ibvl_late_open(void)
{
	static int opened;
	if (opened)
		return;
	void *verbs = library("libibverbs.so.1"), *cm = library("librdmacm.so.1");
	for (int i = 0; i < IBVL_LATE_COUNT; i++) {
		const struct late_verb *v = &late_verbs[i];
		void *lib = strncmp(v->version, "RDMACM_", 7) == 0 ? cm : verbs;
		ibvl_late_fn[i] = dlvsym(lib, v->name, v->version);
	}
	opened = 1;
}

void ibvl_late_need(lua_State *L, enum ibvl_late_id id, const char *what)
{
	const struct late_verb *v = &late_verbs[id];
	if (ibvl_late_fn[id] == NULL)
		luaL_error(L, "%s: needs rdma-core %d or later (%s@%s); this node's %s does not have it",
		           what, v->since, v->name, v->version,
		           strncmp(v->version, "RDMACM_", 7) == 0 ? "librdmacm" : "libibverbs");
}

int ibvl_absent(lua_State *L, const char *what, int since)
{
	return luaL_error(L, "%s: needs rdma-core %d or later; built against %s", what, since,
	                  IBVL_RDMA_CORE_BUILT);
}

void ibvl_late_push_missing(lua_State *L)
{
	lua_newtable(L);
	int n = 0;
	for (int i = 0; i < IBVL_LATE_COUNT; i++)
		if (ibvl_late_fn[i] == NULL) {
			lua_pushstring(L, late_verbs[i].name);
			lua_rawseti(L, -2, ++n);
		}
}
