/* test_base.c: buffers, arenas, pools, integer parsing, big-endian codecs, logfmt quoting and
 * the filter that forbids passing descriptors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <cmocka.h>

#include "base/base.h"
#include "base/be.h"
#include "docker/docker.h"
#include "h2/h2.h"
#include "h2/hpack.h"
#include "http/http.h"
#include "prune/prune.h"

static void test_buf_append_refuses_overflow_and_keeps_contents(void **state)
{
	uint8_t storage[8];
	struct buf b;

	buf_init(&b, storage, sizeof(storage));
	assert_int_equal(buf_append(&b, "abcde", 5), 0);
	assert_int_equal(buf_append(&b, "fghi", 4), ERR_LIMIT);
	assert_int_equal(b.len, 5);
	assert_memory_equal(b.data, "abcde", 5);
	buf_consume(&b, 2);
	assert_int_equal(b.len, 3);
	assert_memory_equal(b.data, "cde", 3);
	/* printf needs one spare byte for its NUL, which len does not count */
	assert_int_equal(buf_printf(&b, "%d", 12345), ERR_LIMIT);
	assert_int_equal(b.len, 3);
	assert_int_equal(buf_printf(&b, "%d", 1234), 0);
	assert_int_equal(b.len, 7);
	assert_memory_equal(b.data, "cde1234", 8);
}

static void test_arena_aligns_and_refuses_when_full(void **state)
{
	_Alignas(64) uint8_t storage[64];
	struct arena a;
	uint8_t *p, *q;

	arena_init(&a, storage, sizeof(storage));
	p = arena_alloc(&a, 3, 1);
	q = arena_alloc(&a, 8, 16);
	assert_non_null(p);
	assert_non_null(q);
	assert_int_equal((uintptr_t)q % 16, 0);
	assert_null(arena_alloc(&a, 64, 1));
	arena_reset(&a);
	assert_non_null(arena_alloc(&a, 64, 1));
	assert_null(arena_alloc(&a, 1, 1));
}

static void test_pool_hands_out_each_slot_once_and_reuses_freed(void **state)
{
	uint64_t storage[4];
	uint32_t links[4];
	struct pool p;
	void *s[4];

	pool_init(&p, storage, links, sizeof(uint64_t), 4);
	for (int i = 0; i < 4; i++) {
		s[i] = pool_get(&p);
		assert_non_null(s[i]);
		for (int j = 0; j < i; j++)
			assert_ptr_not_equal(s[i], s[j]);
	}
	assert_null(pool_get(&p));
	pool_put(&p, s[2]);
	assert_ptr_equal(pool_get(&p), s[2]);
	assert_int_equal(pool_index(&p, s[3]), 3);
	assert_int_equal(p.used, 4);
}

