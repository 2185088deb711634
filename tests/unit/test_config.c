/* test_config.c: agenticd's config: defaults, parsing, line-numbered errors, validation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/config.h"

static int parse(struct config *c, const char *text, char *err)
{
	return config_parse(c, text, strlen(text), err, 256);
}

static void test_config_defaults_match_the_design(void **state)
{
	struct config c;
	char err[256];

	config_defaults(&c);
	assert_string_equal(c.docker_host, "unix:///var/run/docker.sock");
	assert_string_equal(c.agent_socket_dir, "/run/agentic/agent");
	assert_string_equal(c.admin_socket, "/run/agentic/admin.sock");
	assert_string_equal(c.admin_group, "agentic");
	assert_string_equal(c.agentshare_root, "/srv/agentshare");
	assert_string_equal(c.default_image, "agentic/base:local");
	assert_int_equal(c.control_uid_min, 200000);
	assert_int_equal(c.control_uid_max, 799999);
	assert_int_equal(c.workload_uid, 10001);
	assert_int_equal(c.subnet_pool_base, 0x0ad50000);
	assert_int_equal(c.subnet_pool_prefix, 16);
	assert_int_equal(c.max_sandboxes, 256);
	assert_int_equal(c.max_message_bytes, 4u << 20);
	assert_int_equal(c.default_memory_bytes, 1u << 30);
	assert_int_equal(c.default_nano_cpus, 1000000000);
	assert_int_equal(c.n_mount_allowlist, 0);
	assert_int_equal(c.log_level, LOG_INFO);
	assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
}

static void test_config_parses_every_value_form(void **state)
{
	struct config c;
	char err[256] = "";

	config_defaults(&c);
	assert_int_equal(parse(&c, "# comment\n\n  max_sandboxes = 40  \r\n"
				   "default_memory_bytes=512m\n"
				   "max_message_bytes = 8MiB\n"
				   "sandbox_subnet_pool = 10.99.0.0/20\n"
				   "mount_allowlist = /srv/data/, /opt/tools\n"
				   "admin_group = wheel\n", err), 0);
	assert_int_equal(c.max_sandboxes, 40);
	assert_int_equal(c.default_memory_bytes, 512u << 20);
	assert_int_equal(c.max_message_bytes, 8u << 20);
	assert_int_equal(c.subnet_pool_base, 0x0a630000);
	assert_int_equal(c.subnet_pool_prefix, 20);
	assert_int_equal(c.n_mount_allowlist, 2);
	assert_string_equal(c.mount_allowlist[0], "/srv/data");
	assert_string_equal(c.mount_allowlist[1], "/opt/tools");
	assert_string_equal(c.admin_group, "wheel");
}

static void test_config_bad_line_names_the_line_and_changes_nothing(void **state)
{
	struct config c, before;
	char err[256];
	static const struct {
		const char *text;
		const char *want;
	} cases[] = {
		{ "max_sandboxes = 3\nbogus_key = 1\n", "2: unknown key bogus_key" },
		{ "max_sandboxes = 3\n\nmax_sandboxes\n", "3: expected `key = value`" },
		{ "max_sandboxes = 0\n", "1: max_sandboxes must be a whole number from 1 to 2048" },
		{ "max_sandboxes = 12x\n", "1: max_sandboxes must be a whole number" },
		{ "control_uid_min = -5\n", "1: control_uid_min must be a whole number" },
		{ "agentshare_root = srv\n", "1: agentshare_root must be an absolute path" },
		{ "sandbox_subnet_pool = 10.213.0.1/16\n", "1: sandbox_subnet_pool must be" },
		{ "sandbox_subnet_pool = 10.213.0.0/29\n", "1: sandbox_subnet_pool must be" },
		{ "default_memory_bytes = 1q\n", "1: default_memory_bytes must be" },
		{ "mount_allowlist = relative/path\n", "1: mount_allowlist takes" },
		{ "admin_group =\n", "1: admin_group must be 1 to" },
		{ "log_level = debug\nlog_level = verbose\n",
		  "2: log_level must be error, warn, info or debug" },
		{ "log_level = DEBUG\n", "1: log_level must be error, warn, info or debug" },
		{ "log_level =\n", "1: log_level must be error, warn, info or debug" },
		{ "log_level = 3\n", "1: log_level must be error, warn, info or debug" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		config_defaults(&c);
		before = c;
		assert_int_equal(parse(&c, cases[i].text, err), ERR_PARSE);
		if (strncmp(err, cases[i].want, strlen(cases[i].want)) != 0)
			fail_msg("case %zu: got '%s', want '%s...'", i, err, cases[i].want);
		assert_memory_equal(&c, &before, sizeof(c));
	}
}

static void test_config_log_level_takes_each_level_name(void **state)
{
	static const struct {
		const char *text;
		enum log_level want;
	} cases[] = {
		{ "log_level = error\n", LOG_ERROR },
		{ "log_level = warn\n", LOG_WARN },
		{ "log_level=info\n", LOG_INFO },
		{ "log_level = debug  \n", LOG_DEBUG },
	};
	struct config c;
	char err[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		config_defaults(&c);
		assert_int_equal(parse(&c, cases[i].text, err), 0);
		assert_int_equal(c.log_level, cases[i].want);
	}
}

static void test_config_validate_rejects_unsafe_ranges(void **state)
{
	struct config c;
	char err[256];

	config_defaults(&c);
	c.control_uid_min = 10000;
	c.control_uid_max = 20000;
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
	assert_string_equal(err, "the control uid range includes workload_uid");
	config_defaults(&c);
	c.control_uid_min = 300000;
	c.control_uid_max = 200000;
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
	config_defaults(&c);
	c.subnet_pool_prefix = 24; /* 16 /28s for 256 sandboxes */
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "fewer /28 networks"));
	config_defaults(&c);
	strcpy(c.docker_host, "tcp://127.0.0.1:2375");
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
}

