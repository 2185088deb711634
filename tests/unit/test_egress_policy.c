/* test_egress_policy.c: the egress policy (src/egress/policy.c): each rule of the strict
 * reader (a refusal names the field and never echoes the value), the older list form, the
 * normalised form read back to the same policy, the CONNECT and route matches, and the
 * address classes (IPv4-mapped IPv6 as IPv4, CIDR ranges, this host's own addresses). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "egress/policy.h"

static struct egress_policy pol, pol2;
static char err[256];

static int parse(const char *json)
{
	return egress_policy_parse(json, strlen(json), &pol, err, sizeof(err));
}

/* Refused, with an error that names field and never holds secret. */
static void refused(const char *json, const char *field, const char *secret)
{
	int rc = parse(json);

	if (rc != ERR_PARSE)
		fail_msg("accepted: %s", json);
	if (!strstr(err, field))
		fail_msg("error \"%s\" does not name %s (for %s)", err, field, json);
	if (secret && strstr(err, secret))
		fail_msg("error \"%s\" echoes %s", err, secret);
}

static void test_defaults_of_an_empty_object_and_an_empty_list(void **state)
{
	assert_int_equal(parse("{}"), 0);
	assert_int_equal(pol.mode, EGRESS_ENFORCE);
	assert_int_equal(pol.nallow, 0);
	assert_int_equal(pol.nroutes, 0);
	assert_int_equal(pol.rate_per_minute, 600);
	assert_true(pol.max_bytes == (1ull << 30));
	assert_int_equal(pol.nranges, 0);
	assert_int_equal(parse("[]"), 0);
	assert_int_equal(pol.nallow, 0);
}

static void test_the_documented_example_reads(void **state)
{
	const char *doc =
		"{\"mode\":\"enforce\",\"allow\":[\"pypi.org\",\"files.pythonhosted.org:443\","
		"\"*.githubusercontent.com\"],\"routes\":[{\"host\":\"api.anthropic.com\","
		"\"upstream\":\"https://api.anthropic.com\",\"header\":\"x-api-key\","
		"\"value\":\"{secret}\",\"secret_file\":\"/etc/agentic/secrets/anthropic\","
		"\"methods\":[\"POST\",\"GET\"],\"path_prefixes\":[\"/v1/\"]}],"
		"\"rate_per_minute\":600,\"max_bytes_per_connection\":1073741824,"
		"\"allow_ranges\":[]}";

	assert_int_equal(parse(doc), 0);
	assert_int_equal(pol.nallow, 3);
	assert_string_equal(pol.allow[0].host, "pypi.org");
	assert_int_equal(pol.allow[0].port, 443);
	assert_false(pol.allow[0].suffix);
	assert_string_equal(pol.allow[2].host, "githubusercontent.com");
	assert_true(pol.allow[2].suffix);
	assert_int_equal(pol.nroutes, 1);
	assert_string_equal(pol.routes[0].host, "api.anthropic.com");
	assert_int_equal(pol.routes[0].port, 80);
	assert_string_equal(pol.routes[0].up_host, "api.anthropic.com");
	assert_int_equal(pol.routes[0].up_port, 443);
	assert_string_equal(pol.routes[0].header, "x-api-key");
	assert_int_equal(pol.routes[0].nmethods, 2);
	assert_string_equal(pol.routes[0].methods[0], "POST");
	assert_string_equal(pol.routes[0].prefixes[0], "/v1/");
}

static void test_unknown_fields_and_wrong_types_are_refused_by_name(void **state)
{
	refused("{\"alow\":[]}", "egress.alow: unknown field", NULL);
	refused("{\"mode\":\"enforce\",\"mode\":\"report\"}", "egress.mode: given twice", NULL);
	refused("{\"mode\":\"Permissive\"}", "egress.mode", "Permissive");
	refused("{\"mode\":1}", "egress.mode", NULL);
	refused("{\"allow\":\"pypi.org\"}", "egress.allow: must be an array", NULL);
	refused("{\"allow\":[443]}", "egress.allow[0]: must be a string", NULL);
	refused("{\"routes\":{}}", "egress.routes: must be an array", NULL);
	refused("{\"routes\":[1]}", "egress.routes[0]: must be an object", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\",\"secret_file\":\"/s\","
		"\"extra\":1}]}", "egress.routes[0].extra: unknown field", NULL);
	refused("{\"rate_per_minute\":\"600\"}", "egress.rate_per_minute", NULL);
	refused("{\"max_bytes_per_connection\":1.5}", "egress.max_bytes_per_connection", NULL);
	refused("{\"allow_ranges\":\"private\"}", "egress.allow_ranges", NULL);
	refused("\"pypi.org\"", "egress: must be an object", NULL);
	refused("{\"allow\":[", "egress: not JSON", NULL);
	/* a field name that is no plain word is not echoed either */
	refused("{\"sk-ant-api03-xxxxxxxxxxxxxxxxxxxxxxxx\":1}", "unknown field", "sk-ant");
}

