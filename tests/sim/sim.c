/* sim.c: the driver of the deterministic simulation (docs/DEVELOPMENT.md: Tests, the simulator).
 *
 * Per seed: an agenticd (the real lifecycle, netpool, recover, sandbox, share, agent, exec and
 * runlog code, its sandbox table sized small) runs against the fake runtime and fake inits, in
 * a temp agentshare, on a simulated clock. A seeded interleaving of creates, removes, execs, init
 * actions (connect, register, READY, output, a lost connection), containers dying, starting
 * or being removed behind agenticd's back, engine answers arriving, time passing, and
 * agenticd crashing (or stopping) and starting again with recovery from its records. After
 * every step the invariants are checked; at the end every sandbox is removed and the engine,
 * the agentshare and the maps must be empty.
 *
 *   SEED=n      run that seed only (its trace is printed when it fails)
 *   SEEDS=n     how many seeds, from SEED_BASE (default 1)
 *   STEPS=n     steps per seed
 *   SIM_TRACE=1 print the whole trace of a passing seed too
 *   SIM_FAIL, SIM_RECOVERY_FAIL, SIM_LOST, SIM_DISK (a transcript write cut short),
 *   SIM_CHAOS, SIM_RESTART: fault rates, per mille
 *   SIM_BUG=leak-uid|dup-bytes: a defect injected by the harness (the positive control)
 *   SIM_LOG=1   agenticd's own log on stderr
 *   SIM_CALM=1  no stormy seeds (else every fourth seed runs four times the faults and chaos)
 *
 *   SIM_RUNTIME=docker  the real runtime_docker.c and its engine call queue over a wrapped
 *               Docker client (engine.c answers both ways), instead of the fake runtime
 *
 * Without SEED, SEEDS or SIM_BUG (as tests/run runs it) it is the check: SIM_CHECK_SEEDS
 * seeds (200) with the fake runtime, a quarter as many with the Docker one, then each
 * positive control must be caught by some seed and that seed, run again, must print the very
 * same trace. Output is TAP. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sanitizer/common_interface_defs.h>

#include "sim.h"

uint64_t sim_rng;
int64_t sim_now;
bool sim_crashing;
uint64_t sim_step;
char sim_owner[17];
struct sim_knobs knobs;

static uint64_t seed;
static char share_root[256], share_base[200];

/* ---- the trace ring ---- */
#define TRACE_LINES 400
#define TRACE_BYTES 200
static char ring[TRACE_LINES][TRACE_BYTES];
static uint64_t ring_n;
static bool trace_all;

void trace(const char *fmt, ...)
{
	char *line = ring[ring_n % TRACE_LINES];
	va_list ap;
	int n = snprintf(line, TRACE_BYTES, "%6llu t=%-7lld ", (unsigned long long)sim_step,
			 (long long)sim_now);

	va_start(ap, fmt);
	vsnprintf(line + n, TRACE_BYTES - (size_t)n, fmt, ap);
	va_end(ap);
	ring_n++;
	if (trace_all)
		printf("# %s\n", line);
}

static void trace_print(void)
{
	uint64_t first = ring_n > TRACE_LINES ? ring_n - TRACE_LINES : 0;

	printf("# the last %llu events of seed %llu:\n", (unsigned long long)(ring_n - first),
	       (unsigned long long)seed);
	for (uint64_t i = first; i < ring_n; i++)
		printf("#   %s\n", ring[i % TRACE_LINES]);
}


void sim_fail(const char *fmt, ...)
{
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	trace("INVARIANT BROKEN: %s", why);
	if (!trace_all)
		trace_print();
	printf("# seed %llu failed at step %llu: %s\n", (unsigned long long)seed,
	       (unsigned long long)sim_step, why);
	printf("# replay: SEED=%llu make simulate   (or SEED=%llu build/asan/sim/test_simulation)\n",
	       (unsigned long long)seed, (unsigned long long)seed);
	fflush(stdout);
	_exit(3);
}

/* ---- the clock, the randomness and the host (wrapped) ---- */
int64_t __wrap_clock_mono_ms(void)
{
	return sim_now;
}

int64_t __wrap_clock_wall_ms(void)
{
	return SIM_WALL_BASE + sim_now;
}

int __wrap_random_hex(char *out, size_t hex_chars)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < hex_chars; i++)
		out[i] = hex[rnd_below(16)];
	out[hex_chars] = '\0';
	return 0;
}

int __wrap_uuid7(char out[37])
{
	uint64_t a = rnd(), b = rnd();

	snprintf(out, 37, "%08llx-%04llx-7%03llx-%04llx-%012llx",
		 (unsigned long long)((SIM_WALL_BASE + sim_now) & 0xffffffffull),
		 (unsigned long long)(a & 0xffff), (unsigned long long)((a >> 16) & 0xfff),
		 (unsigned long long)(0x8000 | ((a >> 28) & 0x3fff)),
		 (unsigned long long)(b & 0xffffffffffffull));
	return 0;
}

static void rmtree(const char *path)
{
	struct stat st;
	DIR *d = lstat(path, &st) == 0 && S_ISDIR(st.st_mode) ? opendir(path) : NULL;
	struct dirent *de;
	char sub[1024];

	if (!d) {
		unlink(path);
		return;
	}
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		rmtree(sub);
	}
	closedir(d);
	rmdir(path);
}

void sim_rmtree(const char *path)
{
	rmtree(path);
}

/* ---- pidfds of fake processes: any open fd stands for one; this table says whose ---- */
#define FDS 4096
static int64_t fd_pid[FDS];
static int64_t connecting_pid;

void pidfd_register(int fd, int64_t pid)
{
	if (fd == -1)
		connecting_pid = pid;
	else if (fd == -2)
		connecting_pid = 0;
	else if (fd >= 0 && fd < FDS)
		fd_pid[fd] = pid;
}

int __real_close(int fd);
int __wrap_close(int fd)
{
	if (fd >= 0 && fd < FDS)
		fd_pid[fd] = 0;
	return __real_close(fd);
}

