/* agent.h: the agent module's interface: the agent socket's resolver (which peer is which
 * sandbox's init, agent_resolver.c) and the Connect stream each init holds (registration, READY,
 * output, results, acks: agent_connect.c, agent_outack.c, agent_claim.c), and the agent state
 * of every sandbox slot (struct agent_sb, agent_slot.c), written only in src/agent/. It may
 * call the libraries and the modules below it (lifecycle, broker, runtime, transcript,
 * sandbox, config, metrics); the ones above (verify, admin, daemon) call it. */
#ifndef AGENTIC_MGMT_AGENT_H
#define AGENTIC_MGMT_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"
#include "sandbox/sandbox.h"

struct config;

/* ---- a sandbox's agent connection: one per sandbox slot, in a table this module owns ---- */
struct agent_sb {
	uint32_t gen;                 /* the sandbox slot's gen it is of: another, and it is reset */
	bool set;                     /* reset for gen */
	struct grpc_call *call;       /* the init's Connect stream, NULL: none */
	bool authed;
	bool registered;
	bool ready;                   /* READY with setup_status "ready" seen */
	bool stdin_ack;               /* the agent acknowledges stdin (registration label) */
	/* Output acks (OutputAck, agent.proto), when the agent registered with the label
	 * agentic-output-ack=1: the init numbers its stdout and stderr bytes and its results from
	 * the start of its life (= the run), keeps what is not acked, and after each resume sends
	 * it all again; what the transcript has decides what is written, so every byte lands
	 * once, in order, across reconnects and agenticd restarts. */
	bool output_ack;
	bool egress;                  /* registered with the label agentic-egress=1 */
	bool conn_verified;           /* the connection in the sandbox's slot is its init's */
	int status;
	int egress_fd;                /* the number of the init's proxy listener (label
				       * agentic-egress-listener), -1: none said */
	int peer_pidfd;               /* the peer of a connection waiting for pid; -1: none */
	int64_t seen_ms;              /* wall clock: the last message of its stream */
	uint32_t exec_running;        /* exec sessions waiting for their CommandResult (exec.c) */
	/* the init's own report of itself (registration label agentic-self-status: lines of its
	 * /proc/self/status), for the verifier; "" when none came */
	char self[LIMIT_AGENT_SELF_BYTES];
};

/* sb's agent state, read-only (reset first when the slot was reused since). */
const struct agent_sb *agent_of(const struct sandbox *sb);
/* The lifecycle's hook (lifecycle_hooks.agent_is_ready): the agent is READY. */
bool agent_is_ready(void *ctx, const struct sandbox *sb);

/* What the agent socket is handed at start: the config, the gRPC server it runs on (NULL:
 * none, as in a test) and the table of nslots (max_sandboxes) entries, storage taken at start
 * (NULL: a scratch table of AGENT_SCRATCH_SLOTS, for a test or the simulator). Every entry
 * is reset. */
#define AGENT_SCRATCH_SLOTS 8
void agent_init(const struct config *cfg, struct grpc_server *grpc, struct agent_sb *slots,
		uint32_t nslots);
/* Peers refused a Connect since start. */
uint64_t agent_refused(void);
extern const struct grpc_method agent_methods[];
extern const size_t agent_nmethods;
/* The gRPC server's admit hook for the agent socket: the peer's sandbox slot when its uid is
 * a live sandbox's control uid and it is that sandbox's init itself (or may be, while the
 * container's pid is not known yet), else -1: a guest, refused all but Health/Check. */
int agent_admit(void *ctx, int fd, struct grpc_peer *peer);
/* The container's pid is known (or changed): a connection that waited for it is the init's
 * (and its Connect goes on) or is closed. */
void agent_pid_known(struct sandbox *sb);
/* A VM's control connection (runtime_vm.h), connected by agenticd to the VM's own socket:
 * taken as its init's connection, into the sandbox's slot (no SO_PEERCRED: the socket says
 * whose it is). fd is the server's from here. 0 or an error. */
int agent_vm_channel(struct sandbox *sb, int fd);
/* Whether the sandbox's slot holds a connection now (a VM's is not dialled again then). */
bool agent_vm_busy(const struct sandbox *sb);
/* A ShutdownSignal to the sandbox's init (grace_s for its commands): false when it has no
 * registered stream to take it. */
bool agent_shutdown(struct sandbox *sb, int grace_s);
/* The sandbox's slot is given up: its connection closed, the pinned peer let go. */
void agent_forget(struct sandbox *sb);
/* Refusal reasons, as fixed words for /metrics. */
#define AGENT_REFUSAL_REASONS 9
const char *agent_refusal_name(int reason);
/* A claimed warm sandbox's SandboxClaim (its name and the claim's env) to its init, now if
 * it is registered, else when it registers. */
void agent_claim_send(struct sandbox *sb);
/* Ends the sandbox's Connect stream (UNAVAILABLE, why). */
void agent_drop(struct sandbox *sb, const char *why);
/* Output acks due: a resume after a failed transcript write, at its retry time (the run is
 * opened again first when it could not be). */
void agent_tick(int64_t now);
/* The earliest such retry (monotonic ms), or INT64_MAX. */
int64_t agent_next_deadline(void);

#endif
