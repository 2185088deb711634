/* test_policy.c: names, reserved labels, host mounts, and secret scrubbing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "mgmt/policy.h"

static void test_policy_name_follows_the_pattern(void **state)
{
	assert_true(policy_name_valid("sbx-0a1b2c3d"));
	assert_true(policy_name_valid("ab"));
	assert_false(policy_name_valid("a"));
	assert_false(policy_name_valid("1abc"));
	assert_false(policy_name_valid("Abc"));
	assert_false(policy_name_valid("ab_c"));
	assert_false(policy_name_valid("ab.c"));
	assert_false(policy_name_valid(""));
	assert_true(policy_name_valid("a123456789012345678901234567890123456789012345678901234567890bc"));
	assert_false(policy_name_valid("a123456789012345678901234567890123456789012345678901234567890bcd"));
}

static void test_policy_refuses_reserved_label_keys(void **state)
{
	assert_true(policy_label_key_allowed("team"));
	assert_false(policy_label_key_allowed("agentic-sandbox"));
	assert_false(policy_label_key_allowed("AGENTIC-control-uid"));
	assert_false(policy_label_key_allowed(""));
	assert_true(policy_label_key_allowed("agenticx"));
}

static void test_policy_mounts_only_under_allowlist_and_never_protected(void **state)
{
	struct config c;
	char why[256];

	config_defaults(&c);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/data", why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "empty: no host mounts allowed"));
	c.n_mount_allowlist = 2;
	strcpy(c.mount_allowlist[0], "/srv/data");
	strcpy(c.mount_allowlist[1], "/");
	assert_int_equal(policy_mount_check(&c, "/srv/data/x", "/data", why, sizeof(why)), 0);
	/* an allowlisted "/" still never lets these through */
	assert_int_equal(policy_mount_check(&c, "/", "/data", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/etc", "/data", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/var/run/docker.sock", "/d", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/var", "/d", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv", "/d", why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "agentic's own state"));
	assert_int_equal(policy_mount_check(&c, "/srv/agentshare/instances", "/d", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/proc/1", "/d", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/workspace", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/run/agentic", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/sbin/agentic-init", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/", why, sizeof(why)), -EPERM);
	/* component-wise: /srv/database is not under /srv/data */
	c.n_mount_allowlist = 1;
	assert_int_equal(policy_mount_check(&c, "/srv/database", "/d", why, sizeof(why)), -EPERM);
	assert_int_equal(policy_mount_check(&c, "/srv/data/../x", "/d", why, sizeof(why)), ERR_PARSE);
	assert_int_equal(policy_mount_check(&c, "srv/data", "/d", why, sizeof(why)), ERR_PARSE);
	assert_int_equal(policy_mount_check(&c, "/srv/data", "/d/", why, sizeof(why)), ERR_PARSE);
	assert_int_equal(policy_mount_check(&c, "/srv//data", "/d", why, sizeof(why)), ERR_PARSE);
}

static void test_policy_redact_scrubs_secret_shapes(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "init: refusing: GITHUB_TOKEN=abc123 set", "init: refusing: GITHUB_TOKEN=[redacted] set" },
		{ "password: hunter2", "password: [redacted]" },
		{ "auth Bearer eyJhbGciOiJIUzI1NiJ9.e30.x done", "auth [redacted] done" },
		{ "key ghp_ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 leaked", "key [redacted] leaked" },
		{ "aws AKIAIOSFODNN7EXAMPLE", "aws [redacted]" },
		{ "blob 3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAA1234567890abcdef== end", "blob [redacted] end" },
		{ "no such file: /usr/lib/x86_64-linux-gnu/libfoo.so.1", "no such file: /usr/lib/x86_64-linux-gnu/libfoo.so.1" },
		{ "exec failed: permission denied", "exec failed: permission denied" },
	};
	char buf[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(buf, sizeof(buf), "%s", cases[i].in);
		policy_redact(buf, sizeof(buf));
		if (strcmp(buf, cases[i].out) != 0)
			fail_msg("case %zu: got '%s' want '%s'", i, buf, cases[i].out);
	}
	/* a full buffer: the marker still replaces the secret, the tail is cut */
	snprintf(buf, 20, "TOKEN=ab tail");
	assert_int_equal(policy_redact(buf, 20), 1);
	assert_string_equal(buf, "TOKEN=[redacted] ta");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_policy_name_follows_the_pattern),
		cmocka_unit_test(test_policy_refuses_reserved_label_keys),
		cmocka_unit_test(test_policy_mounts_only_under_allowlist_and_never_protected),
		cmocka_unit_test(test_policy_redact_scrubs_secret_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
