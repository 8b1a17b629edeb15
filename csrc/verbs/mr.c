/*
 * mr.c: memory regions over memory the MR owns or over an ibv.buffer.
 *
 *   local mr = assert(pd:reg_mr(4096, {"local_write", "remote_read"}))
 *   local mr2 = assert(pd:reg_mr(buf, ibv.ACCESS_LOCAL_WRITE [, offset, length]))
 *   mr.addr, mr.length, mr.lkey, mr.rkey, mr.handle
 *   mr:write(0, "ping"); mr:read(0, 4); mr:u64(0, 1); mr:u64(0)
 *   mr:rereg{access = ..., pd = other_pd}   -- ibv_rereg_mr, where supported
 *   mr:close()                              -- ibv_dereg_mr, then frees owned memory
 *   pd:reg_mr_iova(iova, 4096, access)      -- the device sees the MR at iova
 *   pd:alloc_null_mr(); pd:reg_dmabuf_mr{fd =, length =}  -- ibverbs.dev_mr: keys only
 *   pd:advise_mr{advice = "prefetch", sg_list = {{mr = mr}}}  -- ODP prefetch
 *   local mr2 = assert(pd2:import_mr(mr.handle))  -- pd2 imported: closing unimports
 */
#include <stdlib.h>
#include <string.h>

#include "verbs/verbs.h"
#include "verbs/sge.h"

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

const struct ibvl_class ibvl_mr_class = {"ibverbs.mr", destroy_mr, "ibv_dereg_mr", mr_field, 0};

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

/* pd:reg_mr(length | buffer, access [, offset, length]); with_iova: the
 * same one argument later, after the iova (pd:reg_mr_iova). */
static int reg(lua_State *L, int with_iova)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	int a = 2 + with_iova; /* the length or buffer */
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	uint64_t iova = with_iova ? ibvl_check_u64(L, 2) : 0;
	struct ibvl_obj *buf = ibvl_test(L, a, &ibvl_buffer_class);
	int access = (int)ibvl_opt_flags(L, a + 1, ibvl_access_flags, IBV_ACCESS_LOCAL_WRITE);
	size_t len, off = 0;
	if (buf != NULL) {
		size_t size = ibvl_buffer_size(buf);
		off = (size_t)ibvl_opt_range(L, a + 2, 0, 0, (lua_Integer)size);
		len = (size_t)ibvl_opt_range(L, a + 3, (lua_Integer)(size - off), 0,
		                             (lua_Integer)(size - off));
	} else {
		len = (size_t)ibvl_check_range(L, a, 0, (lua_Integer)1 << 40);
	}
	struct mr *m = ibvl_new(L, &ibvl_mr_class, sizeof *m, &g); /* pd and buf are open, and stay so until the call */
	char *addr = buf != NULL ? (char *)buf->ptr + off : NULL;
	if (addr == NULL) {
		m->owned = ibvl_alloc_pages(len);
		if (m->owned == NULL)
			return ibvl_fail(L, "posix_memalign", ENOMEM);
		addr = m->owned;
	}
	const char *call = with_iova ? "ibv_reg_mr_iova2" : "ibv_reg_mr";
	m->o.ptr = with_iova ? ibv_reg_mr_iova2(pd->ptr, addr, len, iova, (unsigned int)access)
	                     : ibv_reg_mr(pd->ptr, addr, len, access);
	if (m->o.ptr == NULL) {
		int err = errno;
		free(m->owned);
		m->owned = NULL;
		return ibvl_fail_hint(L, call, err, err == EINVAL ? reg_hint(len, access) : NULL);
	}
	ibvl_use(L, -1, 1);
	if (buf != NULL)
		ibvl_use(L, -1, a);
	return 1;
}

static int l_reg_mr(lua_State *L)
{
	return reg(L, 0);
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

static int mr_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_mr(L)->length);
	return 1;
}

/* ---- MRs the CPU cannot reach through: device memory, dma-buf, null ------
 * An ibverbs.dev_mr has the keys and fields of an MR but no read/write and
 * no use as mr= in an SGE: its addr is not host memory.  SGEs name it with
 * addr, length and lkey. */
const struct ibvl_class ibvl_dev_mr_class = {"ibverbs.dev_mr", destroy_mr, "ibv_dereg_mr",
                                             mr_field, 0};

void *ibvl_dev_mr_new(lua_State *L, struct ibvl_guard *g)
{
	return ibvl_new(L, &ibvl_dev_mr_class, sizeof(struct mr), g);
}

/* pd:reg_mr_iova(iova, length | buffer, access [, offset, length]) */
static int l_reg_mr_iova(lua_State *L)
{
	return reg(L, 1);
}

