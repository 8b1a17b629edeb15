/*
 * comp_channel.c: completion event channels (ibverbs.comp_channel).
 *
 *   local ch = assert(ctx:create_comp_channel())
 *   local cq = assert(ctx:create_cq{cqe = 64, channel = ch})
 *   cq:req_notify()
 *   local got = ch:get_event(1.0)   -- the cq, or nil, msg, ETIMEDOUT
 *   got:ack_events(1)               -- also done for you when the cq closes
 *   ch.fd
 */
#include <fcntl.h>
#include <string.h>

#include "verbs/cq.h"
#include "verbs/verbs.h"

static int destroy_channel(struct ibvl_obj *o, void *ptr)
{
	(void)o;
	return ibv_destroy_comp_channel(ptr);
}

static int channel_field(lua_State *L, void *obj, const char *key)
{
	struct ibv_comp_channel *ch = ((struct ibvl_obj *)obj)->ptr;
	if (strcmp(key, "fd") != 0)
		return 0;
	lua_pushinteger(L, ch->fd);
	return 1;
}

const struct ibvl_class ibvl_comp_channel_class = {"ibverbs.comp_channel", destroy_channel,
                                              "ibv_destroy_comp_channel", channel_field, 0};

static int l_create_comp_channel(lua_State *L)
{
	struct ibvl_guard g;
	ibvl_guard_begin(&g);
	struct ibvl_obj *ctx = ibvl_check(L, 1, &ibvl_context_class);
	struct ibvl_obj *o = ibvl_new(L, &ibvl_comp_channel_class, sizeof *o, &g);
	o->ptr = ibv_create_comp_channel(ctx->ptr);
	if (o->ptr == NULL)
		return ibvl_fail(L, "ibv_create_comp_channel", errno);
	ibvl_use(L, -1, 1);
	return 1;
}

/* ch:get_event([timeout_s]) -> cq; the event is counted on the cq for ack_events */
static int l_get_event(lua_State *L)
{
	struct ibvl_obj *o = ibvl_check(L, 1, &ibvl_comp_channel_class);
	struct ibv_comp_channel *ch = o->ptr;
	if (!ibvl_wait_fd(L, ch->fd, 2, "ibv_get_cq_event"))
		return ibvl_fail(L, "ibv_get_cq_event", ETIMEDOUT);
	int fl = fcntl(ch->fd, F_GETFL);
	fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
	struct ibv_cq *cq;
	void *cq_context;
	int rc = ibv_get_cq_event(ch, &cq, &cq_context);
	int err = errno;
	fcntl(ch->fd, F_SETFL, fl);
	if (rc != 0)
		return ibvl_fail(L, "ibv_get_cq_event", err == EAGAIN ? ETIMEDOUT : err);
	if (!ibvl_push_tracked(L, cq)) { /* cannot happen while the cq holds the channel */
		ibv_ack_cq_events(cq, 1);
		return ibvl_fail(L, "ibv_get_cq_event", ENOENT);
	}
	((struct ibvl_cq *)lua_touserdata(L, -1))->unacked++;
	return 1;
}

void ibvl_open_comp_channel(lua_State *L)
{
	static const luaL_Reg methods[] = {{"get_event", l_get_event}, {NULL, NULL}};
	static const luaL_Reg ctx_methods[] = {
		{"create_comp_channel", l_create_comp_channel}, {NULL, NULL},
	};
	ibvl_register(L, &ibvl_comp_channel_class, methods);
	ibvl_add_methods(L, ibvl_context_class.name, ctx_methods);
}
