/* test_e2b_net.c: E2B's network options onto the operator's e2b_egress_policy
 * (src/e2b/e2b_net.c): every field (allow_internet_access, allowOut, denyOut, rules' header
 * transforms, allowPublicTraffic, maskRequestHost, egressProxy, unknown ones), bad input
 * refused with nothing changed, the result taken as a create body's "egress" unchanged,
 * the policy file's load (config_e2b_egress_load), and the never-wider property over
 * generated operator policies and requests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/config.h"
#include "e2b/e2b_net.h"
#include "egress/policy.h"
#include "json/json.h"
#include "sandbox/request.h"

static struct config cfg;
static char res[EGRESS_POLICY_BYTES], why[1024];
static struct egress_policy opp, resp;

/* op (any policy JSON, or NULL: unset) as the operator's, normalised as the load keeps it. */
static void set_op(const char *op)
{
	char err[256];

	cfg.e2b_egress_json[0] = '\0';
	if (!op)
		return;
	if (egress_policy_parse(op, strlen(op), &opp, err, sizeof(err)) != 0)
		fail_msg("operator policy refused: %s (%s)", err, op);
	assert_true(egress_policy_write(&opp, cfg.e2b_egress_json,
					sizeof(cfg.e2b_egress_json)) > 0);
}

static int run(const char *op, const char *body)
{
	set_op(op);
	memset(res, 'x', sizeof(res) - 1);
	res[sizeof(res) - 1] = '\0';
	return e2b_net_policy(&cfg, body, strlen(body), res, sizeof(res), why, sizeof(why));
}

/* Accepted; the result as a policy (resp), or "" */
static void ok(const char *op, const char *body)
{
	char err[256];

	if (run(op, body) != 0)
		fail_msg("refused: %s (body %s)", why, body);
	if (res[0] && egress_policy_parse(res, strlen(res), &resp, err, sizeof(err)) != 0)
		fail_msg("result does not read: %s", err);
}

/* Refused: why names what, and the result is untouched. */
static void refused(const char *op, const char *body, const char *what)
{
	if (run(op, body) != -1)
		fail_msg("accepted: %s (result %s)", body, res);
	if (!strstr(why, what))
		fail_msg("\"%s\" does not say %s (body %s)", why, what, body);
	if (res[0] != 'x' || strspn(res, "x") != strlen(res))
		fail_msg("result changed on refusal: %s", res);
}

static bool has_allow(const char *host, uint16_t port, bool suffix)
{
	for (uint32_t i = 0; i < resp.nallow; i++)
		if (!strcmp(resp.allow[i].host, host) && resp.allow[i].port == port &&
		    resp.allow[i].suffix == suffix)
			return true;
	return false;
}

#define OP "{\"allow\":[\"pypi.org\",\"*.githubusercontent.com\",\"api.x.com:8443\"," \
	"\"1.2.3.4\",\"10.9.8.7:5432\"],\"routes\":[{\"host\":\"api.anthropic.com\"," \
	"\"header\":\"x-api-key\",\"secret_file\":\"/etc/agentic/secrets/a\"}]," \
	"\"allow_ranges\":[\"private\",\"loopback\",\"10.1.0.0/16\",\"192.168.5.0/24\",\"host\"]}"

static void test_no_operator_policy_means_no_egress(void **state)
{
	ok(NULL, "{\"templateID\":\"base\"}");
	assert_string_equal(res, "");
	assert_string_equal(why, "");
	ok(NULL, "{\"allow_internet_access\":true,\"network\":{\"allowOut\":[\"pypi.org\"]}}");
	assert_string_equal(res, "");
	assert_non_null(strstr(why, "no e2b_egress_policy"));
	/* a transform needs a route of the operator's: with no policy there is none */
	refused(NULL, "{\"network\":{\"rules\":{\"api.anthropic.com\":[{\"transform\":{\"headers\":"
		"{\"x-api-key\":\"sk-123\"}}}]}}}", "no credential route");
	assert_null(strstr(why, "sk-123"));
}

static void test_default_and_true_give_the_operator_policy(void **state)
{
	ok(OP, "{\"templateID\":\"base\",\"metadata\":{\"k\":\"v\"}}");
	assert_string_equal(res, cfg.e2b_egress_json);
	assert_string_equal(why, "");
	ok(OP, "{\"allow_internet_access\":true,\"network\":null}");
	assert_string_equal(res, cfg.e2b_egress_json);
	ok(OP, "{\"allow_internet_access\":null,\"network\":{}}");
	assert_string_equal(res, cfg.e2b_egress_json);
}

static void test_no_internet_access_means_no_egress(void **state)
{
	ok(OP, "{\"allow_internet_access\":false}");
	assert_string_equal(res, "");
	ok(OP, "{\"allow_internet_access\":false,\"network\":{\"denyOut\":[\"10.0.0.0/8\"]}}");
	assert_string_equal(res, "");
	ok(OP, "{\"network\":{\"denyOut\":[\"0.0.0.0/0\"]}}");
	assert_string_equal(res, "");
	ok(OP, "{\"network\":{\"denyOut\":[\"::/0\"]}}");
	assert_string_equal(res, "");
}

