/* test_e2b_multipart.c: the multipart/form-data parser (src/e2b/multipart.c): the SDK's
 * uploads, boundaries from Content-Type, delimiter look-alikes in binary data, and malformed
 * input refused; every message parses the same split at every byte boundary and byte by byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "e2b/multipart.h"

#define CT "multipart/form-data; boundary=----formdata-undici-031337"
#define B "------formdata-undici-031337"
#define B_SHORT "------formdata-undici-03133" /* less its last byte */

/* ---- everything the parser reported, as text, to compare feeds ---- */
struct transcript {
	char text[8192];
	size_t len;
};

static void tr_add(struct transcript *t, const void *s, size_t n)
{
	assert_true(t->len + n < sizeof(t->text));
	memcpy(t->text + t->len, s, n);
	t->len += n;
	t->text[t->len] = '\0';
}

static void tr_str(struct transcript *t, const char *s)
{
	tr_add(t, s, strlen(s));
}

static void tr_event(struct transcript *t, const struct multipart *p, int ev)
{
	char line[128];
	const char *n = multipart_name(p), *f = multipart_filename(p);

	switch (ev) {
	case MULTIPART_EV_PART:
		tr_str(t, "\nPART name=");
		tr_str(t, n ? n : "(none)");
		tr_str(t, " filename=");
		tr_str(t, f ? f : "(none)");
		tr_str(t, "\nBODY:");
		break;
	case MULTIPART_EV_PART_END:
		tr_str(t, "\nEND");
		break;
	case MULTIPART_EV_DONE:
		tr_str(t, "\nDONE");
		break;
	default:
		snprintf(line, sizeof(line), "\nERROR %d", ev);
		tr_str(t, line);
	}
}

/* Feeds msg in the pieces whose ends are cuts[] (ascending, the last = len), then finishes. */
static void parse_cut(const char *ct, const char *msg, size_t len, const size_t *cuts,
		      size_t ncuts, struct transcript *t)
{
	static char hdr[512];
	struct multipart p;
	size_t from = 0;
	int ev = 0;

	memset(t, 0, sizeof(*t));
	if (multipart_init(&p, ct, hdr, sizeof(hdr)) != 0) {
		tr_str(t, "INIT REFUSED");
		return;
	}
	for (size_t c = 0; c < ncuts && ev >= 0; c++) {
		const uint8_t *in = (const uint8_t *)msg + from;
		size_t n = cuts[c] - from, used;
		struct http_slice s;

		while (ev >= 0) {
			ev = multipart_feed(&p, in, n, &used, &s);
			assert_true(used <= n);
			in += used;
			n -= used;
			if (ev == MULTIPART_EV_NEED_MORE) {
				assert_int_equal(n, 0);
				break;
			}
			if (ev == MULTIPART_EV_BODY) {
				assert_true(s.len > 0);
				tr_add(t, s.data, s.len);
			} else {
				tr_event(t, &p, ev);
			}
		}
		from = cuts[c];
	}
	if (ev >= 0)
		tr_str(t, multipart_finish(&p) == MULTIPART_EV_DONE ? "\nFINISHED" : "\nTRUNCATED");
}

static void parse_whole(const char *ct, const char *msg, size_t len, struct transcript *t)
{
	parse_cut(ct, msg, len, &len, 1, t);
}

/* The claim: every two-piece split and the byte-at-a-time feed report what the whole does. */
static void assert_splits(const char *ct, const char *msg, size_t len, const char *want)
{
	static struct transcript whole, piece;
	static size_t cuts[4096];

	assert_true(len < ARRAY_LEN(cuts));
	parse_whole(ct, msg, len, &whole);
	if (strcmp(whole.text, want) != 0)
		fail_msg("got:\n%s\n--- want:\n%s", whole.text, want);
	for (size_t i = 0; i <= len; i++) {
		size_t two[2] = { i, len };
		parse_cut(ct, msg, len, two, 2, &piece);
		if (piece.len != whole.len || memcmp(piece.text, whole.text, whole.len) != 0)
			fail_msg("split at %zu differs:\n%s\n--- whole:\n%s", i, piece.text,
				 whole.text);
	}
	for (size_t i = 0; i < len; i++)
		cuts[i] = i + 1;
	parse_cut(ct, msg, len, cuts, len, &piece);
	assert_memory_equal(piece.text, whole.text, whole.len + 1);
}

