/* e2b_net.h: E2B's create-time network options mapped onto an agentic egress policy (contract
 * C6; docs/E2B.md "Network options"). The NewSandbox body's allow_internet_access and network
 * {allowOut, denyOut, rules (per-host header transforms), allowPublicTraffic,
 * maskRequestHost, egressProxy} narrow the operator's e2b_egress_policy (config): the result
 * never allows a destination, route or address range that policy does not. Pure (no I/O, no
 * allocation: static storage, one caller at a time) but for e2b_net_apply, which hands the
 * result to sandbox/request.c. May call: base, json, egress (policy), config, sandbox. */
#ifndef AGENTIC_E2B_NET_H
#define AGENTIC_E2B_NET_H

#include <stddef.h>

#include "config/config.h"
#include "sandbox/request.h"

#define E2B_NET_LIST_MAX 64       /* allowOut, denyOut: entries each */
#define E2B_NET_HOSTS_MAX 16      /* rules: hosts */
#define E2B_NET_RULES_MAX 8       /* rules: a host's rules */
#define E2B_NET_HEADERS_MAX 8     /* a transform's headers */
#define E2B_NET_TOKENS 4096       /* the body's JSON values, at most */

/* The NewSandbox body (len bytes of JSON; only allow_internet_access and network are read)
 * mapped onto cfg->e2b_egress_json ("" when e2b_egress_policy is unset: no egress at all).
 * 0 with egress_json set (normalised as request_create_parse stores a body's "egress"; "" =
 * no egress, the sandbox stays without any route out) and why holding the notes a caller may
 * show ("" when none; "; " between them: what was ignored, dropped or narrowed), or -1 with
 * why saying what is wrong (the client gets 400 with it) and egress_json untouched. Neither
 * ever holds a header value or any byte of egressProxy. */
int e2b_net_policy(const struct config *cfg, const char *body, size_t len, char *egress_json,
		   size_t cap, char *why, size_t why_cap);

/* egress_json (e2b_net_policy's) as req's egress, exactly as a create body's "egress" is
 * taken (request_egress_set): its normalised text, egress_report, and with a policy the
 * proxy's variables in env. Call it once req's env is in. 0, or -1 with e. */
int e2b_net_apply(struct create_req *req, const char *egress_json, struct request_error *e);

/* What a sandbox with egress policy egress_json ("" none) got, as E2B's SandboxDetail
 * `network` (getInfo): {"allowOut": [its destinations and routes' hosts: "name", "*.name",
 * ":port" when not 443], "denyOut": ["0.0.0.0/0", "::/0"]} (what allowOut does not name is
 * denied). Never a route's header, value or secret file. A policy that does not read is
 * written as none. */
struct json_writer;
void e2b_net_info(const char *egress_json, struct json_writer *w);

#endif
