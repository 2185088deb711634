/* json.c: the bounded JSON reader (validating, iterative, tokens into caller storage) and writer. */
#include <errno.h>
#include <string.h>

#include "json.h"

/* ---- UTF-8 ---- */

/* Length of the well-formed UTF-8 sequence at s[0..n) (Unicode 15, table 3-7: no overlongs, no
 * surrogates, nothing above U+10FFFF), or 0 with *bad set to the index of the first byte that
 * cannot continue it (n when the input ends inside the sequence). */
static size_t utf8_seq(const uint8_t *s, size_t n, size_t *bad)
{
	uint8_t c = s[0], lo = 0x80, hi = 0xBF;
	size_t len, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else {
		*bad = 0;
		return 0;
	}
	for (i = 1; i < len; i++) {
		if (i == n) {
			*bad = n;
			return 0;
		}
		if (s[i] < lo || s[i] > hi) {
			*bad = i;
			return 0;
		}
		lo = 0x80;
		hi = 0xBF;
	}
	return len;
}

static size_t utf8_put(uint32_t cp, uint8_t out[4])
{
	if (cp < 0x80) {
		out[0] = (uint8_t)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (uint8_t)(0xC0 | cp >> 6);
		out[1] = (uint8_t)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (uint8_t)(0xE0 | cp >> 12);
		out[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
		out[2] = (uint8_t)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (uint8_t)(0xF0 | cp >> 18);
	out[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F));
	out[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F));
	out[3] = (uint8_t)(0x80 | (cp & 0x3F));
	return 4;
}

/* ---- reader ----
 * One pass over the input, no recursion: open containers live on a stack of token indices
 * bounded by JSON_MAX_DEPTH. Every error names the first byte at which the input stops being a
 * prefix of some valid document, so err_offset points at the culprit (or at len when the input
 * just ends too early). */

struct reader {
	const uint8_t *s;
	size_t len;
	size_t pos;
	struct json_doc *doc;
	uint32_t depth;
	uint32_t stack[JSON_MAX_DEPTH];
};

static int fail(struct reader *r, int code, size_t at, const char *what)
{
	r->doc->ntok = 0;
	r->doc->err_offset = at;
	r->doc->err_what = what;
	return code;
}

static void skip_ws(struct reader *r)
{
	while (r->pos < r->len) {
		uint8_t c = r->s[r->pos];

		if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
			return;
		r->pos++;
	}
}

static bool is_digit(struct reader *r, size_t p)
{
	return p < r->len && r->s[p] >= '0' && r->s[p] <= '9';
}

static int new_token(struct reader *r, enum json_type type, bool counts, uint32_t *idx)
{
	struct json_doc *d = r->doc;
	struct json_token *t;

	if (d->ntok == d->cap)
		return fail(r, ERR_LIMIT, r->pos, "more values than the token limit");
	*idx = d->ntok++;
	t = &d->tok[*idx];
	t->type = type;
	t->start = (uint32_t)r->pos;
	t->end = (uint32_t)r->pos;
	t->children = 0;
	t->next = *idx + 1;
	if (counts && r->depth)
		d->tok[r->stack[r->depth - 1]].children++;
	return 0;
}

/* Four hex digits at q. After a high surrogate (want_low) they must encode a low surrogate;
 * otherwise they must not, since a low surrogate cannot stand alone. */
static int scan_hex4(struct reader *r, size_t q, bool want_low, uint32_t *cp)
{
	uint32_t v = 0;
	int d;

	for (size_t i = 0; i < 4; i++) {
		if (q + i == r->len)
			return fail(r, ERR_PARSE, r->len, "unterminated string");
		d = hex_value(r->s[q + i]);
		if (d < 0)
			return fail(r, ERR_PARSE, q + i, "invalid \\u escape");
		v = v << 4 | (uint32_t)d;
		if (want_low && ((i == 0 && v != 0xD) || (i == 1 && v < 0xDC)))
			return fail(r, ERR_PARSE, q + i, "high surrogate without a low surrogate");
		if (!want_low && i == 1 && v >= 0xDC && v <= 0xDF)
			return fail(r, ERR_PARSE, q + i, "lone low surrogate");
	}
	*cp = v;
	return 0;
}

