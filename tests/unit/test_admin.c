/* test_admin.c: the admin HTTP API without a Docker engine: the route table, the request
 * validator (one set of rules and words for the HTTP and the gRPC exec paths), and whole
 * requests fed as bytes to a connection of a daemon that has a sandbox table and no engine:
 * every answer carries the status, code and words of its path, and a Content-Length that is
 * its body's. */
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
#include <sys/un.h>
#include <unistd.h>

#include "admin/admin.h"
#include "daemon/daemon.h"
#include "sandbox/request.h"
#include "lifecycle/taint.h"

#define NSB 4
#define NCONNS 2

static struct daemon d;
static struct sandbox table[NSB];
static struct admin_conn conns[NCONNS];
static uint64_t uid_bits[(600000 + 63) / 64], subnet_bits[(4096 + 63) / 64];
static uint64_t foreign_bits[(4096 + 63) / 64];
static char sock_path[108];
static int admin_fd = -1;

static struct sandbox *put_sandbox(int i, const char *name, enum sb_state state)
{
	struct sandbox *sb = &table[i];

	sb->state = state;
	snprintf(sb->name, sizeof(sb->name), "%s", name);
	sb->subnet = -1;
	sb->init_pidfd = -1;
	sb->waiter = -1;
	return sb;
}

static int setup(void **state)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };

	memset(&d, 0, sizeof(d));
	memset(table, 0, sizeof(table));
	memset(conns, 0, sizeof(conns));
	config_defaults(&d.cfg);
	sandbox_table_init(&d.cfg, table, NSB, uid_bits);
	subnet_init(&d.cfg, subnet_bits, foreign_bits);
	d.epfd = epoll_create1(EPOLL_CLOEXEC);
	snprintf(sock_path, sizeof(sock_path), "/tmp/test_admin.%d.sock", (int)getpid());
	unlink(sock_path);
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	admin_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	assert_int_equal(bind(admin_fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(admin_fd, 8), 0);
	admin_init(&(struct admin_config){ .cfg = &d.cfg, .conns = conns, .nconns = NCONNS,
					   .epfd = d.epfd, .engine_version = "", .api_version = "",
					   .pool = &d.pool });
	for (int i = 0; i < NCONNS; i++)
		conns[i].spill_fd = conns[i].file_fd = -1;
	agenticd = &d; /* agenticd_watch, the loop's */
	admin_listen(admin_fd);
	put_sandbox(0, "alpha", SB_READY);
	put_sandbox(1, "beta", SB_CREATING);
	return 0;
}

static int teardown(void **state)
{
	for (int i = 0; i < NCONNS; i++)
		if (conns[i].phase != AC_FREE)
			admin_conn_close(&conns[i]);
	close(admin_fd);
	close(d.epfd);
	unlink(sock_path);
	return 0;
}

static int client(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

static int conn_of_last_accept(void)
{
	for (int i = 0; i < NCONNS; i++)
		if (conns[i].phase == AC_READ)
			return i;
	return -1;
}

/* Reads until the peer closes (or 2 s without a byte). */
static size_t read_all(int fd, char *out, size_t cap)
{
	size_t n = 0;

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, 2000) <= 0)
			break;
		r = read(fd, out + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	out[n] = '\0';
	return n;
}

struct answer {
	int status;
	char text[65536];   /* head and body */
	const char *body;
	long declared;      /* Content-Length, -1 when none */
	size_t body_len;
};

