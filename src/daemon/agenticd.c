/* agenticd.c: the management daemon: start-up (config, budget, engine checks, recovery,
 * sockets) and the one event loop (epoll, signalfd, timerfd) everything else runs on. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "admin/admin.h"
#include "agent/agent.h"
#include "agent/exec.h"
#include "config/profiles.h"
#include "daemon/daemon.h"
#include "e2b/e2b.h"
#include "e2b/e2b_keys.h"
#include "egress/broker.h"
#include "fleet/link.h"
#include "lifecycle/lifecycle.h"
#include "lifecycle/netpool.h"
#include "lifecycle/recover.h"
#include "lifecycle/taint.h"
#include "metrics/metrics.h"
#include "runtime/engine.h"
#include "runtime/runtime_docker.h"
#include "sandbox/posture.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "verify/verify.h"
#include "workspace/host.h"
#include "workspace/share.h"
#include "version.h"

const char agenticd_help[] =
	"usage: agenticd [-c FILE]\n"
	"\n"
	"The management daemon: provisions sandboxes through the Docker Engine API, serves the\n"
	"agent gRPC socket (agent_socket_dir/agent.sock) and the admin API (admin_socket).\n"
	"Runs in the foreground as root and logs to stderr (logfmt).\n"
	"\n"
	"  -c FILE   configuration (default " CONFIG_PATH_DEFAULT "; built-in defaults when\n"
	"            that file is absent). Every key is documented in config/agenticd.conf.\n"
	"\n"
	"Environment: AGENTSHARE_ROOT overrides agentshare_root; NOTIFY_SOCKET (systemd\n"
	"Type=notify) gets READY=1 once the sockets serve; AGENTIC_ALLOC_CHECK=1 aborts on any\n"
	"allocation after start-up and on a broken sandbox-lifecycle invariant. SIGTERM: stop\n"
	"accepting, roll back creates in flight, exit 0; sandboxes keep running.\n";

struct daemon *agenticd;
static struct daemon daemon_state;

static void daemon_watch(int fd, uint32_t events, enum tag_kind kind, uint32_t index)
{
	struct epoll_event ev = { .events = events };

	ev.data.u64 = ((uint64_t)kind << 32) | index;
	if (epoll_ctl(agenticd->epfd, EPOLL_CTL_ADD, fd, &ev) != 0)
		log_error("cannot watch a descriptor", "fd=%d error=%s", fd, log_q(strerror(errno)));
}

/* ---- the memory budget: computed from the config, taken once ---- */

struct budget {
	size_t sandboxes, admin, jobs, grpc, agrpc, docker, scratch, total_region, total_heap, image;
	size_t execs;                  /* the exec session table: static, touched as it is used */
	size_t verify;                 /* the verifier's runs and buffers: the same */
	size_t egress;                 /* the egress slots and their buffers */
	size_t agents;                 /* the agent connection state of each sandbox slot */
	size_t transcripts;            /* the transcript state of each sandbox slot */
	size_t e2b;                    /* the E2B listener's connections and fields (0: off) */
	uint32_t e2b_conns;
	struct grpc_server_config gcfg;
	struct grpc_server_config acfg; /* gRPC Exec on the admin socket */
	struct docker_client_config dcfg;
};

static size_t round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* The static allocator hands out power-of-two blocks with a 16-byte header. */
static size_t heap_block(size_t n)
{
	size_t b = 32;

	while (b < n + 32)
		b <<= 1;
	return b;
}

