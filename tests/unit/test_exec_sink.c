/* test_exec_sink.c: exec sessions and their sinks. exec.c reports a session's output, end and
 * stdin-taken only to its sink; each of admin's sinks frames them for its client: the upgraded
 * stream (8-byte frames, the exit frame last, stdin frames read back in order and at the
 * session's pace), the NDJSON answer (one base64 line per piece in chunks, the exit object,
 * the chunked end) and a gRPC Exec call (ExecOutput messages as the call's buffer frees, the
 * complete one last, RESOURCE_EXHAUSTED for a client that fell too far behind).
 *
 * The agent stream and gRPC calls are stood in for with the linker's --wrap (Makefile:
 * UNIT_WRAP_test_exec_sink): grpc_call_send records what would be sent, exec_stdin and
 * exec_detach record what admin hands the session (or pass through to exec.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "http/frame.h"
#include "admin/admin.h"
#include "agent/agent_slot.h"
#include "daemon/daemon.h"

/* ---- stand-ins ---- */

static bool pass_through;          /* exec_stdin/exec_detach reach exec.c */
static char stdin_got[65536];
static size_t stdin_len, stdin_calls;
static int stdin_eofs, detaches;
static size_t stdin_refuse;        /* exec_stdin takes nothing this many times (in flight) */
static size_t stdin_most = SIZE_MAX; /* and at most this much at once */

size_t __real_exec_stdin(int32_t x, const void *data, size_t len, bool eof);
void __real_exec_detach(int32_t x);

size_t __wrap_exec_stdin(int32_t x, const void *data, size_t len, bool eof)
{
	size_t take;

	if (pass_through)
		return __real_exec_stdin(x, data, len, eof);
	stdin_calls++;
	if (len == 0) {
		stdin_eofs += eof;
		return 0;
	}
	if (stdin_refuse) {
		stdin_refuse--;
		return 0;
	}
	take = len < stdin_most ? len : stdin_most;
	memcpy(stdin_got + stdin_len, data, take);
	stdin_len += take;
	return take;
}

void __wrap_exec_detach(int32_t x)
{
	detaches++;
	if (pass_through)
		__real_exec_detach(x);
}

static int resizes;
static uint16_t resize_rows, resize_cols;

int __wrap_exec_resize(int32_t x, uint16_t rows, uint16_t cols)
{
	resizes++;
	resize_rows = rows;
	resize_cols = cols;
	return 0;
}

struct sent {
	int kind;                  /* 0 ExecOutput, 1 ManagementMessage */
	int stream, complete, exit_code;
	char data[16384];
	size_t len;
	char error[300];
	char command_id[32];
};
static struct sent sent[256];
static size_t nsent;
static int send_eagain;            /* grpc_call_send answers -EAGAIN this many times */
static int finished_status = -1;
static char finished_message[300];
static uint8_t agent_call, exec_call; /* their addresses are the fake calls */

int __wrap_grpc_call_send(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct sent *s = &sent[nsent];

	if (send_eagain) {
		send_eagain--;
		return -EAGAIN;
	}
	assert_true(nsent < ARRAY_LEN(sent));
	memset(s, 0, sizeof(*s));
	if ((void *)call == (void *)&exec_call) {
		const Agentic__Sandbox__V1__ExecOutput *o = (const void *)msg;

		s->stream = o->stream;
		s->complete = o->complete;
		s->exit_code = o->exit_code;
		s->len = o->data.len;
		if (o->data.len)
			memcpy(s->data, o->data.data, o->data.len);
		snprintf(s->error, sizeof(s->error), "%s", o->error ? o->error : "");
	} else {
		const Agentic__Sandbox__V1__ManagementMessage *m = (const void *)msg;

		s->kind = 1;
		if (m->payload_case == AGENTIC__SANDBOX__V1__MANAGEMENT_MESSAGE__PAYLOAD_COMMAND)
			snprintf(s->command_id, sizeof(s->command_id), "%s", m->command->command_id);
	}
	nsent++;
	return 0;
}

void __wrap_grpc_call_flush(struct grpc_call *call)
{
}

int __wrap_grpc_call_finish(struct grpc_call *call, int status, const char *message,
			    const struct grpc_md *trailers, size_t n)
{
	finished_status = status;
	snprintf(finished_message, sizeof(finished_message), "%s", message ? message : "");
	return 0;
}

