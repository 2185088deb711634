/* agent_claim.c: a claimed warm sandbox's SandboxClaim to its init: the claim's env and, for a
 * VM, its credentials, read from their files as the message is built and wiped once it is
 * queued. */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_vm.h"
#include "agent.pb-c.h"
#include "agent/agent_slot.h"
#include "egress/broker.h"
#include "lifecycle/lifecycle.h"
#include "profile/profile.h"
#include "sandbox/strrun.h"

/* The secrets of a VM's credentials while a claim is built (wiped after). */
static uint8_t secrets[PROFILE_CREDS_MAX][EGRESS_SECRET_BYTES + 1];
static Agentic__Sandbox__V1__SandboxClaim__FilesEntry file_entries[PROFILE_CREDS_MAX];
static Agentic__Sandbox__V1__SandboxClaim__FilesEntry *file_list[PROFILE_CREDS_MAX];

/* The credentials into c: an env target after the claim's env (it wins: the init takes the
 * last of a name), a file target as a file. 0, or -1 when a secret cannot be read. */
static int vm_creds_add(struct sandbox *sb, Agentic__Sandbox__V1__SandboxClaim *c,
			Agentic__Sandbox__V1__SandboxClaim__EnvEntry *entries,
			Agentic__Sandbox__V1__SandboxClaim__EnvEntry **env, size_t *n)
{
	char path[LIMIT_PATH_BYTES];

	c->files = file_list;
	c->n_files = 0;
	for (uint32_t i = 0; i < vm_of(sb)->ncreds && i < PROFILE_CREDS_MAX; i++) {
		long len;

		snprintf(path, sizeof(path), "%s/%s", agent_cfg->vm_credentials_dir, vm_of(sb)->creds[i].id);
		len = egress_secret_read(path, secrets[i]);
		if (len < 0) {
			log_warn("credential not sent: its secret file cannot be read", "name=%s "
				 "credential=%s", log_q(sb->name), log_q(vm_of(sb)->creds[i].id));
			return -1;
		}
		secrets[i][len] = '\0';
		if (vm_of(sb)->creds[i].file) {
			file_entries[c->n_files] = (Agentic__Sandbox__V1__SandboxClaim__FilesEntry)
				AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__FILES_ENTRY__INIT;
			file_entries[c->n_files].key = (char *)vm_of(sb)->creds[i].name;
			file_entries[c->n_files].value.data = secrets[i];
			file_entries[c->n_files].value.len = (size_t)len;
			file_list[c->n_files] = &file_entries[c->n_files];
			c->n_files++;
		} else if (*n < LIMIT_SANDBOX_ENV) {
			entries[*n] = (Agentic__Sandbox__V1__SandboxClaim__EnvEntry)
				AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__ENV_ENTRY__INIT;
			entries[*n].key = (char *)vm_of(sb)->creds[i].name;
			entries[*n].value = (char *)secrets[i];
			env[*n] = &entries[*n];
			(*n)++;
		}
	}
	return 0;
}

void agent_claim_send(struct sandbox *sb)
{
	static Agentic__Sandbox__V1__SandboxClaim__EnvEntry entries[LIMIT_SANDBOX_ENV];
	static Agentic__Sandbox__V1__SandboxClaim__EnvEntry *env[LIMIT_SANDBOX_ENV];
	static char kv[LIMIT_SANDBOX_CLAIM_ENV_BYTES];
	Agentic__Sandbox__V1__SandboxClaim c = AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	const struct agent_sb *a = agent_slot(sb);
	const char *e = NULL;
	size_t n = 0;
	int r;

	if (!a->call || !a->registered)
		return; /* sent when it registers */
	memcpy(kv, sb->claim_env, sb->claim_env_len);
	while (n < LIMIT_SANDBOX_ENV && (e = strrun_next(sb->claim_env, sb->claim_env_len, e))) {
		char *p = kv + (e - sb->claim_env), *eq = strchr(p, '=');

		if (!eq)
			continue;
		*eq = '\0';
		entries[n] = (Agentic__Sandbox__V1__SandboxClaim__EnvEntry)
			AGENTIC__SANDBOX__V1__SANDBOX_CLAIM__ENV_ENTRY__INIT;
		entries[n].key = p;
		entries[n].value = eq + 1;
		env[n] = &entries[n];
		n++;
	}
	c.name = sb->name;
	c.env = env;
	c.n_env = n;
	/* a VM's credentials, read now from their files (admin_sandbox.c checked them at the create):
	 * in this message alone, wiped once it is queued */
	if (vm_of(sb)->ncreds && vm_creds_add(sb, &c, entries, env, &n) != 0) {
		memset(secrets, 0, sizeof(secrets));
		agent_drop(sb, "a credential's secret file cannot be read");
		return;
	}
	c.n_env = n;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_CLAIM;
	m.claim = &c;
	r = grpc_call_send(a->call, &m.base);
	memset(secrets, 0, sizeof(secrets));
	if (r < 0) {
		agent_drop(sb, "cannot send the claim");
		return;
	}
	if (sb->vm && sb->lc == LC_WAIT_READY)
		runtime_vm_claim_owed(sb, true);
	log_info("claim sent", "name=%s pool_name=%s env=%u files=%u", log_q(sb->name),
		 log_q(sb->agent_id), (unsigned)n, (unsigned)c.n_files);
}
