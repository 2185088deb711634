/* egress.c: agenticd's half of the egress path (docs/EGRESS.md "The wire", "agenticd ↔
 * worker"). One slot per connection: the init's Egress call, a worker process started for it
 * with its data and control socketpairs and the run's egress.jsonl, and the credit both ways.
 * The slot outlives the call until the worker has exited and its control socket is read out
 * (its audit record counts in the metrics), and the call may outlive the worker until what it
 * wrote has reached the init. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/seccomp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "egress/policy.h"
#include "egress/route.h"
#include "json/json.h"
#include "base/looptag.h"
#include "config/config.h"
#include "lifecycle/lifecycle.h"
#include "metrics/metrics.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "egress/broker.h"

#define CTL_BYTES (16u * 1024u)        /* a control packet, at most */
#define WORKER_AS_BYTES (256ull << 20)
#define WORKER_NOFILE 16
#define LINGER_GRACE_MS 10000          /* beyond io_timeout_ms, for a worker whose call ended */
#define RECORD_EXIT_MS 1000            /* for a direct worker not armed again after its record */
#define POLICY_TOKENS 2048
#define OWN_RECORD 17u                 /* an own address for the worker: family (4|6), 16 bytes */
#define OWN_MAX (CTL_BYTES / OWN_RECORD)
#define SPARES 2                       /* workers kept started ahead, once egress is used */
#define ARMED_MAX 4                    /* workers waiting in accept on a sandbox's listener */
#define SPARE_DEFER_MS 100             /* a spare taken: the next is started at a connection's
					* end, or this long after, whichever comes first */
#define REUSE_MAX 256                  /* connections of one worker, in turn, at most */
#define LISTEN_TIMEOUT_US 1000         /* SO_RCVTIMEO of a sandbox's listener: see listener_sound */

/* ---- credit (pure) ---- */

bool egress_credit_up_fits(const struct egress_credit *c, size_t n)
{
	return c->up_len + n <= EGRESS_WINDOW && c->up_in + n - c->up_consumed <= EGRESS_WINDOW;
}

bool egress_credit_report_due(const struct egress_credit *c)
{
	return c->up_consumed - c->up_reported >= EGRESS_WINDOW / 2;
}

uint32_t egress_credit_down_room(const struct egress_credit *c)
{
	uint64_t inflight = c->down_sent - c->down_acked;

	if (inflight >= EGRESS_WINDOW)
		return 0;
	return EGRESS_WINDOW - inflight < EGRESS_CHUNK ? (uint32_t)(EGRESS_WINDOW - inflight)
						       : EGRESS_CHUNK;
}

bool egress_credit_down_ack(struct egress_credit *c, uint64_t consumed)
{
	/* a chunk without a count (0) or with an older one says nothing new */
	if (consumed > c->down_sent)
		return false;
	if (consumed > c->down_acked)
		c->down_acked = consumed;
	return true;
}

/* ---- the table ---- */

struct eslot {
	bool used;
	struct grpc_call *call;        /* NULL once the call ended */
	struct sandbox *sb;            /* while the call lives, and sb_gen still matches */
	uint32_t sb_gen;
	char name[SB_NAME_BYTES];
	char instance[SB_ID_BYTES];
	uint64_t conn;
	pid_t pid;                     /* 0 once reaped */
	int pidfd;                     /* to signal it without a pid reuse race */
	int data, ctl;                 /* -1: closed */
	uint32_t data_events;          /* what data is watched for now */
	bool data_watched;             /* in the epoll set: only while something is wanted, as a
					* hung-up socket reports EPOLLHUP whatever the mask */
	bool record_seen, ctl_eof, reaped_logged;
	bool secret_asked;             /* one secret a worker: its one route's */
	bool spare;                    /* started ahead: no sandbox, no call, no start packet yet */
	bool direct;                   /* the worker has the workload's socket: no call, ever */
	bool armed;                    /* the worker waits in accept on its sandbox's listener */
	bool quiet;                    /* ended without a connection: no worker_failed line */
	bool own_asked;                /* one request for this host's addresses a connection */
	bool own_old;                  /* armed, and this host's addresses changed since in a way
					* its policy sees: disarm_stale ends it */
	uint32_t served;               /* connections its worker had before this one (reuse) */
	int64_t started_ms, linger_until;
	struct egress_credit cr;
	bool up_eof_in;                /* the init's eof arrived */
	bool up_shut;                  /* and the worker's side was shut down */
	bool up_dead;                  /* writing to the worker failed: what comes is dropped */
	bool down_eof_read, down_eof_sent, report_owed;
	uint32_t down_len;             /* a chunk read and not yet queued */
	uint8_t *up, *down;
	char policy[EGRESS_POLICY_BYTES]; /* as the worker got it: its route indices name these */
};

struct bucket {
	uint32_t gen;
	struct egress_bucket b;
	/* refusal lines written in the second refused_sec, and those not written since the last */
	int64_t refused_sec;
	uint32_t refused_lines;
	uint64_t suppressed;
	const char *suppressed_reason; /* the last one not written, and its status */
	int suppressed_status;
};

/* A sandbox's refusal lines (busy, rate_limited) a second at most: see audit_refusal. */
#define REFUSAL_LINES_PER_S 10

static const struct config *cfg;
static const char *self_exe;
static int epfd = -1;
static struct eslot *slots;
static struct bucket *buckets;
static uint32_t nslots, nbuckets;
static uint64_t next_conn;             /* see conn_next */
static bool stopping;                  /* SIGTERM: no new worker */
static bool egress_used;               /* a connection came: a spare worker is kept from now on */
static bool spare_wanted;              /* one was claimed: egress_tick starts the next */
static int64_t spare_backoff_until;    /* a spare ended unclaimed: none again until then */
static int64_t spare_defer_until;      /* one was taken: the next waits for a connection's end
					* or this (SPARE_DEFER_MS), whichever comes first */
static bool arm_wanted;                /* a sandbox may want a worker armed on its listener */
/* this host's addresses, for the workers' own-address check: kept while the netlink socket
 * reports no change (own_n < 0: none to send, each worker reads them itself) */
static int nl_fd = -1;
static bool own_stale = true;
static long own_n = -1;
static uint8_t own_rec[OWN_MAX * OWN_RECORD];
static struct json_token toks[POLICY_TOKENS];

static void conn_load(void);

static size_t r64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

size_t egress_storage_bytes(const struct config *c)
{
	return r64((size_t)c->egress_max_connections * sizeof(struct eslot)) +
	       (size_t)c->egress_max_connections * (EGRESS_WINDOW + EGRESS_CHUNK) +
	       r64((size_t)c->max_sandboxes * sizeof(struct bucket));
}

