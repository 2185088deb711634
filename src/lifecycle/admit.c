/* admit.c: a create's admission, for any front end (the admin API, the E2B API): the checks
 * a parsed request passes before anything is taken (tier, the VM runtime and its
 * credentials, egress secrets, the name), then a warm sandbox claimed when one fits, else a
 * slot and the lifecycle's create. Calls the sandbox table, keep.c, the lifecycle's entry and
 * the hooks (the broker's secret checks); refusals are answered by the caller from e. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "egress/policy.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/steps.h"
#include "runtime/runtime_vm.h"
#include "sandbox/posture.h"

/* e's status and code (its message written by the caller); NULL, for the caller's return. */
static struct sandbox *refuse(struct request_error *e, int status, const char *code)
{
	e->status = status;
	e->code = code;
	return NULL;
}

/* e's message, cut to its size (as the admin API answered it before) */
static void msg(struct request_error *e, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void msg(struct request_error *e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
}

/* A VM on this host's hardware hypervisor (its posture says so). */
static bool hw_vm(const struct create_req *req, const struct runtime_vm *vm)
{
	return req->vm && vm && strcmp(runtime_vm_accel(vm), "kvm") == 0;
}

/* Admission by tier: a create that would be T0 (posture_request_reasons: a raw credential in
 * its env, an operator network) while T1 is required (its require_tier, or min_tier = T1) is
 * refused, naming the reasons (fixed words, never a value), before a slot is taken or the
 * engine is asked anything. */
static int tier_refused(const struct create_req *req, struct request_error *e)
{
	uint16_t why = posture_request_reasons(req);
	char words[192];
	struct buf b;

	if (!why || !(req->require_t1 || lc_conf.cfg->min_tier_t1))
		return 0;
	buf_init(&b, words, sizeof(words));
	for (int i = 0; i < POSTURE_REASONS; i++)
		if (why & POSTURE_BIT(i))
			buf_printf(&b, "%s%s", b.len ? ", " : "", posture_reason_name(i));
	msg(e, "T1 is required (%s) and this create would be T0: %s",
	    req->require_t1 ? "require_tier" : "min_tier", words);
	log_info("create refused", "reason=tier_refused required_by=%s reasons=%s",
		 req->require_t1 ? "require_tier" : "min_tier", log_q(words));
	refuse(e, 422, "tier_refused");
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

		if (sb->pool && sb->lc == LC_READY && !lc_of(sb)->call_active && sb->running &&
		    lifecycle_agent_ready(lc_conf.hooks, sb) && !sb->posture.taints &&
		    posture_is_t1(&sb->posture))
			return sb;
	}
	return NULL;
}

static bool claim_start(struct sandbox *sb, const struct create_req *req, bool hw,
			enum sb_waiter_kind kind, int32_t conn, uint32_t gen)
{
	if (lifecycle_keep_claim(sb, req, hw) != 0)
		return false;
	/* one that takes any name keeps the warm sandbox's: the engine renames nothing */
	if (req->name && !req->name_any)
		lifecycle_name(sb, req->name, false);
	if (lifecycle_signal(sb, LC_EV_CLAIM) != 0) {
		sandbox_claim_undo(sb);
		return false;
	}
	sandbox_waiter_set(sb, kind, conn, gen);
	return true;
}

/* A VM's credentials can be sent: each secret file readable as the secret_read hook wants it,
 * in a directory of root's no one else may write, and the claim with them all within one
 * message to the init. Refused with 422 naming the credential's id (never a byte of it). */
