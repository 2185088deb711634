/* grpctest.c: agentic-grpctest, a test program, never part of the product: hosts the
 * agentic.test.v1.Test service on the production gRPC server code, drives any server with our
 * client (interop scenarios), and is the load generator of `make bench`. The Makefile links it
 * from the product's own musl objects (build/musl/agentic-grpctest), as it does tests/static. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "grpc/grpc.h"
#include "grpctest.pb-c.h"
#include "health.pb-c.h"
#include "version.h"

static const char grpctest_help[] =
	"usage: agentic-grpctest serve SOCKET [OPTIONS]\n"
	"       agentic-grpctest client SOCKET SCENARIO\n"
	"       agentic-grpctest bench SOCKET unary CALLS DEPTH | stream MIB\n"
	"\n"
	"TEST-ONLY: a test program, not an applet of agentic, never installed. Exercises agentic's\n"
	"gRPC server and client with the agentic.test.v1.Test service (proto/grpctest.proto) for\n"
	"the interop tests and `make bench`.\n"
	"\n"
	"serve: serves Test and grpc.health.v1 on a new Unix socket until SIGTERM or SIGINT;\n"
	"prints `ready budget=BYTES` once listening. The memory budget is taken at start and the\n"
	"allocator sealed (AGENTIC_ALLOC_CHECK=1 makes a later allocation abort).\n"
	"  --max-connections N (1100)  --max-streams N (128)  --max-message BYTES (4194304)\n"
	"  --small-buffers N (256)  --large-buffers N (4)  --preface-timeout MS (10000)\n"
	"\n"
	"client: runs one scenario against SOCKET with our client; prints `ok` and exits 0, or\n"
	"prints `FAIL: why` and exits 1. Scenarios: unary sizes oversize server-stream bidi\n"
	"deadline cancel concurrent connections both-ways health metadata status\n"
	"unimplemented.\n"
	"\n"
	"bench: unary: CALLS echo calls of 100 bytes, DEPTH in flight on one connection, prints\n"
	"calls_per_sec; stream: one server-streaming call of MIB MiB in 16 KiB messages, prints\n"
	"mib_per_sec.\n";

#define MIB (1024u * 1024u)
#define PATTERN_BYTES (4u * MIB)

static uint8_t *pattern;  /* byte i is i & 0xff: what streams send, what clients check */
static volatile sig_atomic_t stopping;

static void on_signal(int sig)
{
	(void)sig;
	stopping = 1;
}

/* Memory taken once, populated at once (so it counts in RSS from the start). Outside malloc:
 * the static allocator serves at most LIMIT_ALLOC_MAX_BYTES in one piece. */
static void *region(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);

	if (p == MAP_FAILED) {
		fprintf(stderr, "agentic-grpctest: cannot map %zu bytes\n", bytes);
		exit(1);
	}
	return p;
}

static void pattern_init(void)
{
	pattern = region(PATTERN_BYTES + 16);
	for (uint32_t i = 0; i < PATTERN_BYTES + 16; i++)
		pattern[i] = (uint8_t)i;
}

static uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ======================= the Test service (server side) ======================= */

struct stream_state {
	uint32_t left, size;
	uint64_t seq;
};

static void unary_start(struct grpc_call *call)
{
	uint8_t bin[256];
	long blen;
	size_t len;
	const char *v = grpc_call_md(call, "x-echo", &len);
	struct grpc_md md[2];
	size_t n = 0;

	if (v) {
		md[n].key = "x-echo";
		md[n].value = v;
		md[n++].len = len;
	}
	blen = grpc_call_md_bin(call, "x-echo-bin", bin, sizeof(bin));
	if (blen >= 0) {
		md[n].key = "x-echo-bin";
		md[n].value = bin;
		md[n++].len = (size_t)blen;
	}
	if (n)
		grpc_call_set_headers(call, md, n);
}

static void unary_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	static const struct grpc_md trailer = { "x-trailer", "done", 4 };
	int r = grpc_call_send(call, msg);

	if (r < 0)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, err_str(r), NULL, 0);
	else
		grpc_call_finish(call, GRPC_OK, NULL, &trailer, 1);
}

static void stream_more(struct grpc_call *call)
{
	struct stream_state *st = grpc_call_app(call);
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;

	while (st->left) {
		int r;

		m.data.data = pattern;
		m.data.len = st->size;
		m.seq = st->seq;
		r = grpc_call_send(call, &m.base);
		if (r == -EAGAIN)
			return;
		if (r < 0) {
			grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, err_str(r), NULL, 0);
			return;
		}
		st->left--;
		st->seq++;
	}
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);  /* goes out after the queue */
}

