/* profile.c: a startup profile's JSON read strictly, and the set of them in profiles_dir
 * (profile.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "egress/policy.h"
#include "json/json.h"
#include "profile/credscan.h"
#include "profile/profile.h"

static struct json_token tokens[PROFILE_JSON_TOKENS];

#define CRED_REFUSAL "the docker runtime refuses startup profiles that materialize raw " \
	"credentials in a shared-kernel sandbox; use the credential proxy or a VM runtime"

struct rd {
	struct profile *p;
	const struct json_doc *doc;
	char *err;
	size_t err_size;
};

static int bad(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int bad(struct rd *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, r->err_size, fmt, ap);
	va_end(ap);
	return ERR_PARSE;
}

static enum json_type type_of(const struct rd *r, int idx)
{
	return r->doc->tok[idx].type;
}

/* A name from the file as an error may echo it: never one shaped like a token. */
static const char *shown(const char *name)
{
	return credscan_value(name) ? "(a name shaped like a credential)" : name;
}

/* ---- checks of one value ---- */

/* Only the named fields, each at most once. */
static int known_fields(struct rd *r, int obj, const char *path, const char *const *names,
			size_t nnames)
{
	const char *sep = *path ? "." : "";
	char key[64];

	for (int k = json_first(r->doc, obj); k >= 0;
	     k = json_next(r->doc, obj, json_next(r->doc, obj, k))) {
		size_t i;

		for (i = 0; i < nnames && !json_str_eq(r->doc, k, names[i]); i++)
			;
		if (i == nnames) {
			char known[256] = "";

			for (size_t j = 0; j < nnames; j++)
				snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
					 j ? ", " : "", names[j]);
			if (json_str(r->doc, k, key, sizeof(key)) < 0)
				return bad(r, "%s%s(a long field name): unknown field (known: %s)", path,
					   sep, known);
			return bad(r, "%s%s%s: unknown field (known: %s)", path, sep, shown(key), known);
		}
		for (int e = json_first(r->doc, obj); e != k;
		     e = json_next(r->doc, obj, json_next(r->doc, obj, e)))
			if (json_str_eq(r->doc, e, names[i]))
				return bad(r, "%s%s%s: given twice", path, sep, names[i]);
	}
	return 0;
}

/* A string value copied into the profile's text; NUL-free, at most max bytes. */
static int take_str(struct rd *r, int idx, const char *path, size_t max, const char **out)
{
	struct profile *p = r->p;
	char *dst = p->text + p->text_len;
	int n;

	if (type_of(r, idx) != JSON_STRING)
		return bad(r, "%s: must be a string", path);
	n = json_str(r->doc, idx, dst, sizeof(p->text) - p->text_len);
	if (n == -EINVAL)
		return bad(r, "%s: must not hold U+0000", path);
	if (n < 0)
		return bad(r, "%s: the profile's strings do not fit %zu bytes", path,
			   sizeof(p->text));
	if ((size_t)n > max)
		return bad(r, "%s: at most %zu bytes", path, max);
	p->text_len += (uint32_t)n + 1;
	*out = dst;
	return 0;
}

static int take_nonempty(struct rd *r, int idx, const char *path, size_t max, const char **out)
{
	int rc = take_str(r, idx, path, max, out);

	if (rc == 0 && !**out)
		return bad(r, "%s: must not be empty", path);
	return rc;
}

static int take_uint(struct rd *r, int idx, const char *path, int64_t min, int64_t max,
		     int64_t *out)
{
	if (type_of(r, idx) != JSON_NUMBER || json_int(r->doc, idx, out) != 0 || *out < min ||
	    *out > max)
		return bad(r, "%s: must be a whole number from %lld to %lld", path, (long long)min,
			   (long long)max);
	return 0;
}

