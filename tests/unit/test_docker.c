/* test_docker.c: the Docker client without an engine: stream decoders split at every byte,
 * the version rule, the exact requests sent, error text, limits, and the pool, against a
 * scripted fake engine on a Unix socket. The real engine is tests/integration/test_docker. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <cmocka.h>

#include "docker/docker.h"
#include "json/json.h"
#include "workspace/host.h"

/* ---- log de-multiplexing ---- */
struct logs {
	char out[256], err[256];
	size_t nout, nerr;
	int calls;
};

static int collect_log(void *ctx, int stream, const uint8_t *data, size_t len)
{
	struct logs *l = ctx;
	char *dst = stream == 2 ? l->err : l->out;
	size_t *n = stream == 2 ? &l->nerr : &l->nout;

	assert_true(*n + len < sizeof(l->out));
	memcpy(dst + *n, data, len);
	*n += len;
	dst[*n] = '\0';
	l->calls++;
	return 0;
}

static const uint8_t muxed[] = {
	1, 0, 0, 0, 0, 0, 0, 6, 'h', 'e', 'l', 'l', 'o', '\n',
	2, 0, 0, 0, 0, 0, 0, 5, 'o', 'o', 'p', 's', '\n',
	1, 0, 0, 0, 0, 0, 0, 0,
	1, 0, 0, 0, 0, 0, 0, 3, 'b', 'y', 'e',
};

static void test_docker_demux_same_at_every_split(void **state)
{
	for (size_t cut = 0; cut <= sizeof(muxed); cut++) {
		struct docker_demux d = { 0 };
		struct logs l = { 0 };
		assert_int_equal(docker_demux_feed(&d, muxed, cut, collect_log, &l), 0);
		assert_int_equal(docker_demux_feed(&d, muxed + cut, sizeof(muxed) - cut, collect_log,
						   &l), 0);
		assert_string_equal(l.out, "hello\nbye");
		assert_string_equal(l.err, "oops\n");
	}
	struct docker_demux d = { 0 };
	struct logs l = { 0 };
	for (size_t i = 0; i < sizeof(muxed); i++)
		assert_int_equal(docker_demux_feed(&d, muxed + i, 1, collect_log, &l), 0);
	assert_string_equal(l.out, "hello\nbye");
	assert_string_equal(l.err, "oops\n");
}

static void test_docker_demux_refuses_a_raw_stream(void **state)
{
	struct docker_demux d = { 0 };
	struct logs l = { 0 };
	const uint8_t raw[] = "hello world, not multiplexed";

	assert_int_equal(docker_demux_feed(&d, raw, sizeof(raw) - 1, collect_log, &l), ERR_PARSE);
}

/* ---- event splitting ---- */
struct objs {
	char text[1024];
	int n;
};

static int collect_obj(void *ctx, const char *obj, size_t len)
{
	struct objs *o = ctx;
	size_t have = strlen(o->text);
	snprintf(o->text + have, sizeof(o->text) - have, "%.*s|", (int)len, obj ? obj : "");
	o->n++;
	return 0;
}

static const char events[] =
	"{\"Type\":\"container\",\"Action\":\"start\",\"Actor\":{\"Attributes\":{\"x\":\"}{\\\"\"}}}\n"
	"{\"Type\":\"network\",\"a\":[1,{\"b\":\"]\"}]}\r\n  {}";

static void test_docker_splitter_same_at_every_split(void **state)
{
	const char *want = "{\"Type\":\"container\",\"Action\":\"start\",\"Actor\":{\"Attributes\":"
			   "{\"x\":\"}{\\\"\"}}}|{\"Type\":\"network\",\"a\":[1,{\"b\":\"]\"}]}|{}|";
	char buf[256];

	for (size_t cut = 0; cut <= sizeof(events) - 1; cut++) {
		struct docker_splitter s = { .buf = buf, .cap = sizeof(buf) };
		struct objs o = { { 0 }, 0 };
		assert_int_equal(docker_splitter_feed(&s, (const uint8_t *)events, cut, collect_obj, &o), 0);
		assert_int_equal(docker_splitter_feed(&s, (const uint8_t *)events + cut,
						      sizeof(events) - 1 - cut, collect_obj, &o), 0);
		assert_string_equal(o.text, want);
		assert_int_equal(o.n, 3);
	}
}

