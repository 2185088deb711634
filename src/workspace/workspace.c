/* workspace.c: the workspace filesystem: an ext4 image laid out here, a loop device, a mount.
 *
 * The layout is the plain one mke2fs makes without metadata_csum, 64bit, flex_bg or
 * resize_inode: every group of 32768 blocks starts with a superblock and the descriptor table
 * when sparse_super gives it one (groups 0, 1 and powers of 3, 5, 7), then its block bitmap,
 * inode bitmap and inode table, then data. Everything used in a group sits at its start, so
 * each bitmap is one run of set bits plus the padding past the group's end. Group 0 also
 * holds the journal (inode 8, one extent), the root directory and lost+found. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "base/base.h"
#include "base/be.h"
#include "workspace/workspace.h"

#define BS 4096u                /* block size */
#define BPG 32768u              /* blocks per group: one bitmap block's bits */
#define ISIZE 256u              /* inode size */
#define INODE_RATIO 16384u      /* bytes per inode, as mke2fs's default */
#define IPB (BS / ISIZE)        /* inodes per block */
#define ROOT_INO 2u
#define JOURNAL_INO 8u
#define LF_INO 11u              /* lost+found, the first non-reserved inode */
#define EXTRA_ISIZE 32u

/* feature bits (ext4 superblock) */
#define COMPAT_HAS_JOURNAL 0x4u
#define COMPAT_DIR_INDEX 0x20u
#define INCOMPAT_FILETYPE 0x2u
#define INCOMPAT_EXTENTS 0x40u
#define RO_SPARSE_SUPER 0x1u
#define RO_LARGE_FILE 0x2u
#define RO_DIR_NLINK 0x20u
#define RO_EXTRA_ISIZE 0x40u
#define INODE_EXTENTS_FL 0x80000u

_Static_assert(BS * 8u == BPG, "a group's blocks are one bitmap block's bits");
_Static_assert(LIMIT_DISK_MIN_BYTES >= 64u * BS, "the smallest image holds its metadata");

struct layout {
	uint32_t blocks, groups;
	uint32_t ipg, itb;      /* inodes per group, inode table blocks per group */
	uint32_t gdt;           /* descriptor table blocks */
	uint32_t jblocks;       /* journal blocks, 0: none */
};

static uint8_t blk[BS];

static void le16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void le32(uint8_t *p, uint32_t v)
{
	le16(p, v & 0xffff);
	le16(p + 2, v >> 16);
}

/* sparse_super: groups 0 and 1 and the powers of 3, 5 and 7 carry a superblock copy */
static bool has_super(uint32_t g)
{
	if (g <= 1)
		return true;
	for (uint64_t b = 3; b <= 7; b += 2) {
		uint64_t p = b;

		while (p < g)
			p *= b;
		if (p == g)
			return true;
	}
	return false;
}

static uint32_t group_start(uint32_t g)
{
	return g * BPG;
}

static uint32_t group_blocks(const struct layout *l, uint32_t g)
{
	return g + 1 < l->groups ? BPG : l->blocks - group_start(g);
}

/* The metadata blocks at a group's start. */
static uint32_t group_meta(const struct layout *l, uint32_t g)
{
	return (has_super(g) ? 1 + l->gdt : 0) + 2 + l->itb;
}

/* Blocks in use in group g, all at its start. */
static uint32_t group_used(const struct layout *l, uint32_t g)
{
	return group_meta(l, g) + (g == 0 ? l->jblocks + 2 : 0);
}

/* mke2fs's journal sizes for 4 KiB blocks (4, 16, 32, 64 MiB), none for small images. */
static uint32_t journal_blocks(uint32_t blocks)
{
	if ((uint64_t)blocks * BS < LIMIT_DISK_JOURNAL_BYTES)
		return 0;
	if (blocks < 32768)
		return 1024;
	if (blocks < 262144)
		return 4096;
	if (blocks < 1048576)
		return 8192;
	return 16384;
}

