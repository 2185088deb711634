/* test_profile.c: startup profiles read strictly (each field, each refusal naming its field),
 * the shared-kernel credential refusal, and the set read from a directory (order, bad
 * files, file modes and owners, duplicate ids, a missing directory). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "json/json.h"
#include "profile/profile.h"

static struct profile prof;
static struct profile_set set;

static int parse(const char *json, char *err)
{
	return profile_parse(&prof, json, strlen(json), err, 256);
}

static void test_profile_reads_every_field(void **state)
{
	static const char json[] =
		"{\"id\": \"web-dev.1\", \"description\": \"a web developer's box\","
		" \"image\": \"agentic/base:local\", \"runtime\": \"docker\","
		" \"env\": {\"LANG\": \"C.UTF-8\", \"EDITOR\": \"vi\\u0020-e\"},"
		" \"cmd\": [\"sleep\", \"infinity\"],"
		" \"resources\": {\"memory\": \"512m\", \"pids\": 256, \"cpus\": 1.5, \"disk\": 1073741824},"
		" \"mounts\": [{\"source\": \"/srv/data\", \"target\": \"/data\", \"read_only\": true},"
		"             {\"source\": \"/srv/tools\", \"target\": \"/opt/tools\"}],"
		" \"network\": \"managed\","
		" \"egress\": [{\"host\": \"github.com\", \"port\": 443}, {\"host\": \"10.0.0.1\", \"port\": 8080},"
		"            {\"host\": \"::1\", \"port\": 1}],"
		" \"credential_refs\": [{\"id\": \"gh\", \"provider\": \"github\", \"allowed_use\": \"git\","
		"                      \"target\": {\"type\": \"env\", \"name\": \"GH_HOST_TOKEN\"}},"
		"                     {\"id\": \"npm\", \"provider\": \"npm\", \"allowed_use\": \"install\","
		"                      \"target\": {\"type\": \"file\", \"name\": \"/home/agent/.npmrc\"}}],"
		" \"readiness_probes\": [{\"cmd\": [\"test\", \"-e\", \"/tmp/up\"], \"timeout_seconds\": 30},"
		"                      {\"cmd\": [\"true\"]}]}";
	char err[256] = "";

	assert_int_equal(parse(json, err), 0);
	assert_string_equal(err, "");
	assert_string_equal(prof.id, "web-dev.1");
	assert_string_equal(prof.description, "a web developer's box");
	assert_string_equal(prof.image, "agentic/base:local");
	assert_string_equal(prof.runtime, "docker");
	assert_int_equal(prof.nenv, 2);
	assert_string_equal(prof.env[0], "LANG=C.UTF-8");
	assert_string_equal(prof.env[1], "EDITOR=vi -e");
	assert_null(prof.env[2]);
	assert_int_equal(prof.ncmd, 2);
	assert_string_equal(prof.cmd[1], "infinity");
	assert_null(prof.cmd[2]);
	assert_int_equal(prof.memory_bytes, 512u << 20);
	assert_int_equal(prof.pids, 256);
	assert_int_equal(prof.nano_cpus, 1500000000ull);
	assert_int_equal(prof.disk_bytes, 1u << 30);
	assert_int_equal(prof.nmounts, 2);
	assert_string_equal(prof.mounts[0].source, "/srv/data");
	assert_string_equal(prof.mounts[0].target, "/data");
	assert_true(prof.mounts[0].read_only);
	assert_false(prof.mounts[1].read_only);
	assert_null(prof.network);
	assert_int_equal(prof.negress, 3);
	/* the older list form, kept as the policy normalised */
	assert_string_equal(prof.egress_json, "{\"mode\":\"enforce\",\"allow\":[\"github.com:443\","
			    "\"10.0.0.1:8080\",\"[::1]:1\"],\"routes\":[],\"rate_per_minute\":600,"
			    "\"max_bytes_per_connection\":1073741824,\"allow_ranges\":[]}");
	assert_false(prof.egress_report);
	assert_int_equal(prof.ncreds, 2);
	assert_string_equal(prof.creds[0].id, "gh");
	assert_string_equal(prof.creds[0].provider, "github");
	assert_string_equal(prof.creds[0].allowed_use, "git");
	assert_string_equal(prof.creds[0].target_type, "env");
	assert_string_equal(prof.creds[0].target_name, "GH_HOST_TOKEN");
	assert_string_equal(prof.creds[1].target_type, "file");
	assert_int_equal(prof.nprobes, 2);
	assert_int_equal(prof.probes[0].ncmd, 3);
	assert_string_equal(prof.probes[0].cmd[2], "/tmp/up");
	assert_int_equal(prof.probes[0].timeout_s, 30);
	assert_int_equal(prof.probes[1].timeout_s, PROFILE_PROBE_TIMEOUT_S);
}

