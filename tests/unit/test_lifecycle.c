/* test_lifecycle.c: a sandbox's state machine against a fake runtime: every state × event
 * (the refused ones change nothing), every failed create rolled back to nothing held (no
 * uid, no subnet, no call, no network or container left in the fake engine, no record),
 * retries, deferred container events, the warm pool, a restart rebuilt by recovery, and the
 * invariant checker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent_slot.h"
#include "daemon/daemon.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/recover.h"
#include "lifecycle/steps.h"
#include "workspace/share.h"

#define NSB 4

static struct daemon d;
static struct sandbox table[NSB];
static struct lc_sb lcs[NSB];
static uint64_t uid_bits[(600000 + 63) / 64], subnet_bits[(4096 + 63) / 64];
static uint64_t foreign_bits[(4096 + 63) / 64];
static char root[64];
static struct create_req req;

/* ---- the fake runtime: calls wait until the test answers them ---- */

static struct fake {
	struct rt_call *pending[NSB + 1];
	int begin_error;              /* the next call() fails with it */
	int nets, cts;                /* objects in the fake engine */
	int ws_error;                 /* workspace_make fails with it */
	int ws_made, ws_retired, ws_dropped;
	bool running;                 /* what an inspect says */
	bool lose;                    /* the next answer's effect happens, the answer is lost */
	int inspect_error;            /* recovery's inspect fails with it */
	bool net_other;               /* inspects see another network attached */
	int remove_error;             /* recovery's container remove fails with it */
	uint32_t calls;
	/* the last container and network made, for recovery's synchronous reads */
	char ct_id[RT_ID_BYTES], ct_name[SB_NAME_BYTES], inst[SB_ID_BYTES], uid[16];
	char net_id[RT_ID_BYTES], net_name[SB_NET_BYTES], subnet[20];
} fk;

static int64_t now_ms = 1000000;
static int64_t clock_now(void)
{
	return now_ms;
}

static int fake_call(void *self, struct rt_call *c)
{
	(void)self;
	memset(&c->res, 0, sizeof(c->res));
	if (fk.begin_error) {
		int r = fk.begin_error;

		fk.begin_error = 0;
		c->res.outcome = RT_ENGINE;
		snprintf(c->res.text, sizeof(c->res.text), "fake engine unreachable");
		return r;
	}
	assert_true(c->slot <= NSB);
	assert_null(fk.pending[c->slot]); /* one call per slot at a time */
	fk.pending[c->slot] = c;
	fk.calls++;
	return 0;
}

static void fake_tick(void *self, int64_t now)
{
	(void)self;
	(void)now;
}

static int64_t fake_next(void *self, int64_t now)
{
	(void)self;
	(void)now;
	return INT64_MAX;
}

static void fake_nop(void *self)
{
	(void)self;
}

static int fake_make(void *self, const struct sandbox *sb, char *err, size_t n)
{
	(void)self;
	(void)sb;
	if (fk.ws_error) {
		snprintf(err, n, "fake workspace refused");
		return fk.ws_error;
	}
	fk.ws_made++;
	return 0;
}

static int fake_mount(void *self, const struct sandbox *sb, char *err, size_t n)
{
	(void)self;
	(void)sb;
	(void)err;
	(void)n;
	return 0;
}

static void fake_retire(void *self, const struct sandbox *sb, bool drop)
{
	(void)self;
	fk.ws_retired++;
	fk.ws_dropped += drop;
	share_retire(&d.cfg, "/nonexistent", sb->instance_id, false); /* the record and the (empty) directory */
}

/* Recovery's synchronous reads of the fake engine: at most one container and one network. */
static int fake_containers(void *self, int (*fn)(void *, const char *), void *ctx, char *err,
			   size_t n)
{
	(void)self;
	(void)err;
	(void)n;
	if (fk.cts)
		fn(ctx, fk.ct_id);
	return 0;
}

