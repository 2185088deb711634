/* egress_route_tls.c: one credential route run end to end, for
 * tests/integration/test_egress_route_tls: the static build's egress_route_run (BearSSL as the
 * binary links it) against a TLS upstream on loopback, with a forked child as the workload.
 *
 *   egress_route_tls CA_FILE UP_NAME PORT REQUEST_FILE OUT_FILE
 *
 * REQUEST_FILE is what the workload sends (an absolute-form head and its body); the head and
 * the first EGRESS_TEST_REST bytes after it (default: all) are handed over as the worker's
 * head parser would, the child writes the rest through the socket. The secret is
 * EGRESS_TEST_SECRET, injected as EGRESS_TEST_HEADER (default x-api-key) with the value
 * EGRESS_TEST_VALUE (default {secret}); EGRESS_TEST_MAX is max_bytes, EGRESS_TEST_TIMEOUT_MS the
 * I/O timeout, EGRESS_TEST_SHUT set makes the workload shut its write side once it has sent its
 * part, EGRESS_TEST_DRIP_MS makes it send 10 bytes at a time with that pause. What the workload received goes to OUT_FILE. Prints
 * `status=S reason=R end=E up=U down=D after_seal=A` and the child's
 * `first_ms=F last_ms=L` (from the route's start to the first and the last byte it got). */
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "egress/route.h"

/* The request, at most 12 MiB (a 10 MiB upload and its head). */
static char req[12u << 20];

static const char *reason_word(enum egress_reason r)
{
	switch (r) {
	case ER_ROUTE: return "route";
	case ER_REDIRECT_RETURNED: return "redirect_returned";
	case ER_UPSTREAM_TLS_FAILED: return "upstream_tls_failed";
	case ER_BAD_REQUEST: return "bad_request";
	default: return "other";
	}
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The workload: sends its part of the request (a process of its own, so that an answer that
 * comes before the body's end is read meanwhile), and reads the answer to its end. */
static int workload(int fd, const char *send_p, size_t send_n, const char *out_path,
		    int64_t t0)
{
	static char buf[65536];
	int64_t first = -1, last = -1;
	int out = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	pid_t writer;

	if (out < 0)
		return 2;
	writer = fork();
	if (writer < 0)
		return 2;
	if (writer == 0) {
		signal(SIGPIPE, SIG_IGN);
		/* A route that stops reading (the body ended, the upstream answered) is no
		 * failure of the writer's. */
		const char *drip = getenv("EGRESS_TEST_DRIP_MS");

		if (drip) {
			/* 10 bytes at a time with a pause between: a body still coming up while
			 * the answer goes down. */
			for (size_t at = 0; at < send_n; at += 10) {
				(void)write_all(fd, send_p + at, send_n - at < 10 ? send_n - at : 10);
				usleep((useconds_t)atoi(drip) * 1000);
			}
		} else {
			(void)write_all(fd, send_p, send_n);
		}
		if (getenv("EGRESS_TEST_SHUT"))
			shutdown(fd, SHUT_WR);
		_exit(0);
	}
	for (;;) {
		ssize_t n = read(fd, buf, sizeof(buf));

		if (n <= 0)
			break;
		last = clock_mono_ms() - t0;
		if (first < 0)
			first = last;
		if (write_all(out, buf, (size_t)n) < 0)
			return 3;
	}
	printf("first_ms=%lld last_ms=%lld\n", (long long)first, (long long)last);
	kill(writer, SIGKILL);
	waitpid(writer, NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	static struct egress_route rt;
	static struct egress_head h;
	struct egress_route_call c = { 0 };
	struct egress_route_result r;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct alloc_stats st;
	const char *secret = getenv("EGRESS_TEST_SECRET"), *e, *hend, *url, *path;
	size_t n = 0, rest;
	int sv[2], up, in, status;
	int64_t t0;
	pid_t pid;

	if (argc != 6 || !secret)
		return 64;
	in = open(argv[4], O_RDONLY);
	if (in < 0)
		return 65;
	for (ssize_t k; (k = read(in, req + n, sizeof(req) - 1 - n)) > 0;)
		n += (size_t)k;
	close(in);
	req[n] = 0;
	hend = strstr(req, "\r\n\r\n");
	if (!hend)
		return 66;
	hend += 4;

	/* The head as egress/head.c would give it: method, host, origin-form path. */
	if (sscanf(req, "%15s", h.method) != 1 || !(url = strstr(req, " http://")))
		return 67;
	url += 8;
	path = strchr(url, '/');
	if (!path || path > strchr(url, ' '))
		return 67;
	snprintf(h.path, sizeof(h.path), "%.*s", (int)(strchr(path, ' ') - path), path);
	snprintf(h.host, sizeof(h.host), "%.*s", (int)(path - url), url);
	h.port = 80;
	h.raw = req;
	h.raw_len = (size_t)(hend - req);
	rest = n - h.raw_len;
	if ((e = getenv("EGRESS_TEST_REST")) && (size_t)atol(e) < rest)
		rest = (size_t)atol(e);
	h.rest = hend;
	h.rest_len = rest;

	snprintf(rt.host, sizeof(rt.host), "%s", h.host);
	rt.port = 80;
	snprintf(rt.up_host, sizeof(rt.up_host), "%s", argv[2]);
	rt.up_port = (uint16_t)atoi(argv[3]);
	snprintf(rt.header, sizeof(rt.header), "%s",
		 getenv("EGRESS_TEST_HEADER") ? getenv("EGRESS_TEST_HEADER") : "x-api-key");
	snprintf(rt.value, sizeof(rt.value), "%s",
		 getenv("EGRESS_TEST_VALUE") ? getenv("EGRESS_TEST_VALUE") : "{secret}");

	up = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	sa.sin_port = htons(rt.up_port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (up < 0 || connect(up, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return 68;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return 69;
	t0 = clock_mono_ms();
	fflush(stdout);
	pid = fork();
	if (pid < 0)
		return 70;
	if (pid == 0) {
		close(sv[0]);
		close(up);
		_exit(workload(sv[1], hend + rest, n - h.raw_len - rest, argv[5], t0));
	}
	close(sv[1]);

	c.client_fd = sv[0];
	c.upstream_fd = up;
	c.route = &rt;
	c.head = &h;
	c.secret = (const uint8_t *)secret;
	c.secret_len = strlen(secret);
	c.ca_file = argv[1];
	c.max_bytes = getenv("EGRESS_TEST_MAX") ? strtoull(getenv("EGRESS_TEST_MAX"), NULL, 10)
						: (1ull << 30);
	c.io_timeout_ms = getenv("EGRESS_TEST_TIMEOUT_MS") ? atoi(getenv("EGRESS_TEST_TIMEOUT_MS"))
						       : 10000;
	/* The worker allocates nothing once started: the route runs sealed. */
	alloc_seal();
	egress_route_run(&c, &r);
	alloc_stats(&st);
	close(sv[0]);
	close(up);
	printf("status=%d reason=%s end=%s up=%llu down=%llu after_seal=%zu\n", r.status,
	       reason_word(r.reason), egress_end_word(r.end), (unsigned long long)r.bytes_up,
	       (unsigned long long)r.bytes_down, st.after_seal);
	fflush(stdout);
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return 71;
	return 0;
}
