/* e2b_process.c: envd's process.Process service on the E2B listener (Start, Connect, List,
 * SendInput, CloseStdin, SendSignal, Update), over Connect-JSON (connect.c) and the connection
 * layer (e2b_conn.h). Every command is an exec session (src/agent/exec.h): the sandbox's
 * workload uid, its supervisor and its transcript, as for `agentic exec`.
 *
 * A process is a slot of a fixed table (at most LIMIT_E2B_SANDBOX_PROCS per sandbox) and the
 * exec session's sink for the whole of its life: it fans the output out to the streams that
 * follow it (its Start's and any Connect's, LIMIT_E2B_PROC_STREAMS at most), and lives on when
 * they all go (envd's way: a dropped client does not end a process). Its pid is a handle of
 * ours, unique among the live ones. A stream whose client reads too slowly for its output is
 * not buffered for: the frame that finds no room is dropped, and the stream ends with a
 * resource_exhausted error as soon as it has room (the process runs on; Connect follows it
 * again). A process with a Connect-Timeout-Ms is killed at that deadline, whoever is there,
 * and its Start stream ends then with deadline_exceeded.
 * Calls connect.c, e2b_conn.c, e2b_user.c and the agent's exec; nothing of e2b/ above it. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "agent/exec.h"
#include "e2b/connect.h"
#include "e2b/e2b_conn.h"
#include "grpc/grpc.h"
#include "sandbox/request.h"
#include "sandbox/sandbox.h"

_Static_assert(LIMIT_E2B_SANDBOX_PROCS < LIMIT_INIT_COMMANDS,
	       "a sandbox full of E2B processes leaves exec sessions for its files");
_Static_assert(LIMIT_E2B_SANDBOX_PROCS * (LIMIT_E2B_PROC_CONFIG_BYTES + 96u) + 512u <=
	       LIMIT_E2B_OUT_BYTES, "a List of a full sandbox is one answer");

#define OUT_PIECE INIT_CHUNK_BYTES  /* output bytes per data event */
#define FIRST_PID 1000
/* A signal is sent again this often, this many times, until the process ends: the init drops
 * one that comes before the command's process group exists (a kill right after Start). */
#define SIG_AGAIN_MS 400
#define SIG_TRIES 5

/* A stream's state: following output (OPEN), owing its end event and end-stream (END),
 * owing its end-stream only (TAIL: {} or the stream's error). */
enum { ST_FREE = 0, ST_OPEN, ST_END, ST_TAIL };

struct pstream {
	uint8_t state;
	uint16_t proc;
	struct e2b_ref ref;
	int64_t last;              /* monotonic ms: its last frame */
	int64_t ping_ms;           /* a keepalive after this much silence */
	int64_t deadline;          /* Connect's Connect-Timeout-Ms: ends then (0: none) */
	const char *err_code;      /* TAIL's error (NULL: {}) */
	const char *err_msg;
};

struct proc {
	bool used, running, with_stdin, tty, close_owed;
	int sig;                   /* what agenticd sent it (SendSignal, its deadline), or 0 */
	int sig_tries;             /* sent again this many more times, */
	int64_t sig_at;            /* the next at this monotonic ms (0: none) */
	uint32_t pid;
	int32_t x;                 /* its exec session, while running */
	struct sandbox *sb;
	uint32_t sb_gen;
	int64_t deadline;          /* monotonic ms: killed then (0: none) */
	int wait;                  /* its SendInput waiting in waits[], or -1 */
	struct connect_end_event end;
	const char *end_code;      /* the streams end with this error instead (a cwd missing) */
	char status[32];
	char end_msg[160];
	struct pstream st[LIMIT_E2B_PROC_STREAMS];
	char tag[CONNECT_TAG_BYTES];
	uint16_t config_len;
	char config[LIMIT_E2B_PROC_CONFIG_BYTES];
};

/* A SendInput its process has not taken all of yet: answered when it has. */
struct stdin_wait {
	bool used;
	uint16_t proc;
	struct e2b_ref ref;
	uint32_t off, len;
	uint8_t data[LIMIT_E2B_BODY_BYTES];
};

