/* prune.c: agentic-prune, the agentshare run-retention pruner. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prune/prune.h"

const char prune_help[] =
	"usage: agentic-prune [--apply] [--retention-days N] [--json]\n"
	"\n"
	"Applies the agentshare run-retention policy: a run directory is eligible once its own\n"
	"mtime is older than now - N*86400 seconds, unless it is the active run. Preview by\n"
	"default (lists the eligible runs, touches nothing); --apply removes them.\n"
	"\n"
	"  --apply              remove the eligible runs (default: preview)\n"
	"  --retention-days N   retention in days, a non-negative integer; overrides\n"
	"                       AGENTIC_RUN_RETENTION_DAYS (default 7). 0: every run but the\n"
	"                       active one is eligible\n"
	"  --json               the same report as one JSON object\n"
	"  -h, --help           this text\n"
	"\n"
	"Environment: AGENTSHARE_ROOT (default /srv/agentshare) must be an absolute path to an\n"
	"existing directory, not a symlink and not /. Empty variables count as unset.\n"
	"\n"
	"Runs are the directories named run-* directly inside a directory named runs, at\n"
	"  instances/<id>/runs/   instances/<id>/inbox/runs/   <name>/runs/ (name != instances)\n"
	"under the root; nothing below a run is ever taken for a run. The active run is the one\n"
	"the `current` symlink beside that runs/ points to, however the link is written; a\n"
	"`current` that points outside the root or at nothing protects nothing and is reported.\n"
	"A run-* symlink is never followed. A run holding a mount point is skipped and reported.\n"
	"Removal uses fd-relative calls only and never leaves the run, whatever is renamed or\n"
	"swapped for a symlink meanwhile. An instance directory left holding nothing but an empty\n"
	"runs/, and itself unmodified for the retention period, is removed too.\n"
	"\n"
	"Output: a line per run, `eligible run=PATH age_days=D bytes=B` (with --apply: `pruned`),\n"
	"a line `eligible empty_instance=PATH` (`pruned`) per instance directory, then\n"
	"  retention_apply=false eligible_runs=K bytes=B\n"
	"  retention_apply=true pruned_runs=K freed_bytes=B\n"
	"PATH is relative to the root, quoted and escaped when it holds spaces or control bytes.\n"
	"Sizes are disk usage, st_blocks*512, of everything in the run (du -s -l -B1). Problems go\n"
	"to stderr as logfmt lines. Exit status: 0 all went well, 1 some run could not be removed\n"
	"(or measured) and the others were, 2 bad arguments or root (nothing touched).\n";

#define DEFAULT_ROOT "/srv/agentshare"
#define DEFAULT_DAYS 7
#define SECONDS_PER_DAY 86400
#define OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

/* A `current` link, as far as it tells which run of its runs/ is active. */
struct active {
	bool present;     /* a `current` entry exists */
	bool is_link;
	bool kernel_ok;   /* the kernel resolved it; dev/ino below are its target's */
	bool outside;     /* lexically outside the root */
	bool matched;     /* some run of this runs/ is the one it names */
	uint32_t dev_major, dev_minor;
	uint64_t ino;
	char name[256];   /* run name when the text names a direct child of this runs/ */
	char target[LIMIT_PATH_BYTES];
};

struct pruner {
	char root[LIMIT_PATH_BYTES];      /* as given, trailing slashes removed */
	char canon[LIMIT_PATH_BYTES];     /* the root's canonical path */
	int root_fd;
	bool apply, json;
	uint64_t days;
	struct timespec now;
	int64_t cutoff_sec;
	long cutoff_nsec;
	struct prune_mounts mounts;
	uint64_t runs, bytes; /* eligible (preview) or pruned (apply) */
	bool failed; /* set by the scan and by workers: through mark_failed() */
	bool json_first;
	size_t rel_len;
	char rel[LIMIT_PATH_BYTES]; /* root-relative path of what is being looked at */
};

/* All memory the pruner uses is static, sized at compile time: getdents buffers for the
 * four listings the scan holds open at once (root, instances/, an instance, runs/), the mount
 * table, output scratch, and (below) the job ring and each worker's depth stack and listing
 * buffer. Nothing is allocated at run time. */
