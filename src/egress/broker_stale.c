/* broker_stale.c: at start, the workers an earlier agenticd left, killed (egress_stale_kill). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "egress/broker_slot.h"

#define STALE_KILL_MS 5000             /* for every leftover worker to be gone, at start */

/* The real and effective uid and the parent of process pid (its /proc status): 0, or -1. */
static int proc_ids(long pid, unsigned long *ruid, unsigned long *euid, long *ppid, bool *zombie)
{
	char path[64], buf[4096];
	const char *u, *pp, *st;

	snprintf(path, sizeof(path), "/proc/%ld/status", pid);
	if (file_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	u = strstr(buf, "\nUid:");
	pp = strstr(buf, "\nPPid:");
	st = strstr(buf, "\nState:");
	if (!u || !pp || !st || sscanf(u, "\nUid: %lu %lu", ruid, euid) != 2 ||
	    sscanf(pp, "\nPPid: %ld", ppid) != 1)
		return -1;
	*zombie = st[7 + strspn(st + 7, " \t")] == 'Z';
	return 0;
}

/* Is pid a running agenticd (root's)? Its workers are its own. */
static bool proc_is_agenticd(long pid)
{
	char path[64], buf[256];
	const char *base;
	unsigned long ruid, euid;
	long ppid;
	bool zombie;
	ssize_t n;
	int fd;

	if (pid <= 1 || proc_ids(pid, &ruid, &euid, &ppid, &zombie) != 0 || euid != 0 || zombie)
		return false;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	/* `agenticd ...` through its applet link (the unit's way) or `agentic agenticd ...` */
	base = strrchr(buf, '/');
	base = base ? base + 1 : buf;
	return strcmp(base, "agenticd") == 0 ||
	       ((size_t)n > strlen(buf) + 1 && strcmp(buf + strlen(buf) + 1, "agenticd") == 0);
}

/* One pass over /proc: every live process of the egress uids whose parent is no agenticd (a
 * worker of a killed one, reparented) is sent SIGKILL, through a pidfd opened before its ids
 * are read again (so the pid cannot have been reused between). The number still there, the
 * last one's pid in *left. logged: a pid killed before (its line written once). */
static int stale_pass(uint32_t lo, uint32_t hi, long *left, long *logged)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10), ppid;
		unsigned long ruid, euid;
		bool zombie;
		int pfd;

		if (*end || pid <= 1 || proc_ids(pid, &ruid, &euid, &ppid, &zombie) != 0 || zombie ||
		    ((ruid < lo || ruid > hi) && (euid < lo || euid > hi)) ||
		    proc_is_agenticd(ppid) || (pfd = (int)syscall(SYS_pidfd_open, pid, 0)) < 0)
			continue;
		if (proc_ids(pid, &ruid, &euid, &ppid, &zombie) == 0 && !zombie &&
		    syscall(SYS_pidfd_send_signal, pfd, SIGKILL, NULL, 0) == 0) {
			if (*logged != pid)
				log_warn("egress worker of an earlier agenticd killed",
					 "pid=%ld uid=%lu", pid, ruid);
			*logged = pid;
			*left = pid;
			n++;
		}
		close(pfd);
	}
	closedir(d);
	return n;
}

int egress_stale_kill(const struct config *c, char *err, size_t cap)
{
	uint32_t hi = c->egress_uid, lo = c->egress_uid - (c->egress_max_connections - 1);
	int64_t deadline = clock_mono_ms() + STALE_KILL_MS;
	long left = 0, logged = 0;

	for (;;) {
		int n = stale_pass(lo, hi, &left, &logged);

		if (n == 0)
			return 0;
		if (n < 0) {
			snprintf(err, cap, "cannot read /proc for workers of an earlier agenticd: %s",
				 strerror(errno));
			return -1;
		}
		if (clock_mono_ms() >= deadline) {
			snprintf(err, cap, "process %ld of the egress uids (%u..%u) outlived SIGKILL "
				 "for %d ms: its uid is not given to a worker", left, lo, hi,
				 STALE_KILL_MS);
			return -1;
		}
		nanosleep(&(struct timespec){ 0, 20 * 1000 * 1000 }, NULL);
	}
}
