/* daemon.h: the parts of agenticd and what they share: the sandbox table with its uid and
 * subnet maps, Docker calls driven by the one event loop, the agent resolver (gRPC), the admin
 * API (HTTP/1.1 + JSON), the host layout (sockets, agentshare) and start-up recovery.
 *
 * One process, one thread, one epoll loop. Every table is sized from the config and taken once
 * at start from one region (daemon_budget says how much); nothing grows after. Docker calls
 * never block the loop: each is a `struct job` stepped when its socket is ready. */
#ifndef AGENTIC_MGMT_DAEMON_H
#define AGENTIC_MGMT_DAEMON_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "docker/docker.h"
#include "grpc/grpc.h"
#include "http/http.h"
#include "mgmt/config.h"
#include "mgmt/policy.h"
#include "mgmt/seccomp.h"

/* ---- epoll tags: kind in the high 32 bits, an index in the low ---- */
enum tag_kind { TAG_SIGNAL = 1, TAG_TIMER, TAG_ADMIN_LISTEN, TAG_ADMIN_CONN, TAG_GRPC, TAG_JOB,
		TAG_ADMIN_GRPC };

/* ---- Docker calls on the loop ---- */
enum job_owner { JOB_SANDBOX, JOB_POOL, JOB_EVENTS };

struct job {
	struct docker_call call;
	enum job_owner owner;
	uint32_t index;     /* the sandbox slot, for JOB_SANDBOX */
	uint32_t id;        /* its place in the job registry (epoll tag) */
	int reg_fd;         /* fd registered with epoll, or -1 */
	bool active;        /* begun and not yet ended */
	bool waiting;       /* asked for a connection while all were busy */
	bool soon;          /* the call wants a step without waiting for I/O */
	int32_t next_wait;  /* FIFO of waiting jobs */
};

/* Begins the call of the owner's current step; a busy pool queues the job (the call is begun
 * again when a connection frees up). Returns 0 or the begin error (the job is then not
 * active). */
int job_start(struct job *j);
/* Ends the call (drops its epoll registration first). */
void job_end(struct job *j);

/* ---- the sandbox table ---- */
enum sb_state {
	SB_FREE = 0,
	SB_CREATING,   /* persisted "creating" */
	SB_READY,      /* persisted "ready" (created; the agent may be connected or not) */
	SB_REMOVING,   /* persisted "removing" */
	SB_CONFLICT,   /* found at start with a uid another container claims: never trusted */
};

enum sb_step {
	STEP_IDLE = 0,
	STEP_NET_CREATE,
	STEP_NET_SCAN,      /* the engine said our /28 overlaps: read its networks again */
	STEP_CT_CREATE,
	STEP_CT_START,
	STEP_CT_INSPECT,
	STEP_WAIT_READY,
	STEP_RB_LOGS,       /* rollback: read the init's last log lines */
	STEP_RB_CT_REMOVE,
	STEP_RB_NET_REMOVE,
	STEP_RM_STOP,       /* remove: stop with stop_grace_ms */
	STEP_RM_CT_REMOVE,
	STEP_RM_NET_REMOVE,
	STEP_REFRESH,       /* re-read State.Pid after the container (re)started */
};

#define SB_ID_BYTES 37

/* ---- a run's transcript (README: Transcripts), written by runlog.c ---- */
enum run_file { RUN_STDOUT, RUN_STDERR, RUN_COMMANDS, RUN_EVENTS, RUN_FILES };

struct run {
	bool open;
	int dirfd;                    /* runs/<name>/ */
	int fd[RUN_FILES];
	char name[RUN_NAME_BYTES];    /* run-<UTC timestamp>-<n> */
	char key[96];                 /* pid namespace/host pid/start time of the init: same
				       * key, same run */
	int64_t started_ms;           /* wall clock */
	uint64_t bytes[2];            /* stdout, stderr */
	uint32_t commands, running;
	int32_t codes[RUN_CODES];     /* exit codes seen, with their counts */
	uint32_t code_count[RUN_CODES];
	uint32_t ncodes;
	int error;                    /* the first write error (-errno), or 0 until that file is
				       * written again */
	int error_file;               /* the file it happened to (enum run_file) */
	int64_t metrics_due;          /* monotonic ms: metrics.json is stale and is written
				       * then (runlog_tick); 0 when it is up to date */
};

