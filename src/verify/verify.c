/* verify.c: the verifier (verify.h): the checks' table, the readers of what was gathered, the
 * verdicts, the result's JSON, and a verification run on the loop. Nothing here logs or
 * keeps an env value, a transcript byte, or an engine string beyond the fixed words a check
 * names. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/filter.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/base.h"
#include "runtime/engine.h"
#include "agent/exec.h"
#include "workspace/host.h"
#include "transcript/runlog.h"
#include "sandbox/posture.h"
#include "runtime/runtime_vm.h"
#include "sandbox/sandbox.h"
#include "verify/verify.h"
#include "version.h"

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

/* ---- readers ---- */

static struct json_token toks[16384];

/* The string token's raw bytes start with s (the words compared here have no escapes). */
static bool raw_prefix(const struct json_doc *d, int idx, const char *s)
{
	size_t n = strlen(s);

	return idx >= 0 && d->tok[idx].type == JSON_STRING &&
	       d->tok[idx].end - d->tok[idx].start >= n &&
	       strncasecmp(d->src + d->tok[idx].start, s, n) == 0;
}

static bool raw_eq(const struct json_doc *d, int idx, const char *s)
{
	return raw_prefix(d, idx, s) && d->tok[idx].end - d->tok[idx].start == strlen(s);
}

static bool get_bool(const struct json_doc *d, int obj, const char *key)
{
	bool v = false;
	int i = obj >= 0 ? json_obj_get(d, obj, key) : -1;

	if (i >= 0)
		json_bool(d, i, &v);
	return v;
}

static int64_t get_int(const struct json_doc *d, int obj, const char *key)
{
	int64_t v = 0;
	int i = obj >= 0 ? json_obj_get(d, obj, key) : -1;

	if (i >= 0 && json_int(d, i, &v) != 0)
		v = 0;
	return v;
}

static void get_str(const struct json_doc *d, int obj, const char *key, char *out, size_t size)
{
	int i = obj >= 0 ? json_obj_get(d, obj, key) : -1;

	out[0] = '\0';
	if (i >= 0 && d->tok[i].type == JSON_STRING && json_str(d, i, out, size) < 0)
		out[0] = '\0';
}

static uint32_t count(const struct json_doc *d, int obj, const char *key)
{
	int i = obj >= 0 ? json_obj_get(d, obj, key) : -1;

	if (i < 0 || (d->tok[i].type != JSON_ARRAY && d->tok[i].type != JSON_OBJECT))
		return 0;
	return d->tok[i].children;
}

/* CAP_X or X, any case */
static bool cap_is(const struct json_doc *d, int idx, const char *name)
{
	char cap[32];

	if (json_str(d, idx, cap, sizeof(cap)) < 0)
		return false;
	return strcasecmp(cap, name) == 0 ||
	       (strncasecmp(cap, "CAP_", 4) == 0 && strcasecmp(cap + 4, name) == 0);
}

static void read_security_opt(const struct json_doc *d, int arr, struct verify_ct *ct)
{
	for (int i = arr >= 0 ? json_first(d, arr) : -1; i >= 0; i = json_next(d, arr, i)) {
		if (raw_eq(d, i, "no-new-privileges") || raw_eq(d, i, "no-new-privileges:true") ||
		    raw_eq(d, i, "no-new-privileges=true"))
			ct->nnp = true;
		else if (raw_eq(d, i, "seccomp=unconfined") || raw_eq(d, i, "seccomp:unconfined"))
			ct->seccomp_unconfined = true;
		else if (raw_prefix(d, i, "seccomp=") || raw_prefix(d, i, "seccomp:"))
			ct->seccomp_profile = true;
		else if (raw_eq(d, i, "apparmor=unconfined") || raw_eq(d, i, "apparmor:unconfined"))
			ct->apparmor_unconfined = true;
		else if (raw_prefix(d, i, "apparmor=") || raw_prefix(d, i, "apparmor:"))
			ct->apparmor_profile = true;
		else if ((raw_prefix(d, i, "label=") || raw_prefix(d, i, "label:")) &&
			 !raw_eq(d, i, "label=disable") && !raw_eq(d, i, "label:disable"))
			ct->selinux_label = true;
	}
}

static void read_mounts(const struct json_doc *d, int arr, struct verify_ct *ct)
{
	for (int i = arr >= 0 ? json_first(d, arr) : -1; i >= 0; i = json_next(d, arr, i)) {
		struct verify_mount *m = &ct->mount[ct->nmounts];

		if (ct->nmounts++ >= VERIFY_MOUNTS || d->tok[i].type != JSON_OBJECT)
			continue;
		get_str(d, i, "Type", m->type, sizeof(m->type));
		get_str(d, i, "Source", m->source, sizeof(m->source));
		get_str(d, i, "Destination", m->dest, sizeof(m->dest));
		get_str(d, i, "Propagation", m->propagation, sizeof(m->propagation));
		m->rw = get_bool(d, i, "RW");
	}
}