static int budget_compute(const struct config *cfg, struct budget *b)
{
	uint32_t bits = 64;

	/* what config_validate and the CIDR's reader hold to: the maps below are sized by them */
	ASSERT(cfg->control_uid_min <= cfg->control_uid_max);
	ASSERT(cfg->subnet_pool_prefix <= 28);
	memset(b, 0, sizeof(*b));
	/* a slot and buffers of its own for every sandbox's init; guests get what is left */
	b->gcfg.admit = agent_admit;
	b->gcfg.reserved_connections = cfg->max_sandboxes;
	b->gcfg.reserved_streams = LIMIT_AGENT_INIT_STREAMS;
	/* an init sends only small messages (INIT_CHUNK_BYTES of output at most): the two large
	 * buffers are for what agenticd sends, and no init can hold one */
	b->gcfg.reserved_message_bytes = GRPC_SMALL_MESSAGE;
	b->gcfg.max_connections = LIMIT_AGENT_GUEST_CONNECTIONS;
	b->gcfg.guest_per_uid = LIMIT_AGENT_GUEST_PER_UID;
	b->gcfg.guest_idle_ms = LIMIT_AGENT_GUEST_IDLE_MS;
	b->gcfg.max_streams_per_connection = cfg->max_streams_per_connection;
	b->gcfg.max_message_bytes = (uint32_t)cfg->max_message_bytes;
	b->gcfg.small_buffers = LIMIT_AGENT_INIT_BUFFERS * cfg->max_sandboxes +
				LIMIT_AGENT_SPARE_BUFFERS;
	b->gcfg.large_buffers = 2;
	/* egress calls: a pool of their own (two small buffers per connection carried at once),
	 * and egress_per_sandbox streams per init beside its Connect */
	b->gcfg.own_buffers = 2 * cfg->egress_max_connections;
	b->gcfg.own_streams = cfg->egress_per_sandbox;
	b->dcfg.docker_host = cfg->docker_host;
	b->dcfg.connections = LIMIT_DOCKER_CONNS;
	/* the largest answer is the start-up list of every agentic container */
	b->dcfg.response_limit = cfg->max_sandboxes * 4096u;
	if (b->dcfg.response_limit < 256u * 1024u)
		b->dcfg.response_limit = 256u * 1024u;
	if (b->dcfg.response_limit > LIMIT_DOCKER_RESPONSE_BYTES)
		b->dcfg.response_limit = LIMIT_DOCKER_RESPONSE_BYTES;
	/* a stop waits stop_grace_ms for the engine's answer */
	b->dcfg.read_timeout_ms = cfg->stop_grace_ms + 30000 > 60000 ? (int)cfg->stop_grace_ms + 30000
								      : 60000;
	b->sandboxes = round64((size_t)cfg->max_sandboxes * sizeof(struct sandbox));
	b->agents = round64((size_t)cfg->max_sandboxes * sizeof(struct agent_sb));
	b->transcripts = round64((size_t)cfg->max_sandboxes * sizeof(struct transcript_sb));
	b->admin = round64((size_t)cfg->max_admin_connections * sizeof(struct admin_conn));
	/* the runtime's call slots: one per sandbox and the warm pool's */
	b->jobs = round64(runtime_docker_storage_bytes(RT_SLOTS(cfg->max_sandboxes)));
	b->jobs += round64((size_t)cfg->max_sandboxes * sizeof(struct lc_sb));
	b->grpc = round64(grpc_server_storage_bytes(&b->gcfg));
	if (!b->grpc)
		return -EINVAL;
	/* each Exec call holds an admin connection slot and at most one queued message */
	b->acfg.max_connections = cfg->max_admin_connections;
	b->acfg.max_streams_per_connection = 16;
	b->acfg.max_message_bytes = GRPC_SMALL_MESSAGE;
	b->acfg.small_buffers = cfg->max_admin_connections + 4;
	b->acfg.large_buffers = 0;
	b->agrpc = round64(grpc_server_storage_bytes(&b->acfg));
	if (!b->agrpc)
		return -EINVAL;
	while (bits < cfg->control_uid_max - cfg->control_uid_min + 1)
		bits += 64;
	/* the uid map, the subnet map and its foreign bits */
	b->jobs += round64(bits / 8) + 2 * round64(((1u << (28 - cfg->subnet_pool_prefix)) + 64) / 8);
	b->docker = heap_block(docker_client_footprint(&b->dcfg));
	b->scratch = 2 * heap_block(recover_scratch_bytes(cfg->max_sandboxes));
	b->egress = round64(egress_storage_bytes(cfg));
	b->e2b_conns = cfg->e2b_listen[0] ? cfg->e2b_max_connections : 0;
	b->e2b = round64(e2b_storage_bytes(b->e2b_conns, cfg->max_sandboxes));
	b->total_region = b->sandboxes + b->admin + b->jobs + b->grpc + b->agrpc + b->egress +
			  b->agents + b->transcripts + b->e2b;
	/* libc's own start-up and directory reads, beyond the boot heap */
	b->total_heap = b->docker + b->scratch + heap_block(runtime_vm_storage_bytes(cfg->max_sandboxes)) +
			(1u << 20);
	/* static tables: exec sessions, file operations, the E2B services' (when it listens) */
	b->execs = round64(exec_table_bytes() + fileop_table_bytes() +
			   (b->e2b_conns ? e2b_static_bytes() : 0));
	b->verify = round64(verify_table_bytes());
	return 0;
}

/* The process as loaded (text, data, what libc touched): VmRSS before the budget is taken. */
static size_t image_bytes(void)
{
	char line[128];
	FILE *f = fopen("/proc/self/status", "re");
	size_t kb = 0;

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %zu kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb * 1024;
}

/* ---- start-up ---- */

static int fail(const char *what, const char *detail)
{
	log_error(what, "error=%s", log_q(detail));
	fprintf(stderr, "agenticd: %s: %s\n", what, detail);
	return 1;
}

