/* test_h2.c: the HTTP/2 engine: preface and settings, both roles talking, flow control,
 * owed control frames, abuse limits, and the same result for input split at any byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "h2/h2.h"

/* ---- a recording peer ---- */

struct rec {
	char log[1 << 16];
	size_t len;
	uint32_t last_data_sid;  /* consecutive DATA chunks of a stream merge into one entry */
	int respond;             /* server: answer each request with headers, data, trailers */
	int reset_on_headers;
};

static void logf_(struct rec *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r->len += (size_t)vsnprintf(r->log + r->len, sizeof(r->log) - r->len, fmt, ap);
	va_end(ap);
	assert_true(r->len < sizeof(r->log));
}

static const struct h2_field resp_headers[] = {
	{ ":status", "200", 7, 3 }, { "content-type", "application/grpc", 12, 16 },
};
static const struct h2_field resp_trailers[] = { { "grpc-status", "0", 11, 1 } };

static void on_headers(void *ctx, struct h2_conn *c, struct h2_stream *s,
		       const struct h2_field *f, size_t n, unsigned flags)
{
	struct rec *r = ctx;

	if (r->last_data_sid)
		logf_(r, "\n");
	r->last_data_sid = 0;
	logf_(r, "H%u/%x:", s->id, flags);
	for (size_t i = 0; i < n; i++)
		logf_(r, " %s=%s", f[i].name, f[i].value);
	logf_(r, "\n");
	if (r->reset_on_headers) {
		h2_stream_reset(c, s, H2_CANCEL);
		return;
	}
	if (r->respond && !(flags & H2_TRAILERS)) {
		assert_int_equal(h2_stream_send_headers(c, s, resp_headers, 2, 0), 0);
		assert_int_equal(h2_stream_send_data(c, s, (const uint8_t *)"pong", 4, 0), 4);
	}
}

static void on_data(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
		    size_t n, unsigned flags)
{
	struct rec *r = ctx;

	if (n) {
		if (r->last_data_sid != s->id)
			logf_(r, "D%u:", s->id);
		logf_(r, "%.*s", (int)n, (const char *)p);
		r->last_data_sid = s->id;
	}
	if (flags & H2_END_STREAM) {
		r->last_data_sid = 0;
		logf_(r, "\nE%u\n", s->id);
		if (r->respond)
			assert_int_equal(h2_stream_send_headers(c, s, resp_trailers, 1, 1), 0);
	}
}

static void on_close(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
		     unsigned flags)
{
	struct rec *r = ctx;

	r->last_data_sid = 0;
	logf_(r, "\nC%u/%u/%x\n", s->id, code, flags);
}

static const struct h2_callbacks cbs = { on_headers, on_data, on_close };
static struct h2_scratch scratch;

/* ---- raw frames ---- */

struct wire {
	uint8_t b[(1 << 20) + 4096];
	size_t len;
};

static void frame(struct wire *w, uint8_t type, uint8_t flags, uint32_t sid, const void *p,
		  size_t n)
{
	uint8_t *h = w->b + w->len;

	assert_true(w->len + 9 + n <= sizeof(w->b));
	h[0] = (uint8_t)(n >> 16);
	h[1] = (uint8_t)(n >> 8);
	h[2] = (uint8_t)n;
	h[3] = type;
	h[4] = flags;
	h[5] = (uint8_t)(sid >> 24);
	h[6] = (uint8_t)(sid >> 16);
	h[7] = (uint8_t)(sid >> 8);
	h[8] = (uint8_t)sid;
	if (n)
		memcpy(h + 9, p, n);
	w->len += 9 + n;
}

static void raw(struct wire *w, const void *p, size_t n)
{
	memcpy(w->b + w->len, p, n);
	w->len += n;
}

static size_t block(uint8_t *out, size_t cap, const char *const *kv)
{
	struct buf b;

	buf_init(&b, out, cap);
	for (; kv[0]; kv += 2)
		assert_int_equal(hpack_encode(&b, kv[0], strlen(kv[0]), kv[1], strlen(kv[1])), 0);
	return b.len;
}

static const char *const request[] = {
	":method", "POST", ":scheme", "http", ":path", "/pkg.Svc/Method",
	":authority", "localhost", "content-type", "application/grpc", "te", "trailers", NULL
};

static void preface(struct wire *w)
{
	raw(w, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	frame(w, 0x4, 0, 0, NULL, 0);
}

static void headers(struct wire *w, uint32_t sid, uint8_t flags)
{
	uint8_t b[512];
	size_t n = block(b, sizeof(b), request);

	frame(w, 0x1, 0x4 | flags, sid, b, n);
}

static void u32_frame(struct wire *w, uint8_t type, uint32_t sid, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };

	frame(w, type, 0, sid, b, 4);
}

/* ---- reading our output ---- */

struct fr {
	uint32_t len, sid;
	uint8_t type, flags;
	const uint8_t *p;
};

