/* client.c: the connection pool, driving one call, version negotiation and error text. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker/docker_internal.h"

enum { CALL_RUNNING = 1, CALL_DONE, CALL_FAILED, CALL_STOPPED, CALL_ENDED };

/* The config with its defaults filled in; -EINVAL when out of range. */
static int config_norm(const struct docker_client_config *in, struct docker_client_config *out)
{
	*out = *in;
	if (!out->docker_host)
		out->docker_host = "unix:///var/run/docker.sock";
	if (!out->connections)
		out->connections = LIMIT_DOCKER_DEFAULT_CONNS;
	if (!out->response_limit)
		out->response_limit = LIMIT_DOCKER_RESPONSE_BYTES;
	if (!out->connect_timeout_ms)
		out->connect_timeout_ms = LIMIT_HTTP_CONNECT_TIMEOUT_MS;
	if (!out->read_timeout_ms)
		out->read_timeout_ms = LIMIT_DOCKER_READ_TIMEOUT_MS;
	/* a request body is built in the response buffer, and an event is held there */
	if (out->connections > LIMIT_DOCKER_CONNS || out->response_limit < LIMIT_DOCKER_EVENT_BYTES ||
	    out->response_limit < LIMIT_DOCKER_REQUEST_BYTES)
		return -EINVAL;
	return 0;
}

static size_t round16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

size_t docker_client_footprint(const struct docker_client_config *cfg)
{
	struct docker_client_config c;

	if (config_norm(cfg, &c) != 0)
		return 0;
	return round16(LIMIT_DOCKER_JSON_TOKENS * sizeof(struct json_token)) +
	       round16(c.connections * sizeof(struct docker_slot)) +
	       c.connections * round16(c.response_limit);
}

int docker_client_init(struct docker_client *dc, const struct docker_client_config *cfg)
{
	struct docker_client_config c;
	size_t size = docker_client_footprint(cfg);
	uint8_t *mem;
	int r;

	memset(dc, 0, sizeof(*dc));
	if ((r = config_norm(cfg, &c)) != 0)
		return r;
	if (strncmp(c.docker_host, "unix://", 7) != 0 || c.docker_host[7] != '/')
		return -EINVAL;
	if (strlen(c.docker_host + 7) >= sizeof(dc->socket_path))
		return -ENAMETOOLONG;
	strcpy(dc->socket_path, c.docker_host + 7);
	dc->nslots = c.connections;
	dc->response_limit = c.response_limit;
	dc->connect_timeout_ms = c.connect_timeout_ms;
	dc->read_timeout_ms = c.read_timeout_ms;
	dc->tok_cap = LIMIT_DOCKER_JSON_TOKENS;
	/* one allocation, carved: tokens, slots, then each slot's response buffer */
	mem = malloc(size);
	if (!mem)
		return -ENOMEM;
	dc->tok = (struct json_token *)mem;
	mem += round16(dc->tok_cap * sizeof(struct json_token));
	dc->slots = (struct docker_slot *)mem;
	memset(dc->slots, 0, dc->nslots * sizeof(struct docker_slot));
	mem += round16(dc->nslots * sizeof(struct docker_slot));
	for (uint32_t i = 0; i < dc->nslots; i++) {
		struct docker_slot *s = &dc->slots[i];
		http_conn_init(&s->conn, dc->socket_path);
		s->conn.connect_timeout_ms = dc->connect_timeout_ms;
		s->body = mem;
		mem += round16(dc->response_limit);
	}
	return 0;
}

void docker_client_free(struct docker_client *dc)
{
	for (uint32_t i = 0; dc->slots && i < dc->nslots; i++)
		http_conn_close(&dc->slots[i].conn);
	free(dc->tok);
	dc->slots = NULL;
	dc->tok = NULL;
	dc->nslots = 0;
}

/* A free slot, preferring one whose socket is still open (keep-alive reuse). */
static struct docker_slot *slot_get(struct docker_client *dc)
{
	struct docker_slot *fresh = NULL;

