/* channel.c: the init's Connect stream to agenticd: register, heartbeat, redial with backoff.
 * (No <stdio.h> here: its stdout/stderr macros would clash with AgentMessage's fields.) */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include "agent.pb-c.h"
#include "base/base.h"
#include "init/init.h"

#define CONNECT_PATH "/agentic.sandbox.v1.AgentService/Connect"

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg);
static void on_writable(struct grpc_call *call);
static void on_done(struct grpc_call *call, int status, const char *message);

static const struct grpc_method connect_method = {
	CONNECT_PATH,
	&agentic__sandbox__v1__agent_message__descriptor,
	&agentic__sandbox__v1__management_message__descriptor,
	GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_message = on_message, .on_writable = on_writable, .on_done = on_done },
	NULL,
};

static struct grpc_client_config client_config(const char *path)
{
	struct grpc_client_config cfg = {
		.path = path,
		.max_message_bytes = LIMIT_INIT_MESSAGE_BYTES,
		.small_buffers = LIMIT_INIT_SMALL_BUFFERS,
		.large_buffers = LIMIT_INIT_LARGE_BUFFERS,
		.zeroed = true, /* init.c's fresh mapping */
	};

	return cfg;
}

/* The replay ring's place at the start of the storage; the gRPC client takes the rest. */
#define REPLAY_BYTES (((sizeof(struct init_replay) + 63) & ~(size_t)63) + LIMIT_INIT_REPLAY_BYTES)

size_t init_agent_storage_bytes(const char *path)
{
	struct grpc_client_config cfg = client_config(path);
	size_t n = grpc_client_storage_bytes(&cfg);

	return n ? REPLAY_BYTES + n : 0;
}

int init_agent_setup(struct init_agent *a, const struct init_env *env,
		     const struct init_sysinfo *si, struct init_cmds *cmds, void *storage,
		     size_t len)
{
	struct grpc_client_config cfg = client_config(env->uds_path);

	memset(a, 0, sizeof(*a));
	a->env = env;
	a->si = si;
	a->cmds = cmds;
	a->state = INIT_AGENT_WAITING;
	a->started_ms = clock_mono_ms();
	a->due_ms = a->started_ms;
	a->backoff_ms = INIT_BACKOFF_MIN_MS;
	a->heartbeat_ms = INIT_HEARTBEAT_DEFAULT_S * 1000;
	if (len < REPLAY_BYTES)
		return ERR_LIMIT;
	a->replay = storage;
	init_replay_setup(a->replay, (uint8_t *)storage + REPLAY_BYTES - LIMIT_INIT_REPLAY_BYTES);
	return grpc_client_init(&cfg, (uint8_t *)storage + REPLAY_BYTES, len - REPLAY_BYTES,
				&a->client);
}

int init_agent_fd(const struct init_agent *a)
{
	return grpc_client_fd(a->client);
}

void init_agent_io(struct init_agent *a)
{
	if (grpc_client_connected(a->client))
		grpc_client_run(a->client, 0);
}

/* The stream is gone or never came: wait, then dial again, waiting longer each time. */
static void schedule_redial(struct init_agent *a, int64_t now)
{
	a->state = INIT_AGENT_WAITING;
	a->call = NULL;
	a->heartbeat_pending = 0;
	a->claim_owed = 0;
	a->ack_mode = a->resumed = 0;
	a->egress_ok = 0; /* its egress calls are ended by init_egress_tick, outside callbacks */
	a->due_ms = now + a->backoff_ms;
	a->backoff_ms = a->backoff_ms * 2 > INIT_BACKOFF_MAX_MS ? INIT_BACKOFF_MAX_MS
								: a->backoff_ms * 2;
	a->failures++;
}

int init_agent_egress(const struct init_agent *a)
{
	return a->state == INIT_AGENT_READY && a->call && a->egress_ok &&
	       grpc_client_connected(a->client);
}

