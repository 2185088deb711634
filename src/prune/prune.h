/* prune.h: the agentshare run-retention pruner (agentic-prune) and the parts it is built from:
 * a mountinfo parser, the lexical resolver for `current` links, and a tree walker that
 * measures or removes one run directory through fd-relative system calls only.
 *
 * Nothing here allocates: every table and buffer is the caller's, so the applet sizes them at
 * start-up and seals the allocator before it touches the tree. */
#ifndef AGENTIC_PRUNE_H
#define AGENTIC_PRUNE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Module codes, in ERR_RANGE_PRUNE (base.h); err_str() gives their text. */
#define PRUNE_OUTSIDE (ERR_RANGE_PRUNE - 1) /* a path leaves the agentshare root */
#define PRUNE_MOUNT (ERR_RANGE_PRUNE - 2)   /* a mount point (or another filesystem) inside a run */
#define PRUNE_MOVED (ERR_RANGE_PRUNE - 3)   /* a directory changed identity while being removed */

/* ---- mount points below the root ----
 * A set of root-relative paths ("instances/x/runs/run-1/mnt"), stored back to back in
 * caller storage. prune_mountinfo_finish() sorts it; only then may it be queried. */
struct prune_mounts {
	char *bytes;
	size_t bytes_len;
	size_t bytes_cap;
	uint32_t *off; /* start of each path in bytes */
	uint32_t n;
	uint32_t cap;
};

void prune_mounts_init(struct prune_mounts *m, char *bytes, size_t bytes_cap, uint32_t *off,
		       uint32_t cap);
/* True when some mount point is `rel` itself or lies below it (rel is root-relative). */
bool prune_mounts_below(const struct prune_mounts *m, const char *rel);

/* Parser for /proc/self/mountinfo, fed any number of bytes at a time. It keeps the mount
 * points (field 5, octal escapes like \040 undone) that lie strictly below `root` (absolute,
 * canonical, no trailing slash; the pointer must stay valid while feeding). */
struct prune_mountinfo {
	struct prune_mounts *out;
	const char *root;
	size_t root_len;
	uint32_t field;   /* index of the space-separated field being read */
	uint32_t esc_len; /* digits of an octal escape read so far (0: none pending) */
	uint32_t esc_val;
	size_t len;
	bool in_line; /* bytes seen since the last newline */
	int err;
	char path[LIMIT_PATH_BYTES];
};

void prune_mountinfo_init(struct prune_mountinfo *p, const char *root, struct prune_mounts *out);
/* 0, ERR_PARSE (a malformed escape or line) or ERR_LIMIT (a path longer than
 * LIMIT_PATH_BYTES, or the set is full). An error sticks: later calls return it. */
int prune_mountinfo_feed(struct prune_mountinfo *p, const void *data, size_t len);
/* Call at end of input: ERR_PARSE if the last line is cut short; sorts the set. */
int prune_mountinfo_finish(struct prune_mountinfo *p);

/* ---- the `current` link, read lexically ----
 * Resolves the text of a symlink found in directory `link_dir` (root-relative, "" for the root
 * itself) as the path it names, relative to the root: `.`, `..`, repeated and trailing
 * slashes are folded. An absolute target must start with `root` or `alt_root` (another
 * spelling of it, e.g. its canonical path; may be NULL). Returns 0 with the path in out ("" for
 * the root), PRUNE_OUTSIDE when it names something outside the root, ERR_LIMIT when out
 * (or a component count of LIMIT_PATH_BYTES/2) is too small. Symlinks inside the target are
 * not looked at; the applet also resolves the link through the kernel. */
int prune_link_resolve(const char *root, const char *alt_root, const char *link_dir,
		       const char *target, char *out, size_t out_size);

/* ---- directory listings ----
 * getdents64 into caller storage (readdir would allocate). "." and ".." are skipped. */
struct prune_dir {
	int fd;
	uint8_t *buf;
	size_t size;
	long len;
	long off;
	int64_t pos; /* directory position of the next entry */
};

struct prune_dirent {
	const char *name; /* valid until the next call */
	uint64_t ino;
	uint8_t type;     /* DT_* from <dirent.h>; DT_UNKNOWN when the filesystem does not say */
	int64_t pos;      /* seeking here lists this entry again */
	int64_t next;     /* seeking here lists the entries after it */
};

void prune_dir_init(struct prune_dir *d, int fd, uint8_t *buf, size_t size);
/* 1 with the next entry in e, 0 at the end, or a negative errno. */
int prune_dir_next(struct prune_dir *d, struct prune_dirent *e);
/* Continues the listing at a position an entry reported; 0 or a negative errno. */
int prune_dir_seek(struct prune_dir *d, int64_t pos);

/* ---- the tree walker ----
 * Measures (remove = false) or empties (remove = true) one run directory, given an open fd on
 * it. Holds one directory fd at a time whatever the depth: it descends with
 * openat(O_NOFOLLOW|O_DIRECTORY) and climbs back with openat(".."), checking at each step that
 * the directory reached is the one it left (st_ino against its own stack, st_dev and mount id
 * against the run's), so a rename or a symlink swapped in during the walk cannot take it
 * outside the run. Symlinks are removed, never followed. Entering another mount or filesystem
 * stops the walk with PRUNE_MOUNT. Bytes are disk usage, st_blocks*512, of every entry it
 * meets, the run directory included (what `du -s -l -B1` reports).
 *
 * It stops at the first failure and reports where: `fail_op` names the operation, `fail_dir`
 * the directory holding the entry (its path from /proc/self/fd, or "" when that is unknown),
 * `fail_name` the entry. The run directory itself is not removed: the caller does that from its
 * parent. */
struct prune_level {
	uint64_t ino;   /* this directory's inode */
	int64_t resume; /* where the listing of this directory resumes after its child */
};

struct prune_walk {
	struct prune_level *stack; /* depth limit = stack_cap */
	uint32_t stack_cap;
	uint8_t *dents; /* getdents64 buffer */
	size_t dents_size;
	bool remove;

	/* The run directory as the caller saw it; the walk refuses any other. */
	uint64_t dev_major, dev_minor, ino, mnt_id;

	/* Results. */
	uint64_t bytes;
	const char *fail_op;
	char fail_dir[LIMIT_PATH_BYTES];
	char fail_name[256];
};

/* Walks the directory open at fd (closed before return). 0, a negative errno, PRUNE_MOUNT,
 * PRUNE_MOVED, or ERR_LIMIT when the tree is deeper than stack_cap. */
int prune_tree_walk(struct prune_walk *w, int fd);

/* statx(2) through the raw system call (musl 1.2.3 has no wrapper): the fields the pruner
 * uses, in the kernel's layout. */
struct prune_stat {
	uint32_t mode;
	uint64_t ino;
	uint64_t blocks;
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint64_t mnt_id; /* 0 when the kernel does not report it */
};

/* flags: AT_* (AT_SYMLINK_NOFOLLOW, AT_EMPTY_PATH); 0 or a negative errno. */
int prune_stat_at(int dirfd, const char *name, int flags, struct prune_stat *out);

/* ---- the applet ---- */
extern const char prune_help[];
int prune_main(int argc, char **argv);

#endif
