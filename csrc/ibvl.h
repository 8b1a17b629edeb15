/*
 * ibvl.h: what every object file of ibverbs.core shares.
 *
 *   struct my { struct ibvl_obj o; ... };             -- header first
 *   static const struct ibvl_class my_class = { "ibverbs.my", my_destroy };
 *   struct ibvl_guard g; ibvl_guard_begin(&g);        -- then check, parse
 *   struct my *m = ibvl_new(L, &my_class, sizeof *m, &g); -- closed userdata,
 *                                                     -- the guard's end
 *   m->o.ptr = ibv_create_my(parent->ptr, ...);       -- then the C call
 *   ibvl_use(L, -1, 1);                               -- m uses arg 1 (its parent)
 *   struct my *m = ibvl_check(L, 1, &my_class);       -- raises when closed
 *
 * Lifetimes: an object keeps every object it uses alive (user value table)
 * and sits on their dependents lists.  Explicit close of an object that still
 * has dependents returns EBUSY; a forced close (__gc, lua_close) closes the
 * dependents first.  See object.c.
 */
#ifndef IBVL_H
#define IBVL_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <lauxlib.h>
#include <lua.h>

/* ---- Lua 5.1 (LuaJIT 2.1) compatibility ---------------------------------- */
#if LUA_VERSION_NUM < 502 && !defined(LUA_LJDIR) /* LUA_LJDIR: LuaJIT's luaconf.h */
#error "ibverbs.core needs Lua 5.2 or later (5.4 is tested) or LuaJIT 2.1: plain Lua 5.1 lacks luaL_setfuncs, luaL_testudata, ..."
#endif
#if LUA_VERSION_NUM < 502
#define lua_rawlen(L, i) lua_objlen(L, (i))
#define lua_newuserdatauv(L, sz, nuv) lua_newuserdata(L, (sz))
#define lua_setiuservalue(L, i, n) lua_setfenv(L, (i))
static inline int lua_getiuservalue(lua_State *L, int idx, int n)
{
	(void)n;
	lua_getfenv(L, idx);
	return LUA_TTABLE;
}
#define lua_absindex(L, i) \
	((i) > 0 || (i) <= LUA_REGISTRYINDEX ? (i) : lua_gettop(L) + (i) + 1)
static inline void ibvl_rawsetp(lua_State *L, int idx, const void *p)
{
	idx = lua_absindex(L, idx);
	lua_pushlightuserdata(L, (void *)p);
	lua_insert(L, -2);
	lua_rawset(L, idx);
}
#define lua_rawsetp(L, i, p) ibvl_rawsetp(L, (i), (p))
int ibvl_isinteger(lua_State *L, int idx);
#define lua_isinteger(L, i) ibvl_isinteger(L, (i))
#endif

/* ---- objects (object.c) ------------------------------------------------- */
#define IBVL_MAXREFS 7

struct ibvl_obj;

/* Destroys the C object; returns 0 or an errno value. */
typedef int (*ibvl_destroy_fn)(struct ibvl_obj *o, void *ptr);

struct ibvl_class {
	const char *name;        /* metatable name, "ibverbs.qp" */
	ibvl_destroy_fn destroy; /* called with o->ptr already NULL */
	const char *destroy_call; /* for messages: "ibv_destroy_qp" */
	/* optional: pushes the value of a read-only field (mr.lkey), or returns 0 */
	int (*field)(lua_State *L, void *obj, const char *key);
	/* hot types (qp, cq): non-NULL when each object gets its own metatable
	 * whose __index is a plain table of the methods (a method call runs no C
	 * __index); the methods listed here are the object's own closures, the
	 * object as upvalue 1 (ibvl_self), so a call on it needs no type check
	 * (unless a script replaced one in the type's methods: its version stays) */
	const luaL_Reg *per_object;
};

struct ibvl_link {
	struct ibvl_obj *user; /* the object that uses (depends on) the owner */
	struct ibvl_link *prev, *next;
};

struct ibvl_obj {
	void *ptr; /* the C object; NULL when closed */
	const struct ibvl_class *cls;
	struct ibvl_link deps; /* sentinel: the objects that use this one */
	int nrefs;
	struct ibvl_obj *refs[IBVL_MAXREFS];  /* the objects this one uses */
	struct ibvl_link links[IBVL_MAXREFS]; /* our node on their deps lists */
	ibvl_destroy_fn detach; /* set when the host lent the object (embed.c): called
	                           instead of cls->destroy, it leaves the C object alone */
};

