/* test_grpc.c: gRPC wire helpers, message reassembly at every split, and a server and client
 * talking in one process over a Unix socket (so call.c, server.c and client.c run under
 * ASan/UBSan too). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "grpc/grpc.h"
#include "grpctest.pb-c.h"

static void test_grpc_timeout_parse_units_and_rejects_malformed(void **state)
{
	int64_t ms;

	assert_int_equal(grpc_timeout_parse("1H", 2, &ms), 0);
	assert_true(ms == 3600000);
	assert_int_equal(grpc_timeout_parse("2M", 2, &ms), 0);
	assert_true(ms == 120000);
	assert_int_equal(grpc_timeout_parse("3S", 2, &ms), 0);
	assert_true(ms == 3000);
	assert_int_equal(grpc_timeout_parse("99999999m", 9, &ms), 0);
	assert_true(ms == 99999999);
	assert_int_equal(grpc_timeout_parse("1500u", 5, &ms), 0);
	assert_true(ms == 2); /* rounded up */
	assert_int_equal(grpc_timeout_parse("1n", 2, &ms), 0);
	assert_true(ms == 1);
	assert_int_equal(grpc_timeout_parse("100000000m", 10, &ms), ERR_PARSE);
	assert_int_equal(grpc_timeout_parse("m", 1, &ms), ERR_PARSE);
	assert_int_equal(grpc_timeout_parse("10x", 3, &ms), ERR_PARSE);
	assert_int_equal(grpc_timeout_parse("-1S", 3, &ms), ERR_PARSE);
}

static void test_grpc_percent_encoding_round_trips_and_decodes_leniently(void **state)
{
	char out[64], bad[] = "50%zz%4";

	assert_int_equal(grpc_percent_encode("a b%c\n\xc3\xa9", out, sizeof(out)), 0);
	assert_string_equal(out, "a b%25c%0A%C3%A9");
	grpc_percent_decode(out);
	assert_string_equal(out, "a b%c\n\xc3\xa9");
	grpc_percent_decode(bad);
	assert_string_equal(bad, "50%zz%4");
	assert_int_equal(grpc_percent_encode("\n\n", out, 6), ERR_LIMIT);
	/* no space at an end of the field value (RFC 9113 §8.2.1) */
	assert_int_equal(grpc_percent_encode(" a b ", out, sizeof(out)), 0);
	assert_string_equal(out, "%20a b%20");
	assert_int_equal(grpc_percent_encode(" ", out, sizeof(out)), 0);
	assert_string_equal(out, "%20");
}

static void test_grpc_base64_takes_padded_and_unpadded(void **state)
{
	uint8_t bin[5] = { 0, 1, 0xfe, 0xff, 0x80 }, back[8];
	char enc[16];

	assert_int_equal(grpc_base64_encode(bin, 5, enc, sizeof(enc)), 7);
	assert_string_equal(enc, "AAH+/4A");
	assert_int_equal(grpc_base64_decode(enc, 7, back, sizeof(back)), 5);
	assert_memory_equal(back, bin, 5);
	assert_int_equal(grpc_base64_decode("AAH+/4A=", 8, back, sizeof(back)), 5);
	assert_int_equal(grpc_base64_decode("AA*A", 4, back, sizeof(back)), ERR_PARSE);
	assert_int_equal(grpc_base64_decode("AAH+/4A", 7, back, 4), ERR_LIMIT);
}

/* Three messages (empty, 3 bytes, 300 bytes) fed in two pieces cut at every byte. */
static void test_grpc_rx_split_at_every_byte_gives_the_same_messages(void **state)
{
	uint8_t s[5 + 8 + 305], gather[300];
	size_t n = 0;

	memcpy(s + n, "\0\0\0\0\0", 5);
	n += 5;
	memcpy(s + n, "\0\0\0\0\3abc", 8);
	n += 8;
	memcpy(s + n, "\0\0\0\x01\x2c", 5);
	n += 5;
	for (int i = 0; i < 300; i++)
		s[n++] = (uint8_t)i;
	for (size_t cut = 0; cut <= n; cut++) {
		struct grpc_rx rx = { 0 };
		uint32_t lens[3], got = 0;
		size_t pieces[2][2] = { { 0, cut }, { cut, n - cut } };

		for (int k = 0; k < 2; k++) {
			const uint8_t *p = s + pieces[k][0];
			size_t left = pieces[k][1];

			while (left) {
				const uint8_t *msg;
				uint32_t len;
				enum grpc_rx_event ev = grpc_rx_feed(&rx, &p, &left, 1000, &msg, &len);

				if (ev == GRPC_RX_MORE)
					break;
				if (ev == GRPC_RX_NEED_BUF) {
					assert_true(len == 3 || len == 300);
					rx.buf = gather;
					continue;
				}
				assert_int_equal(ev, GRPC_RX_MESSAGE);
				assert_true(got < 3);
				lens[got++] = len;
				if (len == 3)
					assert_memory_equal(msg, "abc", 3);
				if (len == 300)
					for (int i = 0; i < 300; i++)
						assert_int_equal(msg[i], (uint8_t)i);
				rx.buf = NULL;
			}
		}
		assert_int_equal(got, 3);
		assert_int_equal(lens[0], 0);
		assert_int_equal(lens[1], 3);
		assert_int_equal(lens[2], 300);
	}
}

static void test_grpc_rx_rejects_oversize_and_compressed_prefixes(void **state)
{
	struct grpc_rx rx = { 0 };
	const uint8_t big[5] = { 0, 0, 0, 4, 1 }, comp[5] = { 1, 0, 0, 0, 1 };
	const uint8_t *p = big, *msg;
	size_t n = 5;
	uint32_t len;

	assert_int_equal(grpc_rx_feed(&rx, &p, &n, 1024, &msg, &len), GRPC_RX_TOO_BIG);
	assert_int_equal(len, 1025);
	memset(&rx, 0, sizeof(rx));
	p = comp;
	n = 5;
	assert_int_equal(grpc_rx_feed(&rx, &p, &n, 1024, &msg, &len), GRPC_RX_COMPRESSED);
}

