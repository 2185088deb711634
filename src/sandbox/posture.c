/* posture.c: a sandbox's tier and its reasons (posture.h): the words, the JSON, the record.
 * What records a change on a live sandbox is taint.c's. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sandbox/posture.h"
#include "sandbox/request.h"
#include "profile/credscan.h"

static const char *const reason_names[POSTURE_REASONS] = {
	[POSTURE_ENV_CREDENTIAL] = "env_credential",
	[POSTURE_OPERATOR_NETWORK] = "operator_network",
	[POSTURE_PLATFORM_COMPATIBILITY] = "platform_compatibility",
	[POSTURE_DIRECT_DOCKER_EXEC] = "direct_docker_exec",
	[POSTURE_NETWORK_ATTACHED] = "network_attached",
	[POSTURE_CONTAINER_CHANGED] = "container_changed",
	[POSTURE_OPERATOR_DECLARED] = "operator_declared",
	[POSTURE_NETWORK_UNVERIFIED] = "network_unverified",
	[POSTURE_EGRESS_REPORT_ONLY] = "egress_report_only",
};

static const char *const egress_names[] = {
	[POSTURE_EGRESS_DEFAULT_DENY] = "default-deny",
	[POSTURE_EGRESS_PROXY_ALLOWLIST] = "proxy-allowlist",
	[POSTURE_EGRESS_OPERATOR_SUPPLIED] = "operator-supplied",
	[POSTURE_EGRESS_UNRESTRICTED_COMPAT] = "unrestricted-platform-compatibility",
	[POSTURE_EGRESS_NONE] = "none",
};

static const char *const isolation_names[] = {
	[POSTURE_SHARED_KERNEL] = "shared-kernel",
	[POSTURE_VM_EMULATED] = "emulated",
	[POSTURE_VM_HARDWARE] = "hardware-virtualized",
};

_Static_assert(POSTURE_REASONS <= 16, "reasons are 16-bit masks");

const char *posture_reason_name(enum posture_reason r)
{
	return (unsigned)r < POSTURE_REASONS ? reason_names[r] : NULL;
}

int posture_reason_parse(const char *word, enum posture_reason *r)
{
	for (int i = 0; word && i < POSTURE_REASONS; i++)
		if (strcmp(word, reason_names[i]) == 0) {
			*r = (enum posture_reason)i;
			return 0;
		}
	return -1;
}

const char *posture_egress_name(enum posture_egress e)
{
	return (unsigned)e < ARRAY_LEN(egress_names) ? egress_names[e] : "default-deny";
}

const char *posture_isolation_name(enum posture_isolation i)
{
	return (unsigned)i < ARRAY_LEN(isolation_names) ? isolation_names[i] : "shared-kernel";
}

uint16_t posture_reasons(const struct posture *p)
{
	uint16_t r = p->at_create | p->taints;

	/* an operator's network is T0 for that reason: it is not "unverified" as well */
	if (!(r & POSTURE_BIT(POSTURE_OPERATOR_NETWORK)) && (!p->net_checked || !p->net_ok))
		r |= POSTURE_BIT(POSTURE_NETWORK_UNVERIFIED);
	return r;
}

bool posture_is_t1(const struct posture *p)
{
	return posture_reasons(p) == 0;
}

const char *posture_tier(const struct posture *p)
{
	return posture_is_t1(p) ? "T1" : "T0";
}

uint16_t posture_request_reasons(const struct create_req *req)
{
	uint16_t r = 0;

	for (uint32_t i = 0; i < req->nenv; i++)
		if (credscan_entry(req->env[i]))
			r |= POSTURE_BIT(POSTURE_ENV_CREDENTIAL);
	if (req->network)
		r |= POSTURE_BIT(POSTURE_OPERATOR_NETWORK);
	if (req->egress_json[0] && req->egress_report)
		r |= POSTURE_BIT(POSTURE_EGRESS_REPORT_ONLY);
	return r;
}

void posture_egress_policy(struct posture *p, bool has_policy)
{
	if (p->egress == POSTURE_EGRESS_OPERATOR_SUPPLIED)
		return;
	p->egress = has_policy ? POSTURE_EGRESS_PROXY_ALLOWLIST
		    : p->isolation != POSTURE_SHARED_KERNEL ? POSTURE_EGRESS_NONE
		    : POSTURE_EGRESS_DEFAULT_DENY;
}

void posture_from_request(struct posture *p, const struct create_req *req)
{
	memset(p, 0, sizeof(*p));
	p->at_create = posture_request_reasons(req) &
		       (uint16_t)~POSTURE_BIT(POSTURE_EGRESS_REPORT_ONLY);
	p->egress = req->network ? POSTURE_EGRESS_OPERATOR_SUPPLIED : POSTURE_EGRESS_DEFAULT_DENY;
	/* a VM's accelerator is the runtime's to say (posture_vm_accel); emulated until then */
	p->isolation = req->vm ? POSTURE_VM_EMULATED : POSTURE_SHARED_KERNEL;
	posture_egress_policy(p, req->egress_json[0] != '\0');
}

static void time_write(struct json_writer *w, int64_t ms)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	char s[40];

	gmtime_r(&t, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_str_write(w, s);
}

