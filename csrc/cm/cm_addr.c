/*
 * cm_addr.c: socket addresses as strings, and rdma_getaddrinfo results.
 *
 *   "192.0.2.1", "192.0.2.1:7471", "::1", "[fe80::1]:7471"   -- addresses in and out
 *   local ai = assert(cm.getaddrinfo("192.0.2.1", "7471", {flags = {"passive"},
 *                                    port_space = "tcp", qp_type = "rc"}))
 *   ai.src_addr, ai.dst_addr, ai.family, ai.qp_type, ai.port_space, ai.flags
 *   ai:list()            -- every entry as a table
 *   local id = assert(cm.create_ep(ai, {pd = pd, qp_init_attr = {...}}))  -- cm_id.c
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "cm/cm.h"

/* "a.b.c.d[:port]", "v6" or "[v6]:port" into ss; returns 0 when malformed. */
static int parse_sockaddr(const char *s, size_t len, struct sockaddr_storage *ss)
{
	char host[64];
	const char *port = NULL;
	memset(ss, 0, sizeof *ss);
	if (len >= sizeof host)
		return 0;
	memcpy(host, s, len + 1);
	char *colon = strchr(host, ':');
	if (host[0] == '[') {
		char *end = strchr(host, ']');
		if (end == NULL || (end[1] != '\0' && end[1] != ':'))
			return 0;
		*end = '\0';
		port = end[1] == ':' ? end + 2 : NULL;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else if (colon != NULL && strchr(colon + 1, ':') == NULL) {
		*colon = '\0';
		port = colon + 1;
	}
	unsigned long p = 0;
	if (port != NULL) {
		char *end;
		p = strtoul(port, &end, 10);
		if (*port == '\0' || *end != '\0' || p > 65535)
			return 0;
	}
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)p);
		return 1;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)p);
		return 1;
	}
	return 0;
}

void ibvl_check_sockaddr(lua_State *L, int arg, struct sockaddr_storage *ss)
{
	size_t len;
	const char *s = ibvl_check_lstring(L, arg, &len);
	if (!parse_sockaddr(s, len, ss))
		luaL_argerror(L, arg, lua_pushfstring(L, "address expected (\"192.0.2.1:7471\", "
		                                         "\"[fe80::1]:7471\"), got '%s'", s));
}

/* "192.0.2.1:7471", "[fe80::1]:7471"; other ibvl_cm_families as "family <n>". */
void ibvl_push_sockaddr(lua_State *L, const struct sockaddr *sa)
{
	char buf[INET6_ADDRSTRLEN];
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
		lua_pushfstring(L, "%s:%d", buf, (int)ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
		lua_pushfstring(L, "[%s]:%d", buf, (int)ntohs(in6->sin6_port));
	} else {
		lua_pushfstring(L, "family %d", (int)sa->sa_family);
	}
}

/* ---- rdma_getaddrinfo ---------------------------------------------------- */
static int destroy_addrinfo(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	rdma_freeaddrinfo(ptr);
	return 0;
}

static int push_entry_field(lua_State *L, const struct rdma_addrinfo *ai, const char *key)
{
	if (strcmp(key, "flags") == 0)
		ibvl_push_flags(L, ibvl_cm_rai_flags, ai->ai_flags);
	else if (strcmp(key, "family") == 0)
		ibvl_push_enum(L, ibvl_cm_families, ai->ai_family);
	else if (strcmp(key, "qp_type") == 0)
		ibvl_push_enum(L, ibvl_qp_types, ai->ai_qp_type);
	else if (strcmp(key, "port_space") == 0)
		ibvl_push_enum(L, ibvl_cm_port_spaces, ai->ai_port_space);
	else if (strcmp(key, "src_addr") == 0 && ai->ai_src_len > 0)
		ibvl_push_sockaddr(L, ai->ai_src_addr);
	else if (strcmp(key, "dst_addr") == 0 && ai->ai_dst_len > 0)
		ibvl_push_sockaddr(L, ai->ai_dst_addr);
	else if (strcmp(key, "src_canonname") == 0 && ai->ai_src_canonname != NULL)
		lua_pushstring(L, ai->ai_src_canonname);
	else if (strcmp(key, "dst_canonname") == 0 && ai->ai_dst_canonname != NULL)
		lua_pushstring(L, ai->ai_dst_canonname);
	else if (strcmp(key, "route") == 0 && ai->ai_route_len > 0)
		lua_pushlstring(L, ai->ai_route, ai->ai_route_len);
	else if (strcmp(key, "connect") == 0 && ai->ai_connect_len > 0)
		lua_pushlstring(L, ai->ai_connect, ai->ai_connect_len);
	else
		return 0;
	return 1;
}

static int addrinfo_field(lua_State *L, void *obj, const char *key)
{
	return push_entry_field(L, ((struct ibvl_obj *)obj)->ptr, key);
}

