/* admin_posture.c: the admin API's routes on a sandbox's controls: its posture (the tier and
 * why), an operator's taint, and its egress policy with the last lines of its audit (read, or
 * replaced). Above admin_http.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json/json.h"
#include "admin/admin_conn.h"
#include "egress/broker.h"
#include "egress/policy.h"
#include "workspace/share.h"
#include "egress/view.h"
#include "lifecycle/taint.h"

/* ---- posture: the tier and its reasons; an operator's taint ---- */

/* The taints: what can happen to a sandbox after its create (docs/POSTURE.md, kind "taint").
 * An operator may declare any of them: a manual login inside it, or an exec or network change
 * made where the engine's event stream could not show it. The reasons known at create
 * (env_credential, operator_network, platform_compatibility) are facts of the create request
 * and its network, which agenticd reads itself: declared later they would misstate how the
 * sandbox was made (a credential put in by hand afterwards is operator_declared).
 * network_unverified is no taint: it is the engine's view, read again at each start. */
const enum posture_reason admin_taint_reasons[] = {
	POSTURE_DIRECT_DOCKER_EXEC,
	POSTURE_NETWORK_ATTACHED,
	POSTURE_CONTAINER_CHANGED,
	POSTURE_OPERATOR_DECLARED,
};

static bool is_taint(enum posture_reason r)
{
	for (size_t i = 0; i < ARRAY_LEN(admin_taint_reasons); i++)
		if (admin_taint_reasons[i] == r)
			return true;
	return false;
}

/* {"name", "posture": {...}} plus, for a taint's answer, "reason" and "already_held". */
static void respond_posture(struct admin_conn *c, const struct sandbox *sb,
			    const char *reason, bool held)
{
	static char text[4096];
	struct buf b;
	struct json_writer w;

	buf_init(&b, text, sizeof(text));
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	json_key(&w, "name");
	json_str_write(&w, sb->name);
	json_key(&w, "posture");
	posture_json(&w, &sb->posture);
	if (reason) {
		json_key(&w, "reason");
		json_str_write(&w, reason);
		json_key(&w, "already_held");
		json_bool_write(&w, held);
	}
	json_obj_end(&w);
	if (json_writer_finish(&w) != 0) {
		admin_respond_error(c, 500, "internal", "the posture does not fit its buffer");
		return;
	}
	admin_respond(c, 200, &b);
}

void admin_posture_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	respond_posture(c, sb, NULL, false);
}

/* The body's reason: 0 and *r, or an answer sent (400) and -1. Nothing but "reason". */
static int taint_body(struct admin_conn *c, enum posture_reason *r)
{
	static struct json_token tokens[16];
	struct json_doc doc;
	char word[40], m[256];
	struct buf b;
	int k, v;

	if (json_parse(&doc, (const char *)c->body, c->body_len, tokens, ARRAY_LEN(tokens)) != 0) {
		admin_respond_error(c, 400, "bad_json", "the body is not valid JSON; send "
				    "{\"reason\": \"operator_declared\"}");
		return -1;
	}
	if (doc.tok[0].type != JSON_OBJECT) {
		admin_respond_error(c, 400, "bad_request", "the body is a JSON object; send "
				    "{\"reason\": \"operator_declared\"}");
		return -1;
	}
	for (k = json_first(&doc, 0); k >= 0; k = json_next(&doc, 0, json_next(&doc, 0, k)))
		if (!json_str_eq(&doc, k, "reason")) {
			admin_respond_error(c, 400, "bad_request", "the body has one field, reason");
			return -1;
		}
	v = json_obj_get(&doc, 0, "reason");
	if (v >= 0 && json_str(&doc, v, word, sizeof(word)) >= 0 &&
	    posture_reason_parse(word, r) == 0 && is_taint(*r))
		return 0;
	buf_init(&b, m, sizeof(m));
	buf_printf(&b, "reason is one of:");
	for (size_t i = 0; i < ARRAY_LEN(admin_taint_reasons); i++)
		buf_printf(&b, "%s %s", i ? "," : "", posture_reason_name(admin_taint_reasons[i]));
	admin_respond_error(c, 400, "bad_reason", m);
	return -1;
}

/* A sandbox being created has no record or run yet to hold the taint (and may be rolled
 * back); one being removed is going with its record: both 409, nothing recorded. */
void admin_taint_post(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	enum posture_reason r;
	int held;

	if (sb->state == SB_CREATING || sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", sb->state == SB_CREATING
				    ? "the sandbox is still being created: declare the taint once it is ready"
				    : "the sandbox is being removed");
		return;
	}
	if (taint_body(c, &r) != 0)
		return;
	held = posture_taint(sb, r, "operator");
	if (held < 0) {
		admin_respond_error(c, 500, "internal", "the taint was not recorded");
		return;
	}
	/* who declared it: the posture's own line says what changed */
	log_info("posture taint declared", "name=%s reason=%s uid=%u pid=%d already_held=%s",
		 log_q(sb->name), posture_reason_name(r), (unsigned)c->uid, (int)c->pid,
		 held == 0 ? "true" : "false");
	respond_posture(c, sb, posture_reason_name(r), held == 0);
}

