/* confine.h: the bound a worker puts on itself once it knows its policy, before it reads a
 * byte of the workload's (docs/EGRESS.md "Why a worker process"): Landlock. */
#ifndef AGENTIC_EGRESS_CONFINE_H
#define AGENTIC_EGRESS_CONFINE_H

#include "egress/policy.h"

/* Restricts the calling process for good, as far as this kernel's Landlock goes: no file
 * opened but /dev/null, /etc/hosts, /etc/resolv.conf and ca_file (read), no directory read,
 * nothing made, removed or executed (ABI 1); with ABI 4, TCP connect only to the ports the
 * policy names (its allow entries', its routes' upstreams') and 53 (a resolver's TCP), no TCP
 * bind, in enforce mode (report mode may go to any port, and is not held); with ABI 6, no
 * signal and no abstract Unix socket outside the worker itself. The ABI it applied (1 or
 * more), 0 when the kernel has no Landlock, or -errno (nothing or not all applied: the
 * caller must not go on). */
int egress_confine(const struct egress_policy *p, const char *ca_file);

#endif
