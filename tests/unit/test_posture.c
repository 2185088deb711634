/* test_posture.c: a sandbox's posture (src/sandbox/posture.c): the fixed words both ways, the
 * tier from its reasons, what a create request starts as, the API's JSON, and sandbox.json's
 * record read back as it was written (a bad one refused, leaving the posture as it was). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/posture.h"
#include "sandbox/request.h"

static void test_every_reason_word_parses_back_and_unknown_words_do_not(void **state)
{
	enum posture_reason r;
	int n = 0;

	for (int i = 0; i < POSTURE_REASONS; i++) {
		const char *w = posture_reason_name((enum posture_reason)i);

		assert_non_null(w);
		assert_int_equal(posture_reason_parse(w, &r), 0);
		assert_int_equal(r, i);
		n++;
	}
	assert_int_equal(n, 9);
	assert_string_equal(posture_reason_name(POSTURE_EGRESS_REPORT_ONLY), "egress_report_only");
	assert_null(posture_reason_name(POSTURE_REASONS));
	assert_int_equal(posture_reason_parse("tainted", &r), -1);
	assert_int_equal(posture_reason_parse("ENV_CREDENTIAL", &r), -1);
	assert_int_equal(posture_reason_parse("", &r), -1);
	assert_int_equal(posture_reason_parse(NULL, &r), -1);
	assert_string_equal(posture_reason_name(POSTURE_DIRECT_DOCKER_EXEC), "direct_docker_exec");
}

static void test_t1_only_with_a_verified_network_and_no_reason(void **state)
{
	struct posture p = { 0 };

	assert_false(posture_is_t1(&p)); /* not read yet: network_unverified */
	assert_int_equal(posture_reasons(&p), POSTURE_BIT(POSTURE_NETWORK_UNVERIFIED));
	p.net_checked = true;
	assert_false(posture_is_t1(&p)); /* read, and not the managed internal one */
	p.net_ok = true;
	assert_true(posture_is_t1(&p));
	assert_string_equal(posture_tier(&p), "T1");
	p.taints = POSTURE_BIT(POSTURE_OPERATOR_DECLARED);
	assert_string_equal(posture_tier(&p), "T0");
	p.taints = 0;
	p.at_create = POSTURE_BIT(POSTURE_ENV_CREDENTIAL);
	assert_string_equal(posture_tier(&p), "T0");
}

static void test_an_operator_network_is_t0_for_that_reason_alone(void **state)
{
	struct posture p = { .at_create = POSTURE_BIT(POSTURE_OPERATOR_NETWORK) };

	assert_int_equal(posture_reasons(&p), POSTURE_BIT(POSTURE_OPERATOR_NETWORK));
	assert_false(posture_is_t1(&p));
}

static void test_a_request_starts_as_its_env_and_network_say(void **state)
{
	struct create_req req;
	struct posture p;

	memset(&req, 0, sizeof(req));
	req.env[req.nenv++] = "LANG=C.UTF-8";
	assert_int_equal(posture_request_reasons(&req), 0);
	posture_from_request(&p, &req);
	assert_int_equal(p.at_create, 0);
	assert_int_equal(p.egress, POSTURE_EGRESS_DEFAULT_DENY);
	assert_false(p.net_checked);
	req.env[req.nenv++] = "GITHUB_TOKEN=x";
	assert_int_equal(posture_request_reasons(&req), POSTURE_BIT(POSTURE_ENV_CREDENTIAL));
	req.network = "opnet";
	posture_from_request(&p, &req);
	assert_int_equal(p.at_create, POSTURE_BIT(POSTURE_ENV_CREDENTIAL) |
					  POSTURE_BIT(POSTURE_OPERATOR_NETWORK));
	assert_int_equal(p.egress, POSTURE_EGRESS_OPERATOR_SUPPLIED);
	assert_string_equal(posture_egress_name(p.egress), "operator-supplied");
}

/* A policy in enforce mode: egress "proxy-allowlist" and still T1 once the network is
 * verified; in report mode the request would be T0 egress_report_only (for require_tier),
 * which is no reason at create: the caller records it as a taint. */
