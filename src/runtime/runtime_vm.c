/* runtime_vm.c: VM sandboxes under QEMU, in front of the Docker runtime (runtime_vm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "workspace/host.h"
#include "runtime/runtime_docker.h"
#include "runtime/runtime_vm.h"
#include "sandbox/sandbox.h"
#include "workspace/share.h"

#ifndef CLONE_PIDFD
#define CLONE_PIDFD 0x00001000
#endif
#ifndef __WALL
#define __WALL 0x40000000
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

#define VM_PREFIX "vm-"
#define VM_IMAGE_TIMEOUT_MS 300000   /* an image export and its initramfs */
#define VM_DIAL_MS 1000              /* the control socket is dialled again at most this often */
#define VM_KILL_AFTER_MS 3000        /* SIGTERM to QEMU, then this long to SIGKILL */
#define VM_QEMU "/usr/bin/qemu-system-x86_64"
/* the console's last bytes: a panic's register dump and trace (some 3 KiB) must not push the
 * init's own last lines out */
#define VM_RING_BYTES 16384

/* the descriptors a slot has on the loop: id = slot * 4 + kind */
enum { K_PIDFD = 0, K_IMAGE, K_OUT, K_CON };

enum vm_wait {
	W_NONE = 0,
	W_ANSWER,      /* res is filled: answered on the next tick */
	W_IMAGE,       /* CT_CREATE: the image child runs */
	W_STOP,        /* CT_STOP: the init was asked, then QEMU */
	W_EXIT,        /* CT_REMOVE: QEMU killed, its exit awaited */
};

struct vm_slot {
	struct runtime_vm *v;
	uint32_t index;
	struct rt_call *call;
	enum vm_wait wait;
	int64_t deadline;             /* W_IMAGE, W_STOP, W_EXIT */
	int stop_phase;               /* W_STOP: 0 init asked, 1 SIGTERM sent, 2 SIGKILL sent */
	/* the image child */
	pid_t img_pid;
	int img_pidfd;
	/* QEMU */
	bool live;                    /* a VM of this slot exists (running or not) */
	char id[RT_ID_BYTES];
	char instance[SB_ID_BYTES];
	uint32_t control_uid;
	pid_t pid;
	int pidfd;
	uint64_t start;               /* its start time (/proc/PID/stat, clock ticks) */
	bool exited;
	bool die_owed;
	int64_t exit_code;
	/* what the sandbox's create asked, for the start */
	uint64_t memory;
	uint32_t cpus;
	bool writable_root;
	/* console and QEMU's own output */
	int out_fd;                   /* the image child's stderr, then QEMU's */
	int con_fd;
	int64_t con_at, dial_at;
	bool was_busy;                /* the control connection was up at the last look */
	char ring[VM_RING_BYTES];
	size_t ring_len;
};

static void probe_tick(struct runtime_vm *v, int64_t now);

static int64_t now_ms(void)
{
	return clock_mono_ms();
}

static struct vm_slot *slot_of(struct runtime_vm *v, const struct sandbox *sb)
{
	uint32_t i = sandbox_index(sb);

	return i < v->c.slots ? &v->slot[i] : NULL;
}

static bool is_vm_id(const char *id)
{
	return id && strncmp(id, VM_PREFIX, strlen(VM_PREFIX)) == 0;
}

static bool call_is_vm(const struct rt_call *c)
{
	switch (c->op) {
	case RT_NET_CREATE:
	case RT_NET_SCAN:
	case RT_NET_REMOVE:
		return false;
	default:
		return (c->sb && c->sb->vm) || is_vm_id(c->id);
	}
}

/* ---- paths and the record ---- */

static int vm_dir(const struct runtime_vm *v, const char *instance, char *out, size_t size)
{
	if ((size_t)snprintf(out, size, "%s/vm/%s", v->c.cfg->state_dir, instance) >= size)
		return -ENAMETOOLONG;
	return 0;
}

static int vm_path(const struct runtime_vm *v, const char *instance, const char *file, char *out,
		   size_t size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = vm_dir(v, instance, dir, sizeof(dir));

	if (r == 0 && (size_t)snprintf(out, size, "%s/%s", dir, file) >= size)
		r = -ENAMETOOLONG;
	return r;
}

/* A small file's first cap - 1 bytes into buf, NUL-terminated (a longer one, /proc/cpuinfo,
 * is cut there); its length, or -1. */
static ssize_t read_small(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), r;
	size_t n = 0;

	buf[0] = '\0';
	if (fd < 0)
		return -1;
	r = fd_read_all(fd, buf, cap - 1, &n);
	close(fd);
	buf[n] = '\0';
	return r < 0 ? -1 : (ssize_t)n;
}

/* Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. */
static uint64_t proc_start(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long long v = 0;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return 0;
	/* after ") " comes field 3 */
	for (field = 3, p += 2; *p && field < 22; p++)
		if (*p == ' ')
			field++;
	if (sscanf(p, "%llu", &v) != 1)
		return 0;
	return v;
}

static int write_all_fd(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -EIO;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int record_write(const struct runtime_vm *v, const struct vm_slot *s)
{
	char path[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES + 8], text[256];
	int fd, n, r = 0;

	if ((r = vm_path(v, s->instance, "vm.rec", path, sizeof(path))) != 0)
		return r;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	n = snprintf(text, sizeof(text), "pid %d\nstart %llu\ncontrol_uid %u\n", (int)s->pid,
		     (unsigned long long)s->start, s->control_uid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (write(fd, text, (size_t)n) != n || fsync(fd) != 0)
		r = -EIO;
	close(fd);
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	return r;
}

static int record_read(const struct runtime_vm *v, const char *instance, pid_t *pid,
		       uint64_t *start, uint32_t *uid)
{
	char path[LIMIT_PATH_BYTES], text[256];
	unsigned long long st;
	unsigned int u;
	int p;

	if (vm_path(v, instance, "vm.rec", path, sizeof(path)) != 0)
		return -ENAMETOOLONG;
	if (read_small(path, text, sizeof(text)) <= 0)
		return errno == ENOENT ? -ENOENT : -EIO;
	/* pid 0: written before QEMU's start, which did not get as far as its own record */
	if (sscanf(text, "pid %d\nstart %llu\ncontrol_uid %u", &p, &st, &u) != 3 || p < 0)
		return -EINVAL;
	*pid = p;
	*start = st;
	*uid = u;
	return 0;
}

/* A pidfd of pid when it is still the process that started at start, else -1. */
static int pid_check(pid_t pid, uint64_t start)
{
	int fd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (fd < 0)
		return -1;
	if (proc_start(pid) != start || start == 0) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* What a VM's directory may hold: removed by name (no directory read: agenticd allocates
 * nothing once it serves). */
static const char *const vm_files[] = { "rootfs.cpio", "vm.rec", "vm.rec.tmp", "control.sock",
					"console.sock" };

/* Removes the VM's directory and what is in it. */
static void dir_remove(const struct runtime_vm *v, const char *instance)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 32];

	if (vm_dir(v, instance, dir, sizeof(dir)) != 0)
		return;
	for (size_t i = 0; i < ARRAY_LEN(vm_files); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, vm_files[i]);
		unlink(p);
	}
	if (rmdir(dir) != 0 && errno != ENOENT)
		log_warn("vm directory not removed", "dir=%s errno=%d", log_q(dir), errno);
}

