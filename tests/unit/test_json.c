/* test_json.c: the JSON reader's grammar, limits and error offsets, token access, and the writer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "json/json.h"

#define NTOK 256

static struct json_token tok[NTOK];

static int parse(struct json_doc *d, const char *s)
{
	return json_parse(d, s, strlen(s), tok, NTOK);
}

/* Documents that must parse (y_) and must not (n_), written for this module. Strings are C
 * literals, so raw bytes are spelled \xNN; len 0 means strlen. off is the expected err_offset. */
struct case_y {
	const char *name;
	const char *in;
	size_t len;
};

static const struct case_y accept[] = {
	{ "y_array_empty", "[]", 0 },
	{ "y_object_empty", "{}", 0 },
	{ "y_array_nested_empty", "[[],[[]],{}]", 0 },
	{ "y_number_zero", "0", 0 },
	{ "y_number_negative_zero", "-0", 0 },
	{ "y_number_negative_zero_fraction_exp", "-0.0e+0", 0 },
	{ "y_number_capital_e", "1E10", 0 },
	{ "y_number_negative_exp", "1e-10", 0 },
	{ "y_number_huge_exp", "123.456e789", 0 },
	{ "y_number_in_array", "[-1.5e-0,2E+2,0.5]", 0 },
	{ "y_string_plain", "\"x\"", 0 },
	{ "y_string_empty", "\"\"", 0 },
	{ "y_literals", "[true,false,null]", 0 },
	{ "y_ws_all_four", " \t\r\n[ \t\r\n1 \t\r\n, \t\r\n2 \t\r\n] \t\r\n", 0 },
	{ "y_string_escaped_nul", "\"\\u0000\"", 0 },
	{ "y_string_surrogate_pair", "\"\\uD834\\uDD1E\"", 0 },
	{ "y_string_surrogate_pair_lower", "\"\\ud834\\udd1e\"", 0 },
	{ "y_string_all_short_escapes", "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", 0 },
	{ "y_string_utf8_2", "\"\xc3\xa9\"", 0 },
	{ "y_string_utf8_3", "\"\xe2\x82\xac\"", 0 },
	{ "y_string_utf8_4", "\"\xf0\x9d\x84\x9e\"", 0 },
	{ "y_string_del", "\"\x7f\"", 0 },
	{ "y_string_max_codepoint", "\"\xf4\x8f\xbf\xbf\"", 0 },
	{ "y_string_uffff", "\"\xef\xbf\xbf\\uFFFF\"", 0 },
	{ "y_string_before_surrogates", "\"\xed\x9f\xbf\"", 0 },
	{ "y_string_after_surrogates", "\"\xee\x80\x80\"", 0 },
	{ "y_string_lowest_3_byte", "\"\xe0\xa0\x80\"", 0 },
	{ "y_string_lowest_4_byte", "\"\xf0\x90\x80\x80\"", 0 },
	{ "y_object_nested", "{\"a\":[1,{\"b\":null}],\"c\":\"\"}", 0 },
	{ "y_object_empty_key", "{\"\":0}", 0 },
	{ "y_object_duplicate_keys", "{\"a\":1,\"a\":2}", 0 },
	{ "y_string_slash_unescaped", "\"/\"", 0 },
};

struct case_n {
	const char *name;
	const char *in;
	size_t len;
	int rc;
	size_t off;
};