static void test_docker_splitter_skips_an_oversized_event_and_goes_on(void **state)
{
	char buf[16];
	struct docker_splitter s = { .buf = buf, .cap = sizeof(buf) };
	struct objs o = { { 0 }, 0 };

	/* the oversized object is read to its end and reported empty; the next one comes whole */
	assert_int_equal(docker_splitter_feed(&s, (const uint8_t *)"{\"a\":\"0123456789abcdef\"}{\"b\":1}",
					      31, collect_obj, &o),
			 0);
	assert_int_equal(o.n, 2);
	assert_string_equal(o.text, "|{\"b\":1}|");
	struct docker_splitter t = { .buf = buf, .cap = sizeof(buf) };
	assert_int_equal(docker_splitter_feed(&t, (const uint8_t *)"[1]", 3, collect_obj, &o),
			 ERR_PARSE);
}

/* An exec's event carries its command line twice (status, Action): a long one made the event
 * oversized, skipped unread, and the exec tainted nothing. The long top-level strings are cut
 * (never inside an escape or a UTF-8 sequence), so the event is read, its id whole. */
struct cut_seen {
	int n, parsed;
	char action[LIMIT_DOCKER_EVENT_STRING_BYTES + 1], id[80], label[16];
	size_t len;
};

static int collect_cut(void *ctx, const char *obj, size_t len)
{
	static struct json_token tok[256];
	struct cut_seen *c = ctx;
	struct json_doc doc;
	int actor;

	c->n++;
	if (!obj || json_parse(&doc, obj, len, tok, 256) != 0)
		return 0;
	c->parsed++;
	if (json_obj_get(&doc, 0, "Actor") < 0)
		return 0;
	c->len = len;
	json_str(&doc, json_obj_get(&doc, 0, "Action"), c->action, sizeof(c->action));
	actor = json_obj_get(&doc, 0, "Actor");
	json_str(&doc, json_obj_get(&doc, actor, "ID"), c->id, sizeof(c->id));
	json_str(&doc, json_obj_get(&doc, json_obj_get(&doc, actor, "Attributes"), "agentic-daemon"),
		 c->label, sizeof(c->label));
	return 0;
}

static void test_docker_splitter_cuts_a_long_command_line_and_keeps_the_event(void **state)
{
	static char buf[LIMIT_DOCKER_EVENT_BYTES], ev[3 * LIMIT_DOCKER_EVENT_BYTES], cmd[50000];
	static const char *const unit[] = { "A", "\\u00e9", "\\\"", "\xc3\xa9", "\\\\" };
	size_t n = 0, k = 0;

	(void)state;
	/* every piece at every offset from the cut: escapes and UTF-8 straddle it somewhere */
	while (n + 8 < sizeof(cmd)) {
		n += (size_t)snprintf(cmd + n, sizeof(cmd) - n, "%s", unit[k % 5]);
		k += 1 + (k % 7 == 3);
	}
	snprintf(ev, sizeof(ev), "{\"status\":\"exec_start: sh -c %s\",\"id\":\"ct1\","
		 "\"Type\":\"container\",\"Action\":\"exec_start: sh -c %s\",\"Actor\":{\"ID\":"
		 "\"ct1\",\"Attributes\":{\"agentic-daemon\":\"own\",\"execID\":\"e1\"}},"
		 "\"scope\":\"local\",\"timeNano\":5}\n{\"b\":1}", cmd, cmd);
	assert_true(strlen(ev) > LIMIT_DOCKER_EVENT_BYTES); /* the event as it comes: too big */
	for (size_t step = 1; step <= 4099; step += 1049) {
		struct docker_splitter s = { .buf = buf, .cap = sizeof(buf) };
		struct cut_seen c = { 0 };
		size_t len = strlen(ev);

		for (size_t at = 0; at < len; at += step)
			assert_int_equal(docker_splitter_feed(&s, (const uint8_t *)ev + at,
							      at + step < len ? step : len - at,
							      collect_cut, &c), 0);
		assert_int_equal(c.n, 2);
		assert_int_equal(c.parsed, 2);
		assert_true(strncmp(c.action, "exec_start: sh -c A", 19) == 0);
		assert_string_equal(c.id, "ct1");
		assert_string_equal(c.label, "own");
		assert_true(c.len < 3 * LIMIT_DOCKER_EVENT_STRING_BYTES);
	}
}