static void test_allow_out_keeps_what_it_names_of_the_operator_policy(void **state)
{
	ok(OP, "{\"network\":{\"denyOut\":[\"0.0.0.0/0\"],\"allowOut\":[\"PyPI.org\","
	   "\"raw.githubusercontent.com\",\"*.sub.githubusercontent.com\",\"1.2.3.0/24\","
	   "\"evil.example\",\"*.x.com\",\"8.8.8.8\"]}}");
	assert_int_equal(resp.nallow, 5);
	assert_true(has_allow("pypi.org", 443, false));
	assert_true(has_allow("raw.githubusercontent.com", 443, false));
	assert_true(has_allow("sub.githubusercontent.com", 443, true));
	assert_true(has_allow("1.2.3.4", 443, false));
	assert_true(has_allow("api.x.com", 8443, false));
	assert_int_equal(resp.nroutes, 0);
	/* the operator's ranges, rate and mode stay */
	assert_int_equal(resp.nranges, opp.nranges);
	assert_non_null(strstr(why, "allowOut[4] evil.example"));
	assert_non_null(strstr(why, "allowOut[6] 8.8.8.8/32"));
	assert_null(strstr(why, "allowOut[0]"));
	/* a route stays when allowOut names its host; allowOut without denyOut narrows too */
	ok(OP, "{\"network\":{\"allowOut\":[\"api.anthropic.com\"]}}");
	assert_int_equal(resp.nallow, 0);
	assert_int_equal(resp.nroutes, 1);
	assert_string_equal(resp.routes[0].host, "api.anthropic.com");
	ok(OP, "{\"allow_internet_access\":false,\"network\":{\"allowOut\":[\"*.com\"]}}");
	assert_int_equal(resp.nroutes, 1);
	assert_true(has_allow("api.x.com", 8443, false));
	/* nothing named: no egress at all, and said so */
	ok(OP, "{\"network\":{\"allowOut\":[\"nothing.example\"]}}");
	assert_string_equal(res, "");
	assert_non_null(strstr(why, "no destination is left"));
	ok(OP, "{\"network\":{\"allowOut\":[]}}");
	assert_string_equal(res, "");
	/* all traffic in allowOut (E2B's ALL_TRAFFIC) keeps all of the operator's */
	ok(OP, "{\"network\":{\"denyOut\":[\"0.0.0.0/0\"],\"allowOut\":[\"0.0.0.0/0\"]}}");
	assert_string_equal(res, cfg.e2b_egress_json);
	ok(OP, "{\"allow_internet_access\":false,\"network\":{\"allowOut\":[\"::/0\"]}}");
	assert_string_equal(res, cfg.e2b_egress_json);
}

static void test_allow_out_refuses_more_than_a_policy_holds(void **state)
{
	char body[8192];
	size_t n = (size_t)snprintf(body, sizeof(body), "{\"network\":{\"allowOut\":[");

	for (int i = 0; i < 40; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"h%d.githubusercontent.com\"",
				      i ? "," : "", i);
	snprintf(body + n, sizeof(body) - n, "]}}");
	refused(OP, body, "more than 32 destinations");
}

static void test_deny_out_removes_what_it_covers(void **state)
{
	ok(OP, "{\"network\":{\"denyOut\":[\"10.0.0.0/8\"]}}");
	/* 10.9.8.7 goes; private, 10.1.0.0/16 and host go whole; loopback, 192.168.5.0/24 stay */
	assert_false(has_allow("10.9.8.7", 5432, false));
	assert_true(has_allow("pypi.org", 443, false));
	assert_int_equal(resp.nallow, 4);
	assert_int_equal(resp.nroutes, 1);
	assert_int_equal(resp.nranges, 2);
	assert_int_equal(resp.ranges[0].kind, ERANGE_LOOPBACK);
	assert_int_equal(resp.ranges[1].kind, ERANGE_CIDR);
	assert_non_null(strstr(why, "4 of the operator's"));
	/* IPv4 written as mapped IPv6 is IPv4, as the worker judges it */
	ok(OP, "{\"network\":{\"denyOut\":[\"::ffff:192.168.5.0/120\"]}}");
	assert_int_equal(resp.nranges, 2); /* private, 192.168.5.0/24 and host go */
	ok(OP, "{\"network\":{\"denyOut\":[\"fe80::/10\",\"127.0.0.1\"]}}");
	assert_int_equal(resp.nranges, 3); /* loopback and host go */
	/* a public range cannot be kept from a name */
	refused(OP, "{\"network\":{\"denyOut\":[\"8.8.8.8\"]}}", "denyOut[0]");
	refused(OP, "{\"network\":{\"denyOut\":[\"10.0.0.0/7\"]}}", "public address range");
	/* ...but from a policy of addresses only, it removes what it covers */
	ok("{\"allow\":[\"1.2.3.4\",\"5.6.7.8:80\"]}", "{\"network\":{\"denyOut\":[\"1.2.3.0/24\"]}}");
	assert_int_equal(resp.nallow, 1);
	assert_true(has_allow("5.6.7.8", 80, false));
	/* with allowOut, what it does not name is denied already */
	ok(OP, "{\"network\":{\"allowOut\":[\"pypi.org\"],\"denyOut\":[\"8.8.8.8\"]}}");
	assert_int_equal(resp.nallow, 1);
	refused(OP, "{\"network\":{\"denyOut\":[\"example.com\"]}}", "no domain names");
	/* IPv4 in IPv6: 6to4's 2002:a00::/24 is 10.0.0.0/8; a range holding such a prefix whole
	 * is refused */
	ok(OP, "{\"network\":{\"denyOut\":[\"2002:a00::/24\"]}}");
	assert_false(has_allow("10.9.8.7", 5432, false));
	assert_int_equal(resp.nranges, 2);
	refused(OP, "{\"network\":{\"denyOut\":[\"::/64\"]}}", "IPv4 in IPv6");
	refused(OP, "{\"network\":{\"denyOut\":[\"2000::/4\"]}}", "IPv4 in IPv6");
}