/* Returns the frames of out after skipping `skip` bytes (a client preface). */
static size_t frames(const struct buf *out, size_t skip, struct fr *f, size_t max)
{
	size_t off = skip, n = 0;

	while (off + 9 <= out->len && n < max) {
		const uint8_t *h = out->data + off;

		f[n].len = (uint32_t)h[0] << 16 | (uint32_t)h[1] << 8 | h[2];
		f[n].type = h[3];
		f[n].flags = h[4];
		f[n].sid = ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) &
			   0x7fffffffu;
		f[n].p = h + 9;
		assert_true(off + 9 + f[n].len <= out->len);
		off += 9 + f[n].len;
		n++;
	}
	assert_int_equal(off, out->len);
	return n;
}

static uint32_t be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The code of the GOAWAY in out, or -1 when there is none. */
static long goaway_code(const struct buf *out)
{
	static struct fr f[4096];
	size_t n = frames(out, 0, f, 4096);

	for (size_t i = 0; i < n; i++)
		if (f[i].type == 0x7)
			return (long)be32(f[i].p + 4);
	return -1;
}

static struct h2_conn srv, cli, split;
static struct rec srec, crec, splitrec;

static void server_up(struct h2_conn *c, struct rec *r, uint32_t max_streams)
{
	memset(r, 0, sizeof(*r));
	h2_conn_init(c, H2_SERVER, max_streams, &cbs, r, &scratch);
	h2_conn_sent(c, c->out.len); /* our SETTINGS, checked in their own test */
}

/* ---- tests ---- */

static void test_h2_server_sends_settings_first_and_acks_the_clients(void **state)
{
	static struct wire w;

	w.len = 0;
	struct fr f[8];
	size_t n;

	memset(&srec, 0, sizeof(srec));
	h2_conn_init(&srv, H2_SERVER, 100, &cbs, &srec, &scratch);
	n = frames(&srv.out, 0, f, 8);
	assert_int_equal(n, 2);
	assert_int_equal(f[0].type, 0x4);
	assert_int_equal(f[0].flags, 0);
	assert_int_equal(f[0].len, 18);
	/* MAX_CONCURRENT_STREAMS = 100 */
	assert_memory_equal(f[0].p, "\x00\x03\x00\x00\x00\x64", 6);
	assert_int_equal(f[1].type, 0x8);
	assert_int_equal(be32(f[1].p), H2_CONN_WINDOW - 65535);
	h2_conn_sent(&srv, srv.out.len);
	preface(&w);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	n = frames(&srv.out, 0, f, 8);
	assert_int_equal(n, 1);
	assert_int_equal(f[0].type, 0x4);
	assert_int_equal(f[0].flags, 0x1);
}

static void test_h2_server_rejects_a_bad_preface_without_output(void **state)
{
	server_up(&srv, &srec, 10);
	assert_int_equal(h2_conn_feed(&srv, (const uint8_t *)"GET / HTTP/1.1\r\n", 16),
			 H2_ERR_PREFACE);
	assert_int_equal(srv.out.len, 0);
}

static void test_h2_first_frame_must_be_settings(void **state)
{
	static struct wire w;

	w.len = 0;

	server_up(&srv, &srec, 10);
	raw(&w, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	frame(&w, 0x6, 0, 0, "12345678", 8);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_PROTOCOL_ERROR);
}

static void test_h2_ping_is_answered_with_its_data(void **state)
{
	static struct wire w;

	w.len = 0;
	struct fr f[8];

	server_up(&srv, &srec, 10);
	preface(&w);
	frame(&w, 0x6, 0, 0, "abcdefgh", 8);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_int_equal(frames(&srv.out, 0, f, 8), 2);
	assert_int_equal(f[1].type, 0x6);
	assert_int_equal(f[1].flags, 0x1);
	assert_memory_equal(f[1].p, "abcdefgh", 8);
}

/* Runs a client engine against a server engine through their output buffers. */
static void pump(void)
{
	for (int i = 0; i < 100 && (cli.out.len || srv.out.len); i++) {
		size_t n = cli.out.len;

		if (n) {
			assert_int_equal(h2_conn_feed(&srv, cli.out.data, n), 0);
			h2_conn_sent(&cli, n);
		}
		n = srv.out.len;
		if (n) {
			assert_int_equal(h2_conn_feed(&cli, srv.out.data, n), 0);
			h2_conn_sent(&srv, n);
		}
	}
}

static struct h2_field req_fields[6];

static const struct h2_field *req(void)
{
	for (int i = 0; i < 6; i++) {
		req_fields[i].name = request[2 * i];
		req_fields[i].name_len = (uint32_t)strlen(request[2 * i]);
		req_fields[i].value = request[2 * i + 1];
		req_fields[i].value_len = (uint32_t)strlen(request[2 * i + 1]);
	}
	return req_fields;
}

