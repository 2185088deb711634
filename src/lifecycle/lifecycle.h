/* lifecycle.h: a sandbox's life as one state machine: create (its steps), ready, remove (its
 * steps), rolling back a failed create, conflict. One entry, lifecycle_on(sb, event); the
 * lifecycle drives a struct runtime (runtime.h) and reports upward only through the hooks
 * given to lifecycle_start, so it knows nothing of the admin API, exec sessions, transcripts
 * or the agent socket.
 *
 * States (sb->lc, enum lc_state in sandbox.h; sb->state is the coarse phase the API and
 * sandbox.json show, set from it):
 *
 *   state              phase     the runtime call running in it (if any)
 *   LC_FREE            free      -
 *   LC_NEW             creating  -            (slot taken by sandbox_new, nothing begun)
 *   LC_NET_SCAN        creating  NET_SCAN     (our /28 overlapped: read the engine's networks)
 *   LC_NET_CREATE      creating  NET_CREATE
 *   LC_CT_CREATE       creating  CT_CREATE
 *   LC_CT_START        creating  CT_START
 *   LC_CT_INSPECT      creating  CT_INSPECT
 *   LC_WAIT_READY      creating  -            (the init registers and reports READY)
 *   LC_READY           ready     -
 *   LC_READY_REFRESH   ready     CT_INSPECT   (the container started again: its pid)
 *   LC_CONFLICT        conflict  -            (found at start claiming another's uid)
 *   LC_CONFLICT_REFRESH conflict CT_INSPECT
 *   LC_RB_LOGS         creating  CT_LOGS      (rolling back: the init's last lines)
 *   LC_RB_CT_FIND      creating  CT_INSPECT   (by name: did the create whose answer was
 *                                              lost make a container with our instance label?)
 *   LC_RB_CT_REMOVE    creating  CT_REMOVE
 *   LC_RB_NET_REMOVE   creating  NET_REMOVE
 *   LC_RM_PENDING      removing  CT_INSPECT   (a refresh was running when the remove came)
 *   LC_RM_STOP         removing  CT_STOP
 *   LC_RM_CT_REMOVE    removing  CT_REMOVE
 *   LC_RM_NET_REMOVE   removing  NET_REMOVE
 *   LC_GONE_NET_REMOVE removing  NET_REMOVE   (its container was removed behind our back)
 *   LC_CLAIM_RENAME    creating  CT_RENAME    (a create claimed a warm sandbox: its name)
 *   LC_CLAIM_INIT      creating  -            (its init takes the claim's env: ClaimAck)
 *
 * A teardown step (RB_*, RM_*, GONE_*) whose call fails waits for its retry (sb->retry_at)
 * with no call running, then runs again; a failed create step rolls back. The last teardown
 * step releases the slot: ids back, record and workspace retired, LC_FREE.
 *
 * Events (struct lc_event), and what each state does with them (x: refused, an error and
 * nothing changes; -: ignored, 0 and nothing changes; c: deferred until the sandbox's call
 * ends, then handled as in the state it is in by then):
 *
 *   CREATE       LC_NEW only (else x)
 *   REMOVE       READY, CONFLICT: remove steps; *_REFRESH: RM_PENDING; else x (-EBUSY)
 *   CALL_DONE    the state's call answered: its next step (x when no call runs)
 *   AGENT_READY  WAIT_READY: ready; READY: logged; else -
 *   AGENT_LOST   - everywhere (a create waits for a reconnect until its deadline)
 *   CT_START     running; READY/CONFLICT: refresh; c while a call runs
 *   CT_DIE       running no more, the hooks' stopped; WAIT_READY: rolls back; c
 *   CT_DESTROY   creating with a container: rolls back; READY/CONFLICT: GONE_NET_REMOVE; c
 *   (what the runtime says was done to a container behind agenticd's back, EXEC,
 *   NET_CONNECT of another network, CHANGED, is no event: it reaches the tainted hook at
 *   once, in any state, and changes none)
 *   DEADLINE     WAIT_READY, CLAIM_INIT past sb->deadline: rolls back (504); else -
 *   RETRY        a teardown step waiting past sb->retry_at: runs it again; else -
 *   SHUTDOWN     creating, no call running: rolls back (503); a running create step rolls
 *                back when its call ends; else -
 *   RECOVERED    LC_NEW with a container: READY (else x)
 *   CONFLICT     LC_NEW, READY: CONFLICT (else x)
 *   CLAIM        READY warm (sb->pool), its container running, no call: CLAIM_RENAME (else x);
 *                its rename answered: CLAIM_INIT, or the name taken: READY in the pool again
 *                (the claim_refused hook), or another failure: rolls back
 *   CLAIMED      CLAIM_INIT: ready (the created hook) (else x)
 *   CLAIM_REFUSED CLAIM_INIT: rolls back (500) (else x)
 *
 * The warm pool (config warm_sandboxes): lifecycle_tick makes warm sandboxes (sb->pool, a
 * create of the default request) one at a time, when no other create runs, up to the count;
 * one whose create failed holds the next back WARM_RETRY_MS; a ready one no longer T1 is
 * removed. A claim's own rename is no taint (the engine's rename event, from the pool name
 * to the claimed one). After a claim the pools (this one and the warm networks) wait until
 * the claimed sandbox's first command has ended (lifecycle_command_ended), at most
 * POOL_HOLD_MS: an engine busy making the next warm sandbox would slow the command the
 * create was for.
 *
 * Invariants, checked after every event (lifecycle_check): a call runs only in a state that
 * has one; a creating step other than WAIT_READY always has its call running; a teardown or
 * refresh step has its call running or a retry due, not both; READY and CONFLICT have a container; a
 * sandbox past LC_NEW holds its uid (or, in conflict, its twin holds it); LC_FREE holds
 * nothing (no uid, no subnet, no call). With the checking switch on (AGENTIC_ALLOC_CHECK=1,
 * which the tests set for agenticd, or lifecycle_config.check) a broken one aborts; else it
 * is logged once per event.
 *
 * Time comes from the hooks' clocks (mono_ms, wall_ms), so a simulator controls it. The
 * lifecycle keeps no state outside the sandbox table, its own per-slot table (struct lc_sb:
 * the runtime call of each sandbox's step), the struct lifecycle_config it was started
 * with and the pools' clocks (a failed warm create's retry, a claim's hold; steps.h), which
 * lifecycle_start clears. A restarted daemon, in a simulator: the fake runtime drops its calls in flight, then
 * sandbox_table_reset(), netpool_init(), lifecycle_start() and recover_state(rt) rebuild
 * everything from the records and the runtime's objects.
 *
 * Its files: events.c (the entry, the runtime's reports, the loop's turn, the warm pool),
 * create.c (a create's steps), teardown.c (rollback, remove, refresh, the container's own
 * events), steps.c (the states and the steps they share; steps.h, the module's inside),
 * recover.c (start-up), netpool.c (warm networks), taint.c (a live sandbox's posture).
 */
