/* place.c: placement, in the fleet worker (docs/FLEET.md "Placement"). A create that names no
 * node goes to the node that fits, decided here for whichever node received it and made
 * atomic in etcd by one transaction:
 * - agentic/names/NAME must not exist (its create revision 0): two creates cannot take one
 *   name, wherever they were received;
 * - agentic/placements/NODE must be as it was read (its mod revision): two deciders that chose
 *   one node at once cannot both count on the same free slot; the second reads again.
 * Then agentic/names/NAME = NODE and agentic/placements/NODE = {"n": N+1}, N+1 being the
 * placement's number, which the owner admits when the create reaches it and echoes in its
 * record ("placed"). A node's free slots for placement are then its record's slots_free less
 * the placements it has not admitted yet: those made since its record was written.
 *
 * Owns: nothing between calls but the sweep's suspects (and the counts last read, scratch).
 * Calls: the etcd client and the fleet's wire format. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"
#include "fleet/place.h"
#include "json/json.h"

#define ATTEMPTS 8
/* a record's tokens: a 1 KiB record (FLEET_RECORD_BYTES) has fewer, its images included */
#define TOKENS 384
#define ADDR_CHARS "0123456789abcdefABCDEF.:[]"

static struct etcd_kv counts[FLEET_NODES_MAX]; /* agentic/placements/, as last read */

/* The placement count of node among plc's n, and its key's mod revision (0, 0: none yet). */
static void count_of(const struct etcd_kv *plc, const char *node, size_t n, int64_t *count,
		     int64_t *rev)
{
	*count = *rev = 0;
	for (size_t i = 0; i < n; i++) {
		const char *k = fleet_key_node(&plc[i], FLEET_PLACEMENTS_PREFIX);
		char v[32];
		long long c;

		if (!k || strcmp(k, node) != 0 || plc[i].value_len >= sizeof(v))
			continue;
		memcpy(v, plc[i].value, plc[i].value_len);
		v[plc[i].value_len] = '\0';
		*rev = plc[i].mod_revision;
		if (sscanf(v, "{\"n\":%lld}", &c) == 1 && c >= 0)
			*count = c;
	}
}

/* A create's image as the engine lists its tags, into out: "alpine" is "alpine:latest", and
 * "docker.io/library/alpine:3" is "alpine:3". "" for one named by digest or id (sha256:...),
 * which no record lists: placement then counts on no node's images. */
static void image_ref(const char *image, char *out, size_t cap)
{
	const char *slash;

	out[0] = '\0';
	if (!image || !image[0] || strchr(image, '@') || strncmp(image, "sha256:", 7) == 0 ||
	    strlen(image) + 8 > cap)
		return;
	if (strncmp(image, "docker.io/", 10) == 0)
		image += strncmp(image, "docker.io/library/", 18) == 0 ? 18 : 10;
	slash = strrchr(image, '/');
	snprintf(out, cap, "%s%s", image, strchr(slash ? slash : image, ':') ? "" : ":latest");
}

/* Whether a record may have the image (image_ref's): it lists it, or its list is not whole
 * ("images_more"), or it has none (a record of an agentic before images were listed). */
static bool has_image(const struct json_doc *d, const char *image)
{
	int arr = json_obj_get(d, 0, "images"), i;
	bool more = false;

	if (!image[0] || arr < 0 || d->tok[arr].type != JSON_ARRAY ||
	    ((i = json_obj_get(d, 0, "images_more")) >= 0 && json_bool(d, i, &more) == 0 && more))
		return true;
	for (i = json_first(d, arr); i >= 0; i = json_next(d, arr, i))
		if (json_str_eq(d, i, image))
			return true;
	return false;
}

/* What a node's record says placement needs: -1 when it is no candidate (not a JSON object),
 * -2 draining, -3 without the runtime, -4 without the image, else its free slots by its
 * record, and addr and placed. */
