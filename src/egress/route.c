/* route.c: a credential route (route.h): the request rewritten for the upstream, sent over
 * BearSSL (tls.h) with its body as framed (body.h), and the response relayed as it arrives with
 * the secret masked. One poll() loop moves both directions at once, with a bounded buffer
 * each way: a response is never held whole, so server-sent events reach the workload as the
 * upstream sends them. */
#include "egress/route.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "egress/body.h"
#include "tls/tls.h"

const char *egress_end_word(enum egress_end e)
{
	switch (e) {
	case EE_CLOSED: return "closed";
	case EE_BYTE_CAP: return "byte_cap";
	case EE_CONTROL_LOST: return "control_lost";
	case EE_UPSTREAM_ERROR: return "upstream_error";
	case EE_CLIENT_GONE: return "client_gone";
	case EE_TIMEOUT: return "timeout";
	}
	return "closed";
}

/* ---- the mask ---- */

void egress_mask_init(struct egress_mask *m, const uint8_t *secret, size_t len)
{
	size_t k = 0;

	if (len > EGRESS_SECRET_BYTES)
		len = EGRESS_SECRET_BYTES;
	m->secret = secret;
	m->len = len;
	m->nheld = 0;
	/* border[i]: the longest proper prefix of secret[0..i] that is also its suffix (KMP), so
	 * a mismatch drops only the bytes that can no longer start the secret, and every input
	 * byte costs O(1) amortised whatever the secret and the stream. */
	if (len > 0)
		m->border[0] = 0;
	for (size_t i = 1; i < len; i++) {
		while (k > 0 && secret[i] != secret[k])
			k = m->border[k - 1];
		if (secret[i] == secret[k])
			k++;
		m->border[i] = (uint16_t)k;
	}
}

/* held[] always equals secret[0..nheld): the partial match at the stream's end. */
size_t egress_mask_feed(struct egress_mask *m, const uint8_t *in, size_t n, uint8_t *out)
{
	size_t o = 0, k = m->nheld;

	if (m->len == 0) {
		memcpy(out, in, n);
		return n;
	}
	for (size_t i = 0; i < n; i++) {
		uint8_t c = in[i];

		while (k > 0 && m->secret[k] != c) {
			size_t nk = m->border[k - 1];

			/* The first k - nk held bytes can no longer be part of a match. */
			memcpy(out + o, m->secret, k - nk);
			o += k - nk;
			k = nk;
		}
		if (m->secret[k] == c) {
			if (++k == m->len) {
				memset(out + o, '*', m->len);
				o += m->len;
				k = 0;
			}
		} else {
			out[o++] = c;
		}
	}
	m->nheld = k;
	memcpy(m->held, m->secret, k);
	return o;
}

size_t egress_mask_flush(struct egress_mask *m, uint8_t *out)
{
	size_t n = m->nheld;

	memcpy(out, m->held, n);
	m->nheld = 0;
	return n;
}

/* ---- the request head ---- */

struct out {
	char *p;
	size_t len, cap;
	bool over;
};

static void put(struct out *w, const void *s, size_t n)
{
	if (w->over || n > w->cap - w->len) {
		w->over = true;
		return;
	}
	memcpy(w->p + w->len, s, n);
	w->len += n;
}

static void puts_(struct out *w, const char *s)
{
	put(w, s, strlen(s));
}

