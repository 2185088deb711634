/* h2.c: the HTTP/2 framing engine's core: the stream table, owed control frames, errors,
 * set-up and the sending side (h2_recv.c parses what the peer sends). */
#include <errno.h>
#include <string.h>

#include "base/be.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"

const uint8_t h2_client_preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t out_room(const struct h2_conn *c)
{
	return c->out.cap - c->out.len;
}

/* Appends a frame header; the caller has checked the room. */
static void put_head(struct h2_conn *c, uint32_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
	uint8_t *p = c->out.data + c->out.len;

	ASSERT(out_room(c) >= 9);
	be24_put(p, len);
	p[3] = type;
	p[4] = flags;
	be32_put(p + 5, sid & WINDOW_MAX);
	c->out.len += 9;
}

static void put_bytes(struct h2_conn *c, const void *p, size_t n)
{
	ASSERT(n <= out_room(c));
	memcpy(c->out.data + c->out.len, p, n);
	c->out.len += n;
}

static void put_u32_frame(struct h2_conn *c, uint8_t type, uint32_t sid, uint32_t v)
{
	uint8_t b[4];

	put_head(c, 4, type, 0, sid);
	be32_put(b, v);
	put_bytes(c, b, 4);
}

/* ---- the stream table ---- */

struct h2_stream *h2_stream_find(struct h2_conn *c, uint32_t sid)
{
	if (sid == 0)
		return NULL;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++)
		if (c->streams[i].id == sid)
			return &c->streams[i];
	return NULL;
}

struct h2_stream *h2_stream_new(struct h2_conn *c, uint32_t sid)
{
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
		struct h2_stream *s = &c->streams[i];

		if (s->id)
			continue;
		memset(s, 0, sizeof(*s));
		s->id = sid;
		s->send_window = c->peer_initial_window;
		s->recv_window = H2_STREAM_WINDOW;
		s->content_left = -1;
		c->nstreams++;
		return s;
	}
	return NULL;
}

static void stream_free(struct h2_conn *c, struct h2_stream *s)
{
	ASSERT(c->nstreams > 0);
	s->id = 0;
	c->nstreams--;
}

/* Takes s out of the caller's view (once), then frees its slot unless a RST is owed. */
void h2_stream_close(struct h2_conn *c, struct h2_stream *s, uint32_t code, unsigned flags)
{
	if (!s->dead) {
		s->dead = 1;
		if (code == H2_NO_ERROR && c->reset_budget < H2_RESET_BUDGET)
			c->reset_budget++;
		c->cb->on_close(c->ctx, c, s, code, flags);
	}
	if (!s->rst_pending)
		stream_free(c, s);
}

void h2_stream_maybe_done(struct h2_conn *c, struct h2_stream *s)
{
	if (s->id && !s->dead && s->local_closed && s->remote_closed)
		h2_stream_close(c, s, H2_NO_ERROR, 0);
}

/* Streams we reset: the peer may have sent frames on them before it saw our RST_STREAM, which
 * §5.1 says to ignore; frames on other closed streams are the peer's error. */
static void reset_remember(struct h2_conn *c, uint32_t sid)
{
	c->reset_ids[c->reset_next++ % H2_RESET_MEMORY] = sid;
}

int h2_reset_recent(const struct h2_conn *c, uint32_t sid)
{
	for (uint32_t i = 0; i < H2_RESET_MEMORY; i++)
		if (c->reset_ids[i] == sid)
			return 1;
	return 0;
}

/* The reset budget refills by H2_RESET_RATE a second up to H2_RESET_BUDGET, by the clock the
 * caller gives: cancels spread over time never run it out, a flood does. */
void h2_reset_refill(struct h2_conn *c)
{
	const int64_t step = 1000 / H2_RESET_RATE;
	int64_t n = (c->now_ms - c->reset_refill_ms) / step;

	if (n <= 0)
		return;
	if (n >= H2_RESET_BUDGET - c->reset_budget) {
		c->reset_budget = H2_RESET_BUDGET;
		c->reset_refill_ms = c->now_ms;
	} else {
		c->reset_budget += (uint32_t)n;
		c->reset_refill_ms += n * step;
	}
}

