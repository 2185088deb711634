/* test_docker.c: drives the real Docker engine through our client (run by the wrapper
 * tests/integration/test_docker, which passes AGENTIC_TEST_LABEL and removes by that label
 * whatever is left, however this program ends). Everything created carries the label. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "docker/docker.h"

#define NETWORKS 40
#define IMAGE "agentic/loadout:local"

static int tap_n, tap_failed;

static void tap(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", ++tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (!ok)
		tap_failed++;
}

static void diag(const char *fmt, ...)
{
	va_list ap;

	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
}

static void diag_err(const struct docker_error *e)
{
	char text[1024];
	diag("%s", docker_error_text(e, text, sizeof(text)));
}

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static char label_kv[128], label_key[64], label_val[64];
static struct docker_client dc;

/* ---- cleanup by label, through our own client ---- */
struct ids {
	char id[256][DOCKER_ID_SIZE];
	int n;
};

static int collect_id(void *ctx, const struct docker_summary *s)
{
	struct ids *ids = ctx;
	if (ids->n < 256)
		memcpy(ids->id[ids->n++], s->id, DOCKER_ID_SIZE);
	return 0;
}

static int list_labelled(bool networks, struct ids *ids)
{
	struct docker_call c;
	int r = networks ? docker_network_list_begin(&c, &dc, label_kv)
			 : docker_container_list_begin(&c, &dc, label_kv);

	ids->n = 0;
	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0)
		r = docker_result_each(&c, collect_id, ids);
	docker_call_end(&c);
	return r;
}

static void cleanup(void)
{
	static struct ids ids;

	if (!dc.slots)
		return;
	if (list_labelled(false, &ids) == 0)
		for (int i = 0; i < ids.n; i++)
			docker_container_remove(&dc, ids.id[i], true, NULL);
	if (list_labelled(true, &ids) == 0)
		for (int i = 0; i < ids.n; i++)
			docker_network_remove(&dc, ids.id[i], NULL);
}

/* ---- events, collected while the rest of the test runs ---- */
struct seen {
	char action[64][32];
	char id[64][DOCKER_ID_SIZE];
	int n;
};

static int on_event(void *ctx, const struct docker_event *ev)
{
	struct seen *s = ctx;
	char v[128];

	/* the filter already asked for our label; check that it was applied */
	if (docker_event_attr(ev, label_key, v, sizeof(v)) != 0 || strcmp(v, label_val) != 0)
		return 0;
	if (s->n < 64) {
		snprintf(s->action[s->n], sizeof(s->action[0]), "%.31s", ev->action);
		snprintf(s->id[s->n], DOCKER_ID_SIZE, "%.64s", ev->id);
		s->n++;
	}
	return 0;
}

/* Steps the event call until it would block. */
static int pump_events(struct docker_call *c)
{
	int r = docker_call_step(c);
	return r == -EAGAIN ? 0 : r;
}

static bool saw_in_order(const struct seen *s, const char *id, const char *const *actions)
{
	int i = 0;
	for (int k = 0; k < s->n && actions[i]; k++)
		if (strcmp(s->id[k], id) == 0 && strcmp(s->action[k], actions[i]) == 0)
			i++;
	return actions[i] == NULL;
}

/* ---- logs ---- */
struct logs {
	char out[256], err[256];
	size_t nout, nerr;
};

static int on_log(void *ctx, int stream, const uint8_t *data, size_t len)
{
	struct logs *l = ctx;
	char *dst = stream == 2 ? l->err : l->out;
	size_t *n = stream == 2 ? &l->nerr : &l->nout;

	if (*n + len >= sizeof(l->out))
		return -ENOSPC;
	memcpy(dst + *n, data, len);
	*n += len;
	dst[*n] = '\0';
	return 0;
}

/* ---- a delaying proxy between a client and the engine ---- */
struct proxy {
	char path[108];
	const char *upstream;
	const char *marker;   /* a request holding this has its answer held back */
	int delay_ms;
	int lfd;
	pthread_t thread;
};

struct relay {
	struct proxy *p;
	int cfd;
};