static int engine_checks(struct daemon *d)
{
	struct docker_error e;
	struct docker_info info;
	enum engine_place place;
	char text[1024], kernel[128];

	if (docker_client_negotiate(&d->dc, &e) != 0)
		return fail("cannot use the Docker engine", docker_error_text(&e, text, sizeof(text)));
	if (docker_info(&d->dc, &info, &e) != 0)
		return fail("cannot read the engine's /info", docker_error_text(&e, text, sizeof(text)));
	snprintf(d->engine_version, sizeof(d->engine_version), "%s", info.server_version);
	if (info.userns_remap)
		return fail("refusing to start", "the Docker engine runs with userns-remap: it maps "
			    "container uids to other host uids, so SO_PEERCRED would no longer name a "
			    "sandbox's control uid and the resolver could not authenticate agents. "
			    "Run agenticd against an engine without userns-remap");
	place = host_engine_place(&info, host_kernel_release(kernel, sizeof(kernel)),
				  d->in_container);
	if (place == ENGINE_DESKTOP_OUTSIDE)
		return fail("refusing to start", "the engine is Docker Desktop and agenticd runs "
			    "outside its VM: peer credentials do not cross the VM, so the agent "
			    "socket cannot authenticate sandboxes. Run agenticd as a container of "
			    "that engine (tools/agenticd-container --run; docs/CONTAINER.md), where "
			    "it shares the VM's kernel with its sandboxes");
	snprintf(d->engine_place, sizeof(d->engine_place), "%s",
		 place == ENGINE_DESKTOP_VM ? "docker-desktop-vm" : "linux");
	log_info("engine", "version=%s api=%s os=%s kernel=%s place=%s",
		 log_q(info.server_version), log_q(d->dc.version), log_q(info.operating_system),
		 log_q(info.kernel_version), log_q(d->engine_place));
	return 0;
}

static int setup_loop(struct daemon *d)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGHUP);
	if (sigprocmask(SIG_BLOCK, &set, NULL) != 0)
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	d->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->sigfd < 0 || d->timerfd < 0 || d->epfd < 0)
		return -errno;
	daemon_watch(d->sigfd, EPOLLIN, TAG_SIGNAL, 0);
	daemon_watch(d->timerfd, EPOLLIN, TAG_TIMER, 0);
	return 0;
}

static void *carve(uint8_t **p, size_t n)
{
	void *r = *p;

	*p += round64(n);
	return r;
}

static int setup_tables(struct daemon *d, const struct budget *b, uint8_t *region)
{
	const struct config *cfg = &d->cfg;
	uint8_t *p = region;
	uint32_t nsub = 1u << (28 - cfg->subnet_pool_prefix);
	uint32_t nuid = cfg->control_uid_max - cfg->control_uid_min + 1;
	struct sandbox *sb;
	struct agent_sb *agents;
	struct transcript_sb *transcripts;
	struct admin_conn *conns;
	uint64_t *uid_bits, *subnet_bits, *foreign_bits;
	int r;

	d->nsb = cfg->max_sandboxes;
	sb = carve(&p, b->sandboxes);
	agents = carve(&p, b->agents);
	transcripts = carve(&p, b->transcripts);
	conns = carve(&p, b->admin);
	d->rt_storage = carve(&p, runtime_docker_storage_bytes(RT_SLOTS(d->nsb)));
	d->lc_slots = carve(&p, (size_t)d->nsb * sizeof(struct lc_sb));
	uid_bits = carve(&p, ((nuid + 63) / 64) * 8);
	subnet_bits = carve(&p, ((nsub + 63) / 64) * 8);
	foreign_bits = carve(&p, ((nsub + 63) / 64) * 8);
	sandbox_table_init(cfg, sb, d->nsb, uid_bits);
	subnet_init(cfg, subnet_bits, foreign_bits);
	egress_init(cfg, d->self_exe, d->epfd,
		    &(const struct egress_tags){ TAG_EGRESS_DATA, TAG_EGRESS_CTL, TAG_EGRESS_LISTEN },
		    carve(&p, b->egress), b->egress);
	r = grpc_server_init(&b->gcfg, carve(&p, b->grpc), b->grpc, &d->grpc);
	if (r == 0)
		r = grpc_server_init(&b->acfg, carve(&p, b->agrpc), b->agrpc, &d->admin_grpc);
	if (r != 0)
		return r;
	e2b_init(&(struct e2b_config){ cfg, carve(&p, b->e2b), b->e2b_conns, d->nsb, d->epfd,
				       TAG_E2B_LISTEN, TAG_E2B_CONN });
	/* the budget's seal: what was carved is what budget_compute counted, no more */
	ASSERT((size_t)(p - region) <= b->total_region);
	admin_init(&(struct admin_config){
		.cfg = cfg, .conns = conns, .nconns = cfg->max_admin_connections, .epfd = d->epfd,
		.grpc = d->admin_grpc, .group_known = d->admin_group_known, .gid = d->admin_gid,
		.budget = d->budget, .engine_version = d->engine_version,
		.api_version = d->dc.version, .pool = &d->pool,
		.in_container = d->in_container, .engine_place = d->engine_place, .vm = &d->vm,
	});
	agent_init(cfg, d->grpc, agents, d->nsb);
	transcript_init(transcripts, d->nsb);
	recover_init(cfg, &d->pool);
	return 0;
}

