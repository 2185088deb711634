/* e2b_conn.c: the E2B listener's connections: the TCP listener and its limit, HTTP/1.1 read
 * (src/http's parser: chunked bodies decoded) and written (whole answers, chunked streams
 * flushed per write), keep-alive with a Keep-Alive hint, the cuts (a head that does not come in
 * time, a body that stalls, a client that reads nothing), the fleet's relayed connections both
 * ways, and contract C2 (e2b_conn.h) for the services. Descriptors are edge-triggered on
 * agenticd's loop; nothing here blocks. A connection is ended (its service told through
 * on_close) only from the loop's own calls (e2b_conn_event, e2b_conn_tick), never inside a
 * call a service made. Calls nothing of e2b/ above it: the routes are handed in at start. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config/config.h"
#include "e2b/e2b.h"
#include "e2b/e2b_conn.h"
#include "fleet/link.h"
#include "fleet/wire.h"
#include "grpc/grpc.h"
#include "http/http.h"
#include "json/json.h"
#include "sandbox/sandbox.h"

enum rx { RX_HEAD = 0, RX_BODY, RX_STREAM, RX_DONE };
enum tx { TX_NONE = 0, TX_WHOLE, TX_STREAM, TX_END };

struct e2b_conn {
	int fd;                       /* -1: a free slot */
	uint32_t gen;                 /* bumped at every request */
	uint8_t rx, tx;
	bool keep_alive;
	bool broken;                  /* the socket failed: ended at the loop's next call */
	bool paused;                  /* a streamed body waits for e2b_body_resume */
	bool kick;                    /* ready for its next request: read what is there */
	bool want_room;               /* a stream write found no room: on_writable owed */
	bool got_byte;                /* a byte of this request has come */
	bool end_owed;                /* e2b_stream_end found no room for the last chunk */
	bool closing;                 /* shut for writing; what comes in is dropped (linger) */
	char relay_from[64];          /* the node that relayed it; "": a client's own */
	int64_t rx_since;             /* monotonic: the head's first byte, the body's start, or a
				       * streamed body's last progress */
	int64_t idle_since;           /* the last request's end (or the accept) */
	int64_t tx_since;             /* output queued and not moving since */
	struct sandbox *sb;
	uint32_t sb_gen;
	void (*handler)(struct e2b_conn *c, const char *arg);
	char arg[64];
	const struct e2b_service_ops *ops;
	void *ctx;
	const char *path, *query;     /* in head */
	struct http_parser parser;
	uint32_t rlen, roff, body_len, out_len, out_off;
	char head[LIMIT_E2B_HEAD_BYTES];
	uint8_t rbuf[LIMIT_E2B_READ_BYTES];
	uint8_t body[LIMIT_E2B_BODY_BYTES];
	uint8_t out[LIMIT_E2B_OUT_BYTES];
};

static struct {
	const struct config *cfg;
	struct e2b_conn *conns;
	uint32_t n, live;
	int epfd, listen_fd;
	uint32_t tag_listen, tag_conn;
	e2b_dispatch_fn dispatch;
	bool stopping;
	uint64_t refused;
} C;
static bool any_kick;                 /* a connection has its next step owed (kick) */

static const char keep_alive_hint[] = "timeout=" E2B_STR(LIMIT_E2B_KEEPALIVE_S);

size_t e2b_conn_bytes(uint32_t n)
{
	return (size_t)n * sizeof(struct e2b_conn);
}

void e2b_conn_start(const struct config *cfg, void *storage, uint32_t n, int epfd,
		    uint32_t tag_listen, uint32_t tag_conn, e2b_dispatch_fn dispatch)
{
	C.cfg = cfg;
	C.conns = storage;
	C.n = n;
	C.epfd = epfd;
	C.listen_fd = -1;
	C.tag_listen = tag_listen;
	C.tag_conn = tag_conn;
	C.dispatch = dispatch;
	for (uint32_t i = 0; i < n; i++)
		C.conns[i].fd = -1;
}

/* ---- the request ---- */

const char *e2b_method(const struct e2b_conn *c)
{
	return http_parser_str(&c->parser, c->parser.method);
}

const char *e2b_path(const struct e2b_conn *c)
{
	return c->path;
}