/* The escape whose backslash is at *pp; on success *pp is just past it. */
static int scan_escape(struct reader *r, size_t *pp)
{
	size_t p = *pp + 1;
	uint32_t cp, low;
	int rc;

	if (p == r->len)
		return fail(r, ERR_PARSE, r->len, "unterminated string");
	switch (r->s[p]) {
	case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
		*pp = p + 1;
		return 0;
	case 'u':
		break;
	default:
		return fail(r, ERR_PARSE, p, "invalid escape");
	}
	rc = scan_hex4(r, p + 1, false, &cp);
	if (rc)
		return rc;
	p += 5;
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		if (p == r->len || (r->s[p] == '\\' && p + 1 == r->len))
			return fail(r, ERR_PARSE, r->len, "unterminated string");
		if (r->s[p] != '\\')
			return fail(r, ERR_PARSE, p, "high surrogate without a low surrogate");
		if (r->s[p + 1] != 'u')
			return fail(r, ERR_PARSE, p + 1, "high surrogate without a low surrogate");
		rc = scan_hex4(r, p + 2, true, &low);
		if (rc)
			return rc;
		p += 6;
	}
	*pp = p;
	return 0;
}

/* The string whose opening quote is at r->pos; leaves r->pos past the closing quote. */
static int scan_string(struct reader *r, uint32_t idx)
{
	size_t p = r->pos + 1, k, bad;
	uint8_t c;
	int rc;

	r->doc->tok[idx].start = (uint32_t)p;
	for (;;) {
		if (p == r->len)
			return fail(r, ERR_PARSE, r->len, "unterminated string");
		c = r->s[p];
		if (c == '"')
			break;
		if (c < 0x20)
			return fail(r, ERR_PARSE, p, "control character in string");
		if (c == '\\') {
			rc = scan_escape(r, &p);
			if (rc)
				return rc;
			continue;
		}
		k = utf8_seq(r->s + p, r->len - p, &bad);
		if (!k)
			return fail(r, ERR_PARSE, p + bad, "invalid UTF-8 in string");
		p += k;
	}
	r->doc->tok[idx].end = (uint32_t)p;
	r->pos = p + 1;
	return 0;
}

static int scan_number(struct reader *r, uint32_t idx)
{
	size_t p = r->pos;

	if (r->s[p] == '-')
		p++;
	if (p == r->len)
		return fail(r, ERR_PARSE, p, "unterminated number");
	if (r->s[p] == '0') {
		p++;
		if (is_digit(r, p))
			return fail(r, ERR_PARSE, p, "leading zero in number");
	} else if (is_digit(r, p)) {
		while (is_digit(r, p))
			p++;
	} else {
		return fail(r, ERR_PARSE, p, "expected a digit");
	}
	if (p < r->len && r->s[p] == '.') {
		p++;
		if (!is_digit(r, p))
			return fail(r, ERR_PARSE, p, "expected a digit after '.'");
		while (is_digit(r, p))
			p++;
	}
	if (p < r->len && (r->s[p] == 'e' || r->s[p] == 'E')) {
		p++;
		if (p < r->len && (r->s[p] == '+' || r->s[p] == '-'))
			p++;
		if (!is_digit(r, p))
			return fail(r, ERR_PARSE, p, "expected a digit in exponent");
		while (is_digit(r, p))
			p++;
	}
	r->doc->tok[idx].end = (uint32_t)p;
	r->pos = p;
	return 0;
}

static int scan_literal(struct reader *r, uint32_t idx, const char *word)
{
	size_t p = r->pos;

	for (; *word; word++, p++) {
		if (p == r->len)
			return fail(r, ERR_PARSE, p, "unterminated literal");
		if (r->s[p] != (uint8_t)*word)
			return fail(r, ERR_PARSE, p, "invalid literal");
	}
	r->doc->tok[idx].end = (uint32_t)p;
	r->pos = p;
	return 0;
}