/* ---- the version rule ---- */
static void test_docker_version_pick_takes_the_lower_and_refuses_outside_the_range(void **state)
{
	char v[8], why[512];

	assert_int_equal(docker_version_pick("1.41", "1.12", v, sizeof(v), why, sizeof(why)), 0);
	assert_string_equal(v, "1.41");
	assert_int_equal(docker_version_pick("1.45", NULL, v, sizeof(v), why, sizeof(why)), 0);
	assert_string_equal(v, "1.45");
	assert_int_equal(docker_version_pick("1.52", "1.44", v, sizeof(v), why, sizeof(why)), 0);
	assert_string_equal(v, "1.47");

	assert_int_equal(docker_version_pick("1.40", "1.12", v, sizeof(v), why, sizeof(why)),
			 DOCKER_ERR_VERSION);
	assert_string_equal(v, "");
	assert_non_null(strstr(why, "1.40"));
	assert_non_null(strstr(why, "1.41 to 1.47"));

	assert_int_equal(docker_version_pick("1.52", "1.48", v, sizeof(v), why, sizeof(why)),
			 DOCKER_ERR_VERSION);
	assert_non_null(strstr(why, "1.48"));
	assert_non_null(strstr(why, "1.47"));

	assert_int_equal(docker_version_pick("", NULL, v, sizeof(v), why, sizeof(why)),
			 DOCKER_ERR_VERSION);
	assert_int_equal(docker_version_pick("1.x", NULL, v, sizeof(v), why, sizeof(why)),
			 DOCKER_ERR_VERSION);
}

/* ---- a scripted fake engine ---- */
struct route {
	const char *prefix;   /* "METHOD /path" the request line starts with */
	const char *response; /* whole HTTP response */
};

struct fake {
	char path[108];
	int lfd;
	pthread_t thread;
	const struct route *routes;
	char last[65536];     /* the last request, head and body */
	size_t big;           /* when non-zero: answer every request with a body this big */
};

static void *fake_main(void *arg)
{
	struct fake *f = arg;
	static char req[65536];

	for (;;) {
		int fd = accept(f->lfd, NULL, NULL);
		if (fd < 0)
			return NULL;
		for (;;) {
			size_t n = 0, want = 0;
			char *end = NULL;
			while (!end || n < want) {
				ssize_t r = read(fd, req + n, sizeof(req) - 1 - n);
				if (r <= 0)
					goto next;
				n += (size_t)r;
				req[n] = '\0';
				if (!end && (end = strstr(req, "\r\n\r\n"))) {
					const char *cl = strstr(req, "Content-Length: ");
					want = (size_t)(end + 4 - req) + (cl ? strtoul(cl + 16, NULL, 10) : 0);
				}
			}
			memcpy(f->last, req, n + 1);
			if (f->big) {
				char head[128];
				static char body[1 << 16];
				size_t left = f->big;
				int k = snprintf(head, sizeof(head),
						 "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", left);
				memset(body, ' ', sizeof(body));
				send(fd, head, (size_t)k, MSG_NOSIGNAL);
				while (left) {
					size_t m = left < sizeof(body) ? left : sizeof(body);
					ssize_t w = send(fd, body, m, MSG_NOSIGNAL);
					if (w <= 0)
						break;
					left -= (size_t)w;
				}
				continue;
			}
			const char *resp = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 31\r\n\r\n"
					   "{\"message\":\"no route in fake\"}";
			for (const struct route *r = f->routes; r->prefix; r++)
				if (strncmp(req, r->prefix, strlen(r->prefix)) == 0) {
					resp = r->response;
					break;
				}
			if (send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0)
				break;
		}
next:
		close(fd);
	}
}

