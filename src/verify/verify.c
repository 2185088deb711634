/* verify.c: the verifier's checks (verify.h): their table (ids, titles) and their verdicts from
 * the facts gathered (verify_evaluate), pure and unit-tested. A reason is fixed text with
 * numbers or ids agentic owns, never an env value, a transcript byte or an engine string
 * beyond the fixed words a check names. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/base.h"
#include "verify/verify.h"

/* ---- the checks ---- */

static const char *const titles[VERIFY_CHECKS] = {
	"the control uid is in range and unique among sandboxes",
	"every capability is dropped (CapDrop ALL)",
	"only SETUID and SETGID are added back",
	"no-new-privileges is set",
	"the container is not privileged",
	"seccomp is not unconfined",
	"AppArmor and SELinux",
	"no host pid namespace",
	"no host ipc namespace",
	"no host uts namespace",
	"no host user namespace",
	"workload capability sets are empty",
	"the workload runs as the workload uid and gid with no supplementary groups",
	"the workload has no-new-privileges",
	"the workload is under a seccomp filter",
	"PID 1 as the workload sees it is the control uid with only SETUID and SETGID and NNP",
	"PID 1 as the host sees it is the control uid with only SETUID and SETGID, NNP and seccomp",
	"the workload cannot signal PID 1",
	"the workload cannot ptrace PID 1",
	"the workload cannot write the setup sentinel",
	"the workload cannot create a file on the control tmpfs",
	"the agent socket refuses the workload",
	"no host device is mapped",
	"no mount propagation is shared",
	"the docker socket is not mounted",
	"no sensitive host directory is mounted",
	"the agent socket directory is mounted read-only",
	"the control tmpfs is noexec, nosuid, nodev, 0700 and the control uid's",
	"the root filesystem is read-only or bounded",
	"the network is internal with inhibit_ipv4 and the default-deny label",
	"no other network is attached",
	"the host network namespace is not used",
	"the host is unreachable through the network's gateway",
	"the host is unreachable through docker0",
	"the host is unreachable through its primary address",
	"IPv6 is off",
	"a pids limit is set",
	"a memory limit is set",
	"the workspace has a disk budget",
	"the sandbox's runs are 0700/0600 on the agentshare",
	"the agentshare root is on a device other than /'s",
	"no network tools in the image",
	"the sandbox's posture",
	"the evidence supports the posture",
	"PID 1 reports itself over the control channel as the control uid with only SETUID and SETGID, NNP and seccomp",
	"QEMU runs as a uid of its own with no capabilities",
	"QEMU's network namespace is its own, with no interface but lo",
	"QEMU runs under its seccomp sandbox (-sandbox on) with no-new-privileges",
	"QEMU's mount and IPC namespaces are its own, its root not the host's",
	"the VM's control socket directory is root's, mode 0700",
	"the guest has no network interface but lo",
};

/* the index of AGV-NNN */
#define AGV(n) ((n) - 1)

const char *verify_check_id(unsigned i)
{
	static char ids[VERIFY_CHECKS][8];

	if (i >= VERIFY_CHECKS)
		return NULL;
	if (!ids[i][0])
		snprintf(ids[i], sizeof(ids[i]), "AGV-%03u", i + 1);
	return ids[i];
}

const char *verify_check_title(unsigned i)
{
	return i < VERIFY_CHECKS ? titles[i] : NULL;
}

const char *verify_status_name(enum verify_status s)
{
	static const char *const names[] = { "PASS", "FAIL", "INFO", "SKIP" };

	return (unsigned)s < ARRAY_LEN(names) ? names[s] : NULL;
}


/* ---- verdicts ---- */

#define CONTROL_CAPS ((uint64_t)0xc0) /* CAP_SETGID, CAP_SETUID */

static void set(struct verify_result *r, unsigned i, enum verify_status s, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set(struct verify_result *r, unsigned i, enum verify_status s, const char *fmt, ...)
{
	va_list ap;

	ASSERT(i < VERIFY_CHECKS);
	r->check[i].status = (uint8_t)s;
	r->check[i].inapplicable = false;
	r->check[i].reason[0] = '\0';
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(r->check[i].reason, sizeof(r->check[i].reason), fmt, ap);
		va_end(ap);
	}
}

/* A SKIP of a check that cannot apply to this kind of target (not a check that could not run) */
static void inapplicable(struct verify_result *r, unsigned i, const char *why)
{
	set(r, i, VERIFY_SKIP, "%s", why);
	r->check[i].inapplicable = true;
}