static void test_header_transforms_land_only_on_the_operators_routes(void **state)
{
	const char *good = "{\"network\":{\"rules\":{\"API.anthropic.com\":[{\"transform\":"
			   "{\"headers\":{\"X-Api-Key\":\"sk-secret-1\"}}},{}]}}}";

	ok(OP, good);
	assert_string_equal(res, cfg.e2b_egress_json);
	assert_non_null(strstr(why, "injects its own secret"));
	assert_null(strstr(why, "sk-secret-1"));
	assert_null(strstr(res, "sk-secret-1"));
	refused(OP, "{\"network\":{\"rules\":{\"pypi.org\":[{\"transform\":{\"headers\":"
		"{\"authorization\":\"Bearer sk-secret-2\"}}}]}}}", "no credential route");
	assert_null(strstr(why, "sk-secret-2"));
	refused(OP, "{\"network\":{\"rules\":{\"api.anthropic.com\":[{\"transform\":{\"headers\":"
		"{\"authorization\":\"sk-secret-3\"}}}]}}}", "not the one");
	assert_null(strstr(why, "sk-secret-3"));
	refused(OP, "{\"network\":{\"rules\":{\"api.anthropic.com\":[{\"transform\":{\"headers\":"
		"{\"x-api-key\":1}}}]}}}", "must be a string");
	refused(OP, "{\"network\":{\"rules\":{\"api.anthropic.com\":[{\"transform\":{\"body\":"
		"\"x\"}}]}}}", "no other transform");
	refused(OP, "{\"network\":{\"rules\":{\"api.anthropic.com\":[{\"when\":1}]}}}",
		"a rule must be");
	refused(OP, "{\"network\":{\"rules\":{\"not a host!\":[]}}}", "not a host name");
	/* a name shaped like a credential is never echoed */
	refused(OP, "{\"network\":{\"rules\":{\"sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789.com\":"
		"[{\"transform\":{\"headers\":{\"x\":\"v\"}}}]}}}", "shaped like a credential");
	assert_null(strstr(why, "sk-ant"));
	ok(OP, "{\"network\":{\"allowOut\":[\"sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123456789.com\"]}}");
	assert_non_null(strstr(why, "allowOut[0] (a name shaped like a credential)"));
	assert_null(strstr(why, "sk-ant"));
	refused(OP, "{\"network\":{\"rules\":{\"a.com\":[],\"A.com\":[]}}}", "given twice");
	refused(OP, "{\"network\":{\"rules\":[]}}", "network.rules: must be an object");
	/* a route allowOut leaves out: not applied, said so */
	ok(OP, "{\"network\":{\"allowOut\":[\"pypi.org\"],\"rules\":{\"api.anthropic.com\":"
	   "[{\"transform\":{\"headers\":{\"x-api-key\":\"v\"}}}]}}}");
	assert_int_equal(resp.nroutes, 0);
	assert_non_null(strstr(why, "not applied"));
}

static void test_inbound_options_are_ignored_and_egress_proxy_refused(void **state)
{
	ok(OP, "{\"network\":{\"allowPublicTraffic\":false,\"maskRequestHost\":\"h:${PORT}\"}}");
	assert_string_equal(res, cfg.e2b_egress_json);
	assert_non_null(strstr(why, "allowPublicTraffic: ignored"));
	assert_non_null(strstr(why, "maskRequestHost: ignored"));
	refused(OP, "{\"network\":{\"allowPublicTraffic\":\"no\"}}", "must be a boolean");
	refused(OP, "{\"network\":{\"maskRequestHost\":7}}", "must be a string");
	refused(OP, "{\"network\":{\"egressProxy\":{\"address\":\"p.example:1080\",\"username\":"
		"\"u\",\"password\":\"hunter2\"}}}", "egressProxy");
	assert_null(strstr(why, "hunter2"));
	assert_null(strstr(why, "p.example"));
	ok(OP, "{\"network\":{\"egressProxy\":null}}");
	refused(OP, "{\"network\":{\"denyPorts\":[22]}}", "network.denyPorts: not supported");
	refused(OP, "{\"network\":{\"sk-live-ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789\":1}}",
		"a field agentic does not support");
	assert_null(strstr(why, "sk-live"));
}

