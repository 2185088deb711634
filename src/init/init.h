/* init.h: agentic-init below its applet file: the one-time setup checks and the agent
 * channel to agenticd (proto/agent.proto; docs/AGENTICD.md: the agent socket; docs/TRANSCRIPTS.md: protocol notes).
 *
 * Single-threaded. The applet owns the event loop; these parts own no fds of their own but the
 * gRPC client's, and allocate nothing after setup: the channel runs over storage the caller
 * maps at start (init_agent_storage_bytes). Nothing here logs an env value. */
#ifndef AGENTIC_INIT_H
#define AGENTIC_INIT_H

#include <stdint.h>

#include <sys/types.h>

#include "agent.pb-c.h"
#include "grpc/grpc.h"
#include "init/env.h"

/* Where the workload's files live: writable by the workload uid. */
#define INIT_WORKSPACE "/workspace"


/* ---- setup (setup.c) ---- */

/* Checks what the init starts with: uid and gid 0, bounding set exactly
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

/* ---- the agent channel (channel.c) ----
 * One Connect stream to agenticd over the agent socket: registration, READY heartbeats at the
 * interval the ack names, answers to pings; redialled with backoff (INIT_BACKOFF_MIN_MS
 * doubling to INIT_BACKOFF_MAX_MS) whenever the stream ends, registering and sending READY
 * again each time. */
/* INIT_BACKOFF_*, INIT_ACK_TIMEOUT_MS and INIT_HEARTBEAT_* are in base/limits.h. */

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
	/* the answer to a SandboxClaim owed that did not fit the send queue: claim_owed set, with
	 * the count of entries taken and the refusal's fixed words (NULL: taken) */
	int claim_owed;
	uint32_t claim_count;
	const char *claim_error;
	int failures;             /* dial or stream failures since the last registration */
	uint64_t registrations;
	const struct init_env *env;
	const struct init_sysinfo *si;
	struct init_cmds *cmds;   /* where commands, stdin and signals go; output comes from */
	/* Output acks (OutputAck in agent.proto), when agenticd's RegistrationAck consents: every
	 * chunk and result is kept in the replay ring until acked, and after each registration
	 * nothing is sent until agenticd's resume ack names the epoch and what it already has. */
	struct init_replay *replay;
	int ack_mode;             /* this stream acks */
	int resumed;              /* the resume ack for this stream came */
	uint32_t epoch;
	uint64_t next_off[2];     /* the offset of the next stdout, stderr byte */
	uint64_t next_seq;        /* the seq of the last result sent */
	/* Egress (proxy.c): announced with the label agentic-egress=1; served while the ack of
	 * this stream holds egress=1. */
	int egress_ok;
	struct init_egress *egress;
	const struct init_egress_hooks *egress_hooks;  /* NULL: no egress proxy set up */
};

/* 1 while the stream is registered and agenticd's RegistrationAck said egress=1: egress
 * connections are served only then. */
int init_agent_egress(const struct init_agent *a);
/* Sends what the commands have ready (output, results) while the stream is registered and
 * its send queue takes it. Call after every event. */
void init_agent_flush(struct init_agent *a);
/* The storage the channel needs for the socket at path: its gRPC client's whole budget and
 * the replay ring. */
size_t init_agent_storage_bytes(const char *path);
/* Sets up the channel over storage (len bytes); the first dial happens at the first
 * init_agent_tick. env and si must outlive the channel. 0, ERR_LIMIT or -errno. */
int init_agent_setup(struct init_agent *a, const struct init_env *env,
		     const struct init_sysinfo *si, struct init_cmds *cmds, void *storage,
		     size_t len);
/* The fd to watch for readability (stable across redials); call init_agent_io when it is. */
int init_agent_fd(const struct init_agent *a);
void init_agent_io(struct init_agent *a);
/* Does what is due at now (dial, give up on an ack, heartbeat); returns when it next wants to
 * be called (monotonic ms). */
int64_t init_agent_tick(struct init_agent *a, int64_t now);
/* On the way out: a SHUTTING_DOWN heartbeat and a half-close, flushed for at most
 * timeout_ms. */
void init_agent_stop(struct init_agent *a, int timeout_ms);