static uint8_t list_dents[4][LIMIT_PRUNE_DENTS_BYTES];
static char mount_bytes[LIMIT_PRUNE_MOUNT_BYTES];
static uint32_t mount_off[LIMIT_PRUNE_MOUNTS];
static uint8_t mountinfo_chunk[LIMIT_PRUNE_DENTS_BYTES];
static struct prune_mountinfo mountinfo;
static struct active active;
static struct pruner pruner;
static char quoted[4 * LIMIT_PATH_BYTES + 3];
static char resolved[LIMIT_PATH_BYTES];

enum { LIST_ROOT, LIST_INSTANCES, LIST_INSTANCE, LIST_RUNS };

/* ---- output ---- */

/* For the scan (main thread) only: workers quote into their own buffer. */
static const char *quote(const char *s)
{
	return log_quote(quoted, sizeof(quoted), s);
}

/* A JSON string. Bytes that are not UTF-8 become U+FFFD: JSON cannot carry them. */
static void json_string(const char *s)
{
	const uint8_t *p = (const uint8_t *)s;

	putchar('"');
	while (*p) {
		uint8_t c = *p;
		size_t len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 :
			     (c & 0xf8) == 0xf0 ? 4 : 0;
		uint32_t cp = len == 2 ? c & 0x1fu : len == 3 ? c & 0x0fu : c & 0x07u;
		size_t i;

		if (c == '"' || c == '\\') {
			printf("\\%c", c);
			p++;
			continue;
		}
		if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
			p++;
			continue;
		}
		if (len == 1) {
			putchar(c);
			p++;
			continue;
		}
		for (i = 1; len && i < len; i++) {
			if ((p[i] & 0xc0) != 0x80)
				break;
			cp = cp << 6 | (p[i] & 0x3fu);
		}
		if (len == 0 || i < len || (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp < 0xe000)) {
			fputs("\\ufffd", stdout);
			p++;
			continue;
		}
		fwrite(p, 1, len, stdout);
		p += len;
	}
	putchar('"');
}

static void json_entry_begin(struct pruner *p)
{
	if (!p->json_first)
		putchar(',');
	p->json_first = false;
}

/* Output lines: the caller holds queue.lock. qrel is rel, quoted for logfmt. */
static void emit_run(struct pruner *p, const char *qrel, const char *rel, int64_t age_days,
		     uint64_t bytes)
{
	if (p->json) {
		json_entry_begin(p);
		fputs("{\"kind\":\"run\",\"path\":", stdout);
		json_string(rel);
		printf(",\"age_days\":%lld,\"bytes\":%llu}", (long long)age_days,
		       (unsigned long long)bytes);
		return;
	}
	printf("%s run=%s age_days=%lld bytes=%llu\n", p->apply ? "pruned" : "eligible", qrel,
	       (long long)age_days, (unsigned long long)bytes);
}

static void emit_instance(struct pruner *p, const char *qrel, const char *rel)
{
	if (p->json) {
		json_entry_begin(p);
		fputs("{\"kind\":\"empty_instance\",\"path\":", stdout);
		json_string(rel);
		putchar('}');
		return;
	}
	printf("%s empty_instance=%s\n", p->apply ? "pruned" : "eligible", qrel);
}

static void emit_begin(struct pruner *p)
{
	if (!p->json)
		return;
	printf("{\"retention_apply\":%s,\"retention_days\":%llu,\"root\":",
	       p->apply ? "true" : "false", (unsigned long long)p->days);
	json_string(p->root);
	fputs(",\"entries\":[", stdout);
	p->json_first = true;
}

static void emit_summary(struct pruner *p)
{
	unsigned long long k = p->runs, b = p->bytes;

	if (p->json)
		printf("],\"%s\":%llu,\"%s\":%llu}\n", p->apply ? "pruned_runs" : "eligible_runs", k,
		       p->apply ? "freed_bytes" : "bytes", b);
	else if (p->apply)
		printf("retention_apply=true pruned_runs=%llu freed_bytes=%llu\n", k, b);
	else
		printf("retention_apply=false eligible_runs=%llu bytes=%llu\n", k, b);
}

/* ---- walking the root ---- */

static void mark_failed(struct pruner *p)
{
	__atomic_store_n(&p->failed, true, __ATOMIC_RELAXED);
}

