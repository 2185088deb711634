/* init.c: fake inits, one per life of a container, and the gRPC calls their Connect streams
 * run on. The calls are fakes of src/grpc's (-Wl,--wrap); what reaches agenticd goes through
 * agent/'s own handlers (agent_admit, then agent_methods' on_start, on_message, on_done), so
 * registration, READY, output acks with their resumes, and exec all run the product's code.
 *
 * Each init numbers its stdout and stderr bytes from the start of its life and keeps what it
 * wrote as records (a chunk as it was read, or a result) in a ring, as agentic-init's replay
 * ring does: a record goes only once an ack covers all of it and all before it, and a resume
 * sends again every record still held, from its own offset (so agenticd sees overlaps). The
 * bytes are kept here too, so a run's transcript can be compared with what its init produced:
 * a prefix of it, byte for byte, and never shorter than what the init dropped. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "sim.h"

#undef stdin
#undef stdout
#undef stderr

#define LIVES 256
#define OUT_CAP 6144
#define CMDS 8
#define RESULTS 64

struct fcall {
	struct fcall *self;           /* a check that a pointer is one of ours */
	struct grpc_peer peer;
	void *user;
	uint8_t app[32];
	int fd[2];
	bool finished;                /* agenticd ended it; on_done is owed */
	bool done;                    /* on_done ran */
	bool writable_owed;
	int status;
	char md_id[SB_NAME_BYTES], md_inst[SB_ID_BYTES];
	struct finit *init;
};

struct fcmd {
	bool used;
	char id[24];
	uint32_t left;
};

struct fres {
	char id[24];
	int32_t code;
	uint64_t seq;
};

/* a run of a stream's bytes that one command wrote ("" : the workload's own) */
#define SEGS 256
struct fseg {
	uint64_t start;
	char id[24];
};

#define RECS 2048
struct frec {
	uint8_t kind;                 /* 0 stdout, 1 stderr, 2 result */
	uint32_t len;                 /* chunk */
	uint64_t off;                 /* chunk: its offset; result: its index in res */
	char id[24];                  /* chunk: the command that wrote it */
};

struct finit {
	uint32_t life;                /* 0: slot unused */
	bool alive;
	bool hang;                    /* never reports READY */
	int64_t pid;
	uint32_t uid;
	char name[SB_NAME_BYTES], instance[SB_ID_BYTES];
	struct fcall *call;
	bool reg_sent, reg_acked, ready_sent, resumed;
	uint32_t epoch;
	uint8_t out[2][OUT_CAP];
	uint64_t produced[2], acked[2];
	struct frec rec[RECS];
	uint32_t head, send, tail;    /* held: [head, tail); next to send: send */
	struct fcmd cmd[CMDS];
	struct fres res[RESULTS];
	uint32_t nres;
	uint64_t seq_next;
	uint64_t verified[2];         /* transcript bytes compared so far */
	struct fseg seg[2][SEGS];
	uint32_t nseg[2];
};

static struct finit lives[LIVES];
static char last_command[24];
static uint32_t last_life;
static struct fcall *calls[64];
uint64_t sim_bytes_checked;

static struct finit *life_get(uint32_t life)
{
	struct finit *f = &lives[life % LIVES];

	return life && f->life == life ? f : NULL;
}

void init_reset(void)
{
	for (int i = 0; i < 64; i++) {
		if (calls[i]) {
			close(calls[i]->fd[0]);
			close(calls[i]->fd[1]);
			free(calls[i]);
			calls[i] = NULL;
		}
	}
	memset(lives, 0, sizeof(lives));
}

void init_started(struct e_ct *ct)
{
	struct finit *f = &lives[ct->life % LIVES];

	if (f->call)
		f->call->init = NULL;
	memset(f, 0, sizeof(*f));
	f->life = ct->life;
	f->alive = true;
	f->hang = chance(30);
	f->pid = ct->pid;
	f->uid = (uint32_t)strtoul(ct->uid, NULL, 10);
	snprintf(f->name, sizeof(f->name), "%s", ct->name);
	snprintf(f->instance, sizeof(f->instance), "%s", ct->instance);
	f->seq_next = 1;
}

