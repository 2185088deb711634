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
/* A client connection's connect, unless its owner sets another. */
#define LIMIT_HTTP_CONNECT_TIMEOUT_MS 5000

/* ---- e2b files (src/e2b/e2b_fs.c, e2b_files.c, multipart.c) ---- */
/* filesystem.Filesystem calls and GET /files downloads served at once, and the answer bytes
 * each holds: a whole answer that fits goes out with its exact status and Content-Length,
 * a longer one is streamed (chunked) from there. */
#define LIMIT_E2B_FILE_OPS 16
#define LIMIT_E2B_FILE_OUT_BYTES (16u * 1024u)
/* POST /files uploads at once; the body bytes one holds while its file write is busy (the
 * most one read of the connection hands over); the paths it wrote and how many, for the
 * answer; one part's header lines (a Content-Disposition carrying a whole path). */
#define LIMIT_E2B_UPLOADS 8
#define LIMIT_E2B_UPLOAD_IN_BYTES (8u * 1024u)
#define LIMIT_E2B_UPLOAD_PATHS_BYTES (8u * 1024u)
#define LIMIT_E2B_UPLOAD_FILES 128
#define LIMIT_E2B_PART_HEAD_BYTES (LIMIT_PATH_BYTES + 512u)
_Static_assert(LIMIT_E2B_UPLOAD_PATHS_BYTES >= LIMIT_PATH_BYTES, "one path fits");

/* ---- json (src/json) ---- */
/* Nesting of arrays and objects the parser and writer follow. */
#define JSON_MAX_DEPTH 64
_Static_assert(JSON_MAX_DEPTH >= 8 && JSON_MAX_DEPTH <= 1024,
	       "real documents fit; the parser's per-level stack stays small");

/* ---- h2 and hpack (src/h2; the reset limits are explained in h2.h's top comment) ---- */
#define H2_MAX_STREAMS 128           /* stream table slots: the most MAX_CONCURRENT_STREAMS */
#define H2_FRAME_MAX 16384           /* largest frame we accept (the default we advertise) */
#define H2_HEADER_BLOCK_BYTES 16384  /* one encoded header block, HEADERS + CONTINUATIONs */
#define H2_HEADER_LIST_BYTES 16384   /* one decoded header list (SETTINGS_MAX_HEADER_LIST_SIZE) */
#define H2_MAX_FIELDS 64             /* fields of one header list */
#define H2_MAX_CONTINUATIONS 64      /* CONTINUATION frames of one header block */
#define H2_OUT_BYTES 32768           /* output buffer */
#define H2_OUT_RESERVE 256           /* output room kept for control frames */
#define H2_STREAM_WINDOW (1u << 20)  /* SETTINGS_INITIAL_WINDOW_SIZE we advertise */
#define H2_CONN_WINDOW (1u << 24)    /* connection receive window we open at start */
#define H2_RESET_BUDGET 200          /* peer resets tolerated in a burst */
#define H2_RESET_RATE 100            /* peer resets a second tolerated beyond the burst */
#define H2_RESET_MEMORY 128          /* ids of the streams we reset last */
#define H2_PENDING_RESETS 16         /* RST_STREAMs owed on streams without a slot */
#define HPACK_TABLE_BYTES 4096       /* SETTINGS_HEADER_TABLE_SIZE we advertise (default) */
#define HPACK_MAX_FIELD_BYTES 16384  /* one decoded name or value (after Huffman) */
_Static_assert(H2_RESET_MEMORY >= H2_MAX_STREAMS, "a table reset at once is remembered");
_Static_assert(1000 % H2_RESET_RATE == 0, "the refill is a whole number of ms a reset");
_Static_assert(H2_RESET_BUDGET >= H2_MAX_STREAMS, "a client may cancel a full table at once");
_Static_assert(H2_FRAME_MAX >= 16384 && H2_FRAME_MAX <= 16777215,
	       "RFC 9113 4.2: SETTINGS_MAX_FRAME_SIZE's range");
_Static_assert(H2_OUT_BYTES >= 2 * (H2_FRAME_MAX / 2 + 9), "output holds two DATA frames");
_Static_assert(H2_OUT_RESERVE >= 9 + 8 + 9 + 8 && H2_OUT_RESERVE < H2_OUT_BYTES / 4,
	       "the reserve holds a GOAWAY and a PING ack, and leaves room for data");