void __wrap_grpc_call_set_user(struct grpc_call *call, void *user)
{
}

/* ---- a daemon without an engine ---- */

static struct daemon d;
static struct sandbox table[2];
static struct admin_conn conns[2];
static uint64_t uid_bits[(600000 + 63) / 64];
static char share[64];
static int peer = -1;

static int setup(void **state)
{
	memset(&d, 0, sizeof(d));
	memset(table, 0, sizeof(table));
	memset(conns, 0, sizeof(conns));
	config_defaults(&d.cfg);
	snprintf(share, sizeof(share), "/tmp/test_exec_sink.%d", (int)getpid());
	mkdir(share, 0700);
	snprintf(d.cfg.agentshare_root, sizeof(d.cfg.agentshare_root), "%s", share);
	sandbox_table_init(&d.cfg, table, 2, uid_bits);
	agent_init(&d.cfg, NULL, NULL, 0);
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	admin_init(&(struct admin_config){ .cfg = &d.cfg, .conns = conns, .nconns = 2,
					   .epfd = d.epfd, .pool = &d.pool });
	for (int i = 0; i < 2; i++)
		conns[i].spill_fd = conns[i].file_fd = -1;
	agenticd = &d; /* agenticd_watch, the loop's */
	pass_through = false;
	stdin_len = stdin_calls = 0;
	stdin_eofs = detaches = resizes = 0;
	stdin_refuse = 0;
	stdin_most = SIZE_MAX;
	nsent = 0;
	send_eagain = 0;
	finished_status = -1;
	peer = -1;
	return 0;
}

static int teardown(void **state)
{
	for (int i = 0; i < 2; i++)
		if (conns[i].phase != AC_FREE)
			admin_conn_close(&conns[i]);
	if (peer >= 0)
		close(peer);
	close(d.epfd);
	rmdir(share);
	return 0;
}

/* An admin connection in its exec (session 7), its client at `peer`. */
static struct admin_conn *exec_conn(bool upgraded, bool grpc)
{
	struct admin_conn *c = admin_conn_take();
	int sv[2];

	assert_non_null(c);
	c->phase = AC_EXEC;
	c->exec = 7;
	c->upgraded = upgraded;
	c->keep_alive = false;
	if (grpc) {
		c->call = (struct grpc_call *)&exec_call;
		return c;
	}
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	c->fd = sv[0];
	peer = sv[1];
	return c;
}

static size_t read_all(int fd, uint8_t *out, size_t cap)
{
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 1000) <= 0)
			break;
		r = read(fd, out + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	return n;
}

/* ---- the upgraded stream ---- */

static void test_stream_sink_frames_output_then_the_exit_frame_last(void **state)
{
	static uint8_t got[65536];
	struct admin_conn *c = exec_conn(true, false);
	const struct exec_sink_ops *ops = &admin_exec_stream_ops;
	struct frame_reader r;
	size_t n, at = 0;
	int seen = 0;

	assert_non_null(ops->stdin_taken);
	assert_int_equal(ops->output(c, 0, "hello", 5), 0);
	assert_int_equal(ops->output(c, 1, "oops", 4), 0);
	ops->done(c, 3, 12, NULL, NULL);
	assert_int_equal(c->phase, AC_FREE); /* all sent, and the upgraded stream closes */
	n = read_all(peer, got, sizeof(got));
	frame_reader_init(&r);
	while (at < n) {
		at += frame_reader_head(&r, got + at, n - at);
		assert_true(frame_reader_open(&r));
		switch (seen++) {
		case 0:
			assert_int_equal(frame_reader_type(&r), FRAME_STDOUT);
			assert_int_equal(r.left, 5);
			assert_memory_equal(got + at, "hello", 5);
			break;
		case 1:
			assert_int_equal(frame_reader_type(&r), FRAME_STDERR);
			assert_memory_equal(got + at, "oops", 4);
			break;
		case 2:
			assert_int_equal(frame_reader_type(&r), FRAME_EXIT);
			assert_int_equal(r.left, strlen("{\"exit_code\":3,\"duration_ms\":12}"));
			assert_memory_equal(got + at, "{\"exit_code\":3,\"duration_ms\":12}", r.left);
			break;
		default:
			fail_msg("a frame after the exit frame");
		}
		at += r.left;
		frame_reader_take(&r, r.left);
	}
	assert_int_equal(seen, 3);
	/* a sink whose connection left takes nothing */
	assert_int_equal(ops->output(c, 0, "late", 4), -ENOTCONN);
}