static bool has_word(const char *opts, const char *word);
static bool opt_number(const char *opts, const char *key, int base, uint32_t *out);

/* The engine's tmpfs options ("rw,noexec,...,mode=0700,uid=N,gid=N,size=64k"). */
static void tmpfs_opts(const char *opts, struct verify_tmpfs *t)
{
	memset(t, 0, sizeof(*t));
	t->found = true;
	snprintf(t->fstype, sizeof(t->fstype), "tmpfs");
	t->noexec = has_word(opts, "noexec");
	t->nosuid = has_word(opts, "nosuid");
	t->nodev = has_word(opts, "nodev");
	t->has_mode = opt_number(opts, "mode", 8, &t->mode);
	t->has_uid = opt_number(opts, "uid", 10, &t->uid);
	t->has_gid = opt_number(opts, "gid", 10, &t->gid);
}

int verify_ct_parse(const char *json, size_t len, struct verify_ct *ct)
{
	struct json_doc d;
	int st, hc, labels, v, nets;
	char word[128];

	memset(ct, 0, sizeof(*ct));
	if (json_parse(&d, json, len, toks, ARRAY_LEN(toks)) != 0 || d.tok[0].type != JSON_OBJECT)
		return ERR_PARSE;
	hc = json_obj_get(&d, 0, "HostConfig");
	if (hc < 0 || d.tok[hc].type != JSON_OBJECT)
		return ERR_PARSE;
	get_str(&d, 0, "Id", ct->id, sizeof(ct->id));
	st = json_obj_get(&d, 0, "State");
	ct->running = get_bool(&d, st, "Running");
	ct->pid = get_int(&d, st, "Pid");
	v = json_obj_get(&d, 0, "Config");
	labels = v >= 0 ? json_obj_get(&d, v, "Labels") : -1;
	if (labels >= 0 && d.tok[labels].type == JSON_OBJECT) {
		uint64_t uid;

		get_str(&d, labels, "agentic-control-uid", word, sizeof(word));
		if (word[0] && parse_u64(word, UINT32_MAX, &uid) == 0) {
			ct->has_uid_label = true;
			ct->control_uid = (uint32_t)uid;
		}
		get_str(&d, labels, "agentic-instance-id", ct->instance_id, sizeof(ct->instance_id));
		get_str(&d, labels, "agentic-managed-network", ct->managed_network,
			sizeof(ct->managed_network));
	}
	v = json_obj_get(&d, hc, "CapDrop");
	for (int i = v >= 0 ? json_first(&d, v) : -1; i >= 0; i = json_next(&d, v, i)) {
		ct->ncap_drop++;
		ct->cap_drop_all |= cap_is(&d, i, "ALL");
	}
	v = json_obj_get(&d, hc, "CapAdd");
	for (int i = v >= 0 ? json_first(&d, v) : -1; i >= 0; i = json_next(&d, v, i)) {
		ct->ncap_add++;
		ct->cap_add_setuid |= cap_is(&d, i, "SETUID");
		ct->cap_add_setgid |= cap_is(&d, i, "SETGID");
	}
	read_security_opt(&d, json_obj_get(&d, hc, "SecurityOpt"), ct);
	get_str(&d, 0, "AppArmorProfile", word, sizeof(word));
	if (strcmp(word, "unconfined") == 0)
		ct->apparmor_unconfined = true;
	else if (word[0])
		ct->apparmor_profile = true;
	get_str(&d, 0, "ProcessLabel", word, sizeof(word));
	if (word[0])
		ct->selinux_label = true;
	ct->privileged = get_bool(&d, hc, "Privileged");
	get_str(&d, hc, "PidMode", word, sizeof(word));
	ct->host_pid = strcmp(word, "host") == 0;
	get_str(&d, hc, "IpcMode", word, sizeof(word));
	ct->host_ipc = strcmp(word, "host") == 0;
	get_str(&d, hc, "UTSMode", word, sizeof(word));
	ct->host_uts = strcmp(word, "host") == 0;
	get_str(&d, hc, "UsernsMode", word, sizeof(word));
	ct->host_userns = strcmp(word, "host") == 0;
	get_str(&d, hc, "NetworkMode", word, sizeof(word));
	ct->host_net = strcmp(word, "host") == 0;
	ct->ndevices = count(&d, hc, "Devices");
	ct->ndevice_rules = count(&d, hc, "DeviceCgroupRules");
	v = json_obj_get(&d, hc, "Tmpfs");
	if (v >= 0 && d.tok[v].type == JSON_OBJECT) {
		char opts[256];

		get_str(&d, v, "/run/agentic", opts, sizeof(opts));
		if (json_obj_get(&d, v, "/run/agentic") >= 0)
			tmpfs_opts(opts, &ct->tmpfs_cfg);
	}
	ct->readonly_rootfs = get_bool(&d, hc, "ReadonlyRootfs");
	v = json_obj_get(&d, hc, "StorageOpt");
	ct->storage_size = v >= 0 && d.tok[v].type == JSON_OBJECT && json_obj_get(&d, v, "size") >= 0;
	ct->pids_limit = get_int(&d, hc, "PidsLimit");
	ct->memory = get_int(&d, hc, "Memory");
	read_mounts(&d, json_obj_get(&d, 0, "Mounts"), ct);
	v = json_obj_get(&d, 0, "NetworkSettings");
	nets = v >= 0 ? json_obj_get(&d, v, "Networks") : -1;
	if (nets >= 0 && d.tok[nets].type == JSON_OBJECT) {
		for (int k = json_first(&d, nets); k >= 0; k = json_next(&d, nets, json_next(&d, nets, k))) {
			uint32_t n = ct->nnets++;

			if (n >= VERIFY_NETS)
				continue;
			if (json_str(&d, k, ct->net_name[n], sizeof(ct->net_name[n])) < 0)
				ct->net_name[n][0] = '\0';
			get_str(&d, json_next(&d, nets, k), "NetworkID", ct->net_id[n],
				sizeof(ct->net_id[n]));
			get_str(&d, json_next(&d, nets, k), "IPAddress", ct->net_ip[n],
				sizeof(ct->net_ip[n]));
		}
	}
	return 0;
}