static int fake_inspect(void *self, const char *id, struct rt_container *out, char *err,
			size_t n)
{
	(void)self;
	if (fk.inspect_error) {
		snprintf(err, n, "fake engine: inspect failed (500)");
		return fk.inspect_error;
	}
	if (!fk.cts || strcmp(id, fk.ct_id) != 0) {
		snprintf(err, n, "no such container");
		return -ENOENT;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", fk.ct_id);
	out->name = fk.ct_name;
	out->running = fk.running;
	out->instance_id = fk.inst;
	out->control_uid = fk.uid;
	out->managed_network = fk.nets ? fk.net_name : NULL;
	out->net = (struct rt_netcheck){ .read = true, .ok = !fk.net_other, .other = fk.net_other,
					 .why = fk.net_other ? "other_network" : "verified" };
	return 0;
}

static int fake_networks(void *self, int (*fn)(void *, const char *, const char *), void *ctx,
			 char *err, size_t n)
{
	(void)self;
	(void)err;
	(void)n;
	if (fk.nets)
		fn(ctx, fk.net_id, fk.net_name);
	return 0;
}

static int fake_net_inspect(void *self, const char *id, struct rt_network *out, char *err,
			    size_t n)
{
	(void)self;
	if (!fk.nets || (strcmp(id, fk.net_id) != 0 && strcmp(id, fk.net_name) != 0)) {
		snprintf(err, n, "no such network");
		return -ENOENT;
	}
	memset(out, 0, sizeof(*out));
	snprintf(out->id, sizeof(out->id), "%s", fk.net_id);
	out->name = fk.net_name;
	out->subnet = fk.subnet;
	out->internal = true;
	return 0;
}

static int fake_remove_now(void *self, bool network, const char *id, char *err, size_t n)
{
	(void)self;
	(void)id;
	if (!network && fk.remove_error) {
		snprintf(err, n, "fake engine: remove failed (500)");
		return fk.remove_error;
	}
	if (network && fk.nets)
		fk.nets--;
	else if (!network && fk.cts)
		fk.cts--;
	return 0;
}

static int fake_scan_now(void *self, int (*each)(void *, const char *, bool), void *ctx,
			 char *err, size_t n)
{
	(void)self;
	(void)err;
	(void)n;
	each(ctx, NULL, false);
	if (fk.nets)
		each(ctx, fk.subnet, true);
	return 0;
}

static const struct runtime_ops fake_ops = {
	.call = fake_call, .tick = fake_tick, .next_deadline = fake_next, .start = fake_nop,
	.stop = fake_nop, .containers = fake_containers, .inspect = fake_inspect,
	.networks = fake_networks, .net_inspect = fake_net_inspect, .remove_now = fake_remove_now,
	.scan_now = fake_scan_now, .workspace_make = fake_make, .workspace_mount = fake_mount,
	.workspace_retire = fake_retire,
};
static struct runtime fake_rt = { .ops = &fake_ops, .name = "fake" };

/* Answers slot's call with outcome, as the engine would have done it. */
static void answer(uint32_t slot, enum rt_outcome o)
{
	struct rt_call *c = fk.pending[slot];

	assert_non_null(c);
	fk.pending[slot] = NULL;
	c->res.outcome = o;
	if (o != RT_OK)
		snprintf(c->res.text, sizeof(c->res.text), "fake says no");
	if (o == RT_OK) {
		switch (c->op) {
		case RT_NET_CREATE:
			fk.nets++;
			snprintf(c->res.id, sizeof(c->res.id), "net%u", fk.calls);
			snprintf(fk.net_id, sizeof(fk.net_id), "%s", c->res.id);
			snprintf(fk.net_name, sizeof(fk.net_name), "%s", c->name);
			snprintf(fk.subnet, sizeof(fk.subnet), "%s", c->subnet);
			break;
		case RT_CT_CREATE:
			fk.cts++;
			snprintf(c->res.id, sizeof(c->res.id), "ct%02u%s", fk.calls, "0123456789abcdef");
			snprintf(fk.ct_id, sizeof(fk.ct_id), "%s", c->res.id);
			snprintf(fk.ct_name, sizeof(fk.ct_name), "%s", c->sb->name);
			snprintf(fk.inst, sizeof(fk.inst), "%s", c->sb->instance_id);
			snprintf(fk.uid, sizeof(fk.uid), "%u", c->sb->uid);
			break;
		case RT_CT_INSPECT:
			if (fk.cts && (strcmp(c->id, fk.ct_id) == 0 || strcmp(c->id, fk.ct_name) == 0)) {
				snprintf(c->res.id, sizeof(c->res.id), "%s", fk.ct_id);
				snprintf(c->res.instance_id, sizeof(c->res.instance_id), "%s", fk.inst);
			}
			c->res.running = fk.running;
			c->res.exit_code = fk.running ? 0 : 3;
			if (c->check_net)
				c->res.net = (struct rt_netcheck){ .read = true, .ok = !fk.net_other,
								   .other = fk.net_other,
								   .why = fk.net_other ? "other_network"
											: "verified" };
			break;
		case RT_CT_REMOVE:
			if (fk.cts)
				fk.cts--;
			break;
		case RT_NET_REMOVE:
			if (fk.nets)
				fk.nets--;
			break;
		case RT_NET_SCAN:
			c->each_subnet(c, NULL, false);
			break;
		default:
			break;
		}
	}
	if (fk.lose) {
		fk.lose = false;
		c->res.outcome = RT_ENGINE;
		snprintf(c->res.text, sizeof(c->res.text), "connection reset after the engine acted");
	}
	fake_rt.sink.call_done(fake_rt.sink.ctx, c);
}

static void notice(const char *id, enum rt_event ev, const char *source, const char *net_name,
		   const char *net_id)
{
	struct rt_notice n = { .ev = ev, .container_id = id, .source = source,
			       .net_name = net_name, .net_id = net_id };

	fake_rt.sink.event(fake_rt.sink.ctx, &n);
}

/* ---- what the hooks saw ---- */

static struct seen {
	int created, failed, removed, pid_known, drops, stopped, released;
	int tainted, net_reads;
	enum rt_event taint_kind;
	const char *taint_source, *net_why;
	bool net_ok;
	int status;
	const char *code;
	char error[SB_ERROR_BYTES];
} seen;

static void h_created(void *ctx, struct sandbox *sb, int64_t took)
{
	(void)ctx;
	(void)sb;
	(void)took;
	seen.created++;
}

static void h_failed(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	seen.failed++;
	seen.status = sb->err_status;
	seen.code = sb->err_code;
	snprintf(seen.error, sizeof(seen.error), "%s", sb->error);
}

static void h_removed(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	(void)sb;
	seen.removed++;
}

static void h_pid(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	(void)sb;
	seen.pid_known++;
}

static void h_drop(void *ctx, struct sandbox *sb, const char *why)
{
	(void)ctx;
	(void)sb;
	(void)why;
	seen.drops++;
}

static void h_stopped(void *ctx, struct sandbox *sb, const char *a, const char *b)
{
	(void)ctx;
	(void)sb;
	(void)a;
	(void)b;
	seen.stopped++;
}

static void h_released(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	(void)sb;
	seen.released++;
}

static void h_tainted(void *ctx, struct sandbox *sb, enum rt_event kind, const char *source)
{
	(void)ctx;
	(void)sb;
	seen.tainted++;
	seen.taint_kind = kind;
	seen.taint_source = source;
}

static void h_net(void *ctx, struct sandbox *sb, bool ok, const char *why)
{
	(void)ctx;
	(void)sb;
	seen.net_reads++;
	seen.net_ok = ok;
	seen.net_why = why;
}

static const struct lifecycle_hooks hooks = {
	.created = h_created, .create_failed = h_failed, .removed = h_removed,
	.pid_known = h_pid, .agent_drop = h_drop, .stopped = h_stopped, .released = h_released,
	.tainted = h_tainted, .network_read = h_net, .agent_is_ready = agent_is_ready,
	.mono_ms = clock_now, .wall_ms = clock_now,
};

static struct netpool pool;

static void start(bool with_pool)
{
	struct lifecycle_config lc = {
		.cfg = &d.cfg, .sb = table, .nsb = NSB, .slots = lcs, .rt = &fake_rt,
		.pool = with_pool ? &pool : NULL, .hooks = &hooks, .check = true,
	};

	if (with_pool)
		netpool_init(&pool, &fake_rt, RT_SLOT_POOL(NSB), subnet_map());
	lifecycle_start(&lc);
}

static int teardown(void **state);

static int setup(void **state)
{
	(void)state;
	if (root[0])
		teardown(NULL);
	memset(&d, 0, sizeof(d));
	memset(table, 0, sizeof(table));
	memset(&fk, 0, sizeof(fk));
	memset(&seen, 0, sizeof(seen));
	memset(&req, 0, sizeof(req));
	fk.running = true;
	config_defaults(&d.cfg);
	snprintf(root, sizeof(root), "/tmp/test_lifecycle.XXXXXX");
	assert_non_null(mkdtemp(root));
	snprintf(d.cfg.agentshare_root, sizeof(d.cfg.agentshare_root), "%s", root);
	sandbox_table_init(&d.cfg, table, NSB, uid_bits);
	agent_init(&d.cfg, NULL, NULL, 0);
	subnet_init(&d.cfg, subnet_bits, foreign_bits);
	recover_init(&d.cfg, &d.pool);
	for (uint32_t i = 0; i < NSB; i++)
		table[i].init_pidfd = -1;
	start(false);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	if (!root[0])
		return 0;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	root[0] = '\0';
	return system(cmd) == 0 ? 0 : -1;
}

/* ---- driving a sandbox to each state ---- */

static uint32_t slot_of(const struct sandbox *sb)
{
	return (uint32_t)(sb - table);
}

static struct sandbox *fresh(void)
{
	struct sandbox *sb = sandbox_new();

	assert_non_null(sb);
	snprintf(sb->name, sizeof(sb->name), "sbx-test%u", slot_of(sb));
	return sb;
}

static int signal_(struct sandbox *sb, enum lc_event_kind k)
{
	return lifecycle_signal(sb, k);
}

/* A create driven up to (and into) state want; the path every test below takes. */
static struct sandbox *drive(enum lc_state want)
{
	struct sandbox *sb = fresh();
	uint32_t s = slot_of(sb);

	if (want == LC_NEW)
		return sb;
	assert_int_equal(lifecycle_create(sb, &req), 0);
	assert_int_equal(sb->lc, LC_NET_CREATE);
	if (want == LC_NET_CREATE)
		return sb;
	if (want == LC_NET_SCAN) {
		answer(s, RT_OVERLAPS);
		assert_int_equal(sb->lc, LC_NET_SCAN);
		return sb;
	}
	answer(s, RT_OK);
	if (want == LC_CT_CREATE)
		return sb;
	if (want == LC_RB_CT_FIND) {
		answer(s, RT_ENGINE); /* the container create's answer lost: it may exist */
		assert_int_equal(sb->lc, LC_RB_CT_FIND);
		return sb;
	}
	answer(s, RT_OK);
	if (want == LC_CT_START)
		return sb;
	if (want >= LC_RB_LOGS && want <= LC_RB_NET_REMOVE) {
		answer(s, RT_ENGINE); /* the start fails: roll back */
		assert_int_equal(sb->lc, LC_RB_LOGS);
		if (want == LC_RB_LOGS)
			return sb;
		answer(s, RT_OK);
		if (want == LC_RB_CT_REMOVE)
			return sb;
		answer(s, RT_OK);
		assert_int_equal(sb->lc, LC_RB_NET_REMOVE);
		return sb;
	}
	answer(s, RT_OK);
	if (want == LC_CT_INSPECT)
		return sb;
	answer(s, RT_OK);
	assert_int_equal(sb->lc, LC_WAIT_READY);
	if (want == LC_WAIT_READY)
		return sb;
	agent_slot(sb)->ready = true;
	assert_int_equal(signal_(sb, LC_EV_AGENT_READY), 0);
	assert_int_equal(sb->lc, LC_READY);
	if (want == LC_READY)
		return sb;
	if (want == LC_CLAIM_RENAME || want == LC_CLAIM_INIT) {
		sb->pool = true; /* made warm: a create claims it, naming it */
		snprintf(sb->name, sizeof(sb->name), "named%u", s);
		assert_int_equal(signal_(sb, LC_EV_CLAIM), 0);
		assert_int_equal(sb->lc, LC_CLAIM_RENAME);
		if (want == LC_CLAIM_INIT)
			answer(s, RT_OK);
		assert_int_equal(sb->lc, want);
		return sb;
	}
	if (want == LC_CONFLICT || want == LC_CONFLICT_REFRESH) {
		assert_int_equal(signal_(sb, LC_EV_CONFLICT), 0);
		if (want == LC_CONFLICT_REFRESH)
			assert_int_equal(signal_(sb, LC_EV_CT_START), 0);
		assert_int_equal(sb->lc, want);
		return sb;
	}
	if (want == LC_READY_REFRESH || want == LC_RM_PENDING) {
		assert_int_equal(signal_(sb, LC_EV_CT_START), 0);
		if (want == LC_RM_PENDING)
			assert_int_equal(lifecycle_remove(sb, false, false), 0);
		assert_int_equal(sb->lc, want);
		return sb;
	}
	if (want == LC_GONE_NET_REMOVE) {
		fk.cts--; /* removed behind our back */
		assert_int_equal(signal_(sb, LC_EV_CT_DESTROY), 0);
		assert_int_equal(sb->lc, want);
		return sb;
	}
	assert_int_equal(lifecycle_remove(sb, false, false), 0);
	assert_int_equal(sb->lc, LC_RM_STOP);
	if (want == LC_RM_STOP)
		return sb;
	answer(s, RT_OK);
	if (want == LC_RM_CT_REMOVE)
		return sb;
	answer(s, RT_OK);
	assert_int_equal(sb->lc, LC_RM_NET_REMOVE);
	return sb;
}

/* Nothing held anywhere: no slot, uid, subnet or call; no network or container in the engine;
 * no record on disk. */
static void assert_nothing_held(void)
{
	char path[256];
	struct stat st;

	for (uint32_t i = 0; i < NSB; i++) {
		assert_int_equal(table[i].lc, LC_FREE);
		assert_false(lc_of(&table[i])->call_active);
		assert_false(table[i].uid_taken);
		assert_int_equal(table[i].subnet, -1);
	}
	for (uint32_t i = 0; i <= NSB; i++)
		assert_null(fk.pending[i]);
	assert_int_equal(sandbox_uid_map()->used, 0);
	assert_int_equal(subnet_map()->used, subnet_foreign_count()); /* a /28 the engine refused stays foreign */
	assert_int_equal(sandbox_live(), 0);
	assert_int_equal(fk.nets, 0);
	assert_int_equal(fk.cts, 0);
	snprintf(path, sizeof(path), "%s/instances", root);
	if (stat(path, &st) == 0) {
		char cmd[320];

		snprintf(cmd, sizeof(cmd), "test -z \"$(ls -A %s)\"", path);
		assert_int_equal(system(cmd), 0);
	}
}

/* ---- every state × event ---- */

#define X (-100)  /* refused: ERR_STATE, nothing changes */
#define B (-101)  /* refused: -EBUSY, nothing changes */
#define S (-102)  /* taken, the state stays */

static const enum lc_event_kind events[] = {
	LC_EV_CREATE, LC_EV_REMOVE, LC_EV_CALL_DONE, LC_EV_AGENT_READY, LC_EV_AGENT_LOST,
	LC_EV_CT_START, LC_EV_CT_DIE, LC_EV_CT_DESTROY, LC_EV_DEADLINE, LC_EV_RETRY,
	LC_EV_SHUTDOWN, LC_EV_RECOVERED, LC_EV_CONFLICT, LC_EV_CLAIM, LC_EV_CLAIMED,
	LC_EV_CLAIM_REFUSED,
};

static const char *const event_names[] = {
	"create", "remove", "call_done", "agent_ready", "agent_lost", "ct_start", "ct_die",
	"ct_destroy", "deadline", "retry", "shutdown", "recovered", "conflict", "claim", "claimed",
	"claim_refused",
};

/* Row: the state; columns in the order of events[]; CALL_DONE answers RT_OK, DEADLINE comes
 * past the deadline. */
static const int expect[LC_STATES][16] = {
	/*                  CREATE         REMOVE          DONE               READY     LOST CT_START            DIE           DESTROY            DEADLINE    RETRY SHUT   RECOV    CONFL  CLAIM CLAIMED REFUSED */
	[LC_NEW] =        { LC_NET_CREATE, X,              X,                 S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_NET_SCAN] =   { X,             B,              LC_NET_CREATE,     S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_NET_CREATE] = { X,             B,              LC_CT_CREATE,      S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CT_CREATE] =  { X,             B,              LC_CT_START,       S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CT_START] =   { X,             B,              LC_CT_INSPECT,     S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CT_INSPECT] = { X,             B,              LC_WAIT_READY,     S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_WAIT_READY] = { X,             B,              X,                 LC_READY, S,   S,                  LC_RB_LOGS,   LC_RB_NET_REMOVE,  LC_RB_LOGS, S,    LC_RB_LOGS, X,    X, X, X, X },
	[LC_READY] =      { X,             LC_RM_STOP,     X,                 S,        S,   LC_READY_REFRESH,   S,            LC_GONE_NET_REMOVE, S,         S,    S,     X,       LC_CONFLICT, X, X, X },
	[LC_READY_REFRESH] = { X,          LC_RM_PENDING,  LC_READY,          S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CONFLICT] =   { X,             LC_RM_STOP,     X,                 S,        S,   LC_CONFLICT_REFRESH, S,           LC_GONE_NET_REMOVE, S,         S,    S,     X,       S, X, X, X },
	[LC_CONFLICT_REFRESH] = { X,       LC_RM_PENDING,  LC_CONFLICT,       S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RB_LOGS] =    { X,             B,              LC_RB_CT_REMOVE,   S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RB_CT_REMOVE] = { X,           B,              LC_RB_NET_REMOVE,  S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RB_NET_REMOVE] = { X,          B,              LC_FREE,           S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RM_PENDING] = { X,             B,              LC_RM_STOP,        S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RM_STOP] =    { X,             B,              LC_RM_CT_REMOVE,   S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RM_CT_REMOVE] = { X,           B,              LC_RM_NET_REMOVE,  S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RM_NET_REMOVE] = { X,          B,              LC_FREE,           S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_GONE_NET_REMOVE] = { X,        B,              LC_FREE,           S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_RB_CT_FIND] = { X,             B,              LC_RB_NET_REMOVE,  S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CLAIM_RENAME] = { X,           B,              LC_CLAIM_INIT,     S,        S,   S,                  S,            S,                 S,          S,    S,     X,       X, X, X, X },
	[LC_CLAIM_INIT] = { X,             B,              X,                 S,        S,   S,                  LC_RB_LOGS,   LC_RB_NET_REMOVE,  LC_RB_LOGS, S,    LC_RB_LOGS, X,    X, X, LC_READY, LC_RB_LOGS },
};

static void test_every_state_takes_or_refuses_every_event(void **state)
{
	static struct sandbox before;
	char what[160];

	for (int st = LC_NEW; st < LC_STATES; st++) {
		for (size_t e = 0; e < ARRAY_LEN(events); e++) {
			struct lc_event ev = { .kind = events[e], .req = &req };
			int want = expect[st][e], r;
			struct sandbox *sb;

			setup(NULL);
			sb = drive((enum lc_state)st);
			snprintf(what, sizeof(what), "state %s, event %s",
				 lifecycle_state_name((enum lc_state)st), event_names[e]);
			assert_int_equal(sb->lc, st);
			before = *sb;
			if (events[e] == LC_EV_DEADLINE)
				now_ms += d.cfg.ready_timeout_ms + 1;
			if (events[e] == LC_EV_CALL_DONE && fk.pending[slot_of(sb)]) {
				answer(slot_of(sb), RT_OK);
				r = 0;
			} else {
				r = lifecycle_on(sb, &ev);
			}
			if (want == X || want == B) {
				if (r != (want == X ? ERR_STATE : -EBUSY))
					fail_msg("%s: returned %d, want a refusal", what, r);
				if (memcmp(&before, sb, sizeof(before)) != 0)
					fail_msg("%s: refused, yet the sandbox changed", what);
				teardown(NULL);
				continue;
			}
			if (r != 0)
				fail_msg("%s: returned %d", what, r);
			if ((int)sb->lc != (want == S ? st : want))
				fail_msg("%s: now %s, want %s", what, lifecycle_state_name(sb->lc),
					 lifecycle_state_name(want == S ? (enum lc_state)st
								       : (enum lc_state)want));
			assert_true(lifecycle_check(sb));
			teardown(NULL);
		}
	}
}

/* ---- the whole paths ---- */

static void finish_rollback(struct sandbox *sb)
{
	uint32_t s = slot_of(sb);

	while (sb->lc != LC_FREE) {
		assert_true(lifecycle_going(sb));
		answer(s, RT_OK);
	}
}

static void test_create_then_remove_leaves_nothing(void **state)
{
	struct sandbox *sb = drive(LC_READY);

	assert_int_equal(seen.created, 1);
	assert_int_equal(fk.nets, 1);
	assert_int_equal(fk.cts, 1);
	assert_true(sb->uid_taken);
	assert_int_equal(lifecycle_remove(sb, false, false), 0);
	assert_int_equal(seen.drops, 1);
	finish_rollback(sb);
	assert_int_equal(seen.removed, 1);
	assert_int_equal(seen.released, 1);
	assert_int_equal(fk.ws_retired, 1);
	assert_nothing_held();
}

/* Each step's failure, and what the client is told: the create is undone completely. */
static void test_every_create_failure_rolls_back_to_nothing(void **state)
{
	static const struct {
		enum lc_state at;
		enum rt_outcome o;
		int status;
		const char *code;
	} cases[] = {
		{ LC_NET_CREATE, RT_ENGINE, 502, "engine" },
		{ LC_NET_SCAN, RT_ENGINE, 502, "engine" },
		{ LC_NET_SCAN, RT_UNREADABLE, 502, "engine" },
		{ LC_CT_CREATE, RT_NAME_TAKEN, 409, "name_taken" },
		{ LC_CT_CREATE, RT_IMAGE_MISSING, 400, "image_missing" },
		{ LC_CT_CREATE, RT_ROOT_UNBOUNDED, 422, "writable_root_unbounded" },
		{ LC_CT_CREATE, RT_ENGINE, 502, "engine" },
		{ LC_CT_START, RT_ENGINE, 502, "engine" },
		{ LC_CT_START, RT_GONE, 502, "engine" },
		{ LC_CT_INSPECT, RT_ENGINE, 502, "engine" },
	};

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct sandbox *sb;

		setup(NULL);
		sb = drive(cases[i].at);
		answer(slot_of(sb), cases[i].o);
		finish_rollback(sb);
		if (seen.failed != 1 || seen.status != cases[i].status ||
		    strcmp(seen.code, cases[i].code) != 0)
			fail_msg("case %zu: told %d %s", i, seen.status, seen.code ? seen.code : "-");
		assert_int_equal(seen.created, 0);
		assert_nothing_held();
		teardown(NULL);
	}
}