/* One request (raw bytes, Connection: close) through accept, the parser and the route table. */
static void exchange(const char *req, struct answer *a)
{
	int fd = client(), i;
	size_t n;
	const char *cl;

	admin_accept();
	i = conn_of_last_accept();
	assert_true(i >= 0);
	assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
	admin_event((uint32_t)i, EPOLLIN);
	n = read_all(fd, a->text, sizeof(a->text));
	close(fd);
	assert_true(n > 12);
	a->status = atoi(a->text + 9);
	a->body = strstr(a->text, "\r\n\r\n");
	assert_non_null(a->body);
	a->body += 4;
	a->body_len = n - (size_t)(a->body - a->text);
	cl = strcasestr(a->text, "\r\nContent-Length: ");
	a->declared = cl && cl < a->body ? atol(cl + 18) : -1;
	/* the answer is complete: the connection is free again */
	if (conns[i].phase != AC_FREE)
		admin_conn_close(&conns[i]);
}

static void request(const char *method, const char *path, const char *body, struct answer *a)
{
	static char req[40000];

	snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		 "Content-Length: %zu\r\n\r\n%s", method, path, strlen(body), body);
	exchange(req, a);
}

/* status, the error code (NULL: not an error) and a piece of the message, with a
 * Content-Length that is the body's */
static void expect(struct answer *a, int status, const char *code, const char *words)
{
	char want[128];

	if (a->status != status)
		fail_msg("status %d, want %d: %s", a->status, status, a->text);
	if (a->declared >= 0 && (size_t)a->declared != a->body_len)
		fail_msg("Content-Length %ld, body %zu bytes: %s", a->declared, a->body_len, a->text);
	if (code) {
		snprintf(want, sizeof(want), "{\"error\":{\"code\":\"%s\",\"message\":\"", code);
		if (strncmp(a->body, want, strlen(want)) != 0)
			fail_msg("want code %s: %s", code, a->body);
	}
	if (words && !strstr(a->body, words))
		fail_msg("want \"%s\" in: %s", words, a->body);
}

/* ---- the route table ---- */

static void test_route_table_finds_each_route_and_its_name(void **state)
{
	static const struct {
		const char *method, *path, *name;
		int want;
		const char *allow;
	} cases[] = {
		{ "GET", "/api/v1/containers", "", 0, "" },
		{ "POST", "/api/v1/containers", "", 0, "" },
		{ "GET", "/api/v1/containers/", "", 0, "" },
		{ "GET", "/api/v1/containers/alpha", "alpha", 0, "" },
		{ "DELETE", "/api/v1/containers/alpha", "alpha", 0, "" },
		{ "POST", "/api/v1/containers/alpha/exec", "alpha", 0, "" },
		{ "GET", "/api/v1/containers/alpha/logs", "alpha", 0, "" },
		{ "GET", "/api/v1/containers/alpha/posture", "alpha", 0, "" },
		{ "POST", "/api/v1/containers/alpha/posture/taints", "alpha", 0, "" },
		{ "POST", "/api/v1/containers/alpha/posture", "", 405, "GET" },
		{ "GET", "/api/v1/containers/alpha/posture/taints", "", 405, "POST" },
		{ "GET", "/api/v1/info", "", 0, "" },
		{ "GET", "/metrics", "", 0, "" },
		{ "PUT", "/api/v1/containers", "", 405, "GET, POST" },
		{ "POST", "/api/v1/containers/alpha", "", 405, "GET, DELETE" },
		{ "GET", "/api/v1/containers/alpha/exec", "", 405, "POST" },
		{ "POST", "/metrics", "", 405, "GET" },
		{ "GET", "/api/v2/nothing", "", 404, "" },
		{ "GET", "/api/v1/containers/alpha/", "", 404, "" },
		{ "GET", "/api/v1/containers//exec", "", 404, "" },
		{ "GET", "/api/v1/containers/alpha/exec/x", "", 404, "" },
		{ "GET", "/api/v1/info/", "", 404, "" },
		{ "GET", "/metricsx", "", 404, "" },
	};
	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		const struct admin_route *r = NULL;
		char name[128], allow[64];
		int got = admin_route_find(cases[i].method, cases[i].path, &r, name, sizeof(name),
					   allow, sizeof(allow));

		if (got != cases[i].want || strcmp(name, cases[i].name) != 0 ||
		    strcmp(allow, cases[i].allow) != 0)
			fail_msg("%s %s: %d name=%s allow=%s", cases[i].method, cases[i].path, got,
				 name, allow);
		if (got == 0 && (strcmp(r->method, cases[i].method) != 0 || !r->handler))
			fail_msg("%s %s: route %s %s", cases[i].method, cases[i].path, r->method,
				 r->path);
	}
}

