/*
 * mr.c: memory regions over memory the MR owns or over an ibv.buffer.
 *
 *   local mr = assert(pd:reg_mr(4096, {"local_write", "remote_read"}))
 *   local mr2 = assert(pd:reg_mr(buf, ibv.ACCESS_LOCAL_WRITE [, offset, length]))
 *   mr.addr, mr.length, mr.lkey, mr.rkey, mr.handle
 *   mr:write(0, "ping"); mr:read(0, 4); mr:u64(0, 1); mr:u64(0)
 *   mr:rereg{access = ..., pd = other_pd}   -- ibv_rereg_mr, where supported
 *   mr:close()                              -- ibv_dereg_mr, then frees owned memory
 *   local mr2 = assert(pd2:import_mr(mr.handle))  -- pd2 imported: closing unimports
 */
#include <stdlib.h>
#include <string.h>

#include "ibvl.h"

struct mr {
	struct ibvl_obj o;
	void *owned; /* memory this MR allocated, freed after deregistration */
};

static int destroy_mr(struct ibvl_obj *o, void *ptr)
{
	struct mr *m = (struct mr *)o;
	int rc = ibv_dereg_mr(ptr);
	if (rc == 0) {
		free(m->owned);
		m->owned = NULL;
	}
	return rc;
}

static int mr_field(lua_State *L, void *obj, const char *key)
{
	struct ibv_mr *mr = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "lkey") == 0)
		lua_pushinteger(L, mr->lkey);
	else if (strcmp(key, "rkey") == 0)
		lua_pushinteger(L, mr->rkey);
	else if (strcmp(key, "addr") == 0)
		ibvl_push_u64(L, (uintptr_t)mr->addr);
	else if (strcmp(key, "length") == 0)
		lua_pushinteger(L, (lua_Integer)mr->length);
	else if (strcmp(key, "handle") == 0)
		lua_pushinteger(L, mr->handle);
	else
		return 0;
	return 1;
}

const size_t ibvl_mr_size = sizeof(struct mr); /* for embed.c */

const struct ibvl_class ibvl_mr_class = {"ibverbs.mr", destroy_mr, "ibv_dereg_mr", mr_field};

static struct ibv_mr *check_mr(lua_State *L)
{
	return ((struct ibvl_obj *)ibvl_check(L, 1, &ibvl_mr_class))->ptr;
}

/* The likely cause of EINVAL from ibv_reg_mr. */
static const char *reg_hint(size_t len, int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return "'remote_write' and 'remote_atomic' need 'local_write' too";
	if (len == 0)
		return "a zero-length MR: the device may refuse it";
	return NULL;
}

/* pd:reg_mr(length | buffer, access [, offset, length]) */
static int l_reg_mr(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibvl_obj *buf = ibvl_test(L, 2, &ibvl_buffer_class);
	int access = (int)ibvl_opt_flags(L, 3, ibvl_access_flags, IBV_ACCESS_LOCAL_WRITE);
	size_t len, off = 0;
	if (buf != NULL) {
		size_t size = ibvl_buffer_size(buf);
		off = (size_t)ibvl_opt_range(L, 4, 0, 0, (lua_Integer)size);
		len = (size_t)ibvl_opt_range(L, 5, (lua_Integer)(size - off), 0,
		                             (lua_Integer)(size - off));
	} else {
		len = (size_t)ibvl_check_range(L, 2, 0, (lua_Integer)1 << 40);
	}
	struct mr *m = ibvl_new(L, &ibvl_mr_class, sizeof *m);
	ibvl_guard_end(L, &g); /* pd and buf are open, and stay so until the call */
	char *addr = buf != NULL ? (char *)buf->ptr + off : NULL;
	if (addr == NULL) {
		m->owned = ibvl_alloc_pages(len);
		if (m->owned == NULL)
			return ibvl_fail(L, "posix_memalign", ENOMEM);
		addr = m->owned;
	}
	m->o.ptr = ibv_reg_mr(pd->ptr, addr, len, access);
	if (m->o.ptr == NULL) {
		int err = errno;
		free(m->owned);
		m->owned = NULL;
		return ibvl_fail_hint(L, "ibv_reg_mr", err, err == EINVAL ? reg_hint(len, access) : NULL);
	}
	ibvl_use(L, -1, 1);
	if (buf != NULL)
		ibvl_use(L, -1, 2);
	return 1;
}