static void test_bad_input_is_refused_and_changes_nothing(void **state)
{
	char body[16384];
	size_t n;

	refused(OP, "", "not valid JSON");
	refused(OP, "[1]", "a JSON object");
	refused(OP, "{\"allow_internet_access\":\"yes\"}", "must be a boolean");
	refused(OP, "{\"allow_internet_access\":true,\"allow_internet_access\":false}",
		"given twice");
	refused(OP, "{\"network\":[]}", "network: must be an object");
	refused(OP, "{\"network\":{},\"network\":{}}", "given twice");
	refused(OP, "{\"network\":{\"allowOut\":\"pypi.org\"}}", "must be an array");
	refused(OP, "{\"network\":{\"allowOut\":[1]}}", "allowOut[0]: must be a non-empty string");
	refused(OP, "{\"network\":{\"allowOut\":[\"\"]}}", "non-empty");
	refused(OP, "{\"network\":{\"allowOut\":[\"a..b\"]}}", "domain name");
	refused(OP, "{\"network\":{\"allowOut\":[\"*.\"]}}", "domain name");
	refused(OP, "{\"network\":{\"allowOut\":[\"a.com:443\"]}}", "domain name");
	refused(OP, "{\"network\":{\"allowOut\":[\"10.0.0.0/33\"]}}", "ADDRESS/BITS");
	refused(OP, "{\"network\":{\"allowOut\":[\"a.com\"],\"allowOut\":[]}}", "given twice");
	refused(OP, "{\"network\":{\"denyOut\":[\"1.2.3.4/x\"]}}", "ADDRESS/BITS");
	/* too many entries, too long an entry, too many values */
	n = (size_t)snprintf(body, sizeof(body), "{\"network\":{\"allowOut\":[");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"a%d.com\"", i ? "," : "", i);
	snprintf(body + n, sizeof(body) - n, "]}}");
	refused(OP, body, "at most 64 entries");
	n = (size_t)snprintf(body, sizeof(body), "{\"network\":{\"denyOut\":[\"");
	memset(body + n, 'a', 400);
	snprintf(body + n + 400, sizeof(body) - n - 400, "\"]}}");
	refused(OP, body, "at most");
	n = (size_t)snprintf(body, sizeof(body), "{\"metadata\":[");
	for (int i = 0; i < 5000; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s1", i ? "," : "");
	snprintf(body + n, sizeof(body) - n, "]}");
	refused(OP, body, "too large");
	n = (size_t)snprintf(body, sizeof(body), "{\"network\":{\"rules\":{");
	for (int i = 0; i < 17; i++)
		n += (size_t)snprintf(body + n, sizeof(body) - n, "%s\"h%d.com\":[]", i ? "," : "",
				      i);
	snprintf(body + n, sizeof(body) - n, "}}}");
	refused(OP, body, "at most 16 hosts");
}

/* The create body the E2B front end hands request_create_parse: env, and the policy as the
 * body's "egress" (as src/e2b/e2b_api.c writes it). */
static int create_with(struct create_req *req, const char *egress, struct request_error *e)
{
	static char body[EGRESS_POLICY_BYTES + 256];
	int n = snprintf(body, sizeof(body), "{\"env\":{\"HTTP_PROXY\":\"http://evil:1\","
			 "\"A\":\"1\"}%s%s}", egress[0] ? ",\"egress\":" : "", egress);

	config_defaults(&cfg);
	return request_create_parse(req, &cfg, NULL, REQUEST_API_V1, body, (size_t)n, e);
}

static void test_the_result_is_what_a_create_stores(void **state)
{
	static struct create_req req;
	struct request_error e;
	bool proxy = false;
	char norm[EGRESS_POLICY_BYTES];

	ok(OP, "{\"network\":{\"allowOut\":[\"pypi.org\",\"api.anthropic.com\"]}}");
	/* normalised: it reads back to itself, and a create stores it unchanged */
	assert_true(egress_policy_write(&resp, norm, sizeof(norm)) > 0);
	assert_string_equal(norm, res);
	strcpy(norm, res);
	assert_int_equal(create_with(&req, norm, &e), 0);
	assert_string_equal(req.egress_json, norm);
	assert_false(req.egress_report);
	for (uint32_t i = 0; i < req.nenv; i++) {
		assert_null(strstr(req.env[i], "evil"));
		proxy = proxy || strcmp(req.env[i], "HTTPS_PROXY=http://127.0.0.1:3128") == 0;
	}
	assert_true(proxy);
	assert_int_equal(req.nenv, 1 + REQUEST_PROXY_ENV_N);
	/* report mode is the operator's, kept */
	ok("{\"mode\":\"report\",\"allow\":[\"a.com\"]}", "{\"network\":{\"allowOut\":[\"a.com\"]}}");
	assert_non_null(strstr(why, "report mode"));
	strcpy(norm, res);
	assert_int_equal(create_with(&req, norm, &e), 0);
	assert_true(req.egress_report);
	/* none: no policy, and the request's own variables stand */
	assert_int_equal(create_with(&req, "", &e), 0);
	assert_string_equal(req.egress_json, "");
	assert_int_equal(req.nenv, 2);
}

