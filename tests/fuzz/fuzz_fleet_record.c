/* fuzz_fleet_record.c: any bytes as the key and value another node wrote under
 * agentic/nodes/ (src/fleet/wire.c, fleet_snapshot_write): the first byte splits the input into
 * a key's last part and the record. It never crashes; the snapshot is a JSON document that
 * names a node only as the key did (and only a valid node name), with a state that is up,
 * draining or lost by the alive key alone, and with no byte outside printable ASCII in any
 * string (the CLI prints them on a terminal). The same record before placement
 * (src/fleet/place.c, fleet_place_choose, a create of an image): never a crash, and a node
 * chosen only as the key named it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fleet/place.h"
#include "fleet/wire.h"
#include "json/json.h"

static struct etcd_kv kv, alive;
static char out[FLEET_SNAPSHOT_BYTES];
static struct json_token tok[512];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t split, klen, na;
	struct json_doc d;
	long n;

	if (size < 1)
		return 0;
	split = data[0] % 32;
	na = data[0] >> 7; /* its alive key there or not */
	data++;
	size--;
	klen = split < size ? split : size;
	memset(&kv, 0, sizeof(kv));
	memcpy(kv.key, FLEET_NODES_PREFIX, strlen(FLEET_NODES_PREFIX));
	memcpy(kv.key + strlen(FLEET_NODES_PREFIX), data, klen);
	kv.key_len = strlen(FLEET_NODES_PREFIX) + klen;
	kv.value_len = size - klen < sizeof(kv.value) ? size - klen : sizeof(kv.value);
	memcpy(kv.value, data + klen, kv.value_len);
	memset(&alive, 0, sizeof(alive));
	memcpy(alive.key, FLEET_ALIVE_PREFIX, strlen(FLEET_ALIVE_PREFIX));
	memcpy(alive.key + strlen(FLEET_ALIVE_PREFIX), data, klen);
	alive.key_len = strlen(FLEET_ALIVE_PREFIX) + klen;
	alive.lease = 1;
	n = fleet_snapshot_write(&kv, 1, &alive, na, out, sizeof(out));
	if (n < 0)
		abort(); /* one record always fits */
	if (json_parse(&d, out, (size_t)n, tok, 512) != 0)
		abort();
	for (long i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || (unsigned char)out[i] > 0x7e)
			abort();
	{
		struct fleet_place_req rq = { .self = "self", .name = "web", .pin = "",
					      .runtime = "docker", .image = "busybox" };
		struct fleet_placed p;
		int64_t c, r;

		memset(&p, 0, sizeof(p));
		if (fleet_place_choose(&rq, &kv, 1, &alive, na, NULL, 0, &p, &c, &r) &&
		    (strlen(p.node) != klen || memcmp(p.node, data, klen) != 0))
			abort();
	}
	if (memmem(out, (size_t)n, "\"node\":", 7)) {
		/* the one node listed is the key's, and the key named a valid node */
		if (!fleet_node_name_ok((const char *)data, klen) || klen == 0)
			abort();
	}
	return 0;
}