_Static_assert(H2_HEADER_BLOCK_BYTES >= HPACK_MAX_FIELD_BYTES, "a block holds a field");
_Static_assert(H2_MAX_CONTINUATIONS >= 1 && H2_MAX_FIELDS >= 16 && H2_PENDING_RESETS >= 1,
	       "a header block may be split, a gRPC request's fields fit, a reset can be owed");
_Static_assert(H2_STREAM_WINDOW >= 65535 && H2_STREAM_WINDOW <= H2_CONN_WINDOW &&
	       H2_CONN_WINDOW <= 0x7fffffffu,
	       "windows at least the default, a stream's within the connection's, 31 bits");
_Static_assert(HPACK_TABLE_BYTES <= 65535, "entry offsets and lengths are 16-bit");
_Static_assert(HPACK_MAX_FIELD_BYTES >= HPACK_TABLE_BYTES,
	       "a string kept in the table must fit in a scratch buffer");

/* ---- docker (src/docker) ---- */
/* Default cap of one buffered Engine API response (the config's max_message_bytes): at most
 * the agenticd client's LIMIT_DOCKER_CONNS of them and its tokens fit one allocation (below;
 * at 4 MiB, max_sandboxes over 1,000 made agenticd's start fail "Out of memory"). */
#define LIMIT_DOCKER_RESPONSE_BYTES (3840u * 1024u)
/* One request we send (container create with its env, labels, mounts and seccomp profile). */
#define LIMIT_DOCKER_REQUEST_BYTES (96u * 1024u)
/* One event of the /events stream. */
#define LIMIT_DOCKER_EVENT_BYTES (64u * 1024u)
/* Bytes kept of one string of an event's top-level object ("status", "Action": an exec's
 * carry its whole command line); the rest is cut, so a long command line cannot push the
 * event over LIMIT_DOCKER_EVENT_BYTES and out of sight. */
#define LIMIT_DOCKER_EVENT_STRING_BYTES 2048u
/* JSON tokens of one parsed response. */
#define LIMIT_DOCKER_JSON_TOKENS (64u * 1024u)
/* Connections (calls in flight at once) of one client, and how many when its config names
 * none; an answer's wait when its config names none. */
#define LIMIT_DOCKER_CONNS 16
#define LIMIT_DOCKER_DEFAULT_CONNS 4
_Static_assert((size_t)LIMIT_DOCKER_CONNS * LIMIT_DOCKER_RESPONSE_BYTES + LIMIT_DOCKER_JSON_TOKENS *
	       32u + 1024u * 1024u <= LIMIT_ALLOC_MAX_BYTES,
	       "the Docker client's buffers and tokens are one allocation of at most the largest");
#define LIMIT_DOCKER_READ_TIMEOUT_MS 60000
/* Entries of each list kept from an inspect (labels, options, cmd, env), and the bytes of a
 * network inspect's strings. */
#define DOCKER_LIST_MAX 64
#define DOCKER_NETWORK_TEXT_BYTES 8192
/* One request target: the versioned path and its query. */
#define LIMIT_DOCKER_TARGET_BYTES 2048

/* ---- grpc (src/grpc) ---- */
/* gRPC: defaults of max_message_bytes and max_streams_per_connection. A
 * connection's fixed memory is sizeof(struct grpc_conn) (src/grpc/grpc.h); the budget is that
 * times the connection cap, plus message buffers and one unpack arena of twice the largest
 * message. */
#define LIMIT_GRPC_MESSAGE_BYTES (4u * 1024u * 1024u)
#define LIMIT_GRPC_STREAMS 128
#define GRPC_SMALL_MESSAGE (16u * 1024u) /* one small message buffer, prefix included */
#define GRPC_MAX_LISTENERS 4             /* sockets one server listens on */
#define GRPC_MAX_MD 16                   /* metadata entries sent with headers or trailers */
#define GRPC_MD_BYTES 4096               /* their encoded size, with the status message */
#define GRPC_READ_BYTES 65536            /* the shared read buffer */
#define GRPC_APP_BYTES 32                /* a call's room for its application's state */
#define GRPC_ARENA_SLACK_BYTES 65536     /* an unpack arena beyond twice the largest message */
#define GRPC_PREFACE_TIMEOUT_MS 10000    /* a connection's preface, unless the config sets one */
/* A server call past its deadline with a message cut on the wire may finish that message (then
 * DEADLINE_EXCEEDED trailers) this long before RST_STREAM CANCEL ends it: a client that returns
 * window reads whole messages and its status, one that grants none holds the call no longer. */
