/* test_egress_route.c: the credential route's pure pieces (src/egress/route.c, body.c): the
 * request head rewritten for the upstream (origin form, our Host, the credential and hop-by-hop
 * headers dropped, the route's header injected, Connection: close), the body's framing and its
 * end (smuggling attempts: a second request behind the first, CL with TE, bad chunk lines), and
 * the streaming mask of the secret across feed boundaries. The TLS side runs against a real
 * server in tests/integration/test_egress_route_tls. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "egress/body.h"
#include "egress/route.h"

static const char secret[] = "sk-SECRET-1234";

static struct egress_route route(const char *header, const char *value, uint16_t up_port)
{
	struct egress_route rt;

	memset(&rt, 0, sizeof(rt));
	snprintf(rt.host, sizeof(rt.host), "api.example.com");
	rt.port = 80;
	snprintf(rt.up_host, sizeof(rt.up_host), "api.example.com");
	rt.up_port = up_port;
	snprintf(rt.header, sizeof(rt.header), "%s", header);
	snprintf(rt.value, sizeof(rt.value), "%s", value);
	return rt;
}

static struct egress_head head(const char *method, const char *path, const char *raw)
{
	struct egress_head h;

	memset(&h, 0, sizeof(h));
	snprintf(h.method, sizeof(h.method), "%s", method);
	snprintf(h.host, sizeof(h.host), "api.example.com");
	h.port = 80;
	snprintf(h.path, sizeof(h.path), "%s", path);
	h.raw = raw;
	h.raw_len = strlen(raw);
	return h;
}

static char out[16384];

static long rewrite(const char *raw, const struct egress_route *rt, struct egress_body *b)
{
	struct egress_head h = head("POST", "/v1/messages?x=1", raw);

	memset(out, 0, sizeof(out));
	return egress_route_rewrite_framed(&h, rt, (const uint8_t *)secret, strlen(secret), out,
					   sizeof(out), b);
}

static void test_rewrite_origin_form_host_injection_and_close(void **state)
{
	struct egress_route rt = route("x-api-key", "{secret}", 443);
	struct egress_body b;
	long n = rewrite("POST http://api.example.com/v1/messages?x=1 HTTP/1.1\r\n"
			 "Host: api.example.com\r\n"
			 "Content-Type: application/json\r\n"
			 "x-api-key: PLACEHOLDER\r\n"
			 "Accept: */*\r\n"
			 "Content-Length: 2\r\n\r\n", &rt, &b);

	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(out));
	assert_string_equal(out, "POST /v1/messages?x=1 HTTP/1.1\r\n"
				 "Host: api.example.com\r\n"
				 "Content-Type: application/json\r\n"
				 "Accept: */*\r\n"
				 "Content-Length: 2\r\n"
				 "x-api-key: sk-SECRET-1234\r\n"
				 "Accept-Encoding: identity\r\n"
				 "Connection: close\r\n\r\n");
	assert_int_equal(b.kind, EB_LENGTH);
	assert_int_equal(b.left, 2);
	assert_false(b.done);
	/* egress_route_rewrite writes the same */
	{
		static char out2[16384];
		struct egress_head h = head("POST", "/v1/messages?x=1",
					    "POST http://api.example.com/v1/messages?x=1 HTTP/1.1\r\n"
					    "Host: api.example.com\r\n"
					    "Content-Type: application/json\r\n"
					    "x-api-key: PLACEHOLDER\r\n"
					    "Accept: */*\r\n"
					    "Content-Length: 2\r\n\r\n");

		assert_int_equal(egress_route_rewrite(&h, &rt, (const uint8_t *)secret,
						      strlen(secret), out2, sizeof(out2)), n);
		assert_memory_equal(out, out2, (size_t)n);
	}
}

static void test_rewrite_host_port_and_template(void **state)
{
	struct egress_route rt = route("authorization", "Bearer {secret}", 8443);
	struct egress_body b;
	long n = rewrite("GET http://api.example.com/v1/messages?x=1 HTTP/1.1\r\n"
			 "Authorization: Bearer workload\r\n\r\n", &rt, &b);

	assert_true(n > 0);
	assert_non_null(strstr(out, "\r\nHost: api.example.com:8443\r\n"));
	assert_non_null(strstr(out, "\r\nauthorization: Bearer sk-SECRET-1234\r\n"));
	assert_null(strstr(out, "workload"));
	assert_int_equal(b.kind, EB_NONE);
	assert_true(b.done);
	/* Without a port the Host is the bare name */
	rt.up_port = 443;
	assert_true(rewrite("GET http://api.example.com/ HTTP/1.1\r\n\r\n", &rt, &b) > 0);
	assert_non_null(strstr(out, "\r\nHost: api.example.com\r\n"));
	assert_null(strstr(out, "api.example.com:"));
}