/* ---- a server and a client in one process ---- */

struct seen {
	int done, status, messages;
	char message[256];
	size_t bytes;
	struct grpc_peer peer;
};

static struct seen server_seen;

static void s_start(struct grpc_call *call)
{
	server_seen.peer = *grpc_call_peer(call);
}

static void s_echo(struct grpc_call *call, const ProtobufCMessage *msg)
{
	if (grpc_call_send(call, msg) == 0)
		grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
	else
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "no buffer", NULL, 0);
}

static void s_done(struct grpc_call *call, int status, const char *message)
{
	server_seen.done = 1;
	server_seen.status = status;
}

/* ServerStream: sends `count` messages of `size` bytes, as fast as the call's queue takes
 * them, going on from on_writable after -EAGAIN. */
static struct {
	uint32_t left, size, writable;
	bool interject;        /* after each -EAGAIN, queue a small message that fits */
	uint32_t interjected;  /* how many of those the queue took */
} streamer;

static void s_stream_more(struct grpc_call *call)
{
	static uint8_t data[4096];
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	int r;

	m.data.data = data;
	m.data.len = streamer.size;
	while (streamer.left) {
		r = grpc_call_send(call, &m.base);
		if (r == -EAGAIN) {
			/* another sender of the same call (agenticd's output acks beside an exec's
			 * stdin) whose message still fits: the one waiting must still be woken */
			if (streamer.interject) {
				m.data.len = 1;
				if (grpc_call_send(call, &m.base) == 0)
					streamer.interjected++;
			}
			return;
		}
		assert_int_equal(r, 0);
		streamer.left--;
	}
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
}

static void s_stream(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Test__V1__StreamRequest *rq = (const void *)msg;

	streamer.left = rq->count;
	streamer.size = rq->size < 4096 ? rq->size : 4096;
	s_stream_more(call);
}

static void s_stream_writable(struct grpc_call *call)
{
	streamer.writable++;
	s_stream_more(call);
}

static const struct grpc_method server_methods[] = {
	{ "/agentic.test.v1.Test/Unary", &agentic__test__v1__msg__descriptor,
	  &agentic__test__v1__msg__descriptor, 0,
	  { .on_start = s_start, .on_message = s_echo, .on_done = s_done }, NULL },
	{ "/agentic.test.v1.Test/Hang", &agentic__test__v1__msg__descriptor,
	  &agentic__test__v1__msg__descriptor, 0, { .on_done = s_done }, NULL },
	{ "/agentic.test.v1.Test/ServerStream", &agentic__test__v1__stream_request__descriptor,
	  &agentic__test__v1__msg__descriptor, GRPC_SERVER_STREAMING,
	  { .on_message = s_stream, .on_writable = s_stream_writable, .on_done = s_done }, NULL },
};

static void c_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct seen *o = grpc_call_user(call);
	const Agentic__Test__V1__Msg *m = (const void *)msg;

	o->messages++;
	o->bytes += m->data.len;
}

static void c_done(struct grpc_call *call, int status, const char *message)
{
	struct seen *o = grpc_call_user(call);

	o->done = 1;
	o->status = status;
	snprintf(o->message, sizeof(o->message), "%s", message ? message : "");
}

static const struct grpc_method client_unary = {
	"/agentic.test.v1.Test/Unary", &agentic__test__v1__msg__descriptor,
	&agentic__test__v1__msg__descriptor, 0, { .on_message = c_message, .on_done = c_done },
	NULL
};
static const struct grpc_method client_hang = {
	"/agentic.test.v1.Test/Hang", &agentic__test__v1__msg__descriptor,
	&agentic__test__v1__msg__descriptor, 0, { .on_message = c_message, .on_done = c_done },
	NULL
};
static const struct grpc_method client_nope = {
	"/agentic.test.v1.Test/Nope", &agentic__test__v1__msg__descriptor,
	&agentic__test__v1__msg__descriptor, 0, { .on_message = c_message, .on_done = c_done },
	NULL
};

struct pair {
	struct grpc_server *s;
	struct grpc_client *c;
	void *ss, *cs;
	char path[64];
};

static void pair_up(struct pair *p, uint32_t max_message, uint32_t large)
{
	struct grpc_server_config scfg = { .max_connections = 4, .max_streams_per_connection = 16,
					    .max_message_bytes = max_message, .small_buffers = 8,
					    .large_buffers = large };
	struct grpc_client_config ccfg = { p->path, max_message, 8, 1, false, NULL, NULL };
	size_t sb, cb;

	snprintf(p->path, sizeof(p->path), "/tmp/agentic-test-grpc-%d.sock", (int)getpid());
	sb = grpc_server_storage_bytes(&scfg);
	cb = grpc_client_storage_bytes(&ccfg);
	assert_true(sb > 0 && cb > 0);
	p->ss = malloc(sb);
	p->cs = malloc(cb);
	assert_int_equal(grpc_server_init(&scfg, p->ss, sb, &p->s), 0);
	assert_int_equal(grpc_server_listen_unix(p->s, p->path, 0600, server_methods,
						 ARRAY_LEN(server_methods)), 0);
	assert_int_equal(grpc_client_init(&ccfg, p->cs, cb, &p->c), 0);
	assert_int_equal(grpc_client_connect(p->c), 0);
	memset(&server_seen, 0, sizeof(server_seen));
}

static void pair_down(struct pair *p)
{
	grpc_client_close(p->c);
	grpc_server_close(p->s);
	unlink(p->path);
	free(p->ss);
	free(p->cs);
}

static void spin(struct pair *p, const int *done, int ms)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (!*done) {
		grpc_server_run(p->s, 1);
		grpc_client_run(p->c, 1);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms)
			return;
	}
}

static int unary(struct pair *p, const struct grpc_method *m, size_t len, int timeout_ms,
		 struct seen *o)
{
	static uint8_t data[300000];
	Agentic__Test__V1__Msg msg = AGENTIC__TEST__V1__MSG__INIT;
	struct grpc_call *call;
	int r;

