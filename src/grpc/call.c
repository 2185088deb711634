/* call.c: gRPC calls over an h2 connection, for both sides: message reassembly and unpacking,
 * the send queue, headers and trailers, deadlines, and the connection's non-blocking I/O. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/be.h"
#include "grpc/grpc_internal.h"

/* ---- call records ---- */

static int is_server(const struct grpc_call *call)
{
	return call->conn->h2.role == H2_SERVER;
}

/* Frees the call's slot, after telling the handler (once) how it ended. */
static void call_end(struct grpc_call *call, int status, const char *message)
{
	struct grpc_conn *c = call->conn;
	struct grpc_env *env = c->env;
	const struct grpc_method *m = call->method;
	int started = call->started;
	char kept[1024];

	if (!call->stream)
		return;
	if (!message)
		message = grpc_meta_message(call, kept, sizeof(kept));
	call->stream->user = NULL;
	grpc_buf_give(call->bufs, &call->rxb);
	grpc_buf_give(call->bufs, &call->txb);
	call->rx.buf = NULL;
	if (started && m && m->handler.on_done)
		m->handler.on_done(call, status, message);
	grpc_buf_give(call->bufs, &call->meta);
	call->stream = NULL;
	ASSERT(c->ncalls > 0 && env->calls > 0 && (!call->own || c->nown > 0));
	c->ncalls--;
	if (call->own)
		c->nown--;
	env->calls--;
}

/* ---- sending ---- */

/* A unary method's answer waits for the end of its request, so that a second request message
 * is refused (INTERNAL) instead of the call ending OK on the first. */
static int answer_waits(const struct grpc_call *call)
{
	return call->started && call->method->flags == 0 && call->msgs_in && !call->remote_done &&
	       !call->extra_request;
}

/* Ends our side once the queue is empty: trailers (server) or END_STREAM (client). */
static void send_end(struct grpc_call *call)
{
	struct h2_stream *s = call->stream;
	struct h2_conn *h2 = &call->conn->h2;
	int r;

	if (is_server(call)) {
		if (answer_waits(call))
			return;
		r = call->hdrs_sent ? grpc_send_trailers(call) : grpc_send_response_headers(call, 1);
		if (r == -EAGAIN)
			return;
		call->end_sent = 1;
		if (r < 0) {
			h2_stream_reset(h2, s, H2_INTERNAL_ERROR);
			return;
		}
		/* The client may still be sending: stop it, the answer is final. */
		if (call->stream == s && !s->remote_closed)
			h2_stream_reset(h2, s, H2_NO_ERROR);
		return;
	}
	if (h2_stream_send_data(h2, s, NULL, 0, 1) == 0 && s->local_closed)
		call->end_sent = 1;
}

static uint32_t prefix_len(const uint8_t *p)
{
	return be32_get(p + 1);
}

/* Moves tx_head to the last message boundary at or before tx_off: the queue from tx_head on
 * is a run of whole length-prefixed messages. */
static void tx_head_advance(struct grpc_call *call)
{
	const uint8_t *p = call->txb->data;

	while (call->tx_head + 5 <= call->tx_len &&
	       call->tx_head + 5 + prefix_len(p + call->tx_head) <= call->tx_off)
		call->tx_head += 5 + prefix_len(p + call->tx_head);
}

/* Drops the queued messages not begun on the wire. A message already partly sent stays, to
 * be finished: the peer would read a cut message followed by trailers as a broken stream. */
static void tx_drop_unsent(struct grpc_call *call)
{
	if (!call->txb)
		return;
	tx_head_advance(call);
	call->tx_len = call->tx_head < call->tx_off
			       ? call->tx_head + 5 + prefix_len(call->txb->data + call->tx_head)
			       : call->tx_off;
	if (call->tx_off == call->tx_len) {
		grpc_buf_give(call->bufs, &call->txb);
		call->tx_off = call->tx_len = call->tx_head = 0;
	}
}

/* may_callback: 0 when called from the handler's own grpc_call_* call, so on_writable never
 * runs nested inside the handler. */
