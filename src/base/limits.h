/* limits.h: every fixed limit of agentic, in one place, related by asserts. */
#ifndef AGENTIC_BASE_LIMITS_H
#define AGENTIC_BASE_LIMITS_H

/* Longest path agentic builds or accepts (Linux PATH_MAX). */
#define LIMIT_PATH_BYTES 4096

/* One log line, including its key=value fields; longer lines are cut and marked. */
#define LIMIT_LOG_LINE_BYTES 2048
/* One quoted value from outside (log_q): longer ones are cut. */
#define LIMIT_LOG_VALUE_BYTES 512

/* Memory served before the applet has computed its own budget (static build). */
#define LIMIT_BOOT_HEAP_BYTES (256u * 1024u)

/* Largest single allocation the static allocator serves (one size class). */
#define LIMIT_ALLOC_MAX_BYTES (64u * 1024u * 1024u)

/* Pruner: directory nesting it follows below a run before giving up on that run. */
#define LIMIT_PRUNE_DEPTH 65536


/* ---- http (src/http) ---- */
/* Start line and headers of one HTTP/1.1 message, and how many header fields it may carry. */
#define LIMIT_HTTP_HEAD_BYTES (16u * 1024u)
#define LIMIT_HTTP_HEADERS 64
/* Read buffer of one client connection: the most bytes taken from the socket at once. */
#define LIMIT_HTTP_READ_BYTES (16u * 1024u)

/* ---- docker (src/docker) ---- */
/* Default cap of one buffered Engine API response (the config's max_message_bytes). */
#define LIMIT_DOCKER_RESPONSE_BYTES (4u * 1024u * 1024u)
/* One request we send (container create with its env, labels, mounts and seccomp profile). */
#define LIMIT_DOCKER_REQUEST_BYTES (96u * 1024u)
/* One event of the /events stream. */
#define LIMIT_DOCKER_EVENT_BYTES (64u * 1024u)
/* JSON tokens of one parsed response. */
#define LIMIT_DOCKER_JSON_TOKENS (64u * 1024u)
/* Connections (calls in flight at once) of one client. */
#define LIMIT_DOCKER_CONNS 16

/* ---- grpc (src/grpc) ---- */
/* gRPC: defaults of max_message_bytes and max_streams_per_connection. A
 * connection's fixed memory is sizeof(struct grpc_conn) (src/grpc/grpc.h); the budget is that
 * times the connection cap, plus message buffers and one unpack arena of twice the largest
 * message. */
#define LIMIT_GRPC_MESSAGE_BYTES (4u * 1024u * 1024u)
#define LIMIT_GRPC_STREAMS 128

/* ---- agenticd (src/mgmt) ---- */
/* One admin API request body (create: env, mounts, cmd, labels), its read buffer, and the
 * response buffer a connection fills (lists are streamed through it, sandbox by sandbox). */
#define LIMIT_ADMIN_BODY_BYTES (32u * 1024u)
#define LIMIT_ADMIN_READ_BYTES (4u * 1024u)
#define LIMIT_ADMIN_OUT_BYTES (32u * 1024u)
/* An idle admin connection is closed after this long. */
#define LIMIT_ADMIN_IDLE_MS 60000
/* What one create may ask for. */
#define LIMIT_SANDBOX_ENV 128
#define LIMIT_SANDBOX_CMD_ARGS 64
#define LIMIT_EXEC_TIMEOUT_S (86400 * 365) /* an exec's timeout_seconds, at most */
#define LIMIT_SANDBOX_CMD_BYTES 2048u
#define LIMIT_SANDBOX_LABELS 16
#define LIMIT_SANDBOX_LABEL_BYTES 1024u
#define LIMIT_SANDBOX_MOUNTS 8
#define LIMIT_SANDBOX_MOUNT_BYTES 2048u
/* Managed networks created ahead of demand (a create then skips network create). */
#define LIMIT_WARM_NETWORKS 4
/* Times one create reads the engine's networks again after its /28 was refused as
 * overlapping another network (each reading takes every foreign /28 out of the map). */
#define LIMIT_SUBNET_SCANS 3
/* The agent socket: a connection slot and two small message buffers are reserved for each
 * sandbox's init (admitted at accept, pinned by pidfd), plus spare buffers. Every other peer
 * is a guest, served Health/Check only: at most LIMIT_AGENT_GUEST_CONNECTIONS at once,
 * LIMIT_AGENT_GUEST_PER_UID of one uid, each closed LIMIT_AGENT_GUEST_IDLE_MS after its accept
 * or its last Health/Check, with buffers of their own. */
#define LIMIT_AGENT_GUEST_CONNECTIONS 16
#define LIMIT_AGENT_GUEST_PER_UID 4
#define LIMIT_AGENT_GUEST_IDLE_MS 5000
#define LIMIT_AGENT_INIT_BUFFERS 2
/* An init's connection has one stream open at once (its Connect): with more, one init could
 * hold a buffer per stream and leave the other inits none. */