	memset(o, 0, sizeof(*o));
	msg.data.data = data;
	msg.data.len = len;
	r = grpc_client_start(p->c, m, NULL, 0, timeout_ms, o, &call);
	if (r < 0)
		return r;
	r = grpc_call_send(call, &msg.base);
	if (r < 0)
		return r;
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
	spin(p, &o->done, 5000);
	return 0;
}

static void test_grpc_unary_round_trip_carries_peer_credentials(void **state)
{
	struct pair p;
	struct seen o;

	pair_up(&p, 65536, 1);
	assert_int_equal(unary(&p, &client_unary, 1000, 0, &o), 0);
	assert_true(o.done);
	assert_int_equal(o.status, GRPC_OK);
	assert_int_equal(o.messages, 1);
	assert_int_equal(o.bytes, 1000);
	spin(&p, &server_seen.done, 1000);
	assert_int_equal(server_seen.status, GRPC_OK);
	assert_int_equal(server_seen.peer.pid, getpid());
	assert_int_equal(server_seen.peer.uid, getuid());
	assert_int_equal(server_seen.peer.gid, getgid());
	pair_down(&p);
}

static void test_grpc_unknown_method_is_unimplemented(void **state)
{
	struct pair p;
	struct seen o;

	pair_up(&p, 65536, 1);
	assert_int_equal(unary(&p, &client_nope, 10, 0, &o), 0);
	assert_int_equal(o.status, GRPC_UNIMPLEMENTED);
	assert_string_equal(o.message, "unknown method /agentic.test.v1.Test/Nope");
	pair_down(&p);
}

static void test_grpc_deadline_ends_the_call_on_both_sides(void **state)
{
	struct pair p;
	struct seen o;

	pair_up(&p, 65536, 1);
	assert_int_equal(unary(&p, &client_hang, 10, 100, &o), 0);
	assert_int_equal(o.status, GRPC_DEADLINE_EXCEEDED);
	spin(&p, &server_seen.done, 2000);
	assert_true(server_seen.done);
	assert_true(server_seen.status == GRPC_DEADLINE_EXCEEDED ||
		    server_seen.status == GRPC_CANCELLED);
	pair_down(&p);
}

