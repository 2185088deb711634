/* conn.c: an HTTP/1.1 client connection over a Unix socket, driven without blocking. */
#include <errno.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "http.h"

/* The two buffers at the end are not cleared: rlen, roff and the parser's head_len say what
 * they hold. Clearing them wrote 32 KiB, and in a CLI's fresh process each page so written is
 * a page fault: an `agentic exec` took 35 faults with them cleared, 28 without. */
_Static_assert(offsetof(struct http_conn, head) == offsetof(struct http_conn, rbuf) +
	       LIMIT_HTTP_READ_BYTES, "the buffers are http_conn's last members");

int http_conn_init(struct http_conn *c, const char *path)
{
	memset(c, 0, offsetof(struct http_conn, rbuf));
	c->fd = -1;
	c->state = HTTP_CONN_IDLE;
	c->connect_timeout_ms = LIMIT_HTTP_CONNECT_TIMEOUT_MS;
	c->read_timeout_ms = -1;
	if (strlen(path) >= sizeof(c->path))
		return -ENAMETOOLONG;
	memcpy(c->path, path, strlen(path) + 1);
	http_parser_init(&c->parser, HTTP_PARSE_RESPONSE, c->head, sizeof(c->head));
	return 0;
}

void http_conn_close(struct http_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->state = HTTP_CONN_IDLE;
}

static int fail(struct http_conn *c, int r)
{
	http_conn_close(c);
	return r;
}

int http_conn_begin(struct http_conn *c, const uint8_t *req, size_t len,
		    const struct http_exchange_opts *opts)
{
	if (c->state != HTTP_CONN_IDLE)
		return ERR_STATE;
	c->req = req;
	c->req_len = len;
	c->req_off = 0;
	c->rlen = c->roff = 0;
	c->got_bytes = false;
	c->reused = c->fd >= 0;
	c->read_timeout_ms = opts->read_timeout_ms;
	http_parser_reset(&c->parser);
	c->parser.head_request = opts->head_request;
	c->parser.body_limit = opts->body_limit ? opts->body_limit : UINT64_MAX;
	c->state = c->fd >= 0 ? HTTP_CONN_SENDING : HTTP_CONN_CONNECTING;
	c->progress_ms = clock_mono_ms();
	return 0;
}

/* The engine may close an idle kept-alive socket at any time; when that is what failed, and no
 * byte of an answer came, the request is sent again once on a fresh socket. */
static bool retry_fresh(struct http_conn *c)
{
	bool head_request = c->parser.head_request;
	uint64_t limit = c->parser.body_limit;

	if (!c->reused || c->got_bytes)
		return false;
	http_conn_close(c);
	c->reused = false;
	c->req_off = 0;
	c->rlen = c->roff = 0;
	http_parser_reset(&c->parser);
	c->parser.head_request = head_request;
	c->parser.body_limit = limit;
	c->state = HTTP_CONN_CONNECTING;
	return true;
}

static int step_connect(struct http_conn *c)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (c->fd < 0) {
		c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (c->fd < 0) {
			c->sys_errno = errno;
			return fail(c, HTTP_ERR_CONNECT);
		}
	}
	memcpy(sa.sun_path, c->path, sizeof(c->path));
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EISCONN) {
		c->state = HTTP_CONN_SENDING;
		c->progress_ms = clock_mono_ms();
		return 0;
	}
	switch (errno) {
	case EINTR:
		return 0;
	case EAGAIN:
		/* A Unix socket's accept backlog is full: nothing to poll for, try again soon. */
		c->want = 0;
		return -EAGAIN;
	case EINPROGRESS:
	case EALREADY:
		c->want = POLLOUT;
		return -EAGAIN;
	}
	c->sys_errno = errno;
	return fail(c, HTTP_ERR_CONNECT);
}

