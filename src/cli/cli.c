/* cli.c: the admin CLI: each verb is one request to agenticd's admin API over its Unix
 * socket, answered in human form or, with --json, as the API's own JSON. */
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

#include "base/base.h"
#include "cli/cli.h"
#include "http/frame.h"
#include "http/http.h"
#include "json/json.h"
#include "profile/profile.h"

#define DEFAULT_SOCKET "/run/agentic/admin.sock"
#define BODY_MAX LIMIT_CLI_BODY_BYTES
#define MAX_ENV LIMIT_SANDBOX_ENV
#define MAX_MOUNTS LIMIT_SANDBOX_MOUNTS
#define MAX_CMD LIMIT_SANDBOX_CMD_ARGS

const char cli_usage[] =
	"verbs (agentic VERB --help for each):\n"
	"  create   make a sandbox and wait until it is ready\n"
	"  ls       list sandboxes\n"
	"  inspect  show one sandbox\n"
	"  posture  show a sandbox's tier and why; declare a taint\n"
	"  egress   show a sandbox's egress policy and its audit\n"
	"  rm       remove a sandbox\n"
	"  exec     run a command in a sandbox\n"
	"  logs     print a run's transcript\n"
	"  profiles list agenticd's startup profiles, show one, check a file offline\n";

static const char common_help[] =
	"\n"
	"  --json         print the API's JSON instead of text\n"
	"  --socket PATH  agenticd's admin socket (else $AGENTIC_ADMIN_SOCKET, else\n"
	"                 " DEFAULT_SOCKET ")\n";

struct opts {
	bool json;
	const char *socket;
};

static struct http_conn conn;
static char body[BODY_MAX + 1];
static size_t body_len;
static struct json_token tok[65536];

/* ---- one request ---- */

/* Reads agenticd's answer on conn until it ends or upgrades. The body is gathered into body
 * (NUL-terminated, at most BODY_MAX bytes; the parser refuses more), except that a 200 body is
 * written to out_fd instead when out_fd >= 0. Returns the last http_conn_wait event:
 * HTTP_EV_DONE, HTTP_EV_UPGRADE, or an error (ANSWER_OUT_FAILED when out_fd could not be written). */
#define ANSWER_OUT_FAILED (ERR_RANGE_CLI - 1)
static int write_all(int fd, const void *data, size_t len);

static int read_answer(int out_fd)
{
	int r;

	body_len = 0;
	for (;;) {
		struct http_slice s;

		r = http_conn_wait(&conn, &s);
		if (r == HTTP_EV_HEAD)
			continue;
		if (r != HTTP_EV_BODY)
			break;
		if (out_fd >= 0 && conn.parser.status == 200) {
			if (write_all(out_fd, s.data, s.len) != 0) {
				r = ANSWER_OUT_FAILED;
				break;
			}
		} else if (body_len + s.len <= BODY_MAX) {
			memcpy(body + body_len, s.data, s.len);
			body_len += s.len;
		}
	}
	body[body_len] = '\0';
	return r;
}

