/*
 * buffer.c: page-aligned, zeroed memory a script owns and registers.
 *
 *   local buf = ibv.buffer(8192)
 *   buf:write(0, "hello"); buf:read(0, 5); buf:u64(8, 42); buf:u64(8)
 *   local mr = pd:reg_mr(buf, ibv.ACCESS_LOCAL_WRITE)  -- buf stays alive
 *   #buf, buf.addr
 * The memory is freed only when no MR registers it any more.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "verbs/verbs.h"

struct buffer {
	struct ibvl_obj o;
	size_t size;
};

void *ibvl_alloc_pages(size_t size)
{
	void *p = NULL;
	long page = sysconf(_SC_PAGESIZE);
	if (posix_memalign(&p, (size_t)page, size ? size : 1) != 0)
		return NULL;
	memset(p, 0, size);
	return p;
}

static size_t check_span(lua_State *L, int arg, size_t size, size_t len)
{
	lua_Integer off = ibvl_check_range(L, arg, 0, INT64_MAX);
	if ((size_t)off > size || len > size - (size_t)off) {
		char msg[128];
		snprintf(msg, sizeof msg, "offset %lld + length %zu outside the %zu bytes",
		         (long long)off, len, size);
		luaL_argerror(L, arg, msg);
	}
	return (size_t)off;
}

/* x:read(offset, length) -> string */
int ibvl_mem_read(lua_State *L, const char *base, size_t size, int arg)
{
	size_t len = (size_t)ibvl_check_range(L, arg + 1, 0, INT64_MAX);
	size_t off = check_span(L, arg, size, len);
	lua_pushlstring(L, base + off, len);
	return 1;
}

/* x:write(offset, string) -> number of bytes written */
int ibvl_mem_write(lua_State *L, char *base, size_t size, int arg)
{
	size_t len;
	const char *s = ibvl_check_lstring(L, arg + 1, &len);
	size_t off = check_span(L, arg, size, len);
	memcpy(base + off, s, len);
	lua_pushinteger(L, (lua_Integer)len);
	return 1;
}

/* x:u64(offset [, value]): reads or writes a host-order 64-bit word */
int ibvl_mem_u64(lua_State *L, char *base, size_t size, int arg)
{
	size_t off = check_span(L, arg, size, 8);
	uint64_t v;
	if (lua_isnoneornil(L, arg + 1)) {
		memcpy(&v, base + off, 8);
		ibvl_push_u64(L, v);
		return 1;
	}
	v = ibvl_check_u64(L, arg + 1);
	memcpy(base + off, &v, 8);
	return 0;
}

static int destroy_buffer(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	free(ptr);
	return 0;
}

static int buffer_field(lua_State *L, void *obj, const char *key)
{
	struct buffer *b = obj;
	if (strcmp(key, "addr") == 0)
		ibvl_push_u64(L, (uintptr_t)b->o.ptr);
	else if (strcmp(key, "size") == 0)
		lua_pushinteger(L, (lua_Integer)b->size);
	else
		return 0;
	return 1;
}

const struct ibvl_class ibvl_buffer_class = {"ibverbs.buffer", destroy_buffer, "free",
                                             buffer_field, 0};

size_t ibvl_buffer_size(const struct ibvl_obj *buffer)
{
	return ((const struct buffer *)buffer)->size;
}

static struct buffer *check_buffer(lua_State *L)
{
	return ibvl_check(L, 1, &ibvl_buffer_class);
}

static int l_buffer(lua_State *L)
{
	size_t size = (size_t)ibvl_check_range(L, 1, 0, (lua_Integer)1 << 40);
	struct buffer *b = ibvl_new(L, &ibvl_buffer_class, sizeof *b, NULL);
	b->o.ptr = ibvl_alloc_pages(size);
	if (b->o.ptr == NULL)
		return ibvl_fail(L, "posix_memalign", ENOMEM);
	b->size = size;
	return 1;
}

static int l_read(lua_State *L)
{
	struct buffer *b = check_buffer(L);
	return ibvl_mem_read(L, b->o.ptr, b->size, 2);
}

static int l_write(lua_State *L)
{
	struct buffer *b = check_buffer(L);
	return ibvl_mem_write(L, b->o.ptr, b->size, 2);
}

static int l_u64(lua_State *L)
{
	struct buffer *b = check_buffer(L);
	return ibvl_mem_u64(L, b->o.ptr, b->size, 2);
}

static int buffer_len(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_buffer(L)->size);
	return 1;
}

void ibvl_open_buffer(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"read", l_read}, {"write", l_write}, {"u64", l_u64}, {"__len", buffer_len}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_buffer_class, methods);
	lua_pushcfunction(L, l_buffer);
	lua_setfield(L, -2, "buffer");
}
