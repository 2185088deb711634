/* e2b_routes.c: the top of e2b/: start-up (e2b_init, e2b_recover), the routes of both planes
 * on one origin and their auth, checked before anything else, the body never read for a
 * refusal: the control plane's X-API-KEY (e2b_key_valid, 401), the envd plane's sandbox
 * (E2b-Sandbox-Id: made through the E2B API and ready, else E2B's 502) and its X-Access-Token
 * (401), or for /files a signed URL (v1_ signatures: the sandbox is found by its token), and
 * GET /health. Everything else is a JSON 501. Also the tick, and a sandbox's streams ended.
 *
 *   control: POST /v2/sandboxes, /sandboxes          create (201 Sandbox)
 *            GET  /v2/sandboxes, /sandboxes          list (metadata, state, template; paged)
 *            POST /v2/sandboxes/ID/connect, /sandboxes/ID/connect
 *            GET, DELETE /sandboxes/ID; POST /sandboxes/ID/timeout
 *   envd:    GET /health; POST /process.Process/M; POST /filesystem.Filesystem/M;
 *            GET, POST /files */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "e2b/e2b_internal.h"
#include "fleet/link.h"
#include "grpc/grpc.h"
#include "json/json.h"
#include "profile/credscan.h"
#include "sandbox/sandbox.h"

/* ---- the control plane ---- */

struct route {
	const char *method;
	const char *path;   /* '*' stands for one path segment: a sandbox's id */
	void (*handler)(struct e2b_conn *c, const char *arg);
};

static const struct route control[] = {
	{ "POST", "/v2/sandboxes", e2b_api_create },
	{ "POST", "/sandboxes", e2b_api_create },
	{ "GET", "/v2/sandboxes", e2b_api_list },
	{ "GET", "/sandboxes", e2b_api_list },
	{ "POST", "/v2/sandboxes/*/connect", e2b_api_connect },
	{ "POST", "/sandboxes/*/connect", e2b_api_connect },
	{ "GET", "/sandboxes/*", e2b_api_get },
	{ "DELETE", "/sandboxes/*", e2b_api_delete },
	{ "POST", "/sandboxes/*/timeout", e2b_api_timeout },
};

/* path against a route's: '*' matches one non-empty segment, copied (cut) to seg. */
static bool path_match(const char *pat, const char *path, char *seg, size_t size)
{
	while (*pat) {
		if (*pat == '*') {
			size_t n = strcspn(path, "/");

			if (n == 0)
				return false;
			snprintf(seg, size, "%.*s", (int)n, path);
			path += n;
			pat++;
		} else if (*pat++ != *path++) {
			return false;
		}
	}
	return *path == '\0';
}

static void not_implemented(struct e2b_conn *c, const char *arg)
{
	const char *path = e2b_path(c);
	char m[320];

	snprintf(m, sizeof(m), "%.8s %.200s is not implemented by agentic", e2b_method(c),
		 credscan_value(path) ? "(a path shaped like a credential)" : path);
	e2b_reply_error(c, 501, m);
}

static bool relay_maybe(struct e2b_conn *c, const char *id, bool envd);

static void control_route(struct e2b_conn *c)
{
	const char *key = e2b_header(c, "x-api-key");
	bool relayed = e2b_relayed_from(c)[0];
	char seg[64];

	/* another node checked the key of a relayed request against its own, and sent none */
	if (relayed ? key != NULL : !key || !e2b_key_valid(key)) {
		e2b_reply_error(c, 401, key ? "invalid API key: X-API-KEY is no key of this agentic "
				"host (agentic e2b-key create makes one)"
				: "missing API key: send it in X-API-KEY (E2B_API_KEY)");
		return;
	}
	for (size_t i = 0; i < ARRAY_LEN(control); i++) {
		seg[0] = '\0';
		if (strcmp(control[i].method, e2b_method(c)) == 0 &&
		    path_match(control[i].path, e2b_path(c), seg, sizeof(seg))) {
			/* a list's page of this node (e2b_api_list checks its token) */
			if (relayed && !seg[0] && control[i].handler != e2b_api_create &&
			    control[i].handler != e2b_api_list)
				e2b_reply_error(c, 403, "a request relayed from another node may act "
						"only on a sandbox of this node");
			else if (!relay_maybe(c, seg, false))
				e2b_conn_route_set(c, NULL, false, control[i].handler, seg);
			return;
		}
	}
	e2b_conn_route_set(c, NULL, false, not_implemented, "");
}

/* ---- the envd plane ---- */

static void process_call(struct e2b_conn *c, const char *method)
{
	e2b_process_call(c, method);
}

static void fs_call(struct e2b_conn *c, const char *method)
{
	e2b_fs_call(c, method);
}

static void files_get(struct e2b_conn *c, const char *arg)
{
	e2b_files_get(c);
}

static void files_post(struct e2b_conn *c, const char *arg)
{
	e2b_files_post(c);
}

