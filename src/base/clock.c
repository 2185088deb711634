/* clock.c: the two clocks everything here reads, in milliseconds. */
#include <time.h>

#include "base/base.h"

static int64_t ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_ms(void)
{
	return ms(CLOCK_MONOTONIC);
}

int64_t clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t clock_wall_ms(void)
{
	return ms(CLOCK_REALTIME);
}