/* ---- the calls ---- */

static struct fcall *fc(struct grpc_call *call)
{
	struct fcall *c = (struct fcall *)call;

	SIM_CHECK(c && c->self == c, "grpc: a call that is not one of the fake's");
	return c;
}

static const struct grpc_method *connect_method(void)
{
	return &agent_methods[0];
}

/* The server noticed the stream is gone: on_done, once. */
static void call_done(struct fcall *c, int status, const char *why)
{
	if (c->done)
		return;
	c->done = true;
	if (c->init && c->init->call == c)
		c->init->call = NULL;
	c->init = NULL;
	if (!sim_crashing)
		connect_method()->handler.on_done((struct grpc_call *)c, status, why);
	for (int i = 0; i < 64; i++)
		if (calls[i] == c)
			calls[i] = NULL;
	close(c->fd[0]);
	close(c->fd[1]);
	free(c);
}

void init_died(struct e_ct *ct)
{
	struct finit *f = life_get(ct->life);

	if (!f)
		return;
	f->alive = false;
	if (f->call) {
		struct fcall *c = f->call;

		c->finished = true; /* the socket closed: the server sees it on its next turn */
		c->status = GRPC_UNAVAILABLE;
	}
}

void init_crash(void)
{
	for (int i = 0; i < 64; i++)
		if (calls[i])
			call_done(calls[i], GRPC_UNAVAILABLE, "agenticd died");
	for (int i = 0; i < LIVES; i++) {
		struct finit *f = &lives[i];

		f->call = NULL;
		f->reg_sent = f->reg_acked = f->ready_sent = f->resumed = false;
	}
}

int __wrap_grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct fcall *c = fc(call);
	const Agentic__Sandbox__V1__ManagementMessage *m = (const void *)msg;
	struct finit *f = c->init;

	if (c->finished)
		return -EPIPE;
	if (chance(20)) {
		c->writable_owed = true;
		trace("grpc: send queue full for %s", f ? f->name : "-");
		return -EAGAIN;
	}
	if (!f)
		return 0;
	switch (m->payload_case) {
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_REGISTRATION_ACK:
		f->reg_acked = true;
		trace("init %s/%u: registration acked", f->name, f->life);
		break;
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_OUTPUT_ACK: {
		const Agentic__Sandbox__V1__OutputAck *oa = m->output_ack;
		uint64_t want[2] = { oa->stdout, oa->stderr };

		for (int s = 0; s < 2; s++) {
			SIM_CHECK(want[s] <= f->produced[s], "init %s/%u: agenticd acked %llu bytes "
				  "of stream %d, the init produced %llu", f->name, f->life,
				  (unsigned long long)want[s], s, (unsigned long long)f->produced[s]);
			/* asking again for bytes the init dropped: the transcript lost them */
			SIM_CHECK(want[s] >= f->acked[s], "init %s/%u: agenticd asks for stream %d "
				  "from %llu, but the init dropped all before %llu on its ack: those "
				  "bytes are gone", f->name, f->life, s, (unsigned long long)want[s],
				  (unsigned long long)f->acked[s]);
		}
		/* agentic-init's init_replay_ack: drop the records the ack covers, in order */
		while (f->head < f->tail) {
			const struct frec *r = &f->rec[f->head];
			bool covered = r->kind == 2 ? f->res[r->off].seq <= oa->results
						    : r->off + r->len <= want[r->kind];

			if (!covered)
				break;
			if (r->kind < 2 && r->off + r->len > f->acked[r->kind])
				f->acked[r->kind] = r->off + r->len;
			f->head++;
		}
		if (f->send < f->head)
			f->send = f->head;
		if (oa->resume) {
			f->epoch = oa->epoch;
			f->resumed = true;
			f->send = f->head; /* init_replay_rewind */
		}
		trace("init %s/%u: output ack out=%llu err=%llu results=%llu resume=%d epoch=%u "
		      "(holds %u records)", f->name, f->life, (unsigned long long)oa->stdout,
		      (unsigned long long)oa->stderr, (unsigned long long)oa->results, oa->resume,
		      oa->epoch, f->tail - f->head);
		break;
	}
	case AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_COMMAND:
		for (int i = 0; i < CMDS; i++) {
			if (f->cmd[i].used)
				continue;
			f->cmd[i].used = true;
			snprintf(f->cmd[i].id, sizeof(f->cmd[i].id), "%s", m->command->command_id);
			snprintf(last_command, sizeof(last_command), "%s", m->command->command_id);
			last_life = f->life;
			f->cmd[i].left = 1 + rnd_below(600);
			trace("init %s/%u: command %s", f->name, f->life, f->cmd[i].id);
			return 0;
		}
		/* more than the fake keeps: it ends at once */
		if (f->nres < RESULTS && f->tail < RECS) {
			struct fres *res = &f->res[f->nres];
			struct frec *r = &f->rec[f->tail++];

			snprintf(res->id, sizeof(res->id), "%s", m->command->command_id);
			res->code = 126;
			res->seq = f->seq_next++;
			r->kind = 2;
			r->off = f->nres++;
		}
		break;
	default:
		break;
	}
	return 0;
}