static void fake_start(struct fake *f, const struct route *routes)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	memset(f, 0, sizeof(*f));
	f->routes = routes;
	snprintf(f->path, sizeof(f->path), "/tmp/agentic-test-docker-%d.sock", (int)getpid());
	unlink(f->path);
	f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(sa.sun_path, f->path, sizeof(f->path));
	assert_int_equal(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(f->lfd, 8), 0);
	assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->thread, NULL);
	close(f->lfd);
	unlink(f->path);
}

static void client_for(struct docker_client *dc, struct fake *f, uint32_t conns, uint32_t limit)
{
	char host[128];
	struct docker_client_config cfg = { .docker_host = host, .connections = conns,
					    .response_limit = limit, .read_timeout_ms = 2000 };
	snprintf(host, sizeof(host), "unix://%s", f->path);
	assert_int_equal(docker_client_init(dc, &cfg), 0);
}

#define PING(v) "HTTP/1.1 200 OK\r\nApi-Version: " v "\r\nContent-Length: 2\r\n\r\nOK"

static char *json_response(char *out, size_t size, int status, const char *body)
{
	snprintf(out, size, "HTTP/1.1 %d X\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\n\r\n%s", status, strlen(body), body);
	return out;
}

static void test_docker_negotiates_down_to_1_47(void **state)
{
	static char version[256];
	const struct route routes[] = {
		{ "GET /_ping ", PING("1.52") },
		{ "GET /version ", json_response(version, sizeof(version), 200,
			"{\"Version\":\"29.0.0\",\"ApiVersion\":\"1.52\",\"MinAPIVersion\":\"1.44\"}") },
		{ "POST /v1.47/containers/x/start ", "HTTP/1.1 204 No Content\r\n\r\n" },
		{ NULL, NULL },
	};
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;

	fake_start(&f, routes);
	client_for(&dc, &f, 2, 0);
	assert_int_equal(docker_container_start(&dc, "x", &e), ERR_STATE); /* not negotiated */
	assert_int_equal(docker_client_negotiate(&dc, &e), 0);
	assert_string_equal(dc.version, "1.47");
	assert_int_equal(dc.minor, 47);
	assert_int_equal(docker_container_start(&dc, "x", &e), 0);
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_refuses_an_engine_whose_minimum_is_above_ours(void **state)
{
	static char version[256];
	const struct route routes[] = {
		{ "GET /_ping ", PING("1.53") },
		{ "GET /version ", json_response(version, sizeof(version), 200,
			"{\"Version\":\"30.0.0\",\"ApiVersion\":\"1.53\",\"MinAPIVersion\":\"1.50\"}") },
		{ NULL, NULL },
	};
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	char text[1024];

	fake_start(&f, routes);
	client_for(&dc, &f, 2, 0);
	assert_int_equal(docker_client_negotiate(&dc, &e), DOCKER_ERR_VERSION);
	assert_string_equal(dc.version, "");
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "1.50"));
	assert_non_null(strstr(text, "1.41 to 1.47"));
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_refuses_an_engine_older_than_1_41(void **state)
{
	static char version[256];
	const struct route routes[] = {
		{ "GET /_ping ", PING("1.40") },
		{ "GET /version ", json_response(version, sizeof(version), 200,
			"{\"Version\":\"19.03\",\"ApiVersion\":\"1.40\",\"MinAPIVersion\":\"1.12\"}") },
		{ NULL, NULL },
	};
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	char text[1024];

	fake_start(&f, routes);
	client_for(&dc, &f, 2, 0);
	assert_int_equal(docker_client_negotiate(&dc, &e), DOCKER_ERR_VERSION);
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "1.40"));
	assert_non_null(strstr(text, "upgrade"));
	docker_client_free(&dc);
	fake_stop(&f);
}

/* An engine of API 1.41 (Docker 20.10); bodies get their Content-Length computed. */
static struct route engine_141[9];

