/* exec.c: the exec engine (exec.h). A session is one CommandRequest sent on the sandbox's
 * Connect stream; output and the result come back on it. Every byte goes to the run's
 * transcript first (runlog.c) and then, when a client is attached, to its sink, which frames
 * it for that client. A client that vanishes costs nothing: the command runs on and its
 * transcript stays complete.
 *
 * Command ids are "x<session>.<gen>", so output finds its session without a search; output
 * for an id no session holds (a command started before agenticd restarted) still lands in the
 * transcript. Nothing here logs argv, env or output. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.pb-c.h"
#include "agent/agent_slot.h"
#include "agent/exec.h"
#include "lifecycle/lifecycle.h"
#include "sandbox/request.h"
#include "sandbox/sandbox.h"
#include "metrics/metrics.h"
#include "transcript/runlog.h"

/* stdio's stdin macro hides ManagementMessage's field of that name; no stdio stream is used */
#undef stdin

/* Unacknowledged stdin per command, for agents that acknowledge it: below the init's buffer
 * (LIMIT_INIT_STDIN_BYTES), which closes stdin when more arrives than it holds. */
#define STDIN_WINDOW (LIMIT_INIT_STDIN_BYTES - STDIN_CHUNK)

struct exec {
	bool used;
	uint32_t gen;
	struct sandbox *sb;        /* its slot in the sandbox table, while sb->gen == sb_gen */
	uint32_t sb_gen;
	struct exec_sink sink;     /* the client's; ops NULL: none (detached) */
	char id[24];
	int64_t started;           /* monotonic ms */
	int64_t sent_us;           /* monotonic us: the request went to the init */
	bool eof_sent;
	bool eof_wanted;
	bool tty;                  /* on a pseudo-terminal (exec_resize) */
	bool quiet;                /* exec_req.quiet: output counted, not written */
	uint32_t stdin_len;
	uint64_t stdin_sent, stdin_acked;
	uint8_t stdin_buf[STDIN_CHUNK];
};

static struct exec execs[LIMIT_EXECS];
static uint32_t exec_gen_next;

static struct sandbox *exec_sandbox(const struct exec *x)
{
	struct sandbox *sb = x->sb;

	return sb->state != SB_FREE && sb->gen == x->sb_gen ? sb : NULL;
}

size_t exec_table_bytes(void)
{
	return sizeof(execs);
}

uint32_t exec_table_slots(void)
{
	return LIMIT_EXECS;
}

