/* request.h: what a client asks of agenticd, read and checked before anything acts on it: a
 * create's JSON body, and an exec however it came (the HTTP API's JSON body, or the admin gRPC
 * service's ExecRequest). One set of rules, one wording: a refusal says the same whichever
 * front end carried the request, and the front end only maps it to its own status. */
#ifndef AGENTIC_MGMT_REQUEST_H
#define AGENTIC_MGMT_REQUEST_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "docker/docker.h"
#include "egress/policy.h"
#include "config/config.h"
#include "sandbox/reqcheck.h"
#include "profile/profile.h"

/* Why a request was refused: an HTTP status (400 malformed, 422 refused by policy), the API's
 * error code (bad_json, bad_request, bad_name, refused) and a message for the user. */
struct request_error {
	int status;
	const char *code;
	char message[512];
};

/* Where a request's strings live once unescaped or joined: caller storage, filled in order. */
struct request_text {
	char *buf;
	uint32_t len, cap;
};

/* ---- a parsed create request (lives in its admin connection) ---- */
#define REQUEST_NETWORK_BYTES 64      /* a network name, with its NUL: a sandbox keeps it */
/* The container label naming the startup profile a sandbox was made from. */
#define REQUEST_PROFILE_LABEL "agentic-startup-profile"

struct profile_set;

/* Which create body: v1's (POST /api/v1/containers: every field, "profile" optional) or
 * admin-v2's (POST /api/v2/admin/instances: "startup_profile_id" required, env and cmd only
 * from the profile, "runtime" "docker"). */
enum request_api { REQUEST_API_V1 = 0, REQUEST_API_V2 };

/* A readiness probe of the create's startup profile: a command run in the sandbox once it is
 * ready (as an exec: the workload user, /workspace), which must exit 0 within timeout_s. */
#define REQUEST_PROBES_MAX 4
struct request_probe {
	const char *argv[LIMIT_SANDBOX_CMD_ARGS + 1];
	uint32_t argc;
	int32_t timeout_s;
};

/* A VM's credential (its profile's credential_refs): the host-side secret's id (a file of
 * vm_credentials_dir) and where the guest puts it. */
#define VM_CREDENTIAL_DIR "/run/credentials"   /* the guest's tmpfs for file targets */
#define REQUEST_CRED_NAME_BYTES 256
struct request_cred {
	const char *id;
	const char *name;             /* an env name, or a path below VM_CREDENTIAL_DIR */
	bool file;
};

struct create_req {
	const char *name;             /* NULL: sbx-<8 hex> */
	bool name_any;                /* name is a front end's pick: a claimed warm sandbox keeps
				       * its own (lifecycle_new_id's; set by E2B, never parsed) */
	const char *image;            /* NULL: default_image */
	const char *network;          /* NULL: a managed network */
	const char *env[LIMIT_SANDBOX_ENV + 1];
	uint32_t nenv;
	const char *cmd[LIMIT_SANDBOX_CMD_ARGS + 1];
	uint32_t ncmd;
	struct docker_kv labels[LIMIT_SANDBOX_LABELS + 1];
	uint32_t nlabels;
	struct docker_mount mounts[LIMIT_SANDBOX_MOUNTS + 1];
	struct policy_mount_id mount_id[LIMIT_SANDBOX_MOUNTS];
	uint32_t nmounts;
	uint64_t disk_bytes;          /* 0: default_disk_bytes */
	uint64_t transcript_bytes;    /* 0: transcript_budget_bytes */
	uint64_t memory_bytes;        /* 0: default_memory_bytes */
	uint32_t pids;                /* 0: default_pids_limit */
	uint64_t nano_cpus;           /* 0: default_nano_cpus */
	bool writable_root;           /* a writable root layer, bounded by StorageOpt size */
	bool vm;                      /* runtime "vm" (the body's, else its profile's) */
	struct request_cred creds[PROFILE_CREDS_MAX]; /* a VM's, from its profile */
	uint32_t ncreds;
	bool require_t1;              /* require_tier "T1": refused if it would be T0 */
	const char *profile_id;       /* the startup profile it starts from, NULL: none */
	struct request_probe probes[REQUEST_PROBES_MAX]; /* the profile's, run once it is ready */
	uint32_t nprobes;
	/* the egress policy (the body's "egress", else its profile's), normalised; "": none */
	char egress_json[EGRESS_POLICY_BYTES];
	bool egress_report;           /* its mode is "report" */
	int64_t ttl_ms;               /* removed this long after its create; 0: never */
	int64_t expires_at;           /* wall ms: removed then (a front end's own TTL, counted from
				       * its own start: E2B's); 0: none. ttl_ms, when set, wins */
	char text[LIMIT_ADMIN_BODY_BYTES]; /* the strings above, unescaped */
	uint32_t text_len;
};

