/* verify_cli.c: agentic-verify (also `agentic verify`): asks agenticd to verify sandboxes or a
 * container and prints the verdicts as lines, JSON or JUnit (docs/VERIFY.md). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "http/http.h"
#include "json/json.h"

#define DEFAULT_SOCKET "/run/agentic/admin.sock"
#define MAX_TARGETS 4096
/* exit status (of several targets the worst: rank) */
#define EXIT_PASS 0
#define EXIT_FAILED 1
#define EXIT_ERROR 2
#define EXIT_INCOMPLETE 3

const char verify_help[] =
	"usage: agentic-verify [--socket PATH] [--json] [--junit FILE]\n"
	"                      [--require-dedicated-agentshare] (NAME... | --all | --container ID)\n"
	"       agentic verify ...   (the same)\n"
	"\n"
	"Has agenticd check, from live engine and kernel state, that each sandbox NAME (every\n"
	"sandbox with --all) is what agentic says it is, or holds any container on the engine\n"
	"to the same bar (--container ID: the host-side checks; the inside ones need agentic's\n"
	"init). Prints `PASS|FAIL|INFO|SKIP AGV-NNN TITLE[: REASON]` per check and a summary line\n"
	"per target; --json the API's object (several targets: {\"results\": [...]}); --junit\n"
	"FILE also writes JUnit XML. Reasons are fixed words and numbers: never an env value,\n"
	"token or transcript byte. --require-dedicated-agentshare (or\n"
	"AGENTIC_REQUIRE_DEDICATED_AGENTSHARE=1) makes AGV-041, the agentshare on a device of\n"
	"its own, a check that can fail. The socket is --socket, else $AGENTIC_ADMIN_SOCKET,\n"
	"else " DEFAULT_SOCKET ".\n"
	"A SKIP that applies to the target (a check that could not run, e.g. AGV-034 on a host\n"
	"without docker0) is no evidence: the result is `incomplete` and the summary names it.\n"
	"Exit status: 0 every check passed (INFO, and SKIP of a check that cannot apply to the\n"
	"target), 1 a check failed, 2 could not run (usage, agenticd unreachable, no such sandbox\n"
	"or container), 3 evidence incomplete (no check failed, but one that applies did not run).\n"
	"Of several targets the worst counts: 2, then 1, then 3.\n";

static struct http_conn conn;
static char body[LIMIT_CLI_BODY_BYTES + 1];
static size_t body_len;
static struct json_token tok[16384];
static char names[MAX_TARGETS][64];

struct vopts {
	const char *socket;
	bool json, dedicated;
	FILE *junit;
	uint32_t done;                /* targets answered so far (for --json's list) */
	bool list;                    /* --json prints {"results": [...]} */
};

/* One request; the answer's body in body. The HTTP status, or -1 (the reason printed). */
static int request(const struct vopts *o, const char *method, const char *target,
		   const char *json)
{
	static const struct http_field ctype[] = {
		{ "Content-Type", "application/json" }, { NULL, NULL }
	};
	static uint8_t reqbuf[4096];
	struct http_exchange_opts xo = { .body_limit = LIMIT_CLI_BODY_BYTES, .read_timeout_ms = -1 };
	struct buf req;
	int r;

	if (http_conn_init(&conn, o->socket) != 0) {
		fprintf(stderr, "agentic-verify: socket path too long: %s\n", o->socket);
		return -1;
	}
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_request_write(&req, method, target, "agenticd", json ? ctype : NULL, json,
			       json ? strlen(json) : 0) != 0) {
		fprintf(stderr, "agentic-verify: request too large\n");
		return -1;
	}
	body_len = 0;
	if (http_conn_begin(&conn, req.data, req.len, &xo) != 0) {
		fprintf(stderr, "agentic-verify: cannot reach agenticd at %s: %s\n", o->socket,
			strerror(conn.sys_errno));
		return -1;
	}
	for (;;) {
		struct http_slice s;

		r = http_conn_wait(&conn, &s);
		if (r == HTTP_EV_HEAD)
			continue;
		if (r != HTTP_EV_BODY)
			break;
		if (body_len + s.len <= LIMIT_CLI_BODY_BYTES) {
			memcpy(body + body_len, s.data, s.len);
			body_len += s.len;
		}
	}
	body[body_len] = '\0';
	if (r != HTTP_EV_DONE) {
		if (r == HTTP_ERR_CONNECT)
			fprintf(stderr, "agentic-verify: cannot reach agenticd at %s: %s\n", o->socket,
				strerror(conn.sys_errno));
		else
			fprintf(stderr, "agentic-verify: no complete answer from agenticd at %s: %s\n",
				o->socket, err_str(r));
		http_conn_close(&conn);
		return -1;
	}
	r = conn.parser.status;
	http_conn_close(&conn);
	return r;
}

