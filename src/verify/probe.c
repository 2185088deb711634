/* probe.c: agentic-probe: what the kernel enforces on a process, as key=value evidence. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "base/base.h"
#include "grpc/grpc.h"
#include "init/priv.h"

const char probe_help[] =
	"usage: agentic-probe [--pid PID]\n"
	"       agentic-probe --agent-socket PATH [--agent-id ID] [--instance-id ID]\n"
	"       agentic-probe --verify [ACTION]...\n"
	"\n"
	"Prints what the kernel enforces on this process (or on PID), read from\n"
	"/proc/<pid>/status, one key=value per line: uids, gids, supplementary group count,\n"
	"the five capability sets in hex, NoNewPrivs and the seccomp mode. Runs inside a\n"
	"sandbox as a workload; the verifier reads its output. Prints no environment, no\n"
	"arguments and no file contents.\n"
	"\n"
	"With --agent-socket, opens the agent protocol's Connect call on the socket at PATH as\n"
	"whoever runs it, with x-agent-id ID (default \"probe\") and, when given,\n"
	"x-agent-instance-id, sends nothing, and prints what the server did within 2 seconds:\n"
	"`agent_socket=refused status=NAME` when it ended the call with a status other than OK,\n"
	"else `agent_socket=accepted`. A workload must see UNAUTHENTICATED.\n"
	"\n"
	"With --verify (the verifier's, run as a workload), each ACTION prints key=value lines\n"
	"of fixed words and numbers only, then `end=ok`:\n"
	"  --self                 self.uid= ... self.seccomp=, the keys above\n"
	"  --status PID           pidPID.uid= ... the same of PID\n"
	"  --agent-socket PATH    agent_socket=refused|accepted|unreachable, agent_socket.status=\n"
	"  --try-kill PID         kill.PID=allowed or the errno name (signal 0: the permission check)\n"
	"  --try-ptrace PID       ptrace.PID=allowed (then detached) or the errno name\n"
	"  --try-write PATH       write.N=allowed or the errno name (opened for writing, unchanged)\n"
	"  --try-create DIR       create.N=allowed (the file removed again) or the errno name\n"
	"  --try-connect IP:PORT  connect.N=connected|refused|timeout or the errno name; all the\n"
	"                         connects run together, for at most 250 ms\n"
	"  --ipv6                 ipv6.disable_ipv6=0|1|-1, ipv6.addrs=N (inet6 addresses but lo)\n"
	"  --tools                tool.NAME=present|absent for curl, wget, grpcurl, python\n"
	"  --nics                 nics=N (network interfaces but lo, /proc/net/dev), -1 unreadable\n"
	"N counts the ACTIONs of its kind from 0.\n"
	"Exit status: 0 printed, 1 the status could not be read, the socket not reached or the\n"
	"probe is traced (it then prints tampered=traced only), 2 usage. Not dumpable: another\n"
	"process of its uid cannot ptrace it or open its /proc/PID/fd.\n";


struct agent_probe {
	int done, status;
};

static void agent_probe_done(struct grpc_call *call, int status, const char *message)
{
	struct agent_probe *p = grpc_call_user(call);

	p->done = 1;
	p->status = status;
}

static const struct grpc_method probe_connect = {
	"/agentic.sandbox.v1.AgentService/Connect",
	&agentic__sandbox__v1__agent_message__descriptor,
	&agentic__sandbox__v1__management_message__descriptor,
	GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_done = agent_probe_done },
	NULL,
};

/* The server's answer to a Connect as whoever runs this: 0 with *status (GRPC_OK when the
 * call stayed open or was accepted), 1 when the socket was not reached, 2 for a path too long. */