	for (uint32_t i = 0; i < dc->nslots; i++) {
		struct docker_slot *s = &dc->slots[i];
		if (s->busy)
			continue;
		if (s->conn.fd >= 0) {
			s->busy = true;
			return s;
		}
		if (!fresh)
			fresh = s;
	}
	if (fresh)
		fresh->busy = true;
	return fresh;
}

void call_prepare(struct docker_call *c, struct docker_client *dc, enum docker_op op,
		  const char *object)
{
	memset(c, 0, sizeof(*c));
	c->dc = dc;
	c->op = op;
	c->error.op = op;
	snprintf(c->error.object, sizeof(c->error.object), "%s", object ? object : "");
}

static int call_fail(struct docker_call *c, int code)
{
	c->state = CALL_FAILED;
	c->error.code = code;
	c->error.status = c->status;
	return code;
}

int call_acquire(struct docker_call *c)
{
	c->slot = slot_get(c->dc);
	if (c->slot)
		return 0;
	snprintf(c->error.message, sizeof(c->error.message),
		 "all %u connections to the engine are in use", c->dc->nslots);
	return call_fail(c, DOCKER_ERR_BUSY);
}

int call_start(struct docker_call *c, const char *method, const char *target, const char *json,
	       size_t json_len, bool stream, int read_timeout_ms)
{
	static const struct http_field json_type[] = {
		{ "Content-Type", "application/json" }, { NULL, NULL }
	};
	struct docker_client *dc = c->dc;
	struct http_exchange_opts o = {
		.body_limit = stream ? 0 : dc->response_limit,
		.read_timeout_ms = read_timeout_ms,
	};
	struct buf req;
	int r;

	if (!c->slot && (r = call_acquire(c)) != 0)
		return r;
	buf_init(&req, c->slot->req, sizeof(c->slot->req));
	r = http_request_write(&req, method, target, "docker", json ? json_type : NULL, json,
			       json_len);
	if (r == 0)
		r = http_conn_begin(&c->slot->conn, req.data, req.len, &o);
	if (r != 0) {
		c->slot->busy = false;
		c->slot = NULL;
		snprintf(c->error.message, sizeof(c->error.message), "%s",
			 r == ERR_LIMIT ? "request over its size limit" : "request not valid HTTP");
		return call_fail(c, r);
	}
	c->body_len = 0;
	c->state = CALL_RUNNING;
	return 0;
}

int call_fail_begin(struct docker_call *c, int code, const char *why)
{
	if (c->slot) {
		c->slot->busy = false;
		c->slot = NULL;
	}
	snprintf(c->error.message, sizeof(c->error.message), "%s", why);
	return call_fail(c, code);
}

static bool error_status(const struct docker_call *c)
{
	return c->status >= 300 && c->status != 304;
}

static int buffer_body(struct docker_call *c, const struct http_slice *s)
{
	if (s->len > c->dc->response_limit - c->body_len)
		return DOCKER_ERR_TOO_BIG;
	memcpy(c->slot->body + c->body_len, s->data, s->len);
	c->body_len += (uint32_t)s->len;
	return 0;
}

/* The action's word: an exec's action goes on with its command line ("exec_start: sh -c
 * ..."), which may be long and may hold a secret; only what comes before the colon is
 * copied, and an action that is not a plain word is left empty. */
static void action_word(const struct json_doc *doc, int idx, char *out, size_t size)
{
	size_t n = 0;

	out[0] = '\0';
	if (idx < 0 || doc->tok[idx].type != JSON_STRING)
		return;
	for (uint32_t p = doc->tok[idx].start; p < doc->tok[idx].end && doc->src[p] != ':'; p++) {
		char ch = doc->src[p];

		if (ch == '\\' || (unsigned char)ch < 0x20 || n + 1 == size) {
			out[0] = '\0';
			return;
		}
		out[n++] = ch;
	}
	out[n] = '\0';
}

