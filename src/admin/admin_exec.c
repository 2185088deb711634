/* admin_exec.c: the admin API's exec route (POST /api/v1/containers/NAME/exec) and the client
 * side of its sessions: the two sinks, the upgraded stream (8-byte frames both ways, docs/API.md:
 * "The exec stream") and the chunked NDJSON answer. Their output goes through the queue they
 * share with the gRPC sink (admin_exec_queue, in admin_conn.c): `out`, then a bounded spill
 * file, so a slow client costs disk, never memory, and never blocks the sandbox. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json/json.h"
#include "admin/admin.h"
#include "admin/admin_conn.h"





/* ---- exec sinks: the upgraded stream and NDJSON (docs/API.md: "The exec stream") ---- */

static char line[LIMIT_ADMIN_OUT_BYTES]; /* one NDJSON line or exit object being built */
static char wire[LIMIT_ADMIN_OUT_BYTES + 32]; /* ... as the chunk that carries it */

/* A sink's connection: still in its exec (a connection that left detached its session). */
static struct admin_conn *sink_conn(void *ctx)
{
	struct admin_conn *c = ctx;

	return c && c->phase == AC_EXEC ? c : NULL;
}

static size_t base64(const uint8_t *in, size_t len, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0, i = 0;

	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = tab[(v >> 6) & 63];
		out[o++] = tab[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	return o;
}

/* The command's end as a JSON object (the exit frame's payload, NDJSON's last line). */
static void exit_json(struct buf *b, int32_t exit_code, int64_t duration_ms, const char *error,
		      const char *transcript_error)
{
	struct json_writer w;

	json_writer_init(&w, b);
	json_obj_begin(&w);
	json_key(&w, "exit_code");
	json_int_write(&w, exit_code);
	json_key(&w, "duration_ms");
	json_int_write(&w, duration_ms);
	if (error && *error) {
		json_key(&w, "error");
		json_str_write(&w, error);
	}
	if (transcript_error) {
		json_key(&w, "transcript_error");
		json_str_write(&w, transcript_error);
	}
	json_obj_end(&w);
	json_writer_finish(&w);
}

/* A frame's head and payload queued, as both the stream and a gRPC call carry output. */
static int queue_frame(struct admin_conn *c, enum frame_type type, const void *data, size_t len)
{
	uint8_t h[FRAME_HEAD_BYTES];
	int r;

	frame_head_put(h, type, (uint32_t)len);
	r = admin_exec_queue(c, h, sizeof(h));
	if (r == 0)
		r = admin_exec_queue(c, data, len);
	return r;
}

/* One chunk of an NDJSON answer queued. */
static int queue_chunk(struct admin_conn *c, const void *data, size_t len, bool last)
{
	struct buf b;

	buf_init(&b, wire, sizeof(wire));
	if (http_chunk_write(&b, data, len) != 0 || (last && http_chunk_end(&b) != 0))
		return ERR_LIMIT;
	return admin_exec_queue(c, b.data, b.len);
}

int admin_exec_frame_output(void *ctx, int stream, const void *data, size_t len)
{
	struct admin_conn *c = sink_conn(ctx);
	int r;

	if (!c)
		return -ENOTCONN;
	r = queue_frame(c, stream ? FRAME_STDERR : FRAME_STDOUT, data, len);
	if (r != 0)
		admin_exec_drop(c, r);
	admin_flush(c);
	return r;
}

static int ndjson_output(void *ctx, int stream, const void *data, size_t len)
{
	struct admin_conn *c = sink_conn(ctx);
	const uint8_t *p = data;
	int r = 0;

	if (!c)
		return -ENOTCONN;
	/* one line per piece, each small enough for `line` */
	while (len && r == 0) {
		size_t take = len < 6144 ? len : 6144, n;

		n = (size_t)snprintf(line, sizeof(line), "{\"stream\":\"%s\",\"data\":\"",
				     stream ? "stderr" : "stdout");
		n += base64(p, take, line + n);
		memcpy(line + n, "\"}\n", 3);
		r = queue_chunk(c, line, n + 3, false);
		p += take;
		len -= take;
	}
	if (r != 0)
		admin_exec_drop(c, r);
	admin_flush(c);
	return r;
}

static void stream_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
			const char *transcript_error)
{
	struct admin_conn *c = sink_conn(ctx);
	struct buf b;

	if (!c)
		return;
	buf_init(&b, line, sizeof(line));
	exit_json(&b, exit_code, duration_ms, error, transcript_error);
	c->exec = -1;
	if (queue_frame(c, FRAME_EXIT, b.data, b.len) != 0)
		c->keep_alive = false;
	admin_flush(c);
}