/* A create's body (JSON; empty: every default) into req. Mount sources are resolved and
 * checked against cfg's mount policy (they must exist). A body naming a startup profile of
 * profiles (NULL: none can be named) starts from it: its image, env, cmd, resources, mounts
 * and network, copied into req->text (a reload of the set later changes nothing here), then
 * the body's fields on top (image, network, resources and a non-empty cmd replace; env,
 * labels and mounts add). A profile is refused (422) when it is unknown or invalid, names a
 * runtime other than docker, would materialize raw credentials in this shared-kernel
 * sandbox (profile_shared_kernel_refusal). A body's "egress" (a policy, egress/policy.h)
 * replaces the profile's; a bad one is 422 egress_invalid with the reader's message. With a
 * policy, the proxy's variables (request_proxy_env) are set in env, over the request's own.
 * 0, or -1 with e filled. */
int request_create_parse(struct create_req *req, const struct config *cfg,
			 const struct profile_set *profiles, enum request_api api, const void *body,
			 size_t len, struct request_error *e);

/* What this build refuses of startup profile p, whoever names it (a create, or GET
 * /api/v2/admin/profiles/ID saying whether it can be used): 0, or -1 with e (422 and the
 * words the create would get). */
struct profile;
int request_profile_check(const struct profile *p, struct request_error *e);

/* The variables a workload of a sandbox with an egress policy gets (its container's command
 * at create, and every exec), whatever the request said: "HTTP_PROXY=http://127.0.0.1:3128",
 * ... NULL-ended. request_proxy_env_key: kv ("KEY=VALUE") sets one of their keys. */
#define REQUEST_PROXY_ENV_N 6
extern const char *const request_proxy_env[REQUEST_PROXY_ENV_N + 1];
bool request_proxy_env_key(const char *kv);

/* ---- an exec request ---- */
struct exec_req {
	const char *argv[LIMIT_SANDBOX_CMD_ARGS + 1];
	uint32_t argc;
	const char *env[LIMIT_SANDBOX_ENV + 1];   /* "K=V" */
	uint32_t nenv;
	const char *working_dir;
	int32_t timeout_seconds;
	bool tty;                 /* on a pseudo-terminal of rows x cols (0: 24 x 80) */
	uint16_t rows, cols;
	/* the transcript gets the start line and the result, not the output (a file transfer:
	 * docs/TRANSCRIPTS.md "Quiet commands") */
	bool quiet;
};

/* An exec's JSON body, {"cmd": [...], "env", "working_dir", "timeout_seconds", "tty", "rows",
 * "cols"}, into er (its strings in t), then request_exec_check. 0, or -1 with e. */
int request_exec_parse(struct exec_req *er, struct request_text *t, const void *body,
		       size_t len, struct request_error *e);
/* For a front end that carries the parts apart: one more argument (the program first); one
 * more env entry, joined as "key=value" in t. 0, or -1 with e. */
int request_exec_arg(struct exec_req *er, const char *arg, struct request_error *e);
int request_exec_env(struct exec_req *er, struct request_text *t, const char *key,
		     const char *value, struct request_error *e);
/* The rules every exec passes once its parts are in: a program, an absolute working_dir (or
 * none), timeout_seconds from 0 (none) to LIMIT_EXEC_TIMEOUT_S. 0, or -1 with e. */
int request_exec_check(const struct exec_req *er, struct request_error *e);

#endif