/* ---- QEMU's uid: never one anyone else holds or may take ---- */

/* Whether id lies in a range of /etc/subuid or /etc/subgid: a local user who holds that
 * range maps it into a user namespace of theirs (newuidmap), and a process of QEMU's uid owns
 * the VM (it may ptrace QEMU and read the guest's memory). */
static bool range_subordinate(uint64_t lo, uint64_t hi)
{
	static char text[65536];
	static const char *const files[] = { "/etc/subuid", "/etc/subgid" };

	for (size_t f = 0; f < ARRAY_LEN(files); f++) {
		if (read_small(files[f], text, sizeof(text)) <= 0)
			continue;
		for (char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
			unsigned long long start, count;
			char *c1 = strchr(line, ':'), *nl = strchr(line, '\n');

			if (!c1 || (nl && c1 > nl) || sscanf(c1 + 1, "%llu:%llu", &start, &count) != 2)
				continue;
			if (count && start <= hi && start + count - 1 >= lo)
				return true;
		}
	}
	return false;
}

static bool id_subordinate(uint32_t id)
{
	return range_subordinate(id, id);
}

/* The first process but except whose real, effective, saved or filesystem uid or gid is id
 * (read with getdents64 into static memory: nothing is allocated), else 0. */
static pid_t id_holder(uint32_t id, pid_t except)
{
	static char dents[16384], st[2048];
	char path[64];
	int dfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	long n;

	if (dfd < 0)
		return 0;
	while ((n = syscall(SYS_getdents64, dfd, dents, sizeof(dents))) > 0) {
		for (long off = 0; off < n;) {
			/* struct linux_dirent64: ino 8, off 8, reclen 2, type 1, name */
			unsigned short reclen;
			const char *name = dents + off + 19;
			unsigned u[4], g[4];
			char *p;

			memcpy(&reclen, dents + off + 16, sizeof(reclen));
			off += reclen;
			if (name[0] < '1' || name[0] > '9' || strtol(name, NULL, 10) == except)
				continue;
			snprintf(path, sizeof(path), "/proc/%s/status", name);
			if (read_small(path, st, sizeof(st)) <= 0)
				continue;
			if ((p = strstr(st, "\nUid:")) && sscanf(p + 5, "%u %u %u %u", &u[0], &u[1], &u[2],
								    &u[3]) == 4 &&
			    (p = strstr(st, "\nGid:")) && sscanf(p + 5, "%u %u %u %u", &g[0], &g[1], &g[2],
								    &g[3]) == 4)
				for (int i = 0; i < 4; i++)
					if (u[i] == id || g[i] == id) {
						close(dfd);
						return (pid_t)strtol(name, NULL, 10);
					}
		}
	}
	close(dfd);
	return 0;
}

/* Kills every process holding id: what is left of a VM whose record did not say its pid (an
 * agenticd killed between QEMU's start and its record). Its uid is that VM's alone. */
static void id_kill_all(uint32_t id)
{
	for (int round = 0; round < 50; round++) {
		pid_t pid = id_holder(id, 0);
		int fd;

		if (!pid)
			return;
		fd = (int)syscall(SYS_pidfd_open, pid, 0);
		if (fd >= 0) {
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			close(fd);
		}
		usleep(20000);
	}
}

/* ---- the loop's descriptors ---- */

static void watch(struct vm_slot *s, int fd, int kind)
{
	struct epoll_event ev = { .events = EPOLLIN,
				  .data.u64 = ((uint64_t)s->v->c.tag << 32) |
					      (s->index * 4u + (uint32_t)kind) };

	if (s->v->c.epfd >= 0)
		epoll_ctl(s->v->c.epfd, EPOLL_CTL_ADD, fd, &ev);
}

static void close_fd(struct vm_slot *s, int *fd)
{
	if (*fd < 0)
		return;
	if (s->v->c.epfd >= 0)
		epoll_ctl(s->v->c.epfd, EPOLL_CTL_DEL, *fd, NULL);
	close(*fd);
	*fd = -1;
}

/* The console and QEMU's output into the ring: the last lines, never a file. */
static void ring_add(struct vm_slot *s, const char *data, size_t len)
{
	size_t cap = sizeof(s->ring);

	if (len >= cap) {
		data += len - cap;
		len = cap;
	}
	if (s->ring_len + len > cap) {
		size_t drop = s->ring_len + len - cap;

		memmove(s->ring, s->ring + drop, s->ring_len - drop);
		s->ring_len -= drop;
	}
	memcpy(s->ring + s->ring_len, data, len);
	s->ring_len += len;
}

