/* http.h: HTTP/1.1 messages: a resumable parser for responses and requests, a request writer,
 * and a client connection over a Unix socket.
 *
 * The parser does no I/O and allocates nothing. It is fed bytes in pieces of any size and says
 * what it found (BearSSL style): the head (start line and headers, copied into caller storage
 * of bounded size), body bytes (de-chunked, handed out as slices of the caller's input, never
 * copied), the end of the message, or an upgrade (101: the remaining bytes are no longer HTTP).
 * A message split at any byte boundary parses the same as the whole.
 *
 * The connection drives one exchange at a time (no pipelining) and keeps the socket for the next
 * one when both sides allow it. It never blocks: http_conn_step() does what I/O it can and says
 * what it waits for, so the same code serves an event loop and the blocking http_conn_wait(). */
#ifndef AGENTIC_HTTP_H
#define AGENTIC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Codes in ERR_RANGE_HTTP (base.h); err_str() gives their text. */
#define HTTP_ERR_HEAD_TOO_BIG (ERR_RANGE_HTTP - 1) /* head over its storage or LIMIT_HTTP_HEADERS */
#define HTTP_ERR_BODY_TOO_BIG (ERR_RANGE_HTTP - 2) /* body over the parser's body_limit */
#define HTTP_ERR_TRUNCATED (ERR_RANGE_HTTP - 3)    /* peer closed before the message was complete */
#define HTTP_ERR_CONNECT (ERR_RANGE_HTTP - 4)      /* could not connect; conn->sys_errno says why */

enum http_event {
	HTTP_EV_NEED_MORE = 0, /* all input consumed; nothing to report */
	HTTP_EV_HEAD,          /* start line and headers complete: see the parser's fields */
	HTTP_EV_BODY,          /* *slice holds the next body bytes (a view of the input) */
	HTTP_EV_DONE,          /* message complete; http_parser_reset() before the next one */
	HTTP_EV_UPGRADE,       /* 101 head complete; the bytes after `consumed` are not HTTP */
};

enum http_parser_kind { HTTP_PARSE_RESPONSE, HTTP_PARSE_REQUEST };

enum http_framing {
	HTTP_BODY_NONE,    /* no body: requests without length, 1xx/204/304, answers to HEAD */
	HTTP_BODY_LENGTH,  /* Content-Length */
	HTTP_BODY_CHUNKED, /* Transfer-Encoding: chunked */
	HTTP_BODY_CLOSE,   /* response delimited by the peer closing the connection */
};

struct http_slice {
	const uint8_t *data;
	size_t len;
};

struct http_header {
	uint32_t name;  /* offsets of NUL-terminated strings in the head storage */
	uint32_t value; /* value without leading or trailing whitespace */
};

struct http_parser {
	/* set by http_parser_init / by the caller before feeding */
	enum http_parser_kind kind;
	bool head_request;   /* response to a HEAD request: no body, whatever the headers say */
	uint64_t body_limit; /* most body bytes accepted; UINT64_MAX for unbounded streams */
	char *head;          /* caller storage for the head */
	uint32_t head_cap;

	/* valid from HTTP_EV_HEAD / HTTP_EV_UPGRADE on, until the next reset */
	int status;            /* responses: 100..599 */
	uint32_t method;       /* requests: offset in head of the method */
	uint32_t target;       /* requests: offset in head of the request target */
	uint32_t reason;       /* responses: offset in head of the reason phrase (maybe empty) */
	int minor_version;     /* HTTP/1.x */
	bool keep_alive;       /* the connection may carry another message after this one */
	enum http_framing framing;
	uint64_t content_length; /* HTTP_BODY_LENGTH: declared length */
	struct http_header hdr[LIMIT_HTTP_HEADERS];
	uint32_t nhdr;

	/* internal state */
	uint32_t head_len;
	uint32_t line_start;
	uint8_t state;
	uint8_t digits;
	uint64_t remaining;
	uint64_t body_total;
	uint32_t skipped;
};