/* ---- the validator ---- */

/* The same exec, carried as JSON (HTTP) and as parts (gRPC), is refused in the same words. */
static void test_exec_rules_and_words_are_the_same_for_json_and_parts(void **state)
{
	static const struct {
		const char *json;
		const char *args[3];      /* the program first; NULL ends */
		const char *env_key, *env_value;
		const char *working_dir;
		int32_t timeout;
		int status;
		const char *words;
	} cases[] = {
		{ "{\"cmd\":[]}", { NULL }, NULL, NULL, NULL, 0, 400, "cmd needs at least the program" },
		{ "{\"cmd\":[\"\"]}", { "" }, NULL, NULL, NULL, 0, 400, "cmd needs at least the program" },
		{ "{\"cmd\":[\"ls\"],\"working_dir\":\"tmp\"}", { "ls" }, NULL, NULL, "tmp", 0, 400,
		  "working_dir is an absolute path" },
		{ "{\"cmd\":[\"ls\"],\"timeout_seconds\":-1}", { "ls" }, NULL, NULL, NULL, -1, 400,
		  "timeout_seconds is a whole number >= 0" },
		{ "{\"cmd\":[\"ls\"],\"timeout_seconds\":31536001}", { "ls" }, NULL, NULL, NULL,
		  31536001, 400, "timeout_seconds is a whole number >= 0" },
		{ "{\"cmd\":[\"ls\"],\"env\":{\"AGENT_X\":\"1\"}}", { "ls" }, "AGENT_X", "1", NULL, 0,
		  422, "env keys starting with AGENT_ are the init's own" },
		{ "{\"cmd\":[\"ls\"],\"env\":{\"A=B\":\"1\"}}", { "ls" }, "A=B", "1", NULL, 0, 400,
		  "env keys may not hold '='" },
		{ "{\"cmd\":[\"ls\"],\"env\":{\"\":\"1\"}}", { "ls" }, "", "1", NULL, 0, 400,
		  "env entries are KEY=VALUE with a non-empty KEY" },
		{ "{\"cmd\":[\"ls\",\"-l\"],\"env\":{\"K\":\"v\"},\"working_dir\":\"/w\","
		  "\"timeout_seconds\":5}", { "ls", "-l" }, "K", "v", "/w", 5, 0, NULL },
	};
	static char text[LIMIT_ADMIN_BODY_BYTES];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct request_text t = { text, 0, sizeof(text) };
		struct request_error ej = { 0 }, ep = { 0 };
		struct exec_req a, b;
		int rj, rp = 0;

		rj = request_exec_parse(&a, &t, cases[i].json, strlen(cases[i].json), &ej);
		memset(&b, 0, sizeof(b));
		for (int k = 0; rp == 0 && k < 3 && cases[i].args[k]; k++)
			rp = request_exec_arg(&b, cases[i].args[k], &ep);
		if (rp == 0 && cases[i].env_key)
			rp = request_exec_env(&b, &t, cases[i].env_key, cases[i].env_value, &ep);
		b.working_dir = cases[i].working_dir;
		b.timeout_seconds = cases[i].timeout;
		if (rp == 0)
			rp = request_exec_check(&b, &ep);
		if (!cases[i].status) {
			assert_int_equal(rj, 0);
			assert_int_equal(rp, 0);
			assert_int_equal(a.argc, 2);
			assert_string_equal(a.argv[1], "-l");
			assert_string_equal(a.env[0], "K=v");
			assert_string_equal(b.env[0], "K=v");
			assert_string_equal(a.working_dir, "/w");
			assert_int_equal(a.timeout_seconds, 5);
			continue;
		}
		if (rj == 0 || rp == 0 || ej.status != cases[i].status || ep.status != ej.status ||
		    strcmp(ej.message, ep.message) != 0 || !strstr(ej.message, cases[i].words))
			fail_msg("case %zu: json %d %d \"%s\", parts %d %d \"%s\"", i, rj, ej.status,
				 ej.message, rp, ep.status, ep.message);
	}
}

