/* runtime_docker.c: the Docker Engine runtime: a sandbox's network and container as the
 * engine makes them, its results turned into runtime outcomes, and the
 * synchronous calls of recovery (runtime.h); the event stream is runtime_docker_events.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/runtime_docker.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "workspace/host.h"
#include "workspace/share.h"

#define SANDBOX_SOCKET_DIR "/run/agentic-sandbox"

struct rd_slot {
	struct engine_job job;
	struct runtime_docker *d;
	struct rt_call *call;         /* the slot's call, NULL when none */
	bool net_phase;               /* CT_INSPECT's second call: its network's inspect */
	char net[SB_NET_BYTES];       /* ... of this network (the container's NetworkMode) */
};

size_t runtime_docker_storage_bytes(uint32_t slots)
{
	return (size_t)slots * sizeof(struct rd_slot) + ((size_t)slots + 2) * sizeof(struct engine_job *);
}

bool runtime_docker_fault_init_env(void)
{
	const char *f = getenv("AGENTIC_FAULT");

	return f && strcmp(f, "init-env") == 0;
}

/* ---- the container and network specs ---- */

static char scratch_env[LIMIT_SANDBOX_ENV + 16][128];

/* The init's environment, then the request's: a NULL-ended list in static storage. */
static const char **container_env(const struct runtime_docker *d, const struct sandbox *sb,
				  const struct create_req *req)
{
	const struct config *cfg = d->c.cfg;
	static const char *env[LIMIT_SANDBOX_ENV + 16];
	uint32_t ne = 0;

#define ENV(...) snprintf(scratch_env[ne], sizeof(scratch_env[ne]), __VA_ARGS__), \
		 env[ne] = scratch_env[ne], ne++
	ENV("AGENT_ID=%s", sb->agent_id);
	ENV("AGENT_INSTANCE_ID=%s", sb->instance_id);
	ENV("AGENT_CONTROL_UID=%u", sb->uid);
	ENV("AGENT_CONTROL_GID=%u", sb->uid + (runtime_docker_fault_init_env() ? 1u : 0u));
	ENV("AGENT_CONTROL_UID_RANGE=%u-%u", cfg->control_uid_min, cfg->control_uid_max);
	ENV("AGENT_WORKLOAD_UID=%u", cfg->workload_uid);
	ENV("AGENT_WORKLOAD_GID=%u", cfg->workload_gid);
	ENV("AGENT_GRPC_UDS_PATH=%s/agent.sock", SANDBOX_SOCKET_DIR);
	ENV("AGENT_SETUP_SENTINEL=/run/agentic/setup-complete");
#undef ENV
	for (uint32_t i = 0; i < req->nenv; i++)
		env[ne++] = req->env[i];
	env[ne] = NULL;
	return env;
}

/* Our labels, then the request's: a NULL-ended list in static storage. */
static const struct docker_kv *container_labels(const struct runtime_docker *d,
						const struct rt_call *c,
						const struct create_req *req)
{
	const struct sandbox *sb = c->sb;
	const struct config *cfg = d->c.cfg;
	static struct docker_kv labels[LIMIT_SANDBOX_LABELS + 16]; /* 11 of ours, the NULL */
	static char uid_s[16], wl_s[16];
	uint32_t nl = 0;

	snprintf(uid_s, sizeof(uid_s), "%u", sb->uid);
	snprintf(wl_s, sizeof(wl_s), "%u", cfg->workload_uid);
	labels[nl++] = (struct docker_kv){ "agentic-sandbox", "true" };
	labels[nl++] = (struct docker_kv){ "agentic-daemon", d->c.owner };
	labels[nl++] = (struct docker_kv){ "agentic-instance-id", sb->instance_id };
	labels[nl++] = (struct docker_kv){ "agentic-control-uid", uid_s };
	labels[nl++] = (struct docker_kv){ "agentic-workload-uid", wl_s };
	labels[nl++] = (struct docker_kv){ "agentic-workload-boundary", "separated" };
	if (c->managed_net)
		labels[nl++] = (struct docker_kv){ "agentic-managed-network", sb->network };
	labels[nl++] = (struct docker_kv){ "agentic-runtime", "docker" };
	labels[nl++] = (struct docker_kv){ "agentic-transport", "uds" };
	labels[nl++] = (struct docker_kv){ "agentic-egress-policy",
					   posture_egress_name(sb->posture.egress) };
	/* What was known at create: the engine's view of the network is read only once the
	 * container exists, and a label never changes; the API says the tier now. */
	labels[nl++] = (struct docker_kv){ "agentic-posture-at-create",
					   !sb->posture.at_create && c->managed_net ? "T1" : "T0" };
	for (uint32_t i = 0; i < req->nlabels; i++)
		labels[nl++] = req->labels[i];
	labels[nl] = (struct docker_kv){ NULL, NULL };
	return labels;
}