static void stream_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Test__V1__StreamRequest *req = (const void *)msg;
	struct stream_state *st = grpc_call_app(call);

	if (req->size > PATTERN_BYTES) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "size over 4 MiB", NULL, 0);
		return;
	}
	st->left = req->count;
	st->size = req->size;
	stream_more(call);
}

struct sum_state {
	uint64_t messages, bytes, checksum;
};

static void sum_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Test__V1__Msg *m = (const void *)msg;
	struct sum_state *st = grpc_call_app(call);

	st->messages++;
	st->bytes += m->data.len;
	for (size_t i = 0; i < m->data.len; i++)
		st->checksum += m->data.data[i];
}

static void sum_half_close(struct grpc_call *call)
{
	struct sum_state *st = grpc_call_app(call);
	Agentic__Test__V1__Summary s = AGENTIC__TEST__V1__SUMMARY__INIT;

	s.messages = st->messages;
	s.bytes = st->bytes;
	s.checksum = st->checksum;
	if (grpc_call_send(call, &s.base) == 0)
		grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
	else
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "no buffer", NULL, 0);
}

static void bidi_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	int r = grpc_call_send(call, msg);

	if (r < 0)
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "echo backlog full", NULL, 0);
}

static void bidi_half_close(struct grpc_call *call)
{
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
}

static void fail_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Test__V1__FailRequest *req = (const void *)msg;

	grpc_call_finish(call, req->code, req->message, NULL, 0);
}

#define TEST_PATH(m) "/agentic.test.v1.Test/" m
#define MSG_DESC (&agentic__test__v1__msg__descriptor)

static const struct grpc_method test_methods[] = {
	{ TEST_PATH("Unary"), MSG_DESC, MSG_DESC, 0,
	  { .on_start = unary_start, .on_message = unary_message }, NULL },
	{ TEST_PATH("ServerStream"), &agentic__test__v1__stream_request__descriptor, MSG_DESC,
	  GRPC_SERVER_STREAMING, { .on_message = stream_message, .on_writable = stream_more },
	  NULL },
	{ TEST_PATH("ClientStream"), MSG_DESC, &agentic__test__v1__summary__descriptor,
	  GRPC_CLIENT_STREAMING, { .on_message = sum_message, .on_half_close = sum_half_close },
	  NULL },
	{ TEST_PATH("Bidi"), MSG_DESC, MSG_DESC, GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	  { .on_message = bidi_message, .on_half_close = bidi_half_close }, NULL },
	{ TEST_PATH("Hang"), MSG_DESC, MSG_DESC, 0, { 0 }, NULL },
	{ TEST_PATH("Fail"), &agentic__test__v1__fail_request__descriptor, MSG_DESC, 0,
	  { .on_message = fail_message }, NULL },
};

static int opt_u32(char **argv, int *i, int argc, const char *name, uint32_t *out)
{
	uint64_t v;

	if (strcmp(argv[*i], name) != 0)
		return 0;
	if (*i + 1 >= argc || parse_u64(argv[*i + 1], UINT32_MAX, &v) != 0) {
		fprintf(stderr, "agentic-grpctest: %s needs a number\n", name);
		exit(2);
	}
	*out = (uint32_t)v;
	*i += 1;
	return 1;
}