void egress_init(const struct config *c, const char *exe, int loop_fd, void *storage,
		 size_t len)
{
	uint8_t *p = storage;

	cfg = c;
	epfd = loop_fd;
	self_exe = exe;
	nslots = c->egress_max_connections;
	nbuckets = c->max_sandboxes;
	if (len < egress_storage_bytes(c)) {
		nslots = 0;
		return;
	}
	slots = (struct eslot *)p;
	p += r64((size_t)nslots * sizeof(struct eslot));
	for (uint32_t i = 0; i < nslots; i++) {
		slots[i].up = p;
		p += EGRESS_WINDOW;
		slots[i].down = p;
		p += EGRESS_CHUNK;
		slots[i].data = slots[i].ctl = slots[i].pidfd = -1;
	}
	buckets = (struct bucket *)p;
	conn_load();
	/* address changes, so that the list a worker gets is never older than the last change:
	 * drained before every answer (own_fresh); without it each worker reads them itself */
	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (nl_fd >= 0) {
		struct sockaddr_nl sa = { .nl_family = AF_NETLINK,
					  .nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR };
		struct epoll_event e = { .events = EPOLLIN };

		e.data.u64 = ((uint64_t)TAG_EGRESS_CTL << 32) | EGRESS_NETLINK_SLOT;
		if (bind(nl_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
		    epoll_ctl(epfd, EPOLL_CTL_ADD, nl_fd, &e) != 0) {
			close(nl_fd);
			nl_fd = -1;
		}
	}
}

/* ---- workers an earlier agenticd left ---- */

#define STALE_KILL_MS 5000             /* for every leftover worker to be gone, at start */

/* The real and effective uid and the parent of process pid (its /proc status): 0, or -1. */
static int proc_ids(long pid, unsigned long *ruid, unsigned long *euid, long *ppid, bool *zombie)
{
	char path[64], buf[4096];
	ssize_t n;
	int fd;
	const char *u, *pp, *st;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	u = strstr(buf, "\nUid:");
	pp = strstr(buf, "\nPPid:");
	st = strstr(buf, "\nState:");
	if (!u || !pp || !st || sscanf(u, "\nUid: %lu %lu", ruid, euid) != 2 ||
	    sscanf(pp, "\nPPid: %ld", ppid) != 1)
		return -1;
	*zombie = st[7 + strspn(st + 7, " \t")] == 'Z';
	return 0;
}

/* Is pid a running agenticd (root's)? Its workers are its own. */
static bool proc_is_agenticd(long pid)
{
	char path[64], buf[256];
	const char *base;
	unsigned long ruid, euid;
	long ppid;
	bool zombie;
	ssize_t n;
	int fd;

	if (pid <= 1 || proc_ids(pid, &ruid, &euid, &ppid, &zombie) != 0 || euid != 0 || zombie)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* `agenticd ...` through its applet link (the unit's way) or `agentic agenticd ...` */
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	return strcmp(base, "agenticd") == 0 ||
	       ((size_t)n > strlen(buf) + 1 && strcmp(buf + strlen(buf) + 1, "agenticd") == 0);
}

/* One pass over /proc: every live process of the egress uids whose parent is no agenticd (a
 * worker of a killed one, reparented) is sent SIGKILL, through a pidfd opened before its ids
 * are read again (so the pid cannot have been reused between). The number still there, the
 * last one's pid in *left. logged: a pid killed before (its line written once). */
static int stale_pass(uint32_t lo, uint32_t hi, long *left, long *logged)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10), ppid;
		unsigned long ruid, euid;
		bool zombie;
		int pfd;

		if (*end || pid <= 1 || proc_ids(pid, &ruid, &euid, &ppid, &zombie) != 0 || zombie ||
		    ((ruid < lo || ruid > hi) && (euid < lo || euid > hi)) ||
		    proc_is_agenticd(ppid) || (pfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
			continue;
		if (proc_ids(pid, &ruid, &euid, &ppid, &zombie) == 0 && !zombie &&
		    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
			if (*logged != pid)
				log_warn("egress worker of an earlier agenticd killed",
					 "pid=%ld uid=%lu", pid, ruid);
			*logged = pid;
			*left = pid;
			n++;
		}
		close(pfd);
	}
	closedir(d);
	return n;
}

int egress_stale_kill(const struct config *c, char *err, size_t cap)
{
	uint32_t hi = c->egress_uid, lo = c->egress_uid - (c->egress_max_connections - 1);
	int64_t deadline = clock_mono_ms() + STALE_KILL_MS;
	long left = 0, logged = 0;

	for (;;) {
		int n = stale_pass(lo, hi, &left, &logged);

		if (n == 0)
			return 0;
		if (n < 0) {
			snprintf(err, cap, "cannot read /proc for workers of an earlier agenticd: %s",
				 strerror(errno));
			return -1;
		}
		if (clock_mono_ms() >= deadline) {
			snprintf(err, cap, "process %ld of the egress uids (%u..%u) outlived SIGKILL "
				 "for %d ms: its uid is not given to a worker", left, lo, hi,
				 STALE_KILL_MS);
			return -1;
		}
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}

/* ---- this host's addresses ---- */

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
	for (uint32_t i = 0; i < nslots; i++) {
		struct eslot *s = &slots[i];

		if (!s->used || !s->armed || s->own_old)
			continue;
		s->own_old = !h;
		for (int k = 0; k < na && !s->own_old; k++)
			s->own_old = own_change_matters(s, &sa[k]);
	}
}

/* Reads what the netlink socket holds: any message (or an overrun) is a change of the list
 * (own_fresh reads it again), and each is judged for the armed workers (own_event). */
static void own_drain(void)
{
	static char b[8192] __attribute__((aligned(4)));

	for (;;) {
		ssize_t n = recv(nl_fd, b, sizeof(b), MSG_DONTWAIT);
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

	if (nl_fd < 0)
		return;
	own_drain();
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

/* ---- audit lines agenticd writes itself ---- */

static void iso_ts(char *out, size_t cap)
{
	int64_t ms = clock_wall_ms();
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	snprintf(out, cap, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

/* The run's egress.jsonl, O_APPEND; read and write, for the dropped line (audit_dropped). */
static int audit_open(struct sandbox *sb)
{
	if (!transcript_of(sb)->run.open || transcript_of(sb)->run.dirfd < 0)
		return ERR_STATE;
	int fd = openat(transcript_of(sb)->run.dirfd, "egress.jsonl",
			O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	return fd < 0 ? -errno : fd;
}

/* Connection numbers, unique in every egress.jsonl across agenticd's restarts: the next one
 * not handed out yet is kept in state_dir/egress-conn, written CONN_BLOCK ahead (a restart
 * skips what the last start reserved and did not use, never reuses one). A file that cannot
 * be read starts at this start's wall clock in microseconds, beyond any number a host makes
 * at one a microsecond. */
#define CONN_BLOCK 4096u
static uint64_t conn_reserved;

static void conn_path(char *out, size_t cap)
{
	snprintf(out, cap, "%s/egress-conn", cfg->state_dir);
}

static void conn_reserve(uint64_t upto)
{
	char path[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES + 8], num[32];
	int n = snprintf(num, sizeof(num), "%llu\n", (unsigned long long)upto), fd;

	conn_path(path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, num, (size_t)n) != n || fsync(fd) != 0 || rename(tmp, path) != 0)
		log_warn("egress connection numbers not kept", "error=%s", log_q(err_str(-errno)));
	if (fd >= 0)
		close(fd);
	conn_reserved = upto;
}

static void conn_load(void)
{
	char path[LIMIT_PATH_BYTES], num[32] = "";
	int fd;
	ssize_t n = -1;

	conn_path(path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		n = read(fd, num, sizeof(num) - 1);
		close(fd);
	}
	next_conn = n > 0 ? strtoull(num, NULL, 10) : 0;
	if (next_conn == 0)
		next_conn = (uint64_t)clock_wall_ms() * 1000;
	conn_reserve(next_conn + CONN_BLOCK);
}

static uint64_t conn_next(void)
{
	if (next_conn + 1 >= conn_reserved)
		conn_reserve(next_conn + 1 + CONN_BLOCK);
	return next_conn++;
}

/* An audit line's fields besides ts, sandbox, instance and conn: what a worker's record said
 * (checked: every word is one of the worker's), or what agenticd saw itself. */
struct audit_fields {
	const char *kind, *mode, *method, *host, *path, *decision, *reason, *end;
	int64_t port, status, bytes_up, bytes_down, duration_ms;
	uint64_t suppressed;           /* the refusals not written before this one: the field
					* only when there were some */
};

/* The line that stands for those dropped past egress_audit_max_bytes: always AUDIT_DROPPED_BYTES
 * long, the count padded, so that it is rewritten in place as drops go on (and found again
 * after a restart: the file's last bytes). */
#define AUDIT_DROPPED_HEAD "{\"kind\":\"audit_dropped\",\"ts\":\""
#define AUDIT_DROPPED_BYTES 96
_Static_assert(sizeof(AUDIT_DROPPED_HEAD) - 1 + 24 + 14 + 20 + 3 <= AUDIT_DROPPED_BYTES,
	       "the dropped line fits its width");

static int audit_dropped(int fd, off_t size)
{
	char line[AUDIT_DROPPED_BYTES + 1], ts[64];
	unsigned long long dropped = 0;
	off_t at = size;
	int n;

	if (size >= AUDIT_DROPPED_BYTES &&
	    pread(fd, line, AUDIT_DROPPED_BYTES, size - AUDIT_DROPPED_BYTES) == AUDIT_DROPPED_BYTES &&
	    memcmp(line, AUDIT_DROPPED_HEAD, sizeof(AUDIT_DROPPED_HEAD) - 1) == 0 &&
	    line[AUDIT_DROPPED_BYTES - 1] == '\n') {
		line[AUDIT_DROPPED_BYTES - 1] = '\0';
		const char *d = strstr(line, "\"dropped\":");

		if (d)
			dropped = strtoull(d + 10, NULL, 10);
		at = size - AUDIT_DROPPED_BYTES;
	}
	iso_ts(ts, sizeof(ts));
	n = snprintf(line, sizeof(line), AUDIT_DROPPED_HEAD "%s\",\"dropped\":%-20llu", ts,
		     dropped + 1);
	if (n < 0 || n > AUDIT_DROPPED_BYTES - 2)
		return ERR_LIMIT;
	memset(line + n, ' ', (size_t)(AUDIT_DROPPED_BYTES - 2 - n));
	line[AUDIT_DROPPED_BYTES - 2] = '}';
	line[AUDIT_DROPPED_BYTES - 1] = '\n';
	/* in place: O_APPEND off, or pwrite would append (Linux) */
	if (fcntl(fd, F_SETFL, 0) != 0)
		return -errno;
	return pwrite(fd, line, AUDIT_DROPPED_BYTES, at) == AUDIT_DROPPED_BYTES ? 0 : -EIO;
}

/* Appends one line to sb's egress.jsonl with one write(2), while the file stays within
 * egress_audit_max_bytes (room kept for the dropped line); past it the line is dropped and
 * counted in the file's last line. agenticd is the file's only writer (docs/EGRESS.md
 * "Audit"). */
static int audit_put(struct sandbox *sb, const char *line, size_t len)
{
	struct stat st;
	int fd = audit_open(sb), r;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0)
		r = -errno;
	else if ((uint64_t)st.st_size + len + AUDIT_DROPPED_BYTES <= cfg->egress_audit_max_bytes &&
		 transcript_of(sb)->used + len <= sandbox_transcript_budget(sb)) {
		/* the run's files share one budget: what the audit keeps is the transcript's too */
		r = write(fd, line, len) == (ssize_t)len ? 0 : -errno;
		if (r == 0)
			transcript_charge(sb, len);
	} else
		r = audit_dropped(fd, st.st_size);
	close(fd);
	return r;
}

/* One line of sb's run. */
static int audit_line(struct sandbox *sb, const char *name, const char *instance, uint64_t conn,
		      const struct audit_fields *f)
{
	static char line[CTL_BYTES];
	char ts[64];
	struct buf b;
	struct json_writer w;

	iso_ts(ts, sizeof(ts));
	buf_init(&b, line, sizeof(line) - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "ts");
	json_str_write(&w, ts);
	json_key(&w, "sandbox");
	json_str_write(&w, name);
	json_key(&w, "instance");
	json_str_write(&w, instance);
	json_key(&w, "conn");
	json_int_write(&w, (int64_t)conn);
	json_key(&w, "kind");
	json_str_write(&w, f->kind);
	if (f->mode) {
		json_key(&w, "mode");
		json_str_write(&w, f->mode);
	}
	json_key(&w, "method");
	json_str_write(&w, f->method ? f->method : "");
	json_key(&w, "host");
	json_str_write(&w, f->host ? f->host : "");
	json_key(&w, "port");
	json_int_write(&w, f->port);
	json_key(&w, "path");
	json_str_write(&w, f->path ? f->path : "");
	json_key(&w, "decision");
	json_str_write(&w, f->decision);
	json_key(&w, "reason");
	json_str_write(&w, f->reason);
	json_key(&w, "status");
	json_int_write(&w, f->status);
	json_key(&w, "bytes_up");
	json_int_write(&w, f->bytes_up);
	json_key(&w, "bytes_down");
	json_int_write(&w, f->bytes_down);
	json_key(&w, "duration_ms");
	json_int_write(&w, f->duration_ms);
	json_key(&w, "end");
	json_str_write(&w, f->end);
	if (f->suppressed) {
		json_key(&w, "suppressed");
		json_int_write(&w, (int64_t)f->suppressed);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0)
		return ERR_LIMIT;
	line[b.len++] = '\n';
	return audit_put(sb, line, b.len);
}

/* A refusal of agenticd's own: no worker, no request read. */
static int audit_refused(struct sandbox *sb, const char *name, const char *instance,
			 uint64_t conn, const char *reason, int status, int64_t duration_ms,
			 const char *end, uint64_t suppressed)
{
	const struct audit_fields f = { .kind = "unknown", .decision = "deny", .reason = reason,
					.end = end, .status = status, .duration_ms = duration_ms,
					.suppressed = suppressed };

	return audit_line(sb, name, instance, conn, &f);
}

/* ---- the rate limit: a token bucket per sandbox ---- */

static uint32_t policy_rate(const char *json)
{
	struct json_doc d;
	int64_t v;
	int i;

	if (json_parse(&d, json, strlen(json), toks, POLICY_TOKENS) != 0 || toks[0].type != JSON_OBJECT)
		return EGRESS_RATE_DEFAULT;
	i = json_obj_get(&d, 0, "rate_per_minute");
	if (i < 0 || json_int(&d, i, &v) != 0 || v < 1 || v > 1000000)
		return EGRESS_RATE_DEFAULT;
	return (uint32_t)v;
}

bool egress_bucket_take(struct egress_bucket *b, uint32_t rate, int64_t now)
{
	uint64_t cap = (uint64_t)rate * 1000;

	if (!rate)
		return false;
	if (!b->at) {
		b->at = now;
		b->milli = cap;
	}
	/* rate a minute: rate * 1000 milli-tokens in 60000 ms; the time that did not make a
	 * whole milli-token yet stays counted (at moves by what was turned into tokens only) */
	if (now > b->at) {
		uint64_t add = (uint64_t)(now - b->at) * rate / 60;

		b->milli += add;
		b->at += (int64_t)(add * 60 / rate);
	}
	if (b->milli >= cap) {
		b->milli = cap;
		b->at = now;
	}
	if (b->milli < 1000)
		return false;
	b->milli -= 1000;
	return true;
}

/* The sandbox's bucket (a new sandbox in the slot: a full one, no refusals). */
static struct bucket *bucket_of(const struct sandbox *sb)
{
	struct bucket *b = &buckets[sandbox_index(sb) % nbuckets];

	if (b->gen != sb->gen) {
		memset(b, 0, sizeof(*b));
		b->gen = sb->gen;
	}
	return b;
}

/* Takes a token of the sandbox's bucket. */
static bool rate_take(struct sandbox *sb)
{
	return egress_bucket_take(&bucket_of(sb)->b, policy_rate(sb->egress_json), clock_mono_ms());
}

/* The audit line of a call refused before any worker (busy, rate_limited). A workload that
 * opens and closes connections in a loop is refused as fast as it can: a line each would grow
 * egress.jsonl without bound and keep agenticd's loop writing a file. So at most
 * REFUSAL_LINES_PER_S a second a sandbox are written; the rest are counted (in /metrics as
 * every one is) and the next line written says how many it stands for ("suppressed"). */
static void audit_refusal(struct sandbox *sb, const char *reason, int status)
{
	struct bucket *b = bucket_of(sb);
	int64_t sec = clock_mono_ms() / 1000;

	if (b->refused_sec != sec) {
		b->refused_sec = sec;
		b->refused_lines = 0;
	}
	if (b->refused_lines >= REFUSAL_LINES_PER_S) {
		b->suppressed++;
		b->suppressed_reason = reason;
		b->suppressed_status = status;
		return;
	}
	if (audit_refused(sb, sb->name, sb->instance_id, conn_next(), reason, status, 0, "closed",
			  b->suppressed) == 0) {
		b->refused_lines++;
		b->suppressed = 0;
	}
}

/* ---- slots ---- */

static struct eslot *slot_of(struct grpc_call *call)
{
	return grpc_call_user(call);
}

static void data_watch(struct eslot *s);

static void close_data(struct eslot *s)
{
	if (s->data >= 0) {
		if (s->data_watched)
			epoll_ctl(epfd, EPOLL_CTL_DEL, s->data, NULL);
		close(s->data);
	}
	s->data = -1;
	s->data_events = 0;
	s->data_watched = false;
}

static void close_ctl(struct eslot *s)
{
	if (s->ctl >= 0) {
		epoll_ctl(epfd, EPOLL_CTL_DEL, s->ctl, NULL);
		close(s->ctl);
	}
	s->ctl = -1;
}

/* Frees the slot once nothing of it is left: no call, worker reaped, control read out. */
static void slot_maybe_free(struct eslot *s)
{
	if (s->call || s->pid > 0 || s->ctl >= 0)
		return;
	close_data(s);
	if (s->pidfd >= 0)
		close(s->pidfd);
	s->pidfd = -1;
	/* a slot is free again: a spare may be missing (all were taken when the last was); a
	 * connection's end is when one is started (its work is done, the next has not begun) */
	if (!s->spare)
		spare_defer_until = 0;
	s->used = false;
	spare_wanted = true;
	arm_wanted = true;
}

/* The worker died without its record: agenticd's own line for it. */
static void worker_failed_line(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	if (s->record_seen || s->quiet)
		return;
	s->record_seen = true;
	metrics_egress(1, 0, 0);
	log_warn("egress worker failed", "name=%s conn=%llu", log_q(s->name),
		 (unsigned long long)s->conn);
	if (!sb || sb->state == SB_FREE || sb->gen != s->sb_gen)
		return;
	audit_refused(sb, s->name, s->instance, s->conn, "worker_failed", 0,
		      clock_mono_ms() - s->started_ms, "upstream_error", 0);
}

/* agenticd stops under a live connection: its control socket closes, so the worker's record
 * cannot come; agenticd's own line says what it knows (not the destination, which the worker
 * read). */
static void stopped_line(struct eslot *s)
{
	struct sandbox *sb = s->sb;
	const struct audit_fields f = { .kind = "unknown", .decision = "unknown",
					.reason = "agenticd_stopped", .end = "control_lost",
					.duration_ms = clock_mono_ms() - s->started_ms };

	if (s->record_seen || s->quiet || s->spare || s->armed || s->pid <= 0 || !sb ||
	    sb->state == SB_FREE || sb->gen != s->sb_gen)
		return;
	s->record_seen = true;
	audit_line(sb, s->name, s->instance, s->conn, &f);
}

static void call_end(struct eslot *s, int status, const char *why)
{
	struct grpc_call *call = s->call;

	if (!call)
		return;
	s->call = NULL;
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, status, why, NULL, 0);
	close_data(s);
	s->linger_until = clock_mono_ms() + cfg->egress_io_timeout_ms + LINGER_GRACE_MS;
	slot_maybe_free(s);
}

/* Sends what is due to the init: the chunk read from the worker, the eof, the consumed count.
 * Returns false when the call ended. */
static bool down_pump(struct eslot *s)
{
	Agentic__Sandbox__V1__EgressChunk m = AGENTIC__SANDBOX__V1__EGRESS_CHUNK__INIT;
	bool eof = s->down_eof_read && !s->down_eof_sent && !s->down_len;
	int r;

	if (!s->call)
		return false;
	if (!s->down_len && !eof && !s->report_owed && !egress_credit_report_due(&s->cr))
		return true;
	m.data.data = s->down;
	m.data.len = s->down_len;
	m.consumed = s->cr.up_consumed;
	m.eof = eof;
	r = grpc_call_send(s->call, &m.base);
	if (r == -EAGAIN) {
		s->report_owed = true;
		return true;        /* on_writable follows */
	}
	if (r < 0) {
		call_end(s, GRPC_RESOURCE_EXHAUSTED, "no message buffer for the egress call");
		return false;
	}
	s->report_owed = false;
	s->cr.up_reported = s->cr.up_consumed;
	s->cr.down_sent += s->down_len;
	s->down_len = 0;
	if (eof)
		s->down_eof_sent = true;
	return true;
}

/* Both ways ended (OK); or the worker ended the connection in order, its record sent after
 * all it wrote (OK: the init delivers every byte it holds before it closes, as after a
 * close); or the worker is gone without a record, and what it wrote went to the init
 * (UNAVAILABLE: the init closes at once). A workload reading a route's answer that ends with
 * the upstream's close keeps its own side open until it has read it all, so an UNAVAILABLE
 * there cut the answer's last window short. */
static void maybe_finish(struct eslot *s)
{
	if (!s->call || !s->down_eof_sent)
		return;
	if (s->up_shut || s->record_seen)
		call_end(s, GRPC_OK, NULL);
	else if (s->up_dead || s->ctl_eof || s->pid == 0)
		call_end(s, GRPC_UNAVAILABLE, "the egress worker is gone");
}

/* Writes what is held to the worker; shuts its side down after the init's eof. */
static void up_write(struct eslot *s)
{
	while (s->cr.up_len && !s->up_dead && s->data >= 0) {
		ssize_t n = send(s->data, s->up + s->cr.up_off, s->cr.up_len,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			s->up_dead = true;   /* the worker closed its side: no more goes up */
			/* dropped, and counted consumed as what arrives from now on is, so the
			 * init's credit stays */
			s->cr.up_consumed += s->cr.up_len;
			s->cr.up_len = 0;
			break;
		}
		s->cr.up_off += (uint32_t)n;
		s->cr.up_len -= (uint32_t)n;
		s->cr.up_consumed += (uint64_t)n;
	}
	if (!s->cr.up_len)
		s->cr.up_off = 0;
	if (!s->cr.up_len && s->up_eof_in && !s->up_shut && !s->up_dead && s->data >= 0) {
		shutdown(s->data, SHUT_WR);
		s->up_shut = true;
	}
}

/* Reads one chunk from the worker when the init's credit allows and none is waiting. */
static void down_read(struct eslot *s)
{
	uint32_t room = egress_credit_down_room(&s->cr);
	ssize_t n;

	if (s->down_len || s->down_eof_read || !room || s->data < 0 || s->report_owed)
		return;
	do
		n = recv(s->data, s->down, room, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return;
	if (n < 0) {
		/* a reset: the worker's connection failed under it */
		s->down_eof_read = true;
		s->up_dead = true;
		return;
	}
	if (n == 0)
		s->down_eof_read = true;
	s->down_len = (uint32_t)n;
}

/* The data socket's interest: readable while a chunk may be read, writable while bytes are
 * held for the worker. */
static void data_watch(struct eslot *s)
{
	uint32_t ev = 0;
	struct epoll_event e;

	if (s->data < 0)
		return;
	if (!s->down_len && !s->down_eof_read && egress_credit_down_room(&s->cr) && !s->report_owed)
		ev |= EPOLLIN;
	if (s->cr.up_len && !s->up_dead)
		ev |= EPOLLOUT;
	if (ev == s->data_events && s->data_watched == (ev != 0))
		return;
	/* nothing wanted: out of the set, so that a hung-up worker socket cannot wake the loop
	 * over and over while the init holds its credit */
	if (!ev) {
		if (s->data_watched)
			epoll_ctl(epfd, EPOLL_CTL_DEL, s->data, NULL);
		s->data_watched = false;
		s->data_events = 0;
		return;
	}
	e.events = ev;
	e.data.u64 = ((uint64_t)TAG_EGRESS_DATA << 32) | (uint32_t)(s - slots);
	epoll_ctl(epfd, s->data_watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, s->data, &e);
	s->data_watched = true;
	s->data_events = ev;
}

/* Moves the slot on as far as it goes now. */
static void step(struct eslot *s)
{
	for (int i = 0; i < 64 && s->call; i++) {
		uint64_t sent = s->cr.down_sent, consumed = s->cr.up_consumed;
		bool eof_sent = s->down_eof_sent;

		up_write(s);
		down_read(s);
		if (!down_pump(s))
			return;
		if (sent == s->cr.down_sent && consumed == s->cr.up_consumed &&
		    eof_sent == s->down_eof_sent)
			break;
	}
	maybe_finish(s);
	if (s->call)
		data_watch(s);
}

/* ---- the worker ---- */

/* The worker is started with clone(CLONE_VM | CLONE_VFORK), as posix_spawn does: agenticd's
 * address space is large (every table of the budget), and a fork copied its page tables for
 * each connection only for the child to drop them at execve, milliseconds on every CONNECT.
 * The child shares agenticd's memory until its execve, so it writes nothing of it and calls no
 * libc function that could take a lock or touch state: raw system calls only, on a stack of
 * its own (agenticd is one thread and waits, suspended, until the child has exec'd or died). */
struct worker_args {
	int data, ctl, audit;
	long uid;
};

static char worker_stack[32 * 1024] __attribute__((aligned(16)));

/* The worker's seccomp filter: no sendmsg, sendmmsg or io_uring (which sends messages too),
 * so no descriptor of its can reach agenticd (SCM_RIGHTS) however it is taken over. agenticd
 * reads its sockets without a control buffer, and the kernel closes a descriptor passed that
 * way in agenticd's own thread, on the way out of recv: a TCP socket with SO_LINGER set and
 * unacknowledged data in its queue would hold agenticd's loop there for the linger time.
 * SO_PASSRIGHTS 0 on agenticd's ends says the same where the kernel has it (6.16). The worker
 * itself sends with send(2) only. No SO_RCVTIMEO either: an armed worker holds the sandbox's
 * listener, whose O_NONBLOCK it shares with agenticd (one open file), and a worker taken over
 * may clear it; the receive timeout agenticd sets on the listener (LISTEN_TIMEOUT_US) is
 * what bounds agenticd's accept then, and the worker never needs one. x32 system calls and
 * any other arch: refused too. */
#define SF_ERRNO 16 /* the index of the filter's RET ERRNO, and of its RET ALLOW after it */
static const struct sock_filter worker_filter[] = {
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, SF_ERRNO - 5, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmsg, SF_ERRNO - 6, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_sendmmsg, SF_ERRNO - 7, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, SF_ERRNO - 8, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_enter, SF_ERRNO - 9, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_register, SF_ERRNO - 10, 0),
	/* 10: setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO_OLD or _NEW, ...) */
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 0, SF_ERRNO + 1 - 11),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, SF_ERRNO + 1 - 13),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 20 /* SO_RCVTIMEO_OLD */, SF_ERRNO - 15, 0),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 66 /* SO_RCVTIMEO_NEW */, 0, 1),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
	BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
};
_Static_assert(sizeof(worker_filter) / sizeof(worker_filter[0]) == SF_ERRNO + 2,
	       "the jumps of worker_filter count on its RET ERRNO at SF_ERRNO");