struct sandbox {
	enum sb_state state;
	enum sb_step step;
	uint32_t gen;                 /* bumped whenever the slot is reused */
	char name[SB_NAME_BYTES];
	char instance_id[SB_ID_BYTES];
	char container_id[DOCKER_ID_SIZE];
	char network[SB_NET_BYTES];   /* the network's name (ours, or the operator's) */
	char network_id[DOCKER_ID_SIZE];
	char image[CONFIG_STR_BYTES];
	char subnet_text[20];
	uint32_t uid;
	int32_t subnet;               /* index in sandbox_subnet_pool, -1 for none */
	uint8_t net_scans;            /* engine networks read again for this create */
	bool uid_taken;
	bool net_managed;             /* our network, removed with the sandbox */
	bool net_exists;
	bool ct_exists;
	bool running;
	bool force, keep_workspace;
	bool dir_made;
	uint64_t disk_bytes;          /* the workspace image's size (its disk budget) */
	bool writable_root;           /* its root layer is writable, up to disk_bytes */
	bool rollback;                /* the create failed; undoing it */
	bool gone;                    /* the container was removed behind our back */
	int64_t pid;                  /* State.Pid, 0 when not running */
	char pid_ns[48];              /* readlink of /proc/<pid>/ns/pid */
	int init_pidfd;               /* that process, pinned when pid was read; -1: none */
	int peer_pidfd;               /* the peer of a connection waiting for pid; -1: none */
	bool conn_verified;           /* the connection in the sandbox's slot is its init's */
	int64_t created_ms, ready_ms; /* wall clock */
	int64_t t_begin, t_net, t_ct, t_start, t_auth; /* monotonic ms of a create's steps */
	int64_t deadline;             /* monotonic ms: ready_timeout of a create, or 0 */
	/* agent stream */
	struct grpc_call *agent;
	bool agent_authed;
	bool agent_registered;
	bool agent_ready;             /* READY with setup_status "ready" seen */
	bool agent_stdin_ack;         /* the agent acknowledges stdin (registration label) */
	int agent_status;
	int64_t agent_seen_ms;
	/* Output acks (OutputAck, agent.proto), when the agent registered with the label
	 * agentic-output-ack=1: the init numbers its stdout and stderr bytes and its results from
	 * the start of its life (= the run), keeps what is not acked, and after each resume sends
	 * it all again; what the transcript has decides what is written, so every byte lands
	 * once, in order, across reconnects and agenticd restarts. */
	bool agent_output_ack;
	bool out_stalled;             /* a transcript write failed: resume at out_retry_ms */
	bool out_ack_owed;            /* an ack (or resume) did not fit the send queue */
	bool out_resume_owed;
	bool out_gap_logged;          /* a gap in the init's offsets was logged on this stream */
	uint32_t out_epoch;           /* the current resume epoch */
	uint64_t out_next[2];         /* the init offset of the next stdout, stderr byte wanted */
	uint64_t out_unacked;         /* ring bytes (data and record overhead) since the last ack */
	uint64_t out_results;         /* the seq of the last result written */
	int64_t out_retry_ms;         /* monotonic */
	/* the admin connection waiting for this create or remove, or -1 */
	int32_t waiter;
	uint32_t waiter_gen;
	int err_status;               /* HTTP status of a failed create */
	const char *err_code;         /* its API error code */
	char error[SB_ERROR_BYTES];
	char init_log[LIMIT_CREATE_LOG_BYTES]; /* the init's last log lines, at a failed create */
	uint32_t log_len;
	int64_t retry_at;             /* monotonic ms: retry a failed rollback or remove step */
	/* seen on the event stream, acted on once the sandbox's own call is done */
	bool ev_start, ev_die, ev_destroy;
	int64_t exit_code;
	struct create_req *req;       /* the create's request, until the container exists */
	/* what the request asked for, kept for inspect and sandbox.json */
	uint16_t ncmd, nlabels, nmounts;
	uint32_t mount_ro;            /* bit i: mount i read-only */
	char cmd[LIMIT_SANDBOX_CMD_BYTES];
	uint32_t cmd_len;
	char labels[LIMIT_SANDBOX_LABEL_BYTES];
	uint32_t labels_len;
	char mounts[LIMIT_SANDBOX_MOUNT_BYTES];
	uint32_t mounts_len;
	struct policy_mount_id mount_id[LIMIT_SANDBOX_MOUNTS]; /* what each source was, checked */
	struct job job;
	struct run run;
	uint32_t exec_running;        /* exec sessions waiting for their CommandResult */
};