static void test_exec_refuses_more_args_than_the_limit_both_ways(void **state)
{
	static char json[8192], text[LIMIT_ADMIN_BODY_BYTES];
	struct request_text t = { text, 0, sizeof(text) };
	struct request_error ej = { 0 }, ep = { 0 };
	struct exec_req a, b;
	size_t n = (size_t)snprintf(json, sizeof(json), "{\"cmd\":[\"ls\"");
	int rp = 0;

	memset(&b, 0, sizeof(b));
	for (int i = 0; i < LIMIT_SANDBOX_CMD_ARGS; i++)
		n += (size_t)snprintf(json + n, sizeof(json) - n, ",\"a\"");
	snprintf(json + n, sizeof(json) - n, "]}");
	assert_int_equal(request_exec_parse(&a, &t, json, strlen(json), &ej), -1);
	for (int i = 0; rp == 0 && i <= LIMIT_SANDBOX_CMD_ARGS; i++)
		rp = request_exec_arg(&b, "a", &ep);
	assert_int_equal(rp, -1);
	assert_int_equal(b.argc, LIMIT_SANDBOX_CMD_ARGS);
	assert_string_equal(ej.message, ep.message);
	assert_string_equal(ej.message, "cmd is an array of at most 64 strings");
}

/* "tty", "rows", "cols": a tty exec's terminal; bad values refused in words. */
static void test_exec_tty_fields(void **state)
{
	static const struct {
		const char *json;
		int ok;
		bool tty;
		uint16_t rows, cols;
	} cases[] = {
		{ "{\"cmd\":[\"sh\"],\"tty\":true,\"rows\":33,\"cols\":111}", 1, true, 33, 111 },
		{ "{\"cmd\":[\"sh\"],\"tty\":false}", 1, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":true,\"rows\":65535,\"cols\":0}", 1, true, 65535, 0 },
		{ "{\"cmd\":[\"sh\"]}", 1, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":1}", 0, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":\"yes\"}", 0, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":true,\"rows\":65536}", 0, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":true,\"cols\":-1}", 0, false, 0, 0 },
		{ "{\"cmd\":[\"sh\"],\"tty\":true,\"cols\":2.5}", 0, false, 0, 0 },
	};
	static char text[LIMIT_ADMIN_BODY_BYTES];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct request_text t = { text, 0, sizeof(text) };
		struct request_error e = { 0 };
		struct exec_req a;
		int r = request_exec_parse(&a, &t, cases[i].json, strlen(cases[i].json), &e);

		if (!cases[i].ok) {
			if (r != -1 || e.status != 400 || !(strstr(e.message, "tty is true or false") ||
							    strstr(e.message, "rows and cols")))
				fail_msg("case %zu: %d %d \"%s\"", i, r, e.status, e.message);
			continue;
		}
		assert_int_equal(r, 0);
		assert_int_equal(a.tty, cases[i].tty);
		assert_int_equal(a.rows, cases[i].rows);
		assert_int_equal(a.cols, cases[i].cols);
	}
}

