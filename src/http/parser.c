/* parser.c: the resumable HTTP/1.1 message parser (responses and requests). */
#include <errno.h>
#include <string.h>

#include "http.h"

enum {
	ST_START,        /* collecting the start line (leading empty lines skipped for requests) */
	ST_HEADERS,      /* collecting header lines */
	ST_BODY_NONE,
	ST_BODY_LENGTH,
	ST_BODY_CLOSE,
	ST_CHUNK_SIZE,
	ST_CHUNK_EXT,
	ST_CHUNK_SIZE_LF,
	ST_CHUNK_DATA,
	ST_CHUNK_DATA_CR,
	ST_CHUNK_DATA_LF,
	ST_TRAILER_START,
	ST_TRAILER_LINE,
	ST_TRAILER_LF,
	ST_TRAILER_END_LF,
	ST_DONE,
	ST_UPGRADED,
	ST_ERROR,
};

static uint32_t head_limit(const struct http_parser *p)
{
	return p->head_cap < LIMIT_HTTP_HEAD_BYTES ? p->head_cap : LIMIT_HTTP_HEAD_BYTES;
}

void http_parser_init(struct http_parser *p, enum http_parser_kind kind, char *head,
		      uint32_t head_cap)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->head = head;
	p->head_cap = head_cap;
	p->body_limit = UINT64_MAX;
	p->state = ST_START;
}

void http_parser_reset(struct http_parser *p)
{
	http_parser_init(p, p->kind, p->head, p->head_cap);
}

static bool is_tchar(uint8_t c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool is_ctl(uint8_t c)
{
	return (c < 0x20 && c != '\t') || c == 0x7f;
}

static int lower(int c)
{
	return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static bool ieq(const char *a, const char *b)
{
	while (*a && lower((uint8_t)*a) == lower((uint8_t)*b))
		a++, b++;
	return *a == '\0' && *b == '\0';
}

const char *http_parser_header(const struct http_parser *p, const char *name)
{
	for (uint32_t i = 0; i < p->nhdr; i++)
		if (ieq(p->head + p->hdr[i].name, name))
			return p->head + p->hdr[i].value;
	return NULL;
}

/* True when the comma-separated list holds `token` (case-insensitive). */
static bool list_has(const char *list, const char *token)
{
	size_t tl = strlen(token);

	while (*list) {
		while (*list == ' ' || *list == '\t' || *list == ',')
			list++;
		const char *s = list;
		while (*list && *list != ',')
			list++;
		const char *e = list;
		while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - s) == tl) {
			size_t k = 0;
			while (k < tl && lower((uint8_t)s[k]) == lower((uint8_t)token[k]))
				k++;
			if (k == tl)
				return true;
		}
	}
	return false;
}

static int parse_content_length(const char *v, uint64_t *out)
{
	uint64_t n = 0;

	if (*v == '\0')
		return ERR_PARSE;
	for (; *v; v++) {
		if (*v < '0' || *v > '9' || n > (UINT64_MAX - 9) / 10)
			return ERR_PARSE;
		n = n * 10 + (uint64_t)(*v - '0');
	}
	*out = n;
	return 0;
}

/* "HTTP/1.x" at s: returns x, or -1. */
static int parse_version(const char *s)
{
	if (strncmp(s, "HTTP/1.", 7) != 0 || s[7] < '0' || s[7] > '9')
		return -1;
	return s[7] - '0';
}