static void test_profile_minimal_is_an_id_and_defaults_are_zero(void **state)
{
	char err[256];

	assert_int_equal(parse("{\"id\": \"0\"}", err), 0);
	assert_string_equal(prof.id, "0");
	assert_null(prof.image);
	assert_null(prof.runtime);
	assert_null(prof.network);
	assert_null(prof.description);
	assert_int_equal(prof.nenv + prof.ncmd + prof.nmounts + prof.negress + prof.ncreds +
			 prof.nprobes, 0);
	assert_int_equal(prof.memory_bytes + prof.pids + prof.nano_cpus + prof.disk_bytes, 0);
	assert_int_equal(parse("{\"id\": \"vm1\", \"runtime\": \"vm\", \"network\": \"ops-net_2\"}",
			       err), 0);
	assert_string_equal(prof.runtime, "vm");
	assert_string_equal(prof.network, "ops-net_2");
}

static void test_profile_sizes_and_cpus_take_each_spelling(void **state)
{
	static const struct {
		const char *res;
		uint64_t memory, nano_cpus;
	} cases[] = {
		{ "\"memory\": 6291456, \"cpus\": 1", 6u << 20, 1000000000ull },
		{ "\"memory\": \"2GiB\", \"cpus\": 0.25", 2ull << 30, 250000000ull },
		{ "\"memory\": \"2g\", \"cpus\": 0.01", 2ull << 30, 10000000ull },
		{ "\"memory\": \"1T\", \"cpus\": 1024", 1ull << 40, 1024000000000ull },
		{ "\"memory\": \"7000k\", \"cpus\": 2.000000001", 7000u << 10, 2000000001ull },
	};
	char json[256], err[256];

	for (size_t i = 0; i < ARRAY_LEN(cases); i++) {
		snprintf(json, sizeof(json), "{\"id\": \"r\", \"resources\": {%s}}", cases[i].res);
		assert_int_equal(parse(json, err), 0);
		assert_int_equal(prof.memory_bytes, cases[i].memory);
		assert_int_equal(prof.nano_cpus, cases[i].nano_cpus);
	}
}

struct refusal {
	const char *json;
	const char *want; /* the whole error */
};

static void expect_refusals(const struct refusal *cases, size_t n)
{
	char err[256];

	for (size_t i = 0; i < n; i++) {
		int rc = parse(cases[i].json, err);

		if (rc != ERR_PARSE || strcmp(err, cases[i].want) != 0) {
			print_error("%s\n  got %d \"%s\"\n  want \"%s\"\n", cases[i].json, rc, err,
				    cases[i].want);
			fail();
		}
	}
}

static void test_profile_refuses_unknown_fields_at_every_level(void **state)
{
	static const struct refusal cases[] = {
		{ "{\"id\": \"a\", \"imagee\": \"x\"}",
		  "imagee: unknown field (known: id, description, image, runtime, env, cmd, resources, "
		  "mounts, network, egress, credential_refs, readiness_probes)" },
		{ "{\"id\": \"a\", \"resources\": {\"mem\": 1}}",
		  "resources.mem: unknown field (known: memory, pids, cpus, disk)" },
		{ "{\"id\": \"a\", \"mounts\": [{\"source\": \"/a\", \"target\": \"/b\", \"ro\": true}]}",
		  "mounts[0].ro: unknown field (known: source, target, read_only)" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b\", \"port\": 1}, {\"host\": \"a.b\", "
		  "\"port\": 2, \"proto\": \"tcp\"}]}",
		  "egress[1].proto: unknown field" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"env\", \"name\": \"X\", \"mode\": 1}}]}",
		  "credential_refs[0].target.mode: unknown field (known: type, name)" },
		{ "{\"id\": \"a\", \"readiness_probes\": [{\"cmd\": [\"x\"], \"interval\": 1}]}",
		  "readiness_probes[0].interval: unknown field (known: cmd, timeout_seconds)" },
		{ "{\"id\": \"a\", \"image\": \"x\", \"image\": \"y\"}", "image: given twice" },
		{ "{\"id\": \"a\", \"resources\": {\"pids\": 9, \"pids\": 10}}",
		  "resources.pids: given twice" },
		{ "{\"id\": \"a\", \"env\": {\"A\": \"1\", \"A\": \"2\"}}", "env.A: given twice" },
		/* a token where a name belongs is not echoed */
		{ "{\"id\": \"a\", \"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789\": 1}",
		  "(a name shaped like a credential): unknown field (known: id, description, image, "
		  "runtime, env, cmd, resources, mounts, network, egress, credential_refs, "
		  "readiness_probes)" },
	};

	expect_refusals(cases, ARRAY_LEN(cases));
}