static int agent_socket_try(const char *path, const char *agent_id, const char *instance_id,
			    int *status, int *err)
{
	struct grpc_client_config cfg = { .path = path, .max_message_bytes = GRPC_SMALL_MESSAGE,
					  .small_buffers = 2 };
	size_t bytes = grpc_client_storage_bytes(&cfg);
	struct grpc_md md[2] = {
		{ "x-agent-id", agent_id, strlen(agent_id) },
		{ "x-agent-instance-id", instance_id, instance_id ? strlen(instance_id) : 0 },
	};
	struct agent_probe p = { 0, 0 };
	struct grpc_client *c;
	struct grpc_call *call;
	void *storage;
	int64_t end;
	int r;

	*err = 0;
	if (!bytes)
		return 2;
	storage = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (storage == MAP_FAILED) {
		*err = -errno;
		return 1;
	}
	r = grpc_client_init(&cfg, storage, bytes, &c);
	if (r == 0)
		r = grpc_client_start(c, &probe_connect, md, instance_id ? 2 : 1, 0, &p, &call);
	if (r < 0) {
		*err = r;
		return 1;
	}
	end = clock_mono_ms() + LIMIT_PROBE_WAIT_MS;
	while (!p.done && grpc_client_connected(c) && clock_mono_ms() < end)
		grpc_client_run(c, (int)(end - clock_mono_ms()));
	*status = p.done ? p.status : GRPC_OK;
	return p.done && p.status == GRPC_UNAVAILABLE ? 1 : 0;
}

static int probe_agent_socket(const char *path, const char *agent_id, const char *instance_id)
{
	int status = 0, err = 0, r = agent_socket_try(path, agent_id, instance_id, &status, &err);

	if (r == 2) {
		fprintf(stderr, "agentic-probe: --agent-socket: the path is too long for a socket\n");
		return 2;
	}
	if (r == 1 && err) {
		printf("agent_socket=unreachable err=%s\n", err_str(err));
		return 1;
	}
	if (r == 1) {
		printf("agent_socket=unreachable status=UNAVAILABLE\n");
		return 1;
	}
	if (status == GRPC_OK)
		printf("agent_socket=accepted\n");
	else
		printf("agent_socket=refused status=%s\n", grpc_status_name(status));
	return 0;
}

/* A usage error names what is wrong and where the usage is; it never reprints the whole help. */
static int usage_error(const char *fmt, const char *arg)
{
	fputs("agentic-probe: ", stderr);
	fprintf(stderr, fmt, arg);
	fputs("\n(see agentic-probe --help)\n", stderr);
	return 2;
}

/* ---- --verify: the verifier's actions, fixed words and numbers only ---- */

/* The errno names a verifier reads; any other is "errno<N>". */
static const char *errno_word(int e, char *buf, size_t size)
{
	static const struct { int e; const char *name; } names[] = {
		{ EPERM, "EPERM" }, { EACCES, "EACCES" }, { ENOENT, "ENOENT" }, { EROFS, "EROFS" },
		{ ESRCH, "ESRCH" }, { ENOSYS, "ENOSYS" }, { EINVAL, "EINVAL" }, { EEXIST, "EEXIST" },
		{ ENETUNREACH, "ENETUNREACH" }, { EHOSTUNREACH, "EHOSTUNREACH" },
		{ ECONNREFUSED, "ECONNREFUSED" }, { ETIMEDOUT, "ETIMEDOUT" }, { EISDIR, "EISDIR" },
		{ ENOTDIR, "ENOTDIR" }, { EADDRNOTAVAIL, "EADDRNOTAVAIL" }, { ENOSPC, "ENOSPC" },
	};

	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		if (names[i].e == e)
			return names[i].name;
	snprintf(buf, size, "errno%d", e);
	return buf;
}

static void print_status(const char *prefix, const struct priv_status *st)
{
	printf("%suid=%u,%u,%u,%u\n%sgid=%u,%u,%u,%u\n%sgroups=%u\n", prefix, st->uid[0],
	       st->uid[1], st->uid[2], st->uid[3], prefix, st->gid[0], st->gid[1], st->gid[2],
	       st->gid[3], prefix, st->ngroups);
	printf("%scap_inh=%016llx\n%scap_prm=%016llx\n%scap_eff=%016llx\n%scap_bnd=%016llx\n"
	       "%scap_amb=%016llx\n", prefix, (unsigned long long)st->cap_inh, prefix,
	       (unsigned long long)st->cap_prm, prefix, (unsigned long long)st->cap_eff, prefix,
	       (unsigned long long)st->cap_bnd, prefix, (unsigned long long)st->cap_amb);
	printf("%sno_new_privs=%d\n%sseccomp=%d\n", prefix, st->no_new_privs, prefix, st->seccomp);
}

#define PROBE_CONNECTS 8
#define PROBE_CONNECT_MS LIMIT_PROBE_CONNECT_MS

/* A connect in flight: fd, or done with word (or the errno err). */
struct probe_connect {
	int fd;
	const char *word;
	int err;
};

