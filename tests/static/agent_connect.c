/* agent_connect.c: a test agent: calls AgentService/Connect on an agent socket the way the
 * init does (metadata, registration, READY heartbeat) and prints what the server decided, so
 * the resolver can be probed from any uid and any pid namespace. Static, so it runs in any
 * image (piped into a sandbox's /tmp: the root filesystem is read-only).
 *
 *   agent_connect SOCKET AGENT_ID INSTANCE_ID [HOLD_SECONDS]
 *
 * Prints `registered` once the server acks the registration (then sends READY and keeps the
 * stream HOLD_SECONDS), or `status=NAME message=TEXT` when the call ends first. Exit 0 when
 * registered, 3 when refused, 1 on other failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "grpc/grpc.h"

struct outcome {
	int done, status, acked;
	char message[512];
};

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__ManagementMessage *m = (const void *)msg;
	struct outcome *o = grpc_call_user(call);

	if (m->payload_case == AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK &&
	    m->registration_ack->accepted)
		o->acked = 1;
}

static void on_done(struct grpc_call *call, int status, const char *message)
{
	struct outcome *o = grpc_call_user(call);

	o->done = 1;
	o->status = status;
	snprintf(o->message, sizeof(o->message), "%s", message ? message : "");
}

static const struct grpc_method connect_method = {
	.path = "/agentic.sandbox.v1.AgentService/Connect",
	.request = &agentic__sandbox__v1__agent_message__descriptor,
	.response = &agentic__sandbox__v1__management_message__descriptor,
	.flags = GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	.handler = { .on_message = on_message, .on_done = on_done },
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	struct grpc_client_config cfg = { .max_message_bytes = 1u << 20, .small_buffers = 8,
					  .large_buffers = 1 };
	Agentic__Sandbox__V1__AgentRegistration reg = AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__INIT;
	Agentic__Sandbox__V1__SystemInfo sys = AGENTIC__SANDBOX__V1__SYSTEM_INFO__INIT;
	Agentic__Sandbox__V1__Heartbeat hb = AGENTIC__SANDBOX__V1__HEARTBEAT__INIT;
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	struct grpc_md md[2];
	struct outcome o = { 0 };
	struct grpc_client *c;
	struct grpc_call *call;
	struct utsname u;
	char host[64] = "";
	size_t bytes;
	void *storage;
	int64_t end, hold = 0;
	int ready_sent = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: agent_connect SOCKET AGENT_ID INSTANCE_ID [HOLD_SECONDS]\n");
		return 2;
	}
	if (argc > 4)
		hold = atoi(argv[4]);
	cfg.path = argv[1];
	bytes = grpc_client_storage_bytes(&cfg);
	storage = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (storage == MAP_FAILED || grpc_client_init(&cfg, storage, bytes, &c) != 0) {
		printf("status=setup message=cannot set up a client\n");
		return 1;
	}
	md[0] = (struct grpc_md){ "x-agent-id", argv[2], strlen(argv[2]) };
	md[1] = (struct grpc_md){ "x-agent-instance-id", argv[3], strlen(argv[3]) };
	if (grpc_client_start(c, &connect_method, md, 2, 0, &o, &call) != 0) {
		printf("status=connect message=cannot reach %s\n", argv[1]);
		return 1;
	}
	uname(&u);
	gethostname(host, sizeof(host) - 1);
	sys.os = "linux";
	sys.kernel = u.release;
	reg.agent_id = argv[2];
	reg.instance_id = argv[3];
	reg.hostname = host;
	reg.system = &sys;
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION;
	m.registration = &reg;
	grpc_call_send(call, &m.base);
	end = mono_ms() + 10000;
	while (!o.done && mono_ms() < end) {
		if (grpc_client_run(c, 50) < 0)
			break;
		if (o.acked && !ready_sent) {
			hb.agent_id = argv[2];
			hb.status = AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY;
			hb.setup_status = "ready";
			m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT;
			m.heartbeat = &hb;
			grpc_call_send(call, &m.base);
			ready_sent = 1;
			printf("registered\n");
			fflush(stdout);
			end = mono_ms() + hold * 1000;
		}
	}
	if (o.done) {
		printf("status=%s message=%s\n", grpc_status_name(o.status), o.message);
		return o.status == GRPC_UNAUTHENTICATED ? 3 : 1;
	}
	if (!o.acked) {
		printf("status=timeout message=no answer\n");
		return 1;
	}
	return 0;
}