static int open_sockets(struct daemon *d, char *err, size_t err_size)
{
	char path[LIMIT_PATH_BYTES];
	int fd, r;

	if (snprintf(path, sizeof(path), "%s/agent.sock", d->cfg.agent_socket_dir) >=
	    (int)sizeof(path))
		return -ENAMETOOLONG;
	if ((r = host_listen(path, 0666, 0, &fd, err, err_size)) != 0)
		return r;
	if ((r = grpc_server_add_listener(d->grpc, fd, agent_methods, agent_nmethods)) != 0) {
		snprintf(err, err_size, "cannot serve gRPC on %.300s: %s", path, err_str(r));
		return r;
	}
	daemon_watch(grpc_server_fd(d->grpc), EPOLLIN, TAG_GRPC, 0);
	daemon_watch(grpc_server_fd(d->admin_grpc), EPOLLIN, TAG_ADMIN_GRPC, 0);
	r = host_listen(d->cfg.admin_socket, 0660, d->admin_group_known ? d->admin_gid : 0,
			&fd, err, err_size);
	if (r != 0)
		return r;
	admin_listen(fd);
	/* the E2B listener and the fleet's worker, when configured */
	return e2b_listen(err, err_size) ? -EINVAL : fleet_link_init(&(struct fleet_link_config){
		&d->cfg, d->self_exe, d->epfd, TAG_FLEET, { admin_adopt_relayed, e2b_adopt_relayed },
		{ admin_placed, e2b_placed },
		runtime_vm_unavailable(&d->vm) ? NULL : runtime_vm_accel(&d->vm), d->docker.images,
		&d->docker.images_whole }, err, err_size);
}

/* The checking build's switch: the tests run agenticd with AGENTIC_ALLOC_CHECK=1, and a
 * broken lifecycle invariant then aborts like a late allocation does. */
static bool checking(void)
{
	const char *v = getenv("AGENTIC_ALLOC_CHECK");

	return v && strcmp(v, "1") == 0;
}

/* ---- the VM runtime's hooks and settings ---- */

static int hook_vm_channel(void *ctx, struct sandbox *sb, int fd)
{
	return agent_vm_channel(sb, fd);
}

static bool hook_vm_busy(void *ctx, struct sandbox *sb)
{
	return agent_vm_busy(sb);
}

static bool hook_vm_shutdown(void *ctx, struct sandbox *sb, int grace_s)
{
	return agent_shutdown(sb, grace_s);
}

/* vm_kernel_dir, else BINDIR/../lib/agentic/vm (an install), else build/vm beside the
 * binary (a checkout): the first that holds a vmlinuz. */
static void vm_kernel_find(struct daemon *d)
{
	char dir[LIMIT_PATH_BYTES], p[LIMIT_PATH_BYTES + 64], *slash;
	const char *tail[] = { "/../lib/agentic/vm", "/build/vm" };
	struct stat st;

	if (d->cfg.vm_kernel_dir[0]) {
		snprintf(d->vm_kernel_dir, sizeof(d->vm_kernel_dir), "%s", d->cfg.vm_kernel_dir);
		return;
	}
	d->vm_kernel_dir[0] = '\0';
	if (!realpath(d->self_exe, dir) || !(slash = strrchr(dir, '/')))
		return;
	*slash = '\0';
	for (size_t i = 0; i < ARRAY_LEN(tail); i++) {
		snprintf(p, sizeof(p), "%s%s/vmlinuz", dir, tail[i]);
		if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
			snprintf(p, sizeof(p), "%s%s", dir, tail[i]);
			if (!realpath(p, d->vm_kernel_dir))
				d->vm_kernel_dir[0] = '\0';
			return;
		}
	}
}

/* The engine binds agent_socket_dir, the init's copy in state_dir and the workspaces under
 * agentshare_root by path when it starts a container, resolving each on its own host: only
 * root may be able to swap anything on those paths there, as for a mount source. In a
 * container, agenticd's own directories are its image's: each path is walked from the host's
 * root (/proc/1/root). Checked before agenticd chowns or chmods anything on them. */
/* Nobody but root can swap path (absolute) on the engine's host: walked as a mount source
 * when it exists, else its parent (made) must be root's and writable by root alone. */
static int path_fixed(const char *path, char *why, size_t why_size)
{
	char parent[LIMIT_PATH_BYTES], real[PATH_MAX], *slash;
	struct policy_mount_id id;

	if (realpath(path, real))
		return policy_mount_source(real, &id, why, why_size);
	snprintf(parent, sizeof(parent), "%s", path);
	slash = strrchr(parent, '/');
	if (slash)
		slash[slash == parent] = '\0';
	if (host_mkdirs(parent, 0755) != 0 || !realpath(parent, real)) {
		snprintf(why, why_size, "cannot make %.400s: %s", parent, strerror(errno));
		return -ENOENT;
	}
	return policy_dir_fixed(real, &id, why, why_size);
}

static int host_paths_above(struct daemon *d, char *err, size_t err_size)
{
	static const char *const keys[] = { "state_dir", "agentshare_root", "agent_socket_dir" };
	const char *paths[] = { d->cfg.state_dir, d->cfg.agentshare_root, d->cfg.agent_socket_dir };
	char path[LIMIT_PATH_BYTES], why[768], *slash;
	int root = host_engine_root(&d->cfg, d->in_container, err, err_size);
	int r = 0;

	if (root < 0)
		return root;
	policy_root_set(root);
	/* agent_socket_dir's parent: agenticd makes it root's 0700 or 0710 */
	for (size_t i = 0; i < ARRAY_LEN(keys) && r == 0; i++) {
		snprintf(path, sizeof(path), "%s", paths[i]);
		if (i == 2 && (slash = strrchr(path, '/')))
			slash[slash == path] = '\0';
		if ((r = path_fixed(path, why, sizeof(why))) != 0)
			snprintf(err, err_size, "%s %.200s is not safe to bind from: %s", keys[i],
				 paths[i], why);
	}
	return r;
}

