/* test_fleet_wire.c: the packets between agenticd and its fleet worker (src/fleet/wire.c):
 * node names as etcd keys and certificate names allow them, the settings packet both ways and
 * its bounds, and the fleet's snapshot built from what other nodes wrote: a node's name comes
 * from its key never from its record, a record that claims a state, another node's name,
 * unknown fields, oversized strings or negative counts gets none of them through, a record that
 * is not a JSON object is left out, and a node without its alive key is lost. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/base.h"
#include "fleet/wire.h"

static void kv_set(struct etcd_kv *kv, const char *key, const char *value)
{
	memset(kv, 0, sizeof(*kv));
	snprintf(kv->key, sizeof(kv->key), "%s", key);
	kv->key_len = strlen(kv->key);
	kv->value_len = strlen(value);
	memcpy(kv->value, value, kv->value_len);
}

static void test_fleet_node_names(void **state)
{
	(void)state;
	assert_true(fleet_node_name_ok("node-a", 6));
	assert_true(fleet_node_name_ok("n0", 2));
	assert_false(fleet_node_name_ok("", 0));
	assert_false(fleet_node_name_ok("-node", 5));
	assert_false(fleet_node_name_ok("node-", 5));
	assert_false(fleet_node_name_ok("Node", 4));
	assert_false(fleet_node_name_ok("node/b", 6));
	assert_false(fleet_node_name_ok("node.b", 6));
	assert_true(fleet_node_name_ok("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 63));
	assert_false(fleet_node_name_ok("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 64));
}

static void test_fleet_settings_round_trip(void **state)
{
	struct fleet_settings s = { .endpoints = "127.0.0.1:2379,[::1]:2379", .server_name = "etcd",
				    .ca_file = "/etc/agentic/fleet/ca.crt",
				    .cert_file = "/etc/agentic/fleet/node.crt",
				    .key_file = "/etc/agentic/fleet/node.key", .node = "node-a",
				    .lease_s = 10, .uid = 199998 };
	struct fleet_settings back;
	char pkt[FLEET_SETTINGS_BYTES];
	long n;

	(void)state;
	n = fleet_settings_write(&s, pkt, sizeof(pkt));
	assert_true(n > 0);
	assert_int_equal(fleet_settings_parse(pkt, (size_t)n, &back), 0);
	assert_string_equal(back.endpoints, s.endpoints);
	assert_string_equal(back.node, "node-a");
	assert_string_equal(back.key_file, s.key_file);
	assert_int_equal(back.lease_s, 10);
}

static void test_fleet_settings_refused(void **state)
{
	struct fleet_settings s;
	static const char *bad[] = {
		"{}",
		"[1]",
		"{\"endpoints\":\"a:1\",\"server_name\":\"etcd\",\"ca_file\":\"/c\",\"cert_file\":\"/d\","
		"\"key_file\":\"/k\",\"node\":\"Node_A\",\"lease_s\":10,\"uid\":199998}",
		"{\"endpoints\":\"a:1\",\"server_name\":\"etcd\",\"ca_file\":\"/c\",\"cert_file\":\"/d\","
		"\"key_file\":\"/k\",\"node\":\"node-a\",\"lease_s\":1,\"uid\":199998}",
		"{\"endpoints\":\"a:1\",\"server_name\":\"etcd\",\"ca_file\":\"/c\",\"cert_file\":\"/d\","
		"\"key_file\":\"/k\",\"node\":\"node-a\"}",
		"{\"endpoints\":\"a:1\",\"server_name\":\"etcd\",\"ca_file\":\"/c\",\"cert_file\":\"/d\","
		"\"key_file\":\"/k\",\"node\":\"node-a\",\"lease_s\":10,\"uid\":0}",
		"{\"endpoints\":\"\",\"server_name\":\"etcd\",\"ca_file\":\"/c\",\"cert_file\":\"/d\","
		"\"key_file\":\"/k\",\"node\":\"node-a\",\"lease_s\":10,\"uid\":199998}",
	};
	const char *good = "{\"endpoints\":\"a:1\",\"server_name\":\"etcd\",\"ca_file\":\"/c\","
			   "\"cert_file\":\"/d\",\"key_file\":\"/k\",\"node\":\"node-a\",\"lease_s\":10,\"uid\":199998}";

	(void)state;
	assert_int_equal(fleet_settings_parse(good, strlen(good), &s), 0); /* the control */
	for (size_t i = 0; i < ARRAY_LEN(bad); i++)
		assert_int_equal(fleet_settings_parse(bad[i], strlen(bad[i]), &s), ERR_PARSE);
}

