/*
 * trace.c: where one flow's packets go, hop by hop: TTL-limited UDP probes
 * carrying the flow's own 5-tuple, their ICMP answers read through IP_RECVERR.
 *
 *   local hops, reached = ibv.trace_flow{src = "10.0.1.11", dst = "10.0.2.13", sport = 49153,
 *                                        dport = 4791, max_hops = 8, timeout_ms = 300, probes = 1}
 *   -- hops {"10.0.1.1", false, "10.0.9.2"} (false: that hop did not answer); reached: the
 *   -- destination answered.  nil, "bind 10.0.1.11:49153: Address already in use (...)", errno
 *   -- when the flow cannot be probed (its source port taken, src not this host's, ...)
 *   local res = ibv.trace_flows{{src = ..., dst = ..., sport = ...}, ...}  -- all at once
 *   -- res[i] = {hops = {...}, reached = true|false} or {error = "...", errno = n}
 *
 * A flow's fields: src and dst (IPv4 text; src an address of this host), sport
 * (1 to 65535), dport (default 4791, RoCE v2's), max_hops (1 to 64, default 8),
 * timeout_ms (a probe's wait, 1 to 60000, default 300), probes (per hop, 1 to
 * 10, default 1: more send a silent hop another probe), gap (stop after this
 * many silent hops in a row, 1 to 64, default 3).
 *
 * Each flow has its own UDP socket, bound to src:sport and connected to
 * dst:dport, so that its probes carry exactly the flow's 5-tuple and a
 * router's ECMP hash sends them where it sends the flow.  Hop h's probe
 * leaves with IP_TTL h; the router where it expires answers ICMP time
 * exceeded, which the kernel queues on the socket's error queue (IP_RECVERR):
 * read with MSG_ERRQUEUE, its sock_extended_err names the router
 * (SO_EE_OFFENDER).  No raw socket, no privilege.  The destination answers
 * when nothing listens on dport (ICMP port unreachable): reached.  A host
 * whose kernel runs rxe owns UDP 4791 and drops the probe without an answer:
 * its hop stays silent and reached false.  A router's "unreachable" ends the
 * trace at that router.  A trace ends when the destination answers, at
 * max_hops, or after gap silent hops in a row; the silent hops after the last
 * answer are left out of hops (a silent destination and silent routers past
 * the last answer look alike), so one segment to an rxe peer gives {}.
 *
 * A probe's payload is 8 bytes ("ibvT", its hop, 0, the flow's index): fewer
 * than a RoCE v2 base transport header (12), so an rxe destination drops it
 * before reading it as a packet.  One probe per flow is in flight at a time;
 * an answer whose quoted payload names another hop (a late answer to an
 * earlier probe) is not taken.  The flows of trace_flows (up to 1024, one
 * socket each) are probed at once.  Routers rate-limit the ICMP they send
 * (Linux: net.ipv4.icmp_ratelimit, about one a second to a host after a
 * short burst), so many probes through one router at once may find it
 * silent: probes > 1 asks again.  Bad arguments raise, naming the field (and
 * in trace_flows the flow: "flow 2: field 'src': ..."); SIGINT raises
 * "<call>: interrupted".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/errqueue.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/args.h"
#include "base/err.h"
#include "base/wait.h"
#include "net/trace.h"

#define MAX_HOPS 64
#define MAX_FLOWS 1024
#define PAYLOAD 8

struct flow {
	struct sockaddr_in src, dst;
	int max_hops, probes, gap;
	double timeout;   /* a probe's wait, seconds */
	int fd;           /* -1: not open */
	int index;        /* 0-based, in the payload */
	int ttl;          /* the hop being probed */
	int tries;        /* probes sent to it */
	int silent;       /* silent hops in a row */
	double deadline;  /* when the probe in flight times out; 0: none in flight */
	int last;         /* the highest hop probed */
	int reached, done;
	int err;          /* errno of the call that failed (what) */
	const char *what;
	unsigned char answered[MAX_HOPS];
	uint32_t hop[MAX_HOPS]; /* who answered (network order; 0: unknown) */
};

