/* h2_recv.c: the receiving side of the HTTP/2 engine: the frame parser fed bytes at any
 * boundary (h2_conn_feed), frame checks, SETTINGS, and received header lists checked and
 * handed to the callbacks. Calls h2.c for the stream table, owed frames and errors. */
#include <errno.h>
#include <string.h>

#include "base/be.h"
#include "h2/h2.h"
#include "h2/h2_internal.h"

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
		if (!h2_field_ok(&f[i]))
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
	struct h2_stream *s = h2_stream_find(c, sid);
	unsigned flags = c->hb_end_stream ? H2_END_STREAM : 0;
	int fresh = 0, r;
	size_t nfields;

	c->hb_active = 0;
	if (!s && is_peer_sid(c, sid) && sid > c->last_peer_sid) {
		if (c->role == H2_CLIENT)
			return h2_conn_error(c, H2_PROTOCOL_ERROR); /* a push: we disabled them */
		fresh = 1;
	} else if (!s && !is_peer_sid(c, sid) && sid >= c->next_local_sid) {
		return h2_conn_error(c, H2_PROTOCOL_ERROR); /* an idle stream of ours */
	} else if (!s && !h2_reset_recent(c, sid)) {
		return h2_conn_error(c, H2_PROTOCOL_ERROR); /* §5.1.1: a closed or a skipped stream */
	}
	/* Decode even for streams we will ignore: the HPACK table must stay in sync. */
	c->list_len = 0;
	c->nfields = 0;
	c->list_cut = 0;
	r = hpack_decode(&c->hpack, c->hb, c->hb_len, collect_field, c);
	nfields = c->nfields;
	c->hb_len = 0;
	if (r < 0)
		return h2_conn_error(c, H2_COMPRESSION_ERROR);
	if (c->list_cut)
		flags |= H2_TOO_LARGE;
	if (fresh) {
		if (c->goaway_sent)
			return 0;
		c->last_peer_sid = sid;
		if (c->nstreams >= c->max_streams || !(s = h2_stream_new(c, sid))) {
			h2_stream_error(c, NULL, sid, H2_REFUSED_STREAM);
			return c->dead ? H2_ERR_CONN : 0;
		}
	}
	if (!s || s->dead)
		return 0;
	if (s->remote_closed) {
		h2_stream_error(c, s, sid, H2_STREAM_CLOSED);
		return 0;
	}
	if (s->got_headers)
		flags |= H2_TRAILERS;
	if (!(flags & H2_TOO_LARGE) &&
	    (!list_valid(c, c->scratch->fields, nfields, s->got_headers) ||
	     (s->got_headers && !(flags & H2_END_STREAM)))) {
		h2_stream_error(c, s, sid, H2_PROTOCOL_ERROR);
		return 0;
	}
	if (!s->got_headers && !(flags & H2_TOO_LARGE))
		for (size_t i = 0; i < nfields; i++)
			if (field_is(&c->scratch->fields[i], "content-length"))
				s->content_left = content_length(&c->scratch->fields[i]);
	if ((flags & H2_END_STREAM) && s->content_left > 0) {
		h2_stream_error(c, s, sid, H2_PROTOCOL_ERROR); /* §8.1.1: less DATA than announced */
		return 0;
	}
	s->got_headers = 1;
	if (flags & H2_END_STREAM)
		s->remote_closed = 1;
	c->cb->on_headers(c->ctx, c, s, c->scratch->fields, nfields, flags);
	if (s->id == sid)
		h2_stream_maybe_done(c, s);
	return c->dead ? H2_ERR_CONN : 0;
}

/* ---- frames ---- */

static int apply_setting(struct h2_conn *c, uint16_t id, uint32_t v)
{
	switch (id) {
	case S_ENABLE_PUSH:
		if (v > 1 || (c->role == H2_CLIENT && v == 1))
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		break;
	case S_MAX_CONCURRENT_STREAMS:
		c->peer_max_streams = v;
		break;
	case S_INITIAL_WINDOW_SIZE: {
		int64_t delta = (int64_t)v - c->peer_initial_window;

		if (v > WINDOW_MAX)
			return h2_conn_error(c, H2_FLOW_CONTROL_ERROR);
		for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
			struct h2_stream *s = &c->streams[i];

			if (!s->id)
				continue;
			s->send_window += delta;
			if (s->send_window > WINDOW_MAX)
				return h2_conn_error(c, H2_FLOW_CONTROL_ERROR);
		}
		c->peer_initial_window = v;
		break;
	}
	case S_MAX_FRAME_SIZE:
		if (v < 16384 || v > 16777215)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		c->peer_max_frame = v;
		break;
	default: /* HEADER_TABLE_SIZE: our encoder never indexes; others are advisory or unknown */
		break;
	}
	return 0;
}

