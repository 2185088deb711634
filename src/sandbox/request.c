/* request.c: create and exec requests read and checked (request.h), for every front end. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json/json.h"
#include "sandbox/request.h"
#include "profile/credscan.h"
#include "profile/profile.h"

static struct json_token tokens[4096];

_Static_assert(REQUEST_PROBES_MAX >= PROFILE_PROBES_MAX && LIMIT_SANDBOX_CMD_ARGS >= PROFILE_CMD_MAX,
	       "a profile's probes and their commands fit a create request");

static int bad(struct request_error *e, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int bad(struct request_error *e, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	e->status = status;
	e->code = code;
	va_start(ap, fmt);
	vsnprintf(e->message, sizeof(e->message), fmt, ap);
	va_end(ap);
	return -1;
}

/* Copies a string token into t; NULL when it is no string, does not fit or holds NUL. */
static const char *take_str(struct request_text *t, const struct json_doc *doc, int idx)
{
	char *out = t->buf + t->len;
	int n;

	if (idx < 0 || doc->tok[idx].type != JSON_STRING)
		return NULL;
	n = json_str(doc, idx, out, t->cap - t->len);
	if (n < 0)
		return NULL;
	t->len += (uint32_t)n + 1;
	return out;
}

/* "key=value" into t; NULL when it does not fit. */
static const char *take_kv(struct request_text *t, const char *key, const char *value)
{
	char *out = t->buf + t->len;
	int n = snprintf(out, t->cap - t->len, "%s=%s", key, value);

	if (n < 0 || (size_t)n >= t->cap - t->len)
		return NULL;
	t->len += (uint32_t)n + 1;
	return out;
}

/* ---- env, the same for a create and an exec ---- */

static int env_add(const char **env, uint32_t *n, const char *kv, struct request_error *e)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;

	if (!eq || eq == kv)
		return bad(e, 400, "bad_request", "env entries are KEY=VALUE with a non-empty KEY");
	if (strncmp(kv, "AGENT_", 6) == 0)
		return bad(e, 422, "refused", "env keys starting with AGENT_ are the init's own");
	if (*n == LIMIT_SANDBOX_ENV)
		return bad(e, 400, "bad_request", "at most %d env entries", LIMIT_SANDBOX_ENV);
	env[(*n)++] = kv;
	return 0;
}

static int env_join(const char **env, uint32_t *n, struct request_text *t, const char *key,
		    const char *value, struct request_error *e)
{
	const char *kv;

	if (!key || !value)
		return bad(e, 400, "bad_request", "env values must be strings (and fit %u bytes in "
			   "all)", t->cap);
	if (strchr(key, '='))
		return bad(e, 400, "bad_request", "env keys may not hold '='");
	if (!(kv = take_kv(t, key, value)))
		return bad(e, 400, "bad_request", "env values must be strings (and fit %u bytes in "
			   "all)", t->cap);
	return env_add(env, n, kv, e);
}

/* {"KEY": "VALUE", ...} or ["KEY=VALUE", ...] */
static int parse_env(const char **env, uint32_t *n, struct request_text *t,
		     const struct json_doc *doc, int idx, struct request_error *e)
{
	if (doc->tok[idx].type == JSON_OBJECT) {
		for (int k = json_first(doc, idx); k >= 0;
		     k = json_next(doc, idx, json_next(doc, idx, k))) {
			const char *key = take_str(t, doc, k);
			const char *val = take_str(t, doc, k + 1);

			if (env_join(env, n, t, key, val, e) != 0)
				return -1;
		}
		return 0;
	}
	if (doc->tok[idx].type != JSON_ARRAY)
		return bad(e, 400, "bad_request", "env is an object of strings or an array of "
			   "\"KEY=VALUE\"");
	for (int i = json_first(doc, idx); i >= 0; i = json_next(doc, idx, i))
		if (env_add(env, n, take_str(t, doc, i), e) != 0)
			return -1;
	return 0;
}

/* ---- create ---- */

static int mount_add(struct create_req *req, struct request_text *t, const struct config *cfg,
		     const char *src, const char *dst, bool ro, struct request_error *e);

