/* fuzz_config.c: the config parser never crashes, and a failed parse changes nothing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct config c, before;
	char err[256];

	config_defaults(&c);
	before = c;
	if (config_parse(&c, (const char *)data, size, err, sizeof(err)) != 0) {
		if (memcmp(&c, &before, sizeof(c)) != 0 || !memchr(err, '\0', sizeof(err)))
			abort();
		return 0;
	}
	config_validate(&c, err, sizeof(err));
	return 0;
}
