/*
 * roce_capture.c: the RoCE v2 packets an interface carries, as the wire has
 * them (spec/nodes/flow_sport_spec.lua compiles and runs it; root: a packet
 * socket).
 *
 *   roce_capture IFACE OUTFILE SECONDS
 *
 * Writes one line a packet of IPv4/UDP to port 4791 that IFACE sends or
 * receives, until OUTFILE.stop exists or SECONDS pass:
 *   "in|out SRC DST SPORT DQPN OPCODE"   (addresses dotted; DQPN and OPCODE
 *                                         from the base transport header, -1
 *                                         when the payload is shorter than one)
 * then "drops N" (the packets the kernel could not queue for it: its buffer
 * is 16 MB), and creates OUTFILE.ready once it listens.  Every protocol is
 * taken (ETH_P_ALL: a tap for one protocol sees no outgoing packet), IPv4
 * kept.  Exit status 0, or 1 with the failing call named on stderr.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int die(const char *what)
{
	fprintf(stderr, "roce_capture: %s: %s\n", what, strerror(errno));
	return 1;
}

static int exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* One packet (an IPv4 datagram, from its header on) as a line of out, when it is RoCE v2. */
static void packet(FILE *out, const unsigned char *p, ssize_t n, int outgoing)
{
	if (n < (ssize_t)sizeof(struct iphdr))
		return;
	struct iphdr ip;
	memcpy(&ip, p, sizeof ip);
	size_t hl = (size_t)ip.ihl * 4;
	if (ip.version != 4 || ip.protocol != IPPROTO_UDP || n < (ssize_t)(hl + sizeof(struct udphdr)))
		return;
	struct udphdr udp;
	memcpy(&udp, p + hl, sizeof udp);
	if (ntohs(udp.dest) != 4791)
		return;
	const unsigned char *bth = p + hl + sizeof udp;
	ssize_t left = n - (ssize_t)(hl + sizeof udp);
	long dqpn = -1, opcode = -1;
	if (left >= 12) {
		opcode = bth[0];
		dqpn = ((long)bth[5] << 16) | ((long)bth[6] << 8) | bth[7];
	}
	char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &ip.saddr, s, sizeof s);
	inet_ntop(AF_INET, &ip.daddr, d, sizeof d);
	fprintf(out, "%s %s %s %u %ld %ld\n", outgoing ? "out" : "in", s, d, ntohs(udp.source), dqpn, opcode);
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: roce_capture IFACE OUTFILE SECONDS\n");
		return 2;
	}
	char stop[4096], ready[4096];
	snprintf(stop, sizeof stop, "%s.stop", argv[2]);
	snprintf(ready, sizeof ready, "%s.ready", argv[2]);
	unsigned idx = if_nametoindex(argv[1]);
	if (idx == 0)
		return die("if_nametoindex");
	int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_ALL));
	if (fd < 0)
		return die("socket");
	int size = 16 << 20;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size) != 0)
		return die("setsockopt SO_RCVBUFFORCE");
	struct sockaddr_ll sll;
	memset(&sll, 0, sizeof sll);
	sll.sll_family = AF_PACKET;
	sll.sll_protocol = htons(ETH_P_ALL);
	sll.sll_ifindex = (int)idx;
	if (bind(fd, (struct sockaddr *)&sll, sizeof sll) != 0)
		return die("bind");
	FILE *out = fopen(argv[2], "w");
	if (out == NULL)
		return die(argv[2]);
	FILE *r = fopen(ready, "w");
	if (r == NULL)
		return die(ready);
	fclose(r);
	time_t end = time(NULL) + atoi(argv[3]);
	while (!exists(stop) && time(NULL) < end) {
		struct pollfd pfd = {fd, POLLIN, 0};
		if (poll(&pfd, 1, 100) <= 0)
			continue;
		unsigned char buf[2048];
		struct sockaddr_ll from;
		socklen_t len = sizeof from;
		ssize_t n = recvfrom(fd, buf, sizeof buf, 0, (struct sockaddr *)&from, &len);
		if (n > 0 && from.sll_protocol == htons(ETH_P_IP))
			packet(out, buf, n, from.sll_pkttype == PACKET_OUTGOING);
	}
	struct tpacket_stats st;
	socklen_t sl = sizeof st;
	if (getsockopt(fd, SOL_PACKET, PACKET_STATISTICS, &st, &sl) != 0)
		return die("getsockopt PACKET_STATISTICS");
	fprintf(out, "drops %u\n", st.tp_drops);
	fclose(out);
	close(fd);
	return 0;
}