/* Appends "/name" (or "name" at the root) to p->rel; returns the length to restore, or -1
 * when the path would not fit (reported; the entry is skipped). */
static long rel_push(struct pruner *p, const char *name)
{
	size_t old = p->rel_len, len = strlen(name), sep = old ? 1 : 0;

	if (old + sep + len + 1 > sizeof(p->rel)) {
		log_error("path too long; skipped", "under=%s", quote(p->rel));
		mark_failed(p);
		return -1;
	}
	if (sep)
		p->rel[old] = '/';
	memcpy(p->rel + old + sep, name, len + 1);
	p->rel_len = old + sep + len;
	return (long)old;
}

static void rel_pop(struct pruner *p, long old)
{
	p->rel_len = (size_t)old;
	p->rel[old] = '\0';
}

static bool is_old(const struct pruner *p, const struct prune_stat *st)
{
	if (p->days == 0)
		return true;
	return st->mtime_sec < p->cutoff_sec ||
	       (st->mtime_sec == p->cutoff_sec && (long)st->mtime_nsec < p->cutoff_nsec);
}

static int64_t age_days(const struct pruner *p, const struct prune_stat *st)
{
	int64_t secs = (int64_t)p->now.tv_sec - st->mtime_sec;

	if (p->now.tv_nsec < (long)st->mtime_nsec)
		secs--;
	return secs < 0 ? 0 : secs / SECONDS_PER_DAY;
}

/* Reads the `current` entry of directory pfd (root-relative p->rel), which sits beside
 * the runs/ being scanned: lexically, and through the kernel. */
static void active_read(struct pruner *p, int pfd, struct active *a)
{
	static const char runs_dir[] = "/runs/";
	struct prune_stat st;
	ssize_t n;
	int r;

	memset(a, 0, offsetof(struct active, name));
	a->name[0] = a->target[0] = '\0';
	r = prune_stat_at(pfd, "current", AT_SYMLINK_NOFOLLOW, &st);
	if (r < 0)
		return;
	a->present = true;
	a->is_link = S_ISLNK(st.mode);
	r = prune_stat_at(pfd, "current", AT_NO_AUTOMOUNT, &st);
	if (r == 0) {
		a->kernel_ok = true;
		a->dev_major = st.dev_major;
		a->dev_minor = st.dev_minor;
		a->ino = st.ino;
	}
	if (!a->is_link)
		return;
	n = readlinkat(pfd, "current", a->target, sizeof(a->target) - 1);
	if (n < 0)
		return;
	a->target[n] = '\0';
	r = prune_link_resolve(p->root, p->canon, p->rel, a->target, resolved, sizeof(resolved));
	if (r == PRUNE_OUTSIDE)
		a->outside = true;
	if (r < 0)
		return;
	/* The text names a run of this runs/ when it reads "<p->rel>/runs/<name>". */
	if (strncmp(resolved, p->rel, p->rel_len) == 0 &&
	    strncmp(resolved + p->rel_len, runs_dir, sizeof(runs_dir) - 1) == 0) {
		const char *name = resolved + p->rel_len + sizeof(runs_dir) - 1;
		if (*name && !strchr(name, '/') && strlen(name) < sizeof(a->name))
			strcpy(a->name, name);
	}
}

static bool active_is(struct active *a, const char *name, const struct prune_stat *st)
{
	bool by_kernel = a->kernel_ok && a->ino == st->ino && a->dev_major == st->dev_major &&
			 a->dev_minor == st->dev_minor;
	bool by_text = a->name[0] && strcmp(a->name, name) == 0;

	if (by_kernel || by_text)
		a->matched = true;
	return by_kernel || by_text;
}

static void active_report(struct pruner *p, const struct active *a)
{
	static char qtarget[4 * LIMIT_PATH_BYTES + 3];
	const char *why;

	if (!a->present || a->matched)
		return;
	if (!a->is_link)
		why = "not-a-symlink";
	else if (a->outside)
		why = "points-outside-the-root";
	else if (!a->kernel_ok)
		why = "points-at-nothing";
	else
		why = "not-a-run-of-runs";
	log_warn("current protects no run", "dir=%s target=%s reason=%s",
		 quote(p->rel[0] ? p->rel : "."), log_quote(qtarget, sizeof(qtarget), a->target),
		 why);
}