enum want { WANT_VALUE, WANT_KEY, WANT_NEXT };

static const char *const literal[] = {
	[JSON_TRUE] = "true",
	[JSON_FALSE] = "false",
	[JSON_NULL] = "null",
};

/* Starts the value at r->pos. A scalar is consumed whole; a container is pushed and left open
 * (its opening bracket consumed). */
static int value_begin(struct reader *r, bool *opened)
{
	enum json_type type;
	uint32_t idx;
	int rc;

	*opened = false;
	if (r->pos == r->len)
		return fail(r, ERR_PARSE, r->len, "unexpected end of input");
	switch (r->s[r->pos]) {
	case '{':
		type = JSON_OBJECT;
		break;
	case '[':
		type = JSON_ARRAY;
		break;
	case '"':
		type = JSON_STRING;
		break;
	case 't':
		type = JSON_TRUE;
		break;
	case 'f':
		type = JSON_FALSE;
		break;
	case 'n':
		type = JSON_NULL;
		break;
	case '-': case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		type = JSON_NUMBER;
		break;
	default:
		return fail(r, ERR_PARSE, r->pos, "expected a value");
	}
	if ((type == JSON_OBJECT || type == JSON_ARRAY) && r->depth == JSON_MAX_DEPTH)
		return fail(r, ERR_LIMIT, r->pos, "nesting deeper than the depth limit");
	rc = new_token(r, type, r->depth && r->doc->tok[r->stack[r->depth - 1]].type == JSON_ARRAY,
		       &idx);
	if (rc)
		return rc;
	switch (type) {
	case JSON_OBJECT:
	case JSON_ARRAY:
		r->stack[r->depth++] = idx;
		r->pos++;
		*opened = true;
		return 0;
	case JSON_STRING:
		return scan_string(r, idx);
	case JSON_NUMBER:
		return scan_number(r, idx);
	default:
		return scan_literal(r, idx, literal[type]);
	}
}

static int key_scan(struct reader *r)
{
	uint32_t idx;
	int rc;

	if (r->pos == r->len)
		return fail(r, ERR_PARSE, r->len, "unexpected end of input");
	if (r->s[r->pos] != '"')
		return fail(r, ERR_PARSE, r->pos, "expected a string key");
	rc = new_token(r, JSON_STRING, true, &idx);
	if (rc)
		return rc;
	rc = scan_string(r, idx);
	if (rc)
		return rc;
	skip_ws(r);
	if (r->pos == r->len)
		return fail(r, ERR_PARSE, r->len, "unexpected end of input");
	if (r->s[r->pos] != ':')
		return fail(r, ERR_PARSE, r->pos, "expected ':' after key");
	r->pos++;
	return 0;
}

static void container_close(struct reader *r)
{
	struct json_token *t = &r->doc->tok[r->stack[--r->depth]];

	r->pos++;
	t->end = (uint32_t)r->pos;
	t->next = r->doc->ntok;
}

