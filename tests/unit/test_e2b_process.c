/* test_e2b_process.c: envd's process.Process service (src/e2b/e2b_process.c) against stand-ins
 * for the connection layer and the exec engine (the linker's --wrap, Makefile:
 * UNIT_WRAP_test_e2b_process): the frames each stream gets and their order, the process table
 * and its per-sandbox bound, deadlines, keepalives, stdin, signals, slow clients, a sandbox
 * gone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "agent/exec.h"
#include "base/be.h"
#include "e2b/connect.h"
#include "e2b/e2b_conn.h"
#include "sandbox/sandbox.h"

/* ---- the connection layer ---- */

#define NCONN 48

struct e2b_conn {
	bool used, begun, ended, replied;
	bool held;                    /* a held chunk waits for the next write or the end */
	uint32_t gen;
	int status;
	const char *auth, *timeout, *ping, *ctype;
	struct sandbox *sb;
	uint8_t body[1024];
	size_t body_len;
	char reply[4096];
	char code[40];
	uint8_t out[65536];
	size_t out_len;
	size_t room;                  /* stream writes past this many bytes find no room */
	const struct e2b_service_ops *ops;
	void *ctx;
};

static struct e2b_conn conns[NCONN];

struct sandbox *__wrap_e2b_sandbox(const struct e2b_conn *c) { return c->sb; }
const char *__wrap_e2b_path(const struct e2b_conn *c) { return "/process.Process/X"; }
const char *__wrap_e2b_query(const struct e2b_conn *c) { return ""; }

const char *__wrap_e2b_header(const struct e2b_conn *c, const char *name)
{
	if (strcmp(name, "authorization") == 0)
		return c->auth;
	if (strcmp(name, "connect-timeout-ms") == 0)
		return c->timeout;
	if (strcmp(name, "keepalive-ping-interval") == 0)
		return c->ping;
	if (strcmp(name, "content-type") == 0)
		return c->ctype;
	return NULL;
}

const uint8_t *__wrap_e2b_body(const struct e2b_conn *c, size_t *len)
{
	*len = c->body_len;
	return c->body;
}

void __wrap_e2b_reply(struct e2b_conn *c, int status, const char *ct, const void *body,
		      size_t len)
{
	assert_false(c->replied || c->begun);
	assert_string_equal(ct, "application/json");
	c->replied = true;
	c->status = status;
	memcpy(c->reply, body, len);
	c->reply[len] = '\0';
}

void __wrap_e2b_reply_error(struct e2b_conn *c, int status, const char *message)
{
	fail_msg("an envd HTTP error on a Connect route");
}

void __wrap_e2b_connect_error(struct e2b_conn *c, const char *code, const char *message)
{
	assert_false(c->replied || c->begun);
	c->replied = true;
	snprintf(c->code, sizeof(c->code), "%s", code);
}

int __wrap_e2b_stream_begin(struct e2b_conn *c, int status, const char *ct)
{
	assert_false(c->replied || c->begun);
	assert_int_equal(status, 200);
	assert_string_equal(ct, "application/connect+json");
	c->begun = true;
	return 0;
}

int __wrap_e2b_stream_write(struct e2b_conn *c, const void *data, size_t len)
{
	assert_true(c->begun && !c->ended);
	if (c->out_len + len > c->room)
		return -EAGAIN; /* the real one sends what is held then: on_writable comes */
	memcpy(c->out + c->out_len, data, len);
	c->out_len += len;
	c->held = false;
	return 0;
}

int __wrap_e2b_stream_hold(struct e2b_conn *c, const void *data, size_t len)
{
	int r = __wrap_e2b_stream_write(c, data, len);

	c->held = r == 0;
	return r;
}

void __wrap_e2b_stream_end(struct e2b_conn *c)
{
	assert_true(c->begun && !c->ended);
	c->held = false;
	c->ended = true;
	c->ops = NULL;
}

void __wrap_e2b_conn_attach(struct e2b_conn *c, const struct e2b_service_ops *ops, void *ctx)
{
	c->ops = ops;
	c->ctx = ctx;
}

struct e2b_ref __wrap_e2b_ref_of(const struct e2b_conn *c)
{
	return (struct e2b_ref){ (uint32_t)(c - conns), c->gen };
}

