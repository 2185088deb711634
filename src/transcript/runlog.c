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

#include "base/base.h"
#include "config/config.h"
#include "json/json.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "workspace/host.h"

/* sb's entry, writable: the table is this module's (transcript.c), transcript_of's answer */
static struct transcript_sb *transcript_slot(const struct sandbox *sb)
{
	return (struct transcript_sb *)transcript_of(sb);
}

static const char *const file_names[RUN_FILES] = {
	"stdout.log", "stderr.log", "commands.log", "trace/events.jsonl",
};

/* What tells one lifetime of the init from the next: the container's pid namespace, its
 * init's host pid and that process's start time (namespace inode numbers are reused at once,
 * measured across a docker restart). */
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
	struct transcript_sb *t = transcript_slot(sb);

	if (t->run.error)
		return;
	t->run.error = -err;
	t->run.error_file = (int)f;
	log_error("transcript write failed", "name=%s instance=%s run=%s file=%s error=%s",
		  log_q(sb->name), log_q(sb->instance_id), log_q(t->run.name), file_names[f],
		  log_q(strerror(err)));
}

/* Writes what it can; returns how much that was. A failure is logged once until a later
 * write succeeds again. Without an open run (its failure to open was logged) there is nothing
 * to write to, and all of it counts as done: nothing would ever take it. */
