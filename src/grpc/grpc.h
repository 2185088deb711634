/* grpc.h: gRPC over HTTP/2 on Unix sockets: a server built around its own epoll loop (which
 * an outer loop embeds as one fd), a client, status codes, and protobuf-c on arenas.
 *
 * Single-threaded and non-blocking. All memory is taken once, at init, from storage the
 * caller hands in (grpc_server_storage_bytes / grpc_client_storage_bytes say how much):
 *   - connections: a fixed pool; each holds its h2 engine and one call slot per stream:
 *     sizeof(struct grpc_conn), 117,456 bytes on x86-64, logged at start as conn_bytes;
 *   - message buffers: `small_buffers` of GRPC_SMALL_MESSAGE bytes and `large_buffers` of
 *     max_message_bytes, shared by every connection: a message being reassembled across DATA
 *     frames, or queued for sending, holds one; a message that arrives whole in one read is
 *     unpacked where it lies and holds none; and as many GRPC_MD_BYTES buffers as small ones,
 *     for response metadata and status messages waiting to be sent;
 *   - one unpack arena (2 * max_message_bytes + 64 KiB): every received message is unpacked by
 *     protobuf-c into it with a bump ProtobufCAllocator, handed to the handler, and the arena is
 *     reset when the handler returns. A message whose unpacked form does not fit fails the call
 *     with RESOURCE_EXHAUSTED.
 * So the budget is max_connections * conn_bytes plus the shared part, and nothing is
 * allocated after init: the static binary can seal its allocator.
 *
 * Limits (config: max_message_bytes): a length prefix over max_message_bytes fails the call with
 * RESOURCE_EXHAUSTED before a byte of it is stored; when no message buffer is free the call
 * fails the same way; max_streams_per_connection is advertised as MAX_CONCURRENT_STREAMS and
 * enforced by h2; connections over max_connections evict the oldest one still in its preface
 * (a stalled half-open peer), or are closed at once (guests of an admitting server: see
 * grpc_server_config); a peer that has not sent its preface within preface_timeout_ms is
 * closed. Lines about refused or evicted connections are logged at most once a second, with
 * the count of those not logged.
 *
 * Calls: a handler sees a call through struct grpc_handler callbacks. Received messages and
 * metadata live only for the duration of the callback that hands them over. A call pointer is
 * valid from on_start until on_done returns, and never after. */
#ifndef AGENTIC_GRPC_H
#define AGENTIC_GRPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

#include "base/base.h"
#include "h2/h2.h"

enum grpc_status {
	GRPC_OK = 0,
	GRPC_CANCELLED = 1,
	GRPC_UNKNOWN = 2,
	GRPC_INVALID_ARGUMENT = 3,
	GRPC_DEADLINE_EXCEEDED = 4,
	GRPC_NOT_FOUND = 5,
	GRPC_ALREADY_EXISTS = 6,
	GRPC_PERMISSION_DENIED = 7,
	GRPC_RESOURCE_EXHAUSTED = 8,
	GRPC_FAILED_PRECONDITION = 9,
	GRPC_ABORTED = 10,
	GRPC_OUT_OF_RANGE = 11,
	GRPC_UNIMPLEMENTED = 12,
	GRPC_INTERNAL = 13,
	GRPC_UNAVAILABLE = 14,
	GRPC_DATA_LOSS = 15,
	GRPC_UNAUTHENTICATED = 16,
};

/* "OK", "CANCELLED" ... ; "UNKNOWN_STATUS" for codes outside 0..16. */
const char *grpc_status_name(int status);

/* GRPC_SMALL_MESSAGE, GRPC_MAX_LISTENERS, GRPC_MAX_MD, GRPC_MD_BYTES, GRPC_READ_BYTES are in
 * base/limits.h. */

/* Peer credentials taken with SO_PEERCRED when the connection was accepted, and what the
 * server's admit hook settled about it then. */
struct grpc_peer {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	int32_t slot;   /* the reserved slot admit gave it, or -1: a guest (or no admit hook) */
	uint32_t tag;   /* admit's own word for this connection */
};

/* One metadata entry. For keys ending in "-bin" the value is binary (base64 on the wire). */
struct grpc_md {
	const char *key;
	const void *value;
	size_t len;
};

struct grpc_call;

struct grpc_handler {
	/* Server: a call to this method arrived; its metadata is readable now (grpc_call_md).
	 * Client: the response headers arrived. */
	void (*on_start)(struct grpc_call *call);
	/* A message, unpacked into the call's arena; valid until this returns. */
	void (*on_message)(struct grpc_call *call, const ProtobufCMessage *msg);
	/* Server: the client has sent its last message. */
	void (*on_half_close)(struct grpc_call *call);
	/* After grpc_call_send returned -EAGAIN: the queue has drained, send again. Owed until it
	 * is called, however many sends succeed in between; never called from inside the
	 * handler's own grpc_call_* calls. */
	void (*on_writable)(struct grpc_call *call);
	/* The call is over, with status as seen from this side (the server's trailers on a client;
	 * CANCELLED when the peer reset it; DEADLINE_EXCEEDED; UNAVAILABLE when the connection was
	 * lost). message is NULL or the status message; on a client the trailers are readable with
	 * grpc_call_md now. The call pointer dies when this returns. */
	void (*on_done)(struct grpc_call *call, int status, const char *message);
};

