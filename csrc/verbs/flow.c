/*
 * flow.c: flow steering rules on a QP (raw packet or UD).
 *
 *   local flow = assert(qp:create_flow{type = "normal", port = 1, priority = 0,
 *     flags = {"dont_trap"},
 *     specs = {
 *       {type = "eth", val = {dst_mac = "00:11:22:33:44:55", ether_type = 0x0800}},
 *       {type = "ipv4", val = {dst_ip = "192.0.2.1"}, mask = {dst_ip = "255.255.255.0"}},
 *       {type = "udp", val = {dst_port = 4791}},
 *       {type = "vxlan_tunnel", inner = false, val = {tunnel_id = 42}},
 *       {type = "action_count", counters = counters},
 *     }})
 *   flow:close()   -- ibv_destroy_flow
 * Spec types: eth, ipv4, ipv4_ext, ipv6, esp, tcp, udp, vxlan_tunnel, gre,
 * mpls, and the actions action_tag (tag_id), action_drop, action_count
 * (counters).  inner = true marks a spec of the inner headers of a tunnel.
 * Values are given in host order (numbers) or as text (MAC and IP
 * addresses) and stored in network order.  A spec without mask matches
 * exactly the fields its val gives.
 */
#include <arpa/inet.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "verbs/verbs.h"

static int destroy_flow(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_flow(ptr);
}

const struct ibvl_class ibvl_flow_class = {"ibverbs.flow", destroy_flow, "ibv_destroy_flow",
                                           NULL, 0};

/* ---- spec tables --------------------------------------------------------- */
enum kind { U8, BE16, BE32, MAC, IP4, IP6 };

struct field {
	const char *name;
	size_t off; /* in the filter */
	enum kind kind;
};

struct spec {
	const char *name;
	enum ibv_flow_spec_type type;
	size_t size, val, mask; /* the spec's size, its filters' offsets */
	const struct field *fields; /* NULL: an action */
};

#define F(s, f, k) {#f, offsetof(struct s, f), k}
static const struct field eth_fields[] = {
	F(ibv_flow_eth_filter, dst_mac, MAC), F(ibv_flow_eth_filter, src_mac, MAC),
	F(ibv_flow_eth_filter, ether_type, BE16), F(ibv_flow_eth_filter, vlan_tag, BE16),
	{NULL, 0, U8},
};
static const struct field ipv4_fields[] = {
	F(ibv_flow_ipv4_ext_filter, src_ip, IP4), F(ibv_flow_ipv4_ext_filter, dst_ip, IP4),
	F(ibv_flow_ipv4_ext_filter, proto, U8), F(ibv_flow_ipv4_ext_filter, tos, U8),
	F(ibv_flow_ipv4_ext_filter, ttl, U8), F(ibv_flow_ipv4_ext_filter, flags, U8),
	{NULL, 0, U8},
};
static const struct field ipv6_fields[] = {
	F(ibv_flow_ipv6_filter, src_ip, IP6), F(ibv_flow_ipv6_filter, dst_ip, IP6),
	F(ibv_flow_ipv6_filter, flow_label, BE32), F(ibv_flow_ipv6_filter, next_hdr, U8),
	F(ibv_flow_ipv6_filter, traffic_class, U8), F(ibv_flow_ipv6_filter, hop_limit, U8),
	{NULL, 0, U8},
};
static const struct field esp_fields[] = {
	F(ibv_flow_esp_filter, spi, BE32), F(ibv_flow_esp_filter, seq, BE32), {NULL, 0, U8},
};
static const struct field port_fields[] = {
	F(ibv_flow_tcp_udp_filter, dst_port, BE16), F(ibv_flow_tcp_udp_filter, src_port, BE16),
	{NULL, 0, U8},
};
static const struct field tunnel_fields[] = {
	F(ibv_flow_tunnel_filter, tunnel_id, BE32), {NULL, 0, U8},
};
static const struct field gre_fields[] = {
	F(ibv_flow_gre_filter, c_ks_res0_ver, BE16), F(ibv_flow_gre_filter, protocol, BE16),
	F(ibv_flow_gre_filter, key, BE32), {NULL, 0, U8},
};
static const struct field mpls_fields[] = {F(ibv_flow_mpls_filter, label, BE32), {NULL, 0, U8}};
#undef F

