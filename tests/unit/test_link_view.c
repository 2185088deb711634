/* test_link_view.c: the fleet's view as agenticd keeps it (src/fleet/link_view.c), fed the
 * nodes' array the worker's own writer makes (fleet_snapshot_write) from records as etcd would
 * hold them: the next node of a fleet-wide E2B list goes by name, passes over the list's front
 * (it was first), a lost node and one without an address (but never this node, which needs
 * none), and starts at a node itself or just after it; a sandbox's owner is found with its
 * node's address. The list's pages themselves run against real nodes in
 * tests/fleet/test_fleet_e2b. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "fleet/etcd.h"
#include "fleet/link_view.h"
#include "fleet/wire.h"
#include "fleet_kv.h"

static struct etcd_kv nodes[8], alive[8];
static size_t nn, na;

/* node NAME, its address ("" for none); up: an alive key */
static void node(const char *name, const char *addr, bool up)
{
	char key[64], rec[256];

	snprintf(key, sizeof(key), "agentic/nodes/%s", name);
	if (addr[0])
		snprintf(rec, sizeof(rec), "{\"addr\":\"%s\",\"version\":\"x\",\"draining\":false,"
			 "\"slots\":8,\"slots_free\":8,\"placed\":0,\"runtimes\":[\"docker\"]}", addr);
	else
		snprintf(rec, sizeof(rec), "{\"version\":\"x\",\"draining\":false,\"slots\":8,"
			 "\"slots_free\":8,\"placed\":0,\"runtimes\":[\"docker\"]}");
	kv_add(nodes, &nn, key, rec, 42, 1);
	if (up) {
		snprintf(key, sizeof(key), "agentic/alive/%s", name);
		kv_add(alive, &na, key, "1", 42, 1);
	}
}

/* The worker's snapshot of the nodes, its array put in the view as link.c puts it. */
static void view_put(void)
{
	static char out[FLEET_SNAPSHOT_BYTES];
	static const char head[] = "{\"nodes\":";
	long n = fleet_snapshot_write(nodes, nn, alive, na, out, sizeof(out));

	assert_true(n > (long)sizeof(head));
	link_view_nodes_put(out + sizeof(head) - 1, (size_t)n - sizeof(head));
}

static int setup(void **state)
{
	(void)state;
	nn = na = 0;
	link_view_self("node-b");
	/* by name, as etcd's keys and so the worker's snapshot are: a, b (this node, no
	 * address), c (lost), d (no address), e */
	node("node-a", "127.0.0.1:7001", true);
	node("node-b", "", true);
	node("node-c", "127.0.0.1:7003", false);
	node("node-d", "", true);
	node("node-e", "127.0.0.1:7005", true);
	view_put();
	return 0;
}

static const char *next(const char *from, bool past, const char *skip)
{
	static char name[64];
	char addr[64];

	if (!fleet_link_node_next(from, past, skip, name, sizeof(name), addr, sizeof(addr)))
		return "(none)";
	if (strcmp(name, "node-a") == 0)
		assert_string_equal(addr, "127.0.0.1:7001");
	if (strcmp(name, "node-b") == 0)
		assert_string_equal(addr, "");
	return name;
}

static void test_order_and_passed_over(void **state)
{
	(void)state;
	/* a list begun at node-b: node-b's own pages, then the others by name, node-b passed */
	assert_string_equal(next("", false, "node-b"), "node-a");
	assert_string_equal(next("node-a", true, "node-b"), "node-e"); /* c lost, d no address */
	assert_string_equal(next("node-e", true, "node-b"), "(none)");
	/* a list begun at node-e: this node (no address) is listed, node-e is not again */
	assert_string_equal(next("node-a", true, "node-e"), "node-b");
	assert_string_equal(next("node-b", true, "node-e"), "(none)");
}

static void test_from_a_node_itself_or_after(void **state)
{
	(void)state;
	/* a token naming node-e: node-e itself; naming lost node-c: the next one there is */
	assert_string_equal(next("node-e", false, "node-a"), "node-e");
	assert_string_equal(next("node-c", false, "node-a"), "node-e");
	assert_string_equal(next("node-bb", false, "node-a"), "node-e");
	/* node-c back up: its page is read */
	nn = na = 0;
	node("node-c", "127.0.0.1:7003", true);
	view_put();
	assert_string_equal(next("node-c", false, "node-a"), "node-c");
	assert_string_equal(next("", false, "x"), "node-c");
}

static void test_no_view(void **state)
{
	(void)state;
	link_view_nodes_put("", 0);
	assert_string_equal(next("", false, "node-b"), "(none)");
}

static void test_owner(void **state)
{
	static const char sbs[] = "[{\"name\":\"web\",\"node\":\"node-a\",\"state\":\"ready\","
				  "\"tier\":\"T1\"},{\"name\":\"db\",\"node\":\"node-c\",\"state\":"
				  "\"lost\",\"tier\":\"T1\"},{\"name\":\"mine\",\"node\":\"node-b\","
				  "\"state\":\"ready\",\"tier\":\"T1\"},{\"name\":\"qq\",\"node\":\"node-d\","
				  "\"state\":\"ready\",\"tier\":\"T1\"}]";
	char node[64], addr[64];

	(void)state;
	link_view_sbs_put(sbs, sizeof(sbs) - 1, false);
	assert_int_equal(fleet_link_owner("web", node, sizeof(node), addr, sizeof(addr)), 1);
	assert_string_equal(node, "node-a");
	assert_string_equal(addr, "127.0.0.1:7001");
	assert_int_equal(fleet_link_owner("db", node, sizeof(node), addr, sizeof(addr)),
			 FLEET_OWNER_LOST);
	assert_int_equal(fleet_link_owner("qq", node, sizeof(node), addr, sizeof(addr)),
			 FLEET_OWNER_NO_ADDR);
	/* this node's own, and one the view has not: served here */
	assert_int_equal(fleet_link_owner("mine", node, sizeof(node), addr, sizeof(addr)), 0);
	assert_int_equal(fleet_link_owner("gone", node, sizeof(node), addr, sizeof(addr)), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_order_and_passed_over, setup),
		cmocka_unit_test_setup(test_from_a_node_itself_or_after, setup),
		cmocka_unit_test_setup(test_no_view, setup),
		cmocka_unit_test_setup(test_owner, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
