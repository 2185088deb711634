/* test_prune.c: the pruner's parts: mountinfo parsing, the lexical reading of `current`, and
 * the tree walker under races made deterministic by interposing openat(). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <cmocka.h>

#include "prune/prune.h"

/* ---- openat interposed: runs a test's hook right before the walker's call ---- */

static const char *hook_path;       /* the openat path that triggers the hook */
static void (*hook_fn)(int dirfd);  /* runs once, then is cleared */

int openat(int dirfd, const char *path, int flags, ...)
{
	mode_t mode = 0;

	if (flags & (O_CREAT | O_TMPFILE)) {
		va_list ap;
		va_start(ap, flags);
		mode = va_arg(ap, mode_t);
		va_end(ap);
	}
	if (hook_fn && hook_path && strcmp(path, hook_path) == 0) {
		void (*fn)(int) = hook_fn;
		hook_fn = NULL;
		fn(dirfd);
	}
	return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

/* ---- a scratch tree per test ---- */

static char base[256];

static void path_of(char *out, size_t size, const char *rel)
{
	snprintf(out, size, "%s/%s", base, rel);
}

static void mk(const char *rel)
{
	char p[512];

	path_of(p, sizeof(p), rel);
	assert_int_equal(mkdir(p, 0700), 0);
}

static void put(const char *rel)
{
	char p[512];
	FILE *f;

	path_of(p, sizeof(p), rel);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs("data\n", f);
	fclose(f);
}

static bool exists(const char *rel)
{
	char p[512];
	struct stat st;

	path_of(p, sizeof(p), rel);
	return lstat(p, &st) == 0;
}

static int setup(void **state)
{
	snprintf(base, sizeof(base), "/tmp/test_prune_unit.XXXXXX");
	assert_non_null(mkdtemp(base));
	hook_fn = NULL;
	return 0;
}

static int teardown(void **state)
{
	char cmd[600];

	hook_fn = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	return system(cmd) == 0 ? 0 : -1;
}

static struct prune_level stack[64];
static uint8_t dents[4096];
static struct prune_walk walk;

/* Walks base/rel (remove or measure); returns the walker's result. */
static int walk_run(const char *rel, bool remove)
{
	char p[512];
	struct prune_stat st;
	int fd;

	path_of(p, sizeof(p), rel);
	fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
	assert_true(fd >= 0);
	assert_int_equal(prune_stat_at(fd, "", AT_EMPTY_PATH, &st), 0);
	memset(&walk, 0, sizeof(walk));
	walk.stack = stack;
	walk.stack_cap = ARRAY_LEN(stack);
	walk.dents = dents;
	walk.dents_size = sizeof(dents);
	walk.remove = remove;
	walk.dev_major = st.dev_major;
	walk.dev_minor = st.dev_minor;
	walk.ino = st.ino;
	walk.mnt_id = st.mnt_id;
	return prune_tree_walk(&walk, fd);
}

/* ---- the walker ---- */

static void test_tree_walk_empties_nested_run_and_counts_its_blocks(void **state)
{
	char link[512];
	uint64_t measured;

	mk("run");
	mk("run/outputs");
	mk("run/outputs/a");
	mk("run/outputs/a/b");
	mk("run/trace");
	put("run/stdout.log");
	put("run/outputs/a/b/f");
	put("run/trace/events.jsonl");
	path_of(link, sizeof(link), "run/etc");
	assert_int_equal(symlink("/etc", link), 0);
	assert_int_equal(walk_run("run", false), 0);
	measured = walk.bytes;
	assert_true(measured >= 5 * 512u); /* five directories at least */
	assert_true(exists("run/outputs/a/b/f"));
	assert_int_equal(walk_run("run", true), 0);
	assert_int_equal(walk.bytes, measured);
	assert_true(exists("run"));
	assert_false(exists("run/outputs"));
	assert_false(exists("run/etc"));
	assert_false(exists("run/stdout.log"));
}

static void test_tree_walk_stops_at_its_depth_limit(void **state)
{
	char rel[512] = "run";

	mk("run");
	for (int i = 0; i < 70; i++) {
		strcat(rel, "/d");
		mk(rel);
	}
	assert_int_equal(walk_run("run", true), ERR_LIMIT);
	assert_string_equal(walk.fail_op, "descend");
	assert_true(exists(rel));
}

/* The listed directory "sub" is replaced by a symlink to a victim between the listing and
 * the walker's openat: the walker must remove the symlink, not follow it. */
static void swap_sub_for_symlink(int dirfd)
{
	char from[512], to[512], victim[512];

	path_of(from, sizeof(from), "run/sub");
	path_of(to, sizeof(to), "sub-moved-away");
	path_of(victim, sizeof(victim), "victim");
	assert_int_equal(rename(from, to), 0);
	assert_int_equal(symlink(victim, from), 0);
}

static void test_tree_walk_removes_a_symlink_swapped_in_for_a_directory(void **state)
{
	mk("victim");
	put("victim/precious");
	mk("run");
	mk("run/sub");
	put("run/sub/f");
	hook_path = "sub";
	hook_fn = swap_sub_for_symlink;
	assert_int_equal(walk_run("run", true), 0);
	assert_null(hook_fn);
	assert_true(exists("victim/precious"));
	assert_false(exists("run/sub"));
	assert_true(exists("sub-moved-away/f")); /* moved out of the run before the walk met it */
}

/* While the walker is inside run/a/b, b is moved out of the run: climbing back must notice
 * that ".." is no longer run/a and stop, leaving the new parent alone. */
static void move_b_outside(int dirfd)
{
	char from[512], to[512];

	path_of(from, sizeof(from), "run/a/b");
	path_of(to, sizeof(to), "outside/b");
	assert_int_equal(rename(from, to), 0);
}

static void test_tree_walk_stops_when_its_directory_is_moved_out(void **state)
{
	mk("outside");
	put("outside/precious");
	mk("run");
	mk("run/a");
	mk("run/a/b");
	put("run/a/b/f");
	hook_path = "..";
	hook_fn = move_b_outside;
	assert_int_equal(walk_run("run", true), PRUNE_MOVED);
	assert_string_equal(walk.fail_op, "climb");
	assert_true(exists("outside/precious"));
	assert_true(exists("outside/b"));
	assert_false(exists("outside/b/f")); /* it was the run's, removed before the move */
}

/* A bind mount appears inside the run after the scan looked at /proc/self/mountinfo. */
static void mount_over_outputs(int dirfd)
{
	char src[512], dst[512];

	path_of(src, sizeof(src), "mounted");
	path_of(dst, sizeof(dst), "run/outputs");
	assert_int_equal(mount(src, dst, NULL, MS_BIND, NULL), 0);
}

static void test_tree_walk_refuses_a_mount_that_appears_during_the_walk(void **state)
{
	char dst[512];
	int r;

	/* In a private mount namespace of its own, so the mount cannot outlive the test. */
	if (geteuid() != 0 || unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
		skip();
		return;
	}
	mk("mounted");
	put("mounted/precious");
	mk("run");
	mk("run/outputs");
	hook_path = "outputs";
	hook_fn = mount_over_outputs;
	r = walk_run("run", true);
	path_of(dst, sizeof(dst), "run/outputs");
	assert_int_equal(umount(dst), 0);
	assert_int_equal(r, PRUNE_MOUNT);
	assert_true(exists("mounted/precious"));
}

/* ---- mountinfo ---- */

static char mbytes[256];
static uint32_t moff[4];
static struct prune_mounts mounts;
static struct prune_mountinfo mi;

static int mountinfo_feed_bytewise(const char *text)
{
	int r = 0;

	prune_mounts_init(&mounts, mbytes, sizeof(mbytes), moff, ARRAY_LEN(moff));
	prune_mountinfo_init(&mi, "/srv/agent share", &mounts);
	for (size_t i = 0; text[i] && r == 0; i++)
		r = prune_mountinfo_feed(&mi, text + i, 1);
	return r ? r : prune_mountinfo_finish(&mi);
}

static void test_mountinfo_keeps_unescaped_mount_points_below_the_root(void **state)
{
	const char *text =
		"22 1 8:1 / / rw - ext4 /dev/root rw\n"
		"30 22 8:1 /x /srv/agent\\040share rw shared:1 - ext4 /dev/root rw\n"
		"31 30 8:1 /y /srv/agent\\040share/instances/i/runs/run-1/outputs\\011tab rw - ext4 x rw\n"
		"32 30 8:1 /y /srv/agent\\040share/team/runs/run-\\134z rw - ext4 x rw\n"
		"33 22 8:1 /y /srv/agent\\040shared/runs/run-1 rw - ext4 x rw\n"
		"34 22 0:5 / /proc rw - proc proc rw\n";

	assert_int_equal(mountinfo_feed_bytewise(text), 0);
	assert_int_equal(mounts.n, 2);
	assert_true(prune_mounts_below(&mounts, "instances/i/runs/run-1"));
	assert_true(prune_mounts_below(&mounts, "instances/i/runs/run-1/outputs\ttab"));
	assert_true(prune_mounts_below(&mounts, "team/runs/run-\\z"));
	assert_false(prune_mounts_below(&mounts, "instances/i/runs/run-10"));
	assert_false(prune_mounts_below(&mounts, "instances/i/runs/run-"));
	assert_false(prune_mounts_below(&mounts, "team/runs/run-"));
	assert_false(prune_mounts_below(&mounts, "shared/runs/run-1"));
}

static void test_mounts_below_matches_components_not_prefixes(void **state)
{
	const char *text =
		"1 1 8:1 / /r/a/run-1\\040b rw - ext4 x rw\n"
		"2 1 8:1 / /r/a/run-1/m rw - ext4 x rw\n"
		"3 1 8:1 / /r/a/run-1x rw - ext4 x rw\n";

	prune_mounts_init(&mounts, mbytes, sizeof(mbytes), moff, ARRAY_LEN(moff));
	prune_mountinfo_init(&mi, "/r", &mounts);
	assert_int_equal(prune_mountinfo_feed(&mi, text, strlen(text)), 0);
	assert_int_equal(prune_mountinfo_finish(&mi), 0);
	assert_true(prune_mounts_below(&mounts, "a/run-1"));
	assert_true(prune_mounts_below(&mounts, "a/run-1 b"));
	assert_true(prune_mounts_below(&mounts, "a"));
	assert_false(prune_mounts_below(&mounts, "a/run-"));
	assert_false(prune_mounts_below(&mounts, "a/run-1/n"));
}

static void test_mountinfo_rejects_malformed_input(void **state)
{
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a\\04 rw - x y z\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a\\0x0 rw - x y z\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a\\777 rw - x y z\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a\\000 rw - x y z\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("\n"), ERR_PARSE);
	assert_int_equal(mountinfo_feed_bytewise("1 2 8:1 / /srv/a rw - x y z"), ERR_PARSE);
	/* an error sticks */
	assert_int_equal(prune_mountinfo_feed(&mi, "1 2 3 4 5 6\n", 12), ERR_PARSE);
}

