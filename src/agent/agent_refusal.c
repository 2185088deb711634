/* agent_refusal.c: the agent socket's refusals: counted for /metrics, and logged one line per
 * uid per LIMIT_AGENT_REFUSAL_LOG_MS, so that a flood of refused calls buries no other line. */
#include <stdio.h>

#include "agent/agent_slot.h"
#include "lifecycle/lifecycle.h"
#include "metrics/metrics.h"

static const char *const refusal_names[AGENT_REFUSAL_REASONS] = {
	"workload_uid", "unknown_uid", "uid_conflict", "removing", "not_init",
	"agent_id", "instance_id", "duplicate_stream", "registration",
};

const char *agent_refusal_name(int reason)
{
	return reason >= 0 && reason < AGENT_REFUSAL_REASONS ? refusal_names[reason] : "other";
}

/* ---- refusal lines: one per uid per LIMIT_AGENT_REFUSAL_LOG_MS ----
 * A flood of refused calls must not bury other lines: a uid's refusals after its line are
 * counted, and the count goes out with its next line (not_logged=N); at most
 * LIMIT_AGENT_REFUSAL_LOG_UIDS uids get a line per interval, the rest are counted together
 * (others_not_logged=N on the next line that goes out). Metrics count every refusal. */
struct refusal_note {
	uint32_t uid;
	int64_t at;     /* monotonic ms of its last line; 0: free */
	uint32_t held;
};

static struct refusal_note notes[LIMIT_AGENT_REFUSAL_LOG_UIDS];
static uint32_t others_held;

/* 1 when a refusal of uid is to be logged now, with *held of its own not logged before. */
static int refusal_due(uint32_t uid, uint32_t *held)
{
	int64_t now = clock_mono_ms();
	struct refusal_note *n = NULL, *spare = NULL;

	for (uint32_t i = 0; i < LIMIT_AGENT_REFUSAL_LOG_UIDS && !n; i++) {
		struct refusal_note *e = &notes[i];

		if (e->at && e->uid == uid)
			n = e;
		else if (!spare && (!e->at || now - e->at >= LIMIT_AGENT_REFUSAL_LOG_MS))
			spare = e;
	}
	if (n && now - n->at < LIMIT_AGENT_REFUSAL_LOG_MS) {
		n->held++;
		return 0;
	}
	if (!n) {
		if (!spare) {
			others_held++;
			return 0;
		}
		/* an expired uid's count would wait for its next refusal: it joins the others' */
		others_held += spare->held;
		n = spare;
		n->uid = uid;
		n->held = 0;
	}
	n->at = now;
	*held = n->held;
	n->held = 0;
	return 1;
}

void agent_refusal_note(int why, const struct grpc_peer *p, const char *reason)
{
	uint32_t held;
	char q[160];

	metrics_refusal(why);
	agent_nrefused++;
	if (!refusal_due(p->uid, &held))
		return;
	log_warn("agent refused", "uid=%u pid=%d reason=%s not_logged=%u others_not_logged=%u",
		 (unsigned)p->uid, (int)p->pid, log_quote(q, sizeof(q), reason), held, others_held);
	others_held = 0;
}

void agent_refuse(struct grpc_call *call, int why, const char *reason)
{
	agent_refusal_note(why, grpc_call_peer(call), reason);
	grpc_call_set_user(call, NULL);
	grpc_call_finish(call, GRPC_UNAUTHENTICATED, reason, NULL, 0);
}

/* A guest's Connect: why its peer was not admitted (as things stand now). */
void agent_refuse_guest(struct grpc_call *call, const struct grpc_peer *p)
{
	struct sandbox *sb = sandbox_by_uid(p->uid);

	if (p->uid == agent_cfg->workload_uid)
		agent_refuse(call, RF_WORKLOAD_UID, "the workload uid never maps to a sandbox");
	else if (!sb)
		agent_refuse(call, RF_UNKNOWN_UID, "unknown uid: no sandbox has it as its control uid");
	else if (sb->state == SB_CONFLICT)
		agent_refuse(call, RF_CONFLICT, "two containers claim this uid: neither is trusted");
	else if (lifecycle_going(sb))
		agent_refuse(call, RF_REMOVING, "the sandbox is being removed");
	else
		agent_refuse(call, RF_NOT_INIT, "the peer is not the sandbox's init");
}
