/* admin_files.c: the admin API's file routes (docs/API.md "Files"), what `agentic cp` uses:
 *   GET /api/v1/containers/NAME/files?path=P   the file's bytes, streamed (chunked)
 *   PUT /api/v1/containers/NAME/files?path=P   the body streamed into the file (parents made)
 * Each is one file operation (agent/fileop.h) run in the sandbox as the workload uid, so what
 * it may read or write is what uid 10001 may there. A GET's head goes out with the first byte
 * (the file is open and regular by then), so a missing file, a directory or a FIFO is a JSON
 * error, never a 200; a failure after it ends the answer without its last chunk. A PUT is
 * dispatched at its head (admin_http.c: the route is streamed) and its body is handed on as
 * the sandbox takes it, never held whole. Below admin_http.c; calls admin_conn.c. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "admin/admin_conn.h"
#include "agent/fileop.h"

/* ---- the path: ?path=, percent-decoded ---- */

/* The query's path parameter, percent-decoded ('+' is a plus) into out. 0 or -EINVAL: absent,
 * empty, too long, a bad escape or a NUL. */
static int query_path(const char *query, char *out, size_t cap)
{
	const char *p = query;
	size_t n = 0;

	while (p && strncmp(p, "path=", 5) != 0)
		p = (p = strchr(p, '&')) ? p + 1 : NULL;
	if (!p)
		return -EINVAL;
	for (p += 5; *p && *p != '&'; p++) {
		int c = (unsigned char)*p, hi, lo;

		if (c == '%') {
			if ((hi = hex_value(p[1])) < 0 || (lo = hex_value(p[2])) < 0)
				return -EINVAL;
			c = hi << 4 | lo;
			p += 2;
		}
		if (c == 0 || n + 1 >= cap)
			return -EINVAL;
		out[n++] = (char)c;
	}
	out[n] = '\0';
	return n ? 0 : -EINVAL;
}

/* The full query of the request (the dispatcher's copy of the target is cut short). */
static const char *full_query(const struct admin_conn *c)
{
	const char *q = strchr(http_parser_str(&c->parser, c->parser.target), '?');

	return q ? q + 1 : "";
}

/* An errno of the sandbox's as the API's status and code. */
static void status_of(int err, int *status, const char **code)
{
	*status = 500;
	*code = "file_error";
	if (err == ENOENT) {
		*status = 404;
		*code = "not_found";
	} else if (err == EACCES || err == EPERM || err == EROFS) {
		*status = 403;
		*code = "forbidden";
	} else if (err == ENOSPC || err == EDQUOT || err == EFBIG) {
		*status = 507;
		*code = "no_space";
	} else if (err == EISDIR || err == ENOTDIR || err == EINVAL || err == ELOOP ||
		   err == ENAMETOOLONG || err == EEXIST) {
		*status = 400;
		*code = "bad_path";
	}
}

static void respond_errno(struct admin_conn *c, int err, const char *message)
{
	char m[LIMIT_FILEOP_MESSAGE_BYTES + 32];
	const char *code;
	int status;

	status_of(err, &status, &code);
	snprintf(m, sizeof(m), "%s", message ? message : strerror(err));
	admin_respond_error(c, status, code, m);
}

/* A fileop_begin that failed, in the words of an exec's refusal where it is one. */
static void respond_begin_error(struct admin_conn *c, const struct sandbox *sb, int x)
{
	struct request_error e = { 0 };

	if (x == -EINVAL) {
		admin_respond_error(c, 400, "bad_request", "path must be 1 to 4095 bytes of UTF-8");
		return;
	}
	admin_exec_refused(sb, x == ERR_LIMIT ? -EAGAIN : x, &e);
	admin_respond_error(c, e.status, e.code, e.message);
}

/* ---- the operation's end, both ways ---- */

/* The operation is over: c flushes its answer (then serves its next request, or closes). */
static void finish(struct admin_conn *c)
{
	c->fileop = -1;
	admin_flush(c);
}