static void drain_fd(struct vm_slot *s, int *fd)
{
	char buf[4096];

	for (int i = 0; i < 64 && *fd >= 0; i++) {
		ssize_t n = read(*fd, buf, sizeof(buf));

		if (n > 0) {
			ring_add(s, buf, (size_t)n);
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		close_fd(s, fd);
		if (fd == &s->con_fd)
			s->con_at = now_ms() + VM_DIAL_MS;
	}
}

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
static pid_t spawn(const char *path, char *const argv[], const int *fds, int nfds, int out,
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
static int64_t reap(int pidfd)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (syscall(SYS_waitid, P_PIDFD, pidfd, &si, WEXITED | WNOHANG | __WALL, NULL) != 0 ||
	    si.si_pid == 0)
		return -1;
	return si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
}

/* ---- answers ---- */

static void answer(struct vm_slot *s, enum rt_outcome o, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void answer(struct vm_slot *s, enum rt_outcome o, const char *fmt, ...)
{
	struct rt_call *c = s->call;
	va_list ap;

	c->res.outcome = o;
	if (fmt && o != RT_OK) {
		va_start(ap, fmt);
		vsnprintf(c->res.text, sizeof(c->res.text), fmt, ap);
		va_end(ap);
	}
	s->wait = W_ANSWER;
	s->deadline = 0;
}

static void forget_vm(struct vm_slot *s)
{
	close_fd(s, &s->pidfd);
	close_fd(s, &s->con_fd);
	close_fd(s, &s->out_fd);
	s->live = s->exited = s->die_owed = false;
	s->pid = 0;
	s->id[0] = '\0';
}

/* ---- CT_CREATE: the initramfs of the image ---- */

static void image_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	const struct sandbox *sb = c->sb;
	const struct create_req *req = sb->req;
	char dir[LIMIT_PATH_BYTES], out[LIMIT_PATH_BYTES + 32], cache[LIMIT_PATH_BYTES];
	char mods[LIMIT_PATH_BYTES], sock[LIMIT_PATH_BYTES];
	const char *dh = v->c.cfg->docker_host;
	char *argv[16];
	int pipefd[2], r;
	pid_t pid;

	forget_vm(s);
	snprintf(s->id, sizeof(s->id), VM_PREFIX "%s", sb->instance_id);
	memcpy(s->instance, sb->instance_id, sizeof(s->instance));
	s->control_uid = sb->uid;
	s->ring_len = 0;
	s->memory = req && req->memory_bytes ? req->memory_bytes : v->c.cfg->default_memory_bytes;
	s->cpus = (uint32_t)(((req && req->nano_cpus ? req->nano_cpus : v->c.cfg->default_nano_cpus) +
			      999999999) / 1000000000);
	if (s->cpus < 1)
		s->cpus = 1;
	s->writable_root = sb->writable_root;
	if ((r = vm_dir(v, sb->instance_id, dir, sizeof(dir))) != 0 ||
	    (mkdir(dir, 0700) != 0 && errno != EEXIST)) {
		answer(s, RT_ENGINE, "cannot make the VM's directory under %s/vm: %s",
		       v->c.cfg->state_dir, strerror(r ? -r : errno));
		return;
	}
	snprintf(out, sizeof(out), "%s/rootfs.cpio", dir);
	unlink(out);
	snprintf(cache, sizeof(cache), "%s/vm-images", v->c.cfg->state_dir);
	snprintf(mods, sizeof(mods), "%s/modules", v->c.kernel_dir);
	snprintf(sock, sizeof(sock), "%s", strncmp(dh, "unix://", 7) == 0 ? dh + 7 : dh);
	argv[0] = "agentic"; /* the copy's name would select the init */
	argv[1] = "vm-image";
	argv[2] = "--docker";
	argv[3] = sock;
	argv[4] = "--image";
	argv[5] = (char *)sb->image;
	argv[6] = "--init";
	argv[7] = (char *)v->c.self_exe;
	argv[8] = "--modules";
	argv[9] = mods;
	argv[10] = "--cache";
	argv[11] = cache;
	argv[12] = "--out";
	argv[13] = out;
	argv[14] = NULL;
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		answer(s, RT_ENGINE, "cannot start the VM image builder: pipe: %s", strerror(errno));
		return;
	}
	pid = spawn(v->c.self_exe, argv, NULL, 0, pipefd[1], 0, 0, 0, NULL, &s->img_pidfd);
	close(pipefd[1]);
	if (pid < 0) {
		close(pipefd[0]);
		s->img_pidfd = -1;
		answer(s, RT_ENGINE, "cannot start the VM image builder: %s", strerror((int)-pid));
		return;
	}
	s->img_pid = pid;
	s->out_fd = pipefd[0];
	watch(s, s->out_fd, K_OUT);
	watch(s, s->img_pidfd, K_IMAGE);
	s->wait = W_IMAGE;
	s->deadline = now_ms() + VM_IMAGE_TIMEOUT_MS;
	s->live = true;
	log_info("vm image build started", "name=%s image=%s", log_q(sb->name), log_q(sb->image));
}

static void image_done(struct vm_slot *s, int64_t status)
{
	char msg[RT_TEXT_BYTES];
	size_t n;

	drain_fd(s, &s->out_fd);
	close_fd(s, &s->out_fd);
	close_fd(s, &s->img_pidfd);
	if (status == 0) {
		memcpy(s->call->res.id, s->id, sizeof(s->call->res.id));
		s->ring_len = 0;
		answer(s, RT_OK, NULL);
		return;
	}
	/* its one-line error: the last line it wrote, printable text only */
	n = s->ring_len < sizeof(msg) - 1 ? s->ring_len : sizeof(msg) - 1;
	memcpy(msg, s->ring + s->ring_len - n, n);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
		n--;
	msg[n] = '\0';
	{
		char *nl = strrchr(msg, '\n');

		if (nl) {
			n = strlen(nl + 1);
			memmove(msg, nl + 1, n + 1);
		}
		for (size_t i = 0; i < n; i++)
			if ((unsigned char)msg[i] < 0x20 || msg[i] == 0x7f)
				msg[i] = '?';
	}
	s->ring_len = 0;
	answer(s, strstr(msg, "is not on the engine") ? RT_IMAGE_MISSING : RT_ENGINE,
	       "the VM's root filesystem was not made (status %lld): %s", (long long)status,
	       n ? msg : "no message");
}

/* ---- CT_START: QEMU ---- */

static int listen_at(const char *path, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	unlink(path);
	*fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0)
		return -errno;
	if (bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(*fd, 4) != 0) {
		int e = errno;

		close(*fd);
		*fd = -1;
		return -e;
	}
	return 0;
}