/* Sends the request and reads the whole answer into body; returns the HTTP status or -1
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

	if (http_conn_init(&conn, o->socket) != 0) {
		fprintf(stderr, "agentic: socket path too long: %s\n", o->socket);
		return -1;
	}
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_request_write(&req, method, target, "agenticd", json ? ctype : NULL, json,
			       json_len) != 0) {
		fprintf(stderr, "agentic: request too large\n");
		return -1;
	}
	if (http_conn_begin(&conn, req.data, req.len, &xo) != 0)
		return -1;
	r = read_answer(-1);
	if (r != HTTP_EV_DONE) {
		if (r == HTTP_ERR_CONNECT)
			fprintf(stderr, "agentic: cannot reach agenticd at %s: %s\n", o->socket,
				strerror(conn.sys_errno));
		else
			fprintf(stderr, "agentic: no complete answer from agenticd at %s: %s\n",
				o->socket, err_str(r));
		http_conn_close(&conn);
		return -1;
	}
	r = conn.parser.status;
	http_conn_close(&conn);
	return r;
}

static int parse_body(struct json_doc *doc)
{
	if (json_parse(doc, body, body_len, tok, ARRAY_LEN(tok)) != 0 || doc->ntok == 0) {
		fprintf(stderr, "agentic: agenticd's answer is not JSON\n");
		return -1;
	}
	return 0;
}

/* Prints an error answer; returns the exit status 1. */
static int api_error(int status)
{
	struct json_doc doc;
	char code[64] = "", msg[8192] = "";
	int e;

	if (json_parse(&doc, body, body_len, tok, ARRAY_LEN(tok)) == 0 &&
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
	fwrite(body, 1, body_len, stdout);
	if (body_len && body[body_len - 1] != '\n')
		putchar('\n');
}

/* One request that must be answered with status want. Returns 0 with the answer parsed into
 * doc (when doc is not NULL); -1 when --json printed it as it came; else the exit status. */
static int call(const struct opts *o, const char *method, const char *target, const char *data,
		size_t len, int want, struct json_doc *doc)
{
	int status = request(o, method, target, data, len);

	if (status < 0)
		return 1;
	if (status != want)
		return api_error(status);
	if (o->json) {
		print_raw();
		return -1;
	}
	return doc && parse_body(doc) != 0 ? 1 : 0;
}

/* ---- options ---- */

static int common_opt(struct opts *o, int argc, char **argv, int *i)
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

static int usage(const char *help)
{
	fprintf(stderr, "%s%s", help, common_help);
	return 2;
}

static const char *field(const struct json_doc *doc, int obj, const char *key, char *out,
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
static void json_strs(struct json_writer *w, const char *key, const char *const *v, int n)
{
	json_key(w, key);
	json_arr_begin(w);
	for (int i = 0; i < n; i++)
		json_str_write(w, v[i]);
	json_arr_end(w);
}

static const char create_help[] =
	"usage: agentic create [--profile ID] [--runtime docker|vm] [--image I] [--name N]\n"
	"                      [--env K=V]...\n"
	"                      [--mount SRC:DST[:ro]]... [--network NET] [--label K=V]...\n"
	"                      [--disk SIZE] [--memory SIZE] [--cpus N] [--pids N]\n"
	"                      [--require-tier T1|T0] [-- CMD...]\n"
	"Creates a sandbox and waits until its agent is ready (or the create failed and was\n"
	"rolled back). Prints the sandbox's name. --profile starts from a startup profile of\n"
	"profiles_dir (its image, env, cmd, resources, mounts, network; the options given here\n"
	"override or add to it). --disk is its disk budget, the size of its workspace, and\n"
	"--memory its memory limit, in bytes or with a binary suffix k, m, g, t (defaults:\n"
	"default_disk_bytes, default_memory_bytes); --cpus a number of CPUs (0.5, 2); --pids\n"
	"its process limit. --require-tier T1 refuses the create (422 tier_refused, with the\n"
	"reasons) if the sandbox would be T0, before anything is made. --runtime vm makes it a\n"
	"QEMU guest with its own kernel (no network, no --mount, no --network; docs/VM.md).\n";

/* Bytes, or a number with a binary suffix k, m, g or t; 0 when malformed. */
static uint64_t size_arg(const char *s)
{
	char *end;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;

	if (end == s || *s == '-')
		return 0;
	switch (*end | 0x20) {
	case 'k': shift = 10; end++; break;
	case 'm': shift = 20; end++; break;
	case 'g': shift = 30; end++; break;
	case 't': shift = 40; end++; break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return 0;
	return (uint64_t)v << shift;
}

static int verb_create(int argc, char **argv, struct opts *o)
{
	static char out[256 * 1024];
	const char *image = NULL, *name = NULL, *network = NULL, *profile = NULL, *tier = NULL;
	const char *env[MAX_ENV], *mounts[MAX_MOUNTS], *labels[16], *cpus = NULL, *runtime = NULL;
	uint64_t disk = 0, memory = 0, pids = 0;
	char **cmd = NULL;
	int nenv = 0, nmounts = 0, nlabels = 0, ncmd = 0, status, c;
	struct buf b;
	struct json_writer w;
	struct json_doc doc;
	char s1[128], s2[64], s3[32], s4[64];

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) != 0) {
			if (c < 0)
				return usage(create_help);
		} else if (strcmp(argv[i], "--") == 0) {
			cmd = argv + i + 1;
			ncmd = argc - i - 1;
			break;
		} else if (i + 1 < argc && strcmp(argv[i], "--image") == 0) {
			image = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--name") == 0) {
			name = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--runtime") == 0) {
			runtime = argv[++i];
			if (strcmp(runtime, "docker") != 0 && strcmp(runtime, "vm") != 0) {
				fprintf(stderr, "agentic create: --runtime is docker or vm\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--network") == 0) {
			network = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--env") == 0 && nenv < MAX_ENV) {
			env[nenv++] = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--mount") == 0 && nmounts < MAX_MOUNTS) {
			mounts[nmounts++] = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--label") == 0 && nlabels < 16) {
			labels[nlabels++] = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--disk") == 0) {
			if (!(disk = size_arg(argv[++i])) || disk > INT64_MAX) {
				fprintf(stderr, "agentic create: --disk takes a size (bytes, or 512m, 2g)\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--memory") == 0) {
			if (!(memory = size_arg(argv[++i])) || memory > INT64_MAX) {
				fprintf(stderr, "agentic create: --memory takes a size (bytes, or 512m, "
					"2g)\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--pids") == 0) {
			if (parse_u64(argv[++i], INT32_MAX, &pids) != 0 || !pids) {
				fprintf(stderr, "agentic create: --pids takes a positive whole number\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--cpus") == 0) {
			cpus = argv[++i];
			if (!*cpus || strspn(cpus, "0123456789.") != strlen(cpus) || *cpus == '.') {
				fprintf(stderr, "agentic create: --cpus takes a number (0.5, 2)\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--profile") == 0) {
			profile = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--require-tier") == 0) {
			tier = argv[++i];
			if (strcmp(tier, "T1") != 0 && strcmp(tier, "T0") != 0) {
				fprintf(stderr, "agentic create: --require-tier is T1 or T0\n");
				return 2;
			}
		} else {
			fprintf(stderr, "agentic create: unexpected %s\n", argv[i]);
			return usage(create_help);
		}
	}
	if (ncmd > MAX_CMD) {
		fprintf(stderr, "agentic create: at most %d command arguments\n", MAX_CMD);
		return 2;
	}
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	if (name) {
		json_key(&w, "name");
		json_str_write(&w, name);
	}
	if (image) {
		json_key(&w, "image");
		json_str_write(&w, image);
	}
	if (runtime) {
		json_key(&w, "runtime");
		json_str_write(&w, runtime);
	}
	if (network) {
		json_key(&w, "network");
		json_str_write(&w, network);
	}
	if (profile) {
		json_key(&w, "profile");
		json_str_write(&w, profile);
	}
	if (tier) {
		json_key(&w, "require_tier");
		json_str_write(&w, tier);
	}
	if (disk) {
		json_key(&w, "disk_bytes");
		json_int_write(&w, (int64_t)disk);
	}
	if (memory || pids || cpus) {
		json_key(&w, "resources");
		json_obj_begin(&w);
		if (memory) {
			json_key(&w, "memory");
			json_int_write(&w, (int64_t)memory);
		}
		if (pids) {
			json_key(&w, "pids");
			json_int_write(&w, (int64_t)pids);
		}
		if (cpus) {
			json_key(&w, "cpus");
			json_str_write(&w, cpus); /* the API takes "0.5" as it takes 0.5 */
		}
		json_obj_end(&w);
	}
	json_strs(&w, "env", env, nenv);
	json_strs(&w, "mounts", mounts, nmounts);
	json_key(&w, "labels");
	json_obj_begin(&w);
	for (int i = 0; i < nlabels; i++) {
		const char *eq = strchr(labels[i], '=');

		if (!eq || eq == labels[i]) {
			fprintf(stderr, "agentic create: --label takes KEY=VALUE\n");
			return 2;
		}
		snprintf(s1, sizeof(s1), "%.*s", (int)(eq - labels[i]), labels[i]);
		json_key(&w, s1);
		json_str_write(&w, eq + 1);
	}
	json_obj_end(&w);
	json_strs(&w, "cmd", (const char *const *)cmd, ncmd);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		fprintf(stderr, "agentic create: arguments too long or not UTF-8\n");
		return 2;
	}
	status = call(o, "POST", "/api/v1/containers", (const char *)b.data, b.len, 201, &doc);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s\n", field(&doc, 0, "name", s1, sizeof(s1)));
	fprintf(stderr, "ready: instance %s, control uid %s, subnet %s, network %s\n",
		field(&doc, 0, "instance_id", s4, sizeof(s4)),
		field(&doc, 0, "control_uid", s3, sizeof(s3)),
		field(&doc, 0, "subnet", s2, sizeof(s2)), field(&doc, 0, "network", out, 128));
	return 0;
}

static int name_target(const char *name, char *out, size_t size)
{
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) {
			fprintf(stderr, "agentic: '%s' is not a sandbox name\n", name);
			return -1;
		}
	snprintf(out, size, "/api/v1/containers/%s", name);
	return 0;
}

/* ---- posture (docs/POSTURE.md) ---- */

/* Every reason word agenticd may show, with what it means; taint: an operator may declare it
 * (agentic posture --taint). The CLI is not linked with agenticd's posture code: the API's
 * 400 names the same declarable words, and test_posture_cli checks both lists agree. */
static const struct {
	const char *word;
	bool taint;
	const char *means;
} reasons[] = {
	{ "env_credential", false, "a raw credential's shape in the create request's env" },
	{ "operator_network", false, "the create named its network: used as given, unchecked" },
	{ "platform_compatibility", false, "a normal bridge made for a platform's sake" },
	{ "network_unverified", false, "the engine does not show the managed internal network "
	  "(or it is not read yet)" },
	{ "direct_docker_exec", true, "a docker exec into its container, behind agenticd's back" },
	{ "network_attached", true, "another network was connected to its container" },
	{ "container_changed", true, "docker update, cp into it, commit or rename of its container" },
	{ "operator_declared", true, "an admin declared it (a manual login, ...)" },
	{ "egress_report_only", false, "its egress policy was in report mode: what enforce "
	  "would deny went out" },
};

static const char *reason_means(const char *word)
{
	for (size_t i = 0; i < ARRAY_LEN(reasons); i++)
		if (strcmp(reasons[i].word, word) == 0)
			return reasons[i].means;
	return "(a reason this CLI does not know)";
}

static bool reason_declarable(const char *word)
{
	for (size_t i = 0; i < ARRAY_LEN(reasons); i++)
		if (reasons[i].taint && strcmp(reasons[i].word, word) == 0)
			return true;
	return false;
}

/* The tier of the sandbox at obj ("-" when its answer has none). */
static const char *posture_tier(const struct json_doc *doc, int obj, char *out, size_t size)
{
	field(doc, json_obj_get(doc, obj, "posture"), "tier", out, size);
	if (!out[0])
		snprintf(out, size, "-");
	return out;
}

/* "T0 (env_credential, network_unverified)": the posture object at p, on one line. */
static const char *posture_line(const struct json_doc *doc, int p, char *out, size_t size)
{
	int arr = json_obj_get(doc, p, "reasons");
	char word[64];
	struct buf b;

	buf_init(&b, out, size);
	field(doc, p, "tier", word, sizeof(word));
	buf_printf(&b, "%s", word[0] ? word : "-");
	for (int i = json_first(doc, arr), n = 0; i >= 0; i = json_next(doc, arr, i)) {
		json_str(doc, i, word, sizeof(word));
		buf_printf(&b, "%s%s", n++ ? ", " : " (", word);
		if (json_next(doc, arr, i) < 0)
			buf_printf(&b, ")");
	}
	return out;
}

static void posture_print(const struct json_doc *doc, int p)
{
	int arr = json_obj_get(doc, p, "reasons");
	char v[128], at[48];

	printf("%-10s %s\n", "tier", field(doc, p, "tier", v, sizeof(v)));
	printf("%-10s %s\n", "isolation", field(doc, p, "isolation", v, sizeof(v)));
	printf("%-10s %s\n", "egress", field(doc, p, "egress", v, sizeof(v)));
	printf("%-10s %s\n", "identity", field(doc, p, "identity", v, sizeof(v)));
	/* a VM's: no interface at all (QEMU -nic none), nothing on the engine to read */
	if (strcmp(field(doc, p, "isolation", v, sizeof(v)), "shared-kernel") != 0)
		printf("%-10s %s\n", "network", "none (a VM: no interface but lo)");
	else
		printf("%-10s %s\n", "network", strcmp(field(doc, p, "network_verified", v,
							     sizeof(v)), "true") == 0 ?
		       "verified on the engine" : "not verified");
	printf("reasons:%s\n", json_first(doc, arr) < 0 ? " none (T1)" : "");
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		json_str(doc, i, v, sizeof(v));
		printf("  %-24s %s\n", v, reason_means(v));
	}
	arr = json_obj_get(doc, p, "taints");
	printf("taints:%s\n", json_first(doc, arr) < 0 ? " none" : "");
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i))
		printf("  %-24s %s\n", field(doc, i, "reason", v, sizeof(v)),
		       field(doc, i, "at", at, sizeof(at)));
}

