/* config.c: defaults, `key = value` parsing with line-numbered errors, env overrides, checks. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "config/config.h"

enum key_type { K_STR, K_STR_OR_EMPTY, K_PATH, K_PATH_OR_EMPTY, K_U32, K_BYTES, K_CIDR, K_MOUNTS, K_LEVEL,
		K_TIER, K_LISTEN };

struct key {
	const char *name;
	enum key_type type;
	size_t offset;
	uint64_t min, max;
};

#define F(field) offsetof(struct config, field)

static const struct key keys[] = {
	{ "docker_host", K_STR, F(docker_host), 0, 0 },
	{ "agent_socket_dir", K_PATH, F(agent_socket_dir), 0, 0 },
	{ "admin_socket", K_PATH, F(admin_socket), 0, 0 },
	{ "admin_group", K_STR, F(admin_group), 0, 0 },
	{ "agentshare_root", K_PATH, F(agentshare_root), 0, 0 },
	{ "profiles_dir", K_PATH, F(profiles_dir), 0, 0 },
	{ "state_dir", K_PATH, F(state_dir), 0, 0 },
	{ "default_image", K_STR, F(default_image), 0, 0 },
	{ "control_uid_min", K_U32, F(control_uid_min), 1, 0x7fffffff },
	{ "control_uid_max", K_U32, F(control_uid_max), 1, 0x7fffffff },
	{ "workload_uid", K_U32, F(workload_uid), 1, 0x7fffffff },
	{ "workload_gid", K_U32, F(workload_gid), 1, 0x7fffffff },
	{ "sandbox_subnet_pool", K_CIDR, 0, 0, 0 },
	{ "max_sandboxes", K_U32, F(max_sandboxes), 1, 2048 }, /* past it a table outgrows one allocation */
	{ "warm_sandboxes", K_U32, F(warm_sandboxes), 0, LIMIT_WARM_SANDBOXES },
	{ "max_admin_connections", K_U32, F(max_admin_connections), 1, 1024 },
	{ "max_message_bytes", K_BYTES, F(max_message_bytes), 1024, 64u << 20 },
	{ "max_streams_per_connection", K_U32, F(max_streams_per_connection), 1, 1024 },
	{ "exec_spill_max_bytes", K_BYTES, F(exec_spill_max_bytes), 1u << 20, 1ull << 40 },
	{ "ready_timeout_ms", K_U32, F(ready_timeout_ms), 100, 600000 },
	{ "stop_grace_ms", K_U32, F(stop_grace_ms), 0, 600000 },
	{ "default_memory_bytes", K_BYTES, F(default_memory_bytes), 6u << 20, 1ull << 40 },
	{ "default_pids_limit", K_U32, F(default_pids_limit), 8, 1u << 22 },
	{ "default_nano_cpus", K_BYTES, F(default_nano_cpus), 10000000, 1024ull * 1000000000 },
	{ "default_disk_bytes", K_BYTES, F(default_disk_bytes), LIMIT_DISK_MIN_BYTES,
	  LIMIT_DISK_MAX_BYTES },
	{ "transcript_budget_bytes", K_BYTES, F(transcript_budget_bytes), LIMIT_TRANSCRIPT_MIN_BYTES,
	  LIMIT_TRANSCRIPT_MAX_BYTES },
	{ "mount_allowlist", K_MOUNTS, 0, 0, 0 },
	{ "seccomp_profile", K_PATH_OR_EMPTY, F(seccomp_profile), 0, 0 },
	{ "log_level", K_LEVEL, F(log_level), 0, 0 },
	{ "min_tier", K_TIER, F(min_tier_t1), 0, 0 },
	{ "egress_max_connections", K_U32, F(egress_max_connections), 1, 1024 },
	{ "egress_per_sandbox", K_U32, F(egress_per_sandbox), 1, 64 },
	{ "egress_uid", K_U32, F(egress_uid), 1, 0x7fffffff },
	{ "egress_ca_file", K_PATH, F(egress_ca_file), 0, 0 },
	{ "secret_dir", K_PATH, F(secret_dir), 0, 0 },
	{ "egress_io_timeout_ms", K_U32, F(egress_io_timeout_ms), 1000, 3600000 },
	{ "egress_direct", K_U32, F(egress_direct), 0, 1 },
	{ "egress_audit_max_bytes", K_BYTES, F(egress_audit_max_bytes), 64u << 10, 1ull << 40 },
	{ "e2b_egress_policy", K_PATH_OR_EMPTY, F(e2b_egress_policy), 0, 0 },
	{ "vm_kernel_dir", K_PATH_OR_EMPTY, F(vm_kernel_dir), 0, 0 },
	{ "vm_accel", K_STR, F(vm_accel), 0, 0 },
	{ "vm_uid_offset", K_U32, F(vm_uid_offset), 1, 0x7fffffff },
	{ "vm_ready_timeout_ms", K_U32, F(vm_ready_timeout_ms), 1000, 600000 },
	{ "vm_credentials_dir", K_PATH, F(vm_credentials_dir), 0, 0 },
	{ "e2b_listen", K_LISTEN, F(e2b_listen), 0, 0 },
	{ "e2b_max_connections", K_U32, F(e2b_max_connections), 1, LIMIT_E2B_CONNECTIONS },
	{ "e2b_base_image", K_STR, F(e2b_base_image), 0, 0 },
	{ "fleet_endpoints", K_STR_OR_EMPTY, F(fleet_endpoints), 0, 0 },
	{ "fleet_node", K_STR_OR_EMPTY, F(fleet_node), 0, 0 },
	{ "fleet_ca_file", K_PATH_OR_EMPTY, F(fleet_ca_file), 0, 0 },
	{ "fleet_cert_file", K_PATH_OR_EMPTY, F(fleet_cert_file), 0, 0 },
	{ "fleet_key_file", K_PATH_OR_EMPTY, F(fleet_key_file), 0, 0 },
	{ "fleet_etcd_name", K_STR, F(fleet_etcd_name), 0, 0 },
	{ "fleet_advertise", K_STR_OR_EMPTY, F(fleet_advertise), 0, 0 },
	{ "fleet_listen", K_STR_OR_EMPTY, F(fleet_listen), 0, 0 },
	{ "fleet_lease_s", K_U32, F(fleet_lease_s), 2, 600 },
	{ "fleet_uid", K_U32, F(fleet_uid), 1, 0x7fffffff },
};

