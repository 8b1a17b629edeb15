/*
 * cm_channel.c: rdma_cm event channels and events as tables.
 *
 *   local cm = require "ibverbs.cm"
 *   local ch <close> = assert(cm.event_channel())
 *   local id = assert(ch:create_id{ps = "tcp"})          -- cm_id.c
 *   local ev = ch:get_event(2.0)   -- nil, msg, ETIMEDOUT after 2 s
 *   ev.event, ev.status, ev.id, ev.listen_id, ev.private_data
 *   ev.conn = {responder_resources=, initiator_depth=, ..., qp_num=}  -- connected ids
 *   ev.ud = {ah_attr = {...}, qp_num=, qkey=}                         -- UD ids, multicast
 *   ch:fd()
 * get_event acknowledges the event before it returns (the table is a copy),
 * so rdma_destroy_id can never wait for an event the script forgot.  The id
 * of a "connect_request" event is a new, full cm id on this channel.
 */
#include <fcntl.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "ibvl.h"

#define E(name, value) {name, value}
const struct ibvl_enum ibvl_cm_event_types[] = {
	E("addr_resolved", RDMA_CM_EVENT_ADDR_RESOLVED), E("addr_error", RDMA_CM_EVENT_ADDR_ERROR),
	E("route_resolved", RDMA_CM_EVENT_ROUTE_RESOLVED),
	E("route_error", RDMA_CM_EVENT_ROUTE_ERROR),
	E("connect_request", RDMA_CM_EVENT_CONNECT_REQUEST),
	E("connect_response", RDMA_CM_EVENT_CONNECT_RESPONSE),
	E("connect_error", RDMA_CM_EVENT_CONNECT_ERROR), E("unreachable", RDMA_CM_EVENT_UNREACHABLE),
	E("rejected", RDMA_CM_EVENT_REJECTED), E("established", RDMA_CM_EVENT_ESTABLISHED),
	E("disconnected", RDMA_CM_EVENT_DISCONNECTED),
	E("device_removal", RDMA_CM_EVENT_DEVICE_REMOVAL),
	E("multicast_join", RDMA_CM_EVENT_MULTICAST_JOIN),
	E("multicast_error", RDMA_CM_EVENT_MULTICAST_ERROR),
	E("addr_change", RDMA_CM_EVENT_ADDR_CHANGE), E("timewait_exit", RDMA_CM_EVENT_TIMEWAIT_EXIT),
	{NULL, 0},
};

static int destroy_channel(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	rdma_destroy_event_channel(ptr);
	return 0;
}

const struct ibvl_class ibvl_cm_channel_class = {"ibverbs.cm_channel", destroy_channel,
                                                 "rdma_destroy_event_channel", NULL};

/* Adds functions to the module's cm table (made on first use). */
void ibvl_cm_functions(lua_State *L, const luaL_Reg *fns)
{
	lua_getfield(L, -1, "cm");
	if (lua_isnil(L, -1)) {
		lua_pop(L, 1);
		lua_newtable(L);
		lua_pushvalue(L, -1);
		lua_setfield(L, -3, "cm");
	}
	luaL_setfuncs(L, fns, 0);
	lua_pop(L, 1);
}

/* ---- events ------------------------------------------------------------- */
enum { PARAM_NONE, PARAM_CONN, PARAM_UD, PARAM_UD_NODATA };

/* An event copied out of librdmacm's memory, so it can be acknowledged at once. */
struct event_copy {
	struct rdma_cm_event e;
	int kind;
	uint8_t data[256];
};

static int param_kind(const struct rdma_cm_event *e)
{
	switch (e->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_MULTICAST_ERROR:
		return PARAM_NONE;
	case RDMA_CM_EVENT_MULTICAST_JOIN: /* its private_data is the join context */
		return PARAM_UD_NODATA;
	default:
		return e->id->qp_type == IBV_QPT_UD ? PARAM_UD : PARAM_CONN;
	}
}

static void copy_event(struct event_copy *c, const struct rdma_cm_event *e)
{
	c->e = *e;
	c->kind = param_kind(e);
	if (c->kind == PARAM_CONN && e->param.conn.private_data_len > 0) {
		memcpy(c->data, e->param.conn.private_data, e->param.conn.private_data_len);
		c->e.param.conn.private_data = c->data;
	} else if (c->kind == PARAM_UD && e->param.ud.private_data_len > 0) {
		memcpy(c->data, e->param.ud.private_data, e->param.ud.private_data_len);
		c->e.param.ud.private_data = c->data;
	}
}

static void set_private_data(lua_State *L, const void *data, uint8_t len)
{
	if (data == NULL || len == 0)
		return;
	lua_pushlstring(L, data, len);
	lua_setfield(L, -2, "private_data");
}

static void set_conn_param(lua_State *L, const struct rdma_conn_param *p)
{
	set_private_data(L, p->private_data, p->private_data_len);
	lua_createtable(L, 0, 7);
	ibvl_set_int(L, "responder_resources", p->responder_resources);
	ibvl_set_int(L, "initiator_depth", p->initiator_depth);
	ibvl_set_int(L, "flow_control", p->flow_control);
	ibvl_set_int(L, "retry_count", p->retry_count);
	ibvl_set_int(L, "rnr_retry_count", p->rnr_retry_count);
	ibvl_set_bool(L, "srq", p->srq);
	ibvl_set_int(L, "qp_num", p->qp_num);
	lua_setfield(L, -2, "conn");
}