static const char posture_help[] =
	"usage: agentic posture NAME [--json] [--taint REASON]\n"
	"Shows the sandbox's posture: its tier (T1, or T0 with reasons), isolation, egress,\n"
	"identity, each reason with what it means, and its taints with the time each was seen.\n"
	"--taint REASON records a taint (sticky for the rest of the container's life: T0):\n"
	"operator_declared (e.g. a manual provider login inside it), or direct_docker_exec,\n"
	"network_attached, container_changed for what agenticd could not see happen.\n";

static int verb_posture(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	const char *name = NULL, *taint = NULL;
	char target[160], data[96], v[16];
	int status, c, p;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(posture_help);
		if (c)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "--taint") == 0 && !taint)
			taint = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return usage(posture_help);
	}
	if (!name || name_target(name, target, 128) != 0)
		return usage(posture_help);
	if (taint && !reason_declarable(taint)) {
		fprintf(stderr, "agentic posture: --taint takes one of:");
		for (size_t i = 0, n = 0; i < ARRAY_LEN(reasons); i++)
			if (reasons[i].taint)
				fprintf(stderr, "%s %s", n++ ? "," : "", reasons[i].word);
		fprintf(stderr, "\n");
		return 2;
	}
	strcat(target, taint ? "/posture/taints" : "/posture");
	if (taint)
		snprintf(data, sizeof(data), "{\"reason\":\"%s\"}", taint);
	status = call(o, taint ? "POST" : "GET", target, taint ? data : NULL,
		      taint ? strlen(data) : 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((p = json_obj_get(&doc, 0, "posture")) < 0) {
		fprintf(stderr, "agentic posture: agenticd's answer has no posture\n");
		return 1;
	}
	printf("%-10s %s\n", "name", field(&doc, 0, "name", data, sizeof(data)));
	posture_print(&doc, p);
	if (taint)
		fprintf(stderr, "%s %s\n", taint,
			strcmp(field(&doc, 0, "already_held", v, sizeof(v)), "true") == 0
			? "was already held: nothing changed" : "recorded");
	return 0;
}