static const struct sock_fprog worker_fprog = {
	.len = sizeof(worker_filter) / sizeof(worker_filter[0]),
	.filter = (struct sock_filter *)worker_filter,
};

/* In the child: the worker's identity and limits, fds 3, 4, 5, exec. Never returns. The uid
 * is the slot's own, egress_uid - slot: workers that shared one could signal each other (a
 * worker a workload took over would kill or stop every sandbox's egress) and, in the moment
 * between exec and the worker's PR_SET_DUMPABLE (exec makes a process dumpable again), attach
 * to another sandbox's worker or open its /proc/PID/mem and read the secret it is sent. A slot
 * is reused only once its worker is reaped, so no two live workers share a uid. */
static int worker_child(void *p)
{
	static const char *const argv[] = { "agentic", "egress-worker", NULL };
	static const char *const envp[] = { "PATH=/usr/bin:/bin", NULL };
	const struct worker_args *wa = p;
	const struct rlimit as = { WORKER_AS_BYTES, WORKER_AS_BYTES };
	const struct rlimit nf = { WORKER_NOFILE, WORKER_NOFILE };
	const struct rlimit core = { 0, 0 };
	/* none but itself under its uid (its own, see above): a worker forks nothing, and one a
	 * workload took over cannot fork-bomb the host */
	const struct rlimit nproc = { 1, 1 };
	const uint64_t none = 0;
	long u = wa->uid, a, b, c, nul;

	syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none));
	syscall(SYS_setsid);
	/* out of the way of 3..5 first, then into place; a worker started ahead has no audit
	 * fd yet (it comes with the start packet) and nothing at 5 */
	a = syscall(SYS_fcntl, wa->data, F_DUPFD, 10);
	b = syscall(SYS_fcntl, wa->ctl, F_DUPFD, 10);
	c = wa->audit >= 0 ? syscall(SYS_fcntl, wa->audit, F_DUPFD, 10) : -1;
	if (a < 0 || b < 0 || (wa->audit >= 0 && c < 0) || syscall(SYS_dup2, a, 3) != 3 ||
	    syscall(SYS_dup2, b, 4) != 4 || (c >= 0 && syscall(SYS_dup2, c, 5) != 5))
		syscall(SYS_exit, 127);
	nul = syscall(SYS_open, "/dev/null", O_RDWR);
	if (nul < 0 || syscall(SYS_dup2, nul, 0) < 0 || syscall(SYS_dup2, nul, 1) < 0 ||
	    syscall(SYS_dup2, nul, 2) < 0)
		syscall(SYS_exit, 127);
	/* everything else agenticd holds (the sockets, the engine's, other sandboxes') */
	if (syscall(SYS_close_range, c >= 0 ? 6 : 5, ~0u, 0) != 0)
		for (long fd = c >= 0 ? 6 : 5; fd < 65536; fd++)
			syscall(SYS_close, fd);
	if (syscall(SYS_chdir, "/") != 0 || syscall(SYS_setgroups, 0, NULL) != 0 ||
	    syscall(SYS_setresgid, u, u, u) != 0 || syscall(SYS_setresuid, u, u, u) != 0 ||
	    syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    syscall(SYS_prlimit64, 0, RLIMIT_AS, &as, NULL) != 0 ||
	    syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &nf, NULL) != 0 ||
	    syscall(SYS_prlimit64, 0, RLIMIT_CORE, &core, NULL) != 0 ||
	    syscall(SYS_prlimit64, 0, RLIMIT_NPROC, &nproc, NULL) != 0)
		syscall(SYS_exit, 126);
	syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &worker_fprog) != 0)
		syscall(SYS_exit, 126);
	syscall(SYS_execve, self_exe, argv, envp);
	syscall(SYS_exit, 127);
	return 127;
}

