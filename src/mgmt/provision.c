/* provision.c: Docker calls on the event loop, and what they build: a sandbox's create with
 * its rollback, its remove, the warm network pool, and the event stream. */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "mgmt/daemon.h"
#include "mgmt/policy.h"

#define SANDBOX_SOCKET_DIR "/run/agentic-sandbox"

static int64_t pool_retry_at;
static bool events_dirty;  /* an event set flags on a sandbox; act on them after the step */

/* ---- jobs: one Docker call each, stepped by the loop ---- */

static int sandbox_begin(struct job *j);
static void job_done(struct job *j, int r);
static int pool_begin(struct job *j);
static int events_begin(struct job *j);

static int job_begin(struct job *j)
{
	switch (j->owner) {
	case JOB_SANDBOX: return sandbox_begin(j);
	case JOB_POOL: return pool_begin(j);
	default: return events_begin(j);
	}
}

static void job_unregister(struct job *j)
{
	if (j->reg_fd >= 0)
		epoll_ctl(agenticd->epfd, EPOLL_CTL_DEL, j->reg_fd, NULL);
	j->reg_fd = -1;
}

/* Registers what the call waits for. The client may have replaced the socket (a reused
 * keep-alive connection the engine had closed): the old fd is then closed, and so already
 * gone from epoll; only a changed number needs a fresh ADD. */