static bool tchar(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool name_is(const char *name, size_t len, const char *want)
{
	return strlen(want) == len && strncasecmp(name, want, len) == 0;
}

/* Headers never forwarded: the credentials a workload could send itself, the hop-by-hop ones
 * (the worker speaks for the connection: Connection: close), Host (ours replaces it), and
 * Accept-Encoding: ours asks for identity, so that the response's bytes are the ones the mask
 * reads (a gzip'd echo of the injected header would carry the secret past it). */
static const char *const dropped[] = {
	"authorization", "proxy-authorization", "x-api-key", "cookie", "proxy-connection",
	"connection", "keep-alive", "te", "upgrade", "host", "accept-encoding",
};

static bool is_dropped(const char *name, size_t len, const struct egress_route *rt)
{
	for (size_t i = 0; i < ARRAY_LEN(dropped); i++)
		if (name_is(name, len, dropped[i]))
			return true;
	return rt->header[0] && name_is(name, len, rt->header);
}

/* Content-Length: digits only (no sign, no list), below 2^60. */
static int parse_length(const char *v, size_t len, uint64_t *out)
{
	uint64_t n = 0;

	if (len == 0 || len > 18)
		return ERR_PARSE;
	for (size_t i = 0; i < len; i++) {
		if (v[i] < '0' || v[i] > '9')
			return ERR_PARSE;
		n = n * 10 + (uint64_t)(v[i] - '0');
	}
	*out = n;
	return 0;
}

static void put_port(struct out *w, unsigned port)
{
	char d[8];
	size_t n = 0;

	do {
		d[n++] = (char)('0' + port % 10);
		port /= 10;
	} while (port);
	put(w, ":", 1);
	while (n)
		put(w, &d[--n], 1);
}

/* What the head's framing headers said. */
struct framing {
	bool have_len, have_te;
	uint64_t length;
};

/* The head, the route's header and the secret can be rewritten into a request: 0, or
 * ERR_PARSE / ERR_LIMIT. */
static int rewrite_check(const struct egress_head *h, const struct egress_route *rt,
			 const uint8_t *secret, size_t secret_len)
{
	const char *end = h->raw + h->raw_len;
	size_t hl = strlen(rt->header);

	if (!h->raw || h->raw_len < 4 || memcmp(end - 4, "\r\n\r\n", 4) != 0)
		return ERR_PARSE;
	if (!h->method[0] || !h->path[0] || h->path[0] != '/')
		return ERR_PARSE;
	for (const char *m = h->method; *m; m++)
		if (!tchar((uint8_t)*m))
			return ERR_PARSE;
	for (const char *q = h->path; *q; q++)
		if ((uint8_t)*q <= 0x20 || (uint8_t)*q == 0x7f)
			return ERR_PARSE;
	/* The secret goes into a header line: a byte that ends or splits one would let the
	 * policy's secret file write headers of its own. */
	if (secret_len > EGRESS_SECRET_BYTES)
		return ERR_LIMIT; /* the mask covers that much */
	/* A route header that frames the message or names the connection would make the
	 * upstream read another request than the one checked here; the policy should never
	 * name one, and the rewrite does not trust that it did not. */
	for (const char *q = rt->header; *q; q++)
		if (!tchar((uint8_t)*q))
			return ERR_PARSE;
	if (name_is(rt->header, hl, "content-length") ||
	    name_is(rt->header, hl, "transfer-encoding") || name_is(rt->header, hl, "host") ||
	    name_is(rt->header, hl, "connection") || name_is(rt->header, hl, "accept-encoding"))
		return ERR_PARSE;
	for (size_t i = 0; i < secret_len; i++)
		if (secret[i] == '\r' || secret[i] == '\n' || secret[i] == 0)
			return ERR_PARSE;
	return 0;
}

/* A framing header's value, noted in f: 0, or ERR_PARSE for one read two ways. */
static int framing_note(struct framing *f, const char *name, size_t nlen, const char *v,
			size_t vlen)
{
	if (name_is(name, nlen, "content-length")) {
		if (f->have_len || parse_length(v, vlen, &f->length) < 0)
			return ERR_PARSE;
		f->have_len = true;
	} else if (name_is(name, nlen, "transfer-encoding")) {
		/* chunked alone: a coding list ("gzip, chunked") or a second header is a
		 * framing another parser may read differently. */
		if (f->have_te || !name_is(v, vlen, "chunked"))
			return ERR_PARSE;
		f->have_te = true;
	}
	return 0;
}

/* One header line at *pp, copied to w unless dropped: 1 at the empty line (the head's end),
 * 0 for a header, ERR_PARSE. */
static int header_copy(struct out *w, const char **pp, const char *end,
		       const struct egress_route *rt, struct framing *f)
{
	const char *p = *pp, *line = p, *colon = NULL, *eol, *v;
	size_t nlen, vlen;

	if (p >= end)
		return ERR_PARSE;
	/* One header line: CRLF-ended, no bare CR or LF, no NUL, not a continuation. */
	while (p < end && *p != '\n') {
		if ((*p == '\r' && (p + 1 >= end || p[1] != '\n')) || *p == 0)
			return ERR_PARSE;
		if (*p == ':' && !colon)
			colon = p;
		p++;
	}
	if (p >= end || p == line || p[-1] != '\r')
		return ERR_PARSE;
	eol = p - 1;
	*pp = ++p;
	if (eol == line)
		return 1; /* the empty line: the head's end */
	if (*line == ' ' || *line == '\t' || !colon || colon == line)
		return ERR_PARSE;
	for (const char *q = line; q < colon; q++)
		if (!tchar((uint8_t)*q))
			return ERR_PARSE;
	nlen = (size_t)(colon - line);
	v = colon + 1;
	while (v < eol && (*v == ' ' || *v == '\t'))
		v++;
	vlen = (size_t)(eol - v);
	while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
		vlen--;
	if (framing_note(f, line, nlen, v, vlen) < 0)
		return ERR_PARSE;
	if (!is_dropped(line, nlen, rt))
		put(w, line, (size_t)(p - line));
	return 0;
}

/* The request line, then the head's other lines as header_copy has them: 0 or ERR_PARSE. */
static int headers_copy(struct out *w, const struct egress_head *h,
			const struct egress_route *rt, struct framing *f)
{
	const char *p = h->raw, *end = h->raw + h->raw_len;
	int r;

	/* The request line was the head parser's; skip it, checking only that it is one line. */
	while (p < end && *p != '\n') {
		if (*p == '\r' && (p + 1 >= end || p[1] != '\n'))
			return ERR_PARSE;
		if (*p == 0)
			return ERR_PARSE;
		p++;
	}
	if (p == h->raw || p[-1] != '\r')
		return ERR_PARSE;
	p++;
	while ((r = header_copy(w, &p, end, rt, f)) == 0)
		;
	if (r < 0 || p != end)
		return ERR_PARSE; /* p != end: an empty line before the head's end */
	if (f->have_len && f->have_te)
		return ERR_PARSE;
	return 0;
}

/* The route's header with the secret in its value: 0, or ERR_PARSE. */
static int route_header_put(struct out *w, const struct egress_route *rt,
			    const uint8_t *secret, size_t secret_len)
{
	const char *t = rt->value;

	puts_(w, rt->header);
	puts_(w, ": ");
	while (*t) {
		if (strncmp(t, "{secret}", 8) == 0) {
			put(w, secret, secret_len);
			t += 8;
		} else {
			if (*t == '\r' || *t == '\n')
				return ERR_PARSE;
			put(w, t++, 1);
		}
	}
	put(w, "\r\n", 2);
	return 0;
}

long egress_route_rewrite_framed(const struct egress_head *h, const struct egress_route *rt,
				 const uint8_t *secret, size_t secret_len, char *out, size_t cap,
				 struct egress_body *b)
{
	struct out w = { out, 0, cap, false };
	struct framing f = { 0 };
	int r;

	memset(b, 0, sizeof(*b));
	if ((r = rewrite_check(h, rt, secret, secret_len)) != 0)
		return r;
	puts_(&w, h->method);
	put(&w, " ", 1);
	puts_(&w, h->path);
	puts_(&w, " HTTP/1.1\r\nHost: ");
	puts_(&w, rt->up_host);
	if (rt->up_port != 443)
		put_port(&w, rt->up_port);
	put(&w, "\r\n", 2);
	if (headers_copy(&w, h, rt, &f) != 0 ||
	    (rt->header[0] && route_header_put(&w, rt, secret, secret_len) != 0))
		return ERR_PARSE;
	puts_(&w, "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
	if (w.over)
		return ERR_LIMIT;
	if (w.len < cap)
		out[w.len] = 0;
	if (f.have_te) {
		b->kind = EB_CHUNKED;
	} else if (f.have_len) {
		b->kind = EB_LENGTH;
		b->left = f.length;
		b->done = f.length == 0;
	} else {
		b->kind = EB_NONE;
		b->done = true;
	}
	return (long)w.len;
}

long egress_route_rewrite(const struct egress_head *h, const struct egress_route *rt,
			  const uint8_t *secret, size_t secret_len, char *out, size_t cap)
{
	struct egress_body b;

	return egress_route_rewrite_framed(h, rt, secret, secret_len, out, cap, &b);
}

/* ---- the response's status ---- */

/* Reads the status line of each response head as the bytes go by, skipping interim (1xx)
 * heads, until the final one's code is known. */
struct status_reader {
	char line[32];
	size_t len;
	size_t hdr_line;        /* bytes of the current header line of a 1xx head */
	bool in_line;           /* reading a status line (else: skipping a 1xx head) */
	bool done;
	int status;
};

static int status_code(const char *l, size_t n)
{
	if (n < 12 || memcmp(l, "HTTP/1.", 7) != 0 || l[7] < '0' || l[7] > '9' || l[8] != ' ')
		return 0;
	for (int i = 9; i < 12; i++)
		if (l[i] < '0' || l[i] > '9')
			return 0;
	if (n > 12 && l[12] != ' ' && l[12] != '\r' && l[12] != '\n')
		return 0;
	return (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
}

static void status_feed(struct status_reader *s, const uint8_t *in, size_t n)
{
	for (size_t i = 0; i < n && !s->done; i++) {
		uint8_t c = in[i];

		if (s->in_line) {
			if (c != '\n') {
				if (s->len < sizeof(s->line))
					s->line[s->len++] = (char)c;
				continue;
			}
			int code = status_code(s->line, s->len);

			if (code == 0) {
				s->done = true; /* not HTTP/1.x: no status to report */
			} else if (code >= 100 && code < 200 && code != 101) {
				s->in_line = false;
				s->hdr_line = 0;
			} else {
				s->status = code;
				s->done = true;
			}
			s->len = 0;
		} else if (c == '\n') {
			if (s->hdr_line == 0)
				s->in_line = true; /* the interim head ended: the next status line */
			s->hdr_line = 0;
		} else if (c != '\r') {
			s->hdr_line++;
		}
	}
}

/* ---- the relay ---- */

#define HEAD_OUT_BYTES (8192u + EGRESS_SECRET_BYTES + EGRESS_VALUE_BYTES + EGRESS_HOST_BYTES + \
			EGRESS_HEADER_BYTES + 2048u + 256u)
#define RELAY_BYTES 16384u

static char head_out[HEAD_OUT_BYTES];
static uint8_t up_buf[RELAY_BYTES];
static uint8_t down_buf[RELAY_BYTES];
static uint8_t masked[RELAY_BYTES + EGRESS_SECRET_BYTES];
static struct egress_mask mask;

/* fd non-blocking: its flags before, or -1. */
static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 ? -1 : fl;
}

/* Our own answer (400, 502) to the workload, before any byte of the upstream's: written whole
 * or not at all within the timeout. */
static void answer(const struct egress_route_call *c, struct egress_route_result *r,
		   const char *status, const char *word)
{
	char msg[256];
	size_t n, at = 0;
	int64_t deadline = clock_mono_ms() + (c->io_timeout_ms > 0 ? c->io_timeout_ms : 10000);

	n = (size_t)snprintf(msg, sizeof(msg),
			     "HTTP/1.1 %s\r\nConnection: close\r\nContent-Type: text/plain\r\n"
			     "Content-Length: %zu\r\n\r\n%s\n", status, strlen(word) + 1, word);
	while (at < n) {
		ssize_t w = send(c->client_fd, msg + at, n - at, MSG_NOSIGNAL);
		struct pollfd p = { .fd = c->client_fd, .events = POLLOUT };
		int64_t left = deadline - clock_mono_ms();

		if (w > 0) {
			at += (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
			break;
		if (left <= 0 || (poll(&p, 1, (int)left) < 0 && errno != EINTR))
			break;
	}
	r->bytes_down += at;
	if (!r->status)   /* the status the workload got is ours */
		r->status = atoi(status);
	shutdown(c->client_fd, SHUT_WR);
}

struct relay {
	const struct egress_route_call *c;
	struct egress_route_result *r;
	struct egress_body body;
	struct status_reader st;
	/* up: what goes to the upstream next (the head, the head's rest, then the client's) */
	const uint8_t *up;
	size_t up_len;
	int up_stage;           /* 0 the head, 1 the head's rest, 2 the client's reads */
	size_t rest_take;       /* of the head's rest bytes, those in the body */
	bool up_flushed;        /* the request's end went out in a record */
	bool client_eof;
	/* down: masked bytes for the workload, not yet written */
	size_t down_at, down_len;
	bool up_eof;            /* the upstream's stream ended: the mask flushed into down */
	uint64_t up_seen;       /* response bytes read from the upstream (the byte cap) */
	bool sent_any_down;
};

static bool over_cap(struct relay *x, size_t more)
{
	return x->r->bytes_up + x->up_seen + more > x->c->max_bytes;
}

/* The engine takes what is pending for the upstream; then the next piece of it: true when a
 * byte moved. */
static bool up_send(struct relay *x)
{
	bool moved = false;

	while (x->up_len > 0) {
		size_t n = tls_send(x->up, x->up_len);

		if (n == 0)
			break;
		ASSERT(n <= x->up_len);
		x->up += n;
		x->up_len -= n;
		moved = true;
		if (x->up_len == 0)
			tls_flush();
	}
	if (x->up_len == 0 && x->up_stage == 0) {
		x->up_stage = 1;
		x->up = (const uint8_t *)x->c->head->rest;
		x->up_len = x->rest_take;
	}
	if (x->up_len == 0 && x->up_stage == 1)
		x->up_stage = 2;
	return moved;
}

/* The client's next bytes of the body, framed: 1 when some came, 0 none, -1 when the route
 * is over (x->r->end set). */
static int up_read(struct relay *x)
{
	const struct egress_route_call *c = x->c;
	struct egress_route_result *r = x->r;
	ssize_t n = recv(c->client_fd, up_buf, sizeof(up_buf), 0);
	long take;

	if (n == 0)
		x->client_eof = true;
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		r->end = EE_CLIENT_GONE;
		return -1;
	}
	if (n < 0)
		return 0;
	if (over_cap(x, (size_t)n)) {
		r->end = EE_BYTE_CAP;
		return -1;
	}
	r->bytes_up += (uint64_t)n;
	take = egress_body_take(&x->body, up_buf, (size_t)n);
	if (take < 0) {
		/* A chunk line no parser agrees on: cut, and answer when the upstream has said
		 * nothing yet. */
		r->reason = ER_BAD_REQUEST;
		r->end = EE_CLOSED;
		if (!x->sent_any_down && x->down_len == 0)
			answer(c, r, "400 Bad Request", "bad_request");
		return -1;
	}
	x->up = up_buf;
	x->up_len = (size_t)take;
	return 1;
}

/* Up: 1 when a byte moved, 0 none, -1 when the route is over. */
static int up_step(struct relay *x)
{
	int moved = up_send(x), n;

	if (x->up_len == 0 && x->up_stage == 2 && !x->body.done && !x->client_eof) {
		if ((n = up_read(x)) < 0)
			return -1;
		moved |= n;
	}
	if (x->up_len == 0 && x->body.done && x->up_stage == 2 && !x->up_flushed) {
		tls_flush();
		x->up_flushed = true;
	}
	return moved;
}

/* To the workload what is masked: 1 when a byte moved, 0 none, -1 when it is gone. */
static int down_write(struct relay *x)
{
	int moved = 0;

	while (x->down_at < x->down_len) {
		ssize_t n = send(x->c->client_fd, masked + x->down_at, x->down_len - x->down_at,
				 MSG_NOSIGNAL);

		if (n > 0) {
			ASSERT((size_t)n <= x->down_len - x->down_at);
			x->down_at += (size_t)n;
			x->r->bytes_down += (uint64_t)n;
			x->sent_any_down = true;
			moved = 1;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			break;
		x->r->end = EE_CLIENT_GONE;
		return -1;
	}
	return moved;
}

/* The engine's next piece of the answer, masked: 1 when it moved, 0 none, -1 when the route
 * is over. */
static int down_read(struct relay *x)
{
	long n = tls_recv(down_buf, sizeof(down_buf));

	x->down_at = x->down_len = 0;
	if (n > 0) {
		if (over_cap(x, (size_t)n)) {
			x->r->end = EE_BYTE_CAP;
			return -1;
		}
		x->up_seen += (uint64_t)n;
		status_feed(&x->st, down_buf, (size_t)n);
		x->down_len = egress_mask_feed(&mask, down_buf, (size_t)n, masked);
		return 1;
	}
	if (n == 0) {
		x->up_eof = true;
		x->down_len = egress_mask_flush(&mask, masked);
		return 1;
	}
	if (n == TLS_AGAIN)
		return 0;
	log_warn("egress upstream failed", "host=%s error=%s code=%d",
		 log_q(x->c->route->up_host), log_q(tls_error_word()),
		 tls_error_code());
	x->r->end = EE_UPSTREAM_ERROR;
	return -1;
}

/* One pass of every move that needs no waiting: true when a byte moved. Sets x->r->end (and
 * returns false, *over true) when the route is over. */
static bool relay_step(struct relay *x, bool *over)
{
	int up, down = 0, more = 0;

	if ((up = up_step(x)) < 0 || (down = down_write(x)) < 0 ||
	    (x->down_at == x->down_len && !x->up_eof && (more = down_read(x)) < 0)) {
		*over = true;
		return false;
	}
	if (x->up_eof && x->down_at == x->down_len) {
		x->r->end = EE_CLOSED;
		*over = true;
		return false;
	}
	return up || down || more;
}

static void relay(struct relay *x)
{
	const struct egress_route_call *c = x->c;
	int timeout = c->io_timeout_ms > 0 ? c->io_timeout_ms : 60000;
	int64_t last = clock_mono_ms();

	for (;;) {
		struct pollfd p[2];
		bool over = false;
		int64_t left;
		int n;

		while (relay_step(x, &over))
			last = clock_mono_ms();
		if (over)
			return;
		p[0].fd = c->client_fd;
		p[0].events = 0;
		p[0].revents = 0;
		if (x->up_len == 0 && x->up_stage == 2 && !x->body.done && !x->client_eof)
			p[0].events |= POLLIN;
		if (x->down_at < x->down_len)
			p[0].events |= POLLOUT;
		/* A socket the engine wants nothing of stays out of the set: a peer's hang-up on it
		 * would wake the loop for nothing until the next step reads the end. */
		p[1].events = tls_want_events();
		p[1].fd = p[1].events ? c->upstream_fd : -1;
		p[1].revents = 0;
		left = last + timeout - clock_mono_ms();
		if (left <= 0) {
			x->r->end = EE_TIMEOUT;
			return;
		}
		n = poll(p, 2, (int)left);
		if (n < 0 && errno != EINTR) {
			x->r->end = EE_UPSTREAM_ERROR;
			return;
		}
		if (n > 0 && p[1].revents) {
			if (tls_pump(p[1].revents) < 0) {
				log_warn("egress upstream failed", "host=%s error=%s code=%d",
					 log_q(c->route->up_host), log_q(tls_error_word()),
					 tls_error_code());
				x->r->end = EE_UPSTREAM_ERROR;
				return;
			}
		}
		/* The workload's side closed whole (not only its write side, which is a read of 0):
		 * nobody is left to answer, whatever the route was waiting for. */
		if (n > 0 && (p[0].revents & (POLLERR | POLLNVAL | POLLHUP))) {
			x->r->end = EE_CLIENT_GONE;
			return;
		}
		/* An engine that already holds a record (or the peer's end) has nothing to poll
		 * for: the next step reads it, or the route has stalled and times out. */
	}
}

void egress_route_run(const struct egress_route_call *c, struct egress_route_result *r)
{
	struct relay x;
	long n, take;
	int tmo = c->io_timeout_ms > 0 ? c->io_timeout_ms : 10000;
	int client_fl, up_fl;

	memset(r, 0, sizeof(*r));
	r->reason = ER_ROUTE;
	r->end = EE_CLOSED;
	memset(&x, 0, sizeof(x));
	x.c = c;
	x.r = r;
	x.st.in_line = true;
	r->bytes_up = c->head->raw_len + c->head->rest_len;

	/* Framing first: a request no two parsers read the same never reaches the upstream. */
	n = egress_route_rewrite_framed(c->head, c->route, c->secret, c->secret_len, head_out,
					sizeof(head_out), &x.body);
	take = n < 0 ? -1 : egress_body_take(&x.body, (const uint8_t *)c->head->rest,
					     c->head->rest_len);
	if (n < 0 || take < 0) {
		explicit_bzero(head_out, sizeof(head_out));
		r->reason = ER_BAD_REQUEST;
		answer(c, r, "400 Bad Request", "bad_request");
		return;
	}
	x.rest_take = (size_t)take;
	x.up = (const uint8_t *)head_out;
	x.up_len = (size_t)n;

	/* Both sockets are non-blocking while the route runs (one loop moves both ways) and get
	 * their flags back at its end: the worker goes on with blocking writes. */
	client_fl = fcntl(c->client_fd, F_GETFL);
	up_fl = fcntl(c->upstream_fd, F_GETFL);
	if (set_nonblock(c->client_fd) < 0 || tls_load_anchors(c->ca_file) < 0 ||
	    tls_handshake(c->upstream_fd, c->route->up_host, tmo) < 0) {
		if (client_fl >= 0)
			fcntl(c->client_fd, F_SETFL, client_fl);
		if (up_fl >= 0)
			fcntl(c->upstream_fd, F_SETFL, up_fl);
		log_warn("egress upstream tls failed", "host=%s error=%s code=%d",
			 log_q(c->route->up_host), log_q(tls_error_word()), tls_error_code());
		explicit_bzero(head_out, sizeof(head_out));
		r->reason = ER_UPSTREAM_TLS_FAILED;
		answer(c, r, "502 Bad Gateway", "upstream_tls_failed");
		return;
	}
	egress_mask_init(&mask, c->secret, c->secret_len);
	relay(&x);
	if (r->end != EE_UPSTREAM_ERROR)
		tls_close();
	if (r->end == EE_CLOSED)
		shutdown(c->client_fd, SHUT_WR);
	if (client_fl >= 0)
		fcntl(c->client_fd, F_SETFL, client_fl);
	if (up_fl >= 0)
		fcntl(c->upstream_fd, F_SETFL, up_fl);
	r->status = x.st.status;
	if (r->reason == ER_ROUTE && r->status >= 300 && r->status < 400)
		r->reason = ER_REDIRECT_RETURNED;
	/* The head carried the secret: it does not stay in memory past the route. */
	explicit_bzero(head_out, sizeof(head_out));
	explicit_bzero(up_buf, sizeof(up_buf));
	explicit_bzero(down_buf, sizeof(down_buf));
	explicit_bzero(masked, sizeof(masked));
	explicit_bzero(&mask, sizeof(mask));
	tls_wipe();
}
