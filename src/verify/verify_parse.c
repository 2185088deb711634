/* verify_parse.c: the verifier's readers of what was gathered (verify.h): the engine's inspect
 * answers, a mountinfo, a /proc status and the probe's key=value output, into facts. Pure:
 * no I/O; unit-tested and fuzzed. Config.Env is never looked at. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"
#include "verify/verify.h"
#include "verify/verify_run.h"

static struct json_token toks[VERIFY_PARSE_TOKENS];

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

static void tmpfs_read(struct verify_tmpfs *t, const char *flags, const char *numbers);

/* The engine's tmpfs options ("rw,noexec,...,mode=0700,uid=N,gid=N,size=64k"). */
static void tmpfs_opts(const char *opts, struct verify_tmpfs *t)
{
	memset(t, 0, sizeof(*t));
	t->found = true;
	snprintf(t->fstype, sizeof(t->fstype), "tmpfs");
	tmpfs_read(t, opts, opts);
}

/* Config.Labels: the control uid, the instance and the managed network agentic set */
static void ct_labels(const struct json_doc *d, int labels, struct verify_ct *ct)
{
	char word[128];
	uint64_t uid;

	get_str(d, labels, "agentic-control-uid", word, sizeof(word));
	if (word[0] && parse_u64(word, UINT32_MAX, &uid) == 0) {
		ct->has_uid_label = true;
		ct->control_uid = (uint32_t)uid;
	}
	get_str(d, labels, "agentic-instance-id", ct->instance_id, sizeof(ct->instance_id));
	get_str(d, labels, "agentic-managed-network", ct->managed_network,
		sizeof(ct->managed_network));
}

/* HostConfig.CapDrop and CapAdd */
static void ct_caps(const struct json_doc *d, int hc, struct verify_ct *ct)
{
	int v = json_obj_get(d, hc, "CapDrop");

	for (int i = v >= 0 ? json_first(d, v) : -1; i >= 0; i = json_next(d, v, i)) {
		ct->ncap_drop++;
		ct->cap_drop_all |= cap_is(d, i, "ALL");
	}
	v = json_obj_get(d, hc, "CapAdd");
	for (int i = v >= 0 ? json_first(d, v) : -1; i >= 0; i = json_next(d, v, i)) {
		ct->ncap_add++;
		ct->cap_add_setuid |= cap_is(d, i, "SETUID");
		ct->cap_add_setgid |= cap_is(d, i, "SETGID");
	}
}

/* NetworkSettings.Networks: each network's name, id and the container's address on it */
static void ct_nets(const struct json_doc *d, struct verify_ct *ct)
{
	int v = json_obj_get(d, 0, "NetworkSettings");
	int nets = v >= 0 ? json_obj_get(d, v, "Networks") : -1;

	if (nets < 0 || d->tok[nets].type != JSON_OBJECT)
		return;
	for (int k = json_first(d, nets); k >= 0; k = json_next(d, nets, json_next(d, nets, k))) {
		uint32_t n = ct->nnets++;

		if (n >= VERIFY_NETS)
			continue;
		if (json_str(d, k, ct->net_name[n], sizeof(ct->net_name[n])) < 0)
			ct->net_name[n][0] = '\0';
		get_str(d, json_next(d, nets, k), "NetworkID", ct->net_id[n], sizeof(ct->net_id[n]));
		get_str(d, json_next(d, nets, k), "IPAddress", ct->net_ip[n], sizeof(ct->net_ip[n]));
	}
}

int verify_ct_parse(const char *json, size_t len, struct verify_ct *ct)
{
	struct json_doc d;
	int st, hc, labels, v;
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
	if (labels >= 0 && d.tok[labels].type == JSON_OBJECT)
		ct_labels(&d, labels, ct);
	ct_caps(&d, hc, ct);
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
	ct_nets(&d, ct);
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

/* A tmpfs's flags (noexec ...) and numbers (mode=, uid=, gid=): one list of the engine's
 * options, or a mountinfo's mount options and super options. */
static void tmpfs_read(struct verify_tmpfs *t, const char *flags, const char *numbers)
{
	t->found = true;
	t->noexec = has_word(flags, "noexec");
	t->nosuid = has_word(flags, "nosuid");
	t->nodev = has_word(flags, "nodev");
	t->has_mode = opt_number(numbers, "mode", 8, &t->mode);
	t->has_uid = opt_number(numbers, "uid", 10, &t->uid);
	t->has_gid = opt_number(numbers, "gid", 10, &t->gid);
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
			tmpfs_read(t, opts, super);
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