static int send_heartbeat(struct init_agent *a, Agentic__Sandbox__V1__AgentStatus status)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__Heartbeat hb = AGENTIC__SANDBOX__V1__HEARTBEAT__INIT;
	int r;

	hb.agent_id = (char *)a->env->agent_id;
	hb.timestamp_ms = clock_wall_ms();
	hb.status = status;
	hb.uptime_seconds = (clock_mono_ms() - a->started_ms) / 1000;
	hb.setup_status = "ready";
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT;
	m.heartbeat = &hb;
	r = grpc_call_send(a->call, &m.base);
	a->heartbeat_pending = r == -EAGAIN ? (int)status : 0;
	return r == -EAGAIN ? 0 : r;
}

/* The lines of /proc/self/status that say what the kernel enforces on the init (its uids, gids,
 * groups, capability sets, NoNewPrivs, seccomp), joined by newlines into out: its own report
 * of itself, which the verifier holds against the host's reading. "" when it cannot be read. */
static void self_status(char *out, size_t size)
{
	static const char *const keys[] = { "Uid:", "Gid:", "Groups:", "CapInh:", "CapPrm:",
					    "CapEff:", "CapBnd:", "CapAmb:", "NoNewPrivs:",
					    "Seccomp:" };
	char text[4096];
	size_t o = 0;
	ssize_t n = -1;
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);

	out[0] = '\0';
	if (fd >= 0) {
		n = read(fd, text, sizeof(text) - 1);
		close(fd);
	}
	if (n <= 0)
		return;
	text[n] = '\0';
	for (char *line = text, *end; *line; line = end + 1) {
		size_t len;

		end = strchr(line, '\n');
		if (!end)
			break;
		len = (size_t)(end - line);
		for (size_t k = 0; k < ARRAY_LEN(keys); k++) {
			if (strncmp(line, keys[k], strlen(keys[k])) != 0)
				continue;
			if (o + len + 2 > size) {
				out[0] = '\0'; /* cut short is no report: the verifier says none came */
				return;
			}
			memcpy(out + o, line, len);
			o += len;
			out[o++] = '\n';
			out[o] = '\0';
		}
	}
}

static int send_registration(struct init_agent *a)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__AgentRegistration reg = AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__INIT;
	Agentic__Sandbox__V1__SystemInfo sys = AGENTIC__SANDBOX__V1__SYSTEM_INFO__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry ack =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry out_ack =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry self =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry egress =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry listener =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry *lab[5] = { &ack, &out_ack, &egress };
	size_t n = 3;
	static char self_text[LIMIT_AGENT_SELF_BYTES];
	char lfd[12];
	int l = a->egress_hooks ? a->egress_hooks->listener(a->egress) : -1;

	ack.key = "agentic-stdin-ack";
	ack.value = "1";
	out_ack.key = "agentic-output-ack";
	out_ack.value = "1";
	egress.key = "agentic-egress";
	egress.value = "1";
	lfd[l >= 0 ? init_dec((uint32_t)l, lfd) : 0] = '\0';
	listener.key = "agentic-egress-listener";
	listener.value = lfd;
	self_status(self_text, sizeof(self_text));
	self.key = "agentic-self-status";
	self.value = self_text;
	sys.os = "linux";
	sys.kernel = (char *)a->si->kernel;
	sys.cpu_cores = a->si->cpu_cores;
	sys.memory_bytes = a->si->memory_bytes;
	reg.agent_id = (char *)a->env->agent_id;
	reg.instance_id = (char *)a->env->instance_id;
	reg.hostname = (char *)a->si->hostname;
	reg.system = &sys;
	reg.labels = lab;
	if (l >= 0)
		lab[n++] = &listener;
	if (self_text[0])
		lab[n++] = &self;
	reg.n_labels = n;
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION;
	m.registration = &reg;
	return grpc_call_send(a->call, &m.base);
}

static void dial(struct init_agent *a, int64_t now)
{
	const struct grpc_md md[] = {
		{ "x-agent-id", a->env->agent_id, strlen(a->env->agent_id) },
		{ "x-agent-instance-id", a->env->instance_id, strlen(a->env->instance_id) },
	};
	struct grpc_call *call;
	int r;

	r = grpc_client_start(a->client, &connect_method, md, ARRAY_LEN(md), 0, a, &call);
	if (r < 0) {
		if (a->failures == 0)
			log_warn("agent socket unreachable, retrying", "err=%s", log_q(err_str(r)));
		schedule_redial(a, now);
		return;
	}
	a->call = call;
	a->state = INIT_AGENT_REGISTERING;
	a->due_ms = now + INIT_ACK_TIMEOUT_MS;
	r = send_registration(a);
	if (r < 0) {
		log_error("cannot send the registration", "err=%s", log_q(err_str(r)));
		grpc_call_finish(call, GRPC_CANCELLED, NULL, NULL, 0);
	}
}