/* This host's addresses as they are now, to a worker: {"own": K} and, when K > 0, a packet of
 * K records. 0, or -1 when they did not go. */
static int own_send(struct eslot *s)
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

/* The start packet, with, for a direct connection, the workload's socket (or the listener) as
 * its one descriptor; "own": true when the worker may ask for this host's addresses
 * (ctl_own). */
static int ctl_hello(struct eslot *s, bool rate_limited, int data)
{
	static char pkt[CTL_BYTES];
	struct buf b;
	struct json_writer w;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;

	buf_init(&b, pkt, sizeof(pkt));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "sandbox");
	json_str_write(&w, s->name);
	json_key(&w, "instance");
	json_str_write(&w, s->instance);
	json_key(&w, "conn");
	json_int_write(&w, (int64_t)s->conn);
	json_key(&w, "rate_limited");
	json_bool_write(&w, rate_limited);
	json_key(&w, "ca_file");
	json_str_write(&w, cfg->egress_ca_file);
	json_key(&w, "io_timeout_ms");
	json_int_write(&w, cfg->egress_io_timeout_ms);
	if (s->armed) {
		/* the second descriptor is the sandbox's listener: accept one connection on it */
		json_key(&w, "listen");
		json_bool_write(&w, true);
	}
	if (data >= 0) {
		/* a direct connection's worker waits after its record: armed again (rearm) or
		 * this socket's eof */
		json_key(&w, "reuse");
		json_bool_write(&w, true);
	}
	if (nl_fd >= 0) {
		json_key(&w, "own");
		json_bool_write(&w, true);
		/* the addresses follow at once: a worker that dials soon asks nothing (a round
		 * trip of two processes' wakeups on every connection's path) */
		json_key(&w, "own_sent");
		json_bool_write(&w, true);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0)
		return ERR_LIMIT;
	/* the policy is normalised JSON already: spliced in as it is, before the final brace */
	if (b.len + strlen(s->policy) + 16 > sizeof(pkt))
		return ERR_LIMIT;
	b.len--;
	b.len += (size_t)snprintf(pkt + b.len, sizeof(pkt) - b.len, ",\"policy\":%s}", s->policy);
	iov.iov_base = pkt;
	iov.iov_len = b.len;
	memset(&cm, 0, sizeof(cm));
	if (data >= 0) {
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &data, sizeof(int));
	} else {
		mh.msg_control = NULL;
		mh.msg_controllen = 0;
	}
	if (sendmsg(s->ctl, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)b.len)
		return -errno;
	if (nl_fd >= 0 && own_send(s) != 0)
		return -EIO;
	return 0;
}

/* Starts a worker in slot s, its start packet not sent yet: 0, or -errno (nothing left
 * open). */
static int worker_spawn(struct eslot *s)
{
	int dp[2] = { -1, -1 }, cp[2] = { -1, -1 }, r;
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, dp) != 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cp) != 0) {
		r = -errno;
		goto fail;
	}
	{
		struct worker_args wa = { dp[1], cp[1], -1,
					  (long)(cfg->egress_uid - (uint32_t)(s - slots)) };

		pid = clone(worker_child, worker_stack + sizeof(worker_stack),
			    CLONE_VM | CLONE_VFORK | SIGCHLD, &wa);
	}
	if (pid < 0) {
		r = -errno;
		goto fail;
	}
	close(dp[1]);
	close(cp[1]);
	/* no descriptor comes to agenticd over either (see worker_filter); ENOPROTOOPT before
	 * Linux 6.16, where the filter alone says it */
	(void)fd_refuse_rights(dp[0]);
	(void)fd_refuse_rights(cp[0]);
	s->pid = pid;
	s->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	s->data = dp[0];
	s->ctl = cp[0];
	fcntl(s->data, F_SETFL, O_NONBLOCK);
	fcntl(s->ctl, F_SETFL, O_NONBLOCK);
	{
		struct epoll_event ce = { .events = EPOLLIN };

		ce.data.u64 = ((uint64_t)TAG_EGRESS_CTL << 32) | (uint32_t)(s - slots);
		epoll_ctl(epfd, EPOLL_CTL_ADD, s->ctl, &ce);
	}
	return 0;
fail:
	for (int i = 0; i < 2; i++) {
		if (dp[i] >= 0)
			close(dp[i]);
		if (cp[i] >= 0)
			close(cp[i]);
	}
	return r;
}

static void worker_kill(struct eslot *s);

/* Gives the worker of s (a spare's, or one started now) its connection (data, the workload's
 * socket of a direct connection, stays the caller's): 0, or -errno (a worker that was started
 * is killed and left with its sockets, for the caller to close and the reaper to collect). */
static int worker_start(struct eslot *s, int data, bool rate_limited)
{
	int r = 0;

	if (s->pid <= 0)
		r = worker_spawn(s);
	if (r == 0 && (r = ctl_hello(s, rate_limited, data)) != 0) {
		log_warn("egress worker not told its connection", "name=%s error=%s",
			 log_q(s->name), log_q(err_str(r)));
		/* killed, not left to the eof of its control socket: the packet may have gone
		 * in part (its descriptors, the listener among them), and a worker armed again
		 * after a connection may be one a crafted request took over, which would not
		 * end at the eof and, neither armed nor with a connection, would never be
		 * killed (egress_tick) and hold its slot for good */
		worker_kill(s);
	}
	return r;
}

/* Workers started ahead, so that a connection does not wait for a fork and exec: SPARES of
 * them, one a call, each in a free slot, once a sandbox has used egress, unless agenticd is
 * stopping. Its uid is its slot's, as any worker's. */
