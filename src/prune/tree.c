/* tree.c: measures or removes one run directory with fd-relative calls, one fd at a time. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "prune/prune.h"

/* The kernel's struct statx (include/uapi/linux/stat.h). musl 1.2.3 declares neither the
 * struct nor the call, and <linux/stat.h> cannot sit next to its <sys/stat.h> (both define
 * the S_IF* macros), so the ABI is restated here; it only ever grows at the end. */
struct kstatx_ts {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};

struct kstatx {
	uint32_t stx_mask;
	uint32_t stx_blksize;
	uint64_t stx_attributes;
	uint32_t stx_nlink;
	uint32_t stx_uid;
	uint32_t stx_gid;
	uint16_t stx_mode;
	uint16_t spare0;
	uint64_t stx_ino;
	uint64_t stx_size;
	uint64_t stx_blocks;
	uint64_t stx_attributes_mask;
	struct kstatx_ts stx_atime, stx_btime, stx_ctime, stx_mtime;
	uint32_t stx_rdev_major, stx_rdev_minor;
	uint32_t stx_dev_major, stx_dev_minor;
	uint64_t stx_mnt_id;
	uint64_t spare[13];
};

_Static_assert(sizeof(struct kstatx) == 256, "struct statx is 256 bytes");

#define KSTATX_TYPE 0x1u
#define KSTATX_MTIME 0x40u
#define KSTATX_INO 0x100u
#define KSTATX_BLOCKS 0x400u
#define KSTATX_MNT_ID 0x1000u

#define OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

int prune_stat_at(int dirfd, const char *name, int flags, struct prune_stat *out)
{
	struct kstatx sx;
	unsigned mask = KSTATX_TYPE | KSTATX_MTIME | KSTATX_INO | KSTATX_BLOCKS | KSTATX_MNT_ID;

	if (syscall(SYS_statx, dirfd, name, flags | AT_STATX_DONT_SYNC, mask, &sx) != 0) {
		memset(out, 0, sizeof(*out));
		return -errno;
	}
	out->mode = sx.stx_mode;
	out->ino = sx.stx_ino;
	out->blocks = sx.stx_blocks;
	out->mtime_sec = sx.stx_mtime.tv_sec;
	out->mtime_nsec = sx.stx_mtime.tv_nsec;
	out->dev_major = sx.stx_dev_major;
	out->dev_minor = sx.stx_dev_minor;
	out->mnt_id = (sx.stx_mask & KSTATX_MNT_ID) ? sx.stx_mnt_id : 0;
	return 0;
}

void prune_dir_init(struct prune_dir *d, int fd, uint8_t *buf, size_t size)
{
	d->fd = fd;
	d->buf = buf;
	d->size = size;
	d->len = 0;
	d->off = 0;
	d->pos = 0;
}

int prune_dir_next(struct prune_dir *d, struct prune_dirent *e)
{
	for (;;) {
		const struct dirent64_raw *k;
		const char *name;

		if (d->off >= d->len) {
			long n = syscall(SYS_getdents64, d->fd, d->buf, d->size);
			if (n < 0)
				return -errno;
			if (n == 0)
				return 0;
			d->len = n;
			d->off = 0;
		}
		k = (const struct dirent64_raw *)(d->buf + d->off);
		d->off += k->reclen;
		e->pos = d->pos;
		d->pos = k->off;
		name = k->name;
		if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0')))
			continue;
		e->name = name;
		e->ino = k->ino;
		e->type = k->type;
		e->next = k->off;
		return 1;
	}
}

int prune_dir_seek(struct prune_dir *d, int64_t pos)
{
	if (lseek(d->fd, pos, SEEK_SET) < 0)
		return -errno;
	d->len = 0;
	d->off = 0;
	d->pos = pos;
	return 0;
}