static void test_create_parse_refusals(void **state)
{
	static const struct {
		const char *json;
		int status;
		const char *code, *words;
	} cases[] = {
		{ "{\"name\":", 400, "bad_json", "the body is not valid JSON" },
		{ "[]", 400, "bad_request", "the body is a JSON object" },
		{ "{\"nmae\":\"x1\"}", 400, "bad_request", "unknown field nmae" },
		/* a name no field could have is not echoed: it may be a secret */
		{ "{\"sk-ant-api03-AbCdEf\":\"x1\"}", 400, "bad_request", "unknown field (known: name" },
		{ "{\"name\":\"Bad_Name\"}", 400, "bad_name", "a sandbox name matches" },
		{ "{\"labels\":{\"agentic-x\":\"1\"}}", 422, "refused", "are reserved" },
		{ "{\"env\":[\"AGENT_CONTROL_UID=0\"]}", 422, "refused", "AGENT_" },
		{ "{\"env\":[\"NOEQUALS\"]}", 400, "bad_request", "KEY=VALUE" },
		{ "{\"cmd\":\"ls\"}", 400, "bad_request", "cmd is an array of strings" },
		{ "{\"disk_bytes\":1}", 400, "bad_request", "disk_bytes is a whole number" },
		{ "{\"mounts\":[\"nocolon\"]}", 400, "bad_request", "mounts are" },
		{ "{\"mounts\":[\"/nonexistent-src-for-test:/d\"]}", 422, "refused", "mount source" },
		{ "{\"require_tier\":\"T2\"}", 400, "bad_request", "require_tier is" },
		{ "{\"resources\":{\"memory\":0}}", 400, "bad_request", "resources.memory" },
		{ "{\"resources\":{\"memory\":1024}}", 400, "bad_request", "from 33554432 (32 MiB" },
		{ "{\"resources\":{\"pids\":-1}}", 400, "bad_request", ".pids" },
		{ "{\"resources\":{\"pids\":4}}", 400, "bad_request", "resources.pids is" },
		{ "{\"resources\":{\"cpus\":0}}", 400, "bad_request", "resources.cpus" },
		{ "{\"resources\":{\"cpus\":100000}}", 400, "bad_request", "resources.cpus" },
		{ "{\"resources\":{\"cpus\":\"1e3\"}}", 400, "bad_request", "resources.cpus" },
		{ "{\"resources\":{\"swap\":1}}", 400, "bad_request", "unknown field in resources" },
		{ "{\"resources\":[]}", 400, "bad_request", "resources is an object" },
		{ "{\"profile\":\"Bad Id\"}", 400, "bad_request", "profile is a profile id" },
		{ "{\"profile\":\"dev\"}", 422, "profile_unknown", "no startup profile has the id dev" },
		{ "{\"startup_profile_id\":\"dev\"}", 400, "bad_request", "unknown field" },
	};
	static struct create_req req;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct request_error e = { 0 };

		if (request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V1, cases[i].json,
					 strlen(cases[i].json), &e) == 0 ||
		    e.status != cases[i].status || strcmp(e.code, cases[i].code) != 0 ||
		    !strstr(e.message, cases[i].words))
			fail_msg("%s: %d %s %s", cases[i].json, e.status, e.code, e.message);
	}
	{
		struct request_error e = { 0 };
		const char *ok = "{\"name\":\"a1\",\"env\":{\"K\":\"v\"},\"cmd\":[\"sh\",\"-c\",\"x\"],"
				 "\"labels\":{\"team\":\"x\"},\"writable_root\":true}";

		assert_int_equal(request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V1, ok, strlen(ok),
						      &e), 0);
		assert_string_equal(req.name, "a1");
		assert_string_equal(req.env[0], "K=v");
		assert_int_equal(req.ncmd, 3);
		assert_int_equal(req.nlabels, 1);
		assert_true(req.writable_root);
		assert_int_equal(request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V1, "", 0, &e), 0);
		assert_null(req.name);
		ok = "{\"require_tier\":\"T1\",\"resources\":{\"memory\":67108864,\"pids\":64,"
		     "\"cpus\":0.25,\"disk\":8388608}}";
		assert_int_equal(request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V1, ok, strlen(ok),
						      &e), 0);
		assert_true(req.require_t1);
		assert_int_equal(req.memory_bytes, 64u << 20);
		assert_int_equal(req.pids, 64);
		assert_int_equal(req.nano_cpus, 250000000);
		assert_int_equal(req.disk_bytes, 8u << 20);
		ok = "{\"resources\":{\"cpus\":\"0.5\"}}";
		assert_int_equal(request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V1, ok, strlen(ok),
						      &e), 0);
		assert_int_equal(req.nano_cpus, 500000000);
		assert_false(req.require_t1);
	}
}