int verify_net_parse(const char *json, size_t len, struct verify_net *net)
{
	struct json_doc d;
	int v, cfg;

	memset(net, 0, sizeof(*net));
	if (json_parse(&d, json, len, toks, ARRAY_LEN(toks)) != 0 || d.tok[0].type != JSON_OBJECT)
		return ERR_PARSE;
	net->read = true;
	net->internal = get_bool(&d, 0, "Internal");
	net->ipv6 = get_bool(&d, 0, "EnableIPv6");
	v = json_obj_get(&d, 0, "Options");
	if (v >= 0 && d.tok[v].type == JSON_OBJECT) {
		int o = json_obj_get(&d, v, "com.docker.network.bridge.inhibit_ipv4");

		net->inhibit_ipv4 = raw_eq(&d, o, "true");
	}
	v = json_obj_get(&d, 0, "Labels");
	if (v >= 0 && d.tok[v].type == JSON_OBJECT)
		net->default_deny = raw_eq(&d, json_obj_get(&d, v, "agentic-egress-policy"),
					   "default-deny");
	v = json_obj_get(&d, 0, "IPAM");
	cfg = v >= 0 ? json_obj_get(&d, v, "Config") : -1;
	cfg = cfg >= 0 && d.tok[cfg].type == JSON_ARRAY ? json_first(&d, cfg) : -1;
	if (cfg >= 0 && d.tok[cfg].type == JSON_OBJECT) {
		get_str(&d, cfg, "Gateway", net->gateway, sizeof(net->gateway));
		get_str(&d, cfg, "Subnet", net->subnet, sizeof(net->subnet));
	}
	return 0;
}

/* One space-separated field of a mountinfo line into out; returns what follows it. */
static const char *field_next(const char *p, const char *end, char *out, size_t size)
{
	size_t n = 0;

	while (p < end && *p == ' ')
		p++;
	while (p < end && *p != ' ') {
		if (n + 1 < size)
			out[n++] = *p;
		p++;
	}
	out[n] = '\0';
	return p;
}

/* opt (comma-separated words) holds word exactly */
static bool has_word(const char *opts, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = opts; p && *p;) {
		size_t l = strcspn(p, ",");

		if (l == n && strncmp(p, word, n) == 0)
			return true;
		p += l;
		p += *p == ',';
	}
	return false;
}

/* word=NUMBER in opts, in base */
static bool opt_number(const char *opts, const char *key, int base, uint32_t *out)
{
	size_t n = strlen(key);

	for (const char *p = opts; p && *p;) {
		size_t l = strcspn(p, ",");

		if (l > n + 1 && strncmp(p, key, n) == 0 && p[n] == '=') {
			char num[16], *e;
			unsigned long v;

			if (l - n - 1 >= sizeof(num))
				return false;
			memcpy(num, p + n + 1, l - n - 1);
			num[l - n - 1] = '\0';
			v = strtoul(num, &e, base);
			if (*e || e == num || v > UINT32_MAX)
				return false;
			*out = (uint32_t)v;
			return true;
		}
		p += l;
		p += *p == ',';
	}
	return false;
}