/* Prepares p for a message of `kind`, with head storage of head_cap bytes (at most
 * LIMIT_HTTP_HEAD_BYTES are used). body_limit starts at UINT64_MAX and head_request at false. */
void http_parser_init(struct http_parser *p, enum http_parser_kind kind, char *head,
		      uint32_t head_cap);
/* Forgets the previous message (keeps kind, storage, body_limit; clears head_request). */
void http_parser_reset(struct http_parser *p);

/* Consumes bytes from in[0..len) and returns the first event found (or HTTP_EV_NEED_MORE once
 * all of them are consumed), setting *consumed. Call it again with the rest, and also with
 * len 0 after HTTP_EV_HEAD and HTTP_EV_BODY, since a message may end without further bytes.
 * Errors: ERR_PARSE (malformed; also Content-Length together with Transfer-Encoding, obs-fold,
 * codings other than chunked), HTTP_ERR_HEAD_TOO_BIG, HTTP_ERR_BODY_TOO_BIG (the head fields
 * stay readable), ERR_STATE (fed after DONE/UPGRADE/an error). An error is final. */
int http_parser_feed(struct http_parser *p, const uint8_t *in, size_t len, size_t *consumed,
		     struct http_slice *slice);
/* The peer closed the connection. Returns HTTP_EV_DONE when that ends a read-until-close body,
 * HTTP_EV_NEED_MORE when no byte of a message had arrived (a clean close between messages),
 * HTTP_ERR_TRUNCATED otherwise. */
int http_parser_finish(struct http_parser *p);

/* Head accessors. http_parser_header: the value of the first header named `name` (ASCII
 * case-insensitive) or NULL. The strings live in the head storage until the next reset. */
const char *http_parser_header(const struct http_parser *p, const char *name);
static inline const char *http_parser_str(const struct http_parser *p, uint32_t off)
{
	return p->head + off;
}

/* ---- writing ---- */
struct http_field {
	const char *name;
	const char *value;
};

/* Appends a request to out: start line, `Host`, the fields (array ending with a NULL name, or
 * NULL), `Content-Length` whenever body is non-NULL or the method is POST/PUT/PATCH, then the
 * body. Returns 0, ERR_LIMIT (out unchanged), or -EINVAL when a string holds CR, LF or NUL,
 * or method/target/host is empty. */
int http_request_write(struct buf *out, const char *method, const char *target, const char *host,
		       const struct http_field *fields, const void *body, size_t body_len);

/* A parsed request's head written again (a relay's): "METHOD target HTTP/1.x", then each of
 * its header fields but those named in drop (ASCII case-insensitive; NULL-terminated), without
 * the blank line. The target's query, when not NULL or "", after a '?'. 0, or ERR_LIMIT. */
int http_head_rewrite(struct buf *out, const struct http_parser *p, const char *target,
		      const char *query, const char *const *drop);

/* Response framing for http_response_head_write: a length (>= 0), or one of these. */
#define HTTP_CHUNKED (-1)  /* Transfer-Encoding: chunked */
#define HTTP_NO_BODY (-2)  /* neither: an interim (1xx) response */
/* The reason phrase written for a status; "Error" for one not listed. */
const char *http_reason(int status);
/* Appends a response head: status line and reason, the fields (as for requests), then
 * Content-Length: length or Transfer-Encoding: chunked, `Connection: close` when close, and the
 * blank line. Returns 0, ERR_LIMIT (out unchanged), or -EINVAL for a status outside 100..599,
 * a field holding CR or LF, or a length below HTTP_NO_BODY. */
int http_response_head_write(struct buf *out, int status, const struct http_field *fields,
			     int64_t length, bool close);
/* Appends a whole response: the head with Content-Length: body_len, then the body; the
 * length is always the body's. Same returns. */
