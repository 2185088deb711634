/* test_workspace.c: the ext4 images agenticd writes for workspaces are ones e2fsck finds
 * nothing wrong with, at every size class (no journal, each journal size, a partial last
 * group, many groups), and sizes outside the budget's range are refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"
#include "workspace/workspace.h"

static const char *e2fsck(void)
{
	static const char *const paths[] = { "/usr/sbin/e2fsck", "/sbin/e2fsck" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
		if (access(paths[i], X_OK) == 0)
			return paths[i];
	return NULL;
}

/* Formats a sparse file of size bytes and returns e2fsck -fn's exit status (0: clean). */
static int format_and_check(uint64_t size, char *report, size_t report_size)
{
	char path[] = "/tmp/test_workspace.XXXXXX", cmd[256];
	int fd = mkstemp(path), r, st;
	FILE *p;
	size_t n;

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)size), 0);
	r = workspace_format(fd, size, 10001, 10001);
	close(fd);
	assert_int_equal(r, 0);
	snprintf(cmd, sizeof(cmd), "%s -fn %s 2>&1", e2fsck(), path);
	p = popen(cmd, "r");
	assert_non_null(p);
	n = fread(report, 1, report_size - 1, p);
	report[n] = '\0';
	st = pclose(p);
	unlink(path);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static void test_workspace_images_pass_e2fsck_at_every_size(void **state)
{
	static const uint64_t sizes[] = {
		LIMIT_DISK_MIN_BYTES,           /* one group, no journal */
		LIMIT_DISK_JOURNAL_BYTES - 4096, /* the largest without a journal */
		LIMIT_DISK_JOURNAL_BYTES,       /* the smallest journal */
		200ull << 20,                   /* two groups, the last one partial */
		(1ull << 30) + (4ull << 20),    /* a runt last group, left out */
		5ull << 30,                     /* 40 groups, backups at 1, 3, 5, 7, 9, 25, 27 */
		LIMIT_DISK_MAX_BYTES,           /* 8192 groups, two descriptor blocks and more */
	};
	char report[4096];

	(void)state;
	if (!e2fsck())
		skip();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int st = format_and_check(sizes[i], report, sizeof(report));

		if (st != 0)
			fprintf(stderr, "size %llu: e2fsck exit %d:\n%s\n",
				(unsigned long long)sizes[i], st, report);
		assert_int_equal(st, 0);
	}
}

static void test_workspace_refuses_sizes_outside_the_budget_range(void **state)
{
	(void)state;
	assert_int_equal(workspace_format(-1, LIMIT_DISK_MIN_BYTES - 1, 1, 1), -EINVAL);
	assert_int_equal(workspace_format(-1, LIMIT_DISK_MAX_BYTES + 4096, 1, 1), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_workspace_images_pass_e2fsck_at_every_size),
		cmocka_unit_test(test_workspace_refuses_sizes_outside_the_budget_range),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