#define GRPC_DEADLINE_GRACE_MS 500
_Static_assert(H2_MAX_STREAMS >= LIMIT_GRPC_STREAMS, "a connection holds the streams allowed");
_Static_assert(GRPC_SMALL_MESSAGE >= 1024u && GRPC_SMALL_MESSAGE <= LIMIT_GRPC_MESSAGE_BYTES,
	       "a small buffer holds a control message and is no larger than the largest");
_Static_assert(GRPC_MD_BYTES <= H2_HEADER_LIST_BYTES / 2,
	       "sent metadata leaves room for the fixed fields in one header list");
_Static_assert(GRPC_READ_BYTES >= H2_FRAME_MAX + 9, "one read can take a whole frame");
_Static_assert(GRPC_APP_BYTES % 8 == 0 && GRPC_MAX_MD >= 4 && GRPC_MAX_LISTENERS >= 1,
	       "app state is whole words; a few metadata entries and a listener fit");
_Static_assert(GRPC_ARENA_SLACK_BYTES >= 4096 && GRPC_PREFACE_TIMEOUT_MS >= 1000,
	       "an unpack has room beyond its message's bytes; a slow peer gets a second");
_Static_assert(GRPC_DEADLINE_GRACE_MS >= 100 && GRPC_DEADLINE_GRACE_MS <= 1000,
	       "a window update's round trip fits the grace; a starving peer is cut within a second");

/* ---- agenticd (src/mgmt) ---- */
/* One admin API request body (create: env, mounts, cmd, labels), its read buffer, and the
 * response buffer a connection fills (lists are streamed through it, sandbox by sandbox). */
#define LIMIT_ADMIN_BODY_BYTES (32u * 1024u)
#define LIMIT_ADMIN_READ_BYTES (4u * 1024u)
#define LIMIT_ADMIN_OUT_BYTES (32u * 1024u)
/* An idle admin connection is closed after this long. */
#define LIMIT_ADMIN_IDLE_MS 60000
/* The E2B listener (src/e2b/): a connection's request head, read buffer, whole body (a
 * control-plane create, a unary Connect message) and output (a whole answer, or a streamed
 * answer's chunks as they go). A head must arrive within LIMIT_E2B_HEAD_MS of its first byte,
 * a whole body within LIMIT_E2B_BODY_MS, a streamed body may pause at most
 * LIMIT_E2B_STALL_MS; an idle keep-alive socket lives LIMIT_E2B_IDLE_MS (the Keep-Alive hint
 * says LIMIT_E2B_KEEPALIVE_S: the client closes first). */
#define LIMIT_E2B_HEAD_BYTES (8u * 1024u)
#define LIMIT_E2B_READ_BYTES (4u * 1024u)
#define LIMIT_E2B_BODY_BYTES (32u * 1024u)
#define LIMIT_E2B_OUT_BYTES (32u * 1024u)
#define LIMIT_E2B_HEAD_MS 10000
#define LIMIT_E2B_BODY_MS 30000
#define LIMIT_E2B_STALL_MS 60000
#define LIMIT_E2B_KEEPALIVE_S 30
#define LIMIT_E2B_IDLE_MS 35000
#define LIMIT_E2B_CONNECTIONS 4096
/* E2B's own fields of a sandbox (template, metadata, token hash, start) in its record. */
#define LIMIT_E2B_RECORD_BYTES 3072u
#define LIMIT_E2B_METADATA_BYTES 2048u
_Static_assert(LIMIT_E2B_UPLOAD_IN_BYTES >= LIMIT_E2B_READ_BYTES,
	       "an upload holds what one read of its connection brings");
_Static_assert(LIMIT_E2B_FILE_OUT_BYTES + 1024u <= LIMIT_E2B_OUT_BYTES,
	       "a file operation's whole answer fits the connection's one whole reply");
_Static_assert(LIMIT_E2B_KEEPALIVE_S >= 5 && LIMIT_E2B_IDLE_MS > LIMIT_E2B_KEEPALIVE_S * 1000,
	       "undici keeps an idle socket 4 s unless told: the hint is longer, and kept");