const char *e2b_query(const struct e2b_conn *c)
{
	return c->query;
}

const char *e2b_header(const struct e2b_conn *c, const char *name)
{
	return http_parser_header(&c->parser, name);
}

struct sandbox *e2b_sandbox(const struct e2b_conn *c)
{
	return c->sb && c->sb->gen == c->sb_gen ? c->sb : NULL;
}

const uint8_t *e2b_body(const struct e2b_conn *c, size_t *len)
{
	*len = c->body_len;
	return c->body;
}

int64_t e2b_content_length(const struct e2b_conn *c)
{
	return c->parser.framing == HTTP_BODY_LENGTH ? (int64_t)c->parser.content_length : -1;
}

void e2b_conn_close_after(struct e2b_conn *c)
{
	c->keep_alive = false;
}

struct e2b_ref e2b_ref_of(const struct e2b_conn *c)
{
	return (struct e2b_ref){ (uint32_t)(c - C.conns), c->gen };
}

struct e2b_conn *e2b_conn_get(struct e2b_ref r)
{
	struct e2b_conn *c;

	if (r.index >= C.n)
		return NULL;
	c = &C.conns[r.index];
	return c->fd >= 0 && c->gen == r.gen && !c->broken ? c : NULL;
}

void e2b_conn_route_set(struct e2b_conn *c, struct sandbox *sb, bool streamed,
			void (*handler)(struct e2b_conn *c, const char *arg), const char *arg)
{
	c->sb = sb;
	c->sb_gen = sb ? sb->gen : 0;
	c->handler = handler;
	snprintf(c->arg, sizeof(c->arg), "%s", arg ? arg : "");
	c->rx = streamed ? RX_STREAM : RX_BODY;
}

void e2b_conn_attach(struct e2b_conn *c, const struct e2b_service_ops *ops, void *ctx)
{
	c->ops = ops;
	c->ctx = ctx;
}

/* ---- output ---- */

static void watch(struct e2b_conn *c, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET };

	ev.data.u64 = ((uint64_t)C.tag_conn << 32) | (uint32_t)(c - C.conns);
	if (epoll_ctl(C.epfd, op, c->fd, &ev) != 0)
		c->broken = true;
}

/* Sends what is queued, as far as the socket takes it (and a stream's last chunk, owed). */
static void flush(struct e2b_conn *c)
{
	ASSERT(c->out_off <= c->out_len);
	for (;;) {
		ssize_t n;

		if (c->out_off == c->out_len) {
			struct buf b;

			c->out_off = c->out_len = 0;
			if (!c->end_owed)
				break;
			buf_init(&b, c->out, sizeof(c->out));
			http_chunk_end(&b);
			c->out_len = (uint32_t)b.len;
			c->end_owed = false;
		}
		if (c->broken)
			return;
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n <= 0) {
			c->broken = true;
			return;
		}
		c->out_off += (uint32_t)n;
		c->tx_since = clock_mono_ms();
	}
	if (c->tx == TX_WHOLE || c->tx == TX_END)
		c->kick = any_kick = true; /* the answer is out: the next request, or the close */
}

static const struct http_field *fields_for(struct e2b_conn *c, const char *type,
					   struct http_field *f)
{
	int n = 0;

	if (type)
		f[n++] = (struct http_field){ "Content-Type", type };
	if (c->keep_alive)
		f[n++] = (struct http_field){ "Keep-Alive", keep_alive_hint };
	f[n] = (struct http_field){ NULL, NULL };
	return f;
}

/* An answer begins: a request whose body is not read to its end closes after it. */
static bool answer_begins(struct e2b_conn *c)
{
	if (c->tx != TX_NONE || c->fd < 0) {
		log_warn("e2b answer dropped: one was already given", NULL);
		return false;
	}
	if (c->rx != RX_DONE && c->parser.framing != HTTP_BODY_NONE)
		c->keep_alive = false;
	c->ops = NULL;
	return true;
}

