/* admin.c: the admin API on the admin socket: HTTP/1.1 + JSON, peers checked at accept.
 *
 *   POST   /api/v1/containers          create (answers when ready: 201 + the sandbox)
 *   GET    /api/v1/containers          list
 *   GET    /api/v1/containers/NAME     inspect
 *   DELETE /api/v1/containers/NAME     remove (?force=1, ?keep_workspace=1)
 *   POST   /api/v1/containers/NAME/exec  run a command: chunked NDJSON, or with
 *                                        `Connection: Upgrade` + `Upgrade: tcp` the framed
 *                                        bidirectional stream (README)
 *   GET    /api/v1/containers/NAME/logs  a run's transcript (?run=, ?stream=stdout|stderr)
 *   GET    /api/v1/info                the daemon
 *   GET    /metrics                    Prometheus text
 *
 * Errors are {"error": {"code": ..., "message": ...}}. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "agent.pb-c.h"
#include "json/json.h"
#include "mgmt/daemon.h"
#include "mgmt/policy.h"
#include "version.h"

#define API "/api/v1"

static struct json_token tokens[4096];
static char item[16384]; /* one sandbox rendered, for a streamed list */

/* The fields of every response that carries JSON; the writer adds its framing. */
static const struct http_field json_fields[] = {
	{ "Content-Type", "application/json" },
	{ NULL, NULL },
};

static struct admin_conn *conn_at(int32_t i, uint32_t gen)
{
	struct admin_conn *c;

	if (i < 0 || (uint32_t)i >= agenticd->nconns)
		return NULL;
	c = &agenticd->conns[i];
	return c->phase != AC_FREE && c->gen == gen ? c : NULL;
}

static void conn_close(struct admin_conn *c)
{
	if (c->fd >= 0) {
		loop_unwatch(c->fd);
		close(c->fd);
		c->fd = -1;
	}
	if (c->phase == AC_EXEC && c->exec >= 0)
		exec_detach(c->exec);
	c->exec = -1;
	if (c->spill_fd >= 0)
		close(c->spill_fd);
	if (c->file_fd >= 0)
		close(c->file_fd);
	c->spill_fd = c->file_fd = -1;
	/* a create still reads its request from here: the slot waits for it */
	c->phase = c->phase == AC_WAIT ? AC_ZOMBIE : AC_FREE;
}

static void watch(struct admin_conn *c, uint32_t events)
{
	struct epoll_event ev = { .events = events | EPOLLRDHUP };

	ev.data.u64 = ((uint64_t)TAG_ADMIN_CONN << 32) | (uint32_t)(c - agenticd->conns);
	epoll_ctl(agenticd->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* ---- responses ---- */

/* Starts the output with a whole response (fields NULL: JSON); on failure, a bodiless 500. */
static void respond_raw(struct admin_conn *c, int status, const struct http_field *fields,
			const void *body, size_t body_len)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	if (http_response_write(&b, status, fields ? fields : json_fields, !c->keep_alive, body,
				body_len) != 0) {
		c->keep_alive = false;
		http_response_write(&b, 500, json_fields, true, NULL, 0);
	}
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	c->phase = AC_WRITE;
}

/* A response sent at once, beside the connection's output: 100 Continue, or the refusal of a
 * connection there is no slot for (it closes then). */
static ssize_t send_now(int fd, int status, const struct http_field *fields, const void *body,
			size_t len)
{
	char out[512];
	struct buf b;

	buf_init(&b, out, sizeof(out));
	if ((status < 200 ? http_response_head_write(&b, status, NULL, HTTP_NO_BODY, false)
			  : http_response_write(&b, status, fields, true, body, len)) != 0)
		return -1;
	return send(fd, b.data, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* Sends a whole JSON body built into `body`, with a newline after it. */
static void respond(struct admin_conn *c, int status, struct buf *body)
{
	if (buf_append(body, "\n", 1) != 0) {
		c->keep_alive = false;
		respond_raw(c, 500, NULL, NULL, 0);
		return;
	}
	respond_raw(c, status, NULL, body->data, body->len);
}

static void respond_error(struct admin_conn *c, int status, const char *code, const char *msg)
{
	static char text[8192];
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "error");
	json_obj_begin(&w);
	json_key(&w, "code");
	json_str_write(&w, code);
	json_key(&w, "message");
	json_str_write(&w, msg);
	json_obj_end(&w);
	json_obj_end(&w);
	json_writer_finish(&w);
	respond(c, status, &b);
}

static void respond_sandbox(struct admin_conn *c, int status, const struct sandbox *sb)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, item, sizeof(item));
	json_writer_init(&w, &b);
	sandbox_json(&w, sb);
	if (json_writer_finish(&w) != 0) {
		respond_error(c, 500, "internal", "the sandbox does not fit the response buffer");
		return;
	}
	respond(c, status, &b);
}

static void flush(struct admin_conn *c);

/* The connection waiting at (i, gen) for a create or remove to end, or NULL: gone, or a
 * zombie (its client left), whose slot is freed now that nothing will answer it. */
static struct admin_conn *waiter(int32_t i, uint32_t gen)
{
	struct admin_conn *c = conn_at(i, gen);

	if (c && c->phase == AC_ZOMBIE) {
		c->phase = AC_FREE;
		return NULL;
	}
	return c;
}

void admin_finish_sandbox(int32_t i, uint32_t gen, const struct sandbox *sb, int status)
{
	struct admin_conn *c = waiter(i, gen);

	if (!c)
		return;
	respond_sandbox(c, status, sb);
	flush(c);
}

void admin_finish_error(int32_t i, uint32_t gen, int status, const char *code,
			const char *message)
{
	struct admin_conn *c = waiter(i, gen);

	if (!c)
		return;
	respond_error(c, status, code, message);
	flush(c);
}

/* ---- the list, streamed one sandbox per chunk ---- */

static int chunk(struct admin_conn *c, const void *data, size_t len)
{
	char hdr[16];
	int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);

	if ((size_t)n + len + 2 > sizeof(c->out) - c->out_len)
		return ERR_LIMIT;
	memcpy(c->out + c->out_len, hdr, (size_t)n);
	memcpy(c->out + c->out_len + n, data, len);
	memcpy(c->out + c->out_len + n + len, "\r\n", 2);
	c->out_len += (uint32_t)(n + len + 2);
	return 0;
}

/* Fills the output with as many sandboxes as fit; ends the list after the last. */
static void list_fill(struct admin_conn *c)
{
	while (c->list_cursor < agenticd->nsb) {
		const struct sandbox *sb = &agenticd->sb[c->list_cursor];
		struct buf b;
		struct json_writer w;

		if (sb->state == SB_FREE) {
			c->list_cursor++;
			continue;
		}
		buf_init(&b, item, sizeof(item));
		if (!c->list_first)
			buf_append(&b, ",", 1);
		json_writer_init(&w, &b);
		sandbox_json(&w, sb);
		if (json_writer_finish(&w) != 0 || chunk(c, b.data, b.len) != 0)
			return; /* room comes back as the socket drains */
		c->list_first = false;
		c->list_cursor++;
	}
	if (chunk(c, "]}\n", 3) == 0 && sizeof(c->out) - c->out_len >= 5) {
		memcpy(c->out + c->out_len, "0\r\n\r\n", 5);
		c->out_len += 5;
		c->phase = AC_WRITE;
	}
}

static void route_list(struct admin_conn *c)
{
	struct buf b;

	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, json_fields, HTTP_CHUNKED, !c->keep_alive);
	c->out_len = (uint32_t)b.len;
	c->out_off = 0;
	chunk(c, "{\"containers\":[", 15);
	c->list_cursor = 0;
	c->list_first = true;
	c->phase = AC_LIST;
	list_fill(c);
}

/* ---- info ---- */

