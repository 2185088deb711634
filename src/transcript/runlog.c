/* runlog.c: a sandbox's run transcripts (docs/TRANSCRIPTS.md). agenticd writes them on the host from
 * the streamed output, so a workload cannot edit its own transcript. A run is one lifetime of
 * the sandbox's init; its key is the init's pid namespace, written in the run's first event,
 * so a reconnect (or an agenticd restart) continues the run and a container restart begins a
 * new one. Directories are made 0700 and files opened 0600: never chmod after the fact. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "json/json.h"
#include "base/base.h"
#include "config/config.h"
#include "sandbox/sandbox.h"
#include "workspace/host.h"
#include "transcript/runlog.h"

static const char *const file_names[RUN_FILES] = {
	"stdout.log", "stderr.log", "commands.log", "trace/events.jsonl",
};

/* What tells one lifetime of the init from the next: the container's pid namespace, its
 * init's host pid and that process's start time (namespace inode numbers are reused at once,
 * measured across a docker restart). */
static const struct config *cfg; /* agenticd.c's, handed over at start (runlog_init) */

void runlog_init(const struct config *c)
{
	cfg = c;
}

static void run_key(const struct sandbox *sb, char *out, size_t size)
{
	char path[64], stat[512];
	const char *p;
	unsigned long long start = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/stat", (long long)sb->pid);
	fd = sb->pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	n = fd >= 0 ? read(fd, stat, sizeof(stat) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		stat[n] = '\0';
		/* field 22; the command name (field 2) may hold spaces, so count after ')' */
		p = strrchr(stat, ')');
		for (int f = 2; p && f < 22; f++)
			p = strchr(p + 1, ' ');
		if (p)
			start = strtoull(p + 1, NULL, 10);
	}
	snprintf(out, size, "%s/%lld/%llu", sb->pid_ns, (long long)sb->pid, start);
}

static void write_error(struct sandbox *sb, enum run_file f, int err)
{
	if (sb->run.error)
		return;
	sb->run.error = -err;
	sb->run.error_file = (int)f;
	log_error("transcript write failed", "name=%s instance=%s run=%s file=%s error=%s",
		  log_q(sb->name), log_q(sb->instance_id), log_q(sb->run.name), file_names[f],
		  log_q(strerror(err)));
}

/* Writes what it can; returns how much that was. A failure is logged once until a later
 * write succeeds again. Without an open run (its failure to open was logged) there is nothing
 * to write to, and all of it counts as done: nothing would ever take it. */
static size_t put(struct sandbox *sb, enum run_file f, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t done = 0;

	if (!sb->run.open || sb->run.fd[f] < 0)
		return len;
	while (done < len) {
		ssize_t n = write(sb->run.fd[f], p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			write_error(sb, f, n < 0 ? errno : ENOSPC);
			sb->transcript_used += done;
			return done;
		}
		done += (size_t)n;
	}
	sb->transcript_used += done;
	if (sb->run.error && (int)f == sb->run.error_file) {
		log_info("transcript writes resumed", "name=%s run=%s file=%s", log_q(sb->name),
			 log_q(sb->run.name), file_names[f]);
		sb->run.error = 0;
	}
	return done;
}

static void utc(int64_t ms, char *out, size_t size, bool compact)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	if (compact)
		strftime(out, size, "%Y%m%dT%H%M%SZ", &tm);
	else
		snprintf(out + strftime(out, size, "%Y-%m-%dT%H:%M:%S", &tm), 16, ".%03dZ",
			 (int)(ms % 1000));
}

static void line_begin(struct json_writer *w, struct buf *b, char *store, size_t size,
		       const char *event)
{
	char ts[40];

	buf_init(b, store, size);
	json_writer_init(w, b);
	utc(clock_wall_ms(), ts, sizeof(ts), false);
	json_obj_begin(w);
	json_key(w, "ts");
	json_str_write(w, ts);
	json_key(w, "event");
	json_str_write(w, event);
}

/* A line past the sandbox's transcript budget is not written, and is counted as if it were:
 * the command it tells of goes on. */