#ifndef AGENTIC_MGMT_LIFECYCLE_H
#define AGENTIC_MGMT_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

#include "config/config.h"
#include "runtime/runtime.h"
#include "sandbox/sandbox.h"  /* struct sandbox, enum lc_state */

struct netpool;

_Static_assert(RT_ID_BYTES == SB_ENGINE_ID_BYTES, "an engine id fits a sandbox");

/* The lifecycle's own state of a sandbox's slot (sandbox_index), in storage handed to
 * lifecycle_start, written by the lifecycle alone. */
struct lc_sb {
	struct rt_call call;          /* the runtime call of the current step */
	bool call_active;             /* it runs: its answer comes as LC_EV_CALL_DONE */
};

/* sb's lifecycle state, to read. */
const struct lc_sb *lc_of(const struct sandbox *sb);

enum lc_event_kind {
	LC_EV_CREATE = 1,  /* req: the parsed request, alive until the container exists */
	LC_EV_REMOVE,      /* force, keep_workspace */
	LC_EV_CALL_DONE,   /* the sandbox's runtime call answered: lc_of(sb)->call.res */
	LC_EV_AGENT_READY, /* READY with setup_status "ready" on an authenticated stream */
	LC_EV_AGENT_LOST,
	LC_EV_CT_START,
	LC_EV_CT_DIE,
	LC_EV_CT_DESTROY,
	LC_EV_DEADLINE,
	LC_EV_RETRY,
	LC_EV_SHUTDOWN,
	LC_EV_RECOVERED,   /* recovery found it ready (LC_NEW with its container set) */
	LC_EV_CONFLICT,    /* recovery found another claiming its uid (LC_NEW or READY) */
	LC_EV_CLAIM,       /* a create claims this warm sandbox (READY, pool): sb->name is the
			    * new one, agent_id the pool's */
	LC_EV_CLAIMED,     /* its init took the claim (ClaimAck) */
	LC_EV_CLAIM_REFUSED, /* its init refused it: why */
	LC_EVENTS
};

