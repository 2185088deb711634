/* test_hpack.c: the HPACK decoder against RFC 7541 Appendix C, its error paths, the Huffman
 * table, and encode/decode round trips against a model of the dynamic table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "h2/hpack.h"

/* ---- helpers ---- */

#define MAX_FIELDS 64
#define MAX_TEXT 300

struct fields {
	size_t n;
	struct {
		char name[MAX_TEXT];
		char value[MAX_TEXT];
		size_t name_len;
		size_t value_len;
	} f[MAX_FIELDS];
	int stop_at;  /* callback returns -1234 on this field (1-based); 0: never */
};

static int collect(void *ctx, const char *name, size_t name_len, const char *value,
		   size_t value_len)
{
	struct fields *fs = ctx;

	assert_true(fs->n < MAX_FIELDS);
	if (fs->stop_at != 0 && (size_t)fs->stop_at == fs->n + 1)
		return -1234;
	fs->f[fs->n].name_len = name_len;
	fs->f[fs->n].value_len = value_len;
	/* long fields are checked by length only */
	if (name_len < MAX_TEXT)
		memcpy(fs->f[fs->n].name, name, name_len);
	if (value_len < MAX_TEXT)
		memcpy(fs->f[fs->n].value, value, value_len);
	fs->f[fs->n].name[name_len < MAX_TEXT ? name_len : 0] = 0;
	fs->f[fs->n].value[value_len < MAX_TEXT ? value_len : 0] = 0;
	fs->n++;
	return 0;
}

/* Parses an RFC hex dump such as "8286 8441 0f77"; spaces are ignored. */
static size_t unhex(const char *s, uint8_t *out)
{
	size_t n = 0;

	for (; *s; s++) {
		char h[3] = { 0 };

		if (*s == ' ' || *s == '\n')
			continue;
		h[0] = s[0];
		h[1] = s[1];
		assert_non_null(s[1]);
		out[n++] = (uint8_t)strtoul(h, NULL, 16);
		s++;
	}
	return n;
}

static int decode_hex(struct hpack_dec *d, const char *hex, struct fields *fs)
{
	uint8_t block[512];
	size_t len = unhex(hex, block);

	memset(fs, 0, sizeof(*fs));
	return hpack_decode(d, block, len, collect, fs);
}

static int decode_bytes(struct hpack_dec *d, const void *block, size_t len)
{
	static struct fields fs;

	memset(&fs, 0, sizeof(fs));
	return hpack_decode(d, block, len, collect, &fs);
}

/* name, value pairs, NULL-terminated */
static void expect_fields(const struct fields *fs, const char *const *pairs)
{
	size_t i = 0;

	for (; pairs[2 * i]; i++) {
		assert_true(i < fs->n);
		assert_string_equal(fs->f[i].name, pairs[2 * i]);
		assert_string_equal(fs->f[i].value, pairs[2 * i + 1]);
		assert_int_equal(fs->f[i].name_len, strlen(pairs[2 * i]));
		assert_int_equal(fs->f[i].value_len, strlen(pairs[2 * i + 1]));
	}
	assert_int_equal(fs->n, i);
}

/* Checks the dynamic table holds exactly these entries (newest first) and this size, by
 * decoding each dynamic index, then that the next index is refused. */
static void expect_table(struct hpack_dec *d, const char *const *pairs, uint32_t size)
{
	static struct hpack_dec copy;
	struct fields fs;
	uint32_t n = 0;

	for (; pairs[2 * n]; n++) {
		uint8_t idx = (uint8_t)(0x80 | (62 + n));

		memset(&fs, 0, sizeof(fs));
		assert_int_equal(hpack_decode(d, &idx, 1, collect, &fs), 0);
		assert_int_equal(fs.n, 1);
		assert_string_equal(fs.f[0].name, pairs[2 * n]);
		assert_string_equal(fs.f[0].value, pairs[2 * n + 1]);
	}
	assert_int_equal(d->count, n);
	assert_int_equal(d->size, size);
	copy = *d;
	uint8_t past = (uint8_t)(0x80 | (62 + n));
	assert_int_equal(decode_bytes(&copy, &past, 1), HPACK_ERR_COMPRESSION);
}

/* A Huffman encoder, for tests only: the module's encoder never uses Huffman. */
static size_t huffman_encode(const uint8_t *s, size_t len, uint8_t *out)
{
	uint64_t acc = 0;
	unsigned nbits = 0;
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		acc = (acc << hpack_huffman_code[s[i]].bits) | hpack_huffman_code[s[i]].code;
		nbits += hpack_huffman_code[s[i]].bits;
		while (nbits >= 8) {
			nbits -= 8;
			out[n++] = (uint8_t)(acc >> nbits);
		}
	}
	if (nbits > 0)
		out[n++] = (uint8_t)((acc << (8 - nbits)) | (0xffu >> nbits));
	return n;
}

static size_t put_int(uint8_t *p, uint8_t flags, unsigned prefix, uint32_t v)
{
	uint32_t mask = (1u << prefix) - 1;
	size_t n = 0;

	if (v < mask) {
		p[n++] = (uint8_t)(flags | v);
		return n;
	}
	p[n++] = (uint8_t)(flags | mask);
	for (v -= mask; v >= 0x80; v >>= 7)
		p[n++] = (uint8_t)(0x80 | (v & 0x7f));
	p[n++] = (uint8_t)v;
	return n;
}