static int event_object(void *ctx, const char *obj, size_t len)
{
	struct docker_call *c = ctx;
	struct json_doc doc;
	struct docker_event ev;
	int actor, r;

	if (!obj) {
		memset(&ev, 0, sizeof(ev));
		ev.attributes = -1;
		ev.oversized = true;
		return c->on_event(c->ctx, &ev);
	}
	r = json_parse(&doc, obj, len, c->dc->tok, c->dc->tok_cap);
	if (r != 0)
		return r == ERR_LIMIT ? DOCKER_ERR_TOO_BIG : DOCKER_ERR_REPLY;
	memset(&ev, 0, sizeof(ev));
	json_str(&doc, json_obj_get(&doc, 0, "Type"), ev.type, sizeof(ev.type));
	action_word(&doc, json_obj_get(&doc, 0, "Action"), ev.action, sizeof(ev.action));
	actor = json_obj_get(&doc, 0, "Actor");
	json_str(&doc, json_obj_get(&doc, actor, "ID"), ev.id, sizeof(ev.id));
	json_int(&doc, json_obj_get(&doc, 0, "timeNano"), &ev.time_nano);
	ev.doc = &doc;
	ev.attributes = json_obj_get(&doc, actor, "Attributes");
	return c->on_event(c->ctx, &ev);
}

int docker_event_attr(const struct docker_event *ev, const char *key, char *out, size_t size)
{
	int v = json_obj_get(ev->doc, ev->attributes, key);
	int r;

	if (v < 0)
		return -ENOENT;
	r = json_str(ev->doc, v, out, size);
	return r < 0 ? (r == ERR_LIMIT ? ERR_LIMIT : -ENOENT) : 0;
}

static int sink(struct docker_call *c, const struct http_slice *s)
{
	if (error_status(c))
		return buffer_body(c, s);
	switch (c->op) {
	case DOCKER_OP_CONTAINER_LOGS:
		if (c->tty)
			return c->on_log(c->ctx, 1, s->data, s->len);
		return docker_demux_feed(&c->demux, s->data, s->len, c->on_log, c->ctx);
	case DOCKER_OP_EVENTS:
		return docker_splitter_feed(&c->split, s->data, s->len, event_object, c);
	default:
		return buffer_body(c, s);
	}
}

/* Docker's errors are {"message": "..."}; anything else is quoted as it came, cut short. */
static void take_message(struct docker_call *c)
{
	struct json_doc doc;
	char *m = c->error.message;
	size_t cap = sizeof(c->error.message);

	if (json_parse(&doc, (const char *)c->slot->body, c->body_len, c->dc->tok,
		       c->dc->tok_cap) == 0 &&
	    json_str(&doc, json_obj_get(&doc, 0, "message"), m, cap) >= 0 && m[0])
		return;
	snprintf(m, cap, "%.*s", (int)(c->body_len < cap - 1 ? c->body_len : cap - 1),
		 (const char *)c->slot->body);
	for (char *p = m; *p; p++)
		if ((unsigned char)*p < 0x20 || (unsigned char)*p == 0x7f)
			*p = ' ';
	while (*m && m[strlen(m) - 1] == ' ')
		m[strlen(m) - 1] = '\0';
}

static void transport_message(struct docker_call *c, int code)
{
	struct http_conn *conn = &c->slot->conn;
	char *m = c->error.message;
	size_t cap = sizeof(c->error.message);

	if (code == HTTP_ERR_CONNECT)
		snprintf(m, cap, "%s: %s", conn->path, strerror(conn->sys_errno));
	else if (code == -ETIMEDOUT)
		snprintf(m, cap, "no answer within %d ms", conn->state == HTTP_CONN_CONNECTING
				 ? c->dc->connect_timeout_ms : c->dc->read_timeout_ms);
	else if (code == DOCKER_ERR_TOO_BIG)
		snprintf(m, cap, "answer over the %u-byte response limit", c->dc->response_limit);
	else
		snprintf(m, cap, "%s", err_str(code));
}

