/* limits.h: every fixed limit of agentic, in one place, related by asserts. */
#ifndef AGENTIC_BASE_LIMITS_H
#define AGENTIC_BASE_LIMITS_H

/* Longest path agentic builds or accepts (Linux PATH_MAX). */
#define LIMIT_PATH_BYTES 4096

/* One log line, including its key=value fields; longer lines are cut and marked. */
#define LIMIT_LOG_LINE_BYTES 2048

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
/* Default cap of one buffered Engine API response (DESIGN max_message_bytes). */
#define LIMIT_DOCKER_RESPONSE_BYTES (4u * 1024u * 1024u)
/* One request we send (container create with its env, labels and mounts). */
#define LIMIT_DOCKER_REQUEST_BYTES (64u * 1024u)
/* One event of the /events stream. */
#define LIMIT_DOCKER_EVENT_BYTES (64u * 1024u)
/* JSON tokens of one parsed response. */
#define LIMIT_DOCKER_JSON_TOKENS (64u * 1024u)
/* Connections (calls in flight at once) of one client. */
#define LIMIT_DOCKER_CONNS 16

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
_Static_assert(LIMIT_BOOT_HEAP_BYTES >= 64u * 1024u, "boot heap must hold libc start-up");
_Static_assert(LIMIT_ALLOC_MAX_BYTES >= LIMIT_PATH_BYTES, "a path must be allocatable");

_Static_assert(LIMIT_HTTP_HEAD_BYTES >= 1024u && LIMIT_HTTP_HEAD_BYTES <= 0x7fffffffu,
	       "a head must hold a real request and offsets fit 32 bits");
_Static_assert(LIMIT_HTTP_READ_BYTES >= 512u, "reads must make progress");
_Static_assert(LIMIT_DOCKER_EVENT_BYTES <= LIMIT_DOCKER_RESPONSE_BYTES,
	       "an event is buffered in a response buffer");
_Static_assert(LIMIT_DOCKER_REQUEST_BYTES >= LIMIT_HTTP_HEAD_BYTES,
	       "a request holds at least a full head");

#endif
