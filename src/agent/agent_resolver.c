/* agent_resolver.c: the agent socket's resolver (docs/AGENTICD.md: the agent socket): which
 * peer is which sandbox's init. The Connect stream it admits is agent_connect.c's.
 * Identity is the kernel's word only, settled when the connection is accepted: SO_PEERCRED's
 * uid must be a sandbox's control uid and the peer must be that sandbox's init itself (the
 * process that called connect(), as a pidfd, is the container's State.Pid, pinned as a pidfd);
 * metadata must then name that sandbox. Any other peer is a guest of the gRPC server: it gets
 * Health/Check and is refused anything else. */
#include <errno.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "agent/agent_slot.h"
#include "lifecycle/lifecycle.h"

/* Linux 6.5: a pidfd of the process that called connect(), taken then by the kernel. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

/* ---- admission: is the peer the sandbox's init itself? ---- */

/* A pidfd of the process that called connect() on fd. Without SO_PEERPIDFD (before Linux
 * 6.5) the pid SO_PEERCRED reported is opened instead, which a pid reused between that
 * connect() and now would pass: the kernel's own pidfd leaves no such gap. */
static int peer_pidfd(int fd, pid_t pid)
{
	int pfd = -1;
	socklen_t len = sizeof(pfd);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pfd, &len) == 0 && pfd >= 0)
		return pfd;
	if (errno != ENOPROTOOPT)
		return -1;
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The peer behind pfd is the sandbox's init: both pidfds name the same live process (a pidfd
 * of a process that exited shows no pid, whatever took its number since). */
static bool peer_is_init(const struct sandbox *sb, int pfd)
{
	pid_t a, b;

	if (sb->init_pidfd < 0 || sb->pid <= 0)
		return false;
	a = sandbox_pidfd_pid(pfd);
	b = sandbox_pidfd_pid(sb->init_pidfd);
	return a > 0 && a == b && a == sb->pid;
}


int agent_admit(void *ctx, int fd, struct grpc_peer *p)
{
	struct agent_sb *a;
	struct sandbox *sb;
	int pfd;

	(void)ctx;
	if (p->uid == agent_cfg->workload_uid)
		return -1;
	sb = sandbox_by_uid(p->uid);
	/* a VM's init is reached through its own socket alone (agent_vm_channel): a host
	 * process with its control uid is nobody */
	if (!sb || sb->state == SB_CONFLICT || lifecycle_going(sb) || sb->vm)
		return -1;
	pfd = peer_pidfd(fd, p->pid);
	if (pfd < 0)
		return -1;
	a = agent_slot(sb);
	if (sb->init_pidfd >= 0 && sb->pid > 0 && sandbox_pidfd_pid(sb->init_pidfd) > 0) {
		bool init = peer_is_init(sb, pfd);

		close(pfd);
		if (!init)
			return -1;
		agent_peer_forget(a);
		a->conn_verified = true;
	} else {
		/* The container's pid is not known yet, or its init is gone (a restart whose
		 * inspect is on its way): the connection waits in the sandbox's slot, its peer
		 * pinned, for agent_pid_known. A newer one takes the slot: the init redials when
		 * it loses it. */
		agent_peer_forget(a);
		a->peer_pidfd = pfd;
		a->conn_verified = false;
	}
	p->tag = sb->gen;
	return (int)sandbox_index(sb);
}

int agent_vm_channel(struct sandbox *sb, int fd)
{
	struct grpc_peer p = { .pid = 0, .uid = sb->uid, .gid = sb->uid, .tag = sb->gen };
	struct agent_sb *a = agent_slot(sb);
	int r;

	if (!agent_server || !sb->vm) {
		close(fd);
		return ERR_STATE;
	}
	agent_peer_forget(a);
	/* the socket is the VM's own, in agenticd's 0700 directory: it is the init's */
	a->conn_verified = true;
	r = grpc_server_add_reserved(agent_server, fd, agent_methods, agent_nmethods, sandbox_index(sb),
				     &p);
	if (r == 0)
		agent_pid_known(sb);
	return r;
}


void agent_pid_known(struct sandbox *sb)
{
	struct agent_sb *a = agent_slot(sb);
	struct grpc_call *call;
	struct pending *pend;

	if (a->peer_pidfd >= 0) {
		bool init = peer_is_init(sb, a->peer_pidfd);

		agent_peer_forget(a);
		if (!init) {
			struct grpc_peer p = a->call ? *grpc_call_peer(a->call)
						     : (struct grpc_peer){ .uid = sb->uid };

			agent_refusal_note(RF_NOT_INIT, &p, "the peer is not the sandbox's init");
			agent_forget(sb);
			return;
		}
		a->conn_verified = true;
	}
	call = a->call;
	if (!call || a->authed || !a->conn_verified)
		return;
	pend = grpc_call_app(call);
	agent_authed(sb, pend->reg, pend->ready);
}