/* ---- the workers ----
 * The scan (main thread) decides; workers measure or remove. Removal waits on the disk (on
 * this kind of host ext4 discards every freed block synchronously), so runs are removed by
 * LIMIT_PRUNE_WORKERS threads at once, each with its own walk state. Jobs go through a small
 * ring; stdout, the counters and reports of workers are serialized by its lock. */
struct job {
	int runs_fd;  /* dup of the runs/ directory holding the run; the job owns it */
	bool counted; /* its success counts toward queue.batch_ok */
	int64_t age_days;
	uint32_t dev_major, dev_minor;
	uint64_t ino, mnt_id;
	char name[256];
	char rel[LIMIT_PATH_BYTES];
};

struct worker {
	pthread_t tid;
	struct job job;
	struct prune_walk walk;
	struct prune_level stack[LIMIT_PRUNE_DEPTH];
	uint8_t dents[LIMIT_PRUNE_DENTS_BYTES];
	char quoted[4 * LIMIT_PATH_BYTES + 3];
};

static struct worker workers[LIMIT_PRUNE_WORKERS];
static struct job scan_job;
static uint32_t worker_count;

static struct {
	pthread_mutex_t lock;
	pthread_cond_t more; /* a job was queued, or the scan is over */
	pthread_cond_t less; /* a job was taken or finished */
	struct job jobs[LIMIT_PRUNE_QUEUE];
	uint32_t head, count, running;
	uint32_t batch_ok;
	bool closing;
} queue = { .lock = PTHREAD_MUTEX_INITIALIZER,
	    .more = PTHREAD_COND_INITIALIZER,
	    .less = PTHREAD_COND_INITIALIZER };

static void job_run(struct pruner *p, struct worker *wk)
{
	struct job *j = &wk->job;
	struct prune_walk *w = &wk->walk;
	int fd, r;

	w->remove = p->apply;
	w->dev_major = j->dev_major;
	w->dev_minor = j->dev_minor;
	w->ino = j->ino;
	w->mnt_id = j->mnt_id;
	w->bytes = 0;
	w->fail_op = "open";
	w->fail_dir[0] = w->fail_name[0] = '\0';
	fd = openat(j->runs_fd, j->name, OPEN_DIR);
	r = fd < 0 ? -errno : prune_tree_walk(w, fd);
	if (r == 0 && p->apply && unlinkat(j->runs_fd, j->name, AT_REMOVEDIR) != 0) {
		r = -errno;
		w->fail_op = "rmdir";
	}
	close(j->runs_fd);

	pthread_mutex_lock(&queue.lock);
	if (r == 0) {
		emit_run(p, logfmt_value(wk->quoted, sizeof(wk->quoted), j->rel), j->rel, j->age_days,
			 w->bytes);
		p->runs++;
		p->bytes += w->bytes;
		if (j->counted)
			queue.batch_ok++;
	} else if (r != -ENOENT || w->fail_dir[0]) {
		char qat[2 * LIMIT_PATH_BYTES + 3], qerr[256];
		char at[LIMIT_PATH_BYTES + 257];

		snprintf(at, sizeof(at), "%s%s%s", w->fail_dir,
			 w->fail_dir[0] && w->fail_name[0] ? "/" : "", w->fail_name);
		log_error(p->apply ? "cannot remove run" : "cannot measure run",
			  "run=%s op=%s at=%s error=%s",
			  log_quote(wk->quoted, sizeof(wk->quoted), j->rel), w->fail_op,
			  log_quote(qat, sizeof(qat), at),
			  log_quote(qerr, sizeof(qerr),
				    r == ERR_LIMIT ? "deeper than LIMIT_PRUNE_DEPTH levels" :
						     err_str(r)));
		mark_failed(p);
	}
	pthread_mutex_unlock(&queue.lock);
}