static const char ls_help[] =
	"usage: agentic ls\n"
	"Lists the sandboxes: name, state, posture tier (T1 or T0: agentic posture NAME says\n"
	"why), agent, control uid, subnet, creation time, image.\n";

static int verb_ls(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	char name[64], state[16], tier[8], agent[24], uid[16], subnet[24], image[256], created[40];
	int status, arr, c;

	for (int i = 1; i < argc; i++)
		if ((c = common_opt(o, argc, argv, &i)) <= 0)
			return usage(ls_help);
	status = call(o, "GET", "/api/v1/containers", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((arr = json_obj_get(&doc, 0, "containers")) < 0)
		return 1;
	printf("%-24s %-9s %-4s %-14s %-8s %-18s %-24s %s\n", "NAME", "STATE", "TIER", "AGENT", "UID",
	       "SUBNET", "CREATED", "IMAGE");
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i))
		printf("%-24s %-9s %-4s %-14s %-8s %-18s %-24s %s\n",
		       field(&doc, i, "name", name, sizeof(name)),
		       field(&doc, i, "state", state, sizeof(state)),
		       posture_tier(&doc, i, tier, sizeof(tier)),
		       field(&doc, i, "agent", agent, sizeof(agent)),
		       field(&doc, i, "control_uid", uid, sizeof(uid)),
		       field(&doc, i, "subnet", subnet, sizeof(subnet)),
		       field(&doc, i, "created_at", created, sizeof(created)),
		       field(&doc, i, "image", image, sizeof(image)));
	return 0;
}

static const char inspect_help[] =
	"usage: agentic inspect NAME\n"
	"Shows one sandbox, a field a line; posture is its tier and the reasons for it (agentic\n"
	"posture NAME explains them).\n";

static int verb_inspect(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	const char *name = NULL;
	char target[128], v[1024];
	int status, c;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(inspect_help);
		if (c == 0 && !name && argv[i][0] != '-')
			name = argv[i];
		else if (c == 0)
			return usage(inspect_help);
	}
	if (!name || name_target(name, target, sizeof(target)) != 0)
		return usage(inspect_help);
	status = call(o, "GET", target, NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	for (int k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k))) {
		char key[64];
		int val = k + 1;

		json_str(&doc, k, key, sizeof(key));
		if (strcmp(key, "posture") == 0 && doc.tok[val].type == JSON_OBJECT)
			posture_line(&doc, val, v, sizeof(v));
		else if (doc.tok[val].type == JSON_ARRAY || doc.tok[val].type == JSON_OBJECT)
			snprintf(v, sizeof(v), "%.*s", (int)(doc.tok[val].end - doc.tok[val].start),
				 body + doc.tok[val].start);
		else
			field(&doc, 0, key, v, sizeof(v));
		printf("%-18s %s\n", key, v);
	}
	return 0;
}

static const char rm_help[] =
	"usage: agentic rm [--force] [--keep-workspace] NAME\n"
	"Removes a sandbox: stops it (SIGTERM, then after stop_grace_ms SIGKILL; --force kills\n"
	"at once), removes its container and network, frees its uid and subnet, and deletes its\n"
	"workspace unless --keep-workspace.\n";