void e2b_reply_hdr(struct e2b_conn *c, int status, const char *content_type, const char *hname,
		   const char *hvalue, const void *body, size_t len)
{
	struct http_field f[4];
	struct buf b;
	int n = 0;

	if (!answer_begins(c))
		return;
	fields_for(c, content_type, f);
	while (f[n].name)
		n++;
	f[n] = (struct http_field){ hname, hvalue };
	f[n + 1] = (struct http_field){ NULL, NULL };
	buf_init(&b, c->out, sizeof(c->out));
	b.len = c->out_len;
	/* a 204 carries no Content-Length (RFC 9110 8.6) */
	if ((status == 204 ? http_response_head_write(&b, status, f, HTTP_NO_BODY, !c->keep_alive)
			   : http_response_write(&b, status, f, !c->keep_alive, body, len)) != 0) {
		c->keep_alive = false;
		buf_init(&b, c->out, sizeof(c->out));
		http_response_write(&b, 500, NULL, true, NULL, 0);
	}
	c->out_len = (uint32_t)b.len;
	c->tx = TX_WHOLE;
	c->tx_since = clock_mono_ms();
	flush(c);
}

void e2b_reply(struct e2b_conn *c, int status, const char *content_type, const void *body,
	       size_t len)
{
	e2b_reply_hdr(c, status, content_type, NULL, NULL, body, len);
}

/* {"code":status,"message":m} (and extra: more members' text, or NULL). */
void e2b_reply_json_error(struct e2b_conn *c, int status, const char *message,
			  const char *extra)
{
	char text[1024];
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "code");
	json_int_write(&w, status);
	if (message) {
		json_key(&w, "message");
		json_str_write(&w, message);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0)
		b.len = 0;
	if (extra && b.len && b.len + strlen(extra) + 1 < sizeof(text)) {
		b.len--;
		buf_printf(&b, ",%s}", extra);
	}
	e2b_reply(c, status, "application/json", b.data, b.len);
}

void e2b_reply_error(struct e2b_conn *c, int status, const char *message)
{
	e2b_reply_json_error(c, status, message, NULL);
}

int e2b_stream_begin(struct e2b_conn *c, int status, const char *content_type)
{
	struct http_field f[3];
	struct buf b;

	if (!answer_begins(c))
		return -EPIPE;
	buf_init(&b, c->out, sizeof(c->out));
	if (http_response_head_write(&b, status, fields_for(c, content_type, f), HTTP_CHUNKED,
				     !c->keep_alive) != 0)
		return -EINVAL;
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->tx = TX_STREAM;
	c->tx_since = clock_mono_ms();
	return 0; /* the head leaves with the first chunk */
}

#define CHUNK_OVERHEAD 12 /* the size line (8 hex digits and CRLF) and the CRLF after */

size_t e2b_stream_room(const struct e2b_conn *c)
{
	size_t free = sizeof(c->out) - (c->out_len - c->out_off);

	return c->tx == TX_STREAM && free > CHUNK_OVERHEAD ? free - CHUNK_OVERHEAD : 0;
}

/* A chunk into the buffer; sent now unless held (its sender's next write or end sends it) */
static int stream_put(struct e2b_conn *c, const void *data, size_t len, bool hold)
{
	struct buf b;

	if (c->tx != TX_STREAM || c->broken || c->fd < 0)
		return -EPIPE;
	if (len == 0)
		return 0;
	if (len > sizeof(c->out) - CHUNK_OVERHEAD)
		return -EMSGSIZE;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	buf_init(&b, c->out, sizeof(c->out));
	b.len = c->out_len;
	if (http_chunk_write(&b, data, len) != 0) {
		c->want_room = true;
		flush(c); /* what is held goes now: the room comes as the socket takes it */
		return c->broken ? -EPIPE : -EAGAIN;
	}
	if (c->out_len == 0)
		c->tx_since = clock_mono_ms();
	c->out_len = (uint32_t)b.len;
	if (!hold)
		flush(c);
	return c->broken ? -EPIPE : 0;
}

int e2b_stream_write(struct e2b_conn *c, const void *data, size_t len)
{
	return stream_put(c, data, len, false);
}

int e2b_stream_hold(struct e2b_conn *c, const void *data, size_t len)
{
	return stream_put(c, data, len, true);
}

