/* agent_flood.c: what a hostile workload can do to the agent socket, for tests/security: hold
 * many connections past their preface, or hold streams whose message is half sent. Static, so
 * `docker cp` puts it into any image; it writes raw HTTP/2 and reads nothing back.
 *
 *   agent_flood SOCKET idle CONNS HOLD_SECONDS
 *   agent_flood SOCKET half CONNS STREAMS LEN HOLD_SECONDS
 *
 * idle: each connection sends the preface and an empty SETTINGS, then nothing. half: each also
 * opens STREAMS Health/Check calls and sends each a 5-byte gRPC prefix promising LEN bytes and
 * one byte of them. Prints `held CONNS connected=N` once all are set up (N: the connect()s that
 * succeeded), then keeps them HOLD_SECONDS whatever the server does with them. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t frame(unsigned char *p, unsigned type, unsigned flags, unsigned stream,
		    const void *payload, size_t len)
{
	p[0] = (unsigned char)(len >> 16);
	p[1] = (unsigned char)(len >> 8);
	p[2] = (unsigned char)len;
	p[3] = (unsigned char)type;
	p[4] = (unsigned char)flags;
	p[5] = (unsigned char)(stream >> 24 & 0x7f);
	p[6] = (unsigned char)(stream >> 16);
	p[7] = (unsigned char)(stream >> 8);
	p[8] = (unsigned char)stream;
	memcpy(p + 9, payload, len);
	return 9 + len;
}

/* A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2). */
static size_t literal(unsigned char *p, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);

	p[0] = 0;
	p[1] = (unsigned char)n;
	memcpy(p + 2, name, n);
	p[2 + n] = (unsigned char)v;
	memcpy(p + 3 + n, value, v);
	return 3 + n + v;
}

/* The request headers of a Health/Check call. */
static size_t health_headers(unsigned char *p)
{
	size_t n = 0;

	p[n++] = 0x83; /* :method POST */
	p[n++] = 0x86; /* :scheme http */
	n += literal(p + n, ":path", "/grpc.health.v1.Health/Check");
	n += literal(p + n, ":authority", "localhost");
	n += literal(p + n, "content-type", "application/grpc");
	n += literal(p + n, "te", "trailers");
	return n;
}

static int dial(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

int main(int argc, char **argv)
{
	static unsigned char out[1 << 16];
	unsigned char hdrs[256], data[6];
	int half, conns, streams = 0, connected = 0;
	unsigned len = 0, hold;
	size_t hlen = health_headers(hdrs);

	if (argc < 5 || (strcmp(argv[2], "idle") != 0 && strcmp(argv[2], "half") != 0) ||
	    (strcmp(argv[2], "half") == 0 && argc < 7)) {
		fprintf(stderr, "usage: agent_flood SOCKET idle CONNS HOLD_SECONDS\n"
				"       agent_flood SOCKET half CONNS STREAMS LEN HOLD_SECONDS\n");
		return 2;
	}
	half = strcmp(argv[2], "half") == 0;
	conns = atoi(argv[3]);
	if (half) {
		streams = atoi(argv[4]);
		len = (unsigned)strtoul(argv[5], NULL, 10);
		hold = (unsigned)atoi(argv[6]);
	} else {
		hold = (unsigned)atoi(argv[4]);
	}
	signal(SIGPIPE, SIG_IGN);
	data[0] = 0;
	data[1] = (unsigned char)(len >> 24);
	data[2] = (unsigned char)(len >> 16);
	data[3] = (unsigned char)(len >> 8);
	data[4] = (unsigned char)len;
	data[5] = 'x';
	for (int i = 0; i < conns; i++) {
		int fd = dial(argv[1]);
		size_t n = 0;

		if (fd < 0)
			continue;
		connected++;
		memcpy(out, preface, sizeof(preface) - 1);
		n = sizeof(preface) - 1;
		n += frame(out + n, 0x4, 0, 0, NULL, 0); /* SETTINGS */
		for (int s = 0; s < streams && n + 2 * 9 + hlen + sizeof(data) <= sizeof(out); s++) {
			n += frame(out + n, 0x1, 0x4, 2u * (unsigned)s + 1, hdrs, hlen);
			n += frame(out + n, 0x0, 0, 2u * (unsigned)s + 1, data, sizeof(data));
		}
		/* whatever the server makes of it: the connection is kept either way */
		(void)!send(fd, out, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	}
	printf("held %d connected=%d\n", conns, connected);
	fflush(stdout);
	sleep(hold);
	return 0;
}
