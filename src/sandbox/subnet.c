/* subnet.c: the subnet pool's /28s: the map, the foreign ones, and their text (subnet.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sandbox/subnet.h"

static struct {
	const struct config *cfg;
	struct idalloc map;
	/* The pool's /28s that a network agenticd did not make covers (another daemon's, an
	 * operator's, a leftover): taken in `map` so that no create asks the engine for them,
	 * given back when a later reading of the engine's networks no longer finds them. */
	uint64_t *foreign;
	uint32_t nforeign;
} S;

void subnet_init(const struct config *cfg, uint64_t *bits, uint64_t *foreign_bits)
{
	uint32_t n = 1u << (28 - cfg->subnet_pool_prefix);

	S.cfg = cfg;
	S.foreign = foreign_bits;
	idalloc_init(&S.map, bits, 0, n);
	memset(S.foreign, 0, ((n + 63) / 64) * 8);
	S.nforeign = 0;
}

void subnet_reset(void)
{
	idalloc_init(&S.map, S.map.bits, S.map.first, S.map.count);
	memset(S.foreign, 0, ((S.map.count + 63) / 64) * 8);
	S.nforeign = 0;
}

struct idalloc *subnet_map(void)
{
	return &S.map;
}

void subnet_text(int32_t index, char *out, size_t size)
{
	uint32_t a = S.cfg->subnet_pool_base + ((uint32_t)index << 4);

	snprintf(out, size, "%u.%u.%u.%u/28", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

int32_t subnet_index(const char *cidr)
{
	const struct config *cfg = S.cfg;
	unsigned a, b, c, d, p;
	char tail;
	uint32_t addr, mask = 0xffffffffu << (32 - cfg->subnet_pool_prefix);

	if (!cidr || sscanf(cidr, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &p, &tail) != 5 ||
	    a > 255 || b > 255 || c > 255 || d > 255 || p != 28)
		return -1;
	addr = (a << 24) | (b << 16) | (c << 8) | d;
	if ((addr & mask) != cfg->subnet_pool_base || (addr & 15))
		return -1;
	return (int32_t)((addr - cfg->subnet_pool_base) >> 4);
}

int subnet_span(const char *cidr, uint32_t *first, uint32_t *count)
{
	const struct config *cfg = S.cfg;
	uint64_t pool_end = (uint64_t)cfg->subnet_pool_base + (1ull << (32 - cfg->subnet_pool_prefix));
	uint64_t lo, hi;
	unsigned a, b, c, d, p;
	char tail;

	if (strchr(cidr, ':'))
		return -ENOENT;
	if (sscanf(cidr, "%3u.%3u.%3u.%3u/%2u%c", &a, &b, &c, &d, &p, &tail) != 5 || a > 255 ||
	    b > 255 || c > 255 || d > 255 || p > 32)
		return -EINVAL;
	lo = ((uint64_t)a << 24 | b << 16 | c << 8 | d) & ~((1ull << (32 - p)) - 1);
	hi = lo + (1ull << (32 - p));
	if (lo < cfg->subnet_pool_base)
		lo = cfg->subnet_pool_base;
	if (hi > pool_end)
		hi = pool_end;
	if (lo >= hi)
		return -ENOENT;
	*first = (uint32_t)((lo - cfg->subnet_pool_base) >> 4);
	*count = (uint32_t)(((hi - cfg->subnet_pool_base + 15) >> 4) - *first);
	return 0;
}

static bool foreign_bit(uint32_t i)
{
	return (S.foreign[i / 64] >> (i % 64)) & 1;
}

static void foreign_set(uint32_t i, bool on)
{
	uint64_t bit = (uint64_t)1 << (i % 64);

	if (on) {
		S.foreign[i / 64] |= bit;
		S.nforeign++;
	} else {
		S.foreign[i / 64] &= ~bit;
		S.nforeign--;
	}
}

void subnet_foreign_clear(void)
{
	for (uint32_t i = 0; S.nforeign && i < S.map.count; i++)
		if (foreign_bit(i)) {
			foreign_set(i, false);
			idalloc_free(&S.map, i);
		}
}

uint32_t subnet_foreign_count(void)
{
	return S.nforeign;
}

int subnet_foreign_add(void *ctx, const char *cidr, bool ours)
{
	uint32_t first, count;

	(void)ctx;
	if (!cidr) {
		subnet_foreign_clear();
		return 0;
	}
	if (ours || subnet_span(cidr, &first, &count) != 0)
		return 0;
	for (uint32_t i = first; i < first + count; i++)
		if (idalloc_mark(&S.map, i) == 0)
			foreign_set(i, true);
	return 0;
}

void subnet_refused(uint32_t index)
{
	if (!foreign_bit(index))
		foreign_set(index, true);
}