static void test_profile_refuses_wrong_types_naming_the_field(void **state)
{
	static const struct refusal cases[] = {
		{ "[]", "(top level): must be an object" },
		{ "{\"id\": \"a\", \"image\": 5}", "image: must be a string" },
		{ "{\"id\": \"a\", \"image\": \"\"}", "image: must not be empty" },
		{ "{\"id\": \"a\", \"image\": \"a b\"}",
		  "image: must be an image reference (no spaces or control characters)" },
		{ "{\"id\": \"a\", \"description\": [\"x\"]}", "description: must be a string" },
		{ "{\"id\": \"a\", \"runtime\": \"podman\"}", "runtime: must be \"docker\" or \"vm\"" },
		{ "{\"id\": \"a\", \"env\": [\"A=1\"]}",
		  "env: must be an object of strings ({\"KEY\": \"VALUE\"})" },
		{ "{\"id\": \"a\", \"env\": {\"A\": 1}}", "env.A: must be a string" },
		{ "{\"id\": \"a\", \"env\": {\"1A\": \"x\"}}",
		  "env: keys must be names of letters, digits and _ that do not start with a digit, "
		  "at most 255 bytes" },
		{ "{\"id\": \"a\", \"env\": {\"A-B\": \"x\"}}",
		  "env: keys must be names of letters, digits and _ that do not start with a digit, "
		  "at most 255 bytes" },
		{ "{\"id\": \"a\", \"env\": {\"AGENT_SOCKET\": \"x\"}}",
		  "env.AGENT_SOCKET: keys starting with AGENT_ are the init's own" },
		{ "{\"id\": \"a\", \"env\": {\"A\": \"\\u0000\"}}", "env.A: must not hold U+0000" },
		{ "{\"id\": \"a\", \"cmd\": \"sleep 1\"}", "cmd: must be an array of strings" },
		{ "{\"id\": \"a\", \"cmd\": []}", "cmd: must hold at least one string" },
		{ "{\"id\": \"a\", \"cmd\": [\"a\", 2]}", "cmd[1]: must be a string" },
		{ "{\"id\": \"a\", \"resources\": []}", "resources: must be an object" },
		{ "{\"id\": \"a\", \"resources\": {\"memory\": 0}}",
		  "resources.memory: must be a whole number of bytes from 6291456 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"memory\": -1}}",
		  "resources.memory: must be a whole number of bytes from 6291456 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"memory\": \"512x\"}}",
		  "resources.memory: must be a whole number of bytes from 6291456 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"memory\": 1.5e9}}",
		  "resources.memory: must be a whole number of bytes from 6291456 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"memory\": \"99999999999999999999t\"}}",
		  "resources.memory: must be a whole number of bytes from 6291456 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"disk\": \"1k\"}}",
		  "resources.disk: must be a whole number of bytes from 4194304 to 1099511627776, or "
		  "a string like \"512m\" (suffixes k, m, g, t: binary)" },
		{ "{\"id\": \"a\", \"resources\": {\"pids\": 7}}",
		  "resources.pids: must be a whole number from 8 to 4194304" },
		{ "{\"id\": \"a\", \"resources\": {\"pids\": \"100\"}}",
		  "resources.pids: must be a whole number from 8 to 4194304" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": 0.001}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": 1e1}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": 1025}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": 1.0000000001}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": -1}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"resources\": {\"cpus\": \"2\"}}",
		  "resources.cpus: must be a number of CPUs from 0.01 to 1024, at most nine decimal "
		  "places, no exponent" },
		{ "{\"id\": \"a\", \"mounts\": {}}", "mounts: must be an array of objects" },
		{ "{\"id\": \"a\", \"mounts\": [\"/a:/b\"]}", "mounts[0]: must be an object" },
		{ "{\"id\": \"a\", \"mounts\": [{\"target\": \"/b\"}]}", "mounts[0].source: required" },
		{ "{\"id\": \"a\", \"mounts\": [{\"source\": \"a\", \"target\": \"/b\"}]}",
		  "mounts[0].source: must be an absolute path without .. components" },
		{ "{\"id\": \"a\", \"mounts\": [{\"source\": \"/a/../etc\", \"target\": \"/b\"}]}",
		  "mounts[0].source: must be an absolute path without .. components" },
		{ "{\"id\": \"a\", \"mounts\": [{\"source\": \"/a\", \"target\": \"/\"}]}",
		  "mounts[0].target: must be an absolute path without .. components, not /" },
		{ "{\"id\": \"a\", \"mounts\": [{\"source\": \"/a\", \"target\": \"/b\", "
		  "\"read_only\": \"yes\"}]}", "mounts[0].read_only: must be true or false" },
		{ "{\"id\": \"a\", \"network\": 1}", "network: must be a string" },
		{ "{\"id\": \"a\", \"network\": \"-x\"}",
		  "network: must be \"managed\" or a Docker network's name (letters, digits, _ . -)" },
		{ "{\"id\": \"a\", \"network\": \"a/b\"}",
		  "network: must be \"managed\" or a Docker network's name (letters, digits, _ . -)" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b\"}]}", "egress[0].port: required" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b\", \"port\": 0}]}",
		  "egress[0].port: must be a whole number from 1 to 65535" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b\", \"port\": 65536}]}",
		  "egress[0].port: must be a whole number from 1 to 65535" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b\", \"port\": \"443\"}]}",
		  "egress[0].port: must be a whole number from 1 to 65535" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"-a.b\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a..b\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"*.github.com\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"http://a.b\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"300.1.1.1\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"a.b.\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		{ "{\"id\": \"a\", \"egress\": [{\"host\": \"\", \"port\": 1}]}",
		  "egress[0].host: must be a DNS name (labels of letters, digits and -) or an IP address" },
		/* the object form is the egress policy's, read by its own strict reader */
		{ "{\"id\": \"a\", \"egress\": {\"mode\": \"open\"}}",
		  "egress.mode: must be \"enforce\" or \"report\"" },
		{ "{\"id\": \"a\", \"egress\": {\"allow\": [\"a.b\"], \"routes\": [{\"host\": \"a.b\", "
		  "\"header\": \"x-api-key\", \"value\": \"k\", \"secret_file\": \"/s\"}]}}",
		  "egress.routes[0].value: must hold \"{secret}\" exactly once" },
		{ "{\"id\": \"a\", \"egress\": \"pypi.org\"}",
		  "egress: must be an object (or the older list of {\"host\", \"port\"})" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\"}]}", "credential_refs[0].target: required" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": \"env\"}]}",
		  "credential_refs[0].target: must be an object {\"type\": \"env\"|\"file\", "
		  "\"name\": ...}" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"socket\", \"name\": \"X\"}}]}",
		  "credential_refs[0].target.type: must be \"env\" or \"file\"" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"env\", \"name\": \"A B\"}}]}",
		  "credential_refs[0].target.name: must be an env name (letters, digits, _; not "
		  "AGENT_...)" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"file\", \"name\": \"x\"}}]}",
		  "credential_refs[0].target.name: must be an absolute path without .. components" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"env\", \"name\": \"X\"}}]}",
		  "credential_refs[0].provider: must not be empty" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"target\": {\"type\": \"env\", \"name\": \"X\"}}]}",
		  "credential_refs[0].allowed_use: required" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"C\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"env\", \"name\": \"X\"}}]}",
		  "credential_refs[0].id: must be 1 to 63 bytes from a-z 0-9 _ . - that start with a "
		  "letter or digit" },
		{ "{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": \"p\", "
		  "\"allowed_use\": \"u\", \"target\": {\"type\": \"env\", \"name\": \"X\"}}, "
		  "{\"id\": \"c\", \"provider\": \"p\", \"allowed_use\": \"u\", \"target\": "
		  "{\"type\": \"env\", \"name\": \"Y\"}}]}",
		  "credential_refs[1].id: c is also credential_refs[0]'s id" },
		{ "{\"id\": \"a\", \"readiness_probes\": [{\"timeout_seconds\": 3}]}",
		  "readiness_probes[0].cmd: required" },
		{ "{\"id\": \"a\", \"readiness_probes\": [{\"cmd\": [\"x\"], \"timeout_seconds\": 0}]}",
		  "readiness_probes[0].timeout_seconds: must be a whole number from 1 to 3600" },
		{ "{\"id\": \"a\", \"readiness_probes\": [{\"cmd\": [1]}]}",
		  "readiness_probes[0].cmd[0]: must be a string" },
	};

	expect_refusals(cases, ARRAY_LEN(cases));
}