static void test_hosts_ports_and_wildcards(void **state)
{
	assert_int_equal(parse("{\"allow\":[\"PyPI.Org\",\"10.0.0.1:8443\",\"[::1]:444\","
			       "\"2001:db8::1\",\"*.Example.COM:8080\"]}"), 0);
	assert_string_equal(pol.allow[0].host, "pypi.org");
	assert_string_equal(pol.allow[1].host, "10.0.0.1");
	assert_int_equal(pol.allow[1].port, 8443);
	assert_string_equal(pol.allow[2].host, "::1");
	assert_int_equal(pol.allow[2].port, 444);
	assert_string_equal(pol.allow[3].host, "2001:db8::1");
	assert_int_equal(pol.allow[3].port, 443);
	assert_string_equal(pol.allow[4].host, "example.com");
	assert_int_equal(pol.allow[4].port, 8080);
	refused("{\"allow\":[\"pypi.org:0\"]}", "egress.allow[0]: the port", NULL);
	refused("{\"allow\":[\"pypi.org:65536\"]}", "egress.allow[0]: the port", NULL);
	refused("{\"allow\":[\"pypi.org:44x\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"pypi.org:\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"a*.example.com\"]}", "egress.allow[0]: a wildcard", NULL);
	refused("{\"allow\":[\"*example.com\"]}", "egress.allow[0]: a wildcard", NULL);
	refused("{\"allow\":[\"x.*.example.com\"]}", "egress.allow[0]: a wildcard", NULL);
	refused("{\"allow\":[\"*.*.example.com\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"*\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"*.10.0.0.1\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"bad_host.com\"]}", "egress.allow[0]: the host", "bad_host");
	refused("{\"allow\":[\"-a.com\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"a..com\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"1.2.3.4.5\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"\"]}", "egress.allow[0]: must not be empty", NULL);
	refused("{\"allow\":[\"a.com/x\"]}", "egress.allow[0]", NULL);
	refused("{\"allow\":[\"[pypi.org]:443\"]}", "egress.allow[0]", NULL);
	refused("{\"routes\":[{\"host\":\"*.a.com\",\"header\":\"x\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].host: a wildcard", NULL);
}

static void test_limits_on_counts(void **state)
{
	char doc[4096];
	size_t n = (size_t)snprintf(doc, sizeof(doc), "{\"allow\":[");

	for (int i = 0; i <= EGRESS_ALLOW_MAX; i++)
		n += (size_t)snprintf(doc + n, sizeof(doc) - n, "%s\"h%d.com\"", i ? "," : "", i);
	snprintf(doc + n, sizeof(doc) - n, "]}");
	refused(doc, "egress.allow: at most 32", NULL);
	refused("{\"allow_ranges\":[\"private\",\"private\",\"private\",\"private\",\"private\","
		"\"private\",\"private\",\"private\",\"private\"]}", "egress.allow_ranges: at most",
		NULL);
}

#define ROUTE(fields) "{\"routes\":[{\"host\":\"api.x.com\",\"header\":\"x-api-key\"," \
	"\"secret_file\":\"/etc/s\"" fields "}]}"