static struct proc procs[LIMIT_E2B_PROCS];
static uint32_t nprocs; /* of them used: the loop's tick and deadline skip an empty table */
static struct stdin_wait waits[LIMIT_E2B_STDIN_WAITING];

size_t e2b_process_table_bytes(void)
{
	return sizeof(procs) + sizeof(waits);
}
static uint32_t pid_next = FIRST_PID;
/* one request or event at a time: the loop has no threads */
static uint8_t scratch[LIMIT_E2B_OUT_BYTES];
static char text[LIMIT_E2B_BODY_BYTES];

static const char gone_msg[] = "The sandbox was killed or reached its end of life while the "
			       "request was in flight";

static bool proc_live(const struct proc *p, const struct sandbox *sb)
{
	return p->used && p->running && p->sb == sb && p->sb_gen == sb->gen;
}

static struct proc *proc_find(const struct sandbox *sb, const struct connect_proc *q)
{
	for (uint32_t i = 0; i < LIMIT_E2B_PROCS; i++) {
		struct proc *p = &procs[i];

		if (proc_live(p, sb) && (q->has_pid ? p->pid == q->pid
					 : strcmp(p->tag, q->tag) == 0))
			return p;
	}
	return NULL;
}

/* The slot freed once nothing holds it: the session ended, no stream, no waiting input. */
static void proc_settle(struct proc *p)
{
	if (p->running || p->wait >= 0)
		return;
	for (int i = 0; i < LIMIT_E2B_PROC_STREAMS; i++)
		if (p->st[i].state != ST_FREE)
			return;
	if (p->used) {
		ASSERT(nprocs > 0);
		nprocs--;
	}
	p->used = false;
}

static void stream_free(struct pstream *ps)
{
	ASSERT(ps->state != ST_FREE);
	ps->state = ST_FREE;
	proc_settle(&procs[ps->proc]);
}

/* ---- frames ---- */

/* One envelope to ps's client: 0, -EAGAIN (no room: on_writable comes), -EPIPE (gone:
 * on_close comes). Held, it leaves with the next one (see e2b_stream_hold). */
static int frame_put(struct pstream *ps, const struct buf *b, bool hold)
{
	struct e2b_conn *c = e2b_conn_get(ps->ref);
	int r = !c ? -EPIPE : hold ? e2b_stream_hold(c, b->data, b->len)
		: e2b_stream_write(c, b->data, b->len);

	if (r == 0)
		ps->last = clock_mono_ms();
	return r == 0 || r == -EAGAIN ? r : -EPIPE;
}

static int frame_write(struct pstream *ps, const struct buf *b)
{
	return frame_put(ps, b, false);
}

/* What ps owes, as far as there is room: the end event, the end-stream, the stream's end,
 * in one segment when there is room for all three. */
static void stream_pump(struct pstream *ps)
{
	/* its own: a stream may end in the middle of a data event's fan-out */
	static uint8_t tail[512];
	struct proc *p = &procs[ps->proc];
	struct buf b;

	buf_init(&b, tail, sizeof(tail));
	if (ps->state == ST_END) {
		if (connect_event_end(&b, &p->end) != 0 || frame_put(ps, &b, true) != 0)
			return;
		ps->state = ST_TAIL;
	}
	if (ps->state != ST_TAIL)
		return;
	b.len = 0;
	if (connect_end_stream(&b, ps->err_code, ps->err_msg) != 0 || frame_put(ps, &b, true) != 0)
		return;
	e2b_stream_end(e2b_conn_get(ps->ref));
	stream_free(ps);
}

/* ps ends with an error (code, msg: static or its process's) once it has room. */
static void stream_fail(struct pstream *ps, const char *code, const char *msg)
{
	ps->state = ST_TAIL;
	ps->err_code = code;
	ps->err_msg = msg;
	stream_pump(ps);
}

static void stream_writable(struct e2b_conn *c, void *ctx)
{
	stream_pump(ctx);
}

