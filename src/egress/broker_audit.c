/* broker_audit.c: the audit lines agenticd writes in a run's egress.jsonl (a worker's record,
 * its own refusals and failures; the format is egress_audit_write's), the bound on the file,
 * the connection numbers, and the per-sandbox rate limit. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/audit.h"
#include "egress/broker_slot.h"

/* A sandbox's refusal lines (busy, rate_limited) a second at most: see broker_audit_refusal. */
#define REFUSAL_LINES_PER_S 10

/* The run's egress.jsonl, O_APPEND; read and write, for the dropped line (audit_dropped). */
int broker_audit_open(struct sandbox *sb)
{
	if (!transcript_of(sb)->run.open || transcript_of(sb)->run.dirfd < 0)
		return ERR_STATE;
	int fd = openat(transcript_of(sb)->run.dirfd, "egress.jsonl",
			O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);

	return fd < 0 ? -errno : fd;
}

/* Connection numbers, unique in every egress.jsonl across agenticd's restarts: the next one
 * not handed out yet is kept in state_dir/egress-conn, written CONN_BLOCK ahead (a restart
 * skips what the last start reserved and did not use, never reuses one). A file that cannot
 * be read starts at this start's wall clock in microseconds, beyond any number a host makes
 * at one a microsecond. */
#define CONN_BLOCK 4096u
static uint64_t next_conn;             /* see broker_conn_next */
static uint64_t conn_reserved;

static void conn_path(char *out, size_t cap)
{
	snprintf(out, cap, "%s/egress-conn", bst.cfg->state_dir);
}

static void conn_reserve(uint64_t upto)
{
	char path[LIMIT_PATH_BYTES], tmp[LIMIT_PATH_BYTES + 8], num[32];
	int n = snprintf(num, sizeof(num), "%llu\n", (unsigned long long)upto), fd;

	conn_path(path, sizeof(path));
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0 || write(fd, num, (size_t)n) != n || fsync(fd) != 0 || rename(tmp, path) != 0)
		log_warn("egress connection numbers not kept", "error=%s", log_q(err_str(-errno)));
	if (fd >= 0)
		close(fd);
	conn_reserved = upto;
}

void broker_conn_load(void)
{
	char path[LIMIT_PATH_BYTES], num[32] = "";
	int fd;
	ssize_t n = -1;

	conn_path(path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
		n = read(fd, num, sizeof(num) - 1);
		close(fd);
	}
	next_conn = n > 0 ? strtoull(num, NULL, 10) : 0;
	if (next_conn == 0)
		next_conn = (uint64_t)clock_wall_ms() * 1000;
	conn_reserve(next_conn + CONN_BLOCK);
}

uint64_t broker_conn_next(void)
{
	if (next_conn + 1 >= conn_reserved)
		conn_reserve(next_conn + 1 + CONN_BLOCK);
	return next_conn++;
}

/* The line that stands for those dropped past egress_audit_max_bytes: always AUDIT_DROPPED_BYTES
 * long, the count padded, so that it is rewritten in place as drops go on (and found again
 * after a restart: the file's last bytes). */
#define AUDIT_DROPPED_HEAD "{\"kind\":\"audit_dropped\",\"ts\":\""
#define AUDIT_DROPPED_BYTES 96
_Static_assert(sizeof(AUDIT_DROPPED_HEAD) - 1 + 24 + 14 + 20 + 3 <= AUDIT_DROPPED_BYTES,
	       "the dropped line fits its width");

static int audit_dropped(int fd, off_t size)
{
	char line[AUDIT_DROPPED_BYTES + 1], ts[64];
	unsigned long long dropped = 0;
	off_t at = size;
	int n;

	if (size >= AUDIT_DROPPED_BYTES &&
	    pread(fd, line, AUDIT_DROPPED_BYTES, size - AUDIT_DROPPED_BYTES) == AUDIT_DROPPED_BYTES &&
	    memcmp(line, AUDIT_DROPPED_HEAD, sizeof(AUDIT_DROPPED_HEAD) - 1) == 0 &&
	    line[AUDIT_DROPPED_BYTES - 1] == '\n') {
		line[AUDIT_DROPPED_BYTES - 1] = '\0';
		const char *d = strstr(line, "\"dropped\":");

		if (d)
			dropped = strtoull(d + 10, NULL, 10);
		at = size - AUDIT_DROPPED_BYTES;
	}
	egress_audit_ts(ts, sizeof(ts));
	n = snprintf(line, sizeof(line), AUDIT_DROPPED_HEAD "%s\",\"dropped\":%-20llu", ts,
		     dropped + 1);
	if (n < 0 || n > AUDIT_DROPPED_BYTES - 2)
		return ERR_LIMIT;
	memset(line + n, ' ', (size_t)(AUDIT_DROPPED_BYTES - 2 - n));
	line[AUDIT_DROPPED_BYTES - 2] = '}';
	line[AUDIT_DROPPED_BYTES - 1] = '\n';
	/* in place: O_APPEND off, or pwrite would append (Linux) */
	if (fcntl(fd, F_SETFL, 0) != 0)
		return -errno;
	return pwrite(fd, line, AUDIT_DROPPED_BYTES, at) == AUDIT_DROPPED_BYTES ? 0 : -EIO;
}

