/* admin_sandbox.c: the admin API's sandbox routes: list, create (admitted by tier, a warm
 * sandbox claimed when one fits, else a cold create through the lifecycle), inspect, remove,
 * and a run's transcript (logs). Above admin_http.c; admin_v2.c's routes end in its create and
 * remove. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admin/admin_conn.h"
#include "egress/broker.h"
#include "egress/policy.h"
#include "lifecycle/lifecycle.h"
#include "sandbox/posture.h"
#include "sandbox/strrun.h"
#include "transcript/runlog.h"
#include "config/profiles.h"
#include "lifecycle/taint.h"

void admin_containers_list(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const char head[] = "{\"containers\":[";

	admin_list_start(c, head, sizeof(head) - 1, admin_sandbox_item, sandbox_slots());
}

/* ---- create ---- */

/* A VM on this host's hardware hypervisor (its posture says so). */
static bool hw_vm(const struct create_req *req)
{
	return req->vm && admin_state.ac.vm && strcmp(runtime_vm_accel(admin_state.ac.vm), "kvm") == 0;
}


/* Admission by tier: a create that would be T0 (posture_request_reasons: a raw credential in
 * its env, an operator network) while T1 is required (its require_tier, or min_tier = T1) is
 * refused, naming the reasons (fixed words, never a value), before a slot is taken or the
 * engine is asked anything. */
static int tier_refused(struct admin_conn *c, const struct create_req *req)
{
	uint16_t why = posture_request_reasons(req);
	char m[320], words[192];
	struct buf b;

	if (!why || !(req->require_t1 || admin_state.ac.cfg->min_tier_t1))
		return 0;
	buf_init(&b, words, sizeof(words));
	for (int i = 0; i < POSTURE_REASONS; i++)
		if (why & POSTURE_BIT(i))
			buf_printf(&b, "%s%s", b.len ? ", " : "", posture_reason_name(i));
	snprintf(m, sizeof(m), "T1 is required (%s) and this create would be T0: %s",
		 req->require_t1 ? "require_tier" : "min_tier", words);
	log_info("create refused", "reason=tier_refused required_by=%s reasons=%s",
		 req->require_t1 ? "require_tier" : "min_tier", log_q(words));
	admin_respond_error(c, 422, "tier_refused", m);
	return -1;
}

/* ---- a claim of a warm sandbox (docs/WARM_POOL.md) ---- */

/* The create asks for nothing a warm sandbox lacks: the default image and resources, no
 * mounts, network, writable root, egress policy or readiness probes, and an env that fits. */
static bool claim_fits(const struct create_req *req, const struct config *cfg)
{
	uint32_t env_bytes = 0;

	for (uint32_t i = 0; i < req->nenv; i++)
		env_bytes += (uint32_t)strlen(req->env[i]) + 1;
	return cfg->warm_sandboxes && (!req->image || strcmp(req->image, cfg->default_image) == 0) &&
	       !req->vm && !req->network && !req->nmounts && !req->writable_root &&
	       !req->egress_json[0] &&
	       !req->nprobes && env_bytes <= LIMIT_SANDBOX_CLAIM_ENV_BYTES &&
	       (!req->disk_bytes || req->disk_bytes == cfg->default_disk_bytes) &&
	       (!req->transcript_bytes || req->transcript_bytes == cfg->transcript_budget_bytes) &&
	       (!req->memory_bytes || req->memory_bytes == cfg->default_memory_bytes) &&
	       (!req->pids || req->pids == cfg->default_pids_limit) &&
	       (!req->nano_cpus || req->nano_cpus == cfg->default_nano_cpus);
}

/* A warm sandbox ready to be claimed: T1, its init connected and ready, nothing running. */
static struct sandbox *warm_pick(void)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->pool && sb->lc == LC_READY && !lc_of(sb)->call_active && sb->running && agent_of(sb)->call &&
		    agent_of(sb)->ready && !sb->posture.taints && posture_is_t1(&sb->posture))
			return sb;
	}
	return NULL;
}