static const struct route *engine_141_routes(void)
{
	static char r[8][512];
	const struct route routes[] = {
		{ "GET /_ping ", PING("1.41") },
		{ "GET /version ", json_response(r[0], 512, 200,
			"{\"Version\":\"20.10\",\"ApiVersion\":\"1.41\",\"MinAPIVersion\":\"1.12\"}") },
		{ "POST /v1.41/containers/create?name=sbx-1 ", json_response(r[1], 512, 201,
			"{\"Id\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
			"\"Warnings\":[]}") },
		{ "POST /v1.41/containers/create?name=taken ", json_response(r[2], 512, 409,
			"{\"message\":\"Conflict. The container name \\\"/taken\\\" is already in use "
			"by container \\\"abc\\\".\"}") },
		{ "POST /v1.41/containers/create?name=noimage ", json_response(r[3], 512, 404,
			"{\"message\":\"No such image: agentic/none:local\"}") },
		{ "POST /v1.41/networks/create ", json_response(r[4], 512, 201,
			"{\"Id\":\"fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210\","
			"\"Warning\":\"\"}") },
		{ "GET /v1.41/networks?filters=", json_response(r[5], 512, 200, "[]") },
		{ "GET /v1.41/containers/sbx%2F..%2Fx/json ", json_response(r[6], 512, 404,
			"{\"message\":\"No such container: sbx/../x\"}") },
		{ NULL, NULL },
	};
	memcpy(engine_141, routes, sizeof(routes));
	return engine_141;
}

static void negotiated(struct docker_client *dc, struct fake *f, uint32_t conns, uint32_t limit)
{
	struct docker_error e;
	client_for(dc, f, conns, limit);
	assert_int_equal(docker_client_negotiate(dc, &e), 0);
	assert_string_equal(dc->version, "1.41");
}

static const char *body_of(const char *request)
{
	const char *b = strstr(request, "\r\n\r\n");
	assert_non_null(b);
	return b + 4;
}

static void test_docker_container_create_sends_the_hardened_host_config(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	char id[DOCKER_ID_SIZE];
	const struct docker_container_spec spec = {
		.name = "sbx-1",
		.image = "agentic/base:local",
		.user = "0:0",
		.entrypoint = (const char *[]){ "/sbin/agentic-init", NULL },
		.env = (const char *[]){ "AGENT_ID=sbx-1", NULL },
		.labels = (const struct docker_kv[]){ { "agentic-sandbox", "true" }, { NULL, NULL } },
		.cap_drop = (const char *[]){ "ALL", NULL },
		.cap_add = (const char *[]){ "SETUID", "SETGID", NULL },
		.security_opt = (const char *[]){ "no-new-privileges",
						  "seccomp={\"defaultAction\":\"SCMP_ACT_ERRNO\"}", NULL },
		.tmpfs = (const struct docker_kv[]){
			{ "/run/agentic", "rw,noexec,nosuid,nodev,mode=0700,uid=200000,gid=200000,size=64k" },
			{ NULL, NULL } },
		.sysctls = (const struct docker_kv[]){ { "net.ipv6.conf.all.disable_ipv6", "1" },
						       { NULL, NULL } },
		.mounts = (const struct docker_mount[]){ { "/run/agentic/agent", "/run/agentic-sandbox", true },
							 { NULL, NULL, false } },
		.dns = (const char *[]){ "127.0.0.1", NULL },
		.dns_search = (const char *[]){ ".", NULL },
		.network_mode = "agentic-net-0123456789ab",
		.pids_limit = 512,
		.memory = 1073741824,
		.nano_cpus = 1000000000,
		.readonly_rootfs = false,
	};

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 2, 0);
	assert_int_equal(docker_container_create(&dc, &spec, id, &e), 0);
	assert_string_equal(id, "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef");
	assert_non_null(strstr(f.last, "Host: docker\r\n"));
	assert_non_null(strstr(f.last, "Content-Type: application/json\r\n"));
	assert_string_equal(body_of(f.last),
		"{\"Image\":\"agentic/base:local\",\"User\":\"0:0\","
		"\"Entrypoint\":[\"/sbin/agentic-init\"],\"Env\":[\"AGENT_ID=sbx-1\"],"
		"\"Labels\":{\"agentic-sandbox\":\"true\"},\"HostConfig\":{"
		"\"CapDrop\":[\"ALL\"],\"CapAdd\":[\"SETUID\",\"SETGID\"],"
		"\"SecurityOpt\":[\"no-new-privileges\","
		"\"seccomp={\\\"defaultAction\\\":\\\"SCMP_ACT_ERRNO\\\"}\"],"
		"\"Tmpfs\":{\"/run/agentic\":\"rw,noexec,nosuid,nodev,mode=0700,uid=200000,gid=200000,size=64k\"},"
		"\"Sysctls\":{\"net.ipv6.conf.all.disable_ipv6\":\"1\"},"
		"\"Mounts\":[{\"Type\":\"bind\",\"Source\":\"/run/agentic/agent\","
		"\"Target\":\"/run/agentic-sandbox\",\"ReadOnly\":true}],"
		"\"Dns\":[\"127.0.0.1\"],\"DnsSearch\":[\".\"],"
		"\"NetworkMode\":\"agentic-net-0123456789ab\",\"PidsLimit\":512,"
		"\"Memory\":1073741824,\"NanoCpus\":1000000000,\"RestartPolicy\":{\"Name\":\"no\"},"
		"\"ReadonlyRootfs\":false,\"Init\":false,\"Privileged\":false}}");
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_network_create_sends_internal_subnet_and_options(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	char id[DOCKER_ID_SIZE];
	const struct docker_network_spec spec = {
		.name = "agentic-net-0123456789ab",
		.internal = true,
		.subnet = "10.213.0.16/28",
		.labels = (const struct docker_kv[]){ { "agentic-sandbox", "true" }, { NULL, NULL } },
		.options = (const struct docker_kv[]){
			{ "com.docker.network.bridge.inhibit_ipv4", "true" }, { NULL, NULL } },
	};

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 2, 0);
	assert_int_equal(docker_network_create(&dc, &spec, id, &e), 0);
	assert_string_equal(body_of(f.last),
		"{\"Name\":\"agentic-net-0123456789ab\",\"CheckDuplicate\":true,\"Driver\":\"bridge\","
		"\"Internal\":true,\"IPAM\":{\"Driver\":\"default\",\"Config\":[{\"Subnet\":"
		"\"10.213.0.16/28\"}]},\"Options\":{\"com.docker.network.bridge.inhibit_ipv4\":"
		"\"true\"},\"Labels\":{\"agentic-sandbox\":\"true\"}}");
	docker_client_free(&dc);
	fake_stop(&f);
}