pid_t __wrap_sandbox_pidfd_pid(int pidfd)
{
	int64_t pid;

	if (pidfd < 0 || pidfd >= FDS)
		return -1;
	if (!fd_pid[pidfd] && connecting_pid)
		fd_pid[pidfd] = connecting_pid; /* the peer pidfd agent_admit just took */
	pid = fd_pid[pidfd];
	if (!pid)
		return -1;
	return engine_pid_alive(pid) ? (pid_t)pid : 0;
}

/* The init's pid namespace: the life of the container's init stands for it. */
void __wrap_sandbox_read_pid_ns(struct sandbox *sb)
{
	struct e_ct *ct = engine_ct_by_pid(sb->pid);
	int fd;

	if (sb->init_pidfd >= 0)
		close(sb->init_pidfd);
	sb->init_pidfd = -1;
	sb->pid_ns[0] = '\0';
	if (sb->pid <= 0 || !ct)
		return;
	fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	snprintf(sb->pid_ns, sizeof(sb->pid_ns), "pid:[%u]", ct->life);
	pidfd_register(fd, sb->pid);
	sb->init_pidfd = fd;
}

/* ---- the admin side: answers to creates and removes ---- */
#define REQS 4096
enum req_kind { RQ_CREATE = 1, RQ_REMOVE };
struct req {
	enum req_kind kind;
	bool answered, lost;
	int status;
	char name[SB_NAME_BYTES], instance[SB_ID_BYTES], network[SB_NET_BYTES];
	bool net_managed, keep_workspace;
};
static struct req reqs[REQS];
static uint32_t nreqs;
/* what the current step answered: checked once the step is over */
static uint32_t answered_now[64];
static uint32_t nanswered_now;
#define NSB 6
static struct create_req creq[NSB];

static struct req *req_of(int32_t conn, uint32_t gen)
{
	if (conn < 0 || (uint32_t)conn >= REQS || (uint32_t)conn != gen || conn >= (int32_t)nreqs)
		return NULL;
	return &reqs[conn];
}

static void answered(struct req *r, int status, const struct sandbox *sb, const char *code)
{
	SIM_CHECK(!r->answered, "request %u (%s %s) answered twice", (unsigned)(r - reqs),
		  r->kind == RQ_CREATE ? "create" : "remove", r->name);
	r->answered = true;
	r->status = status;
	if (sb) {
		memcpy(r->instance, sb->instance_id, sizeof(r->instance));
		memcpy(r->network, sb->network, sizeof(r->network));
		r->net_managed = sb->net_managed;
	}
	trace("admin: %s %s answered %d %s", r->kind == RQ_CREATE ? "create" : "remove", r->name,
	      status, code ? code : "");
	if (nanswered_now < 64)
		answered_now[nanswered_now++] = (uint32_t)(r - reqs);
}

/* The lifecycle's answers go to the requests table instead of admin connections. */
static void hook_created(void *ctx, struct sandbox *sb, int64_t took_ms)
{
	struct req *r = req_of(sb->waiter, sb->waiter_gen);

	if (r)
		answered(r, 201, sb, NULL);
}

static void hook_create_failed(void *ctx, struct sandbox *sb)
{
	struct req *r = req_of(sb->waiter, sb->waiter_gen);

	if (r)
		answered(r, sb->err_status, sb, sb->err_code);
}

static void hook_removed(void *ctx, struct sandbox *sb)
{
	struct req *r = req_of(sb->waiter, sb->waiter_gen);

	if (r)
		answered(r, 200, sb, NULL);
}

/* The rest of the hooks are agenticd's own (agenticd_hooks). */
static struct lifecycle_hooks hooks;

void __wrap_metrics_provision(int64_t ms)
{
}

void __wrap_metrics_refusal(int reason)
{
}

/* ---- memory: the daemon allocates nothing once started (AGENTIC_ALLOC_CHECK's rule) ---- */
static bool sealed;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
volatile bool in_harness; /* the fakes' own allocations */

/* recovery's scratch, live and at its peak: within what recover_scratch_bytes reserves */
static bool in_recovery;
static size_t rec_live, rec_peak;

static void counted(void *p)
{
	if (in_recovery && p) {
		rec_live += malloc_usable_size(p);
		if (rec_live > rec_peak)
			rec_peak = rec_live;
	}
}

void __real_free(void *p);
void __wrap_free(void *p)
{
	if (in_recovery && p)
		rec_live -= malloc_usable_size(p);
	__real_free(p);
}

static void late(const char *what, size_t n)
{
	if (sealed && !in_harness) {
		if (getenv("SIM_STACK"))
			__sanitizer_print_stack_trace();
		sim_fail("the daemon allocated %zu bytes after start-up (%s)", n, what);
	}
}

void *__wrap_malloc(size_t n)
{
	void *p;

	late("malloc", n);
	p = __real_malloc(n);
	counted(p);
	return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
	void *p;

	late("calloc", n * m);
	p = __real_calloc(n, m);
	counted(p);
	return p;
}

void *__wrap_realloc(void *p, size_t n)
{
	late("realloc", n);
	if (in_recovery && p)
		rec_live -= malloc_usable_size(p);
	p = __real_realloc(p, n);
	counted(p);
	return p;
}

/* ---- the daemon ---- */
#define NUIDS 12
#define NSUBNETS 16    /* sandbox_subnet_pool 10.213.0.0/24 */
static struct daemon D;
static struct sandbox table[NSB];
static struct transcript_sb transcripts[NSB];
static struct lc_sb lcs[NSB];
static struct runtime *rt;
/* SIM_RUNTIME=docker: the real Docker runtime and its call queue over the wrapped client */
static bool docker_mode;
static struct runtime_docker rd;
static uint64_t rd_storage[8192];
static uint64_t uid_bits[1], subnet_bits[1], foreign_bits[1];
static uint32_t restarts, graceful_stops;