static void pump(struct grpc_call *call, int may_callback)
{
	struct h2_stream *s = call->stream;
	struct h2_conn *h2;

	while (call->stream == s && s) {
		h2 = &call->conn->h2;
		if (call->tx_len > call->tx_off) {
			long n;

			if (is_server(call) && !call->hdrs_sent) {
				int r = grpc_send_response_headers(call, 0);

				if (r == -EAGAIN)
					return;
				if (r < 0) {
					h2_stream_reset(h2, s, H2_INTERNAL_ERROR);
					return;
				}
				call->hdrs_sent = 1;
			}
			n = h2_stream_send_data(h2, s, call->txb->data + call->tx_off,
						call->tx_len - call->tx_off, 0);
			if (n <= 0)
				return;
			call->tx_off += (uint32_t)n;
			if (call->tx_off < call->tx_len)
				return;
			grpc_buf_give(call->bufs, &call->txb);
			call->tx_off = call->tx_len = call->tx_head = 0;
		}
		if (call->want_writable && may_callback && !call->finishing &&
		    call->method->handler.on_writable) {
			call->want_writable = 0;
			call->method->handler.on_writable(call);
			continue;
		}
		if (call->finishing && !call->end_sent)
			send_end(call);
		return;
	}
}

void grpc_call_pump(struct grpc_call *call)
{
	pump(call, 1);
}

int grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct grpc_env *env = call->conn->env;
	size_t size = protobuf_c_message_get_packed_size(msg);
	uint8_t *p;

	if (call->finishing || !call->stream)
		return ERR_STATE;
	if (size > env->max_message)
		return ERR_LIMIT;
	if (call->txb) {
		if (call->tx_off == call->tx_len) {
			call->tx_off = call->tx_len = call->tx_head = 0;
		} else if (size + 5 > call->txb->cap - call->tx_len) {
			tx_head_advance(call);
			if (call->tx_head &&
			    size + 5 <= call->txb->cap - (call->tx_len - call->tx_head)) {
				memmove(call->txb->data, call->txb->data + call->tx_head,
					call->tx_len - call->tx_head);
				call->tx_len -= call->tx_head;
				call->tx_off -= call->tx_head;
				call->tx_head = 0;
			} else {
				call->want_writable = 1;
				return -EAGAIN;
			}
		}
	} else {
		call->txb = grpc_buf_take(call->bufs, size + 5 <= GRPC_SMALL_MESSAGE ? GRPC_BUF_SMALL
										: GRPC_BUF_LARGE);
		if (!call->txb)
			return ERR_LIMIT;
	}
	p = call->txb->data + call->tx_len;
	p[0] = 0;
	be32_put(p + 1, (uint32_t)size);
	protobuf_c_message_pack(msg, p + 5);
	call->tx_len += (uint32_t)(size + 5);
	/* want_writable stays: a send that fits does not settle one refused before it (agenticd's
	 * output acks share the Connect stream with an exec's stdin chunks) */
	pump(call, 0);
	grpc_conn_kick(call->conn);
	return 0;
}

int grpc_call_set_headers(struct grpc_call *call, const struct grpc_md *md, size_t n)
{
	if (!call->stream || !is_server(call) || call->hdrs_sent || call->finishing)
		return ERR_STATE;
	return grpc_meta_add_md(call, META_HEADER, md, n);
}

int grpc_call_finish(struct grpc_call *call, int status, const char *message,
		     const struct grpc_md *md, size_t n)
{
	if (!call->stream || call->finishing)
		return ERR_STATE;
	if (!is_server(call)) {
		if (status != GRPC_OK) {
			grpc_call_fail(call, status, message);
			return 0;
		}
		call->finishing = 1;
		pump(call, 0);
		grpc_conn_kick(call->conn);
		return 0;
	}
	call->finishing = 1;
	call->status = status;
	call->have_status = 1;
	/* Metadata and message are best effort: without a meta buffer the status still goes. */
	if (message && *message)
		grpc_meta_add(call, META_MESSAGE, "", 0, message, strnlen(message, 1024));
	if (n)
		grpc_meta_add_md(call, META_TRAILER, md, n);
	pump(call, 0);
	grpc_conn_kick(call->conn);
	return 0;
}