static size_t put_string(uint8_t *p, const void *s, size_t len, int huffman)
{
	static uint8_t coded[2 * HPACK_MAX_FIELD_BYTES];
	size_t n;

	if (!huffman) {
		n = put_int(p, 0x00, 7, (uint32_t)len);
		memcpy(p + n, s, len);
		return n + len;
	}
	size_t clen = huffman_encode(s, len, coded);
	n = put_int(p, 0x80, 7, (uint32_t)clen);
	memcpy(p + n, coded, clen);
	return n + clen;
}

/* ---- RFC 7541 C.2: single representations ---- */

static void test_hpack_rfc_c2_1_literal_with_indexing_adds_entry(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573"
					"746f 6d2d 6865 6164 6572", &fs), 0);
	expect_fields(&fs, (const char *const[]){ "custom-key", "custom-header", NULL });
	expect_table(&d, (const char *const[]){ "custom-key", "custom-header", NULL }, 55);
}

static void test_hpack_rfc_c2_2_literal_without_indexing_leaves_table(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "040c 2f73 616d 706c 652f 7061 7468", &fs), 0);
	expect_fields(&fs, (const char *const[]){ ":path", "/sample/path", NULL });
	expect_table(&d, (const char *const[]){ NULL }, 0);
}

static void test_hpack_rfc_c2_3_never_indexed_leaves_table(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "1008 7061 7373 776f 7264 0673 6563 7265 74", &fs), 0);
	expect_fields(&fs, (const char *const[]){ "password", "secret", NULL });
	expect_table(&d, (const char *const[]){ NULL }, 0);
}

static void test_hpack_rfc_c2_4_indexed_static_field(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "82", &fs), 0);
	expect_fields(&fs, (const char *const[]){ ":method", "GET", NULL });
	expect_table(&d, (const char *const[]){ NULL }, 0);
}

/* ---- RFC 7541 C.3 and C.4: requests on one connection ---- */

static const char *const req1[] = { ":method", "GET", ":scheme", "http", ":path", "/",
				    ":authority", "www.example.com", NULL };
static const char *const req1_table[] = { ":authority", "www.example.com", NULL };
static const char *const req2[] = { ":method", "GET", ":scheme", "http", ":path", "/",
				    ":authority", "www.example.com", "cache-control", "no-cache",
				    NULL };
static const char *const req2_table[] = { "cache-control", "no-cache", ":authority",
					  "www.example.com", NULL };
static const char *const req3[] = { ":method", "GET", ":scheme", "https", ":path",
				    "/index.html", ":authority", "www.example.com", "custom-key",
				    "custom-value", NULL };
static const char *const req3_table[] = { "custom-key", "custom-value", "cache-control",
					  "no-cache", ":authority", "www.example.com", NULL };

static void test_hpack_rfc_c3_requests_without_huffman(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
				    &fs), 0);
	expect_fields(&fs, req1);
	expect_table(&d, req1_table, 57);

	assert_int_equal(decode_hex(&d, "8286 84be 5808 6e6f 2d63 6163 6865", &fs), 0);
	expect_fields(&fs, req2);
	expect_table(&d, req2_table, 110);

	assert_int_equal(decode_hex(&d, "8287 85bf 400a 6375 7374 6f6d 2d6b 6579"
					"0c63 7573 746f 6d2d 7661 6c75 65", &fs), 0);
	expect_fields(&fs, req3);
	expect_table(&d, req3_table, 164);
}

static void test_hpack_rfc_c4_requests_with_huffman(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff", &fs), 0);
	expect_fields(&fs, req1);
	expect_table(&d, req1_table, 57);

	assert_int_equal(decode_hex(&d, "8286 84be 5886 a8eb 1064 9cbf", &fs), 0);
	expect_fields(&fs, req2);
	expect_table(&d, req2_table, 110);

	assert_int_equal(decode_hex(&d, "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925"
					"a849 e95b b8e8 b4bf", &fs), 0);
	expect_fields(&fs, req3);
	expect_table(&d, req3_table, 164);
}

/* ---- RFC 7541 C.5 and C.6: responses with a 256-octet table, so entries are evicted ---- */

#define DATE1 "Mon, 21 Oct 2013 20:13:21 GMT"
#define DATE2 "Mon, 21 Oct 2013 20:13:22 GMT"
#define LOC "https://www.example.com"
#define COOKIE "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"

static const char *const resp1[] = { ":status", "302", "cache-control", "private", "date",
				     DATE1, "location", LOC, NULL };
static const char *const resp1_table[] = { "location", LOC, "date", DATE1, "cache-control",
					   "private", ":status", "302", NULL };
static const char *const resp2[] = { ":status", "307", "cache-control", "private", "date",
				     DATE1, "location", LOC, NULL };
static const char *const resp2_table[] = { ":status", "307", "location", LOC, "date", DATE1,
					   "cache-control", "private", NULL };
static const char *const resp3[] = { ":status", "200", "cache-control", "private", "date",
				     DATE2, "location", LOC, "content-encoding", "gzip",
				     "set-cookie", COOKIE, NULL };
static const char *const resp3_table[] = { "set-cookie", COOKIE, "content-encoding", "gzip",
					   "date", DATE2, NULL };