const char *config_key_name(size_t i)
{
	return i < ARRAY_LEN(keys) ? keys[i].name : NULL;
}

static void set_str(char *dst, const char *src)
{
	snprintf(dst, CONFIG_STR_BYTES, "%s", src);
}

void config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	set_str(cfg->docker_host, "unix:///var/run/docker.sock");
	set_str(cfg->agent_socket_dir, "/run/agentic/agent");
	set_str(cfg->admin_socket, "/run/agentic/admin.sock");
	set_str(cfg->admin_group, "agentic");
	set_str(cfg->agentshare_root, "/srv/agentshare");
	set_str(cfg->profiles_dir, "/etc/agentic/profiles");
	set_str(cfg->state_dir, "/var/lib/agentic");
	set_str(cfg->default_image, "agentic/base:local");
	cfg->control_uid_min = 200000;
	cfg->control_uid_max = 799999;
	cfg->workload_uid = 10001;
	cfg->workload_gid = 10001;
	cfg->subnet_pool_base = (10u << 24) | (213u << 16);
	cfg->subnet_pool_prefix = 16;
	cfg->max_sandboxes = 256;
	cfg->max_admin_connections = 64;
	cfg->max_message_bytes = 4u << 20;
	cfg->max_streams_per_connection = 128;
	cfg->exec_spill_max_bytes = 1u << 30;
	cfg->ready_timeout_ms = 10000;
	cfg->stop_grace_ms = 10000;
	cfg->default_memory_bytes = 1u << 30;
	cfg->default_pids_limit = 512;
	cfg->default_nano_cpus = 1000000000;
	cfg->default_disk_bytes = 1u << 30;
	cfg->transcript_budget_bytes = 64u << 20;
	cfg->log_level = LOG_INFO;
	cfg->egress_max_connections = 32;
	cfg->egress_per_sandbox = 8;
	cfg->egress_direct = 1;
	cfg->egress_uid = 199999;
	set_str(cfg->egress_ca_file, "/etc/ssl/certs/ca-certificates.crt");
	set_str(cfg->secret_dir, "/etc/agentic/secrets");
	cfg->egress_io_timeout_ms = 300000;
	cfg->egress_audit_max_bytes = 64u << 20;
	/* vm_kernel_dir "": found beside the binary at start (agenticd.c) */
	set_str(cfg->vm_accel, "auto");
	cfg->vm_uid_offset = 800000;
	cfg->vm_ready_timeout_ms = 120000;
	set_str(cfg->vm_credentials_dir, "/etc/agentic/credentials");
	/* e2b_listen "": the E2B listener is off */
	cfg->e2b_max_connections = 128;
	set_str(cfg->e2b_base_image, "agentic/e2b:local");
	/* fleet_endpoints "": no fleet */
	set_str(cfg->fleet_etcd_name, "etcd");
	cfg->fleet_lease_s = 10;
	cfg->fleet_uid = 198000; /* below every egress workers' range (at most 1024 under egress_uid) */
}

