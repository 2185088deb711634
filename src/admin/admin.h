/* admin.h: the admin socket's front ends, the admin module's interface: the HTTP/1.1 + JSON
 * API (admin_routes.c, a route table; admin_http.c reads and routes; its exec route in
 * admin_exec.c) and the admin gRPC service (admin_grpc.c: AgentService/Exec for connections
 * that open with the HTTP/2 preface). They turn requests into calls on the parts below them
 * (the sandbox table, the lifecycle, exec) and are told of the results only through what those
 * calls return, a create's or remove's end (admin_finish_*) and an exec session's sink. They
 * may call every module below admin (tools/check-layers) and are handed the loop's epoll fd
 * at start: nothing of agenticd's above them. */
#ifndef AGENTIC_MGMT_ADMIN_H
#define AGENTIC_MGMT_ADMIN_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "grpc/grpc.h"
#include "http/frame.h"
#include "http/http.h"
#include "json/json.h"
#include "agent/exec.h"
#include "agent/fileop.h"
#include "sandbox/request.h"
#include "runtime/runtime_vm.h"

struct config;
struct netpool;
struct sandbox;

/* ---- admin connections (the table admin_init is handed, max_admin_connections) ---- */
enum admin_phase { AC_FREE = 0, AC_READ, AC_WAIT, AC_WRITE, AC_LIST, AC_ZOMBIE, AC_EXEC,
		   AC_FILE, AC_FILEOP, AC_FOLLOW };

struct admin_conn {
	enum admin_phase phase;
	int fd;
	uint32_t gen;
	uid_t uid;
	pid_t pid;
	bool allowed;
	bool keep_alive;
	int64_t idle_since;
	struct http_parser parser;
	char head[LIMIT_HTTP_HEAD_BYTES];
	uint8_t rbuf[LIMIT_ADMIN_READ_BYTES];
	uint32_t rlen, roff;
	uint8_t body[LIMIT_ADMIN_BODY_BYTES];
	uint32_t body_len;
	bool body_too_big;
	uint8_t out[LIMIT_ADMIN_OUT_BYTES];
	uint32_t out_len, out_off;
	uint32_t list_cursor;         /* AC_LIST: next item to render (admin_list_start) */
	uint32_t list_n;
	bool (*list_item)(struct json_writer *w, uint32_t i);
	bool list_first;
	char segment[128];            /* the path segment a route's '*' stood for */
	/* a create's readiness probes, run one after another once it is ready (admin_v2.c) */
	char probe_sandbox[64];
	uint32_t probe_next;
	int32_t probe_failed;         /* the first probe that failed, -1: none */
	int32_t probe_exit;
	struct create_req req;
	/* AC_EXEC: the session (exec.c) and the frame being read: stdin from an upgraded
	 * client, or a gRPC call's output going out as messages */
	int32_t exec;
	bool upgraded;
	struct frame_reader fr;
	uint8_t resize[4];        /* a resize frame's payload so far (rows, cols: 16 bits BE) */
	uint8_t resize_have;
	/* output beyond `out`, waiting on disk so a slow client costs neither memory nor bytes */
	int spill_fd;
	uint64_t spill_w, spill_r;
	/* the session stopped feeding this client (its spill hit a limit or failed): what is
	 * queued still goes out, then the gRPC call ends with `error`, an HTTP one just closes */
	bool dropped;
	/* a gRPC Exec call (no fd of its own): output is framed as on the upgraded stream in
	 * out/spill and sent as ExecOutput messages as the call's send buffer frees */
	struct grpc_call *call;
	bool sniffed;                 /* the first bytes were checked for the HTTP/2 preface */
	char relay_from[64];          /* the node that relayed this connection ("": local) */
	char place_name[64];          /* a placed create's name when its body gave none */
	bool placed;                  /* this create was placed here: its name is claimed in etcd,
				       * and released when the create fails */
	int32_t exit_code;
	char error[256];
	/* AC_FILE: a transcript file being sent; AC_FOLLOW: one followed as it grows (chunked),
	 * until the sandbox at that slot and gen goes (follow_end: its last chunk is queued) */
	int file_fd;
	uint64_t file_left;
	/* AC_FILEOP (admin_files.c): a file operation in the sandbox (agent/fileop.h; -1: none),
	 * its output queued as an exec's is; a PUT's body slice waiting in rbuf for the sandbox */
	int32_t fileop;
	bool file_is_put, file_head, file_body_end;
	uint32_t file_pend_off, file_pend_len;
	uint32_t follow_slot, follow_gen;
	bool follow_end;
};