void ibvl_register(lua_State *L, const struct ibvl_class *cls, const luaL_Reg *methods);
void ibvl_add_methods(lua_State *L, const char *tname, const luaL_Reg *methods);
void ibvl_register_plain(lua_State *L, const char *tname, const luaL_Reg *methods,
                         lua_CFunction len);
void ibvl_use(lua_State *L, int objidx, int usedidx);
int ibvl_gc_hold(lua_State *L);               /* no finalizer runs until the release */
void ibvl_gc_release(lua_State *L, int held);
void ibvl_keep(lua_State *L, int objidx, int validx);
/* Keeps the value at validx alive as long as the object at objidx, under key
 * (one value per key): a full userdata kept so is known by its address. */
void ibvl_anchor(lua_State *L, int objidx, const void *key, int validx);
int ibvl_push_ref(lua_State *L, int objidx, int n);
void ibvl_swap_use(lua_State *L, int objidx, int slot, int newidx);
void ibvl_unuse(lua_State *L, int objidx, int slot);
void *ibvl_check(lua_State *L, int idx, const struct ibvl_class *cls);
/* The object a hot method (ibvl_class.per_object) was called on, when argument 1 is
 * the very userdata its closure holds: the closure keeps that object alive, so
 * its address names it and no metatable needs a look.  NULL otherwise (the
 * method called on another object, or through the class's table): check it. */
static inline void *ibvl_self(lua_State *L)
{
	void *self = lua_touserdata(L, lua_upvalueindex(1));
	return self != NULL && lua_touserdata(L, 1) == self && lua_type(L, 1) == LUA_TUSERDATA
	       ? self : NULL;
}
void *ibvl_test_class(lua_State *L, int idx, const struct ibvl_class *cls); /* open or not */
/* Type checks by pointer: ibvl_register keeps each metatable in the registry
 * under its class's address too, and ibvl_type_key under any key for the
 * plain types (wc arrays, WR lists); a check compares tables, no name hashed. */
void ibvl_type_key(lua_State *L, const char *tname, const void *key);
void *ibvl_test_key(lua_State *L, int idx, const void *key);

/* Brackets a call's reading of its arguments: the end raises when an object
 * checked since the begin was closed meanwhile (object.c). */
struct ibvl_guard {
	unsigned long long closes, start, floor;
};
void ibvl_guard_begin(struct ibvl_guard *g);
/* A new, closed object of cls at the top of the stack; ends g (object.c). */
void *ibvl_new(lua_State *L, const struct ibvl_class *cls, size_t size, struct ibvl_guard *g);
void ibvl_guard_end(lua_State *L, struct ibvl_guard *g);
void ibvl_guard_log(struct ibvl_obj *o);
void ibvl_guard_closed(void);
/* Objects closed so far, counted across every Lua state and thread: a value
 * that has not moved since a check says nothing checked then was closed. */
extern _Atomic unsigned long long ibvl_closes;
static inline unsigned long long ibvl_guard_closes(void)
{
	return atomic_load_explicit(&ibvl_closes, memory_order_relaxed);
}
void *ibvl_test(lua_State *L, int idx, const struct ibvl_class *cls);
void *ibvl_opt(lua_State *L, int idx, const struct ibvl_class *cls);
int ibvl_ndeps(const struct ibvl_obj *o);
int ibvl_close(lua_State *L, struct ibvl_obj *o);
void ibvl_close_forced(struct ibvl_obj *o);
void ibvl_track(lua_State *L, int idx);
int ibvl_push_tracked(lua_State *L, const void *cptr);

/* ---- helpers (helpers.c) ------------------------------------------------ */
struct ibvl_enum {
	const char *name;
	lua_Integer value;
};

int ibvl_fail(lua_State *L, const char *call, int err);
int ibvl_result(lua_State *L, const char *call, int rc);
int ibvl_fail_hint(lua_State *L, const char *call, int err, const char *hint);
int ibvl_argerror(lua_State *L, int arg, const char *argname, const char *fmt, ...);
int ibvl_error(lua_State *L, const char *fmt, ...); /* "where: fn: path: msg" */
int ibvl_path_push(const char *name, int index);    /* "#WR", 2 reads "WR 2" */
void ibvl_path_pop(int saved);
void ibvl_path_reset(void);
int ibvl_getfield(lua_State *L, int idx, const char *field); /* raw */
int ibvl_tointeger(lua_State *L, int idx, lua_Integer *v);

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
/* Objects in argument tables: ibvl_obj_field_keep leaves the value pushed
 * (it keeps the object for the caller); ibvl_obj_field pops it, and so reads
 * only private copies (ibvl_copy_arg), which hold what they name.  A copy
 * reads every value of the table at idx once, raw, tables depth levels down
 * copied too; it is pushed, and its index returned. */
