/* e2b_conn.h: the E2B listener's connection layer (contract C2 of issue 32), for the module's
 * services: the request being served, the sandbox it was routed to, whole and streamed answers,
 * services that outlive their handler call. The module's files call one way, each only the
 * ones below it:
 *
 *   e2b_routes.c   start-up, the route table, auth (API key, sandbox token, signed URLs), tick
 *   e2b_api.c      the control plane REST (sandboxes)
 *   e2b_process.c, e2b_fs.c, e2b_files.c   the envd services (e2b_stubs.c until they merge)
 *   e2b_conn.c     the listener, connections, HTTP/1.1, this header's functions
 *   e2b_state.c    E2B's fields of a sandbox, its token, the secret
 *
 * Every function here runs on agenticd's loop and never blocks. A struct e2b_conn is valid
 * during the call that handed it; to reach it later keep an e2b_ref. */
#ifndef AGENTIC_E2B_CONN_H
#define AGENTIC_E2B_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct config;
struct e2b_conn;
struct sandbox;

#define E2B_STR_(x) #x
#define E2B_STR(x) E2B_STR_(x)

/* the request being served */
const char *e2b_method(const struct e2b_conn *c);
const char *e2b_path(const struct e2b_conn *c);      /* without the query */
const char *e2b_query(const struct e2b_conn *c);     /* after '?', "" when none */
const char *e2b_header(const struct e2b_conn *c, const char *name); /* case-insensitive, NULL */
/* envd plane: the sandbox routed to (E2b-Sandbox-Id + X-Access-Token checked before any
 * service handler runs; for /files a valid signature instead of the token) */
struct sandbox *e2b_sandbox(const struct e2b_conn *c);
/* a body read whole before the handler ran (routes not marked streamed): bounded by
 * LIMIT_E2B_BODY_BYTES (413 before the handler when over) */
const uint8_t *e2b_body(const struct e2b_conn *c, size_t *len);
/* one whole answer (it must fit LIMIT_E2B_OUT_BYTES with its head: else a 500) */
void e2b_reply(struct e2b_conn *c, int status, const char *content_type, const void *body,
	       size_t len);
/* REST/envd HTTP: {"code":status,"message":m}, application/json */
void e2b_reply_error(struct e2b_conn *c, int status, const char *message);
/* unary Connect: the status from code (invalid_argument 400, unauthenticated 401,
 * permission_denied 403, not_found 404, already_exists 409, resource_exhausted 429,
 * unimplemented 501, unavailable 503, deadline_exceeded 504, else 500), application/json
 * {"code","message"} */
void e2b_connect_error(struct e2b_conn *c, const char *code, const char *message);
/* a streamed answer: the head (chunked), sent with the first chunk; then chunks, each
 * written to the socket at once, and the end; a stream begun is followed by one of them */
int e2b_stream_begin(struct e2b_conn *c, int status, const char *content_type);
/* 0, or -EAGAIN: no room (nothing taken; on_writable comes), or -EPIPE: gone */
int e2b_stream_write(struct e2b_conn *c, const void *data, size_t len);
/* as e2b_stream_write, but the chunk waits for the next write or the end, to leave in the
 * same segment (an answer's last envelopes, produced together); one of them must follow */
int e2b_stream_hold(struct e2b_conn *c, const void *data, size_t len);
size_t e2b_stream_room(const struct e2b_conn *c);
void e2b_stream_end(struct e2b_conn *c); /* last chunk; the connection serves its next request */
/* a service that outlives its handler call */
struct e2b_service_ops {
	void (*on_body)(struct e2b_conn *c, void *ctx, const uint8_t *data, size_t len, bool end);
	void (*on_writable)(struct e2b_conn *c, void *ctx);
	void (*on_close)(struct e2b_conn *c, void *ctx); /* client gone / conn ended: forget c */
};
void e2b_conn_attach(struct e2b_conn *c, const struct e2b_service_ops *ops, void *ctx);
void e2b_body_pause(struct e2b_conn *c);   /* streamed bodies: stop reading until resume */
void e2b_body_resume(struct e2b_conn *c);
struct e2b_ref { uint32_t index, gen; };
struct e2b_ref e2b_ref_of(const struct e2b_conn *c);
struct e2b_conn *e2b_conn_get(struct e2b_ref r);  /* NULL when that request/connection is gone */

/* The E2B user of a request (header Authorization: Basic base64("user:"), or ?username=):
 * 0 for none or "user" (uid 10001); "root" is answered (Connect permission_denied on a
 * Connect route, else HTTP 403) and -1 returned; any other user is answered 401, -1. */