_Static_assert(LIMIT_E2B_BODY_BYTES <= LIMIT_ADMIN_BODY_BYTES &&
	       LIMIT_E2B_METADATA_BYTES + 512u <= LIMIT_E2B_RECORD_BYTES &&
	       LIMIT_E2B_HEAD_BYTES <= LIMIT_HTTP_HEAD_BYTES,
	       "an E2B create fits a create request; metadata fits the record");
/* What one create may ask for. */
#define LIMIT_SANDBOX_ENV 128
#define LIMIT_SANDBOX_CMD_ARGS 64
#define LIMIT_EXEC_TIMEOUT_S (86400 * 365) /* an exec's timeout_seconds, at most */
#define LIMIT_SANDBOX_TTL_S (86400 * 30)   /* a create's ttl_seconds, at most */
#define LIMIT_SANDBOX_CMD_BYTES 2048u
#define LIMIT_SANDBOX_LABELS 16
#define LIMIT_SANDBOX_LABEL_BYTES 1024u
#define LIMIT_SANDBOX_MOUNTS 8
#define LIMIT_SANDBOX_MOUNT_BYTES 2048u
/* A claim of a warm sandbox (docs/WARM_POOL.md): its env, "K=V" strings with their NULs, kept
 * with the sandbox and in the init; a create whose env does not fit is a cold create. At most
 * LIMIT_WARM_SANDBOXES sandboxes kept ready (warm_sandboxes). */
#define LIMIT_SANDBOX_CLAIM_ENV_BYTES 8192u
/* A VM sandbox's credentials (a profile's credential_refs): each secret file at most this
 * big, and the guest's tmpfs for the file targets this big. */
#define LIMIT_VM_SECRET_BYTES 4096u
#define LIMIT_VM_CREDENTIAL_FS_BYTES (256u << 10)
/* A VM's claim (its env and credentials) is one message on a reserved connection's small
 * buffers: this much of it, with room for its framing. */
#define LIMIT_VM_CLAIM_BYTES (12u * 1024u)
#define LIMIT_WARM_SANDBOXES 32
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
/* The init's report of itself in its registration (agentic-self-status): the lines Uid, Gid,
 * Groups, CapInh..CapAmb, NoNewPrivs and Seccomp of its /proc/self/status, with a NUL. */
#define LIMIT_AGENT_SELF_BYTES 512
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
/* The heartbeat interval agenticd asks of each init (seconds); output acks at least every
 * OUT_ACK_BYTES of the init's replay ring, counting OUT_RECORD_BYTES of ring per chunk
 * beyond its data; a failed transcript write asks the init again OUT_RETRY_MS later. A
 * heartbeat is not how either side learns the other is gone (the socket's hangup is, and the
 * virtio port's for a VM) and agenticd keeps no clock of them; each one wakes agenticd's loop,
 * and at 5 s 1000 idle sandboxes were 200 wakes a second and most of its idle CPU. */
#define HEARTBEAT_INTERVAL_S 30
#define OUT_ACK_BYTES (128u * 1024u)
#define OUT_RECORD_BYTES 192u
#define OUT_RETRY_MS 1000
/* Engine calls: a failed teardown step is tried again after RETRY_MS, the warm network pool
 * after POOL_RETRY_MS, the event stream after EVENTS_RETRY_MS. */
#define RETRY_MS 2000
#define POOL_RETRY_MS 5000
#define EVENTS_RETRY_MS 1000
/* The Docker runtime writes the last engine event's time down at most this often. */
#define EVENTS_SINCE_SAVE_MS 1000
/* Taints seen while a sandbox's run was closed (replayed after a restart, before its agent
 * is back), whose trace events wait for the run to open again. */
#define LIMIT_TAINTS_UNTRACED 256
/* A command's start is in the run's metrics within this long. */
#define RUN_METRICS_DELAY_MS 100
/* Exec sessions at once, and the stdin one StdinChunk carries. */
#define LIMIT_EXECS 512
#define STDIN_CHUNK 8192
/* E2B processes (src/e2b/e2b_process.c): the table of the processes process.Process/Start
 * ran, at most LIMIT_E2B_SANDBOX_PROCS per sandbox (the rest of its LIMIT_INIT_COMMANDS stays
 * for file operations and agentic exec), each followed by at most LIMIT_E2B_PROC_STREAMS
 * streams (its Start's and Connects'), its config as List shows it cut to
 * LIMIT_E2B_PROC_CONFIG_BYTES; LIMIT_E2B_STDIN_WAITING SendInputs at once may wait for their
 * process to read. A keepalive frame after LIMIT_E2B_PING_S of silence, unless asked. */
