/* host.c: agenticd's footprint on the host: socket directories and modes, the ownership lock,
 * peer checks on the admin socket, sd_notify, /etc/subuid, and the agentshare records. */
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
#include <unistd.h>

#include "json/json.h"
#include "mgmt/daemon.h"
#include "mgmt/workspace.h"

/* ---- directories and sockets ---- */

/* Parent directory of path into out. */
static void parent_of(const char *path, char *out, size_t size)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash && slash != path ? (size_t)(slash - path) : 1;

	snprintf(out, size, "%.*s", (int)n, path);
}

/* mkdir -p with mode for the directories it creates; existing ones are left as they are. */
static int mkdirs(const char *path, mode_t mode)
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
	int r = mkdirs(path, mode);

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
	if (r == 0 && !shared && strcmp(admin_dir, parent) != 0 && mkdirs(admin_dir, 0755) != 0) {
		snprintf(err, err_size, "cannot make directory %s: %s", admin_dir, strerror(errno));
		r = -EIO;
	}
	return r;
}

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
	return 0;
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

/* ---- agentshare ---- */

int share_instance_dir(const struct config *cfg, const char *id, char *out, size_t size)
{
	int n = snprintf(out, size, "%s/instances/%s", cfg->agentshare_root, id);

	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int share_make(const struct config *cfg, const struct sandbox *sb, char *err, size_t err_size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	if (mkdirs(dir, 0700) != 0)
		r = -errno;
	if (r == 0 && (r = share_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) == 0 &&
	    mkdir(dir, 0700) != 0)
		r = -errno;
	if (r != 0)
		snprintf(err, err_size, "cannot make the sandbox's agentshare directory %s: %s", dir,
			 strerror(-r));
	return r;
}

/* instances/<id>/workspace (the mount point) and instances/<id>/workspace.img. */
static int workspace_paths(const struct config *cfg, const char *id, char *ws, char *img,
			   size_t size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = share_instance_dir(cfg, id, dir, sizeof(dir));

	if (r == 0 && (snprintf(ws, size, "%s/workspace", dir) >= (int)size ||
		       snprintf(img, size, "%s/workspace.img", dir) >= (int)size))
		r = -ENAMETOOLONG;
	return r;
}

/* Makes the image: room for it (preallocated, so a full workspace never takes more, and
 * never the last 1/20 of the filesystem, the transcripts' room), then the filesystem. */
static int make_image(const char *img, uint64_t bytes, const struct config *cfg, char *err,
		      size_t err_size)
{
	struct statvfs vfs;
	int fd, r = 0;

	fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		snprintf(err, err_size, "cannot create the workspace image %s: %s", img, strerror(-r));
		return r;
	}
	if (fstatvfs(fd, &vfs) == 0 &&
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < bytes + (uint64_t)vfs.f_blocks * vfs.f_frsize / 20) {
		snprintf(err, err_size, "the agentshare has no room for a workspace of %llu bytes "
			 "(disk_bytes) and its last 1/20 for transcripts (%llu bytes available)",
			 (unsigned long long)bytes,
			 (unsigned long long)vfs.f_bavail * vfs.f_frsize);
		r = -ENOSPC;
	} else if (fallocate(fd, 0, 0, (off_t)bytes) != 0) {
		r = -errno;
		snprintf(err, err_size, r == -ENOSPC ? "the agentshare has no room for a workspace "
			 "of %llu bytes (disk_bytes)" : "cannot allocate the workspace image of %llu "
			 "bytes: %s", (unsigned long long)bytes, strerror(-r));
	} else if ((r = workspace_format(fd, bytes, cfg->workload_uid, cfg->workload_gid)) != 0) {
		snprintf(err, err_size, "cannot write the workspace filesystem into %s: %s", img,
			 strerror(-r));
	}
	close(fd);
	if (r != 0)
		unlink(img);
	return r;
}

int share_make_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			 size_t err_size)
{
	char ws[LIMIT_PATH_BYTES + 16], img[LIMIT_PATH_BYTES + 16];
	int r = workspace_paths(cfg, sb->instance_id, ws, img, sizeof(ws));

	if (r != 0) {
		snprintf(err, err_size, "the sandbox's workspace path is too long");
		return r;
	}
	/* The mount point belongs to root with mode 0: unmounted (after a reboot, say), it is no
	 * workspace anyone can write, so an init started on it refuses to start. */
	if (mkdir(ws, 0) != 0) {
		r = -errno;
		snprintf(err, err_size, "cannot make the sandbox's workspace %s: %s", ws, strerror(-r));
		return r;
	}
	if ((r = make_image(img, sb->disk_bytes, cfg, err, err_size)) == 0 &&
	    (r = workspace_mount(img, ws, err, err_size)) != 0)
		unlink(img);
	if (r != 0)
		rmdir(ws);
	return r;
}