static const char *str(const struct json_doc *d, int obj, const char *key, char *out, size_t size)
{
	int v = obj >= 0 ? json_obj_get(d, obj, key) : -1;

	out[0] = '\0';
	if (v >= 0 && d->tok[v].type == JSON_STRING && json_str(d, v, out, size) < 0)
		out[0] = '\0';
	return out;
}

static int64_t num(const struct json_doc *d, int obj, const char *key)
{
	int v = obj >= 0 ? json_obj_get(d, obj, key) : -1;
	int64_t n = 0;

	if (v >= 0 && json_int(d, v, &n) != 0)
		n = 0;
	return n;
}

static void xml_text(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '&')
			fputs("&amp;", f);
		else if (ch == '<')
			fputs("&lt;", f);
		else if (ch == '>')
			fputs("&gt;", f);
		else if (ch == '"')
			fputs("&quot;", f);
		else if (ch == '\'')
			fputs("&apos;", f);
		else if (ch >= 0x20 || ch == '\t' || ch == '\n')
			fputc(ch, f);
	}
}

/* An error answer on stderr. */
static void api_error(const char *target, int status)
{
	struct json_doc d;
	char code[64] = "", msg[512] = "";
	int e;

	if (json_parse(&d, body, body_len, tok, ARRAY_LEN(tok)) == 0 &&
	    (e = json_obj_get(&d, 0, "error")) >= 0) {
		str(&d, e, "code", code, sizeof(code));
		str(&d, e, "message", msg, sizeof(msg));
	}
	fprintf(stderr, "agentic-verify: %s: %s (HTTP %d%s%s)\n", target,
		msg[0] ? msg : "request failed", status, code[0] ? ", " : "", code);
}

/* The result's not_run ids, "AGV-033,AGV-034" ("" none). */
static void not_run_list(const struct json_doc *d, char *out, size_t size)
{
	int a = json_obj_get(d, 0, "not_run");
	size_t len = 0;
	char id[16];

	out[0] = '\0';
	if (a < 0 || d->tok[a].type != JSON_ARRAY)
		return;
	for (int c = json_first(d, a); c >= 0 && len < size; c = json_next(d, a, c))
		if (json_str(d, c, id, sizeof(id)) >= 0)
			len += (size_t)snprintf(out + len, size - len, "%s%s", len ? "," : "", id);
}

static void junit_suite(FILE *f, const struct json_doc *d, int checks, const char *name,
			const char *result, const char *not_run)
{
	int s = json_obj_get(d, 0, "summary");

	fprintf(f, "  <testsuite name=\"agentic-verify ");
	xml_text(f, name);
	fprintf(f, "\" tests=\"%u\" failures=\"%lld\" errors=\"0\" skipped=\"%lld\" "
		"time=\"%.3f\">\n", d->tok[checks].children, (long long)num(d, s, "failed"),
		(long long)num(d, s, "skipped"), (double)num(d, 0, "duration_ms") / 1000.0);
	fputs("    <properties><property name=\"result\" value=\"", f);
	xml_text(f, result);
	fputs("\"/>", f);
	if (not_run[0]) {
		fputs("<property name=\"not_run\" value=\"", f);
		xml_text(f, not_run);
		fputs("\"/>", f);
	}
	fputs("</properties>\n", f);
}

static void junit_case(FILE *f, const char *name, const char *id, const char *title,
		       const char *status, const char *reason)
{
	fputs("    <testcase classname=\"agentic-verify.", f);
	xml_text(f, name);
	fputs("\" name=\"", f);
	xml_text(f, id);
	fputc(' ', f);
	xml_text(f, title);
	fputs("\" time=\"0\">", f);
	if (strcmp(status, "FAIL") == 0) {
		fputs("<failure type=\"FAIL\" message=\"", f);
		xml_text(f, reason);
		fputs("\">", f);
		xml_text(f, reason);
		fputs("</failure>", f);
	} else if (strcmp(status, "SKIP") == 0) {
		fputs("<skipped message=\"", f);
		xml_text(f, reason);
		fputs("\"/>", f);
	} else if (reason[0]) {
		fputs("<system-out>", f);
		xml_text(f, reason);
		fputs("</system-out>", f);
	}
	fputs("</testcase>\n", f);
}

