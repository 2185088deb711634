/* test_e2b_connect.c: Connect envelopes and the process.Process proto3-JSON messages
 * (src/e2b/connect.c): what the SDK sends parses, what agenticd writes is what the SDK reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "base/be.h"
#include "e2b/connect.h"

static char text[4096];
static uint8_t data[256];
static uint8_t obuf[4096];

/* The JSON of the one envelope in b, checked for its flags and length. */
static const char *envelope(const struct buf *b, uint8_t flags)
{
	static char json[4096];

	assert_true(b->len >= CONNECT_HDR);
	assert_int_equal(b->data[0], flags);
	assert_int_equal(be32_get(b->data + 1), b->len - CONNECT_HDR);
	memcpy(json, b->data + CONNECT_HDR, b->len - CONNECT_HDR);
	json[b->len - CONNECT_HDR] = '\0';
	return json;
}

static void test_envelope_decode_takes_one_message_and_refuses_the_rest(void **state)
{
	uint8_t in[16] = { 0, 0, 0, 0, 2, '{', '}' };
	const uint8_t *msg;
	size_t len;

	(void)state;
	assert_int_equal(connect_envelope_decode(in, 7, 64, &msg, &len), 0);
	assert_int_equal(len, 2);
	assert_memory_equal(msg, "{}", 2);
	assert_int_equal(connect_envelope_decode(in, 6, 64, &msg, &len), ERR_PARSE);
	assert_int_equal(connect_envelope_decode(in, 8, 64, &msg, &len), ERR_PARSE);
	assert_int_equal(connect_envelope_decode(in, 4, 64, &msg, &len), ERR_PARSE);
	assert_int_equal(connect_envelope_decode(in, 7, 1, &msg, &len), ERR_LIMIT);
	in[0] = CONNECT_COMPRESSED;
	assert_int_equal(connect_envelope_decode(in, 7, 64, &msg, &len), -ENOTSUP);
	in[0] = CONNECT_END;
	assert_int_equal(connect_envelope_decode(in, 7, 64, &msg, &len), ERR_PARSE);
	/* a bare JSON body is no envelope, not a compressed one */
	assert_int_equal(connect_envelope_decode((const uint8_t *)"{\"process\":{}}", 14, 64,
						 &msg, &len), ERR_PARSE);
}

static void test_start_parses_what_the_sdk_sends(void **state)
{
	const char *j = "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"echo hi\"],"
			"\"envs\":{\"A\":\"1\",\"B\":\"x y\"},\"cwd\":\"sub\"},\"stdin\":false,"
			"\"unknownField\":[1,{\"x\":null}]}";
	struct connect_start s;
	const char *why;

	(void)state;
	assert_int_equal(connect_start_parse(j, strlen(j), &s, text, sizeof(text), &why), 0);
	assert_string_equal(s.cmd, "/bin/bash");
	assert_int_equal(s.nargs, 3);
	assert_string_equal(s.args[2], "echo hi");
	assert_int_equal(s.nenv, 2);
	assert_string_equal(s.env_key[1], "B");
	assert_string_equal(s.env_val[1], "x y");
	assert_string_equal(s.cwd, "sub");
	assert_false(s.with_stdin);
	assert_false(s.pty);
	assert_string_equal(s.tag, "");
}

static void test_start_reads_pty_tag_and_defaults(void **state)
{
	const char *j = "{\"process\":{\"cmd\":\"sh\",\"args\":null,\"cwd\":null},\"tag\":\"t1\","
			"\"pty\":{\"size\":{\"cols\":\"120\",\"rows\":40}}}";
	struct connect_start s;
	const char *why;

	(void)state;
	assert_int_equal(connect_start_parse(j, strlen(j), &s, text, sizeof(text), &why), 0);
	assert_int_equal(s.nargs, 0);
	assert_null(s.cwd);
	assert_true(s.with_stdin); /* absent: true, as envd */
	assert_true(s.pty);
	assert_int_equal(s.cols, 120);
	assert_int_equal(s.rows, 40);
	assert_string_equal(s.tag, "t1");
}

