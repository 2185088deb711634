/* host.c: agenticd's footprint on the host: socket directories and modes, the ownership lock,
 * peer checks on the admin socket, sd_notify, /etc/subuid, where an instance lives, the init
 * binary's copy in state_dir, and whether agenticd runs in a container. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bearssl.h>

#include "base/base.h"
#include "workspace/host.h"

/* ---- directories and sockets ---- */

/* Parent directory of path into out. */
static void parent_of(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash != path ? (size_t)(slash - path) : 1;

	snprintf(out, size, "%.*s", (int)n, path);
}

/* mkdir -p with mode for the directories it creates; existing ones are left as they are. */
int host_mkdirs(const char *path, mode_t mode)
{
	char tmp[LIMIT_PATH_BYTES];
	size_t n = strlen(path);

	if (n >= sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(tmp, path, n + 1);
	for (char *p = tmp + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(tmp, mode) != 0 && errno != EEXIST)
		return -errno;
	return 0;
}

/* A directory we own outright: made when missing, then set to mode and root:gid. */
static int own_dir(const char *path, mode_t mode, gid_t gid, char *err, size_t err_size)
{
	struct stat st;
	int r = host_mkdirs(path, mode);

	if (r == 0 && lstat(path, &st) != 0)
		r = -errno;
	if (r == 0 && !S_ISDIR(st.st_mode))
		r = -ENOTDIR;
	if (r == 0 && (st.st_uid != 0 || st.st_gid != gid) && chown(path, 0, gid) != 0)
		r = -errno;
	if (r == 0 && (st.st_mode & 07777) != mode && chmod(path, mode) != 0)
		r = -errno;
	if (r != 0)
		snprintf(err, err_size, "cannot prepare directory %s (mode %04o): %s", path,
			 (unsigned)mode, strerror(-r));
	return r;
}

int host_prepare_dirs(const struct config *cfg, bool admin_group_known, gid_t admin_gid,
		      char *err, size_t err_size)
{
	char parent[LIMIT_PATH_BYTES], admin_dir[LIMIT_PATH_BYTES];
	bool shared;
	int r;

	parent_of(cfg->agent_socket_dir, parent, sizeof(parent));
	parent_of(cfg->admin_socket, admin_dir, sizeof(admin_dir));
	if (strcmp(parent, "/") == 0) {
		snprintf(err, err_size, "agent_socket_dir %s must sit in a directory of its own "
			 "(its parent is made 0700)", cfg->agent_socket_dir);
		return -EINVAL;
	}
	/* The agent socket's parent keeps every host process but root away from the socket.
	 * When the admin socket lives there too, admin_group may traverse it (0710) to reach
	 * its own socket; the agent directory inside stays unreachable for anyone else. */
	shared = strcmp(parent, admin_dir) == 0 && admin_group_known;
	r = own_dir(parent, shared ? 0710 : 0700, shared ? admin_gid : 0, err, err_size);
	if (r == 0)
		r = own_dir(cfg->agent_socket_dir, 0755, 0, err, err_size);
	if (r == 0 && !shared && strcmp(admin_dir, parent) != 0 && host_mkdirs(admin_dir, 0755) != 0) {
		snprintf(err, err_size, "cannot make directory %s: %s", admin_dir, strerror(errno));
		r = -EIO;
	}
	return r;
}

/* the uid claim's descriptor: held, like the lock, until the daemon exits */
static int claim_fd = -1;

int host_lock(const struct config *cfg, int *lock_fd, char *err, size_t err_size)
{
	char path[LIMIT_PATH_BYTES];
	int fd;

	snprintf(path, sizeof(path), "%s.lock", cfg->admin_socket);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		snprintf(err, err_size, "cannot open lock file %s: %s", path, strerror(errno));
		return -errno;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;

		close(fd);
		snprintf(err, err_size, e == EWOULDBLOCK
			 ? "another agenticd owns %s (it holds %s); refusing to start"
			 : "cannot lock %s (%s)", cfg->admin_socket, path);
		return -e;
	}
	*lock_fd = fd;
	return host_claim_uids(cfg, &claim_fd, err, err_size);
}

