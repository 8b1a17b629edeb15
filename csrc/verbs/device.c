/*
 * device.c: the device list and opening a device.
 *
 *   for _, d in ipairs(ibv.devices()) do print(d.name, d.guid, d.transport) end
 *   local ctx = assert(ibv.open("rxe0"))   -- or ibv.open(1), or ibv.open()
 *   ibv.devices()[1].device_index          -- the kernel's index (ibv_get_device_index)
 *   assert(ibv.fork_init()); ibv.is_fork_initialized()  -- "disabled", "enabled", "unneeded"
 *   local ctx2 = assert(ibv.import_device(ctx:cmd_fd()))  -- the fd is duplicated first
 */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "verbs/verbs.h"

static void push_device(lua_State *L, struct ibv_device *d, int index)
{
	lua_createtable(L, 0, 7);
	ibvl_set_str(L, "name", ibv_get_device_name(d));
	ibvl_push_guid(L, ibv_get_device_guid(d));
	lua_setfield(L, -2, "guid");
	ibvl_set_enum(L, "node_type", ibvl_node_types, d->node_type);
	ibvl_set_enum(L, "transport", ibvl_transports, d->transport_type);
	ibvl_set_str(L, "dev_name", d->dev_name);
	ibvl_set_str(L, "ibdev_path", d->ibdev_path);
	ibvl_set_int(L, "index", index);
#if IBVL_HAVE_DEVICE_INDEX /* -1: not known, also where the verb is not */
	ibvl_set_int(L, "device_index",
	             ibvl_late_fn[IBVL_LATE_ibv_get_device_index] ? ibv_get_device_index(d) : -1);
#else
	ibvl_set_int(L, "device_index", -1);
#endif
}

static int l_devices(lua_State *L)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL)
		return ibvl_fail(L, "ibv_get_device_list", errno);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		push_device(L, list[i], i + 1);
		lua_rawseti(L, -2, i + 1);
	}
	ibv_free_device_list(list);
	return 1;
}

/* ibv.open([name or 1-based index]): the first device when none is named. */
static int l_open(lua_State *L)
{
	int byname = lua_type(L, 1) == LUA_TSTRING;
	lua_Integer want = byname ? 0 : ibvl_opt_range(L, 1, 1, 1, INT32_MAX);
	const char *name = byname ? lua_tostring(L, 1) : NULL;
	struct ibvl_obj *o = ibvl_new(L, &ibvl_context_class, sizeof *o, NULL);
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL)
		return ibvl_fail(L, "ibv_get_device_list", errno);
	struct ibv_device *dev = NULL;
	for (int i = 0; i < n && dev == NULL; i++)
		if (byname ? strcmp(ibv_get_device_name(list[i]), name) == 0 : i + 1 == want)
			dev = list[i];
	if (dev != NULL)
		o->ptr = ibv_open_device(dev);
	int err = errno;
	ibv_free_device_list(list);
	if (dev == NULL) {
		lua_pushnil(L);
		if (byname)
			lua_pushfstring(L, "ibv_open_device: no RDMA device named '%s'", name);
		else
			lua_pushfstring(L, "ibv_open_device: no RDMA device #%d (%d found)", (int)want, n);
		lua_pushinteger(L, ENODEV);
		return 3;
	}
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_open_device", err);
	ibvl_track(L, -1);
	return 1;
}

/* ibv.fork_init(): true, or nil, msg, errno */
static int l_fork_init(lua_State *L)
{
	return ibvl_result(L, "ibv_fork_init", ibv_fork_init());
}

static int l_is_fork_initialized(lua_State *L)
{
#if IBVL_HAVE_FORK_STATUS
	ibvl_late_need(L, IBVL_LATE_ibv_is_fork_initialized, "ibv.is_fork_initialized");
	ibvl_push_enum(L, ibvl_fork_statuses, ibv_is_fork_initialized());
	return 1;
#else
	return ibvl_absent(L, "ibv.is_fork_initialized", IBVL_SINCE_FORK_STATUS);
#endif
}

/* ibv.import_device(cmd_fd): a context sharing the device objects of the
 * context (of this or another process) whose command fd is given.  The fd is
 * duplicated here: the new context owns and closes the duplicate, the caller
 * keeps its own. */
static int l_import_device(lua_State *L)
{
#if IBVL_HAVE_IMPORT
	ibvl_late_need(L, IBVL_LATE_ibv_import_device, "ibv.import_device");
	int fd = (int)ibvl_check_range(L, 1, 0, INT32_MAX);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_context_class, sizeof *o, NULL);
	int dupfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dupfd < 0)
		return ibvl_fail(L, "ibv_import_device", errno);
	o->ptr = ibv_import_device(dupfd);
	if (o->ptr == NULL) {
		int err = errno;
		if (fcntl(dupfd, F_GETFD) != -1) /* a failed import may have closed it */
			close(dupfd);
		return ibvl_fail(L, "ibv_import_device", err);
	}
	ibvl_track(L, -1);
	return 1;
#else
	return ibvl_absent(L, "ibv.import_device", IBVL_SINCE_IMPORT);
#endif
}

void ibvl_open_device(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{"devices", l_devices}, {"open", l_open}, {"fork_init", l_fork_init},
		{"is_fork_initialized", l_is_fork_initialized}, {"import_device", l_import_device},
		{NULL, NULL},
	};
	luaL_setfuncs(L, funcs, 0);
}
