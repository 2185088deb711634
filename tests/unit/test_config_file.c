/* test_config_file.c: the shipped config/agenticd.conf parses and equals the built-in defaults,
 * so the documented file and the code cannot drift apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/config.h"

/* Clears the bytes after each string's NUL, which say nothing about the configuration. */
static void normalize(struct config *c)
{
	char *fields[] = { c->docker_host, c->agent_socket_dir, c->admin_socket, c->admin_group,
			   c->agentshare_root, c->profiles_dir, c->default_image,
			   c->seccomp_profile };

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t n = strnlen(fields[i], CONFIG_STR_BYTES);
		memset(fields[i] + n, 0, CONFIG_STR_BYTES - n);
	}
	memset(c->mount_allowlist, 0, sizeof(c->mount_allowlist));
}

static void test_shipped_config_equals_defaults(void **state)
{
	struct config file, defaults;
	char err[512], path[4096];
	const char *top = getenv("AGENTIC_TOP");

	snprintf(path, sizeof(path), "%s/config/agenticd.conf", top ? top : ".");
	config_defaults(&defaults);
	config_defaults(&file);
	if (config_load(&file, path, 1, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	normalize(&file);
	normalize(&defaults);
	assert_memory_equal(&file, &defaults, sizeof(file));
}

static void test_shipped_config_documents_every_key(void **state)
{
	char path[4096], line[1024];
	const char *top = getenv("AGENTIC_TOP");
	FILE *f;

	snprintf(path, sizeof(path), "%s/config/agenticd.conf", top ? top : ".");
	for (size_t i = 0; config_key_name(i); i++) {
		const char *key = config_key_name(i);
		int found = 0;

		f = fopen(path, "r");
		assert_non_null(f);
		while (!found && fgets(line, sizeof(line), f))
			found = strncmp(line, key, strlen(key)) == 0 && line[strlen(key)] == ' ';
		fclose(f);
		if (!found)
			fail_msg("config/agenticd.conf does not set %s", key);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_shipped_config_equals_defaults),
		cmocka_unit_test(test_shipped_config_documents_every_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