static void test_hpack_rfc_c5_responses_evict_without_huffman(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 256);
	assert_int_equal(decode_hex(&d, "4803 3330 3258 0770 7269 7661 7465 611d"
					"4d6f 6e2c 2032 3120 4f63 7420 3230 3133"
					"2032 303a 3133 3a32 3120 474d 546e 1768"
					"7474 7073 3a2f 2f77 7777 2e65 7861 6d70"
					"6c65 2e63 6f6d", &fs), 0);
	expect_fields(&fs, resp1);
	expect_table(&d, resp1_table, 222);

	assert_int_equal(decode_hex(&d, "4803 3330 37c1 c0bf", &fs), 0);
	expect_fields(&fs, resp2);
	expect_table(&d, resp2_table, 222);

	assert_int_equal(decode_hex(&d, "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420"
					"3230 3133 2032 303a 3133 3a32 3220 474d"
					"54c0 5a04 677a 6970 7738 666f 6f3d 4153"
					"444a 4b48 514b 425a 584f 5157 454f 5049"
					"5541 5851 5745 4f49 553b 206d 6178 2d61"
					"6765 3d33 3630 303b 2076 6572 7369 6f6e"
					"3d31", &fs), 0);
	expect_fields(&fs, resp3);
	expect_table(&d, resp3_table, 215);
}

static void test_hpack_rfc_c6_responses_evict_with_huffman(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 256);
	assert_int_equal(decode_hex(&d, "4882 6402 5885 aec3 771a 4b61 96d0 7abe"
					"9410 54d4 44a8 2005 9504 0b81 66e0 82a6"
					"2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8"
					"e9ae 82ae 43d3", &fs), 0);
	expect_fields(&fs, resp1);
	expect_table(&d, resp1_table, 222);

	assert_int_equal(decode_hex(&d, "4883 640e ffc1 c0bf", &fs), 0);
	expect_fields(&fs, resp2);
	expect_table(&d, resp2_table, 222);

	assert_int_equal(decode_hex(&d, "88c1 6196 d07a be94 1054 d444 a820 0595"
					"040b 8166 e084 a62d 1bff c05a 839b d9ab"
					"77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b"
					"3960 d5af 2708 7f36 72c1 ab27 0fb5 291f"
					"9587 3160 65c0 03ed 4ee5 b106 3d50 07", &fs), 0);
	expect_fields(&fs, resp3);
	expect_table(&d, resp3_table, 215);
}

/* ---- the Huffman table and decoder ---- */

static void test_hpack_huffman_table_is_a_complete_canonical_code(void **state)
{
	/* Ordered by (length, symbol), each code must be the previous plus one, shifted by the
	 * growth in length, starting from 0, and the last must be all ones: then the lengths
	 * fill the code space exactly (Kraft equality) and no code is mistyped. */
	uint32_t prev_code = 0;
	unsigned prev_bits = 0, seen = 0;

	for (unsigned bits = 1; bits <= 32; bits++) {
		for (unsigned sym = 0; sym < 257; sym++) {
			if (hpack_huffman_code[sym].bits != bits)
				continue;
			uint32_t want = seen == 0 ? 0 : (prev_code + 1) << (bits - prev_bits);

			assert_int_equal(hpack_huffman_code[sym].code, want);
			prev_code = want;
			prev_bits = bits;
			seen++;
		}
	}
	assert_int_equal(seen, 257);
	assert_int_equal(prev_bits, 30);
	assert_int_equal(prev_code, 0x3fffffff);
	/* spot checks against the RFC text */
	assert_int_equal(hpack_huffman_code['/'].code, 0x18);
	assert_int_equal(hpack_huffman_code['/'].bits, 6);
	assert_int_equal(hpack_huffman_code[256].code, 0x3fffffff);
	assert_int_equal(hpack_huffman_code[0].code, 0x1ff8);
	assert_int_equal(hpack_huffman_code[255].code, 0x3ffffee);
	assert_int_equal(hpack_huffman_code[255].bits, 26);
}

static void test_hpack_huffman_decodes_every_symbol(void **state)
{
	uint8_t in[256], coded[1024], out[256];
	size_t n, out_len;

	for (unsigned sym = 0; sym < 256; sym++) {
		in[0] = (uint8_t)sym;
		n = huffman_encode(in, 1, coded);
		assert_int_equal(hpack_huffman_decode(coded, n, out, sizeof(out), &out_len), 0);
		assert_int_equal(out_len, 1);
		assert_int_equal(out[0], sym);
	}
	for (unsigned sym = 0; sym < 256; sym++)
		in[sym] = (uint8_t)(255 - sym);
	n = huffman_encode(in, 256, coded);
	assert_int_equal(hpack_huffman_decode(coded, n, out, sizeof(out), &out_len), 0);
	assert_int_equal(out_len, 256);
	assert_memory_equal(out, in, 256);
	/* an empty string is valid */
	assert_int_equal(hpack_huffman_decode(coded, 0, out, sizeof(out), &out_len), 0);
	assert_int_equal(out_len, 0);
}

