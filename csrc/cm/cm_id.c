/*
 * cm_id.c: rdma_cm ids: addresses, routes, connections, multicast.
 *
 *   local id = assert(ch:create_id{ps = "tcp"})      -- events come on ch
 *   local sid = assert(cm.create_id{ps = "udp"})     -- no channel: synchronous calls
 *   id:bind_addr("192.0.2.1:7471"); id:listen(8)
 *   id:resolve_addr(nil, "192.0.2.1:7471", 2000); id:resolve_route(2000)
 *   id:connect{private_data = "hi", qp_num = n, retry_count = 7}  -- conn_param, or nil
 *   id:accept(conn_param); id:reject("why"); id:disconnect(); id:establish()
 *   id:migrate_id(other_ch)  -- or nil: synchronous
 *   id:set_option("tos", 32); id:get_local_addr(), id:get_peer_addr()  -- "ip:port"
 *   id:join_multicast("239.1.1.1" [, "sendonly_fullmember"]); id:leave_multicast(addr)
 *   id.port_num, id.ps, id.qp_type, id.context, id.pd, id.event (synchronous ids)
 *   local ep = assert(cm.create_ep(ai [, {pd =, qp_init_attr = {...}}]))
 *   qp:modify(assert(id:init_qp_attr("rtr")))     -- a QP the cm did not make
 *   id:notify("comm_est"); id:set_local_ece{vendor_id = v, options = o}
 *   id:get_remote_ece() --> {vendor_id =, options =}; id:reject_ece([private_data])
 *   for _, ctx in ipairs(cm.get_devices()) do print(ctx:name()) end
 * id:close() destroys what the cm made for the id (cm_qp.c) and then the id.
 * id.context is librdmacm's own device context and id.pd its default PD,
 * wrapped without taking ownership: closing them destroys nothing.
 */
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <rdma/rdma_cma.h>

#include "cm/cm.h"

static int destroy_id(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_cm_id *id = (struct ibvl_cm_id *)o;
	free(id->request);
	id->request = NULL;
	for (int i = 0; i < 6; i++) /* the QP first: the rest are its users' */
		if (id->owned[i] != NULL)
			ibvl_close_forced(id->owned[i]);
	if (id->ep) {
		rdma_destroy_ep(ptr);
		return 0;
	}
	return rdma_destroy_id(ptr) ? errno : 0;
}

static int destroy_borrowed(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	(void)ptr;
	return 0;
}

/* librdmacm's device context and default PD, under the core's metatables */
static const struct ibvl_class borrowed_context = {"ibverbs.context", destroy_borrowed,
                                                   "rdma_cm (context of an id)", NULL, 0};
static const struct ibvl_class borrowed_pd = {"ibverbs.pd", destroy_borrowed,
                                              "rdma_cm (default PD of an id)", NULL, 0};

static const char *const owned_keys[] = {"qp", "srq", "send_cq", "recv_cq", NULL};

static void push_borrowed(lua_State *L, const struct ibvl_class *cls, void *cptr);

void ibvl_cm_push_context(lua_State *L, struct ibv_context *ctx)
{
	push_borrowed(L, &borrowed_context, ctx);
}

static void push_borrowed(lua_State *L, const struct ibvl_class *cls, void *cptr)
{
	if (ibvl_push_tracked(L, cptr))
		return;
	lua_pop(L, 1);
	struct ibvl_obj *o = ibvl_new(L, cls, sizeof *o, NULL); /* borrowed: uses nothing */
	o->ptr = cptr;
	ibvl_track(L, -1);
}

/* id.pd: the PD given to create_qp/create_ep, or librdmacm's default PD (which
 * lives while an id on its device does: the wrapper uses this id). */
static void push_pd(lua_State *L, struct rdma_cm_id *cid)
{
	struct ibv_pd *cpd = cid->pd; /* read before anything allocates (a finalizer */
	struct ibv_context *verbs = cid->verbs; /* may destroy the id meanwhile) */
	lua_getiuservalue(L, 1, 1);
	lua_getfield(L, -1, "pd");
	struct ibvl_obj *user = lua_touserdata(L, -1);
	if (user != NULL && user->ptr == cpd)
		return;
	lua_pop(L, 2);
	if (ibvl_push_tracked(L, cpd))
		return;
	lua_pop(L, 1);
	push_borrowed(L, &borrowed_context, verbs);
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	ibvl_check(L, 1, &ibvl_cm_id_class); /* the id: closed meanwhile, its PD is gone */
	struct ibvl_obj *pd = ibvl_new(L, &borrowed_pd, sizeof *pd, &g);
	pd->ptr = cpd;
	ibvl_use(L, -1, -2); /* pd:context() is its first used object */
	ibvl_use(L, -1, 1);
	ibvl_track(L, -1);
}