static void daemon_setup(bool fresh)
{
	struct config *cfg = &D.cfg;
	static char since_path[300];

	memset(&D, 0, sizeof(D));
	if (fresh)
		memset(table, 0, sizeof(table));
	config_defaults(cfg);
	snprintf(cfg->agentshare_root, sizeof(cfg->agentshare_root), "%s", share_root);
	snprintf(since_path, sizeof(since_path), "%s/engine-events-since", share_root);
	cfg->max_sandboxes = NSB;
	cfg->control_uid_min = 300000;
	cfg->control_uid_max = 300000 + NUIDS - 1;
	cfg->subnet_pool_prefix = 24;
	cfg->ready_timeout_ms = 4000;
	cfg->stop_grace_ms = 1000;
	D.nsb = NSB;
	D.epfd = D.sigfd = D.timerfd = D.lock_fd = -1;
	sandbox_table_init(cfg, table, NSB, uid_bits);
	subnet_init(cfg, subnet_bits, foreign_bits);
	agent_init(cfg, NULL, NULL, 0);
	transcript_init(transcripts, NSB);
	recover_init(cfg, &D.pool);
	memset(uid_bits, 0, sizeof(uid_bits));
	memset(subnet_bits, 0, sizeof(subnet_bits));
	memset(foreign_bits, 0, sizeof(foreign_bits));
	for (uint32_t i = 0; fresh && i < NSB; i++) {
		table[i].subnet = -1;
		table[i].waiter = -1;
		table[i].init_pidfd = -1;
	}
	memcpy(D.owner, sim_owner, sizeof(D.owner));
	snprintf(D.owner_label, sizeof(D.owner_label), "agentic-daemon=%.16s", D.owner);
	snprintf(D.self_exe, sizeof(D.self_exe), "/proc/self/exe");
	agenticd = &D;
	/* as agenticd's start_lifecycle, with the fake runtime (or the real Docker one) */
	if (docker_mode) {
		struct runtime_docker_config rc = {
			.cfg = &D.cfg, .dc = &D.dc, .owner = D.owner, .owner_label = D.owner_label,
			.self_exe = D.self_exe, .seccomp_opt = D.seccomp_opt, .epfd = -1,
			.tag = TAG_JOB, .slots = RT_SLOTS(NSB),
			.events_since = (SIM_WALL_BASE + sim_now) / 1000, .since_path = since_path,
		};

		SIM_CHECK(runtime_docker_storage_bytes(RT_SLOTS(NSB)) <= sizeof(rd_storage),
			  "harness: runtime_docker needs %zu bytes",
			  runtime_docker_storage_bytes(RT_SLOTS(NSB)));
		SIM_CHECK(runtime_docker_init(&rd, &rc, rd_storage, sizeof(rd_storage)) == 0,
			  "runtime_docker_init failed");
		rt = &rd.rt;
	} else {
		rt = engine_runtime();
	}
	D.rt = rt;
	netpool_init(&D.pool, rt, RT_SLOT_POOL(NSB), subnet_map());
	hooks = agenticd_hooks;
	hooks.created = hook_created;
	hooks.create_failed = hook_create_failed;
	hooks.removed = hook_removed;
	lifecycle_start(&(struct lifecycle_config){ .cfg = &D.cfg, .sb = table, .nsb = NSB,
						    .slots = lcs, .rt = rt, .pool = &D.pool,
						    .hooks = &hooks, .check = false });
}

/* Start-up: recovery from the records and the engine, then the loop's first calls. */
static bool first_start;

/* ---- a sandbox's TTL (lifecycle_expiry) ---- */
static uint64_t expiries_seen, expiries_kept;
/* what each live sandbox's record says of its expiry when agenticd dies */
static struct { char instance[SB_ID_BYTES]; int64_t at; } kept[NSB];

/* Ready sandboxes past their expiry now (none counts while agenticd stops). */
static uint32_t expired_ready(void)
{
	uint32_t n = 0;

	for (uint32_t i = 0; !lifecycle_stopping() && i < NSB; i++)
		n += table[i].lc == LC_READY && table[i].expires_at &&
		     SIM_WALL_BASE + sim_now >= table[i].expires_at;
	return n;
}

/* The lifecycle's turn: after it, no ready sandbox is past its expiry. */
static void expiry_tick(void)
{
	uint32_t due = expired_ready();

	lifecycle_tick(sim_now);
	SIM_CHECK(expired_ready() == 0, "%u ready sandbox(es) past their expiry after the "
		  "lifecycle's turn", expired_ready());
	expiries_seen += due;
}

/* agenticd dies: what the records say of each live sandbox's expiry. */
static bool record_exists(const char *instance);
static void expiry_remember(void)
{
	memset(kept, 0, sizeof(kept));
	for (uint32_t i = 0; i < NSB; i++)
		if (table[i].state != SB_FREE && record_exists(table[i].instance_id)) {
			memcpy(kept[i].instance, table[i].instance_id, sizeof(kept[i].instance));
			kept[i].at = table[i].expires_at;
		}
}

/* agenticd recovered: each sandbox it took back from its record has the expiry it had. */
static void expiry_check_recovered(void)
{
	for (uint32_t i = 0; i < NSB; i++) {
		const struct sandbox *sb = &table[i];

		for (uint32_t k = 0; sb->state != SB_FREE && k < NSB; k++) {
			if (!kept[k].instance[0] || strcmp(kept[k].instance, sb->instance_id) != 0)
				continue;
			SIM_CHECK(sb->expires_at == kept[k].at, "%s recovered with expiry %lld, its "
				  "record said %lld", sb->name, (long long)sb->expires_at,
				  (long long)kept[k].at);
			expiries_kept += kept[k].at != 0;
		}
	}
	memset(kept, 0, sizeof(kept));
}

static void daemon_start(void)
{
	char err[1024];
	int r;

	for (int tries = 0;; tries++) {
		daemon_setup(first_start);
		first_start = false;
		trace("agenticd: start (recovery)");
		sealed = false;
		in_recovery = true;
		rec_live = rec_peak = 0;
		engine_recovery_begins();
		r = recover_state(rt, err, sizeof(err));
		in_recovery = false;
		SIM_CHECK(rec_peak <= recover_scratch_bytes(NSB), "recovery allocated %zu bytes at "
			  "its peak, recover_scratch_bytes promises %zu", rec_peak,
			  recover_scratch_bytes(NSB));
		SIM_CHECK(rec_live == 0, "recovery kept %zu bytes allocated", rec_live);
		trace("agenticd: recovery's scratch peaked at %zu bytes of %zu", rec_peak,
		      recover_scratch_bytes(NSB));
		if (r == 0)
			break;
		trace("agenticd: recovery failed (%s); started again", err);
		sandbox_table_reset(); /* the failed process exited: a new one starts empty */
		SIM_CHECK(tries < 50, "agenticd never recovers: %s", err);
		sim_now += 1000;
	}
	sealed = true;
	expiry_check_recovered();
	rt->ops->start(rt->self);
	expiry_tick();
}