int __wrap_grpc_call_finish(struct grpc_call *call, int status, const char *message,
			    const struct grpc_md *md, size_t nmd)
{
	struct fcall *c = fc(call);

	if (!c->finished)
		trace("grpc: agenticd ends the stream of %s: %d %s", c->init ? c->init->name : "-",
		      status, message ? message : "");
	c->finished = true;
	c->status = status;
	return 0;
}

void __wrap_grpc_call_flush(struct grpc_call *call)
{
	(void)fc(call);
}

const char *__wrap_grpc_call_md(const struct grpc_call *call, const char *key, size_t *len)
{
	struct fcall *c = fc((struct grpc_call *)call);
	const char *v = strcmp(key, "x-agent-id") == 0 ? c->md_id
		       : strcmp(key, "x-agent-instance-id") == 0 ? c->md_inst : NULL;

	if (v && len)
		*len = strlen(v);
	return v;
}

const struct grpc_peer *__wrap_grpc_call_peer(const struct grpc_call *call)
{
	return &fc((struct grpc_call *)call)->peer;
}

void __wrap_grpc_call_set_user(struct grpc_call *call, void *user)
{
	fc(call)->user = user;
}

void *__wrap_grpc_call_user(const struct grpc_call *call)
{
	return fc((struct grpc_call *)call)->user;
}

void *__wrap_grpc_call_app(struct grpc_call *call)
{
	return fc(call)->app;
}

void __wrap_grpc_server_drop_reserved(struct grpc_server *s, uint32_t slot)
{
}

/* ---- what an init does ---- */

static void deliver(struct fcall *c, Agentic__Sandbox__V1__AgentMessage *m)
{
	connect_method()->handler.on_message((struct grpc_call *)c, &m->base);
}

