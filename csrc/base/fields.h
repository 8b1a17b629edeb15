/*
 * fields.h: C structs to Lua tables, driven by descriptor tables (fields.c).
 * Above args.h (enum tables).
 */
#ifndef IBVL_FIELDS_H
#define IBVL_FIELDS_H

#include <stddef.h>

#include "base/args.h"

/* ---- struct-to-table descriptors (fields.c) ------------------------------ */
enum ibvl_field_kind {
	IBVL_F_INT,   /* an integer of the member's size and signedness */
	IBVL_F_U64,   /* a 64-bit value (ibvl_push_u64) */
	IBVL_F_BOOL,  /* an integer, as a boolean */
	IBVL_F_STR,   /* a NUL-terminated char array */
	IBVL_F_ENUM,  /* a name from .e (an integer when unknown) */
	IBVL_F_FLAGS, /* an array of names from .e */
	IBVL_F_MTU,   /* an enum ibv_mtu, as its byte count */
	IBVL_F_GUID,  /* a __be64 GUID, "xxxx:xxxx:xxxx:xxxx" */
	IBVL_F_GID,   /* a union ibv_gid, as an IPv6 address */
	IBVL_F_TABLE, /* a nested struct: a table of the fields in .sub */
	IBVL_F_PUSH,  /* anything else: .push(L, member) pushes it */
};

struct ibvl_field {
	const char *name; /* the Lua key */
	unsigned short off, size;
	unsigned char is_signed, kind;
	const struct ibvl_enum *e;
	const struct ibvl_field *sub;
	void (*push)(lua_State *L, const void *member);
};

#define IBVL_IS_SIGNED(x) _Generic((x), signed char: 1, short: 1, int: 1, long: 1, \
	long long: 1, default: 0)
/* the member m of struct type T under the key name; aux: the enum table, the
 * sub descriptor or the push function, as kind needs */
#define IBVL_FIELD_AS(T, name, m, kind, aux) {name, offsetof(T, m), \
	sizeof(((T *)0)->m), IBVL_IS_SIGNED(((T *)0)->m), kind, IBVL_AUX_##kind(aux)}
#define IBVL_FIELD(T, m, kind, aux) IBVL_FIELD_AS(T, #m, m, kind, aux)
#define IBVL_AUX_IBVL_F_INT(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_U64(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_BOOL(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_STR(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_MTU(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_GUID(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_GID(a) NULL, NULL, NULL
#define IBVL_AUX_IBVL_F_ENUM(a) a, NULL, NULL
#define IBVL_AUX_IBVL_F_FLAGS(a) a, NULL, NULL
#define IBVL_AUX_IBVL_F_TABLE(a) NULL, a, NULL
#define IBVL_AUX_IBVL_F_PUSH(a) NULL, NULL, a
#define IBVL_FIELDS_END {NULL, 0, 0, 0, 0, NULL, NULL, NULL}

void ibvl_set_fields(lua_State *L, const void *base, const struct ibvl_field *fs);
void ibvl_push_fields(lua_State *L, const void *base, const struct ibvl_field *fs);

#endif
