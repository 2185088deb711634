/* taint.h: a live sandbox's posture changing: a taint seen (sticky for the rest of its
 * container's life) or its network read back from the engine. Each change is a log line, a
 * trace event in the open run (trace/events.jsonl), sandbox.json rewritten and a counter. */
#ifndef AGENTIC_MGMT_TAINT_H
#define AGENTIC_MGMT_TAINT_H

#include <stdbool.h>
#include <stdint.h>

#include "sandbox/posture.h"

struct sandbox;

/* A taint seen (source: the engine's event word, "operator", ...: a fixed word, never a
 * value from a workload or a command line). Sticky: a taint already held changes nothing
 * and returns 0. When it is new: the log line, the trace event, the record rewritten, the
 * counter; returns 1. */
int posture_taint(struct sandbox *sb, enum posture_reason r, const char *source);
/* The engine's view of the sandbox's network, read at create or at recovery: ok when it is
 * the managed internal network (Internal, inhibit_ipv4) and no other network is attached.
 * Logged (and traced) when it changes the tier. */
void posture_set_network(struct sandbox *sb, bool ok, const char *why);
/* agentic_posture_taints_total{reason}: taints recorded since agenticd started. */
uint64_t posture_taints_total(enum posture_reason r);

#endif
