/* test_policy.c: names, reserved labels, host mounts, and secret scrubbing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "sandbox/reqcheck.h"

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

static char base[64];

static void mkdir_as(const char *rel, mode_t mode, uid_t uid)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chmod(p, mode), 0);
	assert_int_equal(chown(p, uid, uid), 0);
}

static int source(const char *rel, struct policy_mount_id *id, char *why, size_t size)
{
	char p[128];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	return policy_mount_source(p, id, why, size);
}

static int setup_tree(void **state)
{
	char p[128];

	if (geteuid() != 0)
		return 0;
	snprintf(base, sizeof(base), "/tmp/test-policy-XXXXXX");
	assert_non_null(mkdtemp(base));
	assert_int_equal(chmod(base, 0755), 0);
	mkdir_as("ok", 0755, 0);
	mkdir_as("ok/src", 0700, 10001); /* the source's own owner does not matter */
	mkdir_as("user", 0755, 10001);
	mkdir_as("user/src", 0755, 0);
	mkdir_as("world", 0777, 0);
	mkdir_as("world/src", 0755, 0);
	mkdir_as("group", 0775, 0);
	mkdir_as("group/src", 0755, 0);
	mkdir_as("sticky", 01777, 0);
	mkdir_as("sticky/root", 0755, 0);
	mkdir_as("sticky/user", 0755, 10001);
	snprintf(p, sizeof(p), "%s/link", base);
	assert_int_equal(symlink("ok", p), 0);
	return 0;
}

static int remove_tree(void **state)
{
	char cmd[160];

	if (base[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		assert_int_equal(system(cmd), 0);
	}
	return 0;
}

static void test_policy_mount_source_refuses_paths_others_could_change(void **state)
{
	struct policy_mount_id id = { 0 };
	struct stat st;
	char why[512], p[128];

	if (geteuid() != 0)
		skip(); /* the tree needs root's and others' directories */
	assert_int_equal(source("ok/src", &id, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/ok/src", base);
	assert_int_equal(stat(p, &st), 0);
	assert_true(id.dev == (uint64_t)st.st_dev && id.ino == (uint64_t)st.st_ino);
	assert_int_equal(source("sticky/root", &id, why, sizeof(why)), 0);

	assert_int_equal(source("user/src", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/user belongs to uid 10001, who could swap src for a symlink"));
	assert_int_equal(source("world/src", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/world is world-writable"));
	assert_int_equal(source("group/src", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/group is writable by group 0"));
	assert_int_equal(source("sticky/user", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/sticky is sticky and uid 10001 owns the entry"));
	/* a realpath has no symlink: one met means the path changed after it was resolved */
	assert_int_equal(source("link/src", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "changed while it was checked"));
	assert_non_null(strstr(why, "/link is now a symlink"));
	assert_int_equal(source("none", &id, why, sizeof(why)), -ENOENT);
	assert_int_equal(policy_mount_source("/", &id, why, sizeof(why)), -EPERM);
}

static void test_policy_mount_verify_sees_what_the_process_sees(void **state)
{
	struct policy_mount_id id = { 0 };
	char why[512], p[128], ns[64];
	ssize_t n;

	if (geteuid() != 0)
		skip();
	n = readlink("/proc/self/ns/pid", ns, sizeof(ns) - 1);
	assert_true(n > 0);
	ns[n] = '\0';
	assert_int_equal(source("ok/src", &id, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/ok/src", base);
	assert_int_equal(policy_mount_verify(getpid(), ns, p, &id, why, sizeof(why)), 0);
	snprintf(p, sizeof(p), "%s/ok", base);
	assert_int_equal(policy_mount_verify(getpid(), ns, p, &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "something other than the checked source"));
	/* a symlink on the way is never followed (it could lead out of the container's root) */
	snprintf(p, sizeof(p), "%s/link/src", base);
	assert_int_equal(policy_mount_verify(getpid(), ns, p, &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/link is a symlink"));
	/* another process behind the pid (reused) is not looked into */
	snprintf(p, sizeof(p), "%s/ok/src", base);
	assert_int_equal(policy_mount_verify(getpid(), "pid:[1]", p, &id, why, sizeof(why)), -ESRCH);
}

static void test_policy_dir_fixed_and_init_check(void **state)
{
	struct policy_mount_id id = { 0 }, init = { 0 };
	char why[512], p[160], q[160];
	int fd;

	if (geteuid() != 0)
		skip();
	snprintf(p, sizeof(p), "%s/ok", base);
	assert_int_equal(policy_dir_fixed(p, &id, why, sizeof(why)), 0);
	/* the directory itself must be root's alone: the source rule lets its owner be anyone */
	snprintf(p, sizeof(p), "%s/ok/src", base);
	assert_int_equal(policy_dir_fixed(p, &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/ok/src belongs to uid 10001 with mode 0700"));
	snprintf(p, sizeof(p), "%s/world", base);
	assert_int_equal(policy_dir_fixed(p, &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/world belongs to uid 0 with mode 0777"));
	assert_int_equal(policy_dir_fixed("/", &id, why, sizeof(why)), 0);

	/* the init's copy: the same file passes; another one renamed over it is refused */
	snprintf(p, sizeof(p), "%s/ok/agentic-init", base);
	fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0555);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(policy_mount_source(p, &init, why, sizeof(why)), 0);
	assert_int_equal(policy_same_file(p, &init, why, sizeof(why)), 0);
	assert_int_equal(policy_init_check(p, &init, why, sizeof(why)), 0);
	snprintf(q, sizeof(q), "%s/ok/planted", base);
	fd = open(q, O_WRONLY | O_CREAT | O_EXCL, 0555);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(rename(q, p), 0);
	assert_int_equal(policy_init_check(p, &init, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "is not the file agenticd wrote"));
	assert_int_equal(policy_same_file(p, &init, why, sizeof(why)), -EPERM);

	/* walked from another root: the paths are that root's (an engine's /proc/PID/root) */
	fd = open(base, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(fd >= 0);
	policy_root_set(fd);
	assert_int_equal(policy_mount_source("/ok/src", &id, why, sizeof(why)), 0);
	assert_int_equal(policy_mount_source("/world/src", &id, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "/world is world-writable"));
	policy_root_set(-1);
	close(fd);
	assert_int_equal(policy_mount_source("/ok/src", &id, why, sizeof(why)), -ENOENT);
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
		cmocka_unit_test_setup_teardown(test_policy_mount_source_refuses_paths_others_could_change,
						setup_tree, remove_tree),
		cmocka_unit_test_setup_teardown(test_policy_mount_verify_sees_what_the_process_sees,
						setup_tree, remove_tree),
		cmocka_unit_test_setup_teardown(test_policy_dir_fixed_and_init_check, setup_tree,
						remove_tree),
		cmocka_unit_test(test_policy_redact_scrubs_secret_shapes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
