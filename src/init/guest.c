/* guest.c: the init as PID 1 of a VM sandbox: the mounts, modules, sysctls, control port and
 * privileges that a container runtime sets up before a container's init starts. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/openat2.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "init/env.h"
#include "init/guest.h"
#include "init/priv.h"

extern char **environ;

#define GUEST_MODULES "/lib/modules/agentic"
#define GUEST_PORT_NAME "agentic.control"
#define GUEST_PORTS "/sys/class/virtio-ports"
#define GUEST_WORKSPACE_DEV "/dev/vda"
#define GUEST_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
/* how long a device the kernel probes asynchronously may take to appear */
#define GUEST_DEVICE_WAIT_MS 2000
/* /dev/shm, as the container engine's default */
#define GUEST_SHM_BYTES (64u << 20)

static pid_t helper_pid = -1;
static int helper_fd = -1;   /* the write end of the power-off helper's pipe */

static int say(const char *what, const char *step, int err)
{
	fprintf(stderr, "agentic-init: vm: %s: %s: %s\n", what, step, err_str(err));
	return 1;
}

int init_guest_is_vm(void)
{
	const char *rt = getenv("AGENT_RUNTIME");

	return getpid() == 1 && rt && strcmp(rt, "vm") == 0;
}

static int env_is(const char *key, const char *value)
{
	const char *v = getenv(key);

	return v && strcmp(v, value) == 0;
}

static void nap_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* No component of the absolute path dir is a symbolic link: an image's links never choose
 * where a mount lands (a /run linked into the workspace would put the control tmpfs below a
 * directory the workload owns and may rename). */
static int no_link_on(const char *dir)
{
	char p[LIMIT_PATH_BYTES];
	size_t n = strlen(dir);
	struct stat st;

	if (n >= sizeof(p) || dir[0] != '/')
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (lstat(p, &st) != 0)
				return -errno;
			if (!S_ISDIR(st.st_mode))
				return -ENOTDIR;
			*s = c;
			if (!c)
				return 0;
		}
	}
}

static int mount_at(const char *src, const char *dir, const char *type, unsigned long flags,
		    const char *data)
{
	int r;

	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return say("cannot make a mount point", dir, -errno);
	if ((r = no_link_on(dir)) != 0)
		return say("a mount point is not a directory of the image's own (a symbolic link on "
			   "its path?)", dir, r);
	if (mount(src, dir, type, flags, data) != 0)
		return say("cannot mount", dir, -errno);
	return 0;
}

/* The kernel opens /dev/console on the initramfs for PID 1; without it there is nowhere to
 * say what went wrong, so the devtmpfs one is taken. */
static void console_ensure(void)
{
	int fd;

	if (fcntl(2, F_GETFD) >= 0)
		return;
	fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0)
		return;
	for (int i = 0; i < 3; i++)
		if (fd != i)
			dup2(fd, i);
	if (fd > 2)
		close(fd);
}