#define GRPC_CLIENT_STREAMING 0x1
#define GRPC_SERVER_STREAMING 0x2
/* Server: the method's calls take their message and meta buffers from the server's own pool
 * (grpc_server_config own_buffers), never the shared ones, and on a reserved connection they
 * get own_streams streams of their own beside reserved_streams: a peer flooding such calls
 * cannot starve its own or another peer's other calls. An own call that finds the pool (or
 * its streams) taken is refused RESOURCE_EXHAUSTED at once. Only small messages. */
#define GRPC_OWN_POOL 0x4

/* A method: dispatched on path by the server; named by a client call. */
struct grpc_method {
	const char *path;  /* "/package.Service/Method" */
	const ProtobufCMessageDescriptor *request;
	const ProtobufCMessageDescriptor *response;
	unsigned flags;
	struct grpc_handler handler;
	void *ctx;  /* the handler's, see grpc_call_method */
};

/* ---- calls (both sides) ---- */

/* Packs msg and queues it behind those queued (one buffer per call). -EAGAIN: the queue is
 * full (on_writable follows when it drains); ERR_LIMIT: over max_message_bytes or no message buffer free (fail the call
 * with RESOURCE_EXHAUSTED); ERR_STATE: this side has finished. */
int grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg);
/* Writes what the call's connection holds now, as much as the socket takes without waiting,
 * instead of at the event loop's next turn: for a message whose latency matters (a command
 * to start) when the caller has slower work to do before it returns to the loop. Runs no
 * callback; the rest, and any error, is the loop's as always. */
void grpc_call_flush(struct grpc_call *call);
/* Server: ends the call: trailers (or a trailers-only response when nothing was sent) with
 * status, message (percent-encoded on the wire; may be NULL) and md, after queued messages;
 * for a unary method, once its request has ended too (a second request message turns the
 * status INTERNAL).
 * Client: status must be GRPC_OK and sends END_STREAM (half-close); any other status cancels
 * the call (RST_STREAM CANCEL, on_done with that status). */
int grpc_call_finish(struct grpc_call *call, int status, const char *message,
		     const struct grpc_md *md, size_t n);
/* Server: metadata for the response headers, before the first message or finish. */
int grpc_call_set_headers(struct grpc_call *call, const struct grpc_md *md, size_t n);
/* Metadata of the peer (request headers in a server's on_start; response headers in a
 * client's on_start; trailers in a client's on_done): the value of key, or NULL. For "-bin"
 * keys use grpc_call_md_bin, which decodes base64 into out (cap bytes) and returns the
 * length, or -ENOENT / ERR_PARSE / ERR_LIMIT. */
const char *grpc_call_md(const struct grpc_call *call, const char *key, size_t *len);
long grpc_call_md_bin(const struct grpc_call *call, const char *key, void *out, size_t cap);
const struct grpc_peer *grpc_call_peer(const struct grpc_call *call);
const struct grpc_method *grpc_call_method(const struct grpc_call *call);
/* The call's arena: for building responses inside a callback; reset after it returns. */
struct arena *grpc_call_arena(struct grpc_call *call);
/* The handler's own pointer for this call, and 32 bytes of its own, zeroed at the start. */
void grpc_call_set_user(struct grpc_call *call, void *user);
void *grpc_call_user(const struct grpc_call *call);
void *grpc_call_app(struct grpc_call *call);

/* ---- server ---- */