static void test_rewrite_drops_every_credential_and_hop_header(void **state)
{
	static const char *const names[] = {
		"Authorization", "authorization", "PROXY-AUTHORIZATION", "X-Api-Key", "Cookie",
		"Proxy-Connection", "Connection", "Keep-Alive", "TE", "Upgrade", "Host",
		"Accept-Encoding", "accept-encoding",
		"X-Route-Auth", "x-route-auth",
	};
	struct egress_route rt = route("x-route-auth", "tok={secret}", 443);

	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		char raw[512];
		struct egress_body b;
		long n;

		snprintf(raw, sizeof(raw), "GET http://api.example.com/ HTTP/1.1\r\n"
			 "X-Before: 1\r\n%s: DROPME\r\nX-After: 2\r\n\r\n", names[i]);
		n = rewrite(raw, &rt, &b);
		assert_true(n > 0);
		assert_null(strstr(out, "DROPME"));
		assert_non_null(strstr(out, "\r\nX-Before: 1\r\nX-After: 2\r\n"));
		assert_non_null(strstr(out, "\r\nx-route-auth: tok=sk-SECRET-1234\r\n"));
		assert_non_null(strstr(out, "\r\nAccept-Encoding: identity\r\nConnection: close\r\n\r\n"));
	}
	/* A name that only starts like a dropped one is kept */
	{
		struct egress_body b;

		assert_true(rewrite("GET http://api.example.com/ HTTP/1.1\r\n"
				    "Cookies-Policy: k\r\nTE-X: k\r\n\r\n", &rt, &b) > 0);
		assert_non_null(strstr(out, "\r\nCookies-Policy: k\r\nTE-X: k\r\n"));
	}
}

static void test_rewrite_framing(void **state)
{
	struct egress_route rt = route("x-api-key", "{secret}", 443);
	struct egress_body b;

	assert_true(rewrite("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", &rt,
			    &b) > 0);
	assert_int_equal(b.kind, EB_CHUNKED);
	assert_true(rewrite("POST http://a/ HTTP/1.1\r\ntransfer-encoding:  Chunked \r\n\r\n", &rt,
			    &b) > 0);
	assert_int_equal(b.kind, EB_CHUNKED);
	assert_true(rewrite("POST http://a/ HTTP/1.1\r\nContent-Length:\t17 \r\n\r\n", &rt, &b) > 0);
	assert_int_equal(b.kind, EB_LENGTH);
	assert_int_equal(b.left, 17);
	assert_true(rewrite("POST http://a/ HTTP/1.1\r\nContent-Length: 0\r\n\r\n", &rt, &b) > 0);
	assert_true(b.done);
}

static void test_rewrite_refuses_ambiguous_or_malformed_heads(void **state)
{
	static const char *const bad[] = {
		/* CL and TE, either order */
		"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
		/* two lengths, even equal; a list; signs; not digits; empty; too long */
		"POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length:\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nContent-Length: 1234567890123456789\r\n\r\n",
		/* codings other than chunked alone; two TE headers */
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: identity\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n",
		/* a name with a space before the colon, a continuation line, no colon, empty name */
		"POST http://a/ HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nX-A: 1\r\n Transfer-Encoding: chunked\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nX-A 1\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\n: 1\r\n\r\n",
		/* bare LF and bare CR line ends */
		"POST http://a/ HTTP/1.1\r\nX-A: 1\nContent-Length: 5\r\n\r\n",
		"POST http://a/ HTTP/1.1\r\nX-A: 1\rContent-Length: 5\r\n\r\n",
		"POST http://a/ HTTP/1.1\nX-A: 1\r\n\r\n",
		/* the head does not end with CRLFCRLF, or ends before it */
		"POST http://a/ HTTP/1.1\r\nX-A: 1\r\n",
		"POST http://a/ HTTP/1.1\r\n\r\nX-A: 1\r\n\r\n",
	};
	struct egress_route rt = route("x-api-key", "{secret}", 443);

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		struct egress_body b;

		if (rewrite(bad[i], &rt, &b) != ERR_PARSE)
			fail_msg("accepted bad head %zu: %s", i, bad[i]);
	}
	/* a NUL inside a header line */
	{
		static const char raw[] = "POST http://a/ HTTP/1.1\r\nX-A: 1\0Content-Length: 5\r\n\r\n";
		struct egress_head h = head("POST", "/", raw);
		struct egress_body b;

		h.raw_len = sizeof(raw) - 1;
		assert_int_equal(egress_route_rewrite_framed(&h, &rt, (const uint8_t *)secret,
							     strlen(secret), out, sizeof(out), &b),
				 ERR_PARSE);
	}
}