static int serve(int argc, char **argv)
{
	struct grpc_server_config cfg = {
		.max_connections = 1100,
		.max_streams_per_connection = LIMIT_GRPC_STREAMS,
		.max_message_bytes = LIMIT_GRPC_MESSAGE_BYTES,
		.small_buffers = 256,
		.large_buffers = 4,
	};
	struct sigaction sa = { .sa_handler = on_signal };
	struct grpc_server *s;
	size_t bytes;
	void *storage;
	int r;

	for (int i = 3; i < argc; i++) {
		if (!opt_u32(argv, &i, argc, "--max-connections", &cfg.max_connections) &&
		    !opt_u32(argv, &i, argc, "--max-streams", &cfg.max_streams_per_connection) &&
		    !opt_u32(argv, &i, argc, "--max-message", &cfg.max_message_bytes) &&
		    !opt_u32(argv, &i, argc, "--small-buffers", &cfg.small_buffers) &&
		    !opt_u32(argv, &i, argc, "--large-buffers", &cfg.large_buffers) &&
		    !opt_u32(argv, &i, argc, "--preface-timeout", &cfg.preface_timeout_ms)) {
			fprintf(stderr, "agentic-grpctest: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	bytes = grpc_server_storage_bytes(&cfg);
	if (!bytes) {
		fprintf(stderr, "agentic-grpctest: configuration out of range\n");
		return 2;
	}
	storage = region(bytes);
	pattern_init();
	r = grpc_server_init(&cfg, storage, bytes, &s);
	if (r == 0)
		r = grpc_server_listen_unix(s, argv[2], 0600, test_methods, ARRAY_LEN(test_methods));
	if (r < 0) {
		fprintf(stderr, "agentic-grpctest: cannot serve on %s: %s\n", argv[2], err_str(r));
		return 1;
	}
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	alloc_seal();
	printf("ready budget=%zu\n", bytes + PATTERN_BYTES + 16);
	fflush(stdout);
	while (!stopping) {
		r = grpc_server_run(s, -1);
		if (r < 0 && r != -EINTR) {
			fprintf(stderr, "agentic-grpctest: %s\n", err_str(r));
			return 1;
		}
	}
	{
		struct grpc_server_stats gs;

		grpc_server_stats(s, &gs);
		log_info("grpctest server stopping", "accepted=%llu evicted=%llu refused=%llu",
			 (unsigned long long)gs.accepted, (unsigned long long)gs.evicted,
			 (unsigned long long)gs.refused);
	}
	grpc_server_close(s);
	{
		struct alloc_stats st;

		alloc_stats(&st);
		if (st.after_seal) {
			fprintf(stderr, "agentic-grpctest: %zu allocations after start-up\n",
				st.after_seal);
			return 1;
		}
	}
	return 0;
}

/* ======================= our client (scenarios and bench) ======================= */

struct outcome {
	int done, status, started;
	char message[512];
	uint64_t messages, bytes, bad, seq;
	char md_echo[64];
	uint8_t md_bin[256];
	long md_bin_len;
	int trailer_ok;
};

static void c_start(struct grpc_call *call)
{
	struct outcome *o = grpc_call_user(call);
	size_t len;
	const char *v = grpc_call_md(call, "x-echo", &len);

	o->started = 1;
	if (v && len < sizeof(o->md_echo)) {
		memcpy(o->md_echo, v, len);
		o->md_echo[len] = '\0';
	}
	o->md_bin_len = grpc_call_md_bin(call, "x-echo-bin", o->md_bin, sizeof(o->md_bin));
}

static void c_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct outcome *o = grpc_call_user(call);

	o->messages++;
	if (msg->descriptor == MSG_DESC) {
		const Agentic__Test__V1__Msg *m = (const void *)msg;

		o->bytes += m->data.len;
		if (m->seq != o->seq)
			o->bad++;
		o->seq++;
		if (m->data.len && (m->data.data[0] != 0 ||
				    m->data.data[m->data.len - 1] != (uint8_t)(m->data.len - 1)))
			o->bad++;
	}
}

static void c_done(struct grpc_call *call, int status, const char *message)
{
	struct outcome *o = grpc_call_user(call);
	size_t len;
	const char *t = grpc_call_md(call, "x-trailer", &len);

	o->done = 1;
	o->status = status;
	o->trailer_ok = t && len == 4 && memcmp(t, "done", 4) == 0;
	snprintf(o->message, sizeof(o->message), "%s", message ? message : "");
}

#define CLIENT_HANDLER { .on_start = c_start, .on_message = c_message, .on_done = c_done }

static const struct grpc_method m_unary = { TEST_PATH("Unary"), MSG_DESC, MSG_DESC, 0,
					    CLIENT_HANDLER, NULL };
static const struct grpc_method m_stream = { TEST_PATH("ServerStream"),
	&agentic__test__v1__stream_request__descriptor, MSG_DESC, GRPC_SERVER_STREAMING,
	CLIENT_HANDLER, NULL };
static const struct grpc_method m_hang = { TEST_PATH("Hang"), MSG_DESC, MSG_DESC, 0,
					   CLIENT_HANDLER, NULL };
static const struct grpc_method m_fail = { TEST_PATH("Fail"),
	&agentic__test__v1__fail_request__descriptor, MSG_DESC, 0, CLIENT_HANDLER, NULL };
static const struct grpc_method m_nope = { TEST_PATH("NoSuchMethod"), MSG_DESC, MSG_DESC, 0,
					   CLIENT_HANDLER, NULL };
static const struct grpc_method m_health = { "/grpc.health.v1.Health/Check",
	&grpc__health__v1__health_check_request__descriptor,
	&grpc__health__v1__health_check_response__descriptor, 0, CLIENT_HANDLER, NULL };

static struct grpc_client *client_new(const char *path, uint32_t max_message, uint32_t small,
				      uint32_t large)
{
	struct grpc_client_config cfg = { path, max_message, small, large, false, NULL, NULL };
	size_t bytes = grpc_client_storage_bytes(&cfg);
	void *storage = region(bytes);
	struct grpc_client *c;

	if (grpc_client_init(&cfg, storage, bytes, &c) != 0) {
		fprintf(stderr, "agentic-grpctest: cannot set up a client\n");
		exit(1);
	}
	return c;
}

/* Runs c until *done or timeout_ms; 0 or -1 on timeout or a lost connection. */
static int wait_for(struct grpc_client *c, const int *done, int timeout_ms)
{
	uint64_t end = now_us() + (uint64_t)timeout_ms * 1000u;

	while (!*done) {
		if (now_us() > end || grpc_client_run(c, 50) < 0)
			return *done ? 0 : -1;
	}
	return 0;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return 1;
}

/* One unary echo of len bytes; 0 when it came back intact with status OK. */
static int echo_once(struct grpc_client *c, uint32_t len, int expect_status)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;
	int r;

	m.data.data = pattern;
	m.data.len = len;
	r = grpc_client_start(c, &m_unary, NULL, 0, 30000, &o, &call);
	if (r == 0) {
		r = grpc_call_send(call, &m.base);
		if (r == ERR_LIMIT && expect_status == GRPC_RESOURCE_EXHAUSTED) {
			grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "over the limit", NULL, 0);
			r = 0;
		} else if (r == 0) {
			r = grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
		}
	}
	if (r < 0)
		return fail("unary of %u bytes: %s", len, err_str(r));
	if (wait_for(c, &o.done, 60000) < 0)
		return fail("unary of %u bytes: no answer", len);
	if (o.status != expect_status)
		return fail("unary of %u bytes: status %s (%s), wanted %s", len,
			    grpc_status_name(o.status), o.message, grpc_status_name(expect_status));
	if (expect_status == GRPC_OK && (o.messages != 1 || o.bytes != len || o.bad))
		return fail("unary of %u bytes: got %llu messages, %llu bytes, %llu bad", len,
			    (unsigned long long)o.messages, (unsigned long long)o.bytes,
			    (unsigned long long)o.bad);
	return 0;
}

