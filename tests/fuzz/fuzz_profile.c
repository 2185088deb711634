/* fuzz_profile.c: any bytes as a profile file: the parser never crashes, a refusal is one
 * NUL-terminated "FIELD: ..." line, and what it accepts holds the rules (a well-formed id,
 * lists within their bounds and NULL-ended, env entries KEY=VALUE without AGENT_, every
 * string inside the profile's own text, an egress policy kept normalised). Each credential
 * scan runs too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/credscan.h"
#include "profile/profile.h"

static const struct profile *prof;

static void inside(const char *s)
{
	if (s && (s < prof->text || s >= prof->text + prof->text_len ||
		  !memchr(s, '\0', (size_t)(prof->text + prof->text_len - s))))
		abort();
}

static void check_list(const char *const *v, uint32_t n, uint32_t max)
{
	if (n > max || v[n] != NULL)
		abort();
	for (uint32_t i = 0; i < n; i++)
		inside(v[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct profile p;
	char err[256], why[512];
	size_t idlen;

	prof = &p;
	memset(err, 'x', sizeof(err));
	if (profile_parse(&p, data, size, err, sizeof(err)) != 0) {
		if (!memchr(err, '\0', sizeof(err)) || !strstr(err, ": ") ||
		    !memchr(p.id, '\0', sizeof(p.id)))
			abort();
		return 0;
	}
	idlen = strlen(p.id);
	if (idlen == 0 || idlen >= PROFILE_ID_BYTES ||
	    strspn(p.id, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != idlen || p.text_len >
	    sizeof(p.text))
		abort();
	check_list(p.env, p.nenv, PROFILE_ENV_MAX);
	check_list(p.cmd, p.ncmd, PROFILE_CMD_MAX);
	for (uint32_t i = 0; i < p.nenv; i++) {
		if (!strchr(p.env[i], '=') || p.env[i][0] == '=' || strncmp(p.env[i], "AGENT_", 6) == 0)
			abort();
		credscan_entry(p.env[i]);
	}
	inside(p.description);
	inside(p.image);
	inside(p.network);
	if (p.nmounts > PROFILE_MOUNTS_MAX || p.negress > EGRESS_ALLOW_MAX + EGRESS_ROUTES_MAX ||
	    p.ncreds > PROFILE_CREDS_MAX || p.nprobes > PROFILE_PROBES_MAX)
		abort();
	for (uint32_t i = 0; i < p.nmounts; i++) {
		inside(p.mounts[i].source);
		inside(p.mounts[i].target);
		if (p.mounts[i].source[0] != '/' || p.mounts[i].target[0] != '/')
			abort();
	}
	if (!memchr(p.egress_json, '\0', sizeof(p.egress_json)) ||
	    (p.egress_json[0] && p.egress_json[0] != '{'))
		abort();
	for (uint32_t i = 0; i < p.ncreds; i++) {
		inside(p.creds[i].id);
		inside(p.creds[i].provider);
		inside(p.creds[i].allowed_use);
		inside(p.creds[i].target_name);
		if (strcmp(p.creds[i].target_type, "env") != 0 &&
		    strcmp(p.creds[i].target_type, "file") != 0)
			abort();
	}
	for (uint32_t i = 0; i < p.nprobes; i++) {
		check_list(p.probes[i].cmd, p.probes[i].ncmd, PROFILE_CMD_MAX);
		if (p.probes[i].ncmd == 0 || p.probes[i].timeout_s < 1)
			abort();
	}
	if (profile_shared_kernel_refusal(&p, why, sizeof(why)) && (p.ncreds == 0 && p.nenv == 0))
		abort();
	return 0;
}