/* The process dies: its fds close, its memory is gone; the engine and the disk stay. */
static void daemon_crash(void)
{
	sim_crashing = true;
	trace("agenticd: crash");
	in_harness = true;
	init_crash();
	engine_crash();
	for (uint32_t i = 0; i < NSB; i++) {
		struct sandbox *sb = &table[i];

		runlog_abandon(sb); /* before exec_sandbox_gone: a dead process writes nothing */
		/* the exec table lives in exec.c's statics: its sessions end with the process */
		if (sb->state != SB_FREE)
			exec_sandbox_gone(sb, "agenticd died");
	}
	expiry_remember();
	/* the rest of the table as a new process finds it: L's reset (pidfds closed, gens on) */
	sandbox_table_reset();
	for (uint32_t i = 0; i < nreqs; i++)
		if (!reqs[i].answered)
			reqs[i].lost = true; /* the client's connection died with agenticd */
	in_harness = false;
	sim_crashing = false;
	restarts++;
}

/* ---- the invariants ---- */

static bool record_exists(const char *instance)
{
	char p[512];
	struct stat st;

	snprintf(p, sizeof(p), "%s/instances/%s/sandbox.json", share_root, instance);
	return stat(p, &st) == 0;
}

static struct sandbox *live_by_instance(const char *instance)
{
	for (uint32_t i = 0; i < NSB; i++)
		if (table[i].state != SB_FREE && strcmp(table[i].instance_id, instance) == 0)
			return &table[i];
	return NULL;
}

static bool net_claimed(const struct e_net *n)
{
	for (uint32_t i = 0; i < NSB; i++)
		if (table[i].state != SB_FREE && table[i].net_managed && table[i].net_exists &&
		    strcmp(table[i].network, n->name) == 0)
			return true;
	for (uint32_t i = 0; i < D.pool.n; i++)
		if (strcmp(D.pool.warm[i].name, n->name) == 0)
			return true;
	if ((D.pool.active || D.pool.orphan) && strcmp(D.pool.pending.name, n->name) == 0)
		return true;
	return false;
}

static void check_maps(void)
{
	uint32_t live = 0, uids = 0, subnets = 0;

	for (uint32_t u = D.cfg.control_uid_min; u <= D.cfg.control_uid_max; u++) {
		uint32_t holders = 0;

		for (uint32_t i = 0; i < NSB; i++)
			holders += table[i].state != SB_FREE && table[i].uid_taken && table[i].uid == u;
		SIM_CHECK(holders <= 1, "control uid %u held by %u sandboxes", u, holders);
		SIM_CHECK(holders == (uint32_t)(idalloc_taken(sandbox_uid_map(), u) == 1), "control uid %u: "
			  "the map says %s, %u sandbox holds it", u,
			  idalloc_taken(sandbox_uid_map(), u) == 1 ? "taken" : "free", holders);
		uids += holders;
	}
	SIM_CHECK(uids == sandbox_uid_map()->used, "uid map counts %u, sandboxes hold %u", sandbox_uid_map()->used, uids);
	for (uint32_t s = 0; s < NSUBNETS; s++) {
		uint32_t holders = 0;
		bool pool = (D.pool.active || D.pool.orphan) && D.pool.pending.subnet == (int32_t)s;

		for (uint32_t i = 0; i < NSB; i++)
			holders += table[i].state != SB_FREE && table[i].subnet == (int32_t)s;
		for (uint32_t i = 0; i < D.pool.n; i++)
			holders += D.pool.warm[i].subnet == (int32_t)s;
		holders += pool;
		holders += (uint32_t)((foreign_bits[0] >> s) & 1);
		SIM_CHECK(holders <= 1, "subnet %u held %u times", s, holders);
		SIM_CHECK(holders == (uint32_t)(idalloc_taken(subnet_map(), s) == 1), "subnet %u: the "
			  "map says %s, held %u times", s,
			  idalloc_taken(subnet_map(), s) == 1 ? "taken" : "free", holders);
		subnets += holders;
	}
	SIM_CHECK(subnets == subnet_map()->used, "subnet map counts %u, %u held", subnet_map()->used,
		  subnets);
	for (uint32_t i = 0; i < NSB; i++)
		live += table[i].state != SB_FREE;
	SIM_CHECK(live == sandbox_live(), "agenticd counts %u live sandboxes, the table has %u", sandbox_live(),
		  live);
}

/* Nothing on the engine or in the agentshare that agenticd does not know of. */
static void check_no_leak(void)
{
	char dir[512];
	DIR *d;
	struct dirent *de;

	for (int i = 0; i < E_CTS; i++) {
		const struct e_ct *ct = &e_cts[i];
		struct sandbox *sb;

		if (!ct->used || !ct->ours)
			continue;
		sb = live_by_instance(ct->instance);
		/* ct_maybe: its create's answer was lost, its rollback is looking for it */
		SIM_CHECK(sb && ((sb->ct_exists && strcmp(sb->container_id, ct->id) == 0) ||
				 sb->ct_maybe),
			  "container %s (%.12s, instance %.8s) is on the engine but no sandbox "
			  "holds it: leaked", ct->name, ct->id, ct->instance);
	}
	/* a uid a sandbox holds is on no other container (an init there could claim it) */
	for (uint32_t i = 0; i < NSB; i++) {
		char uid[16];
		uint32_t n = 0;

		if (table[i].state == SB_FREE || !table[i].uid_taken)
			continue;
		snprintf(uid, sizeof(uid), "%u", table[i].uid);
		for (int k = 0; k < E_CTS; k++)
			n += e_cts[k].used && e_cts[k].ours && strcmp(e_cts[k].uid, uid) == 0 &&
			     strcmp(e_cts[k].instance, table[i].instance_id) != 0;
		SIM_CHECK(n == 0, "control uid %s of %s is also on %u other container(s) of the "
			  "engine: held twice", uid, table[i].name, n);
	}
	for (int i = 0; i < E_NETS; i++) {
		const struct e_net *n = &e_nets[i];

		if (!n->used || !n->ours || n->stuck)
			continue;
		SIM_CHECK(net_claimed(n), "network %s (%s) is on the engine but neither a sandbox "
			  "nor the warm pool holds it: leaked", n->name, n->subnet);
	}
	snprintf(dir, sizeof(dir), "%s/instances", share_root);
	if (!(d = opendir(dir)))
		return;
	in_harness = true;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.' || !record_exists(de->d_name))
			continue;
		if (!live_by_instance(de->d_name)) {
			closedir(d);
			sim_fail("instances/%s/sandbox.json exists but no sandbox has that instance: "
				 "leaked record", de->d_name);
		}
	}
	closedir(d);
	in_harness = false;
}

