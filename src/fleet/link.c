/* link.c: agenticd's side of the fleet (link.h): the worker started and watched, the record
 * sent, the worker's word kept. */
#include "fleet/link.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fleet/etcd.h"
#include "fleet/link_view.h"
#include "fleet/wire.h"
#include "json/json.h"
#include "sandbox/sandbox.h"
#include "tls/tls.h"
#include "version.h"

#define RESTART_MS 1000
#define OWN_EVERY_MS 500
#define PLACE_WAIT_MS 10000

static struct {
	bool on;
	struct fleet_settings set;
	char settings[FLEET_SETTINGS_BYTES];
	size_t settings_len;
	const char *self_exe;
	int epfd;
	uint32_t tag;
	uint32_t slots;
	char addr[CONFIG_STR_BYTES];
	pid_t pid;
	int fd;
	int64_t restart_at;
	char record[FLEET_RECORD_BYTES]; /* the record last sent to this worker */
	size_t record_len;
	char etcd[16], error[32], endpoint[64];
	bool view_known;                   /* a worker has sent it since agenticd started */
	char own[FLEET_SB_PACKET_BYTES];   /* this node's sandboxes as last sent to the worker */
	size_t own_len;
	int64_t own_at;                    /* when they were last looked at */
	bool draining;                     /* no new placements here (fleet_link_drain) */
	int64_t admitted;                  /* the highest placement admitted here (its record's
					    * "placed") */
	/* creates waiting for the worker's placement: their id and when they give up */
	struct { uint64_t id; int64_t until; } wait[FLEET_PLACE_MAX];
	void (*placed[2])(uint64_t id, const struct fleet_link_placed *p);
	const char *vm_accel;              /* the VM runtime's, NULL without one */
	const char *images;                /* the engine's tags, each ended by '\n' */
	const bool *images_whole;          /* ... all of them */
	int64_t memory_mib;                /* the host's memory, for the record */
	char drain_path[CONFIG_STR_BYTES + 32]; /* state_dir/fleet-draining: there while draining */
} l; /* zero, in .bss (pid and fd are set at init) */

bool fleet_link_on(void)
{
	return l.on;
}

static int bad(char *err, size_t err_size, const char *what)
{
	snprintf(err, err_size, "fleet: %s", what);
	return -EINVAL;
}

static void set_copy(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src);
}

/* `agentic APPLET` with fd 3 ctl, fd 0 in and fd 4 lfd (each when >= 0): its pid, or -1.
 * vfork: agenticd's address space is large, and the child only moves descriptors and execs (a
 * failed exec is seen as the program's death). Each is first lifted above 10, so that moving
 * one into place cannot close another. Every program but the relay's listener (which hands
 * its children their connections) runs unable to send a descriptor (fd_forbid_passing): the
 * worker talks to etcd, a relay-out to another host, and a program either took over must not
 * hand agenticd a socket whose close lingers, on kernels without SO_PASSRIGHTS too. */
static pid_t spawn(const char *applet, int ctl, int in, int lfd)
{
	bool forbid = strcmp(applet, "fleet-relay") != 0;
	char *const argv[] = { "agentic", (char *)applet, NULL };
	char *const envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	pid_t pid = vfork();

	if (pid == 0) {
		int c = fcntl(ctl, F_DUPFD, 10), i = in >= 0 ? fcntl(in, F_DUPFD, 10) : -1,
		    s = lfd >= 0 ? fcntl(lfd, F_DUPFD, 10) : -1;

		if (c >= 0 && dup2(c, 3) == 3 && (in < 0 || (i >= 0 && dup2(i, 0) == 0)) &&
		    (lfd < 0 || (s >= 0 && dup2(s, 4) == 4))) {
			syscall(SYS_close_range, lfd >= 0 ? 5 : 4, ~0u, 0);
			if (!forbid || fd_forbid_passing() == 0)
				execve(l.self_exe, argv, envp);
		}
		_exit(127);
	}
	return pid;
}

/* The worker, with fd 3 its end of the socket; its settings sent. */
static void start_worker(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)l.tag << 32 };
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("fleet worker not started", "error=%s", log_q(strerror(errno)));
		l.restart_at = clock_mono_ms() + RESTART_MS;
		return;
	}
	pid = spawn("fleet-worker", sv[1], -1, -1);
	close(sv[1]);
	if (pid < 0) {
		close(sv[0]);
		l.restart_at = clock_mono_ms() + RESTART_MS;
		return;
	}
	l.pid = pid;
	l.fd = sv[0];
	(void)fd_refuse_rights(l.fd); /* the worker talks to etcd: no descriptor of its comes here */
	l.record_len = l.own_len = 0; /* the new worker gets both at the next tick */
	(void)send(l.fd, l.settings, l.settings_len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)epoll_ctl(l.epfd, EPOLL_CTL_ADD, l.fd, &ev);
	log_info("fleet worker started", "pid=%d node=%s", (int)pid, log_q(l.set.node));
}

