/* admin_info.c: the admin API's routes on the daemon and the verifier: GET /api/v1/info,
 * GET /metrics (Prometheus text), and the verifier run on a sandbox or any container of the
 * engine, or its last result. Above admin_posture.c (the taints it counts). */
#include <stdio.h>
#include <string.h>

#include "json/json.h"
#include "admin/admin_conn.h"
#include "agent/agent.h"
#include "lifecycle/netpool.h"
#include "sandbox/subnet.h"
#include "lifecycle/taint.h"
#include "metrics/metrics.h"
#include "verify/verify.h"
#include "fleet/link.h"
#include "fleet/wire.h"
#include "version.h"

_Static_assert(AGENT_REFUSAL_REASONS <= METRICS_REFUSAL_REASONS, "every refusal is counted");

/* ---- info ---- */

/* Sandboxes by state (creating, ready, removing, conflict) and with a ready agent. */
static void count_sandboxes(uint32_t by_state[4], uint32_t *connected, uint32_t *warm,
			    uint32_t *warm_ready)
{
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->pool && sb->state != SB_FREE) {
			(*warm)++;
			*warm_ready += sb->state == SB_READY && agent_of(sb)->ready;
			continue;
		}
		if (sb->state >= SB_CREATING && sb->state <= SB_CONFLICT)
			by_state[sb->state - SB_CREATING]++;
		*connected += agent_of(sb)->ready;
	}
}

void admin_info_get(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static char text[4096];
	const struct admin_config *d = &admin_state.ac;
	const struct config *cfg = d->cfg;
	struct buf b;
	struct json_writer w;
	char pool[24];
	uint32_t a = cfg->subnet_pool_base;
	uint32_t by_state[4] = { 0 }, connected = 0, warm = 0, warm_ready = 0;

	count_sandboxes(by_state, &connected, &warm, &warm_ready);
	snprintf(pool, sizeof(pool), "%u.%u.%u.%u/%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255,
		 a & 255, cfg->subnet_pool_prefix);
	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "version");
	json_str_write(&w, AGENTIC_VERSION);
	json_key(&w, "engine_version");
	json_str_write(&w, d->engine_version);
	json_key(&w, "api_version");
	json_str_write(&w, d->api_version);
	json_key(&w, "container");
	json_bool_write(&w, d->in_container);
	json_key(&w, "engine_place");
	json_str_write(&w, d->engine_place ? d->engine_place : "");
	json_key(&w, "sandboxes");
	json_int_write(&w, sandbox_live() - warm);
	/* warm sandboxes (made or being made), not claimed: they are in no list */
	json_key(&w, "warm_sandboxes");
	json_int_write(&w, warm);
	/* of them, those a create can claim now: ready, their init connected */
	json_key(&w, "warm_sandboxes_ready");
	json_int_write(&w, warm_ready);
	json_key(&w, "sandboxes_ready");
	json_int_write(&w, by_state[SB_READY - SB_CREATING]);
	json_key(&w, "agents_ready");
	json_int_write(&w, connected);
	json_key(&w, "max_sandboxes");
	json_int_write(&w, cfg->max_sandboxes);
	json_key(&w, "warm_networks");
	json_int_write(&w, d->pool->n);
	json_key(&w, "control_uid_range");
	json_obj_begin(&w);
	json_key(&w, "min");
	json_int_write(&w, cfg->control_uid_min);
	json_key(&w, "max");
	json_int_write(&w, cfg->control_uid_max);
	json_key(&w, "used");
	json_int_write(&w, sandbox_uid_map()->used);
	json_obj_end(&w);
	json_key(&w, "subnet_pool");
	json_obj_begin(&w);
	json_key(&w, "cidr");
	json_str_write(&w, pool);
	json_key(&w, "used");
	json_int_write(&w, subnet_map()->used - subnet_foreign_count());
	json_key(&w, "foreign");
	json_int_write(&w, subnet_foreign_count());
	json_obj_end(&w);
	json_key(&w, "memory_budget_bytes");
	json_int_write(&w, (int64_t)d->budget);
	json_key(&w, "agent_socket");
	json_str_write(&w, cfg->agent_socket_dir);
	json_key(&w, "agentshare_root");
	json_str_write(&w, cfg->agentshare_root);
	json_key(&w, "refused_agents");
	json_int_write(&w, (int64_t)agent_refused());
	json_key(&w, "refused_admins");
	json_int_write(&w, (int64_t)admin_state.refused);
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "info does not fit its buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