static int plan(uint64_t size, struct layout *l)
{
	if (size < LIMIT_DISK_MIN_BYTES || size > LIMIT_DISK_MAX_BYTES)
		return -EINVAL;
	l->blocks = (uint32_t)(size / BS);
	for (;;) {
		uint64_t inodes = (uint64_t)l->blocks * BS / INODE_RATIO;

		l->groups = (l->blocks + BPG - 1) / BPG;
		l->gdt = (l->groups * 32u + BS - 1) / BS;
		l->ipg = (uint32_t)((inodes + l->groups - 1) / l->groups);
		l->ipg = (l->ipg + IPB - 1) / IPB * IPB;
		if (l->ipg < IPB)
			l->ipg = IPB;
		l->itb = l->ipg / IPB;
		/* a last group too small for its own metadata is left out */
		if (l->groups > 1 && group_blocks(l, l->groups - 1) < group_meta(l, l->groups - 1) + 64) {
			l->blocks = group_start(l->groups - 1);
			continue;
		}
		break;
	}
	l->jblocks = journal_blocks(l->blocks);
	return group_used(l, 0) + 16 <= group_blocks(l, 0) ? 0 : -EINVAL;
}

static int put(int fd, const void *p, size_t n, uint64_t off)
{
	ssize_t w = pwrite(fd, p, n, (off_t)off);

	return w == (ssize_t)n ? 0 : w < 0 ? -errno : -EIO;
}

static int put_block(int fd, uint32_t block)
{
	return put(fd, blk, BS, (uint64_t)block * BS);
}

static void superblock(uint8_t *s, const struct layout *l, uint32_t g, uint32_t now,
		       const uint8_t uuid[16], const uint8_t seed[16], const uint8_t *jinode)
{
	uint64_t free_blocks = 0;

	for (uint32_t i = 0; i < l->groups; i++)
		free_blocks += group_blocks(l, i) - group_used(l, i);
	memset(s, 0, 1024);
	le32(s + 0x00, l->ipg * l->groups);              /* s_inodes_count */
	le32(s + 0x04, l->blocks);                       /* s_blocks_count_lo */
	le32(s + 0x0c, (uint32_t)free_blocks);           /* s_free_blocks_count_lo */
	le32(s + 0x10, l->ipg * l->groups - LF_INO);     /* s_free_inodes_count */
	le32(s + 0x18, 2);                               /* s_log_block_size: 1024 << 2 */
	le32(s + 0x1c, 2);                               /* s_log_cluster_size */
	le32(s + 0x20, BPG);                             /* s_blocks_per_group */
	le32(s + 0x24, BPG);                             /* s_clusters_per_group */
	le32(s + 0x28, l->ipg);                          /* s_inodes_per_group */
	le32(s + 0x30, now);                             /* s_wtime */
	le16(s + 0x36, 0xffff);                          /* s_max_mnt_count: no forced checks */
	le16(s + 0x38, 0xef53);                          /* s_magic */
	le16(s + 0x3a, 1);                               /* s_state: clean */
	le16(s + 0x3c, 1);                               /* s_errors: continue */
	le32(s + 0x40, now);                             /* s_lastcheck */
	le32(s + 0x4c, 1);                               /* s_rev_level: dynamic */
	le32(s + 0x54, LF_INO);                          /* s_first_ino */
	le16(s + 0x58, ISIZE);                           /* s_inode_size */
	le16(s + 0x5a, g);                               /* s_block_group_nr */
	le32(s + 0x5c, COMPAT_DIR_INDEX | (l->jblocks ? COMPAT_HAS_JOURNAL : 0));
	le32(s + 0x60, INCOMPAT_FILETYPE | INCOMPAT_EXTENTS);
	le32(s + 0x64, RO_SPARSE_SUPER | RO_LARGE_FILE | RO_DIR_NLINK | RO_EXTRA_ISIZE);
	memcpy(s + 0x68, uuid, 16);                      /* s_uuid */
	memcpy(s + 0x78, "workspace", 9);                /* s_volume_name */
	if (l->jblocks) {
		le32(s + 0xe0, JOURNAL_INO);             /* s_journal_inum */
		s[0xfd] = 1;                             /* s_jnl_backup_type: inode blocks */
		memcpy(s + 0x10c, jinode + 0x28, 60);    /* s_jnl_blocks[0..14]: i_block */
		memcpy(s + 0x10c + 15 * 4, jinode + 0x6c, 4); /* [15]: i_size_high */
		memcpy(s + 0x10c + 16 * 4, jinode + 0x04, 4); /* [16]: i_size */
	}
	memcpy(s + 0xec, seed, 16);                      /* s_hash_seed */
	s[0xfc] = 1;                                     /* s_def_hash_version: half_md4 */
	le32(s + 0x108, now);                            /* s_mkfs_time */
	le16(s + 0x15c, EXTRA_ISIZE);                    /* s_min_extra_isize */
	le16(s + 0x15e, EXTRA_ISIZE);                    /* s_want_extra_isize */
	le32(s + 0x160, 1);                              /* s_flags: signed directory hash */
}