int64_t init_agent_tick(struct init_agent *a, int64_t now)
{
	if (now < a->due_ms)
		return a->due_ms;
	switch (a->state) {
	case INIT_AGENT_WAITING:
		dial(a, now);
		break;
	case INIT_AGENT_REGISTERING:
		log_warn("no registration ack, dialling again", "waited_ms=%d", INIT_ACK_TIMEOUT_MS);
		grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
		break;
	case INIT_AGENT_READY:
		a->due_ms = now + a->heartbeat_ms;
		if (send_heartbeat(a, AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY) < 0)
			grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
		break;
	}
	return a->due_ms;
}

static void on_ack(struct init_agent *a, const Agentic__Sandbox__V1__RegistrationAck *ack)
{
	bool direct;
	char why[256];
	int32_t s = ack->heartbeat_interval_seconds;

	if (a->state != INIT_AGENT_REGISTERING) {
		log_warn("registration ack out of turn, ignored", "state=%d", (int)a->state);
		return;
	}
	if (!ack->accepted) {
		log_warn("registration refused", "message=%s",
			 log_quote(why, sizeof(why), ack->message ? ack->message : ""));
		grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
		return;
	}
	a->heartbeat_ms = (uint32_t)(s <= 0 ? INIT_HEARTBEAT_DEFAULT_S
				     : s > INIT_HEARTBEAT_MAX_S ? INIT_HEARTBEAT_MAX_S : s) * 1000u;
	a->ack_mode = 0;
	a->egress_ok = 0;
	direct = false;
	for (size_t i = 0; i < ack->n_config; i++) {
		if (strcmp(ack->config[i]->key, "egress") == 0 &&
		    strcmp(ack->config[i]->value, "direct") == 0) {
			a->egress_ok = 1;
			direct = true;
		}
		if (strcmp(ack->config[i]->value, "1") != 0)
			continue;
		if (strcmp(ack->config[i]->key, "output-ack") == 0)
			a->ack_mode = 1;
		else if (strcmp(ack->config[i]->key, "egress") == 0)
			a->egress_ok = 1;
	}
	if (a->egress_hooks)
		a->egress_hooks->direct(a->egress, direct);
	/* without acks what was kept cannot be matched to the transcript: send on, keep none */
	a->resumed = !a->ack_mode;
	if (!a->ack_mode) {
		uint64_t all[2] = { UINT64_MAX, UINT64_MAX };

		init_replay_ack(a->replay, all, UINT64_MAX);
	}
	a->state = INIT_AGENT_READY;
	a->backoff_ms = INIT_BACKOFF_MIN_MS;
	a->failures = 0;
	a->registrations++;
	a->due_ms = clock_mono_ms() + a->heartbeat_ms;
	log_info("registered", "registrations=%llu heartbeat_s=%u output_ack=%d egress=%d",
		 (unsigned long long)a->registrations, a->heartbeat_ms / 1000, a->ack_mode,
		 a->egress_ok);
	if (send_heartbeat(a, AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY) < 0)
		grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
	else
		init_agent_flush(a);
}

static int send_claim_ack(struct init_agent *a)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__ClaimAck ack = AGENTIC__SANDBOX__V1__CLAIM_ACK__INIT;
	int r;

	ack.name = (char *)a->env->agent_id;
	ack.env_count = a->claim_count;
	ack.error = (char *)(a->claim_error ? a->claim_error : "");
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_CLAIM_ACK;
	m.claim_ack = &ack;
	r = grpc_call_send(a->call, &m.base);
	a->claim_owed = r == -EAGAIN;
	return r == -EAGAIN ? 0 : r;
}

/* A claim of this warm sandbox: its env in place for what follows, then the answer. The
 * name is the one the create gave it; the init's own (AGENT_ID) stays what agenticd knows
 * its connection by. */