static void test_failures_without_the_engine_roll_back_too(void **state)
{
	struct sandbox *sb;

	/* the workspace cannot be made: 507 on ENOSPC */
	fk.ws_error = -ENOSPC;
	sb = fresh();
	assert_int_equal(lifecycle_create(sb, &req), 0);
	assert_int_equal(seen.status, 507);
	assert_string_equal(seen.code, "no_space");
	assert_nothing_held();
	teardown(NULL);

	/* the engine cannot be called at all */
	setup(NULL);
	fk.begin_error = -ECONNREFUSED;
	sb = fresh();
	assert_int_equal(lifecycle_create(sb, &req), 0);
	assert_int_equal(seen.status, 502);
	assert_non_null(strstr(seen.error, "cannot call the engine"));
	assert_nothing_held();
	teardown(NULL);

	/* the init exits before it is ready: the inspect says so */
	setup(NULL);
	sb = drive(LC_CT_INSPECT);
	fk.running = false;
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_RB_LOGS);
	finish_rollback(sb);
	assert_string_equal(seen.code, "init_exited");
	assert_non_null(strstr(seen.error, "the init logged nothing"));
	assert_nothing_held();
}

static void test_waiting_for_the_agent_ends_in_ready_or_a_rollback(void **state)
{
	static const enum lc_event_kind kills[] = { LC_EV_DEADLINE, LC_EV_CT_DIE,
						    LC_EV_CT_DESTROY, LC_EV_SHUTDOWN };
	static const char *const codes[] = { "not_ready", "init_exited", "container_removed",
					     "shutting_down" };

	for (size_t i = 0; i < ARRAY_LEN(kills); i++) {
		struct sandbox *sb;

		setup(NULL);
		sb = drive(LC_WAIT_READY);
		if (kills[i] == LC_EV_DEADLINE) {
			assert_int_equal(signal_(sb, LC_EV_DEADLINE), 0); /* not yet */
			assert_int_equal(sb->lc, LC_WAIT_READY);
			now_ms += d.cfg.ready_timeout_ms;
		}
		if (kills[i] == LC_EV_CT_DESTROY)
			fk.cts--;
		if (kills[i] == LC_EV_SHUTDOWN)
			lifecycle_shutdown();
		else
			assert_int_equal(signal_(sb, kills[i]), 0);
		finish_rollback(sb);
		assert_string_equal(seen.code, codes[i]);
		assert_nothing_held();
		teardown(NULL);
	}
}