#define LIMIT_E2B_PROCS 256
#define LIMIT_E2B_SANDBOX_PROCS 56
#define LIMIT_E2B_PROC_STREAMS 4
#define LIMIT_E2B_PROC_CONFIG_BYTES 480u
#define LIMIT_E2B_STDIN_WAITING 4
#define LIMIT_E2B_PING_S 50
/* A sandbox's name, its instance id (a uuid7), the engine's id of its container or network
 * (64 hex digits), its network's name, its error text; a run's directory name; the exit
 * codes a run counts. */
#define SB_NAME_BYTES 64
#define SB_ID_BYTES 37
#define SB_ENGINE_ID_BYTES 65
#define SB_NET_BYTES 64
#define SB_ERROR_BYTES 2048
#define RUN_NAME_BYTES 48
#define RUN_CODES 16
/* Times a workspace's loop device is asked for again when another took it first. */
#define LIMIT_WORKSPACE_LOOP_ATTEMPTS 8
/* Workspace-deleting children agenticd waits for at its stop, and for how long at most. */
#define LIMIT_WORKSPACE_DELETERS 64
#define LIMIT_STOP_DELETE_MS 10000
/* agenticd.conf: mount_allowlist entries, one string value, one line, the whole file. */
#define CONFIG_MAX_ALLOWED_MOUNTS 16
#define CONFIG_STR_BYTES 256
#define CONFIG_LINE_BYTES 1024
#define CONFIG_FILE_MAX_BYTES (64u * 1024u)
_Static_assert(RETRY_MS >= 100 && POOL_RETRY_MS >= RETRY_MS && EVENTS_RETRY_MS >= 100 &&
	       POOL_RETRY_MS <= LIMIT_ADMIN_IDLE_MS,
	       "retries neither spin nor wait longer than a client stays");
_Static_assert(OUT_RETRY_MS >= 100 && RUN_METRICS_DELAY_MS >= 10 && RUN_METRICS_DELAY_MS < 1000,
	       "retries do not spin; metrics are fresh within a second");
_Static_assert(SB_NAME_BYTES >= 1 + 62 + 1, "a name of ^[a-z][a-z0-9-]{1,62}$ and its NUL fit");
_Static_assert(SB_NET_BYTES >= 12 + 12 + 1, "agentic-net-<12 hex> and its NUL fit");
_Static_assert(SB_ERROR_BYTES >= LIMIT_CREATE_LOG_BYTES + 256,
	       "a failed create's error holds its sentence and the init's last log lines");
_Static_assert(RUN_NAME_BYTES >= 4 + 23 + 1 + 11 + 1 && RUN_CODES >= 2,
	       "run-<stamp>-<int> and its NUL fit; a run counts success and a failure");
_Static_assert(LIMIT_EXECS >= 1 && LIMIT_WORKSPACE_LOOP_ATTEMPTS >= 1, "at least one");
_Static_assert(LIMIT_E2B_PROCS <= LIMIT_EXECS && LIMIT_E2B_SANDBOX_PROCS <= LIMIT_E2B_PROCS &&
	       LIMIT_E2B_PROCS <= UINT16_MAX, "an E2B process is an exec session");
_Static_assert(CONFIG_STR_BYTES < CONFIG_LINE_BYTES && CONFIG_LINE_BYTES <= CONFIG_FILE_MAX_BYTES,
	       "a line holds a key and its longest value; the file holds a line");
_Static_assert(CONFIG_MAX_ALLOWED_MOUNTS >= LIMIT_SANDBOX_MOUNTS,
	       "each of a create's mounts can come from a root of its own");

/* The seccomp profile every sandbox gets (src/daemon/seccomp.c): a profile file may be this
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
/* What one create may ask for in `resources` (config-free caps: a request outside them is a
 * mistake, refused with 400 before any engine call). Memory from 32 MiB (the init takes about
 * 13 MiB and /tmp counts in it) to 1 TiB; pids from 8 to 4M (the kernel's pid_max ceiling);
 * CPUs from 0.01 (Docker's own minimum) to the host's online CPUs, which the engine would
 * refuse beyond anyway (read at each create: sysconf is cheap). */
