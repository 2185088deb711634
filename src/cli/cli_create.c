/* cli_create.c: `agentic create`: the create request built from the options, sent, and the
 * sandbox's name printed once it is ready. */
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

const char cli_create_help[] =
	"usage: agentic create [--profile ID] [--runtime docker|vm] [--image I] [--name N]\n"
	"                      [--node NODE] [--env K=V]...\n"
	"                      [--mount SRC:DST[:ro]]... [--network NET] [--label K=V]...\n"
	"                      [--disk SIZE] [--memory SIZE] [--cpus N] [--pids N]\n"
	"                      [--require-tier T1|T0] [--ttl SECONDS] [-- CMD...]\n"
	"Creates a sandbox and waits until its agent is ready (or the create failed and was\n"
	"rolled back). Prints the sandbox's name. --profile starts from a startup profile of\n"
	"profiles_dir (its image, env, cmd, resources, mounts, network; the options given here\n"
	"override or add to it). --disk is its disk budget, the size of its workspace, and\n"
	"--memory its memory limit, in bytes or with a binary suffix k, m, g, t (defaults:\n"
	"default_disk_bytes, default_memory_bytes); --cpus a number of CPUs (0.5, 2); --pids\n"
	"its process limit. --require-tier T1 refuses the create (422 tier_refused, with the\n"
	"reasons) if the sandbox would be T0, before anything is made. --runtime vm makes it a\n"
	"QEMU guest with its own kernel (no network, no --mount, no --network; docs/VM.md).\n"
	"--ttl removes the sandbox that many seconds after the create (ttl_seconds).\n"
	"On a fleet node the create goes to the node that fits (docs/FLEET.md); --node makes\n"
	"it on that node, and --node with the asked node's own name makes it there without\n"
	"etcd.\n";

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

/* What `agentic create` was given. */
struct create_args {
	const char *image, *name, *network, *profile, *tier, *cpus, *runtime, *node;
	const char *env[MAX_ENV], *mounts[MAX_MOUNTS], *labels[16];
	uint64_t disk, memory, pids, ttl;
	char **cmd;
	int nenv, nmounts, nlabels, ncmd;
};

/* --disk, --memory, --pids, --ttl or --cpus at argv[*i], its value after it: 1 taken, 0 not one of
 * them, 2 a malformed value (said why). */
static int create_limit_opt(struct create_args *a, char **argv, int *i)
{
	const char *opt = argv[*i];

	if (strcmp(opt, "--disk") == 0) {
		if (!(a->disk = size_arg(argv[++*i])) || a->disk > INT64_MAX) {
			fprintf(stderr, "agentic create: --disk takes a size (bytes, or 512m, 2g)\n");
			return 2;
		}
	} else if (strcmp(opt, "--memory") == 0) {
		if (!(a->memory = size_arg(argv[++*i])) || a->memory > INT64_MAX) {
			fprintf(stderr, "agentic create: --memory takes a size (bytes, or 512m, "
				"2g)\n");
			return 2;
		}
	} else if (strcmp(opt, "--pids") == 0) {
		if (parse_u64(argv[++*i], INT32_MAX, &a->pids) != 0 || !a->pids) {
			fprintf(stderr, "agentic create: --pids takes a positive whole number\n");
			return 2;
		}
	} else if (strcmp(opt, "--ttl") == 0) {
		if (parse_u64(argv[++*i], LIMIT_SANDBOX_TTL_S, &a->ttl) != 0) {
			fprintf(stderr, "agentic create: --ttl takes whole seconds, at most %d\n",
				LIMIT_SANDBOX_TTL_S);
			return 2;
		}
	} else if (strcmp(opt, "--cpus") == 0) {
		const char *cpus = a->cpus = argv[++*i];

		if (!*cpus || strspn(cpus, "0123456789.") != strlen(cpus) || *cpus == '.') {
			fprintf(stderr, "agentic create: --cpus takes a number (0.5, 2)\n");
			return 2;
		}
	} else {
		return 0;
	}
	return 1;
}

