/* sandbox.h: a sandbox as agenticd holds it (its record, its agent stream's state; its run's
 * transcript is transcript/'s, per slot), the sandbox table and the control-uid map (a
 * sandbox as JSON is the admin API's, admin.h). The subnet map is subnet.h's; a record's
 * cmd, labels and mounts are string runs (strrun.h). */
#ifndef AGENTIC_MGMT_SANDBOX_H
#define AGENTIC_MGMT_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/base.h"
#include "docker/docker.h"
#include "egress/policy.h"
#include "grpc/grpc.h"
#include "json/json.h"
#include "config/config.h"
#include "sandbox/reqcheck.h"
#include "sandbox/posture.h"
#include "sandbox/request.h"
#include "sandbox/strrun.h"
#include "sandbox/subnet.h"

enum sb_state {
	SB_FREE = 0,
	SB_CREATING,   /* persisted "creating" */
	SB_READY,      /* persisted "ready" (created; the agent may be connected or not) */
	SB_REMOVING,   /* persisted "removing" */
	SB_CONFLICT,   /* found at start with a uid another container claims: never trusted */
};

/* A sandbox's life, step by step: lifecycle.h says what each state is and does. */
enum lc_state {
	LC_FREE = 0,
	LC_NEW,
	LC_NET_SCAN,
	LC_NET_CREATE,
	LC_CT_CREATE,
	LC_CT_START,
	LC_CT_INSPECT,
	LC_WAIT_READY,
	LC_READY,
	LC_READY_REFRESH,
	LC_CONFLICT,
	LC_CONFLICT_REFRESH,
	LC_RB_LOGS,
	LC_RB_CT_REMOVE,
	LC_RB_NET_REMOVE,
	LC_RM_PENDING,
	LC_RM_STOP,
	LC_RM_CT_REMOVE,
	LC_RM_NET_REMOVE,
	LC_GONE_NET_REMOVE,
	LC_RB_CT_FIND,
	LC_CLAIM_RENAME,
	LC_CLAIM_INIT,
	LC_STATES
};

/* sandbox.pending: container events waiting for the sandbox's call to end */
#define LC_PEND_START 1
#define LC_PEND_DIE 2
#define LC_PEND_DESTROY 4

_Static_assert(REQUEST_NETWORK_BYTES == SB_NET_BYTES, "a requested network name fits a sandbox");

/* Which front end waits for a sandbox's create or remove (sandbox.waiter): the daemon's
 * hooks answer it through that front end's connection table. */
enum sb_waiter_kind { SB_WAITER_ADMIN = 0, SB_WAITER_E2B = 1 };