/* The tmpfs mounts and the bind mounts (ours, then the request's) into spec. */
static void container_mounts(const struct runtime_docker *d, const struct sandbox *sb,
			     const struct create_req *req, struct docker_container_spec *spec)
{
	const struct config *cfg = d->c.cfg;
	static struct docker_mount mounts[LIMIT_SANDBOX_MOUNTS + 4];
	static char tmpfs_opts[160], tmp_opts[96], ws[LIMIT_PATH_BYTES + 16];
	static struct docker_kv tmpfs[3];
	uint32_t nm = 0;

	snprintf(tmpfs_opts, sizeof(tmpfs_opts),
		 "rw,noexec,nosuid,nodev,mode=0700,uid=%u,gid=%u,size=64k", sb->uid, sb->uid);
	tmpfs[0] = (struct docker_kv){ "/run/agentic", tmpfs_opts };
	/* the root filesystem is read-only: /tmp is a small tmpfs, the rest is the workspace.
	 * exec, since the engine's default is noexec and the workspace allows it anyway
	 * (builds run what they compile in /tmp) */
	snprintf(tmp_opts, sizeof(tmp_opts), "rw,exec,nosuid,nodev,mode=1777,size=%u",
		 LIMIT_SANDBOX_TMP_BYTES);
	tmpfs[1] = (struct docker_kv){ "/tmp", tmp_opts };
	tmpfs[2] = (struct docker_kv){ NULL, NULL };

	host_instance_dir(cfg, sb->instance_id, ws, sizeof(ws) - 16);
	strcat(ws, "/workspace");
	mounts[nm++] = (struct docker_mount){ cfg->agent_socket_dir, SANDBOX_SOCKET_DIR, true };
	mounts[nm++] = (struct docker_mount){ d->c.self_exe, "/sbin/agentic-init", true };
	mounts[nm++] = (struct docker_mount){ ws, "/workspace", false };
	for (uint32_t i = 0; i < req->nmounts; i++)
		mounts[nm++] = req->mounts[i];
	mounts[nm] = (struct docker_mount){ NULL, NULL, false };
	spec->tmpfs = tmpfs;
	spec->mounts = mounts;
}