static void test_h2_client_and_server_complete_a_request(void **state)
{
	struct h2_stream *s;

	memset(&srec, 0, sizeof(srec));
	memset(&crec, 0, sizeof(crec));
	srec.respond = 1;
	h2_conn_init(&srv, H2_SERVER, 10, &cbs, &srec, &scratch);
	h2_conn_init(&cli, H2_CLIENT, 10, &cbs, &crec, &scratch);
	assert_int_equal(h2_stream_open(&cli, req(), 6, 0, NULL, &s), 0);
	assert_int_equal(s->id, 1);
	assert_int_equal(h2_stream_send_data(&cli, s, (const uint8_t *)"ping", 4, 1), 4);
	pump();
	assert_string_equal(srec.log,
		"H1/0: :method=POST :scheme=http :path=/pkg.Svc/Method :authority=localhost "
		"content-type=application/grpc te=trailers\nD1:ping\nE1\n\nC1/0/0\n");
	assert_string_equal(crec.log,
		"H1/0: :status=200 content-type=application/grpc\nD1:pong\n"
		"H1/3: grpc-status=0\n\nC1/0/0\n");
	assert_int_equal(srv.nstreams, 0);
	assert_int_equal(cli.nstreams, 0);
}

static void test_h2_send_honours_the_peers_initial_window_and_frame_size(void **state)
{
	static uint8_t big[100000];
	static struct wire w;

	w.len = 0;
	uint8_t settings[6] = { 0, 4, 0, 0, 0x03, 0xe8 }; /* INITIAL_WINDOW_SIZE 1000 */
	struct h2_stream *s;
	struct fr f[64];
	size_t n;
	long took;

	server_up(&srv, &srec, 10);
	raw(&w, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);
	frame(&w, 0x4, 0, 0, settings, 6);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	s = &srv.streams[0];
	assert_int_equal(s->id, 1);
	took = h2_stream_send_data(&srv, s, big, sizeof(big), 0);
	assert_int_equal(took, 1000);
	assert_int_equal(h2_stream_send_data(&srv, s, big, sizeof(big), 0), 0);
	/* a stream WINDOW_UPDATE opens it; the connection window (65535) then limits */
	w.len = 0;
	u32_frame(&w, 0x8, 1, 200000);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	took = 0;
	for (int i = 0; i < 10; i++) {
		long t = h2_stream_send_data(&srv, s, big, sizeof(big), 0);

		n = frames(&srv.out, 0, f, 64);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(f[k].type, 0);
			assert_true(f[k].len <= 16384);
		}
		h2_conn_sent(&srv, srv.out.len);
		took += t;
	}
	assert_int_equal(took, 65535 - 1000);
}

static void test_h2_window_update_follows_consumed_data(void **state)
{
	static uint8_t chunk[16384];
	static struct wire w;

	w.len = 0;
	struct fr f[64];
	size_t n, updates = 0;

	server_up(&srv, &srec, 10);
	preface(&w);
	headers(&w, 1, 0);
	/* half the stream window, in full frames */
	for (uint32_t sent = 0; sent < H2_STREAM_WINDOW / 2; sent += sizeof(chunk))
		frame(&w, 0x0, 0, 1, chunk, sizeof(chunk));
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	n = frames(&srv.out, 0, f, 64);
	for (size_t k = 0; k < n; k++)
		if (f[k].type == 0x8) {
			assert_int_equal(f[k].sid, 1);
			assert_int_equal(be32(f[k].p), H2_STREAM_WINDOW / 2);
			updates++;
		}
	assert_int_equal(updates, 1);
}

static void test_h2_data_beyond_the_window_is_a_flow_control_error(void **state)
{
	static uint8_t chunk[16384];
	static struct wire w;

	w.len = 0;

	server_up(&srv, &srec, 10);
	preface(&w);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	/* the stream's window: the peer ignored our WINDOW_UPDATE rules by not waiting */
	srv.streams[0].recv_window = 100;
	w.len = 0;
	frame(&w, 0x0, 0, 1, chunk, 101);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "C1/3/0"));
	/* the connection window: a connection error */
	server_up(&srv, &srec, 10);
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	srv.recv_window = 10;
	w.len = 0;
	frame(&w, 0x0, 0, 1, chunk, 11);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_FLOW_CONTROL_ERROR);
}