int host_owner(const struct config *cfg, char *out, size_t size)
{
	char real[PATH_MAX];
	const char *p = realpath(cfg->agentshare_root, real) ? real : cfg->agentshare_root;
	uint64_t h = 0xcbf29ce484222325ull;

	if (size < 17)
		return ERR_LIMIT;
	for (; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ull;
	}
	snprintf(out, size, "%016llx", (unsigned long long)h);
	return 0;
}

static int unix_addr(const char *path, struct sockaddr_un *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return -ENAMETOOLONG;
	strcpy(sa->sun_path, path);
	return 0;
}

bool host_rights_refused = true;

int host_listen(const char *path, mode_t mode, gid_t gid, int *out, char *err, size_t err_size)
{
	struct sockaddr_un sa;
	struct stat st;
	int fd, r;

	if ((r = unix_addr(path, &sa)) != 0) {
		snprintf(err, err_size, "socket path %s is too long", path);
		return r;
	}
	if (lstat(path, &st) == 0) {
		/* A socket someone answers on belongs to a running daemon; anything else is stale. */
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd >= 0 && S_ISSOCK(st.st_mode) &&
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			close(fd);
			snprintf(err, err_size, "another process listens on %s; refusing to start", path);
			return -EADDRINUSE;
		}
		if (fd >= 0)
			close(fd);
		if (!S_ISSOCK(st.st_mode)) {
			snprintf(err, err_size, "%s exists and is not a socket; refusing to replace it",
				 path);
			return -EEXIST;
		}
		if (unlink(path) != 0) {
			snprintf(err, err_size, "cannot remove stale socket %s: %s", path,
				 strerror(errno));
			return -errno;
		}
		log_info("stale socket removed", "path=%s", log_q(path));
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	/* before listen(): no connection ever holds a passed descriptor (fd_refuse_rights);
	 * a kernel that cannot refuse them is reported once, by agenticd's start */
	if (fd >= 0 && fd_refuse_rights(fd) != 0)
		host_rights_refused = false;
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chown(path, 0, gid) != 0 ||
	    chmod(path, mode) != 0 || listen(fd, 128) != 0) {
		r = -errno;
		snprintf(err, err_size, "cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return r;
	}
	*out = fd;
	return 0;
}

int host_warn_subuid(const struct config *cfg, const char *path)
{
	char line[512];
	FILE *f = fopen(path, "re");
	int overlaps = 0;

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		char *c1 = strchr(line, ':'), *c2;
		unsigned long start, count;

		if (!c1 || !(c2 = strchr(c1 + 1, ':')))
			continue;
		start = strtoul(c1 + 1, NULL, 10);
		count = strtoul(c2 + 1, NULL, 10);
		if (count && start <= cfg->control_uid_max && start + count - 1 >= cfg->control_uid_min) {
			*c1 = '\0';
			overlaps++;
			log_warn("control uid range overlaps /etc/subuid",
				 "user=%s start=%lu count=%lu range=%u-%u note=%s", log_q(line), start, count,
				 cfg->control_uid_min, cfg->control_uid_max,
				 "\"a host process under such a uid is still refused: the resolver checks the pid namespace\"");
		}
	}
	fclose(f);
	return overlaps;
}

