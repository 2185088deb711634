/* broker_own.c: this host's addresses for the workers' own-address check: a netlink socket
 * says when they change, a dump reads them again, and each armed worker whose policy sees the
 * change is marked to be ended (own_old). */
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "egress/broker_slot.h"
#include "egress/policy.h"

#define OWN_RECORD 17u                 /* an own address for the worker: family (4|6), 16 bytes */
#define OWN_MAX (CTL_BYTES / OWN_RECORD)

/* the list, kept while the netlink socket reports no change (own_n < 0: none to send, each
 * worker reads them itself) */
static bool own_stale = true;
static long own_n = -1;
static uint8_t own_rec[OWN_MAX * OWN_RECORD];

void broker_own_init(void)
{
	/* address changes, so that the list a worker gets is never older than the last change:
	 * drained before every answer (own_fresh); without it each worker reads them itself */
	bst.nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (bst.nl_fd >= 0) {
		struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
					  .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR };
		struct epoll_event e = { .events = EPOLLIN };

		e.data.u64 = broker_tag(bst.tags.ctl, EGRESS_NETLINK_SLOT);
		if (bind(bst.nl_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    epoll_ctl(bst.epfd, EPOLL_CTL_ADD, bst.nl_fd, &e) != 0) {
			close(bst.nl_fd);
			bst.nl_fd = -1;
		}
	}
}

/* Whether sa, being this host's own or not, changes what the policy of s's armed worker
 * allows: is_own is an exact match, so an address counts for itself only, and one the policy
 * refuses (or allows) either way (a veth's IPv6 link-local address to a policy without
 * "link_local" or "host") changes no decision of the worker's. */
static bool own_change_matters(const struct eslot *s, const struct sockaddr_storage *sa)
{
	static struct egress_policy pol;
	static struct egress_own_addrs one;
	char err[8];

	if (egress_policy_parse(s->policy, strlen(s->policy), &pol, err, sizeof(err)) != 0)
		return true;
	one.n = 1;
	one.addr[0] = *sa;
	return egress_addr_allowed(&pol, (const struct sockaddr *)sa, NULL) !=
	       egress_addr_allowed(&pol, (const struct sockaddr *)sa, &one);
}

/* Marks the armed workers whose list of this host's addresses the message h (or, NULL, an
 * overrun: changes were lost) makes wrong in a way their policy sees; disarm_stale ends
 * them. Its address is its IFA_LOCAL and its IFA_ADDRESS, both judged. */
static void own_event(const struct nlmsghdr *h)
{
	struct sockaddr_storage sa[2];
	int na = 0;

	if (h && (h->nlmsg_type == RTM_NEWADDR || h->nlmsg_type == RTM_DELADDR) &&
	    h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifaddrmsg))) {
		const struct ifaddrmsg *ifa = NLMSG_DATA(h);
		const struct rtattr *rta = IFA_RTA(ifa);
		int len = (int)IFA_PAYLOAD(h);
		size_t alen = ifa->ifa_family == AF_INET ? 4 : 16;

		if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
			return; /* no address a worker judges */
		for (; RTA_OK(rta, len) && na < 2; rta = RTA_NEXT(rta, len)) {
			if (RTA_PAYLOAD(rta) != alen ||
			    (rta->rta_type != IFA_LOCAL && rta->rta_type != IFA_ADDRESS))
				continue;
			memset(&sa[na], 0, sizeof(sa[na]));
			sa[na].ss_family = ifa->ifa_family;
			if (alen == 4)
				memcpy(&((struct sockaddr_in *)&sa[na])->sin_addr, RTA_DATA(rta), 4);
			else
				memcpy(&((struct sockaddr_in6 *)&sa[na])->sin6_addr, RTA_DATA(rta), 16);
			na++;
		}
	} else if (h && h->nlmsg_type == NLMSG_DONE) {
		return;
	} else {
		h = NULL; /* anything else is read as a change of any address */
	}
	for (uint32_t i = 0; i < bst.nslots; i++) {
		struct eslot *s = &bst.slots[i];

		if (!s->used || !s->armed || s->own_old)
			continue;
		s->own_old = !h;
		for (int k = 0; k < na && !s->own_old; k++)
			s->own_old = own_change_matters(s, &sa[k]);
	}
}

/* Reads what the netlink socket holds: any message (or an overrun) is a change of the list
 * (own_fresh reads it again), and each is judged for the armed workers (own_event). */