static void route_info(struct admin_conn *c)
{
	static char text[4096];
	const struct config *cfg = &agenticd->cfg;
	struct buf b;
	struct json_writer w;
	char pool[24];
	uint32_t a = cfg->subnet_pool_base;
	uint32_t ready = 0, connected = 0;

	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		ready += agenticd->sb[i].state == SB_READY;
		connected += agenticd->sb[i].agent_ready;
	}
	snprintf(pool, sizeof(pool), "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
		 a & 255, cfg->subnet_pool_prefix);
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "version");
	json_str_write(&w, AGENTIC_VERSION);
	json_key(&w, "engine_version");
	json_str_write(&w, agenticd->engine_version);
	json_key(&w, "api_version");
	json_str_write(&w, agenticd->dc.version);
	json_key(&w, "sandboxes");
	json_int_write(&w, agenticd->live);
	json_key(&w, "sandboxes_ready");
	json_int_write(&w, ready);
	json_key(&w, "agents_ready");
	json_int_write(&w, connected);
	json_key(&w, "max_sandboxes");
	json_int_write(&w, cfg->max_sandboxes);
	json_key(&w, "warm_networks");
	json_int_write(&w, agenticd->pool.n);
	json_key(&w, "control_uid_range");
	json_obj_begin(&w);
	json_key(&w, "min");
	json_int_write(&w, cfg->control_uid_min);
	json_key(&w, "max");
	json_int_write(&w, cfg->control_uid_max);
	json_key(&w, "used");
	json_int_write(&w, agenticd->uids.used);
	json_obj_end(&w);
	json_key(&w, "subnet_pool");
	json_obj_begin(&w);
	json_key(&w, "cidr");
	json_str_write(&w, pool);
	json_key(&w, "used");
	json_int_write(&w, agenticd->subnets.used - agenticd->nforeign);
	json_key(&w, "foreign");
	json_int_write(&w, agenticd->nforeign);
	json_obj_end(&w);
	json_key(&w, "memory_budget_bytes");
	json_int_write(&w, (int64_t)agenticd->budget);
	json_key(&w, "agent_socket");
	json_str_write(&w, cfg->agent_socket_dir);
	json_key(&w, "agentshare_root");
	json_str_write(&w, cfg->agentshare_root);
	json_key(&w, "refused_agents");
	json_int_write(&w, (int64_t)agenticd->refused_agents);
	json_key(&w, "refused_admins");
	json_int_write(&w, (int64_t)agenticd->refused_admins);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		respond_error(c, 500, "internal", "info does not fit its buffer");
		return;
	}
	respond(c, 200, &b);
}

/* ---- create: the request ---- */

/* Copies a string token into the request's text; NULL when it does not fit or holds NUL. */
static const char *take_str(struct create_req *req, const struct json_doc *doc, int idx)
{
	char *out = req->text + req->text_len;
	int n;

	if (idx < 0 || doc->tok[idx].type != JSON_STRING)
		return NULL;
	n = json_str(doc, idx, out, sizeof(req->text) - req->text_len);
	if (n < 0)
		return NULL;
	req->text_len += (uint32_t)n + 1;
	return out;
}

static const char *take_fmt(struct create_req *req, const char *a, const char *b)
{
	char *out = req->text + req->text_len;
	int n = snprintf(out, sizeof(req->text) - req->text_len, "%s=%s", a, b);

	if (n < 0 || (size_t)n >= sizeof(req->text) - req->text_len)
		return NULL;
	req->text_len += (uint32_t)n + 1;
	return out;
}

struct verdict {
	int status;
	const char *code;
	char message[512];
};

static int bad(struct verdict *v, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int bad(struct verdict *v, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	v->status = status;
	v->code = code;
	va_start(ap, fmt);
	vsnprintf(v->message, sizeof(v->message), fmt, ap);
	va_end(ap);
	return -1;
}

static int env_entry(struct create_req *req, const char *kv, struct verdict *v)
{
	const char *eq = kv ? strchr(kv, '=') : NULL;

	if (!eq || eq == kv)
		return bad(v, 400, "bad_request", "env entries are KEY=VALUE with a non-empty KEY");
	if (strncmp(kv, "AGENT_", 6) == 0)
		return bad(v, 422, "refused", "env keys starting with AGENT_ are the init's own");
	if (req->nenv == LIMIT_SANDBOX_ENV)
		return bad(v, 400, "bad_request", "at most %d env entries", LIMIT_SANDBOX_ENV);
	req->env[req->nenv++] = kv;
	return 0;
}

static int parse_env(struct create_req *req, const struct json_doc *doc, int env,
		     struct verdict *v)
{
	if (doc->tok[env].type == JSON_OBJECT) {
		for (int k = json_first(doc, env); k >= 0; k = json_next(doc, env, json_next(doc, env, k))) {
			const char *key = take_str(req, doc, k);
			const char *val = take_str(req, doc, k + 1);

			if (!key || !val)
				return bad(v, 400, "bad_request", "env values must be strings (and fit %u bytes in all)",
					   LIMIT_ADMIN_BODY_BYTES);
			if (strchr(key, '=') || env_entry(req, take_fmt(req, key, val), v) != 0)
				return v->status ? -1 : bad(v, 400, "bad_request", "env keys may not hold '='");
		}
		return 0;
	}
	if (doc->tok[env].type != JSON_ARRAY)
		return bad(v, 400, "bad_request", "env is an object of strings or an array of \"KEY=VALUE\"");
	for (int i = json_first(doc, env); i >= 0; i = json_next(doc, env, i))
		if (env_entry(req, take_str(req, doc, i), v) != 0)
			return -1;
	return 0;
}

/* "SRC:DST[:ro]" or {"source","target","read_only"}. */
static int parse_mount(struct create_req *req, const struct json_doc *doc, int m,
		       struct verdict *v)
{
	struct docker_mount *dm = &req->mounts[req->nmounts];
	char real[PATH_MAX], why[512];
	const char *src, *dst;
	char *s;
	bool ro = false;

	if (req->nmounts == LIMIT_SANDBOX_MOUNTS)
		return bad(v, 400, "bad_request", "at most %d mounts", LIMIT_SANDBOX_MOUNTS);
	if (doc->tok[m].type == JSON_OBJECT) {
		int r = json_obj_get(doc, m, "read_only");

		src = take_str(req, doc, json_obj_get(doc, m, "source"));
		dst = take_str(req, doc, json_obj_get(doc, m, "target"));
		if (r >= 0 && json_bool(doc, r, &ro) != 0)
			return bad(v, 400, "bad_request", "mounts[].read_only is a boolean");
	} else {
		char *colon;

		s = (char *)take_str(req, doc, m);
		if (!s || !(colon = strchr(s, ':')))
			return bad(v, 400, "bad_request", "mounts are \"SRC:DST[:ro]\" or objects");
		*colon = '\0';
		src = s;
		dst = colon + 1;
		if ((colon = strchr(colon + 1, ':'))) {
			*colon = '\0';
			if (strcmp(colon + 1, "ro") == 0)
				ro = true;
			else if (strcmp(colon + 1, "rw") != 0)
				return bad(v, 400, "bad_request", "a mount's mode is ro or rw");
		}
	}
	if (!src || !dst || !*src || !*dst)
		return bad(v, 400, "bad_request", "a mount needs a source and a target");
	if (!realpath(src, real))
		return bad(v, 422, "refused", "mount source %s: %s", src, strerror(errno));
	switch (policy_mount_check(&agenticd->cfg, real, dst, why, sizeof(why))) {
	case 0:
		break;
	case -EPERM:
		return bad(v, 422, "refused", "%s", why);
	default:
		return bad(v, 400, "bad_request", "%s", why);
	}
	/* the engine resolves the path again at the start: only a path nobody but root can
	 * change gets that far, and the bind is checked against this in the started container */
	if (policy_mount_source(real, &req->mount_id[req->nmounts], why, sizeof(why)) != 0)
		return bad(v, 422, "refused", "%s", why);
	s = req->text + req->text_len;
	if (strlen(real) + 1 > sizeof(req->text) - req->text_len)
		return bad(v, 400, "bad_request", "request too large");
	strcpy(s, real);
	req->text_len += (uint32_t)strlen(real) + 1;
	dm->source = s;
	dm->target = dst;
	dm->read_only = ro;
	req->nmounts++;
	return 0;
}

static int parse_create(struct admin_conn *c, struct verdict *v)
{
	struct create_req *req = &c->req;
	struct json_doc doc;
	int root = 0;

	memset(req, 0, offsetof(struct create_req, text));
	req->text_len = 0;
	if (c->body_len == 0)
		return 0; /* every field has a default */
	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0)
		return bad(v, 400, "bad_json", "the body is not valid JSON (byte %zu: %s)",
			   doc.err_offset, doc.err_what ? doc.err_what : "malformed");
	if (doc.tok[root].type != JSON_OBJECT)
		return bad(v, 400, "bad_request", "the body is a JSON object");
	for (int k = json_first(&doc, root); k >= 0; k = json_next(&doc, root, json_next(&doc, root, k))) {
		int val = k + 1;

		if (json_str_eq(&doc, k, "name")) {
			if (!(req->name = take_str(req, &doc, val)))
				return bad(v, 400, "bad_request", "name is a string");
		} else if (json_str_eq(&doc, k, "image")) {
			if (!(req->image = take_str(req, &doc, val)) || !*req->image ||
			    strlen(req->image) >= CONFIG_STR_BYTES)
				return bad(v, 400, "bad_request", "image is a non-empty string");
		} else if (json_str_eq(&doc, k, "network")) {
			if (!(req->network = take_str(req, &doc, val)) || !*req->network ||
			    strlen(req->network) >= SB_NET_BYTES)
				return bad(v, 400, "bad_request", "network is a network name");
		} else if (json_str_eq(&doc, k, "env")) {
			if (parse_env(req, &doc, val, v) != 0)
				return -1;
		} else if (json_str_eq(&doc, k, "cmd")) {
			if (doc.tok[val].type != JSON_ARRAY)
				return bad(v, 400, "bad_request", "cmd is an array of strings");
			for (int i = json_first(&doc, val); i >= 0; i = json_next(&doc, val, i)) {
				if (req->ncmd == LIMIT_SANDBOX_CMD_ARGS)
					return bad(v, 400, "bad_request", "at most %d cmd arguments",
						   LIMIT_SANDBOX_CMD_ARGS);
				if (!(req->cmd[req->ncmd++] = take_str(req, &doc, i)))
					return bad(v, 400, "bad_request", "cmd is an array of strings");
			}
		} else if (json_str_eq(&doc, k, "labels")) {
			if (doc.tok[val].type != JSON_OBJECT)
				return bad(v, 400, "bad_request", "labels is an object of strings");
			for (int l = json_first(&doc, val); l >= 0;
			     l = json_next(&doc, val, json_next(&doc, val, l))) {
				const char *key = take_str(req, &doc, l), *lv = take_str(req, &doc, l + 1);

				if (!key || !lv)
					return bad(v, 400, "bad_request", "labels is an object of strings");
				if (!policy_label_key_allowed(key))
					return bad(v, 422, "refused", "label keys starting with agentic- "
						   "are reserved (%.64s)", key);
				if (req->nlabels == LIMIT_SANDBOX_LABELS)
					return bad(v, 400, "bad_request", "at most %d labels",
						   LIMIT_SANDBOX_LABELS);
				req->labels[req->nlabels++] = (struct docker_kv){ key, lv };
			}
		} else if (json_str_eq(&doc, k, "disk_bytes")) {
			int64_t n;

			if (json_int(&doc, val, &n) != 0 || n < (int64_t)LIMIT_DISK_MIN_BYTES ||
			    (uint64_t)n > LIMIT_DISK_MAX_BYTES)
				return bad(v, 400, "bad_request", "disk_bytes is a whole number of bytes "
					   "from %llu to %llu", (unsigned long long)LIMIT_DISK_MIN_BYTES,
					   (unsigned long long)LIMIT_DISK_MAX_BYTES);
			req->disk_bytes = (uint64_t)n;
		} else if (json_str_eq(&doc, k, "writable_root")) {
			if (json_bool(&doc, val, &req->writable_root) != 0)
				return bad(v, 400, "bad_request", "writable_root is a boolean");
		} else if (json_str_eq(&doc, k, "mounts")) {
			if (doc.tok[val].type != JSON_ARRAY)
				return bad(v, 400, "bad_request", "mounts is an array");
			for (int i = json_first(&doc, val); i >= 0; i = json_next(&doc, val, i))
				if (parse_mount(req, &doc, i, v) != 0)
					return -1;
		} else {
			char key[64];

			json_str(&doc, k, key, sizeof(key));
			return bad(v, 400, "bad_request", "unknown field %s (known: name image env "
				   "mounts network cmd labels disk_bytes writable_root)", key);
		}
	}
	if (req->name && !policy_name_valid(req->name))
		return bad(v, 400, "bad_name", "a sandbox name matches ^[a-z][a-z0-9-]{1,62}$");
	return 0;
}

