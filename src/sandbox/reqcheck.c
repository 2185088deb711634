/* reqcheck.c: request checks (names, labels, mounts) and secret scrubbing of free text. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/reqcheck.h"

bool policy_name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n < 2 || n > 63 || name[0] < 'a' || name[0] > 'z')
		return false;
	for (size_t i = 1; i < n; i++)
		if (!((name[i] >= 'a' && name[i] <= 'z') || (name[i] >= '0' && name[i] <= '9') ||
		      name[i] == '-'))
			return false;
	return true;
}

bool policy_label_key_allowed(const char *key)
{
	return *key && strncasecmp(key, "agentic-", 8) != 0;
}

/* True when path equals root or lies below it, component-wise ("/srv/a" is not under "/sr"). */
static bool path_within(const char *path, const char *root)
{
	size_t n = strlen(root);

	if (n == 1 && root[0] == '/')
		return path[0] == '/';
	return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Absolute, no empty, "." or ".." components, no trailing slash (but "/"). */
static bool path_clean(const char *p)
{
	if (p[0] != '/')
		return false;
	for (const char *c = p + 1; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		c += n;
		if (*c == '/') {
			c++;
			if (!*c)
				return false;
		}
	}
	return true;
}

static const char *const protected_host[] = {
	"/proc", "/sys", "/dev", "/etc", "/run", "/var/run", "/var/lib/docker", "/boot",
};

/* A protected place is refused, and so is any ancestor (mounting /var brings /var/run). */
static bool touches(const char *path, const char *place)
{
	return path_within(path, place) || path_within(place, path);
}

int policy_mount_check(const struct config *cfg, const char *src_real, const char *dst,
		       char *why, size_t why_size)
{
	static const char *const protected_dst[] = {
		"/workspace", "/sbin/agentic-init", "/run/agentic", "/run/agentic-sandbox",
		"/proc", "/sys", "/dev",
	};
	const char *docker_sock = cfg->docker_host + strlen("unix://");
	bool allowed = false;

	if (!path_clean(src_real) || !path_clean(dst)) {
		snprintf(why, why_size, "mount paths must be absolute and plain (no '.', '..', '//' "
			 "or trailing '/')");
		return ERR_PARSE;
	}
	if (strcmp(src_real, "/") == 0 || strcmp(dst, "/") == 0) {
		snprintf(why, why_size, "mounting / is never allowed");
		return -EPERM;
	}
	for (size_t i = 0; i < ARRAY_LEN(protected_host); i++)
		if (touches(src_real, protected_host[i])) {
			snprintf(why, why_size, "host path %s overlaps protected %s", src_real,
				 protected_host[i]);
			return -EPERM;
		}
	if (touches(src_real, cfg->agentshare_root) || touches(src_real, docker_sock) ||
	    touches(src_real, cfg->agent_socket_dir)) {
		snprintf(why, why_size, "host path %s overlaps agentic's own state or the docker "
			 "socket", src_real);
		return -EPERM;
	}
	for (size_t i = 0; i < ARRAY_LEN(protected_dst); i++)
		if (touches(dst, protected_dst[i])) {
			snprintf(why, why_size, "sandbox path %s overlaps %s, which agentic manages", dst,
				 protected_dst[i]);
			return -EPERM;
		}
	for (uint32_t i = 0; i < cfg->n_mount_allowlist; i++)
		if (path_within(src_real, cfg->mount_allowlist[i]))
			allowed = true;
	if (!allowed) {
		snprintf(why, why_size, "host path %s is not under mount_allowlist (%s)", src_real,
			 cfg->n_mount_allowlist ? "see agenticd.conf" : "empty: no host mounts allowed");
		return -EPERM;
	}
	return 0;
}

/* Opens the component c (n bytes) below dfd without following it if it is a symlink; an
 * O_PATH fd, or -errno. */
static int open_step(int dfd, const char *c, size_t n, struct stat *st)
{
	char name[NAME_MAX + 1];
	int fd;

	if (n > NAME_MAX)
		return -ENAMETOOLONG;
	memcpy(name, c, n);
	name[n] = '\0';
	fd = openat(dfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, st) != 0) {
		int r = -errno;

		close(fd);
		return r;
	}
	return fd;
}

#define FIXED_RULE "every directory above a mount source must be root's and writable by root " \
		   "alone (or sticky, the entry below it root's)"

/* 0 when only root can rename or replace the entry c (n bytes, stat st) of directory dir:
 * dir's owner always can; group or others with write permission can, unless the sticky bit
 * keeps them off an entry root owns. */