static void on_claim(struct init_agent *a, const Agentic__Sandbox__V1__SandboxClaim *m)
{
	const char *why = NULL;
	size_t n = m->n_env;

	if (init_cmds_claim(a->cmds, m, &why) != 0 ||
	    init_claim_files(m, a->env->workload_uid, a->env->workload_gid, &why) != 0) {
		log_warn("claim refused", "reason=%s", log_q(why));
		n = 0;
	} else {
		why = NULL;
		log_info("claimed", "name=%s env=%u files=%u", log_q(m->name),
			 (unsigned)n, (unsigned)m->n_files);
	}
	a->claim_count = (uint32_t)n;
	a->claim_error = why;
	if (send_claim_ack(a) < 0)
		grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
}

/* Sends one output chunk or result (off: its offset or seq, for an acking stream); 0,
 * -EAGAIN (queue full) or another error. */
static int send_out(struct init_agent *a, const struct init_out *o, uint64_t off)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__OutputChunk chunk = AGENTIC__SANDBOX__V1__OUTPUT_CHUNK__INIT;
	Agentic__Sandbox__V1__CommandResult res = AGENTIC__SANDBOX__V1__COMMAND_RESULT__INIT;
	Agentic__Sandbox__V1__StdinAck sa = AGENTIC__SANDBOX__V1__STDIN_ACK__INIT;

	if (o->kind == INIT_OUT_STDIN_ACK) {
		sa.command_id = (char *)o->command_id;
		sa.consumed = o->consumed;
		m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDIN_ACK;
		m.stdin_ack = &sa;
	} else if (o->kind == INIT_OUT_RESULT) {
		res.command_id = (char *)o->command_id;
		res.exit_code = o->exit_code;
		res.error = (char *)o->error;
		res.duration_ms = o->duration_ms;
		res.duration_us = o->duration_us;
		res.success = o->success;
		res.seq = off;
		res.epoch = a->epoch;
		m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_COMMAND_RESULT;
		m.command_result = &res;
	} else {
		chunk.stream_id = (char *)o->command_id;
		chunk.data.data = (uint8_t *)o->data;
		chunk.data.len = o->len;
		chunk.timestamp_ms = clock_wall_ms();
		chunk.eof = o->eof;
		chunk.offset = off;
		chunk.epoch = a->epoch;
		if (o->kind == INIT_OUT_STDOUT) {
			m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT;
			m.stdout = &chunk;
		} else {
			m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR;
			m.stderr = &chunk;
		}
	}
	return grpc_call_send(a->call, &m.base);
}

/* What o's offset (or seq) is on an acking stream; 0 on another. */
static uint64_t out_offset(const struct init_agent *a, const struct init_out *o)
{
	if (!a->ack_mode)
		return 0;
	if (o->kind == INIT_OUT_RESULT)
		return a->next_seq + 1;
	if (o->kind == INIT_OUT_STDOUT || o->kind == INIT_OUT_STDERR)
		return a->next_off[o->kind == INIT_OUT_STDERR];
	return 0;
}

/* An output chunk with data or a result: what the transcript gets, and the ring keeps. */
static int kept(const struct init_out *o)
{
	return o->kind == INIT_OUT_RESULT ||
	       ((o->kind == INIT_OUT_STDOUT || o->kind == INIT_OUT_STDERR) && o->len);
}

static int send_failed(struct init_agent *a, int r)
{
	if (r == -EAGAIN)
		return 1;
	if (r < 0) {
		log_error("cannot send command output", "err=%s", log_q(err_str(r)));
		grpc_call_finish(a->call, GRPC_CANCELLED, NULL, NULL, 0);
		return 1;
	}
	return 0;
}