/* One descriptor table block: the descriptors of groups first.. */
static void descriptors(const struct layout *l, uint32_t first)
{
	memset(blk, 0, BS);
	for (uint32_t g = first; g < l->groups && g < first + BS / 32; g++) {
		uint8_t *d = blk + (g - first) * 32;
		uint32_t meta = group_start(g) + (has_super(g) ? 1 + l->gdt : 0);

		le32(d + 0x00, meta);                             /* bg_block_bitmap */
		le32(d + 0x04, meta + 1);                         /* bg_inode_bitmap */
		le32(d + 0x08, meta + 2);                         /* bg_inode_table */
		le16(d + 0x0c, group_blocks(l, g) - group_used(l, g));
		le16(d + 0x0e, l->ipg - (g == 0 ? LF_INO : 0));   /* bg_free_inodes_count */
		le16(d + 0x10, g == 0 ? 2 : 0);                   /* bg_used_dirs_count */
	}
}

/* A bitmap block: bits [0, used) and [end, BPG) set. */
static void bitmap(uint32_t used, uint32_t end)
{
	memset(blk, 0, BS);
	for (uint32_t i = 0; i < BPG; i++)
		if (i < used || i >= end)
			blk[i / 8] |= (uint8_t)(1u << (i % 8));
}

static void inode(uint8_t *p, uint32_t mode, uint32_t uid, uint32_t gid, uint64_t size,
		  uint32_t links, uint32_t blocks, uint32_t now)
{
	le16(p + 0x00, mode);
	le16(p + 0x02, uid & 0xffff);
	le32(p + 0x04, (uint32_t)size);
	le32(p + 0x08, now);                    /* i_atime */
	le32(p + 0x0c, now);                    /* i_ctime */
	le32(p + 0x10, now);                    /* i_mtime */
	le16(p + 0x18, gid & 0xffff);
	le16(p + 0x1a, links);
	le32(p + 0x1c, blocks * (BS / 512));    /* i_blocks, in 512-byte units */
	le32(p + 0x6c, (uint32_t)(size >> 32)); /* i_size_high */
	le16(p + 0x78, uid >> 16);              /* l_i_uid_high */
	le16(p + 0x7a, gid >> 16);              /* l_i_gid_high */
	le16(p + 0x80, EXTRA_ISIZE);
}

static uint32_t dirent(uint8_t *p, uint32_t ino, uint32_t rec_len, const char *name)
{
	size_t n = strlen(name);

	le32(p, ino);
	le16(p + 4, rec_len);
	p[6] = (uint8_t)n;
	p[7] = 2; /* a directory */
	memcpy(p + 8, name, n);
	return rec_len;
}