static const char *const flow_fields[] = {"src",    "dst",        "sport",  "dport", "max_hops",
                                          "timeout_ms", "probes", "gap",    NULL};

static void addr_field(lua_State *L, int idx, const char *field, struct sockaddr_in *sa)
{
	const char *s = ibvl_str_field(L, idx, field, NULL);
	if (s == NULL)
		ibvl_error(L, "field '%s': an IPv4 address expected, got nil", field);
	memset(sa, 0, sizeof *sa);
	sa->sin_family = AF_INET;
	if (inet_pton(AF_INET, s, &sa->sin_addr) != 1)
		ibvl_error(L, "field '%s': an IPv4 address expected, got '%s'", field, s);
}

/* The flow table at idx into f (raises on a bad field). */
static void parse_flow(lua_State *L, int idx, struct flow *f, int index)
{
	ibvl_check_fields(L, idx, "flow", flow_fields);
	memset(f, 0, sizeof *f);
	f->fd = -1;
	f->index = index;
	addr_field(L, idx, "src", &f->src);
	addr_field(L, idx, "dst", &f->dst);
	lua_Integer sport = ibvl_int_field(L, idx, "sport", -1, 1, 65535);
	if (sport < 0)
		ibvl_error(L, "field 'sport': a UDP port (1 to 65535) expected, got nil");
	f->src.sin_port = htons((uint16_t)sport);
	f->dst.sin_port = htons((uint16_t)ibvl_int_field(L, idx, "dport", 4791, 1, 65535));
	f->max_hops = (int)ibvl_int_field(L, idx, "max_hops", 8, 1, MAX_HOPS);
	f->timeout = (double)ibvl_int_field(L, idx, "timeout_ms", 300, 1, 60000) / 1000.0;
	f->probes = (int)ibvl_int_field(L, idx, "probes", 1, 1, 10);
	f->gap = (int)ibvl_int_field(L, idx, "gap", 3, 1, MAX_HOPS);
}

static void fail(struct flow *f, const char *what)
{
	f->err = errno;
	f->what = what;
	f->done = 1;
}

/* The flow's socket: bound to src:sport, connected to dst:dport, its ICMP errors queued. */
static void open_flow(struct flow *f)
{
	int one = 1;
	f->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (f->fd < 0)
		fail(f, "socket");
	else if (setsockopt(f->fd, IPPROTO_IP, IP_RECVERR, &one, sizeof one) != 0)
		fail(f, "setsockopt IP_RECVERR");
	else if (bind(f->fd, (const struct sockaddr *)&f->src, sizeof f->src) != 0)
		fail(f, "bind");
	else if (connect(f->fd, (const struct sockaddr *)&f->dst, sizeof f->dst) != 0)
		fail(f, "connect");
	f->ttl = 1;
}

/* The probe in flight is over (answered or not): the next hop, or the end. */
static void next_hop(struct flow *f, int answered)
{
	f->deadline = 0;
	f->silent = answered ? 0 : f->silent + 1;
	if (f->reached || f->done || f->ttl >= f->max_hops || f->silent >= f->gap) {
		f->done = 1;
		return;
	}
	f->ttl++;
	f->tries = 0;
}

/* One message of the error queue: an ICMP answer to the probe in flight ends its hop. */
static void answer(struct flow *f, struct msghdr *m, const unsigned char *data, ssize_t n)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c != NULL; c = CMSG_NXTHDR(m, c)) {
		if (c->cmsg_level != IPPROTO_IP || c->cmsg_type != IP_RECVERR)
			continue;
		struct sock_extended_err *ee = (struct sock_extended_err *)(void *)CMSG_DATA(c);
		if (ee->ee_origin != SO_EE_ORIGIN_ICMP || f->deadline == 0 || f->done)
			continue;
		/* the quoted payload, when the router quoted it: this hop's probe? */
		if (n >= PAYLOAD && (memcmp(data, "ibvT", 4) != 0 || data[4] != (unsigned char)f->ttl))
			continue;
		if (ee->ee_type != ICMP_TIME_EXCEEDED && ee->ee_type != ICMP_DEST_UNREACH)
			continue;
		struct sockaddr_in who;
		memcpy(&who, SO_EE_OFFENDER(ee), sizeof who);
		uint32_t a = who.sin_family == AF_INET ? who.sin_addr.s_addr : 0;
		f->answered[f->ttl - 1] = 1;
		f->hop[f->ttl - 1] = a;
		if (ee->ee_type == ICMP_DEST_UNREACH) {
			/* the destination itself (nothing on dport), or a router that cannot go on */
			f->reached = a == f->dst.sin_addr.s_addr;
			f->done = 1;
		}
		next_hop(f, 1);
	}
}