/* GET /api/v1/fleet: the fleet as this node's worker last read it (docs/FLEET.md). */
void admin_fleet_get(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static char text[FLEET_SNAPSHOT_BYTES + 1024];
	struct buf b;

	buf_init(&b, text, sizeof(text));
	if (fleet_link_info(&b) != 0) {
		admin_respond_error(c, 500, "internal", "the fleet does not fit its buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

/* GET /api/v1/fleet/sandboxes: the fleet's sandboxes as this node's worker last read them. */
void admin_fleet_sandboxes_get(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static char text[FLEET_SB_PACKET_BYTES + 1024];
	struct buf b;

	buf_init(&b, text, sizeof(text));
	if (fleet_link_sandboxes(&b) != 0) {
		admin_respond_error(c, 500, "internal", "the fleet's sandboxes do not fit their buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

/* POST /api/v1/fleet/drain {"draining": BOOL}: this node takes no new placements, or again. */
void admin_fleet_drain_post(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static struct json_token tokens[4];
	struct json_doc doc;
	bool on;
	int k, r;

	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0 ||
	    doc.tok[0].type != JSON_OBJECT || doc.tok[0].children != 1 ||
	    (k = json_obj_get(&doc, 0, "draining")) < 0 || json_bool(&doc, k, &on) != 0) {
		admin_respond_error(c, 400, "bad_request", "the body is {\"draining\": true|false}");
		return;
	}
	r = fleet_link_drain(on);
	if (r == ERR_STATE) {
		admin_respond_error(c, 409, "no_fleet", "this agenticd runs no fleet (fleet_endpoints "
				    "is empty)");
		return;
	}
	if (r < 0) {
		admin_respond_error(c, 500, "internal", "the draining mark cannot be kept in state_dir");
		return;
	}
	admin_fleet_get(c, unused, query);
}

/* ---- verify: run the verifier, or its last result ---- */

static void verify_answer(int32_t i, uint32_t gen, int status, const char *code,
			  const char *message, const char *json, size_t len)
{
	struct admin_conn *c = admin_waiter(i, gen);

	if (!c)
		return;
	if (status == 200)
		admin_respond_raw(c, 200, NULL, json, len);
	else
		admin_respond_error(c, status, code, message);
	admin_flush(c);
}

/* {"require_dedicated_agentshare": bool}, or no body: 0, or -1 (answered 400). */
static int verify_body(struct admin_conn *c, bool *dedicated)
{
	static struct json_token t[16];
	struct json_doc d;
	int v;

	*dedicated = false;
	if (!c->body_len)
		return 0;
	if (json_parse(&d, (const char *)c->body, c->body_len, t, ARRAY_LEN(t)) != 0 ||
	    d.tok[0].type != JSON_OBJECT) {
		admin_respond_error(c, 400, "bad_json", "the body is a JSON object");
		return -1;
	}
	for (int k = json_first(&d, 0); k >= 0; k = json_next(&d, 0, json_next(&d, 0, k)))
		if (!json_str_eq(&d, k, "require_dedicated_agentshare")) {
			admin_respond_error(c, 400, "bad_request",
					    "the only field is require_dedicated_agentshare");
			return -1;
		}
	v = json_obj_get(&d, 0, "require_dedicated_agentshare");
	if (v >= 0 && json_bool(&d, v, dedicated) != 0) {
		admin_respond_error(c, 400, "bad_request", "require_dedicated_agentshare is a boolean");
		return -1;
	}
	return 0;
}

static void verify_begin(struct admin_conn *c, struct sandbox *sb, const char *container)
{
	struct verify_client vc = { verify_answer, (int32_t)admin_conn_index(c), c->gen };
	const char *code = NULL, *message = NULL;
	bool dedicated;
	int status;

	if (verify_body(c, &dedicated) != 0)
		return;
	status = verify_start(sb, container, dedicated, &vc, &code, &message);
	if (status != 0) {
		admin_respond_error(c, status, code, message);
		return;
	}
	c->phase = AC_WAIT;
}

void admin_verify_post(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	verify_begin(c, sb, NULL);
}

/* POST /api/v1/verify?container=ID: any container on the engine, by id or name. */
void admin_verify_container_post(struct admin_conn *c, struct sandbox *unused,
				   const char *query)
{
	char id[160];

	admin_query_value(query, "container", id, sizeof(id));
	if (!id[0] || strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			    "0123456789_.-") != strlen(id)) {
		admin_respond_error(c, 400, "bad_request",
				    "container=ID: a container's id or name ([A-Za-z0-9_.-])");
		return;
	}
	verify_begin(c, NULL, id);
}

void admin_verify_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	int fd;

	if (verify_last_open(sb, &fd) != 0) {
		admin_respond_error(c, 404, "no_result", "the sandbox's current run has no verify result");
		return;
	}
	admin_respond_file(c, fd, admin_json_fields);
}

/* ---- /metrics ---- */

void admin_metrics_get(struct admin_conn *c, struct sandbox *unused, const char *query)
{
	static const struct http_field text_fields[] = {
		{ "Content-Type", "text/plain; version=0.0.4" },
		{ NULL, NULL },
	};
	static char text[16384];
	static const char *names[AGENT_REFUSAL_REASONS];
	/* every taint: the declarable ones, and the one an egress policy in report mode leaves */
	static const char *taint_names[ARRAY_LEN(admin_taint_reasons) + 1];
	static uint64_t taints[ARRAY_LEN(admin_taint_reasons) + 1];
	struct metrics_view v = { .refusal_names = names, .nrefusals = AGENT_REFUSAL_REASONS };
	struct buf b;
	uint32_t warm_ready = 0;

	count_sandboxes(v.sandboxes, &v.agents_connected, &v.warm, &warm_ready);
	for (uint32_t i = 0; i < sandbox_slots(); i++) {
		const struct sandbox *sb = sandbox_slot(i);

		if (sb->state != SB_FREE && !sb->pool)
			v.tiers[posture_is_t1(&sb->posture)]++;
	}
	for (size_t i = 0; i < ARRAY_LEN(admin_taint_reasons); i++) {
		taint_names[i] = posture_reason_name(admin_taint_reasons[i]);
		taints[i] = posture_taints_total(admin_taint_reasons[i]);
	}
	taint_names[ARRAY_LEN(admin_taint_reasons)] = posture_reason_name(POSTURE_EGRESS_REPORT_ONLY);
	taints[ARRAY_LEN(admin_taint_reasons)] = posture_taints_total(POSTURE_EGRESS_REPORT_ONLY);
	v.taint_names = taint_names;
	v.taints = taints;
	v.ntaints = ARRAY_LEN(admin_taint_reasons) + 1;
	for (int i = 0; i < AGENT_REFUSAL_REASONS; i++)
		names[i] = agent_refusal_name(i);
	v.refused_admins = admin_state.refused;
	v.budget = admin_state.ac.budget;
	v.resident = metrics_resident_bytes();
	buf_init(&b, text, sizeof(text));
	if (metrics_render(&b, &v) != 0 || fleet_link_metrics(&b) != 0) {
		admin_respond_error(c, 500, "internal", "metrics do not fit the response buffer");
		return;
	}
	admin_respond_raw(c, 200, text_fields, b.data, b.len);
}