static void test_parse_u64_rejects_junk_and_overflow(void **state)
{
	uint64_t v = 99;

	assert_int_equal(parse_u64("0", 10, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_u64("18446744073709551615", UINT64_MAX, &v), 0);
	assert_true(v == UINT64_MAX);
	assert_int_equal(parse_u64("18446744073709551616", UINT64_MAX, &v), -ERANGE);
	assert_int_equal(parse_u64("11", 10, &v), -ERANGE);
	assert_int_equal(parse_u64("", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("-1", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("1 ", 10, &v), -EINVAL);
	assert_int_equal(parse_u64("+1", 10, &v), -EINVAL);
}

static void test_log_quote_escapes_what_logfmt_needs(void **state)
{
	char out[64];

	assert_string_equal(log_quote(out, sizeof(out), "plain"), "\"plain\"");
	assert_string_equal(log_quote(out, sizeof(out), ""), "\"\"");
	assert_string_equal(log_quote(out, sizeof(out), NULL), "\"\"");
	assert_string_equal(log_quote(out, sizeof(out), "a b"), "\"a b\"");
	assert_string_equal(log_quote(out, sizeof(out), "k=\"v\"\n"), "\"k=\\\"v\\\"\\x0a\"");
	assert_string_equal(log_quote(out, 8, "0123456789 abc"), "\"01234\"");
	assert_string_equal(log_quote(out, 8, "0123\\"), "\"0123\"");
	assert_string_equal(log_quote(out, 3, "abc"), "\"\"");
}

/* A value from outside can neither forge a key nor end the line: every log_q value is one
 * quoted logfmt value, whatever it holds, cut at LIMIT_LOG_VALUE_BYTES. */
static void test_log_q_always_quotes_outside_values(void **state)
{
	char big[LIMIT_LOG_VALUE_BYTES * 2];
	const char *q;

	assert_string_equal(log_q("x1.2"), "\"x1.2\"");
	assert_string_equal(log_q("sbx-1"), "\"sbx-1\"");
	assert_string_equal(log_q("1 exit_code=0"), "\"1 exit_code=0\"");
	assert_string_equal(log_q("a\" forged=1"), "\"a\\\" forged=1\"");
	assert_string_equal(log_q("a\nts=x level=error"), "\"a\\x0ats=x level=error\"");
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	q = log_q(big);
	assert_int_equal(strlen(q), LIMIT_LOG_VALUE_BYTES - 1);
	assert_int_equal(q[0], '"');
	assert_int_equal(q[LIMIT_LOG_VALUE_BYTES - 2], '"');
}

/* Each width writes the most significant byte first, touches only its own bytes, needs no
 * alignment and reads back what it wrote, high bits included. */
static void test_be_puts_network_order_and_gets_it_back_unaligned(void **state)
{
	uint8_t b[10];

	memset(b, 0xaa, sizeof(b));
	be16_put(b + 1, 0x1234);
	assert_memory_equal(b, "\xaa\x12\x34\xaa", 4);
	assert_int_equal(be16_get(b + 1), 0x1234);
	memset(b, 0xaa, sizeof(b));
	be24_put(b + 1, 0xfedcba);
	assert_memory_equal(b, "\xaa\xfe\xdc\xba\xaa", 5);
	assert_int_equal(be24_get(b + 1), 0xfedcba);
	memset(b, 0xaa, sizeof(b));
	be32_put(b + 1, 0x80000001u);
	assert_memory_equal(b, "\xaa\x80\x00\x00\x01\xaa", 6);
	assert_int_equal(be32_get(b + 1), 0x80000001u);
	memset(b, 0xaa, sizeof(b));
	be64_put(b + 1, 0x0102030405060708ull);
	assert_memory_equal(b, "\xaa\x01\x02\x03\x04\x05\x06\x07\x08\xaa", 10);
	assert_true(be64_get(b + 1) == 0x0102030405060708ull);
	be64_put(b, UINT64_MAX);
	assert_true(be64_get(b) == UINT64_MAX);
	assert_int_equal(be32_get(b), UINT32_MAX);
	assert_int_equal(be16_get(b), 0xffff);
	/* be24_put keeps the low 24 bits */
	be24_put(b, 0x12345678u);
	assert_int_equal(be24_get(b), 0x345678);
}

static void test_err_str_covers_module_and_errno_codes(void **state)
{
	assert_string_equal(err_str(0), "success");
	assert_string_equal(err_str(ERR_LIMIT), "a fixed limit was reached");
	assert_string_equal(err_str(-ENOENT), strerror(ENOENT));
	assert_string_equal(err_str(ERR_BASE), "unknown error");
	assert_string_equal(err_str(ERR_BASE - 99), "unknown error");
	assert_string_equal(err_str(ERR_RANGE_END - 1), "unknown error");
	/* a Docker failure is told as one, whatever module sits next to it */
	assert_string_equal(err_str(DOCKER_ERR_BUSY), "all connections to the Docker engine are in use");
	assert_string_equal(err_str(HTTP_ERR_HEAD_TOO_BIG), "HTTP head over its size limit");
	assert_string_equal(err_str(PRUNE_OUTSIDE), "outside the agentshare root");
}

/* Every module code, with the range its header is meant to draw it from. */
static const struct {
	const char *name;
	int code, range;
} module_codes[] = {
#define CODE(name, range) { #name, name, range }
	CODE(ERR_LIMIT, ERR_RANGE_BASE),
	CODE(ERR_PARSE, ERR_RANGE_BASE),
	CODE(ERR_STATE, ERR_RANGE_BASE),
	CODE(HTTP_ERR_HEAD_TOO_BIG, ERR_RANGE_HTTP),
	CODE(HTTP_ERR_BODY_TOO_BIG, ERR_RANGE_HTTP),
	CODE(HTTP_ERR_TRUNCATED, ERR_RANGE_HTTP),
	CODE(HTTP_ERR_CONNECT, ERR_RANGE_HTTP),
	CODE(HPACK_ERR_COMPRESSION, ERR_RANGE_HPACK),
	CODE(HPACK_ERR_TOO_BIG, ERR_RANGE_HPACK),
	CODE(H2_ERR_CONN, ERR_RANGE_H2),
	CODE(H2_ERR_PREFACE, ERR_RANGE_H2),
	CODE(DOCKER_ERR_API, ERR_RANGE_DOCKER),
	CODE(DOCKER_ERR_VERSION, ERR_RANGE_DOCKER),
	CODE(DOCKER_ERR_BUSY, ERR_RANGE_DOCKER),
	CODE(DOCKER_ERR_REPLY, ERR_RANGE_DOCKER),
	CODE(DOCKER_ERR_TOO_BIG, ERR_RANGE_DOCKER),
	CODE(PRUNE_OUTSIDE, ERR_RANGE_PRUNE),
	CODE(PRUNE_MOUNT, ERR_RANGE_PRUNE),
	CODE(PRUNE_MOVED, ERR_RANGE_PRUNE),
	{ "ANSWER_OUT_FAILED", ERR_RANGE_CLI - 1, ERR_RANGE_CLI }, /* private to cli.c */
#undef CODE
};

/* Each code lies inside its module's range, no two are equal, each has its own text, and
 * err.c's table has no text for a code no module defines. */
static void test_err_codes_sit_in_their_ranges_unique_each_with_a_text(void **state)
{
	size_t n = ARRAY_LEN(module_codes), known = 0;

	for (size_t i = 0; i < n; i++) {
		int c = module_codes[i].code, r = module_codes[i].range;

		if (!(c < r && c > r - ERR_RANGE_SPAN))
			fail_msg("%s (%d) is outside its range %d", module_codes[i].name, c, r);
		if (strcmp(err_str(c), "unknown error") == 0)
			fail_msg("%s (%d) has no text", module_codes[i].name, c);
		for (size_t j = 0; j < i; j++) {
			if (module_codes[j].code == c)
				fail_msg("%s == %s", module_codes[j].name, module_codes[i].name);
			if (strcmp(err_str(module_codes[j].code), err_str(c)) == 0)
				fail_msg("%s and %s share a text", module_codes[j].name,
					 module_codes[i].name);
		}
	}
	for (int c = ERR_BASE; c > ERR_RANGE_END; c--)
		if (strcmp(err_str(c), "unknown error") != 0)
			known++;
	assert_int_equal(known, n);
}

static void test_uuid7_has_version_variant_and_time_order(void **state)
{
	char a[37], b[37], hex[17];

	assert_int_equal(uuid7(a), 0);
	assert_int_equal(strlen(a), 36);
	assert_int_equal(a[8], '-');
	assert_int_equal(a[14], '7');
	assert_non_null(strchr("89ab", a[19]));
	assert_int_equal(uuid7(b), 0);
	assert_string_not_equal(a, b);
	/* the first 48 bits are milliseconds: a later id never sorts before an earlier one */
	assert_true(strncmp(a, b, 13) <= 0);
	assert_int_equal(random_hex(hex, 16), 0);
	assert_int_equal(strlen(hex), 16);
	assert_int_equal(strspn(hex, "0123456789abcdef"), 16);
	assert_int_equal(random_hex(hex, 65), ERR_LIMIT);
}

/* fd_read_all: a file one byte under the buffer is read whole; one that fills the buffer is
 * ERR_LIMIT (too large to know it ended); a read that fails is its -errno. */
static void test_fd_read_all_reads_whole_files_and_refuses_full_buffers(void **state)
{
	char path[] = "/tmp/agentic-test-fd-XXXXXX", buf[8];
	size_t len = 99;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "1234567", 7), 7);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(fd_read_all(fd, buf, sizeof(buf), &len), 0);
	assert_int_equal(len, 7);
	assert_memory_equal(buf, "1234567", 7);
	assert_int_equal(write(fd, "8", 1), 1);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(fd_read_all(fd, buf, sizeof(buf), &len), ERR_LIMIT);
	assert_int_equal(len, 8);
	close(fd);
	unlink(path);
	fd = open("/tmp", O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(fd_read_all(fd, buf, sizeof(buf), &len), -EISDIR);
	close(fd);
}

/* sendmsg of one message byte carrying fd: what it returned (-1 with errno) */
static ssize_t send_one_fd(int sock, int fd)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm = { 0 };
	struct iovec iov = { .iov_base = "m", .iov_len = 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);

	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(sock, &mh, MSG_NOSIGNAL);
}

static void test_fd_forbid_passing_refuses_descriptors_not_messages(void **state)
{
	int sv[2], st = 0;
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	/* the control: without the filter a descriptor goes */
	assert_int_equal(send_one_fd(sv[0], 0), 1);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int code = 0;

		if (fd_forbid_passing() != 0)
			_exit(10);
		if (send(sv[0], "p", 1, MSG_NOSIGNAL) != 1)
			code |= 1; /* a plain message still goes */
		errno = 0;
		if (send_one_fd(sv[0], 0) != -1 || errno != EPERM)
			code |= 2;
		_exit(code);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	close(sv[0]);
	close(sv[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_buf_append_refuses_overflow_and_keeps_contents),
		cmocka_unit_test(test_arena_aligns_and_refuses_when_full),
		cmocka_unit_test(test_pool_hands_out_each_slot_once_and_reuses_freed),
		cmocka_unit_test(test_parse_u64_rejects_junk_and_overflow),
		cmocka_unit_test(test_log_quote_escapes_what_logfmt_needs),
		cmocka_unit_test(test_log_q_always_quotes_outside_values),
		cmocka_unit_test(test_be_puts_network_order_and_gets_it_back_unaligned),
		cmocka_unit_test(test_err_str_covers_module_and_errno_codes),
		cmocka_unit_test(test_err_codes_sit_in_their_ranges_unique_each_with_a_text),
		cmocka_unit_test(test_uuid7_has_version_variant_and_time_order),
		cmocka_unit_test(test_fd_read_all_reads_whole_files_and_refuses_full_buffers),
		cmocka_unit_test(test_fd_forbid_passing_refuses_descriptors_not_messages),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