static size_t put(struct sandbox *sb, enum run_file f, const void *data, size_t len)
{
	struct transcript_sb *t = transcript_slot(sb);
	const uint8_t *p = data;
	size_t done = 0;

	if (!t->run.open || t->run.fd[f] < 0)
		return len;
	while (done < len) {
		ssize_t n = write(t->run.fd[f], p + done, len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			write_error(sb, f, n < 0 ? errno : ENOSPC);
			t->used += done;
			return done;
		}
		done += (size_t)n;
	}
	t->used += done;
	if (t->run.error && (int)f == t->run.error_file) {
		log_info("transcript writes resumed", "name=%s run=%s file=%s", log_q(sb->name),
			 log_q(t->run.name), file_names[f]);
		t->run.error = 0;
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
	struct transcript_sb *t = transcript_slot(sb);

	if (!t->run.open || t->used + len <= sandbox_transcript_budget(sb))
		return true;
	if (!t->run.lines_dropped++)
		log_warn("transcript lines cut", "name=%s run=%s budget=%llu", log_q(sb->name),
			 log_q(t->run.name), (unsigned long long)sandbox_transcript_budget(sb));
	return false;
}

/* true when the whole line was written, or the budget dropped it; always: written past the
 * budget (a run's first line, its key) */
static bool line_end(struct sandbox *sb, enum run_file f, struct json_writer *w, struct buf *b,
		     bool always)
{
	struct transcript_sb *t = transcript_slot(sb);
	size_t n;
	struct stat st;

	json_obj_end(w);
	if (json_writer_finish(w) != 0 || buf_append(b, "\n", 1) != 0)
		return false;
	if (!always && !line_fits(sb, b->len))
		return true;
	n = put(sb, f, b->data, b->len);
	/* half a line would stay in front of the whole one written when it is tried again */
	if (n && n < b->len && fstat(t->run.fd[f], &st) == 0 && (uint64_t)st.st_size >= n &&
	    ftruncate(t->run.fd[f], st.st_size - (off_t)n) == 0) {
		ASSERT(t->used >= n); /* put counted it */
		t->used -= n;
	}
	return n == b->len;
}

static void event_line(struct sandbox *sb, const char *event, const char *const *kv,
		       bool always);

void runlog_event_fields(struct sandbox *sb, const char *event, const char *const *kv)
{
	event_line(sb, event, kv, false);
}

static void event_line(struct sandbox *sb, const char *event, const char *const *kv,
		       bool always)
{
	struct transcript_sb *t = transcript_slot(sb);
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
	json_str_write(&w, t->run.key);
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
	struct transcript_sb *t = transcript_slot(sb);
	int64_t due = clock_mono_ms() + delay_ms;

	if (!t->run.metrics_due || due < t->run.metrics_due)
		t->run.metrics_due = due;
	if (due < run_metrics_next)
		run_metrics_next = due;
}

/* metrics.json's object: the run's counters, the budget, the exit codes seen. */
static void metrics_json(struct json_writer *w, const struct sandbox *sb,
			 const struct transcript_sb *t, bool final)
{
	char ts[40];

	json_obj_begin(w);
	json_key(w, "run");
	json_str_write(w, t->run.name);
	json_key(w, "sandbox");
	json_str_write(w, sb->name);
	json_key(w, "instance_id");
	json_str_write(w, sb->instance_id);
	utc(t->run.started_ms, ts, sizeof(ts), false);
	json_key(w, "started_at");
	json_str_write(w, ts);
	json_key(w, "ended_at");
	if (final) {
		utc(clock_wall_ms(), ts, sizeof(ts), false);
		json_str_write(w, ts);
	} else {
		json_null_write(w);
	}
	json_key(w, "commands");
	json_int_write(w, t->run.commands);
	json_key(w, "commands_running");
	json_int_write(w, t->run.running);
	json_key(w, "stdout_bytes");
	json_int_write(w, (int64_t)t->run.bytes[0]);
	json_key(w, "stderr_bytes");
	json_int_write(w, (int64_t)t->run.bytes[1]);
	json_key(w, "transcript_budget");
	json_int_write(w, (int64_t)sandbox_transcript_budget(sb));
	json_key(w, "transcript_used");
	json_int_write(w, (int64_t)t->used);
	for (int s = 0; s < 2; s++) {
		json_key(w, s ? "stderr_dropped" : "stdout_dropped");
		json_int_write(w, (int64_t)t->run.dropped[s]);
		json_key(w, s ? "stderr_mark" : "stdout_mark");
		json_int_write(w, (int64_t)t->run.mark[s]);
		json_key(w, s ? "stderr_quiet" : "stdout_quiet");
		json_int_write(w, (int64_t)t->run.quiet[s]);
	}
	json_key(w, "lines_dropped");
	json_int_write(w, (int64_t)t->run.lines_dropped);
	json_key(w, "exit_codes");
	json_obj_begin(w);
	for (uint32_t i = 0; i < t->run.ncodes; i++) {
		char k[16];

		snprintf(k, sizeof(k), "%d", t->run.codes[i]);
		json_key(w, k);
		json_int_write(w, t->run.code_count[i]);
	}
	json_obj_end(w);
	json_key(w, "write_error");
	if (t->run.error)
		json_str_write(w, strerror(-t->run.error));
	else
		json_null_write(w);
	json_obj_end(w);
}

/* metrics.json replaced by text: a reader never sees half a file (temp, then rename). */
static void metrics_replace(struct sandbox *sb, int dfd, const struct buf *b)
{
	int fd;

	ASSERT(dfd >= 0); /* an open run has its directory */
	fd = openat(dfd, "metrics.json.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC |
		    O_NOFOLLOW, 0600);
	if (fd < 0) {
		write_error(sb, RUN_EVENTS, errno);
		return;
	}
	if (write(fd, b->data, b->len) != (ssize_t)b->len) {
		write_error(sb, RUN_EVENTS, errno ? errno : ENOSPC);
		close(fd);
		unlinkat(dfd, "metrics.json.tmp", 0);
		return;
	}
	close(fd);
	if (renameat(dfd, "metrics.json.tmp", dfd, "metrics.json") != 0)
		write_error(sb, RUN_EVENTS, errno);
}

static void write_metrics(struct sandbox *sb, bool final)
{
	struct transcript_sb *t = transcript_slot(sb);
	char store[2048];
	struct buf b;
	struct json_writer w;

	t->run.metrics_due = 0;
	if (!t->run.open)
		return;
	buf_init(&b, store, sizeof(store));
	json_writer_init(&w, &b);
	metrics_json(&w, sb, t, final);
	if (json_writer_finish(&w) != 0 || buf_append(&b, "\n", 1) != 0)
		return;
	metrics_replace(sb, t->run.dirfd, &b);
}

static int instance_fd(const struct sandbox *sb)
{
	char dir[LIMIT_PATH_BYTES];

	if (host_instance_dir(sandbox_config(), sb->instance_id, dir, sizeof(dir)) != 0)
		return -ENAMETOOLONG;
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);

	return fd < 0 ? -errno : fd;
}