/* admin-v2's body: a startup profile is required, env and cmd are the profile's alone, and
 * runtime is docker (the vm one is not in this build). */
static void test_create_parse_v2_fields(void **state)
{
	static const struct {
		const char *json;
		int status;
		const char *code, *words;
	} cases[] = {
		{ "{}", 400, "bad_request", "startup_profile_id is required" },
		{ "", 400, "bad_json", "not valid JSON" },
		{ "{\"startup_profile_id\":\"dev\",\"env\":{}}", 400, "bad_request", "unknown field env" },
		{ "{\"startup_profile_id\":\"dev\",\"cmd\":[]}", 400, "bad_request", "unknown field cmd" },
		{ "{\"profile\":\"dev\"}", 400, "bad_request", "unknown field profile" },
		{ "{\"startup_profile_id\":\"dev\"}", 422, "profile_unknown", "has the id dev" },
		{ "{\"startup_profile_id\":\"ghp_0123456789abcdefghijklmnopqrstuvwxyz\"}", 422,
		  "profile_unknown", "has that id" },
	};
	static struct create_req req;

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		struct request_error e = { 0 };

		if (request_create_parse(&req, &d.cfg, NULL, REQUEST_API_V2, cases[i].json,
					 strlen(cases[i].json), &e) == 0 ||
		    e.status != cases[i].status || strcmp(e.code, cases[i].code) != 0 ||
		    !strstr(e.message, cases[i].words))
			fail_msg("%s: %d %s %s", cases[i].json, e.status, e.code, e.message);
	}
}

/* ---- whole requests, as bytes ---- */

static void test_unknown_path_is_404_and_a_known_path_with_another_method_405_with_allow(void **state)
{
	static struct answer a;

	request("GET", "/api/v2/nothing", "", &a);
	expect(&a, 404, "not_found", "no route GET /api/v2/nothing");
	request("PUT", "/api/v1/containers", "", &a);
	expect(&a, 405, "method_not_allowed", "use GET or POST");
	assert_non_null(strstr(a.text, "\r\nAllow: GET, POST\r\n"));
	request("POST", "/api/v1/containers/alpha", "", &a);
	expect(&a, 405, "method_not_allowed", "use GET or DELETE");
	assert_non_null(strstr(a.text, "\r\nAllow: GET, DELETE\r\n"));
	/* the method is checked before the name: no sandbox needed for a 405 */
	request("GET", "/api/v1/containers/nope/exec", "", &a);
	expect(&a, 405, "method_not_allowed", "use POST");
	request("GET", "/api/v1/containers/nope/logs?run=x", "", &a);
	expect(&a, 404, "not_found", "no sandbox is named nope");
	exchange("GARBAGE\r\n\r\n", &a);
	expect(&a, 400, "bad_http", "malformed HTTP request");
}