/* Appends one line to sb's egress.jsonl with one write(2), while the file stays within
 * egress_audit_max_bytes (room kept for the dropped line); past it the line is dropped and
 * counted in the file's last line. agenticd is the file's only writer (docs/EGRESS.md
 * "Audit"). */
static int audit_put(struct sandbox *sb, const char *line, size_t len)
{
	struct stat st;
	int fd = broker_audit_open(sb), r;

	if (fd < 0)
		return fd;
	if (fstat(fd, &st) != 0)
		r = -errno;
	else if ((uint64_t)st.st_size + len + AUDIT_DROPPED_BYTES <= bst.cfg->egress_audit_max_bytes &&
		 transcript_of(sb)->used + len <= sandbox_transcript_budget(sb)) {
		/* the run's files share one budget: what the audit keeps is the transcript's too */
		r = write(fd, line, len) == (ssize_t)len ? 0 : -errno;
		if (r == 0)
			transcript_charge(sb, len);
	} else
		r = audit_dropped(fd, st.st_size);
	close(fd);
	return r;
}

/* One line of sb's run: f's fields, with name, instance and conn. */
int broker_audit_line(struct sandbox *sb, const char *name, const char *instance, uint64_t conn,
		      const struct egress_audit *f)
{
	static char line[CTL_BYTES];
	struct egress_audit a = *f;
	struct buf b;

	a.sandbox = name;
	a.instance = instance;
	a.conn = (int64_t)conn;
	buf_init(&b, line, sizeof(line) - 1);
	if (egress_audit_write(&b, &a) != 0)
		return ERR_LIMIT;
	line[b.len++] = '\n';
	return audit_put(sb, line, b.len);
}

/* A refusal of agenticd's own: no worker, no request read. */
int broker_audit_refused(struct sandbox *sb, const char *name, const char *instance,
			 uint64_t conn, const char *reason, int status, int64_t duration_ms,
			 const char *end, uint64_t suppressed)
{
	const struct egress_audit f = { .kind = "unknown", .decision = "deny", .reason = reason,
					.end = end, .status = status, .duration_ms = duration_ms,
					.suppressed = suppressed };

	return broker_audit_line(sb, name, instance, conn, &f);
}

/* ---- the rate limit: a token bucket per sandbox ---- */

static uint32_t policy_rate(const char *json)
{
	struct json_doc d;
	int64_t v;
	int i;

	if (json_parse(&d, json, strlen(json), broker_toks, POLICY_TOKENS) != 0 || broker_toks[0].type != JSON_OBJECT)
		return EGRESS_RATE_DEFAULT;
	i = json_obj_get(&d, 0, "rate_per_minute");
	if (i < 0 || json_int(&d, i, &v) != 0 || v < 1 || v > 1000000)
		return EGRESS_RATE_DEFAULT;
	return (uint32_t)v;
}

/* The sandbox's bucket (a new sandbox in the slot: a full one, no refusals). */
static struct bucket *bucket_of(const struct sandbox *sb)
{
	struct bucket *b = &bst.buckets[sandbox_index(sb) % bst.nbuckets];

	if (b->gen != sb->gen) {
		memset(b, 0, sizeof(*b));
		b->gen = sb->gen;
	}
	return b;
}

/* Takes a token of the sandbox's bucket. */
bool broker_rate_take(struct sandbox *sb)
{
	return egress_bucket_take(&bucket_of(sb)->b, policy_rate(sb->egress_json), clock_mono_ms());
}

/* The audit line of a call refused before any worker (busy, rate_limited). A workload that
 * opens and closes connections in a loop is refused as fast as it can: a line each would grow
 * egress.jsonl without bound and keep agenticd's loop writing a file. So at most
 * REFUSAL_LINES_PER_S a second a sandbox are written; the rest are counted (in /metrics as
 * every one is) and the next line written says how many it stands for ("suppressed"). */
void broker_audit_refusal(struct sandbox *sb, const char *reason, int status)
{
	struct bucket *b = bucket_of(sb);
	int64_t sec = clock_mono_ms() / 1000;

	if (b->refused_sec != sec) {
		b->refused_sec = sec;
		b->refused_lines = 0;
	}
	if (b->refused_lines >= REFUSAL_LINES_PER_S) {
		b->suppressed++;
		b->suppressed_reason = reason;
		b->suppressed_status = status;
		return;
	}
	if (broker_audit_refused(sb, sb->name, sb->instance_id, broker_conn_next(), reason, status, 0, "closed",
			  b->suppressed) == 0) {
		b->refused_lines++;
		b->suppressed = 0;
	}
}