static int entry_fixed(const char *src, const char *c, size_t n, const struct stat *dir,
		       const struct stat *st, char *why, size_t why_size)
{
	int dlen = c - 1 == src ? 1 : (int)(c - 1 - src);
	char how[64];

	if (dir->st_uid != 0) {
		snprintf(why, why_size, "mount source %s: %.*s belongs to uid %u, who could swap %.*s "
			 "for a symlink before the container starts; " FIXED_RULE, src, dlen, src,
			 (unsigned)dir->st_uid, (int)n, c);
		return -EPERM;
	}
	if (!(dir->st_mode & (S_IWGRP | S_IWOTH)) || (dir->st_mode & S_ISVTX && st->st_uid == 0))
		return 0;
	if (dir->st_mode & S_ISVTX)
		snprintf(how, sizeof(how), "is sticky and uid %u owns the entry", (unsigned)st->st_uid);
	else if (dir->st_mode & S_IWOTH)
		snprintf(how, sizeof(how), "is world-writable");
	else
		snprintf(how, sizeof(how), "is writable by group %u", (unsigned)dir->st_gid);
	snprintf(why, why_size, "mount source %s: %.*s could be swapped for a symlink before the "
		 "container starts: %.*s %s; " FIXED_RULE, src, (int)n, c, dlen, src, how);
	return -EPERM;
}

/* Where mount sources are walked from: the engine's root (policy_root_set), -1: "/". */
static int walk_root = -1;

void policy_root_set(int root)
{
	walk_root = root;
}

/* A new O_PATH fd of walk_root, or -errno. */
static int root_open(void)
{
	int fd = walk_root >= 0 ? fcntl(walk_root, F_DUPFD_CLOEXEC, 0)
				: open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

/* Walks src_real from walk_root without following symlinks, each entry checked by
 * entry_fixed; st gets the last one. 0, -EPERM or -errno with why. */
static int walk_fixed(const char *src_real, struct stat *st, char *why, size_t why_size)
{
	const char *c = src_real + 1;
	struct stat dir;
	int dfd, fd, r = 0;

	if (!path_clean(src_real) || !*c) {
		snprintf(why, why_size, "mount source %s is not a plain path below /", src_real);
		return -EPERM;
	}
	dfd = root_open();
	if (dfd < 0 || fstat(dfd, &dir) != 0) {
		r = dfd < 0 ? dfd : -errno;
		snprintf(why, why_size, "mount source %s: the engine's root: %s", src_real,
			 strerror(-r));
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	for (;;) {
		size_t n = strcspn(c, "/");
		bool last = c[n] == '\0';
		int plen = (int)(c + n - src_real);

		fd = open_step(dfd, c, n, st);
		if (fd < 0) {
			r = fd;
			snprintf(why, why_size, "mount source %s: %.*s: %s", src_real, plen, src_real,
				 strerror(-r));
			break;
		}
		if (S_ISLNK(st->st_mode) || (!last && !S_ISDIR(st->st_mode))) {
			r = -EPERM;
			snprintf(why, why_size, "mount source %s changed while it was checked: %.*s is "
				 "now %s", src_real, plen, src_real,
				 S_ISLNK(st->st_mode) ? "a symlink" : "not a directory");
		} else {
			r = entry_fixed(src_real, c, n, &dir, st, why, why_size);
		}
		close(dfd);
		dfd = fd;
		dir = *st;
		if (r != 0 || last)
			break;
		c += n + 1;
	}
	close(dfd);
	return r;
}

int policy_mount_source(const char *src_real, struct policy_mount_id *id, char *why,
			size_t why_size)
{
	struct stat st;
	int r = walk_fixed(src_real, &st, why, why_size);

	if (r == 0) {
		id->dev = (uint64_t)st.st_dev;
		id->ino = (uint64_t)st.st_ino;
	}
	return r;
}

/* stat of walk_root into st: 0 or -errno with why. */
static int root_stat(struct stat *st, char *why, size_t why_size)
{
	int fd = root_open(), r = fd;

	if (fd >= 0) {
		r = fstat(fd, st) == 0 ? 0 : -errno;
		close(fd);
	}
	if (r != 0)
		snprintf(why, why_size, "the engine's root: %s", strerror(-r));
	return r;
}

int policy_dir_fixed(const char *dir_real, struct policy_mount_id *id, char *why,
		     size_t why_size)
{
	struct stat st;
	int r = strcmp(dir_real, "/") == 0 ? root_stat(&st, why, why_size)
					   : walk_fixed(dir_real, &st, why, why_size);

	if (r == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))) {
		snprintf(why, why_size, "%s belongs to uid %u with mode %04o%s: it must be a "
			 "directory root owns and root alone may write", dir_real,
			 (unsigned)st.st_uid, (unsigned)st.st_mode & 07777,
			 S_ISDIR(st.st_mode) ? "" : " (not a directory)");
		r = -EPERM;
	}
	if (r == 0) {
		id->dev = (uint64_t)st.st_dev;
		id->ino = (uint64_t)st.st_ino;
	}
	return r;
}