/* Appends s (and its NUL) to a string run; ERR_LIMIT when it does not fit. */
int strrun_add(char *run, uint32_t *len, uint32_t cap, const char *s);
/* The string after p in a run (p == NULL: the first). */
const char *strrun_next(const char *run, uint32_t len, const char *p);

/* ---- a parsed create request (lives in its admin connection) ---- */
struct create_req {
	const char *name;             /* NULL: sbx-<8 hex> */
	const char *image;            /* NULL: default_image */
	const char *network;          /* NULL: a managed network */
	const char *env[LIMIT_SANDBOX_ENV + 1];
	uint32_t nenv;
	const char *cmd[LIMIT_SANDBOX_CMD_ARGS + 1];
	uint32_t ncmd;
	struct docker_kv labels[LIMIT_SANDBOX_LABELS + 1];
	uint32_t nlabels;
	struct docker_mount mounts[LIMIT_SANDBOX_MOUNTS + 1];
	struct policy_mount_id mount_id[LIMIT_SANDBOX_MOUNTS];
	uint32_t nmounts;
	uint64_t disk_bytes;          /* 0: default_disk_bytes */
	bool writable_root;           /* a writable root layer, bounded by StorageOpt size */
	char text[LIMIT_ADMIN_BODY_BYTES]; /* the strings above, unescaped */
	uint32_t text_len;
};

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

/* ---- warm networks (generic names make a small pool possible) ---- */
struct warm_net {
	char name[SB_NET_BYTES];
	char id[DOCKER_ID_SIZE];
	int32_t subnet;
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
	struct job pool_job, events_job;
	struct warm_net warm[LIMIT_WARM_NETWORKS];
	uint32_t nwarm;
	struct warm_net pool_pending; /* the network pool_job is creating */
	struct job **jobs;            /* registry: job id -> job */
	uint32_t njobs;
	int32_t wait_head, wait_tail;
	int64_t events_since;         /* unix seconds of the last event seen */
	int64_t events_retry;         /* monotonic ms when to reopen the event stream, or 0 */
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

/* host.c: sockets, peer checks, agentshare */
/* Makes agent_socket_dir (0755) and its parent (0700 root, or 0710 root:admin_gid when the
 * admin socket shares it), and the admin socket's directory. */
int host_prepare_dirs(const struct config *cfg, bool admin_group_known, gid_t admin_gid,
		      char *err, size_t err_size);
/* flock on ADMIN_SOCKET.lock, held for the daemon's life: -EWOULDBLOCK when another owns it. */
int host_lock(const struct config *cfg, int *lock_fd, char *err, size_t err_size);
/* The daemon's owner id (the agentic-daemon label; struct daemon.owner): 16 hex digits of a
 * 64-bit FNV-1a hash of agentshare_root, resolved through symlinks when it exists. */
int host_owner(const struct config *cfg, char *out, size_t size);
/* A listening Unix socket at path with mode/owner; a live one answering means another agenticd. */
int host_listen(const char *path, mode_t mode, gid_t gid, int *fd, char *err, size_t err_size);
/* Logs a warning for each /etc/subuid range overlapping the control uid range. */
/* Warns (one log line each) about subordinate-uid ranges in path (/etc/subuid) that overlap
 * the control uid range; returns how many do. A missing file has none. */
int host_warn_subuid(const struct config *cfg, const char *path);
/* 0 when the peer may use the admin API; else -EACCES with why. */
int host_admin_peer_ok(int fd, bool group_known, gid_t gid, uid_t *uid, pid_t *pid, char *why,
		       size_t why_size);
/* sd_notify READY=1 to $NOTIFY_SOCKET (path or @abstract); 0 when it is unset. */
int host_notify_ready(void);
/* agentshare: instances/<id>/ */
int share_instance_dir(const struct config *cfg, const char *id, char *out, size_t size);
/* The instance dir (0700), then, once the record is written, its workspace: a crash between
 * the two leaves an empty dir, which start-up sweeps. The workspace is workspace.img, an ext4
 * image of sb->disk_bytes (preallocated; -ENOSPC when the agentshare cannot hold it and keep
 * its last 1/20 for transcripts), mounted on workspace/ (a root-owned mode-0 directory when
 * unmounted); its root belongs to the workload uid. On failure nothing of it is left. */
int share_make(const struct config *cfg, const struct sandbox *sb, char *err, size_t err_size);
int share_make_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			 size_t err_size);
/* Mounts a kept sandbox's workspace image again when it is not mounted (after a reboot): 1
 * when it mounted it, 0 when there was nothing to do (mounted, or a plain directory from
 * before images), or -errno with err. */
