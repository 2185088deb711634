/* test_http.c: the HTTP/1.1 parser (split at every byte boundary), the request writer, and the
 * Unix-socket client connection against a scripted server thread. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "http/http.h"

/* ---- a transcript of everything the parser reported, to compare feeds ---- */
struct transcript {
	char text[8192];
	size_t len;
	int err;
};

static void tr_add(struct transcript *t, const char *s, size_t n)
{
	assert_true(t->len + n < sizeof(t->text));
	memcpy(t->text + t->len, s, n);
	t->len += n;
	t->text[t->len] = '\0';
}

static void tr_printf(struct transcript *t, const char *fmt, ...)
{
	char tmp[1024];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	tr_add(t, tmp, (size_t)n);
}

static void tr_head(struct transcript *t, const struct http_parser *p, int ev)
{
	tr_printf(t, "%s ", ev == HTTP_EV_UPGRADE ? "UPGRADE" : "HEAD");
	if (p->kind == HTTP_PARSE_RESPONSE)
		tr_printf(t, "status=%d reason=[%s]", p->status, http_parser_str(p, p->reason));
	else
		tr_printf(t, "method=%s target=%s", http_parser_str(p, p->method),
			  http_parser_str(p, p->target));
	tr_printf(t, " v=1.%d ka=%d framing=%d", p->minor_version, p->keep_alive, p->framing);
	for (uint32_t i = 0; i < p->nhdr; i++)
		tr_printf(t, " [%s]=[%s]", http_parser_str(p, p->hdr[i].name),
			  http_parser_str(p, p->hdr[i].value));
	tr_add(t, "\nBODY:", 6);
}

/* Feeds msg in pieces whose ends are listed in cuts (ascending, last == len), then EOF when
 * `eof`. Body bytes are concatenated, so any split must give the same transcript. */
static void parse_cut(enum http_parser_kind kind, bool head_request, uint64_t limit,
		      const char *msg, size_t len, const size_t *cuts, size_t ncuts, bool eof,
		      struct transcript *t)
{
	static char head[LIMIT_HTTP_HEAD_BYTES];
	struct http_parser p;
	size_t from = 0;
	bool done = false;

	memset(t, 0, sizeof(*t));
	http_parser_init(&p, kind, head, sizeof(head));
	p.head_request = head_request;
	p.body_limit = limit;
	for (size_t c = 0; c < ncuts && !done && !t->err; c++) {
		const uint8_t *in = (const uint8_t *)msg + from;
		size_t n = cuts[c] - from, used;
		struct http_slice s;
		for (;;) {
			int ev = http_parser_feed(&p, in, n, &used, &s);
			assert_true(used <= n);
			in += used;
			n -= used;
			if (ev < 0) {
				t->err = ev;
				tr_printf(t, "\nERR %d", ev);
				break;
			}
			if (ev == HTTP_EV_HEAD || ev == HTTP_EV_UPGRADE)
				tr_head(t, &p, ev);
			if (ev == HTTP_EV_BODY) {
				assert_true(s.len > 0);
				tr_add(t, (const char *)s.data, s.len);
			}
			if (ev == HTTP_EV_UPGRADE) {
				tr_printf(t, "\nREST:%.*s", (int)(len - (size_t)(in - (const uint8_t *)msg)),
					  (const char *)in);
				done = true;
				break;
			}
			if (ev == HTTP_EV_DONE) {
				tr_printf(t, "\nDONE rest=%zu", len - (size_t)(in - (const uint8_t *)msg));
				done = true;
				break;
			}
			if (ev == HTTP_EV_NEED_MORE) {
				assert_int_equal(n, 0);
				break;
			}
		}
		from = cuts[c];
	}
	if (!done && !t->err && eof) {
		int ev = http_parser_finish(&p);
		if (ev == HTTP_EV_DONE)
			tr_add(t, "\nDONE at close", 14);
		else
			tr_printf(t, "\nEOF %d", ev);
	}
}

static void parse_whole(enum http_parser_kind kind, bool head_request, uint64_t limit,
			const char *msg, bool eof, struct transcript *t)
{
	size_t len = strlen(msg);
	parse_cut(kind, head_request, limit, msg, len, &len, 1, eof, t);
}

/* The heart of the resumability claim: every two-piece split and the byte-at-a-time feed
 * give exactly the transcript of the whole message. */
