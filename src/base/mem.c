/* mem.c: fixed-capacity byte buffers, bump arenas and slot pools over caller storage. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

void buf_init(struct buf *b, void *storage, size_t cap)
{
	b->data = storage;
	b->len = 0;
	b->cap = cap;
}

int buf_append(struct buf *b, const void *data, size_t len)
{
	if (len > b->cap - b->len)
		return ERR_LIMIT;
	if (len)
		memcpy(b->data + b->len, data, len);
	b->len += len;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	size_t room = b->cap - b->len;
	va_list ap;
	int r;

	va_start(ap, fmt);
	r = vsnprintf((char *)b->data + b->len, room, fmt, ap);
	va_end(ap);
	if (r < 0 || (size_t)r >= room) {
		if (room)
			b->data[b->len] = '\0';
		return ERR_LIMIT;
	}
	b->len += (size_t)r;
	return 0;
}

void buf_consume(struct buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void arena_init(struct arena *a, void *storage, size_t cap)
{
	a->base = storage;
	a->used = 0;
	a->cap = cap;
}

void *arena_alloc(struct arena *a, size_t size, size_t align)
{
	uintptr_t start = (uintptr_t)a->base + a->used;
	size_t pad = (size_t)(-start & (align - 1));

	if (pad > a->cap - a->used || size > a->cap - a->used - pad)
		return NULL;
	a->used += pad + size;
	return (void *)(start + pad);
}

void arena_reset(struct arena *a)
{
	a->used = 0;
}

#define POOL_END UINT32_MAX

void pool_init(struct pool *p, void *storage, uint32_t *links, size_t elem_size, uint32_t cap)
{
	p->slots = storage;
	p->next_free = links;
	p->elem_size = elem_size;
	p->cap = cap;
	p->used = 0;
	p->head = cap ? 0 : POOL_END;
	for (uint32_t i = 0; i < cap; i++)
		links[i] = i + 1 < cap ? i + 1 : POOL_END;
}

void *pool_get(struct pool *p)
{
	uint32_t i = p->head;
	void *slot;

	if (i == POOL_END)
		return NULL;
	p->head = p->next_free[i];
	p->next_free[i] = POOL_END;
	p->used++;
	slot = p->slots + (size_t)i * p->elem_size;
	memset(slot, 0, p->elem_size);
	return slot;
}

uint32_t pool_index(const struct pool *p, const void *slot)
{
	return (uint32_t)(((const uint8_t *)slot - p->slots) / p->elem_size);
}

void pool_put(struct pool *p, void *slot)
{
	uint32_t i = pool_index(p, slot);

	if (i >= p->cap)
		abort(); /* not ours: a caller bug that must not corrupt the free list */
	p->next_free[i] = p->head;
	p->head = i;
	p->used--;
}

int parse_u64(const char *s, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (!s || !*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		if (v > (max - (uint64_t)(*s - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

int hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
