/* cli_tty.c: the caller's terminal for `agentic exec -t`: raw mode, put back on every way
 * out (a return, exit(), SIGINT, SIGTERM, SIGHUP, SIGQUIT), and the window size and
 * its changes (SIGWINCH). Calls only libc. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli_internal.h"

static struct termios saved;
static volatile sig_atomic_t raw_on, winched;
static int tty_fd = -1;

void cli_tty_restore(void)
{
	if (raw_on) {
		tcsetattr(tty_fd, TCSAFLUSH, &saved);
		raw_on = 0;
	}
}

/* A signal that ends this process: the terminal first, then the signal's own end. */
static void on_fatal(int sig)
{
	cli_tty_restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

static void on_winch(int sig)
{
	(void)sig;
	winched = 1;
}

int cli_tty_raw(int fd)
{
	static const int fatal[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT };
	struct sigaction sa = { .sa_handler = on_fatal };
	struct termios t;

	if (tcgetattr(fd, &saved) != 0)
		return -errno;
	tty_fd = fd;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < ARRAY_LEN(fatal); i++)
		sigaction(fatal[i], &sa, NULL);
	/* no SA_RESTART: the exec loop's poll returns and sends the new size */
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, NULL);
	atexit(cli_tty_restore);
	t = saved;
	cfmakeraw(&t);
	raw_on = 1;
	if (tcsetattr(fd, TCSAFLUSH, &t) != 0) {
		raw_on = 0;
		return -errno;
	}
	return 0;
}

bool cli_tty_winched(void)
{
	bool w = winched;

	winched = 0;
	return w;
}

int cli_tty_size(uint16_t *rows, uint16_t *cols)
{
	struct winsize ws;

	if (tty_fd < 0 || ioctl(tty_fd, TIOCGWINSZ, &ws) != 0)
		return -1;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return 0;
}