static void test_rewrite_refuses_bad_secret_path_method_and_small_buffers(void **state)
{
	struct egress_route rt = route("x-api-key", "{secret}", 443);
	const char *raw = "GET http://a/ HTTP/1.1\r\n\r\n";
	struct egress_head h = head("GET", "/", raw);
	struct egress_body b;

	/* a secret that would end its header line and start another */
	assert_int_equal(egress_route_rewrite_framed(&h, &rt, (const uint8_t *)"a\r\nX-Evil: 1", 12,
						     out, sizeof(out), &b), ERR_PARSE);
	assert_int_equal(egress_route_rewrite_framed(&h, &rt, (const uint8_t *)"a\nb", 3, out,
						     sizeof(out), &b), ERR_PARSE);
	h = head("GET", "/a b", raw);
	assert_int_equal(egress_route_rewrite(&h, &rt, (const uint8_t *)secret, strlen(secret), out,
					      sizeof(out)), ERR_PARSE);
	h = head("GET", "http://a/", raw);
	assert_int_equal(egress_route_rewrite(&h, &rt, (const uint8_t *)secret, strlen(secret), out,
					      sizeof(out)), ERR_PARSE);
	h = head("G T", "/", raw);
	assert_int_equal(egress_route_rewrite(&h, &rt, (const uint8_t *)secret, strlen(secret), out,
					      sizeof(out)), ERR_PARSE);
	/* a route header that frames the message or names the connection, or is no token */
	{
		static const char *const names[] = { "content-length", "Transfer-Encoding", "host",
						     "connection", "x-a b", "x:y" };

		h = head("GET", "/", raw);
		for (size_t i = 0; i < ARRAY_LEN(names); i++) {
			struct egress_route bad = route(names[i], "{secret}", 443);

			assert_int_equal(egress_route_rewrite(&h, &bad, (const uint8_t *)secret,
							      strlen(secret), out, sizeof(out)),
					 ERR_PARSE);
		}
	}
	/* a secret longer than the mask covers */
	{
		static uint8_t big[EGRESS_SECRET_BYTES + 1];

		memset(big, 'k', sizeof(big));
		assert_int_equal(egress_route_rewrite(&h, &rt, big, sizeof(big), out, sizeof(out)),
				 ERR_LIMIT);
		assert_true(egress_route_rewrite(&h, &rt, big, sizeof(big) - 1, out, sizeof(out)) > 0);
	}
	h = head("GET", "/", raw);
	for (size_t cap = 0; cap < 60; cap++)
		assert_int_equal(egress_route_rewrite(&h, &rt, (const uint8_t *)secret,
						      strlen(secret), out, cap), ERR_LIMIT);
	assert_true(egress_route_rewrite(&h, &rt, (const uint8_t *)secret, strlen(secret), out,
					 sizeof(out)) > 0);
}

/* ---- the body's end ---- */

static struct egress_body body_of(const char *raw)
{
	struct egress_route rt = route("x-api-key", "{secret}", 443);
	struct egress_body b;

	assert_true(rewrite(raw, &rt, &b) > 0);
	return b;
}

/* Feeds in (n bytes) in pieces of `piece`: the bytes taken, or ERR_PARSE. */
static long take_all(struct egress_body *b, const char *in, size_t n, size_t piece)
{
	size_t taken = 0;

	for (size_t at = 0; at < n && !b->done; at += piece) {
		size_t len = at + piece < n ? piece : n - at;
		long t = egress_body_take(b, (const uint8_t *)in + at, len);

		if (t < 0)
			return t;
		taken += (size_t)t;
		if ((size_t)t < len)
			break;
	}
	return (long)taken;
}