/* The packed size of a Msg whose data is len bytes. */
static uint32_t data_for_packed(uint32_t packed)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	uint32_t len = packed;

	m.data.data = pattern;
	do {
		m.data.len = --len;
	} while (protobuf_c_message_get_packed_size(&m.base) > packed);
	return len;
}

static int sc_sizes(struct grpc_client *c)
{
	uint32_t sizes[] = { 1, 65537, data_for_packed(4 * MIB) };

	for (size_t i = 0; i < ARRAY_LEN(sizes); i++)
		if (echo_once(c, sizes[i], GRPC_OK))
			return 1;
	return 0;
}

static int sc_server_stream(struct grpc_client *c)
{
	Agentic__Test__V1__StreamRequest req = AGENTIC__TEST__V1__STREAM_REQUEST__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;

	req.count = 6400;
	req.size = 16384;
	if (grpc_client_start(c, &m_stream, NULL, 0, 120000, &o, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0)
		return fail("cannot start the stream");
	if (wait_for(c, &o.done, 120000) < 0)
		return fail("stream did not end: %llu messages", (unsigned long long)o.messages);
	if (o.status != GRPC_OK || o.messages != 6400 || o.bytes != 100ull * MIB || o.bad)
		return fail("stream: status %s, %llu messages, %llu bytes, %llu bad",
			    grpc_status_name(o.status), (unsigned long long)o.messages,
			    (unsigned long long)o.bytes, (unsigned long long)o.bad);
	return 0;
}

struct bidi {
	struct outcome o;
	struct grpc_call *call;
	uint32_t sent, total, size;
	uint32_t limit;  /* sent no further than this for now */
	int finished;
};

static void bidi_pump(struct bidi *b)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;

	m.data.data = pattern;
	m.data.len = b->size;
	/* interleaved: never more than 64 ahead of the echoes */
	while (b->sent < b->total && b->sent < b->limit && b->sent < b->o.messages + 64) {
		m.seq = b->sent;
		if (grpc_call_send(b->call, &m.base) != 0)
			return;
		b->sent++;
	}
	if (b->sent == b->total && !b->finished) {
		b->finished = 1;
		grpc_call_finish(b->call, GRPC_OK, NULL, NULL, 0);
	}
}

