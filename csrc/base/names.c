/*
 * names.c: the names and numbers of libibverbs' enums, as its helpers give them.
 *
 *   ibv.wc_status_str("wr_flush_err"), ibv.wc_status_str(5)  -- "Work Request Flushed Error"
 *   ibv.node_type_str("ca"), ibv.port_state_str(4), ibv.event_type_str("port_active")
 *   ibv.rate_to_mbps("10_gbps") --> 10000; ibv.rate_to_mult("10_gbps") --> 4
 *   ibv.mbps_to_rate(25781) --> "25_gbps"; ibv.mult_to_rate(4) --> "10_gbps"
 *   ibv.is_qpt_supported(ctx:query_device_ex().tso_supported_qpts, "ud")
 *   ibv.flow_label_to_udp_sport(0x12345)  -- the RoCE v2 UDP source port of a flow label
 *   ibv.roce_udp_sport(0, qpn, dest_qpn)  -- --> port, flow label: the kernel's rule at modify_qp
 * Every argument is a name (as the rest of the API gives it) or the C value.
 */
#include "base/enums.h"
#include "base/err.h"
#include "base/late.h"

/* The C value of argument 1, clamped to an int (libibverbs checks the range). */
static int check_value(lua_State *L, const struct ibvl_enum *e)
{
	lua_Integer v = ibvl_check_enum_or_int(L, 1, e);
	return v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int)v;
}

static int l_wc_status_str(lua_State *L)
{
	lua_pushstring(L, ibv_wc_status_str((enum ibv_wc_status)check_value(L, ibvl_wc_statuses)));
	return 1;
}

static int l_node_type_str(lua_State *L)
{
	lua_pushstring(L, ibv_node_type_str((enum ibv_node_type)check_value(L, ibvl_node_types)));
	return 1;
}

static int l_port_state_str(lua_State *L)
{
	lua_pushstring(L,
	               ibv_port_state_str((enum ibv_port_state)check_value(L, ibvl_port_states)));
	return 1;
}

static int l_event_type_str(lua_State *L)
{
	lua_pushstring(L,
	               ibv_event_type_str((enum ibv_event_type)check_value(L, ibvl_event_types)));
	return 1;
}

/* the rate conversions: -1 and IBV_RATE_MAX ("max") mean "no such rate" */
static int l_rate_to_mbps(lua_State *L)
{
	lua_pushinteger(L, ibv_rate_to_mbps((enum ibv_rate)check_value(L, ibvl_rates)));
	return 1;
}

static int l_rate_to_mult(lua_State *L)
{
	lua_pushinteger(L, ibv_rate_to_mult((enum ibv_rate)check_value(L, ibvl_rates)));
	return 1;
}

static int l_mbps_to_rate(lua_State *L)
{
	int mbps = (int)ibvl_check_range(L, 1, INT32_MIN, INT32_MAX);
	ibvl_push_enum(L, ibvl_rates, mbps_to_ibv_rate(mbps));
	return 1;
}

static int l_mult_to_rate(lua_State *L)
{
	int mult = (int)ibvl_check_range(L, 1, INT32_MIN, INT32_MAX);
	ibvl_push_enum(L, ibvl_rates, mult_to_ibv_rate(mult));
	return 1;
}

/* ibv.is_qpt_supported(caps, qp_type): caps is a supported_qpts bit mask */
static int l_is_qpt_supported(lua_State *L)
{
	uint32_t caps = (uint32_t)ibvl_check_range(L, 1, 0, UINT32_MAX);
	lua_Integer qpt = ibvl_check_enum_or_int(L, 2, ibvl_qp_types);
	lua_pushboolean(L, qpt >= 0 && qpt < 31 &&
	                       ibv_is_qpt_supported(caps, (enum ibv_qp_type)qpt));
	return 1;
}

/* ibv.flow_label_to_udp_sport(flow_label): the RoCE v2 UDP source port a
 * flow label gives (ibv_flow_label_to_udp_sport) */
static int l_flow_label_to_udp_sport(lua_State *L)
{
#if IBVL_HAVE_FLOW_LABEL_SPORT
	uint32_t fl = (uint32_t)ibvl_check_range(L, 1, 0, 0xfffff);
	lua_pushinteger(L, ibv_flow_label_to_udp_sport(fl));
	return 1;
#else
	return ibvl_absent(L, "ibv.flow_label_to_udp_sport", IBVL_SINCE_FLOW_LABEL_SPORT);
#endif
}

/* ibv.roce_udp_sport(flow_label, qpn, dest_qpn): the UDP source port of an
 * RC QP's RoCE v2 packets as the Linux kernel's providers set it when the QP
 * is modified with an address vector (include/rdma/ib_verbs.h's
 * rdma_get_udp_sport, which rxe calls in rxe_modify_qp since Linux 5.17):
 * the flow label of the AV's GRH when it is not 0, else a symmetric label
 * made from both QP numbers (rdma_calc_flow_label: their product folded to 20
 * bits), so both ends of a connection compute the same one; the label then
 * folded to 14 bits over 0xc000 (rdma_flow_label_to_udp_sport).  Returns the
 * port and the label it came from.  The QP numbers are needed only for label 0. */
static int l_roce_udp_sport(lua_State *L)
{
	uint32_t fl = (uint32_t)ibvl_check_range(L, 1, 0, 0xfffff);
	if (fl == 0) {
		if (lua_isnoneornil(L, 2) || lua_isnoneornil(L, 3))
			return ibvl_argerror(L, lua_isnoneornil(L, 2) ? 2 : 3,
			                     lua_isnoneornil(L, 2) ? "qpn" : "dest_qpn",
			                     "a QP number expected (flow label 0: the port comes "
			                     "from both QP numbers)");
		uint64_t v = (uint64_t)ibvl_check_range(L, 2, 0, 0xffffff) *
		             (uint64_t)ibvl_check_range(L, 3, 0, 0xffffff);
		v ^= v >> 20;
		v ^= v >> 40;
		fl = (uint32_t)(v & 0xfffff);
	} else {
		ibvl_opt_range(L, 2, 0, 0, 0xffffff);
		ibvl_opt_range(L, 3, 0, 0, 0xffffff);
	}
	uint32_t low = (fl & 0x3fff) ^ (fl >> 14);
	lua_pushinteger(L, (lua_Integer)(0xc000 | low));
	lua_pushinteger(L, (lua_Integer)fl);
	return 2;
}

void ibvl_open_names(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{"wc_status_str", l_wc_status_str}, {"node_type_str", l_node_type_str},
		{"port_state_str", l_port_state_str}, {"event_type_str", l_event_type_str},
		{"rate_to_mbps", l_rate_to_mbps}, {"rate_to_mult", l_rate_to_mult},
		{"mbps_to_rate", l_mbps_to_rate}, {"mult_to_rate", l_mult_to_rate},
		{"is_qpt_supported", l_is_qpt_supported},
		{"flow_label_to_udp_sport", l_flow_label_to_udp_sport},
		{"roce_udp_sport", l_roce_udp_sport}, {NULL, NULL},
	};
	luaL_setfuncs(L, funcs, 0);
}