static int id_field(lua_State *L, void *obj, const char *key)
{
	struct rdma_cm_id *cid = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "port_num") == 0)
		lua_pushinteger(L, cid->port_num);
	else if (strcmp(key, "ps") == 0)
		ibvl_push_enum(L, ibvl_cm_port_spaces, cid->ps);
	else if (strcmp(key, "qp_type") == 0)
		ibvl_push_enum(L, ibvl_qp_types, cid->qp_type);
	else if (strcmp(key, "context") == 0 && cid->verbs != NULL)
		push_borrowed(L, &borrowed_context, cid->verbs);
	else if (strcmp(key, "pd") == 0 && cid->pd != NULL)
		push_pd(L, cid);
	else if (strcmp(key, "event") == 0 && cid->event != NULL) {
		struct rdma_cm_event c; /* a copy: pushing may run a finalizer that closes the id */
		uint8_t data[IBVL_CM_DATA_MAX];
		int kind = ibvl_cm_copy_event(&c, data, cid->event);
		ibvl_cm_push_copy(L, &c, kind, 0);
	} else if (strcmp(key, "event") == 0 && ((struct ibvl_cm_id *)obj)->request != NULL) {
		ibvl_cm_push_request(L, ((struct ibvl_cm_id *)obj)->request);
	}
	else {
		for (int i = 0; owned_keys[i] != NULL; i++) {
			struct ibvl_obj *o = ((struct ibvl_cm_id *)obj)->owned[i];
			if (strcmp(key, owned_keys[i]) == 0 && o != NULL && o->ptr != NULL) {
				lua_getiuservalue(L, 1, 1);
				lua_getfield(L, -1, key);
				return 1;
			}
		}
		return 0;
	}
	return 1;
}

const struct ibvl_class ibvl_cm_id_class = {"ibverbs.cm_id", destroy_id, "rdma_destroy_id",
                                            id_field, 0};

static struct rdma_cm_id *check_id(lua_State *L)
{
	return ((struct ibvl_obj *)ibvl_check(L, 1, &ibvl_cm_id_class))->ptr;
}

/* A closed id userdata, for an id librdmacm is about to hand over. */
struct ibvl_cm_id *ibvl_cm_new_id(lua_State *L, struct ibvl_guard *g)
{
	struct ibvl_cm_id *id = ibvl_new(L, &ibvl_cm_id_class, sizeof *id, g);
	id->chan_slot = -1;
	id->pd_slot = -1;
	return id;
}

/* The userdata at idx takes cid; it uses the event channel at chan_idx (0: none). */
void ibvl_cm_adopt_id(lua_State *L, int idx, struct rdma_cm_id *cid, int chan_idx)
{
	struct ibvl_cm_id *id = lua_touserdata(L, idx);
	id->o.ptr = cid;
	cid->context = id;
	if (chan_idx != 0) {
		ibvl_use(L, idx, chan_idx);
		id->chan_slot = id->o.nrefs - 1;
	}
	ibvl_track(L, idx);
}

static const char *const id_fields[] = {"ps", NULL};

/* cm.create_id([channel,] [{ps = "tcp"}]), ch:create_id([{ps = "udp"}]) */
static int l_create_id(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ch = ibvl_test(L, 1, &ibvl_cm_channel_class);
	int attr = ch != NULL ? 2 : 1;
	if (ch == NULL && lua_isnil(L, 1))
		attr = 2; /* cm.create_id(nil, {...}) */
	int ps = RDMA_PS_TCP;
	if (!lua_isnoneornil(L, attr)) {
		ibvl_check_fields(L, attr, "attr", id_fields);
		ps = (int)ibvl_enum_field(L, attr, "ps", ibvl_cm_port_spaces, RDMA_PS_TCP);
	}
	ibvl_cm_new_id(L, &g);
	struct rdma_cm_id *cid;
	if (rdma_create_id(ch ? ch->ptr : NULL, &cid, NULL, (enum rdma_port_space)ps) != 0)
		return ibvl_fail(L, "rdma_create_id", errno);
	ibvl_cm_adopt_id(L, lua_gettop(L), cid, ch ? 1 : 0);
	return 1;
}

