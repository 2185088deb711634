/* test_init_agent.c: the init's agent channel against our own gRPC server in one process
 * (so agent.c runs under ASan/UBSan): registration, READY, pings, refusal, shutdown, and the
 * redial with backoff after the server goes away. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent.pb-c.h"
#include "grpc/grpc.h"
#include "init/init.h"

/* What the server side saw, and how it answers. */
static struct {
	int calls, registrations, ready, shutting_down, other;
	char md_id[64], md_instance[64], reg_id[64], reg_instance[64], kernel[65];
	int32_t cpus;
	int accept;          /* ack accepted */
	int ping_after_ready, shutdown_after_ready;
	struct grpc_call *call;
} seen;

static void s_start(struct grpc_call *call)
{
	size_t n;
	const char *v;

	seen.calls++;
	seen.call = call;
	v = grpc_call_md(call, "x-agent-id", &n);
	if (v && n < sizeof(seen.md_id))
		memcpy(seen.md_id, v, n);
	v = grpc_call_md(call, "x-agent-instance-id", &n);
	if (v && n < sizeof(seen.md_instance))
		memcpy(seen.md_instance, v, n);
}

static void send_mgmt(struct grpc_call *call, Agentic__Sandbox__V1__ManagementMessage *m)
{
	assert_int_equal(grpc_call_send(call, &m->base), 0);
}

static void s_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__AgentMessage *m = (const void *)msg;
	Agentic__Sandbox__V1__ManagementMessage out = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__RegistrationAck ack = AGENTIC__SANDBOX__V1__REGISTRATION_ACK__INIT;
	Agentic__Sandbox__V1__Ping ping = AGENTIC__SANDBOX__V1__PING__INIT;
	Agentic__Sandbox__V1__ShutdownSignal bye = AGENTIC__SANDBOX__V1__SHUTDOWN_SIGNAL__INIT;

	if (m->payload_case == AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION) {
		seen.registrations++;
		snprintf(seen.reg_id, sizeof(seen.reg_id), "%s", m->registration->agent_id);
		snprintf(seen.reg_instance, sizeof(seen.reg_instance), "%s",
			 m->registration->instance_id);
		snprintf(seen.kernel, sizeof(seen.kernel), "%s", m->registration->system->kernel);
		seen.cpus = m->registration->system->cpu_cores;
		ack.accepted = seen.accept;
		ack.heartbeat_interval_seconds = 1;
		out.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK;
		out.registration_ack = &ack;
		send_mgmt(call, &out);
		return;
	}
	if (m->payload_case != AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT) {
		seen.other++;
		return;
	}
	if (m->heartbeat->status == AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_SHUTTING_DOWN) {
		seen.shutting_down++;
		return;
	}
	if (m->heartbeat->status != AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY ||
	    strcmp(m->heartbeat->setup_status, "ready") != 0)
		return;
	seen.ready++;
	if (seen.ping_after_ready && seen.ready == 1) {
		out.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_PING;
		out.ping = &ping;
		send_mgmt(call, &out);
	}
	if (seen.shutdown_after_ready && seen.ready == 1) {
		out.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_SHUTDOWN;
		out.shutdown = &bye;
		send_mgmt(call, &out);
	}
}

static void s_done(struct grpc_call *call, int status, const char *message)
{
	if (seen.call == call)
		seen.call = NULL;
}

static const struct grpc_method methods[] = {
	{ "/agentic.sandbox.v1.AgentService/Connect",
	  &agentic__sandbox__v1__agent_message__descriptor,
	  &agentic__sandbox__v1__management_message__descriptor,
	  GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	  { .on_start = s_start, .on_message = s_message, .on_done = s_done }, NULL },
};

struct rig {
	struct init_env env;
	struct init_sysinfo si;
	struct init_agent agent;
	struct init_cmds *cmds;
	struct grpc_server *s;
	void *ss, *as, *cs;
};

static void server_up(struct rig *r)
{
	struct grpc_server_config cfg = { .max_connections = 4, .max_streams_per_connection = 16,
					  .max_message_bytes = 65536, .small_buffers = 4,
					  .large_buffers = 1 };
	size_t n = grpc_server_storage_bytes(&cfg);

	r->ss = malloc(n);
	assert_int_equal(grpc_server_init(&cfg, r->ss, n, &r->s), 0);
	assert_int_equal(grpc_server_listen_unix(r->s, r->env.uds_path, 0600, methods, 1), 0);
}

static void server_down(struct rig *r)
{
	grpc_server_close(r->s);
	free(r->ss);
	r->s = NULL;
}

