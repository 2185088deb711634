/* idalloc.c: next-fit id allocation over a bitmap the caller owns. */
#include <errno.h>
#include <string.h>

#include "base.h"

void idalloc_init(struct idalloc *a, uint64_t *bits, uint32_t first, uint32_t count)
{
	a->bits = bits;
	a->first = first;
	a->count = count;
	a->cursor = 0;
	a->used = 0;
	memset(bits, 0, ((size_t)count + 63) / 64 * sizeof(uint64_t));
}

static int bit(const struct idalloc *a, uint32_t off)
{
	return (int)((a->bits[off / 64] >> (off % 64)) & 1);
}

int idalloc_take(struct idalloc *a, uint32_t *id)
{
	uint32_t off = a->cursor;

	if (a->used == a->count)
		return ERR_LIMIT;
	for (uint32_t n = 0; n < a->count; n++) {
		/* whole words at a time when a word is full */
		if (off % 64 == 0 && a->bits[off / 64] == UINT64_MAX && off + 64 <= a->count) {
			n += 63;
			off += 64;
			if (off >= a->count)
				off = 0;
			continue;
		}
		if (!bit(a, off)) {
			a->bits[off / 64] |= (uint64_t)1 << (off % 64);
			a->used++;
			a->cursor = off + 1 < a->count ? off + 1 : 0;
			*id = a->first + off;
			return 0;
		}
		off = off + 1 < a->count ? off + 1 : 0;
	}
	return ERR_LIMIT;
}

int idalloc_taken(const struct idalloc *a, uint32_t id)
{
	if (id < a->first || id - a->first >= a->count)
		return 0;
	return bit(a, id - a->first);
}

int idalloc_mark(struct idalloc *a, uint32_t id)
{
	uint32_t off = id - a->first;

	if (id < a->first || off >= a->count)
		return -ERANGE;
	if (bit(a, off))
		return -EEXIST;
	a->bits[off / 64] |= (uint64_t)1 << (off % 64);
	a->used++;
	/* after a restart, go on past the newest id in use, as the live allocator would have */
	if (off >= a->cursor)
		a->cursor = off + 1 < a->count ? off + 1 : 0;
	return 0;
}

int idalloc_free(struct idalloc *a, uint32_t id)
{
	uint32_t off = id - a->first;

	if (id < a->first || off >= a->count)
		return -ERANGE;
	if (!bit(a, off))
		return -ENOENT;
	a->bits[off / 64] &= ~((uint64_t)1 << (off % 64));
	a->used--;
	return 0;
}