/* ---- workload commands (cmd.c) ----
 * CommandRequest, StdinChunk and PtyControl from agenticd (proto/agent.proto). Each command
 * runs under its own supervisor: a child of the init that keeps the init's control identity,
 * so that nothing of the workload can signal, stop or ptrace it (spawn.c says why), becomes a
 * subreaper, starts the command, which alone takes the workload identity
 * (priv_drop_to_workload), and reaps whatever of the command's tree comes to it; between fork
 * and exec only raw system calls run. The command gets stdin, stdout and stderr as pipes, the
 * container's environment without AGENT_*, HOME, USER and LOGNAME of the workload user (from
 * /etc/passwd; else /workspace and the uid), then the request's env; its cwd is working_dir or
 * /workspace; it leads its own process group.
 *   - tty (pty.c): stdin, stdout and stderr are a new pseudo-terminal's slave instead, the
 *     controlling terminal of the command's own session (setsid, TIOCSCTTY), rows x cols;
 *     the init keeps the master: stdin chunks are typed into it, what it reads from it is the
 *     command's stdout (no stderr), with the pipes' buffers, acks and flow control.
 *     PtyControl.resize sets the window size. Stdin's eof types the terminal's EOF key once
 *     (c_cc[VEOF], ^D) and stops writing: a reader in canonical mode (cat, a shell at its
 *     prompt) sees the end of its input, as when a user types ^D.
 *   - A command ends when its main process does: the supervisor then SIGKILLs what the
 *     command left behind and exits with the main process's code (128+signal when killed);
 *     126/127 when it could not be executed (127: not found), with the reason in error.
 *   - timeout_seconds > 0: at the deadline the init tells the supervisor, which kills the
 *     whole tree, whatever the tree did to escape it. The control uid holds no CAP_KILL, so
 *     every signal to a workload, the init's or a supervisor's, is sent with the workload uid
 *     borrowed as the effective uid for that one kill().
 *   - Output goes into a per-command buffer of LIMIT_INIT_OUTPUT_BYTES; while it cannot take
 *     another chunk the pipes are not read, so a command blocks on write instead of losing
 *     a byte while the agent channel is down.
 *   - stdin: chunks are buffered (LIMIT_INIT_STDIN_BYTES) until the command reads them; eof
 *     closes it. More than that ahead of the command closes stdin and says so in error.
 *   - Refused (CommandResult with exit_code -1 and the reason): run_as other than "" or
 *     "10001", an empty or duplicate command_id or command, env naming AGENT_*, a relative
 *     working_dir, more than LIMIT_INIT_COMMANDS at once, arguments over the exec limits,
 *     any command once the sandbox is stopping.
 *   - capture_output is not consulted: every byte is streamed, for the transcript. */

/* Finds uid in /etc/passwd (passwd.c), read whole: its name into user, its home into home.
 * 0, or -ENOENT (also when either does not fit). */
int init_passwd_lookup(uint32_t uid, char *user, size_t ucap, char *home, size_t hcap);
bool init_home_in_workspace(const char *home); /* home, or what its links name, in the workspace */

/* ---- the supervisor (spawn.c): what runs between fork and exec ---- */
enum { INIT_FD_IN, INIT_FD_OUT, INIT_FD_ERR, INIT_FD_CTL, INIT_FD_COUNT };

struct init_spawn {
	int fd[INIT_FD_COUNT];    /* the child's ends: stdin read, stdout/stderr write, ctl write */
	uint32_t uid, gid;        /* the workload identity */
	uint32_t control_uid;     /* the init's, which the supervisor keeps */
	char *const *argv;
	char *const *envp;
	const char *path;         /* PATH's value, for a command without a slash */
	const char *cwd;
	int tty;                  /* fd[IN..ERR] are a pty's slave: the command starts its own
				   * session with it as the controlling terminal */
};

/* What the supervisor and the command tell the init through the ctl pipe: one write each,
 * well below PIPE_BUF, so records never interleave. */
struct init_ctl {
	int32_t tag;
	int32_t a, b;
};
#define INIT_CTL_PID 'P'          /* a: the command's pid, which leads its process group */
#define INIT_CTL_FAIL 'F'         /* a: the stage (below), b: errno */
enum { INIT_STAGE_DROP = 1, INIT_STAGE_SUBREAPER, INIT_STAGE_FDS, INIT_STAGE_FORK,
       INIT_STAGE_CHDIR, INIT_STAGE_EXEC, INIT_STAGE_TTY };

/* In the child of the init's fork(), which reads nothing of the init's but sp, the stack and
 * the exec area, and keeps the control identity: becomes a subreaper, moves the spawn's fds to
 * 0..3 and closes every other, starts the command (a CLONE_VM | CLONE_VFORK child: signals
 * unblocked, SIGPIPE default, its own process group, the workload identity by
 * priv_drop_to_workload, cwd, execve with a PATH search) and reports its pid once it has
 * exec'd. It then reaps everything of the command's tree that comes to it; once the main
 * process has ended, or on SIGTERM (which only the init can send it), it SIGKILLs its
 * remaining children until none is left, and exits with the main process's code (128+signal
 * when killed). A failed step is reported as INIT_CTL_FAIL and exits 126 (127: the command was
 * not found). */
