/* broker_worker.c: the worker processes: started (clone, its identity, limits and seccomp
 * filter), told their connection (the start packet), kept started ahead (spares), killed. */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "egress/broker_slot.h"

#define WORKER_AS_BYTES (256ull << 20)
#define WORKER_NOFILE 16
#define SPARES 2                       /* workers kept started ahead, once egress is used */

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

/* The worker's seccomp filters. The first (fd_forbid_passing): no sendmsg, sendmmsg or
 * io_uring, so no descriptor of its can reach agenticd (SCM_RIGHTS) however it is taken over.
 * agenticd reads its sockets without a control buffer, and the kernel closes a descriptor
 * passed that way in agenticd's own thread, on the way out of recv: a TCP socket with
 * SO_LINGER set and unacknowledged data in its queue would hold agenticd's loop there for the
 * linger time. SO_PASSRIGHTS 0 on agenticd's ends says the same where the kernel has it
 * (6.16). The worker itself sends with send(2) only. The second, this one: no SO_RCVTIMEO
 * either. An armed worker holds the sandbox's listener, whose O_NONBLOCK it shares with
 * agenticd (one open file), and a worker taken over may clear it; the receive timeout agenticd
 * sets on the listener (LISTEN_TIMEOUT_US) is what bounds agenticd's accept then, and the
 * worker never needs one. (The first filter has already refused x32 and other arches.) */
#define SF_ERRNO 7 /* the index of the filter's RET ERRNO, and of its RET ALLOW after it */
static const struct sock_filter worker_filter[] = {
	/* setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO_OLD or _NEW, ...) */
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setsockopt, 0, SF_ERRNO + 1 - 2),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SOL_SOCKET, 0, SF_ERRNO + 1 - 4),
	BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
	BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 20 /* SO_RCVTIMEO_OLD */, SF_ERRNO - 6, 0),
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
	if (fd_forbid_passing() != 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &worker_fprog) != 0)
		syscall(SYS_exit, 126);
	syscall(SYS_execve, bst.self_exe, argv, envp);
	syscall(SYS_exit, 127);
	return 127;
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
	json_str_write(&w, bst.cfg->egress_ca_file);
	json_key(&w, "io_timeout_ms");
	json_int_write(&w, bst.cfg->egress_io_timeout_ms);
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
	if (bst.nl_fd >= 0) {
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
	if (bst.nl_fd >= 0 && broker_own_send(s) != 0)
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
	ASSERT((uint32_t)(s - bst.slots) < bst.nslots); /* its uid is in the egress range */
	{
		struct worker_args wa = { dp[1], cp[1], -1,
					  (long)(bst.cfg->egress_uid - (uint32_t)(s - bst.slots)) };

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

		ce.data.u64 = broker_tag(bst.tags.ctl, (uint32_t)(s - bst.slots));
		epoll_ctl(bst.epfd, EPOLL_CTL_ADD, s->ctl, &ce);
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


/* Gives the worker of s (a spare's, or one started now) its connection (data, the workload's
 * socket of a direct connection, stays the caller's): 0, or -errno (a worker that was started
 * is killed and left with its sockets, for the caller to close and the reaper to collect). */
int broker_worker_start(struct eslot *s, int data, bool rate_limited)
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
		broker_worker_kill(s);
	}
	return r;
}

/* Workers started ahead, so that a connection does not wait for a fork and exec: SPARES of
 * them, one a call, each in a free slot, once a sandbox has used egress, unless agenticd is
 * stopping. Its uid is its slot's, as any worker's. */
void broker_spare_fill(void)
{
	struct eslot *free_slot = NULL;
	uint32_t spares = 0;
	int r;

	if (bst.stopping || !bst.egress_used)
		return;
	for (uint32_t i = 0; i < bst.nslots; i++) {
		if (bst.slots[i].used && bst.slots[i].spare && ++spares >= SPARES)
			return;
		if (!bst.slots[i].used && !free_slot)
			free_slot = &bst.slots[i];
	}
	if (!free_slot)
		return;
	/* one a turn: the loop comes back at once for the next (egress_next_deadline) */
	if (spares + 1 < SPARES)
		bst.spare_wanted = true;
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
	bst.arm_wanted = true; /* a sandbox that found no spare to arm may now */
}

void broker_worker_kill(struct eslot *s)
{
	if (s->pid > 0 && s->pidfd >= 0)
		syscall(SYS_pidfd_send_signal, s->pidfd, SIGKILL, NULL, 0);
}