static void test_profile_refuses_a_bad_or_missing_id(void **state)
{
	static const char *const bad[] = {
		"{}", "{\"id\": \"\"}", "{\"id\": 1}", "{\"id\": \"Web\"}", "{\"id\": \"-web\"}",
		"{\"id\": \"_web\"}", "{\"id\": \"web dev\"}", "{\"id\": \"web/dev\"}",
		"{\"id\": \"a234567890123456789012345678901234567890123456789012345678901234\"}",
	};
	char err[256];

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		assert_int_equal(parse(bad[i], err), ERR_PARSE);
		assert_string_equal(err, i == 0 ? "id: required" :
				    "id: must be a string of 1 to 63 bytes from a-z 0-9 _ . - that "
				    "starts with a letter or digit");
		assert_string_equal(prof.id, "");
	}
	assert_int_equal(parse("{\"id\": \"a23456789012345678901234567890123456789012345678901234567890123\"}",
			       err), 0);
	/* the id read before a later error is kept, so the set can say whose file failed */
	assert_int_equal(parse("{\"id\": \"kept\", \"bogus\": 1}", err), ERR_PARSE);
	assert_string_equal(prof.id, "kept");
}

static void test_profile_refuses_not_json_and_too_large(void **state)
{
	static char big[PROFILE_FILE_BYTES + 2];
	char err[256];

	assert_int_equal(parse("{\"id\": \"a\",}", err), ERR_PARSE);
	assert_non_null(strstr(err, "(file): not JSON: "));
	assert_int_equal(parse("", err), ERR_PARSE);
	assert_non_null(strstr(err, "(file): not JSON: "));
	memset(big, ' ', sizeof(big) - 1);
	memcpy(big, "{\"id\":\"a\"}", 10);
	assert_int_equal(profile_parse(&prof, big, PROFILE_FILE_BYTES, err, sizeof(err)), 0);
	assert_int_equal(profile_parse(&prof, big, PROFILE_FILE_BYTES + 1, err, sizeof(err)),
			 ERR_PARSE);
	assert_string_equal(err, "(file): larger than 16384 bytes");
}

