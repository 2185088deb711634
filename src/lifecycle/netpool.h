/* netpool.h: warm networks: managed networks made ahead of creates (the engine serialises
 * network work, so a create that finds one skips its slowest step). The pool refills between
 * creates, one network at a time, through the runtime's call slot RT_SLOT_POOL. */
#ifndef AGENTIC_MGMT_NETPOOL_H
#define AGENTIC_MGMT_NETPOOL_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "runtime/runtime.h"

#define NETPOOL_NAME_BYTES 64

struct warm_net {
	char name[NETPOOL_NAME_BYTES];
	char id[RT_ID_BYTES];
	int32_t subnet;               /* index in the subnet map */
};

struct netpool {
	struct warm_net warm[LIMIT_WARM_NETWORKS];
	uint32_t n;
	struct warm_net pending;      /* the network being made */
	char subnet_text[20];
	struct rt_call call;
	bool active;                  /* call begun, not yet answered */
	bool orphan;                  /* pending's create lost its answer: the network may exist;
				       * it is removed (and its /28 kept) before the next fill */
	int64_t retry_at;             /* monotonic ms: no refill before */
	struct runtime *rt;
	struct idalloc *subnets;
};

void netpool_init(struct netpool *p, struct runtime *rt, uint32_t slot, struct idalloc *subnets);
/* Starts a warm network when the pool is short, unless hold (creates running, stopping). */
void netpool_fill(struct netpool *p, int64_t now, bool hold);
/* Takes a warm network for a create: true when there was one. */
bool netpool_take(struct netpool *p, struct warm_net *out);
/* Recovery: an unused managed network of ours joins the pool; false when it is full. */
bool netpool_keep(struct netpool *p, const char *name, const char *id, int32_t subnet);
/* The pool's call answered (the runtime sink's call_done for its slot). */
void netpool_done(struct netpool *p, int64_t now);
int64_t netpool_next_deadline(const struct netpool *p, int64_t now);
static inline bool netpool_busy(const struct netpool *p)
{
	return p->active;
}

#endif