/* ---- the relay (relay.c; docs/FLEET.md "One front door") ---- */

static struct {
	int lfd;         /* the listening socket (fleet_listen), kept for the next listener */
	pid_t pid;       /* the listener */
	int fd;          /* its control socket */
	int64_t restart_at;
	pid_t out[FLEET_RELAY_OUT_MAX]; /* each relay-out running, 0: a free place */
	void (*adopt[2])(int fd, const char *node);
	char listen[64];
} rl = { .lfd = -1, .pid = -1, .fd = -1 };

/* fleet_listen bound here, so that a port in use stops agenticd at start with its name. */
static int relay_listen(const struct config *cfg, char *err, size_t err_size)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	int on = 1;

	if (etcd_endpoint_parse(cfg->fleet_listen, strlen(cfg->fleet_listen), &ss, &sl) != 0)
		return bad(err, err_size, "fleet_listen must be HOST:PORT (an IP literal, IPv6 in "
			   "brackets)");
	rl.lfd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (rl.lfd < 0 || setsockopt(rl.lfd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
	    bind(rl.lfd, (struct sockaddr *)&ss, sl) != 0 || listen(rl.lfd, 64) != 0) {
		snprintf(err, err_size, "fleet: fleet_listen %.64s: %s", cfg->fleet_listen,
			 strerror(errno));
		if (rl.lfd >= 0)
			close(rl.lfd);
		rl.lfd = -1;
		return -EINVAL;
	}
	set_copy(rl.listen, sizeof(rl.listen), cfg->fleet_listen);
	return 0;
}

static void relay_start(void)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = (uint64_t)l.tag << 32 | 1 };
	int sv[2];

	rl.restart_at = clock_mono_ms() + RESTART_MS;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return;
	rl.pid = spawn("fleet-relay", sv[1], -1, rl.lfd);
	close(sv[1]);
	if (rl.pid < 0) {
		close(sv[0]);
		return;
	}
	rl.fd = sv[0];
	(void)fd_refuse_rights(rl.fd); /* descriptors go to the relay only (relay_event) */
	(void)send(rl.fd, l.settings, l.settings_len, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)epoll_ctl(l.epfd, EPOLL_CTL_ADD, rl.fd, &ev);
	log_info("fleet relay started", "pid=%d listen=%s", (int)rl.pid, log_q(rl.listen));
}

static void relay_gone(void)
{
	if (rl.fd >= 0) {
		(void)epoll_ctl(l.epfd, EPOLL_CTL_DEL, rl.fd, NULL);
		close(rl.fd);
	}
	rl.fd = -1;
	rl.restart_at = clock_mono_ms() + RESTART_MS;
}

int fleet_relay_out(int client, const char *node, const char *addr, const void *pre,
		    size_t len, bool e2b)
{
	char target[160];
	int sv[2], n, slot = -1;

	for (int i = 0; i < FLEET_RELAY_OUT_MAX && slot < 0; i++)
		if (rl.out[i] == 0)
			slot = i;
	if (slot < 0)
		return ERR_LIMIT;
	n = snprintf(target, sizeof(target), "{\"node\":\"%s\",\"addr\":\"%s\"%s}", node, addr,
		     e2b ? ",\"e2b\":1" : "");
	if (n >= (int)sizeof(target) || len >= FLEET_RELAY_PREFIX_BYTES)
		return ERR_LIMIT;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	(void)fd_refuse_rights(sv[0]);
	rl.out[slot] = spawn("fleet-relay-out", sv[1], client, -1);
	close(sv[1]);
	if (rl.out[slot] < 0) {
		rl.out[slot] = 0;
		close(sv[0]);
		return -EAGAIN;
	}
	/* a socketpair's own buffer holds them all: the child reads them when it runs */
	(void)send(sv[0], l.settings, l.settings_len, MSG_NOSIGNAL);
	(void)send(sv[0], target, (size_t)n, MSG_NOSIGNAL);
	if (len)
		(void)send(sv[0], pre, len, MSG_NOSIGNAL);
	close(sv[0]);
	return 0;
}

/* A connection the relay took from another node, {"relay_from":NODE,"api":API,"id":N}: when
 * NODE is a node of the fleet, a socketpair whose one end goes back to the relay (for its
 * child N) and whose other is handed to the admin API (or, API "e2b", the E2B listener) as
 * that node's; else a refusal. agenticd only ever
 * gives the relay a descriptor: its end of the socket refuses them (relay_start). */