#define LIMIT_SANDBOX_MEMORY_MIN_BYTES (32ull << 20)
#define LIMIT_SANDBOX_MEMORY_MAX_BYTES (1ull << 40)
#define LIMIT_SANDBOX_PIDS_MIN 8u
#define LIMIT_SANDBOX_PIDS_MAX (1u << 22)
#define LIMIT_SANDBOX_NANO_CPUS_MIN 10000000ull
_Static_assert(LIMIT_SANDBOX_MEMORY_MIN_BYTES >= LIMIT_SANDBOX_TMP_BYTES / 2 &&
	       LIMIT_SANDBOX_MEMORY_MIN_BYTES < LIMIT_SANDBOX_MEMORY_MAX_BYTES,
	       "the smallest memory limit holds the init and some of /tmp");

/* ---- a sandbox's transcript budget (src/transcript/runlog.c) ---- */
/* transcript_budget_bytes, a request's transcript_bytes: what the files of all of a sandbox's
 * runs may hold on the agentshare. stdout.log and stderr.log together may fill it up to its
 * last 1/LIMIT_TRANSCRIPT_LINES_DIV, the room kept for the lines of later commands and events
 * (and the cut's mark), so a sandbox whose output was cut still has its commands recorded. */
#define LIMIT_TRANSCRIPT_MIN_BYTES (1ull << 20)
#define LIMIT_TRANSCRIPT_MAX_BYTES (1ull << 40)
#define LIMIT_TRANSCRIPT_LINES_DIV 16u

/* ---- agenticd exec spill (src/admin/admin_conn.c) ---- */
/* Exec output a client has not taken waits in a spill file, at most exec_spill_max_bytes per
 * client; a spill never takes the last 1/LIMIT_EXEC_SPILL_FREE_DIV of its filesystem (the
 * transcripts' room). The filesystem is asked every LIMIT_EXEC_SPILL_CHECK_BYTES spilled, and
 * output the client has taken is punched out of the file at the same step. */
#define LIMIT_EXEC_SPILL_FREE_DIV 20
#define LIMIT_EXEC_SPILL_CHECK_BYTES (1u << 20)

/* ---- init (src/init) ---- */
/* The largest message agenticd may send the init on its Connect stream (a command with its
 * args and env, a stdin chunk). The init's whole gRPC budget follows from it: one large
 * buffer plus an unpack arena of twice this, about 3.6 MiB in all. Small buffers: four for
 * the Connect stream, and a send and a receive buffer for each egress call
 * (LIMIT_INIT_EGRESS_CONNS, below), so egress never takes the Connect stream's. */
#define LIMIT_INIT_MESSAGE_BYTES (1024u * 1024u)
#define LIMIT_INIT_SMALL_BUFFERS (4 + 2 * LIMIT_INIT_EGRESS_CONNS)
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
/* The agent channel: redial backoff doubling from MIN to MAX, a registration unanswered
 * this long is redialled, the heartbeat interval before an ack names one and the longest an
 * ack may name (seconds). */
#define INIT_BACKOFF_MIN_MS 100
#define INIT_BACKOFF_MAX_MS 5000
#define INIT_ACK_TIMEOUT_MS 10000
#define INIT_HEARTBEAT_DEFAULT_S 5
#define INIT_HEARTBEAT_MAX_S 300
/* The most output one OutputChunk carries; stdin acknowledged every this many bytes; a
 * result's error text, NUL included; one string agenticd passes in the environment. */
#define INIT_CHUNK_BYTES 8192
#define INIT_STDIN_ACK_BYTES (16u * 1024u)
#define INIT_ERROR_BYTES 192
#define INIT_ENV_STR 256
/* A command's pipes still open this long after its supervisor ended are cut; the supervisor
 * rescans this often (ns) while killing; the command's own stack from its clone to its
 * execve (command_exec's frame, a PATH buffer of LIMIT_PATH_BYTES, and the libc calls it
 * makes, with room to spare). */
#define LIMIT_INIT_LINGER_MS 1000
#define LIMIT_INIT_KILL_POLL_NS 50000000L
#define LIMIT_INIT_COMMAND_STACK_BYTES (LIMIT_PATH_BYTES + 28672)
/* On the way out: SIGTERM first, the trees still alive after TERM_MS are killed; killed
 * commands may take until GRACE_MS to report their end, and the goodbye to agenticd may
 * then hold up the exit FLUSH_MS (within docker stop's default 10 s). */
