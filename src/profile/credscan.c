/* credscan.c: raw-credential shapes in an environment entry (credscan.h). */
#include <string.h>

#include "profile/credscan.h"

const char *credscan_pair(const char *key, size_t key_len, const char *value)
{
	static const char *const names[] = { "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GITHUB_TOKEN",
					     "GH_TOKEN", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN" };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (key_len == strlen(names[i]) && memcmp(key, names[i], key_len) == 0)
			return "key_well_known";
	(void)value;
	return NULL;
}

const char *credscan_entry(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return credscan_pair(kv, eq ? (size_t)(eq - kv) : strlen(kv), eq ? eq + 1 : NULL);
}