static const struct case_n reject[] = {
	{ "n_empty", "", 0, ERR_PARSE, 0 },
	{ "n_only_ws", "   ", 0, ERR_PARSE, 3 },
	{ "n_array_unclosed", "[", 0, ERR_PARSE, 1 },
	{ "n_array_trailing_comma", "[1,]", 0, ERR_PARSE, 3 },
	{ "n_array_leading_comma", "[,1]", 0, ERR_PARSE, 1 },
	{ "n_array_double_comma", "[\"a\",,]", 0, ERR_PARSE, 5 },
	{ "n_array_missing_comma", "[1 2]", 0, ERR_PARSE, 3 },
	{ "n_array_extra_close", "[]]", 0, ERR_PARSE, 2 },
	{ "n_array_close_only", "]", 0, ERR_PARSE, 0 },
	{ "n_array_mismatched_close", "[1}", 0, ERR_PARSE, 2 },
	{ "n_object_trailing_comma", "{\"a\":1,}", 0, ERR_PARSE, 7 },
	{ "n_object_missing_colon", "{\"a\" 1}", 0, ERR_PARSE, 5 },
	{ "n_object_key_only", "{\"a\"}", 0, ERR_PARSE, 4 },
	{ "n_object_missing_value", "{\"a\":}", 0, ERR_PARSE, 5 },
	{ "n_object_number_key", "{1:1}", 0, ERR_PARSE, 1 },
	{ "n_object_single_quotes", "{'a':1}", 0, ERR_PARSE, 1 },
	{ "n_object_missing_comma", "{\"a\":1 \"b\":2}", 0, ERR_PARSE, 7 },
	{ "n_object_extra_close", "{\"a\":1}}", 0, ERR_PARSE, 7 },
	{ "n_object_unclosed", "{\"a\":1", 0, ERR_PARSE, 6 },
	{ "n_object_open_only", "{", 0, ERR_PARSE, 1 },
	{ "n_object_ends_after_comma", "{\"a\":1,", 0, ERR_PARSE, 7 },
	{ "n_object_ends_after_key", "{\"a\"", 0, ERR_PARSE, 4 },
	{ "n_object_bad_key_string", "{\"a\x01\":1}", 0, ERR_PARSE, 3 },
	{ "n_object_key_unterminated", "{\"a", 0, ERR_PARSE, 3 },
	{ "n_number_leading_zero", "01", 0, ERR_PARSE, 1 },
	{ "n_number_negative_leading_zero", "-01", 0, ERR_PARSE, 2 },
	{ "n_number_minus_only", "-", 0, ERR_PARSE, 1 },
	{ "n_number_minus_space", "- 1", 0, ERR_PARSE, 1 },
	{ "n_number_dot_end", "1.", 0, ERR_PARSE, 2 },
	{ "n_number_leading_dot", ".5", 0, ERR_PARSE, 0 },
	{ "n_number_dot_exp", "1.e5", 0, ERR_PARSE, 2 },
	{ "n_number_exp_empty", "1e", 0, ERR_PARSE, 2 },
	{ "n_number_exp_sign_only", "1e+", 0, ERR_PARSE, 3 },
	{ "n_number_plus", "+1", 0, ERR_PARSE, 0 },
	{ "n_number_hex", "0x10", 0, ERR_PARSE, 1 },
	{ "n_number_nan", "NaN", 0, ERR_PARSE, 0 },
	{ "n_number_infinity", "Infinity", 0, ERR_PARSE, 0 },
	{ "n_number_minus_infinity", "-Infinity", 0, ERR_PARSE, 1 },
	{ "n_trailing_value", "1 2", 0, ERR_PARSE, 2 },
	{ "n_trailing_garbage", "[] x", 0, ERR_PARSE, 3 },
	{ "n_trailing_nul", "[1]\0", 4, ERR_PARSE, 3 },
	{ "n_literal_truncated", "tru", 0, ERR_PARSE, 3 },
	{ "n_literal_wrong_case", "trUe", 0, ERR_PARSE, 2 },
	{ "n_literal_capital", "True", 0, ERR_PARSE, 0 },
	{ "n_literal_null_truncated", "[nul]", 0, ERR_PARSE, 4 },
	{ "n_literal_with_suffix", "truex", 0, ERR_PARSE, 4 },
	{ "n_ws_form_feed", "\f[]", 0, ERR_PARSE, 0 },
	{ "n_ws_vertical_tab", "[\v1]", 0, ERR_PARSE, 1 },
	{ "n_ws_nbsp", "[\xc2\xa0]", 0, ERR_PARSE, 1 },
	{ "n_bom", "\xef\xbb\xbf[]", 0, ERR_PARSE, 0 },
	{ "n_string_unterminated", "\"abc", 0, ERR_PARSE, 4 },
	{ "n_string_control_char", "\"a\x01\"", 0, ERR_PARSE, 2 },
	{ "n_string_raw_tab", "\"\t\"", 0, ERR_PARSE, 1 },
	{ "n_string_raw_newline", "[\"a\nb\"]", 0, ERR_PARSE, 3 },
	{ "n_string_raw_nul", "\"\0\"", 3, ERR_PARSE, 1 },
	{ "n_string_bad_escape", "\"\\x\"", 0, ERR_PARSE, 2 },
	{ "n_string_escaped_apostrophe", "\"\\'\"", 0, ERR_PARSE, 2 },
	{ "n_string_backslash_at_end", "\"\\", 0, ERR_PARSE, 2 },
	{ "n_string_short_u", "\"\\u12\"", 0, ERR_PARSE, 5 },
	{ "n_string_bad_hex", "\"\\uZZZZ\"", 0, ERR_PARSE, 3 },
	{ "n_string_u_at_end", "\"\\u12", 0, ERR_PARSE, 5 },
	{ "n_string_low_at_end", "\"\\uD800\\uDC", 0, ERR_PARSE, 11 },
	{ "n_string_capital_U", "\"\\U0041\"", 0, ERR_PARSE, 2 },
	{ "n_string_lone_high_surrogate", "\"\\uD800\"", 0, ERR_PARSE, 7 },
	{ "n_string_high_surrogate_at_end", "\"\\uD800", 0, ERR_PARSE, 7 },
	{ "n_string_high_then_short_escape", "\"\\uD800\\n\"", 0, ERR_PARSE, 8 },
	{ "n_string_high_then_ascii", "\"\\uD800\\u0041\"", 0, ERR_PARSE, 9 },
	{ "n_string_high_then_high", "\"\\uD800\\uD800\"", 0, ERR_PARSE, 10 },
	{ "n_string_high_then_e000", "\"\\uD800\\uE000\"", 0, ERR_PARSE, 9 },
	{ "n_string_high_then_raw", "\"\\uDBFFx\"", 0, ERR_PARSE, 7 },
	{ "n_string_lone_low_surrogate", "\"\\uDC00\"", 0, ERR_PARSE, 4 },
	{ "n_string_lone_low_surrogate_max", "\"\\udfff\"", 0, ERR_PARSE, 4 },
	{ "n_string_reversed_pair", "\"\\uDD1E\\uD834\"", 0, ERR_PARSE, 4 },
	{ "n_utf8_lone_continuation", "\"\x80\"", 0, ERR_PARSE, 1 },
	{ "n_utf8_overlong_2_c0", "\"\xc0\x80\"", 0, ERR_PARSE, 1 },
	{ "n_utf8_overlong_2_c1", "\"\xc1\xbf\"", 0, ERR_PARSE, 1 },
	{ "n_utf8_overlong_3", "\"\xe0\x80\x80\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_overlong_3_max", "\"\xe0\x9f\xbf\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_overlong_4", "\"\xf0\x80\x80\x80\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_encoded_surrogate", "\"\xed\xa0\x80\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_encoded_low_surrogate", "\"\xed\xbf\xbf\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_above_10ffff", "\"\xf4\x90\x80\x80\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_f5", "\"\xf5\x80\x80\x80\"", 0, ERR_PARSE, 1 },
	{ "n_utf8_ff", "\"\xff\"", 0, ERR_PARSE, 1 },
	{ "n_utf8_truncated_2_quote", "\"\xc3\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_truncated_3_quote", "\"\xe2\x82\"", 0, ERR_PARSE, 3 },
	{ "n_utf8_truncated_at_end", "\"\xc3", 0, ERR_PARSE, 2 },
	{ "n_utf8_bad_continuation", "\"\xc3\x28\"", 0, ERR_PARSE, 2 },
	{ "n_utf8_bad_4th_byte", "\"\xf0\x9d\x84\x20\"", 0, ERR_PARSE, 4 },
	{ "n_utf8_outside_string", "[\xc3\xa9]", 0, ERR_PARSE, 1 },
};