static bool id_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= PROFILE_ID_BYTES || !((s[0] >= 'a' && s[0] <= 'z') ||
						 (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

static bool env_name_ok(const char *s, size_t n)
{
	if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_", s[i]))
			return false;
	return true;
}

static bool abs_path_ok(const char *s)
{
	if (s[0] != '/' || strlen(s) >= LIMIT_PATH_BYTES)
		return false;
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return false;
	/* no ".." component: the path means what it says */
	for (const char *c = s; (c = strstr(c, "/..")); c += 3)
		if (c[3] == '/' || c[3] == '\0')
			return false;
	return true;
}

/* Docker's own shape of a network name. */
static bool network_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 128 || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') ||
				   (s[0] >= '0' && s[0] <= '9')))
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* ---- fields ---- */

static int read_id(struct rd *r, int root)
{
	int v = json_obj_get(r->doc, root, "id");
	char id[PROFILE_ID_BYTES + 1];

	if (v < 0)
		return bad(r, "id: required");
	if (type_of(r, v) != JSON_STRING || json_str(r->doc, v, id, sizeof(id)) < 0 || !id_ok(id))
		return bad(r, "id: must be a string of 1 to %d bytes from a-z 0-9 _ . - that starts "
			   "with a letter or digit", PROFILE_ID_BYTES - 1);
	memcpy(r->p->id, id, strlen(id) + 1);
	return 0;
}

static int read_strings(struct rd *r, int arr, const char *path, const char **out,
			uint32_t *n, uint32_t max)
{
	char at[96];
	int rc;

	if (type_of(r, arr) != JSON_ARRAY)
		return bad(r, "%s: must be an array of strings", path);
	if (r->doc->tok[arr].children == 0)
		return bad(r, "%s: must hold at least one string", path);
	if (r->doc->tok[arr].children > max)
		return bad(r, "%s: at most %u entries", path, max);
	*n = 0;
	for (int i = json_first(r->doc, arr); i >= 0; i = json_next(r->doc, arr, i)) {
		snprintf(at, sizeof(at), "%s[%u]", path, *n);
		if ((rc = take_str(r, i, at, PROFILE_FILE_BYTES, &out[*n])) != 0)
			return rc;
		(*n)++;
	}
	out[*n] = NULL;
	return 0;
}

/* env: an object {"KEY": "VALUE"}; stored as "KEY=VALUE". */
static int read_env(struct rd *r, int obj)
{
	struct profile *p = r->p;
	char key[256], at[300];

	if (type_of(r, obj) != JSON_OBJECT)
		return bad(r, "env: must be an object of strings ({\"KEY\": \"VALUE\"})");
	if (r->doc->tok[obj].children > PROFILE_ENV_MAX)
		return bad(r, "env: at most %d entries", PROFILE_ENV_MAX);
	for (int k = json_first(r->doc, obj); k >= 0;
	     k = json_next(r->doc, obj, json_next(r->doc, obj, k))) {
		const char *val;
		char *kv;
		int n = json_str(r->doc, k, key, sizeof(key));
		int rc;

		if (n < 0 || !env_name_ok(key, (size_t)n))
			return bad(r, "env: keys must be names of letters, digits and _ that do not "
				   "start with a digit, at most %zu bytes", sizeof(key) - 1);
		snprintf(at, sizeof(at), "env.%s", shown(key));
		if (strncmp(key, "AGENT_", 6) == 0)
			return bad(r, "%s: keys starting with AGENT_ are the init's own", at);
		for (uint32_t i = 0; i < p->nenv; i++)
			if (strncmp(p->env[i], key, (size_t)n) == 0 && p->env[i][n] == '=')
				return bad(r, "%s: given twice", at);
		/* "KEY=" then the value read in place behind it */
		if (p->text_len + (size_t)n + 1 >= sizeof(p->text))
			return bad(r, "%s: the profile's strings do not fit %zu bytes", at,
				   sizeof(p->text));
		kv = p->text + p->text_len;
		memcpy(kv, key, (size_t)n);
		kv[n] = '=';
		p->text_len += (uint32_t)n + 1;
		if ((rc = take_str(r, k + 1, at, PROFILE_FILE_BYTES, &val)) != 0)
			return rc;
		p->env[p->nenv++] = kv;
	}
	p->env[p->nenv] = NULL;
	return 0;
}