/* Starts a non-blocking connect to IP:PORT; -1 when the argument is not one. */
static int connect_begin(const char *arg, struct probe_connect *pc)
{
	char host[64];
	const char *colon = strrchr(arg, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET };
	uint64_t port;

	*pc = (struct probe_connect){ -1, NULL, 0 };
	if (!colon || (size_t)(colon - arg) >= sizeof(host) ||
	    parse_u64(colon + 1, 65535, &port) != 0 || port == 0)
		return -1;
	memcpy(host, arg, (size_t)(colon - arg));
	host[colon - arg] = '\0';
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -1;
	sa.sin_port = htons((uint16_t)port);
	pc->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (pc->fd < 0)
		pc->err = errno;
	else if (connect(pc->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
		pc->word = "connected";
	else if (errno != EINPROGRESS)
		pc->err = errno;
	return 0;
}

/* Waits for every connect still in flight, at most PROBE_CONNECT_MS in all. */
static void connects_finish(struct probe_connect *pc, int n)
{
	int64_t end = clock_mono_ms() + PROBE_CONNECT_MS;

	for (;;) {
		struct pollfd pfd[PROBE_CONNECTS];
		int np = 0, left = (int)(end - clock_mono_ms());

		for (int i = 0; i < n; i++)
			if (pc[i].fd >= 0 && !pc[i].word && !pc[i].err)
				pfd[np++] = (struct pollfd){ .fd = pc[i].fd, .events = POLLOUT };
		/* past the deadline one last look: a probe stopped (SIGSTOP from a workload of its
		 * uid) over its wait must not turn a connection made meanwhile into "timeout" */
		if (!np || poll(pfd, (nfds_t)np, left > 0 ? left : 0) <= 0)
			break;
		for (int i = 0, j = 0; i < n && j < np; i++) {
			int e = 0;
			socklen_t el = sizeof(e);

			if (pc[i].fd != pfd[j].fd)
				continue;
			if (pfd[j++].revents) {
				getsockopt(pc[i].fd, SOL_SOCKET, SO_ERROR, &e, &el);
				if (e)
					pc[i].err = e;
				else
					pc[i].word = "connected";
			}
		}
	}
	for (int i = 0; i < n; i++) {
		char buf[24];

		if (!pc[i].word)
			pc[i].word = pc[i].err == ECONNREFUSED ? "refused"
				   : pc[i].err ? errno_word(pc[i].err, buf, sizeof(buf)) : "timeout";
		printf("connect.%d=%s\n", i, pc[i].word);
		if (pc[i].fd >= 0)
			close(pc[i].fd);
	}
}

static void try_kill(pid_t pid)
{
	char buf[24];

	printf("kill.%d=%s\n", (int)pid,
	       kill(pid, 0) == 0 ? "allowed" : errno_word(errno, buf, sizeof(buf)));
}

/* PTRACE_SEIZE stops nothing; a seize that worked is undone at once. */
static void try_ptrace(pid_t pid)
{
	char buf[24];

	if (ptrace(PTRACE_SEIZE, pid, 0, 0) == 0) {
		ptrace(PTRACE_DETACH, pid, 0, 0);
		printf("ptrace.%d=allowed\n", (int)pid);
		return;
	}
	printf("ptrace.%d=%s\n", (int)pid, errno_word(errno, buf, sizeof(buf)));
}

/* Opens an existing file for writing without truncating it, writes nothing. */
static void try_write(int n, const char *path)
{
	char buf[24];
	int fd = open(path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);

	if (fd >= 0)
		close(fd);
	printf("write.%d=%s\n", n, fd >= 0 ? "allowed" : errno_word(errno, buf, sizeof(buf)));
}

static void try_create(int n, const char *dir)
{
	char path[LIMIT_PATH_BYTES], buf[24];
	int fd;

	if (snprintf(path, sizeof(path), "%s/.agentic-probe-%d", dir, (int)getpid()) >=
	    (int)sizeof(path)) {
		printf("create.%d=ENAMETOOLONG\n", n);
		return;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		close(fd);
		unlink(path);
	}
	printf("create.%d=%s\n", n, fd >= 0 ? "allowed" : errno_word(errno, buf, sizeof(buf)));
}

/* disable_ipv6 of all interfaces, and the inet6 addresses of interfaces other than lo. */
static void ipv6_report(void)
{
	char line[256];
	int disabled = -1, addrs = 0;
	FILE *f = fopen("/proc/sys/net/ipv6/conf/all/disable_ipv6", "re");

	if (f) {
		if (fscanf(f, "%d", &disabled) != 1)
			disabled = -1;
		fclose(f);
	}
	f = fopen("/proc/net/if_inet6", "re");
	while (f && fgets(line, sizeof(line), f)) {
		size_t l = strlen(line);

		while (l && (line[l - 1] == '\n' || line[l - 1] == ' '))
			line[--l] = '\0';
		if (l < 3 || strcmp(line + l - 3, " lo") != 0)
			addrs++;
	}
	if (f)
		fclose(f);
	printf("ipv6.disable_ipv6=%d\nipv6.addrs=%d\n", disabled, addrs);
}

/* The interfaces of the probe's network namespace other than lo (a VM guest has lo alone). */
static void nics_report(void)
{
	char line[256];
	int n = 0, at = 0;
	FILE *f = fopen("/proc/net/dev", "re");

	/* two header lines, then "  NAME: counters" */
	while (f && fgets(line, sizeof(line), f))
		if (at++ >= 2 && strchr(line, ':') &&
		    strncmp(line + strspn(line, " "), "lo:", 3) != 0)
			n++;
	if (f)
		fclose(f);
	printf("nics=%d\n", f ? n : -1);
}

/* Defence in depth only: a tool is one way out among many, never the boundary. */
static void tools_report(void)
{
	static const char *const dirs[] = { "/usr/local/sbin", "/usr/local/bin", "/usr/sbin",
					    "/usr/bin", "/sbin", "/bin" };
	static const struct { const char *key; const char *names[3]; } tools[] = {
		{ "curl", { "curl", NULL } },
		{ "wget", { "wget", NULL } },
		{ "grpcurl", { "grpcurl", NULL } },
		{ "python", { "python", "python3", NULL } },
	};

	for (size_t t = 0; t < ARRAY_LEN(tools); t++) {
		bool found = false;

		for (size_t n = 0; tools[t].names[n] && !found; n++)
			for (size_t d = 0; d < ARRAY_LEN(dirs) && !found; d++) {
				char path[128];

				snprintf(path, sizeof(path), "%s/%s", dirs[d], tools[t].names[n]);
				found = access(path, X_OK) == 0;
			}
		printf("tool.%s=%s\n", tools[t].key, found ? "present" : "absent");
	}
}

/* an ACTION that takes no value */
static bool probe_flag(const char *a)
{
	return strcmp(a, "--self") == 0 || strcmp(a, "--ipv6") == 0 || strcmp(a, "--tools") == 0 ||
	       strcmp(a, "--nics") == 0;
}

static int probe_verify(int argc, char **argv)
{
	struct probe_connect pc[PROBE_CONNECTS];
	int nconn = 0, nwrite = 0, ncreate = 0;

	/* the arguments first: a usage error prints nothing else */
	for (int i = 2; i < argc; i++) {
		static const char *const with_arg[] = { "--status", "--agent-socket", "--try-kill",
							"--try-ptrace", "--try-write", "--try-create",
							"--try-connect" };
		bool takes = false;
		uint64_t pid;

		if (probe_flag(argv[i]))
			continue;
		for (size_t k = 0; k < ARRAY_LEN(with_arg); k++)
			takes |= strcmp(argv[i], with_arg[k]) == 0;
		if (!takes)
			return usage_error("unknown argument '%s'", argv[i]);
		if (i + 1 >= argc)
			return usage_error("%s needs a value", argv[i]);
		if ((strcmp(argv[i], "--status") == 0 || strcmp(argv[i], "--try-kill") == 0 ||
		     strcmp(argv[i], "--try-ptrace") == 0) &&
		    (parse_u64(argv[i + 1], 4194304, &pid) != 0 || pid == 0))
			return usage_error("%s takes a process id", argv[i]);
		if (strcmp(argv[i], "--try-connect") == 0 && nconn++ == PROBE_CONNECTS)
			return usage_error("%s: too many", argv[i]);
		i++;
	}
	nconn = 0;
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		struct priv_status st;
		char prefix[24];

		if (strcmp(a, "--self") == 0 || strcmp(a, "--status") == 0) {
			pid_t pid = strcmp(a, "--self") == 0 ? 0 : (pid_t)atoi(v);

			snprintf(prefix, sizeof(prefix), pid ? "pid%d." : "self.", (int)pid);
			if (priv_status_read(pid, &st) == 0)
				print_status(prefix, &st);
			else
				printf("%sunreadable=1\n", prefix);
		} else if (strcmp(a, "--agent-socket") == 0) {
			int status = 0, err = 0, r = agent_socket_try(v, "probe", NULL, &status, &err);

			if (r == 0)
				printf("agent_socket=%s\nagent_socket.status=%s\n",
				       status == GRPC_OK ? "accepted" : "refused", grpc_status_name(status));
			else if (!err)
				printf("agent_socket=unreachable\nagent_socket.status=UNAVAILABLE\n");
			else
				printf("agent_socket=unreachable\n");
		} else if (strcmp(a, "--try-kill") == 0) {
			try_kill((pid_t)atoi(v));
		} else if (strcmp(a, "--try-ptrace") == 0) {
			try_ptrace((pid_t)atoi(v));
		} else if (strcmp(a, "--try-write") == 0) {
			try_write(nwrite++, v);
		} else if (strcmp(a, "--try-create") == 0) {
			try_create(ncreate++, v);
		} else if (strcmp(a, "--try-connect") == 0) {
			if (connect_begin(v, &pc[nconn]) != 0)
				return usage_error("--try-connect takes IPv4:PORT, got '%s'", v);
			nconn++;
		} else if (strcmp(a, "--ipv6") == 0) {
			ipv6_report();
		} else if (strcmp(a, "--tools") == 0) {
			tools_report();
		} else if (strcmp(a, "--nics") == 0) {
			nics_report();
		}
		if (!probe_flag(a))
			i++;
	}
	connects_finish(pc, nconn);
	printf("end=ok\n");
	return 0;
}

/* The TracerPid of this process, from /proc/self/status; -1 when it cannot be read. */
static int tracer_pid(void)
{
	char text[4096], *p;
	ssize_t n;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -1;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	p = strstr(text, "\nTracerPid:");
	return p ? atoi(p + strlen("\nTracerPid:")) : -1;
}

/* A workload runs as this same uid. Not dumpable, no process of that uid can ptrace this one
 * or open its /proc/<pid>/fd (its stdout among them) from here on; one that attached in the
 * moment between the exec and this is seen in TracerPid, and the probe then reports nothing. */
static int probe_guard(void)
{
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0 || tracer_pid() != 0) {
		printf("tampered=traced\n");
		return 1;
	}
	return 0;
}