static void test_route_rules(void **state)
{
	assert_int_equal(parse(ROUTE("")), 0);
	assert_string_equal(pol.routes[0].value, "{secret}");
	assert_int_equal(pol.routes[0].nmethods, 2);
	assert_string_equal(pol.routes[0].methods[0], "GET");
	assert_string_equal(pol.routes[0].methods[1], "POST");
	assert_int_equal(pol.routes[0].nprefixes, 1);
	assert_string_equal(pol.routes[0].prefixes[0], "/");
	assert_string_equal(pol.routes[0].up_host, "api.x.com");
	assert_int_equal(pol.routes[0].up_port, 443);
	assert_int_equal(parse(ROUTE(",\"upstream\":\"https://Up.Example:8443\","
				     "\"value\":\"Bearer {secret}\"")), 0);
	assert_string_equal(pol.routes[0].up_host, "up.example");
	assert_int_equal(pol.routes[0].up_port, 8443);
	assert_string_equal(pol.routes[0].value, "Bearer {secret}");

	refused("{\"routes\":[{\"header\":\"x\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].host: required", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].header: required", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\"}]}",
		"egress.routes[0].secret_file: required", NULL);
	refused(ROUTE(",\"upstream\":\"http://api.x.com\""), "egress.routes[0].upstream", NULL);
	refused(ROUTE(",\"upstream\":\"https://api.x.com/v1\""), "egress.routes[0].upstream", NULL);
	refused(ROUTE(",\"upstream\":\"https://u@api.x.com\""), "egress.routes[0].upstream", NULL);
	refused(ROUTE(",\"upstream\":\"https://api.x.com?q\""), "egress.routes[0].upstream", NULL);
	refused(ROUTE(",\"upstream\":\"https://\""), "egress.routes[0].upstream", NULL);
	refused(ROUTE(",\"upstream\":\"https://a.com:0\""), "egress.routes[0].upstream", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x api\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].header: must be a header name", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x:y\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].header", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"Host\",\"secret_file\":\"/s\"}]}",
		"egress.routes[0].header", NULL);
	refused(ROUTE(",\"value\":\"Bearer sk-secretvalue\""), "egress.routes[0].value: must hold",
		"sk-secretvalue");
	refused(ROUTE(",\"value\":\"{secret}{secret}\""), "egress.routes[0].value: must hold", NULL);
	refused(ROUTE(",\"value\":\"{secret}\\r\\nX-Evil: 1\""), "egress.routes[0].value: must not "
		"hold CR or LF", "X-Evil");
	refused(ROUTE(",\"value\":\"{secret}\\n\""), "egress.routes[0].value: must not hold CR", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\",\"secret_file\":\"etc/s\"}]}",
		"egress.routes[0].secret_file: must be an absolute path", "etc/s");
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\",\"secret_file\":\"/etc/../s\"}]}",
		"egress.routes[0].secret_file", NULL);
	refused("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\",\"secret_file\":\"/etc/..\"}]}",
		"egress.routes[0].secret_file", NULL);
	assert_int_equal(parse("{\"routes\":[{\"host\":\"a.com\",\"header\":\"x\","
			       "\"secret_file\":\"/etc/..s\"}]}"), 0);
	refused(ROUTE(",\"methods\":[\"get\"]"), "egress.routes[0].methods[0]: must be an uppercase",
		NULL);
	refused(ROUTE(",\"methods\":[\"GET\",\"PO ST\"]"), "egress.routes[0].methods[1]", NULL);
	refused(ROUTE(",\"methods\":[]"), "egress.routes[0].methods: must hold at least one", NULL);
	refused(ROUTE(",\"methods\":[\"CONNECT\"]"), "egress.routes[0].methods[0]", NULL);
	refused(ROUTE(",\"path_prefixes\":[\"v1/\"]"), "egress.routes[0].path_prefixes[0]: must "
		"start with", NULL);
	refused(ROUTE(",\"path_prefixes\":[\"/v1?x\"]"), "egress.routes[0].path_prefixes[0]", NULL);
	refused(ROUTE(",\"path_prefixes\":[]"), "egress.routes[0].path_prefixes", NULL);
	refused(ROUTE(",\"path_prefixes\":[\"/v1/../\"]"), "egress.routes[0].path_prefixes[0]: "
		"must not hold a dot segment", NULL);
	refused(ROUTE(",\"path_prefixes\":[\"/v1/%2E\"]"), "egress.routes[0].path_prefixes[0]",
		NULL);
}