static int parse_status_line(struct http_parser *p, uint32_t off)
{
	char *s = p->head + off;
	int v = parse_version(s);

	if (v < 0 || s[8] != ' ')
		return ERR_PARSE;
	for (int i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			return ERR_PARSE;
	if (s[12] != '\0' && s[12] != ' ')
		return ERR_PARSE;
	p->minor_version = v;
	p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
	if (p->status < 100 || p->status > 599)
		return ERR_PARSE;
	p->reason = s[12] ? off + 13 : off + 12;
	return 0;
}

static int parse_request_line(struct http_parser *p, uint32_t off)
{
	char *s = p->head + off;
	char *sp1, *sp2;
	int v;

	sp1 = strchr(s, ' ');
	if (!sp1 || sp1 == s)
		return ERR_PARSE;
	for (char *c = s; c < sp1; c++)
		if (!is_tchar((uint8_t)*c))
			return ERR_PARSE;
	sp2 = strchr(sp1 + 1, ' ');
	if (!sp2 || sp2 == sp1 + 1)
		return ERR_PARSE;
	for (char *c = sp1 + 1; c < sp2; c++)
		if ((uint8_t)*c <= ' ' || *c == 0x7f)
			return ERR_PARSE;
	v = parse_version(sp2 + 1);
	if (v < 0 || sp2[9] != '\0')
		return ERR_PARSE;
	*sp1 = '\0';
	*sp2 = '\0';
	p->method = off;
	p->target = off + (uint32_t)(sp1 + 1 - s);
	p->minor_version = v;
	return 0;
}

static int parse_header_line(struct http_parser *p, uint32_t off)
{
	char *s = p->head + off;
	char *colon = strchr(s, ':');
	char *v, *e;

	/* A line starting with whitespace continues the previous one (obs-fold): refused, as
	 * RFC 9112 allows, since a folded value is a classic smuggling vector. */
	if (!colon || colon == s)
		return ERR_PARSE;
	for (char *c = s; c < colon; c++)
		if (!is_tchar((uint8_t)*c))
			return ERR_PARSE;
	if (p->nhdr == LIMIT_HTTP_HEADERS)
		return HTTP_ERR_HEAD_TOO_BIG;
	*colon = '\0';
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	e = v + strlen(v);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*e = '\0';
	p->hdr[p->nhdr].name = off;
	p->hdr[p->nhdr].value = (uint32_t)(v - p->head);
	p->nhdr++;
	return 0;
}

static void forget_head(struct http_parser *p)
{
	p->head_len = 0;
	p->line_start = 0;
	p->nhdr = 0;
	p->state = ST_START;
}

/* The empty line ended the head: decide framing. Returns the event to report, or
 * HTTP_EV_NEED_MORE for an interim 1xx response, which is skipped. */
static int finish_head(struct http_parser *p)
{
	const char *te = NULL;
	bool has_length = false;

	for (uint32_t i = 0; i < p->nhdr; i++) {
		const char *name = p->head + p->hdr[i].name;
		const char *value = p->head + p->hdr[i].value;
		if (ieq(name, "transfer-encoding")) {
			if (te)
				return ERR_PARSE;
			te = value;
		} else if (ieq(name, "content-length")) {
			uint64_t n;
			if (parse_content_length(value, &n) != 0)
				return ERR_PARSE;
			if (has_length && n != p->content_length)
				return ERR_PARSE;
			has_length = true;
			p->content_length = n;
		}
	}
	{
		const char *conn = http_parser_header(p, "connection");
		if (p->minor_version >= 1)
			p->keep_alive = !(conn && list_has(conn, "close"));
		else
			p->keep_alive = conn && list_has(conn, "keep-alive");
	}
	/* Both framings at once is how requests get smuggled; we decode no other coding. */
	if (te && (has_length || !ieq(te, "chunked")))
		return ERR_PARSE;

	if (p->kind == HTTP_PARSE_RESPONSE) {
		if (p->status == 101) {
			p->framing = HTTP_BODY_NONE;
			p->state = ST_UPGRADED;
			return HTTP_EV_UPGRADE;
		}
		if (p->status < 200) {
			forget_head(p);
			return HTTP_EV_NEED_MORE;
		}
		if (p->head_request || p->status == 204 || p->status == 304)
			p->framing = HTTP_BODY_NONE;
		else if (te)
			p->framing = HTTP_BODY_CHUNKED;
		else if (has_length)
			p->framing = HTTP_BODY_LENGTH;
		else {
			p->framing = HTTP_BODY_CLOSE;
			p->keep_alive = false;
		}
	} else {
		p->framing = te ? HTTP_BODY_CHUNKED : has_length ? HTTP_BODY_LENGTH : HTTP_BODY_NONE;
	}

	p->skipped = 0;
	switch (p->framing) {
	case HTTP_BODY_NONE:
		p->state = ST_BODY_NONE;
		break;
	case HTTP_BODY_LENGTH:
		if (p->content_length > p->body_limit)
			return HTTP_ERR_BODY_TOO_BIG;
		p->remaining = p->content_length;
		p->state = ST_BODY_LENGTH;
		break;
	case HTTP_BODY_CHUNKED:
		p->digits = 0;
		p->remaining = 0;
		p->state = ST_CHUNK_SIZE;
		break;
	case HTTP_BODY_CLOSE:
		p->state = ST_BODY_CLOSE;
		break;
	}
	return HTTP_EV_HEAD;
}

/* A whole line sits at head[line_start..head_len), ending in LF (not stored). */
static int end_line(struct http_parser *p)
{
	uint32_t off = p->line_start;
	uint32_t n = p->head_len - off;
	int r;

	if (n == 0 || p->head[p->head_len - 1] != '\r')
		return ERR_PARSE;
	p->head[p->head_len - 1] = '\0';
	for (uint32_t i = off; i < p->head_len - 1; i++)
		if (is_ctl((uint8_t)p->head[i]))
			return ERR_PARSE;
	p->line_start = p->head_len;

	if (p->state == ST_START) {
		if (n == 1 && p->kind == HTTP_PARSE_REQUEST) {
			/* RFC 9112 2.2: ignore empty lines before a request line, but bounded. */
			p->skipped += 2;
			if (p->skipped > head_limit(p))
				return HTTP_ERR_HEAD_TOO_BIG;
			forget_head(p);
			return HTTP_EV_NEED_MORE;
		}
		r = p->kind == HTTP_PARSE_RESPONSE ? parse_status_line(p, off)
						   : parse_request_line(p, off);
		if (r == 0)
			p->state = ST_HEADERS;
		return r;
	}
	if (n == 1)
		return finish_head(p);
	return parse_header_line(p, off);
}

/* Copies input into the head up to and including a line end; returns the bytes taken. */
static int take_line(struct http_parser *p, const uint8_t *in, size_t len, size_t *taken)
{
	const uint8_t *lf = memchr(in, '\n', len);
	size_t n = lf ? (size_t)(lf - in) : len;

	*taken = 0;
	/* one byte stays free for the NUL that ends the last string */
	if (n >= head_limit(p) - p->head_len)
		return HTTP_ERR_HEAD_TOO_BIG;
	memcpy(p->head + p->head_len, in, n);
	p->head_len += (uint32_t)n;
	ASSERT(p->head_len < head_limit(p));
	*taken = lf ? n + 1 : n;
	return lf ? end_line(p) : HTTP_EV_NEED_MORE;
}

/* Metadata skipped in chunked framing (extensions, trailers) counts against the head limit. */
static int skip_meta(struct http_parser *p)
{
	if (++p->skipped > head_limit(p))
		return HTTP_ERR_HEAD_TOO_BIG;
	return 0;
}

/* One byte of a chunk's size line, before its extensions. */
static int chunk_size_byte(struct http_parser *p, uint8_t c)
{
	int h = hex_value(c);

	if (h >= 0) {
		/* 15 hex digits: sizes stay below 2^60, no overflow */
		if (++p->digits > 15)
			return ERR_PARSE;
		p->remaining = p->remaining * 16 + (uint64_t)h;
		return 0;
	}
	if (p->digits == 0)
		return ERR_PARSE;
	if (c == '\r') {
		p->state = ST_CHUNK_SIZE_LF;
		return 0;
	}
	if (c == ';' || c == ' ' || c == '\t') {
		p->state = ST_CHUNK_EXT;
		return skip_meta(p);
	}
	return ERR_PARSE;
}

/* One byte of chunked framing outside chunk data. */
static int chunk_byte(struct http_parser *p, uint8_t c)
{
	switch (p->state) {
	case ST_CHUNK_SIZE:
		return chunk_size_byte(p, c);
	case ST_CHUNK_EXT:
		if (c == '\r') {
			p->state = ST_CHUNK_SIZE_LF;
			return 0;
		}
		return is_ctl(c) ? ERR_PARSE : skip_meta(p);
	case ST_CHUNK_SIZE_LF:
		if (c != '\n')
			return ERR_PARSE;
		p->skipped = 0;
		if (p->remaining == 0) {
			p->state = ST_TRAILER_START;
			return 0;
		}
		if (p->remaining > p->body_limit - p->body_total)
			return HTTP_ERR_BODY_TOO_BIG;
		p->state = ST_CHUNK_DATA;
		return 0;
	case ST_CHUNK_DATA_CR:
		if (c != '\r')
			return ERR_PARSE;
		p->state = ST_CHUNK_DATA_LF;
		return 0;
	case ST_CHUNK_DATA_LF:
		if (c != '\n')
			return ERR_PARSE;
		p->digits = 0;
		p->skipped = 0;
		p->state = ST_CHUNK_SIZE;
		return 0;
	case ST_TRAILER_START:
		if (c == '\r') {
			p->state = ST_TRAILER_END_LF;
			return 0;
		}
		if (!is_tchar(c))
			return ERR_PARSE;
		p->state = ST_TRAILER_LINE;
		return skip_meta(p);
	case ST_TRAILER_LINE:
		if (c == '\r') {
			p->state = ST_TRAILER_LF;
			return 0;
		}
		return is_ctl(c) ? ERR_PARSE : skip_meta(p);
	case ST_TRAILER_LF:
		if (c != '\n')
			return ERR_PARSE;
		p->state = ST_TRAILER_START;
		return 0;
	case ST_TRAILER_END_LF:
		if (c != '\n')
			return ERR_PARSE;
		p->state = ST_DONE;
		return HTTP_EV_DONE;
	}
	return ERR_STATE;
}

static int body_slice(struct http_parser *p, const uint8_t *in, size_t n, struct http_slice *slice)
{
	slice->data = in;
	slice->len = n;
	p->body_total += n;
	return HTTP_EV_BODY;
}

int http_parser_feed(struct http_parser *p, const uint8_t *in, size_t len, size_t *consumed,
		     struct http_slice *slice)
{
	size_t i = 0, n;
	int r = 0;

	slice->data = NULL;
	slice->len = 0;
	for (;;) {
		switch (p->state) {
		case ST_START:
		case ST_HEADERS:
			if (i == len)
				goto out;
			r = take_line(p, in + i, len - i, &n);
			i += n;
			if (r != HTTP_EV_NEED_MORE)
				goto out;
			continue;
		case ST_BODY_NONE:
			p->state = ST_DONE;
			r = HTTP_EV_DONE;
			goto out;
		case ST_BODY_LENGTH:
			if (p->remaining == 0) {
				p->state = ST_DONE;
				r = HTTP_EV_DONE;
				goto out;
			}
			if (i == len)
				goto out;
			n = len - i < p->remaining ? len - i : (size_t)p->remaining;
			p->remaining -= n;
			r = body_slice(p, in + i, n, slice);
			i += n;
			goto out;
		case ST_BODY_CLOSE:
			if (i == len)
				goto out;
			n = len - i;
			if (n > p->body_limit - p->body_total) {
				r = HTTP_ERR_BODY_TOO_BIG;
				goto out;
			}
			r = body_slice(p, in + i, n, slice);
			i += n;
			goto out;
		case ST_CHUNK_DATA:
			if (i == len)
				goto out;
			n = len - i < p->remaining ? len - i : (size_t)p->remaining;
			p->remaining -= n;
			if (p->remaining == 0)
				p->state = ST_CHUNK_DATA_CR;
			r = body_slice(p, in + i, n, slice);
			i += n;
			goto out;
		case ST_DONE:
		case ST_UPGRADED:
		case ST_ERROR:
			r = ERR_STATE;
			goto out;
		default:
			if (i == len)
				goto out;
			r = chunk_byte(p, in[i++]);
			if (r != 0)
				goto out;
			continue;
		}
	}
out:
	*consumed = i;
	if (r < 0 && r != ERR_STATE)
		p->state = ST_ERROR;
	return r;
}

int http_parser_finish(struct http_parser *p)
{
	if (p->state == ST_BODY_CLOSE) {
		p->state = ST_DONE;
		return HTTP_EV_DONE;
	}
	if (p->state == ST_START && p->head_len == 0 && p->skipped == 0)
		return HTTP_EV_NEED_MORE;
	if (p->state == ST_DONE || p->state == ST_UPGRADED || p->state == ST_ERROR)
		return ERR_STATE;
	p->state = ST_ERROR;
	return HTTP_ERR_TRUNCATED;
}
