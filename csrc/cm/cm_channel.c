/*
 * cm_channel.c: rdma_cm event channels: their calls (the class, and events
 * as tables, are in cm_base.c, which cm_id.c shares).
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

#include <rdma/rdma_cma.h>

#include "cm/cm.h"

/* ch:get_event([timeout_s]) */
static int l_get_event(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *cho = ibvl_check(L, 1, &ibvl_cm_channel_class);
	ibvl_opt_timeout(L, 2, 0); /* checked before anything is pushed */
	lua_settop(L, 2);          /* the timeout stays argument 2 */
	ibvl_cm_new_id(L, &g);     /* a request's id: made before the event is taken */
	int nid_idx = lua_gettop(L);
	struct rdma_event_channel *ch = cho->ptr; /* open: the guard ended after the last allocation */
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
	/* Nothing allocates from here to the adoption: a finalizer could close
	 * the channel (or the event's id) under the event. */
	struct rdma_cm_event c;
	uint8_t data[IBVL_CM_DATA_MAX];
	int kind = ibvl_cm_copy_event(&c, data, e);
	int request = e->event == RDMA_CM_EVENT_CONNECT_REQUEST;
	rdma_ack_cm_event(e);
	if (request)
		ibvl_cm_adopt_id(L, nid_idx, c.id, 1);
	ibvl_cm_push_copy(L, &c, kind, request ? nid_idx : 0);
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
	struct ibvl_obj *o = ibvl_new(L, &ibvl_cm_channel_class, sizeof *o, NULL);
	struct rdma_event_channel *ch = rdma_create_event_channel();
	if (ch == NULL)
		return ibvl_fail(L, "rdma_create_event_channel", errno);
	/* get_event polls first; non-blocking keeps an event librdmacm discards
	 * from blocking the call */
	fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK);
	o->ptr = ch;
	return 1;
}

/* cm.event_str(event): librdmacm's name of an event type given by name or
 * number: cm.event_str("addr_resolved") --> "RDMA_CM_EVENT_ADDR_RESOLVED" */
static int l_event_str(lua_State *L)
{
	lua_Integer v = ibvl_check_enum_or_int(L, 1, ibvl_cm_event_types);
	int ev = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int)v;
	lua_pushstring(L, rdma_event_str((enum rdma_cm_event_type)ev));
	return 1;
}

void ibvl_open_cm_channel(lua_State *L)
{
	static const luaL_Reg methods[] = {{"get_event", l_get_event}, {"fd", l_fd}, {NULL, NULL}};
	static const luaL_Reg fns[] = {
		{"event_channel", l_event_channel}, {"event_str", l_event_str}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_cm_channel_class, methods);
	ibvl_cm_functions(L, fns);
}