static bool line_fits(struct sandbox *sb, size_t len)
{
	if (!sb->run.open || sb->transcript_used + len <= sandbox_transcript_budget(sb))
		return true;
	if (!sb->run.lines_dropped++)
		log_warn("transcript lines cut", "name=%s run=%s budget=%llu", log_q(sb->name),
			 log_q(sb->run.name), (unsigned long long)sandbox_transcript_budget(sb));
	return false;
}

/* true when the whole line was written, or the budget dropped it; always: written past the
 * budget (a run's first line, its key) */
static bool line_end(struct sandbox *sb, enum run_file f, struct json_writer *w, struct buf *b,
		     bool always)
{
	size_t n;
	struct stat st;

	json_obj_end(w);
	if (json_writer_finish(w) != 0 || buf_append(b, "\n", 1) != 0)
		return false;
	if (!always && !line_fits(sb, b->len))
		return true;
	n = put(sb, f, b->data, b->len);
	/* half a line would stay in front of the whole one written when it is tried again */
	if (n && n < b->len && fstat(sb->run.fd[f], &st) == 0 && (uint64_t)st.st_size >= n &&
	    ftruncate(sb->run.fd[f], st.st_size - (off_t)n) == 0)
		sb->transcript_used -= n;
	return n == b->len;
}

static void event_line(struct sandbox *sb, const char *event, const char *const *kv,
		       bool always);

void runlog_event(struct sandbox *sb, const char *event)
{
	event_line(sb, event, NULL, false);
}

void runlog_event_fields(struct sandbox *sb, const char *event, const char *const *kv)
{
	event_line(sb, event, kv, false);
}

static void event_line(struct sandbox *sb, const char *event, const char *const *kv,
		       bool always)
{
	char store[1024];
	struct buf b;
	struct json_writer w;

	line_begin(&w, &b, store, sizeof(store), event);
	for (; kv && kv[0] && kv[1]; kv += 2) {
		json_key(&w, kv[0]);
		json_str_write(&w, kv[1]);
	}
	json_key(&w, "name");
	json_str_write(&w, sb->name);
	json_key(&w, "instance_id");
	json_str_write(&w, sb->instance_id);
	json_key(&w, "control_uid");
	json_int_write(&w, sb->uid);
	json_key(&w, "container_pid");
	json_int_write(&w, sb->pid);
	json_key(&w, "run_key");
	json_str_write(&w, sb->run.key);
	line_end(sb, RUN_EVENTS, &w, &b, always);
}

/* metrics.json is never rewritten inside an exec's round trip: its atomic replace (a temp
 * file renamed over it) makes ext4 write the new file's data out at the rename
 * (auto_da_alloc), measured at 0.3 to 5 ms with other disk traffic. A command's start is in
 * it within RUN_METRICS_DELAY_MS; its end right after its client has its exit status, at the
 * end of the same turn of the loop, so whoever saw a command end finds it counted. */

/* the earliest metrics_due of any sandbox, or INT64_MAX: spares the loop a scan per turn */
static int64_t run_metrics_next = INT64_MAX;

static void run_metrics_stale(struct sandbox *sb, int64_t delay_ms)
{
	int64_t due = clock_mono_ms() + delay_ms;

	if (!sb->run.metrics_due || due < sb->run.metrics_due)
		sb->run.metrics_due = due;
	if (due < run_metrics_next)
		run_metrics_next = due;
}