static int verb_rm(int argc, char **argv, struct opts *o)
{
	const char *name = NULL;
	bool force = false, keep = false;
	char target[160];
	int status, c;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(rm_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
			force = true;
		else if (strcmp(argv[i], "--keep-workspace") == 0)
			keep = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return usage(rm_help);
	}
	if (!name || name_target(name, target, 128) != 0)
		return usage(rm_help);
	if (force || keep)
		snprintf(target + strlen(target), sizeof(target) - strlen(target), "?%s%s%s",
			 force ? "force=1" : "", force && keep ? "&" : "", keep ? "keep_workspace=1" : "");
	status = call(o, "DELETE", target, NULL, 0, 200, NULL);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s\n", name);
	return 0;
}

/* ---- exec: the upgraded stream (docs/API.md: "The exec stream") ---- */

static const char exec_help[] =
	"usage: agentic exec NAME [--env K=V]... [--workdir D] [--timeout S] -- CMD [ARGS...]\n"
	"Runs CMD in the sandbox as the workload user (10001, no capabilities). stdin is\n"
	"forwarded, the command's stdout and stderr come out on this process's; the exit status\n"
	"is the command's (128+N when killed by signal N), or 125 when agentic itself failed.\n";

static int write_all(int fd, const void *data, size_t len)
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

static int send_frame(int fd, int type, const void *data, size_t len)
{
	uint8_t h[FRAME_HEAD_BYTES];

	frame_head_put(h, type, (uint32_t)len);
	return write_all(fd, h, sizeof(h)) == 0 && write_all(fd, data, len) == 0 ? 0 : -1;
}

/* The exit frame's JSON: prints its error, returns the exit status. */
static int exec_exit(const uint8_t *data, size_t len)
{
	struct json_doc doc;
	int64_t code = -1;
	char err[1024] = "";

	if (json_parse(&doc, (const char *)data, len, tok, ARRAY_LEN(tok)) != 0 ||
	    json_int(&doc, json_obj_get(&doc, 0, "exit_code"), &code) != 0) {
		fprintf(stderr, "agentic exec: malformed exit frame\n");
		return 125;
	}
	json_str(&doc, json_obj_get(&doc, 0, "error"), err, sizeof(err));
	if (err[0])
		fprintf(stderr, "agentic exec: %s\n", err);
	err[0] = '\0';
	json_str(&doc, json_obj_get(&doc, 0, "transcript_error"), err, sizeof(err));
	if (err[0])
		fprintf(stderr, "agentic exec: the transcript is incomplete: %s\n", err);
	return code < 0 || code > 255 ? 125 : (int)code;
}

static int exec_stream(int fd, const uint8_t *pre, size_t pre_len)
{
	static uint8_t in[65536], fr[256 * 1024];
	size_t have = 0;
	bool stdin_open = true;

	if (pre_len > sizeof(fr))
		return 125;
	memcpy(fr, pre, pre_len);
	have = pre_len;
	signal(SIGPIPE, SIG_IGN);
	/* the exchange ran non-blocking; frames are written whole, so block from here */
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	for (;;) {
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = 0, .events = POLLIN } };
		int n;

		/* every complete frame in fr */
		while (have >= FRAME_HEAD_BYTES) {
			uint32_t len = frame_head_len(fr);
			int type = frame_head_type(fr);
			size_t whole = FRAME_HEAD_BYTES + (size_t)len;

			if (len > sizeof(fr) - FRAME_HEAD_BYTES) {
				fprintf(stderr, "agentic exec: frame too large\n");
				return 125;
			}
			if (have < whole)
				break;
			if (type == FRAME_EXIT)
				return exec_exit(fr + FRAME_HEAD_BYTES, len);
			/* stdout frames to fd 1, stderr frames to fd 2 */
			if ((type == FRAME_STDOUT || type == FRAME_STDERR) &&
			    write_all(type == FRAME_STDOUT ? 1 : 2, fr + FRAME_HEAD_BYTES, len) != 0 &&
			    errno != EPIPE) {
				fprintf(stderr, "agentic exec: cannot write output: %s\n", strerror(errno));
				return 125;
			}
			memmove(fr, fr + whole, have - whole);
			have -= whole;
		}
		n = poll(p, stdin_open ? 2 : 1, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return 125;
		if (p[0].revents) {
			ssize_t r = read(fd, fr + have, sizeof(fr) - have);

			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0) {
				fprintf(stderr, "agentic exec: the connection to agenticd ended before "
					"the command's exit status\n");
				return 125;
			}
			have += (size_t)r;
		}
		if (stdin_open && p[1].revents) {
			ssize_t r = read(0, in, sizeof(in));

			if (r < 0 && errno == EINTR)
				continue;
			/* a frame that cannot go out means the command has ended and agenticd
			 * closed its side: its status is read (or already was) all the same */
			if (r <= 0) {
				stdin_open = false;
				(void)send_frame(fd, FRAME_STDIN, "", 0);
			} else if (send_frame(fd, FRAME_STDIN, in, (size_t)r) != 0) {
				stdin_open = false;
			}
		}
	}
}