void grpc_call_fail(struct grpc_call *call, int status, const char *message)
{
	struct h2_stream *s = call->stream;

	if (!s)
		return;
	if (is_server(call)) {
		if (call->finishing) {
			/* trailers were already decided; only cut the stream */
			h2_stream_reset(&call->conn->h2, s, H2_CANCEL);
			return;
		}
		tx_drop_unsent(call);
		grpc_call_finish(call, status, message, NULL, 0);
		return;
	}
	call->status = status;
	call->have_status = 1;
	if (message && *message)
		grpc_meta_add(call, META_MESSAGE, "", 0, message, strnlen(message, 1024));
	h2_stream_reset(&call->conn->h2, s, H2_CANCEL);
	grpc_conn_kick(call->conn);
}

void grpc_call_note_deadline(struct grpc_call *call, int64_t deadline)
{
	call->deadline = deadline;
	if (deadline < call->conn->env->next_deadline)
		call->conn->env->next_deadline = deadline;
}

/* ---- accessors ---- */

const char *grpc_call_md(const struct grpc_call *call, const char *key, size_t *len)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < call->nmd; i++) {
		const struct h2_field *f = &call->md[i];

		if (f->name_len == klen && memcmp(f->name, key, klen) == 0) {
			if (len)
				*len = f->value_len;
			return f->value;
		}
	}
	return NULL;
}

long grpc_call_md_bin(const struct grpc_call *call, const char *key, void *out, size_t cap)
{
	size_t len;
	const char *v = grpc_call_md(call, key, &len);

	if (!v)
		return -ENOENT;
	return grpc_base64_decode(v, len, out, cap);
}

const struct grpc_peer *grpc_call_peer(const struct grpc_call *call)
{
	return &call->conn->peer;
}

const struct grpc_method *grpc_call_method(const struct grpc_call *call)
{
	return call->method;
}

struct arena *grpc_call_arena(struct grpc_call *call)
{
	return &call->conn->env->arena;
}

void grpc_call_set_user(struct grpc_call *call, void *user)
{
	call->user = user;
}

void *grpc_call_user(const struct grpc_call *call)
{
	return call->user;
}

void *grpc_call_app(struct grpc_call *call)
{
	return call->app;
}

/* ---- receiving ---- */

static void deliver(struct grpc_call *call, const uint8_t *data, uint32_t len)
{
	struct grpc_env *env = call->conn->env;
	const struct grpc_method *m = call->method;
	int server = is_server(call);
	unsigned many = server ? GRPC_CLIENT_STREAMING : GRPC_SERVER_STREAMING;
	ProtobufCMessage *msg;

	if (!(m->flags & many) && call->msgs_in >= 1) {
		grpc_call_fail(call, GRPC_INTERNAL, server ? "more than one request message for a "
						     "unary method" : "more than one response message for "
						     "a unary method");
		return;
	}
	arena_reset(&env->arena);
	env->arena_full = 0;
	msg = protobuf_c_message_unpack(server ? m->request : m->response, &env->alloc, len, data);
	if (!msg) {
		arena_reset(&env->arena);
		grpc_call_fail(call, env->arena_full ? GRPC_RESOURCE_EXHAUSTED : GRPC_INTERNAL,
			       env->arena_full ? "message too large once unpacked"
					       : "cannot parse the message");
		return;
	}
	call->msgs_in++;
	if (m->handler.on_message)
		m->handler.on_message(call, msg);
	arena_reset(&env->arena);
}

void grpc_call_remote_done(struct grpc_call *call)
{
	const struct grpc_method *m = call->method;

	call->remote_done = 1;
	if (call->rx.hdr_len) {
		grpc_call_fail(call, GRPC_INTERNAL, "the stream ended inside a message");
		return;
	}
	if (!is_server(call))
		return;
	if (call->finishing) {
		pump(call, 0); /* an answer that waited for the request's end */
		return;
	}
	if (!(m->flags & GRPC_CLIENT_STREAMING) && call->msgs_in == 0) {
		grpc_call_fail(call, GRPC_INTERNAL, "no request message for a unary method");
		return;
	}
	if (m->handler.on_half_close)
		m->handler.on_half_close(call);
}