static void *worker_main(void *arg)
{
	struct worker *wk = arg;

	for (;;) {
		pthread_mutex_lock(&queue.lock);
		while (queue.count == 0 && !queue.closing)
			pthread_cond_wait(&queue.more, &queue.lock);
		if (queue.count == 0) {
			pthread_mutex_unlock(&queue.lock);
			return NULL;
		}
		wk->job = queue.jobs[queue.head];
		queue.head = (queue.head + 1) % LIMIT_PRUNE_QUEUE;
		queue.count--;
		queue.running++;
		pthread_cond_broadcast(&queue.less);
		pthread_mutex_unlock(&queue.lock);

		job_run(&pruner, wk);

		pthread_mutex_lock(&queue.lock);
		queue.running--;
		pthread_cond_broadcast(&queue.less);
		pthread_mutex_unlock(&queue.lock);
	}
}

static void workers_start(void)
{
	for (uint32_t i = 0; i < LIMIT_PRUNE_WORKERS; i++) {
		struct worker *wk = &workers[i];

		wk->walk.stack = wk->stack;
		wk->walk.stack_cap = LIMIT_PRUNE_DEPTH;
		wk->walk.dents = wk->dents;
		wk->walk.dents_size = sizeof(wk->dents);
		if (pthread_create(&wk->tid, NULL, worker_main, wk) != 0)
			break;
		worker_count++;
	}
}

/* Hands a job to the workers; with none (they could not be started), runs it here. */
static void job_submit(const struct job *j)
{
	if (worker_count == 0) {
		workers[0].job = *j;
		job_run(&pruner, &workers[0]);
		return;
	}
	pthread_mutex_lock(&queue.lock);
	while (queue.count == LIMIT_PRUNE_QUEUE)
		pthread_cond_wait(&queue.less, &queue.lock);
	queue.jobs[(queue.head + queue.count) % LIMIT_PRUNE_QUEUE] = *j;
	queue.count++;
	pthread_cond_signal(&queue.more);
	pthread_mutex_unlock(&queue.lock);
}

/* Waits until every submitted job is done; returns (and resets) the counted successes. */
static uint32_t jobs_wait(void)
{
	uint32_t ok;

	pthread_mutex_lock(&queue.lock);
	while (queue.count || queue.running)
		pthread_cond_wait(&queue.less, &queue.lock);
	ok = queue.batch_ok;
	queue.batch_ok = 0;
	pthread_mutex_unlock(&queue.lock);
	return ok;
}

/* A descriptor on runs/ for a job. Queued jobs hold one each: when the process is out of
 * descriptors, let the queue drain (keeping its count of successes) and try once more. */
static int runs_fd_dup(int rfd)
{
	int fd = fcntl(rfd, F_DUPFD_CLOEXEC, 0);

	if (fd < 0 && errno == EMFILE && worker_count) {
		pthread_mutex_lock(&queue.lock);
		while (queue.count || queue.running)
			pthread_cond_wait(&queue.less, &queue.lock);
		pthread_mutex_unlock(&queue.lock);
		fd = fcntl(rfd, F_DUPFD_CLOEXEC, 0);
	}
	return fd;
}

static void workers_stop(void)
{
	pthread_mutex_lock(&queue.lock);
	queue.closing = true;
	pthread_cond_broadcast(&queue.more);
	pthread_mutex_unlock(&queue.lock);
	for (uint32_t i = 0; i < worker_count; i++)
		pthread_join(workers[i].tid, NULL);
}

/* ---- the scan ---- */

/* One run-* entry of runs/ (fd rfd, mount id runs_mnt): when it is eligible, hands it to
 * the workers for measuring or removal. */
