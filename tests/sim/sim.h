/* sim.h: the deterministic simulation of agenticd (tests/sim). One seed drives the real
 * lifecycle, recovery, agent stream and transcript code against a fake engine, fake inits and
 * a simulated clock; every choice comes from one PRNG, so a seed replays exactly.
 *
 * The engine is a fake struct runtime (runtime.h, engine.c) handed to the lifecycle and to
 * recovery; the rest sits under the product's own calls, linked with -Wl,--wrap: the gRPC
 * call a Connect stream runs on (init.c), the clock, the random ids, and the peer checks that
 * need a real process (sim.c). */
#ifndef AGENTIC_TESTS_SIM_H
#define AGENTIC_TESTS_SIM_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "agent/agent.h"
#include "agent/exec.h"
#include "daemon/daemon.h"
#include "lifecycle/recover.h"
#include "workspace/host.h"
#include "workspace/share.h"
#include "transcript/runlog.h"

/* ---- the PRNG: splitmix64, seeded per run; nothing else may decide ---- */
extern uint64_t sim_rng;
static inline uint64_t rnd(void)
{
	uint64_t z = (sim_rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline uint32_t rnd_below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}
/* true with probability per_mille / 1000 */
static inline bool chance(uint32_t per_mille)
{
	return rnd_below(1000) < per_mille;
}

/* ---- the simulated clock ---- */
extern int64_t sim_now;          /* monotonic ms */
#define SIM_WALL_BASE 1764547200000ll /* 2025-12-01T00:00:00Z: wall = base + mono */

/* ---- the event trace: a bounded ring, printed when a seed fails ---- */
void trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Stops the seed: prints why, the trace, how to replay; exits non-zero. */
void sim_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
#define SIM_CHECK(cond, ...) do { if (!(cond)) sim_fail(__VA_ARGS__); } while (0)

/* ---- knobs (environment, read once): fault rates in per mille ---- */
struct sim_knobs {
	uint32_t fail;        /* an engine call answers an error (effect not applied) */
	uint32_t rfail;       /* the same for recovery's blocking calls */
	uint32_t lost;        /* an engine call's effect applies but its answer is lost */
	uint32_t disk;        /* a transcript write takes only part of its bytes */
	uint32_t busy;        /* SIM_RUNTIME=docker: every engine connection is in use at begin */
	uint32_t chaos;       /* container die/start/destroy behind agenticd's back, per step */
	uint32_t restart;     /* agenticd crashes and restarts, per step */
	uint32_t bug;         /* SIM_BUG: a harness-injected defect (positive control) */
};
extern struct sim_knobs knobs;
enum { BUG_NONE, BUG_LEAK_UID, BUG_DUP_BYTES };

/* ---- the fake engine (engine.c): state survives agenticd restarts ---- */
#define E_CTS 96
#define E_NETS 96
struct e_ct {
	bool used;
	char id[RT_ID_BYTES];
	char name[SB_NAME_BYTES];
	char instance[SB_ID_BYTES];
	char uid[16];
	char mnet[SB_NET_BYTES];      /* agentic-managed-network label */
	char netmode[SB_NET_BYTES];
	bool ours;                    /* agentic-daemon=<our owner> */
	bool running;
	int64_t pid;
	int64_t exit_code;
	uint32_t life;                /* which life of its init runs (0: never started) */
	uint8_t tainted;              /* done to it behind agenticd's back: E_TAINT_* */
};
#define E_TAINT_EXEC 1u               /* `docker exec` */
#define E_TAINT_CHANGED 2u            /* `docker update` */
struct e_net {
	bool used;
	char id[RT_ID_BYTES];
	char name[SB_NET_BYTES];
	char subnet[20];
	bool ours;
	bool internal;
	bool stuck;                   /* recovery's remove of it failed: it waits for the next
				       * start (an unused network holds nothing) */
};
extern struct e_ct e_cts[E_CTS];
extern struct e_net e_nets[E_NETS];
void engine_reset(const char *owner);
void engine_recovery_begins(void);
/* A fresh fake runtime for a fresh agenticd: its calls empty, the engine as it is. */
struct runtime *engine_runtime(void);
/* agenticd died: each call in flight took effect or not (a coin each), then all are gone */
void engine_crash(void);
uint32_t engine_inflight(void);
/* behind agenticd's back */
void engine_chaos(void);
void engine_taint(void);              /* a docker exec or update of one of ours */
struct e_ct *engine_ct_by_instance(const char *instance);
struct e_net *engine_net_by_name(const char *name);
struct e_ct *engine_ct_by_pid(int64_t pid);
bool engine_pid_alive(int64_t pid);

/* ---- the fake inits and their Connect streams (init.c) ---- */
void init_reset(void);
void init_started(struct e_ct *ct);   /* a container (re)started: a new life of its init */
void init_died(struct e_ct *ct);
void init_crash(void);                /* agenticd died: every stream is gone */
void init_step(void);                 /* one random init action (connect, send, drop ...) */
void init_loop(void);                 /* what the gRPC server does on a loop turn */
void init_flush_all(void);            /* every live init connects and sends all it holds */
/* transcript check of one sandbox's open run */
void init_check_run(const struct sandbox *sb);
bool init_all_sent(void);
uint32_t init_exec(struct sandbox *sb, int32_t conn);
extern uint64_t sim_bytes_checked, sim_execs, sim_exec_bytes;
void init_clients_reset(void);

/* sim.c */
extern bool sim_crashing;
extern volatile bool in_harness;
extern uint64_t sim_step;
extern char sim_owner[17];
void pidfd_register(int fd, int64_t pid);
void sim_rmtree(const char *path);

#endif
