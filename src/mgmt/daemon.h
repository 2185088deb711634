/* daemon.h: the daemon's own state (struct daemon, the one `agenticd`), the loop's epoll
 * tags, and the parts not yet split into headers of their own: the admin API, exec sessions
 * and transcripts. The rest has a header per concern: sandbox.h (the table), lifecycle.h (a
 * sandbox's life), runtime.h (what runs it; runtime_docker.h, engine.h), netpool.h, agent.h,
 * host.h, share.h, recover.h.
 *
 * One process, one thread, one epoll loop. Every table is sized from the config and taken once
 * at start from one region (daemon_budget says how much); nothing grows after. Runtime calls
 * never block the loop: each is an engine job stepped when its socket is ready. */
#ifndef AGENTIC_MGMT_DAEMON_H
#define AGENTIC_MGMT_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "docker/docker.h"
#include "grpc/grpc.h"
#include "http/http.h"
#include "mgmt/agent.h"
#include "mgmt/config.h"
#include "mgmt/host.h"
#include "mgmt/lifecycle.h"
#include "mgmt/netpool.h"
#include "mgmt/policy.h"
#include "mgmt/recover.h"
#include "mgmt/runtime_docker.h"
#include "mgmt/sandbox.h"
#include "mgmt/seccomp.h"
#include "mgmt/share.h"

/* ---- epoll tags: kind in the high 32 bits, an index in the low ---- */
enum tag_kind { TAG_SIGNAL = 1, TAG_TIMER, TAG_ADMIN_LISTEN, TAG_ADMIN_CONN, TAG_GRPC, TAG_JOB,
		TAG_ADMIN_GRPC };

/* ---- admin connections ---- */
enum admin_phase { AC_FREE = 0, AC_READ, AC_WAIT, AC_WRITE, AC_LIST, AC_ZOMBIE, AC_EXEC,
		   AC_FILE };

struct admin_conn {
	enum admin_phase phase;
	int fd;
	uint32_t gen;
	uid_t uid;
	pid_t pid;
	bool allowed;
	bool keep_alive;
	int64_t idle_since;
	struct http_parser parser;
	char head[LIMIT_HTTP_HEAD_BYTES];
	uint8_t rbuf[LIMIT_ADMIN_READ_BYTES];
	uint32_t rlen, roff;
	uint8_t body[LIMIT_ADMIN_BODY_BYTES];
	uint32_t body_len;
	bool body_too_big;
	uint8_t out[LIMIT_ADMIN_OUT_BYTES];
	uint32_t out_len, out_off;
	uint32_t list_cursor;         /* AC_LIST: next sandbox slot to render */
	bool list_first;
	struct create_req req;
	/* AC_EXEC: the session (exec.c) and, upgraded, the stdin frame being read */
	int32_t exec;
	bool upgraded;
	uint8_t fhdr[8];
	uint8_t fhdr_len;
	uint32_t fneed;
	/* output beyond `out`, waiting on disk so a slow client costs neither memory nor bytes */
	int spill_fd;
	uint64_t spill_w, spill_r;
	/* the session stopped feeding this client (its spill hit a limit or failed): what is
	 * queued still goes out, then the gRPC call ends with `error`, an HTTP one just closes */
	bool dropped;
	/* a gRPC Exec call (no fd of its own): output is framed as on the upgraded stream in
	 * out/spill and sent as ExecOutput messages as the call's send buffer frees */
	struct grpc_call *call;
	bool sniffed;                 /* the first bytes were checked for the HTTP/2 preface */
	int32_t exit_code;
	char error[256];
	/* AC_FILE: a transcript file being sent */
	int file_fd;
	uint64_t file_left;
};