static void write_metrics(struct sandbox *sb, bool final)
{
	char store[2048], ts[40];
	struct buf b;
	struct json_writer w;
	int fd;

	sb->run.metrics_due = 0;
	if (!sb->run.open)
		return;
	buf_init(&b, store, sizeof(store));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "run");
	json_str_write(&w, sb->run.name);
	json_key(&w, "sandbox");
	json_str_write(&w, sb->name);
	json_key(&w, "instance_id");
	json_str_write(&w, sb->instance_id);
	utc(sb->run.started_ms, ts, sizeof(ts), false);
	json_key(&w, "started_at");
	json_str_write(&w, ts);
	json_key(&w, "ended_at");
	if (final) {
		utc(clock_wall_ms(), ts, sizeof(ts), false);
		json_str_write(&w, ts);
	} else {
		json_null_write(&w);
	}
	json_key(&w, "commands");
	json_int_write(&w, sb->run.commands);
	json_key(&w, "commands_running");
	json_int_write(&w, sb->run.running);
	json_key(&w, "stdout_bytes");
	json_int_write(&w, (int64_t)sb->run.bytes[0]);
	json_key(&w, "stderr_bytes");
	json_int_write(&w, (int64_t)sb->run.bytes[1]);
	json_key(&w, "transcript_budget");
	json_int_write(&w, (int64_t)sandbox_transcript_budget(sb));
	json_key(&w, "transcript_used");
	json_int_write(&w, (int64_t)sb->transcript_used);
	for (int s = 0; s < 2; s++) {
		json_key(&w, s ? "stderr_dropped" : "stdout_dropped");
		json_int_write(&w, (int64_t)sb->run.dropped[s]);
		json_key(&w, s ? "stderr_mark" : "stdout_mark");
		json_int_write(&w, (int64_t)sb->run.mark[s]);
	}
	json_key(&w, "lines_dropped");
	json_int_write(&w, (int64_t)sb->run.lines_dropped);
	json_key(&w, "exit_codes");
	json_obj_begin(&w);
	for (uint32_t i = 0; i < sb->run.ncodes; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%d", sb->run.codes[i]);
		json_key(&w, k);
		json_int_write(&w, sb->run.code_count[i]);
	}
	json_obj_end(&w);
	json_key(&w, "write_error");
	if (sb->run.error)
		json_str_write(&w, strerror(-sb->run.error));
	else
		json_null_write(&w);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0 || buf_append(&b, "\n", 1) != 0)
		return;
	/* a reader never sees half a file: temp, then rename */
	fd = openat(sb->run.dirfd, "metrics.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
		    O_NOFOLLOW, 0600);
	if (fd < 0) {
		write_error(sb, RUN_EVENTS, errno);
		return;
	}
	if (write(fd, b.data, b.len) != (ssize_t)b.len) {
		write_error(sb, RUN_EVENTS, errno ? errno : ENOSPC);
		close(fd);
		unlinkat(sb->run.dirfd, "metrics.json.tmp", 0);
		return;
	}
	close(fd);
	if (renameat(sb->run.dirfd, "metrics.json.tmp", sb->run.dirfd, "metrics.json") != 0)
		write_error(sb, RUN_EVENTS, errno);
}

static int instance_fd(const struct sandbox *sb)
{
	char dir[LIMIT_PATH_BYTES];

	if (host_instance_dir(cfg, sb->instance_id, dir, sizeof(dir)) != 0)
		return -ENAMETOOLONG;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	return fd < 0 ? -errno : fd;
}

static int open_files(struct sandbox *sb)
{
	for (int f = 0; f < RUN_FILES; f++) {
		sb->run.fd[f] = openat(sb->run.dirfd, file_names[f], O_WRONLY | O_CREAT | O_APPEND |
				       O_CLOEXEC | O_NOFOLLOW, 0600);
		if (sb->run.fd[f] < 0)
			return -errno;
	}
	return 0;
}

static void close_files(struct sandbox *sb)
{
	for (int f = 0; f < RUN_FILES; f++)
		if (sb->run.fd[f] >= 0) {
			close(sb->run.fd[f]);
			sb->run.fd[f] = -1;
		}
	if (sb->run.dirfd >= 0)
		close(sb->run.dirfd);
	sb->run.dirfd = -1;
	sb->run.open = false;
}

void runlog_abandon(struct sandbox *sb)
{
	if (sb->run.open)
		close_files(sb);
}

/* The seq of the last result commands.log holds (its last "seq" key), read backwards from
 * the end in blocks; 0 when there is none. Only a key can hold the quoted text "seq": inside
 * a JSON string its quotes are escaped. */