/* ---- owed control frames ---- */

void h2_flush_owed(struct h2_conn *c)
{
	while (c->settings_acks && out_room(c) >= 9) {
		put_head(c, 0, F_SETTINGS, FL_ACK, 0);
		c->settings_acks--;
	}
	if (c->ping_ack_pending && out_room(c) >= 17) {
		put_head(c, 8, F_PING, FL_ACK, 0);
		put_bytes(c, c->ping_data, 8);
		c->ping_ack_pending = 0;
	}
	if (c->nresets && out_room(c) >= 13 * c->nresets) {
		for (uint32_t i = 0; i < c->nresets; i++)
			put_u32_frame(c, F_RST_STREAM, c->resets[i].sid, c->resets[i].code);
		c->nresets = 0;
	}
	if (c->stream_owed) {
		c->stream_owed = 0;
		for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
			struct h2_stream *s = &c->streams[i];
			int owes;

			if (!s->id)
				continue;
			owes = s->rst_pending || (!s->remote_closed &&
						  s->recv_credit >= H2_STREAM_WINDOW / 2);
			if (owes && out_room(c) < 13) {
				c->stream_owed = 1;
			} else if (s->rst_pending) {
				put_u32_frame(c, F_RST_STREAM, s->id, s->rst_code);
				s->rst_pending = 0;
				stream_free(c, s);
			} else if (owes) {
				put_u32_frame(c, F_WINDOW_UPDATE, s->id, s->recv_credit);
				s->recv_window += s->recv_credit;
				s->recv_credit = 0;
			}
		}
	}
	if (c->recv_credit >= H2_CONN_WINDOW / 2 && out_room(c) >= 13) {
		put_u32_frame(c, F_WINDOW_UPDATE, 0, c->recv_credit);
		c->recv_window += c->recv_credit;
		c->recv_credit = 0;
	}
	if (c->goaway_pending && out_room(c) >= 17) {
		uint8_t b[8];

		put_head(c, 8, F_GOAWAY, 0, 0);
		be32_put(b, c->last_peer_sid);
		be32_put(b + 4, c->goaway_code);
		put_bytes(c, b, 8);
		c->goaway_pending = 0;
	}
}

/* Ends the connection with code: every stream closes, the GOAWAY is owed, input stops. */
int h2_conn_error(struct h2_conn *c, uint32_t code)
{
	if (c->dead)
		return H2_ERR_CONN;
	c->dead = 1;
	c->rx = RX_DEAD;
	c->goaway_code = code;
	c->goaway_pending = 1;
	c->goaway_sent = 1;
	c->nresets = 0;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
		struct h2_stream *s = &c->streams[i];

		if (!s->id)
			continue;
		s->rst_pending = 0;
		h2_stream_close(c, s, code, 0);
	}
	h2_flush_owed(c);
	return H2_ERR_CONN;
}

/* A stream error: the stream is reset with code; the connection goes on. */
void h2_stream_error(struct h2_conn *c, struct h2_stream *s, uint32_t sid, uint32_t code)
{
	if (s) {
		h2_stream_reset(c, s, code);
		return;
	}
	if (c->nresets == H2_PENDING_RESETS) {
		h2_conn_error(c, H2_ENHANCE_YOUR_CALM);
		return;
	}
	reset_remember(c, sid);
	c->resets[c->nresets].sid = sid;
	c->resets[c->nresets].code = code;
	c->nresets++;
}

/* ---- set-up ---- */

static void put_setting(struct h2_conn *c, uint16_t id, uint32_t v)
{
	uint8_t b[6];

	be16_put(b, id);
	be32_put(b + 2, v);
	put_bytes(c, b, 6);
}