static int64_t record_free(const struct etcd_kv *kv, const char *runtime, const char *image,
			   char *addr, size_t acap, int64_t *placed)
{
	struct json_token tok[TOKENS];
	struct json_doc d;
	bool draining = false, has = false;
	int64_t free_slots = 0;
	int i, arr;

	*placed = 0;
	addr[0] = '\0';
	if (json_parse(&d, kv->value, kv->value_len, tok, TOKENS) != 0 || tok[0].type != JSON_OBJECT)
		return -1;
	if ((i = json_obj_get(&d, 0, "draining")) >= 0 && json_bool(&d, i, &draining) == 0 && draining)
		return -2;
	if ((i = json_obj_get(&d, 0, "slots_free")) < 0 || json_int(&d, i, &free_slots) != 0)
		return -1;
	if ((i = json_obj_get(&d, 0, "placed")) >= 0 && (json_int(&d, i, placed) != 0 || *placed < 0))
		*placed = 0;
	/* HOST:PORT's characters or none: the address goes into the answer's JSON as it is, and
	 * a node's record is that node's word (a quote in it would write the answer's fields) */
	if ((i = json_obj_get(&d, 0, "addr")) >= 0 && (json_str(&d, i, addr, acap) < 0 ||
						      addr[strspn(addr, ADDR_CHARS)] != '\0'))
		addr[0] = '\0';
	if ((arr = json_obj_get(&d, 0, "runtimes")) >= 0 && d.tok[arr].type == JSON_ARRAY)
		for (i = json_first(&d, arr); i >= 0; i = json_next(&d, arr, i))
			has |= json_str_eq(&d, i, runtime);
	return !has ? -3 : !has_image(&d, image) ? -4 : free_slots;
}

/* A tie's order: a hash of the sandbox's and the node's names, so that creates at once spread
 * over equal nodes rather than all meeting on the first. */
static uint32_t tie(const char *name, const char *node)
{
	uint32_t h = 2166136261u;

	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (const char *p = node; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return h;
}

bool fleet_place_choose(const struct fleet_place_req *rq, const struct etcd_kv *nodes, size_t nn,
			const struct etcd_kv *alive, size_t na, const struct etcd_kv *plc, size_t np,
			struct fleet_placed *out, int64_t *count, int64_t *rev)
{
	static const char *const refusal[] = { "", "no_runtime", "node_draining", "no_runtime",
					       "no_image" };
	int64_t best = 0;
	uint32_t best_tie = 0;
	bool found = false, imaged = false, asked = false;
	char image[256];

	image_ref(rq->image, image, sizeof(image));
	out->error = rq->pin[0] ? "node_unknown" : "no_capacity";
	for (size_t i = 0; i < nn; i++) {
		const char *node = fleet_key_node(&nodes[i], FLEET_NODES_PREFIX);
		char addr[64];
		int64_t placed, c, r, f;
		uint32_t t;
		bool self_new, self_cur;

		if (!node || (rq->pin[0] && strcmp(node, rq->pin) != 0))
			continue;
		if (!fleet_node_alive(node, alive, na)) {
			if (rq->pin[0])
				out->error = "node_lost";
			continue;
		}
		f = record_free(&nodes[i], rq->runtime, image, addr, sizeof(addr), &placed);
		asked |= f != -1 && f != -2;
		imaged |= f != -1 && f != -2 && f != -4;
		if (f < 0) {
			if (rq->pin[0])
				out->error = refusal[-f];
			continue;
		}
		if (!addr[0] && strcmp(node, rq->self) != 0) {
			if (rq->pin[0])
				out->error = "no_address"; /* no relay could reach it */
			continue;
		}
		count_of(plc, node, np, &c, &r);
		/* placements made since its record was written hold slots it does not count yet */
		if (c > placed)
			f -= c - placed;
		if (f <= 0) {
			if (rq->pin[0])
				out->error = "no_capacity";
			continue;
		}
		/* the most free slots; between equals this node (no relay), else the tie's order */
		t = tie(rq->name, node);
		self_new = strcmp(node, rq->self) == 0;
		self_cur = found && strcmp(out->node, rq->self) == 0;
		if (found && !(f > best || (f == best && (self_new || (!self_cur && t < best_tie)))))
			continue;
		found = true;
		best = f;
		best_tie = t;
		snprintf(out->node, sizeof(out->node), "%s", node);
		snprintf(out->addr, sizeof(out->addr), "%s", addr);
		*count = c;
		*rev = r;
	}
	if (found)
		out->error = NULL;
	else if (!rq->pin[0] && asked && !imaged)
		out->error = "no_image"; /* no node that is up and takes creates has it */
	return found;
}

/* Reads a prefix into kv: how many, or a negative error. */
static int read_prefix(const char *prefix, struct etcd_kv *kv, size_t max)
{
	char end[ETCD_KEY_BYTES];
	bool more;

	etcd_prefix_end(prefix, end);
	return etcd_range(prefix, end, kv, max, &more, NULL);
}

int fleet_place(const struct fleet_place_req *rq, const struct etcd_kv *nodes, const size_t *nn,
		const struct etcd_kv *alive, const size_t *na, struct fleet_placed *out)
{
	char name_key[ETCD_KEY_BYTES], plc_key[ETCD_KEY_BYTES], val[32];
	struct etcd_kv one;

	memset(out, 0, sizeof(*out));
	snprintf(name_key, sizeof(name_key), "%s%s", FLEET_NAMES_PREFIX, rq->name);
	for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
		int np = read_prefix(FLEET_PLACEMENTS_PREFIX, counts, FLEET_NODES_MAX), r, vlen;
		int64_t count = 0, rev = 0;
		bool more;

		if (np < 0)
			return np;
		if (!fleet_place_choose(rq, nodes, *nn, alive, *na, counts, (size_t)np, out, &count, &rev))
			return 0;
		snprintf(plc_key, sizeof(plc_key), "%s%s", FLEET_PLACEMENTS_PREFIX, out->node);
		vlen = snprintf(val, sizeof(val), "{\"n\":%lld}", (long long)(count + 1));
		r = etcd_txn((const struct etcd_cmp[]){
				     { .key = name_key, .target = ETCD_CMP_CREATE, .rev = 0 },
				     { .key = plc_key, .target = ETCD_CMP_MOD, .rev = rev } }, 2,
			     (const struct etcd_op[]){
				     { .key = name_key, .value = out->node, .len = strlen(out->node) },
				     { .key = plc_key, .value = val, .len = (size_t)vlen } }, 2);
		if (r < 0)
			return r;
		if (r == 1) {
			out->seq = count + 1;
			out->attempts = attempt + 1;
			return 0;
		}
		/* a compare failed: the name is taken, or another decider placed on that node */
		if ((r = etcd_range(name_key, NULL, &one, 1, &more, NULL)) < 0)
			return r;
		if (r > 0) {
			out->error = "name_taken";
			return 0;
		}
	}
	out->error = "contention";
	return 0;
}