static uint64_t last_result_seq(int fd)
{
	static const char key[] = "\"seq\":";
	char blk[65536 + sizeof(key)];
	struct stat st;
	off_t end;

	if (fstat(fd, &st) != 0)
		return 0;
	for (end = st.st_size; end > 0;) {
		size_t want = end > 65536 ? 65536 : (size_t)end;
		/* the block overlaps the next one by the key's length, so a key across the
		 * boundary is seen */
		size_t len = want + ((uint64_t)(st.st_size - end) >= sizeof(key) - 1
				     ? sizeof(key) - 1 : (size_t)(st.st_size - end));
		ssize_t n = pread(fd, blk, len, end - (off_t)want);

		if (n <= 0)
			return 0;
		for (ssize_t i = n - (ssize_t)(sizeof(key) - 1); i >= 0; i--)
			if (memcmp(blk + i, key, sizeof(key) - 1) == 0) {
				/* the digits may run past this block: read them on their own */
				char num[24];
				uint64_t v = 0;
				ssize_t m = pread(fd, num, sizeof(num), end - (off_t)want + i +
						  (off_t)sizeof(key) - 1);

				for (ssize_t k = 0; k < m && num[k] >= '0' && num[k] <= '9'; k++)
					v = v * 10 + (uint64_t)(num[k] - '0');
				return v;
			}
		end -= (off_t)want;
	}
	return 0;
}

static uint64_t metric(const struct json_doc *doc, const char *key)
{
	int64_t v;

	return json_int(doc, json_obj_get(doc, 0, key), &v) == 0 && v > 0 ? (uint64_t)v : 0;
}