static void test_h2_padding_priority_continuation_and_unknown_frames_are_handled(void **state)
{
	static struct wire w;

	w.len = 0;
	uint8_t b[512], p[600];
	size_t n = block(b, sizeof(b), request);

	server_up(&srv, &srec, 10);
	preface(&w);
	/* HEADERS, padded (3) and with priority, holding the first 10 octets; CONTINUATION */
	p[0] = 3;
	memcpy(p + 1, "\x00\x00\x00\x00\x10", 5);
	memcpy(p + 6, b, 10);
	memset(p + 16, 0, 3);
	frame(&w, 0x1, 0x8 | 0x20, 1, p, 19);
	frame(&w, 0xfa, 0xff, 1, "unknown", 7);  /* between them would be an error: see below */
	assert_int_equal(h2_conn_feed(&srv, w.b, 24 + 9 + 9 + 19), 0);
	assert_int_equal(h2_conn_feed(&srv, w.b + 24 + 9 + 9 + 19, 16), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_PROTOCOL_ERROR);

	server_up(&srv, &srec, 10);
	w.len = 0;
	preface(&w);
	frame(&w, 0x1, 0x8 | 0x20, 1, p, 19);
	frame(&w, 0x9, 0x4, 1, b + 10, n - 10);
	frame(&w, 0xfa, 0xff, 1, "unknown", 7);
	frame(&w, 0x2, 0, 1, "\x00\x00\x00\x03\x10", 5);  /* PRIORITY */
	p[0] = 2;
	memcpy(p + 1, "hello", 5);
	memset(p + 6, 0, 2);
	frame(&w, 0x0, 0x8 | 0x1, 1, p, 8);  /* DATA, padded, END_STREAM */
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_string_equal(srec.log,
		"H1/0: :method=POST :scheme=http :path=/pkg.Svc/Method :authority=localhost "
		"content-type=application/grpc te=trailers\nD1:hello\nE1\n");
}

static void test_h2_oversize_frame_is_a_frame_size_error(void **state)
{
	static struct wire w;

	w.len = 0;
	uint8_t h[9] = { 0x00, 0x40, 0x01, 0x0, 0, 0, 0, 0, 1 }; /* 16385 bytes of DATA */

	server_up(&srv, &srec, 10);
	preface(&w);
	headers(&w, 1, 0);
	raw(&w, h, 9);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_FRAME_SIZE_ERROR);
	assert_non_null(strstr(srec.log, "C1/6/0"));
}

static void test_h2_header_block_over_the_limit_ends_the_connection_calmly(void **state)
{
	static uint8_t junk[H2_FRAME_MAX];
	static struct wire w;

	w.len = 0;

	server_up(&srv, &srec, 10);
	preface(&w);
	frame(&w, 0x1, 0, 1, junk, 8192);
	frame(&w, 0x9, 0, 1, junk, 8192);
	frame(&w, 0x9, 0, 1, junk, 1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_ENHANCE_YOUR_CALM);
	assert_int_equal(srec.len, 0);
}