int host_admin_peer_ok(int fd, bool group_known, gid_t gid, uid_t *uid, pid_t *pid, char *why,
		       size_t why_size)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	gid_t groups[256];
	socklen_t glen = sizeof(groups);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
		snprintf(why, why_size, "no peer credentials");
		return -EACCES;
	}
	*uid = cred.uid;
	*pid = cred.pid;
	if (cred.uid == 0)
		return 0;
	if (!group_known) {
		snprintf(why, why_size, "not root, and the admin group does not exist");
		return -EACCES;
	}
	if (cred.gid == gid)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &glen) == 0) {
		for (size_t i = 0; i < glen / sizeof(gid_t); i++)
			if (groups[i] == gid)
				return 0;
	} else if (errno == ERANGE) {
		snprintf(why, why_size, "too many supplementary groups to check");
		return -EACCES;
	}
	snprintf(why, why_size, "not root and not a member of the admin group");
	return -EACCES;
}

int host_notify_ready(void)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t len;
	int fd, r = 0;
	static const char msg[] = "READY=1";

	if (!path || !path[0])
		return 0;
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path) || (path[0] != '/' && path[0] != '@'))
		return -EINVAL;
	memcpy(sa.sun_path, path, strlen(path));
	if (path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract namespace */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(path));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (sendto(fd, msg, sizeof(msg) - 1, MSG_NOSIGNAL, (struct sockaddr *)&sa, len) < 0)
		r = -errno;
	close(fd);
	return r;
}

int host_instance_dir(const struct config *cfg, const char *id, char *out, size_t size)
{
	int n = snprintf(out, size, "%s/instances/%s", cfg->agentshare_root, id);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* ---- the init binary's copy ---- */

/* sha256 of the open file fd from its start, as 64 hex digits into hex[65]. */
static int file_sha256(int fd, char hex[65])
{
	static const char digits[] = "0123456789abcdef";
	br_sha256_context h;
	unsigned char buf[16384], sum[32];
	off_t off = 0;
	ssize_t n;

	br_sha256_init(&h);
	while ((n = pread(fd, buf, sizeof(buf), off)) > 0) {
		br_sha256_update(&h, buf, (size_t)n);
		off += n;
	}
	if (n < 0)
		return -errno;
	br_sha256_out(&h, sum);
	for (int i = 0; i < 32; i++) {
		hex[2 * i] = digits[sum[i] >> 4];
		hex[2 * i + 1] = digits[sum[i] & 15];
	}
	hex[64] = '\0';
	return 0;
}

/* A copy of fd's file at path, made beside it and renamed over it: a sandbox that binds the
 * old one keeps its inode. */
static int write_copy(int src, const char *dir, const char *path)
{
	char tmp[LIMIT_PATH_BYTES + 16], buf[16384];
	off_t off = 0;
	ssize_t n = 0;
	int fd, r = 0;

	/* a name of this process's own: two daemons sharing state_dir never write one file */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s/.agentic-init.%ld", dir, (long)getpid()) >=
	    sizeof(tmp))
		return -ENAMETOOLONG;
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0500);
	if (fd < 0)
		return -errno;
	while (r == 0 && (n = pread(src, buf, sizeof(buf), off)) > 0) {
		for (ssize_t w = 0, k; r == 0 && w < n; w += k)
			if ((k = write(fd, buf + w, (size_t)(n - w))) < 0)
				r = -errno;
		off += n;
	}
	if (r == 0 && n < 0)
		r = -errno;
	if (r == 0 && (fchown(fd, 0, 0) != 0 || fchmod(fd, 0555) != 0 || fsync(fd) != 0))
		r = -errno;
	if (close(fd) != 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	return r;
}

