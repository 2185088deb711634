/* fileop_applet.c: the applet agentic-file, one file operation inside a sandbox (docs/API.md
 * "Files"). agenticd runs it through the ordinary exec path as `/sbin/agentic-init file OP
 * ARGS` (`/init file ...` in a VM guest; main.c routes both here), so it is the workload uid
 * with no capabilities and no-new-privileges in the sandbox's own mount namespace: the kernel's
 * permissions and the container's root decide what it may touch, never a host-side walk.
 * Symlinks are followed as the kernel follows them for uid 10001 (E2B's semantics); a
 * list or a remove never descends through one. A read or a write opens nothing but a
 * regular file: a FIFO, device or socket is refused before it is opened and again after
 * (O_NONBLOCK|O_NOCTTY, fstat), so none can block it or become its terminal.
 *
 * Output: one line per entry on stdout, a JSON object whose strings carry the name's exact
 * bytes ('"', '\\' and bytes below 0x20 or 0x7f escaped as JSON does, bytes from 0x80 as
 * they are); read writes the file's bytes instead. Errors: one line on stderr and the exit
 * code is the errno (1..125), EIO for any other. May call base only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

const char file_help[] =
	"usage: agentic-init file stat PATH | list PATH DEPTH | mkdir [-p] PATH |\n"
	"                         move SRC DST | remove PATH | read PATH | write [-p] PATH\n"
	"\n"
	"One file operation, run by agenticd inside a sandbox as the workload user (the file\n"
	"routes of the admin API, `agentic cp`, the E2B filesystem). stat, list (DEPTH levels,\n"
	"1-64, symlinks not followed), mkdir, move and write print one JSON line per entry:\n"
	"path, type (file dir symlink other), size, mode, uid, gid, mtime, mtime_ns, target.\n"
	"remove is rm -rf (a missing path is no error). read copies a regular file to stdout;\n"
	"write copies stdin to one (created 0644, truncated; -p makes the parents). Anything\n"
	"else (a FIFO, device, socket) is refused with EINVAL, a directory with EISDIR.\n"
	"Exit status: 0, or the errno of the failure (EIO when it has none below 126).\n";

static char out[65536];
static size_t out_len;
static char line[LIMIT_FILEOP_LINE_BYTES];
static size_t line_len;
static bool line_over;

static _Noreturn void fail(const char *op, int err)
{
	char msg[160];
	int n;

	if (err <= 0 || err > 125)
		err = EIO;
	n = snprintf(msg, sizeof(msg), "agentic-file: %s: %s\n", op, strerror(err));
	if (n > 0)
		(void)!write(2, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	_exit(err);
}

static int write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void out_flush(void)
{
	int r = write_all(1, out, out_len);

	if (r)
		fail("writing the answer", r);
	out_len = 0;
}

static void put(const void *data, size_t len)
{
	if (line_len + len > sizeof(line)) {
		line_over = true;
		return;
	}
	memcpy(line + line_len, data, len);
	line_len += len;
}

static void put_str(const char *s)
{
	static const char hex[] = "0123456789abcdef";

	put("\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if (*p == '"' || *p == '\\') {
			char e[2] = { '\\', (char)*p };
			put(e, 2);
		} else if (*p < 0x20 || *p == 0x7f) {
			char e[6] = { '\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15] };
			put(e, 6);
		} else {
			put(p, 1);
		}
	}
	put("\"", 1);
}

static void put_num(const char *key, long long v)
{
	char b[48];
	int n = snprintf(b, sizeof(b), ",\"%s\":%lld", key, v);

	put(b, (size_t)n);
}

static const char *type_word(mode_t m)
{
	return S_ISREG(m) ? "file" : S_ISDIR(m) ? "dir" : S_ISLNK(m) ? "symlink" : "other";
}

/* One entry's line (dfd, name: where to read a symlink's target). 0, or ENAMETOOLONG when
 * the line would pass LIMIT_FILEOP_LINE_BYTES (nothing written). */