void verify_mountinfo_find(const char *text, const char *mount_point, struct verify_tmpfs *t)
{
	memset(t, 0, sizeof(*t));
	for (const char *line = text; line && *line;) {
		const char *end = strchr(line, '\n'), *p;
		char f[VERIFY_PATH_BYTES], opts[256], super[256];
		int i;

		if (!end)
			end = line + strlen(line);
		/* id parent major:minor root mount-point options [optional...] - fstype source super */
		p = line;
		for (i = 0; i < 4; i++)
			p = field_next(p, end, f, sizeof(f));
		p = field_next(p, end, f, sizeof(f));
		if (strcmp(f, mount_point) == 0) {
			/* the last mount at a point is the one in force: keep reading */
			memset(t, 0, sizeof(*t));
			p = field_next(p, end, opts, sizeof(opts));
			do
				p = field_next(p, end, f, sizeof(f));
			while (f[0] && strcmp(f, "-") != 0);
			p = field_next(p, end, t->fstype, sizeof(t->fstype));
			p = field_next(p, end, f, sizeof(f));
			field_next(p, end, super, sizeof(super));
			t->found = true;
			t->noexec = has_word(opts, "noexec");
			t->nosuid = has_word(opts, "nosuid");
			t->nodev = has_word(opts, "nodev");
			t->has_mode = opt_number(super, "mode", 8, &t->mode);
			t->has_uid = opt_number(super, "uid", 10, &t->uid);
			t->has_gid = opt_number(super, "gid", 10, &t->gid);
		}
		line = *end ? end + 1 : end;
	}
}

/* "Key:\tv1\tv2..." numbers of a status line, in base; how many were read */
static int status_numbers(const char *text, const char *key, int base, uint64_t *v, int max)
{
	size_t n = strlen(key);
	int got = 0;

	for (const char *line = text; line && *line;) {
		if (strncmp(line, key, n) == 0 && line[n] == ':') {
			const char *p = line + n + 1;

			while (got < max) {
				char *e;
				unsigned long long x;

				while (*p == ' ' || *p == '\t')
					p++;
				if (*p == '\n' || !*p)
					break;
				x = strtoull(p, &e, base);
				if (e == p)
					break;
				v[got++] = x;
				p = e;
			}
			return got;
		}
		line = strchr(line, '\n');
		line = line ? line + 1 : NULL;
	}
	return -1;
}

int verify_status_parse(const char *text, struct verify_proc *p)
{
	uint64_t v[4], caps[5];
	static const char *const capkeys[5] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	int groups;

	memset(p, 0, sizeof(*p));
	if (status_numbers(text, "Uid", 10, v, 4) != 4)
		return ERR_PARSE;
	for (int i = 0; i < 4; i++)
		p->uid[i] = (uint32_t)v[i];
	if (status_numbers(text, "Gid", 10, v, 4) != 4)
		return ERR_PARSE;
	for (int i = 0; i < 4; i++)
		p->gid[i] = (uint32_t)v[i];
	{
		uint64_t g[64];

		groups = status_numbers(text, "Groups", 10, g, 64);
		if (groups < 0)
			return ERR_PARSE;
		p->ngroups = (uint32_t)groups;
	}
	for (int i = 0; i < 5; i++)
		if (status_numbers(text, capkeys[i], 16, &caps[i], 1) != 1)
			return ERR_PARSE;
	p->cap_inh = caps[0];
	p->cap_prm = caps[1];
	p->cap_eff = caps[2];
	p->cap_bnd = caps[3];
	p->cap_amb = caps[4];
	p->no_new_privs = status_numbers(text, "NoNewPrivs", 10, v, 1) == 1 ? (int)v[0] : -1;
	p->seccomp = status_numbers(text, "Seccomp", 10, v, 1) == 1 ? (int)v[0] : -1;
	p->read = true;
	return 0;
}

int verify_probe_get(const char *out, const char *key, char *val, size_t size)
{
	size_t n = strlen(key);

	for (const char *line = out; line && *line;) {
		const char *end = strchr(line, '\n');
		size_t l = end ? (size_t)(end - line) : strlen(line);

		if (l > n && strncmp(line, key, n) == 0 && line[n] == '=') {
			size_t vl = l - n - 1;

			if (vl >= size)
				vl = size - 1;
			memcpy(val, line + n + 1, vl);
			val[vl] = '\0';
			return 0;
		}
		line = end ? end + 1 : NULL;
	}
	return -ENOENT;
}

/* "a,b,c,d" into v */
static int four(const char *s, uint32_t v[4])
{
	for (int i = 0; i < 4; i++) {
		char *e;
		unsigned long x = strtoul(s, &e, 10);

		if (e == s || x > UINT32_MAX || (i < 3 ? *e != ',' : *e != '\0'))
			return -EINVAL;
		v[i] = (uint32_t)x;
		s = e + 1;
	}
	return 0;
}

static int hex64(const char *s, uint64_t *v)
{
	char *e;

	if (!*s)
		return -EINVAL;
	*v = strtoull(s, &e, 16);
	return *e ? -EINVAL : 0;
}

