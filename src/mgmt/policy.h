/* policy.h: what a create request may ask for: names, labels, host mounts; and the scrubbing
 * of secret-shaped text before anything reaches a log line or an error. */
#ifndef AGENTIC_MGMT_POLICY_H
#define AGENTIC_MGMT_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "mgmt/config.h"

/* ^[a-z][a-z0-9-]{1,62}$ */
bool policy_name_valid(const char *name);

/* Request labels may not use the reserved `agentic-` prefix (any case). */
bool policy_label_key_allowed(const char *key);

/* Checks a requested bind mount SRC:DST. src must resolve (the caller passes the host's
 * realpath of it) to a path under one of cfg->mount_allowlist, and neither it nor dst may be a
 * protected place (the docker socket, /, /proc, /sys, /dev, /etc, /run, /var/run, agentshare,
 * or an ancestor of any of them; dst also not /workspace, /sbin/agentic-init or
 * /run/agentic*). 0, or ERR_PARSE (malformed) / -EPERM (refused) with the reason in why. */
int policy_mount_check(const struct config *cfg, const char *src_real, const char *dst,
		       char *why, size_t why_size);

/* Replaces secret-shaped substrings in text (in place): values of KEY=VALUE pairs whose key
 * names a secret (TOKEN, SECRET, PASSWORD, PASSWD, KEY, CREDENTIAL, AUTH), bearer tokens,
 * well-known token prefixes (ghp_, github_pat_, sk-, xox?-, AKIA, glpat-), and any run of 24
 * or more base64/hex-looking characters. Each becomes "[redacted]"; when that would not fit in
 * size, the end of the text is cut. Returns the number of replacements. */
int policy_redact(char *text, size_t size);

#endif