static void test_body_length_ends_before_a_second_request(void **state)
{
	static const char data[] = "hello GET /admin HTTP/1.1\r\nHost: x\r\n\r\n";

	for (size_t piece = 1; piece < sizeof(data); piece++) {
		struct egress_body b = body_of("POST http://a/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n");

		assert_int_equal(take_all(&b, data, sizeof(data) - 1, piece), 5);
		assert_true(b.done);
		assert_int_equal(egress_body_take(&b, (const uint8_t *)"x", 1), 0);
	}
	/* no framing: no body at all, whatever follows */
	{
		struct egress_body b = body_of("GET http://a/ HTTP/1.1\r\n\r\n");

		assert_int_equal(take_all(&b, data, sizeof(data) - 1, 7), 0);
		assert_true(b.done);
	}
}

static void test_body_chunked_ends_at_its_last_chunk(void **state)
{
	static const char body[] = "5;name=v\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n"
				   "0\r\nX-Trailer: t\r\nY: u\r\n\r\n";
	char data[512];
	size_t blen = sizeof(body) - 1;

	snprintf(data, sizeof(data), "%sPOST /smuggled HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
		 body);
	for (size_t piece = 1; piece <= strlen(data); piece++) {
		struct egress_body b =
			body_of("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");

		assert_int_equal(take_all(&b, data, strlen(data), piece), blen);
		assert_true(b.done);
	}
	/* the shortest: the last chunk alone */
	{
		struct egress_body b =
			body_of("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");

		assert_int_equal(take_all(&b, "0\r\n\r\nGET / HTTP/1.1\r\n\r\n", 24, 24), 5);
		assert_true(b.done);
	}
}

static void test_body_chunked_refuses_bad_chunk_lines(void **state)
{
	static const char *const bad[] = {
		"g\r\n",               /* not hex */
		"\r\n",                /* no size */
		"-1\r\n",
		"0x5\r\nhello\r\n",
		" 5\r\nhello\r\n",
		"5 \r\nhello\r\n",     /* no space before CRLF (nor before ';') */
		"5\nhello\r\n",        /* bare LF */
		"5\r\rhello\r\n",
		"5\r\nhelloX\r\n",     /* data longer than its size */
		"5\r\nhell\r\n\r\n",   /* shorter */
		"5\r\nhello\n0\r\n\r\n",
		"1000000000000000\r\n", /* 16 hex digits: past any byte count */
		"ffffffffffffffffff\r\n",
		"5;a\nb\r\nhello\r\n", /* LF in an extension */
		"0\r\nX: 1\n\r\n",      /* bare LF in a trailer */
		"0\r\n X: 1\r\n\r\n",   /* a folded trailer */
		"0\r\n\rX",
	};

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		struct egress_body b =
			body_of("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");

		if (take_all(&b, bad[i], strlen(bad[i]), 1) != ERR_PARSE)
			fail_msg("accepted bad chunk line %zu: %s", i, bad[i]);
	}
	/* 15 hex digits is the most a size may have */
	{
		struct egress_body b =
			body_of("POST http://a/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");

		assert_int_equal(take_all(&b, "000000000000005\r\nab", 19, 19), 19);
		assert_false(b.done);
	}
}

/* ---- the mask ---- */

static struct egress_mask mask;

/* Masks in (n bytes) fed in pieces of `piece` into got: its length. */
static size_t mask_stream(const char *sec, const char *in, size_t n, size_t piece, char *got)
{
	static uint8_t buf[8192];
	size_t o = 0;

	egress_mask_init(&mask, (const uint8_t *)sec, strlen(sec));
	for (size_t at = 0; at < n; at += piece) {
		size_t len = at + piece < n ? piece : n - at;
		size_t k = egress_mask_feed(&mask, (const uint8_t *)in + at, len, buf);

		assert_true(k <= len + strlen(sec));
		memcpy(got + o, buf, k);
		o += k;
		assert_true(mask.nheld < strlen(sec) || strlen(sec) == 0);
	}
	o += egress_mask_flush(&mask, (uint8_t *)got + o);
	got[o] = 0;
	return o;
}

static void test_mask_secret_split_over_every_feed_size(void **state)
{
	char in[256], want[256], got[512];
	size_t slen = strlen(secret);

	snprintf(in, sizeof(in), "x-api-key: %s\r\nok", secret);
	snprintf(want, sizeof(want), "x-api-key: %.*s\r\nok", (int)slen, "**************");
	for (size_t piece = 1; piece <= strlen(in) + 1; piece++) {
		assert_int_equal(mask_stream(secret, in, strlen(in), piece, got), strlen(in));
		assert_string_equal(got, want);
	}
}

