/* docker.h: a Docker Engine API client over a Unix socket (API 1.41 to 1.47).
 *
 * One `struct docker_call` is one API request. It is started by a docker_*_begin() function
 * (which only builds the request), then driven either by docker_call_step() from an event loop
 * (it never blocks: wait for docker_call_fd()/docker_call_events() and step again) or by the
 * blocking docker_call_run(). Once it returns 0, typed results are read with docker_result_*()
 * and the call is ended with docker_call_end(), which every begun call needs, success or not.
 * The plain docker_*() functions at the end do all of that in one blocking call.
 *
 * Each call in flight holds one connection of the client's fixed pool (kept alive and reused),
 * so several calls run at once and a slow one (a `wait`, an event stream) stalls no other.
 * Memory is allocated once, by docker_client_init(); responses are bounded by
 * response_limit and anything larger is DOCKER_ERR_TOO_BIG, never a truncated result.
 *
 * Errors: functions return 0, a negative errno, an HTTP_ERR_* code (transport), or a code
 * below. A call that fails keeps the details in call->error; docker_error_text() turns them
 * into a sentence a user can act on (a missing image names `docker load`, a 409 names the
 * conflicting object). */
#ifndef AGENTIC_DOCKER_H
#define AGENTIC_DOCKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "http/http.h"
#include "json/json.h"

/* Codes in ERR_RANGE_DOCKER (base.h); err_str() gives their text. */
#define DOCKER_ERR_API (ERR_RANGE_DOCKER - 1)     /* the engine answered an error status */
#define DOCKER_ERR_VERSION (ERR_RANGE_DOCKER - 2) /* no API version both sides accept */
#define DOCKER_ERR_BUSY (ERR_RANGE_DOCKER - 3)    /* every connection of the pool is in use */
#define DOCKER_ERR_REPLY (ERR_RANGE_DOCKER - 4)   /* the answer is not what the API documents */
#define DOCKER_ERR_TOO_BIG (ERR_RANGE_DOCKER - 5) /* the answer is over response_limit */

/* The API versions we speak (docs/AGENTICD.md: Docker engine): 1.MIN to 1.MAX. */
#define DOCKER_API_MINOR_MIN 41
#define DOCKER_API_MINOR_MAX 47

#define DOCKER_ID_SIZE 65 /* 64 hex digits and a NUL */

/* ---- the client ---- */
struct docker_slot;

struct docker_client_config {
	const char *docker_host;  /* "unix:///path"; NULL means unix:///var/run/docker.sock */
	uint32_t connections;     /* calls in flight at once; 0 means 4; at most LIMIT_DOCKER_CONNS */
	uint32_t response_limit;  /* 0 means LIMIT_DOCKER_RESPONSE_BYTES */
	int connect_timeout_ms;   /* 0 means 5000 */
	int read_timeout_ms;      /* blocking runs of bounded calls; 0 means 60000 */
};

struct docker_client {
	char socket_path[108];
	char version[8];          /* negotiated "1.NN"; empty until docker_client_negotiate */
	int minor;                /* the negotiated minor version, 0 before */
	uint32_t response_limit;
	int connect_timeout_ms;
	int read_timeout_ms;
	struct docker_slot *slots;
	uint32_t nslots;
	struct json_token *tok;   /* shared by result parsing, which never spans two calls */
	uint32_t tok_cap;
};

/* Bytes docker_client_init allocates for cfg (in one allocation), for the applet's memory
 * budget; 0 when cfg is out of range. */
size_t docker_client_footprint(const struct docker_client_config *cfg);
/* Allocates the connection pool and parse space, once. -EINVAL for a docker_host that is not
 * unix:// or limits out of range, -ENAMETOOLONG, -ENOMEM. No I/O. */
int docker_client_init(struct docker_client *dc, const struct docker_client_config *cfg);
void docker_client_free(struct docker_client *dc);

/* The version rule on its own: given the engine's Api-Version (from /_ping) and MinAPIVersion
 * (from /version, NULL when unknown), writes the version to speak into out ("1.NN"). Returns
 * 0 or DOCKER_ERR_VERSION with why[] naming the versions. */
int docker_version_pick(const char *api_version, const char *min_version, char *out,
			size_t out_size, char *why, size_t why_size);