/* The request's cmd, labels and mounts, kept with the sandbox. */
static int keep_request(struct sandbox *sb, const struct create_req *req)
{
	int r = 0;

	for (uint32_t i = 0; r == 0 && i < req->ncmd; i++)
		r = strrun_add(sb->cmd, &sb->cmd_len, sizeof(sb->cmd), req->cmd[i]);
	for (uint32_t i = 0; r == 0 && i < req->nlabels; i++) {
		r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels), req->labels[i].key);
		if (r == 0)
			r = strrun_add(sb->labels, &sb->labels_len, sizeof(sb->labels),
				       req->labels[i].value);
	}
	for (uint32_t i = 0; r == 0 && i < req->nmounts; i++) {
		r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts), req->mounts[i].source);
		if (r == 0)
			r = strrun_add(sb->mounts, &sb->mounts_len, sizeof(sb->mounts),
				       req->mounts[i].target);
		if (req->mounts[i].read_only)
			sb->mount_ro |= 1u << i;
		sb->mount_id[i] = req->mount_id[i];
	}
	sb->ncmd = (uint16_t)req->ncmd;
	sb->nlabels = (uint16_t)req->nlabels;
	sb->nmounts = (uint16_t)req->nmounts;
	return r;
}

static void route_create(struct admin_conn *c)
{
	struct verdict v = { 0 };
	struct create_req *req = &c->req;
	struct sandbox *sb;
	char hex[16];

	if (agenticd->stopping) {
		respond_error(c, 503, "shutting_down", "agenticd is shutting down");
		return;
	}
	if (parse_create(c, &v) != 0) {
		respond_error(c, v.status, v.code, v.message);
		return;
	}
	if (req->name && sandbox_by_name(req->name)) {
		respond_error(c, 409, "name_taken", "a sandbox with that name exists");
		return;
	}
	sb = sandbox_new();
	if (!sb) {
		char m[160];

		snprintf(m, sizeof(m), "at capacity: %u sandboxes exist (max_sandboxes)",
			 agenticd->cfg.max_sandboxes);
		log_warn("create refused", "reason=capacity max_sandboxes=%u",
			 agenticd->cfg.max_sandboxes);
		respond_error(c, 503, "capacity", m);
		return;
	}
	if (req->name) {
		snprintf(sb->name, sizeof(sb->name), "%s", req->name);
	} else {
		do {
			random_hex(hex, 8);
			snprintf(sb->name, sizeof(sb->name), "sbx-%s", hex);
		} while (sandbox_by_name(sb->name) != sb);
	}
	if (keep_request(sb, req) != 0) {
		sandbox_free(sb);
		respond_error(c, 400, "bad_request", "cmd, labels or mounts too long to keep");
		return;
	}
	sb->waiter = (int32_t)(c - agenticd->conns);
	sb->waiter_gen = c->gen;
	c->phase = AC_WAIT;
	lifecycle_create(sb, req);
}

/* ---- remove and inspect ---- */

static bool query_flag(const char *query, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && (p[n] == '=' || p[n] == '&' || !p[n]))
			return p[n] != '=' || (p[n + 1] == '1' || strncmp(p + n + 1, "true", 4) == 0);
		p = strchr(p, '&');
		if (p)
			p++;
	}
	return false;
}

static void route_remove(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	if (sb->state == SB_CREATING) {
		respond_error(c, 409, "busy", "the sandbox is still being created");
		return;
	}
	if (sb->state == SB_REMOVING) {
		respond_error(c, 409, "busy", "the sandbox is already being removed");
		return;
	}
	sb->waiter = (int32_t)(c - agenticd->conns);
	sb->waiter_gen = c->gen;
	c->phase = AC_WAIT;
	lifecycle_remove(sb, query_flag(query, "force"), query_flag(query, "keep_workspace"));
}

/* ---- exec: NDJSON, or the upgraded stream (README: "the exec stream") ---- */

#define FRAME_STDIN 0
#define FRAME_STDOUT 1
#define FRAME_STDERR 2
#define FRAME_EXIT 3

static char line[LIMIT_ADMIN_OUT_BYTES]; /* one NDJSON line or frame being built */

static struct admin_conn *exec_conn(int32_t i)
{
	return i >= 0 && (uint32_t)i < agenticd->nconns && agenticd->conns[i].phase == AC_EXEC
		       ? &agenticd->conns[i] : NULL;
}

/* Output beyond `out` goes to an unlinked file next to the transcripts, read back as the
 * client drains: a slow client costs disk, never memory, and never blocks the sandbox. The
 * disk is bounded too, so that a client that stops reading never takes the transcripts' room:
 * -EFBIG once the client would be more than exec_spill_max_bytes behind, -EDQUOT once the
 * spill would leave less than 1/LIMIT_EXEC_SPILL_FREE_DIV of the filesystem available. */
static int spill_room(const struct admin_conn *c, size_t len)
{
	struct statvfs st;

	if (c->spill_w - c->spill_r + len > agenticd->cfg.exec_spill_max_bytes)
		return -EFBIG;
	if ((c->spill_w == 0 || c->spill_w / LIMIT_EXEC_SPILL_CHECK_BYTES !=
				(c->spill_w + len) / LIMIT_EXEC_SPILL_CHECK_BYTES) &&
	    fstatvfs(c->spill_fd, &st) == 0 && st.f_bavail < st.f_blocks / LIMIT_EXEC_SPILL_FREE_DIV)
		return -EDQUOT;
	return 0;
}