int share_mount_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			  size_t err_size)
{
	char ws[LIMIT_PATH_BYTES + 16], img[LIMIT_PATH_BYTES + 16];
	struct stat st;
	int r = workspace_paths(cfg, sb->instance_id, ws, img, sizeof(ws));

	if (r != 0 || lstat(img, &st) != 0)
		return 0; /* no image: a workspace made before images, a plain directory */
	if ((r = workspace_mounted(ws)) != 0) {
		if (r < 0)
			snprintf(err, err_size, "cannot check the workspace mount %s: %s", ws,
				 strerror(-r));
		return r < 0 ? r : 0;
	}
	return workspace_mount(img, ws, err, err_size) == 0 ? 1 : -EIO;
}

/* Instance directories a crash left empty (made, but no record written yet; a temp record
 * at most). */
void share_sweep_empty(const struct config *cfg)
{
	char dir[LIMIT_PATH_BYTES], sub[LIMIT_PATH_BYTES + 320];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	d = opendir(dir);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		/* a half-written record is never valid: the real one is renamed into place */
		snprintf(sub, sizeof(sub), "%s/%s/.sandbox.json.tmp", dir, de->d_name);
		unlink(sub);
		snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
		if (rmdir(sub) == 0)
			log_info("recovery: empty instance directory removed", "instance=%s",
				 log_q(de->d_name));
	}
	closedir(d);
}

static void write_strrun(struct json_writer *w, const char *key, const char *run, uint32_t len)
{
	json_key(w, key);
	json_arr_begin(w);
	for (const char *p = NULL; (p = strrun_next(run, len, p));)
		json_str_write(w, p);
	json_arr_end(w);
}

int share_write_record(const struct config *cfg, const struct sandbox *sb)
{
	static char text[LIMIT_SANDBOX_CMD_BYTES + LIMIT_SANDBOX_LABEL_BYTES +
			 LIMIT_SANDBOX_MOUNT_BYTES + 8192];
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 32], tmp[LIMIT_PATH_BYTES + 32];
	struct buf b;
	struct json_writer w;
	int fd, r;
	ssize_t n;

	if ((r = share_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) != 0)
		return r;
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "name");
	json_str_write(&w, sb->name);
	json_key(&w, "instance_id");
	json_str_write(&w, sb->instance_id);
	json_key(&w, "state");
	json_str_write(&w, sb->state == SB_READY ? "ready" : sb->state == SB_REMOVING ? "removing"
						 : "creating");
	json_key(&w, "control_uid");
	json_int_write(&w, sb->uid);
	json_key(&w, "subnet");
	json_str_write(&w, sb->subnet_text);
	json_key(&w, "network");
	json_str_write(&w, sb->network);
	json_key(&w, "network_id");
	json_str_write(&w, sb->network_id);
	json_key(&w, "network_managed");
	json_bool_write(&w, sb->net_managed);
	json_key(&w, "container_id");
	json_str_write(&w, sb->container_id);
	json_key(&w, "image");
	json_str_write(&w, sb->image);
	json_key(&w, "created_ms");
	json_int_write(&w, sb->created_ms);
	json_key(&w, "ready_ms");
	json_int_write(&w, sb->ready_ms);
	json_key(&w, "keep_workspace");
	json_bool_write(&w, sb->keep_workspace);
	json_key(&w, "disk_bytes");
	json_int_write(&w, (int64_t)sb->disk_bytes);
	json_key(&w, "writable_root");
	json_bool_write(&w, sb->writable_root);
	write_strrun(&w, "cmd", sb->cmd, sb->cmd_len);
	write_strrun(&w, "labels", sb->labels, sb->labels_len);
	write_strrun(&w, "mounts", sb->mounts, sb->mounts_len);
	json_key(&w, "mount_ro");
	json_int_write(&w, sb->mount_ro);
	json_obj_end(&w);
	if ((r = json_writer_finish(&w)) != 0 || buf_append(&b, "\n", 1) != 0)
		return r ? r : ERR_LIMIT;
	snprintf(path, sizeof(path), "%s/sandbox.json", dir);
	snprintf(tmp, sizeof(tmp), "%s/.sandbox.json.tmp", dir);
	/* temp + fsync + rename: a reader (a restarted agenticd) sees the old or the new record */
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	n = write(fd, b.data, b.len);
	r = n == (ssize_t)b.len ? 0 : n < 0 ? -errno : -EIO;
	if (r == 0 && fsync(fd) != 0)
		r = -errno;
	close(fd);
	if (r == 0 && rename(tmp, path) != 0)
		r = -errno;
	if (r != 0) {
		unlink(tmp);
		return r;
	}
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
}