static void test_json_accepts_every_y_case(void **state)
{
	struct json_doc d;

	for (size_t i = 0; i < ARRAY_LEN(accept); i++) {
		const struct case_y *c = &accept[i];
		size_t len = c->len ? c->len : strlen(c->in);
		int rc = json_parse(&d, c->in, len, tok, NTOK);

		if (rc != 0)
			fail_msg("%s: rc %d at %zu (%s)", c->name, rc, d.err_offset, d.err_what);
		assert_true(d.ntok > 0);
		assert_int_equal(tok[0].next, d.ntok);
		assert_null(d.err_what);
	}
}

static void test_json_rejects_every_n_case_at_the_right_offset(void **state)
{
	struct json_doc d;

	for (size_t i = 0; i < ARRAY_LEN(reject); i++) {
		const struct case_n *c = &reject[i];
		size_t len = c->len ? c->len : strlen(c->in);
		int rc = json_parse(&d, c->in, len, tok, NTOK);

		if (rc != c->rc || d.err_offset != c->off)
			fail_msg("%s: rc %d (want %d) offset %zu (want %zu) %s", c->name, rc, c->rc,
				 d.err_offset, c->off, d.err_what ? d.err_what : "");
		assert_int_equal(d.ntok, 0);
		assert_non_null(d.err_what);
	}
}

static void test_json_error_says_why_in_words(void **state)
{
	static const struct {
		const char *in, *what;
	} cases[] = {
		{ "[01]", "leading zero in number" },
		{ "\"\\uDC00\"", "lone low surrogate" },
		{ "\"\\uD800\"", "high surrogate without a low surrogate" },
		{ "\"\xc0\x80\"", "invalid UTF-8 in string" },
		{ "\"\x01\"", "control character in string" },
		{ "{} {}", "trailing characters after the value" },
		{ "", "unexpected end of input" },
		{ "{\"a\":1]", "expected ',' or '}'" },
	};
	struct json_doc d;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		assert_int_equal(parse(&d, cases[i].in), ERR_PARSE);
		assert_string_equal(d.err_what, cases[i].what);
	}
}