void e2b_stream_end(struct e2b_conn *c)
{
	struct buf b;

	if (c->tx != TX_STREAM)
		return;
	c->tx = TX_END;
	c->ops = NULL;
	if (c->out_off) {
		memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
		c->out_len -= c->out_off;
		c->out_off = 0;
	}
	buf_init(&b, c->out, sizeof(c->out));
	b.len = c->out_len;
	if (http_chunk_end(&b) != 0)
		c->end_owed = true;
	c->out_len = (uint32_t)b.len;
	flush(c);
}

/* ---- input ---- */

void e2b_body_pause(struct e2b_conn *c)
{
	c->paused = true;
}

void e2b_body_resume(struct e2b_conn *c)
{
	if (!c->paused)
		return;
	c->paused = false;
	c->kick = any_kick = true; /* read on at the loop's next turn, not inside the caller */
}

/* The head is in: the route decides how the request goes on. */
static void on_head(struct e2b_conn *c)
{
	char *target = c->head + c->parser.target, *q = strchr(target, '?');
	const char *expect = http_parser_header(&c->parser, "expect");

	c->query = q ? q + 1 : "";
	if (q)
		*q = '\0';
	c->path = target;
	c->keep_alive = c->parser.keep_alive && !C.stopping && !c->relay_from[0];
	c->rx = RX_BODY;
	c->rx_since = clock_mono_ms();
	C.dispatch(c);
	if (c->tx != TX_NONE || c->broken) {
		if (c->parser.framing != HTTP_BODY_NONE)
			c->rx = RX_DONE; /* refused at its head: the body is never read */
		return;
	}
	if (c->rx == RX_BODY && c->parser.framing == HTTP_BODY_LENGTH &&
	    c->parser.content_length > LIMIT_E2B_BODY_BYTES) {
		e2b_reply_error(c, 413, "request body over " E2B_STR(LIMIT_E2B_BODY_BYTES) " bytes");
		c->rx = RX_DONE;
		return;
	}
	/* curl asks before it sends a body over 1 KiB */
	if (expect && strcasecmp(expect, "100-continue") == 0)
		(void)send(c->fd, "HTTP/1.1 100 Continue\r\n\r\n", 25, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (c->rx == RX_STREAM && c->handler)
		c->handler(c, c->arg);
}

static void on_body_bytes(struct e2b_conn *c, const struct http_slice *s)
{
	if (c->rx == RX_BODY) {
		if (s->len > sizeof(c->body) - c->body_len) {
			e2b_reply_error(c, 413, "request body over " E2B_STR(LIMIT_E2B_BODY_BYTES)
					" bytes");
			c->rx = RX_DONE;
			return;
		}
		memcpy(c->body + c->body_len, s->data, s->len);
		c->body_len += (uint32_t)s->len;
		return;
	}
	if (c->ops && c->ops->on_body)
		c->ops->on_body(c, c->ctx, s->data, s->len, false);
	if (c->tx == TX_WHOLE || c->tx == TX_END)
		c->rx = RX_DONE; /* answered before the body's end: the rest is not read */
}

static void on_done(struct e2b_conn *c)
{
	bool streamed = c->rx == RX_STREAM;

	c->rx = RX_DONE;
	if (streamed) {
		if (c->ops && c->ops->on_body)
			c->ops->on_body(c, c->ctx, NULL, 0, true);
	} else if (c->tx == TX_NONE && c->handler) {
		c->handler(c, c->arg);
	} else if (c->tx == TX_NONE) {
		e2b_reply_error(c, 500, "the request was not routed");
	}
}

/* Feeds what is buffered to the parser while the request takes it. */
static void rx_feed(struct e2b_conn *c)
{
	while (c->rx != RX_DONE && !c->paused && !c->broken) {
		struct http_slice s;
		size_t used = 0;
		int ev = http_parser_feed(&c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used,
					  &s);

		c->roff += (uint32_t)used;
		if (ev == HTTP_EV_NEED_MORE)
			break;
		if (ev < 0) {
			c->keep_alive = false;
			if (c->tx == TX_NONE)
				e2b_reply_error(c, ev == HTTP_ERR_HEAD_TOO_BIG ? 431 : ev ==
						HTTP_ERR_BODY_TOO_BIG ? 413 : 400,
						ev == HTTP_ERR_HEAD_TOO_BIG ? "request head too large"
						: "malformed HTTP request");
			c->rx = RX_DONE;
			break;
		}
		if (ev == HTTP_EV_HEAD)
			on_head(c);
		else if (ev == HTTP_EV_BODY)
			on_body_bytes(c, &s);
		else
			on_done(c);
	}
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
}

static void rx_read(struct e2b_conn *c)
{
	for (int reads = 0; c->rx != RX_DONE && !c->paused && !c->broken; reads++) {
		ssize_t n;

		rx_feed(c);
		if (c->rx == RX_DONE || c->paused || c->broken || c->rlen == sizeof(c->rbuf))
			break;
		if (reads == 16) { /* a fast sender gets its turn, the others theirs */
			c->kick = any_kick = true;
			break;
		}
		n = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			break;
		if (n <= 0) {
			c->broken = true; /* closed: between requests, or a request cut short */
			break;
		}
		if (c->rx == RX_HEAD && !c->got_byte) {
			c->got_byte = true;
			c->rx_since = clock_mono_ms();
		} else if (c->rx == RX_STREAM) {
			c->rx_since = clock_mono_ms();
		}
		c->rlen += (uint32_t)n;
	}
}

/* ---- a connection's life ---- */

static void request_reset(struct e2b_conn *c)
{
	c->gen++;
	http_parser_reset(&c->parser);
	c->parser.body_limit = UINT64_MAX;
	c->rx = RX_HEAD;
	c->tx = TX_NONE;
	c->sb = NULL;
	c->handler = NULL;
	c->ops = NULL;
	c->ctx = NULL;
	c->body_len = 0;
	c->paused = c->want_room = c->end_owed = c->got_byte = false;
	c->path = c->query = "";
	c->idle_since = clock_mono_ms();
}

/* Ends c: its service told (on_close), its descriptor closed, the slot free. */
static void conn_end(struct e2b_conn *c)
{
	const struct e2b_service_ops *ops = c->ops;
	void *ctx = c->ctx;

	ASSERT(c->fd >= 0 && C.live > 0);
	c->ops = NULL;
	epoll_ctl(C.epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	c->gen++;
	C.live--;
	if (ops && ops->on_close)
		ops->on_close(c, ctx);
}

/* The answer went out but the connection does not go on: our side is shut and what the
 * client still sends is read and dropped for a moment, so the close does not reset the
 * answer away before the client has read it. */
static void linger(struct e2b_conn *c)
{
	const struct e2b_service_ops *ops = c->ops;

	c->ops = NULL;
	if (ops && ops->on_close)
		ops->on_close(c, c->ctx);
	shutdown(c->fd, SHUT_WR);
	c->rx = RX_DONE;
	c->closing = true;
	c->idle_since = clock_mono_ms();
	c->gen++;
}

static void linger_read(struct e2b_conn *c)
{
	uint8_t sink[1024];
	ssize_t n;

	while ((n = recv(c->fd, sink, sizeof(sink), 0)) > 0)
		;
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
		c->broken = true;
}

/* What a connection does next, from the loop: its next request, or its end. */
static void advance(struct e2b_conn *c)
{
	/* a client pipelining requests gets a few per turn of the loop, not the loop */
	for (int turns = 0; c->kick && !c->broken && !c->closing && c->fd >= 0; turns++) {
		if (turns == 8) {
			any_kick = true;
			return;
		}
		c->kick = false;
		if (c->tx == TX_STREAM || c->tx == TX_NONE) {
			rx_read(c); /* a resumed body */
			continue;
		}
		if (c->out_len || c->end_owed)
			return;
		if (c->rx != RX_DONE || !c->keep_alive || C.stopping) {
			linger(c);
			linger_read(c);
			return;
		}
		request_reset(c);
		rx_read(c);
	}
}

static void settle(struct e2b_conn *c)
{
	advance(c);
	if (c->broken && c->fd >= 0)
		conn_end(c);
}

void e2b_event(uint32_t index, uint32_t events)
{
	struct e2b_conn *c = &C.conns[index];

	if (index >= C.n || c->fd < 0)
		return;
	if (c->closing) {
		linger_read(c);
		settle(c);
		return;
	}
	if (events & EPOLLERR)
		c->broken = true;
	if ((events & EPOLLOUT) && !c->broken) {
		flush(c);
		if (c->want_room && c->tx == TX_STREAM && e2b_stream_room(c) >= sizeof(c->out) / 2) {
			c->want_room = false;
			if (c->ops && c->ops->on_writable)
				c->ops->on_writable(c, c->ctx);
		}
	}
	if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP)) && !c->broken)
		rx_read(c);
	/* a hang-up while nothing more is read: the client has gone */
	if ((events & (EPOLLRDHUP | EPOLLHUP)) && c->rx == RX_DONE)
		c->broken = true;
	settle(c);
}