void *ibvl_obj_field(lua_State *L, int idx, const char *field, const struct ibvl_class *cls);
void *ibvl_obj_field_keep(lua_State *L, int idx, const char *field,
                          const struct ibvl_class *cls); /* the value stays pushed */
int ibvl_copy_arg(lua_State *L, int idx, int depth);
int ibvl_is_copy(lua_State *L, int idx);
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
void ibvl_set_bool(lua_State *L, const char *field, int v);
void ibvl_set_enum(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v);
void ibvl_set_flags(lua_State *L, const char *field, const struct ibvl_enum *e, lua_Integer v);
int ibvl_wait_fd(lua_State *L, int fd, int timeout_arg, const char *call);

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

/* ---- bounded, interruptible waits (wait.c) ------------------------------- */
struct ibvl_sigint {
	struct sigaction old; /* the handler in place before ibvl_sigint_begin */
	int installed;
};

void ibvl_sigint_begin(struct ibvl_sigint *s);
int ibvl_sigint_pending(void);
int ibvl_sigint_end(struct ibvl_sigint *s);
int ibvl_interrupted(lua_State *L, const char *call);
double ibvl_opt_timeout(lua_State *L, int arg, double def);
double ibvl_timeout_field(lua_State *L, int idx, const char *field, double def);
int ibvl_poll_fd(int fd, double timeout);
struct ibvl_cm_id;
void ibvl_cm_sync_prepare(struct ibvl_cm_id *id);
int ibvl_cm_sync_result(lua_State *L, struct ibvl_cm_id *id, const char *call, int rc,
                        double timeout);
#define IBVL_CM_SYNC_TIMEOUT 30.0 /* seconds: default of the synchronous rdma_cm calls */

/* ---- memory of buffers and MRs (buffer.c) ------------------------------- */
int ibvl_mem_read(lua_State *L, const char *base, size_t size, int arg);
int ibvl_mem_write(lua_State *L, char *base, size_t size, int arg);
int ibvl_mem_u64(lua_State *L, char *base, size_t size, int arg);
void *ibvl_alloc_pages(size_t size);
size_t ibvl_buffer_size(const struct ibvl_obj *buffer);

/* ---- enum and flag tables (enums.c) ------------------------------------- */
extern const struct ibvl_enum ibvl_node_types[], ibvl_transports[], ibvl_port_states[],
	ibvl_mtus[], ibvl_link_layers[], ibvl_event_types[], ibvl_access_flags[],
	ibvl_qp_types[], ibvl_qp_states[], ibvl_mig_states[], ibvl_wc_statuses[],
	ibvl_wc_opcodes[], ibvl_wc_flags[], ibvl_wr_opcodes[], ibvl_send_flags[],
	ibvl_mw_types[], ibvl_atomic_caps[], ibvl_device_caps[], ibvl_port_caps[],
	ibvl_qp_create_flags[], ibvl_send_ops_flags[],
	ibvl_srq_types[], ibvl_gid_types[], ibvl_wc_ex_flags[], ibvl_qp_attr_masks[],
	ibvl_cm_event_types[], ibvl_cm_port_spaces[], ibvl_cm_join_flags[], ibvl_cm_families[],
	ibvl_cm_rai_flags[];
extern const struct ibvl_enum ibvl_rates[], ibvl_fork_statuses[];

/* ---- object files: each registers its metatable and its constructors ---- */
void ibvl_open_device(lua_State *L);
void ibvl_open_context(lua_State *L);
void ibvl_open_pd(lua_State *L);
void ibvl_open_mr(lua_State *L);
void ibvl_open_buffer(lua_State *L);
void ibvl_open_constants(lua_State *L);
void ibvl_open_errno(lua_State *L); /* errno.c: ibv.errno, ibv.strerror */
void ibvl_open_ffi(lua_State *L); /* last: core.rawptr, core.rawmem */

