/* h2.h: HTTP/2 framing (RFC 9113) as a resumable engine: bytes in, events and bytes out.
 *
 * One engine serves both roles (server and client). It does no I/O and keeps no clock: the
 * caller feeds whatever it read, at any byte boundary, with h2_conn_feed, and writes out what
 * h2_conn_out() holds. Feeding a connection's bytes split at every boundary gives the same
 * events and output as feeding them at once. Complete header lists, DATA bytes (as they
 * arrive, never buffered) and stream ends reach the caller through callbacks.
 *
 * Memory is fixed: everything a connection needs is inside struct h2_conn (sizeof: 94,848
 * bytes on x86-64: the HPACK decoder 37 KiB, the header-block buffer 16 KiB, the output buffer
 * 32 KiB, the stream table 7 KiB), plus one struct h2_scratch (34 KiB) that all connections
 * driven by one thread may share, because decoded header lists live only for the duration of
 * a callback. Nothing is allocated. The engine never grows: control frames it owes the peer (SETTINGS and PING
 * acknowledgements, WINDOW_UPDATEs, RST_STREAMs, GOAWAY) are kept as counters and flags and
 * written when the output buffer has room, so feeding never needs output space.
 *
 * What it enforces: the connection preface; SETTINGS sent first and the peer's acknowledged;
 * PING answered; GOAWAY sent before closing and honoured when received; flow control on both
 * levels, with WINDOW_UPDATEs sent as DATA is delivered (the caller consumes DATA in the
 * callback); the peer's INITIAL_WINDOW_SIZE and MAX_FRAME_SIZE when sending; padding and
 * priority parsed and ignored; unknown frame types and settings ignored. Abuse is bounded:
 * a header block over H2_HEADER_BLOCK_BYTES or more than H2_MAX_CONTINUATIONS frames ends the
 * connection with ENHANCE_YOUR_CALM; a header list over H2_HEADER_LIST_BYTES reaches the caller
 * flagged H2_TOO_LARGE (the HPACK state stays in sync); streams over our
 * MAX_CONCURRENT_STREAMS are refused (REFUSED_STREAM); frames over H2_FRAME_MAX end it with
 * FRAME_SIZE_ERROR; peer resets faster than H2_RESET_RATE a second beyond a burst of
 * H2_RESET_BUDGET (streams that end normally refill it too) end it with ENHANCE_YOUR_CALM
 * (the "rapid reset" attack), so a client that cancels many calls over time is never cut.
 *
 * Received header lists are checked as RFC 9113 §8.2-8.3 ask (field names and values, the
 * pseudo-fields, content-length against the DATA that follows); a malformed one is a stream
 * error PROTOCOL_ERROR. Stream ids are checked as §5.1 asks: HEADERS on a closed stream, or on
 * a lower id than one the peer already used, is a connection error PROTOCOL_ERROR, DATA on a
 * closed stream a stream error STREAM_CLOSED; frames on a stream we reset recently (the last
 * H2_RESET_MEMORY of them) are ignored, since the peer may have sent them before our reset. */
#ifndef AGENTIC_H2_H
#define AGENTIC_H2_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "h2/hpack.h"

/* The engine's limits (H2_MAX_STREAMS ... H2_PENDING_RESETS) are in base/limits.h. */

/* RFC 9113 §7 error codes */
enum h2_error {
	H2_NO_ERROR = 0x0,
	H2_PROTOCOL_ERROR = 0x1,
	H2_INTERNAL_ERROR = 0x2,
	H2_FLOW_CONTROL_ERROR = 0x3,
	H2_SETTINGS_TIMEOUT = 0x4,
	H2_STREAM_CLOSED = 0x5,
	H2_FRAME_SIZE_ERROR = 0x6,
	H2_REFUSED_STREAM = 0x7,
	H2_CANCEL = 0x8,
	H2_COMPRESSION_ERROR = 0x9,
	H2_CONNECT_ERROR = 0xa,
	H2_ENHANCE_YOUR_CALM = 0xb,
	H2_INADEQUATE_SECURITY = 0xc,
	H2_HTTP_1_1_REQUIRED = 0xd,
};