int verify_probe_status(const char *out, const char *prefix, struct verify_proc *p)
{
	static const char *const keys[] = { "uid", "gid", "groups", "cap_inh", "cap_prm",
					    "cap_eff", "cap_bnd", "cap_amb", "no_new_privs",
					    "seccomp" };
	char key[48], val[64];
	uint64_t *caps[5] = { &p->cap_inh, &p->cap_prm, &p->cap_eff, &p->cap_bnd, &p->cap_amb };

	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < ARRAY_LEN(keys); i++) {
		snprintf(key, sizeof(key), "%s%s", prefix, keys[i]);
		if (verify_probe_get(out, key, val, sizeof(val)) != 0)
			return -ENOENT;
		if (i == 0 && four(val, p->uid) != 0)
			return -ENOENT;
		if (i == 1 && four(val, p->gid) != 0)
			return -ENOENT;
		if (i == 2)
			p->ngroups = (uint32_t)strtoul(val, NULL, 10);
		if (i >= 3 && i <= 7 && hex64(val, caps[i - 3]) != 0)
			return -ENOENT;
		if (i == 8)
			p->no_new_privs = atoi(val);
		if (i == 9)
			p->seccomp = atoi(val);
	}
	p->read = true;
	return 0;
}

/* ---- verdicts ---- */

#define CONTROL_CAPS ((uint64_t)0xc0) /* CAP_SETGID, CAP_SETUID */

