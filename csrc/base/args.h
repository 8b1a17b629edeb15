/*
 * args.h: reading arguments and argument tables, and writing results:
 * strict field readers (an unknown key raises), range and enum checks, name
 * tables, private copies of argument tables, output tables.
 *
 *   ibvl_check_fields(L, 2, "attr", allowed);   -- unknown key raises
 *   n = ibvl_int_field(L, 2, "max_wr", 16, 1, INT32_MAX);
 *   t = ibvl_enum_field(L, 2, "qp_type", ibvl_qp_types, -1);
 *
 * Above err.h; below the object layer (object.h).
 */
#ifndef IBVL_ARGS_H
#define IBVL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "base/compat.h"

struct ibvl_enum {
	const char *name;
	lua_Integer value;
};
/* A name the rdma-core headers of this build lacked (tools/configure): kept in
 * its table so that using it says which release brings it.  Its value is no
 * verbs value: lookups refuse it, listings and constants leave it out. */
#define IBVL_ABSENT_BASE ((lua_Integer)-0x7fff0000)
#define IBVL_ENUM_ABSENT(name, since) {name, IBVL_ABSENT_BASE + (since)}
static inline int ibvl_enum_absent(const struct ibvl_enum *e)
{
	return e->value >= IBVL_ABSENT_BASE && e->value < IBVL_ABSENT_BASE + 1000;
}

int ibvl_getfield(lua_State *L, int idx, const char *field); /* raw */
int ibvl_tointeger(lua_State *L, int idx, lua_Integer *v);
/* A private copy of the table at idx: every value read once, raw, tables
 * depth levels down copied too; pushed, its index returned. */
int ibvl_copy_arg(lua_State *L, int idx, int depth);
int ibvl_is_copy(lua_State *L, int idx);

void ibvl_check_fields(lua_State *L, int idx, const char *argname, const char *const *allowed);
int ibvl_has_field(lua_State *L, int idx, const char *field);
lua_Integer ibvl_int_field(lua_State *L, int idx, const char *field, lua_Integer def,
                           lua_Integer min, lua_Integer max);
uint64_t ibvl_u64_field(lua_State *L, int idx, const char *field, uint64_t def);
int ibvl_bool_field(lua_State *L, int idx, const char *field, int def);
lua_Integer ibvl_enum_field(lua_State *L, int idx, const char *field,
                            const struct ibvl_enum *e, lua_Integer def);
lua_Integer ibvl_flags_field(lua_State *L, int idx, const char *field,
                             const struct ibvl_enum *e, lua_Integer def);
const char *ibvl_str_field(lua_State *L, int idx, const char *field, size_t *len);
lua_Integer ibvl_int_value(lua_State *L, int idx, const char *field, lua_Integer min,
                           lua_Integer max);
lua_Integer ibvl_enum_value(lua_State *L, int idx, const char *field, const struct ibvl_enum *e);
lua_Integer ibvl_flags_value(lua_State *L, int idx, const char *field, const struct ibvl_enum *e);
void ibvl_gid_field(lua_State *L, int idx, const char *field, union ibv_gid *gid);

lua_Integer ibvl_check_range(lua_State *L, int arg, lua_Integer min, lua_Integer max);
lua_Integer ibvl_opt_range(lua_State *L, int arg, lua_Integer def, lua_Integer min,
                           lua_Integer max);
uint64_t ibvl_check_u64(lua_State *L, int arg);
const char *ibvl_check_lstring(lua_State *L, int arg, size_t *len); /* no conversion */
const char *ibvl_opt_lstring(lua_State *L, int arg, size_t *len);
lua_Integer ibvl_check_enum(lua_State *L, int arg, const struct ibvl_enum *e);
lua_Integer ibvl_check_enum_or_int(lua_State *L, int arg, const struct ibvl_enum *e);
lua_Integer ibvl_opt_enum(lua_State *L, int arg, const struct ibvl_enum *e, lua_Integer def);
lua_Integer ibvl_check_flags(lua_State *L, int arg, const struct ibvl_enum *e);
lua_Integer ibvl_opt_flags(lua_State *L, int arg, const struct ibvl_enum *e, lua_Integer def);
void ibvl_check_gid(lua_State *L, int arg, union ibv_gid *gid);

void ibvl_push_enum(lua_State *L, const struct ibvl_enum *e, lua_Integer value);
const char *ibvl_enum_name(const struct ibvl_enum *e, lua_Integer value);
void ibvl_push_flags(lua_State *L, const struct ibvl_enum *e, lua_Integer value);
void ibvl_push_gid(lua_State *L, const union ibv_gid *gid);
void ibvl_push_guid(lua_State *L, __be64 guid);
void ibvl_push_u64(lua_State *L, uint64_t v);
int ibvl_out_table(lua_State *L, int arg, int nrec);
void ibvl_set_int(lua_State *L, const char *field, lua_Integer v);
void ibvl_set_u64(lua_State *L, const char *field, uint64_t v);
void ibvl_set_str(lua_State *L, const char *field, const char *v);
void ibvl_set_enum(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v);

#endif