static int drive(struct docker_call *c, bool block)
{
	struct http_conn *conn;

	switch (c->state) {
	case CALL_DONE:
		return 0;
	case CALL_RUNNING:
		break;
	default:
		return c->error.code ? c->error.code : ERR_STATE;
	}
	conn = &c->slot->conn;
	for (;;) {
		struct http_slice s;
		int r = block ? http_conn_wait(conn, &s) : http_conn_step(conn, &s);

		if (r == -EAGAIN)
			return r;
		if (r == HTTP_ERR_BODY_TOO_BIG)
			r = DOCKER_ERR_TOO_BIG;
		if (r < 0) {
			transport_message(c, r);
			return call_fail(c, r);
		}
		switch (r) {
		case HTTP_EV_HEAD:
			c->status = conn->parser.status;
			if (c->op == DOCKER_OP_PING) {
				const char *v = http_parser_header(&conn->parser, "api-version");
				snprintf(c->api_version, sizeof(c->api_version), "%s", v ? v : "");
			}
			continue;
		case HTTP_EV_BODY:
			r = sink(c, &s);
			if (r == 0)
				continue;
			http_conn_close(conn);
			if (r > 0) {
				c->state = CALL_STOPPED;
				return r;
			}
			if (r == ERR_PARSE || r == ERR_LIMIT)
				r = r == ERR_LIMIT ? DOCKER_ERR_TOO_BIG : DOCKER_ERR_REPLY;
			transport_message(c, r);
			return call_fail(c, r);
		case HTTP_EV_DONE:
			if (error_status(c)) {
				take_message(c);
				return call_fail(c, DOCKER_ERR_API);
			}
			if (c->op == DOCKER_OP_EVENTS && c->split.len) {
				transport_message(c, DOCKER_ERR_REPLY);
				return call_fail(c, DOCKER_ERR_REPLY);
			}
			c->state = CALL_DONE;
			return 0;
		default:
			http_conn_close(conn);
			transport_message(c, DOCKER_ERR_REPLY);
			return call_fail(c, DOCKER_ERR_REPLY);
		}
	}
}

int docker_call_step(struct docker_call *c)
{
	return drive(c, false);
}

int docker_call_run(struct docker_call *c)
{
	return drive(c, true);
}

int docker_call_fd(const struct docker_call *c)
{
	return c->slot && c->state == CALL_RUNNING ? c->slot->conn.fd : -1;
}

short docker_call_events(const struct docker_call *c)
{
	return c->slot && c->state == CALL_RUNNING ? c->slot->conn.want : 0;
}

int docker_call_timeout_ms(const struct docker_call *c)
{
	return c->slot && c->state == CALL_RUNNING ? http_conn_wait_ms(&c->slot->conn) : -1;
}

void docker_call_end(struct docker_call *c)
{
	if (c->slot) {
		/* cut short: what is left of the answer would confuse the next exchange */
		if (c->slot->conn.state != HTTP_CONN_IDLE)
			http_conn_close(&c->slot->conn);
		c->slot->busy = false;
		c->slot = NULL;
	}
	c->state = CALL_ENDED;
}

/* ---- versions ---- */
static int parse_api_version(const char *s, int *major, int *minor)
{
	uint64_t a, b;
	char tmp[16];
	char *dot;

	if (!s || strlen(s) >= sizeof(tmp))
		return -EINVAL;
	strcpy(tmp, s);
	dot = strchr(tmp, '.');
	if (!dot)
		return -EINVAL;
	*dot = '\0';
	if (parse_u64(tmp, 1000, &a) != 0 || parse_u64(dot + 1, 1000, &b) != 0)
		return -EINVAL;
	*major = (int)a;
	*minor = (int)b;
	return 0;
}

int docker_version_pick(const char *api_version, const char *min_version, char *out,
			size_t out_size, char *why, size_t why_size)
{
	int maj, min, mmaj, mmin, pick;

	if (out_size)
		out[0] = '\0';
	if (parse_api_version(api_version, &maj, &min) != 0) {
		snprintf(why, why_size, "the engine named no usable API version (Api-Version \"%s\")",
			 api_version ? api_version : "");
		return DOCKER_ERR_VERSION;
	}
	pick = maj > 1 || min > DOCKER_API_MINOR_MAX ? DOCKER_API_MINOR_MAX : min;
	if (maj < 1 || (maj == 1 && min < DOCKER_API_MINOR_MIN)) {
		snprintf(why, why_size,
			 "the engine speaks Docker API %d.%d, older than the 1.%d to 1.%d agentic "
			 "speaks: upgrade the engine",
			 maj, min, DOCKER_API_MINOR_MIN, DOCKER_API_MINOR_MAX);
		return DOCKER_ERR_VERSION;
	}
	if (min_version && min_version[0] &&
	    parse_api_version(min_version, &mmaj, &mmin) == 0 &&
	    (mmaj > 1 || (mmaj == 1 && mmin > pick))) {
		snprintf(why, why_size,
			 "the engine refuses Docker API versions below %d.%d (its MinAPIVersion) and "
			 "agentic speaks 1.%d to 1.%d: lower the engine's minimum "
			 "(DOCKER_MIN_API_VERSION=1.%d for dockerd)",
			 mmaj, mmin, DOCKER_API_MINOR_MIN, DOCKER_API_MINOR_MAX, pick);
		return DOCKER_ERR_VERSION;
	}
	snprintf(out, out_size, "1.%d", pick);
	return 0;
}