/* After they are made: agentshare_root itself, agent_socket_dir and the init's copy are what
 * agenticd sees at those paths (in a container: bound at themselves), each walked on the
 * engine's host; the copy's device and inode are kept for the checks at each create. */
static int bound_paths_check(struct daemon *d, char *err, size_t err_size)
{
	static const char *const keys[] = { "agentshare_root", "agent_socket_dir",
					    "state_dir's init copy" };
	const char *paths[] = { d->cfg.agentshare_root, d->cfg.agent_socket_dir, d->init_exe };
	char real[PATH_MAX], why[768];
	struct policy_mount_id id;
	int r = 0;

	if (host_mkdirs(d->cfg.agentshare_root, 0755) != 0) {
		snprintf(err, err_size, "cannot make agentshare_root %.400s: %s",
			 d->cfg.agentshare_root, strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < ARRAY_LEN(keys) && r == 0; i++) {
		struct policy_mount_id *to = i == 2 ? &d->init_id : &id;

		if (!realpath(paths[i], real)) {
			r = -errno;
			snprintf(why, sizeof(why), "%s", strerror(-r));
		} else if ((r = i == 0 ? policy_dir_fixed(real, to, why, sizeof(why))
				       : policy_mount_source(real, to, why, sizeof(why))) == 0) {
			r = policy_same_file(real, to, why, sizeof(why));
		}
		if (r != 0)
			snprintf(err, err_size, "%s %.200s is not safe to bind from: %s", keys[i],
				 paths[i], why);
	}
	if (r == 0)
		snprintf(d->init_exe, sizeof(d->init_exe), "%s", real);
	return r;
}

/* The Docker runtime on the loop, the warm pool on it, the lifecycle driving both. */
static int start_lifecycle(struct daemon *d)
{
	/* the last engine event's time: what was done to a sandbox while agenticd was down is
	 * read back from the engine from then on */
	static char since_path[LIMIT_PATH_BYTES];
	struct runtime_docker_config rc = {
		.cfg = &d->cfg, .dc = &d->dc, .owner = d->owner, .owner_label = d->owner_label,
		.self_exe = d->init_exe, .seccomp_opt = d->seccomp_opt, .epfd = d->epfd,
		.tag = TAG_JOB, .slots = RT_SLOTS(d->nsb), .events_since = clock_wall_ms() / 1000,
		.since_path = since_path,
	};
	struct lifecycle_config lcfg = {
		.cfg = &d->cfg, .sb = sandbox_slot(0), .nsb = d->nsb, .slots = d->lc_slots,
		.pool = &d->pool, .hooks = &agenticd_hooks,
		.check = checking(), .init_path = d->init_exe, .init_id = &d->init_id,
	};
	int r;

	if ((size_t)snprintf(since_path, sizeof(since_path), "%s/engine-events-since",
			     d->cfg.agentshare_root) >= sizeof(since_path))
		return -ENAMETOOLONG;
	r = runtime_docker_init(&d->docker, &rc, d->rt_storage,
				runtime_docker_storage_bytes(RT_SLOTS(d->nsb)));
	if (r != 0)
		return r;
	vm_kernel_find(d);
	r = runtime_vm_init(&d->vm, &(struct runtime_vm_config){
		.cfg = &d->cfg, .docker = &d->docker.rt, .self_exe = d->init_exe,
		.kernel_dir = d->vm_kernel_dir, .accel = d->cfg.vm_accel, .epfd = d->epfd,
		.tag = TAG_VM, .slots = d->nsb, .channel = hook_vm_channel,
		.channel_busy = hook_vm_busy, .shutdown = hook_vm_shutdown });
	if (r != 0)
		return r;
	if (runtime_vm_unavailable(&d->vm))
		log_info("vm runtime unavailable", "why=%s", log_q(runtime_vm_unavailable(&d->vm)));
	else
		log_info("vm runtime", "kernel_dir=%s accel=%s", log_q(d->vm_kernel_dir),
			 log_q(runtime_vm_accel(&d->vm)));
	d->rt = &d->vm.rt;
	netpool_init(&d->pool, d->rt, RT_SLOT_POOL(d->nsb), subnet_map());
	lcfg.rt = d->rt;
	lifecycle_start(&lcfg);
	verify_init(&(struct verify_config){ .cfg = &d->cfg, .dc = &d->dc, .vm = &d->vm,
					     .self_exe = d->init_exe, .epfd = d->epfd,
					     .tag = TAG_VERIFY });
	return 0;
}

/* ---- the loop ---- */

/* Sets the timer for the next deadline; true when something is due now (the loop then does
 * not sleep: a runtime call begun on this turn takes its first step on the next). */
static bool arm_timer(struct daemon *d)
{
	int64_t now = clock_mono_ms(), next = lifecycle_next_deadline(now);
	int64_t ver = verify_next_deadline(now), e2 = e2b_next_deadline();
	const int64_t others[] = { runlog_next_deadline(), agent_next_deadline(), ver,
				   egress_next_deadline(), e2, fleet_link_next_deadline() };
	bool due = next <= now || ver <= now || e2 <= now;
	const int g[] = { grpc_server_timeout(d->grpc), grpc_server_timeout(d->admin_grpc) };
	struct itimerspec its = { 0 };

	for (size_t i = 0; i < ARRAY_LEN(others); i++)
		if (others[i] < next)
			next = others[i];
	for (size_t i = 0; i < ARRAY_LEN(g); i++)
		if (g[i] >= 0 && now + g[i] < next)
			next = now + g[i];
	if (now + 1000 < next)
		next = now + 1000; /* idle connections and retries are checked every second */
	if (next <= now)
		next = now + 1;
	its.it_value.tv_sec = next / 1000;
	its.it_value.tv_nsec = (next % 1000) * 1000000;
	timerfd_settime(d->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
	return due;
}

static void on_signal(struct daemon *d)
{
	struct signalfd_siginfo si;

	while (read(d->sigfd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD) {
			/* the workers first, by pid: share.c's reaping takes any child left */
			fleet_link_reap();
			egress_reap();
			share_reap_children();
		} else if (si.ssi_signo == SIGHUP) {
			profiles_reload();
			log_info("SIGHUP", "note=%s", "\"profiles reloaded; a changed config needs a "
				 "restart of agenticd\"");
		} else if (!d->stopping) {
			log_info("stopping", "signal=%u creates_in_flight_roll_back=1 sandboxes_keep_running=1",
				 si.ssi_signo);
			admin_shutdown();
			e2b_shutdown();
			egress_shutdown();
			fleet_link_shutdown();
			d->stopping = true;
			lifecycle_shutdown();
		}
	}
}

/* Every module's timers and deferred work, at each turn of the loop. */
static void ticks(void)
{
	lifecycle_tick(clock_mono_ms());
	agent_tick(clock_mono_ms());
	runlog_tick(clock_mono_ms());
	verify_tick(clock_mono_ms());
	egress_tick(clock_mono_ms());
	admin_tick(clock_mono_ms());
	e2b_tick(clock_mono_ms());
	fleet_link_tick(clock_mono_ms(), sandbox_live());
}

static int run_loop(struct daemon *d)
{
	struct epoll_event evs[64];
	int64_t stop_started = 0;

	for (;;) {
		int n;

		n = epoll_wait(d->epfd, evs, ARRAY_LEN(evs), arm_timer(d) ? 0 : -1);
		if (n < 0 && errno != EINTR)
			return fail("event loop", strerror(errno));
		for (int i = 0; i < n; i++) {
			uint32_t kind = (uint32_t)(evs[i].data.u64 >> 32);
			uint32_t idx = (uint32_t)evs[i].data.u64;
			uint64_t ticks;

			switch (kind) {
			case TAG_SIGNAL:
				on_signal(d);
				break;
			case TAG_TIMER:
				(void)!read(d->timerfd, &ticks, sizeof(ticks));
				break;
			case TAG_ADMIN_LISTEN:
				admin_accept();
				break;
			case TAG_ADMIN_CONN:
				admin_event(idx, evs[i].events);
				break;
			case TAG_GRPC:
				grpc_server_run(d->grpc, 0);
				break;
			case TAG_ADMIN_GRPC:
				grpc_server_run(d->admin_grpc, 0);
				break;
			case TAG_JOB:
				d->rt->ops->ready(d->rt->self, idx);
				break;
			case TAG_VM:
				runtime_vm_ready(&d->vm, idx);
				break;
			case TAG_VERIFY:
				verify_ready(idx);
				break;
			case TAG_EGRESS_DATA:
			case TAG_EGRESS_CTL:
				egress_event(idx, kind == TAG_EGRESS_CTL, evs[i].events);
				break;
			case TAG_EGRESS_LISTEN:
				egress_listen_event(idx);
				break;
			case TAG_E2B_LISTEN:
				e2b_accept();
				break;
			case TAG_E2B_CONN:
				e2b_event(idx, evs[i].events);
				break;
			case TAG_FLEET:
				fleet_link_event(idx);
				break;
			}
		}
		if (grpc_server_timeout(d->grpc) == 0)
			grpc_server_run(d->grpc, 0);
		if (grpc_server_timeout(d->admin_grpc) == 0)
			grpc_server_run(d->admin_grpc, 0);
		ticks();
		if (d->stopping) {
			if (!stop_started)
				stop_started = clock_mono_ms();
			/* answers to the clients of rolled-back creates get a moment to leave */
			if (!lifecycle_busy() && ((!admin_answering() && !e2b_answering()) ||
						  clock_mono_ms() - stop_started > 5000)) {
				/* the runs go on without us: their metrics as they are now */
				runlog_tick(INT64_MAX);
				return 0;
			}
		}
	}
}

/* -c FILE, or nothing: 0, or 2 with the usage printed. */
static int parse_args(int argc, char **argv, const char **path, bool *explicit_path)
{
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc) {
			*path = argv[++i];
			*explicit_path = true;
		} else {
			fprintf(stderr, "agenticd: unknown argument %s\n%s", argv[i], agenticd_help);
			return 2;
		}
	}
	return 0;
}

