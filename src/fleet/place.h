/* place.h: placement, run by the fleet worker for its agenticd (docs/FLEET.md "Placement"):
 * the node that fits a create, chosen from etcd's records as they are now and claimed by one
 * transaction on the sandbox's name and on that node's placement count; and the release of a
 * placed name once its sandbox is gone. */
#ifndef AGENTIC_FLEET_PLACE_H
#define AGENTIC_FLEET_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet/etcd.h"
#include "fleet/wire.h"

/* What a create asks of placement. */
struct fleet_place_req {
	const char *self;    /* the deciding node: preferred between equals (no relay) */
	const char *name;    /* the sandbox's name, valid (fleet_sandbox_name_ok) */
	const char *pin;     /* "": any node; else only this one */
	const char *runtime; /* "docker" or "vm": a node's record must list it */
	const char *image;   /* NULL or "": any; else a node's record must list it, or not all
			      * of its images */
};

/* Where it went: node, its address (fleet_advertise) and the placement's number; or error, a
 * word: name_taken, no_capacity, node_unknown, node_lost, node_draining, no_runtime, no_image,
 * no_address (another node that advertises none), contention (ATTEMPTS deciders at once won every time). */
struct fleet_placed {
	char node[FLEET_NODE_NAME_MAX + 1];
	char addr[64];
	int64_t seq;
	int attempts;        /* transactions it took */
	const char *error;   /* NULL: placed */
};

/* Chooses from the nodes' records and alive keys (the worker's view, which its watch keeps)
 * and the placement counts it reads, and claims: 0 with out filled (placed, or why not), or
 * an etcd error (nothing claimed). Among the candidates (alive, not draining, the runtime, the
 * image, a free slot) the most free slots win. A record a moment old is safe: its free slots count
 * the placements up to the one it names ("placed"), and the counts read now say how many
 * came after. nodes and alive may change during the calls (the watch's events); they are
 * read only between them. */
int fleet_place(const struct fleet_place_req *rq, const struct etcd_kv *nodes, const size_t *nn,
		const struct etcd_kv *alive, const size_t *na, struct fleet_placed *out);

/* The choice alone, from what was read (nodes, alive keys, placement counts): true with out's
 * node and addr, and that node's placement count and its key's mod revision; false with
 * out->error saying why none. */
bool fleet_place_choose(const struct fleet_place_req *rq, const struct etcd_kv *nodes, size_t nn,
			const struct etcd_kv *alive, size_t na, const struct etcd_kv *plc, size_t np,
			struct fleet_placed *out, int64_t *count, int64_t *rev);

/* agentic/names/NAME deleted when it names self: 1, 0 (it names another or is gone), or an etcd
 * error. */
int fleet_name_release(const char *self, const char *name);

/* Names placed on self that held() says no sandbox of self has, released once two sweeps
 * FLEET_SWEEP_MS apart found them so (a create that never came, or failed here). scratch holds
 * cap pairs for the read. 0, or an etcd error. */
#define FLEET_SWEEP_MS 30000
#define FLEET_SWEEP_SUSPECTS 64
int fleet_names_sweep(const char *self, bool (*held)(const char *name), int64_t now,
		      struct etcd_kv *scratch, size_t cap);

#endif
