/*
 * cm_base.c: what the rdma_cm files share, so that none of them calls another
 * in a cycle.
 *
 *   ibvl_cm_functions(L, fns)        -- adds cm.event_channel, cm.create_id, ... to core.cm
 *   ibvl_cm_channel_class            -- the event channel (cm_channel.c has its calls)
 *   ibvl_cm_wait(L, fd, 2, "rdma_get_cm_event")  -- bounded wait on a cm fd
 *   k = ibvl_cm_copy_event(&c, data, e); rdma_ack_cm_event(e); ibvl_cm_push_copy(L, &c, k, 0)
 *
 * The cm files and what each uses (an arrow: "calls into"); no cycles:
 *   cm_addr.c    -> cm_base.c                    addresses, rdma_getaddrinfo
 *   cm_id.c      -> cm_base.c, cm_addr.c         ids: addresses, routes, connections
 *   cm_channel.c -> cm_base.c, cm_id.c           channels: get_event (new ids)
 *   cm_qp.c      -> cm_base.c, cm_id.c, cm_addr.c  QPs/SRQs on ids, create_ep, get_request
 * cm_base.c uses only the core (helpers.c, object.c, ah.c, enums.c, wait.c).
 */
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <rdma/rdma_cma.h>

#include "cm/cm.h"

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

static int destroy_channel(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	rdma_destroy_event_channel(ptr);
	return 0;
}

const struct ibvl_class ibvl_cm_channel_class = {"ibverbs.cm_channel", destroy_channel,
                                                 "rdma_destroy_event_channel", NULL, 0};

/* Waits up to the timeout at timeout_arg for fd; pushes the ETIMEDOUT failure
 * and returns 3 when it passes, 0 when fd is readable. */
int ibvl_cm_wait(lua_State *L, int fd, int timeout_arg, const char *call)
{
	if (ibvl_wait_fd(L, fd, timeout_arg, call))
		return 0;
	return ibvl_fail(L, call, ETIMEDOUT);
}

/* ---- events ------------------------------------------------------------- */
enum { PARAM_NONE, PARAM_CONN, PARAM_UD, PARAM_UD_NODATA };

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

/* e copied into c, its private data into data (IBVL_CM_DATA_MAX bytes), so
 * that librdmacm's event can be acknowledged at once. */
int ibvl_cm_copy_event(struct rdma_cm_event *c, uint8_t *data, const struct rdma_cm_event *e)
{
	*c = *e;
	int kind = param_kind(e);
	if (kind == PARAM_CONN && e->param.conn.private_data_len > 0) {
		memcpy(data, e->param.conn.private_data, e->param.conn.private_data_len);
		c->param.conn.private_data = data;
	} else if (kind == PARAM_UD && e->param.ud.private_data_len > 0) {
		memcpy(data, e->param.ud.private_data, e->param.ud.private_data_len);
		c->param.ud.private_data = data;
	}
	return kind;
}

static void set_private_data(lua_State *L, const void *data, uint8_t len)
{
	if (data == NULL || len == 0)
		return;
	lua_pushlstring(L, data, len);
	lua_setfield(L, -2, "private_data");
}

#define T struct rdma_conn_param
static const struct ibvl_field conn_out[] = {
	IBVL_FIELD(T, responder_resources, IBVL_F_INT, NULL),
	IBVL_FIELD(T, initiator_depth, IBVL_F_INT, NULL), IBVL_FIELD(T, flow_control, IBVL_F_INT, NULL),
	IBVL_FIELD(T, retry_count, IBVL_F_INT, NULL), IBVL_FIELD(T, rnr_retry_count, IBVL_F_INT, NULL),
	IBVL_FIELD(T, srq, IBVL_F_BOOL, NULL), IBVL_FIELD(T, qp_num, IBVL_F_INT, NULL),
	IBVL_FIELDS_END,
};
#undef T
#define T struct rdma_ud_param
static const struct ibvl_field ud_out[] = {
	IBVL_FIELD(T, ah_attr, IBVL_F_PUSH, ibvl_push_ah_attr_at), IBVL_FIELD(T, qp_num, IBVL_F_INT, NULL),
	IBVL_FIELD(T, qkey, IBVL_F_INT, NULL), IBVL_FIELDS_END,
};
#undef T