static void test_json_tokens_carry_children_next_and_offsets(void **state)
{
	const char *s = "{\"a\":[1,{\"b\":null}],\"c\":\"\"}";
	static const struct {
		enum json_type type;
		uint32_t start, end, children, next;
	} want[] = {
		{ JSON_OBJECT, 0, 27, 2, 9 },
		{ JSON_STRING, 2, 3, 0, 2 },
		{ JSON_ARRAY, 5, 19, 2, 7 },
		{ JSON_NUMBER, 6, 7, 0, 4 },
		{ JSON_OBJECT, 8, 18, 1, 7 },
		{ JSON_STRING, 10, 11, 0, 6 },
		{ JSON_NULL, 13, 17, 0, 7 },
		{ JSON_STRING, 21, 22, 0, 8 },
		{ JSON_STRING, 25, 25, 0, 9 },
	};
	struct json_doc d;

	assert_int_equal(parse(&d, s), 0);
	assert_int_equal(d.ntok, ARRAY_LEN(want));
	for (size_t i = 0; i < ARRAY_LEN(want); i++) {
		assert_int_equal(tok[i].type, want[i].type);
		assert_int_equal(tok[i].start, want[i].start);
		assert_int_equal(tok[i].end, want[i].end);
		assert_int_equal(tok[i].children, want[i].children);
		assert_int_equal(tok[i].next, want[i].next);
	}
	/* walking: keys and values alternate under an object, elements under an array */
	assert_int_equal(json_first(&d, 0), 1);
	assert_int_equal(json_next(&d, 0, 1), 2);
	assert_int_equal(json_next(&d, 0, 2), 7);
	assert_int_equal(json_next(&d, 0, 7), 8);
	assert_int_equal(json_next(&d, 0, 8), -1);
	assert_int_equal(json_first(&d, 2), 3);
	assert_int_equal(json_next(&d, 2, 3), 4);
	assert_int_equal(json_next(&d, 2, 4), -1);
	assert_int_equal(json_first(&d, 3), -1);
	assert_int_equal(json_first(&d, 99), -1);
	assert_int_equal(json_next(&d, 2, 2), -1);
	assert_int_equal(json_obj_get(&d, 0, "c"), 8);
	assert_int_equal(json_obj_get(&d, 4, "b"), 6);
	assert_int_equal(json_obj_get(&d, 0, "b"), -1);
	assert_int_equal(json_obj_get(&d, 2, "a"), -1);
	assert_int_equal(json_obj_get(&d, -1, "a"), -1);
}

static void test_json_empty_containers_have_no_first_child(void **state)
{
	struct json_doc d;

	assert_int_equal(parse(&d, "[{},[]]"), 0);
	assert_int_equal(d.ntok, 3);
	assert_int_equal(json_first(&d, 1), -1);
	assert_int_equal(json_first(&d, 2), -1);
	assert_int_equal(json_obj_get(&d, 1, ""), -1);
	assert_int_equal(tok[1].next, 2);
	assert_int_equal(tok[2].next, 3);
}

static void test_json_str_unescapes_into_utf8(void **state)
{
	const char *s = "\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\\u00e9\\u20AC\\uD834\\uDD1E\xc3\xa9\"";
	const char *want = "a\"b\\c/d\be\ff\ng\rh\ti\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\xc3\xa9";
	struct json_doc d;
	char out[64];

	assert_int_equal(parse(&d, s), 0);
	assert_int_equal(json_str(&d, 0, out, sizeof(out)), (int)strlen(want));
	assert_string_equal(out, want);
	assert_true(json_str_eq(&d, 0, want));
	assert_false(json_str_eq(&d, 0, "a"));
	assert_int_equal(parse(&d, "[1,\"1\"]"), 0);
	assert_false(json_str_eq(&d, 1, "1"));
	assert_true(json_str_eq(&d, 2, "1"));
	assert_false(json_str_eq(&d, 3, "1"));
}