static int dial(const struct runtime_vm *v, const struct vm_slot *s, const char *file)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char path[LIMIT_PATH_BYTES];
	int fd;

	if (vm_path(v, s->instance, file, path, sizeof(path)) != 0 ||
	    strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

static void try_dial(struct runtime_vm *v, struct vm_slot *s, int64_t now)
{
	struct sandbox *sb = sandbox_slot(s->index);
	int fd;

	if (s->con_fd < 0 && now >= s->con_at) {
		s->con_at = now + VM_DIAL_MS;
		if ((s->con_fd = dial(v, s, "console.sock")) >= 0)
			watch(s, s->con_fd, K_CON);
	}
	if (!sb || !sb->vm || sb->state == SB_FREE || sb->state == SB_REMOVING || !v->c.channel)
		return;
	if (v->c.channel_busy(v->c.ctx, sb)) {
		s->was_busy = true;
		return;
	}
	/* a connection just lost: the guest must see the hangup before the next one comes,
	 * or it goes on writing its old HTTP/2 connection into the new */
	if (s->was_busy) {
		s->was_busy = false;
		s->dial_at = now + VM_DIAL_MS;
	}
	if (now < s->dial_at)
		return;
	s->dial_at = now + VM_DIAL_MS;
	fd = dial(v, s, "control.sock");
	if (fd >= 0)
		v->c.channel(v->c.ctx, sb, fd);
}

static uint32_t vm_uid(const struct runtime_vm *v, uint32_t control_uid)
{
	return control_uid + v->c.cfg->vm_uid_offset;
}

static void start_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	const struct config *cfg = v->c.cfg;
	const struct sandbox *sb = c->sb;
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 64], ws[LIMIT_PATH_BYTES + 32];
	char mem[32], smp[16], append[1024], accel[32];
	char *argv[64];
	int fds[6] = { -1, -1, -1, -1, -1, -1 }, pipefd[2] = { -1, -1 }, r = 0, n = 0;
	uint32_t qu = vm_uid(v, sb->uid);
	pid_t pid;

	if (!s->live || s->pid > 0) {
		answer(s, s->pid > 0 ? RT_OK : RT_GONE, "the VM %s was not made", c->id);
		return;
	}
	vm_dir(v, s->instance, dir, sizeof(dir));
	host_instance_dir(cfg, s->instance, ws, sizeof(ws) - 16);
	strcat(ws, "/workspace.img");
	/* the uncompressed kernel when make vm-kernel made it (booted through its PVH entry:
	 * no emulated decompressor), else the bzImage */
	snprintf(p, sizeof(p), "%s/vmlinux", v->c.kernel_dir);
	fds[0] = open(p, O_RDONLY | O_CLOEXEC);
	if (fds[0] < 0) {
		snprintf(p, sizeof(p), "%s/vmlinuz", v->c.kernel_dir);
		fds[0] = open(p, O_RDONLY | O_CLOEXEC);
	}
	snprintf(p, sizeof(p), "%s/rootfs.cpio", dir);
	fds[1] = open(p, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	fds[4] = open(ws, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	fds[5] = open(ws, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fds[0] < 0 || fds[1] < 0 || fds[4] < 0 || fds[5] < 0) {
		r = -errno;
		answer(s, RT_ENGINE, "cannot open the VM's %s: %s", fds[0] < 0 ? "kernel" :
		       fds[1] < 0 ? "root filesystem" : "workspace image", strerror(-r));
		goto out;
	}
	snprintf(p, sizeof(p), "%s/console.sock", dir);
	if ((r = listen_at(p, &fds[2])) == 0) {
		snprintf(p, sizeof(p), "%s/control.sock", dir);
		r = listen_at(p, &fds[3]);
	}
	if (r != 0) {
		answer(s, RT_ENGINE, "cannot make the VM's sockets in %s: %s", dir, strerror(-r));
		goto out;
	}
	if (id_subordinate(qu)) {
		answer(s, RT_ENGINE, "the VM's QEMU uid %u is in a subordinate range of /etc/subuid "
		       "or /etc/subgid, which a local user may map: change vm_uid_offset", qu);
		goto out;
	}
	if ((pid = id_holder(qu, 0)) != 0) {
		answer(s, RT_ENGINE, "the VM's QEMU uid %u is held by process %d already (no process "
		       "but its QEMU may have it: see vm_uid_offset)", qu, (int)pid);
		goto out;
	}
	/* recorded before QEMU starts: an agenticd killed in between still knows its uid */
	s->pid = 0;
	s->start = 0;
	if ((r = record_write(v, s)) != 0) {
		answer(s, RT_ENGINE, "cannot write the VM's record in %s: %s", dir, strerror(-r));
		goto out;
	}
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		answer(s, RT_ENGINE, "cannot start QEMU: pipe: %s", strerror(errno));
		goto out;
	}
	snprintf(mem, sizeof(mem), "%llum", (unsigned long long)(s->memory >> 20));
	snprintf(smp, sizeof(smp), "%u", s->cpus);
	snprintf(accel, sizeof(accel), "%s", v->accel);
	/* what the init's environment would be in a container; never a secret (the request's
	 * env and credentials go over the control channel once it registers) */
	snprintf(append, sizeof(append), "console=ttyS0 quiet panic=-1 AGENT_RUNTIME=vm "
		 "AGENT_ID=%s AGENT_INSTANCE_ID=%s AGENT_CONTROL_UID=%u AGENT_CONTROL_GID=%u "
		 "AGENT_CONTROL_UID_RANGE=%u-%u AGENT_WORKLOAD_UID=%u AGENT_WORKLOAD_GID=%u "
		 "AGENT_SETUP_SENTINEL=/run/agentic/setup-complete%s%s",
		 sb->agent_id, sb->instance_id, sb->uid,
		 sb->uid + (runtime_docker_fault_init_env() ? 1u : 0u), cfg->control_uid_min,
		 cfg->control_uid_max, cfg->workload_uid, cfg->workload_gid,
		 s->writable_root ? " AGENT_VM_WRITABLE_ROOT=1" : "",
		 strcmp(accel, "tcg") == 0 ? v->tsc_arg : "");
#define A(x) argv[n++] = (char *)(x)
	A(VM_QEMU);
	A("-name"); A(sb->name);
	A("-M"); A("microvm,acpi=on");
	A("-accel"); A(accel);
	if (strcmp(accel, "kvm") == 0) {
		A("-cpu"); A("host");
	}
	A("-m"); A(mem);
	A("-smp"); A(smp);
	A("-nodefaults"); A("-no-user-config"); A("-display"); A("none"); A("-no-reboot");
	A("-nic"); A("none");
	A("-sandbox"); A(RUNTIME_VM_SANDBOX);
	A("-kernel"); A("/proc/self/fd/3");
	A("-initrd"); A("/proc/self/fd/4");
	A("-append"); A(append);
	A("-chardev"); A("socket,id=con,fd=5,server=on,wait=off");
	A("-serial"); A("chardev:con");
	A("-device"); A("virtio-serial-device");
	A("-chardev"); A("socket,id=c0,fd=6,server=on,wait=off");
	A("-device"); A("virtserialport,chardev=c0,name=agentic.control");
	A("-add-fd"); A("fd=7,set=1");
	A("-add-fd"); A("fd=8,set=1");
	A("-drive"); A("file=/dev/fdset/1,format=raw,if=none,id=ws");
	A("-device"); A("virtio-blk-device,drive=ws");
	A(NULL);
#undef A
	pid = spawn(VM_QEMU, argv, fds, 6, pipefd[1], qu, qu,
		    strcmp(accel, "kvm") == 0 ? v->kvm_gid : 0, dir, &s->pidfd);
	if (pid < 0) {
		s->pidfd = -1;
		answer(s, RT_ENGINE, "cannot start QEMU (%s): %s", VM_QEMU, strerror((int)-pid));
		goto out;
	}
	s->pid = pid;
	s->start = proc_start(pid);
	s->exited = false;
	s->out_fd = pipefd[0];
	pipefd[0] = -1;
	watch(s, s->out_fd, K_OUT);
	watch(s, s->pidfd, K_PIDFD);
	if ((r = record_write(v, s)) != 0)
		log_warn("vm record not written; a restarted agenticd will not adopt the VM",
			 "name=%s errno=%d", log_q(sb->name), -r);
	log_info("vm started", "name=%s pid=%d uid=%u accel=%s memory_bytes=%llu cpus=%u",
		 log_q(sb->name), (int)pid, qu, log_q(accel), (unsigned long long)s->memory, s->cpus);
	s->con_at = s->dial_at = 0;
	try_dial(v, s, now_ms());
	answer(s, RT_OK, NULL);
out:
	for (int i = 0; i < 6; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
}

/* ---- the other calls ---- */

static void qemu_exited(struct vm_slot *s, int64_t status)
{
	if (s->exited)
		return;
	s->exited = true;
	s->exit_code = status;
	s->die_owed = true;
	drain_fd(s, &s->con_fd);
	drain_fd(s, &s->out_fd);
	close_fd(s, &s->pidfd);
	log_info("vm exited", "id=%s status=%lld", log_q(s->id), (long long)status);
}

static void kill_qemu(struct vm_slot *s, int sig)
{
	if (s->pidfd >= 0 && !s->exited)
		syscall(SYS_pidfd_send_signal, s->pidfd, sig, NULL, 0);
}

static void inspect_answer(struct vm_slot *s, struct rt_call *c)
{
	const struct sandbox *sb = c->sb;

	memcpy(c->res.id, s->id, sizeof(c->res.id));
	snprintf(c->res.instance_id, sizeof(c->res.instance_id), "%s", s->instance);
	c->res.running = s->pid > 0 && !s->exited;
	c->res.pid = c->res.running ? s->pid : 0;
	c->res.exit_code = s->exit_code;
	/* no network at all: nothing the engine could have attached */
	c->res.net = (struct rt_netcheck){ .read = true, .ok = true, .why = "verified" };
	(void)sb;
	answer(s, RT_OK, NULL);
}

/* The init's last lines for a failed create: the console without the kernel's own lines
 * (a line "[ secs] ...") but the panic's, printable text only (the console is the guest's). */
static void logs_answer(struct vm_slot *s, struct rt_call *c)
{
	struct sandbox *sb = c->sb;
	size_t cap = sizeof(sb->init_log) - 1, n = 0, end = s->ring_len;

	drain_fd(s, &s->con_fd);
	drain_fd(s, &s->out_fd);
	end = s->ring_len;
	/* lines from the last one back, each kept whole while it fits */
	while (end > 0) {
		size_t b = end - 1, len;
		const char *line;
		bool keep;

		while (b > 0 && s->ring[b - 1] != '\n')
			b--;
		line = s->ring + b;
		len = end - b;
		keep = len > 1 && (line[0] != '[' || memmem(line, len, "Kernel panic", 12));
		if (keep && n + len > cap)
			break;
		if (keep) {
			memmove(sb->init_log + len, sb->init_log, n);
			for (size_t i = 0; i < len; i++) {
				char ch = line[i];

				sb->init_log[i] = (ch >= 0x20 && ch < 0x7f) || ch == '\n' ? ch
						  : ch == '\r' ? ' ' : '?';
			}
			n += len;
		}
		end = b;
	}
	sb->init_log[n] = '\0';
	sb->log_len = (uint32_t)n;
	answer(s, RT_OK, NULL);
}

static void stop_step(struct runtime_vm *v, struct vm_slot *s, int64_t now)
{
	if (s->exited || s->pid <= 0) {
		answer(s, RT_OK, NULL);
		return;
	}
	if (now < s->deadline)
		return;
	if (s->stop_phase == 0) {
		kill_qemu(s, SIGTERM);
		s->stop_phase = 1;
		s->deadline = now + VM_KILL_AFTER_MS;
	} else {
		kill_qemu(s, SIGKILL);
		s->stop_phase = 2;
		s->deadline = now + VM_KILL_AFTER_MS;
	}
	(void)v;
}

static void stop_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	struct sandbox *sb = c->sb;
	int grace = c->stop_grace_s > 0 ? c->stop_grace_s : 0;

	s->wait = W_STOP;
	s->stop_phase = 0;
	s->deadline = now_ms();
	if (s->exited || s->pid <= 0) {
		answer(s, RT_OK, NULL);
		return;
	}
	/* the init first: it stops its commands and powers the guest off, and QEMU ends */
	if (grace && sb && v->c.shutdown && v->c.shutdown(v->c.ctx, sb, grace))
		s->deadline = now_ms() + grace * 1000;
}