static int vm_creds_refused(const struct create_req *req, struct request_error *e)
{
	static uint8_t buf[EGRESS_SECRET_BYTES + 1];
	const struct config *cfg = lc_conf.cfg;
	char path[LIMIT_PATH_BYTES];
	size_t total = 0;
	struct stat st;

	for (uint32_t i = 0; i < req->nenv; i++)
		total += strlen(req->env[i]) + 8;
	if (lstat(cfg->vm_credentials_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    (st.st_mode & 022)) {
		msg(e, "vm_credentials_dir %s is missing, or not a directory of root's that only "
		    "root may write", cfg->vm_credentials_dir);
		refuse(e, 422, "credential_unavailable");
		return -1;
	}
	for (uint32_t i = 0; i < req->ncreds; i++) {
		long n;

		snprintf(path, sizeof(path), "%s/%s", cfg->vm_credentials_dir, req->creds[i].id);
		n = lc_conf.hooks->secret_read ? lc_conf.hooks->secret_read(path, buf) : -1;
		memset(buf, 0, sizeof(buf));
		if (n < 0) {
			msg(e, "credential %s: its secret file %s is missing, or not a regular file "
			    "of root's with mode 0600 or 0400 of at most %u bytes", req->creds[i].id,
			    path, EGRESS_SECRET_BYTES);
			log_info("create refused", "reason=credential_unavailable credential=%s",
				 log_q(req->creds[i].id));
			refuse(e, 422, "credential_unavailable");
			return -1;
		}
		total += (size_t)n + strlen(req->creds[i].name) + 16;
	}
	if (total > LIMIT_VM_CLAIM_BYTES) {
		msg(e, "the VM's env and credentials together are %zu bytes; at most %u go to its "
		    "init in one message", total, LIMIT_VM_CLAIM_BYTES);
		refuse(e, 422, "credentials_too_large");
		return -1;
	}
	return 0;
}

/* A route's secret_file outside secret_dir (the secret_check hook): refused 422, as a PUT of
 * the policy is. */
static int egress_secrets_refused(const struct create_req *req, struct request_error *e)
{
	static struct egress_policy pol;

	if (egress_policy_parse(req->egress_json, strlen(req->egress_json), &pol, e->message,
				sizeof(e->message)) == 0 &&
	    (!lc_conf.hooks->secret_check ||
	     lc_conf.hooks->secret_check(lc_conf.cfg, &pol, e->message, sizeof(e->message)) == 0))
		return 0;
	log_info("create refused", "reason=egress_invalid");
	refuse(e, 422, "egress_invalid");
	return -1;
}

/* The checks before anything is taken: 0, or -1 with e filled. */
static int admit_checks(const struct create_req *req, const struct runtime_vm *vm,
			struct request_error *e)
{
	if (tier_refused(req, e) != 0)
		return -1;
	if (req->vm && vm && runtime_vm_unavailable(vm)) {
		log_info("create refused", "reason=runtime_unavailable runtime=vm");
		msg(e, "%s", runtime_vm_unavailable(vm));
		refuse(e, 422, "runtime_unavailable");
		return -1;
	}
	if (req->ncreds && vm_creds_refused(req, e) != 0)
		return -1;
	if (req->egress_json[0] && egress_secrets_refused(req, e) != 0)
		return -1;
	if (req->name && sandbox_by_name(req->name)) {
		msg(e, "a sandbox with that name exists");
		refuse(e, 409, "name_taken");
		return -1;
	}
	return 0;
}

struct sandbox *lifecycle_admit(struct create_req *req, const struct runtime_vm *vm,
				enum sb_waiter_kind kind, int32_t conn, uint32_t gen,
				struct request_error *e)
{
	const struct config *cfg = lc_conf.cfg;
	bool hw = hw_vm(req, vm);
	struct sandbox *sb;

	if (admit_checks(req, vm, e) != 0)
		return NULL;
	if (claim_fits(req, cfg) && (sb = warm_pick()) && claim_start(sb, req, hw, kind, conn, gen))
		return sb;
	sb = sandbox_new();
	if (!sb) {
		msg(e, "at capacity: %u sandboxes exist (max_sandboxes)", cfg->max_sandboxes);
		log_warn("create refused", "reason=capacity max_sandboxes=%u", cfg->max_sandboxes);
		return refuse(e, 503, "capacity");
	}
	lifecycle_name(sb, req->name, true);
	if (lifecycle_keep_request(sb, req, hw) != 0) {
		sandbox_free(sb);
		msg(e, "cmd, labels or mounts too long to keep");
		return refuse(e, 400, "bad_request");
	}
	sandbox_waiter_set(sb, kind, conn, gen);
	lifecycle_create(sb, req);
	return sb;
}
