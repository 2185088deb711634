/* admin_routes.c: the top of the admin API: its route table (docs/API.md), admin_init, which
 * hands the table and the hooks the files below need to admin_conn.c, and a create's or
 * remove's end. HTTP/1.1 + JSON on the admin socket (admin_http.c), routed by `routes`:
 *
 *   GET    /api/v1/containers          list
 *   POST   /api/v1/containers          create (answers when ready: 201 + the sandbox)
 *   GET    /api/v1/containers/NAME     inspect
 *   DELETE /api/v1/containers/NAME     remove (?force=1, ?keep_workspace=1)
 *   POST   /api/v1/containers/NAME/exec  run a command: chunked NDJSON, or with
 *                                        `Connection: Upgrade` + `Upgrade: tcp` the framed
 *                                        bidirectional stream (docs/API.md)
 *   GET    /api/v1/containers/NAME/logs  a run's transcript (?run=, ?stream=stdout|stderr)
 *   GET    /api/v1/containers/NAME/files?path=P  a file's bytes, read in the sandbox as uid 10001
 *   PUT    /api/v1/containers/NAME/files?path=P  the body (streamed) into that file
 *   GET    /api/v1/containers/NAME/posture          its tier and why
 *   POST   /api/v1/containers/NAME/posture/taints   an operator's taint {"reason": WORD}
 *   GET    /api/v1/containers/NAME/egress   its egress policy and the last audit lines
 *   PUT    /api/v1/containers/NAME/egress   replaces the policy (docs/EGRESS.md "Policy")
 *                                           (both also as /api/v2/admin/instances/NAME/egress)
 *   GET    /api/v1/info                the daemon
 *   GET    /api/v1/fleet               the fleet's nodes as this node last read them
 *   GET    /api/v1/fleet/sandboxes     the fleet's sandboxes, likewise
 *   POST   /api/v1/fleet/drain         {"draining": BOOL}: this node takes no new placements
 *   GET,POST /api/v1/e2b-keys          the E2B API's keys: list, mint (the only answer with a
 *                                      key); DELETE /api/v1/e2b-keys/ID removes one
 *   GET    /metrics                    Prometheus text
 *   GET,POST /api/v1/containers/NAME/verify   the verifier (verify.c); POST /api/v1/verify?container=ID
 *   /api/v2/admin/instances[/NAME], /api/v2/admin/profiles[/ID]: admin-v2, in admin_v2.c
 *
 * Errors are {"error": {"code": ..., "message": ...}}; a path no route has is 404, a path
 * with other methods 405 with Allow. The handlers are in admin_sandbox.c, admin_exec.c,
 * admin_posture.c, admin_info.c, admin_e2b.c and admin_v2.c; a connection that opens with the HTTP/2
 * preface goes to the admin gRPC service (admin_grpc.c). admin_conn.h says which file may
 * call which. */
#include "admin/admin_conn.h"
#include "fleet/link.h"
#include "egress/view.h"

#define API "/api/v1"
#define API2 "/api/v2/admin"

/* GET before POST and DELETE: a 405 lists them in this order ("use GET or POST"). */
static const struct admin_route routes[] = {
	{ "GET", API "/containers", admin_containers_list, false, false },
	{ "POST", API "/containers", admin_containers_create, false, true },
	{ "GET", API "/containers/", admin_containers_list, false, false },
	{ "POST", API "/containers/", admin_containers_create, false, true },
	{ "GET", API "/containers/*", admin_container_inspect, false, false },
	{ "DELETE", API "/containers/*", admin_remove_start, false, false },
	{ "POST", API "/containers/*/exec", admin_exec_route, false, false },
	{ "GET", API "/containers/*/logs", admin_container_logs, false, false },
	{ "GET", API "/containers/*/files", admin_files_get, false, false },
	{ "PUT", API "/containers/*/files", admin_files_put, false, false },
	{ "GET", API "/containers/*/posture", admin_posture_get, false, false },
	{ "POST", API "/containers/*/posture/taints", admin_taint_post, false, false },
	{ "GET", API "/containers/*/egress", admin_egress_get, false, false },
	{ "PUT", API "/containers/*/egress", admin_egress_put, false, false },
	{ "GET", API "/containers/*/verify", admin_verify_get, false, false },
	{ "POST", API "/containers/*/verify", admin_verify_post, false, false },
	{ "POST", API "/verify", admin_verify_container_post, false, false },
	{ "GET", API "/info", admin_info_get, false, false },
	{ "GET", API "/fleet", admin_fleet_get, false, false },
	{ "GET", API "/fleet/sandboxes", admin_fleet_sandboxes_get, false, false },
	{ "POST", API "/fleet/drain", admin_fleet_drain_post, false, false },
	{ "GET", API "/e2b-keys", admin_e2b_keys_list, false, false },
	{ "POST", API "/e2b-keys", admin_e2b_key_create, false, false },
	{ "DELETE", API "/e2b-keys/*", admin_e2b_key_delete, true, false },
	{ "GET", "/metrics", admin_metrics_get, false, false },
	{ "GET", API2 "/instances", admin_v2_instances_list, false, false },
	{ "POST", API2 "/instances", admin_v2_instances_create, false, true },
	{ "GET", API2 "/instances/*", admin_v2_instance_get, false, false },
	{ "DELETE", API2 "/instances/*", admin_v2_instance_delete, false, false },
	{ "GET", API2 "/instances/*/egress", admin_egress_get, false, false },
	{ "PUT", API2 "/instances/*/egress", admin_egress_put, false, false },
	{ "GET", API2 "/profiles", admin_v2_profiles_list, false, false },
	{ "GET", API2 "/profiles/*", admin_v2_profile_get, true, false },
};

void admin_init(const struct admin_config *ac)
{
	admin_conn_start(ac, &(struct admin_hooks){ .pump = admin_grpc_pump,
						    .next_request = admin_event,
						    .routes = routes, .nroutes = ARRAY_LEN(routes) });
}

/* ---- what a create or remove calls at its end ---- */

void admin_finish_sandbox(int32_t i, uint32_t gen, const struct sandbox *sb, int status)
{
	struct admin_conn *c = admin_waiter(i, gen);

	/* the created sandbox's policy is in its audit from the start (its run is open now) */
	if (status == 201 && sb->egress_json[0])
		egress_audit_policy((struct sandbox *)sb, "create");
	if (!c)
		return;
	if (status == 201 && c->req.nprobes) {
		admin_probes_start(c, sb);
		return;
	}
	admin_respond_sandbox(c, status, sb);
	admin_flush(c);
}

void admin_finish_error(int32_t i, uint32_t gen, int status, const char *code,
			const char *message)
{
	struct admin_conn *c = admin_waiter(i, gen);

	if (!c)
		return; /* a placed create's name: released by its node's sweep */
	if (c->placed) {
		/* a placed create rolled back: its name is free again in the fleet */
		c->placed = false;
		fleet_link_release(c->req.name);
	}
	admin_respond_error(c, status, code, message);
	admin_flush(c);
}
