/* pty.c: a tty command's pseudo-terminal (CommandRequest.tty; docs/SECURITY.md "Terminals"):
 * opened, resized, its EOF key typed, its foreground group read. Calls only libc; nothing in
 * cmd.c.
 *
 * The init opens /dev/ptmx as its control uid, so the slave /dev/pts/N the kernel makes is the
 * control uid's, with the devpts mount's mode and group (Docker's: mode 0620, gid 5 (tty); a
 * VM guest's init mounts the same). The workload uid 10001 is neither, and in no group at all
 * (priv_drop_to_workload), so no workload process can open any command's /dev/pts/N by its
 * name nor through /proc/<pid>/fd (a reopen checks the same mode): a command reaches its
 * terminal only through the descriptors it was started with and /dev/tty (its controlling
 * terminal, which the kernel hands to its own session alone). The slave's descriptor comes
 * from the master itself (TIOCGPTPEER), never from a path lookup a workload could race. The
 * master stays in the init, close-on-exec, and no supervisor keeps it (spawn.c closes every
 * descriptor above 3): the init is the control uid's and not dumpable, out of the workload's
 * ptrace and /proc/1/fd. */
#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include "init/cmdtab.h"

#ifndef TIOCGPTPEER
#define TIOCGPTPEER _IO('T', 0x41)
#endif

static void winsize_of(uint32_t rows, uint32_t cols, struct winsize *ws)
{
	ws->ws_row = (unsigned short)(rows && rows <= 0xffff ? rows : 24);
	ws->ws_col = (unsigned short)(cols && cols <= 0xffff ? cols : 80);
	ws->ws_xpixel = ws->ws_ypixel = 0;
}

int cmd_pty_open(uint32_t rows, uint32_t cols, int *master, int *slave)
{
	struct winsize ws;
	int m, s, unlock = 0, r;

	m = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
	if (m < 0)
		return -errno;
	winsize_of(rows, cols, &ws);
	if (ioctl(m, TIOCSPTLCK, &unlock) != 0 || ioctl(m, TIOCSWINSZ, &ws) != 0) {
		r = -errno;
		close(m);
		return r;
	}
	s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s < 0) {
		r = -errno;
		close(m);
		return r;
	}
	*master = m;
	*slave = s;
	return 0;
}

int cmd_pty_resize(int master, uint32_t rows, uint32_t cols)
{
	struct winsize ws;

	winsize_of(rows, cols, &ws);
	return ioctl(master, TIOCSWINSZ, &ws) == 0 ? 0 : -errno;
}

void cmd_pty_eof(int master)
{
	struct termios t;
	char eof = 4;

	if (tcgetattr(master, &t) == 0 && t.c_cc[VEOF] != _POSIX_VDISABLE)
		eof = (char)t.c_cc[VEOF];
	/* best effort: a full input queue drops it, as a key typed then would be */
	(void)!write(master, &eof, 1);
}

pid_t cmd_pty_foreground(int master)
{
	pid_t pg = 0;

	return ioctl(master, TIOCGPGRP, &pg) == 0 && pg > 0 ? pg : 0;
}