struct e2b_conn *__wrap_e2b_conn_get(struct e2b_ref r)
{
	return r.index < NCONN && conns[r.index].used && conns[r.index].gen == r.gen
	       ? &conns[r.index] : NULL;
}

int __wrap_e2b_user_check(struct e2b_conn *c)
{
	return 0;
}

/* ---- the exec engine ---- */

static struct exec_req last_req;
static char last_cwd[256], last_argv3[256];
static struct exec_sink sinks[LIMIT_EXECS];
static int begin_result;            /* < 0: exec_begin refuses with it */
static int32_t next_x;
static int signals[8], nsignals, detaches, eofs;
static char stdin_got[4096];
static size_t stdin_len, stdin_budget = SIZE_MAX; /* bytes the session takes, in all */

int __wrap_exec_begin(struct sandbox *sb, const struct exec_req *req, const struct exec_sink *s)
{
	if (begin_result < 0)
		return begin_result;
	last_req = *req;
	snprintf(last_cwd, sizeof(last_cwd), "%s", req->working_dir ? req->working_dir : "");
	snprintf(last_argv3, sizeof(last_argv3), "%s", req->argc > 3 ? req->argv[3] : "");
	sinks[next_x] = *s;
	return next_x++;
}

size_t __wrap_exec_stdin(int32_t x, const void *data, size_t len, bool eof)
{
	size_t take = len < stdin_budget ? len : stdin_budget;

	if (len == 0) {
		eofs += eof;
		return 0;
	}
	if (stdin_budget != SIZE_MAX)
		stdin_budget -= take;
	memcpy(stdin_got + stdin_len, data, take);
	stdin_len += take;
	return take;
}

int __wrap_exec_signal(int32_t x, int sig)
{
	signals[nsignals++] = sig;
	return 0;
}

void __wrap_exec_detach(int32_t x)
{
	detaches++;
	sinks[x].ops = NULL;
}

bool __wrap_exec_alive(int32_t x)
{
	return x >= 0 && x < next_x;
}

int __wrap_exec_resize(int32_t x, uint16_t rows, uint16_t cols)
{
	return sinks[x].ops ? 0 : -ESRCH;
}

/* ---- helpers ---- */

static struct sandbox sbs[2];

static int setup(void **state)
{
	(void)state;
	for (int i = 0; i < NCONN; i++)
		conns[i] = (struct e2b_conn){ .gen = conns[i].gen + 1 };
	begin_result = 0;
	nsignals = detaches = eofs = 0;
	stdin_len = 0;
	stdin_budget = SIZE_MAX;
	for (int i = 0; i < 2; i++) {
		sbs[i].gen++;
		sbs[i].state = SB_READY;
	}
	return 0;
}

/* A connection with its request; body: the JSON (an envelope for a stream). */
static struct e2b_conn *conn(struct sandbox *sb, const char *json, bool stream)
{
	for (int i = 0; i < NCONN; i++) {
		struct e2b_conn *c = &conns[i];
		size_t n = strlen(json);

		if (c->used)
			continue;
		*c = (struct e2b_conn){ .used = true, .gen = c->gen + 1, .sb = sb,
					.room = sizeof(c->out), .ctype = stream
					? "application/connect+json" : "application/json" };
		c->body_len = n + (stream ? CONNECT_HDR : 0);
		if (stream) {
			be32_put(c->body + 1, (uint32_t)n);
			memcpy(c->body + CONNECT_HDR, json, n);
		} else {
			memcpy(c->body, json, n);
		}
		return c;
	}
	fail_msg("no free connection");
	return NULL;
}

/* The client leaves: the layer tells the service and the slot goes. */
static void conn_drop(struct e2b_conn *c)
{
	const struct e2b_service_ops *ops = c->ops;

	c->used = false;
	c->gen++;
	if (ops && ops->on_close)
		ops->on_close(c, c->ctx);
}

/* The JSON of the n-th envelope of c's stream (0 first); flags into *flags. */
static const char *frame(const struct e2b_conn *c, int n, int *flags)
{
	static char json[8192];
	size_t off = 0;
	uint32_t len = 0;

	for (int i = 0; i <= n; i++) {
		off += len;
		if (off + CONNECT_HDR > c->out_len)
			return NULL;
		*flags = c->out[off];
		len = be32_get(c->out + off + 1);
		off += CONNECT_HDR;
	}
	memcpy(json, c->out + off, len);
	json[len] = '\0';
	return json;
}