/* ---- GET: the file's bytes ---- */

static struct admin_conn *file_conn(void *ctx)
{
	struct admin_conn *c = ctx;

	return c->phase == AC_FILEOP ? c : NULL;
}

static int queue_head(struct admin_conn *c)
{
	static const struct http_field fields[] = {
		{ "Content-Type", "application/octet-stream" },
		{ NULL, NULL },
	};
	char store[256];
	struct buf b;

	buf_init(&b, store, sizeof(store));
	if (http_response_head_write(&b, 200, fields, HTTP_CHUNKED, !c->keep_alive) != 0)
		return -EIO;
	c->file_head = true;
	return admin_exec_queue(c, b.data, b.len);
}

static int get_data(void *ctx, const void *d, size_t len)
{
	struct admin_conn *c = file_conn(ctx);
	char size[24];
	int r = 0;

	if (!c)
		return -ENOTCONN;
	if (!c->file_head)
		r = queue_head(c);
	snprintf(size, sizeof(size), "%zx\r\n", len);
	if (r == 0)
		r = admin_exec_queue(c, size, strlen(size));
	if (r == 0)
		r = admin_exec_queue(c, d, len);
	if (r == 0)
		r = admin_exec_queue(c, "\r\n", 2);
	if (r == 0)
		admin_flush(c);
	return r;
}

static void get_done(void *ctx, int err, const char *message)
{
	struct admin_conn *c = file_conn(ctx);

	if (!c)
		return;
	if (!err && (c->file_head || queue_head(c) == 0) &&
	    admin_exec_queue(c, "0\r\n\r\n", 5) == 0) {
		finish(c);
		return;
	}
	if (!c->file_head) {
		c->fileop = -1;
			respond_errno(c, err ? err : EIO, message);
		admin_flush(c);
		return;
	}
	/* the head is out: the answer ends without its last chunk, so it cannot pass as whole */
	c->keep_alive = false;
	finish(c);
}

static const struct fileop_sink_ops get_ops = {
	.data = get_data,
	.done = get_done,
};

/* Starts op on c as its AC_FILEOP: 0, or -1 with the refusal answered. */
static int start(struct admin_conn *c, struct sandbox *sb, const struct fileop_req *r,
		 const struct fileop_sink_ops *ops)
{
	struct request_error e = { 0 };
	int x;

	c->file_is_put = r->op == FILEOP_WRITE;
	if (admin_exec_refused(sb, 0, &e) != 0) {
		admin_respond_error(c, e.status, e.code, e.message);
		return -1;
	}
	c->file_head = false;
	c->out_off = c->out_len = 0;
	c->phase = AC_FILEOP;
	x = fileop_begin(sb, r, &(struct fileop_sink){ ops, c });
	if (x < 0) {
		respond_begin_error(c, sb, x);
		return -1;
	}
	c->fileop = x;
	return 0;
}

void admin_files_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static char path[LIMIT_PATH_BYTES];
	struct fileop_req r = { .op = FILEOP_READ, .path = path };

	(void)query;
	if (query_path(full_query(c), path, sizeof(path)) != 0) {
		admin_respond_error(c, 400, "bad_request", "?path= must name a file: 1 to 4095 "
				    "bytes, percent-encoded");
		return;
	}
	if (start(c, sb, &r, &get_ops) == 0)
		admin_watch(c, 0); /* a hang-up cancels it */
}

/* ---- PUT: the body into the file ---- */

static void put_done(void *ctx, int err, const char *message)
{
	struct admin_conn *c = file_conn(ctx);

	if (!c)
		return;
	c->fileop = -1;
	/* a body not read to its end cannot be skipped safely: the connection closes after */
	if (!c->file_body_end)
		c->keep_alive = false;
	if (err) {
		respond_errno(c, err, message);
	} else {
		static const char ok[] = "{\"written\":true}";
		struct buf b;
		char store[64];

		buf_init(&b, store, sizeof(store));
		buf_append(&b, ok, sizeof(ok) - 1);
		admin_respond(c, 200, &b);
	}
	admin_flush(c);
}

