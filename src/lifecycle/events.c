/* events.c: a sandbox's life as one state machine (lifecycle.h): the one entry and its events,
 * the runtime's reports, the loop's turn with the warm pool, start and shutdown. The states
 * and their steps are steps.c's, a create's create.c's, a sandbox going teardown.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_vm.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/steps.h"
#include "sandbox/posture.h"

static uint32_t depth;      /* lifecycle_on nesting: a hook feeding an event back */
static bool events_dirty;   /* the runtime reported container events: drain them on the tick */
/* A warm sandbox's create asks for nothing: the default image and resources, no env */
static struct create_req warm_req;
static const struct lifecycle_hooks no_hooks;

/* The warm pool (warm_sandboxes): one warm sandbox made at a time, after the creates that
 * wait for an answer; a ready one that is no longer T1 (a `docker exec` into it, its
 * network changed) is removed, never handed out. Called from the tick only, never from
 * inside an event. */
static bool warm_wanted(uint32_t *have)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		const struct sandbox *sb = &lc_conf.sb[i];

		if (!sb->pool || sb->lc == LC_FREE || lifecycle_going(sb))
			continue;
		if (lc_family_of(sb) == F_CREATE)
			return false; /* one at a time */
		n++;
	}
	*have = n;
	return n < lc_conf.cfg->warm_sandboxes;
}

static void warm_fill(void)
{
	struct sandbox *sb;
	uint32_t have;

	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		sb = &lc_conf.sb[i];
		if (sb->pool && sb->lc == LC_READY && !lc_of(sb)->call_active &&
		    (sb->posture.taints || !posture_is_t1(&sb->posture))) {
			log_warn("warm sandbox no longer T1; removing it", "name=%s tier=%s",
				 log_q(sb->name), posture_tier(&sb->posture));
			lifecycle_remove(sb, true, false);
		}
	}
	if (!lc_conf.cfg->warm_sandboxes || lc_stopping || lc_mono() < lc_warm_retry_at ||
	    lc_mono() < lc_pool_hold_until || lc_creates_running() || !warm_wanted(&have) ||
	    !(sb = sandbox_new()))
		return;
	do
		lifecycle_new_id(sb->name);
	while (sandbox_by_name(sb->name) != sb);
	memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
	sb->pool = true;
	log_info("warm sandbox create", "name=%s warm=%u wanted=%u", log_q(sb->name), have,
		 lc_conf.cfg->warm_sandboxes);
	lifecycle_create(sb, &warm_req);
}

/* ---- a call answered ---- */

static int on_call_done(struct sandbox *sb)
{
	if (!lc_of(sb)->call_active)
		return ERR_STATE;
	lc_slot(sb)->call_active = false;
	sb->retry_at = 0;
	switch (sb->lc) {
	case LC_NET_SCAN:
	case LC_NET_CREATE:
	case LC_CT_CREATE:
	case LC_CT_START:
	case LC_CT_INSPECT:
	case LC_CLAIM_RENAME:
		lc_create_step_done(sb);
		break;
	case LC_READY_REFRESH:
	case LC_CONFLICT_REFRESH:
		lc_refresh_done(sb);
		break;
	case LC_RM_PENDING:
		lc_take_inspect(sb);
		lc_remove_steps(sb);
		break;
	case LC_RB_CT_FIND:
		lc_find_done(sb);
		break;
	case LC_RB_LOGS:
		lc_append_init_log(sb);
		lc_enter(sb, LC_RB_CT_REMOVE);
		break;
	case LC_RM_STOP:
		sb->running = false;
		lc_enter(sb, LC_RM_CT_REMOVE);
		break;
	case LC_RB_CT_REMOVE:
	case LC_RB_NET_REMOVE:
	case LC_RM_CT_REMOVE:
	case LC_RM_NET_REMOVE:
	case LC_GONE_NET_REMOVE:
		lc_teardown_done(sb);
		break;
	default:
		lc_broken(sb, "a call answered in a state that has none");
		break;
	}
	return 0;
}

/* ---- the one entry ---- */

static int on_agent_ready(struct sandbox *sb)
{
	if (sb->lc == LC_WAIT_READY || lc_family_of(sb) == F_READY)
		HOOK(agent_ready, sb);
	/* a VM's env and credentials are in place before it is ready (LC_EV_CLAIMED) */
	if (sb->lc == LC_WAIT_READY && !vm_of(sb)->claim_owed)
		lc_finish_create(sb);
	else if (lc_family_of(sb) == F_READY) /* idle or refreshing: both are ready */
		log_info("agent ready again", "name=%s instance=%s uid=%u", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid);
	return 0;
}