static int begin_container_create(struct runtime_docker *d, struct docker_call *call,
				  const struct rt_call *c)
{
	const struct sandbox *sb = c->sb;
	const struct config *cfg = d->c.cfg;
	const struct create_req *req = sb ? sb->req : NULL;
	static const char *const entry[] = { "/sbin/agentic-init", NULL };
	static const char *const cap_drop[] = { "ALL", NULL };
	static const char *const cap_add[] = { "SETUID", "SETGID", NULL };
	static const char *secopt[] = { "no-new-privileges", NULL, NULL };
	/* The embedded resolver forwards names it does not know to the container's Dns servers;
	 * given any, it dials them from the container's own network namespace (on every engine
	 * version), and nothing answers on the container's loopback, so no name leaves the
	 * sandbox. Without one it would use the host's resolvers, a loopback one from the host's
	 * namespace (CVE-2024-29018). No search domain: the host's would be appended to names. */
	static const char *const dns[] = { "127.0.0.1", NULL };
	static const char *const dns_search[] = { ".", NULL };
	static const struct docker_kv sysctls[] = {
		{ "net.ipv6.conf.all.disable_ipv6", "1" }, { NULL, NULL }
	};
	static struct docker_kv storage[2];
	static char size_s[24];
	struct docker_container_spec spec = { 0 };

	if (!req)
		return ERR_STATE;
	spec.name = sb->name;
	spec.image = sb->image;
	spec.user = "0:0";
	spec.entrypoint = entry;
	spec.env = container_env(d, sb, req);
	spec.labels = container_labels(d, c, req);
	spec.cap_drop = cap_drop;
	spec.cap_add = cap_add;
	secopt[1] = d->c.seccomp_opt;
	spec.security_opt = secopt;
	spec.dns = dns;
	spec.dns_search = dns_search;
	container_mounts(d, sb, req, &spec);
	spec.sysctls = sysctls;
	spec.network_mode = sb->network;
	spec.pids_limit = req->pids ? req->pids : cfg->default_pids_limit;
	spec.memory = (int64_t)(req->memory_bytes ? req->memory_bytes : cfg->default_memory_bytes);
	spec.nano_cpus = (int64_t)(req->nano_cpus ? req->nano_cpus : cfg->default_nano_cpus);
	spec.restart_policy = "no";
	/* CIS Docker Benchmark 5.13: a read-only root; a writable one only where the engine
	 * bounds it (overlay2 on xfs with pquota), to the same budget as the workspace */
	spec.readonly_rootfs = !sb->writable_root;
	if (sb->writable_root) {
		snprintf(size_s, sizeof(size_s), "%llu", (unsigned long long)sb->disk_bytes);
		storage[0] = (struct docker_kv){ "size", size_s };
		storage[1] = (struct docker_kv){ NULL, NULL };
		spec.storage_opt = storage;
	}
	return docker_container_create_begin(call, d->c.dc, &spec);
}

static int begin_network_create(struct runtime_docker *d, struct docker_call *c,
				const char *name, const char *subnet)
{
	const struct docker_kv labels[] = {
		{ "agentic-sandbox", "true" },
		{ "agentic-daemon", d->c.owner },
		{ "agentic-egress-policy", "default-deny" },
		{ NULL, NULL },
	};
	static const struct docker_kv options[] = {
		{ "com.docker.network.bridge.inhibit_ipv4", "true" },
		{ NULL, NULL },
	};
	struct docker_network_spec spec = {
		.name = name, .internal = true, .subnet = subnet, .labels = labels, .options = options,
	};

	return docker_network_create_begin(c, d->c.dc, &spec);
}

static int collect_log(void *ctx, int stream, const uint8_t *data, size_t len)
{
	(void)stream;
	sandbox_init_log_append(ctx, (const char *)data, len);
	return 0;
}

/* ---- asynchronous calls: one engine job per slot ---- */

static int slot_begin(struct engine_job *j)
{
	struct rd_slot *s = (struct rd_slot *)j;
	struct runtime_docker *d = s->d;
	struct docker_client *dc = d->c.dc;
	struct rt_call *c = s->call;

	switch (c->op) {
	case RT_NET_CREATE:
		return begin_network_create(d, &j->call, c->name, c->subnet);
	case RT_NET_SCAN:
		return docker_network_list_begin(&j->call, dc, NULL);
	case RT_CT_CREATE:
		return begin_container_create(d, &j->call, c);
	case RT_CT_START:
		return docker_container_start_begin(&j->call, dc, c->id);
	case RT_CT_RENAME:
		return docker_container_rename_begin(&j->call, dc, c->id, c->name);
	case RT_CT_INSPECT:
		if (s->net_phase)
			return docker_network_inspect_begin(&j->call, dc, s->net);
		return docker_container_inspect_begin(&j->call, dc, c->id);
	case RT_CT_LOGS:
		sandbox_init_log_set(c->sb, "", 0);
		return docker_container_logs_begin(&j->call, dc, c->id, false, LIMIT_CREATE_LOG_LINES,
						   false, collect_log, c->sb);
	case RT_CT_STOP:
		return docker_container_stop_begin(&j->call, dc, c->id, c->stop_grace_s);
	case RT_CT_REMOVE:
		return docker_container_remove_begin(&j->call, dc, c->id, true);
	case RT_NET_REMOVE:
		return docker_network_remove_begin(&j->call, dc, c->id);
	}
	return ERR_STATE;
}

/* The engine's answer as a runtime outcome (the Docker codes stay in this file). */
static enum rt_outcome outcome_of(const struct rt_call *rc, const struct docker_call *c, int r)
{
	const struct docker_error *e = &c->error;
	bool api = e->code == DOCKER_ERR_API;