/* The journal's superblock (jbd2, big-endian): empty and clean. */
static void journal_super(const struct layout *l, const uint8_t uuid[16])
{
	memset(blk, 0, BS);
	be32_put(blk + 0x00, 0xc03b3998u); /* h_magic */
	be32_put(blk + 0x04, 4);           /* h_blocktype: superblock v2 */
	be32_put(blk + 0x0c, BS);          /* s_blocksize */
	be32_put(blk + 0x10, l->jblocks);  /* s_maxlen */
	be32_put(blk + 0x14, 1);           /* s_first */
	be32_put(blk + 0x18, 1);           /* s_sequence */
	memcpy(blk + 0x30, uuid, 16);      /* s_uuid */
	be32_put(blk + 0x40, 1);           /* s_nr_users */
}

int workspace_format(int fd, uint64_t size, uint32_t uid, uint32_t gid)
{
	static uint8_t sb[1024], itable[BS];
	struct layout l;
	uint8_t uuid[16], seed[16];
	uint32_t now = (uint32_t)time(NULL), data0, root_blk, lf_blk, off;
	uint8_t *jin = itable + (JOURNAL_INO - 1) * ISIZE;
	int r;

	if ((r = plan(size, &l)) != 0)
		return r;
	if ((r = random_bytes(uuid, sizeof(uuid))) != 0 || (r = random_bytes(seed, sizeof(seed))) != 0)
		return r;
	uuid[6] = (uint8_t)((uuid[6] & 0x0f) | 0x40); /* a version 4 UUID */
	uuid[8] = (uint8_t)((uuid[8] & 0x3f) | 0x80);
	data0 = group_meta(&l, 0);
	root_blk = data0 + l.jblocks;
	lf_blk = root_blk + 1;

	/* reserved inodes: the root directory, the journal, lost+found */
	memset(itable, 0, sizeof(itable));
	inode(itable + (ROOT_INO - 1) * ISIZE, 040700, uid, gid, BS, 3, 1, now);
	le32(itable + (ROOT_INO - 1) * ISIZE + 0x28, root_blk);
	inode(itable + (LF_INO - 1) * ISIZE, 040700, uid, gid, BS, 2, 1, now);
	le32(itable + (LF_INO - 1) * ISIZE + 0x28, lf_blk);
	if (l.jblocks) {
		inode(jin, 0100600, 0, 0, (uint64_t)l.jblocks * BS, 1, l.jblocks, now);
		le32(jin + 0x20, INODE_EXTENTS_FL);
		le16(jin + 0x28, 0xf30a);       /* extent header: magic */
		le16(jin + 0x2a, 1);            /* entries */
		le16(jin + 0x2c, 4);            /* max */
		le32(jin + 0x34, 0);            /* the extent: file block 0 */
		le16(jin + 0x38, l.jblocks);    /* length */
		le32(jin + 0x3c, data0);        /* start */
	}

	for (uint32_t g = 0; g < l.groups; g++) {
		uint32_t start = group_start(g), meta = start + (has_super(g) ? 1 + l.gdt : 0);

		if (has_super(g)) {
			superblock(sb, &l, g, now, uuid, seed, jin);
			/* group 0's superblock sits 1024 bytes in, past the boot sector */
			if ((r = put(fd, sb, sizeof(sb), g == 0 ? 1024 : (uint64_t)start * BS)) != 0)
				return r;
			for (uint32_t k = 0; k < l.gdt; k++) {
				descriptors(&l, k * (BS / 32));
				if ((r = put_block(fd, start + 1 + k)) != 0)
					return r;
			}
		}
		bitmap(group_used(&l, g), group_blocks(&l, g));
		if ((r = put_block(fd, meta)) != 0)
			return r;
		bitmap(g == 0 ? LF_INO : 0, l.ipg);
		if ((r = put_block(fd, meta + 1)) != 0)
			return r;
	}
	if ((r = put(fd, itable, sizeof(itable), (uint64_t)(group_meta(&l, 0) - l.itb) * BS)) != 0)
		return r;
	if (l.jblocks) {
		journal_super(&l, uuid);
		if ((r = put_block(fd, data0)) != 0)
			return r;
	}
	memset(blk, 0, BS);
	off = dirent(blk, ROOT_INO, 12, ".");
	off += dirent(blk + off, ROOT_INO, 12, "..");
	dirent(blk + off, LF_INO, BS - off, "lost+found");
	if ((r = put_block(fd, root_blk)) != 0)
		return r;
	memset(blk, 0, BS);
	off = dirent(blk, LF_INO, 12, ".");
	dirent(blk + off, ROOT_INO, BS - off, "..");
	if ((r = put_block(fd, lf_blk)) != 0)
		return r;
	return fsync(fd) == 0 ? 0 : -errno;
}