/* ---- egress: the policy, and what its audit says ---- */

/* {"name", "policy": POLICY or null, "posture": {...}, "audit": [the last lines]}: as many of
 * the last lines (up to tail) as fit the answer. */
static void respond_egress(struct admin_conn *c, const struct sandbox *sb, uint32_t tail)
{
	static char text[LIMIT_ADMIN_OUT_BYTES - 1024];

	for (uint32_t k = tail;; k = k > 10 ? k - 10 : 0) {
		struct buf b;
		struct json_writer w;

		buf_init(&b, text, sizeof(text));
		json_writer_init(&w, &b);
		json_obj_begin(&w);
		json_key(&w, "name");
		json_str_write(&w, sb->name);
		json_key(&w, "policy");
		egress_view_policy(&w, sb->egress_json);
		json_key(&w, "posture");
		posture_json(&w, &sb->posture);
		json_key(&w, "audit");
		egress_view_audit(&w, sb, k);
		json_obj_end(&w);
		if (json_writer_finish(&w) == 0) {
			admin_respond(c, 200, &b);
			return;
		}
		if (k == 0)
			break;
	}
	admin_respond_error(c, 500, "internal", "the policy does not fit its buffer");
}

void admin_egress_get(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	char v[16];
	long tail = EGRESS_VIEW_AUDIT_MAX;

	admin_query_value(query, "tail", v, sizeof(v));
	if (v[0]) {
		char *end;

		tail = strtol(v, &end, 10);
		if (*end || tail < 0 || tail > EGRESS_VIEW_AUDIT_MAX) {
			admin_respond_error(c, 400, "bad_request", "tail is a number from 0 to 100");
			return;
		}
	}
	respond_egress(c, sb, (uint32_t)tail);
}

/* A new policy, for the connections that start from now on: read strictly (400 when the body
 * is no JSON, 422 with the reader's message when it is no policy: nothing changes then),
 * kept, recorded in sandbox.json and the audit, and the posture follows (report mode is a
 * sticky T0). */
void admin_egress_put(struct admin_conn *c, struct sandbox *sb, const char *query)
{
	static struct egress_policy pol;
	static struct json_token tok[4];
	static char old_json[EGRESS_POLICY_BYTES];
	char why[512], norm[EGRESS_POLICY_BYTES];
	struct json_doc doc;
	int r;

	if (sb->state == SB_CREATING || sb->state == SB_REMOVING) {
		admin_respond_error(c, 409, "busy", sb->state == SB_CREATING
				    ? "the sandbox is still being created: set its policy once it is ready"
				    : "the sandbox is being removed");
		return;
	}
	r = json_parse(&doc, (const char *)c->body, c->body_len, tok, ARRAY_LEN(tok));
	if (r == ERR_PARSE || c->body_len == 0) {
		admin_respond_error(c, 400, "bad_json", "the body is not valid JSON: send a policy "
				    "(docs/EGRESS.md \"Policy\")");
		return;
	}
	if (egress_policy_parse((const char *)c->body, c->body_len, &pol, why, sizeof(why)) != 0 ||
	    egress_secret_check(admin_state.ac.cfg, &pol, why, sizeof(why)) != 0) {
		log_info("egress policy refused", "name=%s", log_q(sb->name));
		admin_respond_error(c, 422, "egress_invalid", why);
		return;
	}
	if (egress_policy_write(&pol, norm, sizeof(norm)) < 0) {
		admin_respond_error(c, 422, "egress_invalid", "egress: the normalised policy does "
				    "not fit");
		return;
	}
	/* kept first: a policy in force that a restart would not bring back (the old one, maybe
	 * looser, would come back instead) is no change to answer 200 for */
	memcpy(old_json, sb->egress_json, sizeof(old_json));
	sandbox_egress_json_set(sb, norm);
	if (sb->dir_made && (r = sandbox_record_write(admin_state.ac.cfg, sb)) != 0) {
		sandbox_egress_json_set(sb, old_json);
		log_warn("cannot write sandbox.json", "name=%s error=%s", log_q(sb->name),
			 log_q(err_str(r)));
		admin_respond_error(c, 507, "record_unwritable", "the sandbox's record cannot be "
				    "written (is the agentshare full?): the policy is unchanged");
		return;
	}
	posture_egress_policy(&sb->posture, true);
	if (pol.mode == EGRESS_REPORT)
		posture_taint(sb, POSTURE_EGRESS_REPORT_ONLY, "api");
	egress_audit_policy(sb, "api");
	egress_policy_changed(sb);
	log_info("egress policy replaced", "name=%s uid=%u pid=%d mode=%s allow=%u routes=%u",
		 log_q(sb->name), (unsigned)c->uid, (int)c->pid,
		 pol.mode == EGRESS_REPORT ? "report" : "enforce", pol.nallow, pol.nroutes);
	respond_egress(c, sb, 0);
}