static void ndjson_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
			const char *transcript_error)
{
	struct admin_conn *c = sink_conn(ctx);
	struct buf b;

	if (!c)
		return;
	buf_init(&b, line, sizeof(line) - 1);
	exit_json(&b, exit_code, duration_ms, error, transcript_error);
	line[b.len] = '\n';
	c->exec = -1;
	if (queue_chunk(c, line, b.len + 1, true) != 0)
		c->keep_alive = false;
	admin_flush(c);
}

/* n payload bytes of a resize frame (whose last piece is this when last): the size goes to
 * the session once the frame is whole; a frame not of 4 bytes, or a session without a tty,
 * changes nothing. */
static void resize_take(struct admin_conn *c, const uint8_t *p, uint32_t n, bool last)
{
	for (uint32_t i = 0; i < n; i++) {
		if (c->resize_have < sizeof(c->resize))
			c->resize[c->resize_have] = p[i];
		if (c->resize_have <= sizeof(c->resize))
			c->resize_have++;  /* past 4: too long, ignored */
	}
	if (!last)
		return;
	if (c->resize_have == sizeof(c->resize))
		exec_resize(c->exec, (uint16_t)(c->resize[0] << 8 | c->resize[1]),
			    (uint16_t)(c->resize[2] << 8 | c->resize[3]));
	c->resize_have = 0;
}

/* Upgraded: stdin frames from the client, handed on as the session takes them, and resize
 * frames; frames of other types are skipped, so clients may add some. */
static void exec_read_stdin(struct admin_conn *c)
{
	while (c->exec >= 0 && c->roff < c->rlen) {
		uint32_t avail = c->rlen - c->roff, n;
		size_t took;
		bool in;

		if (!frame_reader_open(&c->fr)) {
			c->roff += (uint32_t)frame_reader_head(&c->fr, c->rbuf + c->roff, avail);
			if (!frame_reader_open(&c->fr))
				break;
			if (c->fr.left == 0) {
				if (frame_reader_type(&c->fr) == FRAME_STDIN)
					exec_stdin(c->exec, "", 0, true); /* stdin ends */
				frame_reader_take(&c->fr, 0);
			}
			continue;
		}
		in = frame_reader_type(&c->fr) == FRAME_STDIN;
		n = c->fr.left < avail ? c->fr.left : avail;
		if (frame_reader_type(&c->fr) == FRAME_RESIZE)
			resize_take(c, c->rbuf + c->roff, n, n == c->fr.left);
		took = in ? exec_stdin(c->exec, c->rbuf + c->roff, n, false) : n;
		if (took == 0)
			return; /* a chunk is in flight: the sink's stdin_taken comes back */
		c->roff += (uint32_t)took;
		frame_reader_take(&c->fr, (uint32_t)took);
	}
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
}

static void stream_stdin_taken(void *ctx)
{
	struct admin_conn *c = sink_conn(ctx);

	if (!c || !c->upgraded)
		return;
	exec_read_stdin(c);
	if (c->roff == c->rlen)
		admin_watch(c, EPOLLIN | (c->out_off < c->out_len ? EPOLLOUT : 0));
}

const struct exec_sink_ops admin_exec_stream_ops = {
	.client = "stream",
	.output = admin_exec_frame_output,
	.done = stream_done,
	.stdin_taken = stream_stdin_taken,
};

const struct exec_sink_ops admin_exec_ndjson_ops = {
	.client = "ndjson",
	.output = ndjson_output,
	.done = ndjson_done,
	.stdin_taken = NULL,
};