struct lc_event {
	enum lc_event_kind kind;
	struct create_req *req;       /* CREATE */
	bool force, keep_workspace;   /* REMOVE */
	const char *why;              /* CLAIM_REFUSED: the init's fixed words */
};

/* Upward reports. Every hook may be NULL. They are called from inside lifecycle_on, once the
 * sandbox's state is consistent; a hook may feed an event back (pid_known may bring the
 * agent's READY at once, agent_drop its loss): the lifecycle handles it nested and checks
 * the invariants when the outermost event is done. */
struct lifecycle_hooks {
	/* The create finished: the sandbox is READY (answer 201 to sb->waiter). */
	void (*created)(void *ctx, struct sandbox *sb, int64_t took_ms);
	/* The create was rolled back completely: sb->err_status, err_code, error say why. The
	 * slot is freed right after. */
	void (*create_failed)(void *ctx, struct sandbox *sb);
	/* A claim's rename found the name taken by another container: the sandbox is back in
	 * the pool, as it was (answer sb->err_status etc. to sb->waiter; the claim's request
	 * parts kept with the sandbox are let go). */
	void (*claim_refused)(void *ctx, struct sandbox *sb);
	/* A claim is renamed and recorded: tell the init (SandboxClaim), now or when it
	 * registers. */
	void (*claim_send)(void *ctx, struct sandbox *sb);
	/* The remove finished (answer 200 to sb->waiter); the slot is freed right after. */
	void (*removed)(void *ctx, struct sandbox *sb);
	/* The container's pid is known (or changed): sb->pid, sb->pid_ns, sb->init_pidfd. */
	void (*pid_known)(void *ctx, struct sandbox *sb);
	/* The agent's stream must end (UNAVAILABLE, why). */
	void (*agent_drop)(void *ctx, struct sandbox *sb, const char *why);
	/* The init is gone (container stopped, sandbox going): exec sessions end with exec_why,
	 * the run's transcript stops with run_why. */
	void (*stopped)(void *ctx, struct sandbox *sb, const char *exec_why, const char *run_why);
	/* The slot is given up: anything holding it lets go (the agent's connection). */
	void (*released)(void *ctx, struct sandbox *sb);
	/* Something was done to its container behind agenticd's back (runtime.h: EXEC,
	 * NET_CONNECT of another network, CHANGED), seen on the engine's events or, for another
	 * network attached, on its inspect (source "inspect"). source is a fixed word. It may
	 * come again for the same thing (a replayed event): the hook treats that as nothing
	 * new. Whatever the sandbox's state; its state does not change. */
	void (*tainted)(void *ctx, struct sandbox *sb, enum rt_event kind, const char *source);
	/* The engine's view of its network was read (the create's inspect, recovery), or
	 * another network was connected to it (not ok, "other_network"): ok when it is its own
	 * network alone (and, managed, internal with IPv4 inhibited); why is struct
	 * rt_netcheck's word. */
	void (*network_read)(void *ctx, struct sandbox *sb, bool ok, const char *why);
	/* The agent is READY (the create's, or again after a reconnect or a restart of
	 * agenticd): its run is open. */
	void (*agent_ready)(void *ctx, struct sandbox *sb);
	/* Whether the agent is READY now (agent.h: agent_is_ready); NULL: never. */
	bool (*agent_is_ready)(void *ctx, const struct sandbox *sb);
	/* A create's admission (lifecycle_admit) of the secrets the broker reads: a VM
	 * credential's file (egress_secret_read: its length or -1) and a policy's secret files
	 * (egress_secret_check: 0, or -1 with why). NULL: a credential is refused, a policy's
	 * files are not checked. */
	long (*secret_read)(const char *path, uint8_t *out);
	int (*secret_check)(const struct config *cfg, const struct egress_policy *pol, char *why,
			    size_t cap);
	int64_t (*mono_ms)(void);     /* NULL: clock_mono_ms */
	int64_t (*wall_ms)(void);     /* NULL: clock_wall_ms */
	void *ctx;
};