/* The config read, checked and applied, and the seccomp profile it names: its size, or -1
 * (the error printed: exit 2). */
static int config_read(struct daemon *d, const char *path, bool explicit_path)
{
	char err[1024];
	int profile_bytes;

	config_defaults(&d->cfg);
	if (config_load(&d->cfg, path, explicit_path, err, sizeof(err)) != 0) {
		fprintf(stderr, "agenticd: %s\n", err);
		return -1;
	}
	config_apply_env(&d->cfg);
	if (config_validate(&d->cfg, err, sizeof(err)) != 0 ||
	    config_e2b_egress_load(&d->cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "agenticd: %s: %s\n", path, err);
		return -1;
	}
	config_log_apply(&d->cfg);
	profile_bytes = seccomp_opt_for(&d->cfg, d->seccomp_opt, sizeof(d->seccomp_opt), err,
					sizeof(err));
	if (profile_bytes < 0)
		fprintf(stderr, "agenticd: %s\n", err);
	return profile_bytes;
}

/* Who and where agenticd is: root, its own binary, in a container or not, the admin group. */
static int self_identify(struct daemon *d)
{
	char self[LIMIT_PATH_BYTES];
	struct group *gr;
	ssize_t n;

	host_warn_subuid(&d->cfg, "/etc/subuid");
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n <= 0)
		return fail("cannot find the agentic binary", strerror(errno));
	self[n] = '\0';
	if (!realpath(self, d->self_exe))
		return fail("cannot resolve the agentic binary", strerror(errno));
	d->in_container = host_in_container();
	log_info("runs", "in_container=%s", d->in_container ? "yes" : "no");
	gr = getgrnam(d->cfg.admin_group);
	d->admin_group_known = gr != NULL;
	d->admin_gid = gr ? gr->gr_gid : 0;
	if (!gr)
		log_warn("admin group absent: the admin API is root only", "group=%s",
			 log_q(d->cfg.admin_group));
	return 0;
}

