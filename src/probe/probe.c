/* probe.c: agentic-probe: what the kernel enforces on a process, as key=value evidence. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "agent.pb-c.h"
#include "base/base.h"
#include "grpc/grpc.h"
#include "init/priv.h"

const char probe_help[] =
	"usage: agentic-probe [--pid PID]\n"
	"       agentic-probe --agent-socket PATH [--agent-id ID] [--instance-id ID]\n"
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
	"Exit status: 0 printed, 1 the status could not be read or the socket not reached,\n"
	"2 usage.\n";


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

static int probe_agent_socket(const char *path, const char *agent_id, const char *instance_id)
{
	struct grpc_client_config cfg = { path, GRPC_SMALL_MESSAGE, 2, 0 };
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

	if (!bytes) {
		fprintf(stderr, "agentic-probe: --agent-socket: the path is too long for a socket\n");
		return 2;
	}
	storage = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (storage == MAP_FAILED)
		return 1;
	r = grpc_client_init(&cfg, storage, bytes, &c);
	if (r == 0)
		r = grpc_client_start(c, &probe_connect, md, instance_id ? 2 : 1, 0, &p, &call);
	if (r < 0) {
		printf("agent_socket=unreachable err=%s\n", err_str(r));
		return 1;
	}
	end = clock_mono_ms() + LIMIT_PROBE_WAIT_MS;
	while (!p.done && grpc_client_connected(c) && clock_mono_ms() < end)
		grpc_client_run(c, (int)(end - clock_mono_ms()));
	if (!p.done) {
		printf("agent_socket=accepted\n");
		return 0;
	}
	if (p.status == GRPC_UNAVAILABLE) {
		printf("agent_socket=unreachable status=UNAVAILABLE\n");
		return 1;
	}
	if (p.status == GRPC_OK)
		printf("agent_socket=accepted\n");
	else
		printf("agent_socket=refused status=%s\n", grpc_status_name(p.status));
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

int probe_main(int argc, char **argv)
{
	struct priv_status st;
	uint64_t pid = 0;
	int r;

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
	printf("uid=%u,%u,%u,%u\ngid=%u,%u,%u,%u\ngroups=%u\n", st.uid[0], st.uid[1], st.uid[2],
	       st.uid[3], st.gid[0], st.gid[1], st.gid[2], st.gid[3], st.ngroups);
	printf("cap_inh=%016llx\ncap_prm=%016llx\ncap_eff=%016llx\ncap_bnd=%016llx\n"
	       "cap_amb=%016llx\n", (unsigned long long)st.cap_inh, (unsigned long long)st.cap_prm,
	       (unsigned long long)st.cap_eff, (unsigned long long)st.cap_bnd,
	       (unsigned long long)st.cap_amb);
	printf("no_new_privs=%d\nseccomp=%d\n", st.no_new_privs, st.seccomp);
	return 0;
}
