/*
 * context.c: an open device (ibv_context): queries and async events.
 *
 *   local ctx <close> = assert(ibv.open("rxe0"))
 *   ctx:query_device().max_qp, ctx:query_device_ex().device_cap_flags_ex
 *   local p = ctx:query_port(1); print(p.state, p.active_mtu)   -- "active" 1024
 *   ctx:query_gid(1, 1), ctx:query_gid_ex(1, 1).gid_type, ctx:query_gid_table()
 *   ctx:query_pkey(1, 0)
 *   local ev = ctx:get_async_event(1.0)  -- {type="port_active", port_num=1} or nil on timeout
 *   ctx:async_fd(), ctx:name()
 *   ctx:cmd_fd(), ctx:num_comp_vectors(), ctx:get_pkey_index(1, 0xffff)
 *   ctx:query_rt_values_ex().raw_clock, ctx:resolve_eth_l2_from_gid(ah_attr)  -- mac, vid
 */
#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "ibvl.h"

static int destroy_context(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_close_device(ptr);
}

const struct ibvl_class ibvl_context_class = {"ibverbs.context", destroy_context,
                                              "ibv_close_device", NULL};

static struct ibv_context *check_ctx(lua_State *L)
{
	return ((struct ibvl_obj *)ibvl_check(L, 1, &ibvl_context_class))->ptr;
}

static void set_device_attr(lua_State *L, const struct ibv_device_attr *a)
{
	ibvl_set_str(L, "fw_ver", a->fw_ver);
	ibvl_push_guid(L, a->node_guid);
	lua_setfield(L, -2, "node_guid");
	ibvl_push_guid(L, a->sys_image_guid);
	lua_setfield(L, -2, "sys_image_guid");
	ibvl_set_u64(L, "max_mr_size", a->max_mr_size);
	ibvl_set_u64(L, "page_size_cap", a->page_size_cap);
	ibvl_set_int(L, "vendor_id", a->vendor_id);
	ibvl_set_int(L, "vendor_part_id", a->vendor_part_id);
	ibvl_set_int(L, "hw_ver", a->hw_ver);
	ibvl_set_int(L, "max_qp", a->max_qp);
	ibvl_set_int(L, "max_qp_wr", a->max_qp_wr);
	ibvl_set_int(L, "device_cap_flags", a->device_cap_flags);
	ibvl_set_flags(L, "device_caps", ibvl_device_caps, a->device_cap_flags);
	ibvl_set_int(L, "max_sge", a->max_sge);
	ibvl_set_int(L, "max_sge_rd", a->max_sge_rd);
	ibvl_set_int(L, "max_cq", a->max_cq);
	ibvl_set_int(L, "max_cqe", a->max_cqe);
	ibvl_set_int(L, "max_mr", a->max_mr);
	ibvl_set_int(L, "max_pd", a->max_pd);
	ibvl_set_int(L, "max_qp_rd_atom", a->max_qp_rd_atom);
	ibvl_set_int(L, "max_ee_rd_atom", a->max_ee_rd_atom);
	ibvl_set_int(L, "max_res_rd_atom", a->max_res_rd_atom);
	ibvl_set_int(L, "max_qp_init_rd_atom", a->max_qp_init_rd_atom);
	ibvl_set_int(L, "max_ee_init_rd_atom", a->max_ee_init_rd_atom);
	ibvl_set_enum(L, "atomic_cap", ibvl_atomic_caps, a->atomic_cap);
	ibvl_set_int(L, "max_ee", a->max_ee);
	ibvl_set_int(L, "max_rdd", a->max_rdd);
	ibvl_set_int(L, "max_mw", a->max_mw);
	ibvl_set_int(L, "max_raw_ipv6_qp", a->max_raw_ipv6_qp);
	ibvl_set_int(L, "max_raw_ethy_qp", a->max_raw_ethy_qp);
	ibvl_set_int(L, "max_mcast_grp", a->max_mcast_grp);
	ibvl_set_int(L, "max_mcast_qp_attach", a->max_mcast_qp_attach);
	ibvl_set_int(L, "max_total_mcast_qp_attach", a->max_total_mcast_qp_attach);
	ibvl_set_int(L, "max_ah", a->max_ah);
	ibvl_set_int(L, "max_fmr", a->max_fmr);
	ibvl_set_int(L, "max_map_per_fmr", a->max_map_per_fmr);
	ibvl_set_int(L, "max_srq", a->max_srq);
	ibvl_set_int(L, "max_srq_wr", a->max_srq_wr);
	ibvl_set_int(L, "max_srq_sge", a->max_srq_sge);
	ibvl_set_int(L, "max_pkeys", a->max_pkeys);
	ibvl_set_int(L, "local_ca_ack_delay", a->local_ca_ack_delay);
	ibvl_set_int(L, "phys_port_cnt", a->phys_port_cnt);
}

