/* base.h: the foundation every module builds on: errors, logging, buffers, arenas, pools,
 * and the sealable start-up allocator of the static build. */
#ifndef AGENTIC_BASE_H
#define AGENTIC_BASE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "limits.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- invariants ----
 * ASSERT(cond): cond holds here, or the program is wrong and must not go on. On in every build
 * (it costs a compare and a never-taken branch): for cheap checks of invariants only (slot and
 * table bounds, lifecycle states, buffer accounting, counts, seals), never for input, which gets
 * an error. A failure writes one line "agentic: assertion failed: FILE:LINE: COND" to stderr
 * and aborts. */
#define ASSERT(cond) ((cond) ? (void)0 : assert_fail(__FILE__, __LINE__, #cond))
_Noreturn void assert_fail(const char *file, int line, const char *cond);

/* One record of getdents64(2), read into caller storage (readdir would allocate, and agenticd
 * allocates nothing after start). d_reclen says where the next begins. */
struct dirent64_raw {
	uint64_t ino;
	int64_t off;
	unsigned short reclen;
	unsigned char type;
	char name[];
};

/* ---- errors ----
 * Functions return 0 on success or a negative errno value. Module-specific codes live below
 * ERR_BASE so they never collide with errno, each module in its own range: its codes are
 * ERR_RANGE_<MODULE> - 1 down to ERR_RANGE_<MODULE> - (ERR_RANGE_SPAN - 1), defined in its
 * header from the range constant, and their text is in err.c's one table (test_base checks
 * that every code is in its range, unique and has a text). */
#define ERR_BASE (-4096)
#define ERR_RANGE_SPAN 100
#define ERR_RANGE_BASE ERR_BASE                          /* the three codes below */
#define ERR_RANGE_HTTP (ERR_BASE - 1 * ERR_RANGE_SPAN)   /* http.h: HTTP_ERR_* */
#define ERR_RANGE_HPACK (ERR_BASE - 2 * ERR_RANGE_SPAN)  /* hpack.h: HPACK_ERR_* */
#define ERR_RANGE_H2 (ERR_BASE - 3 * ERR_RANGE_SPAN)     /* h2.h: H2_ERR_* */
#define ERR_RANGE_DOCKER (ERR_BASE - 4 * ERR_RANGE_SPAN) /* docker.h: DOCKER_ERR_* */
#define ERR_RANGE_PRUNE (ERR_BASE - 5 * ERR_RANGE_SPAN)  /* prune.h: PRUNE_* */
#define ERR_RANGE_CLI (ERR_BASE - 6 * ERR_RANGE_SPAN)    /* cli.c's own */
#define ERR_RANGE_END (ERR_BASE - 7 * ERR_RANGE_SPAN)    /* below every range */

#define ERR_LIMIT (ERR_RANGE_BASE - 1) /* a fixed limit was reached */
#define ERR_PARSE (ERR_RANGE_BASE - 2) /* malformed input */
#define ERR_STATE (ERR_RANGE_BASE - 3) /* call not valid in the current state */

/* Human text for a negative code from any module (strerror for an errno value); never NULL:
 * "unknown error" for a code no module defines. */
const char *err_str(int code);

/* ---- logging ----
 * One line per event on stderr, logfmt: `ts=... level=... msg=... key=value ...`.
 * The caller formats its own key=value pairs. Every value that came from outside (a request,
 * a sandbox, the engine, the disk, the config) goes through log_q, so that no such value can
 * forge a key or a line; agenticd's own words and numbers are written bare. Never pass
 * secrets, env values or transcript bytes. A line is written with a single write(2), so
 * concurrent writers do not interleave. */
enum log_level { LOG_ERROR, LOG_WARN, LOG_INFO, LOG_DEBUG };

void log_set_level(enum log_level level);
/* The level a name (error, warn, info, debug) stands for: 0, or -EINVAL for any other text. */
int log_level_parse(const char *name, enum log_level *out);
/* The name of a level ("error" ... "debug"). */
const char *log_level_name(enum log_level level);
void log_set_prog(const char *prog);
void log_emit(enum log_level level, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Writes `s` (NULL: empty) into out as a logfmt value, always in double quotes, with `"` and
 * `\` escaped and control bytes as \xHH; cut to fit out_size (>= 3). Returns out. */
const char *log_quote(char *out, size_t out_size, const char *s);
/* log_quote into a buffer of LIMIT_LOG_VALUE_BYTES that lives until the end of the enclosing
 * block: log_info("x", "name=%s", log_q(name)). */
#define log_q(s) log_quote((char[LIMIT_LOG_VALUE_BYTES]){ 0 }, LIMIT_LOG_VALUE_BYTES, (s))
/* For key=value text that is no log line (agentic-prune's report, a config error): like
 * log_quote, but a value that needs no quotes (no space, control byte, `"`, `=` or `\`, not
 * empty) is written bare. */
const char *logfmt_value(char *out, size_t out_size, const char *s);

#define log_error(msg, ...) log_emit(LOG_ERROR, msg, __VA_ARGS__)
#define log_warn(msg, ...) log_emit(LOG_WARN, msg, __VA_ARGS__)
#define log_info(msg, ...) log_emit(LOG_INFO, msg, __VA_ARGS__)
#define log_debug(msg, ...) log_emit(LOG_DEBUG, msg, __VA_ARGS__)

/* ---- byte buffers ----
 * A buf never grows: its storage is the caller's. Appends that do not fit fail with
 * ERR_LIMIT and leave the buffer unchanged. */
struct buf {
	uint8_t *data;
	size_t len;
	size_t cap;
};

