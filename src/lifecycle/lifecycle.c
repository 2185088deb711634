/* lifecycle.c: a sandbox's life as one state machine (lifecycle.h): create with its rollback,
 * remove, the container events; driven by events, driving a struct runtime. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "runtime/runtime_vm.h"
#include "sandbox/reqcheck.h"
#include "sandbox/posture.h"
#include "workspace/share.h"

/* What a state belongs to: decides which events it takes and where a teardown goes next. */
enum family { F_NONE, F_CREATE, F_READY, F_CONFLICT, F_ROLLBACK, F_REMOVE, F_GONE };

static const struct state_info {
	const char *name;
	enum sb_state phase;
	enum rt_op op;                /* the runtime call the state runs; 0: none */
	enum family family;
} states[LC_STATES] = {
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

static struct lifecycle_config lc;
static const struct lifecycle_hooks no_hooks;
static bool stopping;       /* SIGTERM: no new work */
static uint32_t depth;      /* lifecycle_on nesting: a hook feeding an event back */
static bool events_dirty;   /* the runtime reported container events: drain them on the tick */
static int64_t warm_retry_at; /* monotonic: a warm sandbox's create failed; none before this */
/* A warm sandbox's create asks for nothing: the default image and resources, no env */
static struct create_req warm_req;
#define WARM_RETRY_MS 5000

#define HOOK(name, ...) \
	do { \
		if (lc.hooks->name) \
			lc.hooks->name(lc.hooks->ctx, __VA_ARGS__); \
	} while (0)

static int64_t mono(void)
{
	return lc.hooks->mono_ms ? lc.hooks->mono_ms() : clock_mono_ms();
}

static int64_t wall(void)
{
	return lc.hooks->wall_ms ? lc.hooks->wall_ms() : clock_wall_ms();
}

static enum family family_of(const struct sandbox *sb)
{
	return states[sb->lc].family;
}

static const char *subnet_or_dash(const struct sandbox *sb)
{
	return sb->subnet_text[0] ? sb->subnet_text : "-";
}

const char *lifecycle_state_name(enum lc_state s)
{
	return s < LC_STATES ? states[s].name : "?";
}

bool lifecycle_going(const struct sandbox *sb)
{
	enum family f = family_of(sb);

	return f == F_ROLLBACK || f == F_REMOVE || f == F_GONE;
}

bool lifecycle_stopping(void)
{
	return stopping;
}

/* ---- invariants ---- */

static bool broken(const struct sandbox *sb, const char *what)
{
	log_error("lifecycle invariant broken", "name=%s state=%s invariant=%s", log_q(sb->name),
		  lifecycle_state_name(sb->lc), log_q(what));
	if (lc.check)
		abort();
	return false;
}

bool lifecycle_check(const struct sandbox *sb)
{
	const struct state_info *st = sb->lc < LC_STATES ? &states[sb->lc] : NULL;
	enum family f;

	if (!st)
		return broken(sb, "state out of range");
	f = st->family;
	if (sb->state != st->phase)
		return broken(sb, "phase disagrees with the state");
	if (sb->call_active && !st->op)
		return broken(sb, "a call runs in a state that has none");
	if (sb->lc == LC_FREE && (sb->uid_taken || sb->subnet >= 0 || sb->call_active))
		return broken(sb, "a free slot holds a uid, a subnet or a call");
	if (f == F_CREATE && st->op && !sb->call_active)
		return broken(sb, "a create step without its call");
	if (f == F_CREATE && sb->lc != LC_NEW && !sb->uid_taken)
		return broken(sb, "a create past its start without its uid");
	if (sb->lc == LC_NET_CREATE && sb->subnet < 0)
		return broken(sb, "a network create without a subnet");
	if ((f == F_ROLLBACK || f == F_REMOVE || f == F_GONE || sb->lc == LC_READY_REFRESH ||
	     sb->lc == LC_CONFLICT_REFRESH) && sb->lc != LC_RM_PENDING &&
	    sb->call_active == (sb->retry_at != 0))
		return broken(sb, "a step with both (or neither) a call and a retry");
	if (sb->lc == LC_RM_PENDING && !sb->call_active)
		return broken(sb, "a pending remove without the call it waits for");
	if (sb->pool && (sb->lc == LC_CLAIM_RENAME || sb->lc == LC_CLAIM_INIT))
		return broken(sb, "a claim of a sandbox still in the warm pool");
	if ((f == F_READY || f == F_CONFLICT || sb->lc == LC_WAIT_READY ||
	     sb->lc == LC_CLAIM_RENAME || sb->lc == LC_CLAIM_INIT) &&
	    (!sb->ct_exists || !sb->container_id[0]))
		return broken(sb, "ready (or waiting for the agent) without a container");
	return true;
}

/* ---- calls ---- */

static void fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void teardown_next(struct sandbox *sb, enum family f);

static void set_state(struct sandbox *sb, enum lc_state s)
{
	if (sb->lc != s)
		sb->retry_at = 0; /* a retry belongs to the step that failed */
	sb->lc = s;
	sb->state = states[s].phase;
}

static void fill_call(struct sandbox *sb, enum rt_op op)
{
	struct rt_call *c = &sb->call;

	*c = (struct rt_call){ .op = op, .slot = (uint32_t)(sb - lc.sb), .sb = sb };
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
		c->stop_grace_s = (int)((lc.cfg->stop_grace_ms + 999) / 1000);
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
static void begin(struct sandbox *sb)
{
	const struct state_info *st = &states[sb->lc];

	if (stopping && st->family == F_CREATE) {
		fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	if (sb->call_active)
		broken(sb, "a call begun while one runs");
	fill_call(sb, st->op);
	if (runtime_call(lc.rt, &sb->call) == 0) {
		sb->call_active = true;
		return;
	}
	if (st->family == F_CREATE) {
		fail_create(sb, 502, "engine", "cannot call the engine: %s", sb->call.res.text);
		return;
	}
	log_error("engine call not started; retrying", "name=%s step=%s", log_q(sb->name),
		  st->name);
	sb->retry_at = mono() + RETRY_MS;
}

/* Enters state s and begins its call, if it has one. */
static void enter(struct sandbox *sb, enum lc_state s)
{
	set_state(sb, s);
	if (states[s].op)
		begin(sb);
}

static bool creates_running(void)
{
	for (uint32_t i = 0; i < lc.nsb; i++)
		if (lc.sb[i].lc != LC_NEW && family_of(&lc.sb[i]) == F_CREATE)
			return true;
	return false;
}

/* The engine serialises network work: a pool network made while a create runs slows that
 * create down. The pool refills between creates. */
static void pool_fill(void)
{
	struct netpool *p = lc.pool;

	if (p && !netpool_busy(p) && p->n < LIMIT_WARM_NETWORKS && mono() >= p->retry_at)
		netpool_fill(p, mono(), stopping || creates_running());
}

/* The warm pool (warm_sandboxes): one warm sandbox made at a time, after the creates that
 * wait for an answer; a ready one that is no longer T1 (a `docker exec` into it, its
 * network changed) is removed, never handed out. Called from the tick only, never from
 * inside an event. */
static bool warm_wanted(uint32_t *have)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < lc.nsb; i++) {
		const struct sandbox *sb = &lc.sb[i];

		if (!sb->pool || sb->lc == LC_FREE || lifecycle_going(sb))
			continue;
		if (family_of(sb) == F_CREATE)
			return false; /* one at a time */
		n++;
	}
	*have = n;
	return n < lc.cfg->warm_sandboxes;
}

static void warm_fill(void)
{
	struct sandbox *sb;
	uint32_t have;
	char hex[16];

	for (uint32_t i = 0; i < lc.nsb; i++) {
		sb = &lc.sb[i];
		if (sb->pool && sb->lc == LC_READY && !sb->call_active &&
		    (sb->posture.taints || !posture_is_t1(&sb->posture))) {
			log_warn("warm sandbox no longer T1; removing it", "name=%s tier=%s",
				 log_q(sb->name), posture_tier(&sb->posture));
			lifecycle_remove(sb, true, false);
		}
	}
	if (!lc.cfg->warm_sandboxes || stopping || mono() < warm_retry_at || creates_running() ||
	    !warm_wanted(&have) || !(sb = sandbox_new()))
		return;
	do {
		random_hex(hex, 12);
		snprintf(sb->name, sizeof(sb->name), "warm-%s", hex);
	} while (sandbox_by_name(sb->name) != sb);
	memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
	sb->pool = true;
	log_info("warm sandbox create", "name=%s warm=%u wanted=%u", log_q(sb->name), have,
		 lc.cfg->warm_sandboxes);
	lifecycle_create(sb, &warm_req);
}

/* ---- the ends: ready, released ---- */

static void finish_create(struct sandbox *sb)
{
	int64_t took = wall() - sb->created_ms;

	bool claim = sb->lc == LC_CLAIM_INIT;

	set_state(sb, LC_READY);
	sb->deadline = 0;
	sb->ready_ms = wall();
	sb->req = NULL;
	if (share_write_record(lc.cfg, sb) != 0)
		log_warn("sandbox record not written", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	if (claim)
		log_info("sandbox ready", "name=%s instance=%s uid=%u subnet=%s tier=%s took_ms=%lld "
			 "warm=1 pool_name=%s", log_q(sb->name), log_q(sb->instance_id), sb->uid,
			 subnet_or_dash(sb), posture_tier(&sb->posture), (long long)took,
			 log_q(sb->agent_id));
	else
		log_info("sandbox ready", "name=%s instance=%s uid=%u subnet=%s tier=%s took_ms=%lld "
			 "network_ms=%lld container_create_ms=%lld start_ms=%lld init_ms=%lld "
			 "connect_ms=%lld pool=%d", log_q(sb->name), log_q(sb->instance_id), sb->uid,
			 subnet_or_dash(sb), posture_tier(&sb->posture), (long long)took,
			 (long long)(sb->t_net - sb->t_begin), (long long)(sb->t_ct - sb->t_net),
			 (long long)(sb->t_start - sb->t_ct), (long long)(mono() - sb->t_start),
			 (long long)(sb->t_auth - sb->t_ct), sb->pool);
	HOOK(created, sb, took);
	sb->waiter = -1;
	pool_fill();
}

/* The last step of a rollback or a remove: ids back, record gone, slot free. */
static void finish_release(struct sandbox *sb, enum family f)
{
	bool removing = f == F_REMOVE || f == F_GONE;

	if (sb->call_active)
		broken(sb, "released with a call running");
	HOOK(agent_drop, sb, removing ? "sandbox removed" : "sandbox create failed");
	HOOK(stopped, sb, "the sandbox was removed", removing ? "removed" : "create_failed");
	if (sb->dir_made || removing)
		lc.rt->ops->workspace_retire(lc.rt->self, sb, f == F_ROLLBACK ||
					     (removing && !sb->keep_workspace));
	if (f == F_GONE) {
		log_warn("sandbox gone: its container was removed outside agenticd",
			 "name=%s instance=%s uid=%u subnet=%s workspace=%s", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, subnet_or_dash(sb),
			 sb->keep_workspace ? "kept" : "deleted");
	} else if (removing) {
		log_info("sandbox removed", "name=%s instance=%s uid=%u subnet=%s workspace=%s",
			 log_q(sb->name), log_q(sb->instance_id), sb->uid, subnet_or_dash(sb),
			 sb->keep_workspace ? "kept" : "deleted");
		HOOK(removed, sb);
	} else {
		log_info("create rolled back", "name=%s instance=%s uid=%u subnet=%s", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, subnet_or_dash(sb));
		/* a warm sandbox that cannot be made is not tried again at once */
		if (sb->pool)
			warm_retry_at = mono() + WARM_RETRY_MS;
		HOOK(create_failed, sb);
	}
	sb->waiter = -1;
	HOOK(released, sb);
	sandbox_free(sb);
	sb->pending = 0;
	sb->retry_at = 0;
	sb->deadline = 0;
	set_state(sb, LC_FREE);
	pool_fill();
}

/* Next step of a rollback, remove or gone sandbox, from what still exists. */
static void teardown_next(struct sandbox *sb, enum family f)
{
	if (sb->ct_exists)
		enter(sb, f == F_ROLLBACK ? LC_RB_CT_REMOVE : LC_RM_CT_REMOVE);
	else if (f == F_ROLLBACK && sb->ct_maybe)
		enter(sb, LC_RB_CT_FIND);
	else if (sb->net_managed && sb->net_exists)
		enter(sb, f == F_ROLLBACK ? LC_RB_NET_REMOVE : f == F_GONE ? LC_GONE_NET_REMOVE
								       : LC_RM_NET_REMOVE);
	else
		finish_release(sb, f);
}

static void fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
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
		enter(sb, LC_RB_LOGS);
	else
		teardown_next(sb, F_ROLLBACK);
}

/* Appends the init's last log lines (scrubbed) to a failed create's error. */
static void append_init_log(struct sandbox *sb)
{
	size_t n = strlen(sb->error);

	if (!sb->log_len) {
		snprintf(sb->error + n, sizeof(sb->error) - n, "; the init logged nothing");
		return;
	}
	policy_redact(sb->init_log, sizeof(sb->init_log));
	snprintf(sb->error + n, sizeof(sb->error) - n, "; the init's last log lines:\n%s",
		 sb->init_log);
	while ((n = strlen(sb->error)) && sb->error[n - 1] == '\n')
		sb->error[n - 1] = '\0';
}

/* A create step's call failed: the API status and code for what the runtime said. */
static void step_failed(struct sandbox *sb, const char *what)
{
	const struct rt_result *res = &sb->call.res;

	switch (res->outcome) {
	case RT_NAME_TAKEN:
		fail_create(sb, 409, "name_taken", "%s failed: %s", what, res->text);
		break;
	case RT_ROOT_UNBOUNDED:
		fail_create(sb, 422, "writable_root_unbounded", "this engine cannot bound a "
			    "writable root filesystem (StorageOpt size; overlay2 needs xfs with "
			    "pquota), so none is offered: %s", res->text);
		break;
	case RT_IMAGE_MISSING:
		fail_create(sb, 400, "image_missing", "%s failed: %s", what, res->text);
		break;
	default:
		fail_create(sb, 502, "engine", "%s failed: %s", what, res->text);
		break;
	}
}

/* A create that failed without the engine's word that nothing was made (the answer lost, or
 * unreadable) may have made its object. A refusal (name taken, overlap, no image, no bound
 * for a writable root) made nothing; a 409's container is another's. */
static bool may_exist(const struct rt_result *res)
{
	return res->outcome == RT_ENGINE || res->outcome == RT_UNREADABLE;
}

/* The rollback's look for a container its create may have made: only one carrying this
 * create's instance label is its own (the name may be another's since). */
static void find_done(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;

	if (res->outcome != RT_OK && res->outcome != RT_GONE) {
		log_error("teardown step failed; retrying", "name=%s step=%s error=%s",
			  log_q(sb->name), lifecycle_state_name(sb->lc), log_q(res->text));
		sb->retry_at = mono() + RETRY_MS;
		return;
	}
	sb->ct_maybe = false;
	if (res->outcome == RT_OK && strcmp(res->instance_id, sb->instance_id) == 0) {
		log_warn("container made though its create failed; removing it", "name=%s "
			 "instance=%s", log_q(sb->name), log_q(sb->instance_id));
		memcpy(sb->container_id, res->id, sizeof(sb->container_id));
		sb->ct_exists = true;
		enter(sb, LC_RB_CT_REMOVE);
		return;
	}
	teardown_next(sb, F_ROLLBACK);
}

static void take_inspect(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;

	if (res->outcome != RT_OK)
		return;
	sb->running = res->running;
	sb->pid = res->running ? res->pid : 0;
	sb->exit_code = res->exit_code;
	sandbox_read_pid_ns(sb);
}

static void remove_steps(struct sandbox *sb)
{
	if (sb->ct_exists && !sb->force && sb->running)
		enter(sb, LC_RM_STOP);
	else
		teardown_next(sb, F_REMOVE);
}

/* ---- create ---- */

static int on_create(struct sandbox *sb, struct create_req *req)
{
	const struct config *cfg = lc.cfg;
	struct warm_net w;
	char err[512], hex[16];
	int r;

	if (sb->lc != LC_NEW || !req)
		return ERR_STATE;
	sb->req = req;
	sb->created_ms = wall();
	sb->t_begin = sb->t_net = mono();
	/* its container and its init know it by the name it is made with */
	memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
	if (uuid7(sb->instance_id) != 0 || sandbox_take_uid(sb) != 0) {
		fail_create(sb, 503, "capacity", "no free control uid in %u-%u",
			    cfg->control_uid_min, cfg->control_uid_max);
		return 0;
	}
	snprintf(sb->image, sizeof(sb->image), "%s", req->image ? req->image : cfg->default_image);
	sb->disk_bytes = req->disk_bytes ? req->disk_bytes : cfg->default_disk_bytes;
	sb->transcript_bytes = req->transcript_bytes ? req->transcript_bytes
			       : cfg->transcript_budget_bytes;
	sb->writable_root = req->writable_root;
	sb->vm = req->vm;
	if (sb->vm) {
		/* no network at all (-nic none); its env reaches the init over the control
		 * channel once it registers, as a claim's does (agent.c), never the command line */
		sb->network[0] = '\0';
		sb->net_managed = false;
		for (uint32_t i = 0; i < req->nenv; i++)
			if (strrun_add(sb->claim_env, &sb->claim_env_len, sizeof(sb->claim_env),
				       req->env[i]) != 0) {
				fail_create(sb, 422, "env_too_long", "a VM sandbox's env is at most %u "
					    "bytes in all", LIMIT_SANDBOX_CLAIM_ENV_BYTES);
				return 0;
			}
		sb->nclaim_env = (uint16_t)req->nenv;
		/* the credentials' ids and targets; their secrets are read when sent (agent.c) */
		runtime_vm_creds_set(sb, req);
	} else if (req->network) {
		snprintf(sb->network, sizeof(sb->network), "%s", req->network);
	} else if (lc.pool && netpool_take(lc.pool, &w)) {
		memcpy(sb->network, w.name, sizeof(sb->network));
		memcpy(sb->network_id, w.id, sizeof(sb->network_id));
		sb->subnet = w.subnet;
		subnet_text(sb->subnet, sb->subnet_text, sizeof(sb->subnet_text));
		sb->net_managed = sb->net_exists = true;
	} else {
		/* with /28s taken as foreign, the engine's networks are read again first: some of
		 * those networks may be gone */
		if (sandbox_take_subnet(sb) != 0 && !subnet_foreign_count()) {
			fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool");
			return 0;
		}
		random_hex(hex, 12);
		snprintf(sb->network, sizeof(sb->network), "agentic-net-%s", hex);
		sb->net_managed = true;
	}
	log_info("create started", "name=%s instance=%s uid=%u network=%s subnet=%s warm=%d "
		 "disk_bytes=%llu", log_q(sb->name), log_q(sb->instance_id), sb->uid,
		 log_q(sb->network), subnet_or_dash(sb), sb->net_exists,
		 (unsigned long long)sb->disk_bytes);
	if ((r = share_make(cfg, sb, err, sizeof(err))) != 0) {
		fail_create(sb, 500, "agentshare", "%s", err);
		return 0;
	}
	sb->dir_made = true;
	if ((r = share_write_record(cfg, sb)) != 0) {
		fail_create(sb, 500, "agentshare", "cannot write sandbox.json: %s", err_str(r));
		return 0;
	}
	if ((r = lc.rt->ops->workspace_make(lc.rt->self, sb, err, sizeof(err))) != 0) {
		if (r == -ENOSPC)
			fail_create(sb, 507, "no_space", "%s", err);
		else
			fail_create(sb, 500, "agentshare", "%s", err);
		return 0;
	}
	if (!sb->net_managed || sb->net_exists) {
		enter(sb, LC_CT_CREATE);
	} else if (sb->subnet < 0) {
		sb->net_scans++;
		enter(sb, LC_NET_SCAN);
	} else {
		enter(sb, LC_NET_CREATE);
	}
	return 0;
}

/* ---- a call answered ---- */

/* Every network on the engine read again: what is not ours is foreign; the create moves on to
 * the next free /28 (the runtime fed each subnet to subnet_foreign_add before answering). */
static void scan_done(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;

	if (res->outcome == RT_UNREADABLE) {
		fail_create(sb, 502, "engine", "network list unreadable: %s", res->text);
		return;
	}
	if (res->outcome != RT_OK) {
		step_failed(sb, "network list");
		return;
	}
	if (sandbox_take_subnet(sb) != 0) {
		fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool (%u taken "
			    "by networks agenticd did not make)", subnet_foreign_count());
		return;
	}
	log_info("subnet moved past other networks", "name=%s subnet=%s foreign_subnets=%u",
		 log_q(sb->name), sb->subnet_text, subnet_foreign_count());
	enter(sb, LC_NET_CREATE);
}

static void teardown_done(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;
	enum family f = family_of(sb);

	if (res->outcome != RT_OK && res->outcome != RT_GONE) {
		log_error("teardown step failed; retrying", "name=%s step=%s error=%s",
			  log_q(sb->name), lifecycle_state_name(sb->lc), "\"see next line\"");
		log_error("engine said", "name=%s message=%s", log_q(sb->name), log_q(res->text));
		sb->retry_at = mono() + RETRY_MS;
		return;
	}
	if (sb->lc == LC_RB_CT_REMOVE || sb->lc == LC_RM_CT_REMOVE) {
		sb->ct_exists = false;
		sb->running = false;
	} else {
		sb->net_exists = false;
	}
	teardown_next(sb, f);
}

static void refresh_done(struct sandbox *sb)
{
	enum rt_outcome o = sb->call.res.outcome;

	take_inspect(sb);
	set_state(sb, sb->lc == LC_READY_REFRESH ? LC_READY : LC_CONFLICT);
	if (o == RT_OK)
		HOOK(pid_known, sb);
	else if (o == RT_GONE)
		sb->pending |= LC_PEND_DESTROY;
}

/* ---- a claim of a warm sandbox ---- */

static int on_claim(struct sandbox *sb)
{
	if (sb->lc != LC_READY || !sb->pool || sb->call_active || !sb->running)
		return ERR_STATE;
	sb->pool = false;
	sb->created_ms = wall();
	sb->t_begin = mono();
	sb->deadline = mono() + lc.cfg->ready_timeout_ms;
	log_info("claim started", "name=%s pool_name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->agent_id), log_q(sb->instance_id), sb->uid);
	enter(sb, LC_CLAIM_RENAME);
	return 0;
}

/* The container has its new name: the claim is recorded (a restart finds a create, which it
 * rolls back), then told to the init. A name another container has leaves the warm sandbox
 * as it was, in the pool. */
static void claim_renamed(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;
	int r;

	if (res->outcome == RT_NAME_TAKEN) {
		log_info("claim refused: another container has the name; the warm sandbox stays",
			 "name=%s pool_name=%s", log_q(sb->name), log_q(sb->agent_id));
		snprintf(sb->error, sizeof(sb->error), "container rename failed: %s", res->text);
		policy_redact(sb->error, sizeof(sb->error));
		sb->err_status = 409;
		sb->err_code = "name_taken";
		sandbox_claim_undo(sb);
		sb->pool = true;
		sb->deadline = 0;
		set_state(sb, LC_READY);
		HOOK(claim_refused, sb);
		return;
	}
	if (res->outcome != RT_OK) {
		step_failed(sb, "container rename");
		return;
	}
	sb->claimed = true;
	set_state(sb, LC_CLAIM_INIT);
	if ((r = share_write_record(lc.cfg, sb)) != 0) {
		fail_create(sb, 500, "agentshare", "cannot write sandbox.json: %s", err_str(r));
		return;
	}
	HOOK(claim_send, sb);
}

/* A create step's call answered: the next step, or the rollback. */
static void create_step_done(struct sandbox *sb)
{
	const struct rt_result *res = &sb->call.res;
	char text[1024];
	int r;

	switch (sb->lc) {
	case LC_NET_CREATE:
		if (res->outcome == RT_OVERLAPS && sb->net_scans < LIMIT_SUBNET_SCANS) {
			log_info("subnet overlaps another network; reading the engine's networks",
				 "name=%s subnet=%s", log_q(sb->name), sb->subnet_text);
			sb->net_scans++;
			subnet_refused((uint32_t)sb->subnet);
			sb->subnet = -1;
			sb->subnet_text[0] = '\0';
			enter(sb, LC_NET_SCAN);
		} else if (res->outcome != RT_OK) {
			/* removed by its name, which is this create's own: RT_GONE is fine */
			sb->net_exists = may_exist(res);
			step_failed(sb, "network create");
		} else {
			memcpy(sb->network_id, res->id, sizeof(sb->network_id));
			sb->net_exists = true;
			sb->t_net = mono();
			enter(sb, LC_CT_CREATE);
		}
		break;
	case LC_NET_SCAN:
		scan_done(sb);
		break;
	case LC_CLAIM_RENAME:
		claim_renamed(sb);
		break;
	case LC_CT_CREATE:
		if (res->outcome != RT_OK) {
			sb->ct_maybe = may_exist(res);
			step_failed(sb, "container create");
			break;
		}
		memcpy(sb->container_id, res->id, sizeof(sb->container_id));
		sb->ct_exists = true;
		sb->t_ct = mono();
		sb->req = NULL;
		share_write_record(lc.cfg, sb);
		/* the engine binds the init's copy by its path at start: still agenticd's file */
		if (lc.init_id && !sb->vm &&
		    policy_init_check(lc.init_path, lc.init_id, text, sizeof(text)) != 0) {
			fail_create(sb, 500, "init_changed", "%s; the create was rolled back", text);
			break;
		}
		enter(sb, LC_CT_START);
		break;
	case LC_CT_START:
		if (res->outcome != RT_OK) {
			step_failed(sb, "container start");
			break;
		}
		sb->running = true;
		sb->t_start = mono();
		/* ready_timeout_ms is the init's time: it starts with the container (a VM's
		 * with its QEMU: the guest's boot is in it) */
		sb->deadline = mono() + (sb->vm ? lc.cfg->vm_ready_timeout_ms
					       : lc.cfg->ready_timeout_ms);
		enter(sb, LC_CT_INSPECT);
		break;
	default: /* LC_CT_INSPECT */
		if (res->outcome != RT_OK && res->outcome != RT_UNREADABLE) {
			step_failed(sb, "container inspect");
			break;
		}
		take_inspect(sb);
		if (!sb->running) {
			fail_create(sb, 500, "init_exited", "the sandbox's init exited (status %lld) "
				    "before it was ready", (long long)sb->exit_code);
			break;
		}
		/* before the agent is authed, so before READY and the workload's first command */
		if ((r = sandbox_check_binds(sb, sb->vm ? NULL : lc.init_id, text,
					     sizeof(text))) != 0) {
			fail_create(sb, r == -EPERM ? 422 : 500, r == -EPERM ? "refused" : "mount_check",
				    "%s; the create was rolled back", text);
			break;
		}
		set_state(sb, LC_WAIT_READY);
		lifecycle_network_read(sb, &res->net);
		HOOK(pid_known, sb);  /* may bring AGENT_READY (nested) at once */
		if (sb->lc == LC_WAIT_READY && sb->agent_ready)
			finish_create(sb);
		break;
	}
}

static int on_call_done(struct sandbox *sb)
{
	if (!sb->call_active)
		return ERR_STATE;
	sb->call_active = false;
	sb->retry_at = 0;
	switch (sb->lc) {
	case LC_NET_SCAN:
	case LC_NET_CREATE:
	case LC_CT_CREATE:
	case LC_CT_START:
	case LC_CT_INSPECT:
	case LC_CLAIM_RENAME:
		create_step_done(sb);
		break;
	case LC_READY_REFRESH:
	case LC_CONFLICT_REFRESH:
		refresh_done(sb);
		break;
	case LC_RM_PENDING:
		take_inspect(sb);
		remove_steps(sb);
		break;
	case LC_RB_CT_FIND:
		find_done(sb);
		break;
	case LC_RB_LOGS:
		append_init_log(sb);
		enter(sb, LC_RB_CT_REMOVE);
		break;
	case LC_RM_STOP:
		sb->running = false;
		enter(sb, LC_RM_CT_REMOVE);
		break;
	case LC_RB_CT_REMOVE:
	case LC_RB_NET_REMOVE:
	case LC_RM_CT_REMOVE:
	case LC_RM_NET_REMOVE:
	case LC_GONE_NET_REMOVE:
		teardown_done(sb);
		break;
	default:
		broken(sb, "a call answered in a state that has none");
		break;
	}
	return 0;
}

/* ---- remove, and the container's own events ---- */

static int on_remove(struct sandbox *sb, bool force, bool keep_workspace)
{
	bool refreshing = sb->lc == LC_READY_REFRESH || sb->lc == LC_CONFLICT_REFRESH;
	enum family f = family_of(sb);

	if (f == F_NONE || sb->lc == LC_NEW)
		return ERR_STATE;
	if (f != F_READY && f != F_CONFLICT)
		return -EBUSY;
	if (refreshing && sb->retry_at) {
		/* its refresh waits for a retry: nothing runs, the remove goes ahead */
		sb->retry_at = 0;
		refreshing = false;
	}
	sb->force = force;
	sb->keep_workspace = keep_workspace;
	/* removing from here on: the record says so before any step runs */
	set_state(sb, LC_RM_PENDING);
	share_write_record(lc.cfg, sb);
	log_info("remove started", "name=%s instance=%s force=%d keep_workspace=%d",
		 log_q(sb->name), log_q(sb->instance_id), force, keep_workspace);
	HOOK(agent_drop, sb, "sandbox is being removed");
	if (!refreshing)
		remove_steps(sb);
	/* else the refresh's answer ends RM_PENDING, then the remove's steps begin */
	return 0;
}

static void on_destroy(struct sandbox *sb)
{
	enum family f = family_of(sb);

	sb->pending = 0;
	if (f == F_CREATE && sb->ct_exists) {
		sb->ct_exists = false;
		fail_create(sb, 500, "container_removed",
			    "the sandbox's container was removed while it was being created");
	} else if (f == F_READY || f == F_CONFLICT) {
		sb->ct_exists = false;
		sb->running = false;
		/* a warm sandbox's workspace holds nothing of anyone's */
		sb->keep_workspace = !sb->pool;
		set_state(sb, LC_GONE_NET_REMOVE);
		HOOK(agent_drop, sb, "container removed");
		teardown_next(sb, F_GONE);
	}
}

static void on_die(struct sandbox *sb)
{
	sb->running = false;
	HOOK(stopped, sb, "the sandbox's container stopped", "container_stopped");
	sb->pid = 0;
	sb->pid_ns[0] = '\0';
	if (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT)
		fail_create(sb, 500, "init_exited", "the sandbox's init exited before it was ready");
}

static void on_start(struct sandbox *sb)
{
	sb->running = true;
	if (sb->lc == LC_READY)
		enter(sb, LC_READY_REFRESH);
	else if (sb->lc == LC_CONFLICT)
		enter(sb, LC_CONFLICT_REFRESH);
}

/* A container event: now when no call runs, else once it is done. */
static int on_container(struct sandbox *sb, uint8_t bit)
{
	if (sb->lc == LC_FREE || !sb->ct_exists)
		return 0;
	if (sb->call_active) {
		sb->pending |= bit;
		return 0;
	}
	if (bit == LC_PEND_DESTROY)
		on_destroy(sb);
	else if (bit == LC_PEND_DIE)
		on_die(sb);
	else
		on_start(sb);
	return 0;
}

/* What the container did while the sandbox's call ran: a destroy outweighs the rest. */
static void drain(struct sandbox *sb)
{
	while (sb->pending && !sb->call_active && sb->lc != LC_FREE) {
		uint8_t bit = sb->pending & LC_PEND_DESTROY ? LC_PEND_DESTROY
			      : sb->pending & LC_PEND_DIE ? LC_PEND_DIE : LC_PEND_START;

		sb->pending &= (uint8_t)~bit;
		on_container(sb, bit);
	}
}

/* ---- the one entry ---- */

static int dispatch(struct sandbox *sb, const struct lc_event *ev)
{
	switch (ev->kind) {
	case LC_EV_CREATE:
		return on_create(sb, ev->req);
	case LC_EV_REMOVE:
		return on_remove(sb, ev->force, ev->keep_workspace);
	case LC_EV_CALL_DONE:
		return on_call_done(sb);
	case LC_EV_AGENT_READY:
		if (sb->lc == LC_WAIT_READY || family_of(sb) == F_READY)
			HOOK(agent_ready, sb);
		/* a VM's env and credentials are in place before it is ready (LC_EV_CLAIMED) */
		if (sb->lc == LC_WAIT_READY && !vm_of(sb)->claim_owed)
			finish_create(sb);
		else if (family_of(sb) == F_READY) /* idle or refreshing: both are ready */
			log_info("agent ready again", "name=%s instance=%s uid=%u", log_q(sb->name),
				 log_q(sb->instance_id), sb->uid);
		return 0;
	case LC_EV_AGENT_LOST:
		return 0;
	case LC_EV_CT_START:
		return on_container(sb, LC_PEND_START);
	case LC_EV_CT_DIE:
		return on_container(sb, LC_PEND_DIE);
	case LC_EV_CT_DESTROY:
		return on_container(sb, LC_PEND_DESTROY);
	case LC_EV_DEADLINE:
		if (sb->lc == LC_WAIT_READY && sb->deadline && mono() >= sb->deadline)
			fail_create(sb, 504, "not_ready", "the sandbox was not ready within %u ms "
				    "(%s): its init did not register and report READY",
				    sb->vm ? lc.cfg->vm_ready_timeout_ms : lc.cfg->ready_timeout_ms,
				    sb->vm ? "vm_ready_timeout_ms" : "ready_timeout_ms");
		else if (sb->lc == LC_CLAIM_INIT && sb->deadline && mono() >= sb->deadline)
			fail_create(sb, 504, "not_ready", "the warm sandbox's init did not take the "
				    "claim within %u ms (ready_timeout_ms)", lc.cfg->ready_timeout_ms);
		return 0;
	case LC_EV_CLAIM:
		return on_claim(sb);
	case LC_EV_CLAIMED:
		if (sb->lc == LC_WAIT_READY && sb->vm) {
			runtime_vm_claim_owed(sb, false);
			if (sb->agent_ready)
				finish_create(sb);
			return 0;
		}
		if (sb->lc != LC_CLAIM_INIT)
			return ERR_STATE;
		finish_create(sb);
		return 0;
	case LC_EV_CLAIM_REFUSED:
		if (sb->lc == LC_WAIT_READY && sb->vm) {
			runtime_vm_claim_owed(sb, false);
			fail_create(sb, 500, "init_refused", "the VM's init refused its env or "
				    "credentials: %s", ev->why ? ev->why : "no reason given");
			return 0;
		}
		if (sb->lc != LC_CLAIM_INIT)
			return ERR_STATE;
		fail_create(sb, 500, "init_refused", "the warm sandbox's init refused the claim: %s",
			    ev->why ? ev->why : "no reason given");
		return 0;
	case LC_EV_RETRY:
		if (!sb->call_active && sb->retry_at && mono() >= sb->retry_at && states[sb->lc].op) {
			sb->retry_at = 0;
			begin(sb);
		}
		return 0;
	case LC_EV_SHUTDOWN:
		if (family_of(sb) == F_CREATE && sb->lc != LC_NEW && !sb->call_active)
			fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
		return 0;
	case LC_EV_RECOVERED:
		if (sb->lc != LC_NEW || !sb->ct_exists || !sb->container_id[0])
			return ERR_STATE;
		set_state(sb, LC_READY);
		return 0;
	case LC_EV_CONFLICT:
		if (sb->lc != LC_NEW && sb->lc != LC_READY && sb->lc != LC_CONFLICT)
			return ERR_STATE;
		if (!sb->ct_exists)
			return ERR_STATE;
		set_state(sb, LC_CONFLICT);
		return 0;
	default:
		return -EINVAL;
	}
}

int lifecycle_on(struct sandbox *sb, const struct lc_event *ev)
{
	int r;

	depth++;
	r = dispatch(sb, ev);
	depth--;
	if (depth == 0) {
		drain(sb);
		lifecycle_check(sb);
	}
	return r;
}

/* ---- the runtime's reports ---- */

static void sink_call_done(void *ctx, struct rt_call *c)
{
	(void)ctx;
	if (lc.pool && c == &lc.pool->call) {
		netpool_done(lc.pool, mono());
		pool_fill();
		return;
	}
	if (c->slot < lc.nsb && c == &lc.sb[c->slot].call)
		lifecycle_signal(&lc.sb[c->slot], LC_EV_CALL_DONE);
}

/* Its own network, as it was made (its id), else as the create named it (a name, or an
 * id's prefix). A name is no proof once the id is known: the engine lets a second network
 * take the same name (CheckDuplicate false), and connecting that one shows its name alone. */
static bool own_network(const struct sandbox *sb, const char *name, const char *id)
{
	size_t n = strlen(sb->network);

	if (sb->network_id[0])
		return id && strcmp(id, sb->network_id) == 0;
	if (name && strcmp(name, sb->network) == 0)
		return true;
	return id && n > 0 && strspn(sb->network, "0123456789abcdef") == n &&
	       strncmp(id, sb->network, n) == 0;
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

/* What was done to a container behind the lifecycle's back taints it now, whatever its
 * state (its state changes not). Its life is acted on at the end of the loop's turn
 * (lifecycle_tick), after the call that read it is done, as the flags it sets ask. */
static void sink_event(void *ctx, const struct rt_notice *n)
{
	struct sandbox *sb;

	(void)ctx;
	if (!(sb = sandbox_by_container(n->container_id)) || sb->lc == LC_FREE)
		return;
	switch (n->ev) {
	case RT_EV_START:
	case RT_EV_DIE:
	case RT_EV_DESTROY:
		sb->pending |= n->ev == RT_EV_START ? LC_PEND_START : n->ev == RT_EV_DIE
			       ? LC_PEND_DIE : LC_PEND_DESTROY;
		events_dirty = true;
		return;
	case RT_EV_NET_CONNECT:
		if (own_network(sb, n->net_name, n->net_id))
			return;
		/* its network is no longer its own alone, as an inspect would read it now */
		HOOK(network_read, sb, false, "other_network");
		HOOK(tainted, sb, n->ev, n->source);
		return;
	case RT_EV_CHANGED:
		/* a claim's own rename: from the pool name to the claimed one */
		if ((sb->claimed || sb->lc == LC_CLAIM_RENAME) && n->old_name && n->new_name &&
		    strcmp(n->old_name, sb->agent_id) == 0 &&
		    strcmp(n->new_name, sb->name) == 0)
			return;
		HOOK(tainted, sb, n->ev, n->source);
		return;
	case RT_EV_EXEC:
		HOOK(tainted, sb, n->ev, n->source);
		return;
	}
}

void lifecycle_start(const struct lifecycle_config *cfg)
{
	lc = *cfg;
	if (!lc.hooks)
		lc.hooks = &no_hooks;
	stopping = false;
	warm_retry_at = 0;
	depth = 0;
	events_dirty = false;
	lc.rt->sink = (struct runtime_sink){ .call_done = sink_call_done, .event = sink_event };
}

void lifecycle_tick(int64_t now)
{
	lc.rt->ops->tick(lc.rt->self, now);
	for (uint32_t i = 0; i < lc.nsb; i++) {
		struct sandbox *sb = &lc.sb[i];

		if (sb->lc == LC_FREE)
			continue;
		if (sb->deadline && now >= sb->deadline &&
		    (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT))
			lifecycle_signal(sb, LC_EV_DEADLINE);
		if (sb->retry_at && now >= sb->retry_at && !sb->call_active)
			lifecycle_signal(sb, LC_EV_RETRY);
	}
	if (events_dirty) {
		events_dirty = false;
		for (uint32_t i = 0; i < lc.nsb; i++)
			if (lc.sb[i].pending && !lc.sb[i].call_active) {
				drain(&lc.sb[i]);
				lifecycle_check(&lc.sb[i]);
			}
	}
	pool_fill();
	warm_fill();
}

int64_t lifecycle_next_deadline(int64_t now)
{
	int64_t next = lc.rt->ops->next_deadline(lc.rt->self, now);

	for (uint32_t i = 0; i < lc.nsb; i++) {
		const struct sandbox *sb = &lc.sb[i];

		if (sb->lc == LC_FREE || sb->call_active)
			continue;
		if (sb->deadline && (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT) &&
		    sb->deadline < next)
			next = sb->deadline;
		if (sb->retry_at && sb->retry_at < next)
			next = sb->retry_at;
	}
	if (lc.pool) {
		int64_t p = netpool_next_deadline(lc.pool, now);

		if (p < next)
			next = p;
	}
	{
		uint32_t have;

		if (lc.cfg->warm_sandboxes && !stopping && !creates_running() && warm_wanted(&have)) {
			int64_t w = warm_retry_at > now ? warm_retry_at : now;

			if (w < next)
				next = w;
		}
	}
	if (events_dirty)
		next = now;
	return next;
}

bool lifecycle_busy(void)
{
	for (uint32_t i = 0; i < lc.nsb; i++) {
		const struct sandbox *sb = &lc.sb[i];

		if (sb->state == SB_CREATING || (sb->state == SB_REMOVING && sb->lc != LC_GONE_NET_REMOVE) ||
		    sb->call_active)
			return true;
	}
	return lc.pool && netpool_busy(lc.pool);
}

void lifecycle_shutdown(void)
{
	stopping = true;
	lc.rt->ops->stop(lc.rt->self);
	for (uint32_t i = 0; i < lc.nsb; i++) {
		struct sandbox *sb = &lc.sb[i];

		if (sb->lc == LC_FREE)
			continue;
		lifecycle_signal(sb, LC_EV_SHUTDOWN);
		/* a warm sandbox holds no one's work: it goes with agenticd rather than keep its
		 * workspace mounted (a loop device, its disk budget) for a daemon that may never
		 * come back */
		if (sb->pool && (family_of(sb) == F_READY || family_of(sb) == F_CONFLICT)) {
			log_info("warm sandbox removed at stop", "name=%s instance=%s",
				 log_q(sb->name), log_q(sb->instance_id));
			lifecycle_remove(sb, true, false);
		}
	}
}