int json_parse(struct json_doc *doc, const char *src, size_t len, struct json_token *tok,
	       uint32_t cap)
{
	struct reader r = { .s = (const uint8_t *)src, .len = len, .doc = doc };
	enum want want = WANT_VALUE;
	bool opened;
	int rc;

	doc->src = src;
	doc->len = len;
	doc->tok = tok;
	/* token indices travel as int */
	doc->cap = cap > INT32_MAX ? INT32_MAX : cap;
	doc->ntok = 0;
	doc->err_offset = 0;
	doc->err_what = NULL;
	if (len > UINT32_MAX)
		return fail(&r, ERR_LIMIT, 0, "document larger than 4 GiB");
	for (;;) {
		skip_ws(&r);
		if (want == WANT_VALUE) {
			rc = value_begin(&r, &opened);
			if (rc)
				return rc;
			want = WANT_NEXT;
			if (!opened)
				continue;
			skip_ws(&r);
			if (doc->tok[r.stack[r.depth - 1]].type == JSON_OBJECT) {
				if (r.pos < len && src[r.pos] == '}')
					container_close(&r);
				else
					want = WANT_KEY;
			} else {
				if (r.pos < len && src[r.pos] == ']')
					container_close(&r);
				else
					want = WANT_VALUE;
			}
		} else if (want == WANT_KEY) {
			rc = key_scan(&r);
			if (rc)
				return rc;
			want = WANT_VALUE;
		} else if (r.depth == 0) {
			if (r.pos != len)
				return fail(&r, ERR_PARSE, r.pos, "trailing characters after the value");
			return 0;
		} else {
			bool obj = doc->tok[r.stack[r.depth - 1]].type == JSON_OBJECT;

			if (r.pos == len)
				return fail(&r, ERR_PARSE, len, "unexpected end of input");
			if (src[r.pos] == ',') {
				r.pos++;
				want = obj ? WANT_KEY : WANT_VALUE;
			} else if (src[r.pos] == (obj ? '}' : ']')) {
				container_close(&r);
			} else {
				return fail(&r, ERR_PARSE, r.pos,
					    obj ? "expected ',' or '}'" : "expected ',' or ']'");
			}
		}
	}
}

/* ---- token access ---- */

static bool valid_idx(const struct json_doc *doc, int idx)
{
	return idx >= 0 && (uint32_t)idx < doc->ntok;
}

/* Decodes the character at *pos of a string the parser validated; returns its UTF-8 bytes. */
static size_t str_char(const uint8_t *s, size_t *pos, uint8_t out[4])
{
	size_t p = *pos;
	uint32_t cp = 0, low = 0;

	if (s[p] != '\\') {
		out[0] = s[p];
		*pos = p + 1;
		return 1;
	}
	*pos = p + 2;
	switch (s[p + 1]) {
	case 'b':
		out[0] = '\b';
		return 1;
	case 'f':
		out[0] = '\f';
		return 1;
	case 'n':
		out[0] = '\n';
		return 1;
	case 'r':
		out[0] = '\r';
		return 1;
	case 't':
		out[0] = '\t';
		return 1;
	case 'u':
		break;
	default:
		out[0] = s[p + 1];
		return 1;
	}
	for (int i = 0; i < 4; i++)
		cp = cp << 4 | (uint32_t)hex_value(s[p + 2 + i]);
	*pos = p + 6;
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		for (int i = 0; i < 4; i++)
			low = low << 4 | (uint32_t)hex_value(s[p + 8 + i]);
		cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
		*pos = p + 12;
	}
	return utf8_put(cp, out);
}

/* Compares string token idx, unescaped, with key[0..klen) without copying it anywhere. */
static bool str_equal(const struct json_doc *doc, int idx, const char *key, size_t klen)
{
	const struct json_token *t = &doc->tok[idx];
	const uint8_t *s = (const uint8_t *)doc->src;
	size_t p = t->start, k = 0, n;
	uint8_t ch[4];

	if (t->type != JSON_STRING)
		return false;
	while (p < t->end) {
		n = str_char(s, &p, ch);
		if (n > klen - k || memcmp(ch, key + k, n) != 0)
			return false;
		k += n;
	}
	return k == klen;
}

int json_obj_get(const struct json_doc *doc, int obj, const char *key)
{
	size_t klen = strlen(key);
	int i;

	if (!valid_idx(doc, obj) || doc->tok[obj].type != JSON_OBJECT)
		return -1;
	for (i = json_first(doc, obj); i >= 0; i = json_next(doc, obj, i + 1)) {
		if (str_equal(doc, i, key, klen))
			return i + 1;
	}
	return -1;
}

int json_first(const struct json_doc *doc, int idx)
{
	if (!valid_idx(doc, idx))
		return -1;
	if (doc->tok[idx].type != JSON_OBJECT && doc->tok[idx].type != JSON_ARRAY)
		return -1;
	return doc->tok[idx].children ? idx + 1 : -1;
}