static void remove_begin(struct runtime_vm *v, struct vm_slot *s, struct rt_call *c)
{
	if (!s->live || strcmp(s->id, c->id) != 0) {
		/* not this slot's: one a crash left, or gone already */
		if (is_vm_id(c->id)) {
			pid_t pid;
			uint64_t st;
			uint32_t u;
			int fd;

			if (record_read(v, c->id + strlen(VM_PREFIX), &pid, &st, &u) == 0) {
				if (pid > 0 && (fd = pid_check(pid, st)) >= 0) {
					syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
					close(fd);
				}
				if (u >= v->c.cfg->control_uid_min && u <= v->c.cfg->control_uid_max)
					id_kill_all(vm_uid(v, u));
			}
			dir_remove(v, c->id + strlen(VM_PREFIX));
		}
		answer(s, RT_GONE, "no such VM: %s", c->id);
		return;
	}
	if (s->wait == W_IMAGE) {
		syscall(SYS_pidfd_send_signal, s->img_pidfd, SIGKILL, NULL, 0);
		close_fd(s, &s->img_pidfd);
	}
	kill_qemu(s, SIGKILL);
	s->wait = W_EXIT;
	s->deadline = now_ms() + 10000;
}

static void remove_finish(struct runtime_vm *v, struct vm_slot *s)
{
	dir_remove(v, s->instance);
	forget_vm(s);
	s->instance[0] = '\0';
	answer(s, RT_OK, NULL);
}

static int vm_call(void *self, struct rt_call *c)
{
	struct runtime_vm *v = self;
	struct vm_slot *s;

	if (!call_is_vm(c)) {
		v->c.docker->sink = v->rt.sink;
		return runtime_call(v->c.docker, c);
	}
	s = c->sb ? slot_of(v, c->sb) : NULL;
	if (!s || s->call) {
		c->res.outcome = RT_ENGINE;
		snprintf(c->res.text, sizeof(c->res.text), s ? "a VM call is in progress"
			 : "a VM call without its sandbox");
		return ERR_STATE;
	}
	memset(&c->res, 0, sizeof(c->res));
	s->call = c;
	switch (c->op) {
	case RT_CT_CREATE:
		if (!v->available)
			answer(s, RT_ENGINE, "%s", v->why);
		else
			image_begin(v, s, c);
		break;
	case RT_CT_START:
		start_begin(v, s, c);
		break;
	case RT_CT_INSPECT:
		if (!s->live || (strcmp(c->id, s->id) != 0 && strcmp(c->id, c->sb->name) != 0))
			answer(s, RT_GONE, "no such VM: %s", c->id);
		else
			inspect_answer(s, c);
		break;
	case RT_CT_LOGS:
		logs_answer(s, c);
		break;
	case RT_CT_STOP:
		stop_begin(v, s, c);
		break;
	case RT_CT_REMOVE:
		remove_begin(v, s, c);
		break;
	default:
		answer(s, RT_ENGINE, "the VM runtime has no such call (%d)", (int)c->op);
		break;
	}
	return 0;
}

static void deliver(struct runtime_vm *v, struct vm_slot *s)
{
	struct rt_call *c = s->call;

	s->call = NULL;
	s->wait = W_NONE;
	if (v->rt.sink.call_done)
		v->rt.sink.call_done(v->rt.sink.ctx, c);
}

