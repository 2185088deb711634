/* spawn.c: a command's supervisor and the command itself, from fork to exec: raw system
 * calls only (async-signal-safe), no allocation, no stdio, no logging.
 *
 * The supervisor keeps the init's control identity; only the command takes the workload's.
 * A supervisor running as the workload uid, as it once did, was the workload's to signal: the
 * command (or any other command) could `kill -9 $PPID` or `kill -STOP $PPID`, and its tree then
 * outlived its timeout, its kill and the sandbox's shutdown, while a stopped supervisor never
 * reported the end at all. As the control uid it is out of reach: the kernel lets a process
 * signal another only when its real or effective uid is the target's real or saved uid (the
 * workload's are 10001, the supervisor's real and saved uid are the control uid, always), and
 * ptrace, /proc/<pid>/mem and prlimit need every uid of the target to be the caller's. The
 * other way, the init tracking and killing every workload
 * process that is not a live supervisor's, was weighed and left: without cgroups nothing tells
 * a dead supervisor's orphans from another command's processes or a `docker exec`'s once
 * setsid and dead parents have erased the ppid chains, and a stopped supervisor is not dead
 * (it would need a heartbeat on top). The price of this way: the supervisor holds CAP_SETUID
 * and CAP_SETGID, as the init does, while the command's tree lives. It runs none of the
 * workload's code, reads nothing the workload writes but the kernel's list of its children,
 * and holds no fd of the command's after the start. It signals the tree the way the init
 * does, with the workload uid borrowed as its effective uid for each kill(); in that moment
 * the workload may lower its priority (setpriority and sched_setscheduler compare effective
 * uids), which slows the kill but cannot stop it. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "init/init.h"
#include "init/priv.h"


size_t init_dec(uint32_t v, char *out)
{
	char tmp[10];
	size_t n = 0, i = 0;

	do
		tmp[n++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (n)
		out[i++] = tmp[--n];
	return i;
}

static void ctl_send(int fd, int tag, int a, int b)
{
	struct init_ctl r = { tag, a, b };

	if (write(fd, &r, sizeof(r)) < 0)
		return;
}

/* Sends sig to a process of the command's tree. The control uid holds no CAP_KILL: the
 * workload uid is borrowed as the effective uid for the one kill(). The way back cannot fail
 * (the real and saved uid are the control uid), and while the effective uid is the workload's
 * the real and saved uid still keep the workload's signals out. */
static void kill_as_workload(const struct init_spawn *sp, pid_t pid, int sig)
{
	if (syscall(SYS_setresuid, -1, sp->uid, -1) != 0)
		return;
	kill(pid, sig);
	syscall(SYS_setresuid, -1, sp->control_uid, -1);
}

/* SIGKILLs every child of this process (a subreaper: orphans of the tree come here). */
static void kill_children(const struct init_spawn *sp, pid_t self, pid_t pgid)
{
	char path[64] = "/proc/self/task/", buf[4096];
	size_t n = 16;
	ssize_t r;
	pid_t pid = 0;
	int fd;

	n += init_dec((uint32_t)self, path + n);
	memcpy(path + n, "/children", sizeof("/children"));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		/* no CONFIG_PROC_CHILDREN: the command's group is what we can reach */
		kill_as_workload(sp, -pgid, SIGKILL);
		return;
	}
	while ((r = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < r; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				pid = pid * 10 + (buf[i] - '0');
			} else if (pid) {
				kill_as_workload(sp, pid, SIGKILL);
				pid = 0;
			}
		}
	}
	if (pid)
		kill_as_workload(sp, pid, SIGKILL);
	close(fd);
}

/* The kernel's OOM killer takes a workload first: the command, and all it starts, runs with
 * oom_score_adj 1000 (raising one's own needs no privilege; a workload may lower it again to
 * 0, the init's, never below, and then its own size still makes it the first choice). The
 * control uid's processes are not dumpable, which leaves /proc/self root's: dumpable for the
 * write only (no other process runs as the control uid). Best effort: a /proc that refuses
 * leaves the command at 0, as the init is. */
static void oom_first(void)
{
	long fd;

	syscall(SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0, 0);
	fd = syscall(SYS_open, "/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		(void)!syscall(SYS_write, fd, "1000", 4);
		syscall(SYS_close, fd);
	}
	syscall(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0);
}

static _Noreturn void command_exec(const struct init_spawn *sp)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	sigset_t none;
	const char *p;
	char path[LIMIT_PATH_BYTES];
	int err = ENOENT;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	sigaction(SIGPIPE, &dfl, NULL);
	if (!sp->tty) {
		setpgid(0, 0);
	} else if (setsid() < 0 || ioctl(0, TIOCSCTTY, 0) != 0) {
		/* its own session (and group), the terminal its controlling one */
		ctl_send(3, INIT_CTL_FAIL, INIT_STAGE_TTY, errno);
		_exit(126);
	}
	oom_first();
	/* this child alone becomes the workload: its parent, the supervisor, stays out of reach */
	if (priv_drop_to_workload(sp->uid, sp->gid) != 0) {
		ctl_send(3, INIT_CTL_FAIL, INIT_STAGE_DROP, errno);
		_exit(126);
	}
	if (chdir(sp->cwd) != 0) {
		ctl_send(3, INIT_CTL_FAIL, INIT_STAGE_CHDIR, errno);
		_exit(126);
	}
	if (strchr(sp->argv[0], '/')) {
		execve(sp->argv[0], sp->argv, sp->envp);
		err = errno;
	} else {
		for (p = sp->path; ; ) {
			const char *end = strchr(p, ':');
			size_t dl = end ? (size_t)(end - p) : strlen(p), cl = strlen(sp->argv[0]);

			if (dl + cl + 2 <= sizeof(path)) {
				memcpy(path, p, dl);
				path[dl] = '/';
				memcpy(path + dl + 1, sp->argv[0], cl + 1);
				execve(dl ? path : sp->argv[0], sp->argv, sp->envp);
				/* keep looking past missing entries; remember a denial */
				if (errno == EACCES)
					err = EACCES;
				else if (errno != ENOENT && errno != ENOTDIR)
					err = errno;
			}
			if (!end)
				break;
			p = end + 1;
		}
	}
	ctl_send(3, INIT_CTL_FAIL, INIT_STAGE_EXEC, err);
	_exit(err == ENOENT ? 127 : 126);
}