/* One past each list's bound is refused; the bound itself is read. */
static void test_profile_refuses_too_many_entries(void **state)
{
	static char json[PROFILE_FILE_BYTES];
	static const struct {
		const char *field, *open, *item, *close;
		unsigned max;
		const char *want;
	} lists[] = {
		{ "env", "{", "\"K%u\": \"v\"", "}", PROFILE_ENV_MAX, "env: at most 64 entries" },
		{ "cmd", "[", "\"a%u\"", "]", PROFILE_CMD_MAX, "cmd: at most 64 entries" },
		{ "mounts", "[", "{\"source\": \"/s%u\", \"target\": \"/t\"}", "]", PROFILE_MOUNTS_MAX,
		  "mounts: at most 8 entries" },
		{ "egress", "[", "{\"host\": \"h%u.example\", \"port\": 443}", "]", PROFILE_EGRESS_MAX,
		  "egress: at most 32 entries" },
		{ "credential_refs", "[", "{\"id\": \"c%u\", \"provider\": \"p\", \"allowed_use\": "
		  "\"u\", \"target\": {\"type\": \"env\", \"name\": \"X\"}}", "]", PROFILE_CREDS_MAX,
		  "credential_refs: at most 8 entries" },
		{ "readiness_probes", "[", "{\"cmd\": [\"p%u\"]}", "]", PROFILE_PROBES_MAX,
		  "readiness_probes: at most 4 entries" },
	};
	char err[256];

	for (size_t l = 0; l < ARRAY_LEN(lists); l++)
		for (unsigned count = lists[l].max; count <= lists[l].max + 1; count++) {
			size_t len = (size_t)snprintf(json, sizeof(json), "{\"id\": \"a\", \"%s\": %s",
						      lists[l].field, lists[l].open);

			for (unsigned i = 0; i < count; i++) {
				if (i)
					len += (size_t)snprintf(json + len, sizeof(json) - len, ", ");
				len += (size_t)snprintf(json + len, sizeof(json) - len, lists[l].item, i);
			}
			snprintf(json + len, sizeof(json) - len, "%s}", lists[l].close);
			if (count == lists[l].max) {
				assert_int_equal(parse(json, err), 0);
			} else {
				assert_int_equal(parse(json, err), ERR_PARSE);
				assert_string_equal(err, lists[l].want);
			}
		}
	/* a probe's cmd has the bound of cmd */
	{
		size_t len = (size_t)snprintf(json, sizeof(json),
					      "{\"id\": \"a\", \"readiness_probes\": [{\"cmd\": [");

		for (unsigned i = 0; i <= PROFILE_CMD_MAX; i++)
			len += (size_t)snprintf(json + len, sizeof(json) - len, "%s\"x\"", i ? "," : "");
		snprintf(json + len, sizeof(json) - len, "]}]}");
		assert_int_equal(parse(json, err), ERR_PARSE);
		assert_string_equal(err, "readiness_probes[0].cmd: at most 64 entries");
	}
}