void ibvl_open_channel(lua_State *L);
void ibvl_open_cq(lua_State *L);
void ibvl_open_wc(lua_State *L);
void ibvl_open_qp(lua_State *L);
void ibvl_open_wr(lua_State *L);
void ibvl_open_ah(lua_State *L);
void ibvl_open_mw(lua_State *L);
void ibvl_open_srq(lua_State *L);
void ibvl_open_xrcd(lua_State *L);
void ibvl_open_loop(lua_State *L);
void ibvl_open_batch(lua_State *L);
void ibvl_open_qp_ex(lua_State *L);
void ibvl_open_names(lua_State *L);        /* names.c: the *_str helpers, rates */
void ibvl_open_context_more(lua_State *L); /* context.c: fds, P_Key index, clock, L2 */
void ibvl_open_pd_import(lua_State *L);    /* pd.c: ctx:import_pd */
void ibvl_open_mr_import(lua_State *L);    /* mr.c: pd:import_mr */
void ibvl_open_qp_mcast(lua_State *L);     /* qp.c: attach_mcast, detach_mcast */
void ibvl_push_qp_attr_mask(lua_State *L, const struct ibv_qp_attr *a, int mask);

extern const struct ibvl_class ibvl_context_class, ibvl_pd_class, ibvl_mr_class,
	ibvl_buffer_class, ibvl_channel_class, ibvl_cq_class, ibvl_qp_class, ibvl_srq_class,
	ibvl_ah_class, ibvl_mw_class, ibvl_xrcd_class;

/* ---- completion queues (cq.c) and wc arrays (wc.c) ---------------------- */
struct ibvl_cq {
	struct ibvl_obj o;       /* o.ptr: struct ibv_cq * */
	struct ibv_cq_ex *cqx;   /* non-NULL when made by ibv_create_cq_ex */
	unsigned int unacked;    /* completion events not yet acknowledged */
	uint64_t wc_flags;
	void *last_wcs;          /* the wc array polled into last, anchored (ibvl_anchor) */
};

struct ibvl_wc_array {
	int n;     /* capacity */
	int count; /* filled by the last poll */
	struct ibv_wc wc[];
};

#define IBVL_WC_ARRAY "ibverbs.wc_array"
int ibvl_cq_poll_ex(struct ibvl_cq *cq, int n, struct ibv_wc *wc);

/* Polls up to n completions into wc (a cq_ex too); the count or -errno. */
static inline int ibvl_cq_poll(struct ibvl_cq *cq, int n, struct ibv_wc *wc)
{
	return cq->cqx == NULL ? ibv_poll_cq(cq->o.ptr, n, wc) : ibvl_cq_poll_ex(cq, n, wc);
}

/* Pushes the 1-based index of the first unsuccessful completion of wc[0..n),
 * or nil: a loop checks a whole poll at once. */
static inline void ibvl_push_first_bad(lua_State *L, const struct ibv_wc *wc, int n)
{
	for (int i = 0; i < n; i++) {
		if (wc[i].status != IBV_WC_SUCCESS) {
			lua_pushinteger(L, i + 1);
			return;
		}
	}
	lua_pushnil(L);
}
void ibvl_push_wc(lua_State *L, const struct ibv_wc *wc);
struct ibvl_wc_array *ibvl_check_wcs(lua_State *L, int arg);

/* ---- queue pairs (qp.c) ------------------------------------------------- */
struct ibvl_qp {
	struct ibvl_obj o;           /* o.ptr: struct ibv_qp * */
	struct ibv_qp_ex *qpx;       /* non-NULL when created with send_ops_flags */
	struct rdma_cm_id *cm_id;    /* set when rdma_create_qp made it: rdma_destroy_qp */
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data;
	uint64_t send_ops_flags;     /* what qp:wr_post may build (qp_ex.c) */
	void *last_list[2];          /* the prepared recv/send lists posted last, anchored */
#define IBVL_KNOWN_ATTRS 4
	const void *known_attr[IBVL_KNOWN_ATTRS]; /* ibv.qp_attr sets qp:modify took, anchored */
	unsigned next_attr;          /* the known_attr slot the next new one takes */
};

struct ibvl_qp *ibvl_check_qp(lua_State *L, int arg);
void ibvl_qp_adopt(lua_State *L, int used_idx, int pd_idx, const struct ibv_qp_init_attr_ex *a);
int ibvl_parse_qp_attr(lua_State *L, int idx, struct ibv_qp_attr *a);
const char *ibvl_modify_hint(lua_State *L, const struct ibv_qp *q, const struct ibv_qp_attr *a,
                             int mask);
#define IBVL_QP_USED 6 /* pd, send_cq, recv_cq, srq, xrcd, rwq_ind_tbl */
int ibvl_parse_qp_init_attr(lua_State *L, int idx, struct ibv_qp_init_attr_ex *a);
void ibvl_push_qp_cap(lua_State *L, const struct ibv_qp_cap *cap);