/* The options into a: 0, or the exit status (2; usage printed when it helps). */
static int create_parse(int argc, char **argv, struct opts *o, struct create_args *a)
{
	int c;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) != 0) {
			if (c < 0)
				return cli_usage_error(cli_create_help);
		} else if (strcmp(argv[i], "--") == 0) {
			a->cmd = argv + i + 1;
			a->ncmd = argc - i - 1;
			break;
		} else if (i + 1 < argc && strcmp(argv[i], "--image") == 0) {
			a->image = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--name") == 0) {
			a->name = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--node") == 0) {
			a->node = argv[++i];
			if (!a->node[0] || strspn(a->node, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
						   strlen(a->node) || strlen(a->node) > 63) {
				fprintf(stderr, "agentic create: --node is a node's name (a-z, 0-9, -)\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--runtime") == 0) {
			a->runtime = argv[++i];
			if (strcmp(a->runtime, "docker") != 0 && strcmp(a->runtime, "vm") != 0) {
				fprintf(stderr, "agentic create: --runtime is docker or vm\n");
				return 2;
			}
		} else if (i + 1 < argc && strcmp(argv[i], "--network") == 0) {
			a->network = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--env") == 0 && a->nenv < MAX_ENV) {
			a->env[a->nenv++] = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--mount") == 0 &&
			   a->nmounts < MAX_MOUNTS) {
			a->mounts[a->nmounts++] = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--label") == 0 && a->nlabels < 16) {
			a->labels[a->nlabels++] = argv[++i];
		} else if (i + 1 < argc && (c = create_limit_opt(a, argv, &i)) != 0) {
			if (c == 2)
				return 2;
		} else if (i + 1 < argc && strcmp(argv[i], "--profile") == 0) {
			a->profile = argv[++i];
		} else if (i + 1 < argc && strcmp(argv[i], "--require-tier") == 0) {
			a->tier = argv[++i];
			if (strcmp(a->tier, "T1") != 0 && strcmp(a->tier, "T0") != 0) {
				fprintf(stderr, "agentic create: --require-tier is T1 or T0\n");
				return 2;
			}
		} else {
			fprintf(stderr, "agentic create: unexpected %s\n", argv[i]);
			return cli_usage_error(cli_create_help);
		}
	}
	return 0;
}

static void str_member(struct json_writer *w, const char *key, const char *v)
{
	if (v) {
		json_key(w, key);
		json_str_write(w, v);
	}
}

static void int_member(struct json_writer *w, const char *key, uint64_t v)
{
	if (v) {
		json_key(w, key);
		json_int_write(w, (int64_t)v);
	}
}

/* The create request's JSON into w: 0, or the exit status 2 (said why). */
static int create_body(const struct create_args *a, struct json_writer *w)
{
	char key[128];

	json_obj_begin(w);
	str_member(w, "name", a->name);
	str_member(w, "image", a->image);
	str_member(w, "runtime", a->runtime);
	str_member(w, "network", a->network);
	str_member(w, "profile", a->profile);
	str_member(w, "require_tier", a->tier);
	int_member(w, "disk_bytes", a->disk);
	int_member(w, "ttl_seconds", a->ttl);
	if (a->memory || a->pids || a->cpus) {
		json_key(w, "resources");
		json_obj_begin(w);
		int_member(w, "memory", a->memory);
		int_member(w, "pids", a->pids);
		str_member(w, "cpus", a->cpus); /* the API takes "0.5" as it takes 0.5 */
		json_obj_end(w);
	}
	cli_json_strs(w, "env", a->env, a->nenv);
	cli_json_strs(w, "mounts", a->mounts, a->nmounts);
	json_key(w, "labels");
	json_obj_begin(w);
	for (int i = 0; i < a->nlabels; i++) {
		const char *eq = strchr(a->labels[i], '=');

		if (!eq || eq == a->labels[i]) {
			fprintf(stderr, "agentic create: --label takes KEY=VALUE\n");
			return 2;
		}
		snprintf(key, sizeof(key), "%.*s", (int)(eq - a->labels[i]), a->labels[i]);
		json_key(w, key);
		json_str_write(w, eq + 1);
	}
	json_obj_end(w);
	cli_json_strs(w, "cmd", (const char *const *)a->cmd, a->ncmd);
	json_obj_end(w);
	if (json_writer_finish(w) != 0) {
		fprintf(stderr, "agentic create: arguments too long or not UTF-8\n");
		return 2;
	}
	return 0;
}

int cli_verb_create(int argc, char **argv, struct opts *o)
{
	static char out[256 * 1024];
	struct create_args a = { 0 };
	int status;
	struct buf b;
	struct json_writer w;
	struct json_doc doc;
	char s1[128], s2[64], s3[32], s4[64], path[128];

	if ((status = create_parse(argc, argv, o, &a)) != 0)
		return status;
	if (a.ncmd > MAX_CMD) {
		fprintf(stderr, "agentic create: at most %d command arguments\n", MAX_CMD);
		return 2;
	}
	buf_init(&b, out, sizeof(out));
	json_writer_init(&w, &b);
	if ((status = create_body(&a, &w)) != 0)
		return status;
	snprintf(path, sizeof(path), "/api/v1/containers%s%s", a.node ? "?node=" : "",
		 a.node ? a.node : "");
	status = cli_call(o, "POST", path, (const char *)b.data, b.len, 201, &doc);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s\n", cli_field(&doc, 0, "name", s1, sizeof(s1)));
	fprintf(stderr, "ready: instance %s, control uid %s, subnet %s, network %s\n",
		cli_field(&doc, 0, "instance_id", s4, sizeof(s4)),
		cli_field(&doc, 0, "control_uid", s3, sizeof(s3)),
		cli_field(&doc, 0, "subnet", s2, sizeof(s2)), cli_field(&doc, 0, "network", out, 128));
	return 0;
}