/* "HOST:PORT": an IPv4 literal, or an IPv6 one in brackets, and a port from 1 to 65535. */
int config_listen_addr(const char *s, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	unsigned long port;
	char *end;
	size_t hl;

	memset(ss, 0, sizeof(*ss));
	if (!colon || colon == s)
		return -EINVAL;
	port = strtoul(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 1 || port > 65535)
		return -EINVAL;
	hl = (size_t)(colon - s);
	if (s[0] == '[' && hl > 2 && s[hl - 1] == ']' && hl - 2 < sizeof(host)) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;

		snprintf(host, sizeof(host), "%.*s", (int)(hl - 2), s + 1);
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*len = sizeof(*a);
		return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? 0 : -EINVAL;
	}
	if (hl >= sizeof(host))
		return -EINVAL;
	snprintf(host, sizeof(host), "%.*s", (int)hl, s);
	((struct sockaddr_in *)ss)->sin_family = AF_INET;
	((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	*len = sizeof(struct sockaddr_in);
	return inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) == 1 ? 0 : -EINVAL;
}

/* Decimal with an optional binary suffix (k, m, g, t; "KiB" spellings accepted). */
static int parse_size(const char *s, uint64_t *out)
{
	char digits[32];
	size_t n = strspn(s, "0123456789");
	uint64_t v, mul = 1;
	const char *suffix = s + n;

	if (n == 0 || n >= sizeof(digits))
		return -EINVAL;
	memcpy(digits, s, n);
	digits[n] = '\0';
	if (*suffix) {
		switch (*suffix | 0x20) {
		case 'k': mul = 1ull << 10; break;
		case 'm': mul = 1ull << 20; break;
		case 'g': mul = 1ull << 30; break;
		case 't': mul = 1ull << 40; break;
		default: return -EINVAL;
		}
		suffix++;
		if (strcmp(suffix, "") != 0 && strcmp(suffix, "iB") != 0 && strcmp(suffix, "ib") != 0)
			return -EINVAL;
	}
	if (parse_u64(digits, UINT64_MAX / mul, &v) != 0)
		return -ERANGE;
	*out = v * mul;
	return 0;
}

static int parse_cidr(const char *s, uint32_t *base, uint32_t *prefix)
{
	unsigned a, b, c, d, p;
	char tail;
	uint32_t addr, mask;

	if (sscanf(s, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &p, &tail) != 5)
		return -EINVAL;
	if (a > 255 || b > 255 || c > 255 || d > 255 || p < 8 || p > 28)
		return -EINVAL;
	addr = (a << 24) | (b << 16) | (c << 8) | d;
	mask = 0xffffffffu << (32 - p);
	if (addr & ~mask)
		return -EINVAL; /* host bits set: the operator probably meant another network */
	*base = addr;
	*prefix = p;
	return 0;
}