static void test_grpc_oversize_message_is_resource_exhausted_by_the_server(void **state)
{
	struct pair p;
	struct seen o;

	/* the client allows 256 KiB, the server 128 KiB */
	pair_up(&p, 131072, 1);
	{
		struct grpc_client_config ccfg = { p.path, 262144, 8, 1, false, NULL, NULL };
		size_t cb = grpc_client_storage_bytes(&ccfg);

		grpc_client_close(p.c);
		free(p.cs);
		p.cs = malloc(cb);
		assert_int_equal(grpc_client_init(&ccfg, p.cs, cb, &p.c), 0);
	}
	assert_int_equal(unary(&p, &client_unary, 200000, 0, &o), 0);
	assert_int_equal(o.status, GRPC_RESOURCE_EXHAUSTED);
	assert_non_null(strstr(o.message, "over the limit of 131072"));
	/* the connection still serves */
	assert_int_equal(unary(&p, &client_unary, 10, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	pair_down(&p);
}

static void test_grpc_no_free_buffer_is_resource_exhausted(void **state)
{
	struct pair p;
	struct seen o;

	/* no large buffers: a 100 KB message spans reads and needs one */
	pair_up(&p, 131072, 0);
	assert_int_equal(unary(&p, &client_unary, 100000, 0, &o), 0);
	assert_int_equal(o.status, GRPC_RESOURCE_EXHAUSTED);
	assert_int_equal(unary(&p, &client_unary, 10, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	pair_down(&p);
}

static void test_grpc_lost_connection_ends_calls_unavailable_and_redials(void **state)
{
	struct pair p;
	struct seen o;
	struct grpc_call *call;
	Agentic__Test__V1__Msg msg = AGENTIC__TEST__V1__MSG__INIT;

	pair_up(&p, 65536, 1);
	memset(&o, 0, sizeof(o));
	assert_int_equal(grpc_client_start(p.c, &client_hang, NULL, 0, 0, &o, &call), 0);
	assert_int_equal(grpc_call_send(call, &msg.base), 0);
	for (int i = 0; i < 20; i++) {
		grpc_server_run(p.s, 1);
		grpc_client_run(p.c, 1);
	}
	grpc_server_close(p.s);
	spin(&p, &o.done, 2000);
	assert_int_equal(o.status, GRPC_UNAVAILABLE);
	assert_false(grpc_client_connected(p.c));
	/* a new server on the same path: the next call dials again */
	{
		struct grpc_server_config scfg = { .max_connections = 4,
			.max_streams_per_connection = 16, .max_message_bytes = 65536,
			.small_buffers = 8, .large_buffers = 1 };

		assert_int_equal(grpc_server_init(&scfg, p.ss, grpc_server_storage_bytes(&scfg),
						  &p.s), 0);
		assert_int_equal(grpc_server_listen_unix(p.s, p.path, 0600, server_methods,
							 ARRAY_LEN(server_methods)), 0);
	}
	assert_int_equal(unary(&p, &client_unary, 10, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	pair_down(&p);
}

/* A raw h2 client (our engine over a plain socket) sending a request that is not gRPC. */
struct raw {
	char status[8];
	int closed;
};

static void raw_headers(void *ctx, struct h2_conn *c, struct h2_stream *s,
			const struct h2_field *f, size_t n, unsigned flags)
{
	struct raw *r = ctx;

	for (size_t i = 0; i < n; i++)
		if (strcmp(f[i].name, ":status") == 0)
			snprintf(r->status, sizeof(r->status), "%s", f[i].value);
}

static void raw_data(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
		     size_t n, unsigned flags)
{
}

static void raw_close(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
		      unsigned flags)
{
	((struct raw *)ctx)->closed = 1;
}

static void test_grpc_non_grpc_content_type_gets_http_415(void **state)
{
	static const struct h2_callbacks cb = { raw_headers, raw_data, raw_close };
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Unary", 5, 27 }, { ":authority", "x", 10, 1 },
		{ "content-type", "text/plain", 12, 10 },
	};
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	struct raw r = { "", 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct h2_stream *s;
	struct pair p;
	uint8_t in[4096];
	int fd;

	pair_up(&p, 65536, 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p.path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	h2_conn_init(&h2, H2_CLIENT, 10, &cb, &r, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, 5, 1, NULL, &s), 0);
	for (int i = 0; i < 200 && !r.closed; i++) {
		ssize_t k;

		if (h2.out.len) {
			k = write(fd, h2.out.data, h2.out.len);
			if (k > 0)
				h2_conn_sent(&h2, (size_t)k);
		}
		grpc_server_run(p.s, 5);
		k = read(fd, in, sizeof(in));
		if (k > 0)
			assert_int_equal(h2_conn_feed(&h2, in, (size_t)k), 0);
	}
	assert_true(r.closed);
	assert_string_equal(r.status, "415");
	close(fd);
	pair_down(&p);
}

/* A raw h2 client that counts the DATA bytes it is fed and notes the trailers. */
struct counted {
	size_t data;
	int trailers;
};

static void counted_headers(void *ctx, struct h2_conn *c, struct h2_stream *s,
			    const struct h2_field *f, size_t n, unsigned flags)
{
	if (flags & H2_END_STREAM)
		((struct counted *)ctx)->trailers = 1;
}

static void counted_data(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
			 size_t n, unsigned flags)
{
	((struct counted *)ctx)->data += n;
}

static void counted_close(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
			  unsigned flags)
{
}

/* Server streaming to a client that stops taking DATA (its bytes are read off the socket but
 * not fed to its engine, so it returns no window): the server sends exactly the stream window
 * it was given and waits, with the handler's messages queued. Fed, the client sends its
 * WINDOW_UPDATE; that must move the call's queue again and call on_writable for the rest, to
 * the last message and the trailers. The admin socket's gRPC Exec relies on this for a client
 * that pauses. */
static void stream_held_by_the_window(bool interject)
{
	static const struct h2_callbacks cb = { counted_headers, counted_data, counted_close };
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/ServerStream", 5, 34 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	/* StreamRequest{count: 512, size: 4000}, length-prefixed */
	static const uint8_t ask[] = { 0, 0, 0, 0, 6, 0x08, 0x80, 0x04, 0x10, 0xa0, 0x1f };
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static uint8_t held[2u << 20];
	const size_t each = 5 + 3 + 4000, small = 5 + 2 + 1;
	struct counted r = { 0, 0 };
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct h2_stream *s;
	struct pair p;
	size_t nheld = 0;
	uint32_t writable;
	int fd, idle = 0;

	pair_up(&p, 65536, 1);
	memset(&streamer, 0, sizeof(streamer));
	streamer.interject = interject;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p.path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	h2_conn_init(&h2, H2_CLIENT, 10, &cb, &r, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, ask, sizeof(ask), 1), (long)sizeof(ask));
	/* the client takes nothing: read and hold until the server has been idle a while */
	while (idle < 100) {
		ssize_t k;

		if (h2.out.len && (k = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)k);
		grpc_server_run(p.s, 2);
		k = read(fd, held + nheld, sizeof(held) - nheld);
		idle = k > 0 ? 0 : idle + 1;
		if (k > 0)
			nheld += (size_t)k;
	}
	assert_true(streamer.left > 0);
	writable = streamer.writable;
	assert_int_equal(h2_conn_feed(&h2, held, nheld), 0);
	assert_int_equal(r.data, H2_STREAM_WINDOW);
	assert_false(r.trailers);
	/* now it takes everything; its WINDOW_UPDATEs must get the server going again */
	for (int i = 0; i < 5000 && !r.trailers; i++) {
		uint8_t in[65536];
		ssize_t k;

		if (h2.out.len && (k = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)k);
		grpc_server_run(p.s, 1);
		k = read(fd, in, sizeof(in));
		if (k > 0)
			assert_int_equal(h2_conn_feed(&h2, in, (size_t)k), 0);
	}
	if (interject)
		assert_true(streamer.interjected > 0);
	assert_int_equal(streamer.left, 0);
	assert_true(r.trailers);
	assert_int_equal(r.data, 512 * each + streamer.interjected * small);
	assert_true(streamer.writable > writable);
	spin(&p, &server_seen.done, 1000);
	assert_int_equal(server_seen.status, GRPC_OK);
	close(fd);
	pair_down(&p);
}

static void test_grpc_stream_held_by_the_window_resumes_on_window_update(void **state)
{
	stream_held_by_the_window(false);
}

/* The same, but after each -EAGAIN the handler queues a small message that fits (agenticd's
 * Connect stream carries output acks beside an exec's stdin chunks): that successful send
 * must not swallow the wake-up owed for the refused one. It did, and a 1 MiB stdin exec hung
 * with its next chunk held and nothing left to call on_writable. */
static void test_grpc_send_that_fits_after_eagain_keeps_on_writable_owed(void **state)
{
	stream_held_by_the_window(true);
}

/* A raw h2 client that keeps the DATA it is fed and the grpc-status of the trailers. */
struct kept {
	uint8_t data[1u << 21];
	size_t len;
	char status[8];
	int trailers, closed;
	uint32_t code;  /* the stream's close: RST_STREAM's error code, or 0 */
};

static void kept_headers(void *ctx, struct h2_conn *c, struct h2_stream *s,
			 const struct h2_field *f, size_t n, unsigned flags)
{
	struct kept *k = ctx;

	for (size_t i = 0; i < n; i++)
		if (strcmp(f[i].name, "grpc-status") == 0)
			snprintf(k->status, sizeof(k->status), "%s", f[i].value);
	if (flags & H2_END_STREAM)
		k->trailers = 1;
}

static void kept_data(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
		      size_t n, unsigned flags)
{
	struct kept *k = ctx;

	assert_true(n <= sizeof(k->data) - k->len);
	memcpy(k->data + k->len, p, n);
	k->len += n;
}

static void kept_close(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
		       unsigned flags)
{
	((struct kept *)ctx)->closed = 1;
	((struct kept *)ctx)->code = code;
}

static const struct h2_callbacks kept_cb = { kept_headers, kept_data, kept_close };

static int raw_dial(const struct pair *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", p->path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* Runs the server and a raw h2 client until the client's stream has closed. */
static void raw_run(struct pair *p, int fd, struct h2_conn *h2, const int *closed)
{
	for (int i = 0; i < 5000 && !*closed; i++) {
		uint8_t in[65536];
		ssize_t k;

		if (h2->out.len && (k = write(fd, h2->out.data, h2->out.len)) > 0)
			h2_conn_sent(h2, (size_t)k);
		grpc_server_run(p->s, 1);
		k = read(fd, in, sizeof(in));
		if (k > 0)
			assert_int_equal(h2_conn_feed(h2, in, (size_t)k), 0);
	}
}

/* RFC 9113 §3.4: a client that does not open with the preface (here an HTTP/1.1 request) gets
 * GOAWAY(PROTOCOL_ERROR), not a GOAWAY that says all went well. */
static void test_grpc_bad_preface_gets_goaway_protocol_error(void **state)
{
	static const char http1[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
	uint8_t in[4096];
	size_t got = 0, off = 0;
	long code = -1;
	struct pair p;
	int fd;

	pair_up(&p, 65536, 1);
	fd = raw_dial(&p);
	assert_int_equal(write(fd, http1, sizeof(http1) - 1), (ssize_t)sizeof(http1) - 1);
	for (int i = 0; i < 200; i++) {
		ssize_t k;

		grpc_server_run(p.s, 2);
		k = read(fd, in + got, sizeof(in) - got);
		if (k == 0)
			break;
		if (k > 0)
			got += (size_t)k;
	}
	while (off + 9 <= got) {
		const uint8_t *h = in + off;
		uint32_t len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];

		if (h[3] == 0x7 && len >= 8 && off + 9 + len <= got)
			code = (long)((uint32_t)h[13] << 24 | (uint32_t)h[14] << 16 |
				      (uint32_t)h[15] << 8 | h[16]);
		off += 9 + len;
	}
	assert_int_equal(code, H2_PROTOCOL_ERROR);
	close(fd);
	pair_down(&p);
}

/* A unary call with two request messages is INTERNAL, even when the handler answers on the
 * first (the test service's Unary echoes it at once). */
static void test_grpc_unary_with_two_request_messages_is_internal(void **state)
{
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Unary", 5, 27 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	static const uint8_t two[] = { 0, 0, 0, 0, 2, 0x10, 0x01, 0, 0, 0, 0, 2, 0x10, 0x02 };
	static const uint8_t one[] = { 0, 0, 0, 0, 2, 0x10, 0x01 };
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static struct kept k;
	struct h2_stream *s;
	struct pair p;
	int fd;

	pair_up(&p, 65536, 1);
	/* two messages in one DATA frame, then the end of the stream */
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 10, &kept_cb, &k, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, two, sizeof(two), 0), (long)sizeof(two));
	assert_int_equal(h2_stream_send_data(&h2, s, NULL, 0, 1), 0);
	raw_run(&p, fd, &h2, &k.closed);
	assert_true(k.trailers);
	assert_string_equal(k.status, "13");
	close(fd);
	/* the second message in a frame of its own after the first was answered */
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 10, &kept_cb, &k, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, one, sizeof(one), 0), (long)sizeof(one));
	for (int i = 0; i < 50; i++) {
		uint8_t in[4096];
		ssize_t n;

		if (h2.out.len && (n = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)n);
		grpc_server_run(p.s, 1);
		n = read(fd, in, sizeof(in));
		if (n > 0)
			assert_int_equal(h2_conn_feed(&h2, in, (size_t)n), 0);
	}
	assert_false(k.trailers);  /* the answer waits for the end of the request */
	assert_int_equal(h2_stream_send_data(&h2, s, one, sizeof(one), 1), (long)sizeof(one));
	raw_run(&p, fd, &h2, &k.closed);
	assert_string_equal(k.status, "13");
	close(fd);
	/* one message is still OK, and the answer is the echo */
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 10, &kept_cb, &k, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, one, sizeof(one), 1), (long)sizeof(one));
	raw_run(&p, fd, &h2, &k.closed);
	assert_string_equal(k.status, "0");
	assert_int_equal(k.len, sizeof(one));
	close(fd);
	pair_down(&p);
}