#define LIMIT_AGENT_INIT_STREAMS 1
#define LIMIT_AGENT_SPARE_BUFFERS 16
/* Refused agent calls: one log line per uid per interval (the rest counted on the next), for
 * at most this many uids per interval. */
#define LIMIT_AGENT_REFUSAL_LOG_MS 10000
#define LIMIT_AGENT_REFUSAL_LOG_UIDS 32
_Static_assert(LIMIT_AGENT_GUEST_PER_UID >= 1 &&
	       LIMIT_AGENT_GUEST_PER_UID <= LIMIT_AGENT_GUEST_CONNECTIONS,
	       "a uid's share of the guest connections fits in them");
_Static_assert(LIMIT_AGENT_INIT_STREAMS * 2 <= LIMIT_AGENT_INIT_BUFFERS,
	       "each of an init's streams has a receive and a send buffer of its share");
_Static_assert(LIMIT_AGENT_INIT_BUFFERS >= 2,
	       "an init's Connect can receive a split message while an ack waits to be sent");
/* Log lines of a failed create's init kept in its error, and their bytes. */
#define LIMIT_CREATE_LOG_LINES 20
#define LIMIT_CREATE_LOG_BYTES 1536u
/* Directory nesting a workspace delete follows. */
#define LIMIT_RMTREE_DEPTH 256
/* agenticd's budget beyond its tables: static buffers first touched by a request, the stack. */
#define LIMIT_DAEMON_SLACK_BYTES (1024u * 1024u)

/* The seccomp profile every sandbox gets (src/mgmt/seccomp.c): a profile file may be this
 * large, and once compacted and escaped into the create request's SecurityOpt string it must
 * fit LIMIT_SECCOMP_PROFILE_BYTES; its JSON may hold this many tokens. */
#define LIMIT_SECCOMP_FILE_BYTES (64u * 1024u)
#define LIMIT_SECCOMP_PROFILE_BYTES (32u * 1024u)
#define LIMIT_SECCOMP_TOKENS 8192u

_Static_assert(LIMIT_ADMIN_BODY_BYTES + LIMIT_HTTP_HEAD_BYTES + LIMIT_SECCOMP_PROFILE_BYTES <=
	       LIMIT_DOCKER_REQUEST_BYTES,
	       "a create's env, mounts and seccomp profile fit one container create request");
_Static_assert(LIMIT_SECCOMP_PROFILE_BYTES <= LIMIT_SECCOMP_FILE_BYTES,
	       "a profile file can hold the largest profile agenticd sends");
_Static_assert(LIMIT_SANDBOX_MOUNTS <= 32, "read-only flags are one 32-bit mask");
/* A sandbox's disk budget (default_disk_bytes, a request's disk_bytes): its workspace is an
 * ext4 image of that size, preallocated under the agentshare root and loop-mounted. The
 * smallest holds the filesystem's own metadata with room to spare; the largest keeps the
 * group descriptors of a filesystem without the 64bit feature in a few blocks. Images from
 * LIMIT_DISK_JOURNAL_BYTES up carry a journal (jbd2 needs at least 1024 blocks). */
#define LIMIT_DISK_MIN_BYTES (4ull << 20)
#define LIMIT_DISK_MAX_BYTES (1ull << 40)
#define LIMIT_DISK_JOURNAL_BYTES (32ull << 20)
/* The sandbox's /tmp (its root filesystem is read-only): a tmpfs of this size, counted in
 * the sandbox's memory limit. */
#define LIMIT_SANDBOX_TMP_BYTES (64u << 20)
_Static_assert(LIMIT_DISK_JOURNAL_BYTES >= LIMIT_DISK_MIN_BYTES + (4ull << 20) * 4,
	       "a journalled image leaves room for files after a 4 MiB journal");
_Static_assert(LIMIT_DISK_MAX_BYTES / 4096 <= 0xffffffffull,
	       "block numbers of the largest image fit 32 bits");
_Static_assert(LIMIT_SANDBOX_ENV + 12 <= 256, "env with AGENT_* fits the create request lists");

/* ---- agenticd exec spill (src/mgmt/admin.c) ---- */
/* Exec output a client has not taken waits in a spill file, at most exec_spill_max_bytes per
 * client; a spill never takes the last 1/LIMIT_EXEC_SPILL_FREE_DIV of its filesystem (the
 * transcripts' room). The filesystem is asked every LIMIT_EXEC_SPILL_CHECK_BYTES spilled, and
 * output the client has taken is punched out of the file at the same step. */
#define LIMIT_EXEC_SPILL_FREE_DIV 20
#define LIMIT_EXEC_SPILL_CHECK_BYTES (1u << 20)

/* ---- init (src/init) ---- */
/* The largest message agenticd may send the init on its Connect stream (a command with its
 * args and env, a stdin chunk). The init's whole gRPC budget follows from it: one large
 * buffer plus an unpack arena of twice this, about 3.3 MiB in all. */
