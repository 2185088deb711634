/* looptag.h: agenticd's epoll tags, what each descriptor on its one loop is: an event's
 * data.u64 is a kind (below) in the high 32 bits and an index (a slot) in the low. The loop
 * (daemon/agenticd.c) dispatches on the kind; a module that watches its own descriptors (the
 * admin API, the egress broker) tags them with its kinds, so they sit here, below them all.
 * The runtimes and the verifier are handed their kind at start instead. */
#ifndef AGENTIC_BASE_LOOPTAG_H
#define AGENTIC_BASE_LOOPTAG_H

enum tag_kind { TAG_SIGNAL = 1, TAG_TIMER, TAG_ADMIN_LISTEN, TAG_ADMIN_CONN, TAG_GRPC, TAG_JOB,
		TAG_ADMIN_GRPC, TAG_VERIFY, TAG_EGRESS_DATA, TAG_EGRESS_CTL,
		TAG_EGRESS_LISTEN, TAG_VM, TAG_E2B_LISTEN, TAG_E2B_CONN, TAG_FLEET };

#endif
