/* taint.c: a live sandbox's posture changing (taint.h): the sticky taint or the network's
 * reading, then the log line, the trace event, sandbox.json and the counters. */
#include <errno.h>
#include <string.h>

#include "transcript/runlog.h"
#include "sandbox/sandbox.h"
#include "workspace/share.h"
#include "lifecycle/taint.h"

static uint64_t taints_total[POSTURE_REASONS];

uint64_t posture_taints_total(enum posture_reason r)
{
	return (unsigned)r < POSTURE_REASONS ? taints_total[r] : 0;
}

/* The change is logged and traced with the tier it left and the one it is in now. */
static void changed(struct sandbox *sb, const char *what, const char *reason, const char *source,
		    const char *was)
{
	const char *now = posture_tier(&sb->posture);
	const char *kv[] = { "reason", reason, "source", source, "tier", now, "was", was, NULL };
	int r;

	log_info("posture changed", "name=%s what=%s reason=%s source=%s tier=%s was=%s",
		 log_q(sb->name), what, reason, log_q(source), now, was);
	runlog_event_fields(sb, what, kv);
	if (sb->dir_made && (r = sandbox_record_write(sandbox_config(), sb)) != 0)
		log_warn("cannot write sandbox.json", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(r)));
}

int posture_taint(struct sandbox *sb, enum posture_reason r, const char *source)
{
	const char *was;

	if ((unsigned)r >= POSTURE_REASONS || r == POSTURE_NETWORK_UNVERIFIED)
		return -EINVAL;
	if (sb->posture.taints & POSTURE_BIT(r))
		return 0;
	was = posture_tier(&sb->posture);
	sb->posture.taints |= POSTURE_BIT(r);
	sb->posture.taint_ms[r] = clock_wall_ms();
	taints_total[r]++;
	changed(sb, "posture_taint", posture_reason_name(r), source, was);
	return 1;
}

void posture_set_network(struct sandbox *sb, bool ok, const char *why)
{
	const char *was = posture_tier(&sb->posture);
	bool first = !sb->posture.net_checked;
	bool before = sb->posture.net_checked && sb->posture.net_ok;

	sb->posture.net_checked = true;
	sb->posture.net_ok = ok;
	/* the first reading that bears out the network (at create, and at every start-up's
	 * recovery, which reads it again) is what was expected, no change */
	if (first && ok) {
		log_debug("sandbox network verified", "name=%s", log_q(sb->name));
		return;
	}
	if (before != ok && strcmp(was, posture_tier(&sb->posture)) != 0)
		changed(sb, "posture_network", ok ? "network_verified" : "network_unverified",
			why, was);
	else if (!ok)
		log_warn("sandbox network not the managed internal one", "name=%s why=%s",
			 log_q(sb->name), log_q(why));
}
