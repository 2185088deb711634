/* rename_swap.c: a hostile workload's half of a mount race: exchanges two names in one
 * directory with renameat2(RENAME_EXCHANGE), over and over, so that a path checked by
 * agenticd names something else by the time the engine mounts it. Static, so it runs in any
 * sandbox image (busybox has no renameat2).
 *
 *   rename_swap DIR A B SECONDS [PAUSE_US]
 *
 * Prints `swapping` once the first exchange worked, then swaps every PAUSE_US microseconds
 * (default 0: as fast as it can) until SECONDS have passed or SIGTERM came, and prints
 * `swaps=N`, leaving the names as they were at the start. Exit 0, 1 when an exchange failed. */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static int exchange(int dfd, const char *a, const char *b)
{
	return (int)syscall(SYS_renameat2, dfd, a, dfd, b, RENAME_EXCHANGE);
}

int main(int argc, char **argv)
{
	unsigned long long swaps = 0;
	useconds_t pause_us;
	time_t end;
	int dfd;

	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: rename_swap DIR A B SECONDS [PAUSE_US]\n");
		return 2;
	}
	dfd = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || exchange(dfd, argv[2], argv[3]) != 0) {
		fprintf(stderr, "rename_swap: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	swaps++;
	signal(SIGTERM, on_term);
	printf("swapping\n");
	fflush(stdout);
	end = time(NULL) + atoi(argv[4]);
	pause_us = argc == 6 ? (useconds_t)atoi(argv[5]) : 0;
	while ((!stop && time(NULL) < end) || swaps % 2) {
		if (pause_us)
			usleep(pause_us);
		if (exchange(dfd, argv[2], argv[3]) != 0) {
			fprintf(stderr, "rename_swap: exchange: %s\n", strerror(errno));
			return 1;
		}
		swaps++;
	}
	printf("swaps=%llu\n", swaps);
	return 0;
}