_Noreturn void init_spawn_supervise(const struct init_spawn *sp);

/* Writes v in decimal into out (at most 10 digits, no NUL); returns the digit count. */
size_t init_dec(uint32_t v, char *out);

/* Event-loop tags (epoll data.u64): the applet's own fds, then 4 per command slot. */
#define INIT_TAG_SIGNAL 1
#define INIT_TAG_TIMER 2
#define INIT_TAG_AGENT 3
#define INIT_TAG_EGRESS 4         /* the proxy listener */
#define INIT_TAG_EGRESS_FIRST 5   /* one per egress connection slot */
#define INIT_TAG_CMD_FIRST 16

struct init_cmds_config {
	int epfd;                 /* the event loop: command fds are added with their tags */
	uint32_t workload_uid, workload_gid, control_uid;
	char **environ;           /* the container's environment (must outlive the table) */
	/* LIMIT_INIT_EXEC_BYTES, apart from the table's storage: everything a supervisor reads
	 * after the fork (argv, envp and their strings, the working directory) is built here,
	 * so the storage may be MADV_WIPEONFORK and the fork copies none of it */
	uint8_t *exec_area;
};

struct init_cmds;

/* The table's storage, without the exec area. */
size_t init_cmds_storage_bytes(void);
/* Sets up the table over storage, filters the environment and looks up the workload user.
 * 0, or ERR_LIMIT with the reason in *why. */
int init_cmds_setup(const struct init_cmds_config *cfg, void *storage, size_t len,
		    struct init_cmds **out, const char **why);
/* Starts req (its strings need only live for this call), or queues its refusal. */
void init_cmds_start(struct init_cmds *c, const Agentic__Sandbox__V1__CommandRequest *req);
void init_cmds_stdin(struct init_cmds *c, const Agentic__Sandbox__V1__StdinChunk *in);
/* A claim of this (warm) sandbox: its env becomes part of every later command's, each entry
 * replacing the container's variable of that name (a command's own env replaces both); it
 * replaces an earlier claim's env. HOME, USER and LOGNAME are dropped, as from the container's
 * environment. 0, or ERR_PARSE / ERR_LIMIT with *why (fixed words), and nothing changed. */
int init_cmds_claim(struct init_cmds *c, const Agentic__Sandbox__V1__SandboxClaim *m,
		    const char **why);
/* A claim's files (a VM's credential files): each written as uid:gid, 0600, below
 * INIT_CREDENTIAL_DIR, which must be a tmpfs; any other path, or more than
 * INIT_CLAIM_FILES_MAX, refuses the claim. Once written, a later claim's files are not
 * written again. 0, or an error with *why (fixed words). */
#define INIT_CLAIM_FILES_MAX 8
int init_claim_files(const Agentic__Sandbox__V1__SandboxClaim *m, uint32_t uid, uint32_t gid,
		     const char **why);
/* Sends the signal to the command's process group (a tty command's: its terminal's foreground
 * group, the command's own when it has none), or resizes a tty command's terminal. */
void init_cmds_signal(struct init_cmds *c, const Agentic__Sandbox__V1__PtyControl *pc);
/* An event on a command fd (tag >= INIT_TAG_CMD_FIRST). */
void init_cmds_io(struct init_cmds *c, uint64_t tag, uint32_t events);
/* A child the init reaped: 1 when it was a command's supervisor. */
int init_cmds_reaped(struct init_cmds *c, pid_t pid, int status);
/* Kills the trees past their deadline; returns when it next wants to be called. */
int64_t init_cmds_tick(struct init_cmds *c, int64_t now);
/* Shutdown: SIGTERM to every command's process group now, the whole tree of each killed at
 * kill_at (monotonic ms; init_cmds_tick does it); new commands are refused from now on. */
void init_cmds_stop_all(struct init_cmds *c, int64_t kill_at);
/* Commands not yet fully reported (running, or output or result unsent). */
int init_cmds_busy(const struct init_cmds *c);

enum init_out_kind { INIT_OUT_STDOUT = 1, INIT_OUT_STDERR, INIT_OUT_RESULT, INIT_OUT_STDIN_ACK };
/* Stdin is acknowledged (StdinAck, an extension agenticd asks for nothing to use: the init
 * announces it with the registration label agentic-stdin-ack=1) every INIT_STDIN_ACK_BYTES
 * written to the command and whenever its buffer drains, so agenticd never sends more than
 * the buffer holds. */