/* "512m", "2GiB", or a whole number of bytes. */
static int read_size(struct rd *r, int idx, const char *path, uint64_t min, uint64_t max,
		     uint64_t *out)
{
	char s[32], *end;
	unsigned long long v, mul = 1;
	int64_t i;
	int n;

	if (type_of(r, idx) == JSON_NUMBER) {
		if (json_int(r->doc, idx, &i) != 0 || i < 0)
			goto wrong;
		v = (unsigned long long)i;
	} else if (type_of(r, idx) == JSON_STRING && (n = json_str(r->doc, idx, s, sizeof(s))) > 0
		   && s[0] >= '0' && s[0] <= '9') {
		errno = 0;
		v = strtoull(s, &end, 10);
		if (errno)
			goto wrong;
		if (*end) {
			switch (*end | 0x20) {
			case 'k': mul = 1ull << 10; break;
			case 'm': mul = 1ull << 20; break;
			case 'g': mul = 1ull << 30; break;
			case 't': mul = 1ull << 40; break;
			default: goto wrong;
			}
			end++;
			if (*end && strcmp(end, "iB") != 0 && strcmp(end, "ib") != 0)
				goto wrong;
		}
		if (v > max / mul)
			goto wrong;
		v *= mul;
	} else {
		goto wrong;
	}
	if (v < min || v > max)
		goto wrong;
	*out = v;
	return 0;
wrong:
	return bad(r, "%s: must be a whole number of bytes from %llu to %llu, or a string like "
		   "\"512m\" (suffixes k, m, g, t: binary)", path, (unsigned long long)min,
		   (unsigned long long)max);
}

/* cpus: a decimal number of CPUs ("1.5"), at most nine places; into nano-CPUs exactly. */
static int read_cpus(struct rd *r, int idx, uint64_t *out)
{
	const struct json_token *t = &r->doc->tok[idx];
	const char *s = r->doc->src + t->start, *e = r->doc->src + t->end;
	uint64_t whole = 0, frac = 0, scale = 1000000000ull;

	if (t->type != JSON_NUMBER || *s == '-')
		goto wrong;
	for (; s < e && *s >= '0' && *s <= '9'; s++) {
		whole = whole * 10 + (uint64_t)(*s - '0');
		if (whole > PROFILE_NANO_CPUS_MAX / 1000000000ull)
			goto wrong;
	}
	if (s < e && *s == '.')
		for (s++; s < e && *s >= '0' && *s <= '9'; s++) {
			if (scale == 1)
				goto wrong;
			scale /= 10;
			frac += (uint64_t)(*s - '0') * scale;
		}
	if (s != e)
		goto wrong;
	*out = whole * 1000000000ull + frac;
	if (*out < PROFILE_NANO_CPUS_MIN || *out > PROFILE_NANO_CPUS_MAX)
		goto wrong;
	return 0;
wrong:
	return bad(r, "resources.cpus: must be a number of CPUs from 0.01 to %llu, at most nine "
		   "decimal places, no exponent", PROFILE_NANO_CPUS_MAX / 1000000000ull);
}

