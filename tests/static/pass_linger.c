/* pass_linger.c: what a hostile workload can pass over a Unix socket, for tests/security: a
 * TCP socket whose close lingers. It connects a TCP socket to a listener of its own on
 * loopback that never reads, fills the socket's send queue, sets SO_LINGER (LINGER seconds),
 * sends it with SCM_RIGHTS and one byte ('P') on a new connection to SOCKET, closes its own
 * copy, and a second later the Unix connection. Whoever then holds the last reference closes
 * it and waits, in its own thread, up to LINGER seconds for a FIN that cannot go out.
 * Static, so it runs in any image.
 *
 *   pass_linger SOCKET LINGER
 *
 * Prints `sendmsg=0` when the descriptor went out, `sendmsg=EPERM` when the receiver refuses
 * descriptors (SO_PASSRIGHTS 0), `sendmsg=ERRNO` otherwise; then holds until killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int lingering(int seconds)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(in);
	struct linger lg = { 1, seconds };
	int small = 4096, l, c;
	char buf[4096] = { 0 };

	l = socket(AF_INET, SOCK_STREAM, 0);
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (l < 0 || c < 0 || setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)) != 0 ||
	    bind(l, (struct sockaddr *)&in, sizeof(in)) != 0 || listen(l, 1) != 0 ||
	    getsockname(l, (struct sockaddr *)&in, &len) != 0 ||
	    setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)) != 0 ||
	    connect(c, (struct sockaddr *)&in, sizeof(in)) != 0 ||
	    fcntl(c, F_SETFL, O_NONBLOCK) != 0)
		return -1;
	/* the listener's queue never drains: the send queue stays full, and so does the FIN */
	while (write(c, buf, sizeof(buf)) > 0)
		;
	if (setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)) != 0)
		return -1;
	return c;
}

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char byte = 'P', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { &byte, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *h;
	int c, u;

	if (argc != 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "usage: pass_linger SOCKET LINGER_SECONDS\n");
		return 2;
	}
	c = lingering(atoi(argv[2]));
	if (c < 0) {
		fprintf(stderr, "pass_linger: cannot set up the lingering socket: %s\n",
			strerror(errno));
		return 1;
	}
	strcpy(sa.sun_path, argv[1]);
	u = socket(AF_UNIX, SOCK_STREAM, 0);
	if (u < 0 || connect(u, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "pass_linger: cannot connect to %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	memset(cbuf, 0, sizeof(cbuf));
	h = CMSG_FIRSTHDR(&m);
	h->cmsg_level = SOL_SOCKET;
	h->cmsg_type = SCM_RIGHTS;
	h->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(h), &c, sizeof(int));
	if (sendmsg(u, &m, 0) == 1)
		printf("sendmsg=0\n");
	else
		printf("sendmsg=%s\n", errno == EPERM ? "EPERM" : strerror(errno));
	fflush(stdout);
	close(c);
	sleep(1);
	close(u);
	for (;;)
		pause();
}