static void test_start_refuses_bad_messages_with_a_reason(void **state)
{
	static const struct { const char *json; int err; } bad[] = {
		{ "", ERR_PARSE },
		{ "[]", ERR_PARSE },
		{ "{}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"\"}}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":1}}", ERR_PARSE },
		{ "{\"process\":\"sh\"}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\",\"args\":[1]}}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\",\"envs\":{\"A\":1}}}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\"},\"stdin\":\"yes\"}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\"},\"pty\":{\"size\":{\"cols\":-1}}}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\"},\"pty\":{\"size\":{\"cols\":70000}}}", ERR_PARSE },
		{ "{\"process\":{\"cmd\":\"sh\"},\"tag\":\"0123456789012345678901234567890123456789"
		  "0123456789012345678901234567890123456789\"}", ERR_LIMIT },
	};
	struct connect_start s;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(connect_start_parse(bad[i].json, strlen(bad[i].json), &s, text,
						     sizeof(text), &why), bad[i].err);
		assert_non_null(why);
	}
	/* the text storage too small: a limit, not a crash */
	assert_int_equal(connect_start_parse("{\"process\":{\"cmd\":\"/bin/bash\"}}", 31, &s,
					     text, 4, &why), ERR_LIMIT);
}

static void test_start_bounds_args_and_envs(void **state)
{
	static char j[8192];
	struct connect_start s;
	const char *why;
	size_t n;

	(void)state;
	n = (size_t)snprintf(j, sizeof(j), "{\"process\":{\"cmd\":\"x\",\"args\":[");
	for (int i = 0; i <= CONNECT_MAX_ARGS; i++)
		n += (size_t)snprintf(j + n, sizeof(j) - n, "%s\"a\"", i ? "," : "");
	n += (size_t)snprintf(j + n, sizeof(j) - n, "]}}");
	assert_int_equal(connect_start_parse(j, n, &s, text, sizeof(text), &why), ERR_LIMIT);
	n = (size_t)snprintf(j, sizeof(j), "{\"process\":{\"cmd\":\"x\",\"envs\":{");
	for (int i = 0; i <= CONNECT_MAX_ENVS; i++)
		n += (size_t)snprintf(j + n, sizeof(j) - n, "%s\"K%d\":\"v\"", i ? "," : "", i);
	n += (size_t)snprintf(j + n, sizeof(j) - n, "}}}");
	assert_int_equal(connect_start_parse(j, n, &s, text, sizeof(text), &why), ERR_LIMIT);
}

static void test_proc_requests_name_a_pid_or_tag(void **state)
{
	struct connect_proc p;
	const char *why;
	const char *j;

	(void)state;
	j = "{\"process\":{\"pid\":20514},\"input\":{\"stdin\":\"YWJjCg==\"}}";
	assert_int_equal(connect_proc_parse(j, strlen(j), &p, data, sizeof(data), &why), 0);
	assert_true(p.has_pid);
	assert_int_equal(p.pid, 20514);
	assert_true(p.has_input);
	assert_false(p.input_pty);
	assert_int_equal(p.input_len, 4);
	assert_memory_equal(data, "abc\n", 4);
	j = "{\"process\":{\"pid\":\"4294967295\"},\"input\":{\"pty\":\"YQ\"}}";
	assert_int_equal(connect_proc_parse(j, strlen(j), &p, data, sizeof(data), &why), 0);
	assert_int_equal(p.pid, UINT32_MAX);
	assert_true(p.input_pty);
	assert_int_equal(p.input_len, 1);
	j = "{\"process\":{\"tag\":\"web\"},\"signal\":\"SIGNAL_SIGTERM\"}";
	assert_int_equal(connect_proc_parse(j, strlen(j), &p, data, sizeof(data), &why), 0);
	assert_false(p.has_pid);
	assert_string_equal(p.tag, "web");
	assert_int_equal(p.signal, CONNECT_SIG_TERM);
	j = "{\"process\":{\"pid\":1},\"signal\":9,\"pty\":{\"size\":{\"cols\":80,\"rows\":24}}}";
	assert_int_equal(connect_proc_parse(j, strlen(j), &p, data, sizeof(data), &why), 0);
	assert_int_equal(p.signal, CONNECT_SIG_KILL);
	assert_true(p.has_size);
	assert_int_equal(p.cols, 80);
	assert_int_equal(p.rows, 24);
	j = "{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGKILL\"}";
	assert_int_equal(connect_proc_parse(j, strlen(j), &p, data, sizeof(data), &why), 0);
	assert_int_equal(p.signal, CONNECT_SIG_KILL);
}

