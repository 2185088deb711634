/* share.h: the agentshare's instances/<id>/: the sandbox record (sandbox.json) and the
 * workspace (an ext4 image on a loop mount), made, read back, retired. The directory itself is
 * host_instance_dir (host.h). */
#ifndef AGENTIC_MGMT_SHARE_H
#define AGENTIC_MGMT_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "sandbox/sandbox.h"

/* The instance dir (0700), then, once the record is written, its workspace: a crash between
 * the two leaves an empty dir, which start-up sweeps. The workspace is workspace.img, an ext4
 * image of sb->disk_bytes (preallocated; -ENOSPC when the agentshare cannot hold it, the
 * sandbox's transcript budget, what the other sandboxes' budgets still allow them to write,
 * and its last 1/20), mounted on workspace/ (a root-owned mode-0 directory when
 * unmounted); its root belongs to the workload uid. On failure nothing of it is left. */
int share_make(const struct config *cfg, const struct sandbox *sb, char *err, size_t err_size);
int share_make_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			 size_t err_size);
/* Mounts a kept sandbox's workspace image again when it is not mounted (after a reboot): 1
 * when it mounted it, 0 when there was nothing to do (mounted, or a plain directory from
 * before images), or -errno with err. */
int share_mount_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			  size_t err_size);
void share_sweep_empty(const struct config *cfg);
/* Start-up, after the records are settled: what a killed agenticd left of workspaces. A mount
 * at instances/<id>/workspace of an instance with no record whose device is a loop device
 * backed by instances/<id>/workspace.img is unmounted (its empty mount point removed when the
 * image is gone); a loop device backed by such an image, deleted, is detached. Nothing else
 * is touched: no other mount, no loop device of another file. */
void share_sweep_workspaces(const struct config *cfg);
/* sandbox.json (0600): temp file, fsync, rename, fsync of the directory. */
int share_write_record(const struct config *cfg, const struct sandbox *sb);
/* Deletes the instance's record, unmounts its workspace and, when drop_workspace, deletes
 * the image (in a child process, off the loop); the instance dir goes when nothing else is
 * left in it. A kept workspace is its image. */
void share_retire(const struct config *cfg, const struct sandbox *sb, bool drop_workspace);
/* Reads instances/<id>/sandbox.json into sb (fields it holds); 0, -ENOENT or ERR_PARSE. */
int share_read_record(const struct config *cfg, const char *id, struct sandbox *sb,
		      char *state, size_t state_size);
/* Calls fn for every instance id that has a sandbox.json. */
int share_each_record(const struct config *cfg, int (*fn)(void *ctx, const char *id), void *ctx);
/* Reaps the workspace-deleting children (SIGCHLD). */
void share_reap_children(void);
/* At the stop: waits up to ms for the workspace-deleting children; how many still run. */
int share_wait_deleting(int64_t ms);

#endif