static struct ibv_mr *mem_mr(lua_State *L);

static int l_read(lua_State *L)
{
	struct ibv_mr *mr = mem_mr(L);
	return ibvl_mem_read(L, mr->addr, mr->length, 2);
}

static int l_write(lua_State *L)
{
	struct ibv_mr *mr = mem_mr(L);
	return ibvl_mem_write(L, mr->addr, mr->length, 2);
}

static int l_u64(lua_State *L)
{
	struct ibv_mr *mr = mem_mr(L);
	return ibvl_mem_u64(L, mr->addr, mr->length, 2);
}

/* mr:rereg{access=, pd=}: changes access rights and/or PD in place. */
static int l_rereg(lua_State *L)
{
	static const char *const fields[] = {"access", "pd", NULL};
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_mr_class);
	ibvl_check_fields(L, 2, "attr", fields);
	int flags = 0, access = 0;
	if (ibvl_has_field(L, 2, "access")) {
		flags |= IBV_REREG_MR_CHANGE_ACCESS;
		access = (int)ibvl_flags_field(L, 2, "access", ibvl_access_flags, 0);
	}
	struct ibvl_obj *pd = ibvl_obj_field_keep(L, 2, "pd", &ibvl_pd_class);
	int pdi = lua_gettop(L);
	if (pd != NULL)
		flags |= IBV_REREG_MR_CHANGE_PD;
	if (flags == 0)
		return luaL_argerror(L, 2, "attr: give 'access', 'pd' or both");
	ibvl_guard_end(L, &g);
	int rc = ibv_rereg_mr(o->ptr, flags, pd ? pd->ptr : NULL, NULL, 0, access);
	if (rc != 0)
		return ibvl_fail(L, "ibv_rereg_mr", rc < 0 ? errno : rc);
	if (pd != NULL) /* now a user of the new PD instead of the old one */
		ibvl_swap_use(L, 1, 0, pdi);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_mr(L)->length);
	return 1;
}

void ibvl_open_mr(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"read", l_read}, {"write", l_write}, {"u64", l_u64}, {"rereg", l_rereg},
		{"__len", l_len}, {NULL, NULL},
	};
	static const luaL_Reg pd_methods[] = {{"reg_mr", l_reg_mr}, {NULL, NULL}};
	ibvl_register(L, &ibvl_mr_class, methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
}

/* ---- imported MRs: pd:import_mr(handle), closed with ibv_unimport_mr ----- */
static int unimport_mr(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	ibv_unimport_mr(ptr);
	return 0;
}

/* Its addr is the exporter's: mr:read/write/u64 refuse it (mem_mr). */
static const struct ibvl_class imported_mr = {"ibverbs.mr", unimport_mr, "ibv_unimport_mr",
                                              mr_field};

static struct ibv_mr *mem_mr(lua_State *L)
{
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_mr_class);
	if (o->cls == &imported_mr)
		ibvl_error(L, "an imported MR's memory is the exporting process's: read and write "
		              "it there");
	return o->ptr;
}

/* pd:import_mr(mr_handle): the MR mr.handle names, on a PD imported from the
 * context that made it */
static int l_import_mr(lua_State *L)
{
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	uint32_t handle = (uint32_t)ibvl_check_range(L, 2, 0, UINT32_MAX);
	struct mr *m = ibvl_new(L, &imported_mr, sizeof *m);
	m->o.ptr = ibv_import_mr(pd->ptr, handle);
	if (m->o.ptr == NULL)
		return ibvl_fail(L, "ibv_import_mr", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

void ibvl_open_mr_import(lua_State *L)
{
	static const luaL_Reg pd_methods[] = {{"import_mr", l_import_mr}, {NULL, NULL}};
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
}