static void spare_fill(void)
{
	struct eslot *free_slot = NULL;
	uint32_t spares = 0;
	int r;

	if (stopping || !egress_used)
		return;
	for (uint32_t i = 0; i < nslots; i++) {
		if (slots[i].used && slots[i].spare && ++spares >= SPARES)
			return;
		if (!slots[i].used && !free_slot)
			free_slot = &slots[i];
	}
	if (!free_slot)
		return;
	/* one a turn: the loop comes back at once for the next (egress_next_deadline) */
	if (spares + 1 < SPARES)
		spare_wanted = true;
	{
		uint8_t *up = free_slot->up, *down = free_slot->down;

		memset(free_slot, 0, sizeof(*free_slot));
		free_slot->up = up;
		free_slot->down = down;
	}
	free_slot->data = free_slot->ctl = free_slot->pidfd = -1;
	free_slot->used = free_slot->spare = true;
	if ((r = worker_spawn(free_slot)) != 0) {
		free_slot->used = free_slot->spare = false;
		log_warn("egress spare worker not started", "error=%s", log_q(err_str(r)));
		return;
	}
	arm_wanted = true; /* a sandbox that found no spare to arm may now */
}

/* ---- the call ---- */

static void refuse(struct grpc_call *call, int status, const char *why)
{
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, status, why, NULL, 0);
}

/* Slot s (free, or a spare's, which keeps its worker and sockets, or, reuse, the slot of sb's
 * worker whose connection ended, which keeps them too) is sb's next connection's now: its
 * name, instance and policy as they are, a connection number. */
static void slot_claim(struct eslot *s, struct sandbox *sb, bool reuse)
{
	uint8_t *up = s->up, *down = s->down;
	bool keep = s->used && (s->spare || reuse);
	pid_t pid = keep ? s->pid : 0;
	int pidfd = keep ? s->pidfd : -1, d = keep ? s->data : -1, ctl = keep ? s->ctl : -1;
	uint32_t served = reuse ? s->served + 1 : 0;

	memset(s, 0, sizeof(*s));
	s->up = up;
	s->down = down;
	s->pid = pid;
	s->pidfd = pidfd;
	s->data = d;
	s->ctl = ctl;
	s->used = true;
	s->sb = sb;
	s->sb_gen = sb->gen;
	snprintf(s->name, sizeof(s->name), "%s", sb->name);
	snprintf(s->instance, sizeof(s->instance), "%s", sb->instance_id);
	snprintf(s->policy, sizeof(s->policy), "%s", sb->egress_json);
	s->conn = conn_next();
	s->started_ms = clock_mono_ms();
	s->served = served;
}

/* The slot for sb's next connection: a live spare (its worker started ahead) before a free
 * one, or NULL when there is neither or sb holds egress_per_sandbox already. A slot is held
 * until its worker is reaped, after the call too: a worker still resolving or connecting does
 * not see its connection go, and one that a workload resets at once frees the init's slot and
 * stream for the next. Counted per sandbox (its armed worker too), so that one sandbox's
 * churn never holds more than egress_per_sandbox of them. */
static struct eslot *slot_pick(const struct sandbox *sb)
{
	struct eslot *s = NULL;
	uint32_t held = 0;

	for (uint32_t i = 0; i < nslots; i++) {
		/* a spare is taken while it lives (ctl_over and the reaper unmark a dead one) */
		if (slots[i].used && slots[i].spare && slots[i].ctl >= 0 && slots[i].pid > 0 &&
		    (!s || !s->spare))
			s = &slots[i];
		else if (!slots[i].used && !s)
			s = &slots[i];
		else if (slots[i].used && !slots[i].spare && slots[i].sb == sb &&
			 slots[i].sb_gen == sb->gen)
			held++;
	}
	return held < cfg->egress_per_sandbox ? s : NULL;
}

/* Why conn_take gave no slot: its audit line and metric are written already (BUSY, RATE), or
 * its log line (AUDIT, START). */
enum take { TAKE_OK, TAKE_BUSY, TAKE_RATE, TAKE_AUDIT, TAKE_START };

/* A new connection of sb: a slot, a token of its rate, the run's audit, and the slot's worker
 * told its connection (data: the workload's socket for a direct connection, -1 for a call,
 * whose bytes go through the slot's data socket). */
static enum take conn_take(struct sandbox *sb, int data, struct eslot **out)
{
	struct eslot *s = NULL;
	int r;

	s = slot_pick(sb);
	if (!s) {
		metrics_egress(1, 0, 0);
		audit_refusal(sb, "busy", 0);
		return TAKE_BUSY;
	}
	/* Over rate_per_minute: refused without a worker. A worker started only to say 429 would
	 * let a sandbox that churns connections make agenticd fork and exec as fast as it can
	 * open them, whatever its rate. */
	if (!rate_take(sb)) {
		metrics_egress(1, 0, 0);
		audit_refusal(sb, "rate_limited", 429);
		return TAKE_RATE;
	}
	/* before the slot is taken: a run that cannot be audited in costs no spare */
	if ((r = audit_open(sb)) < 0) {
		log_warn("egress connection not audited, refused", "name=%s error=%s",
			 log_q(sb->name), log_q(err_str(r)));
		metrics_egress(1, 0, 0);
		return TAKE_AUDIT;
	}
	close(r);
	slot_claim(s, sb, false);
	egress_used = true;
	r = worker_start(s, data, false);
	if (r != 0) {
		log_warn("egress worker not started", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(r)));
		worker_failed_line(s);
		if (s->pid > 0) {
			/* a spare's: it goes with its socket, and is reaped as any worker */
			close_data(s);
			close_ctl(s);
		} else {
			s->used = false;
		}
		return TAKE_START;
	}
	/* The next connection's worker is started when a connection ends, or SPARE_DEFER_MS
	 * after this take (egress_tick): a spare's fork and exec take a core for half a
	 * millisecond, and started at once it fell on this connection's own TLS handshake, when
	 * the workload, the worker and the upstream each want a core (a host of two has two). Two
	 * are kept, so a second connection meanwhile still finds one. */
	if (!spare_wanted || spare_defer_until < clock_mono_ms())
		spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
	spare_wanted = true;
	*out = s;
	return TAKE_OK;
}

static const char answer_429[] = "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\n"
				 "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n"
				 "rate_limited\n";

/* Answers the init's call with 429 (rate_limited) and ends it. */
static void rate_refuse(struct grpc_call *call)
{
	Agentic__Sandbox__V1__EgressChunk m = AGENTIC__SANDBOX__V1__EGRESS_CHUNK__INIT;

	m.data.data = (uint8_t *)answer_429;
	m.data.len = sizeof(answer_429) - 1;
	m.eof = true;
	if (grpc_call_send(call, &m.base) != 0) {
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no message buffer for the egress call");
		return;
	}
	refuse(call, GRPC_OK, NULL);
}

void egress_call_start(struct grpc_call *call, bool init_ok)
{
	const struct grpc_peer *p = grpc_call_peer(call);
	struct sandbox *sb = p->slot < 0 ? NULL : sandbox_slot((uint32_t)p->slot);
	struct eslot *s = NULL;

	grpc_call_set_user(call, NULL);
	/* the caller must be the registered init of a ready sandbox, that asked for egress */
	if (!sb || sb->state != SB_READY || sb->gen != p->tag || sb->uid != p->uid ||
	    lifecycle_going(sb) || !init_ok) {
		refuse(call, GRPC_PERMISSION_DENIED, "the caller is no registered init with egress");
		return;
	}
	if (stopping) {
		refuse(call, GRPC_UNAVAILABLE, "agenticd is stopping");
		return;
	}
	if (!sb->egress_json[0]) {
		refuse(call, GRPC_FAILED_PRECONDITION, "egress is off for this sandbox");
		return;
	}
	if (!transcript_of(sb)->run.open) {
		refuse(call, GRPC_FAILED_PRECONDITION, "the sandbox has no open run to audit in");
		return;
	}
	switch (conn_take(sb, -1, &s)) {
	case TAKE_OK:
		break;
	case TAKE_BUSY:
		refuse(call, GRPC_RESOURCE_EXHAUSTED, "no egress connection free");
		return;
	case TAKE_RATE:
		rate_refuse(call);
		return;
	case TAKE_AUDIT:
		refuse(call, GRPC_UNAVAILABLE, "the run's egress audit cannot be opened");
		return;
	case TAKE_START:
		refuse(call, GRPC_UNAVAILABLE, "the egress worker could not start");
		return;
	}
	s->call = call;
	grpc_call_set_user(call, s);
	step(s); /* the data socket watched from now on */
	grpc_call_flush(call);
	log_debug("egress connection", "name=%s conn=%llu", log_q(s->name),
		  (unsigned long long)s->conn);
}

void egress_call_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__EgressChunk *m = (const void *)msg;
	struct eslot *s = slot_of(call);

	if (!s)
		return;
	if (!egress_credit_down_ack(&s->cr, m->consumed)) {
		call_end(s, GRPC_INVALID_ARGUMENT, "consumed out of range");
		return;
	}
	if (m->data.len) {
		if (s->up_eof_in || m->data.len > EGRESS_CHUNK ||
		    !egress_credit_up_fits(&s->cr, m->data.len)) {
			call_end(s, GRPC_RESOURCE_EXHAUSTED, "over the egress window");
			return;
		}
		s->cr.up_in += m->data.len;
		if (s->up_dead) {
			/* nobody reads them any more: counted consumed, so the init's credit stays */
			s->cr.up_consumed += m->data.len;
		} else {
			if (s->cr.up_off + s->cr.up_len + m->data.len > EGRESS_WINDOW) {
				memmove(s->up, s->up + s->cr.up_off, s->cr.up_len);
				s->cr.up_off = 0;
			}
			memcpy(s->up + s->cr.up_off + s->cr.up_len, m->data.data, m->data.len);
			s->cr.up_len += (uint32_t)m->data.len;
		}
	}
	if (m->eof)
		s->up_eof_in = true;
	step(s);
}

void egress_call_half_close(struct grpc_call *call)
{
	struct eslot *s = slot_of(call);

	if (!s)
		return;
	s->up_eof_in = true;
	step(s);
}

void egress_call_writable(struct grpc_call *call)
{
	struct eslot *s = slot_of(call);

	if (s)
		step(s);
}

void egress_call_done(struct grpc_call *call, int status, const char *message)
{
	struct eslot *s = slot_of(call);

	(void)status;
	(void)message;
	if (!s)
		return;
	/* the init cancelled, or its connection went: the worker sees EOF and ends */
	s->call = NULL;
	close_data(s);
	s->linger_until = clock_mono_ms() + cfg->egress_io_timeout_ms + LINGER_GRACE_MS;
	slot_maybe_free(s);
}

