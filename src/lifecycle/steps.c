/* steps.c: the lifecycle's states (their phase, call and family) and the steps every event
 * takes: enter a state and begin its call, fail a create, tear down what is left, finish a
 * create or a release; the invariants; the lifecycle's per-slot table (lifecycle.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/steps.h"
#include "sandbox/reqcheck.h"
#include "sandbox/posture.h"

const struct lc_state_info lc_states[LC_STATES] = {
	[LC_FREE] = { "free", SB_FREE, 0, F_NONE },
	[LC_NEW] = { "new", SB_CREATING, 0, F_CREATE },
	[LC_NET_SCAN] = { "net_scan", SB_CREATING, RT_NET_SCAN, F_CREATE },
	[LC_NET_CREATE] = { "net_create", SB_CREATING, RT_NET_CREATE, F_CREATE },
	[LC_CT_CREATE] = { "ct_create", SB_CREATING, RT_CT_CREATE, F_CREATE },
	[LC_CT_START] = { "ct_start", SB_CREATING, RT_CT_START, F_CREATE },
	[LC_CT_INSPECT] = { "ct_inspect", SB_CREATING, RT_CT_INSPECT, F_CREATE },
	[LC_WAIT_READY] = { "wait_ready", SB_CREATING, 0, F_CREATE },
	[LC_READY] = { "ready", SB_READY, 0, F_READY },
	[LC_READY_REFRESH] = { "ready_refresh", SB_READY, RT_CT_INSPECT, F_READY },
	[LC_CONFLICT] = { "conflict", SB_CONFLICT, 0, F_CONFLICT },
	[LC_CONFLICT_REFRESH] = { "conflict_refresh", SB_CONFLICT, RT_CT_INSPECT, F_CONFLICT },
	[LC_RB_LOGS] = { "rb_logs", SB_CREATING, RT_CT_LOGS, F_ROLLBACK },
	[LC_RB_CT_REMOVE] = { "rb_ct_remove", SB_CREATING, RT_CT_REMOVE, F_ROLLBACK },
	[LC_RB_NET_REMOVE] = { "rb_net_remove", SB_CREATING, RT_NET_REMOVE, F_ROLLBACK },
	[LC_RM_PENDING] = { "rm_pending", SB_REMOVING, RT_CT_INSPECT, F_REMOVE },
	[LC_RM_STOP] = { "rm_stop", SB_REMOVING, RT_CT_STOP, F_REMOVE },
	[LC_RM_CT_REMOVE] = { "rm_ct_remove", SB_REMOVING, RT_CT_REMOVE, F_REMOVE },
	[LC_RM_NET_REMOVE] = { "rm_net_remove", SB_REMOVING, RT_NET_REMOVE, F_REMOVE },
	[LC_GONE_NET_REMOVE] = { "gone_net_remove", SB_REMOVING, RT_NET_REMOVE, F_GONE },
	[LC_RB_CT_FIND] = { "rb_ct_find", SB_CREATING, RT_CT_INSPECT, F_ROLLBACK },
	[LC_CLAIM_RENAME] = { "claim_rename", SB_CREATING, RT_CT_RENAME, F_CREATE },
	[LC_CLAIM_INIT] = { "claim_init", SB_CREATING, 0, F_CREATE },
};

struct lifecycle_config lc_conf;
bool lc_stopping;
int64_t lc_warm_retry_at;
int64_t lc_pool_hold_until;
static const struct sandbox *pool_hold_sb; /* the claimed sandbox the hold waits for */
static uint32_t pool_hold_gen;

void lifecycle_command_ended(const struct sandbox *sb)
{
	if (lc_pool_hold_until && sb == pool_hold_sb && sb->gen == pool_hold_gen)
		lc_pool_hold_until = 0;
}

int64_t lc_mono(void)
{
	return lc_conf.hooks->mono_ms ? lc_conf.hooks->mono_ms() : clock_mono_ms();
}

int64_t lc_wall(void)
{
	return lc_conf.hooks->wall_ms ? lc_conf.hooks->wall_ms() : clock_wall_ms();
}

const struct lc_sb *lc_of(const struct sandbox *sb)
{
	return &lc_conf.slots[sandbox_index(sb)]; /* lc_conf.nsb is the table's size */
}

