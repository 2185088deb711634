/* test_egress_policy_view.c: the admin API's view of a sandbox's egress (src/egress/view.c):
 * a policy copied as a JSON object (null for none), and the last lines of the run's
 * egress.jsonl, oldest first, at most as many as asked, a line that is no JSON object skipped
 * and a line cut at the start of a long file's tail dropped; and the policy audit line appended
 * whole (0600), naming the source and the mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/view.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"

static struct sandbox sb;
static char dir[64], text[128 * 1024];

static const char *view_audit(uint32_t max)
{
	static char out[96 * 1024];
	struct buf b;
	struct json_writer w;

	buf_init(&b, out, sizeof(out) - 1);
	json_writer_init(&w, &b);
	egress_view_audit(&w, &sb, max);
	assert_int_equal(json_writer_finish(&w), 0);
	out[b.len] = '\0';
	return out;
}

static void put_file(const char *s)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/egress.jsonl", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(s, f);
	fclose(f);
}

static int setup(void **state)
{
	struct run *run;

	snprintf(dir, sizeof(dir), "/tmp/egview-XXXXXX");
	assert_non_null(mkdtemp(dir));
	memset(&sb, 0, sizeof(sb));
	snprintf(sb.name, sizeof(sb.name), "s1");
	run = &((struct transcript_sb *)transcript_of(&sb))->run; /* a run stood up by hand */
	run->open = true;
	run->dirfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(transcript_of(&sb)->run.dirfd >= 0);
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	close(transcript_of(&sb)->run.dirfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void test_the_policy_is_copied_as_an_object(void **state)
{
	char out[512];
	struct buf b;
	struct json_writer w;

	buf_init(&b, out, sizeof(out) - 1);
	json_writer_init(&w, &b);
	json_arr_begin(&w);
	egress_view_policy(&w, "{\"mode\":\"enforce\",\"allow\":[\"a.com:443\"],\"rate_per_minute\":6,"
			   "\"x\":true,\"y\":null}");
	egress_view_policy(&w, "");
	json_arr_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	out[b.len] = '\0';
	assert_string_equal(out, "[{\"mode\":\"enforce\",\"allow\":[\"a.com:443\"],"
			    "\"rate_per_minute\":6,\"x\":true,\"y\":null},null]");
}

static void test_the_last_lines_oldest_first(void **state)
{
	put_file("{\"n\":1}\n{\"n\":2}\nnot json\n[3]\n{\"n\":4}\n{\"n\":5}\n");
	assert_string_equal(view_audit(100), "[{\"n\":1},{\"n\":2},{\"n\":4},{\"n\":5}]");
	assert_string_equal(view_audit(2), "[{\"n\":4},{\"n\":5}]");
	assert_string_equal(view_audit(0), "[]");
	put_file("{\"n\":1}\n{\"n\":2}"); /* the last line without its newline */
	assert_string_equal(view_audit(100), "[{\"n\":1},{\"n\":2}]");
	put_file("");
	assert_string_equal(view_audit(100), "[]");
}

static void test_a_long_file_is_read_from_its_tail(void **state)
{
	size_t n = 0;
	int i;

	/* a first line longer than the tail that is read, then numbered ones */
	n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"pad\":\"");
	memset(text + n, 'x', 70 * 1024);
	n += 70 * 1024;
	n += (size_t)snprintf(text + n, sizeof(text) - n, "\"}\n");
	for (i = 0; i < 300; i++)
		n += (size_t)snprintf(text + n, sizeof(text) - n, "{\"n\":%d}\n", i);
	put_file(text);
	{
		const char *out = view_audit(100);

		assert_non_null(strstr(out, "[{\"n\":200},"));
		assert_non_null(strstr(out, ",{\"n\":299}]"));
		assert_null(strstr(out, "pad"));
	}
}

static void test_no_file_is_an_empty_list(void **state)
{
	char path[128];

	snprintf(path, sizeof(path), "%s/egress.jsonl", dir);
	unlink(path);
	assert_string_equal(view_audit(100), "[]");
}

static void test_the_policy_line_is_appended_whole(void **state)
{
	char path[128], line[1024];
	struct stat st;
	FILE *f;

	snprintf(path, sizeof(path), "%s/egress.jsonl", dir);
	unlink(path);
	snprintf(sb.egress_json, sizeof(sb.egress_json),
		 "{\"mode\":\"report\",\"allow\":[\"a.com:443\"]}");
	egress_audit_policy(&sb, "api");
	sb.egress_json[0] = '\0';
	egress_audit_policy(&sb, "create");
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	/* the fields, whichever writer (this stand-in or the relay's) put them in which order */
	assert_non_null(strstr(line, "\"sandbox\":\"s1\""));
	assert_non_null(strstr(line, "\"kind\":\"policy\""));
	assert_non_null(strstr(line, "\"decision\":\"set\""));
	assert_non_null(strstr(line, "\"reason\":\"api\""));
	assert_non_null(strstr(line, "\"mode\":\"report\""));
	assert_non_null(fgets(line, sizeof(line), f));
	assert_non_null(strstr(line, "\"reason\":\"create\""));
	assert_non_null(strstr(line, "\"mode\":\"off\""));
	assert_null(fgets(line, sizeof(line), f));
	fclose(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_the_policy_is_copied_as_an_object),
		cmocka_unit_test(test_the_last_lines_oldest_first),
		cmocka_unit_test(test_a_long_file_is_read_from_its_tail),
		cmocka_unit_test(test_no_file_is_an_empty_list),
		cmocka_unit_test(test_the_policy_line_is_appended_whole),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
