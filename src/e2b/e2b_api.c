/* e2b_api.c: E2B's control plane (REST + JSON, spec §3 and §11): create (POST /v2/sandboxes
 * and /sandboxes: the body becomes an agentic create request read by request_create_parse,
 * as any create is, and is admitted by lifecycle_admit; answered 201 when the lifecycle says
 * created), connect (the same Sandbox, TTL extended), get (SandboxDetail), delete (204 when
 * removed), timeout, and the list with its filters and paging (on a fleet node, by node: its
 * own first, each other node's pages relayed to it). Only sandboxes made through this API are
 * visible here. Above e2b_conn.c and e2b_state.c; e2b_routes.c calls it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/profiles.h"
#include "e2b/e2b_internal.h"
#include "egress/view.h"
#include "fleet/link.h"
#include "json/json.h"
#include "lifecycle/lifecycle.h"
#include "profile/credscan.h"
#include "sandbox/sandbox.h"

#define ENVD_VERSION "0.5.6"
#define CLIENT_ID "agentic"
#define TIMEOUT_DEFAULT_S 300
#define TIMEOUT_MAX_S 86400
/* a waiter that is a create slot, not a connection */
#define CREATE_FLAG 0x40000000

/* A create in flight: its request lives here until the lifecycle answers (the client may
 * leave before; the sandbox still gets its TTL). */
struct e2b_create {
	bool used;
	bool placed;                  /* another node placed it here: its name is etcd's claim */
	uint32_t gen;
	struct e2b_ref ref;
	int64_t ttl_ms;
	char name[SB_NAME_BYTES];     /* the name placement claimed, "" for none */
	char image[CONFIG_STR_BYTES]; /* the image placement asks a node for */
	struct create_req req;
};

/* Creates this node relayed to the node placement chose, a while: their sandboxes are that
 * node's before its record reaches this node's view (up to about half a second: the owner's
 * agenticd tells its worker twice a second), and the SDK's first command comes at once. */
#define PLACED_KEEP 16
#define PLACED_KEEP_MS 30000
static struct {
	char name[SB_NAME_BYTES], node[64], addr[64];
	int64_t at;
} placed_ring[PLACED_KEEP];
static uint32_t placed_next;

static struct {
	const struct config *cfg;
	struct e2b_create *creates;
	uint32_t ncreates;
	bool stopping;
} A;

size_t e2b_api_bytes(uint32_t ncreates)
{
	return (size_t)ncreates * sizeof(struct e2b_create);
}

void e2b_api_start(const struct config *cfg, void *storage, uint32_t ncreates)
{
	A.cfg = cfg;
	A.creates = storage;
	A.ncreates = ncreates;
}

void e2b_api_stop(void)
{
	A.stopping = true;
}

struct sandbox *e2b_api_sandbox(const char *id)
{
	struct sandbox *sb = sandbox_by_name(id);

	return sb && e2b_of(sb) && sb->state == SB_READY && !lifecycle_going(sb) ? sb : NULL;
}

static void not_found(struct e2b_conn *c, const char *id)
{
	char m[160];

	snprintf(m, sizeof(m), "sandbox %.64s not found", credscan_value(id) ? "(id shaped like a "
		 "credential)" : id);
	e2b_reply_error(c, 404, m);
}

/* ---- the answers' JSON ---- */

static void sandbox_json(struct json_writer *w, const struct sandbox *sb, bool token)
{
	const struct e2b_sb *e = e2b_of(sb);
	char t[E2B_TOKEN_CHARS + 1];

	json_key(w, "sandboxID");
	json_str_write(w, sb->name);
	json_key(w, "templateID");
	json_str_write(w, e->template_id);
	json_key(w, "alias");
	json_str_write(w, e->template_id);
	json_key(w, "clientID");
	json_str_write(w, CLIENT_ID);
	json_key(w, "envdVersion");
	json_str_write(w, ENVD_VERSION);
	if (token) {
		e2b_token(sb, t);
		json_key(w, "envdAccessToken");
		json_str_write(w, t);
		memset(t, 0, sizeof(t));
	}
}