/* One number of an id: decimal digits only, no sign, space or leading zero. */
static int id_number(const char *s, size_t len, uint32_t *out)
{
	char num[11];
	uint64_t v;

	if (len == 0 || len >= sizeof(num) || (s[0] == '0' && len > 1))
		return -EINVAL;
	memcpy(num, s, len);
	num[len] = '\0';
	if (parse_u64(num, UINT32_MAX, &v) != 0)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int exec_id_parse(const char *id, uint32_t *slot, uint32_t *gen)
{
	const char *dot = id && id[0] == 'x' ? strchr(id, '.') : NULL;

	if (!dot || id_number(id + 1, (size_t)(dot - id - 1), slot) != 0 ||
	    id_number(dot + 1, strlen(dot + 1), gen) != 0)
		return -EINVAL;
	return 0;
}

static struct exec *by_id(const struct sandbox *sb, const char *id)
{
	uint32_t i, g;

	if (exec_id_parse(id, &i, &g) != 0 || i >= LIMIT_EXECS)
		return NULL;
	if (!execs[i].used || execs[i].gen != g ||
	    execs[i].sb != sb || execs[i].sb_gen != sb->gen)
		return NULL;
	return &execs[i];
}

static void release(struct exec *x)
{
	struct sandbox *sb = exec_sandbox(x);
	struct agent_sb *a = sb ? agent_slot(sb) : NULL;

	if (a && a->exec_running)
		a->exec_running--;
	x->used = false;
}

/* Sends what stdin the session holds; true when nothing is left to send. notify: tell the
 * client's connection that room came back (never from inside exec_stdin, whose caller is
 * in the middle of handing bytes over). */
static bool send_stdin(struct exec *x, bool notify)
{
	Agentic__Sandbox__V1__StdinChunk in = AGENTIC__SANDBOX__V1__STDIN_CHUNK__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	struct sandbox *sb = exec_sandbox(x);
	const struct agent_sb *a;
	int r;

	if (x->eof_sent || (!x->stdin_len && !x->eof_wanted))
		return true;
	if (!sb || !(a = agent_slot(sb))->call || !a->registered)
		return false;
	if (a->stdin_ack && x->stdin_sent - x->stdin_acked + x->stdin_len > STDIN_WINDOW)
		return true; /* the ack will send it */
	in.command_id = x->id;
	in.data.data = x->stdin_buf;
	in.data.len = x->stdin_len;
	in.eof = x->eof_wanted;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_STDIN;
	m.stdin = &in;
	r = grpc_call_send(a->call, &m.base);
	if (r != 0)
		return false;
	x->stdin_sent += x->stdin_len;
	x->stdin_len = 0;
	if (x->eof_wanted)
		x->eof_sent = true;
	if (notify && x->sink.ops && x->sink.ops->stdin_taken)
		x->sink.ops->stdin_taken(x->sink.ctx);
	return true;
}

/* an exec's env: the request's, and the proxy's variables when the sandbox has a policy */
#define EXEC_ENV_MAX (LIMIT_SANDBOX_ENV + REQUEST_PROXY_ENV_N)

/* A CommandRequest's env, built on exec_begin's stack. */
struct exec_env {
	Agentic__Sandbox__V1__CommandRequest__EnvEntry ents[EXEC_ENV_MAX];
	Agentic__Sandbox__V1__CommandRequest__EnvEntry *envp[EXEC_ENV_MAX];
	char text[LIMIT_ADMIN_BODY_BYTES];
	uint32_t n;
};

/* A free session of sb's, set up but not in use yet; NULL: none is free. */
static struct exec *session_new(void)
{
	struct exec *x = NULL;

	for (uint32_t i = 0; i < LIMIT_EXECS && !x; i++)
		if (!execs[i].used)
			x = &execs[i];
	return x;
}

static void session_setup(struct exec *x, struct sandbox *sb, const struct exec_sink *sink)
{
	memset(x, 0, offsetof(struct exec, stdin_buf));
	x->gen = ++exec_gen_next;
	x->sb = sb;
	x->sb_gen = sb->gen;
	if (sink)
		x->sink = *sink;
	/* a client that sends no stdin: the command sees EOF at once */
	x->eof_wanted = !x->sink.ops || !x->sink.ops->stdin_taken;
	snprintf(x->id, sizeof(x->id), "x%u.%u", (unsigned)(x - execs), x->gen);
}

/* The request's env into e; 0 or ERR_LIMIT (it does not fit). A sandbox with an egress
 * policy (proxy): the proxy's variables, over the request's own. */
static int env_build(const struct exec_req *req, bool proxy, struct exec_env *e)
{
	const char *env[EXEC_ENV_MAX];
	size_t used = 0;
	uint32_t i, nenv = 0;

	for (i = 0; i < req->nenv; i++)
		if (!proxy || !request_proxy_env_key(req->env[i]))
			env[nenv++] = req->env[i];
	for (i = 0; proxy && i < REQUEST_PROXY_ENV_N; i++)
		env[nenv++] = request_proxy_env[i];
	for (i = 0; i < nenv; i++) {
		const char *eq = strchr(env[i], '=');
		size_t kl = eq ? (size_t)(eq - env[i]) : strlen(env[i]);

		if (used + kl + 1 > sizeof(e->text))
			return ERR_LIMIT;
		memcpy(e->text + used, env[i], kl);
		e->text[used + kl] = '\0';
		agentic__sandbox__v1__command_request__env_entry__init(&e->ents[i]);
		e->ents[i].key = e->text + used;
		e->ents[i].value = (char *)(eq ? eq + 1 : "");
		e->envp[i] = &e->ents[i];
		used += kl + 1;
	}
	e->n = nenv;
	return 0;
}

/* Writes the start line, then sends m: 0, or what exec_begin returns for it. */
static int request_send(struct sandbox *sb, struct grpc_call *call, struct exec *x,
			const struct exec_req *req, Agentic__Sandbox__V1__ManagementMessage *m)
{
	int r;

	/* A transcript that cannot be written (a full disk) starts nothing: the output of
	 * what runs already waits for it. The start line goes first, so every command in
	 * commands.log has its start. */
	if (transcript_of(sb)->run.error)
		return transcript_of(sb)->run.error;
	if (!runlog_command_start(sb, x->id, (char *const *)req->argv, req->argc))
		return transcript_of(sb)->run.error ? transcript_of(sb)->run.error : -EIO;
	r = grpc_call_send(call, &m->base);
	if (r != 0) {
		runlog_command_end(sb, x->id, -1, 0, 0); /* never started */
		return r == -EAGAIN ? -EAGAIN : ERR_LIMIT;
	}
	grpc_call_flush(call);
	return 0;
}

int exec_begin(struct sandbox *sb, const struct exec_req *req, const struct exec_sink *sink)
{
	Agentic__Sandbox__V1__CommandRequest cr = AGENTIC__SANDBOX__V1__COMMAND_REQUEST__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	struct agent_sb *a = agent_slot(sb);
	struct exec_env e;
	struct exec *x;
	int r;

	if (!a->call || !a->registered)
		return ERR_STATE;
	if (a->exec_running >= LIMIT_INIT_COMMANDS)
		return ERR_LIMIT;
	x = session_new();
	if (!x || req->argc == 0 || req->nenv > LIMIT_SANDBOX_ENV)
		return ERR_LIMIT;
	session_setup(x, sb, sink);
	if (env_build(req, sb->egress_json[0] != '\0', &e) != 0)
		return ERR_LIMIT;
	cr.command_id = x->id;
	cr.command = (char *)req->argv[0];
	cr.args = (char **)req->argv + 1;
	cr.n_args = req->argc - 1;
	cr.working_dir = (char *)(req->working_dir ? req->working_dir : "");
	cr.env = e.envp;
	cr.n_env = e.n;
	cr.timeout_seconds = req->timeout_seconds;
	cr.capture_output = 1;
	cr.run_as = "";
	cr.tty = req->tty;
	cr.rows = req->rows;
	cr.cols = req->cols;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_COMMAND;
	m.command = &cr;
	if ((r = request_send(sb, a->call, x, req, &m)) != 0)
		return r;
	x->used = true;
	x->tty = req->tty;
	x->quiet = req->quiet;
	x->started = clock_mono_ms();
	x->sent_us = clock_mono_us();
	a->exec_running++;
	ASSERT(a->exec_running <= LIMIT_INIT_COMMANDS);
	metrics_exec_started();
	log_info("exec started", "name=%s id=%s args=%u env=%u timeout_s=%d client=%s",
		 log_q(sb->name), log_q(x->id), req->argc, req->nenv, (int)req->timeout_seconds,
		 x->sink.ops ? x->sink.ops->client : "none");
	send_stdin(x, false);
	return (int)(x - execs);
}

size_t exec_stdin(int32_t xi, const void *data, size_t len, bool eof)
{
	struct exec *x = &execs[xi];
	size_t take;

	ASSERT(xi >= 0 && xi < LIMIT_EXECS);
	if (!x->used || x->eof_wanted)
		return len;
	if (len == 0) {
		/* EOF goes after (or with) whatever is still held */
		x->eof_wanted = eof;
		if (eof)
			send_stdin(x, false);
		return 0;
	}
	if (x->stdin_len)
		return 0;
	take = len < STDIN_CHUNK ? len : STDIN_CHUNK;
	memcpy(x->stdin_buf, data, take);
	x->stdin_len = (uint32_t)take;
	if (eof && take == len)
		x->eof_wanted = true;
	send_stdin(x, false);
	return take;
}

int exec_resize(int32_t xi, uint16_t rows, uint16_t cols)
{
	Agentic__Sandbox__V1__PtyResize rz = AGENTIC__SANDBOX__V1__PTY_RESIZE__INIT;
	Agentic__Sandbox__V1__PtyControl pc = AGENTIC__SANDBOX__V1__PTY_CONTROL__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	struct exec *x = xi >= 0 && xi < LIMIT_EXECS ? &execs[xi] : NULL;
	struct sandbox *sb = x && x->used ? exec_sandbox(x) : NULL;
	const struct agent_sb *a;

	if (!sb)
		return -ESRCH;
	if (!x->tty)
		return -EINVAL;
	a = agent_slot(sb);
	if (!a->call || !a->registered)
		return -EAGAIN;
	rz.rows = rows;
	rz.cols = cols;
	pc.command_id = x->id;
	pc.action_case = AGENTIC__SANDBOX__V1__PTY_CONTROL__ACTION_RESIZE;
	pc.resize = &rz;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_PTY_CONTROL;
	m.pty_control = &pc;
	if (grpc_call_send(a->call, &m.base) != 0)
		return -EAGAIN;
	grpc_call_flush(a->call);
	return 0;
}

void exec_detach(int32_t xi)
{
	struct exec *x = &execs[xi];

	ASSERT(xi >= 0 && xi < LIMIT_EXECS);
	if (!x->used)
		return;
	x->sink.ops = NULL;
	x->sink.ctx = NULL;
	x->eof_wanted = true;
	send_stdin(x, false);
}

int exec_signal(int32_t xi, int sig)
{
	Agentic__Sandbox__V1__PtySignal ps = AGENTIC__SANDBOX__V1__PTY_SIGNAL__INIT;
	Agentic__Sandbox__V1__PtyControl pc = AGENTIC__SANDBOX__V1__PTY_CONTROL__INIT;
	Agentic__Sandbox__V1__ManagementMessage m = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__INIT;
	struct sandbox *sb = exec_alive(xi) ? exec_sandbox(&execs[xi]) : NULL;
	const struct agent_sb *a = sb ? agent_slot(sb) : NULL;
	int r;

	if (!a)
		return -ESRCH;
	if (!a->call || !a->registered)
		return ERR_STATE;
	ps.signal_number = sig;
	pc.command_id = execs[xi].id;
	pc.action_case = AGENTIC__SANDBOX__V1__PTY_CONTROL__ACTION_SIGNAL;
	pc.signal = &ps;
	m.payload_case = AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_PTY_CONTROL;
	m.pty_control = &pc;
	if ((r = grpc_call_send(a->call, &m.base)) == 0)
		grpc_call_flush(a->call);
	return r;
}

bool exec_alive(int32_t xi)
{
	return xi >= 0 && xi < LIMIT_EXECS && execs[xi].used;
}

size_t exec_output(struct sandbox *sb, const char *id, int stream, const void *data, size_t len,
		   bool exact)
{
	struct exec *x = by_id(sb, id);
	size_t n = x && x->quiet ? runlog_quiet(sb, stream, len) : runlog_output(sb, stream, data, len),
	       give = exact ? n : len;

	metrics_exec_bytes(stream, give);
	if (!x || !x->sink.ops || !give)
		return n;
	if (x->sink.ops->output(x->sink.ctx, stream, data, give) != 0)
		exec_detach((int32_t)(x - execs));
	return n;
}

bool exec_result(struct sandbox *sb, const char *id, int32_t code, int64_t duration_ms,
		 int64_t command_us, const char *error, uint64_t seq)
{
	struct exec *x = by_id(sb, id);
	int64_t init_us;

	if (!runlog_command_end(sb, id, code, duration_ms, seq) && seq)
		return false;
	if (!x)
		return true;
	init_us = clock_mono_us() - x->sent_us;
	metrics_exec_latency(clock_mono_ms() - x->started);
	/* the client first: the log line is a write agenticd's log may make wait */
	if (x->sink.ops)
		x->sink.ops->done(x->sink.ctx, code, duration_ms, error,
				  transcript_of(sb)->run.error ? strerror(-transcript_of(sb)->run.error) : NULL);
	log_info("exec ended", "name=%s id=%s exit_code=%d duration_ms=%lld init_us=%lld "
		 "command_us=%lld", log_q(sb->name), log_q(id), (int)code, (long long)duration_ms,
		 (long long)init_us, (long long)command_us);
	release(x);
	lifecycle_command_ended(sb);
	return true;
}

void exec_stdin_ack(struct sandbox *sb, const char *id, uint64_t consumed)
{
	struct exec *x = by_id(sb, id);

	if (!x || consumed <= x->stdin_acked || consumed > x->stdin_sent)
		return;
	x->stdin_acked = consumed;
	send_stdin(x, true);
}

void exec_agent_writable(struct sandbox *sb)
{
	for (uint32_t i = 0; i < LIMIT_EXECS; i++) {
		struct exec *x = &execs[i];

		if (x->used && exec_sandbox(x) == sb && !send_stdin(x, true))
			return;
	}
}

void exec_sandbox_gone(struct sandbox *sb, const char *why)
{
	for (uint32_t i = 0; i < LIMIT_EXECS; i++) {
		struct exec *x = &execs[i];

		if (!x->used || exec_sandbox(x) != sb)
			continue;
		runlog_command_end(sb, x->id, -1, clock_mono_ms() - x->started, 0);
		if (x->sink.ops)
			x->sink.ops->done(x->sink.ctx, -1, clock_mono_ms() - x->started, why, NULL);
		release(x);
	}
	agent_slot(sb)->exec_running = 0;
}

/* ---- the internal client: a bounded buffer ---- */

static int collect_output(void *ctx, int stream, const void *data, size_t len)
{
	struct exec_collect *c = ctx;
	size_t room = EXEC_COLLECT_BYTES - c->len, take = stream == 0 && len < room ? len : room;

	if (stream != 0)
		take = 0;
	memcpy(c->out + c->len, data, take);
	c->len += (uint32_t)take;
	c->out[c->len] = '\0';
	c->dropped += len - take;
	return 0;
}

static void collect_done(void *ctx, int32_t exit_code, int64_t duration_ms, const char *error,
			 const char *transcript_error)
{
	struct exec_collect *c = ctx;

	(void)duration_ms;
	(void)transcript_error;
	c->done = true;
	c->exit_code = exit_code;
	c->failed = error && error[0];
	if (c->on_done)
		c->on_done(c);
}

static const struct exec_sink_ops collect_ops = {
	.client = "internal",
	.output = collect_output,
	.done = collect_done,
	.stdin_taken = NULL,
};

void exec_collect_sink(struct exec_collect *c, struct exec_sink *sink)
{
	c->len = 0;
	c->out[0] = '\0';
	c->dropped = 0;
	c->done = false;
	c->exit_code = -1;
	c->failed = false;
	*sink = (struct exec_sink){ &collect_ops, c };
}