static int nframes(const struct e2b_conn *c)
{
	int n = 0, f;

	while (frame(c, n, &f))
		n++;
	return n;
}

static void assert_frame(const struct e2b_conn *c, int n, int flags, const char *json)
{
	int f = -1;
	const char *got = frame(c, n, &f);

	assert_non_null(got);
	assert_int_equal(f, flags);
	assert_string_equal(got, json);
}

#define SDK_START(cmd) "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\",\"-c\",\"" cmd \
		       "\"],\"envs\":{}},\"stdin\":false}"

static uint32_t start_pid(const struct e2b_conn *c)
{
	int f;
	unsigned pid = 0;
	const char *j = frame(c, 0, &f);

	assert_non_null(j);
	assert_int_equal(sscanf(j, "{\"event\":{\"start\":{\"pid\":%u}}}", &pid), 1);
	return pid;
}

/* ---- tests ---- */

static void test_start_frames_start_data_end_then_end_stream(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{\"cmd\":\"/bin/bash\",\"args\":[\"-l\","
				  "\"-c\",\"echo hi\"],\"envs\":{\"A\":\"1\"}},\"stdin\":false}",
				  true);
	int32_t x = next_x;

	e2b_process_call(c, "Start");
	assert_true(c->begun);
	assert_string_equal(last_cwd, "/home/user");
	assert_string_equal(last_argv3, "echo hi");
	assert_int_equal(last_req.nenv, 1);
	assert_int_equal(last_req.timeout_seconds, 0);
	assert_null(sinks[x].ops->stdin_taken); /* stdin: false */
	assert_int_equal(nframes(c), 1);
	assert_true(start_pid(c) >= 1000);
	sinks[x].ops->output(sinks[x].ctx, 0, "hi\n", 3);
	sinks[x].ops->output(sinks[x].ctx, 1, "e", 1);
	assert_frame(c, 1, 0, "{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}");
	assert_frame(c, 2, 0, "{\"event\":{\"data\":{\"stderr\":\"ZQ==\"}}}");
	sinks[x].ops->done(sinks[x].ctx, 3, 10, NULL, NULL);
	assert_frame(c, 3, 0, "{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":"
		     "\"exit status 3\",\"error\":\"exit status 3\"}}}");
	assert_frame(c, 4, CONNECT_END, "{}");
	assert_true(c->ended);
}

static void test_start_refuses_root_inside_the_stream(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("id -u"), true);
	int32_t x = next_x;
	int f;

	c->auth = "Basic cm9vdDo=";
	e2b_process_call(c, "Start");
	assert_int_equal(next_x, x); /* nothing ran */
	assert_int_equal(nframes(c), 1);
	assert_non_null(strstr(frame(c, 0, &f), "\"code\":\"permission_denied\""));
	assert_non_null(strstr(frame(c, 0, &f), "uid 10001"));
	assert_int_equal(f, CONNECT_END);
	assert_true(c->ended);
	c = conn(&sbs[0], SDK_START("id -u"), true);
	c->auth = "Basic dXNlcjo="; /* user: as no user */
	e2b_process_call(c, "Start");
	assert_int_equal(next_x, x + 1);
}

static void test_deadline_kills_and_the_end_says_signal(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{\"cmd\":\"sleep\",\"args\":[\"30\"],"
				  "\"cwd\":\"sub/dir\"}}", true);
	int32_t x = next_x;
	int64_t now = clock_mono_ms();

	c->timeout = "1500";
	e2b_process_call(c, "Start");
	assert_string_equal(last_cwd, "/home/user/sub/dir");
	assert_int_equal(last_req.timeout_seconds, 3); /* the init's backstop, after ours */
	assert_true(e2b_process_next_deadline() <= now + 1500 + 50);
	e2b_process_tick(now + 1400);
	assert_int_equal(nsignals, 0);
	/* the client has gone: the deadline holds all the same */
	conn_drop(c);
	e2b_process_tick(now + 1600);
	assert_int_equal(nsignals, 1);
	assert_int_equal(signals[0], SIGKILL);
	sinks[x].ops->done(sinks[x].ctx, 128 + SIGKILL, 1500, NULL, NULL);
	assert_int_equal(detaches, 0);
}

