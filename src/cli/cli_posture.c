/* cli_posture.c: `agentic posture` and `agentic egress`: a sandbox's tier with its reasons
 * (and declaring a taint), its egress policy and audit. */
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
const char *cli_posture_tier(const struct json_doc *doc, int obj, char *out, size_t size)
{
	cli_field(doc, json_obj_get(doc, obj, "posture"), "tier", out, size);
	if (!out[0])
		snprintf(out, size, "-");
	return out;
}

/* "T0 (env_credential, network_unverified)": the posture object at p, on one line. */
const char *cli_posture_line(const struct json_doc *doc, int p, char *out, size_t size)
{
	int arr = json_obj_get(doc, p, "reasons");
	char word[64];
	struct buf b;

	buf_init(&b, out, size);
	cli_field(doc, p, "tier", word, sizeof(word));
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

	printf("%-10s %s\n", "tier", cli_field(doc, p, "tier", v, sizeof(v)));
	printf("%-10s %s\n", "isolation", cli_field(doc, p, "isolation", v, sizeof(v)));
	printf("%-10s %s\n", "egress", cli_field(doc, p, "egress", v, sizeof(v)));
	printf("%-10s %s\n", "identity", cli_field(doc, p, "identity", v, sizeof(v)));
	/* a VM's: no interface at all (QEMU -nic none), nothing on the engine to read */
	if (strcmp(cli_field(doc, p, "isolation", v, sizeof(v)), "shared-kernel") != 0)
		printf("%-10s %s\n", "network", "none (a VM: no interface but lo)");
	else
		printf("%-10s %s\n", "network", strcmp(cli_field(doc, p, "network_verified", v,
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
		printf("  %-24s %s\n", cli_field(doc, i, "reason", v, sizeof(v)),
		       cli_field(doc, i, "at", at, sizeof(at)));
}

const char cli_posture_help[] =
	"usage: agentic posture NAME [--json] [--taint REASON]\n"
	"Shows the sandbox's posture: its tier (T1, or T0 with reasons), isolation, egress,\n"
	"identity, each reason with what it means, and its taints with the time each was seen.\n"
	"--taint REASON records a taint (sticky for the rest of the container's life: T0):\n"
	"operator_declared (e.g. a manual provider login inside it), or direct_docker_exec,\n"
	"network_attached, container_changed for what agenticd could not see happen.\n";

int cli_verb_posture(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	const char *name = NULL, *taint = NULL;
	char target[160], data[96], v[16];
	int status, c, p;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_posture_help);
		if (c)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "--taint") == 0 && !taint)
			taint = argv[++i];
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return cli_usage_error(cli_posture_help);
	}
	if (!name || cli_name_target(name, target, 128) != 0)
		return cli_usage_error(cli_posture_help);
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
	status = cli_call(o, taint ? "POST" : "GET", target, taint ? data : NULL,
		      taint ? strlen(data) : 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((p = json_obj_get(&doc, 0, "posture")) < 0) {
		fprintf(stderr, "agentic posture: agenticd's answer has no posture\n");
		return 1;
	}
	printf("%-10s %s\n", "name", cli_field(&doc, 0, "name", data, sizeof(data)));
	posture_print(&doc, p);
	if (taint)
		fprintf(stderr, "%s %s\n", taint,
			strcmp(cli_field(&doc, 0, "already_held", v, sizeof(v)), "true") == 0
			? "was already held: nothing changed" : "recorded");
	return 0;
}

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
	printf("%-10s %s\n", "mode", cli_field(doc, p, "mode", v, sizeof(v)));
	strs_line(doc, json_obj_get(doc, p, "allow"), v, sizeof(v));
	printf("%-10s %s\n", "allow", v);
	arr = json_obj_get(doc, p, "routes");
	printf("routes:%s\n", json_first(doc, arr) < 0 ? " none" : "");
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		char h[300], up[300], hd[80], sf[LIMIT_PATH_BYTES], m[200], pr[2048];

		cli_field(doc, i, "host", h, sizeof(h));
		cli_field(doc, i, "upstream", up, sizeof(up));
		cli_field(doc, i, "header", hd, sizeof(hd));
		cli_field(doc, i, "secret_file", sf, sizeof(sf));
		strs_line(doc, json_obj_get(doc, i, "methods"), m, sizeof(m));
		strs_line(doc, json_obj_get(doc, i, "path_prefixes"), pr, sizeof(pr));
		printf("  %s -> %s  header %s from %s  methods %s  paths %s\n", h, up, hd, sf, m,
		       pr);
	}
	printf("%-10s %s per minute\n", "rate", cli_field(doc, p, "rate_per_minute", v, sizeof(v)));
	printf("%-10s %s bytes per connection\n", "max",
	       cli_field(doc, p, "max_bytes_per_connection", v, sizeof(v)));
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

		cli_field(doc, i, "ts", ts, sizeof(ts));
		cli_field(doc, i, "kind", kind, sizeof(kind));
		cli_field(doc, i, "method", method, sizeof(method));
		cli_field(doc, i, "host", host, sizeof(host));
		cli_field(doc, i, "port", port, sizeof(port));
		cli_field(doc, i, "path", path, sizeof(path));
		cli_field(doc, i, "decision", dec, sizeof(dec));
		cli_field(doc, i, "reason", reason, sizeof(reason));
		cli_field(doc, i, "status", status, sizeof(status));
		cli_field(doc, i, "bytes_up", up, sizeof(up));
		cli_field(doc, i, "bytes_down", down, sizeof(down));
		cli_field(doc, i, "duration_ms", ms, sizeof(ms));
		if (strcmp(kind, "policy") == 0) {
			char mode[16];

			cli_field(doc, i, "mode", mode, sizeof(mode));
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

const char cli_egress_help[] =
	"usage: agentic egress NAME [--json] [--tail K]\n"
	"Shows the sandbox's egress policy (mode, allow, credential routes, rate, byte cap,\n"
	"address ranges) and the last K lines (default 20, at most 100) of its current run's\n"
	"audit, egress.jsonl: time, kind (tunnel, route, unknown, policy), method, host:port,\n"
	"path (never the query), decision (allow, deny, would_deny, set), reason, status, bytes\n"
	"up and down, duration. A policy is replaced with PUT /api/v1/containers/NAME/egress\n"
	"(docs/EGRESS.md has the formats).\n";

int cli_verb_egress(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	const char *name = NULL;
	char target[200], v[96];
	long tail = 20;
	int status, c;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_egress_help);
		if (c)
			continue;
		if (i + 1 < argc && strcmp(argv[i], "--tail") == 0) {
			char *end;

			tail = strtol(argv[++i], &end, 10);
			if (*end || end == argv[i] || tail < 0 || tail > 100)
				return cli_usage_error(cli_egress_help);
		} else if (!name && argv[i][0] != '-') {
			name = argv[i];
		} else {
			return cli_usage_error(cli_egress_help);
		}
	}
	if (!name || cli_name_target(name, target, 128) != 0)
		return cli_usage_error(cli_egress_help);
	snprintf(target + strlen(target), sizeof(target) - strlen(target), "/egress?tail=%ld", tail);
	status = cli_call(o, "GET", target, NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	printf("%-10s %s\n", "name", cli_field(&doc, 0, "name", v, sizeof(v)));
	printf("%-10s %s\n", "egress", cli_field(&doc, json_obj_get(&doc, 0, "posture"), "egress", v,
					     sizeof(v)));
	egress_policy_print(&doc, json_obj_get(&doc, 0, "policy"));
	printf("\n");
	egress_audit_print(&doc, json_obj_get(&doc, 0, "audit"));
	return 0;
}