/* A server stream (grpc-timeout 300m) whose deadline passes while a message is half on the
 * wire: the client stopped returning window in its middle and holds what arrives, unread, for
 * hold_ms. Then it reads it and, through raw_run, returns window. */
static void deadline_mid_message(struct kept *k, int hold_ms)
{
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/ServerStream", 5, 34 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
		{ "grpc-timeout", "300m", 12, 4 },
	};
	/* StreamRequest{count: 512, size: 4000}, length-prefixed */
	static const uint8_t ask[] = { 0, 0, 0, 0, 6, 0x08, 0x80, 0x04, 0x10, 0xa0, 0x1f };
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static uint8_t held[2u << 20];
	const size_t each = 5 + 3 + 4000;
	struct grpc_server_stats before, after;
	struct timespec t0, t;
	struct h2_stream *s;
	struct pair p;
	size_t nheld = 0;
	int fd;

	pair_up(&p, 65536, 1);
	memset(&streamer, 0, sizeof(streamer));
	memset(k, 0, sizeof(*k));
	grpc_server_stats(p.s, &before);
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 10, &kept_cb, k, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, ask, sizeof(ask), 1), (long)sizeof(ask));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		ssize_t n;

		if (h2.out.len && (n = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)n);
		grpc_server_run(p.s, 2);
		n = read(fd, held + nheld, sizeof(held) - nheld);
		if (n > 0)
			nheld += (size_t)n;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 < hold_ms);
	assert_int_equal(h2_conn_feed(&h2, held, nheld), 0);
	assert_true(k->len % each != 0);  /* the window ran out inside a message */
	raw_run(&p, fd, &h2, &k->closed);
	assert_true(k->closed);
	assert_true(server_seen.done);
	assert_int_equal(server_seen.status, GRPC_DEADLINE_EXCEEDED);
	grpc_server_stats(p.s, &after);
	assert_int_equal(after.small_free, before.small_free);  /* its send buffer came back */
	assert_int_equal(after.calls, 0);
	if (k->trailers)
		assert_int_equal(k->len % each, 0);
	close(fd);
	pair_down(&p);
}