static int read_resources(struct rd *r, int obj)
{
	static const char *const names[] = { "memory", "pids", "cpus", "disk" };
	struct profile *p = r->p;
	int64_t pids;
	int v, rc;

	if (type_of(r, obj) != JSON_OBJECT)
		return bad(r, "resources: must be an object");
	if ((rc = known_fields(r, obj, "resources", names, ARRAY_LEN(names))) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, obj, "memory")) >= 0 &&
	    (rc = read_size(r, v, "resources.memory", PROFILE_MEMORY_MIN, PROFILE_MEMORY_MAX,
			    &p->memory_bytes)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, obj, "pids")) >= 0) {
		if ((rc = take_uint(r, v, "resources.pids", PROFILE_PIDS_MIN, PROFILE_PIDS_MAX,
				    &pids)) != 0)
			return rc;
		p->pids = (uint32_t)pids;
	}
	if ((v = json_obj_get(r->doc, obj, "cpus")) >= 0 && (rc = read_cpus(r, v, &p->nano_cpus)))
		return rc;
	if ((v = json_obj_get(r->doc, obj, "disk")) >= 0 &&
	    (rc = read_size(r, v, "resources.disk", LIMIT_DISK_MIN_BYTES, LIMIT_DISK_MAX_BYTES,
			    &p->disk_bytes)) != 0)
		return rc;
	return 0;
}

/* An array of objects: each checked for its fields, then handed to one(). */
static int read_list(struct rd *r, int arr, const char *name, uint32_t max,
		     const char *const *names, size_t nnames,
		     int (*one)(struct rd *, int, const char *, uint32_t))
{
	char at[64];
	uint32_t i = 0;
	int rc;

	if (type_of(r, arr) != JSON_ARRAY)
		return bad(r, "%s: must be an array of objects", name);
	if (r->doc->tok[arr].children > max)
		return bad(r, "%s: at most %u entries", name, max);
	for (int e = json_first(r->doc, arr); e >= 0; e = json_next(r->doc, arr, e), i++) {
		snprintf(at, sizeof(at), "%s[%u]", name, i);
		if (type_of(r, e) != JSON_OBJECT)
			return bad(r, "%s: must be an object", at);
		if ((rc = known_fields(r, e, at, names, nnames)) != 0 || (rc = one(r, e, at, i)) != 0)
			return rc;
	}
	return 0;
}

/* A required member of obj, or the error naming it. */
static int need(struct rd *r, int obj, const char *at, const char *field)
{
	int v = json_obj_get(r->doc, obj, field);

	if (v < 0)
		bad(r, "%s.%s: required", at, field);
	return v;
}

static int read_mount(struct rd *r, int m, const char *at, uint32_t i)
{
	struct profile_mount *pm = &r->p->mounts[i];
	char path[96];
	int v, rc;

	for (int f = 0; f < 2; f++) {
		const char *field = f ? "target" : "source";
		const char **dst = f ? &pm->target : &pm->source;

		snprintf(path, sizeof(path), "%s.%s", at, field);
		if ((v = need(r, m, at, field)) < 0)
			return ERR_PARSE;
		if ((rc = take_str(r, v, path, LIMIT_PATH_BYTES, dst)) != 0)
			return rc;
		if (!abs_path_ok(*dst) || (f && strcmp(*dst, "/") == 0))
			return bad(r, "%s: must be an absolute path without .. components%s", path,
				   f ? ", not /" : "");
	}
	if ((v = json_obj_get(r->doc, m, "read_only")) >= 0 && json_bool(r->doc, v, &pm->read_only))
		return bad(r, "%s.read_only: must be true or false", at);
	r->p->nmounts = i + 1;
	return 0;
}

/* egress: the policy (docs/EGRESS.md "Policy": an object, or the older list of {host, port}),
 * read by the egress module's own strict reader and kept normalised. */
static int read_egress(struct rd *r, int v)
{
	static struct egress_policy pol;
	const struct json_token *t = &r->doc->tok[v];
	size_t start = t->start, end = t->end;
	char why[256];

	if (t->type != JSON_OBJECT && t->type != JSON_ARRAY)
		return bad(r, "egress: must be an object (or the older list of {\"host\", \"port\"})");
	if (egress_policy_parse(r->doc->src + start, end - start, &pol, why, sizeof(why)) != 0)
		return bad(r, "%s", why);
	if (egress_policy_write(&pol, r->p->egress_json, sizeof(r->p->egress_json)) < 0)
		return bad(r, "egress: the normalised policy does not fit %u bytes",
			   EGRESS_POLICY_BYTES);
	r->p->negress = pol.nallow + pol.nroutes;
	r->p->egress_report = pol.mode == EGRESS_REPORT;
	return 0;
}