static void stream_close(struct e2b_conn *c, void *ctx)
{
	stream_free(ctx);
}

static const struct e2b_service_ops stream_ops = {
	.on_body = NULL,
	.on_writable = stream_writable,
	.on_close = stream_close,
};

/* A stream answered with an error alone (200 and the end-stream: the SDK reads the error
 * from it; a non-200 stream answer reaches it as its status only). */
static void stream_error(struct e2b_conn *c, const char *code, const char *msg)
{
	struct buf b;

	buf_init(&b, scratch, sizeof(scratch));
	if (e2b_stream_begin(c, 200, "application/connect+json") != 0)
		return;
	if (connect_end_stream(&b, code, msg) == 0)
		e2b_stream_hold(c, b.data, b.len);
	e2b_stream_end(c);
}

/* ---- the exec session's sink ---- */

static int sink_output(void *ctx, int stream, const void *data, size_t len)
{
	struct proc *p = ctx;
	const uint8_t *d = data;
	struct buf b;

	while (len) {
		size_t n = len < OUT_PIECE ? len : OUT_PIECE;

		buf_init(&b, scratch, sizeof(scratch));
		if (connect_event_data(&b, p->tty ? CONNECT_PTY : stream ? CONNECT_STDERR
				       : CONNECT_STDOUT, d, n) != 0)
			return 0;
		for (int i = 0; i < LIMIT_E2B_PROC_STREAMS; i++) {
			struct pstream *ps = &p->st[i];

			if (ps->state == ST_OPEN && frame_write(ps, &b) == -EAGAIN)
				stream_fail(ps, "resource_exhausted", "the client read the "
					    "output more slowly than the process wrote it: output "
					    "was dropped and the stream ended (the process runs on)");
		}
		d += n;
		len -= n;
	}
	return 0;
}

/* exec's result as envd tells it (Go's ProcessState): "exit status N", or "signal: killed"
 * and exit code -1 for a signal agenticd sent (SendSignal, a deadline: the supervisor
 * reports 128 + the signal; the init's own timeout says "timed out"). A working directory
 * that cannot be entered is envd's invalid_argument. */
static void end_of(struct proc *p, int32_t code, const char *error)
{
	bool timed_out = error && strncmp(error, "timed out", 9) == 0;
	int sig = timed_out ? SIGKILL : p->sig && code == 128 + p->sig ? p->sig : 0;

	p->end = (struct connect_end_event){ code, true, p->status, NULL };
	snprintf(p->status, sizeof(p->status), "exit status %d", (int)code);
	if (sig) {
		snprintf(p->status, sizeof(p->status), "signal: %s",
			 sig == SIGKILL ? "killed" : sig == SIGTERM ? "terminated" : "signaled");
		p->end = (struct connect_end_event){ -1, false, p->status, p->status };
	} else if (error && error[0]) {
		snprintf(p->end_msg, sizeof(p->end_msg), "%s", error);
		p->end.error = p->end_msg;
		if (strncmp(error, "entering the working directory", 30) == 0)
			p->end_code = "invalid_argument";
	} else if (code != 0) {
		p->end.error = p->status;
	}
}

static void stdin_answer(struct proc *p, const char *code, const char *msg);

static void sink_done(void *ctx, int32_t code, int64_t duration_ms, const char *error,
		      const char *transcript_error)
{
	struct proc *p = ctx;

	ASSERT(p->used && p->running);
	p->running = false;
	end_of(p, code, error);
	if (p->wait >= 0)
		stdin_answer(p, "not_found", "the process ended before it read all its input");
	for (int i = 0; i < LIMIT_E2B_PROC_STREAMS; i++) {
		struct pstream *ps = &p->st[i];

		if (ps->state != ST_OPEN)
			continue;
		if (p->end_code) {
			stream_fail(ps, p->end_code, p->end_msg);
		} else {
			ps->state = ST_END;
			stream_pump(ps);
		}
	}
	proc_settle(p);
}

/* ---- stdin ---- */

