/* test_seccomp.c: the sandboxes' seccomp profile: the built-in one is JSON that denies
 * io_uring and what the engine grants only with capabilities; a profile file is checked,
 * compacted, and refused with FILE:LINE:COLUMN; the create request has room for it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "json/json.h"
#include "daemon/seccomp.h"

static char out[SECCOMP_OPT_BYTES];
static struct json_token tok[LIMIT_SECCOMP_TOKENS];

/* The action of the first rule naming name, or NULL when none does. */
static const char *action_for(const struct json_doc *d, const char *name, char *buf, size_t size)
{
	int rules = json_obj_get(d, 0, "syscalls");

	for (int r = json_first(d, rules); r >= 0; r = json_next(d, rules, r)) {
		int names = json_obj_get(d, r, "names");
		for (int n = json_first(d, names); n >= 0; n = json_next(d, names, n))
			if (json_str_eq(d, n, name)) {
				json_str(d, json_obj_get(d, r, "action"), buf, size);
				return buf;
			}
	}
	return NULL;
}

static void test_seccomp_builtin_profile_denies_io_uring_and_capability_syscalls(void **state)
{
	static const char *const absent[] = { "unshare", "setns", "mount", "bpf", "userfaultfd",
					       "keyctl", "add_key", "perf_event_open", "kexec_load",
					       "init_module", "open_by_handle_at", "reboot" };
	static const char *const allowed[] = { "read", "execve", "capset", "prctl", "setresuid",
						"signalfd4", "epoll_pwait", "timerfd_create",
						"madvise", "close_range", "setgroups" };
	struct json_doc d;
	char act[64];
	int n = seccomp_profile_builtin(out, sizeof(out));

	assert_true(n > 0);
	assert_int_equal(strlen(out), (size_t)n);
	assert_int_equal(json_parse(&d, out, (size_t)n, tok, LIMIT_SECCOMP_TOKENS), 0);
	assert_true(json_str_eq(&d, json_obj_get(&d, 0, "defaultAction"), "SCMP_ACT_ERRNO"));
	assert_string_equal(action_for(&d, "io_uring_setup", act, sizeof(act)), "SCMP_ACT_ERRNO");
	assert_string_equal(action_for(&d, "io_uring_enter", act, sizeof(act)), "SCMP_ACT_ERRNO");
	assert_string_equal(action_for(&d, "io_uring_register", act, sizeof(act)),
			    "SCMP_ACT_ERRNO");
	assert_string_equal(action_for(&d, "clone3", act, sizeof(act)), "SCMP_ACT_ERRNO");
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (action_for(&d, absent[i], act, sizeof(act)))
			fail_msg("%s has a rule", absent[i]);
	for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++)
		if (!action_for(&d, allowed[i], act, sizeof(act)) || strcmp(act, "SCMP_ACT_ALLOW"))
			fail_msg("%s is not allowed", allowed[i]);
	assert_int_equal(seccomp_profile_builtin(out, 100), ERR_LIMIT);
}

static void test_seccomp_builtin_fits_the_create_request(void **state)
{
	struct config c;
	char err[256];
	int n;

	config_defaults(&c);
	n = seccomp_opt_for(&c, out, sizeof(out), err, sizeof(err));
	assert_true(n > 0);
	assert_memory_equal(out, "seccomp={\"defaultAction\":", 25);
	/* escaped in the request: about one byte in eight is a quote */
	assert_true((size_t)n * 5 / 4 + 16 < LIMIT_SECCOMP_PROFILE_BYTES);
}

