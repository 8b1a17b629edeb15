/*
 * late.c: looking up the verbs newer than rdma-core 28 (late.h).
 *
 *   ibvl_late_open();                 -- luaopen: dlvsym each verb by name and version
 *   ibvl_late_need(L, IBVL_LATE_ibv_import_dm, "ctx:import_dm");  -- raises when absent
 *   ibvl_late_push_missing(L);        -- {"ibv_import_dm", ...}: what this node lacks
 *   ibvl_late_set_found(L);           -- the libraries' files, symbol versions, releases
 *
 * The libraries are the ones the module was loaded with (libibverbs.so.1,
 * librdmacm.so.1, already mapped: RTLD_NOLOAD), so a verb is looked up where
 * the module's other verbs come from, whatever the interpreter's dlopen flags.
 * IBVL_RDMA_CORE=N (a test aid, read when the module first opens) drops
 * every verb newer than release N, as a node with rdma-core N lacks them.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/late.h"

void *ibvl_late_fn[IBVL_LATE_COUNT];

struct late_verb {
	const char *name, *version;
	int since;
};

#define IBVL_LATE_ROW(verb, version, since) {#verb, version, since},
static const struct late_verb late_verbs[IBVL_LATE_COUNT] = {IBVL_LATE_VERBS(IBVL_LATE_ROW)};
#undef IBVL_LATE_ROW

/* One function of each symbol version from the module's floors on, with the
 * first release that had it (rdma-core's libibverbs.map.in and librdmacm.map
 * at each release tag): the newest found bounds the node's release. */
static const struct late_verb symvers[] = {
	{"ibv_reg_mr_iova2", "IBVERBS_1.8", 28}, {"ibv_get_device_index", "IBVERBS_1.9", 30},
	{"ibv_import_device", "IBVERBS_1.10", 31}, {"_ibv_query_gid_ex", "IBVERBS_1.11", 32},
	{"ibv_reg_dmabuf_mr", "IBVERBS_1.12", 34}, {"ibv_import_dm", "IBVERBS_1.13", 35},
	{"ibv_query_qp_data_in_order", "IBVERBS_1.14", 36}, {"ibv_reg_mr_ex", "IBVERBS_1.15", 59},
	{"ibv_query_port_speed", "IBVERBS_1.16", 62}, {"ibv_alloc_buf", "IBVERBS_1.17", 64},
	{NULL, NULL, 0},
	{"rdma_establish", "RDMACM_1.2", 23},
	{"rdma_set_local_ece", "RDMACM_1.3", 31}, {"rdma_resolve_addrinfo", "RDMACM_1.4", 60},
	{NULL, NULL, 0},
};

static int aid;             /* IBVL_RDMA_CORE, 0 when unset */
static char aid_error[160]; /* what is wrong with it */

static void *library(const char *soname)
{
	void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
	return h != NULL ? h : RTLD_DEFAULT;
}

static int is_cm(const char *version)
{
	return strncmp(version, "RDMACM_", 7) == 0;
}

/* IBVL_RDMA_CORE: "28" or "28.0"; unset or empty: no aid. */
static void read_aid(void)
{
	const char *s = getenv("IBVL_RDMA_CORE");
	if (s == NULL || *s == '\0')
		return;
	char *end;
	long v = strtol(s, &end, 10);
	if (*end == '.' && end[1] >= '0' && end[1] <= '9')
		strtol(end + 1, &end, 10);
	if (end == s || *end != '\0' || v > INT_MAX)
		snprintf(aid_error, sizeof aid_error,
		         "IBVL_RDMA_CORE=%.40s: expected an rdma-core release such as 28", s);
	else if (v < 28)
		snprintf(aid_error, sizeof aid_error,
		         "IBVL_RDMA_CORE=%.40s: the module needs rdma-core 28 or later", s);
	else
		aid = (int)v;
}

