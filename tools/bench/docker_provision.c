/* docker_provision.c: the provision path (network create, container create, start, remove,
 * network remove) through our client against the same five steps as docker CLI commands,
 * with the same hardened settings, step by step back to back, median of BENCH_RUNS runs
 * (default 31: the engine's own time per step varies by tens of ms, and the CLI's fixed cost
 * per command, what the ratio measures, is about 17 ms of each step).
 * Run by tools/bench/bench_docker, which passes BENCH_LABEL and cleans up by it. */
#include <errno.h>
#include <inttypes.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "docker/docker.h"

#define STEPS 5
#define MAX_RUNS 100
#define IMAGE "agentic/loadout:local"

extern char **environ;

static const char *const step_names[STEPS] = { "network_create", "container_create", "start",
					       "remove", "network_remove" };
static char label_key[64], label_val[64], label_kv[128];
static char sandbox_dir[64], workspace_dir[64];
static const char *bin;
static const char tmpfs_opts[] = "rw,noexec,nosuid,nodev,mode=0700,uid=200000,gid=200000,size=64k";

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void remove_dirs(void)
{
	if (sandbox_dir[0])
		rmdir(sandbox_dir);
	if (workspace_dir[0])
		rmdir(workspace_dir);
}

static void fail(const char *what, const struct docker_error *e)
{
	char text[1024];
	fprintf(stderr, "bench_docker: %s: %s\n", what, e ? docker_error_text(e, text, sizeof(text)) : "");
	exit(1);
}

/* One sandbox's worth of names, for one side of one run. */
struct side {
	char net_name[128], name[128], subnet[32];
	char net[DOCKER_ID_SIZE], id[DOCKER_ID_SIZE];
};

static void side_init(struct side *sd, const char *tag, int run, unsigned base, unsigned slot)
{
	snprintf(sd->net_name, sizeof(sd->net_name), "agentic-bench-%s-net-%s%d", label_val, tag,
		 run);
	snprintf(sd->name, sizeof(sd->name), "agentic-bench-%s-%s%d", label_val, tag, run);
	snprintf(sd->subnet, sizeof(sd->subnet), "10.215.%u.%u/28", base, slot * 16);
}

/* Step s through our client; returns its milliseconds. */
static double ours(struct docker_client *dc, struct side *sd, int s)
{
	struct docker_error e;
	double t0 = now_ms();
	const struct docker_kv net_labels[] = { { label_key, label_val },
						{ "agentic-sandbox", "true" },
						{ "agentic-egress-policy", "default-deny" },
						{ NULL, NULL } };
	const struct docker_network_spec ns = {
		.name = sd->net_name, .internal = true, .subnet = sd->subnet, .labels = net_labels,
		.options = (const struct docker_kv[]){
			{ "com.docker.network.bridge.inhibit_ipv4", "true" }, { NULL, NULL } },
	};
	const struct docker_kv labels[] = { { label_key, label_val }, { "agentic-sandbox", "true" },
					    { "agentic-managed-network", sd->net_name },
					    { NULL, NULL } };
	const struct docker_container_spec cs = {
		.name = sd->name, .image = IMAGE, .user = "0:0",
		.entrypoint = (const char *[]){ "/bin/sleep", NULL },
		.cmd = (const char *[]){ "60", NULL },
		.env = (const char *[]){ "AGENT_ID=bench", NULL },
		.labels = labels,
		.cap_drop = (const char *[]){ "ALL", NULL },
		.cap_add = (const char *[]){ "SETUID", "SETGID", NULL },
		.security_opt = (const char *[]){ "no-new-privileges", NULL },
		.tmpfs = (const struct docker_kv[]){ { "/run/agentic", tmpfs_opts }, { NULL, NULL } },
		.sysctls = (const struct docker_kv[]){ { "net.ipv6.conf.all.disable_ipv6", "1" },
						       { NULL, NULL } },
		.mounts = (const struct docker_mount[]){ { sandbox_dir, "/run/agentic-sandbox", true },
							 { bin, "/sbin/agentic-init", true },
							 { workspace_dir, "/workspace", false },
							 { NULL, NULL, false } },
		.network_mode = sd->net_name,
		.pids_limit = 512, .memory = 1ll << 30, .nano_cpus = 1000000000,
	};
	int r = 0;

	switch (s) {
	case 0:
		r = docker_network_create(dc, &ns, sd->net, &e);
		break;
	case 1:
		r = docker_container_create(dc, &cs, sd->id, &e);
		break;
	case 2:
		r = docker_container_start(dc, sd->id, &e);
		break;
	case 3:
		r = docker_container_remove(dc, sd->id, true, &e);
		break;
	case 4:
		r = docker_network_remove(dc, sd->net, &e);
		break;
	}
	if (r != 0)
		fail(step_names[s], &e);
	return now_ms() - t0;
}