static void run_consider(struct pruner *p, int rfd, const struct prune_dirent *e,
			 uint64_t runs_mnt, bool counted)
{
	struct prune_stat st;
	struct job *j = &scan_job;
	int r;

	if (e->type == DT_LNK) {
		log_warn("run is a symlink; never followed", "run=%s", quote(p->rel));
		return;
	}
	if (e->type != DT_DIR && e->type != DT_UNKNOWN)
		return;
	r = prune_stat_at(rfd, e->name, AT_SYMLINK_NOFOLLOW, &st);
	if (r == -ENOENT)
		return;
	if (r < 0) {
		char qerr[256];

		log_error("cannot stat run", "run=%s error=%s", quote(p->rel),
			  log_quote(qerr, sizeof(qerr), err_str(r)));
		mark_failed(p);
		return;
	}
	if (S_ISLNK(st.mode)) {
		log_warn("run is a symlink; never followed", "run=%s", quote(p->rel));
		return;
	}
	if (!S_ISDIR(st.mode) || active_is(&active, e->name, &st) || !is_old(p, &st))
		return;
	if (st.mnt_id != runs_mnt || prune_mounts_below(&p->mounts, p->rel)) {
		log_error("run is or holds a mount point; skipped", "run=%s", quote(p->rel));
		mark_failed(p);
		return;
	}
	j->runs_fd = runs_fd_dup(rfd);
	if (j->runs_fd < 0) {
		log_error("cannot hand the run over", "run=%s error=%s", quote(p->rel),
			  log_q(strerror(errno)));
		mark_failed(p);
		return;
	}
	j->counted = counted;
	j->age_days = age_days(p, &st);
	j->dev_major = st.dev_major;
	j->dev_minor = st.dev_minor;
	j->ino = st.ino;
	j->mnt_id = st.mnt_id;
	snprintf(j->name, sizeof(j->name), "%s", e->name);
	memcpy(j->rel, p->rel, p->rel_len + 1);
	job_submit(j);
}

/* Scans runs/ inside directory pfd (root-relative p->rel). With `counted`, waits for the
 * runs it handed over and returns how many entries of runs/ stay after this pass; otherwise
 * returns 0. -1 when there is no runs/ directory. */
static long runs_scan(struct pruner *p, int pfd, bool counted)
{
	struct prune_dir dir;
	struct prune_dirent e;
	struct prune_stat st;
	long stay = 0, old;
	int rfd, r;

	rfd = openat(pfd, "runs", OPEN_DIR);
	if (rfd < 0) {
		if (errno == ELOOP || errno == ENOTDIR)
			log_warn("runs is not a directory; skipped", "dir=%s", quote(p->rel));
		else if (errno != ENOENT)
			log_error("cannot open runs", "dir=%s error=%s", quote(p->rel),
				  log_q(strerror(errno)));
		return -1;
	}
	active_read(p, pfd, &active);
	r = prune_stat_at(rfd, "", AT_EMPTY_PATH, &st);
	old = rel_push(p, "runs");
	if (r < 0 || old < 0) {
		close(rfd);
		if (old >= 0)
			rel_pop(p, old);
		return -1;
	}
	if (counted)
		jobs_wait();
	prune_dir_init(&dir, rfd, list_dents[LIST_RUNS], sizeof(list_dents[LIST_RUNS]));
	while ((r = prune_dir_next(&dir, &e)) > 0) {
		long o2;

		stay++;
		if (strncmp(e.name, "run-", 4) != 0)
			continue;
		o2 = rel_push(p, e.name);
		if (o2 < 0)
			continue;
		run_consider(p, rfd, &e, st.mnt_id, counted);
		rel_pop(p, o2);
	}
	if (r < 0) {
		log_error("cannot list runs", "dir=%s error=%s", quote(p->rel), log_q(strerror(-r)));
		mark_failed(p);
		stay++;
	}
	close(rfd);
	rel_pop(p, old);
	active_report(p, &active);
	if (counted)
		stay -= (long)jobs_wait();
	return counted ? stay : 0;
}

/* True when the instance directory idfd holds nothing but runs/ and has not changed for the
 * retention period: once its runs are gone, it is removed too. */
static bool instance_only_runs(struct pruner *p, int idfd)
{
	struct prune_dir dir;
	struct prune_dirent e;
	struct prune_stat st;
	int entries = 0, r;
	bool only_runs = true;

	prune_dir_init(&dir, idfd, list_dents[LIST_INSTANCE], sizeof(list_dents[LIST_INSTANCE]));
	while ((r = prune_dir_next(&dir, &e)) > 0) {
		entries++;
		if (strcmp(e.name, "runs") != 0 || (e.type != DT_DIR && e.type != DT_UNKNOWN))
			only_runs = false;
	}
	if (r < 0 || entries != 1 || !only_runs)
		return false;
	return prune_stat_at(idfd, "", AT_EMPTY_PATH, &st) == 0 && is_old(p, &st);
}