int json_next(const struct json_doc *doc, int parent, int idx)
{
	uint32_t n;

	if (!valid_idx(doc, parent) || !valid_idx(doc, idx) || idx <= parent)
		return -1;
	n = doc->tok[idx].next;
	return n < doc->tok[parent].next ? (int)n : -1;
}

int json_str(const struct json_doc *doc, int idx, char *out, size_t out_size)
{
	const uint8_t *s = (const uint8_t *)doc->src;
	size_t p, k = 0, n;
	uint8_t ch[4];

	if (out_size)
		out[0] = '\0';
	if (!valid_idx(doc, idx) || doc->tok[idx].type != JSON_STRING)
		return -EINVAL;
	p = doc->tok[idx].start;
	while (p < doc->tok[idx].end) {
		n = str_char(s, &p, ch);
		/* a C string cannot carry U+0000; cutting it there would silently change the value */
		if (n == 1 && ch[0] == '\0') {
			if (out_size)
				out[0] = '\0';
			return -EINVAL;
		}
		if (out_size == 0 || n > out_size - 1 - k || k + n > INT32_MAX) {
			if (out_size)
				out[0] = '\0';
			return ERR_LIMIT;
		}
		memcpy(out + k, ch, n);
		k += n;
	}
	out[k] = '\0';
	return (int)k;
}

bool json_str_eq(const struct json_doc *doc, int idx, const char *s)
{
	return valid_idx(doc, idx) && str_equal(doc, idx, s, strlen(s));
}