static void assert_split_invariant(enum http_parser_kind kind, bool head_request,
				   const char *msg, bool eof)
{
	static struct transcript whole, piece;
	size_t len = strlen(msg);
	size_t cuts[2], *bytes = malloc(len * sizeof(size_t));

	parse_whole(kind, head_request, UINT64_MAX, msg, eof, &whole);
	for (size_t i = 0; i <= len; i++) {
		cuts[0] = i;
		cuts[1] = len;
		parse_cut(kind, head_request, UINT64_MAX, msg, len, cuts, 2, eof, &piece);
		if (strcmp(whole.text, piece.text) != 0)
			fail_msg("split at %zu differs:\n%s\n--- whole:\n%s", i, piece.text, whole.text);
	}
	for (size_t i = 0; i < len; i++)
		bytes[i] = i + 1;
	parse_cut(kind, head_request, UINT64_MAX, msg, len, bytes, len, eof, &piece);
	assert_string_equal(whole.text, piece.text);
	free(bytes);
}

static const char *const responses[] = {
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n"
	"{\"ok\": true}\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nApi-Version: 1.41\r\n\r\n"
	"5;name=value;x=\"q\"\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n"
	"Trailer-One: 1\r\nTrailer-Two: two\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
	"HTTP/1.0 200 OK\r\nServer: old\r\n\r\nuntil the connection closes",
	"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nhi",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: tcp\r\nConnection: Upgrade\r\n\r\n"
	"\x01\x00\x00\x00\x00\x00\x00\x05raw!!",
	"HTTP/1.1 404 Not Found\r\nContent-Length: 44\r\nConnection: close\r\n\r\n"
	"{\"message\":\"No such image: agentic/x:local\"}",
	"HTTP/1.1 200 \r\nX-Empty:\r\nX-Spaces:   padded value \t \r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\n",
};

static void test_http_response_parses_same_at_every_split(void **state)
{
	for (size_t i = 0; i < ARRAY_LEN(responses); i++)
		assert_split_invariant(HTTP_PARSE_RESPONSE, false, responses[i], true);
	assert_split_invariant(HTTP_PARSE_RESPONSE, true,
			       "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", false);
}

static void test_http_request_parses_same_at_every_split(void **state)
{
	assert_split_invariant(HTTP_PARSE_REQUEST, false,
			       "\r\n\r\nPOST /v1.41/containers/create?name=x HTTP/1.1\r\nHost: docker\r\n"
			       "Content-Length: 7\r\n\r\n{\"a\":1}",
			       false);
	assert_split_invariant(HTTP_PARSE_REQUEST, false,
			       "PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
			       "3\r\nabc\r\n0\r\n\r\n",
			       false);
	assert_split_invariant(HTTP_PARSE_REQUEST, false, "GET / HTTP/1.0\r\n\r\n", false);
}

static void expect_transcript(const char *msg, bool eof, const char *want)
{
	static struct transcript t;
	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX, msg, eof, &t);
	assert_string_equal(t.text, want);
}

static void test_http_chunked_body_is_dechunked_and_trailers_skipped(void **state)
{
	expect_transcript(responses[1], false,
			  "HEAD status=200 reason=[OK] v=1.1 ka=1 framing=2 "
			  "[Transfer-Encoding]=[chunked] [Api-Version]=[1.41]\n"
			  "BODY:helloabcdefghijklmnopqrstuvwxyz\nDONE rest=0");
}

static void test_http_interim_response_is_skipped(void **state)
{
	expect_transcript(responses[6], false,
			  "HEAD status=201 reason=[Created] v=1.1 ka=1 framing=1 "
			  "[Content-Length]=[2]\nBODY:hi\nDONE rest=0");
}

static void test_http_no_body_for_204_304_and_head(void **state)
{
	static struct transcript t;

	expect_transcript(responses[4], false,
			  "HEAD status=204 reason=[No Content] v=1.1 ka=1 framing=0 "
			  "[Content-Length]=[10]\nBODY:\nDONE rest=0");
	parse_whole(HTTP_PARSE_RESPONSE, true, UINT64_MAX,
		    "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", false, &t);
	assert_non_null(strstr(t.text, "framing=0"));
	assert_non_null(strstr(t.text, "DONE rest=0"));
}