int http_response_write(struct buf *out, int status, const struct http_field *fields, bool close,
			const void *body, size_t body_len);
/* A chunked body, after a head written with HTTP_CHUNKED: one chunk (its size line, the len
 * bytes, CRLF; -EINVAL for len 0, which would end the body), then the end (the empty chunk).
 * Both return 0 or ERR_LIMIT with out unchanged. */
int http_chunk_write(struct buf *out, const void *data, size_t len);
int http_chunk_end(struct buf *out);

/* ---- client connection over a Unix socket ---- */
enum http_conn_state {
	HTTP_CONN_IDLE,       /* no exchange; fd < 0, or an open socket kept for reuse */
	HTTP_CONN_CONNECTING, /* waiting for connect() */
	HTTP_CONN_SENDING,    /* writing the request */
	HTTP_CONN_RECEIVING,  /* reading the response */
	HTTP_CONN_UPGRADED,   /* 101 seen: the socket belongs to the caller now */
};

struct http_exchange_opts {
	bool head_request;      /* the request is HEAD: expect no body */
	uint64_t body_limit;    /* 0 means UINT64_MAX (a stream the caller consumes as it comes) */
	int read_timeout_ms;    /* most time without progress once connected; -1: no limit */
};

struct http_conn {
	int fd;
	enum http_conn_state state;
	short want;             /* after -EAGAIN: POLLIN or POLLOUT on fd, or 0: retry soon */
	int sys_errno;          /* errno of the last failed socket call */
	int connect_timeout_ms; /* most time to connect; default 5000 */
	int read_timeout_ms;    /* of the current exchange */
	int64_t progress_ms;    /* monotonic time of the exchange's last progress */
	bool reused;            /* the current exchange runs on a socket an earlier one used */
	bool got_bytes;         /* a byte of the current response has arrived */
	char path[108];         /* sun_path */
	const uint8_t *req;     /* borrowed from the caller until the response head arrives */
	size_t req_len;
	size_t req_off;
	struct http_parser parser;
	uint32_t rlen;
	uint32_t roff;
	/* the buffers stay last: http_conn_init clears what comes before them */
	uint8_t rbuf[LIMIT_HTTP_READ_BYTES];
	char head[LIMIT_HTTP_HEAD_BYTES];
};

/* Sets up c for the socket at path (no I/O yet). -ENAMETOOLONG when path does not fit. */
int http_conn_init(struct http_conn *c, const char *path);
/* Starts an exchange: the request bytes stay the caller's and must live until the response
 * is complete. Reuses the open socket when the previous exchange left it reusable. ERR_STATE
 * when an exchange is already running. */
int http_conn_begin(struct http_conn *c, const uint8_t *req, size_t len,
		    const struct http_exchange_opts *opts);
/* Makes what progress it can without blocking and returns the next event (HTTP_EV_HEAD,
 * HTTP_EV_BODY with *slice valid until the next call, HTTP_EV_DONE, HTTP_EV_UPGRADE), or
 * -EAGAIN (wait for c->want on c->fd, at most http_conn_wait_ms), or an error (the socket is
 * then closed). -ETIMEDOUT once the connect timeout, or the read timeout, passed without
 * progress. A reused socket that the engine had closed is detected and the request is sent once
 * more on a new one. */
int http_conn_step(struct http_conn *c, struct http_slice *slice);
/* Milliseconds until the current timeout expires (0: expired, step now), -1 when none runs. */
int http_conn_wait_ms(const struct http_conn *c);
/* Blocking form of http_conn_step: polls, bounded by the same timeouts. */
int http_conn_wait(struct http_conn *c, struct http_slice *slice);
/* After HTTP_EV_UPGRADE: bytes already read past the head. */
struct http_slice http_conn_leftover(const struct http_conn *c);
/* Closes the socket (if open) and returns to IDLE. */
void http_conn_close(struct http_conn *c);

#endif