static void test_hpack_huffman_rejects_eos_and_bad_padding(void **state)
{
	uint8_t out[16];
	size_t out_len;
	/* EOS (30 ones) then 2 bits of padding */
	const uint8_t eos[] = { 0xff, 0xff, 0xff, 0xff };
	/* 'a' (00011) then EOS: the symbol must be refused even after good ones */
	const uint8_t a_eos[] = { 0x1f, 0xff, 0xff, 0xff, 0xff };
	/* '0' (00000) padded with 011: padding must be ones */
	const uint8_t zero_pad[] = { 0x03 };
	/* '0' then a whole octet of ones: padding longer than 7 bits */
	const uint8_t long_pad[] = { 0x07, 0xff };
	/* a single octet of ones: 8 bits of padding and no symbol */
	const uint8_t all_pad[] = { 0xff };
	/* '0' with 3 bits of ones: fine */
	const uint8_t good[] = { 0x07 };

	assert_int_equal(hpack_huffman_decode(eos, sizeof(eos), out, sizeof(out), &out_len),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(hpack_huffman_decode(a_eos, sizeof(a_eos), out, sizeof(out), &out_len),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(hpack_huffman_decode(zero_pad, 1, out, sizeof(out), &out_len),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(hpack_huffman_decode(long_pad, 2, out, sizeof(out), &out_len),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(hpack_huffman_decode(all_pad, 1, out, sizeof(out), &out_len),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(hpack_huffman_decode(good, 1, out, sizeof(out), &out_len), 0);
	assert_int_equal(out_len, 1);
	assert_int_equal(out[0], '0');
	/* two symbols into a one-octet buffer */
	const uint8_t two[] = { 0x00, 0x7f };  /* '0' '0' then 6 ones */
	assert_int_equal(hpack_huffman_decode(two, 2, out, 1, &out_len), HPACK_ERR_TOO_BIG);
	assert_int_equal(hpack_huffman_decode(two, 2, out, 2, &out_len), 0);
	assert_int_equal(out_len, 2);
}

static void test_hpack_decode_rejects_huffman_errors_in_block(void **state)
{
	static struct hpack_dec d;
	/* literal without indexing, name :path (4), Huffman value of 1 octet */
	const uint8_t bad_pad[] = { 0x04, 0x81, 0x03 };
	const uint8_t eos[] = { 0x04, 0x84, 0xff, 0xff, 0xff, 0xff };
	const uint8_t good[] = { 0x04, 0x81, 0x07 };
	/* Huffman name with bad padding in a new-name literal */
	const uint8_t bad_name[] = { 0x00, 0x81, 0xff, 0x00 };

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, bad_pad, sizeof(bad_pad)), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, eos, sizeof(eos)), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, bad_name, sizeof(bad_name)), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, good, sizeof(good)), 0);
}

/* ---- integers and indexes ---- */

static void test_hpack_rfc_c1_integers_through_size_updates(void **state)
{
	static struct hpack_dec d;
	/* C.1.2: 1337 on a 5-bit prefix, as a table size update */
	const uint8_t i1337[] = { 0x3f, 0x9a, 0x0a };
	/* C.1.1: 10 on a 5-bit prefix */
	const uint8_t i10[] = { 0x2a };
	/* the most we advertised, 4096 = 31 + 97 + (31 << 7) */
	const uint8_t i4096[] = { 0x3f, 0xe1, 0x1f };

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, i1337, sizeof(i1337)), 0);
	assert_int_equal(d.max_size, 1337);
	assert_int_equal(decode_bytes(&d, i10, sizeof(i10)), 0);
	assert_int_equal(d.max_size, 10);
	assert_int_equal(decode_bytes(&d, i4096, sizeof(i4096)), 0);
	assert_int_equal(d.max_size, 4096);
}

static void test_hpack_rejects_integer_overflow_and_overlong(void **state)
{
	static struct hpack_dec d;
	/* 127 + 0x7f << 0 + ... + 0x0f << 28: over 2^31 */
	const uint8_t over[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f };
	/* a size update of 32 whose zero groups go on past 5 continuation octets */
	const uint8_t padded[] = { 0x3f, 0x81, 0x80, 0x80, 0x80, 0x80, 0x00 };
	/* the continuation never ends */
	const uint8_t unterminated[] = { 0xff, 0x80, 0x80 };
	/* a string length that overflows */
	const uint8_t long_len[] = { 0x00, 0x7f, 0xff, 0xff, 0xff, 0xff, 0x7f };

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, over, sizeof(over)), HPACK_ERR_COMPRESSION);
	assert_int_equal(decode_bytes(&d, padded, sizeof(padded)), HPACK_ERR_COMPRESSION);
	assert_int_equal(decode_bytes(&d, unterminated, sizeof(unterminated)),
			 HPACK_ERR_COMPRESSION);
	assert_int_equal(decode_bytes(&d, long_len, sizeof(long_len)), HPACK_ERR_COMPRESSION);
}

static void test_hpack_accepts_padded_integer_within_five_octets(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	/* size update 31 + 1 + (0 << 7) = 32, its continuation padded with a zero group */
	assert_int_equal(decode_hex(&d, "3f81 00 82", &fs), 0);
	assert_int_equal(d.max_size, 32);
	expect_fields(&fs, (const char *const[]){ ":method", "GET", NULL });
}