/* What of w the session takes now: true when all of it is taken. */
static bool stdin_offer(struct proc *p, struct stdin_wait *w)
{
	while (w->off < w->len) {
		size_t t = exec_stdin(p->x, w->data + w->off, w->len - w->off, false);

		if (t == 0)
			return false;
		w->off += (uint32_t)t;
	}
	return true;
}

static void stdin_answer(struct proc *p, const char *code, const char *msg)
{
	struct stdin_wait *w = &waits[p->wait];
	struct e2b_conn *c = e2b_conn_get(w->ref);

	ASSERT(w->used && w->proc == p - procs);
	w->used = false;
	p->wait = -1;
	if (c) {
		e2b_conn_attach(c, NULL, NULL);
		if (code)
			e2b_connect_error(c, code, msg);
		else
			e2b_reply(c, 200, "application/json", "{}", 2);
	}
	if (p->running && p->close_owed)
		exec_stdin(p->x, "", 0, true);
	proc_settle(p);
}

static void sink_stdin_taken(void *ctx)
{
	struct proc *p = ctx;

	if (p->wait >= 0 && stdin_offer(p, &waits[p->wait]))
		stdin_answer(p, NULL, NULL);
}

static void wait_close(struct e2b_conn *c, void *ctx)
{
	struct stdin_wait *w = ctx;

	/* the client left: what it sent still goes in, unanswered */
	w->ref = (struct e2b_ref){ UINT32_MAX, 0 };
}

static const struct e2b_service_ops wait_ops = {
	.on_body = NULL,
	.on_writable = NULL,
	.on_close = wait_close,
};

static const struct exec_sink_ops sink_stdin_ops = {
	.client = "e2b",
	.output = sink_output,
	.done = sink_done,
	.stdin_taken = sink_stdin_taken,
};

static const struct exec_sink_ops sink_ops = {
	.client = "e2b",
	.output = sink_output,
	.done = sink_done,
	.stdin_taken = NULL,
};

/* ---- requests ---- */

/* A header's whole number (digits only), or dflt when absent or not one. */
static int64_t header_num(struct e2b_conn *c, const char *name, uint64_t max, int64_t dflt)
{
	const char *v = e2b_header(c, name);
	uint64_t n;

	return v && parse_u64(v, max, &n) == 0 ? (int64_t)n : dflt;
}

/* A stream added to p for c (its start event written): NULL when p has no room for one. */
static struct pstream *stream_add(struct proc *p, struct e2b_conn *c, bool deadline)
{
	int64_t now = clock_mono_ms(), t = header_num(c, "connect-timeout-ms", 9999999999ull, 0);
	struct pstream *ps = NULL;
	struct buf b;

	for (int i = 0; i < LIMIT_E2B_PROC_STREAMS && !ps; i++)
		if (p->st[i].state == ST_FREE)
			ps = &p->st[i];
	if (!ps)
		return NULL;
	*ps = (struct pstream){ ST_OPEN, (uint16_t)(p - procs), e2b_ref_of(c), now,
				1000 * header_num(c, "keepalive-ping-interval", 86400,
						  LIMIT_E2B_PING_S), 0, NULL, NULL };
	if (ps->ping_ms <= 0)
		ps->ping_ms = 1000LL * LIMIT_E2B_PING_S;
	if (deadline && t > 0)
		ps->deadline = now + t;
	if (e2b_stream_begin(c, 200, "application/connect+json") != 0) {
		ps->state = ST_FREE;
		return ps;
	}
	e2b_conn_attach(c, &stream_ops, ps);
	buf_init(&b, scratch, sizeof(scratch));
	if (connect_event_start(&b, p->pid) == 0 && frame_write(ps, &b) == -EAGAIN)
		stream_fail(ps, "resource_exhausted", "no room for the start event");
	return ps;
}