/* mount_allowlist: a comma-separated list of absolute host roots; an empty value clears it. */
static int set_mounts(struct config *cfg, const char *val, char *why, size_t why_size)
{
	cfg->n_mount_allowlist = 0;
	while (*val) {
		size_t n = strcspn(val, ",");
		char *dst;

		if (cfg->n_mount_allowlist == CONFIG_MAX_ALLOWED_MOUNTS || n == 0 ||
		    n >= CONFIG_STR_BYTES || val[0] != '/') {
			snprintf(why, why_size, "mount_allowlist takes up to %d absolute paths, "
				 "separated by commas", CONFIG_MAX_ALLOWED_MOUNTS);
			return ERR_PARSE;
		}
		dst = cfg->mount_allowlist[cfg->n_mount_allowlist++];
		memcpy(dst, val, n);
		/* "/srv/data/" and "/srv/data" mean the same root */
		for (size_t end = n; end > 1 && dst[end - 1] == '/'; end--)
			dst[end - 1] = '\0';
		dst[n] = '\0';
		val += n + (val[n] == ',');
		while (*val == ' ')
			val++;
	}
	return 0;
}

static int set_key(struct config *cfg, const struct key *k, const char *val, char *why,
		   size_t why_size)
{
	uint8_t *field = (uint8_t *)cfg + k->offset;
	uint64_t v;

	switch (k->type) {
	case K_LISTEN: {
		struct sockaddr_storage ss;
		socklen_t len;

		if (*val && (strlen(val) >= CONFIG_STR_BYTES ||
			     config_listen_addr(val, &ss, &len) != 0)) {
			snprintf(why, why_size, "%s is HOST:PORT with an IPv4 address or a bracketed "
				 "IPv6 one ([::1]:PORT), or empty (off)", k->name);
			return ERR_PARSE;
		}
		set_str((char *)field, val);
		return 0;
	}
	case K_PATH_OR_EMPTY:
		if (!*val) {
			*(char *)field = '\0';
			return 0;
		}
		/* fall through */
	case K_PATH:
		if (val[0] != '/') {
			snprintf(why, why_size, "%s must be an absolute path", k->name);
			return ERR_PARSE;
		}
		/* fall through */
	case K_STR:
	case K_STR_OR_EMPTY:
		if ((!*val && k->type == K_STR) || strlen(val) >= CONFIG_STR_BYTES) {
			snprintf(why, why_size, "%s must be %s %d characters", k->name,
				 k->type == K_STR ? "1 to" : "at most", CONFIG_STR_BYTES - 1);
			return ERR_PARSE;
		}
		set_str((char *)field, val);
		return 0;
	case K_U32:
	case K_BYTES:
		if ((k->type == K_U32 ? parse_u64(val, UINT64_MAX, &v) : parse_size(val, &v)) != 0 ||
		    v < k->min || v > k->max) {
			snprintf(why, why_size, "%s must be a whole number from %llu to %llu%s", k->name,
				 (unsigned long long)k->min, (unsigned long long)k->max,
				 k->type == K_BYTES ? " (suffixes k, m, g, t: binary)" : "");
			return ERR_PARSE;
		}
		if (k->type == K_U32)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case K_CIDR:
		if (parse_cidr(val, &cfg->subnet_pool_base, &cfg->subnet_pool_prefix) != 0) {
			snprintf(why, why_size, "%s must be an IPv4 network A.B.C.D/N with N from 8 to "
				 "28 and no host bits set", k->name);
			return ERR_PARSE;
		}
		return 0;
	case K_MOUNTS:
		return set_mounts(cfg, val, why, why_size);
	case K_LEVEL:
		if (log_level_parse(val, (enum log_level *)field) != 0) {
			snprintf(why, why_size, "%s must be error, warn, info or debug", k->name);
			return ERR_PARSE;
		}
		return 0;
	case K_TIER:
		if (strcmp(val, "T0") != 0 && strcmp(val, "T1") != 0) {
			snprintf(why, why_size, "%s must be T0 (no requirement) or T1", k->name);
			return ERR_PARSE;
		}
		*(bool *)field = strcmp(val, "T1") == 0;
		return 0;
	}
	return ERR_STATE;
}

