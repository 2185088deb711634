/* broker_direct.c: direct connections (the init's listener taken over, accepted by agenticd)
 * and armed workers (a worker waiting in accept on it, armed again after a connection). */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "egress/broker_slot.h"

#define ARMED_MAX 4                    /* workers waiting in accept on a sandbox's listener */
#define REUSE_MAX 256                  /* connections of one worker, in turn, at most */
#define LISTEN_TIMEOUT_US 1000         /* SO_RCVTIMEO of a sandbox's listener: see listener_sound */

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

void broker_listen_watch(struct sandbox *sb, bool on)
{
	struct epoll_event e = { .events = EPOLLIN };

	if (broker_sb(sb)->lfd < 0 || broker_sb(sb)->lfd_watched == on)
		return;
	e.data.u64 = broker_tag(bst.tags.listen, sandbox_index(sb));
	if (epoll_ctl(bst.epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, broker_sb(sb)->lfd, &e) == 0 || !on)
		broker_sb(sb)->lfd_watched = on;
}

static void disarm(struct sandbox *sb, bool rewatch);
static struct eslot *armed_of(const struct sandbox *sb);

void egress_listener_drop(struct sandbox *sb)
{
	struct linger off = { 0, 0 };

	if (!bst.sbs)
		return; /* the broker never started (a simulator's hooks): nothing of sb's */
	disarm(sb, false);
	broker_sb(sb)->armable = false;
	if (broker_sb(sb)->lfd < 0)
		return;
	broker_listen_watch(sb, false);
	setsockopt(broker_sb(sb)->lfd, SOL_SOCKET, SO_LINGER, &off, sizeof(off));
	close(broker_sb(sb)->lfd);
	broker_sb(sb)->lfd = -1;
	broker_sb(sb)->lfd_pid = 0;
	broker_sb(sb)->lfd_ok = false;
}

void egress_listener_stop(struct sandbox *sb)
{
	if (!bst.sbs)
		return; /* as in egress_listener_drop */
	disarm(sb, false);
	broker_sb(sb)->armable = false;
	broker_listen_watch(sb, false);
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
	if (!bst.cfg->egress_direct || bst.nslots == 0 || init_fd < 0 ||
	    sb->init_pidfd < 0 || sb->pid <= 0 || sb->vm)
		return false;
	if (broker_sb(sb)->lfd >= 0 && broker_sb(sb)->lfd_pid == sb->pid) {
		/* the same init, registered again (agenticd's restart is a new table) */
		if (broker_sb(sb)->lfd_ok && !armed_of(sb))
			broker_listen_watch(sb, true);
		return broker_sb(sb)->lfd_ok;
	}
	/* another init: the container started again, and the one before is gone with it */
	egress_listener_drop(sb);
	fd = (int)syscall(SYS_pidfd_getfd, sb->init_pidfd, init_fd, 0);
	if (fd < 0) {
		log_warn("egress listener not taken over, calls carry the connections",
			 "name=%s error=%s", log_q(sb->name), log_q(err_str(-errno)));
		return false;
	}
	broker_sb(sb)->lfd = fd;
	broker_sb(sb)->lfd_pid = sb->pid;
	if (!egress_listener_ok(fd, EGRESS_PROXY_PORT) ||
	    fcntl(fd, F_SETFL, O_NONBLOCK | O_RDWR) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO,
		       &(struct timeval){ 0, LISTEN_TIMEOUT_US }, sizeof(struct timeval)) != 0) {
		/* kept, unwatched, until it can be closed safely (above) */
		log_warn("egress listener of the init is no 127.0.0.1:3128 listener, not used",
			 "name=%s fd=%d", log_q(sb->name), init_fd);
		return false;
	}
	broker_sb(sb)->lfd_ok = true;
	broker_listen_watch(sb, true);
	return broker_sb(sb)->lfd_watched;
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
	if (bst.stopping || sb->state != SB_READY || lifecycle_going(sb) || !sb->egress_json[0] ||
	    !transcript_of(sb)->run.open) {
		direct_refuse(fd, answer_503, sizeof(answer_503) - 1);
		return;
	}
	switch (broker_conn_take(sb, fd, &s)) {
	case TAKE_OK:
		break;
	case TAKE_RATE:
		direct_refuse(fd, broker_answer_429, broker_answer_429_len);
		return;
	default:
		direct_refuse(fd, answer_503, sizeof(answer_503) - 1);
		return;
	}
	/* the worker has the socket now (in its queue, or received): agenticd lets go of it and
	 * of the spare's data socket, which the worker replaces with it */
	close(fd);
	broker_close_data(s);
	s->direct = true;
	/* the sandbox uses egress: its next connection is awaited by a worker of its own */
	broker_sb(sb)->armable = true;
	bst.arm_wanted = true;
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
	for (uint32_t i = 0; i < bst.nslots; i++)
		if (bst.slots[i].used && bst.slots[i].armed && bst.slots[i].sb == sb &&
		    bst.slots[i].sb_gen == sb->gen)
			return &bst.slots[i];
	return NULL;
}

/* Ends sb's armed worker, if it has one; agenticd accepts again when rewatch. */
static void disarm(struct sandbox *sb, bool rewatch)
{
	struct eslot *s = armed_of(sb);

	if (s) {
		s->armed = false;
		s->quiet = true;
		broker_worker_kill(s);
		broker_close_ctl(s);
		broker_slot_maybe_free(s);
	}
	if (rewatch && broker_sb(sb)->lfd >= 0 && broker_sb(sb)->lfd_ok)
		broker_listen_watch(sb, true);
}