/* An object of strings (envVars, metadata) copied by w; -1 when it is something else. */
static int strings_copy(struct json_writer *w, const struct json_doc *doc, int obj)
{
	static char k[1024], v[LIMIT_E2B_BODY_BYTES];

	if (obj < 0)
		return 0;
	if (doc->tok[obj].type != JSON_OBJECT)
		return -1;
	for (int i = json_first(doc, obj); i >= 0; i = json_next(doc, obj, json_next(doc, obj, i))) {
		int val = json_next(doc, obj, i);

		if (doc->tok[val].type != JSON_STRING || json_str(doc, i, k, sizeof(k)) < 0 ||
		    json_str(doc, val, v, sizeof(v)) < 0)
			return -1;
		json_key(w, k);
		json_str_write(w, v);
	}
	return 0;
}

/* A sandbox's metadata (its normalised text) as an object. */
static void meta_write(struct json_writer *w, const char *text)
{
	static struct json_token tok[256];
	struct json_doc doc;

	json_obj_begin(w);
	if (json_parse(&doc, text, strlen(text), tok, ARRAY_LEN(tok)) == 0)
		strings_copy(w, &doc, 0);
	json_obj_end(w);
}

/* ListedSandbox's fields (SandboxDetail adds the network and lifecycle). */
static void listed_json(struct json_writer *w, const struct sandbox *sb)
{
	const struct e2b_sb *e = e2b_of(sb);
	const struct config *cfg = A.cfg;
	int64_t end = lifecycle_expiry(sb);

	sandbox_json(w, sb, false);
	sandbox_time_write(w, "startedAt", e->started_ms);
	sandbox_time_write(w, "endAt", end ? end : e->started_ms);
	json_key(w, "cpuCount");
	json_int_write(w, (int64_t)((cfg->default_nano_cpus + 999999999) / 1000000000));
	json_key(w, "memoryMB");
	json_int_write(w, (int64_t)(cfg->default_memory_bytes >> 20));
	json_key(w, "diskSizeMB");
	json_int_write(w, (int64_t)((sb->disk_bytes ? sb->disk_bytes : cfg->default_disk_bytes) >> 20));
	json_key(w, "state");
	json_str_write(w, "running");
	json_key(w, "metadata");
	meta_write(w, e->metadata);
}

static void reply_json(struct e2b_conn *c, int status, struct buf *b, struct json_writer *w,
		       const char *hname, const char *hvalue)
{
	if (json_writer_finish(w) != 0) {
		e2b_reply_error(c, 500, "the answer does not fit its buffer");
		return;
	}
	e2b_reply_hdr(c, status, "application/json", hname, hvalue, b->data, b->len);
}

static void reply_sandbox(struct e2b_conn *c, int status, const struct sandbox *sb)
{
	char text[1024];
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	sandbox_json(&w, sb, true);
	json_key(&w, "domain");
	json_null_write(&w);
	json_obj_end(&w);
	reply_json(c, status, &b, &w, NULL, NULL);
	memset(text, 0, sizeof(text));
}

/* ---- create ---- */

/* The body's "timeout" (seconds; def when absent): 0, or -1 answered. */
static int timeout_of(struct e2b_conn *c, const struct json_doc *doc, int64_t def, int64_t *s)
{
	int t = doc ? json_obj_get(doc, 0, "timeout") : -1;

	*s = def;
	if (t >= 0 && (json_int(doc, t, s) != 0 || *s < 0 || *s > TIMEOUT_MAX_S)) {
		e2b_reply_error(c, 400, "timeout is a whole number of seconds from 0 to "
				"86400");
		return -1;
	}
	return 0;
}

/* The template: "base" is e2b_base_image; another is the startup profile of that id (docker
 * only), else 404. Writes the body's image or profile: 0, or -1 answered. */
static int template_write(struct e2b_conn *c, struct json_writer *w, const char *tpl)
{
	const struct profile_entry *entry = NULL;
	char m[320];

	if (strcmp(tpl, "base") == 0) {
		json_key(w, "image");
		json_str_write(w, A.cfg->e2b_base_image);
		return 0;
	}
	if (!profile_set_find(profiles_current(), tpl, &entry) && !entry) {
		snprintf(m, sizeof(m), "template '%.64s' is not known to this agentic host: \"base\" "
			 "is e2b_base_image, any other template is a startup profile's id (GET "
			 "/api/v2/admin/profiles lists them)", credscan_value(tpl) ? "(shaped like a "
			 "credential)" : tpl);
		e2b_reply_error(c, 404, m);
		return -1;
	}
	json_key(w, "profile");
	json_str_write(w, tpl);
	return 0;
}

