/* share.c: the agentshare's instances/<id>/: the instance directory, the workspace image and
 * its mount, and retiring an instance (share.h). The record in it is sandbox/record.c's. */
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
#include "workspace/share.h"
#include "workspace/workspace.h"

static pid_t deleting[LIMIT_WORKSPACE_DELETERS]; /* the workspace-deleting children running */

int share_make(const struct config *cfg, const char *id, char *err, size_t err_size)
{
	char dir[LIMIT_PATH_BYTES];
	int r = 0;

	snprintf(dir, sizeof(dir), "%s/instances", cfg->agentshare_root);
	if (host_mkdirs(dir, 0700) != 0)
		r = -errno;
	if (r == 0 && (r = host_instance_dir(cfg, id, dir, sizeof(dir))) == 0 &&
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

int share_make_workspace(const struct config *cfg, const char *id, uint64_t disk_bytes, bool vm,
			 uint64_t transcripts, char *err, size_t err_size)
{
	char ws[LIMIT_PATH_BYTES + 16], img[LIMIT_PATH_BYTES + 16];
	int r = workspace_paths(cfg, id, ws, img, sizeof(ws));

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
	if ((r = make_image(img, disk_bytes, transcripts, cfg, err, err_size)) == 0 && !vm &&
	    (r = workspace_mount(img, ws, err, err_size)) != 0)
		unlink(img);
	if (r != 0)
		rmdir(ws);
	return r;
}

int share_mount_workspace(const struct config *cfg, const char *id, bool vm, char *err,
			  size_t err_size)
{
	char ws[LIMIT_PATH_BYTES + 16], img[LIMIT_PATH_BYTES + 16];
	struct stat st;
	int r = workspace_paths(cfg, id, ws, img, sizeof(ws));

	if (r != 0 || lstat(img, &st) != 0 || vm)
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

/* `agentic workspace-rm DIR` with fd 3 the instance directory (DIR's), or -1. vfork and exec,
 * not fork: a fork of agenticd makes every page it writes next a copy-on-write fault, on the
 * next create's path (about 200 of them, milliseconds on a host whose page faults are slow). */
static pid_t deleter_spawn(const char *exe, int dfd, const char *dir)
{
	char *const argv[] = { "agentic", "workspace-rm", (char *)dir, NULL };
	char *const envp[] = { NULL };
	pid_t pid = vfork();

	if (pid == 0) {
		int d = fcntl(dfd, F_DUPFD, 10);

		/* nothing of agenticd's but the directory: a socket of an egress worker held here
		 * would keep its EOF from it for as long as the deletion runs */
		if (d >= 0 && dup2(d, 3) == 3) {
			syscall(SYS_close_range, 4, ~0u, 0);
			execve(exe, argv, envp);
		}
		_exit(127);
	}
	return pid;
}

void share_retire(const struct config *cfg, const char *exe, const char *id,
		  bool drop_workspace)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 32];
	int dfd, r;
	pid_t child;

	if (host_instance_dir(cfg, id, dir, sizeof(dir)) != 0)
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
		log_warn("workspace not unmounted", "instance=%s error=%s", log_q(id),
			 log_q(strerror(-r)));
	if (!drop_workspace) {
		rmdir(dir);
		return;
	}
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return;
	/* A workspace can be deep and large: delete it in a program of its own, off the loop. */
	child = deleter_spawn(exe, dfd, dir);
	close(dfd);
	if (child < 0)
		log_warn("workspace left behind", "instance=%s reason=%s", log_q(id),
			 "\"cannot start a deleting child\"");
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