static void test_what_the_sandbox_got_as_e2b_network_info(void **state)
{
	char text[2048];
	struct buf b;
	struct json_writer w;

	set_op(OP);
	buf_init(&b, text, sizeof(text) - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	e2b_net_info(cfg.e2b_egress_json, &w);
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	text[b.len] = '\0';
	assert_string_equal(text, "{\"allowOut\":[\"pypi.org\",\"*.githubusercontent.com\","
			    "\"api.x.com:8443\",\"1.2.3.4\",\"10.9.8.7:5432\",\"api.anthropic.com\"],"
			    "\"denyOut\":[\"0.0.0.0/0\",\"::/0\"]}");
	assert_null(strstr(text, "x-api-key"));
	assert_null(strstr(text, "secrets"));
	buf_init(&b, text, sizeof(text) - 1);
	json_writer_init(&w, &b);
	json_obj_begin(&w);
	e2b_net_info("", &w);
	json_obj_end(&w);
	assert_int_equal(json_writer_finish(&w), 0);
	text[b.len] = '\0';
	assert_string_equal(text, "{\"allowOut\":[],\"denyOut\":[\"0.0.0.0/0\",\"::/0\"]}");
}

/* ---- the policy file ---- */

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_the_policy_file_loads_strictly(void **state)
{
	char dir[] = "/tmp/test_e2b_net.XXXXXX", path[128], err[512], big[EGRESS_POLICY_BYTES + 64];
	const char *big_text;

	assert_non_null(mkdtemp(dir));
	config_defaults(&cfg);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), 0);
	assert_string_equal(cfg.e2b_egress_json, "");
	snprintf(path, sizeof(path), "%s/p.json", dir);
	write_file(path, "{\"allow\":[\"PyPI.org\"]}\n", 0644);
	snprintf(cfg.e2b_egress_policy, sizeof(cfg.e2b_egress_policy), "%s", path);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), 0);
	assert_non_null(strstr(cfg.e2b_egress_json, "\"allow\":[\"pypi.org:443\"]"));
	/* a bad file: refused naming the key, the file and the field; cfg as it was */
	write_file(path, "{\"allow\":[\"a b\"]}", 0644);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "e2b_egress_policy"));
	assert_non_null(strstr(err, path));
	assert_non_null(strstr(err, "egress.allow[0]"));
	assert_non_null(strstr(cfg.e2b_egress_json, "pypi.org:443"));
	write_file(path, "{\"allow\":[]", 0644);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "not JSON"));
	write_file(path, "{}", 0664);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "writable by group or other"));
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	write_file(path, big, 0644);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "larger than"));
	unlink(path);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "cannot open"));
	snprintf(cfg.e2b_egress_policy, sizeof(cfg.e2b_egress_policy), "%s", dir);
	assert_int_equal(config_e2b_egress_load(&cfg, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "not a regular file"));
	assert_non_null(strstr(cfg.e2b_egress_json, "pypi.org:443"));
	rmdir(dir);
	/* the key reads from the config file */
	config_defaults(&cfg);
	big_text = "e2b_egress_policy = /etc/agentic/e2b.json\n";
	assert_int_equal(config_parse(&cfg, big_text, strlen(big_text), err, sizeof(err)), 0);
	assert_string_equal(cfg.e2b_egress_policy, "/etc/agentic/e2b.json");
	big_text = "e2b_egress_policy = e2b.json\n";
	assert_int_equal(config_parse(&cfg, big_text, strlen(big_text), err, sizeof(err)),
			 ERR_PARSE);
	config_defaults(&cfg);
}

/* ---- never wider: generated operator policies and requests ---- */

static const char *const names[] = { "a.com", "b.a.com", "c.b.a.com", "x.org", "y.x.org",
				     "pypi.org", "api.anthropic.com", "com" };
static const char *const addrs[] = { "1.2.3.4", "10.0.0.1", "192.168.1.9", "8.8.8.8",
				     "fd00::1", "2001:4860::8888" };