const struct ibvl_class ibvl_cm_addrinfo_class = {"ibverbs.cm_addrinfo", destroy_addrinfo,
                                                  "rdma_freeaddrinfo", addrinfo_field, 0};

static const char *const entry_fields[] = {"flags", "family", "qp_type", "port_space",
                                           "src_addr", "dst_addr", "src_canonname",
                                           "dst_canonname", "route", "connect", NULL};

/* ai:list(): every entry of the result as a table */
static int l_list(lua_State *L)
{
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_cm_addrinfo_class);
	lua_newtable(L);
	int n = 0;
	for (const struct rdma_addrinfo *ai = o->ptr; ai != NULL; ai = ai->ai_next) {
		lua_createtable(L, 0, 8);
		for (const char *const *f = entry_fields; *f != NULL; f++)
			if (push_entry_field(L, ai, *f))
				lua_setfield(L, -2, *f);
		lua_rawseti(L, -2, ++n);
	}
	return 1;
}

static int cm_addr_len(lua_State *L)
{
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_cm_addrinfo_class);
	lua_Integer n = 0;
	for (const struct rdma_addrinfo *ai = o->ptr; ai != NULL; ai = ai->ai_next)
		n++;
	lua_pushinteger(L, n);
	return 1;
}

static const char *const hint_fields[] = {"flags", "family", "qp_type", "port_space",
                                          "src_addr", "dst_addr", NULL};

static void check_hints(lua_State *L, int idx, struct rdma_addrinfo *h,
                        struct sockaddr_storage *src, struct sockaddr_storage *dst)
{
	ibvl_check_fields(L, idx, "hints", hint_fields);
	h->ai_flags = (int)ibvl_flags_field(L, idx, "flags", ibvl_cm_rai_flags, 0);
	h->ai_family = (int)ibvl_enum_field(L, idx, "family", ibvl_cm_families, AF_UNSPEC);
	h->ai_qp_type = (int)ibvl_enum_field(L, idx, "qp_type", ibvl_qp_types, 0);
	h->ai_port_space = (int)ibvl_enum_field(L, idx, "port_space", ibvl_cm_port_spaces, 0);
	const struct {
		const char *field;
		struct sockaddr_storage *ss;
		struct sockaddr **addr;
		socklen_t *len;
	} addrs[] = {{"src_addr", src, &h->ai_src_addr, &h->ai_src_len},
	             {"dst_addr", dst, &h->ai_dst_addr, &h->ai_dst_len}};
	for (int i = 0; i < 2; i++) {
		lua_getfield(L, idx, addrs[i].field);
		if (!lua_isnil(L, -1)) {
			if (lua_type(L, -1) != LUA_TSTRING ||
			    !parse_sockaddr(lua_tostring(L, -1), lua_rawlen(L, -1), addrs[i].ss))
				luaL_error(L, "hints: field '%s': address expected, got %s",
				           addrs[i].field, luaL_typename(L, -1));
			*addrs[i].addr = (struct sockaddr *)addrs[i].ss;
			*addrs[i].len = addrs[i].ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
			                                                   : sizeof(struct sockaddr_in6);
		}
		lua_pop(L, 1);
	}
}

/* cm.getaddrinfo(node, service [, hints]) -> ibverbs.cm_addrinfo */
static int l_getaddrinfo(lua_State *L)
{
	const char *node = luaL_optstring(L, 1, NULL);
	const char *service = luaL_optstring(L, 2, NULL);
	struct rdma_addrinfo hints, *res = NULL;
	struct sockaddr_storage src, dst;
	memset(&hints, 0, sizeof hints);
	if (!lua_isnoneornil(L, 3))
		check_hints(L, 3, &hints, &src, &dst);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_cm_addrinfo_class, sizeof *o, NULL);
	int rc = rdma_getaddrinfo(node, service, lua_isnoneornil(L, 3) ? NULL : &hints, &res);
	if (rc == -1)
		return ibvl_fail(L, "rdma_getaddrinfo", errno);
	if (rc != 0) { /* a getaddrinfo EAI_* code */
		lua_pushnil(L);
		lua_pushfstring(L, "rdma_getaddrinfo: %s", gai_strerror(rc));
		lua_pushinteger(L, rc == EAI_SYSTEM ? errno : EADDRNOTAVAIL);
		return 3;
	}
	o->ptr = res;
	return 1;
}

void ibvl_open_cm_addr(lua_State *L)
{
	static const luaL_Reg methods[] = {{"list", l_list}, {"__len", cm_addr_len}, {NULL, NULL}};
	static const luaL_Reg fns[] = {{"getaddrinfo", l_getaddrinfo}, {NULL, NULL}};
	ibvl_register(L, &ibvl_cm_addrinfo_class, methods);
	ibvl_cm_functions(L, fns);
}