/* The one message of a streamed request: 0 with *json, or answered with its error. */
static int stream_message(struct e2b_conn *c, const char **json, size_t *len)
{
	const uint8_t *body, *msg = NULL;
	size_t n;
	int r;

	body = e2b_body(c, &n);
	r = connect_envelope_decode(body, n, LIMIT_E2B_BODY_BYTES, &msg, len);
	if (r == -ENOTSUP)
		stream_error(c, "unimplemented", "compressed messages are not supported");
	else if (r != 0)
		stream_error(c, "invalid_argument", "the request body is not one Connect envelope");
	*json = (const char *)msg;
	return r;
}

/* s into er (its env joined in text's tail), the cwd resolved into cwd. 0, or -1 with why. */
static int start_request(const struct connect_start *s, struct exec_req *er, char *cwd,
			 size_t cwd_cap, int64_t timeout_ms, const char **why)
{
	static char env_text[LIMIT_ADMIN_BODY_BYTES];
	struct request_text t = { env_text, 0, sizeof(env_text) };
	struct request_error e = { 0 };

	memset(er, 0, sizeof(*er));
	*why = "the command has too many arguments or variables";
	if (request_exec_arg(er, s->cmd, &e) != 0)
		return -1;
	for (uint32_t i = 0; i < s->nargs; i++)
		if (request_exec_arg(er, s->args[i], &e) != 0)
			return -1;
	for (uint32_t i = 0; i < s->nenv; i++)
		if (request_exec_env(er, &t, s->env_key[i], s->env_val[i], &e) != 0)
			return -1;
	*why = "process.cwd is empty or too long";
	if (e2b_path_resolve(s->cwd ? s->cwd : "~", cwd, cwd_cap) != 0)
		return -1;
	er->working_dir = cwd;
	/* the init's own deadline a second after ours: it holds if agenticd does not */
	er->timeout_seconds = timeout_ms > 0 ? (int32_t)((timeout_ms + 999) / 1000 + 1) : 0;
	er->tty = s->pty;
	er->rows = s->rows;
	er->cols = s->cols;
	*why = "the command is not one agentic can run";
	return request_exec_check(er, &e) == 0 ? 0 : -1;
}

/* A free slot for sb's next process: NULL with why when sb has its share or none is free. */
static struct proc *proc_new(const struct sandbox *sb, const char **why)
{
	struct proc *p = NULL;
	uint32_t mine = 0;

	for (uint32_t i = 0; i < LIMIT_E2B_PROCS; i++) {
		if (procs[i].used && procs[i].sb == sb && procs[i].sb_gen == sb->gen)
			mine++;
		else if (!procs[i].used && !p)
			p = &procs[i];
	}
	*why = "the sandbox runs as many E2B processes at once as it may: wait for one to end";
	if (mine >= LIMIT_E2B_SANDBOX_PROCS)
		return NULL;
	*why = "agenticd runs as many E2B processes as it may: try again later";
	return p;
}

static uint32_t pid_take(void)
{
	for (;;) {
		uint32_t pid = pid_next++;
		bool used = pid < FIRST_PID;

		for (uint32_t i = 0; i < LIMIT_E2B_PROCS && !used; i++)
			used = procs[i].used && procs[i].pid == pid;
		if (!used)
			return pid;
	}
}

/* exec_begin's refusal as a Connect code and message. */
static const char *exec_refusal(int x, const char **code)
{
	*code = "unavailable";
	if (x == ERR_STATE)
		return "the sandbox's agent is not connected";
	if (exec_transcript_error(x)) {
		*code = "internal";
		return "the sandbox's transcript cannot be written; no command was started";
	}
	*code = "resource_exhausted";
	return "the sandbox runs as many commands as it may, or its agent cannot take more now";
}

/* p set up for the process exec runs from s (x its session) */
static void proc_setup(struct proc *p, struct sandbox *sb, const struct connect_start *s,
		       int64_t timeout_ms)
{
	struct buf b;

	ASSERT(!p->used);
	memset(p, 0, offsetof(struct proc, config));
	p->used = p->running = true;
	nprocs++;
	p->with_stdin = s->with_stdin || s->pty;
	p->tty = s->pty;
	p->sb = sb;
	p->sb_gen = sb->gen;
	p->wait = -1;
	p->pid = pid_take();
	p->deadline = timeout_ms > 0 ? clock_mono_ms() + timeout_ms : 0;
	memcpy(p->tag, s->tag, sizeof(p->tag));
	buf_init(&b, p->config, sizeof(p->config));
	if (connect_config_encode(&b, sizeof(p->config), s) != 0)
		buf_append(&b, "{}", 2);
	p->config_len = (uint16_t)b.len;
}

