/* test_frame.c: the exec stream's frame codec (src/http/frame.c), shared by agenticd and the
 * CLI: heads written and read big-endian, and a stream of frames read the same whatever the
 * pieces it arrives in. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "http/frame.h"

static void test_head_is_type_three_zeros_and_a_big_endian_length(void **state)
{
	uint8_t h[FRAME_HEAD_BYTES];
	static const uint8_t want[] = { 2, 0, 0, 0, 0x01, 0x02, 0x03, 0x04 };

	frame_head_put(h, FRAME_STDERR, 0x01020304);
	assert_memory_equal(h, want, sizeof(want));
	assert_int_equal(frame_head_type(h), FRAME_STDERR);
	assert_int_equal(frame_head_len(h), 0x01020304);
	frame_head_put(h, FRAME_EXIT, 0xffffffffu);
	assert_int_equal(frame_head_len(h), 0xffffffffu);
}

/* out: type and payload of each frame, as "<type>:<payload>|" */
static size_t read_stream(const uint8_t *in, size_t len, size_t piece, char *out)
{
	struct frame_reader r;
	size_t o = 0;

	frame_reader_init(&r);
	for (size_t at = 0; at < len;) {
		size_t end = at + piece < len ? at + piece : len;

		while (at < end) {
			size_t n;

			if (!frame_reader_open(&r)) {
				at += frame_reader_head(&r, in + at, end - at);
				if (!frame_reader_open(&r))
					break;
				o += (size_t)sprintf(out + o, "%d:", frame_reader_type(&r));
				if (r.left == 0) {
					out[o++] = '|';
					frame_reader_take(&r, 0);
				}
				continue;
			}
			n = r.left < end - at ? r.left : end - at;
			memcpy(out + o, in + at, n);
			o += n;
			at += n;
			frame_reader_take(&r, (uint32_t)n);
			if (!frame_reader_open(&r))
				out[o++] = '|';
		}
	}
	out[o] = '\0';
	assert_false(frame_reader_open(&r));
	assert_int_equal(r.have, 0);
	return o;
}

static void test_reader_gives_the_same_frames_at_every_split(void **state)
{
	uint8_t s[64];
	size_t n = 0;
	char whole[128], split[128];

	frame_head_put(s + n, FRAME_STDOUT, 3);
	memcpy(s + n + 8, "abc", 3);
	n += 11;
	frame_head_put(s + n, FRAME_STDIN, 0);
	n += 8;
	frame_head_put(s + n, FRAME_EXIT, 2);
	memcpy(s + n + 8, "{}", 2);
	n += 10;
	read_stream(s, n, n, whole);
	assert_string_equal(whole, "1:abc|0:|3:{}|");
	for (size_t piece = 1; piece < n; piece++) {
		read_stream(s, n, piece, split);
		assert_string_equal(split, whole);
	}
}

static void test_head_bytes_are_not_taken_while_a_frame_is_open(void **state)
{
	struct frame_reader r;
	uint8_t h[FRAME_HEAD_BYTES];

	frame_head_put(h, FRAME_STDIN, 5);
	frame_reader_init(&r);
	assert_int_equal(frame_reader_head(&r, h, 3), 3);
	assert_false(frame_reader_open(&r));
	assert_int_equal(frame_reader_head(&r, h + 3, 5), 5);
	assert_true(frame_reader_open(&r));
	assert_int_equal(r.left, 5);
	assert_int_equal(frame_reader_head(&r, h, 8), 0);
	frame_reader_take(&r, 2);
	assert_true(frame_reader_open(&r));
	frame_reader_take(&r, 3);
	assert_false(frame_reader_open(&r));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head_is_type_three_zeros_and_a_big_endian_length),
		cmocka_unit_test(test_reader_gives_the_same_frames_at_every_split),
		cmocka_unit_test(test_head_bytes_are_not_taken_while_a_frame_is_open),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