/* ---- direct connections ----
 *
 * A sandbox of the engine runtime has a network namespace agenticd can reach, and so the
 * workload's connection itself can go to the worker: the init's listener on 127.0.0.1:3128
 * is taken over (a dup of it, pidfd_getfd), agenticd accepts on it, and each accepted socket
 * goes to a worker with its start packet. The bytes then cross one process, the worker, as
 * they do through any proxy, instead of three (the init, agenticd over the Egress call, the
 * worker). The init keeps its own copy, so the port stays taken across an agenticd restart,
 * and stops accepting on it while agenticd says "direct" in its registration's answer.
 *
 * The listener comes from a process agenticd does not trust: the init's number could name
 * anything. It is used only when it is what it must be (a listening TCP socket on
 * 127.0.0.1:3128). It is never closed while the init may hold a copy of it: a socket that the
 * init made a connected one with SO_LINGER set and a full queue, and of which it then closed
 * its own copies, would make agenticd's close the last one and wait out the linger in the
 * loop. So it is dropped when the sandbox's slot is given up (its container gone) or its
 * init changed, with SO_LINGER cleared first, once no other process holds it. An accepted
 * socket is agenticd's own, and is closed right after the start packet that gives it to a
 * spare worker (which received nothing before: it cannot have closed it first). */

static void listen_watch(struct sandbox *sb, bool on)
{
	struct epoll_event e = { .events = EPOLLIN };

	if (sb->egress_lfd < 0 || sb->egress_lfd_watched == on)
		return;
	e.data.u64 = ((uint64_t)TAG_EGRESS_LISTEN << 32) | sandbox_index(sb);
	if (epoll_ctl(epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, sb->egress_lfd, &e) == 0 || !on)
		sb->egress_lfd_watched = on;
}

static void disarm(struct sandbox *sb, bool rewatch);
static struct eslot *armed_of(const struct sandbox *sb);

void egress_listener_drop(struct sandbox *sb)
{
	struct linger off = { 0, 0 };

	disarm(sb, false);
	sb->egress_armable = false;
	if (sb->egress_lfd < 0)
		return;
	listen_watch(sb, false);
	setsockopt(sb->egress_lfd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
	close(sb->egress_lfd);
	sb->egress_lfd = -1;
	sb->egress_lfd_pid = 0;
	sb->egress_lfd_ok = false;
}

void egress_listener_stop(struct sandbox *sb)
{
	disarm(sb, false);
	sb->egress_armable = false;
	listen_watch(sb, false);
}

bool egress_listener_ok(int fd, uint16_t port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int v[4] = { 0, 0, 0, 0 };
	static const int opt[4] = { SO_DOMAIN, SO_TYPE, SO_PROTOCOL, SO_ACCEPTCONN };

	for (int i = 0; i < 4; i++) {
		socklen_t l = sizeof(int);

		if (getsockopt(fd, SOL_SOCKET, opt[i], &v[i], &l) != 0)
			return false;
	}
	if (v[0] != AF_INET || v[1] != SOCK_STREAM || v[2] != IPPROTO_TCP || v[3] != 1)
		return false;
	return getsockname(fd, (struct sockaddr *)&sa, &len) == 0 && len == sizeof(sa) &&
	       sa.sin_family == AF_INET && sa.sin_port == htons(port) &&
	       sa.sin_addr.s_addr == htonl(INADDR_LOOPBACK);
}

bool egress_listener_take(struct sandbox *sb, int init_fd)
{
	int fd;

	/* a VM's init is in the guest: the number it names is a guest descriptor, and the pid
	 * agenticd knows is QEMU's (whose descriptor of that number is anything but the
	 * listener): its connections come over its agent connection */
	if (!cfg->egress_direct || nslots == 0 || init_fd < 0 ||
	    sb->init_pidfd < 0 || sb->pid <= 0 || sb->vm)
		return false;
	if (sb->egress_lfd >= 0 && sb->egress_lfd_pid == sb->pid) {
		/* the same init, registered again (agenticd's restart is a new table) */
		if (sb->egress_lfd_ok && !armed_of(sb))
			listen_watch(sb, true);
		return sb->egress_lfd_ok;
	}
	/* another init: the container started again, and the one before is gone with it */
	egress_listener_drop(sb);
	fd = (int)syscall(SYS_pidfd_getfd, sb->init_pidfd, init_fd, 0);
	if (fd < 0) {
		log_warn("egress listener not taken over, calls carry the connections",
			 "name=%s error=%s", log_q(sb->name), log_q(err_str(-errno)));
		return false;
	}
	sb->egress_lfd = fd;
	sb->egress_lfd_pid = sb->pid;
	if (!egress_listener_ok(fd, EGRESS_PROXY_PORT) ||
	    fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO,
		       &(struct timeval){ 0, LISTEN_TIMEOUT_US }, sizeof(struct timeval)) != 0) {
		/* kept, unwatched, until it can be closed safely (above) */
		log_warn("egress listener of the init is no 127.0.0.1:3128 listener, not used",
			 "name=%s fd=%d", log_q(sb->name), init_fd);
		return false;
	}
	sb->egress_lfd_ok = true;
	listen_watch(sb, true);
	return sb->egress_lfd_watched;
}

/* A refusal said to the workload itself, then its socket closed. The socket is agenticd's
 * own, just accepted: its close never waits. */
static void direct_refuse(int fd, const char *answer, size_t len)
{
	(void)!send(fd, answer, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	close(fd);
}

static const char answer_503[] = "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
				 "Content-Length: 0\r\n\r\n";

static void direct_start(struct sandbox *sb, int fd)
{
	struct eslot *s = NULL;
	int one = 1;

	/* the workload's TLS handshake is small records each way: none waits for an ACK */
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (stopping || sb->state != SB_READY || lifecycle_going(sb) || !sb->egress_json[0] ||
	    !transcript_of(sb)->run.open) {
		direct_refuse(fd, answer_503, sizeof(answer_503) - 1);
		return;
	}
	switch (conn_take(sb, fd, &s)) {
	case TAKE_OK:
		break;
	case TAKE_RATE:
		direct_refuse(fd, answer_429, sizeof(answer_429) - 1);
		return;
	default:
		direct_refuse(fd, answer_503, sizeof(answer_503) - 1);
		return;
	}
	/* the worker has the socket now (in its queue, or received): agenticd lets go of it and
	 * of the spare's data socket, which the worker replaces with it */
	close(fd);
	close_data(s);
	s->direct = true;
	/* the sandbox uses egress: its next connection is awaited by a worker of its own */
	sb->egress_armable = true;
	arm_wanted = true;
	log_debug("egress connection", "name=%s conn=%llu direct=1", log_q(s->name),
		  (unsigned long long)s->conn);
}

/* ---- armed workers ----
 *
 * agenticd's accept is a wakeup of its own on each connection's path, before the worker's:
 * measured, the CONNECT's answer came 0.3 ms later than through a proxy that accepts itself.
 * So a sandbox whose egress is used gets a worker of its own that waits in accept(2) on a dup
 * of its listener, its start packet (policy, audit, a token of the rate) read ahead: the
 * kernel wakes it, and nothing else, for the connection. It accepts one, closes the listener
 * before it reads a byte of the workload's, says {"accepted": true}, and goes on as any worker
 * with its socket. While one waits agenticd does not watch the listener (the two would race
 * for each connection); from its accept until the next is armed, agenticd accepts as above.
 * A worker is armed at a connection's end or SPARE_DEFER_MS after the last take, from a
 * spare, or, at a connection's end, the worker that served it (rearm), for at most
 * ARMED_MAX sandboxes; a policy change, the sandbox's stop or going kill
 * it (its token of the rate is spent). */

static struct eslot *armed_of(const struct sandbox *sb)
{
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].used && slots[i].armed && slots[i].sb == sb &&
		    slots[i].sb_gen == sb->gen)
			return &slots[i];
	return NULL;
}

/* Ends sb's armed worker, if it has one; agenticd accepts again when rewatch. */
static void disarm(struct sandbox *sb, bool rewatch)
{
	struct eslot *s = armed_of(sb);

	if (s) {
		s->armed = false;
		s->quiet = true;
		worker_kill(s);
		close_ctl(s);
		slot_maybe_free(s);
	}
	if (rewatch && sb->egress_lfd >= 0 && sb->egress_lfd_ok)
		listen_watch(sb, true);
}

/* The armed workers of all sandboxes. */
static uint32_t armed_count(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].used && slots[i].armed)
			n++;
	return n;
}

/* Arms the worker of s (a spare's, or, reuse, the one whose connection of sb just ended) on
 * sb's listener: its start packet with a token of the rate, the current policy, the run's
 * audit and the listener. 1: armed; 0: not (no audit file or no token; s untouched); -errno:
 * the packet not given (s is sb's, claimed, and quiet: no line for what never came). */
static int arm_slot(struct eslot *s, struct sandbox *sb, bool reuse)
{
	int r;

	if (!transcript_of(sb)->run.open || transcript_of(sb)->run.dirfd < 0)
		return 0;
	/* a token now, or agenticd answers the next connection (429) */
	if (!rate_take(sb))
		return 0;
	slot_claim(s, sb, reuse);
	s->armed = true;
	r = worker_start(s, sb->egress_lfd, false);
	if (r != 0) {
		s->armed = false;
		s->quiet = true;
		return r;
	}
	listen_watch(sb, false);
	return 1;
}

static void arm(struct sandbox *sb)
{
	struct eslot *s = slot_pick(sb);
	int r;

	/* a spare only: arming never forks on anyone's path */
	if (!s || !s->spare || armed_count() >= ARMED_MAX || (r = arm_slot(s, sb, false)) == 0)
		return;
	/* the worker has its dup of the listener (queued or received), or none; agenticd's data
	 * end of the spare is done with */
	close_data(s);
	if (r < 0) {
		/* as a worker that died armed (ctl_over): the next is armed a second later */
		spare_backoff_until = clock_mono_ms() + 1000;
		close_ctl(s);
		return;
	}
	spare_wanted = true;
	if (spare_defer_until < clock_mono_ms())
		spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
}

/* The armed worker of s accepted a connection: agenticd watches the listener until the next
 * is armed. */
static void armed_accepted(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	s->armed = false;
	s->direct = true;
	s->started_ms = clock_mono_ms(); /* the connection's, not the arming's */
	if (sb->gen == s->sb_gen && sb->egress_lfd >= 0 && sb->egress_lfd_ok)
		listen_watch(sb, true);
	arm_wanted = true;
	if (spare_defer_until < clock_mono_ms())
		spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
}

/* Ends the armed workers whose list of this host's addresses is wrong for their policy now
 * (own_event), whichever read of the netlink socket found the change, and arms others. */
static void disarm_stale(void)
{
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].used && slots[i].armed && slots[i].own_old &&
		    slots[i].sb->gen == slots[i].sb_gen) {
			disarm(slots[i].sb, true);
			arm_wanted = true;
		}
}

/* sb may have a worker armed on its listener now (one it has aside). */
static bool armable(const struct sandbox *sb)
{
	return sb->state == SB_READY && sb->egress_armable && sb->egress_lfd >= 0 &&
	       sb->egress_lfd_ok && sb->egress_json[0] && transcript_of(sb)->run.open && !lifecycle_going(sb);
}

static void arm_all(void)
{
	if (stopping || !cfg->egress_direct)
		return;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (armable(sb) && !armed_of(sb))
			arm(sb);
	}
}