static void call_start(struct e2b_conn *c, struct sandbox *sb)
{
	static struct exec_req er;
	int64_t timeout = header_num(c, "connect-timeout-ms", 9999999999ull, 0);
	const char *json, *why, *code = "invalid_argument";
	struct connect_start s;
	char cwd[LIMIT_PATH_BYTES];
	struct exec_sink sink;
	struct pstream *ps;
	struct proc *p;
	size_t len;
	int x;

	/* Start's user, refused in the stream's own way (the SDK sends one on Start alone) */
	if ((why = e2b_user_refusal(c, &code))) {
		stream_error(c, code, why);
		return;
	}
	if (stream_message(c, &json, &len) != 0)
		return;
	if (connect_start_parse(json, len, &s, text, sizeof(text), &why) != 0 ||
	    start_request(&s, &er, cwd, sizeof(cwd), timeout, &why) != 0) {
		stream_error(c, code, why);
		return;
	}
	if (!(p = proc_new(sb, &why))) {
		stream_error(c, "resource_exhausted", why);
		return;
	}
	sink = (struct exec_sink){ s.with_stdin || s.pty ? &sink_stdin_ops : &sink_ops, p };
	if ((x = exec_begin(sb, &er, &sink)) < 0) {
		why = exec_refusal(x, &code);
		stream_error(c, code, why);
		return;
	}
	proc_setup(p, sb, &s, timeout);
	p->x = x;
	/* the Start stream ends deadline_exceeded at the moment its process is killed (the tick
	 * fails it before the kill's end event can come back): the SDK's timeoutMs is then its
	 * TimeoutError however late the client's own timer fires, never a "signal: killed" exit */
	if ((ps = stream_add(p, c, false)) && ps->state == ST_OPEN)
		ps->deadline = p->deadline;
}

static void call_connect(struct e2b_conn *c, struct sandbox *sb)
{
	const char *json, *why;
	struct connect_proc q;
	struct proc *p;
	size_t len;

	if (stream_message(c, &json, &len) != 0)
		return;
	if (connect_proc_parse(json, len, &q, NULL, 0, &why) != 0) {
		stream_error(c, "invalid_argument", why);
		return;
	}
	if (!(p = proc_find(sb, &q)))
		stream_error(c, "not_found", "process not found");
	else if (!stream_add(p, c, true))
		stream_error(c, "resource_exhausted", "the process has as many streams as it "
			     "may: end one first");
}

static void call_list(struct e2b_conn *c, struct sandbox *sb)
{
	struct connect_info items[LIMIT_E2B_SANDBOX_PROCS];
	uint32_t n = 0;
	struct buf b;

	for (uint32_t i = 0; i < LIMIT_E2B_PROCS && n < LIMIT_E2B_SANDBOX_PROCS; i++) {
		struct proc *p = &procs[i];

		if (proc_live(p, sb))
			items[n++] = (struct connect_info){ p->pid, p->config, p->config_len,
							    p->tag };
	}
	buf_init(&b, scratch, sizeof(scratch));
	if (connect_list_encode(&b, items, n) != 0)
		e2b_connect_error(c, "internal", "the process list does not fit an answer");
	else
		e2b_reply(c, 200, "application/json", b.data, b.len);
}