int fleet_name_release(const char *self, const char *name)
{
	char key[ETCD_KEY_BYTES];

	snprintf(key, sizeof(key), "%s%s", FLEET_NAMES_PREFIX, name);
	return etcd_txn((const struct etcd_cmp[]){ { .key = key, .target = ETCD_CMP_VALUE,
						     .value = self, .len = strlen(self) } }, 1,
			(const struct etcd_op[]){ { .key = key } }, 1);
}

/* Names placed on this node that none of its sandboxes has: a placement whose create never
 * came (its decider went, or the relay failed) or failed here. Each is released when two
 * sweeps FLEET_SWEEP_MS apart both found it so. */
static struct {
	char name[64];
	int64_t since;
} suspects[FLEET_SWEEP_SUSPECTS];

int fleet_names_sweep(const char *self, bool (*held)(const char *name), int64_t now,
		      struct etcd_kv *scratch, size_t cap)
{
	size_t plen = strlen(FLEET_NAMES_PREFIX), slen = strlen(self);
	int n = read_prefix(FLEET_NAMES_PREFIX, scratch, cap);
	bool seen[FLEET_SWEEP_SUSPECTS] = { false };

	if (n < 0)
		return n;
	for (int i = 0; i < n; i++) {
		const char *name = scratch[i].key + plen;
		int at = -1, free_at = -1, r;

		if (scratch[i].key_len <= plen || scratch[i].value_len != slen ||
		    memcmp(scratch[i].value, self, slen) != 0 || strlen(name) >= 64 || held(name))
			continue;
		for (int k = 0; k < FLEET_SWEEP_SUSPECTS; k++) {
			if (suspects[k].name[0] && strcmp(suspects[k].name, name) == 0)
				at = k;
			else if (!suspects[k].name[0] && free_at < 0)
				free_at = k;
		}
		if (at < 0) {
			if (free_at >= 0) {
				snprintf(suspects[free_at].name, sizeof(suspects[free_at].name), "%s", name);
				suspects[free_at].since = now;
				seen[free_at] = true;
			}
			continue;
		}
		seen[at] = true;
		if (now - suspects[at].since < FLEET_SWEEP_MS)
			continue;
		if ((r = fleet_name_release(self, name)) < 0)
			return r;
		log_info("fleet name released", "node=%s name=%s reason=%s", log_q(self),
			 log_q(name), log_q("no_sandbox_here"));
		seen[at] = false;
	}
	for (int k = 0; k < FLEET_SWEEP_SUSPECTS; k++)
		if (!seen[k])
			suspects[k].name[0] = '\0';
	return 0;
}