static void set_conn_param(lua_State *L, const struct rdma_conn_param *p)
{
	set_private_data(L, p->private_data, p->private_data_len);
	ibvl_push_fields(L, p, conn_out);
	lua_setfield(L, -2, "conn");
}

static void set_ud_param(lua_State *L, const struct rdma_ud_param *p, int with_data)
{
	if (with_data)
		set_private_data(L, p->private_data, p->private_data_len);
	ibvl_push_fields(L, p, ud_out);
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

struct ibvl_cm_request {
	struct rdma_cm_event ev;
	uint8_t data[IBVL_CM_DATA_MAX];
	int kind;
};

/* Copies e (NULL when out of memory) and acknowledges it. */
struct ibvl_cm_request *ibvl_cm_take_request(struct rdma_cm_event *e)
{
	struct ibvl_cm_request *r = malloc(sizeof *r);
	if (r != NULL)
		r->kind = ibvl_cm_copy_event(&r->ev, r->data, e);
	rdma_ack_cm_event(e);
	return r;
}

void ibvl_cm_push_request(lua_State *L, const struct ibvl_cm_request *r)
{
	push_event(L, &r->ev, r->kind, 0);
}

/* Pushes c, a copy ibvl_cm_copy_event made (which said its kind), as a
 * table: pushing allocates, and a finalizer that runs then may close the
 * event's id, so nothing of librdmacm's is read any more. */
void ibvl_cm_push_copy(lua_State *L, const struct rdma_cm_event *c, int kind, int new_id_idx)
{
	push_event(L, c, kind, new_id_idx);
}

/* ---- synchronous rdma_cm ids ----------------------------------------------
 * A synchronous rdma_cm id (no event channel) blocks inside librdmacm, which
 * reads its private channel until the call's event comes (ucma_complete).
 * ibvl_cm_sync_prepare makes that channel non-blocking, so the call returns
 * EAGAIN once its command is written; ibvl_cm_sync_result then waits here for
 * the event and takes it as ucma_complete does (id->event, status to errno).
 */
void ibvl_cm_sync_prepare(struct ibvl_cm_id *id)
{
	struct rdma_cm_id *cid = id->o.ptr;
	if (id->chan_slot >= 0 || cid->channel == NULL)
		return;
	int fl = fcntl(cid->channel->fd, F_GETFL);
	if (fl != -1 && !(fl & O_NONBLOCK))
		fcntl(cid->channel->fd, F_SETFL, fl | O_NONBLOCK);
}

int ibvl_cm_sync_result(lua_State *L, struct ibvl_cm_id *id, const char *call, int rc,
                        double timeout)
{
	struct rdma_cm_id *cid = id->o.ptr;
	if (rc == 0 || id->chan_slot >= 0 || errno != EAGAIN)
		return ibvl_result(L, call, rc);
	/* the command went out; its event is still to come */
	double deadline = isinf(timeout) ? HUGE_VAL : ibvl_monotonic() + timeout;
	for (;;) {
		double left = isinf(deadline) ? HUGE_VAL : deadline - ibvl_monotonic();
		int r = ibvl_poll_fd(cid->channel->fd, left > 0 ? left : 0);
		if (r < 0)
			return ibvl_interrupted(L, call);
		if (r == 0)
			return ibvl_fail(L, call, ETIMEDOUT);
		if (cid->event != NULL) { /* as ucma_complete: the previous one is acknowledged */
			rdma_ack_cm_event(cid->event);
			cid->event = NULL;
		}
		if (rdma_get_cm_event(cid->channel, &cid->event) == 0)
			break;
		if (errno != EAGAIN) /* EAGAIN: librdmacm consumed an event of its own */
			return ibvl_fail(L, call, errno);
	}
	int status = cid->event->status;
	if (status == 0)
		return ibvl_result(L, call, 0);
	if (cid->event->event == RDMA_CM_EVENT_REJECTED)
		return ibvl_fail(L, call, ECONNREFUSED);
	return ibvl_fail(L, call, status < 0 ? -status : status);
}
