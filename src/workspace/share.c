/* share.c: the agentshare's instances/<id>/: the sandbox record (atomic write, read back), the
 * workspace image and its mount, and retiring an instance (share.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json/json.h"
#include "workspace/host.h"
#include "sandbox/posture.h"
#include "transcript/runlog.h"
#include "workspace/share.h"
#include "workspace/workspace.h"

static pid_t deleting[LIMIT_WORKSPACE_DELETERS]; /* the workspace-deleting children running */

int share_make(const struct config *cfg, const struct sandbox *sb, char *err, size_t err_size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	if (host_mkdirs(dir, 0700) != 0)
		r = -errno;
	if (r == 0 && (r = host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) == 0 &&
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
	int r = host_instance_dir(cfg, id, dir, sizeof(dir));

	if (r == 0 && (snprintf(ws, size, "%s/workspace", dir) >= (int)size ||
		       snprintf(img, size, "%s/workspace.img", dir) >= (int)size))
		r = -ENAMETOOLONG;
	return r;
}

/* Makes the image: room for it (preallocated, so a full workspace never takes more), for
 * the transcript budgets (the new sandbox's and what the others may still write, never
 * preallocated: counted) and the last 1/20 of the filesystem (metrics files, spills), then
 * the filesystem. */
static int make_image(const char *img, uint64_t bytes, uint64_t transcripts,
		      const struct config *cfg, char *err, size_t err_size)
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
	    (uint64_t)vfs.f_bavail * vfs.f_frsize < bytes + transcripts +
	    (uint64_t)vfs.f_blocks * vfs.f_frsize / 20) {
		snprintf(err, err_size, "the agentshare has no room for a workspace of %llu bytes "
			 "(disk_bytes), %llu bytes of transcript budgets (transcript_bytes, with "
			 "what other sandboxes may still write) and its last 1/20 (%llu bytes "
			 "available)", (unsigned long long)bytes, (unsigned long long)transcripts,
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
	/* a VM's image is its guest's disk: never mounted on the host as well */
	if ((r = make_image(img, sb->disk_bytes, sandbox_transcript_budget(sb) +
			    transcript_owed(sb), cfg, err, err_size)) == 0 && !sb->vm &&
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

	if (r != 0 || lstat(img, &st) != 0 || sb->vm)
		return 0; /* no image: a workspace made before images, a plain directory; a VM's
			   * is its guest's disk */
	if ((r = workspace_mounted(ws)) != 0) {
		if (r < 0)
			snprintf(err, err_size, "cannot check the workspace mount %s: %s", ws,
				 strerror(-r));
		return r < 0 ? r : 0;
	}
	return workspace_mount(img, ws, err, err_size) == 0 ? 1 : -EIO;
}

/* The instance id of path when it is <instances>/<id>/<leaf>, else NULL. */
static const char *instance_of(const char *instances, const char *path, const char *leaf,
			       char id[SB_ID_BYTES])
{
	size_t n = strlen(instances), k;
	const char *rest, *slash;

	if (strncmp(path, instances, n) != 0 || path[n] != '/')
		return NULL;
	rest = path + n + 1;
	if (!(slash = strchr(rest, '/')) || strcmp(slash + 1, leaf) != 0 ||
	    (k = (size_t)(slash - rest)) == 0 || k >= SB_ID_BYTES || rest[0] == '.')
		return NULL;
	memcpy(id, rest, k);
	id[k] = '\0';
	return id;
}

/* A sandbox agenticd tracks has its record: an instance without one is no live sandbox's. */
static bool has_record(const char *instances, const char *id)
{
	char p[LIMIT_PATH_BYTES + SB_ID_BYTES + 16];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s/sandbox.json", instances, id);
	return lstat(p, &st) == 0 || errno != ENOENT;
}

/* A workspace mounted for no sandbox: unmounted when its device is a loop device backed by
 * that instance's own workspace.img; with its image gone, its empty mount point goes too. */
static int sweep_mount(void *ctx, const char *point, unsigned major, unsigned minor)
{
	const char *instances = ctx;
	char id[SB_ID_BYTES], img[LIMIT_PATH_BYTES + 32], want[LIMIT_PATH_BYTES + SB_ID_BYTES + 32];
	bool deleted;
	int r;

	if (!instance_of(instances, point, "workspace", id) || has_record(instances, id) ||
	    workspace_loop_backing(major, minor, img, sizeof(img), &deleted) != 0)
		return 0;
	snprintf(want, sizeof(want), "%s/%s/workspace.img", instances, id);
	if (strcmp(img, want) != 0)
		return 0;
	if ((r = workspace_unmount(point)) != 0) {
		log_warn("recovery: workspace left mounted", "instance=%s error=%s", log_q(id),
			 log_q(strerror(-r)));
		return 0;
	}
	log_info("recovery: workspace of no sandbox unmounted", "instance=%s image=%s", log_q(id),
		 deleted ? "deleted" : "kept");
	if (deleted && rmdir(point) == 0) {
		snprintf(want, sizeof(want), "%s/%s", instances, id);
		rmdir(want);
	}
	return 0;
}

/* A loop device still attached to a deleted workspace image of no sandbox's. */
static int sweep_loop(void *ctx, const char *dev, const char *backing, bool deleted)
{
	const char *instances = ctx;
	char id[SB_ID_BYTES];
	int r;

	if (!deleted || !instance_of(instances, backing, "workspace.img", id) ||
	    has_record(instances, id))
		return 0;
	r = workspace_loop_detach(dev);
	log_info("recovery: loop device of a deleted workspace detached", "instance=%s device=%s "
		 "error=%s", log_q(id), log_q(dev), log_q(r ? strerror(-r) : "none"));
	return 0;
}

void share_sweep_workspaces(const struct config *cfg)
{
	char instances[LIMIT_PATH_BYTES];

	if ((size_t)snprintf(instances, sizeof(instances), "%s/instances", cfg->agentshare_root) >=
	    sizeof(instances))
		return;
	workspace_each_mount(instances, sweep_mount, instances);
	workspace_each_loop(sweep_loop, instances);
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
			 LIMIT_SANDBOX_MOUNT_BYTES + 8192 + 2 * EGRESS_POLICY_BYTES];
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 32], tmp[LIMIT_PATH_BYTES + 32];
	struct buf b;
	struct json_writer w;
	int fd, r;
	ssize_t n;

	if ((r = host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir))) != 0)
		return r;
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "name");
	json_str_write(&w, sb->name);
	json_key(&w, "agent_id");
	json_str_write(&w, sb->agent_id);
	json_key(&w, "pool");
	json_bool_write(&w, sb->pool);
	json_key(&w, "claimed");
	json_bool_write(&w, sb->claimed);
	/* a claim's env stays out of every agentshare file (its values may be credentials): a
	 * restarted agenticd knows it no more, and the init keeps what it was given */
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
	json_key(&w, "transcript_bytes");
	json_int_write(&w, (int64_t)sb->transcript_bytes);
	json_key(&w, "writable_root");
	json_bool_write(&w, sb->writable_root);
	json_key(&w, "runtime");
	json_str_write(&w, sb->vm ? "vm" : "docker");
	write_strrun(&w, "cmd", sb->cmd, sb->cmd_len);
	write_strrun(&w, "labels", sb->labels, sb->labels_len);
	write_strrun(&w, "mounts", sb->mounts, sb->mounts_len);
	json_key(&w, "mount_ro");
	json_int_write(&w, sb->mount_ro);
	json_key(&w, "posture");
	posture_record_write(&w, &sb->posture);
	/* the policy's normalised text ("" for none), so a restarted agenticd enforces it */
	json_key(&w, "egress");
	json_str_write(&w, sb->egress_json);
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
			 LIMIT_SANDBOX_MOUNT_BYTES * 2 + 16384 + 2 * EGRESS_POLICY_BYTES];
	static struct egress_policy pol;
	static struct json_token tok[2048];
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 16];
	struct json_doc doc;
	int64_t v;
	bool bv;
	uint16_t npairs;
	ssize_t n;
	int fd, r, pt;

	if ((r = host_instance_dir(cfg, id, dir, sizeof(dir))) != 0)
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
	sb->vm = json_str_eq(&doc, json_obj_get(&doc, 0, "runtime"), "vm");
	if (json_int(&doc, json_obj_get(&doc, 0, "created_ms"), &v) == 0)
		sb->created_ms = v;
	if (json_int(&doc, json_obj_get(&doc, 0, "ready_ms"), &v) == 0)
		sb->ready_ms = v;
	if (json_int(&doc, json_obj_get(&doc, 0, "mount_ro"), &v) == 0)
		sb->mount_ro = (uint32_t)v;
	if (json_int(&doc, json_obj_get(&doc, 0, "disk_bytes"), &v) == 0 && v > 0)
		sb->disk_bytes = (uint64_t)v;
	if (json_int(&doc, json_obj_get(&doc, 0, "transcript_bytes"), &v) == 0 && v > 0)
		sb->transcript_bytes = (uint64_t)v;
	if (read_strrun(&doc, json_obj_get(&doc, 0, "cmd"), sb->cmd, &sb->cmd_len,
			sizeof(sb->cmd), &sb->ncmd) != 0 ||
	    read_strrun(&doc, json_obj_get(&doc, 0, "labels"), sb->labels, &sb->labels_len,
			sizeof(sb->labels), &npairs) != 0 ||
	    read_strrun(&doc, json_obj_get(&doc, 0, "mounts"), sb->mounts, &sb->mounts_len,
			sizeof(sb->mounts), &sb->nmounts) != 0)
		return ERR_PARSE;
	sb->nlabels = npairs / 2;
	sb->nmounts /= 2;
	/* a record from before warm sandboxes: its container was made with its name */
	if (json_str(&doc, json_obj_get(&doc, 0, "agent_id"), sb->agent_id,
		     sizeof(sb->agent_id)) <= 0)
		snprintf(sb->agent_id, sizeof(sb->agent_id), "%s", sb->name);
	if (json_bool(&doc, json_obj_get(&doc, 0, "pool"), &bv) == 0)
		sb->pool = bv;
	if (json_bool(&doc, json_obj_get(&doc, 0, "claimed"), &bv) == 0)
		sb->claimed = bv;
	sb->claim_env_len = 0;
	sb->nclaim_env = 0;
	/* a record from before postures has none: T0 until the engine's view is read, and its
	 * request (env) is gone, so nothing is known of it at create */
	if ((pt = json_obj_get(&doc, 0, "posture")) >= 0 &&
	    posture_record_read(&doc, pt, &sb->posture) != 0)
		return ERR_PARSE;
	/* a record from before egress policies has none; one that no longer reads as a policy
	 * leaves the sandbox with none, egress closed: it is not opened on a guess */
	sb->egress_json[0] = '\0';
	if ((pt = json_obj_get(&doc, 0, "egress")) >= 0 &&
	    (json_str(&doc, pt, sb->egress_json, sizeof(sb->egress_json)) < 0 ||
	     (sb->egress_json[0] && egress_policy_parse(sb->egress_json, strlen(sb->egress_json),
							&pol, NULL, 0) != 0))) {
		sb->egress_json[0] = '\0';
		log_warn("sandbox.json egress policy unreadable; egress off", "name=%s",
			 log_q(sb->name));
	}
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

	if (host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir)) != 0)
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
		int ws;

		/* nothing of agenticd's but dfd: a socket of an egress worker held here would keep
		 * its EOF from it for as long as the deletion runs */
		if (dfd > 3)
			syscall(SYS_close_range, 3, dfd - 1, 0);
		syscall(SYS_close_range, dfd + 1, ~0u, 0);
		ws = openat(dfd, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

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
	for (uint32_t i = 0; child > 0 && i < LIMIT_WORKSPACE_DELETERS; i++)
		if (!deleting[i]) {
			deleting[i] = child;
			break;
		}
}

static void deleter_done(pid_t pid)
{
	for (uint32_t i = 0; i < LIMIT_WORKSPACE_DELETERS; i++)
		if (deleting[i] == pid)
			deleting[i] = 0;
}

void share_reap_children(void)
{
	pid_t pid;

	while ((pid = waitpid(-1, NULL, WNOHANG)) > 0)
		deleter_done(pid);
}

int share_wait_deleting(int64_t ms)
{
	int64_t until = clock_mono_ms() + ms;
	uint32_t left;

	do {
		left = 0;
		for (uint32_t i = 0; i < LIMIT_WORKSPACE_DELETERS; i++) {
			pid_t pid = deleting[i];

			if (pid && waitpid(pid, NULL, WNOHANG) == 0)
				left++;
			else if (pid)
				deleting[i] = 0;
		}
		if (left)
			usleep(10000);
	} while (left && clock_mono_ms() < until);
	return (int)left;
}