static int read_cred(struct rd *r, int c, const char *at, uint32_t i)
{
	static const char *const target_names[] = { "type", "name" };
	struct profile_cred_ref *pc = &r->p->creds[i];
	char path[96];
	int v, t, rc;

	snprintf(path, sizeof(path), "%s.id", at);
	if ((v = need(r, c, at, "id")) < 0)
		return ERR_PARSE;
	if ((rc = take_str(r, v, path, PROFILE_ID_BYTES - 1, &pc->id)) != 0)
		return rc;
	if (!id_ok(pc->id))
		return bad(r, "%s: must be 1 to %d bytes from a-z 0-9 _ . - that start with a letter "
			   "or digit", path, PROFILE_ID_BYTES - 1);
	for (uint32_t j = 0; j < i; j++)
		if (strcmp(r->p->creds[j].id, pc->id) == 0)
			return bad(r, "%s: %s is also credential_refs[%u]'s id", path, pc->id, j);
	snprintf(path, sizeof(path), "%s.provider", at);
	if ((v = need(r, c, at, "provider")) < 0)
		return ERR_PARSE;
	if ((rc = take_nonempty(r, v, path, 128, &pc->provider)) != 0)
		return rc;
	snprintf(path, sizeof(path), "%s.allowed_use", at);
	if ((v = need(r, c, at, "allowed_use")) < 0)
		return ERR_PARSE;
	if ((rc = take_nonempty(r, v, path, 256, &pc->allowed_use)) != 0)
		return rc;
	if ((t = need(r, c, at, "target")) < 0)
		return ERR_PARSE;
	snprintf(path, sizeof(path), "%s.target", at);
	if (type_of(r, t) != JSON_OBJECT)
		return bad(r, "%s: must be an object {\"type\": \"env\"|\"file\", \"name\": ...}", path);
	if ((rc = known_fields(r, t, path, target_names, ARRAY_LEN(target_names))) != 0)
		return rc;
	if ((v = need(r, t, path, "type")) < 0)
		return ERR_PARSE;
	if (json_str_eq(r->doc, v, "env"))
		pc->target_type = "env";
	else if (json_str_eq(r->doc, v, "file"))
		pc->target_type = "file";
	else
		return bad(r, "%s.type: must be \"env\" or \"file\"", path);
	if ((v = need(r, t, path, "name")) < 0)
		return ERR_PARSE;
	snprintf(path, sizeof(path), "%s.target.name", at);
	if ((rc = take_str(r, v, path, LIMIT_PATH_BYTES, &pc->target_name)) != 0)
		return rc;
	if (pc->target_type[0] == 'e' ? !env_name_ok(pc->target_name, strlen(pc->target_name)) ||
					strncmp(pc->target_name, "AGENT_", 6) == 0
				      : !abs_path_ok(pc->target_name))
		return bad(r, "%s: must be %s", path, pc->target_type[0] == 'e' ?
			   "an env name (letters, digits, _; not AGENT_...)" :
			   "an absolute path without .. components");
	r->p->ncreds = i + 1;
	return 0;
}

static int read_probe(struct rd *r, int pr, const char *at, uint32_t i)
{
	struct profile_probe *pp = &r->p->probes[i];
	char path[96];
	int64_t timeout = PROFILE_PROBE_TIMEOUT_S;
	int v, rc;

	snprintf(path, sizeof(path), "%s.cmd", at);
	if ((v = need(r, pr, at, "cmd")) < 0)
		return ERR_PARSE;
	if ((rc = read_strings(r, v, path, pp->cmd, &pp->ncmd, PROFILE_CMD_MAX)) != 0)
		return rc;
	snprintf(path, sizeof(path), "%s.timeout_seconds", at);
	if ((v = json_obj_get(r->doc, pr, "timeout_seconds")) >= 0 &&
	    (rc = take_uint(r, v, path, 1, PROFILE_PROBE_TIMEOUT_MAX_S, &timeout)) != 0)
		return rc;
	pp->timeout_s = (int32_t)timeout;
	r->p->nprobes = i + 1;
	return 0;
}