/* The armed workers of all sandboxes. */
static uint32_t armed_count(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < bst.nslots; i++)
		if (bst.slots[i].used && bst.slots[i].armed)
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
	if (!broker_rate_take(sb))
		return 0;
	broker_slot_claim(s, sb, reuse);
	ASSERT(armed_count() < ARMED_MAX);
	s->armed = true;
	r = broker_worker_start(s, broker_sb(sb)->lfd, false);
	if (r != 0) {
		s->armed = false;
		s->quiet = true;
		return r;
	}
	broker_listen_watch(sb, false);
	return 1;
}

static void arm(struct sandbox *sb)
{
	struct eslot *s = broker_slot_pick(sb);
	int r;

	/* a spare only: arming never forks on anyone's path */
	if (!s || !s->spare || armed_count() >= ARMED_MAX || (r = arm_slot(s, sb, false)) == 0)
		return;
	/* the worker has its dup of the listener (queued or received), or none; agenticd's data
	 * end of the spare is done with */
	broker_close_data(s);
	if (r < 0) {
		/* as a worker that died armed (ctl_over): the next is armed a second later */
		bst.spare_backoff_until = clock_mono_ms() + 1000;
		broker_close_ctl(s);
		return;
	}
	bst.spare_wanted = true;
	if (bst.spare_defer_until < clock_mono_ms())
		bst.spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
}

/* The armed worker of s accepted a connection: agenticd watches the listener until the next
 * is armed. */
void broker_armed_accepted(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	s->armed = false;
	s->direct = true;
	s->started_ms = clock_mono_ms(); /* the connection's, not the arming's */
	if (sb->gen == s->sb_gen && broker_sb(sb)->lfd >= 0 && broker_sb(sb)->lfd_ok)
		broker_listen_watch(sb, true);
	bst.arm_wanted = true;
	if (bst.spare_defer_until < clock_mono_ms())
		bst.spare_defer_until = clock_mono_ms() + SPARE_DEFER_MS;
}

/* Ends the armed workers whose list of this host's addresses is wrong for their policy now
 * (own_event), whichever read of the netlink socket found the change, and arms others. */
void broker_disarm_stale(void)
{
	for (uint32_t i = 0; i < bst.nslots; i++)
		if (bst.slots[i].used && bst.slots[i].armed && bst.slots[i].own_old &&
		    bst.slots[i].sb->gen == bst.slots[i].sb_gen) {
			disarm(bst.slots[i].sb, true);
			bst.arm_wanted = true;
		}
}

/* sb may have a worker armed on its listener now (one it has aside). */
static bool armable(const struct sandbox *sb)
{
	return sb->state == SB_READY && broker_sb(sb)->armable && broker_sb(sb)->lfd >= 0 &&
	       broker_sb(sb)->lfd_ok && sb->egress_json[0] && transcript_of(sb)->run.open && !lifecycle_going(sb);
}

void broker_arm_all(void)
{
	if (bst.stopping || !bst.cfg->egress_direct)
		return;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (armable(sb) && !armed_of(sb))
			arm(sb);
	}
}
/* Reuse (docs/EGRESS.md "Reuse"): the record of a direct connection came, and its worker waits
 * for agenticd's word. When its sandbox would get a worker armed now and has none, this one
 * is armed again: a token of the rate, the current policy, the run's audit and the listener,
 * as arm gives a spare, so the sandbox's next connection costs no fork, exec or exit and
 * takes no spare. Only ever on the sandbox it served (the same slot, sandbox and generation),
 * at most REUSE_MAX connections a worker. false: not armed again (the caller's eof ends it). */
bool broker_rearm(struct eslot *s)
{
	struct sandbox *sb = s->sb;

	/* one that asked for a route's secret is not: a worker holds one secret in its life,
	 * so one a crafted request took over has that one */
	/* nor one whose policy changed since: it bound itself to the ports of its first one
	 * (egress_confine), and a bound is never loosened */
	if (bst.stopping || !bst.cfg->egress_direct || s->pid <= 0 || s->ctl < 0 || s->secret_asked ||
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
		bst.arm_wanted = true;
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
	int fl = fcntl(broker_sb(sb)->lfd, F_GETFL);

	if (fl >= 0 && (fl & O_NONBLOCK))
		return true;
	log_warn("egress listener made blocking by a worker, not watched any more",
		 "name=%s", log_q(sb->name));
	broker_listen_watch(sb, false);
	broker_sb(sb)->lfd_ok = false;
	disarm(sb, false);
	return false;
}

void egress_listen_event(uint32_t idx)
{
	struct sandbox *sb = sandbox_slot(idx);

	if (!sb || broker_sb(sb)->lfd < 0)
		return;
	/* a few a turn: a sandbox that floods connections shares the loop with the rest */
	for (int i = 0; i < 8; i++) {
		int fd;

		if (!listener_sound(sb))
			return;
		/* blocking, as the data socket a worker is used to (it asks MSG_DONTWAIT itself) */
		fd = accept4(broker_sb(sb)->lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) {
				listener_sound(sb);
				return;
			}
			/* no listener any more (the init changed it): the sandbox's egress stops
			 * here, and the listener is kept unwatched until it can be closed */
			log_warn("egress listener failed, not watched any more", "name=%s error=%s",
				 log_q(sb->name), log_q(err_str(-errno)));
			broker_listen_watch(sb, false);
			broker_sb(sb)->lfd_ok = false;
			return;
		}
		direct_start(sb, fd);
	}
}