/* Whether a packet waits on s's control socket (its eof is left to the read that finds it). */
static bool ctl_queued(const struct eslot *s)
{
	char c;

	return recv(s->ctl, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

/* Reuse (docs/EGRESS.md "Reuse"): the record of a direct connection came, and its worker waits
 * for agenticd's word. When its sandbox would get a worker armed now and has none, this one
 * is armed again: a token of the rate, the current policy, the run's audit and the listener,
 * as arm gives a spare, so the sandbox's next connection costs no fork, exec or exit and
 * takes no spare. Only ever on the sandbox it served (the same slot, sandbox and generation),
 * at most REUSE_MAX connections a worker. false: not armed again (the caller's eof ends it). */
static bool rearm(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	/* one that asked for a route's secret is not: a worker holds one secret in its life,
	 * so one a crafted request took over has that one */
	/* nor one whose policy changed since: it bound itself to the ports of its first one
	 * (egress_confine), and a bound is never loosened */
	if (stopping || !cfg->egress_direct || s->pid <= 0 || s->ctl < 0 || s->secret_asked ||
	    s->served + 1 >= REUSE_MAX || !sb || sb->gen != s->sb_gen ||
	    strcmp(s->policy, sb->egress_json) != 0 || !armable(sb) ||
	    armed_of(sb) || armed_count() >= ARMED_MAX)
		return false;
	return arm_slot(s, sb, true) > 0;
}

void egress_policy_changed(struct sandbox *sb)
{
	/* the waiting worker holds the policy before: the next connection gets the new one */
	if (armed_of(sb)) {
		disarm(sb, true);
		arm_wanted = true;
	}
}

/* The listener's O_NONBLOCK belongs to its open file, which agenticd shares with every worker
 * armed on it, and a worker that served a connection is armed again ("Reuse"): one a crafted
 * request took over could clear the flag, and agenticd's accept of a connection that the queue
 * no longer held would block its loop (every sandbox's API, agent channel and egress) until
 * the workload connected again. So the listener has a receive timeout (LISTEN_TIMEOUT_US,
 * which bounds a blocking accept; the worker's filter refuses it SO_RCVTIMEO), and a flag
 * found cleared, before an accept or after one that found nothing, ends the sandbox's direct
 * egress: the listener is not watched any more and its armed worker is killed. false then. */
static bool listener_sound(struct sandbox *sb)
{
	int fl = fcntl(sb->egress_lfd, F_GETFL);

	if (fl >= 0 && (fl & O_NONBLOCK))
		return true;
	log_warn("egress listener made blocking by a worker, not watched any more",
		 "name=%s", log_q(sb->name));
	listen_watch(sb, false);
	sb->egress_lfd_ok = false;
	disarm(sb, false);
	return false;
}

void egress_listen_event(uint32_t idx)
{
	struct sandbox *sb = sandbox_slot(idx);

	if (!sb || sb->egress_lfd < 0)
		return;
	/* a few a turn: a sandbox that floods connections shares the loop with the rest */
	for (int i = 0; i < 8; i++) {
		int fd;

		if (!listener_sound(sb))
			return;
		/* blocking, as the data socket a worker is used to (it asks MSG_DONTWAIT itself) */
		fd = accept4(sb->egress_lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
				listener_sound(sb);
				return;
			}
			/* no listener any more (the init changed it): the sandbox's egress stops
			 * here, and the listener is kept unwatched until it can be closed */
			log_warn("egress listener failed, not watched any more", "name=%s error=%s",
				 log_q(sb->name), log_q(err_str(-errno)));
			listen_watch(sb, false);
			sb->egress_lfd_ok = false;
			return;
		}
		direct_start(sb, fd);
	}
}

/* ---- the worker's control packets ---- */

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static size_t b64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);

		out[o++] = b64_alphabet[(v >> 18) & 63];
		out[o++] = b64_alphabet[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64_alphabet[(v >> 6) & 63] : '=';
		out[o++] = i + 2 < n ? b64_alphabet[v & 63] : '=';
	}
	out[o] = '\0';
	return o;
}

/* routes[i].secret_file of the policy the worker got, into path: 0 or -1. */
static int secret_path(const struct eslot *s, int64_t i, char *path, size_t cap)
{
	struct json_doc d;
	int routes, r;

	if (json_parse(&d, s->policy, strlen(s->policy), toks, POLICY_TOKENS) != 0 ||
	    toks[0].type != JSON_OBJECT || (routes = json_obj_get(&d, 0, "routes")) < 0 ||
	    toks[routes].type != JSON_ARRAY || i < 0 || i >= (int64_t)toks[routes].children)
		return -1;
	r = json_first(&d, routes);
	while (r >= 0 && i-- > 0)
		r = json_next(&d, routes, r);
	if (r < 0 || toks[r].type != JSON_OBJECT ||
	    json_str(&d, json_obj_get(&d, r, "secret_file"), path, cap) <= 0 || path[0] != '/')
		return -1;
	return 0;
}

/* path's part below dir (no leading '/'), or NULL when path does not name something below
 * it. */
static const char *secret_rel(const char *dir, const char *path)
{
	size_t n = strlen(dir);

	while (n > 1 && dir[n - 1] == '/')
		n--;
	if (strncmp(path, dir, n) != 0 || (n > 1 && path[n] != '/'))
		return NULL;
	path += n;
	while (*path == '/')
		path++;
	return *path ? path : NULL;
}

/* Opens a route's secret file: below dir (secret_dir), resolved from its descriptor
 * with openat2 so that no "..", symbolic link (the last component's too), magic link or
 * other mount leads out of it. The descriptor, or -errno (-EXDEV: not below secret_dir). */
static int secret_open(const char *dir, const char *path)
{
	struct open_how how = {
		.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
			   RESOLVE_NO_XDEV,
	};
	const char *rel = secret_rel(dir, path);
	int dfd, fd;

	if (!rel)
		return -EXDEV;
	dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof(how));
	fd = fd < 0 ? -errno : fd;
	close(dfd);
	return fd;
}

int egress_secret_check(const struct config *c, const struct egress_policy *pol, char *why,
			size_t cap)
{
	for (uint32_t i = 0; i < pol->nroutes; i++) {
		int fd = secret_open(c->secret_dir, pol->routes[i].secret_file);

		if (fd >= 0) {
			close(fd);
			continue;
		}
		/* one not there yet is read when it is asked for, by the same rule */
		if (fd == -ENOENT && secret_rel(c->secret_dir, pol->routes[i].secret_file))
			continue;
		snprintf(why, cap, "egress.routes[%u].secret_file: must name a file in secret_dir "
			 "(%s), reached without a symbolic link, \"..\" or another mount", i,
			 c->secret_dir);
		return -1;
	}
	return 0;
}

/* Reads the secret from fd (closed): regular, root's, no group or other bits, at most
 * EGRESS_SECRET_BYTES, one trailing newline dropped. Its length, or -1. */
static long secret_read_fd(int fd, uint8_t *out)
{
	struct stat st;
	long n = 0;

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 077) || st.st_size > (off_t)EGRESS_SECRET_BYTES) {
		close(fd);
		return -1;
	}
	while (n < (long)EGRESS_SECRET_BYTES) {
		ssize_t k = read(fd, out + n, EGRESS_SECRET_BYTES - (size_t)n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			n = -1;
			break;
		}
		if (k == 0)
			break;
		n += k;
	}
	close(fd);
	if (n > 0 && out[n - 1] == '\n')
		n--;
	return n > 0 ? n : -1;
}

long egress_secret_read(const char *path, uint8_t *out)
{
	return secret_read_fd(open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK), out);
}