static int on_deadline(struct sandbox *sb)
{
	const struct config *cfg = lc_conf.cfg;

	if (sb->lc == LC_WAIT_READY && sb->deadline && lc_mono() >= sb->deadline)
		lc_fail_create(sb, 504, "not_ready", "the sandbox was not ready within %u ms "
			       "(%s): its init did not register and report READY",
			       sb->vm ? cfg->vm_ready_timeout_ms : cfg->ready_timeout_ms,
			       sb->vm ? "vm_ready_timeout_ms" : "ready_timeout_ms");
	else if (sb->lc == LC_CLAIM_INIT && sb->deadline && lc_mono() >= sb->deadline)
		lc_fail_create(sb, 504, "not_ready", "the warm sandbox's init did not take the "
			       "claim within %u ms (ready_timeout_ms)", cfg->ready_timeout_ms);
	return 0;
}

static int on_claimed(struct sandbox *sb)
{
	if (sb->lc == LC_WAIT_READY && sb->vm) {
		runtime_vm_claim_owed(sb, false);
		if (lifecycle_agent_ready(lc_conf.hooks, sb))
			lc_finish_create(sb);
		return 0;
	}
	if (sb->lc != LC_CLAIM_INIT)
		return ERR_STATE;
	lc_finish_create(sb);
	return 0;
}

static int on_claim_refused(struct sandbox *sb, const char *why)
{
	if (sb->lc == LC_WAIT_READY && sb->vm) {
		runtime_vm_claim_owed(sb, false);
		lc_fail_create(sb, 500, "init_refused", "the VM's init refused its env or "
			       "credentials: %s", why ? why : "no reason given");
		return 0;
	}
	if (sb->lc != LC_CLAIM_INIT)
		return ERR_STATE;
	lc_fail_create(sb, 500, "init_refused", "the warm sandbox's init refused the claim: %s",
		       why ? why : "no reason given");
	return 0;
}

static int on_retry(struct sandbox *sb)
{
	if (!lc_of(sb)->call_active && sb->retry_at && lc_mono() >= sb->retry_at &&
	    lc_states[sb->lc].op) {
		sb->retry_at = 0;
		lc_begin(sb);
	}
	return 0;
}

static int on_conflict(struct sandbox *sb)
{
	if (sb->lc != LC_NEW && sb->lc != LC_READY && sb->lc != LC_CONFLICT)
		return ERR_STATE;
	if (!sb->ct_exists)
		return ERR_STATE;
	lc_set_state(sb, LC_CONFLICT);
	return 0;
}

static int dispatch(struct sandbox *sb, const struct lc_event *ev)
{
	switch (ev->kind) {
	case LC_EV_CREATE:
		return lc_on_create(sb, ev->req);
	case LC_EV_REMOVE:
		return lc_on_remove(sb, ev->force, ev->keep_workspace);
	case LC_EV_CALL_DONE:
		return on_call_done(sb);
	case LC_EV_AGENT_READY:
		return on_agent_ready(sb);
	case LC_EV_AGENT_LOST:
		return 0;
	case LC_EV_CT_START:
		return lc_on_container(sb, LC_PEND_START);
	case LC_EV_CT_DIE:
		return lc_on_container(sb, LC_PEND_DIE);
	case LC_EV_CT_DESTROY:
		return lc_on_container(sb, LC_PEND_DESTROY);
	case LC_EV_DEADLINE:
		return on_deadline(sb);
	case LC_EV_CLAIM:
		return lc_on_claim(sb);
	case LC_EV_CLAIMED:
		return on_claimed(sb);
	case LC_EV_CLAIM_REFUSED:
		return on_claim_refused(sb, ev->why);
	case LC_EV_RETRY:
		return on_retry(sb);
	case LC_EV_SHUTDOWN:
		if (lc_family_of(sb) == F_CREATE && sb->lc != LC_NEW && !lc_of(sb)->call_active)
			lc_fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
		return 0;
	case LC_EV_RECOVERED:
		if (sb->lc != LC_NEW || !sb->ct_exists || !sb->container_id[0])
			return ERR_STATE;
		lc_set_state(sb, LC_READY);
		return 0;
	case LC_EV_CONFLICT:
		return on_conflict(sb);
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
		lc_drain(sb);
		lifecycle_check(sb);
	}
	return r;
}

/* ---- the runtime's reports ---- */

static void sink_call_done(void *ctx, struct rt_call *c)
{
	(void)ctx;
	if (lc_conf.pool && c == &lc_conf.pool->call) {
		netpool_done(lc_conf.pool, lc_mono());
		lc_pool_fill();
		return;
	}
	if (c->slot < lc_conf.nsb && c == &lc_conf.slots[c->slot].call)
		lifecycle_signal(&lc_conf.sb[c->slot], LC_EV_CALL_DONE);
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
	lc_conf = *cfg;
	ASSERT(lc_conf.slots && lc_conf.nsb == sandbox_slots());
	memset(lc_conf.slots, 0, lc_conf.nsb * sizeof(*lc_conf.slots));
	if (!lc_conf.hooks)
		lc_conf.hooks = &no_hooks;
	lc_stopping = false;
	lc_warm_retry_at = 0;
	lc_pool_hold_until = 0;
	depth = 0;
	events_dirty = false;
	lc_conf.rt->sink = (struct runtime_sink){ .call_done = sink_call_done, .event = sink_event };
}