	if (r == 0)
		return RT_OK;
	if (rc->op == RT_CT_CREATE && api && e->op == DOCKER_OP_CONTAINER_CREATE) {
		if (e->status == 409)
			return RT_NAME_TAKEN;
		if (rc->sb && rc->sb->writable_root && e->status >= 400 && e->status != 404)
			return RT_ROOT_UNBOUNDED;
		if (e->status == 404)
			return RT_IMAGE_MISSING;
		return RT_ENGINE;
	}
	if (rc->op == RT_CT_RENAME && api && e->status == 409)
		return RT_NAME_TAKEN;
	/* the engine refused a network create because its subnet overlaps a network agenticd
	 * does not know of */
	if (rc->op == RT_NET_CREATE && api && e->op == DOCKER_OP_NETWORK_CREATE &&
	    strstr(e->message, "overlaps"))
		return RT_OVERLAPS;
	if (api && e->status == 404)
		return RT_GONE;
	return RT_ENGINE;
}

/* ---- the engine's view of a container's networks ---- */

static const struct rt_netcheck net_unreadable = { .read = true, .why = "unreadable" };

/* Its own network is the one it was created on (HostConfig.NetworkMode): by name, or by id
 * (or a prefix of it) when that is what the create named. */
static bool own_network(const char *mode, const char *name, const char *id)
{
	size_t n = strlen(mode);

	if (strcmp(mode, name) == 0)
		return true;
	if (n == 0 || strspn(mode, "0123456789abcdef") != n)
		return false;
	return strncmp(id, mode, n) == 0;
}

/* The networks attached: exactly its own. */
static void check_attached(const struct docker_container *ct, struct rt_netcheck *nc)
{
	bool own = false;

	*nc = (struct rt_netcheck){ .read = true };
	for (uint32_t i = 0; i < ct->nnetworks; i++) {
		if (own_network(ct->network_mode, ct->networks[i].key, ct->networks[i].value))
			own = true;
		else
			nc->other = true;
	}
	nc->ok = own && !nc->other;
	nc->why = nc->other ? "other_network" : own ? "verified" : "not_attached";
}

/* A managed network as the engine has it: internal, with IPv4 inhibited on its bridge. */
static void check_managed(const struct docker_network *net, struct rt_netcheck *nc)
{
	const char *inhibit = docker_kv_get(net->options, net->noptions,
					    "com.docker.network.bridge.inhibit_ipv4");

	if (!nc->ok)
		return;
	if (!net->internal)
		nc->why = "not_internal";
	else if (!inhibit || strcmp(inhibit, "true") != 0)
		nc->why = "no_inhibit_ipv4";
	else
		return;
	nc->ok = false;
}

static void take_container(struct docker_call *c, struct rt_result *res, struct rd_slot *s)
{
	static struct docker_container ct;
	const char *inst;

	if (docker_result_container(c, &ct) != 0) {
		res->outcome = RT_UNREADABLE;
		snprintf(res->text, sizeof(res->text), "the engine's inspect answer is unreadable");
		if (s->call->check_net)
			res->net = net_unreadable;
		return;
	}
	if (s->call->check_net) {
		check_attached(&ct, &res->net);
		snprintf(s->net, sizeof(s->net), "%s", ct.network_mode);
	}
	memcpy(res->id, ct.id, sizeof(res->id));
	inst = docker_kv_get(ct.labels, ct.nlabels, "agentic-instance-id");
	snprintf(res->instance_id, sizeof(res->instance_id), "%s", inst ? inst : "");
	res->running = ct.running;
	res->pid = ct.running ? ct.pid : 0;
	res->exit_code = ct.exit_code;
}

/* The inspect's second call, its network's: one more round trip, on the same slot. */
static bool chain_network(struct rd_slot *s)
{
	struct rt_call *rc = s->call;

	if (!rc->check_net || !rc->managed_net || rc->res.outcome != RT_OK || !rc->res.running ||
	    !rc->res.net.ok)
		return false;
	engine_end(&s->d->eng, &s->job);
	s->net_phase = true;
	if (engine_start(&s->d->eng, &s->job) == 0)
		return true;
	s->net_phase = false;
	rc->res.net = net_unreadable;
	return false;
}