static void test_an_egress_policy_at_create_and_after(void **state)
{
	static struct create_req req;
	struct posture p;

	memset(&req, 0, sizeof(req));
	snprintf(req.egress_json, sizeof(req.egress_json), "{\"mode\":\"enforce\"}");
	assert_int_equal(posture_request_reasons(&req), 0);
	posture_from_request(&p, &req);
	assert_int_equal(p.egress, POSTURE_EGRESS_PROXY_ALLOWLIST);
	assert_string_equal(posture_egress_name(p.egress), "proxy-allowlist");
	p.net_checked = p.net_ok = true;
	assert_true(posture_is_t1(&p));
	req.egress_report = true;
	assert_int_equal(posture_request_reasons(&req), POSTURE_BIT(POSTURE_EGRESS_REPORT_ONLY));
	posture_from_request(&p, &req);
	assert_int_equal(p.at_create, 0);
	assert_int_equal(p.egress, POSTURE_EGRESS_PROXY_ALLOWLIST);
	p.taints |= POSTURE_BIT(POSTURE_EGRESS_REPORT_ONLY);
	p.net_checked = p.net_ok = true;
	assert_false(posture_is_t1(&p));
	/* set and cleared by a PUT; an operator's network stays what it is */
	posture_egress_policy(&p, false);
	assert_int_equal(p.egress, POSTURE_EGRESS_DEFAULT_DENY);
	posture_egress_policy(&p, true);
	assert_int_equal(p.egress, POSTURE_EGRESS_PROXY_ALLOWLIST);
	p.egress = POSTURE_EGRESS_OPERATOR_SUPPLIED;
	posture_egress_policy(&p, true);
	assert_int_equal(p.egress, POSTURE_EGRESS_OPERATOR_SUPPLIED);
	/* no policy: default-deny */
	req.egress_json[0] = '\0';
	posture_from_request(&p, &req);
	assert_int_equal(p.egress, POSTURE_EGRESS_DEFAULT_DENY);
	assert_int_equal(posture_request_reasons(&req), 0);
}

static size_t write_json(const struct posture *p, bool record, char *out, size_t size)
{
	struct buf b;
	struct json_writer w;

	buf_init(&b, out, size);
	json_writer_init(&w, &b);
	if (record)
		posture_record_write(&w, p);
	else
		posture_json(&w, p);
	assert_int_equal(json_writer_finish(&w), 0);
	out[b.len] = '\0';
	return b.len;
}

static void test_the_api_object_names_tier_reasons_and_taints(void **state)
{
	struct posture p = { .net_checked = true, .net_ok = true };
	char out[1024], text[128];

	write_json(&p, false, out, sizeof(out));
	assert_string_equal(out, "{\"tier\":\"T1\",\"isolation\":\"shared-kernel\",\"egress\":"
				 "\"default-deny\",\"identity\":\"uds-peercred\",\"reasons\":[],"
				 "\"taints\":[],\"network_verified\":true}");
	assert_int_equal(posture_text(&p, text, sizeof(text)), 0);
	assert_string_equal(text, "T1");
	p.taints = POSTURE_BIT(POSTURE_DIRECT_DOCKER_EXEC);
	p.taint_ms[POSTURE_DIRECT_DOCKER_EXEC] = 1764633600123; /* 2025-12-02T00:00:00.123Z */
	p.at_create = POSTURE_BIT(POSTURE_ENV_CREDENTIAL);
	write_json(&p, false, out, sizeof(out));
	assert_non_null(strstr(out, "\"tier\":\"T0\""));
	assert_non_null(strstr(out, "\"reasons\":[\"env_credential\",\"direct_docker_exec\"]"));
	assert_non_null(strstr(out, "\"taints\":[{\"reason\":\"direct_docker_exec\",\"at\":"
				    "\"2025-12-02T00:00:00Z\"}]"));
	assert_int_equal(posture_text(&p, text, sizeof(text)), 0);
	assert_string_equal(text, "T0 (env_credential, direct_docker_exec)");
	assert_int_equal(posture_text(&p, text, 8), ERR_LIMIT);
}