/* ---- the loop device and the mount ---- */

static int loop_attach(int img, const char *image, char *dev, size_t dev_size, int *out)
{
	struct loop_config lc;
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC), r = -EBUSY;

	if (ctl < 0)
		return -errno;
	memset(&lc, 0, sizeof(lc));
	lc.fd = (uint32_t)img;
	lc.info.lo_flags = LO_FLAGS_AUTOCLEAR;
	snprintf((char *)lc.info.lo_file_name, sizeof(lc.info.lo_file_name), "%s", image);
	/* another process may take the free device between the two calls: ask again */
	for (int i = 0; i < LIMIT_WORKSPACE_LOOP_ATTEMPTS && r == -EBUSY; i++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE), fd;

		if (n < 0) {
			r = -errno;
			break;
		}
		snprintf(dev, dev_size, "/dev/loop%d", n);
		fd = open(dev, O_RDWR | O_CLOEXEC);
		/* In a container /dev is the engine's small tmpfs, not the host's devtmpfs: a
		 * loop device the kernel just made has no node there, so agenticd makes it (the
		 * container's device rule lets it use block major 7, the loop driver's, only). */
		if (fd < 0 && errno == ENOENT &&
		    mknod(dev, S_IFBLK | 0600, makedev(7, (unsigned)n)) == 0)
			fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0) {
			r = -errno;
			break;
		}
		if (ioctl(fd, LOOP_CONFIGURE, &lc) == 0) {
			*out = fd;
			r = 0;
		} else {
			r = -errno;
			close(fd);
		}
	}
	close(ctl);
	return r;
}

int workspace_mount(const char *image, const char *dir, char *err, size_t err_size)
{
	char dev[32];
	int img = open(image, O_RDWR | O_CLOEXEC | O_NOFOLLOW), loop = -1, r;

	if (img < 0) {
		r = -errno;
		snprintf(err, err_size, "cannot open the workspace image %s: %s", image, strerror(-r));
		return r;
	}
	r = loop_attach(img, image, dev, sizeof(dev), &loop);
	close(img); /* the loop device holds the file now */
	if (r != 0) {
		snprintf(err, err_size, "cannot attach the workspace image %s to a loop device: %s",
			 image, strerror(-r));
		return r;
	}
	if (mount(dev, dir, "ext4", MS_NOSUID | MS_NODEV, "") != 0) {
		r = -errno;
		snprintf(err, err_size, "cannot mount the workspace image %s (%s) on %s: %s", image,
			 dev, dir, strerror(-r));
	}
	close(loop); /* autoclear: the device is detached once its last user (the mount) goes */
	return r;
}

int workspace_mounted(const char *dir)
{
	char parent[LIMIT_PATH_BYTES + 4];
	struct stat a, b;

	if (snprintf(parent, sizeof(parent), "%s/..", dir) >= (int)sizeof(parent))
		return -ENAMETOOLONG;
	if (lstat(dir, &a) != 0 || stat(parent, &b) != 0)
		return -errno;
	return S_ISDIR(a.st_mode) && a.st_dev != b.st_dev;
}