struct sandbox {
	enum sb_state state;          /* the phase, set from lc (lifecycle/steps.c) */
	enum lc_state lc;             /* where its life is (lifecycle.h) */
	uint32_t gen;                 /* bumped whenever the slot is reused */
	char name[SB_NAME_BYTES];
	/* the name its container was made with (its init's AGENT_ID, what its connection says
	 * it is): the name, but for a claimed warm sandbox, which keeps its pool name here */
	char agent_id[SB_NAME_BYTES];
	bool pool;                    /* a warm sandbox not claimed (yet): no run, no API */
	bool claimed;                 /* made warm, then claimed by a create */
	/* a claim's env: nclaim_env "K=V" strings (strrun), sent to the init at the claim and
	 * after every registration since (the container's own env is the pool's); in memory
	 * only, never in sandbox.json: after a restart of agenticd it is empty and not sent */
	uint16_t nclaim_env;
	uint32_t claim_env_len;
	char claim_env[LIMIT_SANDBOX_CLAIM_ENV_BYTES];
	char instance_id[SB_ID_BYTES];
	char container_id[SB_ENGINE_ID_BYTES];
	char network[SB_NET_BYTES];   /* the network's name (ours, or the operator's) */
	char network_id[SB_ENGINE_ID_BYTES];
	char image[CONFIG_STR_BYTES];
	char subnet_text[20];
	uint32_t uid;
	int32_t subnet;               /* index in sandbox_subnet_pool, -1 for none */
	uint8_t net_scans;            /* engine networks read again for this create */
	bool uid_taken;
	bool net_managed;             /* our network, removed with the sandbox */
	bool net_exists;
	bool ct_exists;
	bool ct_maybe;                /* its container create's answer was lost: one of its name
				       * may be its own (the rollback looks) */
	bool running;
	bool force, keep_workspace;
	bool dir_made;
	uint64_t disk_bytes;          /* the workspace image's size (its disk budget) */
	bool writable_root;           /* its root layer is writable, up to disk_bytes */
	uint64_t transcript_bytes;    /* its runs' budget on the agentshare (0: a record from
				       * before budgets, held to transcript_budget_bytes) */
	bool vm;                      /* runtime "vm": a QEMU guest (runtime_vm.h; its state:
				       * vm_of) */
	int64_t pid;                  /* State.Pid, 0 when not running */
	char pid_ns[48];              /* readlink of /proc/<pid>/ns/pid */
	int init_pidfd;               /* that process, pinned when pid was read; -1: none */
	int64_t created_ms, ready_ms; /* wall clock */
	int64_t expires_at;           /* wall ms: removed then (its TTL); 0: never */
	int64_t ttl_ms;               /* a create's TTL until it is ready: then expires_at */
	int64_t t_begin, t_net, t_ct, t_start, t_auth; /* monotonic ms of a create's steps */
	int64_t deadline;             /* monotonic ms: ready_timeout of a create, or 0 */
	/* the egress policy, normalised JSON (docs/EGRESS.md "Policy"); "": none, egress off */
	char egress_json[EGRESS_POLICY_BYTES];
	/* the front end's connection waiting for this create or remove, or -1, and whose */
	int32_t waiter;
	uint32_t waiter_gen;
	enum sb_waiter_kind waiter_kind;
	/* the E2B API's own fields (e2b/e2b_state.c: template, metadata, token hash, start), a
	 * JSON object kept in sandbox.json so a restart keeps them; "": not an E2B sandbox */
	char e2b_json[LIMIT_E2B_RECORD_BYTES];
	int err_status;               /* HTTP status of a failed create */
	const char *err_code;         /* its API error code */
	char error[SB_ERROR_BYTES];
	char init_log[LIMIT_CREATE_LOG_BYTES]; /* the init's last log lines, at a failed create */
	uint32_t log_len;
	int64_t retry_at;             /* monotonic ms: retry a failed rollback or remove step */
	/* container events (LC_PEND_*) seen while its call ran, acted on once it is done */
	uint8_t pending;
	int64_t exit_code;
	struct create_req *req;       /* the create's request, until the container exists */
	/* what the request asked for, kept for inspect and sandbox.json */
	uint16_t ncmd, nlabels, nmounts;
	uint32_t mount_ro;            /* bit i: mount i read-only */
	char cmd[LIMIT_SANDBOX_CMD_BYTES];
	uint32_t cmd_len;
	char labels[LIMIT_SANDBOX_LABEL_BYTES];
	uint32_t labels_len;
	char mounts[LIMIT_SANDBOX_MOUNT_BYTES];
	uint32_t mounts_len;
	struct policy_mount_id mount_id[LIMIT_SANDBOX_MOUNTS]; /* what each source was, checked */
	struct posture posture;       /* its tier and why (posture.h); kept in sandbox.json */
};

/* The table: nsb slots at sb and the control-uid map's bits (control_uid_min..max of cfg,
 * (count + 63) / 64 words), storage agenticd.c takes from its region at start. Every slot
 * free; the subnet map is set up apart (subnet_init). */
void sandbox_table_init(const struct config *cfg, struct sandbox *sb, uint32_t nsb,
			uint64_t *uid_bits);
const struct config *sandbox_config(void); /* the config the table was set up with */
uint32_t sandbox_slots(void);                 /* the table's size (max_sandboxes) */
struct sandbox *sandbox_slot(uint32_t i);     /* slot i, free or not; NULL past the end */
uint32_t sandbox_index(const struct sandbox *sb); /* sb's slot */
uint32_t sandbox_live(void);                  /* slots not SB_FREE */
/* A sandbox's transcript budget: its transcript_bytes, else the config's. */
uint64_t sandbox_transcript_budget(const struct sandbox *sb);
struct idalloc *sandbox_uid_map(void);        /* the control uids taken (recovery marks) */
/* A sandbox by its name; never a warm one not claimed (the API knows none of those). */
struct sandbox *sandbox_by_name(const char *name);
struct sandbox *sandbox_by_uid(uint32_t uid);
struct sandbox *sandbox_by_container(const char *id);
struct sandbox *sandbox_new(void);  /* NULL when the table is full */
/* Forgets every sandbox, uid, subnet and foreign /28 held in memory, closing what the slots
 * hold open (a restart in a simulator: then netpool_init, lifecycle_start and recover_state
 * rebuild it from the records and the runtime). */