static void test_numbers_and_ranges(void **state)
{
	assert_int_equal(parse("{\"rate_per_minute\":1,\"max_bytes_per_connection\":1}"), 0);
	assert_int_equal(pol.rate_per_minute, 1);
	assert_true(pol.max_bytes == 1);
	assert_int_equal(parse("{\"rate_per_minute\":1000000,"
			       "\"max_bytes_per_connection\":1125899906842624}"), 0);
	assert_true(pol.max_bytes == (1ull << 50));
	refused("{\"rate_per_minute\":0}", "egress.rate_per_minute: must be a whole number", NULL);
	refused("{\"rate_per_minute\":1000001}", "egress.rate_per_minute", NULL);
	refused("{\"rate_per_minute\":-5}", "egress.rate_per_minute", NULL);
	refused("{\"max_bytes_per_connection\":0}", "egress.max_bytes_per_connection", NULL);
	refused("{\"max_bytes_per_connection\":1125899906842625}", "egress.max_bytes_per_connection",
		NULL);
	assert_int_equal(parse("{\"allow_ranges\":[\"loopback\",\"private\",\"link-local\","
			       "\"host\",\"10.1.0.0/16\",\"fd00::/8\",\"192.0.2.7/32\"]}"), 0);
	assert_int_equal(pol.nranges, 7);
	assert_int_equal(pol.ranges[4].kind, ERANGE_CIDR);
	assert_int_equal(pol.ranges[4].family, AF_INET);
	assert_int_equal(pol.ranges[4].bits, 16);
	assert_int_equal(pol.ranges[5].family, AF_INET6);
	refused("{\"allow_ranges\":[\"public\"]}", "egress.allow_ranges[0]", NULL);
	refused("{\"allow_ranges\":[\"10.0.0.0\"]}", "egress.allow_ranges[0]", NULL);
	refused("{\"allow_ranges\":[\"10.0.0.0/33\"]}", "egress.allow_ranges[0]", NULL);
	refused("{\"allow_ranges\":[\"10.0.0.0/\"]}", "egress.allow_ranges[0]", NULL);
	refused("{\"allow_ranges\":[\"10.0.0.1/8\"]}", "egress.allow_ranges[0]: the address has "
		"bits set", NULL);
	refused("{\"allow_ranges\":[\"fd00::/129\"]}", "egress.allow_ranges[0]", NULL);
	refused("{\"allow_ranges\":[\"private\",\"10.0.0.0/x\"]}", "egress.allow_ranges[1]", NULL);
}

static void test_the_older_list_form(void **state)
{
	assert_int_equal(parse("[{\"host\":\"PyPI.org\",\"port\":443},{\"host\":\"10.0.0.2\","
			       "\"port\":8080},{\"host\":\"::1\",\"port\":9}]"), 0);
	assert_int_equal(pol.mode, EGRESS_ENFORCE);
	assert_int_equal(pol.nallow, 3);
	assert_string_equal(pol.allow[0].host, "pypi.org");
	assert_int_equal(pol.allow[0].port, 443);
	assert_int_equal(pol.allow[1].port, 8080);
	assert_string_equal(pol.allow[2].host, "::1");
	assert_int_equal(pol.allow[2].port, 9);
	refused("[{\"host\":\"a.com\"}]", "egress[0].port: required", NULL);
	refused("[{\"port\":1}]", "egress[0].host: required", NULL);
	refused("[{\"host\":\"a.com\",\"port\":0}]", "egress[0].port", NULL);
	refused("[{\"host\":\"a.com:80\",\"port\":80}]", "egress[0].host", NULL);
	refused("[{\"host\":\"a.com\",\"port\":80,\"tls\":true}]", "egress[0].tls: unknown field",
		NULL);
	refused("[\"a.com\"]", "egress[0]: must be an object", NULL);
}

static void round_trip(const char *json)
{
	char out[EGRESS_POLICY_BYTES], again[EGRESS_POLICY_BYTES];
	long n;

	assert_int_equal(parse(json), 0);
	n = egress_policy_write(&pol, out, sizeof(out));
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(out));
	assert_int_equal(egress_policy_parse(out, (size_t)n, &pol2, err, sizeof(err)), 0);
	assert_memory_equal(&pol, &pol2, sizeof(pol));
	assert_true(egress_policy_write(&pol2, again, sizeof(again)) == n);
	assert_string_equal(out, again);
}

