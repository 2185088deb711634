/* agent_connect.c: the Connect stream each sandbox's init holds, up to READY and on: its
 * start (metadata checked against the sandbox the resolver admitted it for), registration and
 * its ack, heartbeats and READY (the run goes on or begins), output and results (to the exec
 * engine, through the output acks when the init keeps a replay), the claim's answer, its end;
 * and the agent socket's method table. */
#include <stdio.h>
#include <string.h>

#include "runtime/runtime_vm.h"
#include "agent.pb-c.h"
#include "agent/agent_slot.h"
#include "agent/exec.h"
#include "egress/broker.h"
#include "lifecycle/lifecycle.h"
#include "sandbox/strrun.h"
#include "transcript/runlog.h"

/* stdio's stdout and stderr macros hide AgentMessage's fields of those names; nothing below
 * writes to a stdio stream. */
#undef stdout
#undef stderr

/* Metadata value equal to want (exactly). */
static bool md_is(const struct grpc_call *call, const char *key, const char *want)
{
	size_t len;
	const char *v = grpc_call_md(call, key, &len);

	return v && len == strlen(want) && memcmp(v, want, len) == 0;
}

/* The init's report of itself, kept as sent when it fits and holds only printable text and
 * newlines (it is parsed by the verifier, never logged); else none is kept. */
static void self_report(struct agent_sb *a, const char *v)
{
	size_t n = strlen(v);

	if (n >= sizeof(a->self))
		return;
	for (size_t i = 0; i < n; i++)
		if ((v[i] < 0x20 && v[i] != '\n' && v[i] != '\t') || v[i] == 0x7f)
			return;
	memcpy(a->self, v, n + 1);
}

/* A descriptor number as the init said it: 3..1023 in decimal, -1 otherwise. */
static int label_fd(const char *v)
{
	int n = 0;

	if (!*v || strlen(v) > 4)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		n = n * 10 + (*v - '0');
	}
	return n >= 3 && n < 1024 ? n : -1;
}

static void ack(struct grpc_call *call, struct sandbox *sb)
{
	Agentic__Sandbox__V1__RegistrationAck a = AGENTIC__SANDBOX__V1__REGISTRATION_ACK__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry out_ack =
		AGENTIC__SANDBOX__V1__REGISTRATION_ACK__CONFIG_ENTRY__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry egress =
		AGENTIC__SANDBOX__V1__REGISTRATION_ACK__CONFIG_ENTRY__INIT;
	Agentic__Sandbox__V1__RegistrationAck__ConfigEntry *config[2];
	struct agent_sb *as = agent_slot(sb);

	ASSERT(as->authed);
	a.accepted = 1;
	a.message = "registered";
	a.heartbeat_interval_seconds = HEARTBEAT_INTERVAL_S;
	a.config = config;
	if (as->output_ack) {
		out_ack.key = "output-ack";
		out_ack.value = "1";
		config[a.n_config++] = &out_ack;
	}
	/* egress is served to every init that asks; whether a connection goes anywhere is the
	 * policy's (none: each call is refused FAILED_PRECONDITION and the init answers 503) */
	if (as->egress) {
		egress.key = "egress";
		/* direct: agenticd accepts on the init's listener (broker_direct.c) */
		egress.value = egress_listener_take(sb, as->egress_fd) ? "direct" : "1";
		config[a.n_config++] = &egress;
	}
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK;
	m.registration_ack = &a;
	if (grpc_call_send(call, &m.base) < 0) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "no buffer for the registration ack",
				 NULL, 0);
		return;
	}
	as->registered = true;
	log_info("agent registered", "name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid);
	/* a claimed warm sandbox's init learns its claim again after every registration (it
	 * may have restarted with its container, whose env is the pool's), before any command */
	if (sb->lc == LC_CLAIM_INIT || ((sb->claimed || sb->vm) && (sb->nclaim_env || vm_of(sb)->ncreds)))
		agent_claim_send(sb);
}