/* A unary call answered but not yet ended got more request bytes: a second message. The
 * answer turns INTERNAL and goes now; a response message begun on the wire is finished. */
static void refuse_extra_request(struct grpc_call *call)
{
	static const char why[] = "more than one request message for a unary method";

	call->extra_request = 1;
	call->status = GRPC_INTERNAL;
	tx_drop_unsent(call);
	grpc_meta_drop(call, META_MESSAGE);
	grpc_meta_add(call, META_MESSAGE, "", 0, why, sizeof(why) - 1);
	pump(call, 0);
}

static void h2_on_data(void *ctx, struct h2_conn *h2, struct h2_stream *s, const uint8_t *p,
		       size_t n, unsigned flags)
{
	struct grpc_call *call = s->user;
	struct grpc_env *env;
	uint32_t max;

	if (!call)
		return;
	env = call->conn->env;
	max = call->conn->max_rx ? call->conn->max_rx : env->max_message;
	while (n && call->stream == s) {
		const uint8_t *msg;
		uint32_t len;
		char why[128];

		if (call->finishing && is_server(call)) {
			if (answer_waits(call))
				refuse_extra_request(call);
			return; /* the answer is decided: what the client still sends is dropped */
		}
		switch (grpc_rx_feed(&call->rx, &p, &n, max, &msg, &len)) {
		case GRPC_RX_MORE:
			break;
		case GRPC_RX_NEED_BUF:
			call->rxb = grpc_buf_take(call->bufs, len <= GRPC_SMALL_MESSAGE ? GRPC_BUF_SMALL
										   : GRPC_BUF_LARGE);
			if (!call->rxb) {
				grpc_call_fail(call, GRPC_RESOURCE_EXHAUSTED,
					       "no message buffer free: try again later");
				return;
			}
			call->rx.buf = call->rxb->data;
			break;
		case GRPC_RX_TOO_BIG:
			snprintf(why, sizeof(why), "message of %u bytes is over the limit of %u",
				 len, max);
			grpc_call_fail(call, GRPC_RESOURCE_EXHAUSTED, why);
			return;
		case GRPC_RX_COMPRESSED:
			grpc_call_fail(call, GRPC_UNIMPLEMENTED, "compressed messages are not "
								 "supported");
			return;
		case GRPC_RX_MESSAGE:
			deliver(call, msg, len);
			if (call->stream != s)
				return;
			grpc_buf_give(call->bufs, &call->rxb);
			call->rx.buf = NULL;
			break;
		}
	}
	if ((flags & H2_END_STREAM) && call->stream == s)
		grpc_call_remote_done(call);
}

/* The status a client sees from an HTTP status that is not 200 (gRPC's http-grpc mapping). */
static int http_status_to_grpc(const char *v, size_t len)
{
	if (len != 3)
		return GRPC_UNKNOWN;
	if (memcmp(v, "400", 3) == 0)
		return GRPC_INTERNAL;
	if (memcmp(v, "401", 3) == 0)
		return GRPC_UNAUTHENTICATED;
	if (memcmp(v, "403", 3) == 0)
		return GRPC_PERMISSION_DENIED;
	if (memcmp(v, "404", 3) == 0)
		return GRPC_UNIMPLEMENTED;
	if (memcmp(v, "429", 3) == 0 || memcmp(v, "502", 3) == 0 || memcmp(v, "503", 3) == 0 ||
	    memcmp(v, "504", 3) == 0)
		return GRPC_UNAVAILABLE;
	return GRPC_UNKNOWN;
}

