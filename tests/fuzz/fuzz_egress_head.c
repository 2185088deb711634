/* fuzz_egress_head.c: the proxy request head on arbitrary bytes. A head read whole must be
 * what its fields say (lowercase host, a port, a path in origin form for the absolute form,
 * raw and rest covering the input), and any shorter prefix of it must ask for more. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct egress_head h, p;
	size_t cut;
	int rc;

	if (size > EGRESS_HEAD_MAX + 512)
		return 0;
	rc = egress_head_parse((const char *)data, size, &h);
	if (rc != EGRESS_HEAD_DONE && rc != EGRESS_HEAD_MORE && rc != ERR_PARSE)
		abort();
	if (rc == EGRESS_HEAD_MORE && size >= EGRESS_HEAD_MAX)
		abort();
	if (rc != EGRESS_HEAD_DONE)
		return 0;
	if (h.raw != (const char *)data || h.raw_len > EGRESS_HEAD_MAX ||
	    h.raw_len + h.rest_len != size || h.rest != h.raw + h.raw_len)
		abort();
	if (h.port == 0 || h.host[0] == '\0' || strlen(h.host) >= sizeof(h.host) ||
	    h.method[0] == '\0')
		abort();
	for (const char *c = h.host; *c; c++)
		if ((*c >= 'A' && *c <= 'Z') || (unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			abort();
	if (egress_head_is_connect(&h) ? h.path[0] != '\0' : h.path[0] != '/')
		abort();
	for (const char *c = h.path; *c; c++)
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			abort();
	cut = size ? data[0] % h.raw_len : 0;
	if (egress_head_parse((const char *)data, cut, &p) != EGRESS_HEAD_MORE)
		abort();
	return 0;
}