/* A failed create left nothing; a removed sandbox left nothing (a kept workspace aside). */
static void check_answers(void)
{
	for (uint32_t k = 0; k < nanswered_now; k++) {
		struct req *r = &reqs[answered_now[k]];
		bool gone = r->kind == RQ_REMOVE || r->status >= 300;

		if (!gone || !r->instance[0])
			continue;
		SIM_CHECK(!live_by_instance(r->instance), "%s %s answered %d but its sandbox is "
			  "still in the table", r->kind == RQ_CREATE ? "create" : "remove", r->name,
			  r->status);
		SIM_CHECK(!engine_ct_by_instance(r->instance), "%s %s answered %d but its "
			  "container is still on the engine", r->kind == RQ_CREATE ? "create" : "remove",
			  r->name, r->status);
		SIM_CHECK(!r->net_managed || !engine_net_by_name(r->network), "%s %s answered %d "
			  "but its network %s is still on the engine",
			  r->kind == RQ_CREATE ? "create" : "remove", r->name, r->status, r->network);
		SIM_CHECK(!record_exists(r->instance), "%s %s answered %d but its sandbox.json "
			  "is still there", r->kind == RQ_CREATE ? "create" : "remove", r->name,
			  r->status);
	}
	nanswered_now = 0;
}

static void check_all(void)
{
	check_maps();
	check_no_leak();
	check_answers();
	for (uint32_t i = 0; i < NSB; i++) {
		if (table[i].lc == LC_FREE)
			continue;
		SIM_CHECK(lifecycle_check(&table[i]), "lifecycle_check: %s in %s breaks an "
			  "invariant of lifecycle.h", table[i].name, lifecycle_state_name(table[i].lc));
		init_check_run(&table[i]);
	}
}

/* ---- the harness's own defects (SIM_BUG), to prove the checks catch them ---- */
int __real_idalloc_free(struct idalloc *a, uint32_t id);
int __wrap_idalloc_free(struct idalloc *a, uint32_t id)
{
	if (knobs.bug == BUG_LEAK_UID && a == sandbox_uid_map() && chance(50)) {
		trace("SIM_BUG: uid %u not given back", id);
		return 0;
	}
	return __real_idalloc_free(a, id);
}

size_t __real_runlog_output(struct sandbox *sb, int stream, const void *data, size_t len);
size_t __wrap_runlog_output(struct sandbox *sb, int stream, const void *data, size_t len)
{
	size_t n;

	/* the disk takes only part of a write now and then (a full agentshare, freed again) */
	if (len > 1 && transcript_of(sb)->run.open && chance(knobs.disk)) {
		size_t part = rnd_below((uint32_t)len);

		n = __real_runlog_output(sb, stream, data, part);
		trace("share: transcript of %s takes %zu of %zu bytes", sb->name, n, len);
		return n;
	}
	n = __real_runlog_output(sb, stream, data, len);

	if (knobs.bug == BUG_DUP_BYTES && n == len && len > 1 && chance(20)) {
		trace("SIM_BUG: one byte written twice");
		__real_runlog_output(sb, stream, data, 1);
	}
	return n;
}

/* ---- the driver ---- */

static const char *names[] = { "alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
			       "golf", "hotel", "india", "juliet" };

static struct req *new_req(enum req_kind kind, const char *name)
{
	struct req *r;

	SIM_CHECK(nreqs < REQS, "harness: out of requests");
	r = &reqs[nreqs];
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	snprintf(r->name, sizeof(r->name), "%s", name);
	nreqs++;
	return r;
}

static void do_create(void)
{
	const char *name = names[rnd_below(ARRAY_LEN(names))];
	struct sandbox *sb;
	struct req *r;
	struct create_req *cr;

	if (lifecycle_stopping() || sandbox_by_name(name))
		return;
	sb = sandbox_new();
	if (!sb)
		return;
	r = new_req(RQ_CREATE, name);
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	cr = &creq[sb - table];
	memset(cr, 0, sizeof(*cr));
	cr->name = sb->name;
	sb->waiter = (int32_t)(r - reqs);
	sb->waiter_gen = (uint32_t)(r - reqs);
	/* now and then a TTL: removed once past it, whatever restarts come between */
	if (chance(150))
		lifecycle_expiry_set(sb, SIM_WALL_BASE + sim_now + 200 + rnd_below(15000));
	else if (chance(150))
		sb->ttl_ms = 100 + rnd_below(10000); /* a create's ttl_seconds: from READY on */
	trace("admin: create %s (request %u) expires_at=%lld", name, (unsigned)(r - reqs),
	      (long long)lifecycle_expiry(sb));
	SIM_CHECK(lifecycle_create(sb, cr) == 0, "a create of a new slot refused");
	memcpy(r->instance, sb->instance_id, sizeof(r->instance));
}

