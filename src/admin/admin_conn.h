/* admin_conn.h: admin/'s own header (nothing outside src/admin includes it): the connection
 * layer's state and helpers, and the route handlers, shared by the module's files. They call
 * one way, each only the ones before it:
 *
 *   admin_conn.c     the slots, their descriptors on the loop, answers, the spill, the flush
 *   admin_exec.c     the exec route and its sinks
 *   admin_files.c    the file routes (GET, PUT .../files) on agent/fileop.h
 *   admin_grpc.c     gRPC Exec on the admin socket
 *   admin_http.c     the listener, reading and parsing, routing through the table it is handed
 *   admin_sandbox.c  sandbox routes: list, create, inspect, remove, logs
 *   admin_v2.c       the /api/v2/admin routes
 *   admin_posture.c  posture, taints, the egress policy
 *   admin_info.c     info, /metrics, the verifier
 *   admin_e2b.c      the E2B API's keys
 *   admin_routes.c    the route table, admin_init, a create's or remove's end
 *
 * What a lower file must reach above it (the gRPC pump, the next request on a connection, the
 * route table) admin_init hands it in struct admin_hooks. */
#ifndef AGENTIC_ADMIN_CONN_H
#define AGENTIC_ADMIN_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "admin/admin.h"
#include "base/looptag.h"
#include "sandbox/sandbox.h"

/* ---- admin_conn.c ---- */
struct admin_hooks {
	void (*pump)(struct admin_conn *c);                 /* a gRPC call's output: admin_grpc_pump */
	void (*next_request)(uint32_t index, uint32_t events); /* keep-alive: admin_event */
	const struct admin_route *routes;                   /* admin_route_find's table */
	size_t nroutes;
};

/* What agenticd.c hands over at start (admin_init), the listener (admin_listen), and the
 * counts the admin API keeps itself. */
struct admin_state {
	struct admin_config ac;
	struct admin_hooks hooks;
	int listen_fd;
	bool stopping;                /* admin_shutdown: no new creates */
	uint64_t refused;             /* peers refused (not root, not in admin_group) */
};
extern struct admin_state admin_state;
/* Content-Type: application/json, the fields of every JSON answer */
extern const struct http_field admin_json_fields[];

/* admin_init's work: the state, every slot's fd -1. */
void admin_conn_start(const struct admin_config *ac, const struct admin_hooks *h);
/* A descriptor on the loop's epoll (tagged kind, index), and off it. */
void admin_fd_watch(int fd, uint32_t events, uint32_t kind, uint32_t index);
void admin_fd_unwatch(int fd);
uint32_t admin_conn_index(const struct admin_conn *c);
/* The connection waiting at (i, gen) for a create, remove or verify to end, or NULL: gone, or
 * a zombie (its client left), whose slot is freed now that nothing will answer it. */
struct admin_conn *admin_waiter(int32_t i, uint32_t gen);
/* {"error":{"code":..,"message":..}} and a newline, into b. */
int admin_error_json(struct buf *b, const char *code, const char *msg);
/* Starts the output with a whole response (fields NULL: JSON); on failure, a bodiless 500. */
void admin_respond_raw(struct admin_conn *c, int status, const struct http_field *fields,
		       const void *body, size_t body_len);
/* A response sent at once, beside the connection's output (100 Continue; a 503 at accept). */
ssize_t admin_send_now(int fd, int status, const struct http_field *fields, const void *body,
		       size_t len);
/* An error answer; fields NULL: JSON's alone (a 405 adds Allow). */
void admin_respond_error_fields(struct admin_conn *c, int status, const char *code,
				const char *msg, const struct http_field *fields);
/* Sends the whole file fd (taken) as the answer, from the loop as the socket drains. */
void admin_respond_file(struct admin_conn *c, int fd, const struct http_field *fields);
/* Follows the file fd (taken) of sandbox sb: a chunked answer of what it holds, then of what
 * is appended, read at every turn of the loop (admin_tick) into the connection's own buffer,
 * until sb is removed (its last bytes, then the last chunk) or the client hangs up. */
void admin_respond_follow(struct admin_conn *c, int fd, const struct sandbox *sb,
			  const struct http_field *fields);
/* The session stops feeding c (why: admin_exec_queue's error): the client gets what is
 * queued, then an end that cannot pass for a whole answer (c->error says why). */
void admin_exec_drop(struct admin_conn *c, int why);
/* A query's parameter name: its value (cut to size; "" when absent), or whether it is set. */
void admin_query_value(const char *query, const char *name, char *out, size_t size);
bool admin_query_flag(const char *query, const char *name);

/* ---- the route handlers, for admin_routes.c's table ---- */
/* admin_sandbox.c */
void admin_containers_list(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_containers_create(struct admin_conn *c, struct sandbox *unused, const char *query);
/* A create route's body parsed as api reads it (route: "v1" or "v2", for the log), then
 * placed on a fleet node (admin_create.c; query's node=NODE pins it) or admin_create_start;
 * 503 once agenticd is stopping. admin_v2.c's create ends here too. */
void admin_create_request(struct admin_conn *c, enum request_api api, const char *route,
			  const char *query);
void admin_container_inspect(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_container_logs(struct admin_conn *c, struct sandbox *sb, const char *query);
/* admin_posture.c; the taints an operator may declare (docs/POSTURE.md) */
#define ADMIN_TAINT_REASONS 4
extern const enum posture_reason admin_taint_reasons[ADMIN_TAINT_REASONS];
void admin_posture_get(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_taint_post(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_egress_get(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_egress_put(struct admin_conn *c, struct sandbox *sb, const char *query);
/* admin_files.c: GET and PUT /api/v1/containers/NAME/files?path=P (PUT: a streamed route),
 * and the connection's events while its file operation runs (AC_FILEOP) */
void admin_files_get(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_files_put(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_files_event(struct admin_conn *c, uint32_t events);
/* route is dispatched at its head, its handler reading the body itself (the PUT) */
bool admin_files_streamed(const struct admin_route *route);
/* admin_e2b.c: the E2B keys (the segment: a key's id) */
void admin_e2b_key_create(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_e2b_keys_list(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_e2b_key_delete(struct admin_conn *c, struct sandbox *unused, const char *query);
/* admin_info.c */
void admin_info_get(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_fleet_get(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_fleet_sandboxes_get(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_fleet_drain_post(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_metrics_get(struct admin_conn *c, struct sandbox *unused, const char *query);
void admin_verify_post(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_verify_container_post(struct admin_conn *c, struct sandbox *unused,
				 const char *query);
void admin_verify_get(struct admin_conn *c, struct sandbox *sb, const char *query);

#endif