static void test_the_normalised_form_reads_back_the_same(void **state)
{
	char out[EGRESS_POLICY_BYTES];

	round_trip("{}");
	round_trip("[{\"host\":\"a.com\",\"port\":80},{\"host\":\"fe80::1\",\"port\":22}]");
	round_trip("{\"mode\":\"report\",\"allow\":[\"A.com\",\"*.b.org:8443\",\"[::1]\","
		   "\"1.2.3.4:5\"],\"routes\":[" "{\"host\":\"api.x.com:8080\","
		   "\"upstream\":\"https://[2001:db8::5]:444\",\"header\":\"Authorization\","
		   "\"value\":\"Bearer {secret}\",\"secret_file\":\"/etc/agentic/s\","
		   "\"methods\":[\"POST\"],\"path_prefixes\":[\"/v1/\",\"/v2/\"]}],"
		   "\"rate_per_minute\":7,\"max_bytes_per_connection\":99,"
		   "\"allow_ranges\":[\"host\",\"10.0.0.0/8\",\"fd00::/8\",\"0.0.0.0/0\"]}");
	/* every default spelled out */
	assert_int_equal(parse("{\"allow\":[\"pypi.org\"],\"routes\":[{\"host\":\"a.com\","
			       "\"header\":\"x\",\"secret_file\":\"/s\"}]}"), 0);
	assert_true(egress_policy_write(&pol, out, sizeof(out)) > 0);
	assert_string_equal(out, "{\"mode\":\"enforce\",\"allow\":[\"pypi.org:443\"],\"routes\":["
			    "{\"host\":\"a.com:80\",\"upstream\":\"https://a.com:443\","
			    "\"header\":\"x\",\"value\":\"{secret}\",\"secret_file\":\"/s\","
			    "\"methods\":[\"GET\",\"POST\"],\"path_prefixes\":[\"/\"]}],"
			    "\"rate_per_minute\":600,\"max_bytes_per_connection\":1073741824,"
			    "\"allow_ranges\":[]}");
	/* too small a buffer is said so */
	assert_int_equal(egress_policy_write(&pol, out, 20), ERR_LIMIT);
}

static void test_connect_matches(void **state)
{
	assert_int_equal(parse("{\"allow\":[\"pypi.org\",\"*.github.com\",\"h.io:8443\","
			       "\"10.0.0.5:22\",\"[::1]:80\"]}"), 0);
	assert_int_equal(egress_match_connect(&pol, "pypi.org", 443), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "PYPI.org", 443), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "pypi.org", 80), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "www.pypi.org", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "pypi.org.", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "evilpypi.org", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "api.github.com", 443), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "a.b.github.com", 443), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "github.com", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "evilgithub.com", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, ".github.com", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "github.com.evil.org", 443),
			 ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "h.io", 8443), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "h.io", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, "10.0.0.5", 22), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "::1", 80), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "[::1]", 80), ER_ALLOWLISTED);
	assert_int_equal(egress_match_connect(&pol, "", 443), ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_connect(&pol, NULL, 443), ER_HOST_NOT_ALLOWED);
}

static void test_route_matches(void **state)
{
	uint32_t idx = 99;

	assert_int_equal(parse("{\"routes\":[{\"host\":\"api.x.com\",\"header\":\"x\","
			       "\"secret_file\":\"/s\",\"methods\":[\"POST\"],"
			       "\"path_prefixes\":[\"/v1/\"]},{\"host\":\"api.x.com\","
			       "\"header\":\"x\",\"secret_file\":\"/t\",\"methods\":[\"GET\"],"
			       "\"path_prefixes\":[\"/models\"]},{\"host\":\"o.com:8080\","
			       "\"header\":\"x\",\"secret_file\":\"/u\"}]}"), 0);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/messages", &idx),
			 ER_ROUTE);
	assert_int_equal(idx, 0);
	assert_int_equal(egress_match_route(&pol, "API.X.com", 80, "GET", "/models?x=1", &idx),
			 ER_ROUTE);
	assert_int_equal(idx, 1);
	assert_int_equal(egress_match_route(&pol, "o.com", 8080, "GET", "/anything", &idx),
			 ER_ROUTE);
	assert_int_equal(idx, 2);
	assert_int_equal(egress_match_route(&pol, "o.com", 80, "GET", "/", &idx),
			 ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "b.x.com", 80, "POST", "/v1/", &idx),
			 ER_HOST_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "DELETE", "/v1/a", &idx),
			 ER_METHOD_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "post", "/v1/a", &idx),
			 ER_METHOD_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v2/a", &idx),
			 ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1", &idx),
			 ER_PATH_NOT_ALLOWED);
	/* the prefix is judged without the query */
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/x?/v1/", &idx),
			 ER_PATH_NOT_ALLOWED);
	/* a path an upstream could read as another one matches no prefix */
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/../admin", &idx),
			 ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/%2e%2e/admin",
					    &idx), ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/./a", &idx),
			 ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/..", &idx),
			 ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/a%2fb", &idx),
			 ER_PATH_NOT_ALLOWED);
	assert_int_equal(egress_match_route(&pol, "api.x.com", 80, "POST", "/v1/..x", &idx),
			 ER_ROUTE);
	assert_int_equal(egress_match_route(&pol, "o.com", 8080, "GET", "*", &idx),
			 ER_PATH_NOT_ALLOWED);
}