int e2b_user_check(struct e2b_conn *c);
/* The request's E2B user refused (Basic auth's user, else ?username=): NULL for none or
 * "user" (uid 10001), else why, with *code the Connect code (permission_denied for root,
 * unauthenticated for another name); e2b_user_check answers with it. */
const char *e2b_user_refusal(struct e2b_conn *c, const char **code);
/* A path as the E2B user names it: absolute as is, relative and "~"/"~/..." under /home/user.
 * 0, or -EINVAL for an empty one or one that does not fit cap. */
int e2b_path_resolve(const char *in, char *out, size_t cap);

/* Handlers e2b_routes.c's table calls (e2b_process.c, e2b_fs.c, e2b_files.c define them) */
void e2b_process_call(struct e2b_conn *c, const char *method); /* POST /process.Process/<method> */
void e2b_fs_call(struct e2b_conn *c, const char *method);      /* POST /filesystem.Filesystem/<method> */
void e2b_files_get(struct e2b_conn *c);                        /* GET /files */
void e2b_files_post(struct e2b_conn *c);  /* POST /files: called at the HEAD, body via on_body */
void e2b_process_tick(int64_t now);       /* e2b_tick calls these */
int64_t e2b_process_next_deadline(void);  /* -1: none */
void e2b_process_sandbox_gone(struct sandbox *sb); /* a removal: end its streams */
void e2b_fs_sandbox_gone(struct sandbox *sb);
/* Their static tables' bytes (e2b_static_bytes). */
size_t e2b_process_table_bytes(void);
size_t e2b_fs_table_bytes(void);
size_t e2b_files_table_bytes(void);

/* ---- for e2b_routes.c: what the connection layer is handed and what it asks ---- */
/* The request's head is in (method, path, query, headers): route it. Called once per request,
 * before any body byte is read; the route answers, or e2b_conn_route_set says how its body
 * is read. */
typedef void (*e2b_dispatch_fn)(struct e2b_conn *c);
/* How the routed request goes on: a route not streamed gets its body whole (413 when over
 * LIMIT_E2B_BODY_BYTES), then handler(c, arg); a streamed one is called now and gets its
 * body through on_body. sb: the sandbox routed to (NULL on the control plane). */
void e2b_conn_route_set(struct e2b_conn *c, struct sandbox *sb, bool streamed,
			void (*handler)(struct e2b_conn *c, const char *arg), const char *arg);
size_t e2b_conn_bytes(uint32_t n);
/* The table (n slots of storage), the loop and its tags, and the routes' entry. */
void e2b_conn_start(const struct config *cfg, void *storage, uint32_t n, int epfd,
		    uint32_t tag_listen, uint32_t tag_conn, e2b_dispatch_fn dispatch);
/* Connections' next requests and resumed bodies, their limits, their ends. */
void e2b_conn_tick(int64_t now);
int64_t e2b_conn_next_deadline(void);
/* e2b_reply with one more header (hname NULL: none) */
void e2b_reply_hdr(struct e2b_conn *c, int status, const char *content_type, const char *hname,
		   const char *hvalue, const void *body, size_t len);
/* Binds and watches e2b_listen: 0, or -1 with why in err. */
int e2b_conn_listen(char *err, size_t err_size);
/* Stops accepting. */
void e2b_conn_shutdown(void);
/* {"code":status,"message":m} with extra members' JSON text (NULL: none) */
void e2b_reply_json_error(struct e2b_conn *c, int status, const char *message,
			  const char *extra);
/* The head's Content-Length, or -1 (chunked, or none). */
int64_t e2b_content_length(const struct e2b_conn *c);
/* The answer closes the connection after it (an auth refusal: the body is never read). */
void e2b_conn_close_after(struct e2b_conn *c);
/* The node that relayed this connection (docs/FLEET.md "One front door"), "" for a client's. */
const char *e2b_relayed_from(const struct e2b_conn *c);
/* The request handed to the fleet's relay for node at addr, with the connection itself (this
 * side forgets it): its head written again without X-API-KEY (checked here; never sent to
 * another node) and Expect, then what of its body came (the head just in); or, for a create
 * placement sent there (placement: "SEQ NAME"), its whole body, read, after the placement's
 * header. The query is the request's, or query when not NULL. 0, or ERR_LIMIT / -errno
 * (nothing was handed over: the caller answers). */
int e2b_conn_relay(struct e2b_conn *c, const char *node, const char *addr,
		   const char *placement, const char *query);

#endif