const char *lifecycle_state_name(enum lc_state s)
{
	return s < LC_STATES ? lc_states[s].name : "?";
}

bool lifecycle_going(const struct sandbox *sb)
{
	enum lc_family f = lc_family_of(sb);

	return f == F_ROLLBACK || f == F_REMOVE || f == F_GONE;
}

bool lifecycle_stopping(void)
{
	return lc_stopping;
}

/* ---- invariants ---- */

bool lc_broken(const struct sandbox *sb, const char *what)
{
	log_error("lifecycle invariant broken", "name=%s state=%s invariant=%s", log_q(sb->name),
		  lifecycle_state_name(sb->lc), log_q(what));
	if (lc_conf.check)
		abort();
	return false;
}

bool lifecycle_check(const struct sandbox *sb)
{
	const struct lc_state_info *st = sb->lc < LC_STATES ? &lc_states[sb->lc] : NULL;
	enum lc_family f;

	if (!st)
		return lc_broken(sb, "state out of range");
	f = st->family;
	if (sb->state != st->phase)
		return lc_broken(sb, "phase disagrees with the state");
	if (lc_of(sb)->call_active && !st->op)
		return lc_broken(sb, "a call runs in a state that has none");
	if (sb->lc == LC_FREE && (sb->uid_taken || sb->subnet >= 0 || lc_of(sb)->call_active))
		return lc_broken(sb, "a free slot holds a uid, a subnet or a call");
	if (f == F_CREATE && st->op && !lc_of(sb)->call_active)
		return lc_broken(sb, "a create step without its call");
	if (f == F_CREATE && sb->lc != LC_NEW && !sb->uid_taken)
		return lc_broken(sb, "a create past its start without its uid");
	if (sb->lc == LC_NET_CREATE && sb->subnet < 0)
		return lc_broken(sb, "a network create without a subnet");
	if ((f == F_ROLLBACK || f == F_REMOVE || f == F_GONE || sb->lc == LC_READY_REFRESH ||
	     sb->lc == LC_CONFLICT_REFRESH) && sb->lc != LC_RM_PENDING &&
	    lc_of(sb)->call_active == (sb->retry_at != 0))
		return lc_broken(sb, "a step with both (or neither) a call and a retry");
	if (sb->lc == LC_RM_PENDING && !lc_of(sb)->call_active)
		return lc_broken(sb, "a pending remove without the call it waits for");
	if (sb->pool && (sb->lc == LC_CLAIM_RENAME || sb->lc == LC_CLAIM_INIT))
		return lc_broken(sb, "a claim of a sandbox still in the warm pool");
	if ((f == F_READY || f == F_CONFLICT || sb->lc == LC_WAIT_READY ||
	     sb->lc == LC_CLAIM_RENAME || sb->lc == LC_CLAIM_INIT) &&
	    (!sb->ct_exists || !sb->container_id[0]))
		return lc_broken(sb, "ready (or waiting for the agent) without a container");
	return true;
}

/* ---- calls ---- */

void lc_set_state(struct sandbox *sb, enum lc_state s)
{
	ASSERT(s < LC_STATES);
	ASSERT(s != LC_READY || sb->container_id[0]);
	if (sb->lc != s)
		sb->retry_at = 0; /* a retry belongs to the step that failed */
	sb->lc = s;
	sb->state = lc_states[s].phase;
}

static void fill_call(struct sandbox *sb, enum rt_op op)
{
	struct rt_call *c = &lc_slot(sb)->call;

	*c = (struct rt_call){ .op = op, .slot = sandbox_index(sb), .sb = sb };
	switch (op) {
	case RT_NET_CREATE:
		c->name = sb->network;
		c->subnet = sb->subnet_text;
		break;
	case RT_NET_SCAN:
		c->each_subnet = subnet_foreign_add;
		break;
	case RT_CT_CREATE:
		c->managed_net = sb->net_managed;
		break;
	case RT_NET_REMOVE:
		c->id = sb->network_id[0] ? sb->network_id : sb->network;
		break;
	case RT_CT_RENAME:
		c->id = sb->container_id;
		c->name = sb->name;
		break;
	case RT_CT_STOP:
		c->stop_grace_s = (int)((lc_conf.cfg->stop_grace_ms + 999) / 1000);
		c->id = sb->container_id;
		break;
	default:
		/* a container whose create's answer was lost is looked for by its name */
		c->id = sb->lc == LC_RB_CT_FIND ? sb->name : sb->container_id;
		/* the create's inspect reads the engine's view of its network too */
		c->check_net = sb->lc == LC_CT_INSPECT;
		c->managed_net = sb->net_managed;
		break;
	}
}