/* ---- address handles (ah.c) ------------------------------------------- */
void ibvl_parse_ah_attr(lua_State *L, int idx, struct ibv_ah_attr *ah);
void ibvl_push_ah_attr(lua_State *L, const struct ibv_ah_attr *ah);
void ibvl_push_ah_attr_at(lua_State *L, const void *ah); /* an IBVL_F_PUSH */

/* ---- shared receive queues (srq.c) -------------------------------------- */
struct ibvl_srq {
	struct ibvl_obj o;        /* o.ptr: struct ibv_srq * */
	struct rdma_cm_id *cm_id; /* set when rdma_create_srq made it: rdma_destroy_srq */
	uint32_t max_wr, max_sge; /* granted */
	int srq_type;             /* enum ibv_srq_type */
	uint32_t srq_num;         /* XRC SRQs */
};

/* Finishes the SRQ userdata at the top of the stack (made with ibvl_new and
 * given its ptr, and cm_id where rdma_create_srq made it, and its ibvl_use of
 * the objects it uses): records the granted sizes and tracks it for events. */
void ibvl_srq_adopt(lua_State *L, const struct ibv_srq_attr *granted, int srq_type);

/* ---- XRC domains (xrcd.c) ----------------------------------------------- */
int ibvl_xrc_errno(struct ibv_context *ctx, int err);

/* ---- work requests (wr.c) ----------------------------------------------- */
/* What an SGE of a WR was made from, checked again when it is posted. */
struct ibvl_sge_src {
	struct ibvl_obj *mr; /* an SGE given with mr= */
	const char *data;    /* the 'inline' string (kept alive by the list) */
	size_t size;
	int held;            /* a prepared list's SGE set by set/fill (wr.c) */
};

struct ibvl_wr_slot {
	struct ibvl_obj *ah; /* objects a prepared WR points to, checked at post time */
	struct ibvl_obj *mw;
	struct ibvl_obj *mr; /* a bind_mw WR's bind_info.mr */
	const void *hdr;     /* a tso WR's header, hdr_sz bytes */
	int opcode;          /* the WR's opcode, as set: what its union holds */
	int hdr_sz;
};

int ibvl_parse_sges(lua_State *L, int idx, struct ibv_sge *sge, struct ibvl_sge_src *src,
                    int max_sge);
void ibvl_parse_recv_wr(lua_State *L, int idx, struct ibv_recv_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge);
void ibvl_parse_send_wr(lua_State *L, int idx, struct ibv_send_wr *wr, struct ibv_sge *sge,
                        struct ibvl_sge_src *src, int max_sge, struct ibvl_wr_slot *slot);
struct ibvl_obj *ibvl_parse_bind_info(lua_State *L, int idx, struct ibv_mw_bind_info *bi);

struct ibvl_chain; /* post.h */
struct ibv_recv_wr *ibvl_recv_chain(lua_State *L, int arg, struct ibvl_chain *c);
struct ibv_send_wr *ibvl_send_chain(lua_State *L, int arg, struct ibvl_chain *c);
void *ibvl_list_chain(lua_State *L, void *list, int arg, struct ibvl_chain *c); /* known list */
void *ibvl_range_chain(lua_State *L, void *list, int first, int count, struct ibvl_chain *c);
void ibvl_chain_check(lua_State *L, const struct ibvl_chain *c); /* its list still sound */
void *ibvl_test_list(lua_State *L, int idx, int send, int *n);
const char *ibvl_no_queue(const struct ibv_qp *q, int send); /* qp.c: why q cannot post, or NULL */

void *ibvl_wr_list(lua_State *L, int idx, int send, int *n);
void *ibvl_wr_list_mem(lua_State *L, int idx, int *send, int *n, struct ibv_sge **sge,
                       int *nsge);

/* ---- rdma_cm (cm_base.c, cm_addr.c, cm_id.c, cm_channel.c, cm_qp.c) ------- */
struct rdma_cm_id;
struct rdma_cm_event;
struct sockaddr;
struct sockaddr_storage;