static void test_h2_continuation_flood_ends_the_connection_calmly(void **state)
{
	static struct wire w;

	w.len = 0;

	server_up(&srv, &srec, 10);
	preface(&w);
	frame(&w, 0x1, 0, 1, NULL, 0);
	for (int i = 0; i < H2_MAX_CONTINUATIONS; i++)
		frame(&w, 0x9, 0, 1, NULL, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	w.len = 0;
	frame(&w, 0x9, 0, 1, NULL, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_ENHANCE_YOUR_CALM);
}

static void test_h2_streams_over_the_limit_are_refused(void **state)
{
	static struct wire w;

	w.len = 0;
	struct fr f[16];
	size_t n;

	server_up(&srv, &srec, 2);
	preface(&w);
	headers(&w, 1, 0);
	headers(&w, 3, 0);
	headers(&w, 5, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	n = frames(&srv.out, 0, f, 16);
	assert_int_equal(n, 2);  /* SETTINGS ACK, RST_STREAM */
	assert_int_equal(f[1].type, 0x3);
	assert_int_equal(f[1].sid, 5);
	assert_int_equal(be32(f[1].p), H2_REFUSED_STREAM);
	assert_int_equal(srv.nstreams, 2);
	assert_null(strstr(srec.log, "H5/"));
	/* the refused block was still decoded: the next stream's fields are right */
	w.len = 0;
	u32_frame(&w, 0x3, 1, H2_CANCEL);
	headers(&w, 7, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "C1/8/8\nH7/0: :method=POST"));
}

static void test_h2_rapid_reset_ends_the_connection_calmly(void **state)
{
	static struct wire w;

	w.len = 0;
	uint32_t sid = 1;
	int r = 0;

	server_up(&srv, &srec, 100);
	preface(&w);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	for (int i = 0; i <= H2_RESET_BUDGET && r == 0; i++, sid += 2) {
		w.len = 0;
		headers(&w, sid, 0);
		u32_frame(&w, 0x3, sid, H2_CANCEL);
		r = h2_conn_feed(&srv, w.b, w.len);
		if (i < H2_RESET_BUDGET)
			assert_int_equal(r, 0);
		h2_conn_sent(&srv, srv.out.len);
		srec.len = 0;
	}
	assert_int_equal(r, H2_ERR_CONN);
}

static void test_h2_streams_that_end_normally_refund_the_reset_budget(void **state)
{
	static struct wire w;

	w.len = 0;
	uint32_t sid = 1;

	server_up(&srv, &srec, 100);
	srec.respond = 1;
	preface(&w);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	for (int i = 0; i < 3 * H2_RESET_BUDGET; i++, sid += 2) {
		w.len = 0;
		headers(&w, sid, 0);
		if (i % 2)
			u32_frame(&w, 0x3, sid, H2_CANCEL);
		else
			frame(&w, 0x0, 0x1, sid, "x", 1);
		assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
		h2_conn_sent(&srv, srv.out.len);
		srec.len = 0;
	}
}

static void test_h2_goaway_received_refuses_streams_above_last(void **state)
{
	struct h2_stream *s1, *s3;
	uint8_t g[8] = { 0, 0, 0, 1, 0, 0, 0, 0 };
	static struct wire w;

	w.len = 0;

	memset(&crec, 0, sizeof(crec));
	h2_conn_init(&cli, H2_CLIENT, 10, &cbs, &crec, &scratch);
	assert_int_equal(h2_stream_open(&cli, req(), 6, 1, NULL, &s1), 0);
	assert_int_equal(h2_stream_open(&cli, req(), 6, 1, NULL, &s3), 0);
	frame(&w, 0x4, 0, 0, NULL, 0);
	frame(&w, 0x7, 0, 0, g, 8);
	assert_int_equal(h2_conn_feed(&cli, w.b, w.len), 0);
	assert_string_equal(crec.log, "\nC3/7/8\n");
	assert_int_equal(h2_stream_open(&cli, req(), 6, 1, NULL, &s3), ERR_STATE);
	assert_false(h2_conn_finished(&cli));
}

static void test_h2_graceful_goaway_names_the_last_stream_and_ignores_newer(void **state)
{
	static struct wire w;

	w.len = 0;
	struct fr f[8];

	server_up(&srv, &srec, 10);
	preface(&w);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	h2_conn_goaway(&srv, H2_NO_ERROR);
	assert_int_equal(frames(&srv.out, 0, f, 8), 1);
	assert_int_equal(f[0].type, 0x7);
	assert_int_equal(be32(f[0].p), 1);
	assert_int_equal(be32(f[0].p + 4), 0);
	h2_conn_sent(&srv, srv.out.len);
	w.len = 0;
	headers(&w, 3, 0);
	frame(&w, 0x0, 0, 3, "x", 1);
	u32_frame(&w, 0x8, 3, 100);
	u32_frame(&w, 0x3, 3, H2_CANCEL);  /* frames on the ignored stream are ignored too */
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_null(strstr(srec.log, "H3/"));
	assert_int_equal(frames(&srv.out, 0, f, 8), 0);
	assert_false(h2_conn_finished(&srv));
	h2_stream_reset(&srv, &srv.streams[0], H2_CANCEL);
	assert_true(h2_conn_finished(&srv));
}

static void test_h2_malformed_requests_get_a_stream_protocol_error(void **state)
{
	static const char *const upper[] = { ":method", "POST", ":scheme", "http", ":path", "/",
					     "Bad", "x", NULL };
	static const char *const nopath[] = { ":method", "POST", ":scheme", "http", NULL };
	static const char *const late[] = { ":method", "POST", ":scheme", "http", "a", "b",
					    ":path", "/", NULL };
	const char *const *cases[] = { upper, nopath, late };
	uint8_t b[256];

	for (int i = 0; i < 3; i++) {
		static struct wire w;

	w.len = 0;
		struct fr f[8];

		server_up(&srv, &srec, 10);
		preface(&w);
		frame(&w, 0x1, 0x4, 1, b, block(b, sizeof(b), cases[i]));
		assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
		assert_int_equal(frames(&srv.out, 0, f, 8), 2);
		assert_int_equal(f[1].type, 0x3);
		assert_int_equal(be32(f[1].p), H2_PROTOCOL_ERROR);
		assert_string_equal(srec.log, "\nC1/1/0\n");
	}
}

/* A block of request fields plus `extra` raw octets. */
static void headers_plus(struct wire *w, uint32_t sid, const uint8_t *extra, size_t n)
{
	uint8_t b[8192];
	size_t k = block(b, sizeof(b), request);

	memcpy(b + k, extra, n);
	frame(w, 0x1, 0x5, sid, b, k + n);
}

static void test_h2_header_list_over_the_limit_is_flagged_and_table_stays_in_sync(void **state)
{
	static struct wire w;

	w.len = 0;
	uint8_t lit[3100], refs[6];
	size_t k = 0;

	/* a 3000-byte value with incremental indexing: dynamic index 1 (0xbe) after */
	lit[k++] = 0x40;
	lit[k++] = 1;
	lit[k++] = 'x';
	lit[k++] = 0x7f;
	lit[k++] = (uint8_t)(((3000 - 127) & 0x7f) | 0x80);
	lit[k++] = (uint8_t)((3000 - 127) >> 7);
	memset(lit + k, 'v', 3000);
	k += 3000;
	memset(refs, 0xbe, sizeof(refs));
	server_up(&srv, &srec, 10);
	preface(&w);
	headers_plus(&w, 1, lit, k);
	headers_plus(&w, 3, refs, 6);  /* 18 KB decoded from a small block */
	headers_plus(&w, 5, refs, 1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "H1/1:"));
	assert_non_null(strstr(srec.log, "H3/5:"));
	assert_non_null(strstr(srec.log, "H5/1: :method=POST"));
	assert_non_null(strstr(strstr(srec.log, "H5/1:"), " x=vvvvvvvvvv"));
}