/* The agent can be READY before the inspect is answered: the create ends with it. */
static void test_agent_ready_before_the_inspect_finishes_the_create(void **state)
{
	struct sandbox *sb = drive(LC_CT_INSPECT);

	agent_slot(sb)->ready = true;
	assert_int_equal(signal_(sb, LC_EV_AGENT_READY), 0);
	assert_int_equal(sb->lc, LC_CT_INSPECT);
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_READY);
	assert_int_equal(seen.created, 1);
	assert_int_equal(seen.pid_known, 1);
}

/* What the lifecycle logs while signal_(sb, k) runs (stderr caught in a file). */
static void logged(struct sandbox *sb, enum lc_event_kind k, char *out, size_t size)
{
	char path[96];
	int fd, saved;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/stderr", root);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	saved = dup(2);
	assert_true(saved >= 0);
	assert_int_equal(dup2(fd, 2), 2);
	assert_int_equal(signal_(sb, k), 0);
	assert_int_equal(dup2(saved, 2), 2);
	close(saved);
	n = pread(fd, out, size - 1, 0);
	close(fd);
	out[n > 0 ? n : 0] = '\0';
}

/* An agent that reports READY again is logged in either ready state: idle, or while the
 * refresh a container start began is running (both are "ready"; agenticd logged both
 * before the lifecycle had states of its own). */
