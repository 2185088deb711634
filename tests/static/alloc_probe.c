/* alloc_probe.c: exercises the static build's allocator from outside an applet: budget,
 * reuse of freed blocks, alignment, then one allocation after sealing (which must abort in
 * checking mode and be counted otherwise). Built with musl-gcc against the real base objects. */
#include <stdint.h>
#include <stdio.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

int main(void)
{
	struct alloc_stats st;
	void *p, *q, *big;

	if (alloc_budget(8u << 20) != 0)
		return 10;
	p = malloc(100);
	free(p);
	q = malloc(100);
	if (q != p)
		return 11; /* a freed block of the same class is reused */
	big = aligned_alloc(4096, 3u << 20);
	if (!big || ((uintptr_t)big & 4095))
		return 12;
	memset(big, 1, 3u << 20);
	if (malloc(16u << 20) != NULL)
		return 13; /* beyond the budget: refused, not grown */
	q = realloc(q, 5000);
	if (!q || malloc_usable_size(q) < 5000)
		return 14;
	free(big);
	alloc_seal();
	alloc_stats(&st);
	printf("sealed budget=%zu in_use=%zu\n", st.budget, st.in_use);
	fflush(stdout);
	p = malloc(32);
	alloc_stats(&st);
	printf("after_seal=%zu\n", st.after_seal);
	return p && st.after_seal == 1 ? 0 : 15;
}
