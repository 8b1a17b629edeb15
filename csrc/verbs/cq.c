/*
 * cq.c: completion queues, plain and extended.
 *
 *   local cq = assert(ctx:create_cq{cqe = 256 [, channel = ch, comp_vector = 0]})
 *   local cqx = assert(ctx:create_cq{cqe = 256, wc_flags = {"byte_len", "imm", "qp_num"}})
 *   local wcs = ibv.wc_array(32)
 *   local n, bad = cq:poll(wcs)      -- fills wcs, returns the count; allocates nothing
 *   if bad then error(wcs:status(bad)) end  -- bad: the first unsuccessful completion
 *   for _, wc in ipairs(cq:poll(8)) do print(wc.wr_id, wc.status) end  -- tables
 *   cq:req_notify([solicited_only]); cq:ack_events(n); cq:resize(512); cq.cqe
 *   ctx:create_cq{cqe = 256, parent_domain = ppd}   -- a cq_ex on a parent domain
 * A cq_ex is polled with ibv_start_poll/ibv_end_poll and the
 * ibv_wc_read_* fields its wc_flags allow, through the same cq:poll.
 */
#include <string.h>

#include "verbs/cq.h"
#include "verbs/verbs.h"
#include "base/wait.h"

static int destroy_cq(struct ibvl_obj *o, void *ptr)
{
	struct ibvl_cq *cq = (struct ibvl_cq *)o;
	if (cq->unacked > 0) /* ibv_destroy_cq waits for every event to be acknowledged */
		ibv_ack_cq_events(ptr, cq->unacked);
	cq->unacked = 0;
	return ibv_destroy_cq(ptr);
}

static int cq_field(lua_State *L, void *obj, const char *key)
{
	struct ibvl_cq *cq = obj;
	if (strcmp(key, "cqe") == 0)
		lua_pushinteger(L, ((struct ibv_cq *)cq->o.ptr)->cqe);
	else if (strcmp(key, "extended") == 0)
		lua_pushboolean(L, cq->cqx != NULL);
	else
		return 0;
	return 1;
}

static int l_poll(lua_State *L);
static const luaL_Reg cq_hot[] = {{"poll", l_poll}, {NULL, NULL}};
const struct ibvl_class ibvl_cq_class = {"ibverbs.cq", destroy_cq, "ibv_destroy_cq", cq_field,
                                         cq_hot};

static struct ibvl_cq *check_cq(lua_State *L)
{
	return ibvl_check(L, 1, &ibvl_cq_class);
}

static const char *const cq_fields[] = {"cqe", "channel", "comp_vector", "wc_flags", "flags",
                                        "parent_domain", NULL};

/* ctx:create_cq(cqe | {cqe=, channel=, comp_vector=, wc_flags=, flags=});
 * ibv_create_cq_ex when wc_flags or flags are given, or for ctx:create_cq_ex. */
static int create_cq(lua_State *L, int ex)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibv_cq_init_attr_ex a = {.cqe = 1};
	struct ibvl_obj *ch = NULL, *pad = NULL;
	int chi = 0, padi = 0;
	if (lua_istable(L, 2)) {
		ibvl_check_fields(L, 2, "attr", cq_fields);
		a.cqe = (uint32_t)ibvl_int_field(L, 2, "cqe", 1, 0, UINT32_MAX);
		a.comp_vector = (uint32_t)ibvl_int_field(L, 2, "comp_vector", 0, 0, UINT32_MAX);
		ex = ex || ibvl_has_field(L, 2, "wc_flags") || ibvl_has_field(L, 2, "flags");
		a.wc_flags = (uint64_t)ibvl_flags_field(L, 2, "wc_flags", ibvl_wc_ex_flags,
		                                        IBV_WC_STANDARD_FLAGS);
		a.flags = (uint32_t)ibvl_int_field(L, 2, "flags", 0, 0, UINT32_MAX);
		if (a.flags)
			a.comp_mask |= IBV_CQ_INIT_ATTR_MASK_FLAGS;
		ch = ibvl_obj_field_keep(L, 2, "channel", &ibvl_comp_channel_class);
		chi = lua_gettop(L);
		pad = ibvl_obj_field_keep(L, 2, "parent_domain", &ibvl_pd_class);
		padi = lua_gettop(L);
		ex = ex || pad != NULL;
	} else {
		a.cqe = (uint32_t)ibvl_check_range(L, 2, 0, UINT32_MAX);
		a.wc_flags = IBV_WC_STANDARD_FLAGS;
	}
	if (!ex && a.cqe > INT32_MAX)
		ibvl_error(L, "cqe: %d at most for ibv_create_cq (its cqe is an int)", INT32_MAX);
	struct ibvl_cq *cq = ibvl_new(L, &ibvl_cq_class, sizeof *cq, &g);
	a.channel = ch ? ch->ptr : NULL;