static void test_fleet_snapshot_states_and_names(void **state)
{
	static struct etcd_kv nodes[4], alive[2];
	char out[FLEET_SNAPSHOT_BYTES];
	long n;

	(void)state;
	kv_set(&nodes[0], "agentic/nodes/node-a",
	       "{\"addr\":\"10.0.0.1:7000\",\"version\":\"0.1.0\",\"draining\":false,\"slots\":8,"
	       "\"slots_free\":3,\"runtimes\":[\"docker\"]}");
	kv_set(&nodes[1], "agentic/nodes/node-b", "{\"draining\":true,\"slots\":4}");
	kv_set(&nodes[2], "agentic/nodes/node-c", "{\"slots\":2}");
	kv_set(&nodes[3], "agentic/nodes/Bad_Name", "{\"slots\":2}");
	kv_set(&alive[0], "agentic/alive/node-a", "1");
	kv_set(&alive[1], "agentic/alive/node-b", "1");
	alive[0].lease = alive[1].lease = 7;
	n = fleet_snapshot_write(nodes, 4, alive, 2, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "{\"node\":\"node-a\",\"state\":\"up\",\"addr\":\"10.0.0.1:7000\","
				    "\"version\":\"0.1.0\",\"draining\":false,\"slots\":8,"
				    "\"slots_free\":3,\"runtimes\":[\"docker\"]}"));
	assert_non_null(strstr(out, "{\"node\":\"node-b\",\"state\":\"draining\""));
	assert_non_null(strstr(out, "{\"node\":\"node-c\",\"state\":\"lost\""));
	assert_null(strstr(out, "Bad_Name"));
}