int share_mount_workspace(const struct config *cfg, const struct sandbox *sb, char *err,
			  size_t err_size);
void share_sweep_empty(const struct config *cfg);
/* sandbox.json (0600): temp file, fsync, rename, fsync of the directory. */
int share_write_record(const struct config *cfg, const struct sandbox *sb);
/* Deletes the instance's record, unmounts its workspace and, when drop_workspace, deletes
 * the image (in a child process, off the loop); the instance dir goes when nothing else is
 * left in it. A kept workspace is its image. */
void share_retire(const struct config *cfg, const struct sandbox *sb, bool drop_workspace);
/* Reads instances/<id>/sandbox.json into sb (fields it holds); 0, -ENOENT or ERR_PARSE. */
int share_read_record(const struct config *cfg, const char *id, struct sandbox *sb,
		      char *state, size_t state_size);
/* Calls fn for every instance id that has a sandbox.json. */
int share_each_record(const struct config *cfg, int (*fn)(void *ctx, const char *id), void *ctx);
/* Reaps the workspace-deleting children (SIGCHLD). */
void share_reap_children(void);

/* sandbox.c: table, maps, rendering */
struct sandbox *sandbox_by_name(const char *name);
struct sandbox *sandbox_by_uid(uint32_t uid);
struct sandbox *sandbox_by_container(const char *id);
struct sandbox *sandbox_new(void);  /* NULL when the table is full */
/* Releases the slot with its uid and subnet. */
void sandbox_free(struct sandbox *sb);
/* Next-fit from the maps: 0 or ERR_LIMIT when every uid (/28) is taken. */
int sandbox_take_uid(struct sandbox *sb);
int sandbox_take_subnet(struct sandbox *sb);
/* Gives uid and subnet back (a uid a conflicting twin also claims stays reserved for it). */
void sandbox_release_ids(struct sandbox *sb);
void subnet_text(int32_t index, char *out, size_t size);
int32_t subnet_index(const char *cidr); /* -1 when not a /28 of the pool */
/* The pool's /28s an IPv4 CIDR overlaps, as [*first, *first + *count); -ENOENT when none
 * (another family, another range), -EINVAL when it is no CIDR. */
int subnet_span(const char *cidr, uint32_t *first, uint32_t *count);
/* Reading the engine's networks again: every foreign /28 is given back, then
 * subnet_foreign_add (a docker_result_each_subnet callback) takes what each network not ours
 * covers and no sandbox holds. */
void subnet_foreign_clear(void);
int subnet_foreign_add(void *ctx, const char *cidr, bool ours);
/* The engine refused a /28 we hold as overlapping another network: it stays taken, as
 * foreign. */