struct lifecycle_config {
	const struct config *cfg;
	struct sandbox *sb;           /* the table, nsb slots */
	uint32_t nsb;
	struct lc_sb *slots;          /* nsb of them: cleared at start (no call runs yet) */
	struct runtime *rt;           /* its sink is set to the lifecycle's */
	struct netpool *pool;         /* the warm networks (netpool.h), NULL: none */
	const struct lifecycle_hooks *hooks;
	bool check;                   /* abort on a broken invariant */
	/* the init binary's copy the engine binds at /sbin/agentic-init (a container's) and what
	 * it is on the engine's host; NULL: not checked (a simulator) */
	const char *init_path;
	const struct policy_mount_id *init_id;
};

/* The hooks' agent_is_ready: false when none is set. */
static inline bool lifecycle_agent_ready(const struct lifecycle_hooks *h, const struct sandbox *sb)
{
	return h->agent_is_ready && h->agent_is_ready(h->ctx, sb);
}

/* Takes the config (copied) and the runtime's sink; resets the lifecycle's own state. */
void lifecycle_start(const struct lifecycle_config *cfg);

/* The one entry: 0, or a negative code when the event is refused in sb's state (ERR_STATE;
 * -EBUSY for a remove while creating or removing), and then nothing changed. */
int lifecycle_on(struct sandbox *sb, const struct lc_event *ev);

static inline int lifecycle_create(struct sandbox *sb, struct create_req *req)
{
	struct lc_event ev = { .kind = LC_EV_CREATE, .req = req };

	return lifecycle_on(sb, &ev);
}

static inline int lifecycle_remove(struct sandbox *sb, bool force, bool keep_workspace)
{
	struct lc_event ev = { .kind = LC_EV_REMOVE, .force = force,
			       .keep_workspace = keep_workspace };

	return lifecycle_on(sb, &ev);
}

static inline int lifecycle_signal(struct sandbox *sb, enum lc_event_kind kind)
{
	struct lc_event ev = { .kind = kind };

	return lifecycle_on(sb, &ev);
}

/* The loop's turn: the runtime's tick (its answers reach lifecycle_on as CALL_DONE), the
 * container events the runtime reported since the last turn (acted on now, for sandboxes
 * with no call running; the others when theirs ends), deadlines and retries due at now,
 * expiries due at the wall clock's now (lifecycle_expiry), the warm pool. */
void lifecycle_tick(int64_t now);
/* The engine's view of sb's networks (nc from CT_INSPECT or recovery's inspect) to the
 * hooks: network_read, and tainted when another network is attached. Nothing when it was
 * not read. */