/* A sandbox the envd plane serves: made through the E2B API, ready and running. */
static struct sandbox *envd_sandbox(const char *id)
{
	struct sandbox *sb = id ? sandbox_by_name(id) : NULL;

	return sb && e2b_of(sb) && sb->state == SB_READY && sb->running ? sb : NULL;
}

/* E2B's proxy's answer for an unknown or dead sandbox (the SDK's isRunning false). */
static void not_found_502(struct e2b_conn *c, const char *id)
{
	char extra[200];
	struct buf b;
	struct json_writer w;

	buf_init(&b, extra, sizeof(extra));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "sandboxId");
	json_strn_write(&w, id ? id : "", id ? strnlen(id, 64) : 0);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0 || b.len < 2) {
		e2b_reply_error(c, 502, "The sandbox was not found");
		return;
	}
	extra[b.len - 1] = '\0'; /* its members, for the error's object */
	e2b_reply_json_error(c, 502, "The sandbox was not found", extra + 1);
}

/* v1_ + base64(sha256("path:op:user:token[:exp]")) without '=' (§7 of the spec). */
static bool signature_of(const struct sandbox *sb, const char *path, const char *op,
			 const char *user, const char *exp, const char *sig)
{
	char token[E2B_TOKEN_CHARS + 1], b64[64], text[LIMIT_PATH_BYTES + 160];
	uint8_t h[32], diff = 0;
	int len;
	long n;

	e2b_token(sb, token);
	len = snprintf(text, sizeof(text), "%s:%s:%s:%s%s%s", path, op, user, token,
		       exp[0] ? ":" : "", exp);
	memset(token, 0, sizeof(token));
	if (len < 0 || (size_t)len >= sizeof(text))
		return false;
	e2b_sha256(text, (size_t)len, h);
	memset(text, 0, sizeof(text));
	n = grpc_base64_encode(h, sizeof(h), b64, sizeof(b64));
	while (n > 0 && b64[n - 1] == '=')
		n--;
	if (n <= 0 || strlen(sig) != (size_t)n)
		return false;
	for (long i = 0; i < n; i++)
		diff |= (uint8_t)(b64[i] ^ sig[i]);
	return diff == 0;
}

/* A signed /files URL: the sandbox whose token signed it (the id's alone when the header
 * names one), or NULL (expired, or no sandbox's). */
static struct sandbox *signed_sandbox(struct e2b_conn *c, const char *id, const char *sig)
{
	char path[LIMIT_PATH_BYTES], user[64], exp[24];
	const char *op = strcmp(e2b_method(c), "GET") == 0 ? "read" : "write";

	e2b_query_value(e2b_query(c), "path", path, sizeof(path));
	e2b_query_value(e2b_query(c), "username", user, sizeof(user));
	e2b_query_value(e2b_query(c), "signature_expiration", exp, sizeof(exp));
	if (strncmp(sig, "v1_", 3) != 0 || (exp[0] && atoll(exp) < (long long)time(NULL)))
		return NULL;
	if (id)
		return envd_sandbox(id) && signature_of(envd_sandbox(id), path, op, user, exp,
							sig + 3) ? envd_sandbox(id) : NULL;
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->state == SB_READY && envd_sandbox(sb->name) == sb &&
		    signature_of(sb, path, op, user, exp, sig + 3))
			return sb;
	}
	return NULL;
}

/* A request, its head just in, for a sandbox this node does not have and another node of the
 * fleet does (docs/FLEET.md "One front door"): handed to the relay (true), or answered here
 * when that node is lost or cannot take it (true: the SDK's "not found", 502 on the envd plane
 * and 404 on the control plane). false: served here. A relayed request is never relayed on. */
static bool relay_maybe(struct e2b_conn *c, const char *id, bool envd)
{
	char node[64], addr[64], m[256];
	int r;

	if (!id || !id[0] || e2b_relayed_from(c)[0] || !fleet_link_on() || sandbox_by_name(id))
		return false;
	r = fleet_link_owner(id, node, sizeof(node), addr, sizeof(addr));
	if (r == 0 && !e2b_api_placed_on(id, node, sizeof(node), addr, sizeof(addr)))
		return false;
	r = r ? r : 1;
	if (r == 1 && (r = e2b_conn_relay(c, node, addr, NULL, NULL)) == 0) {
		log_info("e2b request relayed", "name=%s node=%s", log_q(id), log_q(node));
		return true;
	}
	snprintf(m, sizeof(m), "sandbox %.64s is on node %s, %s", id, node,
		 r == FLEET_OWNER_LOST ? "which is lost (its lease ran out)"
		 : r == FLEET_OWNER_NO_ADDR ? "which advertises no address (fleet_advertise)"
		 : r == FLEET_OWNER_TWICE ? "and another node's record claims it too: nothing is "
		 "relayed for it" : "and this node cannot relay to it now (too many relays)");
	e2b_reply_error(c, envd ? 502 : 404, m);
	return true;
}

