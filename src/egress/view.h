/* view.h: a sandbox's egress as the admin API shows it (GET and PUT
 * /api/v1/containers/NAME/egress, admin-v2's profiles): the normalised policy as a JSON
 * object, and the last lines of the run's audit (egress.jsonl), each parsed. */
#ifndef AGENTIC_MGMT_EGRESS_VIEW_H
#define AGENTIC_MGMT_EGRESS_VIEW_H

#include <stddef.h>
#include <stdint.h>

#include "json/json.h"

struct sandbox;

#define EGRESS_VIEW_AUDIT_MAX 100    /* audit lines an answer holds at most */

/* A JSON document (len bytes) written into w as a value: 0, or ERR_PARSE when it is none
 * (nothing written then). */
int egress_view_copy(struct json_writer *w, const char *json, size_t len);
/* The policy (normalised JSON, "" for none: null). */
void egress_view_policy(struct json_writer *w, const char *egress_json);
/* The last lines of sb's current run's egress.jsonl, oldest first, at most max of them, each
 * as its object (a line that is no JSON object is skipped): an array. */
void egress_view_audit(struct json_writer *w, const struct sandbox *sb, uint32_t max);
/* sb's current run's egress.jsonl (its open run, else the instance's current one), opened
 * with flags (0600 when made; never through a link): the fd, or -errno. */
int egress_view_audit_open(const struct sandbox *sb, int flags);

/* The kind "policy" audit line (decision "set", reason source: "create" or "api", and the
 * mode) in the run's egress.jsonl: 0 or -errno. Its format is egress_audit_write's (audit.h),
 * as every audit line's; the connections' lines are written by broker_audit.c. */
int egress_audit_policy(struct sandbox *sb, const char *source);

#endif
