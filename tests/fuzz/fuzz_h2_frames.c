/* fuzz_h2_frames.c: feeds arbitrary bytes to the HTTP/2 engine, in either role, and checks
 * that the result does not depend on how the bytes were split.
 *
 * Input: one config octet, then the peer's bytes. Config bit 0: client role, with streams
 * 1, 3, 5 and 7 opened first (else server, and the client preface is prepended so frames are
 * reached); bit 1: the callbacks answer each
 * header list (headers, DATA, trailers) or, with bit 2, reset the stream; bits 3-7 pick a
 * split step. The bytes are fed once whole and once in pieces of that step, to two fresh
 * engines whose output is never drained (so a full output buffer is exercised too): the
 * return codes, the events and the output must be identical. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "h2/h2.h"

struct rec {
	uint8_t log[1 << 16];
	size_t len;
	int respond, reset;
};

static void put(struct rec *r, const void *p, size_t n)
{
	if (n > sizeof(r->log) - r->len)
		n = sizeof(r->log) - r->len;
	if (n == 0)
		return;
	memcpy(r->log + r->len, p, n);
	r->len += n;
}

static const struct h2_field resp[] = {
	{ ":status", "200", 7, 3 }, { "content-type", "application/grpc", 12, 16 },
};
static const struct h2_field trailers[] = { { "grpc-status", "0", 11, 1 } };

static void on_headers(void *ctx, struct h2_conn *c, struct h2_stream *s,
		       const struct h2_field *f, size_t n, unsigned flags)
{
	struct rec *r = ctx;
	uint8_t tag[9] = { 'H', (uint8_t)flags };

	memcpy(tag + 2, &s->id, 4);
	put(r, tag, 6);
	for (size_t i = 0; i < n; i++) {
		put(r, f[i].name, f[i].name_len);
		put(r, "=", 1);
		put(r, f[i].value, f[i].value_len);
	}
	if (r->reset) {
		h2_stream_reset(c, s, H2_CANCEL);
		return;
	}
	if (r->respond && !(flags & H2_TRAILERS) && c->role == H2_SERVER) {
		if (h2_stream_send_headers(c, s, resp, 2, 0) == 0) {
			h2_stream_send_data(c, s, (const uint8_t *)"abcdef", 6, 0);
			h2_stream_send_headers(c, s, trailers, 1, 1);
		}
	}
}

static void on_data(void *ctx, struct h2_conn *c, struct h2_stream *s, const uint8_t *p,
		    size_t n, unsigned flags)
{
	struct rec *r = ctx;

	/* chunks differ between runs: log the bytes, not the calls */
	put(r, p, n);
	if (flags)
		put(r, "E", 1);
}

static void on_close(void *ctx, struct h2_conn *c, struct h2_stream *s, uint32_t code,
		     unsigned flags)
{
	struct rec *r = ctx;
	uint8_t tag[10] = { 'C', (uint8_t)flags };

	memcpy(tag + 2, &s->id, 4);
	memcpy(tag + 6, &code, 4);
	put(r, tag, 10);
}

static const struct h2_callbacks cbs = { on_headers, on_data, on_close };
static struct h2_scratch scratch;
static struct h2_conn whole, split;
static struct rec rw, rs;
static uint8_t input[1 << 20];

static int run(struct h2_conn *c, struct rec *r, int client, int respond, int reset,
	       const uint8_t *p, size_t n, size_t step)
{
	int res = 0;

	memset(r, 0, sizeof(*r));
	r->respond = respond;
	r->reset = reset;
	h2_conn_init(c, client ? H2_CLIENT : H2_SERVER, 8, &cbs, r, &scratch);
	for (int i = 0; client && i < 4; i++) {
		static const struct h2_field req[] = {
			{ ":method", "POST", 7, 4 }, { ":scheme", "http", 7, 4 },
			{ ":path", "/a.B/C", 5, 6 }, { ":authority", "x", 10, 1 },
		};
		struct h2_stream *s;

		if (h2_stream_open(c, req, 4, i == 3, NULL, &s) != 0)
			abort();
	}
	for (size_t off = 0; off < n && res == 0;) {
		size_t k = n - off < step ? n - off : step;

		res = h2_conn_feed(c, p + off, k);
		off += k;
	}
	return res;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t preface[24] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
	size_t n = 0, step;
	int client, respond, reset, a, b;

	if (size < 1 || size - 1 > sizeof(input) - sizeof(preface))
		return 0;
	client = data[0] & 1;
	respond = (data[0] >> 1) & 1;
	reset = (data[0] >> 2) & 1;
	step = (size_t)(data[0] >> 3) + 1;
	if (!client) {
		memcpy(input, preface, sizeof(preface));
		n = sizeof(preface);
	}
	memcpy(input + n, data + 1, size - 1);
	n += size - 1;
	a = run(&whole, &rw, client, respond, reset, input, n, n);
	b = run(&split, &rs, client, respond, reset, input, n, step);
	if (a != b || rw.len != rs.len || memcmp(rw.log, rs.log, rw.len) != 0) {
		fprintf(stderr, "split at %zu changed the result: %d/%d, logs %zu/%zu\n", step, a, b,
			rw.len, rs.len);
		abort();
	}
	if (whole.out.len != split.out.len ||
	    memcmp(whole.out.data, split.out.data, whole.out.len) != 0) {
		fprintf(stderr, "split at %zu changed the output\n", step);
		abort();
	}
	if (whole.nstreams > H2_MAX_STREAMS || whole.out.len > whole.out.cap)
		abort();
	return 0;
}