void lifecycle_network_read(struct sandbox *sb, const struct rt_netcheck *nc);
/* A `docker exec` found running in sb's container (recovery's inspect: its event may be gone
 * from the engine's buffer) to the tainted hook, source "inspect". */
void lifecycle_exec_seen(struct sandbox *sb);
/* A command of sb's ended (the exec module's report): a claim's first lets the pools refill. */
void lifecycle_command_ended(const struct sandbox *sb);
/* The next time lifecycle_tick must run (monotonic ms), or INT64_MAX. */
int64_t lifecycle_next_deadline(int64_t now);
/* SIGTERM: no new work; creates in flight roll back; the event stream closes. */
void lifecycle_shutdown(void);
bool lifecycle_stopping(void);
/* Creates or removes in flight, or a warm network being made. */
bool lifecycle_busy(void);
/* The sandbox is going (rolling back or being removed): its agent is not to be served. */
bool lifecycle_going(const struct sandbox *sb);
/* Checks sb's invariants; false (after logging which, or aborting with the checking switch
 * on) when one is broken. */
bool lifecycle_check(const struct sandbox *sb);
const char *lifecycle_state_name(enum lc_state s);

/* A parsed create admitted (admit.c), for any front end: refused by tier (422 tier_refused),
 * the VM runtime unavailable (422 runtime_unavailable), a VM's credentials unreadable or too
 * large (422 credential_unavailable, credentials_too_large), a policy's secret outside
 * secret_dir (422 egress_invalid), its name taken (409 name_taken), at capacity (503
 * capacity), too long to keep (400); else a warm sandbox claimed when one fits, or a slot and
 * lifecycle_create. The sandbox, its waiter (kind, conn, gen) set: the answer comes through
 * the hooks (it may already have come: the slot may be free again); or NULL with e filled
 * and nothing changed. vm: the VM runtime (NULL: none). */
struct runtime_vm;
struct sandbox *lifecycle_admit(struct create_req *req, const struct runtime_vm *vm,
				enum sb_waiter_kind kind, int32_t conn, uint32_t gen,
				struct request_error *e);

/* What a create keeps with its sandbox before lifecycle_create (keep.c): its cmd, labels,
 * mounts, posture (hw: a VM on a hardware hypervisor) and egress policy; 0, or a negative
 * code when they are too long to keep. */
int lifecycle_keep_request(struct sandbox *sb, const struct create_req *req, bool hw);
/* A claim's: the same, but the engine's view of the warm sandbox's network stays, and its
 * env is kept for the init; 0, or -1 (nothing is claimed: the sandbox is as it was). */
int lifecycle_keep_claim(struct sandbox *sb, const struct create_req *req, bool hw);
/* A sandbox's expiry (wall ms; 0: none): a create's ttl_ms counted from the moment it is
 * ready (its answer), kept in its record (a restart keeps it). lifecycle_tick removes a READY sandbox past it (force,
 * logged "sandbox expired"). lifecycle_expiry_set changes it (at_ms <= 0: none) and rewrites
 * the record of a ready sandbox: 0 or its error (the new expiry holds in memory). */
int lifecycle_expiry_set(struct sandbox *sb, int64_t at_ms);
int64_t lifecycle_expiry(const struct sandbox *sb);
/* A new id, "i" and 20 of [a-z0-9] (LIFECYCLE_ID_BYTES with its NUL), as hosted E2B's: a
 * warm sandbox's name, which a create that takes any name keeps when it claims it (no rename),
 * and an E2B sandbox's. */
#define LIFECYCLE_ID_BYTES 22
void lifecycle_new_id(char *id);
/* The create's name, else sbx-<8 hex> no other sandbox has (sb may be a warm one, which
 * sandbox_by_name never finds); with agent_id, a cold create's, the name its init says. */
void lifecycle_name(struct sandbox *sb, const char *name, bool agent_id);

#endif