static char *trim(char *s)
{
	char *e;

	while (*s == ' ' || *s == '\t')
		s++;
	e = s + strlen(s);
	while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
		*--e = '\0';
	return s;
}

int config_parse(struct config *cfg, const char *text, size_t len, char *err, size_t err_size)
{
	static struct config work; /* applied to a copy, so a bad line changes nothing */
	char line[CONFIG_LINE_BYTES], why[256];
	size_t pos = 0;
	unsigned lineno = 0;

	work = *cfg;
	while (pos < len) {
		size_t n = 0;
		char *key, *val, *eq;
		const struct key *k = NULL;

		lineno++;
		while (pos + n < len && text[pos + n] != '\n')
			n++;
		if (n >= sizeof(line)) {
			snprintf(err, err_size, "%u: line longer than %zu bytes", lineno, sizeof(line) - 1);
			return ERR_PARSE;
		}
		memcpy(line, text + pos, n);
		line[n] = '\0';
		pos += n + 1;
		if (memchr(line, '\0', n)) {
			snprintf(err, err_size, "%u: NUL byte in the file", lineno);
			return ERR_PARSE;
		}
		key = trim(line);
		if (*key == '\0' || *key == '#')
			continue;
		eq = strchr(key, '=');
		if (!eq) {
			snprintf(err, err_size, "%u: expected `key = value`", lineno);
			return ERR_PARSE;
		}
		*eq = '\0';
		key = trim(key);
		val = trim(eq + 1);
		for (size_t i = 0; i < ARRAY_LEN(keys); i++)
			if (strcmp(keys[i].name, key) == 0)
				k = &keys[i];
		if (!k) {
			char q[96];
			snprintf(err, err_size, "%u: unknown key %s (see config/agenticd.conf for the "
				 "keys)", lineno, logfmt_value(q, sizeof(q), key));
			return ERR_PARSE;
		}
		if (set_key(&work, k, val, why, sizeof(why)) != 0) {
			snprintf(err, err_size, "%u: %s", lineno, why);
			return ERR_PARSE;
		}
	}
	*cfg = work;
	return 0;
}

int config_load(struct config *cfg, const char *path, int explicit_path, char *err,
		size_t err_size)
{
	static char text[CONFIG_FILE_MAX_BYTES];
	char why[512];
	size_t len = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT && !explicit_path)
			return 0;
		snprintf(err, err_size, "%s: cannot open: %s", path, strerror(errno));
		return -errno;
	}
	r = fd_read_all(fd, text, sizeof(text), &len);
	close(fd);
	if (r == ERR_LIMIT) {
		snprintf(err, err_size, "%s: larger than %u bytes", path, CONFIG_FILE_MAX_BYTES - 1);
		return ERR_LIMIT;
	}
	if (r < 0) {
		snprintf(err, err_size, "%s: cannot read: %s", path, strerror((int)-r));
		return -EIO;
	}
	if (config_parse(cfg, text, len, why, sizeof(why)) != 0) {
		snprintf(err, err_size, "%s:%s", path, why);
		return ERR_PARSE;
	}
	return 0;
}