/* ipv4 (the short spec) takes the first two fields of ipv4_fields */
static const struct field ipv4_short_fields[] = {
	{"src_ip", offsetof(struct ibv_flow_ipv4_filter, src_ip), IP4},
	{"dst_ip", offsetof(struct ibv_flow_ipv4_filter, dst_ip), IP4}, {NULL, 0, U8},
};

#define S(n, t, s, fl) {n, t, sizeof(struct s), offsetof(struct s, val), offsetof(struct s, mask), fl}
#define A(n, t, s) {n, t, sizeof(struct s), 0, 0, NULL}
static const struct spec specs[] = {
	S("eth", IBV_FLOW_SPEC_ETH, ibv_flow_spec_eth, eth_fields),
	S("ipv4", IBV_FLOW_SPEC_IPV4, ibv_flow_spec_ipv4, ipv4_short_fields),
	S("ipv4_ext", IBV_FLOW_SPEC_IPV4_EXT, ibv_flow_spec_ipv4_ext, ipv4_fields),
	S("ipv6", IBV_FLOW_SPEC_IPV6, ibv_flow_spec_ipv6, ipv6_fields),
	S("esp", IBV_FLOW_SPEC_ESP, ibv_flow_spec_esp, esp_fields),
	S("tcp", IBV_FLOW_SPEC_TCP, ibv_flow_spec_tcp_udp, port_fields),
	S("udp", IBV_FLOW_SPEC_UDP, ibv_flow_spec_tcp_udp, port_fields),
	S("vxlan_tunnel", IBV_FLOW_SPEC_VXLAN_TUNNEL, ibv_flow_spec_tunnel, tunnel_fields),
	S("gre", IBV_FLOW_SPEC_GRE, ibv_flow_spec_gre, gre_fields),
	S("mpls", IBV_FLOW_SPEC_MPLS, ibv_flow_spec_mpls, mpls_fields),
	A("action_tag", IBV_FLOW_SPEC_ACTION_TAG, ibv_flow_spec_action_tag),
	A("action_drop", IBV_FLOW_SPEC_ACTION_DROP, ibv_flow_spec_action_drop),
	A("action_count", IBV_FLOW_SPEC_ACTION_COUNT, ibv_flow_spec_counter_action),
};
#undef S
#undef A

static const struct ibvl_enum spec_names[] = {
	{"eth", 0}, {"ipv4", 1}, {"ipv4_ext", 2}, {"ipv6", 3}, {"esp", 4}, {"tcp", 5},
	{"udp", 6}, {"vxlan_tunnel", 7}, {"gre", 8}, {"mpls", 9}, {"action_tag", 10},
	{"action_drop", 11}, {"action_count", 12}, {NULL, 0},
};

/* ---- parsing ------------------------------------------------------------- */
static void parse_text(lua_State *L, const struct field *f, const char *s, uint8_t *dst)
{
	unsigned int m[6];
	char end;
	if (f->kind == MAC) {
		if (sscanf(s, "%2x:%2x:%2x:%2x:%2x:%2x%c", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5],
		           &end) != 6)
			ibvl_error(L, "field '%s': MAC address \"aa:bb:cc:dd:ee:ff\" expected", f->name);
		for (int i = 0; i < 6; i++)
			dst[i] = (uint8_t)m[i];
	} else if (inet_pton(f->kind == IP4 ? AF_INET : AF_INET6, s, dst) != 1) {
		ibvl_error(L, "field '%s': IPv%c address expected", f->name,
		           f->kind == IP4 ? '4' : '6');
	}
}

/* Writes the value of field f (at the top of the stack) into the filter. */
static void set_field(lua_State *L, const struct field *f, uint8_t *filter)
{
	uint8_t *dst = filter + f->off;
	if (f->kind == MAC || f->kind == IP6 || (f->kind == IP4 && lua_type(L, -1) == LUA_TSTRING)) {
		if (lua_type(L, -1) != LUA_TSTRING)
			ibvl_error(L, "field '%s': address text expected, got %s", f->name,
			           luaL_typename(L, -1));
		parse_text(L, f, lua_tostring(L, -1), dst);
		return;
	}
	lua_Integer v;
	static const int bits[] = {8, 16, 32, 0, 32, 0};
	if (!ibvl_tointeger(L, -1, &v) || v < 0 || v > (((lua_Integer)1 << bits[f->kind]) - 1))
		ibvl_error(L, "field '%s': unsigned %d-bit integer expected", f->name, bits[f->kind]);
	if (f->kind == U8) {
		*dst = (uint8_t)v;
	} else if (f->kind == BE16) {
		uint16_t x = htons((uint16_t)v);
		memcpy(dst, &x, sizeof x);
	} else {
		uint32_t x = htonl((uint32_t)v);
		memcpy(dst, &x, sizeof x);
	}
}

