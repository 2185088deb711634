/* test_fleet_place.c: placement's choice (src/fleet/place.c, fleet_place_choose) from records
 * as etcd would hold them: the most free slots win; a lost, draining, runtime-less or
 * address-less node is no candidate; placements a node's record does not count yet hold its
 * slots; between equals the deciding node wins, else the hashed order, which spreads names
 * over equal nodes; a pin says why its node cannot take the create; a record that is not JSON
 * is no candidate, nor one whose address is not HOST:PORT's characters; a node whose record
 * lists its images whole is a candidate only for a create of one of them (the reference as the
 * engine lists its tags), one whose list is not whole or that has none for any. The
 * transaction itself runs against a real etcd in
 * tests/fleet/test_fleet_place. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "fleet/place.h"
#include "fleet_kv.h"

static struct etcd_kv nodes[8], alive[8], plc[8];
static size_t nn, na, np;

/* node NAME with its record's free slots, placed count and draining flag; up: an alive key
 * under a lease */
static void node(const char *name, int free_slots, int placed, bool draining, bool up)
{
	char key[64], rec[256];

	snprintf(key, sizeof(key), "agentic/nodes/%s", name);
	snprintf(rec, sizeof(rec), "{\"addr\":\"127.0.0.1:7%03d\",\"version\":\"x\",\"draining\":%s,"
		 "\"slots\":8,\"slots_free\":%d,\"placed\":%d,\"runtimes\":[\"docker\"]}",
		 (int)nn, draining ? "true" : "false", free_slots, placed);
	kv_add(nodes, &nn, key, rec, 0, 1);
	if (up) {
		snprintf(key, sizeof(key), "agentic/alive/%s", name);
		kv_add(alive, &na, key, "1", 42, 1);
	}
}

static void placements(const char *name, int n, int64_t rev)
{
	char key[64], v[32];

	snprintf(key, sizeof(key), "agentic/placements/%s", name);
	snprintf(v, sizeof(v), "{\"n\":%d}", n);
	kv_add(plc, &np, key, v, 0, rev);
}

static int setup(void **state)
{
	(void)state;
	nn = na = np = 0;
	return 0;
}

/* the choice for name from self, pinned to pin ("": none), runtime docker */
static bool pick(const char *self, const char *name, const char *pin, struct fleet_placed *out,
		 int64_t *count, int64_t *rev)
{
	struct fleet_place_req rq = { .self = self, .name = name, .pin = pin, .runtime = "docker" };

	memset(out, 0, sizeof(*out));
	return fleet_place_choose(&rq, nodes, nn, alive, na, plc, np, out, count, rev);
}