static struct sockaddr_storage ss;

static const struct sockaddr *addr(const char *s)
{
	memset(&ss, 0, sizeof(ss));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;

		a->sin6_family = AF_INET6;
		assert_int_equal(inet_pton(AF_INET6, s, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;

		a->sin_family = AF_INET;
		assert_int_equal(inet_pton(AF_INET, s, &a->sin_addr), 1);
	}
	return (const struct sockaddr *)&ss;
}

static void test_address_classes_without_ranges(void **state)
{
	static const char *const yes[] = { "1.1.1.1", "8.8.8.8", "151.101.0.223", "172.32.0.1",
					   "100.128.0.1", "2606:4700::1111", "::ffff:1.1.1.1",
					   "64:ff9b::808:808" };
	static const char *const no[] = { "127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1",
					  "172.31.255.255", "192.168.1.1", "100.64.0.1",
					  "169.254.169.254", "0.0.0.0", "0.1.2.3", "224.0.0.1",
					  "239.255.255.250", "255.255.255.255", "::1", "::",
					  "fc00::1", "fd12::1", "fe80::1", "ff02::1",
					  "::ffff:127.0.0.1", "::ffff:10.0.0.1",
					  "::ffff:169.254.169.254", "64:ff9b::7f00:1",
					  "2002:7f00:1::1", "192.0.2.1", "198.18.0.1" };
	struct sockaddr_un_like { sa_family_t f; } unix_sa = { AF_UNIX };

	assert_int_equal(parse("{}"), 0);
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		if (!egress_addr_allowed(&pol, addr(yes[i]), NULL))
			fail_msg("%s refused", yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		if (egress_addr_allowed(&pol, addr(no[i]), NULL))
			fail_msg("%s allowed", no[i]);
	assert_false(egress_addr_allowed(&pol, (const struct sockaddr *)&unix_sa, NULL));
	assert_false(egress_addr_allowed(&pol, NULL, NULL));
}

static void test_address_classes_with_ranges(void **state)
{
	struct egress_own_addrs own = { .n = 2 };

	memcpy(&own.addr[0], addr("192.168.7.7"), sizeof(ss));
	memcpy(&own.addr[1], addr("8.8.4.4"), sizeof(ss));

	assert_int_equal(parse("{\"allow_ranges\":[\"loopback\"]}"), 0);
	assert_true(egress_addr_allowed(&pol, addr("127.0.0.1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("::1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("::ffff:127.0.0.2"), &own));
	assert_false(egress_addr_allowed(&pol, addr("10.0.0.1"), &own));

	assert_int_equal(parse("{\"allow_ranges\":[\"private\"]}"), 0);
	assert_true(egress_addr_allowed(&pol, addr("10.0.0.1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("172.20.0.1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("100.64.1.1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("fd00::1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("::ffff:192.168.0.1"), &own));
	assert_false(egress_addr_allowed(&pol, addr("127.0.0.1"), &own));
	assert_false(egress_addr_allowed(&pol, addr("169.254.169.254"), &own));
	/* this host's own address is "host", not "private", even on a private network */
	assert_false(egress_addr_allowed(&pol, addr("192.168.7.7"), &own));
	assert_false(egress_addr_allowed(&pol, addr("::ffff:192.168.7.7"), &own));
	/* nor a public address of the host's own */
	assert_false(egress_addr_allowed(&pol, addr("8.8.4.4"), &own));
	assert_true(egress_addr_allowed(&pol, addr("8.8.4.4"), NULL));

	assert_int_equal(parse("{\"allow_ranges\":[\"link-local\"]}"), 0);
	assert_true(egress_addr_allowed(&pol, addr("169.254.169.254"), &own));
	assert_true(egress_addr_allowed(&pol, addr("fe80::1"), &own));
	assert_false(egress_addr_allowed(&pol, addr("10.0.0.1"), &own));

	assert_int_equal(parse("{\"allow_ranges\":[\"host\"]}"), 0);
	assert_true(egress_addr_allowed(&pol, addr("192.168.7.7"), &own));
	assert_true(egress_addr_allowed(&pol, addr("::ffff:192.168.7.7"), &own));
	assert_true(egress_addr_allowed(&pol, addr("8.8.4.4"), &own));
	assert_false(egress_addr_allowed(&pol, addr("192.168.7.8"), &own));

	assert_int_equal(parse("{\"allow_ranges\":[\"10.1.0.0/16\",\"fd00:1::/32\","
			       "\"192.0.2.0/24\"]}"), 0);
	assert_true(egress_addr_allowed(&pol, addr("10.1.255.3"), &own));
	assert_true(egress_addr_allowed(&pol, addr("::ffff:10.1.0.1"), &own));
	assert_false(egress_addr_allowed(&pol, addr("10.2.0.1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("fd00:1:ffff::1"), &own));
	assert_false(egress_addr_allowed(&pol, addr("fd00:2::1"), &own));
	assert_true(egress_addr_allowed(&pol, addr("192.0.2.9"), &own));

	/* never: even a range that covers everything leaves these out */
	assert_int_equal(parse("{\"allow_ranges\":[\"0.0.0.0/0\",\"::/0\",\"loopback\","
			       "\"private\",\"link-local\",\"host\"]}"), 0);
	assert_false(egress_addr_allowed(&pol, addr("0.0.0.0"), &own));
	assert_false(egress_addr_allowed(&pol, addr("224.0.0.251"), &own));
	assert_false(egress_addr_allowed(&pol, addr("255.255.255.255"), &own));
	assert_false(egress_addr_allowed(&pol, addr("::"), &own));
	assert_false(egress_addr_allowed(&pol, addr("ff02::fb"), &own));
	assert_false(egress_addr_allowed(&pol, addr("::ffff:0.0.0.0"), &own));
	assert_true(egress_addr_allowed(&pol, addr("10.0.0.1"), &own));
}

static void test_reason_words(void **state)
{
	assert_string_equal(egress_reason_word(ER_ALLOWLISTED), "allowlisted");
	assert_string_equal(egress_reason_word(ER_ROUTE), "route");
	assert_string_equal(egress_reason_word(ER_HOST_NOT_ALLOWED), "host_not_allowed");
	assert_string_equal(egress_reason_word(ER_ADDRESS_NOT_ALLOWED), "address_not_allowed");
	assert_string_equal(egress_reason_word(ER_REDIRECT_RETURNED), "redirect_returned");
	for (int i = 0; i < ER_COUNT; i++) {
		const char *w = egress_reason_word((enum egress_reason)i);

		assert_non_null(w);
		assert_true(strspn(w, "abcdefghijklmnopqrstuvwxyz_") == strlen(w) && *w);
		for (int j = 0; j < i; j++)
			assert_string_not_equal(w, egress_reason_word((enum egress_reason)j));
	}
	assert_string_equal(egress_reason_word(ER_COUNT), "unknown");
}

static void test_too_large_documents_are_refused(void **state)
{
	static char big[EGRESS_POLICY_BYTES + 2];

	memset(big, ' ', sizeof(big) - 1);
	big[0] = '{';
	big[sizeof(big) - 2] = '}';
	refused(big, "egress: larger than", NULL);
	/* a document of many values is refused as such, not mis-read */
	{
		char doc[EGRESS_POLICY_BYTES];
		size_t n = (size_t)snprintf(doc, sizeof(doc), "{\"allow\":[");

		while (n < sizeof(doc) - 8)
			n += (size_t)snprintf(doc + n, sizeof(doc) - n, "1,");
		snprintf(doc + n - 1, sizeof(doc) - n + 1, "]}");
		refused(doc, "egress", NULL);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_of_an_empty_object_and_an_empty_list),
		cmocka_unit_test(test_the_documented_example_reads),
		cmocka_unit_test(test_unknown_fields_and_wrong_types_are_refused_by_name),
		cmocka_unit_test(test_hosts_ports_and_wildcards),
		cmocka_unit_test(test_limits_on_counts),
		cmocka_unit_test(test_route_rules),
		cmocka_unit_test(test_numbers_and_ranges),
		cmocka_unit_test(test_the_older_list_form),
		cmocka_unit_test(test_the_normalised_form_reads_back_the_same),
		cmocka_unit_test(test_connect_matches),
		cmocka_unit_test(test_route_matches),
		cmocka_unit_test(test_address_classes_without_ranges),
		cmocka_unit_test(test_address_classes_with_ranges),
		cmocka_unit_test(test_reason_words),
		cmocka_unit_test(test_too_large_documents_are_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