static int step_send(struct http_conn *c)
{
	while (c->req_off < c->req_len) {
		ssize_t n = send(c->fd, c->req + c->req_off, c->req_len - c->req_off, MSG_NOSIGNAL);
		if (n >= 0) {
			c->req_off += (size_t)n;
			c->progress_ms = clock_mono_ms();
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN) {
			c->want = POLLOUT;
			return -EAGAIN;
		}
		if ((errno == EPIPE || errno == ECONNRESET) && retry_fresh(c))
			return 0;
		c->sys_errno = errno;
		return fail(c, -errno);
	}
	c->state = HTTP_CONN_RECEIVING;
	return 0;
}

/* Reads more bytes; 0 when some arrived or the exchange was restarted, else an event/error. */
static int step_read(struct http_conn *c)
{
	ssize_t n = read(c->fd, c->rbuf, sizeof(c->rbuf));
	int r;

	if (n > 0) {
		c->rlen = (uint32_t)n;
		c->roff = 0;
		c->got_bytes = true;
		c->progress_ms = clock_mono_ms();
		return 0;
	}
	if (n == 0) {
		if (retry_fresh(c))
			return 0;
		r = http_parser_finish(&c->parser);
		if (r == HTTP_EV_DONE) {
			http_conn_close(c);
			return r;
		}
		return fail(c, HTTP_ERR_TRUNCATED);
	}
	if (errno == EINTR)
		return 0;
	if (errno == EAGAIN) {
		c->want = POLLIN;
		return -EAGAIN;
	}
	if (errno == ECONNRESET && retry_fresh(c))
		return 0;
	c->sys_errno = errno;
	return fail(c, -errno);
}

int http_conn_step(struct http_conn *c, struct http_slice *slice)
{
	size_t n;
	int r;

	slice->data = NULL;
	slice->len = 0;
	for (;;) {
		switch (c->state) {
		case HTTP_CONN_CONNECTING:
			r = step_connect(c);
			break;
		case HTTP_CONN_SENDING:
			r = step_send(c);
			break;
		case HTTP_CONN_RECEIVING:
			r = http_parser_feed(&c->parser, c->rbuf + c->roff, c->rlen - c->roff, &n, slice);
			c->roff += (uint32_t)n;
			if (r < 0)
				return fail(c, r);
			if (r == HTTP_EV_NEED_MORE) {
				r = step_read(c);
				break;
			}
			if (r == HTTP_EV_UPGRADE) {
				c->state = HTTP_CONN_UPGRADED;
			} else if (r == HTTP_EV_DONE) {
				/* Bytes past the end of an answer we did not ask for: the stream is
				 * out of step, so it is not reused. */
				if (!c->parser.keep_alive || c->roff != c->rlen)
					http_conn_close(c);
				c->state = HTTP_CONN_IDLE;
			}
			return r;
		default:
			return ERR_STATE;
		}
		if (r == -EAGAIN && http_conn_wait_ms(c) == 0)
			return fail(c, -ETIMEDOUT);
		if (r != 0)
			return r;
	}
}

int http_conn_wait_ms(const struct http_conn *c)
{
	int limit = c->state == HTTP_CONN_CONNECTING ? c->connect_timeout_ms : c->read_timeout_ms;
	int64_t left;

	if (limit < 0 || c->state == HTTP_CONN_IDLE || c->state == HTTP_CONN_UPGRADED)
		return -1;
	left = c->progress_ms + limit - clock_mono_ms();
	return left > 0 ? (int)left : 0;
}

int http_conn_wait(struct http_conn *c, struct http_slice *slice)
{
	for (;;) {
		int r = http_conn_step(c, slice);
		int left = http_conn_wait_ms(c);
		struct pollfd pfd = { .fd = c->fd, .events = c->want };

		if (r != -EAGAIN)
			return r;
		if (c->want == 0) {
			poll(NULL, 0, left >= 0 && left < 10 ? left : 10);
			continue;
		}
		/* on expiry the next step reports -ETIMEDOUT */
		if (poll(&pfd, 1, left) < 0 && errno != EINTR) {
			c->sys_errno = errno;
			return fail(c, -errno);
		}
	}
}

struct http_slice http_conn_leftover(const struct http_conn *c)
{
	struct http_slice s = { c->rbuf + c->roff, c->rlen - c->roff };
	return s;
}