#define SPLITS(ct, msg, want) assert_splits(ct, msg, sizeof(msg) - 1, want)

static void test_multipart_sdk_upload_parses_same_at_every_split(void **state)
{
	(void)state;
	SPLITS(CT, B "\r\nContent-Disposition: form-data; name=\"file\"; "
		   "filename=\"/home/user/a.txt\"\r\nContent-Type: application/octet-stream\r\n"
		   "\r\nhi\r\n" B "--\r\n",
	       "\nPART name=file filename=/home/user/a.txt\nBODY:hi\nEND\nDONE\nFINISHED");
}

static void test_multipart_two_parts_with_delimiter_lookalikes(void **state)
{
	(void)state;
	/* data holding CR, CRLF, "\r\n--", the boundary less its last byte, and a CR right
	 * before the real delimiter */
	SPLITS(CT, B "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n\r\n"
		   "a\rb\r\nc\r\n--d\r\n" B_SHORT "X\r\r\r\n" B "\r\n"
		   "content-disposition: FORM-DATA; filename=\"/tmp/c\"; name=file\r\n\r\n"
		   "\r\n--\r\n" B "--",
	       "\nPART name=file filename=b.txt\nBODY:a\rb\r\nc\r\n--d\r\n" B_SHORT "X\r\r"
	       "\nEND\nPART name=file filename=/tmp/c\nBODY:\r\n--\nEND\nDONE\nFINISHED");
}

static void test_multipart_preamble_epilogue_and_empty_parts(void **state)
{
	(void)state;
	SPLITS("Multipart/Form-Data ; charset=utf-8; BOUNDARY=\"x y\"",
	       "preamble --x y not yet\r\n-- x y\r\n--x y \t\r\n\r\n\r\n--x y\r\n"
	       "Content-Disposition: attachment; filename=\"f\"\r\n\r\n\r\n--x y--epilogue\r\n--x y",
	       "\nPART name=(none) filename=(none)\nBODY:\nEND\nPART name=(none) filename=f\nBODY:"
	       "\nEND\nDONE\nFINISHED");
}

static void test_multipart_quoted_filename_escapes(void **state)
{
	(void)state;
	SPLITS(CT, B "\r\nContent-Disposition: form-data;name=file ; filename = "
		   "\"dir\\\\a \\\"q\\\".txt\\x\"\r\n\r\nZ\r\n" B "--",
	       "\nPART name=file filename=dir\\a \"q\".txt\\x\nBODY:Z\nEND\nDONE\nFINISHED");
}

#define M(s) s, sizeof(s) - 1

static void test_multipart_refuses_malformed(void **state)
{
	static const struct {
		const char *msg;
		size_t len;
		const char *want;
	} bad[] = {
		{ M(B "\r\n\r\nunterminated"),
		  "\nPART name=(none) filename=(none)\nBODY:unterminated\nTRUNCATED" },
		{ M("no delimiter at all"), "\nTRUNCATED" },
		{ M(B "x\r\n\r\n"), "\nERROR -4098" },
		{ M(B "-x"), "\nERROR -4098" },
		{ M(B "\rx"), "\nERROR -4098" },
		{ M(B "\r\nno colon\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\n: empty name\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nA: b\r\n folded: c\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nA: lf only\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nA: cr only\rx"), "\nERROR -4098" },
		{ M(B "\r\nA: n\0ul\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data; name=a; name=b\r\n\r\n"),
		  "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data\r\nContent-Disposition: form-data\r\n\r\n"),
		  "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data; filename=/a/b\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data; filename=\"open\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data; name\r\n\r\n"), "\nERROR -4098" },
		{ M(B "\r\nContent-Disposition: form-data x; name=a\r\n\r\n"), "\nERROR -4098" },
	};

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		assert_splits(CT, bad[i].msg, bad[i].len, bad[i].want);
}