/* Records a client's whole conversation, then feeds it to fresh servers cut at each byte. */
static void test_h2_input_split_at_every_byte_gives_the_same_result(void **state)
{
	static struct wire w;
	static uint8_t whole_out[H2_OUT_BYTES];
	static char whole_log[1 << 16];
	size_t whole_len, whole_out_len;
	uint8_t b[512], p[600];
	size_t n = block(b, sizeof(b), request);

	w.len = 0;
	preface(&w);
	frame(&w, 0x6, 0, 0, "pingpong", 8);
	p[0] = 3;
	memcpy(p + 1, "\x00\x00\x00\x00\x10", 5);
	memcpy(p + 6, b, 10);
	memset(p + 16, 0, 3);
	frame(&w, 0x1, 0x8 | 0x20, 1, p, 19);
	frame(&w, 0x9, 0x4, 1, b + 10, n - 10);
	frame(&w, 0xfa, 0, 0, "??", 2);
	frame(&w, 0x0, 0, 1, "hello ", 6);
	p[0] = 1;
	memcpy(p + 1, "world", 5);
	p[6] = 0;
	frame(&w, 0x0, 0x8 | 0x1, 1, p, 7);
	headers(&w, 3, 0);
	u32_frame(&w, 0x8, 3, 1000);
	frame(&w, 0x0, 0, 3, "abc", 3);
	u32_frame(&w, 0x3, 3, H2_CANCEL);
	headers(&w, 5, 0x1);
	frame(&w, 0x4, 0, 0, "\x00\x04\x00\x00\x10\x00", 6);
	frame(&w, 0x6, 0x1, 0, "ackedack", 8);
	u32_frame(&w, 0x8, 0, 12345);

	server_up(&srv, &srec, 10);
	srec.respond = 1;
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	whole_len = srec.len;
	memcpy(whole_log, srec.log, whole_len + 1);
	whole_out_len = srv.out.len;
	memcpy(whole_out, srv.out.data, whole_out_len);
	assert_non_null(strstr(whole_log, "D1:hello world\nE1\n"));
	assert_non_null(strstr(whole_log, "C3/8/8"));
	assert_non_null(strstr(whole_log, "H5/1:"));

	for (size_t cut = 0; cut <= w.len; cut++) {
		server_up(&split, &splitrec, 10);
		splitrec.respond = 1;
		assert_int_equal(h2_conn_feed(&split, w.b, cut), 0);
		assert_int_equal(h2_conn_feed(&split, w.b + cut, w.len - cut), 0);
		assert_int_equal(splitrec.len, whole_len);
		assert_string_equal(splitrec.log, whole_log);
		assert_int_equal(split.out.len, whole_out_len);
		assert_memory_equal(split.out.data, whole_out, whole_out_len);
	}
	server_up(&split, &splitrec, 10);
	splitrec.respond = 1;
	for (size_t i = 0; i < w.len; i++)
		assert_int_equal(h2_conn_feed(&split, w.b + i, 1), 0);
	assert_string_equal(splitrec.log, whole_log);
	assert_int_equal(split.out.len, whole_out_len);
	assert_memory_equal(split.out.data, whole_out, whole_out_len);
}

