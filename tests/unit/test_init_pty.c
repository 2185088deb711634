/* test_init_pty.c: a tty command's pseudo-terminal (src/init/pty.c): the size it opens with
 * (0: 24 x 80), the slave the opener's with the master's descriptors close-on-exec, a resize,
 * the EOF key typed once, the foreground group read back. Skips where /dev/ptmx cannot open. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>
#include <cmocka.h>

#include "init/cmdtab.h"

static int open_or_skip(uint32_t rows, uint32_t cols, int *m, int *s)
{
	int r = cmd_pty_open(rows, cols, m, s);

	if (r == -ENOENT || r == -EACCES || r == -ENXIO || r == -EIO) {
		skip();
		return -1;
	}
	assert_int_equal(r, 0);
	return 0;
}

static void test_pty_opens_with_its_size_and_the_openers_slave(void **state)
{
	struct winsize ws;
	struct stat st;
	int m, s;

	if (open_or_skip(0, 0, &m, &s) != 0)
		return;
	assert_int_equal(ioctl(s, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 24);
	assert_int_equal(ws.ws_col, 80);
	assert_int_equal(fstat(s, &st), 0);
	assert_true(S_ISCHR(st.st_mode));
	assert_int_equal(st.st_uid, geteuid()); /* the init's control uid, never the workload's */
	assert_true(fcntl(m, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(s, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(m, F_GETFL) & O_NONBLOCK);
	assert_int_equal(cmd_pty_resize(m, 33, 111), 0);
	assert_int_equal(ioctl(s, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 33);
	assert_int_equal(ws.ws_col, 111);
	assert_int_equal(cmd_pty_resize(m, 70000, 5), 0); /* out of range: the default */
	assert_int_equal(ioctl(s, TIOCGWINSZ, &ws), 0);
	assert_int_equal(ws.ws_row, 24);
	assert_int_equal(ws.ws_col, 5);
	close(s);
	close(m);
}

static void test_pty_eof_types_the_terminals_eof_key_once(void **state)
{
	struct termios t;
	char buf[8];
	ssize_t n;
	int m, s;

	if (open_or_skip(10, 20, &m, &s) != 0)
		return;
	/* canonical: ^D on an empty line is the end of input (a read of 0) */
	assert_int_equal(write(m, "hi\n", 3), 3);
	cmd_pty_eof(m);
	assert_int_equal(read(s, buf, sizeof(buf)), 3);
	assert_int_equal(read(s, buf, sizeof(buf)), 0);
	/* raw: the key is the terminal's own (stty eof), one byte */
	assert_int_equal(tcgetattr(s, &t), 0);
	t.c_lflag &= ~(tcflag_t)(ICANON | ISIG);
	t.c_cc[VEOF] = 0x05;
	t.c_cc[VMIN] = 1;
	t.c_cc[VTIME] = 0;
	assert_int_equal(tcsetattr(s, TCSANOW, &t), 0);
	cmd_pty_eof(m);
	n = read(s, buf, sizeof(buf));
	assert_int_equal(n, 1);
	assert_int_equal(buf[0], 0x05);
	assert_int_equal(cmd_pty_foreground(m), 0); /* no session has it as its terminal */
	close(s);
	close(m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pty_opens_with_its_size_and_the_openers_slave),
		cmocka_unit_test(test_pty_eof_types_the_terminals_eof_key_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