/* A DATA frame's head: connection and stream windows taken, or the frame ignored (a stream
 * error owed) when its stream is gone, closed or over its window. H2_ERR_CONN or 0. */
static int begin_data(struct h2_conn *c, uint32_t sid, uint32_t len, uint8_t flags)
{
	struct h2_stream *s = h2_stream_find(c, sid);

	if (sid == 0)
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
	if (!s && is_idle(c, sid))
		return h2_conn_error(c, H2_PROTOCOL_ERROR); /* DATA on an idle stream */
	if (len > c->recv_window)
		return h2_conn_error(c, H2_FLOW_CONTROL_ERROR);
	c->recv_window -= len;
	if (!s || s->dead) {
		c->f_ignore = 1;
		if (!s && !after_goaway(c, sid) && !h2_reset_recent(c, sid))
			h2_stream_error(c, NULL, sid, H2_STREAM_CLOSED);
	} else if (s->remote_closed) {
		c->f_ignore = 1;
		h2_stream_error(c, s, sid, H2_STREAM_CLOSED);
	} else if (len > s->recv_window) {
		c->f_ignore = 1;
		h2_stream_error(c, s, sid, H2_FLOW_CONTROL_ERROR);
	} else {
		s->recv_window -= len;
		/* Half-closed from the frame's start, so a caller answering inside on_data
		 * already knows the peer is done (and need not reset the stream). */
		if (flags & FL_END_STREAM)
			s->remote_closed = 1;
	}
	return 0;
}

/* The stream id and length checks of the control frames (unknown types are ignored).
 * H2_ERR_CONN or 0. */