int probe_main(int argc, char **argv)
{
	struct priv_status st;
	uint64_t pid = 0;
	int r;

	if (probe_guard() != 0)
		return 1;
	if (argc >= 2 && strcmp(argv[1], "--verify") == 0)
		return probe_verify(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "--agent-socket") == 0) {
		const char *id = "probe", *instance = NULL;

		for (int i = 3; i < argc; i += 2) {
			if (i + 1 < argc && strcmp(argv[i], "--agent-id") == 0) {
				id = argv[i + 1];
			} else if (i + 1 < argc && strcmp(argv[i], "--instance-id") == 0) {
				instance = argv[i + 1];
			} else if (strcmp(argv[i], "--agent-id") == 0 ||
				   strcmp(argv[i], "--instance-id") == 0) {
				return usage_error("%s needs a value", argv[i]);
			} else {
				return usage_error("unknown argument '%s'", argv[i]);
			}
		}
		return probe_agent_socket(argv[2], id, instance);
	}
	if (argc == 3 && strcmp(argv[1], "--pid") == 0) {
		if (parse_u64(argv[2], 4194304, &pid) != 0 || pid == 0) {
			fprintf(stderr, "agentic-probe: --pid takes a process id, got '%s'\n", argv[2]);
			return 2;
		}
	} else if (argc == 2 && (strcmp(argv[1], "--pid") == 0 ||
				 strcmp(argv[1], "--agent-socket") == 0)) {
		return usage_error("%s needs a value", argv[1]);
	} else if (argc > 3 && strcmp(argv[1], "--pid") == 0) {
		return usage_error("unexpected argument '%s'", argv[3]);
	} else if (argc != 1) {
		return usage_error("unknown argument '%s'", argv[1]);
	}
	r = priv_status_read((pid_t)pid, &st);
	if (r) {
		fprintf(stderr, "agentic-probe: cannot read the status of %s: %s\n",
			pid ? argv[2] : "this process", err_str(r));
		return 1;
	}
	print_status("", &st);
	return 0;
}