int policy_same_file(const char *path, const struct policy_mount_id *id, char *why,
		     size_t why_size)
{
	struct stat st;

	if (stat(path, &st) != 0) {
		snprintf(why, why_size, "%s: %s", path, strerror(errno));
		return -errno;
	}
	if ((uint64_t)st.st_dev == id->dev && (uint64_t)st.st_ino == id->ino)
		return 0;
	snprintf(why, why_size, "%s is not, in agenticd's view, what the engine's host has at that "
		 "path (device:inode %llu:%llu, the host's %llu:%llu): bind it at itself", path,
		 (unsigned long long)st.st_dev, (unsigned long long)st.st_ino,
		 (unsigned long long)id->dev, (unsigned long long)id->ino);
	return -EPERM;
}

int policy_init_check(const char *path, const struct policy_mount_id *id, char *why,
		      size_t why_size)
{
	struct policy_mount_id now;
	char what[512];
	int r = policy_mount_source(path, &now, what, sizeof(what));

	if (r == 0 && (now.dev != id->dev || now.ino != id->ino)) {
		snprintf(what, sizeof(what), "device:inode %llu:%llu, agenticd wrote %llu:%llu",
			 (unsigned long long)now.dev, (unsigned long long)now.ino,
			 (unsigned long long)id->dev, (unsigned long long)id->ino);
		r = -EPERM;
	}
	if (r != 0)
		snprintf(why, why_size, "the init binary's copy %s is not the file agenticd wrote "
			 "(%s): no sandbox starts on it; restart agenticd to write it again", path,
			 what);
	return r;
}

/* The root directory of process pid, an O_PATH fd, when /proc/PID/ns/pid still reads pid_ns;
 * else -errno with why. */
static int proc_root(int64_t pid, const char *pid_ns, char *why, size_t why_size)
{
	char path[48], ns[64];
	int proc, dfd, r;
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%lld", (long long)pid);
	proc = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0) {
		r = -errno;
	} else {
		/* the root first: a pid reused after this fails the namespace check below */
		dfd = openat(proc, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
		r = dfd < 0 ? -errno : 0;
		len = readlinkat(proc, "ns/pid", ns, sizeof(ns) - 1);
		close(proc);
		if (r == 0 && (len <= 0 || (size_t)len != strlen(pid_ns) ||
			       memcmp(ns, pid_ns, (size_t)len) != 0)) {
			close(dfd);
			r = -ESRCH;
		}
		if (r == 0)
			return dfd;
	}
	snprintf(why, why_size, "the container's process %lld cannot be looked at: %s",
		 (long long)pid, strerror(-r));
	return r;
}

int policy_mount_verify(int64_t pid, const char *pid_ns, const char *dst,
			const struct policy_mount_id *id, char *why, size_t why_size)
{
	const char *c = dst + 1;
	struct stat st;
	int dfd, fd, r = 0;

	if (!path_clean(dst) || !*c) {
		snprintf(why, why_size, "%s is not a plain path below /", dst);
		return -EPERM;
	}
	dfd = proc_root(pid, pid_ns, why, why_size);
	if (dfd < 0)
		return dfd;
	for (;;) {
		size_t n = strcspn(c, "/");
		bool last = c[n] == '\0';

		fd = open_step(dfd, c, n, &st);
		close(dfd);
		if (fd < 0) {
			r = fd;
			snprintf(why, why_size, "in the container, %.*s: %s", (int)(c + n - dst), dst,
				 strerror(-r));
			return r;
		}
		dfd = fd;
		if (S_ISLNK(st.st_mode)) {
			snprintf(why, why_size, "in the container, %.*s is a symlink: where the bind is "
				 "cannot be checked", (int)(c + n - dst), dst);
			r = -EPERM;
			break;
		}
		if (last)
			break;
		c += n + 1;
	}
	close(dfd);
	if (r == 0 && ((uint64_t)st.st_dev != id->dev || (uint64_t)st.st_ino != id->ino)) {
		snprintf(why, why_size, "the container has something other than the checked source at "
			 "%s (device:inode %llu:%llu, checked %llu:%llu): its path named something else "
			 "when the engine mounted it", dst, (unsigned long long)st.st_dev,
			 (unsigned long long)st.st_ino, (unsigned long long)id->dev,
			 (unsigned long long)id->ino);
		r = -EPERM;
	}
	return r;
}