static int l_query_device(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	struct ibv_device_attr a;
	int rc = ibv_query_device(ctx, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_device", rc);
	ibvl_out_table(L, 2, 48);
	set_device_attr(L, &a);
	return 1;
}

static int l_query_device_ex(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	struct ibv_device_attr_ex a = {0};
	int rc = ibv_query_device_ex(ctx, NULL, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_device_ex", rc);
	ibvl_out_table(L, 2, 64);
	set_device_attr(L, &a.orig_attr);
	ibvl_set_int(L, "comp_mask", a.comp_mask);
	ibvl_set_int(L, "odp_general_caps", a.odp_caps.general_caps);
	ibvl_set_int(L, "odp_rc_caps", a.odp_caps.per_transport_caps.rc_odp_caps);
	ibvl_set_int(L, "odp_uc_caps", a.odp_caps.per_transport_caps.uc_odp_caps);
	ibvl_set_int(L, "odp_ud_caps", a.odp_caps.per_transport_caps.ud_odp_caps);
	ibvl_set_u64(L, "completion_timestamp_mask", a.completion_timestamp_mask);
	ibvl_set_u64(L, "hca_core_clock", a.hca_core_clock);
	ibvl_set_u64(L, "device_cap_flags_ex", a.device_cap_flags_ex);
	ibvl_set_int(L, "max_tso", a.tso_caps.max_tso);
	ibvl_set_int(L, "tso_supported_qpts", a.tso_caps.supported_qpts);
	ibvl_set_int(L, "rss_supported_qpts", a.rss_caps.supported_qpts);
	ibvl_set_int(L, "max_rwq_indirection_tables", a.rss_caps.max_rwq_indirection_tables);
	ibvl_set_int(L, "max_rwq_indirection_table_size", a.rss_caps.max_rwq_indirection_table_size);
	ibvl_set_u64(L, "rx_hash_fields_mask", a.rss_caps.rx_hash_fields_mask);
	ibvl_set_int(L, "rx_hash_function", a.rss_caps.rx_hash_function);
	ibvl_set_int(L, "max_wq_type_rq", a.max_wq_type_rq);
	ibvl_set_int(L, "raw_packet_caps", a.raw_packet_caps);
	ibvl_set_int(L, "max_cq_count", a.cq_mod_caps.max_cq_count);
	ibvl_set_int(L, "max_cq_period", a.cq_mod_caps.max_cq_period);
	ibvl_set_u64(L, "max_dm_size", a.max_dm_size);
	ibvl_set_int(L, "xrc_odp_caps", a.xrc_odp_caps);
	ibvl_set_int(L, "phys_port_cnt_ex", a.phys_port_cnt_ex);
	return 1;
}

static const int mtu_bytes[] = {0, 256, 512, 1024, 2048, 4096};

static void set_mtu(lua_State *L, const char *field, enum ibv_mtu m)
{
	ibvl_set_int(L, field, m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? mtu_bytes[m] : 0);
}

static int l_query_port(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	int port = (int)ibvl_check_range(L, 2, 1, 255);
	struct ibv_port_attr a;
	int rc = ibv_query_port(ctx, (uint8_t)port, &a);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_port", rc);
	ibvl_out_table(L, 3, 24);
	ibvl_set_enum(L, "state", ibvl_port_states, a.state);
	set_mtu(L, "max_mtu", a.max_mtu);
	set_mtu(L, "active_mtu", a.active_mtu);
	ibvl_set_int(L, "gid_tbl_len", a.gid_tbl_len);
	ibvl_set_int(L, "port_cap_flags", a.port_cap_flags);
	ibvl_set_flags(L, "port_caps", ibvl_port_caps, a.port_cap_flags);
	ibvl_set_int(L, "max_msg_sz", a.max_msg_sz);
	ibvl_set_int(L, "bad_pkey_cntr", a.bad_pkey_cntr);
	ibvl_set_int(L, "qkey_viol_cntr", a.qkey_viol_cntr);
	ibvl_set_int(L, "pkey_tbl_len", a.pkey_tbl_len);
	ibvl_set_int(L, "lid", a.lid);
	ibvl_set_int(L, "sm_lid", a.sm_lid);
	ibvl_set_int(L, "lmc", a.lmc);
	ibvl_set_int(L, "max_vl_num", a.max_vl_num);
	ibvl_set_int(L, "sm_sl", a.sm_sl);
	ibvl_set_int(L, "subnet_timeout", a.subnet_timeout);
	ibvl_set_int(L, "init_type_reply", a.init_type_reply);
	ibvl_set_int(L, "active_width", a.active_width);
	ibvl_set_int(L, "active_speed", a.active_speed);
	ibvl_set_int(L, "phys_state", a.phys_state);
	ibvl_set_enum(L, "link_layer", ibvl_link_layers, a.link_layer);
	ibvl_set_int(L, "flags", a.flags);
	ibvl_set_int(L, "port_cap_flags2", a.port_cap_flags2);
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

static void push_gid_entry(lua_State *L, const struct ibv_gid_entry *e)
{
	lua_createtable(L, 0, 5);
	ibvl_push_gid(L, &e->gid);
	lua_setfield(L, -2, "gid");
	ibvl_set_int(L, "gid_index", e->gid_index);
	ibvl_set_int(L, "port_num", e->port_num);
	ibvl_set_enum(L, "gid_type", ibvl_gid_types, e->gid_type);
	ibvl_set_int(L, "ndev_ifindex", e->ndev_ifindex);
}

static int l_query_gid_ex(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	uint32_t port = (uint32_t)ibvl_check_range(L, 2, 1, 255);
	uint32_t index = (uint32_t)ibvl_check_range(L, 3, 0, INT32_MAX);
	struct ibv_gid_entry e;
	int rc = ibv_query_gid_ex(ctx, port, index, &e, 0);
	if (rc != 0)
		return ibvl_fail(L, "ibv_query_gid_ex", rc);
	push_gid_entry(L, &e);
	return 1;
}

/* ctx:query_gid_table([max_entries]): every valid GID of every port. */
static int l_query_gid_table(lua_State *L)
{
	struct ibv_context *ctx = check_ctx(L);
	size_t max = (size_t)ibvl_opt_range(L, 2, 1024, 1, 1 << 20);
	struct ibv_gid_entry *e = lua_newuserdatauv(L, max * sizeof *e, 0);
	ssize_t n = ibv_query_gid_table(ctx, e, max, 0);
	if (n < 0)
		return ibvl_fail(L, "ibv_query_gid_table", (int)-n);
	lua_createtable(L, (int)n, 0);
	for (ssize_t i = 0; i < n; i++) {
		push_gid_entry(L, &e[i]);
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
	ibv_ack_async_event(&ev);
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

void ibvl_open_context(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"query_device", l_query_device}, {"query_device_ex", l_query_device_ex},
		{"query_port", l_query_port}, {"query_gid", l_query_gid},
		{"query_gid_ex", l_query_gid_ex}, {"query_gid_table", l_query_gid_table},
		{"query_pkey", l_query_pkey}, {"get_async_event", l_get_async_event},
		{"async_fd", l_async_fd}, {"name", l_name}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_context_class, methods);
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

void ibvl_open_context_more(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"cmd_fd", l_cmd_fd}, {"num_comp_vectors", l_num_comp_vectors},
		{"get_pkey_index", l_get_pkey_index}, {"query_rt_values_ex", l_query_rt_values_ex},
		{"resolve_eth_l2_from_gid", l_resolve_eth_l2_from_gid}, {NULL, NULL},
	};
	ibvl_add_methods(L, ibvl_context_class.name, methods);
}