static void checks_show(const struct vopts *o, const struct json_doc *d, int checks,
			const char *name)
{
	char id[16], status[8], title[160], reason[256];

	for (int c = json_first(d, checks); c >= 0; c = json_next(d, checks, c)) {
		str(d, c, "id", id, sizeof(id));
		str(d, c, "status", status, sizeof(status));
		str(d, c, "title", title, sizeof(title));
		str(d, c, "reason", reason, sizeof(reason));
		if (!o->json)
			printf("%s %s %s%s%s\n", status, id, title, reason[0] ? ": " : "", reason);
		if (o->junit)
			junit_case(o->junit, name, id, title, status, reason);
	}
}

/* Prints one result object (in body); returns EXIT_PASS, EXIT_FAILED, EXIT_INCOMPLETE, or
 * EXIT_ERROR (unreadable). */
static int show(struct vopts *o)
{
	struct json_doc d;
	char name[64] = "-", tier[8] = "-", target[16], result[16], not_run[512];
	int sb, checks, s;

	if (json_parse(&d, body, body_len, tok, ARRAY_LEN(tok)) != 0 ||
	    d.tok[0].type != JSON_OBJECT || (checks = json_obj_get(&d, 0, "checks")) < 0) {
		fprintf(stderr, "agentic-verify: agenticd's answer is not a verify result\n");
		return EXIT_ERROR;
	}
	sb = json_obj_get(&d, 0, "sandbox");
	if (sb >= 0 && d.tok[sb].type == JSON_OBJECT) {
		str(&d, sb, "name", name, sizeof(name));
		str(&d, json_obj_get(&d, sb, "posture"), "tier", tier, sizeof(tier));
	}
	str(&d, 0, "target", target, sizeof(target));
	str(&d, 0, "result", result, sizeof(result));
	not_run_list(&d, not_run, sizeof(not_run));
	s = json_obj_get(&d, 0, "summary");
	if (o->json) {
		if (o->list)
			fputs(o->done ? "," : "", stdout);
		fwrite(body, 1, body_len && body[body_len - 1] == '\n' ? body_len - 1 : body_len,
		       stdout);
		if (!o->list)
			putchar('\n');
	}
	if (o->junit)
		junit_suite(o->junit, &d, checks, name, result, not_run);
	checks_show(o, &d, checks, name);
	if (o->junit)
		fputs("  </testsuite>\n", o->junit);
	if (!o->json)
		printf("summary name=%s target=%s passed=%lld failed=%lld info=%lld skipped=%lld "
		       "tier=%s result=%s duration_ms=%lld%s%s\n", name, target,
		       (long long)num(&d, s, "passed"), (long long)num(&d, s, "failed"),
		       (long long)num(&d, s, "info"), (long long)num(&d, s, "skipped"), tier, result,
		       (long long)num(&d, 0, "duration_ms"), not_run[0] ? " not_run=" : "", not_run);
	o->done++;
	/* a pass is only what agenticd calls one: a result it does not name is no evidence */
	if (num(&d, s, "failed") || strcmp(result, "fail") == 0)
		return EXIT_FAILED;
	if (strcmp(result, "pass") == 0)
		return EXIT_PASS;
	return EXIT_INCOMPLETE;
}

/* How bad an exit status is: could not run, then a check failed, then evidence incomplete. */
static int rank(int status)
{
	return status == EXIT_ERROR ? 3 : status == EXIT_FAILED ? 2 : status == EXIT_INCOMPLETE;
}

/* One target: as show, or EXIT_ERROR (could not run). */
static int verify_one(struct vopts *o, const char *label, const char *path)
{
	int status = request(o, "POST", path,
			     o->dedicated ? "{\"require_dedicated_agentshare\":true}" : NULL);

	if (status < 0)
		return EXIT_ERROR;
	if (status != 200) {
		api_error(label, status);
		return EXIT_ERROR;
	}
	return show(o);
}

static uint32_t all_names(struct vopts *o, int *rc)
{
	struct json_doc d;
	uint32_t n = 0;
	int status = request(o, "GET", "/api/v1/containers", NULL), list;

	*rc = 0;
	if (status != 200) {
		if (status > 0)
			api_error("--all", status);
		*rc = EXIT_ERROR;
		return 0;
	}
	if (json_parse(&d, body, body_len, tok, ARRAY_LEN(tok)) != 0 ||
	    (list = json_obj_get(&d, 0, "containers")) < 0) {
		fprintf(stderr, "agentic-verify: agenticd's list is not JSON\n");
		*rc = EXIT_ERROR;
		return 0;
	}
	for (int c = json_first(&d, list); c >= 0 && n < MAX_TARGETS; c = json_next(&d, list, c)) {
		char state[16];

		str(&d, c, "state", state, sizeof(state));
		if (strcmp(state, "ready") == 0 && str(&d, c, "name", names[n], sizeof(names[n]))[0])
			n++;
	}
	return n;
}

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, "agentic-verify: ");
	fprintf(stderr, what, arg);
	fprintf(stderr, "\n(see agentic-verify --help)\n");
	return EXIT_ERROR;
}