static void relay_event(void)
{
	for (int k = 0; k < 16 && rl.fd >= 0; k++) {
		char pkt[128], node[FLEET_NODE_NAME_MAX + 1] = "", api[8] = "", ans[32];
		ssize_t n = recv(rl.fd, pkt, sizeof(pkt) - 1, MSG_DONTWAIT);
		const char *p;
		long id;
		int sv[2], m;

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			relay_gone();
			return;
		}
		if (n < 0)
			return;
		pkt[n] = '\0';
		if (!(p = link_view_field(pkt + 1, pkt + n, "relay_from", node, sizeof(node))) ||
		    !(p = link_view_field(p + 1, pkt + n, "api", api, sizeof(api))) ||
		    strncmp(p, ",\"id\":", 6) != 0 || (id = strtol(p + 6, NULL, 10)) <= 0)
			continue;
		m = snprintf(ans, sizeof(ans), "{\"id\":%ld}", id);
		/* only a node the fleet knows: a certificate the CA signed for a name etcd has no
		 * record of (never joined, or removed) relays nothing */
		if (!fleet_node_name_ok(node, strlen(node)) || !link_view_node_known(node)) {
			log_warn("fleet relay refused", "node=%s reason=%s", log_q(node),
				 log_q("not_a_fleet_node"));
			(void)send(rl.fd, ans, (size_t)m, MSG_NOSIGNAL | MSG_DONTWAIT);
			continue;
		}
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
			(void)send(rl.fd, ans, (size_t)m, MSG_NOSIGNAL | MSG_DONTWAIT);
			continue;
		}
		(void)fd_refuse_rights(sv[0]);
		if (fleet_send_fd(rl.fd, ans, (size_t)m, sv[1]) != m) {
			close(sv[0]);
			close(sv[1]);
			continue;
		}
		close(sv[1]);
		(void)fcntl(sv[0], F_SETFL, O_NONBLOCK);
		rl.adopt[strcmp(api, "e2b") == 0](sv[0], node);
	}
}

/* The CA, the certificate and its key read here once, so that a wrong file stops agenticd at
 * start with its name rather than a worker that exits every second; the key is wiped again
 * (the worker reads its own copy). */
static int files_check(const struct config *cfg, char *err, size_t err_size)
{
	const char *file = cfg->fleet_ca_file;
	int r = tls_load_anchors(file);

	if (r >= 0) {
		r = tls_load_client(cfg->fleet_cert_file, cfg->fleet_key_file);
		/* the key's words all name a key; the others are the certificate's */
		file = strstr(tls_error_word(), "key") ? cfg->fleet_key_file : cfg->fleet_cert_file;
	}
	tls_forget_client();
	if (r < 0)
		snprintf(err, err_size, "fleet: %.200s: %s", file, tls_error_word());
	return r < 0 ? -EINVAL : 0;
}

