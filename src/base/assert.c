/* assert.c: the end of a failed ASSERT (base.h). Only write(2) and abort(3): the failure may be
 * in the allocator, the log or a buffer, so nothing here uses them. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"

static void put(const char *s)
{
	size_t n = strlen(s);

	while (n > 0) {
		ssize_t w = write(2, s, n);

		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

_Noreturn void assert_fail(const char *file, int line, const char *cond)
{
	char num[12];
	int i = (int)sizeof(num) - 1;
	unsigned v = line > 0 ? (unsigned)line : 0;

	num[i] = '\0';
	do {
		num[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v > 0 && i > 0);
	put("agentic: assertion failed: ");
	put(file);
	put(":");
	put(num + i);
	put(": ");
	put(cond);
	put("\n");
	abort();
}