static void reasons_write(struct json_writer *w, uint16_t bits)
{
	json_arr_begin(w);
	for (int i = 0; i < POSTURE_REASONS; i++)
		if (bits & POSTURE_BIT(i))
			json_str_write(w, reason_names[i]);
	json_arr_end(w);
}

static void taints_write(struct json_writer *w, const struct posture *p, bool record)
{
	json_arr_begin(w);
	for (int i = 0; i < POSTURE_REASONS; i++) {
		if (!(p->taints & POSTURE_BIT(i)))
			continue;
		json_obj_begin(w);
		json_key(w, "reason");
		json_str_write(w, reason_names[i]);
		if (record) {
			json_key(w, "at_ms");
			json_int_write(w, p->taint_ms[i]);
		} else {
			json_key(w, "at");
			time_write(w, p->taint_ms[i]);
		}
		json_obj_end(w);
	}
	json_arr_end(w);
}

void posture_json(struct json_writer *w, const struct posture *p)
{
	json_obj_begin(w);
	json_key(w, "tier");
	json_str_write(w, posture_tier(p));
	json_key(w, "isolation");
	json_str_write(w, posture_isolation_name(p->isolation));
	json_key(w, "egress");
	json_str_write(w, posture_egress_name(p->egress));
	json_key(w, "identity");
	/* a VM is known by which socket its control port is, not by a peer credential */
	json_str_write(w, p->isolation == POSTURE_SHARED_KERNEL ? "uds-peercred" : "vm-control-port");
	json_key(w, "reasons");
	reasons_write(w, posture_reasons(p));
	json_key(w, "taints");
	taints_write(w, p, false);
	json_key(w, "network_verified");
	json_bool_write(w, p->net_checked && p->net_ok);
	json_obj_end(w);
}

int posture_text(const struct posture *p, char *out, size_t size)
{
	uint16_t bits = posture_reasons(p);
	struct buf b;
	int r;

	buf_init(&b, out, size);
	r = buf_printf(&b, "%s", posture_tier(p));
	for (int i = 0, n = 0; r == 0 && i < POSTURE_REASONS; i++)
		if (bits & POSTURE_BIT(i))
			r = buf_printf(&b, "%s%s", n++ ? ", " : " (", reason_names[i]);
	if (r == 0 && bits)
		r = buf_printf(&b, ")");
	if (r == 0 && b.len < size)
		out[b.len] = '\0';
	return r == 0 && b.len < size ? 0 : ERR_LIMIT;
}

void posture_record_write(struct json_writer *w, const struct posture *p)
{
	json_obj_begin(w);
	json_key(w, "at_create");
	reasons_write(w, p->at_create);
	json_key(w, "taints");
	taints_write(w, p, true);
	json_key(w, "egress");
	json_str_write(w, posture_egress_name(p->egress));
	json_key(w, "isolation");
	json_str_write(w, posture_isolation_name(p->isolation));
	json_obj_end(w);
}

static int bits_read(const struct json_doc *doc, int arr, uint16_t *bits)
{
	char word[40];
	enum posture_reason r;

	*bits = 0;
	if (arr < 0)
		return 0;
	if (doc->tok[arr].type != JSON_ARRAY)
		return ERR_PARSE;
	for (int i = json_first(doc, arr); i >= 0; i = json_next(doc, arr, i)) {
		if (json_str(doc, i, word, sizeof(word)) < 0 || posture_reason_parse(word, &r) != 0)
			return ERR_PARSE;
		*bits |= POSTURE_BIT(r);
	}
	return 0;
}

int posture_record_read(const struct json_doc *doc, int tok, struct posture *p)
{
	struct posture q;
	char word[48];
	enum posture_reason r;
	int arr, v;

	memset(&q, 0, sizeof(q));
	if (tok < 0 || doc->tok[tok].type != JSON_OBJECT)
		return ERR_PARSE;
	if (bits_read(doc, json_obj_get(doc, tok, "at_create"), &q.at_create) != 0)
		return ERR_PARSE;
	arr = json_obj_get(doc, tok, "taints");
	if (arr >= 0 && doc->tok[arr].type != JSON_ARRAY)
		return ERR_PARSE;
	for (int i = arr >= 0 ? json_first(doc, arr) : -1; i >= 0; i = json_next(doc, arr, i)) {
		int64_t at = 0;

		if (json_str(doc, json_obj_get(doc, i, "reason"), word, sizeof(word)) < 0 ||
		    posture_reason_parse(word, &r) != 0)
			return ERR_PARSE;
		json_int(doc, json_obj_get(doc, i, "at_ms"), &at);
		q.taints |= POSTURE_BIT(r);
		q.taint_ms[r] = at;
	}
	if (json_str(doc, json_obj_get(doc, tok, "egress"), word, sizeof(word)) >= 0) {
		for (v = 0; v < (int)ARRAY_LEN(egress_names); v++)
			if (strcmp(word, egress_names[v]) == 0)
				q.egress = (uint8_t)v;
	}
	if (json_str(doc, json_obj_get(doc, tok, "isolation"), word, sizeof(word)) >= 0)
		for (v = 0; v < (int)ARRAY_LEN(isolation_names); v++)
			if (strcmp(word, isolation_names[v]) == 0)
				q.isolation = (uint8_t)v;
	*p = q;
	return 0;
}