/* Window returned within GRPC_DEADLINE_GRACE_MS of the deadline: the rest of the cut message
 * goes out, then DEADLINE_EXCEEDED trailers; the client reads whole messages and its status,
 * never a cut message followed by a status (which clients report as INTERNAL "unexpected
 * EOF"). */
static void test_grpc_deadline_mid_message_finishes_it_within_the_grace(void **state)
{
	static struct kept k;

	deadline_mid_message(&k, 300 + GRPC_DEADLINE_GRACE_MS / 5);
	assert_true(k.trailers);
	assert_string_equal(k.status, "4");
	assert_true(k.len > H2_STREAM_WINDOW && k.len < 512 * (5 + 3 + 4000));
}

/* No window returned by the grace's end: RST_STREAM CANCEL, nothing beyond the window, no
 * trailers after the cut message. Waiting longer would wait for window a peer may never grant,
 * holding the stream and its buffers past the deadline. */
static void test_grpc_deadline_mid_message_resets_a_starved_stream(void **state)
{
	static struct kept k;

	deadline_mid_message(&k, 300 + GRPC_DEADLINE_GRACE_MS + 700);
	assert_false(k.trailers);
	assert_int_equal(k.code, H2_CANCEL);
	assert_int_equal(k.len, H2_STREAM_WINDOW);
}

/* ---- admission ---- */

static int admit_next = -1;

static int test_admit(void *ctx, int fd, struct grpc_peer *peer)
{
	(void)ctx;
	(void)fd;
	peer->tag = 7;
	return admit_next;
}

/* A guest past its preface: it sends the preface and an empty SETTINGS, then idles. */
static int idle_guest(const char *path)
{
	static const char hello[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, hello, sizeof(hello) - 1, MSG_NOSIGNAL), (ssize_t)sizeof(hello) - 1);
	return fd;
}

