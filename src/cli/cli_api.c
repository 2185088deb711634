/* cli_api.c: the admin CLI's one request to agenticd's admin API over its Unix socket: the
 * answer read and parsed, error answers printed, and the options and helpers every verb uses. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli_internal.h"

const char cli_common_help[] =
	"\n"
	"  --json         print the API's JSON instead of text\n"
	"  --socket PATH  agenticd's admin socket (else $AGENTIC_ADMIN_SOCKET, else\n"
	"                 " DEFAULT_SOCKET ")\n";

struct http_conn cli_conn;
char cli_body[BODY_MAX + 1];
static size_t body_len;
struct json_token cli_tok[65536];

/* ---- one request ---- */

/* See cli_internal.h. */

int cli_read_answer(int out_fd)
{
	int r;

	body_len = 0;
	for (;;) {
		struct http_slice s;

		r = http_conn_wait(&cli_conn, &s);
		if (r == HTTP_EV_HEAD)
			continue;
		if (r != HTTP_EV_BODY)
			break;
		if (out_fd >= 0 && cli_conn.parser.status == 200) {
			if (cli_write_all(out_fd, s.data, s.len) != 0) {
				r = ANSWER_OUT_FAILED;
				break;
			}
		} else if (body_len + s.len <= BODY_MAX) {
			memcpy(cli_body + body_len, s.data, s.len);
			body_len += s.len;
		}
	}
	cli_body[body_len] = '\0';
	return r;
}

/* Sends the request and reads the whole answer into cli_body; returns the HTTP status or -1
 * (the reason printed). */
static int request(const struct opts *o, const char *method, const char *target,
		   const char *json, size_t json_len)
{
	static const struct http_field ctype[] = {
		{ "Content-Type", "application/json" }, { NULL, NULL }
	};
	static uint8_t reqbuf[64 * 1024];
	struct http_exchange_opts xo = { .body_limit = BODY_MAX, .read_timeout_ms = -1 };
	struct buf req;
	int r;

	if (http_conn_init(&cli_conn, o->socket) != 0) {
		fprintf(stderr, "agentic: socket path too long: %s\n", o->socket);
		return -1;
	}
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_request_write(&req, method, target, "agenticd", json ? ctype : NULL, json,
			       json_len) != 0) {
		fprintf(stderr, "agentic: request too large\n");
		return -1;
	}
	if (http_conn_begin(&cli_conn, req.data, req.len, &xo) != 0)
		return -1;
	r = cli_read_answer(-1);
	if (r != HTTP_EV_DONE) {
		if (r == HTTP_ERR_CONNECT)
			fprintf(stderr, "agentic: cannot reach agenticd at %s: %s\n", o->socket,
				strerror(cli_conn.sys_errno));
		else
			fprintf(stderr, "agentic: no complete answer from agenticd at %s: %s\n",
				o->socket, err_str(r));
		http_conn_close(&cli_conn);
		return -1;
	}
	r = cli_conn.parser.status;
	http_conn_close(&cli_conn);
	return r;
}

static int parse_body(struct json_doc *doc)
{
	if (json_parse(doc, cli_body, body_len, cli_tok, ARRAY_LEN(cli_tok)) != 0 || doc->ntok == 0) {
		fprintf(stderr, "agentic: agenticd's answer is not JSON\n");
		return -1;
	}
	return 0;
}

void cli_body_taken(size_t len)
{
	body_len = len;
}

/* Prints an error answer; returns the exit status 1. */
int cli_api_error(int status)
{
	struct json_doc doc;
	char code[64] = "", msg[8192] = "";
	int e;

	if (json_parse(&doc, cli_body, body_len, cli_tok, ARRAY_LEN(cli_tok)) == 0 &&
	    (e = json_obj_get(&doc, 0, "error")) >= 0) {
		json_str(&doc, json_obj_get(&doc, e, "code"), code, sizeof(code));
		json_str(&doc, json_obj_get(&doc, e, "message"), msg, sizeof(msg));
	}
	fprintf(stderr, "agentic: %s (HTTP %d%s%s)\n", msg[0] ? msg : "request failed", status,
		code[0] ? ", " : "", code);
	return 1;
}

static void print_raw(void)
{
	fwrite(cli_body, 1, body_len, stdout);
	if (body_len && cli_body[body_len - 1] != '\n')
		putchar('\n');
}

/* One request that must be answered with status want. Returns 0 with the answer parsed into
 * doc (when doc is not NULL); -1 when --json printed it as it came; else the exit status. */
int cli_call(const struct opts *o, const char *method, const char *target, const char *data,
		size_t len, int want, struct json_doc *doc)
{
	int status = request(o, method, target, data, len);

	if (status < 0)
		return 1;
	if (status != want)
		return cli_api_error(status);
	if (o->json) {
		print_raw();
		return -1;
	}
	return doc && parse_body(doc) != 0 ? 1 : 0;
}

/* ---- options ---- */

int cli_common_opt(struct opts *o, int argc, char **argv, int *i)
{
	if (strcmp(argv[*i], "--json") == 0) {
		o->json = true;
		return 1;
	}
	if (strcmp(argv[*i], "--socket") == 0) {
		if (*i + 1 >= argc)
			return -1;
		o->socket = argv[++*i];
		return 1;
	}
	return 0;
}

int cli_usage_error(const char *help)
{
	fprintf(stderr, "%s%s", help, cli_common_help);
	return 2;
}

const char *cli_field(const struct json_doc *doc, int obj, const char *key, char *out,
			 size_t size)
{
	int v = json_obj_get(doc, obj, key);
	int64_t n;

	out[0] = '\0';
	if (v < 0)
		return out;
	if (doc->tok[v].type == JSON_STRING)
		json_str(doc, v, out, size);
	else if (json_int(doc, v, &n) == 0)
		snprintf(out, size, "%lld", (long long)n);
	else if (doc->tok[v].type == JSON_TRUE || doc->tok[v].type == JSON_FALSE)
		snprintf(out, size, "%s", doc->tok[v].type == JSON_TRUE ? "true" : "false");
	else if (doc->tok[v].type == JSON_NULL)
		snprintf(out, size, "-");
	return out;
}

/* ---- verbs ---- */

/* "key": [v[0], ... v[n-1]] */
void cli_json_strs(struct json_writer *w, const char *key, const char *const *v, int n)
{
	json_key(w, key);
	json_arr_begin(w);
	for (int i = 0; i < n; i++)
		json_str_write(w, v[i]);
	json_arr_end(w);
}

int cli_name_target(const char *name, char *out, size_t size)
{
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
			fprintf(stderr, "agentic: '%s' is not a sandbox name\n", name);
			return -1;
		}
	snprintf(out, size, "/api/v1/containers/%s", name);
	return 0;
}

int cli_write_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