static void test_killed_process_ends_with_exit_code_minus_one(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("sleep 30"), true), *k;
	int32_t x = next_x;
	char body[128];

	e2b_process_call(c, "Start");
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u},\"signal\":\"SIGNAL_SIGKILL\"}",
		 start_pid(c));
	k = conn(&sbs[0], body, false);
	e2b_process_call(k, "SendSignal");
	assert_int_equal(k->status, 200);
	assert_string_equal(k->reply, "{}");
	assert_int_equal(signals[0], SIGKILL);
	/* sent again until it ends: the init drops a signal that comes before the process */
	e2b_process_tick(clock_mono_ms() + 450);
	assert_int_equal(nsignals, 2);
	sinks[x].ops->done(sinks[x].ctx, 137, 5, NULL, NULL);
	e2b_process_tick(clock_mono_ms() + 1000);
	assert_int_equal(nsignals, 2);
	assert_frame(c, 1, 0, "{\"event\":{\"end\":{\"exitCode\":-1,\"exited\":false,\"status\":"
		     "\"signal: killed\",\"error\":\"signal: killed\"}}}");
	assert_frame(c, 2, CONNECT_END, "{}");
	/* gone now: a second kill is not_found (the SDK's false) */
	k = conn(&sbs[0], body, false);
	e2b_process_call(k, "SendSignal");
	assert_string_equal(k->code, "not_found");
}

static void test_connect_unknown_pid_is_a_stream_not_found(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{\"pid\":12345}}", true);
	int f;

	e2b_process_call(c, "Connect");
	assert_true(c->begun && c->ended);
	assert_int_equal(nframes(c), 1);
	assert_non_null(strstr(frame(c, 0, &f), "\"code\":\"not_found\""));
	assert_int_equal(f, CONNECT_END);
	c = conn(&sbs[0], "{\"process\":{\"pid\":12345}}", false);
	e2b_process_call(c, "SendInput");
	assert_string_equal(c->code, "not_found");
}

static void test_process_lives_on_and_connect_follows_it(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("sleep 1; echo late"), true), *r, *l;
	int32_t x = next_x;
	char body[64];
	uint32_t pid;

	e2b_process_call(c, "Start");
	pid = start_pid(c);
	sinks[x].ops->output(sinks[x].ctx, 0, "early", 5);
	conn_drop(c);
	assert_int_equal(detaches, 0);
	l = conn(&sbs[0], "{}", false);
	e2b_process_call(l, "List");
	snprintf(body, sizeof(body), "{\"processes\":[{\"pid\":%u,\"config\":{\"cmd\":", pid);
	assert_memory_equal(l->reply, body, strlen(body));
	assert_non_null(strstr(l->reply, "\"args\":[\"-l\",\"-c\",\"sleep 1; echo late\"]"));
	/* another sandbox sees none of it */
	l = conn(&sbs[1], "{}", false);
	e2b_process_call(l, "List");
	assert_string_equal(l->reply, "{\"processes\":[]}");
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u}}", pid);
	r = conn(&sbs[1], body, true);
	e2b_process_call(r, "Connect");
	assert_non_null(strstr((char *)r->out + CONNECT_HDR, "not_found"));
	r = conn(&sbs[0], body, true);
	e2b_process_call(r, "Connect");
	assert_int_equal(start_pid(r), pid);
	sinks[x].ops->output(sinks[x].ctx, 0, "late\n", 5);
	sinks[x].ops->done(sinks[x].ctx, 0, 1000, NULL, NULL);
	assert_frame(r, 1, 0, "{\"event\":{\"data\":{\"stdout\":\"bGF0ZQo=\"}}}");
	assert_frame(r, 2, 0, "{\"event\":{\"end\":{\"exited\":true,\"status\":\"exit status 0\"}}}");
	assert_frame(r, 3, CONNECT_END, "{}");
}