static int mount_kernel_fs(void)
{
	char shm[64];

	if (mount_at("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) ||
	    mount_at("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
		     NULL) ||
	    mount_at("devtmpfs", "/dev", "devtmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755"))
		return 1;
	console_ensure();
	/* tty commands' terminals (pty.c), as Docker mounts them; a guest without goes on and
	 * refuses tty commands */
	(void)mount_at("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
		       "ptmxmode=0666,mode=0620,gid=5");
	snprintf(shm, sizeof(shm), "mode=1777,size=%u", GUEST_SHM_BYTES);
	return mount_at("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, shm);
}

/* A name of load-order, as a file name: letters, digits, '_' and '-'. */
static int module_name_ok(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < 64 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* openat2: what the init opens as root from the image's tree is looked up on the root
 * filesystem alone (RESOLVE_NO_XDEV, RESOLVE_NO_MAGICLINKS), so an image's symbolic link
 * cannot point it at a tree the kernel's unpacking of the initramfs never wrote into (a
 * link through /proc/self/root to a directory of the image's: the kernel could not follow it
 * when it unpacked our modules, the init could once /proc is mounted, and would have loaded
 * the image's modules into the guest's kernel). */
static int open_on_root(int dirfd, const char *path, int flags, uint64_t resolve)
{
	struct open_how how = { .flags = (uint64_t)(flags | O_CLOEXEC),
				.resolve = resolve | RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

	return fd >= 0 ? fd : -errno;
}

/* Loads the modules named in load-order, one a line; no list: the kernel has what it needs.
 * The directory is found through the image's links (lib may be one: usr/lib) but never off
 * the root filesystem; its files are the directory's own entries, no link followed. */
static int modules_load(void)
{
	const uint64_t own = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
	char list[1024], path[128], *save = NULL;
	ssize_t n;
	int dfd = open_on_root(AT_FDCWD, GUEST_MODULES, O_RDONLY | O_DIRECTORY, 0), fd;

	if (dfd == -ENOENT)
		return 0;
	if (dfd < 0)
		return say("cannot open the modules' directory (a link in its path leaves the "
			   "root filesystem?)", GUEST_MODULES, dfd);
	fd = open_on_root(dfd, "load-order", O_RDONLY, own);
	if (fd < 0) {
		close(dfd);
		return fd == -ENOENT ? 0 : say("cannot read", GUEST_MODULES "/load-order", fd);
	}
	n = read(fd, list, sizeof(list) - 1);
	close(fd);
	if (n < 0 || n == (ssize_t)sizeof(list) - 1) {
		close(dfd);
		return say("cannot read", GUEST_MODULES "/load-order", n < 0 ? -errno : -EFBIG);
	}
	list[n] = '\0';
	for (char *name = strtok_r(list, " \t\r\n", &save); name;
	     name = strtok_r(NULL, " \t\r\n", &save)) {
		int mfd, r;

		if (!module_name_ok(name)) {
			close(dfd);
			return say("cannot load the modules", "a name in load-order is not a module "
				   "name", -EINVAL);
		}
		snprintf(path, sizeof(path), "%s.ko", name);
		mfd = open_on_root(dfd, path, O_RDONLY, own);
		snprintf(path, sizeof(path), "%s/%s.ko", GUEST_MODULES, name);
		if (mfd < 0) {
			close(dfd);
			return say("cannot open the module", path, mfd);
		}
		r = (int)syscall(SYS_finit_module, mfd, "", 0);
		r = r == 0 || errno == EEXIST ? 0 : -errno;
		close(mfd);
		if (r) {
			close(dfd);
			return say("cannot load the module", path, r);
		}
	}
	close(dfd);
	return 0;
}

static int sysctl_write(const char *path, const char *value, int optional)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return optional && errno == ENOENT ? 0 : say("cannot set", path, -errno);
	if (write(fd, value, strlen(value)) != (ssize_t)strlen(value))
		r = say("cannot set", path, -errno);
	close(fd);
	return r;
}

/* After the modules: nothing more is loaded, and the kernel keeps to itself what a workload
 * could use against it. */
static int sysctls_harden(void)
{
	static const struct {
		const char *path, *value;
		int optional;   /* absent from a kernel built without the feature */
	} k[] = {
		{ "/proc/sys/kernel/modules_disabled", "1", 0 },
		{ "/proc/sys/kernel/kptr_restrict", "2", 0 },
		{ "/proc/sys/kernel/dmesg_restrict", "1", 0 },
		{ "/proc/sys/user/max_user_namespaces", "0", 1 },
		{ "/proc/sys/kernel/unprivileged_bpf_disabled", "1", 1 },
		{ "/proc/sys/net/ipv6/conf/all/disable_ipv6", "1", 1 },
	};

	for (size_t i = 0; i < ARRAY_LEN(k); i++)
		if (sysctl_write(k[i].path, k[i].value, k[i].optional))
			return 1;
	return 0;
}

static int wait_for(const char *path)
{
	struct stat st;

	for (int waited = 0; stat(path, &st) != 0; waited += 10) {
		if (waited >= GUEST_DEVICE_WAIT_MS)
			return -ENOENT;
		nap_ms(10);
	}
	return 0;
}

/* The virtio port named agentic.control, as its name under /dev (vport0p1) in out. */
static int port_find(char *out, size_t cap)
{
	for (int waited = 0;; waited += 10) {
		DIR *d = opendir(GUEST_PORTS);
		struct dirent *e;
		int found = 0;

		while (d && !found && (e = readdir(d))) {
			char path[300], name[64];
			ssize_t n;
			int fd;

			if (e->d_name[0] == '.' || strlen(e->d_name) >= cap)
				continue;
			snprintf(path, sizeof(path), GUEST_PORTS "/%s/name", e->d_name);
			fd = open(path, O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				continue;
			n = read(fd, name, sizeof(name) - 1);
			close(fd);
			if (n <= 0)
				continue;
			name[n] = '\0';
			name[strcspn(name, "\n")] = '\0';
			if (strcmp(name, GUEST_PORT_NAME) == 0) {
				memcpy(out, e->d_name, strlen(e->d_name) + 1);
				found = 1;
			}
		}
		if (d)
			closedir(d);
		if (found)
			return 0;
		if (waited >= GUEST_DEVICE_WAIT_MS)
			return -ENOENT;
		nap_ms(10);
	}
}

/* Finds the control port, sets AGENT_GRPC_UDS_PATH to it and makes it the control uid's:
 * the init dials it again after dropping to that uid. */
static int port_take(void)
{
	char name[64], dev[80];
	const char *uid = getenv("AGENT_CONTROL_UID"), *gid = getenv("AGENT_CONTROL_GID");
	uint64_t u, g;

	if (port_find(name, sizeof(name)) != 0) {
		fprintf(stderr, "agentic-init: vm: refusing to start: the control port (a virtio "
			"serial port named " GUEST_PORT_NAME ") was not found\n");
		return 1;
	}
	snprintf(dev, sizeof(dev), "/dev/%s", name);
	if (wait_for(dev) != 0)
		return say("the control port has no device node", dev, -ENOENT);
	if (setenv("AGENT_GRPC_UDS_PATH", dev, 1) != 0)
		return say("cannot set", "AGENT_GRPC_UDS_PATH", -errno);
	/* the ids are checked by init_env_parse; until then only numbers are taken */
	if (!uid || !gid || parse_u64(uid, 0x7fffffff, &u) || parse_u64(gid, 0x7fffffff, &g)) {
		fprintf(stderr, "agentic-init: vm: refusing to start: AGENT_CONTROL_UID and "
			"AGENT_CONTROL_GID must be numeric ids\n");
		return 1;
	}
	if (chown(dev, (uid_t)u, (gid_t)g) != 0 || chmod(dev, 0600) != 0)
		return say("cannot give the control port to the control uid", dev, -errno);
	return 0;
}

/* mkdir -p of path's parents and path itself. */
static int dirs_make(const char *path)
{
	char p[LIMIT_PATH_BYTES];
	size_t n = strlen(path);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		if (*s == '/' || *s == '\0') {
			char c = *s;

			*s = '\0';
			if (mkdir(p, 0755) != 0 && errno != EEXIST)
				return -errno;
			*s = c;
			if (!c)
				return 0;
		}
	}
}

static int mount_storage(const struct init_env *env)
{
	char opts[128], dir[LIMIT_PATH_BYTES];
	const char *slash = strrchr(env->sentinel, '/');
	size_t n = (size_t)(slash - env->sentinel);
	int r;

	if (!env_is("AGENT_VM_WORKSPACE", "none")) {
		if (wait_for(GUEST_WORKSPACE_DEV) != 0)
			return say("no workspace disk", GUEST_WORKSPACE_DEV " (virtio-blk) did not "
				   "appear", -ENOENT);
		if (mount_at(GUEST_WORKSPACE_DEV, "/workspace", "ext4", MS_NOSUID | MS_NODEV,
			     NULL))
			return 1;
	}
	/* as the container runtime mounts them (runtime/runtime_docker.c) */
	snprintf(opts, sizeof(opts), "mode=1777,size=%u", LIMIT_SANDBOX_TMP_BYTES);
	if (mount_at("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, opts))
		return 1;
	if (n == 0 || n >= sizeof(dir))
		return say("cannot mount the control tmpfs", "AGENT_SETUP_SENTINEL must name a "
			   "file in a directory below /", -EINVAL);
	memcpy(dir, env->sentinel, n);
	dir[n] = '\0';
	r = dirs_make(dir);
	if (r)
		return say("cannot make the control tmpfs's directory", dir, r);
	snprintf(opts, sizeof(opts), "mode=0700,uid=%u,gid=%u,size=64k", env->control_uid,
		 env->control_gid);
	if (mount_at("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts))
		return 1;
	/* the workload's credential files (a profile's credential_refs with target "file"):
	 * in the guest's memory alone, in a directory only the workload user can enter */
	snprintf(opts, sizeof(opts), "mode=0700,uid=%u,gid=%u,size=%u", env->workload_uid,
		 env->workload_gid, LIMIT_VM_CREDENTIAL_FS_BYTES);
	return mount_at("tmpfs", INIT_CREDENTIAL_DIR, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
			opts);
}

/* lo up: the kernel gives it 127.0.0.1, where the egress proxy listens. */
static int loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r = 0;

	if (s < 0)
		return say("cannot bring lo up", "socket", -errno);
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if (ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		r = say("cannot bring lo up", "SIOCGIFFLAGS", -errno);
	ifr.ifr_flags |= IFF_UP;
	if (!r && ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
		r = say("cannot bring lo up", "SIOCSIFFLAGS", -errno);
	close(s);
	return r;
}

static int caps_set(uint64_t eff, uint64_t prm)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = {
		{ (uint32_t)eff, (uint32_t)prm, 0 },
		{ (uint32_t)(eff >> 32), (uint32_t)(prm >> 32), 0 },
	};

	return syscall(SYS_capset, &hdr, data) == 0 ? 0 : -errno;
}

/* Bounding set down to keep; the permitted and effective sets exactly keep; no inheritable,
 * no ambient; no-new-privileges. */
static int caps_keep(uint64_t keep, const char **step)
{
	*step = "prctl(PR_CAPBSET_DROP)";
	for (int cap = 0; cap < 64; cap++) {
		if (keep & ((uint64_t)1 << cap))
			continue;
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) {
			if (errno == EINVAL)
				break; /* past the kernel's last capability */
			return -errno;
		}
	}
	*step = "prctl(PR_CAP_AMBIENT_CLEAR_ALL)";
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
		return -errno;
	*step = "capset";
	if (caps_set(keep, keep) != 0)
		return -errno;
	*step = "prctl(PR_SET_NO_NEW_PRIVS)";
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 ? 0 : -errno;
}

/* The one process that keeps a privilege the init gives up: CAP_SYS_BOOT, to power the VM off
 * when the init stops cleanly. It holds nothing else and reads only its pipe; its uid is 0, so
 * that neither the control uid nor the workload can signal or trace it. */
static _Noreturn void helper_run(int fd)
{
	const char *step;
	char c = 0;
	ssize_t n;
	int r, adj = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (adj >= 0) {
		(void)!write(adj, "-1000", 5);
		close(adj);
	}
	r = caps_keep((uint64_t)1 << CAP_SYS_BOOT, &step);
	if (r)
		_exit(say("the power-off helper cannot drop its privileges", step, r));
	do
		n = read(fd, &c, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1 || c != 'P')
		_exit(0);
	sync();
	reboot(RB_POWER_OFF);
	_exit(say("cannot power the VM off", "reboot(RB_POWER_OFF)", -errno));
}

static int helper_start(void)
{
	int p[2];

	if (pipe2(p, O_CLOEXEC) != 0)
		return say("cannot start the power-off helper", "pipe2", -errno);
	helper_pid = fork();
	if (helper_pid < 0)
		return say("cannot start the power-off helper", "fork", -errno);
	if (helper_pid == 0) {
		close(p[1]);
		helper_run(p[0]);
	}
	close(p[0]);
	helper_fd = p[1];
	return 0;
}

int init_guest_prelude(void)
{
	static struct init_env env;
	const char *step;
	char why[256];
	int r;

	if (mount_kernel_fs() || modules_load() || sysctls_harden() || port_take())
		return 1;
	if (!getenv("PATH") && setenv("PATH", GUEST_PATH, 1) != 0)
		return say("cannot set", "PATH", -errno);
	if (setenv("HOME", "/", 1) != 0)
		return say("cannot set", "HOME", -errno);
	if (init_env_parse(environ, &env, why, sizeof(why)) != 0) {
		fprintf(stderr, "agentic-init: refusing to start: %s\n", why);
		return 2;
	}
	if (mount_storage(&env) || loopback_up())
		return 1;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV |
		  (env_is("AGENT_VM_WRITABLE_ROOT", "1") ? 0 : MS_RDONLY), NULL) != 0)
		return say("cannot remount the root filesystem", "/", -errno);
	if (helper_start())
		return 1;
	r = caps_keep(PRIV_CONTROL_CAPS, &step);
	if (r)
		return say("cannot reduce the init's privileges", step, r);
	return 0;
}

int init_guest_exit(int status)
{
	int st;

	if (status != 0) {
		fprintf(stderr, "agentic-init: vm: PID 1 exits with status %d: the kernel panics "
			"and the VM stops\n", status);
		return status;
	}
	sync();
	if (helper_fd >= 0 && write(helper_fd, "P", 1) == 1)
		while (waitpid(helper_pid, &st, 0) < 0 && errno == EINTR)
			;
	fprintf(stderr, "agentic-init: vm: the power-off helper did not power the VM off: the "
		"kernel panics on PID 1's exit instead\n");
	return status;
}
