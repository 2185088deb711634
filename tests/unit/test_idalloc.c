/* test_idalloc.c: next-fit id allocation (control uids, subnets). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <cmocka.h>

#include "base/base.h"

static void test_idalloc_hands_out_each_id_once_then_refuses(void **state)
{
	uint64_t bits[3];
	struct idalloc a;
	uint32_t id, seen[130] = { 0 };

	idalloc_init(&a, bits, 200000, 130);
	for (int i = 0; i < 130; i++) {
		assert_int_equal(idalloc_take(&a, &id), 0);
		assert_in_range(id, 200000, 200129);
		assert_int_equal(seen[id - 200000], 0);
		seen[id - 200000] = 1;
	}
	assert_int_equal(idalloc_take(&a, &id), ERR_LIMIT);
}

static void test_idalloc_reuses_a_freed_id_as_late_as_possible(void **state)
{
	uint64_t bits[2];
	struct idalloc a;
	uint32_t id;

	idalloc_init(&a, bits, 10, 100);
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 10);
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 11);
	assert_int_equal(idalloc_free(&a, 10), 0);
	/* 10 is free, but next-fit goes on with 12 .. 109 first */
	for (uint32_t want = 12; want < 110; want++) {
		assert_int_equal(idalloc_take(&a, &id), 0);
		assert_int_equal(id, want);
	}
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 10);
	assert_int_equal(idalloc_take(&a, &id), ERR_LIMIT);
}

static void test_idalloc_mark_rebuilds_state_and_rejects_duplicates(void **state)
{
	uint64_t bits[1];
	struct idalloc a;
	uint32_t id;

	idalloc_init(&a, bits, 1000, 8);
	assert_int_equal(idalloc_mark(&a, 1003), 0);
	assert_int_equal(idalloc_mark(&a, 1003), -EEXIST);
	assert_int_equal(idalloc_mark(&a, 1008), -ERANGE);
	assert_int_equal(idalloc_mark(&a, 999), -ERANGE);
	assert_true(idalloc_taken(&a, 1003));
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 1004); /* continues after the newest id in use */
	assert_int_equal(idalloc_free(&a, 1005), -ENOENT);
	assert_int_equal(idalloc_free(&a, 1003), 0);
	assert_false(idalloc_taken(&a, 1003));
	assert_int_equal(a.used, 1);
}

static void test_idalloc_skips_full_words_and_wraps(void **state)
{
	uint64_t bits[4];
	struct idalloc a;
	uint32_t id;

	idalloc_init(&a, bits, 0, 200);
	for (uint32_t i = 0; i < 200; i++)
		if (i != 5 && i != 150)
			assert_int_equal(idalloc_mark(&a, i), 0);
	/* cursor sits after 199, so it wraps to 0 and finds 5 then 150 */
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 5);
	assert_int_equal(idalloc_take(&a, &id), 0);
	assert_int_equal(id, 150);
	assert_int_equal(idalloc_take(&a, &id), ERR_LIMIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_idalloc_hands_out_each_id_once_then_refuses),
		cmocka_unit_test(test_idalloc_reuses_a_freed_id_as_late_as_possible),
		cmocka_unit_test(test_idalloc_mark_rebuilds_state_and_rejects_duplicates),
		cmocka_unit_test(test_idalloc_skips_full_words_and_wraps),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