/* The memory budget computed, the heap reserved and the region mapped (*region), logged. */
static int budget_take(struct daemon *d, struct budget *b, uint8_t **region)
{
	int r;

	if (budget_compute(&d->cfg, b) != 0)
		return fail("configuration out of range", "max_sandboxes, max_streams_per_connection "
			    "or max_message_bytes is outside what the gRPC server takes");
	/* the profile sets are static and not touched yet: counted whole */
	b->image = image_bytes() + LIMIT_DAEMON_SLACK_BYTES + profiles_storage_bytes();
	if ((r = alloc_budget(b->total_heap)) != 0)
		return fail("cannot reserve the memory budget", err_str(r));
	*region = mmap(NULL, b->total_region, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (*region == MAP_FAILED)
		return fail("cannot reserve the memory budget", strerror(errno));
	d->budget = b->total_region + b->total_heap + b->image + b->execs + b->verify;
	log_info("memory budget", "budget_bytes=%zu max_sandboxes=%u sandbox_table_bytes=%zu "
		 "sandbox_bytes=%zu admin_connections=%u admin_bytes=%zu agent_connections=%u "
		 "agent_guest_connections=%u grpc_bytes=%zu admin_grpc_bytes=%zu docker_bytes=%zu recovery_bytes=%zu "
		 "exec_sessions=%u exec_table_bytes=%zu image_bytes=%zu verify_bytes=%zu "
		 "e2b_connections=%u e2b_bytes=%zu", d->budget,
		 d->cfg.max_sandboxes, b->sandboxes, sizeof(struct sandbox),
		 d->cfg.max_admin_connections, b->admin, b->gcfg.reserved_connections,
		 b->gcfg.max_connections, b->grpc, b->agrpc, b->docker,
		 b->scratch, exec_table_slots(), b->execs, b->image, b->verify, b->e2b_conns, b->e2b);
	return 0;
}

/* The host side, under the lock: the state directories, the workers a killed agenticd left,
 * the init's copy and the paths bound into sandboxes checked, the owner label. */
static int host_take(struct daemon *d)
{
	char err[1024], sha[65];
	int r;

	if (host_prepare_dirs(&d->cfg, d->admin_group_known, d->admin_gid, err, sizeof(err)) != 0 ||
	    host_lock(&d->cfg, &d->lock_fd, err, sizeof(err)) != 0)
		return fail("refusing to start", err);
	/* under the lock (another agenticd of this config would be running otherwise): the
	 * workers a killed one left, before any worker of this one takes their uids */
	if (egress_stale_kill(&d->cfg, err, sizeof(err)) != 0)
		return fail("refusing to start", err);
	if ((r = host_init_copy(&d->cfg, d->self_exe, d->init_exe, sizeof(d->init_exe), sha,
				err, sizeof(err))) < 0)
		return fail("refusing to start", err);
	if (bound_paths_check(d, err, sizeof(err)) != 0)
		return fail("refusing to start", err);
	if (e2b_keys_open(d->cfg.state_dir) != 0)
		return fail("refusing to start", e2b_keys_error());
	log_info("init binary", "path=%s sha256=%s copy=%s", log_q(d->init_exe), log_q(sha),
		 r == 1 ? "unchanged" : "written");
	if ((r = host_owner(&d->cfg, d->owner, sizeof(d->owner))) != 0)
		return fail("cannot resolve agentshare_root", err_str(r));
	snprintf(d->owner_label, sizeof(d->owner_label), "agentic-daemon=%.16s", d->owner);
	log_info("owner", "label=%s agentshare_root=%s", d->owner_label,
		 log_q(d->cfg.agentshare_root));
	return 0;
}

/* Everything taken and started, in order, up to the sockets serving. */
static int start_up(struct daemon *d, struct budget *b, uint8_t *region)
{
	char err[1024];
	int r;

	if ((r = docker_client_init(&d->dc, &b->dcfg)) != 0)
		return fail("cannot set up the Docker client", err_str(r));
	if (setup_loop(d) != 0)
		return fail("cannot set up the event loop", strerror(errno));
	if ((r = setup_tables(d, b, region)) != 0)
		return fail("cannot set up the gRPC server", err_str(r));
	if ((r = host_take(d)) != 0)
		return r;
	profiles_init(&d->cfg);
	if (engine_checks(d) != 0)
		return 1;
	if ((r = start_lifecycle(d)) != 0)
		return fail("cannot set up the runtime", err_str(r));
	if (recover_state(d->rt, err, sizeof(err)) != 0)
		return fail("cannot recover the sandboxes", err);
	e2b_recover();
	if (open_sockets(d, err, sizeof(err)) != 0)
		return fail("refusing to start", err);
	if (!host_rights_refused)
		log_warn("this kernel cannot refuse descriptors passed on the agent and admin "
			 "sockets (SO_PASSRIGHTS, Linux 6.16): a process that reaches them can stall "
			 "agenticd with a socket whose close lingers; run a newer kernel", NULL);
	return 0;
}

/* Sealed, ready, the loop run to the stop; what is left closed. */
static int serve(struct daemon *d)
{
	struct alloc_stats st;
	ssize_t n;
	int r;

	alloc_seal();
	d->rt->ops->start(d->rt->self);
	lifecycle_tick(clock_mono_ms());
	if ((r = host_notify_ready()) != 0)
		log_warn("sd_notify failed", "error=%s", log_q(err_str(r)));
	if (runtime_docker_fault_init_env())
		log_warn("test failpoint active: every create will fail", "fault=init-env");
	log_info("ready", "agent_socket_dir=%s admin_socket=%s sandboxes=%u",
		 log_q(d->cfg.agent_socket_dir), log_q(d->cfg.admin_socket), sandbox_live());
	r = run_loop(d);
	/* a stopped agenticd leaves no deletion half done (the warm sandboxes' workspaces) */
	if ((n = share_wait_deleting(LIMIT_STOP_DELETE_MS)) > 0)
		log_warn("workspace deletions still running at the stop", "children=%zd", n);
	grpc_server_close(d->admin_grpc);
	grpc_server_close(d->grpc);
	alloc_stats(&st);
	if (st.after_seal)
		log_error("allocations after start-up", "count=%zu", st.after_seal);
	log_info("stopped", "sandboxes=%u note=%s", sandbox_live(), "\"sandboxes keep running\"");
	return r;
}

int agenticd_main(int argc, char **argv)
{
	struct daemon *d = &daemon_state;
	struct budget b;
	char err[1024];
	const char *path = CONFIG_PATH_DEFAULT;
	bool explicit_path = false;
	uint8_t *region;
	int r, profile_bytes;

	if (parse_args(argc, argv, &path, &explicit_path) != 0)
		return 2;
	agenticd = d;
	d->lock_fd = d->epfd = -1;
	if ((profile_bytes = config_read(d, path, explicit_path)) < 0)
		return 2;
	if (geteuid() != 0)
		return fail("refusing to start", "agenticd runs as root (it owns the sockets, the "
			    "agentshare and the Docker engine's socket)");
	log_info("starting", "version=%s config=%s", AGENTIC_VERSION, log_q(path));
	log_info("seccomp profile", "source=%s bytes=%d",
		 d->cfg.seccomp_profile[0] ? log_q(d->cfg.seccomp_profile) : "builtin", profile_bytes);
	if ((r = self_identify(d)) != 0)
		return r;
	if ((r = host_paths_above(d, err, sizeof(err))) != 0)
		return fail("refusing to start", err);
	if ((r = budget_take(d, &b, &region)) != 0)
		return r;
	if ((r = start_up(d, &b, region)) != 0)
		return r;
	return serve(d);
}
