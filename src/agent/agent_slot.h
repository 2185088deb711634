/* agent_slot.h: the agent module's own side of its state (src/agent/ and the unit tests only):
 * the writable slot of a sandbox, what the module was handed at start, and the calls between
 * its files (agent.h is its interface to the rest). */
#ifndef AGENTIC_AGENT_SLOT_H
#define AGENTIC_AGENT_SLOT_H

#include "agent.pb-c.h"
#include "agent/agent.h"

/* sb's agent state, writable (reset first when the slot was reused since). */
struct agent_sb *agent_slot(const struct sandbox *sb);
/* Closes the pinned peer of a connection waiting for its pid. */
void agent_peer_forget(struct agent_sb *a);

/* What agenticd.c hands over at start (agent_init), and the refusals counted. */
extern const struct config *agent_cfg;
extern struct grpc_server *agent_server;
extern uint64_t agent_nrefused;

/* Why a peer was refused (agent_refusal_name's words). */
enum refusal {
	RF_WORKLOAD_UID, RF_UNKNOWN_UID, RF_CONFLICT, RF_REMOVING, RF_NOT_INIT, RF_AGENT_ID,
	RF_INSTANCE_ID, RF_DUPLICATE, RF_REGISTRATION,
};

/* agent_refusal.c: a refusal counted (metrics, agent_refused) and logged (one line per uid per
 * LIMIT_AGENT_REFUSAL_LOG_MS); agent_refuse also ends the call (UNAUTHENTICATED, reason), and
 * agent_refuse_guest says why a guest's peer was not admitted. */
void agent_refusal_note(int why, const struct grpc_peer *p, const char *reason);
void agent_refuse(struct grpc_call *call, int why, const char *reason);
void agent_refuse_guest(struct grpc_call *call, const struct grpc_peer *p);

/* agent_outack.c: the output acks. */
void agent_out_ack_send(struct sandbox *sb);
void agent_out_resume(struct sandbox *sb);
void agent_out_chunk(struct sandbox *sb, const Agentic__Sandbox__V1__OutputChunk *o, int s);
void agent_out_result(struct sandbox *sb, const Agentic__Sandbox__V1__CommandResult *r);

/* agent_connect.c: flags of what arrived before the pid namespace could be checked
 * (grpc_call_app bytes), and the stream known to be the sandbox's (agent_pid_known). */
struct pending {
	bool reg;
	bool ready;
};
void agent_authed(struct sandbox *sb, bool reg_seen, bool ready_seen);

#endif