static void do_connect(struct finit *f)
{
	struct fcall *c;
	int slot = -1, r;

	for (int i = 0; i < 64; i++)
		if (!calls[i]) {
			slot = i;
			break;
		}
	if (slot < 0)
		return;
	in_harness = true;
	c = calloc(1, sizeof(*c));
	in_harness = false;
	SIM_CHECK(c, "out of memory");
	c->self = c;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c->fd) != 0)
		sim_fail("socketpair: %s", strerror(errno));
	calls[slot] = c;
	c->init = f;
	f->call = c;
	f->reg_sent = f->reg_acked = f->ready_sent = f->resumed = false;
	snprintf(c->md_id, sizeof(c->md_id), "%s", f->name);
	snprintf(c->md_inst, sizeof(c->md_inst), "%s", f->instance);
	c->peer = (struct grpc_peer){ .pid = (pid_t)f->pid, .uid = f->uid, .gid = f->uid,
				      .slot = -1 };
	pidfd_register(-1, f->pid); /* the next peer pidfd is this process's */
	r = agent_admit(NULL, c->fd[0], &c->peer);
	c->peer.slot = r;
	pidfd_register(-2, 0);
	trace("init %s/%u: connects, admitted slot=%d", f->name, f->life, r);
	connect_method()->handler.on_start((struct grpc_call *)c);
}

static void send_registration(struct finit *f)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__AgentRegistration reg = AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry l =
		AGENTIC__SANDBOX__V1__AGENT_REGISTRATION__LABELS_ENTRY__INIT;
	Agentic__Sandbox__V1__AgentRegistration__LabelsEntry *lp[1] = { &l };

	reg.agent_id = f->name;
	reg.instance_id = f->instance;
	l.key = "agentic-output-ack";
	l.value = "1";
	reg.labels = lp;
	reg.n_labels = 1;
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_REGISTRATION;
	m.registration = &reg;
	f->reg_sent = true;
	trace("init %s/%u: registers", f->name, f->life);
	deliver(f->call, &m);
}

static void send_ready(struct finit *f)
{
	Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
	Agentic__Sandbox__V1__Heartbeat hb = AGENTIC__SANDBOX__V1__HEARTBEAT__INIT;

	hb.status = AGENTIC__SANDBOX__V1__AGENT_STATUS__AGENT_STATUS_READY;
	hb.setup_status = "ready";
	hb.agent_id = f->name;
	m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_HEARTBEAT;
	m.heartbeat = &hb;
	f->ready_sent = true;
	trace("init %s/%u: READY", f->name, f->life);
	deliver(f->call, &m);
}

/* The workload writes: into a running command's output, or the workload's own. */
static void produce(struct finit *f)
{
	int s = chance(250);
	uint32_t n = 1 + rnd_below(300);
	struct fcmd *cmd = NULL;

	for (int i = 0; i < CMDS && !cmd; i++)
		if (f->cmd[i].used)
			cmd = &f->cmd[i];
	if (cmd) {
		if (n > cmd->left)
			n = cmd->left;
		cmd->left -= n;
	}
	if (f->produced[s] + n > OUT_CAP)
		n = (uint32_t)(OUT_CAP - f->produced[s]);
	if (n && (!f->nseg[s] || strcmp(f->seg[s][f->nseg[s] - 1].id, cmd ? cmd->id : "") != 0)) {
		if (f->nseg[s] == SEGS)
			n = 0;
		else {
			f->seg[s][f->nseg[s]].start = f->produced[s];
			snprintf(f->seg[s][f->nseg[s]].id, sizeof(f->seg[s][0].id), "%s",
				 cmd ? cmd->id : "");
			f->nseg[s]++;
		}
	}
	if (f->tail + 2 > RECS)
		return; /* the ring is full: the workload blocks */
	for (uint32_t i = 0; i < n; i++)
		f->out[s][f->produced[s] + i] = (uint8_t)('a' + rnd_below(26));
	if (n) {
		struct frec *r = &f->rec[f->tail++];

		r->kind = (uint8_t)s;
		r->off = f->produced[s];
		r->len = n;
		snprintf(r->id, sizeof(r->id), "%s", cmd ? cmd->id : "");
	}
	f->produced[s] += n;
	if (cmd && cmd->left == 0 && f->nres < RESULTS) {
		struct fres *res = &f->res[f->nres];
		struct frec *r = &f->rec[f->tail++];

		snprintf(res->id, sizeof(res->id), "%s", cmd->id);
		res->code = (int32_t)rnd_below(3);
		res->seq = f->seq_next++;
		r->kind = 2;
		r->off = f->nres++;
		cmd->used = false;
	}
}