static void test_sandbox_routes_answer_from_the_table(void **state)
{
	static struct answer a;

	request("GET", "/api/v1/containers/alpha", "", &a);
	expect(&a, 200, NULL, "\"name\":\"alpha\"");
	request("GET", "/api/v1/containers/nope", "", &a);
	expect(&a, 404, "not_found", "no sandbox is named nope");
	request("DELETE", "/api/v1/containers/beta?force=1", "", &a);
	expect(&a, 409, "busy", "the sandbox is still being created");
	request("GET", "/api/v1/containers", "", &a);
	expect(&a, 200, NULL, "\"name\":\"alpha\"");
	assert_non_null(strstr(a.text, "Transfer-Encoding: chunked"));
	assert_non_null(strstr(a.body, "\"name\":\"beta\""));
	assert_int_equal(strcmp(a.body + a.body_len - 5, "0\r\n\r\n"), 0);
	request("GET", "/api/v1/info", "", &a);
	expect(&a, 200, NULL, "\"sandboxes_ready\":1");
	request("GET", "/metrics", "", &a);
	expect(&a, 200, NULL, "agentic_sandboxes{state=\"creating\"} 1\n");
	assert_non_null(strstr(a.body, "agentic_sandboxes{state=\"ready\"} 1\n"));
	assert_non_null(strstr(a.body, "agentic_identity_rejections_total{reason="));
}

/* The posture route answers the name and the posture; an operator's taint is recorded once
 * (a second one is "already_held"), a word no operator may declare is 400 naming the ones
 * they may, a sandbox being created is 409; what is refused changes nothing. /metrics counts
 * the tiers and the taints. */
static void test_posture_routes_answer_record_and_refuse(void **state)
{
	static struct answer a;
	static const char *const refused[] = {
		"{\"reason\":\"nope\"}", "{\"reason\":\"network_unverified\"}",
		"{\"reason\":\"env_credential\"}", "{\"reason\":\"operator_network\"}",
		"{\"reason\":\"platform_compatibility\"}", "{\"reason\":7}",
	};
	const struct sandbox *alpha = sandbox_by_name("alpha"), *beta = sandbox_by_name("beta");

	request("GET", "/api/v1/containers/alpha/posture", "", &a);
	expect(&a, 200, NULL, "{\"name\":\"alpha\",\"posture\":{\"tier\":\"T0\"");
	for (size_t i = 0; i < ARRAY_LEN(refused); i++) {
		request("POST", "/api/v1/containers/alpha/posture/taints", refused[i], &a);
		expect(&a, 400, "bad_reason", "reason is one of: direct_docker_exec, network_attached, "
		       "container_changed, operator_declared");
	}
	request("POST", "/api/v1/containers/alpha/posture/taints", "{\"reason\":\"operator_declared\","
		"\"by\":\"me\"}", &a);
	expect(&a, 400, "bad_request", "one field, reason");
	request("POST", "/api/v1/containers/alpha/posture/taints", "{", &a);
	expect(&a, 400, "bad_json", NULL);
	assert_int_equal(alpha->posture.taints, 0);
	request("POST", "/api/v1/containers/beta/posture/taints", "{\"reason\":\"operator_declared\"}", &a);
	expect(&a, 409, "busy", "still being created");
	assert_int_equal(beta->posture.taints, 0);
	assert_int_equal(posture_taints_total(POSTURE_OPERATOR_DECLARED), 0);

	request("POST", "/api/v1/containers/alpha/posture/taints", "{\"reason\":\"operator_declared\"}", &a);
	expect(&a, 200, NULL, "\"reason\":\"operator_declared\",\"already_held\":false}");
	assert_int_equal(alpha->posture.taints, POSTURE_BIT(POSTURE_OPERATOR_DECLARED));
	assert_non_null(strstr(a.body, "\"taints\":[{\"reason\":\"operator_declared\",\"at\":"));
	request("POST", "/api/v1/containers/alpha/posture/taints", "{\"reason\":\"operator_declared\"}", &a);
	expect(&a, 200, NULL, "\"already_held\":true}");
	assert_int_equal(posture_taints_total(POSTURE_OPERATOR_DECLARED), 1);
	request("GET", "/api/v1/containers/alpha", "", &a);
	expect(&a, 200, NULL, "\"reasons\":[\"operator_declared\",\"network_unverified\"]");

	request("GET", "/metrics", "", &a);
	expect(&a, 200, NULL, "agentic_sandboxes{tier=\"T0\"} 2\nagentic_sandboxes{tier=\"T1\"} 0\n");
	assert_non_null(strstr(a.body, "agentic_posture_taints_total{reason=\"operator_declared\"} 1\n"));
	assert_non_null(strstr(a.body, "agentic_posture_taints_total{reason=\"direct_docker_exec\"} 0\n"));
	assert_null(strstr(a.body, "agentic_posture_taints_total{reason=\"network_unverified\"}"));
	assert_null(strstr(a.body, "agentic_posture_taints_total{reason=\"env_credential\"}"));
}