/* ---- error text ---- */
static const char *const op_names[] = {
	[DOCKER_OP_PING] = "ping",
	[DOCKER_OP_VERSION] = "version",
	[DOCKER_OP_INFO] = "info",
	[DOCKER_OP_NETWORK_CREATE] = "network create",
	[DOCKER_OP_NETWORK_INSPECT] = "network inspect",
	[DOCKER_OP_NETWORK_LIST] = "network list",
	[DOCKER_OP_NETWORK_REMOVE] = "network remove",
	[DOCKER_OP_CONTAINER_CREATE] = "container create",
	[DOCKER_OP_CONTAINER_START] = "container start",
	[DOCKER_OP_CONTAINER_INSPECT] = "container inspect",
	[DOCKER_OP_CONTAINER_STOP] = "container stop",
	[DOCKER_OP_CONTAINER_KILL] = "container kill",
	[DOCKER_OP_CONTAINER_WAIT] = "container wait",
	[DOCKER_OP_CONTAINER_LOGS] = "container logs",
	[DOCKER_OP_CONTAINER_REMOVE] = "container remove",
	[DOCKER_OP_CONTAINER_LIST] = "container list",
	[DOCKER_OP_EVENTS] = "events",
	[DOCKER_OP_CONTAINER_RENAME] = "container rename",
	[DOCKER_OP_IMAGE_LIST] = "image list",
};

static const char *noun(enum docker_op op)
{
	if (op >= DOCKER_OP_NETWORK_CREATE && op <= DOCKER_OP_NETWORK_REMOVE)
		return "network";
	if (op >= DOCKER_OP_CONTAINER_CREATE && op <= DOCKER_OP_CONTAINER_LIST)
		return "container";
	return "engine";
}

const char *docker_error_text(const struct docker_error *e, char *out, size_t size)
{
	const char *op = op_names[e->op];
	const char *what = noun(e->op);

	if (e->code == DOCKER_ERR_API && e->status == 404 && e->op == DOCKER_OP_CONTAINER_CREATE &&
	    e->image[0])
		snprintf(out, size,
			 "image %s is not present locally, and this host does not pull images: load "
			 "it (docker load -i FILE.tar) or build it (make images) first (engine: %s)",
			 e->image, e->message);
	else if (e->code == DOCKER_ERR_API && e->status == 404)
		snprintf(out, size, "%s: no such %s %s (engine: %s)", op, what, e->object, e->message);
	else if (e->code == DOCKER_ERR_API && e->status == 409)
		snprintf(out, size, "%s %s: conflicts with an existing object (engine: %s)", op,
			 e->object, e->message);
	else if (e->code == DOCKER_ERR_API)
		snprintf(out, size, "%s %s: the engine answered %d: %s", op, e->object, e->status,
			 e->message);
	else if (e->code == HTTP_ERR_CONNECT)
		snprintf(out, size,
			 "cannot reach the Docker engine at %s (is dockerd running? tools/dockerd-up "
			 "starts it)", e->message);
	else if (e->code == DOCKER_ERR_VERSION || e->code == DOCKER_ERR_BUSY)
		snprintf(out, size, "%s", e->message);
	else
		snprintf(out, size, "%s %s: %s", op, e->object, e->message[0] ? e->message
							: err_str(e->code));
	return out;
}