struct grpc_server_config {
	uint32_t max_connections;
	uint32_t max_streams_per_connection;  /* 1..H2_MAX_STREAMS */
	uint32_t max_message_bytes;           /* >= GRPC_SMALL_MESSAGE */
	uint32_t small_buffers;
	uint32_t large_buffers;
	uint32_t preface_timeout_ms;          /* 0: 10000 */
	/* Admission: with admit set, identity is settled when a connection is accepted, before
	 * a byte of it is read. admit sees the peer (and the socket, to take SO_PEERPIDFD; it must
	 * not keep it) and returns a slot below reserved_connections, which the connection takes
	 * (ending the one there: a slot holds one connection), or -1. It may set peer->tag.
	 * Reserved connections are served like any, from the buffers above. Every other peer is
	 * a guest: one of the max_connections, at most guest_per_uid per uid (a new one ends
	 * that uid's oldest; a new one beyond max_connections ends the oldest guest), one stream,
	 * messages of at most GRPC_SMALL_MESSAGE, buffers of its own (two small and two meta
	 * buffers per guest, never the shared ones above), closed guest_idle_ms after its
	 * accept or its last finished Health/Check, and closed after a call to any other method
	 * (whose handler must refuse it). */
	int (*admit)(void *ctx, int fd, struct grpc_peer *peer);
	void *admit_ctx;
	uint32_t reserved_connections;
	/* Streams a reserved connection may have open at once (0: max_streams_per_connection).
	 * The shared buffers are sized per reserved connection: each open stream can hold a
	 * meta, a receive and a send buffer, so a peer with many streams would take the others'. */
	uint32_t reserved_streams;
	/* The largest message a reserved connection may send (0: max_message_bytes); at most
	 * GRPC_SMALL_MESSAGE keeps its peers off the few large buffers. */
	uint32_t reserved_message_bytes;
	uint32_t guest_per_uid;               /* 0: max_connections */
	uint32_t guest_idle_ms;               /* 0: preface_timeout_ms */
	/* The pool of GRPC_OWN_POOL methods: own_buffers small buffers and as many meta ones (a
	 * call holds at most two small and one meta: own_buffers = 2 * the calls to carry at
	 * once); 0: no pool, those methods share the buffers above like any. own_streams:
	 * streams a reserved connection may have for them beyond reserved_streams (the other
	 * methods keep to reserved_streams; 0 with a pool: reserved connections get none). */
	uint32_t own_buffers;
	uint32_t own_streams;
};

struct grpc_server;

/* The storage a config needs (the whole budget), or 0 when the config is out of range. */
size_t grpc_server_storage_bytes(const struct grpc_server_config *cfg);
/* Sets up a server over storage (touched at once, so its pages count from the start). *out
 * points into storage. ERR_LIMIT: storage too small or config out of range; -errno from
 * epoll_create1. */
int grpc_server_init(const struct grpc_server_config *cfg, void *storage, size_t len,
		     struct grpc_server **out);
/* Serves methods (plus grpc.health.v1.Health/Check) on an already listening socket, which
 * the server makes non-blocking and owns from now on. */
int grpc_server_add_listener(struct grpc_server *s, int fd, const struct grpc_method *methods,
			     size_t n);
/* Adopts a connection accepted elsewhere (a socket that also speaks another protocol, told
 * apart by its first bytes, which must still be unread): takes SO_PEERCRED, makes it
 * non-blocking and serves methods on it exactly as if accepted here. On a 0 return the
 * server owns fd (and closes it when the connection ends); on an error return the caller
 * still does. ERR_LIMIT: no listener slot (connections adopted for one methods table share
 * one) or the connection pool is full; -errno from fcntl or getsockopt. */
int grpc_server_add_conn(struct grpc_server *s, int fd, const struct grpc_method *methods,
			 size_t n);
/* A connection whose peer the caller knows by other means than SO_PEERCRED (a VM's control
 * socket: which socket it is says whose it is), into reserved slot `slot` as admit would
 * put it there, with peer as its peer (its slot is set to slot). A connection in the slot
 * goes. fd is the server's from here, also on failure. 0, ERR_LIMIT or -errno. */
int grpc_server_add_reserved(struct grpc_server *s, int fd, const struct grpc_method *methods,
			     size_t n, uint32_t slot, const struct grpc_peer *peer);
/* Whether reserved slot `slot` holds a connection now. */
bool grpc_server_reserved_busy(const struct grpc_server *s, uint32_t slot);
/* Creates a Unix socket at path (replacing a stale one) with mode, and adds it. */
int grpc_server_listen_unix(struct grpc_server *s, const char *path, mode_t mode,
			    const struct grpc_method *methods, size_t n);
/* The epoll fd to watch for readability in an outer loop, and the most milliseconds the
 * outer loop may sleep before calling grpc_server_run again (-1: no timer pending). */
int grpc_server_fd(const struct grpc_server *s);
int grpc_server_timeout(const struct grpc_server *s);
/* Waits up to timeout_ms (0: not at all) for events, handles them and expired deadlines. */
int grpc_server_run(struct grpc_server *s, int timeout_ms);
/* Ends the connection in reserved slot (its calls end with UNAVAILABLE); none there: nothing. */
void grpc_server_drop_reserved(struct grpc_server *s, uint32_t slot);
/* Counters, for tests and logs. */
struct grpc_server_stats {
	uint32_t connections, calls;   /* connections: guests and reserved ones together */
	uint32_t small_free, large_free;
	uint32_t own_free;             /* small buffers free in the GRPC_OWN_POOL pool */
	uint64_t accepted, evicted, refused;
};
void grpc_server_stats(const struct grpc_server *s, struct grpc_server_stats *out);
/* Sends GOAWAY on every connection, closes them and the listeners; calls end with
 * UNAVAILABLE. The storage may be reused after. */