#if IBVL_HAVE_CQ_PARENT_DOMAIN
	a.parent_domain = pad ? pad->ptr : NULL;
	a.comp_mask |= pad ? IBV_CQ_INIT_ATTR_MASK_PD : 0;
#else
	if (pad != NULL)
		return ibvl_absent(L, "ctx:create_cq: parent_domain", IBVL_SINCE_CQ_PARENT_DOMAIN);
#endif
	if (ex) {
		cq->cqx = ibv_create_cq_ex(ctx->ptr, &a);
		cq->o.ptr = cq->cqx ? ibv_cq_ex_to_cq(cq->cqx) : NULL;
		cq->wc_flags = a.wc_flags;
	} else {
		cq->o.ptr = ibv_create_cq(ctx->ptr, (int)a.cqe, NULL, a.channel, (int)a.comp_vector);
	}
	if (cq->o.ptr == NULL)
		return ibvl_fail(L, ex ? "ibv_create_cq_ex" : "ibv_create_cq", errno);
	int self = lua_gettop(L);
	ibvl_use(L, self, 1);
	if (ch != NULL)
		ibvl_use(L, self, chi);
	if (pad != NULL)
		ibvl_use(L, self, padi);
	ibvl_track(L, self);
	return 1;
}

static int l_create_cq(lua_State *L)
{
	return create_cq(L, 0);
}

static int l_create_cq_ex(lua_State *L)
{
	return create_cq(L, 1);
}

/* One completion of a cq_ex, read field by field into a struct ibv_wc. */
static void read_wc_ex(struct ibvl_cq *cq, struct ibv_wc *wc)
{
	struct ibv_cq_ex *x = cq->cqx;
	uint64_t f = cq->wc_flags;
	memset(wc, 0, sizeof *wc);
	wc->wr_id = x->wr_id;
	wc->status = x->status;
	wc->opcode = ibv_wc_read_opcode(x);
	wc->vendor_err = ibv_wc_read_vendor_err(x);
	wc->wc_flags = ibv_wc_read_wc_flags(x);
	if (f & IBV_WC_EX_WITH_BYTE_LEN)
		wc->byte_len = ibv_wc_read_byte_len(x);
	if ((f & IBV_WC_EX_WITH_IMM) && (wc->wc_flags & IBV_WC_WITH_IMM))
		wc->imm_data = ibv_wc_read_imm_data(x);
	else if (wc->wc_flags & IBV_WC_WITH_INV)
		wc->invalidated_rkey = ibv_wc_read_invalidated_rkey(x);
	if (f & IBV_WC_EX_WITH_QP_NUM)
		wc->qp_num = ibv_wc_read_qp_num(x);
	if (f & IBV_WC_EX_WITH_SRC_QP)
		wc->src_qp = ibv_wc_read_src_qp(x);
	if (f & IBV_WC_EX_WITH_SLID)
		wc->slid = (uint16_t)ibv_wc_read_slid(x);
	if (f & IBV_WC_EX_WITH_SL)
		wc->sl = ibv_wc_read_sl(x);
	if (f & IBV_WC_EX_WITH_DLID_PATH_BITS)
		wc->dlid_path_bits = ibv_wc_read_dlid_path_bits(x);
}

/* Polls up to n completions of the cq_ex into wc (ibvl_cq_poll); returns
 * the count or a negative errno.  A cq_ex is read one ibv_start_poll/
 * ibv_end_poll round per completion: rxe (rdma-core 44) moves past a free
 * slot when ibv_end_poll follows an ibv_next_poll that returned ENOENT, and
 * then reports stale entries. */
int ibvl_cq_poll_ex(struct ibvl_cq *cq, int n, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = {0};
	int got = 0;
	while (got < n) {
		int rc = ibv_start_poll(cq->cqx, &attr);
		if (rc == ENOENT)
			break;
		if (rc != 0)
			return got > 0 ? got : -rc;
		read_wc_ex(cq, &wc[got++]);
		ibv_end_poll(cq->cqx);
	}
	return got;
}

/* cq:poll(wcs) -> count filled in the wc array, first_bad;
 * cq:poll([n]) -> array of tables, first_bad
 * first_bad: the index of the first completion whose status is not success, or nil */
