/* daemon_hooks.c: the lifecycle's hooks as agenticd wires them (agenticd_hooks): what a
 * sandbox's life reports to the parts above the lifecycle: the waiting client answered (the
 * admin API's or the E2B API's), the agent socket told, exec sessions, transcripts and the egress listener ended,
 * a taint traced once the sandbox's run is open. tests/sim runs these, with its own answers. */
#include "admin/admin.h"
#include "agent/agent.h"
#include "agent/exec.h"
#include "daemon/daemon.h"
#include "e2b/e2b.h"
#include "egress/broker.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/taint.h"
#include "metrics/metrics.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"

/* The front end waiting for sb's create or remove gets its answer. */
static void finish_sandbox(const struct sandbox *sb, int status)
{
	if (sb->waiter_kind == SB_WAITER_E2B)
		e2b_finish_sandbox(sb->waiter, sb->waiter_gen, sb, status);
	else
		admin_finish_sandbox(sb->waiter, sb->waiter_gen, sb, status);
}

static void finish_error(const struct sandbox *sb)
{
	if (sb->waiter_kind == SB_WAITER_E2B)
		e2b_finish_error(sb->waiter, sb->waiter_gen, sb->err_status, sb->err_code, sb->error);
	else
		admin_finish_error(sb->waiter, sb->waiter_gen, sb->err_status, sb->err_code,
				   sb->error);
}

static void hook_created(void *ctx, struct sandbox *sb, int64_t took_ms)
{
	(void)ctx;
	if (!sb->pool)
		metrics_provision(took_ms);
	finish_sandbox(sb, 201);
}

static void hook_claim_refused(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	finish_error(sb);
	sandbox_waiter_set(sb, sb->waiter_kind, -1, sb->waiter_gen);
}

static void hook_claim_send(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	agent_claim_send(sb);
}

static void hook_create_failed(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	finish_error(sb);
}

static void hook_removed(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	finish_sandbox(sb, 200);
}

static void hook_pid_known(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	agent_pid_known(sb);
}

static void hook_agent_drop(void *ctx, struct sandbox *sb, const char *why)
{
	(void)ctx;
	agent_drop(sb, why);
}

static void hook_stopped(void *ctx, struct sandbox *sb, const char *exec_why, const char *run_why)
{
	(void)ctx;
	egress_listener_stop(sb);
	e2b_sandbox_gone(sb);
	exec_sandbox_gone(sb, exec_why);
	runlog_stop(sb, run_why);
}

static void untraced_drop(const struct sandbox *sb);

static void hook_released(void *ctx, struct sandbox *sb)
{
	(void)ctx;
	agent_forget(sb);
	e2b_sandbox_gone(sb);
	egress_listener_drop(sb);
	untraced_drop(sb);
}

/* A taint seen while the sandbox's run is closed (the engine's events replayed after a
 * restart come before its agent is back) is logged and kept at once; its trace event waits
 * here for the run to open. */
static struct untraced {
	struct sandbox *sb;
	uint32_t gen;
	enum posture_reason reason;
	const char *source;           /* a fixed word */
} untraced[LIMIT_TAINTS_UNTRACED];
static uint32_t nuntraced;

static void hook_tainted(void *ctx, struct sandbox *sb, enum rt_event kind, const char *source)
{
	enum posture_reason r = kind == RT_EV_EXEC ? POSTURE_DIRECT_DOCKER_EXEC
				: kind == RT_EV_NET_CONNECT ? POSTURE_NETWORK_ATTACHED
				: POSTURE_CONTAINER_CHANGED;

	(void)ctx;
	if (posture_taint(sb, r, source) != 1 || transcript_of(sb)->run.open)
		return;
	if (nuntraced == LIMIT_TAINTS_UNTRACED) {
		log_warn("taint not traced: too many wait for their runs", "name=%s reason=%s",
			 log_q(sb->name), log_q(posture_reason_name(r)));
		return;
	}
	untraced[nuntraced++] = (struct untraced){ sb, sb->gen, r, source };
}

static void untraced_drop(const struct sandbox *sb)
{
	uint32_t k = 0;

	for (uint32_t i = 0; i < nuntraced; i++)
		if (untraced[i].sb != sb)
			untraced[k++] = untraced[i];
	nuntraced = k;
}

static void hook_agent_ready(void *ctx, struct sandbox *sb)
{
	uint32_t k = 0;

	(void)ctx;
	for (uint32_t i = 0; i < nuntraced; i++) {
		struct untraced *u = &untraced[i];
		const char *kv[] = { "reason", posture_reason_name(u->reason), "source", u->source,
				     "tier", posture_tier(&sb->posture), "traced", "when_run_opened",
				     NULL };

		if (u->sb != sb || !transcript_of(sb)->run.open) {
			untraced[k++] = *u;
			continue;
		}
		if (u->gen == sb->gen)
			runlog_event_fields(sb, "posture_taint", kv);
	}
	nuntraced = k;
}

/* An operator's network is T0 (operator_network) whatever the engine says of it; only its
 * other networks matter, and those come as a taint. */
static void hook_network_read(void *ctx, struct sandbox *sb, bool ok, const char *why)
{
	(void)ctx;
	if (sb->net_managed || sb->vm)
		posture_set_network(sb, ok, why);
}

const struct lifecycle_hooks agenticd_hooks = {
	.created = hook_created,
	.create_failed = hook_create_failed,
	.claim_refused = hook_claim_refused,
	.claim_send = hook_claim_send,
	.removed = hook_removed,
	.pid_known = hook_pid_known,
	.agent_drop = hook_agent_drop,
	.stopped = hook_stopped,
	.released = hook_released,
	.tainted = hook_tainted,
	.network_read = hook_network_read,
	.agent_ready = hook_agent_ready,
	.agent_is_ready = agent_is_ready,
	.secret_read = egress_secret_read,
	.secret_check = egress_secret_check,
};