static void vm_tick(void *self, int64_t now)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	v->c.docker->ops->tick(v->c.docker->self, now);
	if (v->probing)
		probe_tick(v, now);
	for (uint32_t i = 0; i < v->c.slots; i++) {
		struct vm_slot *s = &v->slot[i];

		if (s->pidfd >= 0 && !s->exited) {
			int64_t st = reap(s->pidfd);

			if (st >= 0)
				qemu_exited(s, st);
		}
		if (s->die_owed && v->rt.sink.event) {
			struct rt_notice n = { .ev = RT_EV_DIE, .container_id = s->id };

			s->die_owed = false;
			v->rt.sink.event(v->rt.sink.ctx, &n);
		}
		switch (s->wait) {
		case W_IMAGE:
			if (s->img_pidfd >= 0) {
				int64_t st = reap(s->img_pidfd);

				if (st >= 0)
					image_done(s, st);
				else if (now >= s->deadline) {
					syscall(SYS_pidfd_send_signal, s->img_pidfd, SIGKILL, NULL, 0);
					s->deadline = now + 1000;
					ring_add(s, "timed out", 9);
				}
			}
			break;
		case W_STOP:
			stop_step(v, s, now);
			break;
		case W_EXIT:
			if (s->exited || s->pid <= 0 || now >= s->deadline)
				remove_finish(v, s);
			break;
		default:
			break;
		}
		if (s->wait == W_ANSWER)
			deliver(v, s);
		if (s->live && s->pid > 0 && !s->exited)
			try_dial(v, s, now);
	}
}

static int64_t vm_next_deadline(void *self, int64_t now)
{
	struct runtime_vm *v = self;
	int64_t next = v->c.docker->ops->next_deadline(v->c.docker->self, now);

	if (v->probing && now + 100 < next)
		next = now + 100;

	for (uint32_t i = 0; i < v->c.slots; i++) {
		const struct vm_slot *s = &v->slot[i];

		if (s->wait == W_ANSWER || s->die_owed)
			return now;
		if ((s->wait == W_IMAGE || s->wait == W_STOP || s->wait == W_EXIT) &&
		    s->deadline < next)
			next = s->deadline;
		if (s->live && s->pid > 0 && !s->exited) {
			/* a dial already due waits for the next look a second on (the connection
			 * may well be up: try_dial looks) */
			int64_t d = s->con_fd < 0 ? s->con_at : s->dial_at;

			if (d < now)
				d = now + VM_DIAL_MS;
			if (d < next)
				next = d;
		}
	}
	return next;
}

void runtime_vm_ready(struct runtime_vm *v, uint32_t id)
{
	struct vm_slot *s;
	int64_t st;

	if (id / 4 >= v->c.slots)
		return;
	s = &v->slot[id / 4];
	switch (id % 4) {
	case K_PIDFD:
		if (s->pidfd >= 0 && (st = reap(s->pidfd)) >= 0)
			qemu_exited(s, st);
		else if (s->pidfd >= 0 && !s->exited && syscall(SYS_pidfd_send_signal, s->pidfd, 0,
								  NULL, 0) != 0)
			qemu_exited(s, -1); /* not our child (adopted): gone */
		break;
	case K_IMAGE:
		if (s->wait == W_IMAGE && s->img_pidfd >= 0 && (st = reap(s->img_pidfd)) >= 0)
			image_done(s, st);
		break;
	case K_OUT:
		drain_fd(s, &s->out_fd);
		break;
	case K_CON:
		drain_fd(s, &s->con_fd);
		break;
	}
	vm_tick(v, now_ms());
}

static void vm_ready(void *self, uint32_t id)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	v->c.docker->ops->ready(v->c.docker->self, id);
}

/* After recovery: each VM sandbox of the table takes its QEMU back, by its record. */
static void vm_start(void *self)
{
	struct runtime_vm *v = self;

	v->c.docker->sink = v->rt.sink;
	for (uint32_t i = 0; i < v->c.slots; i++) {
		struct sandbox *sb = sandbox_slot(i);
		struct vm_slot *s = &v->slot[i];
		pid_t pid;
		uint64_t st;
		uint32_t u;

		if (!sb || sb->state == SB_FREE || !sb->vm || !is_vm_id(sb->container_id) || s->live)
			continue;
		forget_vm(s);
		snprintf(s->id, sizeof(s->id), "%s", sb->container_id);
		memcpy(s->instance, sb->instance_id, sizeof(s->instance));
		s->control_uid = sb->uid;
		s->live = true;
		if (record_read(v, sb->instance_id, &pid, &st, &u) == 0 &&
		    (s->pidfd = pid_check(pid, st)) >= 0) {
			s->pid = pid;
			s->start = st;
			watch(s, s->pidfd, K_PIDFD);
			log_info("vm adopted", "name=%s pid=%d", log_q(sb->name), (int)pid);
		} else {
			s->pidfd = -1;
			s->pid = pid > 0 ? pid : 1;
			s->exited = true;
			s->die_owed = true;
			log_warn("vm not running at start", "name=%s", log_q(sb->name));
		}
	}
	v->c.docker->ops->start(v->c.docker->self);
}

static void vm_stop(void *self)
{
	struct runtime_vm *v = self;

	v->c.docker->ops->stop(v->c.docker->self);
}

/* ---- synchronous: recovery ---- */

static int vm_containers(void *self, int (*fn)(void *ctx, const char *id), void *ctx, char *err,
			 size_t err_size)
{
	struct runtime_vm *v = self;
	char dir[LIMIT_PATH_BYTES], id[RT_ID_BYTES];
	struct dirent *de;
	DIR *d;
	int r = v->c.docker->ops->containers(v->c.docker->self, fn, ctx, err, err_size);

	if (r != 0)
		return r;
	snprintf(dir, sizeof(dir), "%s/vm", v->c.cfg->state_dir);
	if (!(d = opendir(dir)))
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || strlen(de->d_name) >= SB_ID_BYTES)
			continue;
		snprintf(id, sizeof(id), VM_PREFIX "%.36s", de->d_name);
		if (fn(ctx, id) != 0)
			break;
	}
	closedir(d);
	return 0;
}

static int vm_inspect(void *self, const char *id, struct rt_container *out, char *err,
		      size_t err_size)
{
	static char inst[SB_ID_BYTES], uid_s[16], name[8] = "";
	struct runtime_vm *v = self;
	pid_t pid;
	uint64_t st;
	uint32_t u;
	int fd, r;

	if (!is_vm_id(id))
		return v->c.docker->ops->inspect(v->c.docker->self, id, out, err, err_size);
	memset(out, 0, sizeof(*out));
	snprintf(inst, sizeof(inst), "%s", id + strlen(VM_PREFIX));
	if ((r = record_read(v, inst, &pid, &st, &u)) != 0) {
		char dir[LIMIT_PATH_BYTES];
		struct stat sst;

		if (vm_dir(v, inst, dir, sizeof(dir)) != 0 || stat(dir, &sst) != 0) {
			snprintf(err, err_size, "no such VM: %s", id);
			return -ENOENT;
		}
		/* a VM whose QEMU never started (a create cut short): not running */
		u = 0;
		pid = 0;
	}
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(uid_s, sizeof(uid_s), "%u", u);
	out->name = name;
	out->instance_id = inst;
	out->control_uid = u ? uid_s : NULL;
	out->managed_network = NULL;
	out->net = (struct rt_netcheck){ .read = true, .ok = true, .why = "verified" };
	fd = pid > 0 ? pid_check(pid, st) : -1;
	out->running = fd >= 0;
	out->pid = fd >= 0 ? pid : 0;
	if (fd >= 0)
		close(fd);
	return 0;
}