static void test_agent_ready_again_is_logged_while_ready_or_refreshing(void **state)
{
	struct sandbox *sb = drive(LC_READY);
	char text[4096];

	logged(sb, LC_EV_AGENT_READY, text, sizeof(text));
	assert_non_null(strstr(text, "msg=\"agent ready again\""));
	assert_int_equal(signal_(sb, LC_EV_CT_START), 0);
	assert_int_equal(sb->lc, LC_READY_REFRESH);
	logged(sb, LC_EV_AGENT_READY, text, sizeof(text));
	assert_non_null(strstr(text, "msg=\"agent ready again\""));
	assert_int_equal(sb->lc, LC_READY_REFRESH);
	assert_int_equal(seen.created, 1); /* a ready sandbox is not created twice */
}

/* A teardown step the engine refuses is retried at its time, not before, not twice. */
static void test_a_failed_teardown_step_is_retried(void **state)
{
	struct sandbox *sb = drive(LC_RM_CT_REMOVE);
	uint32_t s = slot_of(sb);

	answer(s, RT_ENGINE);
	assert_int_equal(sb->lc, LC_RM_CT_REMOVE);
	assert_false(lc_of(sb)->call_active);
	assert_true(sb->retry_at > now_ms);
	lifecycle_tick(now_ms);
	assert_null(fk.pending[s]);
	now_ms = sb->retry_at;
	lifecycle_tick(now_ms);
	assert_non_null(fk.pending[s]);
	assert_int_equal(signal_(sb, LC_EV_RETRY), 0); /* a call runs: nothing more */
	fk.cts--;
	answer(s, RT_GONE);                             /* gone already: done */
	assert_int_equal(sb->lc, LC_RM_NET_REMOVE);
	answer(s, RT_OK);
	assert_nothing_held();
}

/* Container events that come while a call runs wait for it; a destroy outweighs a start. */
static void test_events_during_a_call_wait_for_it(void **state)
{
	struct sandbox *sb = drive(LC_READY_REFRESH);
	uint32_t s = slot_of(sb);

	assert_int_equal(signal_(sb, LC_EV_CT_START), 0);
	fk.cts--;
	assert_int_equal(signal_(sb, LC_EV_CT_DESTROY), 0);
	assert_int_equal(sb->lc, LC_READY_REFRESH);
	answer(s, RT_GONE);
	assert_int_equal(sb->lc, LC_GONE_NET_REMOVE);
	answer(s, RT_OK);
	assert_int_equal(seen.removed, 0); /* nobody waited for it */
	assert_nothing_held();
}

/* A refresh waiting for its retry when the container is destroyed: the retry goes with it. */
static void test_a_destroy_drops_a_pending_refresh_retry(void **state)
{
	struct sandbox *sb;

	fk.begin_error = 0;
	sb = drive(LC_READY);
	fk.begin_error = -ECONNREFUSED;
	assert_int_equal(signal_(sb, LC_EV_CT_START), 0);
	assert_int_equal(sb->lc, LC_READY_REFRESH);
	assert_false(lc_of(sb)->call_active);
	assert_true(sb->retry_at != 0);
	fk.cts--;
	assert_int_equal(signal_(sb, LC_EV_CT_DESTROY), 0);
	assert_int_equal(sb->lc, LC_GONE_NET_REMOVE);
	assert_int_equal(sb->retry_at, 0);
	answer(slot_of(sb), RT_OK);
	assert_nothing_held();
}

/* The engine's container events arrive through the runtime's sink and are acted on at the
 * loop's tick. */
static void test_runtime_events_are_acted_on_at_the_tick(void **state)
{
	struct sandbox *sb = drive(LC_READY);

	notice(sb->container_id, RT_EV_DIE, "die", NULL, NULL);
	assert_true(sb->running);
	assert_true(lifecycle_next_deadline(now_ms) <= now_ms);
	lifecycle_tick(now_ms);
	assert_false(sb->running);
	assert_int_equal(seen.stopped, 1);
	notice("not-ours", RT_EV_DESTROY, "destroy", NULL, NULL);
	lifecycle_tick(now_ms);
	assert_int_equal(sb->lc, LC_READY);
}

/* What was done to a container behind agenticd's back reaches the tainted hook at once,
 * with the engine's word, in a create's step as in READY, and changes no state; its own
 * network connecting (at its start, by its id) is no taint, another one is, even by its name. */
/* A claim of a warm sandbox: its rename answered, then its init's word. A name another
 * container has leaves it warm, as it was; the init's refusal rolls it back; the engine's
 * event of the claim's own rename is no taint, another rename is. */