static void test_multipart_header_limits(void **state)
{
	static char msg[2048];
	struct transcript t;
	size_t n;

	(void)state;
	/* a header line over the 512 bytes of storage */
	n = (size_t)snprintf(msg, sizeof(msg), B "\r\nX-Long: ");
	memset(msg + n, 'a', 600);
	n += 600;
	n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\r\n\r\n");
	parse_whole(CT, msg, n, &t);
	assert_string_equal(t.text, "\nERROR -4097");
	/* MULTIPART_MAX_HEADERS lines pass, one more is refused */
	for (int extra = 0; extra < 2; extra++) {
		n = (size_t)snprintf(msg, sizeof(msg), B "\r\n");
		for (int i = 0; i < MULTIPART_MAX_HEADERS + extra; i++)
			n += (size_t)snprintf(msg + n, sizeof(msg) - n, "X-%d: v\r\n", i);
		n += (size_t)snprintf(msg + n, sizeof(msg) - n, "\r\n\r\n" B "--");
		parse_whole(CT, msg, n, &t);
		assert_string_equal(t.text, extra ? "\nERROR -4097"
						  : "\nPART name=(none) filename=(none)\nBODY:\nEND"
						    "\nDONE\nFINISHED");
	}
}

static void test_multipart_boundary_from_content_type(void **state)
{
	static const char *good[] = {
		"multipart/form-data; boundary=abc",
		"multipart/form-data;boundary=\"a(b)c+d_e,f-g.h/i:j=k?l m\"",
		"MULTIPART/FORM-DATA; a=1; boundary=z; b=\"2\";",
		"multipart/form-data; boundary=0123456789012345678901234567890123456789"
		"012345678901234567890123456789", /* 70 */
	};
	static const char *bad[] = {
		"", "text/plain; boundary=abc", "multipart/form-data", "multipart/form-dataX; boundary=a",
		"multipart/mixed; boundary=abc", "multipart/form-data; boundary=",
		"multipart/form-data; boundary=\"\"", "multipart/form-data; boundary=\"a \"",
		"multipart/form-data; boundary=\"a\\\"b\"", "multipart/form-data; boundary=\"a\rb\"",
		"multipart/form-data; boundary=a; boundary=b", "multipart/form-data; boundary=\"abc",
		"multipart/form-data; boundary=0123456789012345678901234567890123456789"
		"0123456789012345678901234567890", /* 71 */
		"multipart/form-data garbage; boundary=a",
	};
	char hdr[64];
	struct multipart p;

	(void)state;
	for (size_t i = 0; i < ARRAY_LEN(good); i++)
		assert_int_equal(multipart_init(&p, good[i], hdr, sizeof(hdr)), 0);
	assert_int_equal(multipart_init(&p, good[1], hdr, sizeof(hdr)), 0);
	assert_memory_equal(p.delim, "\r\n--a(b)c+d_e,f-g.h/i:j=k?l m", p.dlen);
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		if (multipart_init(&p, bad[i], hdr, sizeof(hdr)) != ERR_PARSE)
			fail_msg("accepted: %s", bad[i]);
	assert_int_equal(multipart_init(&p, NULL, hdr, sizeof(hdr)), ERR_PARSE);
}

static void test_multipart_error_is_final_and_epilogue_is_dropped(void **state)
{
	char hdr[64];
	struct multipart p;
	struct http_slice s;
	size_t used;

	(void)state;
	assert_int_equal(multipart_init(&p, CT, hdr, sizeof(hdr)), 0);
	assert_int_equal(multipart_feed(&p, (const uint8_t *)B "x", sizeof(B), &used, &s), ERR_PARSE);
	assert_int_equal(multipart_feed(&p, (const uint8_t *)"a", 1, &used, &s), ERR_STATE);
	assert_int_equal(used, 0);
	assert_int_equal(multipart_finish(&p), ERR_PARSE);
	assert_int_equal(multipart_init(&p, CT, hdr, sizeof(hdr)), 0);
	assert_int_equal(multipart_feed(&p, (const uint8_t *)B "--", sizeof(B) + 1, &used, &s),
			 MULTIPART_EV_DONE);
	assert_int_equal(multipart_feed(&p, (const uint8_t *)"\r\n--x", 5, &used, &s),
			 MULTIPART_EV_NEED_MORE);
	assert_int_equal(used, 5);
	assert_int_equal(multipart_finish(&p), MULTIPART_EV_DONE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_multipart_sdk_upload_parses_same_at_every_split),
		cmocka_unit_test(test_multipart_two_parts_with_delimiter_lookalikes),
		cmocka_unit_test(test_multipart_preamble_epilogue_and_empty_parts),
		cmocka_unit_test(test_multipart_quoted_filename_escapes),
		cmocka_unit_test(test_multipart_refuses_malformed),
		cmocka_unit_test(test_multipart_header_limits),
		cmocka_unit_test(test_multipart_boundary_from_content_type),
		cmocka_unit_test(test_multipart_error_is_final_and_epilogue_is_dropped),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