static int entry(const char *path, const struct stat *st, int dfd, const char *name)
{
	char target[LIMIT_PATH_BYTES];
	ssize_t tl = -1;

	if (S_ISLNK(st->st_mode))
		tl = readlinkat(dfd, name, target, sizeof(target) - 1);
	line_len = 0;
	line_over = false;
	put("{\"path\":", 8);
	put_str(path);
	put(",\"type\":\"", 9);
	put(type_word(st->st_mode), strlen(type_word(st->st_mode)));
	put("\"", 1);
	put_num("size", (long long)st->st_size);
	put_num("mode", (long long)(st->st_mode & 07777));
	put_num("uid", (long long)st->st_uid);
	put_num("gid", (long long)st->st_gid);
	put_num("mtime", (long long)st->st_mtim.tv_sec);
	put_num("mtime_ns", (long long)st->st_mtim.tv_nsec);
	if (tl >= 0) {
		target[tl] = '\0';
		put(",\"target\":", 10);
		put_str(target);
	}
	put("}\n", 2);
	if (line_over)
		return ENAMETOOLONG;
	if (out_len + line_len > sizeof(out))
		out_flush();
	memcpy(out + out_len, line, line_len);
	out_len += line_len;
	return 0;
}

/* stat: the path itself (a symlink is reported, not followed). */
static void op_stat(const char *path, const char *op)
{
	struct stat st;
	int r;

	if (lstat(path, &st) != 0)
		fail(op, errno);
	if ((r = entry(path, &st, AT_FDCWD, path)) != 0)
		fail(op, r);
	out_flush();
}

/* ---- list: depth levels below path, never through a symlink ---- */

static void list_dir(int fd, char *path, size_t plen, uint32_t depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;

	if (!d) {
		close(fd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		size_t nl = strlen(e->d_name), sep = plen && path[plen - 1] == '/' ? 0 : 1;
		struct stat st;
		int sub;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") ||
		    plen + sep + nl >= LIMIT_PATH_BYTES)
			continue;
		path[plen] = '/';
		memcpy(path + plen + sep, e->d_name, nl + 1);
		/* gone meanwhile, or a name too odd for a line: left out, as a racing rm would */
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    entry(path, &st, dirfd(d), e->d_name) != 0)
			continue;
		if (!S_ISDIR(st.st_mode) || depth <= 1)
			continue;
		sub = openat(dirfd(d), e->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub >= 0)
			list_dir(sub, path, plen + sep + nl, depth - 1);
	}
	path[plen] = '\0';
	closedir(d);
}

static void op_list(const char *root, const char *depth_arg, const char *op)
{
	static char path[LIMIT_PATH_BYTES];
	uint64_t depth;
	size_t len = strlen(root);
	int fd;

	if (parse_u64(depth_arg, LIMIT_FILEOP_DEPTH, &depth) != 0 || depth == 0)
		fail(op, EINVAL);
	if (len >= sizeof(path))
		fail(op, ENAMETOOLONG);
	/* the root is followed, as E2B's list follows it; what is below never is */
	fd = open(root, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		fail(op, errno);
	memcpy(path, root, len + 1);
	while (len > 1 && path[len - 1] == '/')
		path[--len] = '\0';
	list_dir(fd, path, len, (uint32_t)depth);
	out_flush();
}

/* ---- mkdir, move ---- */

/* Every missing directory above path's last component, 0755. 0 or an errno. */
static int make_parents(char *path)
{
	if (!path[0])
		return ENOENT;
	for (char *p = strchr(path + 1, '/'); p; p = strchr(p + 1, '/')) {
		int r = 0;

		*p = '\0';
		if (mkdir(path, 0755) != 0 && errno != EEXIST)
			r = errno;
		*p = '/';
		if (r)
			return r;
	}
	return 0;
}

static void op_mkdir(char *path, bool parents, const char *op)
{
	struct stat st;
	int r;

	if (parents && (r = make_parents(path)) != 0)
		fail(op, r);
	if (mkdir(path, 0755) != 0) {
		r = errno;
		/* E2B: an existing directory is "already exists", anything else in the way is not
		 * a directory */
		if (r == EEXIST && stat(path, &st) == 0 && !S_ISDIR(st.st_mode))
			r = ENOTDIR;
		fail(op, r);
	}
	op_stat(path, op);
}

static void op_move(const char *src, char *dst, const char *op)
{
	struct stat st;
	int r;

	if (rename(src, dst) != 0) {
		r = errno;
		/* the destination's parents are made, as E2B's move makes them */
		if (r != ENOENT || lstat(src, &st) != 0 || make_parents(dst) != 0 ||
		    rename(src, dst) != 0)
			fail(op, r == ENOENT ? errno : r);
	}
	op_stat(dst, op);
}

/* ---- remove: rm -rf, never through a symlink ---- */

static int rm_at(int dfd, const char *name, uint32_t level);

/* Empties the directory fd (taken): 0 or the first errno. Passes until one removes nothing,
 * since a directory read while its entries go may skip some. */
static int rm_children(int fd, uint32_t level)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	int first = 0;
	bool removed = true;

	if (!d) {
		close(fd);
		return errno;
	}
	while (removed) {
		removed = false;
		rewinddir(d);
		while ((e = readdir(d)) != NULL) {
			int r;

			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			r = rm_at(dirfd(d), e->d_name, level + 1);
			if (r == 0)
				removed = true;
			else if (!first)
				first = r;
		}
	}
	closedir(d);
	return first;
}