static int vm_networks(void *self, int (*fn)(void *ctx, const char *id, const char *name),
		       void *ctx, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->networks(v->c.docker->self, fn, ctx, err, err_size);
}

static int vm_net_inspect(void *self, const char *id, struct rt_network *out, char *err,
			  size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->net_inspect(v->c.docker->self, id, out, err, err_size);
}

static int vm_remove_now(void *self, bool network, const char *id, char *err, size_t err_size)
{
	struct runtime_vm *v = self;
	pid_t pid;
	uint64_t st;
	uint32_t u;
	int fd;

	if (network || !is_vm_id(id))
		return v->c.docker->ops->remove_now(v->c.docker->self, network, id, err, err_size);
	if (record_read(v, id + strlen(VM_PREFIX), &pid, &st, &u) == 0) {
		if (pid > 0 && (fd = pid_check(pid, st)) >= 0) {
			syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
			/* gone before its directory is: nothing of it may run on */
			for (int i = 0; i < 100 && syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) == 0;
			     i++)
				usleep(20000);
			close(fd);
		}
		/* and whatever runs under its QEMU's uid (a start cut short before its pid was
		 * recorded) */
		if (u >= v->c.cfg->control_uid_min && u <= v->c.cfg->control_uid_max)
			id_kill_all(vm_uid(v, u));
	}
	dir_remove(v, id + strlen(VM_PREFIX));
	return 0;
}

static int vm_scan_now(void *self, int (*each_subnet)(void *ctx, const char *cidr, bool ours),
		       void *ctx, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->scan_now(v->c.docker->self, each_subnet, ctx, err, err_size);
}

static int vm_workspace_make(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->workspace_make(v->c.docker->self, sb, err, err_size);
}

static int vm_workspace_mount(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_vm *v = self;

	return v->c.docker->ops->workspace_mount(v->c.docker->self, sb, err, err_size);
}

static void vm_workspace_retire(void *self, const struct sandbox *sb, bool drop_workspace)
{
	struct runtime_vm *v = self;

	v->c.docker->ops->workspace_retire(v->c.docker->self, sb, drop_workspace);
}

static const struct runtime_ops vm_ops = {
	.call = vm_call,
	.tick = vm_tick,
	.next_deadline = vm_next_deadline,
	.ready = vm_ready,
	.start = vm_start,
	.stop = vm_stop,
	.containers = vm_containers,
	.inspect = vm_inspect,
	.networks = vm_networks,
	.net_inspect = vm_net_inspect,
	.remove_now = vm_remove_now,
	.scan_now = vm_scan_now,
	.workspace_make = vm_workspace_make,
	.workspace_mount = vm_workspace_mount,
	.workspace_retire = vm_workspace_retire,
};

/* Under TCG the guest kernel calibrates its TSC against emulated timers, which on a loaded
 * host fails now and then and leaves the boot hung before the init: the host's clock rate
 * (cpu MHz of /proc/cpuinfo, read once) is handed over as tsc_early_khz instead. */
static void tsc_read(struct runtime_vm *v)
{
	char buf[4096], *p;
	double mhz = 0;

	v->tsc_arg[0] = '\0';
	if (read_small("/proc/cpuinfo", buf, sizeof(buf)) <= 0)
		return;
	if ((p = strstr(buf, "\ncpu MHz")) && (p = strchr(p, ':')) && sscanf(p + 1, "%lf", &mhz) == 1 &&
	    mhz >= 100 && mhz < 100000)
		snprintf(v->tsc_arg, sizeof(v->tsc_arg), " tsc_early_khz=%u", (unsigned)(mhz * 1000));
}

static void accel_decide(struct runtime_vm *v);

size_t runtime_vm_storage_bytes(uint32_t slots)
{
	return (slots ? slots : 1) * sizeof(struct vm_slot);
}

int runtime_vm_init(struct runtime_vm *v, const struct runtime_vm_config *c)
{
	char p[LIMIT_PATH_BYTES + 32];
	struct stat st;

	memset(v, 0, sizeof(*v));
	v->c = *c;
	v->slot = calloc(c->slots ? c->slots : 1, sizeof(*v->slot));
	if (!v->slot)
		return -ENOMEM;
	for (uint32_t i = 0; i < c->slots; i++) {
		struct vm_slot *s = &v->slot[i];

		s->v = v;
		s->index = i;
		s->pidfd = s->img_pidfd = s->out_fd = s->con_fd = -1;
	}
	tsc_read(v);
	v->available = true;
	if (!c->kernel_dir || !c->kernel_dir[0]) {
		v->available = false;
		snprintf(v->why, sizeof(v->why), "the vm runtime has no guest kernel here "
			 "(vm_kernel_dir is empty; make vm-kernel builds one)");
	} else {
		snprintf(p, sizeof(p), "%s/vmlinuz", c->kernel_dir);
		if (stat(p, &st) != 0) {
			v->available = false;
			snprintf(v->why, sizeof(v->why), "the vm runtime has no guest kernel: %.160s "
				 "is missing (make vm-kernel)", p);
		} else if (access(VM_QEMU, X_OK) != 0) {
			v->available = false;
			snprintf(v->why, sizeof(v->why), "the vm runtime needs QEMU at %s "
				 "(apt-get install qemu-system-x86)", VM_QEMU);
		}
	}
	snprintf(p, sizeof(p), "%s/vm", c->cfg->state_dir);
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		return -errno;
	v->rt = (struct runtime){ .ops = &vm_ops, .self = v, .name = "docker" };
	accel_decide(v);
	if (v->available &&
	    range_subordinate((uint64_t)c->cfg->control_uid_min + c->cfg->vm_uid_offset,
			      (uint64_t)c->cfg->control_uid_max + c->cfg->vm_uid_offset + 1))
		log_warn("vm uid range overlaps /etc/subuid or /etc/subgid", "range=%u-%u note=%s",
			 c->cfg->control_uid_min + c->cfg->vm_uid_offset,
			 c->cfg->control_uid_max + c->cfg->vm_uid_offset + 1,
			 "\"a VM whose QEMU uid a local user may map is refused at its start: move "
			 "vm_uid_offset\"");
	return 0;
}

const char *runtime_vm_unavailable(const struct runtime_vm *v)
{
	return v->available ? NULL : v->why;
}