void init_agent_flush(struct init_agent *a)
{
	struct init_out o;
	uint64_t off;

	/* a heartbeat owed goes first; output waits behind it, and on an acking stream behind
	 * the resume ack, then behind what the ring holds to send again */
	if (a->state != INIT_AGENT_READY || !a->call || a->heartbeat_pending || !a->resumed)
		return;
	while (a->ack_mode && init_replay_next(a->replay, &o, &off)) {
		if (send_failed(a, send_out(a, &o, off)))
			return;
		init_replay_sent(a->replay);
	}
	while (a->call && init_cmds_peek(a->cmds, &o)) {
		off = out_offset(a, &o);
		/* a full ring: wait for agenticd's ack before anything more goes out */
		if (a->ack_mode && kept(&o) && !init_replay_room(a->replay, &o))
			return;
		if (send_failed(a, send_out(a, &o, off)))
			return;
		if (a->ack_mode && kept(&o)) {
			init_replay_push(a->replay, &o, off);
			if (o.kind == INIT_OUT_RESULT)
				a->next_seq = off;
			else
				a->next_off[o.kind == INIT_OUT_STDERR] += o.len;
		}
		init_cmds_consume(a->cmds);
	}
}

static void on_output_ack(struct init_agent *a, const Agentic__Sandbox__V1__OutputAck *ack)
{
	uint64_t next[2] = { ack->stdout, ack->stderr };

	if (!a->ack_mode)
		return;
	init_replay_ack(a->replay, next, ack->results);
	if (ack->resume) {
		if (ack->stdout > a->next_off[0] || ack->stderr > a->next_off[1] ||
		    ack->results > a->next_seq)
			log_warn("agenticd acks more than was sent", "stdout=%llu/%llu stderr=%llu/%llu",
				 (unsigned long long)ack->stdout, (unsigned long long)a->next_off[0],
				 (unsigned long long)ack->stderr, (unsigned long long)a->next_off[1]);
		a->epoch = ack->epoch;
		a->resumed = 1;
		init_replay_rewind(a->replay);
	}
	init_agent_flush(a);
}

static void on_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct init_agent *a = grpc_call_user(call);
	const Agentic__Sandbox__V1__ManagementMessage *m = (const void *)msg;

	switch (m->payload_case) {
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK:
		on_ack(a, m->registration_ack);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_PING:
		if (a->state == INIT_AGENT_READY &&
		    send_heartbeat(a, AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY) < 0)
			grpc_call_finish(call, GRPC_CANCELLED, NULL, NULL, 0);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_COMMAND:
		init_cmds_start(a->cmds, m->command);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_STDIN:
		init_cmds_stdin(a->cmds, m->stdin);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_PTY_CONTROL:
		init_cmds_signal(a->cmds, m->pty_control);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_OUTPUT_ACK:
		on_output_ack(a, m->output_ack);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_CLAIM:
		on_claim(a, m->claim);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_SHUTDOWN:
		log_info("shutdown requested by agenticd", "grace_s=%d",
			 (int)m->shutdown->grace_period_seconds);
		a->shutdown_requested = 1;
		break;
	default:
		log_warn("agent message not handled", "kind=%d", (int)m->payload_case);
		break;
	}
}

static void on_writable(struct grpc_call *call)
{
	struct init_agent *a = grpc_call_user(call);

	if ((a->heartbeat_pending && send_heartbeat(a, a->heartbeat_pending) < 0) ||
	    (a->claim_owed && send_claim_ack(a) < 0)) {
		grpc_call_finish(call, GRPC_CANCELLED, NULL, NULL, 0);
		return;
	}
	init_agent_flush(a);
}

static void on_done(struct grpc_call *call, int status, const char *message)
{
	struct init_agent *a = grpc_call_user(call);
	char why[256];

	if (a->call != call)
		return;
	log_warn("agent stream ended", "status=%s message=%s retry_ms=%u", grpc_status_name(status),
		 log_quote(why, sizeof(why), message ? message : ""), a->backoff_ms);
	schedule_redial(a, clock_mono_ms());
}

void init_agent_stop(struct init_agent *a, int timeout_ms)
{
	int64_t end = clock_mono_ms() + timeout_ms;

	if (a->state != INIT_AGENT_READY || !a->call)
		return;
	if (send_heartbeat(a, AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_SHUTTING_DOWN) < 0 ||
	    grpc_call_finish(a->call, GRPC_OK, NULL, NULL, 0) < 0)
		return;
	/* the half-close goes out behind the heartbeat; the server's end of the call is ours to
	 * wait for, not to need */
	while (a->call && grpc_client_connected(a->client)) {
		int64_t left = end - clock_mono_ms();

		if (left <= 0)
			break;
		grpc_client_run(a->client, (int)left);
	}
}