static const char *write_file(const char *text)
{
	static char path[] = "/tmp/agentic-test-seccomp-XXXXXX";
	int fd;

	strcpy(path, "/tmp/agentic-test-seccomp-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void expect_refused(const char *text, const char *why)
{
	char err[512];
	const char *path = write_file(text);

	assert_true(seccomp_profile_load(path, out, sizeof(out), err, sizeof(err)) < 0);
	assert_string_equal(out, "");
	if (!strstr(err, why) || strncmp(err, path, strlen(path)) != 0)
		fail_msg("error '%s' does not say '%s' after the path", err, why);
	unlink(path);
}

static void test_seccomp_file_is_compacted(void **state)
{
	char err[512];
	const char *path = write_file("{\n\t\"defaultAction\" : \"SCMP_ACT_ERRNO\",\n"
				      "  \"syscalls\": [ {\"names\": [\"a b\", \"q\\\" x\"]} ]\n}\n");
	int n = seccomp_profile_load(path, out, sizeof(out), err, sizeof(err));

	assert_true(n > 0);
	assert_string_equal(out, "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":"
			    "[{\"names\":[\"a b\",\"q\\\" x\"]}]}");
	unlink(path);
}

/* What must fit is the compact form: a 48 KiB file that is mostly indentation is fine. */
static void test_seccomp_file_over_the_request_limit_fits_once_compacted(void **state)
{
	static char text[48 * 1024];
	char err[512];
	const char *path;

	memset(text, ' ', sizeof(text) - 1);
	memcpy(text, "{\"defaultAction\":", 17);
	memcpy(text + sizeof(text) - 20, "\"SCMP_ACT_ALLOW\"}\n", 19);
	path = write_file(text);
	assert_int_equal(seccomp_profile_load(path, out, sizeof(out), err, sizeof(err)), 34);
	assert_string_equal(out, "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}");
	unlink(path);
}

static void test_seccomp_bad_file_is_refused_with_line_and_column(void **state)
{
	expect_refused("{\n  \"defaultAction\": \"SCMP_ACT_ERRNO\",\n  \"syscalls\": [ oops ]\n}",
		       ":3:17: not a seccomp profile");
	expect_refused("[1]", ":1:1: a seccomp profile is a JSON object");
	expect_refused("{\"syscalls\": []}", "needs a string \"defaultAction\"");
	expect_refused("{\"defaultAction\": 1}", "needs a string \"defaultAction\"");
	expect_refused("{\"defaultAction\": \"X\",\n \"syscalls\": {}}", ":2:14: \"syscalls\" must");
	expect_refused("", "not a seccomp profile");
}

static void test_seccomp_missing_file_names_it(void **state)
{
	struct config c;
	char err[512];

	config_defaults(&c);
	strcpy(c.seccomp_profile, "/nonexistent/agentic-profile.json");
	assert_int_equal(seccomp_opt_for(&c, out, sizeof(out), err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, "/nonexistent/agentic-profile.json: cannot open"));
	assert_string_equal(out, "");
}

static void test_seccomp_profile_key_takes_a_path_or_nothing(void **state)
{
	struct config c;
	char err[256];

	config_defaults(&c);
	assert_string_equal(c.seccomp_profile, "");
	assert_int_equal(config_parse(&c, "seccomp_profile = /etc/p.json\n", 30, err, sizeof(err)), 0);
	assert_string_equal(c.seccomp_profile, "/etc/p.json");
	assert_int_equal(config_parse(&c, "seccomp_profile =\n", 18, err, sizeof(err)), 0);
	assert_string_equal(c.seccomp_profile, "");
	assert_int_equal(config_parse(&c, "seccomp_profile = p.json\n", 25, err, sizeof(err)),
			 ERR_PARSE);
	assert_non_null(strstr(err, "1: seccomp_profile must be an absolute path"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seccomp_builtin_profile_denies_io_uring_and_capability_syscalls),
		cmocka_unit_test(test_seccomp_builtin_fits_the_create_request),
		cmocka_unit_test(test_seccomp_file_is_compacted),
		cmocka_unit_test(test_seccomp_file_over_the_request_limit_fits_once_compacted),
		cmocka_unit_test(test_seccomp_bad_file_is_refused_with_line_and_column),
		cmocka_unit_test(test_seccomp_missing_file_names_it),
		cmocka_unit_test(test_seccomp_profile_key_takes_a_path_or_nothing),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