/* ---- the daemon ---- */
struct daemon {
	struct config cfg;
	struct docker_client dc;
	char engine_version[64];
	int epfd, sigfd, timerfd, admin_fd, lock_fd;
	struct grpc_server *grpc;
	struct grpc_server *admin_grpc; /* gRPC on the admin socket: connections handed over */
	struct sandbox *sb;
	uint32_t nsb;                 /* = max_sandboxes */
	uint32_t live;                /* slots not SB_FREE */
	struct idalloc uids, subnets;
	/* The pool's /28s that a network agenticd did not make covers (another daemon's, an
	 * operator's, a leftover): taken in `subnets` so that no create asks the engine for them,
	 * given back when a later reading of the engine's networks no longer finds them. */
	uint64_t *foreign;
	uint32_t nforeign;
	struct admin_conn *conns;
	uint32_t nconns;
	struct netpool pool;          /* warm networks */
	struct runtime_docker docker; /* the runtime */
	struct runtime *rt;           /* = &docker.rt */
	void *rt_storage;             /* the runtime's call slots, in the region */
	bool stopping;
	bool admin_group_known;
	gid_t admin_gid;
	char self_exe[LIMIT_PATH_BYTES];
	/* Whose sandboxes are whose when several agenticd share one engine: every container and
	 * network this daemon makes carries the label agentic-daemon=<owner>, and recovery and
	 * the event stream look only at those. The owner is a hash of the agentshare root, so a
	 * restarted daemon on the same root is the same owner. */
	char owner[17];
	char owner_label[32];         /* "agentic-daemon=<owner>", a Docker label filter */
	char seccomp_opt[SECCOMP_OPT_BYTES]; /* SecurityOpt "seccomp=<profile>", set at start */
	size_t budget;
	uint64_t refused_agents, refused_admins;
};

extern struct daemon *agenticd;

/* agenticd.c */
void loop_watch(int fd, uint32_t events, enum tag_kind kind, uint32_t index);
void loop_unwatch(int fd);

/* admin.c: the HTTP API */
/* Accepts pending connections, checking each peer (SO_PEERCRED, SO_PEERGROUPS). */
void admin_accept(void);
void admin_event(uint32_t index, uint32_t events);
/* Closes connections idle for LIMIT_ADMIN_IDLE_MS. */
void admin_tick(int64_t now);
/* The create or remove this connection waited for has finished. */
void admin_finish_sandbox(int32_t conn, uint32_t gen, const struct sandbox *sb, int status);
void admin_finish_error(int32_t conn, uint32_t gen, int status, const char *code,
			const char *message);
/* /metrics counters fed by the other parts. */
void metrics_provision(int64_t ms);
void metrics_refusal(int reason);
/* gRPC on the admin socket: agentic.sandbox.v1.AgentService/Exec, for connections whose
 * first bytes are the HTTP/2 preface (admin_event hands them to agenticd->admin_grpc). */
extern const struct grpc_method admin_grpc_methods[];
extern const size_t admin_grpc_nmethods;
/* Stops accepting (closes the listener); open exchanges finish. */
void admin_shutdown(void);

/* Exec and transcripts: admin.c's side of an exec session. */
/* Queues output (stream 0 stdout, 1 stderr) for the client, framed for its mode, in `out`
 * and beyond it in the spill file; 0 or -errno (the spill is over its limit or failed: the
 * client is dropped and detached from the session, the transcript is not affected). */
int admin_exec_output(int32_t conn, int stream, const void *data, size_t len);
/* The session's command ended: the final frame or object follows what is queued;
 * transcript_error (or NULL) says why the run's transcript is incomplete (a full disk). */
void admin_exec_done(int32_t conn, int32_t exit_code, int64_t duration_ms, const char *error,
		     const char *transcript_error);
/* The session took the stdin held for it: read more from the client. */
void admin_exec_stdin_taken(int32_t conn);

/* runlog.c: runs/run-<UTC>-<n>/ with stdout.log, stderr.log, commands.log, metrics.json and
 * trace/events.jsonl, 0700/0600 from creation; `current` points at the open run. Every write
 * is a plain write(2) to a local file; a failure (ENOSPC) is logged once, kept in run.error
 * until a write succeeds again, and the daemon goes on. A new run sets the sandbox's out_next
 * and out_results to 0, an adopted one to its file sizes and last result seq. */
/* The agent is READY: continues the open run when its pid namespace is the run's (a
 * reconnect, or agenticd restarted), else starts a new one. Returns true when a run began. */
bool runlog_ready(struct sandbox *sb);
/* The container stopped or the sandbox is going: a stop event, final metrics, files closed. */
void runlog_stop(struct sandbox *sb, const char *why);
/* One line in trace/events.jsonl: {"ts":..,"event":event} plus the sandbox's ids. */
void runlog_event(struct sandbox *sb, const char *event);
/* Appends to stdout.log (stream 0) or stderr.log; returns how much was written (all of it
 * when no run is open: there is nowhere to write). */