static bool claim_start(struct admin_conn *c, struct sandbox *sb, const struct create_req *req)
{
	if (lifecycle_keep_claim(sb, req, hw_vm(req)) != 0)
		return false;
	lifecycle_name(sb, req->name, false);
	if (lifecycle_signal(sb, LC_EV_CLAIM) != 0) {
		sandbox_claim_undo(sb);
		return false;
	}
	sandbox_waiter_set(sb, SB_WAITER_ADMIN, (int32_t)admin_conn_index(c), c->gen);
	c->phase = AC_WAIT;
	return true;
}

/* A VM's credentials can be sent: each secret file readable as egress_secret_read wants it,
 * in a directory of root's no one else may write, and the claim with them all within one
 * message to the init. Refused with 422 naming the credential's id (never a byte of it). */
static int vm_creds_refused(struct admin_conn *c, const struct create_req *req)
{
	static uint8_t buf[EGRESS_SECRET_BYTES + 1];
	const struct config *cfg = admin_state.ac.cfg;
	char path[LIMIT_PATH_BYTES], m[LIMIT_PATH_BYTES + 256];
	size_t total = 0;
	struct stat st;

	for (uint32_t i = 0; i < req->nenv; i++)
		total += strlen(req->env[i]) + 8;
	if (lstat(cfg->vm_credentials_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		snprintf(m, sizeof(m), "vm_credentials_dir %s is missing, or not a directory of root's "
			 "that only root may write", cfg->vm_credentials_dir);
		admin_respond_error(c, 422, "credential_unavailable", m);
		return -1;
	}
	for (uint32_t i = 0; i < req->ncreds; i++) {
		long n;

		snprintf(path, sizeof(path), "%s/%s", cfg->vm_credentials_dir, req->creds[i].id);
		n = egress_secret_read(path, buf);
		memset(buf, 0, sizeof(buf));
		if (n < 0) {
			snprintf(m, sizeof(m), "credential %s: its secret file %s is missing, or not a "
				 "regular file of root's with mode 0600 or 0400 of at most %u bytes",
				 req->creds[i].id, path, EGRESS_SECRET_BYTES);
			log_info("create refused", "reason=credential_unavailable credential=%s",
				 log_q(req->creds[i].id));
			admin_respond_error(c, 422, "credential_unavailable", m);
			return -1;
		}
		total += (size_t)n + strlen(req->creds[i].name) + 16;
	}
	if (total > LIMIT_VM_CLAIM_BYTES) {
		snprintf(m, sizeof(m), "the VM's env and credentials together are %zu bytes; at most "
			 "%u go to its init in one message", total, LIMIT_VM_CLAIM_BYTES);
		admin_respond_error(c, 422, "credentials_too_large", m);
		return -1;
	}
	return 0;
}

/* A route's secret_file outside secret_dir (egress_secret_check): refused 422, as a PUT of
 * the policy is. */
static int egress_secrets_refused(struct admin_conn *c, const struct create_req *req)
{
	static struct egress_policy pol;
	char why[LIMIT_PATH_BYTES + 256];

	if (egress_policy_parse(req->egress_json, strlen(req->egress_json), &pol, why,
				sizeof(why)) == 0 &&
	    egress_secret_check(admin_state.ac.cfg, &pol, why, sizeof(why)) == 0)
		return 0;
	log_info("create refused", "reason=egress_invalid");
	admin_respond_error(c, 422, "egress_invalid", why);
	return -1;
}

void admin_create_start(struct admin_conn *c)
{
	const struct config *cfg = admin_state.ac.cfg;
	struct create_req *req = &c->req;
	struct sandbox *sb;

	if (tier_refused(c, req) != 0)
		return;
	if (req->vm && admin_state.ac.vm && runtime_vm_unavailable(admin_state.ac.vm)) {
		log_info("create refused", "reason=runtime_unavailable runtime=vm");
		admin_respond_error(c, 422, "runtime_unavailable", runtime_vm_unavailable(admin_state.ac.vm));
		return;
	}
	if (req->ncreds && vm_creds_refused(c, req) != 0)
		return;
	if (req->egress_json[0] && egress_secrets_refused(c, req) != 0)
		return;
	if (req->name && sandbox_by_name(req->name)) {
		admin_respond_error(c, 409, "name_taken", "a sandbox with that name exists");
		return;
	}
	if (claim_fits(req, cfg) && (sb = warm_pick()) && claim_start(c, sb, req))
		return;
	sb = sandbox_new();
	if (!sb) {
		char m[160];

		snprintf(m, sizeof(m), "at capacity: %u sandboxes exist (max_sandboxes)",
			 cfg->max_sandboxes);
		log_warn("create refused", "reason=capacity max_sandboxes=%u", cfg->max_sandboxes);
		admin_respond_error(c, 503, "capacity", m);
		return;
	}
	lifecycle_name(sb, req->name, true);
	if (lifecycle_keep_request(sb, req, hw_vm(req)) != 0) {
		sandbox_free(sb);
		admin_respond_error(c, 400, "bad_request", "cmd, labels or mounts too long to keep");
		return;
	}
	sandbox_waiter_set(sb, SB_WAITER_ADMIN, (int32_t)admin_conn_index(c), c->gen);
	c->phase = AC_WAIT;
	lifecycle_create(sb, req);
}

/* A create route: the body parsed into c->req as api reads it (route: its word in the log),
 * then admitted and begun (admin_create_start); 503 once agenticd is stopping. */
void admin_create_request(struct admin_conn *c, enum request_api api, const char *route)
{
	struct request_error e = { 0 };

	if (admin_state.stopping) {
		admin_respond_error(c, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	if (request_create_parse(&c->req, admin_state.ac.cfg, profiles_current(), api,
				 c->body, c->body_len, &e) != 0) {
		if (e.status == 422)
			log_info("create refused", "route=%s code=%s", route, log_q(e.code));
		admin_respond_error(c, e.status, e.code, e.message);
		return;
	}
	admin_create_start(c);
}

void admin_containers_create(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	admin_create_request(c, REQUEST_API_V1, "v1");
}

/* ---- inspect and remove ---- */

void admin_container_inspect(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	admin_respond_sandbox(c, 200, sb);
}

void admin_remove_start(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	if (sb->state == SB_CREATING) {
		admin_respond_error(c, 409, "busy", "the sandbox is still being created");
		return;
	}
	if (sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", "the sandbox is already being removed");
		return;
	}
	sandbox_waiter_set(sb, SB_WAITER_ADMIN, (int32_t)admin_conn_index(c), c->gen);
	c->phase = AC_WAIT;
	lifecycle_remove(sb, admin_query_flag(query, "force"), admin_query_flag(query, "keep_workspace"));
}

/* ---- logs: a run's stdout.log or stderr.log, as it is now ---- */

void admin_container_logs(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static const struct http_field fields[] = {
		{ "Content-Type", "application/octet-stream" },
		{ NULL, NULL },
	};
	char run[64], stream[16];
	int fd, r, s;

	admin_query_value(query, "run", run, sizeof(run));
	admin_query_value(query, "stream", stream, sizeof(stream));
	if (stream[0] && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
		admin_respond_error(c, 400, "bad_request", "stream is stdout or stderr");
		return;
	}
	s = strcmp(stream, "stderr") == 0;
	r = runlog_open(sb, run, s, &fd);
	if (r == -EINVAL) {
		admin_respond_error(c, 400, "bad_request", "run names a directory under runs/ (run-...)");
		return;
	}
	if (r != 0) {
		admin_respond_error(c, 404, "not_found", run[0] ? "no such run" : "the sandbox has no run yet");
		return;
	}
	admin_respond_file(c, fd, fields);
}