static void test_hpack_rejects_index_zero_and_past_tables(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "80", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	/* 62 with an empty dynamic table */
	assert_int_equal(decode_hex(&d, "be", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	/* static index 61 is the last valid one */
	assert_int_equal(decode_hex(&d, "bd", &fs), 0);
	expect_fields(&fs, (const char *const[]){ "www-authenticate", "", NULL });
	/* a literal's name index past the tables: 15 + 47 = 62, without indexing */
	assert_int_equal(decode_hex(&d, "0f2f 0161", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	/* the same with incremental indexing, 62 */
	assert_int_equal(decode_hex(&d, "7e 0161", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 4096);
	/* after one insertion, 62 is valid and 63 is not */
	assert_int_equal(decode_hex(&d, "4001 6101 62be", &fs), 0);
	expect_fields(&fs, (const char *const[]){ "a", "b", "a", "b", NULL });
	assert_int_equal(decode_hex(&d, "bf", &fs), HPACK_ERR_COMPRESSION);
}

/* ---- table size updates ---- */

static void test_hpack_size_update_above_advertised_is_refused(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	/* 4097 */
	assert_int_equal(decode_hex(&d, "3fe2 1f", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 256);
	/* 257 = 31 + 226 + (1 << 7) ... 31 + 98 + 128 */
	assert_int_equal(decode_hex(&d, "3fe2 01", &fs), HPACK_ERR_COMPRESSION);
	hpack_dec_init(&d, 256);
	assert_int_equal(decode_hex(&d, "3fe1 01", &fs), 0);
	assert_int_equal(d.max_size, 256);
	/* settings above what the storage holds are cut to it */
	hpack_dec_init(&d, 1u << 20);
	assert_int_equal(d.settings_max, HPACK_TABLE_BYTES);
	assert_int_equal(decode_hex(&d, "3fe2 1f", &fs), HPACK_ERR_COMPRESSION);
}

static void test_hpack_size_update_only_at_block_start(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "8220", &fs), HPACK_ERR_COMPRESSION);
	/* several at the start are fine (RFC 7541 4.2: smallest, then final) */
	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_hex(&d, "203f e11f 82", &fs), 0);
	assert_int_equal(d.max_size, 4096);
	expect_fields(&fs, (const char *const[]){ ":method", "GET", NULL });
	/* a later block may start with one again */
	assert_int_equal(decode_hex(&d, "3f61 82", &fs), 0);
	assert_int_equal(d.max_size, 128);
}

static void test_hpack_size_update_evicts_and_zero_disables_table(void **state)
{
	static struct hpack_dec d;
	struct fields fs;

	hpack_dec_init(&d, 4096);
	/* custom-key: custom-header (55), then :authority: www.example.com (57) */
	assert_int_equal(decode_hex(&d, "400a 6375 7374 6f6d 2d6b 6579 0d63 7573"
					"746f 6d2d 6865 6164 6572"
					"410f 7777 772e 6578 616d 706c 652e 636f 6d", &fs), 0);
	expect_table(&d, (const char *const[]){ ":authority", "www.example.com", "custom-key",
						"custom-header", NULL }, 112);
	/* 100: the older entry goes */
	assert_int_equal(decode_hex(&d, "3f45", &fs), 0);
	expect_table(&d, (const char *const[]){ ":authority", "www.example.com", NULL }, 57);
	/* 0: the table empties, and an insertion then stores nothing */
	assert_int_equal(decode_hex(&d, "20 4001 6101 62", &fs), 0);
	expect_fields(&fs, (const char *const[]){ "a", "b", NULL });
	expect_table(&d, (const char *const[]){ NULL }, 0);
}

static void test_hpack_entry_larger_than_table_empties_it(void **state)
{
	static struct hpack_dec d;
	uint8_t block[600];
	size_t n = 0;
	char value[300];

	hpack_dec_init(&d, 256);
	n += put_int(block + n, 0x40, 6, 0);
	n += put_string(block + n, "k", 1, 0);
	n += put_string(block + n, "v", 1, 0);
	assert_int_equal(decode_bytes(&d, block, n), 0);
	expect_table(&d, (const char *const[]){ "k", "v", NULL }, 34);
	/* 1 + 224 + 32 = 257 > 256: not an error, the table ends up empty */
	memset(value, 'x', sizeof(value));
	n = put_int(block, 0x40, 6, 0);
	n += put_string(block + n, "k", 1, 0);
	n += put_string(block + n, value, 224, 0);
	assert_int_equal(decode_bytes(&d, block, n), 0);
	expect_table(&d, (const char *const[]){ NULL }, 0);
	/* 1 + 223 + 32 = 256 fits exactly */
	n = put_int(block, 0x40, 6, 0);
	n += put_string(block + n, "k", 1, 0);
	n += put_string(block + n, value, 223, 0);
	assert_int_equal(decode_bytes(&d, block, n), 0);
	assert_int_equal(d.count, 1);
	assert_int_equal(d.size, 256);
}

static void test_hpack_indexing_with_name_of_entry_it_evicts(void **state)
{
	static struct hpack_dec d;
	static uint8_t block[4096];
	static char value[3000];
	struct fields fs;
	size_t n;

	hpack_dec_init(&d, 4096);
	memset(value, 'x', sizeof(value));
	n = put_int(block, 0x40, 6, 0);
	n += put_string(block + n, "name", 4, 0);
	n += put_string(block + n, value, 3000, 0);
	assert_int_equal(decode_bytes(&d, block, n), 0);
	/* 4 + 3000 + 32 twice does not fit: inserting evicts entry 62, whose name it reuses,
	 * and its bytes wrap over where that name was */
	memset(value, 'y', sizeof(value));
	n = put_int(block, 0x40, 6, 62);
	n += put_string(block + n, value, 3000, 0);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(hpack_decode(&d, block, n, collect, &fs), 0);
	assert_int_equal(fs.n, 1);
	assert_string_equal(fs.f[0].name, "name");
	assert_int_equal(fs.f[0].value_len, 3000);
	assert_int_equal(d.count, 1);
	assert_int_equal(d.size, 3036);
	uint8_t idx = 0x80 | 62;
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(hpack_decode(&d, &idx, 1, collect, &fs), 0);
	assert_string_equal(fs.f[0].name, "name");
	assert_int_equal(fs.f[0].value_len, 3000);
}

static void test_hpack_entries_wrapping_the_storage_come_out_whole(void **state)
{
	static struct hpack_dec d;
	static uint8_t block[4096];
	char name[32], value[1200];
	struct fields fs;
	size_t n;

	hpack_dec_init(&d, 4096);
	/* entries of 10 + 1100 + 32 octets: the fourth evicts the first and the bytes of every
	 * later one cross the end of the storage at some point */
	for (int i = 0; i < 12; i++) {
		snprintf(name, sizeof(name), "name-%05d", i);
		memset(value, 'a' + i, sizeof(value));
		n = put_int(block, 0x40, 6, 0);
		n += put_string(block + n, name, 10, i & 1);
		n += put_string(block + n, value, 1100, 0);
		assert_int_equal(decode_bytes(&d, block, n), 0);
		assert_int_equal(d.count, i < 3 ? i + 1 : 3);
		for (int age = 0; age < d.count; age++) {
			uint8_t idx = (uint8_t)(0x80 | (62 + age));
			char want[32];

			snprintf(want, sizeof(want), "name-%05d", i - age);
			memset(&fs, 0, sizeof(fs));
			assert_int_equal(hpack_decode(&d, &idx, 1, collect, &fs), 0);
			assert_string_equal(fs.f[0].name, want);
			assert_int_equal(fs.f[0].value_len, 1100);
		}
	}
}

/* ---- malformed blocks ---- */

static void test_hpack_rejects_truncated_blocks(void **state)
{
	static struct hpack_dec d;
	static const char *const cut[] = {
		"40",                         /* literal: no name */
		"400a 6375 7374 6f6d",        /* name shorter than its length */
		"400a 6375 7374 6f6d 2d6b 6579",  /* no value */
		"4001 6105 6162",             /* value shorter than its length */
		"04",                         /* indexed name, no value */
		"3f",                         /* size update cut in its integer */
		"ff",                         /* index cut in its integer */
		"0485 a8eb",                  /* Huffman value shorter than its length */
	};
	struct fields fs;

	for (size_t i = 0; i < ARRAY_LEN(cut); i++) {
		hpack_dec_init(&d, 4096);
		assert_int_equal(decode_hex(&d, cut[i], &fs), HPACK_ERR_COMPRESSION);
	}
	/* an empty block is a valid empty list, even without a buffer */
	hpack_dec_init(&d, 4096);
	assert_int_equal(decode_bytes(&d, "", 0), 0);
	assert_int_equal(hpack_decode(&d, NULL, 0, collect, &fs), 0);
}

static void test_hpack_rejects_fields_over_limit(void **state)
{
	static struct hpack_dec d;
	static uint8_t block[3 * HPACK_MAX_FIELD_BYTES];
	static uint8_t text[HPACK_MAX_FIELD_BYTES + 1];
	struct fields fs;
	size_t n;

	memset(text, 'a', sizeof(text));
	/* raw value at the limit: accepted */
	hpack_dec_init(&d, 4096);
	n = put_int(block, 0x00, 4, 1);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES, 0);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(hpack_decode(&d, block, n, collect, &fs), 0);
	assert_int_equal(fs.f[0].value_len, HPACK_MAX_FIELD_BYTES);
	/* one more: refused */
	n = put_int(block, 0x00, 4, 1);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES + 1, 0);
	assert_int_equal(decode_bytes(&d, block, n), HPACK_ERR_TOO_BIG);
	/* a raw name too */
	n = put_int(block, 0x00, 4, 0);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES + 1, 0);
	n += put_string(block + n, "v", 1, 0);
	assert_int_equal(decode_bytes(&d, block, n), HPACK_ERR_TOO_BIG);
	/* Huffman: the limit counts decoded octets */
	n = put_int(block, 0x00, 4, 0);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES, 1);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES, 1);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(hpack_decode(&d, block, n, collect, &fs), 0);
	assert_int_equal(fs.f[0].name_len, HPACK_MAX_FIELD_BYTES);
	assert_int_equal(fs.f[0].value_len, HPACK_MAX_FIELD_BYTES);
	n = put_int(block, 0x00, 4, 1);
	n += put_string(block + n, text, HPACK_MAX_FIELD_BYTES + 1, 1);
	assert_int_equal(decode_bytes(&d, block, n), HPACK_ERR_TOO_BIG);
}