/* Client: a response header list or trailers. */
static void client_headers(struct grpc_call *call, const struct h2_field *f, size_t n,
			   unsigned flags)
{
	struct h2_stream *s = call->stream;
	const struct grpc_method *m = call->method;
	const char *v;
	size_t len;
	uint64_t code;
	char num[12], msg[1024];

	call->md = f;
	call->nmd = n;
	if (!(flags & H2_TRAILERS)) {
		v = grpc_call_md(call, ":status", &len);
		if (!v || len != 3 || memcmp(v, "200", 3) != 0) {
			call->md = NULL;
			call->nmd = 0;
			grpc_call_fail(call, v ? http_status_to_grpc(v, len) : GRPC_INTERNAL,
				       "the server's HTTP status is not 200");
			return;
		}
		if (!(flags & H2_END_STREAM)) {
			call->started = 1;
			if (m->handler.on_start)
				m->handler.on_start(call);
			if (call->stream == s) {
				call->md = NULL;
				call->nmd = 0;
			}
			return;
		}
	}
	if (!(flags & H2_END_STREAM)) {
		call->md = NULL;
		call->nmd = 0;
		return;
	}
	/* trailers, or a trailers-only response */
	v = grpc_call_md(call, "grpc-status", &len);
	if (!v || len == 0 || len >= sizeof(num)) {
		call->status = GRPC_INTERNAL;
	} else {
		memcpy(num, v, len);
		num[len] = '\0';
		call->status = parse_u64(num, 1000, &code) == 0 ? (int)code : GRPC_UNKNOWN;
	}
	call->have_status = 1;
	msg[0] = '\0';
	v = grpc_call_md(call, "grpc-message", &len);
	if (v) {
		if (len >= sizeof(msg))
			len = sizeof(msg) - 1;
		memcpy(msg, v, len);
		msg[len] = '\0';
		grpc_percent_decode(msg);
	}
	if (call->rx.hdr_len) {
		call->status = GRPC_INTERNAL;
		snprintf(msg, sizeof(msg), "the stream ended inside a message");
	}
	/* The call ends here, trailers readable in on_done; the stream closes after. */
	call_end(call, call->status, msg[0] ? msg : NULL);
	if (s->id && !s->dead && !s->local_closed)
		h2_stream_reset(&call->conn->h2, s, H2_NO_ERROR);
}

static void h2_on_headers(void *ctx, struct h2_conn *h2, struct h2_stream *s,
			  const struct h2_field *f, size_t n, unsigned flags)
{
	struct grpc_conn *c = ctx;
	struct grpc_call *call = s->user;

	if (h2->role == H2_SERVER) {
		if (!call && !(flags & H2_TRAILERS)) {
			call = &c->calls[s - h2->streams];
			memset(call, 0, sizeof(*call));
			call->conn = c;
			call->bufs = c->env;
			call->stream = s;
			s->user = call;
			c->ncalls++;
			c->env->calls++;
			c->env->dispatch(c, call, f, n, flags);
			return;
		}
		if (call && (flags & H2_END_STREAM) && call->stream == s)
			grpc_call_remote_done(call);
		return;
	}
	if (call)
		client_headers(call, f, n, flags);
}

static void h2_on_close(void *ctx, struct h2_conn *h2, struct h2_stream *s, uint32_t code,
			unsigned flags)
{
	struct grpc_call *call = s->user;
	int status;
	char why[96];

	if (!call)
		return;
	if (call->have_status) {
		status = call->status;
		why[0] = '\0';
	} else if (is_server(call)) {
		status = GRPC_CANCELLED;
		snprintf(why, sizeof(why), "the client cancelled the call");
	} else if (code == H2_REFUSED_STREAM) {
		status = GRPC_UNAVAILABLE;
		snprintf(why, sizeof(why), "the server refused the stream");
	} else if (code == H2_CANCEL) {
		status = GRPC_CANCELLED;
		snprintf(why, sizeof(why), "the server cancelled the call");
	} else {
		status = GRPC_INTERNAL;
		snprintf(why, sizeof(why), "stream reset (HTTP/2 error %u)", code);
	}
	call_end(call, status, why[0] ? why : NULL);
}

const struct h2_callbacks grpc_h2_callbacks = { h2_on_headers, h2_on_data, h2_on_close };

/* ---- the connection's I/O ---- */