/* ---- addresses and routes ----------------------------------------------- */
static int l_bind_addr(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	struct sockaddr_storage ss;
	ibvl_check_sockaddr(L, 2, &ss);
	return ibvl_result(L, "rdma_bind_addr", rdma_bind_addr(cid, (struct sockaddr *)&ss));
}

/* id:resolve_addr(src_or_nil, dst [, timeout_ms = 2000]) */
static int l_resolve_addr(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	struct sockaddr_storage src, dst;
	if (!lua_isnil(L, 2))
		ibvl_check_sockaddr(L, 2, &src);
	ibvl_check_sockaddr(L, 3, &dst);
	int ms = (int)ibvl_opt_range(L, 4, 2000, 1, INT32_MAX);
	ibvl_cm_sync_prepare(lua_touserdata(L, 1));
	int rc = rdma_resolve_addr(cid, lua_isnil(L, 2) ? NULL : (struct sockaddr *)&src,
	                           (struct sockaddr *)&dst, ms);
	/* synchronous ids: the kernel reports within ms; 2 s more for a busy host */
	return ibvl_cm_sync_result(L, lua_touserdata(L, 1), "rdma_resolve_addr", rc,
	                           ms / 1000.0 + 2.0);
}

static int l_resolve_route(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	int ms = (int)ibvl_opt_range(L, 2, 2000, 1, INT32_MAX);
	if (cid->verbs == NULL)
		return ibvl_error(L, "the address is not resolved yet (resolve_addr, then wait for "
		                     "'addr_resolved')");
	ibvl_cm_sync_prepare(lua_touserdata(L, 1));
	int rc = rdma_resolve_route(cid, ms);
	return ibvl_cm_sync_result(L, lua_touserdata(L, 1), "rdma_resolve_route", rc,
	                           ms / 1000.0 + 2.0);
}

static int push_addr(lua_State *L, struct sockaddr *sa)
{
	ibvl_push_sockaddr(L, sa);
	return 1;
}

static int l_get_local_addr(lua_State *L)
{
	return push_addr(L, rdma_get_local_addr(check_id(L)));
}

static int l_get_peer_addr(lua_State *L)
{
	return push_addr(L, rdma_get_peer_addr(check_id(L)));
}

static int l_get_src_port(lua_State *L)
{
	lua_pushinteger(L, ntohs(rdma_get_src_port(check_id(L))));
	return 1;
}

static int l_get_dst_port(lua_State *L)
{
	lua_pushinteger(L, ntohs(rdma_get_dst_port(check_id(L))));
	return 1;
}

/* ---- connections --------------------------------------------------------- */
static const char *const conn_fields[] = {"private_data", "responder_resources",
                                          "initiator_depth", "flow_control", "retry_count",
                                          "rnr_retry_count", "srq", "qp_num", NULL};

/* The conn_param table at idx into p; NULL when absent. */
static struct rdma_conn_param *opt_conn_param(lua_State *L, int idx, struct rdma_conn_param *p)
{
	if (lua_isnoneornil(L, idx))
		return NULL;
	struct ibvl_cm_id *id = lua_touserdata(L, 1);
	ibvl_check_fields(L, idx, "conn_param", conn_fields);
	memset(p, 0, sizeof *p);
	size_t len = 0, max = 255 - id->connect_len;
	p->private_data = ibvl_str_field(L, idx, "private_data", &len);
	if (len > max)
		ibvl_error(L, "conn_param: field 'private_data': at most %d bytes, got %d", (int)max,
		           (int)len);
	p->private_data_len = (uint8_t)len;
	p->responder_resources =
		(uint8_t)ibvl_int_field(L, idx, "responder_resources", RDMA_MAX_RESP_RES, 0, 255);
	p->initiator_depth =
		(uint8_t)ibvl_int_field(L, idx, "initiator_depth", RDMA_MAX_INIT_DEPTH, 0, 255);
	p->flow_control = (uint8_t)ibvl_int_field(L, idx, "flow_control", 1, 0, 1);
	p->retry_count = (uint8_t)ibvl_int_field(L, idx, "retry_count", 7, 0, 7);
	p->rnr_retry_count = (uint8_t)ibvl_int_field(L, idx, "rnr_retry_count", 7, 0, 7);
	p->srq = (uint8_t)ibvl_bool_field(L, idx, "srq", 0);
	p->qp_num = (uint32_t)ibvl_int_field(L, idx, "qp_num", 0, 0, 0xffffff);
	return p;
}