static int read_top_strings(struct rd *r, int root)
{
	struct profile *p = r->p;
	int v, rc;

	if ((v = json_obj_get(r->doc, root, "description")) >= 0 &&
	    (rc = take_str(r, v, "description", 1024, &p->description)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, root, "image")) >= 0) {
		if ((rc = take_nonempty(r, v, "image", 255, &p->image)) != 0)
			return rc;
		for (const char *c = p->image; *c; c++)
			if ((unsigned char)*c <= 0x20 || *c == 0x7f)
				return bad(r, "image: must be an image reference (no spaces or control "
					   "characters)");
	}
	if ((v = json_obj_get(r->doc, root, "runtime")) >= 0) {
		if (json_str_eq(r->doc, v, "docker"))
			p->runtime = "docker";
		else if (json_str_eq(r->doc, v, "vm"))
			p->runtime = "vm";
		else
			return bad(r, "runtime: must be \"docker\" or \"vm\"");
	}
	if ((v = json_obj_get(r->doc, root, "network")) >= 0) {
		const char *net;

		if ((rc = take_str(r, v, "network", 128, &net)) != 0)
			return rc;
		if (strcmp(net, "managed") != 0 && !network_ok(net))
			return bad(r, "network: must be \"managed\" or a Docker network's name "
				   "(letters, digits, _ . -)");
		p->network = strcmp(net, "managed") == 0 ? NULL : net;
	}
	return 0;
}

static int read_profile(struct rd *r)
{
	static const char *const top[] = { "id", "description", "image", "runtime", "env", "cmd",
					   "resources", "mounts", "network", "egress",
					   "credential_refs", "readiness_probes" };
	static const char *const mount_f[] = { "source", "target", "read_only" };
	static const char *const cred_f[] = { "id", "provider", "allowed_use", "target" };
	static const char *const probe_f[] = { "cmd", "timeout_seconds" };
	struct profile *p = r->p;
	int v, rc;

	if (type_of(r, 0) != JSON_OBJECT)
		return bad(r, "(top level): must be an object");
	if ((rc = read_id(r, 0)) != 0 || (rc = known_fields(r, 0, "", top, ARRAY_LEN(top))) != 0 ||
	    (rc = read_top_strings(r, 0)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "env")) >= 0 && (rc = read_env(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "cmd")) >= 0 &&
	    (rc = read_strings(r, v, "cmd", p->cmd, &p->ncmd, PROFILE_CMD_MAX)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "resources")) >= 0 && (rc = read_resources(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "mounts")) >= 0 &&
	    (rc = read_list(r, v, "mounts", PROFILE_MOUNTS_MAX, mount_f, ARRAY_LEN(mount_f),
			    read_mount)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "egress")) >= 0 && (rc = read_egress(r, v)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "credential_refs")) >= 0 &&
	    (rc = read_list(r, v, "credential_refs", PROFILE_CREDS_MAX, cred_f, ARRAY_LEN(cred_f),
			    read_cred)) != 0)
		return rc;
	if ((v = json_obj_get(r->doc, 0, "readiness_probes")) >= 0 &&
	    (rc = read_list(r, v, "readiness_probes", PROFILE_PROBES_MAX, probe_f,
			    ARRAY_LEN(probe_f), read_probe)) != 0)
		return rc;
	return 0;
}

