/* agent.h: the agent socket: the resolver (which peer is which sandbox's init) and the
 * Connect stream each init holds (registration, READY, output, results, acks). */
#ifndef AGENTIC_MGMT_AGENT_H
#define AGENTIC_MGMT_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grpc/grpc.h"
#include "sandbox/sandbox.h"

struct config;

/* What the agent socket is handed at start: the config and the gRPC server it runs on (NULL:
 * none, as in a test). */
void agent_init(const struct config *cfg, struct grpc_server *grpc);
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