static const char *const cidrs[] = { "0.0.0.0/0", "10.0.0.0/8", "192.168.1.0/24", "8.8.8.8",
				     "::/0", "fc00::/7", "1.2.3.0/24", "127.0.0.0/8",
				     "169.254.0.0/16", "::ffff:10.0.0.0/104", "2001:4860::/32" };
static const char *const ranges[] = { "private", "loopback", "link-local", "host",
				      "10.1.0.0/16", "192.168.0.0/16", "fd00::/8", "8.8.0.0/16" };
static const uint16_t ports[] = { 443, 80, 8443 };

static bool under(const char *h, const char *s)
{
	size_t hl = strlen(h), sl = strlen(s);

	return hl > sl + 1 && h[hl - sl - 1] == '.' && !strcmp(h + hl - sl, s);
}

static unsigned rnd(unsigned n)
{
	return (unsigned)random() % n;
}

static size_t gen_op(char *s, size_t cap)
{
	size_t n = (size_t)snprintf(s, cap, "{\"mode\":\"%s\",\"allow\":[",
				    rnd(4) ? "enforce" : "report");
	unsigned k = rnd(7);

	for (unsigned i = 0; i < k; i++) {
		bool addr = rnd(4) == 0;
		const char *h = addr ? addrs[rnd(ARRAY_LEN(addrs))] : names[rnd(ARRAY_LEN(names))];
		bool v6 = strchr(h, ':') != NULL;

		n += (size_t)snprintf(s + n, cap - n, "%s\"%s%s%s%s:%u\"", i ? "," : "",
				      !addr && rnd(2) ? "*." : "", v6 ? "[" : "", h, v6 ? "]" : "",
				      ports[rnd(3)]);
	}
	n += (size_t)snprintf(s + n, cap - n, "],\"routes\":[");
	k = rnd(3);
	for (unsigned i = 0; i < k; i++)
		n += (size_t)snprintf(s + n, cap - n, "%s{\"host\":\"%s\",\"header\":\"%s\","
				      "\"secret_file\":\"/s/%u\"}", i ? "," : "",
				      rnd(4) ? names[rnd(ARRAY_LEN(names))] : addrs[rnd(4)],
				      rnd(2) ? "x-api-key" : "authorization", i);
	n += (size_t)snprintf(s + n, cap - n, "],\"allow_ranges\":[");
	k = rnd(4);
	for (unsigned i = 0; i < k; i++)
		n += (size_t)snprintf(s + n, cap - n, "%s\"%s\"", i ? "," : "",
				      ranges[rnd(ARRAY_LEN(ranges))]);
	return n + (size_t)snprintf(s + n, cap - n, "]}");
}

/* The last request's allowOut entries (allow_n < 0: none given) and whether it denies all. */
static char allow_e[8][64];
static int allow_n;
static bool deny_everything;

static size_t gen_list(char *s, size_t cap, const char *key, bool allow)
{
	size_t n = (size_t)snprintf(s, cap, ",\"%s\":[", key);
	unsigned k = rnd(5);

	allow_n = allow ? 0 : allow_n;
	for (unsigned i = 0; i < k; i++) {
		unsigned w = allow ? rnd(3) : 2;
		const char *e = w == 0 ? names[rnd(ARRAY_LEN(names))] :
				w == 1 ? addrs[rnd(ARRAY_LEN(addrs))] : cidrs[rnd(ARRAY_LEN(cidrs))];
		char *t = allow ? allow_e[allow_n++] : (char[64]){ 0 };

		snprintf(t, 64, "%s%s", w == 0 && rnd(2) ? "*." : "", e);
		deny_everything = deny_everything || (!allow && strstr(t, "/0"));
		n += (size_t)snprintf(s + n, cap - n, "%s\"%s\"", i ? "," : "", t);
	}
	return n + (size_t)snprintf(s + n, cap - n, "]");
}

/* s (an address, or ADDRESS/BITS) holds address a; IPv4-mapped IPv6 is IPv4. */
static bool cidr_holds(const char *s, const char *a)
{
	uint8_t net[16] = { 0 }, x[16] = { 0 };
	char t[64];
	unsigned bits, nf, xf;
	const char *slash = strchr(s, '/');

	snprintf(t, sizeof(t), "%.*s", slash ? (int)(slash - s) : 63, s);
	nf = inet_pton(AF_INET, t, net) == 1 ? 4 : inet_pton(AF_INET6, t, net) == 1 ? 16 : 0;
	xf = inet_pton(AF_INET, a, x) == 1 ? 4 : inet_pton(AF_INET6, a, x) == 1 ? 16 : 0;
	if (!nf || !xf)
		return false;
	bits = slash ? (unsigned)atoi(slash + 1) : nf * 8;
	if (nf == 16 && bits >= 96 && net[10] == 0xff && net[11] == 0xff && !net[0]) {
		memmove(net, net + 12, 4);
		nf = 4;
		bits -= 96;
	}
	if (nf != xf)
		return false;
	for (unsigned i = 0; i < bits; i++)
		if ((net[i / 8] ^ x[i / 8]) & (0x80 >> (i % 8)))
			return false;
	return true;
}

