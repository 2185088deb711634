/* keep.c: what a create or a claim keeps with its sandbox (lifecycle.h): the request's cmd,
 * labels, mounts, posture, policy and expiry (its TTL), a claim's env, and the sandbox's name. The admin API
 * calls these before it hands the sandbox to the lifecycle; the record is the lifecycle's to
 * write. */
#include <stdio.h>
#include <string.h>

#include "lifecycle/lifecycle.h"
#include "lifecycle/steps.h"
#include "lifecycle/taint.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"

/* The request's cmd, labels and mounts, kept with the sandbox. */
int lifecycle_keep_request(struct sandbox *sb, const struct create_req *req, bool hw)
{
	int r = 0;

	for (uint32_t i = 0; r == 0 && i < req->ncmd; i++)
		r = strrun_add(sb->cmd, &sb->cmd_len, sizeof(sb->cmd), req->cmd[i]);
	for (uint32_t i = 0; r == 0 && i < req->nlabels; i++) {
		r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels), req->labels[i].key);
		if (r == 0)
			r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels),
				       req->labels[i].value);
	}
	for (uint32_t i = 0; r == 0 && i < req->nmounts; i++) {
		r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts), req->mounts[i].source);
		if (r == 0)
			r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts),
				       req->mounts[i].target);
		if (req->mounts[i].read_only)
			sb->mount_ro |= 1u << i;
		sb->mount_id[i] = req->mount_id[i];
	}
	posture_from_request(&sb->posture, req);
	if (hw)
		sb->posture.isolation = POSTURE_VM_HARDWARE;
	memcpy(sb->egress_json, req->egress_json, sizeof(sb->egress_json));
	/* report mode lets out what enforce would not: T0 from the first connection on */
	if (req->egress_json[0] && req->egress_report)
		posture_taint(sb, POSTURE_EGRESS_REPORT_ONLY, "create");
	sb->ncmd = (uint16_t)req->ncmd;
	sb->nlabels = (uint16_t)req->nlabels;
	sb->nmounts = (uint16_t)req->nmounts;
	sb->ttl_ms = req->ttl_ms; /* from the moment it is ready (lc_finish_create) */
	if (req->expires_at > 0)
		sb->expires_at = req->expires_at;
	return r;
}

/* The claim's request kept with the sandbox, as a cold create keeps it (lifecycle_keep_request), but
 * the engine's view of its network, read when it was made, stays; its env is kept to be
 * given to the init. 0, or -1 (too long to keep: nothing is claimed). */
int lifecycle_keep_claim(struct sandbox *sb, const struct create_req *req, bool hw)
{
	struct posture was = sb->posture;
	int r = lifecycle_keep_request(sb, req, hw);

	sb->posture.net_checked = was.net_checked;
	sb->posture.net_ok = was.net_ok;
	sb->posture.taints = was.taints;
	memcpy(sb->posture.taint_ms, was.taint_ms, sizeof(was.taint_ms));
	for (uint32_t i = 0; r == 0 && i < req->nenv; i++)
		r = strrun_add(sb->claim_env, &sb->claim_env_len, sizeof(sb->claim_env), req->env[i]);
	sb->nclaim_env = (uint16_t)req->nenv;
	if (r != 0) {
		sandbox_claim_undo(sb);
		return -1;
	}
	return 0;
}

int lifecycle_expiry_set(struct sandbox *sb, int64_t at_ms)
{
	int r;

	sb->expires_at = at_ms > 0 ? at_ms : 0;
	if (sb->state != SB_READY || !sb->dir_made)
		return 0;
	if ((r = sandbox_record_write(lc_conf.cfg, sb)) != 0)
		log_warn("sandbox record not written", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	return r;
}

int64_t lifecycle_expiry(const struct sandbox *sb)
{
	return sb->expires_at;
}

void lifecycle_new_id(char *id)
{
	static const char al[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	uint8_t r[LIFECYCLE_ID_BYTES - 2];

	random_bytes(r, sizeof(r));
	id[0] = 'i';
	for (size_t i = 0; i < sizeof(r); i++)
		id[i + 1] = al[r[i] % 36];
	id[LIFECYCLE_ID_BYTES - 1] = '\0';
}

/* The create's name, else sbx-<8 hex> that no other sandbox has (sb may be a warm one, which
 * sandbox_by_name never finds). */
void lifecycle_name(struct sandbox *sb, const char *name, bool agent_id)
{
	const struct sandbox *o;
	char hex[16];

	if (name) {
		snprintf(sb->name, sizeof(sb->name), "%s", name);
	} else {
		do {
			random_hex(hex, 8);
			snprintf(sb->name, sizeof(sb->name), "sbx-%s", hex);
		} while ((o = sandbox_by_name(sb->name)) && o != sb);
	}
	if (agent_id)
		memcpy(sb->agent_id, sb->name, sizeof(sb->agent_id));
}