/* ---- the listener ---- */

static struct e2b_conn *conn_take(int fd)
{
	for (uint32_t i = 0; i < C.n; i++) {
		struct e2b_conn *c = &C.conns[i];
		uint32_t gen = c->gen;

		if (c->fd >= 0)
			continue;
		memset(c, 0, offsetof(struct e2b_conn, head));
		c->gen = gen + 1;
		c->fd = fd;
		http_parser_init(&c->parser, HTTP_PARSE_REQUEST, c->head, sizeof(c->head));
		request_reset(c);
		C.live++;
		return c;
	}
	return NULL;
}

/* A connection over e2b_max_connections: a 503 at once (the SDK's ServiceBusyError), closed. */
static void refuse_busy(int fd)
{
	static const char body[] = "{\"code\":503,\"message\":\"too many connections to this E2B "
				   "listener (e2b_max_connections)\"}";
	char out[320];
	struct buf b;

	buf_init(&b, out, sizeof(out));
	C.refused++;
	if (http_response_write(&b, 503, (const struct http_field[]){ { "Content-Type",
		"application/json" }, { NULL, NULL } }, true, body, sizeof(body) - 1) == 0)
		(void)send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
	shutdown(fd, SHUT_WR);
	close(fd);
}

static int64_t accept_paused_until;