#define LIMIT_INIT_STOP_TERM_MS 1500
#define LIMIT_INIT_STOP_GRACE_MS 3000
#define LIMIT_INIT_STOP_FLUSH_MS 1000
/* Egress (src/init/proxy.c): an accepted connection whose call found no room to start is
 * answered 503 after START_MS; after a call ended OK the bytes still buffered for the
 * workload get LINGER_MS to be written before the socket is closed. */
#define LIMIT_INIT_EGRESS_START_MS 5000
#define LIMIT_INIT_EGRESS_LINGER_MS 10000
_Static_assert(INIT_BACKOFF_MIN_MS >= 10 && INIT_BACKOFF_MIN_MS <= INIT_BACKOFF_MAX_MS &&
	       INIT_BACKOFF_MAX_MS < INIT_ACK_TIMEOUT_MS,
	       "the backoff does not spin, grows, and redials sooner than an ack is given up on");
_Static_assert(INIT_HEARTBEAT_DEFAULT_S >= 1 && INIT_HEARTBEAT_DEFAULT_S <= INIT_HEARTBEAT_MAX_S &&
	       HEARTBEAT_INTERVAL_S >= 1 && HEARTBEAT_INTERVAL_S <= INIT_HEARTBEAT_MAX_S,
	       "the default and agenticd's interval are ones an init takes");
_Static_assert(INIT_CHUNK_BYTES + LIMIT_INIT_COMMAND_ID + 64 <= GRPC_SMALL_MESSAGE,
	       "an OutputChunk fits a small gRPC buffer");
_Static_assert(STDIN_CHUNK + LIMIT_INIT_COMMAND_ID + 64 <= GRPC_SMALL_MESSAGE &&
	       STDIN_CHUNK < LIMIT_INIT_STDIN_BYTES,
	       "a StdinChunk fits a small gRPC buffer and leaves agenticd a stdin window");
_Static_assert(INIT_STDIN_ACK_BYTES <= LIMIT_INIT_STDIN_BYTES / 2,
	       "stdin is acknowledged before the command's buffer is half full");
_Static_assert(OUT_RECORD_BYTES >= 32 + LIMIT_INIT_COMMAND_ID + 32,
	       "a chunk's header, command id and alignment fit what agenticd counts");
_Static_assert(INIT_ERROR_BYTES >= 64 && INIT_ENV_STR >= 108,
	       "an error says something; a socket path (sun_path) fits");
_Static_assert(LIMIT_INIT_STOP_TERM_MS < LIMIT_INIT_STOP_GRACE_MS &&
	       LIMIT_INIT_STOP_GRACE_MS + LIMIT_INIT_STOP_FLUSH_MS < 10000,
	       "killing starts before the grace ends, and all of it is within docker stop's 10 s");
_Static_assert(LIMIT_INIT_KILL_POLL_NS > 0 && LIMIT_INIT_KILL_POLL_NS < 1000000000L &&
	       LIMIT_INIT_LINGER_MS >= 100,
	       "the rescan period is a timespec's nanoseconds; lingering pipes get a moment");

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

/* agentic-probe-agent: how long it waits for the agent socket's answer. */
#define LIMIT_PROBE_WAIT_MS 2000
/* The CLI: the answer body it keeps (a list of every sandbox). */
#define LIMIT_CLI_BODY_BYTES (4u * 1024u * 1024u)
_Static_assert(LIMIT_PROBE_WAIT_MS >= 100, "a loaded machine answers in time");

/* The verifier: runs at once (a verify of each sandbox is one of them), how long one may take
 * before what it has is answered, its result object, the probe's output it keeps (the exec
 * engine's internal sink), how long the probe waits for its connects to the host, and the
 * entries of a sandbox's runs whose modes it checks, and the connections its host listener
 * keeps waiting (a filter takes only the container's addresses; the probe makes three). */
#define LIMIT_VERIFY_RUNS 4u
#define LIMIT_VERIFY_MS 10000
#define LIMIT_VERIFY_JSON_BYTES (24u * 1024u)
#define LIMIT_EXEC_COLLECT_BYTES 4096u
#define LIMIT_PROBE_CONNECT_MS 250
#define LIMIT_VERIFY_WALK_ENTRIES 4096u
#define LIMIT_VERIFY_ACCEPTS 16
_Static_assert(LIMIT_VERIFY_RUNS >= 1, "at least one verification");
_Static_assert(LIMIT_VERIFY_JSON_BYTES + 512u <= LIMIT_ADMIN_OUT_BYTES,
	       "a verify result goes out in one response buffer, with its head");