/* Return codes beyond base.h's, in ERR_RANGE_H2; err_str() gives their text. */
#define H2_ERR_CONN (ERR_RANGE_H2 - 1)    /* connection error: GOAWAY queued, close after output */
#define H2_ERR_PREFACE (ERR_RANGE_H2 - 2) /* server: the peer did not open with the h2 preface */

enum h2_role { H2_SERVER, H2_CLIENT };

/* Flags of the callbacks */
#define H2_END_STREAM 0x1  /* the peer will send nothing more on this stream */
#define H2_TRAILERS 0x2    /* not the stream's first header list */
#define H2_TOO_LARGE 0x4   /* the list was cut at H2_HEADER_LIST_BYTES / H2_MAX_FIELDS */
#define H2_REMOTE 0x8      /* on_close: the peer reset the stream (or its GOAWAY refused it) */

struct h2_field {
	const char *name;
	const char *value;
	uint32_t name_len;
	uint32_t value_len;
};

/* A live stream. Only id and user are the caller's to read (user is the caller's to set);
 * the rest is the engine's. */
struct h2_stream {
	uint32_t id;        /* 0: slot free */
	void *user;
	int64_t send_window;
	uint32_t recv_window;
	uint32_t recv_credit;  /* delivered bytes not yet returned by WINDOW_UPDATE */
	uint32_t rst_code;
	int64_t content_left;  /* DATA bytes the peer's content-length still announces; -1: none */
	uint8_t local_closed, remote_closed, got_headers, rst_pending, dead;
};

struct h2_conn;

/* The callbacks may call any h2_stream_* / h2_conn_* function on any connection, including
 * resets of the stream they are told about. Fields and data live only during the call. */
struct h2_callbacks {
	/* A complete header list: request or response headers, or trailers (H2_TRAILERS). */
	void (*on_headers)(void *ctx, struct h2_conn *c, struct h2_stream *s,
			   const struct h2_field *f, size_t n, unsigned flags);
	/* DATA bytes as they arrive; a final call with n == 0 and H2_END_STREAM at the end (not
	 * made when the stream was closed meanwhile). During a frame that carries END_STREAM the
	 * stream already counts as half-closed by the peer. */
	void (*on_data)(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
			size_t n, unsigned flags);
	/* s leaves the table, exactly once per stream: both sides ended it (H2_NO_ERROR), it was
	 * reset (by us, or by the peer: H2_REMOTE), or the connection failed. s is dead after. */
	void (*on_close)(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
			 unsigned flags);
};

/* Per-thread scratch shared by connections: the decoded header list of the callback running
 * now, and the encoder's output. */
struct h2_scratch {
	struct h2_field fields[H2_MAX_FIELDS];
	uint8_t list[H2_HEADER_LIST_BYTES];
	uint8_t enc[H2_HEADER_BLOCK_BYTES];
};

struct h2_conn {
	const struct h2_callbacks *cb;
	void *ctx;
	struct h2_scratch *scratch;
	uint8_t role;
	uint8_t rx;            /* parser state */
	uint8_t head_len;      /* bytes of the 9-byte frame header gathered */
	uint8_t fld_len;       /* bytes of a fixed field gathered */
	uint8_t head[9];
	uint8_t fld[8];
	uint8_t f_type, f_flags, f_pad, f_ignore;
	uint32_t f_len, f_sid, f_left;
	uint32_t preface_got;
	/* header block being gathered, and the list being decoded from it */
	uint32_t hb_sid, hb_len, hb_frames;
	uint8_t hb_active, hb_end_stream, list_cut;
	uint32_t list_len, nfields;
	/* the peer's settings */
	uint32_t peer_max_frame, peer_initial_window, peer_max_streams;
	uint8_t got_settings;
	/* flow control, connection level */
	int64_t send_window;
	uint32_t recv_window, recv_credit;
	/* streams */
	uint32_t last_peer_sid, next_local_sid, max_streams, nstreams;
	uint32_t reset_budget;
	int64_t now_ms, reset_refill_ms;  /* the caller's clock (h2_conn_clock); the budget's */
	uint32_t reset_ids[H2_RESET_MEMORY], reset_next;  /* a ring of the streams we reset */
	/* owed control frames */
	uint32_t settings_acks;
	uint8_t ping_ack_pending, goaway_pending, goaway_sent, goaway_received, dead;
	uint8_t ping_data[8];
	uint32_t goaway_code;
	struct { uint32_t sid, code; } resets[H2_PENDING_RESETS];
	uint32_t nresets;
	uint8_t stream_owed;   /* some stream owes a RST_STREAM or a WINDOW_UPDATE */
	struct h2_stream streams[H2_MAX_STREAMS];
	/* the large parts last: h2_conn_init zeroes everything before them */
	struct buf out;
	uint8_t hb[H2_HEADER_BLOCK_BYTES];
	struct hpack_dec hpack;
	uint8_t out_storage[H2_OUT_BYTES];
};