/* pd:alloc_null_mr() */
static int l_alloc_null_mr(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	struct ibvl_obj *m = ibvl_dev_mr_new(L, &g);
	m->ptr = ibv_alloc_null_mr(pd->ptr);
	if (m->ptr == NULL)
		return ibvl_fail(L, "ibv_alloc_null_mr", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

/* pd:reg_dmabuf_mr{fd=, offset=, length=, iova=, access=} */
static int l_reg_dmabuf_mr(lua_State *L)
{
#if IBVL_HAVE_DMABUF_MR
	static const char *const dmabuf_fields[] = {"fd", "offset", "length", "iova", "access",
	                                             NULL};
	ibvl_late_need(L, IBVL_LATE_ibv_reg_dmabuf_mr, "pd:reg_dmabuf_mr");
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", dmabuf_fields);
	if (!ibvl_has_field(L, 2, "fd") || !ibvl_has_field(L, 2, "length"))
		ibvl_error(L, "attr: fields 'fd' and 'length' are required");
	int fd = (int)ibvl_int_field(L, 2, "fd", -1, -1, INT32_MAX);
	uint64_t off = ibvl_u64_field(L, 2, "offset", 0);
	size_t len = (size_t)ibvl_int_field(L, 2, "length", 0, 0, (lua_Integer)1 << 40);
	uint64_t iova = ibvl_u64_field(L, 2, "iova", off);
	int access = (int)ibvl_flags_field(L, 2, "access", ibvl_access_flags,
	                                   IBV_ACCESS_LOCAL_WRITE);
	struct ibvl_obj *m = ibvl_dev_mr_new(L, &g);
	m->ptr = ibv_reg_dmabuf_mr(pd->ptr, off, len, iova, fd, access);
	if (m->ptr == NULL)
		return ibvl_fail(L, "ibv_reg_dmabuf_mr", errno);
	ibvl_use(L, -1, 1);
	return 1;
#else
	return ibvl_absent(L, "pd:reg_dmabuf_mr", IBVL_SINCE_DMABUF_MR);
#endif
}

static const struct ibvl_enum advices[] = {
	{"prefetch", IBV_ADVISE_MR_ADVICE_PREFETCH},
	{"prefetch_write", IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE},
#if IBVL_HAVE_PREFETCH_NO_FAULT
	{"prefetch_no_fault", IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT},
#else
	IBVL_ENUM_ABSENT("prefetch_no_fault", IBVL_SINCE_PREFETCH_NO_FAULT),
#endif
	{NULL, 0},
};
static const struct ibvl_enum advise_flags[] = {{"flush", IBV_ADVISE_MR_FLAG_FLUSH}, {NULL, 0}};
static const char *const advise_fields[] = {"advice", "flags", "sge", "sg_list", NULL};

/* pd:advise_mr{advice = "prefetch", flags = {"flush"}, sg_list = {{mr = mr}, ...}} */
static int l_advise_mr(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	luaL_checktype(L, 2, LUA_TTABLE);
	int t = ibvl_copy_arg(L, 2, 2); /* read once; it keeps the MRs until the call */
	ibvl_check_fields(L, t, "attr", advise_fields);
	enum ibv_advise_mr_advice advice = (enum ibv_advise_mr_advice)ibvl_enum_field(
		L, t, "advice", advices, IBV_ADVISE_MR_ADVICE_PREFETCH);
	uint32_t flags = (uint32_t)ibvl_flags_field(L, t, "flags", advise_flags, 0);
	struct ibv_sge sge[16];
	struct ibvl_sge_src src[16];
	int n = ibvl_parse_sges(L, t, sge, src, 16);
	if (n == 0)
		ibvl_error(L, "attr: give the ranges in 'sge' or 'sg_list'");
	ibvl_guard_end(L, &g);
	return ibvl_result(L, "ibv_advise_mr", ibv_advise_mr(pd->ptr, advice, flags, sge,
	                                                     (uint32_t)n));
}

/* ---- imported MRs: pd:import_mr(handle), closed with ibv_unimport_mr ----- */
#if IBVL_HAVE_IMPORT
static int unimport_mr(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	ibv_unimport_mr(ptr);
	return 0;
}

/* Its addr is the exporter's: mr:read/write/u64 refuse it (mem_mr). */
static const struct ibvl_class imported_mr = {"ibverbs.mr", unimport_mr, "ibv_unimport_mr",
                                              mr_field, 0};
#endif

static struct ibv_mr *mem_mr(lua_State *L)
{
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_mr_class);
#if IBVL_HAVE_IMPORT
	if (o->cls == &imported_mr)
		ibvl_error(L, "an imported MR's memory is the exporting process's: read and write "
		              "it there");
#endif
	return o->ptr;
}

/* pd:import_mr(mr_handle): the MR mr.handle names, on a PD imported from the
 * context that made it */
static int l_import_mr(lua_State *L)
{
#if IBVL_HAVE_IMPORT
	ibvl_late_need(L, IBVL_LATE_ibv_import_mr, "pd:import_mr");
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *pd = ibvl_check(L, 1, &ibvl_pd_class);
	uint32_t handle = (uint32_t)ibvl_check_range(L, 2, 0, UINT32_MAX);
	struct mr *m = ibvl_new(L, &imported_mr, sizeof *m, &g);
	m->o.ptr = ibv_import_mr(pd->ptr, handle);
	if (m->o.ptr == NULL)
		return ibvl_fail(L, "ibv_import_mr", errno);
	ibvl_use(L, -1, 1);
	return 1;
#else
	return ibvl_absent(L, "pd:import_mr", IBVL_SINCE_IMPORT);
#endif
}

void ibvl_open_mr(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"read", l_read}, {"write", l_write}, {"u64", l_u64}, {"rereg", l_rereg},
		{"__len", mr_len}, {NULL, NULL},
	};
	static const luaL_Reg pd_methods[] = {
		{"reg_mr", l_reg_mr}, {"reg_mr_iova", l_reg_mr_iova},
		{"alloc_null_mr", l_alloc_null_mr}, {"reg_dmabuf_mr", l_reg_dmabuf_mr},
		{"advise_mr", l_advise_mr}, {"import_mr", l_import_mr}, {NULL, NULL},
	};
	static const luaL_Reg dev_methods[] = {{NULL, NULL}};
	ibvl_register(L, &ibvl_mr_class, methods);
	ibvl_register(L, &ibvl_dev_mr_class, dev_methods);
	ibvl_add_methods(L, ibvl_pd_class.name, pd_methods);
}
