/* h2.c: the HTTP/2 framing engine: frame parser, stream table, flow control, owed frames. */
#include <errno.h>
#include <string.h>

#include "base/be.h"
#include "h2.h"

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

static const uint8_t preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t out_room(const struct h2_conn *c)
{
	return c->out.cap - c->out.len;
}

/* Appends a frame header; the caller has checked the room. */
static void put_head(struct h2_conn *c, uint32_t len, uint8_t type, uint8_t flags, uint32_t sid)
{
	uint8_t *p = c->out.data + c->out.len;

	be24_put(p, len);
	p[3] = type;
	p[4] = flags;
	be32_put(p + 5, sid & WINDOW_MAX);
	c->out.len += 9;
}

static void put_bytes(struct h2_conn *c, const void *p, size_t n)
{
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

static struct h2_stream *stream_find(struct h2_conn *c, uint32_t sid)
{
	if (sid == 0)
		return NULL;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++)
		if (c->streams[i].id == sid)
			return &c->streams[i];
	return NULL;
}

static struct h2_stream *stream_new(struct h2_conn *c, uint32_t sid)
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
	s->id = 0;
	c->nstreams--;
}

/* Takes s out of the caller's view (once), then frees its slot unless a RST is owed. */
static void stream_close(struct h2_conn *c, struct h2_stream *s, uint32_t code, unsigned flags)
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

static void stream_maybe_done(struct h2_conn *c, struct h2_stream *s)
{
	if (s->id && !s->dead && s->local_closed && s->remote_closed)
		stream_close(c, s, H2_NO_ERROR, 0);
}

static int is_peer_sid(const struct h2_conn *c, uint32_t sid)
{
	return (sid & 1) == (c->role == H2_SERVER);
}

/* A peer stream above those we took after our GOAWAY: we ignored its HEADERS, so frames on it
 * are ignored too (RFC 9113 §6.8), not taken as frames on an idle stream. */
static int after_goaway(const struct h2_conn *c, uint32_t sid)
{
	return c->goaway_sent && is_peer_sid(c, sid) && sid > c->last_peer_sid;
}

/* A stream neither side has opened yet (§5.1 "idle"). */
static int is_idle(const struct h2_conn *c, uint32_t sid)
{
	if (after_goaway(c, sid))
		return 0;
	return is_peer_sid(c, sid) ? sid > c->last_peer_sid : sid >= c->next_local_sid;
}

/* Streams we reset: the peer may have sent frames on them before it saw our RST_STREAM, which
 * §5.1 says to ignore; frames on other closed streams are the peer's error. */
static void reset_remember(struct h2_conn *c, uint32_t sid)
{
	c->reset_ids[c->reset_next++ % H2_RESET_MEMORY] = sid;
}

static int reset_recent(const struct h2_conn *c, uint32_t sid)
{
	for (uint32_t i = 0; i < H2_RESET_MEMORY; i++)
		if (c->reset_ids[i] == sid)
			return 1;
	return 0;
}

/* The reset budget refills by H2_RESET_RATE a second up to H2_RESET_BUDGET, by the clock the
 * caller gives: cancels spread over time never run it out, a flood does. */
static void reset_refill(struct h2_conn *c)
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

static void flush_owed(struct h2_conn *c)
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
static int conn_error(struct h2_conn *c, uint32_t code)
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
		stream_close(c, s, code, 0);
	}
	flush_owed(c);
	return H2_ERR_CONN;
}