static void ctl_secret(struct eslot *s, int64_t route)
{
	static uint8_t secret[EGRESS_SECRET_BYTES];
	static char pkt[EGRESS_SECRET_BYTES * 2 + 64];
	char path[LIMIT_PATH_BYTES];
	long n = -1;
	size_t len;

	if (secret_path(s, route, path, sizeof(path)) == 0)
		n = secret_read_fd(secret_open(cfg->secret_dir, path), secret);
	if (n < 0) {
		len = (size_t)snprintf(pkt, sizeof(pkt), "{\"error\":\"secret_unavailable\"}");
		log_warn("egress secret unavailable", "name=%s conn=%llu route=%lld",
			 log_q(s->name), (unsigned long long)s->conn, (long long)route);
	} else {
		len = (size_t)snprintf(pkt, sizeof(pkt), "{\"secret_b64\":\"");
		len += b64_encode(secret, (size_t)n, pkt + len);
		len += (size_t)snprintf(pkt + len, sizeof(pkt) - len, "\"}");
	}
	if (send(s->ctl, pkt, len, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)len)
		log_warn("egress secret answer not sent", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
	explicit_bzero(secret, sizeof(secret));
	explicit_bzero(pkt, sizeof(pkt));
}

/* The answer to {"own": true}: {"own": K} (-1: none known, the worker reads them itself),
 * then, when K > 0, the K records as a packet of their own. */
static void ctl_own(struct eslot *s)
{
	if (own_send(s) != 0)
		log_warn("egress addresses answer not sent", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
}

/* word if it is one of words[0..n), else "unknown": a record's words are the worker's, and
 * one a workload took over may say anything; the line says only what a worker can say. */
static const char *word_of(const char *word, const char *(*name)(int), int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(word, name(i)) == 0)
			return name(i);
	return "unknown";
}

static const char *kind_name(int i)
{
	static const char *const kinds[] = { "tunnel", "route", "unknown" };

	return kinds[i];
}

static const char *decision_name(int i)
{
	static const char *const decisions[] = { "allow", "deny", "would_deny" };

	return decisions[i];
}

static const char *reason_name(int i)
{
	return egress_reason_word((enum egress_reason)i);
}

static const char *end_name(int i)
{
	return egress_end_word((enum egress_end)i);
}

/* The worker's record: the audit line agenticd writes for it (docs/EGRESS.md "Audit"). ts,
 * sandbox, instance and conn are the slot's and duration_ms agenticd's own (from the
 * connection's claim, or an armed worker's accept); the rest is what the worker says, in the
 * words it can say. */
static void ctl_record(struct eslot *s, const struct json_doc *d)
{
	static char host[EGRESS_HOST_BYTES], path[CTL_BYTES];
	char kind[16] = "", method[32] = "", decision[16] = "", reason[32] = "", end[32] = "";
	struct audit_fields f = { 0 };
	int dec = 1;

	host[0] = path[0] = '\0';
	json_str(d, json_obj_get(d, 0, "kind"), kind, sizeof(kind));
	json_str(d, json_obj_get(d, 0, "method"), method, sizeof(method));
	json_str(d, json_obj_get(d, 0, "host"), host, sizeof(host));
	json_str(d, json_obj_get(d, 0, "path"), path, sizeof(path));
	json_str(d, json_obj_get(d, 0, "decision"), decision, sizeof(decision));
	json_str(d, json_obj_get(d, 0, "reason"), reason, sizeof(reason));
	json_str(d, json_obj_get(d, 0, "end"), end, sizeof(end));
	json_int(d, json_obj_get(d, 0, "port"), &f.port);
	json_int(d, json_obj_get(d, 0, "status"), &f.status);
	json_int(d, json_obj_get(d, 0, "bytes_up"), &f.bytes_up);
	json_int(d, json_obj_get(d, 0, "bytes_down"), &f.bytes_down);
	path[strcspn(path, "?")] = '\0'; /* never the query */
	for (int i = 0; i < 3; i++)
		if (strcmp(decision, decision_name(i)) == 0)
			dec = i;
	f.kind = word_of(kind, kind_name, 3);
	f.method = method;
	f.host = host;
	f.path = path;
	f.decision = decision_name(dec);
	f.reason = word_of(reason, reason_name, ER_COUNT);
	f.end = word_of(end, end_name, EE_TIMEOUT + 1);
	f.port = f.port < 0 || f.port > 65535 ? 0 : f.port;
	f.bytes_up = f.bytes_up < 0 ? 0 : f.bytes_up;
	f.bytes_down = f.bytes_down < 0 ? 0 : f.bytes_down;
	f.duration_ms = clock_mono_ms() - s->started_ms;
	s->record_seen = true;
	metrics_egress(dec, (uint64_t)f.bytes_up, (uint64_t)f.bytes_down);
	if (s->sb && s->sb->gen == s->sb_gen && s->sb->state != SB_FREE &&
	    audit_line(s->sb, s->name, s->instance, s->conn, &f) != 0)
		log_warn("egress audit line not written", "name=%s conn=%llu", log_q(s->name),
			 (unsigned long long)s->conn);
	log_info("egress", "sandbox=%s conn=%llu kind=%s host=%s port=%lld decision=%s reason=%s "
		 "status=%lld", log_q(s->name), (unsigned long long)s->conn, log_q(f.kind),
		 log_q(host), (long long)f.port, log_q(f.decision), log_q(f.reason),
		 (long long)f.status);
}

/* The control socket is done with: read to its end, or closed on a worker that broke the
 * protocol. */
static void ctl_over(struct eslot *s)
{
	s->ctl_eof = true;
	close_ctl(s);
	if (s->spare) {
		/* a spare that ended or broke the protocol: no connection to audit, and no longer
		 * one to take (the slot waits for the reaper); the next waits a second, so that a
		 * worker that cannot start is not started as fast as it dies */
		s->spare = false;
		spare_backoff_until = clock_mono_ms() + 1000;
		close_data(s);
		slot_maybe_free(s);
		return;
	}
	if (s->armed) {
		/* it died waiting (or broke the protocol): no connection was its; agenticd accepts
		 * again, and, as for a spare that ended, the next is armed a second later at the
		 * earliest, so that a worker that cannot wait is not armed as fast as it dies */
		s->armed = false;
		s->quiet = true;
		/* not for one armed again after a connection (served): that one started, and
		 * the workload's bytes it read may have made it break the protocol, which must not
		 * hold back every sandbox's spares and arming */
		if (!s->served)
			spare_backoff_until = clock_mono_ms() + 1000;
		if (s->sb->gen == s->sb_gen && s->sb->egress_lfd >= 0 && s->sb->egress_lfd_ok)
			listen_watch(s->sb, true);
	}
	if (!s->record_seen)
		worker_failed_line(s);
	if (s->call)
		step(s);
	slot_maybe_free(s);
}

/* A worker sends at most three packets: one request for this host's addresses, one secret
 * request, then its record. Anything else (a
 * second secret, a packet after the record, one that is no JSON object) is a worker that a
 * workload took over: it would read every route's secret of its policy, or keep agenticd's
 * loop reading secret files and writing log lines as fast as it sends. It is killed and its
 * control socket closed. */
static void ctl_readable(struct eslot *s)
{
	static char pkt[CTL_BYTES + 1];
	static struct json_token ptok[256];

	for (;;) {
		struct json_doc d;
		ssize_t n = recv(s->ctl, pkt, CTL_BYTES, MSG_DONTWAIT);
		const char *bad = NULL;
		int64_t route;
		int i;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			ctl_over(s);
			return;
		}
		if (s->spare)
			bad = "packet_before_start";
		else if (s->record_seen)
			bad = "packet_after_record";
		else if (json_parse(&d, pkt, (size_t)n, ptok, ARRAY_LEN(ptok)) != 0 ||
			 ptok[0].type != JSON_OBJECT)
			bad = "not_an_object";
		else if (s->armed && json_obj_get(&d, 0, "accepted") < 0)
			bad = "packet_before_accept"; /* it has no connection yet: nothing to ask */
		else if ((i = json_obj_get(&d, 0, "secret")) >= 0) {
			if (s->secret_asked || json_int(&d, i, &route) != 0)
				bad = "second_secret";
			else {
				s->secret_asked = true;
				ctl_secret(s, route);
			}
		} else if (json_obj_get(&d, 0, "own") >= 0) {
			if (s->own_asked)
				bad = "second_own";
			else {
				s->own_asked = true;
				ctl_own(s);
			}
		} else if (json_obj_get(&d, 0, "accepted") >= 0) {
			if (!s->armed)
				bad = "accepted_unarmed";
			else
				armed_accepted(s);
		} else if (json_obj_get(&d, 0, "decision") >= 0) {
			ctl_record(s, &d);
			/* a direct connection's worker waits: armed again, or this eof ends it. It
			 * sends nothing before its next start packet: a packet already queued
			 * behind the record would be read as the next connection's, so a worker
			 * could play a connection after another without any, each a token, an
			 * audit file and a start packet of agenticd's (REUSE_MAX in one turn) */
			if (s->direct && !s->call && ctl_queued(s))
				bad = "packet_after_record";
			else if (s->direct && !s->call && !rearm(s)) {
				/* its connection is over: one that does not end at the eof (one a
				 * crafted request took over) is killed, not left holding its slot */
				s->linger_until = clock_mono_ms() + RECORD_EXIT_MS;
				ctl_over(s);
				return;
			}
		} else
			bad = "unknown_packet";
		if (bad) {
			log_warn("egress worker broke the control protocol, killed",
				 "name=%s conn=%llu what=%s", log_q(s->name),
				 (unsigned long long)s->conn, log_q(bad));
			worker_kill(s);
			ctl_over(s);
			return;
		}
	}
}

void egress_event(uint32_t idx, bool ctl, uint32_t events)
{
	struct eslot *s;

	if (ctl && idx == EGRESS_NETLINK_SLOT) {
		own_drain();
		/* an armed worker holds the list from its arming: armed again, with the new one */
		disarm_stale();
		return;
	}
	if (idx >= nslots || !(s = &slots[idx])->used)
		return;
	if (ctl) {
		if (s->ctl >= 0)
			ctl_readable(s);
		return;
	}
	if (s->call)
		step(s);
	/* what step queued goes now, not at the loop's next EPOLLOUT: a round trip of the
	 * workload's crosses this hop several times */
	if (s->call)
		grpc_call_flush(s->call);
	(void)events;
}

bool egress_is_worker(int pid)
{
	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].used && slots[i].pid == pid)
			return true;
	return false;
}

void egress_reap(void)
{
	for (uint32_t i = 0; i < nslots; i++) {
		struct eslot *s = &slots[i];
		int st;
		pid_t r;

		if (!s->used || s->pid <= 0)
			continue;
		r = waitpid(s->pid, &st, WNOHANG);
		if (r == 0 || (r < 0 && errno != ECHILD))
			continue;
		if (r > 0 && (WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0)))
			log_info("egress worker ended", "name=%s conn=%llu status=%d signal=%d",
				 log_q(s->name), (unsigned long long)s->conn,
				 WIFEXITED(st) ? WEXITSTATUS(st) : -1, WIFSIGNALED(st) ? WTERMSIG(st) : 0);
		s->pid = 0;
		/* what it left in the control socket is read first, then its end */
		if (s->ctl >= 0)
			ctl_readable(s);
		if (s->call)
			step(s);
		slot_maybe_free(s);
	}
}

static void worker_kill(struct eslot *s)
{
	if (s->pid > 0 && s->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
}

static int64_t spare_due(void)
{
	return spare_backoff_until > spare_defer_until ? spare_backoff_until : spare_defer_until;
}

void egress_tick(int64_t now)
{
	/* a change own_fresh drained (a start packet's) ends the armed workers it concerns too */
	disarm_stale();
	if (spare_wanted && now >= spare_due()) {
		spare_wanted = false;
		spare_fill();
	}
	/* after the spares: arming takes one, and a spare just started may be the one */
	if (arm_wanted && now >= spare_due()) {
		arm_wanted = false;
		arm_all();
	}
	/* refusals not written in a second that is over: one line says how many (the last one's
	 * reason stands for them) */
	for (uint32_t i = 0; i < nbuckets; i++) {
		struct bucket *b = &buckets[i];
		struct sandbox *sb = sandbox_slot(i);

		if (!b->suppressed || b->refused_sec == now / 1000)
			continue;
		if (!sb || sb->gen != b->gen || sb->state == SB_FREE || !transcript_of(sb)->run.open) {
			b->suppressed = 0;
			continue;
		}
		if (audit_refused(sb, sb->name, sb->instance_id, conn_next(), b->suppressed_reason,
				  b->suppressed_status, 0, "closed", b->suppressed - 1) == 0)
			b->suppressed = 0;
	}
	for (uint32_t i = 0; i < nslots; i++) {
		struct eslot *s = &slots[i];

		/* a direct connection's worker outlives no sandbox: its workload's socket died
		 * with the container, and it would find out; this does not wait for that */
		if (s->used && (s->direct || s->armed) && s->pid > 0 &&
		    (s->sb->gen != s->sb_gen || s->sb->state == SB_FREE)) {
			worker_kill(s);
			continue;
		}
		if (s->used && !s->call && s->pid > 0 && s->linger_until && now >= s->linger_until) {
			log_warn("egress worker killed: it outlived its connection", "name=%s conn=%llu",
				 log_q(s->name), (unsigned long long)s->conn);
			worker_kill(s);
			s->linger_until = 0;
		}
	}
}

int64_t egress_next_deadline(void)
{
	int64_t next = spare_wanted || arm_wanted ? spare_due() : INT64_MAX;

	for (uint32_t i = 0; i < nslots; i++)
		if (slots[i].used && !slots[i].call && slots[i].pid > 0 && slots[i].linger_until &&
		    slots[i].linger_until < next)
			next = slots[i].linger_until;
	for (uint32_t i = 0; i < nbuckets; i++)
		if (buckets[i].suppressed && (buckets[i].refused_sec + 1) * 1000 < next)
			next = (buckets[i].refused_sec + 1) * 1000;
	return next;
}

void egress_shutdown(void)
{
	stopping = true;
	for (uint32_t i = 0; i < nslots; i++) {
		struct eslot *s = &slots[i];

		if (!s->used)
			continue;
		stopped_line(s);
		if (s->call)
			call_end(s, GRPC_UNAVAILABLE, "agenticd is stopping");
		close_data(s);
		close_ctl(s);
	}
}