const char *ibvl_late_open(void)
{
	static int opened;
	if (!opened) {
		read_aid();
		void *verbs = library("libibverbs.so.1"), *cm = library("librdmacm.so.1");
		for (int i = 0; i < IBVL_LATE_COUNT; i++) {
			const struct late_verb *v = &late_verbs[i];
			if (aid == 0 || v->since <= aid)
				ibvl_late_fn[i] = dlvsym(is_cm(v->version) ? cm : verbs, v->name, v->version);
		}
		opened = 1;
	}
	return aid_error[0] ? aid_error : NULL;
}

void ibvl_late_need(lua_State *L, enum ibvl_late_id id, const char *what)
{
	const struct late_verb *v = &late_verbs[id];
	if (ibvl_late_fn[id] == NULL)
		luaL_error(L, "%s: needs rdma-core %d or later (%s@%s); this node's %s does not have it",
		           what, v->since, v->name, v->version,
		           is_cm(v->version) ? "librdmacm" : "libibverbs");
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

/* The file of a library (resolved: "libibverbs.so.1.14.44.0"), from one of its functions. */
static void set_file(lua_State *L, const char *field, void *lib, const char *fn)
{
	Dl_info info;
	void *sym = dlsym(lib, fn);
	char real[PATH_MAX];
	if (sym == NULL || dladdr(sym, &info) == 0 || info.dli_fname == NULL)
		return;
	lua_pushstring(L, realpath(info.dli_fname, real) ? real : info.dli_fname);
	lua_setfield(L, -2, field);
}

/* The newest symbol version found of one library's rows (from *row to the
 * NULL after them): narrows [*lo, *hi] and lists the version; *row moves on. */
static void newest_version(lua_State *L, const struct late_verb **row, void *lib, int *lo, int *hi)
{
	const struct late_verb *v = *row, *found = NULL;
	for (; v->name != NULL; v++)
		if (dlvsym(lib, v->name, v->version) != NULL)
			found = v;
	if (found != NULL) {
		if (found->since > *lo)
			*lo = found->since;
		if (found[1].name != NULL && found[1].since - 1 < *hi)
			*hi = found[1].since - 1;
		lua_pushstring(L, found->version);
		lua_rawseti(L, -2, (lua_Integer)lua_rawlen(L, -2) + 1);
	}
	*row = v + 1;
}

void ibvl_late_set_found(lua_State *L)
{
	void *verbs = library("libibverbs.so.1"), *cm = library("librdmacm.so.1");
	if (aid) {
		lua_pushinteger(L, aid);
		lua_setfield(L, -2, "aid");
	}
	lua_createtable(L, 0, IBVL_LATE_COUNT); /* each late verb's first release */
	for (int i = 0; i < IBVL_LATE_COUNT; i++) {
		lua_pushinteger(L, late_verbs[i].since);
		lua_setfield(L, -2, late_verbs[i].name);
	}
	lua_setfield(L, -2, "since");
	set_file(L, "libibverbs", verbs, "ibv_get_device_list");
	set_file(L, "librdmacm", cm, "rdma_create_id");
	int lo = 0, hi = INT_MAX;
	const struct late_verb *row = symvers;
	lua_newtable(L);
	newest_version(L, &row, verbs, &lo, &hi);
	newest_version(L, &row, cm, &lo, &hi);
	lua_setfield(L, -2, "versions");
	lua_pushinteger(L, lo);
	lua_setfield(L, -2, "at_least");
	if (hi != INT_MAX) {
		lua_pushinteger(L, hi);
		lua_setfield(L, -2, "at_most");
	}
	/* the methods that read sysfs here instead of a verb (context.c) */
	lua_newtable(L);
	int n = 0;
	if (!IBVL_HAVE_GID_EX || ibvl_late_fn[IBVL_LATE__ibv_query_gid_table] == NULL) {
		lua_pushliteral(L, "ctx:query_gid_table");
		lua_rawseti(L, -2, ++n);
	}
	if (!IBVL_HAVE_GID_EX || ibvl_late_fn[IBVL_LATE__ibv_query_gid_ex] == NULL) {
		lua_pushliteral(L, "ctx:query_gid_ex");
		lua_rawseti(L, -2, ++n);
	}
	lua_setfield(L, -2, "fallbacks");
}
