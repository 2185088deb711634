/* verify_run.c: a verification on agenticd's loop (verify.h): a run's slot from verify_start to
 * its client's answer. The engine's inspect calls on the verifier's own job queue, the
 * host's facts (verify_gather.c), the probe run as the workload through the exec engine with
 * an internal sink while agenticd's listener for the host-reachability checks waits for what
 * the sandbox reaches, then the verdicts, the result kept in the sandbox's run and the
 * answer. Nothing blocks. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/base.h"
#include "runtime/engine.h"
#include "agent/exec.h"
#include "workspace/host.h"
#include "sandbox/sandbox.h"
#include "transcript/runlog.h"
#include "verify/verify.h"
#include "verify/verify_run.h"

static struct {
	struct verify_config c;
	struct engine eng;
	struct engine_job *jobs[VERIFY_RUNS];
	struct vrun run[VERIFY_RUNS];
} V;

static int job_begin(struct engine_job *j);
static void job_done(struct engine_job *j, int r);

void verify_init(const struct verify_config *vc)
{
	memset(&V, 0, sizeof(V));
	V.c = *vc;
	engine_init(&V.eng, vc->epfd, vc->tag, V.jobs, VERIFY_RUNS);
	for (uint32_t i = 0; i < VERIFY_RUNS; i++) {
		struct vrun *v = &V.run[i];

		v->job.begin = job_begin;
		v->job.done = job_done;
		v->job.ctx = v;
		v->exec = -1;
		v->listen_fd = -1;
		engine_add(&V.eng, &v->job);
	}
	verify_gather_init(vc);
}

size_t verify_table_bytes(void)
{
	return sizeof(V) + sizeof(struct verify_host) +
	       VERIFY_PARSE_TOKENS * sizeof(struct json_token);
}

static bool sb_alive(const struct vrun *v)
{
	return v->sb && v->sb->state != SB_FREE && v->sb->gen == v->sb_gen;
}

/* ---- the host-reachability checks' listener (AGV-033..035) ---- */

/* An interface's IPv4 address as text; 0 or -1. */
static int if_addr(const char *ifname, char *out, size_t size)
{
	struct ifreq ifr = { 0 };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0), r;

	if (fd < 0 || strlen(ifname) >= IFNAMSIZ) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	memcpy(ifr.ifr_name, ifname, strlen(ifname) + 1);
	r = ioctl(fd, SIOCGIFADDR, &ifr);
	close(fd);
	if (r != 0 || ifr.ifr_addr.sa_family != AF_INET)
		return -1;
	return inet_ntop(AF_INET, &((struct sockaddr_in *)&ifr.ifr_addr)->sin_addr, out,
			 (socklen_t)size) ? 0 : -1;
}

/* The interface of the default route (/proc/net/route), then its address. */
static int primary_addr(char *out, size_t size)
{
	char ifname[IFNAMSIZ + 1], dst[16];
	char *line, *save = NULL, *text = verify_file_text("/proc/net/route");

	if (!text)
		return -1;
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (sscanf(line, "%16s %15s", ifname, dst) == 2 && strcmp(dst, "00000000") == 0)
			return if_addr(ifname, out, size);
	return -1;
}

/* The sandbox network's gateway: the engine's, else the first address of its subnet. */
static int gateway_addr(const struct verify_net *n, char *out, size_t size)
{
	char net[20], *slash;
	struct in_addr a;

	if (n->gateway[0] && inet_pton(AF_INET, n->gateway, &a) == 1)
		return snprintf(out, size, "%s", n->gateway) < (int)size ? 0 : -1;
	snprintf(net, sizeof(net), "%s", n->subnet);
	slash = strchr(net, '/');
	if (slash)
		*slash = '\0';
	if (inet_pton(AF_INET, net, &a) != 1)
		return -1;
	a.s_addr = htonl(ntohl(a.s_addr) + 1);
	return inet_ntop(AF_INET, &a, out, (socklen_t)size) ? 0 : -1;
}