static int begin_control(struct h2_conn *c, uint8_t type, uint8_t flags, uint32_t sid,
			 uint32_t len)
{
	switch (type) {
	case F_PRIORITY:
		if (sid == 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		break;
	case F_RST_STREAM:
		if (sid == 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		if (len != 4)
			return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_SETTINGS:
		if (sid != 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		if ((flags & FL_ACK) ? len != 0 : len % 6 != 0)
			return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_PUSH_PROMISE:
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
	case F_PING:
		if (sid != 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		if (len != 8)
			return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_GOAWAY:
		if (sid != 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		if (len < 8)
			return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	case F_WINDOW_UPDATE:
		if (len != 4)
			return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
		break;
	default:
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
		return h2_conn_error(c, H2_FRAME_SIZE_ERROR);
	if (c->hb_active && (type != F_CONTINUATION || sid != c->hb_sid))
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
	if (!c->got_settings && (type != F_SETTINGS || (flags & FL_ACK)))
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
	switch (type) {
	case F_DATA:
		if (begin_data(c, sid, len, flags) < 0)
			return H2_ERR_CONN;
		if (flags & FL_PADDED)
			min_len = 1;
		break;
	case F_HEADERS:
		if (sid == 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		min_len = (flags & FL_PADDED ? 1 : 0) + (flags & FL_PRIORITY ? 5 : 0);
		c->hb_active = 1;
		c->hb_sid = sid;
		c->hb_len = 0;
		c->hb_frames = 1;
		c->hb_end_stream = flags & FL_END_STREAM;
		break;
	case F_CONTINUATION:
		if (!c->hb_active)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		if (++c->hb_frames > H2_MAX_CONTINUATIONS + 1)
			return h2_conn_error(c, H2_ENHANCE_YOUR_CALM);
		break;
	default:
		if (begin_control(c, type, flags, sid, len) < 0)
			return H2_ERR_CONN;
		break;
	}
	if (len < min_len)
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
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

	h2_flush_owed(c);
	return r;
}

/* A DATA frame fully received: its bytes credited back (WINDOW_UPDATEs owed at half a
 * window), and END_STREAM handed over. */
static void end_data(struct h2_conn *c, uint32_t sid)
{
	struct h2_stream *s;

	c->recv_credit += c->f_len;
	ASSERT(c->recv_window + c->recv_credit == H2_CONN_WINDOW);
	s = h2_stream_find(c, sid);
	if (!s || s->dead || c->f_ignore)
		return;
	s->recv_credit += c->f_len;
	if (s->recv_credit >= H2_STREAM_WINDOW / 2)
		c->stream_owed = 1;
	if (c->f_flags & FL_END_STREAM) {
		if (s->content_left > 0) {
			h2_stream_error(c, s, sid, H2_PROTOCOL_ERROR); /* §8.1.1 */
			return;
		}
		c->cb->on_data(c->ctx, c, s, NULL, 0, H2_END_STREAM);
		if (s->id == sid)
			h2_stream_maybe_done(c, s);
	}
}

/* GOAWAY: our streams above the peer's last one were never seen, and are refused. */
static void end_goaway(struct h2_conn *c)
{
	uint32_t last = be32_get(c->fld) & WINDOW_MAX;

	c->goaway_received = 1;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
		struct h2_stream *s = &c->streams[i];

		if (s->id && !s->dead && !is_peer_sid(c, s->id) && s->id > last)
			h2_stream_close(c, s, H2_REFUSED_STREAM, H2_REMOTE);
	}
}

/* WINDOW_UPDATE on the connection (sid 0) or a stream: H2_ERR_CONN or 0. */
static int end_window_update(struct h2_conn *c, uint32_t sid)
{
	uint32_t inc = be32_get(c->fld) & WINDOW_MAX;
	struct h2_stream *s;

	if (sid == 0) {
		if (inc == 0)
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		c->send_window += inc;
		if (c->send_window > WINDOW_MAX)
			return h2_conn_error(c, H2_FLOW_CONTROL_ERROR);
		return c->dead ? H2_ERR_CONN : 0;
	}
	s = h2_stream_find(c, sid);
	if (!s) {
		if (is_idle(c, sid))
			return h2_conn_error(c, H2_PROTOCOL_ERROR);
		return c->dead ? H2_ERR_CONN : 0;
	}
	if (s->dead)
		return c->dead ? H2_ERR_CONN : 0;
	if (inc == 0) {
		h2_stream_error(c, s, sid, H2_PROTOCOL_ERROR);
		return c->dead ? H2_ERR_CONN : 0;
	}
	s->send_window += inc;
	if (s->send_window > WINDOW_MAX)
		h2_stream_error(c, s, sid, H2_FLOW_CONTROL_ERROR);
	return c->dead ? H2_ERR_CONN : 0;
}

static int frame_end_dispatch(struct h2_conn *c)
{
	uint32_t sid = c->f_sid;
	struct h2_stream *s;

	c->rx = RX_HEAD;
	c->head_len = 0;
	switch (c->f_type) {
	case F_DATA:
		end_data(c, sid);
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
	case F_GOAWAY:
		end_goaway(c);
		break;
	case F_RST_STREAM:
		s = h2_stream_find(c, sid);
		if (!s) {
			if (is_idle(c, sid))
				return h2_conn_error(c, H2_PROTOCOL_ERROR);
			break;
		}
		if (s->dead)
			break;
		h2_reset_refill(c);
		if (c->reset_budget == 0)
			return h2_conn_error(c, H2_ENHANCE_YOUR_CALM);
		c->reset_budget--;
		s->rst_pending = 0;
		h2_stream_close(c, s, be32_get(c->fld), H2_REMOTE);
		break;
	case F_WINDOW_UPDATE:
		return end_window_update(c, sid);
	case F_PRIORITY:
		if (c->f_len != 5) {
			h2_stream_error(c, h2_stream_find(c, sid), sid, H2_FRAME_SIZE_ERROR);
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
		s = h2_stream_find(c, c->f_sid);
		if (!s || s->dead) {
			c->f_ignore = 1;
			return 0;
		}
		if (s->content_left >= 0) {
			if ((int64_t)n > s->content_left) {
				c->f_ignore = 1;
				h2_stream_error(c, s, s->id, H2_PROTOCOL_ERROR); /* §8.1.1: more DATA */
				return c->dead ? H2_ERR_CONN : 0;
			}
			s->content_left -= (int64_t)n;
		}
		c->cb->on_data(c->ctx, c, s, p, n, 0);
		return c->dead ? H2_ERR_CONN : 0;
	case F_HEADERS:
	case F_CONTINUATION:
		if (n > H2_HEADER_BLOCK_BYTES - c->hb_len)
			return h2_conn_error(c, H2_ENHANCE_YOUR_CALM);
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

/* The pad length of a padded DATA or HEADERS frame: at most what the frame has left. */
static int rx_padlen(struct h2_conn *c, uint8_t pad)
{
	int prio = c->f_type == F_HEADERS && (c->f_flags & FL_PRIORITY);

	c->f_pad = pad;
	c->f_left--;
	if (c->f_pad > c->f_left - (prio ? 5 : 0))
		return h2_conn_error(c, H2_PROTOCOL_ERROR);
	c->rx = prio ? RX_PRIO : RX_BODY;
	if (c->rx == RX_BODY && c->f_left == 0)
		return frame_end(c);
	return 0;
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
			if (data[i] != h2_client_preface[c->preface_got])
				return H2_ERR_PREFACE;
			i++;
			if (++c->preface_got == sizeof(h2_client_preface))
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
			r = rx_padlen(c, data[i++]);
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
	h2_flush_owed(c);
	if (c->dead)
		return H2_ERR_CONN;
	return r;
}