/* Fills a filter from the table at idx (nil: nothing); with full, sets to
 * all ones instead each field the table gives (the default mask). */
static void parse_filter(lua_State *L, int idx, const struct spec *s, uint8_t *filter,
                         int full, const char *what)
{
	if (lua_isnil(L, idx))
		return;
	if (!lua_istable(L, idx))
		ibvl_error(L, "field '%s': table expected, got %s", what, luaL_typename(L, idx));
	size_t fsize = s->mask - s->val;
	for (const struct field *f = s->fields; f->name != NULL; f++) {
		if (ibvl_getfield(L, idx, f->name) != LUA_TNIL) {
			if (full) {
				size_t n = f->kind == MAC ? 6 : f->kind == IP6 ? 16 : f->kind == U8 ? 1
				           : f->kind == BE16 ? 2 : 4;
				if (f->off + n <= fsize)
					memset(filter + f->off, 0xff, n);
			} else {
				set_field(L, f, filter);
			}
		}
		lua_pop(L, 1);
	}
	lua_pushnil(L); /* unknown keys */
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		const struct field *f = s->fields;
		while (f->name != NULL && !(lua_type(L, -1) == LUA_TSTRING &&
		                           strcmp(f->name, lua_tostring(L, -1)) == 0))
			f++;
		if (f->name == NULL)
			ibvl_error(L, "field '%s': unknown field '%s' for a %s spec", what,
			           lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?", s->name);
	}
}

static const char *const spec_fields[] = {"type", "inner", "val", "mask", "tag_id", "counters",
                                          NULL};

/* Writes the spec table at idx at dst; returns the counters object it
 * names (its value pushed) or NULL (nothing pushed). */
static struct ibvl_obj *parse_spec(lua_State *L, int idx, uint8_t *dst)
{
	ibvl_check_fields(L, idx, "spec", spec_fields);
	if (!ibvl_has_field(L, idx, "type"))
		ibvl_error(L, "field 'type' is required");
	const struct spec *s = &specs[ibvl_enum_field(L, idx, "type", spec_names, 0)];
	memset(dst, 0, s->size);
	/* specs follow each other 4-aligned: written with memcpy, never through a
	 * struct pointer (an ibv_flow_spec wants 8) */
	enum ibv_flow_spec_type type =
		s->type | (ibvl_bool_field(L, idx, "inner", 0) ? IBV_FLOW_SPEC_INNER : 0);
	uint16_t size = (uint16_t)s->size;
	memcpy(dst + offsetof(struct ibv_flow_spec_action_drop, type), &type, sizeof type);
	memcpy(dst + offsetof(struct ibv_flow_spec_action_drop, size), &size, sizeof size);
	if (s->fields != NULL) {
		ibvl_getfield(L, idx, "val");
		ibvl_getfield(L, idx, "mask");
		int v = lua_gettop(L) - 1;
		parse_filter(L, v, s, dst + s->val, 0, "val");
		parse_filter(L, lua_isnil(L, v + 1) ? v : v + 1, s, dst + s->mask,
		             lua_isnil(L, v + 1), "mask");
		lua_pop(L, 2);
	} else if (s->type == IBV_FLOW_SPEC_ACTION_TAG) {
		uint32_t tag = (uint32_t)ibvl_int_field(L, idx, "tag_id", 0, 0, UINT32_MAX);
		memcpy(dst + offsetof(struct ibv_flow_spec_action_tag, tag_id), &tag, sizeof tag);
	} else if (s->type == IBV_FLOW_SPEC_ACTION_COUNT) {
		struct ibvl_obj *c = ibvl_obj_field_keep(L, idx, "counters", &ibvl_counters_class);
		if (c == NULL)
			ibvl_error(L, "field 'counters' is required for an action_count spec");
		struct ibv_counters *cp = c->ptr;
		memcpy(dst + offsetof(struct ibv_flow_spec_counter_action, counters), &cp, sizeof cp);
		return c;
	}
	return NULL;
}