/* SendInput: taken whole now, or answered once taken (one input waits per process). */
static void send_input(struct e2b_conn *c, struct proc *p, const struct connect_proc *q,
		       const uint8_t *data)
{
	struct stdin_wait *w = NULL;

	if (!p->with_stdin) {
		e2b_connect_error(c, "failed_precondition", "the process was started without "
				  "stdin (start it with stdin: true)");
		return;
	}
	if (p->wait >= 0 || p->close_owed) {
		e2b_connect_error(c, "resource_exhausted", "the process has not taken its last "
				  "input yet");
		return;
	}
	for (int i = 0; i < LIMIT_E2B_STDIN_WAITING && !w; i++)
		if (!waits[i].used)
			w = &waits[i];
	if (!w) {
		e2b_connect_error(c, "resource_exhausted", "too many inputs wait for their "
				  "processes to read them");
		return;
	}
	*w = (struct stdin_wait){ true, (uint16_t)(p - procs), e2b_ref_of(c), 0,
				  (uint32_t)q->input_len, { 0 } };
	memcpy(w->data, data, q->input_len);
	p->wait = (int)(w - waits);
	if (stdin_offer(p, w)) {
		stdin_answer(p, NULL, NULL);
		return;
	}
	e2b_conn_attach(c, &wait_ops, w);
}

static void close_stdin(struct e2b_conn *c, struct proc *p)
{
	if (p->with_stdin && p->wait >= 0)
		p->close_owed = true;
	else if (p->with_stdin)
		exec_stdin(p->x, "", 0, true);
	e2b_reply(c, 200, "application/json", "{}", 2);
}

static void send_signal(struct e2b_conn *c, struct proc *p, int sig)
{
	int r;

	if (sig != CONNECT_SIG_KILL && sig != CONNECT_SIG_TERM) {
		e2b_connect_error(c, "invalid_argument", "signal is SIGNAL_SIGKILL or "
				  "SIGNAL_SIGTERM");
		return;
	}
	r = exec_signal(p->x, sig);
	if (r == 0) {
		p->sig = sig;
		p->sig_tries = SIG_TRIES;
		p->sig_at = clock_mono_ms() + SIG_AGAIN_MS;
		e2b_reply(c, 200, "application/json", "{}", 2);
	} else {
		e2b_connect_error(c, "unavailable", "the sandbox's agent cannot take the signal "
				  "now: try again");
	}
}

static void update(struct e2b_conn *c, struct proc *p, const struct connect_proc *q)
{
	int r = q->has_size ? exec_resize(p->x, q->rows, q->cols) : 0;

	if (r == 0)
		e2b_reply(c, 200, "application/json", "{}", 2);
	else if (r == -EINVAL)
		e2b_connect_error(c, "invalid_argument", "the process has no terminal (start it "
				  "with pty)");
	else
		e2b_connect_error(c, "unavailable", "the sandbox's agent cannot take the new size "
				  "now: try again");
}

/* The unary calls that name a process. */
static void call_unary(struct e2b_conn *c, struct sandbox *sb, const char *method)
{
	static uint8_t data[LIMIT_E2B_BODY_BYTES];
	const uint8_t *body;
	const char *why;
	struct connect_proc q;
	struct proc *p;
	size_t len;

	body = e2b_body(c, &len);
	if (connect_proc_parse((const char *)body, len, &q, data, sizeof(data), &why) != 0) {
		e2b_connect_error(c, "invalid_argument", why);
		return;
	}
	if (!(p = proc_find(sb, &q))) {
		e2b_connect_error(c, "not_found", "process not found");
		return;
	}
	ASSERT(exec_alive(p->x)); /* running: its result has not come */
	if (strcmp(method, "SendInput") == 0)
		send_input(c, p, &q, data);
	else if (strcmp(method, "CloseStdin") == 0)
		close_stdin(c, p);
	else if (strcmp(method, "SendSignal") == 0)
		send_signal(c, p, q.signal);
	else
		update(c, p, &q);
}