static bool tokenish(int c)
{
	return isalnum(c) || c == '+' || c == '/' || c == '=' || c == '_' || c == '-' || c == '.';
}

/* Characters of an environment-variable-like key. */
static bool keychar(int c)
{
	return isalnum(c) || c == '_' || c == '-';
}

/* Characters of base64, base64url and hex. */
static bool keyish(int c)
{
	return isalnum(c) || c == '+' || c == '=' || c == '_' || c == '-';
}

static bool secret_key_name(const char *start, size_t n)
{
	static const char *const words[] = {
		"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH",
	};
	char up[128];

	if (n >= sizeof(up))
		n = sizeof(up) - 1;
	for (size_t i = 0; i < n; i++)
		up[i] = (char)toupper((unsigned char)start[i]);
	up[n] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(words); i++)
		if (strstr(up, words[i]))
			return true;
	return false;
}

static bool has_token_prefix(const char *s)
{
	static const char *const prefixes[] = {
		"ghp_", "gho_", "ghs_", "github_pat_", "sk-", "xoxb-", "xoxp-", "xoxa-", "AKIA",
		"glpat-", "Bearer ", "bearer ",
	};

	for (size_t i = 0; i < ARRAY_LEN(prefixes); i++)
		if (strncmp(s, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

/* Replaces text[start..end) with the marker, cutting the tail of the text when the marker
 * is longer than what it replaces and the buffer is full; returns the index after it. */
static size_t replace(char *text, size_t size, size_t start, size_t end)
{
	static const char mark[] = "[redacted]";
	size_t len = strlen(text), m = sizeof(mark) - 1;
	size_t tail = len - end;

	if (start + m >= size) {
		text[start] = '\0';
		return start;
	}
	if (start + m + tail >= size)
		tail = size - 1 - start - m;
	memmove(text + start + m, text + end, tail);
	memcpy(text + start, mark, m);
	text[start + m + tail] = '\0';
	return start + m;
}

int policy_redact(char *text, size_t size)
{
	size_t i = 0;
	int count = 0;

	if (!memchr(text, '\0', size))
		text[size - 1] = '\0';
	while (text[i]) {
		size_t j = i;

		/* KEY=VALUE or KEY: VALUE with a secret-naming key */
		if (keychar((unsigned char)text[i]) && (i == 0 || !keychar((unsigned char)text[i - 1]))) {
			while (keychar((unsigned char)text[j]))
				j++;
			if ((text[j] == '=' || text[j] == ':') && secret_key_name(text + i, j - i)) {
				size_t v = j + 1, e;
				while (text[v] == ' ' || text[v] == '"' || text[v] == '\'')
					v++;
				if (strncmp(text + v, "[redacted]", 10) == 0) {
					i = v + 10; /* already scrubbed */
					continue;
				}
				e = v;
				while (text[e] && text[e] != ' ' && text[e] != '"' && text[e] != '\'' &&
				       text[e] != '\n' && text[e] != ',')
					e++;
				if (e > v) {
					i = replace(text, size, v, e);
					count++;
					continue;
				}
			}
			j = i;
		}
		if (has_token_prefix(text + i) && (i == 0 || !tokenish((unsigned char)text[i - 1]))) {
			size_t e = i;
			if (text[e] == 'B' || text[e] == 'b')
				e += 7; /* "Bearer " */
			while (tokenish((unsigned char)text[e]))
				e++;
			i = replace(text, size, i, e);
			count++;
			continue;
		}
		if (keyish((unsigned char)text[i]) && (i == 0 || !keyish((unsigned char)text[i - 1]))) {
			size_t e = i, digits = 0, letters = 0;
			while (keyish((unsigned char)text[e])) {
				digits += isdigit((unsigned char)text[e]) != 0;
				letters += isalpha((unsigned char)text[e]) != 0;
				e++;
			}
			/* long runs mixing digits and letters look like keys; words and paths (split at
			 * '/' and '.') rarely do */
			if (e - i >= 24 && digits >= 4 && letters >= 4) {
				i = replace(text, size, i, e);
				count++;
				continue;
			}
		}
		i++;
	}
	return count;
}