static int queue(struct admin_conn *c, const void *data, size_t len)
{
	int r;

	if (c->spill_fd < 0) {
		if (c->out_off && c->out_off == c->out_len)
			c->out_off = c->out_len = 0;
		if (len > sizeof(c->out) - c->out_len && c->out_off) {
			memmove(c->out, c->out + c->out_off, c->out_len - c->out_off);
			c->out_len -= c->out_off;
			c->out_off = 0;
		}
		if (len <= sizeof(c->out) - c->out_len) {
			memcpy(c->out + c->out_len, data, len);
			c->out_len += (uint32_t)len;
			return 0;
		}
		c->spill_fd = open(agenticd->cfg.agentshare_root, O_TMPFILE | O_RDWR | O_CLOEXEC,
				   0600);
		if (c->spill_fd < 0)
			return -errno;
		c->spill_w = c->spill_r = 0;
	}
	r = spill_room(c, len);
	if (r != 0)
		return r;
	for (const uint8_t *p = data; len;) {
		ssize_t n = pwrite(c->spill_fd, p, len, (off_t)c->spill_w);

		if (n <= 0)
			return n < 0 ? -errno : -ENOSPC;
		p += n;
		len -= (size_t)n;
		c->spill_w += (uint64_t)n;
	}
	return 0;
}

/* The session stops feeding c (why: queue's error): the command runs on into its transcript,
 * and the client gets what is queued, then the end of its answer without the final frame
 * (HTTP) or the call's end with RESOURCE_EXHAUSTED and c->error (gRPC): never a short answer
 * that looks whole. */
static void drop(struct admin_conn *c, int why)
{
	unsigned long long behind = c->out_len - c->out_off + c->spill_w - c->spill_r;

	if (why == -EFBIG || why == -EDQUOT) {
		log_warn("exec client dropped", "reason=%s behind_bytes=%llu",
			 why == -EFBIG ? "spill_limit" : "disk_reserve", behind);
		snprintf(c->error, sizeof(c->error), "output delivery stopped: %s; the command "
			 "runs on and its transcript keeps every byte", why == -EFBIG
			 ? "this client fell further behind than exec_spill_max_bytes"
			 : "holding more for this client would take the disk room kept for "
			   "transcripts");
	} else {
		log_warn("exec client dropped", "reason=spill_error behind_bytes=%llu error=\"%s\"",
			 behind, strerror(-why));
		snprintf(c->error, sizeof(c->error), "output delivery stopped: the spill file "
			 "failed (%s); the command runs on and its transcript keeps every byte",
			 strerror(-why));
	}
	if (c->exec >= 0)
		exec_detach(c->exec);
	c->exec = -1;
	c->dropped = true;
	c->keep_alive = false;
}

/* Refills an empty `out` from the spill file (or the transcript file of a logs answer). */
static void refill(struct admin_conn *c)
{
	ssize_t n;

	c->out_off = c->out_len = 0;
	if (c->phase == AC_FILE && c->file_fd >= 0 && c->file_left) {
		n = read(c->file_fd, c->out, c->file_left < sizeof(c->out) ? c->file_left
									   : sizeof(c->out));
		if (n <= 0) {
			c->file_left = 0; /* the size was promised: the connection closes short */
			c->keep_alive = false;
			return;
		}
		c->out_len = (uint32_t)n;
		c->file_left -= (uint64_t)n;
		return;
	}
	if (c->spill_fd < 0 || c->spill_r == c->spill_w)
		return;
	n = pread(c->spill_fd, c->out, sizeof(c->out), (off_t)c->spill_r);
	if (n <= 0) {
		drop(c, n < 0 ? -errno : -EIO);
		close(c->spill_fd);
		c->spill_fd = -1;
		c->spill_r = c->spill_w;
		return;
	}
	c->out_len = (uint32_t)n;
	c->spill_r += (uint64_t)n;
	if (c->spill_r == c->spill_w) {
		close(c->spill_fd);
		c->spill_fd = -1;
	} else if (c->spill_r / LIMIT_EXEC_SPILL_CHECK_BYTES !=
		   (c->spill_r - (uint64_t)n) / LIMIT_EXEC_SPILL_CHECK_BYTES) {
		/* gives back the disk of what the client has taken; a filesystem without holes
		 * keeps it until the file closes, and spill_room still guards the transcripts */
		(void)fallocate(c->spill_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
				(off_t)(c->spill_r - c->spill_r % LIMIT_EXEC_SPILL_CHECK_BYTES));
	}
}

static int queue_chunked(struct admin_conn *c, const void *data, size_t len)
{
	char hdr[16];
	int n = snprintf(hdr, sizeof(hdr), "%zx\r\n", len);
	int r = queue(c, hdr, (size_t)n);

	if (r == 0)
		r = queue(c, data, len);
	if (r == 0)
		r = queue(c, "\r\n", 2);
	return r;
}

static size_t base64(const uint8_t *in, size_t len, char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0, i = 0;

	for (; i + 2 < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = tab[(v >> 6) & 63];
		out[o++] = tab[v & 63];
	}
	if (i < len) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = tab[v >> 18];
		out[o++] = tab[(v >> 12) & 63];
		out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	return o;
}

static void frame_header(uint8_t *h, int type, uint32_t len)
{
	h[0] = (uint8_t)type;
	h[1] = h[2] = h[3] = 0;
	h[4] = (uint8_t)(len >> 24);
	h[5] = (uint8_t)(len >> 16);
	h[6] = (uint8_t)(len >> 8);
	h[7] = (uint8_t)len;
}

int admin_exec_output(int32_t i, int stream, const void *data, size_t len)
{
	struct admin_conn *c = exec_conn(i);
	int r;

	if (!c)
		return -ENOTCONN;
	if (c->upgraded || c->call) {
		uint8_t h[8];

		frame_header(h, stream ? FRAME_STDERR : FRAME_STDOUT, (uint32_t)len);
		r = queue(c, h, 8);
		if (r == 0)
			r = queue(c, data, len);
	} else {
		const uint8_t *p = data;

		/* one line per piece, each small enough for `line` */
		for (r = 0; len && r == 0;) {
			size_t take = len < 6144 ? len : 6144, n;

			n = (size_t)snprintf(line, sizeof(line), "{\"stream\":\"%s\",\"data\":\"",
					     stream ? "stderr" : "stdout");
			n += base64(p, take, line + n);
			memcpy(line + n, "\"}\n", 3);
			r = queue_chunked(c, line, n + 3);
			p += take;
			len -= take;
		}
	}
	if (r != 0)
		drop(c, r);
	flush(c);
	return r;
}

void admin_exec_done(int32_t i, int32_t exit_code, int64_t duration_ms, const char *error,
		     const char *transcript_error)
{
	struct admin_conn *c = exec_conn(i);
	struct buf b;
	struct json_writer w;

	if (!c)
		return;
	if (c->call) {
		c->exit_code = exit_code;
		if (error && *error)
			snprintf(c->error, sizeof(c->error), "%s", error);
		else if (transcript_error)
			snprintf(c->error, sizeof(c->error), "transcript incomplete: %s",
				 transcript_error);
		c->exec = -1;
		flush(c);
		return;
	}
	buf_init(&b, line, sizeof(line) - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "exit_code");
	json_int_write(&w, exit_code);
	json_key(&w, "duration_ms");
	json_int_write(&w, duration_ms);
	if (error && *error) {
		json_key(&w, "error");
		json_str_write(&w, error);
	}
	if (transcript_error) {
		json_key(&w, "transcript_error");
		json_str_write(&w, transcript_error);
	}
	json_obj_end(&w);
	json_writer_finish(&w);
	c->exec = -1;
	if (c->upgraded) {
		uint8_t h[8];

		frame_header(h, FRAME_EXIT, (uint32_t)b.len);
		if (queue(c, h, 8) != 0 || queue(c, b.data, b.len) != 0)
			c->keep_alive = false;
	} else {
		line[b.len] = '\n';
		if (queue_chunked(c, line, b.len + 1) != 0 || queue(c, "0\r\n\r\n", 5) != 0)
			c->keep_alive = false;
	}
	flush(c);
}

/* Upgraded: stdin frames from the client, handed on as the session takes them. */
static void exec_read_stdin(struct admin_conn *c)
{
	while (c->exec >= 0 && c->roff < c->rlen) {
		uint32_t avail = c->rlen - c->roff;

		if (c->fhdr_len < 8) {
			uint32_t n = 8u - c->fhdr_len < avail ? 8u - c->fhdr_len : avail;

			memcpy(c->fhdr + c->fhdr_len, c->rbuf + c->roff, n);
			c->fhdr_len += (uint8_t)n;
			c->roff += n;
			if (c->fhdr_len < 8)
				break;
			c->fneed = (uint32_t)c->fhdr[4] << 24 | (uint32_t)c->fhdr[5] << 16 |
				   (uint32_t)c->fhdr[6] << 8 | c->fhdr[7];
			if (c->fhdr[0] != FRAME_STDIN) {
				/* unknown frame types are skipped, so clients may add some */
			} else if (c->fneed == 0) {
				exec_stdin(c->exec, "", 0, true);
				c->fhdr_len = 0;
			}
			continue;
		}
		if (c->fneed == 0) {
			c->fhdr_len = 0;
			continue;
		}
		uint32_t n = c->fneed < avail ? c->fneed : avail;
		size_t took = c->fhdr[0] == FRAME_STDIN ? exec_stdin(c->exec, c->rbuf + c->roff, n,
								       false) : n;

		if (took == 0)
			return; /* a chunk is in flight: wait for admin_exec_stdin_taken */
		c->roff += (uint32_t)took;
		c->fneed -= (uint32_t)took;
		if (c->fneed == 0)
			c->fhdr_len = 0;
	}
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
}