/* ---- start-up (agenticd.c) ---- */
/* What the admin API is handed at start: its connection table (nconns slots, storage from
 * agenticd's region), the loop, the admin gRPC server, who may connect, and what GET
 * /v1/info reports (the engine's versions are read when asked: they are filled in later). */
struct admin_config {
	const struct config *cfg;
	struct admin_conn *conns;
	uint32_t nconns;
	int epfd;
	struct grpc_server *grpc;     /* gRPC on the admin socket: connections handed over */
	bool group_known;             /* admin_group exists: its members may connect */
	gid_t gid;
	size_t budget;                /* the memory budget, bytes */
	const char *engine_version;
	const char *api_version;
	const struct netpool *pool;   /* warm networks */
	bool in_container;            /* agenticd runs in a container */
	const char *engine_place;     /* "linux" or "docker-desktop-vm", set before the first call */
	const struct runtime_vm *vm;  /* the VM runtime, set up before the first call */
};
/* Takes the table (every slot free) and what it needs; no connection yet. */
void admin_init(const struct admin_config *ac);
/* The listening socket, once open: watched, and admin_accept takes its connections. */
void admin_listen(int fd);

/* ---- what the loop calls ---- */
/* Accepts pending connections, checking each peer (SO_PEERCRED, SO_PEERGROUPS). */
void admin_accept(void);
/* A connection another node of the fleet relayed (fleet-link's relay): served as an admin
 * connection limited to this node's sandboxes, one request long. */
void admin_adopt_relayed(int fd, const char *node);
/* fleet-link's hook: a create's placement came (admin_create.c). */
struct fleet_link_placed;
void admin_placed(uint64_t id, const struct fleet_link_placed *p);
void admin_event(uint32_t index, uint32_t events);
/* Closes connections idle for LIMIT_ADMIN_IDLE_MS; sends followed transcripts' new bytes
 * (every turn of the loop). */
void admin_tick(int64_t now);
/* Stops accepting (closes the listener); open exchanges finish. */
void admin_shutdown(void);
/* A client still waits for an answer or is being sent one (a create or remove, a response,
 * a list): shutdown waits for it (a while). */
bool admin_answering(void);

/* ---- what a create or remove calls at its end ---- */
/* The create or remove this connection waited for has finished: the sandbox with status, or
 * the error. A connection gone since (its client left) is forgotten. */
void admin_finish_sandbox(int32_t conn, uint32_t gen, const struct sandbox *sb, int status);
void admin_finish_error(int32_t conn, uint32_t gen, int status, const char *code,
			const char *message);

/* ---- routing (admin_http.c, over admin_routes.c's table) ---- */
struct admin_route {
	const char *method;
	const char *path;   /* '*' stands for one path segment: a sandbox's name */
	void (*handler)(struct admin_conn *c, struct sandbox *sb, const char *query);
	bool not_sandbox;   /* the segment is no sandbox's name (a profile's id): the handler
			     * gets sb NULL and reads c->segment */
	bool create;        /* a create: another node may relay it here, as placement chose */
};
/* The route for method and path (no query): 0 with *route and, for a path with '*', the name
 * it stood for in name; 404 when no route has that path, 405 when routes have it with other
 * methods, which allow then lists ("GET, POST"). */
int admin_route_find(const char *method, const char *path, const struct admin_route **route,
		     char *name, size_t name_size, char *allow, size_t allow_size);

/* ---- shared by the admin API's files (admin_conn.c, admin_sandbox.c) ---- */
const struct config *admin_cfg(void);  /* the config admin_init was handed */
/* A free connection slot (gen bumped, buffers empty, no fd), or NULL; it stays free until the
 * caller gives it a phase. */