const char *runtime_vm_accel(const struct runtime_vm *v)
{
	return v->accel;
}

/* ---- the accelerator: vm_accel auto probes KVM once per host boot ---- */

#define PROBE_TIMEOUT_MS 10000

static void probe_cache(const struct runtime_vm *v, bool write, char *accel, size_t size)
{
	char path[LIMIT_PATH_BYTES], boot[64] = "", text[128];
	ssize_t n;
	int fd;

	read_small("/proc/sys/kernel/random/boot_id", boot, sizeof(boot));
	snprintf(path, sizeof(path), "%s/vm/accel", v->c.cfg->state_dir);
	if (write) {
		n = snprintf(text, sizeof(text), "%s %s\n", accel, boot);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd >= 0) {
			if (write_all_fd(fd, text, (size_t)n) != 0)
				unlink(path);
			close(fd);
		}
		return;
	}
	accel[0] = '\0';
	if (read_small(path, text, sizeof(text)) <= 0)
		return;
	/* "kvm BOOT" or "tcg BOOT": this boot's reading */
	if (boot[0] && (strncmp(text, "kvm ", 4) == 0 || strncmp(text, "tcg ", 4) == 0) &&
	    strcmp(text + 4, boot) == 0)
		snprintf(accel, size, "%.3s", text);
}

static void probe_done(struct runtime_vm *v, bool works, const char *why)
{
	snprintf(v->accel, sizeof(v->accel), "%s", works ? "kvm" : "tcg");
	log_info("vm accelerator", "accel=%s probe=%s", log_q(v->accel), log_q(why));
	probe_cache(v, true, v->accel, sizeof(v->accel));
	if (v->probe_pidfd >= 0) {
		syscall(SYS_pidfd_send_signal, v->probe_pidfd, SIGKILL, NULL, 0);
		reap(v->probe_pidfd);
		close(v->probe_pidfd);
	}
	if (v->probe_out >= 0)
		close(v->probe_out);
	v->probe_pidfd = v->probe_out = -1;
	v->probing = false;
}

/* Boots the guest kernel under KVM with no initramfs: it gets as far as "Kernel panic" (no
 * root) and QEMU ends (-no-reboot) in about a second where KVM works; where it hangs or QEMU
 * aborts, TCG it is. A child on its own clock: the daemon never waits for it. */
static void probe_start(struct runtime_vm *v)
{
	char kernel[LIMIT_PATH_BYTES + 16];
	char *argv[] = { VM_QEMU, "-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "128",
			 "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
			 "-nic", "none", "-sandbox", "on,obsolete=deny,elevateprivileges=deny,"
			 "spawn=deny,resourcecontrol=deny", "-serial", "stdio", "-kernel", kernel,
			 "-append", "console=ttyS0 panic=-1", NULL };
	uint32_t uid = v->c.cfg->control_uid_max + v->c.cfg->vm_uid_offset + 1;
	int pipefd[2];
	pid_t pid;

	snprintf(kernel, sizeof(kernel), "%s/vmlinux", v->c.kernel_dir);
	if (access(kernel, R_OK) != 0)
		snprintf(kernel, sizeof(kernel), "%s/vmlinuz", v->c.kernel_dir);
	if (pipe2(pipefd, O_CLOEXEC | O_NONBLOCK) != 0) {
		probe_done(v, false, "cannot make a pipe for the probe");
		return;
	}
	v->probe_len = 0;
	pid = spawn(VM_QEMU, argv, NULL, 0, pipefd[1], uid, uid, v->kvm_gid, NULL, &v->probe_pidfd);
	close(pipefd[1]);
	v->probe_out = pipefd[0];
	if (pid < 0) {
		v->probe_pidfd = -1;
		probe_done(v, false, "QEMU could not be started for the probe");
		return;
	}
	v->probing = true;
	v->probe_deadline = now_ms() + PROBE_TIMEOUT_MS;
	log_info("vm accelerator probe started", "accel=kvm timeout_ms=%d", PROBE_TIMEOUT_MS);
}

static void probe_tick(struct runtime_vm *v, int64_t now)
{
	char buf[4096];
	ssize_t n;

	while (v->probe_out >= 0 && (n = read(v->probe_out, buf, sizeof(buf))) > 0) {
		/* the last bytes are enough to find the words in */
		if (memmem(buf, (size_t)n, "Kernel panic", 12)) {
			probe_done(v, true, "the guest kernel ran under kvm");
			return;
		}
		v->probe_len += (size_t)n;
	}
	if (reap(v->probe_pidfd) >= 0)
		probe_done(v, false, "QEMU ended under kvm before the guest kernel ran");
	else if (now >= v->probe_deadline)
		probe_done(v, false, "the guest kernel did not run under kvm within the probe's time");
}

static void accel_decide(struct runtime_vm *v)
{
	char cached[8];
	struct stat st;

	v->probe_pidfd = v->probe_out = -1;
	v->kvm_gid = 0;
	/* QEMU runs unprivileged: it opens /dev/kvm through a group that may */
	if (stat("/dev/kvm", &st) == 0 && S_ISCHR(st.st_mode) && (st.st_mode & 060) == 060 &&
	    st.st_gid != 0)
		v->kvm_gid = st.st_gid;
	if (strcmp(v->c.accel, "auto") != 0) {
		snprintf(v->accel, sizeof(v->accel), "%s", v->c.accel);
		return;
	}
	snprintf(v->accel, sizeof(v->accel), "tcg");
	if (!v->available)
		return;
	if (stat("/dev/kvm", &st) != 0) {
		log_info("vm accelerator", "accel=tcg probe=%s", log_q("no /dev/kvm"));
		return;
	}
	if (!v->kvm_gid) {
		log_info("vm accelerator", "accel=tcg probe=%s",
			 log_q("/dev/kvm is root's alone (QEMU runs unprivileged: give it a group, "
			       "mode 0660)"));
		return;
	}
	probe_cache(v, false, cached, sizeof(cached));
	if (cached[0]) {
		snprintf(v->accel, sizeof(v->accel), "%s", cached);
		log_info("vm accelerator", "accel=%s probe=%s", log_q(v->accel),
			 log_q("this boot's probe, kept"));
		return;
	}
	probe_start(v);
}

int runtime_vm_qemu_read(struct runtime_vm *v, const struct sandbox *sb, struct runtime_vm_qemu *q)
{
	const struct vm_slot *s = slot_of(v, sb);

	memset(q, 0, sizeof(*q));
	if (!s || !s->live || !sb->vm)
		return -ENOENT;
	q->uid = vm_uid(v, s->control_uid);
	if (s->pid > 0 && !s->exited && s->start && proc_start(s->pid) == s->start)
		q->pid = s->pid;
	q->uid_other = id_holder(q->uid, q->pid);
	q->uid_subordinate = id_subordinate(q->uid);
	q->kvm = strcmp(v->accel, "kvm") == 0;
	return vm_dir(v, s->instance, q->dir, sizeof(q->dir));
}
