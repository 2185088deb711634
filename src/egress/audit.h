/* audit.h: the egress audit line (docs/EGRESS.md "Audit"): one JSON object a line of a run's
 * egress.jsonl, for a connection (what a worker's record said, or what agenticd saw itself)
 * or a policy set. The worker's record to agenticd is a line of the same format.
 * egress_audit_write is the one writer of that format. */
#ifndef AGENTIC_EGRESS_AUDIT_H
#define AGENTIC_EGRESS_AUDIT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* A line's fields; ts is the writer's (the wall clock now). A NULL string is written "".
 * kind "policy": ts, sandbox, instance, conn, kind, decision, reason, mode, allow, routes and
 * status; any other: ts, sandbox, instance, conn, kind, method, host, port, path, decision,
 * reason, status, bytes_up, bytes_down, duration_ms, end, and suppressed when not 0. */
struct egress_audit {
	const char *sandbox, *instance;
	int64_t conn;
	const char *kind, *method, *host, *path, *decision, *reason, *end;
	int64_t port, status, bytes_up, bytes_down, duration_ms;
	uint64_t suppressed;           /* the refusals not written before this one */
	const char *mode;              /* a policy line's: "off", "report" or "enforce" */
	int64_t allow, routes;         /* a policy line's counts */
};

/* The wall clock now as a line's ts ("2026-12-02T06:00:00.000Z"; cap: 32 is room). */
void egress_audit_ts(char *out, size_t cap);
/* The line as one JSON object into b (no newline): 0, or ERR_LIMIT when it does not fit. */
int egress_audit_write(struct buf *b, const struct egress_audit *a);

#endif