static void do_remove(void)
{
	struct sandbox *sb = &table[rnd_below(NSB)];
	struct req *r;
	bool force = chance(300), keep = chance(300);

	if (sb->state != SB_READY && sb->state != SB_CONFLICT)
		return;
	r = new_req(RQ_REMOVE, sb->name);
	memcpy(r->instance, sb->instance_id, sizeof(r->instance));
	memcpy(r->network, sb->network, sizeof(r->network));
	r->net_managed = sb->net_managed;
	r->keep_workspace = keep;
	sb->waiter = (int32_t)(r - reqs);
	sb->waiter_gen = (uint32_t)(r - reqs);
	trace("admin: remove %s force=%d keep_workspace=%d", sb->name, force, keep);
	SIM_CHECK(lifecycle_remove(sb, force, keep) == 0, "remove of %s in %s refused", sb->name,
		  lifecycle_state_name(sb->lc));
}

static void do_exec(void)
{
	struct sandbox *sb = &table[rnd_below(NSB)];

	if (sb->state != SB_READY || !agent_of(sb)->call || !agent_of(sb)->registered)
		return;
	init_exec(sb, chance(600) ? 0 : -1);
}

/* One turn of agenticd's loop at the current time. */
static void loop_turn(void)
{
	init_loop();
	expiry_tick();
	agent_tick(sim_now);
	runlog_tick(sim_now);
}

static void advance_time(void)
{
	int64_t next = lifecycle_next_deadline(sim_now);
	uint32_t k = rnd_below(100);

	if (k < 80)
		sim_now += 1 + rnd_below(30);
	else if (k < 98)
		sim_now += 1 + rnd_below(300);
	else
		sim_now += 1 + rnd_below(2500);
	if (next != INT64_MAX && next > sim_now && chance(30))
		sim_now = next; /* jump to the next deadline */
}

static void graceful_restart(void)
{
	trace("agenticd: SIGTERM");
	lifecycle_shutdown();
	for (int i = 0; i < 2000 && lifecycle_busy(); i++) {
		sim_now += 1 + rnd_below(100);
		loop_turn();
		sim_step++;
		check_all();
	}
	SIM_CHECK(!lifecycle_busy(), "agenticd did not stop: work still in flight");
	runlog_tick(INT64_MAX);
	graceful_stops++;
	daemon_crash();
	daemon_start();
}

static void step(void)
{
	uint32_t k = rnd_below(1000);

	sim_step++;
	if (k < 110)
		do_create();
	else if (k < 170)
		do_remove();
	else if (k < 220)
		do_exec();
	else if (k < 500)
		init_step();
	else if (k < 500 + knobs.chaos)
		engine_chaos();
	else if (k >= 1000 - knobs.restart) {
		if (chance(300)) {
			graceful_restart();
		} else {
			daemon_crash();
			/* while it is down: maybe a taint it must see when back, then a while */
			if (chance(500))
				engine_taint();
			sim_now += 1000 + rnd_below(3000);
			daemon_start();
		}
	} else {
		advance_time();
		loop_turn();
	}
	check_all();
}

/* What was done to a sandbox's container behind agenticd's back is in its posture, whatever
 * restarts came between (the events of the window it was down are replayed). */
static uint64_t taints_checked;

static void check_taints(void)
{
	for (uint32_t i = 0; i < NSB; i++) {
		const struct sandbox *sb = &table[i];
		const struct e_ct *ct = NULL;

		if (sb->state != SB_READY && sb->state != SB_CONFLICT)
			continue;
		for (int k = 0; k < E_CTS; k++)
			if (e_cts[k].used && strcmp(e_cts[k].id, sb->container_id) == 0)
				ct = &e_cts[k];
		if (!ct || !ct->tainted)
			continue;
		SIM_CHECK(!(ct->tainted & E_TAINT_EXEC) ||
			  (sb->posture.taints & POSTURE_BIT(POSTURE_DIRECT_DOCKER_EXEC)),
			  "%s: a docker exec into its container is not in its posture", sb->name);
		SIM_CHECK(!(ct->tainted & E_TAINT_CHANGED) ||
			  (sb->posture.taints & POSTURE_BIT(POSTURE_CONTAINER_CHANGED)),
			  "%s: a docker update of its container is not in its posture", sb->name);
		taints_checked++;
	}
}

/* The end: no more faults; every init says what it holds, every sandbox is removed. */
static void settle(void)
{
	struct sim_knobs saved = knobs;

	knobs.fail = knobs.rfail = knobs.lost = knobs.disk = 0;
	trace("settle: no more faults");
	for (int i = 0; i < 400; i++) {
		sim_step++;
		sim_now += 50;
		init_flush_all();
		loop_turn();
		check_all();
	}
	for (uint32_t i = 0; i < NSB; i++) {
		extern void init_check_complete(const struct sandbox *sb);

		if (table[i].state == SB_READY)
			init_check_complete(&table[i]);
	}
	check_taints();
	for (int i = 0; i < 3000; i++) {
		bool left = false;

		for (uint32_t s = 0; s < NSB; s++) {
			if (table[s].state == SB_READY || table[s].state == SB_CONFLICT) {
				struct sandbox *sb = &table[s];
				struct req *r = new_req(RQ_REMOVE, sb->name);

				memcpy(r->instance, sb->instance_id, sizeof(r->instance));
				memcpy(r->network, sb->network, sizeof(r->network));
				r->net_managed = sb->net_managed;
				sb->waiter = (int32_t)(r - reqs);
				sb->waiter_gen = (uint32_t)(r - reqs);
				trace("settle: remove %s", sb->name);
				lifecycle_remove(sb, chance(500), false);
			}
			left |= table[s].state != SB_FREE;
		}
		if (!left && !lifecycle_busy())
			break;
		sim_step++;
		sim_now += 100;
		loop_turn();
		check_all();
	}
	for (uint32_t s = 0; s < NSB; s++)
		SIM_CHECK(table[s].state == SB_FREE, "sandbox %s never settled: state %s step %d",
			  table[s].name, sandbox_state_name(&table[s]), (int)table[s].lc);
	for (int i = 0; i < E_CTS; i++)
		SIM_CHECK(!e_cts[i].used || !e_cts[i].ours, "container %s left on the engine at the "
			  "end", e_cts[i].name);
	for (uint32_t i = 0; i < nreqs; i++)
		SIM_CHECK(reqs[i].answered || reqs[i].lost, "%s %s (request %u) never answered",
			  reqs[i].kind == RQ_CREATE ? "create" : "remove", reqs[i].name, i);
	SIM_CHECK(sandbox_uid_map()->used == 0, "%u control uids held at the end", sandbox_uid_map()->used);
	knobs = saved;
}

