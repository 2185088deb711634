/* workspace.h: a sandbox's workspace as a filesystem of its own, so that its workload can
 * fill only its own disk budget: an ext4 image of exactly that size, preallocated, written by
 * agenticd itself (it runs no external program), attached to a loop device and mounted. */
#ifndef AGENTIC_MGMT_WORKSPACE_H
#define AGENTIC_MGMT_WORKSPACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>

/* Writes an empty ext4 filesystem over the first size bytes of fd, which must read as zeros
 * (a new file, fallocated or sparse): 4 KiB blocks, sparse superblocks, extents, dir_index,
 * no checksums, a journal from LIMIT_DISK_JOURNAL_BYTES up, no blocks reserved for root. Its
 * root directory (and lost+found) belong to uid:gid, mode 0700. size is rounded down to whole
 * blocks. 0, -EINVAL (size outside LIMIT_DISK_MIN_BYTES..LIMIT_DISK_MAX_BYTES) or -errno. */
int workspace_format(int fd, uint64_t size, uint32_t uid, uint32_t gid);

/* Attaches the image to a free loop device (detached again by the kernel once unmounted) and
 * mounts it at dir, nosuid and nodev. 0, or -errno with what failed in err. */
int workspace_mount(const char *image, const char *dir, char *err, size_t err_size);

/* 1 when dir is a mount point (its device differs from its parent's), 0 when not, -errno. */
int workspace_mounted(const char *dir);

/* Lazily unmounts dir (the loop device goes with the last user). 0, or -errno (-EINVAL: not
 * a mount point). */
int workspace_unmount(const char *dir);

/* What a killed agenticd may leave: calls fn for each mount whose mount point lies below dir
 * (in this process's mount namespace), with the mount point and its device; fn's non-zero
 * answer stops the walk and is returned. -errno when mountinfo cannot be read. */
int workspace_each_mount(const char *dir, int (*fn)(void *ctx, const char *point,
						    unsigned major, unsigned minor), void *ctx);
/* The file behind loop device major:minor (*deleted: unlinked since). -ENODEV: not a loop
 * device; -ENOENT (or -errno): none attached. */
int workspace_loop_backing(unsigned major, unsigned minor, char *path, size_t size,
			   bool *deleted);
/* Calls fn for each attached loop device: its node (/dev/loopN) and its backing file. */
int workspace_each_loop(int (*fn)(void *ctx, const char *dev, const char *backing,
				  bool deleted), void *ctx);
/* LOOP_CLR_FD: detaches the device, or, while it is still in use (a mount), only marks it to
 * detach with its last user. 0 or -errno. */
int workspace_loop_detach(const char *dev);

#endif
