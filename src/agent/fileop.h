/* fileop.h: file operations in a sandbox (fileop.c): each one is the file applet
 * (src/init/fileop_applet.c) run through exec_begin as the workload uid 10001 with no
 * capabilities, so the kernel and the container's own root decide what it may touch; its
 * answer (JSON lines, or a file's bytes) is read here defensively, as a hostile sandbox's.
 * Consumers: the admin API's file routes, `agentic cp` through them, the E2B filesystem. */
#ifndef AGENTIC_AGENT_FILEOP_H
#define AGENTIC_AGENT_FILEOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sandbox;

enum fileop_kind { FILEOP_STAT, FILEOP_LIST, FILEOP_MKDIR, FILEOP_MOVE, FILEOP_REMOVE,
		   FILEOP_READ, FILEOP_WRITE };

#define FILE_TYPE_OTHER 0
#define FILE_TYPE_FILE 1
#define FILE_TYPE_DIR 2
#define FILE_TYPE_SYMLINK 3

/* One entry, valid during the entry call only. Strings are the sandbox's exact bytes (not
 * always UTF-8; never NUL inside). owner, group: "root" for 0, "user" for 10001 (the
 * workload), else the number in decimal; the sandbox's /etc/passwd is not read. mode: the
 * permission bits (07777). */
struct file_entry {
	const char *name, *path, *symlink_target /* NULL: not a symlink */, *owner, *group;
	int type;
	uint64_t size;
	uint32_t mode;
	int64_t mtime_s;
	int32_t mtime_ns;
};

/* path, path2: absolute (a relative one is relative to the sandbox's exec working directory),
 * 1..LIMIT_PATH_BYTES-1 bytes of UTF-8. depth: LIST's levels, 1..LIMIT_FILEOP_DEPTH. parents:
 * MKDIR and WRITE make the missing directories above the path (MOVE always makes its
 * destination's). Symlinks are followed as the kernel follows them for uid 10001; LIST and
 * REMOVE never descend through one, STAT reports one itself. */
struct fileop_req {
	enum fileop_kind op;
	const char *path, *path2 /* MOVE's destination */;
	uint32_t depth;
	bool parents;
};

struct fileop_sink_ops {
	/* STAT, MKDIR, MOVE, WRITE: the one entry; LIST: each entry below the path */
	void (*entry)(void *ctx, const struct file_entry *e);
	/* READ's bytes, in order (they come only once the file is open: the first call means it
	 * is a readable regular file). 0, or -errno: the operation stops (done follows). */
	int (*data)(void *ctx, const void *d, size_t len);
	/* WRITE: fileop_write may be offered more */
	void (*stdin_taken)(void *ctx);
	/* Once per begun operation (not after fileop_cancel): err 0, or a positive errno (ENOENT,
	 * EEXIST, ENOTDIR, EISDIR, EACCES, EPERM, ENOSPC, EDQUOT, EINVAL for a non-regular file,
	 * ELOOP, ENAMETOOLONG, EIO: the answer was malformed, or the operation was stopped) and
	 * a message for the user (never NULL when err; printable ASCII). */
	void (*done)(void *ctx, int err, const char *message);
};

struct fileop_sink {
	const struct fileop_sink_ops *ops;
	void *ctx;
};

/* Starts r in sb (the sink is copied; nothing is called back before this returns). The
 * operation's handle (>= 0; one that is over, its done called or cancelled, names nothing
 * ever after: fileop_write and fileop_cancel ignore it), -EINVAL (a bad request),
 * ERR_LIMIT (LIMIT_FILEOPS running, or exec's limit), or exec_begin's other errors (ERR_STATE:
 * the agent is not connected; -EAGAIN; a transcript error: exec_transcript_error). */
int fileop_begin(struct sandbox *sb, const struct fileop_req *r, const struct fileop_sink *s);
/* WRITE's bytes: takes up to len (0 while a chunk is in flight: stdin_taken says when);
 * eof with the last bytes (or len 0) ends the file. */
size_t fileop_write(int32_t x, const void *data, size_t len, bool eof);
/* The client left: the applet is killed (SIGKILL; a WRITE leaves what came in the file) and
 * the operation forgotten (no done). */
void fileop_cancel(int32_t x);

/* For tests and the fuzzer: one answer line (its '\n' cut; unescaped in place) into e,
 * its strings pointing into line, owner and group into idbuf (>= 24 bytes). 0 or -EINVAL. */
int fileop_line_parse(char *line, size_t len, struct file_entry *e, char *idbuf);
/* The table's size (static). */
size_t fileop_table_bytes(void);

#endif
