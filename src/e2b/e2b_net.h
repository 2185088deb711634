/* e2b_net.h: E2B's create-time network options mapped onto an agentic egress policy (contract
 * C6; docs/E2B.md "Network options"). The NewSandbox body's allow_internet_access and network
 * {allowOut, denyOut, rules (per-host header transforms), allowPublicTraffic,
 * maskRequestHost, egressProxy} narrow the operator's e2b_egress_policy (config): the result
 * never allows a destination, route or address range that policy does not. Pure (no I/O, no
 * allocation: static storage, one caller at a time). May call: base, json, egress (policy),
 * config. */
#ifndef AGENTIC_E2B_NET_H
#define AGENTIC_E2B_NET_H

#include <stddef.h>

#include "config/config.h"

#define E2B_NET_LIST_MAX 64       /* allowOut, denyOut: entries each */
#define E2B_NET_HOSTS_MAX 16      /* rules: hosts */
#define E2B_NET_RULES_MAX 8       /* rules: a host's rules */
#define E2B_NET_HEADERS_MAX 8     /* a transform's headers */
#define E2B_NET_TOKENS 4096       /* the body's JSON values, at most */

/* The NewSandbox body (len bytes of JSON; only allow_internet_access and network are read)
 * mapped onto cfg->e2b_egress_json ("" when e2b_egress_policy is unset: no egress at all).
 * 0 with egress_json set, normalised ("" = no egress: the sandbox stays without any route
 * out; a policy is what the caller hands request_create_parse as the body's "egress", which
 * stores it unchanged and sets the proxy's variables), and why holding the notes a caller
 * may show ("" when none; "; " between them: what was ignored, dropped or narrowed); or -1
 * with why saying what is wrong (the client gets 400 with it) and egress_json untouched.
 * Neither ever holds a header value or any byte of egressProxy. */
int e2b_net_policy(const struct config *cfg, const char *body, size_t len, char *egress_json,
		   size_t cap, char *why, size_t why_cap);

/* What a sandbox with egress policy egress_json ("" none) got, as the members of E2B's
 * SandboxDetail `network` (getInfo) the SDK returns, written into the object w is in:
 * "allowOut": [its destinations and routes' hosts: "name", "*.name", ":port" when not the
 * default], "denyOut": ["0.0.0.0/0", "::/0"] (what allowOut does not name is denied). Never
 * a route's header, value or secret file. A policy that does not read is written as none. */
struct json_writer;
void e2b_net_info(const char *egress_json, struct json_writer *w);

/* The static scratch e2b_net_policy reads and narrows in (e2b_static_bytes). */
size_t e2b_net_table_bytes(void);

#endif
