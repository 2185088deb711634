/* h2_internal.h: private to src/h2/: the frame types, flags and parser states, and the
 * functions of h2.c (stream table, owed frames, errors) that the receiving side in h2_recv.c
 * calls. h2_recv.c calls h2.c, never the reverse. Not for other modules; include it after
 * "h2/h2.h" (it does not include that itself: h2.c is h2.h's own file). */
#ifndef AGENTIC_H2_INTERNAL_H
#define AGENTIC_H2_INTERNAL_H

enum {
	F_DATA = 0x0,
	F_HEADERS = 0x1,
	F_PRIORITY = 0x2,
	F_RST_STREAM = 0x3,
	F_SETTINGS = 0x4,
	F_PUSH_PROMISE = 0x5,
	F_PING = 0x6,
	F_GOAWAY = 0x7,
	F_WINDOW_UPDATE = 0x8,
	F_CONTINUATION = 0x9,
};

#define FL_END_STREAM 0x1
#define FL_ACK 0x1
#define FL_END_HEADERS 0x4
#define FL_PADDED 0x8
#define FL_PRIORITY 0x20

enum { S_HEADER_TABLE_SIZE = 1, S_ENABLE_PUSH, S_MAX_CONCURRENT_STREAMS, S_INITIAL_WINDOW_SIZE,
       S_MAX_FRAME_SIZE, S_MAX_HEADER_LIST_SIZE };

enum { RX_PREFACE, RX_HEAD, RX_PADLEN, RX_PRIO, RX_BODY, RX_PAD, RX_DEAD };

#define WINDOW_MAX 0x7fffffffu
#define DEFAULT_WINDOW 65535u


static inline int is_peer_sid(const struct h2_conn *c, uint32_t sid)
{
	return (sid & 1) == (c->role == H2_SERVER);
}

/* A peer stream above those we took after our GOAWAY: we ignored its HEADERS, so frames on it
 * are ignored too (RFC 9113 §6.8), not taken as frames on an idle stream. */
static inline int after_goaway(const struct h2_conn *c, uint32_t sid)
{
	return c->goaway_sent && is_peer_sid(c, sid) && sid > c->last_peer_sid;
}

/* A stream neither side has opened yet (§5.1 "idle"). */
static inline int is_idle(const struct h2_conn *c, uint32_t sid)
{
	if (after_goaway(c, sid))
		return 0;
	return is_peer_sid(c, sid) ? sid > c->last_peer_sid : sid >= c->next_local_sid;
}

extern const uint8_t h2_client_preface[24];

struct h2_stream *h2_stream_find(struct h2_conn *c, uint32_t sid);
/* A free slot taken for sid, or NULL when the table is full. */
struct h2_stream *h2_stream_new(struct h2_conn *c, uint32_t sid);
/* Takes s out of the caller's view (once), then frees its slot unless a RST is owed. */
void h2_stream_close(struct h2_conn *c, struct h2_stream *s, uint32_t code, unsigned flags);
/* Closes s once both sides have ended it. */
void h2_stream_maybe_done(struct h2_conn *c, struct h2_stream *s);
/* 1 when we reset sid lately (frames on it are ignored, not an error). */
int h2_reset_recent(const struct h2_conn *c, uint32_t sid);
/* Refills the reset budget by the clock. */
void h2_reset_refill(struct h2_conn *c);
/* Writes the owed control frames that fit in the output buffer. */
void h2_flush_owed(struct h2_conn *c);
/* Ends the connection with code; returns H2_ERR_CONN. */
int h2_conn_error(struct h2_conn *c, uint32_t code);
/* Resets stream s (or, when NULL, the stream sid) with code; the connection goes on. */
void h2_stream_error(struct h2_conn *c, struct h2_stream *s, uint32_t sid, uint32_t code);
/* A field RFC 9113 §8.2.1 allows. */
int h2_field_ok(const struct h2_field *f);

#endif