static int read_strrun(const struct json_doc *doc, int arr, char *run, uint32_t *len,
		       uint32_t cap, uint16_t *count)
{
	char s[CONFIG_STR_BYTES * 4];

	*len = 0;
	*count = 0;
	if (arr < 0)
		return 0;
	if (doc->tok[arr].type != JSON_ARRAY)
		return ERR_PARSE;
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		if (json_str(doc, i, s, sizeof(s)) < 0 || strrun_add(run, len, cap, s) != 0)
			return ERR_PARSE;
		(*count)++;
	}
	return 0;
}

int share_read_record(const struct config *cfg, const char *id, struct sandbox *sb,
		      char *state, size_t state_size)
{
	static char text[LIMIT_SANDBOX_CMD_BYTES * 2 + LIMIT_SANDBOX_LABEL_BYTES * 2 +
			 LIMIT_SANDBOX_MOUNT_BYTES * 2 + 16384];
	static struct json_token tok[2048];
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 16];
	struct json_doc doc;
	int64_t v;
	bool bv;
	uint16_t npairs;
	ssize_t n;
	int fd, r;

	if ((r = share_instance_dir(cfg, id, dir, sizeof(dir))) != 0)
		return r;
	snprintf(path, sizeof(path), "%s/sandbox.json", dir);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n <= 0 || (size_t)n == sizeof(text))
		return ERR_PARSE;
	if (json_parse(&doc, text, (size_t)n, tok, ARRAY_LEN(tok)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT)
		return ERR_PARSE;
	if (json_str(&doc, json_obj_get(&doc, 0, "name"), sb->name, sizeof(sb->name)) < 0 ||
	    json_str(&doc, json_obj_get(&doc, 0, "instance_id"), sb->instance_id,
		     sizeof(sb->instance_id)) < 0 ||
	    json_str(&doc, json_obj_get(&doc, 0, "state"), state, state_size) < 0 ||
	    json_int(&doc, json_obj_get(&doc, 0, "control_uid"), &v) != 0 || v < 0 ||
	    v > UINT32_MAX)
		return ERR_PARSE;
	sb->uid = (uint32_t)v;
	json_str(&doc, json_obj_get(&doc, 0, "subnet"), sb->subnet_text, sizeof(sb->subnet_text));
	json_str(&doc, json_obj_get(&doc, 0, "network"), sb->network, sizeof(sb->network));
	json_str(&doc, json_obj_get(&doc, 0, "network_id"), sb->network_id,
		 sizeof(sb->network_id));
	json_str(&doc, json_obj_get(&doc, 0, "container_id"), sb->container_id,
		 sizeof(sb->container_id));
	json_str(&doc, json_obj_get(&doc, 0, "image"), sb->image, sizeof(sb->image));
	if (json_bool(&doc, json_obj_get(&doc, 0, "network_managed"), &bv) == 0)
		sb->net_managed = bv;
	if (json_bool(&doc, json_obj_get(&doc, 0, "keep_workspace"), &bv) == 0)
		sb->keep_workspace = bv;
	if (json_bool(&doc, json_obj_get(&doc, 0, "writable_root"), &bv) == 0)
		sb->writable_root = bv;
	if (json_int(&doc, json_obj_get(&doc, 0, "created_ms"), &v) == 0)
		sb->created_ms = v;
	if (json_int(&doc, json_obj_get(&doc, 0, "ready_ms"), &v) == 0)
		sb->ready_ms = v;
	if (json_int(&doc, json_obj_get(&doc, 0, "mount_ro"), &v) == 0)
		sb->mount_ro = (uint32_t)v;
	if (json_int(&doc, json_obj_get(&doc, 0, "disk_bytes"), &v) == 0 && v > 0)
		sb->disk_bytes = (uint64_t)v;
	if (read_strrun(&doc, json_obj_get(&doc, 0, "cmd"), sb->cmd, &sb->cmd_len,
			sizeof(sb->cmd), &sb->ncmd) != 0 ||
	    read_strrun(&doc, json_obj_get(&doc, 0, "labels"), sb->labels, &sb->labels_len,
			sizeof(sb->labels), &npairs) != 0 ||
	    read_strrun(&doc, json_obj_get(&doc, 0, "mounts"), sb->mounts, &sb->mounts_len,
			sizeof(sb->mounts), &sb->nmounts) != 0)
		return ERR_PARSE;
	sb->nlabels = npairs / 2;
	sb->nmounts /= 2;
	return 0;
}