static void test_proc_requests_refuse_bad_input(void **state)
{
	static const struct { const char *json; int err; } bad[] = {
		{ "{}", ERR_PARSE },
		{ "{\"process\":{}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":-1}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":4294967296}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":\"1x\"}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":1.5}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGHUP\"}", ERR_PARSE },
		{ "{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"!!!!\"}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":1},\"input\":{\"stdin\":3}}", ERR_PARSE },
		{ "{\"process\":{\"pid\":1},\"input\":{\"stdin\":\"YWJjZA==\"}}", ERR_LIMIT },
	};
	struct connect_proc p;
	const char *why;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(connect_proc_parse(bad[i].json, strlen(bad[i].json), &p, data, 3,
						    &why), bad[i].err);
		assert_non_null(why);
	}
}

static void test_events_are_whole_envelopes(void **state)
{
	struct connect_end_event end = { 0, true, "exit status 0", NULL };
	struct buf b;

	(void)state;
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_event_start(&b, 42), 0);
	assert_string_equal(envelope(&b, 0), "{\"event\":{\"start\":{\"pid\":42}}}");
	b.len = 0;
	assert_int_equal(connect_event_keepalive(&b), 0);
	assert_string_equal(envelope(&b, 0), "{\"event\":{\"keepalive\":{}}}");
	b.len = 0;
	assert_int_equal(connect_event_end(&b, &end), 0);
	/* proto3 JSON leaves a zero exitCode out */
	assert_string_equal(envelope(&b, 0),
			    "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}");
	b.len = 0;
	end = (struct connect_end_event){ -1, false, "signal: killed", "signal: killed" };
	assert_int_equal(connect_event_end(&b, &end), 0);
	assert_string_equal(envelope(&b, 0), "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,"
			    "\"status\":\"signal: killed\",\"error\":\"signal: killed\"}}}");
}

static void test_data_is_padded_base64(void **state)
{
	static const char *const want[] = {
		"{\"event\":{\"data\":{\"stdout\":\"\"}}}",
		"{\"event\":{\"data\":{\"stdout\":\"aA==\"}}}",
		"{\"event\":{\"data\":{\"stdout\":\"aGk=\"}}}",
		"{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}",
		"{\"event\":{\"data\":{\"stdout\":\"aGkKAA==\"}}}",
	};
	struct buf b;

	(void)state;
	for (size_t n = 0; n < 5; n++) {
		buf_init(&b, obuf, sizeof(obuf));
		assert_int_equal(connect_event_data(&b, CONNECT_STDOUT, "hi\n\0", n), 0);
		assert_string_equal(envelope(&b, 0), want[n]);
		assert_true(b.len <= connect_data_bytes(n));
	}
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_event_data(&b, CONNECT_STDERR, "\xff", 1), 0);
	assert_string_equal(envelope(&b, 0), "{\"event\":{\"data\":{\"stderr\":\"/w==\"}}}");
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_event_data(&b, CONNECT_PTY, "\x1b[", 2), 0);
	assert_string_equal(envelope(&b, 0), "{\"event\":{\"data\":{\"pty\":\"G1s=\"}}}");
	/* no room: nothing written */
	buf_init(&b, obuf, 20);
	assert_int_equal(connect_event_data(&b, CONNECT_STDOUT, "hello", 5), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

static void test_end_stream_is_flagged_and_carries_the_error(void **state)
{
	struct buf b;

	(void)state;
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_end_stream(&b, NULL, NULL), 0);
	assert_string_equal(envelope(&b, CONNECT_END), "{}");
	b.len = 0;
	assert_int_equal(connect_end_stream(&b, "not_found", "process \"7\" not found"), 0);
	assert_string_equal(envelope(&b, CONNECT_END), "{\"error\":{\"code\":\"not_found\","
			    "\"message\":\"process \\\"7\\\" not found\"}}");
	buf_init(&b, obuf, 10);
	assert_int_equal(connect_end_stream(&b, "internal", "a long message here"), ERR_LIMIT);
	assert_int_equal(b.len, 0);
}