static void test_profile_shared_kernel_refusal_names_the_field_never_the_value(void **state)
{
	char err[256], why[512];
	const char *r;

	assert_int_equal(parse("{\"id\": \"a\", \"env\": {\"LANG\": \"C\", \"MAX_TOKENS\": \"9\"}}",
			       err), 0);
	assert_null(profile_shared_kernel_refusal(&prof, why, sizeof(why)));

	assert_int_equal(parse("{\"id\": \"a\", \"env\": {\"LANG\": \"C\", \"GITHUB_TOKEN\": "
			       "\"CanaryTokenValue42\"}}", err), 0);
	r = profile_shared_kernel_refusal(&prof, why, sizeof(why));
	assert_ptr_equal(r, why);
	assert_string_equal(why, "env.GITHUB_TOKEN (key_well_known): the docker runtime refuses "
			    "startup profiles that materialize raw credentials in a shared-kernel "
			    "sandbox; use the credential proxy or a VM runtime");
	assert_null(strstr(why, "Canary"));

	assert_int_equal(parse("{\"id\": \"a\", \"env\": {\"UPSTREAM\": "
			       "\"https://bot:CanaryPw42@git.example.com/x.git\"}}", err), 0);
	assert_non_null(profile_shared_kernel_refusal(&prof, why, sizeof(why)));
	assert_non_null(strstr(why, "env.UPSTREAM (value_url_password): "));
	assert_null(strstr(why, "Canary"));

	assert_int_equal(parse("{\"id\": \"a\", \"env\": {\"AKIAIOSFODNN7EXAMPLE\": \"x\"}}",
			       err), 0);
	assert_non_null(profile_shared_kernel_refusal(&prof, why, sizeof(why)));
	assert_non_null(strstr(why, "env.(a name shaped like a credential) (value_aws_key_id): "));
	assert_null(strstr(why, "AKIA"));

	assert_int_equal(parse("{\"id\": \"a\", \"credential_refs\": [{\"id\": \"c\", \"provider\": "
			       "\"p\", \"allowed_use\": \"u\", \"target\": {\"type\": \"env\", "
			       "\"name\": \"X\"}}]}", err), 0);
	assert_non_null(profile_shared_kernel_refusal(&prof, why, sizeof(why)));
	assert_string_equal(why, "credential_refs: the docker runtime refuses startup profiles that "
			    "materialize raw credentials in a shared-kernel sandbox; use the "
			    "credential proxy or a VM runtime");
}

/* The examples docs/PROFILES.md points at stay valid (tests run from the tree's top). */
static void test_profile_examples_in_config_are_valid(void **state)
{
	static const char *const files[] = { "config/profiles/base.json",
					     "config/profiles/python-dev.json" };
	static char text[PROFILE_FILE_BYTES + 1];
	char err[256], why[512];

	for (size_t i = 0; i < ARRAY_LEN(files); i++) {
		FILE *f = fopen(files[i], "r");
		size_t len;

		assert_non_null(f);
		len = fread(text, 1, sizeof(text), f);
		fclose(f);
		if (profile_parse(&prof, text, len, err, sizeof(err)) != 0) {
			print_error("%s: %s\n", files[i], err);
			fail();
		}
		assert_null(profile_shared_kernel_refusal(&prof, why, sizeof(why)));
	}
	assert_int_equal(prof.negress, 4);
	assert_non_null(strstr(prof.egress_json, "\"*.githubusercontent.com:443\""));
}

/* ---- the set ---- */

static char dir[64];