void sandbox_table_reset(void);
/* A claim that did not go ahead: the warm sandbox as it was (its pool name, no cmd, labels,
 * env or reasons of the claim's request). */
void sandbox_claim_undo(struct sandbox *sb);
/* Releases the slot with its uid and subnet (the lifecycle's hooks let go of the rest first). */
void sandbox_free(struct sandbox *sb);
/* Next-fit from the maps: 0 or ERR_LIMIT when every uid (/28) is taken. */
int sandbox_take_uid(struct sandbox *sb);
int sandbox_take_subnet(struct sandbox *sb);
/* Gives uid and subnet back (a uid a conflicting twin also claims stays reserved for it). */
void sandbox_release_ids(struct sandbox *sb);
const char *sandbox_state_name(const struct sandbox *sb);
/* Its record, instances/<id>/sandbox.json (0600; record.c): a temp file, fsync, rename, fsync
 * of the directory, so a restarted agenticd reads the old record or the new one. */
int sandbox_record_write(const struct config *cfg, const struct sandbox *sb);
/* The same without the two fsyncs: a restarted agenticd reads it, a host that went down
 * before the kernel wrote it out may not. Only for a state that nothing ran in, which a
 * sandbox_record_write follows before anything runs or anyone is answered; or for a claim's
 * ready record, whose sandbox_record_sync follows its answer in the same turn of the loop,
 * before anything else is read or run (a host that goes down in between takes the sandbox
 * with it). */
int sandbox_record_write_unsynced(const struct config *cfg, const struct sandbox *sb);
/* The two fsyncs of a record sandbox_record_write_unsynced wrote: 0 or -errno. */
int sandbox_record_sync(const struct config *cfg, const struct sandbox *sb);
/* Reads instances/<id>/sandbox.json into sb (the fields it holds) and its state word: 0,
 * -ENOENT or ERR_PARSE. */
int sandbox_record_read(const struct config *cfg, const char *id, struct sandbox *sb,
			char *state, size_t state_size);
/* Calls fn for every instance id that has a sandbox.json, until fn returns non-zero. */
int sandbox_record_each(const struct config *cfg, int (*fn)(void *ctx, const char *id),
			void *ctx);
/* key: an ISO 8601 UTC time of wall ms (ms 0: null); key NULL: the value alone. */
void sandbox_time_write(struct json_writer *w, const char *key, int64_t ms);
/* Pins the sandbox's container PID 1 (sb->pid, State.Pid) as sb->init_pidfd, for the resolver,
 * and reads its pid namespace into sb->pid_ns (the run's key); both empty when the container
 * is not running or that process is already gone. */
void sandbox_read_pid_ns(struct sandbox *sb);
/* The request's binds, seen in the running container (sb->pid, sb->pid_ns), are the sources
 * that were checked (sb->mount_id): the engine resolved each path again when it started the
 * container; so is /sbin/agentic-init, init_id (the init's copy; NULL: not checked). 0;
 * -EPERM when one is something else, or -errno when it cannot be checked, with
 * the reason in why. */
int sandbox_check_binds(const struct sandbox *sb, const struct policy_mount_id *init_id,
			char *why, size_t why_size);
/* The pid (in agenticd's namespace) of the process a pidfd names, 0 when it has exited, or -1
 * when that cannot be read. */
pid_t sandbox_pidfd_pid(int pidfd);


/* What the modules above tell a sandbox's record, each written here only: the front end's
 * connection waiting for its create or remove (-1: none), its egress policy (normalised
 * JSON, "" for none), the E2B API's fields (JSON, "" for none; false when it does not fit),
 * when its init's stream was accepted (monotonic ms), and the init's last log lines (set, or
 * appended keeping the tail that fits). */
void sandbox_waiter_set(struct sandbox *sb, enum sb_waiter_kind kind, int32_t conn,
			uint32_t gen);
void sandbox_egress_json_set(struct sandbox *sb, const char *json);
bool sandbox_e2b_json_set(struct sandbox *sb, const char *json);
void sandbox_auth_mark(struct sandbox *sb, int64_t mono_ms);
void sandbox_init_log_set(struct sandbox *sb, const char *text, size_t len);
void sandbox_init_log_append(struct sandbox *sb, const char *data, size_t len);

#endif
