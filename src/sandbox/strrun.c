/* strrun.c: string runs (strrun.h). */
#include <string.h>

#include "base/base.h"
#include "sandbox/strrun.h"

int strrun_add(char *run, uint32_t *len, uint32_t cap, const char *s)
{
	size_t n = strlen(s) + 1;

	if (n > cap - *len)
		return ERR_LIMIT;
	memcpy(run + *len, s, n);
	*len += (uint32_t)n;
	return 0;
}

const char *strrun_next(const char *run, uint32_t len, const char *p)
{
	const char *q = p ? p + strlen(p) + 1 : run;

	return q < run + len ? q : NULL;
}