/* ---- one call ---- */
enum docker_op {
	DOCKER_OP_PING,
	DOCKER_OP_VERSION,
	DOCKER_OP_INFO,
	DOCKER_OP_NETWORK_CREATE,
	DOCKER_OP_NETWORK_INSPECT,
	DOCKER_OP_NETWORK_LIST,
	DOCKER_OP_NETWORK_REMOVE,
	DOCKER_OP_CONTAINER_CREATE,
	DOCKER_OP_CONTAINER_START,
	DOCKER_OP_CONTAINER_INSPECT,
	DOCKER_OP_CONTAINER_STOP,
	DOCKER_OP_CONTAINER_KILL,
	DOCKER_OP_CONTAINER_WAIT,
	DOCKER_OP_CONTAINER_LOGS,
	DOCKER_OP_CONTAINER_REMOVE,
	DOCKER_OP_CONTAINER_LIST,
	DOCKER_OP_EVENTS,
	DOCKER_OP_CONTAINER_RENAME,
	DOCKER_OP_IMAGE_LIST,
};

struct docker_error {
	int code;            /* what the call returned */
	int status;          /* HTTP status when the engine answered one, else 0 */
	enum docker_op op;
	char object[256];    /* the name or id the call was about */
	char image[256];     /* container create: the image asked for */
	char message[512];   /* the engine's {"message": ...}, or our own words */
};

/* Log bytes of one stream (1 stdout, 2 stderr). Non-zero return stops the call. */
typedef int (*docker_log_fn)(void *ctx, int stream, const uint8_t *data, size_t len);

struct docker_event {
	char type[32];       /* container, network, image ... */
	char action[256];    /* create, start, die, destroy, connect, exec_start ...: the word
			      * before any ':' (an exec's command line is never copied) */
	char id[256];        /* Actor.ID */
	int64_t time_nano;
	const struct json_doc *doc; /* valid during the callback only */
	int attributes;      /* token of Actor.Attributes, or -1 */
	bool oversized;      /* an event over LIMIT_DOCKER_EVENT_BYTES was skipped: nothing
			      * above is known of it */
};
/* One event of the stream. Non-zero return stops the call. */
typedef int (*docker_event_fn)(void *ctx, const struct docker_event *ev);
/* Copies attribute `key` of ev into out; 0, -ENOENT or ERR_LIMIT. */
int docker_event_attr(const struct docker_event *ev, const char *key, char *out, size_t size);

/* Log de-multiplexer: Docker's frames [stream, 0, 0, 0, size (be32)] then size bytes.
 * Resumable at any byte. */
struct docker_demux {
	uint8_t hdr[8];
	uint8_t have;
	uint8_t stream;
	uint32_t remaining;
};
/* Feeds bytes; payload goes to fn as it comes. 0, ERR_PARSE (unknown stream), or what fn
 * returned when non-zero. */
int docker_demux_feed(struct docker_demux *d, const uint8_t *in, size_t len, docker_log_fn fn,
		      void *ctx);

/* Event splitter: cuts a byte stream of concatenated JSON objects into whole objects, at any
 * byte boundary, holding one object (at most cap bytes) in caller storage. */
struct docker_splitter {
	char *buf;
	uint32_t cap;
	uint32_t len;
	uint32_t depth;
	bool in_string;
	bool escape;
	uint8_t hex_left;    /* digits of a \uXXXX escape still to come */
	bool cutting;        /* a long top-level string: its bytes dropped up to its quote */
	uint32_t str_len;    /* bytes of the current string read so far */
	bool skipping;       /* the object being read is over cap: read to its end, kept not */
};
/* Feeds bytes; each complete object is handed to fn(ctx, obj, len). A string of the object's
 * top level is kept to its first LIMIT_DOCKER_EVENT_STRING_BYTES (cut where no escape or
 * UTF-8 sequence is split; the JSON stays valid). An object still over cap is
 * read to its end and handed over as fn(ctx, NULL, 0), so one oversized event does not end
 * the stream (which would read it again when reopened). 0, ERR_PARSE (bytes outside an
 * object that are not whitespace), or fn's non-zero. */
int docker_splitter_feed(struct docker_splitter *s, const uint8_t *in, size_t len,
			 int (*fn)(void *ctx, const char *obj, size_t len), void *ctx);