static void test_the_record_reads_back_as_written(void **state)
{
	struct posture p = { 0 }, q;
	struct json_token tok[64];
	struct json_doc doc;
	char out[1024];
	size_t n;

	p.at_create = POSTURE_BIT(POSTURE_OPERATOR_NETWORK);
	p.taints = POSTURE_BIT(POSTURE_NETWORK_ATTACHED) | POSTURE_BIT(POSTURE_CONTAINER_CHANGED);
	p.taint_ms[POSTURE_NETWORK_ATTACHED] = 111;
	p.taint_ms[POSTURE_CONTAINER_CHANGED] = 222;
	p.egress = POSTURE_EGRESS_OPERATOR_SUPPLIED;
	n = write_json(&p, true, out, sizeof(out));
	assert_int_equal(json_parse(&doc, out, n, tok, 64), 0);
	memset(&q, 0x55, sizeof(q));
	assert_int_equal(posture_record_read(&doc, 0, &q), 0);
	assert_int_equal(q.at_create, p.at_create);
	assert_int_equal(q.taints, p.taints);
	assert_int_equal(q.taint_ms[POSTURE_NETWORK_ATTACHED], 111);
	assert_int_equal(q.taint_ms[POSTURE_CONTAINER_CHANGED], 222);
	assert_int_equal(q.taint_ms[POSTURE_DIRECT_DOCKER_EXEC], 0);
	assert_int_equal(q.egress, POSTURE_EGRESS_OPERATOR_SUPPLIED);
	assert_false(q.net_checked); /* the engine is read again, never taken from the record */
	/* a report-mode taint and a proxy allowlist come back as they were */
	p.taints |= POSTURE_BIT(POSTURE_EGRESS_REPORT_ONLY);
	p.taint_ms[POSTURE_EGRESS_REPORT_ONLY] = 333;
	p.egress = POSTURE_EGRESS_PROXY_ALLOWLIST;
	n = write_json(&p, true, out, sizeof(out));
	assert_int_equal(json_parse(&doc, out, n, tok, 64), 0);
	assert_int_equal(posture_record_read(&doc, 0, &q), 0);
	assert_int_equal(q.taints, p.taints);
	assert_int_equal(q.taint_ms[POSTURE_EGRESS_REPORT_ONLY], 333);
	assert_int_equal(q.egress, POSTURE_EGRESS_PROXY_ALLOWLIST);
}

static void test_a_bad_record_is_refused_and_changes_nothing(void **state)
{
	static const char *const bad[] = {
		"[]",
		"{\"at_create\":\"env_credential\"}",
		"{\"at_create\":[\"made_up\"]}",
		"{\"taints\":[{\"reason\":\"nope\",\"at_ms\":1}]}",
		"{\"taints\":{}}",
	};
	struct posture p = { .taints = POSTURE_BIT(POSTURE_OPERATOR_DECLARED) }, before;
	struct json_token tok[64];
	struct json_doc doc;

	before = p;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(json_parse(&doc, bad[i], strlen(bad[i]), tok, 64), 0);
		assert_int_equal(posture_record_read(&doc, 0, &p), ERR_PARSE);
		assert_memory_equal(&p, &before, sizeof(p));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_reason_word_parses_back_and_unknown_words_do_not),
		cmocka_unit_test(test_t1_only_with_a_verified_network_and_no_reason),
		cmocka_unit_test(test_an_operator_network_is_t0_for_that_reason_alone),
		cmocka_unit_test(test_a_request_starts_as_its_env_and_network_say),
		cmocka_unit_test(test_an_egress_policy_at_create_and_after),
		cmocka_unit_test(test_the_api_object_names_tier_reasons_and_taints),
		cmocka_unit_test(test_the_record_reads_back_as_written),
		cmocka_unit_test(test_a_bad_record_is_refused_and_changes_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