static void test_h2_owed_frames_wait_for_room_and_are_not_lost(void **state)
{
	static uint8_t fill[H2_OUT_BYTES];
	static struct wire w;

	w.len = 0;
	struct fr f[64];
	size_t n, pings = 0, acks = 0;

	server_up(&srv, &srec, 10);
	preface(&w);
	frame(&w, 0x6, 0, 0, "pingping", 8);
	assert_int_equal(buf_append(&srv.out, fill, srv.out.cap - 5), 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_int_equal(srv.out.len, srv.out.cap - 5);
	h2_conn_sent(&srv, srv.out.len);
	n = frames(&srv.out, 0, f, 64);
	for (size_t k = 0; k < n; k++) {
		acks += f[k].type == 0x4 && f[k].flags == 1;
		pings += f[k].type == 0x6 && f[k].flags == 1;
	}
	assert_int_equal(acks, 1);
	assert_int_equal(pings, 1);
}

/* The code of the RST_STREAM on sid in out, or -1 when there is none. */
static long rst_code(const struct buf *out, uint32_t sid)
{
	static struct fr f[4096];
	size_t n = frames(out, 0, f, 4096);

	for (size_t i = 0; i < n; i++)
		if (f[i].type == 0x3 && f[i].sid == sid)
			return (long)be32(f[i].p);
	return -1;
}

/* A client that cancels calls one at a time, slower than H2_RESET_RATE, never runs out of
 * budget however many it cancels; a flood at one instant still ends the connection. */
static void test_h2_cancels_spread_over_time_never_end_the_connection(void **state)
{
	static struct wire w;
	uint32_t sid = 1;
	int64_t now = 1000;
	int r = 0;

	server_up(&srv, &srec, 100);
	w.len = 0;
	preface(&w);
	h2_conn_clock(&srv, now);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	for (int i = 0; i < 5 * H2_RESET_BUDGET; i++, sid += 2) {
		now += 2000 / H2_RESET_RATE;  /* half the rate */
		h2_conn_clock(&srv, now);
		w.len = 0;
		headers(&w, sid, 0);
		u32_frame(&w, 0x3, sid, H2_CANCEL);
		assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
		h2_conn_sent(&srv, srv.out.len);
		srec.len = 0;
	}
	for (int i = 0; i <= H2_RESET_BUDGET + 1 && r == 0; i++, sid += 2) {
		w.len = 0;
		headers(&w, sid, 0);
		u32_frame(&w, 0x3, sid, H2_CANCEL);
		r = h2_conn_feed(&srv, w.b, w.len);
		if (r == 0)
			h2_conn_sent(&srv, srv.out.len);
		srec.len = 0;
	}
	assert_int_equal(r, H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_ENHANCE_YOUR_CALM);
}

/* RFC 9113 §8.2.1 and §8.3.1: each of these requests is malformed, a stream PROTOCOL_ERROR,
 * and never reaches the caller. */
static void test_h2_fields_rfc9113_forbids_are_a_stream_protocol_error(void **state)
{
	static const struct { const char *name, *value; size_t value_len; } bad[] = {
		{ "a b", "x", 1 }, { "a:b", "x", 1 }, { "a\x01", "x", 1 }, { "a\x7f", "x", 1 },
		{ "x", "a\0b", 3 }, { "x", "a\rb", 3 }, { "x", "a\nb", 3 }, { "x", " ab", 3 },
		{ "x", "ab\t", 3 }, { ":path", "", 0 }, { "content-length", "12a", 3 },
	};

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		static struct wire w;
		struct buf b;
		uint8_t blk[512];
		int path = strcmp(bad[i].name, ":path") == 0;

		buf_init(&b, blk, sizeof(blk));
		assert_int_equal(hpack_encode(&b, ":method", 7, "POST", 4), 0);
		assert_int_equal(hpack_encode(&b, ":scheme", 7, "http", 4), 0);
		if (!path)
			assert_int_equal(hpack_encode(&b, ":path", 5, "/a", 2), 0);
		assert_int_equal(hpack_encode(&b, bad[i].name, strlen(bad[i].name), bad[i].value,
					      bad[i].value_len), 0);
		server_up(&srv, &srec, 10);
		w.len = 0;
		preface(&w);
		frame(&w, 0x1, 0x4, 1, blk, b.len);
		assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
		assert_int_equal(rst_code(&srv.out, 1), H2_PROTOCOL_ERROR);
		assert_string_equal(srec.log, "\nC1/1/0\n");
	}
}

static void test_h2_we_never_send_a_field_rfc9113_forbids(void **state)
{
	static struct wire w;
	const struct h2_field crlf[] = { { ":status", "200", 7, 3 }, { "x", "a\r\nb: c", 1, 7 } };

	server_up(&srv, &srec, 10);
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0x1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	assert_int_equal(h2_stream_send_headers(&srv, &srv.streams[0], crlf, 2, 1), ERR_PARSE);
	assert_int_equal(srv.out.len, 0);
}

/* §8.1.1: content-length must equal the DATA that follows: less, more, or a body announced on
 * a request that has none, is a stream PROTOCOL_ERROR; the exact length passes. */
static void test_h2_content_length_must_match_the_data(void **state)
{
	static const struct { const char *length, *data; uint8_t end_on_headers; long code; } cases[] = {
		{ "5", "abc", 0, H2_PROTOCOL_ERROR }, { "2", "abc", 0, H2_PROTOCOL_ERROR },
		{ "1", "", 1, H2_PROTOCOL_ERROR }, { "3", "abc", 0, -1 }, { "0", "", 1, -1 },
	};

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		static struct wire w;
		struct buf b;
		uint8_t blk[512];

		buf_init(&b, blk, sizeof(blk));
		for (const char *const *kv = request; kv[0]; kv += 2)
			assert_int_equal(hpack_encode(&b, kv[0], strlen(kv[0]), kv[1],
						      strlen(kv[1])), 0);
		assert_int_equal(hpack_encode(&b, "content-length", 14, cases[i].length,
					      strlen(cases[i].length)), 0);
		server_up(&srv, &srec, 10);
		w.len = 0;
		preface(&w);
		frame(&w, 0x1, 0x4 | cases[i].end_on_headers, 1, blk, b.len);
		if (!cases[i].end_on_headers)
			frame(&w, 0x0, 0x1, 1, cases[i].data, strlen(cases[i].data));
		assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
		assert_int_equal(rst_code(&srv.out, 1), cases[i].code);
		if (cases[i].code == -1)
			assert_null(strstr(srec.log, "C1/"));
		else
			assert_null(strstr(srec.log, "E1"));
	}
}