/* A record as long as a node writes (FLEET_RECORD_BYTES), most of it images, is in the view. */
static void test_fleet_snapshot_many_images(void **state)
{
	static struct etcd_kv nodes[1], alive[1];
	char out[FLEET_SNAPSHOT_BYTES], rec[FLEET_RECORD_BYTES];
	size_t len;
	long n;

	(void)state;
	len = (size_t)snprintf(rec, sizeof(rec), "{\"addr\":\"h:1\",\"slots\":5,\"runtimes\":"
			       "[\"docker\"],\"images\":[");
	while (len + 16 < sizeof(rec))
		len += (size_t)snprintf(rec + len, sizeof(rec) - len, "%s\"i:%u\"",
					rec[len - 1] == '[' ? "" : ",", (unsigned)len % 100);
	snprintf(rec + len, sizeof(rec) - len, "]}");
	kv_set(&nodes[0], "agentic/nodes/node-a", rec);
	kv_set(&alive[0], "agentic/alive/node-a", "1");
	alive[0].lease = 7;
	n = fleet_snapshot_write(nodes, 1, alive, 1, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_non_null(strstr(out, "{\"node\":\"node-a\",\"state\":\"up\",\"addr\":\"h:1\""));
}

/* A node writes its own record: what a hostile one puts there reaches no other node's view
 * but as the checked fields of its own entry. */
static void test_fleet_snapshot_hostile_record(void **state)
{
	static struct etcd_kv nodes[3], alive[1];
	char out[FLEET_SNAPSHOT_BYTES], big[300];
	char rec[ETCD_VALUE_BYTES];
	long n;

	(void)state;
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	snprintf(rec, sizeof(rec),
		 "{\"node\":\"node-b\",\"state\":\"up\",\"addr\":\"%s\",\"version\":7,"
		 "\"slots\":-5,\"slots_free\":99999999999,\"runtimes\":[\"docker\",\"vm\",\"a\","
		 "\"b\",\"c\",\"d\"],\"secret\":\"s3cr3t\",\"draining\":\"yes\"}", big);
	kv_set(&nodes[0], "agentic/nodes/node-a", rec);
	kv_set(&nodes[1], "agentic/nodes/node-d", "[\"not an object\"]");
	kv_set(&nodes[2], "agentic/nodes/node-e", "{\"slots\":");
	n = fleet_snapshot_write(nodes, 3, alive, 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	/* its name from its key, its state from the alive keys (none: lost) */
	assert_non_null(strstr(out, "{\"node\":\"node-a\",\"state\":\"lost\",\"draining\":false,"
				    "\"runtimes\":[\"docker\",\"vm\",\"a\",\"b\"]}"));
	assert_null(strstr(out, "node-b"));
	assert_null(strstr(out, "s3cr3t"));
	assert_null(strstr(out, "xxxxxxxx"));
	assert_null(strstr(out, "node-d"));
	assert_null(strstr(out, "node-e"));
	/* the positive control: the same fields in range go through */
	kv_set(&nodes[0], "agentic/nodes/node-a", "{\"addr\":\"h:1\",\"slots\":5}");
	n = fleet_snapshot_write(nodes, 1, alive, 0, out, sizeof(out));
	out[n] = '\0';
	assert_non_null(strstr(out, "\"addr\":\"h:1\""));
	assert_non_null(strstr(out, "\"slots\":5"));
}

/* A node's strings reach `agentic fleet ls` on an operator's terminal: no control byte (an
 * escape sequence is a command to the terminal) and nothing past ASCII gets through. */
static void test_fleet_snapshot_no_terminal_escapes(void **state)
{
	static struct etcd_kv nodes[1];
	char out[FLEET_SNAPSHOT_BYTES];
	long n;

	(void)state;
	kv_set(&nodes[0], "agentic/nodes/node-a",
	       "{\"addr\":\"\\u001b]0;owned\\u0007h:1\",\"version\":\"1.0 \\u009b2J\","
	       "\"runtimes\":[\"docker\\r\",\"vm\"]}");
	n = fleet_snapshot_write(nodes, 1, NULL, 0, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_null(strstr(out, "owned"));
	assert_null(strstr(out, "2J"));
	assert_null(strstr(out, "\\u"));
	assert_non_null(strstr(out, "\"runtimes\":[\"vm\"]"));
	/* the control: the same fields, printable, go through */
	kv_set(&nodes[0], "agentic/nodes/node-a", "{\"addr\":\"h:1\",\"version\":\"1.0\"}");
	n = fleet_snapshot_write(nodes, 1, NULL, 0, out, sizeof(out));
	out[n] = '\0';
	assert_non_null(strstr(out, "\"addr\":\"h:1\",\"version\":\"1.0\""));
}

/* An alive key counts only under a lease: one put without (a stolen certificate can) would
 * keep its node up for ever, after its etcd user is gone too. */
static void test_fleet_snapshot_alive_needs_a_lease(void **state)
{
	static struct etcd_kv nodes[1], alive[1];
	char out[FLEET_SNAPSHOT_BYTES];
	long n;

	(void)state;
	kv_set(&nodes[0], "agentic/nodes/node-a", "{\"slots\":1}");
	kv_set(&alive[0], "agentic/alive/node-a", "1");
	n = fleet_snapshot_write(nodes, 1, alive, 1, out, sizeof(out));
	out[n] = '\0';
	assert_non_null(strstr(out, "\"state\":\"lost\""));
	alive[0].lease = 42; /* the control */
	n = fleet_snapshot_write(nodes, 1, alive, 1, out, sizeof(out));
	out[n] = '\0';
	assert_non_null(strstr(out, "\"state\":\"up\""));
}

static void test_fleet_sandboxes_view(void **state)
{
	static struct etcd_kv sbs[6], alive[1];
	char out[FLEET_SB_PACKET_BYTES];
	long n;

	(void)state;
	kv_set(&sbs[0], "agentic/sandboxes/node-a/web", "{\"state\":\"ready\",\"tier\":\"T1\"}");
	kv_set(&sbs[1], "agentic/sandboxes/node-b/db", "{\"state\":\"creating\",\"tier\":\"T0\"}");
	kv_set(&sbs[2], "agentic/sandboxes/node-a/bad", "{\"state\":\"up\",\"tier\":\"T1\"}");
	kv_set(&sbs[3], "agentic/sandboxes/node-a/Bad", "{\"state\":\"ready\",\"tier\":\"T1\"}");
	kv_set(&sbs[4], "agentic/sandboxes/node-a/x/y", "{\"state\":\"ready\",\"tier\":\"T1\"}");
	kv_set(&sbs[5], "agentic/sandboxes/node-a/t9", "{\"state\":\"ready\",\"tier\":\"T9\"}");
	kv_set(&alive[0], "agentic/alive/node-a", "1");
	alive[0].lease = 3;
	n = fleet_sandboxes_write((const struct etcd_kv *const[]){ &sbs[0], &sbs[1], &sbs[2], &sbs[3],
								 &sbs[4], &sbs[5] },
				  6, false, alive, 1, out, sizeof(out));
	assert_true(n > 0);
	out[n] = '\0';
	assert_string_equal(out, "{\"fleet_sandboxes\":[{\"name\":\"web\",\"node\":\"node-a\","
			    "\"state\":\"ready\",\"tier\":\"T1\"},{\"name\":\"db\",\"node\":"
			    "\"node-b\",\"state\":\"lost\",\"tier\":\"T0\"}],\"more\":false}");
}

static void test_fleet_snapshot_bounded(void **state)
{
	static struct etcd_kv nodes[1];
	char out[32];

	(void)state;
	kv_set(&nodes[0], "agentic/nodes/node-a", "{\"addr\":\"10.0.0.1:7000\",\"slots\":8}");
	assert_int_equal(fleet_snapshot_write(nodes, 1, NULL, 0, out, sizeof(out)), ERR_LIMIT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fleet_node_names),
		cmocka_unit_test(test_fleet_settings_round_trip),
		cmocka_unit_test(test_fleet_settings_refused),
		cmocka_unit_test(test_fleet_snapshot_states_and_names),
		cmocka_unit_test(test_fleet_snapshot_hostile_record),
		cmocka_unit_test(test_fleet_snapshot_many_images),
		cmocka_unit_test(test_fleet_snapshot_no_terminal_escapes),
		cmocka_unit_test(test_fleet_snapshot_alive_needs_a_lease),
		cmocka_unit_test(test_fleet_sandboxes_view),
		cmocka_unit_test(test_fleet_snapshot_bounded),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
