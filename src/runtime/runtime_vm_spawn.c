/* runtime_vm_spawn.c: QEMU and the image builder as children: clone3 with no exit signal (a
 * pidfd says when they end), their descriptors, uid and namespaces, QEMU confined to a root of
 * its own; and their reaping. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime/runtime_vm_priv.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef __WALL
#define __WALL 0x40000000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* ---- children ---- */

/* In QEMU's child, as root, before its uid: a mount namespace whose root is an empty tmpfs
 * (over the VM's directory, in this namespace alone) with the host's /usr read-only, its
 * /bin /sbin /lib /lib64 as they are (links into usr, or read-only binds), /etc/ld.so.cache,
 * /proc, and /dev/null, zero, random, urandom (and kvm): a guest that escaped into QEMU sees
 * no other file of the host's. 0, or -1 (the child then exits 124). */
static int confine(const char *root)
{
	static const char *const tops[] = { "bin", "sbin", "lib", "lib64" };
	static const char *const devs[] = { "null", "zero", "random", "urandom", "kvm" };
	char p[LIMIT_PATH_BYTES + 32], q[LIMIT_PATH_BYTES + 32], link[256];
	const unsigned long ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
	struct stat st;
	ssize_t n;
	int fd;

	if (unshare(CLONE_NEWNS) != 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k") != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/usr", root);
	if (mkdir(p, 0755) != 0 || mount("/usr", p, NULL, MS_BIND | MS_REC, NULL) != 0 ||
	    mount(NULL, p, NULL, ro, NULL) != 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(tops); i++) {
		snprintf(q, sizeof(q), "/%s", tops[i]);
		snprintf(p, sizeof(p), "%s/%s", root, tops[i]);
		if ((n = readlink(q, link, sizeof(link) - 1)) > 0) {
			link[n] = '\0';
			if (symlink(link, p) != 0)
				return -1;
		} else if (stat(q, &st) == 0 && S_ISDIR(st.st_mode)) {
			if (mkdir(p, 0755) != 0 || mount(q, p, NULL, MS_BIND | MS_REC, NULL) != 0 ||
			    mount(NULL, p, NULL, ro, NULL) != 0)
				return -1;
		}
	}
	snprintf(p, sizeof(p), "%s/etc", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/etc/ld.so.cache", root);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0) {
		close(fd);
		if (mount("/etc/ld.so.cache", p, NULL, MS_BIND, NULL) == 0)
			mount(NULL, p, NULL, ro, NULL);
	}
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mkdir(p, 0555) != 0 || mount("/proc", p, NULL, MS_BIND | MS_REC, NULL) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/dev", root);
	if (mkdir(p, 0755) != 0)
		return -1;
	for (size_t i = 0; i < ARRAY_LEN(devs); i++) {
		snprintf(q, sizeof(q), "/dev/%s", devs[i]);
		snprintf(p, sizeof(p), "%s/dev/%s", root, devs[i]);
		if (stat(q, &st) != 0)
			continue;
		if ((fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600)) < 0)
			return -1;
		close(fd);
		if (mount(q, p, NULL, MS_BIND, NULL) != 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/.old", root);
	if (mkdir(p, 0700) != 0 || syscall(SYS_pivot_root, root, p) != 0 || chdir("/") != 0 ||
	    umount2("/.old", MNT_DETACH) != 0 || rmdir("/.old") != 0)
		return -1;
	/* the new root itself: nothing more is made in it */
	return mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
}

struct clone_args_v0 {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* A child with no exit signal (SIGCHLD reaping with waitpid(-1) does not take it; its pidfd
 * and waitid(P_PIDFD, __WALL) do) running path argv as uid:gid (0: as root) with fds[i] as
 * descriptor 3 + i, out as stdout and stderr, /dev/null as stdin. One that runs as a uid of
 * its own (QEMU) gets network and IPC namespaces of its own too. pid, or -errno. */
pid_t vm_spawn(const char *path, char *const argv[], const int *fds, int nfds, int out,
		   uid_t uid, gid_t gid, gid_t extra, const char *root, int *pidfd)
{
	static char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	struct clone_args_v0 a = { .flags = CLONE_PIDFD, .pidfd = (uint64_t)(uintptr_t)pidfd };
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	pid_t pid;

	if (null < 0)
		return -errno;
	pid = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
	if (pid < 0) {
		int e = errno;

		close(null);
		return -e;
	}
	if (pid == 0) {
		int hi[16];

		setsid();
		for (int i = 0; i < nfds && i < 16; i++)
			if ((hi[i] = fcntl(fds[i], F_DUPFD, 64)) < 0)
				_exit(126);
		dup2(null, 0);
		dup2(out >= 0 ? out : null, 1);
		dup2(out >= 0 ? out : null, 2);
		for (int i = 0; i < nfds && i < 16; i++)
			if (dup2(hi[i], 3 + i) < 0)
				_exit(126);
		syscall(SYS_close_range, 3u + (unsigned)nfds, ~0u, 0u);
		/* QEMU needs no network and no IPC of the host's (its sockets are descriptors
		 * it was handed): a guest that escaped into it finds a namespace with a down lo
		 * alone, not the host's loopback listeners or the outside */
		if (uid && unshare(CLONE_NEWNET | CLONE_NEWIPC) != 0)
			_exit(125);
		if (root && confine(root) != 0)
			_exit(124);
		if (uid || gid) {
			if (setgroups(extra ? 1 : 0, &extra) != 0 || setresgid(gid, gid, gid) != 0 ||
			    setresuid(uid, uid, uid) != 0)
				_exit(126);
		}
		execve(path, argv, envp);
		_exit(127);
	}
	close(null);
	fcntl(*pidfd, F_SETFD, FD_CLOEXEC);
	return pid;
}

/* The exit status of the child behind pidfd, once it has exited (-1: not yet). */
int64_t vm_reap(int pidfd)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (syscall(SYS_waitid, P_PIDFD, pidfd, &si, WEXITED | WNOHANG | __WALL, NULL) != 0 ||
	    si.si_pid == 0)
		return -1;
	return si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
}
