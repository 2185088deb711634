/* teardown.c: a sandbox going (lifecycle.h): the answers of rollback, remove and refresh
 * calls, a remove begun, and the container's own events (start, die, destroy). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/steps.h"
#include "sandbox/reqcheck.h"

/* Appends the init's last log lines (scrubbed) to a failed create's error. */
void lc_append_init_log(struct sandbox *sb)
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

/* The rollback's look for a container its create may have made: only one carrying this
 * create's instance label is its own (the name may be another's since). */
void lc_find_done(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;

	if (res->outcome != RT_OK && res->outcome != RT_GONE) {
		log_error("teardown step failed; retrying", "name=%s step=%s error=%s",
			  log_q(sb->name), lifecycle_state_name(sb->lc), log_q(res->text));
		sb->retry_at = lc_mono() + RETRY_MS;
		return;
	}
	sb->ct_maybe = false;
	if (res->outcome == RT_OK && strcmp(res->instance_id, sb->instance_id) == 0) {
		log_warn("container made though its create failed; removing it", "name=%s "
			 "instance=%s", log_q(sb->name), log_q(sb->instance_id));
		memcpy(sb->container_id, res->id, sizeof(sb->container_id));
		sb->ct_exists = true;
		lc_enter(sb, LC_RB_CT_REMOVE);
		return;
	}
	lc_teardown_next(sb, F_ROLLBACK);
}

void lc_remove_steps(struct sandbox *sb)
{
	if (sb->ct_exists && !sb->force && sb->running)
		lc_enter(sb, LC_RM_STOP);
	else
		lc_teardown_next(sb, F_REMOVE);
}

void lc_teardown_done(struct sandbox *sb)
{
	const struct rt_result *res = &lc_of(sb)->call.res;
	enum lc_family f = lc_family_of(sb);

	if (res->outcome != RT_OK && res->outcome != RT_GONE) {
		log_error("teardown step failed; retrying", "name=%s step=%s error=%s",
			  log_q(sb->name), lifecycle_state_name(sb->lc), "\"see next line\"");
		log_error("engine said", "name=%s message=%s", log_q(sb->name), log_q(res->text));
		sb->retry_at = lc_mono() + RETRY_MS;
		return;
	}
	if (sb->lc == LC_RB_CT_REMOVE || sb->lc == LC_RM_CT_REMOVE) {
		sb->ct_exists = false;
		sb->running = false;
	} else {
		sb->net_exists = false;
	}
	lc_teardown_next(sb, f);
}

void lc_refresh_done(struct sandbox *sb)
{
	enum rt_outcome o = lc_of(sb)->call.res.outcome;

	lc_take_inspect(sb);
	lc_set_state(sb, sb->lc == LC_READY_REFRESH ? LC_READY : LC_CONFLICT);
	if (o == RT_OK)
		HOOK(pid_known, sb);
	else if (o == RT_GONE)
		sb->pending |= LC_PEND_DESTROY;
}

/* ---- remove, and the container's own events ---- */

int lc_on_remove(struct sandbox *sb, bool force, bool keep_workspace)
{
	bool refreshing = sb->lc == LC_READY_REFRESH || sb->lc == LC_CONFLICT_REFRESH;
	enum lc_family f = lc_family_of(sb);

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
	lc_set_state(sb, LC_RM_PENDING);
	sandbox_record_write(lc_conf.cfg, sb);
	log_info("remove started", "name=%s instance=%s force=%d keep_workspace=%d",
		 log_q(sb->name), log_q(sb->instance_id), force, keep_workspace);
	HOOK(agent_drop, sb, "sandbox is being removed");
	if (!refreshing)
		lc_remove_steps(sb);
	/* else the refresh's answer ends RM_PENDING, then the remove's steps begin */
	return 0;
}

static void on_destroy(struct sandbox *sb)
{
	enum lc_family f = lc_family_of(sb);

	sb->pending = 0;
	if (f == F_CREATE && sb->ct_exists) {
		sb->ct_exists = false;
		lc_fail_create(sb, 500, "container_removed",
			    "the sandbox's container was removed while it was being created");
	} else if (f == F_READY || f == F_CONFLICT) {
		sb->ct_exists = false;
		sb->running = false;
		/* a warm sandbox's workspace holds nothing of anyone's */
		sb->keep_workspace = !sb->pool;
		lc_set_state(sb, LC_GONE_NET_REMOVE);
		HOOK(agent_drop, sb, "container removed");
		lc_teardown_next(sb, F_GONE);
	}
}

static void on_die(struct sandbox *sb)
{
	sb->running = false;
	HOOK(stopped, sb, "the sandbox's container stopped", "container_stopped");
	sb->pid = 0;
	sb->pid_ns[0] = '\0';
	if (sb->lc == LC_WAIT_READY || sb->lc == LC_CLAIM_INIT)
		lc_fail_create(sb, 500, "init_exited", "the sandbox's init exited before it was ready");
}

static void on_start(struct sandbox *sb)
{
	sb->running = true;
	if (sb->lc == LC_READY)
		lc_enter(sb, LC_READY_REFRESH);
	else if (sb->lc == LC_CONFLICT)
		lc_enter(sb, LC_CONFLICT_REFRESH);
}

/* A container event: now when no call runs, else once it is done. */
int lc_on_container(struct sandbox *sb, uint8_t bit)
{
	if (sb->lc == LC_FREE || !sb->ct_exists)
		return 0;
	if (lc_of(sb)->call_active) {
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
void lc_drain(struct sandbox *sb)
{
	while (sb->pending && !lc_of(sb)->call_active && sb->lc != LC_FREE) {
		uint8_t bit = sb->pending & LC_PEND_DESTROY ? LC_PEND_DESTROY
			      : sb->pending & LC_PEND_DIE ? LC_PEND_DIE : LC_PEND_START;

		sb->pending &= (uint8_t)~bit;
		lc_on_container(sb, bit);
	}
}