/* Every message waiting on the flow's error queue, and any datagram the destination sent. */
static void drain(struct flow *f)
{
	for (;;) {
		unsigned char data[64];
		char ctl[512];
		struct iovec iov = {data, sizeof data};
		struct msghdr m;
		memset(&m, 0, sizeof m);
		m.msg_iov = &iov;
		m.msg_iovlen = 1;
		m.msg_control = ctl;
		m.msg_controllen = sizeof ctl;
		ssize_t n = recvmsg(f->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		answer(f, &m, data, n);
	}
	char sink[64];
	while (recv(f->fd, sink, sizeof sink, MSG_DONTWAIT) >= 0) {
	}
}

/* The probe of the flow's hop: late answers read first, then sent with IP_TTL the hop. */
static void send_probe(struct flow *f, double now)
{
	unsigned char p[PAYLOAD] = {'i', 'b', 'v', 'T', (unsigned char)f->ttl, 0,
	                            (unsigned char)(f->index >> 8), (unsigned char)f->index};
	drain(f);
	if (f->done || f->deadline != 0)
		return;
	if (setsockopt(f->fd, IPPROTO_IP, IP_TTL, &f->ttl, sizeof f->ttl) != 0) {
		fail(f, "setsockopt IP_TTL");
		return;
	}
	/* an ICMP error that came after the drain is pending on the socket and
	 * fails one send (and is cleared by it): read the queue and send again */
	if (send(f->fd, p, sizeof p, 0) != (ssize_t)sizeof p) {
		drain(f);
		if (f->done)
			return;
		if (send(f->fd, p, sizeof p, 0) != (ssize_t)sizeof p) {
			fail(f, "send");
			return;
		}
	}
	f->tries++;
	f->deadline = now + f->timeout;
	if (f->ttl > f->last)
		f->last = f->ttl;
}

/* The probe in flight of a flow that timed out: another try, or the next hop. */
static void timed_out(struct flow *f)
{
	if (f->tries < f->probes)
		f->deadline = 0;
	else
		next_hop(f, 0);
}

/* Probes every flow to its end (sockets opened and closed here); 1 when SIGINT came. */
static int run(lua_State *L, struct flow *fl, int n)
{
	struct pollfd *fds = lua_newuserdata(L, (size_t)n * sizeof *fds);
	int *which = lua_newuserdata(L, (size_t)n * sizeof *which);
	for (int i = 0; i < n; i++)
		open_flow(&fl[i]);
	struct ibvl_sigint s;
	ibvl_sigint_begin(&s);
	for (;;) {
		double now = ibvl_monotonic(), until = 0;
		int k = 0;
		for (int i = 0; i < n; i++) {
			struct flow *f = &fl[i];
			if (!f->done && f->deadline == 0)
				send_probe(f, now);
			if (f->done)
				continue;
			if (until == 0 || f->deadline < until)
				until = f->deadline;
			fds[k].fd = f->fd;
			fds[k].events = POLLIN;
			fds[k].revents = 0;
			which[k++] = i;
		}
		if (k == 0 || ibvl_sigint_pending())
			break;
		int rc = ibvl_ppoll(fds, (nfds_t)k, until - now);
		if (ibvl_sigint_pending())
			break;
		now = ibvl_monotonic();
		for (int j = 0; j < k; j++) {
			struct flow *f = &fl[which[j]];
			if (rc > 0 && fds[j].revents != 0)
				drain(f);
			if (!f->done && f->deadline != 0 && now >= f->deadline)
				timed_out(f);
		}
	}
	for (int i = 0; i < n; i++)
		if (fl[i].fd >= 0)
			close(fl[i].fd);
	lua_pop(L, 2);
	return ibvl_sigint_end(&s);
}

/* The hops a flow found: an address, or false (silent), up to the last answer. */
static void push_hops(lua_State *L, const struct flow *f)
{
	int last = 0;
	for (int h = 1; h <= f->last; h++)
		if (f->answered[h - 1])
			last = h;
	lua_createtable(L, last, 0);
	for (int h = 1; h <= last; h++) {
		char a[INET_ADDRSTRLEN];
		struct in_addr in = {f->hop[h - 1]};
		if (f->answered[h - 1] && f->hop[h - 1] != 0 && inet_ntop(AF_INET, &in, a, sizeof a))
			lua_pushstring(L, a);
		else
			lua_pushboolean(L, 0);
		lua_rawseti(L, -2, h);
	}
}

/* Why a flow could not be probed: "bind 10.0.1.11:49153: Address already in use (...)". */
static void push_error(lua_State *L, const struct flow *f)
{
	const struct sockaddr_in *sa = strcmp(f->what, "connect") == 0 ? &f->dst : &f->src;
	char a[INET_ADDRSTRLEN] = "?";
	inet_ntop(AF_INET, &sa->sin_addr, a, sizeof a);
	const char *hint = f->err == EADDRINUSE ? " (another socket holds this source port: the flow "
	                                          "cannot be probed from it)"
	                   : f->err == EADDRNOTAVAIL ? " (not an address of this host)"
	                                             : "";
	lua_pushfstring(L, "%s %s:%d: %s%s", f->what, a, (int)ntohs(sa->sin_port), strerror(f->err),
	                hint);
}

/* ibv.trace_flow(flow): hops, reached; nil, msg, errno when it cannot be probed. */
static int l_trace_flow(lua_State *L)
{
	struct flow *f = lua_newuserdata(L, sizeof *f);
	parse_flow(L, 1, f, 0);
	if (run(L, f, 1))
		return ibvl_interrupted(L, "ibv.trace_flow");
	if (f->what != NULL) {
		lua_pushnil(L);
		push_error(L, f);
		lua_pushinteger(L, f->err);
		return 3;
	}
	push_hops(L, f);
	lua_pushboolean(L, f->reached);
	return 2;
}

/* ibv.trace_flows(list): per flow {hops =, reached =} or {error =, errno =}. */
static int l_trace_flows(lua_State *L)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
	if (n < 1 || n > MAX_FLOWS)
		return ibvl_argerror(L, 1, "flows", "a list of 1 to %d flows expected, got %d", MAX_FLOWS,
		                     (int)n);
	struct flow *fl = lua_newuserdata(L, (size_t)n * sizeof *fl);
	for (int i = 0; i < (int)n; i++) {
		int saved = ibvl_path_push("#flow", i + 1);
		lua_rawgeti(L, 1, i + 1);
		parse_flow(L, lua_gettop(L), &fl[i], i);
		lua_pop(L, 1);
		ibvl_path_pop(saved);
	}
	if (run(L, fl, (int)n))
		return ibvl_interrupted(L, "ibv.trace_flows");
	lua_createtable(L, (int)n, 0);
	for (int i = 0; i < (int)n; i++) {
		lua_createtable(L, 0, 2);
		if (fl[i].what != NULL) {
			push_error(L, &fl[i]);
			lua_setfield(L, -2, "error");
			lua_pushinteger(L, fl[i].err);
			lua_setfield(L, -2, "errno");
		} else {
			push_hops(L, &fl[i]);
			lua_setfield(L, -2, "hops");
			lua_pushboolean(L, fl[i].reached);
			lua_setfield(L, -2, "reached");
		}
		lua_rawseti(L, -2, i + 1);
	}
	return 1;
}

void ibvl_open_trace(lua_State *L)
{
	static const luaL_Reg funcs[] = {
		{"trace_flow", l_trace_flow}, {"trace_flows", l_trace_flows}, {NULL, NULL}};
	luaL_setfuncs(L, funcs, 0);
}