/* A ready sandbox past its expiry (its TTL) is removed, forced, with no one waiting. */
static void expire(struct sandbox *sb, int64_t wall)
{
	if (!sb->expires_at || wall < sb->expires_at || lc_family_of(sb) != F_READY || lc_stopping)
		return;
	log_info("sandbox expired", "name=%s instance=%s late_ms=%lld", log_q(sb->name),
		 log_q(sb->instance_id), (long long)(wall - sb->expires_at));
	sandbox_waiter_set(sb, SB_WAITER_ADMIN, -1, sb->waiter_gen);
	lifecycle_remove(sb, true, false);
}

void lifecycle_tick(int64_t now)
{
	int64_t wall = lc_wall();

	lc_conf.rt->ops->tick(lc_conf.rt->self, now);
	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		struct sandbox *sb = &lc_conf.sb[i];

		if (sb->lc == LC_FREE)
			continue;
		if (sb->deadline && now >= sb->deadline &&
		    (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT))
			lifecycle_signal(sb, LC_EV_DEADLINE);
		if (sb->retry_at && now >= sb->retry_at && !lc_of(sb)->call_active)
			lifecycle_signal(sb, LC_EV_RETRY);
		expire(sb, wall);
	}
	if (events_dirty) {
		events_dirty = false;
		for (uint32_t i = 0; i < lc_conf.nsb; i++)
			if (lc_conf.sb[i].pending && !lc_of(&lc_conf.sb[i])->call_active) {
				lc_drain(&lc_conf.sb[i]);
				lifecycle_check(&lc_conf.sb[i]);
			}
	}
	lc_pool_fill();
	warm_fill();
}

int64_t lifecycle_next_deadline(int64_t now)
{
	int64_t next = lc_conf.rt->ops->next_deadline(lc_conf.rt->self, now);
	int64_t wall = lc_wall();

	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		const struct sandbox *sb = &lc_conf.sb[i];

		/* the sandbox's own fields first: an idle one's lifecycle entry is not read */
		if (sb->lc == LC_FREE || (!sb->expires_at && !sb->deadline && !sb->retry_at) ||
		    lc_of(sb)->call_active)
			continue;
		if (sb->expires_at && lc_family_of(sb) == F_READY && !lc_stopping) {
			int64_t e = now + (sb->expires_at > wall ? sb->expires_at - wall : 0);

			if (e < next)
				next = e;
		}
		if (sb->deadline && (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT) &&
		    sb->deadline < next)
			next = sb->deadline;
		if (sb->retry_at && sb->retry_at < next)
			next = sb->retry_at;
	}
	if (lc_conf.pool) {
		int64_t p = netpool_next_deadline(lc_conf.pool, now);

		if (p < next)
			next = p;
	}
	{
		uint32_t have;

		if (lc_conf.cfg->warm_sandboxes && !lc_stopping && !lc_creates_running() && warm_wanted(&have)) {
			int64_t w = lc_warm_retry_at > now ? lc_warm_retry_at : now;

			/* held after a claim: not before the hold ends (or its command does) */
			if (lc_pool_hold_until > w)
				w = lc_pool_hold_until;
			if (w < next)
				next = w;
		}
	}
	if (lc_pool_hold_until > now && lc_pool_hold_until < next)
		next = lc_pool_hold_until; /* the pools' hold ends: their turn */
	if (events_dirty)
		next = now;
	return next;
}

bool lifecycle_busy(void)
{
	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		const struct sandbox *sb = &lc_conf.sb[i];

		if (sb->state == SB_CREATING || (sb->state == SB_REMOVING && sb->lc != LC_GONE_NET_REMOVE) ||
		    lc_of(sb)->call_active)
			return true;
	}
	return lc_conf.pool && netpool_busy(lc_conf.pool);
}

void lifecycle_shutdown(void)
{
	lc_stopping = true;
	lc_conf.rt->ops->stop(lc_conf.rt->self);
	for (uint32_t i = 0; i < lc_conf.nsb; i++) {
		struct sandbox *sb = &lc_conf.sb[i];

		if (sb->lc == LC_FREE)
			continue;
		lifecycle_signal(sb, LC_EV_SHUTDOWN);
		/* a warm sandbox holds no one's work: it goes with agenticd rather than keep its
		 * workspace mounted (a loop device, its disk budget) for a daemon that may never
		 * come back */
		if (sb->pool && (lc_family_of(sb) == F_READY || lc_family_of(sb) == F_CONFLICT)) {
			log_info("warm sandbox removed at stop", "name=%s instance=%s",
				 log_q(sb->name), log_q(sb->instance_id));
			lifecycle_remove(sb, true, false);
		}
	}
}
