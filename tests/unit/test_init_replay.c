/* test_init_replay.c: the init's replay ring (src/init/replay.c): what was sent and not yet
 * acknowledged comes back after a rewind, whole, in order, across the ring's wrap. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "init/init.h"

static uint8_t ring[LIMIT_INIT_REPLAY_BYTES] __attribute__((aligned(32)));
static uint8_t data[16384];

static int fill(void **state)
{
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i % 4096 * 7 + i % 4096 / 256);
	return 0;
}

static struct init_out chunk(int stderr_stream, const char *id, size_t off, size_t len)
{
	struct init_out o = { 0 };

	o.kind = stderr_stream ? INIT_OUT_STDERR : INIT_OUT_STDOUT;
	o.command_id = id;
	o.data = data + off % 4096;  /* data[] repeats with period 4096 */
	o.len = len;
	return o;
}

static void test_init_replay_rewind_gives_back_every_unacked_record_in_order(void **state)
{
	struct init_replay r;
	struct init_out o, got;
	uint64_t off, next[2] = { 0, 0 };

	init_replay_setup(&r, ring);
	o = chunk(0, "cmd-a", 0, 100);
	assert_int_equal(init_replay_push(&r, &o, 0), 0);
	o = chunk(1, "cmd-b", 7, 50);
	assert_int_equal(init_replay_push(&r, &o, 0), 0);
	o = (struct init_out){ .kind = INIT_OUT_RESULT, .command_id = "cmd-a", .exit_code = 3,
			       .error = "it failed", .duration_ms = 42, .duration_us = 42123 };
	assert_int_equal(init_replay_push(&r, &o, 1), 0);
	o = chunk(0, "cmd-c", 100, 10);
	assert_int_equal(init_replay_push(&r, &o, 100), 0);
	/* pushed records count as sent: nothing to send until a rewind */
	assert_int_equal(init_replay_next(&r, &got, &off), 0);

	/* stdout acked to 100: the first record goes, the stderr one stops the rest */
	next[0] = 100;
	init_replay_ack(&r, next, 0);
	init_replay_rewind(&r);
	assert_int_equal(init_replay_next(&r, &got, &off), 1);
	assert_int_equal(got.kind, INIT_OUT_STDERR);
	assert_string_equal(got.command_id, "cmd-b");
	assert_int_equal(off, 0);
	assert_int_equal(got.len, 50);
	assert_memory_equal(got.data, data + 7, 50);
	init_replay_sent(&r);
	assert_int_equal(init_replay_next(&r, &got, &off), 1);
	assert_int_equal(got.kind, INIT_OUT_RESULT);
	assert_string_equal(got.command_id, "cmd-a");
	assert_string_equal(got.error, "it failed");
	assert_int_equal(got.exit_code, 3);
	assert_int_equal(got.duration_ms, 42);
	assert_int_equal(got.duration_us, 42123);
	assert_int_equal(off, 1);
	init_replay_sent(&r);
	assert_int_equal(init_replay_next(&r, &got, &off), 1);
	assert_string_equal(got.command_id, "cmd-c");
	assert_int_equal(off, 100);
	init_replay_sent(&r);
	assert_int_equal(init_replay_next(&r, &got, &off), 0);

	/* a chunk only partly covered stays whole */
	next[0] = 105;
	next[1] = 50;
	init_replay_ack(&r, next, 1);
	init_replay_rewind(&r);
	assert_int_equal(init_replay_next(&r, &got, &off), 1);
	assert_string_equal(got.command_id, "cmd-c");
	assert_int_equal(got.len, 10);
	next[0] = 110;
	init_replay_ack(&r, next, 1);
	assert_int_equal(init_replay_next(&r, &got, &off), 0);
	assert_int_equal(r.head, r.tail);
}

static void test_init_replay_refuses_when_full_and_takes_again_after_an_ack(void **state)
{
	struct init_replay r;
	struct init_out o;
	uint64_t off = 0, next[2] = { 0, 0 };
	int pushed = 0;

	init_replay_setup(&r, ring);
	for (;;) {
		o = chunk(0, "cmd", off, 8192);
		if (!init_replay_room(&r, &o)) {
			assert_int_equal(init_replay_push(&r, &o, off), -EAGAIN);
			break;
		}
		assert_int_equal(init_replay_push(&r, &o, off), 0);
		off += 8192;
		pushed++;
	}
	/* nearly the whole ring holds data: headers are small */
	assert_true((size_t)pushed * 8192 > LIMIT_INIT_REPLAY_BYTES * 9 / 10);
	next[0] = 8192;
	init_replay_ack(&r, next, 0);
	o = chunk(0, "cmd", off, 8192);
	assert_true(init_replay_room(&r, &o));
	assert_int_equal(init_replay_push(&r, &o, off), 0);
}

/* Many rounds of odd-sized records across the ring's end, acked in uneven steps: after every
 * few pushes a rewind gives back exactly the records past the ack, contiguous, with their
 * bytes, ending where the sending ended. */
static void test_init_replay_wraps_without_losing_or_reordering(void **state)
{
	struct init_replay r;
	struct init_out o, got;
	uint64_t off = 0, acked = 0, at, pos, next[2] = { 0, 0 };
	uint32_t rnd = 12345;
	int rewinds = 0;

	init_replay_setup(&r, ring);
	for (int round = 0; round < 3000; round++) {
		size_t len;

		rnd = rnd * 1103515245u + 12345u;
		len = 1 + (rnd >> 8) % 9000;
		o = chunk(0, "a-command-id-of-some-length", off, len);
		while (!init_replay_room(&r, &o)) {
			acked += (off - acked) / 2 + 1; /* about half of what is held */
			next[0] = acked;
			init_replay_ack(&r, next, 0);
		}
		assert_int_equal(init_replay_push(&r, &o, off), 0);
		off += len;
		if (round % 97 != 0)
			continue;
		init_replay_rewind(&r);
		rewinds++;
		pos = UINT64_MAX;
		while (init_replay_next(&r, &got, &at)) {
			if (pos == UINT64_MAX) /* the oldest kept record holds the first unacked byte */
				assert_true(at <= acked && acked < at + got.len);
			else
				assert_int_equal(at, pos);
			assert_memory_equal(got.data, data + at % 4096, got.len);
			pos = at + got.len;
			init_replay_sent(&r);
		}
		assert_int_equal(pos, off);
	}
	/* the ring went round many times */
	assert_true(off > 10ull * LIMIT_INIT_REPLAY_BYTES);
	assert_int_equal(rewinds, 31);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_replay_rewind_gives_back_every_unacked_record_in_order),
		cmocka_unit_test(test_init_replay_refuses_when_full_and_takes_again_after_an_ack),
		cmocka_unit_test(test_init_replay_wraps_without_losing_or_reordering),
	};

	return cmocka_run_group_tests(tests, fill, NULL);
}