static void test_json_str_refuses_what_does_not_fit_and_leaves_out_empty(void **state)
{
	struct json_doc d;
	char out[8];

	assert_int_equal(parse(&d, "[\"abc\",\"\\u20ac\",1]"), 0);
	assert_int_equal(json_str(&d, 1, out, 4), 3);
	assert_string_equal(out, "abc");
	assert_int_equal(json_str(&d, 1, out, 3), ERR_LIMIT);
	assert_string_equal(out, "");
	/* a multi-byte character is never cut in half */
	memcpy(out, "zzzz", 5);
	assert_int_equal(json_str(&d, 2, out, 3), ERR_LIMIT);
	assert_string_equal(out, "");
	assert_int_equal(json_str(&d, 2, out, 4), 3);
	assert_int_equal(json_str(&d, 1, out, 0), ERR_LIMIT);
	memcpy(out, "zzzz", 5);
	assert_int_equal(json_str(&d, 3, out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "");
	assert_int_equal(json_str(&d, 0, out, sizeof(out)), -EINVAL);
	assert_int_equal(json_str(&d, 7, out, sizeof(out)), -EINVAL);
}

static void test_json_str_refuses_embedded_nul(void **state)
{
	struct json_doc d;
	char out[16];

	assert_int_equal(parse(&d, "\"true\\u0000x\""), 0);
	assert_int_equal(json_str(&d, 0, out, sizeof(out)), -EINVAL);
	assert_string_equal(out, "");
	assert_false(json_str_eq(&d, 0, "true"));
}

static void test_json_obj_get_compares_unescaped_keys(void **state)
{
	struct json_doc d;

	assert_int_equal(parse(&d, "{\"a\\u0062\":1,\"ab\":2,\"\\u00e9\":3,\"x\\u0000y\":4,"
				   "\"\\\"q\\\"\":5,\"\\uD83D\\uDE00\":6}"), 0);
	/* duplicates: the first member wins */
	assert_int_equal(json_obj_get(&d, 0, "ab"), 2);
	assert_int_equal(json_obj_get(&d, 0, "\xc3\xa9"), 6);
	assert_int_equal(json_obj_get(&d, 0, "a"), -1);
	assert_int_equal(json_obj_get(&d, 0, "abc"), -1);
	assert_int_equal(json_obj_get(&d, 0, "x"), -1);
	assert_int_equal(json_obj_get(&d, 0, "\"q\""), 10);
	assert_int_equal(json_obj_get(&d, 0, "\xf0\x9f\x98\x80"), 12);
	assert_int_equal(json_obj_get(&d, 0, "a\\u0062"), -1);
}

static void test_json_int_is_exact_over_the_whole_int64_range(void **state)
{
	struct json_doc d;
	int64_t v = 42;

	assert_int_equal(parse(&d, "[0,-0,9223372036854775807,-9223372036854775808,"
				   "9223372036854775808,-9223372036854775809,99999999999999999999,"
				   "1.0,1e2,-1E0,\"1\",true,17,99999999999999999999.5,-99999999999999999999e0]"), 0);
	assert_int_equal(json_int(&d, 1, &v), 0);
	assert_true(v == 0);
	assert_int_equal(json_int(&d, 2, &v), 0);
	assert_true(v == 0);
	assert_int_equal(json_int(&d, 3, &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(json_int(&d, 4, &v), 0);
	assert_true(v == INT64_MIN);
	v = 42;
	assert_int_equal(json_int(&d, 5, &v), -ERANGE);
	assert_int_equal(json_int(&d, 6, &v), -ERANGE);
	assert_int_equal(json_int(&d, 7, &v), -ERANGE);
	assert_int_equal(json_int(&d, 8, &v), -EINVAL);
	assert_int_equal(json_int(&d, 9, &v), -EINVAL);
	assert_int_equal(json_int(&d, 10, &v), -EINVAL);
	assert_int_equal(json_int(&d, 11, &v), -EINVAL);
	assert_int_equal(json_int(&d, 12, &v), -EINVAL);
	assert_true(v == 42);
	assert_int_equal(json_int(&d, 13, &v), 0);
	assert_true(v == 17);
	assert_int_equal(json_int(&d, 0, &v), -EINVAL);
	/* not an integer at all, so not out of range either */
	assert_int_equal(json_int(&d, 14, &v), -EINVAL);
	assert_int_equal(json_int(&d, 15, &v), -EINVAL);
}

static void test_json_bool_reads_only_true_and_false(void **state)
{
	struct json_doc d;
	bool b = false;

	assert_int_equal(parse(&d, "[true,false,null,0]"), 0);
	assert_int_equal(json_bool(&d, 1, &b), 0);
	assert_true(b);
	assert_int_equal(json_bool(&d, 2, &b), 0);
	assert_false(b);
	assert_int_equal(json_bool(&d, 3, &b), -EINVAL);
	assert_int_equal(json_bool(&d, 4, &b), -EINVAL);
	assert_int_equal(json_bool(&d, 5, &b), -EINVAL);
}

static void test_json_reads_docker_answer_ignoring_unknown_fields(void **state)
{
	/* shaped like GET /containers/{id}/json, with fields this client never asks for */
	const char *s =
		"{\"Id\":\"4fa6e0f0c678\",\"Created\":\"2026-01-02T03:04:05.123456789Z\","
		"\"Path\":\"/sbin/agentic-init\",\"Args\":[],"
		"\"State\":{\"Status\":\"running\",\"Running\":true,\"Paused\":false,\"Pid\":4242,"
		"\"ExitCode\":0,\"Health\":{\"Status\":\"healthy\",\"Log\":[{\"Output\":\"ok\\n\"}]},"
		"\"FutureField\":{\"nested\":[1,2.5e3,null,{\"deeper\":[[]]}]}},"
		"\"Name\":\"/sbx-0123abcd\",\"RestartCount\":0,"
		"\"Config\":{\"Labels\":{\"agentic-sandbox\":\"true\",\"agentic-control-uid\":\"200001\","
		"\"com.example.\\u00fcnicode\":\"\\u2603\"},\"Env\":[\"AGENT_ID=sbx-0123abcd\"]},"
		"\"NetworkSettings\":{\"Networks\":{\"agentic-net-0a1b2c3d4e5f\":{\"IPAddress\":\"10.213.0.2\"}}},"
		"\"Mounts\":[{\"Type\":\"bind\",\"Source\":\"/srv\",\"RW\":false}]}";
	struct json_doc d;
	char out[64];
	int64_t pid;
	bool running;
	int st, cfg, labels, nets, first;

	assert_int_equal(parse(&d, s), 0);
	assert_int_equal(json_str(&d, json_obj_get(&d, 0, "Id"), out, sizeof(out)), 12);
	assert_string_equal(out, "4fa6e0f0c678");
	st = json_obj_get(&d, 0, "State");
	assert_true(st > 0);
	assert_int_equal(json_int(&d, json_obj_get(&d, st, "Pid"), &pid), 0);
	assert_true(pid == 4242);
	assert_int_equal(json_bool(&d, json_obj_get(&d, st, "Running"), &running), 0);
	assert_true(running);
	assert_true(json_str_eq(&d, json_obj_get(&d, st, "Status"), "running"));
	/* a key of the unknown subtree is not found at the wrong level */
	assert_int_equal(json_obj_get(&d, st, "deeper"), -1);
	assert_true(json_str_eq(&d, json_obj_get(&d, 0, "Name"), "/sbx-0123abcd"));
	cfg = json_obj_get(&d, 0, "Config");
	labels = json_obj_get(&d, cfg, "Labels");
	assert_true(json_str_eq(&d, json_obj_get(&d, labels, "agentic-sandbox"), "true"));
	assert_true(json_str_eq(&d, json_obj_get(&d, labels, "com.example.\xc3\xbcnicode"),
				"\xe2\x98\x83"));
	assert_int_equal(tok[labels].children, 3);
	nets = json_obj_get(&d, json_obj_get(&d, 0, "NetworkSettings"), "Networks");
	first = json_first(&d, nets);
	assert_int_equal(json_str(&d, first, out, sizeof(out)), 24);
	assert_string_equal(out, "agentic-net-0a1b2c3d4e5f");
	assert_true(json_str_eq(&d, json_obj_get(&d, first + 1, "IPAddress"), "10.213.0.2"));
	assert_int_equal(json_obj_get(&d, 0, "Missing"), -1);
}

static void test_json_token_limit_is_err_limit_at_the_value(void **state)
{
	struct json_doc d;
	struct json_token small[4];

	assert_int_equal(json_parse(&d, "[1,2,3]", 7, small, 4), 0);
	assert_int_equal(d.ntok, 4);
	assert_int_equal(json_parse(&d, "[1,2,3]", 7, small, 3), ERR_LIMIT);
	assert_int_equal(d.err_offset, 5);
	assert_int_equal(d.ntok, 0);
	assert_int_equal(json_parse(&d, "{\"k\":1}", 7, small, 1), ERR_LIMIT);
	assert_int_equal(d.err_offset, 1);
	assert_int_equal(json_parse(&d, "1", 1, small, 0), ERR_LIMIT);
	assert_int_equal(d.err_offset, 0);
}

static void test_json_nesting_stops_at_the_depth_limit(void **state)
{
	char s[2 * (JSON_MAX_DEPTH + 1) + 1];
	struct json_doc d;
	size_t n = JSON_MAX_DEPTH;

	memset(s, '[', n);
	memset(s + n, ']', n);
	assert_int_equal(json_parse(&d, s, 2 * n, tok, NTOK), 0);
	assert_int_equal(d.ntok, JSON_MAX_DEPTH);
	assert_int_equal(tok[JSON_MAX_DEPTH - 1].end, JSON_MAX_DEPTH + 1);

	n = JSON_MAX_DEPTH + 1;
	memset(s, '[', n);
	memset(s + n, ']', n);
	assert_int_equal(json_parse(&d, s, 2 * n, tok, NTOK), ERR_LIMIT);
	assert_int_equal(d.err_offset, JSON_MAX_DEPTH);

	/* objects count the same way */
	memset(s, 0, sizeof(s));
	n = 0;
	for (int i = 0; i < JSON_MAX_DEPTH / 4; i++)
		n += (size_t)snprintf(s + n, sizeof(s) - n, "{\"\":");
	assert_int_equal(json_parse(&d, s, n, tok, NTOK), ERR_PARSE);
	assert_int_equal(d.err_offset, n);
}

static void test_json_deep_object_nesting_hits_the_limit(void **state)
{
	static char s[5 * (JSON_MAX_DEPTH + 1) + JSON_MAX_DEPTH + 2];
	struct json_doc d;
	size_t n = 0;

	for (int i = 0; i <= JSON_MAX_DEPTH; i++) {
		memcpy(s + n, "{\"a\":", 5);
		n += 5;
	}
	assert_int_equal(json_parse(&d, s, n, tok, NTOK), ERR_LIMIT);
	assert_int_equal(d.err_offset, 5 * JSON_MAX_DEPTH);
}

static void test_json_refuses_documents_over_4_gib(void **state)
{
	struct json_doc d;

	/* refused before a byte is read, so the short source is never overrun */
	assert_int_equal(json_parse(&d, "1", (size_t)UINT32_MAX + 1, tok, NTOK), ERR_LIMIT);
	assert_int_equal(d.ntok, 0);
}

/* ---- writer ---- */

static int write_finish(struct json_writer *w, struct buf *b)
{
	int rc = json_writer_finish(w);

	if (rc == 0 && b->len < b->cap)
		b->data[b->len] = '\0';
	return rc;
}

static void test_json_writer_escapes_what_json_requires(void **state)
{
	char storage[256];
	struct buf b;
	struct json_writer w;

	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "k\"\\");
	json_str_write(&w, "q\"b\\s/\b\f\n\r\t\x01\x1f\x7f \xc3\xa9\xe2\x80\xa8");
	json_key(&w, "n");
	json_strn_write(&w, "a\0b", 3);
	json_obj_end(&w);
	assert_int_equal(write_finish(&w, &b), 0);
	assert_string_equal(storage, "{\"k\\\"\\\\\":\"q\\\"b\\\\s/\\b\\f\\n\\r\\t\\u0001\\u001f\x7f "
				     "\xc3\xa9\xe2\x80\xa8\",\"n\":\"a\\u0000b\"}");
}

static void test_json_writer_places_commas_and_colons(void **state)
{
	char storage[256];
	struct buf b;
	struct json_writer w;

	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "a");
	json_arr_begin(&w);
	json_int_write(&w, INT64_MIN);
	json_int_write(&w, INT64_MAX);
	json_int_write(&w, 0);
	json_bool_write(&w, true);
	json_bool_write(&w, false);
	json_null_write(&w);
	json_obj_begin(&w);
	json_obj_end(&w);
	json_arr_begin(&w);
	json_arr_end(&w);
	json_arr_end(&w);
	json_key(&w, "b");
	json_str_write(&w, "");
	json_obj_end(&w);
	assert_int_equal(write_finish(&w, &b), 0);
	assert_string_equal(storage, "{\"a\":[-9223372036854775808,9223372036854775807,0,true,"
				     "false,null,{},[]],\"b\":\"\"}");
}

static void test_json_writer_refuses_invalid_utf8_and_rolls_back(void **state)
{
	static const char *bad[] = {
		"\x80", "\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "ok\xc3", "\xe0\x9f\xbf",
		"\xff",
	};
	char storage[64];
	struct buf b;
	struct json_writer w;

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		buf_init(&b, storage, sizeof(storage));
		buf_append(&b, "HDR", 3);
		json_writer_init(&w, &b);
		json_arr_begin(&w);
		json_str_write(&w, "fine");
		json_str_write(&w, bad[i]);
		json_int_write(&w, 1);
		json_arr_end(&w);
		assert_int_equal(json_writer_finish(&w), -EINVAL);
		assert_int_equal(b.len, 3);
	}
	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "\xc3");
	assert_int_equal(json_writer_finish(&w), -EINVAL);
	assert_int_equal(b.len, 0);
}

