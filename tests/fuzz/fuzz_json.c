/* fuzz_json.c: parses arbitrary bytes and checks that every reader function agrees with the
 * tokens, that an error offset really marks a valid prefix, and that the writer's output of
 * the parsed document parses back to the same tokens. Any disagreement aborts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"

#define NTOK 8192

#define CHECK(c)                                                                   \
	do {                                                                       \
		if (!(c)) {                                                        \
			fprintf(stderr, "fuzz_json: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                   \
		}                                                                  \
	} while (0)

static struct json_token tok[NTOK], tok2[NTOK];
static bool has_nul[NTOK], is_key[NTOK];

/* A parse error at off means data[0..off) is a prefix of some valid document: parsing just
 * that prefix must succeed, or fail exactly at its end. */
static void check_error(const uint8_t *data, size_t size, const struct json_doc *d, int rc)
{
	struct json_doc p;
	int prc;

	CHECK(rc == ERR_PARSE || rc == ERR_LIMIT);
	CHECK(d->ntok == 0);
	CHECK(d->err_what != NULL);
	CHECK(d->err_offset <= size);
	prc = json_parse(&p, (const char *)data, d->err_offset, tok2, NTOK);
	CHECK(prc == 0 || p.err_offset == d->err_offset);
}

/* Unescapes string token i into a fresh allocation; NULL when it holds U+0000. */
static char *str_copy(const struct json_doc *d, int i, int *len)
{
	size_t raw = d->tok[i].end - d->tok[i].start;
	char *out = malloc(raw + 1);
	int n;

	CHECK(out != NULL);
	/* unescaping never grows a string, so the raw length always fits */
	n = json_str(d, i, out, raw + 1);
	if (n == -EINVAL) {
		CHECK(out[0] == '\0');
		free(out);
		return NULL;
	}
	CHECK(n >= 0 && (size_t)n <= raw);
	CHECK(out[n] == '\0' && strlen(out) == (size_t)n);
	*len = n;
	return out;
}

static void check_string(const struct json_doc *d, int i)
{
	char small[1], *s, *wbuf;
	struct json_token t2[2];
	struct json_writer w;
	struct json_doc rd;
	struct buf b;
	int n, n2;
	char *back;

	s = str_copy(d, i, &n);
	has_nul[i] = s == NULL;
	if (!s)
		return;
	CHECK(json_str_eq(d, i, s));
	if (n > 0) {
		small[0] = 'x';
		CHECK(json_str(d, i, small, 1) == ERR_LIMIT && small[0] == '\0');
	}
	/* the writer must accept what the reader produced, and the reader must read it back */
	wbuf = malloc(6 * (size_t)n + 2);
	CHECK(wbuf != NULL);
	buf_init(&b, wbuf, 6 * (size_t)n + 2);
	json_writer_init(&w, &b);
	json_str_write(&w, s);
	CHECK(json_writer_finish(&w) == 0);
	CHECK(json_parse(&rd, wbuf, b.len, t2, 2) == 0);
	CHECK(rd.ntok == 1 && t2[0].type == JSON_STRING);
	back = str_copy(&rd, 0, &n2);
	CHECK(back != NULL && n2 == n && memcmp(back, s, (size_t)n) == 0);
	free(back);
	free(wbuf);
	free(s);
}

static void check_number(const struct json_doc *d, int i)
{
	const struct json_token *t = &d->tok[i];
	bool integral = true;
	int64_t v;
	int rc;

	for (uint32_t p = t->start; p < t->end; p++) {
		char c = d->src[p];

		if (c == '.' || c == 'e' || c == 'E')
			integral = false;
	}
	rc = json_int(d, i, &v);
	CHECK(integral ? (rc == 0 || rc == -ERANGE) : rc == -EINVAL);
	if (rc == 0 && t->end - t->start < 19) {
		char text[24];

		CHECK(t->end - t->start < sizeof(text));
		memcpy(text, d->src + t->start, t->end - t->start);
		text[t->end - t->start] = '\0';
		CHECK(strtoll(text, NULL, 10) == v);
	}
}

static void check_container(const struct json_doc *d, int i)
{
	const struct json_token *t = &d->tok[i];
	bool obj = t->type == JSON_OBJECT;
	uint32_t count = 0;
	int k, prev = i;

	for (k = json_first(d, i); k >= 0; k = json_next(d, i, obj ? k + 1 : k)) {
		CHECK(k > prev && (uint32_t)k < t->next);
		CHECK(d->tok[k].start > t->start && d->tok[k].end < t->end);
		if (obj) {
			CHECK(d->tok[k].type == JSON_STRING);
			CHECK(json_next(d, i, k) == k + 1);
			/* lookups by every key find the first member with that key */
			if (count < 64 && !has_nul[k]) {
				int n, g;
				char *key = str_copy(d, k, &n);

				g = json_obj_get(d, i, key);
				CHECK(g > i && g <= k + 1 && json_str_eq(d, g - 1, key));
				free(key);
			}
		}
		prev = k;
		count++;
	}
	CHECK(count == t->children);
}

/* Writes the parsed document back out through the writer. Numbers that are not int64 become
 * 0, and strings holding U+0000 become "\u0000" (values) or "" (keys): the writer has no
 * raw-number call, and json_str cannot hand out such strings; compare() knows all three. */
