/*
 * context.c: an open device (ibv_context): queries and async events.
 *
 *   local ctx <close> = assert(ibv.open("rxe0"))
 *   ctx:query_device().max_qp, ctx:query_device_ex().device_cap_flags_ex
 *   local p = ctx:query_port(1); print(p.state, p.active_mtu)   -- "active" 1024
 *   ctx:query_gid(1, 1), ctx:query_gid_ex(1, 1).gid_type, ctx:query_gid_table()
 *       -- without rdma-core 32's verbs both read the GID types from sysfs
 *   ctx:query_pkey(1, 0)
 *   local ev = ctx:get_async_event(1.0)  -- {type="port_active", port_num=1} or nil on timeout
 *   ctx:async_fd(), ctx:name(), ctx:provider()   -- "rxe", ".../librxe-rdmav34.so"
 *   ctx:cmd_fd(), ctx:num_comp_vectors(), ctx:get_pkey_index(1, 0xffff)
 *   ctx:query_rt_values_ex().raw_clock, ctx:resolve_eth_l2_from_gid(ah_attr)  -- mac, vid
 */
#include <dlfcn.h>
#include <endian.h>
#include <fcntl.h>
#include <net/if.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "verbs/verbs.h"

static int destroy_context(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_close_device(ptr);
}

const struct ibvl_class ibvl_context_class = {"ibverbs.context", destroy_context,
                                              "ibv_close_device", NULL, 0};

static struct ibv_context *check_ctx(lua_State *L)
{
	return ((struct ibvl_obj *)ibvl_check(L, 1, &ibvl_context_class))->ptr;
}

/* Rows of the descriptor tables below (fields.c): I an integer member, IN one
 * under another key, F a member of another kind, FN one under another key. */
#define I(m) IBVL_FIELD(T, m, IBVL_F_INT, NULL)
#define IN(name, m) IBVL_FIELD_AS(T, name, m, IBVL_F_INT, NULL)
#define F(m, kind, aux) IBVL_FIELD(T, m, kind, aux)
#define FN(name, m, kind, aux) IBVL_FIELD_AS(T, name, m, kind, aux)

#define T struct ibv_device_attr
static const struct ibvl_field device_fields[] = {
	F(fw_ver, IBVL_F_STR, NULL), F(node_guid, IBVL_F_GUID, NULL),
	F(sys_image_guid, IBVL_F_GUID, NULL), F(max_mr_size, IBVL_F_U64, NULL),
	F(page_size_cap, IBVL_F_U64, NULL), I(vendor_id), I(vendor_part_id), I(hw_ver),
	I(max_qp), I(max_qp_wr), I(device_cap_flags),
	FN("device_caps", device_cap_flags, IBVL_F_FLAGS, ibvl_device_caps), I(max_sge),
	I(max_sge_rd), I(max_cq), I(max_cqe), I(max_mr), I(max_pd), I(max_qp_rd_atom),
	I(max_ee_rd_atom), I(max_res_rd_atom), I(max_qp_init_rd_atom), I(max_ee_init_rd_atom),
	F(atomic_cap, IBVL_F_ENUM, ibvl_atomic_caps), I(max_ee), I(max_rdd), I(max_mw),
	I(max_raw_ipv6_qp), I(max_raw_ethy_qp), I(max_mcast_grp), I(max_mcast_qp_attach),
	I(max_total_mcast_qp_attach), I(max_ah), I(max_fmr), I(max_map_per_fmr), I(max_srq),
	I(max_srq_wr), I(max_srq_sge), I(max_pkeys), I(local_ca_ack_delay), I(phys_port_cnt),
	IBVL_FIELDS_END,
};
#undef T