static const char *const attr_fields[] = {"type", "priority", "port", "flags", "specs", NULL};
static const struct ibvl_enum flow_types[] = {
	{"normal", IBV_FLOW_ATTR_NORMAL}, {"all_default", IBV_FLOW_ATTR_ALL_DEFAULT},
	{"mc_default", IBV_FLOW_ATTR_MC_DEFAULT}, {"sniffer", IBV_FLOW_ATTR_SNIFFER}, {NULL, 0},
};
static const struct ibvl_enum flow_flags[] = {
	{"dont_trap", IBV_FLOW_ATTR_FLAGS_DONT_TRAP}, {"egress", IBV_FLOW_ATTR_FLAGS_EGRESS},
	{NULL, 0},
};

#define MAX_SPEC sizeof(struct ibv_flow_spec) /* bytes: the largest spec */

/* Builds the attr with its specs in a userdata it pushes; the counters
 * objects named are pushed after it, their count in *ncounters. */
static struct ibv_flow_attr *parse_attr(lua_State *L, int idx, int *ncounters)
{
	luaL_checktype(L, idx, LUA_TTABLE);
	ibvl_check_fields(L, idx, "flow_attr", attr_fields);
	if (ibvl_getfield(L, idx, "specs") != LUA_TTABLE && !lua_isnil(L, -1))
		ibvl_error(L, "flow_attr: field 'specs': array expected, got %s", luaL_typename(L, -1));
	int t = lua_gettop(L), n = lua_istable(L, t) ? (int)lua_rawlen(L, t) : 0;
	if (n > 255)
		ibvl_error(L, "flow_attr: field 'specs': %d specs, at most 255", n);
	struct ibv_flow_attr *a = lua_newuserdatauv(L, sizeof *a + (size_t)n * MAX_SPEC, 0);
	memset(a, 0, sizeof *a);
	a->type = (enum ibv_flow_attr_type)ibvl_enum_field(L, idx, "type", flow_types,
	                                                   IBV_FLOW_ATTR_NORMAL);
	a->priority = (uint16_t)ibvl_int_field(L, idx, "priority", 0, 0, UINT16_MAX);
	a->port = (uint8_t)ibvl_int_field(L, idx, "port", 1, 1, 255);
	a->flags = (uint32_t)ibvl_flags_field(L, idx, "flags", flow_flags, 0);
	a->num_of_specs = (uint8_t)n;
	uint8_t *p = (uint8_t *)(a + 1);
	*ncounters = 0;
	for (int i = 0; i < n; i++) {
		int saved = ibvl_path_push("specs", i + 1);
		if ((lua_rawgeti(L, t, i + 1), lua_type(L, -1)) != LUA_TTABLE)
			ibvl_error(L, "spec table expected, got %s", luaL_typename(L, -1));
		struct ibvl_obj *c = parse_spec(L, lua_gettop(L), p);
		if (c != NULL) {
			if (++*ncounters > IBVL_MAXREFS - 1)
				ibvl_error(L, "at most %d action_count specs", IBVL_MAXREFS - 1);
			lua_remove(L, -2); /* keep the counters, drop the spec table */
		} else {
			lua_pop(L, 1);
		}
		uint16_t size;
		memcpy(&size, p + offsetof(struct ibv_flow_spec_action_drop, size), sizeof size);
		p += size;
		ibvl_path_pop(saved);
	}
	a->size = (uint16_t)(p - (uint8_t *)a);
	return a;
}

/* qp:create_flow{type=, priority=, port=, flags=, specs = {...}} */
int ibvl_qp_create_flow(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_qp *qp = ibvl_check_qp(L, 1);
	int ncounters;
	struct ibv_flow_attr *a = parse_attr(L, 2, &ncounters);
	int first = lua_gettop(L) - ncounters + 1;
	struct ibvl_obj *o = ibvl_new(L, &ibvl_flow_class, sizeof *o, &g);
	int self = lua_gettop(L);
	o->ptr = ibv_create_flow(qp->o.ptr, a);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_flow", errno);
	ibvl_use(L, self, 1);
	for (int i = 0; i < ncounters; i++)
		ibvl_use(L, self, first + i);
	return 1;
}

void ibvl_open_flow(lua_State *L)
{
	static const luaL_Reg methods[] = {{NULL, NULL}};
	ibvl_register(L, &ibvl_flow_class, methods);
}