int share_each_record(const struct config *cfg, int (*fn)(void *ctx, const char *id), void *ctx)
{
	char dir[LIMIT_PATH_BYTES], rec[LIMIT_PATH_BYTES + 320];
	struct dirent *de;
	DIR *d;
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : -errno;
	while (r == 0 && (de = readdir(d))) {
		struct stat st;

		if (de->d_name[0] == '.' || strlen(de->d_name) >= SB_ID_BYTES)
			continue;
		snprintf(rec, sizeof(rec), "%s/%s/sandbox.json", dir, de->d_name);
		if (lstat(rec, &st) == 0 && S_ISREG(st.st_mode))
			r = fn(ctx, de->d_name);
	}
	closedir(d);
	return r;
}

struct dirent64_raw {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* Deletes everything below the directory dfd, never following a symlink. A few passes, since
 * a directory listing that changes under us may skip entries. */
static void rmtree_at(int dfd, int depth)
{
	char buf[4096];
	long n;

	if (depth > LIMIT_RMTREE_DEPTH)
		return;
	for (int pass = 0; pass < 3; pass++) {
		int seen = 0;

		lseek(dfd, 0, SEEK_SET);
		while ((n = syscall(SYS_getdents64, dfd, buf, sizeof(buf))) > 0) {
			for (long off = 0; off < n;) {
				struct dirent64_raw *de = (void *)(buf + off);
				int sub;

				off += de->reclen;
				if (!strcmp(de->name, ".") || !strcmp(de->name, ".."))
					continue;
				seen++;
				if (unlinkat(dfd, de->name, 0) == 0 || errno != EISDIR)
					continue;
				sub = openat(dfd, de->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
				if (sub >= 0) {
					rmtree_at(sub, depth + 1);
					close(sub);
				}
				unlinkat(dfd, de->name, AT_REMOVEDIR);
			}
		}
		if (!seen)
			return;
	}
}

void share_retire(const struct config *cfg, const struct sandbox *sb, bool drop_workspace)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 32];
	int dfd, r;
	pid_t child;

	if (share_instance_dir(cfg, sb->instance_id, dir, sizeof(dir)) != 0)
		return;
	snprintf(p, sizeof(p), "%s/sandbox.json", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/.sandbox.json.tmp", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/current", dir);
	unlink(p); /* retired: the run it named now ages out like any other */
	/* A kept workspace is its image, unmounted (`mount -o loop` reads it again); the
	 * loop device goes with the mount. */
	snprintf(p, sizeof(p), "%s/workspace", dir);
	if (workspace_mounted(p) == 1 && (r = workspace_unmount(p)) != 0)
		log_warn("workspace not unmounted", "instance=%s error=%s", log_q(sb->instance_id),
			 log_q(strerror(-r)));
	if (!drop_workspace) {
		rmdir(dir);
		return;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return;
	/* A workspace can be deep and large: delete it in a child, off the event loop. */
	child = fork();
	if (child == 0) {
		int ws = openat(dfd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		unlinkat(dfd, "workspace.img", 0);
		if (ws >= 0) {
			rmtree_at(ws, 0);
			close(ws);
		}
		unlinkat(dfd, "workspace", AT_REMOVEDIR);
		rmdir(dir);
		_exit(0);
	}
	close(dfd);
	if (child < 0)
		log_warn("workspace left behind", "instance=%s reason=%s", log_q(sb->instance_id),
			 "\"cannot fork a deleting child\"");
}

void share_reap_children(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}