/* A socket filter on the listener: only packets from one of the container's IPv4 addresses
 * reach it, so no local user can fill its accept queue (and the probe's SYN then be dropped,
 * which reads as "timeout", a pass) or be counted as the sandbox. Without a known address the
 * listener stays open to all, as before. 0 or -1. */
static int listener_filter(int fd, const struct verify_ct *ct)
{
	struct sock_filter code[VERIFY_NETS + 3];
	struct sock_fprog prog = { 0, code };
	unsigned n = 0;

	code[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, SKF_NET_OFF + 12);
	for (uint32_t i = 0; i < ct->nnets && i < VERIFY_NETS; i++) {
		struct in_addr a;

		if (ct->net_ip[i][0] && inet_pton(AF_INET, ct->net_ip[i], &a) == 1)
			code[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K,
								 ntohl(a.s_addr), 0, 0);
	}
	if (n == 1)
		return 0;
	/* each JEQ jumps to the accept at the end */
	for (unsigned i = 1; i < n; i++)
		code[i].jt = (uint8_t)(n - i);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0);
	code[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, 0xffffffffu);
	prog.len = (unsigned short)n;
	return setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) == 0 ? 0 : -1;
}

static int listener(const struct verify_ct *ct, uint16_t *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (listener_filter(fd, ct) != 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    listen(fd, LIMIT_VERIFY_ACCEPTS) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	*port = ntohs(sa.sin_port);
	return fd;
}

/* A container's listener (facts.listener_errno when it cannot open) and the probe's connects
 * to the host's addresses it knows, as arguments from v->argv[n]: how many arguments then. A
 * VM gets none. */
static uint32_t probe_targets(struct vrun *v, uint32_t n)
{
	struct verify_facts *f = &v->facts;
	uint16_t port = 0;
	int k = 0;

	for (int t = 0; t < VERIFY_TARGETS; t++)
		f->target_connect[t] = -1;
	v->listen_fd = f->is_vm ? -1 : listener(&f->ct, &port);
	f->listener_errno = v->listen_fd < 0 && !f->is_vm ? errno : 0;
	if (v->listen_fd >= 0) {
		char a[VERIFY_TARGETS][16];
		bool known[VERIFY_TARGETS] = {
			gateway_addr(&f->net[f->net_index], a[0], sizeof(a[0])) == 0,
			if_addr("docker0", a[1], sizeof(a[1])) == 0,
			primary_addr(a[2], sizeof(a[2])) == 0,
		};

		for (int t = 0; t < VERIFY_TARGETS; t++) {
			if (!known[t])
				continue;
			snprintf(v->addr[t], sizeof(v->addr[t]), "%s:%u", a[t], port);
			v->argv[n++] = "--try-connect";
			v->argv[n++] = v->addr[t];
			f->target_connect[t] = k++;
		}
	}
	return n;
}

/* The connections waiting on the listener: one from an address of the container to a
 * target's address is the host reached, whatever the probe printed. Others (a local user's)
 * are closed and not counted. */
static void listener_read(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	bool placed = false;

	for (int n = 0; n < LIMIT_VERIFY_ACCEPTS; n++) {
		struct sockaddr_in me, peer;
		socklen_t ml = sizeof(me), pl = sizeof(peer);
		char mine[16], from[16];
		bool ours = false;
		int fd = accept4(v->listen_fd, (struct sockaddr *)&peer, &pl, SOCK_CLOEXEC);

		if (fd < 0)
			break;
		if (getsockname(fd, (struct sockaddr *)&me, &ml) == 0 &&
		    me.sin_family == AF_INET && peer.sin_family == AF_INET &&
		    inet_ntop(AF_INET, &me.sin_addr, mine, sizeof(mine)) &&
		    inet_ntop(AF_INET, &peer.sin_addr, from, sizeof(from)))
			for (uint32_t i = 0; i < f->ct.nnets && i < VERIFY_NETS; i++)
				ours |= f->ct.net_ip[i][0] && strcmp(f->ct.net_ip[i], from) == 0;
		for (int t = 0; ours && t < VERIFY_TARGETS; t++) {
			size_t l = strlen(mine);

			if (f->target_connect[t] >= 0 && strncmp(v->addr[t], mine, l) == 0 &&
			    v->addr[t][l] == ':') {
				f->host_reached[t] = true;
				placed = true;
			}
		}
		f->listener_foreign |= !placed;
		close(fd);
		placed = false;
		if (n + 1 == LIMIT_VERIFY_ACCEPTS)
			f->listener_foreign = true;
	}
}

/* ---- the probe ---- */

static void probe_done(struct exec_collect *c);
static void finish(struct vrun *v);

/* A VM's probe: the guest's copy of the binary is /init; it has no agent socket (its channel
 * is a virtio port) and no network to reach the host through but its interfaces (AGV-051). */
static const char *const probe_vm[] = {
	"/init", "probe", "--verify", "--self", "--status", "1", "--try-kill", "1",
	"--try-ptrace", "1", "--try-write", "/run/agentic/setup-complete",
	"--try-create", "/run/agentic", "--ipv6", "--tools", "--nics",
};

static void probe_begin(struct vrun *v)
{
	static const char *const fixed[] = {
		"/sbin/agentic-init", "probe", "--verify", "--self", "--status", "1",
		"--try-kill", "1", "--try-ptrace", "1",
		"--try-write", "/run/agentic/setup-complete", "--try-create", "/run/agentic",
		"--agent-socket", "/run/agentic-sandbox/agent.sock", "--ipv6", "--tools",
	};
	_Static_assert(ARRAY_LEN(fixed) + 2 * VERIFY_TARGETS < VERIFY_PROBE_ARGS &&
		       ARRAY_LEN(probe_vm) < VERIFY_PROBE_ARGS, "the probe's arguments fit");
	struct verify_facts *f = &v->facts;
	struct exec_req req = { 0 };
	struct exec_sink sink;
	uint32_t n = 0;
	int x;

	for (size_t i = 0; !f->is_vm && i < ARRAY_LEN(fixed); i++)
		v->argv[n++] = fixed[i];
	for (size_t i = 0; f->is_vm && i < ARRAY_LEN(probe_vm); i++)
		v->argv[n++] = probe_vm[i];
	n = probe_targets(v, n);
	v->argv[n] = NULL;
	for (uint32_t i = 0; i < n; i++)
		req.argv[i] = v->argv[i];
	req.argc = n;
	req.timeout_seconds = VERIFY_DEADLINE_MS / 1000;
	v->probe.on_done = probe_done;
	v->probe.ctx = v;
	exec_collect_sink(&v->probe, &sink);
	x = exec_begin(v->sb, &req, &sink);
	if (x < 0) {
		f->probe_error = x == ERR_STATE ? "the agent is not connected"
			       : x == ERR_LIMIT ? "too many commands" : "the exec could not start";
		v->finish_due = true;
		return;
	}
	v->exec = x;
	v->step = ST_PROBE;
}

static void probe_done(struct exec_collect *c)
{
	struct vrun *v = c->ctx;
	char end[4];

	ASSERT(v->step == ST_PROBE);
	v->exec = -1;
	if (c->failed || c->exit_code != 0)
		v->facts.probe_error = c->failed ? "the probe was stopped" : "the probe failed";
	else if (verify_probe_get(c->out, "end", end, sizeof(end)) != 0 || strcmp(end, "ok") != 0)
		v->facts.probe_error = "the probe's output was cut short";
	else
		v->facts.probe = c->out;
	finish(v);
}

static void fail_run(struct vrun *v, int status, const char *code, const char *msg)
{
	v->err_status = status;
	v->err_code = code;
	v->err_msg = msg;
	v->finish_due = true;
}

/* Inspect answered (or a network did): the next network, or on to the host and the probe. */
static void after_engine(struct vrun *v)
{
	struct verify_ct *ct = &v->facts.ct;

	if (v->net_next < ct->nnets && v->net_next < VERIFY_NETS) {
		v->step = ST_NETS;
		if (engine_start(&V.eng, &v->job) != 0)
			fail_run(v, 502, "engine", "the engine call could not begin");
		return;
	}
	if (v->sb && !sb_alive(v)) {
		fail_run(v, 404, "not_found", "the sandbox went away");
		return;
	}
	verify_host_facts(v);
	if (v->sb)
		probe_begin(v);
	else
		v->finish_due = true;
}

static int job_begin(struct engine_job *j)
{
	struct vrun *v = j->ctx;

	ASSERT(v->step == ST_INSPECT || v->net_next < VERIFY_NETS);
	if (v->step == ST_INSPECT)
		return docker_container_inspect_begin(&j->call, V.c.dc, v->target);
	return docker_network_inspect_begin(&j->call, V.c.dc, v->facts.ct.net_id[v->net_next]);
}

static void job_done(struct engine_job *j, int r)
{
	struct vrun *v = j->ctx;
	const char *body = NULL;
	size_t len = 0;
	bool missing = r == DOCKER_ERR_API && j->call.error.status == 404;
	int p = r == 0 ? docker_result_body(&j->call, &body, &len) : r;

	ASSERT(v->step == ST_INSPECT || v->step == ST_NETS);
	if (p == 0 && v->step == ST_INSPECT)
		p = verify_ct_parse(body, len, &v->facts.ct);
	else if (p == 0)
		p = verify_net_parse(body, len, &v->facts.net[v->net_next]);
	engine_end(&V.eng, j);
	if (v->step == ST_INSPECT) {
		if (missing) {
			fail_run(v, 404, "not_found", "no such container on the engine");
			return;
		}
		if (p != 0) {
			fail_run(v, 502, "engine", "the container's inspect could not be read");
			return;
		}
		if (!v->sb) {
			struct sandbox *sb = sandbox_by_container(v->facts.ct.id);

			if (sb && sb->state == SB_READY && agent_of(sb)->ready) {
				v->sb = sb;
				v->sb_gen = sb->gen;
			}
		}
	} else {
		v->net_next++; /* a network that cannot be read stays unread: its check fails */
	}
	after_engine(v);
}

static void finish(struct vrun *v)
{
	struct verify_meta m = { 0 };
	struct buf b = { 0 };
	struct json_writer w;
	bool alive = v->sb && sb_alive(v);
	int status = v->err_status ? v->err_status : 200;

	ASSERT(v->step != ST_FREE && v->exec < 0);
	if (v->listen_fd >= 0) {
		listener_read(v);
		close(v->listen_fd);
		v->listen_fd = -1;
	}
	if (status == 200) {
		verify_evaluate(&v->facts, &v->result);
		m.is_sandbox = v->facts.is_sandbox;
		m.container_id = v->facts.ct.id;
		m.sb = alive ? v->sb : NULL;
		m.run = alive && transcript_of(v->sb)->run.open ? transcript_of(v->sb)->run.name : NULL;
		m.started_ms = v->started_ms;
		m.duration_ms = clock_mono_ms() - v->t0;
		buf_init(&b, v->json, sizeof(v->json));
		json_writer_init(&w, &b);
		verify_result_json(&w, &v->result, &m);
		if (json_writer_finish(&w) != 0 || buf_append(&b, "\n", 1) != 0) {
			status = 500;
			v->err_code = "internal";
			v->err_msg = "the result does not fit its buffer";
		} else if (alive && transcript_of(v->sb)->run.open && transcript_of(v->sb)->run.dirfd >= 0) {
			int fd = openat(transcript_of(v->sb)->run.dirfd, "verify.json.tmp",
					O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
			bool ok = fd >= 0 && write(fd, b.data, b.len) == (ssize_t)b.len;

			if (fd >= 0)
				close(fd);
			if (!ok || renameat(transcript_of(v->sb)->run.dirfd, "verify.json.tmp", transcript_of(v->sb)->run.dirfd,
					    "verify.json") != 0)
				log_warn("verify result not kept", "name=%s error=%s",
					 log_q(v->sb->name), log_q(strerror(errno)));
		}
		log_info("verified", "name=%s target=%s result=%s passed=%u failed=%u info=%u "
			 "skipped=%u not_run=%u duration_ms=%lld", m.sb ? log_q(m.sb->name) : "-",
			 m.is_sandbox ? "sandbox" : "container",
			 v->result.failed ? "fail" : v->result.not_run ? "incomplete" : "pass",
			 v->result.passed, v->result.failed, v->result.info, v->result.skipped,
			 v->result.not_run, (long long)m.duration_ms);
	}
	if (v->client.done) {
		if (status == 200)
			v->client.done(v->client.conn, v->client.gen, 200, NULL, NULL,
				       (const char *)b.data, b.len);
		else
			v->client.done(v->client.conn, v->client.gen, status, v->err_code, v->err_msg,
				       NULL, 0);
	}
	v->step = ST_FREE;
	v->finish_due = false;
	v->sb = NULL;
}

int verify_start(struct sandbox *sb, const char *container, bool require_dedicated,
		 const struct verify_client *client, const char **code, const char **message)
{
	struct vrun *v = NULL;

	if (sb && (sb->state != SB_READY || !agent_of(sb)->ready || !sb->container_id[0])) {
		*code = "not_ready";
		*message = "the sandbox is not ready, or its agent is not connected";
		return 409;
	}
	for (uint32_t i = 0; i < VERIFY_RUNS; i++) {
		if (V.run[i].step == ST_FREE && !V.run[i].finish_due) {
			if (!v)
				v = &V.run[i];
		} else if (sb && V.run[i].sb == sb) {
			*code = "busy";
			*message = "a verification of this sandbox is running";
			return 409;
		}
	}
	if (!v) {
		*code = "busy";
		*message = "too many verifications at once";
		return 503;
	}
	memset(&v->facts, 0, sizeof(v->facts));
	v->sb = sb;
	v->sb_gen = sb ? sb->gen : 0;
	snprintf(v->target, sizeof(v->target), "%s", sb ? sb->container_id : container);
	v->require_dedicated = require_dedicated;
	v->client = *client;
	v->started_ms = clock_wall_ms();
	v->t0 = clock_mono_ms();
	v->deadline = v->t0 + VERIFY_DEADLINE_MS;
	v->net_next = 0;
	v->err_status = 0;
	v->exec = -1;
	v->step = ST_INSPECT;
	/* a VM has no engine container: its QEMU and the probe in its guest (done from the loop) */
	if (sb && sb->vm) {
		verify_vm_facts(v);
		verify_host_facts(v);
		probe_begin(v);
		return 0;
	}
	if (engine_start(&V.eng, &v->job) != 0) {
		v->step = ST_FREE;
		*code = "engine";
		*message = "the engine call could not begin";
		return 502;
	}
	return 0;
}

void verify_ready(uint32_t id)
{
	engine_ready(&V.eng, id);
}

void verify_tick(int64_t now)
{
	engine_tick(&V.eng);
	for (uint32_t i = 0; i < VERIFY_RUNS; i++) {
		struct vrun *v = &V.run[i];

		if (v->step == ST_FREE && !v->finish_due)
			continue;
		/* the engine's calls end by the Docker client's own timeouts; the probe by this */
		if (!v->finish_due && v->step == ST_PROBE && v->exec >= 0 && now >= v->deadline) {
			exec_detach(v->exec);
			v->exec = -1;
			v->facts.probe_error = "the probe did not answer in time";
			v->finish_due = true;
		}
		if (v->finish_due)
			finish(v);
	}
}

int64_t verify_next_deadline(int64_t now)
{
	int64_t next = engine_next_deadline(&V.eng, now);

	for (uint32_t i = 0; i < VERIFY_RUNS; i++) {
		if (V.run[i].finish_due)
			return now;
		if (V.run[i].step == ST_PROBE && V.run[i].deadline < next)
			next = V.run[i].deadline;
	}
	return next;
}

int verify_last_open(const struct sandbox *sb, int *fd)
{
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 32];

	if (host_instance_dir(V.c.cfg, sb->instance_id, dir, sizeof(dir)) != 0)
		return -ENOENT;
	snprintf(path, sizeof(path), "%s/current/verify.json", dir);
	*fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	return *fd >= 0 ? 0 : -ENOENT;
}