/* "SRC:DST[:ro]" or {"source","target","read_only"}. */
static int parse_mount(struct create_req *req, struct request_text *t, const struct config *cfg,
		       const struct json_doc *doc, int m, struct request_error *e)
{
	const char *src, *dst;
	char *s;
	bool ro = false;

	if (req->nmounts == LIMIT_SANDBOX_MOUNTS)
		return bad(e, 400, "bad_request", "at most %d mounts", LIMIT_SANDBOX_MOUNTS);
	if (doc->tok[m].type == JSON_OBJECT) {
		int r = json_obj_get(doc, m, "read_only");

		src = take_str(t, doc, json_obj_get(doc, m, "source"));
		dst = take_str(t, doc, json_obj_get(doc, m, "target"));
		if (r >= 0 && json_bool(doc, r, &ro) != 0)
			return bad(e, 400, "bad_request", "mounts[].read_only is a boolean");
	} else {
		char *colon;

		s = (char *)take_str(t, doc, m);
		if (!s || !(colon = strchr(s, ':')))
			return bad(e, 400, "bad_request", "mounts are \"SRC:DST[:ro]\" or objects");
		*colon = '\0';
		src = s;
		dst = colon + 1;
		if ((colon = strchr(colon + 1, ':'))) {
			*colon = '\0';
			if (strcmp(colon + 1, "ro") == 0)
				ro = true;
			else if (strcmp(colon + 1, "rw") != 0)
				return bad(e, 400, "bad_request", "a mount's mode is ro or rw");
		}
	}
	return mount_add(req, t, cfg, src, dst, ro, e);
}

/* One host mount, checked against the mount policy; src and dst already in t. */
static int mount_add(struct create_req *req, struct request_text *t, const struct config *cfg,
		     const char *src, const char *dst, bool ro, struct request_error *e)
{
	struct docker_mount *dm = &req->mounts[req->nmounts];
	char real[PATH_MAX], why[512];
	char *s;

	if (req->nmounts == LIMIT_SANDBOX_MOUNTS)
		return bad(e, 400, "bad_request", "at most %d mounts", LIMIT_SANDBOX_MOUNTS);
	if (!src || !dst || !*src || !*dst)
		return bad(e, 400, "bad_request", "a mount needs a source and a target");
	if (!realpath(src, real))
		return bad(e, 422, "refused", "mount source %s: %s", src, strerror(errno));
	switch (policy_mount_check(cfg, real, dst, why, sizeof(why))) {
	case 0:
		break;
	case -EPERM:
		return bad(e, 422, "refused", "%s", why);
	default:
		return bad(e, 400, "bad_request", "%s", why);
	}
	/* the engine resolves the path again at the start: only a path nobody but root can
	 * change gets that far, and the bind is checked against this in the started container */
	if (policy_mount_source(real, &req->mount_id[req->nmounts], why, sizeof(why)) != 0)
		return bad(e, 422, "refused", "%s", why);
	s = t->buf + t->len;
	if (strlen(real) + 1 > t->cap - t->len)
		return bad(e, 400, "bad_request", "request too large");
	strcpy(s, real);
	t->len += (uint32_t)strlen(real) + 1;
	dm->source = s;
	dm->target = dst;
	dm->read_only = ro;
	req->nmounts++;
	return 0;
}

static int parse_labels(struct create_req *req, struct request_text *t,
			const struct json_doc *doc, int val, struct request_error *e)
{
	if (doc->tok[val].type != JSON_OBJECT)
		return bad(e, 400, "bad_request", "labels is an object of strings");
	for (int l = json_first(doc, val); l >= 0; l = json_next(doc, val, json_next(doc, val, l))) {
		const char *key = take_str(t, doc, l), *lv = take_str(t, doc, l + 1);

		if (!key || !lv)
			return bad(e, 400, "bad_request", "labels is an object of strings");
		if (!policy_label_key_allowed(key))
			return bad(e, 422, "refused", "label keys starting with agentic- are reserved "
				   "(%.64s)", key);
		if (req->nlabels == LIMIT_SANDBOX_LABELS)
			return bad(e, 400, "bad_request", "at most %d labels", LIMIT_SANDBOX_LABELS);
		req->labels[req->nlabels++] = (struct docker_kv){ key, lv };
	}
	return 0;
}

static int parse_cmd(struct create_req *req, struct request_text *t, const struct json_doc *doc,
		     int val, struct request_error *e)
{
	if (doc->tok[val].type != JSON_ARRAY)
		return bad(e, 400, "bad_request", "cmd is an array of strings");
	if (json_first(doc, val) >= 0)
		req->ncmd = 0; /* it replaces a profile's */
	for (int i = json_first(doc, val); i >= 0; i = json_next(doc, val, i)) {
		if (req->ncmd == LIMIT_SANDBOX_CMD_ARGS)
			return bad(e, 400, "bad_request", "at most %d cmd arguments",
				   LIMIT_SANDBOX_CMD_ARGS);
		if (!(req->cmd[req->ncmd++] = take_str(t, doc, i)))
			return bad(e, 400, "bad_request", "cmd is an array of strings");
	}
	return 0;
}

/* ---- resources: {"memory": bytes, "pids": n, "cpus": number, "disk": bytes} ---- */

/* A number of CPUs (2, 0.5, at most 9 decimals; a JSON number or a string holding one) as
 * nano-CPUs; 0 when malformed. */