int fleet_link_init(const struct fleet_link_config *c, char *err, size_t err_size)
{
	const struct config *cfg = c->cfg;
	struct sockaddr_storage ss[ETCD_ENDPOINTS_MAX];
	socklen_t sl[ETCD_ENDPOINTS_MAX];
	char text[ETCD_ENDPOINTS_MAX][64];
	struct sysinfo si;
	long n;

	if (!cfg->fleet_endpoints[0])
		return 0;
	if (!fleet_node_name_ok(cfg->fleet_node, strlen(cfg->fleet_node)))
		return bad(err, err_size, "fleet_node must be 1 to 63 of a-z, 0-9 and '-', "
			   "not starting or ending with '-' (the node's certificate's common name)");
	if (!cfg->fleet_ca_file[0] || !cfg->fleet_cert_file[0] || !cfg->fleet_key_file[0])
		return bad(err, err_size, "fleet_endpoints needs fleet_ca_file, fleet_cert_file and "
			   "fleet_key_file (the fleet's CA, this node's certificate and its key)");
	if (strcmp(cfg->fleet_node, cfg->fleet_etcd_name) == 0 || strcmp(cfg->fleet_node, "root") == 0)
		return bad(err, err_size, "fleet_node may be neither fleet_etcd_name (a node's "
			   "certificate would pass for etcd's) nor root (etcd's own administrator)");
	/* the worker and the relays hold the node's key: no egress worker (egress_uid - slot), VM
	 * (control uid + vm_uid_offset) or workload may share their uid and signal them */
	if (cfg->fleet_uid == cfg->workload_uid ||
	    (cfg->fleet_uid <= cfg->egress_uid &&
	     cfg->egress_uid - cfg->fleet_uid < cfg->egress_max_connections) ||
	    (cfg->fleet_uid >= cfg->control_uid_min && cfg->fleet_uid <= cfg->control_uid_max) ||
	    (cfg->fleet_uid >= cfg->control_uid_min + (uint64_t)cfg->vm_uid_offset &&
	     cfg->fleet_uid <= cfg->control_uid_max + (uint64_t)cfg->vm_uid_offset))
		return bad(err, err_size, "fleet_uid must be a uid of its own: not workload_uid, an "
			   "egress worker's (egress_uid - egress_max_connections + 1 .. egress_uid), "
			   "a control uid or a VM's (control uid + vm_uid_offset)");
	if (files_check(cfg, err, err_size) < 0)
		return -EINVAL;
	if (etcd_endpoints_parse(cfg->fleet_endpoints, ss, sl, text, ETCD_ENDPOINTS_MAX) < 0)
		return bad(err, err_size, "fleet_endpoints must be HOST:PORT,HOST:PORT,... (IP "
			   "literals, IPv6 in brackets, \"https://\" allowed; 8 at most)");
	if (strlen(cfg->fleet_advertise) > 63)
		return bad(err, err_size, "fleet_advertise must be HOST:PORT, at most 63 characters");
	if (cfg->fleet_listen[0] && relay_listen(cfg, err, err_size) < 0)
		return -EINVAL;
	set_copy(l.set.endpoints, sizeof(l.set.endpoints), cfg->fleet_endpoints);
	set_copy(l.set.server_name, sizeof(l.set.server_name), cfg->fleet_etcd_name);
	set_copy(l.set.ca_file, sizeof(l.set.ca_file), cfg->fleet_ca_file);
	set_copy(l.set.cert_file, sizeof(l.set.cert_file), cfg->fleet_cert_file);
	set_copy(l.set.key_file, sizeof(l.set.key_file), cfg->fleet_key_file);
	set_copy(l.set.node, sizeof(l.set.node), cfg->fleet_node);
	link_view_self(l.set.node);
	set_copy(l.addr, sizeof(l.addr), cfg->fleet_advertise[0] ? cfg->fleet_advertise
								  : cfg->fleet_listen);
	l.set.lease_s = cfg->fleet_lease_s;
	l.set.uid = cfg->fleet_uid;
	n = fleet_settings_write(&l.set, l.settings, sizeof(l.settings));
	if (n < 0)
		return bad(err, err_size, "the fleet settings are too long");
	l.settings_len = (size_t)n;
	l.pid = l.fd = -1;
	l.self_exe = c->self_exe;
	snprintf(l.drain_path, sizeof(l.drain_path), "%s/fleet-draining", cfg->state_dir);
	l.draining = access(l.drain_path, F_OK) == 0;
	l.epfd = c->epfd;
	l.tag = c->tag;
	l.slots = cfg->max_sandboxes;
	l.on = true;
	set_copy(l.etcd, sizeof(l.etcd), "starting");
	set_copy(l.error, sizeof(l.error), "none");
	memcpy(rl.adopt, c->adopt, sizeof(rl.adopt));
	memcpy(l.placed, c->placed, sizeof(l.placed));
	l.vm_accel = c->vm_accel;
	l.images = c->images;
	l.images_whole = c->images_whole;
	if (sysinfo(&si) == 0)
		l.memory_mib = (int64_t)((uint64_t)si.totalram * si.mem_unit >> 20);
	start_worker(); /* the relay follows the worker's first view (fleet_link_tick) */
	return 0;
}

/* The creates waiting on a placement that ended, or all of them (id 0 and all), answered: a
 * worker's answer p, or "fleet_unavailable". */
static void place_end(uint64_t id, bool all, const struct fleet_link_placed *p)
{
	static const struct fleet_link_placed gone = { .error = "fleet_unavailable" };

	for (int i = 0; i < FLEET_PLACE_MAX; i++)
		if (l.wait[i].id && (all || l.wait[i].id == id)) {
			uint64_t w = l.wait[i].id;

			l.wait[i].id = 0;
			l.placed[(w & FLEET_PLACE_E2B) != 0](w, p ? p : &gone);
		}
}

#define IMAGE_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-/:@"

