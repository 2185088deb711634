/* init.h: agentic-init below its applet file: the one-time setup checks and the agent
 * channel to agenticd (DESIGN.md §6-§8, /work/protocol-contract.md).
 *
 * Single-threaded. The applet owns the event loop; these parts own no fds of their own but the
 * gRPC client's, and allocate nothing after setup: the channel runs over storage the caller
 * maps at start (init_agent_storage_bytes). Nothing here logs an env value. */
#ifndef AGENTIC_INIT_H
#define AGENTIC_INIT_H

#include <stdint.h>

#include "grpc/grpc.h"
#include "init/env.h"

/* Where the workload's files live (DESIGN.md §6): writable by the workload uid. */
#define INIT_WORKSPACE "/workspace"

/* ---- setup (setup.c) ---- */

/* Checks what the init starts with (DESIGN.md §6): uid and gid 0, bounding set exactly
 * {SETUID, SETGID}, NoNewPrivs 1. 0, or a negative errno with what is wrong in *step. */
int init_start_check(const char **step);
/* Forks a child that takes the workload identity exactly as a workload does
 * (priv_drop_to_workload), checks its own /proc/self/status, then creates and removes a file
 * in dir. 0 when all of it worked; else a negative errno with the failing step in *step. */
int init_workspace_check(const char *dir, uint32_t uid, uint32_t gid, const char **step);
/* Writes the setup sentinel at path with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, after checking
 * that its directory is the control tmpfs: a tmpfs mounted noexec,nosuid,nodev, mode 0700,
 * owned by uid:uid. 0, or a negative errno with the failing step in *step. */
int init_sentinel_write(const char *path, uint32_t uid, const char **step);

struct init_sysinfo {
	char hostname[65];
	char kernel[65];
	int32_t cpu_cores;
	int64_t memory_bytes;
};
/* What the registration reports: uname's nodename and release, the CPUs this process may run
 * on, total memory. Fields that cannot be read stay empty or 0. */
void init_sysinfo_read(struct init_sysinfo *si);

/* ---- time ---- */
/* CLOCK_MONOTONIC and CLOCK_REALTIME in milliseconds. */
int64_t init_now_ms(void);
int64_t init_wall_ms(void);

/* ---- the agent channel (agent.c) ----
 * One Connect stream to agenticd over the agent socket: registration, READY heartbeats at the
 * interval the ack names, answers to pings; redialled with backoff (INIT_BACKOFF_MIN_MS
 * doubling to INIT_BACKOFF_MAX_MS) whenever the stream ends, registering and sending READY
 * again each time. */
#define INIT_BACKOFF_MIN_MS 100
#define INIT_BACKOFF_MAX_MS 5000
#define INIT_ACK_TIMEOUT_MS 10000          /* a registration unanswered this long is redialled */
#define INIT_HEARTBEAT_DEFAULT_S 5
#define INIT_HEARTBEAT_MAX_S 300

enum init_agent_state {
	INIT_AGENT_WAITING,      /* no stream: dialling again at due_ms */
	INIT_AGENT_REGISTERING,  /* registration sent, waiting for the ack until due_ms */
	INIT_AGENT_READY,        /* registered: next heartbeat at due_ms */
};

struct init_agent {
	struct grpc_client *client;
	struct grpc_call *call;
	enum init_agent_state state;
	int64_t due_ms;           /* monotonic */
	int64_t started_ms;       /* monotonic, for uptime */
	uint32_t backoff_ms;      /* the wait after the next failure */
	uint32_t heartbeat_ms;
	int heartbeat_pending;    /* the AgentStatus of a heartbeat owed that did not fit the
				   * send queue, or 0 */
	int shutdown_requested;   /* agenticd sent ShutdownSignal */
	int failures;             /* dial or stream failures since the last registration */
	uint64_t registrations;
	const struct init_env *env;
	const struct init_sysinfo *si;
};

/* The storage the channel's gRPC client needs for the socket at path (its whole budget). */
size_t init_agent_storage_bytes(const char *path);
/* Sets up the channel over storage (len bytes); the first dial happens at the first
 * init_agent_tick. env and si must outlive the channel. 0, ERR_LIMIT or -errno. */
int init_agent_setup(struct init_agent *a, const struct init_env *env,
		     const struct init_sysinfo *si, void *storage, size_t len);
/* The fd to watch for readability (stable across redials); call init_agent_io when it is. */
int init_agent_fd(const struct init_agent *a);
void init_agent_io(struct init_agent *a);
/* Does what is due at now (dial, give up on an ack, heartbeat); returns when it next wants to
 * be called (monotonic ms). */
int64_t init_agent_tick(struct init_agent *a, int64_t now);
/* On the way out: a SHUTTING_DOWN heartbeat and a half-close, flushed for at most
 * timeout_ms. */
void init_agent_stop(struct init_agent *a, int timeout_ms);

#endif