/* Reads the body and hands it on until the sandbox stops taking it (stdin_taken resumes),
 * the socket is dry (EPOLLIN resumes) or it ended. */
static void put_pump(struct admin_conn *c)
{
	while (c->phase == AC_FILEOP && c->fileop >= 0) {
		struct http_slice s;
		size_t used;
		ssize_t n;
		int ev;

		if (c->file_pend_len) {
			size_t took = fileop_write(c->fileop, c->rbuf + c->file_pend_off,
						   c->file_pend_len, false);

			if (!took) {
				/* edge-triggered while the sandbox holds a chunk: bytes waiting
				 * in the socket must not wake the loop over and over */
				admin_watch(c, EPOLLET);
				return;
			}
			c->file_pend_off += (uint32_t)took;
			c->file_pend_len -= (uint32_t)took;
			continue;
		}
		if (c->file_body_end)
			return;
		ev = http_parser_feed(&c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used, &s);
		c->roff += (uint32_t)used;
		if (ev == HTTP_EV_NEED_MORE) {
			c->roff = c->rlen = 0;
			n = recv(c->fd, c->rbuf, sizeof(c->rbuf), 0);
			if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
				admin_watch(c, EPOLLIN);
				return;
			}
			if (n <= 0) {
				admin_conn_close(c); /* the body ended early: cancelled */
				return;
			}
			c->rlen = (uint32_t)n;
			c->idle_since = clock_mono_ms();
			continue;
		}
		if (ev < 0) {
			fileop_cancel(c->fileop);
			c->fileop = -1;
			c->keep_alive = false;
			admin_respond_error(c, 400, "bad_http", "malformed request body");
			admin_flush(c);
			return;
		}
		if (ev == HTTP_EV_BODY) {
			c->file_pend_off = (uint32_t)((const uint8_t *)s.data - c->rbuf);
			c->file_pend_len = (uint32_t)s.len;
		} else if (ev == HTTP_EV_DONE) {
			c->file_body_end = true;
			fileop_write(c->fileop, "", 0, true);
			admin_watch(c, EPOLLET); /* a half-close now wakes the loop once */
		}
	}
}

static void put_stdin_taken(void *ctx)
{
	struct admin_conn *c = file_conn(ctx);

	if (c)
		put_pump(c);
}

static const struct fileop_sink_ops put_ops = {
	.stdin_taken = put_stdin_taken,
	.done = put_done,
};

void admin_files_put(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static char path[LIMIT_PATH_BYTES];
	struct fileop_req r = { .op = FILEOP_WRITE, .path = path, .parents = true };

	(void)query;
	c->keep_alive = false; /* until the body is read to its end */
	if (query_path(full_query(c), path, sizeof(path)) != 0) {
		admin_respond_error(c, 400, "bad_request", "?path= must name a file: 1 to 4095 "
				    "bytes, percent-encoded");
		return;
	}
	c->file_body_end = false;
	c->file_pend_len = 0;
	if (start(c, sb, &r, &put_ops) != 0)
		return;
	c->keep_alive = c->parser.keep_alive;
	put_pump(c);
}

bool admin_files_streamed(const struct admin_route *route)
{
	return route->handler == admin_files_put;
}

void admin_files_event(struct admin_conn *c, uint32_t events)
{
	if (events & EPOLLOUT)
		admin_flush(c);
	if (c->phase != AC_FILEOP || c->fd < 0 || c->fileop < 0)
		return;
	if (c->file_is_put) {
		put_pump(c);
		return;
	}
	/* a GET reads nothing more: a hang-up cancels it */
	if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		admin_conn_close(c);
}