void admin_exec_stdin_taken(int32_t i)
{
	struct admin_conn *c = exec_conn(i);

	if (!c || !c->upgraded)
		return;
	exec_read_stdin(c);
	if (c->roff == c->rlen)
		watch(c, EPOLLIN | (c->out_off < c->out_len ? EPOLLOUT : 0));
}

static void exec_event(struct admin_conn *c, uint32_t events)
{
	if (events & EPOLLOUT)
		flush(c);
	if (c->phase != AC_EXEC || c->fd < 0)
		return;
	if (!(events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
		return;
	if (c->upgraded && c->roff < c->rlen)
		return; /* stdin waits for the session */
	for (;;) {
		ssize_t n = recv(c->fd, c->rbuf, sizeof(c->rbuf), 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n == 0 && c->upgraded && c->exec >= 0 && !(events & (EPOLLHUP | EPOLLERR))) {
			/* half-close: stdin ends, output goes on */
			exec_stdin(c->exec, "", 0, true);
			watch(c, c->out_off < c->out_len ? EPOLLOUT : 0);
			return;
		}
		if (n <= 0 || !c->upgraded) {
			if (n > 0)
				continue; /* nothing more is read on an NDJSON exec */
			conn_close(c);
			return;
		}
		c->roff = 0;
		c->rlen = (uint32_t)n;
		exec_read_stdin(c);
		if (c->roff < c->rlen) {
			watch(c, c->out_off < c->out_len ? EPOLLOUT : 0);
			return;
		}
	}
}

static int exec_strings(struct create_req *req, const struct json_doc *doc, int arr,
			const char **out, uint32_t *n, uint32_t max)
{
	if (doc->tok[arr].type != JSON_ARRAY)
		return -1;
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		if (*n == max || !(out[(*n)++] = take_str(req, doc, i)))
			return -1;
	}
	return 0;
}

static void route_exec(struct admin_conn *c, struct sandbox *sb)
{
	char hstore[256];
	struct buf head;
	static struct exec_req er;
	struct create_req *req = &c->req;
	struct verdict v = { 0 };
	struct json_doc doc;
	const char *up = http_parser_header(&c->parser, "upgrade");
	const char *conn = http_parser_header(&c->parser, "connection");
	int x;

	memset(&er, 0, sizeof(er));
	req->text_len = 0;
	req->nenv = 0;
	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT) {
		respond_error(c, 400, "bad_json", "the body is a JSON object: {\"cmd\": [...], "
			      "\"env\", \"working_dir\", \"timeout_seconds\"}");
		return;
	}
	for (int k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k))) {
		int val = k + 1;
		int64_t t;

		if (json_str_eq(&doc, k, "cmd")) {
			if (exec_strings(req, &doc, val, er.argv, &er.argc, LIMIT_SANDBOX_CMD_ARGS) != 0) {
				respond_error(c, 400, "bad_request", "cmd is an array of at most 64 strings");
				return;
			}
		} else if (json_str_eq(&doc, k, "env")) {
			if (parse_env(req, &doc, val, &v) != 0) {
				respond_error(c, v.status, v.code, v.message);
				return;
			}
		} else if (json_str_eq(&doc, k, "working_dir")) {
			if (!(er.working_dir = take_str(req, &doc, val)) ||
			    (er.working_dir[0] && er.working_dir[0] != '/')) {
				respond_error(c, 400, "bad_request", "working_dir is an absolute path");
				return;
			}
		} else if (json_str_eq(&doc, k, "timeout_seconds")) {
			if (json_int(&doc, val, &t) != 0 || t < 0 || t > 86400 * 365) {
				respond_error(c, 400, "bad_request", "timeout_seconds is a whole number "
					      ">= 0 (0: none)");
				return;
			}
			er.timeout_seconds = (int32_t)t;
		} else {
			respond_error(c, 400, "bad_request", "unknown field (known: cmd env "
				      "working_dir timeout_seconds)");
			return;
		}
	}
	if (er.argc == 0 || !er.argv[0][0]) {
		respond_error(c, 400, "bad_request", "cmd needs at least the program");
		return;
	}
	for (uint32_t i = 0; i < req->nenv; i++)
		er.env[er.nenv++] = req->env[i];
	if (sb->state != SB_READY || !sb->agent_ready) {
		respond_error(c, 409, "not_ready", sb->state == SB_READY
			      ? "the sandbox's agent is not connected (yet)"
			      : "the sandbox is not ready");
		return;
	}
	c->upgraded = up && strcasecmp(up, "tcp") == 0 && conn && strcasestr(conn, "upgrade");
	x = exec_begin(sb, &er, (int32_t)(c - agenticd->conns), c->upgraded ? EXEC_RAW : EXEC_NDJSON);
	if (exec_transcript_error(x)) {
		char why[160];

		snprintf(why, sizeof(why), "the sandbox's transcript cannot be written (%s); no "
			 "command was started", strerror(-x));
		respond_error(c, 507, "transcript_unwritable", why);
		return;
	}
	if (x < 0) {
		respond_error(c, x == ERR_LIMIT || x == -EAGAIN ? 503 : 409,
			      x == ERR_STATE ? "not_ready" : "busy",
			      x == ERR_STATE ? "the sandbox's agent is not connected"
					     : "the sandbox runs as many commands as it may, or its "
					       "agent cannot take more now");
		return;
	}
	c->exec = x;
	c->fhdr_len = 0;
	c->out_off = c->out_len = 0;
	buf_init(&head, hstore, sizeof(hstore));
	if (c->upgraded) {
		static const struct http_field fields[] = {
			{ "Content-Type", "application/vnd.agentic.multiplexed-stream" },
			{ "Connection", "Upgrade" },
			{ "Upgrade", "tcp" },
			{ NULL, NULL },
		};

		c->keep_alive = false;
		http_response_head_write(&head, 101, fields, HTTP_NO_BODY, false);
	} else {
		static const struct http_field fields[] = {
			{ "Content-Type", "application/x-ndjson" },
			{ NULL, NULL },
		};

		http_response_head_write(&head, 200, fields, HTTP_CHUNKED, false);
	}
	queue(c, head.data, head.len);
	c->phase = AC_EXEC;
	/* bytes after the request are the first stdin frames */
	if (c->upgraded)
		exec_read_stdin(c);
	else
		c->roff = c->rlen = 0;
}

/* ---- logs: a run's stdout.log or stderr.log, as it is now ---- */

static void query_value(const char *query, const char *name, char *out, size_t size)
{
	size_t n = strlen(name);

	out[0] = '\0';
	for (const char *p = query; p && *p;) {
		if (strncmp(p, name, n) == 0 && p[n] == '=') {
			size_t l = strcspn(p + n + 1, "&");

			snprintf(out, size, "%.*s", (int)(l < size ? l : size - 1), p + n + 1);
			return;
		}
		p = strchr(p, '&');
		if (p)
			p++;
	}
}

static void route_logs(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static const struct http_field fields[] = {
		{ "Content-Type", "application/octet-stream" },
		{ NULL, NULL },
	};
	char run[64], stream[16];
	struct stat st;
	struct buf b;
	int fd, r, s;

	query_value(query, "run", run, sizeof(run));
	query_value(query, "stream", stream, sizeof(stream));
	if (stream[0] && strcmp(stream, "stdout") != 0 && strcmp(stream, "stderr") != 0) {
		respond_error(c, 400, "bad_request", "stream is stdout or stderr");
		return;
	}
	s = strcmp(stream, "stderr") == 0;
	r = runlog_open(sb, run, s, &fd);
	if (r == -EINVAL) {
		respond_error(c, 400, "bad_request", "run names a directory under runs/ (run-...)");
		return;
	}
	if (r != 0) {
		respond_error(c, 404, "not_found", run[0] ? "no such run" : "the sandbox has no run yet");
		return;
	}
	if (fstat(fd, &st) != 0) {
		close(fd);
		respond_error(c, 500, "internal", "cannot read the transcript");
		return;
	}
	c->file_fd = fd;
	c->file_left = (uint64_t)st.st_size;
	buf_init(&b, c->out, sizeof(c->out));
	http_response_head_write(&b, 200, fields, st.st_size, !c->keep_alive);
	c->out_off = 0;
	c->out_len = (uint32_t)b.len;
	c->phase = AC_FILE;
}

/* ---- /metrics: Prometheus text. Labels are fixed words only: never a name, an id, a value
 * from a request or a byte of output. ---- */