static uint32_t env_u32(const char *name, uint32_t def)
{
	const char *v = getenv(name);

	return v && *v ? (uint32_t)strtoul(v, NULL, 10) : def;
}

struct totals {
	uint64_t steps, creates_ready, creates_failed, removes, restarts, stops, bytes, execs,
		 exec_bytes, taints, expired, expiry_kept;
};

static int run_seed(uint64_t s, uint32_t steps, struct totals *tot)
{
	/* every fourth seed is a stormy one: four times the faults and the chaos */
	if (s % 4 == 3 && !getenv("SIM_CALM")) {
		knobs.fail *= 4;
		knobs.chaos *= 4;
		knobs.restart *= 3;
	}
	seed = s;
	sim_rng = s * 0x2545f4914f6cdd1dull + 1;
	sim_now = 1000000;
	sim_step = 0;
	ring_n = 0;
	nreqs = 0;
	nanswered_now = 0;
	restarts = graceful_stops = 0;
	sim_bytes_checked = 0;
	sim_execs = sim_exec_bytes = 0;
	taints_checked = 0;
	expiries_seen = expiries_kept = 0;
	init_clients_reset();
	snprintf(share_root, sizeof(share_root), "%s/seed-%llu", share_base, (unsigned long long)s);
	if (mkdir(share_root, 0700) != 0)
		sim_fail("mkdir %s: %s", share_root, strerror(errno));
	daemon_setup(true);
	first_start = true;
	host_owner(&D.cfg, sim_owner, sizeof(sim_owner));
	engine_reset(sim_owner);
	init_reset();
	trace("seed %llu: faults fail=%u lost=%u chaos=%u restart=%u", (unsigned long long)s,
	      knobs.fail, knobs.lost, knobs.chaos, knobs.restart);
	daemon_start();
	for (uint32_t i = 0; i < steps; i++)
		step();
	settle();
	tot->steps += sim_step;
	for (uint32_t i = 0; i < nreqs; i++) {
		tot->creates_ready += reqs[i].kind == RQ_CREATE && reqs[i].answered &&
				      reqs[i].status == 201;
		tot->creates_failed += reqs[i].kind == RQ_CREATE && reqs[i].answered &&
				       reqs[i].status >= 300;
		tot->removes += reqs[i].kind == RQ_REMOVE && reqs[i].answered;
	}
	tot->restarts += restarts;
	tot->stops += graceful_stops;
	tot->bytes += sim_bytes_checked;
	tot->execs += sim_execs;
	tot->exec_bytes += sim_exec_bytes;
	tot->taints += taints_checked;
	tot->expired += expiries_seen;
	tot->expiry_kept += expiries_kept;
	/* the daemon's fds die with it */
	daemon_crash();
	sealed = false;
	init_reset();
	rmtree(share_root);
	if (trace_all)
		trace_print();
	return 0;
}

/* Runs seeds [base, base + n) in children (a failure exits its child and the batch goes
 * on), their output to out_fd. Returns how many failed; *first is the first that did. */
static uint32_t seeds_ran;

static uint32_t run_batch(uint64_t base, uint32_t n, uint32_t steps, uint32_t stop_after,
			  int out_fd, struct totals *tot, uint64_t *first)
{
	uint32_t failed = 0;

	for (uint32_t i = 0; i < n; i++) {
		seeds_ran = i + 1;
		int fds[2], st = 0;
		struct totals t;
		pid_t child;

		if (pipe(fds) != 0)
			exit(2);
		fflush(stdout);
		child = fork();
		if (child == 0) {
			close(fds[0]);
			if (out_fd >= 0 && out_fd != STDOUT_FILENO)
				dup2(out_fd, STDOUT_FILENO);
			run_seed(base + i, steps, tot);
			fflush(stdout);
			(void)!write(fds[1], tot, sizeof(*tot));
			_exit(0);
		}
		close(fds[1]);
		if (read(fds[0], &t, sizeof(t)) == (ssize_t)sizeof(t))
			*tot = t;
		close(fds[0]);
		waitpid(child, &st, 0);
		snprintf(share_root, sizeof(share_root), "%s/seed-%llu", share_base,
			 (unsigned long long)(base + i));
		rmtree(share_root); /* what a failed seed left */
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			continue;
		if (!failed)
			*first = base + i;
		failed++;
		if (!WIFEXITED(st))
			printf("# seed %llu: the child died (signal %d)\n",
			       (unsigned long long)(base + i), WTERMSIG(st));
		if (failed >= stop_after)
			break;
	}
	return failed;
}

static void print_totals(uint32_t nseeds, double secs, const struct totals *tot)
{
	printf("# %u seeds run in %.1f s (%.1f ms a seed); the passing ones: %llu steps, %llu "
	       "creates ready, %llu rolled back, %llu removes, %llu restarts (%llu graceful), %llu "
	       "execs (%llu bytes to their clients checked), %llu transcript bytes compared, %llu "
	       "tainted sandboxes whose taints held, %llu expired (TTL), %llu expiries read back "
	       "at a restart\n",
	       nseeds, secs, secs * 1000 / (nseeds ? nseeds : 1),
	       (unsigned long long)tot->steps, (unsigned long long)tot->creates_ready,
	       (unsigned long long)tot->creates_failed, (unsigned long long)tot->removes,
	       (unsigned long long)tot->restarts, (unsigned long long)tot->stops,
	       (unsigned long long)tot->execs, (unsigned long long)tot->exec_bytes,
	       (unsigned long long)tot->bytes, (unsigned long long)tot->taints,
	       (unsigned long long)tot->expired, (unsigned long long)tot->expiry_kept);
}