static void job_register(struct job *j)
{
	int fd = docker_call_fd(&j->call);
	short want = docker_call_events(&j->call);
	struct epoll_event ev = { 0 };

	j->soon = want == 0 || fd < 0;
	if (j->soon) {
		job_unregister(j);
		return;
	}
	ev.events = (want & POLLOUT ? EPOLLOUT : 0) | (want & POLLIN ? EPOLLIN : 0) | EPOLLRDHUP;
	ev.data.u64 = ((uint64_t)TAG_JOB << 32) | j->id;
	if (j->reg_fd == fd) {
		if (epoll_ctl(agenticd->epfd, EPOLL_CTL_MOD, fd, &ev) == 0)
			return;
	} else {
		job_unregister(j);
	}
	if (epoll_ctl(agenticd->epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
		j->reg_fd = fd;
	else
		j->soon = true; /* cannot watch it: poll it through the timer instead */
}

static void job_step(struct job *j)
{
	int r = docker_call_step(&j->call);

	if (r == -EAGAIN) {
		job_register(j);
		return;
	}
	job_unregister(j);
	j->soon = false;
	job_done(j, r);
}

static void wait_push(struct job *j)
{
	j->waiting = true;
	j->next_wait = -1;
	if (agenticd->wait_tail >= 0)
		agenticd->jobs[agenticd->wait_tail]->next_wait = (int32_t)j->id;
	else
		agenticd->wait_head = (int32_t)j->id;
	agenticd->wait_tail = (int32_t)j->id;
}

int job_start(struct job *j)
{
	int r;

	if (j->active || j->waiting)
		return ERR_STATE;
	if (agenticd->wait_head >= 0 && j->owner != JOB_EVENTS) {
		wait_push(j); /* first come, first served */
		return 0;
	}
	r = job_begin(j);
	if (r == DOCKER_ERR_BUSY) {
		docker_call_end(&j->call);
		wait_push(j);
		return 0;
	}
	if (r != 0) {
		docker_call_end(&j->call);
		return r;
	}
	j->active = true;
	j->reg_fd = -1;
	job_step(j);
	return 0;
}

void job_end(struct job *j)
{
	job_unregister(j);
	docker_call_end(&j->call);
	j->active = false;
	j->soon = false;
}

/* Gives freed connections to waiting jobs, in order. */
static void jobs_kick(void)
{
	while (agenticd->wait_head >= 0) {
		struct job *j = agenticd->jobs[agenticd->wait_head];
		int r;

		r = job_begin(j);
		if (r == DOCKER_ERR_BUSY) {
			docker_call_end(&j->call);
			return;
		}
		agenticd->wait_head = j->next_wait;
		if (agenticd->wait_head < 0)
			agenticd->wait_tail = -1;
		j->waiting = false;
		if (r != 0) {
			docker_call_end(&j->call);
			job_done(j, r);
			continue;
		}
		j->active = true;
		j->reg_fd = -1;
		job_step(j);
	}
}

void provision_job_event(uint32_t id)
{
	struct job *j = id < agenticd->njobs ? agenticd->jobs[id] : NULL;

	if (j && j->active)
		job_step(j);
}

/* ---- the sandbox's steps ---- */

static void advance(struct sandbox *sb);
static void fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static char scratch_env[LIMIT_SANDBOX_ENV + 16][128];

static int begin_container_create(struct job *j, struct sandbox *sb)
{
	const struct config *cfg = &agenticd->cfg;
	struct create_req *req = sb->req;
	static const char *env[LIMIT_SANDBOX_ENV + 16];
	static struct docker_kv labels[LIMIT_SANDBOX_LABELS + 12];
	static struct docker_mount mounts[LIMIT_SANDBOX_MOUNTS + 4];
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
	static char tmpfs_opts[160], tmp_opts[96], uid_s[16], wl_s[16], ws[LIMIT_PATH_BYTES + 16];
	static struct docker_kv tmpfs[3], storage[2];
	static char size_s[24];
	struct docker_container_spec spec = { 0 };
	uint32_t ne = 0, nl = 0, nm = 0;

#define ENV(...) snprintf(scratch_env[ne], sizeof(scratch_env[ne]), __VA_ARGS__), \
		 env[ne] = scratch_env[ne], ne++
	ENV("AGENT_ID=%s", sb->name);
	ENV("AGENT_INSTANCE_ID=%s", sb->instance_id);
	ENV("AGENT_CONTROL_UID=%u", sb->uid);
	ENV("AGENT_CONTROL_GID=%u", sb->uid + (provision_fault_init_env() ? 1u : 0u));
	ENV("AGENT_CONTROL_UID_RANGE=%u-%u", cfg->control_uid_min, cfg->control_uid_max);
	ENV("AGENT_WORKLOAD_UID=%u", cfg->workload_uid);
	ENV("AGENT_WORKLOAD_GID=%u", cfg->workload_gid);
	ENV("AGENT_GRPC_UDS_PATH=%s/agent.sock", SANDBOX_SOCKET_DIR);
	ENV("AGENT_SETUP_SENTINEL=/run/agentic/setup-complete");
#undef ENV
	for (uint32_t i = 0; i < req->nenv; i++)
		env[ne++] = req->env[i];
	env[ne] = NULL;

	snprintf(uid_s, sizeof(uid_s), "%u", sb->uid);
	snprintf(wl_s, sizeof(wl_s), "%u", cfg->workload_uid);
	labels[nl++] = (struct docker_kv){ "agentic-sandbox", "true" };
	labels[nl++] = (struct docker_kv){ "agentic-daemon", agenticd->owner };
	labels[nl++] = (struct docker_kv){ "agentic-instance-id", sb->instance_id };
	labels[nl++] = (struct docker_kv){ "agentic-control-uid", uid_s };
	labels[nl++] = (struct docker_kv){ "agentic-workload-uid", wl_s };
	labels[nl++] = (struct docker_kv){ "agentic-workload-boundary", "separated" };
	if (sb->net_managed)
		labels[nl++] = (struct docker_kv){ "agentic-managed-network", sb->network };
	labels[nl++] = (struct docker_kv){ "agentic-runtime", "docker" };
	labels[nl++] = (struct docker_kv){ "agentic-transport", "uds" };
	for (uint32_t i = 0; i < req->nlabels; i++)
		labels[nl++] = req->labels[i];
	labels[nl] = (struct docker_kv){ NULL, NULL };

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

	share_instance_dir(cfg, sb->instance_id, ws, sizeof(ws) - 16);
	strcat(ws, "/workspace");
	mounts[nm++] = (struct docker_mount){ cfg->agent_socket_dir, SANDBOX_SOCKET_DIR, true };
	mounts[nm++] = (struct docker_mount){ agenticd->self_exe, "/sbin/agentic-init", true };
	mounts[nm++] = (struct docker_mount){ ws, "/workspace", false };
	for (uint32_t i = 0; i < req->nmounts; i++)
		mounts[nm++] = req->mounts[i];
	mounts[nm] = (struct docker_mount){ NULL, NULL, false };

	spec.name = sb->name;
	spec.image = sb->image;
	spec.user = "0:0";
	spec.entrypoint = entry;
	spec.env = env;
	spec.labels = labels;
	spec.cap_drop = cap_drop;
	spec.cap_add = cap_add;
	secopt[1] = agenticd->seccomp_opt;
	spec.security_opt = secopt;
	spec.dns = dns;
	spec.dns_search = dns_search;
	spec.tmpfs = tmpfs;
	spec.sysctls = sysctls;
	spec.mounts = mounts;
	spec.network_mode = sb->network;
	spec.pids_limit = cfg->default_pids_limit;
	spec.memory = (int64_t)cfg->default_memory_bytes;
	spec.nano_cpus = (int64_t)cfg->default_nano_cpus;
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
	return docker_container_create_begin(&j->call, &agenticd->dc, &spec);
}

static int begin_network_create(struct docker_call *c, const char *name, const char *subnet)
{
	const struct docker_kv labels[] = {
		{ "agentic-sandbox", "true" },
		{ "agentic-daemon", agenticd->owner },
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

	return docker_network_create_begin(c, &agenticd->dc, &spec);
}

static int collect_log(void *ctx, int stream, const uint8_t *data, size_t len)
{
	struct sandbox *sb = ctx;
	size_t cap = sizeof(sb->init_log) - 1;

	(void)stream;
	if (len > cap) {
		data += len - cap;
		len = cap;
	}
	if (sb->log_len + len > cap) {
		size_t drop = sb->log_len + len - cap;

		memmove(sb->init_log, sb->init_log + drop, sb->log_len - drop);
		sb->log_len -= (uint32_t)drop;
	}
	memcpy(sb->init_log + sb->log_len, data, len);
	sb->log_len += (uint32_t)len;
	sb->init_log[sb->log_len] = '\0';
	return 0;
}

static int sandbox_begin(struct job *j)
{
	struct sandbox *sb = &agenticd->sb[j->index];
	struct docker_client *dc = &agenticd->dc;
	const char *ct = sb->container_id;

	switch (sb->step) {
	case STEP_NET_CREATE:
		return begin_network_create(&j->call, sb->network, sb->subnet_text);
	case STEP_NET_SCAN:
		return docker_network_list_begin(&j->call, dc, NULL);
	case STEP_CT_CREATE:
		return begin_container_create(j, sb);
	case STEP_CT_START:
		return docker_container_start_begin(&j->call, dc, ct);
	case STEP_CT_INSPECT:
	case STEP_REFRESH:
		return docker_container_inspect_begin(&j->call, dc, ct);
	case STEP_RB_LOGS:
		sb->log_len = 0;
		sb->init_log[0] = '\0';
		return docker_container_logs_begin(&j->call, dc, ct, false, LIMIT_CREATE_LOG_LINES,
						   false, collect_log, sb);
	case STEP_RB_CT_REMOVE:
	case STEP_RM_CT_REMOVE:
		return docker_container_remove_begin(&j->call, dc, ct, true);
	case STEP_RM_STOP:
		return docker_container_stop_begin(&j->call, dc, ct,
						   (int)((agenticd->cfg.stop_grace_ms + 999) / 1000));
	case STEP_RB_NET_REMOVE:
	case STEP_RM_NET_REMOVE:
		return docker_network_remove_begin(&j->call, dc,
						   sb->network_id[0] ? sb->network_id : sb->network);
	default:
		return ERR_STATE;
	}
}

bool provision_fault_init_env(void)
{
	const char *f = getenv("AGENTIC_FAULT");

	return f && strcmp(f, "init-env") == 0;
}

static bool gone_already(const struct docker_call *c, int r)
{
	return r == DOCKER_ERR_API && c->error.status == 404;
}

static void take_inspect(struct sandbox *sb, struct docker_call *c)
{
	static struct docker_container ct;

	if (docker_result_container(c, &ct) != 0)
		return;
	sb->running = ct.running;
	sb->pid = ct.running ? ct.pid : 0;
	sb->exit_code = ct.exit_code;
	sandbox_read_pid_ns(sb);
}

static void finish_create(struct sandbox *sb)
{
	int64_t took = clock_wall_ms() - sb->created_ms;

	sb->state = SB_READY;
	sb->step = STEP_IDLE;
	sb->deadline = 0;
	sb->ready_ms = clock_wall_ms();
	sb->req = NULL;
	metrics_provision(took);
	if (share_write_record(&agenticd->cfg, sb) != 0)
		log_warn("sandbox record not written", "name=%s instance=%s", log_q(sb->name),
			 log_q(sb->instance_id));
	log_info("sandbox ready", "name=%s instance=%s uid=%u subnet=%s took_ms=%lld network_ms=%lld "
		 "container_create_ms=%lld start_ms=%lld init_ms=%lld connect_ms=%lld", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid, sb->subnet_text[0] ? sb->subnet_text : "-", (long long)took,
		 (long long)(sb->t_net - sb->t_begin), (long long)(sb->t_ct - sb->t_net),
		 (long long)(sb->t_start - sb->t_ct), (long long)(clock_mono_ms() - sb->t_start),
		 (long long)(sb->t_auth - sb->t_ct));
	admin_finish_sandbox(sb->waiter, sb->waiter_gen, sb, 201);
	sb->waiter = -1;
	provision_pool_fill();
}

/* The last step of a rollback or a remove: ids back, record gone, slot free. */
static void finish_release(struct sandbox *sb)
{
	const struct config *cfg = &agenticd->cfg;
	bool removing = sb->state == SB_REMOVING;

	agent_drop(sb, removing ? "sandbox removed" : "sandbox create failed");
	exec_sandbox_gone(sb, "the sandbox was removed");
	runlog_stop(sb, removing ? "removed" : "create_failed");
	if (sb->dir_made || removing)
		share_retire(cfg, sb, sb->rollback || (removing && !sb->keep_workspace));
	if (sb->gone) {
		log_warn("sandbox gone: its container was removed outside agenticd",
			 "name=%s instance=%s uid=%u subnet=%s workspace=kept", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, sb->subnet_text[0] ? sb->subnet_text : "-");
	} else if (removing) {
		log_info("sandbox removed", "name=%s instance=%s uid=%u subnet=%s workspace=%s",
			 log_q(sb->name), log_q(sb->instance_id), sb->uid, sb->subnet_text[0] ? sb->subnet_text : "-",
			 sb->keep_workspace ? "kept" : "deleted");
		admin_finish_sandbox(sb->waiter, sb->waiter_gen, sb, 200);
	} else {
		log_info("create rolled back", "name=%s instance=%s uid=%u subnet=%s", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid, sb->subnet_text[0] ? sb->subnet_text : "-");
		admin_finish_error(sb->waiter, sb->waiter_gen, sb->err_status, sb->err_code,
				   sb->error);
	}
	sb->waiter = -1;
	sandbox_free(sb);
	provision_pool_fill();
}

/* Next step of a rollback or remove, from what still exists. */
static void teardown_next(struct sandbox *sb)
{
	if (sb->ct_exists)
		sb->step = sb->rollback ? STEP_RB_CT_REMOVE : STEP_RM_CT_REMOVE;
	else if (sb->net_managed && sb->net_exists)
		sb->step = sb->rollback ? STEP_RB_NET_REMOVE : STEP_RM_NET_REMOVE;
	else {
		finish_release(sb);
		return;
	}
	advance(sb);
}

static void fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(sb->error, sizeof(sb->error), fmt, ap);
	va_end(ap);
	policy_redact(sb->error, sizeof(sb->error));
	sb->err_status = status;
	sb->err_code = code;
	sb->rollback = true;
	sb->deadline = 0;
	sb->req = NULL; /* the request's connection may go away from here on */
	log_warn("create failed", "name=%s instance=%s uid=%u status=%d code=%s", log_q(sb->name),
		 log_q(sb->instance_id), sb->uid, status, code);
	if (sb->ct_exists) {
		sb->step = STEP_RB_LOGS;
		advance(sb);
	} else {
		teardown_next(sb);
	}
}

/* Appends the init's last log lines (scrubbed) to a failed create's error. */
static void append_init_log(struct sandbox *sb)
{
	size_t n = strlen(sb->error);

	if (!sb->log_len) {
		snprintf(sb->error + n, sizeof(sb->error) - n, "; the init logged nothing");
		return;
	}
	policy_redact(sb->init_log, sizeof(sb->init_log));
	snprintf(sb->error + n, sizeof(sb->error) - n, "; the init's last log lines:\n%s",
		 sb->init_log);
	while ((n = strlen(sb->error)) && sb->error[n - 1] == '\n')
		sb->error[n - 1] = '\0';
}

static void docker_failed(struct sandbox *sb, const struct docker_call *c, const char *what)
{
	char text[1024];
	bool api = c->error.code == DOCKER_ERR_API, create = c->error.op == DOCKER_OP_CONTAINER_CREATE;

	docker_error_text(&c->error, text, sizeof(text));
	if (api && create && c->error.status == 409)
		fail_create(sb, 409, "name_taken", "%s failed: %s", what, text);
	else if (api && create && sb->writable_root && c->error.status >= 400 &&
		 c->error.status != 404)
		fail_create(sb, 422, "writable_root_unbounded", "this engine cannot bound a "
			    "writable root filesystem (StorageOpt size; overlay2 needs xfs with "
			    "pquota), so none is offered: %s", text);
	else if (api && create && c->error.status == 404)
		fail_create(sb, 400, "image_missing", "%s failed: %s", what, text);
	else
		fail_create(sb, 502, "engine", "%s failed: %s", what, text);
}

/* The engine refused a network create because its subnet overlaps a network agenticd does
 * not know of. */
static bool overlaps(const struct docker_call *c)
{
	return c->error.code == DOCKER_ERR_API && c->error.op == DOCKER_OP_NETWORK_CREATE &&
	       strstr(c->error.message, "overlaps");
}

/* Every network on the engine read again: what is not ours is foreign; the create moves on to
 * the next free /28. */
static void scan_done(struct sandbox *sb, struct job *j, int r)
{
	if (r != 0) {
		job_end(j);
		docker_failed(sb, &j->call, "network list");
		return;
	}
	subnet_foreign_clear();
	r = docker_result_each_subnet(&j->call, "agentic-daemon", agenticd->owner,
				      subnet_foreign_add, NULL);
	job_end(j);
	if (r != 0) {
		fail_create(sb, 502, "engine", "network list unreadable: %s", err_str(r));
		return;
	}
	if (sandbox_take_subnet(sb) != 0) {
		fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool (%u taken "
			    "by networks agenticd did not make)", agenticd->nforeign);
		return;
	}
	log_info("subnet moved past other networks", "name=%s subnet=%s foreign_subnets=%u",
		 log_q(sb->name), sb->subnet_text, agenticd->nforeign);
	sb->step = STEP_NET_CREATE;
	advance(sb);
}

static void sandbox_done(struct sandbox *sb, struct job *j, int r)
{
	struct docker_call *c = &j->call;
	char text[1024];

	switch (sb->step) {
	case STEP_NET_CREATE:
		if (r == 0)
			r = docker_result_id(c, sb->network_id);
		job_end(j);
		if (r != 0 && overlaps(c) && sb->net_scans < LIMIT_SUBNET_SCANS) {
			log_info("subnet overlaps another network; reading the engine's networks",
				 "name=%s subnet=%s", log_q(sb->name), sb->subnet_text);
			sb->net_scans++;
			subnet_refused((uint32_t)sb->subnet);
			sb->subnet = -1;
			sb->subnet_text[0] = '\0';
			sb->step = STEP_NET_SCAN;
			break;
		}
		if (r != 0) {
			docker_failed(sb, c, "network create");
			return;
		}
		sb->net_exists = true;
		sb->t_net = clock_mono_ms();
		sb->step = STEP_CT_CREATE;
		break;
	case STEP_NET_SCAN:
		scan_done(sb, j, r);
		return;
	case STEP_CT_CREATE:
		if (r == 0)
			r = docker_result_id(c, sb->container_id);
		job_end(j);
		if (r != 0) {
			docker_failed(sb, c, "container create");
			return;
		}
		sb->ct_exists = true;
		sb->t_ct = clock_mono_ms();
		sb->req = NULL;
		share_write_record(&agenticd->cfg, sb);
		sb->step = STEP_CT_START;
		break;
	case STEP_CT_START:
		job_end(j);
		if (r != 0) {
			docker_failed(sb, c, "container start");
			return;
		}
		sb->running = true;
		sb->t_start = clock_mono_ms();
		/* ready_timeout_ms is the init's time: it starts with the container */
		sb->deadline = clock_mono_ms() + agenticd->cfg.ready_timeout_ms;
		sb->step = STEP_CT_INSPECT;
		break;
	case STEP_CT_INSPECT:
		if (r == 0)
			take_inspect(sb, c);
		job_end(j);
		if (r != 0) {
			docker_failed(sb, c, "container inspect");
			return;
		}
		if (!sb->running) {
			fail_create(sb, 500, "init_exited", "the sandbox's init exited (status %lld) "
				    "before it was ready", (long long)sb->exit_code);
			return;
		}
		/* before the agent is authed, so before READY and the workload's first command */
		if ((r = sandbox_check_binds(sb, text, sizeof(text))) != 0) {
			fail_create(sb, r == -EPERM ? 422 : 500, r == -EPERM ? "refused" : "mount_check",
				    "%s; the create was rolled back", text);
			return;
		}
		sb->step = STEP_WAIT_READY;
		agent_pid_known(sb);
		if (sb->agent_ready && sb->state == SB_CREATING && !sb->rollback)
			finish_create(sb);
		return;
	case STEP_REFRESH:
		if (r == 0)
			take_inspect(sb, c);
		job_end(j);
		sb->step = STEP_IDLE;
		if (r == 0)
			agent_pid_known(sb);
		else if (gone_already(c, r))
			sb->ev_destroy = true;
		events_dirty = true;
		return;
	case STEP_RB_LOGS:
		job_end(j);
		append_init_log(sb);
		sb->step = STEP_RB_CT_REMOVE;
		break;
	case STEP_RM_STOP:
		job_end(j);
		sb->running = false;
		sb->step = STEP_RM_CT_REMOVE;
		break;
	case STEP_RB_CT_REMOVE:
	case STEP_RM_CT_REMOVE:
	case STEP_RB_NET_REMOVE:
	case STEP_RM_NET_REMOVE:
		job_end(j);
		if (r != 0 && !gone_already(c, r)) {
			docker_error_text(&c->error, text, sizeof(text));
			log_error("teardown step failed; retrying", "name=%s step=%d error=%s",
				  log_q(sb->name), sb->step, "\"see next line\"");
			log_error("engine said", "name=%s message=%s", log_q(sb->name), log_q(text));
			sb->retry_at = clock_mono_ms() + RETRY_MS;
			return;
		}
		if (sb->step == STEP_RB_CT_REMOVE || sb->step == STEP_RM_CT_REMOVE) {
			sb->ct_exists = false;
			sb->running = false;
		} else {
			sb->net_exists = false;
		}
		teardown_next(sb);
		return;
	default:
		job_end(j);
		return;
	}
	advance(sb);
}

static void advance(struct sandbox *sb)
{
	char text[1024];
	int r;

	if (agenticd->stopping && sb->state == SB_CREATING && !sb->rollback) {
		fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	r = job_start(&sb->job);
	if (r == 0)
		return;
	docker_error_text(&sb->job.call.error, text, sizeof(text));
	if (sb->state == SB_CREATING && !sb->rollback) {
		fail_create(sb, 502, "engine", "cannot call the engine: %s", text);
		return;
	}
	log_error("engine call not started; retrying", "name=%s step=%d", log_q(sb->name),
		  sb->step);
	sb->retry_at = clock_mono_ms() + RETRY_MS;
}

/* ---- create and remove ---- */

void provision_create(struct sandbox *sb, struct create_req *req)
{
	const struct config *cfg = &agenticd->cfg;
	char err[512], hex[16];
	int r;

	sb->req = req;
	sb->created_ms = clock_wall_ms();
	sb->t_begin = sb->t_net = clock_mono_ms();
	if (uuid7(sb->instance_id) != 0 || sandbox_take_uid(sb) != 0) {
		fail_create(sb, 503, "capacity", "no free control uid in %u-%u",
			    cfg->control_uid_min, cfg->control_uid_max);
		return;
	}
	snprintf(sb->image, sizeof(sb->image), "%s", req->image ? req->image : cfg->default_image);
	sb->disk_bytes = req->disk_bytes ? req->disk_bytes : cfg->default_disk_bytes;
	sb->writable_root = req->writable_root;
	if (req->network) {
		snprintf(sb->network, sizeof(sb->network), "%s", req->network);
	} else if (agenticd->nwarm) {
		struct warm_net *w = &agenticd->warm[--agenticd->nwarm];

		memcpy(sb->network, w->name, sizeof(sb->network));
		memcpy(sb->network_id, w->id, sizeof(sb->network_id));
		sb->subnet = w->subnet;
		subnet_text(sb->subnet, sb->subnet_text, sizeof(sb->subnet_text));
		sb->net_managed = sb->net_exists = true;
	} else {
		/* with /28s taken as foreign, the engine's networks are read again first: some of
		 * those networks may be gone */
		if (sandbox_take_subnet(sb) != 0 && !agenticd->nforeign) {
			fail_create(sb, 503, "capacity", "no free /28 left in sandbox_subnet_pool");
			return;
		}
		random_hex(hex, 12);
		snprintf(sb->network, sizeof(sb->network), "agentic-net-%s", hex);
		sb->net_managed = true;
	}
	log_info("create started", "name=%s instance=%s uid=%u network=%s subnet=%s warm=%d "
		 "disk_bytes=%llu", log_q(sb->name), log_q(sb->instance_id), sb->uid,
		 log_q(sb->network), sb->subnet_text[0] ? sb->subnet_text : "-", sb->net_exists,
		 (unsigned long long)sb->disk_bytes);
	if ((r = share_make(cfg, sb, err, sizeof(err))) != 0) {
		fail_create(sb, 500, "agentshare", "%s", err);
		return;
	}
	sb->dir_made = true;
	if ((r = share_write_record(cfg, sb)) != 0) {
		fail_create(sb, 500, "agentshare", "cannot write sandbox.json: %s", err_str(r));
		return;
	}
	if ((r = share_make_workspace(cfg, sb, err, sizeof(err))) != 0) {
		if (r == -ENOSPC)
			fail_create(sb, 507, "no_space", "%s", err);
		else
			fail_create(sb, 500, "agentshare", "%s", err);
		return;
	}
	sb->step = sb->net_managed && !sb->net_exists ? STEP_NET_CREATE : STEP_CT_CREATE;
	if (sb->step == STEP_NET_CREATE && sb->subnet < 0) {
		sb->net_scans++;
		sb->step = STEP_NET_SCAN;
	}
	advance(sb);
}

int provision_remove(struct sandbox *sb, bool force, bool keep_workspace)
{
	if (sb->state == SB_REMOVING || sb->state == SB_CREATING)
		return -EBUSY;
	sb->state = SB_REMOVING;
	sb->force = force;
	sb->keep_workspace = keep_workspace;
	sb->rollback = false;
	share_write_record(&agenticd->cfg, sb);
	log_info("remove started", "name=%s instance=%s force=%d keep_workspace=%d",
		 log_q(sb->name), log_q(sb->instance_id), force, keep_workspace);
	agent_drop(sb, "sandbox is being removed");
	if (sb->job.active || sb->job.waiting)
		return 0; /* a refresh is running; sandbox_poke picks the remove up after it */
	if (sb->ct_exists && !force && sb->running) {
		sb->step = STEP_RM_STOP;
		advance(sb);
	} else {
		teardown_next(sb);
	}
	return 0;
}

void provision_ready(struct sandbox *sb)
{
	if (sb->state == SB_CREATING && !sb->rollback && sb->step == STEP_WAIT_READY)
		finish_create(sb);
	else if (sb->state == SB_READY)
		log_info("agent ready again", "name=%s instance=%s uid=%u", log_q(sb->name),
			 log_q(sb->instance_id), sb->uid);
}

/* Acts on what the event stream saw, once the sandbox has no call of its own running. */
static void sandbox_poke(struct sandbox *sb)
{
	if (sb->job.active || sb->job.waiting || sb->state == SB_FREE)
		return;
	if (sb->state == SB_REMOVING && sb->step == STEP_IDLE) {
		sb->ev_start = sb->ev_die = sb->ev_destroy = false;
		if (sb->ct_exists && !sb->force && sb->running) {
			sb->step = STEP_RM_STOP;
			advance(sb);
		} else {
			teardown_next(sb);
		}
		return;
	}
	if (sb->ev_destroy) {
		sb->ev_destroy = sb->ev_start = sb->ev_die = false;
		if (sb->state == SB_CREATING && !sb->rollback) {
			sb->ct_exists = false;
			fail_create(sb, 500, "container_removed",
				    "the sandbox's container was removed while it was being created");
		} else if (sb->state == SB_READY || sb->state == SB_CONFLICT) {
			sb->ct_exists = false;
			sb->running = false;
			sb->gone = true;
			sb->rollback = false;
			sb->state = SB_REMOVING;
			sb->keep_workspace = true;
			agent_drop(sb, "container removed");
			teardown_next(sb);
		}
		return;
	}
	if (sb->ev_die) {
		sb->ev_die = false;
		sb->running = false;
		exec_sandbox_gone(sb, "the sandbox's container stopped");
		runlog_stop(sb, "container_stopped");
		sb->pid = 0;
		sb->pid_ns[0] = '\0';
		if (sb->state == SB_CREATING && !sb->rollback && sb->step == STEP_WAIT_READY) {
			fail_create(sb, 500, "init_exited",
				    "the sandbox's init exited before it was ready");
			return;
		}
	}
	if (sb->ev_start) {
		sb->ev_start = false;
		sb->running = true;
		if (sb->state == SB_READY || sb->state == SB_CONFLICT) {
			sb->step = STEP_REFRESH;
			advance(sb);
		}
	}
}

/* ---- the warm pool ---- */

/* The engine serialises network work: a pool network created while a create runs slows that
 * create down. The pool refills between creates. */
static bool creates_running(void)
{
	for (uint32_t i = 0; i < agenticd->nsb; i++)
		if (agenticd->sb[i].state == SB_CREATING && !agenticd->sb[i].rollback)
			return true;
	return false;
}

void provision_pool_fill(void)
{
	struct job *j = &agenticd->pool_job;
	struct warm_net *p = &agenticd->pool_pending;
	uint32_t idx;
	char hex[16];

	if (agenticd->stopping || j->active || j->waiting || agenticd->nwarm >= LIMIT_WARM_NETWORKS ||
	    clock_mono_ms() < pool_retry_at || creates_running())
		return;
	if (idalloc_take(&agenticd->subnets, &idx) != 0)
		return;
	p->subnet = (int32_t)idx;
	random_hex(hex, 12);
	snprintf(p->name, sizeof(p->name), "agentic-net-%s", hex);
	if (job_start(j) != 0) {
		idalloc_free(&agenticd->subnets, idx);
		pool_retry_at = clock_mono_ms() + POOL_RETRY_MS;
	}
}

static int pool_begin(struct job *j)
{
	char subnet[20];

	subnet_text(agenticd->pool_pending.subnet, subnet, sizeof(subnet));
	return begin_network_create(&j->call, agenticd->pool_pending.name, subnet);
}

static void pool_done(struct job *j, int r)
{
	struct warm_net *p = &agenticd->pool_pending;
	char text[512];

	if (r == 0)
		r = docker_result_id(&j->call, p->id);
	if (r != 0) {
		docker_error_text(&j->call.error, text, sizeof(text));
		log_warn("warm network not created", "name=%s error=%s", p->name, log_q(text));
		if (overlaps(&j->call)) {
			subnet_refused((uint32_t)p->subnet); /* the next fill takes the next /28 */
		} else {
			idalloc_free(&agenticd->subnets, (uint32_t)p->subnet);
			pool_retry_at = clock_mono_ms() + POOL_RETRY_MS;
		}
	} else {
		agenticd->warm[agenticd->nwarm++] = *p;
	}
	job_end(j);
	provision_pool_fill();
}

/* ---- the event stream ---- */

static int on_event(void *ctx, const struct docker_event *ev)
{
	struct sandbox *sb;

	(void)ctx;
	if (ev->time_nano)
		agenticd->events_since = ev->time_nano / 1000000000;
	if (strcmp(ev->type, "container") != 0 || !(sb = sandbox_by_container(ev->id)))
		return 0;
	if (strcmp(ev->action, "start") == 0)
		sb->ev_start = true;
	else if (strcmp(ev->action, "die") == 0)
		sb->ev_die = true;
	else if (strcmp(ev->action, "destroy") == 0)
		sb->ev_destroy = true;
	else
		return 0;
	events_dirty = true;
	return 0;
}

static int events_begin(struct job *j)
{
	char filters[128];

	snprintf(filters, sizeof(filters), "{\"type\":[\"container\"],\"label\":[\"%s\"]}",
		 agenticd->owner_label);
	return docker_events_begin(&j->call, &agenticd->dc, filters, agenticd->events_since,
				   on_event, NULL);
}

void provision_events_start(void)
{
	struct job *j = &agenticd->events_job;
	int r;

	agenticd->events_retry = 0;
	if (agenticd->stopping || j->active)
		return;
	r = job_start(j);
	if (r != 0) {
		log_warn("event stream not opened; retrying", "error=%s", err_str(r));
		agenticd->events_retry = clock_mono_ms() + EVENTS_RETRY_MS;
	}
}

static void events_done(struct job *j, int r)
{
	char text[512];

	docker_error_text(&j->call.error, text, sizeof(text));
	job_end(j);
	if (agenticd->stopping)
		return;
	log_warn("event stream ended; reopening", "error=%s", log_q(r ? text : "end of stream"));
	agenticd->events_retry = clock_mono_ms() + EVENTS_RETRY_MS;
}

/* ---- dispatch, timers, shutdown ---- */

static void job_done(struct job *j, int r)
{
	switch (j->owner) {
	case JOB_SANDBOX:
		sandbox_done(&agenticd->sb[j->index], j, r);
		break;
	case JOB_POOL:
		pool_done(j, r);
		break;
	case JOB_EVENTS:
		events_done(j, r);
		break;
	}
}

static void after_events(void)
{
	if (!events_dirty)
		return;
	events_dirty = false;
	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		struct sandbox *sb = &agenticd->sb[i];

		if (sb->ev_start || sb->ev_die || sb->ev_destroy)
			sandbox_poke(sb);
	}
}

void provision_tick(int64_t now)
{
	for (uint32_t i = 0; i < agenticd->njobs; i++) {
		struct job *j = agenticd->jobs[i];

		if (j->active && (j->soon || docker_call_timeout_ms(&j->call) == 0))
			job_step(j);
	}
	jobs_kick();
	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		struct sandbox *sb = &agenticd->sb[i];

		if (sb->state == SB_FREE)
			continue;
		if (sb->deadline && now >= sb->deadline && sb->state == SB_CREATING && !sb->rollback &&
		    !sb->job.active && !sb->job.waiting)
			fail_create(sb, 504, "not_ready", "the sandbox was not ready within %u ms "
				    "(ready_timeout_ms): its init did not register and report READY",
				    agenticd->cfg.ready_timeout_ms);
		if (sb->retry_at && now >= sb->retry_at && !sb->job.active && !sb->job.waiting) {
			sb->retry_at = 0;
			advance(sb);
		}
		if (sb->state == SB_REMOVING && sb->step == STEP_IDLE)
			sandbox_poke(sb);
	}
	after_events();
	if (agenticd->events_retry && now >= agenticd->events_retry)
		provision_events_start();
	provision_pool_fill();
}

int64_t provision_next_deadline(void)
{
	int64_t next = INT64_MAX, now = clock_mono_ms();

	for (uint32_t i = 0; i < agenticd->njobs; i++) {
		struct job *j = agenticd->jobs[i];
		int t;

		if (!j->active)
			continue;
		if (j->soon)
			return now;
		t = docker_call_timeout_ms(&j->call);
		if (t >= 0 && now + t < next)
			next = now + t;
	}
	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		const struct sandbox *sb = &agenticd->sb[i];

		if (sb->state == SB_FREE)
			continue;
		if (sb->deadline && sb->deadline < next)
			next = sb->deadline;
		if (sb->retry_at && sb->retry_at < next)
			next = sb->retry_at;
	}
	if (agenticd->events_retry && agenticd->events_retry < next)
		next = agenticd->events_retry;
	if (pool_retry_at > now && pool_retry_at < next)
		next = pool_retry_at;
	if (events_dirty)
		next = now;
	return next;
}

bool provision_busy(void)
{
	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		const struct sandbox *sb = &agenticd->sb[i];

		if (sb->state == SB_CREATING || (sb->state == SB_REMOVING && !sb->gone) ||
		    sb->job.active || sb->job.waiting)
			return true;
	}
	return agenticd->pool_job.active || agenticd->pool_job.waiting;
}

void provision_shutdown(void)
{
	struct job *ev = &agenticd->events_job;

	agenticd->stopping = true;
	if (ev->active)
		job_end(ev);
	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		struct sandbox *sb = &agenticd->sb[i];

		if (sb->state != SB_CREATING || sb->rollback)
			continue;
		/* a running call finishes first (its result tells what exists to undo): advance()
		 * turns the create into a rollback then */
		if (!sb->job.active && !sb->job.waiting)
			fail_create(sb, 503, "shutting_down", "agenticd is shutting down");
	}
}
