/* worker_dial.c: the egress worker's upstream: the name resolved, every address checked
 * against the policy (this host's own considered), the first that answers connected. */
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/worker.h"

/* May the connection go to sa, this host's own addresses considered (ERANGE_HOST, and an own
 * address is never "public" or "private")? egress_own_addrs holds 32; a host running many
 * sandboxes has more (a bridge and a link-local address per network). Being own matters
 * only when sa is one of them, so the list is offered in slices of 32: a slice that holds sa
 * is the one whose verdict differs from the verdict with none, and it is the answer. */
static bool addr_allowed(const struct egress_policy *p, const struct sockaddr *sa,
			 const struct ifaddrs *ifa)
{
	static const struct egress_own_addrs none;
	static struct egress_own_addrs slice;
	bool base = egress_addr_allowed(p, sa, &none);
	const struct ifaddrs *e = ifa;

	while (e) {
		slice.n = 0;
		for (; e && slice.n < ARRAY_LEN(slice.addr); e = e->ifa_next) {
			int fam = e->ifa_addr ? e->ifa_addr->sa_family : AF_UNSPEC;
			if (fam != AF_INET && fam != AF_INET6)
				continue;
			memset(&slice.addr[slice.n], 0, sizeof(slice.addr[0]));
			memcpy(&slice.addr[slice.n++], e->ifa_addr, fam == AF_INET ?
			       sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6));
		}
		if (slice.n > 0 && egress_addr_allowed(p, sa, &slice) != base)
			return !base;
	}
	return base;
}

/* addr_allowed, with this host's addresses as agenticd sent them (the same slices). */
static bool addr_allowed_rec(const struct egress_policy *p, const struct sockaddr *sa,
			     const uint8_t *rec, long n)
{
	static const struct egress_own_addrs none;
	static struct egress_own_addrs slice;
	bool base = egress_addr_allowed(p, sa, &none);
	long k = 0;

	while (k < n) {
		slice.n = 0;
		for (; k < n && slice.n < ARRAY_LEN(slice.addr); k++) {
			const uint8_t *r = rec + k * OWN_RECORD;
			struct sockaddr_storage *ss = &slice.addr[slice.n++];

			memset(ss, 0, sizeof(*ss));
			if (r[0] == 4) {
				struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
				a4->sin_family = AF_INET;
				memcpy(&a4->sin_addr, r + 1, 4);
			} else {
				struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
				a6->sin6_family = AF_INET6;
				memcpy(&a6->sin6_addr, r + 1, 16);
			}
		}
		if (egress_addr_allowed(p, sa, &slice) != base)
			return !base;
	}
	return base;
}

static int connect_one(const struct addrinfo *a)
{
	int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	struct pollfd p;
	int err = 0, n;
	socklen_t el = sizeof(err);

	if (fd < 0)
		return -1;
	/* a relay forwards what it has at once (see the init's listener) */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){ 1 }, sizeof(int));
	if (connect(fd, a->ai_addr, a->ai_addrlen) != 0 && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	p.fd = fd;
	p.events = POLLOUT;
	do
		n = poll(&p, 1, CONNECT_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0 || err != 0) {
		close(fd);
		return -1;
	}
	/* blocking again: the route's TLS loop expects it; the relay uses MSG_DONTWAIT */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* Which address families this host can use, as AI_ADDRCONFIG asks it (musl: a UDP socket
 * of the family connected to its loopback), probed once: an armed worker does it before its
 * connection comes, so the four system calls a family are off the connection's path. */
static int families = -1; /* bit 0: IPv4, bit 1: IPv6 */


static bool family_usable(int family)
{
	const struct sockaddr_in lo4 = { .sin_family = AF_INET, .sin_port = htons(65535),
					 .sin_addr = { .s_addr = htonl(INADDR_LOOPBACK) } };
	const struct sockaddr_in6 lo6 = { .sin6_family = AF_INET6, .sin6_port = htons(65535),
					  .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC, IPPROTO_UDP);
	bool ok;

	if (fd < 0)
		return false;
	ok = family == AF_INET ? connect(fd, (const struct sockaddr *)&lo4, sizeof(lo4)) == 0
			       : connect(fd, (const struct sockaddr *)&lo6, sizeof(lo6)) == 0;
	close(fd);
	return ok;
}

void worker_families_probe(void)
{
	if (families < 0)
		families = (family_usable(AF_INET) ? 1 : 0) | (family_usable(AF_INET6) ? 2 : 0);
}

/* Resolves host, checks every address against the policy, connects to the first that
 * answers. The connected fd, or -1 with the refusal answered. */
int worker_dial(struct worker *w, const char *host, uint16_t port)
{
	struct ifaddrs *ifa;
	bool allowed = true;
	/* AI_ADDRCONFIG's effect without its cost: musl would probe the families on every call
	 * and then ask for the usable one only (a resolver that fails AAAA fails the lookup);
	 * families_probe did the probing */
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL, *a;
	char ports[8];
	int fd = -1;

	worker_families_probe();
	hints.ai_family = families == 1 ? AF_INET : families == 2 ? AF_INET6 : AF_UNSPEC;
	snprintf(ports, sizeof(ports), "%u", port);
	if (families == 0 || getaddrinfo(host, ports, &hints, &res) != 0 || !res) {
		worker_refuse(w, 502, ER_DNS_FAILED);
		return -1;
	}
	/* what came with the start is taken while fresh: a slow resolution asks again. An armed
	 * worker's came long before its connection, but agenticd ends an armed worker whenever
	 * this host's addresses change, so its list is as fresh as agenticd's; the age counts
	 * from its accept. */
	if (w->own_ask && (w->own < 0 || clock_mono_ms() - w->own_ms > OWN_FRESH_MS))
		worker_ask_own(w);
	if (w->own >= 0) {
		for (a = res; a && allowed; a = a->ai_next)
			allowed = addr_allowed_rec(&w->policy, a->ai_addr, w->own_rec, w->own);
	} else if (getifaddrs(&ifa) != 0) {
		/* without them an own address would pass for a public one: refuse */
		log_warn("egress host addresses unknown", "sandbox=%s conn=%lld err=%s",
			 log_q(w->sandbox), (long long)w->conn, log_q(strerror(errno)));
		freeaddrinfo(res);
		worker_refuse(w, 403, ER_ADDRESS_NOT_ALLOWED);
		return -1;
	} else {
		for (a = res; a && allowed; a = a->ai_next)
			allowed = addr_allowed(&w->policy, a->ai_addr, ifa);
		freeifaddrs(ifa);
	}
	if (!allowed) {
		freeaddrinfo(res);
		worker_refuse(w, 403, ER_ADDRESS_NOT_ALLOWED);
		return -1;
	}
	for (a = res; a && fd < 0; a = a->ai_next)
		fd = connect_one(a);
	freeaddrinfo(res);
	if (fd < 0)
		worker_refuse(w, 502, ER_CONNECT_FAILED);
	return fd;
}

void worker_families_reset(void)
{
	families = -1;
}