/* Sends its records from the send position on, each as it was written. */
static void send_output(struct finit *f, bool all)
{
	while (f->send < f->tail && f->call && !f->call->finished) {
		const struct frec *r = &f->rec[f->send++];
		Agentic__Sandbox__V1__AgentMessage m = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__INIT;
		Agentic__Sandbox__V1__OutputChunk o = AGENTIC__SANDBOX__V1__OUTPUT_CHUNK__INIT;
		Agentic__Sandbox__V1__CommandResult cr = AGENTIC__SANDBOX__V1__COMMAND_RESULT__INIT;

		if (r->kind == 2) {
			const struct fres *res = &f->res[r->off];

			cr.command_id = (char *)res->id;
			cr.exit_code = res->code;
			cr.seq = res->seq;
			cr.epoch = f->epoch;
			cr.success = 1;
			cr.error = "";
			m.payload_case = AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_COMMAND_RESULT;
			m.command_result = &cr;
		} else {
			o.stream_id = (char *)r->id;
			o.data.data = f->out[r->kind] + r->off;
			o.data.len = r->len;
			o.offset = r->off;
			o.epoch = f->epoch;
			m.payload_case = r->kind ? AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDERR
						 : AGENTIC__SANDBOX__V1__AGENT_MESSAGE__PAYLOAD_STDOUT;
			if (r->kind)
				m.stderr = &o;
			else
				m.stdout = &o;
		}
		deliver(f->call, &m);
		if (!all && chance(300))
			return;
	}
}

static void act(struct finit *f, bool flush)
{
	struct fcall *c = f->call;

	if (!f->alive)
		return;
	if (!c) {
		if (!flush && !chance(500))
			return;
		do_connect(f);
		if (!f->call || f->call->finished || (!flush && chance(300)))
			return;
		c = f->call;
	}
	if (c->finished)
		return;
	if (!f->reg_sent) {
		send_registration(f);
		if (!flush && chance(300))
			return;
	}
	if (!f->reg_acked || c->finished)
		return;
	if (!f->ready_sent && !f->hang) {
		send_ready(f);
		return;
	}
	if (flush) {
		send_output(f, true);
		return;
	}
	switch (rnd_below(10)) {
	case 0:
		trace("init %s/%u: connection lost", f->name, f->life);
		call_done(c, GRPC_UNAVAILABLE, "connection lost");
		return;
	case 1:
	case 2:
	case 3:
		produce(f);
		return;
	default:
		if (f->resumed)
			send_output(f, false);
	}
}

void init_step(void)
{
	uint32_t alive[LIVES], n = 0;

	for (uint32_t i = 0; i < LIVES; i++)
		if (lives[i].life && lives[i].alive)
			alive[n++] = i;
	if (n)
		act(&lives[alive[rnd_below(n)]], false);
}

void init_flush_all(void)
{
	for (int i = 0; i < LIVES; i++)
		if (lives[i].life && lives[i].alive && !lives[i].hang)
			act(&lives[i], true);
}

bool init_all_sent(void)
{
	for (int i = 0; i < LIVES; i++) {
		const struct finit *f = &lives[i];

		if (!f->life || !f->alive || f->hang || !f->call || !f->resumed)
			continue;
		if (f->send < f->tail)
			return false;
	}
	return true;
}

/* The server's turn: streams agenticd ended, sends it owes. */
void init_loop(void)
{
	for (int i = 0; i < 64; i++) {
		struct fcall *c = calls[i];

		if (!c)
			continue;
		if (c->finished) {
			call_done(c, c->status, "finished");
			continue;
		}
		if (c->writable_owed) {
			c->writable_owed = false;
			connect_method()->handler.on_writable((struct grpc_call *)c);
		}
	}
}