int host_init_copy(const struct config *cfg, const char *self, char *out, size_t out_size,
		   char sha[65], char *err, size_t err_size)
{
	char have[65];
	struct stat st;
	int src, cur, r;

	if ((size_t)snprintf(out, out_size, "%s/agentic-init", cfg->state_dir) >= out_size) {
		snprintf(err, err_size, "state_dir %s is too long", cfg->state_dir);
		return -ENAMETOOLONG;
	}
	if ((r = own_dir(cfg->state_dir, 0755, 0, err, err_size)) != 0)
		return r;
	src = open(self, O_RDONLY | O_CLOEXEC);
	if (src < 0 || (r = file_sha256(src, sha)) != 0) {
		r = src < 0 ? -errno : r;
		snprintf(err, err_size, "cannot read the agentic binary %s: %s", self, strerror(-r));
		if (src >= 0)
			close(src);
		return r;
	}
	/* the copy is used as it is only when it is root's, 0555, a plain file and the same bytes */
	cur = open(out, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (cur >= 0 && fstat(cur, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == 0 &&
	    st.st_gid == 0 && (st.st_mode & 07777) == 0555 && file_sha256(cur, have) == 0 &&
	    strcmp(have, sha) == 0) {
		close(cur);
		close(src);
		return 1;
	}
	if (cur >= 0)
		close(cur);
	r = write_copy(src, cfg->state_dir, out);
	close(src);
	if (r != 0)
		snprintf(err, err_size, "cannot write the init binary's copy %s: %s", out,
			 strerror(-r));
	return r;
}

/* ---- in a container, and which engine ---- */

/* The inode of /proc/<who>/ns/mnt, 0 when it cannot be read. */
static unsigned long mnt_ns(const char *who)
{
	char path[64];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%s/ns/mnt", who);
	return stat(path, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

bool host_in_container(void)
{
	unsigned long self = mnt_ns("self"), init = mnt_ns("1");

	/* The engine leaves /.dockerenv in each container's root. Without it, a mount namespace
	 * other than the one of pid 1 (the host's init, with --pid host) says the same. */
	if (access("/.dockerenv", F_OK) == 0)
		return true;
	return self && init && self != init;
}

/* The pid (ours) of the process that listens on the engine's socket path, or -errno. */
static pid_t engine_pid(const char *sock, char *err, size_t err_size)
{
	struct sockaddr_un sa;
	struct ucred cred = { 0 };
	socklen_t len = sizeof(cred);
	int fd, r = unix_addr(sock, &sa);

	fd = r == 0 ? socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0) : -1;
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		r = r ? r : -errno;
	if (fd >= 0)
		close(fd);
	if (r == 0 && cred.pid <= 0)
		r = -ESRCH;
	if (r != 0)
		snprintf(err, err_size, "the engine's process behind %s cannot be found (%s): in a "
			 "container agenticd needs the host's pid namespace (docker run --pid host) "
			 "to check the paths the engine binds on the engine's host", sock,
			 strerror(-r));
	return r ? r : cred.pid;
}

int host_engine_root(const struct config *cfg, bool in_container, char *err, size_t err_size)
{
	const char *sock = cfg->docker_host + strlen("unix://");
	char path[48];
	pid_t pid;
	int fd;

	if (!in_container || strncmp(cfg->docker_host, "unix://", 7) != 0)
		fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	else if ((pid = engine_pid(sock, err, err_size)) < 0)
		return pid;
	else {
		snprintf(path, sizeof(path), "/proc/%ld/root", (long)pid);
		fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	}
	if (fd < 0)
		snprintf(err, err_size, "cannot open the engine's root directory: %s",
			 strerror(errno));
	return fd < 0 ? -errno : fd;
}

enum engine_place host_engine_place(const struct docker_info *info, const char *kernel,
				    bool in_container)
{
	if (!info->docker_desktop)
		return ENGINE_LINUX;
	/* Docker Desktop runs the engine in a VM. A container of that engine runs on the VM's
	 * kernel, which the engine names in /info: there, peer credentials, pid namespaces and
	 * internal networks are those of the sandboxes. Anywhere else they are not. */
	if (in_container && info->kernel_version[0] && strcmp(info->kernel_version, kernel) == 0)
		return ENGINE_DESKTOP_VM;
	return ENGINE_DESKTOP_OUTSIDE;
}

const char *host_kernel_release(char *out, size_t size)
{
	struct utsname u;

	snprintf(out, size, "%s", uname(&u) == 0 ? u.release : "");
	return out;
}
