/* test_egress_head.c: the proxy request head: the two forms it takes, what it refuses, and a
 * head fed one byte at a time reads as the whole. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "egress/head.h"

static int parse(const char *s, struct egress_head *h)
{
	return egress_head_parse(s, strlen(s), h);
}

static void test_connect_forms(void **state)
{
	struct egress_head h;

	assert_int_equal(parse("CONNECT PyPI.org:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n", &h),
			 EGRESS_HEAD_DONE);
	assert_true(egress_head_is_connect(&h));
	assert_string_equal(h.host, "pypi.org");
	assert_int_equal(h.port, 443);
	assert_string_equal(h.path, "");
	assert_int_equal(h.rest_len, 0);
	/* LF only, HTTP/1.0, an IPv6 literal, bytes after the head */
	assert_int_equal(parse("CONNECT [2001:DB8::1]:8443 HTTP/1.0\n\n\x16\x03\x01", &h),
			 EGRESS_HEAD_DONE);
	assert_string_equal(h.host, "2001:db8::1");
	assert_int_equal(h.port, 8443);
	assert_int_equal(h.rest_len, 3);
	assert_memory_equal(h.rest, "\x16\x03\x01", 3);
	assert_int_equal(h.raw_len, strlen("CONNECT [2001:DB8::1]:8443 HTTP/1.0\n\n"));
	assert_int_equal(parse("CONNECT 10.0.0.1:65535 HTTP/1.1\r\n\r\n", &h), EGRESS_HEAD_DONE);
	assert_int_equal(h.port, 65535);
}

static void test_absolute_forms(void **state)
{
	struct egress_head h;

	assert_int_equal(parse("POST http://API.example.com/v1/messages?key=1 HTTP/1.1\r\n"
			       "Host: api.example.com\r\nContent-Length: 2\r\n\r\n{}", &h),
			 EGRESS_HEAD_DONE);
	assert_false(egress_head_is_connect(&h));
	assert_string_equal(h.method, "POST");
	assert_string_equal(h.host, "api.example.com");
	assert_int_equal(h.port, 80);
	assert_string_equal(h.path, "/v1/messages?key=1");
	assert_int_equal(h.rest_len, 2);
	assert_int_equal(parse("GET HTTP://example.com:8080 HTTP/1.1\r\n\r\n", &h), EGRESS_HEAD_DONE);
	assert_string_equal(h.path, "/");
	assert_int_equal(h.port, 8080);
	assert_int_equal(parse("GET http://example.com?a=b HTTP/1.1\r\n\r\n", &h), EGRESS_HEAD_DONE);
	assert_string_equal(h.path, "/?a=b");
	assert_int_equal(parse("GET http://[::1]/x HTTP/1.1\r\n\r\n", &h), EGRESS_HEAD_DONE);
	assert_string_equal(h.host, "::1");
	assert_int_equal(h.port, 80);
	assert_string_equal(h.path, "/x");
	/* a header value may hold a tab and obs-text */
	assert_int_equal(parse("GET http://a.b/ HTTP/1.1\r\nX: a\tb\xc3\xa9\r\n\r\n", &h),
			 EGRESS_HEAD_DONE);
}

static void test_refused(void **state)
{
	static const char *const bad[] = {
		"GET /path HTTP/1.1\r\n\r\n",                   /* origin form */
		"GET * HTTP/1.1\r\n\r\n",
		"GET https://example.com/ HTTP/1.1\r\n\r\n",    /* another scheme */
		"GET ftp://example.com/ HTTP/1.1\r\n\r\n",
		"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", /* userinfo */
		"GET http://example.com/#frag HTTP/1.1\r\n\r\n",
		"GET http://example.com:/ HTTP/1.1\r\n\r\n",    /* empty port */
		"CONNECT example.com HTTP/1.1\r\n\r\n",          /* no port */
		"CONNECT example.com:0 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:65536 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:0443 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:+443 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:44a HTTP/1.1\r\n\r\n",
		"CONNECT http://example.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT [::1] HTTP/1.1\r\n\r\n",
		"CONNECT [fe80::1%eth0]:443 HTTP/1.1\r\n\r\n",  /* zone id */
		"CONNECT [not:v6:zz]:443 HTTP/1.1\r\n\r\n",
		"CONNECT exa mple.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT example..com:443 HTTP/1.1\r\n\r\n",
		"CONNECT .example.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT example.com.:443 HTTP/1.1\r\n\r\n",
		"CONNECT ex\x01mple.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:443 HTTP/2.0\r\n\r\n",
		"CONNECT example.com:443 HTTP/1.1 \r\n\r\n",
		"CONNECT  example.com:443 HTTP/1.1\r\n\r\n",
		"CONNECT example.com:443\r\n\r\n",
		"connect\texample.com:443 HTTP/1.1\r\n\r\n",
		"G(T http://example.com/ HTTP/1.1\r\n\r\n",
		"GET http://example.com/\x7f HTTP/1.1\r\n\r\n",
		"GET http://example.com/\xc3\xa9 HTTP/1.1\r\n\r\n",
		"\r\nGET http://example.com/ HTTP/1.1\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\n folded\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nNo colon\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\n: empty name\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nX: a\rb\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\nX: a\x01\r\n\r\n",
		"GET http://example.com/ HTTP/1.1\r\r\n\r\n",
		"TOOLONGMETHODNAMES http://example.com/ HTTP/1.1\r\n\r\n",
	};
	struct egress_head h;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = parse(bad[i], &h);
		if (rc != ERR_PARSE)
			fail_msg("accepted (rc %d): %s", rc, bad[i]);
	}
}