static size_t rewrite(const struct json_doc *d, char *out, size_t cap)
{
	uint32_t stack[JSON_MAX_DEPTH];
	bool want_key[JSON_MAX_DEPTH];
	uint32_t depth = 0;
	struct json_writer w;
	struct buf b;

	buf_init(&b, out, cap);
	json_writer_init(&w, &b);
	for (uint32_t i = 0; i < d->ntok; i++) {
		const struct json_token *t = &d->tok[i];
		bool key;
		int64_t v;

		while (depth && d->tok[stack[depth - 1]].next == i) {
			depth--;
			if (d->tok[stack[depth]].type == JSON_OBJECT)
				json_obj_end(&w);
			else
				json_arr_end(&w);
		}
		key = depth && d->tok[stack[depth - 1]].type == JSON_OBJECT && want_key[depth - 1];
		if (depth && d->tok[stack[depth - 1]].type == JSON_OBJECT)
			want_key[depth - 1] = !key;
		is_key[i] = key;
		if (key) {
			int n;
			char *s = has_nul[i] ? NULL : str_copy(d, (int)i, &n);

			json_key(&w, s ? s : "");
			free(s);
			continue;
		}
		switch (t->type) {
		case JSON_OBJECT:
		case JSON_ARRAY:
			CHECK(depth < JSON_MAX_DEPTH);
			stack[depth] = i;
			want_key[depth++] = true;
			if (t->type == JSON_OBJECT)
				json_obj_begin(&w);
			else
				json_arr_begin(&w);
			break;
		case JSON_STRING:
			if (has_nul[i]) {
				json_strn_write(&w, "", 1);
			} else {
				int n;
				char *s = str_copy(d, (int)i, &n);

				json_strn_write(&w, s, (size_t)n);
				free(s);
			}
			break;
		case JSON_NUMBER:
			json_int_write(&w, json_int(d, (int)i, &v) == 0 ? v : 0);
			break;
		case JSON_TRUE:
			json_bool_write(&w, true);
			break;
		case JSON_FALSE:
			json_bool_write(&w, false);
			break;
		case JSON_NULL:
			json_null_write(&w);
			break;
		}
	}
	while (depth--) {
		if (d->tok[stack[depth]].type == JSON_OBJECT)
			json_obj_end(&w);
		else
			json_arr_end(&w);
	}
	CHECK(json_writer_finish(&w) == 0);
	return b.len;
}

static void compare(const struct json_doc *a, const struct json_doc *b)
{
	CHECK(a->ntok == b->ntok);
	for (uint32_t i = 0; i < a->ntok; i++) {
		const struct json_token *x = &a->tok[i], *y = &b->tok[i];

		CHECK(x->type == y->type && x->children == y->children && x->next == y->next);
		if (x->type == JSON_STRING) {
			int n1, n2;
			char *s1 = has_nul[i] ? NULL : str_copy(a, (int)i, &n1);
			char *s2 = str_copy(b, (int)i, &n2);

			if (s1)
				CHECK(s2 && n1 == n2 && memcmp(s1, s2, (size_t)n1) == 0);
			else if (is_key[i])
				CHECK(s2 && n2 == 0);
			else
				CHECK(s2 == NULL);
			free(s1);
			free(s2);
		} else if (x->type == JSON_NUMBER) {
			int64_t v1, v2;

			CHECK(json_int(b, (int)i, &v2) == 0);
			if (json_int(a, (int)i, &v1) == 0)
				CHECK(v1 == v2);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct json_doc d, d2;
	size_t first = 0, n;
	char *out;
	int rc;

	rc = json_parse(&d, (const char *)data, size, tok, NTOK);
	if (rc) {
		check_error(data, size, &d, rc);
		return 0;
	}
	CHECK(d.ntok >= 1 && d.ntok <= NTOK && d.err_what == NULL);
	while (first < size && data[first] && strchr(" \t\r\n", data[first]))
		first++;
	CHECK(tok[0].next == d.ntok);
	CHECK(tok[0].start == first + (tok[0].type == JSON_STRING));
	memset(has_nul, 0, d.ntok);
	for (uint32_t i = 0; i < d.ntok; i++) {
		const struct json_token *t = &tok[i];

		CHECK(t->next > i && t->next <= d.ntok);
		CHECK(t->start <= t->end && t->end <= size);
		switch (t->type) {
		case JSON_STRING:
			CHECK(data[t->start - 1] == '"' && data[t->end] == '"');
			check_string(&d, (int)i);
			break;
		case JSON_NUMBER:
			check_number(&d, (int)i);
			break;
		case JSON_OBJECT:
		case JSON_ARRAY:
			break;
		default:
			CHECK(t->next == i + 1);
			break;
		}
	}
	/* containers last: their key lookups rely on has_nul being filled in */
	for (uint32_t i = 0; i < d.ntok; i++) {
		if (tok[i].type == JSON_OBJECT || tok[i].type == JSON_ARRAY)
			check_container(&d, (int)i);
	}
	/* rewriting never grows a document; see rewrite() */
	out = malloc(size + 1);
	CHECK(out != NULL);
	n = rewrite(&d, out, size + 1);
	CHECK(n <= size);
	CHECK(json_parse(&d2, out, n, tok2, NTOK) == 0);
	compare(&d, &d2);
	free(out);
	return 0;
}
