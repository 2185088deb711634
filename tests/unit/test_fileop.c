/* test_fileop.c: the answer line of the sandbox's file applet as agenticd reads it
 * (fileop_line_parse, src/agent/fileop.c). The sandbox is hostile: every malformed line, cut
 * line, bad escape, out-of-range number or stray member is refused, and a good one yields the
 * name's exact bytes, whatever they are. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent/fileop.h"

static const char good[] =
	"{\"path\":\"/workspace/a b\",\"type\":\"file\",\"size\":1048579,\"mode\":420,"
	"\"uid\":10001,\"gid\":0,\"mtime\":1796496718,\"mtime_ns\":129533706}";

static int parse(const char *text, struct file_entry *e, char *line, char *ids)
{
	size_t n = strlen(text);

	memcpy(line, text, n + 1);
	return fileop_line_parse(line, n, e, ids);
}

static void test_fileop_line_good_entry(void **state)
{
	char line[512], ids[24];
	struct file_entry e;

	(void)state;
	assert_int_equal(parse(good, &e, line, ids), 0);
	assert_string_equal(e.path, "/workspace/a b");
	assert_string_equal(e.name, "a b");
	assert_int_equal(e.type, FILE_TYPE_FILE);
	assert_int_equal(e.size, 1048579);
	assert_int_equal(e.mode, 0644);
	assert_string_equal(e.owner, "user");
	assert_string_equal(e.group, "root");
	assert_int_equal(e.mtime_s, 1796496718);
	assert_int_equal(e.mtime_ns, 129533706);
	assert_null(e.symlink_target);
}

static void test_fileop_line_any_bytes_kept_exactly(void **state)
{
	char line[512], ids[24];
	struct file_entry e;

	(void)state;
	/* control bytes escaped, '"' and '\\' escaped, bytes from 0x80 raw (not UTF-8) */
	assert_int_equal(parse("{\"path\":\"/w/q\\u0001\x80\xff\\\"\\\\z\\u007f\",\"type\":\"symlink\","
			       "\"size\":3,\"mode\":511,\"uid\":5,\"gid\":4294967295,\"mtime\":-5,"
			       "\"mtime_ns\":0,\"target\":\"/etc/\\u000apasswd\"}", &e, line, ids), 0);
	assert_string_equal(e.path, "/w/q\x01\x80\xff\"\\z\x7f");
	assert_string_equal(e.name, "q\x01\x80\xff\"\\z\x7f");
	assert_int_equal(e.type, FILE_TYPE_SYMLINK);
	assert_string_equal(e.symlink_target, "/etc/\npasswd");
	assert_string_equal(e.owner, "5");
	assert_string_equal(e.group, "4294967295");
	assert_int_equal(e.mtime_s, -5);
}

static void test_fileop_line_types(void **state)
{
	char line[512], ids[24], text[512];
	static const char *const words[] = { "file", "dir", "symlink", "other", "fifo" };
	static const int types[] = { FILE_TYPE_FILE, FILE_TYPE_DIR, FILE_TYPE_SYMLINK,
				     FILE_TYPE_OTHER, FILE_TYPE_OTHER };
	struct file_entry e;

	(void)state;
	for (size_t i = 0; i < 5; i++) {
		snprintf(text, sizeof(text), "{\"path\":\"/\",\"type\":\"%s\",\"uid\":0,\"gid\":0}",
			 words[i]);
		assert_int_equal(parse(text, &e, line, ids), 0);
		assert_int_equal(e.type, types[i]);
		assert_string_equal(e.name, "/");
	}
}

static void test_fileop_line_refuses_malformed(void **state)
{
	static const char *const bad[] = {
		"",
		"{}",
		"[]",
		"{\"type\":\"file\",\"uid\":0,\"gid\":0}",                      /* no path */
		"{\"path\":\"\",\"uid\":0,\"gid\":0}",                          /* empty path */
		"{\"path\":\"/a\",\"gid\":0}",                                  /* no uid */
		"{\"path\":\"/a\",\"uid\":0}",                                  /* no gid */
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0} ",                       /* trailing byte */
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0}}",
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,}",
		"{\"path\":\"/a\" ,\"uid\":0,\"gid\":0}",                       /* space */
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"extra\":1}",           /* unknown member */
		"{\"path\":\"/\\u0000a\",\"uid\":0,\"gid\":0}",                /* NUL by escape */
		"{\"path\":\"/\\u0100\",\"uid\":0,\"gid\":0}",                 /* not a byte */
		"{\"path\":\"/\\u00zz\",\"uid\":0,\"gid\":0}",
		"{\"path\":\"/\\x41\",\"uid\":0,\"gid\":0}",
		"{\"path\":\"/a\tb\",\"uid\":0,\"gid\":0}",                    /* raw control byte */
		"{\"path\":\"/a\",\"uid\":-1,\"gid\":0}",                      /* negative id */
		"{\"path\":\"/a\",\"uid\":4294967296,\"gid\":0}",              /* id over 32 bits */
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"mode\":4096}",         /* mode over 07777 */
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"mtime_ns\":1000000000}",
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"size\":99999999999999999999}",
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"size\":-1}",
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"size\":1.5}",
		"{\"path\":\"/a\",\"uid\":0,\"gid\":0,\"size\":\"1\"}",
		"{\"path\":1,\"uid\":0,\"gid\":0}",
		"{\"path\":\"/a\",\"type\":\"file\",\"uid\":0,\"gid\":0,\"target\":\"/b\"}",
		"{path:\"/a\",\"uid\":0,\"gid\":0}",
	};
	char line[512], ids[24];
	struct file_entry e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse(bad[i], &e, line, ids), -EINVAL);
}

static void test_fileop_line_every_cut_refused(void **state)
{
	char line[512], ids[24];
	struct file_entry e;
	size_t n = strlen(good);

	(void)state;
	for (size_t cut = 0; cut < n; cut++) {
		memcpy(line, good, cut);
		assert_int_equal(fileop_line_parse(line, cut, &e, ids), -EINVAL);
	}
}

static void test_fileop_line_nul_inside_refused(void **state)
{
	char line[512], ids[24];
	struct file_entry e;
	size_t n = strlen(good);

	(void)state;
	for (size_t at = 0; at < n; at++) {
		memcpy(line, good, n);
		line[at] = '\0';
		assert_int_equal(fileop_line_parse(line, n, &e, ids), -EINVAL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fileop_line_good_entry),
		cmocka_unit_test(test_fileop_line_any_bytes_kept_exactly),
		cmocka_unit_test(test_fileop_line_types),
		cmocka_unit_test(test_fileop_line_refuses_malformed),
		cmocka_unit_test(test_fileop_line_every_cut_refused),
		cmocka_unit_test(test_fileop_line_nul_inside_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