void e2b_accept(void)
{
	for (;;) {
		int fd = accept4(C.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), one = 1;
		struct e2b_conn *c;

		if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			       errno == ENOMEM)) {
			/* the listener is level-triggered: off the loop for a second */
			log_warn("e2b accept failed", "error=%s", log_q(strerror(errno)));
			epoll_ctl(C.epfd, EPOLL_CTL_DEL, C.listen_fd, NULL);
			accept_paused_until = clock_mono_ms() + 1000;
			return;
		}
		if (fd < 0)
			return;
		c = conn_take(fd);
		if (!c) {
			refuse_busy(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		watch(c, EPOLL_CTL_ADD);
		if (c->broken)
			conn_end(c);
	}
}

void e2b_adopt_relayed(int fd, const char *node)
{
	struct e2b_conn *c = NULL;
	uint32_t relayed = 0;

	for (uint32_t i = 0; i < C.n; i++)
		relayed += C.conns[i].fd >= 0 && C.conns[i].relay_from[0];
	/* the other nodes share half the connections at most, as on the admin API */
	if (C.listen_fd < 0 || relayed >= C.n / 2 || !(c = conn_take(fd))) {
		log_warn("e2b relayed connection refused", "node=%s reason=%s", log_q(node),
			 log_q(C.listen_fd < 0 ? "no_e2b_listener" : "capacity"));
		close(fd); /* the relay-out answers 502 closed_without_answer */
		return;
	}
	snprintf(c->relay_from, sizeof(c->relay_from), "%s", node);
	log_info("e2b relayed connection", "node=%s", log_q(node));
	watch(c, EPOLL_CTL_ADD);
}

const char *e2b_relayed_from(const struct e2b_conn *c)
{
	return c->relay_from;
}