/* A stream error: the stream is reset with code; the connection goes on. */
static void stream_error(struct h2_conn *c, struct h2_stream *s, uint32_t sid, uint32_t code)
{
	if (s) {
		h2_stream_reset(c, s, code);
		return;
	}
	if (c->nresets == H2_PENDING_RESETS) {
		conn_error(c, H2_ENHANCE_YOUR_CALM);
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
		put_bytes(c, preface, sizeof(preface));
	put_head(c, client ? 4 * 6 : 3 * 6, F_SETTINGS, 0, 0);
	if (client)
		put_setting(c, S_ENABLE_PUSH, 0);
	put_setting(c, S_MAX_CONCURRENT_STREAMS, c->max_streams);
	put_setting(c, S_INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW);
	put_setting(c, S_MAX_HEADER_LIST_SIZE, H2_HEADER_LIST_BYTES);
	put_u32_frame(c, F_WINDOW_UPDATE, 0, H2_CONN_WINDOW - DEFAULT_WINDOW);
}

/* ---- received header lists ---- */

static int collect_field(void *ctx, const char *name, size_t name_len, const char *value,
			 size_t value_len)
{
	struct h2_conn *c = ctx;
	struct h2_scratch *sc = c->scratch;
	size_t need = name_len + value_len + 2;
	struct h2_field *f;
	char *p;

	/* Past the limit the rest is dropped, not refused: decoding must go on to keep the
	 * HPACK table in sync with the peer's. */
	if (c->nfields >= H2_MAX_FIELDS || need > sizeof(sc->list) - c->list_len) {
		c->list_cut = 1;
		return 0;
	}
	f = &sc->fields[c->nfields++];
	p = (char *)sc->list + c->list_len;
	memcpy(p, name, name_len);
	p[name_len] = '\0';
	memcpy(p + name_len + 1, value, value_len);
	p[name_len + 1 + value_len] = '\0';
	f->name = p;
	f->name_len = (uint32_t)name_len;
	f->value = p + name_len + 1;
	f->value_len = (uint32_t)value_len;
	c->list_len += (uint32_t)need;
	return 0;
}

static int field_is(const struct h2_field *f, const char *name)
{
	return f->name_len == strlen(name) && memcmp(f->name, name, f->name_len) == 0;
}

/* RFC 9113 §8.2.1: a name of visible lowercase ASCII with a colon only as a pseudo-field's
 * first octet; a value without NUL, CR or LF and without whitespace at either end. */
static int field_ok(const struct h2_field *f)
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

/* A content-length value (§8.1.1): decimal digits, at most 18 of them; -1 when malformed. */
static int64_t content_length(const struct h2_field *f)
{
	int64_t v = 0;

	if (f->value_len == 0 || f->value_len > 18)
		return -1;
	for (uint32_t k = 0; k < f->value_len; k++) {
		if (f->value[k] < '0' || f->value[k] > '9')
			return -1;
		v = v * 10 + (f->value[k] - '0');
	}
	return v;
}

/* RFC 9113 §8.2-8.3: well-formed fields, pseudo-fields first and only the defined ones, no
 * connection-specific fields, at most one well-formed content-length; requests carry
 * :method, :scheme and a non-empty :path once, responses :status. Returns 1 when the list is
 * well-formed. */
static int list_valid(const struct h2_conn *c, const struct h2_field *f, size_t n, int trailers)
{
	unsigned seen = 0, bit;
	int regular = 0, length = 0;

	for (size_t i = 0; i < n; i++) {
		if (!field_ok(&f[i]))
			return 0;
		if (f[i].name[0] != ':') {
			regular = 1;
			if (field_is(&f[i], "content-length") &&
			    (length++ || content_length(&f[i]) < 0))
				return 0;
			if (field_is(&f[i], "connection") || field_is(&f[i], "keep-alive") ||
			    field_is(&f[i], "proxy-connection") ||
			    field_is(&f[i], "transfer-encoding") || field_is(&f[i], "upgrade"))
				return 0;
			if (field_is(&f[i], "te") &&
			    !(f[i].value_len == 8 && memcmp(f[i].value, "trailers", 8) == 0))
				return 0;
			continue;
		}
		if (regular || trailers)
			return 0;
		if (c->role == H2_SERVER) {
			bit = field_is(&f[i], ":method") ? 1 : field_is(&f[i], ":scheme") ? 2
			    : field_is(&f[i], ":path") ? 4 : field_is(&f[i], ":authority") ? 8 : 0;
		} else {
			bit = field_is(&f[i], ":status") ? 16 : 0;
		}
		if (!bit || (seen & bit) || (bit == 4 && f[i].value_len == 0))
			return 0;
		seen |= bit;
	}
	if (trailers)
		return 1;
	return c->role == H2_SERVER ? (seen & 7) == 7 : (seen & 16) != 0;
}

static int header_block_done(struct h2_conn *c)
{
	uint32_t sid = c->hb_sid;
	struct h2_stream *s = stream_find(c, sid);
	unsigned flags = c->hb_end_stream ? H2_END_STREAM : 0;
	int fresh = 0, r;
	size_t nfields;

	c->hb_active = 0;
	if (!s && is_peer_sid(c, sid) && sid > c->last_peer_sid) {
		if (c->role == H2_CLIENT)
			return conn_error(c, H2_PROTOCOL_ERROR); /* a push: we disabled them */
		fresh = 1;
	} else if (!s && !is_peer_sid(c, sid) && sid >= c->next_local_sid) {
		return conn_error(c, H2_PROTOCOL_ERROR); /* an idle stream of ours */
	} else if (!s && !reset_recent(c, sid)) {
		return conn_error(c, H2_PROTOCOL_ERROR); /* §5.1.1: a closed or a skipped stream */
	}
	/* Decode even for streams we will ignore: the HPACK table must stay in sync. */
	c->list_len = 0;
	c->nfields = 0;
	c->list_cut = 0;
	r = hpack_decode(&c->hpack, c->hb, c->hb_len, collect_field, c);
	nfields = c->nfields;
	c->hb_len = 0;
	if (r < 0)
		return conn_error(c, H2_COMPRESSION_ERROR);
	if (c->list_cut)
		flags |= H2_TOO_LARGE;
	if (fresh) {
		if (c->goaway_sent)
			return 0;
		c->last_peer_sid = sid;
		if (c->nstreams >= c->max_streams || !(s = stream_new(c, sid))) {
			stream_error(c, NULL, sid, H2_REFUSED_STREAM);
			return c->dead ? H2_ERR_CONN : 0;
		}
	}
	if (!s || s->dead)
		return 0;
	if (s->remote_closed) {
		stream_error(c, s, sid, H2_STREAM_CLOSED);
		return 0;
	}
	if (s->got_headers)
		flags |= H2_TRAILERS;
	if (!(flags & H2_TOO_LARGE) &&
	    (!list_valid(c, c->scratch->fields, nfields, s->got_headers) ||
	     (s->got_headers && !(flags & H2_END_STREAM)))) {
		stream_error(c, s, sid, H2_PROTOCOL_ERROR);
		return 0;
	}
	if (!s->got_headers && !(flags & H2_TOO_LARGE))
		for (size_t i = 0; i < nfields; i++)
			if (field_is(&c->scratch->fields[i], "content-length"))
				s->content_left = content_length(&c->scratch->fields[i]);
	if ((flags & H2_END_STREAM) && s->content_left > 0) {
		stream_error(c, s, sid, H2_PROTOCOL_ERROR); /* §8.1.1: less DATA than announced */
		return 0;
	}
	s->got_headers = 1;
	if (flags & H2_END_STREAM)
		s->remote_closed = 1;
	c->cb->on_headers(c->ctx, c, s, c->scratch->fields, nfields, flags);
	if (s->id == sid)
		stream_maybe_done(c, s);
	return c->dead ? H2_ERR_CONN : 0;
}

/* ---- frames ---- */

static int apply_setting(struct h2_conn *c, uint16_t id, uint32_t v)
{
	switch (id) {
	case S_ENABLE_PUSH:
		if (v > 1 || (c->role == H2_CLIENT && v == 1))
			return conn_error(c, H2_PROTOCOL_ERROR);
		break;
	case S_MAX_CONCURRENT_STREAMS:
		c->peer_max_streams = v;
		break;
	case S_INITIAL_WINDOW_SIZE: {
		int64_t delta = (int64_t)v - c->peer_initial_window;

		if (v > WINDOW_MAX)
			return conn_error(c, H2_FLOW_CONTROL_ERROR);
		for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
			struct h2_stream *s = &c->streams[i];

			if (!s->id)
				continue;
			s->send_window += delta;
			if (s->send_window > WINDOW_MAX)
				return conn_error(c, H2_FLOW_CONTROL_ERROR);
		}
		c->peer_initial_window = v;
		break;
	}
	case S_MAX_FRAME_SIZE:
		if (v < 16384 || v > 16777215)
			return conn_error(c, H2_PROTOCOL_ERROR);
		c->peer_max_frame = v;
		break;
	default: /* HEADER_TABLE_SIZE: our encoder never indexes; others are advisory or unknown */
		break;
	}
	return 0;
}