struct docker_call {
	struct docker_client *dc;
	struct docker_slot *slot;
	enum docker_op op;
	int state;
	int status;                 /* HTTP status once the head arrived */
	bool tty;                   /* logs: raw stream, not multiplexed */
	char api_version[16];       /* ping: the engine's Api-Version header */
	struct docker_error error;
	uint32_t body_len;
	docker_log_fn on_log;
	docker_event_fn on_event;
	void *ctx;
	struct docker_demux demux;
	struct docker_splitter split;
};

/* Drives the call without blocking: 0 once complete (results readable), -EAGAIN to wait for
 * docker_call_events() on docker_call_fd(), a positive value when a callback stopped it, or a
 * negative error (details in call->error). */
int docker_call_step(struct docker_call *call);
/* The same, blocking (poll), bounded by the client's timeouts, except for wait, events and
 * followed logs, which take as long as they take. */
int docker_call_run(struct docker_call *call);
int docker_call_fd(const struct docker_call *call);
short docker_call_events(const struct docker_call *call); /* POLLIN/POLLOUT; 0: step soon */
/* Milliseconds until the call's timeout expires (step it then: it fails with -ETIMEDOUT), or -1
 * when none runs (wait, events, followed logs). For the event loop's timer. */
int docker_call_timeout_ms(const struct docker_call *call);
/* Releases the connection (closing it when the exchange was cut short). Always call it. */
void docker_call_end(struct docker_call *call);

/* An actionable sentence for a failed call. Returns out. */
const char *docker_error_text(const struct docker_error *e, char *out, size_t size);

/* ---- request specs ---- */
struct docker_kv {
	const char *key;
	const char *value;
};

struct docker_mount {
	const char *source; /* host path; must exist (Mounts, unlike Binds, never creates it) */
	const char *target;
	bool read_only;
};

struct docker_network_spec {
	const char *name;
	const char *driver;               /* NULL: "bridge" */
	bool internal;
	const char *subnet;               /* e.g. "10.213.0.16/28"; always give one (pools run out) */
	const struct docker_kv *labels;   /* ends with a NULL key; may be NULL */
	const struct docker_kv *options;  /* driver options, e.g. bridge.inhibit_ipv4 */
};

/* A sandbox's container (docs/ARCHITECTURE.md, the life of a create). String lists end with NULL; kv lists with a NULL key; NULL
 * lists are left out of the request (image defaults apply to Entrypoint and Cmd). */
struct docker_container_spec {
	const char *name;
	const char *image;
	const char *user;
	const char *working_dir;
	const char *const *entrypoint;
	const char *const *cmd;
	const char *const *env;
	const struct docker_kv *labels;
	const char *const *cap_drop;
	const char *const *cap_add;
	const char *const *security_opt;
	const struct docker_kv *tmpfs;    /* target -> mount options */
	const struct docker_kv *sysctls;
	const struct docker_kv *storage_opt; /* e.g. size -> bytes of the writable layer */
	const struct docker_mount *mounts; /* ends with a NULL source */
	const char *const *dns;           /* HostConfig.Dns: the embedded resolver's upstreams */
	const char *const *dns_search;    /* HostConfig.DnsSearch; ["."] means none */
	const char *network_mode;
	int64_t pids_limit;               /* 0: engine default */
	int64_t memory;                   /* bytes; 0: unlimited */
	int64_t nano_cpus;                /* 1e9 = one CPU; 0: unlimited */
	const char *restart_policy;       /* NULL: "no" */
	bool readonly_rootfs;
	bool init;
};

/* ---- starting calls (no I/O; 0, DOCKER_ERR_BUSY, ERR_LIMIT or -EINVAL) ---- */
int docker_ping_begin(struct docker_call *c, struct docker_client *dc);
int docker_version_begin(struct docker_call *c, struct docker_client *dc);
int docker_info_begin(struct docker_call *c, struct docker_client *dc);
int docker_network_create_begin(struct docker_call *c, struct docker_client *dc,
				const struct docker_network_spec *spec);