static int count_summary(void *ctx, const struct docker_summary *s)
{
	(*(int *)ctx)++;
	return 0;
}

static void test_docker_ids_and_filters_are_escaped_in_the_target(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	static struct docker_container ci;
	struct docker_call c;
	int n = 0;

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 2, 0);
	assert_int_equal(docker_container_inspect(&dc, "sbx/../x", &ci, &e), DOCKER_ERR_API);
	assert_int_equal(e.status, 404);
	assert_int_equal(docker_network_list_begin(&c, &dc, "agentic-test=a b&c"), 0);
	assert_int_equal(docker_call_run(&c), 0);
	assert_int_equal(docker_result_each(&c, count_summary, &n), 0);
	docker_call_end(&c);
	assert_int_equal(n, 0);
	assert_non_null(strstr(f.last, "GET /v1.41/networks?filters=%7B%22label%22%3A%5B%22"
				       "agentic-test%3Da%20b%26c%22%5D%7D HTTP/1.1\r\n"));
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_errors_say_what_to_do(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	char id[DOCKER_ID_SIZE], text[1024];
	struct docker_container_spec spec = { .name = "noimage", .image = "agentic/none:local" };

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 2, 0);
	assert_int_equal(docker_container_create(&dc, &spec, id, &e), DOCKER_ERR_API);
	assert_int_equal(e.status, 404);
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "image agentic/none:local is not present locally"));
	assert_non_null(strstr(text, "docker load"));

	spec.name = "taken";
	assert_int_equal(docker_container_create(&dc, &spec, id, &e), DOCKER_ERR_API);
	assert_int_equal(e.status, 409);
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "container create taken: conflicts"));
	assert_non_null(strstr(text, "\"/taken\" is already in use"));
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_unreachable_engine_names_the_socket(void **state)
{
	struct docker_client dc;
	struct docker_client_config cfg = { .docker_host = "unix:///tmp/agentic-test-none.sock" };
	struct docker_error e;
	char text[1024];

	assert_int_equal(docker_client_init(&dc, &cfg), 0);
	assert_int_equal(docker_client_negotiate(&dc, &e), HTTP_ERR_CONNECT);
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "/tmp/agentic-test-none.sock"));
	assert_non_null(strstr(text, "No such file or directory"));
	docker_client_free(&dc);

	cfg.docker_host = "tcp://127.0.0.1:2375";
	assert_int_equal(docker_client_init(&dc, &cfg), -EINVAL);
}