static int l_poll(lua_State *L)
{
	struct ibvl_cq *cq = ibvl_self(L);
	if (cq == NULL || cq->o.ptr == NULL)
		cq = check_cq(L);
	if (lua_type(L, 2) == LUA_TUSERDATA) {
		/* the wc array polled into last is known by its address (the CQ keeps it) */
		struct ibvl_wc_array *w = lua_touserdata(L, 2);
		if (w != cq->last_wcs)
			w = ibvl_check_wcs(L, 2);
		int got = ibvl_cq_poll(cq, w->n, w->wc);
		if (got < 0)
			return ibvl_fail(L, "ibv_poll_cq", -got);
		w->count = got;
		if (w != cq->last_wcs) {
			ibvl_anchor(L, 1, &cq->last_wcs, 2);
			cq->last_wcs = w;
		}
		lua_pushinteger(L, got);
		ibvl_push_first_bad(L, w->wc, got);
		return 2;
	}
	int n = (int)ibvl_opt_range(L, 2, 16, 1, 4096);
	struct ibv_wc *wc = lua_newuserdatauv(L, (size_t)n * sizeof *wc, 0);
	if (cq->o.ptr == NULL) /* closed by a finalizer the buffer's allocation ran */
		check_cq(L);
	int got = ibvl_cq_poll(cq, n, wc);
	if (got < 0)
		return ibvl_fail(L, "ibv_poll_cq", -got);
	lua_createtable(L, got, 0);
	for (int i = 0; i < got; i++) {
		ibvl_push_wc(L, &wc[i]);
		lua_rawseti(L, -2, i + 1);
	}
	ibvl_push_first_bad(L, wc, got);
	return 2;
}

static int l_req_notify(lua_State *L)
{
	struct ibvl_cq *cq = check_cq(L);
	int solicited = lua_toboolean(L, 2);
	return ibvl_result(L, "ibv_req_notify_cq", ibv_req_notify_cq(cq->o.ptr, solicited));
}

static int l_ack_events(lua_State *L)
{
	struct ibvl_cq *cq = check_cq(L);
	lua_Integer n = ibvl_opt_range(L, 2, cq->unacked, 0, UINT32_MAX);
	if ((unsigned int)n > cq->unacked)
		return luaL_argerror(L, 2, lua_pushfstring(L, "only %d event(s) to acknowledge",
		                                           (int)cq->unacked));
	ibv_ack_cq_events(cq->o.ptr, (unsigned int)n);
	cq->unacked -= (unsigned int)n;
	return 0;
}

static int l_resize(lua_State *L)
{
	struct ibvl_cq *cq = check_cq(L);
	int cqe = (int)ibvl_check_range(L, 2, 1, INT32_MAX);
	int rc = ibv_resize_cq(cq->o.ptr, cqe);
	if (rc != 0)
		return ibvl_fail(L, "ibv_resize_cq", rc);
	lua_pushinteger(L, ((struct ibv_cq *)cq->o.ptr)->cqe);
	return 1;
}

/* cq:wait(wcs, n [, timeout_s = 10]) -> completions gathered into wcs[1..];
 * timeout math.huge: until n came; SIGINT raises "cq:wait: interrupted". */
static int l_wait(lua_State *L)
{
	struct ibvl_cq *cq = ibvl_check(L, 1, &ibvl_cq_class);
	struct ibvl_wc_array *w = ibvl_check_wcs(L, 2);
	int n = (int)ibvl_check_range(L, 3, 1, w->n);
	double timeout = ibvl_opt_timeout(L, 4, 10.0);
	int got = ibvl_cq_poll(cq, n, w->wc); /* no signal handler when they are there */
	if (got < 0)
		return ibvl_fail(L, "ibv_poll_cq", -got);
	if (got < n) {
		double deadline = ibvl_monotonic() + timeout;
		struct ibvl_sigint s;
		ibvl_sigint_begin(&s);
		int err = 0;
		while (got < n && !ibvl_sigint_pending()) {
			int rc = ibvl_cq_poll(cq, n - got, &w->wc[got]);
			if (rc < 0) {
				err = -rc;
				break;
			}
			got += rc;
			if (rc == 0 && ibvl_monotonic() > deadline)
				break;
		}
		w->count = got;
		if (ibvl_sigint_end(&s))
			return ibvl_interrupted(L, "cq:wait");
		if (err)
			return ibvl_fail(L, "ibv_poll_cq", err);
	}
	w->count = got;
	lua_pushinteger(L, got);
	return 1;
}


/* ---- moderation, and the cq_ex fields a struct ibv_wc lacks ---------------
 *   cq:modify{cq_count = 16, cq_period = 10}   -- ibv_modify_cq (moderation, us)
 *   for _, wc in ipairs(cqx:poll_ex(8)) do print(wc.completion_ts, wc.flow_tag) end
 * poll_ex returns what cq:poll(n) does, plus each ibv_wc_read_* field the
 * cq's wc_flags enabled: completion_ts, completion_wallclock_ns, cvlan,
 * flow_tag, tm_info = {tag =, priv =}. */