/* id:connect([conn_param] [, timeout_s]), id:accept([conn_param] [, timeout_s]):
 * the timeout bounds a synchronous id's wait for the connection
 * (IBVL_CM_SYNC_TIMEOUT by default) */
static int connect_or_accept(lua_State *L, int accept)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct rdma_cm_id *cid = check_id(L);
	struct rdma_conn_param p;
	struct rdma_conn_param *pp = opt_conn_param(L, 2, &p);
	double timeout = ibvl_opt_timeout(L, 3, IBVL_CM_SYNC_TIMEOUT);
	ibvl_guard_end(L, &g);
	if (cid->verbs == NULL && !accept)
		return ibvl_error(L, "the route is not resolved yet (resolve_addr and resolve_route "
		                     "first, waiting for 'addr_resolved' and 'route_resolved')");
	if (cid->verbs == NULL)
		return ibvl_error(L, "the id has no connection request to accept (accept the id a "
		                     "'connect_request' event brings)");
	if (accept && pp == NULL && cid->qp == NULL)
		return luaL_argerror(L, 2, "conn_param with qp_num expected (the id has no QP)");
	ibvl_cm_sync_prepare(lua_touserdata(L, 1));
	int rc = accept ? rdma_accept(cid, pp) : rdma_connect(cid, pp);
	return ibvl_cm_sync_result(L, lua_touserdata(L, 1), accept ? "rdma_accept" : "rdma_connect",
	                           rc, timeout);
}

static int l_connect(lua_State *L)
{
	return connect_or_accept(L, 0);
}

static int l_accept(lua_State *L)
{
	return connect_or_accept(L, 1);
}

/* id:reject([private_data]); id:reject_ece([private_data]) (reason 35: ECE) */
static int reject(lua_State *L, int ece)
{
#if IBVL_HAVE_CM_ECE
	if (ece)
		ibvl_late_need(L, IBVL_LATE_rdma_reject_ece, "id:reject_ece");
#else
	if (ece)
		return ibvl_absent(L, "id:reject_ece", IBVL_SINCE_CM_ECE);
#endif
	struct rdma_cm_id *cid = check_id(L);
	size_t len = 0;
	const char *data = ibvl_opt_lstring(L, 2, &len);
	luaL_argcheck(L, len <= 255, 2, "private data of at most 255 bytes expected");
#if IBVL_HAVE_CM_ECE
	if (ece)
		return ibvl_result(L, "rdma_reject_ece", rdma_reject_ece(cid, data, (uint8_t)len));
#endif
	return ibvl_result(L, "rdma_reject", rdma_reject(cid, data, (uint8_t)len));
}

static int l_reject(lua_State *L)
{
	return reject(L, 0);
}

/* id:disconnect([timeout_s]) */
static int l_disconnect(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	double timeout = ibvl_opt_timeout(L, 2, IBVL_CM_SYNC_TIMEOUT);
	ibvl_cm_sync_prepare(lua_touserdata(L, 1));
	int rc = rdma_disconnect(cid);
	return ibvl_cm_sync_result(L, lua_touserdata(L, 1), "rdma_disconnect", rc, timeout);
}

static int l_establish(lua_State *L)
{
	return ibvl_result(L, "rdma_establish", rdma_establish(check_id(L)));
}

static int l_listen(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	int backlog = (int)ibvl_opt_range(L, 2, 0, 0, INT32_MAX);
	return ibvl_result(L, "rdma_listen", rdma_listen(cid, backlog));
}

/* id:migrate_id(channel | nil) */
static int l_migrate_id(lua_State *L)
{
	struct ibvl_cm_id *id = ibvl_check(L, 1, &ibvl_cm_id_class);
	struct ibvl_obj *ch = ibvl_opt(L, 2, &ibvl_cm_channel_class);
	if (rdma_migrate_id(id->o.ptr, ch ? ch->ptr : NULL) != 0)
		return ibvl_fail(L, "rdma_migrate_id", errno);
	if (ch != NULL && id->chan_slot >= 0) {
		ibvl_swap_use(L, 1, id->chan_slot, 2);
	} else if (ch != NULL) {
		ibvl_use(L, 1, 2);
		id->chan_slot = id->o.nrefs - 1;
	} else if (id->chan_slot >= 0) {
		ibvl_unuse(L, 1, id->chan_slot);
		if (id->pd_slot > id->chan_slot)
			id->pd_slot--; /* the slots after it moved down */
		id->chan_slot = -1;
	}
	lua_pushboolean(L, 1);
	return 1;
}