/* The request's allowOut names host (a "*." entry of the result: every name under it). */
static bool request_names(const char *host, bool suffix)
{
	for (int i = 0; i < allow_n; i++) {
		const char *e = allow_e[i];

		if (strlen(e) > 2 && !strcmp(e + strlen(e) - 2, "/0"))
			return true; /* all traffic */
		if (!strncmp(e, "*.", 2) &&
		    (under(host, e + 2) || (suffix && !strcmp(host, e + 2))))
			return true;
		if (!suffix && strncmp(e, "*.", 2) && (!strcmp(e, host) || cidr_holds(e, host)))
			return true;
	}
	return false;
}

/* Nor wider than the request: with allowOut only what it names; denying all, nothing. */
static void as_asked(const struct egress_policy *r, const char *body)
{
	if (allow_n < 0 && deny_everything && res[0])
		fail_msg("denied all, got %s (body %s)", res, body);
	for (uint32_t i = 0; allow_n >= 0 && i < r->nallow; i++)
		if (!request_names(r->allow[i].host, r->allow[i].suffix))
			fail_msg("allowOut does not name %s (body %s)", r->allow[i].host, body);
	for (uint32_t i = 0; allow_n >= 0 && i < r->nroutes; i++)
		if (!request_names(r->routes[i].host, false))
			fail_msg("allowOut does not name route %s (body %s)", r->routes[i].host, body);
}

static size_t gen_body(char *s, size_t cap)
{
	static const char *const internet[] = { "", "\"allow_internet_access\":true,",
						"\"allow_internet_access\":false," };
	unsigned inet = rnd(3);
	size_t n = (size_t)snprintf(s, cap, "{%s\"network\":{\"allowPublicTraffic\":true",
				    internet[inet]);

	allow_n = -1;
	deny_everything = inet == 2;

	if (rnd(2))
		n += gen_list(s + n, cap - n, "allowOut", true);
	if (rnd(2))
		n += gen_list(s + n, cap - n, "denyOut", false);
	if (rnd(3) == 0)
		n += (size_t)snprintf(s + n, cap - n, ",\"rules\":{\"%s\":[{\"transform\":"
				      "{\"headers\":{\"%s\":\"v\"}}}]}",
				      names[rnd(ARRAY_LEN(names))],
				      rnd(2) ? "x-api-key" : "authorization");
	return n + (size_t)snprintf(s + n, cap - n, "}}");
}

static bool addr_ok(const struct egress_policy *p, const char *a)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
	static struct egress_own_addrs own;

	own.n = 1;
	((struct sockaddr_in *)&own.addr[0])->sin_family = AF_INET;
	inet_pton(AF_INET, "10.0.0.1", &((struct sockaddr_in *)&own.addr[0])->sin_addr);
	if (inet_pton(AF_INET, a, &s4->sin_addr) == 1)
		s4->sin_family = AF_INET;
	else if (inet_pton(AF_INET6, a, &s6->sin6_addr) == 1)
		s6->sin6_family = AF_INET6;
	return egress_addr_allowed(p, (struct sockaddr *)&ss, &own);
}

static const char *const probe_addrs[] = { "10.0.0.1", "10.1.2.3", "10.200.0.1", "192.168.1.5",
					   "192.168.9.9", "127.0.0.1", "169.254.1.1", "8.8.8.8",
					   "8.8.4.4", "fd00::1", "fc00::5", "::1", "fe80::1",
					   "::ffff:10.1.0.1", "1.2.3.4" };

/* Every destination, route and address r allows, the operator's o allows too: NULL, or
 * what is wider (in buf). */
static const char *wider(const struct egress_policy *o, const struct egress_policy *r, char *buf,
			 size_t cap)
{
	char h[EGRESS_HOST_BYTES + 8];

	if (r->mode != o->mode || r->rate_per_minute != o->rate_per_minute ||
	    r->max_bytes != o->max_bytes)
		return "mode, rate or byte cap";
	for (size_t i = 0; i < ARRAY_LEN(names) + ARRAY_LEN(addrs); i++)
		for (int deep = 0; deep < 3; deep++)
			for (size_t p = 0; p < ARRAY_LEN(ports); p++) {
				const char *b = i < ARRAY_LEN(names) ? names[i] :
						addrs[i - ARRAY_LEN(names)];

				snprintf(h, sizeof(h), "%s%s", deep == 0 ? "" : deep == 1 ? "q." :
					 "q.r.", b);
				if (egress_match_connect(r, h, ports[p]) == ER_ALLOWLISTED &&
				    egress_match_connect(o, h, ports[p]) != ER_ALLOWLISTED) {
					snprintf(buf, cap, "connect %s:%u", h, ports[p]);
					return buf;
				}
			}
	for (uint32_t i = 0; i < r->nallow; i++) {
		const struct egress_allow *x = &r->allow[i];
		bool in = false;

		/* a "*." entry: under one of the operator's, on its port */
		for (uint32_t j = 0; j < o->nallow && !in && x->suffix; j++)
			in = o->allow[j].suffix && o->allow[j].port == x->port &&
			     (!strcmp(o->allow[j].host, x->host) || under(x->host, o->allow[j].host));
		if (!x->suffix)
			in = egress_match_connect(o, x->host, x->port) == ER_ALLOWLISTED;
		if (!in) {
			snprintf(buf, cap, "allow %s", x->host);
			return buf;
		}
	}
	for (uint32_t i = 0; i < r->nroutes; i++) {
		bool in = false;

		for (uint32_t j = 0; j < o->nroutes && !in; j++)
			in = memcmp(&r->routes[i], &o->routes[j], sizeof(r->routes[i])) == 0;
		if (!in) {
			snprintf(buf, cap, "route %s", r->routes[i].host);
			return buf;
		}
	}
	for (size_t i = 0; i < ARRAY_LEN(probe_addrs); i++)
		if (addr_ok(r, probe_addrs[i]) && !addr_ok(o, probe_addrs[i])) {
			snprintf(buf, cap, "address %s", probe_addrs[i]);
			return buf;
		}
	return NULL;
}

