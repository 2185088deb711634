/* random.c: kernel randomness for names and ids (getrandom, never a userspace PRNG). */
#include <errno.h>
#include <stdio.h>
#include <sys/random.h>
#include <time.h>

#include "base.h"

int random_bytes(void *out, size_t n)
{
	uint8_t *p = out;

	while (n) {
		ssize_t r = getrandom(p, n, 0);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

int random_hex(char *out, size_t hex_chars)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t raw[32];
	int r;

	if (hex_chars > 2 * sizeof(raw))
		return ERR_LIMIT;
	r = random_bytes(raw, (hex_chars + 1) / 2);
	if (r)
		return r;
	for (size_t i = 0; i < hex_chars; i++)
		out[i] = digits[(raw[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
	out[hex_chars] = '\0';
	return 0;
}

int uuid7(char out[37])
{
	struct timespec ts;
	uint8_t u[16];
	uint64_t ms;
	int r;

	clock_gettime(CLOCK_REALTIME, &ts);
	ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	r = random_bytes(u + 6, 10);
	if (r)
		return r;
	for (int i = 0; i < 6; i++)
		u[i] = (uint8_t)(ms >> (40 - 8 * i));
	u[6] = (uint8_t)(0x70 | (u[6] & 0x0f)); /* version 7 */
	u[8] = (uint8_t)(0x80 | (u[8] & 0x3f)); /* RFC 9562 variant */
	snprintf(out, 37,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12],
		 u[13], u[14], u[15]);
	return 0;
}
