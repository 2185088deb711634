/* link_place.c: what the front ends that place creates (admin_create.c, e2b_api.c) share of
 * placement (docs/FLEET.md "Placement"): the header a placed create is relayed with, the
 * fields its head is written again without, and what each of placement's refusals tells the
 * client. Part of fleet-link; calls only sandbox's name check. */
#include <stdio.h>
#include <string.h>

#include "fleet/link.h"
#include "sandbox/reqcheck.h"

/* the relay writes its own framing, a placement of its own and no API key */
const char *const fleet_placed_drop[] = { "expect", "content-length", "transfer-encoding",
					  "connection", FLEET_PLACEMENT_HEADER, "x-api-key", NULL };

static const struct {
	const char *word;
	int status;
	const char *message;
} refusals[] = {
	{ "name_taken", 409, "another create took that name in the fleet" },
	{ "no_capacity", 503, "no node of the fleet has a free sandbox slot for it" },
	{ "node_unknown", 404, "no node of the fleet has that name" },
	{ "node_lost", 503, "that node is lost (its lease ran out)" },
	{ "node_draining", 409, "that node is draining: it takes no new sandboxes" },
	{ "no_runtime", 422, "no node that could take it has its runtime" },
	{ "no_image", 422, "no node that could take it has its image in its engine (each node's "
			   "record lists its images: load it into one)" },
	{ "no_address", 503, "that node advertises no address (fleet_advertise): no relay reaches it" },
	{ "contention", 503, "too many creates at once chose the same nodes: try again" },
};

const char *fleet_place_refusal(const char *word, int *status)
{
	for (size_t i = 0; i < ARRAY_LEN(refusals); i++)
		if (strcmp(word, refusals[i].word) == 0) {
			*status = refusals[i].status;
			return refusals[i].message;
		}
	*status = 503;
	return NULL;
}

int fleet_placement_parse(const char *h, long long *seq, char *name, size_t cap)
{
	char n[64];

	if (!h || sscanf(h, "%lld %63s", seq, n) != 2 || *seq <= 0 || !policy_name_valid(n) ||
	    strlen(n) >= cap)
		return -1;
	memcpy(name, n, strlen(n) + 1);
	return 0;
}