struct prov_hist {
	uint64_t bucket[10], sum_ms, count;
};
static struct prov_hist prov_hist;
static uint64_t refusals[AGENT_REFUSAL_REASONS];

void metrics_provision(int64_t ms)
{
	static const int64_t le[] = { 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000 };
	size_t i = 0;

	while (i < ARRAY_LEN(le) && ms > le[i])
		i++;
	prov_hist.bucket[i]++;
	prov_hist.sum_ms += (uint64_t)(ms < 0 ? 0 : ms);
	prov_hist.count++;
}

void metrics_refusal(int reason)
{
	if (reason >= 0 && reason < AGENT_REFUSAL_REASONS)
		refusals[reason]++;
}

static void hist(struct buf *b, const char *name, const char *help, const int64_t *le, size_t n,
		 const uint64_t *bucket, uint64_t sum_ms, uint64_t count)
{
	uint64_t cum = 0;

	buf_printf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
	for (size_t i = 0; i < n; i++) {
		cum += bucket[i];
		buf_printf(b, "%s_bucket{le=\"%g\"} %llu\n", name, (double)le[i] / 1000.0,
			   (unsigned long long)cum);
	}
	cum += bucket[n];
	buf_printf(b, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.3f\n%s_count %llu\n", name,
		   (unsigned long long)cum, name, (double)sum_ms / 1000.0, name,
		   (unsigned long long)count);
}

static void route_metrics(struct admin_conn *c)
{
	static const struct http_field text_fields[] = {
		{ "Content-Type", "text/plain; version=0.0.4" },
		{ NULL, NULL },
	};
	static char text[16384];
	static const int64_t prov_le[] = { 250, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000 };
	static const int64_t exec_le[] = { 1, 2, 5, 10, 20, 50, 100, 250, 500, 1000, 5000 };
	static const char *const states[] = { "creating", "ready", "removing", "conflict" };
	uint32_t by_state[4] = { 0 }, connected = 0;
	static char status[4096];
	struct buf b;
	size_t rss = 0;
	int fd;

	for (uint32_t i = 0; i < agenticd->nsb; i++) {
		const struct sandbox *sb = &agenticd->sb[i];

		if (sb->state >= SB_CREATING && sb->state <= SB_CONFLICT)
			by_state[sb->state - SB_CREATING]++;
		connected += sb->agent_ready;
	}
	/* read(2), not stdio: nothing may allocate once the daemon serves */
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, status, sizeof(status) - 1);
		const char *v;

		close(fd);
		status[n > 0 ? n : 0] = '\0';
		if ((v = strstr(status, "\nVmRSS:")))
			rss = strtoull(v + 8, NULL, 10);
	}
	buf_init(&b, text, sizeof(text));
	buf_printf(&b, "# HELP agentic_sandboxes Sandboxes by lifecycle state.\n"
		   "# TYPE agentic_sandboxes gauge\n");
	for (int i = 0; i < 4; i++)
		buf_printf(&b, "agentic_sandboxes{state=\"%s\"} %u\n", states[i], by_state[i]);
	buf_printf(&b, "# HELP agentic_agents_connected Sandboxes whose agent is connected and ready.\n"
		   "# TYPE agentic_agents_connected gauge\nagentic_agents_connected %u\n", connected);
	hist(&b, "agentic_provision_seconds", "Create request to sandbox ready.", prov_le,
	     ARRAY_LEN(prov_le), prov_hist.bucket, prov_hist.sum_ms, prov_hist.count);
	hist(&b, "agentic_exec_seconds", "Exec round trip: request sent to the init until its result.",
	     exec_le, ARRAY_LEN(exec_le), exec_stats.latency_bucket, exec_stats.latency_sum_ms,
	     exec_stats.latency_count);
	buf_printf(&b, "# HELP agentic_execs_total Commands started.\n# TYPE agentic_execs_total counter\n"
		   "agentic_execs_total %llu\n", (unsigned long long)exec_stats.started);
	buf_printf(&b, "# HELP agentic_stream_bytes_total Workload output bytes received (and written "
		   "to transcripts).\n# TYPE agentic_stream_bytes_total counter\n"
		   "agentic_stream_bytes_total{stream=\"stdout\"} %llu\n"
		   "agentic_stream_bytes_total{stream=\"stderr\"} %llu\n",
		   (unsigned long long)exec_stats.bytes[0], (unsigned long long)exec_stats.bytes[1]);
	buf_printf(&b, "# HELP agentic_identity_rejections_total Agent connections refused, by reason.\n"
		   "# TYPE agentic_identity_rejections_total counter\n");
	for (int i = 0; i < AGENT_REFUSAL_REASONS; i++)
		buf_printf(&b, "agentic_identity_rejections_total{reason=\"%s\"} %llu\n",
			   agent_refusal_name(i), (unsigned long long)refusals[i]);
	buf_printf(&b, "# HELP agentic_admin_rejections_total Admin connections refused (peer "
		   "credentials).\n# TYPE agentic_admin_rejections_total counter\n"
		   "agentic_admin_rejections_total %llu\n", (unsigned long long)agenticd->refused_admins);
	buf_printf(&b, "# HELP agentic_memory_budget_bytes Memory budget computed at start.\n"
		   "# TYPE agentic_memory_budget_bytes gauge\nagentic_memory_budget_bytes %zu\n"
		   "# HELP agentic_memory_resident_bytes Resident memory now (VmRSS).\n"
		   "# TYPE agentic_memory_resident_bytes gauge\nagentic_memory_resident_bytes %zu\n",
		   agenticd->budget, rss * 1024);
	if (buf_printf(&b, "%s", "") != 0) {
		respond_error(c, 500, "internal", "metrics do not fit the response buffer");
		return;
	}
	respond_raw(c, 200, text_fields, b.data, b.len);
}

/* ---- dispatch ---- */

static void dispatch(struct admin_conn *c)
{
	const struct http_parser *p = &c->parser;
	const char *method = http_parser_str(p, p->method);
	char target[512], *query, m[600];
	struct sandbox *sb;

	snprintf(target, sizeof(target), "%s", http_parser_str(p, p->target));
	query = strchr(target, '?');
	if (query)
		*query++ = '\0';
	if (!c->allowed) {
		respond_error(c, 403, "forbidden", "the admin API is for root and members of the "
			      "admin group");
		return;
	}
	if (c->body_too_big) {
		c->keep_alive = false;
		snprintf(m, sizeof(m), "request body over %u bytes", LIMIT_ADMIN_BODY_BYTES);
		respond_error(c, 413, "too_large", m);
		return;
	}
	if (strcmp(target, API "/containers") == 0 || strcmp(target, API "/containers/") == 0) {
		if (strcmp(method, "POST") == 0)
			route_create(c);
		else if (strcmp(method, "GET") == 0)
			route_list(c);
		else
			respond_error(c, 405, "method_not_allowed", "use GET or POST");
		return;
	}
	if (strncmp(target, API "/containers/", sizeof(API "/containers/") - 1) == 0) {
		char *name = target + sizeof(API "/containers/") - 1;
		char *sub = strchr(name, '/');

		if (sub)
			*sub++ = '\0';
		sb = sandbox_by_name(name);
		if (sub) {
			bool exec = strcmp(sub, "exec") == 0, logs = strcmp(sub, "logs") == 0;

			if (!exec && !logs) {
				snprintf(m, sizeof(m), "no route %.16s %.200s (see README: admin API)",
					 method, http_parser_str(p, p->target));
				respond_error(c, 404, "not_found", m);
			} else if (strcmp(method, exec ? "POST" : "GET") != 0) {
				respond_error(c, 405, "method_not_allowed", exec ? "use POST" : "use GET");
			} else if (!sb) {
				snprintf(m, sizeof(m), "no sandbox is named %.64s", name);
				respond_error(c, 404, "not_found", m);
			} else if (exec) {
				route_exec(c, sb);
			} else {
				route_logs(c, sb, query);
			}
			return;
		}
		if (strcmp(method, "GET") != 0 && strcmp(method, "DELETE") != 0) {
			respond_error(c, 405, "method_not_allowed", "use GET or DELETE");
		} else if (!sb) {
			snprintf(m, sizeof(m), "no sandbox is named %.64s", name);
			respond_error(c, 404, "not_found", m);
		} else if (strcmp(method, "GET") == 0) {
			respond_sandbox(c, 200, sb);
		} else {
			route_remove(c, sb, query);
		}
		return;
	}
	if (strcmp(target, "/metrics") == 0) {
		if (strcmp(method, "GET") == 0)
			route_metrics(c);
		else
			respond_error(c, 405, "method_not_allowed", "use GET");
		return;
	}
	if (strcmp(target, API "/info") == 0) {
		if (strcmp(method, "GET") == 0)
			route_info(c);
		else
			respond_error(c, 405, "method_not_allowed", "use GET");
		return;
	}
	snprintf(m, sizeof(m), "no route %.16s %.200s (see README: admin API)", method, target);
	respond_error(c, 404, "not_found", m);
}

