/* multipart.c: the streaming multipart/form-data parser (multipart.h). Calls only base.
 *
 * The delimiter is CRLF "--" boundary, and a boundary holds no CR, so a CR can only begin a
 * delimiter at byte 0 of it: when a partial match fails, none of the matched bytes can begin
 * another match, they are all data, equal to the delimiter's first k bytes, and the byte that
 * broke the match is looked at afresh. That is why held-back bytes come from p->delim. */
#include <string.h>
#include <strings.h>

#include "e2b/multipart.h"

enum {
	S_PREAMBLE, /* before the first delimiter: bytes dropped */
	S_AFTER,    /* a delimiter matched: "--", padding or CRLF next */
	S_DASH,     /* "-" seen after a delimiter: the second one closes the message */
	S_PAD,      /* transport padding after a delimiter */
	S_LF,       /* CR seen after a delimiter */
	S_HEAD,     /* a header line */
	S_HEAD_LF,  /* CR seen in the header lines */
	S_BODY,     /* a part's body */
	S_DONE,     /* after the closing delimiter: an epilogue, dropped */
	S_ERROR,
};

static bool is_token(char c)
{
	return c > 0x20 && c < 0x7f && !strchr("()<>@,;:\\\"/[]?=", c);
}

static bool is_bchar(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c != '\0' && strchr("'()+_,-./:=? ", c));
}

static char *skip_ws(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	return s;
}

/* One "; key=value" of a parameter list at *cur, in place: the value is unquoted and
 * NUL-terminated over the bytes it came from, from its '=' on, so every write lands on a byte
 * already read and the key (before the '=') stays. 1: *key (klen bytes, not terminated) and
 * *val set; 0: the list ended (a trailing ';' is allowed); ERR_PARSE. In a quoted value a
 * backslash escapes a special character and is kept before any other (as Go's mime does). */
static int param_next(char **cur, const char **key, size_t *klen, const char **val)
{
	char *r = skip_ws(*cur), *w;

	if (*r == '\0')
		return 0;
	if (*r != ';')
		return ERR_PARSE;
	r = skip_ws(r + 1);
	if (*r == '\0')
		return 0;
	for (*key = r; is_token(*r); r++)
		;
	*klen = (size_t)(r - *key);
	r = skip_ws(r);
	if (*klen == 0 || *r != '=')
		return ERR_PARSE;
	*val = w = r;
	r = skip_ws(r + 1);
	if (*r == '"') {
		for (r++; *r != '"'; r++) {
			if (*r == '\0')
				return ERR_PARSE;
			if (*r == '\\' && r[1] != '\0' && !is_token(r[1]) && r[1] != ' ')
				r++;
			*w++ = *r;
		}
		r++;
	} else {
		if (!is_token(*r))
			return ERR_PARSE;
		while (is_token(*r))
			*w++ = *r++;
	}
	*w = '\0';
	*cur = r;
	return 1;
}

static bool key_is(const char *key, size_t klen, const char *want)
{
	return klen == strlen(want) && strncasecmp(key, want, klen) == 0;
}

/* The leading value of a header ("multipart/form-data", "form-data"): its end, or NULL when
 * it is not `want`. */
static char *lead_is(char *s, const char *want)
{
	size_t n = strlen(want);

	s = skip_ws(s);
	if (strncasecmp(s, want, n) != 0)
		return NULL;
	s += n;
	return *skip_ws(s) == ';' || *skip_ws(s) == '\0' ? s : NULL;
}

static int boundary_set(struct multipart *p, const char *b)
{
	size_t n = strlen(b);

	if (n == 0 || n > MULTIPART_BOUNDARY_MAX || b[n - 1] == ' ')
		return ERR_PARSE;
	for (size_t i = 0; i < n; i++)
		if (!is_bchar(b[i]))
			return ERR_PARSE;
	memcpy(p->delim, "\r\n--", 4);
	memcpy(p->delim + 4, b, n);
	p->dlen = (uint8_t)(n + 4);
	return 0;
}

