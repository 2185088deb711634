/* bufpool.c: the memory the calls of one gRPC server or client share, taken once at set-up:
 * the fixed message and metadata buffer pools (grpc_buf_take / grpc_buf_give) and the arena
 * protobuf-c unpacks each received message into. */
#include <string.h>

#include "grpc/grpc_internal.h"

static void *arena_pb_alloc(void *data, size_t size)
{
	struct grpc_env *env = data;
	void *p = arena_alloc(&env->arena, size, 16);

	if (!p)
		env->arena_full = 1;
	return p;
}

static void arena_pb_free(void *data, void *p)
{
	(void)data;
	(void)p; /* freed all at once by arena_reset */
}

static size_t arena_bytes(uint32_t max_message)
{
	return 2 * (size_t)max_message + GRPC_ARENA_SLACK_BYTES;
}

static const uint32_t meta_size = GRPC_MD_BYTES;

size_t grpc_env_bytes(uint32_t max_message, uint32_t small, uint32_t large)
{
	size_t per[GRPC_BUF_KINDS] = { GRPC_SMALL_MESSAGE, (size_t)max_message + 5, meta_size };
	size_t count[GRPC_BUF_KINDS] = { small, large, small };
	size_t total = arena_bytes(max_message) + sizeof(struct h2_scratch) + GRPC_READ_BYTES;

	for (int k = 0; k < GRPC_BUF_KINDS; k++)
		total += count[k] * (per[k] + sizeof(struct grpc_buf) + sizeof(uint32_t)) + 64;
	return total + 256;
}

int grpc_env_setup(struct grpc_env *env, struct arena *carve, uint32_t max_message,
		   uint32_t small, uint32_t large)
{
	uint32_t per[GRPC_BUF_KINDS] = { GRPC_SMALL_MESSAGE, max_message + 5, meta_size };
	uint32_t count[GRPC_BUF_KINDS] = { small, large, small };
	void *arena_mem;

	memset(env, 0, sizeof(*env));
	env->max_message = max_message;
	for (int k = 0; k < GRPC_BUF_KINDS; k++) {
		struct grpc_bufpool *bp = &env->pools[k];
		void *desc = arena_alloc(carve, count[k] * sizeof(struct grpc_buf), 16);
		uint32_t *links = arena_alloc(carve, count[k] * sizeof(uint32_t), 4);

		bp->base = arena_alloc(carve, (size_t)count[k] * per[k], 64);
		if (!desc || !links || !bp->base)
			return ERR_LIMIT;
		bp->size = per[k];
		pool_init(&bp->pool, desc, links, sizeof(struct grpc_buf), count[k]);
	}
	arena_mem = arena_alloc(carve, arena_bytes(max_message), 64);
	env->scratch = arena_alloc(carve, sizeof(struct h2_scratch), 64);
	env->rdbuf = arena_alloc(carve, GRPC_READ_BYTES, 64);
	if (!arena_mem || !env->scratch || !env->rdbuf)
		return ERR_LIMIT;
	arena_init(&env->arena, arena_mem, arena_bytes(max_message));
	env->alloc.alloc = arena_pb_alloc;
	env->alloc.free = arena_pb_free;
	env->alloc.allocator_data = env;
	env->next_deadline = INT64_MAX;
	env->epfd = -1;
	return 0;
}

struct grpc_buf *grpc_buf_take(struct grpc_env *env, int kind)
{
	struct grpc_bufpool *bp = &env->pools[kind];
	struct grpc_buf *b = pool_get(&bp->pool);

	if (!b)
		return NULL;
	b->data = bp->base + (size_t)pool_index(&bp->pool, b) * bp->size;
	b->cap = bp->size;
	b->kind = (uint8_t)kind;
	return b;
}

void grpc_buf_give(struct grpc_env *env, struct grpc_buf **b)
{
	if (*b) {
		pool_put(&env->pools[(*b)->kind].pool, *b);
		*b = NULL;
	}
}
