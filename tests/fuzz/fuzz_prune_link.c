/* fuzz_prune_link.c: whatever a `current` link says, its lexical reading is either refused or
 * a clean root-relative path: no ".", "..", empty component, or leading or trailing slash. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char in[2 * 512 + 2], out[512];
	const char *dir, *target, *c;
	size_t len;
	int r;

	if (size >= sizeof(in) - 1)
		return 0;
	memcpy(in, data, size);
	in[size] = '\0';
	/* link_dir NUL target */
	dir = in;
	len = strlen(in);
	target = len < size ? in + len + 1 : "";
	r = prune_link_resolve("/srv/as", "/data/as", dir, target, out, sizeof(out));
	if (r != 0 && r != PRUNE_OUTSIDE && r != ERR_LIMIT)
		abort();
	if (r != 0 || out[0] == '\0')
		return 0;
	len = strlen(out);
	if (out[0] == '/' || out[len - 1] == '/' || strstr(out, "//"))
		abort();
	for (c = out; c; c = strchr(c, '/')) {
		if (*c == '/')
			c++;
		if ((c[0] == '.' && (c[1] == '/' || c[1] == '\0')) ||
		    (c[0] == '.' && c[1] == '.' && (c[2] == '/' || c[2] == '\0')))
			abort();
	}
	return 0;
}
