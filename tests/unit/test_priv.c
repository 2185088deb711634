/* test_priv.c: reading /proc/<pid>/status and judging control and workload identities. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/base.h"
#include "init/priv.h"

static const char control_status[] =
	"Name:\tagentic-init\nUmask:\t0022\nState:\tS (sleeping)\nPid:\t1\n"
	"Uid:\t200123\t200123\t200123\t200123\nGid:\t200123\t200123\t200123\t200123\n"
	"FDSize:\t64\nGroups:\t\nCapInh:\t0000000000000000\nCapPrm:\t00000000000000c0\n"
	"CapEff:\t00000000000000c0\nCapBnd:\t00000000000000c0\nCapAmb:\t0000000000000000\n"
	"NoNewPrivs:\t1\nSeccomp:\t2\n";

static void test_priv_parses_a_control_status(void **state)
{
	struct priv_status st;

	assert_int_equal(priv_status_parse(control_status, &st), 0);
	assert_int_equal(st.uid[3], 200123);
	assert_int_equal(st.ngroups, 0);
	assert_true(st.cap_eff == 0xc0 && st.cap_bnd == 0xc0 && st.cap_amb == 0);
	assert_int_equal(st.no_new_privs, 1);
	assert_int_equal(st.seccomp, 2);
	assert_true(priv_is_control(&st, 200123));
	assert_false(priv_is_control(&st, 200124));
	assert_false(priv_is_workload(&st, 200123, 200123));
}

static void test_priv_rejects_any_deviation_from_the_control_identity(void **state)
{
	static const struct {
		const char *from, *to;
	} edits[] = {
		{ "CapEff:\t00000000000000c0", "CapEff:\t00000000000000c1" },
		{ "CapPrm:\t00000000000000c0", "CapPrm:\t00000000000000c8" },
		{ "CapInh:\t0000000000000000", "CapInh:\t0000000000000040" },
		{ "CapAmb:\t0000000000000000", "CapAmb:\t0000000000000080" },
		{ "NoNewPrivs:\t1", "NoNewPrivs:\t0" },
		{ "FDSize:\t64\nGroups:\t\n", "FDSize:\t6\nGroups:\t0\n" },
		{ "Gid:\t200123\t200123\t200123\t200123", "Gid:\t200123\t100123\t200123\t200123" },
		{ "Uid:\t200123\t200123\t200123\t200123", "Uid:\t200123\t200123\t100123\t200123" },
	};
	char text[1024];
	struct priv_status st;

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char *at;

		strcpy(text, control_status);
		at = strstr(text, edits[i].from);
		assert_non_null(at);
		assert_int_equal(strlen(edits[i].from), strlen(edits[i].to));
		memcpy(at, edits[i].to, strlen(edits[i].to));
		assert_int_equal(priv_status_parse(text, &st), 0);
		if (priv_is_control(&st, 200123))
			fail_msg("edit %zu (%s) still judged a control identity", i, edits[i].to);
	}
}

static void test_priv_judges_a_workload(void **state)
{
	const char *text =
		"Uid:\t10001\t10001\t10001\t10001\nGid:\t10001\t10001\t10001\t10001\nGroups:\n"
		"CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
		"CapBnd:\t00000000000000c0\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n";
	struct priv_status st;

	assert_int_equal(priv_status_parse(text, &st), 0);
	assert_true(priv_is_workload(&st, 10001, 10001));
	st.cap_prm = 0x40;
	assert_false(priv_is_workload(&st, 10001, 10001));
}

static void test_priv_status_missing_fields_is_an_error(void **state)
{
	struct priv_status st;

	assert_int_equal(priv_status_parse("Uid:\t1 1 1 1\n", &st), ERR_PARSE);
	assert_int_equal(priv_status_parse("", &st), ERR_PARSE);
	assert_int_equal(priv_status_parse("Uid:\tx\nGid:\t1 1 1 1\nGroups:\nCapInh:\t0\nCapPrm:\t0\n"
					   "CapEff:\t0\nCapBnd:\t0\nCapAmb:\t0\n", &st), ERR_PARSE);
}

static void test_priv_reads_its_own_status(void **state)
{
	struct priv_status st;

	assert_int_equal(priv_status_read(0, &st), 0);
	assert_int_equal(st.uid[0], (uint32_t)getuid());
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_priv_parses_a_control_status),
		cmocka_unit_test(test_priv_rejects_any_deviation_from_the_control_identity),
		cmocka_unit_test(test_priv_judges_a_workload),
		cmocka_unit_test(test_priv_status_missing_fields_is_an_error),
		cmocka_unit_test(test_priv_reads_its_own_status),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