/* Begins the call of sb's state. A create step that cannot begin rolls back; a teardown or
 * refresh step is retried. */
void lc_begin(struct sandbox *sb)
{
	const struct lc_state_info *st = &lc_states[sb->lc];
	struct lc_sb *l = lc_slot(sb);

	if (lc_stopping && st->family == F_CREATE) {
		lc_fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	ASSERT(!l->call_active);
	fill_call(sb, st->op);
	if (runtime_call(lc_conf.rt, &l->call) == 0) {
		l->call_active = true;
		return;
	}
	if (st->family == F_CREATE) {
		lc_fail_create(sb, 502, "engine", "cannot call the engine: %s", l->call.res.text);
		return;
	}
	log_error("engine call not started; retrying", "name=%s step=%s", log_q(sb->name),
		  st->name);
	sb->retry_at = lc_mono() + RETRY_MS;
}

/* Enters state s and begins its call, if it has one. */
void lc_enter(struct sandbox *sb, enum lc_state s)
{
	lc_set_state(sb, s);
	if (lc_states[s].op)
		lc_begin(sb);
}

bool lc_creates_running(void)
{
	for (uint32_t i = 0; i < lc_conf.nsb; i++)
		if (lc_conf.sb[i].lc != LC_NEW && lc_family_of(&lc_conf.sb[i]) == F_CREATE)
			return true;
	return false;
}

/* The engine serialises network work: a pool network made while a create runs slows that
 * create down. The pool refills between creates. */
void lc_pool_fill(void)
{
	struct netpool *p = lc_conf.pool;

	if (p && !netpool_busy(p) && p->n < LIMIT_WARM_NETWORKS && lc_mono() >= p->retry_at)
		netpool_fill(p, lc_mono(), lc_stopping || lc_creates_running() ||
			     lc_mono() < lc_pool_hold_until);
}

/* ---- the ends: ready, released ---- */

void lc_finish_create(struct sandbox *sb)
{
	int64_t took = lc_wall() - sb->created_ms;

	bool claim = sb->lc == LC_CLAIM_INIT;

	lc_set_state(sb, LC_READY);
	sb->deadline = 0;
	sb->ready_ms = lc_wall();
	if (sb->ttl_ms)
		sb->expires_at = sb->ready_ms + sb->ttl_ms;
	sb->ttl_ms = 0;
	sb->req = NULL;
	/* a claim is answered before its record's fsyncs, which follow at once (warm time to
	 * interactive: they are a millisecond of it); a cold create's take its 600 in their stride */
	if ((claim ? sandbox_record_write_unsynced : sandbox_record_write)(lc_conf.cfg, sb) != 0)
		log_warn("sandbox record not written", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	if (claim)
		log_info("sandbox ready", "name=%s instance=%s uid=%u subnet=%s tier=%s took_ms=%lld "
			 "warm=1 pool_name=%s", log_q(sb->name), log_q(sb->instance_id), sb->uid,
			 lc_subnet_or_dash(sb), posture_tier(&sb->posture), (long long)took,
			 log_q(sb->agent_id));
	else
		log_info("sandbox ready", "name=%s instance=%s uid=%u subnet=%s tier=%s took_ms=%lld "
			 "network_ms=%lld container_create_ms=%lld start_ms=%lld init_ms=%lld "
			 "connect_ms=%lld pool=%d", log_q(sb->name), log_q(sb->instance_id), sb->uid,
			 lc_subnet_or_dash(sb), posture_tier(&sb->posture), (long long)took,
			 (long long)(sb->t_net - sb->t_begin), (long long)(sb->t_ct - sb->t_net),
			 (long long)(sb->t_start - sb->t_ct), (long long)(lc_mono() - sb->t_start),
			 (long long)(sb->t_auth - sb->t_ct), sb->pool);
	HOOK(created, sb, took);
	if (claim && sandbox_record_sync(lc_conf.cfg, sb) != 0)
		log_warn("sandbox record not synced", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	sb->waiter = -1;
	if (claim) {
		lc_pool_hold_until = lc_mono() + POOL_HOLD_MS;
		pool_hold_sb = sb;
		pool_hold_gen = sb->gen;
	}
	lc_pool_fill();
}

/* The last step of a rollback or a remove: ids back, record gone, slot free. */
static void finish_release(struct sandbox *sb, enum lc_family f)
{
	bool removing = f == F_REMOVE || f == F_GONE;

	ASSERT(!lc_of(sb)->call_active);
	HOOK(agent_drop, sb, removing ? "sandbox removed" : "sandbox create failed");
	HOOK(stopped, sb, "the sandbox was removed", removing ? "removed" : "create_failed");
	if (sb->dir_made || removing)
		lc_conf.rt->ops->workspace_retire(lc_conf.rt->self, sb, f == F_ROLLBACK ||
						  (removing && !sb->keep_workspace));
	if (f == F_GONE) {
		log_warn("sandbox gone: its container was removed outside agenticd",
			 "name=%s instance=%s uid=%u subnet=%s workspace=%s", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, lc_subnet_or_dash(sb),
			 sb->keep_workspace ? "kept" : "deleted");
	} else if (removing) {
		log_info("sandbox removed", "name=%s instance=%s uid=%u subnet=%s workspace=%s",
			 log_q(sb->name), log_q(sb->instance_id), sb->uid, lc_subnet_or_dash(sb),
			 sb->keep_workspace ? "kept" : "deleted");
		HOOK(removed, sb);
	} else {
		log_info("create rolled back", "name=%s instance=%s uid=%u subnet=%s", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, lc_subnet_or_dash(sb));
		/* a warm sandbox that cannot be made is not tried again at once */
		if (sb->pool)
			lc_warm_retry_at = lc_mono() + WARM_RETRY_MS;
		HOOK(create_failed, sb);
	}
	sb->waiter = -1;
	HOOK(released, sb);
	sandbox_free(sb);
	sb->pending = 0;
	sb->retry_at = 0;
	sb->deadline = 0;
	lc_set_state(sb, LC_FREE);
	lc_pool_fill();
}

/* Next step of a rollback, remove or gone sandbox, from what still exists. */
void lc_teardown_next(struct sandbox *sb, enum lc_family f)
{
	if (sb->ct_exists)
		lc_enter(sb, f == F_ROLLBACK ? LC_RB_CT_REMOVE : LC_RM_CT_REMOVE);
	else if (f == F_ROLLBACK && sb->ct_maybe)
		lc_enter(sb, LC_RB_CT_FIND);
	else if (sb->net_managed && sb->net_exists)
		lc_enter(sb, f == F_ROLLBACK ? LC_RB_NET_REMOVE : f == F_GONE ? LC_GONE_NET_REMOVE
								       : LC_RM_NET_REMOVE);
	else
		finish_release(sb, f);
}

void lc_fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sb->error, sizeof(sb->error), fmt, ap);
	va_end(ap);
	policy_redact(sb->error, sizeof(sb->error));
	sb->err_status = status;
	sb->err_code = code;
	sb->deadline = 0;
	sb->req = NULL; /* the request's connection may go away from here on */
	log_warn("create failed", "name=%s instance=%s uid=%u status=%d code=%s", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid, status, code);
	if (sb->ct_exists)
		lc_enter(sb, LC_RB_LOGS);
	else
		lc_teardown_next(sb, F_ROLLBACK);
}

void lc_take_inspect(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	if (res->outcome != RT_OK)
		return;
	sb->running = res->running;
	sb->pid = res->running ? res->pid : 0;
	sb->exit_code = res->exit_code;
	sandbox_read_pid_ns(sb);
}

void lifecycle_network_read(struct sandbox *sb, const struct rt_netcheck *nc)
{
	if (!nc->read)
		return;
	HOOK(network_read, sb, nc->ok, nc->why ? nc->why : "unreadable");
	if (nc->other)
		HOOK(tainted, sb, RT_EV_NET_CONNECT, "inspect");
}

void lifecycle_exec_seen(struct sandbox *sb)
{
	HOOK(tainted, sb, RT_EV_EXEC, "inspect");
}