/* A sandbox name (max 63), or a container's id (64 hex digits) or name (max 127). */
static bool name_ok(const char *s, size_t max)
{
	return s[0] && strlen(s) <= max &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") ==
		       strlen(s);
}

/* What the command line names: the targets, and where JUnit goes. */
struct vargs {
	const char *junit, *container;
	const char *targets[MAX_TARGETS];
	uint32_t n;
	bool all;
};

/* The options into o and t: 0, or EXIT_ERROR (the usage error printed). */
static int args_read(int argc, char **argv, struct vopts *o, struct vargs *t)
{
	const char *env;

	t->junit = t->container = NULL;
	t->n = 0;
	t->all = false;
	o->socket = getenv("AGENTIC_ADMIN_SOCKET");
	if (!o->socket || !o->socket[0])
		o->socket = DEFAULT_SOCKET;
	env = getenv("AGENTIC_REQUIRE_DEDICATED_AGENTSHARE");
	o->dedicated = env && strcmp(env, "1") == 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		bool takes = strcmp(a, "--socket") == 0 || strcmp(a, "--junit") == 0 ||
			     strcmp(a, "--container") == 0;

		if (takes && i + 1 >= argc)
			return usage_error("%s needs a value", a);
		if (strcmp(a, "--json") == 0)
			o->json = true;
		else if (strcmp(a, "--all") == 0)
			t->all = true;
		else if (strcmp(a, "--require-dedicated-agentshare") == 0)
			o->dedicated = true;
		else if (strcmp(a, "--socket") == 0)
			o->socket = argv[++i];
		else if (strcmp(a, "--junit") == 0)
			t->junit = argv[++i];
		else if (strcmp(a, "--container") == 0)
			t->container = argv[++i];
		else if (a[0] == '-')
			return usage_error("unknown option '%s'", a);
		else if (!name_ok(a, 63))
			return usage_error("'%s' is not a sandbox name", a);
		else if (t->n < MAX_TARGETS)
			t->targets[t->n++] = a;
	}
	if ((t->all ? 1 : 0) + (t->container ? 1 : 0) + (t->n ? 1 : 0) != 1)
		return usage_error("%s", "name sandboxes, or give --all, or --container ID (one of them)");
	if (t->container && !name_ok(t->container, 127))
		return usage_error("--container takes a container's id or name, got '%s'",
				   t->container);
	return 0;
}

/* --junit FILE opened, its head written: 0, or EXIT_ERROR (the reason printed). */
static int junit_open(struct vopts *o, const char *junit)
{
	o->junit = fopen(junit, "we");
	if (!o->junit) {
		fprintf(stderr, "agentic-verify: --junit: cannot write %s: %s\n", junit,
			strerror(errno));
		return EXIT_ERROR;
	}
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"agentic-verify\">\n",
	      o->junit);
	return 0;
}

int verify_main(int argc, char **argv)
{
	struct vopts o = { 0 };
	struct vargs t;
	int worst;
	char path[256];

	worst = args_read(argc, argv, &o, &t);
	if (worst)
		return worst;
	if (t.all) {
		t.n = all_names(&o, &worst);
		if (worst)
			return worst;
		for (uint32_t i = 0; i < t.n; i++)
			t.targets[i] = names[i];
	}
	if (t.junit && junit_open(&o, t.junit) != 0)
		return EXIT_ERROR;
	o.list = o.json && (t.all || t.n > 1);
	if (o.list)
		fputs("{\"results\": [", stdout);
	if (t.container) {
		snprintf(path, sizeof(path), "/api/v1/verify?container=%s", t.container);
		worst = verify_one(&o, t.container, path);
	}
	for (uint32_t i = 0; i < t.n; i++) {
		int r;

		snprintf(path, sizeof(path), "/api/v1/containers/%s/verify", t.targets[i]);
		r = verify_one(&o, t.targets[i], path);
		if (rank(r) > rank(worst))
			worst = r;
	}
	if (o.list)
		fputs("]}\n", stdout);
	if (o.junit) {
		fputs("</testsuites>\n", o.junit);
		if (fclose(o.junit) != 0) {
			fprintf(stderr, "agentic-verify: --junit: cannot write %s\n", t.junit);
			return EXIT_ERROR;
		}
	}
	return worst;
}