static void test_http_close_delimited_body_ends_at_close(void **state)
{
	expect_transcript(responses[3], true,
			  "HEAD status=200 reason=[OK] v=1.0 ka=0 framing=3 [Server]=[old]\n"
			  "BODY:until the connection closes\nDONE at close");
}

static void test_http_truncated_length_body_is_an_error(void **state)
{
	static struct transcript t;
	char want[32];

	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX,
		    "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", true, &t);
	snprintf(want, sizeof(want), "BODY:abc\nEOF %d", HTTP_ERR_TRUNCATED);
	assert_non_null(strstr(t.text, want));
}

static void test_http_clean_close_between_messages_is_not_an_error(void **state)
{
	char head[256];
	struct http_parser p;

	http_parser_init(&p, HTTP_PARSE_RESPONSE, head, sizeof(head));
	assert_int_equal(http_parser_finish(&p), HTTP_EV_NEED_MORE);
	http_parser_init(&p, HTTP_PARSE_RESPONSE, head, sizeof(head));
	size_t used;
	struct http_slice s;
	assert_int_equal(http_parser_feed(&p, (const uint8_t *)"HTTP/1.1", 8, &used, &s),
			 HTTP_EV_NEED_MORE);
	assert_int_equal(http_parser_finish(&p), HTTP_ERR_TRUNCATED);
}

static void test_http_upgrade_hands_back_the_rest(void **state)
{
	expect_transcript(responses[7], false,
			  "UPGRADE status=101 reason=[Switching Protocols] v=1.1 ka=1 framing=0 "
			  "[Upgrade]=[tcp] [Connection]=[Upgrade]\nBODY:\nREST:\x01");
}

static void test_http_keep_alive_follows_version_and_connection(void **state)
{
	static struct transcript t;

	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX, responses[8], false, &t);
	assert_non_null(strstr(t.text, "ka=0"));
	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX,
		    "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", false,
		    &t);
	assert_non_null(strstr(t.text, "ka=1"));
	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX,
		    "HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n", false,
		    &t);
	assert_non_null(strstr(t.text, "ka=0"));
}

static void test_http_stops_at_message_end_leaving_the_next(void **state)
{
	static struct transcript t;

	parse_whole(HTTP_PARSE_RESPONSE, false, UINT64_MAX, responses[10], false, &t);
	assert_non_null(strstr(t.text, "BODY:abc\nDONE rest=17"));
}

static int parse_err(enum http_parser_kind kind, const char *msg)
{
	static struct transcript t;
	parse_whole(kind, false, UINT64_MAX, msg, false, &t);
	return t.err;
}

static void test_http_rejects_ambiguous_framing(void **state)
{
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE,
				   "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_REQUEST,
				   "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_REQUEST,
				   "POST / HTTP/1.1\r\nContent-Length: 3, 3\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_REQUEST,
				   "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_REQUEST,
				   "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
				   "Transfer-Encoding: chunked\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE,
				   "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"),
			 ERR_PARSE);
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE,
				   "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n"),
			 ERR_PARSE);
}

static void test_http_rejects_malformed_lines(void **state)
{
	const char *bad_responses[] = {
		"HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n",           /* bare LF */
		"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",           /* obs-fold */
		"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",               /* space in name */
		"HTTP/1.1 200 OK\r\n: novalue\r\n\r\n",                 /* empty name */
		"HTTP/1.1 200 OK\r\nNoColon\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",                 /* control byte */
		"HTTP/1.1 20 OK\r\n\r\n",
		"HTTP/1.1 600 Nope\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
		"HTTP/1.1 200OK\r\n\r\n",
		"ICY 200 OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1234567890abcdef0\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcX",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n folded: t\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n",
	};
	const char *bad_requests[] = {
		"GET  / HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1 extra\r\n\r\n",
		"G(T / HTTP/1.1\r\n\r\n",
		"GET /\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\tfold\r\n\r\n",
	};

	for (size_t i = 0; i < ARRAY_LEN(bad_responses); i++)
		if (parse_err(HTTP_PARSE_RESPONSE, bad_responses[i]) != ERR_PARSE)
			fail_msg("accepted bad response %zu: %s", i, bad_responses[i]);
	for (size_t i = 0; i < ARRAY_LEN(bad_requests); i++)
		if (parse_err(HTTP_PARSE_REQUEST, bad_requests[i]) != ERR_PARSE)
			fail_msg("accepted bad request %zu: %s", i, bad_requests[i]);
}