/* The policy file's bytes into text (cap): its length, or -1 with why. */
static ssize_t policy_file_read(const char *path, char *text, size_t cap, char *why, size_t n)
{
	struct stat st;
	size_t len = 0;
	ssize_t r;
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(why, n, "cannot open: %s", strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		snprintf(why, n, "not a regular file");
	else if (st.st_uid != 0 && st.st_uid != geteuid())
		snprintf(why, n, "owned by uid %u, not root: it bounds every E2B sandbox's egress",
			 (unsigned)st.st_uid);
	else if (st.st_mode & 022)
		snprintf(why, n, "writable by group or other (mode %04o): it bounds every E2B "
			 "sandbox's egress; chmod go-w", (unsigned)(st.st_mode & 07777));
	else if ((r = fd_read_all(fd, text, cap, &len)) == ERR_LIMIT)
		snprintf(why, n, "larger than %zu bytes", cap - 1);
	else if (r < 0)
		snprintf(why, n, "cannot read: %s", strerror((int)-r));
	else
		why[0] = '\0';
	close(fd);
	return why[0] ? -1 : (ssize_t)len;
}

int config_e2b_egress_load(struct config *cfg, char *err, size_t err_size)
{
	static char text[EGRESS_POLICY_BYTES + 1];
	static struct egress_policy pol;
	char why[256];
	ssize_t len;

	if (!cfg->e2b_egress_policy[0]) {
		cfg->e2b_egress_json[0] = '\0';
		return 0;
	}
	len = policy_file_read(cfg->e2b_egress_policy, text, sizeof(text), why, sizeof(why));
	if (len >= 0 && egress_policy_parse(text, (size_t)len, &pol, why, sizeof(why)) != 0)
		len = -1;
	if (len < 0) {
		snprintf(err, err_size, "e2b_egress_policy %s: %s", cfg->e2b_egress_policy, why);
		return ERR_PARSE;
	}
	/* what the reader took fits EGRESS_POLICY_BYTES normalised (policy.h) */
	len = egress_policy_write(&pol, cfg->e2b_egress_json, sizeof(cfg->e2b_egress_json));
	ASSERT(len > 0);
	return 0;
}

void config_apply_env(struct config *cfg)
{
	const char *v = getenv("AGENTSHARE_ROOT");

	if (v && v[0] == '/' && strlen(v) < CONFIG_STR_BYTES)
		set_str(cfg->agentshare_root, v);
}

/* A key's value as the file would spell it. Returns out. */
static const char *key_text(const struct config *cfg, const struct key *k, char *out,
			    size_t size)
{
	const uint8_t *field = (const uint8_t *)cfg + k->offset;
	uint32_t a = cfg->subnet_pool_base;
	size_t n = 0;

	out[0] = '\0';
	switch (k->type) {
	case K_STR:
	case K_STR_OR_EMPTY:
	case K_PATH:
	case K_PATH_OR_EMPTY:
	case K_LISTEN:
		snprintf(out, size, "%s", (const char *)field);
		break;
	case K_U32:
		snprintf(out, size, "%u", *(const uint32_t *)field);
		break;
	case K_BYTES:
		snprintf(out, size, "%llu", (unsigned long long)*(const uint64_t *)field);
		break;
	case K_CIDR:
		snprintf(out, size, "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
			 a & 255, cfg->subnet_pool_prefix);
		break;
	case K_MOUNTS:
		for (uint32_t i = 0; i < cfg->n_mount_allowlist && n < size; i++) {
			int r = snprintf(out + n, size - n, "%s%s", i ? "," : "",
					 cfg->mount_allowlist[i]);

			n += r > 0 ? (size_t)r : 0;
		}
		break;
	case K_LEVEL:
		snprintf(out, size, "%s", log_level_name(*(const enum log_level *)field));
		break;
	case K_TIER:
		snprintf(out, size, "%s", *(const bool *)field ? "T1" : "T0");
		break;
	}
	return out;
}

void config_log_apply(const struct config *cfg)
{
	char text[CONFIG_MAX_ALLOWED_MOUNTS * CONFIG_STR_BYTES];

	log_set_level(cfg->log_level);
	if (cfg->log_level < LOG_DEBUG)
		return;
	for (size_t i = 0; i < ARRAY_LEN(keys); i++)
		log_debug("config", "key=%s value=%s", keys[i].name,
			  log_q(key_text(cfg, &keys[i], text, sizeof(text))));
}

int config_validate(const struct config *cfg, char *err, size_t err_size)
{
	const char *why = NULL;

	if (cfg->control_uid_min > cfg->control_uid_max)
		why = "control_uid_min is above control_uid_max";
	else if (cfg->workload_uid >= cfg->control_uid_min && cfg->workload_uid <= cfg->control_uid_max)
		why = "the control uid range includes workload_uid";
	else if (cfg->workload_gid >= cfg->control_uid_min && cfg->workload_gid <= cfg->control_uid_max)
		why = "the control uid range includes workload_gid (control gids equal control uids)";
	else if (cfg->warm_sandboxes >= cfg->max_sandboxes)
		why = "warm_sandboxes must be below max_sandboxes (warm sandboxes take its slots)";
	else if (cfg->control_uid_max - cfg->control_uid_min + 1 < cfg->max_sandboxes)
		why = "the control uid range is smaller than max_sandboxes";
	else if ((1u << (28 - cfg->subnet_pool_prefix)) < cfg->max_sandboxes)
		why = "sandbox_subnet_pool holds fewer /28 networks than max_sandboxes";
	/* each egress slot's worker has a uid of its own: egress_uid - slot, downwards, as the
	 * control uids start right above the default egress_uid */
	else if (cfg->egress_uid < cfg->egress_max_connections ||
		 (cfg->workload_uid <= cfg->egress_uid &&
		  cfg->egress_uid - cfg->workload_uid < cfg->egress_max_connections) ||
		 (cfg->workload_gid <= cfg->egress_uid &&
		  cfg->egress_uid - cfg->workload_gid < cfg->egress_max_connections) ||
		 (cfg->egress_uid >= cfg->control_uid_min &&
		  cfg->egress_uid - cfg->egress_max_connections + 1 <= cfg->control_uid_max))
		why = "egress_uid - egress_max_connections + 1 .. egress_uid must hold neither a "
		      "control uid nor the workload's uid or gid, nor 0";
	else if (strcmp(cfg->vm_accel, "auto") != 0 && strcmp(cfg->vm_accel, "tcg") != 0 &&
		 strcmp(cfg->vm_accel, "kvm") != 0)
		why = "vm_accel is auto, tcg or kvm";
	/* each VM's QEMU has a uid of its own: its control uid + vm_uid_offset (so daemons with
	 * disjoint control ranges have disjoint VM uids), and the KVM probe the one after the
	 * last */
	else if ((uint64_t)cfg->control_uid_max + cfg->vm_uid_offset + 1 > 0x7fffffffu ||
		 cfg->vm_uid_offset <= cfg->control_uid_max - cfg->control_uid_min ||
		 (cfg->workload_uid >= cfg->control_uid_min + cfg->vm_uid_offset &&
		  cfg->workload_uid <= cfg->control_uid_max + cfg->vm_uid_offset + 1) ||
		 (cfg->workload_gid >= cfg->control_uid_min + cfg->vm_uid_offset &&
		  cfg->workload_gid <= cfg->control_uid_max + cfg->vm_uid_offset + 1) ||
		 /* egress_uid - max + 1 .. egress_uid against it */
		 (cfg->egress_uid + 0ull >= cfg->control_uid_min + 0ull + cfg->vm_uid_offset &&
		  cfg->egress_uid + 0ull < cfg->control_uid_max + 0ull + cfg->vm_uid_offset + 1 +
		  cfg->egress_max_connections))
		why = "control_uid_min + vm_uid_offset .. control_uid_max + vm_uid_offset + 1 (QEMU's "
		      "uids) must hold no control uid, the workload's uid or gid or an egress uid";
	else if (strncmp(cfg->docker_host, "unix:///", 8) != 0)
		why = "docker_host must be unix:///PATH (only Unix sockets are supported)";
	if (!why)
		return 0;
	snprintf(err, err_size, "%s", why);
	return ERR_PARSE;
}