static void test_create_and_exec_refusals_through_the_socket(void **state)
{
	static struct answer a;

	request("POST", "/api/v1/containers", "{\"name\":", &a);
	expect(&a, 400, "bad_json", "not valid JSON");
	request("POST", "/api/v1/containers", "{\"name\":\"alpha\"}", &a);
	expect(&a, 409, "name_taken", "a sandbox with that name exists");
	request("POST", "/api/v1/containers", "{\"labels\":{\"agentic-sandbox\":\"false\"}}", &a);
	expect(&a, 422, "refused", "reserved");
	request("POST", "/api/v1/containers/alpha/exec", "{\"cmd\":[]}", &a);
	expect(&a, 400, "bad_request", "cmd needs at least the program");
	request("POST", "/api/v1/containers/alpha/exec", "nope", &a);
	expect(&a, 400, "bad_json", "the body is a JSON object");
	/* a valid exec on a sandbox whose agent is not connected */
	request("POST", "/api/v1/containers/alpha/exec", "{\"cmd\":[\"ls\"]}", &a);
	expect(&a, 409, "not_ready", "the sandbox's agent is not connected (yet)");
	request("POST", "/api/v1/containers/beta/exec", "{\"cmd\":[\"ls\"]}", &a);
	expect(&a, 409, "not_ready", "the sandbox is not ready");
	assert_int_equal(sandbox_live(), 0); /* nothing was created */
}

static void test_a_body_over_the_limit_is_413_and_closes(void **state)
{
	static struct answer a;
	static char body[LIMIT_ADMIN_BODY_BYTES + 100];

	memset(body, 'a', sizeof(body) - 1);
	request("POST", "/api/v1/containers", body, &a);
	expect(&a, 413, "too_large", "request body over 32768 bytes");
	assert_non_null(strstr(a.text, "Connection: close"));
}

static void test_no_connection_slot_left_is_a_whole_503(void **state)
{
	static struct answer a;
	int held[NCONNS], fd;
	size_t n;

	for (int i = 0; i < NCONNS; i++) {
		held[i] = client();
		admin_accept();
	}
	fd = client();
	admin_accept();
	n = read_all(fd, a.text, sizeof(a.text));
	close(fd);
	assert_true(n > 0);
	a.status = atoi(a.text + 9);
	a.body = strstr(a.text, "\r\n\r\n") + 4;
	a.body_len = n - (size_t)(a.body - a.text);
	a.declared = atol(strcasestr(a.text, "Content-Length: ") + 16);
	expect(&a, 503, "capacity", "too many admin connections (max_admin_connections)");
	for (int i = 0; i < NCONNS; i++)
		close(held[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_route_table_finds_each_route_and_its_name, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_rules_and_words_are_the_same_for_json_and_parts, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_refuses_more_args_than_the_limit_both_ways, setup, teardown),
		cmocka_unit_test_setup_teardown(test_exec_tty_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_parse_refusals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_parse_v2_fields, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_path_is_404_and_a_known_path_with_another_method_405_with_allow, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sandbox_routes_answer_from_the_table, setup, teardown),
		cmocka_unit_test_setup_teardown(test_posture_routes_answer_record_and_refuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_and_exec_refusals_through_the_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_body_over_the_limit_is_413_and_closes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_connection_slot_left_is_a_whole_503, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