static void envd_route(struct e2b_conn *c)
{
	const char *id = e2b_header(c, "e2b-sandbox-id"), *path = e2b_path(c);
	const char *method = e2b_method(c), *token = e2b_header(c, "x-access-token");
	bool files = strcmp(path, "/files") == 0, post = strcmp(method, "POST") == 0;
	struct sandbox *sb = envd_sandbox(id);
	char sig[128];

	if (!sb && relay_maybe(c, id, true))
		return;
	e2b_query_value(e2b_query(c), "signature", sig, sizeof(sig));
	if (files && sig[0] && !token) {
		if (!(sb = signed_sandbox(c, id, sig))) {
			e2b_reply_error(c, 401, "unauthorized access: the signature is invalid or "
					"expired");
			return;
		}
	} else if (!sb) {
		not_found_502(c, id);
		return;
	} else if (strcmp(path, "/health") == 0 && strcmp(method, "GET") == 0) {
		e2b_reply(c, 204, NULL, NULL, 0);
		return;
	} else if (!e2b_token_ok(sb, token)) {
		e2b_reply_error(c, 401, "unauthorized access: X-Access-Token is missing or is not "
				"this sandbox's");
		return;
	}
	if (post && strncmp(path, "/process.Process/", 17) == 0)
		e2b_conn_route_set(c, sb, false, process_call, path + 17);
	else if (post && strncmp(path, "/filesystem.Filesystem/", 23) == 0)
		e2b_conn_route_set(c, sb, false, fs_call, path + 23);
	else if (files && strcmp(method, "GET") == 0)
		e2b_conn_route_set(c, sb, false, files_get, "");
	else if (files && post)
		e2b_conn_route_set(c, sb, true, files_post, "");
	else
		e2b_conn_route_set(c, sb, false, not_implemented, "");
}

/* Both planes share the origin: envd's paths (and any request naming a sandbox) are envd's. */
static void dispatch(struct e2b_conn *c)
{
	const char *path = e2b_path(c);

	if (e2b_header(c, "e2b-sandbox-id") || strcmp(path, "/health") == 0 ||
	    strcmp(path, "/files") == 0 || e2b_is_connect(c))
		envd_route(c);
	else
		control_route(c);
}

/* ---- start-up, the tick, a sandbox gone ---- */

static size_t round64(size_t n)
{
	return (n + 63) & ~(size_t)63;
}

/* The storage's parts: the connections, the create slots, the per-slot fields. */
size_t e2b_storage_bytes(uint32_t nconns, uint32_t nsb)
{
	if (!nconns)
		return 0;
	return round64(e2b_conn_bytes(nconns)) + round64(e2b_api_bytes(E2B_CREATES)) +
	       (size_t)nsb * sizeof(struct e2b_sb);
}

size_t e2b_static_bytes(void)
{
	return e2b_process_table_bytes() + e2b_fs_table_bytes() + e2b_files_table_bytes() +
	       e2b_net_table_bytes();
}

static const struct config *cfg_of;

void e2b_init(const struct e2b_config *ec)
{
	uint8_t *p = ec->storage;
	bool on = ec->nconns > 0;

	cfg_of = ec->cfg;
	e2b_conn_start(ec->cfg, p, ec->nconns, ec->epfd, ec->tag_listen, ec->tag_conn, dispatch);
	p += round64(e2b_conn_bytes(ec->nconns));
	e2b_api_start(ec->cfg, on ? p : NULL, on ? E2B_CREATES : 0);
	p += round64(e2b_api_bytes(E2B_CREATES));
	e2b_state_init(on ? (struct e2b_sb *)p : NULL, on ? ec->nsb : 0);
}

int e2b_listen(char *err, size_t err_size)
{
	if (!cfg_of->e2b_listen[0])
		return 0;
	if (e2b_state_secret(cfg_of, err, err_size) != 0)
		return -1;
	/* the API keys: opened at start by agenticd (e2b_keys_open), for the admin routes too */
	return e2b_conn_listen(err, err_size);
}

void e2b_recover(void)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && sb->e2b_json[0])
			e2b_state_load(sb);
	}
}

void e2b_shutdown(void)
{
	e2b_conn_shutdown();
	e2b_api_stop();
}

void e2b_tick(int64_t now)
{
	e2b_conn_tick(now);
	e2b_process_tick(now);
}

int64_t e2b_next_deadline(void)
{
	int64_t a = e2b_conn_next_deadline(), b = e2b_process_next_deadline();

	return b >= 0 && b < a ? b : a;
}

void e2b_sandbox_gone(struct sandbox *sb)
{
	if (!e2b_of(sb))
		return;
	e2b_process_sandbox_gone(sb);
	e2b_fs_sandbox_gone(sb);
}