struct admin_conn *admin_conn_take(void);
/* Ends the connection: its fd closed, its exec session detached, its spill gone. */
void admin_conn_close(struct admin_conn *c);
/* The epoll events the connection waits for (EPOLLRDHUP always). */
void admin_watch(struct admin_conn *c, uint32_t events);
/* Starts the output with an error answer ({"error": {"code", "message"}}). */
void admin_respond_error(struct admin_conn *c, int status, const char *code, const char *msg);
/* Sends what is queued (a gRPC call: admin_grpc_pump); a whole answer ends the exchange. */
void admin_flush(struct admin_conn *c);

/* A create parsed into c->req (request_create_parse), admitted by the lifecycle
 * (lifecycle_admit: a refusal answered at once); the answer comes at its end. Every create
 * route ends here. */
void admin_create_start(struct admin_conn *c);
/* A whole JSON answer: body (a newline is added), or the sandbox's JSON. */
void admin_respond(struct admin_conn *c, int status, struct buf *body);
void admin_respond_sandbox(struct admin_conn *c, int status, const struct sandbox *sb);
/* DELETE of a sandbox (?force=1, ?keep_workspace=1): answered at the remove's end. */
void admin_remove_start(struct admin_conn *c, struct sandbox *sb, const char *query);
/* A list streamed in chunks: head (the JSON up to and with the array's '['), then
 * item(w, i) for each i below n (false: nothing for that i), then "]}". */
void admin_list_start(struct admin_conn *c, const char *head, size_t head_len,
		      bool (*item)(struct json_writer *w, uint32_t i), uint32_t n);
/* The i-th slot of the sandbox table as a list item (false: a free slot). */
bool admin_sandbox_item(struct json_writer *w, uint32_t i);

/* ---- admin_v2.c: the /api/v2/admin routes (docs/API.md: admin-v2) ---- */
void admin_v2_instances_list(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_v2_instances_create(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_v2_instance_get(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_v2_instance_delete(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_v2_profiles_list(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_v2_profile_get(struct admin_conn *c, struct sandbox *sb, const char *query);
/* A create with readiness probes is ready: runs them (exec sessions whose sink is c) and
 * answers 201 with the sandbox and "probes": "passed" or "failed" once the last ended. */
void admin_probes_start(struct admin_conn *c, const struct sandbox *sb);

/* ---- admin_exec.c: the exec route and the client side of its sessions ---- */
/* The route's handler (POST /api/v1/containers/NAME/exec), and the connection's events while
 * its exec runs. */
void admin_exec_route(struct admin_conn *c, struct sandbox *sb, const char *query);
void admin_exec_event(struct admin_conn *c, uint32_t events);
/* Why an exec on sb cannot start (x: exec_begin's error; 0: before it, is sb ready for one?):
 * 0 when nothing stands in the way, else -1 with e (409 not_ready, 503 busy, 507
 * transcript_unwritable), in the words both front ends give. */
int admin_exec_refused(const struct sandbox *sb, int x, struct request_error *e);
/* The sinks of the upgraded stream (frames both ways) and the chunked NDJSON answer; ctx is
 * the admin_conn in AC_EXEC. */
extern const struct exec_sink_ops admin_exec_stream_ops, admin_exec_ndjson_ops;
/* Output for the client: in `out`, beyond it in the spill file; 0 or -errno (the spill is over
 * its limit or failed). */
int admin_exec_queue(struct admin_conn *c, const void *data, size_t len);
/* Refills an empty `out` from the spill. */
void admin_exec_refill(struct admin_conn *c);
/* The sinks' output as frames (stdout or stderr, then the bytes) queued; on a queue failure
 * the client is dropped and the error returned. */
int admin_exec_frame_output(void *ctx, int stream, const void *data, size_t len);

/* ---- admin_grpc.c: gRPC Exec on the admin socket ---- */
/* The service's methods (connections handed over by admin_event), its sink (output framed in
 * the connection's out/spill as on the stream) and the pump that turns a call's queued frames
 * into ExecOutput messages as its send buffer frees. */
extern const struct grpc_method admin_grpc_methods[];
extern const size_t admin_grpc_nmethods;
extern const struct exec_sink_ops admin_grpc_sink_ops;
void admin_grpc_pump(struct admin_conn *c);

/* ---- admin_sandbox.c: a sandbox as JSON (the API's view of it) ---- */
void admin_sandbox_json(struct json_writer *w, const struct sandbox *sb);

#endif