/* ---- gRPC Exec on the admin socket ---- */

static const char h2_preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/* An allowed connection that opens with the HTTP/2 preface goes to the admin gRPC server,
 * bytes unread. Returns true when the connection is no longer ours to read: handed over, or
 * a prefix of the preface is all there is yet (the bytes stay queued; edge-triggered, epoll
 * wakes us when more arrive instead of at every turn of the loop; a client that stops there
 * is closed by admin_tick as idle). */
static bool sniff_http2(struct admin_conn *c)
{
	char p[sizeof(h2_preface) - 1];
	ssize_t n = recv(c->fd, p, sizeof(p), MSG_PEEK);
	int fd, r;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0 || memcmp(p, h2_preface, (size_t)n) != 0) {
		c->sniffed = true;
		return false;
	}
	if ((size_t)n < sizeof(p)) {
		watch(c, EPOLLIN | EPOLLET);
		return true;
	}
	fd = c->fd;
	loop_unwatch(fd);
	c->fd = -1;
	conn_close(c);
	r = grpc_server_add_conn(agenticd->admin_grpc, fd, admin_grpc_methods,
				 admin_grpc_nmethods);
	if (r < 0) {
		log_warn("admin grpc connection refused", "error=\"%s\"", err_str(r));
		close(fd);
	}
	return true;
}

/* Ends the call (its slot is freed first: on_done may run inside grpc_call_finish). */
static void grpc_end(struct admin_conn *c, int status, const char *message)
{
	struct grpc_call *call = c->call;

	c->call = NULL;
	grpc_call_set_user(call, NULL);
	conn_close(c);
	grpc_call_finish(call, status, message, NULL, 0);
}

/* Sends what is queued as ExecOutput messages, one at a time as the call's send buffer
 * frees (on_writable), then the final one with complete set once the command has ended. */
static void grpc_pump(struct admin_conn *c)
{
	while (c->call) {
		Agentic__Sandbox__V1__ExecOutput o = AGENTIC__SANDBOX__V1__EXEC_OUTPUT__INIT;
		uint32_t avail, n;
		int r;

		if (c->out_off == c->out_len)
			refill(c);
		avail = c->out_len - c->out_off;
		if (!avail) {
			if (c->exec >= 0)
				return;
			if (c->dropped) {
				grpc_end(c, GRPC_RESOURCE_EXHAUSTED, c->error);
				return;
			}
			o.complete = 1;
			o.exit_code = c->exit_code;
			o.error = c->error;
			r = grpc_call_send(c->call, &o.base);
			if (r == -EAGAIN)
				return;
			grpc_end(c, r == 0 ? GRPC_OK : GRPC_RESOURCE_EXHAUSTED,
				 r == 0 ? NULL : "no message buffer free");
			return;
		}
		if (c->fhdr_len < 8) {
			n = 8u - c->fhdr_len < avail ? 8u - c->fhdr_len : avail;
			memcpy(c->fhdr + c->fhdr_len, c->out + c->out_off, n);
			c->fhdr_len += (uint8_t)n;
			c->out_off += n;
			if (c->fhdr_len == 8)
				c->fneed = (uint32_t)c->fhdr[4] << 24 | (uint32_t)c->fhdr[5] << 16 |
					   (uint32_t)c->fhdr[6] << 8 | c->fhdr[7];
			if (c->fhdr_len == 8 && c->fneed == 0)
				c->fhdr_len = 0;
			continue;
		}
		/* a piece fits one small message buffer, with room for the fields around it */
		n = c->fneed < avail ? c->fneed : avail;
		if (n > GRPC_SMALL_MESSAGE - 64)
			n = GRPC_SMALL_MESSAGE - 64;
		o.stream = c->fhdr[0] == FRAME_STDERR ? AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDERR
						      : AGENTIC__SANDBOX__V1__EXEC_OUTPUT__STREAM__STDOUT;
		o.data.data = c->out + c->out_off;
		o.data.len = n;
		r = grpc_call_send(c->call, &o.base);
		if (r == -EAGAIN)
			return;
		if (r != 0) {
			grpc_end(c, GRPC_RESOURCE_EXHAUSTED, "no message buffer free");
			return;
		}
		c->out_off += n;
		c->fneed -= n;
		if (c->fneed == 0)
			c->fhdr_len = 0;
	}
}

static void grpc_exec_message(struct grpc_call *call, const ProtobufCMessage *msg)
{
	static struct exec_req er;
	static char envtext[LIMIT_ADMIN_BODY_BYTES];
	const Agentic__Sandbox__V1__ExecRequest *rq = (const void *)msg;
	struct admin_conn *c = NULL;
	struct sandbox *sb;
	size_t used = 0;
	char m[160];
	int x;

	memset(&er, 0, sizeof(er));
	sb = sandbox_by_name(rq->agent_id);
	if (!sb) {
		snprintf(m, sizeof(m), "no sandbox is named %.64s", rq->agent_id);
		grpc_call_finish(call, GRPC_NOT_FOUND, m, NULL, 0);
		return;
	}
	if (!rq->command[0] || rq->n_args + 1 > LIMIT_SANDBOX_CMD_ARGS) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "command is needed, with at most 63 args",
				 NULL, 0);
		return;
	}
	if (rq->working_dir[0] && rq->working_dir[0] != '/') {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "working_dir is an absolute path", NULL, 0);
		return;
	}
	if (rq->timeout_seconds < 0 || rq->n_env > LIMIT_SANDBOX_ENV) {
		grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "timeout_seconds >= 0 (0: none); "
				 "env has at most LIMIT_SANDBOX_ENV entries", NULL, 0);
		return;
	}
	er.argv[er.argc++] = rq->command;
	for (size_t i = 0; i < rq->n_args; i++)
		er.argv[er.argc++] = rq->args[i];
	for (size_t i = 0; i < rq->n_env; i++) {
		const char *k = rq->env[i]->key, *v = rq->env[i]->value;
		size_t kl = strlen(k), vl = strlen(v);

		if (!kl || strchr(k, '=') || used + kl + vl + 2 > sizeof(envtext)) {
			grpc_call_finish(call, GRPC_INVALID_ARGUMENT, "env: a name without '=', "
					 "all within the request body limit", NULL, 0);
			return;
		}
		memcpy(envtext + used, k, kl);
		envtext[used + kl] = '=';
		memcpy(envtext + used + kl + 1, v, vl + 1);
		er.env[er.nenv++] = envtext + used;
		used += kl + vl + 2;
	}
	er.working_dir = rq->working_dir;
	er.timeout_seconds = rq->timeout_seconds;
	if (sb->state != SB_READY || !sb->agent_ready) {
		grpc_call_finish(call, GRPC_FAILED_PRECONDITION, sb->state == SB_READY
				 ? "the sandbox's agent is not connected (yet)"
				 : "the sandbox is not ready", NULL, 0);
		return;
	}
	for (uint32_t i = 0; i < agenticd->nconns && !c; i++)
		if (agenticd->conns[i].phase == AC_FREE)
			c = &agenticd->conns[i];
	if (!c) {
		grpc_call_finish(call, GRPC_RESOURCE_EXHAUSTED, "too many admin connections and "
				 "exec calls (max_admin_connections)", NULL, 0);
		return;
	}
	x = exec_begin(sb, &er, (int32_t)(c - agenticd->conns), EXEC_GRPC);
	if (exec_transcript_error(x)) {
		char why[160];

		snprintf(why, sizeof(why), "the sandbox's transcript cannot be written (%s); no "
			 "command was started", strerror(-x));
		grpc_call_finish(call, GRPC_UNAVAILABLE, why, NULL, 0);
		return;
	}
	if (x < 0) {
		grpc_call_finish(call, x == ERR_STATE ? GRPC_FAILED_PRECONDITION
						      : GRPC_RESOURCE_EXHAUSTED,
				 x == ERR_STATE ? "the sandbox's agent is not connected"
						: "the sandbox runs as many commands as it may, or its "
						  "agent cannot take more now", NULL, 0);
		return;
	}
	c->gen++;
	c->fd = -1;
	c->phase = AC_EXEC;
	c->exec = x;
	c->call = call;
	c->upgraded = false;
	c->keep_alive = false;
	c->rlen = c->roff = c->out_len = c->out_off = 0;
	c->fhdr_len = 0;
	c->fneed = 0;
	c->spill_fd = c->file_fd = -1;
	c->dropped = false;
	c->exit_code = -1;
	c->error[0] = '\0';
	c->uid = grpc_call_peer(call)->uid;
	c->pid = grpc_call_peer(call)->pid;
	c->allowed = true;
	grpc_call_set_user(call, c);
}

static void grpc_exec_writable(struct grpc_call *call)
{
	struct admin_conn *c = grpc_call_user(call);

	if (c)
		grpc_pump(c);
}