static void test_limits(void **state)
{
	static char big[EGRESS_HEAD_MAX + 64];
	struct egress_head h;
	char label[70];
	size_t n;

	/* a name over 253 bytes, a label over 63 */
	n = (size_t)snprintf(big, sizeof(big), "CONNECT ");
	for (int i = 0; i < 64; i++)
		n += (size_t)snprintf(big + n, sizeof(big) - n, "abc.");
	snprintf(big + n, sizeof(big) - n, "com:443 HTTP/1.1\r\n\r\n");
	assert_int_equal(parse(big, &h), ERR_PARSE);
	memset(label, 'a', 64);
	label[64] = '\0';
	snprintf(big, sizeof(big), "CONNECT %s.com:443 HTTP/1.1\r\n\r\n", label);
	assert_int_equal(parse(big, &h), ERR_PARSE);
	label[63] = '\0';
	snprintf(big, sizeof(big), "CONNECT %s.com:443 HTTP/1.1\r\n\r\n", label);
	assert_int_equal(parse(big, &h), EGRESS_HEAD_DONE);
	/* a head of exactly EGRESS_HEAD_MAX bytes is read; one byte more is refused */
	n = (size_t)snprintf(big, sizeof(big), "CONNECT a.com:443 HTTP/1.1\r\nX: ");
	memset(big + n, 'x', EGRESS_HEAD_MAX - n - 4);
	memcpy(big + EGRESS_HEAD_MAX - 4, "\r\n\r\n", 5);
	assert_int_equal(egress_head_parse(big, EGRESS_HEAD_MAX, &h), EGRESS_HEAD_DONE);
	memset(big + n, 'x', EGRESS_HEAD_MAX - n - 3);
	memcpy(big + EGRESS_HEAD_MAX - 3, "\r\n\r\n", 5);
	assert_int_equal(egress_head_parse(big, EGRESS_HEAD_MAX + 1, &h), ERR_PARSE);
	assert_int_equal(egress_head_parse(big, EGRESS_HEAD_MAX, &h), ERR_PARSE);
	assert_int_equal(egress_head_parse(big, EGRESS_HEAD_MAX - 1, &h), EGRESS_HEAD_MORE);
	/* a path over the struct's 2047 bytes */
	n = (size_t)snprintf(big, sizeof(big), "GET http://a.com/");
	memset(big + n, 'p', 2048);
	snprintf(big + n + 2048, sizeof(big) - n - 2048, " HTTP/1.1\r\n\r\n");
	assert_int_equal(parse(big, &h), ERR_PARSE);
}

/* Every prefix of a good head is MORE, never an error, and the whole is DONE; a bad request
 * line is refused as soon as it is complete. */
static void test_prefixes(void **state)
{
	static const char good[] = "POST http://api.example.com/v1/x HTTP/1.1\r\n"
				   "Host: api.example.com\nContent-Length: 5\r\n\r\nhello";
	const size_t head_len = strlen(good) - 5;
	struct egress_head h;

	for (size_t i = 0; i < head_len; i++)
		assert_int_equal(egress_head_parse(good, i, &h), EGRESS_HEAD_MORE);
	assert_int_equal(egress_head_parse(good, head_len, &h), EGRESS_HEAD_DONE);
	assert_int_equal(h.raw_len, head_len);
	assert_int_equal(h.rest_len, 0);
	assert_int_equal(parse("GET /x HTTP/1.1\r\n", &h), ERR_PARSE);
	assert_int_equal(parse("GET http://a\x01", &h), ERR_PARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_connect_forms),
		cmocka_unit_test(test_absolute_forms),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_prefixes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
