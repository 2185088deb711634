/* egress.h: agenticd's side of a sandbox's egress (docs/EGRESS.md). The relay (the Egress
 * call, the workers) lives with it; what the admin API needs of it is declared here. */
#ifndef AGENTIC_MGMT_EGRESS_H
#define AGENTIC_MGMT_EGRESS_H

struct sandbox;

/* The audit line of a policy change (kind "policy", decision "set", reason source: "create"
 * or "api", and the mode) appended to the run's egress.jsonl (0600). */
void egress_audit_policy(struct sandbox *sb, const char *source);

#endif