static void test_a_claim_renames_then_waits_for_the_init(void **state)
{
	struct sandbox *sb = drive(LC_CLAIM_RENAME);
	struct rt_notice n = { .ev = RT_EV_CHANGED, .source = "rename" };
	struct lc_event refused = { .kind = LC_EV_CLAIM_REFUSED, .why = "no" };
	int created = seen.created;

	/* the name taken: back in the pool, its own name again */
	snprintf(sb->name, sizeof(sb->name), "claimed");
	answer(slot_of(sb), RT_NAME_TAKEN);
	assert_int_equal(sb->lc, LC_READY);
	assert_true(sb->pool);
	assert_false(sb->claimed);
	assert_string_equal(sb->name, sb->agent_id);
	assert_int_equal(sb->err_status, 409);
	assert_int_equal(seen.created, created);
	/* claimed again, renamed: its own rename event taints nothing; the init takes it */
	snprintf(sb->name, sizeof(sb->name), "claimed");
	assert_int_equal(signal_(sb, LC_EV_CLAIM), 0);
	n.container_id = sb->container_id;
	n.old_name = sb->agent_id;
	n.new_name = "claimed";
	fake_rt.sink.event(fake_rt.sink.ctx, &n);
	assert_int_equal(seen.tainted, 0);
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_CLAIM_INIT);
	assert_true(sb->claimed);
	assert_false(sb->pool);
	assert_int_equal(signal_(sb, LC_EV_CLAIMED), 0);
	assert_int_equal(sb->lc, LC_READY);
	assert_int_equal(seen.created, created + 1);
	/* a rename by anyone else is a taint */
	n.old_name = "claimed";
	n.new_name = "elsewhere";
	fake_rt.sink.event(fake_rt.sink.ctx, &n);
	assert_int_equal(seen.tainted, 1);
	assert_int_equal(signal_(sb, LC_EV_CLAIM), ERR_STATE); /* claimed: not warm any more */
	teardown(NULL);
	setup(NULL);
	/* the init refuses: rolled back to nothing */
	sb = drive(LC_CLAIM_INIT);
	assert_int_equal(lifecycle_on(sb, &refused), 0);
	assert_int_equal(sb->lc, LC_RB_LOGS);
	assert_int_equal(sb->err_status, 500);
	finish_rollback(sb);
	assert_nothing_held();
}

/* A claim that keeps the warm sandbox's name (a create that takes any name: E2B's, or one
 * without a name) renames nothing: it is recorded and told to the init at once. */
static void test_a_claim_keeping_the_warm_name_renames_nothing(void **state)
{
	struct sandbox *sb = drive(LC_READY);
	int created = seen.created;

	sb->pool = true;
	assert_string_equal(sb->name, sb->agent_id);
	assert_int_equal(signal_(sb, LC_EV_CLAIM), 0);
	assert_int_equal(sb->lc, LC_CLAIM_INIT);
	assert_false(lc_of(sb)->call_active);
	assert_null(fk.pending[slot_of(sb)]);
	assert_true(sb->claimed);
	assert_false(sb->pool);
	assert_int_equal(signal_(sb, LC_EV_CLAIMED), 0);
	assert_int_equal(sb->lc, LC_READY);
	assert_int_equal(seen.created, created + 1);
}

/* The warm sandboxes being made (sb->pool, in a create's step). */
static int warm_creating(void)
{
	int n = 0;

	for (uint32_t i = 0; i < NSB; i++)
		n += table[i].pool && table[i].lc != LC_FREE && table[i].lc != LC_READY;
	return n;
}

/* After a claim the pools wait for the claimed sandbox's first command, else POOL_HOLD_MS:
 * the engine is not making the next warm sandbox while the command the create was for runs.
 * Another sandbox's command ends no hold. */
static void test_a_claims_first_command_runs_before_the_pool_refills(void **state)
{
	struct sandbox *sb = drive(LC_CLAIM_INIT), *other = drive(LC_READY);

	d.cfg.warm_sandboxes = 1;
	assert_int_equal(signal_(sb, LC_EV_CLAIMED), 0);
	assert_int_equal(sb->lc, LC_READY);
	lifecycle_tick(now_ms);
	assert_int_equal(warm_creating(), 0);
	/* the loop sleeps until the hold ends: a deadline of now would spin it */
	assert_true(lifecycle_next_deadline(now_ms) > now_ms);
	assert_true(lifecycle_next_deadline(now_ms) <= now_ms + POOL_HOLD_MS);
	lifecycle_command_ended(other);
	lifecycle_tick(now_ms);
	assert_int_equal(warm_creating(), 0);
	lifecycle_command_ended(sb);
	lifecycle_tick(now_ms);
	assert_int_equal(warm_creating(), 1);
	teardown(NULL);
	setup(NULL);
	/* no command: the hold ends by itself */
	sb = drive(LC_CLAIM_INIT);
	d.cfg.warm_sandboxes = 1;
	assert_int_equal(signal_(sb, LC_EV_CLAIMED), 0);
	now_ms += POOL_HOLD_MS - 1;
	lifecycle_tick(now_ms);
	assert_int_equal(warm_creating(), 0);
	now_ms += 1;
	lifecycle_tick(now_ms);
	assert_int_equal(warm_creating(), 1);
}

/* At the stop a warm sandbox is removed, workspace deleted (it would stay mounted for a daemon
 * that may never come back); a cold one keeps running. A warm sandbox whose container is
 * removed outside agenticd has its workspace deleted, not kept. */
static void test_the_stop_removes_warm_sandboxes_only(void **state)
{
	struct sandbox *cold = drive(LC_READY), *warm = drive(LC_READY);

	warm->pool = true;
	lifecycle_shutdown();
	assert_int_equal(cold->lc, LC_READY);
	assert_true(lifecycle_going(warm));
	finish_rollback(warm);
	assert_int_equal(fk.ws_retired, 1);
	assert_int_equal(fk.ws_dropped, 1);
	assert_int_equal(cold->lc, LC_READY);
	teardown(NULL);
	setup(NULL);
	warm = drive(LC_READY);
	warm->pool = true;
	assert_int_equal(signal_(warm, LC_EV_CT_DESTROY), 0);
	finish_rollback(warm);
	assert_int_equal(warm->lc, LC_FREE);
	assert_int_equal(fk.ws_dropped, 1);
}

static void test_out_of_band_changes_reach_the_tainted_hook_and_change_no_state(void **state)
{
	struct sandbox *sb = drive(LC_CT_INSPECT);

	notice(sb->container_id, RT_EV_NET_CONNECT, "connect", sb->network, sb->network_id);
	notice(sb->container_id, RT_EV_NET_CONNECT, "connect", "other", sb->network_id);
	assert_int_equal(seen.tainted, 0);
	notice(sb->container_id, RT_EV_EXEC, "exec_start", NULL, NULL);
	assert_int_equal(seen.tainted, 1);
	assert_int_equal(seen.taint_kind, RT_EV_EXEC);
	assert_string_equal(seen.taint_source, "exec_start");
	assert_int_equal(sb->lc, LC_CT_INSPECT);
	assert_true(lc_of(sb)->call_active);
	answer(slot_of(sb), RT_OK);
	assert_int_equal(seen.net_reads, 1);     /* the create's inspect read its network */
	assert_true(seen.net_ok);
	assert_string_equal(seen.net_why, "verified");
	assert_int_equal(seen.tainted, 1);
	assert_int_equal(sb->lc, LC_WAIT_READY);
	assert_int_equal(lifecycle_signal(sb, LC_EV_AGENT_READY), 0);
	assert_int_equal(sb->lc, LC_READY);
	notice(sb->container_id, RT_EV_NET_CONNECT, "connect", "operator-net", "abc123");
	assert_int_equal(seen.tainted, 2);
	assert_int_equal(seen.taint_kind, RT_EV_NET_CONNECT);
	assert_string_equal(seen.taint_source, "connect");
	assert_int_equal(seen.net_reads, 2);     /* not its own network alone any more */
	assert_false(seen.net_ok);
	assert_string_equal(seen.net_why, "other_network");
	notice(sb->container_id, RT_EV_CHANGED, "update", NULL, NULL);
	assert_int_equal(seen.tainted, 3);
	assert_int_equal(seen.taint_kind, RT_EV_CHANGED);
	notice("not-ours", RT_EV_EXEC, "exec_start", NULL, NULL);
	assert_int_equal(seen.tainted, 3);
	/* a second network that took its network's name: the id tells them apart */
	notice(sb->container_id, RT_EV_NET_CONNECT, "connect", sb->network, "twin0");
	assert_int_equal(seen.tainted, 4);
	assert_int_equal(seen.taint_kind, RT_EV_NET_CONNECT);
	lifecycle_tick(now_ms);
	assert_int_equal(sb->lc, LC_READY);
	assert_true(sb->running);
}