/* The client cancelled or went away: as with an HTTP client that leaves, the command runs
 * on and its transcript stays complete. */
static void grpc_exec_done(struct grpc_call *call, int status, const char *message)
{
	struct admin_conn *c = grpc_call_user(call);

	(void)status;
	(void)message;
	if (!c)
		return;
	c->call = NULL;
	grpc_call_set_user(call, NULL);
	conn_close(c);
}

const struct grpc_method admin_grpc_methods[] = {
	{
		.path = "/agentic.sandbox.v1.AgentService/Exec",
		.request = &agentic__sandbox__v1__exec_request__descriptor,
		.response = &agentic__sandbox__v1__exec_output__descriptor,
		.flags = GRPC_SERVER_STREAMING,
		.handler = {
			.on_message = grpc_exec_message,
			.on_writable = grpc_exec_writable,
			.on_done = grpc_exec_done,
		},
	},
};
const size_t admin_grpc_nmethods = ARRAY_LEN(admin_grpc_methods);

/* ---- I/O ---- */

static void grpc_pump(struct admin_conn *c);

static void flush(struct admin_conn *c)
{
	if (c->call) {
		grpc_pump(c);
		return;
	}
	for (;;) {
		ssize_t n;

		if (c->phase == AC_LIST && c->out_off == c->out_len) {
			c->out_off = c->out_len = 0;
			list_fill(c);
		}
		if ((c->phase == AC_EXEC || c->phase == AC_FILE) && c->out_off == c->out_len)
			refill(c);
		if (c->out_off == c->out_len)
			break;
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off, MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			/* an exec reads stdin on while its output waits: a client blocked writing
			 * stdin reads no output, and both would wait for each other forever */
			watch(c, EPOLLOUT | (c->phase == AC_EXEC && c->exec >= 0 && c->roff == c->rlen
						     ? EPOLLIN : 0));
			return;
		}
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->out_off += (uint32_t)n;
	}
	if (c->phase == AC_EXEC && c->exec >= 0) {
		/* all sent: read stdin (or notice a hang-up) while the command runs */
		if (c->roff == c->rlen)
			watch(c, EPOLLIN);
		return;
	}
	if (c->phase == AC_EXEC || (c->phase == AC_FILE && !c->file_left)) {
		if (c->file_fd >= 0)
			close(c->file_fd);
		c->file_fd = -1;
		c->phase = AC_WRITE;
	}
	if (c->phase != AC_WRITE)
		return;
	if (!c->keep_alive) {
		conn_close(c);
		return;
	}
	/* next request on the same connection */
	http_parser_reset(&c->parser);
	c->body_len = 0;
	c->body_too_big = false;
	c->out_off = c->out_len = 0;
	c->phase = AC_READ;
	c->upgraded = false;
	c->idle_since = clock_mono_ms();
	watch(c, EPOLLIN);
	admin_event((uint32_t)(c - agenticd->conns), 0);
}

/* Feeds what is buffered to the parser; dispatches a complete request. */
static void parse_buffered(struct admin_conn *c)
{
	while (c->phase == AC_READ && c->roff < c->rlen) {
		struct http_slice s;
		size_t used;
		int ev = http_parser_feed(&c->parser, c->rbuf + c->roff, c->rlen - c->roff, &used, &s);

		c->roff += (uint32_t)used;
		if (ev == HTTP_ERR_BODY_TOO_BIG) {
			c->body_too_big = true;
			c->keep_alive = false;
			dispatch(c);
			break;
		}
		if (ev < 0) {
			c->keep_alive = false;
			respond_error(c, ev == HTTP_ERR_HEAD_TOO_BIG ? 413 : 400, "bad_http",
				      ev == HTTP_ERR_HEAD_TOO_BIG ? "request head too large"
								  : "malformed HTTP request");
			break;
		}
		if (ev == HTTP_EV_HEAD) {
			const char *expect = http_parser_header(&c->parser, "expect");

			c->keep_alive = c->parser.keep_alive;
			/* curl asks before sending a body over 1 KiB; say yes at once */
			if (expect && strcasecmp(expect, "100-continue") == 0 && c->allowed &&
			    send_now(c->fd, 100, NULL, NULL, 0) < 0)
				log_debug("100-continue not sent", "error=%s", strerror(errno));
			if (c->parser.framing == HTTP_BODY_LENGTH &&
			    c->parser.content_length > LIMIT_ADMIN_BODY_BYTES) {
				c->body_too_big = true;
				c->keep_alive = false;
				dispatch(c);
				break;
			}
			ev = http_parser_feed(&c->parser, NULL, 0, &used, &s);
		}
		if (ev == HTTP_EV_BODY) {
			if (s.len > sizeof(c->body) - c->body_len) {
				c->body_too_big = true;
				c->keep_alive = false;
				dispatch(c);
				break;
			}
			memcpy(c->body + c->body_len, s.data, s.len);
			c->body_len += (uint32_t)s.len;
			ev = http_parser_feed(&c->parser, NULL, 0, &used, &s);
		}
		if (ev == HTTP_EV_DONE || ev == HTTP_EV_UPGRADE)
			dispatch(c);
	}
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
}

void admin_event(uint32_t index, uint32_t events)
{
	struct admin_conn *c = &agenticd->conns[index];

	if (c->phase == AC_FREE || c->phase == AC_ZOMBIE || c->fd < 0)
		return;
	if (c->phase == AC_WRITE || c->phase == AC_LIST || c->phase == AC_FILE) {
		flush(c);
		return;
	}
	if (c->phase == AC_EXEC) {
		exec_event(c, events);
		return;
	}
	if (c->phase == AC_WAIT) {
		/* the client may hang up while its create runs; the create goes on */
		if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
			conn_close(c);
		return;
	}
	if (!c->sniffed && c->allowed && sniff_http2(c))
		return;
	parse_buffered(c);
	while (c->phase == AC_READ) {
		ssize_t n = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, 0);

		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			conn_close(c);
			return;
		}
		c->rlen += (uint32_t)n;
		c->idle_since = clock_mono_ms();
		parse_buffered(c);
	}
	if (c->phase == AC_WRITE || c->phase == AC_LIST || c->phase == AC_EXEC ||
	    c->phase == AC_FILE)
		flush(c);
	else if (c->phase == AC_WAIT)
		watch(c, 0);
}

void admin_accept(void)
{
	for (;;) {
		int fd = accept4(agenticd->admin_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct admin_conn *c = NULL;
		char why[128], q[160];

		if (fd < 0)
			return;
		for (uint32_t i = 0; i < agenticd->nconns && !c; i++)
			if (agenticd->conns[i].phase == AC_FREE)
				c = &agenticd->conns[i];
		if (!c) {
			static const char busy[] = "{\"error\":{\"code\":\"capacity\",\"message\":"
				"\"too many admin connections (max_admin_connections)\"}}\n";

			if (send_now(fd, 503, json_fields, busy, sizeof(busy) - 1) < 0)
				log_debug("admin connection refused", "reason=%s", "capacity");
			close(fd);
			continue;
		}
		c->gen++;
		c->fd = fd;
		c->phase = AC_READ;
		c->rlen = c->roff = c->body_len = c->out_len = c->out_off = 0;
		c->body_too_big = false;
		c->exec = -1;
		c->upgraded = false;
		c->sniffed = false;
		c->call = NULL;
		c->spill_fd = c->file_fd = -1;
		c->dropped = false;
		c->idle_since = clock_mono_ms();
		http_parser_init(&c->parser, HTTP_PARSE_REQUEST, c->head, sizeof(c->head));
		c->parser.body_limit = LIMIT_ADMIN_BODY_BYTES;
		c->allowed = host_admin_peer_ok(fd, agenticd->admin_group_known, agenticd->admin_gid,
						&c->uid, &c->pid, why, sizeof(why)) == 0;
		if (!c->allowed) {
			agenticd->refused_admins++;
			log_warn("admin refused", "uid=%u pid=%d reason=%s", (unsigned)c->uid,
				 (int)c->pid, log_quote(q, sizeof(q), why));
		}
		loop_watch(fd, EPOLLIN | EPOLLRDHUP, TAG_ADMIN_CONN, (uint32_t)(c - agenticd->conns));
	}
}

void admin_tick(int64_t now)
{
	for (uint32_t i = 0; i < agenticd->nconns; i++) {
		struct admin_conn *c = &agenticd->conns[i];

		if ((c->phase == AC_READ || c->phase == AC_WRITE || c->phase == AC_LIST) &&
		    now - c->idle_since > LIMIT_ADMIN_IDLE_MS)
			conn_close(c);
	}
}

void admin_shutdown(void)
{
	if (agenticd->admin_fd >= 0) {
		loop_unwatch(agenticd->admin_fd);
		close(agenticd->admin_fd);
		agenticd->admin_fd = -1;
	}
}