size_t runlog_output(struct sandbox *sb, int stream, const void *data, size_t len);
/* The command's start line (and event); false, and nothing counted, when the line could not
 * be written: the command is then not to be started. */
bool runlog_command_start(struct sandbox *sb, const char *id, char *const *argv, size_t n);
/* The command's end line in commands.log (with "seq" when seq > 0: the init's numbering,
 * which an adopted run reads back), then its event and the metrics; false when the line
 * could not be written, and then, for an init's result (seq > 0, sent again later), nothing
 * is counted. */
bool runlog_command_end(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
			uint64_t seq);
/* Opens the transcript file of a run (NULL: current) for reading: 0, -ENOENT, -EINVAL. */
int runlog_open(const struct sandbox *sb, const char *run, int stream, int *fd);
/* metrics.json is rewritten from the loop, not inline: a command's start within
 * RUN_METRICS_DELAY_MS, its end at the end of the loop's turn (after the exit status went to
 * the client), a run's stop at once. runlog_tick writes those due at now;
 * runlog_next_deadline says when the next one is due (monotonic ms), or INT64_MAX. */
void runlog_tick(int64_t now);
int64_t runlog_next_deadline(void);

/* exec.c: one engine for NDJSON, the upgraded stream and gRPC Exec. */
#define EXEC_NDJSON 1
#define EXEC_RAW 2
#define EXEC_DETACHED 3
#define EXEC_GRPC 4
struct exec_req {
	const char *argv[LIMIT_SANDBOX_CMD_ARGS + 1];
	uint32_t argc;
	const char *env[LIMIT_SANDBOX_ENV + 1];   /* "K=V" */
	uint32_t nenv;
	const char *working_dir;
	int32_t timeout_seconds;
};
/* Writes the command's start line, then sends the CommandRequest; the session is tied to
 * conn (or -1: detached). Returns the session index, or ERR_LIMIT (too many), ERR_STATE (the
 * agent is not connected), -EAGAIN (the agent's send queue is full), or another negative
 * errno: the transcript cannot be written (exec_transcript_error), nothing was started. */
int exec_begin(struct sandbox *sb, const struct exec_req *req, int32_t conn, int mode);
static inline bool exec_transcript_error(int x)
{
	return x < 0 && x != ERR_LIMIT && x != ERR_STATE && x != -EAGAIN;
}
/* Stdin from the client: takes up to len bytes (0 when a chunk is still in flight). */
size_t exec_stdin(int32_t x, const void *data, size_t len, bool eof);
/* The client is gone: stdin ends, output goes on to the transcript only. */
void exec_detach(int32_t x);
/* A command id as agenticd writes it, "x<slot>.<gen>", read back exactly: each number decimal
 * digits only (no sign, space or leading zero) and within 32 bits; 0 or -EINVAL. */
int exec_id_parse(const char *id, uint32_t *slot, uint32_t *gen);
/* The session table's size and slots (static; in the memory budget). */
size_t exec_table_bytes(void);
uint32_t exec_table_slots(void);
/* From the agent stream. Output goes to the transcript, then what of it was written (all of it
 * when exact is false) to the client; returns how much the transcript took. A result is
 * written (seq > 0: the init's numbering) and then reported; false when its line could not
 * be written, and then nothing happened. */
size_t exec_output(struct sandbox *sb, const char *id, int stream, const void *data, size_t len,
		   bool exact);
bool exec_result(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
		 const char *error, uint64_t seq);
void exec_stdin_ack(struct sandbox *sb, const char *id, uint64_t consumed);
/* The agent can take messages again (on_writable, a reconnect). */
void exec_agent_writable(struct sandbox *sb);
/* The sandbox's init is gone for good (container stopped, removed): every session ends. */
void exec_sandbox_gone(struct sandbox *sb, const char *why);
/* Counters for /metrics. */
struct exec_stats {
	uint64_t started, bytes[2];
	uint64_t latency_bucket[12];  /* exec round trip, ms: le 1,2,5,10,20,50,100,250,500,1000,5000,+Inf */
	uint64_t latency_sum_ms, latency_count;
};
extern struct exec_stats exec_stats;

#endif
