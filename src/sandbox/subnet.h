/* subnet.h: the subnet pool (sandbox_subnet_pool, cut into /28s): the map of the /28s taken,
 * the foreign ones (another network covers them), and a /28 as text and back. Its storage is
 * taken by agenticd.c from its region at start (subnet_init). */
#ifndef AGENTIC_MGMT_SUBNET_H
#define AGENTIC_MGMT_SUBNET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "config/config.h"

/* The /28s of the pool in cfg (1 << (28 - subnet_pool_prefix) of them), their map in bits
 * and the foreign ones in foreign_bits, each (count + 63) / 64 words; all free. */
void subnet_init(const struct config *cfg, uint64_t *bits, uint64_t *foreign_bits);
/* Every /28 free again, none foreign (sandbox_table_reset). */
void subnet_reset(void);
/* The map of taken /28s, for whoever takes or marks one (the sandboxes, netpool, recovery). */
struct idalloc *subnet_map(void);
void subnet_text(int32_t index, char *out, size_t size);
int32_t subnet_index(const char *cidr); /* -1 when not a /28 of the pool */
/* The pool's /28s an IPv4 CIDR overlaps, as [*first, *first + *count); -ENOENT when none
 * (another family, another range), -EINVAL when it is no CIDR. */
int subnet_span(const char *cidr, uint32_t *first, uint32_t *count);
/* Reading the engine's networks again: every foreign /28 is given back, then
 * subnet_foreign_add (a runtime's each_subnet callback) takes what each network not ours
 * covers and no sandbox holds; a NULL cidr (a fresh reading begins) clears them first. */
void subnet_foreign_clear(void);
int subnet_foreign_add(void *ctx, const char *cidr, bool ours);
uint32_t subnet_foreign_count(void);  /* /28s taken as foreign */
/* The engine refused a /28 we hold as overlapping another network: it stays taken, as
 * foreign. */
void subnet_refused(uint32_t index);

#endif