/* ---- exec clients: what an attached client got is its command's bytes, in order ---- */
#define CLIENTS 4096
struct client {
	bool used, done;
	char id[24];
	uint32_t life;
	uint64_t got[2];
	int32_t code;
};
static struct client clients[CLIENTS];
static uint32_t nclients;
uint64_t sim_execs, sim_exec_bytes;

void init_clients_reset(void)
{
	memset(clients, 0, sizeof(clients));
	nclients = 0;
}

/* The bytes of stream s command id wrote, from offset `from` of them: memcmp with data. */
static bool command_bytes_match(const struct finit *f, int s, const char *id, uint64_t from,
				const uint8_t *data, size_t len, uint64_t *total)
{
	uint64_t at = 0;
	size_t done = 0;

	for (uint32_t k = 0; k < f->nseg[s]; k++) {
		uint64_t a = f->seg[s][k].start;
		uint64_t b = k + 1 < f->nseg[s] ? f->seg[s][k + 1].start : f->produced[s];

		if (strcmp(f->seg[s][k].id, id) != 0)
			continue;
		for (uint64_t o = a; o < b; o++, at++)
			if (at >= from && done < len && f->out[s][o] != data[done++])
				return false;
	}
	*total = at;
	return done == len;
}

static int client_output(void *ctx, int stream, const void *data, size_t len);
static void client_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
			const char *transcript_error);
static const struct exec_sink_ops client_ops = {
	.client = "ndjson", .output = client_output, .done = client_done,
};

uint32_t init_exec(struct sandbox *sb, int32_t conn)
{
	struct exec_sink sink = { &client_ops, NULL };
	static const char *argv[] = { "/bin/sh", "-c", "make", NULL };
	struct exec_req req = { .argc = 3 };
	int x;

	memcpy(req.argv, argv, sizeof(argv));
	last_command[0] = '\0';
	if (conn >= 0 && nclients < CLIENTS)
		conn = (int32_t)nclients;
	else
		conn = -1;
	sink.ctx = (void *)(intptr_t)conn;
	x = exec_begin(sb, &req, conn >= 0 ? &sink : NULL);
	trace("exec on %s -> %d (%s, client %d)", sb->name, x, last_command, conn);
	if (x < 0)
		return 0;
	sim_execs++;
	if (conn >= 0) {
		struct client *c = &clients[nclients++];

		c->used = true;
		snprintf(c->id, sizeof(c->id), "%s", last_command);
		c->life = last_life;
	}
	return 1;
}

/* The exec client: an exec_sink whose ctx is the client's index. */
static int client_output(void *ctx, int stream, const void *data, size_t len)
{
	int32_t conn = (int32_t)(intptr_t)ctx;
	struct client *c = conn >= 0 && (uint32_t)conn < nclients ? &clients[conn] : NULL;
	struct finit *f = c ? life_get(c->life) : NULL;
	uint64_t total = 0;

	if (!c || !f)
		return 0;
	SIM_CHECK(!c->done, "exec %s: output to its client after its end", c->id);
	SIM_CHECK(command_bytes_match(f, stream, c->id, c->got[stream], data, len, &total),
		  "exec %s: its client got bytes %llu..%llu of stream %d that are not what the "
		  "command wrote there (lost, duplicated or another's)", c->id,
		  (unsigned long long)c->got[stream], (unsigned long long)(c->got[stream] + len),
		  stream);
	c->got[stream] += len;
	sim_exec_bytes += len;
	return 0;
}