static void rig_up(struct rig *r)
{
	static char *no_env[] = { NULL };
	static uint8_t exec_area[LIMIT_INIT_EXEC_BYTES];
	struct init_cmds_config ccfg = { -1, 10001, 10001, 200123, no_env, exec_area };
	const char *why;
	size_t n;

	memset(r, 0, sizeof(*r));
	memset(&seen, 0, sizeof(seen));
	seen.accept = 1;
	strcpy(r->env.agent_id, "sbx-unit");
	strcpy(r->env.instance_id, "0190a1b2-c3d4-7e5f-8a9b-0123456789ab");
	snprintf(r->env.uds_path, sizeof(r->env.uds_path), "/tmp/agentic-test-init-%d.sock",
		 (int)getpid());
	init_sysinfo_read(&r->si);
	server_up(r);
	n = init_cmds_storage_bytes();
	r->cs = malloc(n);
	assert_int_equal(init_cmds_setup(&ccfg, r->cs, n, &r->cmds, &why), 0);
	n = init_agent_storage_bytes(r->env.uds_path);
	r->as = malloc(n);
	assert_int_equal(init_agent_setup(&r->agent, &r->env, &r->si, r->cmds, r->as, n), 0);
}

static void rig_down(struct rig *r)
{
	struct grpc_client *c = r->agent.client;

	grpc_client_close(c);
	if (r->s)
		server_down(r);
	unlink(r->env.uds_path);
	free(r->as);
	free(r->cs);
}

/* Runs both sides until *flag reaches want or ms pass. */
static void spin(struct rig *r, const int *flag, int want, int ms)
{
	int64_t end = clock_mono_ms() + ms;

	while (*flag < want && clock_mono_ms() < end) {
		init_agent_tick(&r->agent, clock_mono_ms());
		if (r->s)
			grpc_server_run(r->s, 1);
		init_agent_io(&r->agent);
		init_agent_flush(&r->agent);
		if (!r->s)
			usleep(1000);
	}
}

static void test_init_agent_registers_with_its_ids_then_sends_ready(void **state)
{
	struct rig r;

	rig_up(&r);
	spin(&r, &seen.ready, 1, 3000);
	assert_int_equal(seen.ready, 1);
	assert_int_equal(seen.registrations, 1);
	assert_string_equal(seen.md_id, "sbx-unit");
	assert_string_equal(seen.md_instance, r.env.instance_id);
	assert_string_equal(seen.reg_id, "sbx-unit");
	assert_string_equal(seen.reg_instance, r.env.instance_id);
	assert_string_equal(seen.kernel, r.si.kernel);
	assert_true(seen.cpus > 0);
	assert_int_equal(r.agent.state, INIT_AGENT_READY);
	assert_int_equal(r.agent.heartbeat_ms, 1000);
	/* the acked interval: one more READY within about a second */
	spin(&r, &seen.ready, 2, 2500);
	assert_int_equal(seen.ready, 2);
	rig_down(&r);
}

static void test_init_agent_answers_a_ping_with_a_heartbeat(void **state)
{
	struct rig r;
	int64_t t0;

	rig_up(&r);
	seen.ping_after_ready = 1;
	t0 = clock_mono_ms();
	spin(&r, &seen.ready, 2, 3000);
	assert_int_equal(seen.ready, 2);
	assert_true(clock_mono_ms() - t0 < 900); /* sooner than the 1 s interval */
	rig_down(&r);
}

static void test_init_agent_redials_with_backoff_when_refused(void **state)
{
	struct rig r;

	rig_up(&r);
	seen.accept = 0;
	spin(&r, &seen.registrations, 3, 3000);
	assert_int_equal(seen.registrations, 3);
	assert_int_equal(seen.ready, 0);
	assert_int_equal(r.agent.state == INIT_AGENT_READY, 0);
	/* 100, 200, 400 ms: the wait doubles */
	assert_true(r.agent.backoff_ms >= 400);
	seen.accept = 1;
	spin(&r, &seen.ready, 1, 3000);
	assert_int_equal(seen.ready, 1);
	assert_int_equal(r.agent.backoff_ms, INIT_BACKOFF_MIN_MS);
	rig_down(&r);
}

static void test_init_agent_registers_again_after_the_server_restarts(void **state)
{
	struct rig r;

	rig_up(&r);
	spin(&r, &seen.ready, 1, 3000);
	assert_int_equal(seen.ready, 1);
	server_down(&r);
	spin(&r, &r.agent.failures, 2, 3000);
	assert_int_equal(r.agent.state, INIT_AGENT_WAITING);
	server_up(&r);
	seen.ready = 0;
	spin(&r, &seen.ready, 1, 8000);
	assert_int_equal(seen.ready, 1);
	assert_true(r.agent.registrations == 2);
	rig_down(&r);
}

static void test_init_agent_takes_a_shutdown_and_says_goodbye(void **state)
{
	struct rig r;

	rig_up(&r);
	seen.shutdown_after_ready = 1;
	spin(&r, &r.agent.shutdown_requested, 1, 3000);
	assert_int_equal(r.agent.shutdown_requested, 1);
	/* the goodbye runs the client alone; the server must keep turning to take it */
	init_agent_stop(&r.agent, 0);
	spin(&r, &seen.shutting_down, 1, 2000);
	assert_int_equal(seen.shutting_down, 1);
	rig_down(&r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_agent_registers_with_its_ids_then_sends_ready),
		cmocka_unit_test(test_init_agent_answers_a_ping_with_a_heartbeat),
		cmocka_unit_test(test_init_agent_redials_with_backoff_when_refused),
		cmocka_unit_test(test_init_agent_registers_again_after_the_server_restarts),
		cmocka_unit_test(test_init_agent_takes_a_shutdown_and_says_goodbye),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
