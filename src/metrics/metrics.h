/* metrics.h: agenticd's counters and their Prometheus text (GET /metrics). Labels are fixed
 * words only: never a name, an id, a value from a request or a byte of output. The counters
 * are fed by the parts that see the events; the rendering is given the rest (gauges read from
 * the daemon's tables) by the front end that asks for it. */
#ifndef AGENTIC_MGMT_METRICS_H
#define AGENTIC_MGMT_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define METRICS_REFUSAL_REASONS 16  /* agent refusal reasons counted, at most */

/* A create took ms from request to ready. */
void metrics_provision(int64_t ms);
/* An agent connection was refused for reason (0 .. METRICS_REFUSAL_REASONS - 1). */
void metrics_refusal(int reason);
/* An exec started; its output bytes (stream 0 stdout, 1 stderr); its round trip in ms. */
void metrics_exec_started(void);
void metrics_exec_bytes(int stream, uint64_t n);
void metrics_exec_latency(int64_t ms);
/* An egress connection ended with decision (0 allow, 1 deny, 2 would_deny) and its bytes. */
void metrics_egress(int decision, uint64_t up, uint64_t down);

/* What the rendering reads from the daemon. */
struct metrics_view {
	uint32_t sandboxes[4];           /* creating, ready, removing, conflict */
	uint32_t tiers[2];               /* sandboxes not free, by posture: T0, T1 */
	const char *const *taint_names;  /* the taint words, ntaints of them ... */
	const uint64_t *taints;          /* ... and the taints recorded since start, each */
	uint32_t ntaints;
	uint32_t agents_connected;
	uint32_t warm;                /* warm sandboxes not claimed (made or being made) */
	const char *const *refusal_names; /* the reasons' fixed words, nrefusals of them */
	uint32_t nrefusals;
	uint64_t refused_admins;
	size_t budget;
	size_t resident;                 /* bytes (VmRSS) */
};

/* The Prometheus text of every counter and of v, appended to b: 0 or ERR_LIMIT. */
int metrics_render(struct buf *b, const struct metrics_view *v);
/* VmRSS of this process in bytes, read without allocating; 0 when it cannot be read. */
size_t metrics_resident_bytes(void);

#endif