static int frame_begin(struct h2_conn *c)
{
	const uint8_t *h = c->head;
	uint32_t len = be24_get(h);
	uint8_t type = h[3], flags = h[4];
	uint32_t sid = be32_get(h + 5) & WINDOW_MAX;
	uint32_t min_len = 0;

	c->f_len = c->f_left = len;
	c->f_type = type;
	c->f_flags = flags;
	c->f_sid = sid;
	c->f_pad = 0;
	c->f_ignore = 0;
	c->fld_len = 0;
	if (len > H2_FRAME_MAX)
		return conn_error(c, H2_FRAME_SIZE_ERROR);
	if (c->hb_active && (type != F_CONTINUATION || sid != c->hb_sid))
		return conn_error(c, H2_PROTOCOL_ERROR);
	if (!c->got_settings && (type != F_SETTINGS || (flags & FL_ACK)))
		return conn_error(c, H2_PROTOCOL_ERROR);
	switch (type) {
	case F_DATA: {
		struct h2_stream *s = stream_find(c, sid);

		if (sid == 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if (!s && is_idle(c, sid))
			return conn_error(c, H2_PROTOCOL_ERROR); /* DATA on an idle stream */
		if (len > c->recv_window)
			return conn_error(c, H2_FLOW_CONTROL_ERROR);
		c->recv_window -= len;
		if (!s || s->dead) {
			c->f_ignore = 1;
			if (!s && !after_goaway(c, sid) && !reset_recent(c, sid))
				stream_error(c, NULL, sid, H2_STREAM_CLOSED);
		} else if (s->remote_closed) {
			c->f_ignore = 1;
			stream_error(c, s, sid, H2_STREAM_CLOSED);
		} else if (len > s->recv_window) {
			c->f_ignore = 1;
			stream_error(c, s, sid, H2_FLOW_CONTROL_ERROR);
		} else {
			s->recv_window -= len;
			/* Half-closed from the frame's start, so a caller answering inside on_data
			 * already knows the peer is done (and need not reset the stream). */
			if (flags & FL_END_STREAM)
				s->remote_closed = 1;
		}
		if (flags & FL_PADDED)
			min_len = 1;
		break;
	}
	case F_HEADERS:
		if (sid == 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		min_len = (flags & FL_PADDED ? 1 : 0) + (flags & FL_PRIORITY ? 5 : 0);
		c->hb_active = 1;
		c->hb_sid = sid;
		c->hb_len = 0;
		c->hb_frames = 1;
		c->hb_end_stream = flags & FL_END_STREAM;
		break;
	case F_CONTINUATION:
		if (!c->hb_active)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if (++c->hb_frames > H2_MAX_CONTINUATIONS + 1)
			return conn_error(c, H2_ENHANCE_YOUR_CALM);
		break;
	case F_PRIORITY:
		if (sid == 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		break;
	case F_RST_STREAM:
		if (sid == 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if (len != 4)
			return conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_SETTINGS:
		if (sid != 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if ((flags & FL_ACK) ? len != 0 : len % 6 != 0)
			return conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_PUSH_PROMISE:
		return conn_error(c, H2_PROTOCOL_ERROR);
	case F_PING:
		if (sid != 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if (len != 8)
			return conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_GOAWAY:
		if (sid != 0)
			return conn_error(c, H2_PROTOCOL_ERROR);
		if (len < 8)
			return conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_WINDOW_UPDATE:
		if (len != 4)
			return conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	default: /* unknown types are ignored */
		break;
	}
	if (len < min_len)
		return conn_error(c, H2_PROTOCOL_ERROR);
	if ((type == F_DATA || type == F_HEADERS) && (flags & FL_PADDED))
		c->rx = RX_PADLEN;
	else if (type == F_HEADERS && (flags & FL_PRIORITY))
		c->rx = RX_PRIO;
	else
		c->rx = RX_BODY;
	return 0;
}

static int frame_end_dispatch(struct h2_conn *c);

/* Owed frames go out after each frame, so the output is the same however input was split. */
static int frame_end(struct h2_conn *c)
{
	int r = frame_end_dispatch(c);

	flush_owed(c);
	return r;
}

static int frame_end_dispatch(struct h2_conn *c)
{
	uint32_t sid = c->f_sid;
	struct h2_stream *s;

	c->rx = RX_HEAD;
	c->head_len = 0;
	switch (c->f_type) {
	case F_DATA:
		c->recv_credit += c->f_len;
		s = stream_find(c, sid);
		if (!s || s->dead || c->f_ignore)
			break;
		s->recv_credit += c->f_len;
		if (s->recv_credit >= H2_STREAM_WINDOW / 2)
			c->stream_owed = 1;
		if (c->f_flags & FL_END_STREAM) {
			if (s->content_left > 0) {
				stream_error(c, s, sid, H2_PROTOCOL_ERROR); /* §8.1.1 */
				break;
			}
			c->cb->on_data(c->ctx, c, s, NULL, 0, H2_END_STREAM);
			if (s->id == sid)
				stream_maybe_done(c, s);
		}
		break;
	case F_HEADERS:
	case F_CONTINUATION:
		if (c->f_flags & FL_END_HEADERS)
			return header_block_done(c);
		break;
	case F_SETTINGS:
		if (c->f_flags & FL_ACK)
			break;
		c->got_settings = 1;
		c->settings_acks++;
		break;
	case F_PING:
		if (c->f_flags & FL_ACK)
			break;
		memcpy(c->ping_data, c->fld, 8);
		c->ping_ack_pending = 1;
		break;
	case F_GOAWAY: {
		uint32_t last = be32_get(c->fld) & WINDOW_MAX;

		c->goaway_received = 1;
		for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
			s = &c->streams[i];
			if (s->id && !s->dead && !is_peer_sid(c, s->id) && s->id > last)
				stream_close(c, s, H2_REFUSED_STREAM, H2_REMOTE);
		}
		break;
	}
	case F_RST_STREAM:
		s = stream_find(c, sid);
		if (!s) {
			if (is_idle(c, sid))
				return conn_error(c, H2_PROTOCOL_ERROR);
			break;
		}
		if (s->dead)
			break;
		reset_refill(c);
		if (c->reset_budget == 0)
			return conn_error(c, H2_ENHANCE_YOUR_CALM);
		c->reset_budget--;
		s->rst_pending = 0;
		stream_close(c, s, be32_get(c->fld), H2_REMOTE);
		break;
	case F_WINDOW_UPDATE: {
		uint32_t inc = be32_get(c->fld) & WINDOW_MAX;

		if (sid == 0) {
			if (inc == 0)
				return conn_error(c, H2_PROTOCOL_ERROR);
			c->send_window += inc;
			if (c->send_window > WINDOW_MAX)
				return conn_error(c, H2_FLOW_CONTROL_ERROR);
			break;
		}
		s = stream_find(c, sid);
		if (!s) {
			if (is_idle(c, sid))
				return conn_error(c, H2_PROTOCOL_ERROR);
			break;
		}
		if (s->dead)
			break;
		if (inc == 0) {
			stream_error(c, s, sid, H2_PROTOCOL_ERROR);
			break;
		}
		s->send_window += inc;
		if (s->send_window > WINDOW_MAX)
			stream_error(c, s, sid, H2_FLOW_CONTROL_ERROR);
		break;
	}
	case F_PRIORITY:
		if (c->f_len != 5) {
			stream_error(c, stream_find(c, sid), sid, H2_FRAME_SIZE_ERROR);
		}
		break;
	default:
		break;
	}
	return c->dead ? H2_ERR_CONN : 0;
}

/* Gathers a fixed field (PING data, GOAWAY's first 8 bytes, WINDOW_UPDATE, RST_STREAM, each
 * SETTINGS entry) and applies SETTINGS entries as they complete. */
static int body_control(struct h2_conn *c, const uint8_t *p, size_t n)
{
	size_t want;

	for (size_t i = 0; i < n; i++) {
		switch (c->f_type) {
		case F_SETTINGS:
			c->fld[c->fld_len++] = p[i];
			if (c->fld_len == 6) {
				c->fld_len = 0;
				if (apply_setting(c, be16_get(c->fld), be32_get(c->fld + 2)) < 0)
					return H2_ERR_CONN;
			}
			break;
		case F_PING:
		case F_GOAWAY:
		case F_WINDOW_UPDATE:
		case F_RST_STREAM:
			want = c->f_type == F_PING || c->f_type == F_GOAWAY ? 8 : 4;
			if (c->fld_len < want)
				c->fld[c->fld_len++] = p[i];
			break;
		default: /* PRIORITY and unknown frames: parsed and ignored */
			break;
		}
	}
	return 0;
}

static int body(struct h2_conn *c, const uint8_t *p, size_t n)
{
	struct h2_stream *s;

	switch (c->f_type) {
	case F_DATA:
		if (c->f_ignore || n == 0)
			return 0;
		s = stream_find(c, c->f_sid);
		if (!s || s->dead) {
			c->f_ignore = 1;
			return 0;
		}
		if (s->content_left >= 0) {
			if ((int64_t)n > s->content_left) {
				c->f_ignore = 1;
				stream_error(c, s, s->id, H2_PROTOCOL_ERROR); /* §8.1.1: more DATA */
				return c->dead ? H2_ERR_CONN : 0;
			}
			s->content_left -= (int64_t)n;
		}
		c->cb->on_data(c->ctx, c, s, p, n, 0);
		return c->dead ? H2_ERR_CONN : 0;
	case F_HEADERS:
	case F_CONTINUATION:
		if (n > H2_HEADER_BLOCK_BYTES - c->hb_len)
			return conn_error(c, H2_ENHANCE_YOUR_CALM);
		memcpy(c->hb + c->hb_len, p, n);
		c->hb_len += (uint32_t)n;
		return 0;
	default:
		return body_control(c, p, n);
	}
}

void h2_conn_clock(struct h2_conn *c, int64_t now_ms)
{
	c->now_ms = now_ms;
}

int h2_conn_feed(struct h2_conn *c, const uint8_t *data, size_t len)
{
	size_t i = 0, n;
	int r = 0;

	while (i < len && r == 0) {
		switch (c->rx) {
		case RX_DEAD:
			return H2_ERR_CONN;
		case RX_PREFACE:
			if (data[i] != preface[c->preface_got])
				return H2_ERR_PREFACE;
			i++;
			if (++c->preface_got == sizeof(preface))
				c->rx = RX_HEAD;
			break;
		case RX_HEAD:
			n = 9 - c->head_len;
			if (n > len - i)
				n = len - i;
			memcpy(c->head + c->head_len, data + i, n);
			c->head_len = (uint8_t)(c->head_len + n);
			i += n;
			if (c->head_len < 9)
				break;
			r = frame_begin(c);
			if (r == 0 && c->f_left == 0)
				r = frame_end(c);
			break;
		case RX_PADLEN:
			c->f_pad = data[i++];
			c->f_left--;
			if (c->f_pad > c->f_left - (c->f_type == F_HEADERS &&
						    (c->f_flags & FL_PRIORITY) ? 5 : 0)) {
				r = conn_error(c, H2_PROTOCOL_ERROR);
				break;
			}
			c->rx = c->f_type == F_HEADERS && (c->f_flags & FL_PRIORITY) ? RX_PRIO
										: RX_BODY;
			if (c->rx == RX_BODY && c->f_left == 0)
				r = frame_end(c);
			break;
		case RX_PRIO:
			i++;
			c->f_left--;
			if (++c->fld_len == 5) {
				c->fld_len = 0;
				c->rx = RX_BODY;
				if (c->f_left == 0)
					r = frame_end(c);
			}
			break;
		case RX_BODY:
			n = c->f_left - c->f_pad;
			if (n > len - i)
				n = len - i;
			r = body(c, data + i, n);
			i += n;
			c->f_left -= (uint32_t)n;
			if (r == 0 && c->f_left == c->f_pad) {
				if (c->f_pad)
					c->rx = RX_PAD;
				else
					r = frame_end(c);
			}
			break;
		case RX_PAD:
			n = c->f_left;
			if (n > len - i)
				n = len - i;
			i += n;
			c->f_left -= (uint32_t)n;
			if (c->f_left == 0)
				r = frame_end(c);
			break;
		}
	}
	flush_owed(c);
	if (c->dead)
		return H2_ERR_CONN;
	return r;
}

struct buf *h2_conn_out(struct h2_conn *c)
{
	return &c->out;
}

void h2_conn_sent(struct h2_conn *c, size_t n)
{
	buf_consume(&c->out, n);
	flush_owed(c);
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
		conn_error(c, code);
		return;
	}
	if (c->goaway_sent)
		return;
	c->goaway_sent = 1;
	c->goaway_pending = 1;
	flush_owed(c);
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
		if (!field_ok(&f[i]))
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
	s = stream_new(c, c->next_local_sid);
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
		stream_maybe_done(c, s);
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
		stream_maybe_done(c, s);
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
	stream_close(c, s, code, 0);
	flush_owed(c);
}