/* The agentic create body for an E2B one: name, image or profile, runtime, env, egress. */
static int create_body(struct e2b_conn *c, const struct json_doc *doc, const char *id,
		       const char *tpl, const char *egress, struct buf *b)
{
	struct json_writer w;

	json_writer_init(&w, b);
	json_obj_begin(&w);
	json_key(&w, "name");
	json_str_write(&w, id);
	if (template_write(c, &w, tpl) != 0)
		return -1;
	json_key(&w, "runtime");
	json_str_write(&w, "docker");
	json_key(&w, "env");
	json_obj_begin(&w);
	if (strings_copy(&w, doc, json_obj_get(doc, 0, "envVars")) != 0) {
		e2b_reply_error(c, 400, "envVars is an object of strings");
		return -1;
	}
	json_obj_end(&w);
	json_obj_end(&w);
	/* the policy's own text (a JSON object) before the closing brace */
	if (json_writer_finish(&w) != 0 || (egress[0] && (b->len--, buf_printf(b, ",\"egress\":"
						"%s}", egress) != 0))) {
		e2b_reply_error(c, 400, "the create does not fit a request");
		return -1;
	}
	return 0;
}

/* The body's network options (C6) as an egress policy in egress: 0, or -1 answered. */
static int net_of(struct e2b_conn *c, char *egress, size_t cap)
{
	static char why[512];
	size_t blen;
	const uint8_t *body = e2b_body(c, &blen);

	if (e2b_net_policy(A.cfg, (const char *)body, blen, egress, cap, why, sizeof(why)) != 0) {
		e2b_reply_error(c, 400, why);
		return -1;
	}
	return 0;
}

static int metadata_of(struct e2b_conn *c, const struct json_doc *doc, char *out, size_t cap)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, out, cap - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	if (strings_copy(&w, doc, json_obj_get(doc, 0, "metadata")) != 0) {
		e2b_reply_error(c, 400, "metadata is an object of strings");
		return -1;
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		e2b_reply_error(c, 400, "metadata is over " E2B_STR(LIMIT_E2B_METADATA_BYTES)
				" bytes");
		return -1;
	}
	out[b.len] = '\0';
	return 0;
}

static struct e2b_create *create_take(void)
{
	for (uint32_t i = 0; i < A.ncreates; i++)
		if (!A.creates[i].used) {
			A.creates[i].used = true;
			A.creates[i].gen++;
			return &A.creates[i];
		}
	return NULL;
}

/* The parsed E2B body admitted as an agentic create into slot k (named k->name when placement
 * named it, else a new id or a warm sandbox's): 0, or -1 answered. */
static int admit(struct e2b_conn *c, struct e2b_create *k, const struct json_doc *doc,
		 const char *tpl, const char *meta)
{
	static char text[LIMIT_ADMIN_BODY_BYTES + EGRESS_POLICY_BYTES], egress[EGRESS_POLICY_BYTES];
	struct request_error e = { 0 };
	struct sandbox *sb = NULL;
	char id[SB_NAME_BYTES];
	struct buf b;
	int32_t slot = (int32_t)(k - A.creates) | CREATE_FLAG;
	int64_t started = clock_wall_ms();

	if (k->name[0])
		memcpy(id, k->name, sizeof(id));
	else
		lifecycle_new_id(id);
	buf_init(&b, text, sizeof(text));
	if (net_of(c, egress, sizeof(egress)) != 0 || create_body(c, doc, id, tpl, egress, &b) != 0)
		return -1;
	if (request_create_parse(&k->req, A.cfg, profiles_current(), REQUEST_API_V1, b.data,
				 b.len, &e) == 0) {
		/* the TTL counts from this start and is kept with the create (no write of its own) */
		k->req.expires_at = k->ttl_ms ? started + k->ttl_ms : 0;
		/* the id is ours: a claimed warm sandbox keeps its own, of the same shape (not
		 * one placement named: the node that relayed it knows it by that name) */
		k->req.name_any = !k->name[0];
		sb = lifecycle_admit(&k->req, NULL, SB_WAITER_E2B, slot, k->gen, &e);
	}
	if (!sb) {
		memset(text, 0, b.len);
		log_info("e2b create refused", "status=%d code=%s", e.status, log_q(e.code));
		e2b_reply_error(c, e.status, e.message);
		return -1;
	}
	memset(text, 0, b.len);
	memcpy(id, sb->name, sizeof(id));
	if (k->used && k->gen == sb->waiter_gen && e2b_state_set(sb, tpl, meta, started) != 0)
		log_warn("e2b fields do not fit the record", "name=%s", log_q(id));
	log_info("e2b create", "name=%s template=%s", log_q(id), log_q(tpl));
	return 0;
}