void h2_conn_init(struct h2_conn *c, enum h2_role role, uint32_t max_streams,
		  const struct h2_callbacks *cb, void *ctx, struct h2_scratch *scratch)
{
	int client = role == H2_CLIENT;

	memset(c, 0, offsetof(struct h2_conn, out));
	c->cb = cb;
	c->ctx = ctx;
	c->scratch = scratch;
	c->role = (uint8_t)role;
	c->rx = client ? RX_HEAD : RX_PREFACE;
	hpack_dec_init(&c->hpack, HPACK_TABLE_BYTES);
	c->peer_max_frame = H2_FRAME_MAX;
	c->peer_initial_window = DEFAULT_WINDOW;
	c->peer_max_streams = UINT32_MAX;
	c->send_window = DEFAULT_WINDOW;
	c->recv_window = H2_CONN_WINDOW;
	c->next_local_sid = client ? 1 : 2;
	c->max_streams = max_streams < 1 ? 1 : max_streams > H2_MAX_STREAMS ? H2_MAX_STREAMS
									  : max_streams;
	c->reset_budget = H2_RESET_BUDGET;
	buf_init(&c->out, c->out_storage, sizeof(c->out_storage));
	if (client)
		put_bytes(c, h2_client_preface, sizeof(h2_client_preface));
	put_head(c, client ? 4 * 6 : 3 * 6, F_SETTINGS, 0, 0);
	if (client)
		put_setting(c, S_ENABLE_PUSH, 0);
	put_setting(c, S_MAX_CONCURRENT_STREAMS, c->max_streams);
	put_setting(c, S_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW);
	put_setting(c, S_MAX_HEADER_LIST_SIZE, H2_HEADER_LIST_BYTES);
	put_u32_frame(c, F_WINDOW_UPDATE, 0, H2_CONN_WINDOW - DEFAULT_WINDOW);
}

struct buf *h2_conn_out(struct h2_conn *c)
{
	return &c->out;
}

void h2_conn_sent(struct h2_conn *c, size_t n)
{
	buf_consume(&c->out, n);
	h2_flush_owed(c);
}

int h2_conn_finished(const struct h2_conn *c)
{
	if (c->dead)
		return 1;
	return (c->goaway_sent || c->goaway_received) && c->nstreams == 0 && !c->goaway_pending;
}

void h2_conn_goaway(struct h2_conn *c, uint32_t code)
{
	if (code != H2_NO_ERROR) {
		h2_conn_error(c, code);
		return;
	}
	if (c->goaway_sent)
		return;
	c->goaway_sent = 1;
	c->goaway_pending = 1;
	h2_flush_owed(c);
}

/* RFC 9113 §8.2.1: a name of visible lowercase ASCII with a colon only as a pseudo-field's
 * first octet; a value without NUL, CR or LF and without whitespace at either end. */
int h2_field_ok(const struct h2_field *f)
{
	const unsigned char *p = (const unsigned char *)f->name;
	uint32_t n = f->name_len;

	if (n == 0)
		return 0;
	for (uint32_t k = 0; k < n; k++)
		if (p[k] <= 0x20 || (p[k] >= 'A' && p[k] <= 'Z') || p[k] >= 0x7f ||
		    (p[k] == ':' && k > 0))
			return 0;
	p = (const unsigned char *)f->value;
	n = f->value_len;
	if (n && (p[0] == ' ' || p[0] == '\t' || p[n - 1] == ' ' || p[n - 1] == '\t'))
		return 0;
	for (uint32_t k = 0; k < n; k++)
		if (p[k] == 0 || p[k] == '\r' || p[k] == '\n')
			return 0;
	return 1;
}

/* ---- sending ---- */

static size_t send_frame_max(const struct h2_conn *c)
{
	size_t m = c->peer_max_frame;

	return m < H2_OUT_BYTES / 2 ? m : H2_OUT_BYTES / 2;
}

