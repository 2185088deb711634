/* test_init_env.c: the init refuses any environment that is not exactly agenticd's contract. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "init/env.h"

static char *good[] = {
	"PATH=/usr/bin:/bin",
	"AGENT_ID=sbx-0a1b2c3d",
	"AGENT_INSTANCE_ID=019a1b2c-3d4e-7f00-8a1b-2c3d4e5f6a7b",
	"AGENT_CONTROL_UID=200042",
	"AGENT_CONTROL_GID=200042",
	"AGENT_CONTROL_UID_RANGE=200000-799999",
	"AGENT_WORKLOAD_UID=10001",
	"AGENT_WORKLOAD_GID=10001",
	"AGENT_GRPC_UDS_PATH=/run/agentic-sandbox/agent.sock",
	"AGENT_SETUP_SENTINEL=/run/agentic/setup-complete",
	NULL,
};

static void test_init_env_accepts_the_contract(void **state)
{
	struct init_env e;
	char why[256];

	assert_int_equal(init_env_parse(good, &e, why, sizeof(why)), 0);
	assert_string_equal(e.agent_id, "sbx-0a1b2c3d");
	assert_int_equal(e.control_uid, 200042);
	assert_int_equal(e.range_min, 200000);
	assert_int_equal(e.range_max, 799999);
	assert_int_equal(e.workload_uid, 10001);
	assert_string_equal(e.uds_path, "/run/agentic-sandbox/agent.sock");
}

static void test_init_env_refuses_each_deviation_and_names_the_variable(void **state)
{
	static const struct {
		const char *entry, *want;
	} bad[] = {
		{ "AGENT_CONTROL_UID=10001", "AGENT_CONTROL_UID is outside" },
		{ "AGENT_CONTROL_UID=0", "AGENT_CONTROL_UID is outside" },
		{ "AGENT_CONTROL_UID=2000x", "AGENT_CONTROL_UID is not a numeric id" },
		{ "AGENT_CONTROL_UID=-1", "AGENT_CONTROL_UID is not a numeric id" },
		{ "AGENT_CONTROL_GID=200043", "AGENT_CONTROL_GID differs" },
		{ "AGENT_CONTROL_UID_RANGE=0-799999", "AGENT_CONTROL_UID_RANGE is not" },
		{ "AGENT_CONTROL_UID_RANGE=300000-200000", "AGENT_CONTROL_UID_RANGE is not" },
		{ "AGENT_CONTROL_UID_RANGE=200000-799999x", "AGENT_CONTROL_UID_RANGE is not" },
		{ "AGENT_WORKLOAD_UID=0", "AGENT_WORKLOAD_UID/GID must be" },
		{ "AGENT_WORKLOAD_GID=200001", "AGENT_WORKLOAD_UID/GID must be" },
		{ "AGENT_GRPC_UDS_PATH=agent.sock", "AGENT_GRPC_UDS_PATH is not an absolute path" },
		{ "AGENT_ID=Bad_Name", "AGENT_ID is not a sandbox name" },
		{ "AGENT_INSTANCE_ID=not-a-uuid", "AGENT_INSTANCE_ID is not a lowercase UUID" },
	};
	char *env[ARRAY_LEN(good)];
	struct init_env e;
	char why[256];

	for (size_t i = 0; i < ARRAY_LEN(bad); i++) {
		size_t klen = strchr(bad[i].entry, '=') - bad[i].entry + 1;

		memcpy(env, good, sizeof(good));
		for (size_t j = 0; env[j]; j++)
			if (strncmp(env[j], bad[i].entry, klen) == 0)
				env[j] = (char *)bad[i].entry;
		assert_int_equal(init_env_parse(env, &e, why, sizeof(why)), ERR_PARSE);
		if (strncmp(why, bad[i].want, strlen(bad[i].want)) != 0)
			fail_msg("%s: got '%s'", bad[i].entry, why);
		/* the reason names the variable, never echoes its value */
		if (strstr(why, strchr(bad[i].entry, '=') + 1) && strlen(strchr(bad[i].entry, '=')) > 3)
			fail_msg("%s: reason echoes the value: '%s'", bad[i].entry, why);
	}
}

static void test_init_env_refuses_a_missing_variable(void **state)
{
	char *env[ARRAY_LEN(good)];
	struct init_env e;
	char why[256];

	memcpy(env, good, sizeof(good));
	env[3] = "UNRELATED=1";
	assert_int_equal(init_env_parse(env, &e, why, sizeof(why)), ERR_PARSE);
	assert_string_equal(why, "AGENT_CONTROL_UID is not set");
}

static void test_init_env_private_variables_are_the_agent_ones(void **state)
{
	assert_true(init_env_is_private("AGENT_ID=x"));
	assert_false(init_env_is_private("PATH=/bin"));
	assert_false(init_env_is_private("MY_AGENT_ID=1"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_env_accepts_the_contract),
		cmocka_unit_test(test_init_env_refuses_each_deviation_and_names_the_variable),
		cmocka_unit_test(test_init_env_refuses_a_missing_variable),
		cmocka_unit_test(test_init_env_private_variables_are_the_agent_ones),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