/* Stdin frames split at odd places, an unknown frame skipped, the end of stdin once; while the
 * session holds a chunk, reading waits for its stdin_taken. */
static void test_stream_sink_hands_stdin_on_in_order_at_the_sessions_pace(void **state)
{
	struct admin_conn *c = exec_conn(true, false);
	uint8_t wire[256];
	size_t n = 0;

	frame_head_put(wire + n, FRAME_STDIN, 6);
	memcpy(wire + n + 8, "abcdef", 6);
	n += 14;
	frame_head_put(wire + n, 9, 3);   /* a type this agenticd does not know */
	memcpy(wire + n + 8, "???", 3);
	n += 11;
	frame_head_put(wire + n, FRAME_STDIN, 2);
	memcpy(wire + n + 8, "gh", 2);
	n += 10;
	frame_head_put(wire + n, FRAME_STDIN, 0);
	n += 8;
	stdin_refuse = 1;                 /* the first offer finds a chunk in flight */
	stdin_most = 4;                   /* then at most 4 bytes at once */
	for (size_t i = 0; i < n; i += 5)
		assert_int_equal(write(peer, wire + i, n - i < 5 ? n - i : 5), (ssize_t)(n - i < 5 ? n - i : 5));
	admin_event((uint32_t)(c - conns), EPOLLIN);
	assert_int_equal(stdin_len, 0);   /* refused once: waiting for stdin_taken */
	assert_true(c->roff < c->rlen);
	admin_event((uint32_t)(c - conns), EPOLLIN);
	assert_int_equal(stdin_len, 0);   /* more input does not jump the queue */
	admin_exec_stream_ops.stdin_taken(c);
	admin_event((uint32_t)(c - conns), EPOLLIN);
	assert_int_equal(stdin_len, 8);
	assert_memory_equal(stdin_got, "abcdefgh", 8);
	assert_int_equal(stdin_eofs, 1);
	/* a half-close after the end of stdin changes nothing more */
	shutdown(peer, SHUT_WR);
	admin_event((uint32_t)(c - conns), EPOLLIN | EPOLLRDHUP);
	assert_int_equal(stdin_len, 8);
	assert_int_equal(c->phase, AC_EXEC);
}

/* Resize frames (type 4: rows, cols, 16 bits BE each) go to exec_resize once whole, however
 * the bytes are split; one of another size is ignored; stdin around them is unchanged. */
static void test_stream_sink_hands_resize_frames_to_the_session(void **state)
{
	struct admin_conn *c = exec_conn(true, false);
	uint8_t wire[256];
	size_t n = 0;

	frame_head_put(wire + n, FRAME_STDIN, 2);
	memcpy(wire + n + 8, "ab", 2);
	n += 10;
	frame_head_put(wire + n, FRAME_RESIZE, 4);
	memcpy(wire + n + 8, "\x00\x21\x01\x02", 4);     /* 33 x 258 */
	n += 12;
	frame_head_put(wire + n, FRAME_RESIZE, 5);          /* too long: ignored */
	memcpy(wire + n + 8, "\x00\x01\x00\x01\x00", 5);
	n += 13;
	frame_head_put(wire + n, FRAME_RESIZE, 3);          /* too short: ignored */
	memcpy(wire + n + 8, "\x00\x01\x00", 3);
	n += 11;
	frame_head_put(wire + n, FRAME_STDIN, 2);
	memcpy(wire + n + 8, "cd", 2);
	n += 10;
	for (size_t i = 0; i < n; i += 3) {
		assert_int_equal(write(peer, wire + i, n - i < 3 ? n - i : 3), (ssize_t)(n - i < 3 ? n - i : 3));
		admin_event((uint32_t)(c - conns), EPOLLIN);
	}
	assert_int_equal(resizes, 1);
	assert_int_equal(resize_rows, 33);
	assert_int_equal(resize_cols, 258);
	assert_int_equal(stdin_len, 4);
	assert_memory_equal(stdin_got, "abcd", 4);
}