static int open_files(struct sandbox *sb)
{
	struct transcript_sb *t = transcript_slot(sb);

	for (int f = 0; f < RUN_FILES; f++) {
		t->run.fd[f] = openat(t->run.dirfd, file_names[f], O_WRONLY | O_CREAT | O_APPEND |
				       O_CLOEXEC | O_NOFOLLOW, 0600);
		if (t->run.fd[f] < 0)
			return -errno;
	}
	return 0;
}

static void close_files(struct sandbox *sb)
{
	struct transcript_sb *t = transcript_slot(sb);

	for (int f = 0; f < RUN_FILES; f++)
		if (t->run.fd[f] >= 0) {
			close(t->run.fd[f]);
			t->run.fd[f] = -1;
		}
	if (t->run.dirfd >= 0)
		close(t->run.dirfd);
	t->run.dirfd = -1;
	t->run.open = false;
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
	struct transcript_sb *t = transcript_slot(sb);
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

	t->run.commands = (uint32_t)metric(&doc, "commands");
	for (int s = 0; s < 2; s++) {
		t->run.dropped[s] = metric(&doc, s ? "stderr_dropped" : "stdout_dropped");
		t->run.mark[s] = metric(&doc, s ? "stderr_mark" : "stdout_mark");
		t->run.quiet[s] = metric(&doc, s ? "stderr_quiet" : "stdout_quiet");
		t->run.cut[s] = t->run.dropped[s] || t->run.mark[s];
	}
	t->run.lines_dropped = metric(&doc, "lines_dropped");
	for (int k = codes >= 0 ? json_first(&doc, codes) : -1; k >= 0 && t->run.ncodes < RUN_CODES;
	     k = json_next(&doc, codes, json_next(&doc, codes, k))) {
		char num[16];
		int64_t count;

		if (json_str(&doc, k, num, sizeof(num)) < 0 || json_int(&doc, k + 1, &count) != 0)
			continue;
		t->run.codes[t->run.ncodes] = (int32_t)strtol(num, NULL, 10);
		t->run.code_count[t->run.ncodes++] = (uint32_t)count;
	}
}

/* The current run of this instance, when its first event names key: agenticd restarted while
 * the init ran on. The counters come back from metrics.json and the file sizes. */