int profile_parse(struct profile *p, const void *json, size_t len, char *err, size_t err_size)
{
	struct json_doc doc;
	struct rd r = { p, &doc, err, err_size };
	int rc;

	memset(p, 0, offsetof(struct profile, text));
	p->text_len = 0;
	p->text[0] = '\0';
	if (err_size)
		err[0] = '\0';
	if (len > PROFILE_FILE_BYTES)
		return bad(&r, "(file): larger than %u bytes", PROFILE_FILE_BYTES);
	rc = json_parse(&doc, json, len, tokens, PROFILE_JSON_TOKENS);
	if (rc == ERR_LIMIT)
		return bad(&r, "(file): %s (at most %d JSON values, nesting %d deep)",
			   doc.err_what ? doc.err_what : "too large", PROFILE_JSON_TOKENS,
			   JSON_MAX_DEPTH);
	if (rc != 0)
		return bad(&r, "(file): not JSON: %s at byte %zu", doc.err_what ? doc.err_what :
			   "malformed", doc.err_offset);
	if ((rc = read_profile(&r)) != 0)
		return rc;
	return 0;
}

const char *profile_shared_kernel_refusal(const struct profile *p, char *why, size_t size)
{
	if (p->ncreds > 0) {
		snprintf(why, size, "credential_refs: %s", CRED_REFUSAL);
		return why;
	}
	for (uint32_t i = 0; i < p->nenv; i++) {
		const char *rule = credscan_entry(p->env[i]);

		if (rule) {
			char key[256];

			snprintf(key, sizeof(key), "%.*s", (int)strcspn(p->env[i], "="), p->env[i]);
			snprintf(why, size, "env.%s (%s): %s", shown(key), rule, CRED_REFUSAL);
			return why;
		}
	}
	return NULL;
}

/* ---- the set ---- */

/* the PROFILE_MAX first names in order, while the directory is listed */
static char names[PROFILE_MAX][sizeof(((struct profile_entry *)0)->file)];
static char file_buf[PROFILE_FILE_BYTES + 1];

static bool wanted(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && strcmp(name + n - 5, ".json") == 0 &&
	       n < sizeof(names[0]);
}

/* Keeps the PROFILE_MAX smallest names, sorted; counts the rest as skipped. */
static void name_add(struct profile_set *set, uint32_t *n, const char *name)
{
	uint32_t at = *n;

	while (at > 0 && strcmp(names[at - 1], name) > 0)
		at--;
	if (at == PROFILE_MAX) {
		set->skipped++;
		return;
	}
	if (*n == PROFILE_MAX)
		set->skipped++;
	else
		(*n)++;
	memmove(names[at + 1], names[at], (size_t)(*n - 1 - at) * sizeof(names[0]));
	memcpy(names[at], name, strlen(name) + 1);
}

static const char *trust_problem(const struct stat *st, char *why, size_t size)
{
	if (st->st_uid != 0 && st->st_uid != geteuid())
		snprintf(why, size, "owned by uid %u, not root: profiles decide what runs",
			 (unsigned)st->st_uid);
	else if (st->st_mode & 022)
		snprintf(why, size, "writable by group or other (mode %04o): profiles decide what "
			 "runs; chmod go-w", (unsigned)(st->st_mode & 07777));
	else
		return NULL;
	return why;
}

/* Reads one file into file_buf: its length, or -1 with why set. */
static ssize_t read_file(int dfd, const char *name, char *why, size_t size)
{
	struct stat st;
	size_t len = 0;
	ssize_t got;
	char trust[160];
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		snprintf(why, size, "%s", errno == ELOOP ? "a symbolic link (never followed)" :
			 strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(why, size, "not a regular file");
		close(fd);
		return -1;
	}
	if (trust_problem(&st, trust, sizeof(trust))) {
		snprintf(why, size, "%s", trust);
		close(fd);
		return -1;
	}
	while (len <= PROFILE_FILE_BYTES &&
	       (got = read(fd, file_buf + len, sizeof(file_buf) - len)) != 0) {
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			snprintf(why, size, "%s", strerror(errno));
			close(fd);
			return -1;
		}
		len += (size_t)got;
	}
	close(fd);
	if (len > PROFILE_FILE_BYTES) {
		snprintf(why, size, "larger than %u bytes", PROFILE_FILE_BYTES);
		return -1;
	}
	return (ssize_t)len;
}