int docker_network_inspect_begin(struct docker_call *c, struct docker_client *dc, const char *id);
/* label: "key" or "key=value" */
int docker_network_list_begin(struct docker_call *c, struct docker_client *dc, const char *label);
int docker_network_remove_begin(struct docker_call *c, struct docker_client *dc, const char *id);
int docker_container_create_begin(struct docker_call *c, struct docker_client *dc,
				  const struct docker_container_spec *spec);
int docker_container_start_begin(struct docker_call *c, struct docker_client *dc, const char *id);
/* POST /containers/{id}/rename?name=NAME: 409 when another container has the name. */
int docker_container_rename_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				  const char *name);
int docker_container_inspect_begin(struct docker_call *c, struct docker_client *dc,
				   const char *id);
int docker_container_stop_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				int timeout_s);
/* signal: a name ("SIGKILL") or number */
int docker_container_kill_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				const char *signal);
/* Answers when the container is no longer running; takes as long as that takes. */
int docker_container_wait_begin(struct docker_call *c, struct docker_client *dc, const char *id);
/* stdout and stderr (de-chunked, de-multiplexed unless tty) to fn; tail < 0 means all. */
int docker_container_logs_begin(struct docker_call *c, struct docker_client *dc, const char *id,
				bool follow, int tail, bool tty, docker_log_fn fn, void *ctx);
int docker_container_remove_begin(struct docker_call *c, struct docker_client *dc,
				  const char *id, bool force);
int docker_container_list_begin(struct docker_call *c, struct docker_client *dc,
				const char *label);
/* filters: a JSON object as /events takes it ({"label":["k=v"],"type":["container"]}), or
 * NULL; since: unix seconds or 0. Runs until docker_call_end() or fn returns non-zero. */
int docker_events_begin(struct docker_call *c, struct docker_client *dc, const char *filters,
			int64_t since, docker_event_fn fn, void *ctx);
/* The images that have a tag (GET /images/json, dangling ones left out). */
int docker_image_list_begin(struct docker_call *c, struct docker_client *dc);

/* ---- results, after docker_call_step/run returned 0 ---- */
struct docker_version {
	char version[64];       /* engine release */
	char api_version[16];
	char min_api_version[16];
};

struct docker_info {
	char name[256];
	char server_version[64];
	char operating_system[256];
	char kernel_version[128]; /* the engine's kernel: a Desktop VM's, seen from a container */
	bool docker_desktop;    /* agenticd runs there only in a container inside its VM */
	bool userns_remap;      /* refused by agenticd: it changes host uids */
};


struct docker_network {
	char id[DOCKER_ID_SIZE];
	const char *name;
	const char *driver;
	const char *subnet;     /* first IPAM config */
	bool internal;
	struct docker_kv labels[DOCKER_LIST_MAX];
	uint32_t nlabels;
	struct docker_kv options[DOCKER_LIST_MAX];
	uint32_t noptions;
	char text[DOCKER_NETWORK_TEXT_BYTES]; /* the strings above */
	uint32_t text_len;
};

struct docker_container {
	char id[DOCKER_ID_SIZE];
	const char *name;       /* without Docker's leading '/' */
	const char *image;      /* Config.Image as created */
	const char *user;
	const char *status;     /* State.Status */
	bool running;
	int64_t pid;
	int64_t exit_code;
	const char *entrypoint[DOCKER_LIST_MAX];
	uint32_t nentrypoint;
	const char *cmd[DOCKER_LIST_MAX];
	uint32_t ncmd;
	const char *env[DOCKER_LIST_MAX];
	uint32_t nenv;
	struct docker_kv labels[DOCKER_LIST_MAX];
	uint32_t nlabels;
	/* HostConfig */
	const char *cap_add[DOCKER_LIST_MAX];
	uint32_t ncap_add;
	const char *cap_drop[DOCKER_LIST_MAX];
	uint32_t ncap_drop;
	const char *security_opt[DOCKER_LIST_MAX];
	uint32_t nsecurity_opt;
	struct docker_kv tmpfs[DOCKER_LIST_MAX];
	uint32_t ntmpfs;
	struct docker_kv sysctls[DOCKER_LIST_MAX];
	uint32_t nsysctls;
	struct docker_mount mounts[DOCKER_LIST_MAX]; /* top-level Mounts: what is mounted */
	uint32_t nmounts;
	uint32_t nexecs;        /* ExecIDs: execs (docker exec) that run in it now */
	const char *network_mode;
	/* NetworkSettings.Networks: each attached network, its name -> its NetworkID */
	struct docker_kv networks[DOCKER_LIST_MAX];
	uint32_t nnetworks;
	const char *restart_policy;
	int64_t pids_limit;
	int64_t memory;
	int64_t nano_cpus;
	bool readonly_rootfs;
	bool init;
	bool privileged;
	/* the strings above; SecurityOpt holds a whole seccomp profile */
	char text[32768 + LIMIT_SECCOMP_PROFILE_BYTES];
	uint32_t text_len;
};