static bool adopt(struct sandbox *sb, int ifd, const char *key)
{
	struct transcript_sb *t = transcript_slot(sb);
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
	memset(&t->run, 0, sizeof(t->run));
	t->run.dirfd = fd;
	tl = strlen(target + 5);
	if (tl >= sizeof(t->run.name))
		tl = sizeof(t->run.name) - 1;
	memcpy(t->run.name, target + 5, tl);
	t->run.name[tl] = '\0';
	snprintf(t->run.key, sizeof(t->run.key), "%s", key);
	for (int f = 0; f < RUN_FILES; f++)
		t->run.fd[f] = -1;
	if (open_files(sb) != 0) {
		close_files(sb);
		return false;
	}
	t->run.open = true;
	t->run.started_ms = clock_wall_ms();
	int cf = openat(fd, "commands.log", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

	t->out_results = cf < 0 ? 0 : last_result_seq(cf);
	if (cf >= 0)
		close(cf);
	adopt_metrics(sb, fd);
	/* the init numbers its output from the start of its life, which is this run's: what
	 * the file has of it (its size less a cut's mark) and what a cut dropped */
	for (int s = 0; s < 2; s++) {
		if (fstat(t->run.fd[s], &st) == 0)
			t->run.bytes[s] = (uint64_t)st.st_size;
		if (t->run.mark[s] > t->run.bytes[s])
			t->run.mark[s] = t->run.bytes[s];
		t->run.bytes[s] -= t->run.mark[s];
		t->out_next[s] = t->run.bytes[s] + t->run.dropped[s] + t->run.quiet[s];
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
	struct transcript_sb *t = transcript_slot(sb);
	char stamp[24], name[RUN_NAME_BYTES], path[RUN_NAME_BYTES + 8];
	int64_t now = clock_wall_ms();

	memset(&t->run, 0, sizeof(t->run));
	t->run.dirfd = -1;
	for (int f = 0; f < RUN_FILES; f++)
		t->run.fd[f] = -1;
	t->out_next[0] = t->out_next[1] = t->out_results = 0;
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
	t->run.dirfd = openat(ifd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (t->run.dirfd < 0)
		return -errno;
	if (mkdirat(t->run.dirfd, "trace", 0700) != 0)
		return -errno;
	snprintf(t->run.name, sizeof(t->run.name), "%s", name);
	snprintf(t->run.key, sizeof(t->run.key), "%s", key);
	t->run.started_ms = now;
	int r = open_files(sb);

	if (r != 0)
		return r;
	t->run.open = true;
	/* current -> runs/<name>, replaced atomically */
	unlinkat(ifd, "current.new", 0);
	if (symlinkat(path, ifd, "current.new") != 0 ||
	    renameat(ifd, "current.new", ifd, "current") != 0)
		return -errno;
	return 0;
}

bool runlog_ready(struct sandbox *sb)
{
	struct transcript_sb *t = transcript_slot(sb);
	char key[sizeof(t->run.key)];
	int ifd, r;

	run_key(sb, key, sizeof(key));
	if (t->run.open && strcmp(t->run.key, key) == 0) {
		runlog_event(sb, "reconnected");
		return false;
	}
	if (t->run.open)
		runlog_stop(sb, "restarted");
	ifd = instance_fd(sb);
	if (ifd < 0) {
		log_error("no transcript", "name=%s instance=%s error=%s", log_q(sb->name),
			  log_q(sb->instance_id), log_q(strerror(-ifd)));
		return false;
	}
	t->used = runs_usage(ifd);
	if (sb->pid_ns[0] && adopt(sb, ifd, key)) {
		close(ifd);
		runlog_event(sb, "reconnected");
		log_info("run continued", "name=%s run=%s", log_q(sb->name), log_q(t->run.name));
		return false;
	}
	r = make_run(sb, ifd, key);
	close(ifd);
	if (r != 0) {
		log_error("cannot start a run", "name=%s instance=%s error=%s", log_q(sb->name),
			  log_q(sb->instance_id), log_q(strerror(-r)));
		close_files(sb);
		t->run.error = r;
		return false;
	}
	event_line(sb, "run_start", NULL, true);
	if (sb->state == SB_CREATING)
		runlog_event(sb, "created");
	runlog_event(sb, "registered");
	runlog_event(sb, "ready");
	write_metrics(sb, false);
	log_info("run started", "name=%s run=%s", log_q(sb->name), log_q(t->run.name));
	return true;
}

void runlog_stop(struct sandbox *sb, const char *why)
{
	struct transcript_sb *t = transcript_slot(sb);

	if (!t->run.open)
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
	struct transcript_sb *t = transcript_slot(sb);
	enum run_file f = s ? RUN_STDERR : RUN_STDOUT;
	uint64_t budget = sandbox_transcript_budget(sb);
	char mark[256], store[512];
	struct json_writer w;
	struct buf b;
	int n;

	t->run.cut[s] = true;
	t->run.dropped[s] += dropped;
	n = snprintf(mark, sizeof(mark), "\n[agentic: transcript cut: the sandbox's transcript "
		     "budget of %llu bytes is spent; its later %s is not recorded (metrics.json "
		     "%s_dropped counts it)]\n", (unsigned long long)budget, s ? "stderr" : "stdout",
		     s ? "stderr" : "stdout");
	if (line_fits(sb, (size_t)n))
		t->run.mark[s] = put(sb, f, mark, (size_t)n);
	line_begin(&w, &b, store, sizeof(store), "transcript_cut");
	json_key(&w, "file");
	json_str_write(&w, file_names[f]);
	json_key(&w, "budget");
	json_int_write(&w, (int64_t)budget);
	json_key(&w, "run_key");
	json_str_write(&w, t->run.key);
	line_end(sb, RUN_EVENTS, &w, &b, false);
	log_warn("transcript cut", "name=%s run=%s file=%s budget=%llu", log_q(sb->name),
		 log_q(t->run.name), file_names[f], (unsigned long long)budget);
	run_metrics_stale(sb, 0);
}

size_t runlog_output(struct sandbox *sb, int stream, const void *data, size_t len)
{
	struct transcript_sb *t = transcript_slot(sb);
	uint64_t budget, room;
	size_t n;

	if (stream < 0 || stream > 1)
		return 0;
	if (!t->run.open)
		return len; /* nowhere to write: all of it done */
	if (t->run.cut[stream]) {
		t->run.dropped[stream] += len;
		return len;
	}
	budget = sandbox_transcript_budget(sb);
	budget -= budget / LIMIT_TRANSCRIPT_LINES_DIV;
	room = t->used < budget ? budget - t->used : 0;
	n = put(sb, stream == 0 ? RUN_STDOUT : RUN_STDERR, data, len < room ? len : (size_t)room);
	ASSERT(n <= room);
	t->run.bytes[stream] += n;
	if (n == len || n < room)
		return n; /* all of it, or a write that failed (sent again) */
	cut(sb, stream, len - n);
	return len;
}

size_t runlog_quiet(struct sandbox *sb, int stream, size_t len)
{
	struct transcript_sb *t = transcript_slot(sb);

	if (stream >= 0 && stream <= 1 && t->run.open)
		t->run.quiet[stream] += len;
	return len;
}

/* A stream with quiet output may also lack the last of it (metrics.json written before
 * agenticd died): counted as quiet. */
bool runlog_skip(struct sandbox *sb, int stream, uint64_t len)
{
	struct transcript_sb *t = transcript_slot(sb);

	if (stream < 0 || stream > 1 || !t->run.open || (!t->run.cut[stream] && !t->run.quiet[stream]))
		return false;
	if (t->run.cut[stream])
		t->run.dropped[stream] += len;
	else
		t->run.quiet[stream] += len;
	return true;
}

bool runlog_command_start(struct sandbox *sb, const char *id, char *const *argv, size_t n)
{
	struct transcript_sb *t = transcript_slot(sb);
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
	t->run.commands++;
	t->run.running++;
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
	struct transcript_sb *t = transcript_slot(sb);
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
	if (t->run.running)
		t->run.running--;
	for (i = 0; i < t->run.ncodes && t->run.codes[i] != code; i++)
		;
	if (i < RUN_CODES) {
		if (i == t->run.ncodes) {
			t->run.codes[i] = code;
			t->run.ncodes++;
		}
		t->run.code_count[i]++;
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
		const struct transcript_sb *t;

		if (sb->state == SB_FREE || !(t = transcript_of(sb))->run.metrics_due)
			continue;
		if (now >= t->run.metrics_due)
			write_metrics(sb, false);
		else if (t->run.metrics_due < run_metrics_next)
			run_metrics_next = t->run.metrics_due;
	}
}

int64_t runlog_next_deadline(void)
{
	return run_metrics_next;
}