/* ---- NDJSON ---- */

static void test_ndjson_sink_writes_base64_lines_in_chunks_then_the_end(void **state)
{
	static uint8_t got[65536];
	struct admin_conn *c = exec_conn(false, false);
	const struct exec_sink_ops *ops = &admin_exec_ndjson_ops;
	static const char want[] =
		"22\r\n{\"stream\":\"stdout\",\"data\":\"aGk=\"}\n\r\n"
		"26\r\n{\"stream\":\"stderr\",\"data\":\"AP8KYQ==\"}\n\r\n"
		"49\r\n{\"exit_code\":0,\"duration_ms\":7,\"error\":\"boom\",\"transcript_error\":\"full\"}\n\r\n"
		"0\r\n\r\n";
	size_t n;

	assert_null(ops->stdin_taken);    /* the command sees the end of stdin at once */
	assert_int_equal(ops->output(c, 0, "hi", 2), 0);
	assert_int_equal(ops->output(c, 1, "\0\377\na", 4), 0);
	ops->done(c, 0, 7, "boom", "full");
	n = read_all(peer, got, sizeof(got));
	got[n] = 0;
	assert_string_equal((char *)got, want);
}

static void test_ndjson_sink_splits_large_output_into_lines(void **state)
{
	static uint8_t big[20000], got[65536];
	struct admin_conn *c = exec_conn(false, false);
	size_t n;
	int lines = 0;

	memset(big, 'x', sizeof(big));
	assert_int_equal(admin_exec_ndjson_ops.output(c, 0, big, sizeof(big)), 0);
	admin_exec_ndjson_ops.done(c, 0, 1, NULL, NULL);
	n = read_all(peer, got, sizeof(got));
	for (size_t i = 0; i + 1 < n; i++)
		lines += got[i] == '}' && got[i + 1] == '\n';
	assert_int_equal(lines, 4 + 1); /* 6144-byte pieces, then the exit object */
}

/* ---- gRPC ---- */

static void test_grpc_sink_sends_messages_as_the_buffer_frees_then_complete(void **state)
{
	struct admin_conn *c = exec_conn(false, true);
	const struct exec_sink_ops *ops = &admin_grpc_sink_ops;

	assert_null(ops->stdin_taken);
	assert_string_equal(ops->client, "grpc");
	send_eagain = 1;                 /* the call's buffer is full at first */
	assert_int_equal(ops->output(c, 0, "hello", 5), 0);
	assert_int_equal(nsent, 0);
	assert_int_equal(ops->output(c, 1, "err", 3), 0);
	assert_int_equal(nsent, 2);      /* the second write pumps both */
	assert_int_equal(sent[0].stream, AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDOUT);
	assert_memory_equal(sent[0].data, "hello", 5);
	assert_int_equal(sent[1].stream, AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDERR);
	assert_int_equal(sent[1].len, 3);
	ops->done(c, 42, 9, NULL, "disk full");
	assert_int_equal(nsent, 3);
	assert_true(sent[2].complete);
	assert_int_equal(sent[2].exit_code, 42);
	assert_string_equal(sent[2].error, "transcript incomplete: disk full");
	assert_int_equal(finished_status, GRPC_OK);
	assert_int_equal(c->phase, AC_FREE);
}

static void test_grpc_sink_ends_a_client_too_far_behind_with_resource_exhausted(void **state)
{
	static uint8_t chunk[8192];
	struct admin_conn *c = exec_conn(false, true);
	int r = 0, writes = 0;

	d.cfg.exec_spill_max_bytes = 100000;
	send_eagain = 1 << 30;           /* the client reads nothing */
	while (r == 0 && writes < 1000) {
		r = admin_grpc_sink_ops.output(c, 0, chunk, sizeof(chunk));
		writes++;
	}
	assert_int_equal(r, -EFBIG);
	assert_int_equal(detaches, 1);   /* the session goes on without this client */
	assert_true(c->dropped);
	send_eagain = 0;                 /* it reads again: what was queued goes, then the end */
	admin_grpc_pump(c);
	assert_int_equal(finished_status, GRPC_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(finished_message, "exec_spill_max_bytes"));
	for (size_t i = 0; i < nsent; i++)
		assert_false(sent[i].complete); /* never an answer that looks whole */
}