static int connect_unix(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void *relay_main(void *arg)
{
	struct relay *rl = arg;
	int ufd = connect_unix(rl->p->upstream);
	int64_t hold_until = 0;
	char buf[16384];

	while (ufd >= 0) {
		int64_t now = now_ms();
		bool holding = now < hold_until;
		struct pollfd pfd[2] = { { rl->cfd, POLLIN, 0 }, { ufd, holding ? 0 : POLLIN, 0 } };
		if (poll(pfd, 2, holding ? (int)(hold_until - now) : -1) < 0)
			break;
		if (pfd[0].revents) {
			ssize_t n = read(rl->cfd, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (memmem(buf, (size_t)n, rl->p->marker, strlen(rl->p->marker)))
				hold_until = now_ms() + rl->p->delay_ms;
			if (send(ufd, buf, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
		if (pfd[1].revents) {
			ssize_t n = read(ufd, buf, sizeof(buf));
			if (n <= 0)
				break;
			if (send(rl->cfd, buf, (size_t)n, MSG_NOSIGNAL) != n)
				break;
		}
	}
	if (ufd >= 0)
		close(ufd);
	close(rl->cfd);
	free(rl);
	return NULL;
}

static void *proxy_main(void *arg)
{
	struct proxy *p = arg;

	for (;;) {
		int fd = accept(p->lfd, NULL, NULL);
		pthread_t t;
		struct relay *rl;
		if (fd < 0)
			return NULL;
		rl = malloc(sizeof(*rl));
		rl->p = p;
		rl->cfd = fd;
		if (pthread_create(&t, NULL, relay_main, rl) != 0) {
			close(fd);
			free(rl);
			continue;
		}
		pthread_detach(t);
	}
}

static int proxy_start(struct proxy *p)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	snprintf(p->path, sizeof(p->path), "/tmp/agentic-test-proxy-%d.sock", (int)getpid());
	unlink(p->path);
	p->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memcpy(sa.sun_path, p->path, sizeof(p->path));
	if (bind(p->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(p->lfd, 16) != 0)
		return -errno;
	return pthread_create(&p->thread, NULL, proxy_main, p) == 0 ? 0 : -1;
}

static void proxy_stop(struct proxy *p)
{
	shutdown(p->lfd, SHUT_RDWR);
	pthread_join(p->thread, NULL);
	close(p->lfd);
	unlink(p->path);
}

/* ---- the parts of the test ---- */
static char nets[NETWORKS][DOCKER_ID_SIZE];
static char subnets[NETWORKS][32];

static void test_networks(void)
{
	static struct docker_network ni;
	struct docker_error e;
	static struct ids ids;
	unsigned base = 0;
	int created = 0, r;
	char name[128];
	FILE *f = fopen("/dev/urandom", "rb");

	/* 40 /28s from a random 10.214.X.0 on: explicit subnets, beyond the ~30 networks
	 * Docker's default pools would give */
	if (!f || fread(&base, sizeof(base), 1, f) != 1)
		base = (unsigned)getpid();
	if (f)
		fclose(f);
	base %= 250;
	for (int i = 0; i < NETWORKS; i++) {
		const struct docker_kv labels[] = { { label_key, label_val },
						    { "agentic-sandbox", "true" },
						    { "agentic-egress-policy", "default-deny" },
						    { NULL, NULL } };
		const struct docker_kv options[] = {
			{ "com.docker.network.bridge.inhibit_ipv4", "true" }, { NULL, NULL } };
		struct docker_network_spec spec = { .name = name, .internal = true,
						    .subnet = subnets[i], .labels = labels,
						    .options = options };
		snprintf(subnets[i], sizeof(subnets[i]), "10.214.%u.%u/28", base + i / 16,
			 (i % 16) * 16);
		snprintf(name, sizeof(name), "agentic-test-%s-%02d", label_val, i);
		r = docker_network_create(&dc, &spec, nets[i], &e);
		if (r != 0) {
			diag_err(&e);
			break;
		}
		created++;
	}
	tap(created == NETWORKS, "created %d internal networks with explicit /28 subnets", created);

	r = docker_network_inspect(&dc, nets[0], &ni, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0 && ni.internal && strcmp(ni.subnet, subnets[0]) == 0 &&
		    strcmp(ni.driver, "bridge") == 0 &&
		    strcmp(docker_kv_get(ni.options, ni.noptions,
					 "com.docker.network.bridge.inhibit_ipv4") ?: "", "true") == 0 &&
		    strcmp(docker_kv_get(ni.labels, ni.nlabels, label_key) ?: "", label_val) == 0 &&
		    strcmp(docker_kv_get(ni.labels, ni.nlabels, "agentic-egress-policy") ?: "",
			   "default-deny") == 0,
	    "network inspect returns Internal, subnet %s, inhibit_ipv4 and the labels", subnets[0]);

	r = list_labelled(true, &ids);
	tap(r == 0 && ids.n == NETWORKS, "network list by label finds all %d (found %d)", NETWORKS,
	    ids.n);
}

/* CAP_ prefixes are the engine's choice (newer engines add them); compare without. */
static const char *cap_name(const char *c)
{
	return strncmp(c, "CAP_", 4) == 0 ? c + 4 : c;
}

static bool has(const char *const *v, uint32_t n, const char *s)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(cap_name(v[i]), cap_name(s)) == 0)
			return true;
	return false;
}

static const struct docker_mount *mount_at(const struct docker_container *ci, const char *target)
{
	for (uint32_t i = 0; i < ci->nmounts; i++)
		if (strcmp(ci->mounts[i].target, target) == 0)
			return &ci->mounts[i];
	return NULL;
}

static char sandbox_dir[64], workspace_dir[64], cname[128], cid[DOCKER_ID_SIZE];
static const char tmpfs_opts[] = "rw,noexec,nosuid,nodev,mode=0700,uid=200000,gid=200000,size=64k";

static void test_hardened_container(struct docker_call *events, struct seen *seen)
{
	static struct docker_container ci;
	struct docker_error e;
	const char *bin = getenv("AGENTIC_BIN");
	int64_t code = -1;
	struct logs logs = { { 0 }, { 0 }, 0, 0 };
	struct docker_call c;
	int r;

	snprintf(cname, sizeof(cname), "agentic-test-%s-hardened", label_val);
	const struct docker_kv labels[] = { { label_key, label_val }, { "agentic-sandbox", "true" },
					    { "agentic-managed-network", nets[0] }, { NULL, NULL } };
	const struct docker_mount mounts[] = { { sandbox_dir, "/run/agentic-sandbox", true },
					       { bin, "/sbin/agentic-init", true },
					       { workspace_dir, "/workspace", false },
					       { NULL, NULL, false } };
	const struct docker_container_spec spec = {
		.name = cname,
		.image = IMAGE,
		.user = "0:0",
		.entrypoint = (const char *[]){ "/bin/sh", "-c", NULL },
		.cmd = (const char *[]){ "echo out-line; echo err-line >&2; exit 7", NULL },
		.env = (const char *[]){ "AGENT_ID=test", NULL },
		.labels = labels,
		.cap_drop = (const char *[]){ "ALL", NULL },
		.cap_add = (const char *[]){ "SETUID", "SETGID", NULL },
		.security_opt = (const char *[]){ "no-new-privileges", NULL },
		.tmpfs = (const struct docker_kv[]){ { "/run/agentic", tmpfs_opts }, { NULL, NULL } },
		.sysctls = (const struct docker_kv[]){ { "net.ipv6.conf.all.disable_ipv6", "1" },
						       { NULL, NULL } },
		.mounts = mounts,
		.network_mode = nets[0],
		.pids_limit = 64,
		.memory = 64 << 20,
		.nano_cpus = 500000000,
		.readonly_rootfs = true,
	};

	r = docker_container_create(&dc, &spec, cid, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0, "container create with the hardened HostConfig");
	pump_events(events);

	r = docker_container_inspect(&dc, cid, &ci, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0 && strcmp(ci.name, cname) == 0 && strcmp(ci.image, IMAGE) == 0 &&
		    strcmp(ci.user, "0:0") == 0 && strcmp(ci.status, "created") == 0,
	    "inspect: name, image, user 0:0, status created");
	tap(ci.ncap_drop == 1 && has(ci.cap_drop, ci.ncap_drop, "ALL") && ci.ncap_add == 2 &&
		    has(ci.cap_add, ci.ncap_add, "SETUID") && has(ci.cap_add, ci.ncap_add, "SETGID"),
	    "inspect: CapDrop [ALL], CapAdd [SETUID SETGID]");
	tap(ci.nsecurity_opt == 1 && strcmp(ci.security_opt[0], "no-new-privileges") == 0,
	    "inspect: SecurityOpt [no-new-privileges]");
	tap(ci.ntmpfs == 1 && strcmp(ci.tmpfs[0].key, "/run/agentic") == 0 &&
		    strcmp(ci.tmpfs[0].value, tmpfs_opts) == 0,
	    "inspect: Tmpfs /run/agentic with its options");
	tap(strcmp(docker_kv_get(ci.sysctls, ci.nsysctls, "net.ipv6.conf.all.disable_ipv6") ?: "",
		   "1") == 0,
	    "inspect: Sysctls disable_ipv6=1");
	tap(ci.pids_limit == 64 && ci.memory == 64 << 20 && ci.nano_cpus == 500000000,
	    "inspect: PidsLimit 64, Memory 64 MiB, NanoCpus 0.5 CPU");
	tap(strcmp(ci.network_mode, nets[0]) == 0, "inspect: NetworkMode is the internal network");
	tap(strcmp(ci.restart_policy, "no") == 0 && ci.readonly_rootfs && !ci.init &&
		    !ci.privileged,
	    "inspect: RestartPolicy no, ReadonlyRootfs, Init false, Privileged false");
	tap(ci.nlabels >= 3 && strcmp(docker_kv_get(ci.labels, ci.nlabels, label_key) ?: "",
				      label_val) == 0 &&
		    strcmp(docker_kv_get(ci.labels, ci.nlabels, "agentic-managed-network") ?: "",
			   nets[0]) == 0,
	    "inspect: labels as sent");
	tap(ci.nentrypoint == 2 && strcmp(ci.entrypoint[0], "/bin/sh") == 0 && ci.ncmd == 1 &&
		    has(ci.env, ci.nenv, "AGENT_ID=test"),
	    "inspect: Entrypoint, Cmd and Env as sent");
	const struct docker_mount *m1 = mount_at(&ci, "/run/agentic-sandbox");
	const struct docker_mount *m2 = mount_at(&ci, "/sbin/agentic-init");
	const struct docker_mount *m3 = mount_at(&ci, "/workspace");
	tap(ci.nmounts == 3 && m1 && m1->read_only && strcmp(m1->source, sandbox_dir) == 0 && m2 &&
		    m2->read_only && m3 && !m3->read_only,
	    "inspect: binds read-only (socket dir, init binary), workspace read-write");

	r = docker_container_start(&dc, cid, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0, "container start");
	pump_events(events);
	/* wait has its own connection from the pool while events holds another */
	r = docker_container_wait(&dc, cid, &code, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0 && code == 7, "container wait reports exit code 7 (got %" PRId64 ")", code);

	r = docker_container_logs_begin(&c, &dc, cid, false, -1, false, on_log, &logs);
	if (r == 0)
		r = docker_call_run(&c);
	docker_call_end(&c);
	tap(r == 0 && strcmp(logs.out, "out-line\n") == 0 && strcmp(logs.err, "err-line\n") == 0,
	    "logs de-multiplexed: stdout and stderr apart");

	r = docker_container_remove(&dc, cid, true, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0, "container remove (force)");

	int64_t deadline = now_ms() + 10000;
	const char *const want[] = { "create", "start", "die", "destroy", NULL };
	while (!saw_in_order(seen, cid, want) && now_ms() < deadline) {
		struct pollfd p = { docker_call_fd(events), docker_call_events(events), 0 };
		poll(&p, 1, 100);
		if (pump_events(events) != 0)
			break;
	}
	for (int i = 0; i < seen->n; i++)
		diag("event %s %.12s", seen->action[i], seen->id[i]);
	tap(saw_in_order(seen, cid, want),
	    "events stream delivered create, start, die, destroy for the container (%d seen)",
	    seen->n);
}

static void test_kill_and_stop(void)
{
	struct docker_error e;
	char id[DOCKER_ID_SIZE], name[128];
	int64_t code = -1;
	int r;
	const struct docker_kv labels[] = { { label_key, label_val }, { NULL, NULL } };
	const struct docker_container_spec spec = {
		.name = name, .image = IMAGE, .labels = labels,
		.entrypoint = (const char *[]){ "/bin/sleep", NULL },
		.cmd = (const char *[]){ "60", NULL },
		.network_mode = "none",
	};

	snprintf(name, sizeof(name), "agentic-test-%s-sleeper", label_val);
	r = docker_container_create(&dc, &spec, id, &e);
	if (r == 0)
		r = docker_container_start(&dc, id, &e);
	if (r == 0)
		r = docker_container_kill(&dc, id, "SIGKILL", &e);
	if (r == 0)
		r = docker_container_wait(&dc, id, &code, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0 && code == 137, "kill SIGKILL ends a sleeping container: exit 137");
	r = docker_container_stop(&dc, id, 1, &e);
	tap(r == 0, "stop of a stopped container is not an error (304)");
	r = docker_container_remove(&dc, id, false, &e);
	tap(r == 0, "remove of a stopped container without force");
}

static void test_errors(void)
{
	struct docker_error e;
	char id[DOCKER_ID_SIZE], text[1024], name[128];
	const struct docker_kv labels[] = { { label_key, label_val }, { NULL, NULL } };
	struct docker_container_spec spec = { .name = name, .image = "agentic/no-such-image:local",
					      .cmd = (const char *[]){ "true", NULL },
					      .labels = labels };
	int r;

	snprintf(name, sizeof(name), "agentic-test-%s-noimage", label_val);
	r = docker_container_create(&dc, &spec, id, &e);
	docker_error_text(&e, text, sizeof(text));
	tap(r == DOCKER_ERR_API && e.status == 404 &&
		    strstr(text, "agentic/no-such-image:local is not present locally") &&
		    strstr(text, "docker load"),
	    "missing image: 404 says it is not present locally and how to load it");
	diag("%s", text);

	snprintf(name, sizeof(name), "agentic-test-%s-twice", label_val);
	spec.image = IMAGE;
	r = docker_container_create(&dc, &spec, id, &e);
	if (r == 0)
		r = docker_container_create(&dc, &spec, id, &e);
	docker_error_text(&e, text, sizeof(text));
	tap(r == DOCKER_ERR_API && e.status == 409 && strstr(text, name),
	    "name conflict: 409 names the container");
	diag("%s", text);

	r = docker_network_remove(&dc, "agentic-test-no-such-network", &e);
	docker_error_text(&e, text, sizeof(text));
	tap(r == DOCKER_ERR_API && e.status == 404 && strstr(text, "no such network"),
	    "missing network: 404 says so");
}

/* Four calls in flight on one client through a proxy that holds back the answer to /info:
 * the other three complete meanwhile. */
static void test_nonblocking_with_a_delayed_call(void)
{
	static struct proxy px = { .marker = "/info ", .delay_ms = 1500 };
	struct docker_client pc;
	char host[128];
	struct docker_client_config cfg = { .docker_host = host, .connections = 4 };
	struct docker_call calls[4];
	const char *names[4] = { "info (held by the proxy)", "version", "container list",
				 "network list" };
	int64_t done_at[4] = { 0 }, t0;
	int rc[4], pending = 4, r;
	struct docker_error e;

	px.upstream = dc.socket_path;
	if (proxy_start(&px) != 0) {
		tap(false, "delaying proxy starts");
		return;
	}
	snprintf(host, sizeof(host), "unix://%s", px.path);
	r = docker_client_init(&pc, &cfg);
	if (r == 0)
		r = docker_client_negotiate(&pc, &e);
	tap(r == 0, "client through the proxy negotiates %s", pc.version);

	t0 = now_ms();
	rc[0] = docker_info_begin(&calls[0], &pc);
	rc[1] = docker_version_begin(&calls[1], &pc);
	rc[2] = docker_container_list_begin(&calls[2], &pc, label_kv);
	rc[3] = docker_network_list_begin(&calls[3], &pc, label_kv);
	for (int i = 0; i < 4; i++)
		if (rc[i] != 0) {
			done_at[i] = -1;
			pending--;
		}
	while (pending > 0 && now_ms() - t0 < 10000) {
		struct pollfd p[4];
		int np = 0;
		for (int i = 0; i < 4; i++) {
			if (done_at[i])
				continue;
			rc[i] = docker_call_step(&calls[i]);
			if (rc[i] != -EAGAIN) {
				done_at[i] = now_ms() - t0;
				pending--;
				continue;
			}
			p[np++] = (struct pollfd){ docker_call_fd(&calls[i]),
						   docker_call_events(&calls[i]), 0 };
		}
		if (np)
			poll(p, (nfds_t)np, 100);
	}
	for (int i = 0; i < 4; i++) {
		diag("%s: rc=%d after %" PRId64 " ms", names[i], rc[i], done_at[i]);
		docker_call_end(&calls[i]);
	}
	tap(rc[0] == 0 && rc[1] == 0 && rc[2] == 0 && rc[3] == 0, "four calls in flight complete");
	tap(done_at[1] < 1000 && done_at[2] < 1000 && done_at[3] < 1000 && done_at[0] >= 1500,
	    "while one call is held 1.5 s by the proxy, the other three complete meanwhile");
	docker_client_free(&pc);
	proxy_stop(&px);
}

int main(void)
{
	const char *label = getenv("AGENTIC_TEST_LABEL");
	struct docker_client_config cfg = { .connections = 4 };
	struct docker_error e;
	struct docker_call events;
	static struct seen seen;
	char filters[256];
	struct stat st;
	int r;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!label || !strchr(label, '=')) {
		printf("not ok 1 - AGENTIC_TEST_LABEL=key=value is set (run through the wrapper)\n");
		return 1;
	}
	snprintf(label_kv, sizeof(label_kv), "%s", label);
	snprintf(label_key, sizeof(label_key), "%.*s", (int)(strchr(label, '=') - label), label);
	snprintf(label_val, sizeof(label_val), "%s", strchr(label, '=') + 1);

	r = docker_client_init(&dc, &cfg);
	if (r == 0)
		r = docker_client_negotiate(&dc, &e);
	if (r != 0)
		diag_err(&e);
	tap(r == 0 && dc.minor >= DOCKER_API_MINOR_MIN && dc.minor <= DOCKER_API_MINOR_MAX,
	    "negotiated API %s with the engine", dc.version);
	if (r != 0)
		return 1;
	atexit(cleanup);

	struct docker_info info;
	r = docker_info(&dc, &info, &e);
	tap(r == 0 && info.server_version[0] && !info.docker_desktop,
	    "info: engine %s on %s, userns-remap %s", info.server_version, info.operating_system,
	    info.userns_remap ? "on" : "off");

	if (!getenv("AGENTIC_BIN") || stat(getenv("AGENTIC_BIN"), &st) != 0) {
		tap(false, "AGENTIC_BIN names the static binary");
		return 1;
	}
	snprintf(sandbox_dir, sizeof(sandbox_dir), "/tmp/agentic-test-sbx-XXXXXX");
	snprintf(workspace_dir, sizeof(workspace_dir), "/tmp/agentic-test-ws-XXXXXX");
	if (!mkdtemp(sandbox_dir) || !mkdtemp(workspace_dir)) {
		tap(false, "temporary directories");
		return 1;
	}

	snprintf(filters, sizeof(filters), "{\"label\":[\"%s\"],\"type\":[\"container\"]}", label_kv);
	r = docker_events_begin(&events, &dc, filters, 0, on_event, &seen);
	/* the engine subscribes when the request arrives: wait for the answer's head, so no
	 * event of what follows can be missed */
	int64_t deadline = now_ms() + 5000;
	while (r == 0 && events.status == 0 && now_ms() < deadline) {
		struct pollfd p = { docker_call_fd(&events), docker_call_events(&events), 0 };
		poll(&p, 1, 100);
		r = pump_events(&events);
	}
	tap(r == 0 && events.status == 200, "events stream opened with a label filter");

	test_networks();
	test_hardened_container(&events, &seen);
	docker_call_end(&events);
	test_kill_and_stop();
	test_errors();
	test_nonblocking_with_a_delayed_call();

	cleanup();
	static struct ids left;
	list_labelled(false, &left);
	int containers_left = left.n;
	list_labelled(true, &left);
	tap(containers_left == 0 && left.n == 0,
	    "nothing labelled is left: %d containers, %d networks", containers_left, left.n);
	rmdir(sandbox_dir);
	rmdir(workspace_dir);
	printf("1..%d\n", tap_n);
	docker_client_free(&dc);
	return tap_failed ? 1 : 0;
}
