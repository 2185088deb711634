/* egress_confined.c: what a worker taken over could still do once it has confined itself
 * (src/egress/confine.c, the function the worker calls after its start packet), run as a
 * worker's uid by tests/security/test_egress_worker_confined:
 *
 *   egress_confined POLICY_JSON CA_FILE ALLOWED_PORT OTHER_PORT FILE [--none]
 *
 * Confines itself for POLICY_JSON (unless --none: the positive control), then tries a TCP
 * connect to 127.0.0.1:ALLOWED_PORT and to 127.0.0.1:OTHER_PORT, a TCP bind, and opening
 * FILE, /etc/hosts and CA_FILE for reading, and prints one `what=ok|ERRNO` a line. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress/confine.h"

static const char *word(int ok)
{
	return ok ? "ok" : errno == EACCES ? "EACCES" : errno == EPERM ? "EPERM" : strerror(errno);
}

static void try_connect(const char *what, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				  .sin_addr = { .s_addr = htonl(INADDR_LOOPBACK) } };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	printf("%s=%s\n", what, word(ok));
	if (fd >= 0)
		close(fd);
}

static void try_bind(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr = { .s_addr = htonl(INADDR_LOOPBACK) } };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

	printf("bind=%s\n", word(ok));
	if (fd >= 0)
		close(fd);
}

static void try_open(const char *what, const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	printf("%s=%s\n", what, word(fd >= 0));
	if (fd >= 0)
		close(fd);
}

int main(int argc, char **argv)
{
	static struct egress_policy pol;
	char err[256];
	struct timespec a, b;
	int abi = 0;

	if (argc < 6 || egress_policy_parse(argv[1], strlen(argv[1]), &pol, err, sizeof(err)) != 0) {
		fprintf(stderr, "usage: egress_confined POLICY CA ALLOWED_PORT OTHER_PORT FILE [--none]\n");
		return 2;
	}
	if (argc < 7 || strcmp(argv[6], "--none") != 0) {
		clock_gettime(CLOCK_MONOTONIC, &a);
		abi = egress_confine(&pol, argv[2]);
		clock_gettime(CLOCK_MONOTONIC, &b);
		printf("abi=%d confine_us=%ld\n", abi, (long)((b.tv_sec - a.tv_sec) * 1000000 +
							      (b.tv_nsec - a.tv_nsec) / 1000));
		if (abi < 0)
			return 1;
	}
	try_connect("allowed_connect", atoi(argv[3]));
	try_connect("other_connect", atoi(argv[4]));
	try_bind();
	try_open("file_open", argv[5]);
	try_open("hosts_open", "/etc/hosts");
	try_open("ca_open", argv[2]);
	return 0;
}
