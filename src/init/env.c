/* env.c: the init's environment contract with agenticd. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "init/env.h"

static const char *find(char *const *envp, const char *key)
{
	size_t n = strlen(key);

	for (; *envp; envp++)
		if (strncmp(*envp, key, n) == 0 && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

int init_env_is_private(const char *entry)
{
	return strncmp(entry, "AGENT_", 6) == 0;
}

static int id_of(char *const *envp, const char *key, uint32_t *out, char *why, size_t why_size)
{
	const char *v = find(envp, key);
	uint64_t n;

	if (!v) {
		snprintf(why, why_size, "%s is not set", key);
		return ERR_PARSE;
	}
	if (parse_u64(v, 0x7fffffff, &n) != 0) {
		snprintf(why, why_size, "%s is not a numeric id below 2^31", key);
		return ERR_PARSE;
	}
	*out = (uint32_t)n;
	return 0;
}

static int str_of(char *const *envp, const char *key, char *out, size_t cap, int absolute,
		  char *why, size_t why_size)
{
	const char *v = find(envp, key);

	if (!v || !*v) {
		snprintf(why, why_size, "%s is not set", key);
		return ERR_PARSE;
	}
	if (strlen(v) >= cap) {
		snprintf(why, why_size, "%s is longer than %zu characters", key, cap - 1);
		return ERR_PARSE;
	}
	if (absolute && v[0] != '/') {
		snprintf(why, why_size, "%s is not an absolute path", key);
		return ERR_PARSE;
	}
	memcpy(out, v, strlen(v) + 1);
	return 0;
}

static int is_uuid(const char *s)
{
	if (strlen(s) != 36)
		return 0;
	for (int i = 0; i < 36; i++) {
		int dash = i == 8 || i == 13 || i == 18 || i == 23;
		if (dash ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
			return 0;
	}
	return 1;
}

static int is_name(const char *s)
{
	size_t n = strlen(s);

	if (n < 2 || n > 63 || s[0] < 'a' || s[0] > 'z')
		return 0;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

int init_env_parse(char *const *envp, struct init_env *env, char *why, size_t why_size)
{
	const char *range;
	char lo[16], hi[16];
	uint64_t a, b;

	memset(env, 0, sizeof(*env));
	if (str_of(envp, "AGENT_ID", env->agent_id, sizeof(env->agent_id), 0, why, why_size) ||
	    str_of(envp, "AGENT_INSTANCE_ID", env->instance_id, sizeof(env->instance_id), 0, why,
		   why_size) ||
	    id_of(envp, "AGENT_CONTROL_UID", &env->control_uid, why, why_size) ||
	    id_of(envp, "AGENT_CONTROL_GID", &env->control_gid, why, why_size) ||
	    id_of(envp, "AGENT_WORKLOAD_UID", &env->workload_uid, why, why_size) ||
	    id_of(envp, "AGENT_WORKLOAD_GID", &env->workload_gid, why, why_size) ||
	    str_of(envp, "AGENT_GRPC_UDS_PATH", env->uds_path, sizeof(env->uds_path), 1, why,
		   why_size) ||
	    str_of(envp, "AGENT_SETUP_SENTINEL", env->sentinel, sizeof(env->sentinel), 1, why,
		   why_size))
		return ERR_PARSE;
	if (!is_name(env->agent_id)) {
		snprintf(why, why_size, "AGENT_ID is not a sandbox name ([a-z][a-z0-9-]{1,62})");
		return ERR_PARSE;
	}
	if (!is_uuid(env->instance_id)) {
		snprintf(why, why_size, "AGENT_INSTANCE_ID is not a lowercase UUID");
		return ERR_PARSE;
	}
	range = find(envp, "AGENT_CONTROL_UID_RANGE");
	if (!range || sscanf(range, "%15[0-9]-%15[0-9]", lo, hi) != 2 ||
	    parse_u64(lo, 0x7fffffff, &a) || parse_u64(hi, 0x7fffffff, &b) || a == 0 || a > b ||
	    strlen(lo) + strlen(hi) + 1 != strlen(range)) {
		snprintf(why, why_size, "AGENT_CONTROL_UID_RANGE is not MIN-MAX with 0 < MIN <= MAX");
		return ERR_PARSE;
	}
	env->range_min = (uint32_t)a;
	env->range_max = (uint32_t)b;
	if (env->control_uid < env->range_min || env->control_uid > env->range_max) {
		snprintf(why, why_size, "AGENT_CONTROL_UID is outside AGENT_CONTROL_UID_RANGE");
		return ERR_PARSE;
	}
	if (env->control_gid != env->control_uid) {
		snprintf(why, why_size, "AGENT_CONTROL_GID differs from AGENT_CONTROL_UID");
		return ERR_PARSE;
	}
	if ((env->workload_uid >= env->range_min && env->workload_uid <= env->range_max) ||
	    (env->workload_gid >= env->range_min && env->workload_gid <= env->range_max) ||
	    env->workload_uid == 0 || env->workload_gid == 0) {
		snprintf(why, why_size, "AGENT_WORKLOAD_UID/GID must be non-zero and outside the "
			 "control range");
		return ERR_PARSE;
	}
	return 0;
}
