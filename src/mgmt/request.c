/* request.c: create and exec requests read and checked (request.h), for every front end. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "mgmt/request.h"

static struct json_token tokens[4096];

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

/* "SRC:DST[:ro]" or {"source","target","read_only"}. */
static int parse_mount(struct create_req *req, struct request_text *t, const struct config *cfg,
		       const struct json_doc *doc, int m, struct request_error *e)
{
	struct docker_mount *dm = &req->mounts[req->nmounts];
	char real[PATH_MAX], why[512];
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
	for (int i = json_first(doc, val); i >= 0; i = json_next(doc, val, i)) {
		if (req->ncmd == LIMIT_SANDBOX_CMD_ARGS)
			return bad(e, 400, "bad_request", "at most %d cmd arguments",
				   LIMIT_SANDBOX_CMD_ARGS);
		if (!(req->cmd[req->ncmd++] = take_str(t, doc, i)))
			return bad(e, 400, "bad_request", "cmd is an array of strings");
	}
	return 0;
}

/* One field of the create's object. */
static int create_field(struct create_req *req, struct request_text *t, const struct config *cfg,
			const struct json_doc *doc, int k, struct request_error *e)
{
	int val = k + 1;

	if (json_str_eq(doc, k, "name")) {
		if (!(req->name = take_str(t, doc, val)))
			return bad(e, 400, "bad_request", "name is a string");
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
		int64_t n;

		if (json_int(doc, val, &n) != 0 || n < (int64_t)LIMIT_DISK_MIN_BYTES ||
		    (uint64_t)n > LIMIT_DISK_MAX_BYTES)
			return bad(e, 400, "bad_request", "disk_bytes is a whole number of bytes from "
				   "%llu to %llu", (unsigned long long)LIMIT_DISK_MIN_BYTES,
				   (unsigned long long)LIMIT_DISK_MAX_BYTES);
		req->disk_bytes = (uint64_t)n;
	} else if (json_str_eq(doc, k, "writable_root")) {
		if (json_bool(doc, val, &req->writable_root) != 0)
			return bad(e, 400, "bad_request", "writable_root is a boolean");
	} else if (json_str_eq(doc, k, "mounts")) {
		if (doc->tok[val].type != JSON_ARRAY)
			return bad(e, 400, "bad_request", "mounts is an array");
		for (int i = json_first(doc, val); i >= 0; i = json_next(doc, val, i))
			if (parse_mount(req, t, cfg, doc, i, e) != 0)
				return -1;
	} else {
		char key[64];

		/* the name is echoed only when it looks like a field's (a typo of one): any
		 * other may be a secret pasted in the wrong place */
		json_str(doc, k, key, sizeof(key));
		if (strlen(key) > 24 || strspn(key, "abcdefghijklmnopqrstuvwxyz_") != strlen(key))
			key[0] = '\0';
		return bad(e, 400, "bad_request", "unknown field%s%s (known: name image env mounts "
			   "network cmd labels disk_bytes writable_root)", key[0] ? " " : "", key);
	}
	return 0;
}

int request_create_parse(struct create_req *req, const struct config *cfg, const void *body,
			 size_t len, struct request_error *e)
{
	struct request_text t = { req->text, 0, sizeof(req->text) };
	struct json_doc doc;
	int r = 0;

	memset(req, 0, offsetof(struct create_req, text));
	req->text_len = 0;
	if (len == 0)
		return 0; /* every field has a default */
	if (json_parse(&doc, body, len, tokens, ARRAY_LEN(tokens)) != 0)
		return bad(e, 400, "bad_json", "the body is not valid JSON (byte %zu: %s)",
			   doc.err_offset, doc.err_what ? doc.err_what : "malformed");
	if (doc.tok[0].type != JSON_OBJECT)
		return bad(e, 400, "bad_request", "the body is a JSON object");
	for (int k = json_first(&doc, 0); r == 0 && k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		r = create_field(req, &t, cfg, &doc, k, e);
	req->text_len = t.len;
	if (r != 0)
		return -1;
	if (req->name && !policy_name_valid(req->name))
		return bad(e, 400, "bad_name", "a sandbox name matches ^[a-z][a-z0-9-]{1,62}$");
	return 0;
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
	} else {
		return bad(e, 400, "bad_request", "unknown field (known: cmd env working_dir "
			   "timeout_seconds)");
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
