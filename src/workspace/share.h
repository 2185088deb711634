/* share.h: the agentshare's instances/<id>/: the instance directory and its workspace (an
 * ext4 image on a loop mount), made, mounted again, retired. The directory's path is
 * host_instance_dir (host.h); the sandbox record in it (sandbox.json) is sandbox.h's. An
 * instance is named by its id (a uuid7, SB_ID_BYTES with its NUL). */
#ifndef AGENTIC_MGMT_SHARE_H
#define AGENTIC_MGMT_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"

/* The instance dir (0700), then, once the record is written, its workspace: a crash between
 * the two leaves an empty dir, which start-up sweeps. The workspace is workspace.img, an ext4
 * image of disk_bytes (preallocated; -ENOSPC when the agentshare cannot hold it, transcripts
 * (the sandbox's transcript budget with what the other sandboxes' budgets still allow them to
 * write) and its last 1/20), mounted on workspace/ unless vm (a VM's image is its guest's
 * disk; the mount point a root-owned mode-0 directory when unmounted); its root belongs to
 * the workload uid. On failure nothing of it is left. */
int share_make(const struct config *cfg, const char *id, char *err, size_t err_size);
int share_make_workspace(const struct config *cfg, const char *id, uint64_t disk_bytes, bool vm,
			 uint64_t transcripts, char *err, size_t err_size);
/* Mounts a kept sandbox's workspace image again when it is not mounted (after a reboot): 1
 * when it mounted it, 0 when there was nothing to do (mounted, or a plain directory from
 * before images), or -errno with err. */
int share_mount_workspace(const struct config *cfg, const char *id, bool vm, char *err,
			  size_t err_size);
void share_sweep_empty(const struct config *cfg);
/* Start-up, after the records are settled: what a killed agenticd left of workspaces. A mount
 * at instances/<id>/workspace of an instance with no record whose device is a loop device
 * backed by instances/<id>/workspace.img is unmounted (its empty mount point removed when the
 * image is gone); a loop device backed by such an image, deleted, is detached. Nothing else
 * is touched: no other mount, no loop device of another file. */
void share_sweep_workspaces(const struct config *cfg);
/* Deletes the instance's record, unmounts its workspace and, when drop_workspace, deletes
 * the image (exe's applet workspace-rm does, a program of its own, off the loop:
 * workspace_rm.c); the instance dir goes when nothing else is left in it. A kept workspace is
 * its image. */
void share_retire(const struct config *cfg, const char *exe, const char *id,
		  bool drop_workspace);
/* Reaps the workspace-deleting children (SIGCHLD). */
void share_reap_children(void);
/* At the stop: waits up to ms for the workspace-deleting children; how many still run. */
int share_wait_deleting(int64_t ms);

#endif