/* §5.1.1: HEADERS on a stream id below one the client already used (skipped, or closed) is a
 * connection PROTOCOL_ERROR, so a confused client learns at once instead of waiting out its
 * deadline. HEADERS on a stream we reset ourselves is ignored: it may have crossed our RST. */
static void test_h2_headers_on_a_closed_or_lower_stream_is_a_connection_error(void **state)
{
	static struct wire w;

	/* a skipped id */
	server_up(&srv, &srec, 10);
	w.len = 0;
	preface(&w);
	headers(&w, 3, 0);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_PROTOCOL_ERROR);
	/* a stream that ended on both sides */
	server_up(&srv, &srec, 10);
	srec.respond = 1;
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0);
	frame(&w, 0x0, 0x1, 1, "x", 1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "C1/0/0"));
	h2_conn_sent(&srv, srv.out.len);
	w.len = 0;
	headers(&w, 1, 0x1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), H2_ERR_CONN);
	assert_int_equal(goaway_code(&srv.out), H2_PROTOCOL_ERROR);
	/* a stream we reset: its late trailers are ignored */
	server_up(&srv, &srec, 10);
	srec.reset_on_headers = 1;
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	w.len = 0;
	headers(&w, 1, 0x1);
	headers(&w, 3, 0x1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "H3/1:"));
	assert_int_equal(goaway_code(&srv.out), -1);
}

/* §5.1: DATA on a stream that has ended is STREAM_CLOSED, not dropped without a word; DATA on a
 * stream we reset is ignored. */
static void test_h2_data_on_a_closed_stream_is_stream_closed(void **state)
{
	static struct wire w;

	server_up(&srv, &srec, 10);
	srec.respond = 1;
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0);
	frame(&w, 0x0, 0x1, 1, "x", 1);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_non_null(strstr(srec.log, "C1/0/0"));
	h2_conn_sent(&srv, srv.out.len);
	w.len = 0;
	frame(&w, 0x0, 0x1, 1, "late", 4);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_int_equal(rst_code(&srv.out, 1), H2_STREAM_CLOSED);
	assert_null(strstr(srec.log, "late"));

	server_up(&srv, &srec, 10);
	srec.reset_on_headers = 1;
	w.len = 0;
	preface(&w);
	headers(&w, 1, 0);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	h2_conn_sent(&srv, srv.out.len);
	w.len = 0;
	frame(&w, 0x0, 0x1, 1, "late", 4);
	assert_int_equal(h2_conn_feed(&srv, w.b, w.len), 0);
	assert_int_equal(srv.out.len, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_h2_server_sends_settings_first_and_acks_the_clients),
		cmocka_unit_test(test_h2_server_rejects_a_bad_preface_without_output),
		cmocka_unit_test(test_h2_first_frame_must_be_settings),
		cmocka_unit_test(test_h2_ping_is_answered_with_its_data),
		cmocka_unit_test(test_h2_client_and_server_complete_a_request),
		cmocka_unit_test(test_h2_send_honours_the_peers_initial_window_and_frame_size),
		cmocka_unit_test(test_h2_window_update_follows_consumed_data),
		cmocka_unit_test(test_h2_data_beyond_the_window_is_a_flow_control_error),
		cmocka_unit_test(test_h2_padding_priority_continuation_and_unknown_frames_are_handled),
		cmocka_unit_test(test_h2_oversize_frame_is_a_frame_size_error),
		cmocka_unit_test(test_h2_header_block_over_the_limit_ends_the_connection_calmly),
		cmocka_unit_test(test_h2_continuation_flood_ends_the_connection_calmly),
		cmocka_unit_test(test_h2_streams_over_the_limit_are_refused),
		cmocka_unit_test(test_h2_rapid_reset_ends_the_connection_calmly),
		cmocka_unit_test(test_h2_streams_that_end_normally_refund_the_reset_budget),
		cmocka_unit_test(test_h2_goaway_received_refuses_streams_above_last),
		cmocka_unit_test(test_h2_graceful_goaway_names_the_last_stream_and_ignores_newer),
		cmocka_unit_test(test_h2_malformed_requests_get_a_stream_protocol_error),
		cmocka_unit_test(test_h2_header_list_over_the_limit_is_flagged_and_table_stays_in_sync),
		cmocka_unit_test(test_h2_input_split_at_every_byte_gives_the_same_result),
		cmocka_unit_test(test_h2_owed_frames_wait_for_room_and_are_not_lost),
		cmocka_unit_test(test_h2_cancels_spread_over_time_never_end_the_connection),
		cmocka_unit_test(test_h2_fields_rfc9113_forbids_are_a_stream_protocol_error),
		cmocka_unit_test(test_h2_we_never_send_a_field_rfc9113_forbids),
		cmocka_unit_test(test_h2_content_length_must_match_the_data),
		cmocka_unit_test(test_h2_headers_on_a_closed_or_lower_stream_is_a_connection_error),
		cmocka_unit_test(test_h2_data_on_a_closed_stream_is_stream_closed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