int json_int(const struct json_doc *doc, int idx, int64_t *out)
{
	const struct json_token *t;
	uint64_t v = 0, limit = INT64_MAX;
	uint32_t p;
	bool neg = false;

	if (!valid_idx(doc, idx) || doc->tok[idx].type != JSON_NUMBER)
		return -EINVAL;
	t = &doc->tok[idx];
	p = t->start;
	if (doc->src[p] == '-') {
		neg = true;
		limit = (uint64_t)INT64_MAX + 1;
		p++;
	}
	/* a fraction or exponent makes it no integer, however large its integer part */
	for (uint32_t q = p; q < t->end; q++) {
		if (doc->src[q] < '0' || doc->src[q] > '9')
			return -EINVAL;
	}
	for (; p < t->end; p++) {
		unsigned d = (unsigned)(doc->src[p] - '0');

		if (v > (limit - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	/* -v computed in unsigned arithmetic, so INT64_MIN needs no signed overflow */
	*out = neg ? (int64_t)(0 - v) : (int64_t)v;
	return 0;
}

int json_bool(const struct json_doc *doc, int idx, bool *out)
{
	if (!valid_idx(doc, idx))
		return -EINVAL;
	if (doc->tok[idx].type == JSON_TRUE)
		*out = true;
	else if (doc->tok[idx].type == JSON_FALSE)
		*out = false;
	else
		return -EINVAL;
	return 0;
}

/* ---- writer ---- */

void json_writer_init(struct json_writer *w, struct buf *out)
{
	memset(w, 0, sizeof(*w));
	w->out = out;
	w->mark = out->len;
}

/* The first error sticks, and the buffer goes back to where the writer found it, so a caller
 * never sends half a document. */
static void w_fail(struct json_writer *w, int err)
{
	if (w->err)
		return;
	w->err = err;
	if (w->out->len > w->mark)
		w->out->len = w->mark;
}

static void w_put(struct json_writer *w, const void *p, size_t n)
{
	if (!w->err && buf_append(w->out, p, n) != 0)
		w_fail(w, ERR_LIMIT);
}

/* Checks that a value may stand here and writes the comma that separates it. */
static bool w_value(struct json_writer *w)
{
	if (w->err)
		return false;
	if (w->in_object[w->depth]) {
		if (!w->after_key) {
			w_fail(w, ERR_STATE);
			return false;
		}
		w->after_key = false;
	} else if (w->need_comma[w->depth]) {
		if (w->depth == 0) {
			w_fail(w, ERR_STATE);
			return false;
		}
		w_put(w, ",", 1);
	}
	w->need_comma[w->depth] = 1;
	return !w->err;
}

static void w_string(struct json_writer *w, const char *str, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	const uint8_t *s = (const uint8_t *)str;
	size_t i, run = 0, bad;
	char esc[6];

	for (i = 0; i < len; ) {
		size_t k = utf8_seq(s + i, len - i, &bad);

		if (!k) {
			w_fail(w, -EINVAL);
			return;
		}
		i += k;
	}
	w_put(w, "\"", 1);
	for (i = 0; i < len; i++) {
		uint8_t c = s[i];
		size_t n = 2;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		w_put(w, s + run, i - run);
		run = i + 1;
		esc[0] = '\\';
		switch (c) {
		case '"': esc[1] = '"'; break;
		case '\\': esc[1] = '\\'; break;
		case '\b': esc[1] = 'b'; break;
		case '\f': esc[1] = 'f'; break;
		case '\n': esc[1] = 'n'; break;
		case '\r': esc[1] = 'r'; break;
		case '\t': esc[1] = 't'; break;
		default:
			memcpy(esc + 1, "u00", 3);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 0xF];
			n = 6;
		}
		w_put(w, esc, n);
	}
	w_put(w, s + run, len - run);
	w_put(w, "\"", 1);
}

static void w_open(struct json_writer *w, bool object)
{
	if (!w_value(w))
		return;
	if (w->depth == JSON_MAX_DEPTH) {
		w_fail(w, ERR_LIMIT);
		return;
	}
	w->depth++;
	w->in_object[w->depth] = object;
	w->need_comma[w->depth] = 0;
	w_put(w, object ? "{" : "[", 1);
}

static void w_close(struct json_writer *w, bool object)
{
	if (w->err)
		return;
	if (w->depth == 0 || w->in_object[w->depth] != object || w->after_key) {
		w_fail(w, ERR_STATE);
		return;
	}
	w->depth--;
	w_put(w, object ? "}" : "]", 1);
}

void json_obj_begin(struct json_writer *w)
{
	w_open(w, true);
}

void json_obj_end(struct json_writer *w)
{
	w_close(w, true);
}

void json_arr_begin(struct json_writer *w)
{
	w_open(w, false);
}

void json_arr_end(struct json_writer *w)
{
	w_close(w, false);
}

void json_key(struct json_writer *w, const char *key)
{
	if (w->err)
		return;
	if (!w->in_object[w->depth] || w->after_key) {
		w_fail(w, ERR_STATE);
		return;
	}
	if (w->need_comma[w->depth])
		w_put(w, ",", 1);
	w->need_comma[w->depth] = 1;
	w->after_key = true;
	w_string(w, key, strlen(key));
	w_put(w, ":", 1);
}

void json_str_write(struct json_writer *w, const char *s)
{
	json_strn_write(w, s, strlen(s));
}

void json_strn_write(struct json_writer *w, const char *s, size_t len)
{
	if (w_value(w))
		w_string(w, s, len);
}

void json_int_write(struct json_writer *w, int64_t v)
{
	char digits[20], *p = digits + sizeof(digits);
	uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;

	if (!w_value(w))
		return;
	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		w_put(w, "-", 1);
	w_put(w, p, (size_t)(digits + sizeof(digits) - p));
}

void json_bool_write(struct json_writer *w, bool v)
{
	if (w_value(w))
		w_put(w, v ? "true" : "false", v ? 4 : 5);
}

void json_null_write(struct json_writer *w)
{
	if (w_value(w))
		w_put(w, "null", 4);
}

void json_error_write(struct json_writer *w, const char *code, const char *msg)
{
	json_obj_begin(w);
	json_key(w, "error");
	json_obj_begin(w);
	json_key(w, "code");
	json_str_write(w, code);
	json_key(w, "message");
	json_str_write(w, msg ? msg : "");
	json_obj_end(w);
	json_obj_end(w);
}

int json_writer_finish(struct json_writer *w)
{
	if (!w->err && (w->depth != 0 || w->after_key || !w->need_comma[0]))
		w_fail(w, ERR_STATE);
	return w->err;
}