static void test_hpack_callback_error_stops_decoding(void **state)
{
	static struct hpack_dec d;
	const uint8_t block[] = { 0x82, 0x86, 0x84 };
	struct fields fs;

	hpack_dec_init(&d, 4096);
	memset(&fs, 0, sizeof(fs));
	fs.stop_at = 2;
	assert_int_equal(hpack_decode(&d, block, sizeof(block), collect, &fs), -1234);
	assert_int_equal(fs.n, 1);
}

/* ---- encoder ---- */

static void test_hpack_encode_uses_static_indexes(void **state)
{
	uint8_t storage[64];
	struct buf b;

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(hpack_encode(&b, ":method", 7, "POST", 4), 0);
	assert_int_equal(hpack_encode(&b, ":status", 7, "200", 3), 0);
	assert_int_equal(hpack_encode(&b, ":authority", 10, NULL, 0), 0);
	assert_int_equal(hpack_encode(&b, "www-authenticate", 16, "", 0), 0);
	assert_int_equal(b.len, 4);
	assert_memory_equal(b.data, "\x83\x88\x81\xbd", 4);
}

static void test_hpack_encode_literal_with_static_name(void **state)
{
	uint8_t storage[64];
	struct buf b;

	buf_init(&b, storage, sizeof(storage));
	/* content-type is index 31: 15 + 16 on the 4-bit prefix */
	assert_int_equal(hpack_encode(&b, "content-type", 12, "application/grpc", 16), 0);
	assert_int_equal(b.len, 19);
	assert_memory_equal(b.data, "\x0f\x10\x10" "application/grpc", 19);
	b.len = 0;
	/* the first :status entry names it */
	assert_int_equal(hpack_encode(&b, ":status", 7, "418", 3), 0);
	assert_memory_equal(b.data, "\x08\x03" "418", 5);
}