/* The run goes on or begins (a new one runs the create's cmd). */
static void run_begin(struct sandbox *sb)
{
	bool begun = runlog_ready(sb);

	/* the init sends nothing until it learns what the run's transcript already has */
	agent_out_resume(sb);
	if (begun && sb->ncmd) {
		struct exec_req er = { 0 };
		const char *a = NULL;
		int x;

		while ((a = strrun_next(sb->cmd, sb->cmd_len, a)) && er.argc < LIMIT_SANDBOX_CMD_ARGS)
			er.argv[er.argc++] = a;
		x = exec_begin(sb, &er, NULL); /* detached: the transcript only */
		if (x < 0)
			log_warn("the sandbox's cmd did not start", "name=%s error=%s", log_q(sb->name),
				 log_q(err_str(x)));
	}
}

/* READY: the run goes on or begins, then the create ends. A warm sandbox has no run until it
 * is claimed (its transcript starts at the claim, with the claim's env in place). */
static void agent_now_ready(struct sandbox *sb)
{
	struct agent_sb *a = agent_slot(sb);

	ASSERT(a->authed && a->registered);
	a->ready = true;
	if (!sb->pool && sb->lc != LC_CLAIM_INIT && sb->lc != LC_CLAIM_RENAME)
		run_begin(sb);
	lifecycle_signal(sb, LC_EV_AGENT_READY);
	exec_agent_writable(sb);
}

/* The stream is known to be the sandbox's: act on what arrived while that was checked. */
void agent_authed(struct sandbox *sb, bool reg_seen, bool ready_seen)
{
	struct agent_sb *a = agent_slot(sb);
	struct grpc_call *call = a->call;

	ASSERT(call && a->conn_verified);
	a->authed = true;
	log_info("agent connected", "name=%s instance=%s uid=%u", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid);
	if (reg_seen)
		ack(call, sb);
	if (ready_seen && a->registered)
		agent_now_ready(sb);
}

static void connect_start(struct grpc_call *call)
{
	const struct grpc_peer *p = grpc_call_peer(call);
	struct agent_sb *a;
	struct sandbox *sb;

	grpc_call_set_user(call, NULL);
	sb = p->slot < 0 ? NULL : sandbox_slot((uint32_t)p->slot);
	if (!sb) {
		agent_refuse_guest(call, p);
		return;
	}
	if (sb->state == SB_FREE || sb->gen != p->tag || sb->uid != p->uid) {
		agent_refuse(call, RF_REMOVING, "the sandbox is being removed");
		return;
	}
	if (sb->state == SB_CONFLICT) {
		agent_refuse(call, RF_CONFLICT, "two containers claim this uid: neither is trusted");
		return;
	}
	if (lifecycle_going(sb)) {
		agent_refuse(call, RF_REMOVING, "the sandbox is being removed");
		return;
	}
	if (!md_is(call, "x-agent-id", sb->agent_id)) {
		agent_refuse(call, RF_AGENT_ID, "x-agent-id does not name the sandbox of this uid");
		return;
	}
	if (!md_is(call, "x-agent-instance-id", sb->instance_id)) {
		agent_refuse(call, RF_INSTANCE_ID, "x-agent-instance-id does not match the sandbox of this uid");
		return;
	}
	a = agent_slot(sb);
	if (a->call) {
		agent_refuse(call, RF_DUPLICATE, "the sandbox already has a live Connect stream");
		return;
	}
	a->call = call;
	sandbox_auth_mark(sb, clock_mono_ms());
	a->authed = false;
	a->registered = false;
	a->ready = false;
	a->output_ack = false;
	transcript_out_connect(sb);
	a->seen_ms = clock_wall_ms();
	grpc_call_set_user(call, sb);
	/* Right after start the container's pid may not be known yet: the check then waits
	 * for the inspect (agent_pid_known). */
	if (a->conn_verified)
		agent_authed(sb, false, false);
}

static bool registration_ok(const struct sandbox *sb,
			    const Agentic__Sandbox__V1__AgentRegistration *reg)
{
	return strcmp(reg->instance_id, sb->instance_id) == 0 &&
	       (!reg->agent_id[0] || strcmp(reg->agent_id, sb->agent_id) == 0);
}