static void test_a_sandbox_gets_its_share_and_no_more(void **state)
{
	struct e2b_conn *c;
	int f;

	for (int i = 0; i < LIMIT_E2B_SANDBOX_PROCS; i++) {
		c = conn(&sbs[0], SDK_START("sleep 60"), true);
		e2b_process_call(c, "Start");
		assert_int_equal(f = nframes(c), 1);
		conn_drop(c);
	}
	c = conn(&sbs[0], SDK_START("sleep 60"), true);
	e2b_process_call(c, "Start");
	assert_non_null(strstr(frame(c, 0, &f), "resource_exhausted"));
	assert_int_equal(f, CONNECT_END);
	c = conn(&sbs[1], SDK_START("true"), true);
	e2b_process_call(c, "Start");
	start_pid(c);
	/* the sandbox goes: its slots are free for the next one in its place */
	e2b_process_sandbox_gone(&sbs[0]);
	assert_int_equal(detaches, LIMIT_E2B_SANDBOX_PROCS);
}

static void test_slow_client_is_cut_with_an_error_and_the_process_runs_on(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("yes"), true), *fast;
	int32_t x = next_x;
	char body[64];
	int f;

	e2b_process_call(c, "Start");
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u}}", start_pid(c));
	fast = conn(&sbs[0], body, true);
	e2b_process_call(fast, "Connect");
	c->room = c->out_len + 40;
	sinks[x].ops->output(sinks[x].ctx, 0, "y\ny\ny\ny\ny\ny\ny\ny\ny\ny\ny\ny\ny\n", 26);
	sinks[x].ops->output(sinks[x].ctx, 0, "y\n", 2);
	assert_int_equal(nframes(c), 1);
	assert_int_equal(nframes(fast), 3);
	c->room = sizeof(c->out);
	c->ops->on_writable(c, c->ctx);
	assert_non_null(strstr(frame(c, 1, &f), "resource_exhausted"));
	assert_int_equal(f, CONNECT_END);
	assert_true(c->ended);
	assert_int_equal(detaches, 0);
	sinks[x].ops->output(sinks[x].ctx, 0, "y\n", 2);
	assert_int_equal(nframes(fast), 4);
}

static void test_keepalive_after_silence_never_before_start(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("sleep 5"), true);
	int64_t now = clock_mono_ms();

	c->ping = "1";
	e2b_process_call(c, "Start");
	start_pid(c);
	assert_true(e2b_process_next_deadline() <= now + 1000 + 50);
	e2b_process_tick(now + 500);
	assert_int_equal(nframes(c), 1);
	e2b_process_tick(now + 1100);
	assert_frame(c, 1, 0, "{\"event\":{\"keepalive\":{}}}");
	e2b_process_tick(now + 1200);
	assert_int_equal(nframes(c), 2);
	e2b_process_tick(now + 2200);
	assert_int_equal(nframes(c), 3);
}

static void test_stdin_goes_in_whole_or_waits_for_the_process(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{\"cmd\":\"cat\"},\"stdin\":true}", true);
	struct e2b_conn *in, *cl;
	int32_t x = next_x;
	char body[128];
	uint32_t pid;

	e2b_process_call(c, "Start");
	pid = start_pid(c);
	assert_non_null(sinks[x].ops->stdin_taken);
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u},\"input\":{\"stdin\":\"YWJjCg==\"}}",
		 pid);
	in = conn(&sbs[0], body, false);
	e2b_process_call(in, "SendInput");
	assert_string_equal(in->reply, "{}");
	assert_memory_equal(stdin_got, "abc\n", 4);
	/* the session takes a byte, then nothing for now: the answer waits for all of it */
	stdin_budget = 1;
	in = conn(&sbs[0], body, false);
	e2b_process_call(in, "SendInput");
	assert_false(in->replied);
	assert_int_equal(stdin_len, 5);
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u}}", pid);
	cl = conn(&sbs[0], body, false);
	e2b_process_call(cl, "CloseStdin");
	assert_string_equal(cl->reply, "{}");
	assert_int_equal(eofs, 0); /* after the input */
	stdin_budget = SIZE_MAX;
	sinks[x].ops->stdin_taken(sinks[x].ctx);
	assert_string_equal(in->reply, "{}");
	assert_memory_equal(stdin_got, "abc\nabc\n", 8);
	assert_int_equal(eofs, 1);
	/* a process started without stdin */
	c = conn(&sbs[0], SDK_START("cat"), true);
	e2b_process_call(c, "Start");
	snprintf(body, sizeof(body), "{\"process\":{\"pid\":%u},\"input\":{\"stdin\":\"YQ==\"}}",
		 start_pid(c));
	in = conn(&sbs[0], body, false);
	e2b_process_call(in, "SendInput");
	assert_string_equal(in->code, "failed_precondition");
}

