/* grpc_internal.h: private to src/grpc/: the connection and call records the server and client
 * share, and the functions of call.c that drive them. Not for other modules. */
#ifndef AGENTIC_GRPC_INTERNAL_H
#define AGENTIC_GRPC_INTERNAL_H

#include <string.h>

#include "grpc.h"


/* One class of fixed message buffers. */
struct grpc_bufpool {
	struct pool pool;   /* of struct grpc_buf descriptors */
	uint8_t *base;
	uint32_t size;
};

struct grpc_buf {
	uint8_t *data;
	uint32_t cap;
	uint8_t kind;  /* GRPC_BUF_* */
};

enum { GRPC_BUF_SMALL, GRPC_BUF_LARGE, GRPC_BUF_META, GRPC_BUF_KINDS };

struct grpc_conn;

/* What the calls of one server or client share. */
struct grpc_env {
	uint32_t max_message;
	struct grpc_bufpool pools[GRPC_BUF_KINDS];
	struct arena arena;
	ProtobufCAllocator alloc;
	uint8_t arena_full;
	struct h2_scratch *scratch;
	uint8_t *rdbuf;
	int epfd;
	int64_t next_deadline;  /* earliest call deadline, INT64_MAX for none */
	uint32_t calls;
	struct grpc_env *own;   /* server: the GRPC_OWN_POOL calls' buffers, or NULL */
	uint32_t own_streams;   /* streams of a reserved connection for those */
	/* server: takes a new stream's request headers (server.c's, handed down at init, so
	 * that call.c calls no function of server.c); NULL on a client */
	void (*dispatch)(struct grpc_conn *c, struct grpc_call *call, const struct h2_field *f,
			 size_t n, unsigned flags);
};

struct grpc_listener;

struct grpc_call {
	struct grpc_conn *conn;
	struct h2_stream *stream;  /* NULL: the slot is free */
	const struct grpc_method *method;
	void *user;
	int64_t deadline;          /* monotonic ms; 0: none */
	struct grpc_rx rx;
	struct grpc_env *bufs;     /* whose pools the buffers below come from: conn->env, or
				    * its own pool (GRPC_OWN_POOL) */
	struct grpc_buf *rxb, *txb, *meta;
	uint32_t tx_off, tx_len, meta_len;
	uint32_t tx_head;          /* a message boundary at or before tx_off */
	uint32_t msgs_in;
	int status;
	uint8_t started, hdrs_sent, finishing, end_sent, remote_done, have_status, want_writable;
	uint8_t extra_request;     /* a unary call got a second request message */
	uint8_t own;               /* counted in conn->nown */
	uint8_t expired;           /* server: its deadline passed, deadline is now the grace's */
	const struct h2_field *md;  /* the peer's metadata, during callbacks only */
	size_t nmd;
	uint64_t app[GRPC_APP_BYTES / 8];
};

struct grpc_conn {
	struct h2_conn h2;
	struct grpc_call calls[H2_MAX_STREAMS];
	struct grpc_env *env;
	const struct grpc_listener *listener;  /* server side */
	struct grpc_peer peer;
	int fd;
	uint32_t events;    /* registered with epoll */
	uint64_t tag;       /* epoll data */
	int64_t born;
	int64_t idle_from;  /* guests: accept or the last finished Health/Check */
	uint8_t closing;
	uint8_t guest;
	uint32_t ncalls;
	uint32_t nown;      /* of them, GRPC_OWN_POOL calls on their own streams */
	uint8_t reserved;   /* server: a reserved (admitted) connection */
	uint32_t other_streams; /* reserved: streams for the other methods (0: no cap here) */
	uint32_t max_rx;    /* the largest message received; 0: the env's max_message */
};

/* ---- bufpool.c: the shared buffers ---- */

int grpc_env_setup(struct grpc_env *env, struct arena *carve, uint32_t max_message,
		   uint32_t small, uint32_t large);
size_t grpc_env_bytes(uint32_t max_message, uint32_t small, uint32_t large);
/* A free buffer of kind (GRPC_BUF_*) from env's pool, or NULL when none is free. */
struct grpc_buf *grpc_buf_take(struct grpc_env *env, int kind);
/* Puts *b (if any) back into env's pool and clears *b. */
void grpc_buf_give(struct grpc_env *env, struct grpc_buf **b);

/* ---- meta.c: a call's metadata records ---- */

/* Meta records: kind, key length, value length (2 bytes each, big-endian), key, value. */
enum { META_HEADER = 1, META_TRAILER, META_MESSAGE };

/* Appends a record (taking the call's META buffer at the first); ERR_LIMIT when it is full
 * or none is free. */
int grpc_meta_add(struct grpc_call *call, int kind, const char *key, size_t klen,
		  const char *val, size_t vlen);
/* Removes the meta records of kind (a status message being replaced). */
void grpc_meta_drop(struct grpc_call *call, int kind);
/* grpc_meta_add for each of md ("-bin" values base64-encoded). */
int grpc_meta_add_md(struct grpc_call *call, int kind, const struct grpc_md *md, size_t n);
/* The raw status message kept in the meta buffer, NUL-terminated into out, or NULL. */
const char *grpc_meta_message(const struct grpc_call *call, char *out, size_t cap);
/* Server: the response headers (with the status: a trailers-only response). */
int grpc_send_response_headers(struct grpc_call *call, int trailers_only);
/* Server: the trailers. */
int grpc_send_trailers(struct grpc_call *call);

static inline void grpc_field_set(struct h2_field *f, const char *name, const char *value)
{
	f->name = name;
	f->name_len = (uint32_t)strlen(name);
	f->value = value;
	f->value_len = (uint32_t)strlen(value);
}


extern const struct h2_callbacks grpc_h2_callbacks;

void grpc_conn_start(struct grpc_conn *c, struct grpc_env *env, enum h2_role role, int fd,
		     uint32_t max_streams, uint64_t tag);
/* Asks the loop to write what is queued (EPOLLOUT), without doing I/O now. */
void grpc_conn_kick(struct grpc_conn *c);
/* Handles readiness; returns 1 when the connection has ended and was torn down. */
int grpc_conn_io(struct grpc_conn *c, uint32_t events);
/* Ends every call (status) and closes the fd. */
void grpc_conn_teardown(struct grpc_conn *c, int status);
/* Expires calls whose deadline passed (server: DEADLINE_EXCEEDED trailers, or RST_STREAM
 * CANCEL when they cannot go out within GRPC_DEADLINE_GRACE_MS; client: RST_STREAM CANCEL);
 * returns 1 when the connection was torn down. */
int grpc_conn_expire(struct grpc_conn *c, int64_t now);
/* Sends what the call has queued, as far as windows and room allow. */
void grpc_call_pump(struct grpc_call *call);
/* Ends the call from our side with status (server: trailers, after the rest of a message
 * already begun on the wire, the queued others dropped; client: RST_STREAM CANCEL). */
void grpc_call_fail(struct grpc_call *call, int status, const char *message);
void grpc_call_note_deadline(struct grpc_call *call, int64_t deadline);
/* The peer sent END_STREAM: checks the request count, tells the handler. */
void grpc_call_remote_done(struct grpc_call *call);

#endif