static int rm_at(int dfd, const char *name, uint32_t level)
{
	int fd, r;

	if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR && errno != EPERM)
		return errno;
	if (level >= LIMIT_FILEOP_DEPTH)
		return ELOOP;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errno == ENOTDIR ? EPERM : errno;
	r = rm_children(fd, level);
	if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT && !r)
		r = errno;
	return r;
}

static void op_remove(const char *path, const char *op)
{
	int r = rm_at(AT_FDCWD, path, 0);

	if (r)
		fail(op, r);
}

/* ---- read, write: regular files only ---- */

/* A non-regular file's errno: EISDIR for a directory, EINVAL for the rest. */
static int not_regular(mode_t m)
{
	return S_ISREG(m) ? 0 : S_ISDIR(m) ? EISDIR : EINVAL;
}

/* Opens path (flags | O_NONBLOCK | O_NOCTTY) when it is a regular file: stat before, so a
 * FIFO or device is never opened, and fstat after, so one swapped in meanwhile is refused
 * anyway. The fd, blocking again; fails the op otherwise. */
static int open_regular(const char *path, int flags, const char *op)
{
	struct stat st;
	int fd, r;

	if (stat(path, &st) == 0 && (r = not_regular(st.st_mode)) != 0)
		fail(op, r);
	fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
	if (fd < 0)
		fail(op, errno == ENXIO ? EINVAL : errno);
	if (fstat(fd, &st) != 0)
		fail(op, errno);
	if ((r = not_regular(st.st_mode)) != 0)
		fail(op, r);
	if (fcntl(fd, F_SETFL, flags & O_ACCMODE) != 0)
		fail(op, errno);
	return fd;
}

static void op_read(const char *path, const char *op)
{
	int fd = open_regular(path, O_RDONLY, op), r;
	ssize_t n;

	while ((n = read(fd, out, sizeof(out))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail(op, errno);
		if ((r = write_all(1, out, (size_t)n)) != 0)
			fail("writing the answer", r);
	}
	close(fd);
}

static void op_write(char *path, bool parents, const char *op)
{
	struct stat st;
	ssize_t n;
	int fd, r;

	if (parents && (r = make_parents(path)) != 0)
		fail(op, r);
	fd = open_regular(path, O_WRONLY | O_CREAT, op);
	if (ftruncate(fd, 0) != 0)
		fail(op, errno);
	while ((n = read(0, out, sizeof(out))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("reading the data", errno);
		if ((r = write_all(fd, out, (size_t)n)) != 0)
			fail(op, r);
	}
	if (fstat(fd, &st) != 0)
		fail(op, errno);
	if (close(fd) != 0)
		fail(op, errno);
	if ((r = entry(path, &st, AT_FDCWD, path)) != 0)
		fail(op, r);
	out_flush();
}

/* `-p` before the path: parents wanted. Moves *argv past it. */
static bool take_parents(int *argc, char ***argv)
{
	if (*argc > 2 && !strcmp((*argv)[2], "-p")) {
		(*argv)++;
		(*argc)--;
		return true;
	}
	return false;
}

int file_main(int argc, char **argv)
{
	const char *op = argc > 1 ? argv[1] : "";
	bool parents;

	/* Not dumpable: another process of the workload uid cannot ptrace this one or open its
	 * /proc/<pid>/mem (it holds nothing the workload lacks, but its answer is agenticd's). */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	umask(022);
	parents = take_parents(&argc, &argv);
	if (argc == 3 && !strcmp(op, "stat"))
		op_stat(argv[2], op);
	else if (argc == 4 && !strcmp(op, "list"))
		op_list(argv[2], argv[3], op);
	else if (argc == 3 && !strcmp(op, "mkdir"))
		op_mkdir(argv[2], parents, op);
	else if (argc == 4 && !strcmp(op, "move"))
		op_move(argv[2], argv[3], op);
	else if (argc == 3 && !strcmp(op, "remove"))
		op_remove(argv[2], op);
	else if (argc == 3 && !strcmp(op, "read"))
		op_read(argv[2], op);
	else if (argc == 3 && !strcmp(op, "write"))
		op_write(argv[2], parents, op);
	else
		fail("usage (see agentic-init file --help)", EINVAL);
	return 0;
}