static void test_grpc_admitted_peer_keeps_its_slot_while_guests_flood(void **state)
{
	struct grpc_server_config scfg = {
		.max_connections = 2, .max_streams_per_connection = 16, .max_message_bytes = 65536,
		.small_buffers = 8, .large_buffers = 1, .admit = test_admit,
		.reserved_connections = 1, .guest_per_uid = 2,
	};
	struct grpc_client_config ccfg = { NULL, 65536, 8, 1, false, NULL, NULL };
	struct grpc_server_stats st;
	struct pair p;
	struct seen o;
	int guests[6];
	size_t sb, cb;

	snprintf(p.path, sizeof(p.path), "/tmp/agentic-test-grpc-%d.sock", (int)getpid());
	ccfg.path = p.path;
	sb = grpc_server_storage_bytes(&scfg);
	cb = grpc_client_storage_bytes(&ccfg);
	p.ss = malloc(sb);
	p.cs = malloc(cb);
	assert_int_equal(grpc_server_init(&scfg, p.ss, sb, &p.s), 0);
	assert_int_equal(grpc_server_listen_unix(p.s, p.path, 0600, server_methods,
						 ARRAY_LEN(server_methods)), 0);
	assert_int_equal(grpc_client_init(&ccfg, p.cs, cb, &p.c), 0);
	admit_next = 0;
	assert_int_equal(grpc_client_connect(p.c), 0);
	assert_int_equal(unary(&p, &client_unary, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	assert_int_equal(server_seen.peer.slot, 0);
	assert_int_equal(server_seen.peer.tag, 7);
	/* six idle guests of one uid: two at a time are kept, the rest end the oldest */
	admit_next = -1;
	for (int i = 0; i < 6; i++) {
		guests[i] = idle_guest(p.path);
		for (int k = 0; k < 20; k++)
			grpc_server_run(p.s, 1);
	}
	grpc_server_stats(p.s, &st);
	assert_int_equal(st.connections, 3);
	assert_true(st.evicted >= 4);
	assert_int_equal(st.refused, 0);
	/* the admitted connection was never theirs to take */
	assert_int_equal(unary(&p, &client_unary, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	assert_int_equal(server_seen.peer.slot, 0);
	for (int i = 0; i < 6; i++)
		close(guests[i]);
	pair_down(&p);
}

/* A compromised init (an admitted peer) opening many streams, each holding a message it never
 * finishes: with reserved_streams its connection has one stream, so it holds one stream's
 * buffers and the next init, admitted to the other slot, still gets its call through. */
static void test_grpc_admitted_peer_cannot_take_the_other_peers_buffers(void **state)
{
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Unary", 5, 27 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	/* a 100-byte message's prefix and its first byte */
	static const uint8_t part[] = { 0, 0, 0, 0, 100, 0x0a };
	struct grpc_server_config scfg = {
		.max_connections = 2, .max_streams_per_connection = 16, .max_message_bytes = 65536,
		.small_buffers = 4, .large_buffers = 1, .admit = test_admit,
		.reserved_connections = 2, .reserved_streams = 1, .guest_per_uid = 2,
	};
	struct grpc_client_config ccfg = { NULL, 65536, 8, 1, false, NULL, NULL };
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static struct kept k;
	struct pair p;
	struct seen o;
	size_t sb, cb;
	int fd, opened = 0;

	snprintf(p.path, sizeof(p.path), "/tmp/agentic-test-grpc-%d.sock", (int)getpid());
	ccfg.path = p.path;
	sb = grpc_server_storage_bytes(&scfg);
	cb = grpc_client_storage_bytes(&ccfg);
	p.ss = malloc(sb);
	p.cs = malloc(cb);
	assert_int_equal(grpc_server_init(&scfg, p.ss, sb, &p.s), 0);
	assert_int_equal(grpc_server_listen_unix(p.s, p.path, 0600, server_methods,
						 ARRAY_LEN(server_methods)), 0);
	assert_int_equal(grpc_client_init(&ccfg, p.cs, cb, &p.c), 0);
	/* the compromised init, in slot 0: eight streams, each a message begun */
	admit_next = 0;
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 16, &kept_cb, &k, &scratch);
	for (int i = 0; i < 50; i++) {
		uint8_t in[4096];
		struct h2_stream *s;
		ssize_t n;

		if (opened < 8 && h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s) == 0 &&
		    h2_stream_send_data(&h2, s, part, sizeof(part), 0) == (long)sizeof(part))
			opened++;
		if (h2.out.len && (n = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)n);
		grpc_server_run(p.s, 1);
		n = read(fd, in, sizeof(in));
		if (n > 0)
			h2_conn_feed(&h2, in, (size_t)n);
	}
	assert_true(opened >= 1);
	/* the next init, in slot 1 */
	admit_next = 1;
	assert_int_equal(grpc_client_connect(p.c), 0);
	assert_int_equal(unary(&p, &client_unary, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	assert_int_equal(server_seen.peer.slot, 1);
	admit_next = -1;
	close(fd);
	pair_down(&p);
}

/* A compromised init beginning a message larger than a small buffer: with
 * reserved_message_bytes at GRPC_SMALL_MESSAGE its call is refused at the prefix, so it never
 * holds one of the few large buffers (those are for what the server sends: an init sends only
 * small messages), and a small call of the next init still goes through. */
static void test_grpc_admitted_peer_cannot_hold_a_large_buffer(void **state)
{
	static const struct h2_field req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Unary", 5, 27 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	/* a 40000-byte message's prefix and its first byte */
	static const uint8_t part[] = { 0, 0, 0, 0x9c, 0x40, 0x0a };
	struct grpc_server_config scfg = {
		.max_connections = 2, .max_streams_per_connection = 16, .max_message_bytes = 65536,
		.small_buffers = 4, .large_buffers = 2, .admit = test_admit,
		.reserved_connections = 2, .reserved_streams = 1,
		.reserved_message_bytes = GRPC_SMALL_MESSAGE, .guest_per_uid = 2,
	};
	struct grpc_client_config ccfg = { NULL, 65536, 8, 2, false, NULL, NULL };
	struct grpc_server_stats st;
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static struct kept k;
	struct h2_stream *s;
	struct pair p;
	struct seen o;
	size_t sb, cb;
	int fd;

	snprintf(p.path, sizeof(p.path), "/tmp/agentic-test-grpc-%d.sock", (int)getpid());
	ccfg.path = p.path;
	sb = grpc_server_storage_bytes(&scfg);
	cb = grpc_client_storage_bytes(&ccfg);
	p.ss = malloc(sb);
	p.cs = malloc(cb);
	assert_int_equal(grpc_server_init(&scfg, p.ss, sb, &p.s), 0);
	assert_int_equal(grpc_server_listen_unix(p.s, p.path, 0600, server_methods,
						 ARRAY_LEN(server_methods)), 0);
	assert_int_equal(grpc_client_init(&ccfg, p.cs, cb, &p.c), 0);
	admit_next = 0;
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 16, &kept_cb, &k, &scratch);
	assert_int_equal(h2_stream_open(&h2, req, ARRAY_LEN(req), 0, NULL, &s), 0);
	assert_int_equal(h2_stream_send_data(&h2, s, part, sizeof(part), 0), (long)sizeof(part));
	for (int i = 0; i < 50; i++) {
		uint8_t in[4096];
		ssize_t n;

		if (h2.out.len && (n = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)n);
		grpc_server_run(p.s, 1);
		n = read(fd, in, sizeof(in));
		if (n > 0)
			h2_conn_feed(&h2, in, (size_t)n);
	}
	grpc_server_stats(p.s, &st);
	assert_int_equal(st.large_free, 2);
	admit_next = 1;
	assert_int_equal(grpc_client_connect(p.c), 0);
	assert_int_equal(unary(&p, &client_unary, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	admit_next = -1;
	close(fd);
	pair_down(&p);
}

/* GRPC_OWN_POOL: a compromised init opening the own-pool method's streams, each holding a
 * message it never finishes, takes only that pool's buffers and its own_streams streams: the
 * shared buffers stay whole, its own Unary still has its stream, a second Unary beyond
 * reserved_streams is refused, and the next init's Unary goes through while its own-pool call
 * alone is refused RESOURCE_EXHAUSTED for want of a buffer. */
static const struct grpc_method own_methods[] = {
	{ "/agentic.test.v1.Test/Unary", &agentic__test__v1__msg__descriptor,
	  &agentic__test__v1__msg__descriptor, 0,
	  { .on_start = s_start, .on_message = s_echo, .on_done = s_done }, NULL },
	{ "/agentic.test.v1.Test/Own", &agentic__test__v1__msg__descriptor,
	  &agentic__test__v1__msg__descriptor,
	  GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING | GRPC_OWN_POOL, { .on_done = s_done },
	  NULL },
};
static const struct grpc_method client_own = {
	"/agentic.test.v1.Test/Own", &agentic__test__v1__msg__descriptor,
	&agentic__test__v1__msg__descriptor, GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_message = c_message, .on_done = c_done }, NULL
};

static void test_grpc_own_pool_calls_never_take_the_shared_buffers(void **state)
{
	static const struct h2_field own_req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Own", 5, 25 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	static const struct h2_field unary_req[] = {
		{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
		{ ":path", "/agentic.test.v1.Test/Unary", 5, 27 }, { ":authority", "x", 10, 1 },
		{ "content-type", "application/grpc", 12, 16 }, { "te", "trailers", 2, 8 },
	};
	static const uint8_t part[] = { 0, 0, 0, 0, 100, 0x0a };
	struct grpc_server_config scfg = {
		.max_connections = 2, .max_streams_per_connection = 16, .max_message_bytes = 65536,
		.small_buffers = 4, .large_buffers = 1, .admit = test_admit,
		.reserved_connections = 2, .reserved_streams = 1, .guest_per_uid = 2,
		.own_buffers = 3, .own_streams = 2,
	};
	struct grpc_client_config ccfg = { NULL, 65536, 8, 1, false, NULL, NULL };
	struct grpc_server_stats st;
	static struct h2_conn h2;
	static struct h2_scratch scratch;
	static struct kept k;
	struct h2_stream *s;
	struct pair p;
	struct seen o;
	size_t sb, cb;
	int fd, opened = 0;

	snprintf(p.path, sizeof(p.path), "/tmp/agentic-test-grpc-%d.sock", (int)getpid());
	ccfg.path = p.path;
	sb = grpc_server_storage_bytes(&scfg);
	cb = grpc_client_storage_bytes(&ccfg);
	assert_true(sb > 0);
	p.ss = malloc(sb);
	p.cs = malloc(cb);
	assert_int_equal(grpc_server_init(&scfg, p.ss, sb, &p.s), 0);
	assert_int_equal(grpc_server_listen_unix(p.s, p.path, 0600, own_methods,
						 ARRAY_LEN(own_methods)), 0);
	assert_int_equal(grpc_client_init(&ccfg, p.cs, cb, &p.c), 0);
	grpc_server_stats(p.s, &st);
	assert_int_equal(st.own_free, 3);
	admit_next = 0;
	memset(&k, 0, sizeof(k));
	fd = raw_dial(&p);
	h2_conn_init(&h2, H2_CLIENT, 16, &kept_cb, &k, &scratch);
	/* two Unary streams, each a message begun: one has the stream reserved_streams gives */
	for (int j = 0; j < 2; j++) {
		assert_int_equal(h2_stream_open(&h2, unary_req, ARRAY_LEN(unary_req), 0, NULL, &s), 0);
		assert_int_equal(h2_stream_send_data(&h2, s, part, sizeof(part), 0),
				 (long)sizeof(part));
	}
	for (int i = 0; i < 80; i++) {
		uint8_t in[4096];
		ssize_t n;

		if (opened < 6 && h2_stream_open(&h2, own_req, ARRAY_LEN(own_req), 0, NULL, &s) == 0 &&
		    h2_stream_send_data(&h2, s, part, sizeof(part), 0) == (long)sizeof(part))
			opened++;
		if (h2.out.len && (n = write(fd, h2.out.data, h2.out.len)) > 0)
			h2_conn_sent(&h2, (size_t)n);
		grpc_server_run(p.s, 1);
		n = read(fd, in, sizeof(in));
		if (n > 0)
			h2_conn_feed(&h2, in, (size_t)n);
	}
	assert_true(opened >= 2);
	grpc_server_stats(p.s, &st);
	/* two own calls (own_streams) hold a buffer each; the third and later were refused */
	assert_int_equal(st.own_free, 1);
	/* the one Unary that got its stream holds one shared buffer; the other none */
	assert_int_equal(st.small_free, 3);
	assert_int_equal(st.calls, 3);
	/* the next init: its Unary goes through, its own-pool call finds one buffer, not two */
	admit_next = 1;
	assert_int_equal(grpc_client_connect(p.c), 0);
	assert_int_equal(unary(&p, &client_unary, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_OK);
	assert_int_equal(server_seen.peer.slot, 1);
	assert_int_equal(unary(&p, &client_own, 100, 0, &o), 0);
	assert_int_equal(o.status, GRPC_RESOURCE_EXHAUSTED);
	/* the first init gone, the pool is whole again and an own-pool call is served */
	close(fd);
	for (int i = 0; i < 20; i++)
		grpc_server_run(p.s, 1);
	grpc_server_stats(p.s, &st);
	assert_int_equal(st.own_free, 3);
	assert_int_equal(st.small_free, 4);
	admit_next = -1;
	pair_down(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grpc_timeout_parse_units_and_rejects_malformed),
		cmocka_unit_test(test_grpc_percent_encoding_round_trips_and_decodes_leniently),
		cmocka_unit_test(test_grpc_base64_takes_padded_and_unpadded),
		cmocka_unit_test(test_grpc_rx_split_at_every_byte_gives_the_same_messages),
		cmocka_unit_test(test_grpc_rx_rejects_oversize_and_compressed_prefixes),
		cmocka_unit_test(test_grpc_unary_round_trip_carries_peer_credentials),
		cmocka_unit_test(test_grpc_unknown_method_is_unimplemented),
		cmocka_unit_test(test_grpc_deadline_ends_the_call_on_both_sides),
		cmocka_unit_test(test_grpc_oversize_message_is_resource_exhausted_by_the_server),
		cmocka_unit_test(test_grpc_no_free_buffer_is_resource_exhausted),
		cmocka_unit_test(test_grpc_lost_connection_ends_calls_unavailable_and_redials),
		cmocka_unit_test(test_grpc_non_grpc_content_type_gets_http_415),
		cmocka_unit_test(test_grpc_stream_held_by_the_window_resumes_on_window_update),
		cmocka_unit_test(test_grpc_send_that_fits_after_eagain_keeps_on_writable_owed),
		cmocka_unit_test(test_grpc_bad_preface_gets_goaway_protocol_error),
		cmocka_unit_test(test_grpc_unary_with_two_request_messages_is_internal),
		cmocka_unit_test(test_grpc_deadline_mid_message_finishes_it_within_the_grace),
		cmocka_unit_test(test_grpc_deadline_mid_message_resets_a_starved_stream),
		cmocka_unit_test(test_grpc_admitted_peer_keeps_its_slot_while_guests_flood),
		cmocka_unit_test(test_grpc_admitted_peer_cannot_take_the_other_peers_buffers),
		cmocka_unit_test(test_grpc_admitted_peer_cannot_hold_a_large_buffer),
		cmocka_unit_test(test_grpc_own_pool_calls_never_take_the_shared_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