int multipart_init(struct multipart *p, const char *content_type, char *hdr, uint32_t hdr_cap)
{
	char ct[256], *cur;
	const char *key, *val, *boundary = NULL;
	size_t klen;
	int r;

	ASSERT(hdr_cap >= 64);
	memset(p, 0, sizeof(*p));
	p->hdr = hdr;
	p->hdr_cap = hdr_cap;
	p->name = p->filename = -1;
	p->state = S_PREAMBLE;
	p->k = 2; /* the first delimiter may open the body: its CRLF counts as seen */
	if (!content_type || strlen(content_type) >= sizeof(ct))
		return ERR_PARSE;
	strcpy(ct, content_type);
	if (!(cur = lead_is(ct, "multipart/form-data")))
		return ERR_PARSE;
	while ((r = param_next(&cur, &key, &klen, &val)) == 1) {
		if (!key_is(key, klen, "boundary"))
			continue;
		if (boundary)
			return ERR_PARSE;
		boundary = val;
	}
	if (r < 0 || !boundary)
		return ERR_PARSE;
	return boundary_set(p, boundary);
}

/* The Content-Disposition line's value (in place in hdr): name and filename kept. */
static int disposition(struct multipart *p, char *v)
{
	char *cur = lead_is(v, "form-data");
	bool form = cur != NULL;
	const char *key, *val;
	size_t klen;
	int r;

	if (p->disposed)
		return ERR_PARSE; /* a second Content-Disposition */
	p->disposed = true;
	if (!form) {
		cur = skip_ws(v);
		while (is_token(*cur))
			cur++;
	}
	while ((r = param_next(&cur, &key, &klen, &val)) == 1) {
		int32_t *slot = key_is(key, klen, "name") ? &p->name
				: key_is(key, klen, "filename") ? &p->filename : NULL;
		if (!slot)
			continue;
		if (*slot >= 0)
			return ERR_PARSE;
		*slot = (int32_t)(val - p->hdr);
	}
	if (!form)
		p->name = -1; /* not a form field: no name */
	return r;
}

/* A complete header line at hdr[line..hlen) (its CRLF taken): kept when it is the
 * Content-Disposition, dropped otherwise. */
static int header_line(struct multipart *p)
{
	char *line = p->hdr + p->line, *colon;
	int r;

	p->hdr[p->hlen] = '\0';
	if (++p->nlines > MULTIPART_MAX_HEADERS)
		return ERR_LIMIT;
	colon = strchr(line, ':');
	if (!colon || colon == line)
		return ERR_PARSE;
	for (char *c = line; c < colon; c++)
		if (!is_token(*c))
			return ERR_PARSE; /* also refuses obs-fold, which begins with a space */
	if (colon - line != 19 || strncasecmp(line, "content-disposition", 19) != 0) {
		p->hlen = p->line;
		return 0;
	}
	if ((r = disposition(p, colon + 1)) < 0)
		return r;
	p->line = p->hlen = p->hlen + 1;
	return 0;
}

/* S_PREAMBLE and S_BODY: data up to a delimiter. Body data is reported (S_BODY), preamble
 * data dropped. */
static int match(struct multipart *p, const uint8_t *in, size_t len, size_t *i,
		 struct http_slice *s)
{
	bool body = p->state == S_BODY;
	size_t held;

	if (p->k == 0) {
		const uint8_t *cr = memchr(in + *i, '\r', len - *i);
		size_t n = cr ? (size_t)(cr - (in + *i)) : len - *i;

		if (n == 0) {
			p->k = 1;
			(*i)++;
			return MULTIPART_EV_NEED_MORE;
		}
		s->data = in + *i;
		s->len = n;
		*i += n;
		return body ? MULTIPART_EV_BODY : MULTIPART_EV_NEED_MORE;
	}
	if (in[*i] == (uint8_t)p->delim[p->k]) {
		(*i)++;
		if (++p->k < p->dlen)
			return MULTIPART_EV_NEED_MORE;
		p->k = 0;
		p->state = S_AFTER;
		if (!p->in_part)
			return MULTIPART_EV_NEED_MORE;
		p->in_part = false;
		return MULTIPART_EV_PART_END;
	}
	held = p->k;
	p->k = 0;
	if (!body)
		return MULTIPART_EV_NEED_MORE;
	s->data = (const uint8_t *)p->delim;
	s->len = held;
	return MULTIPART_EV_BODY;
}

