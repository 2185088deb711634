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

/* Pruner: runs it will consider in one invocation. */
#define LIMIT_PRUNE_RUNS (1u << 20)

/* gRPC (DESIGN.md §5): defaults of max_message_bytes and max_streams_per_connection. A
 * connection's fixed memory is sizeof(struct grpc_conn) (src/grpc/grpc.h); the budget is that
 * times the connection cap, plus message buffers and one unpack arena of twice the largest
 * message. */
#define LIMIT_GRPC_MESSAGE_BYTES (4u * 1024u * 1024u)
#define LIMIT_GRPC_STREAMS 128

_Static_assert(LIMIT_LOG_LINE_BYTES >= 256, "log lines must hold a useful message");
_Static_assert(LIMIT_BOOT_HEAP_BYTES >= 64u * 1024u, "boot heap must hold libc start-up");
_Static_assert(LIMIT_ALLOC_MAX_BYTES >= LIMIT_PATH_BYTES, "a path must be allocatable");
_Static_assert(LIMIT_GRPC_MESSAGE_BYTES <= LIMIT_ALLOC_MAX_BYTES / 4,
	       "a message and its unpack arena fit the allocator's largest piece");

#endif