static void test_mountinfo_reports_a_full_table(void **state)
{
	char line[128];
	int r = 0;

	prune_mounts_init(&mounts, mbytes, sizeof(mbytes), moff, ARRAY_LEN(moff));
	prune_mountinfo_init(&mi, "/r", &mounts);
	for (int i = 0; i < 5 && r == 0; i++) {
		snprintf(line, sizeof(line), "%d 1 8:1 / /r/m%d rw - ext4 x rw\n", i, i);
		r = prune_mountinfo_feed(&mi, line, strlen(line));
	}
	assert_int_equal(r, ERR_LIMIT);
}

/* ---- current, read lexically ---- */

static void expect_link(const char *link_dir, const char *target, int want, const char *want_path)
{
	char out[256];
	int r = prune_link_resolve("/srv/as", "/data/as/", link_dir, target, out, sizeof(out));

	assert_int_equal(r, want);
	if (want == 0)
		assert_string_equal(out, want_path);
}

static void test_link_resolve_reads_every_spelling_of_the_same_run(void **state)
{
	const char *run = "instances/i/runs/run-1";

	expect_link("instances/i", "runs/run-1", 0, run);
	expect_link("instances/i", "./runs/run-1/", 0, run);
	expect_link("instances/i", "runs//./run-1//", 0, run);
	expect_link("instances/i", "../i/runs/run-1", 0, run);
	expect_link("instances/i", "/srv/as/instances/i/runs/run-1", 0, run);
	expect_link("instances/i", "/srv/as/instances/i/runs/run-1/", 0, run);
	expect_link("instances/i", "/srv//as/./instances/i/runs/x/../run-1", 0, run);
	expect_link("instances/i", "/data/as/instances/i/runs/run-1", 0, run);
	expect_link("instances/i", "runs/run-1/..", 0, "instances/i/runs");
	expect_link("instances/i", "../..", 0, "");
}

