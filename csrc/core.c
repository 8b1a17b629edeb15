/*
 * core.c: luaopen_ibverbs_core, the C half of require "ibverbs".
 *
 *   local core = require "ibverbs.core"   -- normally via lua/ibverbs.lua
 *   core.devices(), core.open(...), core.buffer(n), core.ACCESS_LOCAL_WRITE, ...
 * Each object file registers its metatable and adds its constructors to the
 * module or to its parent's methods; the order below is parents first.
 */
#include <ctype.h>
#include <dlfcn.h>

#include "base/enums.h"
#include "base/late.h"
#include "base/wait.h"
#include "cm/cm.h"
#include "datapath/datapath.h"
#include "measure/kernel.h"
#include "measure/samples.h"
#include "net/trace.h"
#include "process/process.h"
#include "verbs/verbs.h"

static void open_constants(lua_State *L);

/* ibv.ACCESS_LOCAL_WRITE = 1, ibv.SEND_SIGNALED = 2, ... from the enum tables */
static void set_constants(lua_State *L, const char *prefix, const struct ibvl_enum *e)
{
	for (; e->name != NULL; e++) {
		if (ibvl_enum_absent(e))
			continue;
		char name[64];
		size_t n = 0;
		for (const char *p = prefix; *p && n < sizeof name - 1; p++)
			name[n++] = *p;
		for (const char *p = e->name; *p && n < sizeof name - 1; p++)
			name[n++] = (char)toupper((unsigned char)*p);
		name[n] = '\0';
		lua_pushinteger(L, e->value);
		lua_setfield(L, -2, name);
	}
}

static void open_constants(lua_State *L)
{
	set_constants(L, "ACCESS_", ibvl_access_flags);
	set_constants(L, "SEND_", ibvl_send_flags);
	set_constants(L, "WC_EX_WITH_", ibvl_wc_ex_flags);
	set_constants(L, "QP_CREATE_", ibvl_qp_create_flags);
	set_constants(L, "QP_EX_WITH_", ibvl_send_ops_flags);
	set_constants(L, "DEVICE_", ibvl_device_caps);
	set_constants(L, "PORT_", ibvl_port_caps);
	lua_pushliteral(L, "ibverbs.core 0.1");
	lua_setfield(L, -2, "_VERSION");
}

/* core.methods("ibverbs.qp"): the methods table of a type, for the Lua layer */
static int l_methods(lua_State *L)
{
	const char *tname = luaL_checkstring(L, 1);
	luaL_getmetatable(L, tname);
	if (!lua_istable(L, -1))
		return luaL_argerror(L, 1, "no such ibverbs type");
	lua_getfield(L, -1, "__index");
	if (lua_iscfunction(L, -1))
		lua_getupvalue(L, -1, 2);
	return 1;
}

int luaopen_ibverbs_core(lua_State *L);

/* Keeps this library loaded until the process ends.  At lua_close LuaJIT
 * may unload C modules before it has run the finalizers of their userdata
 * (or of a script's objects that call into them), which would then jump
 * into unmapped code. */
static void stay_loaded(void)
{
	Dl_info info;
	if (dladdr((void *)stay_loaded, &info) != 0 && info.dli_fname != NULL)
		dlopen(info.dli_fname, RTLD_NOW | RTLD_NODELETE);
}

int luaopen_ibverbs_core(lua_State *L)
{
	stay_loaded();
	const char *bad_aid = ibvl_late_open();
	if (bad_aid != NULL)
		return luaL_error(L, "%s", bad_aid);
	lua_newtable(L);
	lua_createtable(L, 0, 10); /* core.rdma_core: the build's headers, the node's library */
	lua_pushstring(L, IBVL_RDMA_CORE_BUILT);
	lua_setfield(L, -2, "built");
	ibvl_late_push_missing(L);
	lua_setfield(L, -2, "missing");
	ibvl_late_set_found(L);
	lua_setfield(L, -2, "rdma_core");
	open_constants(L);
	ibvl_open_errno(L);
	ibvl_open_device(L);
	ibvl_open_context(L);
	ibvl_open_buffer(L);
	ibvl_open_pd(L);
	ibvl_open_mr(L);
	ibvl_open_comp_channel(L);
	ibvl_open_cq(L);
	ibvl_open_wc_array(L);
	ibvl_open_xrcd(L);
	ibvl_open_srq(L);
	ibvl_open_ah(L);
	ibvl_open_mw(L);
	ibvl_open_qp(L);
	ibvl_open_qp_attr(L);
	ibvl_open_wr(L);
	ibvl_open_transfer(L);
	ibvl_open_samples(L);
	ibvl_open_lat(L);
	ibvl_open_bw(L);
	ibvl_open_kernels(L);
	ibvl_open_wait(L);
	ibvl_open_spawn(L);
	ibvl_open_pmix(L);
	ibvl_open_hmac(L);
	ibvl_open_munge(L);
	ibvl_open_batch(L);
	ibvl_open_dm(L);
	ibvl_open_td(L);
	ibvl_open_wq(L);
	ibvl_open_rwq_ind_tbl(L);
	ibvl_open_counters(L);
	ibvl_open_flow(L);
	ibvl_open_ffi(L);
	ibvl_open_cm_channel(L);
	ibvl_open_cm_id(L);
	ibvl_open_cm_addr(L);
	ibvl_open_cm_qp(L);
	ibvl_open_cm_post(L);
	ibvl_open_names(L);
	ibvl_open_trace(L);
	lua_pushcfunction(L, l_methods);
	lua_setfield(L, -2, "methods");
	return 1;
}