static void test_docker_answer_over_the_limit_is_an_error_not_a_truncation(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_error e;
	struct docker_info info;
	char text[1024];

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 1, LIMIT_DOCKER_REQUEST_BYTES);
	f.big = LIMIT_DOCKER_REQUEST_BYTES + 1;
	assert_int_equal(docker_info(&dc, &info, &e), DOCKER_ERR_TOO_BIG);
	docker_error_text(&e, text, sizeof(text));
	assert_non_null(strstr(text, "response limit"));
	docker_client_free(&dc);
	fake_stop(&f);
}

/* agenticd refuses engines whose uids are not the host's: /info must reveal them. */
static void test_docker_info_reveals_userns_remap_and_docker_desktop(void **state)
{
	static char r[4][768];
	static struct fake f;
	static struct route routes[4];
	static const char *const bodies[][2] = {
		{ "{\"OperatingSystem\":\"Debian GNU/Linux 12 (bookworm)\",\"SecurityOptions\":"
		  "[\"name=apparmor\",\"name=seccomp,profile=builtin\"]}", "plain" },
		{ "{\"OperatingSystem\":\"Debian GNU/Linux 12 (bookworm)\",\"SecurityOptions\":"
		  "[\"name=seccomp,profile=builtin\",\"name=userns\"]}", "userns" },
		{ "{\"OperatingSystem\":\"Docker Desktop\",\"SecurityOptions\":[]}", "desktop" },
	};
	struct docker_client dc;
	struct docker_error e;
	struct docker_info info;

	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		routes[0] = (struct route){ "GET /_ping ", PING("1.41") };
		routes[1] = (struct route){ "GET /version ", json_response(r[0], 768, 200,
			"{\"Version\":\"20.10\",\"ApiVersion\":\"1.41\",\"MinAPIVersion\":\"1.12\"}") };
		routes[2] = (struct route){ "GET /v1.41/info ", json_response(r[1 + i], 768, 200,
									  bodies[i][0]) };
		routes[3] = (struct route){ NULL, NULL };
		fake_start(&f, routes);
		negotiated(&dc, &f, 1, 0);
		assert_int_equal(docker_info(&dc, &info, &e), 0);
		assert_int_equal(info.userns_remap, strcmp(bodies[i][1], "userns") == 0);
		assert_int_equal(info.docker_desktop, strcmp(bodies[i][1], "desktop") == 0);
		docker_client_free(&dc);
		fake_stop(&f);
	}
}

/* Docker Desktop, from a recorded /info of Desktop 4.x: agenticd runs there only as a
 * container of that engine, on the VM's kernel; a process beside the VM is refused. */