/* The instance (named id in instances/ at ifd) holds nothing but an empty runs/ now. */
static void instance_remove(struct pruner *p, int ifd, const char *id, int idfd)
{
	if (p->apply &&
	    (unlinkat(idfd, "runs", AT_REMOVEDIR) != 0 || unlinkat(ifd, id, AT_REMOVEDIR) != 0)) {
		/* Not empty after all: something was created meanwhile, leave it. */
		if (errno != ENOTEMPTY && errno != EEXIST && errno != ENOENT)
			log_warn("cannot remove empty instance", "instance=%s error=%s",
				 quote(p->rel), log_q(strerror(errno)));
		return;
	}
	pthread_mutex_lock(&queue.lock);
	emit_instance(p, logfmt_value(quoted, sizeof(quoted), p->rel), p->rel);
	pthread_mutex_unlock(&queue.lock);
}

static void instances_scan(struct pruner *p, int ifd)
{
	struct prune_dir dir;
	struct prune_dirent e;
	int r;

	prune_dir_init(&dir, ifd, list_dents[LIST_INSTANCES], sizeof(list_dents[LIST_INSTANCES]));
	while ((r = prune_dir_next(&dir, &e)) > 0) {
		int idfd, xfd;
		long old, o2;
		bool candidate;

		if (e.type != DT_DIR && e.type != DT_UNKNOWN)
			continue;
		idfd = openat(ifd, e.name, OPEN_DIR);
		if (idfd < 0)
			continue;
		old = rel_push(p, e.name);
		if (old < 0) {
			close(idfd);
			continue;
		}
		candidate = instance_only_runs(p, idfd);
		if (runs_scan(p, idfd, candidate) == 0 && candidate)
			instance_remove(p, ifd, e.name, idfd);
		xfd = openat(idfd, "inbox", OPEN_DIR);
		if (xfd >= 0) {
			o2 = rel_push(p, "inbox");
			if (o2 >= 0) {
				runs_scan(p, xfd, false);
				rel_pop(p, o2);
			}
			close(xfd);
		}
		close(idfd);
		rel_pop(p, old);
	}
	if (r < 0) {
		log_error("cannot list instances", "error=%s", log_q(strerror(-r)));
		mark_failed(p);
	}
}

static void root_scan(struct pruner *p)
{
	struct prune_dir dir;
	struct prune_dirent e;
	int r;

	prune_dir_init(&dir, p->root_fd, list_dents[LIST_ROOT], sizeof(list_dents[LIST_ROOT]));
	while ((r = prune_dir_next(&dir, &e)) > 0) {
		int fd;
		long old;

		if (e.type != DT_DIR && e.type != DT_UNKNOWN)
			continue;
		fd = openat(p->root_fd, e.name, OPEN_DIR);
		if (fd < 0)
			continue;
		old = rel_push(p, e.name);
		if (old >= 0) {
			if (strcmp(e.name, "instances") == 0)
				instances_scan(p, fd);
			else
				runs_scan(p, fd, false);
			rel_pop(p, old);
		}
		close(fd);
	}
	if (r < 0) {
		log_error("cannot list the root", "error=%s", log_q(strerror(-r)));
		mark_failed(p);
	}
}

/* ---- start-up ---- */

static int usage_error(const char *fmt, const char *arg)
{
	fputs("agentic-prune: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\n(see agentic-prune --help)\n", stderr);
	return 2;
}

static int days_parse(const char *s, const char *what, uint64_t *out)
{
	if (parse_u64(s, LIMIT_PRUNE_DAYS, out) != 0) {
		fprintf(stderr, "agentic-prune: %s must be a non-negative integer of at most %u "
			"days, not '%s'\n", what, LIMIT_PRUNE_DAYS, s);
		return 2;
	}
	return 0;
}