static void slot_finish(struct rd_slot *s, struct rt_call *rc)
{
	struct runtime_docker *d = s->d;

	ASSERT(s->call == rc && !engine_job_busy(&s->job));
	s->call = NULL;
	if (d->rt.sink.call_done)
		d->rt.sink.call_done(d->rt.sink.ctx, rc);
}

static void network_done(struct rd_slot *s, int r)
{
	static struct docker_network net;
	struct rt_result *res = &s->call->res;

	s->net_phase = false;
	if (r != 0 || docker_result_network(&s->job.call, &net) != 0)
		res->net = net_unreadable;
	else
		check_managed(&net, &res->net);
	engine_end(&s->d->eng, &s->job);
	slot_finish(s, s->call);
}

static void slot_done(struct engine_job *j, int r)
{
	struct rd_slot *s = (struct rd_slot *)j;
	struct runtime_docker *d = s->d;
	struct rt_call *rc = s->call;
	struct rt_result *res = &rc->res;
	struct docker_call *c = &j->call;

	if (s->net_phase) {
		network_done(s, r);
		return;
	}
	if (r == 0 && (rc->op == RT_NET_CREATE || rc->op == RT_CT_CREATE))
		r = docker_result_id(c, res->id);
	res->outcome = outcome_of(rc, c, r);
	if (res->outcome != RT_OK)
		docker_error_text(&c->error, res->text, sizeof(res->text));
	if (r == 0 && rc->op == RT_CT_INSPECT)
		take_container(c, res, s);
	else if (rc->op == RT_CT_INSPECT && rc->check_net)
		res->net = net_unreadable;
	if (r == 0 && rc->op == RT_NET_SCAN) {
		rc->each_subnet(rc, NULL, false);
		r = docker_result_each_subnet(c, "agentic-daemon", d->c.owner, rc->each_subnet, rc);
		if (r != 0) {
			res->outcome = RT_UNREADABLE;
			snprintf(res->text, sizeof(res->text), "%s", err_str(r));
		}
	}
	if (rc->op == RT_CT_INSPECT && chain_network(s))
		return;
	engine_end(&d->eng, j);
	slot_finish(s, rc);
}

static int rd_call(void *self, struct rt_call *rc)
{
	struct runtime_docker *d = self;
	struct rd_slot *s;
	int r;

	if (rc->slot >= d->c.slots)
		return -EINVAL;
	s = &d->slot[rc->slot];
	if (s->call)
		return ERR_STATE;
	ASSERT(!engine_job_busy(&s->job));
	memset(&rc->res, 0, sizeof(rc->res));
	s->call = rc;
	s->net_phase = false;
	r = engine_start(&d->eng, &s->job);
	if (r != 0) {
		s->call = NULL;
		rc->res.outcome = RT_ENGINE;
		docker_error_text(&s->job.call.error, rc->res.text, sizeof(rc->res.text));
	}
	return r;
}


static void rd_start(void *self)
{
	struct runtime_docker *d = self;
	int r;

	d->events_retry = 0;
	if (d->stopping || d->events.active)
		return;
	rd_images_read(d); /* and what became of them while no stream ran */
	r = engine_start(&d->eng, &d->events);
	if (r != 0) {
		log_warn("event stream not opened; retrying", "error=%s", log_q(err_str(r)));
		d->events_retry = clock_mono_ms() + EVENTS_RETRY_MS;
	}
}

static void rd_stop(void *self)
{
	struct runtime_docker *d = self;

	d->stopping = true;
	if (d->events.active)
		engine_end(&d->eng, &d->events);
	if (d->images_job.active)
		engine_end(&d->eng, &d->images_job);
	rd_since_write(d);
}

static void rd_tick(void *self, int64_t now)
{
	struct runtime_docker *d = self;

	engine_tick(&d->eng);
	if (d->events_retry && now >= d->events_retry)
		rd_start(d);
	if (d->images_retry && now >= d->images_retry)
		rd_images_read(d);
	if (d->since_saved != d->events_since && now - d->since_save_at >= EVENTS_SINCE_SAVE_MS) {
		d->since_save_at = now;
		rd_since_write(d);
	}
}