void grpc_conn_start(struct grpc_conn *c, struct grpc_env *env, enum h2_role role, int fd,
		     uint32_t max_streams, uint64_t tag)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT, .data.u64 = tag };

	c->env = env;
	c->fd = fd;
	c->tag = tag;
	c->born = clock_mono_ms();
	c->closing = 0;
	c->ncalls = 0;
	c->nown = 0;
	c->reserved = 0;
	c->other_streams = 0;
	c->max_rx = 0;
	memset(c->calls, 0, sizeof(c->calls));
	h2_conn_init(&c->h2, role, max_streams, &grpc_h2_callbacks, c, env->scratch);
	c->events = ev.events;
	if (epoll_ctl(env->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		c->closing = 1;
}

void grpc_conn_teardown(struct grpc_conn *c, int status)
{
	c->closing = 1;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
		struct grpc_call *call = &c->calls[i];

		if (call->stream) {
			call->status = status;
			call->have_status = 1;
			call_end(call, status, status == GRPC_UNAVAILABLE ? "connection lost"
									 : "the client went away");
		}
	}
	if (c->fd >= 0) {
		struct buf *out = h2_conn_out(&c->h2);

		/* GOAWAY before closing, best effort: the socket may be gone or full */
		h2_conn_goaway(&c->h2, H2_NO_ERROR);
		if (out->len)
			(void)!send(c->fd, out->data, out->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		epoll_ctl(c->env->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->fd = -1;
	}
}

static void conn_arm(struct grpc_conn *c);

/* After a handler queued output from outside this connection's own I/O (another fd's event,
 * a timer), asking for EPOLLOUT makes the loop write it. */
void grpc_conn_kick(struct grpc_conn *c)
{
	if (c->fd >= 0)
		conn_arm(c);
}

static void pump_all(struct grpc_conn *c)
{
	if (!c->ncalls)
		return;
	for (uint32_t i = 0; i < H2_MAX_STREAMS; i++) {
		struct grpc_call *call = &c->calls[i];

		if (call->stream && (call->tx_len > call->tx_off || call->want_writable ||
				     (call->finishing && !call->end_sent)))
			grpc_call_pump(call);
	}
}

/* Writes what h2 holds, refilling from the calls as room frees. 0, or -1 on a dead socket. */
static int conn_flush(struct grpc_conn *c)
{
	struct buf *out = h2_conn_out(&c->h2);

	for (int rounds = 0; out->len && rounds < 64; rounds++) {
		ssize_t w = send(c->fd, out->data, out->len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0;
			return -1;
		}
		h2_conn_sent(&c->h2, (size_t)w);
		pump_all(c);
	}
	return 0;
}

static void conn_arm(struct grpc_conn *c)
{
	struct buf *out = h2_conn_out(&c->h2);
	uint32_t want = 0;
	struct epoll_event ev;

	/* Always read, even with output pending: two peers that both stopped reading while their
	 * output is blocked would wait for each other forever. What a peer can make us hold is
	 * bounded anyway: DATA by the windows (our WINDOW_UPDATEs wait for output room), owed
	 * control frames by h2's counters, responses by the call and buffer pools. */
	if (!c->closing)
		want |= EPOLLIN;
	if (out->len)
		want |= EPOLLOUT;
	if (want == c->events)
		return;
	ev.events = want;
	ev.data.u64 = c->tag;
	if (epoll_ctl(c->env->epfd, EPOLL_CTL_MOD, c->fd, &ev) == 0)
		c->events = want;
}

void grpc_call_flush(struct grpc_call *call)
{
	struct grpc_conn *c = call->conn;
	struct buf *out = h2_conn_out(&c->h2);
	ssize_t w;

	if (c->fd < 0 || !out->len)
		return;
	w = send(c->fd, out->data, out->len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w > 0)
		h2_conn_sent(&c->h2, (size_t)w);
	conn_arm(c);
}

/* A client whose write failed: the server may have answered and closed at once (as it does
 * after refusing a guest), its answer still unread here. Without this a refusal that raced our
 * SETTINGS ACK would read as "connection lost". What is left is read and fed, nothing more is
 * written; a server's peer that went away gets nothing of this. */
static void drain_answer(struct grpc_conn *c)
{
	if (c->h2.role != H2_CLIENT)
		return;
	c->closing = 1; /* no new call on this connection from a handler run meanwhile */
	for (int rounds = 0; rounds < 16; rounds++) {
		ssize_t r = read(c->fd, c->env->rdbuf, GRPC_READ_BYTES);

		if (r <= 0)
			return;
		h2_conn_clock(&c->h2, clock_mono_ms());
		if (h2_conn_feed(&c->h2, c->env->rdbuf, (size_t)r) < 0)
			return;
	}
}

int grpc_conn_io(struct grpc_conn *c, uint32_t events)
{
	int lost = c->h2.role == H2_SERVER ? GRPC_CANCELLED : GRPC_UNAVAILABLE;

	if (c->fd < 0)
		return 1;
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		for (int rounds = 0; rounds < 16 && !c->closing; rounds++) {
			ssize_t r;
			int fr;

			r = read(c->fd, c->env->rdbuf, GRPC_READ_BYTES);
			if (r < 0 && (errno == EAGAIN || errno == EINTR))
				break;
			if (r <= 0) {
				grpc_conn_teardown(c, lost);
				return 1;
			}
			h2_conn_clock(&c->h2, clock_mono_ms());
			fr = h2_conn_feed(&c->h2, c->env->rdbuf, (size_t)r);
			if (fr == H2_ERR_PREFACE) {
				log_info("grpc connection closed", "reason=%s fd=%d",
					 "not_http2", c->fd);
				/* RFC 9113 §3.4: a bad preface is a PROTOCOL_ERROR */
				h2_conn_goaway(&c->h2, H2_PROTOCOL_ERROR);
				grpc_conn_teardown(c, lost);
				return 1;
			}
			if (fr < 0)
				c->closing = 1;
			pump_all(c);
			if (conn_flush(c) < 0) {
				drain_answer(c);
				grpc_conn_teardown(c, lost);
				return 1;
			}
			if ((size_t)r < GRPC_READ_BYTES)
				break;
		}
	}
	pump_all(c);
	if (conn_flush(c) < 0) {
		drain_answer(c);
		grpc_conn_teardown(c, lost);
		return 1;
	}
	if ((c->closing || h2_conn_finished(&c->h2)) && h2_conn_out(&c->h2)->len == 0) {
		grpc_conn_teardown(c, lost);
		return 1;
	}
	conn_arm(c);
	return 0;
}

/* Server, at the deadline: what is not on the wire yet is dropped, and the call ends with
 * DEADLINE_EXCEEDED trailers (HEADERS take no flow-control window), after the rest of a message
 * cut on the wire if that goes out within GRPC_DEADLINE_GRACE_MS; if not, or if the trailers
 * find no room, with RST_STREAM CANCEL, its buffers freed then. Waiting longer would wait for
 * window a peer may never grant, and trailers after a cut message read as a broken stream. A
 * status the handler decided is replaced: its answer did not get through. */
static void server_expire(struct grpc_call *call, int64_t now)
{
	struct h2_stream *s = call->stream;
	static const char why[] = "deadline exceeded";

	if (call->expired) {
		h2_stream_reset(&call->conn->h2, s, H2_CANCEL);
		grpc_conn_kick(call->conn);
		return;
	}
	call->expired = 1;
	tx_drop_unsent(call);
	call->status = GRPC_DEADLINE_EXCEEDED;
	call->have_status = 1;
	call->finishing = 1;
	call->want_writable = 0;
	grpc_meta_drop(call, META_MESSAGE);
	grpc_meta_add(call, META_MESSAGE, "", 0, why, sizeof(why) - 1);
	pump(call, 0);
	if (call->stream == s && !call->end_sent)
		grpc_call_note_deadline(call, now + GRPC_DEADLINE_GRACE_MS);
	grpc_conn_kick(call->conn);
}

int grpc_conn_expire(struct grpc_conn *c, int64_t now)
{
	int64_t next = INT64_MAX;

	for (uint32_t i = 0; i < H2_MAX_STREAMS && c->ncalls; i++) {
		struct grpc_call *call = &c->calls[i];

		if (!call->stream || !call->deadline)
			continue;
		if (call->deadline <= now) {
			call->deadline = 0;
			if (is_server(call))
				server_expire(call, now);
			else
				grpc_call_fail(call, GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
		} else if (call->deadline < next) {
			next = call->deadline;
		}
	}
	if (next < c->env->next_deadline)
		c->env->next_deadline = next;
	return grpc_conn_io(c, 0);
}