int fleet_link_place(uint64_t id, const char *name, const char *pin, const char *runtime,
		     const char *image)
{
	char pkt[512];
	int n, slot = -1;

	/* a reference's characters or none (the engine refuses any other): the packet is JSON */
	if (!image || strspn(image, IMAGE_CHARS) != strlen(image) || strlen(image) > 255)
		image = "";
	if (!l.on || l.fd < 0 || strcmp(l.etcd, "up") != 0)
		return ERR_STATE;
	for (int i = 0; i < FLEET_PLACE_MAX && slot < 0; i++)
		if (!l.wait[i].id)
			slot = i;
	if (slot < 0)
		return ERR_LIMIT;
	n = snprintf(pkt, sizeof(pkt), "{\"place\":%llu,\"name\":\"%s\",\"pin\":\"%s\","
		     "\"runtime\":\"%s\",\"image\":\"%s\"}", (unsigned long long)id, name, pin, runtime,
		     image);
	if (n <= 0 || (size_t)n >= sizeof(pkt) ||
	    send(l.fd, pkt, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n)
		return ERR_LIMIT;
	l.wait[slot].id = id;
	l.wait[slot].until = clock_mono_ms() + PLACE_WAIT_MS;
	return 0;
}

void fleet_link_admitted(int64_t seq)
{
	if (seq > l.admitted)
		l.admitted = seq;
}

void fleet_link_release(const char *name)
{
	char pkt[96];
	int n;

	if (!l.on || l.fd < 0 || !fleet_sandbox_name_ok(name, strlen(name)))
		return;
	n = snprintf(pkt, sizeof(pkt), "{\"release\":\"%s\"}", name);
	(void)send(l.fd, pkt, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

const char *fleet_link_node(void)
{
	return l.set.node;
}

/* The worker's answer to a placement, {"placed":ID,"node","addr","seq"} or with "error". */
static void placed_packet(const struct json_doc *d)
{
	struct fleet_link_placed p = { 0 };
	char error[32] = "";
	int64_t id = 0;
	int i;

	if ((i = json_obj_get(d, 0, "placed")) < 0 || json_int(d, i, &id) != 0 || id <= 0)
		return;
	if ((i = json_obj_get(d, 0, "error")) >= 0) {
		(void)json_str(d, i, error, sizeof(error));
		p.error = error[0] ? error : "fleet_unavailable";
	} else if ((i = json_obj_get(d, 0, "node")) < 0 ||
		   json_str(d, i, p.node, sizeof(p.node)) <= 0 ||
		   (i = json_obj_get(d, 0, "seq")) < 0 || json_int(d, i, &p.seq) != 0) {
		p.error = "fleet_unavailable";
	} else {
		int64_t a = 1;

		if ((i = json_obj_get(d, 0, "addr")) >= 0)
			(void)json_str(d, i, p.addr, sizeof(p.addr));
		if ((i = json_obj_get(d, 0, "attempts")) >= 0 && json_int(d, i, &a) == 0 && a > 0 &&
		    a < 100)
			p.attempts = (int)a;
	}
	place_end((uint64_t)id, false, &p);
}

static void worker_gone(void)
{
	place_end(0, true, NULL);
	if (l.fd >= 0) {
		(void)epoll_ctl(l.epfd, EPOLL_CTL_DEL, l.fd, NULL);
		close(l.fd);
	}
	l.fd = -1;
	/* the worker's own last word stays, when it said why before it went */
	if (strcmp(l.etcd, "up") == 0 || strcmp(l.error, "none") == 0)
		set_copy(l.error, sizeof(l.error), "worker_exited");
	set_copy(l.etcd, sizeof(l.etcd), "down");
	l.restart_at = clock_mono_ms() + RESTART_MS;
}

/* One packet of the worker's: etcd's state or the nodes. */
static void packet(const char *p, size_t len)
{
	static const char nodes_head[] = "{\"nodes\":";
	struct json_token tok[16];
	struct json_doc d;
	int i;

	if (len > sizeof(nodes_head) && memcmp(p, nodes_head, sizeof(nodes_head) - 1) == 0 &&
	    p[len - 1] == '}') {
		/* the worker wrote it with the JSON writer; its array is kept as it is */
		link_view_nodes_put(p + sizeof(nodes_head) - 1, len - sizeof(nodes_head));
		l.view_known = true;
		return;
	}
	static const char sb_head[] = "{\"fleet_sandboxes\":", sb_tail[] = "],\"more\":";
	const char *tail;

	if (len > sizeof(sb_head) && memcmp(p, sb_head, sizeof(sb_head) - 1) == 0) {
		/* the worker's writer: the array, then ,"more":true} or false}; no string in it
		 * holds an unescaped quote, so the last "],"more":" ends the array */
		for (tail = p + len - sizeof(sb_tail) + 1; tail > p; tail--)
			if (memcmp(tail, sb_tail, sizeof(sb_tail) - 1) == 0)
				break;
		if (tail <= p + sizeof(sb_head) - 1)
			return;
		link_view_sbs_put(p + sizeof(sb_head) - 1, (size_t)(tail + 1 - (p + sizeof(sb_head) - 1)),
				  tail[sizeof(sb_tail) - 1] == 't');
		return;
	}
	if (json_parse(&d, p, len, tok, ARRAY_LEN(tok)) != 0 || tok[0].type != JSON_OBJECT)
		return;
	if (json_obj_get(&d, 0, "placed") >= 0) {
		placed_packet(&d);
		return;
	}
	if ((i = json_obj_get(&d, 0, "etcd")) >= 0)
		(void)json_str(&d, i, l.etcd, sizeof(l.etcd));
	if ((i = json_obj_get(&d, 0, "error")) >= 0)
		(void)json_str(&d, i, l.error, sizeof(l.error));
	if ((i = json_obj_get(&d, 0, "endpoint")) >= 0)
		(void)json_str(&d, i, l.endpoint, sizeof(l.endpoint));
}

void fleet_link_event(uint32_t which)
{
	static char pkt[FLEET_SB_PACKET_BYTES + FLEET_SNAPSHOT_BYTES + 1];

	if (which == 1) {
		relay_event();
		return;
	}
	for (int k = 0; k < 16 && l.fd >= 0; k++) {
		long n = recv(l.fd, pkt, sizeof(pkt), MSG_DONTWAIT);

		if (n > 0 && (size_t)n < sizeof(pkt)) {
			packet(pkt, (size_t)n);
			continue;
		}
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
			worker_gone();
		return;
	}
}

/* pid ended: reaped here, or already by another reaper (share.c's takes any child left, and
 * one that ended between the two calls is its) */
static bool ended(pid_t pid, int *status)
{
	pid_t r = waitpid(pid, status, WNOHANG);

	return r == pid || (r < 0 && errno == ECHILD);
}

void fleet_link_reap(void)
{
	int status = -1;

	if (l.pid > 0 && ended(l.pid, &status)) {
		log_warn("fleet worker exited", "pid=%d status=%d", (int)l.pid, status);
		l.pid = -1;
		worker_gone();
	}
	if (rl.pid > 0 && ended(rl.pid, &status)) {
		log_warn("fleet relay exited", "pid=%d status=%d", (int)rl.pid, status);
		rl.pid = -1;
		relay_gone();
	}
	for (int i = 0; i < FLEET_RELAY_OUT_MAX; i++)
		if (rl.out[i] > 0 && ended(rl.out[i], &status))
			rl.out[i] = 0;
}

/* The record's "images": the engine's tags as far as they fit, the record's last key; and
 * "images_more": true when some are not there (placement counts on none of a node's images
 * then). */
static void images_write(struct json_writer *j, size_t cap)
{
	const char *p = l.images ? l.images : "", *nl;
	bool more = !l.images || !l.images_whole || !*l.images_whole;

	json_key(j, "images");
	json_arr_begin(j);
	for (; (nl = strchr(p, '\n')); p = nl + 1) {
		size_t n = (size_t)(nl - p);

		/* a reference's characters only (none JSON escapes), and room for it, its quotes
		 * and comma, and the end: ],"images_more":true} */
		if (strspn(p, IMAGE_CHARS) != n || j->out->len + n + 32 > cap) {
			more = true;
			continue;
		}
		json_strn_write(j, p, n);
	}
	json_arr_end(j);
	if (more) {
		json_key(j, "images_more");
		json_bool_write(j, true);
	}
}

/* This node's record as agenticd knows it now. */
static long record_write(uint32_t live, char *out, size_t cap)
{
	struct json_writer j;
	struct buf b;

	buf_init(&b, out, cap);
	json_writer_init(&j, &b);
	json_obj_begin(&j);
	json_key(&j, "addr");
	json_str_write(&j, l.addr);
	json_key(&j, "version");
	json_str_write(&j, AGENTIC_VERSION);
	json_key(&j, "draining");
	json_bool_write(&j, l.draining);
	json_key(&j, "slots");
	json_int_write(&j, l.slots);
	json_key(&j, "slots_free");
	json_int_write(&j, live < l.slots ? l.slots - live : 0);
	json_key(&j, "placed");
	json_int_write(&j, l.admitted);
	json_key(&j, "memory_mib");
	json_int_write(&j, l.memory_mib);
	json_key(&j, "runtimes");
	json_arr_begin(&j);
	json_str_write(&j, "docker");
	/* VMs only once the accelerator is known: placement sends a VM create only here */
	if (l.vm_accel && l.vm_accel[0] && strcmp(l.vm_accel, "auto") != 0)
		json_str_write(&j, "vm");
	json_arr_end(&j);
	if (l.vm_accel && l.vm_accel[0] && strcmp(l.vm_accel, "auto") != 0) {
		json_key(&j, "accel");
		json_str_write(&j, l.vm_accel);
	}
	images_write(&j, cap);
	json_obj_end(&j);
	return json_writer_finish(&j) < 0 ? ERR_LIMIT : (long)b.len;
}

/* This node's sandboxes, {"sandboxes":[{"name","state","tier"}...]}: made ones only (not a
 * warm sandbox no create has claimed), the first FLEET_SANDBOXES_MAX. */
static long own_write(char *out, size_t cap)
{
	static const char *const states[] = { [SB_CREATING] = "creating", [SB_READY] = "ready",
					      [SB_REMOVING] = "removing" };
	struct json_writer j;
	struct buf b;
	size_t n = 0;

	buf_init(&b, out, cap);
	json_writer_init(&j, &b);
	json_obj_begin(&j);
	json_key(&j, "sandboxes");
	json_arr_begin(&j);
	for (uint32_t i = 0; i < sandbox_slots() && n < FLEET_SANDBOXES_MAX; i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state < SB_CREATING || sb->state > SB_REMOVING || sb->pool)
			continue;
		json_obj_begin(&j);
		json_key(&j, "name");
		json_str_write(&j, sb->name);
		json_key(&j, "state");
		json_str_write(&j, states[sb->state]);
		json_key(&j, "tier");
		json_str_write(&j, posture_tier(&sb->posture));
		json_obj_end(&j);
		n++;
	}
	json_arr_end(&j);
	json_obj_end(&j);
	return json_writer_finish(&j) < 0 ? ERR_LIMIT : (long)b.len;
}

/* Sends this node's sandboxes when they changed, looked at twice a second at most. */
static void own_send(int64_t now)
{
	static char pkt[FLEET_SB_PACKET_BYTES];
	long n;

	if (now - l.own_at < OWN_EVERY_MS)
		return;
	l.own_at = now;
	if ((n = own_write(pkt, sizeof(pkt))) < 0)
		return;
	if (((size_t)n != l.own_len || memcmp(pkt, l.own, (size_t)n) != 0) &&
	    send(l.fd, pkt, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n) {
		memcpy(l.own, pkt, (size_t)n);
		l.own_len = (size_t)n;
	}
}

void fleet_link_tick(int64_t now, uint32_t live)
{
	char rec[FLEET_RECORD_BYTES];
	long n;

	if (!l.on)
		return;
	for (int i = 0; i < FLEET_PLACE_MAX; i++)
		if (l.wait[i].id && now >= l.wait[i].until)
			place_end(l.wait[i].id, false, NULL);
	if (l.pid < 0 && l.fd < 0 && now >= l.restart_at)
		start_worker();
	/* the relay starts once the worker's first view of the nodes has come: before it every
	 * node would be a stranger (relay_event), and a node restarted within its lease, which
	 * the others still see up, would turn their requests away; meanwhile a connection waits
	 * in the listening socket's backlog, within the front door's handshake time */
	if (rl.lfd >= 0 && rl.pid < 0 && rl.fd < 0 && l.view_known && now >= rl.restart_at)
		relay_start();
	if (l.fd < 0)
		return;
	own_send(now);
	if ((n = record_write(live, rec, sizeof(rec))) < 0)
		return;
	if ((size_t)n != l.record_len || memcmp(rec, l.record, (size_t)n) != 0) {
		if (send(l.fd, rec, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n) {
			memcpy(l.record, rec, (size_t)n);
			l.record_len = (size_t)n;
		}
	}
}

int64_t fleet_link_next_deadline(void)
{
	int64_t w = l.on && l.pid < 0 && l.fd < 0 ? l.restart_at : INT64_MAX;

	return l.on && rl.lfd >= 0 && rl.pid < 0 && rl.fd < 0 && l.view_known && rl.restart_at < w
		       ? rl.restart_at
		       : w;
}

void fleet_link_shutdown(void)
{
	if (!l.on)
		return;
	l.on = false;
	if (l.fd >= 0) {
		(void)epoll_ctl(l.epfd, EPOLL_CTL_DEL, l.fd, NULL);
		close(l.fd); /* the worker sees the end, revokes the lease and exits */
		l.fd = -1;
	}
	/* the listener sees the end too; connections being served end with their own */
	relay_gone();
	if (rl.lfd >= 0)
		close(rl.lfd);
	rl.lfd = -1;
}

/* {"node","etcd","error","endpoint", KEY: ARRAY} and, for the sandboxes, "more": the answer of
 * GET /api/v1/fleet[/sandboxes]. ARRAY is the worker's as it sent it (null until it did). */
static int answer(struct buf *out, const char *key, const char *arr, size_t len, bool with_more)
{
	struct json_writer j;
	size_t n;
	bool more;

	json_writer_init(&j, out);
	json_obj_begin(&j);
	json_key(&j, "node");
	json_str_write(&j, l.set.node);
	json_key(&j, "etcd");
	json_str_write(&j, l.on ? l.etcd : "off");
	json_key(&j, "error");
	json_str_write(&j, l.on ? l.error : "none");
	json_key(&j, "endpoint");
	json_str_write(&j, l.endpoint);
	if (with_more) {
		json_key(&j, "more");
		(void)link_view_sbs(&n, &more);
		json_bool_write(&j, more);
	}
	json_key(&j, key);
	json_null_write(&j);
	json_obj_end(&j);
	if (json_writer_finish(&j) < 0)
		return ERR_LIMIT;
	if (len == 0)
		return 0;
	/* the worker's array in place of the null: "null}" at the end becomes "[...]}" */
	out->len -= 5;
	if (buf_append(out, arr, len) < 0 || buf_append(out, "}", 1) < 0)
		return ERR_LIMIT;
	return 0;
}

int fleet_link_info(struct buf *out)
{
	size_t n;
	const char *arr = link_view_nodes(&n);

	return answer(out, "nodes", arr, n, false);
}

int fleet_link_sandboxes(struct buf *out)
{
	size_t n;
	bool more;
	const char *arr = link_view_sbs(&n, &more);

	return answer(out, "sandboxes", arr, n, true);
}

int fleet_link_drain(bool on)
{
	int fd;

	if (!l.on)
		return ERR_STATE;
	if (on) {
		fd = open(l.drain_path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
		if (fd < 0)
			return -errno;
		close(fd);
	} else if (unlink(l.drain_path) != 0 && errno != ENOENT) {
		return -errno;
	}
	if (on != l.draining)
		log_info(on ? "fleet node draining" : "fleet node no longer draining", "node=%s",
			 log_q(l.set.node));
	l.draining = on;
	return 0;
}

/* How many of the view's entries say "state":"WORD" (the worker's writer: no string of it
 * holds an unescaped quote). */
static unsigned count_state(const char *p, size_t len, const char *word)
{
	char pat[32];
	size_t n = (size_t)snprintf(pat, sizeof(pat), "\"state\":\"%s\"", word);
	unsigned k = 0;

	for (const char *q = p; (q = memmem(q, len - (size_t)(q - p), pat, n)); q += n)
		k++;
	return k;
}

int fleet_link_metrics(struct buf *out)
{
	static const char *const node_states[] = { "up", "draining", "lost" };
	static const char *const sb_states[] = { "creating", "ready", "removing", "lost" };
	size_t nn, ns;
	bool more;
	const char *nodes = link_view_nodes(&nn), *sbs = link_view_sbs(&ns, &more);
	int r = 0;

	if (!l.on)
		return 0;
	r |= buf_printf(out, "# HELP agentic_fleet_etcd_up 1 when this node's fleet worker reaches "
			"etcd\n# TYPE agentic_fleet_etcd_up gauge\nagentic_fleet_etcd_up %d\n",
			strcmp(l.etcd, "up") == 0);
	r |= buf_printf(out, "# HELP agentic_fleet_draining 1 while this node takes no new "
			"placements\n# TYPE agentic_fleet_draining gauge\nagentic_fleet_draining %d\n",
			l.draining);
	r |= buf_printf(out, "# HELP agentic_fleet_nodes the fleet's nodes by state, as last read\n"
			"# TYPE agentic_fleet_nodes gauge\n");
	for (size_t i = 0; i < ARRAY_LEN(node_states); i++)
		r |= buf_printf(out, "agentic_fleet_nodes{state=\"%s\"} %u\n", node_states[i],
				count_state(nodes, nn, node_states[i]));
	r |= buf_printf(out, "# HELP agentic_fleet_sandboxes the fleet's sandboxes by state, as "
			"last read\n# TYPE agentic_fleet_sandboxes gauge\n");
	for (size_t i = 0; i < ARRAY_LEN(sb_states); i++)
		r |= buf_printf(out, "agentic_fleet_sandboxes{state=\"%s\"} %u\n", sb_states[i],
				count_state(sbs, ns, sb_states[i]));
	return r < 0 ? ERR_LIMIT : 0;
}