void grpc_server_close(struct grpc_server *s);

/* ---- client ---- */

struct grpc_client_config {
	/* the server's Unix socket, or a character device under /dev/ (a virtio serial port):
	 * its bytes are carried through a socketpair, with 2 * 16 KiB more storage */
	const char *path;
	uint32_t max_message_bytes;
	uint32_t small_buffers;
	uint32_t large_buffers;
	/* the storage is zero already (a fresh anonymous mapping): not cleared again, so the
	 * pages no message has used yet stay untouched, out of the resident set */
	bool zeroed;
	/* when set, called instead of dialling path: a connected stream socket, or -errno (the
	 * fleet worker hands one end of a socketpair and carries the other over TLS) */
	int (*dial)(void *ctx);
	void *dial_ctx;
};

struct grpc_client;

size_t grpc_client_storage_bytes(const struct grpc_client_config *cfg);
int grpc_client_init(const struct grpc_client_config *cfg, void *storage, size_t len,
		     struct grpc_client **out);
/* Connects when not connected (the first call does it too). -errno from connect or open;
 * a device whose other end is not connected (it polls POLLHUP) is -ECONNREFUSED. A device
 * that hangs up or reads 0 later is a lost connection, as a socket's EOF is. */
int grpc_client_connect(struct grpc_client *c);
/* 1 while connected. After the connection is lost every call ends with UNAVAILABLE and the
 * next grpc_client_start or grpc_client_connect dials again. */
int grpc_client_connected(const struct grpc_client *c);
/* Starts a call of m with metadata md and a deadline (timeout_ms > 0, sent as grpc-timeout
 * and enforced here too; 0: none). Send requests with grpc_call_send, then
 * grpc_call_finish(GRPC_OK) to half-close. -EAGAIN: no room to send the headers now (run the
 * client, then retry); ERR_LIMIT: too many calls; ERR_STATE / -errno: no connection. */
int grpc_client_start(struct grpc_client *c, const struct grpc_method *m,
		      const struct grpc_md *md, size_t n, int timeout_ms, void *user,
		      struct grpc_call **out);
int grpc_client_fd(const struct grpc_client *c);
int grpc_client_timeout(const struct grpc_client *c);
/* Waits up to timeout_ms for the connection, handles what arrived and expired deadlines.
 * Returns 0, or ERR_STATE when not connected. */
int grpc_client_run(struct grpc_client *c, int timeout_ms);
void grpc_client_close(struct grpc_client *c);

/* ---- wire helpers (exposed for tests) ---- */

/* Parses a grpc-timeout value ("100m", "3S", "1H" ...) into milliseconds, rounding up.
 * ERR_PARSE when malformed. */
int grpc_timeout_parse(const char *s, size_t len, int64_t *ms);
/* Percent-encodes s for grpc-message into out (NUL-terminated): what is outside 0x20..0x7e,
 * '%', and a space at either end (which a field value may not have); ERR_LIMIT when it does
 * not fit. Decoding is lenient, as the spec asks: a bad escape is kept as is. */
int grpc_percent_encode(const char *s, char *out, size_t cap);
void grpc_percent_decode(char *s);
/* Base64 for -bin metadata: encode (unpadded) and decode (padded or not). Return the output
 * length, or ERR_LIMIT / ERR_PARSE. */
long grpc_base64_encode(const void *in, size_t len, char *out, size_t cap);
long grpc_base64_decode(const char *in, size_t len, void *out, size_t cap);

/* Reassembly of length-prefixed messages from DATA bytes, without I/O (exposed for the fuzz
 * target and tests). The caller supplies the buffer for messages that span feeds. */
struct grpc_rx {
	uint8_t hdr[5];
	uint8_t hdr_len;
	uint32_t need;      /* bytes of the current message still to come */
	uint32_t len;       /* its length */
	uint8_t *buf;       /* where a spanning message is gathered (NULL: none yet) */
	uint32_t have;
};
enum grpc_rx_event {
	GRPC_RX_MORE,       /* everything consumed; nothing complete */
	GRPC_RX_MESSAGE,    /* *msg, *len hold one complete message */
	GRPC_RX_NEED_BUF,   /* a message of *len bytes spans feeds: set rx->buf (len bytes) */
	GRPC_RX_TOO_BIG,    /* the prefix announces more than max */
	GRPC_RX_COMPRESSED, /* the compressed flag is set: we never accept compression */
};
/* Consumes bytes from *p (n of them; both advance) until an event. */
enum grpc_rx_event grpc_rx_feed(struct grpc_rx *rx, const uint8_t **p, size_t *n,
				uint32_t max, const uint8_t **msg, uint32_t *len);

#endif
