/* alloc.c: the static build's malloc: one region reserved at start-up, power-of-two size
 * classes with free lists, and a seal after which any allocation is reported as a bug. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base.h"

#ifndef AGENTIC_STATIC_ALLOC

/* glibc test build: ASan owns malloc; budgets and seals are accepted and not enforced. */
int alloc_budget(size_t bytes)
{
	(void)bytes;
	return 0;
}

void alloc_seal(void)
{
}

void alloc_stats(struct alloc_stats *out)
{
	memset(out, 0, sizeof(*out));
}

#else

#define CLASS_MIN 5 /* 32-byte blocks: 16 of header, 16 of payload */
#define CLASS_MAX 27 /* 128 MiB blocks hold LIMIT_ALLOC_MAX_BYTES plus alignment slack */
#define HDR_SIZE 16u
#define HDR_MAGIC 0xa11c0c8du

_Static_assert((1u << CLASS_MAX) >= 2u * LIMIT_ALLOC_MAX_BYTES, "largest class holds the max");

struct hdr {
	uint32_t magic;
	uint32_t klass;
	uint32_t offset; /* bytes from the block start to this header (aligned allocations) */
	uint32_t pad;
};

struct free_block {
	struct free_block *next;
};

static _Alignas(16) uint8_t boot_heap[LIMIT_BOOT_HEAP_BYTES];
static struct arena heap = { boot_heap, 0, sizeof(boot_heap) };
static struct arena region;
static int region_ready;
static struct free_block *free_lists[CLASS_MAX + 1];
static size_t in_use, peak, budget_bytes = sizeof(boot_heap), after_seal;
static int sealed, check_mode;
static volatile int lock_word;

static void lock(void)
{
	while (__atomic_exchange_n(&lock_word, 1, __ATOMIC_ACQUIRE))
		;
}

static void unlock(void)
{
	__atomic_store_n(&lock_word, 0, __ATOMIC_RELEASE);
}

static void die(const char *msg)
{
	if (write(STDERR_FILENO, msg, strlen(msg)) < 0)
		abort();
	abort();
}

static unsigned class_of(size_t total)
{
	unsigned k = CLASS_MIN;

	while (k <= CLASS_MAX && ((size_t)1 << k) < total)
		k++;
	return k;
}

static void *carve(unsigned k)
{
	size_t size = (size_t)1 << k;
	void *p = NULL;

	if (region_ready)
		p = arena_alloc(&region, size, 16);
	if (!p)
		p = arena_alloc(&heap, size, 16);
	return p;
}

/* Returns a block of class k with its header at `block + offset`. */
static void *block_get(unsigned k)
{
	struct free_block *f;

	if (sealed) {
		after_seal++;
		if (check_mode)
			die("agentic: allocation after start-up (alloc_seal): this is a bug\n");
	}
	f = free_lists[k];
	if (f) {
		free_lists[k] = f->next;
		return f;
	}
	return carve(k);
}

static void *alloc_aligned(size_t align, size_t size)
{
	size_t total;
	unsigned k;
	uint8_t *block, *user;
	struct hdr *h;

	if (align < 16)
		align = 16;
	if (size > LIMIT_ALLOC_MAX_BYTES || align > LIMIT_ALLOC_MAX_BYTES) {
		errno = ENOMEM;
		return NULL;
	}
	total = size + HDR_SIZE + (align > 16 ? align : 0);
	k = class_of(total);
	lock();
	block = block_get(k);
	if (!block) {
		unlock();
		errno = ENOMEM;
		return NULL;
	}
	in_use += (size_t)1 << k;
	if (in_use > peak)
		peak = in_use;
	unlock();
	user = (uint8_t *)(((uintptr_t)block + HDR_SIZE + align - 1) & ~(uintptr_t)(align - 1));
	h = (struct hdr *)(user - HDR_SIZE);
	h->magic = HDR_MAGIC;
	h->klass = k;
	h->offset = (uint32_t)((uint8_t *)h - block);
	return user;
}

static struct hdr *hdr_of(void *p)
{
	struct hdr *h = (struct hdr *)((uint8_t *)p - HDR_SIZE);

	if (h->magic != HDR_MAGIC || h->klass < CLASS_MIN || h->klass > CLASS_MAX)
		die("agentic: free() of a pointer malloc did not return: heap corruption\n");
	return h;
}

void *malloc(size_t size)
{
	return alloc_aligned(16, size);
}

void free(void *p)
{
	struct hdr *h;
	struct free_block *f;
	unsigned k;

	if (!p)
		return;
	h = hdr_of(p);
	k = h->klass;
	f = (struct free_block *)((uint8_t *)h - h->offset);
	h->magic = 0;
	lock();
	f->next = free_lists[k];
	free_lists[k] = f;
	in_use -= (size_t)1 << k;
	unlock();
}

void *calloc(size_t n, size_t size)
{
	void *p;

	if (size && n > SIZE_MAX / size) {
		errno = ENOMEM;
		return NULL;
	}
	p = malloc(n * size);
	if (p)
		memset(p, 0, n * size);
	return p;
}

size_t malloc_usable_size(void *p)
{
	struct hdr *h;

	if (!p)
		return 0;
	h = hdr_of(p);
	return ((size_t)1 << h->klass) - h->offset - HDR_SIZE;
}

void *realloc(void *p, size_t size)
{
	size_t have;
	void *q;

	if (!p)
		return malloc(size);
	have = malloc_usable_size(p);
	if (size <= have)
		return p;
	q = malloc(size);
	if (!q)
		return NULL;
	memcpy(q, p, have);
	free(p);
	return q;
}

void *aligned_alloc(size_t align, size_t size)
{
	if (align == 0 || (align & (align - 1))) {
		errno = EINVAL;
		return NULL;
	}
	return alloc_aligned(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
	void *p;

	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	p = alloc_aligned(align, size);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

void *memalign(size_t align, size_t size)
{
	return aligned_alloc(align, size);
}

int alloc_budget(size_t bytes)
{
	void *p;

	if (region_ready)
		return ERR_STATE;
	/* MAP_POPULATE prefaults the region so its pages count in RSS from the start and
	 * memory use stays flat afterwards. */
	p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
		 -1, 0);
	if (p == MAP_FAILED)
		return -errno;
	lock();
	arena_init(&region, p, bytes);
	region_ready = 1;
	budget_bytes += bytes;
	unlock();
	return 0;
}

void alloc_seal(void)
{
	const char *v = getenv("AGENTIC_ALLOC_CHECK");

	lock();
	check_mode = v && strcmp(v, "1") == 0;
	sealed = 1;
	unlock();
}

void alloc_stats(struct alloc_stats *out)
{
	lock();
	out->budget = budget_bytes;
	out->in_use = in_use;
	out->peak = peak;
	out->after_seal = after_seal;
	unlock();
}

#endif