static int command_main(void *sp)
{
	command_exec(sp);
}

/* Moves fd to a number >= 10, so the moves to 0..3 cannot clobber one another. */
static int lift(int fd)
{
	return fcntl(fd, F_DUPFD_CLOEXEC, 10);
}

_Noreturn void init_spawn_supervise(const struct init_spawn *sp)
{
	struct timespec poll_ts = { 0, LIMIT_INIT_KILL_POLL_NS };
	int hi[INIT_FD_COUNT], main_status = 0, main_done = 0, killing = 0;
	pid_t self = getpid(), pid;
	sigset_t wait_set;
	_Alignas(16) char stack[LIMIT_INIT_COMMAND_STACK_BYTES];

	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0) {
		ctl_send(sp->fd[INIT_FD_CTL], INIT_CTL_FAIL, INIT_STAGE_SUBREAPER, errno);
		_exit(126);
	}
	for (int i = 0; i < INIT_FD_COUNT; i++) {
		hi[i] = lift(sp->fd[i]);
		if (hi[i] < 0) {
			ctl_send(sp->fd[INIT_FD_CTL], INIT_CTL_FAIL, INIT_STAGE_FDS, errno);
			_exit(126);
		}
	}
	for (int i = 0; i < INIT_FD_COUNT; i++) {
		if (dup2(hi[i], i) != i) {
			ctl_send(hi[INIT_FD_CTL], INIT_CTL_FAIL, INIT_STAGE_FDS, errno);
			_exit(126);
		}
	}
	/* nothing of the init's (its agent socket, its other commands' pipes) stays open here */
	if (syscall(SYS_close_range, 4u, ~0u, 0u) != 0)
		for (int fd = 4; fd < 4096; fd++)
			close(fd);
	fcntl(3, F_SETFD, FD_CLOEXEC);
	/* The command starts the way posix_spawn starts one: a child sharing this process's
	 * memory (CLONE_VM) on a stack of its own, while this process waits (CLONE_VFORK) until
	 * it has called execve or _exit. No page table is copied and none torn down at the exec,
	 * which a fork() here cost on every command. It is sound because this process waits and
	 * the child only makes raw system calls, writing nothing but its own stack and errno. The
	 * child drops to the workload identity itself (credentials belong to a process, not to
	 * the memory it shares); from then until its execve swaps in the command's own memory no
	 * workload process can ptrace it or open its /proc/<pid>/mem and so reach this one's:
	 * the drop leaves it undumpable (priv_drop_to_workload). When this returns the command
	 * has exec'd (or failed and said so on the ctl pipe), so the pid below names a process
	 * group that already exists. The price: while the child's execve itself blocks (a binary on a hung
	 * network mount), this process cannot take a SIGTERM, so a timeout acts once the exec
	 * returns; likewise while a workload keeps the child stopped between its drop to the
	 * workload uid and its execve (another command looping on kill -STOP -1): nothing of the
	 * command has run then, but its result waits until the child is continued. */
	pid = clone(command_main, stack + sizeof(stack), CLONE_VM | CLONE_VFORK | SIGCHLD,
		    (void *)sp);
	if (pid < 0) {
		ctl_send(3, INIT_CTL_FAIL, INIT_STAGE_FORK, errno);
		_exit(126);
	}
	ctl_send(3, INIT_CTL_PID, pid, 0);
	for (int i = 0; i < INIT_FD_COUNT; i++)
		close(i);
	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGCHLD);
	sigaddset(&wait_set, SIGTERM);
	for (;;) {
		siginfo_t si;
		int st;
		pid_t w;

		/* SIGCHLD and SIGTERM stay blocked (inherited from the init): taken here, in turn */
		if (sigtimedwait(&wait_set, &si, killing || main_done ? &poll_ts : NULL) == SIGTERM)
			killing = 1;
		while ((w = wait4(-1, &st, WNOHANG, NULL)) > 0) {
			if (w == pid) {
				main_status = st;
				main_done = 1;
			}
		}
		if (w < 0 && errno == ECHILD && main_done)
			break;
		/* the command is over when its main process is: what it left behind goes too */
		if (killing || main_done)
			kill_children(sp, self, pid);
	}
	_exit(WIFEXITED(main_status) ? WEXITSTATUS(main_status)
				     : 128 + WTERMSIG(main_status));
}