int workspace_unmount(const char *dir)
{
	return umount2(dir, MNT_DETACH | UMOUNT_NOFOLLOW) == 0 ? 0 : -errno;
}

/* ---- what a killed agenticd left: mounts and loop devices found again ---- */

/* mountinfo's octal escapes (\040 for a space, \011, \012, \134) undone in place. */
static void unescape(char *s)
{
	char *w = s;

	for (; *s; s++, w++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*w = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*w = *s;
		}
	}
	*w = '\0';
}

int workspace_each_mount(const char *dir, int (*fn)(void *ctx, const char *point,
						    unsigned major, unsigned minor), void *ctx)
{
	static char line[2 * LIMIT_PATH_BYTES + 1024];
	size_t dlen = strlen(dir);
	char *point, *save;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	unsigned maj, min;
	bool cut = false;
	int r = 0;

	if (!f)
		return -errno;
	/* id parent major:minor root mount-point ...; a line longer than the buffer (no path
	 * of ours is that long) is skipped whole */
	while (r == 0 && fgets(line, sizeof(line), f)) {
		bool whole = strchr(line, '\n') != NULL, skip = cut;

		cut = !whole;
		if (skip || !whole)
			continue;
		if (!strtok_r(line, " ", &save) || !strtok_r(NULL, " ", &save) ||
		    !(point = strtok_r(NULL, " ", &save)) || sscanf(point, "%u:%u", &maj, &min) != 2 ||
		    !strtok_r(NULL, " ", &save) || !(point = strtok_r(NULL, " ", &save)))
			continue;
		unescape(point);
		if (strncmp(point, dir, dlen) == 0 && point[dlen] == '/')
			r = fn(ctx, point, maj, min);
	}
	fclose(f);
	return r;
}

/* sysfs's backing_file of a loop device: the path, " (deleted)" once the file is unlinked. */
static int backing_read(const char *sys, char *path, size_t size, bool *deleted)
{
	static const char del[] = " (deleted)";
	int fd = open(sys, O_RDONLY | O_CLOEXEC);
	ssize_t n;
	size_t dl = sizeof(del) - 1;

	if (fd < 0)
		return -errno;
	n = read(fd, path, size - 1);
	close(fd);
	if (n <= 0 || (size_t)n == size - 1)
		return n < 0 ? -errno : -ENAMETOOLONG;
	path[n] = '\0';
	if (n && path[n - 1] == '\n')
		path[--n] = '\0';
	*deleted = (size_t)n > dl && strcmp(path + n - dl, del) == 0;
	if (*deleted)
		path[n - dl] = '\0';
	return 0;
}

int workspace_loop_backing(unsigned major, unsigned minor, char *path, size_t size,
			   bool *deleted)
{
	char sys[96];

	if (major != 7) /* the loop driver's */
		return -ENODEV;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u/loop/backing_file", major, minor);
	return backing_read(sys, path, size, deleted);
}

int workspace_each_loop(int (*fn)(void *ctx, const char *dev, const char *backing,
				  bool deleted), void *ctx)
{
	char sys[300], dev[300], path[LIMIT_PATH_BYTES + 32];
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	bool deleted;
	int r = 0;

	if (!d)
		return -errno;
	while (r == 0 && (de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(sys, sizeof(sys), "/sys/block/%s/loop/backing_file", de->d_name);
		snprintf(dev, sizeof(dev), "/dev/%s", de->d_name);
		if (backing_read(sys, path, sizeof(path), &deleted) == 0)
			r = fn(ctx, dev, path, deleted);
	}
	closedir(d);
	return r;
}

int workspace_loop_detach(const char *dev)
{
	int fd = open(dev, O_RDWR | O_CLOEXEC | O_NOFOLLOW), r;

	if (fd < 0)
		return -errno;
	r = ioctl(fd, LOOP_CLR_FD, 0) == 0 ? 0 : -errno;
	close(fd);
	return r;
}