/* The bytes right after a delimiter, one at a time. */
static int after(struct multipart *p, uint8_t c)
{
	switch (p->state) {
	case S_AFTER:
		p->state = c == '-' ? S_DASH : c == '\r' ? S_LF : S_PAD;
		if (p->state == S_PAD && c != ' ' && c != '\t')
			return ERR_PARSE;
		return MULTIPART_EV_NEED_MORE;
	case S_DASH:
		if (c != '-')
			return ERR_PARSE;
		p->state = S_DONE;
		return MULTIPART_EV_DONE;
	case S_PAD:
		if (c == '\r')
			p->state = S_LF;
		else if (c != ' ' && c != '\t')
			return ERR_PARSE;
		return MULTIPART_EV_NEED_MORE;
	default: /* S_LF */
		if (c != '\n')
			return ERR_PARSE;
		p->state = S_HEAD;
		p->hlen = p->line = 0;
		p->nlines = 0;
		p->name = p->filename = -1;
		p->disposed = false;
		return MULTIPART_EV_NEED_MORE;
	}
}

static int head(struct multipart *p, uint8_t c)
{
	if (p->state == S_HEAD_LF) {
		if (c != '\n')
			return ERR_PARSE;
		p->state = S_HEAD;
		if (p->hlen > p->line)
			return header_line(p);
		p->state = S_BODY;
		p->in_part = true;
		return MULTIPART_EV_PART;
	}
	if (c == '\r') {
		p->state = S_HEAD_LF;
		return MULTIPART_EV_NEED_MORE;
	}
	if (c == '\n' || c == '\0')
		return ERR_PARSE;
	if (p->hlen + 1 >= p->hdr_cap)
		return ERR_LIMIT;
	p->hdr[p->hlen++] = (char)c;
	return MULTIPART_EV_NEED_MORE;
}

static int step(struct multipart *p, const uint8_t *in, size_t len, size_t *i,
		struct http_slice *s)
{
	switch (p->state) {
	case S_PREAMBLE:
	case S_BODY:
		return match(p, in, len, i, s);
	case S_HEAD:
	case S_HEAD_LF:
		return head(p, in[(*i)++]);
	case S_DONE:
		*i = len;
		return MULTIPART_EV_NEED_MORE;
	default:
		return after(p, in[(*i)++]);
	}
}

int multipart_feed(struct multipart *p, const uint8_t *in, size_t len, size_t *consumed,
		   struct http_slice *slice)
{
	size_t i = 0;
	int ev = MULTIPART_EV_NEED_MORE;

	slice->data = NULL;
	slice->len = 0;
	if (p->state == S_ERROR) {
		*consumed = 0;
		return ERR_STATE;
	}
	while (ev == MULTIPART_EV_NEED_MORE && i < len)
		ev = step(p, in, len, &i, slice);
	ASSERT(i <= len);
	*consumed = i;
	if (ev < 0)
		p->state = S_ERROR;
	if (ev != MULTIPART_EV_BODY) {
		slice->data = NULL;
		slice->len = 0;
	}
	return ev;
}

int multipart_finish(const struct multipart *p)
{
	return p->state == S_DONE ? MULTIPART_EV_DONE : ERR_PARSE;
}

const char *multipart_name(const struct multipart *p)
{
	return p->name >= 0 ? p->hdr + p->name : NULL;
}

const char *multipart_filename(const struct multipart *p)
{
	return p->filename >= 0 ? p->hdr + p->filename : NULL;
}