static uint64_t nano_cpus_of(const struct json_doc *doc, int idx)
{
	const char *p = doc->src + doc->tok[idx].start, *end = doc->src + doc->tok[idx].end;
	uint64_t whole = 0, frac = 0, scale = 1000000000ull;

	if ((doc->tok[idx].type != JSON_NUMBER && doc->tok[idx].type != JSON_STRING) || p == end ||
	    *p < '0' || *p > '9')
		return 0;
	for (; p < end && *p >= '0' && *p <= '9'; p++)
		if ((whole = whole * 10 + (uint64_t)(*p - '0')) > 1000000)
			return 0;
	if (p < end && *p == '.')
		for (p++; p < end && *p >= '0' && *p <= '9'; p++) {
			if (scale == 1)
				return 0;
			scale /= 10;
			frac += (uint64_t)(*p - '0') * scale;
		}
	return p == end ? whole * 1000000000ull + frac : 0;
}

/* The bounds every create's resources meet, from the request or its profile. */
static int resources_check(const struct create_req *req, struct request_error *e)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	uint64_t max_cpus = ncpu > 0 ? (uint64_t)ncpu * 1000000000ull : 1000000000ull;

	if (req->memory_bytes && (req->memory_bytes < LIMIT_SANDBOX_MEMORY_MIN_BYTES ||
				  req->memory_bytes > LIMIT_SANDBOX_MEMORY_MAX_BYTES))
		return bad(e, 400, "bad_request", "resources.memory (the request's or its profile's) "
			   "is a whole number of bytes from %llu (32 MiB: the init and /tmp live in it) "
			   "to %llu (1 TiB)",
			   (unsigned long long)LIMIT_SANDBOX_MEMORY_MIN_BYTES,
			   (unsigned long long)LIMIT_SANDBOX_MEMORY_MAX_BYTES);
	if (req->pids && (req->pids < LIMIT_SANDBOX_PIDS_MIN || req->pids > LIMIT_SANDBOX_PIDS_MAX))
		return bad(e, 400, "bad_request", "resources.pids is a whole number from %u to %u",
			   LIMIT_SANDBOX_PIDS_MIN, LIMIT_SANDBOX_PIDS_MAX);
	if (req->nano_cpus && (req->nano_cpus < LIMIT_SANDBOX_NANO_CPUS_MIN ||
			       req->nano_cpus > max_cpus))
		return bad(e, 400, "bad_request", "resources.cpus (the request's or its profile's) is "
			   "a number of CPUs from 0.01 to %llu (this host's online CPUs)",
			   (unsigned long long)(max_cpus / 1000000000ull));
	if (req->disk_bytes && (req->disk_bytes < LIMIT_DISK_MIN_BYTES ||
				req->disk_bytes > LIMIT_DISK_MAX_BYTES))
		return bad(e, 400, "bad_request", "disk_bytes (resources.disk) is a whole number of "
			   "bytes from %llu to %llu", (unsigned long long)LIMIT_DISK_MIN_BYTES,
			   (unsigned long long)LIMIT_DISK_MAX_BYTES);
	return 0;
}

/* A positive whole number, or -1 (so that 0, negatives and other types are refused). */
static int64_t positive(const struct json_doc *doc, int idx)
{
	int64_t n;

	return json_int(doc, idx, &n) == 0 && n > 0 ? n : -1;
}

static int parse_resources(struct create_req *req, const struct json_doc *doc, int val,
			   struct request_error *e)
{
	if (doc->tok[val].type != JSON_OBJECT)
		return bad(e, 400, "bad_request", "resources is an object: {\"memory\": bytes, "
			   "\"pids\": n, \"cpus\": n, \"disk\": bytes}");
	for (int k = json_first(doc, val); k >= 0; k = json_next(doc, val, json_next(doc, val, k))) {
		int64_t n = -1;

		if (json_str_eq(doc, k, "cpus")) {
			if (!(req->nano_cpus = nano_cpus_of(doc, k + 1)))
				req->nano_cpus = 1; /* below the minimum: refused by resources_check */
			continue;
		}
		if (!json_str_eq(doc, k, "memory") && !json_str_eq(doc, k, "pids") &&
		    !json_str_eq(doc, k, "disk"))
			return bad(e, 400, "bad_request", "unknown field in resources (known: memory "
				   "pids cpus disk)");
		if ((n = positive(doc, k + 1)) < 0)
			return bad(e, 400, "bad_request", "resources.memory, .pids and .disk are "
				   "positive whole numbers (bytes; pids: a count)");
		if (json_str_eq(doc, k, "memory"))
			req->memory_bytes = (uint64_t)n;
		else if (json_str_eq(doc, k, "disk"))
			req->disk_bytes = (uint64_t)n;
		else
			req->pids = n > (int64_t)UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	}
	return 0;
}

