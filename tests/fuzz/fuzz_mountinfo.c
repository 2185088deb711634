/* fuzz_mountinfo.c: the mountinfo parser gives the same answer however its input is split,
 * and every mount point it keeps is found again by prune_mounts_below. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "prune/prune.h"

static char bytes_a[8192], bytes_b[8192];
static uint32_t off_a[64], off_b[64];

static int parse(struct prune_mounts *m, char *bytes, uint32_t *off, const uint8_t *data,
		 size_t size, size_t chunk)
{
	static struct prune_mountinfo mi;
	int r = 0;

	prune_mounts_init(m, bytes, 8192, off, 64);
	prune_mountinfo_init(&mi, "/srv/agentshare", m);
	for (size_t i = 0; i < size && r == 0; i += chunk)
		r = prune_mountinfo_feed(&mi, data + i, size - i < chunk ? size - i : chunk);
	return r ? r : prune_mountinfo_finish(&mi);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct prune_mounts a, b;
	size_t chunk;
	int ra, rb;

	if (size < 1)
		return 0;
	chunk = (size_t)data[0] % 17 + 1;
	ra = parse(&a, bytes_a, off_a, data + 1, size - 1, size);
	rb = parse(&b, bytes_b, off_b, data + 1, size - 1, chunk);
	if (ra != rb || a.n != b.n)
		abort();
	for (uint32_t i = 0; ra == 0 && i < a.n; i++) {
		const char *p = a.bytes + a.off[i];
		if (strcmp(p, b.bytes + b.off[i]) != 0 || p[0] == '\0')
			abort();
		if (!prune_mounts_below(&a, p))
			abort();
	}
	return 0;
}