static void test_mask_overlapping_prefixes(void **state)
{
	char got[64];

	for (size_t piece = 1; piece <= 5; piece++) {
		mask_stream("aab", "aaab", 4, piece, got);
		assert_string_equal(got, "a***");
		mask_stream("aab", "aaaab", 5, piece, got);
		assert_string_equal(got, "aa***");
		mask_stream("aab", "aabaab", 6, piece, got);
		assert_string_equal(got, "******");
		mask_stream("abab", "abababx", 7, piece, got);
		assert_string_equal(got, "****abx");
		mask_stream("abac", "ababac", 6, piece, got);
		assert_string_equal(got, "ab****");
	}
}

static void test_mask_at_the_end_and_prefixes_left_over(void **state)
{
	char got[64];

	for (size_t piece = 1; piece <= 8; piece++) {
		mask_stream("secret", "my secret", 9, piece, got);
		assert_string_equal(got, "my ******");
		/* a prefix that never completes comes out as it was, at the flush */
		mask_stream("secret", "my secre", 8, piece, got);
		assert_string_equal(got, "my secre");
		mask_stream("secret", "secre", 5, piece, got);
		assert_string_equal(got, "secre");
	}
	/* the flush never holds a whole secret, and nothing is held back beyond len - 1 */
	mask_stream("ab", "a", 1, 1, got);
	assert_string_equal(got, "a");
	/* an empty secret passes every byte */
	mask_stream("", "anything", 8, 3, got);
	assert_string_equal(got, "anything");
}

/* The reference: left to right, each occurrence replaced, scanning on after it. */
static size_t mask_naive(const char *sec, const char *in, size_t n, char *res)
{
	size_t len = strlen(sec), o = 0;

	for (size_t i = 0; i < n;) {
		if (len && i + len <= n && memcmp(in + i, sec, len) == 0) {
			memset(res + o, '*', len);
			o += len;
			i += len;
		} else {
			res[o++] = in[i++];
		}
	}
	res[o] = 0;
	return o;
}

static void test_mask_matches_the_reference_on_random_streams(void **state)
{
	static const char *const secrets[] = { "a", "ab", "aab", "abab", "aaaa", "abaab",
					       "abcabd", "bbbbbab" };
	char in[300], want[400], got[800];

	srand(7);
	for (int round = 0; round < 4000; round++) {
		const char *sec = secrets[round % ARRAY_LEN(secrets)];
		size_t n = (size_t)(rand() % 200), piece = 1 + (size_t)(rand() % 20);

		for (size_t i = 0; i < n; i++)
			in[i] = "ab"[rand() % 2];
		in[n] = 0;
		mask_naive(sec, in, n, want);
		mask_stream(sec, in, n, piece, got);
		if (strcmp(got, want) != 0)
			fail_msg("secret %s in %s (piece %zu): %s, want %s", sec, in, piece, got, want);
	}
}

static void test_end_words(void **state)
{
	assert_string_equal(egress_end_word(EE_CLOSED), "closed");
	assert_string_equal(egress_end_word(EE_BYTE_CAP), "byte_cap");
	assert_string_equal(egress_end_word(EE_CONTROL_LOST), "control_lost");
	assert_string_equal(egress_end_word(EE_UPSTREAM_ERROR), "upstream_error");
	assert_string_equal(egress_end_word(EE_CLIENT_GONE), "client_gone");
	assert_string_equal(egress_end_word(EE_TIMEOUT), "timeout");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rewrite_origin_form_host_injection_and_close),
		cmocka_unit_test(test_rewrite_host_port_and_template),
		cmocka_unit_test(test_rewrite_drops_every_credential_and_hop_header),
		cmocka_unit_test(test_rewrite_framing),
		cmocka_unit_test(test_rewrite_refuses_ambiguous_or_malformed_heads),
		cmocka_unit_test(test_rewrite_refuses_bad_secret_path_method_and_small_buffers),
		cmocka_unit_test(test_body_length_ends_before_a_second_request),
		cmocka_unit_test(test_body_chunked_ends_at_its_last_chunk),
		cmocka_unit_test(test_body_chunked_refuses_bad_chunk_lines),
		cmocka_unit_test(test_mask_secret_split_over_every_feed_size),
		cmocka_unit_test(test_mask_overlapping_prefixes),
		cmocka_unit_test(test_mask_at_the_end_and_prefixes_left_over),
		cmocka_unit_test(test_mask_matches_the_reference_on_random_streams),
		cmocka_unit_test(test_end_words),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