static void bidi_c_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	struct bidi *b = grpc_call_user(call);

	c_message(call, msg);
	bidi_pump(b);
}

static void bidi_c_writable(struct grpc_call *call)
{
	bidi_pump(grpc_call_user(call));
}

static const struct grpc_method m_bidi = { TEST_PATH("Bidi"), MSG_DESC, MSG_DESC,
	GRPC_CLIENT_STREAMING | GRPC_SERVER_STREAMING,
	{ .on_start = c_start, .on_message = bidi_c_message, .on_writable = bidi_c_writable,
	  .on_done = c_done }, NULL };

static int bidi_start(struct grpc_client *c, struct bidi *b, uint32_t total, uint32_t size,
		      uint32_t limit)
{
	memset(b, 0, sizeof(*b));
	b->total = total;
	b->limit = limit;
	b->size = size;
	if (grpc_client_start(c, &m_bidi, NULL, 0, 120000, &b->o, &b->call) != 0)
		return -1;
	bidi_pump(b);
	return 0;
}

static int sc_bidi(struct grpc_client *c)
{
	static struct bidi b;

	if (bidi_start(c, &b, 10000, 100, 10000) < 0)
		return fail("cannot start the stream");
	if (wait_for(c, &b.o.done, 120000) < 0)
		return fail("bidi did not end: sent %u, got %llu", b.sent,
			    (unsigned long long)b.o.messages);
	if (b.o.status != GRPC_OK || b.o.messages != 10000 || b.o.bad)
		return fail("bidi: status %s (%s), %llu messages, %llu bad",
			    grpc_status_name(b.o.status), b.o.message,
			    (unsigned long long)b.o.messages, (unsigned long long)b.o.bad);
	return 0;
}

/* Client streaming of 100 MiB in 256 KiB messages while a server stream sends 100 MiB back,
 * on one connection: both directions full at once must not stall. */
struct upload {
	struct outcome o;
	struct grpc_call *call;
	uint32_t sent;
};

static void up_pump(struct grpc_call *call)
{
	struct upload *u = grpc_call_user(call);
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;

	m.data.data = pattern;
	m.data.len = 256 * 1024;
	while (u->sent < 400) {
		if (grpc_call_send(call, &m.base) != 0)
			return;
		u->sent++;
	}
	grpc_call_finish(call, GRPC_OK, NULL, NULL, 0);
}

static void up_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	const Agentic__Test__V1__Summary *s = (const void *)msg;
	struct upload *u = grpc_call_user(call);

	u->o.messages++;
	u->o.bytes = s->bytes;
}

static const struct grpc_method m_upload = { TEST_PATH("ClientStream"), MSG_DESC,
	&agentic__test__v1__summary__descriptor, GRPC_CLIENT_STREAMING,
	{ .on_message = up_message, .on_writable = up_pump, .on_done = c_done }, NULL };

