/* credscan.h: does an environment entry look like a raw credential? By its key (*_API_KEY,
 * *_TOKEN, *SECRET*, *PASSWORD*, *_ACCESS_KEY, *PRIVATE_KEY* and well-known names) or by its
 * value (sk-..., sk-ant-..., ghp_/gho_/github_pat_, AKIA..., xox[abp]-..., a PEM private key,
 * a long high-entropy string). Pure functions on caller strings; the value is never copied,
 * logged or returned: only which rule matched, as a fixed word. */
#ifndef AGENTIC_PROFILE_CREDSCAN_H
#define AGENTIC_PROFILE_CREDSCAN_H

#include <stdbool.h>
#include <stddef.h>

/* "KEY=VALUE" (or a bare "KEY": its key alone is judged). NULL when it does not look like a
 * credential, else the rule's fixed word ("key_api_key", "value_sk", "value_entropy", ...),
 * safe to log. */
const char *credscan_entry(const char *kv);
/* The same with key and value apart (value may be NULL). A key is also judged by the value
 * shapes (a token pasted where a name belongs). */
const char *credscan_pair(const char *key, size_t key_len, const char *value);
/* Only the value shapes, on any text (a value, a name a file or request gives): NULL or a
 * "value_..." word. Lets a message that echoes a name check first that it is no token. */
const char *credscan_value(const char *s);

#endif