void buf_init(struct buf *b, void *storage, size_t cap);
int buf_append(struct buf *b, const void *data, size_t len);
/* Needs one spare byte for the terminating NUL, which is written but not counted in len. */
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Removes the first n bytes, moving the rest to the front. */
void buf_consume(struct buf *b, size_t n);

/* ---- arena ----
 * Bump allocation over caller storage; arena_reset frees everything at once. */
struct arena {
	uint8_t *base;
	size_t used;
	size_t cap;
};

void arena_init(struct arena *a, void *storage, size_t cap);
/* Returns aligned memory or NULL when the arena is full (align: power of two). */
void *arena_alloc(struct arena *a, size_t size, size_t align);
void arena_reset(struct arena *a);

/* ---- fixed pool ----
 * `cap` slots of `elem_size` bytes over caller storage, with a free list (skalibs genset).
 * Indices are stable for a slot's lifetime. */
struct pool {
	uint8_t *slots;
	uint32_t *next_free;
	size_t elem_size;
	uint32_t cap;
	uint32_t head;
	uint32_t used;
};

/* storage: cap*elem_size bytes; links: cap uint32_t. */
void pool_init(struct pool *p, void *storage, uint32_t *links, size_t elem_size, uint32_t cap);
/* Returns a zeroed slot or NULL when all are taken. */
void *pool_get(struct pool *p);
void pool_put(struct pool *p, void *slot);
uint32_t pool_index(const struct pool *p, const void *slot);

/* ---- id allocator ----
 * Ids first..first+count-1 over a caller's bitmap of (count+63)/64 words. Allocation is
 * next-fit: it continues after the last id handed out, so a freed id is reused as late as
 * possible (control uids, sandbox subnets). */
struct idalloc {
	uint64_t *bits;
	uint32_t first;
	uint32_t count;
	uint32_t cursor; /* offset of the next id to try */
	uint32_t used;
};

void idalloc_init(struct idalloc *a, uint64_t *bits, uint32_t first, uint32_t count);
/* Takes the next free id: 0, or ERR_LIMIT when every id is taken. */
int idalloc_take(struct idalloc *a, uint32_t *id);
/* Marks a known id as taken (rebuilding state) and moves the cursor past it: 0, -EEXIST
 * when already taken, -ERANGE. */
int idalloc_mark(struct idalloc *a, uint32_t id);
/* Frees an id: 0, or -ENOENT when it was not taken, -ERANGE. */
int idalloc_free(struct idalloc *a, uint32_t id);
int idalloc_taken(const struct idalloc *a, uint32_t id);

/* ---- the start-up allocator (static build) ----
 * In the static musl build, malloc and friends are served from one region reserved by
 * alloc_budget(). After alloc_seal() an allocation is a bug: with AGENTIC_ALLOC_CHECK=1 in the
 * environment it aborts with a message; otherwise it is still served and counted. In the
 * glibc test build these are no-ops (ASan owns malloc there). */
int alloc_budget(size_t bytes);
void alloc_seal(void);
struct alloc_stats {
	size_t budget;
	size_t in_use;
	size_t peak;
	size_t after_seal;  /* allocations made after sealing */
};
void alloc_stats(struct alloc_stats *out);

/* ---- clocks, in milliseconds ---- */
int64_t clock_mono_ms(void);  /* CLOCK_MONOTONIC: deadlines and durations */
int64_t clock_mono_us(void);  /* the same clock in microseconds: short durations measured */
int64_t clock_wall_ms(void);  /* CLOCK_REALTIME: timestamps */

/* ---- randomness (getrandom) ---- */
int random_bytes(void *out, size_t n);
/* hex_chars lowercase hex digits and a NUL into out (at most 64 digits). */
int random_hex(char *out, size_t hex_chars);
/* A UUIDv7 (RFC 9562: millisecond time, then random), 36 characters and a NUL. */
int uuid7(char out[37]);

/* ---- small helpers ---- */
/* The value of one hex digit (either case), or -1. */
int hex_value(int c);
/* Parses a non-negative decimal integer that fits `max`; 0 or -EINVAL/-ERANGE. */
int parse_u64(const char *s, uint64_t max, uint64_t *out);

/* Reads fd to its end into buf, at most cap bytes: 0 with *len the file's size; ERR_LIMIT when
 * the file fills all of buf (size buf one byte over the largest file you accept); -errno when a
 * read fails. The caller opens and closes fd. */
int fd_read_all(int fd, void *buf, size_t cap, size_t *len);
/* A small file's first cap - 1 bytes into buf, NUL-terminated (a longer one, /proc/cpuinfo,
 * is cut there): a /proc file read in one call. Its length, or -1. */
ssize_t file_read_small(const char *path, char *buf, size_t cap);
/* SO_PASSRIGHTS 0 on a Unix socket: a peer's sendmsg with SCM_RIGHTS fails (EPERM) instead of
 * leaving descriptors in its queue. Set on a listener, the connections it accepts have it from
 * their first byte. Without it, a descriptor someone passed is closed by the kernel in the
 * reader's own thread when the queue is read without a control buffer or purged at close,
 * and a TCP socket with SO_LINGER and unsent data holds that thread for the linger time.
 * 0, or -ENOPROTOOPT on kernels before 6.16, which cannot refuse them. */
int fd_refuse_rights(int fd);
/* The other side of it, for a process that talks to hosts or workloads it cannot trust: a
 * seccomp filter on the caller (kept across fork and exec) that refuses sendmsg, sendmmsg and
 * io_uring (EPERM), so that no descriptor of its reaches another process however it is taken
 * over, on any kernel; x32 system calls are refused and any other arch is killed. Sets
 * no_new_privs first (the filter needs it without CAP_SYS_ADMIN). Two system calls, nothing
 * of libc's state: safe in a vfork child. 0, or -errno. */
int fd_forbid_passing(void);

#endif