/* Another network attached when the create's inspect reads the container: a taint, and the
 * network not ok. */
static void test_another_network_seen_on_the_inspect_taints(void **state)
{
	struct sandbox *sb = drive(LC_CT_INSPECT);

	fk.net_other = true;
	answer(slot_of(sb), RT_OK);
	assert_int_equal(seen.net_reads, 1);
	assert_false(seen.net_ok);
	assert_string_equal(seen.net_why, "other_network");
	assert_int_equal(seen.tainted, 1);
	assert_int_equal(seen.taint_kind, RT_EV_NET_CONNECT);
	assert_string_equal(seen.taint_source, "inspect");
	fk.net_other = false;
}

/* A subnet that overlaps another network: read the engine's networks, take the next /28. */
static void test_an_overlapping_subnet_moves_on(void **state)
{
	struct sandbox *sb = drive(LC_NET_SCAN);
	int32_t first;

	assert_int_equal(subnet_foreign_count(), 1);  /* the refused /28 */
	answer(slot_of(sb), RT_OK);       /* a fresh reading: nothing foreign */
	assert_int_equal(sb->lc, LC_NET_CREATE);
	first = sb->subnet;
	assert_true(first >= 0);
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_CT_CREATE);
}

/* The warm pool waits for creates to end, then makes one network at a time; a create takes
 * one and skips its network step. */
static void test_the_warm_pool_fills_between_creates(void **state)
{
	struct sandbox *sb;

	start(true);
	sb = drive(LC_NET_CREATE);
	lifecycle_tick(now_ms);
	assert_null(fk.pending[RT_SLOT_POOL(NSB)]);  /* a create runs */
	answer(slot_of(sb), RT_OK);
	answer(slot_of(sb), RT_OK);
	answer(slot_of(sb), RT_OK);
	answer(slot_of(sb), RT_OK);
	agent_slot(sb)->ready = true;
	signal_(sb, LC_EV_AGENT_READY);
	assert_non_null(fk.pending[RT_SLOT_POOL(NSB)]);
	answer(RT_SLOT_POOL(NSB), RT_OK);
	assert_int_equal(pool.n, 1);
	while (fk.pending[RT_SLOT_POOL(NSB)])
		answer(RT_SLOT_POOL(NSB), RT_OK);
	assert_int_equal(pool.n, LIMIT_WARM_NETWORKS);
	sb = fresh();
	assert_int_equal(lifecycle_create(sb, &req), 0);
	assert_int_equal(sb->lc, LC_CT_CREATE);
	assert_int_equal(pool.n, LIMIT_WARM_NETWORKS - 1);
}

/* Recovery's events: a sandbox found ready, then two claiming one uid. */
static void test_recovery_events(void **state)
{
	struct sandbox *sb = fresh();

	assert_int_equal(signal_(sb, LC_EV_RECOVERED), ERR_STATE); /* no container */
	sb->ct_exists = true;
	snprintf(sb->container_id, sizeof(sb->container_id), "abc");
	assert_int_equal(signal_(sb, LC_EV_RECOVERED), 0);
	assert_int_equal(sb->state, SB_READY);
	assert_int_equal(signal_(sb, LC_EV_CONFLICT), 0);
	assert_int_equal(sb->state, SB_CONFLICT);
	assert_ptr_equal(sandbox_by_container("abc"), sb);
}

/* A restart: the in-memory table dropped, rebuilt from the records and the runtime. A ready
 * sandbox comes back ready with its uid and subnet; a create cut short is rolled back. */
static void test_a_reset_table_is_rebuilt_by_recovery(void **state)
{
	struct sandbox *sb = drive(LC_READY);
	char name[SB_NAME_BYTES], err[256];
	uint32_t uid = sb->uid;
	int32_t subnet = sb->subnet;

	snprintf(name, sizeof(name), "%s", sb->name);
	sandbox_table_reset();
	assert_int_equal(sandbox_uid_map()->used, 0);
	assert_int_equal(sandbox_live(), 0);
	start(false);
	assert_int_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	sb = sandbox_by_name(name);
	assert_non_null(sb);
	assert_int_equal(sb->lc, LC_READY);
	assert_int_equal(sb->uid, uid);
	assert_true(sb->uid_taken);
	assert_int_equal(sb->subnet, subnet);
	assert_int_equal(sandbox_uid_map()->used, 1);
	assert_int_equal(subnet_map()->used, 1);
	assert_true(lifecycle_check(sb));

	/* a create cut short by the restart: its container and network go, its record too */
	assert_int_equal(lifecycle_remove(sb, true, false), 0);
	finish_rollback(sb);
	sb = drive(LC_CT_INSPECT);
	sandbox_table_reset();
	start(false);
	assert_int_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	assert_null(sandbox_by_name(sb->name));
	for (uint32_t i = 0; i <= NSB; i++)
		fk.pending[i] = NULL; /* the call that was running died with the old daemon */
	assert_nothing_held();
}

/* A create whose answer was lost after the engine acted (RT_ENGINE: the connection reset)
 * may have made its object: the rollback removes the network by its name, and the container
 * it finds by its name when it carries this create's instance label; one of that name that is
 * another's stays. */
static void test_a_create_whose_answer_was_lost_leaves_nothing(void **state)
{
	struct sandbox *sb;

	/* the network was made */
	sb = drive(LC_NET_CREATE);
	fk.lose = true;
	answer(slot_of(sb), RT_OK);
	assert_int_equal(fk.nets, 1);
	assert_int_equal(sb->lc, LC_RB_NET_REMOVE);
	assert_string_equal(lc_of(sb)->call.id, sb->network);
	finish_rollback(sb);
	assert_int_equal(seen.status, 502);
	assert_nothing_held();
	teardown(NULL);

	/* the container was made, with the name taken */
	setup(NULL);
	sb = drive(LC_CT_CREATE);
	fk.lose = true;
	answer(slot_of(sb), RT_OK);
	assert_int_equal(fk.cts, 1);
	assert_int_equal(sb->lc, LC_RB_CT_FIND);
	assert_string_equal(lc_of(sb)->call.id, sb->name);
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_RB_CT_REMOVE);
	assert_string_equal(lc_of(sb)->call.id, fk.ct_id);
	finish_rollback(sb);
	assert_string_equal(seen.code, "engine");
	assert_nothing_held();
	teardown(NULL);

	/* nothing was made: the look finds nothing (RT_GONE), the rollback goes on */
	setup(NULL);
	sb = drive(LC_RB_CT_FIND);
	answer(slot_of(sb), RT_GONE);
	assert_int_equal(sb->lc, LC_RB_NET_REMOVE);
	finish_rollback(sb);
	assert_nothing_held();
	teardown(NULL);

	/* a container of that name that is another's (another instance label) is left alone */
	setup(NULL);
	sb = drive(LC_RB_CT_FIND);
	fk.cts = 1;
	snprintf(fk.ct_id, sizeof(fk.ct_id), "other0123456789abcdef");
	snprintf(fk.ct_name, sizeof(fk.ct_name), "%s", sb->name);
	snprintf(fk.inst, sizeof(fk.inst), "someone-else");
	answer(slot_of(sb), RT_OK);
	assert_int_equal(sb->lc, LC_RB_NET_REMOVE);
	finish_rollback(sb);
	assert_int_equal(fk.cts, 1);
	fk.cts = 0;
	assert_nothing_held();
	teardown(NULL);

	/* the look fails: retried, not taken as "nothing there" */
	setup(NULL);
	sb = drive(LC_RB_CT_FIND);
	answer(slot_of(sb), RT_ENGINE);
	assert_int_equal(sb->lc, LC_RB_CT_FIND);
	assert_false(lc_of(sb)->call_active);
	assert_true(sb->retry_at > 0);
	now_ms = sb->retry_at;
	lifecycle_tick(now_ms);
	assert_true(lc_of(sb)->call_active);
	answer(slot_of(sb), RT_GONE);
	finish_rollback(sb);
	assert_nothing_held();
	teardown(NULL);

	/* a refusal made nothing: a 409's container is another's, never looked for */
	setup(NULL);
	sb = drive(LC_CT_CREATE);
	answer(slot_of(sb), RT_NAME_TAKEN);
	assert_int_equal(sb->lc, LC_RB_NET_REMOVE);
	finish_rollback(sb);
	assert_int_equal(seen.status, 409);
	assert_nothing_held();
}