void broker_own_drain(void)
{
	static char b[8192] __attribute__((aligned(4)));

	for (;;) {
		ssize_t n = recv(bst.nl_fd, b, sizeof(b), MSG_DONTWAIT);
		int left = (int)n;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN) {
			own_stale = true; /* ENOBUFS: changes were lost */
			own_event(NULL);
		}
		if (n <= 0)
			return;
		own_stale = true;
		for (const struct nlmsghdr *h = (const void *)b; NLMSG_OK(h, left);
		     h = NLMSG_NEXT(h, left))
			own_event(h);
	}
}

/* Appends the address of one RTM_NEWADDR message to own_rec: its IFA_LOCAL where it has one
 * (IPv4's own end), else its IFA_ADDRESS, as getifaddrs reports them. false: the list is full. */
static bool own_add(const struct nlmsghdr *h, long *n)
{
	const struct ifaddrmsg *ifa = NLMSG_DATA(h);
	const struct rtattr *rta = IFA_RTA(ifa), *local = NULL, *addr = NULL;
	int len = (int)IFA_PAYLOAD(h);
	size_t alen = ifa->ifa_family == AF_INET ? 4 : 16;
	uint8_t *r;

	if (ifa->ifa_family != AF_INET && ifa->ifa_family != AF_INET6)
		return true;
	for (; RTA_OK(rta, len); rta = RTA_NEXT(rta, len)) {
		if (RTA_PAYLOAD(rta) != alen)
			continue;
		if (rta->rta_type == IFA_LOCAL)
			local = rta;
		else if (rta->rta_type == IFA_ADDRESS)
			addr = rta;
	}
	if (local)
		addr = local;
	if (!addr)
		return true;
	if (*n == (long)OWN_MAX)
		return false;
	r = own_rec + *n * OWN_RECORD;
	memset(r, 0, OWN_RECORD);
	r[0] = ifa->ifa_family == AF_INET ? 4 : 6;
	memcpy(r + 1, RTA_DATA(addr), alen);
	(*n)++;
	return true;
}

/* The list as it is now: read again (a netlink dump of its own, into a static buffer: agenticd
 * allocates nothing after start) when a change was reported since. On any failure, or more
 * addresses than a packet holds, none is sent and each worker reads them itself. */
static void own_fresh(void)
{
	static char b[16384] __attribute__((aligned(4)));
	struct {
		struct nlmsghdr h;
		struct ifaddrmsg m;
	} req = { .h = { .nlmsg_len = sizeof(req), .nlmsg_type = RTM_GETADDR,
			 .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
		  .m = { .ifa_family = AF_UNSPEC } };
	const struct timeval tv = { 1, 0 };
	long n = 0;
	bool done = false, ok = true, full = false;
	int fd;

	if (bst.nl_fd < 0)
		return;
	broker_own_drain();
	if (!own_stale)
		return;
	own_n = -1;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (send(fd, &req, sizeof(req), 0) != (ssize_t)sizeof(req))
		ok = false;
	while (ok && !done) {
		/* MSG_TRUNC: the length of the message as it was, so a cut one is seen */
		ssize_t k = recv(fd, b, sizeof(b), MSG_TRUNC);
		const struct nlmsghdr *h = (const void *)b;
		int left = (int)k;

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0 || (size_t)k > sizeof(b)) {
			ok = false;
			break;
		}
		for (; ok && !done && NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
			if (h->nlmsg_type == NLMSG_DONE)
				done = true;
			else if (h->nlmsg_type == NLMSG_ERROR || (h->nlmsg_flags & NLM_F_DUMP_INTR))
				ok = false; /* an error, or addresses changed under the dump */
			else if (h->nlmsg_type == RTM_NEWADDR &&
				 h->nlmsg_len >= NLMSG_LENGTH(sizeof(struct ifaddrmsg)))
				full = !own_add(h, &n);
			if (full)
				break;
		}
		if (full)
			break;
	}
	close(fd);
	if (!ok)
		return;
	/* more than a packet holds: none sent (each worker reads them), until the next change */
	own_n = full ? -1 : n;
	own_stale = false;
}

/* This host's addresses as they are now, to a worker: {"own": K} and, when K > 0, a packet of
 * K records. 0, or -1 when they did not go. */
int broker_own_send(struct eslot *s)
{
	char pkt[32];
	int n;

	own_fresh();
	s->own_old = false; /* it gets the list as it is now */
	n = snprintf(pkt, sizeof(pkt), "{\"own\":%ld}", own_n);
	if (send(s->ctl, pkt, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n ||
	    (own_n > 0 && send(s->ctl, own_rec, (size_t)own_n * OWN_RECORD,
			       MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)((size_t)own_n * OWN_RECORD)))
		return -1;
	return 0;
}