static void set_ud_param(lua_State *L, const struct rdma_ud_param *p, int with_data)
{
	if (with_data)
		set_private_data(L, p->private_data, p->private_data_len);
	lua_createtable(L, 0, 3);
	ibvl_push_ah_attr(L, &p->ah_attr);
	lua_setfield(L, -2, "ah_attr");
	ibvl_set_int(L, "qp_num", p->qp_num);
	ibvl_set_int(L, "qkey", p->qkey);
	lua_setfield(L, -2, "ud");
}

static void set_tracked(lua_State *L, const char *field, const void *cptr)
{
	if (cptr == NULL)
		return;
	ibvl_push_tracked(L, cptr);
	lua_setfield(L, -2, field);
}

/* Pushes e as a table.  new_id_idx: the userdata of a connection request's
 * new id (0: look every id up). */
static void push_event(lua_State *L, const struct rdma_cm_event *e, int kind, int new_id_idx)
{
	lua_createtable(L, 0, 8);
	ibvl_set_enum(L, "event", ibvl_cm_event_types, e->event);
	ibvl_set_int(L, "status", e->status);
	if (new_id_idx != 0) {
		lua_pushvalue(L, new_id_idx);
		lua_setfield(L, -2, "id");
	} else {
		set_tracked(L, "id", e->id);
	}
	set_tracked(L, "listen_id", e->listen_id);
	if (kind == PARAM_CONN)
		set_conn_param(L, &e->param.conn);
	else if (kind == PARAM_UD || kind == PARAM_UD_NODATA)
		set_ud_param(L, &e->param.ud, kind == PARAM_UD);
}

/* For an event librdmacm still holds (a synchronous id's last event). */
void ibvl_cm_push_event(lua_State *L, const struct rdma_cm_event *e, int new_id_idx)
{
	push_event(L, e, param_kind(e), new_id_idx);
}

/* Waits up to the timeout at timeout_arg for fd; pushes the ETIMEDOUT failure
 * and returns 3 when it passes, 0 when fd is readable. */
int ibvl_cm_wait(lua_State *L, int fd, int timeout_arg, const char *call)
{
	if (ibvl_wait_fd(L, fd, timeout_arg, call))
		return 0;
	return ibvl_fail(L, call, ETIMEDOUT);
}

/* ch:get_event([timeout_s]) */
static int l_get_event(lua_State *L)
{
	struct rdma_event_channel *ch = ((struct ibvl_obj *)ibvl_check(L, 1,
	                                                               &ibvl_cm_channel_class))->ptr;
	lua_settop(L, 2); /* the timeout stays argument 2 */
	ibvl_cm_new_id(L); /* a request's id: made before the event is taken */
	int nid_idx = lua_gettop(L);
	struct rdma_cm_event *e;
	for (;;) {
		int n = ibvl_cm_wait(L, ch->fd, 2, "rdma_get_cm_event");
		if (n != 0)
			return n;
		if (rdma_get_cm_event(ch, &e) == 0)
			break;
		if (errno != EAGAIN) /* EAGAIN: librdmacm discarded the event (fd is non-blocking) */
			return ibvl_fail(L, "rdma_get_cm_event", errno);
	}
	struct event_copy c;
	copy_event(&c, e);
	int request = e->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	rdma_ack_cm_event(e);
	if (request)
		ibvl_cm_adopt_id(L, nid_idx, c.e.id, 1);
	push_event(L, &c.e, c.kind, request ? nid_idx : 0);
	return 1;
}

static int l_fd(lua_State *L)
{
	struct rdma_event_channel *ch = ((struct ibvl_obj *)ibvl_check(L, 1,
	                                                               &ibvl_cm_channel_class))->ptr;
	lua_pushinteger(L, ch->fd);
	return 1;
}

/* cm.event_channel() */
static int l_event_channel(lua_State *L)
{
	struct ibvl_obj *o = ibvl_new(L, &ibvl_cm_channel_class, sizeof *o);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (ch == NULL)
		return ibvl_fail(L, "rdma_create_event_channel", errno);
	/* get_event polls first; non-blocking keeps an event librdmacm discards
	 * from blocking the call */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	o->ptr = ch;
	return 1;
}

void ibvl_open_cm_channel(lua_State *L)
{
	static const luaL_Reg methods[] = {{"get_event", l_get_event}, {"fd", l_fd}, {NULL, NULL}};
	static const luaL_Reg fns[] = {{"event_channel", l_event_channel}, {NULL, NULL}};
	ibvl_register(L, &ibvl_cm_channel_class, methods);
	ibvl_cm_functions(L, fns);
}

/* cm.event_str(event): librdmacm's name of an event type given by name or
 * number: cm.event_str("addr_resolved") --> "RDMA_CM_EVENT_ADDR_RESOLVED" */
static int l_event_str(lua_State *L)
{
	lua_Integer v = ibvl_check_enum(L, 1, ibvl_cm_event_types);
	int ev = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int)v;
	lua_pushstring(L, rdma_event_str((enum rdma_cm_event_type)ev));
	return 1;
}

void ibvl_open_cm_event_str(lua_State *L)
{
	static const luaL_Reg fns[] = {{"event_str", l_event_str}, {NULL, NULL}};
	ibvl_cm_functions(L, fns);
}