static void test_json_writer_full_buffer_is_err_limit_and_sticks(void **state)
{
	char storage[8];
	struct buf b;
	struct json_writer w;

	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	json_str_write(&w, "abcdefgh");
	json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_LIMIT);
	assert_int_equal(b.len, 0);
	/* the exact fit works */
	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	json_str_write(&w, "abcd");
	json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	assert_int_equal(b.len, 8);
	assert_memory_equal(storage, "[\"abcd\"]", 8);
}

static void test_json_writer_refuses_misplaced_keys_and_values(void **state)
{
	char storage[64];
	struct buf b;
	struct json_writer w;

	/* a value in an object without a key */
	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_int_write(&w, 1);
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	assert_int_equal(b.len, 0);
	/* a key in an array */
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	json_key(&w, "a");
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* two keys in a row */
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "a");
	json_key(&w, "b");
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* closing an object right after its key */
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "a");
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* the wrong closer */
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* a container as a key-less value, after which nothing more is written */
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_arr_begin(&w);
	json_str_write(&w, "x");
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	assert_int_equal(b.len, 0);
	/* closing at the top */
	json_writer_init(&w, &b);
	json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* two root values */
	json_writer_init(&w, &b);
	json_int_write(&w, 1);
	json_int_write(&w, 2);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* nothing at all */
	json_writer_init(&w, &b);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	/* unbalanced */
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	json_obj_begin(&w);
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), ERR_STATE);
	assert_int_equal(b.len, 0);
	/* a root scalar alone is a document */
	json_writer_init(&w, &b);
	json_null_write(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	assert_int_equal(b.len, 4);
}