static void test_config_and_list_encode_what_list_returns(void **state)
{
	const char *j = "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"],"
			"\"envs\":{\"A\":\"1\"},\"cwd\":\"/home/user\"}}";
	struct connect_info items[2];
	struct connect_start s;
	char cfg[256], small[128];
	struct buf b, c;
	const char *why;

	(void)state;
	assert_int_equal(connect_start_parse(j, strlen(j), &s, text, sizeof(text), &why), 0);
	buf_init(&c, cfg, sizeof(cfg));
	assert_int_equal(connect_config_encode(&c, sizeof(cfg), &s), 0);
	assert_int_equal(c.len, strlen("{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"],"
				       "\"envs\":{\"A\":\"1\"},\"cwd\":\"/home/user\"}"));
	assert_memory_equal(cfg, "{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"],"
			    "\"envs\":{\"A\":\"1\"},\"cwd\":\"/home/user\"}", c.len);
	/* too small for all of it: the envs go first, then args and cwd are cut */
	buf_init(&b, small, sizeof(small));
	assert_int_equal(connect_config_encode(&b, 76, &s), 0);
	small[b.len] = '\0';
	assert_string_equal(small, "{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"cat\"],"
			    "\"envs\":{},\"cwd\":\"/home/user\"}");
	buf_init(&b, small, sizeof(small));
	assert_int_equal(connect_config_encode(&b, 60, &s), 0);
	small[b.len] = '\0';
	assert_string_equal(small, "{\"cmd\":\"/bin/bash\",\"args\":[\"-\",\"-\",\"c\"],"
			    "\"envs\":{},\"cwd\":\"/\"}");
	buf_init(&b, small, sizeof(small));
	assert_int_equal(connect_config_encode(&b, 20, &s), ERR_LIMIT);
	assert_int_equal(b.len, 0);
	items[0] = (struct connect_info){ 7, cfg, c.len, "web" };
	items[1] = (struct connect_info){ 8, "{\"cmd\":\"x\",\"args\":[],\"envs\":{}}", 31, NULL };
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_list_encode(&b, items, 2), 0);
	obuf[b.len] = '\0';
	assert_string_equal((char *)obuf, "{\"processes\":[{\"pid\":7,\"config\":{\"cmd\":\"/bin/bash\","
			    "\"args\":[\"-l\",\"-c\",\"cat\"],\"envs\":{\"A\":\"1\"},\"cwd\":"
			    "\"/home/user\"},\"tag\":\"web\"},{\"pid\":8,\"config\":{\"cmd\":\"x\","
			    "\"args\":[],\"envs\":{}}}]}");
	buf_init(&b, obuf, sizeof(obuf));
	assert_int_equal(connect_list_encode(&b, items, 0), 0);
	assert_int_equal(b.len, strlen("{\"processes\":[]}"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_envelope_decode_takes_one_message_and_refuses_the_rest),
		cmocka_unit_test(test_start_parses_what_the_sdk_sends),
		cmocka_unit_test(test_start_reads_pty_tag_and_defaults),
		cmocka_unit_test(test_start_refuses_bad_messages_with_a_reason),
		cmocka_unit_test(test_start_bounds_args_and_envs),
		cmocka_unit_test(test_proc_requests_name_a_pid_or_tag),
		cmocka_unit_test(test_proc_requests_refuse_bad_input),
		cmocka_unit_test(test_events_are_whole_envelopes),
		cmocka_unit_test(test_data_is_padded_base64),
		cmocka_unit_test(test_end_stream_is_flagged_and_carries_the_error),
		cmocka_unit_test(test_config_and_list_encode_what_list_returns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