static void client_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
			const char *transcript_error)
{
	int32_t conn = (int32_t)(intptr_t)ctx;
	struct client *c = conn >= 0 && (uint32_t)conn < nclients ? &clients[conn] : NULL;
	struct finit *f = c ? life_get(c->life) : NULL;
	const struct fres *r = NULL;

	if (!c)
		return;
	SIM_CHECK(!c->done, "exec %s: its client told twice that it ended", c->id);
	c->done = true;
	c->code = exit_code;
	for (uint32_t i = 0; f && i < f->nres; i++)
		if (strcmp(f->res[i].id, c->id) == 0)
			r = &f->res[i];
	trace("exec %s: client told it ended, code %d", c->id, exit_code);
	if (!f || !r || exit_code != r->code)
		return; /* ended by agenticd (the sandbox went): a prefix is all there is */
	for (int s = 0; s < 2; s++) {
		uint64_t total = 0;

		command_bytes_match(f, s, c->id, 0, NULL, 0, &total);
		SIM_CHECK(c->got[s] == total, "exec %s ended with its result (code %d) but its client "
			  "got %llu of the %llu bytes it wrote on stream %d", c->id, exit_code,
			  (unsigned long long)c->got[s], (unsigned long long)total, s);
	}
}

/* ---- the transcript check ---- */

void init_check_run(const struct sandbox *sb)
{
	const char *p = strstr(transcript_of(sb)->run.key, "pid:[");
	uint8_t buf[OUT_CAP + 1];
	struct finit *f;
	uint32_t life;

	if (!transcript_of(sb)->run.open || !p)
		return;
	life = (uint32_t)strtoul(p + 5, NULL, 10);
	f = life_get(life);
	if (!f)
		return;
	for (int s = 0; s < 2; s++) {
		int fd = transcript_of(sb)->run.fd[s];
		off_t len = fd >= 0 ? lseek(fd, 0, SEEK_END) : -1;
		ssize_t n;

		if (fd < 0 || len < 0)
			continue;
		SIM_CHECK((uint64_t)len <= f->produced[s], "transcript of %s (life %u) stream %d "
			  "holds %lld bytes, its init produced %llu: bytes duplicated", sb->name,
			  life, s, (long long)len, (unsigned long long)f->produced[s]);
		SIM_CHECK((uint64_t)len >= f->acked[s], "transcript of %s (life %u) stream %d holds "
			  "%lld bytes, agenticd acked %llu: acked bytes lost", sb->name, life, s,
			  (long long)len, (unsigned long long)f->acked[s]);
		if ((uint64_t)len == f->verified[s])
			continue;
		fd = openat(transcript_of(sb)->run.dirfd, s ? "stderr.log" : "stdout.log", O_RDONLY | O_CLOEXEC);
		n = fd >= 0 ? pread(fd, buf, (size_t)len, 0) : -1;
		if (fd >= 0)
			close(fd);
		SIM_CHECK(n == len, "transcript of %s unreadable: %s", sb->name, strerror(errno));
		SIM_CHECK(memcmp(buf, f->out[s], (size_t)len) == 0, "transcript of %s (life %u) "
			  "stream %d differs from what its init produced within its %lld bytes",
			  sb->name, life, s, (long long)len);
		sim_bytes_checked += (uint64_t)len - f->verified[s];
		f->verified[s] = (uint64_t)len;
	}
}

/* A run whose init is alive and resumed, after a flush: everything it produced is there. */
void init_check_complete(const struct sandbox *sb);
void init_check_complete(const struct sandbox *sb)
{
	const char *p = strstr(transcript_of(sb)->run.key, "pid:[");
	struct finit *f = p ? life_get((uint32_t)strtoul(p + 5, NULL, 10)) : NULL;

	if (!transcript_of(sb)->run.open || !f || !f->alive || !f->resumed || !f->call || transcript_of(sb)->out_stalled)
		return;
	for (int s = 0; s < 2; s++) {
		off_t len = lseek(transcript_of(sb)->run.fd[s], 0, SEEK_END);

		SIM_CHECK((uint64_t)len == f->produced[s], "transcript of %s (life %u) stream %d "
			  "holds %lld bytes after a flush, its init produced %llu: bytes lost",
			  sb->name, f->life, s, (long long)len, (unsigned long long)f->produced[s]);
	}
}