/* Sets c up for role; max_streams (1..H2_MAX_STREAMS) is the MAX_CONCURRENT_STREAMS we
 * advertise and enforce. Queues the first bytes: a client's preface, then our SETTINGS and
 * the connection WINDOW_UPDATE. cb, ctx and scratch must outlive c. */
void h2_conn_init(struct h2_conn *c, enum h2_role role, uint32_t max_streams,
		  const struct h2_callbacks *cb, void *ctx, struct h2_scratch *scratch);

/* Tells the engine the time (monotonic ms), for the reset budget's refill; call it before
 * feeding. Without it the budget refills only from streams that end normally. */
void h2_conn_clock(struct h2_conn *c, int64_t now_ms);

/* Consumes all len bytes, calling the callbacks. Returns 0; H2_ERR_CONN after a connection
 * error (GOAWAY with its code queued, every stream closed; later calls return it again);
 * H2_ERR_PREFACE when a server's peer does not open with the preface (nothing queued: the
 * caller may treat the bytes as another protocol). */
int h2_conn_feed(struct h2_conn *c, const uint8_t *data, size_t len);

/* The bytes to write. After writing n of them, call h2_conn_sent(c, n), which also writes
 * owed control frames into the freed room. */
struct buf *h2_conn_out(struct h2_conn *c);
void h2_conn_sent(struct h2_conn *c, size_t n);

/* 1 when the connection has ended: after a connection error, or once a GOAWAY was sent or
 * received and no stream is left. The caller writes out what remains, then closes. */
int h2_conn_finished(const struct h2_conn *c);

/* Sends GOAWAY(code) naming the last peer stream we took; no new peer stream is taken after.
 * A code other than H2_NO_ERROR is a connection error: every stream is closed at once. */
void h2_conn_goaway(struct h2_conn *c, uint32_t code);

/* Client: opens a stream with a header list (HEADERS + CONTINUATION as the peer's frame size
 * needs). -EAGAIN: no output room now; ERR_LIMIT: the peer's MAX_CONCURRENT_STREAMS or our
 * table is full, or the list does not encode into H2_HEADER_BLOCK_BYTES; ERR_STATE: the
 * connection is going away. */
int h2_stream_open(struct h2_conn *c, const struct h2_field *f, size_t n, int end_stream,
		   void *user, struct h2_stream **out);

/* Sends a header list on s (response headers, or trailers with end_stream). -EAGAIN when the
 * output buffer lacks room now (nothing written); ERR_LIMIT when it can never fit;
 * ERR_PARSE when a field is not one RFC 9113 §8.2.1 allows (nothing written); ERR_STATE when s
 * has already ended its side. */
int h2_stream_send_headers(struct h2_conn *c, struct h2_stream *s, const struct h2_field *f,
			   size_t n, int end_stream);

/* Sends up to len bytes as DATA, as far as both send windows, the peer's MAX_FRAME_SIZE and
 * the output room allow. Returns the bytes taken (0 when blocked: retry after the peer's
 * WINDOW_UPDATE or after output drains) or ERR_STATE. end_stream is sent with the last byte,
 * only when all len bytes are taken (len 0 with end_stream sends an empty END_STREAM frame). */
long h2_stream_send_data(struct h2_conn *c, struct h2_stream *s, const uint8_t *p, size_t len,
			 int end_stream);

/* Resets s with code: on_close(code) runs now, the RST_STREAM goes out when there is room. */
void h2_stream_reset(struct h2_conn *c, struct h2_stream *s, uint32_t code);

#endif