struct init_out {
	enum init_out_kind kind;
	const char *command_id;
	const uint8_t *data;      /* output: the chunk (len 0 with eof: the stream ended) */
	size_t len;
	int eof;
	int32_t exit_code;        /* result */
	const char *error;        /* result: "" or why it failed */
	int64_t duration_ms;
	int64_t duration_us;
	int success;
	uint64_t consumed;        /* stdin ack: bytes written to the command's stdin so far */
};
/* The next thing to send, in order per command, commands taken in turn: 1 and *o filled
 * (valid until the next call), or 0. init_cmds_consume marks it sent. */
int init_cmds_peek(struct init_cmds *c, struct init_out *o);
void init_cmds_consume(struct init_cmds *c);

/* ---- egress (proxy.c) ----
 * The proxy listener on 127.0.0.1:EGRESS_PROXY_PORT, opened at setup (before any workload
 * runs; a failed bind is logged and the init goes on without), and one Egress call on the
 * agent connection per accepted connection (docs/EGRESS.md: the wire): at most
 * LIMIT_INIT_EGRESS_CONNS at once; a connection accepted while agenticd has not consented
 * (init_agent_egress), or beyond that, is closed at once. A call refused or lost before any
 * byte came back gets the workload a 503; the Connect stream ending closes every connection. */
struct init_egress;

size_t init_egress_storage_bytes(void);
/* Sets up the table over storage, opens the listener into epfd (tag INIT_TAG_EGRESS) and
 * hands agent the table. 0 (also when the port could not be had), or ERR_LIMIT. */
int init_egress_setup(struct init_egress **out, void *storage, size_t len, int epfd,
		      struct init_agent *agent);
/* An event on the listener or a connection (INIT_TAG_EGRESS .. INIT_TAG_EGRESS_FIRST + N). */
void init_egress_io(struct init_egress *eg, uint64_t tag, uint32_t events);
/* Ends what lost agenticd's consent, retries starts, closes lingering connections; returns
 * when it next wants to be called (monotonic ms). */
int64_t init_egress_tick(struct init_egress *eg, int64_t now);
void init_egress_close_all(struct init_egress *eg);
/* What init_egress_setup hands the agent channel (agent->egress_hooks): the proxy calls the
 * channel (init_agent_egress), and the channel reaches the proxy only through these. */
struct init_egress_hooks {
	/* The listener's descriptor (announced in the registration, so that agenticd may take
	 * it over: docs/EGRESS.md "Direct connections"), or -1. */
	int (*listener)(const struct init_egress *eg);
	/* direct: agenticd accepts on the listener (its registration's answer said
	 * egress=direct), and the init stops watching it, keeping it open so that the port
	 * stays the sandbox's; false: the init accepts and carries each connection over an
	 * Egress call. */
	void (*direct)(struct init_egress *eg, bool direct);
};

/* ---- the replay ring (replay.c) ----
 * Output chunks and results the init has sent and agenticd has not yet acknowledged writing
 * to the transcript (OutputAck in agent.proto), in send order, LIMIT_INIT_REPLAY_BYTES in all.
 * Output records carry their offset in the init's stdout or stderr stream, results their seq.
 * Empty (eof) chunks and stdin acks are never kept: agenticd writes nothing for them. */
struct init_replay {
	uint8_t *mem;             /* LIMIT_INIT_REPLAY_BYTES, 32-byte aligned */
	uint64_t head, tail;      /* byte positions: the oldest record kept, the end */
	uint64_t send;            /* the next record to send again after a resume */
	char id[LIMIT_INIT_COMMAND_ID + 1];   /* storage for what init_replay_next returns */
	char error[INIT_ERROR_BYTES];
};
void init_replay_setup(struct init_replay *r, void *mem);
/* 1 when o (an output chunk or a result) fits now. */
int init_replay_room(const struct init_replay *r, const struct init_out *o);
/* Keeps a copy of o, which has just been sent (off: its offset or seq); -EAGAIN when it does
 * not fit. */
int init_replay_push(struct init_replay *r, const struct init_out *o, uint64_t off);
/* Frees the records acknowledged: output ending at or before stream_next[0] (stdout) or [1]
 * (stderr), results up to seq results; in order, stopping at the first not covered. */
void init_replay_ack(struct init_replay *r, const uint64_t stream_next[2], uint64_t results);
/* Everything kept is to be sent again, oldest first. */
void init_replay_rewind(struct init_replay *r);
/* The next record to send again: 1 with *o (valid until the next call) and *off, or 0.
 * init_replay_sent marks it sent. */
int init_replay_next(struct init_replay *r, struct init_out *o, uint64_t *off);
void init_replay_sent(struct init_replay *r);

#endif
