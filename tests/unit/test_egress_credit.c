/* test_egress_credit.c: agenticd's credit bookkeeping of an Egress call (docs/EGRESS.md "The
 * wire"): what the init may have in flight up, when the consumed count is due, how much may
 * be read from the worker for the init, the init's consumed counts checked; the per-sandbox
 * token bucket of rate_per_minute. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mgmt/egress.h"

static void test_egress_up_window_holds_at_most_a_window(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_true(egress_credit_up_fits(&c, EGRESS_CHUNK));
	/* four chunks held, none written: the fifth would pass the window */
	c.up_in = c.up_len = 4 * EGRESS_CHUNK;
	assert_true(egress_credit_up_fits(&c, EGRESS_WINDOW - 4 * EGRESS_CHUNK));
	assert_false(egress_credit_up_fits(&c, EGRESS_WINDOW - 4 * EGRESS_CHUNK + 1));
	/* written to the worker: the window is open again, whatever was reported */
	c.up_consumed = c.up_in;
	c.up_len = 0;
	assert_true(egress_credit_up_fits(&c, EGRESS_CHUNK));
	assert_true(egress_credit_up_fits(&c, EGRESS_WINDOW));
	assert_false(egress_credit_up_fits(&c, EGRESS_WINDOW + 1));
}

static void test_egress_consumed_is_due_at_half_a_window(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_false(egress_credit_report_due(&c));
	c.up_consumed = EGRESS_WINDOW / 2 - 1;
	assert_false(egress_credit_report_due(&c));
	c.up_consumed++;
	assert_true(egress_credit_report_due(&c));
	c.up_reported = c.up_consumed;
	assert_false(egress_credit_report_due(&c));
}

static void test_egress_down_reads_keep_to_the_inits_credit(void **state)
{
	struct egress_credit c = { 0 };

	(void)state;
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
	c.down_sent = EGRESS_WINDOW - 100;
	assert_int_equal(egress_credit_down_room(&c), 100);
	c.down_sent = EGRESS_WINDOW;
	assert_int_equal(egress_credit_down_room(&c), 0);
	/* the init's consumed: within what was sent, never backwards */
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW / 2));
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW / 2 - 1));  /* older: nothing new */
	assert_true(egress_credit_down_ack(&c, 0));                      /* none carried */
	assert_false(egress_credit_down_ack(&c, EGRESS_WINDOW + 1));
	assert_int_equal(c.down_acked, EGRESS_WINDOW / 2);
	assert_true(egress_credit_down_ack(&c, EGRESS_WINDOW));
	assert_int_equal(egress_credit_down_room(&c), EGRESS_CHUNK);
}

/* rate_per_minute: a burst of rate, then one a minute / rate, never more than rate stored */
static void test_egress_bucket_bursts_then_refills_evenly(void **state)
{
	struct egress_bucket b = { 0 };
	int64_t t = 1000;

	(void)state;
	for (int i = 0; i < 6; i++)
		assert_true(egress_bucket_take(&b, 6, t));
	assert_false(egress_bucket_take(&b, 6, t));
	/* 6 a minute: one every 10 s */
	assert_false(egress_bucket_take(&b, 6, t + 9999));
	assert_true(egress_bucket_take(&b, 6, t + 10000));
	assert_false(egress_bucket_take(&b, 6, t + 10001));
	/* an hour idle fills it to 6, not 360 */
	t += 3600000;
	for (int i = 0; i < 6; i++)
		assert_true(egress_bucket_take(&b, 6, t));
	assert_false(egress_bucket_take(&b, 6, t));
	/* a clock that does not move (or goes back) adds nothing */
	assert_false(egress_bucket_take(&b, 6, t - 5000));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_egress_up_window_holds_at_most_a_window),
		cmocka_unit_test(test_egress_consumed_is_due_at_half_a_window),
		cmocka_unit_test(test_egress_down_reads_keep_to_the_inits_credit),
		cmocka_unit_test(test_egress_bucket_bursts_then_refills_evenly),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