/* Root checks: absolute, not /, an existing directory, not a symlink. Opens it. */
static int root_open(struct pruner *p, const char *given)
{
	struct stat st, slash;
	size_t len = strlen(given);
	char *root = p->root;
	char proc[32];
	ssize_t n;

	if (given[0] != '/')
		return usage_error("AGENTSHARE_ROOT must be an absolute path, not '%s'", given);
	if (len >= sizeof(p->root))
		return usage_error("AGENTSHARE_ROOT is too long: '%s'", given);
	memcpy(root, given, len + 1);
	while (len > 1 && root[len - 1] == '/')
		root[--len] = '\0';
	if (strcmp(root, "/") == 0)
		return usage_error("AGENTSHARE_ROOT must not be %s", "/");
	if (lstat(root, &st) != 0)
		return usage_error("AGENTSHARE_ROOT %s does not exist or cannot be read", root);
	if (S_ISLNK(st.st_mode))
		return usage_error("AGENTSHARE_ROOT %s is a symlink; give the directory itself",
				   root);
	if (!S_ISDIR(st.st_mode))
		return usage_error("AGENTSHARE_ROOT %s is not a directory", root);
	p->root_fd = open(root, OPEN_DIR);
	if (p->root_fd < 0)
		return usage_error("AGENTSHARE_ROOT %s cannot be opened", root);
	if (fstat(p->root_fd, &st) != 0 || stat("/", &slash) != 0 ||
	    (st.st_dev == slash.st_dev && st.st_ino == slash.st_ino))
		return usage_error("AGENTSHARE_ROOT %s is the filesystem root", root);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", p->root_fd);
	n = readlink(proc, p->canon, sizeof(p->canon) - 1);
	if (n <= 0 || p->canon[0] != '/')
		return usage_error("cannot read the canonical path of %s (is /proc mounted?)", root);
	p->canon[n] = '\0';
	return 0;
}

static int mounts_load(struct pruner *p)
{
	int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	ssize_t n;
	int r = 0;

	if (fd < 0)
		return usage_error("cannot read %s, so mount points cannot be kept out",
				   "/proc/self/mountinfo");
	prune_mounts_init(&p->mounts, mount_bytes, sizeof(mount_bytes), mount_off,
			  LIMIT_PRUNE_MOUNTS);
	prune_mountinfo_init(&mountinfo, p->canon, &p->mounts);
	while (r == 0 && (n = read(fd, mountinfo_chunk, sizeof(mountinfo_chunk))) > 0)
		r = prune_mountinfo_feed(&mountinfo, mountinfo_chunk, (size_t)n);
	if (r == 0)
		r = n < 0 ? -errno : prune_mountinfo_finish(&mountinfo);
	close(fd);
	if (r == ERR_LIMIT)
		return usage_error("more mount points below the root than the pruner can hold "
				   "(LIMIT_PRUNE_MOUNTS, LIMIT_PRUNE_MOUNT_BYTES)%s", "");
	if (r < 0)
		return usage_error("cannot use /proc/self/mountinfo: %s", err_str(r));
	return 0;
}

int prune_main(int argc, char **argv)
{
	struct pruner *p = &pruner;
	const char *days_arg = NULL, *env;
	int r;

	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];

		if (strcmp(a, "--apply") == 0) {
			p->apply = true;
		} else if (strcmp(a, "--json") == 0) {
			p->json = true;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			fputs(prune_help, stdout);
			return 0;
		} else if (strcmp(a, "--retention-days") == 0) {
			if (++i == argc)
				return usage_error("%s needs a value", a);
			days_arg = argv[i];
		} else if (strncmp(a, "--retention-days=", 17) == 0) {
			days_arg = a + 17;
		} else {
			return usage_error("unknown argument '%s'", a);
		}
	}
	/* Everything the pruner needs is static: from here on, an allocation is a bug. */
	alloc_seal();

	if (days_arg) {
		r = days_parse(days_arg, "--retention-days", &p->days);
	} else {
		env = getenv("AGENTIC_RUN_RETENTION_DAYS");
		p->days = DEFAULT_DAYS;
		r = env && *env ? days_parse(env, "AGENTIC_RUN_RETENTION_DAYS", &p->days) : 0;
	}
	if (r)
		return r;
	env = getenv("AGENTSHARE_ROOT");
	r = root_open(p, env && *env ? env : DEFAULT_ROOT);
	if (r == 0)
		r = mounts_load(p);
	if (r)
		return r;

	clock_gettime(CLOCK_REALTIME, &p->now);
	p->cutoff_sec = (int64_t)p->now.tv_sec - (int64_t)p->days * SECONDS_PER_DAY;
	p->cutoff_nsec = p->now.tv_nsec;
	emit_begin(p);
	workers_start();
	root_scan(p);
	workers_stop();
	emit_summary(p);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("cannot write the report", "error=%s", log_q(strerror(errno)));
		return 1;
	}
	return p->failed ? 1 : 0;
}