/* One entry of a list result. */
struct docker_summary {
	char id[DOCKER_ID_SIZE];
	char name[256];         /* networks: Name; containers: first of Names, without '/' */
	char state[32];         /* containers: State */
};

/* create calls: the new object's Id */
int docker_result_id(struct docker_call *c, char id[DOCKER_ID_SIZE]);
int docker_result_version(struct docker_call *c, struct docker_version *out);
int docker_result_info(struct docker_call *c, struct docker_info *out);
int docker_result_network(struct docker_call *c, struct docker_network *out);
int docker_result_container(struct docker_call *c, struct docker_container *out);
int docker_result_wait(struct docker_call *c, int64_t *status_code);
/* Calls fn for each entry of a list result; stops at fn's first non-zero, returning it. */
int docker_result_each(struct docker_call *c, int (*fn)(void *ctx, const struct docker_summary *s),
		       void *ctx);
/* Calls fn for each IPAM subnet of each network of a network list result, saying whether
 * the network carries the label label_key=label_value; stops at fn's first non-zero, returning
 * it. A subnet that is not a string shorter than 64 bytes is skipped. */
int docker_result_each_subnet(struct docker_call *c, const char *label_key,
			      const char *label_value,
			      int (*fn)(void *ctx, const char *subnet, bool labelled), void *ctx);
/* Calls fn for each tag (RepoTags) of each image of an image list result; stops at fn's first
 * non-zero, returning it. A tag that is not a string shorter than 256 bytes is skipped. */
int docker_result_each_tag(struct docker_call *c, int (*fn)(void *ctx, const char *tag),
			   void *ctx);
/* The answer's JSON as it came, valid until docker_call_end: for a reader of fields the typed
 * results do not carry (the verifier). 0, or ERR_STATE when the call holds no answer. */
int docker_result_body(const struct docker_call *c, const char **body, size_t *len);
/* Looks up a label of an inspect result; NULL when absent. */
const char *docker_kv_get(const struct docker_kv *kv, uint32_t n, const char *key);

/* ---- blocking one-shot forms: begin, run, read the result, end. On failure *err (may be
 * NULL) holds the details for docker_error_text(). ---- */
/* Pings, reads /version, picks the version (docker_version_pick) and keeps it in dc. */
int docker_client_negotiate(struct docker_client *dc, struct docker_error *err);
int docker_info(struct docker_client *dc, struct docker_info *out, struct docker_error *err);
int docker_network_create(struct docker_client *dc, const struct docker_network_spec *spec,
			  char id[DOCKER_ID_SIZE], struct docker_error *err);
int docker_network_inspect(struct docker_client *dc, const char *id, struct docker_network *out,
			   struct docker_error *err);
int docker_network_remove(struct docker_client *dc, const char *id, struct docker_error *err);
int docker_container_create(struct docker_client *dc, const struct docker_container_spec *spec,
			    char id[DOCKER_ID_SIZE], struct docker_error *err);
int docker_container_start(struct docker_client *dc, const char *id, struct docker_error *err);
int docker_container_inspect(struct docker_client *dc, const char *id,
			     struct docker_container *out, struct docker_error *err);
int docker_container_stop(struct docker_client *dc, const char *id, int timeout_s,
			  struct docker_error *err);
int docker_container_kill(struct docker_client *dc, const char *id, const char *signal,
			  struct docker_error *err);
int docker_container_wait(struct docker_client *dc, const char *id, int64_t *status_code,
			  struct docker_error *err);
int docker_container_remove(struct docker_client *dc, const char *id, bool force,
			    struct docker_error *err);

#endif