void e2b_process_call(struct e2b_conn *c, const char *method)
{
	struct sandbox *sb = e2b_sandbox(c);
	const char *ct;

	if (!sb) {
		e2b_connect_error(c, "unavailable", gone_msg);
	} else if (strcmp(method, "Start") == 0 || strcmp(method, "Connect") == 0) {
		/* a server stream asked for as a unary call: answered as one */
		ct = e2b_header(c, "content-type");
		if (!ct || strncasecmp(ct, "application/connect+json", 24) != 0) {
			if (e2b_user_check(c) == 0)
				e2b_connect_error(c, "invalid_argument", "Start and Connect are "
						  "server streams: Content-Type "
						  "application/connect+json");
		} else if (method[0] == 'S') {
			call_start(c, sb);
		} else {
			call_connect(c, sb);
		}
	} else if (strcmp(method, "List") == 0) {
		call_list(c, sb);
	} else if (strcmp(method, "SendInput") == 0 || strcmp(method, "CloseStdin") == 0 ||
		   strcmp(method, "SendSignal") == 0 || strcmp(method, "Update") == 0) {
		if (e2b_user_check(c) == 0)
			call_unary(c, sb, method);
	} else {
		e2b_connect_error(c, "unimplemented", "agentic does not implement this method of "
				  "process.Process");
	}
}

/* ---- time, and a sandbox gone ---- */

static void tick_stream(struct pstream *ps, int64_t now)
{
	struct buf b;

	if (ps->state != ST_OPEN)
		return;
	if (ps->deadline && now >= ps->deadline) {
		stream_fail(ps, "deadline_exceeded", "the stream reached its Connect-Timeout-Ms");
		return;
	}
	if (now - ps->last < ps->ping_ms)
		return;
	buf_init(&b, scratch, sizeof(scratch));
	/* no room: the frames already waiting keep the client's timer going */
	if (connect_event_keepalive(&b) == 0)
		frame_write(ps, &b);
	ps->last = now;
}

void e2b_process_tick(int64_t now)
{
	for (uint32_t i = 0; nprocs && i < LIMIT_E2B_PROCS; i++) {
		struct proc *p = &procs[i];

		if (!p->used)
			continue;
		if (p->running && p->deadline && now >= p->deadline) {
			p->deadline = 0;
			p->sig = SIGKILL;
			p->sig_tries = SIG_TRIES + 1;
			p->sig_at = now;
		}
		if (p->running && p->sig_at && now >= p->sig_at) {
			/* an agent that cannot take it now gets it with the next */
			exec_signal(p->x, p->sig);
			p->sig_at = --p->sig_tries > 0 ? now + SIG_AGAIN_MS : 0;
		}
		for (int k = 0; k < LIMIT_E2B_PROC_STREAMS; k++)
			tick_stream(&p->st[k], now);
	}
}

static int64_t earlier(int64_t a, int64_t b)
{
	return a < 0 || (b >= 0 && b < a) ? b : a;
}

int64_t e2b_process_next_deadline(void)
{
	int64_t due = -1;

	for (uint32_t i = 0; nprocs && i < LIMIT_E2B_PROCS; i++) {
		const struct proc *p = &procs[i];

		if (!p->used)
			continue;
		if (p->running && p->deadline)
			due = earlier(due, p->deadline);
		if (p->running && p->sig_at)
			due = earlier(due, p->sig_at);
		for (int k = 0; k < LIMIT_E2B_PROC_STREAMS; k++) {
			const struct pstream *ps = &p->st[k];

			if (ps->state != ST_OPEN)
				continue;
			due = earlier(due, ps->last + ps->ping_ms);
			if (ps->deadline)
				due = earlier(due, ps->deadline);
		}
	}
	return due;
}

void e2b_process_sandbox_gone(struct sandbox *sb)
{
	for (uint32_t i = 0; i < LIMIT_E2B_PROCS; i++) {
		struct proc *p = &procs[i];

		if (!p->used || p->sb != sb || p->sb_gen != sb->gen)
			continue;
		if (p->running) {
			p->running = false;
			exec_detach(p->x);
		}
		if (p->wait >= 0)
			stdin_answer(p, "unavailable", gone_msg);
		for (int k = 0; k < LIMIT_E2B_PROC_STREAMS; k++)
			if (p->st[k].state == ST_OPEN || p->st[k].state == ST_END)
				stream_fail(&p->st[k], "unavailable", gone_msg);
		proc_settle(p);
	}
}