static void test_http_head_over_limit_is_an_error(void **state)
{
	static char msg[LIMIT_HTTP_HEAD_BYTES * 2];
	size_t n = (size_t)snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\nX-Big: ");

	memset(msg + n, 'a', LIMIT_HTTP_HEAD_BYTES);
	memcpy(msg + n + LIMIT_HTTP_HEAD_BYTES, "\r\n\r\n", 5);
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE, msg), HTTP_ERR_HEAD_TOO_BIG);

	n = (size_t)snprintf(msg, sizeof(msg), "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i <= LIMIT_HTTP_HEADERS; i++)
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "X-%d: v\r\n", i);
	snprintf(msg + n, sizeof(msg) - n, "\r\n");
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE, msg), HTTP_ERR_HEAD_TOO_BIG);

	/* a storage smaller than the limit bounds the head too */
	char small[32];
	struct http_parser p;
	size_t used;
	struct http_slice s;
	const char *m = "HTTP/1.1 200 OK\r\nServer: something long\r\n\r\n";
	http_parser_init(&p, HTTP_PARSE_RESPONSE, small, sizeof(small));
	assert_int_equal(http_parser_feed(&p, (const uint8_t *)m, strlen(m), &used, &s),
			 HTTP_ERR_HEAD_TOO_BIG);
	assert_int_equal(http_parser_feed(&p, (const uint8_t *)m, strlen(m), &used, &s), ERR_STATE);
}