/* The egress range runs downwards from egress_uid: one whose top lies above QEMU's uids but
 * whose bottom reaches into them shares uids with QEMU (and the stale-worker kill at start
 * would take a QEMU for a worker). */
static void test_config_validate_rejects_egress_range_reaching_into_qemu_uids(void **state)
{
	struct config c;
	char err[256];
	uint32_t qemu_max;

	config_defaults(&c);
	qemu_max = c.control_uid_max + c.vm_uid_offset + 1;
	c.egress_uid = qemu_max + c.egress_max_connections - 1; /* its bottom is QEMU's top */
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, "QEMU's"));
	c.egress_uid = c.control_uid_min + c.vm_uid_offset; /* its top is QEMU's bottom */
	assert_int_equal(config_validate(&c, err, sizeof(err)), ERR_PARSE);
	c.egress_uid = qemu_max + c.egress_max_connections; /* just above */
	assert_int_equal(config_validate(&c, err, sizeof(err)), 0);
}

static void test_config_load_prefixes_the_file_and_tolerates_missing_default(void **state)
{
	struct config c;
	char err[512], path[] = "/tmp/agentic-config-XXXXXX";
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, "stop_grace_ms = 5\nready_timeout_ms = 1\n", 39), 39);
	close(fd);
	config_defaults(&c);
	assert_int_equal(config_load(&c, path, 1, err, sizeof(err)), ERR_PARSE);
	assert_non_null(strstr(err, ":2: ready_timeout_ms must be"));
	assert_int_equal(strncmp(err, path, strlen(path)), 0);
	assert_int_equal(c.stop_grace_ms, 10000);
	unlink(path);
	assert_int_equal(config_load(&c, path, 0, err, sizeof(err)), 0);
	assert_true(config_load(&c, path, 1, err, sizeof(err)) < 0);
	assert_non_null(strstr(err, "cannot open"));
}

static void test_config_env_overrides_agentshare_root(void **state)
{
	struct config c;

	config_defaults(&c);
	setenv("AGENTSHARE_ROOT", "/tmp/share", 1);
	config_apply_env(&c);
	unsetenv("AGENTSHARE_ROOT");
	assert_string_equal(c.agentshare_root, "/tmp/share");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_defaults_match_the_design),
		cmocka_unit_test(test_config_parses_every_value_form),
		cmocka_unit_test(test_config_bad_line_names_the_line_and_changes_nothing),
		cmocka_unit_test(test_config_log_level_takes_each_level_name),
		cmocka_unit_test(test_config_validate_rejects_unsafe_ranges),
		cmocka_unit_test(test_config_validate_rejects_egress_range_reaching_into_qemu_uids),
		cmocka_unit_test(test_config_load_prefixes_the_file_and_tolerates_missing_default),
		cmocka_unit_test(test_config_env_overrides_agentshare_root),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