/* The check above sees a policy made wider in each way (its positive control). */
static void wider_is_seen(const struct egress_policy *o)
{
	static struct egress_policy w;
	char buf[300];

	w = *o;
	w.mode = o->mode == EGRESS_REPORT ? EGRESS_ENFORCE : EGRESS_REPORT;
	assert_non_null(wider(o, &w, buf, sizeof(buf)));
	w = *o;
	if (w.nallow < EGRESS_ALLOW_MAX) {
		snprintf(w.allow[w.nallow].host, EGRESS_HOST_BYTES, "zz.wider.example");
		w.allow[w.nallow].port = 443;
		w.allow[w.nallow++].suffix = rnd(2);
		assert_non_null(wider(o, &w, buf, sizeof(buf)));
	}
	w = *o;
	if (w.nroutes) {
		w.routes[0].header[0] = 'z';
		assert_non_null(wider(o, &w, buf, sizeof(buf)));
	}
	w = *o;
	w.nranges = 1;
	w.ranges[0].kind = ERANGE_CIDR;
	w.ranges[0].family = AF_INET;
	memset(w.ranges[0].addr, 0, sizeof(w.ranges[0].addr));
	w.ranges[0].addr[0] = 10;
	w.ranges[0].bits = 8;
	if (!addr_ok(o, "10.200.0.1"))
		assert_non_null(wider(o, &w, buf, sizeof(buf)));
}

static void test_never_wider_than_the_operator(void **state)
{
	static char op[4096], body[4096];
	unsigned accepted = 0, refusals = 0, narrowed = 0, none = 0;
	const char *what;
	char buf[300];

	srandom(32);
	for (int iter = 0; iter < 4000; iter++) {
		gen_op(op, sizeof(op));
		gen_body(body, sizeof(body));
		if (run(op, body) != 0) {
			refusals++;
			assert_true(why[0] != '\0');
			continue;
		}
		accepted++;
		if (!res[0]) {
			none++;
			continue;
		}
		if (egress_policy_parse(res, strlen(res), &resp, why, sizeof(why)) != 0)
			fail_msg("result does not read: %s", why);
		if ((what = wider(&opp, &resp, buf, sizeof(buf))) != NULL)
			fail_msg("wider than the operator's: %s\noperator %s\nbody %s\nresult %s",
				 what, cfg.e2b_egress_json, body, res);
		wider_is_seen(&opp);
		as_asked(&resp, body);
		narrowed += strcmp(res, cfg.e2b_egress_json) != 0;
	}
	print_message("accepted %u (no egress %u, narrowed %u), refused %u\n", accepted, none,
		      narrowed, refusals);
	assert_true(accepted > 1000 && refusals > 100 && narrowed > 300 && none > 300);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_operator_policy_means_no_egress),
		cmocka_unit_test(test_default_and_true_give_the_operator_policy),
		cmocka_unit_test(test_no_internet_access_means_no_egress),
		cmocka_unit_test(test_allow_out_keeps_what_it_names_of_the_operator_policy),
		cmocka_unit_test(test_allow_out_refuses_more_than_a_policy_holds),
		cmocka_unit_test(test_deny_out_removes_what_it_covers),
		cmocka_unit_test(test_header_transforms_land_only_on_the_operators_routes),
		cmocka_unit_test(test_inbound_options_are_ignored_and_egress_proxy_refused),
		cmocka_unit_test(test_bad_input_is_refused_and_changes_nothing),
		cmocka_unit_test(test_the_result_is_what_a_create_stores),
		cmocka_unit_test(test_what_the_sandbox_got_as_e2b_network_info),
		cmocka_unit_test(test_the_policy_file_loads_strictly),
		cmocka_unit_test(test_never_wider_than_the_operator),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