struct ibvl_cm_id {
	struct ibvl_obj o;  /* o.ptr: struct rdma_cm_id * */
	int ep;             /* made by rdma_create_ep: destroyed with rdma_destroy_ep */
	int chan_slot;      /* which used object is its event channel; -1 in sync mode */
	int pd_slot;        /* which used object is the PD its QPs were made on; -1: none */
	size_t connect_len; /* private data rdma_create_ep prepends to rdma_connect's */
	/* what the cm made for the id, adopted as ordinary userdata the id keeps
	 * (user value) and closes with it; librdmacm's pointers to all but the QP
	 * and SRQ are cleared, so rdma_destroy_qp/srq/ep never free them twice */
	struct ibvl_obj *owned[6]; /* qp, srq, send_cq, recv_cq, send/recv channels */
	/* a copy of the connection request that made it (rdma_get_request), for
	 * id.event: the request itself is acknowledged at once, for until it is,
	 * rdma_destroy_id of the listener waits (a finalizer must never block) */
	struct ibvl_cm_request *request;
};
struct ibvl_cm_request; /* cm_base.c */
struct ibvl_cm_request *ibvl_cm_take_request(struct rdma_cm_event *e);
void ibvl_cm_push_request(lua_State *L, const struct ibvl_cm_request *r);

/* cm_base.c: what the cm files share */
#define IBVL_CM_DATA_MAX 256 /* private data an event carries, at most */
void ibvl_cm_functions(lua_State *L, const luaL_Reg *fns);
int ibvl_cm_wait(lua_State *L, int fd, int timeout_arg, const char *call);
int ibvl_cm_copy_event(struct rdma_cm_event *c, uint8_t *data, const struct rdma_cm_event *e);
void ibvl_cm_push_copy(lua_State *L, const struct rdma_cm_event *c, int kind, int new_id_idx);

void ibvl_open_cm_channel(lua_State *L);
void ibvl_open_cm_id(lua_State *L);
void ibvl_open_cm_addr(lua_State *L);
struct ibvl_cm_id *ibvl_cm_new_id(lua_State *L, struct ibvl_guard *g);
void ibvl_cm_adopt_id(lua_State *L, int idx, struct rdma_cm_id *cid, int chan_idx);
void ibvl_cm_adopt_owned(lua_State *L, int idx, int pd_from_idx);
void ibvl_cm_push_context(lua_State *L, struct ibv_context *ctx);
void ibvl_open_cm_qp(lua_State *L);
void ibvl_open_cm_id_more(lua_State *L);      /* cm_id.c: init_qp_attr, notify, ECE, devices */
void ibvl_open_cm_qp_vectored(lua_State *L);  /* cm_qp.c: post_sendv ... */
void ibvl_open_cm_event_str(lua_State *L);    /* cm_channel.c: cm.event_str */
void ibvl_cm_need_device(lua_State *L, const struct rdma_cm_id *cid);
void ibvl_cm_use_pd(lua_State *L, int idx, int pd_idx);
void ibvl_check_sockaddr(lua_State *L, int arg, struct sockaddr_storage *ss);
void ibvl_push_sockaddr(lua_State *L, const struct sockaddr *sa);

/* ---- the embedding API (embed.c; its public header is ibverbs.h) ---------- */
extern const size_t ibvl_mr_size; /* mr.c: an MR userdata's size */

extern const struct ibvl_class ibvl_cm_channel_class, ibvl_cm_id_class, ibvl_cm_addrinfo_class;

/* ---- the rest of the verbs objects (dm.c, td.c, wq.c, rwq_ind_tbl.c,
 * flow.c, counters.c) and what they add to older types ---------------------- */
extern const struct ibvl_class ibvl_dev_mr_class, ibvl_dm_class, ibvl_td_class,
	ibvl_wq_class, ibvl_rwq_ind_tbl_class, ibvl_flow_class, ibvl_counters_class;
void *ibvl_dev_mr_new(lua_State *L, struct ibvl_guard *g); /* mr.c: an ibverbs.dev_mr, closed */
void ibvl_open_dm(lua_State *L);
void ibvl_open_td(lua_State *L);
void ibvl_open_wq(lua_State *L);
void ibvl_open_rwq_ind_tbl(lua_State *L);
void ibvl_open_flow(lua_State *L);
void ibvl_open_counters(lua_State *L);
void ibvl_open_cq_more(lua_State *L);  /* cq.c: modify, poll_ex */
void ibvl_open_qp_more(lua_State *L);  /* qp.c: ece, rate limit, data in order */
void ibvl_open_srq_more(lua_State *L); /* srq.c: post_srq_ops */
void ibvl_parse_tso(lua_State *L, int idx, struct ibv_send_wr *wr); /* wr.c */
extern const struct ibvl_enum ibvl_wq_states[], ibvl_wq_flags[], ibvl_counter_descs[];

#endif