static double run_cli(char *const argv[])
{
	posix_spawn_file_actions_t fa;
	double t0 = now_ms();
	pid_t pid;
	int st;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
	if (posix_spawnp(&pid, "docker", &fa, NULL, argv, environ) != 0) {
		fprintf(stderr, "bench_docker: cannot run the docker CLI\n");
		exit(1);
	}
	posix_spawn_file_actions_destroy(&fa);
	if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "bench_docker: docker %s %s failed\n", argv[1], argv[2]);
		exit(1);
	}
	return now_ms() - t0;
}

/* Step s as a docker CLI command, same settings; returns its milliseconds. */
static double cli(struct side *sd, int s)
{
	char l2[160], m1[160], m2[160], m3[160], tmpfs[160];

	snprintf(l2, sizeof(l2), "agentic-managed-network=%s", sd->net_name);
	snprintf(m1, sizeof(m1), "type=bind,source=%s,target=/run/agentic-sandbox,readonly", sandbox_dir);
	snprintf(m2, sizeof(m2), "type=bind,source=%s,target=/sbin/agentic-init,readonly", bin);
	snprintf(m3, sizeof(m3), "type=bind,source=%s,target=/workspace", workspace_dir);
	snprintf(tmpfs, sizeof(tmpfs), "/run/agentic:%s", tmpfs_opts);

	char *const ncreate[] = { "docker", "network", "create", "--internal", "--subnet",
				  sd->subnet, "-o", "com.docker.network.bridge.inhibit_ipv4=true",
				  "--label", label_kv, "--label", "agentic-sandbox=true", "--label",
				  "agentic-egress-policy=default-deny", sd->net_name, NULL };
	char *const create[] = { "docker", "create", "--name", sd->name, "--user", "0:0",
				 "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID",
				 "--security-opt", "no-new-privileges", "--tmpfs", tmpfs,
				 "--sysctl", "net.ipv6.conf.all.disable_ipv6=1", "--mount", m1,
				 "--mount", m2, "--mount", m3, "--entrypoint", "/bin/sleep",
				 "--env", "AGENT_ID=bench", "--network", sd->net_name,
				 "--pids-limit", "512", "--memory", "1g", "--cpus", "1",
				 "--restart", "no", "--label", label_kv, "--label",
				 "agentic-sandbox=true", "--label", l2, IMAGE, "60", NULL };
	char *const start[] = { "docker", "start", sd->name, NULL };
	char *const rm[] = { "docker", "rm", "-f", sd->name, NULL };
	char *const nrm[] = { "docker", "network", "rm", sd->net_name, NULL };
	char *const *const argv[STEPS] = { ncreate, create, start, rm, nrm };

	return run_cli(argv[s]);
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(void)
{
	static double a[MAX_RUNS][STEPS], c[MAX_RUNS][STEPS];
	double col[MAX_RUNS], ta[MAX_RUNS], tc[MAX_RUNS];
	const char *label = getenv("BENCH_LABEL");
	const char *runs_env = getenv("BENCH_RUNS");
	int runs = runs_env ? atoi(runs_env) : 31;
	struct docker_client dc;
	struct docker_client_config cfg = { 0 };
	struct docker_error e;
	unsigned base = (unsigned)getpid() % 200;

	bin = getenv("AGENTIC_BIN");
	if (!label || !strchr(label, '=') || !bin || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "bench_docker: needs BENCH_LABEL=k=v, AGENTIC_BIN, BENCH_RUNS 1..%d\n",
			MAX_RUNS);
		return 2;
	}
	snprintf(label_kv, sizeof(label_kv), "%s", label);
	snprintf(label_key, sizeof(label_key), "%.*s", (int)(strchr(label, '=') - label), label);
	snprintf(label_val, sizeof(label_val), "%s", strchr(label, '=') + 1);
	snprintf(sandbox_dir, sizeof(sandbox_dir), "/tmp/agentic-bench-sbx-XXXXXX");
	snprintf(workspace_dir, sizeof(workspace_dir), "/tmp/agentic-bench-ws-XXXXXX");
	if (!mkdtemp(sandbox_dir) || !mkdtemp(workspace_dir))
		return 1;
	atexit(remove_dirs);
	/* the static allocator rounds an allocation up to a power of two */
	if (alloc_budget(2 * docker_client_footprint(&cfg) + (1u << 20)) != 0 ||
	    docker_client_init(&dc, &cfg) != 0)
		fail("client init", NULL);
	/* a long-running agenticd negotiates once; that is not part of provisioning */
	if (docker_client_negotiate(&dc, &e))
		fail("negotiate", &e);

	for (int i = 0; i < runs; i++) {
		struct side sa, sc;
		side_init(&sa, "a", i, base, (unsigned)(i % 8));
		side_init(&sc, "c", i, base, (unsigned)(8 + i % 8));
		/* each step runs on both sides back to back, so both meet the engine in the same
		 * state and load; who goes first alternates */
		for (int s = 0; s < STEPS; s++) {
			if ((i + s) % 2 == 0) {
				a[i][s] = ours(&dc, &sa, s);
				c[i][s] = cli(&sc, s);
			} else {
				c[i][s] = cli(&sc, s);
				a[i][s] = ours(&dc, &sa, s);
			}
		}
	}
	for (int i = 0; i < runs; i++) {
		ta[i] = tc[i] = 0;
		for (int s = 0; s < STEPS; s++) {
			ta[i] += a[i][s];
			tc[i] += c[i][s];
		}
	}
	double ma = median(ta, runs), mc = median(tc, runs);
	printf("docker_provision  agentic=%.1fms  cli=%.1fms  ratio=%.2fx (target <= 0.9x: %s)  "
	       "runs=%d  api=%s\n", ma, mc, ma / mc, ma <= 0.9 * mc ? "met" : "MISSED", runs,
	       dc.version);
	for (int s = 0; s < STEPS; s++) {
		double ms, cs;
		for (int i = 0; i < runs; i++)
			col[i] = a[i][s];
		ms = median(col, runs);
		for (int i = 0; i < runs; i++)
			col[i] = c[i][s];
		cs = median(col, runs);
		printf("  %-17s agentic=%7.1fms  cli=%7.1fms  ratio=%.2fx\n", step_names[s], ms, cs,
		       ms / cs);
	}
	/* Where the time goes: what one CLI command costs before the engine does any work
	 * (process start, its own /_ping), against one call of ours that does as little. */
	for (int i = 0; i < runs; i++) {
		char *const version[] = { "docker", "version", "--format", "{{.Server.APIVersion}}",
					  NULL };
		struct docker_call call;
		double t0 = now_ms();
		if (docker_ping_begin(&call, &dc) == 0)
			docker_call_run(&call);
		docker_call_end(&call);
		ta[i] = now_ms() - t0;
		tc[i] = run_cli(version);
	}
	printf("  %-17s agentic=%7.1fms  cli=%7.1fms  (one ping vs one `docker version`: the "
	       "CLI's fixed cost per command; 5 steps pay it 5 times)\n",
	       "per_call_floor", median(ta, runs), median(tc, runs));
	docker_client_free(&dc);
	return 0;
}
