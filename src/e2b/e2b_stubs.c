/* e2b_stubs.c: TEMPORARY, for the coordinator to delete at merge (issue 32): weak stand-ins
 * for what other helpers' files define, so this branch builds and its tests run before they
 * merge: H2's process service and H4's filesystem and /files (each answers unimplemented),
 * H6's API keys (state_dir/e2b-keys: the last field of each line, the key's SHA-256 in hex),
 * admission (lifecycle_admit: tier, name, capacity; no warm claim) and TTL (in memory only,
 * no reaper), H8's network options (none: no egress). A strong definition replaces each. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "e2b/e2b_internal.h"
#include "lifecycle/lifecycle.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"

#define WEAK __attribute__((weak))

WEAK void e2b_process_call(struct e2b_conn *c, const char *method)
{
	if (e2b_user_check(c) == 0)
		e2b_connect_error(c, "unimplemented", "process.Process is not in this build");
}

WEAK void e2b_fs_call(struct e2b_conn *c, const char *method)
{
	if (e2b_user_check(c) == 0)
		e2b_connect_error(c, "unimplemented", "filesystem.Filesystem is not in this build");
}

WEAK void e2b_files_get(struct e2b_conn *c)
{
	e2b_reply_error(c, 501, "GET /files is not in this build");
}

WEAK void e2b_files_post(struct e2b_conn *c)
{
	e2b_reply_error(c, 501, "POST /files is not in this build");
}

WEAK void e2b_process_tick(int64_t now)
{
}

WEAK int64_t e2b_process_next_deadline(void)
{
	return -1;
}

WEAK void e2b_process_sandbox_gone(struct sandbox *sb)
{
}

WEAK void e2b_fs_sandbox_gone(struct sandbox *sb)
{
}

static uint8_t key_hash[64][32];
static uint32_t nkeys;

WEAK int e2b_keys_open(const char *state_dir)
{
	char path[LIMIT_PATH_BYTES + 16], line[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/e2b-keys", state_dir);
	if (!(f = fopen(path, "re")))
		return errno == ENOENT ? 0 : -errno;
	while (nkeys < 64 && fgets(line, sizeof(line), f)) {
		char *h = strrchr(line, ' ');
		unsigned v;
		int i;

		h = h ? h + 1 : line;
		for (i = 0; i < 32 && sscanf(h + 2 * i, "%2x", &v) == 1; i++)
			key_hash[nkeys][i] = (uint8_t)v;
		nkeys += i == 32;
	}
	fclose(f);
	return 0;
}

WEAK bool e2b_key_valid(const char *key)
{
	uint8_t sum[32], diff;
	bool ok = false;

	e2b_sha256(key, strlen(key), sum);
	for (uint32_t k = 0; k < nkeys; k++) {
		diff = 0;
		for (int i = 0; i < 32; i++)
			diff |= (uint8_t)(sum[i] ^ key_hash[k][i]);
		ok |= diff == 0;
	}
	return ok;
}

WEAK int e2b_net_policy(const struct config *cfg, const char *body, size_t len,
			char *egress_json, size_t cap, char *why, size_t why_cap)
{
	egress_json[0] = '\0';
	return 0;
}

static int64_t expiry[LIMIT_E2B_CONNECTIONS];

WEAK int lifecycle_expiry_set(struct sandbox *sb, int64_t at_ms)
{
	if (sandbox_index(sb) < LIMIT_E2B_CONNECTIONS)
		expiry[sandbox_index(sb)] = at_ms;
	return 0;
}

WEAK int64_t lifecycle_expiry(const struct sandbox *sb)
{
	return sandbox_index(sb) < LIMIT_E2B_CONNECTIONS ? expiry[sandbox_index(sb)] : 0;
}

WEAK struct sandbox *lifecycle_admit(struct create_req *req, const struct runtime_vm *vm,
				     enum sb_waiter_kind kind, int32_t conn, uint32_t gen,
				     struct request_error *e)
{
	struct sandbox *sb;

	if (posture_request_reasons(req) && (req->require_t1 || sandbox_config()->min_tier_t1)) {
		*e = (struct request_error){ 422, "tier_refused", "T1 is required and this create "
					     "would be T0" };
		return NULL;
	}
	if (req->name && sandbox_by_name(req->name)) {
		*e = (struct request_error){ 409, "name_taken", "a sandbox with that name exists" };
		return NULL;
	}
	if (!(sb = sandbox_new())) {
		*e = (struct request_error){ 503, "capacity", "at capacity (max_sandboxes)" };
		return NULL;
	}
	lifecycle_name(sb, req->name, true);
	if (lifecycle_keep_request(sb, req, false) != 0) {
		sandbox_free(sb);
		*e = (struct request_error){ 400, "bad_request", "cmd, labels or mounts too long" };
		return NULL;
	}
	expiry[sandbox_index(sb)] = 0;
	sandbox_waiter_set(sb, kind, conn, gen);
	lifecycle_create(sb, req);
	return sb;
}