static int verb_exec(int argc, char **argv, struct opts *o)
{
	static char out[256 * 1024];
	static const struct http_field up[] = {
		{ "Content-Type", "application/json" }, { "Connection", "Upgrade" },
		{ "Upgrade", "tcp" }, { NULL, NULL }
	};
	static uint8_t reqbuf[300 * 1024];
	struct http_exchange_opts xo = { .body_limit = BODY_MAX, .read_timeout_ms = -1 };
	const char *name = NULL, *workdir = NULL, *env[MAX_ENV];
	char **cmd = NULL, target[160];
	int nenv = 0, ncmd = 0, c, r;
	uint64_t timeout = 0;
	struct buf b, req;
	struct json_writer w;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) != 0) {
			if (c < 0)
				return usage(exec_help), 125;
		} else if (strcmp(argv[i], "--") == 0) {
			cmd = argv + i + 1;
			ncmd = argc - i - 1;
			break;
		} else if (i + 1 < argc && strcmp(argv[i], "--env") == 0 && nenv < MAX_ENV) {
			env[nenv++] = argv[++i];
			if (!strchr(env[nenv - 1], '=') || env[nenv - 1][0] == '=') {
				fprintf(stderr, "agentic exec: --env takes KEY=VALUE\n");
				return 125;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--workdir") == 0) {
			workdir = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--timeout") == 0) {
			if (parse_u64(argv[++i], 86400u * 365u, &timeout) != 0) {
				fprintf(stderr, "agentic exec: --timeout takes whole seconds\n");
				return 125;
			}
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			fprintf(stderr, "agentic exec: unexpected %s\n", argv[i]);
			return usage(exec_help), 125;
		}
	}
	if (!name || !cmd || ncmd == 0 || name_target(name, target, 128) != 0)
		return usage(exec_help), 125;
	if (ncmd > MAX_CMD) {
		fprintf(stderr, "agentic exec: at most %d command arguments\n", MAX_CMD);
		return 125;
	}
	strcat(target, "/exec");
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_strs(&w, "cmd", (const char *const *)cmd, ncmd);
	json_strs(&w, "env", env, nenv);
	if (workdir) {
		json_key(&w, "working_dir");
		json_str_write(&w, workdir);
	}
	json_key(&w, "timeout_seconds");
	json_int_write(&w, (int64_t)timeout);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		fprintf(stderr, "agentic exec: arguments too long or not UTF-8\n");
		return 125;
	}
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_conn_init(&conn, o->socket) != 0 ||
	    http_request_write(&req, "POST", target, "agenticd", up, b.data, b.len) != 0) {
		fprintf(stderr, "agentic exec: request too large or socket path too long\n");
		return 125;
	}
	if (http_conn_begin(&conn, req.data, req.len, &xo) != 0)
		return 125;
	r = read_answer(-1);
	if (r == HTTP_EV_UPGRADE) {
		struct http_slice left = http_conn_leftover(&conn);

		return exec_stream(conn.fd, left.data, left.len);
	}
	if (r != HTTP_EV_DONE) {
		fprintf(stderr, "agentic exec: cannot reach agenticd at %s: %s\n", o->socket,
			r == HTTP_ERR_CONNECT ? strerror(conn.sys_errno) : err_str(r));
		return 125;
	}
	api_error(conn.parser.status);
	return 125;
}

/* ---- logs ---- */

static const char logs_help[] =
	"usage: agentic logs NAME [--run RUN] [--stderr]\n"
	"Prints a run's transcript: stdout.log (or stderr.log) of the current run, or of RUN\n"
	"(a directory name under runs/, run-<UTC timestamp>-<n>). Every byte as the workload\n"
	"wrote it, up to the sandbox's transcript budget; past it, a line\n"
	"\"[agentic: transcript cut: ...]\" and nothing more (metrics.json counts the rest).\n";

static int verb_logs(int argc, char **argv, struct opts *o)
{
	static uint8_t reqbuf[1024];
	struct http_exchange_opts xo = { .body_limit = 0, .read_timeout_ms = -1 };
	const char *name = NULL, *run = NULL;
	bool err = false;
	char target[256];
	struct buf req;
	int c, r;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(logs_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--stderr") == 0)
			err = true;
		else if (i + 1 < argc && strcmp(argv[i], "--run") == 0)
			run = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return usage(logs_help);
	}
	if (!name || name_target(name, target, 128) != 0)
		return usage(logs_help);
	if (run && (strlen(run) > 64 || strspn(run, "abcdefghijklmnopqrstuvwxyz"
					       "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") != strlen(run))) {
		fprintf(stderr, "agentic logs: '%s' is not a run name\n", run);
		return 2;
	}
	snprintf(target + strlen(target), sizeof(target) - strlen(target), "/logs?stream=%s%s%s",
		 err ? "stderr" : "stdout", run ? "&run=" : "", run ? run : "");
	buf_init(&req, reqbuf, sizeof(reqbuf));
	if (http_conn_init(&conn, o->socket) != 0 ||
	    http_request_write(&req, "GET", target, "agenticd", NULL, NULL, 0) != 0 ||
	    http_conn_begin(&conn, req.data, req.len, &xo) != 0)
		return 1;
	r = read_answer(1);
	if (r == ANSWER_OUT_FAILED)
		return 1; /* stdout went away */
	if (r != HTTP_EV_DONE) {
		fprintf(stderr, "agentic logs: cannot read from agenticd at %s: %s\n", o->socket,
			r == HTTP_ERR_CONNECT ? strerror(conn.sys_errno) : err_str(r));
		return 1;
	}
	return conn.parser.status == 200 ? 0 : api_error(conn.parser.status);
}

/* ---- profiles ---- */

static const char profiles_help[] =
	"usage: agentic profiles                 list agenticd's startup profiles\n"
	"       agentic profiles show ID         one profile, as agenticd read it (JSON)\n"
	"       agentic profiles check FILE      validate a profile file offline\n"
	"The list shows every file of profiles_dir, valid or not, with why not. check reads FILE\n"
	"as agenticd would (no agenticd needed): exit 0 when it is valid (and says so when the\n"
	"docker runtime would refuse it for a raw credential), 1 when it is not (the field and\n"
	"what is wrong on stderr), 2 for usage errors. agenticd also requires each file be owned\n"
	"by root and not writable by group or other; check notes it when FILE is not.\n";