static void test_http_endless_chunk_extension_is_bounded(void **state)
{
	static char msg[LIMIT_HTTP_HEAD_BYTES + 256];
	size_t n = (size_t)snprintf(msg, sizeof(msg),
				    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;");
	memset(msg + n, 'e', LIMIT_HTTP_HEAD_BYTES);
	msg[n + LIMIT_HTTP_HEAD_BYTES] = '\0';
	assert_int_equal(parse_err(HTTP_PARSE_RESPONSE, msg), HTTP_ERR_HEAD_TOO_BIG);
}

static void test_http_body_over_limit_is_an_error_for_every_framing(void **state)
{
	static struct transcript t;

	parse_whole(HTTP_PARSE_RESPONSE, false, 4,
		    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde", false, &t);
	assert_int_equal(t.err, HTTP_ERR_BODY_TOO_BIG);
	parse_whole(HTTP_PARSE_RESPONSE, false, 5,
		    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcde", false, &t);
	assert_int_equal(t.err, 0);
	parse_whole(HTTP_PARSE_RESPONSE, false, 4,
		    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n",
		    false, &t);
	assert_int_equal(t.err, HTTP_ERR_BODY_TOO_BIG);
	assert_non_null(strstr(t.text, "BODY:abc\nERR"));
	parse_whole(HTTP_PARSE_RESPONSE, false, 4, "HTTP/1.0 200 OK\r\n\r\nabcde", false, &t);
	assert_int_equal(t.err, HTTP_ERR_BODY_TOO_BIG);
}

static void test_http_request_fields_are_parsed(void **state)
{
	static struct transcript t;

	parse_whole(HTTP_PARSE_REQUEST, false, UINT64_MAX,
		    "POST /v1/sandboxes?x=1 HTTP/1.1\r\nHost: localhost\r\n"
		    "Content-Length: 4\r\n\r\nbody",
		    false, &t);
	assert_string_equal(t.text, "HEAD method=POST target=/v1/sandboxes?x=1 v=1.1 ka=1 "
				    "framing=1 [Host]=[localhost] [Content-Length]=[4]\n"
				    "BODY:body\nDONE rest=0");
	parse_whole(HTTP_PARSE_REQUEST, false, UINT64_MAX, "GET / HTTP/1.1\r\n\r\nGET /next", false,
		    &t);
	assert_non_null(strstr(t.text, "framing=0"));
	assert_non_null(strstr(t.text, "DONE rest=9"));
}

static void test_http_request_writer_output_is_exact(void **state)
{
	uint8_t storage[512];
	struct buf b;
	const struct http_field f[] = { { "Content-Type", "application/json" }, { NULL, NULL } };

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(http_request_write(&b, "POST", "/v1.41/networks/create", "docker", f,
					    "{}", 2),
			 0);
	assert_int_equal(b.len, strlen("POST /v1.41/networks/create HTTP/1.1\r\nHost: docker\r\n"
				       "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"));
	assert_memory_equal(b.data,
			    "POST /v1.41/networks/create HTTP/1.1\r\nHost: docker\r\n"
			    "Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
			    b.len);
	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(http_request_write(&b, "POST", "/start", "docker", NULL, NULL, 0), 0);
	assert_memory_equal(b.data, "POST /start HTTP/1.1\r\nHost: docker\r\nContent-Length: 0\r\n\r\n",
			    b.len);
	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(http_request_write(&b, "GET", "/_ping", "docker", NULL, NULL, 0), 0);
	assert_memory_equal(b.data, "GET /_ping HTTP/1.1\r\nHost: docker\r\n\r\n", b.len);
}

/* Parses what the response writer wrote with our own parser; the Content-Length it declares
 * is the body's length, whatever the body. */
static void test_http_response_writer_length_is_the_body_length(void **state)
{
	static const struct http_field f[] = { { "Content-Type", "application/json" }, { NULL, NULL } };
	static const char *const bodies[] = {
		"", "\n", "{\"error\":{\"code\":\"capacity\",\"message\":\"too many admin connections "
		"(max_admin_connections)\"}}\n", "x\r\n\r\ny",
	};
	static const int statuses[] = { 200, 201, 400, 403, 404, 405, 409, 413, 422, 500, 502, 503,
					504, 507 };
	char store[1024];
	struct buf b;

	for (size_t i = 0; i < ARRAY_LEN(bodies); i++)
		for (size_t k = 0; k < ARRAY_LEN(statuses); k++) {
			static char head[LIMIT_HTTP_HEAD_BYTES];
			struct http_parser p;
			struct http_slice sl;
			size_t off = 0, got = 0, used;
			int e;

			buf_init(&b, store, sizeof(store));
			assert_int_equal(http_response_write(&b, statuses[k], f, k % 2, bodies[i],
							     strlen(bodies[i])), 0);
			http_parser_init(&p, HTTP_PARSE_RESPONSE, head, sizeof(head));
			do {
				e = http_parser_feed(&p, b.data + off, b.len - off, &used, &sl);
				off += used;
				if (e == HTTP_EV_BODY)
					got += sl.len;
			} while (e == HTTP_EV_HEAD || e == HTTP_EV_BODY);
			assert_int_equal(e, HTTP_EV_DONE);
			assert_int_equal(p.status, statuses[k]);
			assert_int_equal(p.framing, HTTP_BODY_LENGTH);
			assert_int_equal(p.content_length, strlen(bodies[i]));
			assert_int_equal(got, strlen(bodies[i]));
			assert_int_equal(off, b.len);
			assert_int_equal(p.keep_alive, !(k % 2));
		}
}

static void test_http_response_head_writer_frames_and_refuses(void **state)
{
	static const struct http_field bad[] = { { "X", "a\r\nSet-Cookie: y" }, { NULL, NULL } };
	char store[256];
	struct buf b;

	buf_init(&b, store, sizeof(store));
	assert_int_equal(http_response_head_write(&b, 200, NULL, HTTP_CHUNKED, false), 0);
	assert_memory_equal(b.data, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b.len);
	buf_init(&b, store, sizeof(store));
	assert_int_equal(http_response_head_write(&b, 100, NULL, HTTP_NO_BODY, false), 0);
	assert_memory_equal(b.data, "HTTP/1.1 100 Continue\r\n\r\n", b.len);
	assert_int_equal(http_response_head_write(&b, 200, bad, 0, false), -EINVAL);
	assert_int_equal(http_response_head_write(&b, 99, NULL, 0, false), -EINVAL);
	assert_int_equal(http_response_head_write(&b, 200, NULL, -3, false), -EINVAL);
	buf_init(&b, store, 40);
	assert_int_equal(http_response_write(&b, 503, NULL, true, "0123456789", 10), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

/* A chunk's size line is its length in hex; an empty chunk is refused (it would end the body);
 * a chunk that does not fit leaves the buffer as it was. */
static void test_http_chunk_writer_sizes_each_chunk_and_ends_the_body(void **state)
{
	char store[64], big[300];
	struct buf b;

	buf_init(&b, store, sizeof(store));
	assert_int_equal(http_chunk_write(&b, "hello", 5), 0);
	memset(big, 'x', 26);
	assert_int_equal(http_chunk_write(&b, big, 26), 0);
	assert_int_equal(http_chunk_write(&b, "", 0), -EINVAL);
	assert_int_equal(http_chunk_end(&b), 0);
	assert_memory_equal(b.data, "5\r\nhello\r\n1a\r\nxxxxxxxxxxxxxxxxxxxxxxxxxx\r\n0\r\n\r\n", b.len);
	assert_int_equal(b.len, 10 + 32 + 5);
	buf_init(&b, store, sizeof(store));
	assert_int_equal(http_chunk_write(&b, big, sizeof(big)), ERR_LIMIT);
	assert_int_equal(b.len, 0);
	buf_init(&b, store, 4);
	assert_int_equal(http_chunk_end(&b), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

static void test_http_request_writer_refuses_header_injection(void **state)
{
	uint8_t storage[512];
	struct buf b;
	const struct http_field evil[] = { { "X", "a\r\nInjected: 1" }, { NULL, NULL } };

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(http_request_write(&b, "GET", "/a\r\nX: y", "h", NULL, NULL, 0), -EINVAL);
	assert_int_equal(http_request_write(&b, "GET", "/a b", "h", NULL, NULL, 0), -EINVAL);
	assert_int_equal(http_request_write(&b, "GET", "/", "h", evil, NULL, 0), -EINVAL);
	assert_int_equal(b.len, 0);
	buf_init(&b, storage, 20);
	assert_int_equal(http_request_write(&b, "GET", "/long/enough/to/overflow", "h", NULL, NULL, 0),
			 ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

/* ---- the connection, against a scripted server on a Unix socket ---- */
struct server {
	char path[108];
	int lfd;
	pthread_t thread;
	int accepts;
	int requests;
	/* script */
	int close_after_each;  /* close the connection after answering (keep-alive claimed) */
	int silent;            /* accept, read, never answer */
	size_t big_body;       /* answer with a body of this many bytes */
};

static ssize_t read_request(int fd, char *buf, size_t cap)
{
	size_t n = 0;
	while (n < cap - 1) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			return r;
		n += (size_t)r;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			return (ssize_t)n;
	}
	return (ssize_t)n;
}

static void *server_main(void *arg)
{
	struct server *s = arg;
	char req[4096];

	for (;;) {
		int fd = accept(s->lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		s->accepts++;
		while (read_request(fd, req, sizeof(req)) > 0) {
			s->requests++;
			if (s->silent) {
				char c;
				while (read(fd, &c, 1) > 0)
					;
				break;
			}
			if (s->big_body) {
				char hdr[128];
				static char body[1 << 16];
				size_t left = s->big_body;
				int n = snprintf(hdr, sizeof(hdr),
						 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", left);
				memset(body, 'x', sizeof(body));
				if (send(fd, hdr, (size_t)n, MSG_NOSIGNAL) != n)
					break;
				while (left) {
					size_t k = left < sizeof(body) ? left : sizeof(body);
					ssize_t w = send(fd, body, k, MSG_NOSIGNAL);
					if (w <= 0)
						break;
					left -= (size_t)w;
				}
			} else {
				char out[256];
				int n = snprintf(out, sizeof(out),
						 "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
						 "8\r\nanswer-%d\r\n0\r\n\r\n", s->requests % 10);
				if (send(fd, out, (size_t)n, MSG_NOSIGNAL) != n)
					break;
			}
			if (s->close_after_each)
				break;
		}
		close(fd);
	}
}

static void server_start(struct server *s)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(s->path, sizeof(s->path), "/tmp/agentic-test-http-%d.sock", (int)getpid());
	unlink(s->path);
	s->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s->lfd >= 0);
	memcpy(sa.sun_path, s->path, sizeof(s->path));
	assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s->lfd, 8), 0);
	assert_int_equal(pthread_create(&s->thread, NULL, server_main, s), 0);
}

static void server_stop(struct server *s)
{
	shutdown(s->lfd, SHUT_RDWR);
	pthread_join(s->thread, NULL);
	close(s->lfd);
	unlink(s->path);
}

/* Runs one GET and returns the body (NUL-terminated) or the error. */
static int get(struct http_conn *c, char *body, size_t cap, uint64_t limit, int timeout_ms)
{
	static uint8_t req[128];
	struct buf b;
	struct http_slice s;
	struct http_exchange_opts o = { .body_limit = limit, .read_timeout_ms = timeout_ms };
	size_t n = 0;
	int r;

	buf_init(&b, req, sizeof(req));
	assert_int_equal(http_request_write(&b, "GET", "/_ping", "docker", NULL, NULL, 0), 0);
	r = http_conn_begin(c, b.data, b.len, &o);
	if (r != 0)
		return r;
	while ((r = http_conn_wait(c, &s)) != HTTP_EV_DONE) {
		if (r < 0)
			return r;
		if (r == HTTP_EV_BODY && n + s.len < cap) {
			memcpy(body + n, s.data, s.len);
			n += s.len;
		}
	}
	body[n] = '\0';
	return 0;
}

static void test_http_conn_reuses_the_socket_for_the_next_request(void **state)
{
	static struct server s;
	static struct http_conn c;
	char body[64];

	memset(&s, 0, sizeof(s));
	server_start(&s);
	/* init clears the fields, not the buffers: nothing may read a byte they did not get */
	memset(&c, 0xa5, sizeof(c));
	assert_int_equal(http_conn_init(&c, s.path), 0);
	assert_int_equal(get(&c, body, sizeof(body), 0, 2000), 0);
	assert_string_equal(body, "answer-1");
	assert_true(c.fd >= 0);
	assert_int_equal(get(&c, body, sizeof(body), 0, 2000), 0);
	assert_string_equal(body, "answer-2");
	assert_true(c.reused);
	http_conn_close(&c);
	server_stop(&s);
	assert_int_equal(s.accepts, 1);
	assert_int_equal(s.requests, 2);
}

static void test_http_conn_resends_once_when_the_kept_socket_was_closed(void **state)
{
	static struct server s;
	static struct http_conn c;
	char body[64];

	memset(&s, 0, sizeof(s));
	s.close_after_each = 1;
	server_start(&s);
	assert_int_equal(http_conn_init(&c, s.path), 0);
	assert_int_equal(get(&c, body, sizeof(body), 0, 2000), 0);
	assert_string_equal(body, "answer-1");
	/* the server closed its end after answering, though the answer claimed keep-alive */
	usleep(50 * 1000);
	assert_int_equal(get(&c, body, sizeof(body), 0, 2000), 0);
	assert_string_equal(body, "answer-2");
	http_conn_close(&c);
	server_stop(&s);
	assert_int_equal(s.accepts, 2);
}

static void test_http_conn_read_timeout_is_reported(void **state)
{
	static struct server s;
	static struct http_conn c;
	char body[64];

	memset(&s, 0, sizeof(s));
	s.silent = 1;
	server_start(&s);
	assert_int_equal(http_conn_init(&c, s.path), 0);
	assert_int_equal(get(&c, body, sizeof(body), 0, 100), -ETIMEDOUT);
	assert_int_equal(c.fd, -1);
	assert_int_equal(c.state, HTTP_CONN_IDLE);
	server_stop(&s);
}

static void test_http_conn_step_times_out_without_blocking(void **state)
{
	static struct server s;
	static struct http_conn c;
	static uint8_t req[128];
	struct buf b;
	struct http_slice sl;
	struct http_exchange_opts o = { .read_timeout_ms = 100 };
	int r;

	memset(&s, 0, sizeof(s));
	s.silent = 1;
	server_start(&s);
	assert_int_equal(http_conn_init(&c, s.path), 0);
	buf_init(&b, req, sizeof(req));
	assert_int_equal(http_request_write(&b, "GET", "/_ping", "docker", NULL, NULL, 0), 0);
	assert_int_equal(http_conn_begin(&c, b.data, b.len, &o), 0);
	while ((r = http_conn_step(&c, &sl)) == -EAGAIN && c.state != HTTP_CONN_RECEIVING)
		;
	assert_int_equal(r, -EAGAIN);
	assert_true(http_conn_wait_ms(&c) > 0 && http_conn_wait_ms(&c) <= 100);
	usleep(150 * 1000);
	assert_int_equal(http_conn_wait_ms(&c), 0);
	assert_int_equal(http_conn_step(&c, &sl), -ETIMEDOUT);
	assert_int_equal(c.fd, -1);
	assert_int_equal(http_conn_wait_ms(&c), -1);
	server_stop(&s);
}

static void test_http_conn_large_response_over_limit_is_an_error(void **state)
{
	static struct server s;
	static struct http_conn c;
	char body[8];

	memset(&s, 0, sizeof(s));
	s.big_body = 5u << 20;
	server_start(&s);
	assert_int_equal(http_conn_init(&c, s.path), 0);
	assert_int_equal(get(&c, body, sizeof(body), 4u << 20, 2000), HTTP_ERR_BODY_TOO_BIG);
	/* within the limit, a long response streams through the fixed read buffer */
	s.big_body = 3u << 20;
	assert_int_equal(get(&c, body, sizeof(body), 4u << 20, 2000), 0);
	http_conn_close(&c);
	server_stop(&s);
}

static void test_http_conn_missing_socket_is_a_connect_error(void **state)
{
	static struct http_conn c;
	char body[8];

	assert_int_equal(http_conn_init(&c, "/tmp/agentic-test-no-such.sock"), 0);
	assert_int_equal(get(&c, body, sizeof(body), 0, 100), HTTP_ERR_CONNECT);
	assert_int_equal(c.sys_errno, ENOENT);
	assert_int_equal(http_conn_init(&c, "/tmp/" "0123456789012345678901234567890123456789"
					     "0123456789012345678901234567890123456789"
					     "0123456789012345678901234567890123456789"),
			 -ENAMETOOLONG);
}

/* The reason phrase of each status agenticd's listeners answer (a client reads the code, a
 * person the phrase: a 204 once went out as "204 Error"). */
static void test_http_reason_phrases(void **state)
{
	(void)state;
	assert_string_equal(http_reason(204), "No Content");
	assert_string_equal(http_reason(401), "Unauthorized");
	assert_string_equal(http_reason(501), "Not Implemented");
	assert_string_equal(http_reason(201), "Created");
	assert_string_equal(http_reason(599), "Error");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_http_response_parses_same_at_every_split),
		cmocka_unit_test(test_http_request_parses_same_at_every_split),
		cmocka_unit_test(test_http_chunked_body_is_dechunked_and_trailers_skipped),
		cmocka_unit_test(test_http_interim_response_is_skipped),
		cmocka_unit_test(test_http_no_body_for_204_304_and_head),
		cmocka_unit_test(test_http_close_delimited_body_ends_at_close),
		cmocka_unit_test(test_http_truncated_length_body_is_an_error),
		cmocka_unit_test(test_http_clean_close_between_messages_is_not_an_error),
		cmocka_unit_test(test_http_upgrade_hands_back_the_rest),
		cmocka_unit_test(test_http_keep_alive_follows_version_and_connection),
		cmocka_unit_test(test_http_stops_at_message_end_leaving_the_next),
		cmocka_unit_test(test_http_rejects_ambiguous_framing),
		cmocka_unit_test(test_http_reason_phrases),
		cmocka_unit_test(test_http_rejects_malformed_lines),
		cmocka_unit_test(test_http_head_over_limit_is_an_error),
		cmocka_unit_test(test_http_endless_chunk_extension_is_bounded),
		cmocka_unit_test(test_http_body_over_limit_is_an_error_for_every_framing),
		cmocka_unit_test(test_http_request_fields_are_parsed),
		cmocka_unit_test(test_http_request_writer_output_is_exact),
		cmocka_unit_test(test_http_response_writer_length_is_the_body_length),
		cmocka_unit_test(test_http_response_head_writer_frames_and_refuses),
		cmocka_unit_test(test_http_request_writer_refuses_header_injection),
		cmocka_unit_test(test_http_conn_reuses_the_socket_for_the_next_request),
		cmocka_unit_test(test_http_conn_resends_once_when_the_kept_socket_was_closed),
		cmocka_unit_test(test_http_conn_read_timeout_is_reported),
		cmocka_unit_test(test_http_conn_step_times_out_without_blocking),
		cmocka_unit_test(test_http_conn_large_response_over_limit_is_an_error),
		cmocka_unit_test(test_http_conn_missing_socket_is_a_connect_error),
		cmocka_unit_test(test_http_chunk_writer_sizes_each_chunk_and_ends_the_body),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
