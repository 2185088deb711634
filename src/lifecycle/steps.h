/* steps.h: the lifecycle's inside, shared by its files and included by no other module (nor
 * by a test but the lifecycle's own): the states' table, the machine's own state, the steps
 * every part takes and the per-slot table's writable side. lifecycle.h is the interface.
 * Within the module, calls point one way: events.c (the entry) calls create.c and
 * teardown.c, and all three call steps.c, which calls none of them. */
#ifndef AGENTIC_LIFECYCLE_STEPS_H
#define AGENTIC_LIFECYCLE_STEPS_H

#include <stdbool.h>
#include <stdint.h>

#include "lifecycle/lifecycle.h"

/* What a state belongs to: decides which events it takes and where a teardown goes next. */
enum lc_family { F_NONE, F_CREATE, F_READY, F_CONFLICT, F_ROLLBACK, F_REMOVE, F_GONE };

struct lc_state_info {
	const char *name;
	enum sb_state phase;
	enum rt_op op;                /* the runtime call the state runs; 0: none */
	enum lc_family family;
};

extern const struct lc_state_info lc_states[LC_STATES];
extern struct lifecycle_config lc_conf;  /* lifecycle_start's, copied */
extern bool lc_stopping;                 /* SIGTERM: no new work */
extern int64_t lc_warm_retry_at;         /* monotonic: a warm sandbox's create failed; none
					  * before this */
#define WARM_RETRY_MS 5000
/* A claim's first command runs before the pools refill: neither a warm sandbox's create nor a
 * warm network's takes the engine (and the CPU) until the claimed sandbox's first command has
 * ended (lifecycle_command_ended) or POOL_HOLD_MS have passed. */
extern int64_t lc_pool_hold_until;       /* monotonic; 0: no hold */
#define POOL_HOLD_MS 250

#define HOOK(name, ...) \
	do { \
		if (lc_conf.hooks->name) \
			lc_conf.hooks->name(lc_conf.hooks->ctx, __VA_ARGS__); \
	} while (0)

/* sb's entry in the per-slot table, to write (lc_of reads it). */
static inline struct lc_sb *lc_slot(struct sandbox *sb)
{
	return &lc_conf.slots[sandbox_index(sb)]; /* lc_conf.nsb is the table's size */
}

int64_t lc_mono(void);          /* the hooks' clocks (lifecycle.h) */
int64_t lc_wall(void);

static inline enum lc_family lc_family_of(const struct sandbox *sb)
{
	return lc_states[sb->lc].family;
}

static inline const char *lc_subnet_or_dash(const struct sandbox *sb)
{
	return sb->subnet_text[0] ? sb->subnet_text : "-";
}

/* A broken invariant: logged, then an abort with the checking switch on; false. */
bool lc_broken(const struct sandbox *sb, const char *what);

/* ---- steps.c: the steps ---- */
void lc_set_state(struct sandbox *sb, enum lc_state s);

/* Begins the call of sb's state. A create step that cannot begin rolls back; a teardown or
 * refresh step is retried. */
void lc_begin(struct sandbox *sb);
/* Enters state s and begins its call, if it has one. */
void lc_enter(struct sandbox *sb, enum lc_state s);
bool lc_creates_running(void);
/* The warm networks refilled between creates (the engine serialises network work). */
void lc_pool_fill(void);
/* The create (or claim) is done: READY, recorded, the created hook. */
void lc_finish_create(struct sandbox *sb);
/* Next step of a rollback, remove or gone sandbox, from what still exists; the last one
 * releases the slot. */
void lc_teardown_next(struct sandbox *sb, enum lc_family f);
/* A create failed (status, code and the error for the API): its rollback begins. */
void lc_fail_create(struct sandbox *sb, int status, const char *code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A CT_INSPECT's answer into sb: running, pid, exit code, the pid namespace. */
void lc_take_inspect(struct sandbox *sb);

/* ---- create.c: a create's steps ---- */
int lc_on_create(struct sandbox *sb, struct create_req *req);
int lc_on_claim(struct sandbox *sb);
/* A create step's call answered: the next step, or the rollback. */
void lc_create_step_done(struct sandbox *sb);

/* ---- teardown.c: a sandbox going, and the container's own events ---- */
int lc_on_remove(struct sandbox *sb, bool force, bool keep_workspace);
/* A container event (LC_PEND_*): now when no call runs, else once it is done. */
int lc_on_container(struct sandbox *sb, uint8_t bit);
/* What the container did while the sandbox's call ran: a destroy outweighs the rest. */
void lc_drain(struct sandbox *sb);
void lc_find_done(struct sandbox *sb);
void lc_remove_steps(struct sandbox *sb);
void lc_teardown_done(struct sandbox *sb);
void lc_refresh_done(struct sandbox *sb);
/* Appends the init's last log lines (scrubbed) to a failed create's error. */
void lc_append_init_log(struct sandbox *sb);

#endif