static int64_t rd_next_deadline(void *self, int64_t now)
{
	struct runtime_docker *d = self;
	int64_t next = engine_next_deadline(&d->eng, now);

	if (d->events_retry && d->events_retry < next)
		next = d->events_retry;
	if (d->images_retry && d->images_retry < next)
		next = d->images_retry;
	return next;
}

static void rd_ready(void *self, uint32_t id)
{
	struct runtime_docker *d = self;

	engine_ready(&d->eng, id);
}

/* ---- synchronous calls (recovery) ---- */

struct each_ctx {
	int (*fn)(void *ctx, const char *id);
	int (*fn2)(void *ctx, const char *id, const char *name);
	void *ctx;
};

static int each_summary(void *ctx, const struct docker_summary *s)
{
	struct each_ctx *e = ctx;

	return e->fn ? e->fn(e->ctx, s->id) : e->fn2(e->ctx, s->id, s->name);
}

static int list_ours(struct runtime_docker *d, bool networks, struct each_ctx *e, char *err,
		     size_t err_size)
{
	struct docker_call c;
	int r = networks ? docker_network_list_begin(&c, d->c.dc, d->c.owner_label)
			 : docker_container_list_begin(&c, d->c.dc, d->c.owner_label);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0) {
		r = docker_result_each(&c, each_summary, e);
		if (r > 0)
			r = 0;
	}
	if (r != 0)
		docker_error_text(&c.error, err, err_size);
	docker_call_end(&c);
	return r;
}

static int rd_containers(void *self, int (*fn)(void *ctx, const char *id), void *ctx, char *err,
			 size_t err_size)
{
	struct each_ctx e = { .fn = fn, .ctx = ctx };

	return list_ours(self, false, &e, err, err_size);
}

static int rd_networks(void *self, int (*fn)(void *ctx, const char *id, const char *name),
		       void *ctx, char *err, size_t err_size)
{
	struct each_ctx e = { .fn2 = fn, .ctx = ctx };

	return list_ours(self, true, &e, err, err_size);
}

/* A failed inspect: -ENOENT when the object is not there, the error's text in err. */
static int inspect_error(const struct docker_error *e, char *err, size_t err_size)
{
	docker_error_text(e, err, err_size);
	if (e->code == DOCKER_ERR_API && e->status == 404)
		return -ENOENT;
	return e->code ? e->code : -EIO;
}

static int rd_inspect(void *self, const char *id, struct rt_container *out, char *err,
		      size_t err_size)
{
	struct runtime_docker *d = self;
	static struct docker_container ct;
	struct docker_error e;

	if (docker_container_inspect(d->c.dc, id, &ct, &e) != 0) {
		return inspect_error(&e, err, err_size);
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->id, ct.id, sizeof(out->id));
	out->name = ct.name;
	out->running = ct.running;
	out->pid = ct.running ? ct.pid : 0;
	out->instance_id = docker_kv_get(ct.labels, ct.nlabels, "agentic-instance-id");
	out->control_uid = docker_kv_get(ct.labels, ct.nlabels, "agentic-control-uid");
	out->managed_network = docker_kv_get(ct.labels, ct.nlabels, "agentic-managed-network");
	out->execs = ct.nexecs > 0;
	check_attached(&ct, &out->net);
	if (out->managed_network && out->net.ok) {
		static struct docker_network net;

		if (docker_network_inspect(d->c.dc, ct.network_mode, &net, &e) != 0)
			out->net = net_unreadable;
		else
			check_managed(&net, &out->net);
	}
	return 0;
}

static int rd_net_inspect(void *self, const char *id, struct rt_network *out, char *err,
			  size_t err_size)
{
	struct runtime_docker *d = self;
	static struct docker_network net;
	struct docker_error e;

	if (docker_network_inspect(d->c.dc, id, &net, &e) != 0) {
		return inspect_error(&e, err, err_size);
	}
	memset(out, 0, sizeof(*out));
	memcpy(out->id, net.id, sizeof(out->id));
	out->name = net.name;
	out->subnet = net.subnet;
	out->internal = net.internal;
	return 0;
}