static const Agentic__Sandbox__V1__OutputChunk *
output_of(const Agentic__Sandbox__V1__AgentMessage *m)
{
	return m->payload_case == AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT ? m->stdout
										       : m->stderr;
}

/* The registration's labels: what the init can do (stdin and output acks, egress), its
 * proxy listener's number and its report of itself. */
static void registration_labels(struct agent_sb *a,
				const Agentic__Sandbox__V1__AgentRegistration *reg)
{
	a->stdin_ack = a->output_ack = a->egress = false;
	a->egress_fd = -1;
	a->self[0] = '\0';
	for (size_t i = 0; i < reg->n_labels; i++) {
		const char *k = reg->labels[i]->key;

		if (strcmp(k, "agentic-self-status") == 0) {
			self_report(a, reg->labels[i]->value);
			continue;
		}
		if (strcmp(k, "agentic-egress-listener") == 0) {
			a->egress_fd = label_fd(reg->labels[i]->value);
			continue;
		}
		if (strcmp(reg->labels[i]->value, "1") != 0)
			continue;
		if (strcmp(k, "agentic-stdin-ack") == 0)
			a->stdin_ack = true;
		else if (strcmp(k, "agentic-output-ack") == 0)
			a->output_ack = true;
		else if (strcmp(k, "agentic-egress") == 0)
			a->egress = true;
	}
}

static void on_registration(struct grpc_call *call, struct sandbox *sb, struct agent_sb *a,
			    const Agentic__Sandbox__V1__AgentRegistration *reg)
{
	if (!registration_ok(sb, reg)) {
		a->call = NULL;
		agent_refuse(call, RF_REGISTRATION, "the registration names another sandbox or instance");
		return;
	}
	registration_labels(a, reg);
	if (!a->authed)
		((struct pending *)grpc_call_app(call))->reg = true;
	else if (!a->registered)
		ack(call, sb);
}

static void on_heartbeat(struct grpc_call *call, struct sandbox *sb, struct agent_sb *a,
			 const Agentic__Sandbox__V1__Heartbeat *hb)
{
	bool ready = hb->status == AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY &&
		     strcmp(hb->setup_status, "ready") == 0;

	a->status = hb->status;
	if (!a->authed) {
		((struct pending *)grpc_call_app(call))->ready = ready;
		return;
	}
	if (ready && a->registered && !a->ready) {
		agent_now_ready(sb);
	} else if (!ready && a->ready) {
		a->ready = false;
		log_info("agent not ready", "name=%s status=%d", log_q(sb->name), hb->status);
	}
}

static void on_claim_ack(struct sandbox *sb, const struct agent_sb *a,
			 const Agentic__Sandbox__V1__ClaimAck *ca)
{
	struct lc_event ev = { .kind = LC_EV_CLAIM_REFUSED };
	char why[128];

	if (a->authed && sb->vm && sb->lc == LC_WAIT_READY && vm_of(sb)->claim_owed) {
		/* a VM's env and credentials: taken, or the create fails */
		snprintf(why, sizeof(why), "%s", ca->error);
		ev.kind = why[0] ? LC_EV_CLAIM_REFUSED : LC_EV_CLAIMED;
		ev.why = why;
		if (why[0])
			log_warn("claim refused by the init", "name=%s reason=%s",
				 log_q(sb->name), log_q(why));
		lifecycle_on(sb, &ev);
		return;
	}
	if (!a->authed || sb->lc != LC_CLAIM_INIT)
		return; /* an answer to a claim sent again after a registration */
	if (ca->error[0]) {
		/* the init's words, cut short and never taken as more than text */
		snprintf(why, sizeof(why), "%s", ca->error);
		ev.why = why;
		log_warn("claim refused by the init", "name=%s reason=%s", log_q(sb->name),
			 log_q(why));
		lifecycle_on(sb, &ev);
		return;
	}
	/* the create is answered first, then its run begins (the transcript's directory and
	 * files): both in this turn of the loop, before anything the client sends next is read */
	lifecycle_signal(sb, LC_EV_CLAIMED);
	if (sb->state == SB_READY)
		run_begin(sb);
}

