/* fuzz_e2b_connect.c: the Connect request side (src/e2b/connect.c) on arbitrary bytes, as a
 * Start or Connect body (one envelope) and as a unary body. Whatever parses must encode back
 * into valid JSON: a StartRequest's config (what List returns) and an input's bytes (as a data
 * event, base64 that decodes to the same bytes). Any disagreement aborts. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/be.h"
#include "e2b/connect.h"
#include "grpc/grpc.h"
#include "json/json.h"

#define CHECK(c)                                                                          \
	do {                                                                              \
		if (!(c)) {                                                               \
			fprintf(stderr, "fuzz_e2b_connect: %s:%d: %s\n", __FILE__, __LINE__, #c); \
			abort();                                                          \
		}                                                                         \
	} while (0)

static char text[64 * 1024];
static uint8_t input[16 * 1024], back[16 * 1024];
static char out[128 * 1024];
static struct json_token tok[4096];

/* out[0..len) is one JSON document */
static struct json_doc parsed(const char *s, size_t len)
{
	struct json_doc d;

	CHECK(json_parse(&d, s, len, tok, 4096) == 0);
	return d;
}

static void start(const char *json, size_t len)
{
	struct connect_start s;
	const char *why;
	struct json_doc d;
	struct buf b;
	int r = connect_start_parse(json, len, &s, text, sizeof(text), &why);

	if (r != 0) {
		CHECK((r == ERR_PARSE || r == ERR_LIMIT) && why);
		return;
	}
	CHECK(s.cmd && s.cmd[0] && s.nargs <= CONNECT_MAX_ARGS && s.nenv <= CONNECT_MAX_ENVS);
	CHECK(strlen(s.tag) < CONNECT_TAG_BYTES);
	buf_init(&b, out, sizeof(out));
	if (connect_config_encode(&b, 2048, &s) != 0)
		return;
	CHECK(b.len <= 2048);
	d = parsed(out, b.len);
	CHECK(json_str_eq(&d, json_obj_get(&d, 0, "cmd"), s.cmd));
}

static void proc(const char *json, size_t len)
{
	struct connect_proc p;
	const char *why;
	struct json_doc d;
	struct buf b;
	int ev, dat, v;
	long n;
	int r = connect_proc_parse(json, len, &p, input, sizeof(input), &why);

	if (r != 0) {
		CHECK((r == ERR_PARSE || r == ERR_LIMIT) && why);
		return;
	}
	CHECK(p.has_pid || p.tag[0]);
	CHECK(p.input_len <= sizeof(input));
	buf_init(&b, out, sizeof(out));
	CHECK(connect_event_data(&b, p.input_pty ? CONNECT_PTY : CONNECT_STDOUT, input,
				 p.input_len) == 0);
	CHECK(b.len <= connect_data_bytes(p.input_len));
	CHECK(out[0] == 0 && be32_get((uint8_t *)out + 1) == b.len - CONNECT_HDR);
	d = parsed(out + CONNECT_HDR, b.len - CONNECT_HDR);
	ev = json_obj_get(&d, 0, "event");
	dat = json_obj_get(&d, ev, "data");
	v = json_first(&d, dat) + 1;
	CHECK(ev > 0 && dat > 0 && v > 0 && d.tok[v].type == JSON_STRING);
	CHECK((d.tok[v].end - d.tok[v].start) % 4 == 0);
	n = grpc_base64_decode(d.src + d.tok[v].start, d.tok[v].end - d.tok[v].start, back,
			       sizeof(back));
	CHECK(n == (long)p.input_len && memcmp(back, input, p.input_len) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *msg;
	size_t len;
	int r;

	if (size < 1)
		return 0;
	/* the first byte picks the way in; the rest is the body */
	switch (data[0] % 3) {
	case 0:
		r = connect_envelope_decode(data + 1, size - 1, 32 * 1024, &msg, &len);
		if (r != 0) {
			CHECK(r == ERR_PARSE || r == ERR_LIMIT || r == -ENOTSUP);
			return 0;
		}
		CHECK(msg == data + 1 + CONNECT_HDR && len == size - 1 - CONNECT_HDR);
		start((const char *)msg, len);
		proc((const char *)msg, len);
		break;
	case 1:
		start((const char *)data + 1, size - 1);
		break;
	default:
		proc((const char *)data + 1, size - 1);
		break;
	}
	return 0;
}
