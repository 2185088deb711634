/* fuzz_redact.c: scrubbing arbitrary text stays in bounds and terminates, and a secret planted
 * in it as API_TOKEN=<canary> never survives next to its key, whatever surrounds it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/reqcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char canary[] = "c4n4ryS3cr3tV4lu3";
	char buf[512];
	size_t half = size / 2, n = 0;

	if (size > 400)
		return 0;
	memcpy(buf, data, half);
	n = half;
	memcpy(buf + n, " API_TOKEN=", 11);
	n += 11;
	memcpy(buf + n, canary, sizeof(canary) - 1);
	n += sizeof(canary) - 1;
	buf[n++] = ' ';
	memcpy(buf + n, data + half, size - half);
	n += size - half;
	buf[n] = '\0';
	policy_redact(buf, sizeof(buf));
	if (strlen(buf) >= sizeof(buf) || strstr(buf, "API_TOKEN=c4n4ry"))
		abort();
	return 0;
}
