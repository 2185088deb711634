/* recover.h: start-up: the sandbox table, the uid map and the subnet map rebuilt from the
 * runtime (its objects and their labels) and the agentshare records; what a crash left half
 * done settled. */
#ifndef AGENTIC_MGMT_RECOVER_H
#define AGENTIC_MGMT_RECOVER_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/runtime.h"

struct config;
struct netpool;

/* What recovery is handed at start: the config (the records' root) and the warm pool (it
 * keeps the unused warm networks it finds). */
void recover_init(const struct config *cfg, struct netpool *pool);
/* Rebuilds the table through rt's synchronous calls: 0, or an error (err says which) that
 * stops the start. The table must be empty (every slot LC_FREE). */
int recover_state(struct runtime *rt, char *err, size_t err_size);
/* What recover_state allocates (and frees) before the allocator is sealed. */
size_t recover_scratch_bytes(uint32_t nsb);

#endif