/* ---- a startup profile, the base a create starts from ---- */

/* A copy of s in t; NULL when it does not fit. */
static const char *copy_str(struct request_text *t, const char *s)
{
	size_t n = strlen(s) + 1;
	char *out = t->buf + t->len;

	if (n > t->cap - t->len)
		return NULL;
	memcpy(out, s, n);
	t->len += (uint32_t)n;
	return out;
}

static bool profile_id_valid(const char *id)
{
	size_t n = strlen(id);

	return n > 0 && n < PROFILE_ID_BYTES && ((*id >= 'a' && *id <= 'z') || (*id >= '0' &&
		*id <= '9')) && strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* runtime is a word this build knows: NULL or "docker" (the default), or "vm". */
static int runtime_check(const char *runtime, const char *whose, struct request_error *e)
{
	if (!runtime || strcmp(runtime, "docker") == 0 || strcmp(runtime, "vm") == 0)
		return 0;
	return bad(e, 400, "bad_request", "%sruntime is \"docker\" or \"vm\"", whose);
}

static bool runtime_is_vm(const char *runtime)
{
	return runtime && strcmp(runtime, "vm") == 0;
}

/* path's components (split at '/') are all non-empty and none is "." or "..": the same rule
 * the guest's init holds a credential file's path to. */
static bool plain_components(const char *path)
{
	for (const char *c = path;;) {
		size_t k = strcspn(c, "/");

		if (k == 0 || (k == 1 && c[0] == '.') || (k == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!c[k])
			return true;
		c += k + 1;
	}
}

int request_profile_check(const struct profile *p, struct request_error *e)
{
	char whose[PROFILE_ID_BYTES + 24], why[400];
	const char *no;

	snprintf(whose, sizeof(whose), "startup profile %s: ", p->id);
	if (runtime_check(p->runtime, whose, e) != 0)
		return -1;
	/* a VM has its own kernel: its credentials are materialized in the guest alone, an env
	 * variable of its workloads or a file on the guest's credential tmpfs */
	for (uint32_t i = 0; runtime_is_vm(p->runtime) && i < p->ncreds; i++) {
		const struct profile_cred_ref *c = &p->creds[i];
		size_t n = strlen(VM_CREDENTIAL_DIR);

		if (strcmp(c->target_type, "file") == 0 &&
		    (strncmp(c->target_name, VM_CREDENTIAL_DIR "/", n + 1) != 0 ||
		     !plain_components(c->target_name + n + 1) ||
		     strlen(c->target_name) >= REQUEST_CRED_NAME_BYTES))
			return bad(e, 422, "profile_refused", "%scredential_refs[%u].target.name: a VM's "
				   "credential file is below " VM_CREDENTIAL_DIR "/ (the guest's tmpfs "
				   "for them)", whose, i);
		if (strcmp(c->target_type, "env") == 0 &&
		    (!c->target_name[0] || strchr(c->target_name, '=') ||
		     strncmp(c->target_name, "AGENT_", 6) == 0 ||
		     strlen(c->target_name) >= REQUEST_CRED_NAME_BYTES))
			return bad(e, 422, "profile_refused", "%scredential_refs[%u].target.name: an env "
				   "name, not AGENT_*", whose, i);
	}
	if (!runtime_is_vm(p->runtime) && (no = profile_shared_kernel_refusal(p, why, sizeof(why))))
		return bad(e, 422, "profile_refused", "%s%s", whose, no);
	return 0;
}

/* p's fields into req, as the base the body's go on top of. */
static int profile_apply(struct create_req *req, struct request_text *t,
			 const struct config *cfg, const struct profile *p, struct request_error *e)
{
	const char *id = copy_str(t, p->id);
	int r = id ? 0 : -1;

	req->profile_id = id;
	req->vm = runtime_is_vm(p->runtime);
	if (id)
		req->labels[req->nlabels++] = (struct docker_kv){ REQUEST_PROFILE_LABEL, id };
	if (r == 0 && p->image && !(req->image = copy_str(t, p->image)))
		r = -1;
	if (r == 0 && p->network) {
		if (strlen(p->network) >= REQUEST_NETWORK_BYTES)
			return bad(e, 422, "profile_invalid", "startup profile %s: network is a "
				   "network name", p->id);
		if (!(req->network = copy_str(t, p->network)))
			r = -1;
	}
	for (uint32_t i = 0; r == 0 && i < p->nenv; i++) {
		const char *kv = copy_str(t, p->env[i]);

		if (!kv)
			r = -1;
		else if (env_add(req->env, &req->nenv, kv, e) != 0)
			return -1;
	}
	for (uint32_t i = 0; r == 0 && i < p->ncmd; i++) {
		if (req->ncmd == LIMIT_SANDBOX_CMD_ARGS)
			return bad(e, 400, "bad_request", "at most %d cmd arguments",
				   LIMIT_SANDBOX_CMD_ARGS);
		if (!(req->cmd[req->ncmd++] = copy_str(t, p->cmd[i])))
			r = -1;
	}
	for (uint32_t i = 0; r == 0 && i < p->nmounts; i++) {
		const char *src = copy_str(t, p->mounts[i].source);
		const char *dst = src ? copy_str(t, p->mounts[i].target) : NULL;

		if (!dst)
			r = -1;
		else if (mount_add(req, t, cfg, src, dst, p->mounts[i].read_only, e) != 0)
			return -1;
	}
	/* a VM's credentials (request_profile_check refused them for docker) */
	for (uint32_t i = 0; r == 0 && req->vm && i < p->ncreds; i++) {
		struct request_cred *c = &req->creds[req->ncreds++];

		c->file = strcmp(p->creds[i].target_type, "file") == 0;
		if (!(c->id = copy_str(t, p->creds[i].id)) ||
		    !(c->name = copy_str(t, p->creds[i].target_name)))
			r = -1;
	}
	for (uint32_t i = 0; r == 0 && i < p->nprobes; i++) {
		struct request_probe *rp = &req->probes[req->nprobes++];

		rp->timeout_s = p->probes[i].timeout_s;
		for (uint32_t j = 0; r == 0 && j < p->probes[i].ncmd; j++)
			if (!(rp->argv[rp->argc++] = copy_str(t, p->probes[i].cmd[j])))
				r = -1;
	}
	if (r != 0)
		return bad(e, 400, "bad_request", "the request and its startup profile do not fit "
			   "%u bytes together", t->cap);
	if (p->egress_json[0]) {
		memcpy(req->egress_json, p->egress_json, sizeof(req->egress_json));
		req->egress_report = p->egress_report;
	}
	req->memory_bytes = p->memory_bytes;
	req->pids = p->pids;
	req->nano_cpus = p->nano_cpus;
	req->disk_bytes = p->disk_bytes;
	return 0;
}

/* The profile the body names (v1 "profile", v2 "startup_profile_id", required there) applied
 * to req; 0 also when it names none. */
static int profile_base(struct create_req *req, struct request_text *t,
			const struct config *cfg, const struct profile_set *profiles,
			enum request_api api, const struct json_doc *doc, struct request_error *e)
{
	const char *key = api == REQUEST_API_V2 ? "startup_profile_id" : "profile";
	int k = json_obj_get(doc, 0, key);
	const struct profile_entry *entry = NULL;
	const struct profile *p;
	char id[PROFILE_ID_BYTES];

	if (k < 0 && api == REQUEST_API_V2)
		return bad(e, 400, "bad_request", "startup_profile_id is required (GET "
			   "/api/v2/admin/profiles lists them)");
	if (k < 0)
		return 0;
	if (doc->tok[k].type != JSON_STRING || json_str(doc, k, id, sizeof(id)) < 0 ||
	    !profile_id_valid(id))
		return bad(e, 400, "bad_request", "%s is a profile id ([a-z0-9][a-z0-9_.-]*, at most "
			   "%d characters)", key, PROFILE_ID_BYTES - 1);
	p = profiles ? profile_set_find(profiles, id, &entry) : NULL;
	if (!p && entry)
		return bad(e, 422, "profile_invalid", "startup profile %s is invalid: %s", id,
			   entry->error);
	if (!p && credscan_value(id))
		return bad(e, 422, "profile_unknown", "no startup profile has that id (GET "
			   "/api/v2/admin/profiles lists them)");
	if (!p)
		return bad(e, 422, "profile_unknown", "no startup profile has the id %s (GET "
			   "/api/v2/admin/profiles lists them)", id);
	if (request_profile_check(p, e) != 0)
		return -1;
	return profile_apply(req, t, cfg, p, e);
}

/* admin-v2's body has fewer fields than v1's: env and cmd are the profile's alone. Checked
 * before the profile is looked up, so a misspelt field is named first. */
static int v2_fields_known(const struct json_doc *doc, struct request_error *e)
{
	static const char *const v2_fields[] = { "name", "runtime", "startup_profile_id", "image",
						 "network", "labels", "mounts", "resources",
						 "require_tier", "egress", "ttl_seconds" };
	char key[64];

	for (int k = json_first(doc, 0); k >= 0; k = json_next(doc, 0, json_next(doc, 0, k))) {
		bool known = false;

		for (size_t i = 0; !known && i < ARRAY_LEN(v2_fields); i++)
			known = json_str_eq(doc, k, v2_fields[i]);
		if (known)
			continue;
		json_str(doc, k, key, sizeof(key));
		return bad(e, 400, "bad_request", "unknown field %s (known: name runtime "
			   "startup_profile_id image network labels mounts resources require_tier egress "
			   "ttl_seconds; "
			   "env and cmd come from the profile)", key);
	}
	return 0;
}

const char *const request_proxy_env[REQUEST_PROXY_ENV_N + 1] = {
	"HTTP_PROXY=http://127.0.0.1:3128", "HTTPS_PROXY=http://127.0.0.1:3128",
	"http_proxy=http://127.0.0.1:3128", "https_proxy=http://127.0.0.1:3128",
	"NO_PROXY=localhost,127.0.0.1", "no_proxy=localhost,127.0.0.1", NULL
};

bool request_proxy_env_key(const char *kv)
{
	size_t kl = strcspn(kv, "=");

	for (int i = 0; i < REQUEST_PROXY_ENV_N; i++)
		if (strncmp(kv, request_proxy_env[i], kl) == 0 && request_proxy_env[i][kl] == '=')
			return true;
	return false;
}

/* ours win: the request's own values of those keys are dropped, then ours go in */
static int proxy_env_set(struct create_req *req, struct request_error *e)
{
	uint32_t n = 0;

	for (uint32_t i = 0; i < req->nenv; i++)
		if (!request_proxy_env_key(req->env[i]))
			req->env[n++] = req->env[i];
	req->nenv = n;
	for (int i = 0; i < REQUEST_PROXY_ENV_N; i++)
		if (env_add(req->env, &req->nenv, request_proxy_env[i], e) != 0)
			return -1;
	req->env[req->nenv] = NULL;
	return 0;
}

/* "egress": a policy, read by the egress module's strict reader; the message is its own,
 * which names the field and never a value. */
static int parse_egress(struct create_req *req, const struct json_doc *doc, int val,
			struct request_error *e)
{
	static struct egress_policy pol;
	const struct json_token *t = &doc->tok[val];
	char why[256];

	if (t->type != JSON_OBJECT && t->type != JSON_ARRAY)
		return bad(e, 422, "egress_invalid", "egress: must be an object (docs/EGRESS.md "
			   "\"Policy\")");
	if (egress_policy_parse(doc->src + t->start, t->end - t->start, &pol, why,
				sizeof(why)) != 0)
		return bad(e, 422, "egress_invalid", "%s", why);
	if (egress_policy_write(&pol, req->egress_json, sizeof(req->egress_json)) < 0)
		return bad(e, 422, "egress_invalid", "egress: the normalised policy does not fit %u "
			   "bytes", EGRESS_POLICY_BYTES);
	req->egress_report = pol.mode == EGRESS_REPORT;
	return 0;
}

/* A byte count from min to max, for the field key. */
static int parse_bytes(uint64_t *out, const char *key, uint64_t min, uint64_t max,
		       const struct json_doc *doc, int val, struct request_error *e)
{
	int64_t n;

	if (json_int(doc, val, &n) != 0 || n < (int64_t)min || (uint64_t)n > max)
		return bad(e, 400, "bad_request", "%s is a whole number of bytes from %llu to %llu",
			   key, (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)n;
	return 0;
}

static int parse_mounts(struct create_req *req, struct request_text *t, const struct config *cfg,
			const struct json_doc *doc, int val, struct request_error *e)
{
	if (doc->tok[val].type != JSON_ARRAY)
		return bad(e, 400, "bad_request", "mounts is an array");
	for (int i = json_first(doc, val); i >= 0; i = json_next(doc, val, i))
		if (parse_mount(req, t, cfg, doc, i, e) != 0)
			return -1;
	return 0;
}

/* "ttl_seconds": the sandbox is removed that long after its create (0: never). */
static int parse_ttl(struct create_req *req, const struct json_doc *doc, int val,
		     struct request_error *e)
{
	int64_t n;

	if (json_int(doc, val, &n) != 0 || n < 0 || n > LIMIT_SANDBOX_TTL_S)
		return bad(e, 400, "bad_request", "ttl_seconds is a whole number from 0 (none) to %d",
			   LIMIT_SANDBOX_TTL_S);
	req->ttl_ms = n * 1000;
	return 0;
}

/* A field the create does not know, key k. */
static int unknown_field(const struct json_doc *doc, int k, struct request_error *e)
{
	char key[64];

	/* the name is echoed only when it looks like a field's (a typo of one): any other may be
	 * a secret pasted in the wrong place */
	json_str(doc, k, key, sizeof(key));
	if (strlen(key) > 24 || strspn(key, "abcdefghijklmnopqrstuvwxyz_") != strlen(key))
		key[0] = '\0';
	return bad(e, 400, "bad_request", "unknown field%s%s (known: name runtime image env mounts "
		   "network cmd labels disk_bytes transcript_bytes resources writable_root require_tier "
		   "profile egress ttl_seconds)",
		   key[0] ? " " : "", key);
}

/* One field of the create's object. */
static int create_field(struct create_req *req, struct request_text *t, const struct config *cfg,
			enum request_api api, const struct json_doc *doc, int k,
			struct request_error *e)
{
	int val = k + 1;

	if (json_str_eq(doc, k, "name")) {
		if (!(req->name = take_str(t, doc, val)))
			return bad(e, 400, "bad_request", "name is a string");
	} else if (json_str_eq(doc, k, "profile") || json_str_eq(doc, k, "startup_profile_id")) {
		if (api == REQUEST_API_V1 && json_str_eq(doc, k, "startup_profile_id"))
			return unknown_field(doc, k, e);
		/* applied first, by profile_base */
	} else if (json_str_eq(doc, k, "runtime")) {
		const char *rt = take_str(t, doc, val);

		if (!rt)
			return bad(e, 400, "bad_request", "runtime is \"docker\" or \"vm\"");
		if (runtime_check(rt, "", e) != 0)
			return -1;
		req->vm = runtime_is_vm(rt);
	} else if (json_str_eq(doc, k, "image")) {
		if (!(req->image = take_str(t, doc, val)) || !*req->image ||
		    strlen(req->image) >= CONFIG_STR_BYTES)
			return bad(e, 400, "bad_request", "image is a non-empty string");
	} else if (json_str_eq(doc, k, "network")) {
		if (!(req->network = take_str(t, doc, val)) || !*req->network ||
		    strlen(req->network) >= REQUEST_NETWORK_BYTES)
			return bad(e, 400, "bad_request", "network is a network name");
	} else if (json_str_eq(doc, k, "env")) {
		return parse_env(req->env, &req->nenv, t, doc, val, e);
	} else if (json_str_eq(doc, k, "cmd")) {
		return parse_cmd(req, t, doc, val, e);
	} else if (json_str_eq(doc, k, "labels")) {
		return parse_labels(req, t, doc, val, e);
	} else if (json_str_eq(doc, k, "disk_bytes")) {
		return parse_bytes(&req->disk_bytes, "disk_bytes", LIMIT_DISK_MIN_BYTES,
				   LIMIT_DISK_MAX_BYTES, doc, val, e);
	} else if (json_str_eq(doc, k, "transcript_bytes")) {
		return parse_bytes(&req->transcript_bytes, "transcript_bytes",
				   LIMIT_TRANSCRIPT_MIN_BYTES, LIMIT_TRANSCRIPT_MAX_BYTES, doc, val,
				   e);
	} else if (json_str_eq(doc, k, "resources")) {
		return parse_resources(req, doc, val, e);
	} else if (json_str_eq(doc, k, "require_tier")) {
		if (json_str_eq(doc, val, "T1"))
			req->require_t1 = true;
		else if (!json_str_eq(doc, val, "T0"))
			return bad(e, 400, "bad_request", "require_tier is \"T1\" or \"T0\" (no "
				   "requirement)");
	} else if (json_str_eq(doc, k, "writable_root")) {
		if (json_bool(doc, val, &req->writable_root) != 0)
			return bad(e, 400, "bad_request", "writable_root is a boolean");
	} else if (json_str_eq(doc, k, "egress")) {
		return parse_egress(req, doc, val, e);
	} else if (json_str_eq(doc, k, "ttl_seconds")) {
		return parse_ttl(req, doc, val, e);
	} else if (json_str_eq(doc, k, "mounts")) {
		return parse_mounts(req, t, cfg, doc, val, e);
	} else {
		return unknown_field(doc, k, e);
	}
	return 0;
}

int request_create_parse(struct create_req *req, const struct config *cfg,
			 const struct profile_set *profiles, enum request_api api, const void *body,
			 size_t len, struct request_error *e)
{
	struct request_text t = { req->text, 0, sizeof(req->text) };
	struct json_doc doc;
	int r = 0;

	memset(req, 0, offsetof(struct create_req, text));
	req->text_len = 0;
	if (len == 0 && api == REQUEST_API_V1)
		return 0; /* every field has a default */
	if (json_parse(&doc, body, len, tokens, ARRAY_LEN(tokens)) != 0)
		return bad(e, 400, "bad_json", "the body is not valid JSON (byte %zu: %s)",
			   doc.err_offset, doc.err_what ? doc.err_what : "malformed");
	if (doc.tok[0].type != JSON_OBJECT)
		return bad(e, 400, "bad_request", "the body is a JSON object");
	if (api == REQUEST_API_V2 && v2_fields_known(&doc, e) != 0)
		return -1;
	r = profile_base(req, &t, cfg, profiles, api, &doc, e);
	for (int k = json_first(&doc, 0); r == 0 && k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		r = create_field(req, &t, cfg, api, &doc, k, e);
	req->text_len = t.len;
	if (r != 0)
		return -1;
	if (req->name && !policy_name_valid(req->name))
		return bad(e, 400, "bad_name", "a sandbox name matches ^[a-z][a-z0-9-]{1,62}$");
	if (req->egress_json[0] && proxy_env_set(req, e) != 0)
		return -1;
	if (req->ncreds && !req->vm)
		return bad(e, 422, "profile_refused", "the docker runtime refuses startup profiles "
			   "that materialize raw credentials in a shared-kernel sandbox (credential_refs); "
			   "use the credential proxy or a VM runtime");
	if (req->vm && req->network)
		return bad(e, 422, "runtime_vm", "a VM sandbox has no network (-nic none): network "
			   "cannot be set with runtime \"vm\"");
	if (req->vm && req->nmounts)
		return bad(e, 422, "runtime_vm", "a VM sandbox takes no host mounts (its workspace "
			   "is its own disk): mounts cannot be set with runtime \"vm\"");
	return resources_check(req, e);
}

/* ---- exec ---- */

int request_exec_arg(struct exec_req *er, const char *arg, struct request_error *e)
{
	if (!arg || er->argc == LIMIT_SANDBOX_CMD_ARGS)
		return bad(e, 400, "bad_request", "cmd is an array of at most %d strings",
			   LIMIT_SANDBOX_CMD_ARGS);
	er->argv[er->argc++] = arg;
	return 0;
}

int request_exec_env(struct exec_req *er, struct request_text *t, const char *key,
		     const char *value, struct request_error *e)
{
	return env_join(er->env, &er->nenv, t, key, value, e);
}

int request_exec_check(const struct exec_req *er, struct request_error *e)
{
	if (er->argc == 0 || !er->argv[0][0])
		return bad(e, 400, "bad_request", "cmd needs at least the program");
	if (er->working_dir && er->working_dir[0] && er->working_dir[0] != '/')
		return bad(e, 400, "bad_request", "working_dir is an absolute path");
	if (er->timeout_seconds < 0 || er->timeout_seconds > LIMIT_EXEC_TIMEOUT_S)
		return bad(e, 400, "bad_request", "timeout_seconds is a whole number >= 0 (0: none)");
	return 0;
}

static int exec_field(struct exec_req *er, struct request_text *t, const struct json_doc *doc,
		      int k, struct request_error *e)
{
	int val = k + 1;
	int64_t s;

	if (json_str_eq(doc, k, "cmd")) {
		if (doc->tok[val].type != JSON_ARRAY)
			return request_exec_arg(er, NULL, e);
		for (int i = json_first(doc, val); i >= 0; i = json_next(doc, val, i))
			if (request_exec_arg(er, take_str(t, doc, i), e) != 0)
				return -1;
	} else if (json_str_eq(doc, k, "env")) {
		return parse_env(er->env, &er->nenv, t, doc, val, e);
	} else if (json_str_eq(doc, k, "working_dir")) {
		if (!(er->working_dir = take_str(t, doc, val)))
			return bad(e, 400, "bad_request", "working_dir is an absolute path");
	} else if (json_str_eq(doc, k, "timeout_seconds")) {
		if (json_int(doc, val, &s) != 0 || s < 0 || s > LIMIT_EXEC_TIMEOUT_S)
			return bad(e, 400, "bad_request", "timeout_seconds is a whole number >= 0 "
				   "(0: none)");
		er->timeout_seconds = (int32_t)s;
	} else if (json_str_eq(doc, k, "tty")) {
		if (json_bool(doc, val, &er->tty) != 0)
			return bad(e, 400, "bad_request", "tty is true or false");
	} else if (json_str_eq(doc, k, "rows") || json_str_eq(doc, k, "cols")) {
		if (json_int(doc, val, &s) != 0 || s < 0 || s > 65535)
			return bad(e, 400, "bad_request", "rows and cols are whole numbers from 0 "
				   "to 65535 (0: the default, 24 x 80)");
		*(json_str_eq(doc, k, "rows") ? &er->rows : &er->cols) = (uint16_t)s;
	} else {
		return bad(e, 400, "bad_request", "unknown field (known: cmd env working_dir "
			   "timeout_seconds tty rows cols)");
	}
	return 0;
}

int request_exec_parse(struct exec_req *er, struct request_text *t, const void *body,
		       size_t len, struct request_error *e)
{
	struct json_doc doc;

	memset(er, 0, sizeof(*er));
	if (json_parse(&doc, body, len, tokens, ARRAY_LEN(tokens)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT)
		return bad(e, 400, "bad_json", "the body is a JSON object: {\"cmd\": [...], \"env\", "
			   "\"working_dir\", \"timeout_seconds\"}");
	for (int k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		if (exec_field(er, t, &doc, k, e) != 0)
			return -1;
	return request_exec_check(er, e);
}