static void on_result(struct sandbox *sb, const struct agent_sb *a,
		      const Agentic__Sandbox__V1__CommandResult *r)
{
	if (a->output_ack)
		agent_out_result(sb, r);
	else
		exec_result(sb, r->command_id, r->exit_code, r->duration_ms, r->duration_us,
			    r->error, 0);
}

static void connect_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Sandbox__V1__AgentMessage *m = (const void *)msg;
	struct sandbox *sb = grpc_call_user(call);
	struct agent_sb *a;

	if (!sb || (a = agent_slot(sb))->call != call)
		return;
	a->seen_ms = clock_wall_ms();
	switch (m->payload_case) {
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION:
		on_registration(call, sb, a, m->registration);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT:
		on_heartbeat(call, sb, a, m->heartbeat);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT:
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR: {
		const Agentic__Sandbox__V1__OutputChunk *o = output_of(m);
		int s = m->payload_case == AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR;

		if (!a->authed)
			return;
		if (a->output_ack)
			agent_out_chunk(sb, o, s);
		else
			exec_output(sb, o->stream_id, s, o->data.data, o->data.len, false);
		return;
	}
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_CLAIM_ACK:
		on_claim_ack(sb, a, m->claim_ack);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDIN_ACK:
		if (a->authed)
			exec_stdin_ack(sb, m->stdin_ack->command_id, m->stdin_ack->consumed);
		return;
	case AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_COMMAND_RESULT:
		if (a->authed)
			on_result(sb, a, m->command_result);
		return;
	default:
		return;
	}
}

static void connect_writable(struct grpc_call *call)
{
	struct sandbox *sb = grpc_call_user(call);

	if (!sb || agent_slot(sb)->call != call)
		return;
	if (transcript_of(sb)->out_ack_owed)
		agent_out_ack_send(sb);
	exec_agent_writable(sb);
}

static void connect_half_close(struct grpc_call *call)
{
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
}

static void connect_done(struct grpc_call *call, int status, const char *message)
{
	struct sandbox *sb = grpc_call_user(call);
	struct agent_sb *a;

	if (!sb || (a = agent_slot(sb))->call != call)
		return;
	a->call = NULL;
	a->authed = a->registered = a->ready = false;
	runlog_event(sb, "disconnect");
	log_info("agent disconnected", "name=%s instance=%s uid=%u status=%s", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid, grpc_status_name(status));
	lifecycle_signal(sb, LC_EV_AGENT_LOST);
}

/* The Egress method's start: the broker is told whether the caller is the registered init of
 * its sandbox that asked for egress (it checks the rest). */
static void egress_start(struct grpc_call *call)
{
	const struct grpc_peer *p = grpc_call_peer(call);
	struct sandbox *sb = p->slot < 0 ? NULL : sandbox_slot((uint32_t)p->slot);
	const struct agent_sb *a = sb ? agent_slot(sb) : NULL;

	egress_call_start(call, a && a->call && a->authed && a->registered &&
				grpc_call_peer(a->call)->pid == p->pid && a->egress);
}

const struct grpc_method agent_methods[] = {
	{
		.path = "/agentic.sandbox.v1.AgentService/Connect",
		.request = &agentic__sandbox__v1__agent_message__descriptor,
		.response = &agentic__sandbox__v1__management_message__descriptor,
		.flags = GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
		.handler = {
			.on_start = connect_start,
			.on_message = connect_message,
			.on_half_close = connect_half_close,
			.on_writable = connect_writable,
			.on_done = connect_done,
		},
	},
	{
		/* docs/EGRESS.md: buffers and streams of their own, so that no flood of egress
		 * calls starves an init's Connect */
		.path = "/agentic.sandbox.v1.AgentService/Egress",
		.request = &agentic__sandbox__v1__egress_chunk__descriptor,
		.response = &agentic__sandbox__v1__egress_chunk__descriptor,
		.flags = GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING | GRPC_OWN_POOL,
		.handler = {
			.on_start = egress_start,
			.on_message = egress_call_message,
			.on_half_close = egress_call_half_close,
			.on_writable = egress_call_writable,
			.on_done = egress_call_done,
		},
	},
};
const size_t agent_nmethods = ARRAY_LEN(agent_methods);