static int sc_both_ways(struct grpc_client *c)
{
	Agentic__Test__V1__StreamRequest req = AGENTIC__TEST__V1__STREAM_REQUEST__INIT;
	static struct upload u;
	struct outcome down = { 0 };
	struct grpc_call *call;
	uint64_t end = now_us() + 120000000u;

	req.count = 6400;
	req.size = 16384;
	if (grpc_client_start(c, &m_stream, NULL, 0, 120000, &down, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    grpc_client_start(c, &m_upload, NULL, 0, 120000, &u.o, &u.call) != 0)
		return fail("cannot start the streams");
	up_pump(u.call);
	while ((!down.done || !u.o.done) && now_us() < end)
		if (grpc_client_run(c, 100) < 0)
			return fail("connection lost");
	if (!down.done || down.status != GRPC_OK || down.bytes != 100ull * MIB || down.bad)
		return fail("download: done %d, %s, %llu bytes", down.done,
			    grpc_status_name(down.status), (unsigned long long)down.bytes);
	if (!u.o.done || u.o.status != GRPC_OK || u.o.bytes != 100ull * MIB)
		return fail("upload: done %d, %s (%s), %llu bytes acknowledged, %u sent", u.o.done,
			    grpc_status_name(u.o.status), u.o.message,
			    (unsigned long long)u.o.bytes, u.sent);
	return 0;
}

static int sc_concurrent(struct grpc_client *c)
{
	static struct bidi b[64];
	int all = 0;

	/* 64 streams open at once: each echoes its first message before any is finished */
	for (int i = 0; i < 64; i++)
		if (bidi_start(c, &b[i], 2, 10, 1) < 0)
			return fail("cannot start stream %d", i);
	while (!all) {
		all = 1;
		for (int i = 0; i < 64; i++)
			all &= b[i].o.messages >= 1 || b[i].o.done;
		if (!all && grpc_client_run(c, 1000) < 0)
			return fail("connection lost");
	}
	for (int i = 0; i < 64; i++) {
		if (b[i].o.done)
			return fail("stream %d ended early: %s", i, grpc_status_name(b[i].o.status));
		b[i].limit = 2;
		bidi_pump(&b[i]);
	}
	for (int i = 0; i < 64; i++) {
		if (wait_for(c, &b[i].o.done, 30000) < 0 || b[i].o.status != GRPC_OK)
			return fail("stream %d: status %s (%s)", i, grpc_status_name(b[i].o.status),
				    b[i].o.message);
	}
	return 0;
}

static int sc_connections(const char *path)
{
	static struct grpc_client *cl[32];
	static struct bidi b[32];

	for (int i = 0; i < 32; i++) {
		cl[i] = client_new(path, GRPC_SMALL_MESSAGE, 4, 0);
		if (bidi_start(cl[i], &b[i], 2, 10, 1) < 0)
			return fail("connection %d: cannot start", i);
	}
	/* all 32 are open and have had an answer before any finishes */
	for (int i = 0; i < 32; i++) {
		uint64_t end = now_us() + 30000000u;

		while (!b[i].o.messages && !b[i].o.done && now_us() < end)
			grpc_client_run(cl[i], 50);
		if (!b[i].o.messages || b[i].o.done)
			return fail("connection %d: no echo (%s)", i, grpc_status_name(b[i].o.status));
	}
	for (int i = 0; i < 32; i++) {
		b[i].limit = 2;
		bidi_pump(&b[i]);
		if (wait_for(cl[i], &b[i].o.done, 30000) < 0 || b[i].o.status != GRPC_OK)
			return fail("connection %d: status %s", i, grpc_status_name(b[i].o.status));
	}
	return 0;
}

static int sc_deadline(struct grpc_client *c)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;
	uint64_t t0 = now_us(), ms;

	if (grpc_client_start(c, &m_hang, NULL, 0, 300, &o, &call) != 0 ||
	    grpc_call_send(call, &m.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0)
		return fail("cannot start");
	if (wait_for(c, &o.done, 10000) < 0)
		return fail("the deadline did not end the call");
	ms = (now_us() - t0) / 1000;
	if (o.status != GRPC_DEADLINE_EXCEEDED || ms < 250 || ms > 5000)
		return fail("status %s after %llu ms", grpc_status_name(o.status),
			    (unsigned long long)ms);
	/* the connection is still good */
	return echo_once(c, 10, GRPC_OK);
}

static int sc_cancel(struct grpc_client *c)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;
	uint64_t end = now_us() + 200000;

	if (grpc_client_start(c, &m_hang, NULL, 0, 0, &o, &call) != 0 ||
	    grpc_call_send(call, &m.base) != 0)
		return fail("cannot start");
	while (now_us() < end)
		grpc_client_run(c, 20);
	if (o.done)
		return fail("the call ended before it was cancelled: %s", grpc_status_name(o.status));
	grpc_call_finish(call, GRPC_CANCELLED, "cancelled by the test", NULL, 0);
	if (!o.done || o.status != GRPC_CANCELLED)
		return fail("cancel: status %s", grpc_status_name(o.status));
	for (int i = 0; i < 10; i++)
		grpc_client_run(c, 10);
	return echo_once(c, 10, GRPC_OK);
}

