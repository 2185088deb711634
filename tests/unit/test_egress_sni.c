/* test_egress_sni.c: the ClientHello's server name: found, absent, split over records and fed
 * in pieces, and the malformed hellos refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "egress/sni.h"

struct msg {
	uint8_t b[40000];
	size_t n;
};

static void put(struct msg *m, const void *p, size_t n)
{
	assert_true(m->n + n <= sizeof(m->b));
	memcpy(m->b + m->n, p, n);
	m->n += n;
}

static void put16(struct msg *m, size_t v)
{
	uint8_t b[2] = { (uint8_t)(v >> 8), (uint8_t)v };
	put(m, b, 2);
}

/* A ClientHello handshake message (header included): the extensions given raw. */
static void hello(struct msg *m, const uint8_t *ext, size_t ext_len, bool with_ext)
{
	struct msg body = { .n = 0 };
	uint8_t rnd[32] = { 0 };

	put16(&body, 0x0303);
	put(&body, rnd, 32);
	put(&body, "\x20", 1);
	put(&body, rnd, 32);              /* session id */
	put16(&body, 4);
	put(&body, "\x13\x01\xc0\x2f", 4); /* cipher suites */
	put(&body, "\x01\x00", 2);         /* compression: null */
	if (with_ext) {
		put16(&body, ext_len);
		put(&body, ext, ext_len);
	}
	m->n = 0;
	put(m, "\x01", 1);
	uint8_t len[3] = { (uint8_t)(body.n >> 16), (uint8_t)(body.n >> 8), (uint8_t)body.n };
	put(m, len, 3);
	put(m, body.b, body.n);
}

/* server_name extension with one host_name entry, after a padding extension of pad bytes. */
static size_t sni_ext(uint8_t *out, const char *name, size_t pad)
{
	struct msg e = { .n = 0 };
	size_t nn = strlen(name);

	put16(&e, 21);
	put16(&e, pad);
	for (size_t i = 0; i < pad; i++)
		put(&e, "\0", 1);
	put16(&e, 0);
	put16(&e, nn + 5);
	put16(&e, nn + 3);
	put(&e, "\0", 1);
	put16(&e, nn);
	put(&e, name, nn);
	memcpy(out, e.b, e.n);
	return e.n;
}

/* The message in records of at most chunk bytes. */
static void records(struct msg *out, const struct msg *hs, size_t chunk)
{
	out->n = 0;
	for (size_t off = 0; off < hs->n; off += chunk) {
		size_t k = hs->n - off < chunk ? hs->n - off : chunk;
		put(out, "\x16\x03\x01", 3);
		put16(out, k);
		put(out, hs->b + off, k);
	}
}

static void test_found_and_fed_in_pieces(void **state)
{
	static struct msg hs, rec;
	uint8_t ext[512];
	char name[EGRESS_HOST_BYTES];
	size_t en = sni_ext(ext, "Api.Example.COM", 10);

	hello(&hs, ext, en, true);
	records(&rec, &hs, 16384);
	put(&rec, "\x17\x03\x03\x00\x01x", 6); /* what follows the hello is not its business */
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), EGRESS_SNI_FOUND);
	assert_string_equal(name, "api.example.com");
	for (size_t i = 0; i < rec.n - 6; i++)
		assert_int_equal(egress_sni_parse(rec.b, i, name), EGRESS_SNI_MORE);
}

static void test_split_over_records(void **state)
{
	static struct msg hs, rec;
	static uint8_t ext[16000];
	char name[EGRESS_HOST_BYTES];
	size_t en = sni_ext(ext, "pypi.org", 9000);

	hello(&hs, ext, en, true);
	for (size_t chunk = 1; chunk < 9000; chunk = chunk * 3 + 1) {
		if (hs.n / chunk > 8)
			continue; /* more record headers than the worker buffers for */
		records(&rec, &hs, chunk);
		assert_int_equal(egress_sni_parse(rec.b, rec.n, name), EGRESS_SNI_FOUND);
		assert_string_equal(name, "pypi.org");
	}
	records(&rec, &hs, 100); /* 9 KiB in 100-byte records: parsed all the same */
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), EGRESS_SNI_FOUND);
}

static void test_none(void **state)
{
	static struct msg hs, rec;
	char name[EGRESS_HOST_BYTES];
	uint8_t ext[8] = { 0x00, 0x17, 0x00, 0x00 }; /* extended master secret only */

	hello(&hs, NULL, 0, false);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), EGRESS_SNI_NONE);
	hello(&hs, ext, 4, true);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), EGRESS_SNI_NONE);
	assert_string_equal(name, "");
}

static void test_refused(void **state)
{
	static struct msg hs, rec;
	static uint8_t ext[20000];
	char name[EGRESS_HOST_BYTES];
	size_t en;

	/* not a handshake record; an HTTP request sent through the tunnel */
	assert_int_equal(egress_sni_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, name),
			 ERR_PARSE);
	assert_int_equal(egress_sni_parse((const uint8_t *)"G", 1, name), ERR_PARSE);
	/* a name that is no DNS name */
	en = sni_ext(ext, "bad name", 0);
	hello(&hs, ext, en, true);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	en = sni_ext(ext, "a..b", 0);
	hello(&hs, ext, en, true);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	/* two server_name extensions */
	en = sni_ext(ext, "a.example", 0);
	en += sni_ext(ext + en, "b.example", 0);
	hello(&hs, ext, en, true);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	/* an extension length past its end */
	en = sni_ext(ext, "a.example", 0);
	hello(&hs, ext, en, true);
	hs.b[hs.n - 16] ^= 0x40; /* the server_name extension's length */
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	/* a ServerHello, not a ClientHello */
	en = sni_ext(ext, "a.example", 0);
	hello(&hs, ext, en, true);
	hs.b[0] = 2;
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	/* a hello over EGRESS_HELLO_MAX */
	en = sni_ext(ext, "a.example", EGRESS_HELLO_MAX);
	hello(&hs, ext, en, true);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
	/* an empty record, an oversized record */
	assert_int_equal(egress_sni_parse((const uint8_t *)"\x16\x03\x01\x00\x00", 5, name),
			 ERR_PARSE);
	assert_int_equal(egress_sni_parse((const uint8_t *)"\x16\x03\x01\x40\x01", 5, name),
			 ERR_PARSE);
	/* another handshake message in the hello's last record */
	en = sni_ext(ext, "a.example", 0);
	hello(&hs, ext, en, true);
	put(&hs, "\x14\x00\x00\x00", 4);
	records(&rec, &hs, 16384);
	assert_int_equal(egress_sni_parse(rec.b, rec.n, name), ERR_PARSE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_found_and_fed_in_pieces),
		cmocka_unit_test(test_split_over_records),
		cmocka_unit_test(test_none),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