void subnet_refused(uint32_t index);
const char *sandbox_state_name(const struct sandbox *sb);
void sandbox_json(struct json_writer *w, const struct sandbox *sb);
/* Pins the sandbox's container PID 1 (sb->pid, State.Pid) as sb->init_pidfd, for the resolver,
 * and reads its pid namespace into sb->pid_ns (the run's key); both empty when the container
 * is not running or that process is already gone. */
void sandbox_read_pid_ns(struct sandbox *sb);
/* The request's binds, seen in the running container (sb->pid, sb->pid_ns), are the sources
 * that were checked (sb->mount_id): the engine resolved each path again when it started the
 * container. 0; -EPERM when one is something else, or -errno when it cannot be checked, with
 * the reason in why. */
int sandbox_check_binds(const struct sandbox *sb, char *why, size_t why_size);
/* The pid (in agenticd's namespace) of the process a pidfd names, 0 when it has exited, or -1
 * when that cannot be read. */
pid_t sandbox_pidfd_pid(int pidfd);

/* provision.c: create, remove, warm pool, events */
/* Starts a create; its answer reaches the sandbox's waiter through admin_finish_*(), possibly
 * before this returns (a create refused at once). */
void provision_create(struct sandbox *sb, struct create_req *req);
/* Starts a remove: -EBUSY while the sandbox is being created or removed. */
int provision_remove(struct sandbox *sb, bool force, bool keep_workspace);
/* The job's socket is ready (epoll). */
void provision_job_event(uint32_t id);
/* The agent reported READY with setup_status "ready" on an authenticated stream. */
void provision_ready(struct sandbox *sb);
/* Timeouts, retries, waiting jobs, event-stream flags, pool refill; the next deadline
 * (monotonic ms) the loop must wake for. */
void provision_tick(int64_t now);
/* Test-only failpoint: true when agenticd runs with AGENTIC_FAULT=init-env, which hands every
 * new init a control gid that differs from its uid. The init must refuse that environment, and
 * the fault tests prove such a create is rolled back completely. Logged loudly at start. */
bool provision_fault_init_env(void);
int64_t provision_next_deadline(void);
/* Starts a warm network when the pool is short and no create runs. */
void provision_pool_fill(void);
/* Opens the engine's event stream (reopened after a failure). */
void provision_events_start(void);
bool provision_busy(void);  /* creates or removes in flight */
/* SIGTERM: no new work; creates in flight roll back. */
void provision_shutdown(void);

/* agent.c: the resolver and the Connect stream */
extern const struct grpc_method agent_methods[];
extern const size_t agent_nmethods;
/* The gRPC server's admit hook for the agent socket: the peer's sandbox slot when its uid is
 * a live sandbox's control uid and it is that sandbox's init itself (or may be, while the
 * container's pid is not known yet), else -1: a guest, refused all but Health/Check. */
int agent_admit(void *ctx, int fd, struct grpc_peer *peer);
/* The container's pid is known (or changed): a connection that waited for it is the init's
 * (and its Connect goes on) or is closed. */
void agent_pid_known(struct sandbox *sb);
/* The sandbox's slot is given up: its connection closed, the pinned peer let go. */
void agent_forget(struct sandbox *sb);
/* Refusal reasons, as fixed words for /metrics. */
#define AGENT_REFUSAL_REASONS 9
const char *agent_refusal_name(int reason);
/* Ends the sandbox's Connect stream (UNAVAILABLE, why). */
void agent_drop(struct sandbox *sb, const char *why);
/* Output acks due: a resume after a failed transcript write, at its retry time (the run is
 * opened again first when it could not be). */
void agent_tick(int64_t now);
/* The earliest such retry (monotonic ms), or INT64_MAX. */
int64_t agent_next_deadline(void);

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

/* recover.c: 0, or an error (err says which) that stops the start. */
int recover_state(char *err, size_t err_size);
/* What recover_state allocates (and frees) before the allocator is sealed. */
size_t recover_scratch_bytes(uint32_t nsb);

#endif