static int fail(struct prune_walk *w, int fd, const char *op, const char *name, int code)
{
	char proc[32];
	ssize_t n;

	w->fail_op = op;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	n = readlink(proc, w->fail_dir, sizeof(w->fail_dir) - 1);
	w->fail_dir[n > 0 ? n : 0] = '\0';
	snprintf(w->fail_name, sizeof(w->fail_name), "%s", name);
	close(fd);
	return code;
}

/* Same filesystem and same mount as the run: anything else is a mount point (a bind mount
 * keeps st_dev, so the mount id is what tells it apart) or a subvolume, never crossed. */
static bool same_mount(const struct prune_walk *w, const struct prune_stat *st)
{
	if (st->dev_major != w->dev_major || st->dev_minor != w->dev_minor)
		return false;
	return st->mnt_id == w->mnt_id;
}

/* Removes the emptied child `name` of fd. ENOENT (someone else removed it) is success. */
static int rmdir_child(int fd, const char *name)
{
	if (unlinkat(fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT)
		return -errno;
	return 0;
}

/* A non-directory: count it, remove it when asked. Returns 1 when it turned out to be a
 * directory after all (the entry was replaced since it was listed). */
static int leaf(struct prune_walk *w, int fd, const char *name)
{
	struct prune_stat st;
	int r = prune_stat_at(fd, name, AT_SYMLINK_NOFOLLOW, &st);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if (S_ISDIR(st.mode))
		return 1;
	if (!same_mount(w, &st))
		return PRUNE_MOUNT;
	if (w->remove && unlinkat(fd, name, 0) != 0) {
		if (errno == ENOENT)
			return 0;
		return errno == EISDIR ? 1 : -errno;
	}
	w->bytes += st.blocks * 512u;
	return 0;
}

/* The emptied child (inode `pending`) is met again: remove it. */
static int rmdir_pending(int fd, const char *name, uint64_t *pending)
{
	int r = rmdir_child(fd, name);

	if (r == 0)
		*pending = 0;
	return r;
}

/* Where a walk is: the directory open (fd, its listing), how deep, and what is owed. */
struct walk_pos {
	int fd;
	struct prune_dir dir;
	uint32_t depth;
	uint64_t pending; /* inode of the child just emptied, removed when met again */
	bool seeked;      /* this listing was resumed mid-way: sweep once from 0 at its end */
};

/* The listing of pos's directory ended below the top: back up to its parent, resuming the
 * parent's listing. 0, or what prune_tree_walk returns (the fd closed). */
static int climb(struct prune_walk *w, struct walk_pos *pos)
{
	struct prune_stat st;
	int r, pfd = openat(pos->fd, "..", OPEN_DIR);

	if (pfd < 0)
		return fail(w, pos->fd, "climb", "..", -errno);
	r = prune_stat_at(pfd, "", AT_EMPTY_PATH, &st);
	if (r < 0 || st.ino != w->stack[pos->depth - 1].ino || !same_mount(w, &st)) {
		close(pfd);
		return fail(w, pos->fd, "climb", "..", r < 0 ? r : PRUNE_MOVED);
	}
	close(pos->fd);
	pos->fd = pfd;
	pos->pending = w->stack[pos->depth].ino;
	pos->depth--;
	prune_dir_init(&pos->dir, pos->fd, w->dents, w->dents_size);
	r = prune_dir_seek(&pos->dir, w->stack[pos->depth].resume);
	if (r < 0)
		return fail(w, pos->fd, "seek", ".", r);
	pos->seeked = w->remove;
	return 0;
}

/* Entry e of pos's directory was listed as a directory: descend into it; or remove it when
 * it is the emptied child; or, replaced since by something else, take that as a leaf. 0, or
 * what prune_tree_walk returns (the fd closed). */
static int enter(struct prune_walk *w, struct walk_pos *pos, const struct prune_dirent *e)
{
	struct prune_stat st;
	int r, cfd = openat(pos->fd, e->name, OPEN_DIR);

	if (cfd < 0) {
		r = -errno;
		if (r == -ENOENT)
			return 0;
		if (r == -ENOTDIR || r == -ELOOP) {
			/* Replaced by a symlink or a file since it was listed: remove that
			 * instead, never follow it. */
			r = leaf(w, pos->fd, e->name);
			if (r == 0)
				return 0;
			r = r < 0 ? r : PRUNE_MOVED;
		}
		return fail(w, pos->fd, "open", e->name, r);
	}
	r = prune_stat_at(cfd, "", AT_EMPTY_PATH, &st);
	if (r < 0 || !same_mount(w, &st)) {
		close(cfd);
		return fail(w, pos->fd, "open", e->name, r < 0 ? r : PRUNE_MOUNT);
	}
	if (w->remove && pos->pending && st.ino == pos->pending) {
		/* The emptied child, listed under another d_ino (some filesystems do
		 * that): remove it by name now. */
		close(cfd);
		r = rmdir_pending(pos->fd, e->name, &pos->pending);
		return r < 0 ? fail(w, pos->fd, "rmdir", e->name, r) : 0;
	}
	if (pos->depth + 1 >= w->stack_cap) {
		close(cfd);
		return fail(w, pos->fd, "descend", e->name, ERR_LIMIT);
	}
	/* Removing: resume at the child itself, so that it is met (and removed) once emptied.
	 * Measuring: resume after it. */
	w->stack[pos->depth].resume = w->remove ? e->pos : e->next;
	pos->depth++;
	w->stack[pos->depth].ino = st.ino;
	w->bytes += st.blocks * 512u;
	close(pos->fd);
	pos->fd = cfd;
	prune_dir_init(&pos->dir, pos->fd, w->dents, w->dents_size);
	pos->seeked = false;
	pos->pending = 0;
	return 0;
}

int prune_tree_walk(struct prune_walk *w, int fd)
{
	struct walk_pos pos = { .fd = fd };
	struct prune_stat st;
	struct prune_dirent e;
	int r;

	w->bytes = 0;
	w->fail_op = NULL;
	w->fail_dir[0] = w->fail_name[0] = '\0';
	r = prune_stat_at(fd, "", AT_EMPTY_PATH, &st);
	if (r < 0)
		return fail(w, fd, "stat", ".", r);
	if (st.ino != w->ino || !same_mount(w, &st))
		return fail(w, fd, "stat", ".", PRUNE_MOVED);
	if (w->stack_cap == 0)
		return fail(w, fd, "descend", ".", ERR_LIMIT);
	w->stack[0].ino = st.ino;
	w->bytes += st.blocks * 512u;
	prune_dir_init(&pos.dir, fd, w->dents, w->dents_size);

	for (;;) {
		r = prune_dir_next(&pos.dir, &e);
		if (r < 0)
			return fail(w, pos.fd, "list", ".", r);
		if (r == 0) {
			if (pos.seeked) {
				/* Positions are stable on the filesystems we know; the sweep makes
				 * sure nothing was skipped where deletions moved them. */
				r = prune_dir_seek(&pos.dir, 0);
				if (r < 0)
					return fail(w, pos.fd, "seek", ".", r);
				pos.seeked = false;
				continue;
			}
			if (pos.depth == 0)
				break;
			if ((r = climb(w, &pos)) != 0)
				return r;
			continue;
		}
		if (e.type != DT_DIR) {
			r = leaf(w, pos.fd, e.name);
			if (r < 0)
				return fail(w, pos.fd, w->remove ? "unlink" : "stat", e.name, r);
			if (r == 0)
				continue;
		}
		if (w->remove && pos.pending && e.ino == pos.pending) {
			r = rmdir_pending(pos.fd, e.name, &pos.pending);
			if (r < 0)
				return fail(w, pos.fd, "rmdir", e.name, r);
			continue;
		}
		if ((r = enter(w, &pos, &e)) != 0)
			return r;
	}
	close(pos.fd);
	return 0;
}