static int l_query_device(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	struct ibv_device_attr a;
	int rc = ibv_query_device(ctx, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_device", rc);
	ibvl_out_table(L, 2, 48);
	ibvl_set_fields(L, &a, device_fields);
	return 1;
}

#define T struct ibv_device_attr_ex
static const struct ibvl_field device_ex_fields[] = {
	I(comp_mask), IN("odp_general_caps", odp_caps.general_caps),
	IN("odp_rc_caps", odp_caps.per_transport_caps.rc_odp_caps),
	IN("odp_uc_caps", odp_caps.per_transport_caps.uc_odp_caps),
	IN("odp_ud_caps", odp_caps.per_transport_caps.ud_odp_caps),
	F(completion_timestamp_mask, IBVL_F_U64, NULL), F(hca_core_clock, IBVL_F_U64, NULL),
	F(device_cap_flags_ex, IBVL_F_U64, NULL), IN("max_tso", tso_caps.max_tso),
	IN("tso_supported_qpts", tso_caps.supported_qpts),
	IN("rss_supported_qpts", rss_caps.supported_qpts),
	IN("max_rwq_indirection_tables", rss_caps.max_rwq_indirection_tables),
	IN("max_rwq_indirection_table_size", rss_caps.max_rwq_indirection_table_size),
	FN("rx_hash_fields_mask", rss_caps.rx_hash_fields_mask, IBVL_F_U64, NULL),
	IN("rx_hash_function", rss_caps.rx_hash_function), I(max_wq_type_rq), I(raw_packet_caps),
	IN("max_cq_count", cq_mod_caps.max_cq_count),
	IN("max_cq_period", cq_mod_caps.max_cq_period), F(max_dm_size, IBVL_F_U64, NULL),
	I(xrc_odp_caps),
#if IBVL_HAVE_PHYS_PORT_CNT_EX
	I(phys_port_cnt_ex),
#endif
	IBVL_FIELDS_END,
};
#undef T

static int l_query_device_ex(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	struct ibv_device_attr_ex a = {0};
	int rc = ibv_query_device_ex(ctx, NULL, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_device_ex", rc);
	ibvl_out_table(L, 2, 64);
	ibvl_set_fields(L, &a.orig_attr, device_fields);
	ibvl_set_fields(L, &a, device_ex_fields);
	return 1;
}

#define T struct ibv_port_attr
static const struct ibvl_field port_fields[] = {
	F(state, IBVL_F_ENUM, ibvl_port_states), F(max_mtu, IBVL_F_MTU, NULL),
	F(active_mtu, IBVL_F_MTU, NULL), I(gid_tbl_len), I(port_cap_flags),
	FN("port_caps", port_cap_flags, IBVL_F_FLAGS, ibvl_port_caps), I(max_msg_sz),
	I(bad_pkey_cntr), I(qkey_viol_cntr), I(pkey_tbl_len), I(lid), I(sm_lid), I(lmc),
	I(max_vl_num), I(sm_sl), I(subnet_timeout), I(init_type_reply), I(active_width),
	I(active_speed), I(phys_state), F(link_layer, IBVL_F_ENUM, ibvl_link_layers), I(flags),
	I(port_cap_flags2),
	IBVL_FIELDS_END,
};
#undef T

static int l_query_port(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	int port = (int)ibvl_check_range(L, 2, 1, 255);
	struct ibv_port_attr a;
	int rc = ibv_query_port(ctx, (uint8_t)port, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_port", rc);
	ibvl_out_table(L, 3, 24);
	ibvl_set_fields(L, &a, port_fields);
	return 1;
}

static int l_query_gid(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	int port = (int)ibvl_check_range(L, 2, 1, 255);
	int index = (int)ibvl_check_range(L, 3, 0, INT32_MAX);
	union ibv_gid gid;
	int rc = ibv_query_gid(ctx, (uint8_t)port, index, &gid);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_gid", errno ? errno : EINVAL);
	ibvl_push_gid(L, &gid);
	return 1;
}

#if IBVL_HAVE_GID_EX
#define T struct ibv_gid_entry
static const struct ibvl_field gid_entry_fields[] = {
	F(gid, IBVL_F_GID, NULL), I(gid_index), I(port_num),
	F(gid_type, IBVL_F_ENUM, ibvl_gid_types), I(ndev_ifindex),
	IBVL_FIELDS_END,
};
#undef T

#endif

/* ---- GID entries without the verbs of rdma-core 32 ----------------------------
 * Where _ibv_query_gid_ex and _ibv_query_gid_table are absent (rdma-core 28 to
 * 31, IBVL_RDMA_CORE below 32, headers without them), as rdma-core's own
 * fallback (query_gid_table_fb in libibverbs/cmd_device.c) and its tools
 * before 32 read them: the GID with ibv_query_gid, its type from
 * <ibdev_path>/ports/<port>/gid_attrs/types/<index> ("IB/RoCE v1": "ib" on an
 * InfiniBand port, "roce_v1" on Ethernet; "RoCE v2"), its netdev from
 * .../gid_attrs/ndevs/<index> (its ifindex in this network namespace; 0 when
 * there is none or it is not here).  The same tables as the verbs give. */
struct gid_row {
	union ibv_gid gid;
	uint32_t index, ifindex;
	uint8_t port;
	const char *type;
};

/* The text of <ibdev_path>/ports/<port>/gid_attrs/<dir>/<index>, its newline
 * dropped; -1 with errno when it cannot be read. */
static int read_gid_attr(struct ibv_context *ctx, const char *dir, int port, uint32_t index,
                         char *buf, size_t size)
{
	char path[IBV_SYSFS_PATH_MAX + 64];
	snprintf(path, sizeof path, "%s/ports/%d/gid_attrs/%s/%u", ctx->device->ibdev_path, port,
	         dir, (unsigned)index);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size - 1);
	int err = errno;
	close(fd);
	if (n < 0) {
		errno = err;
		return -1;
	}
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return (int)n;
}

/* One entry: 0, ENODATA for an empty one (a zero GID), or an errno value. */
static int gid_row_sysfs(struct ibv_context *ctx, int port, uint32_t index, int link_layer,
                         struct gid_row *r)
{
	static const union ibv_gid zero;
	char text[IBV_SYSFS_NAME_MAX];
	errno = 0;
	if (ibv_query_gid(ctx, (uint8_t)port, (int)index, &r->gid) != 0)
		return errno ? errno : EINVAL;
	if (memcmp(&r->gid, &zero, sizeof zero) == 0)
		return ENODATA;
	r->port = (uint8_t)port;
	r->index = index;
	r->type = link_layer == IBV_LINK_LAYER_ETHERNET ? "roce_v1" : "ib";
	/* an InfiniBand port's types file cannot be read (EINVAL); a kernel
	 * without gid_attrs (ENOENT) has v1 GIDs only */
	if (read_gid_attr(ctx, "types", port, index, text, sizeof text) < 0) {
		if (errno != EINVAL && errno != ENOENT)
			return errno;
	} else if (strcmp(text, "RoCE v2") == 0) {
		r->type = "roce_v2";
	} else if (strcmp(text, "IB/RoCE v1") != 0) {
		return EPROTO; /* a type this code does not know */
	}
	r->ifindex = 0;
	if (read_gid_attr(ctx, "ndevs", port, index, text, sizeof text) > 0)
		r->ifindex = if_nametoindex(text);
	return 0;
}

static void push_gid_row(lua_State *L, const struct gid_row *r)
{
	lua_createtable(L, 0, 5);
	ibvl_push_gid(L, &r->gid);
	lua_setfield(L, -2, "gid");
	ibvl_set_int(L, "gid_index", r->index);
	ibvl_set_int(L, "port_num", r->port);
	ibvl_set_str(L, "gid_type", r->type);
	ibvl_set_int(L, "ndev_ifindex", r->ifindex);
}

static int port_link_layer(struct ibv_context *ctx, int port, int *gid_tbl_len)
{
	struct ibv_port_attr pa;
	int rc = ibv_query_port(ctx, (uint8_t)port, &pa);
	if (rc != 0)
		return -rc;
	if (gid_tbl_len != NULL)
		*gid_tbl_len = pa.gid_tbl_len;
	return pa.link_layer;
}

/* The valid GIDs of every port into rows[0..max): their count, or -errno
 * (EINVAL: more than max). */
static ssize_t gid_table_sysfs(struct ibv_context *ctx, struct gid_row *rows, size_t max)
{
	struct ibv_device_attr da;
	int rc = ibv_query_device(ctx, &da);
	if (rc != 0)
		return -rc;
	size_t n = 0;
	for (int port = 1; port <= da.phys_port_cnt; port++) {
		int len = 0, ll = port_link_layer(ctx, port, &len);
		if (ll < 0)
			return ll;
		for (int i = 0; i < len; i++) {
			struct gid_row r;
			rc = gid_row_sysfs(ctx, port, (uint32_t)i, ll, &r);
			if (rc == ENODATA)
				continue;
			if (rc != 0)
				return -rc;
			if (n == max)
				return -EINVAL;
			rows[n++] = r;
		}
	}
	return (ssize_t)n;
}

/* Both call the versioned verbs directly, as verbs.h's inline wrappers do
 * (the wrappers would name the symbols, which late.h redirects). */
static int l_query_gid_ex(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	uint32_t port = (uint32_t)ibvl_check_range(L, 2, 1, 255);
	uint32_t index = (uint32_t)ibvl_check_range(L, 3, 0, INT32_MAX);
#if IBVL_HAVE_GID_EX
	if (ibvl_late_fn[IBVL_LATE__ibv_query_gid_ex] != NULL) {
		struct ibv_gid_entry e;
		int rc = _ibv_query_gid_ex(ctx, port, index, &e, 0, sizeof e);
		if (rc != 0)
			return ibvl_fail(L, "ibv_query_gid_ex", rc);
		ibvl_push_fields(L, &e, gid_entry_fields);
		return 1;
	}
#endif
	struct gid_row r;
	int ll = port_link_layer(ctx, (int)port, NULL);
	int rc = ll < 0 ? -ll : gid_row_sysfs(ctx, (int)port, index, ll, &r);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_gid_ex", rc);
	push_gid_row(L, &r);
	return 1;
}

/* ctx:query_gid_table([max_entries]): every valid GID of every port. */
static int l_query_gid_table(lua_State *L)
{
	check_ctx(L);
	size_t max = (size_t)ibvl_opt_range(L, 2, 1024, 1, 1 << 20);
#if IBVL_HAVE_GID_EX
	if (ibvl_late_fn[IBVL_LATE__ibv_query_gid_table] != NULL) {
		struct ibv_gid_entry *e = lua_newuserdatauv(L, max * sizeof *e, 0);
		struct ibv_context *ctx = check_ctx(L); /* again: the buffer may have run a finalizer */
		ssize_t n = _ibv_query_gid_table(ctx, e, max, 0, sizeof *e);
		if (n < 0)
			return ibvl_fail(L, "ibv_query_gid_table", (int)-n);
		lua_createtable(L, (int)n, 0);
		for (ssize_t i = 0; i < n; i++) {
			ibvl_push_fields(L, &e[i], gid_entry_fields);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		return 1;
	}
#endif
	struct gid_row *rows = lua_newuserdatauv(L, max * sizeof *rows, 0);
	ssize_t n = gid_table_sysfs(check_ctx(L), rows, max);
	if (n < 0)
		return ibvl_fail(L, "ibv_query_gid_table", (int)-n);
	lua_createtable(L, (int)n, 0);
	for (ssize_t i = 0; i < n; i++) {
		push_gid_row(L, &rows[i]);
		lua_rawseti(L, -2, (lua_Integer)i + 1);
	}
	return 1;
}

static int l_query_pkey(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	int port = (int)ibvl_check_range(L, 2, 1, 255);
	int index = (int)ibvl_check_range(L, 3, 0, UINT16_MAX);
	__be16 pkey;
	int rc = ibv_query_pkey(ctx, (uint8_t)port, index, &pkey);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_pkey", errno ? errno : EINVAL);
	lua_pushinteger(L, be16toh(pkey));
	return 1;
}

static void push_event_object(lua_State *L, const char *field, const void *cptr)
{
	ibvl_push_tracked(L, cptr);
	lua_setfield(L, -2, field);
}

/* ctx:get_async_event([timeout_s]): the next async event as a table, already
 * acknowledged (the table is a copy); nil, msg, ETIMEDOUT after the timeout. */
static int l_get_async_event(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	if (!ibvl_wait_fd(L, ctx->async_fd, 2, "ibv_get_async_event"))
		return ibvl_fail(L, "ibv_get_async_event", ETIMEDOUT);
	int fl = fcntl(ctx->async_fd, F_GETFL);
	fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_async_event ev;
	int rc = ibv_get_async_event(ctx, &ev);
	int err = errno;
	fcntl(ctx->async_fd, F_SETFL, fl);
	if (rc != 0)
		return ibvl_fail(L, "ibv_get_async_event", err == EAGAIN ? ETIMEDOUT : err);
	/* Acknowledged before anything allocates: a finalizer that a collector
	 * step runs may destroy the event's QP, CQ or SRQ, whose destroy call
	 * waits until its events are acknowledged.  Its address only names it. */
	ibv_ack_async_event(&ev);
	lua_createtable(L, 0, 3);
	ibvl_set_enum(L, "type", ibvl_event_types, ev.event_type);
	switch (ev.event_type) {
	case IBV_EVENT_CQ_ERR:
		push_event_object(L, "cq", ev.element.cq);
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		push_event_object(L, "srq", ev.element.srq);
		break;
	case IBV_EVENT_WQ_FATAL:
		push_event_object(L, "wq", ev.element.wq);
		break;
	case IBV_EVENT_DEVICE_FATAL:
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
		ibvl_set_int(L, "port_num", ev.element.port_num);
		break;
	default: /* the QP events */
		push_event_object(L, "qp", ev.element.qp);
		break;
	}
	return 1;
}

static int l_async_fd(lua_State *L)
{
	lua_pushinteger(L, check_ctx(L)->async_fd);
	return 1;
}

static int l_name(lua_State *L)
{
	lua_pushstring(L, ibv_get_device_name(check_ctx(L)->device));
	return 1;
}

/* ctx:provider(): the user-space provider serving the device, by its short
 * name ("rxe", "mlx5": its library's, less "lib" and "-rdmav<N>" or ".so")
 * and the library file as libibverbs loaded it: where its poll_cq lives. */
static int l_provider(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	Dl_info info;
	if (ctx->ops.poll_cq == NULL || dladdr((void *)ctx->ops.poll_cq, &info) == 0 ||
	    info.dli_fname == NULL)
		return ibvl_fail(L, "dladdr", ENOENT);
	const char *base = strrchr(info.dli_fname, '/');
	base = base != NULL ? base + 1 : info.dli_fname;
	if (strncmp(base, "lib", 3) == 0)
		base += 3;
	size_t n = strcspn(base, ".");
	const char *abi = strstr(base, "-rdmav");
	if (abi != NULL && (size_t)(abi - base) < n)
		n = (size_t)(abi - base);
	lua_pushlstring(L, base, n);
	lua_pushstring(L, info.dli_fname);
	return 2;
}

/* ---- more of the context: fds, completion vectors, P_Keys, clocks, L2 ---- */
static int l_cmd_fd(lua_State *L)
{
	lua_pushinteger(L, check_ctx(L)->cmd_fd);
	return 1;
}

static int l_num_comp_vectors(lua_State *L)
{
	lua_pushinteger(L, check_ctx(L)->num_comp_vectors);
	return 1;
}

/* ctx:get_pkey_index(port, pkey): the index of the P_Key in the port's table */
static int l_get_pkey_index(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	int port = (int)ibvl_check_range(L, 2, 1, 255);
	uint16_t pkey = (uint16_t)ibvl_check_range(L, 3, 0, UINT16_MAX);
	errno = 0;
	int index = ibv_get_pkey_index(ctx, (uint8_t)port, htobe16(pkey));
	if (index < 0)
		return ibvl_fail(L, "ibv_get_pkey_index", errno ? errno : ENOENT);
	lua_pushinteger(L, index);
	return 1;
}

/* ctx:query_rt_values_ex() -> {raw_clock = {tv_sec =, tv_nsec =}} */
static int l_query_rt_values_ex(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	struct ibv_values_ex v = {.comp_mask = IBV_VALUES_MASK_RAW_CLOCK};
	int rc = ibv_query_rt_values_ex(ctx, &v);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_rt_values_ex", rc);
	lua_createtable(L, 0, 1);
	if (v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		lua_createtable(L, 0, 2);
		ibvl_set_int(L, "tv_sec", (lua_Integer)v.raw_clock.tv_sec);
		ibvl_set_int(L, "tv_nsec", (lua_Integer)v.raw_clock.tv_nsec);
		lua_setfield(L, -2, "raw_clock");
	}
	return 1;
}

/* ctx:resolve_eth_l2_from_gid(ah_attr) -> "aa:bb:cc:dd:ee:ff", vlan id */
static int l_resolve_eth_l2_from_gid(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibv_context *ctx = check_ctx(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	struct ibv_ah_attr ah;
	memset(&ah, 0, sizeof ah);
	ibvl_parse_ah_attr(L, 2, &ah);
	ibvl_guard_end(L, &g);
	uint8_t mac[6];
	uint16_t vid = 0;
	int rc = ibv_resolve_eth_l2_from_gid(ctx, &ah, mac, &vid);
	if (rc != 0)
		return ibvl_fail(L, "ibv_resolve_eth_l2_from_gid", rc < 0 ? errno : rc);
	char text[18];
	snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
	         mac[4], mac[5]);
	lua_pushstring(L, text);
	lua_pushinteger(L, vid);
	return 2;
}

void ibvl_open_context(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"query_device", l_query_device}, {"query_device_ex", l_query_device_ex},
		{"query_port", l_query_port}, {"query_gid", l_query_gid},
		{"query_gid_ex", l_query_gid_ex}, {"query_gid_table", l_query_gid_table},
		{"query_pkey", l_query_pkey}, {"get_async_event", l_get_async_event},
		{"async_fd", l_async_fd}, {"name", l_name}, {"provider", l_provider},
		{"cmd_fd", l_cmd_fd},
		{"num_comp_vectors", l_num_comp_vectors}, {"get_pkey_index", l_get_pkey_index},
		{"query_rt_values_ex", l_query_rt_values_ex},
		{"resolve_eth_l2_from_gid", l_resolve_eth_l2_from_gid}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_context_class, methods);
}