static const struct {
	const char *name;
	int level, optname, size; /* size 0: a string of bytes */
} options[] = {
	{"tos", RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, 1},
	{"reuseaddr", RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, sizeof(int)},
	{"afonly", RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, sizeof(int)},
	{"ack_timeout", RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, 1},
	{"ib_path", RDMA_OPTION_IB, RDMA_OPTION_IB_PATH, 0},
	{NULL, 0, 0, 0},
};

/* id:set_option(name, value): "tos", "ack_timeout" (0..255), "reuseaddr",
 * "afonly" (boolean or integer), "ib_path" (struct ibv_path_data bytes) */
static int l_set_option(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	const char *name = ibvl_check_lstring(L, 2, NULL);
	int i = 0;
	while (options[i].name != NULL && strcmp(options[i].name, name) != 0)
		i++;
	if (options[i].name == NULL)
		return luaL_argerror(L, 2, lua_pushfstring(L, "unknown option '%s' (expected 'tos', "
		                                              "'reuseaddr', 'afonly', 'ack_timeout' or "
		                                              "'ib_path')", name));
	uint8_t u8 = 0;
	int iv = 0;
	size_t len = (size_t)options[i].size;
	void *val = len == 1 ? (void *)&u8 : (void *)&iv;
	if (len == 0)
		val = (void *)ibvl_check_lstring(L, 3, &len);
	else if (lua_isboolean(L, 3))
		iv = lua_toboolean(L, 3);
	else if (len == 1)
		u8 = (uint8_t)ibvl_check_range(L, 3, 0, 255);
	else
		iv = (int)ibvl_check_range(L, 3, INT32_MIN, INT32_MAX);
	int rc = rdma_set_option(cid, options[i].level, options[i].optname, val, len);
	return ibvl_result(L, "rdma_set_option", rc);
}

/* ---- multicast ----------------------------------------------------------- */
static int l_join_multicast(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	struct sockaddr_storage ss;
	ibvl_check_sockaddr(L, 2, &ss);
	double timeout = ibvl_opt_timeout(L, 4, IBVL_CM_SYNC_TIMEOUT); /* synchronous ids */
	if (lua_isnoneornil(L, 3)) {
		ibvl_cm_sync_prepare(lua_touserdata(L, 1));
		int rc = rdma_join_multicast(cid, (struct sockaddr *)&ss, NULL);
		return ibvl_cm_sync_result(L, lua_touserdata(L, 1), "rdma_join_multicast", rc,
		                           timeout);
	}
	struct rdma_cm_join_mc_attr_ex a = {
		.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS,
		.join_flags = (uint32_t)ibvl_check_enum(L, 3, ibvl_cm_join_flags),
		.addr = (struct sockaddr *)&ss,
	};
	ibvl_cm_sync_prepare(lua_touserdata(L, 1));
	int rc = rdma_join_multicast_ex(cid, &a, NULL);
	return ibvl_cm_sync_result(L, lua_touserdata(L, 1), "rdma_join_multicast_ex", rc, timeout);
}

static int l_leave_multicast(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	struct sockaddr_storage ss;
	ibvl_check_sockaddr(L, 2, &ss);
	return ibvl_result(L, "rdma_leave_multicast",
	                   rdma_leave_multicast(cid, (struct sockaddr *)&ss));
}

/* ---- QP attributes, notify, ECE, the device list ---------------------------- */
/* id:init_qp_attr(qp_state) -> the attributes (a qp:modify table) that take a
 * QP the cm did not make to qp_state for this id's connection */
static int l_init_qp_attr(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof a);
	a.qp_state = (enum ibv_qp_state)ibvl_check_enum(L, 2, ibvl_qp_states);
	int mask = 0;
	if (rdma_init_qp_attr(cid, &a, &mask) != 0)
		return ibvl_fail(L, "rdma_init_qp_attr", errno);
	ibvl_push_qp_attr_mask(L, &a, mask);
	return 1;
}

/* id:notify(event_type): tells the cm of an event on a QP it did not make
 * ("comm_est": data arrived before the connection was established) */
static int l_notify(lua_State *L)
{
	struct rdma_cm_id *cid = check_id(L);
	int ev = (int)ibvl_check_enum(L, 2, ibvl_event_types);
	return ibvl_result(L, "rdma_notify", rdma_notify(cid, (enum ibv_event_type)ev));
}