static void test_sandbox_gone_ends_every_stream_unavailable(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], SDK_START("sleep 60"), true), *o;
	int32_t x = next_x;
	int f;

	e2b_process_call(c, "Start");
	o = conn(&sbs[1], SDK_START("sleep 60"), true);
	e2b_process_call(o, "Start");
	e2b_process_sandbox_gone(&sbs[0]);
	assert_non_null(strstr(frame(c, 1, &f), "\"code\":\"unavailable\""));
	assert_non_null(strstr(frame(c, 1, &f), "killed or reached its end of life"));
	assert_int_equal(f, CONNECT_END);
	assert_true(c->ended);
	assert_null(sinks[x].ops);
	assert_false(o->ended);
}

static void test_missing_cwd_is_invalid_argument(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{\"cmd\":\"pwd\",\"cwd\":\"/nope\"}}",
				  true);
	int32_t x = next_x;
	int f;

	e2b_process_call(c, "Start");
	start_pid(c);
	sinks[x].ops->done(sinks[x].ctx, 126, 1, "entering the working directory: No such "
			   "file or directory", NULL);
	assert_non_null(strstr(frame(c, 1, &f), "\"code\":\"invalid_argument\""));
	assert_int_equal(f, CONNECT_END);
}

static void test_bad_requests_and_methods(void **state)
{
	struct e2b_conn *c = conn(&sbs[0], "{\"process\":{}}", true);
	int f;

	e2b_process_call(c, "Start");
	assert_non_null(strstr(frame(c, 0, &f), "invalid_argument"));
	c = conn(&sbs[0], "{\"process\":{\"cmd\":\"x\"}}", false); /* not an envelope */
	c->ctype = "application/connect+json";
	e2b_process_call(c, "Start");
	assert_non_null(strstr(frame(c, 0, &f), "invalid_argument"));
	/* a stream asked for as a unary call is answered as one */
	c = conn(&sbs[0], "{\"process\":{\"cmd\":\"x\"}}", false);
	e2b_process_call(c, "Start");
	assert_string_equal(c->code, "invalid_argument");
	assert_false(c->begun);
	c = conn(&sbs[0], "{}", false);
	e2b_process_call(c, "StreamInput");
	assert_string_equal(c->code, "unimplemented");
	c = conn(&sbs[0], "{\"process\":{\"pid\":1},\"signal\":\"SIGNAL_SIGKILL\"", false);
	e2b_process_call(c, "SendSignal");
	assert_string_equal(c->code, "invalid_argument");
	begin_result = ERR_LIMIT;
	c = conn(&sbs[0], SDK_START("true"), true);
	e2b_process_call(c, "Start");
	assert_non_null(strstr(frame(c, 0, &f), "resource_exhausted"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_start_frames_start_data_end_then_end_stream, setup),
		cmocka_unit_test_setup(test_start_refuses_root_inside_the_stream, setup),
		cmocka_unit_test_setup(test_deadline_kills_and_the_end_says_signal, setup),
		cmocka_unit_test_setup(test_killed_process_ends_with_exit_code_minus_one, setup),
		cmocka_unit_test_setup(test_connect_unknown_pid_is_a_stream_not_found, setup),
		cmocka_unit_test_setup(test_process_lives_on_and_connect_follows_it, setup),
		cmocka_unit_test_setup(test_a_sandbox_gets_its_share_and_no_more, setup),
		cmocka_unit_test_setup(test_slow_client_is_cut_with_an_error_and_the_process_runs_on,
				       setup),
		cmocka_unit_test_setup(test_keepalive_after_silence_never_before_start, setup),
		cmocka_unit_test_setup(test_stdin_goes_in_whole_or_waits_for_the_process, setup),
		cmocka_unit_test_setup(test_sandbox_gone_ends_every_stream_unavailable, setup),
		cmocka_unit_test_setup(test_missing_cwd_is_invalid_argument, setup),
		cmocka_unit_test_setup(test_bad_requests_and_methods, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
