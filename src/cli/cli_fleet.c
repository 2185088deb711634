/* cli_fleet.c: `agentic fleet ls` and `agentic ls --fleet`: the fleet's nodes and sandboxes as
 * this node's agenticd last read them from etcd (GET /api/v1/fleet, /api/v1/fleet/sandboxes;
 * docs/FLEET.md). Calls cli_api.c. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli_internal.h"

const char cli_fleet_help[] =
	"usage: agentic fleet ls\n"
	"       agentic fleet drain [--undo] [NODE]\n"
	"Lists the fleet's nodes: name, state (up, draining, or lost: its lease in etcd expired),\n"
	"free sandbox slots of all, version and the address the other nodes reach it at. The\n"
	"first line says which node answered and whether it reaches etcd now; a node that does\n"
	"not shows the fleet as it last read it. Exit 1 when agenticd runs no fleet.\n"
	"drain marks the node answering as draining (no new placements; its sandboxes stay),\n"
	"kept across restarts; --undo ends it. NODE, when given, must be that node: another\n"
	"node is drained on itself.\n";

/* GET path into doc and its "etcd" word into etcd: 0, or the exit status (1 without a fleet,
 * said so). */
static int fleet_get(struct opts *o, const char *path, struct json_doc *doc, char *etcd,
		     size_t cap)
{
	int status = cli_call(o, "GET", path, NULL, 0, 200, doc);

	if (status)
		return status < 0 ? -1 : status;
	cli_field(doc, 0, "etcd", etcd, cap);
	if (strcmp(etcd, "off") == 0) {
		fprintf(stderr, "agentic: this agenticd runs no fleet (fleet_endpoints is empty in "
			"its config)\n");
		return 1;
	}
	return 0;
}

static int fleet_ls(struct opts *o)
{
	char node[64], state[16], addr[64], version[32], etcd[16], error[32], endpoint[64];
	struct json_doc doc;
	int status, arr, i;
	int64_t slots, free_slots;

	if ((status = fleet_get(o, "/api/v1/fleet", &doc, etcd, sizeof(etcd))))
		return status < 0 ? 0 : status;
	printf("# node %s, etcd %s", cli_field(&doc, 0, "node", node, sizeof(node)), etcd);
	if (strcmp(etcd, "up") != 0)
		printf(" (%s at %s)", cli_field(&doc, 0, "error", error, sizeof(error)),
		       cli_field(&doc, 0, "endpoint", endpoint, sizeof(endpoint)));
	printf("\n%-20s  %-9s  %-11s  %-10s  %s\n", "NODE", "STATE", "FREE/SLOTS", "VERSION",
	       "ADDRESS");
	if ((arr = json_obj_get(&doc, 0, "nodes")) < 0 || doc.tok[arr].type != JSON_ARRAY)
		return 0; /* not read yet */
	for (int n = json_first(&doc, arr); n >= 0; n = json_next(&doc, arr, n)) {
		char slots_text[24];

		slots = free_slots = -1;
		if ((i = json_obj_get(&doc, n, "slots")) >= 0)
			(void)json_int(&doc, i, &slots);
		if ((i = json_obj_get(&doc, n, "slots_free")) >= 0)
			(void)json_int(&doc, i, &free_slots);
		snprintf(slots_text, sizeof(slots_text), "%lld/%lld", (long long)free_slots,
			 (long long)slots);
		printf("%-20s  %-9s  %-11s  %-10s  %s\n", cli_field(&doc, n, "node", node, sizeof(node)),
		       cli_field(&doc, n, "state", state, sizeof(state)), slots_text,
		       cli_field(&doc, n, "version", version, sizeof(version)),
		       cli_field(&doc, n, "addr", addr, sizeof(addr)));
	}
	return 0;
}

int cli_fleet_ls_sandboxes(struct opts *o)
{
	char name[64], node[64], state[16], tier[8], etcd[16];
	struct json_doc doc;
	int status, arr;

	if ((status = fleet_get(o, "/api/v1/fleet/sandboxes", &doc, etcd, sizeof(etcd))))
		return status < 0 ? 0 : status;
	if (strcmp(etcd, "up") != 0)
		fprintf(stderr, "agentic ls: etcd is %s: the fleet as last read\n", etcd);
	printf("%-24s %-20s %-9s %s\n", "NAME", "NODE", "STATE", "TIER");
	if ((arr = json_obj_get(&doc, 0, "sandboxes")) < 0 || doc.tok[arr].type != JSON_ARRAY)
		return 0;
	for (int i = json_first(&doc, arr); i >= 0; i = json_next(&doc, arr, i))
		printf("%-24s %-20s %-9s %s\n", cli_field(&doc, i, "name", name, sizeof(name)),
		       cli_field(&doc, i, "node", node, sizeof(node)),
		       cli_field(&doc, i, "state", state, sizeof(state)),
		       cli_field(&doc, i, "tier", tier, sizeof(tier)));
	if ((arr = json_obj_get(&doc, 0, "more")) >= 0 && doc.tok[arr].type == JSON_TRUE)
		fprintf(stderr, "agentic ls: the fleet has more sandboxes than one read lists\n");
	return 0;
}

static int fleet_drain(struct opts *o, const char *node, bool undo)
{
	char self[64];
	struct json_doc doc;
	int status;

	status = cli_call(o, "GET", "/api/v1/fleet", NULL, 0, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	cli_field(&doc, 0, "node", self, sizeof(self));
	if (node && strcmp(node, self) != 0) {
		fprintf(stderr, "agentic fleet: this agenticd is node '%s', not '%s': drain a node on "
			"that node\n", self, node);
		return 1;
	}
	status = cli_call(o, "POST", "/api/v1/fleet/drain", undo ? "{\"draining\":false}" :
			  "{\"draining\":true}", undo ? 18 : 17, 200, &doc);
	if (status)
		return status < 0 ? 0 : status;
	printf("%s %s\n", self, undo ? "no longer draining" : "draining");
	return 0;
}

int cli_verb_fleet(int argc, char **argv, struct opts *o)
{
	const char *args[2] = { NULL, NULL };
	bool undo = false;
	int n = 0, c;

	for (int i = 1; i < argc; i++) {
		if ((c = cli_common_opt(o, argc, argv, &i)) < 0)
			return cli_usage_error(cli_fleet_help);
		if (c)
			continue;
		if (strcmp(argv[i], "--undo") == 0)
			undo = true;
		else if (argv[i][0] == '-' || n == 2)
			return cli_usage_error(cli_fleet_help);
		else
			args[n++] = argv[i];
	}
	if (n == 1 && !undo && strcmp(args[0], "ls") == 0)
		return fleet_ls(o);
	if (n >= 1 && strcmp(args[0], "drain") == 0)
		return fleet_drain(o, args[1], undo);
	return cli_usage_error(cli_fleet_help);
}
