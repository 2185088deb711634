/* fuzz_egress_sni.c: the ClientHello reader on arbitrary bytes: it stays in bounds, a name it
 * finds is a lowercase DNS name, and any shorter prefix of a hello it reads whole asks for
 * more (so the worker, reading as bytes come, never decides early). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "egress/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char name[EGRESS_HOST_BYTES], again[EGRESS_HOST_BYTES];
	size_t n, cut;
	int rc, rc2;

	if (size > EGRESS_HELLO_BUF + 64)
		return 0;
	rc = egress_sni_parse(data, size, name);
	if (rc != EGRESS_SNI_MORE && rc != EGRESS_SNI_FOUND && rc != EGRESS_SNI_NONE &&
	    rc != ERR_PARSE)
		abort();
	if (rc == EGRESS_SNI_FOUND) {
		n = strlen(name);
		if (n == 0 || n > 253 || name[0] == '.' || name[n - 1] == '.')
			abort();
		for (size_t i = 0; i < n; i++)
			if ((name[i] >= 'A' && name[i] <= 'Z') || (unsigned char)name[i] <= 0x20 ||
			    (unsigned char)name[i] >= 0x7f)
				abort();
	}
	if (rc == EGRESS_SNI_FOUND || rc == EGRESS_SNI_NONE) {
		/* the same bytes read the same; a prefix asks for more, unless it still holds the
		 * whole hello (bytes may follow it) and then reads the same */
		rc2 = egress_sni_parse(data, size, again);
		if (rc2 != rc || strcmp(name, again) != 0)
			abort();
		cut = size > 1 ? data[size - 1] % (size - 1) : 0;
		rc2 = egress_sni_parse(data, cut, again);
		if (rc2 != EGRESS_SNI_MORE && (rc2 != rc || strcmp(name, again) != 0))
			abort();
	}
	return 0;
}