/* Recovery whose inspect, or whose remove of an unfinished create's container, fails (not
 * "not found"): the start stops, nothing is settled as missing (the record and workspace
 * stay, the container runs on), and a start that can read the engine again recovers it. */
static void test_recovery_that_cannot_read_a_container_stops_the_start(void **state)
{
	struct sandbox *sb = drive(LC_READY);
	char name[SB_NAME_BYTES], err[256];
	uint32_t uid = sb->uid;

	snprintf(name, sizeof(name), "%s", sb->name);
	sandbox_table_reset();
	start(false);
	fk.inspect_error = -EIO;
	assert_int_not_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not inspected"));
	assert_int_equal(fk.ws_retired, 0);
	assert_int_equal(fk.cts, 1);
	assert_int_equal(fk.nets, 1);
	fk.inspect_error = 0;
	sandbox_table_reset();
	start(false);
	assert_int_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	sb = sandbox_by_name(name);
	assert_non_null(sb);
	assert_int_equal(sb->lc, LC_READY);
	assert_int_equal(sb->uid, uid);
	assert_true(sb->uid_taken);
	assert_int_equal(lifecycle_remove(sb, true, false), 0);
	finish_rollback(sb);
	assert_nothing_held();

	/* an unfinished create whose container cannot be removed */
	sb = drive(LC_CT_INSPECT);
	sandbox_table_reset();
	for (uint32_t i = 0; i <= NSB; i++)
		fk.pending[i] = NULL; /* the call that was running died with the old daemon */
	start(false);
	fk.remove_error = -EIO;
	assert_int_not_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	assert_non_null(strstr(err, "not removed"));
	assert_int_equal(fk.ws_retired, 1); /* the earlier remove's, none since */
	assert_int_equal(fk.cts, 1);
	fk.remove_error = 0;
	sandbox_table_reset();
	start(false);
	assert_int_equal(recover_state(&fake_rt, err, sizeof(err)), 0);
	assert_nothing_held();
}

/* The checker itself: a sandbox READY without a container is caught. */
static void test_the_invariant_check_catches_a_broken_sandbox(void **state)
{
	struct sandbox *sb = drive(LC_READY);
	struct lifecycle_config lc = {
		.cfg = &d.cfg, .sb = table, .nsb = NSB, .slots = lcs, .rt = &fake_rt,
		.hooks = &hooks, .check = false, /* log, do not abort */
	};

	lifecycle_start(&lc);
	assert_true(lifecycle_check(sb));
	sb->ct_exists = false;
	assert_false(lifecycle_check(sb));
	sb->ct_exists = true;
	lc_slot(sb)->call_active = true;
	assert_false(lifecycle_check(sb));
	lc_slot(sb)->call_active = false;
}

/* The mutation test of the ASSERTs (base.h): an invariant broken on purpose, in a child, must
 * abort it with "assertion failed" and the file of the check; the same run unbroken passes. */
static void break_and_expect_abort(void (*mutate)(struct sandbox *sb), const char *where)
{
	char out[512] = "";
	int fds[2], st = 0;
	ssize_t n, got = 0;
	pid_t child;

	assert_int_equal(pipe(fds), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		dup2(fds[1], 2);
		close(fds[0]);
		mutate(drive(LC_CT_CREATE));
		_exit(0); /* not caught: the parent sees exit 0 */
	}
	close(fds[1]);
	while ((n = read(fds[0], out + got, sizeof(out) - 1 - (size_t)got)) > 0)
		got += n;
	out[got] = '\0';
	close(fds[0]);
	assert_int_equal(waitpid(child, &st, 0), child);
	assert_true(WIFSIGNALED(st));
	assert_int_equal(WTERMSIG(st), SIGABRT);
	assert_non_null(strstr(out, "agentic: assertion failed: "));
	assert_non_null(strstr(out, where));
}

/* a step's call begun while the call of the step before still runs */
static void begin_twice(struct sandbox *sb)
{
	lc_enter(sb, LC_CT_START);
}

/* a slot given back twice */
static void free_twice(struct sandbox *sb)
{
	sandbox_free(sb);
	sandbox_free(sb);
}

/* a READY without a container */
static void ready_without_container(struct sandbox *sb)
{
	sb->container_id[0] = '\0';
	lc_set_state(sb, LC_READY);
}

static void test_a_broken_invariant_aborts_on_its_assertion(void **state)
{
	break_and_expect_abort(begin_twice, "src/lifecycle/steps.c:");
	break_and_expect_abort(free_twice, "src/sandbox/sandbox.c:");
	break_and_expect_abort(ready_without_container, "src/lifecycle/steps.c:");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_state_takes_or_refuses_every_event, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_broken_invariant_aborts_on_its_assertion, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_create_then_remove_leaves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_create_failure_rolls_back_to_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures_without_the_engine_roll_back_too, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiting_for_the_agent_ends_in_ready_or_a_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_ready_before_the_inspect_finishes_the_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_out_of_band_changes_reach_the_tainted_hook_and_change_no_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_claim_renames_then_waits_for_the_init, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_claim_keeping_the_warm_name_renames_nothing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_claims_first_command_runs_before_the_pool_refills,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_stop_removes_warm_sandboxes_only, setup, teardown),
		cmocka_unit_test_setup_teardown(test_another_network_seen_on_the_inspect_taints, setup, teardown),
		cmocka_unit_test_setup_teardown(test_agent_ready_again_is_logged_while_ready_or_refreshing,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_failed_teardown_step_is_retried, setup, teardown),
		cmocka_unit_test_setup_teardown(test_events_during_a_call_wait_for_it, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_destroy_drops_a_pending_refresh_retry, setup, teardown),
		cmocka_unit_test_setup_teardown(test_runtime_events_are_acted_on_at_the_tick, setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_overlapping_subnet_moves_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_warm_pool_fills_between_creates, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovery_events, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_reset_table_is_rebuilt_by_recovery, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_create_whose_answer_was_lost_leaves_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_recovery_that_cannot_read_a_container_stops_the_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_the_invariant_check_catches_a_broken_sandbox, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