void admin_exec_event(struct admin_conn *c, uint32_t events)
{
	if (events & EPOLLOUT)
		admin_flush(c);
	if (c->phase != AC_EXEC || c->fd < 0)
		return;
	if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	if (c->upgraded && c->roff < c->rlen)
		return; /* stdin waits for the session */
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf, sizeof(c->rbuf), 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0 && c->upgraded && c->exec >= 0 && !(events & (EPOLLHUP | EPOLLERR))) {
			/* half-close: stdin ends, output goes on */
			exec_stdin(c->exec, "", 0, true);
			admin_watch(c, c->out_off < c->out_len ? EPOLLOUT : 0);
			return;
		}
		if (n <= 0 || !c->upgraded) {
			if (n > 0)
				continue; /* nothing more is read on an NDJSON exec */
			admin_conn_close(c);
			return;
		}
		c->roff = 0;
		c->rlen = (uint32_t)n;
		exec_read_stdin(c);
		if (c->roff < c->rlen) {
			admin_watch(c, c->out_off < c->out_len ? EPOLLOUT : 0);
			return;
		}
	}
}

/* ---- exec: the route ---- */

int admin_exec_refused(const struct sandbox *sb, int x, struct request_error *e)
{
	e->status = 409;
	e->code = "not_ready";
	if (x == 0 && sb->state == SB_READY && agent_of(sb)->ready)
		return 0;
	if (x == 0) {
		snprintf(e->message, sizeof(e->message), "%s", sb->state == SB_READY
			 ? "the sandbox's agent is not connected (yet)" : "the sandbox is not ready");
	} else if (exec_transcript_error(x)) {
		e->status = 507;
		e->code = "transcript_unwritable";
		snprintf(e->message, sizeof(e->message), "the sandbox's transcript cannot be written "
			 "(%s); no command was started", strerror(-x));
	} else if (x == ERR_STATE) {
		snprintf(e->message, sizeof(e->message), "the sandbox's agent is not connected");
	} else {
		e->status = 503;
		e->code = "busy";
		snprintf(e->message, sizeof(e->message), "the sandbox runs as many commands as it "
			 "may, or its agent cannot take more now");
	}
	return -1;
}

void admin_exec_route(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static const struct http_field stream_fields[] = {
		{ "Content-Type", "application/vnd.agentic.multiplexed-stream" },
		{ "Connection", "Upgrade" },
		{ "Upgrade", "tcp" },
		{ NULL, NULL },
	};
	static const struct http_field ndjson_fields[] = {
		{ "Content-Type", "application/x-ndjson" },
		{ NULL, NULL },
	};
	static struct exec_req er;
	struct request_text t = { c->req.text, 0, sizeof(c->req.text) };
	struct request_error e = { 0 };
	const char *up = http_parser_header(&c->parser, "upgrade");
	const char *conn = http_parser_header(&c->parser, "connection");
	struct exec_sink sink = { &admin_exec_ndjson_ops, c };
	char hstore[256];
	struct buf head;
	int x;

	if (request_exec_parse(&er, &t, c->body, c->body_len, &e) != 0 ||
	    admin_exec_refused(sb, 0, &e) != 0) {
		admin_respond_error(c, e.status, e.code, e.message);
		return;
	}
	c->upgraded = up && strcasecmp(up, "tcp") == 0 && conn && strcasestr(conn, "upgrade");
	if (c->upgraded)
		sink.ops = &admin_exec_stream_ops;
	x = exec_begin(sb, &er, &sink);
	if (x < 0) {
		admin_exec_refused(sb, x, &e);
		admin_respond_error(c, e.status, e.code, e.message);
		return;
	}
	c->exec = x;
	frame_reader_init(&c->fr);
	c->resize_have = 0;
	c->out_off = c->out_len = 0;
	buf_init(&head, hstore, sizeof(hstore));
	if (c->upgraded) {
		c->keep_alive = false;
		http_response_head_write(&head, 101, stream_fields, HTTP_NO_BODY, false);
	} else {
		http_response_head_write(&head, 200, ndjson_fields, HTTP_CHUNKED, false);
	}
	admin_exec_queue(c, head.data, head.len);
	c->phase = AC_EXEC;
	/* bytes after the request are the first stdin frames */
	if (c->upgraded)
		exec_read_stdin(c);
	else
		c->roff = c->rlen = 0;
}