/* The body read (its template, TTL and metadata checked) and admitted into slot k: 0, or -1
 * answered. A fleet node checks it before placement too (check_only). */
static int create_read(struct e2b_conn *c, struct e2b_create *k, bool check_only)
{
	static struct json_token tok[1024];
	static char meta[LIMIT_E2B_METADATA_BYTES];
	char tpl[64] = "base";
	struct json_doc doc;
	size_t len;
	const uint8_t *body = e2b_body(c, &len);
	int64_t timeout;

	if (json_parse(&doc, (const char *)body, len, tok, ARRAY_LEN(tok)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT) {
		e2b_reply_error(c, 400, "the body is a JSON object (NewSandbox)");
		return -1;
	}
	if (json_obj_get(&doc, 0, "templateID") >= 0 &&
	    json_str(&doc, json_obj_get(&doc, 0, "templateID"), tpl, sizeof(tpl)) <= 0) {
		e2b_reply_error(c, 400, "templateID is a non-empty string of at most 63 bytes");
		return -1;
	}
	if (timeout_of(c, &doc, TIMEOUT_DEFAULT_S, &timeout) != 0 ||
	    metadata_of(c, &doc, meta, sizeof(meta)) != 0)
		return -1;
	k->ttl_ms = timeout * 1000;
	if (check_only) {
		/* the image placement looks for: the template's, as admit will write it */
		const struct profile *p = strcmp(tpl, "base") == 0 ? NULL
					  : profile_set_find(profiles_current(), tpl, NULL);

		snprintf(k->image, sizeof(k->image), "%s", strcmp(tpl, "base") == 0
			 ? A.cfg->e2b_base_image : p && p->image ? p->image : A.cfg->default_image);
		return 0;
	}
	return admit(c, k, &doc, tpl, meta);
}

static uint64_t place_id(const struct e2b_create *k)
{
	return FLEET_PLACE_E2B | ((uint64_t)(k - A.creates + 1) << 32) | k->gen;
}

void e2b_api_create(struct e2b_conn *c, const char *arg)
{
	bool relayed = e2b_relayed_from(c)[0];
	struct e2b_create *k;
	long long seq = 0;
	int r;

	if (A.stopping) {
		e2b_reply_error(c, 503, "agenticd is shutting down");
		return;
	}
	if (!(k = create_take())) {
		e2b_reply_error(c, 503, "too many E2B creates in flight; try again");
		return;
	}
	k->ref = e2b_ref_of(c);
	k->name[0] = '\0';
	k->placed = false;
	/* a create another node placed here, by the name its placement claimed */
	if (relayed && fleet_placement_parse(e2b_header(c, FLEET_PLACEMENT_HEADER), &seq, k->name,
					     sizeof(k->name)) != 0) {
		e2b_reply_error(c, 403, "another node may relay a create here only as placement "
				"chose it (Agentic-Placement)");
		k->used = false;
		return;
	}
	if (!relayed && fleet_link_on()) {
		/* placement first: the body checked, a name to claim, the worker asked */
		lifecycle_new_id(k->name);
		if (create_read(c, k, true) != 0) {
			k->used = false;
		} else if ((r = fleet_link_place(place_id(k), k->name, "", "docker", k->image)) != 0) {
			e2b_reply_error(c, 503, r == ERR_LIMIT ? "too many creates wait for their "
					"placement; try again" : "the fleet's etcd is not reachable: "
					"a create cannot be placed now");
			k->used = false;
		}
		return;
	}
	if (seq) {
		k->placed = true;
		fleet_link_admitted(seq);
	}
	if (create_read(c, k, false) != 0) {
		k->used = false;
		if (k->placed)
			fleet_link_release(k->name);
	}
}

void e2b_placed(uint64_t id, const struct fleet_link_placed *p)
{
	uint32_t i = (uint32_t)((id & ~FLEET_PLACE_E2B) >> 32) - 1;
	struct e2b_create *k = i < A.ncreates && A.creates[i].used && A.creates[i].gen ==
			       (uint32_t)id ? &A.creates[i] : NULL;
	struct e2b_conn *c = k ? e2b_conn_get(k->ref) : NULL;
	const char *why;
	char m[256];
	int status;

	if (!k)
		return;
	k->used = false;
	if (!c)
		return; /* its client went: the name is released by its owner's sweep */
	if (p->error) {
		why = fleet_place_refusal(p->error, &status);
		snprintf(m, sizeof(m), why ? "sandbox %s: %s" : "the fleet's etcd did not answer "
			 "(%.64s%s): a create cannot be placed now", why ? k->name : p->error,
			 why ? why : "");
		e2b_reply_error(c, status, m);
		return;
	}
	log_info("e2b create placed", "name=%s node=%s seq=%lld", log_q(k->name), log_q(p->node),
		 (long long)p->seq);
	if (strcmp(p->node, fleet_link_node()) == 0) {
		/* made here as any other: the claimed name goes back, a warm sandbox may serve */
		fleet_link_admitted(p->seq);
		fleet_link_release(k->name);
		k->name[0] = '\0';
		k->used = true;
		if (create_read(c, k, false) != 0)
			k->used = false;
		return;
	}
	snprintf(m, sizeof(m), "%lld %s", (long long)p->seq, k->name);
	if (e2b_conn_relay(c, p->node, p->addr, m, NULL) != 0) {
		snprintf(m, sizeof(m), "placed on node %s, and this node cannot relay to it now",
			 p->node);
		e2b_reply_error(c, 503, m);
		return;
	}
	i = placed_next++ % PLACED_KEEP;
	snprintf(placed_ring[i].name, sizeof(placed_ring[i].name), "%s", k->name);
	snprintf(placed_ring[i].node, sizeof(placed_ring[i].node), "%s", p->node);
	snprintf(placed_ring[i].addr, sizeof(placed_ring[i].addr), "%s", p->addr);
	placed_ring[i].at = clock_mono_ms();
}

bool e2b_api_placed_on(const char *id, char *node, size_t ncap, char *addr, size_t acap)
{
	for (uint32_t i = 0; i < PLACED_KEEP; i++)
		if (placed_ring[i].at && clock_mono_ms() - placed_ring[i].at < PLACED_KEEP_MS &&
		    strcmp(placed_ring[i].name, id) == 0) {
			snprintf(node, ncap, "%s", placed_ring[i].node);
			snprintf(addr, acap, "%s", placed_ring[i].addr);
			return true;
		}
	return false;
}

/* The create in slot (i, gen), once the lifecycle answered: its slot is free again. */
static struct e2b_create *create_done(int32_t i, uint32_t gen)
{
	struct e2b_create *k;

	i &= ~CREATE_FLAG;
	if (i < 0 || (uint32_t)i >= A.ncreates || !A.creates[i].used || A.creates[i].gen != gen)
		return NULL;
	k = &A.creates[i];
	k->used = false;
	return k;
}

void e2b_finish_sandbox(int32_t conn, uint32_t gen, const struct sandbox *sb, int status)
{
	struct e2b_create *k;
	struct e2b_conn *c;

	if (!(conn & CREATE_FLAG)) {
		/* a DELETE's remove: done */
		if ((c = e2b_conn_get((struct e2b_ref){ (uint32_t)conn, gen })))
			e2b_reply(c, 204, NULL, NULL, 0);
		return;
	}
	if (!(k = create_done(conn, gen)))
		return;
	if (sb->egress_json[0])
		egress_audit_policy((struct sandbox *)sb, "create");
	if ((c = e2b_conn_get(k->ref)) && e2b_of(sb))
		reply_sandbox(c, 201, sb);
	else if (c)
		e2b_reply_error(c, 500, "the sandbox was created without its E2B fields");
}

void e2b_finish_error(int32_t conn, uint32_t gen, int status, const char *code,
		      const char *message)
{
	struct e2b_create *k = (conn & CREATE_FLAG) ? create_done(conn, gen) : NULL;
	struct e2b_conn *c = k ? e2b_conn_get(k->ref)
			       : e2b_conn_get((struct e2b_ref){ (uint32_t)conn, gen });

	if (k && k->placed)
		fleet_link_release(k->name); /* etcd's claim goes with the create rolled back */
	if (c)
		e2b_reply_error(c, status, message);
}

/* ---- connect, get, delete, timeout ---- */

/* The body as JSON (an empty one: NULL): 0, or -1 answered. */
static int body_doc(struct e2b_conn *c, struct json_doc *doc, struct json_token *tok,
		    uint32_t ntok, struct json_doc **out)
{
	size_t len;
	const uint8_t *body = e2b_body(c, &len);

	*out = NULL;
	if (!len)
		return 0;
	if (json_parse(doc, (const char *)body, len, tok, ntok) != 0 ||
	    doc->tok[0].type != JSON_OBJECT) {
		e2b_reply_error(c, 400, "the body is a JSON object");
		return -1;
	}
	*out = doc;
	return 0;
}

void e2b_api_connect(struct e2b_conn *c, const char *id)
{
	struct json_token tok[32];
	struct json_doc doc, *d;
	struct sandbox *sb = e2b_api_sandbox(id);
	int64_t s, end;

	if (!sb) {
		not_found(c, id);
		return;
	}
	if (body_doc(c, &doc, tok, ARRAY_LEN(tok), &d) != 0 ||
	    timeout_of(c, d, TIMEOUT_DEFAULT_S, &s) != 0)
		return;
	/* the TTL is only extended */
	end = clock_wall_ms() + s * 1000;
	if (lifecycle_expiry(sb) < end)
		lifecycle_expiry_set(sb, end);
	reply_sandbox(c, 200, sb);
}

void e2b_api_timeout(struct e2b_conn *c, const char *id)
{
	struct json_token tok[32];
	struct json_doc doc, *d;
	struct sandbox *sb = e2b_api_sandbox(id);
	int64_t s;

	if (!sb) {
		not_found(c, id);
		return;
	}
	if (body_doc(c, &doc, tok, ARRAY_LEN(tok), &d) != 0 ||
	    timeout_of(c, d, TIMEOUT_DEFAULT_S, &s) != 0)
		return;
	if (lifecycle_expiry_set(sb, clock_wall_ms() + s * 1000) != 0) {
		e2b_reply_error(c, 500, "the sandbox's record could not be written");
		return;
	}
	e2b_reply(c, 204, NULL, NULL, 0);
}

void e2b_api_get(struct e2b_conn *c, const char *id)
{
	static char text[LIMIT_E2B_OUT_BYTES / 2];
	struct sandbox *sb = e2b_api_sandbox(id);
	struct buf b;
	struct json_writer w;

	if (!sb) {
		not_found(c, id);
		return;
	}
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	listed_json(&w, sb);
	json_key(&w, "domain");
	json_null_write(&w);
	json_key(&w, "lifecycle");
	json_obj_begin(&w);
	json_key(&w, "autoResume");
	json_bool_write(&w, false);
	json_key(&w, "onTimeout");
	json_str_write(&w, "kill");
	json_obj_end(&w);
	/* what the sandbox got: its egress policy's destinations (none: no route out) */
	json_key(&w, "network");
	json_obj_begin(&w);
	e2b_net_info(sb->egress_json, &w);
	json_obj_end(&w);
	json_obj_end(&w);
	reply_json(c, 200, &b, &w, NULL, NULL);
}

void e2b_api_delete(struct e2b_conn *c, const char *id)
{
	struct sandbox *sb = e2b_api_sandbox(id);
	struct e2b_ref r = e2b_ref_of(c);

	if (!sb) {
		not_found(c, id);
		return;
	}
	log_info("e2b kill", "name=%s", log_q(sb->name));
	sandbox_waiter_set(sb, SB_WAITER_E2B, (int32_t)r.index, r.gen);
	if (lifecycle_remove(sb, true, false) != 0)
		e2b_reply_error(c, 409, "the sandbox is busy; try again");
}

/* ---- list ---- */

struct list_query {
	char meta[1024];              /* "k=v&k2=v2", each part percent-encoded */
	char tpl[64];
	bool none;                    /* a state filter without "running" */
	uint32_t limit, from;
	/* a fleet's list (docs/FLEET.md "The E2B listener"): the node whose page this is and
	 * the node whose listener began it (its own sandboxes first, then the others by name) */
	char node[64], front[64];
	char token[160];              /* nextToken as it came */
};

/* sb's metadata has every k=v of q->meta. */
static bool meta_match(const struct e2b_sb *e, const char *meta)
{
	static struct json_token tok[256];
	char k[256], v[512], pair[800], kq[810];
	struct json_doc doc;

	if (!meta[0])
		return true;
	if (json_parse(&doc, e->metadata, strlen(e->metadata), tok, ARRAY_LEN(tok)) != 0)
		return false;
	for (const char *p = meta; *p;) {
		size_t n = strcspn(p, "&");

		snprintf(pair, sizeof(pair), "%.*s", (int)n, p);
		p += n + (p[n] == '&');
		snprintf(kq, sizeof(kq), "k=%.*s", (int)strcspn(pair, "="), pair);
		e2b_query_value(kq, "k", k, sizeof(k));
		snprintf(kq, sizeof(kq), "v=%s", pair[strcspn(pair, "=")] ? pair + strcspn(pair, "=") + 1
									   : "");
		e2b_query_value(kq, "v", v, sizeof(v));
		if (!json_str_eq(&doc, json_obj_get(&doc, 0, k), v))
			return false;
	}
	return true;
}

static bool list_match(const struct sandbox *sb, const struct list_query *q)
{
	const struct e2b_sb *e = e2b_of(sb);

	return e && sb->state == SB_READY && !lifecycle_going(sb) &&
	       (!q->tpl[0] || strcmp(q->tpl, e->template_id) == 0) && meta_match(e, q->meta);
}

static void list_query_read(const char *query, struct list_query *q)
{
	char state[64], n[16];

	e2b_query_value(query, "metadata", q->meta, sizeof(q->meta));
	e2b_query_value(query, "template", q->tpl, sizeof(q->tpl));
	e2b_query_value(query, "state", state, sizeof(state));
	q->none = state[0] && !strstr(state, "running");
	e2b_query_value(query, "limit", n, sizeof(n));
	q->limit = n[0] ? (uint32_t)strtoul(n, NULL, 10) : 100;
	if (q->limit < 1 || q->limit > 1000)
		q->limit = 100;
	e2b_query_value(query, "nextToken", q->token, sizeof(q->token));
	q->from = (uint32_t)strtoul(q->token, NULL, 10);
}

/* A fleet's nextToken, "FRONT.NODE.SLOT" (names of a-z, 0-9 and '-'), into q; "" and a
 * node's own "SLOT" (a list begun before it joined) are this node's. 0, or -1. */
static int fleet_token(struct list_query *q, const char *self)
{
	char slot[16];
	int end = 0;

	if (strspn(q->token, "0123456789") == strlen(q->token)) {
		snprintf(q->front, sizeof(q->front), "%s", self);
		snprintf(q->node, sizeof(q->node), "%s", self);
		return strlen(q->token) < 10 ? 0 : -1;
	}
	if (sscanf(q->token, "%63[a-z0-9-].%63[a-z0-9-].%15[0-9]%n", q->front, q->node, slot,
		   &end) != 3 || q->token[end] || strlen(slot) >= 10)
		return -1;
	q->from = (uint32_t)strtoul(slot, NULL, 10);
	return 0;
}

/* The query again, its nextToken the one given (a relayed page's). */
static const char *query_with_token(const char *query, const char *token)
{
	static char out[LIMIT_E2B_HEAD_BYTES + 200];
	struct buf b;
	int r = 0;

	buf_init(&b, out, sizeof(out) - 1);
	for (const char *p = query; *p;) {
		size_t n = strcspn(p, "&");

		if (n && strncmp(p, "nextToken=", 10) != 0)
			r |= buf_printf(&b, "%s%.*s", b.len ? "&" : "", (int)n, p);
		p += n + (p[n] == '&');
	}
	r |= buf_printf(&b, "%snextToken=%s", b.len ? "&" : "", token);
	out[b.len] = '\0';
	return r < 0 ? NULL : out;
}

/* The page of a fleet's list that is not this node's: relayed to the node that has it, or
 * (that node lost or gone from the view) to the next one; an empty last page when none is
 * left. true when answered or handed over. */
static bool fleet_page_elsewhere(struct e2b_conn *c, struct list_query *q, const char *self)
{
	char node[64], addr[64], token[160];
	const char *query;
	bool front = strcmp(q->node, q->front) == 0;
	int r;

	if (strcmp(q->node, self) == 0)
		return false;
	/* the page's node itself when it is still there, else the next in the list's order (the
	 * front's pages first: after them, the others from the first by name) */
	r = fleet_link_node_next(q->node, false, front ? "" : q->front, node, sizeof(node), addr,
				 sizeof(addr));
	if (front && (!r || strcmp(node, q->node) != 0))
		r = fleet_link_node_next("", false, q->front, node, sizeof(node), addr,
					 sizeof(addr));
	if (!r) {
		e2b_reply_hdr(c, 200, "application/json", NULL, NULL, "[]", 2);
		return true;
	}
	if (strcmp(node, self) == 0 && strcmp(node, q->node) != 0) {
		snprintf(q->node, sizeof(q->node), "%s", self);
		q->from = 0;
		return false;
	}
	snprintf(token, sizeof(token), "%s.%s.%u", q->front, node,
		 strcmp(node, q->node) == 0 ? q->from : 0);
	if (!(query = query_with_token(e2b_query(c), token)) ||
	    e2b_conn_relay(c, node, addr, NULL, query) != 0)
		e2b_reply_error(c, 503, "this node cannot relay the list's page now (too many relays)");
	else
		log_info("e2b list relayed", "node=%s", log_q(node));
	return true;
}

/* A fleet's next token once this node's sandboxes are all listed: the next node's first page
 * (after the front's own, the others by name), or none. */
static void fleet_next(const struct list_query *q, const char *self, char *next, size_t cap)
{
	char node[64], addr[64];

	if (fleet_link_node_next(strcmp(self, q->front) == 0 ? "" : self,
				 strcmp(self, q->front) != 0, q->front, node, sizeof(node), addr,
				 sizeof(addr)))
		snprintf(next, cap, "%s.%s.0", q->front, node);
}

void e2b_api_list(struct e2b_conn *c, const char *arg)
{
	static char text[LIMIT_E2B_OUT_BYTES - 1024];
	static struct list_query q;
	const char *self = fleet_link_on() ? fleet_link_node() : "";
	char next[160] = "";
	struct buf b;
	struct json_writer w;
	uint32_t n = 0, i;

	memset(&q, 0, sizeof(q));
	list_query_read(e2b_query(c), &q);
	if (self[0] && fleet_token(&q, self) != 0) {
		e2b_reply_error(c, 400, "nextToken is not one this fleet gave");
		return;
	}
	/* another node relays a page of this node's, named in its token, and nothing else */
	if (e2b_relayed_from(c)[0] && (!strchr(q.token, '.') || strcmp(q.node, self) != 0)) {
		e2b_reply_error(c, 403, "a list relayed from another node asks for a page of this "
				"node's (its nextToken names it)");
		return;
	}
	if (self[0] && !q.none && fleet_page_elsewhere(c, &q, self))
		return;
	buf_init(&b, text, sizeof(text));
	b.data[b.len++] = '[';
	for (i = q.from; !q.none && i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);
		size_t at = b.len;

		if (!list_match(sb, &q))
			continue;
		if (n == q.limit)
			break;
		if (n)
			buf_append(&b, ",", 1);
		json_writer_init(&w, &b);
		json_obj_begin(&w);
		listed_json(&w, sb);
		json_obj_end(&w);
		if (json_writer_finish(&w) != 0 || b.len + 2 > b.cap) {
			b.len = at; /* this one and the rest on the next page */
			break;
		}
		n++;
	}
	if (!q.none && i < sandbox_slots())
		snprintf(next, sizeof(next), self[0] ? "%s.%s.%u" : "%.0s%.0s%u", q.front, self, i);
	else if (!q.none && self[0])
		fleet_next(&q, self, next, sizeof(next));
	buf_append(&b, "]", 1);
	e2b_reply_hdr(c, 200, "application/json", next[0] ? "X-Next-Token" : NULL, next, b.data,
		      b.len);
}
