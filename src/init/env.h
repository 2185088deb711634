/* env.h: what agenticd tells a sandbox's init through its environment (docs/INIT.md), parsed
 * and checked before anything else happens. */
#ifndef AGENTIC_INIT_ENV_H
#define AGENTIC_INIT_ENV_H

/* A VM guest's tmpfs for the workload's credential files (0700, the workload's), mounted by
 * the guest's prelude: a claim's files are written there, nowhere else (init_claim_files). */
#define INIT_CREDENTIAL_DIR "/run/credentials"

#include <stddef.h>
#include <stdint.h>

#include "base/limits.h"

struct init_env {
	char agent_id[64];
	char instance_id[40];
	uint32_t control_uid, control_gid;
	uint32_t range_min, range_max;
	uint32_t workload_uid, workload_gid;
	char uds_path[INIT_ENV_STR];
	char sentinel[INIT_ENV_STR];
};

/* Reads AGENT_* from envp (NULL-terminated "K=V" strings). 0, or ERR_PARSE with the reason
 * in why (it names the variable, never its value). Checks: every id numeric; the control uid
 * inside AGENT_CONTROL_UID_RANGE and equal to the control gid; the range excludes 0 and the
 * workload ids; paths absolute; the agent id a sandbox name; the instance id a UUID. */
int init_env_parse(char *const *envp, struct init_env *env, char *why, size_t why_size);

/* True for the variables that only the init may see (AGENT_*): workloads never get them. */
int init_env_is_private(const char *entry);

#endif
