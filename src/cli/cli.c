/* cli.c: the admin CLI: each verb is one request to agenticd's admin API over its Unix
 * socket, answered in human form or, with --json, as the API's own JSON. Here: the verb
 * table, `ls`, `inspect`, `rm` and `profiles`; the other verbs have a file each. */
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

#include "cli/cli.h"
#include "cli/cli_internal.h"

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
	"  cp       copy a file into or out of a sandbox\n"
	"  profiles list agenticd's startup profiles, show one, check a file offline\n"
	"  e2b-key  mint, list and remove the E2B API's keys\n"
	"  fleet    list the fleet's nodes (a node of a fleet on etcd)\n";

static const char ls_help[] =
	"usage: agentic ls [--fleet]\n"
	"Lists the sandboxes: name, state, posture tier (T1 or T0: agentic posture NAME says\n"
	"why), agent, control uid, subnet, creation time, image. --fleet: every node's\n"
	"sandboxes as this node last read them from etcd (name, node, state, tier; the state\n"
	"lost when their node is).\n";

static int verb_ls(int argc, char **argv, struct opts *o)
{
	struct json_doc doc;
	char name[64], state[16], tier[8], agent[24], uid[16], subnet[24], image[256], created[40];
	int status, arr, c;
	bool fleet = false;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--fleet") == 0)
			fleet = true;
		else if ((c = cli_common_opt(o, argc, argv, &i)) <= 0)
			return cli_usage_error(ls_help);
	}
	if (fleet)
		return cli_fleet_ls_sandboxes(o);
	status = cli_call(o, "GET", "/api/v1/containers", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((arr = json_obj_get(&doc, 0, "containers")) < 0)
		return 1;
	printf("%-24s %-9s %-4s %-14s %-8s %-18s %-24s %s\n", "NAME", "STATE", "TIER", "AGENT", "UID",
	       "SUBNET", "CREATED", "IMAGE");
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i))
		printf("%-24s %-9s %-4s %-14s %-8s %-18s %-24s %s\n",
		       cli_field(&doc, i, "name", name, sizeof(name)),
		       cli_field(&doc, i, "state", state, sizeof(state)),
		       cli_posture_tier(&doc, i, tier, sizeof(tier)),
		       cli_field(&doc, i, "agent", agent, sizeof(agent)),
		       cli_field(&doc, i, "control_uid", uid, sizeof(uid)),
		       cli_field(&doc, i, "subnet", subnet, sizeof(subnet)),
		       cli_field(&doc, i, "created_at", created, sizeof(created)),
		       cli_field(&doc, i, "image", image, sizeof(image)));
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
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(inspect_help);
		if (c == 0 && !name && argv[i][0] != '-')
			name = argv[i];
		else if (c == 0)
			return cli_usage_error(inspect_help);
	}
	if (!name || cli_name_target(name, target, sizeof(target)) != 0)
		return cli_usage_error(inspect_help);
	status = cli_call(o, "GET", target, NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	for (int k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k))) {
		char key[64];
		int val = k + 1;

		json_str(&doc, k, key, sizeof(key));
		if (strcmp(key, "posture") == 0 && doc.tok[val].type == JSON_OBJECT)
			cli_posture_line(&doc, val, v, sizeof(v));
		else if (doc.tok[val].type == JSON_ARRAY || doc.tok[val].type == JSON_OBJECT)
			snprintf(v, sizeof(v), "%.*s", (int)(doc.tok[val].end - doc.tok[val].start),
				 cli_body + doc.tok[val].start);
		else
			cli_field(&doc, 0, key, v, sizeof(v));
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
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(rm_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--force") == 0 || strcmp(argv[i], "-f") == 0)
			force = true;
		else if (strcmp(argv[i], "--keep-workspace") == 0)
			keep = true;
		else if (!name && argv[i][0] != '-')
			name = argv[i];
		else
			return cli_usage_error(rm_help);
	}
	if (!name || cli_name_target(name, target, 128) != 0)
		return cli_usage_error(rm_help);
	if (force || keep)
		snprintf(target + strlen(target), sizeof(target) - strlen(target), "?%s%s%s",
			 force ? "force=1" : "", force && keep ? "&" : "", keep ? "keep_workspace=1" : "");
	status = cli_call(o, "DELETE", target, NULL, 0, 200, NULL);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s\n", name);
	return 0;
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

	status = cli_call(o, "GET", "/api/v2/admin/profiles", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	if ((arr = json_obj_get(&doc, 0, "profiles")) < 0 || doc.tok[arr].type != JSON_ARRAY) {
		fprintf(stderr, "agentic: agenticd's answer has no profiles list\n");
		return 1;
	}
	printf("%-24s %-6s %-32s %s\n", "ID", "VALID", "IMAGE", "ERROR");
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i)) {
		cli_field(&doc, i, "id", id, sizeof(id));
		cli_field(&doc, i, "image", image, sizeof(image));
		printf("%-24s %-6s %-32s %s\n", id[0] ? id : "-",
		       cli_field(&doc, i, "valid", valid, sizeof(valid)), image[0] ? image : "-",
		       cli_field(&doc, i, "error", error, sizeof(error)));
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
	status = cli_call(o, "GET", target, NULL, 0, 200, NULL);
	return status < 0 ? 0 : status;
}

static int verb_profiles(int argc, char **argv, struct opts *o)
{
	const char *args[2] = { NULL, NULL };
	int n = 0, c;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(profiles_help);
		if (c)
			continue;
		if (argv[i][0] == '-' || n == 2)
			return cli_usage_error(profiles_help);
		args[n++] = argv[i];
	}
	if (n == 0)
		return profiles_list(o);
	if (n == 2 && strcmp(args[0], "show") == 0)
		return profiles_show(o, args[1]);
	if (n == 2 && strcmp(args[0], "check") == 0)
		return profiles_check(args[1]);
	return cli_usage_error(profiles_help);
}

struct verb {
	const char *name;
	int (*run)(int argc, char **argv, struct opts *o);
	const char *help;
};

static const struct verb verbs[] = {
	{ "create", cli_verb_create, cli_create_help },
	{ "ls", verb_ls, ls_help },
	{ "inspect", verb_inspect, inspect_help },
	{ "posture", cli_verb_posture, cli_posture_help },
	{ "egress", cli_verb_egress, cli_egress_help },
	{ "rm", verb_rm, rm_help },
	{ "exec", cli_verb_exec, cli_exec_help },
	{ "logs", cli_verb_logs, cli_logs_help },
	{ "cp", cli_verb_cp, cli_cp_help },
	{ "profiles", verb_profiles, profiles_help },
	{ "e2b-key", cli_verb_e2bkey, cli_e2bkey_help },
	{ "fleet", cli_verb_fleet, cli_fleet_help },
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
		printf("%s%s", v->help, cli_common_help);
		return 0;
	}
	o.socket = getenv("AGENTIC_ADMIN_SOCKET");
	if (!o.socket || !o.socket[0])
		o.socket = DEFAULT_SOCKET;
	return v->run(argc, argv, &o);
}