static void test_json_writer_depth_limit_matches_the_reader(void **state)
{
	char storage[8 * JSON_MAX_DEPTH];
	struct buf b;
	struct json_writer w;
	struct json_doc d;

	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		json_arr_begin(&w);
	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	assert_int_equal(json_parse(&d, storage, b.len, tok, NTOK), 0);

	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	for (int i = 0; i <= JSON_MAX_DEPTH; i++) {
		json_obj_begin(&w);
		json_key(&w, "");
	}
	assert_int_equal(json_writer_finish(&w), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

static void test_json_round_trip_writer_to_reader(void **state)
{
	static char storage[8192];
	char all[128], out[512];
	const char *samples[] = {
		"", "plain", "\xc3\xa9\xe2\x82\xac\xf0\x9d\x84\x9e\xf4\x8f\xbf\xbf", "\"\\/",
		"\xe2\x80\xa8\xe2\x80\xa9", "\x7f",
	};
	struct buf b;
	struct json_writer w;
	struct json_doc d;
	int arr, i, k;
	int64_t v;

	for (k = 1; k < 128; k++)
		all[k - 1] = (char)k;
	all[127] = '\0';
	buf_init(&b, storage, sizeof(storage));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, all);
	json_str_write(&w, all);
	json_key(&w, "samples");
	json_arr_begin(&w);
	for (i = 0; i < (int)ARRAY_LEN(samples); i++)
		json_str_write(&w, samples[i]);
	json_arr_end(&w);
	json_key(&w, "ints");
	json_arr_begin(&w);
	json_int_write(&w, INT64_MIN);
	json_int_write(&w, -1);
	json_int_write(&w, INT64_MAX);
	json_arr_end(&w);
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);

	assert_int_equal(json_parse(&d, storage, b.len, tok, NTOK), 0);
	assert_int_equal(json_str(&d, 1, out, sizeof(out)), 127);
	assert_string_equal(out, all);
	assert_int_equal(json_str(&d, json_obj_get(&d, 0, all), out, sizeof(out)), 127);
	assert_string_equal(out, all);
	arr = json_obj_get(&d, 0, "samples");
	for (i = 0, k = json_first(&d, arr); k >= 0; i++, k = json_next(&d, arr, k)) {
		assert_int_equal(json_str(&d, k, out, sizeof(out)), (int)strlen(samples[i]));
		assert_string_equal(out, samples[i]);
	}
	assert_int_equal(i, ARRAY_LEN(samples));
	arr = json_obj_get(&d, 0, "ints");
	k = json_first(&d, arr);
	assert_int_equal(json_int(&d, k, &v), 0);
	assert_true(v == INT64_MIN);
	k = json_next(&d, arr, k);
	assert_int_equal(json_int(&d, k, &v), 0);
	assert_true(v == -1);
	k = json_next(&d, arr, k);
	assert_int_equal(json_int(&d, k, &v), 0);
	assert_true(v == INT64_MAX);
	assert_int_equal(json_next(&d, arr, k), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_json_accepts_every_y_case),
		cmocka_unit_test(test_json_rejects_every_n_case_at_the_right_offset),
		cmocka_unit_test(test_json_error_says_why_in_words),
		cmocka_unit_test(test_json_tokens_carry_children_next_and_offsets),
		cmocka_unit_test(test_json_empty_containers_have_no_first_child),
		cmocka_unit_test(test_json_str_unescapes_into_utf8),
		cmocka_unit_test(test_json_str_refuses_what_does_not_fit_and_leaves_out_empty),
		cmocka_unit_test(test_json_str_refuses_embedded_nul),
		cmocka_unit_test(test_json_obj_get_compares_unescaped_keys),
		cmocka_unit_test(test_json_int_is_exact_over_the_whole_int64_range),
		cmocka_unit_test(test_json_bool_reads_only_true_and_false),
		cmocka_unit_test(test_json_reads_docker_answer_ignoring_unknown_fields),
		cmocka_unit_test(test_json_token_limit_is_err_limit_at_the_value),
		cmocka_unit_test(test_json_nesting_stops_at_the_depth_limit),
		cmocka_unit_test(test_json_deep_object_nesting_hits_the_limit),
		cmocka_unit_test(test_json_refuses_documents_over_4_gib),
		cmocka_unit_test(test_json_writer_escapes_what_json_requires),
		cmocka_unit_test(test_json_writer_places_commas_and_colons),
		cmocka_unit_test(test_json_writer_refuses_invalid_utf8_and_rolls_back),
		cmocka_unit_test(test_json_writer_full_buffer_is_err_limit_and_sticks),
		cmocka_unit_test(test_json_writer_refuses_misplaced_keys_and_values),
		cmocka_unit_test(test_json_writer_depth_limit_matches_the_reader),
		cmocka_unit_test(test_json_round_trip_writer_to_reader),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