static int sc_health(struct grpc_client *c)
{
	Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;

	if (grpc_client_start(c, &m_health, NULL, 0, 5000, &o, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    wait_for(c, &o.done, 10000) < 0)
		return fail("health check did not complete");
	if (o.status != GRPC_OK || o.messages != 1)
		return fail("health: %s", grpc_status_name(o.status));
	memset(&o, 0, sizeof(o));
	req.service = "no.such.Service";
	if (grpc_client_start(c, &m_health, NULL, 0, 5000, &o, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    wait_for(c, &o.done, 10000) < 0)
		return fail("second health check did not complete");
	if (o.status != GRPC_NOT_FOUND)
		return fail("health of an unknown service: %s", grpc_status_name(o.status));
	return 0;
}

static int sc_metadata(struct grpc_client *c)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;
	uint8_t bin[256];
	struct grpc_md md[2] = { { "x-echo", "hello metadata", 14 }, { "x-echo-bin", bin, 256 } };

	for (int i = 0; i < 256; i++)
		bin[i] = (uint8_t)(255 - i);
	if (grpc_client_start(c, &m_unary, md, 2, 5000, &o, &call) != 0 ||
	    grpc_call_send(call, &m.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    wait_for(c, &o.done, 10000) < 0)
		return fail("call did not complete");
	if (o.status != GRPC_OK || strcmp(o.md_echo, "hello metadata") != 0)
		return fail("x-echo came back as '%s' (%s)", o.md_echo, grpc_status_name(o.status));
	if (o.md_bin_len != 256 || memcmp(o.md_bin, bin, 256) != 0)
		return fail("x-echo-bin came back wrong (%ld bytes)", o.md_bin_len);
	if (!o.trailer_ok)
		return fail("trailer x-trailer missing");
	return 0;
}

static int sc_status(struct grpc_client *c)
{
	Agentic__Test__V1__FailRequest req = AGENTIC__TEST__V1__FAIL_REQUEST__INIT;
	const char *msg = "na\xc3\xafve 100% sure\nsecond line";
	struct outcome o = { 0 };
	struct grpc_call *call;

	req.code = GRPC_FAILED_PRECONDITION;
	req.message = (char *)msg;
	if (grpc_client_start(c, &m_fail, NULL, 0, 5000, &o, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    wait_for(c, &o.done, 10000) < 0)
		return fail("call did not complete");
	if (o.status != GRPC_FAILED_PRECONDITION || strcmp(o.message, msg) != 0)
		return fail("got %s '%s'", grpc_status_name(o.status), o.message);
	return 0;
}

static int sc_unimplemented(struct grpc_client *c)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;

	if (grpc_client_start(c, &m_nope, NULL, 0, 5000, &o, &call) != 0 ||
	    grpc_call_send(call, &m.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0 ||
	    wait_for(c, &o.done, 10000) < 0)
		return fail("call did not complete");
	if (o.status != GRPC_UNIMPLEMENTED)
		return fail("got %s", grpc_status_name(o.status));
	return 0;
}

static int client(int argc, char **argv)
{
	const char *sc = argv[3];
	struct grpc_client *c;
	int r;

	if (argc != 4) {
		fputs(grpctest_help, stderr);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	pattern_init();
	if (strcmp(sc, "connections") == 0) {
		r = sc_connections(argv[2]);
		goto out;
	}
	c = client_new(argv[2], 4 * MIB, 128, 2);
	if (grpc_client_connect(c) != 0) {
		r = fail("cannot connect to %s", argv[2]);
		goto out;
	}
	if (strcmp(sc, "unary") == 0)
		r = echo_once(c, 100, GRPC_OK);
	else if (strcmp(sc, "sizes") == 0)
		r = sc_sizes(c);
	else if (strcmp(sc, "oversize") == 0)
		r = echo_once(c, data_for_packed(4 * MIB) + 1, GRPC_RESOURCE_EXHAUSTED);
	else if (strcmp(sc, "server-stream") == 0)
		r = sc_server_stream(c);
	else if (strcmp(sc, "bidi") == 0)
		r = sc_bidi(c);
	else if (strcmp(sc, "deadline") == 0)
		r = sc_deadline(c);
	else if (strcmp(sc, "cancel") == 0)
		r = sc_cancel(c);
	else if (strcmp(sc, "concurrent") == 0)
		r = sc_concurrent(c);
	else if (strcmp(sc, "both-ways") == 0)
		r = sc_both_ways(c);
	else if (strcmp(sc, "health") == 0)
		r = sc_health(c);
	else if (strcmp(sc, "metadata") == 0)
		r = sc_metadata(c);
	else if (strcmp(sc, "status") == 0)
		r = sc_status(c);
	else if (strcmp(sc, "unimplemented") == 0)
		r = sc_unimplemented(c);
	else {
		fprintf(stderr, "agentic-grpctest: unknown scenario %s\n", sc);
		return 2;
	}
out:
	if (r == 0)
		puts("ok");
	return r ? 1 : 0;
}

/* ---- bench ---- */

static uint32_t bench_done, bench_failed;

static void b_done(struct grpc_call *call, int status, const char *message)
{
	bench_done++;
	if (status != GRPC_OK)
		bench_failed++;
}

static const struct grpc_method m_bench = { TEST_PATH("Unary"), MSG_DESC, MSG_DESC, 0,
					    { .on_done = b_done }, NULL };

static int bench_unary(struct grpc_client *c, uint32_t calls, uint32_t depth)
{
	Agentic__Test__V1__Msg m = AGENTIC__TEST__V1__MSG__INIT;
	uint32_t started = 0;
	uint64_t t0 = now_us(), us;

	m.data.data = pattern;
	m.data.len = 100;
	while (bench_done < calls) {
		while (started < calls && started - bench_done < depth) {
			struct grpc_call *call;
			int r = grpc_client_start(c, &m_bench, NULL, 0, 0, NULL, &call);

			if (r == -EAGAIN || r == ERR_LIMIT)
				break;
			if (r < 0 || grpc_call_send(call, &m.base) != 0 ||
			    grpc_call_finish(call, 0, NULL, NULL, 0) != 0)
				return fail("bench call %u: %s", started, err_str(r));
			started++;
		}
		if (grpc_client_run(c, 1000) < 0)
			return fail("connection lost after %u calls", bench_done);
	}
	us = now_us() - t0;
	if (bench_failed)
		return fail("%u calls failed", bench_failed);
	printf("calls=%u depth=%u seconds=%.3f calls_per_sec=%.0f\n", calls, depth, us / 1e6,
	       calls / (us / 1e6));
	return 0;
}

static int bench_stream(struct grpc_client *c, uint32_t mib)
{
	Agentic__Test__V1__StreamRequest req = AGENTIC__TEST__V1__STREAM_REQUEST__INIT;
	struct outcome o = { 0 };
	struct grpc_call *call;
	uint64_t t0 = now_us(), us;

	req.count = mib * 64;
	req.size = 16384;
	if (grpc_client_start(c, &m_stream, NULL, 0, 0, &o, &call) != 0 ||
	    grpc_call_send(call, &req.base) != 0 || grpc_call_finish(call, 0, NULL, NULL, 0) != 0)
		return fail("cannot start the stream");
	if (wait_for(c, &o.done, 600000) < 0 || o.status != GRPC_OK || o.bytes != (uint64_t)mib * MIB)
		return fail("stream: %s, %llu bytes", grpc_status_name(o.status),
			    (unsigned long long)o.bytes);
	us = now_us() - t0;
	printf("mib=%u seconds=%.3f mib_per_sec=%.1f\n", mib, us / 1e6, mib / (us / 1e6));
	return 0;
}

static int bench(int argc, char **argv)
{
	struct grpc_client *c;
	uint64_t a = 0, b = 0;

	signal(SIGPIPE, SIG_IGN);
	pattern_init();
	c = client_new(argv[2], 4 * MIB, 256, 2);
	if (argc == 6 && strcmp(argv[3], "unary") == 0 && parse_u64(argv[4], UINT32_MAX, &a) == 0 &&
	    parse_u64(argv[5], 127, &b) == 0 && b > 0)
		return bench_unary(c, (uint32_t)a, (uint32_t)b);
	if (argc == 5 && strcmp(argv[3], "stream") == 0 && parse_u64(argv[4], 65536, &a) == 0)
		return bench_stream(c, (uint32_t)a);
	fputs(grpctest_help, stderr);
	return 2;
}

int main(int argc, char **argv)
{
	log_set_prog("agentic-grpctest");
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		fputs(grpctest_help, stdout);
		return 0;
	}
	if (argc > 1 && strcmp(argv[1], "--version") == 0) {
		printf("agentic-grpctest %s\n", AGENTIC_VERSION);
		return 0;
	}
	if (argc >= 3 && strcmp(argv[1], "serve") == 0)
		return serve(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "client") == 0)
		return client(argc, argv);
	if (argc >= 3 && strcmp(argv[1], "bench") == 0)
		return bench(argc, argv);
	fputs(grpctest_help, stderr);
	return 2;
}