/* A file name and an error are shown (JSON, a terminal): bytes outside printable ASCII,
 * and so a UTF-8 sequence the cuts above may have split, become '?'. */
static void printable(char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
			*s = '?';
}

static void load_entry(struct profile_entry *e, int dfd, const char *name)
{
	char why[sizeof(e->error)];
	ssize_t len;

	memset(e, 0, offsetof(struct profile_entry, p));
	memcpy(e->file, name, strlen(name) + 1); /* wanted() kept it shorter than file */
	printable(e->file);
	len = read_file(dfd, name, why, sizeof(why));
	if (len >= 0) {
		e->valid = profile_parse(&e->p, file_buf, (size_t)len, why, sizeof(why)) == 0;
		memcpy(e->id, e->p.id, sizeof(e->id));
		if (e->valid)
			return;
	}
	/* the name cut first, so the reason shows */
	snprintf(e->error, sizeof(e->error), "%.64s: %.180s", name, why);
	printable(e->error);
}

/* Two files with one id: neither is used, each names the other. */
static uint32_t mark_duplicates(struct profile_set *set)
{
	char why[sizeof(set->e[0].error)];
	uint32_t marked = 0;

	for (uint32_t i = 0; i < set->n; i++)
		for (uint32_t j = 0; j < set->n; j++) {
			struct profile_entry *e = &set->e[i];

			if (i == j || !e->valid || strcmp(e->id, set->e[j].id) != 0)
				continue;
			marked++;
			e->valid = false;
			snprintf(why, sizeof(why), "%.64s: id: %s is also the id of %.64s", e->file,
				 e->id, set->e[j].file);
			memcpy(e->error, why, sizeof(e->error));
			break;
		}
	return marked;
}

int profile_set_load(struct profile_set *set, const char *dir)
{
	static uint8_t dents[4096];
	struct stat st;
	char trust[160];
	uint32_t n = 0;
	int invalid = 0;
	long got;
	int dfd;

	set->n = 0;
	set->skipped = 0;
	set->dir_error[0] = '\0';
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		if (errno != ENOENT)
			snprintf(set->dir_error, sizeof(set->dir_error), "%s: %s", dir,
				 strerror(errno));
		return 0;
	}
	if (fstat(dfd, &st) != 0)
		snprintf(trust, sizeof(trust), "%s", strerror(errno));
	else if (!trust_problem(&st, trust, sizeof(trust)))
		trust[0] = '\0';
	if (trust[0]) {
		snprintf(set->dir_error, sizeof(set->dir_error), "%s: %s", dir, trust);
		close(dfd);
		return 0;
	}
	while ((got = syscall(SYS_getdents64, dfd, dents, sizeof(dents))) > 0)
		for (long off = 0; off < got;) {
			struct dirent64_raw *de = (void *)(dents + off);

			off += de->reclen;
			if (wanted(de->name))
				name_add(set, &n, de->name);
		}
	if (got < 0)
		snprintf(set->dir_error, sizeof(set->dir_error), "%s: %s", dir, strerror(errno));
	for (uint32_t i = 0; i < n; i++) {
		load_entry(&set->e[i], dfd, names[i]);
		invalid += !set->e[i].valid;
	}
	close(dfd);
	set->n = n;
	invalid += (int)mark_duplicates(set);
	return invalid;
}

const struct profile *profile_set_find(const struct profile_set *set, const char *id,
				       const struct profile_entry **entry_out)
{
	for (uint32_t i = 0; i < set->n && id[0]; i++) {
		const struct profile_entry *e = &set->e[i];

		if (strcmp(e->id, id) != 0)
			continue;
		if (entry_out)
			*entry_out = e;
		return e->valid ? &e->p : NULL;
	}
	if (entry_out)
		*entry_out = NULL;
	return NULL;
}