/* ---- exec.c reports to the sink, and only there ---- */

struct record {
	char out[256];
	size_t len;
	int done, taken;
	int32_t code;
	char error[64];
};

static int rec_output(void *ctx, int stream, const void *data, size_t len)
{
	struct record *r = ctx;

	r->out[r->len++] = stream ? 'E' : 'O';
	memcpy(r->out + r->len, data, len);
	r->len += len;
	return 0;
}

static void rec_done(void *ctx, int32_t code, int64_t ms, const char *error, const char *terr)
{
	struct record *r = ctx;

	r->done++;
	r->code = code;
	snprintf(r->error, sizeof(r->error), "%s", error ? error : "");
}

static void rec_taken(void *ctx)
{
	((struct record *)ctx)->taken++;
}

static void test_exec_reports_output_end_and_stdin_taken_to_its_sink(void **state)
{
	static const struct exec_sink_ops ops = { "test", rec_output, rec_done, rec_taken };
	struct record rec = { 0 };
	struct exec_sink sink = { &ops, &rec };
	struct sandbox *sb = &table[0];
	struct exec_req er = { .argv = { "cat" }, .argc = 1 };
	char id[32];
	int x;

	pass_through = true;
	sb->state = SB_READY;
	sb->gen = 1;
	snprintf(sb->name, sizeof(sb->name), "s1");
	agent_slot(sb)->call = (struct grpc_call *)&agent_call;
	agent_slot(sb)->registered = true;
	agent_slot(sb)->stdin_ack = true;
	x = exec_begin(sb, &er, &sink);
	assert_true(x >= 0);
	assert_int_equal(nsent, 1);
	snprintf(id, sizeof(id), "%s", sent[0].command_id);
	assert_int_equal(exec_output(sb, id, 0, "ab", 2, false), 2);
	assert_int_equal(exec_output(sb, id, 1, "c", 1, false), 1);
	send_eagain = 1;                 /* the agent's queue is full: the chunk is held */
	assert_int_equal(exec_stdin(x, "in", 2, false), 2);
	assert_int_equal(nsent, 1);
	assert_int_equal(exec_stdin(x, "more", 4, false), 0);
	assert_int_equal(rec.taken, 0);
	exec_agent_writable(sb);         /* it goes out, and the sink hears that room came back */
	assert_int_equal(nsent, 2);
	assert_int_equal(rec.taken, 1);
	assert_true(exec_result(sb, id, 4, 10, 0, NULL, 0));
	assert_int_equal(rec.done, 1);
	assert_int_equal(rec.code, 4);
	assert_int_equal(rec.len, 5);
	assert_memory_equal(rec.out, "OabEc", 5);
	/* ended: later output for the id reaches the transcript only */
	exec_output(sb, id, 0, "zz", 2, false);
	assert_int_equal(rec.len, 5);
	/* a detached session (no sink) and one whose client left report nowhere */
	rec.done = 0;
	x = exec_begin(sb, &er, &sink);
	snprintf(id, sizeof(id), "%s", sent[nsent - 1].command_id);
	exec_detach(x);
	exec_output(sb, id, 0, "q", 1, false);
	exec_sandbox_gone(sb, "gone");
	assert_int_equal(rec.len, 5);
	assert_int_equal(rec.done, 0);
	x = exec_begin(sb, &er, NULL);
	assert_true(x >= 0);
	exec_sandbox_gone(sb, "gone");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_stream_sink_frames_output_then_the_exit_frame_last, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_sink_hands_stdin_on_in_order_at_the_sessions_pace, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stream_sink_hands_resize_frames_to_the_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ndjson_sink_writes_base64_lines_in_chunks_then_the_end, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ndjson_sink_splits_large_output_into_lines, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grpc_sink_sends_messages_as_the_buffer_frees_then_complete, setup, teardown),
		cmocka_unit_test_setup_teardown(test_grpc_sink_ends_a_client_too_far_behind_with_resource_exhausted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_reports_output_end_and_stdin_taken_to_its_sink, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