static int profiles_check(const char *file)
{
	static struct profile p;
	static char text[PROFILE_FILE_BYTES + 1];
	char err[256], why[512];
	size_t len = 0;
	ssize_t got;
	struct stat st;
	int fd = open(file, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		fprintf(stderr, "agentic profiles check: %s: %s\n", file, strerror(errno));
		return 1;
	}
	while (len < sizeof(text) && (got = read(fd, text + len, sizeof(text) - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			fprintf(stderr, "agentic profiles check: %s: %s\n", file, strerror(errno));
			close(fd);
			return 1;
		}
		len += (size_t)got;
	}
	if (fstat(fd, &st) == 0 && (st.st_uid != 0 || (st.st_mode & 022)))
		fprintf(stderr, "agentic profiles check: note: agenticd refuses %s as it is (%s)\n",
			file, st.st_uid != 0 ? "not owned by root" : "writable by group or other");
	close(fd);
	if (profile_parse(&p, text, len, err, sizeof(err)) != 0) {
		fprintf(stderr, "agentic profiles check: %s: %s\n", file, err);
		return 1;
	}
	if (profile_shared_kernel_refusal(&p, why, sizeof(why)))
		printf("%s: valid, id %s (the docker runtime would refuse it: %s)\n", file, p.id, why);
	else
		printf("%s: valid, id %s\n", file, p.id);
	return 0;
}

static int profiles_list(struct opts *o)
{
	struct json_doc doc;
	char id[PROFILE_ID_BYTES], valid[8], image[256], error[512];
	int status, arr;

	status = call(o, "GET", "/api/v2/admin/profiles", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((arr = json_obj_get(&doc, 0, "profiles")) < 0 || doc.tok[arr].type != JSON_ARRAY) {
		fprintf(stderr, "agentic: agenticd's answer has no profiles list\n");
		return 1;
	}
	printf("%-24s %-6s %-32s %s\n", "ID", "VALID", "IMAGE", "ERROR");
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i)) {
		field(&doc, i, "id", id, sizeof(id));
		field(&doc, i, "image", image, sizeof(image));
		printf("%-24s %-6s %-32s %s\n", id[0] ? id : "-",
		       field(&doc, i, "valid", valid, sizeof(valid)), image[0] ? image : "-",
		       field(&doc, i, "error", error, sizeof(error)));
	}
	return 0;
}

static int profiles_show(struct opts *o, const char *id)
{
	char target[128];
	int status;

	if (!id[0] || strlen(id) >= PROFILE_ID_BYTES ||
	    strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789_.-") != strlen(id)) {
		fprintf(stderr, "agentic profiles: '%s' is not a profile id\n", id);
		return 2;
	}
	snprintf(target, sizeof(target), "/api/v2/admin/profiles/%s", id);
	o->json = true; /* a profile is shown as its JSON */
	status = call(o, "GET", target, NULL, 0, 200, NULL);
	return status < 0 ? 0 : status;
}

static int verb_profiles(int argc, char **argv, struct opts *o)
{
	const char *args[2] = { NULL, NULL };
	int n = 0, c;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(profiles_help);
		if (c)
			continue;
		if (argv[i][0] == '-' || n == 2)
			return usage(profiles_help);
		args[n++] = argv[i];
	}
	if (n == 0)
		return profiles_list(o);
	if (n == 2 && strcmp(args[0], "show") == 0)
		return profiles_show(o, args[1]);
	if (n == 2 && strcmp(args[0], "check") == 0)
		return profiles_check(args[1]);
	return usage(profiles_help);
}

struct verb {
	const char *name;
	int (*run)(int argc, char **argv, struct opts *o);
	const char *help;
};

/* ---- egress (docs/EGRESS.md) ---- */

static void strs_line(const struct json_doc *doc, int arr, char *out, size_t size)
{
	char v[300];
	struct buf b;

	buf_init(&b, out, size);
	out[0] = '\0';
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		if (json_str(doc, i, v, sizeof(v)) < 0)
			continue;
		buf_printf(&b, "%s%s", b.len ? " " : "", v);
	}
	if (!b.len)
		snprintf(out, size, "(none)");
}

static void egress_policy_print(const struct json_doc *doc, int p)
{
	char v[2048];
	int arr;

	if (p < 0 || doc->tok[p].type != JSON_OBJECT) {
		printf("policy     none: egress is closed (no proxy in the sandbox)\n");
		return;
	}
	printf("%-10s %s\n", "mode", field(doc, p, "mode", v, sizeof(v)));
	strs_line(doc, json_obj_get(doc, p, "allow"), v, sizeof(v));
	printf("%-10s %s\n", "allow", v);
	arr = json_obj_get(doc, p, "routes");
	printf("routes:%s\n", json_first(doc, arr) < 0 ? " none" : "");
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		char h[300], up[300], hd[80], sf[LIMIT_PATH_BYTES], m[200], pr[2048];

		field(doc, i, "host", h, sizeof(h));
		field(doc, i, "upstream", up, sizeof(up));
		field(doc, i, "header", hd, sizeof(hd));
		field(doc, i, "secret_file", sf, sizeof(sf));
		strs_line(doc, json_obj_get(doc, i, "methods"), m, sizeof(m));
		strs_line(doc, json_obj_get(doc, i, "path_prefixes"), pr, sizeof(pr));
		printf("  %s -> %s  header %s from %s  methods %s  paths %s\n", h, up, hd, sf, m,
		       pr);
	}
	printf("%-10s %s per minute\n", "rate", field(doc, p, "rate_per_minute", v, sizeof(v)));
	printf("%-10s %s bytes per connection\n", "max",
	       field(doc, p, "max_bytes_per_connection", v, sizeof(v)));
	strs_line(doc, json_obj_get(doc, p, "allow_ranges"), v, sizeof(v));
	printf("%-10s %s\n", "ranges", v);
}