static void put(const char *name, const char *text, mode_t mode)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static int setup_dir(void **state)
{
	snprintf(dir, sizeof(dir), "/tmp/test_profile.XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static const struct profile_entry *entry(const char *file)
{
	for (uint32_t i = 0; i < set.n; i++)
		if (strcmp(set.e[i].file, file) == 0)
			return &set.e[i];
	return NULL;
}

static void test_profile_set_reads_json_files_in_order_and_keeps_bad_ones_as_invalid(void **state)
{
	char path[128], target[128];
	const struct profile_entry *e;
	const struct profile *p;

	put("b.json", "{\"id\": \"beta\", \"image\": \"img:b\"}", 0644);
	put("a.json", "{\"id\": \"alpha\", \"cmd\": [\"sh\"]}", 0600);
	put("c.json", "{\"id\": \"gamma\", \"resources\": {\"ram\": 1}}", 0644);
	put("d.json", "not json", 0644);
	put("notes.txt", "{\"id\": \"ignored\"}", 0644);
	put(".hidden.json", "{\"id\": \"hidden\"}", 0644);
	put("e.json", "{\"id\": \"epsilon\"}", 0664);
	put("f.json", "{\"id\": \"phi\"}", 0646);
	snprintf(path, sizeof(path), "%s/g.json", dir);
	snprintf(target, sizeof(target), "%s/a.json", dir);
	assert_int_equal(symlink(target, path), 0);
	snprintf(path, sizeof(path), "%s/h.json", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	put("i.json", "{\"id\": \"iota\"}", 0644);
	snprintf(path, sizeof(path), "%s/i.json", dir);
	assert_int_equal(chown(path, 12345, 0), 0);

	assert_int_equal(profile_set_load(&set, dir), 7);
	assert_string_equal(set.dir_error, "");
	assert_int_equal(set.n, 9);
	assert_int_equal(set.skipped, 0);
	assert_string_equal(set.e[0].file, "a.json");
	assert_string_equal(set.e[1].file, "b.json");
	assert_string_equal(set.e[8].file, "i.json");
	assert_true(entry("a.json")->valid);
	assert_string_equal(entry("a.json")->id, "alpha");
	assert_string_equal(entry("a.json")->p.cmd[0], "sh");
	assert_true(entry("b.json")->valid);

	e = entry("c.json");
	assert_false(e->valid);
	assert_string_equal(e->id, "gamma");
	assert_string_equal(e->error, "c.json: resources.ram: unknown field (known: memory, pids, "
			    "cpus, disk)");
	e = entry("d.json");
	assert_string_equal(e->id, "");
	assert_non_null(strstr(e->error, "d.json: (file): not JSON: "));
	assert_string_equal(entry("e.json")->error, "e.json: writable by group or other (mode "
			    "0664): profiles decide what runs; chmod go-w");
	assert_string_equal(entry("f.json")->error, "f.json: writable by group or other (mode "
			    "0646): profiles decide what runs; chmod go-w");
	assert_string_equal(entry("g.json")->error, "g.json: a symbolic link (never followed)");
	assert_string_equal(entry("h.json")->error, "h.json: not a regular file");
	assert_string_equal(entry("i.json")->error, "i.json: owned by uid 12345, not root: "
			    "profiles decide what runs");
	assert_false(entry("i.json")->valid);

	p = profile_set_find(&set, "beta", &e);
	assert_non_null(p);
	assert_string_equal(p->image, "img:b");
	assert_ptr_equal(e, entry("b.json"));
	assert_null(profile_set_find(&set, "gamma", &e));
	assert_ptr_equal(e, entry("c.json"));
	assert_null(profile_set_find(&set, "nope", &e));
	assert_null(e);
	assert_null(profile_set_find(&set, "ignored", NULL));
	assert_null(profile_set_find(&set, "hidden", NULL));
	/* d.json has no id: "" finds nothing */
	assert_null(profile_set_find(&set, "", &e));
	assert_null(e);
}

static void test_profile_set_two_files_with_one_id_are_both_invalid(void **state)
{
	const struct profile_entry *e;

	put("one.json", "{\"id\": \"same\"}", 0644);
	put("two.json", "{\"id\": \"same\", \"image\": \"x\"}", 0644);
	put("three.json", "{\"id\": \"other\"}", 0644);
	assert_int_equal(profile_set_load(&set, dir), 2);
	assert_string_equal(entry("one.json")->error, "one.json: id: same is also the id of "
			    "two.json");
	assert_string_equal(entry("two.json")->error, "two.json: id: same is also the id of "
			    "one.json");
	assert_null(profile_set_find(&set, "same", &e));
	assert_non_null(e);
	assert_false(e->valid);
	assert_non_null(profile_set_find(&set, "other", NULL));
}

static void test_profile_set_missing_dir_is_empty_and_a_loose_dir_is_not_read(void **state)
{
	char path[128];

	put("a.json", "{\"id\": \"a\"}", 0644);
	assert_int_equal(profile_set_load(&set, dir), 0);
	assert_int_equal(set.n, 1);

	/* a reload replaces what the set held */
	snprintf(path, sizeof(path), "%s/none", dir);
	assert_int_equal(profile_set_load(&set, path), 0);
	assert_int_equal(set.n, 0);
	assert_string_equal(set.dir_error, "");

	assert_int_equal(chmod(dir, 0777), 0);
	assert_int_equal(profile_set_load(&set, dir), 0);
	assert_int_equal(set.n, 0);
	assert_non_null(strstr(set.dir_error, ": writable by group or other (mode 0777)"));
	assert_int_equal(chmod(dir, 0700), 0);

	snprintf(path, sizeof(path), "%s/a.json", dir);
	assert_int_equal(profile_set_load(&set, path), 0);
	assert_int_equal(set.n, 0);
	assert_non_null(strstr(set.dir_error, "Not a directory"));
}

static void test_profile_set_keeps_file_names_and_errors_printable(void **state)
{
	put("ok.json", "{\"id\": \"ok\", \"image\": \"i\"}", 0644);
	put("caf\xc3\xa9\x01.json", "{\"id\": \"x\", \"caf\xc3\xa9\": 1}", 0644);
	assert_int_equal(profile_set_load(&set, dir), 1);
	assert_int_equal(set.n, 2);
	assert_string_equal(set.e[0].file, "caf??\?.json");
	assert_string_equal(set.e[0].error, "caf??\?.json: caf??: unknown field (known: id, "
			    "description, image, runtime, env, cmd, resources, mounts, network, "
			    "egress, credential_refs, readiness_probes)");
	assert_string_equal(set.e[0].id, "x");
	assert_false(set.e[0].valid);
	assert_string_equal(set.e[1].file, "ok.json");
	assert_true(set.e[1].valid);
}

static void test_profile_set_keeps_the_first_names_and_counts_the_rest(void **state)
{
	static char big[PROFILE_FILE_BYTES + 2];
	char name[32], text[64];

	for (int i = PROFILE_MAX + 2; i >= 0; i--) {
		snprintf(name, sizeof(name), "p%03d.json", i);
		snprintf(text, sizeof(text), "{\"id\": \"p%03d\"}", i);
		put(name, text, 0644);
	}
	assert_int_equal(profile_set_load(&set, dir), 0);
	assert_int_equal(set.n, PROFILE_MAX);
	assert_int_equal(set.skipped, 3);
	assert_string_equal(set.e[0].file, "p000.json");
	assert_string_equal(set.e[PROFILE_MAX - 1].id, "p063");

	memset(big, ' ', sizeof(big) - 1);
	memcpy(big, "{\"id\":\"big\"}", 12);
	put("a-big.json", big, 0644);
	assert_int_equal(profile_set_load(&set, dir), 1);
	assert_string_equal(set.e[0].error, "a-big.json: larger than 16384 bytes");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_profile_reads_every_field),
		cmocka_unit_test(test_profile_minimal_is_an_id_and_defaults_are_zero),
		cmocka_unit_test(test_profile_sizes_and_cpus_take_each_spelling),
		cmocka_unit_test(test_profile_refuses_unknown_fields_at_every_level),
		cmocka_unit_test(test_profile_refuses_wrong_types_naming_the_field),
		cmocka_unit_test(test_profile_refuses_a_bad_or_missing_id),
		cmocka_unit_test(test_profile_refuses_not_json_and_too_large),
		cmocka_unit_test(test_profile_refuses_too_many_entries),
		cmocka_unit_test(test_profile_shared_kernel_refusal_names_the_field_never_the_value),
		cmocka_unit_test(test_profile_examples_in_config_are_valid),
		cmocka_unit_test_setup_teardown(
			test_profile_set_reads_json_files_in_order_and_keeps_bad_ones_as_invalid,
			setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(test_profile_set_two_files_with_one_id_are_both_invalid,
						setup_dir, teardown_dir),
		cmocka_unit_test_setup_teardown(
			test_profile_set_missing_dir_is_empty_and_a_loose_dir_is_not_read, setup_dir,
			teardown_dir),
		cmocka_unit_test_setup_teardown(
			test_profile_set_keeps_file_names_and_errors_printable, setup_dir,
			teardown_dir),
		cmocka_unit_test_setup_teardown(test_profile_set_keeps_the_first_names_and_counts_the_rest,
						setup_dir, teardown_dir),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
