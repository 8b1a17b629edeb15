/*
 * fields.c: C structs to Lua tables, driven by a descriptor table.
 *
 *   static const struct ibvl_field port_fields[] = {
 *       IBVL_FIELD(struct ibv_port_attr, state, IBVL_F_ENUM, ibvl_port_states),
 *       IBVL_FIELD(struct ibv_port_attr, active_mtu, IBVL_F_MTU, NULL),
 *       IBVL_FIELD(struct ibv_port_attr, lid, IBVL_F_INT, NULL),
 *       IBVL_FIELD_AS(struct ibv_device_attr_ex, "max_tso", tso_caps.max_tso, IBVL_F_INT, NULL),
 *       IBVL_FIELDS_END,
 *   };
 *   ibvl_set_fields(L, &attr, port_fields);   -- into the table at the top
 *
 * Integers are read with the member's own size and signedness; IBVL_F_TABLE
 * makes a nested table from the descriptor in .sub, IBVL_F_PUSH calls .push.
 * For queries and events, not for per-completion code (wc_array.c's accessors read
 * their field directly).
 */
#include <string.h>

#include "base/args.h"
#include "base/fields.h"

static lua_Integer read_int(const char *p, const struct ibvl_field *f)
{
	switch (f->size) {
	case 1: {
		uint8_t v;
		memcpy(&v, p, 1);
		return f->is_signed ? (lua_Integer)(int8_t)v : (lua_Integer)v;
	}
	case 2: {
		uint16_t v;
		memcpy(&v, p, 2);
		return f->is_signed ? (lua_Integer)(int16_t)v : (lua_Integer)v;
	}
	case 4: {
		uint32_t v;
		memcpy(&v, p, 4);
		return f->is_signed ? (lua_Integer)(int32_t)v : (lua_Integer)v;
	}
	default: {
		uint64_t v;
		memcpy(&v, p, 8);
		return (lua_Integer)v;
	}
	}
}

/* path_mtu, active_mtu ...: the byte count, 0 for a value outside 256..4096 */
static lua_Integer mtu_bytes(lua_Integer m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

static void push_field(lua_State *L, const void *base, const struct ibvl_field *f)
{
	const char *p = (const char *)base + f->off;
	switch (f->kind) {
	case IBVL_F_INT: lua_pushinteger(L, read_int(p, f)); break;
	case IBVL_F_U64: ibvl_push_u64(L, (uint64_t)read_int(p, f)); break;
	case IBVL_F_BOOL: lua_pushboolean(L, read_int(p, f) != 0); break;
	case IBVL_F_STR: lua_pushstring(L, p); break;
	case IBVL_F_ENUM: ibvl_push_enum(L, f->e, read_int(p, f)); break;
	case IBVL_F_FLAGS: ibvl_push_flags(L, f->e, read_int(p, f)); break;
	case IBVL_F_MTU: lua_pushinteger(L, mtu_bytes(read_int(p, f))); break;
	case IBVL_F_GUID: {
		__be64 g;
		memcpy(&g, p, sizeof g);
		ibvl_push_guid(L, g);
		break;
	}
	case IBVL_F_GID: ibvl_push_gid(L, (const union ibv_gid *)(const void *)p); break;
	case IBVL_F_TABLE: ibvl_push_fields(L, p, f->sub); break;
	default: f->push(L, p); break;
	}
}

/* Sets every field of base that fs describes in the table at the top. */
void ibvl_set_fields(lua_State *L, const void *base, const struct ibvl_field *fs)
{
	for (const struct ibvl_field *f = fs; f->name != NULL; f++) {
		push_field(L, base, f);
		lua_setfield(L, -2, f->name);
	}
}

/* Pushes a new table with every field of base that fs describes. */
void ibvl_push_fields(lua_State *L, const void *base, const struct ibvl_field *fs)
{
	int n = 0;
	while (fs[n].name != NULL)
		n++;
	lua_createtable(L, 0, n);
	ibvl_set_fields(L, base, fs);
}