/* An adopted run's counters from its metrics.json: commands, exit codes, the cuts. */
static void adopt_metrics(struct sandbox *sb, int rfd)
{
	char text[2048];
	struct json_token tok[160];
	struct json_doc doc;
	int mf = openat(rfd, "metrics.json", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	ssize_t n = mf < 0 ? -1 : read(mf, text, sizeof(text));

	if (mf >= 0)
		close(mf);
	if (n <= 0 || json_parse(&doc, text, (size_t)n, tok, ARRAY_LEN(tok)) != 0)
		return;
	int codes = json_obj_get(&doc, 0, "exit_codes");

	sb->run.commands = (uint32_t)metric(&doc, "commands");
	for (int s = 0; s < 2; s++) {
		sb->run.dropped[s] = metric(&doc, s ? "stderr_dropped" : "stdout_dropped");
		sb->run.mark[s] = metric(&doc, s ? "stderr_mark" : "stdout_mark");
		sb->run.cut[s] = sb->run.dropped[s] || sb->run.mark[s];
	}
	sb->run.lines_dropped = metric(&doc, "lines_dropped");
	for (int k = codes >= 0 ? json_first(&doc, codes) : -1; k >= 0 && sb->run.ncodes < RUN_CODES;
	     k = json_next(&doc, codes, json_next(&doc, codes, k))) {
		char num[16];
		int64_t count;

		if (json_str(&doc, k, num, sizeof(num)) < 0 || json_int(&doc, k + 1, &count) != 0)
			continue;
		sb->run.codes[sb->run.ncodes] = (int32_t)strtol(num, NULL, 10);
		sb->run.code_count[sb->run.ncodes++] = (uint32_t)count;
	}
}

/* The current run of this instance, when its first event names key: agenticd restarted while
 * the init ran on. The counters come back from metrics.json and the file sizes. */
static bool adopt(struct sandbox *sb, int ifd, const char *key)
{
	char target[RUN_NAME_BYTES + 8], head[1024], want[160];
	size_t tl;
	struct stat st;
	ssize_t n;
	int fd;

	n = readlinkat(ifd, "current", target, sizeof(target) - 1);
	if (n <= 5 || strncmp(target, "runs/", 5) != 0)
		return false;
	target[n] = '\0';
	fd = openat(ifd, target, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return false;
	int ef = openat(fd, "trace/events.jsonl", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	n = ef < 0 ? -1 : pread(ef, head, sizeof(head) - 1, 0);
	if (ef >= 0)
		close(ef);
	snprintf(want, sizeof(want), "\"run_key\":\"%s\"", key);
	if (n <= 0 || (head[n] = '\0', !strstr(head, want)) || strstr(head, "\"event\":\"stop\"")) {
		close(fd);
		return false;
	}
	memset(&sb->run, 0, sizeof(sb->run));
	sb->run.dirfd = fd;
	tl = strlen(target + 5);
	if (tl >= sizeof(sb->run.name))
		tl = sizeof(sb->run.name) - 1;
	memcpy(sb->run.name, target + 5, tl);
	sb->run.name[tl] = '\0';
	snprintf(sb->run.key, sizeof(sb->run.key), "%s", key);
	for (int f = 0; f < RUN_FILES; f++)
		sb->run.fd[f] = -1;
	if (open_files(sb) != 0) {
		close_files(sb);
		return false;
	}
	sb->run.open = true;
	sb->run.started_ms = clock_wall_ms();
	int cf = openat(fd, "commands.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	sb->out_results = cf < 0 ? 0 : last_result_seq(cf);
	if (cf >= 0)
		close(cf);
	adopt_metrics(sb, fd);
	/* the init numbers its output from the start of its life, which is this run's: what
	 * the file has of it (its size less a cut's mark) and what a cut dropped */
	for (int s = 0; s < 2; s++) {
		if (fstat(sb->run.fd[s], &st) == 0)
			sb->run.bytes[s] = (uint64_t)st.st_size;
		if (sb->run.mark[s] > sb->run.bytes[s])
			sb->run.mark[s] = sb->run.bytes[s];
		sb->run.bytes[s] -= sb->run.mark[s];
		sb->out_next[s] = sb->run.bytes[s] + sb->run.dropped[s];
	}
	return true;
}

/* The bytes of the regular files under the directory fd (closed here), depth directories
 * down at most; links are not followed. */
static uint64_t usage(int fd, int depth)
{
	char buf[4096];
	uint64_t sum = 0;
	struct stat st;
	long n;

	while ((n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0)
		for (long off = 0; off < n;) {
			struct dirent64_raw *de = (void *)(buf + off);

			off += de->reclen;
			if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0 ||
			    fstatat(fd, de->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			if (S_ISREG(st.st_mode))
				sum += (uint64_t)st.st_size;
			else if (S_ISDIR(st.st_mode) && depth > 0) {
				int sub = openat(fd, de->name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
						 O_NOFOLLOW);

				if (sub >= 0)
					sum += usage(sub, depth - 1);
			}
		}
	close(fd);
	return sum;
}

/* What the sandbox's runs hold: runs/<run>/ and its trace/. */
static uint64_t runs_usage(int ifd)
{
	int fd = openat(ifd, "runs", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	return fd < 0 ? 0 : usage(fd, 2);
}

static int make_run(struct sandbox *sb, int ifd, const char *key)
{
	char stamp[24], name[RUN_NAME_BYTES], path[RUN_NAME_BYTES + 8];
	int64_t now = clock_wall_ms();

	memset(&sb->run, 0, sizeof(sb->run));
	sb->run.dirfd = -1;
	for (int f = 0; f < RUN_FILES; f++)
		sb->run.fd[f] = -1;
	sb->out_next[0] = sb->out_next[1] = sb->out_results = 0;
	if (mkdirat(ifd, "runs", 0700) != 0 && errno != EEXIST)
		return -errno;
	utc(now, stamp, sizeof(stamp), true);
	for (int n = 1;; n++) {
		snprintf(name, sizeof(name), "run-%s-%d", stamp, n);
		snprintf(path, sizeof(path), "runs/%s", name);
		if (mkdirat(ifd, path, 0700) == 0)
			break;
		if (errno != EEXIST || n > 1000)
			return -errno;
	}
	sb->run.dirfd = openat(ifd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (sb->run.dirfd < 0)
		return -errno;
	if (mkdirat(sb->run.dirfd, "trace", 0700) != 0)
		return -errno;
	snprintf(sb->run.name, sizeof(sb->run.name), "%s", name);
	snprintf(sb->run.key, sizeof(sb->run.key), "%s", key);
	sb->run.started_ms = now;
	int r = open_files(sb);

	if (r != 0)
		return r;
	sb->run.open = true;
	/* current -> runs/<name>, replaced atomically */
	unlinkat(ifd, "current.new", 0);
	if (symlinkat(path, ifd, "current.new") != 0 ||
	    renameat(ifd, "current.new", ifd, "current") != 0)
		return -errno;
	return 0;
}

bool runlog_ready(struct sandbox *sb)
{
	char key[sizeof(sb->run.key)];
	int ifd, r;

	run_key(sb, key, sizeof(key));
	if (sb->run.open && strcmp(sb->run.key, key) == 0) {
		runlog_event(sb, "reconnected");
		return false;
	}
	if (sb->run.open)
		runlog_stop(sb, "restarted");
	ifd = instance_fd(sb);
	if (ifd < 0) {
		log_error("no transcript", "name=%s instance=%s error=%s", log_q(sb->name),
			  log_q(sb->instance_id), log_q(strerror(-ifd)));
		return false;
	}
	sb->transcript_used = runs_usage(ifd);
	if (sb->pid_ns[0] && adopt(sb, ifd, key)) {
		close(ifd);
		runlog_event(sb, "reconnected");
		log_info("run continued", "name=%s run=%s", log_q(sb->name), log_q(sb->run.name));
		return false;
	}
	r = make_run(sb, ifd, key);
	close(ifd);
	if (r != 0) {
		log_error("cannot start a run", "name=%s instance=%s error=%s", log_q(sb->name),
			  log_q(sb->instance_id), log_q(strerror(-r)));
		close_files(sb);
		sb->run.error = r;
		return false;
	}
	event_line(sb, "run_start", NULL, true);
	if (sb->state == SB_CREATING)
		runlog_event(sb, "created");
	runlog_event(sb, "registered");
	runlog_event(sb, "ready");
	write_metrics(sb, false);
	log_info("run started", "name=%s run=%s", log_q(sb->name), log_q(sb->run.name));
	return true;
}

void runlog_stop(struct sandbox *sb, const char *why)
{
	if (!sb->run.open)
		return;
	runlog_event(sb, why);
	runlog_event(sb, "stop");
	write_metrics(sb, true);
	close_files(sb);
}

/* The stream's budget is spent: its mark in its file (within the budget's room for lines),
 * an event, a log line, and from now on its bytes are counted, never written. */
static void cut(struct sandbox *sb, int s, uint64_t dropped)
{
	enum run_file f = s ? RUN_STDERR : RUN_STDOUT;
	uint64_t budget = sandbox_transcript_budget(sb);
	char mark[256], store[512];
	struct json_writer w;
	struct buf b;
	int n;

	sb->run.cut[s] = true;
	sb->run.dropped[s] += dropped;
	n = snprintf(mark, sizeof(mark), "\n[agentic: transcript cut: the sandbox's transcript "
		     "budget of %llu bytes is spent; its later %s is not recorded (metrics.json "
		     "%s_dropped counts it)]\n", (unsigned long long)budget, s ? "stderr" : "stdout",
		     s ? "stderr" : "stdout");
	if (line_fits(sb, (size_t)n))
		sb->run.mark[s] = put(sb, f, mark, (size_t)n);
	line_begin(&w, &b, store, sizeof(store), "transcript_cut");
	json_key(&w, "file");
	json_str_write(&w, file_names[f]);
	json_key(&w, "budget");
	json_int_write(&w, (int64_t)budget);
	json_key(&w, "run_key");
	json_str_write(&w, sb->run.key);
	line_end(sb, RUN_EVENTS, &w, &b, false);
	log_warn("transcript cut", "name=%s run=%s file=%s budget=%llu", log_q(sb->name),
		 log_q(sb->run.name), file_names[f], (unsigned long long)budget);
	run_metrics_stale(sb, 0);
}

size_t runlog_output(struct sandbox *sb, int stream, const void *data, size_t len)
{
	uint64_t budget, room;
	size_t n;

	if (stream < 0 || stream > 1)
		return 0;
	if (!sb->run.open)
		return len; /* nowhere to write: all of it done */
	if (sb->run.cut[stream]) {
		sb->run.dropped[stream] += len;
		return len;
	}
	budget = sandbox_transcript_budget(sb);
	budget -= budget / LIMIT_TRANSCRIPT_LINES_DIV;
	room = sb->transcript_used < budget ? budget - sb->transcript_used : 0;
	n = put(sb, stream == 0 ? RUN_STDOUT : RUN_STDERR, data, len < room ? len : (size_t)room);
	sb->run.bytes[stream] += n;
	if (n == len || n < room)
		return n; /* all of it, or a write that failed (sent again) */
	cut(sb, stream, len - n);
	return len;
}

bool runlog_skip(struct sandbox *sb, int stream, uint64_t len)
{
	if (stream < 0 || stream > 1 || !sb->run.open || !sb->run.cut[stream])
		return false;
	sb->run.dropped[stream] += len;
	return true;
}

bool runlog_command_start(struct sandbox *sb, const char *id, char *const *argv, size_t n)
{
	char store[LIMIT_ADMIN_BODY_BYTES + 256];
	struct buf b;
	struct json_writer w;

	line_begin(&w, &b, store, sizeof(store), "start");
	json_key(&w, "id");
	json_str_write(&w, id);
	json_key(&w, "argv");
	json_arr_begin(&w);
	for (size_t i = 0; i < n; i++)
		json_str_write(&w, argv[i]);
	json_arr_end(&w);
	if (!line_end(sb, RUN_COMMANDS, &w, &b, false))
		return false;
	sb->run.commands++;
	sb->run.running++;
	line_begin(&w, &b, store, sizeof(store), "command_start");
	json_key(&w, "id");
	json_str_write(&w, id);
	line_end(sb, RUN_EVENTS, &w, &b, false);
	run_metrics_stale(sb, RUN_METRICS_DELAY_MS);
	return true;
}

bool runlog_command_end(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
			uint64_t seq)
{
	char store[512];
	struct buf b;
	struct json_writer w;
	uint32_t i;
	bool done;

	line_begin(&w, &b, store, sizeof(store), "end");
	json_key(&w, "id");
	json_str_write(&w, id);
	json_key(&w, "exit_code");
	json_int_write(&w, code);
	json_key(&w, "duration_ms");
	json_int_write(&w, duration_ms);
	if (seq) {
		json_key(&w, "seq");
		json_int_write(&w, (int64_t)seq);
	}
	/* the line is what a resent result is checked against: without it the result is not
	 * counted, since it comes again; one of agenticd's own (seq 0) will not, and counts */
	done = line_end(sb, RUN_COMMANDS, &w, &b, false);
	if (!done && seq)
		return false;
	if (sb->run.running)
		sb->run.running--;
	for (i = 0; i < sb->run.ncodes && sb->run.codes[i] != code; i++)
		;
	if (i < RUN_CODES) {
		if (i == sb->run.ncodes) {
			sb->run.codes[i] = code;
			sb->run.ncodes++;
		}
		sb->run.code_count[i]++;
	}
	line_begin(&w, &b, store, sizeof(store), "command_end");
	json_key(&w, "id");
	json_str_write(&w, id);
	json_key(&w, "exit_code");
	json_int_write(&w, code);
	line_end(sb, RUN_EVENTS, &w, &b, false);
	run_metrics_stale(sb, 0);
	return done;
}

int runlog_open(const struct sandbox *sb, const char *run, int stream, int *fd)
{
	char path[RUN_NAME_BYTES + 32];
	int ifd = instance_fd(sb);

	if (ifd < 0)
		return ifd;
	if (run && *run) {
		for (const char *p = run; *p; p++)
			if (!((*p >= '0' && *p <= '9') || (*p >= 'A' && *p <= 'Z') || *p == '-' ||
			      (*p >= 'a' && *p <= 'z')))
				return close(ifd), -EINVAL;
		if (strlen(run) >= RUN_NAME_BYTES)
			return close(ifd), -EINVAL;
		snprintf(path, sizeof(path), "runs/%s/%s", run, stream ? "stderr.log" : "stdout.log");
	} else {
		snprintf(path, sizeof(path), "current/%s", stream ? "stderr.log" : "stdout.log");
	}
	*fd = openat(ifd, path, O_RDONLY | O_CLOEXEC);
	close(ifd);
	return *fd < 0 ? -errno : 0;
}

void runlog_tick(int64_t now)
{
	if (now < run_metrics_next)
		return;
	run_metrics_next = INT64_MAX;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->state == SB_FREE || !sb->run.metrics_due)
			continue;
		if (now >= sb->run.metrics_due)
			write_metrics(sb, false);
		else if (sb->run.metrics_due < run_metrics_next)
			run_metrics_next = sb->run.metrics_due;
	}
}

int64_t runlog_next_deadline(void)
{
	return run_metrics_next;
}