static void pass(struct verify_result *r, unsigned i)
{
	set(r, i, VERIFY_PASS, NULL);
}

static void verdict(struct verify_result *r, unsigned i, bool ok, const char *why)
{
	if (ok)
		pass(r, i);
	else
		set(r, i, VERIFY_FAIL, "%s", why);
}

/* path is dir or below it */
static bool under(const char *path, const char *dir)
{
	size_t n = strlen(dir);

	if (n == 1 && dir[0] == '/')
		return path[0] == '/';
	return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static void eval_identity(const struct verify_facts *f, struct verify_result *r)
{
	const struct verify_ct *ct = &f->ct;

	if (!ct->has_uid_label)
		set(r, AGV(1), VERIFY_FAIL, "no agentic-control-uid label");
	else if (ct->control_uid < f->uid_min || ct->control_uid > f->uid_max)
		set(r, AGV(1), VERIFY_FAIL, "control uid %u is outside %u..%u", ct->control_uid,
		    f->uid_min, f->uid_max);
	else if (f->uid_taken_by_other)
		set(r, AGV(1), VERIFY_FAIL, "control uid %u is another sandbox's", ct->control_uid);
	else
		set(r, AGV(1), VERIFY_PASS, "control uid %u", ct->control_uid);
	if (!ct->cap_drop_all)
		set(r, AGV(2), VERIFY_FAIL, "CapDrop does not hold ALL");
	else
		pass(r, AGV(2));
	if (ct->ncap_add == 2 && ct->cap_add_setuid && ct->cap_add_setgid)
		pass(r, AGV(3));
	else
		set(r, AGV(3), VERIFY_FAIL, "CapAdd has %u entries%s", ct->ncap_add,
		    ct->cap_add_setuid && ct->cap_add_setgid ? "" : ", not SETUID and SETGID");
	verdict(r, AGV(4), ct->nnp, "SecurityOpt has no no-new-privileges");
	/* privileged also means no seccomp filter and every device: AGV-005's to say, so that one
	 * control weakened fails one check */
	verdict(r, AGV(5), !ct->privileged, "Privileged is true (every capability and device, "
		"no seccomp filter)");
	if (ct->seccomp_unconfined)
		set(r, AGV(6), VERIFY_FAIL, "seccomp=unconfined");
	else
		set(r, AGV(6), VERIFY_PASS, ct->seccomp_profile ? "a profile of its own"
							      : "the engine's default profile");
	set(r, AGV(7), VERIFY_INFO, "AppArmor %s, SELinux %s",
	    !f->lsm_apparmor ? "not enabled on this host"
	    : ct->apparmor_unconfined ? "unconfined"
	    : ct->apparmor_profile ? "confined" : "not set",
	    !f->lsm_selinux ? "not enabled on this host"
	    : ct->selinux_label ? "labelled" : "not set");
	verdict(r, AGV(8), !ct->host_pid, "PidMode is host");
	verdict(r, AGV(9), !ct->host_ipc, "IpcMode is host");
	verdict(r, AGV(10), !ct->host_uts, "UTSMode is host");
	verdict(r, AGV(11), !ct->host_userns, "UsernsMode is host");
}

static bool control_ok(const struct verify_proc *p, uint32_t uid, bool want_seccomp, char *why,
		       size_t size)
{
	for (int i = 0; i < 4; i++)
		if (p->uid[i] != uid || p->gid[i] != uid) {
			snprintf(why, size, "uid %u gid %u, not %u", p->uid[i], p->gid[i], uid);
			return false;
		}
	if (p->cap_prm != CONTROL_CAPS || p->cap_eff != CONTROL_CAPS || p->cap_inh || p->cap_amb ||
	    (p->cap_bnd & ~CONTROL_CAPS)) {
		snprintf(why, size, "capabilities prm %llx eff %llx inh %llx amb %llx bnd %llx",
			 (unsigned long long)p->cap_prm, (unsigned long long)p->cap_eff,
			 (unsigned long long)p->cap_inh, (unsigned long long)p->cap_amb,
			 (unsigned long long)p->cap_bnd);
		return false;
	}
	if (p->no_new_privs != 1) {
		snprintf(why, size, "NoNewPrivs %d", p->no_new_privs);
		return false;
	}
	if (want_seccomp && p->seccomp != 2) {
		snprintf(why, size, "Seccomp mode %d", p->seccomp);
		return false;
	}
	return true;
}

/* a probe word for key, "" when the probe did not print it */
static const char *probe_word(const struct verify_facts *f, const char *key, char *buf,
			      size_t size)
{
	buf[0] = '\0';
	if (f->probe)
		verify_probe_get(f->probe, key, buf, size);
	return buf;
}

/* A denial the probe saw (anything but "allowed"; "" means it printed nothing). */
static void denied(const struct verify_facts *f, struct verify_result *r, unsigned i,
		   const char *key, const char *what)
{
	char w[32];

	probe_word(f, key, w, sizeof(w));
	if (!w[0])
		set(r, i, VERIFY_FAIL, "the probe did not report %s", what);
	else if (strcmp(w, "allowed") == 0)
		set(r, i, VERIFY_FAIL, "%s was allowed", what);
	else
		set(r, i, VERIFY_PASS, "%s", w);
}

/* AGV-012..015: the probe's own status, as the workload */
static void eval_workload(const struct verify_facts *f, struct verify_result *r)
{
	struct verify_proc self;

	if (verify_probe_status(f->probe, "self.", &self) != 0) {
		for (int i = 12; i <= 15; i++)
			set(r, AGV(i), VERIFY_FAIL, "the probe did not report its own status");
		return;
	}
	if (self.cap_inh || self.cap_prm || self.cap_eff || self.cap_amb)
		set(r, AGV(12), VERIFY_FAIL, "inh %llx prm %llx eff %llx amb %llx",
		    (unsigned long long)self.cap_inh, (unsigned long long)self.cap_prm,
		    (unsigned long long)self.cap_eff, (unsigned long long)self.cap_amb);
	else
		pass(r, AGV(12));
	set(r, AGV(13), VERIFY_PASS, "uid %u gid %u", f->workload_uid, f->workload_gid);
	for (int i = 0; i < 4; i++)
		if (self.uid[i] != f->workload_uid || self.gid[i] != f->workload_gid)
			set(r, AGV(13), VERIFY_FAIL, "uid %u gid %u, not %u:%u", self.uid[i],
			    self.gid[i], f->workload_uid, f->workload_gid);
	if (r->check[AGV(13)].status == VERIFY_PASS && self.ngroups)
		set(r, AGV(13), VERIFY_FAIL, "%u supplementary groups", self.ngroups);
	if (self.no_new_privs == 1)
		pass(r, AGV(14));
	else
		set(r, AGV(14), VERIFY_FAIL, "NoNewPrivs %d", self.no_new_privs);
	if (self.seccomp == 2)
		pass(r, AGV(15));
	else
		set(r, AGV(15), VERIFY_FAIL, "Seccomp mode %d", self.seccomp);
}

/* AGV-022: the agent socket refused the workload's Connect as UNAUTHENTICATED */
static void eval_agent_socket(const struct verify_facts *f, struct verify_result *r)
{
	char w[32];

	probe_word(f, "agent_socket", w, sizeof(w));
	if (strcmp(w, "refused") == 0) {
		probe_word(f, "agent_socket.status", w, sizeof(w));
		verdict(r, AGV(22), strcmp(w, "UNAUTHENTICATED") == 0,
			"refused, but not UNAUTHENTICATED");
	} else {
		char st[24];

		/* a connection lost before an answer is not a socket never reached: the reason says
		 * which, so a FAIL names what to look at */
		probe_word(f, "agent_socket.status", st, sizeof(st));
		set(r, AGV(22), VERIFY_FAIL, "%s", !w[0] ? "the probe did not report it"
				: strcmp(w, "accepted") == 0 ? "the workload's Connect was accepted"
				: strcmp(st, "UNAVAILABLE") == 0 ? "the connection was lost before an answer"
				: "the socket was not reached");
	}
}

/* AGV-033..035: the host unreached through each target, by the probe and agenticd's listener */
static void eval_reach(const struct verify_facts *f, struct verify_result *r)
{
	char w[32];

	for (int t = 0; t < VERIFY_TARGETS; t++) {
		static const char *const what[] = { "the gateway", "docker0", "the primary address" };
		unsigned i = AGV(33) + (unsigned)t;
		char key[24];

		if (f->target_connect[t] < 0 && f->listener_errno) {
			set(r, i, VERIFY_SKIP, "agenticd could not open its listener: %s",
			    strerror(f->listener_errno));
			continue;
		}
		if (f->target_connect[t] < 0) {
			set(r, i, VERIFY_SKIP, t == VERIFY_TO_DOCKER0 ? "the host has no docker0"
					       : t == VERIFY_TO_PRIMARY ? "the host has no default route"
					       : "the network has no gateway address");
			continue;
		}
		snprintf(key, sizeof(key), "connect.%d", f->target_connect[t]);
		probe_word(f, key, w, sizeof(w));
		if (f->host_reached[t])
			set(r, i, VERIFY_FAIL, "agenticd's listener at %s took a connection from the "
			    "sandbox (probe: %s)", what[t], w[0] ? w : "no report");
		else if (f->listener_foreign)
			set(r, i, VERIFY_FAIL, "agenticd's listener took a connection it cannot place: "
			    "its queue cannot be trusted");
		else if (!w[0])
			set(r, i, VERIFY_FAIL, "the probe did not report %s", what[t]);
		else if (strcmp(w, "connected") == 0 || strcmp(w, "refused") == 0)
			set(r, i, VERIFY_FAIL, "%s answered (%s)", what[t], w);
		else
			set(r, i, VERIFY_PASS, "%s", w);
	}
}

/* AGV-042: the network tools the probe found in the image */
static void eval_tools(const struct verify_facts *f, struct verify_result *r)
{
	static const char *const tools[] = { "curl", "wget", "grpcurl", "python" };
	char words[4][16], w[32];

	for (int t = 0; t < 4; t++) {
		char key[24];

		snprintf(key, sizeof(key), "tool.%s", tools[t]);
		probe_word(f, key, w, sizeof(w));
		snprintf(words[t], sizeof(words[t]), "%s", strcmp(w, "present") == 0 ? "present"
					   : strcmp(w, "absent") == 0 ? "absent" : "unknown");
	}
	set(r, AGV(42), VERIFY_INFO, "curl %s, wget %s, grpcurl %s, python %s", words[0],
	    words[1], words[2], words[3]);
}

/* The checks that need the probe, run as the workload inside the sandbox */
static void eval_inside(const struct verify_facts *f, struct verify_result *r)
{
	static const unsigned inside[] = { 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 33, 34, 35, 42 };
	struct verify_proc pid1;
	char why[VERIFY_REASON_BYTES];

	if (!f->is_sandbox || !f->probe) {
		for (size_t i = 0; i < ARRAY_LEN(inside); i++)
			if (!f->is_sandbox)
				inapplicable(r, AGV(inside[i]), "not an agentic sandbox: needs its init");
			else
				set(r, AGV(inside[i]), VERIFY_FAIL, "the probe did not run: %s",
				    f->probe_error ? f->probe_error : "no answer");
		return;
	}
	eval_workload(f, r);
	if (verify_probe_status(f->probe, "pid1.", &pid1) != 0)
		set(r, AGV(16), VERIFY_FAIL, "the probe could not read /proc/1/status");
	else if (!control_ok(&pid1, f->ct.control_uid, false, why, sizeof(why)))
		set(r, AGV(16), VERIFY_FAIL, "%s", why);
	else
		pass(r, AGV(16));
	denied(f, r, AGV(18), "kill.1", "kill(1, 0)");
	denied(f, r, AGV(19), "ptrace.1", "PTRACE_SEIZE of 1");
	denied(f, r, AGV(20), "write.0", "opening the sentinel for writing");
	denied(f, r, AGV(21), "create.0", "a file on the control tmpfs");
	eval_agent_socket(f, r);
	eval_reach(f, r);
	eval_tools(f, r);
}

static void eval_host_proc(const struct verify_facts *f, struct verify_result *r)
{
	/* the kernel's mount while the container runs; the engine's options while it does not */
	const struct verify_tmpfs *t = f->ct.running ? &f->tmpfs : &f->ct.tmpfs_cfg;
	char why[VERIFY_REASON_BYTES];
	uint32_t uid = f->ct.control_uid;

	if (!f->ct.running)
		set(r, AGV(17), VERIFY_SKIP, "the container is not running");
	else if (!f->init_host.read)
		set(r, AGV(17), VERIFY_FAIL, "the init's /proc status could not be read");
	else if (!control_ok(&f->init_host, uid, true, why, sizeof(why)))
		set(r, AGV(17), VERIFY_FAIL, "%s", why);
	else
		pass(r, AGV(17));
	if (!t->found)
		set(r, AGV(28), VERIFY_FAIL, "nothing is mounted at /run/agentic");
	else if (strcmp(t->fstype, "tmpfs") != 0)
		set(r, AGV(28), VERIFY_FAIL, "/run/agentic is not a tmpfs");
	else if (!t->noexec || !t->nosuid || !t->nodev)
		set(r, AGV(28), VERIFY_FAIL, "flags:%s%s%s missing", t->noexec ? "" : " noexec",
		    t->nosuid ? "" : " nosuid", t->nodev ? "" : " nodev");
	else if (!t->has_mode || t->mode != 0700)
		set(r, AGV(28), VERIFY_FAIL, "mode %o, not 700", t->has_mode ? t->mode : 01777);
	else if (!t->has_uid || t->uid != uid || !t->has_gid || t->gid != uid)
		set(r, AGV(28), VERIFY_FAIL, "owner %u:%u, not the control uid %u",
		    t->has_uid ? t->uid : 0, t->has_gid ? t->gid : 0, uid);
	else if (f->ct.running && !f->tmpfs_dir_read)
		set(r, AGV(28), VERIFY_FAIL, "/run/agentic could not be read from the host");
	else if (f->ct.running && f->tmpfs_dir_mode != 0700)
		set(r, AGV(28), VERIFY_FAIL, "the directory is mode %o, not 700", f->tmpfs_dir_mode);
	else if (f->ct.running && (f->tmpfs_dir_uid != uid || f->tmpfs_dir_gid != uid))
		set(r, AGV(28), VERIFY_FAIL, "the directory is %u:%u's, not the control uid %u",
		    f->tmpfs_dir_uid, f->tmpfs_dir_gid, uid);
	else if (f->ct.running)
		pass(r, AGV(28));
	else
		set(r, AGV(28), VERIFY_PASS, "the engine's options: the container is not running");
}

static bool docker_socket_mount(const struct verify_facts *f, const struct verify_mount *m)
{
	const char *base = strrchr(m->source, '/');

	base = base ? base + 1 : m->source;
	if (strcmp(base, "docker.sock") == 0 || strcmp(base, "containerd.sock") == 0)
		return true;
	if (!m->source[0])
		return false;
	return (f->docker_socket && under(f->docker_socket, m->source)) ||
	       (f->docker_socket_real && under(f->docker_socket_real, m->source));
}

static bool sensitive_mount(const struct verify_facts *f, const struct verify_mount *m)
{
	static const char *const exact[] = { "/", "/usr", "/lib", "/lib64", "/bin", "/sbin",
					     "/var", "/run", "/var/run" };
	static const char *const tree[] = { "/boot", "/dev", "/etc", "/proc", "/sys",
					    "/var/lib/docker", "/root" };

	if (strcmp(m->type, "bind") != 0 || !m->source[0])
		return false;
	if (f->self_exe && strcmp(m->source, f->self_exe) == 0)
		return false;
	for (size_t i = 0; i < ARRAY_LEN(exact); i++)
		if (strcmp(m->source, exact[i]) == 0)
			return true;
	for (size_t i = 0; i < ARRAY_LEN(tree); i++)
		if (under(m->source, tree[i]))
			return true;
	if (f->agentshare_root && (under(m->source, f->agentshare_root) ||
				   under(f->agentshare_root, m->source)))
		return !(f->workspace && strcmp(m->source, f->workspace) == 0);
	return false;
}

static void eval_mounts(const struct verify_facts *f, struct verify_result *r)
{
	const struct verify_ct *ct = &f->ct;
	uint32_t n = ct->nmounts < VERIFY_MOUNTS ? ct->nmounts : VERIFY_MOUNTS;
	int shared = -1, sock = -1, sens = -1, agent_rw = -1;

	if (ct->ndevices || ct->ndevice_rules)
		set(r, AGV(23), VERIFY_FAIL, "%u devices, %u device cgroup rules", ct->ndevices,
		    ct->ndevice_rules);
	else
		pass(r, AGV(23));
	for (uint32_t i = 0; i < n; i++) {
		const struct verify_mount *m = &ct->mount[i];

		if (shared < 0 && (strcmp(m->propagation, "shared") == 0 ||
				   strcmp(m->propagation, "rshared") == 0))
			shared = (int)i;
		if (sock < 0 && docker_socket_mount(f, m))
			sock = (int)i;
		if (sens < 0 && !docker_socket_mount(f, m) && sensitive_mount(f, m))
			sens = (int)i;
		if (agent_rw < 0 && m->rw &&
		    ((f->agent_socket_dir && strcmp(m->source, f->agent_socket_dir) == 0) ||
		     strcmp(m->dest, "/run/agentic-sandbox") == 0))
			agent_rw = (int)i;
	}
	if (shared >= 0)
		set(r, AGV(24), VERIFY_FAIL, "mount %d of %u has %s propagation", shared + 1,
		    ct->nmounts, ct->mount[shared].propagation);
	else
		pass(r, AGV(24));
	if (sock >= 0)
		set(r, AGV(25), VERIFY_FAIL, "mount %d of %u holds the engine's socket", sock + 1,
		    ct->nmounts);
	else
		pass(r, AGV(25));
	if (sens >= 0)
		set(r, AGV(26), VERIFY_FAIL, "mount %d of %u is a sensitive host path", sens + 1,
		    ct->nmounts);
	else if (ct->nmounts > VERIFY_MOUNTS)
		set(r, AGV(26), VERIFY_FAIL, "%u mounts, more than the %u checked", ct->nmounts,
		    VERIFY_MOUNTS);
	else
		pass(r, AGV(26));
	if (agent_rw >= 0)
		set(r, AGV(27), VERIFY_FAIL, "mount %d of %u is writable", agent_rw + 1, ct->nmounts);
	else
		pass(r, AGV(27));
	if (ct->readonly_rootfs)
		set(r, AGV(29), VERIFY_PASS, "read-only");
	else if (ct->storage_size)
		set(r, AGV(29), VERIFY_PASS, "writable, bounded by StorageOpt size");
	else
		set(r, AGV(29), VERIFY_FAIL, "writable and unbounded");
}

static void eval_network(const struct verify_facts *f, struct verify_result *r)
{
	const struct verify_ct *ct = &f->ct;
	const struct verify_net *n = ct->nnets && f->net_index < VERIFY_NETS ? &f->net[f->net_index]
									   : NULL;
	char w[16], w2[16];

	if (!n || !n->read)
		set(r, AGV(30), VERIFY_FAIL, ct->nnets ? "its network could not be read"
						       : "no network attached");
	else if (!n->internal || !n->inhibit_ipv4 || !n->default_deny)
		set(r, AGV(30), VERIFY_FAIL, "missing:%s%s%s", n->internal ? "" : " Internal",
		    n->inhibit_ipv4 ? "" : " inhibit_ipv4", n->default_deny ? "" : " default-deny label");
	else
		pass(r, AGV(30));
	if (ct->nnets > 1)
		set(r, AGV(31), VERIFY_FAIL, "%u networks attached", ct->nnets);
	else
		pass(r, AGV(31));
	verdict(r, AGV(32), !ct->host_net, "NetworkMode is host");
	if (n && n->read && n->ipv6)
		set(r, AGV(36), VERIFY_FAIL, "the network has EnableIPv6");
	else if (!f->is_sandbox)
		set(r, AGV(36), VERIFY_PASS, "the engine's view only: EnableIPv6 false");
	else if (!f->probe)
		set(r, AGV(36), VERIFY_FAIL, "the probe did not run");
	else if (strcmp(probe_word(f, "ipv6.disable_ipv6", w, sizeof(w)), "1") == 0 ||
		 strcmp(probe_word(f, "ipv6.addrs", w2, sizeof(w2)), "0") == 0)
		pass(r, AGV(36));
	else
		set(r, AGV(36), VERIFY_FAIL, "disable_ipv6 %s, %s inet6 addresses beside lo",
		    w[0] ? w : "unknown", probe_word(f, "ipv6.addrs", w2, sizeof(w2))[0] ? w2 : "?");
}

static void eval_resources(const struct verify_facts *f, struct verify_result *r)
{
	const struct verify_ct *ct = &f->ct;

	if (ct->pids_limit > 0)
		set(r, AGV(37), VERIFY_PASS, "%lld", (long long)ct->pids_limit);
	else
		set(r, AGV(37), VERIFY_FAIL, "PidsLimit is not set");
	if (ct->memory > 0)
		set(r, AGV(38), VERIFY_PASS, "%lld bytes", (long long)ct->memory);
	else
		set(r, AGV(38), VERIFY_FAIL, "Memory is not set");
	if (!f->is_sandbox) {
		inapplicable(r, AGV(39), "not an agentic sandbox");
		inapplicable(r, AGV(40), "not an agentic sandbox");
	} else {
		if (f->writable_root ? ct->storage_size : f->disk_bytes > 0 &&
		    f->workspace_img_bytes == (int64_t)f->disk_bytes)
			set(r, AGV(39), VERIFY_PASS, "%llu bytes", (unsigned long long)f->disk_bytes);
		else if (!f->disk_bytes)
			set(r, AGV(39), VERIFY_FAIL, "no disk budget (a plain workspace directory)");
		else
			set(r, AGV(39), VERIFY_FAIL, "workspace.img is %lld bytes, not %llu",
			    (long long)f->workspace_img_bytes, (unsigned long long)f->disk_bytes);
		if (f->runs_bad)
			set(r, AGV(40), VERIFY_FAIL, "%u of %u entries: %s", f->runs_bad,
			    f->runs_checked, f->runs_why);
		else
			set(r, AGV(40), VERIFY_PASS, "%u entries", f->runs_checked);
	}
	if (!f->share_dev_known)
		set(r, AGV(41), f->require_dedicated ? VERIFY_FAIL : VERIFY_INFO,
		    "the agentshare root could not be read");
	else if (f->share_same_dev)
		set(r, AGV(41), f->require_dedicated ? VERIFY_FAIL : VERIFY_INFO,
		    "on the same device as /");
	else
		set(r, AGV(41), f->require_dedicated ? VERIFY_PASS : VERIFY_INFO,
		    "on its own device");
}

/* AGV-045: what the init says of itself, sent from inside its own process over the channel
 * only it holds (a workload cannot speak for it), held to the same bar as the host's reading */
static void eval_self_report(const struct verify_facts *f, struct verify_result *r)
{
	char why[VERIFY_REASON_BYTES];

	if (!f->is_sandbox)
		inapplicable(r, AGV(45), "not an agentic sandbox: no control channel");
	else if (!f->init_self.read)
		set(r, AGV(45), VERIFY_FAIL, "the init sent no report of itself");
	else if (!control_ok(&f->init_self, f->ct.control_uid, !f->is_vm, why, sizeof(why)))
		set(r, AGV(45), VERIFY_FAIL, "%s", why);
	else
		pass(r, AGV(45));
}

/* QEMU's uid: its own (no other process, no subordinate range), no capabilities */
static void eval_vm_uid(const struct verify_vm *vm, struct verify_result *r)
{
	const struct verify_proc *q = &vm->qemu;

	for (int i = 0; i < 4; i++)
		if (q->uid[i] != vm->uid || q->gid[i] != vm->uid) {
			set(r, AGV(46), VERIFY_FAIL, "uid %u gid %u, not %u", q->uid[i], q->gid[i],
			    vm->uid);
			return;
		}
	if (q->ngroups > (vm->kvm ? 1u : 0u))
		set(r, AGV(46), VERIFY_FAIL, "%u supplementary groups", q->ngroups);
	else if (q->cap_prm || q->cap_eff || q->cap_inh || q->cap_amb)
		set(r, AGV(46), VERIFY_FAIL, "capabilities prm %llx eff %llx",
		    (unsigned long long)q->cap_prm, (unsigned long long)q->cap_eff);
	else if (vm->uid_other)
		set(r, AGV(46), VERIFY_FAIL, "process %lld holds uid %u too",
		    (long long)vm->uid_other, vm->uid);
	else if (vm->uid_subordinate)
		set(r, AGV(46), VERIFY_FAIL, "uid %u is in a subordinate range (/etc/subuid, "
		    "/etc/subgid)", vm->uid);
	else
		set(r, AGV(46), VERIFY_PASS, "uid %u", vm->uid);
}

/* AGV-046..051: a VM's QEMU as the host sees it, and the guest's interfaces */
static void eval_vm(const struct verify_facts *f, struct verify_result *r)
{
	const struct verify_vm *vm = &f->vm;
	char w[16];

	if (!vm->running || !vm->qemu.read || !vm->ns_read) {
		for (int i = 46; i <= 49; i++)
			set(r, AGV(i), VERIFY_FAIL, "%s", !vm->running ? "QEMU is not running"
				: "QEMU's /proc could not be read");
	} else {
		eval_vm_uid(vm, r);
		if (!vm->own_net)
			set(r, AGV(47), VERIFY_FAIL, "the host's network namespace");
		else if (vm->ifaces != 0)
			set(r, AGV(47), VERIFY_FAIL, vm->ifaces < 0 ? "its interfaces could not be read"
				: "%d interfaces but lo", vm->ifaces);
		else
			pass(r, AGV(47));
		if (vm->qemu.seccomp != 2 || vm->qemu.no_new_privs != 1 || !vm->sandbox_on)
			set(r, AGV(48), VERIFY_FAIL, "Seccomp mode %d, NoNewPrivs %d, %s",
			    vm->qemu.seccomp, vm->qemu.no_new_privs,
			    vm->sandbox_on ? "-sandbox on" : "no -sandbox on with its denials");
		else
			pass(r, AGV(48));
		if (!vm->own_mnt || !vm->own_ipc || !vm->own_root)
			set(r, AGV(49), VERIFY_FAIL, "the host's:%s%s%s", vm->own_mnt ? "" : " mount namespace",
			    vm->own_ipc ? "" : " IPC namespace", vm->own_root ? "" : " root");
		else
			pass(r, AGV(49));
	}
	if (!vm->dir_read)
		set(r, AGV(50), VERIFY_FAIL, "the VM's directory could not be read");
	else if (vm->dir_mode != 0700 || vm->dir_uid != 0 || vm->dir_gid != 0)
		set(r, AGV(50), VERIFY_FAIL, "mode %o, owner %u:%u", vm->dir_mode, vm->dir_uid,
		    vm->dir_gid);
	else
		pass(r, AGV(50));
	probe_word(f, "nics", w, sizeof(w));
	if (!f->probe)
		set(r, AGV(51), VERIFY_FAIL, "the probe did not run: %s",
		    f->probe_error ? f->probe_error : "no answer");
	else if (strcmp(w, "0") != 0)
		set(r, AGV(51), VERIFY_FAIL, w[0] ? "%s interfaces but lo" : "the probe did not report %s",
		    w[0] ? w : "its interfaces");
	else
		pass(r, AGV(51));
}

/* Which checks a runtime has: a VM has no engine container (its QEMU and guest are
 * AGV-046..051), a container no QEMU. */
static void eval_runtime(const struct verify_facts *f, struct verify_result *r)
{
	static const unsigned docker_only[] = { 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 17, 22, 23,
						24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35,
						37, 38 };

	if (!f->is_vm) {
		for (unsigned i = 46; i <= VERIFY_CHECKS; i++)
			inapplicable(r, AGV(i), "not a VM");
		return;
	}
	for (size_t i = 0; i < ARRAY_LEN(docker_only); i++)
		inapplicable(r, AGV(docker_only[i]), docker_only[i] == 15
			     ? "a VM: the guest's kernel is the tenant's, no seccomp filter (docs/VM.md)"
			     : "a VM: no engine container (AGV-046..051 are its host side)");
	eval_vm(f, r);
}

/* AGV-043 and AGV-044: T1 rests on every other check, so it is supported only when each ran
 * and none failed; one that could not run (a SKIP that applies) is no evidence, and the
 * reason names which (as many ids as fit). */
static void eval_posture(const struct verify_facts *f, struct verify_result *r)
{
	char ids[VERIFY_REASON_BYTES] = "";
	uint32_t failed = 0, unrun = 0;
	size_t len = 0;

	if (!f->is_sandbox) {
		inapplicable(r, AGV(43), "not an agentic sandbox: no posture");
		inapplicable(r, AGV(44), "not an agentic sandbox: no posture");
		return;
	}
	for (unsigned i = 0; i < VERIFY_CHECKS; i++) {
		if (i == AGV(43) || i == AGV(44))
			continue;
		failed += r->check[i].status == VERIFY_FAIL;
		if (verify_check_not_run(r, i) && unrun++ < VERIFY_NOT_RUN_NAMED && len < sizeof(ids))
			len += (size_t)snprintf(ids + len, sizeof(ids) - len, " %s", verify_check_id(i));
	}
	set(r, AGV(43), VERIFY_INFO, "%s", f->posture_text);
	if (f->t1 && failed)
		set(r, AGV(44), VERIFY_FAIL, "T1 claimed with %u failing checks", failed);
	else if (f->t1 && unrun)
		set(r, AGV(44), VERIFY_SKIP, "T1 claimed, not proven: %u checks did not run:%s%s",
		    unrun, ids, unrun > VERIFY_NOT_RUN_NAMED ? " ..." : "");
	else
		set(r, AGV(44), VERIFY_PASS, f->t1 ? "T1 and every check passed" : "T0 claimed");
}

void verify_evaluate(const struct verify_facts *f, struct verify_result *r)
{
	memset(r, 0, sizeof(*r));
	eval_identity(f, r);
	eval_inside(f, r);
	eval_host_proc(f, r);
	eval_mounts(f, r);
	eval_network(f, r);
	eval_resources(f, r);
	eval_self_report(f, r);
	eval_runtime(f, r);
	eval_posture(f, r);
	for (unsigned i = 0; i < VERIFY_CHECKS; i++) {
		switch (r->check[i].status) {
		case VERIFY_PASS: r->passed++; break;
		case VERIFY_FAIL: r->failed++; break;
		case VERIFY_INFO: r->info++; break;
		default: r->skipped++; break;
		}
		r->not_run += verify_check_not_run(r, i);
	}
	ASSERT(r->not_run <= r->skipped);
}

const char *verify_result_word(const struct verify_result *r)
{
	return r->failed ? "fail" : r->not_run ? "incomplete" : "pass";
}