/* Encodes f into the scratch encoder buffer and writes HEADERS + CONTINUATIONs. */
static int send_block(struct h2_conn *c, uint32_t sid, const struct h2_field *f, size_t n,
		      int end_stream)
{
	struct buf enc;
	size_t frame = send_frame_max(c), frames, off = 0;

	buf_init(&enc, c->scratch->enc, sizeof(c->scratch->enc));
	for (size_t i = 0; i < n; i++)
		if (!h2_field_ok(&f[i]))
			return ERR_PARSE;
	for (size_t i = 0; i < n; i++)
		if (hpack_encode(&enc, f[i].name, f[i].name_len, f[i].value, f[i].value_len) < 0)
			return ERR_LIMIT;
	frames = enc.len ? (enc.len + frame - 1) / frame : 1;
	if (enc.len + 9 * frames + H2_OUT_RESERVE > out_room(c))
		return enc.len + 9 * frames + H2_OUT_RESERVE > c->out.cap ? ERR_LIMIT : -EAGAIN;
	for (size_t k = 0; k < frames; k++) {
		size_t chunk = enc.len - off < frame ? enc.len - off : frame;
		uint8_t flags = k + 1 == frames ? FL_END_HEADERS : 0;

		if (k == 0 && end_stream)
			flags |= FL_END_STREAM;
		put_head(c, (uint32_t)chunk, k == 0 ? F_HEADERS : F_CONTINUATION, flags, sid);
		put_bytes(c, enc.data + off, chunk);
		off += chunk;
	}
	return 0;
}

int h2_stream_open(struct h2_conn *c, const struct h2_field *f, size_t n, int end_stream,
		   void *user, struct h2_stream **out)
{
	uint32_t local = 0;
	struct h2_stream *s;
	int r;

	if (c->dead || c->goaway_sent || c->goaway_received || c->next_local_sid > WINDOW_MAX)
		return ERR_STATE;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++)
		if (c->streams[i].id && !is_peer_sid(c, c->streams[i].id))
			local++;
	if (local >= c->peer_max_streams || c->nstreams >= H2_MAX_STREAMS)
		return ERR_LIMIT;
	r = send_block(c, c->next_local_sid, f, n, end_stream);
	if (r < 0)
		return r;
	s = h2_stream_new(c, c->next_local_sid);
	c->next_local_sid += 2;
	s->user = user;
	s->local_closed = (uint8_t)(end_stream != 0);
	*out = s;
	return 0;
}

int h2_stream_send_headers(struct h2_conn *c, struct h2_stream *s, const struct h2_field *f,
			   size_t n, int end_stream)
{
	int r;

	if (c->dead || s->dead || s->local_closed)
		return ERR_STATE;
	r = send_block(c, s->id, f, n, end_stream);
	if (r < 0)
		return r;
	if (end_stream) {
		s->local_closed = 1;
		h2_stream_maybe_done(c, s);
	}
	return 0;
}

long h2_stream_send_data(struct h2_conn *c, struct h2_stream *s, const uint8_t *p, size_t len,
			 int end_stream)
{
	size_t taken = 0, frame = send_frame_max(c);

	if (c->dead || s->dead || s->local_closed)
		return ERR_STATE;
	while (taken < len) {
		int64_t w = s->send_window < c->send_window ? s->send_window : c->send_window;
		size_t room = out_room(c), chunk = len - taken;

		if (w <= 0 || room < H2_OUT_RESERVE + 9 + 1)
			break;
		room -= H2_OUT_RESERVE + 9;
		if (chunk > room)
			chunk = room;
		if (chunk > frame)
			chunk = frame;
		if ((uint64_t)chunk > (uint64_t)w)
			chunk = (size_t)w;
		put_head(c, (uint32_t)chunk,
			 F_DATA, end_stream && taken + chunk == len ? FL_END_STREAM : 0, s->id);
		put_bytes(c, p + taken, chunk);
		taken += chunk;
		s->send_window -= (int64_t)chunk;
		c->send_window -= (int64_t)chunk;
	}
	if (len == 0 && end_stream) {
		if (out_room(c) < 9 + H2_OUT_RESERVE)
			return 0;
		put_head(c, 0, F_DATA, FL_END_STREAM, s->id);
	}
	if (end_stream && taken == len) {
		s->local_closed = 1;
		h2_stream_maybe_done(c, s);
	}
	return (long)taken;
}

void h2_stream_reset(struct h2_conn *c, struct h2_stream *s, uint32_t code)
{
	if (!s->id || s->dead)
		return;
	reset_remember(c, s->id);
	s->rst_pending = 1;
	s->rst_code = code;
	c->stream_owed = 1;
	h2_stream_close(c, s, code, 0);
	h2_flush_owed(c);
}