int e2b_conn_relay(struct e2b_conn *c, const char *node, const char *addr,
		   const char *placement, const char *query)
{
	static const char *const drop[] = { "x-api-key", "expect", FLEET_PLACEMENT_HEADER, NULL };
	static char pre[FLEET_RELAY_PREFIX_BYTES];
	struct buf b;
	int r;

	buf_init(&b, pre, sizeof(pre));
	r = http_head_rewrite(&b, &c->parser, c->path, query ? query : c->query,
			      placement ? fleet_placed_drop : drop);
	if (placement)
		r |= buf_printf(&b, "Agentic-Placement: %s\r\nContent-Length: %u\r\nConnection: "
				"close\r\n\r\n", placement, c->body_len) |
		     buf_append(&b, c->body, c->body_len);
	else
		r |= buf_append(&b, "\r\n", 2) | buf_append(&b, c->rbuf + c->roff, c->rlen - c->roff);
	r = r < 0 ? ERR_LIMIT : fleet_relay_out(c->fd, node, addr, pre, b.len, true);
	explicit_bzero(pre, b.len); /* a body may hold env values, a header a token */
	if (r == 0) /* closed at the loop's next call, unanswered: the relay answers */
		c->broken = c->kick = any_kick = true;
	return r;
}

static void listener_watch(void)
{
	struct epoll_event ev = { .events = EPOLLIN };

	ev.data.u64 = (uint64_t)C.tag_listen << 32;
	epoll_ctl(C.epfd, EPOLL_CTL_ADD, C.listen_fd, &ev);
}

int e2b_conn_listen(char *err, size_t err_size)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, one = 1;

	if (!C.cfg->e2b_listen[0])
		return 0;
	if (config_listen_addr(C.cfg->e2b_listen, &ss, &len) != 0) {
		snprintf(err, err_size, "e2b_listen %s is not HOST:PORT", C.cfg->e2b_listen);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (ss.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (fd < 0 || bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 512) != 0) {
		snprintf(err, err_size, "cannot listen on e2b_listen %s: %s", C.cfg->e2b_listen,
			 strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	C.listen_fd = fd;
	listener_watch();
	log_info("e2b listening", "address=%s max_connections=%u", log_q(C.cfg->e2b_listen),
		 C.n);
	return 0;
}

void e2b_conn_shutdown(void)
{
	C.stopping = true;
	if (C.listen_fd >= 0) {
		epoll_ctl(C.epfd, EPOLL_CTL_DEL, C.listen_fd, NULL);
		close(C.listen_fd);
		C.listen_fd = -1;
	}
}

bool e2b_answering(void)
{
	for (uint32_t i = 0; i < C.n; i++) {
		const struct e2b_conn *c = &C.conns[i];

		if (c->fd >= 0 && !c->closing && (c->out_len || (c->rx == RX_DONE && c->tx == TX_NONE)))
			return true;
	}
	return false;
}

/* A limit c is past, or NULL. */
static const char *overdue(const struct e2b_conn *c, int64_t now)
{
	if (c->closing)
		return now - c->idle_since > 2000 ? "closed" : NULL;
	if (c->rx == RX_HEAD && !c->got_byte && c->tx == TX_NONE)
		return now - c->idle_since > LIMIT_E2B_IDLE_MS ? "idle" : NULL;
	if (c->rx == RX_HEAD && c->tx == TX_NONE && now - c->rx_since > LIMIT_E2B_HEAD_MS)
		return "head_timeout";
	if (c->rx == RX_BODY && c->tx == TX_NONE && now - c->rx_since > LIMIT_E2B_BODY_MS)
		return "body_timeout";
	if (c->rx == RX_STREAM && !c->paused && now - c->rx_since > LIMIT_E2B_STALL_MS)
		return "body_stalled";
	if (c->out_len && now - c->tx_since > LIMIT_E2B_STALL_MS)
		return "client_not_reading";
	return NULL;
}

void e2b_conn_tick(int64_t now)
{
	static int64_t checked;
	bool kicks = any_kick, check = now - checked >= 250;

	if (accept_paused_until && now >= accept_paused_until && C.listen_fd >= 0) {
		accept_paused_until = 0;
		listener_watch();
	}
	if (!kicks && !check)
		return;
	any_kick = false;
	if (check)
		checked = now;
	for (uint32_t i = 0; i < C.n; i++) {
		struct e2b_conn *c = &C.conns[i];
		const char *why;

		if (c->fd < 0)
			continue;
		if (check && !c->broken && (why = overdue(c, now))) {
			if (why[0] != 'i' && why[0] != 'c')
				log_info("e2b connection cut", "reason=%s", log_q(why));
			c->broken = true;
		}
		settle(c);
	}
}

int64_t e2b_conn_next_deadline(void)
{
	return any_kick ? clock_mono_ms() : INT64_MAX;
}