static int rd_remove_now(void *self, bool network, const char *id, char *err, size_t err_size)
{
	struct runtime_docker *d = self;
	struct docker_error e;
	int r = network ? docker_network_remove(d->c.dc, id, &e)
			: docker_container_remove(d->c.dc, id, true, &e);

	if (r != 0 && !(e.code == DOCKER_ERR_API && e.status == 404)) {
		docker_error_text(&e, err, err_size);
		return r;
	}
	return 0;
}

static int rd_scan_now(void *self, int (*each_subnet)(void *ctx, const char *cidr, bool ours),
		       void *ctx, char *err, size_t err_size)
{
	struct runtime_docker *d = self;
	struct docker_call c;
	int r = docker_network_list_begin(&c, d->c.dc, NULL);

	if (r == 0)
		r = docker_call_run(&c);
	if (r == 0) {
		each_subnet(ctx, NULL, false);
		r = docker_result_each_subnet(&c, "agentic-daemon", d->c.owner, each_subnet, ctx);
	}
	if (r != 0)
		snprintf(err, err_size, "%s", c.error.message[0] ? c.error.message : err_str(r));
	docker_call_end(&c);
	return r;
}

/* ---- the host side of a workspace ---- */

static int rd_workspace_make(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_docker *d = self;

	return share_make_workspace(d->c.cfg, sb->instance_id, sb->disk_bytes, sb->vm,
				    sandbox_transcript_budget(sb) + transcript_owed(sb), err,
				    err_size);
}

static int rd_workspace_mount(void *self, const struct sandbox *sb, char *err, size_t err_size)
{
	struct runtime_docker *d = self;

	return share_mount_workspace(d->c.cfg, sb->instance_id, sb->vm, err, err_size);
}

static void rd_workspace_retire(void *self, const struct sandbox *sb, bool drop_workspace)
{
	struct runtime_docker *d = self;

	share_retire(d->c.cfg, d->c.self_exe, sb->instance_id, drop_workspace);
}

static const struct runtime_ops docker_ops = {
	.call = rd_call,
	.tick = rd_tick,
	.next_deadline = rd_next_deadline,
	.ready = rd_ready,
	.start = rd_start,
	.stop = rd_stop,
	.containers = rd_containers,
	.inspect = rd_inspect,
	.networks = rd_networks,
	.net_inspect = rd_net_inspect,
	.remove_now = rd_remove_now,
	.scan_now = rd_scan_now,
	.workspace_make = rd_workspace_make,
	.workspace_mount = rd_workspace_mount,
	.workspace_retire = rd_workspace_retire,
};

int runtime_docker_init(struct runtime_docker *d, const struct runtime_docker_config *c,
			void *storage, size_t size)
{
	struct engine_job **reg;

	if (size < runtime_docker_storage_bytes(c->slots))
		return -ENOSPC;
	memset(d, 0, sizeof(*d));
	d->c = *c;
	d->slot = storage;
	reg = (struct engine_job **)(d->slot + c->slots);
	engine_init(&d->eng, c->epfd, c->tag, reg, c->slots + 2);
	for (uint32_t i = 0; i < c->slots; i++) {
		d->slot[i] = (struct rd_slot){ .d = d };
		d->slot[i].job.begin = slot_begin;
		d->slot[i].job.done = slot_done;
		engine_add(&d->eng, &d->slot[i].job);
	}
	d->events.begin = rd_events_begin;
	d->events.done = rd_events_done;
	d->events.ctx = d;
	d->events.urgent = true;
	engine_add(&d->eng, &d->events);
	d->images_job.begin = rd_images_begin;
	d->images_job.done = rd_images_done;
	d->images_job.ctx = d;
	engine_add(&d->eng, &d->images_job);
	d->live_from_ns = clock_wall_ms() * 1000000;
	d->events_since = c->since_path ? rd_since_read(c->since_path) : 0;
	/* none kept, or a time ahead of the clock (set back since): from now on */
	if (d->events_since <= 0 || d->events_since > c->events_since)
		d->events_since = c->events_since;
	else
		log_info("engine events replayed from the last one seen", "since=%lld",
			 (long long)d->events_since);
	d->since_saved = -1; /* written on the first tick: a start with no event still leaves it */
	d->rt = (struct runtime){ .ops = &docker_ops, .self = d, .name = "docker" };
	return 0;
}