/* id:set_local_ece{vendor_id =, options =}: what connect/accept offer */
static int l_set_local_ece(lua_State *L)
{
#if IBVL_HAVE_CM_ECE
	static const char *const ece_fields[] = {"vendor_id", "options", NULL};
	ibvl_late_need(L, IBVL_LATE_rdma_set_local_ece, "id:set_local_ece");
	struct rdma_cm_id *cid = check_id(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "ece", ece_fields);
	struct ibv_ece ece = {
		.vendor_id = (uint32_t)ibvl_int_field(L, 2, "vendor_id", 0, 0, UINT32_MAX),
		.options = (uint32_t)ibvl_int_field(L, 2, "options", 0, 0, UINT32_MAX),
	};
	return ibvl_result(L, "rdma_set_local_ece", rdma_set_local_ece(cid, &ece));
#else
	return ibvl_absent(L, "id:set_local_ece", IBVL_SINCE_CM_ECE);
#endif
}

/* id:get_remote_ece() -> {vendor_id =, options =}: what the peer offered */
static int l_get_remote_ece(lua_State *L)
{
#if IBVL_HAVE_CM_ECE
	ibvl_late_need(L, IBVL_LATE_rdma_get_remote_ece, "id:get_remote_ece");
	struct rdma_cm_id *cid = check_id(L);
	struct ibv_ece ece;
	memset(&ece, 0, sizeof ece);
	if (rdma_get_remote_ece(cid, &ece) != 0)
		return ibvl_fail(L, "rdma_get_remote_ece", errno);
	lua_createtable(L, 0, 2);
	ibvl_set_int(L, "vendor_id", ece.vendor_id);
	ibvl_set_int(L, "options", ece.options);
	return 1;
#else
	return ibvl_absent(L, "id:get_remote_ece", IBVL_SINCE_CM_ECE);
#endif
}

static int l_reject_ece(lua_State *L)
{
	return reject(L, 1);
}

static int free_devices(lua_State *L)
{
	struct ibv_context ***list = lua_touserdata(L, 1);
	if (*list != NULL)
		rdma_free_devices(*list);
	*list = NULL;
	return 0;
}

/* cm.get_devices(): librdmacm's contexts, one per device, borrowed (closing
 * one destroys nothing).  Each keeps the list, which holds librdmacm's
 * reference to its device, until the context is collected. */
static int l_get_devices(lua_State *L)
{
	struct ibv_context ***list = lua_newuserdatauv(L, sizeof *list, 0);
	*list = NULL;
	if (luaL_newmetatable(L, "ibverbs.cm_device_list")) {
		lua_pushcfunction(L, free_devices);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	int n = 0, hold = lua_gettop(L);
	*list = rdma_get_devices(&n);
	if (*list == NULL)
		return ibvl_fail(L, "rdma_get_devices", errno);
	lua_createtable(L, n, 0);
	for (int i = 0; i < n; i++) {
		ibvl_cm_push_context(L, (*list)[i]);
		lua_getiuservalue(L, -1, 1);
		lua_pushvalue(L, hold);
		lua_setfield(L, -2, "device_list");
		lua_pop(L, 1);
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

void ibvl_open_cm_id(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"bind_addr", l_bind_addr}, {"resolve_addr", l_resolve_addr},
		{"resolve_route", l_resolve_route}, {"listen", l_listen},
		{"connect", l_connect}, {"accept", l_accept},
		{"reject", l_reject}, {"disconnect", l_disconnect}, {"establish", l_establish},
		{"migrate_id", l_migrate_id}, {"set_option", l_set_option},
		{"get_local_addr", l_get_local_addr}, {"get_peer_addr", l_get_peer_addr},
		{"get_src_port", l_get_src_port}, {"get_dst_port", l_get_dst_port},
		{"join_multicast", l_join_multicast}, {"leave_multicast", l_leave_multicast},
		{"init_qp_attr", l_init_qp_attr}, {"notify", l_notify},
		{"set_local_ece", l_set_local_ece}, {"get_remote_ece", l_get_remote_ece},
		{"reject_ece", l_reject_ece}, {NULL, NULL},
	};
	static const luaL_Reg ch_methods[] = {{"create_id", l_create_id}, {NULL, NULL}};
	static const luaL_Reg fns[] = {
		{"create_id", l_create_id}, {"get_devices", l_get_devices}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_cm_id_class, methods);
	ibvl_add_methods(L, ibvl_cm_channel_class.name, ch_methods);
	ibvl_cm_functions(L, fns);
}