#define LIMIT_INIT_MESSAGE_BYTES (1024u * 1024u)
#define LIMIT_INIT_SMALL_BUFFERS 4
#define LIMIT_INIT_LARGE_BUFFERS 1
/* Workload commands at once in one sandbox, and refusals waiting to be reported. */
#define LIMIT_INIT_COMMANDS 64
#define LIMIT_INIT_REFUSALS 16
/* Per command: output kept while agenticd cannot take it, and stdin ahead of the reader. */
#define LIMIT_INIT_OUTPUT_BYTES (64u * 1024u)
#define LIMIT_INIT_STDIN_BYTES (64u * 1024u)
/* One command's argv and envp (pointers and built strings), and their counts. */
#define LIMIT_INIT_EXEC_BYTES (256u * 1024u)
#define LIMIT_INIT_ARGS 4096
#define LIMIT_INIT_ENV_VARS 1024
#define LIMIT_INIT_COMMAND_ID 128
/* Output and results sent to agenticd and not yet acknowledged as written to the transcript
 * (OutputAck): kept to be sent again after a reconnect. When it is full the init sends no more
 * output until an ack comes, so the commands' buffers fill and the commands block. agenticd
 * acks at least every 128 KiB, so this is also the most in flight. */
#define LIMIT_INIT_REPLAY_BYTES (1024u * 1024u)

/* ---- prune (agentic-prune) ---- */
/* Pruner: getdents64 buffer of each directory listing it holds open: four for the scan,
 * one per worker. */
#define LIMIT_PRUNE_DENTS_BYTES (64u * 1024u)

/* Pruner: mount points below the agentshare root it keeps out of runs, and their paths. */
#define LIMIT_PRUNE_MOUNTS 4096u
#define LIMIT_PRUNE_MOUNT_BYTES (512u * 1024u)

/* Pruner: threads removing runs at once (removal waits on the disk, not the CPU), and the
 * runs queued for them. Each worker holds a LIMIT_PRUNE_DEPTH stack of 16-byte entries. */
#define LIMIT_PRUNE_WORKERS 2u
#define LIMIT_PRUNE_QUEUE 32u

/* Pruner: largest retention period, in days (keeps now - N*86400 far from overflow). */
#define LIMIT_PRUNE_DAYS 1000000u

_Static_assert(LIMIT_PRUNE_DENTS_BYTES >= 2u * 280u, "a listing holds at least one entry");
_Static_assert(LIMIT_PRUNE_MOUNT_BYTES >= LIMIT_PATH_BYTES, "a mount path must fit");
_Static_assert(LIMIT_PRUNE_WORKERS >= 1 && LIMIT_PRUNE_QUEUE >= LIMIT_PRUNE_WORKERS,
	       "every worker can have a job queued");
_Static_assert(LIMIT_PRUNE_QUEUE + 16u < 1024u,
	       "queued runs hold one fd each, far under the default limit of 1024");

_Static_assert(LIMIT_LOG_LINE_BYTES >= 256, "log lines must hold a useful message");
_Static_assert(LIMIT_LOG_VALUE_BYTES >= 16 && LIMIT_LOG_VALUE_BYTES <= LIMIT_LOG_LINE_BYTES / 2,
	       "a quoted value is useful and leaves room for the rest of its line");
_Static_assert(LIMIT_SUBNET_SCANS >= 1, "an overlap is read again at least once");
_Static_assert(LIMIT_BOOT_HEAP_BYTES >= 64u * 1024u, "boot heap must hold libc start-up");
_Static_assert(LIMIT_ALLOC_MAX_BYTES >= LIMIT_PATH_BYTES, "a path must be allocatable");
_Static_assert(LIMIT_GRPC_MESSAGE_BYTES <= LIMIT_ALLOC_MAX_BYTES / 4,
	       "a message and its unpack arena fit the allocator's largest piece");
_Static_assert(LIMIT_INIT_OUTPUT_BYTES >= 4u * 8192u, "a command's buffer holds chunks");
_Static_assert(LIMIT_INIT_EXEC_BYTES >= (LIMIT_INIT_ENV_VARS + 2u) * 8u + 4096u,
	       "the env pointer array and some strings fit the exec scratch");

_Static_assert(LIMIT_HTTP_HEAD_BYTES >= 1024u && LIMIT_HTTP_HEAD_BYTES <= 0x7fffffffu,
	       "a head must hold a real request and offsets fit 32 bits");
_Static_assert(LIMIT_HTTP_READ_BYTES >= 512u, "reads must make progress");
_Static_assert(LIMIT_DOCKER_EVENT_BYTES <= LIMIT_DOCKER_RESPONSE_BYTES,
	       "an event is buffered in a response buffer");
_Static_assert(LIMIT_DOCKER_REQUEST_BYTES >= LIMIT_HTTP_HEAD_BYTES,
	       "a request holds at least a full head");

#endif