static double since(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A defect the harness injects must make some seed fail, and that seed, run again, must
 * print the very same trace: the positive control and the replay, for make check. */
static int control(int n, const char *bug, int which, uint32_t steps)
{
	char a[] = "/tmp/agentic-sim-a-XXXXXX", b[] = "/tmp/agentic-sim-b-XXXXXX";
	int fa = mkstemp(a), fb = mkstemp(b);
	struct totals tot = { 0 };
	uint64_t first = 0;
	uint32_t failed;
	bool same = false;
	char line[512];
	FILE *f;

	knobs.bug = which;
	failed = run_batch(1, 200, steps, 1, fa, &tot, &first);
	if (failed) {
		run_batch(first, 1, steps, 1, fb, &tot, &first);
		f = fopen(a, "r");
		while (f && fgets(line, sizeof(line), f))
			if (strstr(line, "failed at step") || strstr(line, "INVARIANT"))
				printf("#   %s", line);
		if (f)
			fclose(f);
		{
			FILE *x = fopen(a, "r"), *y = fopen(b, "r");
			int ca, cb;

			same = x && y;
			while (same && ((ca = fgetc(x)) != EOF) | ((cb = fgetc(y)) != EOF))
				same = ca == cb;
			if (x)
				fclose(x);
			if (y)
				fclose(y);
		}
	}
	printf("%s %d - SIM_BUG=%s (a harness-injected defect) is caught%s%llu\n",
	       failed ? "ok" : "not ok", n, bug, failed ? " by seed " : ": no seed of 200 failed",
	       (unsigned long long)(failed ? first : 0));
	printf("%s %d - that seed replays to the same output, its trace byte for byte\n",
	       failed && same ? "ok" : "not ok", n + 1);
	close(fa);
	close(fb);
	if (failed && !same)
		printf("# the two outputs: %s %s\n", a, b);
	else
		unlink(a), unlink(b);
	knobs.bug = BUG_NONE;
	return (failed ? 0 : 1) + (failed && same ? 0 : 1);
}

/* SEED=n, SEEDS=n or SIM_BUG: a batch, as asked. Without them (tests/run): the check. */
int main(void)
{
	const char *one = getenv("SEED"), *bug = getenv("SIM_BUG");
	bool batch = one || getenv("SEEDS") || bug;
	uint64_t base = env_u32("SEED_BASE", 1), first = 0;
	uint32_t nseeds = env_u32("SEEDS", env_u32("SIM_CHECK_SEEDS", 200));
	uint32_t steps = env_u32("STEPS", batch ? 1500 : 500);
	struct totals tot = { 0 };
	struct timespec t0;
	uint32_t failed;
	int bad = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	knobs.fail = env_u32("SIM_FAIL", 40);
	knobs.rfail = env_u32("SIM_RECOVERY_FAIL", 20);
	knobs.disk = env_u32("SIM_DISK", 20);
	knobs.busy = env_u32("SIM_BUSY", 20);
	docker_mode = getenv("SIM_RUNTIME") && strcmp(getenv("SIM_RUNTIME"), "docker") == 0;
	knobs.lost = env_u32("SIM_LOST", 10);
	knobs.chaos = env_u32("SIM_CHAOS", 15);
	knobs.restart = env_u32("SIM_RESTART", 3);
	knobs.bug = !bug ? BUG_NONE : strcmp(bug, "leak-uid") == 0 ? BUG_LEAK_UID
		    : strcmp(bug, "dup-bytes") == 0 ? BUG_DUP_BYTES : BUG_NONE;
	trace_all = env_u32("SIM_TRACE", 0) != 0;
	log_set_level(LOG_ERROR);
	if (!env_u32("SIM_LOG", 0))
		(void)!freopen("/dev/null", "w", stderr);
	if (one) {
		base = strtoull(one, NULL, 10);
		nseeds = 1;
	}
	printf("1..%d\n", batch ? 1 : 6);
	printf("# simulation: seeds %llu..%llu, %u steps each, faults fail=%u recovery_fail=%u "
	       "lost=%u disk=%u chaos=%u restart=%u (per mille), runtime %s%s%s\n", (unsigned long long)base,
	       (unsigned long long)(base + nseeds - 1), steps, knobs.fail, knobs.rfail, knobs.lost,
	       knobs.disk,
	       knobs.chaos, knobs.restart, docker_mode ? "docker (wrapped client)" : "fake",
	       bug ? ", SIM_BUG=" : "", bug ? bug : "");
	snprintf(share_base, sizeof(share_base), "%s/agentic-sim-XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(share_base)) {
		printf("not ok 1 - cannot make a temp dir: %s\n", strerror(errno));
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	failed = run_batch(base, nseeds, steps, knobs.bug ? 1 : 3, STDOUT_FILENO, &tot, &first);
	print_totals(seeds_ran, since(&t0), &tot);
	if (batch && knobs.bug) {
		printf("%s 1 - SIM_BUG=%s is caught (seed %llu)\n", failed ? "ok" : "not ok", bug,
		       (unsigned long long)first);
		rmtree(share_base);
		return failed ? 0 : 1;
	}
	printf("%s 1 - every invariant held after every step of %u seeds%s\n",
	       failed ? "not ok" : "ok", nseeds, failed ? " (see the failing seed above)" : "");
	if (batch) {
		rmtree(share_base);
		return failed ? 1 : 0;
	}
	bad += failed != 0;
	/* the same through runtime_docker.c and its call queue, over the wrapped client */
	docker_mode = true;
	memset(&tot, 0, sizeof(tot));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	failed = run_batch(10001, nseeds / 4, steps, 3, STDOUT_FILENO, &tot, &first);
	print_totals(seeds_ran, since(&t0), &tot);
	printf("%s 2 - the same through runtime_docker.c and engine.c over a wrapped Docker "
	       "client, %u seeds (SIM_RUNTIME=docker SEED_BASE=10001)%s\n", failed ? "not ok" : "ok",
	       nseeds / 4, failed ? " (see the failing seed above)" : "");
	bad += failed != 0;
	docker_mode = false;
	bad += control(3, "leak-uid", BUG_LEAK_UID, steps);
	bad += control(5, "dup-bytes", BUG_DUP_BYTES, steps);
	rmdir(share_base);
	return bad ? 1 : 0;
}