static void test_link_resolve_reports_targets_outside_the_root(void **state)
{
	char out[8];

	expect_link("instances/i", "../../../etc", PRUNE_OUTSIDE, NULL);
	expect_link("instances/i", "../../../as/instances/i/runs/run-1", 0,
		    "instances/i/runs/run-1");
	expect_link("instances/i", "../../../asx/runs/run-1", PRUNE_OUTSIDE, NULL);
	expect_link("instances/i", "/etc/passwd", PRUNE_OUTSIDE, NULL);
	expect_link("instances/i", "/srv/asx/instances/i/runs/run-1", PRUNE_OUTSIDE, NULL);
	expect_link("instances/i", "/srv", PRUNE_OUTSIDE, NULL);
	expect_link("instances/i", "/", PRUNE_OUTSIDE, NULL);
	assert_int_equal(prune_link_resolve("/srv/as", NULL, "instances/i", "runs/run-1", out,
					    sizeof(out)), ERR_LIMIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(
			test_tree_walk_empties_nested_run_and_counts_its_blocks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_tree_walk_stops_at_its_depth_limit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_tree_walk_removes_a_symlink_swapped_in_for_a_directory, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_tree_walk_stops_when_its_directory_is_moved_out, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_tree_walk_refuses_a_mount_that_appears_during_the_walk, setup, teardown),
		cmocka_unit_test(test_mountinfo_keeps_unescaped_mount_points_below_the_root),
		cmocka_unit_test(test_mounts_below_matches_components_not_prefixes),
		cmocka_unit_test(test_mountinfo_rejects_malformed_input),
		cmocka_unit_test(test_mountinfo_reports_a_full_table),
		cmocka_unit_test(test_link_resolve_reads_every_spelling_of_the_same_run),
		cmocka_unit_test(test_link_resolve_reports_targets_outside_the_root),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