_Static_assert(LIMIT_PROBE_CONNECT_MS + LIMIT_PROBE_WAIT_MS < LIMIT_VERIFY_MS,
	       "the probe's waits end before the verification's deadline");
_Static_assert(LIMIT_EXEC_COLLECT_BYTES >= 2048u, "the probe's whole output fits");
_Static_assert(LIMIT_VERIFY_ACCEPTS >= 3, "the probe's three connects are all read");
_Static_assert(LIMIT_CLI_BODY_BYTES >= LIMIT_ADMIN_OUT_BYTES,
	       "the CLI keeps at least one response buffer of agenticd's");

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
_Static_assert(LIMIT_DOCKER_EVENT_STRING_BYTES >= 256u &&
	       LIMIT_DOCKER_EVENT_STRING_BYTES * 8u <= LIMIT_DOCKER_EVENT_BYTES,
	       "an event's id and action word fit; its cut strings leave room for the rest");
_Static_assert(LIMIT_DOCKER_REQUEST_BYTES >= LIMIT_HTTP_HEAD_BYTES,
	       "a request holds at least a full head");
_Static_assert(LIMIT_DOCKER_DEFAULT_CONNS >= 1 && LIMIT_DOCKER_DEFAULT_CONNS <= LIMIT_DOCKER_CONNS,
	       "the default pool is one the client accepts");
_Static_assert(LIMIT_HTTP_CONNECT_TIMEOUT_MS >= 100 &&
	       LIMIT_DOCKER_READ_TIMEOUT_MS >= 4 * LIMIT_HTTP_CONNECT_TIMEOUT_MS,
	       "a loaded engine gets time to accept, and more to answer");
_Static_assert(LIMIT_DOCKER_TARGET_BYTES >= 256 + LIMIT_PATH_BYTES / 4 &&
	       LIMIT_DOCKER_TARGET_BYTES <= LIMIT_HTTP_HEAD_BYTES / 2,
	       "a target holds a name or id and a filter, and fits a head with its headers");
_Static_assert(DOCKER_LIST_MAX >= LIMIT_SANDBOX_CMD_ARGS &&
	       DOCKER_LIST_MAX >= 2 * LIMIT_SANDBOX_LABELS && DOCKER_LIST_MAX >= LIMIT_SANDBOX_MOUNTS,
	       "an inspect keeps a create's command, its labels beside agentic's own, its mounts");

/* ---- egress (docs/EGRESS.md) ---- */
/* Bytes of one Egress call in flight one way: sent and not yet reported consumed. */
#define EGRESS_WINDOW (256u * 1024u)
/* Data bytes in one EgressChunk at most. */
#define EGRESS_CHUNK 16000u
/* Egress connections one init carries at once; a further one is accepted and closed. */
#define LIMIT_INIT_EGRESS_CONNS 8
/* The proxy listener inside a sandbox. */
#define EGRESS_PROXY_PORT 3128
_Static_assert(EGRESS_CHUNK + 64 <= GRPC_SMALL_MESSAGE && EGRESS_WINDOW >= 2 * EGRESS_CHUNK,
	       "a chunk is a small message; a window holds two");


/* ---- file operations (src/init/fileop.c, src/agent/fileop.c; docs/API.md "Files") ---- */
/* One result line of the file applet (an entry as JSON), escapes included: a longer one is
 * not written (the applet answers ENAMETOOLONG, or leaves that entry out of a list). */
#define LIMIT_FILEOP_LINE_BYTES 12288u
/* Levels a list may descend and a remove may go down at most. */
#define LIMIT_FILEOP_DEPTH 64u
/* File operations agenticd runs at once (each holds a line buffer), and their deadlines:
 * a transfer's (read, write), every other one's. */
#define LIMIT_FILEOPS 16u
#define LIMIT_FILEOP_TRANSFER_S 3600
#define LIMIT_FILEOP_META_S 300
/* The applet's error line kept for the client. */
#define LIMIT_FILEOP_MESSAGE_BYTES 256u
_Static_assert(LIMIT_FILEOP_LINE_BYTES >= 2u * LIMIT_PATH_BYTES + 512u,
	       "a line holds a path and a symlink's target with room for the fields");

#endif