static void test_hpack_encode_literal_with_new_name(void **state)
{
	uint8_t storage[400];
	char value[200];
	struct buf b;

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(hpack_encode(&b, "grpc-status", 11, "0", 1), 0);
	assert_int_equal(b.len, 15);
	assert_memory_equal(b.data, "\x00\x0b" "grpc-status" "\x01" "0", 15);
	/* a 200-octet value: 127 + 73 */
	b.len = 0;
	memset(value, 'v', sizeof(value));
	assert_int_equal(hpack_encode(&b, "x", 1, value, 200), 0);
	assert_int_equal(b.len, 1 + 2 + 2 + 200);
	assert_memory_equal(b.data, "\x00\x01x\x7f\x49", 5);
}

static void test_hpack_encode_refuses_when_full_and_leaves_buffer(void **state)
{
	uint8_t storage[20];
	struct buf b;

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(hpack_encode(&b, ":status", 7, "200", 3), 0);
	/* needs 1 + 1 + 11 + 1 + 7 = 21 octets, 19 left */
	assert_int_equal(hpack_encode(&b, "grpc-status", 11, "1234567", 7), ERR_LIMIT);
	assert_int_equal(b.len, 1);
	assert_int_equal(storage[0], 0x88);
	/* exactly 19 fits */
	assert_int_equal(hpack_encode(&b, "grpc-status", 11, "12345", 5), 0);
	assert_int_equal(b.len, 20);
	assert_int_equal(hpack_encode(&b, ":method", 7, "GET", 3), ERR_LIMIT);
	assert_int_equal(b.len, 20);
	b.len = 0;
	assert_int_equal(hpack_encode(&b, "x", 1, "y", (size_t)-1), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

/* ---- round trips ---- */

static void test_hpack_encode_decode_round_trip(void **state)
{
	static const char *const list[] = {
		":method", "POST", ":scheme", "http", ":path", "/agentic.Agent/Register",
		":authority", "localhost", "content-type", "application/grpc", "te", "trailers",
		"grpc-timeout", "10S", "user-agent", "agentic/0.1", "x-empty", "",
		":status", "200", "grpc-status", "0", "grpc-message", "all good", NULL,
	};
	static struct hpack_dec d;
	uint8_t storage[1024];
	struct fields fs;
	struct buf b;
	size_t i;

	buf_init(&b, storage, sizeof(storage));
	for (i = 0; list[2 * i]; i++)
		assert_int_equal(hpack_encode(&b, list[2 * i], strlen(list[2 * i]),
					      list[2 * i + 1], strlen(list[2 * i + 1])), 0);
	hpack_dec_init(&d, 4096);
	memset(&fs, 0, sizeof(fs));
	assert_int_equal(hpack_decode(&d, b.data, b.len, collect, &fs), 0);
	expect_fields(&fs, list);
	/* the encoder never adds to the peer's table */
	assert_int_equal(d.count, 0);
}

/* A model of the dynamic table kept by a test encoder that uses every representation. */
struct model {
	uint32_t max, size, count;
	struct {
		char name[40];
		char value[200];
		size_t name_len, value_len;
	} e[HPACK_MAX_ENTRIES + 1];  /* e[0] is the newest */
};

static void model_evict(struct model *m, uint32_t limit)
{
	while (m->size > limit) {
		m->count--;
		m->size -= (uint32_t)(m->e[m->count].name_len + m->e[m->count].value_len + 32);
	}
}

static void model_insert(struct model *m, const char *name, size_t nl, const char *value,
			 size_t vl)
{
	uint32_t need = (uint32_t)(nl + vl + 32);

	if (need > m->max) {
		model_evict(m, 0);
		return;
	}
	model_evict(m, m->max - need);
	memmove(&m->e[1], &m->e[0], m->count * sizeof(m->e[0]));
	memcpy(m->e[0].name, name, nl);
	memcpy(m->e[0].value, value, vl);
	m->e[0].name_len = nl;
	m->e[0].value_len = vl;
	m->count++;
	m->size += need;
}

static void test_hpack_random_blocks_match_a_model_table(void **state)
{
	static struct hpack_dec d;
	static struct model m;
	static uint8_t block[1 << 16];
	struct fields *fs = calloc(1, sizeof(*fs));
	char want_name[MAX_FIELDS][40], want_value[MAX_FIELDS][200];
	size_t want_nl[MAX_FIELDS], want_vl[MAX_FIELDS];

	assert_non_null(fs);
	srand(7);
	hpack_dec_init(&d, 4096);
	memset(&m, 0, sizeof(m));
	m.max = 4096;
	for (int round = 0; round < 2000; round++) {
		size_t n = 0;
		int nf = 1 + rand() % 20;

		if (rand() % 10 == 0) {
			uint32_t sz = (uint32_t)(rand() % 4097);

			n += put_int(block + n, 0x20, 5, sz);
			m.max = sz;
			model_evict(&m, sz);
		}
		for (int f = 0; f < nf; f++) {
			int kind = rand() % 6;
			char name[40], value[200];
			size_t nl = 1 + (size_t)(rand() % 39), vl = (size_t)(rand() % 200);
			int huff = rand() % 2;

			for (size_t k = 0; k < nl; k++)
				name[k] = (char)('a' + rand() % 26);
			for (size_t k = 0; k < vl; k++)
				value[k] = (char)(rand() % 256);
			if (kind == 0 && m.count > 0) {
				/* indexed dynamic entry */
				uint32_t age = (uint32_t)rand() % m.count;

				n += put_int(block + n, 0x80, 7, 62 + age);
				nl = m.e[age].name_len;
				vl = m.e[age].value_len;
				memcpy(name, m.e[age].name, nl);
				memcpy(value, m.e[age].value, vl);
			} else if (kind == 1 && m.count > 0) {
				/* incremental indexing with a dynamic name */
				uint32_t age = (uint32_t)rand() % m.count;

				n += put_int(block + n, 0x40, 6, 62 + age);
				nl = m.e[age].name_len;
				memcpy(name, m.e[age].name, nl);
				n += put_string(block + n, value, vl, huff);
				model_insert(&m, name, nl, value, vl);
			} else if (kind <= 3) {
				/* incremental indexing with a new name */
				n += put_int(block + n, 0x40, 6, 0);
				n += put_string(block + n, name, nl, huff);
				n += put_string(block + n, value, vl, !huff);
				model_insert(&m, name, nl, value, vl);
			} else {
				/* without indexing or never indexed, new name */
				n += put_int(block + n, kind == 4 ? 0x00 : 0x10, 4, 0);
				n += put_string(block + n, name, nl, huff);
				n += put_string(block + n, value, vl, huff);
			}
			memcpy(want_name[f], name, nl);
			memcpy(want_value[f], value, vl);
			want_nl[f] = nl;
			want_vl[f] = vl;
		}
		memset(fs, 0, sizeof(*fs));
		assert_int_equal(hpack_decode(&d, block, n, collect, fs), 0);
		assert_int_equal(fs->n, nf);
		for (int f = 0; f < nf; f++) {
			assert_int_equal(fs->f[f].name_len, want_nl[f]);
			assert_int_equal(fs->f[f].value_len, want_vl[f]);
			assert_memory_equal(fs->f[f].name, want_name[f], want_nl[f]);
			assert_memory_equal(fs->f[f].value, want_value[f], want_vl[f]);
		}
		assert_int_equal(d.count, m.count);
		assert_int_equal(d.size, m.size);
		assert_int_equal(d.max_size, m.max);
	}
	free(fs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hpack_rfc_c2_1_literal_with_indexing_adds_entry),
		cmocka_unit_test(test_hpack_rfc_c2_2_literal_without_indexing_leaves_table),
		cmocka_unit_test(test_hpack_rfc_c2_3_never_indexed_leaves_table),
		cmocka_unit_test(test_hpack_rfc_c2_4_indexed_static_field),
		cmocka_unit_test(test_hpack_rfc_c3_requests_without_huffman),
		cmocka_unit_test(test_hpack_rfc_c4_requests_with_huffman),
		cmocka_unit_test(test_hpack_rfc_c5_responses_evict_without_huffman),
		cmocka_unit_test(test_hpack_rfc_c6_responses_evict_with_huffman),
		cmocka_unit_test(test_hpack_huffman_table_is_a_complete_canonical_code),
		cmocka_unit_test(test_hpack_huffman_decodes_every_symbol),
		cmocka_unit_test(test_hpack_huffman_rejects_eos_and_bad_padding),
		cmocka_unit_test(test_hpack_decode_rejects_huffman_errors_in_block),
		cmocka_unit_test(test_hpack_rfc_c1_integers_through_size_updates),
		cmocka_unit_test(test_hpack_rejects_integer_overflow_and_overlong),
		cmocka_unit_test(test_hpack_accepts_padded_integer_within_five_octets),
		cmocka_unit_test(test_hpack_rejects_index_zero_and_past_tables),
		cmocka_unit_test(test_hpack_size_update_above_advertised_is_refused),
		cmocka_unit_test(test_hpack_size_update_only_at_block_start),
		cmocka_unit_test(test_hpack_size_update_evicts_and_zero_disables_table),
		cmocka_unit_test(test_hpack_entry_larger_than_table_empties_it),
		cmocka_unit_test(test_hpack_indexing_with_name_of_entry_it_evicts),
		cmocka_unit_test(test_hpack_entries_wrapping_the_storage_come_out_whole),
		cmocka_unit_test(test_hpack_rejects_truncated_blocks),
		cmocka_unit_test(test_hpack_rejects_fields_over_limit),
		cmocka_unit_test(test_hpack_callback_error_stops_decoding),
		cmocka_unit_test(test_hpack_encode_uses_static_indexes),
		cmocka_unit_test(test_hpack_encode_literal_with_static_name),
		cmocka_unit_test(test_hpack_encode_literal_with_new_name),
		cmocka_unit_test(test_hpack_encode_refuses_when_full_and_leaves_buffer),
		cmocka_unit_test(test_hpack_encode_decode_round_trip),
		cmocka_unit_test(test_hpack_random_blocks_match_a_model_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