static void test_docker_desktop_inside_the_vm_runs_and_outside_is_refused(void **state)
{
	static char r[2][1024];
	static struct fake f;
	static struct route routes[4];
	static const char desktop[] =
		"{\"ID\":\"c1b1d6b0-3b4e-4c39-a1a8-5d0e1f4f7a21\",\"Name\":\"docker-desktop\","
		"\"ServerVersion\":\"27.3.1\",\"OperatingSystem\":\"Docker Desktop\","
		"\"OSType\":\"linux\",\"Architecture\":\"x86_64\","
		"\"KernelVersion\":\"6.10.14-linuxkit\",\"SecurityOptions\":"
		"[\"name=seccomp,profile=unconfined\",\"name=cgroupns\"]}";
	struct docker_client dc;
	struct docker_error e;
	struct docker_info info;

	routes[0] = (struct route){ "GET /_ping ", PING("1.41") };
	routes[1] = (struct route){ "GET /version ", json_response(r[0], 1024, 200,
		"{\"Version\":\"27.3.1\",\"ApiVersion\":\"1.47\",\"MinAPIVersion\":\"1.24\"}") };
	routes[2] = (struct route){ "GET /v1.41/info ", json_response(r[1], 1024, 200, desktop) };
	routes[3] = (struct route){ NULL, NULL };
	fake_start(&f, routes);
	negotiated(&dc, &f, 1, 0);
	assert_int_equal(docker_info(&dc, &info, &e), 0);
	assert_true(info.docker_desktop);
	assert_string_equal(info.kernel_version, "6.10.14-linuxkit");
	/* inside: a container of that engine sees the VM's kernel */
	assert_int_equal(host_engine_place(&info, "6.10.14-linuxkit", true), ENGINE_DESKTOP_VM);
	/* outside: on the Mac or Windows side, or a Linux host next to Desktop's VM */
	assert_int_equal(host_engine_place(&info, "24.1.0", false), ENGINE_DESKTOP_OUTSIDE);
	assert_int_equal(host_engine_place(&info, "6.1.0-28-amd64", true), ENGINE_DESKTOP_OUTSIDE);
	/* the same kernel but not in a container: not a container of that engine */
	assert_int_equal(host_engine_place(&info, "6.10.14-linuxkit", false),
			 ENGINE_DESKTOP_OUTSIDE);
	/* an engine that names no kernel proves nothing */
	info.kernel_version[0] = '\0';
	assert_int_equal(host_engine_place(&info, "", true), ENGINE_DESKTOP_OUTSIDE);
	/* a Linux engine: the host agenticd, in a container or not */
	info.docker_desktop = false;
	assert_int_equal(host_engine_place(&info, "6.1.0-28-amd64", false), ENGINE_LINUX);
	assert_int_equal(host_engine_place(&info, "6.1.0-28-amd64", true), ENGINE_LINUX);
	docker_client_free(&dc);
	fake_stop(&f);
}

static void test_docker_pool_refuses_a_call_beyond_its_connections(void **state)
{
	static struct fake f;
	struct docker_client dc;
	struct docker_call a, b;

	fake_start(&f, engine_141_routes());
	negotiated(&dc, &f, 1, 0);
	assert_int_equal(docker_info_begin(&a, &dc), 0);
	assert_int_equal(docker_info_begin(&b, &dc), DOCKER_ERR_BUSY);
	docker_call_end(&b);
	docker_call_end(&a);
	assert_int_equal(docker_info_begin(&b, &dc), 0);
	docker_call_end(&b);
	docker_client_free(&dc);
	fake_stop(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_docker_demux_same_at_every_split),
		cmocka_unit_test(test_docker_demux_refuses_a_raw_stream),
		cmocka_unit_test(test_docker_splitter_same_at_every_split),
		cmocka_unit_test(test_docker_splitter_cuts_a_long_command_line_and_keeps_the_event),
		cmocka_unit_test(test_docker_splitter_skips_an_oversized_event_and_goes_on),
		cmocka_unit_test(test_docker_version_pick_takes_the_lower_and_refuses_outside_the_range),
		cmocka_unit_test(test_docker_negotiates_down_to_1_47),
		cmocka_unit_test(test_docker_refuses_an_engine_whose_minimum_is_above_ours),
		cmocka_unit_test(test_docker_refuses_an_engine_older_than_1_41),
		cmocka_unit_test(test_docker_container_create_sends_the_hardened_host_config),
		cmocka_unit_test(test_docker_network_create_sends_internal_subnet_and_options),
		cmocka_unit_test(test_docker_ids_and_filters_are_escaped_in_the_target),
		cmocka_unit_test(test_docker_errors_say_what_to_do),
		cmocka_unit_test(test_docker_unreachable_engine_names_the_socket),
		cmocka_unit_test(test_docker_answer_over_the_limit_is_an_error_not_a_truncation),
		cmocka_unit_test(test_docker_info_reveals_userns_remap_and_docker_desktop),
		cmocka_unit_test(test_docker_desktop_inside_the_vm_runs_and_outside_is_refused),
		cmocka_unit_test(test_docker_pool_refuses_a_call_beyond_its_connections),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