static const char *const modify_fields[] = {"cq_count", "cq_period", NULL};

static int cq_modify(lua_State *L)
{
	check_cq(L);
	luaL_checktype(L, 2, LUA_TTABLE);
	ibvl_check_fields(L, 2, "attr", modify_fields);
	struct ibv_modify_cq_attr a;
	memset(&a, 0, sizeof a);
	a.attr_mask = IBV_CQ_ATTR_MODERATE;
	a.moderate.cq_count = (uint16_t)ibvl_int_field(L, 2, "cq_count", 0, 0, UINT16_MAX);
	a.moderate.cq_period = (uint16_t)ibvl_int_field(L, 2, "cq_period", 0, 0, UINT16_MAX);
	struct ibvl_cq *cq = check_cq(L);
	return ibvl_result(L, "ibv_modify_cq", ibv_modify_cq(cq->o.ptr, &a));
}

struct wc_extras {
	uint64_t ts, wallclock;
	uint32_t cvlan, flow_tag;
	struct ibv_wc_tm_info tm;
};

/* The extra fields of the current completion (inside a poll: no Lua). */
static void read_extras(struct ibvl_cq *cq, struct wc_extras *e)
{
	struct ibv_cq_ex *x = cq->cqx;
	uint64_t f = cq->wc_flags;
	memset(e, 0, sizeof *e);
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		e->ts = ibv_wc_read_completion_ts(x);
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		e->wallclock = ibv_wc_read_completion_wallclock_ns(x);
	if (f & IBV_WC_EX_WITH_CVLAN)
		e->cvlan = ibv_wc_read_cvlan(x);
	if (f & IBV_WC_EX_WITH_FLOW_TAG)
		e->flow_tag = ibv_wc_read_flow_tag(x);
	if (f & IBV_WC_EX_WITH_TM_INFO)
		ibv_wc_read_tm_info(x, &e->tm);
}

/* Adds the extras the cq's wc_flags enabled to the table at the top. */
static void set_extras(lua_State *L, uint64_t f, const struct wc_extras *e)
{
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		ibvl_set_u64(L, "completion_ts", e->ts);
	if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		ibvl_set_u64(L, "completion_wallclock_ns", e->wallclock);
	if (f & IBV_WC_EX_WITH_CVLAN)
		ibvl_set_int(L, "cvlan", e->cvlan);
	if (f & IBV_WC_EX_WITH_FLOW_TAG)
		ibvl_set_int(L, "flow_tag", e->flow_tag);
	if (f & IBV_WC_EX_WITH_TM_INFO) {
		lua_createtable(L, 0, 2);
		ibvl_set_u64(L, "tag", e->tm.tag);
		ibvl_set_int(L, "priv", e->tm.priv);
		lua_setfield(L, -2, "tm_info");
	}
}

/* cqx:poll_ex([n]) -> array of completion tables with the extended fields;
 * each completion is read whole in C (one start/end round, as ibvl_cq_poll
 * does) before any table is made. */
static int l_poll_ex(lua_State *L)
{
	struct ibvl_cq *cq = check_cq(L);
	int n = (int)ibvl_opt_range(L, 2, 16, 1, 4096);
	if (cq->cqx == NULL)
		return luaL_argerror(L, 1, "a CQ made without wc_flags (use cq:poll)");
	lua_createtable(L, n < 16 ? n : 16, 0);
	struct ibv_poll_cq_attr attr = {0};
	for (int got = 0; got < n; got++) {
		cq = check_cq(L); /* the tables made may have run a finalizer */
		int rc = ibv_start_poll(cq->cqx, &attr);
		if (rc == ENOENT)
			break;
		if (rc != 0) {
			if (got > 0)
				break;
			return ibvl_fail(L, "ibv_start_poll", rc);
		}
		struct ibv_wc wc;
		struct wc_extras e;
		read_wc_ex(cq, &wc);
		read_extras(cq, &e);
		ibv_end_poll(cq->cqx);
		uint64_t f = cq->wc_flags;
		ibvl_push_wc(L, &wc);
		set_extras(L, f, &e);
		lua_rawseti(L, -2, got + 1);
	}
	return 1;
}

void ibvl_open_cq(lua_State *L)
{
	static const luaL_Reg methods[] = {
		{"poll", l_poll}, {"req_notify", l_req_notify}, {"ack_events", l_ack_events},
		{"resize", l_resize}, {"modify", cq_modify}, {"poll_ex", l_poll_ex}, {"wait", l_wait},
		{NULL, NULL},
	};
	static const luaL_Reg ctx_methods[] = {
		{"create_cq", l_create_cq}, {"create_cq_ex", l_create_cq_ex}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_cq_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