static void test_most_free_wins_and_pending_count(void **state)
{
	struct fleet_placed o;
	int64_t c, r;

	(void)state;
	node("node-a", 2, 0, false, true);
	node("node-b", 5, 3, false, true);
	node("node-c", 4, 0, false, true);
	assert_true(pick("node-a", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-b");
	assert_string_equal(o.addr, "127.0.0.1:7001");
	/* node-b has had 6 placements and its record counts 3 of them: 5 - 3 = 2 free */
	placements("node-b", 6, 77);
	assert_true(pick("node-a", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-c");
	assert_int_equal(c, 0);
	assert_int_equal(r, 0);
	/* its count and revision are what the transaction compares */
	placements("node-c", 9, 81);
	assert_true(pick("node-a", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-a"); /* c: 4 - (9 - 0) < 0; a: 2 beats b's 2 as itself */
	assert_int_equal(c, 0);
}

/* node NAME, up, with free slots and its record's images (JSON members, "" for none) */
static void imaged(const char *name, int free_slots, const char *images)
{
	char key[64], rec[512];

	snprintf(key, sizeof(key), "agentic/nodes/%s", name);
	snprintf(rec, sizeof(rec), "{\"addr\":\"127.0.0.1:7%03d\",\"slots_free\":%d,"
		 "\"runtimes\":[\"docker\"]%s}", (int)nn, free_slots, images);
	kv_add(nodes, &nn, key, rec, 0, 1);
	snprintf(key, sizeof(key), "agentic/alive/%s", name);
	kv_add(alive, &na, key, "1", 42, 1);
}

static bool pick_image(const char *image, const char *pin, struct fleet_placed *out)
{
	struct fleet_place_req rq = { .self = "node-z", .name = "web", .pin = pin,
				      .runtime = "docker", .image = image };
	int64_t c, r;

	memset(out, 0, sizeof(*out));
	return fleet_place_choose(&rq, nodes, nn, alive, na, plc, np, out, &c, &r);
}

static void test_images(void **state)
{
	/* an image, a pin, and the node chosen or (no node) the error */
	static const struct {
		const char *image, *pin, *node, *error;
	} c[] = {
		/* node-b has it: node-a's more free slots do not count */
		{ "busybox", "", "node-b", NULL },
		{ "docker.io/library/busybox:latest", "", "node-b", NULL },
		{ "alpine:3", "", "node-a", NULL },
		/* no node has it: said so, pinned or not */
		{ "alpine", "", NULL, "no_image" }, /* alpine:latest */
		{ "busybox:1", "node-b", NULL, "no_image" },
		{ "busybox", "node-a", NULL, "no_image" },
		/* by digest or id no record can say: the most free slots */
		{ "busybox@sha256:0123", "", "node-a", NULL },
		{ "sha256:0123", "", "node-a", NULL },
		{ "", "", "node-a", NULL },
	};
	struct fleet_placed o;

	(void)state;
	imaged("node-a", 9, ",\"images\":[\"agentic/base:local\",\"alpine:3\"]");
	imaged("node-b", 5, ",\"images\":[\"busybox:latest\"]");
	for (size_t i = 0; i < ARRAY_LEN(c); i++) {
		bool placed = pick_image(c[i].image, c[i].pin, &o);

		assert_int_equal(placed, c[i].node != NULL);
		assert_string_equal(placed ? o.node : o.error, placed ? c[i].node : c[i].error);
	}
	/* a list that is not whole, or none (an older node's record): it may have any */
	imaged("node-c", 2, ",\"images\":[],\"images_more\":true");
	assert_true(pick_image("alpine", "", &o));
	assert_string_equal(o.node, "node-c");
	imaged("node-d", 3, "");
	assert_true(pick_image("alpine", "", &o));
	assert_string_equal(o.node, "node-d");
}

static void test_candidates(void **state)
{
	struct fleet_placed o;
	int64_t c, r;
	char rec[] = "{\"addr\":\"\",\"slots_free\":7,\"runtimes\":[\"docker\"]}";

	(void)state;
	node("node-a", 3, 0, false, false);  /* lost */
	node("node-b", 6, 0, true, true);    /* draining */
	kv_add(nodes, &nn, "agentic/nodes/node-c", rec, 0, 1); /* no address */
	kv_add(alive, &na, "agentic/alive/node-c", "1", 42, 1);
	kv_add(nodes, &nn, "agentic/nodes/node-d", "{\"slots_free\":9,\"addr\":\"x:1\"}", 0, 1);
	kv_add(alive, &na, "agentic/alive/node-d", "1", 42, 1); /* no docker */
	kv_add(nodes, &nn, "agentic/nodes/node-e", "not json", 0, 1);
	kv_add(alive, &na, "agentic/alive/node-e", "1", 42, 1);
	kv_add(nodes, &nn, "agentic/nodes/node-f", "{\"slots_free\":9,\"addr\":\"x:1\",\"runtimes\":[\"docker\"]}", 0, 1);
	kv_add(alive, &na, "agentic/alive/node-f", "1", 0, 1); /* alive without a lease */
	assert_false(pick("node-z", "web", "", &o, &c, &r));
	assert_string_equal(o.error, "no_capacity");
	/* node-c is a candidate for itself: it needs no address to make its own */
	assert_true(pick("node-c", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-c");
	/* a pin says why */
	assert_false(pick("node-z", "web", "node-a", &o, &c, &r));
	assert_string_equal(o.error, "node_lost");
	assert_false(pick("node-z", "web", "node-b", &o, &c, &r));
	assert_string_equal(o.error, "node_draining");
	assert_false(pick("node-z", "web", "node-c", &o, &c, &r));
	assert_string_equal(o.error, "no_address");
	assert_false(pick("node-z", "web", "node-d", &o, &c, &r));
	assert_string_equal(o.error, "no_runtime");
	assert_false(pick("node-z", "web", "node-q", &o, &c, &r));
	assert_string_equal(o.error, "node_unknown");
	assert_false(pick("node-z", "web", "node-f", &o, &c, &r));
	assert_string_equal(o.error, "node_lost");
}

/* A record's address goes into the worker's answer as it is: one that is not HOST:PORT's
 * characters (a quote would write the answer's fields) makes the node address-less. */
static void test_address_checked(void **state)
{
	struct fleet_placed o;
	int64_t c, r;

	(void)state;
	kv_add(nodes, &nn, "agentic/nodes/node-h",
	       "{\"addr\":\"1.2.3.4:7\\\",\\\"seq\\\":1,\\\"x\\\":\\\"\",\"slots_free\":9,"
	       "\"runtimes\":[\"docker\"]}", 0, 1);
	kv_add(alive, &na, "agentic/alive/node-h", "1", 42, 1);
	node("node-g", 2, 0, false, true);
	assert_true(pick("node-z", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-g");
	assert_false(pick("node-z", "web", "node-h", &o, &c, &r));
	assert_string_equal(o.error, "no_address");
	/* an IPv6 literal is an address */
	nn = na = 0;
	kv_add(nodes, &nn, "agentic/nodes/node-v6",
	       "{\"addr\":\"[::1]:7001\",\"slots_free\":3,\"runtimes\":[\"docker\"]}", 0, 1);
	kv_add(alive, &na, "agentic/alive/node-v6", "1", 42, 1);
	assert_true(pick("node-z", "web", "", &o, &c, &r));
	assert_string_equal(o.addr, "[::1]:7001");
}

static void test_ties(void **state)
{
	struct fleet_placed o;
	int64_t c, r;
	int on[3] = { 0, 0, 0 };
	char name[32];

	(void)state;
	node("node-a", 4, 0, false, true);
	node("node-b", 4, 0, false, true);
	node("node-c", 4, 0, false, true);
	assert_true(pick("node-b", "web", "", &o, &c, &r));
	assert_string_equal(o.node, "node-b");
	/* from a node that is none of them, equal nodes share the names */
	for (int i = 0; i < 60; i++) {
		snprintf(name, sizeof(name), "sb-%d", i);
		assert_true(pick("node-z", name, "", &o, &c, &r));
		on[o.node[5] - 'a']++;
	}
	assert_true(on[0] >= 5 && on[1] >= 5 && on[2] >= 5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_most_free_wins_and_pending_count, setup),
		cmocka_unit_test_setup(test_candidates, setup),
		cmocka_unit_test_setup(test_images, setup),
		cmocka_unit_test_setup(test_ties, setup),
		cmocka_unit_test_setup(test_address_checked, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