static void set(struct verify_result *r, unsigned i, enum verify_status s, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void set(struct verify_result *r, unsigned i, enum verify_status s, const char *fmt, ...)
{
	va_list ap;

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

static void eval_inside(const struct verify_facts *f, struct verify_result *r)
{
	static const unsigned inside[] = { 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 33, 34, 35, 42 };
	struct verify_proc self, pid1;
	char why[VERIFY_REASON_BYTES], w[32];

	if (!f->is_sandbox || !f->probe) {
		for (size_t i = 0; i < ARRAY_LEN(inside); i++)
			if (!f->is_sandbox)
				inapplicable(r, AGV(inside[i]), "not an agentic sandbox: needs its init");
			else
				set(r, AGV(inside[i]), VERIFY_FAIL, "the probe did not run: %s",
				    f->probe_error ? f->probe_error : "no answer");
		return;
	}
	if (verify_probe_status(f->probe, "self.", &self) != 0) {
		for (int i = 12; i <= 15; i++)
			set(r, AGV(i), VERIFY_FAIL, "the probe did not report its own status");
	} else {
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
	{
		static const char *const tools[] = { "curl", "wget", "grpcurl", "python" };
		char words[4][16];

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

/* check i applies to the target but could not run; AGV-044, which rests on the others, is
 * not counted with them when they leave it unproven */
static bool not_run(const struct verify_result *r, unsigned i)
{
	return i != AGV(44) && r->check[i].status == VERIFY_SKIP && !r->check[i].inapplicable;
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
		if (not_run(r, i) && unrun++ < VERIFY_NOT_RUN_NAMED && len < sizeof(ids))
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
		r->not_run += not_run(r, i);
	}
}

const char *verify_result_word(const struct verify_result *r)
{
	return r->failed ? "fail" : r->not_run ? "incomplete" : "pass";
}

/* ---- the result object ---- */

void verify_result_json(struct json_writer *w, const struct verify_result *r,
			const struct verify_meta *m)
{
	json_obj_begin(w);
	json_key(w, "agentic_version");
	json_str_write(w, AGENTIC_VERSION);
	json_key(w, "target");
	json_str_write(w, m->is_sandbox ? "sandbox" : "container");
	json_key(w, "container_id");
	json_str_write(w, m->container_id ? m->container_id : "");
	json_key(w, "sandbox");
	if (m->sb) {
		json_obj_begin(w);
		json_key(w, "name");
		json_str_write(w, m->sb->name);
		json_key(w, "instance_id");
		json_str_write(w, m->sb->instance_id);
		json_key(w, "run");
		if (m->run)
			json_str_write(w, m->run);
		else
			json_null_write(w);
		json_key(w, "posture");
		posture_json(w, &m->sb->posture);
		json_obj_end(w);
	} else {
		json_null_write(w);
	}
	sandbox_time_write(w, "started_at", m->started_ms);
	json_key(w, "duration_ms");
	json_int_write(w, m->duration_ms);
	json_key(w, "result");
	json_str_write(w, verify_result_word(r));
	json_key(w, "summary");
	json_obj_begin(w);
	json_key(w, "passed");
	json_int_write(w, r->passed);
	json_key(w, "failed");
	json_int_write(w, r->failed);
	json_key(w, "info");
	json_int_write(w, r->info);
	json_key(w, "skipped");
	json_int_write(w, r->skipped);
	json_key(w, "not_run");
	json_int_write(w, r->not_run);
	json_obj_end(w);
	json_key(w, "not_run");
	json_arr_begin(w);
	for (unsigned i = 0; i < VERIFY_CHECKS; i++)
		if (not_run(r, i))
			json_str_write(w, verify_check_id(i));
	json_arr_end(w);
	json_key(w, "checks");
	json_arr_begin(w);
	for (unsigned i = 0; i < VERIFY_CHECKS; i++) {
		json_obj_begin(w);
		json_key(w, "id");
		json_str_write(w, verify_check_id(i));
		json_key(w, "status");
		json_str_write(w, verify_status_name(r->check[i].status));
		json_key(w, "title");
		json_str_write(w, titles[i]);
		json_key(w, "reason");
		json_str_write(w, r->check[i].reason);
		json_obj_end(w);
	}
	json_arr_end(w);
	json_obj_end(w);
}

/* ---- a verification on the loop ---- */

#define VERIFY_RUNS LIMIT_VERIFY_RUNS
#define VERIFY_DEADLINE_MS LIMIT_VERIFY_MS
#define VERIFY_WALK_MAX LIMIT_VERIFY_WALK_ENTRIES
#define VERIFY_PROBE_ARGS 40

enum step { ST_FREE = 0, ST_INSPECT, ST_NETS, ST_PROBE };

struct vrun {
	enum step step;
	struct sandbox *sb;           /* NULL: a container */
	uint32_t sb_gen;
	char target[160];
	bool require_dedicated;
	struct verify_client client;
	int64_t started_ms, t0, deadline;
	struct engine_job job;
	uint32_t net_next;
	bool finish_due;              /* finished outside a callback of the caller's: at tick */
	int err_status;
	const char *err_code, *err_msg;
	struct verify_facts facts;
	struct exec_collect probe;
	int32_t exec;                 /* the probe's session while it runs, else -1 */
	int listen_fd;
	char workspace[LIMIT_PATH_BYTES + 16]; /* facts.workspace */
	char addr[VERIFY_TARGETS][32];
	const char *argv[VERIFY_PROBE_ARGS];
	struct verify_result result;
	char json[VERIFY_JSON_BYTES];
};

static struct {
	struct verify_config c;
	struct engine eng;
	struct engine_job *jobs[VERIFY_RUNS];
	struct vrun run[VERIFY_RUNS];
	char docker_socket[CONFIG_STR_BYTES];
	char docker_socket_real[LIMIT_PATH_BYTES];
	bool apparmor, selinux;
	char text[65536];             /* a /proc file being read */
} V;

static void lsm_read(void)
{
	char buf[256] = "";
	int fd = open("/sys/kernel/security/lsm", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

	if (fd >= 0)
		close(fd);
	if (n > 0) {
		buf[n] = '\0';
		V.apparmor = strstr(buf, "apparmor") != NULL;
		V.selinux = strstr(buf, "selinux") != NULL;
		return;
	}
	V.apparmor = access("/sys/module/apparmor/parameters/enabled", R_OK) == 0;
	V.selinux = access("/sys/fs/selinux/enforce", F_OK) == 0;
}

static int job_begin(struct engine_job *j);
static void job_done(struct engine_job *j, int r);

void verify_init(const struct verify_config *vc)
{
	const char *h = vc->cfg->docker_host;

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
	snprintf(V.docker_socket, sizeof(V.docker_socket), "%s",
		 strncmp(h, "unix://", 7) == 0 ? h + 7 : h);
	if (!realpath(V.docker_socket, V.docker_socket_real))
		V.docker_socket_real[0] = '\0';
	lsm_read();
}

size_t verify_table_bytes(void)
{
	return sizeof(V) + sizeof(toks);
}

static bool sb_alive(const struct vrun *v)
{
	return v->sb && v->sb->state != SB_FREE && v->sb->gen == v->sb_gen;
}

/* A small file into V.text (NUL-terminated, cut at its size); 0 or -errno. */
static int file_read(const char *path)
{
	size_t len = 0;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	V.text[0] = '\0';
	if (fd < 0)
		return -errno;
	while (len < sizeof(V.text) - 1 && (n = read(fd, V.text + len, sizeof(V.text) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	V.text[len] = '\0';
	return 0;
}

static int proc_read(int64_t pid, const char *name)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%lld/%s", (long long)pid, name);
	return file_read(path);
}

/* Modes under runs/: directories 0700, files 0600, all root's; symlinks are not followed.
 * Takes dirfd. */
static void walk(struct verify_facts *f, int dirfd, int depth)
{
	char buf[4096];
	long n;

	while (f->runs_checked < VERIFY_WALK_MAX &&
	       (n = syscall(SYS_getdents64, dirfd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < n;) {
			struct dirent64_raw *de = (void *)(buf + off);
			struct stat st;
			bool dir;

			off += de->reclen;
			if (strcmp(de->name, ".") == 0 || strcmp(de->name, "..") == 0)
				continue;
			if (fstatat(dirfd, de->name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
			    S_ISLNK(st.st_mode))
				continue;
			dir = S_ISDIR(st.st_mode);
			f->runs_checked++;
			if (((st.st_mode & 07777) != (dir ? 0700u : 0600u) || st.st_uid != 0) &&
			    !f->runs_bad++)
				snprintf(f->runs_why, sizeof(f->runs_why), "a %s of mode %o owned by %u",
					 dir ? "directory" : "file", (unsigned)(st.st_mode & 07777),
					 (unsigned)st.st_uid);
			if (dir && depth < 4) {
				int fd = openat(dirfd, de->name,
						O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

				if (fd >= 0)
					walk(f, fd, depth + 1);
			}
		}
	}
	close(dirfd);
}

static void sandbox_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	const struct sandbox *sb = v->sb;
	char dir[LIMIT_PATH_BYTES], path[LIMIT_PATH_BYTES + 16];
	struct stat st;
	int fd;

	f->is_sandbox = true;
	for (uint32_t i = 0; i < f->ct.nnets && i < VERIFY_NETS; i++)
		if (strcmp(f->ct.net_name[i], sb->network) == 0)
			f->net_index = i;
	f->disk_bytes = sb->disk_bytes;
	f->writable_root = sb->writable_root;
	f->workspace_img_bytes = -1;
	if (host_instance_dir(V.c.cfg, sb->instance_id, dir, sizeof(dir)) == 0) {
		snprintf(v->workspace, sizeof(v->workspace), "%s/workspace", dir);
		f->workspace = v->workspace;
		snprintf(path, sizeof(path), "%s/workspace.img", dir);
		if (stat(path, &st) == 0)
			f->workspace_img_bytes = st.st_size;
		snprintf(path, sizeof(path), "%s/runs", dir);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd >= 0)
			walk(f, fd, 0);
	}
	f->t1 = posture_is_t1(&sb->posture);
	if (posture_text(&sb->posture, f->posture_text, sizeof(f->posture_text)) != 0)
		snprintf(f->posture_text, sizeof(f->posture_text), "%s", posture_tier(&sb->posture));
}

/* /run/agentic's inode, reached from the init's root one component at a time with no
 * symlink followed (an absolute link in a container's image would resolve on the host's /,
 * and its mode and owner would be a host path's). */
static void tmpfs_dir_read(struct verify_facts *f, int64_t pid)
{
	static const char *const parts[] = { "run", "agentic" };
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/root", (long long)pid);
	fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; fd >= 0 && i < ARRAY_LEN(parts); i++) {
		int next = openat(fd, parts[i], O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

		close(fd);
		fd = next;
	}
	if (fd >= 0 && fstat(fd, &st) == 0) {
		f->tmpfs_dir_read = true;
		f->tmpfs_dir_mode = st.st_mode & 07777;
		f->tmpfs_dir_uid = st.st_uid;
		f->tmpfs_dir_gid = st.st_gid;
	}
	if (fd >= 0)
		close(fd);
}

/* What the host and agenticd say, read at once (small local reads). */
static void host_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	const struct config *cfg = V.c.cfg;
	struct stat a, b;
	int64_t pid = f->ct.pid;

	f->uid_min = cfg->control_uid_min;
	f->uid_max = cfg->control_uid_max;
	f->workload_uid = cfg->workload_uid;
	f->workload_gid = cfg->workload_gid;
	f->agent_socket_dir = cfg->agent_socket_dir;
	f->docker_socket = V.docker_socket;
	f->docker_socket_real = V.docker_socket_real[0] ? V.docker_socket_real : NULL;
	f->agentshare_root = cfg->agentshare_root;
	f->self_exe = V.c.self_exe;
	f->lsm_apparmor = V.apparmor;
	f->lsm_selinux = V.selinux;
	f->require_dedicated = v->require_dedicated;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *o = sandbox_slot(i);

		if (o->state != SB_FREE && o != v->sb && o->uid_taken && o->uid == f->ct.control_uid)
			f->uid_taken_by_other = true;
	}
	for (uint32_t i = 0; i < f->ct.nnets && i < VERIFY_NETS; i++)
		if (f->ct.managed_network[0] && strcmp(f->ct.net_name[i], f->ct.managed_network) == 0)
			f->net_index = i;
	/* a sandbox's init is the process agenticd pinned, if it is still that one */
	if (v->sb && v->sb->init_pidfd >= 0 && sandbox_pidfd_pid(v->sb->init_pidfd) == v->sb->pid)
		pid = v->sb->pid;
	if (pid > 0 && proc_read(pid, "status") == 0)
		verify_status_parse(V.text, &f->init_host);
	if (v->sb && v->sb->agent_self[0])
		verify_status_parse(v->sb->agent_self, &f->init_self);
	if (pid > 0 && proc_read(pid, "mountinfo") == 0)
		verify_mountinfo_find(V.text, "/run/agentic", &f->tmpfs);
	if (pid > 0)
		tmpfs_dir_read(f, pid);
	if (stat(cfg->agentshare_root, &a) == 0 && stat("/", &b) == 0) {
		f->share_dev_known = true;
		f->share_same_dev = a.st_dev == b.st_dev;
	}
	if (v->sb)
		sandbox_facts(v);
}

/* Whether pid's namespace of kind ns is other than agenticd's; 0, or -1 unreadable. */
static int ns_other(int64_t pid, const char *ns, bool *other)
{
	char path[64], self[32];
	struct stat a, b;

	snprintf(path, sizeof(path), "/proc/%lld/ns/%s", (long long)pid, ns);
	snprintf(self, sizeof(self), "/proc/self/ns/%s", ns);
	if (stat(path, &a) != 0 || stat(self, &b) != 0)
		return -1;
	*other = a.st_ino != b.st_ino || a.st_dev != b.st_dev;
	return 0;
}

/* /proc/net/dev's interfaces but lo (two header lines, then "NAME: counters") */
static int ifaces_count(const char *text)
{
	int n = 0, at = 0;

	for (const char *line = text; line && *line; at++) {
		const char *end = strchr(line, '\n'), *name = line + strspn(line, " ");

		if (at >= 2 && memchr(line, ':', end ? (size_t)(end - line) : strlen(line)) &&
		    strncmp(name, "lo:", 3) != 0)
			n++;
		line = end ? end + 1 : NULL;
	}
	return n;
}

/* QEMU's command line holds `-sandbox RUNTIME_VM_SANDBOX` (NUL-separated arguments). */
static bool qemu_sandbox_on(int64_t pid)
{
	char path[64];
	bool prev = false, on = false;
	size_t len = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%lld/cmdline", (long long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	while (len < sizeof(V.text) - 1 && (n = read(fd, V.text + len, sizeof(V.text) - 1 - len)) > 0)
		len += (size_t)n;
	close(fd);
	V.text[len] = '\0';
	for (size_t at = 0; at < len; at += strlen(V.text + at) + 1) {
		on |= prev && strcmp(V.text + at, RUNTIME_VM_SANDBOX) == 0;
		prev = strcmp(V.text + at, "-sandbox") == 0;
	}
	return on;
}

/* A VM's host side: its QEMU (uid, namespaces, seccomp, command line) and its directory. */
static void vm_facts(struct vrun *v)
{
	struct verify_facts *f = &v->facts;
	struct verify_vm *vm = &f->vm;
	struct runtime_vm_qemu q;
	struct stat st, root;
	char path[64];

	f->is_vm = true;
	f->ct.has_uid_label = true;
	f->ct.control_uid = v->sb->uid;
	snprintf(f->ct.id, sizeof(f->ct.id), "%s", v->sb->container_id);
	vm->ifaces = -1;
	if (!V.c.vm || runtime_vm_qemu_read(V.c.vm, v->sb, &q) != 0)
		return;
	vm->uid = q.uid;
	vm->uid_other = q.uid_other;
	vm->uid_subordinate = q.uid_subordinate;
	vm->kvm = q.kvm;
	if (lstat(q.dir, &st) == 0 && S_ISDIR(st.st_mode)) {
		vm->dir_read = true;
		vm->dir_mode = st.st_mode & 07777;
		vm->dir_uid = st.st_uid;
		vm->dir_gid = st.st_gid;
	}
	if (!q.pid)
		return;
	vm->running = true;
	if (proc_read(q.pid, "status") == 0)
		verify_status_parse(V.text, &vm->qemu);
	snprintf(path, sizeof(path), "/proc/%d/root", (int)q.pid);
	vm->ns_read = ns_other(q.pid, "net", &vm->own_net) == 0 &&
		      ns_other(q.pid, "ipc", &vm->own_ipc) == 0 &&
		      ns_other(q.pid, "mnt", &vm->own_mnt) == 0 && stat(path, &st) == 0 &&
		      stat("/", &root) == 0;
	vm->own_root = vm->ns_read && (st.st_dev != root.st_dev || st.st_ino != root.st_ino);
	if (proc_read(q.pid, "net/dev") == 0)
		vm->ifaces = ifaces_count(V.text);
	vm->sandbox_on = qemu_sandbox_on(q.pid);
}

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
	char *line, *save = NULL;

	if (file_read("/proc/net/route") != 0)
		return -1;
	for (line = strtok_r(V.text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
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
	struct verify_facts *f = &v->facts;
	struct exec_req req = { 0 };
	struct exec_sink sink;
	uint16_t port = 0;
	uint32_t n = 0;
	int x, k = 0;

	for (size_t i = 0; !f->is_vm && i < ARRAY_LEN(fixed); i++)
		v->argv[n++] = fixed[i];
	for (size_t i = 0; f->is_vm && i < ARRAY_LEN(probe_vm); i++)
		v->argv[n++] = probe_vm[i];
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
	host_facts(v);
	if (v->sb)
		probe_begin(v);
	else
		v->finish_due = true;
}

static int job_begin(struct engine_job *j)
{
	struct vrun *v = j->ctx;

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

			if (sb && sb->state == SB_READY && sb->agent_ready) {
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

	if (sb && (sb->state != SB_READY || !sb->agent_ready || !sb->container_id[0])) {
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
		vm_facts(v);
		host_facts(v);
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