static void egress_audit_print(const struct json_doc *doc, int arr)
{
	printf("%-24s %-7s %-7s %-32s %-20s %-10s %-20s %6s %10s %10s %7s\n", "TS", "KIND",
	       "METHOD", "HOST:PORT", "PATH", "DECISION", "REASON", "STATUS", "UP", "DOWN", "MS");
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		char ts[40], kind[16], method[16], host[260], port[8], hp[270], path[256], dec[16],
			reason[32], status[8], up[24], down[24], ms[24];

		field(doc, i, "ts", ts, sizeof(ts));
		field(doc, i, "kind", kind, sizeof(kind));
		field(doc, i, "method", method, sizeof(method));
		field(doc, i, "host", host, sizeof(host));
		field(doc, i, "port", port, sizeof(port));
		field(doc, i, "path", path, sizeof(path));
		field(doc, i, "decision", dec, sizeof(dec));
		field(doc, i, "reason", reason, sizeof(reason));
		field(doc, i, "status", status, sizeof(status));
		field(doc, i, "bytes_up", up, sizeof(up));
		field(doc, i, "bytes_down", down, sizeof(down));
		field(doc, i, "duration_ms", ms, sizeof(ms));
		if (strcmp(kind, "policy") == 0) {
			char mode[16];

			field(doc, i, "mode", mode, sizeof(mode));
			snprintf(hp, sizeof(hp), "(mode %s)", mode[0] ? mode : "-");
		} else if (host[0]) {
			snprintf(hp, sizeof(hp), strchr(host, ':') ? "[%s]:%s" : "%s:%s", host,
				 port[0] ? port : "-");
		} else {
			snprintf(hp, sizeof(hp), "-");
		}
		printf("%-24s %-7s %-7s %-32s %-20s %-10s %-20s %6s %10s %10s %7s\n", ts[0] ? ts : "-",
		       kind[0] ? kind : "-", method[0] ? method : "-", hp, path[0] ? path : "-",
		       dec[0] ? dec : "-", reason[0] ? reason : "-", status[0] ? status : "-",
		       up[0] ? up : "-", down[0] ? down : "-", ms[0] ? ms : "-");
	}
	if (json_first(doc, arr) < 0)
		printf("(no audit lines in the current run)\n");
}

static const char egress_help[] =
	"usage: agentic egress NAME [--json] [--tail K]\n"
	"Shows the sandbox's egress policy (mode, allow, credential routes, rate, byte cap,\n"
	"address ranges) and the last K lines (default 20, at most 100) of its current run's\n"
	"audit, egress.jsonl: time, kind (tunnel, route, unknown, policy), method, host:port,\n"
	"path (never the query), decision (allow, deny, would_deny, set), reason, status, bytes\n"
	"up and down, duration. A policy is replaced with PUT /api/v1/containers/NAME/egress\n"
	"(docs/EGRESS.md has the formats).\n";

static int verb_egress(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	const char *name = NULL;
	char target[200], v[96];
	long tail = 20;
	int status, c;

	for (int i = 1; i < argc; i++) {
		if ((c = common_opt(o, argc, argv, &i)) < 0)
			return usage(egress_help);
		if (c)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "--tail") == 0) {
			char *end;

			tail = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || tail < 0 || tail > 100)
				return usage(egress_help);
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			return usage(egress_help);
		}
	}
	if (!name || name_target(name, target, 128) != 0)
		return usage(egress_help);
	snprintf(target + strlen(target), sizeof(target) - strlen(target), "/egress?tail=%ld", tail);
	status = call(o, "GET", target, NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	printf("%-10s %s\n", "name", field(&doc, 0, "name", v, sizeof(v)));
	printf("%-10s %s\n", "egress", field(&doc, json_obj_get(&doc, 0, "posture"), "egress", v,
					     sizeof(v)));
	egress_policy_print(&doc, json_obj_get(&doc, 0, "policy"));
	printf("\n");
	egress_audit_print(&doc, json_obj_get(&doc, 0, "audit"));
	return 0;
}

static const struct verb verbs[] = {
	{ "create", verb_create, create_help },
	{ "ls", verb_ls, ls_help },
	{ "inspect", verb_inspect, inspect_help },
	{ "posture", verb_posture, posture_help },
	{ "egress", verb_egress, egress_help },
	{ "rm", verb_rm, rm_help },
	{ "exec", verb_exec, exec_help },
	{ "logs", verb_logs, logs_help },
	{ "profiles", verb_profiles, profiles_help },
};

static const struct verb *find(const char *name)
{
	for (size_t i = 0; i < ARRAY_LEN(verbs); i++)
		if (strcmp(verbs[i].name, name) == 0)
			return &verbs[i];
	return NULL;
}

int cli_is_verb(const char *name)
{
	return find(name) != NULL;
}

int cli_main(int argc, char **argv)
{
	const struct verb *v = find(argv[0]);
	struct opts o = { 0 };

	if (!v)
		return 2;
	if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("%s%s", v->help, common_help);
		return 0;
	}
	o.socket = getenv("AGENTIC_ADMIN_SOCKET");
	if (!o.socket || !o.socket[0])
		o.socket = DEFAULT_SOCKET;
	return v->run(argc, argv, &o);
}
